//! vramfit-core: the pure heart of vramfit.
//!
//! Data flows one way: a [`ModelSpec`] (what the network is) and a
//! [`Workload`] (what is done with it, on how many GPUs) go into
//! [`estimate()`], which returns a [`Ledger`]: per-GPU bytes by category,
//! each entry carrying the formula and inputs that produced it.
//!
//! This crate does no I/O: no files, no environment, no clocks. Parsers of
//! real artifacts live in `vramfit-ingest`, embedded data in
//! `vramfit-catalog`, renderers in `vramfit-report`.
//!
//! ```
//! use vramfit_core::{estimate, ModelSpec, Workload, Category};
//! let model = ModelSpec::llama_like("tiny", 256, 2, 4, 4, 688, 32000);
//! let ledger = estimate(&model, &Workload::default()).unwrap();
//! assert!(ledger.bytes(Category::Weights) > 0);
//! ```

pub mod accuracy;
pub mod arch;
pub mod dtype;
pub mod error;
pub mod estimate;
pub mod explain;
pub mod fit;
pub mod hardware;
pub mod hf;
pub mod infer;
pub mod kv;
pub mod ledger;
pub mod model;
pub mod nccl;
pub mod params;
pub mod quant;
pub mod quantity;
pub mod runtime;
pub mod serving;
pub mod train;
pub mod units;
pub mod vision;
pub mod weights;
pub mod workload;

pub use dtype::DType;
pub use error::CoreError;
pub use estimate::estimate;
pub use explain::{Explanation, Term, Value};
pub use fit::{fit, Fit, FitVerdict, GuideHeadroom};
pub use hardware::{GpuArch, GpuSpec, Link};
pub use infer::{capacity, Capacity};
pub use kv::KvGeometry;
pub use ledger::{Category, Entry, Ledger, Phase, Pool};
pub use model::{
    Attention, EncoderSpec, Family, Ffn, IndexerSpec, LayerKind, LinearAttentionSpec, Mamba2Spec, Mixer, MlaSpec,
    MlpKind, ModelSpec, MoeSpec, NormKind, Positional, VisionKind, VisionSpec,
};
pub use params::{LinearRole, ParamGroup, ParamGroupKind, ParamLayout};
pub use quant::{QuantMethod, QuantSpec};
pub use runtime::RuntimeSetup;
pub use train::TrainSetup;
pub use units::{Bytes, GIB, MIB};
pub use workload::{InferenceSetup, Offload, Parallelism, PrefillLogits, Sharding, SlidingWindowCache, Task, Workload};
