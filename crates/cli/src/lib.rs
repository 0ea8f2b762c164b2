//! `vramfit` as a library: the command-line definitions and one function
//! per subcommand, so that every front end runs the same code path. The
//! binary (`src/main.rs`) parses `argv` and prints; the local web page
//! (`serve`, cargo feature `web`) maps a JSON request onto the same clap
//! definitions and calls the same functions, so its JSON and its error
//! messages are the CLI's.
//!
//! Exit codes (documented in docs/exit-codes.md): 0 ok / fits, 1 does not
//! fit (or a finding that fails a check), 2 bad input, 3 an internal
//! inconsistency (a bug in vramfit, never the user's input).

use clap::{Parser, Subcommand};
use vramfit_core::CoreError;

pub mod cmd;
#[cfg(feature = "web")]
pub mod serve;

/// Bad input: a file, a flag or a combination the user can fix.
pub const EXIT_BAD_INPUT: u8 = 2;
/// vramfit broke one of its own invariants: a bug to report, not bad input.
pub const EXIT_INTERNAL: u8 = 3;

#[derive(Parser, Debug)]
#[command(name = "vramfit", version, about = "GPU memory: where it goes, why it ran out, the cheapest fix", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Per-GPU memory of a model and workload, by category
    Estimate(cmd::estimate::EstimateArgs),
    /// The cheapest setup that fits: software switches, more cards, a bigger card
    Plan(cmd::plan::PlanArgs),
    /// Why a run ran out of memory, from its error text, memory_summary, snapshot or script
    Diagnose(cmd::diagnose::DiagnoseArgs),
    /// Split GPUs with MIG for several inference services
    Mig(cmd::mig::MigArgs),
    /// Check a machine against what was rented (nvidia-smi output or NVML)
    Check(cmd::check::CheckArgs),
    /// Accuracy report: estimates against PyTorch-measured cases
    Calibrate(cmd::calibrate::CalibrateArgs),
    /// A Model Context Protocol server on stdio: estimate, plan, diagnose, mig_plan and check as tools (docs/python.md)
    Mcp(cmd::mcp::McpArgs),
    /// A local web page for every command (127.0.0.1 unless --host; nothing leaves the machine)
    #[cfg(feature = "web")]
    Serve(serve::ServeArgs),
}

/// What a subcommand produced: text for stdout and an exit code.
pub struct Outcome {
    pub stdout: String,
    pub code: u8,
}

impl Outcome {
    pub fn ok(stdout: String) -> Self {
        Outcome { stdout, code: 0 }
    }
}

/// Run one parsed command line (`serve` returns when stopped).
pub fn run(command: Command) -> anyhow::Result<Outcome> {
    match command {
        Command::Estimate(a) => cmd::estimate::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Diagnose(a) => cmd::diagnose::run(a),
        Command::Mig(a) => cmd::mig::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Calibrate(a) => cmd::calibrate::run(a),
        Command::Mcp(a) => cmd::mcp::run(a),
        #[cfg(feature = "web")]
        Command::Serve(a) => serve::run(a).map(|()| Outcome::ok(String::new())),
    }
}

/// One line to stderr, control characters shown escaped (an error quotes
/// its input). Unlike `eprintln!`, a stderr that cannot be written
/// (`vramfit … 2>&1 | true`: a closed pipe) is not a panic: the line is
/// dropped and the exit code stays the one the outcome decided, as with a
/// closed stdout (docs/exit-codes.md).
pub fn to_stderr(line: &str) {
    use std::io::Write;
    let mut e = std::io::stderr().lock();
    let _ = e
        .write_all(vramfit_report::format::shown_lines(line).as_bytes())
        .and_then(|_| e.write_all(b"\n"))
        .and_then(|_| e.flush());
}

/// The exit code of an error: [`EXIT_INTERNAL`] when any cause is vramfit's
/// own inconsistency ([`CoreError::Internal`]), else [`EXIT_BAD_INPUT`].
pub fn exit_code(e: &anyhow::Error) -> u8 {
    let internal = e.chain().any(|c| matches!(c.downcast_ref::<CoreError>(), Some(CoreError::Internal(_))));
    if internal {
        EXIT_INTERNAL
    } else {
        EXIT_BAD_INPUT
    }
}

/// The error and its causes, skipping a cause whose text the message
/// already contains (typed errors often print their source themselves).
pub fn error_text(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !out.contains(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_inconsistency_is_not_exit_2() {
        // what the training ledger returns if its lines ever stop summing to the peak
        let e = anyhow::Error::from(CoreError::Internal("training ledger lines sum to 1 B, the peak is 2 B".into()));
        assert_eq!(exit_code(&e), 3);
        assert_ne!(exit_code(&e), 2);
        // also under added context
        assert_eq!(exit_code(&e.context("estimate llama-2-7b")), 3);
        // bad input stays 2
        let bad = anyhow::Error::from(CoreError::invalid("hidden_size", "must be at least 1"));
        assert_eq!(exit_code(&bad), 2);
        assert_eq!(exit_code(&anyhow::anyhow!("--batch 1 contradicts train_micro_batch_size_per_gpu 4")), 2);
    }
}
