//! PEFT `adapter_config.json` (LoRA): rank, alpha, target modules,
//! dropout — what decides adapter memory. Options that change memory but
//! are not modelled (`modules_to_save`, DoRA, per-module ranks, layer
//! subsets) are reported in `notes`; a non-LoRA `peft_type` is an error.

use crate::error::IngestError;
use crate::json::{as_count, Obj};
use serde_json::Value;
use vramfit_core::train::{LoraSetup, LoraTargets};

/// Largest adapter config accepted (real ones are < 4 KiB).
pub const MAX_ADAPTER_CONFIG_BYTES: usize = 1 << 20;

/// What an adapter config says.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterConfig {
    pub lora: LoraSetup,
    pub base_model: Option<String>,
    pub notes: Vec<String>,
}

/// Parse an `adapter_config.json`.
pub fn parse_adapter_config(bytes: &[u8], origin: &str) -> Result<AdapterConfig, IngestError> {
    if bytes.len() > MAX_ADAPTER_CONFIG_BYTES {
        return Err(IngestError::Invalid {
            file: origin.into(),
            reason: format!("{} bytes is too large for an adapter_config.json", bytes.len()),
        });
    }
    let v = crate::json::parse(bytes, origin)?;
    let o = Obj::root(&v, origin, "(top level)")?;
    if let Some(t) = o.get("peft_type") {
        match t.as_str() {
            Some(s) if s.eq_ignore_ascii_case("lora") => {}
            _ => return Err(o.bad("peft_type", "\"LORA\" (only LoRA adapters are sized)", t)),
        }
    }
    let r = match o.get("r") {
        Some(v) => match as_count(v) {
            Some(r) if (1..=65536).contains(&r) => r,
            _ => return Err(o.bad("r", "a rank between 1 and 65536", v)),
        },
        None => {
            return Err(IngestError::Invalid {
                file: origin.into(),
                reason: "missing field 'r' (the LoRA rank)".into(),
            })
        }
    };
    let alpha = match o.get("lora_alpha") {
        None => 8.0,
        Some(v) => v.as_f64().filter(|a| a.is_finite()).ok_or_else(|| o.bad("lora_alpha", "a number", v))?,
    };
    let dropout = match o.get("lora_dropout") {
        None => 0.0,
        Some(v) => match v.as_f64() {
            Some(p) if (0.0..1.0).contains(&p) => p,
            _ => return Err(o.bad("lora_dropout", "a probability in [0, 1)", v)),
        },
    };
    let mut notes = Vec::new();
    let targets = match crate::lora::from_json(&o, "target_modules")? {
        Some(LoraTargets::Regex(s)) => {
            // PEFT matches a string with re.fullmatch against every full module name
            // (`model.layers.0.self_attn.q_proj`); the model resolves it (core::workload::validate)
            notes.push(format!(
                "target_modules is a regular expression ({}): PEFT matches it with re.fullmatch against full module names; vramfit does the same",
                s.escape_debug()
            ));
            LoraTargets::Regex(s)
        }
        Some(t) => t,
        None => {
            notes.push("no target_modules: PEFT picks the architecture's defaults; sized as all-linear".into());
            LoraTargets::AllLinear
        }
    };
    let m = o.map();
    if let Some(Value::Array(a)) = m.get("modules_to_save") {
        if !a.is_empty() {
            notes.push(format!(
                "modules_to_save {:?} are trained in full beside the adapters: not included in the estimate",
                a.iter().filter_map(Value::as_str).collect::<Vec<_>>()
            ));
        }
    }
    if m.get("use_dora").and_then(Value::as_bool) == Some(true) {
        notes.push("use_dora: DoRA adds a magnitude vector per module and extra activations: not modelled".into());
    }
    if m.get("rank_pattern").and_then(Value::as_object).is_some_and(|o| !o.is_empty()) {
        notes.push("rank_pattern: per-module ranks are ignored; every adapter sized at r".into());
    }
    if m.get("layers_to_transform").is_some_and(|v| !v.is_null()) {
        notes.push("layers_to_transform: a layer subset is ignored; every layer sized".into());
    }
    let base_model = m.get("base_model_name_or_path").and_then(Value::as_str).map(str::to_string);
    Ok(AdapterConfig { lora: LoraSetup { rank: r, alpha, targets, dropout, adapter_fp32: true }, base_model, notes })
}
