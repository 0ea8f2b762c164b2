//! vramfit-report: the stable machine interface and the renderers.
//!
//! Each command has a module with its JSON schema types (serde, versioned
//! by `"schema": 1`) and its renderers, which return strings; only the
//! binary writes them anywhere. docs/schema.md documents every field.

pub mod calibrate;
pub mod check;
pub mod diagnose;
pub mod estimate;
pub mod fleet;
pub mod format;
pub mod i18n;
pub mod llamacpp;
pub mod mig;
pub mod plan;
pub mod svg;
pub mod sweep;
pub mod throughput;

/// Version of every JSON document vramfit emits.
pub const SCHEMA_VERSION: u32 = 1;
