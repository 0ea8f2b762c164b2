//! Serving or batch inference: what is run and with which dtypes.

use super::defaults;
use super::Engine;
use crate::dtype::DType;
use crate::quant::QuantSpec;
use serde::{Deserialize, Serialize};

/// Serving or batch inference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InferenceSetup {
    /// storage dtype of unquantized weights (and of everything that stays 16-bit)
    pub weight_dtype: DType,
    /// weight-only quantization applied (from the checkpoint or `--dtype int4|int8|fp8`)
    pub quant: Option<QuantSpec>,
    pub kv_dtype: DType,
    /// sequences processed together in one prefill step
    pub batch: u64,
    /// sequences whose KV cache is resident at once (≥ batch)
    pub concurrency: u64,
    /// tokens per sequence: prompt + generated
    pub context: u64,
    /// logits materialised in fp32 (an upcast before sampling or loss)
    pub logits_fp32: bool,
    /// paged KV block size in tokens (vLLM default 16)
    pub block_size: u64,
    /// the engine serving the model (its start-up sizing: [`super::Engine::serving`])
    pub engine: Engine,
    /// with a quantization: the output head is quantized too (LitGPT's
    /// bitsandbytes precision replaces every `nn.Linear`)
    pub quantize_lm_head: bool,
    /// serving engines: tokens of the start-up profiling forward (None: the engine's default)
    pub max_num_batched_tokens: Option<u64>,
    /// serving engines: sequences of the start-up profiling run (None: the engine's default)
    pub max_num_seqs: Option<u64>,
    /// how the sliding-window layers are cached (the engine decides)
    #[serde(default)]
    pub sliding_window_cache: SlidingWindowCache,
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

impl Default for InferenceSetup {
    fn default() -> Self {
        InferenceSetup {
            weight_dtype: defaults::WEIGHT_DTYPE,
            quant: None,
            kv_dtype: defaults::KV_DTYPE,
            batch: defaults::BATCH,
            concurrency: defaults::BATCH,
            context: defaults::CONTEXT,
            logits_fp32: false,
            block_size: defaults::BLOCK_SIZE,
            engine: Engine::Transformers,
            quantize_lm_head: false,
            max_num_batched_tokens: None,
            max_num_seqs: None,
            sliding_window_cache: SlidingWindowCache::default(),
        }
    }
}

impl InferenceSetup {
    /// dtype of activations and unquantized weights during compute.
    pub fn weight_dtype_compute(&self) -> DType {
        match &self.quant {
            Some(q) => q.compute_dtype,
            None if self.weight_dtype.is_compute_float() => self.weight_dtype,
            None => DType::F16,
        }
    }

    /// The weight format in words: the quantization label, else the dtype.
    pub fn weights_label(&self) -> String {
        match &self.quant {
            Some(q) => q.label.clone(),
            None => self.weight_dtype.name().to_string(),
        }
    }
}
