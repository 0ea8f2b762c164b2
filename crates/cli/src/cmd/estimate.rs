//! `vramfit estimate` (being built).

use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct EstimateArgs {}

pub fn run(_args: EstimateArgs) -> anyhow::Result<Outcome> {
    anyhow::bail!("'vramfit estimate' is not built yet")
}
