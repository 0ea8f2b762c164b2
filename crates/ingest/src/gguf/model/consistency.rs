//! The header's hyper-parameters against its own tensor infos, as
//! llama.cpp checks them when it loads the file, so a header that
//! contradicts its tensors is refused (naming the metadata key) instead of
//! becoming an impossible estimate.
//!
//! llama.cpp's loader (`src/llama-model-loader.cpp`) creates every weight
//! with the shape the hyper-parameters imply (`create_tensor(tn(…), {ne…})`
//! in `llama_model::load_tensors`, `src/llama-model.cpp`) and stops at load
//! with `missing tensor '…'` when a required one is absent or
//! `check_tensor_dims: tensor '…' has wrong shape; expected …, got …` when
//! its dimensions differ. `llama_model::load_hparams` asserts the expert
//! counts (`GGML_ASSERT(hparams.n_expert_used <= hparams.n_expert)`, and
//! `n_expert_used > 0` exactly when `n_expert > 0`).
//!
//! The shapes checked here are the ones every architecture shares:
//! - every layer `blk.N` below `block_count` has tensors (each
//!   architecture's layer loop creates required tensors for all of them);
//! - `attn_k` is `{n_embd, n_embd_head_k · n_head_kv}`, `attn_v`
//!   `{n_embd, n_embd_head_v · n_head_kv}`, `attn_q` `{n_embd,
//!   n_embd_head_k · n_head}` (twice that where the query carries its gate,
//!   Qwen3-Next), a fused `attn_qkv` `{n_embd, n_embd_head_k · n_head +
//!   (n_embd_head_k + n_embd_head_v) · n_head_kv}`; grouped-query attention
//!   needs `n_head` to be a multiple of `n_head_kv` (ggml_mul_mat and
//!   ggml_flash_attn_ext assert it when the graph is built);
//! - a dense `ffn_down` is `{n_ff, n_embd}` (`ffn_up` `{n_embd, n_ff}`, or
//!   `2·n_ff` where gate and up are fused: Phi-3, ChatGLM);
//! - routed experts `ffn_{gate,up}_exps` are `{n_embd, n_ff_exp, n_expert}`,
//!   `ffn_down_exps` `{n_ff_exp, n_embd, n_expert}`, the router
//!   `ffn_gate_inp` `{n_embd, n_expert}`; shared experts `ffn_*_shexp`
//!   have the shared width;
//! - a Mamba-style convolution `ssm_conv1d` is `{d_conv, d_inner +
//!   2 · n_group · d_state}` (Mamba, Mamba-2, Jamba, Falcon-H1, Granite
//!   hybrid, Nemotron-H, Qwen3-Next); and whatever the family, a layer's
//!   recurrent state (`n_embd_r + n_embd_s`) is smaller than the layer's own
//!   weights, as in every recurrent model llama.cpp runs (a Mamba-2 2.7B
//!   layer: 0.7 M state elements, 27 M weights; RWKV-6 1.6B: 0.14 M, 50 M),
//!   so sizes of 2^40 are refused before any arithmetic on them.
//!
//! Shapes peculiar to one architecture (Arctic's residual MLP of width
//! `n_embd`, MLA's latent projections, Kimi's per-head convolutions) are not
//! checked: a check here never refuses a file llama.cpp loads.

use super::super::header::{GgufHeader, GgufTensor};
use super::{Keys, ModelError};
use std::collections::{BTreeMap, BTreeSet};
use vramfit_llamacpp::model::{ExpertSpec, LayerHparams};

/// What the header declares, gathered by `model_from_header`.
pub(super) struct Declared<'a> {
    pub n_layer: u64,
    pub layers: &'a [LayerHparams],
    pub experts: Option<&'a ExpertSpec>,
    /// `expert_count` and `expert_used_count` as written (absent: `None`)
    pub expert_count: Option<u64>,
    pub expert_used: Option<u64>,
    /// Mamba-style sizes (d_conv, d_inner, d_state, n_group)
    pub ssm: (u64, u64, u64, u64),
}

/// The tensors of the file by layer.
pub(super) struct Tensors<'a> {
    by_name: BTreeMap<&'a str, &'a GgufTensor>,
    /// `blk.N.*`
    by_layer: BTreeMap<u64, Vec<&'a GgufTensor>>,
    /// layers with any tensor: `blk.N.*`, or an encoder-decoder's
    /// `enc.blk.N.*` / `dec.blk.N.*` (T5)
    present: BTreeSet<u64>,
}

impl<'a> Tensors<'a> {
    pub fn of(h: &'a GgufHeader) -> Tensors<'a> {
        let mut by_layer: BTreeMap<u64, Vec<&GgufTensor>> = BTreeMap::new();
        let mut present = BTreeSet::new();
        for t in &h.tensors {
            if let Some(il) = layer_of(&t.name) {
                by_layer.entry(il).or_default().push(t);
                present.insert(il);
            } else if let Some(il) =
                t.name.strip_prefix("enc.").or_else(|| t.name.strip_prefix("dec.")).and_then(layer_of)
            {
                present.insert(il);
            }
        }
        Tensors { by_name: h.tensors.iter().map(|t| (t.name.as_str(), t)).collect(), by_layer, present }
    }

    fn get(&self, il: usize, name: &str) -> Option<&'a GgufTensor> {
        self.by_name.get(format!("blk.{il}.{name}").as_str()).copied()
    }

    /// Whether layer `il` has any of these tensors.
    pub fn layer_has(&self, il: usize, names: &[&str]) -> bool {
        names.iter().any(|n| self.get(il, n).is_some())
    }

    /// The width of the routed experts: `ffn_down_exps` ne[0], else the
    /// gate or up ne[1], in the first layer that has them.
    pub fn expert_width(&self) -> Option<u64> {
        self.by_layer.values().flatten().find_map(|t| {
            let base = t.name.rsplit_once(".weight").map(|(b, _)| b)?;
            let short = base.rsplit('.').next()?;
            match short {
                "ffn_down_exps" => t.ne.first().copied(),
                "ffn_gate_exps" | "ffn_up_exps" => t.ne.get(1).copied(),
                _ => None,
            }
        })
    }
}

/// The routed-expert tensors of a layer (gate and up fused in newer files).
const EXPERT_TENSORS: &[&str] =
    &["ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight", "ffn_gate_up_exps.weight"];

/// `blk.N.…` → N.
fn layer_of(name: &str) -> Option<u64> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}

fn dim(t: &GgufTensor, i: usize) -> u64 {
    t.ne.get(i).copied().unwrap_or(1)
}

fn shape(ne: &[u64]) -> String {
    format!("[{}]", ne.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
}

/// llama.cpp's words for a tensor whose dimension `i` is not `want`.
fn wrong_shape(t: &GgufTensor, i: usize, want: &str) -> String {
    format!(
        "but tensor '{}' is {} (dimension {i} should be {want}): llama.cpp stops at load with \"tensor '{}' has wrong shape\"",
        t.name,
        shape(&t.ne),
        t.name
    )
}

fn contradicts(key: String, detail: String) -> ModelError {
    ModelError::Contradicts { key, detail }
}

/// Check the declared hyper-parameters against the tensor infos.
pub(super) fn check(h: &GgufHeader, k: &Keys, d: &Declared, tensors: &Tensors) -> Result<(), ModelError> {
    if h.tensors.is_empty() {
        return Err(contradicts(
            "tensor_count".into(),
            "is 0: the file holds no tensors (a vocabulary-only GGUF?); llama.cpp stops at load with \"missing tensor 'token_embd.weight'\"".into(),
        ));
    }
    layers_present(k, d, tensors)?;
    experts(k, d, tensors)?;
    for (il, l) in d.layers.iter().enumerate() {
        if l.recurrent.is_some() {
            recurrent(k, d, tensors, il, l)?;
        }
        if l.has_kv() {
            attention(k, tensors, il, l)?;
            if !(d.experts.is_some() && tensors.layer_has(il, EXPERT_TENSORS)) {
                dense_ffn(k, tensors, il, l)?;
            }
        }
    }
    Ok(())
}

/// Every layer below `block_count` has tensors.
fn layers_present(k: &Keys, d: &Declared, tensors: &Tensors) -> Result<(), ModelError> {
    let Some(il) = (0..d.n_layer).find(|il| !tensors.present.contains(il)) else { return Ok(()) };
    let held = tensors.present.iter().filter(|&&l| l < d.n_layer).count();
    Err(contradicts(
        k.key("block_count"),
        format!(
            "is {} but the file holds tensors for {held} of those layers, none for layer {il} (no 'blk.{il}.*'): llama.cpp stops at load with \"missing tensor 'blk.{il}.…'\"",
            d.n_layer
        ),
    ))
}

/// Expert counts against each other and against the expert tensors.
fn experts(k: &Keys, d: &Declared, tensors: &Tensors) -> Result<(), ModelError> {
    let count = d.expert_count.unwrap_or(0);
    let used = d.expert_used.unwrap_or(0);
    let assert = "llama.cpp stops at load (llama_model::load_hparams: GGML_ASSERT";
    if count == 0 {
        if used > 0 {
            return Err(contradicts(
                k.key("expert_used_count"),
                format!("is {used} but the model has no experts (expert_count is 0 or absent): {assert} n_expert_used == 0)"),
            ));
        }
        return Ok(());
    }
    if used == 0 {
        return Err(contradicts(
            k.key("expert_used_count"),
            format!("is 0 or absent but expert_count is {count}: {assert} n_expert_used > 0)"),
        ));
    }
    if used > count {
        return Err(contradicts(
            k.key("expert_used_count"),
            format!("is {used}, more than expert_count {count}: {assert} n_expert_used <= n_expert)"),
        ));
    }
    let Some(ex) = d.experts else { return Ok(()) };
    let mut moe_layers = 0;
    for il in 0..d.layers.len() {
        for (name, ff_dim) in [("ffn_gate_exps.weight", 1), ("ffn_up_exps.weight", 1), ("ffn_down_exps.weight", 0)] {
            let Some(t) = tensors.get(il, name) else { continue };
            if dim(t, 2) != count {
                return Err(contradicts(
                    k.key("expert_count"),
                    format!("is {count} {}", wrong_shape(t, 2, &format!("{count} experts"))),
                ));
            }
            if dim(t, ff_dim) != ex.ff {
                return Err(contradicts(
                    k.key("expert_feed_forward_length"),
                    format!("is {} {}", ex.ff, wrong_shape(t, ff_dim, &ex.ff.to_string())),
                ));
            }
        }
        if let Some(t) = tensors.get(il, "ffn_gate_inp.weight") {
            if dim(t, 1) != count {
                return Err(contradicts(
                    k.key("expert_count"),
                    format!("is {count} {}", wrong_shape(t, 1, &format!("{count} experts"))),
                ));
            }
        }
        if !tensors.layer_has(il, EXPERT_TENSORS) {
            continue;
        }
        moe_layers += 1;
        if ex.shared > 0 && ex.shared_ff > 0 {
            let total = ex.shared.checked_mul(ex.shared_ff).ok_or_else(|| {
                contradicts(
                    k.key("expert_shared_count"),
                    format!(
                        "is {} with expert_shared_feed_forward_length {}: their product overflows 64 bits",
                        ex.shared, ex.shared_ff
                    ),
                )
            })?;
            let shexp = [("ffn_up_shexp.weight", 1), ("ffn_gate_shexp.weight", 1), ("ffn_down_shexp.weight", 0)];
            let mut found = false;
            for (name, i) in shexp {
                let Some(t) = tensors.get(il, name) else { continue };
                found = true;
                if dim(t, i) != ex.shared_ff && dim(t, i) != total {
                    return Err(contradicts(
                        k.key("expert_shared_feed_forward_length"),
                        format!("is {} {}", ex.shared_ff, wrong_shape(t, i, &ex.shared_ff.to_string())),
                    ));
                }
            }
            if !found {
                return Err(contradicts(
                    k.key("expert_shared_count"),
                    format!(
                        "is {} but layer {il} has no shared-expert tensors: llama.cpp stops at load with \"missing tensor 'blk.{il}.ffn_up_shexp.weight'\"",
                        ex.shared
                    ),
                ));
            }
        }
    }
    if moe_layers == 0 {
        return Err(contradicts(
            k.key("expert_count"),
            format!(
                "is {count} but no layer has expert tensors (blk.N.ffn_*_exps): llama.cpp stops at load with \"missing tensor 'blk.0.ffn_gate_exps.weight'\""
            ),
        ));
    }
    Ok(())
}

/// Heads, head sizes and the attention projections of layer `il`.
fn attention(k: &Keys, tensors: &Tensors, il: usize, l: &LayerHparams) -> Result<(), ModelError> {
    let (n_head, n_kv) = (l.n_head, l.n_head_kv);
    if n_kv > n_head || n_head % n_kv != 0 {
        return Err(contradicts(
            k.key("attention.head_count_kv"),
            format!(
                "is {n_kv} for layer {il} with head_count {n_head}: grouped-query attention needs head_count to be a multiple of head_count_kv (llama.cpp's graph asserts it in ggml_mul_mat and ggml_flash_attn_ext)"
            ),
        ));
    }
    // a sliding layer's head sizes are already its own (`attention.key_length_swa`, model.rs)
    let (hk, hv) = (l.head_dim_k, l.head_dim_v);
    let widths = |a: u64, b: u64| a.checked_mul(b);
    let check = |name: &str, key: &str, want: &[Option<u64>], said: String| -> Result<(), ModelError> {
        let Some(t) = tensors.get(il, name) else { return Ok(()) };
        if want.iter().flatten().any(|&w| dim(t, 1) == w) {
            return Ok(());
        }
        let want = want.iter().flatten().map(u64::to_string).collect::<Vec<_>>().join(" or ");
        Err(contradicts(k.key(key), format!("{said} {}", wrong_shape(t, 1, &want))))
    };
    let kv_said = format!("is {n_kv} for layer {il} (× key_length {hk})");
    check("attn_k.weight", "attention.head_count_kv", &[widths(hk, n_kv)], kv_said)?;
    let v_said = format!("is {n_kv} for layer {il} (× value_length {hv})");
    check("attn_v.weight", "attention.head_count_kv", &[widths(hv, n_kv)], v_said)?;
    let q = widths(hk, n_head);
    let q_said = format!("is {n_head} for layer {il} (× key_length {hk})");
    check("attn_q.weight", "attention.head_count", &[q, q.and_then(|q| q.checked_mul(2))], q_said)?;
    let qkv = q.and_then(|q| q.checked_add(hk.checked_add(hv)?.checked_mul(n_kv)?));
    let qkv_said = format!("is {n_kv} for layer {il} with head_count {n_head}");
    check("attn_qkv.weight", "attention.head_count_kv", &[qkv], qkv_said)
}

/// The dense FFN width of layer `il` against `ffn_down` (else `ffn_up`).
fn dense_ffn(k: &Keys, tensors: &Tensors, il: usize, l: &LayerHparams) -> Result<(), ModelError> {
    let n_ff = l.n_ff;
    let key = k.key("feed_forward_length");
    let (t, i, fits) = match (tensors.get(il, "ffn_down.weight"), tensors.get(il, "ffn_up.weight")) {
        (Some(t), _) => (t, 0, dim(t, 0) == n_ff),
        (None, Some(t)) => (t, 1, dim(t, 1) == n_ff || Some(dim(t, 1)) == n_ff.checked_mul(2)),
        // a layer named otherwise (T5's enc./dec.) is not checked here
        (None, None) if n_ff > 0 && tensors.by_layer.contains_key(&(il as u64)) => {
            return Err(contradicts(
                key,
                format!(
                    "is {n_ff} for layer {il} but the layer has no feed-forward tensors: llama.cpp stops at load with \"missing tensor 'blk.{il}.ffn_down.weight'\""
                ),
            ))
        }
        (None, None) => return Ok(()),
    };
    if fits {
        return Ok(());
    }
    Err(contradicts(key, format!("is {n_ff} for layer {il} {}", wrong_shape(t, i, &n_ff.to_string()))))
}

/// The recurrent state of layer `il` against its tensors.
fn recurrent(k: &Keys, d: &Declared, tensors: &Tensors, il: usize, l: &LayerHparams) -> Result<(), ModelError> {
    let Some(st) = l.recurrent else { return Ok(()) };
    let (d_conv, d_inner, d_state, n_group) = d.ssm;
    if let Some(t) = tensors.get(il, "ssm_conv1d.weight") {
        if dim(t, 0) != d_conv {
            return Err(contradicts(
                k.key("ssm.conv_kernel"),
                format!("is {d_conv} {}", wrong_shape(t, 0, &d_conv.to_string())),
            ));
        }
        let channels = n_group.checked_mul(d_state).and_then(|x| x.checked_mul(2)).and_then(|x| x.checked_add(d_inner));
        if channels != Some(dim(t, 1)) {
            // the size that breaks it is the largest
            let culprit = [("ssm.inner_size", d_inner), ("ssm.state_size", d_state), ("ssm.group_count", n_group)]
                .into_iter()
                .max_by_key(|&(_, v)| v)
                .map_or("ssm.inner_size", |(key, _)| key);
            return Err(contradicts(
                k.key(culprit),
                format!(
                    "is {d_inner} with ssm.state_size {d_state} and ssm.group_count {n_group} {}",
                    wrong_shape(t, 1, "inner_size + 2 × group_count × state_size")
                ),
            ));
        }
    }
    // Mamba and Jamba: ssm_a is {d_state, d_inner} (Mamba-2's is {1, n_head}, Qwen3-Next's 1-D)
    if let Some(t) = tensors.get(il, "ssm_a").filter(|t| t.ne.len() >= 2 && dim(t, 0) > 1) {
        if dim(t, 0) != d_state {
            return Err(contradicts(
                k.key("ssm.state_size"),
                format!("is {d_state} {}", wrong_shape(t, 0, &d_state.to_string())),
            ));
        }
    }
    let weights = tensors.by_layer.get(&(il as u64)).map_or(Some(0u64), |ts| {
        ts.iter()
            .try_fold(0u64, |a, t| t.ne.iter().try_fold(1u64, |p, &n| p.checked_mul(n)).and_then(|e| a.checked_add(e)))
    });
    let state = st.r.checked_add(st.s);
    match (state, weights) {
        (Some(s), Some(w)) if s <= w => Ok(()),
        _ => Err(contradicts(
            state_key(k, d),
            format!(
                "gives layer {il} a recurrent state of {} elements (n_embd_r {} + n_embd_s {}), more than the layer's own {} weight elements: the sizes contradict the layer's tensors, whose shapes llama.cpp derives from them (\"wrong shape\" at load)",
                state.map_or_else(|| "more than 2^64".to_string(), |s| s.to_string()),
                st.r,
                st.s,
                weights.map_or_else(|| "more than 2^64".to_string(), |w| w.to_string()),
            ),
        )),
    }
}

/// The key that sized the recurrent state (for the message): the largest
/// of the recurrent sizes the file declares.
fn state_key(k: &Keys, d: &Declared) -> String {
    let _ = d;
    ["wkv.head_size", "shortconv.l_cache", "ssm.state_size", "ssm.inner_size", "ssm.conv_kernel", "ssm.group_count"]
        .into_iter()
        .filter_map(|key| Some((k.get(key)?.as_u64()?, key)))
        .max_by_key(|(v, _)| *v)
        .map_or_else(|| k.key("ssm.state_size"), |(_, key)| k.key(key))
}
