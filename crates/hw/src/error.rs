//! Errors of the machine-check parsers: name the file, the line or field,
//! and what was expected.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum HwError {
    /// A line or field that does not have the expected shape.
    #[error("{file}: line {line}: expected {expected}, found \"{found}\"")]
    Syntax { file: String, line: usize, expected: String, found: String },
    /// The file parsed but is not the output it should be (e.g. no GPU rows at all).
    #[error("{file}: {what}")]
    Invalid { file: String, what: String },
    /// `nvidia-smi -q -x` output that is not well-formed or lacks a field.
    #[error("{file}: not `nvidia-smi -q -x` XML: {message}")]
    Xml { file: String, message: String },
    #[error("{file}: {bytes} bytes; at most {limit} are read (is this the right file?)")]
    TooLarge { file: String, bytes: u64, limit: u64 },
    /// The file could not be read (missing, not a regular file, over the cap, not text).
    #[error(transparent)]
    Input(#[from] vramfit_input::InputError),
    /// The embedded catalogue did not load (a build defect, not user input).
    #[error("catalogue: {message}")]
    Catalog { message: String },
    /// NVML could not be loaded or queried (no driver, no GPU).
    #[error(
        "NVML is absent ({reason}); give nvidia-smi output as files instead: --xml <nvidia-smi -q -x>, \
         --text <nvidia-smi -q>, --topo <nvidia-smi topo -m>, --lgi <nvidia-smi mig -lgi>"
    )]
    NvmlAbsent { reason: String },
}

impl HwError {
    pub(crate) fn syntax(file: &str, line: usize, expected: impl Into<String>, found: &str) -> Self {
        let found: String = crate::clean::escape_controls(&found.chars().take(120).collect::<String>());
        HwError::Syntax { file: file.to_string(), line, expected: expected.into(), found }
    }
    pub(crate) fn invalid(file: &str, what: impl Into<String>) -> Self {
        HwError::Invalid { file: file.to_string(), what: what.into() }
    }
}
