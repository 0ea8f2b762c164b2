//! The time model against published throughputs (`vramfit calibrate --set
//! throughput`): a typed case — a model, a workload, the hardware it ran on —
//! and what the planner's time model says it runs at, per GPU. The same
//! functions the search uses ([`work_of`], [`TimeModel::train_step`],
//! [`TimeModel::infer`]); nothing here is fitted to a case.

use crate::time::{InferWork, TimeModel};
use crate::types::{MemSummary, Work};
use crate::work::work_of;
use vramfit_core::dtype::DType;
use vramfit_core::error::CoreError;
use vramfit_core::estimate::estimate;
use vramfit_core::hardware::{GpuSpec, Link, PeakKind};
use vramfit_core::infer::kv_geometry;
use vramfit_core::model::ModelSpec;
use vramfit_core::params::ParamLayout;
use vramfit_core::workload::Workload;

/// A published training throughput: the job and where it ran.
#[derive(Debug, Clone)]
pub struct TrainCase {
    pub model: ModelSpec,
    /// the job over all its GPUs (parallelism included)
    pub workload: Workload,
    pub gpu: GpuSpec,
    pub link: Link,
    /// GPUs per machine (a job over more spans machines)
    pub gpus_per_node: u64,
    /// fabric between machines, GB/s per GPU
    pub inter_node_gbs: Option<f64>,
    /// the linears run in fp8 (torchao float8): the fp8 peak
    pub fp8_linears: bool,
    /// CPU cores for CPU-Adam (offload), if stated
    pub cpu_cores: Option<u64>,
}

/// A published serving throughput: offline, every request queued at once.
#[derive(Debug, Clone)]
pub struct ServeCase {
    pub model: ModelSpec,
    pub gpu: GpuSpec,
    pub tp: u64,
    /// bytes per weight (fp8: 1)
    pub weight_dtype: DType,
    pub kv_dtype: DType,
    pub input_len: u64,
    pub output_len: u64,
    /// share of the memory left after the weights that the engine gives the KV cache
    pub kv_fraction: f64,
    /// the engine's largest batch
    pub max_batch: u64,
}

/// The modelled training throughput, tokens/s per GPU.
pub fn train_tokens_per_gpu(c: &TrainCase, tm: &TimeModel) -> Result<f64, CoreError> {
    let l = estimate(&c.model, &c.workload)?;
    let m = MemSummary::of(&l)?;
    let Work::Train(mut w) = work_of(&c.model, &c.workload, &m, 1) else {
        return Err(CoreError::Internal("a training case has no training work".into()));
    };
    if c.fp8_linears {
        w.peak = PeakKind::Fp8;
    }
    let gpus = c.workload.parallelism.gpus.max(1);
    let machines = gpus.div_ceil(c.gpus_per_node.max(1));
    w.multi_node = machines > 1;
    w.cpu_params_per_step /= machines as f64;
    let dev = tm.device(&c.gpu, c.link, 1.0, c.inter_node_gbs, w.peak);
    let st = tm.train_step(&w, &dev, c.cpu_cores);
    if st.total_s <= 0.0 {
        return Err(CoreError::Internal("a step of no time".into()));
    }
    Ok(w.tokens_per_step / st.total_s / gpus as f64)
}

/// Dense peak FLOP/s one GPU of the case computes at, and the FLOPs each
/// trained token costs it (recompute included): a published tokens/s per GPU
/// above `peak / flops` is physically impossible as a per-GPU figure.
pub fn train_peak_and_flops(c: &TrainCase) -> Result<(f64, f64), CoreError> {
    let l = estimate(&c.model, &c.workload)?;
    let m = MemSummary::of(&l)?;
    match work_of(&c.model, &c.workload, &m, 1) {
        Work::Train(w) => {
            let peak = if c.fp8_linears { PeakKind::Fp8 } else { w.peak };
            Ok((c.gpu.peak_tflops(peak).1 * 1e12, w.flops_per_token))
        }
        Work::Infer(_) => Err(CoreError::Internal("a training case has no training work".into())),
    }
}

/// Model FLOPs per trained token (6·N + attention; 4·N for adapters), to
/// turn a modelled tokens/s into the TFLOP/s a source quotes.
pub fn train_model_flops_per_token(c: &TrainCase) -> Result<f64, CoreError> {
    let l = estimate(&c.model, &c.workload)?;
    let m = MemSummary::of(&l)?;
    match work_of(&c.model, &c.workload, &m, 1) {
        Work::Train(w) => Ok(w.model_flops_per_token),
        Work::Infer(_) => Err(CoreError::Internal("a training case has no training work".into())),
    }
}

/// The modelled offline serving throughput, generated tokens/s of the whole
/// engine: the largest batch whose KV cache (input + output tokens per
/// sequence) fits beside the weights, each batch prefilled then decoded.
pub fn serve_tokens_per_s(c: &ServeCase, tm: &TimeModel) -> Result<f64, CoreError> {
    let layout = ParamLayout::of(&c.model)?;
    let n = layout.active()? as f64;
    let tp = c.tp.max(1);
    let weights = n * c.weight_dtype.bytes_f64() / tp as f64;
    // recurrent state (hybrid models) is kept in the 16-bit compute dtype
    let kv_tok = kv_geometry(&c.model, c.kv_dtype, vramfit_core::dtype::DType::BF16, tp, 1)?.bytes_per_token as f64;
    let seq = (c.input_len + c.output_len) as f64;
    let free = (c.gpu.memory_bytes() as f64 - weights) * c.kv_fraction;
    let batch = (free / (kv_tok * seq)).floor().clamp(1.0, c.max_batch.max(1) as f64);
    let l = c.model.num_layers as f64;
    let h = c.model.hidden_size as f64;
    let ctx = c.input_len as f64 + c.output_len as f64 / 2.0;
    let peak = if c.weight_dtype.bits() <= 8 { PeakKind::Fp8 } else { PeakKind::Bf16 };
    let link = if tp > 1 { Link::Nvlink } else { Link::Pcie };
    let dev = tm.device(&c.gpu, link, 1.0, None, peak);
    let work = InferWork {
        bytes_per_step: weights + batch * ctx * kv_tok,
        concurrency: batch,
        replicas: 1.0,
        decode_flops_per_token: 2.0 * n + 4.0 * l * h * ctx,
        peak,
        prefill_flops: batch * c.input_len as f64 * (2.0 * n + 2.0 * l * h * c.input_len as f64),
        tp: tp as f64,
        pp: 1.0,
        layers: l,
    };
    let t = tm.infer(&work, &dev);
    let total = c.output_len as f64 * t.decode_step_s + t.prefill_s;
    if total <= 0.0 {
        return Err(CoreError::Internal("a batch of no time".into()));
    }
    Ok(batch * c.output_len as f64 / total)
}
