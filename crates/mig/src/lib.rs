//! vramfit-mig: split GPUs with MIG for several services (pure, no I/O).
//!
//! - [`model`]: profiles, the memory-slice placement axis, [`check_layout`]
//!   (the placement rules) and [`find_placement`].
//! - [`search`]: the exact search for the layout on the fewest GPUs, then
//!   with the least wasted memory, plus refusals with reasons (a job that
//!   would span instances; when a whole card is the better buy).
//! - [`sizing`]: a service's bytes from its parameter count (training).
//!
//! Profile tables come from `vramfit-catalog` (embedded) or from a user's
//! `nvidia-smi mig -lgip`/`-lgipp` output (parsed in `vramfit-hw`).

pub mod error;
pub mod model;
pub mod search;
pub mod sizing;

pub use error::MigError;
pub use model::{check_layout, find_placement, LayoutError, MigGpu, Placed, Profile};
pub use search::{
    plan, Advice, GpuLayout, Instance, Plan, Refusal, Service, ServiceKind, Throughput, LARGE_TRAINING_PARAMS,
    MAX_SERVICES, THROUGHPUT_ASSUMPTION,
};
pub use sizing::{training_state_bytes, TRAIN_BYTES_PER_PARAM};
