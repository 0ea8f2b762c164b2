//! Tensors saved for backward, per token, from the architecture.
//!
//! The accounting follows what autograd saves in the Hugging Face
//! modeling code (checked tensor by tensor with
//! `torch.autograd.graph.saved_tensors_hooks` on Llama and GPT-2 and
//! calibrated on `shared/calibration` group C, FakeTensorMode + MemTracker):
//!
//! * **RMSNorm** (python, fp32 math): the fp32 input or its fp32 upcast
//!   (4·h), the normalised fp32 tensor when the stream is fp32 and the
//!   weight trains (4·h; a 16-bit stream keeps its 16-bit cast instead),
//!   and the output the next linears keep (act·h). **LayerNorm** (fused):
//!   its input (stream bytes·h) and the output the linears keep.
//! * **Attention core**: q, k, v (k/v repeated to all heads when the kernel
//!   lacks GQA: the fp32 memory-efficient kernel and eager), the output,
//!   and the fp32 logsumexp (4 B per head) for SDPA. Eager adds per key
//!   4 B (fp32 softmax) + the 16-bit cast + dropout mask/output per head.
//!   A separate contiguous copy of the output feeds `o_proj` when attention
//!   dropout is on (GPT-2 measured).
//! * **MLP**: gated (SwiGLU): gate, up, act(gate), product = 4·act·I;
//!   plain: fc output, act output, plus 3·act·I for the python `gelu_new`.
//! * **Dropout**: 1-byte masks on each residual branch when hidden dropout > 0.
//! * **Autocast** over fp32 weights with rotary embeddings: q/k come out
//!   of RoPE in fp32 (cos/sin are fp32); measured +6·q_width bytes per token
//!   per layer on TinyLlama.
//! * **Frozen (LoRA) linears** save no input; adapted ones save their
//!   (dropped-out) input; frozen norm weights drop the normalised tensor.

use super::profile::TrainProfile;
use crate::dtype::DType;
use crate::error::CoreError;
use crate::hf;
use crate::model::{Mixer, MlpKind, ModelSpec, NormKind, Positional};
use crate::units::{div_ceil, mul, sum};
use crate::workload::{AttentionImpl, Checkpointing, LossPath, Precision, TrainKind, TrainSetup};

/// Calibrated: extra bytes per q-width element per token per layer under
/// autocast over an fp32 stream with rotary embeddings (TinyLlama amp-bf16,
/// group C: 12,288 B at q_width 2048).
pub const AMP_ROPE_EXTRA_PER_QW: u64 = 6;

/// Activation bytes per token of one decoder layer, and of the model ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ActProfile {
    /// per token per layer, not split by TP (norms, residual, dropout masks); split with SP
    pub layer_rep: u64,
    /// per token per layer, split by TP (projections, attention, MLP)
    pub layer_split: u64,
    /// per token per key per layer (eager s×s terms), split by TP over heads
    pub layer_per_key: u64,
    /// of `layer_split`: Megatron's MoE tokens dispatched to the experts, kept
    /// as the grouped fc1's input ([`megatron_dispatched_bytes`])
    pub moe_dispatched: u64,
    /// per token per layer (averaged over the layers), not in `layer_split`: what
    /// DeepSpeed AutoEP's MoE layer keeps for backward, counted when `--ep` > 1
    /// outside Megatron ([`autoep_dispatched_bytes`])
    pub autoep_dispatched: u64,
    /// per token per layer: k and v (when not repeated), split by TP over kv heads
    pub layer_kv: u64,
    /// key/value heads (for the TP split of `layer_kv`)
    pub kv_heads: u64,
    /// per token per layer kept under full checkpointing (the layer input)
    pub layer_input: u64,
    /// per token per layer kept under torchtitan's per-op selective checkpointing
    /// beyond the layer input: every other matmul output and attention's output +
    /// logsumexp (split by TP)
    pub layer_ops: u64,
    /// per token outside the layers (final norm, embedding dropout mask)
    pub ends: u64,
    /// bytes per token per vocab entry kept through backward by the loss path
    /// (the saved log-softmax, and the logits themselves where the loop keeps them)
    pub logits_saved: u64,
    /// bytes per vocab entry of one gradient row at the start of the loss backward
    /// (gradients of log-softmax and logits); rows: [`loss_grad_rows`]
    pub logits_grad: u64,
    /// bytes per token kept by a fused loss instead of logits (the gradient of the
    /// head's input, computed in forward)
    pub loss_saved_per_token: u64,
    /// the loss path these figures are for
    pub loss: LossPath,
    /// 16-bit weight casts kept by autocast, layers part (params × 2 B) — multiply by per-GPU params
    pub weight_copy_bytes: u64,
    /// the model's stream is fp32 (fp32 / amp over fp32 weights)
    pub fp32_stream: bool,
}

/// The byte sizes the accounting works with, and which linears train.
///
/// Every factor here is bounded by the model limits (`crate::model::limits`:
/// hidden ≤ 2^20, heads ≤ 2^16, MLP width ≤ 2^22 per expert) and by 4-byte
/// elements, so the per-token sums stay far below 2^64; the products with
/// tokens, layers and sequence length are checked where they are formed
/// (`super::breakdown`, [`layer_bytes_per_token`]).
#[derive(Clone, Copy)]
struct Saves<'a> {
    /// bytes of an activation (the compute dtype; 4 over an fp32 stream without autocast)
    act: u64,
    /// bytes of the residual stream (the weights' dtype)
    stream: u64,
    fp32_stream: bool,
    /// a full fine-tune: every linear saves its input
    full: bool,
    /// bytes of an adapted linear's own copy of its input
    adapter_input: u64,
    /// each adapter keeps its own (cast and/or dropped-out) copy of its input
    copy_per_adapter: bool,
    dropout: bool,
    lora_modules: &'a [String],
    hidden: u64,
    /// bitsandbytes QLoRA: every quantized linear keeps its input for backward
    /// (`MatMul4Bit.forward` sets `ctx.tensors = (A, B)` whenever the input needs a gradient)
    quant_keeps_input: bool,
    /// the output head is quantized (LitGPT) and, under bitsandbytes, keeps its input
    head_quantized: bool,
}

impl Saves<'_> {
    fn adapted(&self, name: &str) -> bool {
        !self.full && self.lora_modules.iter().any(|m| m == name)
    }

    /// Bytes one linear-input site of `width` keeps, given the modules reading it.
    fn site(&self, width: u64, consumers: &[&str]) -> u64 {
        if self.full {
            return self.act * width;
        }
        // a bitsandbytes 4-bit base keeps the (shared) input itself
        let base = if self.quant_keeps_input && !consumers.is_empty() { self.act * width } else { 0 };
        let n = consumers.iter().filter(|c| self.adapted(c)).count() as u64;
        let adapters = if n == 0 {
            0
        } else if self.dropout || self.copy_per_adapter {
            n * (self.adapter_input + u64::from(self.dropout)) * width
        } else if base > 0 {
            // the adapters read the very tensor the base keeps
            0
        } else {
            self.adapter_input * width
        };
        base + adapters
    }

    /// One norm, including the linear-input site it feeds.
    fn norm(&self, kind: NormKind, consumers: &[&str]) -> u64 {
        let h = self.hidden;
        let out = self.site(h, consumers);
        match kind {
            NormKind::RmsNorm => {
                let internal = 4 * h + 4; // fp32 input or upcast, + rsqrt
                let normed = match (self.full, self.fp32_stream) {
                    (true, true) => 4 * h,
                    (true, false) => self.act * h,
                    (false, _) => 0,
                };
                internal + normed + out
            }
            NormKind::LayerNorm => self.stream * h + 8 + out,
        }
    }
}

/// Sizes needed per token.
pub fn act_profile(spec: &ModelSpec, setup: &TrainSetup, prof: &TrainProfile) -> Result<ActProfile, CoreError> {
    let p = setup.precision;
    // PEFT `prepare_model_for_kbit_training` casts the embeddings (and norms) to
    // fp32: the residual stream is fp32 from the first layer on, and bitsandbytes
    // `Linear4bit` returns its output in its input's dtype (`out.to(inp_dtype)`),
    // so the layers' activations are fp32 too (the attention kernel gets 16-bit copies)
    let kbit_fp32 = setup.kind == TrainKind::Qlora && setup.kbit_prep;
    let stream = match setup.kind {
        TrainKind::Full => p.weight_dtype(),
        TrainKind::Lora => setup.lora_base_dtype(),
        TrainKind::Qlora if kbit_fp32 => DType::F32,
        TrainKind::Qlora => p.compute_dtype(),
    }
    .bytes()?;
    let fp32_stream = stream == 4;
    // autocast is a no-op over a 16-bit stream; a quantized base is not cast
    let autocast = p.is_autocast() && fp32_stream && setup.kind != TrainKind::Qlora;
    let act = if fp32_stream && (kbit_fp32 || !p.is_autocast()) { 4 } else { p.compute_dtype().bytes()? };
    let attn_act = if kbit_fp32 { p.compute_dtype().bytes()? } else { act };
    // What an adapted linear keeps of its input. PEFT casts x to the adapter
    // dtype (fp32) before lora_dropout and lora_A; under autocast lora_A then
    // casts it back to 16-bit. So each adapter keeps its own copy: 16-bit under
    // autocast, adapter bytes otherwise; with dropout, plus a 1-byte mask
    // (CUDA `native_dropout`). Only when no cast happens and there is no
    // dropout do the adapters share the base input.
    let saves = Saves {
        act,
        stream,
        fp32_stream,
        full: setup.kind == TrainKind::Full,
        adapter_input: if p.is_autocast() { act } else { prof.adapter_bytes.max(act) },
        copy_per_adapter: p.is_autocast() || prof.adapter_bytes != stream,
        dropout: setup.lora.dropout > 0.0,
        lora_modules: &prof.lora_modules,
        hidden: spec.hidden_size,
        quant_keeps_input: setup.kind == TrainKind::Qlora
            && setup.framework().qlora_base == crate::workload::QloraBase::Bitsandbytes,
        head_quantized: setup.kind == TrainKind::Qlora && setup.qlora_quantize_lm_head,
    };
    let names = hf::names(spec.family);
    let attn = names.attention(spec.attention);
    let mlp = if spec.moe_layers() > 0 { names.expert(spec.mlp) } else { names.mlp(spec.mlp) };
    let hidden_drop = spec.hidden_dropout > 0.0;
    let rep = replicated(spec, &saves, attn.inputs, mlp.inputs) + if hidden_drop { 2 * spec.hidden_size } else { 0 };
    let core = attention_core(spec, setup, &Saves { act: attn_act, ..saves }, attn.out, autocast);
    let ends = ends(spec, &saves) + if hidden_drop { spec.hidden_size } else { 0 };
    let (logits_saved, logits_grad, loss_saved_per_token) = loss_bytes(setup.loss, act, spec.hidden_size);
    Ok(ActProfile {
        layer_rep: rep,
        layer_split: core.split
            + mlp_bytes(spec, &saves, mlp.down)
            + parallel_mamba_bytes(spec, act)
            + megatron_dispatched_bytes(spec, setup, act),
        moe_dispatched: megatron_dispatched_bytes(spec, setup, act),
        autoep_dispatched: autoep_dispatched_bytes(spec, setup, act),
        layer_per_key: core.per_key,
        layer_kv: core.kv,
        kv_heads: spec.num_kv_heads,
        layer_input: stream * spec.hidden_size,
        layer_ops: ops_saved(spec, act),
        ends,
        logits_saved,
        logits_grad,
        loss_saved_per_token,
        loss: setup.loss,
        weight_copy_bytes: if autocast { 2 } else { 0 },
        fp32_stream,
    })
}

/// What the loss path keeps per token per vocab entry, what one gradient row
/// costs per vocab entry at the start of its backward, and what a fused loss
/// keeps per token instead of logits (`act` = compute bytes).
///
/// * `Fp32` (transformers, torchtitan): fp32 log-softmax saved (4 B); gradients
///   of log-softmax and logits in fp32 (2 × 4 B) — measured, shared/calibration group C.
/// * `Compute`: the same in the compute dtype (act; 2 × act).
/// * `Chunked` (torchtune): every chunk's fp32 log-softmax is saved (4 B); one
///   chunk's fp32 gradients and its compute-dtype gradient (4 + 4 + act B) at a time.
/// * `ChunkedTokens` (LitGPT, no upcast): the logit chunks are kept in a list (act)
///   beside their saved log-softmax (act); one chunk's gradients (2 × act).
/// * `Fused` (Liger, cut-cross-entropy): nothing vocabulary-sized is kept; the
///   gradient of the head's input is computed in forward and kept (hidden × act per
///   token); one chunk of fp32 logits and its gradient in compute dtype (4 + act B).
pub fn loss_bytes(loss: LossPath, act: u64, hidden: u64) -> (u64, u64, u64) {
    match loss {
        LossPath::Fp32 | LossPath::Fp32ShiftCopy => (4, 8, 0),
        LossPath::Compute => (act, 2 * act, 0),
        LossPath::Chunked { .. } => (4, 8 + act, 0),
        LossPath::ChunkedTokens { .. } => (2 * act, 2 * act, 0),
        LossPath::Fused => (0, 4 + act, hidden * act),
    }
}

/// Bytes per token per vocab entry live at the end of forward, inside the loss, beside
/// the log-softmax it saves (`act` = compute bytes). Only transformers ≤ 4.48's path
/// ([`LossPath::Fp32ShiftCopy`]) can exceed its backward start there: the compute-dtype
/// logits (act), the fp32 upcast (4) and its contiguous shifted copy (4), against the
/// 2 × 4 B of gradients at the start of backward. Every other path's forward holds less
/// than its backward start (`Fp32`: act + 4 beside the log-softmax, against 8), so 0.
pub fn loss_forward_bytes(loss: LossPath, act: u64) -> u64 {
    match loss {
        LossPath::Fp32ShiftCopy => act + 4 + 4,
        _ => 0,
    }
}

/// Rows of the loss gradient live at once at the start of its backward, for
/// `tokens` tokens (per micro-batch on this GPU).
pub fn loss_grad_rows(loss: LossPath, tokens: u64, hidden: u64, vocab: u64) -> u64 {
    match loss {
        LossPath::Fp32 | LossPath::Fp32ShiftCopy | LossPath::Compute => tokens,
        LossPath::Chunked { chunks } => tokens.div_ceil(chunks.max(1)),
        LossPath::ChunkedTokens { tokens: t } => tokens.min(t.max(1)),
        // Liger: chunk rows = next_power_of_2(ceil(BT / ceil(V / H)))
        LossPath::Fused => {
            let per = vocab.div_ceil(hidden.max(1)).max(1);
            tokens.div_ceil(per).max(1).checked_next_power_of_two().unwrap_or(tokens).min(tokens)
        }
    }
}

/// torchtitan's per-op policy saves the output of every second `mm` of a
/// layer (q, v, gate, down for a gated MLP; q, v, fc for a plain one: the
/// matmuls in forward order, even positions) and of SDPA (output + fp32
/// logsumexp); everything else is recomputed (`_save_list` in
/// torchtitan's `apply_ac`).
fn ops_saved(spec: &ModelSpec, act: u64) -> u64 {
    let (h, qw, kvw, aw) = (spec.hidden_size, spec.q_width(), spec.kv_width(), spec.attn_out_width());
    let i = spec.intermediate_size;
    let mms: Vec<u64> = match spec.mlp {
        MlpKind::Gated => vec![qw, kvw, kvw, h, i, i, h],
        MlpKind::Plain => vec![qw, kvw, kvw, h, i, h],
    };
    let kept: u64 = mms.iter().step_by(2).sum();
    act * (kept + aw) + 4 * spec.num_heads
}

/// Per token per layer, not split by TP: the norms (with the inputs of the
/// linears they feed) and, with hidden dropout, its masks.
fn replicated(spec: &ModelSpec, saves: &Saves, qkv: &[&str], up: &[&str]) -> u64 {
    let h = spec.hidden_size;
    let norms = spec.norms_per_layer.max(1);
    if norms == 1 {
        // one norm feeds attention and MLP (Falcon-7B parallel block)
        let both: Vec<&str> = qkv.iter().chain(up.iter()).copied().collect();
        return saves.norm(spec.norm, &both);
    }
    // Gemma-2 style extra post-norms keep their fp32 inputs
    let both = saves.norm(spec.norm, qkv) + saves.norm(spec.norm, up) + (norms - 2) * (4 * h + 4);
    if !spec.parallel_residual {
        return both;
    }
    // GPT-NeoX parallel block: both norms read the same residual, saved once
    let shared = match spec.norm {
        NormKind::LayerNorm => saves.stream * h,
        // a 16-bit stream is upcast separately by each norm: nothing shared
        NormKind::RmsNorm if saves.fp32_stream => 4 * h,
        NormKind::RmsNorm => 0,
    };
    both - shared
}

/// The attention core's saved bytes per token per layer.
struct AttentionCore {
    /// split by TP over heads: q, k/v when repeated, the output, SDPA's logsumexp, RoPE casts
    split: u64,
    /// k and v when kept at kv-head width (split by TP over kv heads)
    kv: u64,
    /// per key (eager attention's s × s tensors)
    per_key: u64,
}

fn attention_core(spec: &ModelSpec, setup: &TrainSetup, saves: &Saves, out: &str, autocast: bool) -> AttentionCore {
    let a = saves.act;
    let qw = spec.q_width();
    let aw = spec.attn_out_width();
    let kvw = if spec.mla.is_some() { qw } else { spec.kv_width() };
    let heads = spec.num_heads;
    let eager = setup.attention == AttentionImpl::Eager;
    let framework = setup.framework();
    // LitGPT repeats k and v to every query head before SDPA in training
    let repeat = eager || (setup.precision == Precision::Fp32 && kvw < qw) || (framework.repeats_kv_heads && kvw < qw);
    let kv_saved = if repeat { qw } else { kvw };
    // k and v split over TP by kv heads (each rank keeps at least one): kept apart
    let kv = if repeat { 0 } else { 2 * a * kvw };
    let mut split = a * qw + 2 * a * kv_saved - kv + a * aw;
    if framework.sdpa_v_views_fused_qkv && !repeat && spec.mla.is_none() {
        // LitGPT hands SDPA `v` as a view of the fused qkv output (no repeat, no copy):
        // the saved view keeps the whole qkv tensor, its q and k parts included, alive
        split += a * (qw + kvw);
    }
    if !eager {
        split += 4 * heads;
    }
    if spec.attention_dropout > 0.0 || !saves.full {
        // full fine-tune: o_proj reuses the kernel's output unless attention
        // dropout forces a contiguous copy; LoRA: the adapter's own input copy
        split += saves.site(aw, &[out]);
    }
    if autocast && spec.positional == Positional::Rotary {
        split += AMP_ROPE_EXTRA_PER_QW * qw;
    }
    let per_key = if eager {
        let cast = if a != 4 { a } else { 0 };
        let dropout = if spec.attention_dropout > 0.0 { 1 + a } else { 0 };
        heads * (4 + cast + dropout)
    } else {
        0
    };
    AttentionCore { split, kv, per_key }
}

/// The MLP's saved bytes per token per layer (the top-k experts' widths for MoE),
/// with the router's logits and weights.
fn mlp_bytes(spec: &ModelSpec, saves: &Saves, down: &str) -> u64 {
    let a = saves.act;
    let moe = spec.moe.as_ref().filter(|_| spec.moe_layers() > 0);
    let width = match moe {
        Some(m) => m.expert_intermediate * m.experts_per_token + m.shared_intermediate * m.shared_experts,
        None => spec.intermediate_size,
    };
    let saved = match spec.mlp {
        MlpKind::Gated => 3 * a * width + saves.site(width, &[down]),
        MlpKind::Plain => {
            let gelu_new = matches!(spec.activation.as_str(), "gelu_new" | "gelu_fast" | "quick_gelu");
            let act_inter = if gelu_new { 3 * a * width } else { 0 };
            a * width + act_inter + saves.site(width, &[down])
        }
    };
    // router logits (fp32 softmax over experts) and routing weights
    saved + moe.map(|m| 4 * m.num_experts + 8 * m.experts_per_token).unwrap_or(0)
}

/// Megatron-Core's MoE layer keeps, per token per layer, the copies of the token
/// dispatched to its top-k experts: `MoEAlltoAllTokenDispatcher` permutes the
/// hidden states into one row per (token, expert) (`permute`,
/// megatron/core/transformer/moe/moe_utils.py), sends them to the expert ranks
/// (`all_to_all`, token_dispatcher.py), and the experts' grouped fc1
/// (`TEGroupedMLP.forward`, experts.py) keeps that input for its weight gradient:
/// top-k × hidden × activation bytes, split over the TP ranks with the
/// sequence-parallel tokens like the rest of the MLP. Counted for Megatron only;
/// 0 for a dense model.
fn megatron_dispatched_bytes(spec: &ModelSpec, setup: &TrainSetup, act: u64) -> u64 {
    match spec.moe.as_ref().filter(|m| m.num_experts > 0 && spec.moe_layers() > 0) {
        Some(m) if setup.framework().megatron_mixed_precision => m.experts_per_token * spec.hidden_size * act,
        _ => 0,
    }
}

/// Saved bytes per token per layer on one GPU that expert-tensor parallelism
/// adds to [`ActProfile::moe_dispatched`]'s share: with an expert-TP group of
/// `etp` ranks, `MoEAlltoAllTokenDispatcher.dispatch_postprocess` all-gathers
/// the tokens each rank received by all-to-all over that group
/// (`gather_from_sequence_parallel_region(global_input_tokens,
/// group=self.tp_group)`, megatron/core/transformer/moe/token_dispatcher.py,
/// `tp_group = pg_collection.expt_tp`), and the grouped fc1, split by columns
/// over the group, keeps the gathered input for its weight gradient: `etp`
/// times the rows of the rank's own tokens (the micro-batch's ÷ TP under
/// sequence parallelism). The fc1 outputs and fc2 inputs keep their size
/// (etp × the rows, each 1/etp of the width). Megatron's default (EP 1,
/// ETP = TP) gathers TP times. 0 without Megatron's MoE or with ETP 1.
pub fn expert_gather_bytes_per_token(ap: &ActProfile, tp: u64, etp: u64) -> Result<u64, CoreError> {
    if ap.moe_dispatched == 0 || etp <= 1 {
        return Ok(0);
    }
    Ok(div_ceil(mul("expert-TP gathered tokens", ap.moe_dispatched, etp - 1)?, tp.max(1)))
}

/// What DeepSpeed AutoEP's `AutoEPMoELayer.forward` keeps for backward per
/// token per MoE layer beyond the expert MLP's own saves ([`mlp_bytes`]),
/// deepspeed/module_inject/auto_ep_layer.py (PR #7938):
/// - the routed rows the grouped GEMMs take: `x[token_indices // top_k]`, sent
///   by `_AllToAllV` and permuted (`permute_by_local_expert`) into one row per
///   (token, expert), which `torch._grouped_mm` keeps for the weight gradient:
///   top-k × hidden × activation bytes (the all-to-all and the index ops keep
///   only split sizes and indices);
/// - the combine (`combine_from_routed`, score_apply "post" in every preset):
///   `output.float() * top_scores` keeps the fp32 copy of the top-k expert
///   outputs for the routing weights' gradient: top-k × hidden × 4 B.
///
/// Averaged over the layers (MoE layers ÷ layers, rounded up), so that the
/// per-layer sum counts it on the MoE layers only. The balanced case: a rank
/// that receives more than its share of the routed rows keeps more (dropless
/// routing, no capacity factor). 0 under Megatron and for a dense model.
fn autoep_dispatched_bytes(spec: &ModelSpec, setup: &TrainSetup, act: u64) -> u64 {
    if setup.framework().megatron_mixed_precision || spec.num_layers == 0 {
        return 0;
    }
    match spec.moe.as_ref().filter(|m| m.num_experts > 0 && spec.moe_layers() > 0) {
        Some(m) => {
            // saturating: a bound past u64 over-counts, never wraps
            let per_moe_layer = m.experts_per_token.saturating_mul(spec.hidden_size).saturating_mul(act + 4);
            per_moe_layer.saturating_mul(spec.moe_layers()).div_ceil(spec.num_layers)
        }
        None => 0,
    }
}

/// Falcon-H1's Mamba-2 branch, which runs beside attention in every layer
/// (`FalconH1DecoderLayer`), so an attention-shaped layer misses it: the
/// in_proj input (`hidden_states * ssm_in_multiplier`, a tensor of its own),
/// and what mamba_ssm's fused `MambaSplitConv1dScanCombinedFn` (the
/// training path of `FalconH1Mixer.cuda_kernels_forward`) saves for
/// backward: `zxbcdt` (z: d_inner, x·B·C: conv_dim, dt: heads) and `out_x`
/// (d_inner), in the compute dtype, per token. 0 for other models (their
/// Mamba layers replace attention and keep the attention-shaped estimate).
fn parallel_mamba_bytes(spec: &ModelSpec, act: u64) -> u64 {
    let parallel = spec.layer_pattern.iter().all(|l| l.mixer == Mixer::AttentionMamba2);
    match &spec.mamba {
        Some(m) if parallel && !spec.layer_pattern.is_empty() => {
            act * (spec.hidden_size + 2 * m.inner() + m.conv_dim() + m.heads)
        }
        _ => 0,
    }
}

/// Outside the layers: the final norm (+ the head's input when the head trains).
fn ends(spec: &ModelSpec, saves: &Saves) -> u64 {
    let (h, a) = (spec.hidden_size, saves.act);
    let head_trains = saves.full
        || saves.adapted(hf::names(spec.family).lm_head)
        || (saves.head_quantized && saves.quant_keeps_input);
    match spec.norm {
        NormKind::RmsNorm => {
            4 * h + 4 + if head_trains { (if saves.fp32_stream { 4 * h } else { a * h }) + a * h } else { 0 }
        }
        NormKind::LayerNorm => saves.stream * h + 8 + if head_trains { a * h } else { 0 },
    }
}

/// Saved bytes per token of one layer on one GPU (TP/SP applied), and
/// the per-key bytes for a sequence of `seq` keys.
pub fn layer_bytes_per_token(
    ap: &ActProfile,
    seq: u64,
    tp: u64,
    sp: bool,
    ckpt: Checkpointing,
) -> Result<u64, CoreError> {
    let tp = tp.max(1);
    let what = "activations per token";
    let rep = if sp { div_ceil(ap.layer_rep, tp) } else { ap.layer_rep };
    let split = div_ceil(ap.layer_split, tp);
    // k and v split over TP by kv heads, each rank keeping at least one
    let kv_heads = ap.kv_heads.max(1);
    let kv = div_ceil(mul(what, ap.layer_kv, kv_heads.div_ceil(tp))?, kv_heads);
    let key = if ckpt == Checkpointing::Selective { 0 } else { div_ceil(mul(what, ap.layer_per_key, seq)?, tp) };
    sum(what, &[rep, split, kv, key])
}
