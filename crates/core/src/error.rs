//! Errors of the pure core: always name the field and what was expected.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum CoreError {
    /// A byte count or product did not fit in 64 bits.
    #[error("{what} overflows 64-bit byte arithmetic (more than 16 EiB): the inputs are absurdly large")]
    Overflow { what: String },
    /// An input that is present but unusable (zero, contradictory, out of range).
    #[error("invalid {field}: {reason}")]
    Invalid { field: String, reason: String },
    /// A combination the model cannot express (e.g. TP degree that does not divide the heads).
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl CoreError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        CoreError::Invalid { field: field.into(), reason: reason.into() }
    }
}
