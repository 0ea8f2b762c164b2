//! Launch configurations for a chosen training plan, for real engines:
//! a DeepSpeed `ds_config.json` (with the `deepspeed` launch and Hugging
//! Face Trainer flags that carry the rest of the plan), a `torchrun` FSDP
//! launch (Trainer flags), an `accelerate` config YAML (one per node for a
//! multi-node job). Every switch of the plan is written in the engine's own
//! terms, or the emitter refuses with the reason ([`check`]); the CLI then
//! asks the planner for the best plan the launcher can express
//! ([`key_expressible`]). Only keys the tools document are written (tests
//! check them against those lists, and `calibration/harness/check_emit.py`
//! loads them with DeepSpeed's `DeepSpeedConfig` and accelerate's
//! `ClusterConfig`):
//!
//! - DeepSpeed: <https://www.deepspeed.ai/docs/config-json/> (`torch_autocast`:
//!   deepspeed/runtime/constants.py)
//! - torchrun: <https://pytorch.org/docs/stable/elastic/run.html>
//! - transformers `TrainingArguments` (`--optim`, `--gradient_checkpointing`,
//!   `--fsdp`, `--fsdp_config`, the DeepSpeed "auto" values the Trainer fills:
//!   transformers/integrations/deepspeed.py `trainer_config_process`)
//! - accelerate: `accelerate config` output (`ClusterConfig` fields; FSDP2:
//!   `fsdp_version: 2`, `fsdp_reshard_after_forward`)
//!
//! Values the plan does not decide (learning rate, betas, weight decay,
//! clipping) are `"auto"` in ds_config (the Trainer fills them from its own
//! arguments); batch sizes are the plan's, and the Trainer flags printed with
//! the config carry the same values (the Trainer refuses a mismatch).

use crate::summary::{Method, SetupSummary};
use crate::types::MemKey;
use serde_json::{json, Map, Value};
use std::fmt::Write;
use vramfit_core::hf::layer_class;
use vramfit_core::model::{Mixer, MlpKind, ModelSpec};
use vramfit_core::train::{Checkpointing, Optimizer, Precision, TrainKind};
use vramfit_core::workload::validate::offload_rules;
use vramfit_core::{DType, Family, Offload, Sharding};

/// Why a config cannot be written.
#[derive(Debug, Clone, PartialEq)]
pub enum EmitError {
    /// the plan is for inference
    NotTraining,
    /// a serving engine's launcher was asked to run a training plan
    NotServing(Launcher),
    /// the plan uses something the tool cannot express (the message says what)
    Unsupported(String),
}

impl std::fmt::Display for EmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmitError::NotTraining => f.write_str(
                "this launcher runs training; this plan is for inference (--emit vllm or --emit sglang serves it)",
            ),
            EmitError::NotServing(l) => write!(f, "{} serves models; this plan is for training", l.name()),
            EmitError::Unsupported(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for EmitError {}

/// The launchers `--emit` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Launcher {
    Deepspeed,
    Torchrun,
    Accelerate,
    /// PyTorch torchtitan: FSDP2 / HSDP, TP, PP on its own model definitions
    Torchtitan,
    /// NVIDIA Megatron-LM `pretrain_gpt.py`: TP, PP, SP, EP, the distributed optimizer
    Megatron,
    /// `vllm serve` (inference): TP, PP, data-parallel replicas
    Vllm,
    /// SGLang's `sglang.launch_server` (inference): TP, PP, data-parallel replicas
    Sglang,
}

impl Launcher {
    pub fn name(self) -> &'static str {
        match self {
            Launcher::Deepspeed => "deepspeed",
            Launcher::Torchrun => "torchrun",
            Launcher::Accelerate => "accelerate",
            Launcher::Torchtitan => "torchtitan",
            Launcher::Megatron => "megatron",
            Launcher::Vllm => "vllm",
            Launcher::Sglang => "sglang",
        }
    }

    /// A serving engine's launcher (inference plans), not a trainer's.
    pub fn serves(self) -> bool {
        matches!(self, Launcher::Vllm | Launcher::Sglang)
    }

    /// Can this launcher train `model` at all? (`Err`: why not, with what it runs.)
    pub fn runs_model(self, model: &str) -> Result<(), String> {
        match self {
            Launcher::Torchtitan => torchtitan_recipe(model).map(|_| ()).ok_or_else(|| {
                let names: Vec<&str> = TORCHTITAN_RECIPES.iter().map(|r| r.0).collect();
                format!(
                    "torchtitan trains its own model definitions; it has no baseline for '{model}' (it has: {})",
                    names.join(", ")
                )
            }),
            _ => Ok(()),
        }
    }

    /// Can this launcher train the model of `spec` at all? [`Self::runs_model`],
    /// and for Megatron the architecture (`megatron_expressible`).
    pub fn runs(self, spec: &ModelSpec) -> Result<(), String> {
        self.runs_model(&spec.name)?;
        match self {
            Launcher::Megatron => megatron_expressible(spec),
            _ => Ok(()),
        }
    }
}

/// Can Megatron-LM's GPT model (`GPTModel` built by `pretrain_gpt.py` from
/// `megatron/training/arguments.py` flags) express this architecture as this
/// emitter writes it? A decoder of full softmax attention (MHA/GQA), RoPE or
/// learned positions, RMSNorm or LayerNorm, a SwiGLU (`--swiglu`) or GELU MLP,
/// optionally routed (and shared) experts. `Err`: what it has that the
/// emitter does not write, by name.
pub fn megatron_expressible(spec: &ModelSpec) -> Result<(), String> {
    let name = &spec.name;
    let no = |what: &str| Err(format!("Megatron's GPT model as written here has no {what}, which {name} uses"));
    if spec.mamba.is_some() || spec.linear_attention.is_some() {
        return no("Mamba or linear-attention mixer (Megatron's hybrid model is another script)");
    }
    if spec.layer_pattern.iter().any(|l| l.mixer != Mixer::Attention) || spec.sliding_window.is_some() {
        return no("sliding-window attention layers");
    }
    if spec.vision.is_some() || spec.encoder.is_some() {
        return no("vision or encoder tower");
    }
    if spec.attention_sinks || spec.attn_output_gate || spec.parallel_residual || spec.lm_head_bias {
        return no("attention sinks, gated attention output, parallel residual or output-head bias");
    }
    // MTP layers are left out of the script (and of the plan), said in its header
    if spec.indexer.is_some() || spec.qk_norm_full_width {
        return no("sparse-attention indexer or full-width q/k norm");
    }
    let act = spec.activation.as_str();
    match spec.mlp {
        MlpKind::Gated if act != "silu" && act != "swish" => {
            no(&format!("gated MLP with {act} (only SwiGLU: --swiglu)"))
        }
        MlpKind::Plain if !act.starts_with("gelu") => no(&format!("MLP with {act} (only GELU)")),
        _ => Ok(()),
    }
}

/// The torchtitan baselines a plan derives from: (vramfit preset, the model
/// package under `torchtitan.models`, its baseline function, the flavor its
/// `model_registry` takes). From `torchtitan/models/*/config_registry.py`
/// (pytorch/torchtitan, August 2026: configurations are Python functions
/// returning `Trainer.Config`, the TOML files are gone).
pub const TORCHTITAN_RECIPES: &[(&str, &str, &str, &str)] = &[
    ("llama-3.1-8b", "llama3", "llama3_8b", "8B"),
    ("llama-3.1-70b", "llama3", "llama3_70b", "70B"),
    ("llama-3.1-405b", "llama3", "llama3_405b", "405B"),
    ("qwen3-0.6b", "qwen3", "qwen3_0_6b", "0.6B"),
    ("qwen3-1.7b", "qwen3", "qwen3_1_7b", "1.7B"),
    ("qwen3-14b", "qwen3", "qwen3_14b", "14B"),
    ("qwen3-32b", "qwen3", "qwen3_32b", "32B"),
    ("qwen3-30b-a3b", "qwen3", "qwen3_30b_a3b", "30B-A3B"),
    ("deepseek-v3", "deepseek_v3", "deepseek_v3_671b", "671B"),
    ("gpt-oss-20b", "gpt_oss", "gpt_oss_20b", "20b"),
    ("gpt-oss-120b", "gpt_oss", "gpt_oss_120b", "120b"),
];

/// Baselines whose model spec converts linears to float8 (`llama3_405b`:
/// `Float8LinearConverter`): the recipe rebuilds the spec in bf16, as planned.
const FLOAT8_BASELINES: &[&str] = &["llama3_405b"];

fn torchtitan_recipe(model: &str) -> Option<(&'static str, &'static str, &'static str, &'static str)> {
    TORCHTITAN_RECIPES.iter().copied().find(|r| r.0 == model)
}

/// A written config: the file (stdout) and the launch command that goes with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Emitted {
    pub text: String,
    /// the command line carrying the Trainer flags (DeepSpeed: printed beside the JSON)
    pub launch: Option<String>,
}

fn unsupported(s: impl Into<String>) -> EmitError {
    EmitError::Unsupported(s.into())
}

/// Can `launcher` express a plan with these switches? The reason when not.
/// The rules every launcher shares: Hugging Face models are not split by
/// TP/PP here; the Trainer's `--gradient_checkpointing` is full
/// checkpointing only.
/// The switches of a plan the launchers' rules look at.
struct View {
    full: bool,
    /// data-parallel ranks
    dp: u64,
    tp: u64,
    pp: u64,
    sharding: Sharding,
    ck: Option<Checkpointing>,
    p: Option<Precision>,
    o: Option<Optimizer>,
    off_opt: Offload,
    off_par: Offload,
    /// context-parallel degree
    cp: u64,
    /// hybrid sharding: replicas of the shard group (1: none)
    replicate: u64,
    /// DeepSpeed ZeRO++ hpZ: the secondary partition's group (1: none)
    hpz: u64,
    /// expert-parallel degree (1: none)
    ep: u64,
}

fn rules(l: Launcher, v: View) -> Result<(), String> {
    if v.hpz > 1 && l != Launcher::Deepspeed {
        // ZeRO++ hpZ is a DeepSpeed ZeRO-3 option (`zero_hpz_partition_size`)
        return Err(hpz_refusal(v.hpz, l));
    }
    autoep_launcher_rule(l, &v)?;
    if v.replicate > 1 && matches!(l, Launcher::Deepspeed | Launcher::Megatron) {
        // DeepSpeed's hybrid sharding of every state is MiCS (`mics_shard_size`),
        // not modelled nor written (its ZeRO++ hpZ, `zero_hpz_partition_size`, is:
        // `Parallelism::hpz`); Megatron's distributed optimizer has none
        return Err(format!(
            "hybrid sharding (HSDP, {} replicas of the shard group): {} does not write it (FSDP HYBRID_SHARD: --emit accelerate, torchrun or torchtitan)",
            v.replicate,
            l.name()
        ));
    }
    if v.cp > 1 && !matches!(l, Launcher::Torchtitan | Launcher::Megatron) {
        return Err(format!(
            "the plan uses context parallelism CP {}: {} has no ring attention over a split sequence (Megatron-LM --context-parallel-size or torchtitan context_parallel_degree run it)",
            v.cp,
            l.name()
        ));
    }
    if v.p == Some(Precision::MixedFp8) && !matches!(l, Launcher::Torchtitan | Launcher::Megatron) {
        return Err(format!(
            "the plan trains in FP8 (mixed-fp8): {} has no FP8 training written here (Megatron-LM --fp8-format hybrid or torchtitan's float8 converter run it)",
            l.name()
        ));
    }
    if l == Launcher::Torchtitan {
        return torchtitan_rules(&v);
    }
    if l == Launcher::Megatron {
        return megatron_rules(&v);
    }
    let View { tp, pp, ck, p, o, off_opt, off_par, .. } = v;
    if tp > 1 || pp > 1 {
        return Err(format!(
            "the plan uses TP {tp} × PP {pp}: {} cannot split a Hugging Face model's layers (Megatron-DeepSpeed or torchtitan can)",
            l.name()
        ));
    }
    if ck == Some(Checkpointing::Selective) {
        return Err("the plan uses selective checkpointing (attention only): the Trainer's --gradient_checkpointing recomputes whole layers".into());
    }
    match l {
        Launcher::Deepspeed => {
            if p == Some(Precision::Bf16) {
                return Err("pure bf16 (bf16 weights and optimizer states, no fp32 master): DeepSpeed's bf16 mode keeps an fp32 master copy".into());
            }
        }
        Launcher::Torchtitan | Launcher::Megatron | Launcher::Vllm | Launcher::Sglang => {}
        Launcher::Torchrun | Launcher::Accelerate => {
            if o == Some(Optimizer::SgdMomentum) {
                return Err("SGD with momentum: transformers' --optim sgd has no momentum (use --emit deepspeed: its optimizer block sets it)".into());
            }
            if off_opt.is_some() && !off_par.is_some() && l == Launcher::Torchrun {
                return Err("FSDP cannot offload the optimizer alone (its CPU offload moves parameters, gradients and optimizer states together): use --emit deepspeed".into());
            }
            if off_opt == Offload::Nvme || off_par == Offload::Nvme {
                return Err("NVMe offload: FSDP has none (use --emit deepspeed)".into());
            }
        }
    }
    Ok(())
}

/// What torchtitan runs: full pre-training/fine-tuning of its own models
/// with FSDP2 (ZeRO-3; ZeRO-2 as `fsdp_reshard_after_forward = "never"`),
/// HSDP or DDP, TP and PP (`torchtitan/config/configs.py`
/// `ParallelismConfig`), full or selective activation checkpointing (`FullAC`,
/// `SelectiveAC`), AdamW (`default_adamw`), FSDP mixed precision (fp32
/// master, bf16 compute), pure bf16 (`training.dtype`) or fp32, and CPU
/// offload of everything together (`training.enable_cpu_offload`).
fn torchtitan_rules(v: &View) -> Result<(), String> {
    if !v.full {
        return Err("LoRA/QLoRA: torchtitan trains full models (its LoRA converter is experimental)".into());
    }
    if v.sharding == Sharding::Zero1 {
        return Err("ZeRO-1: FSDP2 has no optimizer-only sharding (torchtitan shards with FSDP2)".into());
    }
    match v.o {
        None | Some(Optimizer::AdamW) => {}
        Some(o) => return Err(format!("the {} optimizer: torchtitan's recipes build AdamW", o.name())),
    }
    match v.p {
        None | Some(Precision::MixedBf16) | Some(Precision::Bf16) | Some(Precision::Fp32) | Some(Precision::MixedFp8) => {}
        Some(p) => {
            return Err(format!(
            "{} precision: torchtitan trains with FSDP mixed precision (fp32 master, bf16 compute; float8 linears: mixed-fp8), pure bf16 or fp32",
            p.name()
        ))
        }
    }
    if v.off_opt.is_some() != v.off_par.is_some() || v.off_opt == Offload::Nvme || v.off_par == Offload::Nvme {
        return Err("torchtitan's CPU offload moves parameters, gradients and optimizer states together (no NVMe, no optimizer-only offload)".into());
    }
    // FSDP2 is applied only when parameters are sharded over ranks
    // (`ParallelDims.fsdp_enabled`: dp_shard > 1), and its CPU offload is
    // fully_shard's `CPUOffloadPolicy`
    // with CP, FSDP2 is applied over the dp_shard × cp ranks whatever the sharding
    // (`ParallelDims.fsdp_enabled`: dp_shard > 1 or cp > 1): plain DP cannot be written
    if v.cp > 1 && v.sharding == Sharding::None {
        return Err(format!(
            "plain data parallelism with CP {}: torchtitan shards parameters with FSDP2 over the data-parallel × context-parallel ranks whenever CP is on (ParallelDims.fsdp_enabled)",
            v.cp
        ));
    }
    if v.sharding != Sharding::None && v.dp < 2 {
        return Err(format!(
            "{} on one data-parallel rank: torchtitan applies FSDP2 (and its CPU offload) only over two or more ranks",
            v.sharding.label()
        ));
    }
    Ok(())
}

/// What Megatron-LM's `pretrain_gpt.py` runs (megatron/training/arguments.py,
/// NVIDIA/Megatron-LM main of August 2026, Megatron-Core 0.20.0): full training
/// (no LoRA/QLoRA), `--bf16` / `--fp16` (16-bit parameters, fp32 master) or fp32,
/// Adam (`--optimizer adam`, decoupled weight decay), TP / PP / SP / EP, plain data
/// parallelism or the distributed optimizer (`--use-distributed-optimizer`, ZeRO-1),
/// full or selective recompute (`--recompute-granularity`), no offload here.
fn megatron_rules(v: &View) -> Result<(), String> {
    if !v.full {
        return Err("LoRA/QLoRA: Megatron-LM's pretrain_gpt.py trains full models".into());
    }
    match v.p {
        None | Some(Precision::MixedBf16) | Some(Precision::MixedFp16) | Some(Precision::Fp32) | Some(Precision::MixedFp8) => {}
        Some(p) => {
            return Err(format!(
                "{} precision: Megatron trains 16-bit parameters with an fp32 master (--bf16, --fp16; --fp8-format hybrid: mixed-fp8) or fp32",
                p.name()
            ))
        }
    }
    match v.o {
        None | Some(Optimizer::AdamW) => {}
        Some(o) => return Err(format!("the {} optimizer: Megatron's --optimizer is adam (AdamW) or sgd", o.name())),
    }
    if v.sharding.stage() >= 2 {
        return Err(format!(
            "{}: Megatron's distributed optimizer shards optimizer states and master weights only (ZeRO-1)",
            v.sharding.label()
        ));
    }
    if v.off_par.is_some() || v.off_opt == Offload::Nvme {
        return Err(
            "parameter or NVMe offload: Megatron offloads the optimizer to CPU memory only (--optimizer-cpu-offload)"
                .into(),
        );
    }
    if v.off_opt.is_some() && v.sharding != Sharding::Zero1 {
        return Err("optimizer offload without the distributed optimizer: Megatron's --optimizer-cpu-offload runs on it (--zero 1)".into());
    }
    Ok(())
}

/// Can `launcher` express the plan `s`? (`Err`: why not.)
pub fn check(l: Launcher, s: &SetupSummary) -> Result<(), EmitError> {
    if l.serves() {
        return if s.method.is_training() { Err(EmitError::NotServing(l)) } else { Ok(()) };
    }
    if !s.method.is_training() {
        return Err(EmitError::NotTraining);
    }
    let v = View {
        full: s.method == Method::Full,
        dp: (s.gpus / (s.tp.max(1) * s.pp.max(1))).max(1),
        tp: s.tp,
        pp: s.pp,
        sharding: s.sharding,
        ck: s.checkpointing,
        p: s.precision,
        o: s.optimizer,
        off_opt: s.offload_optimizer,
        off_par: s.offload_params,
        cp: s.cp.max(1),
        replicate: s.dp_replicate.max(1),
        hpz: s.hpz.max(1),
        ep: s.ep.max(1),
    };
    rules(l, v).map_err(unsupported)?;
    offload_rules(s.sharding, s.offload_optimizer, s.offload_params).map_err(|e| unsupported(e.to_string()))
}

/// A layout the user pinned that `l` cannot run, said before any search: ZeRO++
/// hpZ (`--hpz`, a DeepSpeed config's `zero_hpz_partition_size`) is DeepSpeed's
/// alone ([`rules`]). `Err` names why.
pub fn pinned_layout_runs(l: Launcher, par: &vramfit_core::workload::Parallelism) -> Result<(), String> {
    if par.hpz > 1 && l != Launcher::Deepspeed {
        return Err(hpz_refusal(par.hpz, l));
    }
    Ok(())
}

fn hpz_refusal(hpz: u64, l: Launcher) -> String {
    format!(
        "ZeRO++ hpZ (a secondary parameter partition over groups of {hpz} ranks) is DeepSpeed ZeRO-3's: {} does not run it (--emit deepspeed writes it)",
        l.name()
    )
}

/// The planner's filter for `--emit`: setups `l` can express.
pub fn key_expressible(l: Launcher, k: &MemKey) -> bool {
    if l.serves() || k.train.is_none() {
        // serving engines run every TP × PP × replica split the planner
        // proposes (TP inside an NVLink domain is the planner's rule already)
        return l.serves() && k.train.is_none();
    }
    let t = k.train.as_ref();
    let v = View {
        full: t.is_none_or(|t| t.kind == TrainKind::Full),
        dp: (k.gpus / (k.tp.max(1) * k.pp.max(1))).max(1),
        tp: k.tp,
        pp: k.pp,
        sharding: k.sharding,
        ck: t.map(|t| t.checkpointing),
        p: t.map(|t| t.precision),
        o: t.map(|t| t.optimizer),
        off_opt: k.offload_optimizer,
        off_par: k.offload_params,
        cp: k.cp.max(1),
        replicate: k.dp_replicate.max(1),
        hpz: k.hpz.max(1),
        ep: k.ep.max(1),
    };
    rules(l, v).is_ok()
}

fn stage(s: &SetupSummary) -> u64 {
    s.sharding.stage().into()
}

fn full_checkpointing(s: &SetupSummary) -> bool {
    s.checkpointing == Some(Checkpointing::Full)
}

/// transformers `--optim` for the plan's optimizer.
fn trainer_optim(o: Option<Optimizer>) -> &'static str {
    match o {
        Some(Optimizer::AdamW8bit) => "adamw_bnb_8bit",
        Some(Optimizer::PagedAdamW8bit) => "paged_adamw_8bit",
        // transformers' OptimizerNames.PAGED_ADAMW_32BIT
        Some(Optimizer::PagedAdamW) => "paged_adamw_32bit",
        Some(Optimizer::Sgd) | Some(Optimizer::SgdMomentum) => "sgd",
        Some(Optimizer::Adafactor) => "adafactor",
        Some(Optimizer::Lion) => "lion_32bit",
        Some(Optimizer::AdamW) | None => "adamw_torch",
    }
}

/// Trainer flags that carry the plan: batch, accumulation, precision,
/// checkpointing, optimizer (`deepspeed_optimizer`: the ds_config declares
/// the optimizer, so `--optim` is left out).
fn trainer_flags(s: &SetupSummary, deepspeed_optimizer: bool, fsdp_checkpointing: bool) -> Vec<String> {
    let mut a = vec![
        format!("--per_device_train_batch_size {}", s.micro_batch),
        format!("--gradient_accumulation_steps {}", s.grad_accum),
    ];
    match s.precision {
        // the Trainer's --bf16/--fp16 is autocast over fp32 weights (AMP); with DeepSpeed
        // or FSDP they also select the 16-bit weights + fp32 master mode
        Some(Precision::AmpBf16) | Some(Precision::MixedBf16) => a.push("--bf16".into()),
        Some(Precision::AmpFp16) | Some(Precision::MixedFp16) => a.push("--fp16".into()),
        _ => {}
    }
    if full_checkpointing(s) && !fsdp_checkpointing {
        a.push("--gradient_checkpointing".into());
    }
    if !deepspeed_optimizer {
        a.push(format!("--optim {}", trainer_optim(s.optimizer)));
    }
    a
}

/// The ds_config `optimizer` block DeepSpeed builds itself (None: the Trainer
/// builds it from `--optim` and ZeRO is told it is untested).
fn ds_optimizer(o: Option<Optimizer>) -> Option<Value> {
    let auto = json!("auto");
    match o {
        Some(Optimizer::AdamW) | None => {
            Some(json!({"type": "AdamW", "params": {"lr": auto, "betas": auto, "eps": auto, "weight_decay": auto}}))
        }
        // torch.optim.SGD through DeepSpeed's fallback to torch.optim
        Some(Optimizer::Sgd) => Some(json!({"type": "SGD", "params": {"lr": auto}})),
        Some(Optimizer::SgdMomentum) => Some(json!({"type": "SGD", "params": {"lr": auto, "momentum": 0.9}})),
        Some(Optimizer::Lion) => Some(json!({"type": "Lion", "params": {"lr": auto, "weight_decay": auto}})),
        Some(Optimizer::AdamW8bit)
        | Some(Optimizer::PagedAdamW8bit)
        | Some(Optimizer::PagedAdamW)
        | Some(Optimizer::Adafactor) => None,
    }
}

/// DeepSpeed `ds_config.json` for the plan, and the `deepspeed` launch with
/// the Trainer flags that match it.
pub fn deepspeed(s: &SetupSummary, machines: u64) -> Result<Emitted, EmitError> {
    deepspeed_for(s, Family::Generic, machines)
}

/// As [`deepspeed`], for a model of `family` (a MoE model under ZeRO-3 gets
/// the leaf-module line its script needs).
pub fn deepspeed_for(s: &SetupSummary, family: Family, machines: u64) -> Result<Emitted, EmitError> {
    check(Launcher::Deepspeed, s)?;
    if s.ep > 1 {
        // the AutoEP section names the model's preset: [`deepspeed_autoep`] writes it
        return Err(unsupported("expert parallelism (DeepSpeed AutoEP) is written from the model's preset: emit it with the model (plan --emit deepspeed)"));
    }
    if s.offload_optimizer.is_some() && s.optimizer.is_some_and(|o| o != Optimizer::AdamW) {
        return Err(unsupported("ZeRO-Offload runs DeepSpeed's CPU Adam: only AdamW can be offloaded"));
    }
    let mut root = Map::new();
    root.insert("train_batch_size".into(), json!(s.global_batch));
    root.insert("train_micro_batch_size_per_gpu".into(), json!(s.micro_batch));
    root.insert("gradient_accumulation_steps".into(), json!(s.grad_accum));
    root.insert("gradient_clipping".into(), json!("auto"));
    match s.precision {
        // 16-bit weights + fp32 master (DeepSpeed's bf16/fp16 modes)
        Some(Precision::MixedBf16) => {
            root.insert("bf16".into(), json!({"enabled": true}));
        }
        Some(Precision::MixedFp16) => {
            root.insert(
                "fp16".into(),
                json!({"enabled": true, "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1}),
            );
        }
        // autocast over fp32 weights
        Some(Precision::AmpBf16) => {
            root.insert("torch_autocast".into(), json!({"enabled": true, "dtype": "bfloat16"}));
        }
        Some(Precision::AmpFp16) => {
            root.insert("torch_autocast".into(), json!({"enabled": true, "dtype": "float16"}));
        }
        _ => {}
    }
    let st = stage(s);
    let mut zero = Map::new();
    zero.insert("stage".into(), json!(st));
    if st >= 1 {
        zero.insert("overlap_comm".into(), json!(true));
        zero.insert("contiguous_gradients".into(), json!(true));
        // the planner sizes ZeRO-Offload's GPU gradients as 2 buckets of this (train/profile.rs)
        zero.insert("reduce_bucket_size".into(), json!(500_000_000u64));
    }
    if st == 2 {
        zero.insert("allgather_partitions".into(), json!(true));
        zero.insert("allgather_bucket_size".into(), json!(500_000_000u64));
        zero.insert("reduce_scatter".into(), json!(true));
    }
    if st == 3 {
        zero.insert("stage3_prefetch_bucket_size".into(), json!(50_000_000u64));
        zero.insert("stage3_param_persistence_threshold".into(), json!(100_000u64));
        zero.insert("stage3_max_live_parameters".into(), json!(1_000_000_000u64));
        zero.insert("stage3_gather_16bit_weights_on_model_save".into(), json!(true));
        if s.hpz > 1 {
            // ZeRO++ hpZ: a secondary partition of the 16-bit parameters over each
            // machine's ranks (`DeepSpeedZeroConfig.zero_hpz_partition_size`,
            // deepspeed/runtime/zero/config.py; docs/_tutorials/zeropp.md sets it to
            // the GPUs per node)
            zero.insert("zero_hpz_partition_size".into(), json!(s.hpz));
        }
    }
    if s.offload_optimizer.is_some() {
        zero.insert("offload_optimizer".into(), json!({"device": s.offload_optimizer.key(), "pin_memory": true}));
    }
    if s.offload_params.is_some() {
        zero.insert("offload_param".into(), json!({"device": s.offload_params.key(), "pin_memory": true}));
    }
    root.insert("zero_optimization".into(), Value::Object(zero));
    let ds_opt = ds_optimizer(s.optimizer);
    match &ds_opt {
        Some(o) => {
            root.insert("optimizer".into(), o.clone());
            if !matches!(s.optimizer, Some(Optimizer::AdamW) | None) && st >= 1 {
                root.insert("zero_allow_untested_optimizer".into(), json!(true));
            }
        }
        // the Trainer's --optim builds it: ZeRO must be told it is not one of its own
        None => {
            root.insert("zero_allow_untested_optimizer".into(), json!(true));
        }
    }
    if full_checkpointing(s) {
        // for DeepSpeed's own checkpointing API; the Trainer flag below turns on the
        // Hugging Face model's gradient checkpointing
        root.insert(
            "activation_checkpointing".into(),
            json!({"partition_activations": false, "cpu_checkpointing": false, "contiguous_memory_optimization": false}),
        );
    }
    root.insert("steps_per_print".into(), json!(100));
    root.insert("wall_clock_breakdown".into(), json!(false));
    let text = serde_json::to_string_pretty(&Value::Object(root)).map_err(|e| unsupported(e.to_string()))?;
    let nodes = machines.max(1);
    let mut cmd = vec!["deepspeed".to_string()];
    let mut notes: Vec<String> = Vec::new();
    if nodes > 1 {
        // DeepSpeed's hostfile: one `hostname slots=N` line per machine
        // (deepspeed.ai/getting-started, "Resource Configuration (multi-node)")
        notes.push(format!(
            "# hostfile: {nodes} lines, one per machine: `<hostname> slots={}` (the first is the master; every machine reachable by passwordless ssh)",
            (s.gpus / nodes).max(1)
        ));
        cmd.push("--hostfile hostfile".into());
        cmd.push(format!("--num_nodes {nodes}"));
    }
    cmd.push(format!("--num_gpus {}", (s.gpus / nodes).max(1)));
    cmd.push("train.py".into());
    cmd.push("--deepspeed ds_config.json".into());
    cmd.extend(trainer_flags(s, ds_opt.is_some(), false));
    let mut launch = cmd.join(" ");
    for c in
        notes.into_iter().chain([method_comment(s, stage(s) == 3), zero3_leaf_comment(s, family)].into_iter().flatten())
    {
        launch = format!("{launch}\n{c}");
    }
    Ok(Emitted { text: text + "\n", launch: Some(launch) })
}

/// Only DeepSpeed (AutoEP) and Megatron-LM run expert parallelism in training
/// here; the FSDP launchers and torchtitan's written recipes do not.
fn autoep_launcher_rule(l: Launcher, v: &View) -> Result<(), String> {
    if v.ep > 1 && !matches!(l, Launcher::Deepspeed | Launcher::Megatron | Launcher::Vllm | Launcher::Sglang) {
        return Err(format!(
            "the plan splits the experts over EP {}: {} writes no expert parallelism for training (DeepSpeed AutoEP: --emit deepspeed; Megatron-LM: --emit megatron)",
            v.ep,
            l.name()
        ));
    }
    Ok(())
}

/// The DeepSpeed config of a plan with expert parallelism: the plan's ZeRO
/// config ([`deepspeed_for`]) with DeepSpeed AutoEP's section
/// (docs/code-docs/source/autoep.rst "Usage"; parsed by
/// deepspeed/module_inject/auto_ep_config.py `parse_autoep_config`, DeepSpeed
/// ≥ 0.19.2, PR #7938): `enabled`, `autoep_size` = the plan's EP and the
/// model's `preset_model` ([`vramfit_core::workload::autoep::autoep_preset`]).
/// Nothing changes in train.py: `deepspeed.initialize()` replaces the MoE blocks.
pub fn deepspeed_autoep(s: &SetupSummary, t: &Target) -> Result<Emitted, EmitError> {
    let spec = t.spec.ok_or_else(|| unsupported("DeepSpeed AutoEP needs the model's shape to name its preset"))?;
    let preset = vramfit_core::workload::autoep::autoep_preset(spec).map_err(unsupported)?;
    let plain = SetupSummary { ep: 1, ..s.clone() };
    let mut e = deepspeed_for(&plain, t.family, t.machines)?;
    let mut root: Map<String, Value> = serde_json::from_str(&e.text).map_err(|x| unsupported(x.to_string()))?;
    root.insert("expert_parallel".into(), json!({"enabled": true, "autoep_size": s.ep, "preset_model": preset}));
    e.text = serde_json::to_string_pretty(&Value::Object(root)).map_err(|x| unsupported(x.to_string()))? + "\n";
    let note = format!(
        "# expert parallelism: DeepSpeed AutoEP (DeepSpeed >= 0.19.2, transformers >= 5.0.0 for preset {preset}) replaces the MoE blocks at deepspeed.initialize(): {} experts per GPU, {} expert-data-parallel ranks",
        spec.moe.as_ref().map(|m| m.num_experts / s.ep.max(1)).unwrap_or(0),
        (s.gpus / s.ep.max(1)).max(1)
    );
    // accelerate passes the parameter list its DummyOptim took before
    // deepspeed.initialize() (accelerator.py `_prepare_deepspeed`); DeepSpeed 0.19.8's
    // engine re-points such a list, and a client optimizer, at AutoEP's new expert
    // parameters after the swap (runtime/engine.py `DeepSpeedEngine.__init__` →
    // `_remap_model_parameters_after_module_replacement`,
    // `_remap_client_optimizer_after_module_replacement`, whose docstring names the
    // failure without it: the experts and routers never update). The release that
    // added the remap is not pinned here, so the note asks for the one read.
    let params = "# AutoEP swaps the experts' parameters inside deepspeed.initialize(); the HF Trainer (through accelerate) hands DeepSpeed the parameter list it took before the swap, which DeepSpeed 0.19.8 re-points at the new expert parameters (engine.py _remap_model_parameters_after_module_replacement): use DeepSpeed >= 0.19.8, or an older release may leave the experts and routers out of the optimizer";
    e.launch = Some(match e.launch.take() {
        Some(l) => format!("{l}\n{note}\n{params}"),
        None => format!("{note}\n{params}"),
    });
    Ok(e)
}

/// What train.py must do for the method. `flat_sharded`: the parameters are
/// flattened and sharded (ZeRO-3, FSDP), where a QLoRA base must store its
/// 4-bit weights in the compute dtype so they flatten with the rest
/// (`bnb_4bit_quant_storage`: PEFT, "Use PEFT QLoRA and DeepSpeed with ZeRO3"
/// and "Use PEFT QLoRA and FSDP" in its accelerate guides; transformers'
/// `BitsAndBytesConfig.bnb_4bit_quant_storage`).
fn method_comment(s: &SetupSummary, flat_sharded: bool) -> Option<String> {
    match s.method {
        Method::Lora => Some("# lora: train.py must wrap the model with PEFT (LoraConfig)".into()),
        Method::Qlora if flat_sharded => {
            let storage = match s.precision {
                Some(p) if p.compute_dtype() == vramfit_core::dtype::DType::F16 => "float16",
                _ => "bfloat16",
            };
            Some(format!(
                "# qlora: train.py must load the base with BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\", bnb_4bit_quant_storage=torch.{storage}) and torch_dtype=torch.{storage} (sharding flattens the 4-bit weights with the rest: their storage dtype must match), and wrap it with PEFT (LoraConfig)"
            ))
        }
        Method::Qlora => Some(
            "# qlora: train.py must load the base with BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\") and wrap it with PEFT (LoraConfig)".into(),
        ),
        _ => None,
    }
}

/// The `transformers` class of a MoE family's sparse block (router + experts):
/// ZeRO-3 must gather it whole (a "leaf"), else ranks whose tokens route to
/// different experts fetch different parameters and the collectives hang
/// (DeepSpeed `deepspeed.utils.set_z3_leaf_modules`; accelerate's
/// `deepspeed_moe_layer_cls_names`, whose docs name `MixtralSparseMoeBlock`
/// and `Qwen2MoeSparseMoeBlock`). Class names from each family's
/// `modeling_*.py`.
pub fn moe_leaf_class(family: Family) -> Option<&'static str> {
    match family {
        Family::Mixtral => Some("MixtralSparseMoeBlock"),
        Family::Qwen2Moe => Some("Qwen2MoeSparseMoeBlock"),
        Family::Qwen3Moe => Some("Qwen3MoeSparseMoeBlock"),
        Family::Qwen3Next => Some("Qwen3NextSparseMoeBlock"),
        Family::DeepseekV3 => Some("DeepseekV3MoE"),
        Family::GptOss => Some("GptOssMLP"),
        Family::GraniteMoe => Some("GraniteMoeMoE"),
        Family::MiniMaxM2 => Some("MiniMaxM2SparseMoeBlock"),
        _ => None,
    }
}

/// The line a MoE model's script needs under ZeRO-3 (plain DeepSpeed).
fn zero3_leaf_comment(s: &SetupSummary, family: Family) -> Option<String> {
    let c = moe_leaf_class(family).filter(|_| stage(s) == 3)?;
    Some(format!(
        "# MoE under ZeRO-3: train.py must call deepspeed.utils.set_z3_leaf_modules(model, [{c}]) after loading the model (without it ranks routing to different experts hang)"
    ))
}

fn precision_comment(s: &SetupSummary) -> Option<String> {
    match s.precision {
        Some(Precision::Bf16) => Some("# pure bf16: train.py loads the model with torch_dtype=torch.bfloat16 (no --bf16: bf16 weights, gradients and optimizer states)".into()),
        Some(Precision::MixedBf16) | Some(Precision::MixedFp16) => Some("# mixed precision: 16-bit compute with fp32 master weights (sharded FSDP params stay fp32, --bf16/--fp16 sets the compute dtype)".into()),
        _ => None,
    }
}

/// FSDP sharding strategy for the plan (torch `ShardingStrategy` names).
fn fsdp_strategy(s: &SetupSummary) -> Option<&'static str> {
    match s.sharding {
        Sharding::Zero3 => Some("FULL_SHARD"),
        // FSDP has no optimizer-only sharding: SHARD_GRAD_OP shards grads + states
        Sharding::Zero2 | Sharding::Zero1 => Some("SHARD_GRAD_OP"),
        Sharding::None => None,
    }
}

/// A `torchrun` launch with Hugging Face Trainer FSDP flags, as a shell snippet.
pub fn torchrun(s: &SetupSummary, family: Family, machines: u64) -> Result<String, EmitError> {
    check(Launcher::Torchrun, s)?;
    let strategy = fsdp_strategy(s);
    let nodes = machines.max(1);
    let per_node = (s.gpus / nodes).max(1);
    let mut o = String::new();
    let mut cfg = Map::new();
    if strategy.is_some() {
        match layer_class(family) {
            Some(c) => {
                cfg.insert("transformer_layer_cls_to_wrap".into(), json!([c]));
            }
            None => {
                cfg.insert("min_num_params".into(), json!(100_000_000u64));
            }
        }
        cfg.insert("backward_prefetch".into(), json!("backward_pre"));
        cfg.insert("forward_prefetch".into(), json!(false));
        cfg.insert("use_orig_params".into(), json!(true));
        cfg.insert("sync_module_states".into(), json!(true));
        cfg.insert("cpu_ram_efficient_loading".into(), json!(true));
        cfg.insert("activation_checkpointing".into(), json!(full_checkpointing(s)));
        let text = serde_json::to_string_pretty(&Value::Object(cfg)).map_err(|e| unsupported(e.to_string()))?;
        let _ = writeln!(o, "cat > fsdp_config.json <<'EOF'\n{text}\nEOF");
    }
    let mut args: Vec<String> = vec!["torchrun".into()];
    if nodes == 1 {
        args.push("--standalone".into());
        args.push("--nnodes=1".into());
    } else {
        args.push(format!("--nnodes={nodes}"));
        args.push("--node-rank=$NODE_RANK".into());
        args.push("--rdzv-backend=c10d".into());
        args.push("--rdzv-endpoint=$MASTER_ADDR:29500".into());
    }
    args.push(format!("--nproc-per-node={per_node}"));
    args.push("train.py".into());
    if let Some(st) = strategy {
        // hybrid sharding: transformers' FSDPOption.HYBRID_SHARD, FSDP1's HYBRID_SHARD
        // (shards within the node's GPUs, `_init_intra_and_inter_node_groups`, and
        // replicates across the nodes: the plan's one shard group per machine)
        let mut mode = match st {
            "FULL_SHARD" if s.dp_replicate > 1 => "hybrid_shard auto_wrap".to_string(),
            "FULL_SHARD" => "full_shard auto_wrap".to_string(),
            _ => "shard_grad_op auto_wrap".to_string(),
        };
        if s.offload_params.is_some() {
            mode.push_str(" offload");
        }
        args.push(format!("--fsdp '{mode}'"));
        args.push("--fsdp_config fsdp_config.json".into());
    }
    // with FSDP, checkpointing goes through fsdp_config (activation_checkpointing)
    args.extend(trainer_flags(s, false, strategy.is_some()));
    for c in [method_comment(s, strategy.is_some()), precision_comment(s)].into_iter().flatten() {
        let _ = writeln!(o, "{c}");
    }
    let _ = writeln!(o, "# train.py: your Hugging Face Trainer script (it must accept TrainingArguments flags)");
    o.push_str(&args.join(" \\\n  "));
    o.push('\n');
    Ok(o)
}

fn yaml_scalar(v: &Value) -> String {
    match v {
        Value::String(s) => {
            if s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !["yes", "no", "true", "false", "null", "on", "off"].contains(&s.to_ascii_lowercase().as_str())
                && !s.chars().next().is_some_and(|c| c.is_ascii_digit())
            {
                s.clone()
            } else {
                format!("'{}'", s.replace('\'', "''"))
            }
        }
        other => other.to_string(),
    }
}

fn yaml(map: &Map<String, Value>, indent: usize, out: &mut String) {
    for (k, v) in map {
        match v {
            Value::Object(m) => {
                let _ = writeln!(out, "{:indent$}{k}:", "");
                yaml(m, indent + 2, out);
            }
            Value::Array(a) if a.is_empty() => {
                let _ = writeln!(out, "{:indent$}{k}: []", "");
            }
            other => {
                let _ = writeln!(out, "{:indent$}{k}: {}", "", yaml_scalar(other));
            }
        }
    }
}

/// accelerate's `distributed_type` for the plan: DeepSpeed where FSDP cannot
/// express it (ZeRO-1, optimizer-only offload).
fn accelerate_dist(s: &SetupSummary) -> &'static str {
    let st = stage(s);
    if st == 1 || (s.offload_optimizer.is_some() && !s.offload_params.is_some()) {
        "DEEPSPEED"
    } else if st >= 2 {
        "FSDP"
    } else if s.gpus > 1 {
        "MULTI_GPU"
    } else {
        "NO"
    }
}

/// The `accelerate` config of one node as a map (ClusterConfig fields).
fn accelerate_map(s: &SetupSummary, family: Family, machines: u64, rank: u64) -> Map<String, Value> {
    let st = stage(s);
    let mut m = Map::new();
    m.insert("compute_environment".into(), json!("LOCAL_MACHINE"));
    m.insert("debug".into(), json!(false));
    let dist = accelerate_dist(s);
    m.insert("distributed_type".into(), json!(dist));
    if dist == "DEEPSPEED" {
        let mut d = Map::new();
        d.insert("gradient_accumulation_steps".into(), json!(s.grad_accum));
        d.insert("gradient_clipping".into(), json!(1.0));
        d.insert("offload_optimizer_device".into(), json!(s.offload_optimizer.key()));
        d.insert("offload_param_device".into(), json!(s.offload_params.key()));
        d.insert("zero3_init_flag".into(), json!(st == 3));
        d.insert("zero3_save_16bit_model".into(), json!(st == 3));
        d.insert("zero_stage".into(), json!(st));
        if let Some(c) = moe_leaf_class(family).filter(|_| st == 3) {
            d.insert("deepspeed_moe_layer_cls_names".into(), json!(c));
        }
        if machines > 1 {
            d.insert("deepspeed_multinode_launcher".into(), json!("standard"));
        }
        m.insert("deepspeed_config".into(), Value::Object(d));
    }
    if dist == "FSDP" {
        // FSDP2 (fully_shard): reshard_after_forward replaces the v1 sharding strategy
        let mut f = Map::new();
        f.insert("fsdp_activation_checkpointing".into(), json!(full_checkpointing(s)));
        match layer_class(family) {
            Some(c) => {
                f.insert("fsdp_auto_wrap_policy".into(), json!("TRANSFORMER_BASED_WRAP"));
                f.insert("fsdp_transformer_layer_cls_to_wrap".into(), json!(c));
            }
            None => {
                f.insert("fsdp_auto_wrap_policy".into(), json!("SIZE_BASED_WRAP"));
                f.insert("fsdp_min_num_params".into(), json!(100_000_000u64));
            }
        }
        f.insert("fsdp_cpu_ram_efficient_loading".into(), json!(true));
        f.insert("fsdp_offload_params".into(), json!(s.offload_params.is_some()));
        f.insert("fsdp_reshard_after_forward".into(), json!(st == 3));
        f.insert("fsdp_state_dict_type".into(), json!("SHARDED_STATE_DICT"));
        f.insert("fsdp_version".into(), json!(2));
        m.insert("fsdp_config".into(), Value::Object(f));
        if s.dp_replicate > 1 {
            // hybrid sharding under FSDP2: accelerate's ParallelismConfig builds the 2-D
            // ("dp_replicate", "dp_shard") device mesh fully_shard runs HSDP on
            // (accelerate/parallelism_config.py: "dp_replicate_size > 1 and dp_shard_size
            // > 1, we obtain Hybrid Sharded Data Parallel"; the launcher copies these keys
            // to its --parallelism_config_* arguments, accelerate/commands/launch.py);
            // FSDP1's fsdp_sharding_strategy HYBRID_SHARD is deprecated under fsdp_version 2
            let mut p = Map::new();
            p.insert("parallelism_config_dp_replicate_size".into(), json!(s.dp_replicate));
            p.insert("parallelism_config_dp_shard_size".into(), json!(s.shard_degree()));
            m.insert("parallelism_config".into(), Value::Object(p));
        }
    }
    m.insert("downcast_bf16".into(), json!("no"));
    m.insert("machine_rank".into(), json!(rank));
    if machines > 1 {
        m.insert("main_process_ip".into(), json!("MAIN_PROCESS_IP"));
        m.insert("main_process_port".into(), json!(29500));
    }
    m.insert("main_training_function".into(), json!("main"));
    let mp = match s.precision {
        Some(p) if p.compute_dtype() == DType::BF16 && p != Precision::Bf16 => "bf16",
        Some(p) if p.compute_dtype() == DType::F16 => "fp16",
        _ => "no",
    };
    m.insert("mixed_precision".into(), json!(mp));
    m.insert("num_machines".into(), json!(machines.max(1)));
    m.insert("num_processes".into(), json!(s.gpus.max(1)));
    m.insert("rdzv_backend".into(), json!("static"));
    m.insert("same_network".into(), json!(true));
    m.insert("tpu_env".into(), json!([]));
    m.insert("tpu_use_cluster".into(), json!(false));
    m.insert("tpu_use_sudo".into(), json!(false));
    m.insert("use_cpu".into(), json!(false));
    m
}

/// An `accelerate` config YAML (`accelerate launch --config_file …`); for a
/// multi-node job a shell snippet writing one file per node (`machine_rank`
/// 0…N−1), with the first node's address as the `MAIN_PROCESS_IP` placeholder.
pub fn accelerate(s: &SetupSummary, family: Family, machines: u64) -> Result<String, EmitError> {
    check(Launcher::Accelerate, s)?;
    if s.offload_optimizer.is_some()
        && !s.offload_params.is_some()
        && s.optimizer.is_some_and(|o| o != Optimizer::AdamW)
    {
        return Err(unsupported("ZeRO-Offload runs DeepSpeed's CPU Adam: only AdamW can be offloaded"));
    }
    let nodes = machines.max(1);
    let mut out = String::new();
    // with FSDP, checkpointing is fsdp_activation_checkpointing (the Trainer refuses both)
    let flags = trainer_flags(s, false, accelerate_dist(s) == "FSDP").join(" ");
    let flat_sharded = match accelerate_dist(s) {
        "FSDP" => true,
        "DEEPSPEED" => stage(s) == 3,
        _ => false,
    };
    for c in [method_comment(s, flat_sharded), precision_comment(s)].into_iter().flatten() {
        let _ = writeln!(out, "{c}");
    }
    let _ = writeln!(out, "# launch: accelerate launch --config_file <this file> train.py {flags}");
    if nodes == 1 {
        yaml(&accelerate_map(s, family, 1, 0), 0, &mut out);
        return Ok(out);
    }
    let _ =
        writeln!(out, "# {nodes} nodes: one config per node; replace MAIN_PROCESS_IP with the first node's address");
    for rank in 0..nodes {
        let _ = writeln!(out, "cat > accelerate_node{rank}.yaml <<'EOF'");
        yaml(&accelerate_map(s, family, nodes, rank), 0, &mut out);
        let _ = writeln!(out, "EOF");
    }
    Ok(out)
}

/// What an emitted config is for beyond the plan's switches.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// the model's preset name (torchtitan derives from its own baseline)
    pub model: &'a str,
    pub family: Family,
    /// machines the plan spans
    pub machines: u64,
    /// sequence length of a training sample
    pub seq: u64,
    /// what the engine loads: a Hub id or a local directory (serving launchers)
    pub serve_id: &'a str,
    /// tokens per sequence (serving: `--max-model-len`)
    pub context: u64,
    /// the model's transformer layers (torchtitan's layers per virtual pipeline stage)
    pub layers: u64,
    /// the model's shape (Megatron writes it as flags)
    pub spec: Option<&'a ModelSpec>,
    /// tokens the job trains (`--tokens`): Megatron's `--train-iters`
    pub tokens: Option<u64>,
}

/// The config `l` writes for the plan `s`: DeepSpeed's JSON with its launch
/// line, torchrun's shell snippet, accelerate's YAML, or a torchtitan recipe.
pub fn config(l: Launcher, s: &SetupSummary, t: &Target) -> Result<Emitted, EmitError> {
    match l {
        Launcher::Deepspeed if s.ep > 1 => deepspeed_autoep(s, t),
        Launcher::Deepspeed => deepspeed_for(s, t.family, t.machines),
        Launcher::Torchrun => torchrun(s, t.family, t.machines).map(|text| Emitted { text, launch: None }),
        Launcher::Accelerate => accelerate(s, t.family, t.machines).map(|text| Emitted { text, launch: None }),
        Launcher::Torchtitan => torchtitan(s, t),
        Launcher::Megatron => megatron(s, t),
        Launcher::Vllm | Launcher::Sglang => serve_command(l, s, t),
    }
}

/// Megatron-LM's `megatron_plan.sh` for the plan (`crate::megatron`): the
/// model's shape and the plan's TP/PP/SP/EP, distributed optimizer, batch,
/// recompute and precision as `pretrain_gpt.py` flags, under one `torchrun`
/// per machine.
pub fn megatron(s: &SetupSummary, t: &Target) -> Result<Emitted, EmitError> {
    check(Launcher::Megatron, s)?;
    let spec = t.spec.ok_or_else(|| unsupported("Megatron needs the model's shape"))?;
    Launcher::Megatron.runs(spec).map_err(unsupported)?;
    let script =
        crate::megatron::Script { spec, machines: t.machines, seq: t.seq, tokens: t.tokens, tokenizer: t.serve_id };
    Ok(Emitted {
        text: crate::megatron::script(s, &script),
        launch: Some(format!("bash megatron_plan.sh   # on each of the {} machine(s)", t.machines.max(1))),
    })
}

/// The serving command for an inference plan: `vllm serve` (its
/// `EngineArgs` flags: `--tensor-parallel-size`, `--pipeline-parallel-size`,
/// `--data-parallel-size`, `--max-model-len`, `--max-num-seqs`,
/// `--kv-cache-dtype fp8`, `--quantization fp8`) or SGLang's
/// `python -m sglang.launch_server` (`ServerArgs`: `--tp-size`, `--pp-size`,
/// `--dp-size`, `--context-length`, `--max-running-requests`,
/// `--kv-cache-dtype fp8_e4m3`). The memory cap is left at the engine's
/// default — the one the plan sized with. Replicas are the engine's data
/// parallelism; several machines join as the engine's multi-node mode does
/// (Ray for vLLM's TP × PP, `--nnodes`/`--node-rank` for SGLang).
pub fn serve_command(l: Launcher, s: &SetupSummary, t: &Target) -> Result<Emitted, EmitError> {
    check(l, s)?;
    let tp = s.tp.max(1);
    let pp = s.pp.max(1);
    let ep = s.ep.max(1);
    let dpa = s.dp_attention.max(1);
    let replicas = s.replicas.max(1);
    let seqs = s.global_batch.div_ceil(replicas).max(1);
    let nodes = t.machines.max(1);
    // replicas that each fit one machine run as one server per machine, each
    // with its share of the replicas, behind a load balancer; a model that
    // spans machines joins them with the engine's multi-node mode
    let per_machine = (s.gpus / nodes).max(1);
    let spread = nodes > 1 && tp * pp <= per_machine && replicas.is_multiple_of(nodes);
    let dp = if spread { replicas / nodes } else { replicas };
    let fp8_kv = s.kv_dtype.is_some_and(|k| k.bits() == 8);
    let quant = s.weights.as_deref().unwrap_or("");
    let mut notes: Vec<String> = Vec::new();
    let mut a: Vec<String> = Vec::new();
    match l {
        Launcher::Vllm => {
            a.push(format!("vllm serve {}", t.serve_id));
            // data-parallel attention is vLLM's DP with EP: each of the `dpa` engine
            // cores runs attention at TP tp / dpa over its own requests
            // (`--max-num-seqs` is per engine core), the experts span
            // EP = DP × TP (`FusedMoEParallelConfig.make`)
            a.push(format!("--tensor-parallel-size {}", tp / dpa));
            if pp > 1 {
                a.push(format!("--pipeline-parallel-size {pp}"));
            }
            if dp * dpa > 1 {
                a.push(format!("--data-parallel-size {}", dp * dpa));
            }
            if ep > 1 {
                a.push("--enable-expert-parallel".into());
            }
            a.push(format!("--max-model-len {}", t.context));
            a.push(format!("--max-num-seqs {}", seqs.div_ceil(dpa)));
            if fp8_kv {
                a.push("--kv-cache-dtype fp8".into());
            }
        }
        _ => {
            a.push(format!("python -m sglang.launch_server --model-path {}", t.serve_id));
            a.push(format!("--tp-size {tp}"));
            if pp > 1 {
                a.push(format!("--pp-size {pp}"));
            }
            if dp > 1 {
                a.push(format!("--dp-size {dp}"));
            }
            // `--ep-size` splits the experts over the TP ranks; DP attention splits
            // the --tp-size ranks into --dp-size attention groups (`attn_tp_size =
            // tp_size // dp_size`), --max-running-requests stays the server's total
            // (the model runner divides it by dp_size)
            if dpa > 1 {
                a.push(format!("--dp-size {dpa}"));
                a.push("--enable-dp-attention".into());
            }
            if ep > 1 {
                a.push(format!("--ep-size {ep}"));
            }
            a.push(format!("--context-length {}", t.context));
            a.push(format!("--max-running-requests {seqs}"));
            if fp8_kv {
                a.push("--kv-cache-dtype fp8_e4m3".into());
            }
        }
    }
    if quant.starts_with("int8") || quant == "fp8" {
        a.push("--quantization fp8".into());
        notes.push("# 8-bit weights: the engine quantizes the 16-bit checkpoint to fp8 at load (weight-only on cards without fp8)".into());
    } else if quant.starts_with("int4") {
        notes.push(format!(
            "# 4-bit weights: serve a 4-bit AWQ/GPTQ checkpoint of {} (the engine reads its quantization from the checkpoint's config)",
            t.serve_id
        ));
    }
    if spread {
        notes.push(format!(
            "# {nodes} machines: run this on each ({dp} replica{} per machine) and balance requests over the {nodes} servers",
            if dp == 1 { "" } else { "s" }
        ));
    } else if nodes > 1 {
        match l {
            Launcher::Vllm => notes.push(format!(
                "# {nodes} machines: start a Ray cluster over them (`ray start --head` on the first, `ray start --address=<head>:6379` on the others), then run this on the head"
            )),
            _ => {
                a.push(format!("--nnodes {nodes}"));
                a.push("--node-rank $NODE_RANK".into());
                a.push("--dist-init-addr $MASTER_ADDR:5000".into());
                notes.push(format!("# {nodes} machines: run this on each with its NODE_RANK (0 on the first)"));
            }
        }
    }
    let what = match l {
        Launcher::Vllm => "vLLM's default --gpu-memory-utilization 0.9",
        _ => "SGLang's --mem-fraction-static, chosen at start-up from the card",
    };
    let plural = if seqs == 1 { "" } else { "s" };
    notes.push(format!("# sized with {what}; {seqs} sequence{plural} of up to {} tokens per replica", t.context));
    let mut text = String::new();
    for n in &notes {
        text.push_str(n);
        text.push('\n');
    }
    text.push_str(&a.join(" \\\n  "));
    text.push('\n');
    Ok(Emitted { text, launch: None })
}

/// A torchtitan recipe: a Python module with one function returning the
/// `Trainer.Config` of the plan, derived from torchtitan's baseline for the
/// model (`torchtitan/config/README.md`: a run is a function selected with
/// `--module`/`--config`), and its launch line (`run_train.sh` on one
/// machine, `torchrun … -m torchtitan.train` on several).
/// torchtitan's pipeline schedule lines of the plan `s` (none without PP).
fn torchtitan_pipeline(o: &mut String, s: &SetupSummary, t: &Target) {
    if s.pp > 1 && s.virtual_stages > 1 {
        // the interleaved schedule: torchtitan's `Interleaved1F1B` (torch.distributed.pipelining
        // `ScheduleInterleaved1F1B`), v stages per rank of `pipeline_parallel_layers_per_stage`
        // layers each (torchtitan `ParallelismConfig`: "the number of layers per (virtual)
        // pipeline stage"); the planner only proposes v that split the layers evenly
        let _ = writeln!(o, "    config.parallelism.pipeline_parallel_schedule = \"Interleaved1F1B\"");
        let _ = writeln!(
            o,
            "    # {} virtual stages per rank: {} stages of {} layers",
            s.virtual_stages,
            s.pp.saturating_mul(s.virtual_stages),
            t.layers / s.pp.saturating_mul(s.virtual_stages).max(1)
        );
        let _ = writeln!(
            o,
            "    config.parallelism.pipeline_parallel_layers_per_stage = {}",
            t.layers / s.pp.saturating_mul(s.virtual_stages).max(1)
        );
        // torchtitan counts ⌈(layers + first_less + last_less) / layers_per_stage⌉ stages and
        // needs a multiple of the PP degree (`pipeline_llm`); with both weights at their
        // default 1 the count is off by one: the planned equal chunks set them to 0
        let _ = writeln!(o, "    config.parallelism.pipeline_parallel_first_stage_less_layers = 0");
        let _ = writeln!(o, "    config.parallelism.pipeline_parallel_last_stage_less_layers = 0");
    } else if s.pp > 1 {
        let _ = writeln!(o, "    config.parallelism.pipeline_parallel_schedule = \"1F1B\"");
    }
    if s.pp > 1 {
        // torchtitan 0.3.0 captures forward+backward in a CUDA graph unless told not to, and
        // `Trainer.__init__` refuses that under PP (`Trainer.Config._validate_cuda_graphs`:
        // "CUDA graphs do not support pipeline parallelism yet. Set --training.disable_cuda_graphs.")
        let _ = writeln!(o, "    if hasattr(config.training, \"disable_cuda_graphs\"):");
        let _ = writeln!(o, "        config.training.disable_cuda_graphs = True");
    }
}

/// The batch of a torchtitan recipe, for both releases a user may run: torchtitan
/// after 0.3.0 counts it in tokens (`TrainingConfig.max_context_length`,
/// `num_tokens_per_microbatch_per_dp_rank`, `num_tokens_per_train_step`;
/// `ParallelismConfig.num_pp_microbatches`), torchtitan 0.3.0 — the release `pip
/// install torchtitan` gives (PyPI, 2026-09-03) — in sequences (`TrainingConfig.seq_len`,
/// `local_batch_size`: one accumulation step of one data-parallel rank, split into
/// pipeline micro-batches of `ParallelismConfig.pipeline_parallel_microbatch_size`;
/// `global_batch_size` = local × data-parallel degree × accumulation steps,
/// torchtitan/trainer.py `Trainer.__init__`). Its config dataclasses have
/// `slots=True`, so a field of the other release would raise AttributeError: the
/// recipe asks the installed one which fields it has.
fn torchtitan_batch(o: &mut String, s: &SetupSummary, seq: u64, dp: u64) -> Result<(), EmitError> {
    let overflow = || unsupported("batch size overflow");
    let (micro, accum) = (s.micro_batch.max(1), s.grad_accum.max(1));
    let micro_tokens = micro.checked_mul(seq).ok_or_else(overflow)?;
    let step_sequences = micro.checked_mul(accum).and_then(|v| v.checked_mul(dp)).ok_or_else(overflow)?;
    let step_tokens = step_sequences.checked_mul(seq).ok_or_else(overflow)?;
    let _ = writeln!(o, "    # the batch: {step_sequences} sequences of {seq} tokens a step, micro-batch {micro} × {} × {dp} data-parallel ranks",
        if s.pp > 1 { format!("{accum} pipeline micro-batches") } else { format!("accumulation {accum}") });
    let _ = writeln!(o, "    if hasattr(config.training, \"num_tokens_per_train_step\"):");
    let _ = writeln!(o, "        # torchtitan after 0.3.0: the batch in tokens");
    let _ = writeln!(o, "        config.training.max_context_length = {seq}");
    let _ = writeln!(o, "        config.training.num_tokens_per_microbatch_per_dp_rank = {micro_tokens}");
    let _ = writeln!(o, "        config.training.num_tokens_per_train_step = {step_tokens}");
    if s.pp > 1 {
        let _ = writeln!(o, "        config.parallelism.num_pp_microbatches = {accum}");
    }
    let _ = writeln!(o, "    else:");
    let _ = writeln!(o, "        # torchtitan 0.3.0 (PyPI): the batch in sequences");
    let _ = writeln!(o, "        config.training.seq_len = {seq}");
    // under PP one accumulation step holds all the pipeline micro-batches
    let local = if s.pp > 1 { micro.checked_mul(accum).ok_or_else(overflow)? } else { micro };
    let _ = writeln!(o, "        config.training.local_batch_size = {local}");
    let _ = writeln!(o, "        config.training.global_batch_size = {step_sequences}");
    if s.pp > 1 {
        let _ = writeln!(o, "        config.parallelism.pipeline_parallel_microbatch_size = {micro}");
    }
    Ok(())
}

pub fn torchtitan(s: &SetupSummary, t: &Target) -> Result<Emitted, EmitError> {
    check(Launcher::Torchtitan, s)?;
    let (_, package, base, flavor) = torchtitan_recipe(t.model)
        .ok_or_else(|| unsupported(Launcher::Torchtitan.runs_model(t.model).err().unwrap_or_default()))?;
    // the data-parallel (batch) ranks: the CP ranks share their sequences
    let dp = (s.gpus / (s.tp.max(1) * s.pp.max(1) * s.cp.max(1))).max(1);
    let seq = t.seq.max(1);
    // hybrid sharding: torchtitan's HSDP, FSDP2 over the 2-D mesh of
    // data_parallel_replicate_degree × data_parallel_shard_degree (ParallelDims;
    // context parallelism is its own degree, FSDP spans dp_shard × cp)
    let (replicate, shard) = match s.sharding {
        Sharding::None => (dp, 1),
        _ => (s.dp_replicate.max(1), s.shard_degree()),
    };
    let mut o = String::new();
    let _ = writeln!(o, "# torchtitan_recipes/vramfit_plan.py, written by `vramfit plan --emit torchtitan`");
    let _ = writeln!(o, "from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC");
    let fp8 = s.precision == Some(Precision::MixedFp8);
    if fp8 {
        let _ = writeln!(o, "from torchtitan.components.quantization.float8 import Float8LinearConverter");
    }
    if FLOAT8_BASELINES.contains(&base) || fp8 {
        let _ = writeln!(o, "from torchtitan.models.{package} import model_registry");
    }
    let _ = writeln!(o, "from torchtitan.models.{package}.config_registry import {base}");
    let _ = writeln!(
        o,
        "from torchtitan.trainer import Trainer

"
    );
    let _ = writeln!(o, "def vramfit_plan() -> Trainer.Config:");
    let _ = writeln!(o, "    config = {base}()");
    if fp8 {
        // mixed-fp8: torchao float8 linears, the output head in bf16 (torchtitan's own
        // llama3_405b recipe: Float8LinearConverter with filter_fqns=["output"])
        let _ = writeln!(o, "    # the model as planned: float8 linears (torchao), the output head in bf16");
        let _ = writeln!(
            o,
            "    config.model_spec = model_registry(\"{flavor}\", converters=[Float8LinearConverter.Config(filter_fqns=[\"output\"])])"
        );
    } else if FLOAT8_BASELINES.contains(&base) {
        let _ = writeln!(o, "    # the model as planned: bf16 linears (the baseline converts them to float8)");
        let _ = writeln!(o, "    config.model_spec = model_registry(\"{flavor}\")");
    }
    let _ = writeln!(o, "    config.parallelism.data_parallel_replicate_degree = {replicate}");
    let _ = writeln!(o, "    config.parallelism.data_parallel_shard_degree = {shard}");
    if s.sharding == Sharding::Zero2 {
        let _ = writeln!(o, "    # ZeRO-2: parameters stay gathered between forward and backward");
        let _ = writeln!(o, "    config.parallelism.fsdp_reshard_after_forward = \"never\"");
    }
    let _ = writeln!(o, "    config.parallelism.tensor_parallel_degree = {}", s.tp.max(1));
    let _ = writeln!(o, "    config.parallelism.pipeline_parallel_degree = {}", s.pp.max(1));
    if s.cp > 1 {
        // torchtitan `ParallelismConfig.context_parallel_degree`: each sequence split over the CP
        // ranks (PyTorch `context_parallel`, load-balanced chunks), FSDP over dp_shard × cp
        let _ = writeln!(o, "    config.parallelism.context_parallel_degree = {}", s.cp);
    }
    torchtitan_pipeline(&mut o, s, t);
    torchtitan_batch(&mut o, s, seq, dp)?;
    match s.precision {
        Some(Precision::Bf16) => {
            let _ = writeln!(o, "    config.training.dtype = \"bfloat16\"");
        }
        Some(Precision::Fp32) => {
            let _ = writeln!(o, "    config.training.mixed_precision_param = \"float32\"");
        }
        _ => {}
    }
    if s.offload_optimizer.is_some() {
        let _ = writeln!(o, "    config.training.enable_cpu_offload = True");
    }
    let ac = match s.checkpointing {
        Some(Checkpointing::Full) => "FullAC.Config()",
        Some(Checkpointing::Selective) => "SelectiveAC.Config()",
        _ => "None",
    };
    let _ = writeln!(o, "    config.activation_checkpoint = {ac}");
    let _ = writeln!(o, "    return config");
    let nodes = t.machines.max(1);
    let per_node = (s.gpus / nodes).max(1);
    let launch = if nodes == 1 {
        format!("NGPU={per_node} MODULE=torchtitan_recipes.vramfit_plan CONFIG=vramfit_plan ./run_train.sh")
    } else {
        format!(
            "on each of the {nodes} machines: torchrun --nnodes={nodes} --nproc-per-node={per_node} --node-rank=$NODE_RANK --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:29500 -m torchtitan.train --module torchtitan_recipes.vramfit_plan --config vramfit_plan"
        )
    };
    Ok(Emitted { text: o, launch: Some(launch) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use vramfit_core::train::Precision;
    use vramfit_core::Offload;
    use Offload::{Cpu, None as NoOffload};
    use Sharding::{Zero1, Zero2, Zero3};

    /// Top-level keys of https://www.deepspeed.ai/docs/config-json/ (the subset a plan can need and more).
    const DS_TOP: &[&str] = &[
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "optimizer",
        "scheduler",
        "fp16",
        "bf16",
        "amp",
        "gradient_clipping",
        "zero_optimization",
        "steps_per_print",
        "wall_clock_breakdown",
        "activation_checkpointing",
        "communication_data_type",
        "prescale_gradients",
        "gradient_predivide_factor",
        "zero_allow_untested_optimizer",
        "torch_autocast",
    ];
    const DS_ZERO: &[&str] = &[
        "stage",
        "allgather_partitions",
        "allgather_bucket_size",
        "overlap_comm",
        "reduce_scatter",
        "reduce_bucket_size",
        "contiguous_gradients",
        "offload_param",
        "offload_optimizer",
        "stage3_max_live_parameters",
        "stage3_max_reuse_distance",
        "stage3_prefetch_bucket_size",
        "stage3_param_persistence_threshold",
        "stage3_gather_16bit_weights_on_model_save",
        "sub_group_size",
        "round_robin_gradients",
        "zero_hpz_partition_size",
    ];
    const DS_OFFLOAD: &[&str] =
        &["device", "nvme_path", "pin_memory", "buffer_count", "buffer_size", "max_in_cpu", "ratio", "fast_init"];
    const DS_FP16: &[&str] = &[
        "enabled",
        "auto_cast",
        "loss_scale",
        "initial_scale_power",
        "loss_scale_window",
        "hysteresis",
        "consecutive_hysteresis",
        "min_loss_scale",
    ];
    /// accelerate `ClusterConfig` fields (accelerate/commands/config/config_args.py).
    const ACC_TOP: &[&str] = &[
        "compute_environment",
        "distributed_type",
        "mixed_precision",
        "use_cpu",
        "debug",
        "num_processes",
        "machine_rank",
        "num_machines",
        "gpu_ids",
        "main_process_ip",
        "main_process_port",
        "rdzv_backend",
        "same_network",
        "main_training_function",
        "enable_cpu_affinity",
        "deepspeed_config",
        "fsdp_config",
        "megatron_lm_config",
        "downcast_bf16",
        "tpu_name",
        "tpu_zone",
        "tpu_use_cluster",
        "tpu_use_sudo",
        "tpu_env",
        "dynamo_config",
    ];
    const ACC_DS: &[&str] = &[
        "deepspeed_config_file",
        "gradient_accumulation_steps",
        "gradient_clipping",
        "offload_optimizer_device",
        "offload_param_device",
        "offload_optimizer_nvme_path",
        "offload_param_nvme_path",
        "zero3_init_flag",
        "zero3_save_16bit_model",
        "zero_stage",
        "deepspeed_multinode_launcher",
        "deepspeed_hostfile",
        "deepspeed_moe_layer_cls_names",
    ];
    const ACC_FSDP: &[&str] = &[
        "fsdp_activation_checkpointing",
        "fsdp_auto_wrap_policy",
        "fsdp_backward_prefetch",
        "fsdp_cpu_ram_efficient_loading",
        "fsdp_forward_prefetch",
        "fsdp_min_num_params",
        "fsdp_offload_params",
        "fsdp_sharding_strategy",
        "fsdp_state_dict_type",
        "fsdp_sync_module_states",
        "fsdp_transformer_layer_cls_to_wrap",
        "fsdp_use_orig_params",
        "fsdp_version",
        "fsdp_reshard_after_forward",
    ];
    /// torchrun options (torch/distributed/run.py) and the Trainer flags we write.
    const TORCHRUN: &[&str] = &[
        "--standalone",
        "--nnodes",
        "--nproc-per-node",
        "--node-rank",
        "--rdzv-backend",
        "--rdzv-endpoint",
        "--master-port",
    ];
    const TRAINER: &[&str] = &[
        "--fsdp",
        "--fsdp_config",
        "--per_device_train_batch_size",
        "--gradient_accumulation_steps",
        "--bf16",
        "--fp16",
        "--gradient_checkpointing",
        "--optim",
    ];
    /// transformers `fsdp_config` keys.
    const TRAINER_FSDP: &[&str] = &[
        "min_num_params",
        "transformer_layer_cls_to_wrap",
        "backward_prefetch",
        "forward_prefetch",
        "limit_all_gathers",
        "use_orig_params",
        "sync_module_states",
        "cpu_ram_efficient_loading",
        "activation_checkpointing",
    ];

    fn setup(sharding: Sharding, gpus: u64, off_opt: Offload, off_par: Offload) -> SetupSummary {
        SetupSummary {
            method: Method::Full,
            precision: Some(Precision::MixedBf16),
            optimizer: Some(Optimizer::AdamW),
            checkpointing: Some(Checkpointing::Full),
            micro_batch: 2,
            grad_accum: 4,
            global_batch: 2 * 4 * gpus,
            gpus,
            tp: 1,
            pp: 1,
            dp: gpus,
            replicas: 1,
            ep: 1,
            etp: 0,
            dp_attention: 1,
            virtual_stages: 1,
            sharding,
            sequence_parallel: false,
            offload_optimizer: off_opt,
            offload_params: off_par,
            weights: None,
            kv_dtype: None,
            cp: 1,
            dp_replicate: 1,
            hpz: 1,
        }
    }

    /// Megatron-LM runs full training with plain DP or its distributed optimizer
    /// (ZeRO-1), the optimizer on the CPU only with the distributed optimizer
    /// (`--optimizer-cpu-offload`), no ZeRO-2/3, no NVMe or parameter offload, no
    /// LoRA (`megatron_rules`).
    #[test]
    fn megatron_runs_its_distributed_optimizer_and_refuses_the_rest() {
        let n = Offload::None;
        assert!(check(Launcher::Megatron, &setup(Sharding::Zero1, 8, n, n)).is_ok());
        assert!(check(Launcher::Megatron, &setup(Sharding::None, 8, n, n)).is_ok());
        assert!(check(Launcher::Megatron, &setup(Sharding::Zero1, 8, Offload::Cpu, n)).is_ok());
        for (z, off) in [(Sharding::Zero2, n), (Sharding::Zero3, n), (Sharding::Zero1, Offload::Nvme)] {
            let err = check(Launcher::Megatron, &setup(z, 8, off, n)).unwrap_err().to_string();
            assert!(err.contains("ZeRO-1") || err.contains("offload"), "{err}");
        }
        let lora = SetupSummary { method: Method::Lora, ..setup(Sharding::None, 8, n, n) };
        assert!(check(Launcher::Megatron, &lora).unwrap_err().to_string().contains("LoRA/QLoRA"));
        let amp = SetupSummary { precision: Some(Precision::AmpBf16), ..setup(Sharding::None, 8, n, n) };
        assert!(check(Launcher::Megatron, &amp).is_err());
    }

    fn keys_in(v: &Value, allowed: &[&str], what: &str) {
        for k in v.as_object().unwrap_or_else(|| panic!("{what} is not an object")).keys() {
            assert!(allowed.contains(&k.as_str()), "{what}: `{k}` is not a documented key");
        }
    }

    /// Issue 21: a MoE model under ZeRO-3 names its sparse block as a leaf
    /// (accelerate's key, DeepSpeed's call in the launch note); dense models
    /// and stages below 3 do not.
    #[test]
    fn moe_under_zero3_names_its_leaf_block() {
        let s = setup(Zero3, 16, NoOffload, NoOffload);
        // ZeRO-3 without offload is written as FSDP, which needs no leaf
        assert!(!accelerate(&s, Family::Mixtral, 1).unwrap().contains("moe_layer_cls"));
        let mut z3_ds = s.clone();
        z3_ds.offload_optimizer = Cpu;
        let yaml = accelerate(&z3_ds, Family::Mixtral, 1).unwrap();
        assert!(yaml.contains("distributed_type: DEEPSPEED"), "{yaml}");
        assert!(yaml.contains("deepspeed_moe_layer_cls_names: MixtralSparseMoeBlock"), "{yaml}");
        assert!(!accelerate(&z3_ds, Family::Llama, 1).unwrap().contains("moe_layer_cls"));
        let launch = deepspeed_for(&s, Family::Qwen3Moe, 2).unwrap().launch.unwrap();
        assert!(launch.contains("set_z3_leaf_modules(model, [Qwen3MoeSparseMoeBlock])"), "{launch}");
        assert!(!deepspeed_for(&setup(Zero2, 16, NoOffload, NoOffload), Family::Qwen3Moe, 2)
            .unwrap()
            .launch
            .unwrap()
            .contains("leaf"));
    }

    /// Issue 21: QLoRA whose parameters are flattened and sharded (ZeRO-3,
    /// FSDP) stores its 4-bit weights in the compute dtype.
    #[test]
    fn qlora_sharded_sets_quant_storage() {
        let mut s = setup(Zero3, 8, NoOffload, NoOffload);
        s.method = Method::Qlora;
        let launch = deepspeed_for(&s, Family::Llama, 1).unwrap().launch.unwrap();
        assert!(launch.contains("bnb_4bit_quant_storage=torch.bfloat16"), "{launch}");
        assert!(torchrun(&s, Family::Llama, 1).unwrap().contains("bnb_4bit_quant_storage=torch.bfloat16"));
        let mut plain = setup(Sharding::None, 1, NoOffload, NoOffload);
        plain.method = Method::Qlora;
        assert!(!deepspeed_for(&plain, Family::Llama, 1).unwrap().launch.unwrap().contains("quant_storage"));
    }

    #[test]
    fn deepspeed_configs_parse_back_with_documented_keys() {
        for (sh, opt, par) in [
            (Zero2, NoOffload, NoOffload),
            (Zero3, Cpu, Cpu),
            (Zero2, Cpu, NoOffload),
            (Sharding::None, NoOffload, NoOffload),
        ] {
            let s = setup(sh, 8, opt, par);
            let text = deepspeed(&s, 1).unwrap().text;
            let v: Value = serde_json::from_str(&text).unwrap();
            keys_in(&v, DS_TOP, "ds_config");
            keys_in(&v["zero_optimization"], DS_ZERO, "zero_optimization");
            // DeepSpeed asserts train_batch_size = micro × accum × world size (no TP/PP here)
            assert_eq!(
                v["train_batch_size"].as_u64().unwrap(),
                v["train_micro_batch_size_per_gpu"].as_u64().unwrap()
                    * v["gradient_accumulation_steps"].as_u64().unwrap()
                    * 8
            );
            assert_eq!(v["bf16"]["enabled"], json!(true));
            assert_eq!(v["zero_optimization"]["stage"].as_u64().unwrap(), stage(&s));
            // the optimizer is always declared, its values left to the Trainer
            assert_eq!(v["optimizer"]["type"], json!("AdamW"));
            assert_eq!(v["optimizer"]["params"]["lr"], json!("auto"));
            // full checkpointing is carried (DeepSpeed block + the Trainer flag)
            assert!(v.get("activation_checkpointing").is_some());
            if opt != NoOffload {
                keys_in(&v["zero_optimization"]["offload_optimizer"], DS_OFFLOAD, "offload_optimizer");
                assert_eq!(v["zero_optimization"]["offload_optimizer"]["device"], json!("cpu"));
            }
            if par != NoOffload {
                keys_in(&v["zero_optimization"]["offload_param"], DS_OFFLOAD, "offload_param");
            }
        }
        let mut s = setup(Zero2, 2, NoOffload, NoOffload);
        s.precision = Some(Precision::MixedFp16);
        let v: Value = serde_json::from_str(&deepspeed(&s, 1).unwrap().text).unwrap();
        keys_in(&v["fp16"], DS_FP16, "fp16");
        assert!(v.get("bf16").is_none());
        // AMP is autocast over fp32 weights, not DeepSpeed's 16-bit weights
        s.precision = Some(Precision::AmpBf16);
        let v: Value = serde_json::from_str(&deepspeed(&s, 1).unwrap().text).unwrap();
        assert_eq!(v["torch_autocast"], json!({"enabled": true, "dtype": "bfloat16"}));
        assert!(v.get("bf16").is_none() && v.get("fp16").is_none());
    }

    #[test]
    fn every_switch_is_carried_in_the_engines_terms() {
        // 8-bit AdamW: the Trainer builds it (--optim), ZeRO is told it is untested
        let mut s = setup(Zero2, 4, NoOffload, NoOffload);
        s.optimizer = Some(Optimizer::AdamW8bit);
        let e = deepspeed(&s, 1).unwrap();
        let v: Value = serde_json::from_str(&e.text).unwrap();
        assert!(v.get("optimizer").is_none());
        assert_eq!(v["zero_allow_untested_optimizer"], json!(true));
        let launch = e.launch.unwrap();
        for flag in [
            "--optim adamw_bnb_8bit",
            "--gradient_checkpointing",
            "--bf16",
            "--per_device_train_batch_size 2",
            "--gradient_accumulation_steps 4",
            "--num_gpus 4",
        ] {
            assert!(launch.contains(flag), "{flag} not in {launch}");
        }
        // SGD: DeepSpeed's optimizer block (torch.optim fallback), momentum as planned
        s.optimizer = Some(Optimizer::SgdMomentum);
        let v: Value = serde_json::from_str(&deepspeed(&s, 1).unwrap().text).unwrap();
        assert_eq!(v["optimizer"], json!({"type": "SGD", "params": {"lr": "auto", "momentum": 0.9}}));
        // …which the Trainer's --optim sgd cannot express
        assert!(matches!(torchrun(&s, Family::Llama, 1), Err(EmitError::Unsupported(m)) if m.contains("momentum")));
        s.optimizer = Some(Optimizer::Sgd);
        assert!(torchrun(&s, Family::Llama, 1).unwrap().contains("--optim sgd"));
        // selective checkpointing and pure bf16 are refused with the reason
        s.checkpointing = Some(Checkpointing::Selective);
        assert!(matches!(deepspeed(&s, 1), Err(EmitError::Unsupported(m)) if m.contains("selective")));
        s.checkpointing = Some(Checkpointing::Full);
        s.precision = Some(Precision::Bf16);
        assert!(matches!(deepspeed(&s, 1), Err(EmitError::Unsupported(m)) if m.contains("pure bf16")));
    }

    #[test]
    fn multi_node_accelerate_writes_a_config_per_node() {
        let text = accelerate(&setup(Zero3, 16, NoOffload, NoOffload), Family::Llama, 2).unwrap();
        for rank in 0..2u64 {
            let start = text.find(&format!("cat > accelerate_node{rank}.yaml <<'EOF'\n")).unwrap();
            let body = &text[start..];
            let body = &body[body.find('\n').unwrap() + 1..body.find("\nEOF").unwrap()];
            let v: BTreeMap<String, serde_json::Value> =
                serde_saphyr::from_str(body).unwrap_or_else(|e| panic!("{e}\n{body}"));
            let v = Value::Object(v.into_iter().collect());
            keys_in(&v, ACC_TOP, "accelerate config");
            assert_eq!(v["machine_rank"], json!(rank));
            assert_eq!(v["num_machines"], json!(2));
            assert_eq!(v["main_process_ip"], json!("MAIN_PROCESS_IP"));
            assert_eq!(v["main_process_port"], json!(29500));
            assert_eq!(v["fsdp_config"]["fsdp_version"], json!(2));
            assert_eq!(v["fsdp_config"]["fsdp_reshard_after_forward"], json!(true));
        }
    }

    #[test]
    fn deepspeed_refuses_what_it_cannot_express() {
        let mut s = setup(Zero2, 8, NoOffload, NoOffload);
        s.tp = 2;
        assert!(matches!(deepspeed(&s, 1), Err(EmitError::Unsupported(_))));
        let s = setup(Zero2, 8, NoOffload, Cpu);
        assert!(matches!(deepspeed(&s, 1), Err(EmitError::Unsupported(m)) if m.contains("stage 3")));
        let mut s = setup(Sharding::None, 1, NoOffload, NoOffload);
        s.method = Method::Inference;
        assert_eq!(deepspeed(&s, 1), Err(EmitError::NotTraining));
    }

    #[test]
    fn accelerate_yaml_parses_back_with_documented_keys() {
        for (sh, opt, par, want) in [
            (Zero3, NoOffload, NoOffload, "FSDP"),
            (Zero2, NoOffload, NoOffload, "FSDP"),
            (Zero1, NoOffload, NoOffload, "DEEPSPEED"),
            (Zero2, Cpu, NoOffload, "DEEPSPEED"),
            (Zero3, Cpu, Cpu, "FSDP"),
            (Sharding::None, NoOffload, NoOffload, "MULTI_GPU"),
        ] {
            let text = accelerate(&setup(sh, 8, opt, par), Family::Llama, 1).unwrap();
            assert!(text.contains("# launch: accelerate launch"), "{text}");
            let v: BTreeMap<String, serde_json::Value> =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let v = Value::Object(v.into_iter().collect());
            keys_in(&v, ACC_TOP, "accelerate config");
            assert_eq!(v["distributed_type"], json!(want), "{text}");
            assert_eq!(v["num_processes"], json!(8));
            assert_eq!(v["mixed_precision"], json!("bf16"));
            if want == "FSDP" {
                keys_in(&v["fsdp_config"], ACC_FSDP, "fsdp_config");
                assert_eq!(v["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"], json!("LlamaDecoderLayer"));
                assert_eq!(v["fsdp_config"]["fsdp_version"], json!(2));
                assert_eq!(v["fsdp_config"]["fsdp_reshard_after_forward"], json!(sh == Zero3));
                assert_eq!(v["fsdp_config"]["fsdp_offload_params"], json!(par != NoOffload));
            }
            if want == "DEEPSPEED" {
                keys_in(&v["deepspeed_config"], ACC_DS, "deepspeed_config");
                assert_eq!(v["deepspeed_config"]["gradient_accumulation_steps"], json!(4));
                assert_eq!(v["deepspeed_config"]["offload_optimizer_device"], json!(opt));
            }
        }
    }

    #[test]
    fn emitted_configs_snapshot() {
        let s = setup(Zero3, 8, Cpu, Cpu);
        insta::assert_snapshot!("ds_zero3_offload", deepspeed(&s, 1).unwrap().text);
        insta::assert_snapshot!(
            "accelerate_fsdp_full_shard",
            accelerate(&setup(Zero3, 8, NoOffload, NoOffload), Family::Llama, 1).unwrap()
        );
        insta::assert_snapshot!(
            "torchrun_fsdp_two_nodes",
            torchrun(&setup(Zero3, 16, NoOffload, NoOffload), Family::Mistral, 2).unwrap()
        );
    }

    #[test]
    fn torchrun_command_uses_documented_flags() {
        for (sh, machines) in [(Zero3, 1), (Zero2, 2), (Sharding::None, 1)] {
            let text = torchrun(&setup(sh, 8, NoOffload, NoOffload), Family::Llama, machines).unwrap();
            // the fsdp_config.json here-doc parses and uses Trainer keys
            if sh != Sharding::None {
                let start = text.find("<<'EOF'\n").unwrap() + 8;
                let end = text[start..].find("\nEOF").unwrap() + start;
                let cfg: Value = serde_json::from_str(&text[start..end]).unwrap();
                keys_in(&cfg, TRAINER_FSDP, "fsdp_config.json");
                assert_eq!(cfg["transformer_layer_cls_to_wrap"], json!(["LlamaDecoderLayer"]));
            }
            let cmd: String = text[text.find("torchrun").unwrap()..].replace("\\\n", " ");
            let mut after_script = false;
            for tok in cmd.split_whitespace() {
                if tok == "train.py" {
                    after_script = true;
                    continue;
                }
                if !tok.starts_with("--") {
                    continue;
                }
                let flag = tok.split('=').next().unwrap();
                let known = if after_script { TRAINER } else { TORCHRUN };
                assert!(
                    known.contains(&flag),
                    "`{flag}` is not a documented {} flag",
                    if after_script { "Trainer" } else { "torchrun" }
                );
            }
            assert!(cmd.contains(&format!("--nproc-per-node={}", 8 / machines)));
            if sh == Zero3 {
                assert!(cmd.contains("--fsdp 'full_shard auto_wrap'"));
            }
        }
        // FSDP has no optimizer-only offload
        assert!(torchrun(&setup(Zero2, 8, Cpu, NoOffload), Family::Llama, 1).is_err());
    }
}
