//! The single entry point: model + workload → ledger.

use crate::error::CoreError;
use crate::infer::estimate_inference;
use crate::ledger::Ledger;
use crate::model::{ModelSpec, Positional};
use crate::train::estimate_training;
use crate::workload::{Task, Workload};

/// Per-GPU memory ledger of `workload` on `model`.
pub fn estimate(model: &ModelSpec, workload: &Workload) -> Result<Ledger, CoreError> {
    let (mut ledger, seq) = match &workload.task {
        Task::Inference(setup) => {
            check_positions(model, setup.context)?;
            (estimate_inference(model, setup, &workload.parallelism, &workload.runtime)?.0, setup.context)
        }
        Task::Train(setup) => {
            check_positions(model, setup.seq)?;
            (estimate_training(model, setup, &workload.parallelism, &workload.runtime)?, setup.seq)
        }
    };
    if let Some(n) = position_note(model, seq) {
        ledger.notes.push(n);
    }
    Ok(ledger)
}

/// A learned position table has exactly `max_position_embeddings` rows: a
/// longer sequence cannot run at all (GPT-2: 1024).
pub fn check_positions(model: &ModelSpec, seq: u64) -> Result<(), CoreError> {
    if model.positional == Positional::Learned && seq > model.max_position_embeddings {
        return Err(CoreError::invalid(
            "context",
            format!(
                "{seq} tokens per sequence, but {} has a learned position table of {} positions: longer sequences cannot run",
                model.name, model.max_position_embeddings
            ),
        ));
    }
    Ok(())
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
