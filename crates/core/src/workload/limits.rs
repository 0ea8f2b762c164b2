//! Upper bounds on workload sizes, each with its reason. A value above one
//! is refused by [`super::validate`] as absurd (a typo or a unit mistake)
//! before any arithmetic. Every bound is far beyond any real job; below it
//! the byte arithmetic is still checked ([`crate::units`]), so a huge but
//! accepted size gives an overflow error, never a wrapped number.

/// Sequences processed or resident at once: inference batch and concurrency,
/// training micro-batch per GPU. One bound for both tasks (it used to be 2^20
/// for training, with no reason given): 2^24 ≈ 16.8 M sequences is beyond any
/// serving fleet's concurrency on one model replica, let alone one GPU.
pub const MAX_SEQUENCES: u64 = 1 << 24;
/// Tokens per sequence (inference context, training seq): 2^31, the signed
/// 32-bit position index every mainstream kernel and engine uses. One bound
/// for both tasks (training used 2^24).
pub const MAX_TOKENS: u64 = 1 << 31;
/// Micro-batches accumulated per optimizer step: 2^20 (a million micro-steps per update).
pub const MAX_GRAD_ACCUM: u64 = 1 << 20;
/// GPUs in one job: 2^20, beyond the largest training clusters (~10^5 GPUs).
pub const MAX_GPUS: u64 = 1 << 20;
/// Tensor-parallel degree and pipeline stages: 2^12. TP splits heads and PP
/// splits layers, and no model has more than a few hundred of either.
pub const MAX_MODEL_PARALLEL: u64 = 1 << 12;
/// Paged KV block size in tokens: 2^16 (engines use 8–256).
pub const MAX_BLOCK_SIZE: u64 = 1 << 16;
/// LoRA rank: 2^16, above the hidden size of any model (a rank beyond it adds nothing).
pub const MAX_LORA_RANK: u64 = 1 << 16;
