//! `vramfit`: where GPU memory goes, why a run OOMed, the cheapest fix,
//! and whether the machine is what was rented.
//!
//! This binary only parses arguments, turns them into domain values once
//! (rejecting contradictions with the flags named), calls the library
//! crates, and writes what the renderers return. Exit codes (documented in
//! docs/exit-codes.md): 0 ok / fits, 1 does not fit (or a finding that
//! fails a check), 2 bad input, 3 an internal inconsistency (a bug in
//! vramfit, never the user's input).

use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;
use vramfit_core::CoreError;
use vramfit_report::format::shown_lines;

mod cmd;

/// Bad input: a file, a flag or a combination the user can fix.
const EXIT_BAD_INPUT: u8 = 2;
/// vramfit broke one of its own invariants: a bug to report, not bad input.
const EXIT_INTERNAL: u8 = 3;

#[derive(Parser, Debug)]
#[command(name = "vramfit", version, about = "GPU memory: where it goes, why it ran out, the cheapest fix", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
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

fn main() -> ExitCode {
    let cli = Cli::parse_from(cmd::gguf::llama_cpp_short_flags(std::env::args_os()));
    let result = match cli.command {
        Command::Estimate(a) => cmd::estimate::run(a),
        Command::Plan(a) => cmd::plan::run(a),
        Command::Diagnose(a) => cmd::diagnose::run(a),
        Command::Mig(a) => cmd::mig::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Calibrate(a) => cmd::calibrate::run(a),
    };
    match result {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            // Renderers escape the strings they take from input
            // (report::format::shown); this catches any they missed, so no
            // raw ESC or BEL reaches the terminal (issue 15).
            // A closed pipe (`vramfit … | head`) is not an error.
            match stdout.write_all(shown_lines(&out.stdout).as_bytes()).and_then(|_| stdout.flush()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(e) => {
                    to_stderr(&format!("vramfit: cannot write output: {e}"));
                    return ExitCode::from(EXIT_BAD_INPUT);
                }
            }
            ExitCode::from(out.code)
        }
        Err(e) => {
            to_stderr(&format!("vramfit: error: {}", error_text(&e)));
            ExitCode::from(exit_code(&e))
        }
    }
}

/// One line to stderr, control characters shown escaped (an error quotes
/// its input). Unlike `eprintln!`, a stderr that cannot be written
/// (`vramfit … 2>&1 | true`: a closed pipe) is not a panic: the line is
/// dropped and the exit code stays the one the outcome decided, as with a
/// closed stdout (docs/exit-codes.md).
pub fn to_stderr(line: &str) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(shown_lines(line).as_bytes()).and_then(|_| e.write_all(b"\n")).and_then(|_| e.flush());
}

/// The exit code of an error: [`EXIT_INTERNAL`] when any cause is vramfit's
/// own inconsistency ([`CoreError::Internal`]), else [`EXIT_BAD_INPUT`].
fn exit_code(e: &anyhow::Error) -> u8 {
    let internal = e.chain().any(|c| matches!(c.downcast_ref::<CoreError>(), Some(CoreError::Internal(_))));
    if internal {
        EXIT_INTERNAL
    } else {
        EXIT_BAD_INPUT
    }
}

/// The error and its causes, skipping a cause whose text the message
/// already contains (typed errors often print their source themselves).
fn error_text(e: &anyhow::Error) -> String {
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
