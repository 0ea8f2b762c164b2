//! Errors of the pure core: always name the field and what was expected.
//!
//! A leaf module (it imports nothing from the crate), so every other module
//! can return these errors without import cycles.

use std::fmt;
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum CoreError {
    /// A byte count or product did not fit in 64 bits.
    #[error("{what} overflows 64-bit byte arithmetic (more than 16 EiB): the inputs are absurdly large")]
    Overflow { what: String },
    /// A model-config value that is present but unusable (zero, contradictory,
    /// out of range); `field` is the config.json key.
    #[error("invalid {field}: {reason}")]
    Invalid { field: String, reason: String },
    /// A workload that breaks a rule of `crate::workload::validate`.
    #[error(transparent)]
    Workload(WorkloadError),
    /// A combination the model cannot express (e.g. TP degree that does not divide the heads).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// vramfit broke one of its own invariants: a bug, never the user's input
    /// (the CLI exits 3 for it, docs/exit-codes.md).
    #[error("internal error (a bug in vramfit, please report it with the command line): {0}")]
    Internal(String),
}

impl From<WorkloadError> for CoreError {
    fn from(e: WorkloadError) -> Self {
        CoreError::Workload(e)
    }
}

impl CoreError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        CoreError::Invalid { field: field.into(), reason: reason.into() }
    }
}

/// A workload field an error is about. [`Field::id`] is its stable name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    /// inference prefill batch / training micro-batch per GPU
    Batch,
    Concurrency,
    /// inference tokens per sequence
    Context,
    /// training tokens per sequence
    Seq,
    GradAccum,
    BlockSize,
    /// input features per quantization scale group
    GroupSize,
    Gpus,
    Tp,
    Pp,
    /// expert-parallel degree (MoE serving)
    Ep,
    /// expert-tensor-parallel degree (MoE training under Megatron)
    Etp,
    /// data-parallel attention groups (MoE serving)
    DpAttention,
    /// ZeRO stage / FSDP strategy
    Sharding,
    SequenceParallel,
    /// optimizer or parameter offload
    Offload,
    LoraRank,
    LoraDropout,
    LoraTargets,
    /// weight storage dtype (inference) or the LoRA base dtype (training)
    Dtype,
    KvDtype,
    Margin,
    /// training precision (`--precision`)
    Precision,
    /// training method (`--task train|lora|qlora`)
    Task,
    /// training optimizer (`--optimizer`)
    Optimizer,
    /// context-parallel degree (training)
    Cp,
    /// hybrid sharding: replicas of the ZeRO-3 / FSDP shard group (`--dp-replicate`)
    DpReplicate,
    /// DeepSpeed ZeRO++ hpZ: ranks of the secondary parameter partition (`--hpz`)
    Hpz,
}

impl Field {
    pub const ALL: [Field; 28] = [
        Field::Batch,
        Field::Concurrency,
        Field::Context,
        Field::Seq,
        Field::GradAccum,
        Field::BlockSize,
        Field::GroupSize,
        Field::Gpus,
        Field::Tp,
        Field::Pp,
        Field::Ep,
        Field::Etp,
        Field::DpAttention,
        Field::Sharding,
        Field::SequenceParallel,
        Field::Offload,
        Field::LoraRank,
        Field::LoraDropout,
        Field::LoraTargets,
        Field::Dtype,
        Field::KvDtype,
        Field::Margin,
        Field::Precision,
        Field::Task,
        Field::Optimizer,
        Field::Cp,
        Field::DpReplicate,
        Field::Hpz,
    ];

    /// Stable id of the field. Every id is also the name of the CLI flag
    /// that sets the field, so the plain rendering ([`fmt::Display`]) writes
    /// `--{id}`; the CLI maps an id to the config-file key instead when a
    /// file (a DeepSpeed config) set the value.
    pub fn id(self) -> &'static str {
        match self {
            Field::Batch => "batch",
            Field::Concurrency => "concurrency",
            Field::Context => "context",
            Field::Seq => "seq",
            Field::GradAccum => "grad-accum",
            Field::BlockSize => "block-size",
            Field::GroupSize => "group-size",
            Field::Gpus => "gpus",
            Field::Tp => "tp",
            Field::Pp => "pp",
            Field::Ep => "ep",
            Field::Etp => "etp",
            Field::DpAttention => "dp-attention",
            Field::Sharding => "zero",
            Field::SequenceParallel => "sp",
            Field::Offload => "offload",
            Field::LoraRank => "lora-rank",
            Field::LoraDropout => "lora-dropout",
            Field::LoraTargets => "lora-targets",
            Field::Dtype => "dtype",
            Field::KvDtype => "kv-dtype",
            Field::Margin => "margin",
            Field::Precision => "precision",
            Field::Task => "task",
            Field::Optimizer => "optimizer",
            Field::Cp => "cp",
            Field::DpReplicate => "dp-replicate",
            Field::Hpz => "hpz",
        }
    }
}

/// What is wrong with a workload: the rule broken and the values involved.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadError {
    /// a size of 0
    Zero {
        field: Field,
    },
    /// a size above its limit (see [`crate::workload::limits`])
    TooLarge {
        field: Field,
        value: u64,
        limit: u64,
    },
    GpusNotMultiple {
        gpus: u64,
        tp: u64,
        pp: u64,
    },
    TpSplitsHeads {
        tp: u64,
        heads: u64,
    },
    PpOverLayers {
        pp: u64,
        layers: u64,
    },
    SequenceParallelWithoutTp,
    /// interleaved pipeline stages that Megatron-LM's schedule refuses
    VirtualStages {
        virtual_stages: u64,
        pp: u64,
        layers: u64,
        micro_batches: u64,
    },
    /// DeepSpeed's pipeline engine refuses ZeRO-2/3
    ShardedPipeline {
        stage: u8,
        pp: u64,
    },
    ParamOffloadNeedsZero3,
    OptimizerOffloadNeedsZero,
    /// sharding, offload or sequence parallelism on an inference job
    TrainingOnly {
        field: Field,
    },
    BatchOverConcurrency {
        batch: u64,
        concurrency: u64,
    },
    KvDtype {
        dtype: &'static str,
    },
    /// integer storage without a quantization format
    IntegerWeights {
        dtype: &'static str,
    },
    /// the quantization format itself is unusable
    Quantization {
        reason: String,
    },
    /// a LoRA base stored in something a kernel cannot compute in
    LoraBaseDtype {
        dtype: &'static str,
    },
    Probability {
        field: Field,
        value: f64,
    },
    NoLoraTargets,
    UnknownLoraTarget {
        name: String,
        family: &'static str,
        linears: Vec<String>,
    },
    /// a PEFT `target_modules` regular expression that does not compile, or matches no module
    LoraRegex {
        pattern: String,
        reason: String,
    },
    /// a learned position table cannot index past its last row
    LearnedPositions {
        field: Field,
        tokens: u64,
        model: String,
        positions: u64,
    },
    Margin {
        value: f64,
    },
    /// expert parallelism on a setup that does not run it
    ExpertParallel {
        ep: u64,
        reason: String,
    },
    /// expert-tensor parallelism on a setup that does not run it
    ExpertTensorParallel {
        etp: u64,
        reason: String,
    },
    /// context parallelism on a setup that does not run it
    ContextParallel {
        cp: u64,
        reason: String,
    },
    /// data-parallel attention on a setup that does not run it
    DpAttention {
        dp: u64,
        reason: String,
    },
    /// hybrid sharding (HSDP) on a layout that cannot run it
    HybridShard {
        replicate: u64,
        reason: String,
    },
    /// ZeRO++ hpZ on a layout that cannot run it
    Hpz {
        hpz: u64,
        reason: String,
    },
    /// a setting the training framework named by `--engine` does not run
    EngineRefuses {
        field: Field,
        engine: &'static str,
        reason: String,
    },
    /// the card cannot compute what `field` asks for (FP8 training without FP8 tensor cores)
    CardCannot {
        field: Field,
        card: String,
        reason: String,
    },
}

impl WorkloadError {
    /// The field the error is about.
    pub fn field(&self) -> Field {
        use WorkloadError::*;
        match self {
            Zero { field } | TooLarge { field, .. } | TrainingOnly { field } | Probability { field, .. } => *field,
            EngineRefuses { field, .. } | CardCannot { field, .. } => *field,
            LearnedPositions { field, .. } => *field,
            GpusNotMultiple { .. } => Field::Gpus,
            TpSplitsHeads { .. } => Field::Tp,
            PpOverLayers { .. } | VirtualStages { .. } => Field::Pp,
            SequenceParallelWithoutTp => Field::SequenceParallel,
            ShardedPipeline { .. } => Field::Sharding,
            ParamOffloadNeedsZero3 | OptimizerOffloadNeedsZero => Field::Offload,
            BatchOverConcurrency { .. } => Field::Batch,
            KvDtype { .. } => Field::KvDtype,
            IntegerWeights { .. } | Quantization { .. } | LoraBaseDtype { .. } => Field::Dtype,
            NoLoraTargets | UnknownLoraTarget { .. } | LoraRegex { .. } => Field::LoraTargets,
            Margin { .. } => Field::Margin,
            ExpertParallel { .. } => Field::Ep,
            ExpertTensorParallel { .. } => Field::Etp,
            DpAttention { .. } => Field::DpAttention,
            ContextParallel { .. } => Field::Cp,
            HybridShard { .. } => Field::DpReplicate,
            Hpz { .. } => Field::Hpz,
        }
    }

    /// The error as a sentence, with `name` naming each field it mentions.
    pub fn render(&self, name: &dyn Fn(Field) -> String) -> String {
        use WorkloadError::*;
        let f = |x: Field| name(x);
        match self {
            Zero { field } => format!("{} must be at least 1", f(*field)),
            TooLarge { field, value, limit } => format!("{} {value} is absurdly large (limit {limit})", f(*field)),
            GpusNotMultiple { gpus, tp, pp } => format!(
                "{} {gpus} is not a multiple of {} {tp} × {} {pp} = {}",
                f(Field::Gpus),
                f(Field::Tp),
                f(Field::Pp),
                tp.saturating_mul(*pp)
            ),
            TpSplitsHeads { tp, heads } => {
                format!("{} {tp}: the tensor-parallel degree does not divide the {heads} attention heads", f(Field::Tp))
            }
            PpOverLayers { pp, layers } => format!("{} {pp}: {pp} pipeline stages for {layers} layers", f(Field::Pp)),
            VirtualStages { virtual_stages, pp, layers, micro_batches } => format!(
                "{} {pp} with {virtual_stages} virtual stages per rank: the interleaved schedule needs 2 or more stages, the {layers} layers split into {pp} × {virtual_stages} equal chunks and the {micro_batches} micro-batches a multiple of {pp}",
                f(Field::Pp)
            ),
            SequenceParallelWithoutTp => {
                format!("{} (sequence parallelism) needs {} 2 or more", f(Field::SequenceParallel), f(Field::Tp))
            }
            ShardedPipeline { stage, pp } => format!(
                "{} {stage} with {} {pp}: DeepSpeed's pipeline engine does not support ZeRO-2/3 with pipeline parallelism (ZeRO-1 + PP is allowed)",
                f(Field::Sharding),
                f(Field::Pp)
            ),
            ParamOffloadNeedsZero3 => format!(
                "parameter offload ({}) needs ZeRO stage 3 ({} 3, or FSDP FULL_SHARD)",
                f(Field::Offload),
                f(Field::Sharding)
            ),
            OptimizerOffloadNeedsZero => format!(
                "{} needs sharded optimizer states: ZeRO stage 1 or more ({} 1|2|3, or FSDP)",
                f(Field::Offload),
                f(Field::Sharding)
            ),
            TrainingOnly { field } => format!("{} applies to training only", f(*field)),
            BatchOverConcurrency { batch, concurrency } => format!(
                "{} {batch} is more than {} {concurrency}: every sequence in a batch holds a KV cache (concurrency must be ≥ batch)",
                f(Field::Batch),
                f(Field::Concurrency)
            ),
            KvDtype { dtype } => {
                format!("{} {dtype} is not a KV cache dtype (fp32, fp16, bf16, fp8)", f(Field::KvDtype))
            }
            IntegerWeights { dtype } => {
                format!("{} {dtype}: integer weight storage needs a quantization format", f(Field::Dtype))
            }
            Quantization { reason } => format!("{}: {reason}", f(Field::Dtype)),
            LoraBaseDtype { dtype } => format!(
                "{} {dtype} for the LoRA base: a frozen base is stored in fp32, fp16 or bf16 (4-bit: QLoRA)",
                f(Field::Dtype)
            ),
            Probability { field, value } => format!("{} {value} is not a probability in [0, 1)", f(*field)),
            NoLoraTargets => format!("{}: no target modules given", f(Field::LoraTargets)),
            UnknownLoraTarget { name, family, linears } => format!(
                "{}: '{name}' is not a linear module of this {family} model; its linears are: {}",
                f(Field::LoraTargets),
                linears.join(", ")
            ),
            LoraRegex { pattern, reason } => format!(
                "{}: the regular expression '{}' {reason}",
                f(Field::LoraTargets),
                pattern.escape_debug()
            ),
            LearnedPositions { field, tokens, model, positions } => format!(
                "{} {tokens}: {tokens} tokens per sequence, but {model} has a learned position table of {positions} positions: longer sequences cannot run",
                f(*field)
            ),
            Margin { value } => format!("{} {value} is not a fraction between 0 and 10", f(Field::Margin)),
            ExpertParallel { ep, reason } => format!("{} {ep}: {reason}", f(Field::Ep)),
            ExpertTensorParallel { etp, reason } => format!("{} {etp}: {reason}", f(Field::Etp)),
            ContextParallel { cp, reason } => format!("{} {cp}: {reason}", f(Field::Cp)),
            DpAttention { dp, reason } => format!("{} {dp}: {reason}", f(Field::DpAttention)),
            HybridShard { replicate, reason } => format!("{} {replicate}: {reason}", f(Field::DpReplicate)),
            Hpz { hpz, reason } => format!("{} {hpz}: {reason}", f(Field::Hpz)),
            EngineRefuses { field, engine, reason } => format!("{} with --engine {engine}: {reason}", f(*field)),
            CardCannot { field, card, reason } => format!("{} on {card}: {reason}", f(*field)),
        }
    }
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(&|x| format!("--{}", x.id())))
    }
}

impl std::error::Error for WorkloadError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_ids_are_distinct() {
        let mut ids: Vec<&str> = Field::ALL.iter().map(|f| f.id()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), Field::ALL.len());
    }

    #[test]
    fn rendered_with_any_names() {
        let e = WorkloadError::ShardedPipeline { stage: 3, pp: 2 };
        assert_eq!(e.field(), Field::Sharding);
        let keys =
            |f: Field| if f == Field::Sharding { "zero_optimization.stage".to_string() } else { f.id().to_string() };
        assert!(e.render(&keys).starts_with("zero_optimization.stage 3 with pp 2: DeepSpeed"));
        assert!(e.to_string().starts_with("--zero 3 with --pp 2: DeepSpeed"));
        let e = WorkloadError::Zero { field: Field::Gpus };
        assert_eq!(e.to_string(), "--gpus must be at least 1");
    }
}
