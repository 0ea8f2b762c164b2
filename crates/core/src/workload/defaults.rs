//! Default values of a workload, in one place: the `Default` impls, the
//! CLI (which leaves a flag it was not given as `None` and fills it from
//! here) and the planner read them.

use crate::dtype::DType;
use crate::model::ModelSpec;
use crate::quant::QuantSpec;

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
}
