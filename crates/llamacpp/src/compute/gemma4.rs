//! Gemma 4's reserve graph, op for op: `llama_model_gemma4::graph`
//! (src/models/gemma4.cpp, ggml-org/llama.cpp@0c1e57098, b11312).
//!
//! What sets it apart from the generic decoder in [`super`]:
//! * per-layer embeddings (E2B/E4B): `build_inp_per_layer` gathers
//!   `per_layer_token_embd` rows for the batch (its own token input) and
//!   `project_per_layer_inputs` adds the projected batch, then a `ggml_cont`
//!   of `n_embd_per_layer × n_tokens × n_layer` f32 that every layer reads a
//!   slice of, so it lives from layer 0 to the last layer;
//! * Q, K and V are RMS-normed per head (V without a weight), K = V on the
//!   full layers of the 26B-A4B (no `attn_v`), and the iSWA `build_attn`
//!   expands Q, K, V in that order (src/llama-graph.cpp);
//! * KV-shared layers compute Q only and attend over an earlier layer's
//!   cache ([`crate::model::LayerHparams::kv_from`]);
//! * MoE layers run the dense MLP and the experts side by side
//!   (`build_moe_ffn` with router logits computed outside, a fused
//!   `ffn_gate_up_exps`, normalised weights and `ffn_down_exps.scale`);
//! * `cparams.embeddings_nextn_masked` is false by default
//!   (src/llama-context.cpp), so the last layer keeps every token; the rows
//!   are gathered after the output norm, which is itself a graph output
//!   (`t_h_nextn`, `llm_graph_result::set_outputs`).

use super::{attention, dense_ffn, Builder, ComputeSetup, Dims, GraphInputs, F32, I32};
use crate::graph::{Device, OpKind, TensorId};
use crate::model::{LayerHparams, LlamaModel};
use vramfit_core::CoreError;

/// `ggml_rms_norm` of a view (a new tensor: a view is never reused in
/// place) times the weight `blk.{il}.{w}` when given.
fn rms_of_view(
    b: &mut Builder,
    x: TensorId,
    ne: [u64; 4],
    il: Option<u32>,
    w: Option<&str>,
) -> Result<TensorId, CoreError> {
    let n = b.fresh("rms_norm", F32, ne, &[x], b.t)?;
    // build_norm names it "norm": pinned to the layer under full offload, as in Builder::norm
    if let (Some(il), Some(_), true) = (il, w, b.full_offload) {
        let dev = b.p.layers[il as usize];
        b.g.pin(n, dev);
    }
    Ok(match w {
        Some(w) => {
            let wt = b.weight(il, w, ne[0] * 4);
            b.inplace("mul", n, &[n, wt])
        }
        None => n,
    })
}

/// `build_inp_per_layer` and `project_per_layer_inputs`: returns the
/// gathered, scaled rows (expanded at once, as the builder does) and the
/// `ggml_cont` every layer slices (built now, reached from layer 0).
fn per_layer_inputs(b: &mut Builder, inp_l: TensorId, ple: u64, nl: u64) -> Result<TensorId, CoreError> {
    let t = b.t;
    let tokens = b.g.input("inp_per_layer_tokens", I32, [t, 1, 1, 1], t * 4);
    let bytes = b.m.tensor("per_layer_token_embd.weight").map(|x| x.bytes).unwrap_or(0);
    let table = b.g.weight("per_layer_token_embd", bytes, Device::Cpu);
    let rows = b.fresh("get_rows", F32, [ple * nl, t, 1, 1], &[table, tokens], t)?;
    b.g.not_offloadable(rows);
    let r3 = b.g.view("reshape_3d", rows);
    let selected = b.fresh("scale", F32, [ple, nl, t, 1], &[r3], t)?;
    b.g.expand(selected);
    // per_layer_model_proj × batch, scaled, reshaped, RMS-normed, added, scaled, permuted, cont
    let proj_w = b.weight(None, "per_layer_model_proj.weight", 0);
    let proj = b.mm(proj_w, inp_l, ple * nl, t)?;
    let proj = b.inplace("scale", proj, &[proj]);
    let p3 = b.g.view("reshape_3d", proj);
    let normed = rms_of_view(b, p3, [ple, nl, t, 1], None, None)?;
    let nw = b.weight(None, "per_layer_proj_norm.weight", ple * 4);
    let normed = b.inplace("mul", normed, &[normed, nw]);
    let sum = b.inplace("add", normed, &[normed, selected]);
    let sum = b.inplace("scale", sum, &[sum]);
    let perm = b.g.view("permute", sum);
    b.fresh("cont", F32, [ple, t, nl, 1], &[perm], t)
}

/// Q (and K, V when the layer has its own cache), normed and roped, then
/// attention and the output projection.
#[allow(clippy::too_many_arguments)]
fn attention_block(
    b: &mut Builder,
    l: &LayerHparams,
    il: u32,
    x: TensorId,
    kv_dev: Device,
    inputs: &GraphInputs,
    s: &ComputeSetup,
    d: &Dims,
) -> Result<TensorId, CoreError> {
    let t = d.t;
    let (hd, nh, nkv) = (l.head_dim_k, l.n_head, l.n_head_kv);
    // full layers rope with the proportional-rope frequency factors
    let freqs = (!l.sliding).then(|| b.weight(None, "rope_freqs.weight", hd * 2));
    let rope = |b: &mut Builder, x: TensorId| -> TensorId {
        let mut srcs = vec![x, inputs.pos];
        srcs.extend(freqs);
        b.inplace("rope", x, &srcs)
    };
    let wq = b.weight(Some(il), "attn_q.weight", 0);
    let qm = b.mm(wq, x, nh * hd, t)?;
    let qv = b.g.view("reshape_q", qm);
    let qn = rms_of_view(b, qv, [hd, nh, t, 1], Some(il), Some("attn_q_norm.weight"))?;
    let q = rope(b, qn);
    let n_kv = if l.sliding { s.n_kv_swa } else { s.n_kv };
    if l.has_kv() {
        let wk = b.weight(Some(il), "attn_k.weight", 0);
        let km = b.mm(wk, x, nkv * hd, t)?;
        // K = V (attention_k_eq_v): no attn_v, V is read from the K projection
        let vm = if b.m.tensor(&format!("blk.{il}.attn_v.weight")).is_some() {
            let wv = b.weight(Some(il), "attn_v.weight", 0);
            b.mm(wv, x, nkv * l.head_dim_v, t)?
        } else {
            km
        };
        let kv = b.g.view("reshape_k", km);
        let kn = rms_of_view(b, kv, [hd, nkv, t, 1], Some(il), Some("attn_k_norm.weight"))?;
        let vv = b.g.view("reshape_v", vm);
        let vn = rms_of_view(b, vv, [l.head_dim_v, nkv, t, 1], None, None)?;
        let k = rope(b, kn);
        // the iSWA build_attn expands Q, K, V in this order
        b.g.expand(q);
        b.g.expand(k);
        b.g.expand(vn);
        return attention(b, l, (q, k, vn), n_kv, kv_dev, inputs, s, d);
    }
    // KV-shared layer: Q against the cache of layer `kv_from` (views, no store);
    // build_attn_mha as for any layer (src/llama-graph.cpp)
    b.g.expand(q);
    let mask = if l.sliding { inputs.mask_swa } else { inputs.mask_full }
        .ok_or_else(|| CoreError::invalid("mask", "no mask"))?;
    let k_cache = b.g.cache("k_cache_shared", 0, kv_dev);
    let v_cache = b.g.cache("v_cache_shared", 0, kv_dev);
    let qp = b.g.view("permute_q", q);
    let kview = b.g.view("k_view", k_cache);
    let vview = b.g.view("v_view", v_cache);
    if s.flash_attn {
        let o = b.fresh("flash_attn_ext", F32, [l.head_dim_v, nh, t, 1], &[qp, kview, vview, mask], t)?;
        return Ok(b.g.view("reshape_o", o));
    }
    let kq = b.fresh("kq", F32, [n_kv, d.t_seq, nh, d.streams], &[kview, qp], t)?;
    let sm = b.inplace("soft_max", kq, &[kq, mask]);
    let kqv = b.fresh("kqv", F32, [l.head_dim_v, d.t_seq, nh, d.streams], &[vview, sm], t)?;
    let p = b.g.view("permute_kqv", kqv);
    let c = b.fresh("kqv_merged_cont", F32, [nh * l.head_dim_v, t, 1, 1], &[p], t)?;
    if !s.offload_kqv {
        b.g.pin(c, Device::Cpu);
    }
    Ok(c)
}

/// `build_moe_ffn` as Gemma 4 calls it: softmax of the given router
/// logits, top-k, normalised weights, fused gate+up, GELU-gated, down with
/// its per-expert scale, weighted and summed.
fn moe(b: &mut Builder, il: u32, x: TensorId, logits: TensorId) -> Result<TensorId, CoreError> {
    let (t, e) = (b.t, b.m.n_embd);
    let ex = b.m.experts.clone().ok_or_else(|| CoreError::invalid("experts", "a router without experts"))?;
    let (n_exp, k, ff) = (ex.count, ex.used, ex.ff);
    let probs = b.inplace("soft_max", logits, &[logits]);
    let sorted = b.fresh("argsort", I32, [n_exp, t, 1, 1], &[probs], t)?;
    let selected = b.g.view("top_k", sorted);
    let pv = b.g.view("reshape_probs", probs);
    let weights = b.fresh("get_rows", F32, [1, k, t, 1], &[pv, selected], t)?;
    b.g.not_offloadable(weights);
    let w2 = b.g.view("reshape_2d", weights);
    let sum = b.fresh("sum_rows", F32, [1, t, 1, 1], &[w2], t)?;
    let sum = b.inplace("clamp", sum, &[sum]);
    let wn = b.fresh("div", F32, [k, t, 1, 1], &[w2, sum], t)?;
    let weights = b.g.view("reshape_3d", wn);
    b.g.expand(weights);
    let xr = b.g.view("reshape_x", x);
    let w_gu = b.weight(Some(il), "ffn_gate_up_exps.weight", 0);
    let gu = b.fresh("mul_mat_id", F32, [2 * ff, k, t, 1], &[w_gu, xr, selected], t)?;
    let gate = b.g.view("gate_view", gu);
    let up = b.g.view("up_view", gu);
    let act = b.fresh("geglu", F32, [ff, k, t, 1], &[gate, up], t)?;
    let w_down = b.weight(Some(il), "ffn_down_exps.weight", 0);
    let mut out = b.fresh("mul_mat_id", F32, [e, k, t, 1], &[w_down, act, selected], t)?;
    if b.m.tensor(&format!("blk.{il}.ffn_down_exps.scale")).is_some() {
        // build_lora_mm_id: the scale repeated over the tokens, gathered, multiplied
        let ws = b.weight(Some(il), "ffn_down_exps.scale", n_exp * 4);
        let sv = b.g.view("reshape_3d", ws);
        let rep = b.fresh("repeat", F32, [1, n_exp, t, 1], &[sv], t)?;
        let g = b.fresh("get_rows", F32, [1, k, t, 1], &[rep, selected], t)?;
        b.g.not_offloadable(g);
        out = b.inplace("mul", out, &[out, g]);
    }
    let out = b.inplace("mul", out, &[out, weights]);
    b.g.expand(out);
    let views: Vec<TensorId> = (0..k).map(|_| b.g.view("expert_view", out)).collect();
    for &v in &views {
        b.g.expand(v);
    }
    let mut sum = if k > 1 { b.fresh("add", F32, [e, t, 1, 1], &[views[0], views[1]], t)? } else { views[0] };
    for &v in views.iter().skip(2) {
        b.g.expand(sum);
        sum = b.inplace("add", sum, &[sum, v]);
    }
    if k == 1 {
        sum = b.fresh("cont", F32, [e, t, 1, 1], &[sum], t)?;
    }
    b.g.expand(sum);
    Ok(sum)
}

/// The feed-forward half of a layer: the dense MLP, and beside it the
/// experts when the layer has a router; returns the layer's output before
/// the per-layer embedding.
fn ffn_block(b: &mut Builder, l: &LayerHparams, il: u32, attn_out: TensorId, d: &Dims) -> Result<TensorId, CoreError> {
    let e = d.e;
    let cur = if b.m.tensor(&format!("blk.{il}.ffn_gate_inp.weight")).is_some() {
        let mlp = b.norm(attn_out, Some(il), true, "ffn_norm.weight", e)?;
        let mlp = dense_ffn(b, il, mlp, l.n_ff, true, true)?;
        let mlp = b.norm(mlp, Some(il), true, "post_ffw_norm_1.weight", e)?;
        let x = b.norm(attn_out, Some(il), true, "pre_ffw_norm_2.weight", e)?;
        // the router reads rms_norm(attn_out) / sqrt(n_embd) × ffn_gate_inp.scale
        let (ty, ne) = b.g.tensors[attn_out].layout;
        let bytes = b.g.tensors[attn_out].bytes;
        let tmp = b.g.op("rms_norm", OpKind::Inplace, ty, ne, bytes, &[attn_out], b.t);
        let tmp = b.inplace("scale", tmp, &[tmp]);
        let rs = b.weight(Some(il), "ffn_gate_inp.scale", e * 4);
        let tmp = b.inplace("mul", tmp, &[tmp, rs]);
        let router = b.weight(Some(il), "ffn_gate_inp.weight", 0);
        let n_exp = b.m.experts.as_ref().map(|x| x.count).unwrap_or(0);
        let logits = b.mm(router, tmp, n_exp, b.t)?;
        let experts = moe(b, il, x, logits)?;
        let experts = b.norm(experts, Some(il), true, "post_ffw_norm_2.weight", e)?;
        b.inplace("add", mlp, &[mlp, experts])
    } else {
        let x = b.norm(attn_out, Some(il), true, "ffn_norm.weight", e)?;
        dense_ffn(b, il, x, l.n_ff, true, true)?
    };
    let cur = b.norm(cur, Some(il), true, "post_ffw_norm.weight", e)?;
    Ok(b.inplace("add", cur, &[cur, attn_out]))
}

/// Every layer, the output norm, the gather of the wanted rows, the head
/// and the final soft-cap; returns the logits (the graph's last node).
pub(super) fn build(
    b: &mut Builder,
    model: &LlamaModel,
    s: &ComputeSetup,
    d: &Dims,
    inputs: &GraphInputs,
    embd: TensorId,
) -> Result<TensorId, CoreError> {
    let e = d.e;
    // build_inp_embd's ggml_build_forward_select expands the token rows at
    // once, before the per-layer rows below are expanded
    b.g.expand(embd);
    let mut inp = b.inplace("scale", embd, &[embd]);
    let nl = model.layers.len() as u64;
    let ple = model
        .tensor("per_layer_proj_norm.weight")
        .and_then(|t| t.ne.first().copied())
        .filter(|_| model.tensor("per_layer_token_embd.weight").is_some());
    let per_layer = match ple {
        Some(p) => Some((p, per_layer_inputs(b, inp, p, nl)?)),
        None => None,
    };
    for (il, l) in model.layers.iter().enumerate() {
        let ilu = il as u32;
        let kv_dev = if s.offload_kqv { b.p.layers[il] } else { Device::Cpu };
        let x = b.norm(inp, Some(ilu), true, "attn_norm.weight", e)?;
        let attn = attention_block(b, l, ilu, x, kv_dev, inputs, s, d)?;
        let wo = b.weight(Some(ilu), "attn_output.weight", 0);
        let cur = b.mm(wo, attn, e, d.t)?;
        let cur = b.norm(cur, Some(ilu), true, "post_attention_norm.weight", e)?;
        let attn_out = b.inplace("add", cur, &[cur, inp]);
        let mut cur = ffn_block(b, l, ilu, attn_out, d)?;
        if let Some((p, pl)) = per_layer {
            let wg = b.weight(Some(ilu), "inp_gate.weight", 0);
            let g = b.mm(wg, cur, p, d.t)?;
            let g = b.inplace("gelu", g, &[g]);
            let slice = b.g.view("per_layer_slice", pl);
            let g = b.inplace("mul", g, &[g, slice]);
            let wp = b.weight(Some(ilu), "proj.weight", 0);
            let pr = b.mm(wp, g, e, d.t)?;
            let pr = b.norm(pr, Some(ilu), true, "post_norm.weight", e)?;
            cur = b.inplace("add", cur, &[cur, pr]);
        }
        if model.tensor(&format!("blk.{il}.layer_output_scale.weight")).is_some() {
            let w = b.weight(Some(ilu), "layer_output_scale.weight", 4);
            cur = b.inplace("mul", cur, &[cur, w]);
        }
        inp = cur;
    }
    let h = b.norm(inp, None, true, "output_norm.weight", e)?;
    b.g.set_output(h); // t_h_nextn
    let ids = inputs.out_ids.ok_or_else(|| CoreError::invalid("inp_out_ids", "missing"))?;
    let rows = b.fresh("get_rows", F32, [e, d.n_out, 1, 1], &[h, ids], d.n_out)?;
    b.g.not_offloadable(rows);
    b.g.set_output(rows); // t_embd
    let w = match model.tensor("output.weight") {
        Some(_) => b.weight(None, "output.weight", 0),
        None => {
            let bytes = model.tensor("token_embd.weight").map(|x| x.bytes).unwrap_or(0);
            b.g.weight("output(tied)", bytes, b.p.output)
        }
    };
    let logits = b.mm(w, rows, model.n_vocab, d.n_out)?;
    // final_logit_softcapping: scale, tanh, scale, all in place
    let logits = b.inplace("scale", logits, &[logits]);
    let logits = b.inplace("tanh", logits, &[logits]);
    let logits = b.inplace("scale", logits, &[logits]);
    b.g.set_output(logits);
    Ok(logits)
}
