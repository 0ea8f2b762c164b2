//! The sentences of a PyTorch verdict, rendered from the rules' data: the
//! rules in [`super::torch`] say what they found ([`Note`], [`Headline`]);
//! only this file says it in words.

use super::{b, Cause};

/// One step of the reasoning, as data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Note {
    Overview {
        device: Option<u32>,
        requested: String,
        free: String,
        total: String,
        reserved: u64,
        allocated: u64,
        cached: u64,
    },
    Missing {
        names: Vec<String>,
        assumed: Vec<String>,
        matters: Vec<String>,
    },
    OwnOutside {
        bytes: u64,
        own: u64,
        why: String,
        factor: Option<f64>,
    },
    CannotTellWhose {
        bytes: u64,
        own: u64,
        nvml_gap: bool,
    },
    BeyondOwn {
        bytes: u64,
        own: u64,
        why: String,
        other: u64,
    },
    NvmlZeroThisProcess {
        reserved: u64,
    },
    ThisProcess {
        this: String,
        non_pytorch: u64,
    },
    PresumedSelf {
        pid: u64,
        used: String,
        slack: u64,
        reserved: u64,
    },
    OnlyProcess {
        pid: u64,
        used: String,
        reserved: u64,
    },
    Unaccounted {
        bytes: u64,
    },
    OtherProcesses {
        other: u64,
        list: Vec<(u64, String)>,
    },
    OutsideAllocator {
        bytes: u64,
        no_nvml: bool,
    },
    BeyondContext {
        allowance: u64,
        other: u64,
    },
    FreeAboveTotal {
        free: String,
        total: String,
    },
    Contradictions {
        list: Vec<String>,
    },
    WindowsSysmemFallback,
    RequestAboveCard {
        requested: String,
        total: String,
    },
    CapReached {
        cap: u64,
        reserved: u64,
        requested: String,
    },
    FreeCoversRequest {
        free: String,
        requested: String,
    },
    CacheSplit {
        free: String,
        cached: u64,
        sum: u64,
        requested: String,
    },
    CacheAloneLarger {
        cached: u64,
    },
    OtherMakesWorse {
        other: u64,
    },
    OtherNeeded {
        free: String,
        cached: u64,
        other: u64,
        requested: String,
    },
    CacheIsScraps {
        cached: u64,
        of_reserved: f64,
        allocated: String,
        share: f64,
    },
    Gap {
        free: String,
        cached: u64,
        sum: u64,
        requested: String,
        gap: u64,
        allocated: u64,
    },
    ExpandableRecoversPart {
        cached: u64,
        gap: u64,
    },
    EffectivelyFull {
        free: String,
        requested: String,
        left: u64,
        margin: u64,
    },
    ContradictionsBeside {
        list: Vec<String>,
    },
    OtherHoldsMost {
        other: u64,
        job: u64,
        share: Option<f64>,
    },
    FullWithCache {
        free: String,
        cached: u64,
        requested: String,
        left: u64,
        margin: u64,
    },
    NvidiaSmiGpu {
        line: usize,
        gpu: u32,
        used: u64,
        total: u64,
    },
    NvidiaSmiProcesses {
        line: usize,
        gpu: u32,
        own: Option<u64>,
        others: Vec<(u64, String, u64)>,
        sum: u64,
    },
    Contributors {
        main: Cause,
        rest: Vec<Cause>,
    },
}

fn share_text(c: &Cause) -> String {
    match (c.bytes, c.share) {
        (Some(bytes), Some(s)) => format!("{} ({:.0}% of the card)", b(bytes), s * 100.0),
        (Some(bytes), None) => b(bytes),
        _ => "—".to_string(),
    }
}

impl Note {
    /// The sentence of this step.
    pub fn sentence(&self) -> String {
        self.figure_sentence().unwrap_or_else(|| self.rule_sentence())
    }

    /// Steps that state the figures and who holds the card.
    fn figure_sentence(&self) -> Option<String> {
        Some(match self {
            Note::Overview { device, requested, free, total, reserved, allocated, cached } => format!(
                "{}: the allocator asked for {requested} with {free} free of {total}; PyTorch holds {} reserved, {} of it in live tensors and {} cached but unallocated.",
                device.map(|d| format!("GPU {d}")).unwrap_or_else(|| "GPU ?".to_string()),
                b(*reserved),
                b(*allocated),
                b(*cached)
            ),
            Note::Missing { names, assumed, matters } => {
                let tail = if matters.is_empty() {
                    "the cause is the same whatever they were, within what the printed figures allow.".to_string()
                } else {
                    format!("they matter: {}.", matters.join("; "))
                };
                format!(
                    "Not in the text (the message was cut or trimmed): {}. Assumed {} (the values an OOM most often has); {tail}",
                    names.join(", "),
                    assumed.join(", ")
                )
            }
            Note::OwnOutside { bytes, own, why, factor } => format!(
                "The {} outside PyTorch is this job's own: {} holds about {} outside the allocator{}.",
                b(*bytes),
                why,
                b(*own),
                factor.map(|k| format!(", and this is within {k:.0}× that (NCCL channels, CUDA graphs and kernel images vary with the model and parallelism)")).unwrap_or_default()
            ),
            Note::CannotTellWhose { bytes, own, nvml_gap } => format!(
                "Whose the {} outside PyTorch is cannot be told from the figures{}: beyond a context ({}), it is another process{} or this job's own non-PyTorch memory (a serving engine's buffers, NCCL, an extension such as bitsandbytes); the log names no engine. It is counted as another user's, and the verdict without it is the runner-up.",
                b(*bytes),
                if *nvml_gap { " (NVML reported 0 bytes for this process: it does not see processes inside the container)" } else { "" },
                b(*own),
                if *nvml_gap { " (in another container, which NVML cannot see either)" } else { "" }
            ),
            Note::BeyondOwn { bytes, own, why, other } => format!(
                "{} is outside PyTorch, more than twice what this job's engine holds there ({}: about {}): about {} belongs to another user of the card.",
                b(*bytes),
                why,
                b(*own),
                b(*other)
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
            Note::OnlyProcess { pid, used, reserved } => format!(
                "PID {pid} ({used}) is the only process NVML lists and no \"this process\" line is printed: NVML lists every compute process on the GPU, this one included by its host PID, so PID {pid} is this process seen from a container; {} of it is outside PyTorch's allocator (reserved {}).",
                b(crate::size::parse_size(used).map(|s| s.bytes).unwrap_or(0).saturating_sub(*reserved)),
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
            _ => return None,
        })
    }

    /// Steps of the rules: what decided the cause.
    fn rule_sentence(&self) -> String {
        match self {
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
            Note::EffectivelyFull { free, requested, left, margin } => format!(
                "{free} free ≥ {requested} requested, but only by {}: less than the {} the driver needs to place it (2 MiB pages, page tables, its own structures; 1% of the card), so the card is effectively full and the other figures decide.",
                b(*left),
                b(*margin)
            ),
            Note::ContradictionsBeside { list } => format!(
                "Other figures contradict each other ({}; e.g. Windows' CUDA system-memory fallback lets allocations exceed the card), but the request alone decides: no setting places a tensor larger than the card.",
                list.join("; ")
            ),
            Note::OtherHoldsMost { other, job, share } => format!(
                "Other users of the card hold {}{}, more than this job's {} (reserved + the request): they are the main cause, whatever the cache could serve.",
                b(*other),
                share.map(|s| format!(" ({s:.0}% of the card)")).unwrap_or_default(),
                b(*job)
            ),
            Note::FullWithCache { free, cached, requested, left, margin } if left < margin => format!(
                "{free} free + {} cached ≥ {requested} only together, and they would leave {} (under the {} effectively-full margin): the card is full of this job's tensors; the split cache only contributes (expandable_segments:True may get past this allocation, not the next).",
                b(*cached),
                b(*left),
                b(*margin)
            ),
            Note::FullWithCache { free, cached, requested, left, .. } => format!(
                "{free} free + {} cached ≥ {requested} only together (they would leave {}), but the cache alone is smaller than the request: no block it holds could serve it, and free memory cannot join a cached block, so live tensors are the cause; the split cache contributes, and expandable_segments:True (a segment whose free tail meets newly mapped pages) is still the cheapest thing to try.",
                b(*cached),
                b(*left)
            ),
            Note::NvidiaSmiGpu { line, gpu, used, total } => format!(
                "The nvidia-smi table in the log (line {line}) shows GPU {gpu} with {} of {} in use ({:.0}%), and no process rows.",
                b(*used),
                b(*total),
                *used as f64 * 100.0 / (*total).max(1) as f64
            ),
            Note::NvidiaSmiProcesses { line, gpu, own, others, sum } => {
                let list: Vec<String> =
                    others.iter().map(|(pid, name, used)| format!("PID {pid} {name} {}", b(*used))).collect();
                format!(
                    "The nvidia-smi table in the log (line {line}) lists on GPU {gpu}: {}{}.",
                    if list.is_empty() { "no other process".to_string() } else { format!("{} ({} in all)", list.join(", "), b(*sum)) },
                    own.map(|p| format!("; PID {p} matches PyTorch's reserved bytes, so it is this process")).unwrap_or_default()
                )
            }
            Note::Contributors { main, rest } => {
                let rest: Vec<String> = rest.iter().map(|c| format!("{} {}", c.what, share_text(c))).collect();
                format!("Main cause: {} {}; also contributing: {}.", main.what, share_text(main), rest.join(", "))
            }
            _ => String::new(),
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
    HeldElsewhere { other: u64, device: Option<u32> },
    LiveTensorsFill { share: f64 },
    Gap { gap: u64 },
    CardFull { need: u64, share: Option<f64> },
    CacheSmaller { cached: u64, requested: String },
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
            Headline::HeldElsewhere { other, device } => format!(
                "{} on {} is held outside this job",
                b(*other),
                device.map(|d| format!("GPU {d}")).unwrap_or_else(|| "the GPU".to_string())
            ),
            Headline::LiveTensorsFill { share } => format!("live tensors fill {share:.0}% of the card"),
            Headline::Gap { gap } => format!("{} more than the card can give", b(*gap)),
            Headline::CacheSmaller { cached, requested } => format!(
                "the {} cache is smaller than the {requested} request: free memory and the cache cover it only together",
                b(*cached)
            ),
            Headline::CardFull { need, share } => format!(
                "the card is effectively full: live tensors + the request = {}{}",
                b(*need),
                share.map(|s| format!(" ({s:.0}% of the card)")).unwrap_or_default()
            ),
        }
    }
}

/// One sentence for an OOM of a snapshot's trace, from the ruling's
/// headline and the replayed figures (free on the device, the cache, the
/// request).
pub(crate) fn state_sentence(headline: &Headline, free: u64, cached: u64, requested: u64) -> String {
    let sum = free.saturating_add(cached);
    match headline {
        Headline::CacheUnusable { .. } => format!(
            "{} free on the device + {} cached = {} ≥ {} requested, but no single block fit",
            b(free),
            b(cached),
            b(sum),
            b(requested)
        ),
        Headline::FreeCoversRequest => format!("{} free ≥ {} requested", b(free), b(requested)),
        Headline::Gap { gap } => {
            format!("{} free + {} cached < {} requested: {} short", b(free), b(cached), b(requested), b(*gap))
        }
        Headline::CardFull { .. } | Headline::CacheSmaller { .. } => format!(
            "{} free + {} cached ≥ {} requested only together, leaving {}: the cache alone could not serve it",
            b(free),
            b(cached),
            b(requested),
            b(sum.saturating_sub(requested))
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
