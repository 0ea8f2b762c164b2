//! What a training run is: the task (full / LoRA / QLoRA), precision,
//! optimizer, sizes, checkpointing and attention kernel. Plain data with a
//! `Default` (a bf16-autocast AdamW full fine-tune, micro-batch 1, seq 2048).
//!
//! Stable: fields are only ever added, never renamed or removed (the
//! planner and the CLI construct this struct).

use super::defaults;
use super::engine::{Engine, FrameworkFacts, TRANSFORMERS};
use super::policy::LossPath;
use crate::dtype::DType;
use crate::error::CoreError;
use serde::{Deserialize, Serialize};

/// Which parameters train.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrainKind {
    /// every parameter trains (full fine-tune / pre-training)
    #[default]
    Full,
    /// frozen 16-bit (or fp32) base + low-rank adapters (PEFT LoRA)
    Lora,
    /// frozen NF4 base (bitsandbytes 4-bit) + adapters, 16-bit compute
    Qlora,
}

impl TrainKind {
    pub fn name(self) -> &'static str {
        match self {
            TrainKind::Full => "train",
            TrainKind::Lora => "lora",
            TrainKind::Qlora => "qlora",
        }
    }
}

/// Numeric precision of weights, gradients, optimizer states and activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    /// everything fp32
    Fp32,
    /// `torch.autocast(bfloat16)` over fp32 weights: the weights are the
    /// master copy, grads fp32, states fp32, matmul inputs/outputs bf16
    /// (autocast keeps a bf16 copy of each weight for the backward)
    #[default]
    AmpBf16,
    /// as `AmpBf16` with fp16 (plus a GradScaler; no memory of note)
    AmpFp16,
    /// DeepSpeed/Megatron mixed precision: bf16 weights and grads, fp32
    /// master weights, fp32 states (2 + 2 + 4 + 8 = 16 B/param with AdamW)
    MixedBf16,
    /// as `MixedBf16` with fp16 weights and grads (loss scaling)
    MixedFp16,
    /// pure bf16: weights, grads and optimizer states all bf16
    Bf16,
    /// FP8 training of the decoder's linears over `MixedBf16`: bf16 weights and
    /// grads, fp32 master and states, the linear GEMMs in FP8 with per-tensor
    /// scaling (Megatron-LM `--fp8-format hybrid`: TransformerEngine
    /// `fp8_autocast`, E4M3 forward / E5M2 gradients; torchtitan's `float8`
    /// converter: torchao `Float8Linear`); attention, norms, the embedding and
    /// the output head stay bf16. Named as the mixed precision it extends.
    MixedFp8,
}

impl Precision {
    /// The training precision of `engine` when `--precision` is not given:
    /// Megatron's `--bf16` (bf16 parameters, fp32 master and main grads:
    /// `mixed-bf16`; it has no autocast-over-fp32 mode), else
    /// [`Precision::default`] (`amp-bf16`).
    pub fn default_for(engine: Engine) -> Precision {
        match engine {
            Engine::Megatron => Precision::MixedBf16,
            _ => Precision::default(),
        }
    }
    pub const ALL: [Precision; 7] = [
        Precision::Fp32,
        Precision::AmpBf16,
        Precision::AmpFp16,
        Precision::MixedBf16,
        Precision::MixedFp16,
        Precision::Bf16,
        Precision::MixedFp8,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::AmpBf16 => "amp-bf16",
            Precision::AmpFp16 => "amp-fp16",
            Precision::MixedBf16 => "mixed-bf16",
            Precision::MixedFp16 => "mixed-fp16",
            Precision::Bf16 => "bf16",
            Precision::MixedFp8 => "mixed-fp8",
        }
    }

    /// dtype of activations (matmul outputs, saved tensors).
    pub fn compute_dtype(self) -> DType {
        match self {
            Precision::Fp32 => DType::F32,
            Precision::AmpBf16 | Precision::MixedBf16 | Precision::Bf16 | Precision::MixedFp8 => DType::BF16,
            Precision::AmpFp16 | Precision::MixedFp16 => DType::F16,
        }
    }

    /// dtype the trainable weights are stored in (and their gradients).
    pub fn weight_dtype(self) -> DType {
        match self {
            Precision::Fp32 | Precision::AmpBf16 | Precision::AmpFp16 => DType::F32,
            Precision::MixedBf16 | Precision::Bf16 | Precision::MixedFp8 => DType::BF16,
            Precision::MixedFp16 => DType::F16,
        }
    }

    /// A separate fp32 master copy exists beside the 16-bit weights.
    pub fn has_master(self) -> bool {
        matches!(self, Precision::MixedBf16 | Precision::MixedFp16 | Precision::MixedFp8)
    }

    /// The decoder's linear GEMMs run in FP8 (`MixedFp8`).
    pub fn is_fp8(self) -> bool {
        self == Precision::MixedFp8
    }

    /// Optimizer state dtype for full-precision optimizers.
    pub fn state_dtype(self) -> DType {
        if self == Precision::Bf16 {
            DType::BF16
        } else {
            DType::F32
        }
    }

    /// autocast: 16-bit copies of fp32 weights are made for each matmul.
    pub fn is_autocast(self) -> bool {
        matches!(self, Precision::AmpBf16 | Precision::AmpFp16)
    }
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let n = s.replace('_', "-");
        Precision::ALL.iter().copied().find(|p| p.name().eq_ignore_ascii_case(&n)).ok_or_else(|| {
            format!("unknown precision '{s}': expected one of fp32, amp-bf16, amp-fp16, mixed-bf16, mixed-fp16, bf16, mixed-fp8")
        })
    }
}

/// The optimizer, as the memory it keeps per trainable parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Optimizer {
    /// `torch.optim.AdamW` (foreach by default on CUDA): exp_avg + exp_avg_sq
    #[default]
    #[serde(rename = "adamw")]
    AdamW,
    /// bitsandbytes `AdamW8bit`: two blockwise-quantized int8 states
    #[serde(rename = "adamw-8bit")]
    AdamW8bit,
    /// bitsandbytes `PagedAdamW8bit`: as 8-bit, in CUDA unified (pageable) memory
    #[serde(rename = "paged-adamw-8bit")]
    PagedAdamW8bit,
    /// bitsandbytes `PagedAdamW` (32-bit states) in CUDA unified memory (LitGPT's QLoRA default)
    #[serde(rename = "paged-adamw")]
    PagedAdamW,
    /// plain SGD: no state
    Sgd,
    /// SGD with momentum: one buffer
    SgdMomentum,
    /// Adafactor (no first moment, factored second moment for matrices)
    Adafactor,
    /// Lion: one momentum buffer
    Lion,
}

impl Optimizer {
    pub const ALL: [Optimizer; 8] = [
        Optimizer::AdamW,
        Optimizer::AdamW8bit,
        Optimizer::PagedAdamW8bit,
        Optimizer::PagedAdamW,
        Optimizer::Sgd,
        Optimizer::SgdMomentum,
        Optimizer::Adafactor,
        Optimizer::Lion,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Optimizer::AdamW => "adamw",
            Optimizer::AdamW8bit => "adamw-8bit",
            Optimizer::PagedAdamW8bit => "paged-adamw-8bit",
            Optimizer::PagedAdamW => "paged-adamw",
            Optimizer::Sgd => "sgd",
            Optimizer::SgdMomentum => "sgd-momentum",
            Optimizer::Adafactor => "adafactor",
            Optimizer::Lion => "lion",
        }
    }

    /// bitsandbytes 8-bit optimizers.
    pub fn is_8bit(self) -> bool {
        matches!(self, Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit)
    }

    /// bitsandbytes paged optimizers: states in CUDA managed memory
    /// (`bitsandbytes.functional.get_paged` → `cget_managed_ptr`), outside the
    /// PyTorch caching allocator, so `max_memory_allocated()` never sees them.
    pub fn is_paged(self) -> bool {
        matches!(self, Optimizer::PagedAdamW8bit | Optimizer::PagedAdamW)
    }
}

impl std::str::FromStr for Optimizer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // accept transformers' spellings too: adamw_torch, adamw_bnb_8bit, paged_adamw_8bit
        let n = s.to_ascii_lowercase().replace('_', "-");
        let n = match n.as_str() {
            "adamw-torch" | "adamw-torch-fused" | "adam" => "adamw".to_string(),
            "adamw-bnb-8bit" | "adamw8bit" => "adamw-8bit".to_string(),
            "paged-adamw8bit" => "paged-adamw-8bit".to_string(),
            "paged-adamw-32bit" | "paged-adamw32bit" => "paged-adamw".to_string(),
            _ => n,
        };
        Optimizer::ALL.iter().copied().find(|o| o.name() == n).ok_or_else(|| {
            format!("unknown optimizer '{s}': expected one of adamw, adamw-8bit, paged-adamw-8bit, paged-adamw, sgd, sgd-momentum, adafactor, lion")
        })
    }
}

/// Activation (gradient) checkpointing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Checkpointing {
    /// every layer keeps its saved tensors
    #[default]
    None,
    /// HF `gradient_checkpointing_enable()`: each layer keeps only its input;
    /// recomputed in backward (≈ one extra forward)
    Full,
    /// Megatron-style selective recompute: keep the linear-layer inputs, recompute
    /// the attention core (scores/softmax/dropout) only
    Selective,
}

impl Checkpointing {
    pub const ALL: [Checkpointing; 3] = [Checkpointing::None, Checkpointing::Full, Checkpointing::Selective];

    pub fn name(self) -> &'static str {
        match self {
            Checkpointing::None => "none",
            Checkpointing::Full => "full",
            Checkpointing::Selective => "selective",
        }
    }
}

/// What selective checkpointing keeps ([`Checkpointing::Selective`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectivePolicy {
    /// Megatron's selective recompute: everything but the attention core
    /// (scores, softmax, dropout) is kept
    #[default]
    AttentionCore,
    /// torchtitan's per-op policy (`selective_ac_option = "op"`): the outputs of
    /// every other matmul and of attention are kept, every elementwise op recomputed
    Ops,
}

/// Attention kernel: decides whether the seq × seq scores are materialised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionImpl {
    /// `scaled_dot_product_attention` (flash / memory-efficient kernels):
    /// keeps only the output and the logsumexp
    #[default]
    Sdpa,
    /// eager attention: keeps batch × heads × seq × seq scores, softmax and dropout mask
    Eager,
}

impl AttentionImpl {
    pub fn name(self) -> &'static str {
        match self {
            AttentionImpl::Sdpa => "sdpa",
            AttentionImpl::Eager => "eager",
        }
    }
}

/// Which modules get LoRA adapters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoraTargets {
    /// PEFT `all-linear`: every linear in the decoder blocks (not the output head)
    #[default]
    AllLinear,
    /// leaf module names, e.g. `["q_proj", "v_proj"]`; `lm_head` and the
    /// embedding (`embed_tokens`) may be named too
    Modules(Vec<String>),
    /// a PEFT `target_modules` string: a regular expression matched with
    /// `re.fullmatch` against every full module name (`model.layers.0.self_attn.q_proj`)
    Regex(String),
}

/// LoRA adapter shape (used when the kind is `Lora` or `Qlora`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoraSetup {
    /// rank r: each adapted `d_out × d_in` linear gains `r × (d_in + d_out)` params
    pub rank: u64,
    /// scaling numerator (`lora_alpha`); does not change memory
    pub alpha: f64,
    pub targets: LoraTargets,
    /// `lora_dropout` > 0 keeps a dropped copy of each adapted input for backward
    pub dropout: f64,
    /// PEFT `autocast_adapter_dtype=True` (default): adapters stored in fp32
    /// even over a 16-bit base
    pub adapter_fp32: bool,
}

impl Default for LoraSetup {
    fn default() -> Self {
        LoraSetup {
            rank: defaults::LORA_RANK,
            alpha: defaults::LORA_ALPHA_PER_RANK * defaults::LORA_RANK as f64,
            targets: LoraTargets::AllLinear,
            dropout: defaults::LORA_DROPOUT,
            adapter_fp32: true,
        }
    }
}

/// bitsandbytes 4-bit data type (same storage and memory; named for output).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bnb4Type {
    #[default]
    Nf4,
    Fp4,
}

/// Buffers a data-parallel engine keeps for communication, from its config.
///
/// DeepSpeed's `DeepSpeedZeroConfig` defaults: `reduce_bucket_size` and
/// `allgather_bucket_size` 5e8 elements, `overlap_comm` false (the HF
/// Trainer's templates and most configs set it true).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CommSetup {
    /// DeepSpeed `reduce_bucket_size` (elements)
    pub reduce_bucket: u64,
    /// DeepSpeed `allgather_bucket_size` (elements)
    pub allgather_bucket: u64,
    /// DeepSpeed `overlap_comm`: a second reduce bucket to overlap reduction with backward
    pub overlap_comm: bool,
    /// PyTorch DDP `gradient_as_bucket_view`: the gradients are views into the buckets
    /// (no second gradient-sized copy)
    pub grad_as_bucket_view: bool,
}

impl CommSetup {
    /// `zero_optimization.reduce_bucket_size` when a DeepSpeed config says
    /// `"auto"`: the Hugging Face Trainer fills it with hidden_size² elements
    /// (transformers `integrations/deepspeed.py`,
    /// `HfTrainerDeepSpeedConfig.trainer_config_finalize`: `fill_only(
    /// "zero_optimization.reduce_bucket_size", hidden_size * hidden_size)`).
    /// DeepSpeed itself has no "auto"; its default is 5e8
    /// ([`defaults::DS_BUCKET_ELEMENTS`]).
    pub fn hf_trainer_reduce_bucket(hidden_size: u64) -> Result<u64, CoreError> {
        crate::units::mul("reduce_bucket_size (hidden_size²)", hidden_size, hidden_size)
    }
}

impl Default for CommSetup {
    fn default() -> Self {
        CommSetup {
            reduce_bucket: defaults::DS_BUCKET_ELEMENTS,
            allgather_bucket: defaults::DS_BUCKET_ELEMENTS,
            overlap_comm: false,
            grad_as_bucket_view: false,
        }
    }
}

/// A training step on one model replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainSetup {
    pub kind: TrainKind,
    pub precision: Precision,
    pub optimizer: Optimizer,
    /// micro-batch per GPU (sequences per forward/backward)
    pub batch: u64,
    /// tokens per sequence
    pub seq: u64,
    /// micro-batches accumulated per optimizer step (no extra memory beyond the gradients)
    pub grad_accum: u64,
    pub checkpointing: Checkpointing,
    pub attention: AttentionImpl,
    /// adapter shape for `Lora` / `Qlora`
    pub lora: LoraSetup,
    /// QLoRA: bitsandbytes double quantization of the NF4 absmax (default on)
    pub qlora_double_quant: bool,
    /// storage dtype of a frozen LoRA base (None: the precision's compute
    /// dtype, e.g. bf16 for amp-bf16; fp32 for fp32). Ignored for full and QLoRA.
    pub base_dtype: Option<DType>,
    /// optimizer uses the multi-tensor (`foreach`) path, the CUDA default
    /// for torch.optim: its step allocates one state-sized temporary
    pub foreach: bool,
    /// how the loss meets the logits (engine default: [`FrameworkFacts::loss`])
    pub loss: LossPath,
    /// model the first optimizer step of a fresh run: optimizer states are
    /// created lazily inside `step()`, so forward/backward run without them
    /// (what a one-step measurement such as shared/calibration sees). The
    /// default (false) is the steady state: states live through every step.
    pub first_step: bool,
    /// the framework running the step; its behaviour set the defaults below
    pub engine: Engine,
    /// QLoRA: bitsandbytes 4-bit type (nf4 / fp4; same memory)
    pub qlora_quant_type: Bnb4Type,
    /// QLoRA: the output head is quantized too (not in bitsandbytes'
    /// `llm_int8_skip_modules`; engine default: [`FrameworkFacts::quantizes_lm_head`])
    pub qlora_quantize_lm_head: bool,
    /// QLoRA through PEFT `prepare_model_for_kbit_training`: every non-quantized
    /// parameter (norms, embeddings, head) cast to fp32 (engine default: [`FrameworkFacts::kbit_prep`])
    pub kbit_prep: bool,
    /// the optimizer steps each parameter inside backward and frees its gradient
    /// (torchtune `optimizer_in_bwd`): no full gradient buffer, no step peak
    pub optimizer_in_backward: bool,
    /// saved activations are moved to host memory in forward and back in backward
    /// (torchtune `enable_activation_offloading`): one layer's set stays on the GPU
    pub activation_offload: bool,
    /// data-parallel communication buffers
    pub comm: CommSetup,
    /// what selective checkpointing keeps (with `checkpointing: Selective`)
    pub selective: SelectivePolicy,
}

impl Default for TrainSetup {
    fn default() -> Self {
        TrainSetup {
            kind: TrainKind::Full,
            precision: Precision::AmpBf16,
            optimizer: Optimizer::AdamW,
            batch: defaults::BATCH,
            seq: defaults::TRAIN_SEQ,
            grad_accum: defaults::GRAD_ACCUM,
            checkpointing: Checkpointing::None,
            attention: AttentionImpl::Sdpa,
            lora: LoraSetup::default(),
            qlora_double_quant: true,
            base_dtype: None,
            foreach: true,
            loss: LossPath::Fp32,
            first_step: false,
            engine: Engine::Transformers,
            qlora_quant_type: Bnb4Type::Nf4,
            qlora_quantize_lm_head: false,
            kbit_prep: true,
            optimizer_in_backward: false,
            activation_offload: false,
            comm: CommSetup::default(),
            selective: SelectivePolicy::AttentionCore,
        }
    }
}

impl TrainSetup {
    /// dtype of the frozen base of a LoRA run.
    pub fn lora_base_dtype(&self) -> DType {
        self.base_dtype.unwrap_or(match self.precision {
            Precision::Fp32 => DType::F32,
            p => p.compute_dtype(),
        })
    }

    /// Activation checkpointing when none is named: on for a QLoRA base that
    /// PEFT prepares, because `prepare_model_for_kbit_training(model,
    /// use_gradient_checkpointing=True, …)` turns it on by default
    /// (huggingface/peft, src/peft/utils/other.py) — the same call whose fp32
    /// casts [`TrainSetup::kbit_prep`] models; otherwise off, the Trainer's
    /// `gradient_checkpointing=False`.
    pub fn default_checkpointing(&self) -> Checkpointing {
        if self.kind == TrainKind::Qlora && self.kbit_prep {
            Checkpointing::Full
        } else {
            Checkpointing::None
        }
    }

    /// The defaults of `engine`: its loss path, adapter dtype, QLoRA preparation
    /// and head quantization (the rest of the setup is kept).
    pub fn with_engine(mut self, engine: Engine) -> TrainSetup {
        self.engine = engine;
        let f = self.framework();
        self.loss = f.loss;
        self.lora.adapter_fp32 = f.adapters_fp32;
        self.kbit_prep = f.kbit_prep;
        self.qlora_quantize_lm_head = f.quantizes_lm_head;
        self
    }

    /// The facts of the framework running the step. A serving engine does not
    /// train (the CLI refuses it): a setup naming one gets transformers' facts.
    pub fn framework(&self) -> &'static FrameworkFacts {
        self.engine.framework_facts().unwrap_or(&TRANSFORMERS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_reduce_bucket_is_hidden_size_squared_checked() {
        // Llama-2-7B: hidden 4096 → 16,777,216 elements (the HF Trainer's fill)
        assert_eq!(CommSetup::hf_trainer_reduce_bucket(4096), Ok(16_777_216));
        assert!(matches!(CommSetup::hf_trainer_reduce_bucket(u64::MAX), Err(CoreError::Overflow { .. })));
    }

    /// One spelling per value: the JSON (serde) name is the `name()` the text uses.
    #[test]
    fn json_spelling_is_the_name() {
        let json = |v: serde_json::Value| v.as_str().unwrap().to_string();
        for p in Precision::ALL {
            assert_eq!(json(serde_json::to_value(p).unwrap()), p.name());
        }
        for o in Optimizer::ALL {
            assert_eq!(json(serde_json::to_value(o).unwrap()), o.name());
        }
        for c in Checkpointing::ALL {
            assert_eq!(json(serde_json::to_value(c).unwrap()), c.name());
        }
    }
}
