//! `vramfit plan` (being built).

use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct PlanArgs {}

pub fn run(_args: PlanArgs) -> anyhow::Result<Outcome> {
    anyhow::bail!("'vramfit plan' is not built yet")
}
