//! Hugging Face `config.json` → [`ModelSpec`].
//!
//! Architecture-aware: Llama/Mistral/Qwen2/Qwen3/Gemma/Gemma2/Phi3
//! (GQA, SwiGLU, qkv bias, tied embeddings, explicit head_dim), GPT-2,
//! GPT-NeoX, Falcon, Mixtral/Qwen-MoE/DeepSeek MoE (experts, shared
//! experts, top-k, dense first layers), DeepSeek MLA, and multimodal
//! configs whose language model sits in `text_config` (only that part is
//! counted, and the notes say so). Unknown `model_type`: a Llama-shaped
//! reading of the generic fields, noted. Missing fields: one error naming
//! all of them. Defaults follow each family's `configuration_*.py`.
//!
//! The embedded presets are config objects too and go through this same
//! parser.

use crate::error::IngestError;
use crate::json::{self, kind};
use serde_json::{Map, Value};
use vramfit_core::model::defaults as model_defaults;
use vramfit_core::workload::defaults;
use vramfit_core::{
    Attention, DType, EncoderSpec, Family, Ffn, IndexerSpec, LayerKind, LinearAttentionSpec, Mamba2Spec, Mixer,
    MlaSpec, MlpKind, ModelSpec, MoeSpec, NormKind, Positional, QuantMethod, QuantSpec, VisionKind, VisionSpec,
};

/// Largest config.json accepted (real ones are a few KiB).
pub const MAX_CONFIG_BYTES: usize = 16 << 20;

/// Parse a config.json document. `origin` names the file in errors.
pub fn parse_config(bytes: &[u8], origin: &str) -> Result<ModelSpec, IngestError> {
    if bytes.len() > MAX_CONFIG_BYTES {
        return Err(IngestError::Invalid {
            file: origin.into(),
            reason: format!("{} bytes is too large for a config.json (limit {MAX_CONFIG_BYTES})", bytes.len()),
        });
    }
    let (clean, replaced) = non_finite_to_null(bytes);
    let v: Value =
        serde_json::from_slice(&clean).map_err(|e| IngestError::Json { file: origin.into(), reason: e.to_string() })?;
    let mut spec = parse_config_value(&v, origin)?;
    if replaced > 0 {
        spec.notes.push(format!(
            "{replaced} bare NaN/Infinity value{} (Python's json writes them; JSON has none) read as null: no field vramfit sizes with takes one",
            if replaced == 1 { "" } else { "s" }
        ));
    }
    Ok(spec)
}

/// Python's `json.dump` writes `NaN`, `Infinity` and `-Infinity` bare
/// (Nemotron-H's `time_step_limit: [0.0, Infinity]`); JSON parsers refuse
/// them. Outside strings, replace each with `null`; return how many.
fn non_finite_to_null(bytes: &[u8]) -> (std::borrow::Cow<'_, [u8]>, usize) {
    const WORDS: [&[u8]; 3] = [b"-Infinity", b"Infinity", b"NaN"];
    let mut out: Option<Vec<u8>> = None;
    let (mut i, mut in_str, mut escaped, mut count) = (0, false, false, 0);
    while i < bytes.len() {
        let c = bytes[i];
        if in_str {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_str = false;
            }
        } else if c == b'"' {
            in_str = true;
        } else if let Some(w) = WORDS.iter().find(|w| bytes[i..].starts_with(w)) {
            let o = out.get_or_insert_with(|| bytes[..i].to_vec());
            o.extend_from_slice(b"null");
            i += w.len();
            count += 1;
            continue;
        }
        if let Some(o) = out.as_mut() {
            o.push(c);
        }
        i += 1;
    }
    match out {
        Some(o) => (std::borrow::Cow::Owned(o), count),
        None => (std::borrow::Cow::Borrowed(bytes), 0),
    }
}

/// Parse an already-decoded config object.
pub fn parse_config_value(v: &Value, origin: &str) -> Result<ModelSpec, IngestError> {
    let top = v.as_object().ok_or_else(|| IngestError::BadField {
        file: origin.into(),
        field: "(top level)".into(),
        expected: "a JSON object".into(),
        found: kind(v).into(),
    })?;
    let mut notes = Vec::new();
    let top_type = top.get("model_type").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    refuse_unsupported(&top_type, origin)?;
    // Multimodal: the language model lives in text_config (or llm_config).
    let (cfg, outer_type) = match nested_text(top) {
        Some((key, inner)) => {
            let outer = top.get("model_type").and_then(Value::as_str).unwrap_or("multimodal").to_string();
            notes.push(format!("multimodal config ({outer}): the language model is read from `{key}`"));
            (inner, Some(outer))
        }
        None => (top, None),
    };
    let inner_type = cfg.get("model_type").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    refuse_unsupported(&inner_type, origin)?;
    // Gemma 3's text_config leaves most fields to Gemma3TextConfig's defaults.
    let family_hint = family_of(if inner_type.is_empty() { &top_type } else { &inner_type });
    let merged;
    let cfg = if family_hint == Family::Gemma3 {
        let (m, applied) = with_defaults(cfg, GEMMA3_TEXT_DEFAULTS);
        if !applied.is_empty() {
            notes.push(format!(
                "Gemma3TextConfig defaults for the fields the config leaves out (transformers configuration_gemma3.py): {}",
                applied.join(", ")
            ));
        }
        merged = m;
        &merged
    } else {
        cfg
    };
    let mut f = Fields { map: cfg, outer: if outer_type.is_some() { Some(top) } else { None }, missing: Vec::new() };
    let model_type = f
        .str_opt("model_type")
        .or_else(|| f.str_opt("family"))
        .or_else(|| outer_type.clone())
        .unwrap_or_else(|| if f.map.contains_key("n_embd") { "gpt2".to_string() } else { String::new() });
    let mt = model_type.to_ascii_lowercase();
    let family = family_of(&mt);
    if family == Family::Generic {
        notes.push(format!(
            "unknown model_type '{}': read as a Llama-shaped decoder from the generic fields (hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, vocab_size); check the count",
            if mt.is_empty() { "(none)" } else { &mt }
        ));
    }
    let name = f.str_opt("_name_or_path").filter(|s| !s.is_empty()).unwrap_or_else(|| origin.to_string());

    let mut spec = match family {
        Family::Gpt2 => gpt2(&mut f, &name),
        Family::GptNeox => neox(&mut f, &name),
        Family::Falcon => falcon(&mut f, &name),
        Family::Phi => phi(&mut f, &name),
        Family::Bert => bert(&mut f, &name),
        Family::NemotronH => nemotron_h(&mut f, &name, origin)?,
        _ => llama_family(&mut f, &name, family, &mt, origin)?,
    };
    if !f.missing.is_empty() {
        let mut fields = f.missing.clone();
        fields.dedup();
        return Err(IngestError::MissingFields {
            file: origin.into(),
            model_type: if mt.is_empty() { "unknown".into() } else { mt },
            fields,
        });
    }
    if let Some(d) = f.str_opt("torch_dtype").or_else(|| f.str_opt("dtype")) {
        spec.native_dtype = d.parse::<DType>().ok();
    }
    if let Some(vc) = top.get("vision_config") {
        spec.vision = vision(vc, &top_type, spec.hidden_size, origin, &mut notes)?;
    } else if outer_type.is_some() && top.contains_key("audio_config") {
        notes.push("audio tower (audio_config) is not counted".into());
    }
    if let Some(q) = top.get("quantization_config").or_else(|| cfg.get("quantization_config")) {
        spec.quantization = quantization(q, origin, &mut notes)?;
    }
    if let Some(q) = top.get("quantization").filter(|q| q.get("bits").is_some()) {
        notes.push(format!(
            "MLX `quantization` ({}): an MLX (Apple) checkpoint that CUDA engines do not load; weights are counted at the --dtype you give",
            q
        ));
    }
    if top.contains_key("quip_params") {
        notes.push(
            "quip_params: QTIP/QuIP# weights are not modelled; weights are counted at the --dtype you give".into(),
        );
    }
    if spec.mtp_layers > 0 {
        notes.push(format!(
            "{} multi-token-prediction layer{} in the checkpoint beside the model: not counted in the total (transformers drops them; vLLM and SGLang load them only for MTP speculative decoding)",
            spec.mtp_layers,
            if spec.mtp_layers == 1 { "" } else { "s" }
        ));
    }
    if spec.layer_pattern.iter().any(|l| l.mixer == Mixer::AttentionMamba2) {
        notes.push("training activations of the parallel attention + Mamba-2 layers are the attention-shaped layer plus the Mamba branch's saved tensors (in_proj input, zxbcdt, scan output); inference state is exact".into());
    } else if spec.layer_pattern.iter().any(|l| l.mixer.has_state()) {
        notes.push("training activations of linear-attention / SSM layers are estimated as attention layers (an approximation); inference state is exact".into());
    }
    spec.notes.extend(notes);
    spec.validate().map_err(|e| IngestError::Model { file: origin.into(), error: e })?;
    Ok(spec)
}

/// Architectures whose memory a Llama-shaped reading would get badly wrong
/// and that vramfit does not lay out yet: refused by name.
fn refuse_unsupported(mt: &str, origin: &str) -> Result<(), IngestError> {
    let why = match mt {
        "gemma4" | "gemma4_text" => "Gemma 4 (per-kind head geometry, K=V global layers, MoE beside a dense MLP)",
        "gemma3n" | "gemma3n_text" => "Gemma 3n (per-layer embeddings, AltUp, MatFormer)",
        "deepseek_v4" => "DeepSeek-V4 (compressed sparse attention with per-layer compression ratios)",
        "mimo_v2_flash" => "MiMo-V2-Flash (separate head geometry per attention kind, attention sink bias)",
        "mimo" => "MiMo (remote-code Qwen2 variant with MTP layers)",
        "kimi_k25" => "Kimi-K2.5 (MoonViT vision tower)",
        "nemotron-nas" => "Nemotron NAS (per-layer block_configs)",
        "minimax" => "MiniMax-Text-01 (lightning attention)",
        "glm4_moe" => "GLM-4.5 MoE",
        _ => return Ok(()),
    };
    Err(IngestError::Invalid {
        file: origin.into(),
        reason: format!(
            "model_type '{mt}' is {why}: vramfit does not lay out this architecture yet and will not guess its memory from a Llama-shaped reading; pass the checkpoint's safetensors (its headers give the exact weight bytes) or a supported model"
        ),
    })
}

/// Gemma3TextConfig's defaults (transformers
/// src/transformers/models/gemma3/configuration_gemma3.py at commit
/// 008f5c8c29be, `Gemma3TextConfig.__init__`), for the keys the released
/// multimodal configs leave out.
const GEMMA3_TEXT_DEFAULTS: &[(&str, DefaultValue)] = &[
    ("vocab_size", DefaultValue::Int(262_208)),
    ("hidden_size", DefaultValue::Int(2304)),
    ("intermediate_size", DefaultValue::Int(9216)),
    ("num_hidden_layers", DefaultValue::Int(26)),
    ("num_attention_heads", DefaultValue::Int(8)),
    ("num_key_value_heads", DefaultValue::Int(4)),
    ("head_dim", DefaultValue::Int(256)),
    ("hidden_activation", DefaultValue::Str("gelu_pytorch_tanh")),
    ("max_position_embeddings", DefaultValue::Int(131_072)),
    ("tie_word_embeddings", DefaultValue::Bool(true)),
    ("attention_bias", DefaultValue::Bool(false)),
    ("sliding_window", DefaultValue::Int(4096)),
    ("sliding_window_pattern", DefaultValue::Int(6)),
];

#[derive(Clone, Copy)]
enum DefaultValue {
    Int(u64),
    Bool(bool),
    Str(&'static str),
}

/// `cfg` with `defaults` under it, and the defaults that applied.
fn with_defaults(cfg: &Map<String, Value>, defaults: &[(&str, DefaultValue)]) -> (Map<String, Value>, Vec<String>) {
    let mut m = cfg.clone();
    let mut applied = Vec::new();
    for (k, d) in defaults {
        if m.get(*k).is_none_or(Value::is_null) {
            // a re-saved config spells the pattern `_sliding_window_pattern`, or lists layer_types
            if *k == "sliding_window_pattern"
                && (m.contains_key("_sliding_window_pattern") || m.contains_key("layer_types"))
            {
                continue;
            }
            let v = match d {
                DefaultValue::Int(n) => Value::from(*n),
                DefaultValue::Bool(b) => Value::from(*b),
                DefaultValue::Str(s) => Value::from(*s),
            };
            applied.push(format!("{k} {v}"));
            m.insert((*k).to_string(), v);
        }
    }
    (m, applied)
}

fn nested_text(top: &Map<String, Value>) -> Option<(&'static str, &Map<String, Value>)> {
    if top.contains_key("hidden_size") || top.contains_key("n_embd") {
        return None;
    }
    for key in ["text_config", "llm_config", "language_config"] {
        if let Some(Value::Object(m)) = top.get(key) {
            return Some((key, m));
        }
    }
    None
}

fn family_of(mt: &str) -> Family {
    match mt {
        "llama" | "llama2" | "llama3" | "codellama" | "yi" | "internlm2" => Family::Llama,
        "mistral" => Family::Mistral,
        "mixtral" => Family::Mixtral,
        "qwen2" | "qwen2_5_vl" | "qwen2_5_vl_text" | "qwen2_vl" => Family::Qwen2,
        "qwen2_moe" => Family::Qwen2Moe,
        "qwen3" | "qwen3_vl" | "qwen3_vl_text" => Family::Qwen3,
        "qwen3_moe" | "qwen3_vl_moe" | "qwen3_vl_moe_text" => Family::Qwen3Moe,
        "qwen3_next" => Family::Qwen3Next,
        "qwen3_5" | "qwen3_5_text" | "qwen3_5_moe" | "qwen3_5_moe_text" => Family::Qwen35,
        "gemma" => Family::Gemma,
        "gemma2" => Family::Gemma2,
        "gemma3" | "gemma3_text" => Family::Gemma3,
        "phi3" => Family::Phi3,
        "phi" | "phi-msft" => Family::Phi,
        "olmo2" => Family::Olmo2,
        "gpt_oss" => Family::GptOss,
        "nemotron_h" => Family::NemotronH,
        "granitemoe" => Family::GraniteMoe,
        "granitemoehybrid" => Family::GraniteMoeHybrid,
        "falcon_h1" => Family::FalconH1,
        "llama4" | "llama4_text" => Family::Llama4,
        "minimax_m2" => Family::MiniMaxM2,
        "bert" | "xlm-roberta" | "roberta" => Family::Bert,
        "gpt2" => Family::Gpt2,
        "gpt_neox" | "pythia" => Family::GptNeox,
        "falcon" | "refinedweb" | "refinedwebmodel" => Family::Falcon,
        "deepseek_v3" | "deepseek_v2" | "kimi_k2" | "deepseek_v32" | "glm_moe_dsa" => Family::DeepseekV3,
        _ => Family::Generic,
    }
}

/// Patterns are built for at most this many layers; a config claiming more is
/// refused by `ModelSpec::validate` (limit 2^14 layers) before anything sizes it.
const MAX_PATTERN: u64 = vramfit_core::model::limits::MAX_LAYERS + 1;

/// Per-layer mixer kinds from `layer_types` (transformers ≥ 4.53 spelling).
fn layer_types(f: &mut Fields, layers: u64) -> Result<Option<Vec<Mixer>>, String> {
    let Some(list) = f.get("layer_types").and_then(Value::as_array) else { return Ok(None) };
    if list.len() as u64 != layers {
        return Err(format!("layer_types has {} entries for num_hidden_layers {layers}", list.len()));
    }
    list.iter()
        .map(|t| match t.as_str() {
            Some("full_attention") | Some("attention") => Ok(Mixer::Attention),
            Some("sliding_attention") => Ok(Mixer::SlidingAttention),
            Some("linear_attention") => Ok(Mixer::LinearAttention),
            Some(other) => Err(format!(
                "layer_types: '{other}' is not a layer kind vramfit sizes (full_attention, sliding_attention, linear_attention)"
            )),
            None => Err(format!("layer_types: {t} is not a string")),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// Field reader that collects missing names instead of failing at the first
/// (a config.json names every field it lacks at once), on [`crate::json`]'s
/// reading of values.
struct Fields<'a> {
    map: &'a Map<String, Value>,
    /// the outer object of a multimodal config (for tie_word_embeddings etc.)
    outer: Option<&'a Map<String, Value>>,
    missing: Vec<String>,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        match self.map.get(key) {
            Some(Value::Null) | None => self.outer.and_then(|o| o.get(key)).filter(|v| !v.is_null()),
            Some(v) => Some(v),
        }
    }

    /// A non-negative integer field ([`json::as_count`]); `None` when absent,
    /// and when unusable (the name and what was found are collected).
    fn u64_opt(&mut self, key: &str) -> Option<u64> {
        let v = self.get(key)?;
        let n = json::as_count(v);
        if n.is_none() {
            let found = match v {
                Value::Number(n) => n.to_string(),
                other => json::kind(other).to_string(),
            };
            self.missing.push(format!("{key} (a non-negative integer, found {found})"));
        }
        n
    }

    /// First present of several spellings, required.
    fn u64_any(&mut self, keys: &[&str]) -> u64 {
        let before = self.missing.len();
        for k in keys {
            if let Some(v) = self.u64_opt(k) {
                return v;
            }
        }
        // Present but invalid was already reported with its value.
        if self.missing.len() == before {
            self.missing.push(keys.join(" or "));
        }
        0
    }

    fn u64_or(&mut self, keys: &[&str], default: u64) -> u64 {
        for k in keys {
            if let Some(v) = self.u64_opt(k) {
                return v;
            }
        }
        default
    }

    fn bool_or(&self, key: &str, default: bool) -> bool {
        self.get(key).and_then(Value::as_bool).unwrap_or(default)
    }

    fn f64_or(&self, key: &str, default: f64) -> f64 {
        self.get(key).and_then(Value::as_f64).unwrap_or(default)
    }

    fn str_opt(&self, key: &str) -> Option<String> {
        self.get(key).and_then(Value::as_str).map(str::to_string)
    }
}

fn base(name: &str, family: Family) -> ModelSpec {
    let mut s = ModelSpec::llama_like(name, 1, 1, 1, 1, 1, 1);
    s.family = family;
    s
}

fn llama_family(f: &mut Fields, name: &str, family: Family, mt: &str, origin: &str) -> Result<ModelSpec, IngestError> {
    let mut s = llama_shape(f, name, family);
    match family {
        Family::Mixtral => mixtral_moe(f, &mut s),
        Family::Qwen2Moe | Family::Qwen3Moe => qwen_moe(f, &mut s, family),
        Family::DeepseekV3 => deepseek_v3(f, &mut s, mt),
        Family::Gemma3 => gemma3_layers(f, &mut s, origin)?,
        Family::GptOss => gpt_oss(f, &mut s, origin)?,
        Family::Qwen3Next | Family::Qwen35 => qwen3_next(f, &mut s, origin)?,
        Family::MiniMaxM2 => minimax_m2(f, &mut s),
        Family::GraniteMoe => granite_moe(f, &mut s),
        Family::GraniteMoeHybrid => granite_moe_hybrid(f, &mut s, origin)?,
        Family::FalconH1 => falcon_h1(f, &mut s, origin)?,
        Family::Llama4 => llama4(f, &mut s, origin)?,
        _ => {}
    }
    Ok(s)
}

/// The dense shape every Llama-like family shares, with each family's
/// attention and norm quirks; `intermediate_size` is the dense MLP width.
fn llama_shape(f: &mut Fields, name: &str, family: Family) -> ModelSpec {
    let mut s = base(name, family);
    s.hidden_size = f.u64_any(&["hidden_size"]);
    s.num_layers = f.u64_any(&["num_hidden_layers"]);
    s.num_heads = f.u64_any(&["num_attention_heads"]);
    s.num_kv_heads = f.u64_or(&["num_key_value_heads"], s.num_heads);
    s.vocab_size = f.u64_any(&["vocab_size"]);
    s.max_position_embeddings = f.u64_or(&["max_position_embeddings"], 4096);
    let default_head = s.hidden_size.checked_div(s.num_heads).unwrap_or(0);
    s.head_dim = f.u64_or(&["head_dim"], default_head);
    s.activation = f.str_opt("hidden_act").or_else(|| f.str_opt("hidden_activation")).unwrap_or_else(|| "silu".into());
    s.attention_dropout = f.f64_or("attention_dropout", 0.0);
    s.sliding_window = match f.get("use_sliding_window").and_then(Value::as_bool) {
        Some(false) => None,
        _ => f.u64_opt("sliding_window"),
    };
    let attn_bias = f.bool_or("attention_bias", false);
    s.qkv_bias = attn_bias;
    s.o_bias = attn_bias;
    s.mlp_bias = f.bool_or("mlp_bias", false);
    s.tied_embeddings = f.bool_or("tie_word_embeddings", matches!(family, Family::Gemma | Family::Gemma2));
    match family {
        Family::Qwen2 | Family::Qwen2Moe => {
            // Qwen2 always has q/k/v bias and no o_proj bias (modeling_qwen2.py).
            s.qkv_bias = true;
            s.o_bias = false;
        }
        Family::Qwen3 | Family::Qwen3Moe | Family::Qwen3Next | Family::Qwen35 => s.qk_norm = true,
        Family::Gemma2 => s.norms_per_layer = 4,
        Family::Gemma3 => {
            s.norms_per_layer = 4;
            s.qk_norm = true;
        }
        Family::Olmo2 => {
            // Olmo2Attention: RMSNorm over all q heads and over all k heads
            s.qk_norm = true;
            s.qk_norm_full_width = true;
        }
        Family::Phi3 => {
            s.attention = Attention::FusedQkv;
            s.hidden_dropout = f.f64_or("resid_pdrop", 0.0);
        }
        _ => {}
    }
    // Qwen3.5-MoE configs have no dense MLP and no intermediate_size: every layer is MoE
    let dense_width = if matches!(family, Family::Qwen35 | Family::Qwen3Next) && f.get("intermediate_size").is_none() {
        f.u64_any(&["moe_intermediate_size"])
    } else {
        f.u64_any(&["intermediate_size"])
    };
    s.intermediate_size = dense_width;
    s
}

/// Mixtral: every layer MoE, experts as wide as the dense MLP.
fn mixtral_moe(f: &mut Fields, s: &mut ModelSpec) {
    let dense_width = s.intermediate_size;
    let e = f.u64_any(&["num_local_experts"]);
    let k = f.u64_or(&["num_experts_per_tok"], 2);
    s.moe = Some(MoeSpec {
        num_experts: e,
        experts_per_token: k,
        expert_intermediate: dense_width,
        shared_experts: 0,
        shared_intermediate: 0,
        shared_expert_gate: false,
        dense_layers: 0,
        router_bias: false,
        router_linear_bias: false,
    });
}

/// Qwen2-MoE / Qwen3-MoE: sparse layers every `decoder_sparse_step`, a shared
/// expert on Qwen2-MoE.
fn qwen_moe(f: &mut Fields, s: &mut ModelSpec, family: Family) {
    let e = f.u64_any(&["num_experts"]);
    let k = f.u64_any(&["num_experts_per_tok"]);
    let w = f.u64_any(&["moe_intermediate_size"]);
    let shared = if family == Family::Qwen2Moe { f.u64_or(&["shared_expert_intermediate_size"], 0) } else { 0 };
    let step = f.u64_or(&["decoder_sparse_step"], 1).max(1);
    let mlp_only = f.get("mlp_only_layers").and_then(Value::as_array).map(|a| a.len() as u64).unwrap_or(0);
    // Layers are sparse when (i + 1) % step == 0 and not listed in mlp_only_layers.
    let sparse = if s.num_layers > 0 { s.num_layers / step } else { 0 };
    let dense = s.num_layers.saturating_sub(sparse.saturating_sub(mlp_only));
    s.moe = Some(MoeSpec {
        num_experts: e,
        experts_per_token: k,
        expert_intermediate: w,
        shared_experts: u64::from(shared > 0),
        shared_intermediate: shared,
        shared_expert_gate: shared > 0,
        dense_layers: dense,
        router_bias: false,
        router_linear_bias: false,
    });
    if dense > 0 {
        s.notes.push(format!(
            "{dense} layers keep a dense MLP (decoder_sparse_step / mlp_only_layers); counted as leading layers"
        ));
    }
}

/// The DeepSeek family: latent attention, routed and shared experts,
/// multi-token prediction, the sparse-attention indexer.
fn deepseek_v3(f: &mut Fields, s: &mut ModelSpec, mt: &str) {
    let q_lora = f.u64_opt("q_lora_rank");
    let kv_lora = f.u64_any(&["kv_lora_rank"]);
    let rope = f.u64_any(&["qk_rope_head_dim"]);
    let nope = f.u64_any(&["qk_nope_head_dim"]);
    let v = f.u64_any(&["v_head_dim"]);
    s.attention = Attention::Mla;
    s.head_dim = nope + rope;
    s.mla = Some(MlaSpec {
        q_lora_rank: q_lora,
        kv_lora_rank: kv_lora,
        qk_nope_head_dim: nope,
        qk_rope_head_dim: rope,
        v_head_dim: v,
    });
    if let Some(e) = f.u64_opt("n_routed_experts") {
        let k = f.u64_any(&["num_experts_per_tok"]);
        let w = f.u64_any(&["moe_intermediate_size"]);
        let shared = f.u64_or(&["n_shared_experts"], 0);
        let dense = f.u64_or(&["first_k_dense_replace"], 0);
        let router_bias = f.str_opt("topk_method").as_deref() == Some("noaux_tc") || mt == "deepseek_v3";
        s.moe = Some(MoeSpec {
            num_experts: e,
            experts_per_token: k,
            expert_intermediate: w,
            shared_experts: shared,
            shared_intermediate: w,
            shared_expert_gate: false,
            dense_layers: dense,
            router_bias,
            router_linear_bias: false,
        });
    }
    s.mtp_layers = f.u64_or(&["num_nextn_predict_layers"], 0);
    if let Some(heads) = f.u64_opt("index_n_heads") {
        s.indexer =
            Some(IndexerSpec { heads, head_dim: f.u64_any(&["index_head_dim"]), topk: f.u64_or(&["index_topk"], 0) });
    }
}

/// Gemma 3: sliding layers with a full-attention layer every pattern length.
fn gemma3_layers(f: &mut Fields, s: &mut ModelSpec, origin: &str) -> Result<(), IngestError> {
    let window = f.u64_any(&["sliding_window"]);
    s.sliding_window = Some(window);
    let mixers = match layer_types(f, s.num_layers).map_err(|reason| invalid(origin, reason))? {
        Some(m) => m,
        None => {
            // Gemma3TextConfig: layer i slides unless (i + 1) is a multiple of the pattern
            let p = f.u64_or(&["sliding_window_pattern", "_sliding_window_pattern"], 6).max(1);
            (0..s.num_layers.min(MAX_PATTERN))
                .map(|i| if (i + 1).is_multiple_of(p) { Mixer::Attention } else { Mixer::SlidingAttention })
                .collect()
        }
    };
    s.layer_pattern = mixers.into_iter().map(|mixer| LayerKind { mixer, ffn: Ffn::Dense }).collect();
    Ok(())
}

/// gpt-oss: biased attention with sinks, biased experts in every layer,
/// alternating sliding and full attention.
fn gpt_oss(f: &mut Fields, s: &mut ModelSpec, origin: &str) -> Result<(), IngestError> {
    let dense_width = s.intermediate_size;
    // GptOssAttention: biased q/k/v/o and one sink logit per head; GptOssExperts:
    // fused gate_up and down with biases; GptOssTopKRouter: a biased linear
    s.qkv_bias = f.bool_or("attention_bias", true);
    s.o_bias = s.qkv_bias;
    s.mlp_bias = true;
    s.attention_sinks = true;
    s.sliding_window = f.u64_opt("sliding_window");
    s.moe = Some(MoeSpec {
        num_experts: f.u64_any(&["num_local_experts"]),
        experts_per_token: f.u64_any(&["num_experts_per_tok", "experts_per_token"]),
        expert_intermediate: dense_width,
        shared_experts: 0,
        shared_intermediate: 0,
        shared_expert_gate: false,
        dense_layers: 0,
        router_bias: false,
        router_linear_bias: true,
    });
    let mixers = layer_types(f, s.num_layers).map_err(|reason| invalid(origin, reason))?.unwrap_or_else(|| {
        // GptOssConfig: sliding on even layers, full on odd ones
        (0..s.num_layers.min(MAX_PATTERN))
            .map(|i| if i % 2 == 0 { Mixer::SlidingAttention } else { Mixer::Attention })
            .collect()
    });
    s.layer_pattern = mixers.into_iter().map(|mixer| LayerKind { mixer, ffn: Ffn::Moe }).collect();
    Ok(())
}

/// Qwen3-Next / Qwen3.5: linear-attention layers with full attention every
/// `full_attention_interval`, optionally MoE.
fn qwen3_next(f: &mut Fields, s: &mut ModelSpec, origin: &str) -> Result<(), IngestError> {
    s.attn_output_gate = f.bool_or("attn_output_gate", true);
    s.sliding_window = None;
    s.linear_attention = Some(LinearAttentionSpec {
        key_heads: f.u64_any(&["linear_num_key_heads"]),
        value_heads: f.u64_any(&["linear_num_value_heads"]),
        key_head_dim: f.u64_any(&["linear_key_head_dim"]),
        value_head_dim: f.u64_any(&["linear_value_head_dim"]),
        conv_kernel: f.u64_or(&["linear_conv_kernel_dim"], 4),
        state_dtype: f.str_opt("mamba_ssm_dtype").and_then(|d| d.parse().ok()),
    });
    let mixers = match layer_types(f, s.num_layers).map_err(|reason| invalid(origin, reason))? {
        Some(m) => m,
        None => {
            // Qwen3NextConfig: full attention every `full_attention_interval` (4) layers
            let every = f.u64_or(&["full_attention_interval"], 4).max(1);
            (0..s.num_layers.min(MAX_PATTERN))
                .map(|i| if (i + 1).is_multiple_of(every) { Mixer::Attention } else { Mixer::LinearAttention })
                .collect()
        }
    };
    let moe = f.u64_opt("num_experts").filter(|&e| e > 0);
    let step = f.u64_or(&["decoder_sparse_step"], 1).max(1);
    let mlp_only: Vec<u64> = f
        .get("mlp_only_layers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    if let Some(e) = moe {
        let shared = f.u64_or(&["shared_expert_intermediate_size"], 0);
        s.moe = Some(MoeSpec {
            num_experts: e,
            experts_per_token: f.u64_any(&["num_experts_per_tok"]),
            expert_intermediate: f.u64_any(&["moe_intermediate_size"]),
            shared_experts: u64::from(shared > 0),
            shared_intermediate: shared,
            shared_expert_gate: shared > 0,
            dense_layers: 0,
            router_bias: false,
            router_linear_bias: false,
        });
    }
    s.layer_pattern = mixers
        .into_iter()
        .enumerate()
        .map(|(i, mixer)| {
            let i = i as u64;
            let sparse = moe.is_some() && !mlp_only.contains(&i) && (i + 1).is_multiple_of(step);
            LayerKind { mixer, ffn: if sparse { Ffn::Moe } else { Ffn::Dense } }
        })
        .collect();
    s.mtp_layers = f.u64_or(&["mtp_num_hidden_layers", "num_nextn_predict_layers"], 0);
    Ok(())
}

/// MiniMax-M2: full-width q/k norms, every layer MoE, optional MTP modules.
fn minimax_m2(f: &mut Fields, s: &mut ModelSpec) {
    let dense_width = s.intermediate_size;
    // MiniMaxM2Attention: RMSNorm over all q heads and over all k heads
    // (`qk_norm_type: per_layer`); MiniMaxM2SparseMoeBlock: every layer MoE with a
    // sigmoid router and its correction bias (`use_routing_bias`)
    s.qk_norm = f.bool_or("use_qk_norm", true);
    s.qk_norm_full_width = f.str_opt("qk_norm_type").as_deref() != Some("per_head");
    let shared = f.u64_or(&["shared_intermediate_size"], 0);
    if shared > 0 {
        f.missing.push("shared_intermediate_size (a shared expert is not modelled for minimax_m2)".into());
    }
    let router_bias = f.bool_or("use_routing_bias", false);
    s.moe = Some(every_layer_moe(f, dense_width, router_bias));
    // use_mtp: num_mtp_modules modules of mtp_transformer_layers layers each
    if f.bool_or("use_mtp", false) {
        s.mtp_layers = f.u64_or(&["num_mtp_modules"], 0).saturating_mul(f.u64_or(&["mtp_transformer_layers"], 1));
    }
}

/// Llama 4 (`modeling_llama4.py`, `configuration_llama4.py` `Llama4TextConfig`):
/// - dense layers use `intermediate_size_mlp`; MoE layers (`moe_layers`, by default
///   every `interleave_moe_layer_step`-th layer, the last of each step) hold
///   `num_local_experts` experts and one shared expert, all `intermediate_size` wide;
/// - layers with RoPE (`no_rope_layers[i] = 1`, by default all but every 4th) attend
///   within chunks of `attention_chunk_size` tokens: their KV cache never holds more
///   than one chunk, sized here as a window of that many tokens; the NoPE layers attend
///   to the whole context;
/// - the q/k norm (`use_qk_norm`) is an L2 norm without weights.
fn llama4(f: &mut Fields, s: &mut ModelSpec, origin: &str) -> Result<(), IngestError> {
    let expert_width = f.u64_any(&["intermediate_size"]);
    s.intermediate_size = f.u64_any(&["intermediate_size_mlp"]);
    s.qk_norm = false;
    let chunk = f.u64_or(&["attention_chunk_size"], 8192);
    s.sliding_window = Some(chunk);
    let layers = s.num_layers.min(MAX_PATTERN);
    let list = |f: &Fields, key: &str| -> Result<Option<Vec<u64>>, IngestError> {
        match f.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_u64().ok_or_else(|| invalid(origin, format!("{key}: {v} is not a whole number"))))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(invalid(origin, format!("{key}: {other} is not a list"))),
        }
    };
    // no_rope_layers: 1 = RoPE (chunked), 0 = NoPE (global); default every 4th layer is NoPE
    let rope = match list(f, "no_rope_layers")? {
        Some(r) if r.len() as u64 != s.num_layers => {
            return Err(invalid(
                origin,
                format!("no_rope_layers has {} entries for num_hidden_layers {}", r.len(), s.num_layers),
            ))
        }
        Some(r) => r.into_iter().map(|x| x != 0).collect(),
        None => {
            let every = f.u64_or(&["no_rope_layer_interval"], 4).max(1);
            (0..layers).map(|i| !(i + 1).is_multiple_of(every)).collect::<Vec<bool>>()
        }
    };
    let step = f.u64_or(&["interleave_moe_layer_step"], 1).max(1);
    let moe_layers = match list(f, "moe_layers")? {
        Some(m) => m,
        None => (0..layers).filter(|i| (i + 1).is_multiple_of(step)).collect(),
    };
    s.moe = Some(MoeSpec {
        num_experts: f.u64_any(&["num_local_experts"]),
        experts_per_token: f.u64_any(&["num_experts_per_tok"]),
        expert_intermediate: expert_width,
        shared_experts: 1,
        shared_intermediate: expert_width,
        shared_expert_gate: false,
        dense_layers: 0,
        router_bias: false,
        router_linear_bias: false,
    });
    s.layer_pattern = rope
        .into_iter()
        .enumerate()
        .map(|(i, chunked)| LayerKind {
            mixer: if chunked { Mixer::SlidingAttention } else { Mixer::Attention },
            ffn: if moe_layers.contains(&(i as u64)) { Ffn::Moe } else { Ffn::Dense },
        })
        .collect();
    s.notes.push(format!(
        "Llama 4 chunked attention: the RoPE layers attend within chunks of {chunk} tokens, sized as a {chunk}-token window"
    ));
    Ok(())
}

/// Granite-MoE: every layer MoE, experts as wide as the dense MLP.
fn granite_moe(f: &mut Fields, s: &mut ModelSpec) {
    let dense_width = s.intermediate_size;
    // GraniteMoeMoE: fused input_linear (gate and up) and output_linear per expert, every layer
    s.moe = Some(every_layer_moe(f, dense_width, false));
}

/// Granite 4 (`GraniteMoeHybridConfig`, `GraniteMoeHybridDecoderLayer` in
/// transformers src/transformers/models/granitemoehybrid/): each layer is
/// `mamba` (a `BambaMixer` of d_inner = mamba_expand × hidden) or
/// `attention` per `layer_types` (all mamba when absent: the config's
/// `layers_block_type`), then the always-present `shared_mlp` (fused
/// input_linear hidden → 2 × shared_intermediate_size, output_linear) and,
/// when `num_local_experts` > 0, the GraniteMoe `block_sparse_moe` of
/// `intermediate_size`-wide experts beside it. Defaults are the config
/// class's (`mamba_n_heads` 128, `mamba_d_state` 256, `mamba_d_conv` 4,
/// `mamba_expand` 2, `mamba_n_groups` 1, `mamba_conv_bias` true,
/// `mamba_proj_bias` false, `num_local_experts` 8, top-2,
/// `shared_intermediate_size` 1024). The muP multipliers change no memory.
fn granite_moe_hybrid(f: &mut Fields, s: &mut ModelSpec, origin: &str) -> Result<(), IngestError> {
    let n = s.num_layers.min(MAX_PATTERN);
    let mixers: Vec<Mixer> = match f.get("layer_types").or_else(|| f.get("layers_block_type")).and_then(Value::as_array)
    {
        Some(list) => {
            if list.len() as u64 != s.num_layers {
                return Err(invalid(
                    origin,
                    format!("layer_types has {} entries for num_hidden_layers {}", list.len(), s.num_layers),
                ));
            }
            list.iter()
                .map(|t| match t.as_str() {
                    Some("mamba") => Ok(Mixer::Mamba2),
                    Some("attention") => Ok(Mixer::Attention),
                    _ => Err(invalid(origin, format!("layer_types: {t} is not 'mamba' or 'attention'"))),
                })
                .collect::<Result<_, _>>()?
        }
        None => vec![Mixer::Mamba2; n as usize],
    };
    let experts = f.u64_or(&["num_local_experts"], 8);
    let shared = f.u64_or(&["shared_intermediate_size"], 1024);
    let ffn = if experts > 0 { Ffn::Moe } else { Ffn::Dense };
    s.layer_pattern = mixers.into_iter().map(|mixer| LayerKind { mixer, ffn }).collect();
    if experts > 0 {
        // GraniteMoeMoE (router.layer without bias, fused input_linear per expert) + shared_mlp
        s.moe = Some(MoeSpec {
            num_experts: experts,
            experts_per_token: f.u64_or(&["num_experts_per_tok"], 2),
            expert_intermediate: s.intermediate_size,
            shared_experts: 1,
            shared_intermediate: shared,
            shared_expert_gate: false,
            dense_layers: 0,
            router_bias: false,
            router_linear_bias: false,
        });
    } else {
        // dense Granite 4 (granite-4.0-micro, -h-micro): the shared_mlp is the only MLP
        s.intermediate_size = shared;
    }
    let inner = f.u64_or(&["mamba_expand"], 2).saturating_mul(s.hidden_size);
    s.mamba = Some(mamba_dims(f, origin, inner, true)?);
    Ok(())
}

/// Falcon-H1 (`FalconH1Config`, `FalconH1DecoderLayer` in transformers
/// src/transformers/models/falcon_h1/): every layer runs attention
/// (`LlamaAttention`, no bias: the config forces `attention_bias` and
/// `mlp_bias` false) and a `FalconH1Mixer` on the same normed input, then a
/// gated MLP (`feed_forward`) after `pre_ff_layernorm`. The mixer's d_inner
/// is `mamba_d_ssm` (default 1024; null: mamba_expand × hidden), its gated
/// RMSNorm exists only with `mamba_rms_norm`, in_proj takes
/// `mamba_proj_bias` and out_proj `projectors_bias`. muP multipliers (and the
/// non-persistent `mup_vector` buffer) change no weight count.
fn falcon_h1(f: &mut Fields, s: &mut ModelSpec, origin: &str) -> Result<(), IngestError> {
    s.qkv_bias = false;
    s.o_bias = false;
    s.mlp_bias = false;
    let n = s.num_layers.min(MAX_PATTERN) as usize;
    s.layer_pattern = vec![LayerKind { mixer: Mixer::AttentionMamba2, ffn: Ffn::Dense }; n];
    let inner = match f.map.get("mamba_d_ssm") {
        Some(Value::Null) => f.u64_or(&["mamba_expand"], 2).saturating_mul(s.hidden_size),
        _ => f.u64_or(&["mamba_d_ssm"], 1024),
    };
    let mut m = mamba_dims(f, origin, inner, f.bool_or("mamba_rms_norm", false))?;
    let (in_bias, out_bias) = (f.bool_or("mamba_proj_bias", false), f.bool_or("projectors_bias", false));
    if in_bias != out_bias {
        // one flag covers both projections: counting both biases over-states by at most 2 × hidden per layer
        m.proj_bias = true;
        s.notes.push("Falcon-H1 mamba_proj_bias and projectors_bias differ: both Mamba projections are counted with a bias (a slight over-count)".into());
    }
    s.mamba = Some(m);
    Ok(())
}

/// The `mamba_*` dimensions Granite 4 and Falcon-H1 share: `mamba_n_heads`
/// heads of `mamba_d_head` ("auto": d_inner / heads, as both configs
/// compute it), which must multiply to d_inner.
fn mamba_dims(f: &mut Fields, origin: &str, inner: u64, gated_norm: bool) -> Result<Mamba2Spec, IngestError> {
    let heads = f.u64_or(&["mamba_n_heads"], 128);
    if heads == 0 || !inner.is_multiple_of(heads) {
        return Err(invalid(origin, format!("mamba_n_heads {heads} does not divide the Mamba d_inner {inner}")));
    }
    let head_dim = match f.get("mamba_d_head") {
        Some(Value::String(a)) if a == "auto" => inner / heads,
        Some(_) => f.u64_any(&["mamba_d_head"]),
        None => inner / heads,
    };
    if head_dim.checked_mul(heads) != Some(inner) {
        return Err(invalid(
            origin,
            format!("mamba_d_head {head_dim} × mamba_n_heads {heads} is not the Mamba d_inner {inner}"),
        ));
    }
    Ok(Mamba2Spec {
        heads,
        head_dim,
        state_size: f.u64_or(&["mamba_d_state"], 256),
        groups: f.u64_or(&["mamba_n_groups"], 1),
        conv_kernel: f.u64_or(&["mamba_d_conv"], 4),
        conv_bias: f.bool_or("mamba_conv_bias", true),
        proj_bias: f.bool_or("mamba_proj_bias", false),
        state_dtype: f.str_opt("mamba_ssm_cache_dtype").and_then(|d| d.parse().ok()),
        gated_norm,
    })
}

/// An MoE block in every layer, `num_local_experts` experts as wide as the
/// dense MLP, `num_experts_per_tok` of them per token, no shared expert.
fn every_layer_moe(f: &mut Fields, width: u64, router_bias: bool) -> MoeSpec {
    MoeSpec {
        num_experts: f.u64_any(&["num_local_experts"]),
        experts_per_token: f.u64_any(&["num_experts_per_tok"]),
        expert_intermediate: width,
        shared_experts: 0,
        shared_intermediate: 0,
        shared_expert_gate: false,
        dense_layers: 0,
        router_bias,
        router_linear_bias: false,
    }
}

fn invalid(origin: &str, reason: String) -> IngestError {
    IngestError::Invalid { file: origin.into(), reason }
}

/// phi-1 / phi-1.5 / phi-2 (`modeling_phi.py`), in transformers' `phi`
/// spelling or the older remote-code `phi-msft` one (n_embd, n_layer,
/// n_head, n_inner, rotary_dim): q/k/v and `dense` with biases, one
/// LayerNorm feeding attention and the fc1/fc2 MLP side by side, a final
/// LayerNorm and a biased, untied output head.
fn phi(f: &mut Fields, name: &str) -> ModelSpec {
    let mut s = base(name, Family::Phi);
    s.hidden_size = f.u64_any(&["hidden_size", "n_embd"]);
    s.num_layers = f.u64_any(&["num_hidden_layers", "n_layer"]);
    s.num_heads = f.u64_any(&["num_attention_heads", "n_head"]);
    s.num_kv_heads = f.u64_or(&["num_key_value_heads", "n_head_kv"], s.num_heads);
    s.head_dim = s.hidden_size.checked_div(s.num_heads).unwrap_or(0);
    s.vocab_size = f.u64_any(&["vocab_size"]);
    s.max_position_embeddings = f.u64_or(&["max_position_embeddings", "n_positions"], 2048);
    s.intermediate_size = f.u64_or(&["intermediate_size", "n_inner"], s.hidden_size.saturating_mul(4));
    s.activation = f.str_opt("hidden_act").or_else(|| f.str_opt("activation_function")).unwrap_or("gelu_new".into());
    s.mlp = MlpKind::Plain;
    s.norm = NormKind::LayerNorm;
    s.norms_per_layer = 1;
    s.parallel_residual = true;
    s.qkv_bias = true;
    s.o_bias = true;
    s.mlp_bias = true;
    s.lm_head_bias = true;
    s.tied_embeddings = f.bool_or("tie_word_embeddings", false);
    if f.bool_or("qk_layernorm", false) {
        f.missing.push("qk_layernorm (true is not modelled: per-head LayerNorms on q and k)".into());
    }
    s.attention_dropout = f.f64_or("attention_dropout", f.f64_or("attn_pdrop", 0.0));
    s.hidden_dropout = f.f64_or("resid_pdrop", 0.0);
    s
}

/// BERT / RoBERTa / XLM-RoBERTa encoders (`modeling_bert.py`): word,
/// position and token-type tables with a LayerNorm; per layer biased
/// query/key/value/output, two LayerNorms, a biased intermediate/output
/// MLP; the pooler `BertModel` loads by default. No causal KV cache.
fn bert(f: &mut Fields, name: &str) -> ModelSpec {
    let mut s = base(name, Family::Bert);
    s.hidden_size = f.u64_any(&["hidden_size"]);
    s.num_layers = f.u64_any(&["num_hidden_layers"]);
    s.num_heads = f.u64_any(&["num_attention_heads"]);
    s.num_kv_heads = s.num_heads;
    s.head_dim = s.hidden_size.checked_div(s.num_heads).unwrap_or(0);
    s.vocab_size = f.u64_any(&["vocab_size"]);
    s.intermediate_size = f.u64_any(&["intermediate_size"]);
    s.max_position_embeddings = f.u64_or(&["max_position_embeddings"], 512);
    s.activation = f.str_opt("hidden_act").unwrap_or_else(|| "gelu".into());
    s.mlp = MlpKind::Plain;
    s.norm = NormKind::LayerNorm;
    s.positional = Positional::Learned;
    s.qkv_bias = true;
    s.o_bias = true;
    s.mlp_bias = true;
    s.tied_embeddings = false;
    s.encoder = Some(EncoderSpec { token_types: f.u64_or(&["type_vocab_size"], 2), pooler: true });
    s.attention_dropout = f.f64_or("attention_probs_dropout_prob", 0.0);
    s.hidden_dropout = f.f64_or("hidden_dropout_prob", 0.0);
    s
}

/// Nemotron-H (`modeling_nemotron_h.py`): each block is one of Mamba-2
/// (`M`), attention (`*`), a relu² MLP (`-`) or a MoE (`E`), after one
/// RMSNorm; the pattern is `hybrid_override_pattern` (or `layers_block_type`).
fn nemotron_h(f: &mut Fields, name: &str, origin: &str) -> Result<ModelSpec, IngestError> {
    let mut s = base(name, Family::NemotronH);
    s.hidden_size = f.u64_any(&["hidden_size"]);
    s.num_layers = f.u64_any(&["num_hidden_layers"]);
    s.num_heads = f.u64_any(&["num_attention_heads"]);
    s.num_kv_heads = f.u64_or(&["num_key_value_heads"], s.num_heads);
    // NemotronHConfig.head_dim defaults to 128; older files call it attention_head_dim
    s.head_dim = f.u64_or(&["head_dim", "attention_head_dim"], 128);
    s.vocab_size = f.u64_any(&["vocab_size"]);
    s.intermediate_size = f.u64_or(&["intermediate_size"], 1);
    s.max_position_embeddings = f.u64_or(&["max_position_embeddings"], 4096);
    s.activation = f.str_opt("mlp_hidden_act").unwrap_or_else(|| "relu2".into());
    s.mlp = MlpKind::Plain;
    s.norms_per_layer = 1;
    s.qkv_bias = f.bool_or("attention_bias", false);
    s.o_bias = s.qkv_bias;
    s.mlp_bias = f.bool_or("mlp_bias", false);
    s.tied_embeddings = f.bool_or("tie_word_embeddings", false);
    if f.get("moe_latent_size").is_some_and(|v| !v.is_null()) {
        return Err(invalid(
            origin,
            "nemotron_h with moe_latent_size (latent MoE projections) is not laid out by vramfit yet".into(),
        ));
    }
    let kinds: Vec<(Mixer, Ffn)> = if let Some(p) = f.str_opt("hybrid_override_pattern") {
        p.chars()
            .map(|c| match c {
                'M' => Ok((Mixer::Mamba2, Ffn::None)),
                '*' => Ok((Mixer::Attention, Ffn::None)),
                '-' => Ok((Mixer::None, Ffn::Dense)),
                'E' => Ok((Mixer::None, Ffn::Moe)),
                other => Err(invalid(
                    origin,
                    format!("hybrid_override_pattern: '{}' is not one of M, *, -, E", other.escape_debug()),
                )),
            })
            .collect::<Result<_, _>>()?
    } else if let Some(list) = f.get("layers_block_type").or_else(|| f.get("layer_types")).and_then(Value::as_array) {
        list.iter()
            .map(|t| match t.as_str() {
                Some("mamba") | Some("linear_attention") => Ok((Mixer::Mamba2, Ffn::None)),
                Some("attention") | Some("full_attention") => Ok((Mixer::Attention, Ffn::None)),
                Some("mlp") => Ok((Mixer::None, Ffn::Dense)),
                Some("moe") => Ok((Mixer::None, Ffn::Moe)),
                _ => Err(invalid(origin, format!("layers_block_type: {t} is not mamba, attention, mlp or moe"))),
            })
            .collect::<Result<_, _>>()?
    } else {
        f.missing.push("hybrid_override_pattern or layers_block_type".into());
        Vec::new()
    };
    if !kinds.is_empty() && kinds.len() as u64 != s.num_layers {
        return Err(invalid(
            origin,
            format!("hybrid_override_pattern has {} blocks for num_hidden_layers {}", kinds.len(), s.num_layers),
        ));
    }
    s.layer_pattern = kinds.into_iter().map(|(mixer, ffn)| LayerKind { mixer, ffn }).collect();
    s.mamba = Some(Mamba2Spec {
        heads: f.u64_any(&["mamba_num_heads"]),
        head_dim: f.u64_any(&["mamba_head_dim"]),
        state_size: f.u64_any(&["ssm_state_size"]),
        groups: f.u64_or(&["n_groups"], 1),
        conv_kernel: f.u64_or(&["conv_kernel"], 4),
        conv_bias: f.bool_or("use_conv_bias", true),
        proj_bias: f.bool_or("use_bias", false),
        state_dtype: f.str_opt("mamba_ssm_cache_dtype").and_then(|d| d.parse().ok()),
        gated_norm: true,
    });
    if s.layer_pattern.iter().any(|l| l.ffn == Ffn::Moe) {
        let shared = f.u64_or(&["n_shared_experts"], 0);
        s.moe = Some(MoeSpec {
            num_experts: f.u64_any(&["n_routed_experts"]),
            experts_per_token: f.u64_any(&["num_experts_per_tok"]),
            expert_intermediate: f.u64_any(&["moe_intermediate_size"]),
            shared_experts: shared,
            shared_intermediate: f.u64_or(&["moe_shared_expert_intermediate_size"], 0),
            shared_expert_gate: false,
            dense_layers: 0,
            router_bias: true,
            router_linear_bias: false,
        });
    }
    s.mtp_layers = f.get("mtp_hybrid_override_pattern").and_then(Value::as_str).map(|p| p.len() as u64).unwrap_or(0);
    Ok(s)
}

/// The vision tower of a multimodal config, when vramfit knows its layout.
fn vision(
    vc: &Value,
    top_type: &str,
    text_hidden: u64,
    origin: &str,
    notes: &mut Vec<String>,
) -> Result<Option<VisionSpec>, IngestError> {
    let Some(m) = vc.as_object() else { return Ok(None) };
    let mut f = Fields { map: m, outer: None, missing: Vec::new() };
    let vt = f.str_opt("model_type").unwrap_or_default().to_ascii_lowercase();
    let spec = match (top_type, vt.as_str()) {
        ("gemma3", _) | (_, "siglip_vision_model") => {
            // SiglipVisionConfig defaults (transformers configuration_siglip.py)
            if f.bool_or("vision_use_head", true) {
                f.missing
                    .push("vision_config.vision_use_head (true: the attention-pooling head is not modelled)".into());
            }
            let image = f.u64_or(&["image_size"], 224);
            let patch = f.u64_or(&["patch_size"], 16).max(1);
            let side = image / patch;
            let Some(positions) = side.checked_mul(side) else {
                return Err(invalid(
                    origin,
                    format!("vision_config: image_size {image} / patch_size {patch} is absurd"),
                ));
            };
            VisionSpec {
                kind: VisionKind::SiglipGemma3,
                hidden_size: f.u64_or(&["hidden_size"], 768),
                intermediate_size: f.u64_or(&["intermediate_size"], 3072),
                layers: f.u64_or(&["num_hidden_layers"], 12),
                patch_size: patch,
                temporal_patch_size: 1,
                in_channels: f.u64_or(&["num_channels"], 3),
                position_embeddings: positions,
                out_hidden_size: text_hidden,
                spatial_merge: 1,
                deepstack_mergers: 0,
                projector_dim: 0,
            }
        }
        ("qwen2_5_vl", _) => VisionSpec {
            // Qwen2_5_VLVisionConfig defaults (transformers configuration_qwen2_5_vl.py)
            kind: VisionKind::Qwen25Vl,
            hidden_size: f.u64_or(&["hidden_size", "embed_dim"], 3584),
            intermediate_size: f.u64_or(&["intermediate_size"], 3420),
            layers: f.u64_or(&["depth"], 32),
            patch_size: f.u64_or(&["patch_size", "spatial_patch_size"], 14),
            temporal_patch_size: f.u64_or(&["temporal_patch_size"], 2),
            in_channels: f.u64_or(&["in_channels", "in_chans"], 3),
            position_embeddings: 0,
            out_hidden_size: f.u64_or(&["out_hidden_size"], 3584),
            spatial_merge: f.u64_or(&["spatial_merge_size"], 2),
            deepstack_mergers: 0,
            projector_dim: 0,
        },
        ("qwen3_vl" | "qwen3_vl_moe" | "qwen3_5" | "qwen3_5_moe", _) => {
            // Qwen3VLVisionConfig / Qwen3_5VisionConfig defaults (transformers 5.24)
            let deepstack_default = if top_type.starts_with("qwen3_vl") { 3 } else { 0 };
            VisionSpec {
                kind: VisionKind::Qwen3Vl,
                hidden_size: f.u64_or(&["hidden_size"], 1152),
                intermediate_size: f.u64_or(&["intermediate_size"], 4304),
                layers: f.u64_or(&["depth"], 27),
                patch_size: f.u64_or(&["patch_size"], 16),
                temporal_patch_size: f.u64_or(&["temporal_patch_size"], 2),
                in_channels: f.u64_or(&["in_channels"], 3),
                position_embeddings: f.u64_or(&["num_position_embeddings"], 2304),
                out_hidden_size: f.u64_or(&["out_hidden_size"], 3584),
                spatial_merge: f.u64_or(&["spatial_merge_size"], 2),
                deepstack_mergers: f
                    .get("deepstack_visual_indexes")
                    .and_then(Value::as_array)
                    .map(|a| a.len() as u64)
                    .unwrap_or(deepstack_default),
                projector_dim: 0,
            }
        }
        ("llama4", _) => llama4_vision(&mut f, text_hidden, origin)?,
        _ => {
            notes.push(format!(
                "vision tower ({}) is not laid out by vramfit: NOT counted in the parameters or the weights",
                if vt.is_empty() { top_type } else { &vt }
            ));
            return Ok(None);
        }
    };
    if !f.missing.is_empty() {
        return Err(IngestError::MissingFields { file: origin.into(), model_type: top_type.into(), fields: f.missing });
    }
    notes.push(format!(
        "vision tower counted ({} layers, hidden {}): its weights are in the total and in the weights (kept 16-bit, whole on every GPU)",
        spec.layers, spec.hidden_size
    ));
    Ok(Some(spec))
}

/// Llama 4's tower (`Llama4VisionConfig`, transformers configuration_llama4.py):
/// the released configs give every field used here.
fn llama4_vision(f: &mut Fields, text_hidden: u64, origin: &str) -> Result<VisionSpec, IngestError> {
    let image = f.u64_any(&["image_size"]);
    let patch = f.u64_any(&["patch_size"]).max(1);
    let side = image / patch;
    let Some(positions) = side.checked_mul(side).and_then(|p| p.checked_add(1)) else {
        return Err(invalid(origin, format!("vision_config: image_size {image} / patch_size {patch} is absurd")));
    };
    // pixel_shuffle_ratio 0.5 merges 2 × 2 patches (Llama4VisionPixelShuffleMLP)
    let ratio = f.f64_or("pixel_shuffle_ratio", 0.5);
    if ratio != 0.5 {
        f.missing.push("vision_config.pixel_shuffle_ratio (only 0.5 is laid out)".into());
    }
    let projector_in = f.u64_any(&["projector_input_dim"]);
    let projector_out = f.u64_any(&["projector_output_dim"]);
    let output = f.u64_any(&["vision_output_dim"]);
    if projector_in != projector_out || projector_out != output {
        f.missing
            .push("vision_config.projector_input_dim = projector_output_dim = vision_output_dim (as released)".into());
    }
    if f.bool_or("multi_modal_projector_bias", false) {
        f.missing.push("vision_config.multi_modal_projector_bias (a biased projector is not laid out)".into());
    }
    Ok(VisionSpec {
        kind: VisionKind::Llama4,
        hidden_size: f.u64_any(&["hidden_size"]),
        intermediate_size: f.u64_any(&["intermediate_size"]),
        layers: f.u64_any(&["num_hidden_layers"]),
        patch_size: patch,
        temporal_patch_size: 1,
        in_channels: f.u64_or(&["num_channels"], 3),
        position_embeddings: positions,
        out_hidden_size: text_hidden,
        spatial_merge: 2,
        deepstack_mergers: 0,
        projector_dim: projector_out,
    })
}

fn gpt2(f: &mut Fields, name: &str) -> ModelSpec {
    let mut s = base(name, Family::Gpt2);
    s.hidden_size = f.u64_any(&["n_embd", "hidden_size"]);
    s.num_layers = f.u64_any(&["n_layer", "num_hidden_layers"]);
    s.num_heads = f.u64_any(&["n_head", "num_attention_heads"]);
    s.num_kv_heads = s.num_heads;
    s.head_dim = s.hidden_size.checked_div(s.num_heads).unwrap_or(0);
    s.vocab_size = f.u64_any(&["vocab_size"]);
    s.max_position_embeddings = f.u64_or(&["n_positions", "max_position_embeddings"], model_defaults::GPT2_POSITIONS);
    // saturating: a hidden size that large is refused by name in ModelSpec::validate
    // (MAX_HIDDEN), before the derived width is used (fuzz: ingest_config)
    s.intermediate_size = f.u64_or(&["n_inner"], s.hidden_size.saturating_mul(model_defaults::GPT2_MLP_RATIO));
    s.mlp = MlpKind::Plain;
    s.activation = f.str_opt("activation_function").unwrap_or_else(|| "gelu_new".into());
    s.norm = NormKind::LayerNorm;
    s.attention = Attention::FusedQkv;
    s.qkv_bias = true;
    s.o_bias = true;
    s.mlp_bias = true;
    s.positional = Positional::Learned;
    s.tied_embeddings = f.bool_or("tie_word_embeddings", true);
    s.attention_dropout = f.f64_or("attn_pdrop", 0.1);
    s.hidden_dropout = f.f64_or("resid_pdrop", 0.1);
    s
}

fn neox(f: &mut Fields, name: &str) -> ModelSpec {
    let mut s = base(name, Family::GptNeox);
    s.hidden_size = f.u64_any(&["hidden_size"]);
    s.num_layers = f.u64_any(&["num_hidden_layers"]);
    s.num_heads = f.u64_any(&["num_attention_heads"]);
    s.num_kv_heads = s.num_heads;
    s.head_dim = s.hidden_size.checked_div(s.num_heads).unwrap_or(0);
    s.vocab_size = f.u64_any(&["vocab_size"]);
    s.intermediate_size = f.u64_any(&["intermediate_size"]);
    s.max_position_embeddings = f.u64_or(&["max_position_embeddings"], 2048);
    s.mlp = MlpKind::Plain;
    s.activation = f.str_opt("hidden_act").unwrap_or_else(|| "gelu".into());
    s.norm = NormKind::LayerNorm;
    s.attention = Attention::FusedQkv;
    let bias = f.bool_or("attention_bias", true);
    s.qkv_bias = bias;
    s.o_bias = bias;
    s.mlp_bias = true;
    s.parallel_residual = f.bool_or("use_parallel_residual", true);
    s.tied_embeddings = f.bool_or("tie_word_embeddings", false);
    s.attention_dropout = f.f64_or("attention_dropout", 0.0);
    s.hidden_dropout = f.f64_or("hidden_dropout", 0.0);
    s
}

fn falcon(f: &mut Fields, name: &str) -> ModelSpec {
    let mut s = base(name, Family::Falcon);
    s.hidden_size = f.u64_any(&["hidden_size", "n_embd"]);
    s.num_layers = f.u64_any(&["num_hidden_layers", "n_layer"]);
    s.num_heads = f.u64_any(&["num_attention_heads", "n_head"]);
    s.head_dim = s.hidden_size.checked_div(s.num_heads).unwrap_or(0);
    s.vocab_size = f.u64_any(&["vocab_size"]);
    let new_arch = f.bool_or("new_decoder_architecture", false);
    let multi_query = f.bool_or("multi_query", true);
    // configuration_falcon.py: kv heads = num_kv_heads with the new decoder
    // architecture, else 1 with multi_query, else all heads.
    s.num_kv_heads = if new_arch {
        f.u64_or(&["num_kv_heads", "n_head_kv"], s.num_heads)
    } else if multi_query {
        1
    } else {
        s.num_heads
    };
    s.intermediate_size = f.u64_or(&["ffn_hidden_size"], s.hidden_size.saturating_mul(4));
    s.max_position_embeddings = f.u64_or(&["max_position_embeddings"], 2048);
    s.mlp = MlpKind::Plain;
    s.activation = "gelu".into();
    s.norm = NormKind::LayerNorm;
    s.attention = Attention::FusedQkv;
    let bias = f.bool_or("bias", false);
    s.qkv_bias = bias;
    s.o_bias = bias;
    s.mlp_bias = bias;
    let parallel = f.bool_or("parallel_attn", true);
    s.parallel_residual = parallel;
    s.norms_per_layer = if new_arch {
        f.u64_or(&["num_ln_in_parallel_attn"], 2)
    } else if parallel {
        1
    } else {
        2
    };
    s.tied_embeddings = f.bool_or("tie_word_embeddings", true);
    if f.bool_or("alibi", false) {
        s.notes.push("alibi positions: no parameters, as rotary".into());
    }
    s.hidden_dropout = f.f64_or("hidden_dropout", 0.0);
    s.attention_dropout = f.f64_or("attention_dropout", 0.0);
    s
}

/// The strings of the first list among `keys` (module names to skip).
fn string_list(m: &Map<String, Value>, keys: &[&str]) -> Vec<String> {
    keys.iter()
        .find_map(|k| m.get(*k).and_then(Value::as_array))
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// A ModelOpt `hf_quant_config.json` (NVIDIA's NVFP4/FP8 checkpoints declare
/// their format there, not in config.json): its `quantization` object as a
/// [`QuantSpec`], with the note to show. `origin` names the file.
pub fn parse_hf_quant_config(bytes: &[u8], origin: &str) -> Result<(Option<QuantSpec>, Vec<String>), IngestError> {
    let v: Value =
        serde_json::from_slice(bytes).map_err(|e| IngestError::Json { file: origin.into(), reason: e.to_string() })?;
    let Some(q) = v.get("quantization").and_then(Value::as_object) else {
        return Err(IngestError::BadField {
            file: origin.into(),
            field: "quantization".into(),
            expected: "an object (ModelOpt hf_quant_config.json)".into(),
            found: v.get("quantization").map(kind).unwrap_or("nothing").into(),
        });
    };
    let mut m = q.clone();
    m.insert("quant_method".into(), Value::from("modelopt"));
    let mut notes = Vec::new();
    let spec = quantization(&Value::Object(m), origin, &mut notes)?;
    if let Some(kv) = q.get("kv_cache_quant_algo").and_then(Value::as_str) {
        notes.push(format!(
            "{origin}: the checkpoint ships {kv} KV-cache scales (use --kv-dtype fp8 to size an fp8 cache)"
        ));
    }
    if let Some(s) = &spec {
        notes.push(format!("{origin}: weights stored as {} (ModelOpt)", s.label));
    }
    Ok((spec, notes))
}

/// Apply a sibling `hf_quant_config.json` to a spec whose config.json
/// declares no quantization (NVIDIA's ModelOpt checkpoints); when both
/// declare one, config.json's wins and a note says so.
pub fn apply_hf_quant_config(spec: &mut ModelSpec, bytes: &[u8], origin: &str) -> Result<(), IngestError> {
    let (q, notes) = parse_hf_quant_config(bytes, origin)?;
    match (&spec.quantization, q) {
        (None, Some(q)) => {
            spec.quantization = Some(q);
            spec.notes.extend(notes);
        }
        (Some(_), Some(_)) => {
            spec.notes.push(format!("{origin} also declares a quantization; config.json's quantization_config is used"))
        }
        (_, None) => spec.notes.extend(notes),
    }
    Ok(())
}

/// `quantization_config` → how the checkpoint's linear weights are stored.
fn quantization(q: &Value, file: &str, notes: &mut Vec<String>) -> Result<Option<QuantSpec>, IngestError> {
    let Some(m) = q.as_object() else {
        return Err(IngestError::BadField {
            file: file.into(),
            field: "quantization_config".into(),
            expected: "an object".into(),
            found: kind(q).into(),
        });
    };
    let method = m.get("quant_method").and_then(Value::as_str).unwrap_or("").to_ascii_lowercase();
    match method.as_str() {
        "bitsandbytes" | "bnb" => Ok(bitsandbytes(m, notes)),
        "gptq" | "awq" => integer_groups(&method, m, file).map(Some),
        "fp8" | "fbgemm_fp8" => Ok(Some(fp8(m))),
        "mxfp4" => {
            // gpt-oss: experts in MXFP4 (`*_blocks` + `*_scales`), the rest bf16
            let mut s = QuantSpec::mxfp4(DType::BF16);
            s.skip_modules = string_list(m, &["modules_to_not_convert"]);
            Ok(Some(s))
        }
        "modelopt" => Ok(modelopt(m, notes)),
        "compressed-tensors" => Ok(compressed_tensors(m, notes)),
        other => {
            notes.push(format!(
                "quantization_config.quant_method '{other}' is not modelled: weights are counted at the --dtype you give, which may overstate them"
            ));
            Ok(None)
        }
    }
}

/// bitsandbytes: 4-bit (nf4/fp4, optional double quantization) or LLM.int8().
fn bitsandbytes(m: &Map<String, Value>, notes: &mut Vec<String>) -> Option<QuantSpec> {
    let flag = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
    if flag("load_in_4bit") {
        let compute = m
            .get("bnb_4bit_compute_dtype")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<DType>().ok())
            .unwrap_or(DType::F16);
        let dq = flag("bnb_4bit_use_double_quant");
        let mut s = QuantSpec::nf4(dq, compute);
        let qt = m.get("bnb_4bit_quant_type").and_then(Value::as_str).unwrap_or("fp4");
        s.label = format!("bnb {qt}{}", if dq { " + double quant" } else { "" });
        Some(s)
    } else if flag("load_in_8bit") {
        Some(QuantSpec {
            method: QuantMethod::Bnb8,
            bits: 8,
            group_size: None,
            double_quant: false,
            block: None,
            compute_dtype: DType::F16,
            label: "bnb LLM.int8()".into(),
            skip_modules: Vec::new(),
        })
    } else {
        notes.push(
            "quantization_config: bitsandbytes without load_in_4bit/load_in_8bit: weights counted unquantized".into(),
        );
        None
    }
}

/// GPTQ / AWQ: 2–8-bit integers with one scale (and zero) per group of inputs.
fn integer_groups(method: &str, m: &Map<String, Value>, file: &str) -> Result<QuantSpec, IngestError> {
    let get_i = |k: &str| m.get(k).and_then(Value::as_i64);
    let bits = get_i("bits").or_else(|| get_i("w_bit")).unwrap_or(4);
    if !(2..=8).contains(&bits) {
        return Err(IngestError::BadField {
            file: file.into(),
            field: "quantization_config.bits".into(),
            expected: "2 to 8".into(),
            found: bits.to_string(),
        });
    }
    // the first key present decides; -1 (or 0) is GPTQ's per-channel; absent is
    // transformers' GPTQConfig/AwqConfig default group_size=128, core's default group
    let g = match ["group_size", "q_group_size"].iter().find_map(|k| get_i(k)) {
        Some(g) if g <= 0 => None,
        Some(g) => Some(g as u64),
        None => Some(defaults::GROUP_SIZE),
    };
    let mut s = QuantSpec::int(bits as u64, g.unwrap_or(defaults::GROUP_SIZE), DType::F16);
    s.group_size = g;
    s.method = if method == "gptq" { QuantMethod::Gptq } else { QuantMethod::Awq };
    s.label = format!(
        "{} {}-bit {}",
        method.to_uppercase(),
        bits,
        g.map(|g| format!("g{g}")).unwrap_or_else(|| "per-channel".into())
    );
    Ok(s)
}

/// FP8 checkpoints: per-tensor scales, or block scales from `weight_block_size`.
fn fp8(m: &Map<String, Value>) -> QuantSpec {
    let mut s = QuantSpec::fp8_per_tensor(DType::BF16);
    if let Some(Value::Array(b)) = m.get("weight_block_size") {
        if let (Some(r), Some(c)) = (b.first().and_then(Value::as_u64), b.get(1).and_then(Value::as_u64)) {
            s.block = Some((r, c));
            s.label = format!("fp8 ({}x{} block scales)", r, c);
        }
    }
    s.skip_modules = string_list(m, &["modules_to_not_convert", "ignored_layers"]);
    s
}

/// NVIDIA ModelOpt exports: NVFP4 or FP8 by `quant_algo`.
fn modelopt(m: &Map<String, Value>, notes: &mut Vec<String>) -> Option<QuantSpec> {
    let algo = m.get("quant_algo").and_then(Value::as_str).unwrap_or("").to_ascii_uppercase();
    let mut s = match algo.as_str() {
        "NVFP4" => QuantSpec::nvfp4(DType::BF16),
        "FP8" => QuantSpec::fp8_per_tensor(DType::BF16),
        other => {
            notes.push(format!(
                "ModelOpt quant_algo '{other}' is not modelled: weights are counted at the --dtype you give"
            ));
            return None;
        }
    };
    s.skip_modules = string_list(m, &["exclude_modules", "ignore"]);
    Some(s)
}

/// llm-compressor's `compressed-tensors`: NVFP4 or FP8 by `format`.
fn compressed_tensors(m: &Map<String, Value>, notes: &mut Vec<String>) -> Option<QuantSpec> {
    let format = m.get("format").and_then(Value::as_str).unwrap_or("");
    let mut s = match format {
        "nvfp4-pack-quantized" => QuantSpec::nvfp4(DType::BF16),
        "float-quantized" => QuantSpec::fp8_per_tensor(DType::BF16),
        other => {
            notes.push(format!(
                "compressed-tensors format '{other}' is not modelled: weights are counted at the --dtype you give"
            ));
            return None;
        }
    };
    s.skip_modules = string_list(m, &["ignore"]);
    if s.skip_modules.iter().any(|p| p.starts_with("re:")) {
        notes.push("compressed-tensors `ignore` holds regex entries (re:…): vramfit matches exact names and * wildcards only, so those modules are counted as quantized".into());
    }
    Some(s)
}

#[cfg(test)]
mod quantization_tests {
    use super::*;
    use serde_json::json;

    fn q(v: Value) -> (Result<Option<QuantSpec>, IngestError>, Vec<String>) {
        let mut notes = Vec::new();
        (quantization(&v, "config.json", &mut notes), notes)
    }

    #[test]
    fn group_size_first_key_decides_and_negative_is_per_channel() {
        let (s, _) = q(json!({"quant_method": "gptq", "bits": 4, "group_size": -1}));
        let s = s.unwrap().unwrap();
        assert_eq!((s.group_size, s.method, s.label.as_str()), (None, QuantMethod::Gptq, "GPTQ 4-bit per-channel"));
        let (s, _) = q(json!({"quant_method": "awq", "w_bit": 4, "q_group_size": 64}));
        let s = s.unwrap().unwrap();
        assert_eq!((s.group_size, s.method, s.label.as_str()), (Some(64), QuantMethod::Awq, "AWQ 4-bit g64"));
        let (s, _) = q(json!({"quant_method": "gptq", "bits": 8}));
        assert_eq!(s.unwrap().unwrap().group_size, Some(128));
    }

    #[test]
    fn bits_out_of_range_names_the_field() {
        let (s, _) = q(json!({"quant_method": "gptq", "bits": 9}));
        let e = s.unwrap_err().to_string();
        assert!(e.contains("quantization_config.bits") && e.contains("2 to 8") && e.contains('9'), "{e}");
    }

    #[test]
    fn bitsandbytes_labels_and_unquantized_note() {
        let (s, _) = q(json!({"quant_method": "bitsandbytes", "load_in_4bit": true,
            "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, "bnb_4bit_compute_dtype": "bfloat16"}));
        let s = s.unwrap().unwrap();
        assert_eq!((s.label.as_str(), s.double_quant, s.compute_dtype), ("bnb nf4 + double quant", true, DType::BF16));
        let (s, _) = q(json!({"quant_method": "bitsandbytes", "load_in_8bit": true}));
        assert_eq!(s.unwrap().unwrap().method, QuantMethod::Bnb8);
        let (s, notes) = q(json!({"quant_method": "bitsandbytes"}));
        assert!(s.unwrap().is_none() && notes[0].contains("unquantized"), "{notes:?}");
    }

    #[test]
    fn fp8_blocks_modelopt_and_compressed_tensors() {
        let (s, _) = q(json!({"quant_method": "fp8", "weight_block_size": [128, 128], "ignored_layers": ["lm_head"]}));
        let s = s.unwrap().unwrap();
        assert_eq!((s.block, s.skip_modules.clone()), (Some((128, 128)), vec!["lm_head".to_string()]));
        let (s, notes) = q(json!({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}));
        assert!(s.unwrap().is_none() && notes[0].contains("'W4A8_AWQ' is not modelled"), "{notes:?}");
        let (s, notes) =
            q(json!({"quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["re:.*gate"]}));
        assert!(s.unwrap().is_some() && notes[0].contains("regex"), "{notes:?}");
        let (s, _) = q(json!("fp8"));
        assert!(s.unwrap_err().to_string().contains("an object"));
    }
}
