//! Training flags of `vramfit estimate` / `vramfit plan` (owned by the training work).
//!
//! Interface contract with `cmd::estimate::WorkloadArgs` (which flattens
//! this struct): the common flags (`--task`, `--batch`, `--seq/--context`,
//! `--gpus`, `--tp`, `--pp`, `--dtype`) are parsed there and handed over as
//! [`Common`]; everything training-only lives here. A DeepSpeed config
//! (`--deepspeed`) and a PEFT adapter config (`--adapter-config`) fill the
//! same fields; a flag that contradicts them is an error naming both.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use vramfit_core::train::{AttentionImpl, Checkpointing, LoraSetup, LoraTargets, Optimizer, Precision, TrainKind};
use vramfit_core::{DType, Offload, Parallelism, Sharding, TrainSetup};
use vramfit_ingest::deepspeed::{parse_deepspeed, DsValue, MAX_DS_BYTES};
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

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointingArg {
    None,
    Full,
    Selective,
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
    /// mixed-fp16 (16-bit weights + fp32 master, DeepSpeed/Megatron), bf16 (pure) [default: amp-bf16]
    #[arg(long, value_parser = parse_precision, value_name = "P")]
    pub precision: Option<Precision>,
    /// Optimizer: adamw, adamw-8bit, paged-adamw-8bit, sgd, sgd-momentum, adafactor, lion [default: adamw]
    #[arg(long, value_parser = parse_optimizer, value_name = "O")]
    pub optimizer: Option<Optimizer>,
    /// Micro-batches accumulated per optimizer step [default: 1]
    #[arg(long, value_name = "K")]
    pub grad_accum: Option<u64>,
    /// Activation checkpointing [default: none]
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
}

fn read_capped(path: &Path, cap: usize, what: &str) -> anyhow::Result<Vec<u8>> {
    let meta = std::fs::metadata(path).with_context(|| format!("{}: cannot read {what}", path.display()))?;
    if meta.len() > cap as u64 {
        bail!("{}: {} bytes is too large for {what} (limit {cap})", path.display(), meta.len());
    }
    std::fs::read(path).with_context(|| format!("{}: cannot read {what}", path.display()))
}

fn parse_targets(s: &str) -> anyhow::Result<LoraTargets> {
    let s = s.trim();
    if s.eq_ignore_ascii_case("all-linear") || s.eq_ignore_ascii_case("all") {
        return Ok(LoraTargets::AllLinear);
    }
    let names: Vec<String> = s.split(',').map(|x| x.trim().to_string()).filter(|x| !x.is_empty()).collect();
    if names.is_empty() {
        bail!("--lora-targets: give module names (q_proj,v_proj) or all-linear");
    }
    Ok(LoraTargets::Modules(names))
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
            ("--offload", self.offload.is_some()),
            ("--deepspeed", self.deepspeed.is_some()),
            ("--first-step", self.first_step),
            ("--no-foreach", self.no_foreach),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }

    /// Turn the training flags into a training setup, its parallelism and the
    /// notes config files raised ("auto" values, unknown keys).
    pub fn build_with_notes(&self, common: &Common) -> anyhow::Result<(TrainSetup, Parallelism, Vec<String>)> {
        let mut notes = Vec::new();
        let kind = match common.task {
            TaskKind::Train => TrainKind::Full,
            TaskKind::Lora => TrainKind::Lora,
            TaskKind::Qlora => TrainKind::Qlora,
            TaskKind::Infer => bail!("training flags need --task train, lora or qlora"),
        };
        let lora_flags = [
            ("--lora-rank", self.lora_rank.is_some()),
            ("--lora-alpha", self.lora_alpha.is_some()),
            ("--lora-targets", self.lora_targets.is_some()),
            ("--lora-dropout", self.lora_dropout.is_some()),
            ("--adapter-config", self.adapter_config.is_some()),
        ];
        if kind == TrainKind::Full {
            if let Some((f, _)) = lora_flags.iter().find(|(_, given)| *given) {
                bail!("{f} only applies to --task lora or qlora (this is --task train, a full fine-tune)");
            }
        }
        let mut setup = TrainSetup { kind, batch: common.batch, seq: common.seq, ..TrainSetup::default() };
        let mut precision = self.precision;
        let mut zero = self.zero.map(|z| (z, "--zero"));
        let mut offload_opt = self.offload.map(|o| match o {
            OffloadArg::None => Offload::None,
            OffloadArg::Cpu => Offload::Cpu,
            OffloadArg::Nvme => Offload::Nvme,
        });
        let mut offload_param: Option<Offload> = None;
        let mut grad_accum = self.grad_accum;
        let mut optimizer = self.optimizer;

        // DeepSpeed config.
        if let Some(path) = &self.deepspeed {
            let file = path.display().to_string();
            let ds = parse_deepspeed(&read_capped(path, MAX_DS_BYTES, "a DeepSpeed config")?, &file)?;
            if let DsValue::Set(stage) = ds.zero_stage {
                match zero {
                    Some((z, flag)) if z != stage => {
                        bail!("{flag} {z} contradicts zero_optimization.stage {stage} in {file}")
                    }
                    _ => zero = Some((stage, "zero_optimization.stage")),
                }
            }
            let ds_prec = match (ds.bf16, ds.fp16) {
                (DsValue::Set(true), _) => Some(Precision::MixedBf16),
                (_, DsValue::Set(true)) => Some(Precision::MixedFp16),
                (DsValue::Set(false) | DsValue::Absent, DsValue::Set(false) | DsValue::Absent)
                    if ds.bf16 != DsValue::Absent || ds.fp16 != DsValue::Absent =>
                {
                    Some(Precision::Fp32)
                }
                _ => None,
            };
            if let Some(dp) = ds_prec {
                match precision {
                    Some(p) if p.compute_dtype() != dp.compute_dtype() => bail!(
                        "--precision {} contradicts {file} ({} enabled)",
                        p.name(),
                        if dp == Precision::Fp32 { "neither bf16 nor fp16" } else { dp.name() }
                    ),
                    Some(_) => {}
                    None => precision = Some(dp),
                }
            }
            for (ds_v, slot, name) in [
                (ds.offload_optimizer, &mut offload_opt, "zero_optimization.offload_optimizer.device"),
                (ds.offload_param, &mut offload_param, "zero_optimization.offload_param.device"),
            ] {
                if let DsValue::Set(o) = ds_v {
                    match slot {
                        Some(flag) if *flag != o && name.contains("optimizer") => {
                            bail!("--offload {flag:?} contradicts {name} {o:?} in {file}")
                        }
                        _ => *slot = Some(o),
                    }
                }
            }
            if let DsValue::Set(mb) = ds.micro_batch {
                if common.batch != 1 && common.batch != mb {
                    bail!("--batch {} contradicts train_micro_batch_size_per_gpu {mb} in {file}", common.batch);
                }
                setup.batch = mb;
            }
            if let DsValue::Set(ga) = ds.grad_accum {
                match grad_accum {
                    Some(g) if g != ga => {
                        bail!("--grad-accum {g} contradicts gradient_accumulation_steps {ga} in {file}")
                    }
                    _ => grad_accum = Some(ga),
                }
            }
            if let Some(t) = &ds.optimizer_type {
                let mapped = match t.to_ascii_lowercase().as_str() {
                    "adam" | "adamw" | "fusedadam" | "cpuadam" => Some(Optimizer::AdamW),
                    "sgd" => Some(Optimizer::Sgd),
                    "lion" | "fusedlion" => Some(Optimizer::Lion),
                    _ => None,
                };
                match (mapped, optimizer) {
                    (Some(m), None) => optimizer = Some(m),
                    (Some(m), Some(o)) if m != o => {
                        bail!("--optimizer {} contradicts optimizer.type {t} in {file}", o.name())
                    }
                    (None, _) => notes.push(format!("{file}: optimizer.type {t} is not modelled; sized as AdamW")),
                    _ => {}
                }
            }
            notes.extend(ds.notes.iter().map(|n| format!("{file}: {n}")));
            if !ds.unknown_keys.is_empty() {
                notes.push(format!("{file}: keys not used by vramfit: {}", ds.unknown_keys.join(", ")));
            }
            if ds.activation_checkpointing && self.checkpointing.is_none() {
                notes.push(format!(
                    "{file}: activation_checkpointing is configured but the model decides whether it checkpoints; pass --checkpointing full to size it"
                ));
            }
        }

        // Sharding.
        let sharding = match (zero, self.fsdp) {
            (Some((_, flag)), Some(_)) => bail!("{flag} and --fsdp both shard model states; give one of them"),
            (Some((z, _)), None) => Sharding::from_stage(z).unwrap_or(Sharding::None),
            (None, Some(FsdpArg::FullShard)) => Sharding::Zero3,
            (None, Some(FsdpArg::ShardGradOp)) => Sharding::Zero2,
            (None, None) => Sharding::None,
        };
        if let Some((z, flag)) = zero {
            if z >= 2 && common.pp > 1 {
                bail!(
                    "{flag} {z} with --pp {}: DeepSpeed does not support ZeRO-2/3 with pipeline parallelism (use --zero 1 with --pp, or drop --pp)",
                    common.pp
                );
            }
        }
        let offload_opt = offload_opt.unwrap_or(Offload::None);
        if offload_opt != Offload::None && sharding == Sharding::None {
            bail!("--offload needs sharded optimizer states: add --zero 1|2|3 (or --fsdp)");
        }
        let offload_param = match offload_param {
            Some(o) => o,
            // --offload with ZeRO-3 moves the parameters too (ZeRO-Infinity)
            None if sharding == Sharding::Zero3 && self.deepspeed.is_none() => offload_opt,
            None => Offload::None,
        };
        if offload_param != Offload::None && sharding != Sharding::Zero3 {
            bail!("parameter offload needs ZeRO-3 / --fsdp full-shard");
        }
        if self.sp && common.tp <= 1 {
            bail!("--sp (sequence parallelism) needs --tp 2 or more");
        }

        // Precision and --dtype.
        let precision = match (precision, common.dtype, kind) {
            (Some(p), Some(d), TrainKind::Full) if p.weight_dtype() != d => {
                bail!("--dtype {d} contradicts --precision {} (its weights are {})", p.name(), p.weight_dtype())
            }
            (None, Some(DType::F32), TrainKind::Full) => Precision::Fp32,
            (None, Some(DType::BF16), TrainKind::Full) => Precision::Bf16,
            (None, Some(d), TrainKind::Full) => {
                bail!("--dtype {d} for a full fine-tune: say --precision mixed-fp16, amp-fp16, amp-bf16, bf16 or fp32")
            }
            (p, _, _) => p.unwrap_or_default(),
        };
        setup.precision = precision;
        match (kind, common.dtype) {
            (TrainKind::Lora, Some(d)) if d.is_compute_float() => setup.base_dtype = Some(d),
            (TrainKind::Lora, Some(d)) => {
                bail!("--dtype {d} for the LoRA base: use --task qlora for a 4-bit base (or a quantized checkpoint)")
            }
            (TrainKind::Qlora, Some(d)) if d.is_compute_float() => {
                bail!("--dtype {d} contradicts --task qlora (its base is NF4; the compute dtype follows --precision)")
            }
            _ => {}
        }
        setup.optimizer = optimizer.unwrap_or_default();
        setup.grad_accum = grad_accum.unwrap_or(1);
        if setup.grad_accum == 0 {
            bail!("--grad-accum must be at least 1");
        }
        setup.checkpointing = match self.checkpointing {
            None | Some(CheckpointingArg::None) => Checkpointing::None,
            Some(CheckpointingArg::Full) => Checkpointing::Full,
            Some(CheckpointingArg::Selective) => Checkpointing::Selective,
        };
        setup.attention = match self.attention {
            Some(AttentionArg::Eager) => AttentionImpl::Eager,
            _ => AttentionImpl::Sdpa,
        };
        setup.first_step = self.first_step;
        setup.foreach = !self.no_foreach;

        // LoRA.
        if kind != TrainKind::Full {
            let mut lora = LoraSetup::default();
            if let Some(path) = &self.adapter_config {
                let file = path.display().to_string();
                let a = parse_adapter_config(
                    &read_capped(path, MAX_ADAPTER_CONFIG_BYTES, "an adapter_config.json")?,
                    &file,
                )?;
                if let Some(g) = self.lora_rank {
                    if g != a.lora.rank {
                        bail!("--lora-rank {g} contradicts r {} in {file}", a.lora.rank);
                    }
                }
                if let Some(t) = &self.lora_targets {
                    if parse_targets(t)? != a.lora.targets {
                        bail!("--lora-targets {t} contradicts target_modules in {file}");
                    }
                }
                notes.extend(a.notes.iter().map(|n| format!("{file}: {n}")));
                lora = a.lora;
            }
            if let Some(r) = self.lora_rank {
                if r == 0 {
                    bail!("--lora-rank must be at least 1");
                }
                lora.rank = r;
                if self.lora_alpha.is_none() && self.adapter_config.is_none() {
                    lora.alpha = 2.0 * r as f64;
                }
            }
            if let Some(a) = self.lora_alpha {
                lora.alpha = a;
            }
            if let Some(t) = &self.lora_targets {
                lora.targets = parse_targets(t)?;
            }
            if let Some(d) = self.lora_dropout {
                if !(0.0..1.0).contains(&d) {
                    bail!("--lora-dropout {d} is not a probability in [0, 1)");
                }
                lora.dropout = d;
            }
            setup.lora = lora;
        }

        let par = Parallelism {
            gpus: common.gpus,
            tp: common.tp,
            pp: common.pp,
            sharding,
            fsdp: self.fsdp.is_some(),
            sequence_parallel: self.sp,
            offload_optimizer: offload_opt,
            offload_params: offload_param,
        };
        Ok((setup, par, notes))
    }
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
