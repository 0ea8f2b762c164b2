//! What a command gives back (stdout text and an exit code) and how an
//! error is reported: its text, its exit code (docs/exit-codes.md) and the
//! one writer of stderr lines. A leaf: every command and front end uses it.

use vramfit_core::CoreError;

/// Bad input: a file, a flag or a combination the user can fix.
pub const EXIT_BAD_INPUT: u8 = 2;
/// vramfit broke one of its own invariants: a bug to report, not bad input.
pub const EXIT_INTERNAL: u8 = 3;

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

/// The language of the lines a command writes to stderr (`note: …`,
/// `vramfit: launch with: …`), set once by the binary's `main` from
/// `--lang` / the locale before the command runs. Process-wide because
/// those lines are written deep inside commands that the web page and the
/// MCP server run too, where it stays unset (English): neither has a
/// terminal's stderr to translate for.
static STDERR_LANG: std::sync::OnceLock<vramfit_report::i18n::Lang> = std::sync::OnceLock::new();

/// Set the language of [`to_stderr`]'s lines (once; a second call is ignored).
pub fn set_stderr_lang(lang: vramfit_report::i18n::Lang) {
    let _ = STDERR_LANG.set(lang);
}

/// One line to stderr in the language [`set_stderr_lang`] chose: a
/// `vramfit: ` prefix kept, the rest translated through the catalogue when
/// it has the sentence, else as written. See [`write_stderr`].
pub fn to_stderr(line: &str) {
    use vramfit_report::i18n::{translate, Lang};
    let lang = STDERR_LANG.get().copied().unwrap_or(Lang::En);
    let (prefix, body) = match line.strip_prefix("vramfit: ") {
        Some(b) => ("vramfit: ", b),
        None => ("", line),
    };
    match translate(lang, body) {
        Ok(t) if lang != Lang::En => write_stderr(&format!("{prefix}{t}")),
        _ => write_stderr(line),
    }
}

/// One line to stderr as it is, control characters shown escaped (an error quotes
/// its input). Unlike `eprintln!`, a stderr that cannot be written
/// (`vramfit … 2>&1 | true`: a closed pipe) is not a panic: the line is
/// dropped and the exit code stays the one the outcome decided, as with a
/// closed stdout (docs/exit-codes.md).
pub fn write_stderr(line: &str) {
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
