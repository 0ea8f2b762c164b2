//! `vramfit check` (being built).

use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct CheckArgs {}

pub fn run(_args: CheckArgs) -> anyhow::Result<Outcome> {
    anyhow::bail!("'vramfit check' is not built yet")
}
