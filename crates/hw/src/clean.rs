//! Text taken from input files, made safe to echo and to parse.
//!
//! - [`escape_controls`]: every string vramfit echoes from an input (a
//!   product name, a bus id, a topo label, the text quoted in an error) goes
//!   through it, so a control character (ESC, BEL, NUL, CR …) or a
//!   bidirectional override is shown escaped (`\x1b`, `\u{202e}`) and never
//!   reaches the terminal raw (issue 15: terminal injection).
//! - [`strip_terminal_codes`]: current `nvidia-smi topo -m` underlines its
//!   header row with ANSI escapes (`\t\x1b[4mGPU0 … GPU NUMA ID\x1b[0m`,
//!   seen in the captures of tests/fixtures/SOURCES.md), and files saved on
//!   Windows end lines with CRLF. Both are layout, not content: CSI
//!   sequences and `\r` before `\n` are removed before parsing; any other
//!   control character stays, for the parser to refuse by name.

/// Unicode bidirectional controls (U+202A–U+202E, U+2066–U+2069) reorder
/// what a terminal shows; they are escaped like control characters.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Whether `c` must not be echoed raw.
pub fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// `s` with control characters and bidi overrides shown escaped
/// (`\x1b`, `\t`, `\u{202e}`); a backslash stays a backslash.
pub fn escape_controls(s: &str) -> String {
    if !s.chars().any(is_unsafe) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 && c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `s` trimmed and escaped, or `None` when empty.
pub fn value(s: &str) -> Option<String> {
    let t = s.trim();
    (!t.is_empty()).then(|| escape_controls(t))
}

/// `text` without ANSI CSI sequences (`ESC [ params final`, e.g. `\x1b[4m`,
/// `\x1b[0m`) and with CRLF / lone-CR line ends made `\n`. An ESC that does
/// not start a complete CSI sequence is kept (the parser then refuses it,
/// showing it escaped). Linear in the input.
pub fn strip_terminal_codes(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut start = 0;
    while i < b.len() {
        match b[i] {
            0x1b if b.get(i + 1) == Some(&b'[') => {
                // parameter and intermediate bytes 0x20-0x3f, then one final byte 0x40-0x7e (ECMA-48 §5.4)
                let mut j = i + 2;
                while j < b.len() && (0x20..=0x3f).contains(&b[j]) {
                    j += 1;
                }
                if j < b.len() && (0x40..=0x7e).contains(&b[j]) {
                    out.push_str(&text[start..i]);
                    i = j + 1;
                    start = i;
                } else {
                    i += 1;
                }
            }
            b'\r' => {
                out.push_str(&text[start..i]);
                if b.get(i + 1) != Some(&b'\n') {
                    out.push('\n');
                }
                i += 1;
                start = i;
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[start..]);
    out
}

/// `text` with CRLF and lone-CR line ends made `\n` (a file saved on
/// Windows); everything else, terminal codes included, is kept (to be
/// shown escaped).
pub fn normalize_newlines(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_string();
    }
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// The first unsafe character of `line` other than a tab, escaped, if any.
pub fn first_control(line: &str) -> Option<String> {
    line.chars().find(|&c| c != '\t' && is_unsafe(c)).map(|c| escape_controls(&c.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_shown_escaped() {
        assert_eq!(escape_controls("NVIDIA A100"), "NVIDIA A100");
        assert_eq!(escape_controls("A100\x1b[31mred\x07"), "A100\\x1b[31mred\\x07");
        assert_eq!(escape_controls("a\u{202e}b\u{85}"), "a\\u{202e}b\\u{85}");
        assert_eq!(escape_controls("tab\there"), "tab\\there");
    }

    #[test]
    fn csi_sequences_and_cr_are_removed_other_escapes_kept() {
        let header = "\t\x1b[4mGPU0\tGPU1\tCPU Affinity\x1b[0m\r\nGPU0\t X \tNV18\r\n";
        assert_eq!(strip_terminal_codes(header), "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV18\n");
        // an ESC inside a label is not a CSI sequence: kept for the parser to refuse
        assert_eq!(strip_terminal_codes("GP\x1bU1"), "GP\x1bU1");
        // a cut sequence at the end is kept too
        assert_eq!(strip_terminal_codes("GPU0\x1b[4"), "GPU0\x1b[4");
        assert_eq!(strip_terminal_codes("a\rb"), "a\nb");
        assert_eq!(strip_terminal_codes("ü\x1b[1mü"), "üü");
    }

    proptest::proptest! {
        #[test]
        fn strip_never_panics_and_never_grows(s in "[\\x00-\\x7f\u{e9}\u{202e}]{0,64}") {
            let t = strip_terminal_codes(&s);
            proptest::prop_assert!(t.len() <= s.len());
            let e = escape_controls(&s);
            proptest::prop_assert!(!e.chars().any(is_unsafe));
        }
    }
}
