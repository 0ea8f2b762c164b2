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
use crate::model::{Attention, MlpKind, ModelSpec, NormKind, Positional};
use crate::units::{div_ceil, mul, sum};
use crate::workload::{AttentionImpl, Checkpointing, Precision, TrainKind, TrainSetup};

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
    /// per token per layer: k and v (when not repeated), split by TP over kv heads
    pub layer_kv: u64,
    /// key/value heads (for the TP split of `layer_kv`)
    pub kv_heads: u64,
    /// per token per layer kept under full checkpointing (the layer input)
    pub layer_input: u64,
    /// per token outside the layers (final norm, embedding dropout mask)
    pub ends: u64,
    /// bytes per token per vocab entry of the saved log-softmax
    pub logits_saved: u64,
    /// bytes per token per vocab entry at the start of backward (grads of log-softmax and logits)
    pub logits_grad: u64,
    /// 16-bit weight casts kept by autocast, layers part (params × 2 B) — multiply by per-GPU params
    pub weight_copy_bytes: u64,
    /// the model's stream is fp32 (fp32 / amp over fp32 weights)
    pub fp32_stream: bool,
}

/// Sizes needed per token.
pub fn act_profile(spec: &ModelSpec, setup: &TrainSetup, prof: &TrainProfile) -> Result<ActProfile, CoreError> {
    let p = setup.precision;
    let a = p.compute_dtype().bytes()?;
    let stream: DType = match setup.kind {
        TrainKind::Full => p.weight_dtype(),
        TrainKind::Lora => setup.lora_base_dtype(),
        TrainKind::Qlora => p.compute_dtype(),
    };
    let r = stream.bytes()?;
    let fp32_stream = r == 4;
    // autocast is a no-op over a 16-bit stream
    let autocast = p.is_autocast() && fp32_stream;
    let a = if fp32_stream && !p.is_autocast() { 4 } else { a };
    let full = setup.kind == TrainKind::Full;
    let h = spec.hidden_size;
    let qw = spec.q_width();
    let aw = spec.attn_out_width();
    let kvw = if spec.mla.is_some() { qw } else { spec.kv_width() };
    let heads = spec.num_heads;
    let lora = &setup.lora;
    // What an adapted linear keeps of its input. PEFT casts x to the adapter
    // dtype (fp32) before lora_dropout and lora_A; under autocast lora_A then
    // casts it back to 16-bit. So each adapter keeps its own copy: 16-bit under
    // autocast, adapter bytes otherwise; with dropout, plus a 1-byte mask
    // (CUDA `native_dropout`). Only when no cast happens and there is no
    // dropout do the adapters share the base input.
    let cast_per_adapter = p.is_autocast() || prof.adapter_bytes != r;
    let ai = if p.is_autocast() { a } else { prof.adapter_bytes.max(a) };
    let drop = lora.dropout > 0.0;
    let adapted = |name: &str| !full && prof.lora_modules.iter().any(|m| m == name);
    // bytes one linear-input site keeps, given the consumer module names
    let site = |width: u64, consumers: &[&str]| -> u64 {
        if full {
            return a * width;
        }
        let n = consumers.iter().filter(|c| adapted(c)).count() as u64;
        if n == 0 {
            0
        } else if drop || cast_per_adapter {
            n * (ai + u64::from(drop)) * width
        } else {
            ai * width
        }
    };
    let has = |n: &str| prof.linear_names.iter().any(|m| m == n);
    let (qkv_names, o_name): (Vec<&str>, &str) = match spec.attention {
        Attention::Separate => (vec!["q_proj", "k_proj", "v_proj"], "o_proj"),
        Attention::FusedQkv => {
            let q = ["c_attn", "qkv_proj", "query_key_value"].into_iter().find(|n| has(n)).unwrap_or("qkv");
            let o = ["c_proj", "o_proj", "dense"].into_iter().find(|n| has(n)).unwrap_or("o_proj");
            (vec![q], o)
        }
        Attention::Mla => (vec!["q_a_proj", "q_proj", "kv_a_proj_with_mqa"], "o_proj"),
    };
    let (up_names, down_name): (Vec<&str>, &str) = match (spec.mlp, spec.family) {
        (MlpKind::Gated, crate::model::Family::Phi3) => (vec!["gate_up_proj"], "down_proj"),
        (MlpKind::Gated, crate::model::Family::Mixtral) => (vec!["w1", "w3"], "w2"),
        (MlpKind::Gated, _) => (vec!["gate_proj", "up_proj"], "down_proj"),
        (MlpKind::Plain, crate::model::Family::Gpt2) => (vec!["c_fc"], "c_proj"),
        (MlpKind::Plain, _) => (vec!["dense_h_to_4h"], "dense_4h_to_h"),
    };

    // One norm: (replicated bytes) incl. the linear-input site it feeds.
    let norm = |consumers: &[&str]| -> u64 {
        let out = site(h, consumers);
        match spec.norm {
            NormKind::RmsNorm => {
                let internal = 4 * h + 4; // fp32 input or upcast, + rsqrt
                let normed = if full {
                    if fp32_stream {
                        4 * h
                    } else {
                        a * h
                    }
                } else {
                    0
                };
                internal + normed + out
            }
            NormKind::LayerNorm => r * h + 8 + out,
        }
    };
    let norms = spec.norms_per_layer.max(1);
    let mut rep = if norms == 1 {
        // one norm feeds attention and MLP (Falcon-7B parallel block)
        let both: Vec<&str> = qkv_names.iter().chain(up_names.iter()).copied().collect();
        norm(&both)
    } else {
        // Gemma-2 style extra post-norms keep their fp32 inputs
        let both = norm(&qkv_names) + norm(&up_names) + (norms - 2) * (4 * h + 4);
        if spec.parallel_residual {
            // GPT-NeoX parallel block: both norms read the same residual, saved once
            let input = match spec.norm {
                NormKind::LayerNorm => r * h,
                // a 16-bit stream is upcast separately by each norm: nothing shared
                NormKind::RmsNorm if fp32_stream => 4 * h,
                NormKind::RmsNorm => 0,
            };
            both - input
        } else {
            both
        }
    };
    let hidden_drop = spec.hidden_dropout > 0.0;
    if hidden_drop {
        rep += 2 * h;
    }

    // Attention core.
    let repeat = setup.attention == AttentionImpl::Eager || (p == Precision::Fp32 && kvw < qw);
    let kv_saved = if repeat { qw } else { kvw };
    // k and v split over TP by kv heads (each rank keeps at least one): kept apart
    let layer_kv = if repeat { 0 } else { 2 * a * kvw };
    let mut split = a * qw + 2 * a * kv_saved - layer_kv + a * aw;
    if setup.attention == AttentionImpl::Sdpa {
        split += 4 * heads;
    }
    if spec.attention_dropout > 0.0 || !full {
        // full fine-tune: o_proj reuses the kernel's output unless attention
        // dropout forces a contiguous copy; LoRA: the adapter's own input copy
        split += site(aw, &[o_name]);
    }
    if autocast && spec.positional == Positional::Rotary {
        split += AMP_ROPE_EXTRA_PER_QW * qw;
    }
    let per_key = if setup.attention == AttentionImpl::Eager {
        let cast = if a != 4 { a } else { 0 };
        let d = if spec.attention_dropout > 0.0 { 1 + a } else { 0 };
        heads * (4 + cast + d)
    } else {
        0
    };

    // MLP.
    let width = match &spec.moe {
        Some(m) if spec.moe_layers() > 0 => {
            m.expert_intermediate * m.experts_per_token + m.shared_intermediate * m.shared_experts
        }
        _ => spec.intermediate_size,
    };
    split += match spec.mlp {
        MlpKind::Gated => 3 * a * width + site(width, &[down_name]),
        MlpKind::Plain => {
            let gelu_new = matches!(spec.activation.as_str(), "gelu_new" | "gelu_fast" | "quick_gelu");
            let act_inter = if gelu_new { 3 * a * width } else { 0 };
            a * width + act_inter + site(width, &[down_name])
        }
    };
    if let Some(m) = &spec.moe {
        if spec.moe_layers() > 0 {
            // router logits (fp32 softmax over experts) and routing weights
            split += 4 * m.num_experts + 8 * m.experts_per_token;
        }
    }

    // Ends: final norm (+ the head's input when the head trains) and embedding dropout mask.
    let head_trains = full || adapted("lm_head");
    let final_norm = match spec.norm {
        NormKind::RmsNorm => {
            4 * h + 4 + if head_trains { (if fp32_stream { 4 * h } else { a * h }) + a * h } else { 0 }
        }
        NormKind::LayerNorm => r * h + 8 + if head_trains { a * h } else { 0 },
    };
    let ends = final_norm + if hidden_drop { h } else { 0 };
    let lb = if setup.logits_fp32 { 4 } else { a };
    Ok(ActProfile {
        layer_rep: rep,
        layer_split: split,
        layer_per_key: per_key,
        layer_kv,
        kv_heads: spec.num_kv_heads,
        layer_input: r * h,
        ends,
        logits_saved: lb,
        logits_grad: 2 * lb,
        weight_copy_bytes: if autocast { 2 } else { 0 },
        fp32_stream,
    })
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
