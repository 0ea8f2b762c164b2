//! Default values of a workload, in one place: the `Default` impls, the
//! CLI (which leaves a flag it was not given as `None` and fills it from
//! here) and the planner read them.

use crate::dtype::DType;
use crate::model::ModelSpec;
use crate::quant::QuantSpec;
use crate::workload::Engine;

/// Tokens per sequence for inference when none is given (Llama-2's 4096 positions,
/// a common serving context).
pub const CONTEXT: u64 = 4096;
/// Tokens per training sequence when none is given (2048: a common SFT packing length).
pub const TRAIN_SEQ: u64 = 2048;
/// Sequences per step (inference prefill batch, training micro-batch per GPU).
pub const BATCH: u64 = 1;
/// Micro-batches accumulated per optimizer step.
pub const GRAD_ACCUM: u64 = 1;
/// Input features per scale group of weight-only int quantization (`--dtype int4|int8`
/// and the planner's int8/int4 switch): GPTQ's and AWQ's usual `group_size` 128.
pub const GROUP_SIZE: u64 = 128;
/// llama.cpp's micro-batch `-ub` (`common_params::n_ubatch = 512`, `common/common.h`):
/// the GGUF planner's default and `--sliding-window-cache llamacpp`'s.
pub const LLAMACPP_UBATCH: u64 = 512;
/// Paged KV block size in tokens (vLLM's default `block_size` 16).
pub const BLOCK_SIZE: u64 = 16;
/// KV cache dtype (fp16: vLLM's `kv_cache_dtype=auto` on an fp16 model).
pub const KV_DTYPE: DType = DType::F16;
/// Storage dtype of unquantized weights.
pub const WEIGHT_DTYPE: DType = DType::BF16;
/// LoRA rank r.
pub const LORA_RANK: u64 = 16;
/// LoRA alpha per unit of rank (alpha = 2 × r, the common recipe; no memory effect).
pub const LORA_ALPHA_PER_RANK: f64 = 2.0;
/// LoRA dropout probability (PEFT recipes' usual 0.05).
pub const LORA_DROPOUT: f64 = 0.05;
/// DeepSpeed ZeRO `reduce_bucket_size` and `allgather_bucket_size` default, in elements
/// (`deepspeed/runtime/zero/config.py`: `5e8`).
pub const DS_BUCKET_ELEMENTS: u64 = 500_000_000;

/// The weights of an inference job that names no dtype: the checkpoint's own
/// quantization (its `quantization_config`: GPTQ/AWQ/bitsandbytes/FP8…),
/// stored as 4- or 8-bit integers, else [`WEIGHT_DTYPE`] unquantized.
pub fn weights(model: &ModelSpec) -> (DType, Option<QuantSpec>) {
    match &model.quantization {
        Some(q) => (if q.bits <= 4 { DType::I4 } else { DType::I8 }, Some(q.clone())),
        None => (WEIGHT_DTYPE, None),
    }
}

/// How an inference job runs across `gpus` cards when the user named the
/// cards but no layout (`--gpus 8` without `--tp`/`--pp`): as the engine
/// would run one copy of the model across them, never as copies of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InferenceLayout {
    pub tp: u64,
    pub pp: u64,
    /// The sentence saying which layout was assumed and why.
    pub why: String,
}

/// The layout of [`InferenceLayout`]:
/// - serving engines (vLLM, SGLang) split with tensor parallelism
///   (`--tensor-parallel-size` / `--tp-size`), which must divide the
///   attention heads (vLLM `ModelConfig.verify_with_parallel_config`:
///   "Total number of attention heads must be divisible by tensor parallel
///   size"): the largest such TP, the rest of the cards as pipeline stages;
/// - transformers' `device_map="auto"` (accelerate `infer_auto_device_map`
///   over `get_balanced_memory`) places consecutive layers on each card:
///   a pipeline of `gpus` stages, one card busy at a time.
///
/// Stages never outnumber the layers; cards left over are replicas.
pub fn inference_layout(model: &ModelSpec, engine: Engine, gpus: u64) -> InferenceLayout {
    let gpus = gpus.max(1);
    let layers = model.num_layers.max(1);
    let heads = model.num_heads.max(1);
    let replicas_hint = format!("--tp 1 --pp 1 sizes {gpus} replicas instead");
    if engine.serving().is_some() {
        let tp = (1..=gpus).rev().find(|&d| gpus.is_multiple_of(d) && heads.is_multiple_of(d)).unwrap_or(1);
        let pp = (gpus / tp).min(layers);
        let split = if pp > 1 {
            format!("TP {tp} × PP {pp}: TP {} does not divide the {heads} attention heads", tp * pp)
        } else {
            format!("TP {tp}")
        };
        return InferenceLayout {
            tp,
            pp,
            why: format!(
                "{gpus} GPUs and no --tp/--pp: sized as {} runs one model across them, {split} (--tp/--pp choose another layout; {replicas_hint})",
                engine.name()
            ),
        };
    }
    let pp = gpus.min(layers);
    InferenceLayout {
        tp: 1,
        pp,
        why: format!(
            "{gpus} GPUs and no --tp/--pp: sized as transformers runs one model across them with device_map=\"auto\", consecutive layers on each card (PP {pp}, one card busy at a time; --tp/--pp choose another layout; {replicas_hint})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_follow_the_checkpoints_quantization() {
        let mut m = ModelSpec::llama_like("m", 64, 2, 4, 4, 128, 100);
        assert_eq!(weights(&m), (WEIGHT_DTYPE, None));
        let gptq = QuantSpec::int(4, GROUP_SIZE, DType::F16);
        m.quantization = Some(gptq.clone());
        assert_eq!(weights(&m), (DType::I4, Some(gptq)));
        let int8 = QuantSpec::int(8, GROUP_SIZE, DType::F16);
        m.quantization = Some(int8.clone());
        assert_eq!(weights(&m), (DType::I8, Some(int8)));
    }

    #[test]
    fn named_gpus_without_a_layout_split_one_model() {
        // 128 heads: vLLM takes TP 8 on 8 cards
        let m = ModelSpec::llama_like("m", 7168, 61, 128, 128, 18432, 129280);
        let l = inference_layout(&m, Engine::Vllm, 8);
        assert_eq!((l.tp, l.pp), (8, 1));
        assert!(l.why.contains("vllm") && l.why.contains("TP 8"), "{}", l.why);
        // 40 heads on 16 cards: TP 8 divides them, two stages
        let m40 = ModelSpec::llama_like("m", 5120, 40, 40, 8, 13824, 32000);
        let l = inference_layout(&m40, Engine::Vllm, 16);
        assert_eq!((l.tp, l.pp), (8, 2));
        // transformers: a pipeline over every card
        let l = inference_layout(&m, Engine::Transformers, 4);
        assert_eq!((l.tp, l.pp), (1, 4));
        // never more stages than layers
        let tiny = ModelSpec::llama_like("m", 64, 2, 4, 4, 128, 100);
        assert_eq!(inference_layout(&tiny, Engine::Transformers, 8).pp, 2);
    }
}
