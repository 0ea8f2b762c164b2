//! Every OOM fixture as people paste it (issue 27 §2): the line holding each
//! message hard-wrapped at several widths (breaking words and numbers),
//! soft-wrapped at word boundaries behind a quote or logger prefix, and
//! cut at several points after its first words. A generator, not a list:
//! every fixture of tests/fixtures/oom, every variant.
//!
//! - A wrapped variant keeps every message and every verdict.
//! - A cut variant keeps its first message recognised (a cut before the
//!   message's first words leaves nothing to recognise, and is not made);
//!   its verdict is the same, or it names the figures that are missing.

use vramfit_diagnose::classify::Verdict;
use vramfit_diagnose::oom::OomEvent;
use vramfit_diagnose::{classify, oom};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/oom");

fn fixtures() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::fs::read_dir(DIR)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".txt"))
        .map(|n| {
            let t = std::fs::read_to_string(format!("{DIR}/{n}")).unwrap();
            (n, t)
        })
        .collect();
    v.sort();
    v
}

/// A way of re-pasting one line.
type Variant = (&'static str, Box<dyn Fn(&str) -> String>);

fn verdicts(text: &str) -> Vec<(OomEvent, Verdict)> {
    oom::scan(text).into_iter().map(|e| (classify(&e), e)).map(|(v, e)| (e, v)).collect()
}

/// Replace line `n` (1-based) of `text` by `with`.
fn replace_line(text: &str, n: usize, with: &str) -> String {
    text.split_inclusive('\n')
        .enumerate()
        .map(
            |(i, l)| {
                if i + 1 == n {
                    format!("{with}{}", if l.ends_with('\n') { "\n" } else { "" })
                } else {
                    l.to_string()
                }
            },
        )
        .collect()
}

fn line(text: &str, n: usize) -> &str {
    text.lines().nth(n - 1).unwrap_or("")
}

/// Hard wrap: a newline every `w` characters, inside words and numbers.
fn hard_wrap(l: &str, w: usize) -> String {
    let chars: Vec<char> = l.chars().collect();
    chars.chunks(w).map(|c| c.iter().collect::<String>()).collect::<Vec<_>>().join("\n")
}

/// Soft wrap at word boundaries, each continuation behind `prefix`.
fn soft_wrap(l: &str, w: usize, prefix: &str) -> String {
    let mut out = String::new();
    let mut cur = String::new();
    for word in l.split(' ') {
        if !cur.is_empty() && cur.chars().count() + 1 + word.chars().count() > w {
            out.push_str(&cur);
            out.push('\n');
            out.push_str(prefix);
            cur.clear();
        } else if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    out.push_str(&cur);
    out
}

/// The lines holding a message's first words (each event's line).
fn message_lines(events: &[(OomEvent, Verdict)]) -> Vec<usize> {
    let mut v: Vec<usize> = events.iter().flat_map(|(e, _)| e.lines.iter().copied()).collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn classes(v: &[(OomEvent, Verdict)]) -> Vec<&'static str> {
    v.iter().map(|(_, v)| v.class.key()).collect()
}

#[test]
fn wrapped_and_reflowed_fixtures_keep_every_verdict() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, text) in fixtures() {
        let base = verdicts(&text);
        if base.is_empty() {
            continue;
        }
        let want = classes(&base);
        let lines = message_lines(&base);
        let variants: Vec<Variant> = vec![
            ("hard wrap 23", Box::new(|l: &str| hard_wrap(l, 23))),
            ("hard wrap 41", Box::new(|l: &str| hard_wrap(l, 41))),
            ("hard wrap 80", Box::new(|l: &str| hard_wrap(l, 80))),
            ("soft wrap 60 '> '", Box::new(|l: &str| soft_wrap(l, 60, "> "))),
            ("soft wrap 72 indented", Box::new(|l: &str| soft_wrap(l, 72, "    "))),
            // a logger's prefix on each line (one that names no engine: `[rankN]:` would make it a multi-rank job)
            (
                "soft wrap 100 logger",
                Box::new(|l: &str| soft_wrap(l, 100, "2024-05-01 12:00:00,000 - root - ERROR - ")),
            ),
        ];
        for (what, f) in &variants {
            let mut t = text.clone();
            // from the last line up, so earlier line numbers stay valid
            for &n in lines.iter().rev() {
                let l = line(&t, n).to_string();
                t = replace_line(&t, n, &f(&l));
            }
            let got = verdicts(&t);
            checked += 1;
            if classes(&got) != want {
                failures.push(format!("{name} [{what}]: {:?} → {:?}", want, classes(&got)));
            }
        }
    }
    println!("{checked} wrapped variants of the OOM fixtures checked");
    assert!(checked > 800, "only {checked} variants");
    assert!(failures.is_empty(), "{} variants changed a verdict:\n{}", failures.len(), failures.join("\n"));
}

/// The first words of each message form: a cut before their end leaves
/// nothing to recognise. (A bare `Tried to allocate` counts with its size:
/// without one it is prose.)
const HEADS: [&str; 18] = [
    "out of memory",
    "Out of memory",
    "OutOfMemoryError",
    "Allocation on device",
    "on startup",
    "ran out of memory",
    "OOM when allocating",
    "To serve at least one request",
    "max seq len",
    "No available memory for the cache blocks",
    "cache flushes",
    "ALLOC_FAILED",
    "CUDA_ERROR_OUT_OF_MEMORY",
    "cudaErrorMemoryAllocation",
    "alloc_buffer: failed to allocate",
    "Free memory on device",
    "MPS backend out of memory",
    "RESOURCE_EXHAUSTED",
];

#[test]
fn cut_fixtures_keep_their_verdict_or_name_what_is_missing() {
    let tried = regex::Regex::new(r"Tried to allocate \d+(?:\.\d+)? ?(?:[KMGT]i?B|bytes)").unwrap();
    let mut checked = 0;
    let mut failures = Vec::new();
    for (name, text) in fixtures() {
        let base = verdicts(&text);
        let Some((e, v)) = base.first() else { continue };
        let n = e.line;
        let l = line(&text, n);
        // the end of the message's first words on its line
        let head_end =
            HEADS.iter().filter_map(|h| l.find(h).map(|i| i + h.len())).chain(tried.find(l).map(|m| m.end())).min();
        let Some(head_end) = head_end else { continue };
        let start: usize = text.split_inclusive('\n').take(n - 1).map(str::len).sum();
        let len = l.len();
        let mut cuts: Vec<usize> = (1..8).map(|k| head_end + (len - head_end) * k / 8).collect();
        // and right after each clause boundary
        cuts.extend(l.match_indices(['.', ';', ',', ')']).map(|(i, _)| i + 1).filter(|&i| i > head_end));
        cuts.sort_unstable();
        cuts.dedup();
        for cut in cuts {
            if cut >= len || !l.is_char_boundary(cut) {
                continue;
            }
            let t = &text[..start + cut];
            checked += 1;
            let got = verdicts(t);
            let Some((_, gv)) = got.first() else {
                failures.push(format!("{name} cut at {cut}/{len}: not recognised ({:?})", &l[..cut]));
                continue;
            };
            if gv.class != v.class && gv.missing.is_empty() {
                failures.push(format!(
                    "{name} cut at {cut}/{len}: {} → {} with no missing figure named",
                    v.class.key(),
                    gv.class.key()
                ));
            }
        }
    }
    println!("{checked} cut variants of the OOM fixtures checked");
    assert!(checked > 500, "only {checked} variants");
    assert!(failures.is_empty(), "{} cut variants failed:\n{}", failures.len(), failures.join("\n"));
}
