//! The planner's shared data types, in one place: what the user allows
//! ([`Allow`]) and how big the job is ([`Job`]); the identity of a memory
//! configuration ([`MemKey`]) and what the search keeps of its estimate
//! ([`MemSummary`], [`Work`], [`MemEntry`]); how many moving parts it has
//! ([`Complexity`]); a scored candidate ([`Scored`]) and how it is billed
//! ([`Billing`]). Every other file of the crate reads these; this one reads
//! only the time model's and the price book's values.

use crate::pricing::{PriceRange, HOURS_PER_MONTH};
use crate::time::{InferTime, InferWork, StepTime, TrainWork};
use serde::Serialize;
use vramfit_core::dtype::DType;
use vramfit_core::error::CoreError;
use vramfit_core::hardware::PeakKind;
use vramfit_core::infer::engine_need_of;
use vramfit_core::ledger::{Category, Ledger};
use vramfit_core::model::ModelSpec;
use vramfit_core::train::{Checkpointing, Optimizer, Precision, TrainKind, TrainSetup};
use vramfit_core::workload::{Offload, Parallelism, Sharding, Task, Workload};

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
    /// tokens to finish within a number of hours (`--tokens N --hours H`):
    /// plans that take longer are left out, the fastest of them reported
    Deadline { tokens: u64, hours: f64 },
}

impl Job {
    /// Tokens the job must process, if it is sized in tokens.
    pub fn tokens(self) -> Option<u64> {
        match self {
            Job::Tokens(t) | Job::Deadline { tokens: t, .. } => Some(t),
            _ => None,
        }
    }

    /// Hours the job is sized in: a rental length or a deadline.
    pub fn hours(self) -> Option<f64> {
        match self {
            Job::Hours(h) | Job::Deadline { hours: h, .. } => Some(h),
            _ => None,
        }
    }

    /// The deadline, hours, if any.
    pub fn deadline(self) -> Option<f64> {
        match self {
            Job::Deadline { hours, .. } => Some(hours),
            _ => None,
        }
    }
}

/// The job as the planner sizes it: the user's `--tokens`/`--hours`, else a
/// default stated in the output ([`default_job`]).
pub fn default_job(task: &Task) -> Job {
    match task {
        Task::Train(_) => Job::Tokens(DEFAULT_TRAIN_TOKENS),
        Task::Inference(_) => Job::Hours(HOURS_PER_MONTH),
    }
}

/// Training job assumed when none is given: 1B tokens (a few epochs of a
/// fine-tuning set; the size the examples are quoted at).
pub const DEFAULT_TRAIN_TOKENS: u64 = 1_000_000_000;

/// Identity of a memory configuration: everything the estimate depends on
/// besides the model and runtime constants.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemKey {
    /// GPUs of the whole job (all replicas)
    pub gpus: u64,
    pub tp: u64,
    pub pp: u64,
    /// training: virtual pipeline stages per rank (interleaved 1F1B; 1: plain 1F1B)
    pub virtual_stages: u64,
    /// inference: independent model copies sharing the sequences (1 for training)
    pub replicas: u64,
    /// inference, MoE served by vLLM/SGLang: routed experts split whole over
    /// this many ranks (= tp; 1: split by TP like any linear)
    pub ep: u64,
    /// training, MoE under Megatron: expert-tensor-parallel degree
    /// ([`vramfit_core::Parallelism::etp`]; 0: unset, TP without EP, 1 with it)
    pub etp: u64,
    /// inference: data-parallel attention groups within the tp ranks (1: none)
    pub dp_attention: u64,
    pub sharding: Sharding,
    pub offload_optimizer: Offload,
    pub offload_params: Offload,
    /// training, hybrid sharding: replicas of the ZeRO-3 shard group (1: plain sharding)
    pub dp_replicate: u64,
    /// training, DeepSpeed ZeRO++ hpZ: ranks of the secondary parameter partition's
    /// group, one machine (1: none; see [`crate::search::Search::hpz_groups`])
    pub hpz: u64,
    pub train: Option<TrainKey>,
    pub infer: Option<InferKey>,
    /// training: context-parallel degree (1: none; see [`crate::search::Search::cp_variants`])
    pub cp: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TrainKey {
    pub kind: TrainKind,
    pub precision: Precision,
    pub optimizer: Optimizer,
    pub checkpointing: Checkpointing,
    pub micro_batch: u64,
    pub grad_accum: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InferKey {
    /// weight quantization bits applied by the planner (None: as the user gave)
    pub quant_bits: Option<u64>,
    pub kv_dtype: DType,
}

/// The part of a ledger the search needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemSummary {
    pub total: u64,
    pub tensor_peak: u64,
    pub weights: u64,
    pub kv: u64,
    pub model_states: u64,
    /// host RAM for offloaded state, the whole job (`Ledger::cpu_bytes`)
    pub cpu: u64,
    pub params_total: u64,
    pub params_active: u64,
    pub params_trainable: u64,
}

impl MemSummary {
    pub fn of(l: &Ledger) -> Result<MemSummary, CoreError> {
        Ok(MemSummary {
            total: l.total_bytes(),
            tensor_peak: l.tensor_peak_bytes(),
            weights: l.bytes(Category::Weights),
            kv: l.bytes(Category::KvCache),
            model_states: l.model_states_bytes()?,
            cpu: l.cpu_bytes,
            params_total: l.params_total,
            params_active: l.params_active,
            params_trainable: l.params_trainable,
        })
    }

    /// [`MemSummary::of`] for the job `w`: on a serving engine that takes a
    /// fraction of the card (vLLM's `gpu_memory_utilization`, 0.9), `total` is
    /// the card that engine needs ([`vramfit_core::infer::engine_need_of`]), the
    /// rule `estimate` decides its fit by.
    pub fn of_job(spec: &ModelSpec, w: &Workload, l: &Ledger) -> Result<MemSummary, CoreError> {
        let mut m = MemSummary::of(l)?;
        if let Task::Inference(s) = &w.task {
            if let Some(n) = engine_need_of(spec, s, &w.parallelism, &w.runtime, None)? {
                m.total = n.card_bytes;
            }
        }
        Ok(m)
    }
}

/// Hardware-independent work of a setup.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Work {
    Train(TrainWork),
    Infer(InferWork),
}

/// How many moving parts a setup has, simplest first: the seed's order of
/// what a practitioner reaches for (no DeepSpeed > ZeRO-1/2 > ZeRO-3 >
/// TP/PP > CPU offload of the optimizer > of the parameters too).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Complexity {
    /// one GPU, or plain data parallelism (DDP): no DeepSpeed/FSDP
    Plain,
    /// ZeRO-1/2 (FSDP SHARD_GRAD_OP)
    #[serde(rename = "zero_1_2")]
    Zero12,
    /// ZeRO-3 (FSDP FULL_SHARD)
    #[serde(rename = "zero_3")]
    Zero3,
    /// tensor or pipeline parallelism (Megatron-style launchers)
    ModelParallel,
    /// MoE serving with the routed experts split whole over the ranks (EP),
    /// optionally with data-parallel attention: its own class, so EP layouts
    /// are listed beside the TP-only ones of the same cards
    ExpertParallel,
    /// CPU offload of the optimizer (DeepSpeed CPU-Adam)
    OffloadOptimizer,
    /// CPU offload of the parameters too
    OffloadParams,
}

impl Complexity {
    /// The complexity a setup is ranked at on `machines` machines. Within one
    /// machine ZeRO/FSDP is simpler than TP/PP (one config file, any model).
    /// Across machines it is not: every sharded layout needs the same cluster
    /// launch (hostfile, NCCL over the fabric), and ZeRO-3 gathers every
    /// parameter over the fabric each micro-batch, the traffic TP inside the
    /// machine and PP between machines avoid — the guide's advice past ~16
    /// cards is 3D parallelism. So across machines ZeRO-1/2/3 rank as TP/PP do
    /// and, at the same bill, the faster layout wins.
    pub fn ranked_across(self, machines: u64) -> Complexity {
        match self {
            Complexity::Zero12 | Complexity::Zero3 if machines > 1 => Complexity::ModelParallel,
            c => c,
        }
    }

    pub fn of(key: &MemKey) -> Complexity {
        if key.train.is_none() {
            // serving engines split a model over TP/PP ranks with one flag
            return if key.ep > 1 || key.dp_attention > 1 { Complexity::ExpertParallel } else { Complexity::Plain };
        }
        if key.offload_params != Offload::None {
            Complexity::OffloadParams
        } else if key.offload_optimizer != Offload::None {
            Complexity::OffloadOptimizer
        } else if key.tp > 1 || key.pp > 1 || key.cp > 1 {
            // context parallelism splits each sequence: a Megatron/torchtitan layout like TP/PP
            Complexity::ModelParallel
        } else {
            match key.sharding {
                Sharding::Zero3 => Complexity::Zero3,
                Sharding::Zero1 | Sharding::Zero2 => Complexity::Zero12,
                Sharding::None => Complexity::Plain,
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Complexity::Plain => "plain",
            Complexity::Zero12 => "zero_1_2",
            Complexity::Zero3 => "zero_3",
            Complexity::ModelParallel => "model_parallel",
            Complexity::ExpertParallel => "expert_parallel",
            Complexity::OffloadOptimizer => "offload_optimizer",
            Complexity::OffloadParams => "offload_params",
        }
    }

    /// In words, for the reasons.
    pub fn words(self) -> &'static str {
        match self {
            Complexity::Plain => "no sharding",
            Complexity::Zero12 => "ZeRO-1/2",
            Complexity::Zero3 => "ZeRO-3",
            Complexity::ModelParallel => "TP/PP",
            Complexity::ExpertParallel => "expert parallelism",
            Complexity::OffloadOptimizer => "CPU offload of the optimizer",
            Complexity::OffloadParams => "CPU offload of the parameters",
        }
    }

    /// Share a plan of this complexity must save to beat a plain one: the
    /// ranking compares `billed × (1 + premium)`. Sharding adds launch
    /// complexity and failure modes; offload runs 3–5× slower and needs host
    /// RAM, so it wins only when clearly cheaper for the job (optimizer
    /// offload: about half the bill of the plain plan; parameters too: a third).
    pub fn premium(self) -> f64 {
        match self {
            Complexity::Plain => 0.0,
            Complexity::Zero12 => 0.15,
            Complexity::Zero3 => 0.25,
            Complexity::ModelParallel => 0.35,
            // one more engine flag (`--enable-expert-parallel`, `--ep-size`,
            // `--enable-dp-attention`): no premium, but at the same bill the
            // TP-only layout still ranks first (simpler)
            Complexity::ExpertParallel => 0.0,
            Complexity::OffloadOptimizer => 1.0,
            Complexity::OffloadParams => 2.0,
        }
    }
}

/// One estimated setup.
#[derive(Debug, Clone)]
pub struct MemEntry {
    pub key: MemKey,
    /// None: the estimator refused this setup (e.g. TP not dividing the heads)
    pub mem: Option<MemSummary>,
    pub work: Option<Work>,
    /// switches that change what is computed (method, optimizer, precision,
    /// quantization, global batch) against the user's job
    pub inexact: u8,
    pub complexity: Complexity,
    /// sequences per optimizer step (training) as this setup runs it
    pub global_batch: u64,
}

/// How a candidate is billed for the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Billing {
    /// whole months (a monthly-only offer)
    Monthly,
    /// hours, at least the offer's minimum term
    Hourly,
}

/// A scored candidate (only fitting ones are kept).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// the setup's entry in the search's memo
    pub mem: u32,
    /// the setup's moving parts and its switches that change what is computed
    /// (copied from its entry: the ranking reads them)
    pub complexity: Complexity,
    pub inexact: u8,
    pub offer: u32,
    pub gpus: u64,
    pub machines: u64,
    /// index into the price book's upgrades (RAM for offload)
    pub upgrade: Option<u32>,
    pub step: StepTime,
    pub infer: InferTime,
    /// trained or generated tokens per second
    pub tokens_per_s: f64,
    pub monthly: Option<PriceRange>,
    pub hourly: Option<PriceRange>,
    pub hourly_prorated: bool,
    pub job_hours: Option<f64>,
    pub job_tokens: Option<f64>,
    /// hourly rate × job hours (monthly prices prorated over 730 h): a secondary figure
    pub job_cost: Option<PriceRange>,
    /// what the rental bills for the job: whole months of a monthly-only
    /// offer, or hours (at least the minimum term) of an hourly one
    pub billed: Option<PriceRange>,
    pub billing: Billing,
    pub billed_months: Option<u64>,
    /// `billed.mid() × (1 + premiums)`: the ranking key (see [`Complexity::premium`])
    pub rank_cost: f64,
    pub slowdown: f64,
    /// the offer lists no RAM: the setup's host RAM was checked against
    /// [`crate::search::ASSUMED_RAM_GB_PER_GPU`] per GPU
    pub ram_unchecked: bool,
    /// host RAM one machine needs for offload (DeepSpeed's estimator), bytes
    pub host_ram: u64,
    pub peak: PeakKind,
    pub peak_tflops: f64,
}

impl Scored {
    /// The complexity the ranking compares ([`Complexity::ranked_across`]).
    pub fn ranked_complexity(&self) -> Complexity {
        self.complexity.ranked_across(self.machines)
    }

    /// Ranking key inside a currency.
    pub fn cost_key(&self) -> f64 {
        self.rank_cost
    }

    /// The middle of the bill's range (see [`PriceRange::mid`]).
    pub fn billed_mid(&self) -> f64 {
        self.billed.map(|b| b.mid()).unwrap_or(f64::INFINITY)
    }
}

/// Global batch (sequences per optimizer step) of the user's job.
pub fn global_batch(t: &TrainSetup, par: &Parallelism) -> u64 {
    // the data-parallel replicas only: the ranks of a CP group share their sequences
    t.batch.max(1).saturating_mul(t.grad_accum.max(1)).saturating_mul(par.dp().max(1))
}

/// Micro-batches a pipeline of `pp` stages is given per optimizer step at
/// least: 1F1B idles (p − 1) / m of the step (Narayanan et al. 2021, §2.2),
/// so one micro-batch through twelve stages wastes eleven twelfths of the
/// machine. The paper's published runs keep m ≥ 8p (Table 1: 175B, PP 16,
/// 128 micro-batches per pipeline); the planner asks at least 4p (a bubble
/// under 25 %), raising the global batch when the user's is smaller — a
/// change the plan reports, as it does for data-parallel ranks.
pub const PP_MICRO_BATCHES_PER_STAGE: u64 = 4;

/// The fewest sequences one data-parallel rank of a `pp`-stage layout runs per step.
pub fn pipeline_min_micro_batches(pp: u64) -> u64 {
    if pp > 1 {
        pp.saturating_mul(PP_MICRO_BATCHES_PER_STAGE)
    } else {
        1
    }
}
