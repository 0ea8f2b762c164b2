//! What the planner is asked: the model, the user's job, the catalogue, the
//! card the user has, the method changes allowed, the job's size and the
//! launcher the plan must be runnable by.

use crate::emit::Launcher;
use crate::pricing::PriceBook;
use crate::time::{Requests, TimeModel};
use crate::types::{Allow, Job};
use vramfit_core::hardware::GpuSpec;
use vramfit_core::model::ModelSpec;
use vramfit_core::workload::{Engine, Task, Workload};

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
    /// the launcher the plan must be runnable by (`--emit`): only setups it
    /// can express are searched (None: every setup)
    pub launcher: Option<Launcher>,
    /// serving: tokens each request generates (`--output-len`; the rest of
    /// the context is its prompt); None: half the context, assumed
    pub output_len: Option<u64>,
    /// the user pinned one GPU (`--gpus 1`): only one-GPU setups, reported as the layout given
    pub one_gpu: bool,
    /// the serving engine was not given: [`assumed_serving_engine`] chose
    /// the workload's, and the report says so
    pub engine_assumed: bool,
    /// training: the user gave the checkpointing (`--checkpointing`); with a
    /// pinned layout it is kept, so a plan of a published run's layout runs
    /// that run's recompute (issue 21: the compared setup must not differ)
    pub checkpointing_given: bool,
}

/// The engine a served job is planned with when the user names none, if not
/// transformers: vLLM for a mixture-of-experts model. What decides such a
/// model's fit and speed is expert parallelism and data-parallel attention,
/// which transformers' `generate` has no form of (its MoE blocks loop over
/// the experts on each card, `MixtralSparseMoeBlock.forward`); the engines
/// that serve DeepSeek-V3, Qwen3-MoE and gpt-oss in production are vLLM
/// (`--enable-expert-parallel`) and SGLang (`--ep-size`), and vLLM is the
/// one vramfit's other defaults already follow. `--engine transformers`
/// plans with `generate` all the same.
pub fn assumed_serving_engine(model: &ModelSpec) -> Option<Engine> {
    model.moe.as_ref().filter(|m| m.num_experts > 1).map(|_| Engine::Vllm)
}

impl PlanRequest<'_> {
    /// The requests a serving plan is timed for (None: training, or an output
    /// that leaves no prompt).
    pub fn requests(&self) -> Option<Requests> {
        match &self.workload.task {
            Task::Inference(s) => Requests::of(s.context, self.output_len),
            Task::Train(_) => None,
        }
    }
}
