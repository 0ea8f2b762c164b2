//! vramfit-hw: what machine is this? Parsers of `nvidia-smi` outputs, a
//! probe trait (files, fixtures, NVML loaded at run time), and the verdict
//! against what was rented.

pub mod error;
pub mod files;
pub mod mig;

pub use error::HwError;
