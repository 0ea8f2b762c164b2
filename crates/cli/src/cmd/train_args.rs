//! Training flags of `vramfit estimate` / `vramfit plan` (being built).

#[derive(clap::Args, Debug, Clone, Default)]
pub struct TrainArgs {}
