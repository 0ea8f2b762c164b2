//! Formatting shared by all renderers: binary units, and strings from
//! input made safe to print.

use std::borrow::Cow;

/// Unicode bidirectional controls (U+202A–U+202E, U+2066–U+2069) reorder
/// what a terminal shows ("Trojan Source"); shown escaped like control
/// characters.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Must not reach a terminal raw: C0 and C1 control characters (ESC starts
/// escape sequences, BEL rings, CR and BS overwrite, 0x9b is an 8-bit CSI)
/// and bidi overrides.
fn is_unsafe(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

fn escape(s: &str, keep_newlines: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| is_unsafe(c) && !(keep_newlines && c == '\n')) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' if keep_newlines => out.push('\n'),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x80 && c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_unsafe(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A string taken from input (a model or file name, a catalogue entry, a
/// config key, a line quoted from a log), safe to print on one line: every
/// control character and bidi override is shown escaped (`\x1b`, `\x07`,
/// `\n`, `\t`, `\u{202e}`), everything else as it is. Every text renderer
/// passes input strings through it (issue 15: terminal injection); JSON
/// keeps the raw string (serde escapes it).
pub fn shown(s: &str) -> Cow<'_, str> {
    escape(s, false)
}

/// Like [`shown`], keeping line breaks: for a block of lines (a quoted
/// excerpt, a whole rendered report or error message). `vramfit`'s main
/// passes everything it writes to stdout and stderr through it, so a
/// string no renderer escaped still cannot reach the terminal raw.
pub fn shown_lines(s: &str) -> Cow<'_, str> {
    escape(s, true)
}

/// `12.55 GiB`, `512.0 MiB`, `812 B` ([`vramfit_core::units::fmt_bytes`]).
pub fn bytes(b: u64) -> String {
    vramfit_core::units::fmt_bytes(b)
}

/// Signed byte difference, e.g. `-2.31 GiB`.
pub fn signed_bytes(b: i128) -> String {
    if b < 0 {
        format!("-{}", bytes(b.unsigned_abs().min(u64::MAX as u128) as u64))
    } else {
        bytes(b.min(u64::MAX as i128) as u64)
    }
}

/// Integer with thousands separators: `6,738,415,616`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `6.74B`, `124.4M` parameter counts.
pub fn params(n: u64) -> String {
    let f = n as f64;
    if f >= 1e12 {
        format!("{:.2}T", f / 1e12)
    } else if f >= 1e9 {
        format!("{:.2}B", f / 1e9)
    } else if f >= 1e6 {
        format!("{:.1}M", f / 1e6)
    } else {
        thousands(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramfit_core::units::{GIB, MIB};

    #[test]
    fn formats() {
        assert_eq!(bytes(13_476_831_232), "12.55 GiB");
        assert_eq!(bytes(500 * MIB), "500.0 MiB");
        assert_eq!(thousands(6_738_415_616), "6,738,415,616");
        assert_eq!(params(6_738_415_616), "6.74B");
        assert_eq!(signed_bytes(-(GIB as i128)), "-1.00 GiB");
    }

    #[test]
    fn input_strings_are_shown_with_controls_escaped() {
        assert!(matches!(shown("Llama-3.1-8B Instruct — 中文"), Cow::Borrowed(_)));
        assert_eq!(shown("evil\x1b[2J\x1b]0;pwned\x07name"), "evil\\x1b[2J\\x1b]0;pwned\\x07name");
        assert_eq!(shown("a\r\nb\tc\0"), "a\\r\\nb\\tc\\x00");
        assert_eq!(shown("\u{9b}31m \u{202e}txt.exe \x7f"), "\\u{9b}31m \\u{202e}txt.exe \\x7f");
        assert_eq!(shown_lines("line 1\nline \x1b[31m2\n"), "line 1\nline \\x1b[31m2\n");
        assert_eq!(shown("back\\slash"), "back\\slash");
    }

    proptest::proptest! {
        #[test]
        fn nothing_unsafe_survives(s in ".{0,64}", raw in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let lossy = String::from_utf8_lossy(&raw);
            for input in [s.as_str(), lossy.as_ref()] {
                let one = shown(input);
                proptest::prop_assert!(!one.chars().any(is_unsafe), "{one:?}");
                let many = shown_lines(input);
                proptest::prop_assert!(!many.chars().any(|c| is_unsafe(c) && c != '\n'), "{many:?}");
                // printable text is left alone
                if !input.chars().any(is_unsafe) {
                    proptest::prop_assert_eq!(one.as_ref(), input);
                }
            }
        }
    }
}
