//! A Qwen3.5 linear-attention (gated delta-net) layer of the reserve graph,
//! op for op as `llama_model_qwen35::graph::build_layer_attn_linear`
//! (src/models/qwen35.cpp; qwen35moe.cpp is the same) and
//! `llm_build_delta_net_base::build_conv_state` / `build_recurrent_attn`
//! (src/models/delta-net-base.cpp) build it, ggml-org/llama.cpp@0c1e57098
//! (b11312):
//!
//! ```text
//! x      = rms(inp)·attn_norm                          (expanded first)
//! qkv    = attn_qkv·x [conv_dim, T]    z = attn_gate·x [S_v·H_v, T]
//! beta   = sigmoid(ssm_beta·x)         g = softplus(ssm_alpha·x + dt)·a
//! conv_in = concat(get_rows(conv states), qkvᵀ) [d_conv−1+T/n_seqs, conv_dim, n_seqs]
//!          then K copies of its last columns into the conv cache (expanded)
//! state  = get_rows(ssm states) [n_embd_s, n_seqs]    (build_rs, expanded)
//! conv   = silu(ssm_conv(conv_in)) [conv_dim, T/n_seqs, n_seqs]
//! q, k   = scale(rms_norm(view of conv)) (build_gdn_l2_norm); v = view of conv
//! gdn    = ggml_gated_delta_net(q, k, v, g, beta, state, K)
//!          [S_v·H_v, T + K·S_v·n_seqs] f32 (ggml.c: ne = {S_v·H, n_tokens·n_seqs + K·S_v·n_seqs})
//!          then its K state snapshots copied into the cache (expanded)
//! out    = ssm_out · (rms(gdn[:T])·ssm_norm · silu(z))
//! ```
//!
//! `K = n_rs_seq + 1` with speculative rollback (`cparams.n_rs_seq > 0`
//! always takes the fused op); without it llama.cpp takes the fused op
//! with `K = 1` when the backend runs `GGML_OP_GATED_DELTA_NET`
//! (`build_delta_net_fused`, `resolve_fused_ops`), which every backend of
//! b11312 vramfit models (CPU, CUDA) does.

use super::{Builder, ComputeSetup, Dims, F32};
use crate::graph::{Device, TensorId};
use crate::model::{LayerHparams, LlamaModel, RecurrentState};
use vramfit_core::units::product;
use vramfit_core::CoreError;

/// Head geometry of a gated delta-net layer, read from its tensors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct DeltaNetDims {
    /// head size of K and V (`ssm_d_state`; `ssm_norm.weight` is [S_v])
    pub s_v: u64,
    /// value heads (`ssm_dt_rank`; `ssm_a` is [H_v])
    pub h_v: u64,
    /// key heads (`ssm_n_group`): (conv_dim − S_v·H_v) / (2·S_v)
    pub h_k: u64,
    /// channels of the short convolution (`ssm_conv1d.weight` is [d_conv, conv_dim])
    pub conv_dim: u64,
    pub d_conv: u64,
}

/// The layer's geometry when it is a Qwen3.5 gated delta-net layer
/// (`attn_qkv`, `attn_gate`, `ssm_conv1d`, `ssm_norm` and `ssm_a` present,
/// as `llama_model_qwen35::load_arch_tensors` creates them); `None` for
/// other recurrent layers (Mamba, RWKV, …).
pub(super) fn delta_net_dims(model: &LlamaModel, il: u32) -> Option<DeltaNetDims> {
    let t = |s: &str| model.tensor(&format!("blk.{il}.{s}"));
    t("attn_qkv.weight")?;
    t("attn_gate.weight")?;
    let conv = t("ssm_conv1d.weight")?;
    let s_v = *t("ssm_norm.weight")?.ne.first()?;
    let h_v = *t("ssm_a")?.ne.first()?;
    let (d_conv, conv_dim) = (*conv.ne.first()?, *conv.ne.get(1)?);
    let value_dim = s_v.checked_mul(h_v)?;
    let keys = conv_dim.checked_sub(value_dim)?;
    if s_v == 0 || h_v == 0 || d_conv == 0 || keys == 0 || keys % (2 * s_v) != 0 {
        return None;
    }
    Some(DeltaNetDims { s_v, h_v, h_k: keys / (2 * s_v), conv_dim, d_conv })
}

/// Rows of the gated delta-net op's output: the attention scores of the
/// `t` tokens plus `K` state snapshots of `S_v` rows per sequence
/// (`ggml_gated_delta_net`, ggml/src/ggml.c: `ne[1] = n_tokens·n_seqs +
/// K·S_v·n_seqs`); `snapshots` = `K·n_seqs` = `(n_rs_seq + 1)·n_seqs`.
pub(super) fn gdn_rows(t: u64, s_v: u64, snapshots: u64) -> Result<u64, CoreError> {
    product("gated delta-net state rows", &[snapshots, s_v])?
        .checked_add(t)
        .ok_or_else(|| CoreError::invalid("gated delta-net output", "row count overflows"))
}

/// One gated delta-net layer; returns the out-projection (before the
/// residual add, which the layer's FFN part does). `n_seqs`: sequences
/// of the reserve ubatch (`n_seq_max`); `k`: snapshot slots per sequence.
#[allow(clippy::too_many_arguments)]
pub(super) fn gated_delta_block(
    b: &mut Builder,
    ilu: u32,
    st: RecurrentState,
    g: DeltaNetDims,
    inp: TensorId,
    kv_dev: Device,
    d: &Dims,
    (n_seqs, k): (u64, u64),
) -> Result<TensorId, CoreError> {
    let (t, e) = (d.t, d.e);
    let n_seqs = n_seqs.max(1);
    let t_seq = t.div_ceil(n_seqs);
    let value_dim = product("value_dim", &[g.s_v, g.h_v])?;
    // the conv (R) and delta (S) states of every sequence and snapshot slot
    let r_all = b.g.cache("rs_conv", product("conv state", &[st.r, 4, n_seqs, k])?, kv_dev);
    let s_all = b.g.cache("rs_ssm", product("ssm state", &[st.s, 4, n_seqs, k])?, kv_dev);
    let x = b.norm(inp, Some(ilu), true, "attn_norm.weight", e)?;
    b.g.expand(x);
    // build_qkvz, beta, alpha/gate (not expanded yet: pulled in by the ops below)
    let w_qkv = b.weight(Some(ilu), "attn_qkv.weight", 0);
    let qkv = b.mm(w_qkv, x, g.conv_dim, t)?;
    let w_gate = b.weight(Some(ilu), "attn_gate.weight", 0);
    let z = b.mm(w_gate, x, value_dim, t)?;
    let w_beta = b.weight(Some(ilu), "ssm_beta.weight", 0);
    let beta = b.mm(w_beta, x, g.h_v, t)?;
    let beta = b.inplace("sigmoid", beta, &[beta]);
    let w_alpha = b.weight(Some(ilu), "ssm_alpha.weight", 0);
    let alpha = b.mm(w_alpha, x, g.h_v, t)?;
    let dt = b.weight(Some(ilu), "ssm_dt.bias", 0);
    let alpha = b.inplace("add", alpha, &[alpha, dt]);
    let alpha = b.inplace("softplus", alpha, &[alpha]);
    let a = b.weight(Some(ilu), "ssm_a", 0);
    let gate = b.inplace("mul", alpha, &[alpha, a]);
    // build_conv_state: build_rs gathers the conv states, the concat with
    // the transposed projection, K copies of its tail back to the cache
    let conv_states = b.fresh("get_rows", F32, [st.r, n_seqs, 1, 1], &[r_all], n_seqs)?;
    b.g.expand(conv_states);
    let qkv_t = b.g.view("transpose", qkv);
    let conv_w = product("conv_input", &[g.d_conv - 1 + t_seq])?;
    let conv_in = b.fresh("concat", F32, [conv_w, g.conv_dim, n_seqs, 1], &[conv_states, qkv_t], t)?;
    for _ in 0..k {
        let tail = b.g.view("conv_state_last", conv_in);
        let dst = b.g.view("conv_state_update", r_all);
        let c = b.g.store("cpy", tail, dst, &[]);
        b.g.expand(c);
    }
    // build_rs for the delta state
    let state = b.fresh("get_rows", F32, [st.s, n_seqs, 1, 1], &[s_all], n_seqs)?;
    b.g.expand(state);
    let state = b.g.view("state_predelta", state);
    let conv = b.weight(Some(ilu), "ssm_conv1d.weight", 0);
    let conv = b.fresh("ssm_conv", F32, [g.conv_dim, t_seq, n_seqs, 1], &[conv_in, conv], t)?;
    let conv = b.inplace("silu", conv, &[conv]);
    let l2 = |b: &mut Builder| -> Result<TensorId, CoreError> {
        // build_gdn_l2_norm (src/models/models.h): scale(rms_norm(x))
        let v = b.g.view("view", conv);
        let n = b.fresh("rms_norm", F32, [g.s_v, g.h_k, t_seq, n_seqs], &[v], t)?;
        Ok(b.inplace("scale", n, &[n]))
    };
    let q = l2(b)?;
    let kk = l2(b)?;
    let v = b.g.view("v_conv", conv);
    let rows = gdn_rows(t, g.s_v, product("state snapshots", &[k, n_seqs])?)?;
    let gdn = b.fresh("gated_delta_net", F32, [value_dim, rows, 1, 1], &[q, kk, v, gate, beta, state], t)?;
    let snaps = b.g.view("view", gdn);
    let dst = b.g.view("view", s_all);
    let c = b.g.store("cpy", snaps, dst, &[]);
    b.g.expand(c);
    // build_norm_gated on the scores, then the out-projection
    let out = b.g.view("attn_output", gdn);
    let n = b.fresh("rms_norm", F32, [g.s_v, g.h_v, t_seq, n_seqs], &[out], t)?;
    let w_norm = b.weight(Some(ilu), "ssm_norm.weight", 0);
    let n = b.inplace("mul", n, &[n, w_norm]);
    let zs = b.inplace("silu", z, &[z]);
    let y = b.inplace("mul", n, &[n, zs]);
    let w_out = b.weight(Some(ilu), "ssm_out.weight", 0);
    b.mm(w_out, y, e, t)
}

/// A Qwen3.5 gated delta-net layer, then its FFN as in the attention
/// layers (`llama_model_qwen35::graph`: both kinds share the residual,
/// post-norm and FFN part); returns the layer's output. The reserve
/// ubatch has `n_seq_max` sequences ([`ComputeSetup::rs_seqs`]) and `K =
/// n_rs_seq + 1` snapshot slots per sequence.
pub(super) fn gdn_layer(
    b: &mut Builder,
    model: &LlamaModel,
    (l, ilu, st, g): (&LayerHparams, u32, RecurrentState, DeltaNetDims),
    inp: TensorId,
    kv_dev: Device,
    d: &Dims,
    s: &ComputeSetup,
) -> Result<TensorId, CoreError> {
    let n_seqs = if s.rs_seqs > 0 { s.rs_seqs } else { d.streams.max(1) };
    let k = (s.rs_snapshots / n_seqs).saturating_add(1);
    let o = gated_delta_block(b, ilu, st, g, inp, kv_dev, d, (n_seqs, k))?;
    super::ffn_residual(b, model, l, ilu, o, inp, d)
}

/// The `approximate` flag of a Qwen3.5 graph: none for the dense one
/// (within 0.01 % of b11312 on six measured runs); the MoE one measured
/// 3.93 % under at `-np 1` on Qwen3.5-35B-A3B (exact at `-np 4`), the
/// missing 3 MiB not found (docs/gguf.md, Limits).
pub(super) fn moe_gap(model: &LlamaModel) -> Option<String> {
    model.experts.as_ref().map(|_| {
        format!(
            "{}'s gated delta-net hybrid rebuilt op for op, its MoE trunk measured up to 4 % under (docs/gguf.md)",
            model.arch
        )
    })
}

/// The end of a Qwen3.5 trunk (src/models/qwen35.cpp and qwen35moe.cpp,
/// `graph::graph`): with `cparams.embeddings_nextn_masked` false (its
/// default, llama_context's constructor) the last layer keeps every token;
/// the output norm runs over all of them (`t_h_nextn`, an output:
/// `llm_graph_result::set_outputs`), then `get_rows(inp_out_ids)` (`t_embd`,
/// an output) and the LM head over the kept rows. Returns the logits.
pub(super) fn h_nextn_head(
    b: &mut Builder,
    model: &LlamaModel,
    placement: &crate::placement::Placement,
    inp: TensorId,
    d: &Dims,
    out_ids: Option<TensorId>,
) -> Result<TensorId, CoreError> {
    let h = b.norm(inp, None, true, "output_norm.weight", d.e)?;
    b.g.set_output(h);
    let rows = match out_ids {
        Some(ids) => {
            let r = b.fresh("get_rows", F32, [d.e, d.n_out, 1, 1], &[h, ids], d.n_out)?;
            b.g.not_offloadable(r);
            b.g.set_output(r);
            r
        }
        None => h,
    };
    let w = if model.tensor("output.weight").is_some() {
        b.weight(None, "output.weight", 0)
    } else {
        let bytes = model.tensor("token_embd.weight").map(|x| x.bytes).unwrap_or(0);
        b.g.weight("output(tied)", bytes, placement.output)
    };
    let n = if out_ids.is_some() { d.n_out } else { d.t };
    let logits = b.mm(w, rows, model.n_vocab, n)?;
    b.g.set_output(logits);
    Ok(logits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compute::{compute_buffers, ComputeSetup, GraphEra};
    use crate::ggml::GgmlType;
    use crate::model::{slot_of, GraphFamily, LayerHparams, TensorInfo};
    use crate::placement::Placement;
    use vramfit_core::Explanation;

    /// One Qwen3.5 gated delta-net layer, n_embd 64: S_v 16, H_v 4 (value
    /// dim 64), H_k 2 (key dim 32), conv_dim 2·32 + 64 = 128, d_conv 4
    /// (conv state r = 3·128 = 384, delta state s = 16·16·4 = 1024 values),
    /// SwiGLU FFN of 32; f16 matrices, f32 vectors (qwen35.cpp load_block_trunk).
    fn one_gdn_layer() -> LlamaModel {
        let (e, f16, f32) = (64u64, GgmlType::F16, GgmlType::F32);
        let mut off = 0u64;
        let mut tensors = Vec::new();
        let mut t = |name: &str, ty: GgmlType, ne: &[u64]| {
            let bytes = ty.nbytes(ne).unwrap();
            tensors.push(TensorInfo {
                name: name.into(),
                slot: slot_of(name),
                ty,
                ne: ne.to_vec(),
                bytes,
                offset: off,
            });
            off += bytes.next_multiple_of(32);
        };
        t("token_embd.weight", f16, &[e, 32]);
        for (n, ty, ne) in [
            ("attn_norm.weight", f32, vec![e]),
            ("post_attention_norm.weight", f32, vec![e]),
            ("attn_qkv.weight", f16, vec![e, 128]),
            ("attn_gate.weight", f16, vec![e, 64]),
            ("ssm_conv1d.weight", f32, vec![4, 128]),
            ("ssm_dt.bias", f32, vec![4]),
            ("ssm_a", f32, vec![4]),
            ("ssm_beta.weight", f16, vec![e, 4]),
            ("ssm_alpha.weight", f16, vec![e, 4]),
            ("ssm_norm.weight", f32, vec![16]),
            ("ssm_out.weight", f16, vec![64, e]),
            ("ffn_gate.weight", f16, vec![e, 32]),
            ("ffn_up.weight", f16, vec![e, 32]),
            ("ffn_down.weight", f16, vec![32, e]),
        ] {
            t(&format!("blk.0.{n}"), ty, &ne);
        }
        t("output_norm.weight", f32, &[e]);
        t("output.weight", f16, &[e, 32]);
        let rec = LayerHparams {
            n_head: 4,
            n_head_kv: 0,
            head_dim_k: 16,
            head_dim_v: 16,
            n_ff: 32,
            sliding: false,
            recurrent: Some(RecurrentState { r: 384, s: 1024 }),
            kv_from: None,
        };
        LlamaModel {
            name: "q".into(),
            arch: "qwen35".into(),
            n_layer: 1,
            n_embd: e,
            n_vocab: 32,
            n_ctx_train: 4096,
            layers: vec![rec],
            n_swa: 0,
            experts: None,
            causal: true,
            family: GraphFamily::Sequential,
            fused_qkv: false,
            qk_norm: true,
            gated_ffn: true,
            tied_output: false,
            mla: false,
            tensors,
            notes: Vec::new(),
            nextn: None,
        }
    }

    fn cpu_buffer(m: &LlamaModel, rs_snapshots: u64) -> u64 {
        let p = Placement {
            layers: vec![Device::Cpu],
            output: Device::Cpu,
            offloaded: 0,
            host_expert_layers: 0,
            overrides: Default::default(),
            explain: Explanation::new("test"),
        };
        let s = ComputeSetup {
            n_tokens: 8,
            f16_fa_mask: true,
            n_outputs: 4,
            n_kv: 256,
            n_kv_swa: 0,
            streams: 4,
            flash_attn: true,
            offload_kqv: true,
            op_offload: true,
            type_k: GgmlType::F16,
            type_v: GgmlType::F16,
            era: GraphEra::Current,
            gpus: 0,
            pipeline_copies: 1,
            cpu_repack: false,
            v_less: false,
            embd_input: false,
            rs_snapshots,
            rs_seqs: 4,
        };
        let c = compute_buffers(m, &p, s).unwrap();
        c.buffers.iter().filter(|b| b.device == Device::Cpu).map(|b| b.bytes).sum()
    }

    /// -np 4, 8 tokens (2 per sequence), n_rs_seq = 3 (K = 4): when
    /// ggml_gated_delta_net runs (delta-net-base.cpp build_recurrent_attn)
    /// these are live at once, f32:
    /// * its output [64, 8 + 4·4·16 = 264]: 64·264·4 = 67,584 B;
    /// * its sources: the gathered delta states 1024·4 seqs·4 = 16,384 B
    ///   (build_rs), the convolved q/k/v silu(ssm_conv) 128·2·4·4 = 4,096 B,
    ///   the l2-normed q and k 16·2·2·4·4 = 1,024 B each;
    /// * the layer input and its norm (read again by attn_gate after the
    ///   op) 64·8·4 = 2,048 B each:
    ///
    /// 67,584 + 16,384 + 4,096 + 2·1,024 + 2·2,048 = 94,208 B at least.
    /// Without rollback (K = 1) the output is 64·(8 + 4·16)·4 = 18,432 B,
    /// 49,152 B less, and the buffer at least 45,056 B.
    #[test]
    fn gdn_snapshots_and_their_sources_are_live_at_the_peak() {
        let m = one_gdn_layer();
        assert_eq!(delta_net_dims(&m, 0), Some(DeltaNetDims { s_v: 16, h_v: 4, h_k: 2, conv_dim: 128, d_conv: 4 }));
        let rollback = cpu_buffer(&m, 3 * 4);
        let plain = cpu_buffer(&m, 0);
        assert!(rollback >= 94_208, "{rollback}");
        assert!(plain >= 45_056, "{plain}");
        assert!(rollback - plain >= 49_152, "{rollback} - {plain}");
        // a layer without the gated delta-net tensors keeps the generic recurrent block
        let mut mamba = m.clone();
        mamba.tensors.retain(|t| t.name != "blk.0.ssm_a");
        assert_eq!(delta_net_dims(&mamba, 0), None);
    }

    /// Qwen3.5-35B-A3B at `-np 4 --spec-type draft-mtp` (n_rs_seq = 3,
    /// K = 4), ubatch 512: S_v = 128, H_v = 32, so the op's output is
    /// [4096, 512 + 4·4·128 = 2560] f32 = 4096·2560·4 = 41,943,040 B
    /// (40 MiB), of which the snapshots are 2048 rows = 32 MiB
    /// (ggml.c `ggml_gated_delta_net`; delta-net-base.cpp `build_recurrent_attn`).
    #[test]
    fn gdn_output_rows_carry_k_snapshots_per_sequence() {
        assert_eq!(gdn_rows(512, 128, 4 * 4).unwrap(), 2560);
        assert_eq!(2560u64 * 4096 * 4, 41_943_040);
        // without rollback (K = 1), -np 1: 512 + 128
        assert_eq!(gdn_rows(512, 128, 1).unwrap(), 640);
        assert!(gdn_rows(1, u64::MAX, 2).is_err());
    }
}
