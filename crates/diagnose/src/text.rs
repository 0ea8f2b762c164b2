//! Small text helpers shared by the message scanners: char-boundary-safe
//! slicing, whitespace folding, line numbers by offset, and the cache for
//! the built-in regexes.

use regex::Regex;
use std::sync::OnceLock;

/// The built-in pattern `pat`, compiled once. The patterns are literals in
/// this crate, exercised by every test run: a failure here is a programming
/// error, never input-dependent.
pub(crate) fn re(cell: &'static OnceLock<Regex>, pat: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pat).unwrap_or_else(|e| panic!("bad built-in regex {pat}: {e}")))
}

/// Largest index ≤ i on a char boundary.
pub(crate) fn floor_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Collapse whitespace runs to one space (messages wrapped over lines).
pub(crate) fn squash(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            if !space {
                out.push(' ');
            }
            space = true;
        } else {
            out.push(c);
            space = false;
        }
    }
    out
}

/// Line numbers by byte offset (1-based).
pub(crate) struct LineIndex {
    newlines: Vec<usize>,
}

impl LineIndex {
    pub(crate) fn new(text: &str) -> Self {
        // match_indices runs std's (optimised) memchr even in debug builds
        LineIndex { newlines: text.match_indices('\n').map(|(i, _)| i).collect() }
    }
    pub(crate) fn line(&self, offset: usize) -> usize {
        self.newlines.partition_point(|&n| n < offset) + 1
    }
    pub(crate) fn line_start(&self, offset: usize) -> usize {
        let i = self.newlines.partition_point(|&n| n < offset);
        if i == 0 {
            0
        } else {
            self.newlines[i - 1] + 1
        }
    }
}
