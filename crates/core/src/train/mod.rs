//! Training memory (full fine-tune, LoRA, QLoRA): model states, activations,
//! logits, optimizer temporaries, sharding, offload.

mod setup;

pub use setup::{AttentionImpl, Checkpointing, LoraSetup, LoraTargets, Optimizer, Precision, TrainKind, TrainSetup};

use crate::error::CoreError;
use crate::ledger::Ledger;
use crate::model::ModelSpec;
use crate::runtime::RuntimeSetup;
use crate::workload::Parallelism;

pub fn estimate_training(
    _spec: &ModelSpec,
    _setup: &TrainSetup,
    _par: &Parallelism,
    _rt: &RuntimeSetup,
) -> Result<Ledger, CoreError> {
    Err(CoreError::Unsupported("training estimates are not built yet".into()))
}
