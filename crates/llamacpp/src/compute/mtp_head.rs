//! The reserve graph of an MTP context (`LLM_GRAPH_TYPE_DECODER_MTP`,
//! llama-server's `--spec-type draft-mtp`), op for op as
//! `llama_model_qwen35::graph_mtp` builds it (src/models/qwen35.cpp,
//! ggml-org/llama.cpp@0c1e57098, b11312):
//!
//! ```text
//! tok  = get_rows(token_embd, tokens)          h = input [n_embd, T]
//! x    = eh_proj · concat(rms(tok)·enorm, rms(h)·hnorm)
//! attention block (gated query: attn_q gives Q and its gate; Q/K norms,
//!   RoPE, the MTP KV cache), · sigmoid(gate), attn_output, + x
//! FFN block (post_attention_norm, SwiGLU or MoE), + residual
//! h_nextn = rms(·)·shared_head_norm (an output, kept), get_rows(out_ids)
//! logits = output · h_nextn[out_ids]
//! ```
//!
//! A child of [`super`], so it builds with the same [`super::Builder`] and
//! pieces (inputs, attention, FFNs) as the trunk's graph. The model it is
//! given is the head's view: its layer 0 is the (first) NextN layer.

use super::{
    attention, dense_ffn, graph_inputs, moe_ffn, Builder, ComputeBuffer, ComputeBuffers, ComputeSetup, Dims, F32,
};
use crate::graph::{Device, Graph};
use crate::model::{GraphFamily, LlamaModel};
use crate::placement::{Placement, CPU_ALIGNMENT, CUDA_ALIGNMENT};
use vramfit_core::units::product;
use vramfit_core::CoreError;

/// Build, schedule and allocate the MTP head's reserve graph: `model` is
/// the head's view (layer 0 = the NextN layer, `blk.0.*` tensors), `s` the
/// MTP context's setup (`n_outputs` = its `n_outputs_max`).
pub fn mtp_head_buffers(
    model: &LlamaModel,
    placement: &Placement,
    s: ComputeSetup,
) -> Result<ComputeBuffers, CoreError> {
    vramfit_core::units::check_size("micro-batch tokens", s.n_tokens, 1 << 20)?;
    let l = model.layers.first().ok_or_else(|| CoreError::invalid("nextn_predict_layers", "no NextN layer"))?;
    let full_offload = placement.layers.iter().all(|d| *d != Device::Cpu) && placement.output != Device::Cpu;
    let t = s.n_tokens;
    let mut b = Builder { g: Graph::new(), m: model, p: placement, full_offload, cpu_repack: s.cpu_repack, t };
    let streams = s.streams.max(1);
    let d = Dims {
        t,
        n_out: s.n_outputs.clamp(1, t.max(1)),
        t_seq: t.div_ceil(streams),
        e: model.n_embd,
        streams,
        current: true,
        rms: true,
        causal: true,
        v_trans: !s.flash_attn,
    };
    let e = d.e;
    // tokens → get_rows(token_embd): the ubatch of the reserve carries tokens
    let (tok, inputs) = graph_inputs(&mut b, model, &s, &d)?;
    let h = b.g.input("mtp_h_input", F32, [e, t, 1, 1], product("mtp_h_input", &[e, t, 4])?);
    let h_norm = b.norm(h, Some(0), true, "nextn.hnorm.weight", e)?;
    let e_norm = b.norm(tok, Some(0), true, "nextn.enorm.weight", e)?;
    let concat = b.fresh("concat", F32, [2 * e, t, 1, 1], &[e_norm, h_norm], t)?;
    let eh = b.weight(Some(0), "nextn.eh_proj.weight", 0);
    let x0 = b.mm(eh, concat, e, t)?;
    let x = b.norm(x0, Some(0), true, "attn_norm.weight", e)?;
    let (q, k, v, gate) = head_qkv(&mut b, model, 0, x, inputs.pos, &d)?;
    let kv_dev = if s.offload_kqv { placement.layers[0] } else { Device::Cpu };
    let mut cur = attention(&mut b, l, (q, k, v), s.n_kv, kv_dev, &inputs, &s, &d)?;
    if let Some(g) = gate {
        let sg = b.inplace("sigmoid", g, &[g]);
        cur = b.inplace("mul", sg, &[cur, sg]);
    }
    let wo = b.weight(Some(0), "attn_output.weight", 0);
    let o = b.mm(wo, cur, e, t)?;
    let res = b.inplace("add", o, &[o, x0]);
    let post = if model.tensor("blk.0.post_attention_norm.weight").is_some() {
        "post_attention_norm.weight"
    } else {
        "ffn_norm.weight"
    };
    let x2 = b.norm(res, Some(0), true, post, e)?;
    let f = match &model.experts {
        Some(ex) if model.tensor("blk.0.ffn_gate_inp.weight").is_some() => {
            moe_ffn(&mut b, 0, x2, ex.count, ex.used, ex.ff, ex.shared, ex.shared_ff, true)?
        }
        _ => dense_ffn(&mut b, 0, x2, l.n_ff, true, true)?,
    };
    let out = b.inplace("add", f, &[f, res]);
    // shared_head_norm, else the output norm (il = -1: not pinned to the layer)
    let norm_name = if model.tensor("blk.0.nextn.shared_head_norm.weight").is_some() {
        "blk.0.nextn.shared_head_norm.weight"
    } else {
        "output_norm.weight"
    };
    let h_nextn = b.norm(out, None, true, norm_name, e)?;
    b.g.set_output(h_nextn);
    let ids = inputs.out_ids.ok_or_else(|| CoreError::invalid("inp_out_ids", "missing"))?;
    let rows = b.fresh("get_rows", F32, [e, d.n_out, 1, 1], &[h_nextn, ids], d.n_out)?;
    b.g.not_offloadable(rows);
    let head = if model.tensor("output.weight").is_some() {
        b.weight(None, "output.weight", 0)
    } else {
        let bytes = model.tensor("token_embd.weight").map(|x| x.bytes).unwrap_or(0);
        b.g.weight("output(tied)", bytes, placement.output)
    };
    let logits = b.fresh("mul_mat", F32, [model.n_vocab, d.n_out, 1, 1], &[head, rows], d.n_out)?;
    b.g.set_output(logits);
    b.g.expand(logits);
    b.g.schedule(s.gpus > 0, s.op_offload);
    let sizes = b.g.allocate(
        &|d| match d {
            Device::Cpu => CPU_ALIGNMENT,
            Device::Gpu(_) => CUDA_ALIGNMENT,
        },
        s.pipeline_copies.max(1),
    )?;
    let exact = crate::mtp::MTP_ARCHS.iter().any(|(a, exact)| *a == model.arch && *exact)
        && model.family == GraphFamily::Sequential;
    Ok(ComputeBuffers {
        buffers: sizes.into_iter().map(|(device, bytes)| ComputeBuffer { device, bytes }).collect(),
        nodes: b.g.nodes().len() as u64,
        approximate: (!exact).then(|| {
            format!(
                "the MTP head of {} built as Qwen3.5's (its MoE shared-expert gate and attention biases left out)",
                model.arch
            )
        }),
    })
}

/// Q (and its gate), K and V of the NextN layer: `build_qkv(…, reshape =
/// false)` gives the three projections; a query projection twice the
/// heads' width carries the gate (Qwen3.5's `attn_output_gate`: Q views
/// the first half of each head's row, the gate the second, made
/// contiguous); Q and K are RMS-normed per head when the norms exist
/// (a norm of a view is a new tensor) and roped in place.
#[allow(clippy::type_complexity)]
pub(super) fn head_qkv(
    b: &mut Builder,
    model: &LlamaModel,
    il: u32,
    x: usize,
    pos: usize,
    d: &Dims,
) -> Result<(usize, usize, usize, Option<usize>), CoreError> {
    let l = &model.layers[il as usize];
    let t = d.t;
    let (hd, nh, nkv) = (l.head_dim_k, l.n_head, l.n_head_kv);
    let q_width =
        model.tensor(&format!("blk.{il}.attn_q.weight")).and_then(|w| w.ne.get(1).copied()).unwrap_or(nh * hd);
    let gated = q_width == 2 * nh * hd;
    let wq = b.weight(Some(il), "attn_q.weight", 0);
    let qf = b.mm(wq, x, q_width, t)?;
    let qf = b.bias(Some(il), "attn_q.bias", qf);
    let wk = b.weight(Some(il), "attn_k.weight", 0);
    let km = b.mm(wk, x, l.k_width(), t)?;
    let km = b.bias(Some(il), "attn_k.bias", km);
    let wv = b.weight(Some(il), "attn_v.weight", 0);
    let vm = b.mm(wv, x, l.v_width(), t)?;
    let vm = b.bias(Some(il), "attn_v.bias", vm);
    let qv = b.g.view("q_view", qf);
    let kv = b.g.view("reshape_k", km);
    let normed = |b: &mut Builder, v: usize, heads: u64, w: &str| -> Result<usize, CoreError> {
        if model.tensor(&format!("blk.{il}.{w}")).is_none() {
            // no per-head norm: RoPE of a view allocates anew
            return b.fresh("rope", F32, [hd, heads, t, 1], &[v, pos], t);
        }
        let n = b.fresh("rms_norm", F32, [hd, heads, t, 1], &[v], t)?;
        let wn = b.weight(Some(il), w, 4 * hd);
        let n = b.inplace("mul", n, &[n, wn]);
        Ok(b.inplace("rope", n, &[n, pos]))
    };
    let q = normed(b, qv, nh, "attn_q_norm.weight")?;
    let gate = if gated {
        let gv = b.g.view("gate_view", qf);
        Some(b.fresh("cont_gate", F32, [nh * hd, t, 1, 1], &[gv], t)?)
    } else {
        None
    };
    let k = normed(b, kv, nkv, "attn_k_norm.weight")?;
    let v = b.g.view("reshape_v", vm);
    Ok((q, k, v, gate))
}
