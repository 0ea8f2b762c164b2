//! A plan's software and parallel setup as typed values ([`SetupSummary`]),
//! and what it changes against the user's job ([`Switch`]). Values stay
//! typed here; the report renders them (JSON spellings are the serde names,
//! equal to each type's `name()`/`key()`; a dtype is written by its
//! [`DType::name`], a switch by its `Display`).

use crate::types::{global_batch, pipeline_min_micro_batches, PP_MICRO_BATCHES_PER_STAGE};
use serde::{Serialize, Serializer};
use std::fmt;
use vramfit_core::dtype::DType;
use vramfit_core::workload::{Checkpointing, Offload, Optimizer, Precision, Sharding, Task, TrainKind, Workload};

/// What is run: a training method or inference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    Full,
    Lora,
    Qlora,
    Inference,
}

impl Method {
    pub const ALL: [Method; 4] = [Method::Full, Method::Lora, Method::Qlora, Method::Inference];

    pub fn name(self) -> &'static str {
        match self {
            Method::Full => "full",
            Method::Lora => "lora",
            Method::Qlora => "qlora",
            Method::Inference => "inference",
        }
    }

    pub fn is_training(self) -> bool {
        self != Method::Inference
    }
}

impl From<TrainKind> for Method {
    fn from(k: TrainKind) -> Method {
        match k {
            TrainKind::Full => Method::Full,
            TrainKind::Lora => Method::Lora,
            TrainKind::Qlora => Method::Qlora,
        }
    }
}

/// The software and parallel setup of a plan (docs/plan.md "SetupSummary").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetupSummary {
    pub method: Method,
    /// training only
    pub precision: Option<Precision>,
    pub optimizer: Option<Optimizer>,
    pub checkpointing: Option<Checkpointing>,
    pub micro_batch: u64,
    pub grad_accum: u64,
    /// sequences per optimizer step over all ranks (inference: resident sequences)
    pub global_batch: u64,
    pub gpus: u64,
    pub tp: u64,
    pub pp: u64,
    pub dp: u64,
    /// inference: independent model copies (each tp × pp GPUs) sharing the sequences
    pub replicas: u64,
    /// inference, MoE: routed experts split whole over this many ranks (absent: 1)
    #[serde(skip_serializing_if = "is_one")]
    pub ep: u64,
    /// training, MoE under Megatron with expert parallelism or an explicit
    /// `--etp`: the expert-tensor-parallel degree, each routed expert split
    /// over this many ranks (Megatron `--expert-tensor-parallel-size`; absent:
    /// the experts split by TP, Megatron's default)
    #[serde(skip_serializing_if = "is_zero")]
    pub etp: u64,
    /// inference, MoE: data-parallel attention groups within the TP ranks (absent: 1)
    #[serde(skip_serializing_if = "is_one")]
    pub dp_attention: u64,
    /// training with pipeline stages: virtual stages per rank of the
    /// interleaved 1F1B schedule (absent: 1, plain 1F1B)
    #[serde(skip_serializing_if = "is_one")]
    pub virtual_stages: u64,
    pub sharding: Sharding,
    /// training: Megatron sequence parallelism with TP (absent: off)
    #[serde(skip_serializing_if = "is_false")]
    pub sequence_parallel: bool,
    pub offload_optimizer: Offload,
    pub offload_params: Offload,
    /// inference weight format: the quantization label, else the dtype
    pub weights: Option<String>,
    /// written as the dtype's name (`fp16`, `fp8`)
    #[serde(serialize_with = "dtype_name")]
    pub kv_dtype: Option<DType>,
    /// training: context-parallel degree, each rank holding seq / cp tokens
    /// of every sequence (absent: 1); GPUs = tp × cp × pp × dp
    #[serde(skip_serializing_if = "is_one")]
    pub cp: u64,
    /// training, hybrid sharding (HSDP): replicas of the ZeRO-3 shard group,
    /// each sharding the states over `dp / dp_replicate` ranks (absent: 1,
    /// sharded over every data-parallel rank)
    #[serde(skip_serializing_if = "is_one")]
    pub dp_replicate: u64,
    /// training, DeepSpeed ZeRO++ hpZ: ranks of the group each secondary 16-bit
    /// partition of the parameters is split over, one machine
    /// (`zero_optimization.zero_hpz_partition_size`; absent: 1, no hpZ)
    #[serde(skip_serializing_if = "is_one")]
    pub hpz: u64,
}

impl SetupSummary {
    /// Data-parallel ranks one replica shards the states over (hybrid
    /// sharding's shard group; every DP rank without it).
    pub fn shard_degree(&self) -> u64 {
        let r = self.dp_replicate.max(1);
        if self.dp.is_multiple_of(r) {
            (self.dp / r).max(1)
        } else {
            self.dp.max(1)
        }
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_one(v: &u64) -> bool {
    *v == 1
}

fn is_false(v: &bool) -> bool {
    !*v
}

/// A dtype as reports write it: [`DType::name`] (`fp16`), not its serde form.
fn dtype_name<S: Serializer>(d: &Option<DType>, s: S) -> Result<S::Ok, S::Error> {
    d.map(DType::name).serialize(s)
}

/// Describe a workload.
pub fn summarize(w: &Workload) -> SetupSummary {
    let p = &w.parallelism;
    let dp = p.dp();
    let common = SetupSummary {
        method: Method::Inference,
        precision: None,
        optimizer: None,
        checkpointing: None,
        micro_batch: 1,
        grad_accum: 1,
        global_batch: 1,
        gpus: p.gpus,
        tp: p.tp,
        pp: p.pp,
        dp,
        replicas: 1,
        ep: p.ep.max(1),
        etp: 0,
        dp_attention: p.dp_attention.max(1),
        virtual_stages: if p.pp > 1 { p.virtual_stages.max(1) } else { 1 },
        sharding: Sharding::None,
        sequence_parallel: p.sequence_parallel,
        offload_optimizer: Offload::None,
        offload_params: Offload::None,
        weights: None,
        kv_dtype: None,
        cp: p.cp.max(1),
        dp_replicate: 1,
        hpz: 1,
    };
    match &w.task {
        Task::Train(t) => SetupSummary {
            method: t.kind.into(),
            precision: Some(t.precision),
            optimizer: Some(t.optimizer),
            checkpointing: Some(t.checkpointing),
            micro_batch: t.batch,
            grad_accum: t.grad_accum,
            global_batch: global_batch(t, p),
            sharding: p.sharding,
            offload_optimizer: p.offload_optimizer,
            offload_params: p.offload_params,
            dp_replicate: p.dp_replicate.max(1),
            hpz: p.hpz.max(1),
            etp: if p.ep > 1 || p.etp > 0 { p.expert_tp() } else { 0 },
            ..common
        },
        Task::Inference(s) => SetupSummary {
            micro_batch: s.batch,
            global_batch: s.concurrency,
            weights: Some(s.weights_label()),
            kv_dtype: Some(s.kv_dtype),
            ..common
        },
    }
}

/// One thing a plan changes against the user's job.
#[derive(Debug, Clone, PartialEq)]
pub enum Switch {
    Method(Method),
    Precision(Precision),
    Optimizer(Optimizer),
    Checkpointing(Checkpointing),
    MicroBatch {
        micro_batch: u64,
        grad_accum: u64,
    },
    /// the global batch the plan runs differs from the one asked (its ranks
    /// cannot split the asked batch): learning rate and schedule need rescaling
    GlobalBatch {
        asked: u64,
        runs: u64,
        /// pipeline stages of the plan: past one, the batch may have been
        /// raised to fill the pipeline ([`pipeline_min_micro_batches`])
        pipeline_stages: u64,
    },
    Weights(String),
    KvDtype(DType),
    OffloadOptimizer(Offload),
    OffloadParams(Offload),
}

impl fmt::Display for Switch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Switch::Method(m) => f.write_str(m.name()),
            Switch::Precision(p) => write!(f, "precision {}", p.name()),
            Switch::Optimizer(o) => write!(f, "optimizer {}", o.name()),
            Switch::Checkpointing(c) => write!(f, "checkpointing {}", c.name()),
            Switch::MicroBatch { micro_batch, grad_accum } => {
                write!(f, "micro-batch {micro_batch} × accum {grad_accum}")
            }
            Switch::GlobalBatch { asked, runs, pipeline_stages } => {
                let fill = pipeline_min_micro_batches(*pipeline_stages);
                if *pipeline_stages > 1 && *asked < fill {
                    write!(
                        f,
                        "global batch {asked} → {runs} (a pipeline of {pipeline_stages} stages runs at least {fill} micro-batches a step, {PP_MICRO_BATCHES_PER_STAGE} per stage, to keep its idle bubble under a quarter of the step: rescale the learning rate and schedule)"
                    )
                } else {
                    write!(
                        f,
                        "global batch {asked} → {runs} (the ranks cannot split {asked} sequences: rescale the learning rate and schedule)"
                    )
                }
            }
            Switch::Weights(w) => write!(f, "weights {w}"),
            Switch::KvDtype(d) => write!(f, "kv {d}"),
            Switch::OffloadOptimizer(o) => write!(f, "offload optimizer → {}", o.key()),
            Switch::OffloadParams(o) => write!(f, "offload params → {}", o.key()),
        }
    }
}

/// A switch is written as its words (`micro-batch 1 × accum 8`).
impl Serialize for Switch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// `b` when it differs from `a`.
fn changed<T: PartialEq>(a: Option<T>, b: Option<T>) -> Option<T> {
    if a != b {
        b
    } else {
        None
    }
}

/// What `w` changes against the user's job `base` (empty: the job unchanged).
pub fn switches(base: &Workload, w: &Workload) -> Vec<Switch> {
    let (a, b) = (summarize(base), summarize(w));
    let mut v = Vec::new();
    if a.method != b.method {
        v.push(Switch::Method(b.method));
    }
    v.extend(changed(a.precision, b.precision).map(Switch::Precision));
    v.extend(changed(a.optimizer, b.optimizer).map(Switch::Optimizer));
    v.extend(changed(a.checkpointing, b.checkpointing).map(Switch::Checkpointing));
    if a.micro_batch != b.micro_batch && b.method.is_training() {
        v.push(Switch::MicroBatch { micro_batch: b.micro_batch, grad_accum: b.grad_accum });
    }
    if a.global_batch != b.global_batch && b.method.is_training() {
        v.push(Switch::GlobalBatch {
            asked: a.global_batch,
            runs: b.global_batch,
            pipeline_stages: w.parallelism.pp.max(1),
        });
    }
    v.extend(changed(a.weights.clone(), b.weights.clone()).map(Switch::Weights));
    v.extend(changed(a.kv_dtype, b.kv_dtype).map(Switch::KvDtype));
    if b.offload_optimizer.is_some() && b.offload_optimizer != a.offload_optimizer {
        v.push(Switch::OffloadOptimizer(b.offload_optimizer));
    }
    if b.offload_params.is_some() && b.offload_params != a.offload_params {
        v.push(Switch::OffloadParams(b.offload_params));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_json_spelling_is_its_name() {
        for m in Method::ALL {
            assert_eq!(serde_json::to_value(m).unwrap(), m.name());
        }
    }
}
