//! `vramfit`: where GPU memory goes, why a run OOMed, the cheapest fix,
//! and whether the machine is what was rented.
//!
//! This binary only parses arguments and writes what the library
//! (`src/lib.rs`: the same functions the local web page calls) returns.

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;
use vramfit_cli::{cmd, error_text, exit_code, to_stderr, Cli, EXIT_BAD_INPUT};
use vramfit_report::format::shown_lines;

fn main() -> ExitCode {
    let args = cmd::gguf::llama_cpp_short_flags(std::env::args_os());
    // clap's errors (and --help) exit here; a "similar argument" tip names a flag of the model given
    let cli = Cli::try_parse_from(&args).unwrap_or_else(|e| cmd::gguf::fit_suggestion(&args, e).exit());
    let lang = vramfit_cli::text_lang(cli.lang, &|k| std::env::var(k).ok());
    match vramfit_cli::run_in(cli.command, lang) {
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
            // the message in the text language when the catalogue has it, else as written
            let text = error_text(&e);
            let text = vramfit_report::i18n::translate(lang, &text).unwrap_or(text);
            to_stderr(&format!("vramfit: error: {text}"));
            ExitCode::from(exit_code(&e))
        }
    }
}
