//! One helper for running the real binary.
#![allow(dead_code)]

use assert_cmd::Command;

pub fn vramfit() -> Command {
    let mut c = Command::cargo_bin("vramfit").expect("binary built");
    // Never let the developer's own HF cache or token leak into tests, and
    // never touch the network: a hub id that is not a preset stays offline
    // (tests of the Hub set HF_ENDPOINT to an in-process fake and lift this).
    c.env("HF_HOME", "/nonexistent-vramfit-test").env("HF_HUB_OFFLINE", "1");
    // Text output fits `COLUMNS` (else 100 columns: stdout is a pipe here):
    // the developer's terminal must not change what tests see.
    c.env_remove("COLUMNS");
    // Text output is English unless a test asks for Chinese (`--lang`, `LANG=zh_CN.UTF-8`).
    for k in ["LC_ALL", "LC_MESSAGES", "LANG"] {
        c.env_remove(k);
    }
    for k in
        ["HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH", "HF_ENDPOINT"]
    {
        c.env_remove(k);
    }
    c
}

/// Run with args, expect exit `code`, return (stdout, stderr).
pub fn run(args: &[&str], code: i32) -> (String, String) {
    let out = vramfit().args(args).output().expect("runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(code), "args {args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr)
}

pub fn json(args: &[&str], code: i32) -> serde_json::Value {
    let (out, _) = run(args, code);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}
