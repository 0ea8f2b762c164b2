//! `vramfit diagnose` (being built).

use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct DiagnoseArgs {}

pub fn run(_args: DiagnoseArgs) -> anyhow::Result<Outcome> {
    anyhow::bail!("'vramfit diagnose' is not built yet")
}
