//! How wide text output may be. The renderers take the width as a
//! parameter (`vramfit_report::format::Width`); this is where the CLI reads
//! it from the environment: `--wide` (no limit), else `COLUMNS`, else the
//! terminal's width when stdout is a terminal, else 100 columns.

use std::io::IsTerminal;
use vramfit_report::format::{Width, DEFAULT_WIDTH};

/// Narrower than this, tables cannot be drawn sensibly: a smaller
/// `COLUMNS` or terminal is taken as this.
pub const MIN_WIDTH: usize = 40;

/// `--wide`, shared by the commands whose text output has wide tables.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TextArgs {
    /// Print every table column and long lines unwrapped. Without it, text output fits the
    /// terminal: `COLUMNS`, else the terminal's width, else 100 columns
    #[arg(long)]
    pub wide: bool,
}

impl TextArgs {
    /// The width text output is fitted to.
    pub fn width(&self) -> Width {
        if self.wide {
            None
        } else {
            Some(output_width(std::env::var("COLUMNS").ok().as_deref(), terminal_columns()))
        }
    }
}

/// `COLUMNS` when it is a positive number, else the terminal's width, else
/// [`DEFAULT_WIDTH`]; never under [`MIN_WIDTH`].
pub fn output_width(columns_env: Option<&str>, terminal: Option<usize>) -> usize {
    columns_env
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|c| *c > 0)
        .or(terminal.filter(|c| *c > 0))
        .unwrap_or(DEFAULT_WIDTH)
        .max(MIN_WIDTH)
}

/// The width of the terminal stdout writes to; `None` when stdout is not a
/// terminal (a pipe, a file) or the size is unknown.
fn terminal_columns() -> Option<usize> {
    let stdout = std::io::stdout();
    if !stdout.is_terminal() {
        return None;
    }
    #[cfg(unix)]
    {
        rustix::termios::tcgetwinsize(&stdout).ok().map(|w| usize::from(w.ws_col))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_then_terminal_then_100() {
        assert_eq!(output_width(Some("132"), Some(80)), 132);
        assert_eq!(output_width(None, Some(80)), 80);
        assert_eq!(output_width(Some("x"), Some(80)), 80);
        assert_eq!(output_width(Some("0"), None), DEFAULT_WIDTH);
        assert_eq!(output_width(None, None), DEFAULT_WIDTH);
        assert_eq!(output_width(Some("10"), None), MIN_WIDTH);
    }
}
