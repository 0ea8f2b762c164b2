//! What is done with a model: the task, its sizes and dtypes, how it is
//! split over GPUs, and the runtime overhead assumed per process. Plain
//! data, its defaults ([`defaults`]), its limits ([`limits`]) and the one
//! check of it ([`validate()`]). The formulas that size it live in
//! `crate::infer` (with `crate::kv` and `crate::serving`) and `crate::train`,
//! which import from here (never the other way round).

pub mod autoep;
pub mod defaults;
mod engine;
mod inference;
pub mod limits;
mod parallel;
mod policy;
mod stages;
mod training;
pub mod validate;

pub use engine::{
    BatchBasis, CardRule, Engine, EngineChoice, EngineKind, EngineVersion, Framework, FrameworkFacts, GraphCapture,
    GraphSizes, ProfileTokens, QloraBase, ServingCard, ServingDefaults, ServingEngine, ServingFacts, Sharder,
    SpeculativeAlgorithm, VllmEntry, GRAPH_BYTES_PER_LAYER_GRAPH, SAMPLER_FUSED_BYTES, SAMPLER_SORT_BYTES,
    VLLM_GPU_UTIL_0_21, VLLM_NON_TORCH,
};
pub use inference::{InferenceSetup, PrefillLogits};
pub use parallel::{Offload, Parallelism, Sharding};
pub use policy::{LossPath, SlidingWindowCache};
pub use stages::{megatron_stage_split, StageSplit};
pub use training::{
    AttentionImpl, Bnb4Type, Checkpointing, CommSetup, LoraSetup, LoraTargets, Optimizer, Precision, SelectivePolicy,
    TrainKind, TrainSetup,
};
pub use validate::{validate, Field, WorkloadError};

use crate::runtime::RuntimeSetup;
use serde::{Deserialize, Serialize};

/// A job on a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub task: Task,
    pub parallelism: Parallelism,
    pub runtime: RuntimeSetup,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            task: Task::Inference(InferenceSetup::default()),
            parallelism: Parallelism::default(),
            runtime: RuntimeSetup::default(),
        }
    }
}

impl Workload {
    /// The dtype the job computes in: a training precision's compute dtype,
    /// or the dtype inference dequantizes its weights to. A card without
    /// native bf16 cannot run a bf16 job as given (the planner refuses it).
    pub fn compute_dtype(&self) -> crate::dtype::DType {
        match &self.task {
            Task::Train(t) => t.precision.compute_dtype(),
            Task::Inference(s) => s.weight_dtype_compute(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "task")]
pub enum Task {
    Inference(InferenceSetup),
    Train(TrainSetup),
}
