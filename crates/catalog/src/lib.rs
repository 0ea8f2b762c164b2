//! vramfit-catalog: embedded, versioned data files, parsed by the same code
//! that reads a user's own files (which are layered on top).
//!
//! - `presets`: model presets (exact dimensions as data)
//! - `gpus`, `offers`: GPU specs and rental offers (the priced catalogue)
//! - `mig`: MIG profiles and placement rules

pub mod gpus;
pub mod mig;
pub mod offers;
pub mod presets;
pub use gpus::{builtin_gpus, find_gpu, CatalogError};
