//! From a GGUF header to the model llama.cpp loads: hyper-parameters per
//! layer (`llama_model::load_hparams` / `llama_hparams`, keys from
//! `gguf-py/gguf/constants.py`) and the tensor list with its slots.

mod consistency;

use super::header::GgufHeader;
use super::value::MetaValue;
use vramfit_llamacpp::model::{slot_of, ExpertSpec, GraphFamily, LayerHparams, LlamaModel, RecurrentState, TensorInfo};

/// Why a header cannot become a model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("metadata '{key}' is missing (needed for architecture '{arch}')")]
    Missing { key: String, arch: String },
    #[error("metadata '{key}': expected {expected}, found {found}")]
    Bad { key: String, expected: String, found: String },
    /// the header contradicts its own tensors (or its counts each other):
    /// what llama.cpp refuses at load
    #[error("metadata '{key}' {detail}")]
    Contradicts { key: String, detail: String },
    #[error("{0}")]
    Core(String),
}

struct Keys<'a> {
    h: &'a GgufHeader,
    arch: String,
}

impl<'a> Keys<'a> {
    fn key(&self, k: &str) -> String {
        format!("{}.{k}", self.arch)
    }
    fn get(&self, k: &str) -> Option<&'a MetaValue> {
        self.h.get(&self.key(k))
    }
    fn u64_opt(&self, k: &str) -> Result<Option<u64>, ModelError> {
        match self.get(k) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| ModelError::Bad {
                key: self.key(k),
                expected: "a non-negative integer".into(),
                found: v.describe(),
            }),
        }
    }
    fn u64_req(&self, k: &str) -> Result<u64, ModelError> {
        self.u64_opt(k)?.ok_or_else(|| ModelError::Missing { key: self.key(k), arch: self.arch.clone() })
    }
    /// A per-layer value: a scalar for all layers or an array of n_layer.
    fn per_layer(&self, k: &str, n_layer: usize, default: Option<u64>) -> Result<Vec<u64>, ModelError> {
        match self.get(k) {
            None => default
                .map(|d| vec![d; n_layer])
                .ok_or_else(|| ModelError::Missing { key: self.key(k), arch: self.arch.clone() }),
            Some(MetaValue::Array { len, values, .. }) => {
                let vals = values.as_ref().and_then(|v| v.iter().map(MetaValue::as_u64).collect::<Option<Vec<u64>>>());
                match vals {
                    Some(v) if v.len() == n_layer => Ok(v),
                    _ => Err(ModelError::Bad {
                        key: self.key(k),
                        expected: format!("{n_layer} non-negative integers (one per layer)"),
                        found: format!("an array of {len}"),
                    }),
                }
            }
            Some(v) => v.as_u64().map(|x| vec![x; n_layer]).ok_or_else(|| ModelError::Bad {
                key: self.key(k),
                expected: "a non-negative integer or a per-layer array".into(),
                found: v.describe(),
            }),
        }
    }
}

/// Architectures whose every layer keeps a recurrent state: llama.cpp's
/// `llm_arch_is_recurrent` (`src/llama-arch.cpp`).
const RECURRENT: &[&str] = &["mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"];
/// Hybrids, llama.cpp's `llm_arch_is_hybrid` (`src/llama-arch.cpp`, checked
/// at commit 00395eb2, 2026): a layer is recurrent when it has no KV heads,
/// or by `full_attention_interval` (or its default, [`default_full_attention_interval`]).
/// `deepseek4`, also in that table, keeps a compressed cache of its own
/// (`llama_kv_cache_dsv4`) that vramfit does not model; it is sized as a
/// plain decoder with a note.
const HYBRID: &[&str] = &[
    "jamba",
    "granitehybrid",
    "nemotron_h",
    "nemotron_h_moe",
    "falcon-h1",
    "plamo2",
    "lfm2",
    "lfm2moe",
    "qwen3next",
    "kimi-linear",
    "qwen35",
    "qwen35moe",
];

/// The gated-delta-net hybrids' `full_attention_interval` when the file
/// has none: 4 (`uint32_t full_attn_interval = 4;` before the optional
/// `LLM_KV_FULL_ATTENTION_INTERVAL` read in the qwen3next / qwen35 /
/// qwen35moe hparams loaders, `src/llama-model.cpp`): layer `il` is
/// recurrent when `(il + 1) % interval != 0`.
fn default_full_attention_interval(arch: &str) -> Option<u64> {
    matches!(arch, "qwen3next" | "qwen35" | "qwen35moe").then_some(4)
}
/// Architectures whose attention and FFN read the same input.
const PARALLEL: &[&str] = &["gptneox", "phi2", "gptj", "command-r", "cohere2", "falcon"];

/// Sliding-window layer pattern llama.cpp sets per architecture when the
/// file has no explicit pattern (`hparams.set_swa_pattern(n)`: layer `il`
/// slides when `il % n < n - 1`).
fn default_swa_pattern(arch: &str) -> Option<u64> {
    Some(match arch {
        "gemma2" | "gpt-oss" => 2,
        "gemma3" | "gemma3n" | "gemma-embedding" => 6,
        "cohere2" => 4,
        "llama4" => 4,
        _ => return None,
    })
}

/// Build the model llama.cpp would load from a parsed header.
pub fn model_from_header(h: &GgufHeader, name: &str) -> Result<LlamaModel, ModelError> {
    let arch = h
        .get("general.architecture")
        .and_then(MetaValue::as_str)
        .ok_or_else(|| ModelError::Missing { key: "general.architecture".into(), arch: "?".into() })?
        .to_string();
    let k = Keys { h, arch: arch.clone() };
    let mut notes = Vec::new();
    let n_layer = k.u64_req("block_count")?;
    if n_layer == 0 || n_layer > vramfit_llamacpp::model::limits::MAX_LAYERS {
        return Err(ModelError::Bad {
            key: k.key("block_count"),
            expected: "1 to 4096 layers".into(),
            found: n_layer.to_string(),
        });
    }
    let nl = n_layer as usize;
    let n_embd = k.u64_req("embedding_length")?;
    let n_ctx_train = k.u64_opt("context_length")?.unwrap_or(0);
    let is_recurrent_arch = RECURRENT.contains(&arch.as_str());
    let heads = k.per_layer("attention.head_count", nl, if is_recurrent_arch { Some(0) } else { None })?;
    let heads_kv = match k.get("attention.head_count_kv") {
        None => heads.clone(),
        Some(_) => k.per_layer("attention.head_count_kv", nl, None)?,
    };
    let heads_dims = head_dims(&k, n_embd, &heads)?;
    let ff = k.per_layer("feed_forward_length", nl, Some(0))?;

    let n_swa = k.u64_opt("attention.sliding_window")?.unwrap_or(0);
    let sliding = sliding_layers(&k, nl, n_swa, &mut notes)?;
    let interval = full_attention_interval(&k)?;
    let (state, ssm) = recurrent_state(&k, n_embd)?;
    let mut layers = layer_hparams(&k, nl, interval, state, &heads, &heads_kv, heads_dims, &ff, &sliding)?;
    share_kv(&k, &mut layers)?;
    // experts
    let tensors_by_layer = consistency::Tensors::of(h);
    let expert_count = k.u64_opt("expert_count")?;
    let expert_used = k.u64_opt("expert_used_count")?;
    let experts = match expert_count {
        Some(n) if n > 0 => Some(ExpertSpec {
            count: n,
            used: expert_used.unwrap_or(1).max(1),
            // absent: the width the expert tensors have (llama.cpp's default differs by architecture)
            ff: match k.u64_opt("expert_feed_forward_length")? {
                Some(f) => f,
                None => tensors_by_layer.expert_width().unwrap_or(ff.first().copied().unwrap_or(0)),
            },
            shared: k.u64_opt("expert_shared_count")?.unwrap_or(0),
            shared_ff: k.u64_opt("expert_shared_feed_forward_length")?.unwrap_or(0),
        }),
        _ => None,
    };
    let declared =
        consistency::Declared { n_layer, layers: &layers, experts: experts.as_ref(), expert_count, expert_used, ssm };
    consistency::check(h, &k, &declared, &tensors_by_layer)?;
    // tensors and vocabulary
    let tensors: Vec<TensorInfo> = h
        .tensors
        .iter()
        .map(|t| TensorInfo {
            name: t.name.clone(),
            ty: t.ty,
            ne: t.ne.clone(),
            bytes: t.bytes,
            offset: t.offset,
            slot: slot_of(&t.name),
        })
        .collect();
    let has = |n: &str| tensors.iter().any(|t| t.name == n);
    let embd_vocab = tensors.iter().find(|t| t.name == "token_embd.weight").and_then(|t| t.ne.get(1).copied());
    let n_vocab = k
        .u64_opt("vocab_size")?
        .or_else(|| h.get("tokenizer.ggml.tokens").and_then(MetaValue::array_len))
        .or(embd_vocab)
        .unwrap_or(0);
    let causal = k.get("attention.causal").and_then(MetaValue::as_bool).unwrap_or(true);
    let family = if PARALLEL.contains(&arch.as_str())
        && k.get("use_parallel_residual").and_then(MetaValue::as_bool).unwrap_or(true)
    {
        GraphFamily::Parallel
    } else {
        GraphFamily::Sequential
    };
    let first_attn = (0..nl).find(|&il| layers[il].has_kv()).unwrap_or(0);
    let fused_qkv = has(&format!("blk.{first_attn}.attn_qkv.weight"));
    let qk_norm = has(&format!("blk.{first_attn}.attn_q_norm.weight"));
    let gated_ffn = has_gated_ffn(&tensors, &ff, nl);
    let tied_output = !has("output.weight") && has("token_embd.weight") && causal;
    let mla = is_mla(&k)?;
    let (n_layer, layers, tensors, nextn) = skip_nextn(&k, n_layer, layers, tensors, &mut notes)?;
    let tensors = extra_layers_to_output(tensors, n_layer, &mut notes);
    if arch == "deepseek4" {
        notes.push(
            "deepseek4: llama.cpp keeps a compressed hybrid cache (llama_kv_cache_dsv4) that vramfit does not model; the KV cache is sized as plain attention over every layer, which over-states it".into(),
        );
    }
    let m = LlamaModel {
        name: h.get("general.name").and_then(MetaValue::as_str).unwrap_or(name).to_string(),
        arch,
        n_layer: n_layer as u32,
        n_embd,
        n_vocab,
        n_ctx_train,
        layers,
        n_swa,
        experts,
        causal,
        family,
        fused_qkv,
        qk_norm,
        gated_ffn,
        tied_output,
        mla,
        tensors,
        notes,
        nextn,
    };
    m.validate().map_err(|e| ModelError::Core(e.to_string()))?;
    Ok(m)
}

/// `llama_hparams::is_mla()` (src/llama-hparams.cpp): both MLA head sizes
/// present and non-zero (`llama_model::load_hparams` reads
/// `LLM_KV_ATTENTION_KEY_LENGTH_MLA` / `VALUE_LENGTH_MLA`, both optional).
fn is_mla(k: &Keys) -> Result<bool, ModelError> {
    Ok(k.u64_opt("attention.key_length_mla")?.unwrap_or(0) != 0
        && k.u64_opt("attention.value_length_mla")?.unwrap_or(0) != 0)
}

/// Head sizes of K and V for full and sliding layers (`key_length`,
/// default `n_embd / n_head`; `value_length`, default the K size).
fn head_dims(k: &Keys, n_embd: u64, heads: &[u64]) -> Result<HeadDims, ModelError> {
    let n_head0 = heads.iter().copied().find(|&x| x > 0).unwrap_or(0);
    let default_head = Some(n_embd.checked_div(n_head0).unwrap_or(0));
    let head_k = k.u64_opt("attention.key_length")?.or(default_head).unwrap_or(0);
    let head_v = k.u64_opt("attention.value_length")?.unwrap_or(head_k);
    // sliding-window layers' head sizes (Gemma 4): `key_length_swa` /
    // `value_length_swa`, defaulting to the full layers' (llama_model::
    // load_hparams, "head size and n_rot for SWA layers", src/llama-model.cpp)
    let head_k_swa = k.u64_opt("attention.key_length_swa")?.unwrap_or(head_k);
    let head_v_swa = k.u64_opt("attention.value_length_swa")?.unwrap_or(head_v);
    Ok(HeadDims { k: head_k, v: head_v, k_swa: head_k_swa, v_swa: head_v_swa })
}

/// A hybrid's `full_attention_interval`: the file's (0 refused), else the
/// architecture's default.
fn full_attention_interval(k: &Keys) -> Result<Option<u64>, ModelError> {
    Ok(match k.u64_opt("full_attention_interval")? {
        Some(0) => {
            return Err(ModelError::Bad {
                key: k.key("full_attention_interval"),
                expected: "a layer period of at least 1".into(),
                found: "0".into(),
            })
        }
        Some(n) => Some(n),
        None => default_full_attention_interval(&k.arch),
    })
}

/// Which layers attend over a sliding window: the file's per-layer pattern,
/// its period, or llama.cpp's default period for the architecture (none: a
/// note, and every layer attends over the whole context).
fn sliding_layers(k: &Keys, nl: usize, n_swa: u64, notes: &mut Vec<String>) -> Result<Vec<bool>, ModelError> {
    let arch = &k.arch;
    let mut sliding = vec![false; nl];
    if n_swa > 0 {
        match k.get("attention.sliding_window_pattern") {
            Some(v @ MetaValue::Array { .. }) => match v.as_bool_vec() {
                Some(p) if p.len() == nl => sliding = p,
                _ => {
                    return Err(ModelError::Bad {
                        key: k.key("attention.sliding_window_pattern"),
                        expected: format!("{nl} booleans"),
                        found: v.describe(),
                    })
                }
            },
            Some(v) => {
                let n = v.as_u64().ok_or_else(|| ModelError::Bad {
                    key: k.key("attention.sliding_window_pattern"),
                    expected: "a layer period or a per-layer bool array".into(),
                    found: v.describe(),
                })?;
                for (il, s) in sliding.iter_mut().enumerate() {
                    *s = n == 0 || (il as u64 % n) < n - 1;
                }
            }
            None => match default_swa_pattern(arch) {
                Some(n) => {
                    for (il, s) in sliding.iter_mut().enumerate() {
                        *s = (il as u64 % n) < n - 1;
                    }
                }
                None => notes.push(format!(
                    "{arch}: the file declares a sliding window of {n_swa} but llama.cpp attends over the whole context for this architecture; the KV cache is sized in full"
                )),
            },
        }
    }
    Ok(sliding)
}

/// The per-layer recurrent state (RWKV, short-conv or Mamba-style), from
/// the file's sizes (`llama_hparams::n_embd_r` / `n_embd_s`); `None` when
/// it declares none. Also the Mamba-style sizes (d_conv, d_inner, d_state,
/// n_group) for the check against the tensors. Sizes whose state passes
/// 2^64 are refused naming the key (the tensors bound it further).
#[allow(clippy::type_complexity)]
fn recurrent_state(k: &Keys, n_embd: u64) -> Result<(Option<RecurrentState>, (u64, u64, u64, u64)), ModelError> {
    let d_conv = k.u64_opt("ssm.conv_kernel")?.unwrap_or(0);
    let d_inner = k.u64_opt("ssm.inner_size")?.unwrap_or(0);
    let d_state = k.u64_opt("ssm.state_size")?.unwrap_or(0);
    let n_group = k.u64_opt("ssm.group_count")?.unwrap_or(0);
    let wkv_head = k.u64_opt("wkv.head_size")?.unwrap_or(0);
    let shift = k.u64_opt("token_shift_count")?.unwrap_or(2);
    let l_cache = k.u64_opt("shortconv.l_cache")?.unwrap_or(0);
    let over = |key: &str| ModelError::Contradicts {
        key: k.key(key),
        detail:
            "gives a recurrent state of more than 2^64 elements per layer: the sizes contradict any tensor of the file"
                .into(),
    };
    let mul = |a: u64, b: u64, key: &str| a.checked_mul(b).ok_or_else(|| over(key));
    let state = if wkv_head > 0 {
        Some(RecurrentState { r: mul(shift, n_embd, "token_shift_count")?, s: mul(n_embd, wkv_head, "wkv.head_size")? })
    } else if l_cache > 0 {
        Some(RecurrentState { r: mul(n_embd, l_cache - 1, "shortconv.l_cache")?, s: 0 })
    } else if d_conv > 0 || d_state > 0 {
        let channels = mul(mul(2, n_group, "ssm.group_count")?, d_state, "ssm.state_size")?
            .checked_add(d_inner)
            .ok_or_else(|| over("ssm.inner_size"))?;
        Some(RecurrentState {
            r: mul(d_conv.saturating_sub(1), channels, "ssm.conv_kernel")?,
            s: mul(d_state, d_inner, "ssm.state_size")?,
        })
    } else {
        None
    };
    Ok((state, (d_conv, d_inner, d_state, n_group)))
}

/// Head sizes of K and V for full-attention and sliding-window layers.
#[derive(Debug, Clone, Copy)]
struct HeadDims {
    k: u64,
    v: u64,
    k_swa: u64,
    v_swa: u64,
}

/// Each layer's heads, head sizes, FFN width, window and recurrent state;
/// a hybrid's recurrent layers from `full_attention_interval` or from
/// their zero KV heads.
#[allow(clippy::too_many_arguments)]
fn layer_hparams(
    k: &Keys,
    nl: usize,
    interval: Option<u64>,
    state: Option<RecurrentState>,
    heads: &[u64],
    heads_kv: &[u64],
    dims: HeadDims,
    ff: &[u64],
    sliding: &[bool],
) -> Result<Vec<LayerHparams>, ModelError> {
    let arch = &k.arch;
    let is_recurrent_arch = RECURRENT.contains(&arch.as_str());
    let is_hybrid = HYBRID.contains(&arch.as_str());
    // Falcon-H1 runs attention and Mamba-2 side by side in every layer: llama.cpp's
    // `llama_model::create_memory` (src/llama-model.cpp) gives it `filter_attn` and
    // `filter_recr` that both return true, so each layer keeps K/V AND a recurrent state
    let attention_and_state = arch == "falcon-h1";
    let mut layers = Vec::with_capacity(nl);
    for il in 0..nl {
        let recurrent_layer = if is_recurrent_arch || attention_and_state {
            true
        } else if is_hybrid {
            match interval {
                Some(n) if n > 0 => (il as u64 % n) != n - 1,
                _ => heads_kv[il] == 0,
            }
        } else {
            false
        };
        let kv = if recurrent_layer && !attention_and_state { 0 } else { heads_kv[il] };
        if recurrent_layer && state.is_none() {
            return Err(ModelError::Missing { key: k.key("ssm.state_size"), arch: arch.clone() });
        }
        layers.push(LayerHparams {
            n_head: heads[il],
            n_head_kv: kv,
            head_dim_k: if sliding[il] { dims.k_swa } else { dims.k },
            head_dim_v: if sliding[il] { dims.v_swa } else { dims.v },
            n_ff: ff[il],
            sliding: sliding[il],
            recurrent: if recurrent_layer { state } else { None },
            kv_from: None,
        });
    }
    Ok(layers)
}

/// KV sharing (Gemma 3n, Gemma 4): only the first `n_layer_kv_from_start`
/// layers keep a KV cache; each later layer attends over the cache of the
/// last cached layer of its kind, `n_layer_kv_from_start − 2` when it slides,
/// `− 1` when not (`llama_model::create_memory`, the `reuse` callback for
/// LLM_ARCH_GEMMA3N / LLM_ARCH_GEMMA4, src/llama-model.cpp, b11312).
/// `n_layer_kv_from_start` is `block_count − attention.shared_kv_layers` for
/// gemma4 (`llama_model_gemma4::load_arch_hparams`, src/models/gemma4.cpp;
/// the key is optional, default 0) and 20 for gemma3n (src/models/gemma3n.cpp).
fn share_kv(k: &Keys, layers: &mut [LayerHparams]) -> Result<(), ModelError> {
    let nl = layers.len() as u64;
    let (from_start, key) = match k.arch.as_str() {
        "gemma4" => {
            let shared = k.u64_opt("attention.shared_kv_layers")?.unwrap_or(0);
            if shared == 0 {
                return Ok(());
            }
            (nl.checked_sub(shared), k.key("attention.shared_kv_layers"))
        }
        "gemma3n" => (Some(20), "gemma3n: n_layer_kv_from_start (20)".to_string()),
        _ => return Ok(()),
    };
    // llama.cpp asserts n_layer_kv_from_start >= 2 in the reuse callback
    let from_start = match from_start {
        Some(n) if n >= 2 => n,
        _ => {
            return Err(ModelError::Contradicts {
                key,
                detail: format!(
                    "leaves fewer than 2 of the {nl} layers with a KV cache (llama.cpp asserts at least 2)"
                ),
            })
        }
    };
    for l in layers.iter_mut().skip(from_start as usize) {
        let back = if l.sliding { 2 } else { 1 };
        l.kv_from = Some((from_start - back) as u32);
    }
    Ok(())
}

/// A gated FFN: a gate tensor in any layer, or Phi-3's fused gate and up.
fn has_gated_ffn(tensors: &[TensorInfo], ff: &[u64], nl: usize) -> bool {
    let has = |n: &str| tensors.iter().any(|t| t.name == n);
    (0..nl).any(|il| has(&format!("blk.{il}.ffn_gate.weight")) || has(&format!("blk.{il}.ffn_gate_exps.weight")))
        || (0..nl).any(|il| {
            // Phi-3 fuses gate and up into one ffn_up of 2·n_ff rows
            tensors
                .iter()
                .find(|t| t.name == format!("blk.{il}.ffn_up.weight"))
                .and_then(|t| t.ne.get(1))
                .is_some_and(|&rows| ff[il] > 0 && rows == 2 * ff[il])
        })
}

/// Architectures whose loader reads `nextn_predict_layers` and keeps those
/// last layers out of the main model: their tensors are created with
/// `TENSOR_SKIP` (not allocated: llama.cpp logs "model has unused tensor
/// blk.N.… -- ignoring") and they get no KV cache
/// (`n_layer_kv_from_start = n_layer − nextn_predict_layers`): glm4moe
/// (src/models/glm4-moe.cpp `load_arch_tensors`: "skip all tensors in the
/// NextN layers"), qwen35 and qwen35moe ("NextN/MTP (Qwen3.5/3.6): extra
/// decoder block appended beyond the main stack"). llama-server loads them
/// for `--spec-type draft-mtp` (`mparams.load_mtp`, PR #22673): the plan
/// then adds them back with their MTP context (vramfit_llamacpp::mtp).
pub const NEXTN_SKIPPED: &[&str] = &["glm4moe", "qwen35", "qwen35moe"];

/// What [`skip_nextn`] returns: the trunk's layer count, layers and
/// tensors, and the NextN layers set apart.
type Trunk = (u64, Vec<LayerHparams>, Vec<TensorInfo>, Option<vramfit_llamacpp::model::NextnLayers>);

/// The model without its MTP/NextN layers (see [`NEXTN_SKIPPED`]): the
/// layer count, the layers and the tensors llama.cpp loads, and the NextN
/// layers kept apart for `--spec-type draft-mtp`.
fn skip_nextn(
    k: &Keys,
    n_layer: u64,
    mut layers: Vec<LayerHparams>,
    tensors: Vec<TensorInfo>,
    notes: &mut Vec<String>,
) -> Result<Trunk, ModelError> {
    let nextn = k.u64_opt("nextn_predict_layers")?.unwrap_or(0);
    if nextn == 0 || !NEXTN_SKIPPED.contains(&k.arch.as_str()) {
        return Ok((n_layer, layers, tensors, None));
    }
    if nextn >= n_layer {
        // llama.cpp: GGML_ASSERT(n_layer_nextn < n_layer_all)
        return Err(ModelError::Contradicts {
            key: k.key("nextn_predict_layers"),
            detail: format!("is {nextn}, not below block_count {n_layer} (llama.cpp asserts it)"),
        });
    }
    let kept = n_layer - nextn;
    let heads_kv = match k.get("attention.head_count_kv") {
        None => k.per_layer("attention.head_count", n_layer as usize, None)?,
        Some(_) => k.per_layer("attention.head_count_kv", n_layer as usize, None)?,
    };
    // MTP layers are attention-only, never recurrent (qwen35 load_arch_hparams:
    // is_recr_impl[i] = i < n_layer() && …): a hybrid's interval rule does not apply
    let mut mtp_layers = layers.split_off(kept as usize);
    for (i, l) in mtp_layers.iter_mut().enumerate() {
        l.recurrent = None;
        l.n_head_kv = heads_kv[kept as usize + i];
    }
    let skipped = |t: &TensorInfo| matches!(t.slot, vramfit_llamacpp::Slot::Layer(il) if il as u64 >= kept);
    let (dropped, tensors): (Vec<TensorInfo>, Vec<TensorInfo>) = tensors.into_iter().partition(skipped);
    let bytes = dropped.iter().fold(0u64, |a, t| a.saturating_add(t.bytes));
    notes.push(format!(
        "{nextn} MTP/NextN layer(s) (blk.{kept}{}): {} tensors, {:.2} MiB, which llama.cpp skips ('model has unused tensor … -- ignoring', no KV cache) unless llama-server runs --spec-type draft-mtp, which loads them with an MTP context of their own",
        if nextn == 1 { String::new() } else { format!("-{}", n_layer - 1) },
        dropped.len(),
        bytes as f64 / (1u64 << 20) as f64
    ));
    let set_apart = vramfit_llamacpp::model::NextnLayers { layers: mtp_layers, tensors: dropped };
    Ok((kept, layers, tensors, Some(set_apart)))
}

/// Tensors of layers past block_count (an extra prediction layer) go with
/// the output layer; the first gets a note.
fn extra_layers_to_output(tensors: Vec<TensorInfo>, n_layer: u64, notes: &mut Vec<String>) -> Vec<TensorInfo> {
    for t in &tensors {
        if let vramfit_llamacpp::Slot::Layer(il) = t.slot {
            if il as u64 >= n_layer {
                notes.push(format!(
                    "tensor '{}' belongs to layer {il} beyond block_count {n_layer} (an extra prediction layer); it is placed with the output layer",
                    t.name
                ));
                break;
            }
        }
    }
    tensors
        .into_iter()
        .map(|mut t| {
            if let vramfit_llamacpp::Slot::Layer(il) = t.slot {
                if il as u64 >= n_layer {
                    t.slot = vramfit_llamacpp::Slot::Output;
                }
            }
            t
        })
        .collect()
}
