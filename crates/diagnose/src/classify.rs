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

use crate::oom::{Activity, OomEvent, OomKind, TorchEra, TorchOom};
use crate::other_frameworks::OtherOom;
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

fn fragmentation_fixes(era: TorchEra) -> Vec<Fix> {
    let mut f = vec![];
    if era == TorchEra::Sentences {
        f.push(fix(
            FixCost::Setting,
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            "segments grow in place instead of being fixed cudaMalloc blocks, so freed space inside a segment can serve a larger request",
        ));
    } else {
        f.push(fix(
            FixCost::Setting,
            "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 (try 128–512)",
            "on this PyTorch (before expandable segments) blocks above the limit are never split, so large free blocks stay whole for large requests; upgrading to PyTorch ≥ 2.1 and using expandable_segments:True is the better fix",
        ));
    }
    f.push(fix(
        FixCost::Code,
        "keep tensor shapes steady (pad sequences to a few fixed lengths, drop_last=True)",
        "varying shapes leave differently sized holes in the cache every step",
    ));
    f
}

fn shortage_fixes(activity: Option<Activity>) -> Vec<Fix> {
    let mut f = vec![];
    match activity {
        Some(Activity::OptimizerStep) | Some(Activity::Setup) => {
            f.push(fix(
                FixCost::Code,
                "8-bit or paged optimizer (bitsandbytes AdamW8bit)",
                "Adam keeps two fp32 states per parameter (8 B); 8-bit states take 2 B",
            ));
            f.push(fix(
                FixCost::Code,
                "shard optimizer states/gradients (ZeRO-1/2, FSDP SHARD_GRAD_OP) or offload them to CPU",
                "each rank then holds 1/N of the states",
            ));
        }
        Some(Activity::Generation) => {
            f.push(fix(
                FixCost::Workload,
                "lower batch × (prompt + new tokens)",
                "the KV cache grows with every generated token",
            ));
        }
        _ => {
            f.push(fix(
                FixCost::Code,
                "activation (gradient) checkpointing",
                "saved activations are recomputed in backward instead of kept",
            ));
            f.push(fix(
                FixCost::Workload,
                "halve the micro-batch and double gradient accumulation",
                "activations scale with the micro-batch; the effective batch stays the same",
            ));
        }
    }
    f.push(fix(FixCost::Code, "bf16/fp16 mixed precision if not already on", "halves activation and weight bytes"));
    f.push(fix(
        FixCost::Hardware,
        "more GPUs with sharding (FSDP/ZeRO-3), or a card with more memory",
        "the job needs more memory than this card has free",
    ));
    f
}

/// The pairs of figures of a PyTorch message that cannot both be true,
/// each stated with the printed numbers (free > total is handled apart).
/// Compared with the print rounding on each side (a figure's lowest true
/// value against the other's highest).
pub fn contradictions(t: &TorchOom) -> Vec<String> {
    let mut out = Vec::new();
    let total = &t.total;
    if t.allocated.lo() > total.hi() {
        out.push(format!("{} allocated > {} total capacity", t.allocated.text, total.text));
    }
    let reserved_lo = match (&t.reserved, &t.unallocated) {
        (Some(r), _) => {
            if r.lo() > total.hi() {
                out.push(format!("{} reserved > {} total capacity", r.text, total.text));
            }
            if t.allocated.lo() > r.hi() {
                out.push(format!("{} allocated > {} reserved", t.allocated.text, r.text));
            }
            r.lo()
        }
        (None, Some(u)) => {
            let lo = t.allocated.lo().saturating_add(u.lo());
            if u.lo() > total.hi() {
                out.push(format!("{} reserved but unallocated > {} total capacity", u.text, total.text));
            } else if out.is_empty() && lo > total.hi() {
                out.push(format!(
                    "{} allocated + {} reserved but unallocated = {} > {} total capacity",
                    t.allocated.text,
                    u.text,
                    b(t.allocated.bytes.saturating_add(u.bytes)),
                    total.text
                ));
            }
            lo
        }
        (None, None) => t.allocated.lo(),
    };
    if out.is_empty() && t.free.lo() <= total.hi() && t.free.lo().saturating_add(reserved_lo) > total.hi() {
        out.push(format!(
            "{} free + {} reserved by PyTorch > {} total capacity",
            t.free.text,
            b(t.reserved_bytes()),
            total.text
        ));
    }
    if let Some(p) = &t.this_process {
        if p.lo() > total.hi() {
            out.push(format!("this process has {} > {} total capacity", p.text, total.text));
        }
    }
    for p in &t.processes {
        if p.used.lo() > total.hi() {
            out.push(format!("process {} has {} > {} total capacity", p.pid, p.used.text, total.text));
        }
    }
    out
}

/// Verdict for one PyTorch OOM.
pub fn classify_torch(t: &TorchOom, activity: Option<Activity>) -> Verdict {
    let r = t.requested.bytes;
    let total = t.total.bytes;
    let free = t.free.bytes;
    let a = t.allocated.bytes;
    let u = t.unallocated_bytes();
    let reserved = t.reserved_bytes();
    let mut figures = vec![
        fig("requested", r),
        fig("total", total),
        fig("free", free),
        fig("allocated", a),
        fig("reserved", reserved),
        fig("reserved_unallocated", u),
    ];
    let mut reasoning = vec![format!(
        "GPU {}: the allocator asked for {} with {} free of {}; PyTorch holds {} reserved, {} of it in live tensors and {} cached but unallocated.",
        t.device,
        t.requested.text,
        t.free.text,
        t.total.text,
        b(reserved),
        b(a),
        b(u)
    )];

    // Memory on the device outside this process's allocator.
    let mut other: u64 = 0;
    let mut presumed_self = None;
    // ≥2.1 messages carry process figures only when NVML answered
    let has_processes = t.this_process.is_some() || !t.processes.is_empty();
    if t.era == TorchEra::Sentences && has_processes {
        if let Some(this) = &t.this_process {
            if this.bytes == 0 && reserved > 0 {
                reasoning.push(format!(
                    "NVML reported 0 bytes for this process although PyTorch holds {} (a known NVML/driver reporting gap, e.g. under some containers); the figure is ignored.",
                    b(reserved)
                ));
            } else {
                let nontorch = this.bytes.saturating_sub(reserved);
                figures.push(fig("this_process", this.bytes));
                figures.push(fig("this_process_non_pytorch", nontorch));
                reasoning.push(format!(
                    "This process uses {} in all; {} of it is outside PyTorch's allocator (CUDA context, NCCL, cuBLAS/cuDNN workspaces, other libraries).",
                    this.text,
                    b(nontorch)
                ));
            }
        } else if let Some(p) = t
            .processes
            .iter()
            .filter(|p| p.used.hi() >= reserved && p.used.bytes - reserved.min(p.used.bytes) <= SELF_PID_SLACK)
            .min_by_key(|p| p.used.bytes.saturating_sub(reserved))
        {
            presumed_self = Some(p.pid);
            reasoning.push(format!(
                "No \"this process\" line: PID {} ({}) is within {} above PyTorch's reserved {}, so it is most likely this process seen from a container with its own PID namespace.",
                p.pid,
                p.used.text,
                b(SELF_PID_SLACK),
                b(reserved)
            ));
        }
        for p in &t.processes {
            if Some(p.pid) != presumed_self {
                other = other.saturating_add(p.used.bytes);
            }
        }
        if !t.processes.is_empty() {
            figures.push(fig("other_processes", other));
        }
        let this_b = t.this_process.as_ref().map(|x| x.bytes).unwrap_or(0).max(reserved);
        let listed_self =
            presumed_self.and_then(|pid| t.processes.iter().find(|p| p.pid == pid)).map(|p| p.used.bytes).unwrap_or(0);
        let unaccounted = total.saturating_sub(free).saturating_sub(this_b.max(listed_self)).saturating_sub(other);
        if unaccounted > CONTEXT_ALLOWANCE {
            figures.push(fig("unaccounted", unaccounted));
            reasoning.push(format!(
                "{} of the card is used but not by any process the message lists: NVML lists compute processes only, so this is a graphics process (a desktop), a process in another container, or an engine sharing the card (e.g. vLLM).",
                b(unaccounted)
            ));
            if other == 0 {
                other = unaccounted;
            }
        }
        let list: Vec<String> = t
            .processes
            .iter()
            .filter(|p| Some(p.pid) != presumed_self)
            .map(|p| format!("PID {} {}", p.pid, p.used.text))
            .collect();
        if !list.is_empty() {
            reasoning.push(format!("Other processes on the card hold {}: {}.", b(other), list.join(", ")));
        }
    } else {
        let outside = total.saturating_sub(free).saturating_sub(reserved);
        figures.push(fig("outside_allocator", outside));
        reasoning.push(format!(
            "{} of the card is neither free nor reserved by PyTorch: this process's CUDA context (~0.25–0.6 GiB) plus anything other processes or non-PyTorch code hold{}.",
            b(outside),
            if t.era == TorchEra::Sentences { " (the message has no process figures: NVML was unavailable, e.g. on Windows or ROCm)" } else { "" }
        ));
        if outside > CONTEXT_ALLOWANCE {
            other = outside - CONTEXT_ALLOWANCE;
            reasoning.push(format!(
                "That is more than a context ({} allowance), so about {} belongs to something else.",
                b(CONTEXT_ALLOWANCE),
                b(other)
            ));
        }
    }

    let cap = t.allowed.as_ref().map(|s| s.bytes);
    if let Some(c) = cap {
        figures.push(fig("allowed", c));
    }

    // 0. figures that cannot all be true
    if t.free.lo() > t.total.hi() {
        reasoning.push(format!(
            "{} free > {} total: the driver reports the card's total wrongly (integrated GPUs with unified memory, e.g. AMD APUs, report a fixed carve-out as the total), so the verdict cannot rest on these figures.",
            t.free.text, t.total.text
        ));
        return Verdict {
            class: OomClass::Unexplained,
            headline: "the message's free memory exceeds its total".to_string(),
            figures,
            reasoning,
            gap_bytes: None,
            fixes: vec![
                fix(FixCost::Setting, "check the memory the driver gives the GPU (BIOS/driver UMA or GTT size on APUs; HSA_XNACK / unified-memory settings)", "the total the allocator sees is below the free figure"),
                fix(FixCost::Workload, "split or shrink the allocation below the reported total", "the allocator refuses requests above the reported total"),
            ],
        };
    }

    // 0b. other figures that cannot all be true: parts of the card larger
    // than the card, or live tensors larger than the cache holding them
    let contradictions = contradictions(t);
    if !contradictions.is_empty() {
        reasoning.push(format!(
            "The figures contradict each other (beyond print rounding): {}. (Allocated memory is part of reserved, and free and reserved are disjoint parts of the total.) A message edited by hand, pasted from two runs, or printed by a driver that misreports the card; no cause can be read from it.",
            contradictions.join("; ")
        ));
        if contradictions.iter().any(|c| c.contains("total capacity")) {
            reasoning.push("On Windows, the driver's CUDA system-memory fallback (driver ≥ 536.40) lets allocations spill past the card's total into shared system memory, which makes PyTorch's figures exceed the total; there it is slow, not an out-of-memory cause.".to_string());
        }
        return Verdict {
            class: OomClass::Unexplained,
            headline: format!("the message's figures contradict each other: {}", contradictions[0]),
            figures,
            reasoning,
            gap_bytes: None,
            fixes: vec![
                fix(FixCost::Setting, "take the message from the failing run's own log, unedited (all figures of one OOM come from one print)", "the figures as given cannot all describe one card"),
                fix(FixCost::Setting, "capture a memory snapshot (torch.cuda.memory._record_memory_history) and run `vramfit diagnose` on it", "it records the allocator's state at the OOM"),
            ],
        };
    }

    // 1. bigger than the card
    if t.requested.lo() > t.total.hi() {
        reasoning
            .push(format!("{} > {}: a single request larger than the whole card.", t.requested.text, t.total.text));
        return Verdict {
            class: OomClass::RequestExceedsCard,
            headline: format!("one allocation of {} is larger than the {} card", t.requested.text, t.total.text),
            figures,
            reasoning,
            gap_bytes: Some(r - total),
            fixes: vec![
                fix(FixCost::Code, "split the operation that makes this tensor (chunk it over the batch or sequence; memory-efficient attention; chunked loss)", "no allocator setting can place a tensor larger than the card"),
                fix(FixCost::Workload, "lower batch size / sequence length / image resolution for this step", "the tensor's size is proportional to them"),
                fix(FixCost::Hardware, "tensor parallelism or a card with more memory", "splits the tensor itself across GPUs"),
            ],
        };
    }

    // 2. the device had room
    if t.free.lo() >= t.requested.hi() {
        if let Some(c) = cap {
            let need = a.saturating_add(u).saturating_add(r);
            let slack = t
                .allowed
                .as_ref()
                .map(|x| x.tolerance)
                .unwrap_or(0)
                .saturating_add(t.allocated.tolerance)
                .saturating_add(t.unallocated_tolerance());
            if need.saturating_add(slack) >= c {
                reasoning.push(format!(
                    "The device had room, but the process is capped at {} (set_per_process_memory_fraction) and {} reserved + {} requested reaches the cap (within print rounding).",
                    b(c),
                    b(reserved),
                    t.requested.text
                ));
                return Verdict {
                    class: OomClass::GenuineShortage,
                    headline: format!("the memory-fraction cap of {} is reached", b(c)),
                    figures,
                    reasoning,
                    gap_bytes: Some(need.saturating_sub(c)),
                    fixes: vec![fix(
                        FixCost::Setting,
                        "raise torch.cuda.set_per_process_memory_fraction",
                        "the cap, not the card, is the limit",
                    )],
                };
            }
        }
        reasoning.push(format!(
            "{} free ≥ {} requested: cudaMalloc should have succeeded. The free figure is read after the failure, so memory released in between (another process exiting, this process's cache flush) or a driver limit (Windows WDDM, MIG/vGPU) can explain it.",
            t.free.text, t.requested.text
        ));
        return Verdict {
            class: OomClass::Unexplained,
            headline: "the card reported enough free memory for the request".to_string(),
            figures,
            reasoning,
            gap_bytes: None,
            fixes: vec![
                fix(FixCost::Housekeeping, "check other processes at the moment of failure (nvidia-smi --query-compute-apps=pid,used_memory --format=csv -l 1)", "a transient neighbour explains free memory reported after the failure"),
                fix(FixCost::Setting, "capture a memory snapshot (torch.cuda.memory._record_memory_history) and run `vramfit diagnose` on it", "it shows the allocator's state at the OOM"),
            ],
        };
    }

    let tol = t.free.tolerance.saturating_add(t.unallocated_tolerance());
    // 3. fragmentation: the cache covers the shortfall and is a material
    // share of what PyTorch reserved (a few MiB of scraps on a full card
    // are not the cause: the live tensors are)
    let frag_material = u as f64 >= FRAG_MIN_SHARE * reserved as f64 && u > 0;
    if free.saturating_add(u).saturating_add(tol) >= r && frag_material {
        reasoning.push(format!(
            "{} free + {} cached-but-unallocated = {} ≥ {}: the bytes exist, but the cached part is split inside segments that still hold live tensors (PyTorch already released every whole free segment before printing this), so no single free block was large enough.",
            t.free.text,
            b(u),
            b(free.saturating_add(u)),
            t.requested.text
        ));
        if u >= r {
            reasoning.push(format!("The cache alone ({}) is larger than the request.", b(u)));
        }
        if other >= OTHER_PROCESS_MIN {
            reasoning.push(format!(
                "Other memory on the card ({}) makes it worse but is not needed to explain it.",
                b(other)
            ));
        }
        return Verdict {
            class: OomClass::Fragmentation,
            headline: format!("{} cached but unusable for a {} request", b(u), t.requested.text),
            figures,
            reasoning,
            gap_bytes: None,
            fixes: fragmentation_fixes(t.era),
        };
    }

    // 4. other processes
    if other >= OTHER_PROCESS_MIN && free.saturating_add(u).saturating_add(other).saturating_add(tol) >= r {
        reasoning.push(format!(
            "{} free + {} cached + {} held elsewhere ≥ {}: without the other memory the request would fit.",
            t.free.text,
            b(u),
            b(other),
            t.requested.text
        ));
        let mut fixes = vec![fix(
            FixCost::Housekeeping,
            "stop or move the other processes (nvidia-smi --query-compute-apps=pid,used_memory --format=csv), or pick a free card with CUDA_VISIBLE_DEVICES",
            "their memory is what is missing",
        )];
        let small_many = t.processes.len() >= 2
            && t.processes.iter().filter(|p| Some(p.pid) != presumed_self).all(|p| p.used.bytes <= CONTEXT_ALLOWANCE);
        if small_many {
            fixes.push(fix(
                FixCost::Code,
                "call torch.cuda.set_device(local_rank) before any CUDA work in every rank",
                "several small processes on one card are usually the other ranks' stray CUDA contexts on GPU 0",
            ));
        }
        return Verdict {
            class: OomClass::OtherProcess,
            headline: format!("{} on GPU {} is held outside this job", b(other), t.device),
            figures,
            reasoning,
            gap_bytes: None,
            fixes,
        };
    }

    // 5. genuine shortage
    let gap = r.saturating_sub(free.saturating_add(u));
    if gap == 0 {
        let share = if total > 0 { a as f64 * 100.0 / total as f64 } else { 0.0 };
        reasoning.push(format!(
            "The {} cached is only {:.1}% of reserved: scraps. Live tensors hold {} = {:.1}% of the card, so the job is at the card's limit; freeing the scraps would only move the failure to the next allocation.",
            b(u),
            if reserved > 0 { u as f64 * 100.0 / reserved as f64 } else { 0.0 },
            t.allocated.text,
            share
        ));
        return Verdict {
            class: OomClass::GenuineShortage,
            headline: format!("live tensors fill {share:.0}% of the card"),
            figures,
            reasoning,
            gap_bytes: None,
            fixes: shortage_fixes(activity),
        };
    }
    reasoning.push(format!(
        "{} free + {} cached = {} < {}: even a perfectly reusable cache leaves {} missing; the live tensors ({}) are the problem.",
        t.free.text,
        b(u),
        b(free.saturating_add(u)),
        t.requested.text,
        b(gap),
        b(a)
    ));
    if u >= GIB {
        reasoning.push(format!(
            "expandable_segments:True would recover part of the {} cache, but not the {} gap.",
            b(u),
            b(gap)
        ));
    }
    figures.push(fig("gap", gap));
    Verdict {
        class: OomClass::GenuineShortage,
        headline: format!("{} more than the card can give", b(gap)),
        figures,
        reasoning,
        gap_bytes: Some(gap),
        fixes: shortage_fixes(activity),
    }
}

/// Verdict for any event.
pub fn classify(e: &OomEvent) -> Verdict {
    match &e.kind {
        OomKind::Torch(t) => classify_torch(t, e.context.activity),
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
            fixes: vec![fix(
                FixCost::Setting,
                "paste the whole message, or torch.cuda.memory_summary() printed in the except block",
                "the free/reserved figures decide the cause",
            )],
        },
        OomKind::Other(o) => classify_other(o),
    }
}

fn classify_other(o: &OtherOom) -> Verdict {
    match o {
        OtherOom::Xla { requested, total_allocation, fragmentation, peak_buffers, .. } => {
            let mut reasoning = vec![format!("XLA could not allocate {} bytes.", requested.bytes)];
            let mut figures = vec![fig("requested", requested.bytes)];
            if let Some(t) = total_allocation {
                figures.push(fig("program_total", t.bytes));
                reasoning.push(format!("The compiled program needs {} in all (BufferAssignment stats).", t.text));
            }
            let frag = fragmentation.as_ref().map(|f| f.bytes).unwrap_or(0);
            if let Some(buf) = peak_buffers.first() {
                reasoning.push(format!(
                    "Largest live buffer at the peak: {}{}{}.",
                    buf.size.text,
                    buf.shape.as_ref().map(|s| format!(" {s}")).unwrap_or_default(),
                    buf.operator.as_ref().map(|s| format!(" from {s}")).unwrap_or_default()
                ));
            }
            let small = total_allocation.as_ref().is_some_and(|t| t.bytes < XLA_SMALL_PROGRAM);
            let class = if total_allocation.as_ref().is_some_and(|t| t.bytes > 0 && frag * 4 > t.bytes) {
                OomClass::Fragmentation
            } else if small {
                reasoning.push(format!(
                    "A program that needs less than {} cannot fill a GPU by itself: the memory was taken before it ran, typically by JAX's default preallocation (75% of the card) in this or another process, or by another framework in the same process.",
                    b(XLA_SMALL_PROGRAM)
                ));
                OomClass::Unexplained
            } else {
                OomClass::GenuineShortage
            };
            Verdict {
                class,
                headline: format!("XLA could not allocate {} ({} bytes)", b(requested.bytes), requested.bytes),
                figures,
                reasoning,
                gap_bytes: None,
                fixes: vec![
                    fix(FixCost::Setting, "XLA_PYTHON_CLIENT_PREALLOCATE=false or XLA_PYTHON_CLIENT_MEM_FRACTION=.90", "JAX preallocates 75% of the card by default; other frameworks in the same process get only the rest"),
                    fix(FixCost::Code, "jax.checkpoint (remat) around the big blocks, or shard with pjit/shard_map", "the peak buffers are activations of one jitted program"),
                    fix(FixCost::Workload, "lower the batch / sequence of the jitted step", "XLA buffers scale with the traced shapes"),
                ],
            }
        }
        OtherOom::TensorFlow { shape, dtype, bytes, gpu, node, .. } => Verdict {
            class: OomClass::GenuineShortage,
            headline: format!(
                "TensorFlow could not allocate a {} tensor{}",
                bytes.map(b).unwrap_or_else(|| "?".into()),
                gpu.map(|g| format!(" on GPU {g}")).unwrap_or_default()
            ),
            figures: bytes.iter().map(|&x| fig("requested", x)).collect(),
            reasoning: vec![format!(
                "Shape {:?} of {} = {}{}. The BFC allocator message carries no free/total figures, so only the request size is known.",
                shape,
                dtype.as_deref().unwrap_or("unknown dtype"),
                bytes.map(b).unwrap_or_else(|| "unknown bytes".into()),
                node.as_ref().map(|n| format!(", made by node {n}")).unwrap_or_default()
            )],
            gap_bytes: None,
            fixes: vec![
                fix(FixCost::Setting, "tf.config.experimental.set_memory_growth(gpu, True)", "TF grabs the whole card up front otherwise; growth lets it share"),
                fix(FixCost::Workload, format!("lower the leading dimension ({}) of this tensor", shape.first().copied().unwrap_or(0)), "usually the batch"),
                fix(FixCost::Code, "mixed precision (tf.keras.mixed_precision.set_global_policy('mixed_float16'))", "halves activation bytes"),
            ],
        },
        OtherOom::VllmNoCacheBlocks { profile } => {
            let mut reasoning = vec!["vLLM reserves gpu_memory_utilization × total for itself; after the weights and the profiling peak nothing was left for a single KV block.".to_string()];
            let mut figures = vec![];
            if let Some(p) = profile {
                if let (Some(t), Some(u)) = (p.total_gpu_memory, p.gpu_memory_utilization) {
                    let budget = (t as f64 * u) as u64;
                    figures.push(fig("budget", budget));
                    reasoning.push(format!("Budget: {} × {:.2} = {}.", b(t), u, b(budget)));
                }
                if let Some(w) = p.weights {
                    figures.push(fig("weights", w));
                    reasoning.push(format!("Weights took {}.", b(w)));
                }
                if let Some(pk) = p.peak_torch_memory {
                    figures.push(fig("peak_torch_memory", pk));
                    reasoning.push(format!("Profiling peak (weights + activations of max_num_batched_tokens): {}.", b(pk)));
                }
            }
            Verdict {
                class: OomClass::GenuineShortage,
                headline: "vLLM: no memory left for the KV cache".to_string(),
                figures,
                reasoning,
                gap_bytes: None,
                fixes: vec![
                    fix(FixCost::Setting, "raise --gpu-memory-utilization (e.g. 0.95) if nothing else uses the card", "the budget is a fraction of the whole card"),
                    fix(FixCost::Setting, "lower --max-num-batched-tokens / --max-num-seqs, or --enforce-eager", "the profiling peak and CUDA graphs eat into the KV budget"),
                    fix(FixCost::Setting, "a quantized checkpoint (AWQ/GPTQ/FP8) or --tensor-parallel-size 2", "weights leave more room for KV blocks"),
                ],
            }
        }
        OtherOom::VllmMaxLenTokens { max_model_len, kv_cache_tokens, .. } => Verdict {
            class: OomClass::GenuineShortage,
            headline: format!("vLLM: the KV cache holds {kv_cache_tokens} tokens, max_model_len is {max_model_len}"),
            figures: vec![],
            reasoning: vec![format!(
                "One sequence of max_model_len = {max_model_len} tokens must fit in the cache, which holds {kv_cache_tokens}; {:.0}% of it.",
                *kv_cache_tokens as f64 * 100.0 / (*max_model_len).max(1) as f64
            )],
            gap_bytes: None,
            fixes: vec![
                fix(FixCost::Setting, format!("--max-model-len {kv_cache_tokens} (or lower)"), "the longest sequence the cache can hold"),
                fix(FixCost::Setting, "--kv-cache-dtype fp8", "halves KV bytes per token"),
                fix(FixCost::Setting, "raise --gpu-memory-utilization or add --tensor-parallel-size", "more bytes for the cache"),
            ],
        },
        OtherOom::VllmMaxLenMemory { max_model_len, needed, available, estimated_max_len, .. } => Verdict {
            class: OomClass::GenuineShortage,
            headline: format!("vLLM: one {max_model_len}-token request needs {} of KV cache, {} available", needed.text, available.text),
            figures: vec![fig("kv_needed", needed.bytes), fig("kv_available", available.bytes), fig("gap", needed.bytes.saturating_sub(available.bytes))],
            reasoning: vec![format!(
                "{} needed − {} available = {} missing.",
                needed.text,
                available.text,
                b(needed.bytes.saturating_sub(available.bytes))
            )],
            gap_bytes: Some(needed.bytes.saturating_sub(available.bytes)),
            fixes: vec![
                fix(
                    FixCost::Setting,
                    match estimated_max_len {
                        Some(m) => format!("--max-model-len {m}"),
                        None => "lower --max-model-len".to_string(),
                    },
                    "vLLM's own estimate of the longest sequence that fits",
                ),
                fix(FixCost::Setting, "--kv-cache-dtype fp8", "halves KV bytes per token"),
                fix(FixCost::Setting, "raise --gpu-memory-utilization or add --tensor-parallel-size", "more bytes for the cache"),
            ],
        },
        OtherOom::Mps { allocated, other, max_allowed, requested, .. } => {
            let (a, o, m, r) = (allocated.bytes, other.bytes, max_allowed.bytes, requested.bytes);
            let need = a.saturating_add(o).saturating_add(r);
            let mut reasoning = vec![format!(
                "MPS allocated {} + other allocations {} + request {} = {} against the {} high-watermark limit.",
                allocated.text,
                other.text,
                requested.text,
                b(need),
                max_allowed.text
            )];
            let watermark = fix(
                FixCost::Setting,
                "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 (no limit; the system may swap or hang)",
                "the limit is a share of unified memory, not the hardware",
            );
            let (class, headline, fixes) = if r > m {
                reasoning.push(format!("{} alone exceeds the limit.", requested.text));
                (OomClass::RequestExceedsCard, format!("one allocation of {} exceeds the {} MPS limit", requested.text, max_allowed.text), vec![
                    fix(FixCost::Workload, "split the operation or shrink the batch / resolution", "no single tensor above the limit can be placed"),
                    watermark,
                ])
            } else if o >= a && o >= OTHER_PROCESS_MIN {
                // MPSAllocator.mm: other = [device currentAllocatedSize] − the allocator's own buffers,
                // after it has already freed its cached buffers and retried
                reasoning.push(format!(
                    "{} is Metal memory of this process outside PyTorch's MPS allocator (MPSGraph caches and kernels, other Metal users in the process), more than PyTorch's own {}; PyTorch had already freed its cached buffers and retried.",
                    other.text, allocated.text
                ));
                (OomClass::GenuineShortage, format!("{} held outside PyTorch's MPS allocator, {} over the limit", other.text, b(need.saturating_sub(m))), vec![
                    fix(FixCost::Code, "compare torch.mps.driver_allocated_memory() with torch.mps.current_allocated_memory() while running; release what holds the rest (other Metal/CoreML models in the process, graph caches)", "the bulk is not PyTorch tensors"),
                    fix(FixCost::Workload, "lower the batch / resolution / sequence length", "fewer and smaller graphs and tensors"),
                    watermark,
                ])
            } else {
                reasoning.push(format!("{} short.", b(need.saturating_sub(m))));
                (OomClass::GenuineShortage, format!("{} over the MPS limit", b(need.saturating_sub(m))), vec![
                    fix(FixCost::Workload, "lower the batch / resolution / sequence length", "PyTorch's own allocations are the bulk"),
                    fix(FixCost::Code, "fp16 weights and activations", "halves the bytes"),
                    watermark,
                ])
            };
            Verdict {
                class,
                headline,
                figures: vec![fig("allocated", a), fig("other", o), fig("allowed", m), fig("requested", r)],
                reasoning,
                gap_bytes: Some(need.saturating_sub(m)),
                fixes,
            }
        }
        OtherOom::CudaError { text } => Verdict {
            class: OomClass::Unknown,
            headline: format!("{text}: memory outside PyTorch's caching allocator ran out"),
            figures: vec![],
            reasoning: vec!["This error comes from a raw CUDA call (context creation, NCCL buffers, cuBLAS/cuDNN handles), not from the caching allocator, so no figures are printed. It usually means the card was already full of cached tensors or of another process when a library asked for its own memory.".to_string()],
            gap_bytes: None,
            fixes: vec![
                fix(FixCost::Housekeeping, "check for other processes on the card (nvidia-smi)", "contexts and NCCL buffers need room outside the cache"),
                fix(FixCost::Setting, "set torch.cuda.set_per_process_memory_fraction(0.95) or NCCL_BUFFSIZE lower", "leaves headroom for library allocations"),
            ],
        },
    }
}
