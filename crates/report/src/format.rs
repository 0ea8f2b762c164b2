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

/// The width text output is fitted to when nothing says otherwise (no
/// `COLUMNS`, stdout not a terminal).
pub const DEFAULT_WIDTH: usize = 100;

/// How wide a text report may be: `Some(columns)`, or `None` for no limit
/// (`--wide`). The CLI decides it (`COLUMNS`, the terminal, else
/// [`DEFAULT_WIDTH`]); renderers only obey it.
pub type Width = Option<usize>;

/// Columns a string takes on a terminal (wide East Asian characters: 2).
pub fn display_width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// A line drawn by a table (its borders), which [`fit_lines`] leaves as it is.
fn is_table_line(line: &str) -> bool {
    line.trim_start().starts_with(['│', '┌', '├', '╞', '└', '+', '|'])
}

/// Every line of `text` wider than `width` word-wrapped, its continuation
/// lines indented two columns past the line's own indent (for a `- ` list
/// item: under its text). Table lines are left alone (fit tables with
/// [`fit_table`]); a word longer than a whole line is cut.
pub fn fit_lines(text: &str, width: Width) -> String {
    let Some(width) = width else { return text.to_string() };
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if display_width(line) <= width || is_table_line(line) {
            out.push_str(line);
        } else {
            wrap_line(&mut out, line, width);
        }
    }
    out
}

fn wrap_line(out: &mut String, line: &str, width: usize) {
    let body = line.trim_start_matches(' ');
    let indent = line.len() - body.len();
    let hang = indent + 2;
    // too deep an indent for the width: no hanging indent
    let hang = if hang + 20 > width { 0 } else { hang };
    let mut col = 0;
    let mut first = true;
    out.push_str(&line[..indent]);
    col += indent;
    for word in unbroken_words(body) {
        let mut word = word;
        loop {
            if first {
                // a line starts with the word, not with the spaces that aligned it
                word = word.trim_start();
            }
            let w = display_width(word);
            if !first && col + 1 + w > width {
                out.push('\n');
                out.push_str(&" ".repeat(hang));
                col = hang;
                first = true;
            }
            let room = width.saturating_sub(col + usize::from(!first)).max(1);
            if w <= room {
                if !first {
                    out.push(' ');
                    col += 1;
                }
                out.push_str(word);
                col += w;
                first = false;
                break;
            }
            if !first {
                // the word does not fit on a line of its own either: start a line and cut it there
                out.push('\n');
                out.push_str(&" ".repeat(hang));
                col = hang;
                first = true;
                continue;
            }
            let cut = cut_at(word, width.saturating_sub(col).max(1));
            out.push_str(&word[..cut]);
            out.push('\n');
            out.push_str(&" ".repeat(hang));
            col = hang;
            word = &word[cut..];
        }
    }
}

/// Units a wrapped line keeps beside their number (`1.00 GiB`, not `1.00` at
/// the end of a line and `GiB` on the next).
const UNITS: &[&str] = &["B", "KiB", "MiB", "GiB", "TiB", "GB", "GB/s", "Gb/s", "TFLOP/s", "h", "days", "%"];

/// The words of a line, a number and the unit after it kept as one word.
fn unbroken_words(body: &str) -> Vec<&str> {
    let mut words: Vec<(usize, &str)> = Vec::new();
    let mut pos = 0;
    for w in body.split(' ') {
        let at = pos;
        pos += w.len() + 1;
        if w.is_empty() {
            continue;
        }
        // the unit is the word up to its punctuation (`GiB),`), or up to the Chinese that follows it (`GiB，所以`)
        let unit = &w[..w.find(|c: char| !(c.is_ascii_alphanumeric() || c == '/' || c == '%')).unwrap_or(w.len())];
        if let Some((start, last)) = words.last_mut() {
            // one space after a word that ends in a digit
            if *start + last.len() + 1 == at && last.ends_with(|c: char| c.is_ascii_digit()) && UNITS.contains(&unit) {
                *last = &body[*start..at + w.len()];
                continue;
            }
        }
        // a run of spaces before it (an aligned column) stays with it
        let from = words.last().map_or(at, |(start, last)| (start + last.len() + 1).min(at));
        words.push((from, &body[from..at + w.len()]));
    }
    words.into_iter().map(|(_, w)| w).collect()
}

/// The byte index where `s`'s first `cols` columns end (at least one character).
fn cut_at(s: &str, cols: usize) -> usize {
    let mut used = 0;
    for (i, c) in s.char_indices() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > cols && i > 0 {
            return i;
        }
        used += w;
    }
    s.len()
}

/// The widest line of a rendered table.
fn table_width(t: &comfy_table::Table) -> usize {
    t.lines().map(|l| display_width(&l)).max().unwrap_or(0)
}

/// Fits a table into `width`: hides columns in `drop_order` (least needed
/// first) until it fits, then wraps the cells of the rest, except those of
/// the columns in `keep_whole` (short numbers that read badly cut). Returns the table
/// and a note naming what was hidden (`(2 columns hidden: tokens/s, price;
/// --wide shows them)`), empty when nothing was.
pub fn fit_table(
    mut t: comfy_table::Table,
    width: Width,
    drop_order: &[usize],
    keep_whole: &[usize],
) -> (String, String) {
    let Some(width) = width else { return (t.to_string(), String::new()) };
    let names: Vec<String> = t.header().map(|h| h.cell_iter().map(|c| c.content()).collect()).unwrap_or_default();
    let mut hidden = Vec::new();
    for &i in drop_order {
        if table_width(&t) <= width {
            break;
        }
        if let Some(c) = t.column_mut(i) {
            c.set_constraint(comfy_table::ColumnConstraint::Hidden);
            hidden.push(names.get(i).cloned().unwrap_or_default());
        }
    }
    if table_width(&t) > width {
        for &i in keep_whole {
            if let Some(c) = t.column_mut(i).filter(|c| !c.is_hidden()) {
                c.set_constraint(comfy_table::ColumnConstraint::ContentWidth);
            }
        }
        t.set_content_arrangement(comfy_table::ContentArrangement::Dynamic);
        t.set_width(width.min(u16::MAX as usize) as u16);
    }
    let note = match hidden.len() {
        0 => String::new(),
        1 => format!("(1 column hidden: {}; --wide shows it)", hidden[0]),
        n => format!("({n} columns hidden: {}; --wide shows them)", hidden.join(", ")),
    };
    (t.to_string(), note)
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

    #[test]
    fn long_lines_wrap_under_a_hanging_indent() {
        let text = "short\n  note: one two three four five six seven eight\n│ a table line that is long │\n";
        let out = fit_lines(text, Some(24));
        assert_eq!(
            out,
            "short\n  note: one two three\n    four five six seven\n    eight\n│ a table line that is long │\n"
        );
        assert_eq!(fit_lines(text, None), text);
        // a word longer than a line is cut, never left over the width
        let out = fit_lines("see /a/very/long/path/that/goes/on/and/on here", Some(12));
        assert!(out.lines().all(|l| display_width(l) <= 12), "{out}");
        assert_eq!(out.replace(['\n', ' '], ""), "see/a/very/long/path/that/goes/on/and/onhere");
    }

    #[test]
    fn numbers_keep_their_units() {
        assert_eq!(
            unbroken_words("needs 1.00 GiB, then 12 h  and 3 apples"),
            ["needs", "1.00 GiB,", "then", "12 h", " and", "3", "apples"]
        );
        assert_eq!(fit_lines("all  6 cases: a b c d e f g h", Some(24)), "all  6 cases: a b c d e\n  f g h");
        let out = fit_lines("a context (1.00 GiB) is small", Some(16));
        assert!(out.contains("(1.00 GiB)"), "{out}");
        // Chinese right after the unit (--lang zh)
        assert_eq!(unbroken_words("多出不到 4.00 GiB，所以"), ["多出不到", "4.00 GiB，所以"]);
        assert_eq!(unbroken_words("带宽 9.5 GB/s）"), ["带宽", "9.5 GB/s）"]);
    }

    #[test]
    fn tables_drop_columns_then_wrap() {
        let mut t = comfy_table::Table::new();
        t.set_header(vec!["name", "detail", "extra"]);
        t.add_row(vec!["a", "a long detail that takes many columns of the table", "something else entirely"]);
        let (full, note) = fit_table(t.clone(), None, &[2], &[]);
        assert!(note.is_empty() && full.contains("extra"));
        let (fit, note) = fit_table(t.clone(), Some(70), &[2], &[]);
        assert!(fit.lines().all(|l| display_width(l) <= 70) && !fit.contains("extra"), "{fit}");
        assert_eq!(note, "(1 column hidden: extra; --wide shows it)");
        let (fit, _) = fit_table(t, Some(40), &[2], &[0]);
        assert!(fit.lines().all(|l| display_width(l) <= 40), "{fit}");
    }

    proptest::proptest! {
        #[test]
        fn wrapped_lines_fit(words in proptest::collection::vec("[a-z×—]{1,30}", 0..40), indent in 0usize..8, width in 30usize..120) {
            let line = format!("{}{}", " ".repeat(indent), words.join(" "));
            let out = fit_lines(&line, Some(width));
            proptest::prop_assert!(out.lines().all(|l| display_width(l) <= width), "{out}");
            let squash = |s: &str| s.split_whitespace().collect::<String>();
            proptest::prop_assert_eq!(squash(&out), squash(&line));
        }
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
