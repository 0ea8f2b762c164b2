//! `vramfit`: where GPU memory goes, why a run OOMed, the cheapest fix,
//! and whether the machine is what was rented.
//!
//! This binary only parses arguments and writes what the library
//! (`src/lib.rs`: the same functions the local web page calls) returns.

use std::io::Write;
use std::process::ExitCode;
use vramfit_cli::{clap_lang, cmd, error_text, exit_code, write_stderr, EXIT_BAD_INPUT};
use vramfit_report::format::shown_lines;

fn main() -> ExitCode {
    let args = cmd::gguf::llama_cpp_short_flags(std::env::args_os());
    // the text language before parsing: clap's help and errors are in it too
    let lang = clap_lang::argv_lang(&args, &|k| std::env::var(k).ok());
    // clap's errors (and --help) exit here; a "similar argument" tip names a flag of the model given
    let cli =
        clap_lang::parse(&args, lang).unwrap_or_else(|e| clap_lang::exit(cmd::gguf::fit_suggestion(&args, e), lang));
    let lang = vramfit_cli::text_lang(cli.lang, &|k| std::env::var(k).ok());
    vramfit_cli::set_stderr_lang(lang);
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
                    vramfit_cli::to_stderr(&format!("vramfit: cannot write output: {e}"));
                    return ExitCode::from(EXIT_BAD_INPUT);
                }
            }
            ExitCode::from(out.code)
        }
        Err(e) => {
            // the message in the text language when the catalogue has it, else as written
            let text = error_text(&e);
            let text = vramfit_report::i18n::translate(lang, &text).unwrap_or(text);
            write_stderr(&format!("vramfit: error: {text}"));
            ExitCode::from(exit_code(&e))
        }
    }
}
