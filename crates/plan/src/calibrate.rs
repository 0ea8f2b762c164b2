//! The time model against published throughputs (`vramfit calibrate --set
//! throughput`): a typed case — a model, a workload, the hardware it ran on —
//! and what the planner's time model says it runs at, per GPU, compared with
//! what the source measured ([`compare_throughput`]: ratio per case, median,
//! the bar). The same functions the search uses ([`work_of`],
//! [`TimeModel::train_step`], [`TimeModel::infer`]); nothing here is fitted
//! to a case. The cases are read by `vramfit_ingest::calibration::throughput`.

use crate::time::{InferWork, TimeModel};
use crate::types::{MemSummary, Work};
use crate::work::work_of;
use serde::Serialize;
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
    w.machines = machines as f64;
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
        params_active: n,
        hidden: h,
        dp_attention: 1.0,
        a2a_layers: 0.0,
        a2a_bytes_per_step: 0.0,
        prefill_tokens: batch * c.input_len as f64,
        machines: 1.0,
    };
    let t = tm.infer(&work, &dev);
    let total = c.output_len as f64 * t.decode_step_s + t.prefill_s;
    if total <= 0.0 {
        return Err(CoreError::Internal("a batch of no time".into()));
    }
    Ok(batch * c.output_len as f64 / total)
}

/// The bar of `calibrate --set throughput`: the median ratio modelled /
/// published inside this range…
pub const MEDIAN_RANGE: (f64, f64) = (0.85, 1.15);
/// …and every counted case inside this one.
pub const CASE_RANGE: (f64, f64) = (0.6, 1.6);

/// The unit a source quotes its figure in.
#[derive(Debug, Clone, PartialEq)]
pub enum FigureUnit {
    /// trained tokens per second per GPU (`tokens/s/GPU`)
    TokensPerGpu,
    /// model TFLOP/s per GPU (`TFLOPS/GPU`)
    TflopsPerGpu,
    /// TFLOP/s per GPU counting the recomputed forward (`hardware TFLOPS/GPU`):
    /// Megatron-LM's Table 1 (Narayanan et al. 2021, Eq. 3, F = 96·B·s·l·h²(…)
    /// with full recompute), compared with the FLOPs the GPUs run (recompute included)
    HardwareTflopsPerGpu,
    /// any other unit, as written (serving figures: `tokens/s`, `output tokens/s`, …)
    Other(String),
}

impl FigureUnit {
    pub fn text(&self) -> &str {
        match self {
            FigureUnit::TokensPerGpu => "tokens/s/GPU",
            FigureUnit::TflopsPerGpu => "TFLOPS/GPU",
            FigureUnit::HardwareTflopsPerGpu => "hardware TFLOPS/GPU",
            FigureUnit::Other(u) => u,
        }
    }

    pub fn parse(s: &str) -> FigureUnit {
        match s {
            "tokens/s/GPU" => FigureUnit::TokensPerGpu,
            "TFLOPS/GPU" => FigureUnit::TflopsPerGpu,
            "hardware TFLOPS/GPU" => FigureUnit::HardwareTflopsPerGpu,
            other => FigureUnit::Other(other.to_string()),
        }
    }
}

/// What a case runs, in the time model's terms (boxed: a case holds a whole model and GPU spec).
#[derive(Debug, Clone)]
pub enum CaseSetup {
    Train(Box<TrainCase>),
    /// a serving engine; `per_gpu`: the figure is quoted per GPU of the TP group
    Serve {
        case: Box<ServeCase>,
        per_gpu: bool,
    },
}

/// Why a case is not compared with the time model.
#[derive(Debug, Clone, PartialEq)]
pub enum NotModelled {
    /// eager PyTorch generation at batch 1
    EagerGeneration,
    /// the source's GPU is not a catalogue card (the source's name)
    GpuNotInCatalogue(String),
    /// the source gives no model shape
    NoArchitecture,
    /// the case lacks what the time model needs (`workload`, `micro-batch`,
    /// `input length`, `output length`)
    Missing(&'static str),
    /// torchao float8 linears: the planner plans no fp8 training
    Fp8Training,
    /// the published figure read per GPU would exceed the GPU's dense peak
    ImpossiblePerGpu { peak_share: f64, flops_per_token: f64, gpus: u64, total_ratio: f64 },
    /// a layout part the time model cannot express yet (named)
    Layout(String),
    /// a unit the comparison does not convert to
    UnitNotCompared(String),
    /// the estimator refused the case
    Estimate(CoreError),
}

impl std::fmt::Display for NotModelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotModelled::EagerGeneration => f.write_str(
                "eager PyTorch generation at batch 1 is bound by kernel launches, not memory bandwidth: outside the time model (serving engines)",
            ),
            NotModelled::GpuNotInCatalogue(gpu) => write!(f, "{gpu} is not in the GPU catalogue"),
            NotModelled::NoArchitecture => f.write_str("the source gives no architecture"),
            NotModelled::Missing(what) => write!(f, "no {what}"),
            NotModelled::Fp8Training => f.write_str(
                "float8 training (torchao float8 linears): the planner does not plan fp8 training, so its time model has no fp8-training rate",
            ),
            NotModelled::ImpossiblePerGpu { peak_share, flops_per_token, gpus, total_ratio } => write!(
                f,
                "as tokens/s per GPU it needs {:.0}% of the GPU's dense peak ({:.2e} FLOPs a token): impossible; read as the total over {gpus} GPUs the model gives ratio {total_ratio:.2}",
                peak_share * 100.0,
                flops_per_token
            ),
            NotModelled::Layout(what) => write!(f, "{what} is a layout the time model cannot express yet"),
            NotModelled::UnitNotCompared(u) => write!(f, "unit {u} is not compared"),
            NotModelled::Estimate(e) => write!(f, "{e}"),
        }
    }
}

/// A published throughput: what the source quotes and what it ran.
#[derive(Debug, Clone)]
pub struct ThroughputCase {
    pub id: String,
    /// `full`, `lora`, `qlora`, `offload`, `serving`, `inference`
    pub group: String,
    /// `8 × H100 80GB`: the GPUs as the source names them
    pub hardware: String,
    pub unit: FigureUnit,
    pub published: f64,
    pub confidence: String,
    pub url: String,
    /// the case in the time model's terms, or why it cannot be
    pub setup: Result<CaseSetup, NotModelled>,
}

/// One case against the time model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    pub id: String,
    pub group: String,
    pub hardware: String,
    #[serde(serialize_with = "unit_text")]
    pub unit: FigureUnit,
    pub published: f64,
    /// None: not modelled (see `skipped`)
    pub modelled: Option<f64>,
    /// modelled / published (< 1: the model is slower than measured)
    pub ratio: Option<f64>,
    pub confidence: String,
    pub url: String,
    /// why the case is not counted
    #[serde(serialize_with = "reason_text")]
    pub skipped: Option<NotModelled>,
}

fn unit_text<S: serde::Serializer>(u: &FigureUnit, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(u.text())
}

fn reason_text<S: serde::Serializer>(r: &Option<NotModelled>, s: S) -> Result<S::Ok, S::Error> {
    r.as_ref().map(|r| r.to_string()).serialize(s)
}

/// Every case against the time model, and the bar.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThroughputComparison {
    pub cases: Vec<CaseResult>,
    /// cases modelled (with a ratio)
    pub counted: usize,
    pub median_ratio: Option<f64>,
    pub min_ratio: Option<f64>,
    pub max_ratio: Option<f64>,
    /// the median inside [`MEDIAN_RANGE`] and every counted case inside [`CASE_RANGE`]
    pub pass: bool,
}

/// The modelled figure of a case in the source's unit.
pub fn modelled_figure(c: &ThroughputCase, tm: &TimeModel) -> Result<f64, NotModelled> {
    match c.setup.as_ref().map_err(Clone::clone)? {
        CaseSetup::Serve { case, per_gpu } => {
            let t = serve_tokens_per_s(case, tm).map_err(NotModelled::Estimate)?;
            Ok(if *per_gpu { t / case.tp.max(1) as f64 } else { t })
        }
        CaseSetup::Train(case) => {
            let case = case.as_ref();
            let per_gpu = train_tokens_per_gpu(case, tm).map_err(NotModelled::Estimate)?;
            if c.unit == FigureUnit::TokensPerGpu {
                // the published figure must be possible on one GPU at all
                let (peak, flops) = train_peak_and_flops(case).map_err(NotModelled::Estimate)?;
                let used = c.published * flops / peak;
                if used > 1.0 {
                    let gpus = case.workload.parallelism.gpus.max(1);
                    return Err(NotModelled::ImpossiblePerGpu {
                        peak_share: used,
                        flops_per_token: flops,
                        gpus,
                        total_ratio: per_gpu * gpus as f64 / c.published,
                    });
                }
            }
            match &c.unit {
                FigureUnit::TokensPerGpu => Ok(per_gpu),
                FigureUnit::TflopsPerGpu => {
                    Ok(per_gpu * train_model_flops_per_token(case).map_err(NotModelled::Estimate)? / 1e12)
                }
                FigureUnit::HardwareTflopsPerGpu => {
                    Ok(per_gpu * train_peak_and_flops(case).map_err(NotModelled::Estimate)?.1 / 1e12)
                }
                FigureUnit::Other(u) => Err(NotModelled::UnitNotCompared(u.clone())),
            }
        }
    }
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Every case against the time model `tm`: ratio per case, median, range and the bar.
pub fn compare_throughput(cases: &[ThroughputCase], tm: &TimeModel) -> ThroughputComparison {
    let results: Vec<CaseResult> = cases
        .iter()
        .map(|c| {
            let (modelled, skipped) = match modelled_figure(c, tm) {
                Ok(m) => (Some(m), None),
                Err(why) => (None, Some(why)),
            };
            CaseResult {
                id: c.id.clone(),
                group: c.group.clone(),
                hardware: c.hardware.clone(),
                unit: c.unit.clone(),
                published: c.published,
                modelled,
                ratio: modelled.map(|m| m / c.published),
                confidence: c.confidence.clone(),
                url: c.url.clone(),
                skipped,
            }
        })
        .collect();
    let mut ratios: Vec<f64> = results.iter().filter_map(|c| c.ratio).collect();
    let min_ratio = ratios.iter().copied().reduce(f64::min);
    let max_ratio = ratios.iter().copied().reduce(f64::max);
    let counted = ratios.len();
    let median_ratio = median(&mut ratios);
    let pass = median_ratio.is_some_and(|m| (MEDIAN_RANGE.0..=MEDIAN_RANGE.1).contains(&m))
        && min_ratio.is_some_and(|m| m >= CASE_RANGE.0)
        && max_ratio.is_some_and(|m| m <= CASE_RANGE.1);
    ThroughputComparison { cases: results, counted, median_ratio, min_ratio, max_ratio, pass }
}
