//! Why an OOM happened, from its numbers alone: pure functions of parsed
//! values, each verdict with the arithmetic that led to it and the fixes in
//! the order they cost.
//!
//! PyTorch rules (R = request, T = total, F = device free, A = allocated,
//! U = reserved but unallocated, O = memory of other processes):
//! 1. `R > T` → **request-exceeds-card**: no allocator setting helps.
//! 2. `F ≥ R` clearly (beyond print rounding) → **unexplained** unless a
//!    memory-fraction cap explains it (then genuine shortage of the cap).
//! 3. `F + U ≥ R` → **fragmentation**. By the time PyTorch prints the
//!    message it has already freed every unsplit cached block
//!    (`release_cached_blocks`, CUDACachingAllocator.cpp: "The only
//!    remaining cached memory is split from a larger block that is
//!    partially in-use"), so U is free bytes stuck inside segments that
//!    still hold live tensors; expandable segments let it be reused.
//! 4. `F + U + O ≥ R`, O material → **other-process**.
//! 5. otherwise → **genuine-shortage**, gap = `R − (F + U)`.

mod fixes;
mod other;
mod sentences;
mod torch;

pub use torch::{classify_allocator_state, classify_torch, contradictions};

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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub class: OomClass,
    pub headline: String,
    /// the figures, in the order the reasoning uses them
    pub figures: Vec<Figure>,
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
/// Other processes below this are noise for the verdict.
pub const OTHER_PROCESS_MIN: u64 = 256 * MIB;
/// A process listed by PID whose use is within this much above the
/// allocator's reserved bytes is taken to be this process seen through a
/// container's PID namespace (NVML reports host PIDs, so PyTorch cannot
/// match its own and prints "Process N" instead of "this process").
pub const SELF_PID_SLACK: u64 = 4 * GIB;

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
        OomKind::Torch(t) => torch::classify_torch(t, e.context.activity),
        OomKind::TorchPartial { requested, .. } => Verdict {
            class: OomClass::Unknown,
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
        OomKind::Other(o) => other::classify_other(o),
    }
}
