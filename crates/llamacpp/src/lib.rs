//! vramfit-llamacpp: llama.cpp's memory, computed the way llama.cpp computes it.
//!
//! Given a GGUF model ([`model::LlamaModel`], read by `vramfit-ingest`) and
//! a launch (`-c`, `-ngl`, `-ts`, `-ctk/-ctv`, `-np`, `-fa`, …), [`plan::plan`]
//! returns, per GPU and for the host, the buffers llama.cpp prints at start
//! (`model buffer`, `KV buffer`, `compute buffer`, `output buffer`), which
//! layers sit where, and [`plan::command_line`] the flags that reproduce it;
//! [`plan::max_gpu_layers`] and [`plan::max_context`] search what fits.
//!
//! - [`arch`]: the architectures whose graph is built on their own terms
//! - [`build`]: the llama.cpp builds whose rules differ (`--llamacpp-build`)
//! - [`companion`]: a projector (`--mmproj`) and a draft model (`-md`) beside the model
//! - [`mtp`]: `--spec-type draft-mtp` on the model's own NextN layers (their weights, the MTP context)
//! - [`ggml`]: tensor types, block sizes, cache types
//! - [`model`]: the model description and tensor slots
//! - [`options`]: the launch flags, their defaults and bounds ([`LlamaCppOptions::validate`])
//! - [`placement`]: `-ngl` / `--tensor-split` → devices, model buffers
//! - [`lines`]: the lines of a device's memory (a leaf, shared by plan and companion)
//! - [`kv`]: context padding, parallel sequences, sliding-window and recurrent caches
//! - [`graph`]: a replica of ggml's scheduler and graph allocator
//! - [`compute`]: llama.cpp's reserve graph, built op by op
//! - [`plan`]: all of it per device, the command line, the searches
//!
//! Pure: no I/O. Every byte count carries its formula and source. Depends on
//! `vramfit-core` (errors, checked byte arithmetic, explanations and the
//! sliding-window cache rule core shares), never the reverse.

pub mod arch;
pub mod build;
pub mod companion;
pub mod compute;
pub mod ggml;
pub mod graph;
pub mod kv;
pub mod lines;
pub mod model;
pub mod mtp;
pub mod options;
pub mod placement;
pub mod plan;

pub use ggml::GgmlType;
pub use graph::Device;
pub use kv::CacheKind;
pub use model::TypeTally;
pub use model::{LlamaModel, Slot, TensorInfo};
pub use options::{FlashAttn, GpuSlot, LlamaCppOptions, OptionField, OptionsError};
pub use placement::BufferType;
pub use plan::{
    command_line, context_search_cap, fit_search, max_context, max_gpu_layers, plan, FitSearch, LineKind, LlamaCppPlan,
    ModelArg,
};
