//! The sentences of a PyTorch verdict, rendered from the rules' data: the
//! rules in [`super::torch`] say what they found ([`Note`], [`Headline`]);
//! only this file says it in words.

use super::torch::Ruling;
use super::{b, OomClass};

/// One step of the reasoning, as data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Note {
    Overview { device: u32, requested: String, free: String, total: String, reserved: u64, allocated: u64, cached: u64 },
    NvmlZeroThisProcess { reserved: u64 },
    ThisProcess { this: String, non_pytorch: u64 },
    PresumedSelf { pid: u64, used: String, slack: u64, reserved: u64 },
    Unaccounted { bytes: u64 },
    OtherProcesses { other: u64, list: Vec<(u64, String)> },
    OutsideAllocator { bytes: u64, no_nvml: bool },
    BeyondContext { allowance: u64, other: u64 },
    FreeAboveTotal { free: String, total: String },
    Contradictions { list: Vec<String> },
    WindowsSysmemFallback,
    RequestAboveCard { requested: String, total: String },
    CapReached { cap: u64, reserved: u64, requested: String },
    FreeCoversRequest { free: String, requested: String },
    CacheSplit { free: String, cached: u64, sum: u64, requested: String },
    CacheAloneLarger { cached: u64 },
    OtherMakesWorse { other: u64 },
    OtherNeeded { free: String, cached: u64, other: u64, requested: String },
    CacheIsScraps { cached: u64, of_reserved: f64, allocated: String, share: f64 },
    Gap { free: String, cached: u64, sum: u64, requested: String, gap: u64, allocated: u64 },
    ExpandableRecoversPart { cached: u64, gap: u64 },
}

impl Note {
    pub fn sentence(&self) -> String {
        match self {
            Note::Overview { device, requested, free, total, reserved, allocated, cached } => format!(
                "GPU {device}: the allocator asked for {requested} with {free} free of {total}; PyTorch holds {} reserved, {} of it in live tensors and {} cached but unallocated.",
                b(*reserved),
                b(*allocated),
                b(*cached)
            ),
            Note::NvmlZeroThisProcess { reserved } => format!(
                "NVML reported 0 bytes for this process although PyTorch holds {} (a known NVML/driver reporting gap, e.g. under some containers); the figure is ignored.",
                b(*reserved)
            ),
            Note::ThisProcess { this, non_pytorch } => format!(
                "This process uses {this} in all; {} of it is outside PyTorch's allocator (CUDA context, NCCL, cuBLAS/cuDNN workspaces, other libraries).",
                b(*non_pytorch)
            ),
            Note::PresumedSelf { pid, used, slack, reserved } => format!(
                "No \"this process\" line: PID {pid} ({used}) is within {} above PyTorch's reserved {}, so it is most likely this process seen from a container with its own PID namespace.",
                b(*slack),
                b(*reserved)
            ),
            Note::Unaccounted { bytes } => format!(
                "{} of the card is used but not by any process the message lists: NVML lists compute processes only, so this is a graphics process (a desktop), a process in another container, or an engine sharing the card (e.g. vLLM).",
                b(*bytes)
            ),
            Note::OtherProcesses { other, list } => {
                let list: Vec<String> = list.iter().map(|(pid, used)| format!("PID {pid} {used}")).collect();
                format!("Other processes on the card hold {}: {}.", b(*other), list.join(", "))
            }
            Note::OutsideAllocator { bytes, no_nvml } => format!(
                "{} of the card is neither free nor reserved by PyTorch: this process's CUDA context (~0.25–0.6 GiB) plus anything other processes or non-PyTorch code hold{}.",
                b(*bytes),
                if *no_nvml { " (the message has no process figures: NVML was unavailable, e.g. on Windows or ROCm)" } else { "" }
            ),
            Note::BeyondContext { allowance, other } => format!(
                "That is more than a context ({} allowance), so about {} belongs to something else.",
                b(*allowance),
                b(*other)
            ),
            Note::FreeAboveTotal { free, total } => format!(
                "{free} free > {total} total: the driver reports the card's total wrongly (integrated GPUs with unified memory, e.g. AMD APUs, report a fixed carve-out as the total), so the verdict cannot rest on these figures."
            ),
            Note::Contradictions { list } => format!(
                "The figures contradict each other (beyond print rounding): {}. (Allocated memory is part of reserved, and free and reserved are disjoint parts of the total.) A message edited by hand, pasted from two runs, or printed by a driver that misreports the card; no cause can be read from it.",
                list.join("; ")
            ),
            Note::WindowsSysmemFallback => "On Windows, the driver's CUDA system-memory fallback (driver ≥ 536.40) lets allocations spill past the card's total into shared system memory, which makes PyTorch's figures exceed the total; there it is slow, not an out-of-memory cause.".to_string(),
            Note::RequestAboveCard { requested, total } => {
                format!("{requested} > {total}: a single request larger than the whole card.")
            }
            Note::CapReached { cap, reserved, requested } => format!(
                "The device had room, but the process is capped at {} (set_per_process_memory_fraction) and {} reserved + {requested} requested reaches the cap (within print rounding).",
                b(*cap),
                b(*reserved)
            ),
            Note::FreeCoversRequest { free, requested } => format!(
                "{free} free ≥ {requested} requested: cudaMalloc should have succeeded. The free figure is read after the failure, so memory released in between (another process exiting, this process's cache flush) or a driver limit (Windows WDDM, MIG/vGPU) can explain it."
            ),
            Note::CacheSplit { free, cached, sum, requested } => format!(
                "{free} free + {} cached-but-unallocated = {} ≥ {requested}: the bytes exist, but the cached part is split inside segments that still hold live tensors (PyTorch already released every whole free segment before printing this), so no single free block was large enough.",
                b(*cached),
                b(*sum)
            ),
            Note::CacheAloneLarger { cached } => format!("The cache alone ({}) is larger than the request.", b(*cached)),
            Note::OtherMakesWorse { other } => format!(
                "Other memory on the card ({}) makes it worse but is not needed to explain it.",
                b(*other)
            ),
            Note::OtherNeeded { free, cached, other, requested } => format!(
                "{free} free + {} cached + {} held elsewhere ≥ {requested}: without the other memory the request would fit.",
                b(*cached),
                b(*other)
            ),
            Note::CacheIsScraps { cached, of_reserved, allocated, share } => format!(
                "The {} cached is only {of_reserved:.1}% of reserved: scraps. Live tensors hold {allocated} = {share:.1}% of the card, so the job is at the card's limit; freeing the scraps would only move the failure to the next allocation.",
                b(*cached)
            ),
            Note::Gap { free, cached, sum, requested, gap, allocated } => format!(
                "{free} free + {} cached = {} < {requested}: even a perfectly reusable cache leaves {} missing; the live tensors ({}) are the problem.",
                b(*cached),
                b(*sum),
                b(*gap),
                b(*allocated)
            ),
            Note::ExpandableRecoversPart { cached, gap } => format!(
                "expandable_segments:True would recover part of the {} cache, but not the {} gap.",
                b(*cached),
                b(*gap)
            ),
        }
    }
}

/// The verdict's one-line headline, as data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Headline {
    FreeAboveTotal,
    Contradiction { first: String },
    RequestExceedsCard { requested: String, total: String },
    CapReached { cap: u64 },
    FreeCoversRequest,
    CacheUnusable { cached: u64, requested: String },
    HeldElsewhere { other: u64, device: u32 },
    LiveTensorsFill { share: f64 },
    Gap { gap: u64 },
}

impl Headline {
    pub fn render(&self) -> String {
        match self {
            Headline::FreeAboveTotal => "the message's free memory exceeds its total".to_string(),
            Headline::Contradiction { first } => format!("the message's figures contradict each other: {first}"),
            Headline::RequestExceedsCard { requested, total } => {
                format!("one allocation of {requested} is larger than the {total} card")
            }
            Headline::CapReached { cap } => format!("the memory-fraction cap of {} is reached", b(*cap)),
            Headline::FreeCoversRequest => "the card reported enough free memory for the request".to_string(),
            Headline::CacheUnusable { cached, requested } => {
                format!("{} cached but unusable for a {requested} request", b(*cached))
            }
            Headline::HeldElsewhere { other, device } => {
                format!("{} on GPU {device} is held outside this job", b(*other))
            }
            Headline::LiveTensorsFill { share } => format!("live tensors fill {share:.0}% of the card"),
            Headline::Gap { gap } => format!("{} more than the card can give", b(*gap)),
        }
    }
}

/// One sentence for an OOM of a snapshot's trace, from the ruling and the
/// replayed figures (free on the device, the cache, the request).
pub(crate) fn state_sentence(ruling: &Ruling, free: u64, cached: u64, requested: u64) -> String {
    let sum = free.saturating_add(cached);
    match (ruling.class, ruling.gap) {
        (OomClass::Fragmentation, _) => format!(
            "{} free on the device + {} cached = {} ≥ {} requested, but no single block fit",
            b(free),
            b(cached),
            b(sum),
            b(requested)
        ),
        (OomClass::Unexplained, _) => format!("{} free ≥ {} requested", b(free), b(requested)),
        (_, Some(gap)) => format!(
            "{} free + {} cached < {} requested: {} short",
            b(free),
            b(cached),
            b(requested),
            b(gap)
        ),
        _ => format!(
            "{} free + {} cached ≥ {} requested, but the cache is scraps (under {:.0}% of reserved): live tensors fill what PyTorch reserved",
            b(free),
            b(cached),
            b(requested),
            super::FRAG_MIN_SHARE * 100.0
        ),
    }
}
