//! Training memory (full fine-tune, LoRA, QLoRA). Filled in by the training work.

use crate::error::CoreError;
use crate::ledger::Ledger;
use crate::model::ModelSpec;
use crate::runtime::RuntimeSetup;
use crate::workload::Parallelism;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainSetup {
    pub batch: u64,
    pub seq: u64,
}

pub fn estimate_training(
    _spec: &ModelSpec,
    _setup: &TrainSetup,
    _par: &Parallelism,
    _rt: &RuntimeSetup,
) -> Result<Ledger, CoreError> {
    Err(CoreError::Unsupported("training estimates are not built yet".into()))
}
