//! Errors of the MIG search: always name what was wrong and what was expected.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum MigError {
    /// The profile table is unusable (from the catalogue or a user's `-lgip` file).
    #[error("MIG profile table for {gpu}: {field}: {reason}")]
    BadProfile { gpu: String, field: String, reason: String },
    /// A service is unusable (zero bytes, empty name, duplicate name).
    #[error("service {service}: {reason}")]
    BadService { service: String, reason: String },
    /// More services than the search accepts.
    #[error("{count} services given; at most {max} are accepted (that is {max} MIG instances)")]
    TooManyServices { count: usize, max: usize },
    /// The exhaustive search hit its node budget (never expected for real inputs).
    #[error(
        "the exact layout search stopped after {nodes} nodes without proving the best layout; give fewer services"
    )]
    SearchTooLarge { nodes: u64 },
}
