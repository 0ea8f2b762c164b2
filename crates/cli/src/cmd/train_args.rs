//! Training flags of `vramfit estimate` / `vramfit plan` (owned by the training work).
//!
//! Interface contract with `cmd::estimate::WorkloadArgs` (which flattens
//! this struct): the common flags (`--task`, `--batch`, `--seq/--context`,
//! `--gpus`, `--tp`, `--pp`, `--dtype`) are parsed there and handed over as
//! [`Common`]; everything training-only lives here.

use vramfit_core::{DType, ModelSpec, Parallelism, TrainSetup};

/// What `--task` asked for.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskKind {
    #[default]
    Infer,
    Train,
    Lora,
    Qlora,
}

/// The common flags, already parsed.
#[derive(Debug, Clone)]
pub struct Common {
    pub task: TaskKind,
    /// micro-batch per GPU (`--batch`)
    pub batch: u64,
    /// tokens per sequence (`--seq` / `--context`)
    pub seq: u64,
    /// total GPUs (`--gpus`)
    pub gpus: u64,
    pub tp: u64,
    pub pp: u64,
    /// `--dtype` when given
    pub dtype: Option<DType>,
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct TrainArgs {}

impl TrainArgs {
    /// Turn the training flags into a training setup and its parallelism.
    pub fn build(&self, _spec: &ModelSpec, _common: &Common) -> anyhow::Result<(TrainSetup, Parallelism)> {
        anyhow::bail!("training estimates are not built yet")
    }
}
