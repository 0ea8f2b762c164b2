//! Serving or batch inference: what is run and with which dtypes.

use super::defaults;
use super::engine::{Engine, ServingDefaults};
use super::policy::SlidingWindowCache;
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
    /// the engine serving the model (its start-up sizing: [`Engine::serving`])
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
    /// which prompt positions the prefill computes logits for (the engine decides)
    #[serde(default)]
    pub prefill_logits: PrefillLogits,
    /// a serving engine's release (`--engine vllm@0.8`); `None`: the latest modelled
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_version: Option<super::engine::EngineVersion>,
    /// the card a serving engine starts on, whose batch defaults it takes
    /// (vLLM V1 `get_batch_defaults`); `None`: not known, the larger defaults
    #[serde(skip)]
    pub serving_card: Option<super::engine::ServingCard>,
    /// which vLLM entry point starts the engine (`--vllm-entry`): `vllm serve`
    /// or the offline `LLM(...)` class, whose batch defaults differ
    #[serde(default, skip_serializing_if = "is_serve")]
    pub vllm_entry: super::engine::VllmEntry,
    /// the engine's CUDA-graph pool as its start-up log gives it
    /// (`--cuda-graph-mib`: vLLM's "Graph capturing finished … took X GiB" or
    /// "Estimated CUDA graph memory: X GiB"); `None`: the release's rule
    /// ([`crate::serving::graph_pool_bytes`])
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_graph_bytes: Option<u64>,
    /// SGLang's `--speculative-algorithm`: its `mem_fraction_static` rule keeps
    /// a reserve for the draft ([`super::engine::ShareRule::speculative_reserve_mib`])
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speculative_algorithm: Option<super::engine::SpeculativeAlgorithm>,
    /// vLLM's `--enforce-eager`: no CUDA graphs are captured (`capture_model`
    /// is skipped when `model_config.enforce_eager`, and V1 sets
    /// `cudagraph_mode = NONE`), so there is no graph pool
    /// ([`crate::serving::graph_model`])
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub enforce_eager: bool,
}

fn is_serve(e: &super::engine::VllmEntry) -> bool {
    *e == super::engine::VllmEntry::Serve
}

/// Which prompt positions a prefill computes logits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrefillLogits {
    /// what the engine's `generate` does: [`Engine::keeps_last_logits`]
    #[default]
    Engine,
    /// every prompt token: a plain `model(input_ids)` forward, or transformers before 4.45
    AllTokens,
    /// the last token only: `generate` with `logits_to_keep=1`
    LastToken,
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
            prefill_logits: PrefillLogits::Engine,
            engine_version: None,
            serving_card: None,
            vllm_entry: super::engine::VllmEntry::Serve,
            cuda_graph_bytes: None,
            speculative_algorithm: None,
            enforce_eager: false,
        }
    }
}

impl InferenceSetup {
    /// The serving engine's row for its release ([`super::engine::ServingEngine::release`]);
    /// `None` for engines that run `generate`, or a release not modelled
    /// (`validate::inference` refuses it).
    pub fn serving_facts(&self) -> Option<&'static super::engine::ServingFacts> {
        match self.engine.kind() {
            super::engine::EngineKind::Serving(e) => e.release(self.engine_version).ok(),
            super::engine::EngineKind::Training(_) => None,
        }
    }

    /// How the serving engine of this release sizes its start-up memory.
    pub fn serving(&self) -> Option<ServingDefaults> {
        self.serving_facts().map(|f| f.startup)
    }

    /// The fraction of a card whose nvidia-smi total is `card_total_bytes`
    /// the serving engine takes in the layout `par` (TP × PP, data-parallel
    /// attention): the one given, else the release's fixed default (vLLM
    /// 0.9), else its rule from the card (SGLang's `mem_fraction_static`,
    /// [`super::engine::ShareRule`]); `None` for engines that run `generate`
    /// without `--gpu-util`.
    pub fn gpu_util_on(&self, given: Option<f64>, card_total_bytes: u64, par: &super::Parallelism) -> Option<f64> {
        if given.is_some() {
            return given;
        }
        let d = self.serving()?;
        let mib = card_total_bytes / crate::units::MIB;
        d.default_gpu_util.or_else(|| {
            d.share_rule.map(|r| {
                r.fraction_with(
                    mib,
                    par.tp,
                    par.pp,
                    self.max_num_batched_tokens,
                    par.dp_attention.max(1),
                    self.speculative_algorithm,
                )
            })
        })
    }

    /// dtype of activations and unquantized weights during compute.
    pub fn weight_dtype_compute(&self) -> DType {
        match &self.quant {
            Some(q) => q.compute_dtype,
            None if self.weight_dtype.is_compute_float() => self.weight_dtype,
            None => DType::F16,
        }
    }

    /// The prefill computes logits for the last prompt token only.
    pub fn last_logits_only(&self) -> bool {
        match self.prefill_logits {
            PrefillLogits::Engine => self.engine.keeps_last_logits(),
            PrefillLogits::AllTokens => false,
            PrefillLogits::LastToken => true,
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
