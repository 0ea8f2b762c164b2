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
use serde_json::{Map, Value};
use vramfit_core::{
    Attention, DType, Family, MlaSpec, MlpKind, ModelSpec, MoeSpec, NormKind, Positional, QuantMethod, QuantSpec,
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
    let v: Value =
        serde_json::from_slice(bytes).map_err(|e| IngestError::Json { file: origin.into(), reason: e.to_string() })?;
    parse_config_value(&v, origin)
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
    // Multimodal: the language model lives in text_config (or llm_config).
    let (cfg, outer_type) = match nested_text(top) {
        Some((key, inner)) => {
            let outer = top.get("model_type").and_then(Value::as_str).unwrap_or("multimodal").to_string();
            notes.push(format!(
                "multimodal config ({outer}): counted the language model in `{key}` only; the vision/audio towers are not included"
            ));
            (inner, Some(outer))
        }
        None => (top, None),
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
        _ => llama_family(&mut f, &name, family, &mt),
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
    if let Some(q) = top.get("quantization_config").or_else(|| cfg.get("quantization_config")) {
        spec.quantization = quantization(q, origin, &mut notes)?;
    }
    spec.notes.extend(notes);
    spec.validate().map_err(|e| IngestError::Model { file: origin.into(), error: e })?;
    Ok(spec)
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
        "qwen2" => Family::Qwen2,
        "qwen2_moe" => Family::Qwen2Moe,
        "qwen3" | "qwen3_vl" | "qwen3_vl_text" => Family::Qwen3,
        "qwen3_moe" => Family::Qwen3Moe,
        "gemma" => Family::Gemma,
        "gemma2" => Family::Gemma2,
        "phi3" => Family::Phi3,
        "gpt2" => Family::Gpt2,
        "gpt_neox" | "pythia" => Family::GptNeox,
        "falcon" | "refinedweb" | "refinedwebmodel" => Family::Falcon,
        "deepseek_v3" | "deepseek_v2" => Family::DeepseekV3,
        _ => Family::Generic,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Field reader that collects missing names instead of failing at the first.
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

    /// A non-negative integer field; `Ok(None)` when absent.
    fn u64_opt(&mut self, key: &str) -> Option<u64> {
        match self.get(key) {
            None => None,
            Some(Value::Number(n)) => match n.as_u64() {
                Some(x) => Some(x),
                None => match n.as_f64() {
                    Some(x) if x.fract() == 0.0 && (0.0..1.8e19).contains(&x) => Some(x as u64),
                    _ => {
                        self.missing.push(format!("{key} (a non-negative integer, found {n})"));
                        None
                    }
                },
            },
            Some(other) => {
                self.missing.push(format!("{key} (a non-negative integer, found {})", kind(other)));
                None
            }
        }
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

fn llama_family(f: &mut Fields, name: &str, family: Family, mt: &str) -> ModelSpec {
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
        Family::Qwen3 | Family::Qwen3Moe => s.qk_norm = true,
        Family::Gemma2 => s.norms_per_layer = 4,
        Family::Phi3 => {
            s.attention = Attention::FusedQkv;
            s.hidden_dropout = f.f64_or("resid_pdrop", 0.0);
        }
        _ => {}
    }
    let dense_width = f.u64_any(&["intermediate_size"]);
    s.intermediate_size = dense_width;
    match family {
        Family::Mixtral => {
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
            });
        }
        Family::Qwen2Moe | Family::Qwen3Moe => {
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
            });
            if dense > 0 {
                s.notes.push(format!("{dense} layers keep a dense MLP (decoder_sparse_step / mlp_only_layers); counted as leading layers"));
            }
        }
        Family::DeepseekV3 => {
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
                });
            }
            if f.u64_opt("num_nextn_predict_layers").unwrap_or(0) > 0 {
                s.notes.push("num_nextn_predict_layers > 0: the multi-token-prediction layer shipped in the checkpoint is not part of the transformers model and is not counted".into());
            }
        }
        _ => {}
    }
    s
}

fn gpt2(f: &mut Fields, name: &str) -> ModelSpec {
    let mut s = base(name, Family::Gpt2);
    s.hidden_size = f.u64_any(&["n_embd", "hidden_size"]);
    s.num_layers = f.u64_any(&["n_layer", "num_hidden_layers"]);
    s.num_heads = f.u64_any(&["n_head", "num_attention_heads"]);
    s.num_kv_heads = s.num_heads;
    s.head_dim = s.hidden_size.checked_div(s.num_heads).unwrap_or(0);
    s.vocab_size = f.u64_any(&["vocab_size"]);
    s.max_position_embeddings = f.u64_or(&["n_positions", "max_position_embeddings"], 1024);
    s.intermediate_size = f.u64_or(&["n_inner"], 4 * s.hidden_size);
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
    s.intermediate_size = f.u64_or(&["ffn_hidden_size"], 4 * s.hidden_size);
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
    let get_u = |k: &str| m.get(k).and_then(Value::as_i64);
    let compute = m
        .get("bnb_4bit_compute_dtype")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<DType>().ok())
        .unwrap_or(DType::F16);
    let group = |k: &[&str]| -> Option<u64> {
        for key in k {
            if let Some(g) = get_u(key) {
                return if g <= 0 { None } else { Some(g as u64) };
            }
        }
        Some(128)
    };
    let spec = match method.as_str() {
        "bitsandbytes" | "bnb" => {
            if m.get("load_in_4bit").and_then(Value::as_bool).unwrap_or(false) {
                let dq = m.get("bnb_4bit_use_double_quant").and_then(Value::as_bool).unwrap_or(false);
                let mut s = QuantSpec::nf4(dq, compute);
                let qt = m.get("bnb_4bit_quant_type").and_then(Value::as_str).unwrap_or("fp4");
                s.label = format!("bnb {qt}{}", if dq { " + double quant" } else { "" });
                s
            } else if m.get("load_in_8bit").and_then(Value::as_bool).unwrap_or(false) {
                QuantSpec {
                    method: QuantMethod::Bnb8,
                    bits: 8,
                    group_size: None,
                    double_quant: false,
                    block: None,
                    compute_dtype: DType::F16,
                    label: "bnb LLM.int8()".into(),
                }
            } else {
                notes.push(
                    "quantization_config: bitsandbytes without load_in_4bit/load_in_8bit: weights counted unquantized"
                        .into(),
                );
                return Ok(None);
            }
        }
        "gptq" | "awq" => {
            let bits = get_u("bits").or_else(|| get_u("w_bit")).unwrap_or(4);
            if !(2..=8).contains(&bits) {
                return Err(IngestError::BadField {
                    file: file.into(),
                    field: "quantization_config.bits".into(),
                    expected: "2 to 8".into(),
                    found: bits.to_string(),
                });
            }
            let g = group(&["group_size", "q_group_size"]);
            let mut s = QuantSpec::int(bits as u64, g.unwrap_or(128), DType::F16);
            s.group_size = g;
            s.method = if method == "gptq" { QuantMethod::Gptq } else { QuantMethod::Awq };
            s.label = format!(
                "{} {}-bit {}",
                method.to_uppercase(),
                bits,
                g.map(|g| format!("g{g}")).unwrap_or_else(|| "per-channel".into())
            );
            s
        }
        "fp8" | "fbgemm_fp8" => {
            let mut s = QuantSpec::fp8_per_tensor(DType::BF16);
            if let Some(Value::Array(b)) = m.get("weight_block_size") {
                if let (Some(r), Some(c)) = (b.first().and_then(Value::as_u64), b.get(1).and_then(Value::as_u64)) {
                    s.block = Some((r, c));
                    s.label = format!("fp8 ({}x{} block scales)", r, c);
                }
            }
            s
        }
        other => {
            notes.push(format!(
                "quantization_config.quant_method '{other}' is not modelled: weights are counted at the --dtype you give, which may overstate them"
            ));
            return Ok(None);
        }
    };
    Ok(Some(spec))
}
