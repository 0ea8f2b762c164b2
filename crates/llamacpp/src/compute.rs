//! Compute buffers: llama.cpp's worst-case graph, rebuilt op by op and
//! handed to the allocator replica in [`crate::graph`].
//!
//! At context creation llama.cpp reserves the graph of one full
//! micro-batch (`n_tokens = min(n_ctx, n_ubatch)`, `n_outputs_max` outputs)
//! against a full KV cache (`n_kv` = the cache's cells), and sizes each
//! backend's compute buffer to what `ggml_gallocr` needs for it
//! (`llama_context::graph_reserve` → `ggml_backend_sched_reserve`). The
//! builders below create the same tensors in the same order as
//! `llm_build_llama` / `llm_build_gptneox` and `llm_graph_context::
//! build_attn` / `build_ffn` / `build_moe_ffn` (`src/llama-graph.cpp`,
//! `src/models/*.cpp`): what matters for memory is each tensor's size, its
//! sources and where `ggml_build_forward_expand` is called, since that
//! fixes the execution order and so the allocator's reuse.
//!
//! Two graph eras are modelled, because llama.cpp changed how the KV cache
//! is written in 2025: [`GraphEra::Legacy`] stores K/V with `ggml_cpy`
//! into cache views and copies fused-QKV slices with `ggml_cont`;
//! [`GraphEra::Current`] uses `ggml_set_rows` with row-index inputs (for a
//! transposed V cache one index per value: `n_tokens × n_embd_v_gqa` i64),
//! RoPEs fused-QKV views directly, expands V before K and uses the fused
//! `swiglu` op. Both gather the output rows in the last layer
//! (`inp_out_ids`, kept even when every token is an output, PR #14275).
//! How many rows it keeps depends on the build: every token of the
//! micro-batch up to llama.cpp PR #23861, llama-server's `n_outputs_max`
//! (its slots) since ([`crate::build::reserved_outputs`]).
//!
//! Families other than dense/MoE attention decoders (recurrent state
//! layers, MLA, encoders) are built from the same pieces with the sizes of
//! their main tensors; the result says when it is such an approximation.

mod gemma4;

use crate::ggml::GgmlType;
use crate::graph::{Device, Graph, OpKind, TensorId};
use crate::model::{GraphFamily, LayerHparams, LlamaModel, RecurrentState};
use crate::placement::{Placement, CPU_ALIGNMENT, CUDA_ALIGNMENT};
use serde::{Deserialize, Serialize};
use vramfit_core::units::product;
use vramfit_core::CoreError;

mod gated_delta;
mod mtp_head;
pub use mtp_head::mtp_head_buffers;

const F32: u8 = 0;
const F16: u8 = 1;
const I32: u8 = 2;
const I64: u8 = 3;

/// `GGML_KQ_MASK_PAD`: the mask's token dimension is padded to this.
pub const KQ_MASK_PAD: u64 = 64;

/// Which llama.cpp graph code the estimate follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum GraphEra {
    /// KV stores with `ggml_set_rows` (llama.cpp since mid-2025)
    #[default]
    Current,
    /// KV stores with `ggml_cpy` into cache views (llama.cpp up to mid-2025)
    Legacy,
}

/// What the reserve graph depends on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ComputeSetup {
    /// tokens of the reserved micro-batch: `min(n_ctx, n_ubatch)`
    pub n_tokens: u64,
    /// with flash attention the KQ mask is reserved in f16 directly
    /// ([`crate::build::F16_FA_MASK`]); else an f32 mask cast to f16
    pub f16_fa_mask: bool,
    /// rows of logits the reserve graph keeps (`n_outputs_max`, at most
    /// `n_tokens`): see [`crate::build::reserved_outputs`]
    pub n_outputs: u64,
    /// KV cells attended per stream by full-attention layers
    pub n_kv: u64,
    /// KV cells per stream of sliding-window layers
    pub n_kv_swa: u64,
    /// KV streams (sequences with their own cache)
    pub streams: u64,
    pub flash_attn: bool,
    pub offload_kqv: bool,
    /// a GPU may run host-weight ops of ≥ 32 rows (`--no-op-offload` turns it off)
    pub op_offload: bool,
    pub type_k: GgmlType,
    pub type_v: GgmlType,
    pub era: GraphEra,
    /// GPU backends in the scheduler (0: a CPU-only build)
    pub gpus: u32,
    /// copies of each input a pipeline-parallel scheduler keeps (1: none;
    /// llama.cpp enables it with several GPUs and every layer offloaded)
    pub pipeline_copies: u32,
    /// the host CPU repacks Q4_0/Q4_K/IQ4_NL/MXFP4 matrices (ops reading
    /// them then stay on the CPU); see `placement::cpu_repacked`
    pub cpu_repack: bool,
    /// no V cache (an MLA file under a build from
    /// [`crate::build::V_LESS_MLA`]): V is a view of the K cache
    pub v_less: bool,
    /// the graph reserves the f32 embeddings input beside the token path
    /// (builds from [`crate::build::EMBD_INPUT`])
    pub embd_input: bool,
    /// extra recurrent states the gated delta-net op writes beside its
    /// output: `n_rs_seq × sequences` (`build_recurrent_attn` with
    /// `n_rs_seq > 0`: `ggml_gated_delta_net(…, K = n_rs_seq + 1)` keeps K
    /// snapshots per sequence, src/models/delta-net-base.cpp); 0 without
    /// speculative rollback ([`crate::mtp::n_rs_seq`])
    pub rs_snapshots: u64,
    /// sequences of the reserve ubatch of a recurrent model: `n_seq_max`
    /// (`llama_context::sched_reserve` reserves `n_tokens / n_seq_max`
    /// tokens for each of `n_seq_max` sequences, whether the KV cache is
    /// unified or not); 0 reads as [`Self::streams`]
    pub rs_seqs: u64,
}

/// Compute buffer of one backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeBuffer {
    pub device: Device,
    pub bytes: u64,
}

/// Result of the reserve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeBuffers {
    pub buffers: Vec<ComputeBuffer>,
    /// nodes in the reserved graph
    pub nodes: u64,
    /// the graph is built from the main tensor sizes of a family vramfit
    /// does not replicate op for op (recurrent, MLA, encoder)
    pub approximate: Option<String>,
}

struct Builder<'a> {
    g: Graph,
    m: &'a LlamaModel,
    p: &'a Placement,
    full_offload: bool,
    cpu_repack: bool,
    t: u64,
}

fn f32_bytes(what: &str, dims: &[u64]) -> Result<u64, CoreError> {
    let mut f = dims.to_vec();
    f.push(4);
    product(what, &f)
}

impl<'a> Builder<'a> {
    fn weight(&mut self, il: Option<u32>, suffix: &str, fallback: u64) -> TensorId {
        let (info, mut dev) = match il {
            Some(il) => (self.m.tensor(&format!("blk.{il}.{suffix}")), self.p.layers[il as usize]),
            None => (self.m.tensor(suffix), self.p.output),
        };
        if let Some(t) = info {
            dev = self.p.tensor_device(t); // --n-cpu-moe keeps expert stacks on the host
        }
        let bytes = info.map(|t| t.bytes).unwrap_or(fallback);
        let w = self.g.weight("weight", bytes, dev);
        if self.cpu_repack && dev == Device::Cpu && info.is_some_and(crate::placement::cpu_repacked) {
            self.g.tensors[w].repacked = true;
        }
        w
    }

    /// `ggml_add(x, bias)` when the layer has the bias tensor (in place; a
    /// host bias still decides where the add runs)
    fn bias(&mut self, il: Option<u32>, suffix: &str, x: TensorId) -> TensorId {
        let present = match il {
            Some(il) => self.m.tensor(&format!("blk.{il}.{suffix}")).is_some(),
            None => self.m.tensor(suffix).is_some(),
        };
        if !present {
            return x;
        }
        let w = self.weight(il, suffix, 0);
        self.inplace("add", x, &[x, w])
    }

    fn fresh(
        &mut self,
        name: &'static str,
        ty: u8,
        ne: [u64; 4],
        srcs: &[TensorId],
        rows: u64,
    ) -> Result<TensorId, CoreError> {
        let el = product(name, &[ne[0], ne[1], ne[2], ne[3]])?;
        let bytes = product(
            name,
            &[
                el,
                if ty == F16 {
                    2
                } else if ty == I64 {
                    8
                } else {
                    4
                },
            ],
        )?;
        Ok(self.g.op(name, OpKind::Fresh, ty, ne, bytes, srcs, rows))
    }

    fn inplace(&mut self, name: &'static str, like: TensorId, srcs: &[TensorId]) -> TensorId {
        let (ty, ne) = self.g.tensors[like].layout;
        let bytes = self.g.tensors[like].bytes;
        let rows = self.g.tensors[like].rows;
        self.g.op(name, OpKind::Inplace, ty, ne, bytes, srcs, rows)
    }

    /// `ggml_mul_mat(w, x)` → f32 [out, cols]
    fn mm(&mut self, w: TensorId, x: TensorId, out: u64, cols: u64) -> Result<TensorId, CoreError> {
        self.fresh("mul_mat", F32, [out, cols, 1, 1], &[w, x], cols)
    }

    /// `build_norm`: rms_norm/norm (pinned to the layer under full offload, llama.cpp's "norm" callback) then × weight
    fn norm(
        &mut self,
        x: TensorId,
        il: Option<u32>,
        rms: bool,
        w_name: &str,
        width: u64,
    ) -> Result<TensorId, CoreError> {
        let n = if rms {
            let (ty, ne) = self.g.tensors[x].layout;
            let bytes = self.g.tensors[x].bytes;
            self.g.op("rms_norm", OpKind::Inplace, ty, ne, bytes, &[x], self.t)
        } else {
            let ne = self.g.tensors[x].layout.1;
            self.fresh("norm", F32, ne, &[x], self.t)?
        };
        if let Some(il) = il {
            if self.full_offload {
                let d = self.p.layers[il as usize];
                self.g.pin(n, d);
            }
        }
        let w = self.weight(il, w_name, width * 4);
        let out = self.inplace("mul", n, &[n, w]);
        if !rms {
            let b = self.weight(il, w_name, width * 4);
            return Ok(self.inplace("add", out, &[out, b]));
        }
        Ok(out)
    }
}

/// Sizes every layer of the graph reads.
#[derive(Clone, Copy)]
struct Dims {
    /// tokens in the micro-batch
    t: u64,
    /// rows the last layer keeps for the logits (`inp_out_ids`)
    n_out: u64,
    /// tokens per stream
    t_seq: u64,
    e: u64,
    streams: u64,
    current: bool,
    rms: bool,
    causal: bool,
    /// V is stored transposed (without flash attention)
    v_trans: bool,
}

/// The graph's host inputs every layer reads.
struct GraphInputs {
    pos: TensorId,
    mask_full: Option<TensorId>,
    mask_swa: Option<TensorId>,
    k_idx: Option<TensorId>,
    v_idx: Option<TensorId>,
    /// the sliding-window cache's own row indices (an iSWA cache)
    k_idx_swa: Option<TensorId>,
    v_idx_swa: Option<TensorId>,
    out_ids: Option<TensorId>,
}

/// Build, schedule and allocate llama.cpp's reserve graph.
pub fn compute_buffers(
    model: &LlamaModel,
    placement: &Placement,
    s: ComputeSetup,
) -> Result<ComputeBuffers, CoreError> {
    vramfit_core::units::check_size("micro-batch tokens", s.n_tokens, 1 << 20)?;
    let full_offload = placement.layers.iter().all(|d| *d != Device::Cpu) && placement.output != Device::Cpu;
    // the scheduler holds a GPU backend whenever the build has one, even at
    // -ngl 0 (op offload then still sends big host-weight ops to it)
    let has_gpu = s.gpus > 0;
    let t = s.n_tokens;
    let mut b = Builder { g: Graph::new(), m: model, p: placement, full_offload, cpu_repack: s.cpu_repack, t };
    // a Qwen3.5 hybrid: gated delta-net layers beside gated-query attention
    let gdn_model = (0..model.layers.len() as u32).any(|il| gated_delta::delta_net_dims(model, il).is_some());
    let mut approximate: Option<String> = gated_delta::moe_gap(model).filter(|_| gdn_model);
    let streams = s.streams.max(1);
    let d = Dims {
        t,
        n_out: s.n_outputs.clamp(1, t.max(1)),
        t_seq: t.div_ceil(streams),
        e: model.n_embd,
        streams,
        current: s.era == GraphEra::Current,
        rms: model.family == GraphFamily::Sequential,
        causal: model.causal,
        v_trans: !s.flash_attn,
    };
    let (embd, inputs) = graph_inputs(&mut b, model, &s, &d)?;
    if model.arch == "gemma4" {
        let last = gemma4::build(&mut b, model, &s, &d, &inputs, embd)?;
        return finish(b, last, has_gpu, &s, None);
    }
    // an encoder attends over the micro-batch
    let enc_kv = t;

    let mut inp = embd;
    for (il, l) in model.layers.iter().enumerate() {
        let ilu = il as u32;
        let dev = placement.layers[il];
        let kv_dev = if s.offload_kqv { dev } else { Device::Cpu };
        let last = il + 1 == model.layers.len();
        if let Some(st) = l.recurrent {
            if let Some(g) = gated_delta::delta_net_dims(model, ilu) {
                inp = gated_delta::gdn_layer(&mut b, model, (l, ilu, st, g), inp, kv_dev, &d, &s)?;
                continue;
            }
            approximate
                .get_or_insert_with(|| format!("recurrent ({}) layers sized from their main tensors", model.arch));
            inp = recurrent_block(&mut b, model, ilu, st, inp, kv_dev, &d, s.rs_snapshots)?;
        }
        // a KV-shared layer (Gemma 3n outside the Gemma 4 graph) still attends:
        // built as a layer with its own K/V, which over-states it a little
        if !l.attends() {
            continue;
        }
        let n_kv = if d.causal {
            if l.sliding {
                s.n_kv_swa
            } else {
                s.n_kv
            }
        } else {
            enc_kv
        };
        let x = b.norm(inp, Some(ilu), d.rms, "attn_norm.weight", d.e)?;
        let (q, k, v, gate) = if gdn_model {
            // Qwen3.5's attention layers (build_layer_attn, src/models/qwen35.cpp):
            // the query projection carries a per-head output gate, as in its MTP head
            mtp_head::head_qkv(&mut b, model, ilu, x, inputs.pos, &d)?
        } else {
            let (q, k, v) = qkv_projections(&mut b, model, l, ilu, x, inputs.pos, &d)?;
            (q, k, v, None)
        };
        let mut attn = attention(&mut b, l, (q, k, v), n_kv, kv_dev, &inputs, &s, &d)?;
        if let Some(g) = gate {
            // cur · sigmoid(gate)
            let sg = b.inplace("sigmoid", g, &[g]);
            attn = b.inplace("mul", sg, &[attn, sg]);
        }
        let wo = b.weight(Some(ilu), "attn_output.weight", 0);
        let mut cur = b.mm(wo, attn, d.e, t)?;
        cur = b.bias(Some(ilu), "attn_output.bias", cur);
        let mut inp_sa = inp;
        if last && !gdn_model {
            // the last layer keeps only the rows whose logits are wanted
            if let Some(ids) = inputs.out_ids {
                let n = d.n_out;
                cur = b.fresh("get_rows", F32, [d.e, n, 1, 1], &[cur, ids], n)?;
                b.g.not_offloadable(cur);
                inp_sa = b.fresh("get_rows", F32, [d.e, n, 1, 1], &[inp, ids], n)?;
                b.g.not_offloadable(inp_sa);
            }
        }
        // after the gather the last layer's FFN and the head see n_out rows
        let dl = if last && !gdn_model { Dims { t: d.n_out, t_seq: d.n_out.div_ceil(d.streams), ..d } } else { d };
        inp = ffn_residual(&mut b, model, l, ilu, cur, inp_sa, &dl)?;
    }
    if model.latent_attention() {
        approximate.get_or_insert_with(|| {
            "multi-head latent attention sized as plain attention with the cache's head sizes".into()
        });
    }
    if !d.causal {
        approximate.get_or_insert_with(|| "encoder (non-causal) attention over the micro-batch".into());
    }
    let last = if gdn_model {
        gated_delta::h_nextn_head(&mut b, model, placement, inp, &d, inputs.out_ids)?
    } else {
        output_head(&mut b, model, placement, inp, &Dims { t: d.n_out, t_seq: d.n_out.div_ceil(d.streams), ..d })?
    };
    finish(b, last, has_gpu, &s, approximate)
}

/// Expand the graph from its last node, schedule it and replay the allocator.
fn finish(
    mut b: Builder,
    last: TensorId,
    has_gpu: bool,
    s: &ComputeSetup,
    approximate: Option<String>,
) -> Result<ComputeBuffers, CoreError> {
    b.g.expand(last);
    b.g.schedule(has_gpu, s.op_offload);
    let sizes = b.g.allocate(
        &|d| match d {
            Device::Cpu => CPU_ALIGNMENT,
            Device::Gpu(_) => CUDA_ALIGNMENT,
        },
        s.pipeline_copies.max(1),
    )?;
    Ok(ComputeBuffers {
        buffers: sizes.into_iter().map(|(device, bytes)| ComputeBuffer { device, bytes }).collect(),
        nodes: b.g.nodes().len() as u64,
        approximate,
    })
}

/// Inputs (all on the host): tokens, the embedded batch, positions, masks,
/// KV row indices, output row ids.
fn graph_inputs(
    b: &mut Builder,
    model: &LlamaModel,
    s: &ComputeSetup,
    d: &Dims,
) -> Result<(TensorId, GraphInputs), CoreError> {
    let (t, streams) = (d.t, d.streams);
    let tokens = b.g.input("inp_tokens", I32, [t, 1, 1, 1], t * 4);
    if s.embd_input {
        // build_inp_embd (src/llama-graph.cpp, PR #18898): the embeddings
        // input `inp_embd`, n_embd × n_tokens f32, is in every graph; the
        // token path is selected (ggml_build_forward_select), so nothing
        // consumes it and the allocator keeps it for the whole graph
        let bytes = f32_bytes("inp_embd input", &[d.e, t])?;
        let embd_in = b.g.input("inp_embd_input", F32, [d.e, t, 1, 1], bytes);
        b.g.expand(embd_in);
    }
    let tok_embd =
        b.g.weight("token_embd", model.tensor("token_embd.weight").map(|x| x.bytes).unwrap_or(0), Device::Cpu);
    let embd = b.fresh("inp_embd", F32, [d.e, t, 1, 1], &[tok_embd, tokens], t)?;
    b.g.not_offloadable(embd); // CUDA never takes over get_rows
    let pos = b.g.input("inp_pos", I32, [t, 1, 1, 1], t * 4);
    let mask_rows = d.t_seq.next_multiple_of(KQ_MASK_PAD);
    let any_sliding = model.layers.iter().any(|l| l.sliding && l.has_kv());
    let any_full = model.layers.iter().any(|l| !l.sliding && l.has_kv());
    let mask_for = |b: &mut Builder, n_kv: u64| -> Result<TensorId, CoreError> {
        if s.flash_attn && s.f16_fa_mask {
            // llama.cpp PR #23764: the mask input is f16 itself
            let bytes = product("kq_mask", &[n_kv, mask_rows, streams, 2])?;
            return Ok(b.g.input("kq_mask", F16, [n_kv, mask_rows, 1, streams], bytes));
        }
        let bytes = f32_bytes("kq_mask", &[n_kv, mask_rows, 1, streams])?;
        let m = b.g.input("kq_mask", F32, [n_kv, mask_rows, 1, streams], bytes);
        if s.flash_attn {
            // cast to f16 for flash attention (llm_graph_input_attn_kv: kq_mask_cnv)
            b.fresh("kq_mask_f16", F16, [n_kv, mask_rows, 1, streams], &[m], mask_rows)
        } else {
            Ok(m)
        }
    };
    let enc_kv = t;
    let mask_full = if any_full { Some(mask_for(b, if d.causal { s.n_kv } else { enc_kv })?) } else { None };
    let mask_swa = if any_sliding { Some(mask_for(b, s.n_kv_swa)?) } else { None };
    let v_max = model.layers.iter().map(|l| l.v_width()).max().unwrap_or(0);
    let idx_pair = |b: &mut Builder| -> Result<(Option<TensorId>, Option<TensorId>), CoreError> {
        if !(d.current && d.causal) {
            return Ok((None, None));
        }
        let k = b.g.input("k_idxs", I64, [t, 1, 1, 1], t * 8);
        // a V-less cache has only K row indices (llm_graph_input_attn_k, PR #19067)
        let v = if s.v_less {
            None
        } else {
            let vlen = if d.v_trans { product("v_idxs", &[t, v_max])? } else { t };
            Some(b.g.input("v_idxs", I64, [vlen, 1, 1, 1], product("v_idxs", &[vlen, 8])?))
        };
        Ok((Some(k), v))
    };
    let (k_idx, v_idx) = idx_pair(b)?;
    // an iSWA cache (sliding and full layers) gives each of its two caches its
    // own K/V row indices, the V ones n_tokens × n_embd_v_gqa_max() when V is
    // transposed (build_attn_inp_kv_iswa, llama_kv_cache::build_input_v_idxs,
    // src/llama-graph.cpp / src/llama-kv-cache.cpp, b11312)
    let (k_idx_swa, v_idx_swa) = if any_sliding && any_full { idx_pair(b)? } else { (None, None) };
    let out_ids = Some(b.g.input("inp_out_ids", I32, [d.n_out, 1, 1, 1], d.n_out * 4));
    Ok((embd, GraphInputs { pos, mask_full, mask_swa, k_idx, v_idx, k_idx_swa, v_idx_swa, out_ids }))
}

/// A recurrent layer: in-projection, conv over the state, scan, gate,
/// out-projection, added to the residual stream (returned).
#[allow(clippy::too_many_arguments)]
fn recurrent_block(
    b: &mut Builder,
    model: &LlamaModel,
    ilu: u32,
    st: RecurrentState,
    inp: TensorId,
    kv_dev: Device,
    d: &Dims,
    rs_snapshots: u64,
) -> Result<TensorId, CoreError> {
    let (t, e) = (d.t, d.e);
    let state = b.g.cache("rs", product("state", &[st.r + st.s, 4, d.streams])?, kv_dev);
    let x = b.norm(inp, Some(ilu), d.rms, "attn_norm.weight", e)?;
    let width = model
        .layer_tensor_bytes(ilu, "ssm_in.weight")
        .and_then(|_| model.tensor(&format!("blk.{ilu}.ssm_in.weight")).and_then(|t| t.ne.get(1).copied()))
        .unwrap_or(4 * e);
    let w_in = b.weight(Some(ilu), "ssm_in.weight", 0);
    let zx = b.mm(w_in, x, width, t)?;
    let conv = b.fresh("ssm_conv", F32, [(st.r / 3).max(width / 2), t, 1, 1], &[zx, state], t)?;
    // with speculative rollback the scan's output also carries the extra
    // state snapshots (rs_snapshots × n_embd_s values), written to the cache after it
    let snap = product("state snapshots", &[rs_snapshots, st.s])?.div_ceil(t.max(1));
    let scan = b.fresh("ssm_scan", F32, [(width / 2).max(1) + snap, t, 1, 1], &[conv, state], t)?;
    let y = b.inplace("mul", scan, &[scan, zx]);
    let w_out = b.weight(Some(ilu), "ssm_out.weight", 0);
    let o = b.mm(w_out, y, e, t)?;
    let _ = b.g.store("state_store", scan, state, &[]);
    Ok(b.inplace("add", o, &[o, inp]))
}

/// Q, K and V of one layer, roped, from a fused or three separate projections.
fn qkv_projections(
    b: &mut Builder,
    model: &LlamaModel,
    l: &LayerHparams,
    ilu: u32,
    x: TensorId,
    pos: TensorId,
    d: &Dims,
) -> Result<(TensorId, TensorId, TensorId), CoreError> {
    let t = d.t;
    let hq = l.n_head * l.head_dim_k;
    let hk = l.k_width();
    let hv = l.v_width();
    let (q, k, v);
    if model.fused_qkv {
        let w = b.weight(Some(ilu), "attn_qkv.weight", 0);
        let qkv = b.mm(w, x, hq + hk + hv, t)?;
        let qkv = b.bias(Some(ilu), "attn_qkv.bias", qkv);
        if d.current {
            let vq = b.g.view("q_view", qkv);
            q = b.fresh("rope_q", F32, [l.head_dim_k, l.n_head, t, 1], &[vq, pos], t)?;
            let vk = b.g.view("k_view", qkv);
            k = b.fresh("rope_k", F32, [l.head_dim_k, l.n_head_kv, t, 1], &[vk, pos], t)?;
            let vv = b.g.view("v_view", qkv);
            v = b.fresh("cont_v", F32, [hv, t, 1, 1], &[vv], t)?;
        } else {
            let vq = b.g.view("q_view", qkv);
            let qc = b.fresh("cont_q", F32, [hq, t, 1, 1], &[vq], t)?;
            let vk = b.g.view("k_view", qkv);
            let kc = b.fresh("cont_k", F32, [hk, t, 1, 1], &[vk], t)?;
            let vv = b.g.view("v_view", qkv);
            v = b.fresh("cont_v", F32, [hv, t, 1, 1], &[vv], t)?;
            let rq = b.g.view("reshape_q", qc);
            q = b.fresh("rope_q", F32, [hq, t, 1, 1], &[rq, pos], t)?;
            let rk = b.g.view("reshape_k", kc);
            k = b.fresh("rope_k", F32, [hk, t, 1, 1], &[rk, pos], t)?;
        }
    } else {
        let wq = b.weight(Some(ilu), "attn_q.weight", 0);
        let qm = b.mm(wq, x, hq, t)?;
        let qm = b.bias(Some(ilu), "attn_q.bias", qm);
        let wk = b.weight(Some(ilu), "attn_k.weight", 0);
        let km = b.mm(wk, x, hk, t)?;
        let km = b.bias(Some(ilu), "attn_k.bias", km);
        let wv = b.weight(Some(ilu), "attn_v.weight", 0);
        let vm = b.mm(wv, x, hv, t)?;
        let vm = b.bias(Some(ilu), "attn_v.bias", vm);
        let rq = b.g.view("reshape_q", qm);
        let rk = b.g.view("reshape_k", km);
        let (qi, ki) = if model.qk_norm {
            let qn = b.fresh("q_norm", F32, [l.head_dim_k, l.n_head, t, 1], &[rq], t)?;
            let wqn = b.weight(Some(ilu), "attn_q_norm.weight", 4 * l.head_dim_k);
            let qn = b.inplace("mul", qn, &[qn, wqn]);
            let kn = b.fresh("k_norm", F32, [l.head_dim_k, l.n_head_kv, t, 1], &[rk], t)?;
            let wkn = b.weight(Some(ilu), "attn_k_norm.weight", 4 * l.head_dim_k);
            let kn = b.inplace("mul", kn, &[kn, wkn]);
            (qn, kn)
        } else {
            (rq, rk)
        };
        // rope on a view allocates anew; on a tensor it runs in place
        q = if model.qk_norm {
            b.inplace("rope_q", qi, &[qi, pos])
        } else {
            b.fresh("rope_q", F32, [l.head_dim_k, l.n_head, t, 1], &[qi, pos], t)?
        };
        k = if model.qk_norm {
            b.inplace("rope_k", ki, &[ki, pos])
        } else {
            b.fresh("rope_k", F32, [l.head_dim_k, l.n_head_kv, t, 1], &[ki, pos], t)?
        };
        v = b.g.view("reshape_v", vm);
    }
    Ok((q, k, v))
}

/// build_attn: q, then v and k (current) or k and v (legacy), then the KV
/// stores, then attention over the cache (or over the batch, for an
/// encoder); returns the merged heads.
#[allow(clippy::too_many_arguments)]
fn attention(
    b: &mut Builder,
    l: &LayerHparams,
    (q, k, v): (TensorId, TensorId, TensorId),
    n_kv: u64,
    kv_dev: Device,
    inputs: &GraphInputs,
    s: &ComputeSetup,
    d: &Dims,
) -> Result<TensorId, CoreError> {
    let (t, streams) = (d.t, d.streams);
    let hk = l.k_width();
    let hv_q = l.n_head * l.head_dim_v;
    let hv = l.v_width();
    b.g.expand(q);
    // a V-less cache stores no V: nothing reads a V projection, so it is not
    // in the graph (MLA's V comes out of the latent K)
    let v_stored = !(s.v_less && d.causal);
    if d.current {
        if v_stored {
            b.g.expand(v);
        }
        b.g.expand(k);
    } else {
        b.g.expand(k);
        if v_stored {
            b.g.expand(v);
        }
    }
    let k_cache = b.g.cache(
        "k_cache",
        product("k cache", &[hk, n_kv, streams, s.type_k.type_size()])? / s.type_k.block_size(),
        kv_dev,
    );
    // V-less (MLA from b7917): no V cache tensor, V reads a view of K
    let v_cache = if !v_stored {
        k_cache
    } else {
        b.g.cache(
            "v_cache",
            product("v cache", &[hv, n_kv, streams, s.type_v.type_size()])? / s.type_v.block_size(),
            kv_dev,
        )
    };
    if d.causal {
        let k_idx = if l.sliding { inputs.k_idx_swa.or(inputs.k_idx) } else { inputs.k_idx };
        let ks = match k_idx {
            Some(ix) => b.g.store("set_rows_k", k, k_cache, &[ix]),
            None => b.g.store("cpy_k", k, k_cache, &[]),
        };
        b.g.expand(ks);
    }
    if d.causal && v_stored {
        let v2 = b.g.view("reshape_2d_v", v);
        let vsrc = if d.v_trans { b.g.view("transpose_v", v2) } else { v2 };
        let v_idx = if l.sliding { inputs.v_idx_swa.or(inputs.v_idx) } else { inputs.v_idx };
        let vs = match v_idx {
            Some(ix) => b.g.store("set_rows_v", vsrc, v_cache, &[ix]),
            None => b.g.store("cpy_v", vsrc, v_cache, &[]),
        };
        b.g.expand(vs);
    }
    let mask = if l.sliding { inputs.mask_swa } else { inputs.mask_full }
        .ok_or_else(|| CoreError::invalid("mask", "no mask"))?;
    let qp = b.g.view("permute_q", q);
    let kview = if d.causal { b.g.view("k_view", k_cache) } else { b.g.view("k_view", k) };
    let vview = if d.causal { b.g.view("v_view", v_cache) } else { b.g.view("v_view", v) };
    Ok(if s.flash_attn {
        let o = b.fresh("flash_attn_ext", F32, [l.head_dim_v, l.n_head, t, 1], &[qp, kview, vview, mask], t)?;
        b.g.view("reshape_o", o)
    } else {
        let kq = b.fresh("kq", F32, [n_kv, d.t_seq, l.n_head, streams], &[kview, qp], t)?;
        let sm = b.inplace("soft_max", kq, &[kq, mask]);
        // a V view of K is not stored transposed: build_attn_mha copies it
        // ("note: avoid this branch", v = ggml_cont(ggml_transpose(v)),
        // src/llama-graph.cpp), n_kv × kv_lora_rank × streams of 16-bit values
        let vview = if !v_stored { b.fresh("v_cont", F16, [n_kv, hv, 1, streams], &[vview], t)? } else { vview };
        let kqv = b.fresh("kqv", F32, [l.head_dim_v, d.t_seq, l.n_head, streams], &[vview, sm], t)?;
        let p = b.g.view("permute_kqv", kqv);
        let c = b.fresh("kqv_merged_cont", F32, [hv_q, t, 1, 1], &[p], t)?;
        if !s.offload_kqv {
            b.g.pin(c, Device::Cpu);
        }
        c
    })
}

/// The feed-forward part of a layer and its residual adds: after attention
/// (sequential families) or beside it (parallel ones); returns the
/// layer's output.
fn ffn_residual(
    b: &mut Builder,
    model: &LlamaModel,
    l: &LayerHparams,
    ilu: u32,
    attn_out: TensorId,
    inp_sa: TensorId,
    d: &Dims,
) -> Result<TensorId, CoreError> {
    let ffn = |b: &mut Builder, x: TensorId| -> Result<TensorId, CoreError> {
        if let Some(ex) = &model.experts {
            if model.layer_tensor_bytes(ilu, "ffn_gate_exps.weight").is_some()
                || model.layer_tensor_bytes(ilu, "ffn_up_exps.weight").is_some()
            {
                return moe_ffn(b, ilu, x, ex.count, ex.used, ex.ff, ex.shared, ex.shared_ff, d.current);
            }
        }
        dense_ffn(b, ilu, x, l.n_ff, model.gated_ffn, d.current)
    };
    Ok(match model.family {
        GraphFamily::Sequential => {
            let ffn_inp = b.inplace("add", attn_out, &[attn_out, inp_sa]);
            let x2 = b.norm(ffn_inp, Some(ilu), d.rms, "ffn_norm.weight", d.e)?;
            let f = ffn(b, x2)?;
            b.inplace("add", f, &[f, ffn_inp])
        }
        GraphFamily::Parallel => {
            let x2 = b.norm(inp_sa, Some(ilu), d.rms, "ffn_norm.weight", d.e)?;
            let f = ffn(b, x2)?;
            let r = b.inplace("add", f, &[f, inp_sa]);
            b.inplace("add", r, &[r, attn_out])
        }
    })
}

/// Output norm and head (its own weight, or the tied token embedding);
/// returns the last tensor of the graph.
fn output_head(
    b: &mut Builder,
    model: &LlamaModel,
    placement: &Placement,
    inp: TensorId,
    d: &Dims,
) -> Result<TensorId, CoreError> {
    let has_head = model.tensor("output.weight").is_some() || model.tied_output;
    let norm_out = b.norm(inp, None, d.rms, "output_norm.weight", d.e)?;
    b.g.set_output(norm_out);
    Ok(if has_head {
        let w = if model.tensor("output.weight").is_some() {
            b.weight(None, "output.weight", 0)
        } else {
            let bytes = model.tensor("token_embd.weight").map(|x| x.bytes).unwrap_or(0);
            b.g.weight("output(tied)", bytes, placement.output)
        };
        let logits = b.mm(w, norm_out, model.n_vocab, d.t)?;
        b.g.set_output(logits);
        logits
    } else {
        norm_out
    })
}

fn dense_ffn(
    b: &mut Builder,
    il: u32,
    x: TensorId,
    n_ff: u64,
    gated: bool,
    current: bool,
) -> Result<TensorId, CoreError> {
    let t = b.t;
    let e = b.m.n_embd;
    let act = if gated {
        if b.m.layer_tensor_bytes(il, "ffn_gate.weight").is_none() {
            // fused gate+up (Phi-3): one matmul of 2·n_ff, then swiglu on its halves
            let w = b.weight(Some(il), "ffn_up.weight", 0);
            let gu = b.mm(w, x, 2 * n_ff, t)?;
            let g = b.g.view("gate_view", gu);
            let u = b.g.view("up_view", gu);
            b.fresh("swiglu", F32, [n_ff, t, 1, 1], &[g, u], t)?
        } else {
            let wu = b.weight(Some(il), "ffn_up.weight", 0);
            let wg = b.weight(Some(il), "ffn_gate.weight", 0);
            // tmp = up(x) is created first, but the DFS from down visits gate first
            let gate = b.fresh("mul_mat", F32, [n_ff, t, 1, 1], &[wg, x], t)?;
            if current {
                let up = b.fresh("mul_mat", F32, [n_ff, t, 1, 1], &[wu, x], t)?;
                b.fresh("swiglu", F32, [n_ff, t, 1, 1], &[gate, up], t)?
            } else {
                let a = b.inplace("silu", gate, &[gate]);
                let up = b.fresh("mul_mat", F32, [n_ff, t, 1, 1], &[wu, x], t)?;
                b.inplace("mul", a, &[a, up])
            }
        }
    } else {
        let wu = b.weight(Some(il), "ffn_up.weight", 0);
        let up = b.mm(wu, x, n_ff, t)?;
        let up = b.bias(Some(il), "ffn_up.bias", up);
        b.inplace("gelu", up, &[up])
    };
    let wd = b.weight(Some(il), "ffn_down.weight", 0);
    let down = b.mm(wd, act, e, t)?;
    Ok(b.bias(Some(il), "ffn_down.bias", down))
}

#[allow(clippy::too_many_arguments)]
fn moe_ffn(
    b: &mut Builder,
    il: u32,
    x: TensorId,
    n_expert: u64,
    n_used: u64,
    ff: u64,
    shared: u64,
    shared_ff: u64,
    current: bool,
) -> Result<TensorId, CoreError> {
    let t = b.t;
    let e = b.m.n_embd;
    let router = b.weight(Some(il), "ffn_gate_inp.weight", 0);
    let logits = b.mm(router, x, n_expert, t)?;
    let probs = b.inplace("soft_max", logits, &[logits]);
    let sorted = b.fresh("argsort", I32, [n_expert, t, 1, 1], &[probs], t)?;
    let selected = b.g.view("top_k", sorted);
    let pr = b.g.view("reshape_probs", probs);
    let weights = b.fresh("get_rows", F32, [1, n_used, t, 1], &[pr, selected], t)?;
    b.g.not_offloadable(weights);
    // build_moe_ffn expands the routing weights before the experts
    // (ggml_build_forward_expand(gf, weights), src/llama-graph.cpp)
    b.g.expand(weights);
    let xr = b.g.view("reshape_x", x);
    let w_up = b.weight(Some(il), "ffn_up_exps.weight", 0);
    let w_gate = b.weight(Some(il), "ffn_gate_exps.weight", 0);
    let up = b.fresh("mul_mat_id", F32, [ff, n_used, t, 1], &[w_up, xr, selected], t)?;
    let gate = b.fresh("mul_mat_id", F32, [ff, n_used, t, 1], &[w_gate, xr, selected], t)?;
    let act = if current {
        b.fresh("swiglu", F32, [ff, n_used, t, 1], &[gate, up], t)?
    } else {
        let a = b.inplace("silu", gate, &[gate]);
        b.inplace("mul", a, &[a, up])
    };
    let w_down = b.weight(Some(il), "ffn_down_exps.weight", 0);
    let experts = b.fresh("mul_mat_id", F32, [e, n_used, t, 1], &[w_down, act, selected], t)?;
    let experts = b.inplace("mul", experts, &[experts, weights]);
    // sum the selected experts' outputs: the first add of two views is new, the rest in place
    let v0 = b.g.view("expert_view", experts);
    let v1 = b.g.view("expert_view", experts);
    let mut moe = b.fresh("add", F32, [e, t, 1, 1], &[v0, v1], t)?;
    for _ in 2..n_used {
        let vi = b.g.view("expert_view", experts);
        moe = b.inplace("add", moe, &[moe, vi]);
    }
    // the shared expert is built when its tensors exist (Qwen2-MoE, Qwen3-Next and
    // Qwen3.5-MoE files have no expert_shared_count: qwen35moe.cpp build_layer_ffn
    // tests `ffn_up_shexp != nullptr`), as wide as its up projection
    let sh_ff = match b.m.tensor(&format!("blk.{il}.ffn_up_shexp.weight")).and_then(|w| w.ne.get(1).copied()) {
        Some(w) => w,
        None => shared.saturating_mul(shared_ff),
    };
    if sh_ff > 0 {
        let mut sh = dense_ffn_named(b, il, x, sh_ff, current)?;
        if b.m.layer_tensor_bytes(il, "ffn_gate_inp_shexp.weight").is_some() {
            // Qwen3.5-MoE / Qwen3-Next: the shared expert's own sigmoid gate,
            // one value per token (qwen35moe.cpp build_layer_ffn)
            let w = b.weight(Some(il), "ffn_gate_inp_shexp.weight", 0);
            let sg = b.mm(w, x, 1, t)?;
            let sg = b.inplace("sigmoid", sg, &[sg]);
            sh = b.inplace("mul", sh, &[sh, sg]);
        }
        moe = b.inplace("add", moe, &[moe, sh]);
    }
    Ok(moe)
}

fn dense_ffn_named(b: &mut Builder, il: u32, x: TensorId, n_ff: u64, current: bool) -> Result<TensorId, CoreError> {
    let t = b.t;
    let e = b.m.n_embd;
    let wg = b.weight(Some(il), "ffn_gate_shexp.weight", 0);
    let wu = b.weight(Some(il), "ffn_up_shexp.weight", 0);
    let gate = b.fresh("mul_mat", F32, [n_ff, t, 1, 1], &[wg, x], t)?;
    let up = b.fresh("mul_mat", F32, [n_ff, t, 1, 1], &[wu, x], t)?;
    let act = if current {
        b.fresh("swiglu", F32, [n_ff, t, 1, 1], &[gate, up], t)?
    } else {
        let a = b.inplace("silu", gate, &[gate]);
        b.inplace("mul", a, &[a, up])
    };
    let wd = b.weight(Some(il), "ffn_down_shexp.weight", 0);
    b.mm(wd, act, e, t)
}
