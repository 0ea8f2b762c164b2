//! Why an OOM happened, from its numbers alone: pure functions of parsed
//! values, each verdict with the arithmetic that led to it, the figures
//! that decided it, the runner-up, the main cause and the other
//! contributors with their share of the card, and the fixes in the order
//! they cost. The rules and their thresholds are written, with reasons, in
//! docs/diagnose.md ("How an OOM is classified").
//!
//! PyTorch rules, first that holds decides the main cause (R = request,
//! T = total, F = device free, A = allocated, U = reserved but unallocated,
//! O = memory of other users of the card, M = the effectively-full margin,
//! max(2 MiB page, 1% of T), plus ≤1.4's segment rounding of R):
//! 0. `F > T`, or figures that contradict each other → **unexplained**;
//!    but `R > T` is decisive even then → **request-exceeds-card**.
//! 1. `F ≥ R + M` → **unexplained** unless a memory-fraction cap explains
//!    it. `R ≤ F < R + M` is not room: the card is effectively full, and
//!    the rules below decide.
//! 2. O is more than this job holds and asks for (`O > A + U + R`) →
//!    **other-process**, even when the cache could serve the request.
//! 3. `U ≥ R`, U material (≥ 2% of reserved and ≥ 2% of the card) →
//!    **fragmentation**. By the time PyTorch prints the message it has
//!    already freed every unsplit cached block (`release_cached_blocks`,
//!    CUDACachingAllocator.cpp: "The only remaining cached memory is split
//!    from a larger block that is partially in-use"), so U is free bytes
//!    stuck inside segments that still hold live tensors; expandable
//!    segments let it be reused.
//! 4. O material and needed: without it the request would fit
//!    (`F + U < R ≤ F + U + O`) → **other-process**.
//! 5. Only free and cache together cover R (`U < R ≤ F + U`): the card is
//!    full of this job's tensors → **genuine-shortage**, fragmentation a
//!    contributor.
//! 6. otherwise → **genuine-shortage**, gap = `R − (F + U)`.

mod fixes;
mod ggml;
mod other;
mod sentences;
mod torch;

pub use torch::{classify_allocator_state, classify_torch, classify_torch_in, contradictions, own_outside};

use crate::oom::{OomEvent, OomKind};
use serde::Serialize;
use vramfit_core::units::{GIB, MIB};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OomClass {
    Fragmentation,
    OtherProcess,
    RequestExceedsCard,
    GenuineShortage,
    /// the numbers say the request should have fit
    Unexplained,
    /// the message lacks the numbers needed
    Unknown,
    /// a serving engine's own memory budget left nothing (vLLM's
    /// `gpu_memory_utilization` share had no room for KV-cache blocks)
    Budget,
}

impl OomClass {
    pub fn key(self) -> &'static str {
        match self {
            OomClass::Fragmentation => "fragmentation",
            OomClass::OtherProcess => "other-process",
            OomClass::RequestExceedsCard => "request-exceeds-card",
            OomClass::GenuineShortage => "genuine-shortage",
            OomClass::Unexplained => "unexplained",
            OomClass::Unknown => "unknown",
            OomClass::Budget => "budget",
        }
    }
}

/// How much a fix costs the user, cheapest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FixCost {
    /// an environment variable or a flag
    Setting,
    /// free something outside the job
    Housekeeping,
    /// a change to the training/serving code or config
    Code,
    /// a smaller problem (batch, sequence, resolution)
    Workload,
    /// more or bigger GPUs
    Hardware,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fix {
    pub cost: FixCost,
    pub action: String,
    pub why: String,
}

fn fix(cost: FixCost, action: impl Into<String>, why: impl Into<String>) -> Fix {
    Fix { cost, action: action.into(), why: why.into() }
}

/// A figure the verdict used, with its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Figure {
    pub name: String,
    pub bytes: u64,
}

/// A cause and the bytes of the card it accounts for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    pub class: OomClass,
    /// what the bytes are, e.g. "live tensors", "cached but unallocated"
    pub what: String,
    pub bytes: Option<u64>,
    /// `bytes` over the card's total capacity (above 1 for a request larger
    /// than the card); null where the total or the bytes are unknown
    pub share: Option<f64>,
}

impl Cause {
    pub(crate) fn new(class: OomClass, what: &str, bytes: Option<u64>, total: Option<u64>) -> Cause {
        let share = match (bytes, total) {
            (Some(b), Some(t)) if t > 0 => Some(b as f64 / t as f64),
            _ => None,
        };
        Cause { class, what: what.to_string(), bytes, share }
    }
}

/// The cause that comes next: what the verdict would be if the deciding
/// condition did not hold (or a missing figure were at its other value).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunnerUp {
    pub class: OomClass,
    pub what: String,
    pub bytes: Option<u64>,
    pub share: Option<f64>,
    /// why it comes next
    pub why: String,
}

/// A figure the message should print but the text did not hold, the value
/// the verdict assumed for it, and whether its other possible value would
/// change the cause (and to which class, at which value).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missing {
    pub figure: String,
    /// the value the verdict assumed (null: no verdict was drawn without it)
    pub assumed_bytes: Option<u64>,
    pub matters: bool,
    #[serde(serialize_with = "otherwise_json")]
    pub otherwise: Option<(OomClass, u64)>,
}

fn otherwise_json<S: serde::Serializer>(v: &Option<(OomClass, u64)>, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    match v {
        None => s.serialize_none(),
        Some((class, bytes)) => {
            let mut st = s.serialize_struct("otherwise", 2)?;
            st.serialize_field("class", class)?;
            st.serialize_field("bytes", bytes)?;
            st.end()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// the main cause's class (kept as the verdict's key)
    pub class: OomClass,
    /// the condition that explains most of the failure
    pub main_cause: Cause,
    /// the cause that comes next (null when one figure decides, or nothing else holds)
    pub runner_up: Option<RunnerUp>,
    /// the runner-up comes from a missing figure's other value
    #[serde(skip)]
    pub runner_up_from_missing: bool,
    /// the other conditions that hold, largest first
    pub contributors: Vec<Cause>,
    pub headline: String,
    /// the figures, in the order the reasoning uses them
    pub figures: Vec<Figure>,
    /// the names (in `figures`) of the figures that decided the verdict
    pub decided_by: Vec<String>,
    /// figures the message should print but the text did not hold
    pub missing: Vec<Missing>,
    /// each step of the reasoning, with numbers
    pub reasoning: Vec<String>,
    /// bytes missing even after the cache is reusable (genuine shortage)
    pub gap_bytes: Option<u64>,
    pub fixes: Vec<Fix>,
}

/// A CUDA context plus library handles, per process per GPU: the
/// reference's rule of thumb is ~250–600 MiB; memory outside the
/// allocator above this allowance is attributed to something else.
pub const CONTEXT_ALLOWANCE: u64 = GIB;
/// Cached-but-unallocated below this share of reserved is scraps, not the
/// cause (e.g. the ~34 KiB tail of each 2 MiB small-pool segment).
pub const FRAG_MIN_SHARE: f64 = 0.02;
/// An XLA program needing less than this did not exhaust a GPU on its own.
pub const XLA_SMALL_PROGRAM: u64 = GIB;
/// The cache is a cause only from this share of the card: recovering less
/// buys no meaningful room, the next allocation fails the same way
/// (measured on the labelled set: every message labelled fragmentation has
/// a cache of ≥ 1.9% of its card; those labelled genuine shortage with a
/// cache larger than the request, ≤ 2.0%).
pub const FRAG_MIN_CARD_SHARE: f64 = 0.02;
/// Memory outside PyTorch up to this multiple of what the job's engine
/// holds outside PyTorch is the job's own: an engine's NCCL channels, CUDA
/// graph memory and kernel images vary with the model and the parallelism
/// by up to about twice the logged or measured figure.
pub const OWN_OUTSIDE_FACTOR: f64 = 2.0;
/// Other processes below this are noise for the verdict.
pub const OTHER_PROCESS_MIN: u64 = 256 * MIB;
/// A process listed by PID whose use is within this much above the
/// allocator's reserved bytes is taken to be this process seen through a
/// container's PID namespace (NVML reports host PIDs, so PyTorch cannot
/// match its own and prints "Process N" instead of "this process").
pub const SELF_PID_SLACK: u64 = 4 * GIB;

/// Free memory this close above the request is not room: the driver maps
/// memory in 2 MiB pages and keeps some for page tables and its own
/// structures, so the card is effectively full. The bound: a few
/// MiB, or well under 5% of the card; 1% of the card here (e.g. 72 MiB of
/// "free" beyond an 8.13 GiB request on a 10.76 GiB card is not room).
pub const EFFECTIVELY_FULL_SHARE: f64 = 0.01;
/// The driver's large-page granularity.
pub const DRIVER_PAGE: u64 = 2 * MIB;
/// Memory beyond a context that is only inferred (no process list) counts
/// as another user's when it is at least this share of the card: a larger
/// context, the desktop or driver state take a few hundred MiB on any card.
pub const INFERRED_OTHER_MIN_SHARE: f64 = 0.05;
/// Live tensors are listed as a contributor from this share of the card.
pub const CONTRIBUTOR_MIN_SHARE: f64 = 0.01;

/// `12.50 MiB`-style figure for reasoning text.
pub fn b(bytes: u64) -> String {
    if bytes >= GIB {
        format!("{:.2} GiB", bytes as f64 / GIB as f64)
    } else if bytes >= MIB {
        format!("{:.2} MiB", bytes as f64 / MIB as f64)
    } else if bytes >= 1024 {
        format!("{:.2} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

fn fig(name: &str, bytes: u64) -> Figure {
    Figure { name: name.to_string(), bytes }
}

/// Verdict for any event.
pub fn classify(e: &OomEvent) -> Verdict {
    match &e.kind {
        OomKind::Torch(t) => torch::classify_torch_in(t, &e.context),
        OomKind::TorchPartial { requested, .. } => Verdict {
            class: OomClass::Unknown,
            main_cause: Cause::new(OomClass::Unknown, "the request", requested.as_ref().map(|r| r.bytes), None),
            runner_up: None,
            runner_up_from_missing: false,
            decided_by: Vec::new(),
            missing: ["total", "free", "allocated", "reserved"]
                .iter()
                .map(|f| Missing { figure: f.to_string(), assumed_bytes: None, matters: true, otherwise: None })
                .collect(),
            contributors: Vec::new(),
            headline: match requested {
                Some(r) => format!("PyTorch OOM for {} (the rest of the message is missing)", r.text),
                None => "PyTorch OOM (message cut before its numbers)".to_string(),
            },
            figures: requested.iter().map(|r| fig("requested", r.bytes)).collect(),
            reasoning: vec![
                "The message was cut before the device figures, so the cause cannot be told from it.".to_string()
            ],
            gap_bytes: None,
            fixes: fixes::partial_message(),
        },
        OomKind::Other(o) => other::classify_other(o, &e.context),
    }
}

/// A verdict without contributors, runner-up or missing figures (set after).
pub(crate) fn verdict(
    class: OomClass,
    main_cause: Cause,
    headline: String,
    figures: Vec<Figure>,
    reasoning: Vec<String>,
    gap_bytes: Option<u64>,
    fixes: Vec<Fix>,
) -> Verdict {
    Verdict {
        class,
        main_cause,
        runner_up: None,
        runner_up_from_missing: false,
        contributors: Vec::new(),
        headline,
        figures,
        decided_by: Vec::new(),
        missing: Vec::new(),
        reasoning,
        gap_bytes,
        fixes,
    }
}
