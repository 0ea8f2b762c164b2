//! PyTorch-measured calibration cases (`calibration/data/*.jsonl`): each
//! line is a model (an `arch` config object with `family`), a workload and
//! the bytes PyTorch accounted for it. This module turns a line into a
//! [`ModelSpec`] + [`Workload`] + the measured figures, so the estimator
//! can be compared with the measurement.
//!
//! The embedded sets are `calibration/data/shared-cases.jsonl` (a copy of
//! `shared/calibration/cases.jsonl`) and `calibration/data/vramfit-cases.jsonl`
//! (measured by `calibration/harness/measure.py`).

pub mod llamacpp;
pub mod published;
pub mod throughput;

use crate::config::parse_config_value;
use crate::error::IngestError;
use crate::json::Obj;
use serde_json::Value;
use vramfit_core::train::{AttentionImpl, Checkpointing, LoraSetup, Optimizer, Precision, TrainKind};
use vramfit_core::{
    DType, InferenceSetup, ModelSpec, Parallelism, PrefillLogits, RuntimeSetup, Task, TrainSetup, Workload,
};

/// The shared set, embedded.
pub const SHARED_CASES: &str = include_str!("../../../../calibration/data/shared-cases.jsonl");
/// This project's own measurements, embedded.
pub const VRAMFIT_CASES: &str = include_str!("../../../../calibration/data/vramfit-cases.jsonl");

/// Largest case file accepted.
pub const MAX_CASES_BYTES: usize = 64 << 20;
/// Largest single line accepted.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// Calibration group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Group {
    /// parameter counts and weight bytes
    A,
    /// inference prefill
    B,
    /// training step
    C,
}

impl Group {
    pub fn name(self) -> &'static str {
        match self {
            Group::A => "A",
            Group::B => "B",
            Group::C => "C",
        }
    }

    fn from_field(s: &str) -> Option<Group> {
        let up = s.to_ascii_uppercase();
        if up.starts_with("A_") || up == "A" {
            Some(Group::A)
        } else if up.starts_with("B_") || up == "B" {
            Some(Group::B)
        } else if up.starts_with("C_") || up == "C" {
            Some(Group::C)
        } else {
            None
        }
    }
}

/// What PyTorch measured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Measured {
    pub params_total: Option<u64>,
    pub trainable_params: Option<u64>,
    pub param_bytes: Option<u64>,
    /// live-tensor peak (`peak_total`): what `max_memory_allocated()` shows
    pub tensor_peak_bytes: Option<u64>,
    pub peak_phase: Option<String>,
    pub kv_cache_bytes: Option<u64>,
    pub logits_bytes: Option<u64>,
    /// `torch.cuda.memory_reserved()` when measured on a GPU
    pub reserved_bytes: Option<u64>,
}

/// One measured case.
#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub group: Group,
    pub spec: ModelSpec,
    /// None for group A (weights only)
    pub workload: Option<Workload>,
    pub measured: Measured,
    /// `method` field: how it was measured
    pub method: String,
    /// file:line the case came from
    pub origin: String,
}

/// Precision from the record: an explicit `precision` (vramfit harness)
/// or the shared set's `dtype_setup` (`a_fp32`, `b_amp_bf16`, `c_pure_bf16`).
fn precision(m: &Obj) -> Result<Precision, IngestError> {
    if let Some(p) = m.str("precision")? {
        return p.parse().map_err(|_: String| {
            let names: Vec<&str> = Precision::ALL.iter().map(|x| x.name()).collect();
            m.bad("precision", &format!("one of {}", names.join(", ")), &Value::String(p.into()))
        });
    }
    let d = m.str("dtype_setup")?.ok_or_else(|| m.missing("dtype_setup"))?;
    dtype_setup(d).ok_or_else(|| {
        m.bad("dtype_setup", "a_fp32, b_amp_bf16, c_pure_bf16 (or a `precision` field)", &Value::String(d.into()))
    })
}

/// The shared set's `dtype_setup` label, read as words (`b_amp_bf16` → amp, bf16):
/// autocast or pure, and the 16-bit dtype by its name.
fn dtype_setup(label: &str) -> Option<Precision> {
    let lower = label.to_ascii_lowercase();
    let words: Vec<&str> = lower.split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).collect();
    let has = |w: &str| words.contains(&w);
    let half = [DType::BF16, DType::F16].into_iter().find(|d| has(d.name()));
    Some(match (has("amp"), has("pure"), half) {
        (true, _, Some(DType::BF16)) => Precision::AmpBf16,
        (true, _, Some(_)) => Precision::AmpFp16,
        (false, true, Some(DType::BF16)) => Precision::Bf16,
        _ if has(DType::F32.name()) => Precision::Fp32,
        _ => return None,
    })
}

fn optimizer(m: &Obj) -> Result<(Optimizer, bool), IngestError> {
    let o = m.str("optimizer")?.ok_or_else(|| m.missing("optimizer"))?;
    let l = o.to_ascii_lowercase().replace(' ', "");
    let foreach = !l.contains("foreach=false") && !l.contains("fused=true");
    let opt = if let Ok(opt) = l.parse::<Optimizer>() {
        opt
    } else if l.contains("pagedadamw8bit") {
        Optimizer::PagedAdamW8bit
    } else if l.contains("adamw8bit") {
        Optimizer::AdamW8bit
    } else if l.contains("adamw") {
        Optimizer::AdamW
    } else if l.contains("adafactor") {
        Optimizer::Adafactor
    } else if l.contains("lion") {
        Optimizer::Lion
    } else if l.contains("sgd") && l.contains("momentum") {
        Optimizer::SgdMomentum
    } else if l.contains("sgd") {
        Optimizer::Sgd
    } else {
        return Err(m.bad(
            "optimizer",
            "an AdamW / 8-bit AdamW / SGD / Adafactor / Lion description",
            &Value::String(o.into()),
        ));
    };
    Ok((opt, foreach))
}

fn lora(m: &Obj) -> Result<Option<LoraSetup>, IngestError> {
    let Some(l) = m.obj_expecting("lora", "lora", "an object with r and target_modules")? else { return Ok(None) };
    let r = l.u64("r")?.ok_or_else(|| l.missing("r"))?;
    let targets = crate::lora::from_json(&l, "target_modules")?.ok_or_else(|| l.missing("target_modules"))?;
    Ok(Some(LoraSetup {
        rank: r,
        alpha: l.f64("lora_alpha")?.unwrap_or(2.0 * r as f64),
        targets,
        dropout: l.f64("lora_dropout")?.unwrap_or(0.0),
        adapter_fp32: l.bool("adapter_fp32")?.unwrap_or(true),
    }))
}

/// Parse one JSON line.
pub fn parse_case(line: &str, origin: &str) -> Result<Case, IngestError> {
    let v = crate::json::parse(line.as_bytes(), origin)?;
    let m = Obj::root(&v, origin, "(line)")?;
    let id = m.req_str("id")?.to_string();
    let gs = m.req_str("group")?;
    let group = Group::from_field(gs)
        .ok_or_else(|| m.bad("group", "A_weights, B_prefill_kv or C_train", &Value::String(gs.into())))?;
    let arch = m.get("arch").ok_or_else(|| m.missing("arch"))?;
    let mut spec = parse_config_value(arch, &format!("{origin}: arch"))?;
    spec.name = m.str("model")?.unwrap_or(&id).to_string();
    let measured = Measured {
        params_total: m.u64("params_total")?,
        trainable_params: m.u64("trainable_params")?,
        param_bytes: m.u64("param_bytes")?,
        tensor_peak_bytes: m.u64("peak_total")?,
        peak_phase: m.str("peak_phase")?.map(str::to_string),
        kv_cache_bytes: m.u64("kv_cache_bytes")?,
        logits_bytes: m.u64("logits_bytes")?,
        reserved_bytes: m.u64("memory_reserved")?,
    };
    let batch = m.u64("batch")?;
    let seq = m.u64("seq")?;
    let workload = match group {
        Group::A => None,
        Group::B => {
            let batch = batch.ok_or_else(|| m.missing("batch"))?;
            let seq = seq.ok_or_else(|| m.missing("seq"))?;
            // transformers' DynamicCache holds exactly `seq` tokens (block size 1), bf16 KV.
            let setup = InferenceSetup {
                weight_dtype: DType::BF16,
                kv_dtype: DType::BF16,
                batch,
                concurrency: batch,
                context: seq,
                block_size: 1,
                // measured as a plain forward: every prompt token's logits
                prefill_logits: PrefillLogits::AllTokens,
                ..InferenceSetup::default()
            };
            Some(Workload {
                task: Task::Inference(setup),
                parallelism: Parallelism::default(),
                runtime: RuntimeSetup::default(),
            })
        }
        Group::C => {
            let batch = batch.ok_or_else(|| m.missing("batch"))?;
            let seq = seq.ok_or_else(|| m.missing("seq"))?;
            let p = precision(&m)?;
            let (opt, foreach) = optimizer(&m)?;
            let checkpointing = match m.str("checkpointing")? {
                Some("selective") => Checkpointing::Selective,
                Some("full") => Checkpointing::Full,
                Some("none") => Checkpointing::None,
                Some(other) => {
                    return Err(m.bad("checkpointing", "none, full or selective", &Value::String(other.into())))
                }
                None => match m.bool("gradient_checkpointing")? {
                    Some(true) => Checkpointing::Full,
                    _ => Checkpointing::None,
                },
            };
            let attn = m.str("attn_implementation")?.unwrap_or("sdpa");
            let attention = if attn.starts_with("eager") { AttentionImpl::Eager } else { AttentionImpl::Sdpa };
            let lora = lora(&m)?;
            let kind = match m.str("task")? {
                Some("qlora") => TrainKind::Qlora,
                Some("lora") => TrainKind::Lora,
                Some("train") | None if lora.is_none() => TrainKind::Full,
                Some("train") | None => TrainKind::Lora,
                Some(other) => return Err(m.bad("task", "train, lora or qlora", &Value::String(other.into()))),
            };
            let base_dtype = match m.str("base_dtype")? {
                Some(d) => Some(d.parse::<DType>().map_err(|e| m.bad("base_dtype", &e, &Value::String(d.into())))?),
                None => None,
            };
            let setup = TrainSetup {
                kind,
                precision: p,
                optimizer: opt,
                batch,
                seq,
                grad_accum: 1,
                checkpointing,
                attention,
                lora: lora.unwrap_or_default(),
                base_dtype,
                foreach,
                first_step: true,
                ..TrainSetup::default()
            };
            Some(Workload {
                task: Task::Train(setup),
                parallelism: Parallelism::default(),
                runtime: RuntimeSetup::default(),
            })
        }
    };
    Ok(Case {
        id,
        group,
        spec,
        workload,
        measured,
        method: m.str("method")?.unwrap_or("").to_string(),
        origin: origin.to_string(),
    })
}

/// Parse a JSONL document; blank lines are skipped; `file` names it in errors.
pub fn parse_cases(text: &str, file: &str) -> Result<Vec<Case>, IngestError> {
    if text.len() > MAX_CASES_BYTES {
        return Err(IngestError::Invalid {
            file: file.into(),
            reason: format!("{} bytes is too large for a case file (limit {MAX_CASES_BYTES})", text.len()),
        });
    }
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let origin = format!("{file}:{}", i + 1);
        if line.len() > MAX_LINE_BYTES {
            return Err(IngestError::Invalid { file: origin, reason: "line longer than 1 MiB".into() });
        }
        out.push(parse_case(line, &origin)?);
    }
    Ok(out)
}

/// Every embedded case: the shared set, then this project's.
pub fn embedded() -> Result<Vec<Case>, IngestError> {
    let mut v = parse_cases(SHARED_CASES, "calibration/data/shared-cases.jsonl")?;
    v.extend(parse_cases(VRAMFIT_CASES, "calibration/data/vramfit-cases.jsonl")?);
    Ok(v)
}
