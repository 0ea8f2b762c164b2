//! The README runs as written: every line of a ```sh block in README.md
//! that starts with `vramfit ` is run through the real binary, from a copy
//! of the repository root (links to its files, so what a command writes —
//! `--svg timeline.svg` — lands in a temporary folder), offline with an
//! empty Hugging Face cache: what a new user has on a fresh clone.
//!
//! The expected exit code is 0 unless the line's comment (on the line, or
//! on the indented comment lines under it) says `exit N`. A command that
//! runs until stopped (a server) says `runs until stopped`: it is checked
//! to start and keep running for 2 s, then stopped. New README lines are
//! covered without touching this test.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug)]
struct TourLine {
    line_no: usize,
    args: Vec<String>,
    comment: String,
}

/// Words of a shell line: whitespace-separated, `'…'` and `"…"` quoted;
/// a `#` at the start of a word begins the comment.
fn shell_words(line: &str) -> (Vec<String>, String) {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '#' if !in_word => return (words, line[i + 1..].trim().to_string()),
            '\'' | '"' => {
                in_word = true;
                for (_, q) in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    cur.push(q);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    (words, String::new())
}

/// The `vramfit` lines of README.md's shell blocks, with their comments.
fn tour(readme: &str) -> Vec<TourLine> {
    let mut out: Vec<TourLine> = Vec::new();
    let mut in_sh = false;
    for (i, line) in readme.lines().enumerate() {
        let t = line.trim_start();
        if let Some(info) = t.strip_prefix("```") {
            in_sh = !in_sh && matches!(info.trim(), "sh" | "bash" | "shell" | "console");
            continue;
        }
        if !in_sh {
            continue;
        }
        if t.starts_with('#') && line.starts_with(char::is_whitespace) {
            // an indented comment line continues the previous command's comment
            if let Some(last) = out.last_mut() {
                last.comment.push(' ');
                last.comment.push_str(t.trim_start_matches('#').trim());
            }
            continue;
        }
        let (words, comment) = shell_words(t);
        if words.first().map(String::as_str) == Some("vramfit") {
            out.push(TourLine { line_no: i + 1, args: words[1..].to_vec(), comment });
        }
    }
    out
}

fn expected_code(comment: &str) -> i32 {
    let c = comment.to_ascii_lowercase();
    c.split("exit ").nth(1).and_then(|r| r.chars().next()).and_then(|d| d.to_digit(10)).map(|d| d as i32).unwrap_or(0)
}

/// A folder whose entries link to the repository root's.
fn checkout_copy(root: &Path) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vramfit-readme-tour-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let name = e.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        #[cfg(unix)]
        std::os::unix::fs::symlink(e.path(), dir.join(&name)).unwrap();
    }
    dir
}

#[test]
fn the_readme_parser_finds_commands_comments_and_exit_codes() {
    let md = "text\n```sh\n# heading\nvramfit a 'b c' --x=\"d e\"   # fits\n                  # more: exit 1\ncargo test\n```\n```toml\nvramfit no\n```\n";
    let t = tour(md);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].args, ["a", "b c", "--x=d e"]);
    assert_eq!(t[0].comment, "fits more: exit 1");
    assert_eq!(expected_code(&t[0].comment), 1);
    assert_eq!(expected_code("a MIG slice, not a whole card: exit 1"), 1);
    assert_eq!(expected_code("KV = 64 GiB"), 0);
}

#[cfg(unix)]
#[test]
fn every_readme_command_runs_as_written() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let lines = tour(&readme);
    assert!(lines.len() >= 10, "found only {} vramfit lines in README.md", lines.len());
    let dir = checkout_copy(&root);
    let mut failures = Vec::new();
    for l in &lines {
        let mut cmd = common::vramfit();
        cmd.current_dir(&dir).args(&l.args);
        if l.comment.contains("runs until stopped") {
            let mut std_cmd = std::process::Command::new(env!("CARGO_BIN_EXE_vramfit"));
            std_cmd
                .current_dir(&dir)
                .args(&l.args)
                .env("HF_HOME", "/nonexistent-vramfit-test")
                .env("HF_HUB_OFFLINE", "1")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            let mut child = std_cmd.spawn().unwrap();
            std::thread::sleep(Duration::from_secs(2));
            match child.try_wait().unwrap() {
                None => {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                Some(status) => failures.push(format!("README.md:{}: stopped at once ({status})", l.line_no)),
            }
            continue;
        }
        let out = cmd.timeout(Duration::from_secs(120)).output().unwrap();
        let want = expected_code(&l.comment);
        let stdout = String::from_utf8_lossy(&out.stdout);
        if out.status.code() != Some(want) || (want <= 1 && stdout.trim().is_empty()) {
            failures.push(format!(
                "README.md:{}: vramfit {} → exit {:?} (expected {want}), stdout {} bytes\nstderr: {}",
                l.line_no,
                l.args.join(" "),
                out.status.code(),
                stdout.len(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "README tour lines that do not run as written:\n{}", failures.join("\n"));
}
