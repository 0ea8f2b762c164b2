//! What is done with a model: the task, its sizes and dtypes, how it is
//! split over GPUs, and the runtime overhead assumed per process.

use crate::dtype::DType;
use crate::quant::QuantSpec;
use crate::runtime::RuntimeSetup;
use crate::train::TrainSetup;
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "task")]
pub enum Task {
    Inference(InferenceSetup),
    Train(TrainSetup),
}

/// Serving or batch inference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InferenceSetup {
    /// storage dtype of unquantized weights (and of everything that stays 16-bit)
    pub weight_dtype: DType,
    /// weight-only quantization applied (from the checkpoint or `--dtype int4|int8|fp8`)
    pub quant: Option<QuantSpec>,
    pub kv_dtype: DType,
    /// sequences processed together in one prefill step
    pub batch: u64,
    /// sequences whose KV cache is resident at once (≥ batch)
    pub concurrency: u64,
    /// tokens per sequence: prompt + generated
    pub context: u64,
    /// logits materialised in fp32 (an upcast before sampling or loss)
    pub logits_fp32: bool,
    /// paged KV block size in tokens (vLLM default 16)
    pub block_size: u64,
}

impl Default for InferenceSetup {
    fn default() -> Self {
        InferenceSetup {
            weight_dtype: DType::BF16,
            quant: None,
            kv_dtype: DType::F16,
            batch: 1,
            concurrency: 1,
            context: 4096,
            logits_fp32: false,
            block_size: 16,
        }
    }
}

/// ZeRO / FSDP sharding of model states over data-parallel ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sharding {
    /// plain data parallelism: every rank holds everything
    #[default]
    None,
    /// ZeRO-1: optimizer states sharded
    Zero1,
    /// ZeRO-2 / FSDP SHARD_GRAD_OP: + gradients sharded
    Zero2,
    /// ZeRO-3 / FSDP FULL_SHARD: + parameters sharded
    Zero3,
}

impl Sharding {
    pub fn stage(self) -> u8 {
        match self {
            Sharding::None => 0,
            Sharding::Zero1 => 1,
            Sharding::Zero2 => 2,
            Sharding::Zero3 => 3,
        }
    }
    pub fn from_stage(stage: u8) -> Option<Sharding> {
        Some(match stage {
            0 => Sharding::None,
            1 => Sharding::Zero1,
            2 => Sharding::Zero2,
            3 => Sharding::Zero3,
            _ => return None,
        })
    }
}

/// Where offloaded state goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Offload {
    #[default]
    None,
    Cpu,
    Nvme,
}

/// How the job is split over GPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Parallelism {
    /// total GPUs (= tp × pp × dp)
    pub gpus: u64,
    /// tensor-parallel degree (Megatron column/row splits)
    pub tp: u64,
    /// pipeline stages
    pub pp: u64,
    pub sharding: Sharding,
    /// FSDP spelling of the sharding was used (affects names in output only)
    pub fsdp: bool,
    /// Megatron sequence parallelism (with tp > 1)
    pub sequence_parallel: bool,
    /// offload optimizer states (and, with ZeRO-3, parameters)
    pub offload_optimizer: Offload,
    pub offload_params: Offload,
}

impl Default for Parallelism {
    fn default() -> Self {
        Parallelism {
            gpus: 1,
            tp: 1,
            pp: 1,
            sharding: Sharding::None,
            fsdp: false,
            sequence_parallel: false,
            offload_optimizer: Offload::None,
            offload_params: Offload::None,
        }
    }
}

impl Parallelism {
    /// Data-parallel degree.
    pub fn dp(&self) -> u64 {
        let tp_pp = self.tp.max(1) * self.pp.max(1);
        (self.gpus / tp_pp).max(1)
    }
}
