//! Path (1): software switches on the card the user has, applied one after
//! another in the seed's order — mixed precision → gradient accumulation →
//! checkpointing → 8-bit optimizer → (LoRA / QLoRA when allowed) → offload —
//! each with what it saves and what it costs in speed. Inference: fp8 KV
//! cache → int8 → int4 weights (when `--allow quant`). Every figure comes
//! from [`vramfit_core::estimate()`] and the time model; nothing is assumed here.

use crate::time::TimeModel;
use crate::types::{Allow, MemSummary, Work};
use crate::work::work_of;
use serde::Serialize;
use vramfit_core::dtype::DType;
use vramfit_core::estimate::estimate;
use vramfit_core::hardware::{GpuSpec, Link};
use vramfit_core::ledger::Phase;
use vramfit_core::model::ModelSpec;
use vramfit_core::quant::QuantSpec;
use vramfit_core::train::{Checkpointing, Optimizer, Precision, TrainKind};
use vramfit_core::workload::{defaults, Offload, Sharding, Task, Workload};

/// What happened to a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    /// applied (and kept for the following steps)
    Applied,
    /// the job already does this
    AlreadyOn,
    /// shown for information, not kept: needs the flag named
    NotAllowed,
    /// does not apply to this job
    NotApplicable,
    /// the estimator refused the setup
    Refused,
    /// tried, but it does not lower per-GPU memory at the peak: not kept, not
    /// counted in the speed cost or the "fits after" chain (`detail` says why)
    Skipped,
}

/// One rung of the ladder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LadderStep {
    pub name: String,
    pub status: StepStatus,
    /// why not applied / what it changed
    pub detail: String,
    /// per-GPU bytes after this step (None when refused)
    pub per_gpu_bytes: Option<u64>,
    /// bytes saved against the previous kept state (negative: costs memory)
    pub saved_bytes: Option<i128>,
    pub fits: bool,
    /// time per token against the starting point (≥ 1 is slower)
    pub slowdown: Option<f64>,
    pub tokens_per_s: Option<f64>,
    /// host RAM the job needs after this step (offload; `Ledger::cpu_bytes`, one GPU)
    pub cpu_bytes: u64,
    /// the workload after this step (for the diagnosis's per-rung ledgers; not in the JSON)
    #[serde(skip)]
    pub workload: Option<Workload>,
}

/// The whole ladder on one card (path 1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ladder {
    pub gpu_id: String,
    pub gpu_name: String,
    pub gpu_memory_bytes: u64,
    pub start_bytes: Option<u64>,
    pub start_fits: bool,
    pub steps: Vec<LadderStep>,
    /// index of the first applied step after which the job fits
    pub first_fit: Option<usize>,
}

struct Eval {
    mem: MemSummary,
    tps: f64,
    phase: Phase,
}

fn eval(spec: &ModelSpec, w: &Workload, gpu: &GpuSpec, tm: &TimeModel) -> Option<Eval> {
    let l = estimate(spec, w).ok()?;
    let mem = MemSummary::of_job(spec, w, &l).ok()?;
    let phase = l.peak_phase;
    let work = work_of(spec, w, &mem, 1);
    let peak = match work {
        Work::Train(w) => w.peak,
        Work::Infer(w) => w.peak,
    };
    let dev = tm.device(gpu, Link::Pcie, 1.0, None, peak);
    let tps = match work {
        Work::Train(work) => {
            let st = tm.train_step(&work, &dev, None);
            if st.total_s > 0.0 {
                work.tokens_per_step / st.total_s
            } else {
                0.0
            }
        }
        Work::Infer(work) => tm.infer(&work, &dev).decode_tokens_per_s,
    };
    Some(Eval { mem, tps, phase })
}

struct Ctx<'a> {
    spec: &'a ModelSpec,
    gpu: &'a GpuSpec,
    tm: &'a TimeModel,
    cap: u64,
    start_tps: f64,
}

impl Ctx<'_> {
    /// Evaluate one candidate step against the last kept state.
    fn measure(
        &self,
        name: &str,
        next: Workload,
        gate: Option<&str>,
        prev: Option<u64>,
        prev_phase: Option<Phase>,
    ) -> (LadderStep, Option<Eval>) {
        let e = eval(self.spec, &next, self.gpu, self.tm);
        let (bytes, tps, cpu) = match &e {
            Some(e) => (Some(e.mem.total), Some(e.tps), e.mem.cpu),
            None => (None, None, 0),
        };
        let saved = match (prev, bytes) {
            (Some(p), Some(b)) => Some(p as i128 - b as i128),
            _ => None,
        };
        let start_tps = self.start_tps;
        let slowdown = tps.filter(|t| *t > 0.0 && start_tps > 0.0).map(|t| start_tps / t);
        let fits = bytes.is_some_and(|b| b <= self.cap);
        let status = if e.is_none() {
            StepStatus::Refused
        } else if gate.is_some() {
            StepStatus::NotAllowed
        } else if saved.is_some_and(|d| d <= 0) {
            StepStatus::Skipped
        } else {
            StepStatus::Applied
        };
        let detail = match (&status, gate) {
            (StepStatus::NotAllowed, Some(g)) => format!("not applied: needs {g} (changes the method)"),
            (StepStatus::Refused, _) => "the estimator refused this setup".into(),
            (StepStatus::Skipped, _) => skip_reason(name, prev_phase, saved.unwrap_or(0)),
            _ => String::new(),
        };
        // a skipped step is not kept: no speed cost, no fit
        let (slowdown, fits) = if status == StepStatus::Skipped { (None, false) } else { (slowdown, fits) };
        let step = LadderStep {
            name: name.into(),
            status,
            detail,
            per_gpu_bytes: bytes,
            saved_bytes: saved,
            fits,
            slowdown,
            tokens_per_s: tps,
            cpu_bytes: cpu,
            workload: Some(next),
        };
        (step, e)
    }
}

fn phase_words(p: Phase) -> &'static str {
    match p {
        Phase::OptimizerStep => "the optimizer step",
        Phase::Backward => "backward",
        Phase::Forward => "forward",
        Phase::Prefill => "prefill",
        Phase::Decode => "decode",
    }
}

/// One software switch of the ladder, in the seed's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rung {
    MixedPrecision,
    GradientAccumulation,
    Checkpointing,
    EightBitOptimizer,
    Lora,
    Qlora,
    OffloadOptimizer,
    OffloadParams,
    Fp8Kv,
    IntWeights(u64),
}

/// A switch that cannot be tried on the current state, and why.
type NotTried = (StepStatus, String);

impl Rung {
    const TRAIN: [Rung; 8] = [
        Rung::MixedPrecision,
        Rung::GradientAccumulation,
        Rung::Checkpointing,
        Rung::EightBitOptimizer,
        Rung::Lora,
        Rung::Qlora,
        Rung::OffloadOptimizer,
        Rung::OffloadParams,
    ];
    const INFER: [Rung; 3] = [Rung::Fp8Kv, Rung::IntWeights(8), Rung::IntWeights(4)];

    fn name(self) -> &'static str {
        match self {
            Rung::MixedPrecision => "mixed precision",
            Rung::GradientAccumulation => "gradient accumulation",
            Rung::Checkpointing => "activation checkpointing",
            Rung::EightBitOptimizer => "8-bit optimizer",
            Rung::Lora => "LoRA",
            Rung::Qlora => "QLoRA",
            Rung::OffloadOptimizer => "CPU offload (optimizer)",
            Rung::OffloadParams => "CPU offload (parameters too)",
            Rung::Fp8Kv => "fp8 KV cache",
            Rung::IntWeights(8) => "int8 weights",
            Rung::IntWeights(_) => "int4 weights",
        }
    }

    /// The flag a method change needs (`None`: allowed).
    fn gate(self, allow: Allow) -> Option<&'static str> {
        match self {
            Rung::Lora if !allow.lora => Some("--allow lora"),
            Rung::Qlora if !allow.qlora => Some("--allow qlora"),
            Rung::Fp8Kv | Rung::IntWeights(_) if !allow.quant => Some("--allow quant"),
            _ => None,
        }
    }

    /// `w` with this switch on, or why it cannot be tried.
    fn apply(self, w: &Workload, gpu_bf16: bool) -> Result<Workload, NotTried> {
        let mut w = w.clone();
        match (&mut w.task, self) {
            (Task::Train(t), Rung::MixedPrecision) => {
                if t.precision != Precision::Fp32 {
                    return Err((StepStatus::AlreadyOn, format!("already {}", t.precision.name())));
                }
                t.precision = if gpu_bf16 { Precision::AmpBf16 } else { Precision::AmpFp16 };
            }
            (Task::Train(t), Rung::GradientAccumulation) => {
                if t.batch <= 1 {
                    return Err((StepStatus::AlreadyOn, "micro-batch already 1".into()));
                }
                t.grad_accum = t.batch * t.grad_accum.max(1);
                t.batch = 1;
            }
            (Task::Train(t), Rung::Checkpointing) => {
                if t.checkpointing == Checkpointing::Full {
                    return Err((StepStatus::AlreadyOn, "already full".into()));
                }
                t.checkpointing = Checkpointing::Full;
            }
            (Task::Train(t), Rung::EightBitOptimizer) => match t.optimizer {
                Optimizer::AdamW => t.optimizer = Optimizer::AdamW8bit,
                o if o.is_8bit() => return Err((StepStatus::AlreadyOn, format!("already {}", o.name()))),
                o => return Err((StepStatus::NotApplicable, format!("{} has no 8-bit variant", o.name()))),
            },
            (Task::Train(t), Rung::Lora) => {
                if t.kind != TrainKind::Full {
                    return Err((StepStatus::AlreadyOn, format!("already {}", t.kind.name())));
                }
                t.kind = TrainKind::Lora;
            }
            (Task::Train(t), Rung::Qlora) => {
                if t.kind == TrainKind::Qlora {
                    return Err((StepStatus::AlreadyOn, "already qlora".into()));
                }
                t.kind = TrainKind::Qlora;
            }
            (Task::Train(t), Rung::OffloadOptimizer) => {
                if w.parallelism.offload_optimizer != Offload::None {
                    return Err((StepStatus::AlreadyOn, "already offloaded".into()));
                }
                w.parallelism.sharding = Sharding::Zero2;
                w.parallelism.offload_optimizer = Offload::Cpu;
                if t.optimizer.is_8bit() {
                    // DeepSpeed's CPU-Adam replaces the GPU optimizer
                    t.optimizer = Optimizer::AdamW;
                }
            }
            (Task::Train(_), Rung::OffloadParams) => {
                if w.parallelism.offload_params != Offload::None {
                    return Err((StepStatus::AlreadyOn, "already offloaded".into()));
                }
                w.parallelism.sharding = Sharding::Zero3;
                w.parallelism.offload_optimizer = Offload::Cpu;
                w.parallelism.offload_params = Offload::Cpu;
            }
            (Task::Inference(s), Rung::Fp8Kv) => {
                if s.kv_dtype.bits() <= 8 {
                    return Err((StepStatus::AlreadyOn, format!("already {}", s.kv_dtype)));
                }
                s.kv_dtype = DType::F8;
            }
            (Task::Inference(s), Rung::IntWeights(bits)) => {
                if let Some(q) = s.quant.as_ref().filter(|q| q.bits <= bits) {
                    return Err((StepStatus::AlreadyOn, format!("already {}", q.label)));
                }
                s.quant = Some(QuantSpec::int(bits, defaults::GROUP_SIZE, s.weight_dtype_compute()));
            }
            _ => return Err((StepStatus::NotApplicable, "not for this task".into())),
        }
        Ok(w)
    }
}

/// A step that was not tried (already on, or not applicable).
fn not_tried(rung: Rung, (status, detail): NotTried) -> LadderStep {
    LadderStep {
        name: rung.name().into(),
        status,
        detail,
        per_gpu_bytes: None,
        saved_bytes: None,
        fits: false,
        slowdown: None,
        tokens_per_s: None,
        cpu_bytes: 0,
        workload: None,
    }
}

/// Build the ladder for `base` on one `gpu`.
pub fn ladder(spec: &ModelSpec, base: &Workload, gpu: &GpuSpec, allow: Allow, tm: &TimeModel) -> Ladder {
    let cap = gpu.usable_bytes();
    let mut cur = base.clone();
    let start = eval(spec, &cur, gpu, tm);
    let start_fits = start.as_ref().is_some_and(|e| e.mem.total <= cap);
    let mut prev = start.as_ref().map(|e| e.mem.total);
    let mut prev_phase = start.as_ref().map(|e| e.phase);
    let ctx = Ctx { spec, gpu, tm, cap, start_tps: start.as_ref().map(|e| e.tps).unwrap_or(0.0) };
    let rungs: &[Rung] = match base.task {
        Task::Train(_) => &Rung::TRAIN,
        Task::Inference(_) => &Rung::INFER,
    };
    let mut steps: Vec<LadderStep> = Vec::new();
    let mut first_fit = None;
    // Steps skipped because they lowered nothing; tried again after each later kept
    // step (e.g. checkpointing once LoRA has moved the peak from the step to backward).
    let mut pending: Vec<Rung> = Vec::new();
    for &rung in rungs {
        let next = match rung.apply(&cur, gpu.bf16) {
            Err(why) => {
                steps.push(not_tried(rung, why));
                continue;
            }
            Ok(next) => next,
        };
        let (step, e) = ctx.measure(rung.name(), next, rung.gate(allow), prev, prev_phase);
        if step.status == StepStatus::Skipped {
            pending.push(rung);
        }
        let mut kept = None;
        if step.status == StepStatus::Applied {
            kept = Some((step, e));
        } else {
            steps.push(step);
        }
        while let Some((step, e)) = kept.take() {
            if let Some(w) = &step.workload {
                cur = w.clone();
            }
            prev = step.per_gpu_bytes;
            prev_phase = e.as_ref().map(|e| e.phase);
            if step.fits && first_fit.is_none() && !start_fits {
                first_fit = Some(steps.len());
            }
            steps.push(step);
            // retry the skipped steps, in order, against the new state
            for k in 0..pending.len() {
                let Ok(next) = pending[k].apply(&cur, gpu.bf16) else { continue };
                let (mut step, e) = ctx.measure(pending[k].name(), next, None, prev, prev_phase);
                if step.status == StepStatus::Applied {
                    step.detail = format!(
                        "retried after {}: the peak moved to {}",
                        steps.last().map(|s| s.name.as_str()).unwrap_or("the previous step"),
                        prev_phase.map(phase_words).unwrap_or("another phase")
                    );
                    pending.remove(k);
                    kept = Some((step, e));
                    break;
                }
            }
        }
    }
    Ladder {
        gpu_id: gpu.id.clone(),
        gpu_name: gpu.name.clone(),
        gpu_memory_bytes: cap,
        start_bytes: start.as_ref().map(|e| e.mem.total),
        start_fits,
        steps,
        first_fit,
    }
}

/// Why a step that lowers nothing is skipped: where the peak sits decides it.
fn skip_reason(name: &str, phase: Option<Phase>, saved: i128) -> String {
    let what = match name {
        "activation checkpointing" => "checkpointing",
        "gradient accumulation" => "accumulation",
        n => n,
    };
    let effect = if saved < 0 {
        format!("raises the peak by {:.2} GiB", -saved as f64 / vramfit_core::units::GIB as f64)
    } else {
        "saves nothing".to_string()
    };
    match (phase, name) {
        (Some(Phase::OptimizerStep), "gradient accumulation") if saved < 0 => {
            format!("peak is at the optimizer step: {what} {effect} (gradients persist through backward) — not kept")
        }
        (Some(Phase::OptimizerStep), _) => {
            format!("peak is at the optimizer step: {what} {effect} there — not kept")
        }
        (_, "gradient accumulation") if saved < 0 => {
            format!("{what} {effect}: gradients persist through every micro-batch's backward — not kept")
        }
        _ => format!("{what} {effect} at the peak — not kept"),
    }
}
