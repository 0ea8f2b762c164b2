//! The software that runs the job, and what it does by default that
//! changes memory. `--engine` names it; its behaviour fills the defaults of
//! the training and serving setups (every default can still be overridden
//! by its own flag). Each default cites where the engine does it.
//!
//! | engine | loss path | LoRA adapters | QLoRA preparation | bnb `lm_head` | data-parallel buffers |
//! |---|---|---|---|---|---|
//! | `transformers` (HF Trainer + PEFT) | fp32 upcast of full logits | fp32 | `prepare_model_for_kbit_training` | kept 16-bit | DDP: NCCL + gradient buckets |
//! | `deepspeed` (HF Trainer + ZeRO) | fp32 upcast | fp32 | as transformers | kept 16-bit | ZeRO reduce / all-gather buckets |
//! | `fsdp` (HF Trainer / accelerate FSDP) | fp32 upcast | fp32 | as transformers | kept 16-bit | FSDP all-gather / reduce-scatter |
//! | `litgpt` | chunked (128-token lm_head + CE chunks) | compute dtype | none | quantized | FSDP |
//! | `torchtune` | chunked (`CEWithChunkedOutputLoss`, 8 chunks) | compute dtype | none | kept 16-bit | FSDP2 |
//! | `torchtitan` | fp32 upcast | – | – | – | FSDP2 |
//! | `vllm`, `sglang` | serving only: see [`ServingDefaults`] | | | | |

use super::inference::SlidingWindowCache;
use super::training::LossPath;
use serde::{Deserialize, Serialize};

/// The framework or serving engine that runs the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// Hugging Face `transformers` (Trainer, PEFT, bitsandbytes; `generate` for inference)
    #[default]
    Transformers,
    /// Hugging Face Trainer with a DeepSpeed ZeRO config
    Deepspeed,
    /// Hugging Face Trainer / accelerate with PyTorch FSDP
    Fsdp,
    /// Lightning AI LitGPT (Fabric)
    Litgpt,
    /// PyTorch torchtune recipes
    Torchtune,
    /// PyTorch torchtitan (FSDP2 pre-training)
    Torchtitan,
    /// vLLM serving
    Vllm,
    /// SGLang serving
    Sglang,
}

/// How a serving engine sizes its memory at start-up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServingDefaults {
    /// tokens of the start-up profiling forward (vLLM `max_num_batched_tokens`)
    pub max_num_batched_tokens: u64,
    /// sequences the sampler handles at once (vLLM `max_num_seqs`): rows of logits
    pub max_num_seqs: u64,
    /// memory outside the PyTorch allocator at one GPU, measured at start-up, when
    /// the engine's own log gives it (else the runtime's context + workspaces)
    pub non_torch_tp1: Option<u64>,
    /// the fraction of the card the engine takes when none is given (vLLM
    /// `gpu_memory_utilization`); `None` when the engine derives it from the card
    pub default_gpu_util: Option<f64>,
}

/// vLLM's default `gpu_memory_utilization` (`EngineArgs` / `CacheConfig`: 0.9).
pub const VLLM_GPU_UTIL: f64 = 0.9;

/// vLLM's non-torch memory of a TP-1 server on an H100: "non_torch_memory 1.79GiB"
/// (vLLM PR #10511, V0, Llama-3-8B): the CUDA context, the kernel images its
/// profiling run loads, and the allocator cache that this accounting still counted
/// (device used − torch allocated; PR #11809 later subtracted reserved instead).
pub const VLLM_NON_TORCH: u64 = 1_921_997_865;

impl Engine {
    pub const ALL: [Engine; 8] = [
        Engine::Transformers,
        Engine::Deepspeed,
        Engine::Fsdp,
        Engine::Litgpt,
        Engine::Torchtune,
        Engine::Torchtitan,
        Engine::Vllm,
        Engine::Sglang,
    ];

    /// The `--engine` value and the JSON spelling.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Transformers => "transformers",
            Engine::Deepspeed => "deepspeed",
            Engine::Fsdp => "fsdp",
            Engine::Litgpt => "litgpt",
            Engine::Torchtune => "torchtune",
            Engine::Torchtitan => "torchtitan",
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
        }
    }

    /// A serving engine (no training).
    pub fn serves_only(self) -> bool {
        matches!(self, Engine::Vllm | Engine::Sglang)
    }

    /// The loss path the engine uses for a causal-LM fine-tune.
    ///
    /// transformers `ForCausalLMLoss` upcasts the full logits (`logits.float()`, 4.46+;
    /// `LlamaForCausalLM.forward` before it); torchtitan's `cross_entropy_loss` calls
    /// `pred.flatten(0, 1).float()`; torchtune's recipes use `CEWithChunkedOutputLoss`
    /// (`num_output_chunks = 8`); LitGPT's `finetune/lora.py` runs the head in 128-token
    /// chunks (`lm_head_chunk_size=128`) and `chunked_cross_entropy`.
    pub fn loss(self) -> LossPath {
        match self {
            Engine::Torchtune => LossPath::Chunked { chunks: 8 },
            Engine::Litgpt => LossPath::ChunkedTokens { tokens: 128 },
            _ => LossPath::Fp32,
        }
    }

    /// LoRA adapter weights kept in fp32 over a 16-bit base. PEFT's
    /// `get_peft_model(..., autocast_adapter_dtype=True)` (the default since PEFT 0.12)
    /// casts adapters to fp32; torchtune and LitGPT create them in the model dtype.
    pub fn adapters_fp32(self) -> bool {
        !matches!(self, Engine::Torchtune | Engine::Litgpt)
    }

    /// QLoRA through PEFT's `prepare_model_for_kbit_training` (TRL `SFTTrainer`, the PEFT
    /// QLoRA recipes): it casts every non-quantized parameter (norms, embeddings, the
    /// output head) to fp32 and turns on input gradients.
    pub fn kbit_prep(self) -> bool {
        matches!(self, Engine::Transformers | Engine::Deepspeed | Engine::Fsdp)
    }

    /// QLoRA's 4-bit base is bitsandbytes (`Linear4bit`, whose `MatMul4Bit` keeps
    /// each linear's input for backward); torchtune quantizes with torchao's
    /// `NF4Tensor`, whose `linear_nf4` keeps only the weight.
    pub fn qlora_is_bitsandbytes(self) -> bool {
        self != Engine::Torchtune
    }

    /// bitsandbytes quantizes the output head too. transformers skips `lm_head`
    /// (`get_keys_to_not_convert` / `llm_int8_skip_modules`); Lightning's
    /// `BitsandbytesPrecision` (LitGPT) replaces every `nn.Linear`, the head included.
    pub fn quantizes_lm_head(self) -> bool {
        self == Engine::Litgpt
    }

    /// Gradient accumulation under FSDP skips the reduce-scatter of the accumulating
    /// micro-batches (`no_sync`), so every gradient stays unsharded between them:
    /// accelerate's `accumulate()` (HF Trainer, `Engine::Fsdp`) and Lightning Fabric's
    /// `no_backward_sync(model, enabled=is_accumulating)`, which LitGPT's
    /// `finetune/full.py` and `finetune/lora.py` wrap every accumulating micro-batch in
    /// (Fabric's FSDP strategy enters `FullyShardedDataParallel.no_sync()`).
    pub fn fsdp_accumulates_unsharded(self) -> bool {
        matches!(self, Engine::Fsdp | Engine::Litgpt)
    }

    /// FSDP1 (`FullyShardedDataParallel`: accelerate, Lightning Fabric) does not free the
    /// root unit's unsharded parameters after forward under `FULL_SHARD`, "with the
    /// intention that they are immediately used for backward computation"
    /// (`torch/distributed/fsdp/_runtime_utils.py`, `_post_forward_reshard`: `free_unsharded_flat_param
    /// = not state._is_root and …`). With a per-decoder-layer wrap policy (accelerate's
    /// `TRANSFORMER_BASED_WRAP`, LitGPT's `auto_wrap_policy={Block}`) the root holds the
    /// embeddings, the final norm and the output head.
    pub fn fsdp_root_unsharded_in_backward(self) -> bool {
        matches!(self, Engine::Fsdp | Engine::Litgpt)
    }

    /// Frozen FSDP1 units under the HF Trainer's reentrant gradient checkpointing keep
    /// every checkpointed layer's input and its gradient until the end of backward.
    /// transformers' `gradient_checkpointing_enable` defaults to `use_reentrant=True`
    /// and wraps each decoder layer's `__call__` (the FSDP-wrapped unit) in
    /// `torch.utils.checkpoint`; its backward recomputes the unit on detached leaf
    /// inputs and accumulates their gradients into `.grad`. For a unit whose
    /// `FlatParameter` does not require grad (a LoRA/QLoRA base layer: PEFT's
    /// `fsdp_auto_wrap_policy`, which the Trainer installs, wraps the adapters in their
    /// own units), FSDP1 registers its reshard-only hook with
    /// `register_multi_grad_hook` on those leaf inputs
    /// (`_register_post_backward_reshard_only_hook`, `torch/distributed/fsdp/_runtime_utils.py`);
    /// the hook closes over their `AccumulateGrad` nodes (`grad_fns`,
    /// `torch/autograd/graph.py`), which hold the leaf and its `.grad`, and FSDP removes it
    /// only in `_finalize_params` at the end of backward.
    pub fn fsdp_frozen_units_keep_checkpoint_grads(self) -> bool {
        self == Engine::Fsdp
    }

    /// Under tensor parallelism the engine computes the loss vocabulary-parallel
    /// (`torch.distributed.tensor.parallel.loss_parallel()`): torchtitan turns it on
    /// whenever TP > 1 (`ParallelDims.loss_parallel_enabled`: `tp > 1 and
    /// enable_loss_parallel`, `--training.disable_loss_parallel` off by default; the
    /// output projection keeps `Shard(-1)` logits). Its fused backward
    /// (`torch/distributed/tensor/parallel/loss.py`, `_nll_loss_and_log_softmax_backward`:
    /// `grad_input = zeros_like(x)`, then `(grad_input + exp(x)) * grad_output`) holds
    /// three fp32 vocabulary-shard buffers beside the saved log-softmax, one more than
    /// `log_softmax`'s own backward.
    pub fn loss_parallel_under_tp(self) -> bool {
        self == Engine::Torchtitan
    }

    /// How the engine caches the layers that attend over a sliding window
    /// (`--sliding-window-cache` overrides it). vLLM v1's hybrid KV-cache manager
    /// (`SlidingWindowSpec`, on unless `--disable-hybrid-kv-cache-manager`), SGLang's
    /// SWA pool and transformers' `generate()` (its `DynamicCache` built from the
    /// config holds a `DynamicSlidingWindowLayer` per sliding layer) keep the window
    /// only (docs/inference.md, "KV cache"). LitGPT (`set_kv_cache(batch_size,
    /// max_seq_length)`: one dense cache per block) and torchtune
    /// (`setup_caches(batch_size, dtype, decoder_max_seq_len)`) allocate the whole
    /// length for every layer and apply the window as a mask. Training engines hold
    /// no cache; they keep the default.
    pub fn sliding_window_cache(self) -> SlidingWindowCache {
        match self {
            Engine::Litgpt | Engine::Torchtune => SlidingWindowCache::Full,
            Engine::Vllm | Engine::Sglang | Engine::Transformers => SlidingWindowCache::Window,
            Engine::Deepspeed | Engine::Fsdp | Engine::Torchtitan => SlidingWindowCache::default(),
        }
    }

    /// How a serving engine sizes its start-up memory, or `None` for engines that
    /// run `generate` (the whole prompt's logits, no profiling).
    ///
    /// vLLM: `SchedulerConfig` defaults `max_num_seqs = 256` and, without chunked
    /// prefill, `max_num_batched_tokens = max(max_model_len, 2048)` (chunked prefill:
    /// 2048 on V0, 8192 on the V1 server); the profiling run computes logits for one
    /// row per sequence (`compute_logits` on the sampled indices: the ledger's
    /// profiling run has no logits line) and CUDA graphs are captured after the KV
    /// cache is allocated (`capture_model`: outside the budget, not a ledger line). SGLang:
    /// `chunked_prefill_size` 8192 and `max_running_requests` sized from the pool;
    /// the same start-up shape is assumed. vLLM takes `gpu_memory_utilization`
    /// 0.9 of the card unless told otherwise.
    pub fn serving(self) -> Option<ServingDefaults> {
        match self {
            Engine::Vllm => Some(ServingDefaults {
                max_num_batched_tokens: 0,
                max_num_seqs: 256,
                non_torch_tp1: Some(VLLM_NON_TORCH),
                default_gpu_util: Some(VLLM_GPU_UTIL),
            }),
            Engine::Sglang => Some(ServingDefaults {
                max_num_batched_tokens: 8192,
                max_num_seqs: 256,
                non_torch_tp1: None,
                // `mem_fraction_static` is chosen at start-up from the card's memory and
                // the TP size (`ServerArgs.__post_init__`), and has changed between
                // releases: not assumed, `--gpu-util` names it
                default_gpu_util: None,
            }),
            _ => None,
        }
    }
}

impl Engine {
    /// The fraction of the card a serving engine takes: the one given, else the
    /// engine's own default (vLLM 0.9); `None` for `generate`-style engines and
    /// for engines that choose it from the card (SGLang).
    pub fn gpu_util(self, given: Option<f64>) -> Option<f64> {
        given.or_else(|| self.serving().and_then(|d| d.default_gpu_util))
    }
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let n = s.to_ascii_lowercase().replace(['_', ' '], "-");
        let n = match n.as_str() {
            "hf" | "huggingface" | "hugging-face" | "peft" | "trl" | "accelerate" => "transformers",
            "ds" | "zero" => "deepspeed",
            "lit-gpt" => "litgpt",
            other => other,
        };
        Engine::ALL.iter().copied().find(|e| e.name() == n).ok_or_else(|| {
            let names: Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
            format!("unknown engine '{s}': expected one of {}", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for e in Engine::ALL {
            assert_eq!(e.name().parse::<Engine>(), Ok(e));
            assert_eq!(serde_json::to_value(e).unwrap(), e.name());
        }
        assert_eq!("HF".parse::<Engine>(), Ok(Engine::Transformers));
        assert!("tgi".parse::<Engine>().unwrap_err().contains("expected one of transformers"));
    }

    #[test]
    fn engine_defaults_follow_their_sources() {
        assert_eq!(Engine::Transformers.loss(), LossPath::Fp32);
        assert_eq!(Engine::Torchtune.loss(), LossPath::Chunked { chunks: 8 });
        assert!(Engine::Transformers.adapters_fp32() && !Engine::Torchtune.adapters_fp32());
        assert!(Engine::Transformers.kbit_prep() && !Engine::Litgpt.kbit_prep());
        assert!(Engine::Litgpt.quantizes_lm_head() && !Engine::Transformers.quantizes_lm_head());
        assert!(Engine::Vllm.serving().is_some() && Engine::Transformers.serving().is_none());
    }

    #[test]
    fn only_vllm_has_a_default_utilisation_and_a_given_one_wins() {
        assert_eq!(Engine::Vllm.gpu_util(None), Some(VLLM_GPU_UTIL));
        assert_eq!(Engine::Vllm.gpu_util(Some(0.5)), Some(0.5));
        assert_eq!(Engine::Sglang.gpu_util(None), None);
        assert_eq!(Engine::Transformers.gpu_util(None), None);
        assert_eq!(Engine::Transformers.gpu_util(Some(0.8)), Some(0.8));
    }
}
