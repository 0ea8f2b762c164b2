//! `--svg FILE|-` and `--svg-lang`: the chart of a command (the renderers of
//! `vramfit_report::svg`, which the local web page draws with too).

use crate::error::OnField;
use crate::Outcome;
use anyhow::Context;
use vramfit_report::svg::Lang;

/// Language of a chart's labels.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LangArg {
    /// English
    #[default]
    En,
    /// Simplified Chinese
    Zh,
}

impl From<LangArg> for Lang {
    fn from(l: LangArg) -> Lang {
        match l {
            LangArg::En => Lang::En,
            LangArg::Zh => Lang::Zh,
        }
    }
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct SvgArgs {
    /// Write the chart as SVG to this file; `-` prints it instead of the report
    #[arg(long, value_name = "OUT.svg")]
    pub svg: Option<String>,
    /// Language of the chart's labels: en or zh (Simplified Chinese)
    #[arg(long, value_enum, default_value_t = LangArg::En, value_name = "LANG")]
    pub svg_lang: LangArg,
}

impl SvgArgs {
    /// The chart goes to stdout instead of the report (`--svg -`).
    pub fn to_stdout(&self) -> bool {
        self.svg.as_deref() == Some("-")
    }

    /// Render and deliver the chart when one was asked for: written to the
    /// file (`Ok(None)`: the report follows as usual), or, for `--svg -`,
    /// returned as the whole output with the command's exit `code`.
    pub fn emit(
        &self,
        code: u8,
        render: impl FnOnce(Lang) -> anyhow::Result<String>,
    ) -> anyhow::Result<Option<Outcome>> {
        let Some(path) = &self.svg else { return Ok(None) };
        let svg = render(self.svg_lang.into())?;
        if path == "-" {
            return Ok(Some(Outcome { stdout: svg, code }));
        }
        std::fs::write(path, svg).with_context(|| format!("--svg {path}: cannot write")).on_field("svg")?;
        Ok(None)
    }
}
