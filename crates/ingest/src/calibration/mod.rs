//! PyTorch-measured calibration cases (`calibration/data/*.jsonl`): each
//! line is a model (an `arch` config object with `family`), a workload and
//! the bytes PyTorch accounted for it. This module turns a line into a
//! [`ModelSpec`] + [`Workload`] + the measured figures, so the estimator
//! can be compared with the measurement.
//!
//! The embedded sets are `calibration/data/shared-cases.jsonl` (a copy of
//! `shared/calibration/cases.jsonl`) and `calibration/data/vramfit-cases.jsonl`
//! (measured by `calibration/harness/measure.py`).

pub mod published;
pub mod throughput;

use crate::config::parse_config_value;
use crate::error::IngestError;
use serde_json::{Map, Value};
use vramfit_core::train::{AttentionImpl, Checkpointing, LoraSetup, LoraTargets, Optimizer, Precision, TrainKind};
use vramfit_core::{DType, InferenceSetup, ModelSpec, Parallelism, RuntimeSetup, Task, TrainSetup, Workload};

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

fn bad(origin: &str, field: &str, expected: &str, found: &Value) -> IngestError {
    let f = match found {
        Value::Null => "null".to_string(),
        Value::String(s) => format!("\"{}\"", s.chars().take(60).collect::<String>()),
        other => other.to_string().chars().take(60).collect(),
    };
    IngestError::BadField { file: origin.into(), field: field.into(), expected: expected.into(), found: f }
}

fn missing(origin: &str, field: &str) -> IngestError {
    IngestError::Invalid { file: origin.into(), reason: format!("missing field '{field}'") }
}

fn u64_field(m: &Map<String, Value>, origin: &str, field: &str) -> Result<Option<u64>, IngestError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| bad(origin, field, "a non-negative integer", v)),
    }
}

fn str_field<'a>(m: &'a Map<String, Value>, origin: &str, field: &str) -> Result<Option<&'a str>, IngestError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(bad(origin, field, "a string", v)),
    }
}

fn bool_field(m: &Map<String, Value>, origin: &str, field: &str) -> Result<Option<bool>, IngestError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(bad(origin, field, "true or false", v)),
    }
}

/// Precision from the record: an explicit `precision` (vramfit harness)
/// or the shared set's `dtype_setup` (`a_fp32`, `b_amp_bf16`, `c_pure_bf16`).
fn precision(m: &Map<String, Value>, origin: &str) -> Result<Precision, IngestError> {
    if let Some(p) = str_field(m, origin, "precision")? {
        return p.parse().map_err(|_: String| {
            let names: Vec<&str> = Precision::ALL.iter().map(|x| x.name()).collect();
            bad(origin, "precision", &format!("one of {}", names.join(", ")), &Value::String(p.into()))
        });
    }
    let d = str_field(m, origin, "dtype_setup")?.ok_or_else(|| missing(origin, "dtype_setup"))?;
    dtype_setup(d).ok_or_else(|| {
        bad(origin, "dtype_setup", "a_fp32, b_amp_bf16, c_pure_bf16 (or a `precision` field)", &Value::String(d.into()))
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

fn optimizer(m: &Map<String, Value>, origin: &str) -> Result<(Optimizer, bool), IngestError> {
    let o = str_field(m, origin, "optimizer")?.ok_or_else(|| missing(origin, "optimizer"))?;
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
        return Err(bad(
            origin,
            "optimizer",
            "an AdamW / 8-bit AdamW / SGD / Adafactor / Lion description",
            &Value::String(o.into()),
        ));
    };
    Ok((opt, foreach))
}

fn lora(m: &Map<String, Value>, origin: &str) -> Result<Option<LoraSetup>, IngestError> {
    let v = match m.get("lora") {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    let o = v.as_object().ok_or_else(|| bad(origin, "lora", "an object with r and target_modules", v))?;
    let r = u64_field(o, origin, "lora.r")?.or(u64_field(o, origin, "r")?).ok_or_else(|| missing(origin, "lora.r"))?;
    let targets = match o.get("target_modules") {
        Some(Value::String(s)) if s == "all-linear" => LoraTargets::AllLinear,
        Some(Value::Array(a)) => LoraTargets::Modules(
            a.iter()
                .map(|x| x.as_str().map(str::to_string).ok_or_else(|| bad(origin, "lora.target_modules", "strings", x)))
                .collect::<Result<_, _>>()?,
        ),
        Some(v) => return Err(bad(origin, "lora.target_modules", "a list of module names or \"all-linear\"", v)),
        None => return Err(missing(origin, "lora.target_modules")),
    };
    let num = |f: &str, d: f64| -> Result<f64, IngestError> {
        match o.get(f) {
            None | Some(Value::Null) => Ok(d),
            Some(v) => v.as_f64().ok_or_else(|| bad(origin, &format!("lora.{f}"), "a number", v)),
        }
    };
    Ok(Some(LoraSetup {
        rank: r,
        alpha: num("lora_alpha", 2.0 * r as f64)?,
        targets,
        dropout: num("lora_dropout", 0.0)?,
        adapter_fp32: bool_field(o, origin, "adapter_fp32")?.unwrap_or(true),
    }))
}

/// Parse one JSON line.
pub fn parse_case(line: &str, origin: &str) -> Result<Case, IngestError> {
    let v: Value =
        serde_json::from_str(line).map_err(|e| IngestError::Json { file: origin.into(), reason: e.to_string() })?;
    let m = v.as_object().ok_or_else(|| bad(origin, "(line)", "a JSON object", &v))?;
    let id = str_field(m, origin, "id")?.ok_or_else(|| missing(origin, "id"))?.to_string();
    let gs = str_field(m, origin, "group")?.ok_or_else(|| missing(origin, "group"))?;
    let group = Group::from_field(gs)
        .ok_or_else(|| bad(origin, "group", "A_weights, B_prefill_kv or C_train", &Value::String(gs.into())))?;
    let arch = m.get("arch").ok_or_else(|| missing(origin, "arch"))?;
    let mut spec = parse_config_value(arch, &format!("{origin}: arch"))?;
    spec.name = str_field(m, origin, "model")?.unwrap_or(&id).to_string();
    let measured = Measured {
        params_total: u64_field(m, origin, "params_total")?,
        trainable_params: u64_field(m, origin, "trainable_params")?,
        param_bytes: u64_field(m, origin, "param_bytes")?,
        tensor_peak_bytes: u64_field(m, origin, "peak_total")?,
        peak_phase: str_field(m, origin, "peak_phase")?.map(str::to_string),
        kv_cache_bytes: u64_field(m, origin, "kv_cache_bytes")?,
        logits_bytes: u64_field(m, origin, "logits_bytes")?,
        reserved_bytes: u64_field(m, origin, "memory_reserved")?,
    };
    let batch = u64_field(m, origin, "batch")?;
    let seq = u64_field(m, origin, "seq")?;
    let workload = match group {
        Group::A => None,
        Group::B => {
            let batch = batch.ok_or_else(|| missing(origin, "batch"))?;
            let seq = seq.ok_or_else(|| missing(origin, "seq"))?;
            // transformers' DynamicCache holds exactly `seq` tokens (block size 1), bf16 KV.
            let setup = InferenceSetup {
                weight_dtype: DType::BF16,
                kv_dtype: DType::BF16,
                batch,
                concurrency: batch,
                context: seq,
                block_size: 1,
                ..InferenceSetup::default()
            };
            Some(Workload {
                task: Task::Inference(setup),
                parallelism: Parallelism::default(),
                runtime: RuntimeSetup::default(),
            })
        }
        Group::C => {
            let batch = batch.ok_or_else(|| missing(origin, "batch"))?;
            let seq = seq.ok_or_else(|| missing(origin, "seq"))?;
            let p = precision(m, origin)?;
            let (opt, foreach) = optimizer(m, origin)?;
            let checkpointing = match str_field(m, origin, "checkpointing")? {
                Some("selective") => Checkpointing::Selective,
                Some("full") => Checkpointing::Full,
                Some("none") => Checkpointing::None,
                Some(other) => {
                    return Err(bad(origin, "checkpointing", "none, full or selective", &Value::String(other.into())))
                }
                None => match bool_field(m, origin, "gradient_checkpointing")? {
                    Some(true) => Checkpointing::Full,
                    _ => Checkpointing::None,
                },
            };
            let attn = str_field(m, origin, "attn_implementation")?.unwrap_or("sdpa");
            let attention = if attn.starts_with("eager") { AttentionImpl::Eager } else { AttentionImpl::Sdpa };
            let lora = lora(m, origin)?;
            let kind = match str_field(m, origin, "task")? {
                Some("qlora") => TrainKind::Qlora,
                Some("lora") => TrainKind::Lora,
                Some("train") | None if lora.is_none() => TrainKind::Full,
                Some("train") | None => TrainKind::Lora,
                Some(other) => return Err(bad(origin, "task", "train, lora or qlora", &Value::String(other.into()))),
            };
            let base_dtype = match str_field(m, origin, "base_dtype")? {
                Some(d) => {
                    Some(d.parse::<DType>().map_err(|e| bad(origin, "base_dtype", &e, &Value::String(d.into())))?)
                }
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
        method: str_field(m, origin, "method")?.unwrap_or("").to_string(),
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
