//! A closed stdout or stderr (`vramfit … | head`, `vramfit … 2>&1 | true`)
//! is not a crash: no panic (exit 101), the exit code stays the one
//! docs/exit-codes.md gives for the outcome.

use std::process::{Command, Stdio};

/// A pipe whose reading end is already closed: every write gets EPIPE.
fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    Stdio::from(writer)
}

fn vramfit() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vramfit"));
    c.env("HF_HOME", "/nonexistent-vramfit-test").env("HF_HUB_OFFLINE", "1").env_remove("HF_ENDPOINT");
    c
}

fn code(mut c: Command, stdout: Stdio, stderr: Stdio) -> Option<i32> {
    c.stdin(Stdio::null()).stdout(stdout).stderr(stderr).status().expect("runs").code()
}

#[test]
fn an_error_written_to_a_closed_stderr_keeps_exit_2() {
    // `vramfit estimate x 2>&1 | true` panicked (exit 101) in eprintln!
    let mut c = vramfit();
    c.args(["estimate", "x"]);
    assert_eq!(code(c, closed_pipe(), closed_pipe()), Some(2));
    let mut c = vramfit();
    c.args(["estimate", "x"]);
    assert_eq!(code(c, Stdio::null(), closed_pipe()), Some(2));
}

#[test]
fn notes_and_results_to_closed_pipes_keep_their_exit_codes() {
    // fits: 0; stdout and stderr both closed
    let mut c = vramfit();
    c.args(["estimate", "llama-2-7b", "--gpu", "a100-80gb"]);
    assert_eq!(code(c, closed_pipe(), closed_pipe()), Some(0));
    // does not fit: 1
    let mut c = vramfit();
    c.args(["estimate", "llama-2-70b", "--gpu", "rtx-3090"]);
    assert_eq!(code(c, closed_pipe(), closed_pipe()), Some(1));
    // notes on stderr (`plan` says a DeepSpeed "auto" value is filled from
    // the flags) with stderr closed: the plan is still found, exit 0
    let ds =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../ingest/tests/fixtures/deepspeed/02_zero2_offload_optimizer_auto.json");
    let mut c = vramfit();
    c.args(["plan", "llama-2-7b", "--task", "train", "--deepspeed", ds]);
    let out = c.output().expect("runs");
    assert!(String::from_utf8_lossy(&out.stderr).contains("note: "), "the case must write to stderr");
    let mut c = vramfit();
    c.args(["plan", "llama-2-7b", "--task", "train", "--deepspeed", ds]);
    assert_eq!(code(c, Stdio::null(), closed_pipe()), Some(0));
    // clap's own usage error and --help
    let mut c = vramfit();
    c.args(["estimate", "--no-such-flag"]);
    assert_eq!(code(c, closed_pipe(), closed_pipe()), Some(2));
    let mut c = vramfit();
    c.arg("--help");
    assert_eq!(code(c, closed_pipe(), closed_pipe()), Some(0));
}
