//! The behaviours an engine chooses among and a flag can override: how the
//! loss meets the logits (training) and how sliding-window layers are cached
//! (inference). Each engine's choice is a fact of its row in
//! [`super::engine`]; the setups hold the value in force.

use super::defaults;
use serde::{Deserialize, Serialize};

/// How the cross-entropy loss meets the vocabulary-sized logits: what is
/// kept for backward and what is live at its start, per token per
/// vocabulary entry (the biggest single item at 128k+ vocabularies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum LossPath {
    /// the compute-dtype logits are upcast to fp32 for the loss (transformers
    /// `ForCausalLMLoss`, torchtitan): the saved fp32 log-softmax (4 B) and, at the
    /// start of backward, the fp32 gradients of log-softmax and logits (2 × 4 B);
    /// measured on shared/calibration group C
    #[default]
    Fp32,
    /// transformers up to 4.48 (`ForCausalLMLoss` before PR #35646, and the in-model
    /// losses before it): `logits = logits.float()` then `shift_logits =
    /// logits[..., :-1, :].contiguous()`, a second fp32 copy. The backward start is
    /// `Fp32`'s; the end of forward is higher: inside `cross_entropy` the compute-dtype
    /// logits (still referenced by the model's forward), the fp32 upcast, its shifted
    /// copy and the log-softmax output are live at once (act + 4 + 4 + 4 B)
    Fp32ShiftCopy,
    /// cross-entropy on the compute-dtype logits, no upcast: 2 B saved + 2 × 2 B gradients
    Compute,
    /// the head runs over the whole sequence but the fp32 loss one chunk at a time
    /// (torchtune `CEWithChunkedOutputLoss`, `num_output_chunks` = `chunks`): every
    /// chunk's fp32 log-softmax is saved (4 B); the backward gradients exist one chunk
    /// at a time ((4 + 4 + 2 B) ÷ chunks)
    Chunked { chunks: u64 },
    /// head and loss both chunked by `tokens` (LitGPT `lm_head_chunk_size=128` +
    /// `chunked_cross_entropy`, no upcast): the compute-dtype logit chunks stay
    /// alive in a list (2 B) beside their saved log-softmax (2 B)
    ChunkedTokens { tokens: u64 },
    /// fused linear + cross-entropy that never materialises the logits (Liger
    /// `LigerFusedLinearCrossEntropyLoss`, cut-cross-entropy): no vocabulary-sized
    /// tensor is saved; one chunk of fp32 logits and gradients exists at a time
    Fused,
}

impl LossPath {
    /// The `--loss` name.
    pub fn name(self) -> &'static str {
        match self {
            LossPath::Fp32 => "fp32",
            LossPath::Fp32ShiftCopy => "fp32-shift-copy",
            LossPath::Compute => "bf16",
            LossPath::Chunked { .. } => "chunked",
            LossPath::ChunkedTokens { .. } => "chunked-tokens",
            LossPath::Fused => "fused",
        }
    }
}

impl std::str::FromStr for LossPath {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s.to_ascii_lowercase().replace('_', "-").as_str() {
            "fp32" | "upcast" => LossPath::Fp32,
            "fp32-shift-copy" | "transformers-4.48" => LossPath::Fp32ShiftCopy,
            "bf16" | "fp16" | "compute" | "no-upcast" => LossPath::Compute,
            "chunked" => LossPath::Chunked { chunks: 8 },
            "fused" | "liger" | "cce" | "cut-cross-entropy" => LossPath::Fused,
            _ => {
                return Err(format!("unknown loss path '{s}': expected fp32, fp32-shift-copy, bf16, chunked or fused"))
            }
        })
    }
}

/// How an engine caches the layers that attend over a sliding window
/// (Gemma 2/3, gpt-oss, Mistral v0.1, …). Full-attention layers always keep
/// the whole context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SlidingWindowCache {
    /// Each sliding layer keeps the last `window` tokens plus the block the
    /// window straddles: vLLM's hybrid KV-cache manager (`SlidingWindowSpec`,
    /// on by default in vLLM v1), SGLang's SWA pool, and transformers'
    /// `DynamicSlidingWindowLayer` (the `DynamicCache` `generate()` builds
    /// from the config). The default.
    #[default]
    Window,
    /// Every sliding layer keeps the whole context: vLLM with
    /// `--disable-hybrid-kv-cache-manager` (its `FullAttentionSpec` "regarded
    /// as full attention"), or a transformers `DynamicCache()` built without
    /// the config.
    Full,
    /// llama.cpp's iSWA cache: `pad(min(context, window + n_ubatch), 256)`
    /// cells per sequence (`--swa-full` is [`SlidingWindowCache::Full`]).
    LlamaCpp {
        /// `-ub`, llama.cpp's micro-batch (default 512)
        ubatch: u64,
    },
}

impl SlidingWindowCache {
    /// The flag spelling (`window`, `full`, `llamacpp`).
    pub fn name(self) -> &'static str {
        match self {
            SlidingWindowCache::Window => "window",
            SlidingWindowCache::Full => "full",
            SlidingWindowCache::LlamaCpp { .. } => "llamacpp",
        }
    }
}

impl std::str::FromStr for SlidingWindowCache {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "window" => Ok(SlidingWindowCache::Window),
            "full" => Ok(SlidingWindowCache::Full),
            "llamacpp" | "llama.cpp" => Ok(SlidingWindowCache::LlamaCpp { ubatch: defaults::LLAMACPP_UBATCH }),
            other => Err(format!("'{other}' is not one of window, full, llamacpp")),
        }
    }
}
