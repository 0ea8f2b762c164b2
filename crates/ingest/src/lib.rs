//! vramfit-ingest: total parsers of model artifacts. Each returns a value
//! or a typed error naming the file, the field and what was expected.
//!
//! - [`config`]: Hugging Face `config.json` → `ModelSpec`
//! - [`safetensors`]: header-only reading of `.safetensors` (one file or sharded index)
//! - [`gguf`]: GGUF headers (metadata and tensor infos) → the model llama.cpp loads
//! - [`hf_cache`]: finding a hub id in the local Hugging Face cache (never the network)
//! - [`hub`]: the Hugging Face Hub on demand (config.json and safetensors
//!   headers by range requests; cargo feature `hub`), cached for offline runs
//! - [`resolve`]: one entry point for a model argument (path, cache, preset, Hub)
//! - [`peft`], [`deepspeed`]: adapter and DeepSpeed configs; [`lora`]: LoRA
//!   target modules in any spelling
//! - [`json`]: the one reader of JSON fields all of the above use
//! - [`calibration`]: measured cases: PyTorch-measured, published memory figures, published throughputs

pub mod calibration;
pub mod config;
pub mod deepspeed;
pub mod error;
pub mod gguf;
pub mod hf_cache;
pub mod hub;
pub mod json;
pub mod lora;
pub mod peft;
pub mod resolve;
pub mod safetensors;

pub use error::IngestError;
pub use resolve::{resolve_model, ResolvedModel};
