//! `vramfit calibrate` (being built).

use crate::Outcome;

#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {}

pub fn run(_args: CalibrateArgs) -> anyhow::Result<Outcome> {
    anyhow::bail!("'vramfit calibrate' is not built yet")
}
