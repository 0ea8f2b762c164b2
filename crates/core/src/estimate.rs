//! The single entry point: model + workload → ledger.

use crate::error::CoreError;
use crate::infer::estimate_inference;
use crate::ledger::Ledger;
use crate::model::ModelSpec;
use crate::train::estimate_training;
use crate::workload::{Task, Workload};

/// Per-GPU memory ledger of `workload` on `model`.
pub fn estimate(model: &ModelSpec, workload: &Workload) -> Result<Ledger, CoreError> {
    match &workload.task {
        Task::Inference(setup) => {
            estimate_inference(model, setup, &workload.parallelism, &workload.runtime).map(|(l, _)| l)
        }
        Task::Train(setup) => estimate_training(model, setup, &workload.parallelism, &workload.runtime),
    }
}
