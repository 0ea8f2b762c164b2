//! Text as people paste it: wrapped at a terminal's or a forum's width,
//! broken in the middle of a word (`memor` / `y`), reflowed over several
//! lines, each line behind a logger's prefix (`[rank0]:`, vLLM's
//! `(EngineCore_DP0 pid=6940)`, a timestamp, a docker-compose service
//! name, a `> ` quote). The message readers do not match a fixed layout:
//! they read a **compact** form of the text, with every whitespace
//! character and every such line prefix removed, so a break anywhere —
//! between words, inside a word, inside a number (`79.1` / `1 GiB`) —
//! reads the same as the unbroken line. Every byte of the compact text
//! maps back to its offset in the original, for line numbers and context.
//!
//! Only the parts of the text near a message's words are compacted
//! ([`regions`]), in chunks of at most [`CHUNK`] bytes that overlap by
//! [`OVERLAP`], so memory stays bounded whatever the input's size. No
//! message the readers know is longer than the overlap once compacted.

use crate::text::{floor_boundary, re};
use regex::Regex;
use std::sync::OnceLock;

/// Largest original span compacted at once.
pub(crate) const CHUNK: usize = 1 << 20;
/// Overlap of consecutive chunks: longer than any message (a PyTorch
/// message with a dozen `Process N` sentences stays under 2 KiB) plus the
/// context a reader looks at after it.
pub(crate) const OVERLAP: usize = 8 << 10;
/// How far before a hit a message may start (a wrapped head broken so
/// that no anchor survives in its first line).
const BACK: usize = 2 << 10;
/// How far after a hit a message may run.
const AHEAD: usize = 8 << 10;

/// Words of every message the readers know: where one of these occurs
/// unbroken, a message may be near. A message wrapped at any width keeps
/// at least one of them whole (each message carries several).
pub(crate) const ANCHORS: [&str; 36] = [
    "out of mem",
    "Out of mem",
    "of memory",
    "OutOfMemory",
    "Tried to",
    "allocat",
    "Allocat",
    "capaci",
    "capacty",
    "reserved",
    "KV cache",
    "memory utilization",
    "memory_utilization",
    "GPU memory",
    "startup",
    "Free memory",
    "less than desired",
    "on device",
    "cudaMalloc",
    "CUDA_ERROR_OUT",
    "EXHAUSTED",
    "ran out of",
    "OOM when",
    "cache flushes",
    "cache blocks",
    "No available",
    "InUse:",
    "buffer of size",
    "max seq",
    "To serve",
    "Exception during",
    "runtime error",
    "error (2)",
    "THCudaCheck",
    "ALLOC_FAILED",
    "MPS backend",
];

/// The compact form of a part of the text, and where each of its bytes
/// came from.
pub(crate) struct Compact {
    pub text: String,
    /// original offset of each byte of `text`
    map: Vec<u32>,
    /// original offset of the part
    base: usize,
}

impl Compact {
    /// Offset in the original text of compact byte `i` (the end maps to
    /// the byte after the last one read).
    pub fn orig(&self, i: usize) -> usize {
        match self.map.get(i) {
            Some(&o) => self.base + o as usize,
            None => self.base + self.map.last().map(|&o| o as usize + 1).unwrap_or(0),
        }
    }
}

/// A line prefix a logger or a paste adds before every line: stripped
/// before compacting, so a message wrapped over prefixed lines reads whole.
fn prefix_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(
        &C,
        concat!(
            // ASCII classes: Unicode \w and \d with counted repetitions compile to megabytes
            r"(?-u)^(?:",
            // torchrun's per-rank prefix
            r"\[rank\d{1,6}\]:",
            // vLLM's process tags: (EngineCore_DP0 pid=6940), (VllmWorker rank=0 pid=12)
            r"|\([A-Za-z_][\w.-]{0,40}(?: rank=\d{1,6})? pid=\d{1,9}\)",
            // docker compose: `service-1  | `
            r"|[A-Za-z0-9_.-]{1,64} {1,8}\| ",
            // a quote, a pytest failure marker
            r"|>+ |E {3}",
            // ISO timestamps, with an optional logger tail `- name - LEVEL -`
            r"|\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2})?\]?(?: - [\w.]{1,40} - [A-Z]{3,8} -)?",
            // vLLM / glog: `ERROR 04-05 01:12:55 [core.py:390]`, `E0214 10:11:12.123456 1234 file.cc:12]`
            r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2}(?: \[[\w./-]{1,80}:\d{1,6}\])?",
            r"|[IWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d{1,9} {1,4}\d{1,9} [\w./-]{1,80}:\d{1,6}\]",
            // journald: `Apr 17 23:09:42 host unit[123]:`
            r"|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} [\w.-]{1,64} [\w.@-]{1,64}\[\d{1,9}\]:",
            r")\s?",
        ),
    )
}

/// Compact `text[start..end]` (char boundaries): whitespace and line
/// prefixes removed.
pub(crate) fn compact(text: &str, start: usize, end: usize) -> Compact {
    let part = &text[start..end];
    let mut out = Compact { text: String::with_capacity(part.len()), map: Vec::with_capacity(part.len()), base: start };
    let mut line_start = start == 0 || text.as_bytes().get(start - 1) == Some(&b'\n');
    let mut i = 0;
    let bytes = part.as_bytes();
    while i < bytes.len() {
        if line_start {
            line_start = false;
            // strip up to two stacked prefixes (`[rank0]: (EngineCore pid=1) …`)
            for _ in 0..2 {
                let rest = &part[i..];
                let rest = &rest[..floor_boundary(rest, 200)];
                let lead = rest.len() - rest.trim_start_matches([' ', '\t']).len();
                // only a line that can start a prefix is matched against them
                let first = rest.as_bytes().get(lead).copied().unwrap_or(b' ');
                let maybe = matches!(first, b'[' | b'(' | b'>' | b'0'..=b'9' | b'A'..=b'Z')
                    || rest[lead..floor_boundary(rest, lead + 80)].contains(" | ");
                if !maybe {
                    break;
                }
                match prefix_re().find(&rest[lead..]) {
                    Some(m) if m.end() > 0 => i += lead + m.end(),
                    _ => break,
                }
            }
            continue;
        }
        let b = bytes[i];
        if b == b'\n' {
            line_start = true;
            i += 1;
            continue;
        }
        if b.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if b < 0x80 {
            out.text.push(b as char);
            out.map.push(i as u32);
            i += 1;
            continue;
        }
        let c = part[i..].chars().next().unwrap_or(' ');
        let n = c.len_utf8();
        if !c.is_whitespace() {
            out.text.push(c);
            for k in 0..n {
                out.map.push((i + k) as u32);
            }
        }
        i += n;
    }
    out
}

/// The spans of `text` worth compacting: around every anchor, merged, in
/// chunks of at most [`CHUNK`] bytes overlapping by [`OVERLAP`].
pub(crate) fn regions(text: &str) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    // one pass for every anchor (the regex engine searches literals together)
    for m in anchors_re().find_iter(text) {
        let h = m.start();
        if spans.last().is_some_and(|l| h + AHEAD <= l.1) {
            continue;
        }
        let s = line_start(text, floor_boundary(text, h.saturating_sub(BACK)));
        let e = floor_boundary(text, h.saturating_add(AHEAD));
        match spans.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => spans.push((s, e)),
        }
    }
    let mut out = Vec::new();
    for (s, e) in spans {
        let mut a = s;
        loop {
            let b = floor_boundary(text, (a + CHUNK).min(e));
            out.push((a, b));
            if b >= e {
                break;
            }
            let next = line_start(text, floor_boundary(text, b.saturating_sub(OVERLAP)));
            // always move forward
            a = if next > a { next } else { b };
        }
    }
    out
}

/// Every anchor as one pattern (literals: searched together in one pass).
fn anchors_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, &ANCHORS.iter().map(|a| regex::escape(a)).collect::<Vec<_>>().join("|"))
}

/// Which of `lits` occur in `text`, in one pass.
pub(crate) fn present<'a>(set: &'static Regex, text: &'a str) -> std::collections::HashSet<&'a str> {
    set.find_iter(text).map(|m| m.as_str()).collect()
}

/// Start of the line holding offset `i`.
fn line_start(text: &str, i: usize) -> usize {
    text[..i].rfind('\n').map(|n| n + 1).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(s: &str) -> String {
        compact(s, 0, s.len()).text
    }

    #[test]
    fn breaks_and_prefixes_vanish() {
        assert_eq!(
            flat("CUDA out of memor\ny. Tried to alloc\n ate 2.00 G\niB"),
            "CUDAoutofmemory.Triedtoallocate2.00GiB"
        );
        assert_eq!(
            flat("[rank3]: CUDA out of memory. Tried\n[rank3]: to allocate 79.1\n[rank3]: 1 GiB"),
            "CUDAoutofmemory.Triedtoallocate79.11GiB"
        );
        assert_eq!(
            flat("(EngineCore_DP0 pid=6940) ValueError: Free memory\n(EngineCore_DP0 pid=6940) on device"),
            "ValueError:Freememoryondevice"
        );
        assert_eq!(flat("deep-seek-1  | ggml_backend\ndeep-seek-1  | _cuda"), "ggml_backend_cuda");
        assert_eq!(flat("> ERROR 04-05 01:12:55 [core.py:390] ValueError: x"), "ValueError:x");
        assert_eq!(flat("2024-12-16 17:10:56,767 - root - ERROR - !!! Exception"), "!!!Exception");
        assert_eq!(flat("Apr 17 23:09:42 athena ollama.listener[2840147]: ggml"), "ggml");
    }

    #[test]
    fn offsets_map_back() {
        let s = "ab\n[rank0]: cd é f";
        let c = compact(s, 0, s.len());
        assert_eq!(c.text, "abcdéf");
        assert_eq!(&s[c.orig(2)..c.orig(2) + 1], "c");
        assert_eq!(&s[c.orig(4)..c.orig(4) + 2], "é");
        let c = compact(s, 3, s.len());
        assert_eq!(c.text, "cdéf");
        assert_eq!(c.orig(0), s.find('c').unwrap());
    }

    #[test]
    fn regions_are_chunked_and_cover_the_hits() {
        let mut s = "x\n".repeat(100);
        s.push_str("CUDA out of memory. Tried to allocate 2.00 GiB\n");
        let r = regions(&s);
        assert_eq!(r.len(), 1);
        assert!(r[0].0 == 0 && r[0].1 == s.len());
        let big = "Tried to allocate\n".repeat(200_000);
        let r = regions(&big);
        assert!(r.len() > 3 && r.iter().all(|(a, b)| b - a <= CHUNK), "{}", r.len());
        assert_eq!(r.last().unwrap().1, big.len());
        assert!(regions("nothing here").is_empty());
    }
}
