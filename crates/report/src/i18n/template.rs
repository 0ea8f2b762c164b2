//! One catalogue entry: an English sentence template with typed holes and
//! its Chinese rendering, and the exact matcher that fills the holes.
//!
//! Holes in the English side (`{b}` bytes, `{n}` number, `{w}` one word,
//! `{t}` verbatim text, `{s}` a nested sentence) are numbered left to right
//! from 1; the Chinese side places them by number (`{1}`, `{2}`, …). A hole
//! matches only text of its type: no fuzzy guesses.

/// What a hole accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hole {
    /// A size with its binary or decimal unit: `1.25 GiB`, `-512.0 MiB`, `24GB`.
    Bytes,
    /// A number, possibly with a suffix or sign: `8.03B`, `86.1%`, `4,096`, `×1.2`, `0.90`.
    Number,
    /// One token without spaces: a name, a flag, an identifier, a path.
    Word,
    /// Any non-empty text, kept verbatim (a GPU name, a quoted input, a list of names).
    Text,
    /// A sentence of its own: translated through the catalogue too.
    Sentence,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Part {
    Lit(String),
    Hole(Hole),
}

/// A Chinese template piece: literal text, or hole number `n` (0-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ZhPart {
    Lit(String),
    Hole(usize),
}

#[derive(Debug, Clone)]
pub(crate) struct Template {
    pub en: String,
    pub parts: Vec<Part>,
    pub zh: Vec<ZhPart>,
    /// Characters of literal text: the most specific matching entry wins.
    pub literal_len: usize,
}

/// What a catalogue line got wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogueError {
    pub line: usize,
    pub message: String,
}

fn hole_of(name: &str) -> Option<Hole> {
    Some(match name {
        "b" => Hole::Bytes,
        "n" => Hole::Number,
        "w" => Hole::Word,
        "t" => Hole::Text,
        "s" => Hole::Sentence,
        _ => return None,
    })
}

/// Splits `{x}` markers out of `s`; `{{`/`}}` are never needed (no sentence has braces
/// around a hole name), so a brace that is not a known marker stays literal.
fn split_en(s: &str) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        let hole = after.find('}').and_then(|j| hole_of(&after[..j]).map(|h| (h, j)));
        match hole {
            Some((h, j)) => {
                lit.push_str(&rest[..i]);
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                if matches!(parts.last(), Some(Part::Hole(_))) {
                    return Err(
                        "two holes side by side cannot be matched exactly: put literal text between them".into()
                    );
                }
                parts.push(Part::Hole(h));
                rest = &after[j + 1..];
            }
            None => {
                lit.push_str(&rest[..=i]);
                rest = after;
            }
        }
    }
    lit.push_str(rest);
    if !lit.is_empty() {
        parts.push(Part::Lit(lit));
    }
    Ok(parts)
}

fn split_zh(s: &str, holes: usize) -> Result<Vec<ZhPart>, String> {
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut rest = s;
    let mut used = vec![false; holes];
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        let n = after.find('}').and_then(|j| after[..j].parse::<usize>().ok().map(|n| (n, j)));
        match n {
            Some((n, j)) => {
                if n == 0 || n > holes {
                    return Err(format!("{{{n}}}: the English side has {holes} hole(s), numbered from 1"));
                }
                used[n - 1] = true;
                lit.push_str(&rest[..i]);
                if !lit.is_empty() {
                    parts.push(ZhPart::Lit(std::mem::take(&mut lit)));
                }
                parts.push(ZhPart::Hole(n - 1));
                rest = &after[j + 1..];
            }
            None => {
                lit.push_str(&rest[..=i]);
                rest = after;
            }
        }
    }
    lit.push_str(rest);
    if !lit.is_empty() {
        parts.push(ZhPart::Lit(lit));
    }
    if let Some(n) = used.iter().position(|u| !u) {
        return Err(format!("hole {{{}}} of the English side is not placed in the Chinese", n + 1));
    }
    Ok(parts)
}

impl Template {
    pub(crate) fn new(en: &str, zh: &str) -> Result<Template, String> {
        let parts = split_en(en)?;
        let holes = parts.iter().filter(|p| matches!(p, Part::Hole(_))).count();
        let zh = split_zh(zh, holes)?;
        let literal_len = parts
            .iter()
            .map(|p| match p {
                Part::Lit(l) => l.chars().count(),
                Part::Hole(_) => 0,
            })
            .sum();
        Ok(Template { en: en.to_string(), parts, zh, literal_len })
    }

    /// The holes' texts when `s` is exactly this template, else `None`.
    pub(crate) fn captures<'a>(&self, s: &'a str, sentence_ok: &dyn Fn(&str) -> bool) -> Option<Vec<(Hole, &'a str)>> {
        let mut caps = Vec::new();
        if match_parts(&self.parts, s, &mut caps, sentence_ok) {
            Some(caps)
        } else {
            None
        }
    }
}

fn match_parts<'a>(
    parts: &[Part],
    s: &'a str,
    caps: &mut Vec<(Hole, &'a str)>,
    sentence_ok: &dyn Fn(&str) -> bool,
) -> bool {
    match parts.split_first() {
        None => s.is_empty(),
        Some((Part::Lit(l), rest)) => {
            s.strip_prefix(l.as_str()).is_some_and(|r| match_parts(rest, r, caps, sentence_ok))
        }
        Some((Part::Hole(h), rest)) => match rest.first() {
            None => {
                if accepts(*h, s, sentence_ok) {
                    caps.push((*h, s));
                    true
                } else {
                    false
                }
            }
            Some(Part::Lit(next)) => {
                // every place the next literal occurs is a candidate end of the hole
                let mut from = 1;
                while from <= s.len() {
                    let Some(i) = s.get(from..).and_then(|t| t.find(next.as_str())).map(|i| i + from) else {
                        return false;
                    };
                    let hole = &s[..i];
                    if accepts(*h, hole, sentence_ok) {
                        let mark = caps.len();
                        caps.push((*h, hole));
                        if match_parts(rest, &s[i..], caps, sentence_ok) {
                            return true;
                        }
                        caps.truncate(mark);
                    }
                    from = i + s[i..].chars().next().map_or(1, char::len_utf8);
                }
                false
            }
            // refused when the catalogue is read
            Some(Part::Hole(_)) => false,
        },
    }
}

const UNITS: &[&str] = &["B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB"];

fn is_number(s: &str) -> bool {
    let body = s.trim_start_matches(['+', '-', '−', '~', '≈', '×', '<', '>', '≤', '≥']);
    body.starts_with(|c: char| c.is_ascii_digit()) && !s.contains(char::is_whitespace)
}

pub(crate) fn accepts(h: Hole, s: &str, sentence_ok: &dyn Fn(&str) -> bool) -> bool {
    if s.is_empty() {
        return false;
    }
    match h {
        Hole::Bytes => {
            let (num, unit) = match s.split_once(' ') {
                Some((n, u)) => (n, u),
                None => match s.find(|c: char| c.is_ascii_alphabetic()) {
                    Some(i) => (&s[..i], &s[i..]),
                    None => return false,
                },
            };
            is_number(num) && UNITS.contains(&unit)
        }
        Hole::Number => is_number(s),
        Hole::Word => !s.contains(char::is_whitespace),
        Hole::Text => s.trim() == s,
        Hole::Sentence => sentence_ok(s),
    }
}

/// Fills the Chinese side with the holes' texts (already rendered).
pub(crate) fn fill(zh: &[ZhPart], holes: &[String]) -> String {
    let mut out = String::new();
    for p in zh {
        match p {
            ZhPart::Lit(l) => out.push_str(l),
            ZhPart::Hole(i) => out.push_str(holes.get(*i).map_or("", String::as_str)),
        }
    }
    out
}
