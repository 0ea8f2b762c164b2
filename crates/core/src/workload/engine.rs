//! The software that runs the job, and what it does by default that
//! changes memory. `--engine` names it ([`Engine`]); it is either a training
//! framework ([`Framework`], which also runs `generate`) or a serving engine
//! ([`ServingEngine`]). Each one's behaviour is a row of facts
//! ([`FrameworkFacts`], [`ServingFacts`]), each fact with its source; the
//! setups take their defaults from the row, and every default can still be
//! overridden by its own flag.
//!
//! | engine | loss path | LoRA adapters | QLoRA preparation | bnb `lm_head` | data-parallel buffers |
//! |---|---|---|---|---|---|
//! | `transformers` (HF Trainer + PEFT) | fp32 upcast of full logits | fp32 | `prepare_model_for_kbit_training` | kept 16-bit | DDP: NCCL + gradient buckets |
//! | `deepspeed` (HF Trainer + ZeRO) | fp32 upcast | fp32 | as transformers | kept 16-bit | ZeRO reduce / all-gather buckets |
//! | `fsdp` (HF Trainer / accelerate FSDP) | fp32 upcast | fp32 | as transformers | kept 16-bit | FSDP all-gather / reduce-scatter |
//! | `litgpt` | chunked (128-token lm_head + CE chunks) | compute dtype | none | quantized | FSDP |
//! | `torchtune` | chunked (`CEWithChunkedOutputLoss`, 8 chunks) | compute dtype | none | kept 16-bit | FSDP2 |
//! | `torchtitan` | fp32 upcast | – | – | – | FSDP2 |
//! | `megatron` (Megatron-LM / Megatron-Core) | fp32 vocabulary-parallel cross entropy | – | – | – | DDP grad buffer (fp32 main grads); `--use-distributed-optimizer` = ZeRO-1 |
//! | `vllm`, `sglang` | serving only: see [`ServingFacts`] | | | | |
//!
//! Adding a serving engine: a variant of [`Engine`] and [`ServingEngine`]
//! (with its `--engine` name), and its row of [`ServingFacts`]
//! (docs/CONTRIBUTING.md). A row describes one engine as its sources read; a
//! release that changes a fact gets a row of its own, keyed by
//! ([`ServingEngine`], version).

use super::policy::{LossPath, SlidingWindowCache};
use serde::{Deserialize, Serialize};

/// What `--engine` names: a training framework or a serving engine. The
/// `--engine` value and the JSON spelling are [`Engine::name`].
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
    /// NVIDIA Megatron-LM / Megatron-Core (`pretrain_gpt.py`)
    Megatron,
    /// vLLM serving
    Vllm,
    /// SGLang serving
    Sglang,
}

/// A training framework (its `generate` path sizes inference).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framework {
    Transformers,
    Deepspeed,
    Fsdp,
    Litgpt,
    Torchtune,
    Torchtitan,
    Megatron,
}

/// A serving engine: it sizes its own memory at start-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServingEngine {
    Vllm,
    Sglang,
}

impl ServingEngine {
    pub const ALL: [ServingEngine; 2] = [ServingEngine::Vllm, ServingEngine::Sglang];

    /// The `--engine` value naming it.
    pub fn engine(self) -> Engine {
        match self {
            ServingEngine::Vllm => Engine::Vllm,
            ServingEngine::Sglang => Engine::Sglang,
        }
    }
}

/// Which kind of software an [`Engine`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    Training(Framework),
    Serving(ServingEngine),
}

/// How the QLoRA base is quantized, which decides what a quantized linear
/// keeps for backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QloraBase {
    /// bitsandbytes `Linear4bit`, whose `MatMul4Bit` keeps each linear's input for backward
    Bitsandbytes,
    /// torchao's `NF4Tensor`, whose `linear_nf4` keeps only the weight
    TorchaoNf4,
}

/// What shards the model states when a sharding stage is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharder {
    /// DeepSpeed ZeRO, or PyTorch FSDP when `--fsdp` says so (the HF Trainer
    /// runs whichever its config names)
    ZeroUnlessFsdp,
    /// DeepSpeed ZeRO: its reduce / all-gather buckets
    Zero,
    /// PyTorch FSDP (FSDP1 or FSDP2): reduce-scatter of each wrapped unit
    Fsdp,
}

/// What a training framework does by default that changes memory. One row
/// per [`Framework`]; the comment on each field of a row cites where the
/// framework does it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FrameworkFacts {
    pub framework: Framework,
    /// the loss path of a causal-LM fine-tune
    pub loss: LossPath,
    /// LoRA adapter weights kept in fp32 over a 16-bit base
    pub adapters_fp32: bool,
    /// QLoRA through PEFT's `prepare_model_for_kbit_training`: every
    /// non-quantized parameter (norms, embeddings, the output head) cast to
    /// fp32, input gradients on
    pub kbit_prep: bool,
    pub qlora_base: QloraBase,
    /// bitsandbytes quantizes the output head too
    pub quantizes_lm_head: bool,
    pub sharder: Sharder,
    /// gradient accumulation under FSDP skips the reduce-scatter of the
    /// accumulating micro-batches (`no_sync`): every gradient stays unsharded
    /// between them
    pub fsdp_accumulates_unsharded: bool,
    /// FSDP1 does not free the root unit's unsharded parameters after forward
    /// under `FULL_SHARD` (`_post_forward_reshard`: `free_unsharded_flat_param
    /// = not state._is_root and …`, `torch/distributed/fsdp/_runtime_utils.py`);
    /// with a per-decoder-layer wrap the root holds the embeddings, the final
    /// norm and the output head
    pub fsdp_root_unsharded_in_backward: bool,
    /// frozen FSDP1 units under reentrant gradient checkpointing keep every
    /// checkpointed layer's input and its gradient until the end of backward:
    /// FSDP1 reshards a unit whose `FlatParameter` does not require grad (a
    /// LoRA/QLoRA base layer) through `register_multi_grad_hook` on the
    /// recomputed layer's leaf inputs (`_register_post_backward_reshard_only_hook`,
    /// `torch/distributed/fsdp/_runtime_utils.py`); the hook closes over their
    /// `AccumulateGrad` nodes (`grad_fns`, `torch/autograd/graph.py`), which
    /// hold the leaf and its `.grad`, and is removed only in `_finalize_params`
    pub fsdp_frozen_units_keep_checkpoint_grads: bool,
    /// FSDP1 leaves the last step's sharded flat gradients allocated after
    /// the step (what a `memory_allocated` after the step reads)
    pub fsdp_grads_persist_after_step: bool,
    /// under TP > 1 the loss is vocabulary-parallel (`loss_parallel()`), whose
    /// fused backward (`_nll_loss_and_log_softmax_backward`: `grad_input =
    /// zeros_like(x)`, then `(grad_input + exp(x)) * grad_output`,
    /// `torch/distributed/tensor/parallel/loss.py`) holds three fp32
    /// vocabulary-shard buffers beside the saved log-softmax, one more than
    /// `log_softmax`'s own backward
    pub loss_parallel_under_tp: bool,
    /// k and v are repeated to every query head before attention in training
    pub repeats_kv_heads: bool,
    /// attention gets `v` as a view of the fused qkv projection's output (no
    /// copy): the saved view keeps the whole qkv tensor alive
    pub sdpa_v_views_fused_qkv: bool,
    /// how `generate` caches sliding-window layers (docs/inference.md, "KV cache")
    pub sliding_window_cache: SlidingWindowCache,
    /// builds its own output head even where the Hugging Face config ties it to
    /// the embedding ([`crate::model::ModelSpec::as_built_by`])
    pub unties_embeddings: bool,
    /// Megatron's mixed precision: gradients accumulate into a contiguous fp32
    /// main-grad buffer (4 B/param, never sharded) under bf16, the optimizer
    /// steps the fp32 master with it in place, and the step is a fused
    /// multi-tensor Adam (no temporaries): [`MEGATRON`]
    pub megatron_mixed_precision: bool,
}

/// Hugging Face `transformers` (Trainer, PEFT, bitsandbytes).
pub const TRANSFORMERS: FrameworkFacts = FrameworkFacts {
    framework: Framework::Transformers,
    // `ForCausalLMLoss` upcasts the full logits (`logits.float()`, 4.46+;
    // `LlamaForCausalLM.forward` before it)
    loss: LossPath::Fp32,
    // PEFT `get_peft_model(..., autocast_adapter_dtype=True)`, the default since PEFT 0.12
    adapters_fp32: true,
    // TRL `SFTTrainer` and the PEFT QLoRA recipes call `prepare_model_for_kbit_training`
    kbit_prep: true,
    // bitsandbytes `Linear4bit`
    qlora_base: QloraBase::Bitsandbytes,
    // `get_keys_to_not_convert` / `llm_int8_skip_modules` skip `lm_head`
    quantizes_lm_head: false,
    // the Trainer shards with the DeepSpeed config it is given, or FSDP with `--fsdp`
    sharder: Sharder::ZeroUnlessFsdp,
    fsdp_accumulates_unsharded: false,
    fsdp_root_unsharded_in_backward: false,
    fsdp_frozen_units_keep_checkpoint_grads: false,
    fsdp_grads_persist_after_step: false,
    loss_parallel_under_tp: false,
    repeats_kv_heads: false,
    sdpa_v_views_fused_qkv: false,
    // `generate()` builds a `DynamicCache` from the config: a
    // `DynamicSlidingWindowLayer` per sliding layer
    sliding_window_cache: SlidingWindowCache::Window,
    // the model class ties `lm_head.weight` to `embed_tokens.weight` when the config says so (`tie_word_embeddings`)
    unties_embeddings: false,
    megatron_mixed_precision: false,
};

/// The HF Trainer with a DeepSpeed ZeRO config.
pub const DEEPSPEED: FrameworkFacts = FrameworkFacts {
    framework: Framework::Deepspeed,
    // the Trainer's `DeepSpeedEngine` runs DeepSpeed's buckets whatever `--fsdp` says
    sharder: Sharder::Zero,
    // holds no cache: the default policy
    sliding_window_cache: SlidingWindowCache::Window,
    // loss, PEFT and bitsandbytes as transformers (the same Trainer)
    ..TRANSFORMERS
};

/// The HF Trainer / accelerate with PyTorch FSDP (FSDP1).
pub const FSDP: FrameworkFacts = FrameworkFacts {
    framework: Framework::Fsdp,
    sharder: Sharder::Fsdp,
    // accelerate's `accumulate()` enters `no_sync` for accumulating micro-batches
    fsdp_accumulates_unsharded: true,
    // FSDP1 root unit (`_post_forward_reshard`); accelerate's
    // `TRANSFORMER_BASED_WRAP` wraps each decoder layer
    fsdp_root_unsharded_in_backward: true,
    // transformers' `gradient_checkpointing_enable` defaults to
    // `use_reentrant=True` and wraps each decoder layer's `__call__` (the
    // FSDP-wrapped unit); PEFT's `fsdp_auto_wrap_policy`, which the Trainer
    // installs, wraps the adapters in their own units
    fsdp_frozen_units_keep_checkpoint_grads: true,
    // accelerate's FSDP1 keeps the sharded flat gradients after `step()`
    fsdp_grads_persist_after_step: true,
    // holds no cache: the default policy
    sliding_window_cache: SlidingWindowCache::Window,
    // loss, PEFT and bitsandbytes as transformers (the same Trainer)
    ..TRANSFORMERS
};

/// Lightning AI LitGPT (Fabric).
pub const LITGPT: FrameworkFacts = FrameworkFacts {
    framework: Framework::Litgpt,
    // `finetune/lora.py` runs the head in 128-token chunks
    // (`lm_head_chunk_size=128`) and `chunked_cross_entropy`
    loss: LossPath::ChunkedTokens { tokens: 128 },
    // LitGPT creates the adapters in the model dtype
    adapters_fp32: false,
    // no PEFT preparation
    kbit_prep: false,
    // Lightning's `BitsandbytesPrecision`
    qlora_base: QloraBase::Bitsandbytes,
    // `BitsandbytesPrecision` replaces every `nn.Linear`, the head included
    quantizes_lm_head: true,
    // Fabric's FSDP strategy
    sharder: Sharder::Fsdp,
    // Fabric's `no_backward_sync(model, enabled=is_accumulating)` wraps every
    // accumulating micro-batch of `finetune/full.py` and `finetune/lora.py`
    // (Fabric's FSDP strategy enters `FullyShardedDataParallel.no_sync()`)
    fsdp_accumulates_unsharded: true,
    // FSDP1 root unit; `auto_wrap_policy={Block}` wraps each block
    fsdp_root_unsharded_in_backward: true,
    // LitGPT's checkpointing is not the HF Trainer's reentrant one
    fsdp_frozen_units_keep_checkpoint_grads: false,
    fsdp_grads_persist_after_step: false,
    loss_parallel_under_tp: false,
    // `CausalSelfAttention.forward` repeats k and v (`repeat_interleave(q_per_kv)`)
    // before SDPA in training
    repeats_kv_heads: true,
    // without a repeat, the same `forward` hands SDPA `v` as a view of the
    // fused `qkv` output
    sdpa_v_views_fused_qkv: true,
    // `set_kv_cache(batch_size, max_seq_length)`: one dense cache per block,
    // the window applied as a mask
    sliding_window_cache: SlidingWindowCache::Full,
    // litgpt/model.py `GPT.__init__` always builds `lm_head = nn.Linear(n_embd, padded_vocab_size)` beside `transformer.wte`; convert_hf_checkpoint.py copies `wte` into it when the checkpoint ties them
    unties_embeddings: true,
    megatron_mixed_precision: false,
};

/// PyTorch torchtune recipes.
pub const TORCHTUNE: FrameworkFacts = FrameworkFacts {
    framework: Framework::Torchtune,
    // the recipes' `CEWithChunkedOutputLoss` (`num_output_chunks = 8`)
    loss: LossPath::Chunked { chunks: 8 },
    // adapters in the model dtype
    adapters_fp32: false,
    kbit_prep: false,
    // torchao's `NF4Tensor` (`linear_nf4`)
    qlora_base: QloraBase::TorchaoNf4,
    quantizes_lm_head: false,
    // FSDP2 (`fully_shard`)
    sharder: Sharder::Fsdp,
    fsdp_accumulates_unsharded: false,
    fsdp_root_unsharded_in_backward: false,
    fsdp_frozen_units_keep_checkpoint_grads: false,
    fsdp_grads_persist_after_step: false,
    loss_parallel_under_tp: false,
    repeats_kv_heads: false,
    sdpa_v_views_fused_qkv: false,
    // `setup_caches(batch_size, dtype, decoder_max_seq_len)`: the whole
    // length for every layer, the window as a mask
    sliding_window_cache: SlidingWindowCache::Full,
    // torchtune's `TiedLinear` reuses the embedding for tied models (Llama 3.2, Gemma)
    unties_embeddings: false,
    megatron_mixed_precision: false,
};

/// PyTorch torchtitan (FSDP2 pre-training).
pub const TORCHTITAN: FrameworkFacts = FrameworkFacts {
    framework: Framework::Torchtitan,
    // `cross_entropy_loss` calls `pred.flatten(0, 1).float()`
    loss: LossPath::Fp32,
    // no PEFT preparation (torchtitan has no LoRA/QLoRA recipes)
    kbit_prep: false,
    // FSDP2 (`fully_shard`)
    sharder: Sharder::Fsdp,
    fsdp_accumulates_unsharded: false,
    fsdp_root_unsharded_in_backward: false,
    fsdp_frozen_units_keep_checkpoint_grads: false,
    fsdp_grads_persist_after_step: false,
    // `ParallelDims.loss_parallel_enabled`: `tp > 1 and enable_loss_parallel`
    // (`--training.disable_loss_parallel` off by default; the output
    // projection keeps `Shard(-1)` logits)
    loss_parallel_under_tp: true,
    // holds no cache: the default policy
    sliding_window_cache: SlidingWindowCache::Window,
    // adapters, QLoRA base and head: no LoRA/QLoRA recipes, transformers' values
    ..TRANSFORMERS
};

/// NVIDIA Megatron-LM / Megatron-Core (`pretrain_gpt.py`, Megatron-LM main
/// of August 2026, Megatron-Core 0.20): full training of its own GPT model
/// (no LoRA/QLoRA), TP/PP/SP/EP, the distributed optimizer
/// (`--use-distributed-optimizer`) as its only sharding.
pub const MEGATRON: FrameworkFacts = FrameworkFacts {
    framework: Framework::Megatron,
    // `GPTModel.compute_language_model_loss` → `vocab_parallel_cross_entropy`
    // (megatron/core/tensor_parallel/cross_entropy.py): the logits shard is
    // taken in fp32 and its softmax kept for backward; the vocabulary is split
    // by TP already in the activation accounting
    loss: LossPath::Fp32,
    // no PEFT: full training only (the CLI refuses --task lora/qlora)
    adapters_fp32: false,
    kbit_prep: false,
    // `DistributedOptimizer` shards the fp32 master and Adam states over the
    // data-parallel ranks, as ZeRO-1 (docs/user-guide/features/dist_optimizer.md)
    sharder: Sharder::Zero,
    fsdp_accumulates_unsharded: false,
    fsdp_root_unsharded_in_backward: false,
    fsdp_frozen_units_keep_checkpoint_grads: false,
    fsdp_grads_persist_after_step: false,
    loss_parallel_under_tp: false,
    // Transformer Engine's fused attention takes GQA natively (`num_query_groups`)
    repeats_kv_heads: false,
    sdpa_v_views_fused_qkv: false,
    sliding_window_cache: SlidingWindowCache::Window,
    // `--untie-embeddings-and-output-weights` only when the model is untied:
    // a tied model shares the embedding (`share_embeddings_and_output_weights`)
    unties_embeddings: false,
    // megatron/training/arguments.py `validate_args`: under `--bf16`
    // `accumulate_allreduce_grads_in_fp32 = True` (main grads fp32,
    // `DistributedDataParallelConfig.grad_reduce_in_fp32`); the grad buffer is
    // `_ParamAndGradBuffer` (megatron/core/distributed/param_and_grad_buffer.py);
    // `DistributedOptimizer._copy_model_grads_to_main_grads` hands the optimizer
    // `model_grad.float()`, the same fp32 tensor; the optimizer is Transformer
    // Engine's / Apex's `FusedAdam` (megatron/core/optimizer/__init__.py)
    megatron_mixed_precision: true,
    ..TRANSFORMERS
};

/// Tokens of a serving engine's start-up profiling forward when
/// `--max-num-batched-tokens` is not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileTokens {
    /// `max(max_model_len, floor)`: vLLM's `max_num_batched_tokens` without chunked prefill
    ContextAtLeast(u64),
    /// a fixed chunk (SGLang's `chunked_prefill_size`)
    Fixed(u64),
}

impl ProfileTokens {
    /// The tokens at a context of `context`.
    pub fn at(self, context: u64) -> u64 {
        match self {
            ProfileTokens::ContextAtLeast(floor) => context.max(floor),
            ProfileTokens::Fixed(n) => n,
        }
    }
}

impl std::fmt::Display for ProfileTokens {
    /// As the CLI's help writes it (`max(--context, 2048)`, `8192`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProfileTokens::ContextAtLeast(floor) => write!(f, "max(--context, {floor})"),
            ProfileTokens::Fixed(n) => write!(f, "{n}"),
        }
    }
}

/// How a serving engine sizes its memory at start-up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServingDefaults {
    /// tokens of the start-up profiling forward (vLLM `max_num_batched_tokens`)
    pub max_num_batched_tokens: ProfileTokens,
    /// sequences the sampler handles at once (vLLM `max_num_seqs`): rows of logits
    pub max_num_seqs: u64,
    /// bytes per sampled row per vocabulary entry live at the peak of the
    /// start-up sampler run ([`SAMPLER_SORT_BYTES`], [`SAMPLER_FUSED_BYTES`])
    pub sampler_bytes_per_entry: u64,
    /// memory outside the PyTorch allocator at one GPU, measured at start-up, when
    /// the engine's own log gives it (else the runtime's context + workspaces)
    pub non_torch_tp1: Option<u64>,
    /// the fraction of the card the engine takes when none is given (vLLM
    /// `gpu_memory_utilization`); `None` when the engine derives it from the
    /// card ([`ServingDefaults::share_rule`])
    pub default_gpu_util: Option<f64>,
    /// how the engine derives that fraction from the card and the layout when
    /// it is not fixed (SGLang's `mem_fraction_static`)
    pub share_rule: Option<ShareRule>,
    /// which cards take the defaults above; the others take
    /// [`ServingDefaults::small_card_batch`] (vLLM V1's `get_batch_defaults`)
    pub card_rule: CardRule,
    /// (`max_num_batched_tokens`, `max_num_seqs`) on the cards [`CardRule`]
    /// does not mark as large; `None`: the same on every card
    pub small_card_batch: Option<(ProfileTokens, u64)>,
    /// `max_num_batched_tokens` of the offline `LLM(...)` class (the LLM_CLASS
    /// usage context) on the large and the small cards; `None`: the same as
    /// `vllm serve` ([`VllmEntry`])
    pub llm_class_tokens: Option<(ProfileTokens, ProfileTokens)>,
    /// the start-up takes the memory outside the PyTorch allocator (CUDA
    /// context, NCCL) off the KV budget; `false` before vLLM PR #2031, which
    /// took `torch.cuda.max_memory_allocated()` alone
    pub budget_counts_non_torch: bool,
    /// when the engine captures its CUDA graphs, and so whether their pool is
    /// inside the budget ([`GraphCapture`])
    pub graphs: GraphCapture,
    /// which CUDA graphs the release captures by default, for the modelled
    /// size of their pool ([`GraphSizes`], `crate::serving::graph_model`)
    pub graph_sizes: GraphSizes,
}

/// Which CUDA graphs a serving release captures by default: the batch sizes
/// and whether each is one graph of the whole model (FULL) or one per
/// piece between attention layers (PIECEWISE), which sets the size of the
/// graph pool (`crate::serving::graph_model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphSizes {
    /// not modelled by vramfit (SGLang: its `mem_fraction_static` rule keeps
    /// the graphs in the reserve outside the fraction; `--cuda-graph-mib`
    /// still checks a logged figure)
    NotModelled,
    /// vLLM V0 (0.2.6 – 0.7): one FULL graph of the whole model per size in
    /// `_BATCH_SIZES_TO_CAPTURE = [1, 2, 4] + [8 * i for i in range(1, 33)]`
    /// up to `max_num_seqs` rounded up to a captured size
    /// (`max_batchsize_to_capture`, `GPUModelRunnerBase.capture_model`,
    /// vllm/worker/model_runner.py): 35 graphs at the default 256 sequences
    V0Full,
    /// vLLM V1 0.8 – 0.10: PIECEWISE graphs (torch.compile splits the model at
    /// every attention layer) for `[1, 2, 4] + range(8, 513, 8)`, the sizes
    /// above `max_num_batched_tokens` dropped (`VllmConfig.init_with_cudagraph_sizes`;
    /// "By default, vLLM captures 67 graphs", vllm-project/vllm#20098)
    V1Piecewise512,
    /// vLLM V1 from 0.11: `[1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16)`
    /// with `max_cudagraph_capture_size = min(max_num_seqs × 2, 512,
    /// max_num_batched_tokens)` (`VllmConfig._set_cudagraph_sizes`,
    /// vllm/config/vllm.py), each size PIECEWISE, and the sizes up to
    /// `max_num_seqs` FULL as well for uniform decode batches
    /// (`cudagraph_mode` FULL_AND_PIECEWISE by default, `CudagraphDispatcher`):
    /// vLLM logs "Profiling CUDA graph memory: PIECEWISE=51 (largest=512),
    /// FULL=35 (largest=256)" at 256 sequences (vllm-project/vllm#39559)
    V1FullAndPiecewise,
    /// a row spanning 0.9 – 0.19 (across the change in 0.11): the larger of
    /// [`GraphSizes::V1Piecewise512`] and [`GraphSizes::V1FullAndPiecewise`],
    /// so the pool is never under-counted
    V1LargerOf,
}

/// Where a serving engine's CUDA-graph pool lives relative to the fraction of
/// the card it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphCapture {
    /// no CUDA graphs (vLLM before 0.2.6: "vLLM 0.2.6 added cuda graph support,
    /// which is enabled by default", vllm-project/vllm#2248)
    None,
    /// captured after the KV pool is sized (`capture_model` after the cache is
    /// allocated: V0 `Worker.warm_up_model`, V1 `Worker.compile_or_warm_up_model`
    /// after `initialize_from_config`): the graph pool comes on top of
    /// `gpu_memory_utilization × capacity`
    AfterPool,
    /// estimated during the start-up profile and taken off the KV budget
    /// (`GPUModelRunner.profile_cudagraph_memory`, vLLM PR #30515; on by default
    /// from PR #38284, v0.21: "CUDA graph memory profiling is enabled (default
    /// since v0.21.0)"; `VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0` turns it off)
    InsideBudget,
}

/// SGLang's `--speculative-algorithm` (python/sglang/srt/server_args.py:
/// choices EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM), for the reserve its
/// `mem_fraction_static` rule keeps for the draft ([`ShareRule::speculative_reserve_mib`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SpeculativeAlgorithm {
    Eagle,
    Eagle3,
    Nextn,
    Standalone,
    Ngram,
}

impl std::str::FromStr for SpeculativeAlgorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_uppercase().as_str() {
            "EAGLE" => Ok(SpeculativeAlgorithm::Eagle),
            "EAGLE3" => Ok(SpeculativeAlgorithm::Eagle3),
            "NEXTN" => Ok(SpeculativeAlgorithm::Nextn),
            "STANDALONE" => Ok(SpeculativeAlgorithm::Standalone),
            // SGLang's older name for n-gram drafting
            "NGRAM" | "LOOKAHEAD" => Ok(SpeculativeAlgorithm::Ngram),
            _ => Err(format!(
                "--speculative-algorithm '{s}': expected one of EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM (SGLang's names)"
            )),
        }
    }
}

/// Which vLLM entry point starts the engine: its usage context picks the
/// batch defaults (`EngineArgs.get_batch_defaults`, vllm/engine/arg_utils.py).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VllmEntry {
    /// `vllm serve` / the OpenAI API server (`UsageContext.OPENAI_API_SERVER`)
    #[default]
    Serve,
    /// the offline `LLM(...)` class (`UsageContext.LLM_CLASS`)
    Llm,
}

impl std::str::FromStr for VllmEntry {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "serve" | "openai-api-server" | "openai_api_server" => Ok(VllmEntry::Serve),
            "llm" | "llm-class" | "llm_class" => Ok(VllmEntry::Llm),
            _ => Err(format!("--vllm-entry '{s}': expected serve (vllm serve) or llm (the LLM(...) class)")),
        }
    }
}

/// Which cards a release gives its larger batch defaults (vLLM V1, `vllm
/// serve`'s OPENAI_API_SERVER usage context; the `LLM(...)` class takes
/// 16,384 / 8,192 tokens instead: [`ServingDefaults::llm_class_tokens`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CardRule {
    /// the same defaults on every card
    Any,
    /// "h100" or "h200" in the device name (vLLM 0.8: PR #12369 of
    /// 2025-01-23, `EngineArgs._set_default_args_v1`, vllm/engine/arg_utils.py)
    H100H200Name,
    /// device memory ≥ 70 GiB and no "a100" in the name (vLLM 0.9+: PR #17073
    /// of 2025-04-23 by memory, PR #17885 of 2025-05-09 excluding A100;
    /// `EngineArgs.get_batch_defaults`, vllm/engine/arg_utils.py)
    AtLeast70GibNotA100,
}

/// The card a serving engine starts on, as its batch defaults read it: the
/// name (`current_platform.get_device_name()`, or the catalogue's) and the
/// memory CUDA reports (`get_device_total_memory`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingCard {
    pub name: String,
    pub cuda_total_bytes: u64,
}

/// Which batch defaults a start-up took, for the explain line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchBasis {
    /// the release has one set for every card
    Fixed,
    /// the card is one the release gives its larger defaults
    LargeCard,
    /// the card takes the smaller defaults
    SmallCard,
    /// the card is not known: the larger defaults, the bigger start-up
    CardUnknown,
}

impl BatchBasis {
    /// In words, for the explain line.
    pub fn describe(self) -> &'static str {
        match self {
            BatchBasis::Fixed => "the release's defaults (the same on every card)",
            BatchBasis::LargeCard => "vllm serve's defaults on this card (≥ 70 GiB and not an A100; H100/H200 by name in 0.8)",
            BatchBasis::SmallCard => "vllm serve's defaults on this card (under 70 GiB, or an A100; not an H100/H200 in 0.8)",
            BatchBasis::CardUnknown => "vllm serve's defaults on cards ≥ 70 GiB other than A100, the larger start-up: the card is not known (give --gpu)",
        }
    }
}

impl CardRule {
    /// The card takes the larger defaults.
    pub fn large(self, card: &ServingCard) -> bool {
        let name = card.name.to_ascii_lowercase();
        match self {
            CardRule::Any => true,
            CardRule::H100H200Name => name.contains("h100") || name.contains("h200"),
            CardRule::AtLeast70GibNotA100 => card.cuda_total_bytes >= 70 * (1 << 30) && !name.contains("a100"),
        }
    }
}

impl ServingDefaults {
    /// (`max_num_batched_tokens`, `max_num_seqs`) defaults on `card`, and why;
    /// without a card the larger ones (never a smaller start-up than the engine's).
    pub fn batch_on(&self, card: Option<&ServingCard>) -> (ProfileTokens, u64, BatchBasis) {
        let large = (self.max_num_batched_tokens, self.max_num_seqs);
        let (pair, basis) = match (self.small_card_batch, card) {
            (None, _) => (large, BatchBasis::Fixed),
            (Some(_), None) => (large, BatchBasis::CardUnknown),
            (Some(_), Some(c)) if self.card_rule.large(c) => (large, BatchBasis::LargeCard),
            (Some(small), Some(_)) => (small, BatchBasis::SmallCard),
        };
        (pair.0, pair.1, basis)
    }

    /// The `max_num_seqs` default as the CLI's help writes it.
    pub fn seqs_label(&self) -> String {
        match self.small_card_batch {
            Some((_, small)) if small != self.max_num_seqs => {
                format!("{} on cards ≥ 70 GiB other than A100, else {small}", self.max_num_seqs)
            }
            _ => self.max_num_seqs.to_string(),
        }
    }

    /// The `max_num_batched_tokens` default as the CLI's help writes it.
    pub fn tokens_label(&self) -> String {
        match self.small_card_batch {
            Some((small, _)) if small != self.max_num_batched_tokens => {
                format!("{} on cards ≥ 70 GiB other than A100, else {small}", self.max_num_batched_tokens)
            }
            _ => self.max_num_batched_tokens.to_string(),
        }
    }
}

/// How SGLang picks `mem_fraction_static` when `--mem-fraction-static` is not
/// given, by release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareRule {
    /// SGLang 0.4.0 – 0.4.7: by TP size alone — 0.79 at TP ≥ 16, 0.81 at ≥ 8,
    /// 0.85 at ≥ 4, 0.87 at ≥ 2, else 0.88 (`ServerArgs.__post_init__`,
    /// python/sglang/srt/server_args.py, before PRs #5893 and #7054)
    TpSteps,
    /// SGLang 0.4.8 – 0.5.2 (PR #7054, "Simplify the heuristics for setting
    /// --mem-fraction-static", merged 2025-06-10; `ServerArgs.__post_init__`,
    /// python/sglang/srt/server_args.py): `(gpu_mem − reserved) / gpu_mem`
    /// rounded to 3 decimals, gpu_mem the card's nvidia-smi total in MiB,
    /// reserved by the card's tier and TP × PP: (2.8 + TP·PP / 10) GiB under
    /// 35 GiB, (9.5 + TP·PP / 2) GiB under 90 GiB, (12 + TP·PP / 2) GiB under
    /// 160 GiB, else 32 GiB; 4 GiB more with `--enable-dp-attention`
    /// ([`ShareRule::tiered_reserved_mib`])
    Tiered,
    /// SGLang 0.5.3+ (PR #10975, "Use more general heuristics to set the default
    /// value of --mem-fraction-static", merged 2025-09-27, after 0.5.2;
    /// `ServerArgs._handle_gpu_memory_settings`):
    /// `(gpu_mem − reserved) / gpu_mem` rounded to 3 decimals, gpu_mem the
    /// card's nvidia-smi total in MiB, reserved = 512 + max(chunked_prefill_size,
    /// 2048) × 1.5 + cuda_graph_max_bs × 2 + tp × pp / 8 × 1024 MiB, at least
    /// 10 GiB on cards over 60 GiB; chunked_prefill_size and cuda_graph_max_bs
    /// by the card ([`ShareRule::sglang_card_defaults`])
    Reserved,
}

impl ShareRule {
    /// SGLang 0.5's (`chunked_prefill_size`, `cuda_graph_max_bs`) for a card of
    /// `gpu_mem_mib` MiB (nvidia-smi total) at TP `tp`
    /// (`_handle_gpu_memory_settings`, CUDA branches).
    pub fn sglang_card_defaults(gpu_mem_mib: u64, tp: u64) -> (u64, u64) {
        let small_tp = tp < 4;
        match gpu_mem_mib {
            m if m < 20 * 1024 => (2048, 8),
            m if m < 35 * 1024 => (2048, if small_tp { 24 } else { 80 }),
            m if m < 60 * 1024 => (4096, if small_tp { 32 } else { 160 }),
            m if m < 160 * 1024 => (8192, if small_tp { 256 } else { 512 }),
            _ => (16384, 512),
        }
    }

    /// SGLang 0.4.8 – 0.5.2's reserve in MiB for a card of `gpu_mem_mib` MiB
    /// at `parallel` = TP × PP ranks, `dp_attention` with
    /// `--enable-dp-attention` (4 GiB more; `ServerArgs.__post_init__` after PR #7054: the
    /// comments beside the tiers name the cards — T4/4080 and A10/L40/4090
    /// under 35 GiB, H100/A100 under 90, H20 under 100, H200 under 160,
    /// B200/MI300 above; a speculative draft's reserve is added by
    /// [`ShareRule::fraction_with`]).
    pub fn tiered_reserved_mib(gpu_mem_mib: u64, parallel: u64, dp_attention: bool) -> f64 {
        let p = parallel as f64;
        let gib = match gpu_mem_mib {
            m if m < 35 * 1024 => 2.8 + p / 10.0,
            m if m < 90 * 1024 => 9.5 + p / 2.0,
            m if m < 160 * 1024 => 12.0 + p / 2.0,
            _ => 32.0,
        };
        (gib + if dp_attention { 4.0 } else { 0.0 }) * 1024.0
    }

    /// The fraction of a card of `gpu_mem_mib` MiB (nvidia-smi total) the
    /// engine takes at TP `tp` × PP `pp`; `chunk`: `--max-num-batched-tokens`
    /// (SGLang's `--chunked-prefill-size`) when given; `dp`: the data-parallel
    /// attention size (`--dp-size` with `--enable-dp-attention`; 1: off).
    pub fn fraction(self, gpu_mem_mib: u64, tp: u64, pp: u64, chunk: Option<u64>, dp: u64) -> f64 {
        self.fraction_with(gpu_mem_mib, tp, pp, chunk, dp, None)
    }

    /// SGLang's reserve for a speculative draft in MiB, by release rule
    /// (`--speculative-algorithm`): 0.4.8 – 0.5.2 (`ServerArgs.__post_init__`)
    /// 2 GiB for any algorithm ("draft model and larger cuda graph buffers"; the
    /// later 0.5.x patches' 6 GiB for STANDALONE is taken too: the larger); 0.5.3+
    /// (`_handle_gpu_memory_settings`, after the 10 GiB floor) 6 GiB for
    /// STANDALONE ("standalone draft model and cuda graphs"), 2 GiB for EAGLE,
    /// EAGLE3 and NEXTN ("eagle draft models and cuda graphs"), none for NGRAM;
    /// 0.4.0 – 0.4.7 none modelled (their fraction is by TP size alone).
    pub fn speculative_reserve_mib(self, spec: Option<SpeculativeAlgorithm>) -> f64 {
        let Some(a) = spec else { return 0.0 };
        match (self, a) {
            (ShareRule::TpSteps, _) => 0.0,
            (_, SpeculativeAlgorithm::Standalone) => 6.0 * 1024.0,
            (ShareRule::Reserved, SpeculativeAlgorithm::Ngram) => 0.0,
            _ => 2.0 * 1024.0,
        }
    }

    /// [`ShareRule::fraction`] with a speculative draft (`spec`) reserved for.
    pub fn fraction_with(
        self,
        gpu_mem_mib: u64,
        tp: u64,
        pp: u64,
        chunk: Option<u64>,
        dp: u64,
        spec: Option<SpeculativeAlgorithm>,
    ) -> f64 {
        let draft = self.speculative_reserve_mib(spec);
        let m = gpu_mem_mib.max(1) as f64;
        let rounded = |reserved: f64| (((m - reserved) / m) * 1000.0).round().clamp(1.0, 1000.0) / 1000.0;
        match self {
            ShareRule::TpSteps => match tp {
                t if t >= 16 => 0.79,
                t if t >= 8 => 0.81,
                t if t >= 4 => 0.85,
                t if t >= 2 => 0.87,
                _ => 0.88,
            },
            ShareRule::Reserved => {
                let (default_chunk, graph_bs) = Self::sglang_card_defaults(gpu_mem_mib, tp);
                let chunk = chunk.unwrap_or(default_chunk);
                let mut reserved =
                    512.0 + chunk.max(2048) as f64 * 1.5 + graph_bs as f64 * 2.0 + (tp * pp) as f64 / 8.0 * 1024.0;
                if dp > 1 {
                    // "DP attention needs more padding": cuda_graph_max_bs × dp_size × 3,
                    // × 1.5 more above a graph batch of 300 (before the 10 GiB floor)
                    let per = if graph_bs > 300 { 4.5 } else { 3.0 };
                    reserved += graph_bs as f64 * dp as f64 * per;
                }
                if gpu_mem_mib > 60 * 1024 {
                    reserved = reserved.max(10.0 * 1024.0);
                }
                // the draft's reserve comes after the floor
                rounded(reserved + draft)
            }
            ShareRule::Tiered => rounded(Self::tiered_reserved_mib(gpu_mem_mib, tp * pp, dp > 1) + draft),
        }
    }
}

/// What a serving engine does that changes memory: one row per engine (per
/// engine release once a release changes a fact; the row's key is then
/// ([`ServingEngine`], version)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ServingFacts {
    pub engine: ServingEngine,
    /// the oldest release this row describes (it holds until the next row's)
    pub version: EngineVersion,
    /// the start-up profiling shape and the memory outside the allocator
    pub startup: ServingDefaults,
    /// how sliding-window layers are cached
    pub sliding_window_cache: SlidingWindowCache,
}

/// vLLM's default `gpu_memory_utilization` (`EngineArgs` / `CacheConfig`: 0.9).
pub const VLLM_GPU_UTIL: f64 = 0.9;

/// vLLM's non-torch memory of a TP-1 server on an H100: "non_torch_memory 1.79GiB"
/// (vLLM PR #10511, V0, Llama-3-8B): the CUDA context, the kernel images its
/// profiling run loads, and the allocator cache that this accounting still counted
/// (device used − torch allocated; PR #11809 later subtracted reserved instead).
pub const VLLM_NON_TORCH: u64 = 1_921_997_865;

/// Bytes per sampled row per vocabulary entry at the peak of a sampler that
/// sorts the logits (top-p 0.9 with top-k vocab − 1, the start-up dummy run's
/// `SamplingMetadata`: `_dummy_sampler_run` in vllm/v1/worker/gpu_model_runner.py,
/// the V0 profile's `SamplingParams(top_p=0.99, top_k=vocab_size - 1)` in
/// vllm/worker/model_runner.py): the compute-dtype logits (2) and their fp32
/// copy (4), `logits.sort()`'s values (4) and int64 indices (8), the int64
/// index sequence the sort permutes (8) and CUB's radix-sort double buffers
/// (4 + 8) — `_apply_top_k_top_p` (vllm/model_executor/layers/sampler.py, V0)
/// and `apply_top_k_top_p` (vllm/v1/sample/ops/topk_topp_sampler.py, V1),
/// `at::native::sort` on CUDA.
pub const SAMPLER_SORT_BYTES: u64 = 38;

/// Bytes per sampled row per vocabulary entry at the peak of FlashInfer's
/// top-k/top-p sampler, which does not sort: the compute-dtype logits (2),
/// their fp32 copy (4, `Sampler.forward`: `logits.to(torch.float32)`), the
/// top-k-masked logits (4, `top_k_mask_logits`) and their softmax (4) inside
/// `flashinfer.sampling.top_k_top_p_sampling_from_logits` (called by
/// `flashinfer_sample`, vllm/v1/sample/ops/topk_topp_sampler.py). On by
/// default again since vllm-project/vllm#40376 (merged 2026-04-20, after
/// v0.19.0 of 2026-04-03).
pub const SAMPLER_FUSED_BYTES: u64 = 14;

/// vLLM 0.2.0 – 0.2.4: before PR #2031 ("Fix peak memory profiling", merged
/// 2023-12-13; vLLM 0.2.5 is the first release with it: "vLLM 0.2.5 changed
/// the way the memory is profiled with #2031", vllm-project/vllm#2248, and
/// vllm-project/vllm#2136 logs the same blocks on 0.2.3 and 0.2.4, fewer on
/// 0.2.5) `Worker.profile_num_available_blocks` took
/// `torch.cuda.max_memory_allocated()` as the peak, so the KV budget was
/// `gpu_memory_utilization × total − (weights + activation peak)` and the memory
/// outside the allocator (CUDA context, NCCL, cuBLAS) came on top of it — the
/// PR's own figures: Llama-2-7B on one A100-80GB 7,449 blocks before, 7,351 after;
/// Llama-2-70B at TP 4, 31,615 before, 20,865 after. No CUDA graphs yet.
pub const VLLM_V0_2: ServingFacts = ServingFacts {
    engine: ServingEngine::Vllm,
    version: EngineVersion::new(0, 2),
    startup: ServingDefaults {
        // the memory outside the allocator is not logged: the runtime's
        // context + workspaces (it is outside the budget here anyway)
        non_torch_tp1: None,
        budget_counts_non_torch: false,
        graphs: GraphCapture::None,
        ..VLLM_V0.startup
    },
    ..VLLM_V0
};

/// vLLM's V0 engine after PR #2031 (0.2.5 – 0.7; 0.8 made V1 the default).
pub const VLLM_V0: ServingFacts = ServingFacts {
    engine: ServingEngine::Vllm,
    version: EngineVersion::patch(0, 2, 5),
    startup: ServingDefaults {
        // V0 `SchedulerConfig`: without chunked prefill (off below a 32K
        // max_model_len) `max_num_batched_tokens = max(max_model_len, 2048)`;
        // the profiling run computes logits for one row per sequence
        // (`compute_logits` on the sampled indices) and CUDA graphs are captured
        // after the KV cache is allocated (`capture_model`: outside the budget)
        max_num_batched_tokens: ProfileTokens::ContextAtLeast(2048),
        // V0 `SchedulerConfig.max_num_seqs = 256`
        max_num_seqs: 256,
        // V0's `Sampler` sorts (`_apply_top_k_top_p`)
        sampler_bytes_per_entry: SAMPLER_SORT_BYTES,
        // PR #10511's start-up log (V0, between v0.6.4 and v0.6.5)
        non_torch_tp1: Some(VLLM_NON_TORCH),
        default_gpu_util: Some(VLLM_GPU_UTIL),
        share_rule: None,
        // V0's `SchedulerConfig` defaults do not depend on the card
        card_rule: CardRule::Any,
        small_card_batch: None,
        // V0 has no usage-context defaults: `LLM(...)` takes the server's
        llm_class_tokens: None,
        // PR #2031 (first in 0.2.5): `profile_num_available_blocks` takes
        // `total − free` after the profiling run, the memory outside the
        // allocator included
        budget_counts_non_torch: true,
        // 0.2.6+ capture after the cache is allocated (`Worker.warm_up_model` →
        // `capture_model`; 0.2.5 had no graphs, counted as if it had: over, never under)
        graphs: GraphCapture::AfterPool,
        graph_sizes: GraphSizes::V0Full,
    },
    // V0 keeps a block table per sequence over the whole context for every
    // layer except where the model's sliding window bounds it
    sliding_window_cache: SlidingWindowCache::Window,
};

/// vLLM's V1 engine with the PyTorch-native sampler (0.8 – 0.19): V1 is the
/// default from 0.8.0; FlashInfer's sampler was off for FlashInfer ≥ 0.2.3
/// (vllm-project/vllm#14815, March 2025) and off by default again from
/// vllm-project/vllm#26859 (October 2025), so the dummy sampler run sorts.
pub const VLLM_V0_8: ServingFacts = ServingFacts {
    engine: ServingEngine::Vllm,
    version: EngineVersion::new(0, 8),
    startup: ServingDefaults {
        // V1 always chunks prefill: `max_num_batched_tokens` is a fixed budget.
        // `vllm serve` (OPENAI_API_SERVER) on H100/H200 by name: 8192 tokens,
        // 1024 sequences (`EngineArgs._set_default_args_v1`,
        // vllm/engine/arg_utils.py, PR #12369); other cards 2048 tokens
        max_num_batched_tokens: ProfileTokens::Fixed(8192),
        max_num_seqs: 1024,
        sampler_bytes_per_entry: SAMPLER_SORT_BYTES,
        // no V1 start-up log of it: V0's figure is kept (it counts the
        // allocator cache as well, more than V1's accounting)
        non_torch_tp1: Some(VLLM_NON_TORCH),
        default_gpu_util: Some(VLLM_GPU_UTIL),
        share_rule: None,
        card_rule: CardRule::H100H200Name,
        // 0.8.0 – 0.8.3: `default_max_num_seqs = 1024` on every card (PR
        // #16158 of 2025-04-07 reverted it to 256 off H100/H200: the 0.8.4 row)
        small_card_batch: Some((ProfileTokens::Fixed(2048), 1024)),
        // the `LLM(...)` class (UsageContext.LLM_CLASS): 16384 tokens on the
        // large cards, 8192 on the others, the same sequences as the server
        // (`_set_default_args_v1` of PR #12369, `get_batch_defaults` since;
        // vLLM's tests/engine/test_arg_utils.py `test_defaults_with_usage_context`)
        llm_class_tokens: Some((ProfileTokens::Fixed(16384), ProfileTokens::Fixed(8192))),
        budget_counts_non_torch: true,
        // V1 `Worker.compile_or_warm_up_model` captures after
        // `initialize_from_config` allocated the KV cache (to 0.20)
        graphs: GraphCapture::AfterPool,
        graph_sizes: GraphSizes::V1Piecewise512,
    },
    // v1's hybrid KV-cache manager (`SlidingWindowSpec`, on unless
    // `--disable-hybrid-kv-cache-manager`)
    sliding_window_cache: SlidingWindowCache::Window,
};

/// vLLM 0.8.4 – 0.8.5: `max_num_seqs` back to 256 on cards other than
/// H100/H200 ("[V1] Revert the default `max_num_seqs` to V0 values for most
/// hardware", PR #16158 merged 2025-04-07, after 0.8.3).
pub const VLLM_V0_8_4: ServingFacts = ServingFacts {
    version: EngineVersion::patch(0, 8, 4),
    startup: ServingDefaults { small_card_batch: Some((ProfileTokens::Fixed(2048), 256)), ..VLLM_V0_8.startup },
    ..VLLM_V0_8
};

/// vLLM 0.9 – 0.19: the larger defaults by memory, not name — cards of ≥ 70
/// GiB (PR #17073) other than A100 (PR #17885, merged 2025-05-09, first in
/// 0.9.0): 8192 tokens and 1024 sequences for `vllm serve`, 2048 and 256
/// elsewhere (`EngineArgs.get_batch_defaults`, vllm/engine/arg_utils.py).
pub const VLLM_V0_9: ServingFacts = ServingFacts {
    version: EngineVersion::new(0, 9),
    startup: ServingDefaults {
        card_rule: CardRule::AtLeast70GibNotA100,
        // 0.11 moved to FULL_AND_PIECEWISE and the smaller size grid: this
        // row spans both, so the larger pool is taken
        graph_sizes: GraphSizes::V1LargerOf,
        ..VLLM_V0_8_4.startup
    },
    ..VLLM_V0_8_4
};

/// vLLM from 0.20: FlashInfer's top-k/top-p sampler on by default
/// (vllm-project/vllm#40376), so the start-up sampler run does not sort.
pub const VLLM_V0_20: ServingFacts = ServingFacts {
    engine: ServingEngine::Vllm,
    version: EngineVersion::new(0, 20),
    startup: ServingDefaults {
        sampler_bytes_per_entry: SAMPLER_FUSED_BYTES,
        graph_sizes: GraphSizes::V1FullAndPiecewise,
        ..VLLM_V0_9.startup
    },
    ..VLLM_V0_9
};

/// vLLM's `gpu_memory_utilization` default from 0.21 (`EngineArgs`,
/// `CacheConfig`, `LLM(...)`): 0.92, raised with the CUDA-graph estimate "to
/// preemptively address the impact on this parameter" (PR #38284).
pub const VLLM_GPU_UTIL_0_21: f64 = 0.92;

/// Device memory per captured CUDA graph per decoder layer it replays,
/// beyond the activations of the largest captured size: the graph objects
/// the driver keeps (`cudaGraphExec_t` per graph, its kernel nodes growing
/// with the layers) and the static outputs each graph keeps in the shared
/// pool. No vLLM source gives it; it is the bound that no collected
/// published capture figure exceeds (calibration/data/published/memory.jsonl,
/// quantity `engine_cuda_graph`): vLLM PR #11349's Llama-3.2-1B start-up
/// (V0, 35 FULL graphs of 16 layers, "Graph capturing finished in 14 secs,
/// took 0.21 GiB") gives (0.215 GiB, the print's upper rounding, − 256 ×
/// 57,344 B of activations) ÷ (35 × 16) = 386,026 B, rounded up to 3/8 MiB;
/// vLLM PR #5515's Llama-3-70B-AWQ at TP 8 (35 graphs of 80 layers, 0.6172
/// GiB) needs 231,721 B (this bound over-states it by 68%).
pub const GRAPH_BYTES_PER_LAYER_GRAPH: u64 = 393_216;

/// vLLM from 0.21: the CUDA-graph pool is estimated during the start-up
/// profile and taken off the KV budget (PR #30515's
/// `profile_cudagraph_memory`, on by default from PR #38284: "CUDA graph
/// memory profiling is enabled (default since v0.21.0)"), and
/// `gpu_memory_utilization` defaults to 0.92.
pub const VLLM_V0_21: ServingFacts = ServingFacts {
    version: EngineVersion::new(0, 21),
    startup: ServingDefaults {
        default_gpu_util: Some(VLLM_GPU_UTIL_0_21),
        graphs: GraphCapture::InsideBudget,
        ..VLLM_V0_20.startup
    },
    ..VLLM_V0_20
};

/// vLLM's latest modelled release: what `--engine vllm` assumes.
pub const VLLM: ServingFacts = VLLM_V0_21;

/// vLLM's rows, oldest first.
pub const VLLM_RELEASES: [&ServingFacts; 7] =
    [&VLLM_V0_2, &VLLM_V0, &VLLM_V0_8, &VLLM_V0_8_4, &VLLM_V0_9, &VLLM_V0_20, &VLLM_V0_21];

/// SGLang 0.4.0 – 0.4.7: `mem_fraction_static` by TP size ([`ShareRule::TpSteps`]).
pub const SGLANG_V0_4: ServingFacts = ServingFacts {
    engine: ServingEngine::Sglang,
    version: EngineVersion::new(0, 4),
    startup: ServingDefaults {
        // `chunked_prefill_size` 8192 (2048 on cards under 25 GB)
        max_num_batched_tokens: ProfileTokens::Fixed(8192),
        // `max_running_requests` is sized from the pool; vLLM's start-up shape is assumed
        max_num_seqs: 256,
        // vLLM's sorting sampler is assumed (the larger)
        sampler_bytes_per_entry: SAMPLER_SORT_BYTES,
        // not logged: the runtime's context + workspaces
        non_torch_tp1: None,
        default_gpu_util: None,
        share_rule: Some(ShareRule::TpSteps),
        // the chunk by card is not modelled here (8192 assumed on every card)
        card_rule: CardRule::Any,
        small_card_batch: None,
        // no usage contexts (the vLLM flag does not apply)
        llm_class_tokens: None,
        budget_counts_non_torch: true,
        // SGLang's fraction leaves its CUDA graphs outside the pool (the reserve
        // of `_handle_gpu_memory_settings` holds them)
        graphs: GraphCapture::AfterPool,
        graph_sizes: GraphSizes::NotModelled,
    },
    // the SWA pool keeps the window only
    sliding_window_cache: SlidingWindowCache::Window,
};

/// SGLang 0.4.8 – 0.5.2: `mem_fraction_static` from the card's tier and TP ×
/// PP ([`ShareRule::Tiered`], PR #7054 merged 2025-06-10; 0.4.8 of late June
/// 2025 is the first release certainly after it — 0.4.7, released around the
/// merge, keeps the 0.4 row).
pub const SGLANG_V0_4_8: ServingFacts = ServingFacts {
    version: EngineVersion::patch(0, 4, 8),
    startup: ServingDefaults { share_rule: Some(ShareRule::Tiered), ..SGLANG_V0_4.startup },
    ..SGLANG_V0_4
};

/// SGLang 0.5.3+: `mem_fraction_static` from the card's memory, its default
/// chunked-prefill size and CUDA-graph batch, and TP × PP
/// ([`ShareRule::Reserved`], PR #10975 merged 2025-09-27, after 0.5.2 —
/// verl moved to 0.5.2 on 2025-09-25 — so 0.5.3 is the first release with it).
pub const SGLANG_V0_5_3: ServingFacts = ServingFacts {
    version: EngineVersion::patch(0, 5, 3),
    startup: ServingDefaults { share_rule: Some(ShareRule::Reserved), ..SGLANG_V0_4.startup },
    ..SGLANG_V0_4
};

/// SGLang's latest modelled release: what `--engine sglang` assumes.
pub const SGLANG: ServingFacts = SGLANG_V0_5_3;

/// SGLang's rows, oldest first.
pub const SGLANG_RELEASES: [&ServingFacts; 3] = [&SGLANG_V0_4, &SGLANG_V0_4_8, &SGLANG_V0_5_3];

impl Framework {
    /// This framework's row.
    pub fn facts(self) -> &'static FrameworkFacts {
        match self {
            Framework::Transformers => &TRANSFORMERS,
            Framework::Deepspeed => &DEEPSPEED,
            Framework::Fsdp => &FSDP,
            Framework::Litgpt => &LITGPT,
            Framework::Torchtune => &TORCHTUNE,
            Framework::Torchtitan => &TORCHTITAN,
            Framework::Megatron => &MEGATRON,
        }
    }
}

impl ServingEngine {
    /// This engine's latest modelled row (what `--engine NAME` assumes).
    pub fn facts(self) -> &'static ServingFacts {
        match self {
            ServingEngine::Vllm => &VLLM,
            ServingEngine::Sglang => &SGLANG,
        }
    }

    /// This engine's rows, oldest first.
    pub fn releases(self) -> &'static [&'static ServingFacts] {
        match self {
            ServingEngine::Vllm => &VLLM_RELEASES,
            ServingEngine::Sglang => &SGLANG_RELEASES,
        }
    }

    /// The row of release `asked` (`None`: the latest): the closest modelled
    /// release at or before it. A release older than the oldest row or newer
    /// than the latest is refused with the list of modelled releases.
    pub fn release(self, asked: Option<EngineVersion>) -> Result<&'static ServingFacts, String> {
        let rows = self.releases();
        let Some(v) = asked else { return Ok(self.facts()) };
        // the latest row holds for every later patch of its minor release
        // (sglang@0.5.19 takes the 0.5.3 row); a later minor is not modelled
        let latest = rows.last().map(|r| EngineVersion::patch(r.version.major, r.version.minor, u32::MAX)).unwrap_or(v);
        let found = rows.iter().rev().find(|r| r.version <= v).filter(|_| v <= latest);
        found.copied().ok_or_else(|| {
            let names: Vec<String> = rows.iter().map(|r| r.version.to_string()).collect();
            format!(
                "--engine {}@{v}: release not modelled; the modelled releases are {} (a release between two of them takes the older one's row)",
                self.engine().name(),
                names.join(", ")
            )
        })
    }
}

/// A serving engine's release as `--engine vllm@0.8` names it: major.minor,
/// with an optional patch level (`sglang@0.5.3`: SGLang changed its
/// `mem_fraction_static` rule between 0.5.2 and 0.5.3). A patch level after
/// the digits (`0.4.6.post4`, `0.8.5rc1`) is ignored. Written `0.8` when the
/// patch level is 0, `0.5.3` otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct EngineVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl EngineVersion {
    /// `major.minor.0`.
    pub const fn new(major: u32, minor: u32) -> Self {
        EngineVersion { major, minor, patch: 0 }
    }

    /// `major.minor.patch`.
    pub const fn patch(major: u32, minor: u32, patch: u32) -> Self {
        EngineVersion { major, minor, patch }
    }
}

impl std::fmt::Display for EngineVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.patch {
            0 => write!(f, "{}.{}", self.major, self.minor),
            p => write!(f, "{}.{}.{p}", self.major, self.minor),
        }
    }
}

impl std::str::FromStr for EngineVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().trim_start_matches(['v', 'V']);
        let mut parts = t.split('.');
        let num = |p: Option<&str>| p.and_then(|x| x.parse::<u32>().ok());
        let (major, minor) = (num(parts.next()), num(parts.next()));
        // the patch level's leading digits (`5rc1` → 5); none: 0
        let patch = match parts.next() {
            None => Some(0),
            Some(p) => {
                let digits: String = p.chars().take_while(|c| c.is_ascii_digit()).collect();
                digits.parse::<u32>().ok()
            }
        };
        // one more part only as a suffix (`post4`), not a fourth number
        let tail_ok = parts.next().is_none_or(|x| !x.chars().next().is_some_and(|c| c.is_ascii_digit()));
        match (major, minor, patch, tail_ok && parts.next().is_none()) {
            (Some(major), Some(minor), Some(patch), true) => Ok(EngineVersion { major, minor, patch }),
            _ => Err(format!("engine release '{s}': expected MAJOR.MINOR or MAJOR.MINOR.PATCH such as 0.8 or 0.5.3")),
        }
    }
}

impl TryFrom<String> for EngineVersion {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<EngineVersion> for String {
    fn from(v: EngineVersion) -> String {
        v.to_string()
    }
}

/// What `--engine` names: an engine and, for a serving engine, its release
/// (`vllm@0.8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EngineChoice {
    pub engine: Engine,
    pub version: Option<EngineVersion>,
}

impl std::str::FromStr for EngineChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, version) = match s.split_once('@') {
            Some((n, v)) => (n, Some(v.parse::<EngineVersion>()?)),
            None => (s, None),
        };
        let engine: Engine = name.parse()?;
        match (engine.kind(), version) {
            (EngineKind::Training(_), Some(_)) => {
                Err(format!("--engine {s}: releases are modelled for serving engines only (vllm, sglang)"))
            }
            (EngineKind::Serving(e), Some(v)) => e.release(Some(v)).map(|_| EngineChoice { engine, version }),
            _ => Ok(EngineChoice { engine, version }),
        }
    }
}

impl FrameworkFacts {
    /// Sharded data parallelism reduces through FSDP (else DeepSpeed's
    /// buckets); `fsdp_flag`: `--fsdp` was given.
    pub fn shards_with_fsdp(&self, fsdp_flag: bool) -> bool {
        match self.sharder {
            Sharder::ZeroUnlessFsdp => fsdp_flag,
            Sharder::Zero => false,
            Sharder::Fsdp => true,
        }
    }
}

impl Engine {
    pub const ALL: [Engine; 9] = [
        Engine::Transformers,
        Engine::Deepspeed,
        Engine::Fsdp,
        Engine::Litgpt,
        Engine::Torchtune,
        Engine::Torchtitan,
        Engine::Megatron,
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
            Engine::Megatron => "megatron",
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
        }
    }

    /// A training framework or a serving engine.
    pub fn kind(self) -> EngineKind {
        match self {
            Engine::Transformers => EngineKind::Training(Framework::Transformers),
            Engine::Deepspeed => EngineKind::Training(Framework::Deepspeed),
            Engine::Fsdp => EngineKind::Training(Framework::Fsdp),
            Engine::Litgpt => EngineKind::Training(Framework::Litgpt),
            Engine::Torchtune => EngineKind::Training(Framework::Torchtune),
            Engine::Torchtitan => EngineKind::Training(Framework::Torchtitan),
            Engine::Megatron => EngineKind::Training(Framework::Megatron),
            Engine::Vllm => EngineKind::Serving(ServingEngine::Vllm),
            Engine::Sglang => EngineKind::Serving(ServingEngine::Sglang),
        }
    }

    /// Its `generate` computes logits for the last prompt token only.
    /// transformers passes `logits_to_keep=1` to the model's forward when the
    /// forward takes it (`GenerationMixin._prepare_generation_config` /
    /// `_supports_logits_to_keep`, generation/utils.py): since v4.45 as
    /// `num_logits_to_keep` (PR #31292), renamed `logits_to_keep` in v4.49.
    /// The DeepSpeed and FSDP rows run transformers' `generate`. LitGPT's and
    /// torchtune's `generate` run the output head over the whole prompt and
    /// slice the last row afterwards (`logits[..., -1, :]`); serving engines
    /// size their own start-up run instead.
    pub fn keeps_last_logits(self) -> bool {
        matches!(self, Engine::Transformers | Engine::Deepspeed | Engine::Fsdp)
    }

    /// A serving engine (no training).
    pub fn serves_only(self) -> bool {
        matches!(self.kind(), EngineKind::Serving(_))
    }

    /// The training framework's row; `None` for a serving engine.
    pub fn framework_facts(self) -> Option<&'static FrameworkFacts> {
        match self.kind() {
            EngineKind::Training(f) => Some(f.facts()),
            EngineKind::Serving(_) => None,
        }
    }

    /// The serving engine's row; `None` for a training framework.
    pub fn serving_facts(self) -> Option<&'static ServingFacts> {
        match self.kind() {
            EngineKind::Serving(s) => Some(s.facts()),
            EngineKind::Training(_) => None,
        }
    }

    /// How a serving engine sizes its start-up memory, or `None` for engines
    /// that run `generate` (the whole prompt's logits, no profiling).
    pub fn serving(self) -> Option<ServingDefaults> {
        self.serving_facts().map(|f| f.startup)
    }

    /// How the engine caches the layers that attend over a sliding window
    /// (`--sliding-window-cache` overrides it).
    pub fn sliding_window_cache(self) -> SlidingWindowCache {
        match self.kind() {
            EngineKind::Training(f) => f.facts().sliding_window_cache,
            EngineKind::Serving(s) => s.facts().sliding_window_cache,
        }
    }

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
            "megatron-lm" | "megatron-core" | "mcore" => "megatron",
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
    fn every_row_is_keyed_by_its_own_engine() {
        for e in Engine::ALL {
            match e.kind() {
                EngineKind::Training(f) => assert_eq!(f.facts().framework, f),
                EngineKind::Serving(s) => {
                    assert_eq!(s.facts().engine, s);
                    assert_eq!(s.engine(), e);
                    assert!(ServingEngine::ALL.contains(&s));
                }
            }
        }
        assert_eq!(ProfileTokens::ContextAtLeast(2048).at(1024), 2048);
        assert_eq!(ProfileTokens::ContextAtLeast(2048).at(8192), 8192);
        assert_eq!(ProfileTokens::Fixed(8192).at(1024), 8192);
    }

    #[test]
    fn engine_defaults_follow_their_sources() {
        let facts = |e: Engine| e.framework_facts().unwrap();
        assert_eq!(facts(Engine::Transformers).loss, LossPath::Fp32);
        assert_eq!(facts(Engine::Torchtune).loss, LossPath::Chunked { chunks: 8 });
        assert!(facts(Engine::Transformers).adapters_fp32 && !facts(Engine::Torchtune).adapters_fp32);
        assert!(facts(Engine::Transformers).kbit_prep && !facts(Engine::Litgpt).kbit_prep);
        assert!(facts(Engine::Litgpt).quantizes_lm_head && !facts(Engine::Transformers).quantizes_lm_head);
        assert!(Engine::Vllm.serving().is_some() && Engine::Transformers.serving().is_none());
        assert!(Engine::Vllm.serves_only() && Engine::Vllm.framework_facts().is_none());
    }

    #[test]
    fn sharded_data_parallelism_follows_the_framework_then_the_flag() {
        for (e, without, with) in [
            (Engine::Transformers, false, true),
            (Engine::Deepspeed, false, false),
            (Engine::Fsdp, true, true),
            (Engine::Torchtitan, true, true),
        ] {
            let f = e.framework_facts().unwrap();
            assert_eq!((f.shards_with_fsdp(false), f.shards_with_fsdp(true)), (without, with), "{e:?}");
        }
    }

    #[test]
    fn only_vllm_has_a_default_utilisation_and_a_given_one_wins() {
        // the latest row: 0.92 from 0.21 (PR #38284); 0.9 before
        assert_eq!(Engine::Vllm.gpu_util(None), Some(VLLM_GPU_UTIL_0_21));
        let util = |v: &str| ServingEngine::Vllm.release(Some(v.parse().unwrap())).unwrap().startup.default_gpu_util;
        assert_eq!((util("0.20"), util("0.21.3"), util("0.6.4")), (Some(0.9), Some(0.92), Some(VLLM_GPU_UTIL)));
        assert_eq!(Engine::Vllm.gpu_util(Some(0.5)), Some(0.5));
        assert_eq!(Engine::Sglang.gpu_util(None), None);
        assert_eq!(Engine::Transformers.gpu_util(None), None);
        assert_eq!(Engine::Transformers.gpu_util(Some(0.8)), Some(0.8));
    }

    #[test]
    fn vllm_releases_resolve_to_the_closest_older_row() {
        // rows 0.2 (before PR #2031), 0.2.5 (V0), 0.8 / 0.8.4 / 0.9 (V1 batch defaults, sorting
        // sampler), 0.20 (FlashInfer sampler, vllm#40376), 0.21 (CUDA-graph estimate, PR #38284)
        let row = |v: Option<&str>| ServingEngine::Vllm.release(v.map(|v| v.parse().unwrap())).map(|r| r.version);
        assert_eq!(row(None), Ok(VLLM.version));
        assert_eq!(row(None), Ok(EngineVersion::new(0, 21)));
        assert_eq!(row(Some("0.19")), Ok(EngineVersion::new(0, 9)));
        assert_eq!(row(Some("0.8.3")), Ok(EngineVersion::new(0, 8)));
        assert_eq!(row(Some("0.8.5")), Ok(EngineVersion::patch(0, 8, 4)));
        assert_eq!(row(Some("0.6.4")), Ok(EngineVersion::patch(0, 2, 5)));
        assert_eq!(row(Some("0.2.4")), Ok(EngineVersion::new(0, 2)));
        assert_eq!(row(Some("0.2.5")), Ok(EngineVersion::patch(0, 2, 5)));
        assert_eq!(row(Some("0.20")), Ok(EngineVersion::new(0, 20)));
        assert_eq!(row(Some("0.21.1")), Ok(EngineVersion::new(0, 21)));
        for unknown in ["0.1", "1.0", "0.22"] {
            assert!(row(Some(unknown)).unwrap_err().contains("0.2, 0.2.5, 0.8, 0.8.4, 0.9, 0.20, 0.21"), "{unknown}");
        }
        assert!("0.x".parse::<EngineVersion>().is_err() && "7".parse::<EngineVersion>().is_err());
    }

    #[test]
    fn the_sampler_bytes_follow_each_release() {
        // 38 = 2 + 4 + 4 + 8 + 8 + 4 + 8 (sort: apply_top_k_top_p); 14 = 2 + 4 + 4 + 4 (FlashInfer)
        assert_eq!(VLLM_V0.startup.sampler_bytes_per_entry, 2 + 4 + 4 + 8 + 8 + 4 + 8);
        assert_eq!(VLLM_V0_8.startup.sampler_bytes_per_entry, SAMPLER_SORT_BYTES);
        assert_eq!(VLLM_V0_20.startup.sampler_bytes_per_entry, 2 + 4 + 4 + 4);
        // V0 without chunked prefill: max(context, 2048); V1 a fixed 8192 budget
        assert_eq!(VLLM_V0.startup.max_num_batched_tokens.at(32768), 32768);
        assert_eq!(VLLM_V0_8.startup.max_num_batched_tokens.at(32768), 8192);
    }

    #[test]
    fn engine_choice_parses_a_release_for_serving_engines_only() {
        let c: EngineChoice = "vllm@0.8".parse().unwrap();
        assert_eq!((c.engine, c.version), (Engine::Vllm, Some(EngineVersion::new(0, 8))));
        assert_eq!("sglang".parse::<EngineChoice>().unwrap().version, None);
        assert!("transformers@4.46".parse::<EngineChoice>().unwrap_err().contains("serving engines only"));
        assert!("vllm@0.1".parse::<EngineChoice>().unwrap_err().contains("modelled releases are"));
    }

    #[test]
    fn sglang_mem_fraction_static_follows_each_release() {
        // 0.4 (`ServerArgs.__post_init__`): by TP size alone
        let steps: Vec<f64> =
            [1, 2, 4, 8, 16].iter().map(|&tp| ShareRule::TpSteps.fraction(81_559, tp, 1, None, 1)).collect();
        assert_eq!(steps, [0.88, 0.87, 0.85, 0.81, 0.79]);
        // 0.5 (`_handle_gpu_memory_settings`, PR #10975), H100 SXM (81,559 MiB), TP 1: chunk 8192,
        // graph bs 256: reserved = 512 + 8192 × 1.5 + 256 × 2 + 1 / 8 × 1024 = 13,440 MiB;
        // (81,559 − 13,440) / 81,559 = 0.8352 → 0.835
        assert_eq!(ShareRule::Reserved.fraction(81_559, 1, 1, None, 1), 0.835);
        // H200 (143,771 MiB), TP 8 (DeepSeek-V3): graph bs 512: 512 + 12,288 + 1,024 + 1,024 =
        // 14,848 MiB; (143,771 − 14,848) / 143,771 = 0.8967 → 0.897
        assert_eq!(ShareRule::Reserved.fraction(143_771, 8, 1, None, 1), 0.897);
        // A100 40GB (40,960 MiB), TP 1: chunk 4096, graph bs 32: 512 + 6,144 + 64 + 128 =
        // 6,848 MiB, under the 10 GiB floor's 60 GiB threshold; (40,960 − 6,848) / 40,960 = 0.8328 → 0.833
        assert_eq!(ShareRule::Reserved.fraction(40_960, 1, 1, None, 1), 0.833);
        // over 60 GiB at least 10 GiB is reserved: 64 GiB, TP 1, --chunked-prefill-size 2048:
        // 512 + 3,072 + 512 + 128 = 4,224 → 10,240 MiB; (65,536 − 10,240) / 65,536 = 0.84375 → 0.844
        assert_eq!(ShareRule::Reserved.fraction(65_536, 1, 1, Some(2048), 1), 0.844);
        // with --enable-dp-attention --dp-size 8 (H200, TP 8): 14,848 + 512 × 8 × 4.5 (graph bs > 300)
        // = 33,280 MiB; (143,771 − 33,280) / 143,771 = 0.7685 → 0.769
        assert_eq!(ShareRule::Reserved.fraction(143_771, 8, 1, None, 8), 0.769);
        let rule = |v: &str| ServingEngine::Sglang.release(Some(v.parse().unwrap())).map(|r| r.startup.share_rule);
        assert_eq!(ServingEngine::Sglang.release(None).map(|r| r.startup.share_rule), Ok(Some(ShareRule::Reserved)));
        assert_eq!(rule("0.4.6"), Ok(Some(ShareRule::TpSteps)));
        // PR #7054 (2025-06-10) to PR #10975 (2025-09-27): 0.4.8 – 0.5.2
        for v in ["0.4.8", "0.4.10", "0.5", "0.5.2", "0.5.2.post1"] {
            assert_eq!(rule(v), Ok(Some(ShareRule::Tiered)), "{v}");
        }
        for v in ["0.5.3", "0.5.19"] {
            assert_eq!(rule(v), Ok(Some(ShareRule::Reserved)), "{v}");
        }
        assert!(rule("0.6").unwrap_err().contains("0.4, 0.4.8, 0.5.3"));
    }

    #[test]
    fn sglang_0_5_2_reserves_by_card_tier_and_parallel_size() {
        // `ServerArgs.__post_init__` after PR #7054 (python/sglang/srt/server_args.py):
        // H100 SXM (81,559 MiB, "H100, A100" tier under 90 GiB), TP 1: (9.5 + 1/2) GiB =
        // 10,240 MiB; (81,559 − 10,240) / 81,559 = 0.87445 → 0.874 (0.5.3's rule: 0.835)
        assert_eq!(ShareRule::Tiered.fraction(81_559, 1, 1, None, 1), 0.874);
        // H200 (143,771 MiB, under 160 GiB), TP 8 (DeepSeek-V3): (12 + 8/2) GiB = 16,384 MiB;
        // (143,771 − 16,384) / 143,771 = 0.88604 → 0.886
        assert_eq!(ShareRule::Tiered.fraction(143_771, 8, 1, None, 1), 0.886);
        // the same with --enable-dp-attention: 4 GiB more = 20,480 MiB → 0.85755 → 0.858
        assert_eq!(ShareRule::Tiered.fraction(143_771, 8, 1, None, 8), 0.858);
        // L40S (46,068 MiB, under 90 GiB), TP 2: (9.5 + 1) GiB = 10,752 MiB → 0.76660 → 0.767
        assert_eq!(ShareRule::Tiered.fraction(46_068, 2, 1, None, 1), 0.767);
        // RTX 4090 (24,564 MiB, under 35 GiB), TP 1: (2.8 + 0.1) GiB = 2,969.6 MiB → 0.87911 → 0.879
        assert_eq!(ShareRule::Tiered.fraction(24_564, 1, 1, None, 1), 0.879);
        // B200 (183,359 MiB, 160 GiB and above): 32 GiB = 32,768 MiB → 0.82129 → 0.821
        assert_eq!(ShareRule::Tiered.fraction(183_359, 8, 1, None, 1), 0.821);
        // the chunk does not enter this rule
        assert_eq!(ShareRule::Tiered.fraction(81_559, 1, 1, Some(2048), 1), 0.874);
    }

    #[test]
    fn engine_versions_carry_a_patch_level() {
        let v = |s: &str| s.parse::<EngineVersion>();
        assert_eq!(v("0.5.3"), Ok(EngineVersion::patch(0, 5, 3)));
        assert_eq!(v("v0.8"), Ok(EngineVersion::new(0, 8)));
        assert_eq!(v("0.4.6.post4"), Ok(EngineVersion::patch(0, 4, 6)));
        assert_eq!(v("0.8.5rc1"), Ok(EngineVersion::patch(0, 8, 5)));
        assert!(v("0.5.3.1").is_err() && v("0.5.x").is_err());
        assert_eq!(
            (EngineVersion::new(0, 5).to_string(), EngineVersion::patch(0, 5, 3).to_string()),
            ("0.5".into(), "0.5.3".into())
        );
        assert!(
            EngineVersion::patch(0, 5, 2) < EngineVersion::patch(0, 5, 3)
                && EngineVersion::new(0, 5) < EngineVersion::patch(0, 5, 2)
        );
    }

    #[test]
    fn before_pr_2031_the_budget_takes_the_allocator_peak_alone() {
        // vllm-project/vllm#2031 ("Fix peak memory profiling", first in 0.2.5, vllm#2248):
        // `profile_num_available_blocks` took `torch.cuda.max_memory_allocated()` before it
        let row = |v: &str| ServingEngine::Vllm.release(Some(v.parse().unwrap())).unwrap().startup;
        assert!(!row("0.2").budget_counts_non_torch && !row("0.2.4").budget_counts_non_torch);
        assert!(row("0.2.5").budget_counts_non_torch && row("0.21").budget_counts_non_torch);
        // CUDA graphs arrived in 0.2.6 (vllm#2248): none before; after the pool to 0.20; inside from 0.21
        assert_eq!(row("0.2.4").graphs, GraphCapture::None);
        assert_eq!((row("0.6").graphs, row("0.20").graphs), (GraphCapture::AfterPool, GraphCapture::AfterPool));
        assert_eq!(row("0.21").graphs, GraphCapture::InsideBudget);
    }

    #[test]
    fn the_llm_class_takes_its_own_batch_defaults() {
        // vllm/engine/arg_utils.py `get_batch_defaults`: LLM_CLASS 16384 tokens on cards ≥ 70 GiB
        // other than A100, 8192 on the others; OPENAI_API_SERVER 8192 / 2048; the same sequences
        let v1 = ServingEngine::Vllm.release(Some("0.9".parse().unwrap())).unwrap().startup;
        assert_eq!(v1.llm_class_tokens, Some((ProfileTokens::Fixed(16384), ProfileTokens::Fixed(8192))));
        // V0 has no usage contexts
        assert_eq!(VLLM_V0.startup.llm_class_tokens, None);
        assert_eq!("llm".parse::<VllmEntry>(), Ok(VllmEntry::Llm));
        assert_eq!("serve".parse::<VllmEntry>(), Ok(VllmEntry::Serve));
        assert!("offline".parse::<VllmEntry>().unwrap_err().contains("--vllm-entry"));
    }

    #[test]
    fn sglang_reserves_for_a_speculative_draft_by_release() {
        // 0.5.3+ `_handle_gpu_memory_settings`: after the 10 GiB floor, STANDALONE + 6 GiB, EAGLE/
        // EAGLE3/NEXTN + 2 GiB, NGRAM nothing. H100 SXM (81,559 MiB), TP 1: 13,440 MiB (test
        // above) + 2,048 = 15,488 MiB; (81,559 − 15,488) / 81,559 = 0.81010 → 0.810
        let spec = |a: &str| Some(a.parse::<SpeculativeAlgorithm>().unwrap());
        assert_eq!(ShareRule::Reserved.fraction_with(81_559, 1, 1, None, 1, spec("eagle")), 0.810);
        // STANDALONE: 13,440 + 6,144 = 19,584 MiB → (81,559 − 19,584) / 81,559 = 0.75988 → 0.760
        assert_eq!(ShareRule::Reserved.fraction_with(81_559, 1, 1, None, 1, spec("STANDALONE")), 0.760);
        assert_eq!(ShareRule::Reserved.fraction_with(81_559, 1, 1, None, 1, spec("ngram")), 0.835);
        // the draft comes after the floor: 64 GiB card, chunk 2048 → 10,240 MiB floor + 2,048 =
        // 12,288 MiB; (65,536 − 12,288) / 65,536 = 0.8125 → 0.813 (0.844 without the draft)
        assert_eq!(ShareRule::Reserved.fraction_with(65_536, 1, 1, Some(2048), 1, spec("EAGLE3")), 0.813);
        // 0.4.8 – 0.5.2 (`__post_init__`, PR #7054): 2 GiB for any algorithm: H100 at TP 1
        // (9.5 + 0.5 + 2) GiB = 12,288 MiB → (81,559 − 12,288) / 81,559 = 0.84934 → 0.849
        assert_eq!(ShareRule::Tiered.fraction_with(81_559, 1, 1, None, 1, spec("NEXTN")), 0.849);
        assert_eq!(ShareRule::Tiered.fraction_with(81_559, 1, 1, None, 1, spec("ngram")), 0.849);
        // 0.4.0 – 0.4.7: by TP size alone
        assert_eq!(ShareRule::TpSteps.fraction_with(81_559, 1, 1, None, 1, spec("EAGLE")), 0.88);
        assert!("medusa".parse::<SpeculativeAlgorithm>().unwrap_err().contains("--speculative-algorithm"));
    }
}
