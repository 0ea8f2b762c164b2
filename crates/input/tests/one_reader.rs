//! Every file a user names is read through vramfit-input (issue 15: one
//! bounded reader). This test reads the library and binary sources of
//! every crate and fails on a direct read — `File::open`, `fs::read`,
//! `fs::read_to_string`, `OpenOptions`, a memory map, or standard input —
//! outside `crates/input`, unless the line is on the short list below with
//! the reason it may stay. Test code (`tests/`, `#[cfg(test)]` modules)
//! reads its own fixtures and is not checked.

use std::path::{Path, PathBuf};

/// What a direct read looks like in source.
const DIRECT_READS: &[&str] =
    &["File::open(", "fs::read(", "fs::read_to_string(", "OpenOptions", "Mmap", "memmap", "stdin()"];

/// Direct reads that may stay: (file, what it reads, why).
const ALLOWED: &[(&str, &str, &str)] = &[
    (
        "crates/diagnose/src/input.rs",
        "File::open(",
        "diagnose's head-and-tail reader of logs and pickles (caps of its own, docs/limits.md); its move onto vramfit-input belongs to the diagnose bounds work",
    ),
    (
        "crates/cli/src/cmd/diagnose.rs",
        "stdin()",
        "`vramfit diagnose -` reads standard input through diagnose::input::read_stream, which stops at the text or pickle cap",
    ),
    (
        "crates/cli/src/cmd/mcp.rs",
        "stdin()",
        "`vramfit mcp` reads JSON-RPC messages from standard input one line at a time, each line capped at MAX_MESSAGE_BYTES (1 MiB): a longer one is skipped and answered with an error",
    ),
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The lines of `src` outside `#[cfg(test)]` items (rustfmt layout: the
/// item's closing brace is alone on a line at the item's indentation) and
/// outside comments.
fn code_lines(src: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut lines = src.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            // skip to the item, then to its closing brace
            let indent = line.len() - t.len();
            for (_, l) in lines.by_ref() {
                if l.trim_end().ends_with('{') {
                    break;
                }
                if l.trim_end().ends_with(';') {
                    break; // `#[cfg(test)] mod tests;` or a one-line item
                }
            }
            let close = format!("{}}}", " ".repeat(indent));
            for (_, l) in lines.by_ref() {
                if l.trim_end() == close {
                    break;
                }
            }
            continue;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push((i + 1, line));
    }
    out
}

#[test]
fn no_direct_read_of_a_user_path_outside_crates_input() {
    let root = root();
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("crates")).expect("crates/").flatten() {
        let krate = entry.path();
        if krate.file_name().is_some_and(|n| n == "input") {
            continue;
        }
        rust_files(&krate.join("src"), &mut files);
    }
    assert!(files.len() > 50, "found only {} source files under crates/*/src", files.len());
    let mut found = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap_or(f).display().to_string();
        // A file listed a moment ago may be gone by now (another test's
        // temporary file): only what is still there is checked.
        let src = match std::fs::read_to_string(f) {
            Ok(src) => src,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("{rel}: {e}"),
        };
        for (n, line) in code_lines(&src) {
            for pat in DIRECT_READS {
                if line.contains(pat) && !ALLOWED.iter().any(|(file, p, _)| *file == rel && p == pat) {
                    found.push(format!("{rel}:{n}: {pat} in `{}`", line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "direct reads of files outside crates/input: read user files with vramfit_input::read_text / read_bytes / open_regular and a cap (docs/limits.md):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_scan_sees_direct_reads_and_skips_test_code() {
    let src = "fn a() {\n    let f = std::fs::File::open(p)?;\n}\n// std::fs::read(p)\n#[cfg(test)]\nmod tests {\n    fn b() {\n        std::fs::read(p).unwrap();\n    }\n}\nfn c() { std::fs::read_to_string(p) }\n";
    let lines = code_lines(src);
    let hits: Vec<usize> =
        lines.iter().filter(|(_, l)| DIRECT_READS.iter().any(|p| l.contains(p))).map(|(n, _)| *n).collect();
    assert_eq!(hits, [2, 11]);
}
