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
use vramfit_report::format::{fit_lines, Width};
use vramfit_report::i18n::{localize_text_within, Lang};

pub mod clap_lang;
pub mod cmd;
pub mod error;
mod outcome;
#[cfg(feature = "web")]
pub mod serve;

pub use outcome::{
    error_text, exit_code, set_stderr_lang, to_stderr, write_stderr, Outcome, EXIT_BAD_INPUT, EXIT_INTERNAL,
};

#[derive(Parser, Debug)]
#[command(name = "vramfit", version, about = "GPU memory: where it goes, why it ran out, the cheapest fix", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Language of text output: en, or zh (Simplified Chinese). Default: from LC_ALL, LC_MESSAGES
    /// or LANG (`zh_CN.UTF-8` gives zh). --json output is the same in every language
    #[arg(long, global = true, value_enum, value_name = "LANG")]
    pub lang: Option<cmd::svg_args::LangArg>,
}

/// The language of text output: `--lang`, else the first of `LC_ALL`,
/// `LC_MESSAGES`, `LANG` that is set and not empty (POSIX's order), `zh…`
/// giving Chinese; else English. `env` reads a variable (the process
/// environment in `main`).
pub fn text_lang(flag: Option<cmd::svg_args::LangArg>, env: &dyn Fn(&str) -> Option<String>) -> Lang {
    if let Some(l) = flag {
        return l.into();
    }
    ["LC_ALL", "LC_MESSAGES", "LANG"]
        .iter()
        .find_map(|k| env(k).filter(|v| !v.is_empty()))
        .map_or(Lang::En, |v| Lang::from_locale(&v))
}

/// The width of a command's text output when that output is a report to
/// translate (not `--json`, not an SVG or a config file); the command is
/// set to render unwrapped (`--wide`), since sentences are translated whole
/// and wrapped after.
fn text_report_width(command: &mut Command) -> Option<Width> {
    fn take(t: &mut cmd::width::TextArgs) -> Width {
        let w = t.width();
        t.wide = true;
        w
    }
    match command {
        // the lists' headers are sentences; ids, names and sizes pass unchanged
        Command::Estimate(a) if !a.json && !a.chart.to_stdout() => Some(take(&mut a.text)),
        // an emitted launcher file is the same in every language, never translated or wrapped
        Command::Plan(a) if !a.json && !a.chart.to_stdout() && a.emit.is_none() => Some(take(&mut a.text)),
        Command::Diagnose(a) if !a.json && !a.chart.to_stdout() => Some(take(&mut a.text)),
        Command::Mig(cmd::mig::MigArgs { command: cmd::mig::MigCommand::Plan(a) })
            if !a.json && !a.chart.to_stdout() && a.emit.is_none() =>
        {
            Some(take(&mut a.text))
        }
        Command::Check(a) if !a.json && !a.collect_script => Some(take(&mut a.layout)),
        Command::Calibrate(a) if !a.json => Some(take(&mut a.text)),
        // the profile table is drawn at its natural width, never wrapped
        Command::Mig(cmd::mig::MigArgs { command: cmd::mig::MigCommand::Profiles(a) }) if !a.json => Some(None),
        _ => None,
    }
}

/// Run a command with its text output in `lang` (JSON, SVG and config
/// files are the same in every language): the report is rendered in
/// English, unwrapped, translated line by line from the catalogue
/// (`vramfit_report::i18n`), then fitted to the width.
pub fn run_in(mut command: Command, lang: Lang) -> anyhow::Result<Outcome> {
    if lang == Lang::En {
        return run(command);
    }
    let width = text_report_width(&mut command);
    let mut out = run(command)?;
    if let Some(width) = width {
        out.stdout = fit_lines(&localize_text_within(&out.stdout, lang, width).text, width);
    }
    Ok(out)
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Per-GPU memory of a model and workload, by category
    // boxed: its flags (llama.cpp's among them) make it the largest variant by far
    Estimate(Box<cmd::estimate::EstimateArgs>),
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

/// What a command reads besides its flags. The CLI leaves it empty: a
/// command reads the files its flags name, stdin or NVML, and resolves
/// model names itself. A front end that holds its inputs in memory (the
/// local web page) fills it; everything else is the CLI's code path.
#[derive(Debug, Default)]
pub struct Inputs {
    /// How model names are resolved (`estimate`, `plan`, `diagnose --model`, `mig` services)
    pub lookup: cmd::model_args::Lookup,
    /// Never reach the network for a model (as `--offline`)
    pub offline: bool,
    /// `diagnose`'s input, already read (else the file or stdin its argument names)
    pub diagnose: Option<vramfit_diagnose::input::Input>,
    /// `check`'s nvidia-smi outputs and reports, already read (else the files its flags name)
    pub check: Option<cmd::check::CheckInputs>,
}

/// Run one parsed command line (`serve` returns when stopped).
pub fn run(command: Command) -> anyhow::Result<Outcome> {
    run_with(command, Inputs::default())
}

/// Run a command with the inputs a front end supplies: the one code path
/// from a typed command to its answer, for the CLI and the web page alike.
pub fn run_with(command: Command, inputs: Inputs) -> anyhow::Result<Outcome> {
    let Inputs { lookup, offline, diagnose, check } = inputs;
    match command {
        Command::Estimate(mut a) => {
            a.hub.lookup = lookup;
            a.hub.offline |= offline;
            cmd::estimate::run(*a)
        }
        Command::Plan(mut a) => {
            a.hub.lookup = lookup;
            a.hub.offline |= offline;
            cmd::plan::run(a)
        }
        Command::Diagnose(mut a) => {
            a.lookup = lookup;
            match diagnose {
                Some(input) => cmd::diagnose::run_input(a, input),
                None => cmd::diagnose::run(a),
            }
        }
        Command::Mig(cmd::mig::MigArgs { command: cmd::mig::MigCommand::Plan(mut a) }) => {
            a.lookup = lookup;
            cmd::mig::run(cmd::mig::MigArgs { command: cmd::mig::MigCommand::Plan(a) })
        }
        Command::Mig(a) => cmd::mig::run(a),
        Command::Check(a) => match check {
            Some(inputs) => cmd::check::run_with(a, inputs),
            None => cmd::check::run(a),
        },
        Command::Calibrate(a) => cmd::calibrate::run(a),
        Command::Mcp(a) => cmd::mcp::run(a),
        #[cfg(feature = "web")]
        Command::Serve(a) => serve::run(a).map(|()| Outcome::ok(String::new())),
    }
}
