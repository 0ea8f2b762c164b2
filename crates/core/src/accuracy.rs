//! How an estimate compares with a measurement, and the accuracy bar a set
//! of measured cases must clear (`vramfit calibrate`, tests).
//!
//! Every comparison pairs a measured figure with the estimate of the *same*
//! quantity ([`Quantity`]): `torch.cuda.max_memory_allocated()` with the tensor
//! peak, `max_memory_reserved()` with the tensor peak plus the allocator's
//! overhead, nvidia-smi with that plus what lives outside the allocator, a
//! serving engine's KV-pool log line with the pool the engine would size.

use crate::workload::CommSetup;
use serde::Serialize;

/// Median |error| above this fails a calibration set (percent).
pub const MEDIAN_LIMIT_PCT: f64 = 3.0;
/// Any single case above this fails a calibration set (percent).
pub const MAX_LIMIT_PCT: f64 = 10.0;
/// A group of published cases fails when its median |error| is above this (percent).
pub const GROUP_MEDIAN_LIMIT_PCT: f64 = 5.0;
/// A group fails when its mean signed error is below this (percent): a group
/// that under-predicts on average tells users "fits" when it does not.
pub const GROUP_MEAN_SIGNED_FLOOR_PCT: f64 = -3.0;

/// Signed error of an estimate against a measurement, in percent of the
/// measurement: negative is an under-prediction (the dangerous direction).
/// `None` when nothing was measured (0 bytes).
pub fn error_pct(estimated: u64, measured: u64) -> Option<f64> {
    (measured > 0).then(|| (estimated as f64 - measured as f64) / measured as f64 * 100.0)
}

/// What an estimate is compared with: the figure a measuring tool shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// live tensors at the peak: `max_memory_allocated()`, `active_bytes.all.peak`
    TensorPeak,
    /// what the caching allocator holds at the peak: `max_memory_reserved()`
    /// (tensors + block rounding + cached free blocks)
    Reserved,
    /// the device's used memory (nvidia-smi / NVML): reserved + CUDA context +
    /// workspaces + memory outside the allocator (NCCL, paged optimizer states)
    DeviceUsed,
    /// tensors alive between steps: weights, master weights, optimizer states
    /// (the HF Trainer's allocated bytes after `train()`)
    Persistent,
    /// weights and adapters right after model init, with the quantize-on-load transient
    ModelInit,
    /// a serving engine's weights as loaded ("model weights take", "Model loading took")
    EngineWeights,
    /// a serving engine's KV-cache pool sized at start-up: a capacity, so the
    /// unsafe direction is an over-estimate
    EngineKvPool,
    /// a serving engine's activation peak of its start-up profiling run
    EngineActivation,
    /// a serving engine's memory outside the PyTorch allocator (context, NCCL, custom all-reduce)
    EngineNonTorch,
    /// a serving engine's CUDA-graph pool (vLLM "Graph capturing finished … took X GiB",
    /// "Estimated CUDA graph memory: X GiB"): `serving::graph_model`
    EngineCudaGraph,
    /// the CUDA context of one process (nvidia-smi after the first tiny tensor)
    CudaContext,
    /// device memory of one NCCL communicator of `ranks` GPUs
    NcclCommunicator { ranks: u64 },
    /// the difference in DeepSpeed ZeRO bucket memory between two configs
    DeepspeedBucketsDelta { from: CommSetup, to: CommSetup },
}

impl Quantity {
    /// The name printed in `vramfit calibrate` and its JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Quantity::TensorPeak => "tensor_peak",
            Quantity::Reserved => "reserved",
            Quantity::DeviceUsed => "device_used",
            Quantity::Persistent => "persistent",
            Quantity::ModelInit => "model_init",
            Quantity::EngineWeights => "engine_weights",
            Quantity::EngineKvPool => "engine_kv_pool",
            Quantity::EngineActivation => "engine_activation",
            Quantity::EngineNonTorch => "engine_non_torch",
            Quantity::EngineCudaGraph => "engine_cuda_graph",
            Quantity::CudaContext => "cuda_context",
            Quantity::NcclCommunicator { .. } => "nccl_communicator",
            Quantity::DeepspeedBucketsDelta { .. } => "deepspeed_buckets_delta",
        }
    }

    /// A capacity (more is optimistic), not memory used (less is optimistic).
    pub fn is_capacity(&self) -> bool {
        matches!(self, Quantity::EngineKvPool)
    }

    /// The error with the sign of safety: negative means the estimate is on the
    /// unsafe side (memory under-predicted, or a capacity over-stated).
    pub fn safety_error_pct(&self, error_pct: f64) -> f64 {
        if self.is_capacity() {
            -error_pct
        } else {
            error_pct
        }
    }
}

/// The accuracy of a set of cases (its serde form is the `summary` of
/// `vramfit calibrate --json`, docs/training.md).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Accuracy {
    pub cases: usize,
    pub median_abs_error_pct: f64,
    pub max_abs_error_pct: f64,
    /// mean of the errors with the sign of safety (negative = unsafe on average)
    pub mean_signed_error_pct: f64,
    pub median_limit_pct: f64,
    /// `None` when the bar has no per-case maximum (published sets)
    pub max_limit_pct: Option<f64>,
    /// at least one case, median and max |error| within their limits
    pub pass: bool,
}

impl Accuracy {
    /// The accuracy of cases with these signed errors (percent; negative =
    /// unsafe), against the bar of the FakeTensor sets (median 3%, max 10%).
    pub fn of(errors_pct: &[f64]) -> Accuracy {
        let mut abs: Vec<f64> = errors_pct.iter().map(|e| e.abs()).collect();
        abs.sort_by(|a, b| a.total_cmp(b));
        let n = abs.len();
        let median = match n {
            0 => 0.0,
            _ if n % 2 == 1 => abs[n / 2],
            _ => (abs[n / 2 - 1] + abs[n / 2]) / 2.0,
        };
        let max = abs.last().copied().unwrap_or(0.0);
        let mean = if n == 0 { 0.0 } else { errors_pct.iter().sum::<f64>() / n as f64 };
        Accuracy {
            cases: n,
            median_abs_error_pct: median,
            max_abs_error_pct: max,
            mean_signed_error_pct: mean,
            median_limit_pct: MEDIAN_LIMIT_PCT,
            max_limit_pct: Some(MAX_LIMIT_PCT),
            pass: n > 0 && median <= MEDIAN_LIMIT_PCT && max <= MAX_LIMIT_PCT,
        }
    }

    /// The accuracy of one group of published cases, against the published bar:
    /// median |error| ≤ 5% and mean signed error ≥ −3% (no maximum: single
    /// published figures carry their own rounding and assumptions).
    pub fn of_group(errors_pct: &[f64]) -> Accuracy {
        let mut a = Accuracy::of(errors_pct);
        a.median_limit_pct = GROUP_MEDIAN_LIMIT_PCT;
        a.max_limit_pct = None;
        a.pass = a.cases > 0
            && a.median_abs_error_pct <= GROUP_MEDIAN_LIMIT_PCT
            && a.mean_signed_error_pct >= GROUP_MEAN_SIGNED_FLOOR_PCT;
        a
    }

    /// The accuracy of a whole published set: median |error| ≤ 3% and mean
    /// signed error ≥ −3%.
    pub fn of_published(errors_pct: &[f64]) -> Accuracy {
        let mut a = Accuracy::of(errors_pct);
        a.max_limit_pct = None;
        a.pass = a.cases > 0
            && a.median_abs_error_pct <= MEDIAN_LIMIT_PCT
            && a.mean_signed_error_pct >= GROUP_MEAN_SIGNED_FLOOR_PCT;
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_max_and_the_bar() {
        assert_eq!(error_pct(97, 100), Some(-3.0));
        assert_eq!(error_pct(1, 0), None);
        let a = Accuracy::of(&[-1.0, 2.0, -4.0, 3.0]);
        assert_eq!((a.cases, a.median_abs_error_pct, a.max_abs_error_pct), (4, 2.5, 4.0));
        assert_eq!(a.mean_signed_error_pct, 0.0);
        assert!(a.pass);
        assert!(!Accuracy::of(&[0.5, 11.0, 0.1]).pass);
        assert!(!Accuracy::of(&[3.5, 3.5, 0.0]).pass);
        assert!(!Accuracy::of(&[]).pass);
    }

    #[test]
    fn a_group_that_under_predicts_on_average_fails() {
        // median |error| 4% is within the group bar, but the mean signed error −4% is not
        let g = Accuracy::of_group(&[-4.0, -4.0, -4.0, 1.0]);
        assert!(g.median_abs_error_pct <= GROUP_MEDIAN_LIMIT_PCT);
        assert_eq!(g.mean_signed_error_pct, -2.75);
        assert!(g.pass);
        let g = Accuracy::of_group(&[-4.0, -4.0, -4.0, -4.5]);
        assert!(!g.pass, "{g:?}");
        // the same errors, over-predicting, pass
        assert!(Accuracy::of_group(&[4.0, 4.0, 4.0, 4.5]).pass);
        assert!(!Accuracy::of_group(&[6.0, 6.0, 1.0]).pass);
    }

    #[test]
    fn a_capacity_is_unsafe_when_over_stated() {
        let kv = Quantity::EngineKvPool;
        assert_eq!(kv.safety_error_pct(5.0), -5.0);
        assert_eq!(Quantity::TensorPeak.safety_error_pct(5.0), 5.0);
    }
}

/// The model, workload and serving start-up a published case describes.
#[derive(Debug, Clone, Copy, Default)]
pub struct CaseInput<'a> {
    pub spec: Option<&'a crate::ModelSpec>,
    pub workload: Option<&'a crate::Workload>,
    pub serving: Option<&'a crate::serving::ServingSetup>,
}

/// vramfit's estimate of `quantity` for a case.
pub fn estimate_quantity(quantity: &Quantity, case: CaseInput) -> Result<u64, crate::CoreError> {
    use crate::{CoreError, Task};
    let need = |what: &str| CoreError::Unsupported(format!("{} needs {what}", quantity.name()));
    match quantity {
        Quantity::CudaContext => {
            return Ok(case
                .workload
                .map(|w| w.runtime.cuda_context_bytes)
                .unwrap_or(crate::runtime::DEFAULT_CUDA_CONTEXT))
        }
        Quantity::NcclCommunicator { ranks } => {
            // on the card the case names (its workload's runtime), with PyTorch's NCCL
            let hw = case.workload.map(|w| w.runtime.nccl).unwrap_or_default();
            return Ok(crate::nccl::communicator(*ranks, &hw, &crate::nccl::TORCH_DEFAULT).total);
        }
        Quantity::DeepspeedBucketsDelta { from, to } => {
            let elem = match case.workload.map(|w| &w.task) {
                Some(Task::Train(t)) => t.precision.compute_dtype().bytes()?,
                _ => 2,
            };
            let a = crate::train::comm::deepspeed_bucket_bytes(from, elem)?;
            let b = crate::train::comm::deepspeed_bucket_bytes(to, elem)?;
            return Ok(a.abs_diff(b));
        }
        _ => {}
    }
    let spec = case.spec.ok_or_else(|| need("a model"))?;
    let w = case.workload.ok_or_else(|| need("a workload"))?;
    if let (Some(s), Task::Inference(setup)) = (case.serving, &w.task) {
        let p = crate::serving::serving_profile(spec, setup, &w.parallelism, &w.runtime, s)?;
        return match quantity {
            Quantity::EngineWeights => Ok(p.weights_bytes),
            Quantity::EngineKvPool => Ok(p.kv_pool_bytes),
            Quantity::EngineActivation => Ok(p.activation_peak_bytes),
            Quantity::EngineNonTorch => Ok(p.non_torch_bytes),
            // inside the budget (0.21+) or on top of it (up to 0.20): one of them is 0
            Quantity::EngineCudaGraph => crate::units::add("CUDA graphs", p.cuda_graph_bytes, p.graphs_outside_bytes),
            _ => Err(need("a training or generate workload")),
        };
    }
    let ledger = crate::estimate(spec, w)?;
    Ok(match quantity {
        Quantity::TensorPeak => ledger.tensor_peak_bytes(),
        Quantity::Reserved => ledger.reserved_bytes(),
        Quantity::DeviceUsed => ledger.device_bytes(),
        Quantity::Persistent => {
            // FSDP1 (accelerate) leaves the last step's sharded flat gradients allocated
            let fsdp1 = matches!(&w.task, Task::Train(t) if t.framework().fsdp_grads_persist_after_step)
                && w.parallelism.sharding.stage() >= 2;
            let grads = if fsdp1 { train_gradients(spec, w)? } else { 0 };
            ledger.persistent_bytes() + grads
        }
        Quantity::ModelInit | Quantity::EngineWeights => ledger.bytes(crate::ledger::Category::Weights),
        _ => return Err(need("a serving start-up")),
    })
}

/// The full gradient buffer of a training workload on one GPU.
fn train_gradients(spec: &crate::ModelSpec, w: &crate::Workload) -> Result<u64, crate::CoreError> {
    let crate::Task::Train(t) = &w.task else { return Ok(0) };
    let m = crate::train::TrainModel::new(spec, t)?;
    Ok(m.profile.states(&w.parallelism)?.gradients)
}
