//! Training memory per GPU (full fine-tune, LoRA, QLoRA): model states,
//! activations saved for backward, logits and loss, optimizer-step
//! temporaries, ZeRO/FSDP sharding, tensor/pipeline/sequence parallelism and
//! offload.
//!
//! # The peak
//! Two moments compete (both measured by `shared/calibration` group C):
//! * **start of backward**: weights (+ master, + optimizer states in steady
//!   state, + gradients when accumulating) + every saved activation + the
//!   saved log-softmax + the fp32 gradients of the logits
//!   (2 × batch × seq × vocab × 4 B); with checkpointing, later in backward
//!   one recomputed layer's saved set replaces the logits buffers;
//! * **optimizer step**: weights + master + gradients + states + the step's
//!   temporaries (AdamW `foreach`: one state-sized buffer; mixed precision:
//!   + the fp32 copy of the gradient partition, 4 B/param).
//!
//! # Files
//! [`profile`] (model states per GPU under a parallel layout),
//! [`activations`] (saved bytes per token), [`breakdown`] (the peak of one
//! step, computed once, as ledger lines), [`ledger`] (those lines with
//! their explanations). The setup types live in [`crate::workload`] and
//! are re-exported here.
//!
//! # For the planner (fast path)
//! Build a [`TrainModel`] once per (model, precision, kind, optimizer,
//! attention, LoRA shape) and call [`TrainModel::evaluate`] per candidate:
//! it reads only `batch`, `seq`, `grad_accum`, `checkpointing` and
//! `first_step` from the setup it is given, does no allocation and returns
//! a [`TrainBreakdown`] whose `tensor_peak` is what
//! `torch.cuda.max_memory_allocated()` would show (add runtime + margin for
//! the card). [`TrainProfile::states`] alone gives the per-GPU model states
//! as a function of ZeRO stage / TP / PP / offload.

pub mod activations;
pub mod breakdown;
pub mod comm;
pub mod ledger;
pub mod profile;

pub use crate::workload::{
    AttentionImpl, Bnb4Type, Checkpointing, CommSetup, Engine, LoraSetup, LoraTargets, LossPath, Optimizer, Precision,
    SelectivePolicy, TrainKind, TrainSetup,
};
pub use activations::{act_profile, ActProfile, AMP_ROPE_EXTRA_PER_QW};
pub use breakdown::{PeakLines, TrainBreakdown, TrainModel, EAGER_BWD_BYTES};
pub use ledger::estimate_training;
pub use profile::{ModelStates, TrainProfile, BNB_OPT_BLOCK};
