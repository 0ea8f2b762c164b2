//! Typed errors of the ingest layer: each names the input, the field and
//! what was expected.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum IngestError {
    #[error("{file}: cannot read: {reason}")]
    Io { file: String, reason: String },
    #[error("{file}: not valid JSON: {reason}")]
    Json { file: String, reason: String },
    #[error("{file}: missing or invalid field{} {} (needed for model_type '{model_type}')", if fields.len() > 1 { "s" } else { "" }, fields.join(", "))]
    MissingFields { file: String, model_type: String, fields: Vec<String> },
    #[error("{file}: field '{field}': expected {expected}, found {found}")]
    BadField { file: String, field: String, expected: String, found: String },
    #[error("{file}: {reason}")]
    Invalid { file: String, reason: String },
    #[error("{file}: safetensors header: {reason}")]
    Safetensors { file: String, reason: String },
    /// `advice` says what to do (the command, flag or variable), never just "not found".
    #[error("unknown model '{}': {advice}{}", .query.escape_debug(), did_you_mean(.suggestions))]
    UnknownModel { query: String, advice: String, suggestions: Vec<String> },
    #[error("{file}: {error}")]
    Model { file: String, error: vramfit_core::CoreError },
    #[error(transparent)]
    Input(#[from] vramfit_input::InputError),
    #[error(transparent)]
    Hub(#[from] crate::hub::HubError),
}

fn did_you_mean(s: &[String]) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!("; did you mean: {}?", s.join(", "))
    }
}
