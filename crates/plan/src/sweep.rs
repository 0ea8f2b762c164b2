//! Sweeps around one estimate, for a card: the largest context, concurrency
//! or micro-batch that still fits, the same job under other weight formats
//! (the variants come from the caller, built by the same flag parsing as
//! the point itself), and which catalogue GPUs hold it.
//!
//! Every figure is an [`estimate()`] followed by a [`fit()`]: no formula lives
//! here. The searches rely on one property of the estimator, that per-GPU
//! memory never falls when the context, the concurrency or the micro-batch
//! grows (each only adds KV blocks, activations or logits); the proptest in
//! `tests/sweep.rs` checks it on the searched range.

use vramfit_core::dtype::DType;
use vramfit_core::error::CoreError;
use vramfit_core::estimate;
use vramfit_core::explain::Explanation;
use vramfit_core::hardware::GpuSpec;
use vramfit_core::infer::fit;
use vramfit_core::ledger::Ledger;
use vramfit_core::model::ModelSpec;
use vramfit_core::workload::limits::{MAX_SEQUENCES, MAX_TOKENS};
use vramfit_core::workload::{Task, Workload};

/// What a search varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Knob {
    /// tokens per sequence (inference `context`, training `seq`)
    Context,
    /// sequences whose KV cache is resident at once (inference), at the given batch
    Concurrency,
    /// sequences per forward/backward per GPU (training)
    MicroBatch,
}

impl Knob {
    /// The key in the JSON report (`context`, `concurrency`, `micro_batch`).
    pub fn key(self) -> &'static str {
        match self {
            Knob::Context => "context",
            Knob::Concurrency => "concurrency",
            Knob::MicroBatch => "micro_batch",
        }
    }
}

/// The result of one search.
#[derive(Debug, Clone, PartialEq)]
pub struct Largest {
    pub knob: Knob,
    /// the value the job was estimated at
    pub current: u64,
    /// the largest value whose whole estimate fits (`None`: not even `from`)
    pub value: Option<u64>,
    /// the smallest value searched
    pub from: u64,
    /// the largest value searched, and why it is the end of the range
    pub limit: u64,
    pub limit_reason: &'static str,
    /// estimates made by the search
    pub estimates: u64,
    pub explain: Explanation,
}

impl Largest {
    /// The search stopped at its limit, not at the memory.
    pub fn at_limit(&self) -> bool {
        self.value == Some(self.limit)
    }
}

/// The knobs that make sense for a workload: context and concurrency for
/// inference, context (seq) and micro-batch for training.
pub fn knobs(w: &Workload) -> [Knob; 2] {
    match w.task {
        Task::Inference(_) => [Knob::Context, Knob::Concurrency],
        Task::Train(_) => [Knob::Context, Knob::MicroBatch],
    }
}

fn current(w: &Workload, knob: Knob) -> Option<u64> {
    match (&w.task, knob) {
        (Task::Inference(s), Knob::Context) => Some(s.context),
        (Task::Inference(s), Knob::Concurrency) => Some(s.concurrency),
        (Task::Train(t), Knob::Context) => Some(t.seq),
        (Task::Train(t), Knob::MicroBatch) => Some(t.batch),
        _ => None,
    }
}

fn with(w: &Workload, knob: Knob, v: u64) -> Workload {
    let mut w = w.clone();
    match (&mut w.task, knob) {
        (Task::Inference(s), Knob::Context) => s.context = v,
        (Task::Inference(s), Knob::Concurrency) => s.concurrency = v,
        (Task::Train(t), Knob::Context) => t.seq = v,
        (Task::Train(t), Knob::MicroBatch) => t.batch = v,
        _ => {}
    }
    w
}

/// Does the job with `knob = v` fit in `memory` usable bytes (what CUDA lets the process allocate)? An estimate whose
/// bytes overflow 64 bits does not fit; any other error is the caller's.
fn fits_at(spec: &ModelSpec, w: &Workload, knob: Knob, v: u64, memory: u64) -> Result<bool, CoreError> {
    match estimate(spec, &with(w, knob, v)) {
        Ok(l) => Ok(fit(&l, memory, memory).fits),
        Err(CoreError::Overflow { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The largest value of `knob` at which the whole estimate of `base` (every
/// other setting unchanged) fits `memory` bytes, by bisection over
/// `from ..= limit`: context from 1 token up to the model's
/// `max_position_embeddings` (as `capacity` caps it: beyond it a model runs
/// but not as trained); concurrency from the batch, micro-batch from 1, up
/// to the workload limit of sequences.
pub fn largest(spec: &ModelSpec, base: &Workload, knob: Knob, memory: u64) -> Result<Largest, CoreError> {
    let Some(cur) = current(base, knob) else {
        return Err(CoreError::Unsupported(format!("the {} sweep of a {} job", knob.key(), task_word(base))));
    };
    let (from, limit, limit_reason) = match (&base.task, knob) {
        (_, Knob::Context) => {
            (1, spec.max_position_embeddings.clamp(1, MAX_TOKENS), "the model's max_position_embeddings")
        }
        (Task::Inference(s), Knob::Concurrency) => {
            (s.batch.max(1), MAX_SEQUENCES, "the workload limit of 2^24 sequences")
        }
        _ => (1, MAX_SEQUENCES, "the workload limit of 2^24 sequences"),
    };
    let mut estimates = 1u64;
    let value = if !fits_at(spec, base, knob, from, memory)? {
        None
    } else {
        // invariant: lo fits; everything above hi does not
        let (mut lo, mut hi) = (from, limit);
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            estimates += 1;
            if fits_at(spec, base, knob, mid, memory)? {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Some(lo)
    };
    let explain = Explanation::new(
        "largest value whose whole estimate (tensors + runtime + margin, every other setting unchanged) ≤ GPU memory, \
         by bisection over the range",
    )
    .term("GPU memory", memory)
    .term(format!("{} now", knob.key()), cur)
    .term("range from", from)
    .term("range to", limit)
    .term("end of the range", limit_reason)
    .term("estimates made", estimates)
    .note("per-GPU memory never falls as this value grows, so bisection finds the boundary");
    Ok(Largest { knob, current: cur, value, from, limit, limit_reason, estimates, explain })
}

fn task_word(w: &Workload) -> &'static str {
    match w.task {
        Task::Inference(_) => "inference",
        Task::Train(_) => "training",
    }
}

/// Whether one card holds the estimate.
#[derive(Debug, Clone, PartialEq)]
pub struct CardFit {
    pub id: String,
    pub name: String,
    pub memory_bytes: u64,
    /// the total per GPU fits the card's memory
    pub fits: bool,
    /// memory − total (negative: short by)
    pub headroom_bytes: i128,
    /// the job computes in bf16 and the card has none: it would not run as given
    pub lacks_bf16: bool,
}

/// Every card of `gpus` against the ledger's total per GPU, smallest memory
/// first (then by id); a card "holds" the job when it fits and has bf16
/// where the job computes in it.
pub fn cards(ledger: &Ledger, w: &Workload, gpus: &[GpuSpec]) -> Vec<CardFit> {
    let bf16 = w.compute_dtype() == DType::BF16;
    let mut out: Vec<CardFit> = gpus
        .iter()
        .map(|g| {
            let f = fit(ledger, g.memory_bytes(), g.usable_bytes());
            CardFit {
                id: g.id.clone(),
                name: g.name.clone(),
                memory_bytes: f.gpu_memory_bytes,
                fits: f.fits,
                headroom_bytes: f.headroom_bytes,
                lacks_bf16: bf16 && !g.bf16,
            }
        })
        .collect();
    out.sort_by(|a, b| a.memory_bytes.cmp(&b.memory_bytes).then_with(|| a.id.cmp(&b.id)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramfit_core::workload::InferenceSetup;

    fn llama7b() -> ModelSpec {
        ModelSpec::llama_like("llama-7b-like", 4096, 32, 32, 32, 11008, 32000)
    }

    #[test]
    fn largest_context_is_the_boundary() {
        let spec = llama7b();
        let w = Workload::default();
        let total = estimate(&spec, &w).unwrap().total_bytes();
        // a card exactly as large as the estimate at this context holds this context
        let cur = current(&w, Knob::Context).unwrap();
        let l = largest(&spec, &w, Knob::Context, total).unwrap();
        let v = l.value.unwrap();
        assert!(v >= cur, "{v} < {cur}");
        assert!(fits_at(&spec, &w, Knob::Context, v, total).unwrap());
        if v < l.limit {
            assert!(!fits_at(&spec, &w, Knob::Context, v + 1, total).unwrap());
        }
        // a card below the estimate at 1 token holds nothing
        let one = estimate(&spec, &with(&w, Knob::Context, 1)).unwrap().total_bytes();
        assert_eq!(largest(&spec, &w, Knob::Context, one - 1).unwrap().value, None);
        // a huge card reaches the model's max_position_embeddings
        let big = largest(&spec, &w, Knob::Context, 1 << 50).unwrap();
        assert_eq!(big.value, Some(spec.max_position_embeddings));
        assert!(big.at_limit());
    }

    #[test]
    fn concurrency_starts_at_the_batch() {
        let spec = llama7b();
        let w = Workload {
            task: Task::Inference(InferenceSetup { batch: 4, concurrency: 4, ..InferenceSetup::default() }),
            ..Workload::default()
        };
        let l = largest(&spec, &w, Knob::Concurrency, 80 << 30).unwrap();
        assert_eq!(l.from, 4);
        let v = l.value.unwrap();
        assert!(v > 4);
        assert!(fits_at(&spec, &w, Knob::Concurrency, v, 80 << 30).unwrap());
        assert!(!fits_at(&spec, &w, Knob::Concurrency, v + 1, 80 << 30).unwrap());
        assert!(largest(&spec, &w, Knob::MicroBatch, 80 << 30).is_err());
    }

    #[test]
    fn cards_sorted_with_bf16_flag() {
        let spec = llama7b();
        let w = Workload::default();
        let l = estimate(&spec, &w).unwrap();
        let g = |id: &str, mib: u64, bf16: bool| GpuSpec {
            id: id.into(),
            name: id.into(),
            aliases: vec![],
            memory_mib: mib,
            memory_gb: 0.0,
            bandwidth_gbs: 1.0,
            bf16_tflops: 1.0,
            fp8_tflops: None,
            fp32_tflops: None,
            tf32_tflops: None,
            nvlink_gbs: None,
            pcie_gen: 4,
            mig_max: 0,
            bf16,
            arch: None,
            confirmed: false,
            source: String::new(),
        };
        let c = cards(&l, &w, &[g("big", 81920, true), g("v100", 32768, false), g("small", 8192, true)]);
        assert_eq!(c.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(), ["small", "v100", "big"]);
        assert!(!c[0].fits && c[1].fits && c[2].fits);
        assert!(c[1].lacks_bf16 && !c[2].lacks_bf16, "the default job computes in bf16");
        assert_eq!(
            c[2].headroom_bytes,
            ((81920u64 << 20) - vramfit_core::runtime::DRIVER_RESERVED) as i128 - l.total_bytes() as i128
        );
    }
}
