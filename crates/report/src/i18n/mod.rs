//! Languages of human text: English, and Simplified Chinese from a
//! catalogue of sentence templates (`zh.txt`), the one source of truth for
//! the CLI's `--lang zh` and the local web page.
//!
//! Renderers write English; [`localize_text`] turns a whole text report
//! into Chinese line by line (table cells one by one, the table redrawn to
//! the Chinese widths), and [`localize_json`] turns the sentences inside a
//! JSON report (for the page; `--json` itself is never translated). A
//! sentence is matched *exactly* against an English template whose holes
//! are typed (bytes, number, word, verbatim text, nested sentence); a
//! sentence no template matches stays English and is returned as
//! missing, which the completeness test (`crates/cli/tests/i18n.rs`) turns
//! into a failure that says how to add it.
//!
//! What it will not do: guess. No fuzzy matching, no word-by-word
//! translation; numbers, units, flags, model and GPU names pass unchanged.

mod template;

use std::sync::OnceLock;
use template::{fill, Hole, Template};

pub use template::CatalogueError;

/// The language of human text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lang {
    #[default]
    En,
    /// Simplified Chinese
    Zh,
}

impl Lang {
    /// `en` or `zh`.
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Zh => "zh",
        }
    }

    /// The English or the Chinese text.
    pub fn pick(self, en: &'static str, zh: &'static str) -> &'static str {
        match self {
            Lang::En => en,
            Lang::Zh => zh,
        }
    }

    /// `en`/`zh`, or a locale as `LANG` spells it (`zh_CN.UTF-8`, `zh-TW`, `C`, `en_US`):
    /// Chinese for every `zh…`, else English.
    pub fn from_locale(s: &str) -> Lang {
        if s.trim().to_ascii_lowercase().starts_with("zh") {
            Lang::Zh
        } else {
            Lang::En
        }
    }
}

/// The Chinese catalogue: `en:`/`zh:` pairs and `keep` words (see the file's head).
const ZH: &str = include_str!("zh.txt");

struct Catalogue {
    templates: Vec<Template>,
    keep: Vec<String>,
}

/// Reads a catalogue text; every error names its line.
fn parse(text: &str) -> Result<Catalogue, Vec<CatalogueError>> {
    let mut templates = Vec::new();
    let mut keep = Vec::new();
    let mut errors = Vec::new();
    let mut pending: Option<(usize, &str)> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.trim_end();
        if l.trim().is_empty() || l.starts_with('#') {
            continue;
        }
        if let Some(words) = l.strip_prefix("keep ") {
            keep.extend(words.split_whitespace().map(str::to_string));
        } else if let Some(en) = l.strip_prefix("en: ") {
            if let Some((at, _)) = pending {
                errors.push(CatalogueError { line: at, message: "an `en:` line without its `zh:` line".into() });
            }
            pending = Some((line, en));
        } else if let Some(zh) = l.strip_prefix("zh: ") {
            match pending.take() {
                Some((at, en)) => match Template::new(en, zh) {
                    Ok(t) => templates.push(t),
                    Err(message) => errors.push(CatalogueError { line: at, message }),
                },
                None => {
                    errors.push(CatalogueError { line, message: "a `zh:` line without an `en:` line before it".into() })
                }
            }
        } else {
            errors.push(CatalogueError {
                line,
                message: format!("expected `en: `, `zh: `, `keep ` or `#`, found {l:?}"),
            });
        }
    }
    if let Some((at, _)) = pending {
        errors.push(CatalogueError { line: at, message: "an `en:` line without its `zh:` line".into() });
    }
    let mut seen = std::collections::HashSet::new();
    for t in &templates {
        if !seen.insert(t.en.as_str()) {
            errors.push(CatalogueError { line: 0, message: format!("{:?} is in the catalogue twice", t.en) });
        }
    }
    if errors.is_empty() {
        Ok(Catalogue { templates, keep })
    } else {
        Err(errors)
    }
}

/// The embedded catalogue's errors (none: a unit test reads it).
pub fn catalogue_errors() -> Vec<CatalogueError> {
    parse(ZH).err().unwrap_or_default()
}

fn catalogue() -> &'static Catalogue {
    static C: OnceLock<Catalogue> = OnceLock::new();
    // a broken catalogue is caught by `catalogue_errors`' test; at run time it translates nothing
    C.get_or_init(|| parse(ZH).unwrap_or(Catalogue { templates: Vec::new(), keep: Vec::new() }))
}

/// A sentence the catalogue has no template for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untranslated(pub String);

impl std::fmt::Display for Untranslated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no Chinese for {:?}", self.0)
    }
}

/// Words of English prose in `s`: ASCII letters only, lower case or capitalised,
/// outside `backticks`, not a `keep` word. A flag, a name with digits or
/// dashes, an ACRONYM or a unit is not prose.
fn english_words<'a>(s: &'a str, keep: &[String]) -> Vec<&'a str> {
    let mut out = Vec::new();
    for (i, chunk) in s.split('`').enumerate() {
        if i % 2 == 1 {
            continue;
        }
        for tok in chunk.split_whitespace() {
            let w = tok.trim_matches(|c: char| ",.;:()[]{}'\"!?—=/".contains(c));
            let mut cs = w.chars();
            let prose = w.len() >= 2
                && w.chars().all(|c| c.is_ascii_alphabetic())
                && cs.next().is_some_and(|c| c.is_ascii_alphabetic())
                && cs.all(|c| c.is_ascii_lowercase());
            if prose && !keep.iter().any(|k| k == w) {
                out.push(w);
            }
        }
    }
    out
}

/// Whether `s` holds English prose to translate (a number, a name or a command does not).
pub fn needs_translation(s: &str) -> bool {
    let t = s.trim();
    // a command line (not a report's title such as `vramfit plan: …`)
    let title = t.split_whitespace().nth(1).is_some_and(|w| w.ends_with(':'));
    if !title && ["vramfit ", "$ ", "llama-server ", "export "].iter().any(|p| t.starts_with(p)) {
        return false;
    }
    // a launcher's name begins a command (`deepspeed --num_gpus 4 train.py`,
    // `accelerate launch …`) or a sentence about it (`deepspeed cannot launch …`):
    // a command when a flag, a file or `launch` follows
    for p in ["python ", "torchrun ", "accelerate ", "deepspeed "] {
        if let Some(rest) = t.strip_prefix(p) {
            let next = rest.split_whitespace().next().unwrap_or("");
            if next.starts_with('-') || next.contains(['.', '/', '=']) || next == "launch" {
                return false;
            }
        }
    }
    !english_words(t, &catalogue().keep).is_empty()
}

/// `s` in `lang`: English as it is; Chinese from the catalogue's most
/// specific template that matches exactly, else [`Untranslated`].
pub fn translate(lang: Lang, s: &str) -> Result<String, Untranslated> {
    if lang == Lang::En {
        return Ok(s.to_string());
    }
    if !needs_translation(s) {
        // an identifier the catalogue names as a whole (`kv_cache`), else as it is
        let exact = catalogue().templates.iter().find(|t| t.parts.len() == 1 && t.en == s);
        return Ok(exact.map_or_else(|| s.to_string(), |t| fill(&t.zh, &[])));
    }
    let ok = |x: &str| translate(Lang::Zh, x).is_ok();
    let mut best: Option<(&Template, Vec<(Hole, &str)>)> = None;
    for t in &catalogue().templates {
        if best.as_ref().is_some_and(|(b, _)| b.literal_len >= t.literal_len) {
            continue;
        }
        if let Some(c) = t.captures(s, &ok) {
            best = Some((t, c));
        }
    }
    if let Some((t, caps)) = best {
        let holes: Vec<String> = caps
            .into_iter()
            .map(|(h, x)| match h {
                Hole::Sentence => translate(Lang::Zh, x).unwrap_or_else(|_| x.to_string()),
                _ => x.to_string(),
            })
            .collect();
        return Ok(fill(&t.zh, &holes));
    }
    // sentences joined by "; ", then lists joined by " · " or ", ", translate one by one (all or nothing)
    for (sep, zh) in [("; ", "；"), (" · ", " · "), (" → ", " → "), (", ", "，")] {
        if s.contains(sep) {
            let parts: Result<Vec<String>, _> = s.split(sep).map(|p| translate(lang, p)).collect();
            if let Ok(parts) = parts {
                return Ok(parts.join(zh));
            }
        }
    }
    Err(Untranslated(s.to_string()))
}

/// A text report in another language, and the sentences that stayed English.
#[derive(Debug, Clone, Default)]
pub struct Localized {
    pub text: String,
    pub missing: Vec<String>,
}

fn is_table_line(l: &str) -> bool {
    l.trim_start().starts_with(['│', '┌', '├', '╞', '└'])
}

/// `text` (a report rendered without a width: see the CLI's `--lang`) in
/// `lang`: each line translated, a `- ` item keeping its bullet and every
/// line its indent; each table cell translated and the table redrawn.
pub fn localize_text(text: &str, lang: Lang) -> Localized {
    localize_text_within(text, lang, None)
}

/// [`localize_text`] with each redrawn table fitted to `width` columns
/// (None: natural width): the widest columns narrowed in turn and their
/// cells wrapped, as the English renderer wraps its own (issue 24: no
/// line over the terminal's width, in either language).
pub fn localize_text_within(text: &str, lang: Lang, width: Option<usize>) -> Localized {
    if lang == Lang::En {
        return Localized { text: text.to_string(), missing: Vec::new() };
    }
    let mut out = Localized::default();
    let lines: Vec<&str> = text.split('\n').collect();
    let mut i = 0;
    while i < lines.len() {
        if is_table_line(lines[i]) {
            let start = i;
            while i < lines.len() && is_table_line(lines[i]) {
                i += 1;
            }
            let table = localize_table(&lines[start..i], lang, &mut out.missing, width);
            for l in table {
                out.text.push_str(&l);
                out.text.push('\n');
            }
            continue;
        }
        out.text.push_str(&localize_line(lines[i], lang, &mut out.missing));
        i += 1;
        if i < lines.len() {
            out.text.push('\n');
        }
    }
    out
}

fn localize_line(line: &str, lang: Lang, missing: &mut Vec<String>) -> String {
    let body = line.trim_start_matches(' ');
    let indent = &line[..line.len() - body.len()];
    let (bullet, body) = match body.strip_prefix("- ") {
        Some(b) => ("- ", b),
        None => ("", body),
    };
    // a line of aligned cells whose first cell is an identifier (`optimizer_states  50.21 GiB`)
    // holds no prose as a whole, yet its cells may have Chinese names: cell by cell
    let cells = body.contains("  ") && !needs_translation(body);
    if !cells {
        if let Ok(t) = translate(lang, body) {
            return format!("{indent}{bullet}{t}");
        }
    }
    // aligned columns (two or more spaces apart) translate one by one, each
    // padded to the English cell's width so the next column stays where it was
    // (a wider translation takes from the gap, leaving at least two spaces)
    let mut out = format!("{indent}{bullet}");
    let mut debt = 0usize;
    let mut rest = body;
    while !rest.is_empty() {
        let (cell, gap) = match rest.find("  ") {
            Some(i) => {
                let after = rest[i..].trim_start_matches(' ');
                (&rest[..i], &rest[i..rest.len() - after.len()])
            }
            None => (rest, ""),
        };
        let t = match translate(lang, cell) {
            Ok(t) => t,
            Err(Untranslated(s)) => {
                missing.push(s);
                cell.to_string()
            }
        };
        out.push_str(&t);
        if !gap.is_empty() {
            use crate::format::display_width;
            // columns owed: the translation's extra width plus what earlier cells could not repay
            let want = display_width(cell) + gap.len();
            let have = display_width(&t) + debt;
            let pad = want.saturating_sub(have).max(2);
            debt = (have + pad).saturating_sub(want);
            out.push_str(&" ".repeat(pad));
        }
        rest = &rest[cell.len() + gap.len()..];
    }
    out
}

/// A drawn table translated cell by cell, its columns re-measured.
fn localize_table(lines: &[&str], lang: Lang, missing: &mut Vec<String>, width: Option<usize>) -> Vec<String> {
    use crate::format::display_width;
    // column boundaries: where the top border's box characters are not its fill
    let first: Vec<char> = lines[0].chars().collect();
    let fill = first.get(1).copied().unwrap_or('─');
    let bounds: Vec<usize> = first.iter().enumerate().filter(|(_, c)| **c != fill).map(|(i, _)| i).collect();
    if bounds.len() < 2 || lines.iter().any(|l| l.chars().count() != first.len()) {
        // not a grid this can redraw (cells of other widths): lines as they are
        return lines.iter().map(|l| l.to_string()).collect();
    }
    // per line: boundary characters and the cells between them
    struct Row {
        marks: Vec<char>,
        cells: Vec<Cell>,
    }
    enum Cell {
        Fill(char),
        Text { text: String, right: bool },
    }
    let mut rows = Vec::new();
    for l in lines {
        let cs: Vec<char> = l.chars().collect();
        let border = !l.trim_start().starts_with('│');
        let marks = bounds.iter().map(|&b| cs[b]).collect();
        let mut cells = Vec::new();
        for w in bounds.windows(2) {
            let seg: String = cs[w[0] + 1..w[1]].iter().collect();
            if border {
                cells.push(Cell::Fill(seg.chars().next().unwrap_or(fill)));
            } else {
                let lead = seg.len() - seg.trim_start().len();
                let trail = seg.len() - seg.trim_end().len();
                let text = seg.trim();
                let text = match translate(lang, text) {
                    Ok(t) => t,
                    Err(Untranslated(s)) => {
                        missing.push(s);
                        text.to_string()
                    }
                };
                cells.push(Cell::Text { right: lead > 1 && trail <= 1, text });
            }
        }
        rows.push(Row { marks, cells });
    }
    let cols = bounds.len() - 1;
    let mut widths = vec![0usize; cols];
    for r in &rows {
        for (c, cell) in r.cells.iter().enumerate() {
            if let Cell::Text { text, .. } = cell {
                widths[c] = widths[c].max(display_width(text) + 2);
            }
        }
    }
    if let Some(w) = width {
        narrow_columns(&mut widths, w);
    }
    let mut out = Vec::new();
    for r in &rows {
        // each cell's lines at its column's width; the row is as tall as its tallest cell
        let wrapped: Vec<Vec<String>> = r
            .cells
            .iter()
            .enumerate()
            .map(|(c, cell)| match cell {
                Cell::Fill(_) => Vec::new(),
                Cell::Text { text, .. } => wrap_cell(text, widths[c].saturating_sub(2).max(1)),
            })
            .collect();
        let height = wrapped.iter().map(Vec::len).max().unwrap_or(0).max(1);
        for line in 0..height {
            let mut s = String::new();
            for (c, cell) in r.cells.iter().enumerate() {
                s.push(r.marks[c]);
                match cell {
                    Cell::Fill(f) => s.extend(std::iter::repeat_n(*f, widths[c])),
                    Cell::Text { right, .. } => {
                        let text = wrapped[c].get(line).map(String::as_str).unwrap_or("");
                        let pad = " ".repeat(widths[c].saturating_sub(2 + display_width(text)));
                        if *right {
                            s.push_str(&format!(" {pad}{text} "));
                        } else {
                            s.push_str(&format!(" {text}{pad} "));
                        }
                    }
                }
            }
            s.push(r.marks[cols]);
            out.push(s);
        }
    }
    out
}

/// Narrowest a column is made (its text and the two spaces beside it).
const MIN_COLUMN: usize = 8;

/// `widths` (each column's text + 2) narrowed, the widest first, one column
/// at a time, until the table (with its cols + 1 borders) fits `width` or
/// every column is at [`MIN_COLUMN`].
fn narrow_columns(widths: &mut [usize], width: usize) {
    let total = |w: &[usize]| w.iter().sum::<usize>() + w.len() + 1;
    while total(widths) > width {
        let Some((i, &w)) = widths.iter().enumerate().max_by_key(|(_, w)| **w) else { return };
        if w <= MIN_COLUMN {
            return;
        }
        widths[i] = w - 1;
    }
}

/// `text` in lines of at most `width` columns: broken at spaces, after a
/// Chinese character or punctuation, after a dash or slash (`50,000–`,
/// `cn-guide/`), and inside a word only when the word alone is wider than
/// the line.
fn wrap_cell(text: &str, width: usize) -> Vec<String> {
    use crate::format::display_width;
    if display_width(text) <= width {
        return vec![text.to_string()];
    }
    // pieces: runs of non-space ASCII-width characters, single wide characters, spaces
    let mut pieces: Vec<String> = Vec::new();
    for ch in text.chars() {
        let wide = unicode_width::UnicodeWidthChar::width(ch).unwrap_or(0) > 1;
        match pieces.last_mut() {
            // a word goes on up to a space, a wide character, or just after a dash or slash
            Some(p)
                if !wide
                    && ch != ' '
                    && !p.ends_with([' ', '–', '/'])
                    && !p.chars().any(|c| unicode_width::UnicodeWidthChar::width(c).unwrap_or(0) > 1) =>
            {
                p.push(ch)
            }
            _ => pieces.push(ch.to_string()),
        }
    }
    let mut lines = vec![String::new()];
    for piece in pieces {
        let line = lines.last_mut().expect("one line at least");
        if piece == " " {
            if !line.is_empty() && display_width(line) < width {
                line.push(' ');
            }
            continue;
        }
        if display_width(line) + display_width(&piece) > width && !line.trim().is_empty() {
            let done = line.trim_end().to_string();
            *line = done;
            lines.push(String::new());
        }
        // a piece wider than a whole line is cut where the line ends
        let mut rest = piece.as_str();
        loop {
            let line = lines.last_mut().expect("one line at least");
            let room = width.saturating_sub(display_width(line));
            if display_width(rest) <= room {
                line.push_str(rest);
                break;
            }
            let mut cut = 0;
            let mut used = 0;
            for (i, c) in rest.char_indices() {
                let cw = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
                if used + cw > room {
                    break;
                }
                used += cw;
                cut = i + c.len_utf8();
            }
            if cut == 0 && line.is_empty() {
                // not even one character fits: take one anyway
                cut = rest.chars().next().map_or(rest.len(), char::len_utf8);
            }
            line.push_str(&rest[..cut]);
            rest = &rest[cut..];
            if rest.is_empty() {
                break;
            }
            lines.push(String::new());
        }
    }
    lines.into_iter().map(|l| l.trim_end().to_string()).filter(|l| !l.is_empty()).collect()
}

/// The sentences of a JSON report in `lang`, in place (the web page asks
/// for them; `--json` is never translated): every string holding at least
/// two words of English prose. Returns the sentences that stayed English.
/// A one-word string (`"fits"`, an enum) is a value, never translated;
/// nor are `explain` (formulas and their terms) and `source` fields.
pub fn localize_json(v: &mut serde_json::Value, lang: Lang) -> Vec<String> {
    let mut missing = Vec::new();
    if lang != Lang::En {
        walk(v, lang, &mut missing);
    }
    missing
}

fn walk(v: &mut serde_json::Value, lang: Lang, missing: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) if english_words(s, &catalogue().keep).len() >= 2 && needs_translation(s) => {
            match translate(lang, s) {
                Ok(t) => *s = t,
                Err(Untranslated(x)) => missing.push(x),
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(|x| walk(x, lang, missing)),
        // formulas and provenance stay as written (the CLI's --explain is English too)
        serde_json::Value::Object(o) => o
            .iter_mut()
            .filter(|(k, _)| !(k.as_str() == "explain" || k.as_str() == "source" || k.ends_with("_source")))
            .for_each(|(_, x)| walk(x, lang, missing)),
        _ => {}
    }
}

#[cfg(test)]
mod tests;
