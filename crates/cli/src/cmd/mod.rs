//! One module per subcommand; each owns its clap `Args` and a `run`.

pub mod calibrate;
pub mod calibrate_throughput;
pub mod check;
pub mod diagnose;
pub mod estimate;
pub mod gguf;
pub mod gpu_target;
pub mod mcp;
pub mod mig;
pub mod model_args;
pub mod plan;
pub mod svg_args;
pub mod sweep;
pub mod train_args;
pub mod width;
pub mod workload_args;
