//! `vramfit mig` (being built).

use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct MigArgs {}

pub fn run(_args: MigArgs) -> anyhow::Result<Outcome> {
    anyhow::bail!("'vramfit mig' is not built yet")
}
