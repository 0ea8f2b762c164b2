//! What the planner is asked: the model, the user's job, the catalogue, the
//! card the user has, the method changes allowed and the job's size.

use super::pricing::PriceBook;
use super::search::MemKey;
use super::time::TimeModel;
use vramfit_core::hardware::GpuSpec;
use vramfit_core::model::ModelSpec;
use vramfit_core::workload::Workload;

/// Method changes the user allows (`--allow lora,qlora,quant`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Allow {
    pub lora: bool,
    pub qlora: bool,
    /// inference: int8/int4 weights and an fp8 KV cache
    pub quant: bool,
}

/// How big the job is.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Job {
    /// no size given: rank by monthly price
    #[default]
    None,
    /// tokens to train on (or to generate)
    Tokens(u64),
    /// hours of rental
    Hours(f64),
}

/// Everything the planner needs.
#[derive(Debug, Clone)]
pub struct PlanRequest<'a> {
    pub model: &'a ModelSpec,
    /// the user's job as given (its GPU count is the user's, the baseline)
    pub workload: &'a Workload,
    pub gpus: &'a [GpuSpec],
    pub book: &'a PriceBook,
    /// the card the user has (path 1)
    pub have: Option<&'a GpuSpec>,
    pub allow: Allow,
    pub job: Job,
    /// rows in the ranked table, per currency
    pub top: usize,
    pub time: TimeModel,
    /// only setups this accepts are searched (`--emit`: what the launcher can express)
    pub key_filter: Option<fn(&MemKey) -> bool>,
}
