//! PyTorch caching-allocator OOMs: the figures derived once ([`Facts`]),
//! the memory on the card outside this process's allocator ([`Outside`]),
//! then the rules of the module doc of [`crate::classify`] in order, each a
//! small function that returns a [`Ruling`] (data) or nothing. The main
//! cause, the runner-up and the contributors come from the rulings that
//! hold and the figures ([`causes`]); sentences are rendered from the data
//! in [`super::sentences`].
//!
//! A message with figures missing (cut, trimmed when pasted) is completed
//! ([`completions`]): each missing figure takes the value an OOM most often
//! has (no free memory, no cache, nothing outside the job beyond what is
//! printed) and, in turn, the other end of the range the printed figures
//! allow; the verdict is the typical completion's, and a missing figure
//! whose other value changes the cause is named with the cause it would
//! give (the runner-up).

use super::fixes;
use super::sentences::{Headline, Note};
use super::{
    fig, Cause, Figure, Missing, OomClass, RunnerUp, Verdict, CONTEXT_ALLOWANCE, CONTRIBUTOR_MIN_SHARE, DRIVER_PAGE,
    EFFECTIVELY_FULL_SHARE, FRAG_MIN_CARD_SHARE, FRAG_MIN_SHARE, INFERRED_OTHER_MIN_SHARE, OTHER_PROCESS_MIN,
    OWN_OUTSIDE_FACTOR, SELF_PID_SLACK,
};
use crate::classify::{b, Fix};
use crate::nvidia_smi::NvidiaSmi;
use crate::oom::{Activity, Context, Engine, EngineSeen, ProcessUse, TorchEra, TorchOom};
use crate::size::Size;
use vramfit_core::units::{GIB, MIB};

/// A PyTorch message with every figure the rules read: the printed ones,
/// and for a missing one the value a completion assumes (its text says so).
pub(crate) struct Full<'a> {
    pub t: &'a TorchOom,
    pub total: Size,
    pub free: Size,
    pub allocated: Size,
    pub reserved: Option<Size>,
    pub unallocated: Option<Size>,
    pub era: TorchEra,
}

impl Full<'_> {
    fn reserved_bytes(&self) -> u64 {
        match (&self.reserved, &self.unallocated) {
            (Some(r), _) => r.bytes,
            (None, Some(u)) => self.allocated.bytes.saturating_add(u.bytes),
            (None, None) => self.allocated.bytes,
        }
    }
    fn unallocated_bytes(&self) -> u64 {
        match (&self.unallocated, &self.reserved) {
            (Some(u), _) => u.bytes,
            (None, Some(r)) => r.bytes.saturating_sub(self.allocated.bytes),
            (None, None) => 0,
        }
    }
    fn unallocated_tolerance(&self) -> u64 {
        match (&self.unallocated, &self.reserved) {
            (Some(u), _) => u.tolerance,
            (None, Some(r)) => r.tolerance.saturating_add(self.allocated.tolerance),
            (None, None) => 0,
        }
    }
}

/// The figures of one OOM, derived once. `total` is `None` where the
/// source does not say (a snapshot's trace entry).
pub(crate) struct Facts<'a> {
    pub requested: Size,
    pub total: Option<Size>,
    pub free: Size,
    pub allocated: Size,
    /// reserved by the caching allocator (allocated + its cache)
    pub reserved: u64,
    /// reserved but not handed to a tensor (the cache)
    pub unallocated: u64,
    /// print rounding of `unallocated`
    pub unallocated_tol: u64,
    /// `set_per_process_memory_fraction` cap
    pub allowed: Option<Size>,
    pub era: TorchEra,
    pub message: Option<&'a Full<'a>>,
}

impl<'a> Facts<'a> {
    pub fn of_message(t: &'a Full<'a>) -> Self {
        Facts {
            requested: t.t.requested.clone(),
            total: Some(t.total.clone()),
            free: t.free.clone(),
            allocated: t.allocated.clone(),
            reserved: t.reserved_bytes(),
            unallocated: t.unallocated_bytes(),
            unallocated_tol: t.unallocated_tolerance(),
            allowed: t.t.allowed.clone(),
            era: t.era,
            message: Some(t),
        }
    }
    /// The allocator's state at an OOM of a memory snapshot's trace: exact
    /// figures (no print rounding), no total and no process figures.
    pub fn of_allocator_state(requested: u64, free: u64, allocated: u64, reserved: u64) -> Self {
        let exact = |bytes: u64| Size { bytes, tolerance: 0, text: b(bytes) };
        Facts {
            requested: exact(requested),
            total: None,
            free: exact(free),
            allocated: exact(allocated),
            reserved,
            unallocated: reserved.saturating_sub(allocated),
            unallocated_tol: 0,
            allowed: None,
            era: TorchEra::Sentences,
            message: None,
        }
    }
    fn r(&self) -> u64 {
        self.requested.bytes
    }
    fn free_b(&self) -> u64 {
        self.free.bytes
    }
    fn total_b(&self) -> Option<u64> {
        self.total.as_ref().map(|t| t.bytes)
    }
    /// Print rounding of free + cache.
    fn tol(&self) -> u64 {
        self.free.tolerance.saturating_add(self.unallocated_tol)
    }
    /// The cache is a material share of what PyTorch reserved (a few MiB of
    /// scraps on a full card are not a cause) and of the card
    /// ([`FRAG_MIN_CARD_SHARE`]: recovering less than that buys no
    /// meaningful room; the next allocation fails).
    fn cache_material(&self) -> bool {
        let of_card = self.total_b().is_none_or(|t| self.unallocated as f64 >= FRAG_MIN_CARD_SHARE * t as f64);
        self.unallocated > 0 && self.unallocated as f64 >= FRAG_MIN_SHARE * self.reserved as f64 && of_card
    }
    /// Free memory above the request by less than this is not room
    /// ([`EFFECTIVELY_FULL_SHARE`]). ≤1.4 printed the request before
    /// PyTorch's segment rounding, which then also has to fit.
    fn full_margin(&self) -> u64 {
        let rounding = match self.era {
            TorchEra::Cached => segment_size(self.r()).saturating_sub(self.r()),
            _ => 0,
        };
        let share = self.total_b().map(|t| (t as f64 * EFFECTIVELY_FULL_SHARE) as u64).unwrap_or(0);
        rounding.saturating_add(DRIVER_PAGE).max(share)
    }
}

/// The segment PyTorch asks cudaMalloc for to serve a request of `size`
/// (CUDACachingAllocator.cpp `get_allocation_size`: ≤ 1 MiB → 2 MiB
/// `kSmallBuffer`; < 10 MiB → 20 MiB `kLargeBuffer`; else rounded up to
/// 2 MiB `kRoundLarge`). ≥1.5 messages print this size already.
pub fn segment_size(size: u64) -> u64 {
    if size <= MIB {
        2 * MIB
    } else if size < 10 * MIB {
        20 * MIB
    } else {
        size.div_ceil(2 * MIB).saturating_mul(2 * MIB)
    }
}

/// Memory on the card outside this process's allocator, as far as the
/// message (and a pasted nvidia-smi table, and the engine's own log lines)
/// tells: attributed to other users of the card (`other`), with the notes
/// and figures that show how.
pub(crate) struct Outside {
    pub other: u64,
    /// `other` comes from listed processes (NVML in the message, or an
    /// nvidia-smi table), not only from arithmetic
    pub listed: bool,
    /// a listed PID taken to be this process (container PID namespace)
    pub presumed_self: Option<u64>,
    /// this process's memory outside the allocator (context, NCCL, cuBLAS), when stated
    pub non_pytorch: u64,
    /// whose the unlisted memory is cannot be told from the figures: `other`
    /// holds it, and the verdict without it is the runner-up
    pub uncertain: bool,
    pub notes: Vec<Note>,
    pub figures: Vec<Figure>,
}

impl Outside {
    fn none() -> Self {
        Outside {
            other: 0,
            listed: false,
            presumed_self: None,
            non_pytorch: 0,
            uncertain: false,
            notes: Vec::new(),
            figures: Vec::new(),
        }
    }
}

/// ≥2.1 messages list processes when NVML answered.
fn has_process_figures(t: &Full) -> bool {
    t.era == TorchEra::Sentences && (t.t.this_process.is_some() || !t.t.processes.is_empty())
}

/// The listed process most likely to be this one seen from a container:
/// between PyTorch's reserved bytes and [`SELF_PID_SLACK`] above them (a
/// CUDA context, NCCL buffers and library workspaces on top of the cache).
fn presumed_self(processes: &[ProcessUse], reserved: u64) -> Option<&ProcessUse> {
    processes
        .iter()
        .filter(|p| p.used.hi() >= reserved && p.used.bytes - reserved.min(p.used.bytes) <= SELF_PID_SLACK)
        .min_by_key(|p| p.used.bytes.saturating_sub(reserved))
}

/// "This process" as NVML reported it, when usable (a 0 while PyTorch
/// holds memory is NVML's known reporting gap, e.g. in some containers).
fn usable_this_process(t: &Full, reserved: u64, out: &mut Outside) -> Option<u64> {
    let this = t.t.this_process.as_ref()?;
    if this.bytes == 0 && reserved > 0 {
        out.notes.push(Note::NvmlZeroThisProcess { reserved });
        return None;
    }
    let non_pytorch = this.bytes.saturating_sub(reserved);
    out.non_pytorch = non_pytorch;
    out.figures.push(fig("this_process", this.bytes));
    out.figures.push(fig("this_process_non_pytorch", non_pytorch));
    out.notes.push(Note::ThisProcess { this: this.text.clone(), non_pytorch });
    Some(this.bytes)
}

/// What this job itself holds outside PyTorch's allocator on one GPU, by
/// the engine that runs it: the engine's own logged figure when its log is
/// in the text, else what that engine is known to hold. Sources:
/// vramfit_core's constants (one source of truth): a CUDA context of
/// [`vramfit_core::runtime::DEFAULT_CUDA_CONTEXT`], vLLM's measured
/// non-torch memory [`vramfit_core::workload::engine::VLLM_NON_TORCH`] (PR
/// vllm#10511), NCCL communicators
/// ([`vramfit_core::runtime::nccl_communicator_bytes`]); without an engine,
/// the [`CONTEXT_ALLOWANCE`] a context and library handles take.
pub fn own_outside(engine: Option<&EngineSeen>) -> (u64, String) {
    use vramfit_core::runtime::{nccl_communicator_bytes, DEFAULT_CUDA_CONTEXT};
    use vramfit_core::workload::VLLM_NON_TORCH;
    let Some(e) = engine else {
        return (CONTEXT_ALLOWANCE, format!("a CUDA context and library handles (allowance {})", b(CONTEXT_ALLOWANCE)));
    };
    let graphs = e.cuda_graph_bytes.unwrap_or(0);
    match e.engine {
        Engine::Vllm => {
            let (base, src) = match e.non_torch_bytes {
                Some(n) => (n.max(DEFAULT_CUDA_CONTEXT), format!("its logged non_torch_memory {}", b(n))),
                None => {
                    (VLLM_NON_TORCH, format!("vLLM's measured non-torch memory {} (vllm#10511)", b(VLLM_NON_TORCH)))
                }
            };
            let g = if graphs > 0 { format!(" + CUDA graphs {} (logged)", b(graphs)) } else { String::new() };
            (base.saturating_add(graphs), format!("{}: {src}{g}", e.engine.name()))
        }
        Engine::Sglang => {
            let g = if graphs > 0 { format!(" + CUDA graphs {} (logged)", b(graphs)) } else { String::new() };
            (
                DEFAULT_CUDA_CONTEXT.saturating_add(nccl_communicator_bytes(2)).saturating_add(graphs),
                format!("{}: a CUDA context + NCCL{g}", e.engine.name()),
            )
        }
        Engine::Distributed => (
            DEFAULT_CUDA_CONTEXT.saturating_add(nccl_communicator_bytes(3)),
            format!("{}: a CUDA context + one NCCL communicator ({})", e.engine.name(), b(nccl_communicator_bytes(3))),
        ),
    }
}

/// Memory used on the card but by no process the message lists, and
/// whose it is: this job's own non-PyTorch memory when it is within
/// [`OWN_OUTSIDE_FACTOR`] × what the job's engine holds outside PyTorch;
/// beyond that, another user of the card — certain when the engine is
/// known (its own share is accounted for), uncertain without one (an
/// extension or engine the log does not name may hold it).
fn attribute_unlisted(unlisted: u64, engine: Option<&EngineSeen>, nvml_gap: bool, out: &mut Outside) -> u64 {
    let (own, why) = own_outside(engine);
    if unlisted <= own {
        if engine.is_some() && unlisted > 0 {
            out.notes.push(Note::OwnOutside { bytes: unlisted, own, why, factor: None });
        }
        return 0;
    }
    let limit = (own as f64 * OWN_OUTSIDE_FACTOR) as u64;
    if engine.is_some() && unlisted <= limit {
        out.notes.push(Note::OwnOutside { bytes: unlisted, own, why, factor: Some(OWN_OUTSIDE_FACTOR) });
        return 0;
    }
    let other = unlisted - own;
    if engine.is_none() {
        out.uncertain = true;
        out.notes.push(Note::CannotTellWhose { bytes: unlisted, own, nvml_gap });
    } else {
        out.notes.push(Note::BeyondOwn { bytes: unlisted, own, why, other });
    }
    other
}

/// From the process figures of a ≥2.1 message (NVML answered). Without a
/// usable "this process" figure (absent, or NVML's 0), a listed PID that
/// matches PyTorch's reserved bytes is this process seen from a container.
fn outside_listed(t: &Full, reserved: u64, engine: Option<&EngineSeen>) -> Outside {
    let mut out = Outside::none();
    let this = usable_this_process(t, reserved, &mut out);
    let nvml_gap = this.is_none() && t.t.this_process.is_some();
    if this.is_none() {
        if let Some(p) = presumed_self(&t.t.processes, reserved) {
            out.presumed_self = Some(p.pid);
            out.non_pytorch = p.used.bytes.saturating_sub(reserved);
            out.notes.push(Note::PresumedSelf {
                pid: p.pid,
                used: p.used.text.clone(),
                slack: SELF_PID_SLACK,
                reserved,
            });
        } else if let [p] = t.t.processes.as_slice() {
            // NVML lists every compute process on the GPU, this one
            // included (by its host PID): one listed process while this
            // process is not named is this process, whatever it holds
            // outside PyTorch (vLLM workers hold several GiB there:
            // vllm#27508, vllm#15039)
            if p.used.hi() >= reserved {
                out.presumed_self = Some(p.pid);
                out.non_pytorch = p.used.bytes.saturating_sub(reserved);
                out.notes.push(Note::OnlyProcess { pid: p.pid, used: p.used.text.clone(), reserved });
            }
        }
    }
    let presumed = out.presumed_self;
    let others = || t.t.processes.iter().filter(move |p| Some(p.pid) != presumed);
    let mut other = others().fold(0u64, |a, p| a.saturating_add(p.used.bytes));
    out.listed = other > 0;
    if !t.t.processes.is_empty() {
        out.figures.push(fig("other_processes", other));
    }
    let this_b = this.unwrap_or(0).max(reserved);
    let listed_self =
        presumed.and_then(|pid| t.t.processes.iter().find(|p| p.pid == pid)).map(|p| p.used.bytes).unwrap_or(0);
    let unaccounted =
        t.total.bytes.saturating_sub(t.free.bytes).saturating_sub(this_b.max(listed_self)).saturating_sub(other);
    if unaccounted > 0 && (this.is_none() && listed_self == 0) {
        // nothing states this job's own non-PyTorch memory: part of the
        // unlisted memory is the job's (its context, an engine's buffers)
        out.figures.push(fig("unaccounted", unaccounted));
        out.notes.push(Note::Unaccounted { bytes: unaccounted });
        let o = attribute_unlisted(unaccounted, engine, nvml_gap, &mut out);
        if other == 0 {
            other = o;
        }
    } else if unaccounted > CONTEXT_ALLOWANCE {
        // this job's own memory is stated: the rest is a graphics process,
        // another container's process or an engine sharing the card
        out.figures.push(fig("unaccounted", unaccounted));
        out.notes.push(Note::Unaccounted { bytes: unaccounted });
        if other == 0 {
            other = unaccounted;
        }
    }
    let list: Vec<(u64, String)> = others().map(|p| (p.pid, p.used.text.clone())).collect();
    if !list.is_empty() {
        out.notes.push(Note::OtherProcesses { other, list });
    }
    out.other = other;
    out
}

/// Without process figures: what is neither free nor reserved, beyond what
/// the job itself holds outside PyTorch, belongs to something else.
fn outside_inferred(f: &Facts, total: u64, engine: Option<&EngineSeen>) -> Outside {
    let outside = total.saturating_sub(f.free_b()).saturating_sub(f.reserved);
    let mut out = Outside::none();
    out.notes.push(Note::OutsideAllocator { bytes: outside, no_nvml: f.era == TorchEra::Sentences });
    out.figures.push(fig("outside_allocator", outside));
    let (own, _) = own_outside(engine);
    if outside > own {
        out.other = attribute_unlisted(outside, engine, false, &mut out);
        if !out.uncertain && out.other > 0 && engine.is_none() {
            out.notes.push(Note::BeyondContext { allowance: own, other: out.other });
        }
    } else if engine.is_some() {
        attribute_unlisted(outside, engine, false, &mut out);
    }
    out
}

/// An nvidia-smi table in the log names the processes on this GPU: one
/// matching PyTorch's reserved bytes (as [`presumed_self`]) is this
/// process; the rest are other users of the card, by PID and name.
fn named_by_nvidia_smi(f: &Facts, smi: &NvidiaSmi, device: u32, out: &mut Outside) {
    let rows: Vec<_> = smi.processes_on(device).collect();
    if rows.is_empty() {
        if let Some(g) = smi.gpu(device) {
            out.notes.push(Note::NvidiaSmiGpu { line: smi.line, gpu: device, used: g.used, total: g.total });
        }
        return;
    }
    let own = rows
        .iter()
        .filter(|p| p.used >= f.reserved && p.used - f.reserved <= SELF_PID_SLACK)
        .min_by_key(|p| p.used - f.reserved)
        .map(|p| p.pid);
    let others: Vec<(u64, String, u64)> =
        rows.iter().filter(|p| Some(p.pid) != own).map(|p| (p.pid, p.name.clone(), p.used)).collect();
    let sum = others.iter().fold(0u64, |a, p| a.saturating_add(p.2));
    out.notes.push(Note::NvidiaSmiProcesses { line: smi.line, gpu: device, own, others, sum });
    if sum >= OTHER_PROCESS_MIN {
        out.figures.push(fig("nvidia_smi_other_processes", sum));
        out.other = out.other.max(sum);
        out.listed = true;
        out.uncertain = false;
    }
}

fn outside(f: &Facts, smi: Option<&NvidiaSmi>, engine: Option<&EngineSeen>) -> Outside {
    match (f.message, &f.total) {
        (Some(t), _) if has_process_figures(t) => outside_listed(t, f.reserved, engine),
        (message, Some(total)) => {
            let mut out = outside_inferred(f, total.bytes, engine);
            if let (Some(t), Some(smi)) = (message, smi) {
                named_by_nvidia_smi(f, smi, t.t.device.unwrap_or(0), &mut out);
            }
            out
        }
        (_, None) => Outside::none(),
    }
}

/// The other users of the card are material: any listed process of
/// [`OTHER_PROCESS_MIN`] or more; memory only inferred needs
/// [`INFERRED_OTHER_MIN_SHARE`] of the card as well.
fn other_material(f: &Facts, out: &Outside) -> bool {
    let share = f.total_b().map(|t| (t as f64 * INFERRED_OTHER_MIN_SHARE) as u64).unwrap_or(0);
    out.other >= OTHER_PROCESS_MIN && (out.listed || out.other >= share)
}

/// What a rule decided: the class, the headline and the reasoning as data,
/// the gap, the fixes; `main` when the main cause is not the class's usual
/// consumer (a memory-fraction cap).
pub(crate) struct Ruling {
    pub class: OomClass,
    pub headline: Headline,
    pub notes: Vec<Note>,
    pub figures: Vec<Figure>,
    pub gap: Option<u64>,
    pub fixes: Vec<Fix>,
    pub main: Option<Cause>,
    /// the figures cannot be trusted or one figure decides: no contributors
    pub decisive: bool,
    /// the names (in the verdict's `figures`) of the figures that decided it
    pub decided_by: Vec<&'static str>,
}

impl Ruling {
    fn new(class: OomClass, headline: Headline, notes: Vec<Note>, gap: Option<u64>, fixes: Vec<Fix>) -> Self {
        Ruling {
            class,
            headline,
            notes,
            figures: Vec::new(),
            gap,
            fixes,
            main: None,
            decisive: false,
            decided_by: Vec::new(),
        }
    }
    fn decisive(mut self) -> Self {
        self.decisive = true;
        self
    }
    fn by(mut self, names: &[&'static str]) -> Self {
        self.decided_by = names.to_vec();
        self
    }
}

/// The pairs of figures of a PyTorch message that cannot both be true,
/// each stated with the printed numbers (free > total is handled apart).
/// Compared with the print rounding on each side (a figure's lowest true
/// value against the other's highest).
pub fn contradictions(t: &TorchOom) -> Vec<String> {
    completions(t).into_iter().next().map(|c| contradictions_full(&c.full)).unwrap_or_default()
}

fn contradictions_full(t: &Full) -> Vec<String> {
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
    if let Some(p) = &t.t.this_process {
        if p.lo() > total.hi() {
            out.push(format!("this process has {} > {} total capacity", p.text, total.text));
        }
    }
    for p in &t.t.processes {
        if p.used.lo() > total.hi() {
            out.push(format!("process {} has {} > {} total capacity", p.pid, p.used.text, total.text));
        }
    }
    out
}

// ------------------------------------------------------------------ rules

/// Rule 0: free above total: the driver misreports the total (APUs).
fn free_above_total(f: &Facts) -> Option<Ruling> {
    let total = f.total.as_ref()?;
    (f.free.lo() > total.hi()).then(|| {
        Ruling::new(
            OomClass::Unexplained,
            Headline::FreeAboveTotal,
            vec![Note::FreeAboveTotal { free: f.free.text.clone(), total: total.text.clone() }],
            None,
            fixes::free_above_total(),
        )
        .decisive()
        .by(&["free", "total"])
    })
}

/// Rule 0: one request larger than the card decides on its own, even when
/// other figures contradict each other (Windows' sysmem fallback lets
/// allocated exceed the total).
fn request_exceeds_card(f: &Facts) -> Option<Ruling> {
    let total = f.total.as_ref()?;
    if f.requested.lo() <= total.hi() {
        return None;
    }
    let mut notes = vec![Note::RequestAboveCard { requested: f.requested.text.clone(), total: total.text.clone() }];
    let contradicting = f.message.map(contradictions_full).unwrap_or_default();
    if !contradicting.is_empty() {
        notes.push(Note::ContradictionsBeside { list: contradicting });
    }
    let mut r = Ruling::new(
        OomClass::RequestExceedsCard,
        Headline::RequestExceedsCard { requested: f.requested.text.clone(), total: total.text.clone() },
        notes,
        Some(f.r() - total.bytes),
        fixes::request_exceeds_card(),
    );
    r.main = Some(Cause::new(OomClass::RequestExceedsCard, "the request", Some(f.r()), Some(total.bytes)));
    Some(r.decisive().by(&["requested", "total"]))
}

/// Rule 0: other figures that cannot all be true.
fn contradictory(f: &Facts) -> Option<Ruling> {
    let list = contradictions_full(f.message?);
    if list.is_empty() {
        return None;
    }
    let mut notes = vec![Note::Contradictions { list: list.clone() }];
    if list.iter().any(|c| c.contains("total capacity")) {
        notes.push(Note::WindowsSysmemFallback);
    }
    let first = list.into_iter().next().unwrap_or_default();
    let r = Ruling::new(OomClass::Unexplained, Headline::Contradiction { first }, notes, None, fixes::contradictory());
    Some(r.decisive().by(&["total", "free", "allocated", "reserved"]))
}

/// Rule 1: the device had room beyond the effectively-full margin: a
/// memory-fraction cap, or unexplained.
fn room_on_device(f: &Facts) -> Option<Ruling> {
    if f.free.lo() < f.requested.hi().saturating_add(f.full_margin()) {
        return None;
    }
    if let Some(cap) = &f.allowed {
        let need = f.allocated.bytes.saturating_add(f.unallocated).saturating_add(f.r());
        let slack = cap.tolerance.saturating_add(f.allocated.tolerance).saturating_add(f.unallocated_tol);
        if need.saturating_add(slack) >= cap.bytes {
            let mut r = Ruling::new(
                OomClass::GenuineShortage,
                Headline::CapReached { cap: cap.bytes },
                vec![Note::CapReached { cap: cap.bytes, reserved: f.reserved, requested: f.requested.text.clone() }],
                Some(need.saturating_sub(cap.bytes)),
                fixes::cap(),
            );
            r.main =
                Some(Cause::new(OomClass::GenuineShortage, "the memory-fraction cap", Some(cap.bytes), f.total_b()));
            return Some(r.decisive().by(&["allowed", "reserved", "requested"]));
        }
    }
    let r = Ruling::new(
        OomClass::Unexplained,
        Headline::FreeCoversRequest,
        vec![Note::FreeCoversRequest { free: f.free.text.clone(), requested: f.requested.text.clone() }],
        None,
        fixes::free_covers_request(),
    );
    Some(r.decisive().by(&["free", "requested"]))
}

/// `R ≤ F < R + M`: the free figure covers the request but leaves no room.
fn effectively_full_note(f: &Facts) -> Option<Note> {
    let margin = f.full_margin();
    (f.free.hi() >= f.requested.lo() && f.free.lo() < f.requested.hi().saturating_add(margin)).then(|| {
        Note::EffectivelyFull {
            free: f.free.text.clone(),
            requested: f.requested.text.clone(),
            left: f.free_b().saturating_sub(f.r()),
            margin,
        }
    })
}

/// Several small listed processes: usually other ranks' stray contexts on
/// GPU 0 (a context with NCCL's buffers and library workspaces reaches
/// 1–2 GiB, e.g. 15 workers × 1.19 GiB in rwth-i6/returnn#1469).
fn small_many(f: &Facts, out: &Outside) -> bool {
    f.message.is_some_and(|t| {
        t.t.processes.len() >= 2
            && t.t
                .processes
                .iter()
                .filter(|p| Some(p.pid) != out.presumed_self)
                .all(|p| p.used.bytes <= STRAY_CONTEXT_MAX)
    })
}

/// The largest process taken for a stray context of another rank.
const STRAY_CONTEXT_MAX: u64 = 2 * CONTEXT_ALLOWANCE;

fn other_process_ruling(f: &Facts, out: &Outside, note: Note) -> Ruling {
    let device = f.message.and_then(|t| t.t.device);
    Ruling::new(
        OomClass::OtherProcess,
        Headline::HeldElsewhere { other: out.other, device },
        vec![note],
        None,
        fixes::other_process(small_many(f, out)),
    )
}

/// Rule 2: other users of the card hold more than this job holds and asks
/// for: they are the main cause, even when the cache could serve this
/// request (fragmentation is then a minor contributor).
fn other_holds_most(f: &Facts, out: &Outside) -> Option<Ruling> {
    let job = f.reserved.saturating_add(f.r());
    if !other_material(f, out) || out.other <= job {
        return None;
    }
    let share = f.total_b().map(|t| out.other as f64 * 100.0 / t.max(1) as f64);
    let by = if out.listed { "other_processes" } else { "outside_allocator" };
    Some(other_process_ruling(f, out, Note::OtherHoldsMost { other: out.other, job, share }).by(&[
        by,
        "reserved",
        "requested",
    ]))
}

/// Rule 3: the cache alone could serve the request: fragmentation.
fn cache_serves_request(f: &Facts, out: &Outside) -> Option<Ruling> {
    let (u, r) = (f.unallocated, f.r());
    let reach = f.free_b().saturating_add(u).saturating_add(f.tol());
    if u.saturating_add(f.unallocated_tol) < r || reach < r || !f.cache_material() {
        return None;
    }
    Some(fragmentation_ruling(f, out).by(&["reserved_unallocated", "requested", "total"]))
}

fn fragmentation_ruling(f: &Facts, out: &Outside) -> Ruling {
    let u = f.unallocated;
    let mut notes = vec![Note::CacheSplit {
        free: f.free.text.clone(),
        cached: u,
        sum: f.free_b().saturating_add(u),
        requested: f.requested.text.clone(),
    }];
    if u >= f.r() {
        notes.push(Note::CacheAloneLarger { cached: u });
    }
    if out.other >= OTHER_PROCESS_MIN {
        notes.push(Note::OtherMakesWorse { other: out.other });
    }
    Ruling::new(
        OomClass::Fragmentation,
        Headline::CacheUnusable { cached: u, requested: f.requested.text.clone() },
        notes,
        None,
        fixes::fragmentation(f.era),
    )
}

/// Rule 4: memory held elsewhere made the difference: without it the
/// request would fit (`F + usable U < R ≤ F + U + O`).
fn other_process(f: &Facts, out: &Outside) -> Option<Ruling> {
    if !other_material(f, out) {
        return None;
    }
    // scraps of cache are not room: neither their bytes nor their rounding count
    let (usable_cache, tol) = if f.cache_material() { (f.unallocated, f.tol()) } else { (0, f.free.tolerance) };
    let own = f.free_b().saturating_add(usable_cache).saturating_add(tol);
    let reach = f.free_b().saturating_add(f.unallocated).saturating_add(out.other).saturating_add(f.tol());
    // the other memory made the difference: without it the request would
    // fit, with what this job holds it does not
    let needed = own < f.r() && reach >= f.r();
    if !needed {
        return None;
    }
    let note = Note::OtherNeeded {
        free: f.free.text.clone(),
        cached: f.unallocated,
        other: out.other,
        requested: f.requested.text.clone(),
    };
    let by = if out.listed { "other_processes" } else { "outside_allocator" };
    Some(other_process_ruling(f, out, note).by(&["free", "reserved_unallocated", by, "requested"]))
}

/// Rule 5: only free memory and the cache together cover the request (the
/// cache is smaller than the request): the card is full of this job's
/// tensors, a genuine shortage; the split cache contributes, and expandable
/// segments are still the cheapest thing to try (a segment whose free tail
/// meets newly mapped pages can serve it). Fragmentation needs a cache
/// that could serve the request alone (rule 3).
fn cache_and_free(f: &Facts, activity: Option<Activity>) -> Option<Ruling> {
    let together = f.free_b().saturating_add(f.unallocated);
    if together.saturating_add(f.tol()) < f.r() || !f.cache_material() {
        return None;
    }
    let left = together.saturating_sub(f.r());
    let need = f.allocated.bytes.saturating_add(f.r());
    let share = f.total_b().map(|t| need as f64 * 100.0 / t.max(1) as f64);
    let note = Note::FullWithCache {
        free: f.free.text.clone(),
        cached: f.unallocated,
        requested: f.requested.text.clone(),
        left,
        margin: f.full_margin(),
    };
    let mut all = fixes::fragmentation(f.era);
    all.extend(fixes::shortage(activity));
    all.sort_by_key(|x| x.cost);
    let headline = if left >= f.full_margin() {
        Headline::CacheSmaller { cached: f.unallocated, requested: f.requested.text.clone() }
    } else {
        Headline::CardFull { need, share }
    };
    Some(Ruling::new(OomClass::GenuineShortage, headline, vec![note], None, all).by(&[
        "free",
        "reserved_unallocated",
        "requested",
    ]))
}

/// Rule 6: genuine shortage: what is missing even if the cache were reusable.
fn shortage(f: &Facts, activity: Option<Activity>) -> Ruling {
    let (u, a) = (f.unallocated, f.allocated.bytes);
    let gap = f.r().saturating_sub(f.free_b().saturating_add(u));
    if gap == 0 {
        let total = f.total_b().unwrap_or(0);
        let share = if total > 0 { a as f64 * 100.0 / total as f64 } else { 0.0 };
        let of_reserved = if f.reserved > 0 { u as f64 * 100.0 / f.reserved as f64 } else { 0.0 };
        return Ruling::new(
            OomClass::GenuineShortage,
            Headline::LiveTensorsFill { share },
            vec![Note::CacheIsScraps { cached: u, of_reserved, allocated: f.allocated.text.clone(), share }],
            None,
            fixes::shortage(activity),
        )
        .by(&["allocated", "reserved_unallocated", "total"]);
    }
    let mut notes = vec![Note::Gap {
        free: f.free.text.clone(),
        cached: u,
        sum: f.free_b().saturating_add(u),
        requested: f.requested.text.clone(),
        gap,
        allocated: a,
    }];
    if u >= GIB {
        notes.push(Note::ExpandableRecoversPart { cached: u, gap });
    }
    let mut r =
        Ruling::new(OomClass::GenuineShortage, Headline::Gap { gap }, notes, Some(gap), fixes::shortage(activity));
    r.figures.push(fig("gap", gap));
    r.by(&["free", "reserved_unallocated", "requested", "gap"])
}

/// The rules in order; the first that holds decides.
pub(crate) fn rule(f: &Facts, out: &Outside, activity: Option<Activity>) -> Ruling {
    rules(f, out, activity).into_iter().next().unwrap_or_else(|| shortage(f, activity))
}

/// Every rule that holds, in order (the last is always the shortage): the
/// first decides, the next of another class is the runner-up.
fn rules(f: &Facts, out: &Outside, activity: Option<Activity>) -> Vec<Ruling> {
    let first = free_above_total(f).or_else(|| request_exceeds_card(f)).or_else(|| contradictory(f));
    if let Some(r) = first {
        return vec![r];
    }
    let mut all: Vec<Ruling> = [
        room_on_device(f),
        other_holds_most(f, out),
        cache_serves_request(f, out),
        other_process(f, out),
        cache_and_free(f, activity),
    ]
    .into_iter()
    .flatten()
    .collect();
    all.push(shortage(f, activity));
    all
}

/// What a shortage's bytes are.
const SHORTAGE_WHAT: &str = "live tensors + the request";

/// The memory consumers that hold, as causes: live tensors, the cache
/// (when material), other users of the card (when material).
fn consumers(f: &Facts, out: &Outside) -> Vec<Cause> {
    let total = f.total_b();
    let mut all = Vec::new();
    // the job's tensors at the failure: what is live plus what it asked for
    let need = f.allocated.bytes.saturating_add(f.r());
    let live_min = total.map(|t| (t as f64 * CONTRIBUTOR_MIN_SHARE) as u64).unwrap_or(0);
    if need >= live_min && need > 0 {
        all.push(Cause::new(OomClass::GenuineShortage, SHORTAGE_WHAT, Some(need), total));
    }
    if f.cache_material() {
        all.push(Cause::new(OomClass::Fragmentation, "cached but unallocated", Some(f.unallocated), total));
    }
    if other_material(f, out) {
        all.push(Cause::new(OomClass::OtherProcess, "other users of the card", Some(out.other), total));
    }
    all
}

/// The main cause and the other contributors of a ruling, largest first.
pub(crate) fn causes(f: &Facts, out: &Outside, ruling: &Ruling) -> (Cause, Vec<Cause>) {
    let all = consumers(f, out);
    let main = ruling.main.clone().unwrap_or_else(|| {
        all.iter().find(|c| c.class == ruling.class).cloned().unwrap_or_else(|| {
            let what = match ruling.class {
                OomClass::Fragmentation => "cached but unallocated",
                OomClass::OtherProcess => "other users of the card",
                OomClass::GenuineShortage => SHORTAGE_WHAT,
                _ => "no cause these figures can show",
            };
            let bytes = match ruling.class {
                OomClass::Fragmentation => Some(f.unallocated),
                OomClass::OtherProcess => Some(out.other),
                OomClass::GenuineShortage => Some(f.allocated.bytes.saturating_add(f.r())),
                _ => None,
            };
            Cause::new(ruling.class, what, bytes, f.total_b())
        })
    });
    if ruling.decisive {
        return (main, Vec::new());
    }
    let mut rest: Vec<Cause> = all.into_iter().filter(|c| c.class != main.class).collect();
    rest.sort_by_key(|c| std::cmp::Reverse(c.bytes.unwrap_or(0)));
    (main, rest)
}

/// One completion of a message: the figures, and the values assumed for
/// the missing ones (by name).
pub(crate) struct Completion<'a> {
    pub full: Full<'a>,
    pub assumed: Vec<(&'static str, u64)>,
}

/// Which missing figures a completion takes at the other end of their range.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flip {
    None,
    Free,
    Total,
    Cache,
}

fn assumed_size(bytes: u64) -> Size {
    Size { bytes, tolerance: 0, text: format!("{} (assumed)", b(bytes)) }
}

/// The listed processes that are not this one (the one matching PyTorch's
/// holdings is taken out, as [`presumed_self`] does).
fn listed_others(t: &TorchOom, reserved_hint: u64) -> u64 {
    let all = t.processes.iter().fold(0u64, |a, p| a.saturating_add(p.used.bytes));
    let usable_this = t.this_process.as_ref().is_some_and(|p| p.bytes > 0);
    if usable_this {
        return all;
    }
    let own = presumed_self(&t.processes, reserved_hint).map(|p| p.used.bytes).unwrap_or(0);
    all.saturating_sub(own)
}

/// The message completed: every missing figure at its typical value, or
/// (`flip`) one group at the other end of what the printed figures allow.
fn complete(t: &TorchOom, flip: Flip) -> Completion<'_> {
    let r = t.requested.bytes;
    let mut assumed = Vec::new();
    let this_usable = t.this_process.as_ref().map(|p| p.bytes).filter(|&b| b > 0);
    let a_known = t.allocated.as_ref().map(|s| s.bytes);
    let u_known = t.unallocated.as_ref().map(|s| s.bytes);
    let res_known = t.reserved.as_ref().map(|s| s.bytes);
    let cache_known = t.reserved.is_some() || t.unallocated.is_some();
    // the most PyTorch can hold: this process's memory, else what is neither free nor listed elsewhere
    let others = listed_others(t, res_known.or(a_known).unwrap_or(0));
    let held_max = this_usable.or_else(|| {
        // a missing free figure is taken at its typical value (0) here
        let (tt, ff) = (t.total.as_ref()?.bytes, t.free.as_ref().map(|f| f.bytes).unwrap_or(0));
        Some(tt.saturating_sub(ff).saturating_sub(others).saturating_sub(if t.era == TorchEra::Sentences {
            CONTEXT_ALLOWANCE
        } else {
            0
        }))
    });
    // the cache group: allocated and the cache figure
    let (allocated, reserved, unallocated) = match (a_known, cache_known) {
        (Some(_), true) => {
            (t.allocated.clone().unwrap_or_else(|| assumed_size(0)), t.reserved.clone(), t.unallocated.clone())
        }
        (a, cache) => {
            let flip = flip == Flip::Cache;
            // typical: no cache; the other end: as much cache as the holdings allow, at least the request
            let (a_v, u_v) = match (a, cache, held_max) {
                (Some(a), false, h) => {
                    let room = h.map(|h| h.saturating_sub(a)).unwrap_or(r);
                    (a, if flip { room.max(r.min(room.max(r))) } else { 0 })
                }
                (None, true, h) => {
                    let u = u_known.or_else(|| res_known.map(|x| x.saturating_sub(0))).unwrap_or(0);
                    let a = h.map(|h| h.saturating_sub(u)).unwrap_or(0);
                    (if flip { 0 } else { a }, u)
                }
                (None, false, Some(h)) => {
                    if flip {
                        let u = h.min(r.max(h / 2));
                        (h - u, u)
                    } else {
                        (h, 0)
                    }
                }
                (None, false, None) => (0, if flip { r } else { 0 }),
                (Some(a), true, _) => (a, u_known.unwrap_or(0)),
            };
            if a.is_none() {
                assumed.push(("allocated", a_v));
            }
            if !cache {
                assumed.push((if t.era == TorchEra::Sentences { "unallocated" } else { "reserved" }, u_v));
            }
            let alloc = t.allocated.clone().unwrap_or_else(|| assumed_size(a_v));
            match t.era {
                TorchEra::Sentences | TorchEra::Cached => {
                    (alloc, None, t.unallocated.clone().or_else(|| Some(assumed_size(u_v))))
                }
                _ => {
                    let res = t.reserved.clone().unwrap_or_else(|| assumed_size(a_v.saturating_add(u_v)));
                    (alloc, Some(res), None)
                }
            }
        }
    };
    let mut full =
        Full { t, total: assumed_size(0), free: assumed_size(0), allocated, reserved, unallocated, era: t.era };
    if full.era == TorchEra::Parenthesised {
        full.era = TorchEra::Reserved;
    }
    let reserved_b = full.reserved_bytes();
    // free: typical 0 (the card full); the other end just under the request
    full.free = match &t.free {
        Some(f) => f.clone(),
        None => {
            let room = t.total.as_ref().map(|tt| tt.bytes.saturating_sub(reserved_b).saturating_sub(others));
            let v = if flip == Flip::Free { r.saturating_sub(1).min(room.unwrap_or(u64::MAX)) } else { 0 };
            assumed.push(("free", v));
            assumed_size(v)
        }
    };
    // total: typical, nothing on the card beyond what is printed; the other end, half again as much
    full.total = match &t.total {
        Some(tt) => tt.clone(),
        None => {
            let held = reserved_b.max(this_usable.unwrap_or(0));
            let typical = full.free.bytes.saturating_add(held).saturating_add(others);
            let v = if flip == Flip::Total { typical.saturating_add(typical / 2) } else { typical };
            assumed.push(("total", v));
            assumed_size(v)
        }
    };
    Completion { full, assumed }
}

/// The typical completion first, then one per missing group of figures.
pub(crate) fn completions(t: &TorchOom) -> Vec<Completion<'_>> {
    let mut out = vec![complete(t, Flip::None)];
    if t.free.is_none() {
        out.push(complete(t, Flip::Free));
    }
    if t.total.is_none() {
        out.push(complete(t, Flip::Total));
    }
    if t.allocated.is_none() || !(t.reserved.is_some() || t.unallocated.is_some()) {
        out.push(complete(t, Flip::Cache));
    }
    out
}

/// The figures named in a completion's assumptions (the verdict's `figures` names).
fn figure_names(assumed: &str) -> &'static [&'static str] {
    match assumed {
        "free" => &["free"],
        "total" => &["total"],
        "allocated" => &["allocated"],
        _ => &["reserved", "reserved_unallocated"],
    }
}

/// Verdict for one PyTorch OOM.
pub fn classify_torch(t: &TorchOom, activity: Option<Activity>) -> Verdict {
    let ctx = Context { activity, ..Context::default() };
    classify_torch_in(t, &ctx)
}

/// Verdict for one PyTorch OOM in its context (traceback, nvidia-smi
/// table, the engine's log lines). A message with figures missing is
/// completed ([`completions`]); a missing figure whose other value would
/// change the cause names the cause it would give.
pub fn classify_torch_in(t: &TorchOom, ctx: &Context) -> Verdict {
    let comps = completions(t);
    let mut verdicts: Vec<(Verdict, Vec<(&'static str, u64)>)> =
        comps.iter().map(|c| (verdict_of(&c.full, ctx), c.assumed.clone())).collect();
    let (mut main, assumed) = verdicts.remove(0);
    if assumed.is_empty() {
        return main;
    }
    let mut missing: Vec<Missing> = Vec::new();
    for (name, v) in &assumed {
        missing.push(Missing { figure: name.to_string(), assumed_bytes: Some(*v), matters: false, otherwise: None });
    }
    for (alt, alt_assumed) in &verdicts {
        if alt.class == main.class {
            continue;
        }
        // the figures this completion took at the other end of their range
        for (name, v) in alt_assumed {
            if let Some(m) = missing.iter_mut().find(|m| m.figure == *name && m.assumed_bytes != Some(*v)) {
                m.matters = true;
                m.otherwise.get_or_insert((alt.class, *v));
            }
        }
        if main.runner_up.as_ref().is_none_or(|r| r.class != alt.class) && !main.runner_up_from_missing {
            main.runner_up = Some(RunnerUp {
                class: alt.class,
                what: alt.main_cause.what.clone(),
                bytes: alt.main_cause.bytes,
                share: alt.main_cause.share,
                why: "the cause if the missing figures were at the other end of their range".to_string(),
            });
            main.runner_up_from_missing = true;
        }
    }
    let names: Vec<String> = missing.iter().map(|m| m.figure.clone()).collect();
    let matters: Vec<String> = missing
        .iter()
        .filter_map(|m| m.otherwise.map(|(c, v)| format!("{} = {} would make it {}", m.figure, b(v), c.key())))
        .collect();
    main.reasoning.insert(
        0,
        Note::Missing {
            names: names.clone(),
            assumed: missing.iter().map(|m| format!("{} = {}", m.figure, b(m.assumed_bytes.unwrap_or(0)))).collect(),
            matters,
        }
        .sentence(),
    );
    // figures that were assumed are not figures of the message
    let assumed_names: Vec<&str> = assumed.iter().flat_map(|(n, _)| figure_names(n).iter().copied()).collect();
    main.figures.retain(|f| !assumed_names.contains(&f.name.as_str()));
    main.decided_by.retain(|n| !assumed_names.contains(&n.as_str()));
    main.missing = missing;
    main
}

/// The verdict of a complete message.
fn verdict_of(full: &Full, ctx: &Context) -> Verdict {
    let t = full.t;
    let f = Facts::of_message(full);
    let out = outside(&f, ctx.nvidia_smi.as_ref(), ctx.engine.as_ref());
    let activity = ctx.activity;
    let mut figures = vec![
        fig("requested", f.r()),
        fig("total", full.total.bytes),
        fig("free", f.free_b()),
        fig("allocated", f.allocated.bytes),
        fig("reserved", f.reserved),
        fig("reserved_unallocated", f.unallocated),
    ];
    figures.extend(out.figures.iter().cloned());
    if let Some(c) = &f.allowed {
        figures.push(fig("allowed", c.bytes));
    }
    let mut notes = vec![Note::Overview {
        device: t.device,
        requested: t.requested.text.clone(),
        free: full.free.text.clone(),
        total: full.total.text.clone(),
        reserved: f.reserved,
        allocated: f.allocated.bytes,
        cached: f.unallocated,
    }];
    notes.extend(out.notes.iter().cloned());
    let mut holding = rules(&f, &out, activity);
    let ruling = holding.remove(0);
    if !ruling.decisive {
        notes.extend(effectively_full_note(&f));
    }
    let (main_cause, contributors) = causes(&f, &out, &ruling);
    // the runner-up: the next rule of another class that holds; without
    // one, the largest other consumer; when the other memory's owner cannot
    // be told, the verdict without it
    let mut runner_up = None;
    if !ruling.decisive {
        let all = consumers(&f, &out);
        let cause_of = |class: OomClass| all.iter().find(|c| c.class == class).cloned();
        if out.uncertain && ruling.class == OomClass::OtherProcess {
            let mut own = Outside::none();
            own.figures = out.figures.clone();
            let alt = rule(&f, &own, activity);
            if alt.class != ruling.class {
                runner_up = Some(runner(
                    alt.class,
                    cause_of(alt.class),
                    "if the memory outside PyTorch is this job's own (it cannot be told from the figures)",
                    &f,
                ));
            }
        }
        if runner_up.is_none() {
            if let Some(next) = holding.iter().find(|r| r.class != ruling.class) {
                runner_up = Some(runner(next.class, cause_of(next.class), next_why(next.class), &f));
            }
        }
        if runner_up.is_none() {
            if let Some(c) = contributors.first() {
                runner_up = Some(runner(c.class, Some(c.clone()), "the largest other consumer of the card", &f));
            }
        }
    }
    figures.extend(ruling.figures.iter().cloned());
    notes.extend(ruling.notes.iter().cloned());
    if !contributors.is_empty() {
        notes.push(Note::Contributors { main: main_cause.clone(), rest: contributors.clone() });
    }
    // the deciding figures that the verdict lists
    let decided_by: Vec<String> =
        ruling.decided_by.iter().filter(|n| figures.iter().any(|f| f.name == **n)).map(|n| n.to_string()).collect();
    Verdict {
        class: ruling.class,
        main_cause,
        runner_up,
        runner_up_from_missing: false,
        contributors,
        headline: ruling.headline.render(),
        figures,
        decided_by,
        missing: Vec::new(),
        reasoning: notes.iter().map(Note::sentence).collect(),
        gap_bytes: ruling.gap,
        fixes: ruling.fixes,
    }
}

/// Why a rule of this class comes next.
fn next_why(class: OomClass) -> &'static str {
    match class {
        OomClass::GenuineShortage => "what remains when the deciding condition is set aside: the job's own tensors",
        OomClass::Fragmentation => "the cache could also have served the request",
        OomClass::OtherProcess => "memory held outside this job would also have made the difference",
        _ => "the next rule that holds",
    }
}

fn runner(class: OomClass, cause: Option<Cause>, why: &str, f: &Facts) -> RunnerUp {
    let c = cause.unwrap_or_else(|| {
        let (what, bytes) = match class {
            OomClass::GenuineShortage => (SHORTAGE_WHAT, Some(f.allocated.bytes.saturating_add(f.r()))),
            OomClass::Fragmentation => ("cached but unallocated", Some(f.unallocated)),
            _ => ("other users of the card", None),
        };
        Cause::new(class, what, bytes, f.total_b())
    });
    RunnerUp { class, what: c.what, bytes: c.bytes, share: c.share, why: why.to_string() }
}

/// Verdict for an OOM entry of a memory snapshot's trace (the same rules
/// as a message; one sentence, [`super::sentences::state_sentence`]).
pub fn classify_allocator_state(
    requested: u64,
    device_free: Option<u64>,
    allocated: u64,
    reserved: u64,
) -> (OomClass, String) {
    let Some(free) = device_free else {
        return (OomClass::Unknown, "the entry has no device_free".to_string());
    };
    let f = Facts::of_allocator_state(requested, free, allocated, reserved);
    let out = outside(&f, None, None);
    let ruling = rule(&f, &out, None);
    let sentence = super::sentences::state_sentence(&ruling.headline, free, f.unallocated, requested);
    (ruling.class, sentence)
}

#[cfg(test)]
mod tests {
    use super::*;
    const MIB: u64 = 1 << 20;

    #[test]
    fn snapshot_entries_use_the_message_rules() {
        // 8 MiB free + 7.5 MiB cached < 32 MiB: 16.5 MiB short (the snapshot fixture's entry)
        let (class, why) = classify_allocator_state(32 * MIB, Some(8 * MIB), 29 * MIB / 2, 22 * MIB);
        assert_eq!(class, OomClass::GenuineShortage);
        assert!(why.ends_with("16.50 MiB short"), "{why}");
        // a cache that alone could serve the request, a material share of reserved
        let (class, why) = classify_allocator_state(32 * MIB, Some(20 * MIB), 100 * MIB, 140 * MIB);
        assert_eq!(class, OomClass::Fragmentation, "{why}");
        // free + a cache smaller than the request covers it only together: the card is
        // full of live tensors (issue 27 §4; was fragmentation)
        let (class, why) = classify_allocator_state(32 * MIB, Some(20 * MIB), 100 * MIB, 120 * MIB);
        assert_eq!(class, OomClass::GenuineShortage, "{why}");
        // the same shortfall covered by 1 MiB of scraps in 10 GiB reserved is not fragmentation
        let (class, why) = classify_allocator_state(32 * MIB, Some(31 * MIB), 10_239 * MIB, 10_240 * MIB);
        assert_eq!(class, OomClass::GenuineShortage, "{why}");
        assert!(why.contains("scraps"), "{why}");
        assert_eq!(classify_allocator_state(32 * MIB, Some(64 * MIB), 0, 0).0, OomClass::Unexplained);
        assert_eq!(classify_allocator_state(32 * MIB, None, 0, 0).0, OomClass::Unknown);
    }
}
