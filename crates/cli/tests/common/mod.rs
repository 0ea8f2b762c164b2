//! One helper for running the real binary.
#![allow(dead_code)]

use assert_cmd::Command;

pub fn vramfit() -> Command {
    let mut c = Command::cargo_bin("vramfit").expect("binary built");
    // Never let the developer's own HF cache leak into tests.
    c.env("HF_HOME", "/nonexistent-vramfit-test").env_remove("HF_HUB_CACHE");
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
