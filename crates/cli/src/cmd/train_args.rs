//! Training flags of `vramfit estimate` / `vramfit plan` (owned by the training work).
//!
//! Interface contract with `cmd::workload_args::WorkloadArgs` (which flattens
//! this struct): the common flags (`--task`, `--batch`, `--seq/--context`,
//! `--gpus`, `--tp`, `--pp`, `--dtype`) are parsed there and handed over as
//! [`Common`]; everything training-only lives here. A DeepSpeed config
//! (`--deepspeed`) and a PEFT adapter config (`--adapter-config`) fill the
//! same fields; a flag that contradicts them is an error naming both values
//! (an explicit flag never silently loses to a file, nor a file to a flag).
//! A flag the user did not give is `None`; defaults come from
//! `vramfit_core::workload::defaults`. Whether the values make a valid
//! workload is decided by `vramfit_core::workload::validate`, once; this
//! module only records where each value came from ([`FieldNames`]) so the
//! error names the flag or the file key.

use crate::bail_on;
use crate::error::{field_error, FieldId, OnField};
use anyhow::Context;
use std::path::{Path, PathBuf};
use vramfit_core::train::{
    AttentionImpl, Bnb4Type, Checkpointing, LoraSetup, LoraTargets, LossPath, Optimizer, Precision, SelectivePolicy,
    TrainKind,
};
use vramfit_core::workload::Engine;
use vramfit_core::workload::{defaults, Field, WorkloadError};
use vramfit_core::{DType, Offload, Parallelism, Sharding, TrainSetup};
use vramfit_ingest::deepspeed::{parse_deepspeed, DeepSpeedConfig, DsValue, MAX_DS_BYTES};
use vramfit_ingest::lora::TargetsError;
use vramfit_ingest::peft::{parse_adapter_config, MAX_ADAPTER_CONFIG_BYTES};

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
    /// micro-batch per GPU (`--batch`), when given
    pub batch: Option<u64>,
    /// tokens per sequence (`--seq` / `--context`)
    pub seq: u64,
    /// total GPUs (`--gpus`)
    pub gpus: u64,
    pub tp: u64,
    pub pp: u64,
    /// expert-parallel degree (`--ep`)
    pub ep: u64,
    /// `--dtype` when given
    pub dtype: Option<DType>,
    /// `--engine` (its behaviour sets the defaults)
    pub engine: Engine,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointingArg {
    None,
    Full,
    /// Megatron's selective recompute: only the attention core is recomputed
    Selective,
    /// torchtitan's per-op policy: every other matmul output and attention kept, the rest recomputed
    SelectiveOps,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossArg {
    /// full logits upcast to fp32 for the loss (transformers, torchtitan)
    Fp32,
    /// transformers ≤ 4.48: the fp32 upcast plus a contiguous shifted copy, live at the end of forward
    Fp32ShiftCopy,
    /// cross-entropy on the 16-bit logits, no upcast
    Bf16,
    /// the loss one chunk at a time (torchtune CEWithChunkedOutputLoss, 8 chunks)
    Chunked,
    /// fused linear + cross-entropy, no logits kept (Liger, cut-cross-entropy)
    Fused,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdapterDtypeArg {
    /// PEFT's default (autocast_adapter_dtype=True)
    Fp32,
    /// the model's dtype (torchtune, LitGPT, PEFT with autocast_adapter_dtype=False)
    Bf16,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bnb4TypeArg {
    Nf4,
    Fp4,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttentionArg {
    Sdpa,
    Flash,
    Eager,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsdpArg {
    /// FULL_SHARD: parameters, gradients and optimizer states sharded (≈ ZeRO-3)
    FullShard,
    /// SHARD_GRAD_OP: gradients and optimizer states sharded (≈ ZeRO-2)
    ShardGradOp,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffloadArg {
    None,
    Cpu,
    Nvme,
}

fn parse_precision(s: &str) -> Result<Precision, String> {
    s.parse()
}

fn parse_optimizer(s: &str) -> Result<Optimizer, String> {
    s.parse()
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct TrainArgs {
    /// Training precision: fp32, amp-bf16, amp-fp16 (autocast over fp32 weights), mixed-bf16,
    /// mixed-fp16 (16-bit weights + fp32 master, DeepSpeed/Megatron), bf16 (pure), mixed-fp8
    /// (mixed-bf16 with FP8 linears: --engine megatron or torchtitan) [default: amp-bf16]
    #[arg(long, value_parser = parse_precision, value_name = "P")]
    pub precision: Option<Precision>,
    /// Optimizer: adamw, adamw-8bit, paged-adamw-8bit, sgd, sgd-momentum, adafactor, lion [default: adamw]
    #[arg(long, value_parser = parse_optimizer, value_name = "O")]
    pub optimizer: Option<Optimizer>,
    /// Micro-batches accumulated per optimizer step [default: 1]
    #[arg(long, value_name = "K")]
    pub grad_accum: Option<u64>,
    /// Activation checkpointing [default: full for --task qlora, as PEFT's prepare_model_for_kbit_training turns it on (none with --no-kbit-prep); none otherwise]
    #[arg(long, value_enum)]
    pub checkpointing: Option<CheckpointingArg>,
    /// Attention kernel: sdpa/flash keep no seq×seq scores; eager does [default: sdpa]
    #[arg(long, value_enum)]
    pub attention: Option<AttentionArg>,
    /// LoRA rank r [default: 16]
    #[arg(long, value_name = "R")]
    pub lora_rank: Option<u64>,
    /// LoRA alpha (scaling only; no memory effect) [default: 2 × rank]
    #[arg(long)]
    pub lora_alpha: Option<f64>,
    /// LoRA target modules: a comma list (q_proj,v_proj) or all-linear [default: all-linear]
    #[arg(long, value_name = "LIST")]
    pub lora_targets: Option<String>,
    /// LoRA dropout probability [default: 0.05]
    #[arg(long)]
    pub lora_dropout: Option<f64>,
    /// A PEFT adapter_config.json (rank, targets, dropout)
    #[arg(long, value_name = "FILE")]
    pub adapter_config: Option<PathBuf>,
    /// ZeRO stage (DeepSpeed): 1 optimizer states, 2 + gradients, 3 + parameters sharded over DP ranks
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    pub zero: Option<u8>,
    /// PyTorch FSDP sharding strategy
    #[arg(long, value_enum)]
    pub fsdp: Option<FsdpArg>,
    /// Megatron sequence parallelism (with --tp > 1): norms and dropout activations split too
    #[arg(long)]
    pub sp: bool,
    /// Hybrid sharding (HSDP, with --zero 3 / --fsdp full-shard): the data-parallel ranks form N
    /// replicas, each sharding the model states over its DP ÷ N ranks (usually one machine)
    #[arg(long, value_name = "N")]
    pub dp_replicate: Option<u64>,
    /// DeepSpeed ZeRO++ hpZ (with --zero 3): a secondary 16-bit copy of the parameters sharded
    /// over groups of N ranks (usually one machine), gathered from inside the group in backward
    #[arg(long, value_name = "N")]
    pub hpz: Option<u64>,
    /// Offload optimizer states (and, with ZeRO-3, parameters) to host RAM or NVMe
    #[arg(long, value_enum)]
    pub offload: Option<OffloadArg>,
    /// A DeepSpeed ds_config.json (ZeRO stage, offload, bf16/fp16, micro-batch, grad accumulation)
    #[arg(long, value_name = "FILE")]
    pub deepspeed: Option<PathBuf>,
    /// Model the first optimizer step of a fresh run (optimizer states not yet allocated in forward/backward)
    #[arg(long)]
    pub first_step: bool,
    /// torch.optim without foreach (no state-sized temporary at the step)
    #[arg(long)]
    pub no_foreach: bool,
    /// Loss path over the logits [default: the engine's: fp32 for transformers/torchtitan, chunked for torchtune/LitGPT]
    #[arg(long, value_enum)]
    pub loss: Option<LossArg>,
    /// LoRA adapter dtype [default: fp32 for PEFT engines, bf16 for torchtune/LitGPT]
    #[arg(long, value_enum)]
    pub adapter_dtype: Option<AdapterDtypeArg>,
    /// QLoRA without PEFT's prepare_model_for_kbit_training (no fp32 casts of norms, embeddings, head)
    #[arg(long)]
    pub no_kbit_prep: bool,
    /// QLoRA and bitsandbytes inference: quantize the output head too (LitGPT; transformers skips
    /// lm_head unless llm_int8_skip_modules=[])
    #[arg(long)]
    pub quantize_lm_head: bool,
    /// QLoRA: bitsandbytes 4-bit type [default: nf4; same memory]
    #[arg(long, value_enum)]
    pub bnb_4bit_type: Option<Bnb4TypeArg>,
    /// QLoRA and NF4 inference: no double quantization of the 4-bit absmax
    /// (bnb_4bit_use_double_quant=False)
    #[arg(long)]
    pub no_double_quant: bool,
    /// Step each parameter inside backward and free its gradient (torchtune optimizer_in_bwd)
    #[arg(long)]
    pub optimizer_in_backward: bool,
    /// Offload saved activations to host memory (torchtune enable_activation_offloading)
    #[arg(long)]
    pub activation_offload: bool,
    /// Context-parallel degree for long sequences (--engine megatron: --context-parallel-size;
    /// torchtitan: context_parallel_degree): each GPU of a CP group holds seq / N tokens of every
    /// sequence, K/V blocks passing round a ring in attention; GPUs = TP × CP × PP × DP [default: 1]
    #[arg(long, value_name = "N")]
    pub cp: Option<u64>,
    /// Expert-tensor-parallel degree of a MoE model under --engine megatron
    /// (--expert-tensor-parallel-size): each routed expert split over N ranks like a TP linear;
    /// ETP × EP must divide GPUs ÷ PP [default: TP without --ep, 1 with it]
    #[arg(long, value_name = "N")]
    pub etp: Option<u64>,
}

/// Where each workload value came from, to name it in an error: the flag
/// (`--batch`, the default), or the key of the config file that set it
/// (`train_micro_batch_size_per_gpu`).
#[derive(Debug, Clone, Default)]
pub struct FieldNames {
    /// the field, the key that set it, the flag that named the file
    from_files: Vec<(Field, String, &'static str)>,
}

impl FieldNames {
    /// `field` was set by the config file of `file_flag` under `key`.
    pub fn set(&mut self, field: Field, key: impl Into<String>, file_flag: &'static str) {
        self.from_files.retain(|(f, _, _)| *f != field);
        self.from_files.push((field, key.into(), file_flag));
    }

    /// The name of `field` for an error message.
    pub fn name(&self, field: Field) -> String {
        match self.from_files.iter().find(|(f, _, _)| *f == field) {
            Some((_, key, _)) => key.clone(),
            None => format!("--{}", field.id()),
        }
    }

    /// The input that set `field`: its flag, or the flag of the file that set it.
    pub fn field(&self, field: Field) -> FieldId {
        match self.from_files.iter().find(|(f, _, _)| *f == field) {
            Some((_, _, file_flag)) => FieldId::flag(file_flag),
            None => field.into(),
        }
    }

    /// A workload error with every field it mentions named by its source.
    pub fn render(&self, e: &WorkloadError) -> String {
        e.render(&|f| self.name(f))
    }
}

/// A training setup, its parallel layout, the notes config files raised
/// and where each value came from.
#[derive(Debug, Clone)]
pub struct TrainBuild {
    pub setup: TrainSetup,
    pub parallelism: Parallelism,
    pub notes: Vec<String>,
    pub names: FieldNames,
    /// the DeepSpeed config's reduce_bucket_size is "auto" (the HF Trainer sets hidden_size²)
    pub reduce_bucket_auto: bool,
}

/// The values a DeepSpeed config shares with the flags, after checking the
/// two agree (`None`: neither said).
#[derive(Debug, Clone, Default)]
struct Merged {
    /// ZeRO stage and the name of its source (`--zero`, `zero_optimization.stage`)
    zero: Option<(u8, &'static str)>,
    precision: Option<Precision>,
    offload_optimizer: Option<Offload>,
    offload_params: Option<Offload>,
    batch: Option<u64>,
    grad_accum: Option<u64>,
    optimizer: Option<Optimizer>,
    /// DeepSpeed's reduce/all-gather buckets and overlap_comm (None: not a DeepSpeed run)
    comm: Option<DsComm>,
    /// ZeRO++ hpZ group (`--hpz`, `zero_optimization.zero_hpz_partition_size`)
    hpz: Option<u64>,
    /// expert-parallel degree when a DeepSpeed config's AutoEP section gives it
    /// (`expert_parallel.autoep_size`); None: `--ep` as given
    ep: Option<u64>,
}

/// The bucket knobs of a DeepSpeed config.
#[derive(Debug, Clone, Copy, Default)]
struct DsComm {
    reduce_bucket: DsValue<u64>,
    allgather_bucket: DsValue<u64>,
    overlap_comm: DsValue<bool>,
}

fn offload(o: OffloadArg) -> Offload {
    match o {
        OffloadArg::None => Offload::None,
        OffloadArg::Cpu => Offload::Cpu,
        OffloadArg::Nvme => Offload::Nvme,
    }
}

/// A flag and a file value for the same thing: the one given, or both when
/// they agree; a contradiction names both values (and is about the flag `field`).
fn agree<T: PartialEq + Copy>(
    field: &'static str,
    flag: Option<T>,
    file: DsValue<T>,
    contradiction: impl Fn(T, T) -> String,
) -> anyhow::Result<Option<T>> {
    match (flag, file) {
        (Some(f), DsValue::Set(v)) if f != v => bail_on!(field, "{}", contradiction(f, v)),
        (Some(f), _) => Ok(Some(f)),
        (None, DsValue::Set(v)) => Ok(Some(v)),
        (None, _) => Ok(None),
    }
}

/// A DeepSpeed config's engine and buckets onto the setup; whether its
/// `reduce_bucket_size` is `"auto"` (the Hugging Face Trainer fills it).
fn ds_comm(setup: &mut TrainSetup, engine: Engine, c: DsComm) -> bool {
    if engine == Engine::Transformers {
        setup.engine = Engine::Deepspeed;
    }
    if let Some(n) = c.reduce_bucket.value() {
        setup.comm.reduce_bucket = n;
    }
    if let Some(n) = c.allgather_bucket.value() {
        setup.comm.allgather_bucket = n;
    }
    if let Some(o) = c.overlap_comm.value() {
        setup.comm.overlap_comm = o;
    }
    c.reduce_bucket == DsValue::Auto
}

/// A config file through the one bounded reader (regular files only, at
/// most `cap` bytes read; docs/limits.md).
fn read_capped(path: &Path, cap: usize, what: &str) -> anyhow::Result<Vec<u8>> {
    Ok(vramfit_input::read_bytes(path, what, cap as u64)?)
}

/// `--lora-targets` through ingest's one LoRA-targets parser.
fn parse_targets(s: &str) -> anyhow::Result<LoraTargets> {
    vramfit_ingest::lora::from_text(s).map_err(|e| {
        let message = match e {
            TargetsError::EmptyPattern => "--lora-targets: re: needs a regular expression after it",
            _ => "--lora-targets: give module names (q_proj,v_proj) or all-linear",
        };
        field_error("lora-targets", anyhow::anyhow!(message))
    })
}

/// The field of a flag named as the messages write it (`--zero` → `zero`).
pub fn flag_field(flag: &'static str) -> FieldId {
    FieldId::flag(flag.trim_start_matches("--"))
}

/// The field a ZeRO stage came from: `--zero`, or the DeepSpeed config.
fn zero_field(source: &'static str) -> FieldId {
    if source == "--zero" {
        FieldId::flag("zero")
    } else {
        FieldId::flag("deepspeed")
    }
}

impl TrainArgs {
    /// The names of every training-only flag the user actually set, in the
    /// order they are declared (`--precision`, `--optimizer`, …). Empty when
    /// none was given; `vramfit estimate --task infer` rejects a non-empty list.
    pub fn given_flags(&self) -> Vec<&'static str> {
        [
            ("--precision", self.precision.is_some()),
            ("--optimizer", self.optimizer.is_some()),
            ("--grad-accum", self.grad_accum.is_some()),
            ("--checkpointing", self.checkpointing.is_some()),
            ("--attention", self.attention.is_some()),
            ("--lora-rank", self.lora_rank.is_some()),
            ("--lora-alpha", self.lora_alpha.is_some()),
            ("--lora-targets", self.lora_targets.is_some()),
            ("--lora-dropout", self.lora_dropout.is_some()),
            ("--adapter-config", self.adapter_config.is_some()),
            ("--zero", self.zero.is_some()),
            ("--fsdp", self.fsdp.is_some()),
            ("--sp", self.sp),
            ("--dp-replicate", self.dp_replicate.is_some()),
            ("--hpz", self.hpz.is_some()),
            ("--offload", self.offload.is_some()),
            ("--deepspeed", self.deepspeed.is_some()),
            ("--first-step", self.first_step),
            ("--no-foreach", self.no_foreach),
            ("--loss", self.loss.is_some()),
            ("--adapter-dtype", self.adapter_dtype.is_some()),
            ("--no-kbit-prep", self.no_kbit_prep),
            ("--quantize-lm-head", self.quantize_lm_head),
            ("--bnb-4bit-type", self.bnb_4bit_type.is_some()),
            ("--no-double-quant", self.no_double_quant),
            ("--optimizer-in-backward", self.optimizer_in_backward),
            ("--activation-offload", self.activation_offload),
            ("--cp", self.cp.is_some()),
            ("--etp", self.etp.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }

    /// Turn the training flags into a training setup, its parallelism, the
    /// notes config files raised ("auto" values, unknown keys) and the
    /// source of each value.
    pub fn build(&self, common: &Common) -> anyhow::Result<TrainBuild> {
        let kind = self.kind(common.task)?;
        let mut notes = Vec::new();
        let mut names = FieldNames::default();
        let merged = match &self.deepspeed {
            Some(path) => self.merge_deepspeed(path, common, &mut names, &mut notes)?,
            None => Merged {
                zero: self.zero.map(|z| (z, "--zero")),
                precision: self.precision,
                offload_optimizer: self.offload.map(offload),
                batch: common.batch,
                grad_accum: self.grad_accum,
                optimizer: self.optimizer,
                hpz: self.hpz,
                ..Merged::default()
            },
        };
        let parallelism = self.parallelism(&merged, common)?;
        let mut setup = self.step(kind, &merged, common)?;
        self.qlora_flags(kind, &mut setup)?;
        if self.checkpointing.is_none() {
            setup.checkpointing = setup.default_checkpointing();
            if setup.checkpointing == Checkpointing::Full {
                notes.push(
                    "checkpointing full: PEFT's prepare_model_for_kbit_training turns it on by default (use_gradient_checkpointing=True); pass --checkpointing none if you call it with False".into(),
                );
            }
        }
        let reduce_bucket_auto = match merged.comm {
            Some(c) => ds_comm(&mut setup, common.engine, c),
            None => false,
        };
        match (kind, common.dtype) {
            // a LoRA base in a dtype no kernel computes in is refused by validate
            (TrainKind::Lora, Some(d)) => setup.base_dtype = Some(d),
            (TrainKind::Qlora, Some(d)) if d.is_compute_float() => {
                bail_on!(
                    "dtype",
                    "--dtype {d} contradicts --task qlora (its base is NF4; the compute dtype follows --precision)"
                )
            }
            _ => {}
        }
        if kind != TrainKind::Full {
            let engine_adapters = setup.lora.adapter_fp32;
            setup.lora = self.lora(&mut names, &mut notes)?;
            setup.lora.adapter_fp32 = match self.adapter_dtype {
                Some(AdapterDtypeArg::Fp32) => true,
                Some(AdapterDtypeArg::Bf16) => false,
                None => engine_adapters,
            };
        }
        Ok(TrainBuild { setup, parallelism, notes, names, reduce_bucket_auto })
    }

    /// The parallel layout: ZeRO (flag or config) or FSDP, and what is offloaded.
    fn parallelism(&self, merged: &Merged, common: &Common) -> anyhow::Result<Parallelism> {
        let sharding = match (merged.zero, self.fsdp) {
            (Some((_, source)), Some(_)) => {
                bail_on!(zero_field(source), "{source} and --fsdp both shard model states; give one of them")
            }
            (Some((z, source)), None) => Sharding::from_stage(z)
                .with_context(|| format!("{source} {z}: a ZeRO stage is 0, 1, 2 or 3"))
                .on_field(zero_field(source))?,
            (None, Some(FsdpArg::FullShard)) => Sharding::Zero3,
            (None, Some(FsdpArg::ShardGradOp)) => Sharding::Zero2,
            (None, None) => Sharding::None,
        };
        let offload_optimizer = merged.offload_optimizer.unwrap_or_default();
        let offload_params = match merged.offload_params {
            Some(o) => o,
            // --offload with ZeRO-3 moves the parameters too (ZeRO-Infinity)
            None if sharding == Sharding::Zero3 && self.deepspeed.is_none() => offload_optimizer,
            None => Offload::None,
        };
        Ok(Parallelism {
            gpus: common.gpus,
            tp: common.tp,
            pp: common.pp,
            ep: merged.ep.unwrap_or(common.ep),
            etp: self.etp.unwrap_or(0),
            dp_attention: 1,
            virtual_stages: 1,
            sharding,
            fsdp: self.fsdp.is_some(),
            sequence_parallel: self.sp,
            offload_optimizer,
            offload_params,
            cp: self.cp.unwrap_or(1),
            dp_replicate: self.dp_replicate.unwrap_or(1),
            hpz: merged.hpz.unwrap_or(1),
        })
    }

    /// The training step of the flags (and the merged config), on the engine's defaults.
    fn step(&self, kind: TrainKind, merged: &Merged, common: &Common) -> anyhow::Result<TrainSetup> {
        let engine_defaults = TrainSetup { kind, ..TrainSetup::default() }.with_engine(common.engine);
        let mut setup = TrainSetup {
            kind,
            precision: precision(merged.precision.or(self.engine_precision(common)), common.dtype, kind)?,
            optimizer: merged.optimizer.unwrap_or_default(),
            batch: merged.batch.unwrap_or(defaults::BATCH),
            seq: common.seq,
            grad_accum: merged.grad_accum.unwrap_or(defaults::GRAD_ACCUM),
            checkpointing: match self.checkpointing {
                None | Some(CheckpointingArg::None) => Checkpointing::None,
                Some(CheckpointingArg::Full) => Checkpointing::Full,
                Some(CheckpointingArg::Selective | CheckpointingArg::SelectiveOps) => Checkpointing::Selective,
            },
            selective: if self.checkpointing == Some(CheckpointingArg::SelectiveOps) {
                SelectivePolicy::Ops
            } else {
                SelectivePolicy::AttentionCore
            },
            attention: match self.attention {
                Some(AttentionArg::Eager) => AttentionImpl::Eager,
                _ => AttentionImpl::Sdpa,
            },
            first_step: self.first_step,
            foreach: !self.no_foreach,
            optimizer_in_backward: self.optimizer_in_backward,
            activation_offload: self.activation_offload,
            ..engine_defaults
        };
        if let Some(l) = self.loss {
            setup.loss = match l {
                LossArg::Fp32 => LossPath::Fp32,
                LossArg::Fp32ShiftCopy => LossPath::Fp32ShiftCopy,
                LossArg::Bf16 => LossPath::Compute,
                LossArg::Chunked => LossPath::Chunked { chunks: 8 },
                LossArg::Fused => LossPath::Fused,
            };
        }
        Ok(setup)
    }

    /// The engine's own precision when neither `--precision` nor `--dtype` says
    /// one (Megatron: `mixed-bf16`).
    fn engine_precision(&self, common: &Common) -> Option<Precision> {
        let p = Precision::default_for(common.engine);
        (common.dtype.is_none_or(|d| d == p.weight_dtype()) && p != Precision::default()).then_some(p)
    }

    /// The QLoRA-only flags onto the setup; refused with another task.
    fn qlora_flags(&self, kind: TrainKind, setup: &mut TrainSetup) -> anyhow::Result<()> {
        let given: Vec<&str> = [
            ("--no-kbit-prep", self.no_kbit_prep),
            ("--quantize-lm-head", self.quantize_lm_head),
            ("--bnb-4bit-type", self.bnb_4bit_type.is_some()),
            ("--no-double-quant", self.no_double_quant),
        ]
        .into_iter()
        .filter_map(|(f, g)| g.then_some(f))
        .collect();
        if kind != TrainKind::Qlora {
            if let Some(f) = given.first() {
                bail_on!(flag_field(f), "{f} only applies to --task qlora (a bitsandbytes 4-bit base)");
            }
            return Ok(());
        }
        if self.no_kbit_prep {
            setup.kbit_prep = false;
        }
        if self.quantize_lm_head {
            setup.qlora_quantize_lm_head = true;
        }
        if self.no_double_quant {
            setup.qlora_double_quant = false;
        }
        if let Some(t) = self.bnb_4bit_type {
            setup.qlora_quant_type = match t {
                Bnb4TypeArg::Nf4 => Bnb4Type::Nf4,
                Bnb4TypeArg::Fp4 => Bnb4Type::Fp4,
            };
        }
        if self.adapter_dtype.is_some() && kind == TrainKind::Full {
            bail_on!("adapter-dtype", "--adapter-dtype only applies to --task lora or qlora");
        }
        Ok(())
    }

    /// The training kind of `--task`; LoRA flags on a full fine-tune are refused.
    fn kind(&self, task: TaskKind) -> anyhow::Result<TrainKind> {
        let kind = match task {
            TaskKind::Train => TrainKind::Full,
            TaskKind::Lora => TrainKind::Lora,
            TaskKind::Qlora => TrainKind::Qlora,
            TaskKind::Infer => bail_on!("task", "training flags need --task train, lora or qlora"),
        };
        let lora_flags = [
            ("--lora-rank", self.lora_rank.is_some()),
            ("--lora-alpha", self.lora_alpha.is_some()),
            ("--lora-targets", self.lora_targets.is_some()),
            ("--lora-dropout", self.lora_dropout.is_some()),
            ("--adapter-config", self.adapter_config.is_some()),
            ("--adapter-dtype", self.adapter_dtype.is_some()),
        ];
        if kind == TrainKind::Full {
            if let Some((f, _)) = lora_flags.iter().find(|(_, given)| *given) {
                bail_on!(
                    flag_field(f),
                    "{f} only applies to --task lora or qlora (this is --task train, a full fine-tune)"
                );
            }
        }
        Ok(kind)
    }

    /// Read `--deepspeed` and merge it with the flags that set the same
    /// values: a flag and the file must agree (both values named if not).
    fn merge_deepspeed(
        &self,
        path: &Path,
        common: &Common,
        names: &mut FieldNames,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<Merged> {
        let file = path.display().to_string();
        let bytes = read_capped(path, MAX_DS_BYTES, "a DeepSpeed config").on_field("deepspeed")?;
        let ds = parse_deepspeed(&bytes, &file).on_field("deepspeed")?;
        let zero_flag = self.zero.map(|z| (z, "--zero"));
        let zero = match (zero_flag, ds.zero_stage) {
            (Some((z, flag)), DsValue::Set(stage)) if z != stage => {
                bail_on!("zero", "{flag} {z} contradicts zero_optimization.stage {stage} in {file}")
            }
            (Some(z), _) => Some(z),
            (None, DsValue::Set(stage)) => {
                names.set(Field::Sharding, "zero_optimization.stage", "deepspeed");
                Some((stage, "zero_optimization.stage"))
            }
            (None, _) => None,
        };
        let precision = match (self.precision, ds_precision(&ds)) {
            (Some(p), Some(dp)) if p.compute_dtype() != dp.compute_dtype() => bail_on!(
                "precision",
                "--precision {} contradicts {file} ({} enabled)",
                p.name(),
                if dp == Precision::Fp32 { "neither bf16 nor fp16" } else { dp.name() }
            ),
            (Some(p), _) => Some(p),
            (None, dp) => dp,
        };
        let offload_key = "zero_optimization.offload_optimizer.device";
        let offload_optimizer = agree("offload", self.offload.map(offload), ds.offload_optimizer, |f, v| {
            format!("--offload {f:?} contradicts {offload_key} {v:?} in {file}")
        })?;
        if self.offload.is_none() && ds.offload_optimizer.value().is_some() {
            names.set(Field::Offload, offload_key, "deepspeed");
        }
        let offload_params = ds.offload_param.value();
        if offload_params.is_some_and(|o| o != Offload::None) && self.offload.is_none() {
            names.set(Field::Offload, "zero_optimization.offload_param.device", "deepspeed");
        }
        let batch = agree("batch", common.batch, ds.micro_batch, |f, v| {
            format!("--batch {f} contradicts train_micro_batch_size_per_gpu {v} in {file}: give one of them")
        })?;
        if common.batch.is_none() && ds.micro_batch.value().is_some() {
            names.set(Field::Batch, "train_micro_batch_size_per_gpu", "deepspeed");
        }
        let grad_accum = agree("grad-accum", self.grad_accum, ds.grad_accum, |f, v| {
            format!("--grad-accum {f} contradicts gradient_accumulation_steps {v} in {file}")
        })?;
        if self.grad_accum.is_none() && ds.grad_accum.value().is_some() {
            names.set(Field::GradAccum, "gradient_accumulation_steps", "deepspeed");
        }
        let optimizer = self.ds_optimizer(&ds, &file, notes)?;
        notes.extend(ds.notes.iter().map(|n| format!("{file}: {n}")));
        if !ds.unknown_keys.is_empty() {
            notes.push(format!("{file}: keys not used by vramfit: {}", ds.unknown_keys.join(", ")));
        }
        if ds.activation_checkpointing && self.checkpointing.is_none() {
            notes.push(format!(
                "{file}: activation_checkpointing is configured but the model decides whether it checkpoints; pass --checkpointing full to size it"
            ));
        }
        let comm = Some(DsComm {
            reduce_bucket: ds.reduce_bucket_size,
            allgather_bucket: ds.allgather_bucket_size,
            overlap_comm: ds.overlap_comm,
        });
        let hpz = self.ds_hpz(&ds, &file, zero, names, notes)?;
        let ep = Self::ds_autoep_of(&ds, &file, common, names)?;
        Ok(Merged { zero, precision, offload_optimizer, offload_params, batch, grad_accum, optimizer, comm, hpz, ep })
    }

    /// `--hpz` against the config's `zero_hpz_partition_size`. DeepSpeed uses the
    /// group under stage 3 only (`DeepSpeedZeroOptimizer_Stage3`,
    /// deepspeed/runtime/zero/stage3.py), so under another stage the key is said
    /// to be unused; with parameter offload its secondary partition lives on the
    /// offload device, which is not modelled: said, and sized as plain ZeRO-3
    /// plus nothing (`--hpz` with offload is refused by name instead).
    fn ds_hpz(
        &self,
        ds: &DeepSpeedConfig,
        file: &str,
        zero: Option<(u8, &'static str)>,
        names: &mut FieldNames,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<Option<u64>> {
        let key = "zero_optimization.zero_hpz_partition_size";
        let hpz =
            agree("hpz", self.hpz, ds.hpz_partition, |f, v| format!("--hpz {f} contradicts {key} {v} in {file}"))?;
        let from_file = self.hpz.is_none() && ds.hpz_partition.value().is_some_and(|n| n > 1);
        if !from_file {
            return Ok(hpz);
        }
        let n = hpz.unwrap_or(1);
        if zero.map(|z| z.0) != Some(3) {
            notes.push(format!("{file}: {key} {n} is used by ZeRO stage 3 only; not applied"));
            return Ok(None);
        }
        if ds.offload_param.value().is_some_and(|o| o != Offload::None) {
            notes.push(format!(
                "{file}: {key} {n} with offload_param: DeepSpeed keeps hpZ's secondary parameter partition on the offload device (2 B × parameters ÷ {n} of host memory per rank), which this estimate does not count"
            ));
            return Ok(None);
        }
        names.set(Field::Hpz, key, "deepspeed");
        Ok(hpz)
    }

    /// `--ep` against the config's DeepSpeed AutoEP section (`expert_parallel`
    /// enabled with `autoep_size` N): the config's N when `--ep` is not given
    /// (or 1), refused when `--ep` says another degree. AutoEP's own rules
    /// (ZeRO 0–2, no TP/PP, a supported model) then apply as to `--ep`, the
    /// errors naming the config key.
    fn ds_autoep_of(
        ds: &DeepSpeedConfig,
        file: &str,
        common: &Common,
        names: &mut FieldNames,
    ) -> anyhow::Result<Option<u64>> {
        let key = "expert_parallel.autoep_size";
        let Some(n) = ds.autoep_size.value() else { return Ok(None) };
        if common.ep > 1 && common.ep != n {
            bail_on!("ep", "--ep {} contradicts {key} {n} in {file}", common.ep);
        }
        if common.ep <= 1 && n > 1 {
            names.set(Field::Ep, key, "deepspeed");
        }
        Ok(Some(n))
    }

    /// `--optimizer` against the config's `optimizer.type` (DeepSpeed's names).
    fn ds_optimizer(
        &self,
        ds: &DeepSpeedConfig,
        file: &str,
        notes: &mut Vec<String>,
    ) -> anyhow::Result<Option<Optimizer>> {
        let Some(t) = &ds.optimizer_type else { return Ok(self.optimizer) };
        let mapped = match t.to_ascii_lowercase().as_str() {
            "adam" | "adamw" | "fusedadam" | "cpuadam" => Some(Optimizer::AdamW),
            "sgd" => Some(Optimizer::Sgd),
            "lion" | "fusedlion" => Some(Optimizer::Lion),
            _ => None,
        };
        match (mapped, self.optimizer) {
            (Some(m), Some(o)) if m != o => {
                bail_on!("optimizer", "--optimizer {} contradicts optimizer.type {t} in {file}", o.name())
            }
            (Some(m), None) => Ok(Some(m)),
            (None, o) => {
                notes.push(format!("{file}: optimizer.type {t} is not modelled; sized as AdamW"));
                Ok(o)
            }
            (Some(_), o) => Ok(o),
        }
    }

    /// The LoRA shape: `--adapter-config` and the `--lora-*` flags (which must agree).
    fn lora(&self, names: &mut FieldNames, notes: &mut Vec<String>) -> anyhow::Result<LoraSetup> {
        let mut lora = LoraSetup::default();
        if let Some(path) = &self.adapter_config {
            let file = path.display().to_string();
            let bytes =
                read_capped(path, MAX_ADAPTER_CONFIG_BYTES, "an adapter_config.json").on_field("adapter-config")?;
            let a = parse_adapter_config(&bytes, &file).on_field("adapter-config")?;
            if let Some(g) = self.lora_rank {
                if g != a.lora.rank {
                    bail_on!("lora-rank", "--lora-rank {g} contradicts r {} in {file}", a.lora.rank);
                }
            }
            if let Some(t) = &self.lora_targets {
                if parse_targets(t)? != a.lora.targets {
                    bail_on!("lora-targets", "--lora-targets {t} contradicts target_modules in {file}");
                }
            }
            notes.extend(a.notes.iter().map(|n| format!("{file}: {n}")));
            names.set(Field::LoraRank, format!("r in {file}"), "adapter-config");
            names.set(Field::LoraTargets, format!("target_modules in {file}"), "adapter-config");
            if self.lora_dropout.is_none() {
                names.set(Field::LoraDropout, format!("lora_dropout in {file}"), "adapter-config");
            }
            lora = a.lora;
        }
        if let Some(r) = self.lora_rank {
            lora.rank = r;
            if self.lora_alpha.is_none() && self.adapter_config.is_none() {
                lora.alpha = defaults::LORA_ALPHA_PER_RANK * r as f64;
            }
        }
        if let Some(a) = self.lora_alpha {
            lora.alpha = a;
        }
        if let Some(t) = &self.lora_targets {
            lora.targets = parse_targets(t)?;
        }
        if let Some(d) = self.lora_dropout {
            lora.dropout = d;
        }
        Ok(lora)
    }
}

/// The precision a DeepSpeed config implies (`bf16`/`fp16` blocks), if any.
fn ds_precision(ds: &DeepSpeedConfig) -> Option<Precision> {
    match (ds.bf16, ds.fp16) {
        (DsValue::Set(true), _) => Some(Precision::MixedBf16),
        (_, DsValue::Set(true)) => Some(Precision::MixedFp16),
        (DsValue::Set(false) | DsValue::Absent, DsValue::Set(false) | DsValue::Absent)
            if ds.bf16 != DsValue::Absent || ds.fp16 != DsValue::Absent =>
        {
            Some(Precision::Fp32)
        }
        _ => None,
    }
}

/// The training precision from `--precision` (or the config) and `--dtype`:
/// for a full fine-tune `--dtype` names the weights' dtype, which must match.
fn precision(given: Option<Precision>, dtype: Option<DType>, kind: TrainKind) -> anyhow::Result<Precision> {
    Ok(match (given, dtype, kind) {
        (Some(p), Some(d), TrainKind::Full) if p.weight_dtype() != d => {
            bail_on!("dtype", "--dtype {d} contradicts --precision {} (its weights are {})", p.name(), p.weight_dtype())
        }
        (None, Some(DType::F32), TrainKind::Full) => Precision::Fp32,
        (None, Some(DType::BF16), TrainKind::Full) => Precision::Bf16,
        (None, Some(d), TrainKind::Full) => {
            bail_on!(
                "dtype",
                "--dtype {d} for a full fine-tune: say --precision mixed-fp16, amp-fp16, amp-bf16, bf16 or fp32"
            )
        }
        (p, _, _) => p.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        train: TrainArgs,
    }

    fn flags(argv: &[&str]) -> Vec<&'static str> {
        let mut v = vec!["vramfit"];
        v.extend_from_slice(argv);
        Cli::try_parse_from(v).expect("flags parse").train.given_flags()
    }

    #[test]
    fn training_flags_with_task_infer_given_flags_empty_by_default() {
        assert!(flags(&[]).is_empty());
        assert!(TrainArgs::default().given_flags().is_empty());
    }

    #[test]
    fn training_flags_with_task_infer_given_flags_names_each_flag() {
        assert_eq!(
            flags(&[
                "--zero",
                "2",
                "--optimizer",
                "sgd",
                "--lora-rank",
                "8",
                "--first-step",
                "--checkpointing",
                "full"
            ]),
            vec!["--optimizer", "--checkpointing", "--lora-rank", "--zero", "--first-step"]
        );
        assert_eq!(flags(&["--deepspeed", "ds.json"]), vec!["--deepspeed"]);
        // an explicit default value still counts as given
        assert_eq!(flags(&["--checkpointing", "none", "--zero", "0"]), vec!["--checkpointing", "--zero"]);
        assert_eq!(
            flags(&[
                "--precision",
                "fp32",
                "--grad-accum",
                "2",
                "--attention",
                "eager",
                "--lora-alpha",
                "16",
                "--lora-targets",
                "q_proj",
                "--lora-dropout",
                "0.1",
                "--adapter-config",
                "a.json",
                "--fsdp",
                "full-shard",
                "--sp",
                "--offload",
                "cpu",
                "--no-foreach",
            ]),
            vec![
                "--precision",
                "--grad-accum",
                "--attention",
                "--lora-alpha",
                "--lora-targets",
                "--lora-dropout",
                "--adapter-config",
                "--fsdp",
                "--sp",
                "--offload",
                "--no-foreach",
            ]
        );
    }
}
