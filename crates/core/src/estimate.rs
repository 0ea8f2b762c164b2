//! The single entry point: model + workload → ledger.

use crate::error::CoreError;
use crate::infer::estimate_inference;
use crate::ledger::Ledger;
use crate::model::{ModelSpec, Positional};
use crate::train::estimate_training;
use crate::workload::{Task, Workload};

/// Per-GPU memory ledger of `workload` on `model`. The workload is checked
/// first ([`crate::workload::validate`]): a broken rule is a
/// [`CoreError::Workload`] naming its field.
pub fn estimate(model: &ModelSpec, workload: &Workload) -> Result<Ledger, CoreError> {
    let (mut ledger, seq) = match &workload.task {
        Task::Inference(setup) => {
            (estimate_inference(model, setup, &workload.parallelism, &workload.runtime)?.0, setup.context)
        }
        Task::Train(setup) => (estimate_training(model, setup, &workload.parallelism, &workload.runtime)?, setup.seq),
    };
    if let Some(n) = position_note(model, seq) {
        ledger.notes.push(n);
    }
    Ok(ledger)
}

/// Rotary models can be run past `max_position_embeddings`, but not as trained.
pub fn position_note(model: &ModelSpec, seq: u64) -> Option<String> {
    (model.positional == Positional::Rotary && seq > model.max_position_embeddings).then(|| {
        format!(
            "{seq} tokens per sequence is beyond the model's max_position_embeddings {}: it runs, but quality is not what the model was trained for without RoPE scaling (engines such as vLLM refuse it unless max_model_len is overridden); the memory figures still hold",
            model.max_position_embeddings
        )
    })
}
