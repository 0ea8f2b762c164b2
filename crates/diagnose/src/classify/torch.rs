//! PyTorch caching-allocator OOMs: the figures derived once ([`Facts`]),
//! the memory on the card outside this process's allocator ([`Outside`]),
//! then the rules of the module doc of [`crate::classify`] in order, each a
//! small function that returns a [`Ruling`] (data) or nothing. The main
//! cause and the contributors come from the ruling and the figures
//! ([`causes`]); sentences are rendered from the data in
//! [`super::sentences`].

use super::fixes;
use super::sentences::{Headline, Note};
use super::{
    fig, Cause, Figure, OomClass, Verdict, CONTEXT_ALLOWANCE, CONTRIBUTOR_MIN_SHARE, DRIVER_PAGE,
    EFFECTIVELY_FULL_SHARE, FRAG_MIN_SHARE, INFERRED_OTHER_MIN_SHARE, OTHER_PROCESS_MIN, SELF_PID_SLACK,
};
use crate::classify::{b, Fix};
use crate::nvidia_smi::NvidiaSmi;
use crate::oom::{Activity, ProcessUse, TorchEra, TorchOom};
use crate::size::Size;
use vramfit_core::units::{GIB, MIB};

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
    pub message: Option<&'a TorchOom>,
}

impl<'a> Facts<'a> {
    pub fn of_message(t: &'a TorchOom) -> Self {
        Facts {
            requested: t.requested.clone(),
            total: Some(t.total.clone()),
            free: t.free.clone(),
            allocated: t.allocated.clone(),
            reserved: t.reserved_bytes(),
            unallocated: t.unallocated_bytes(),
            unallocated_tol: t.unallocated_tolerance(),
            allowed: t.allowed.clone(),
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
    /// scraps on a full card are not a cause).
    fn cache_material(&self) -> bool {
        self.unallocated > 0 && self.unallocated as f64 >= FRAG_MIN_SHARE * self.reserved as f64
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
/// message (and a pasted nvidia-smi table) tells: attributed to other
/// users of the card (`other`), with the notes and figures that show how.
pub(crate) struct Outside {
    pub other: u64,
    /// `other` comes from listed processes (NVML in the message, or an
    /// nvidia-smi table), not only from arithmetic
    pub listed: bool,
    /// a listed PID taken to be this process (container PID namespace)
    pub presumed_self: Option<u64>,
    /// this process's memory outside the allocator (context, NCCL, cuBLAS), when stated
    pub non_pytorch: u64,
    pub notes: Vec<Note>,
    pub figures: Vec<Figure>,
}

impl Outside {
    fn none() -> Self {
        Outside { other: 0, listed: false, presumed_self: None, non_pytorch: 0, notes: Vec::new(), figures: Vec::new() }
    }
}

/// ≥2.1 messages list processes when NVML answered.
fn has_process_figures(t: &TorchOom) -> bool {
    t.era == TorchEra::Sentences && (t.this_process.is_some() || !t.processes.is_empty())
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
fn usable_this_process(t: &TorchOom, reserved: u64, out: &mut Outside) -> Option<u64> {
    let this = t.this_process.as_ref()?;
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

/// From the process figures of a ≥2.1 message (NVML answered). Without a
/// usable "this process" figure (absent, or NVML's 0), a listed PID that
/// matches PyTorch's reserved bytes is this process seen from a container.
fn outside_listed(t: &TorchOom, reserved: u64) -> Outside {
    let mut out = Outside::none();
    let this = usable_this_process(t, reserved, &mut out);
    if this.is_none() {
        if let Some(p) = presumed_self(&t.processes, reserved) {
            out.presumed_self = Some(p.pid);
            out.non_pytorch = p.used.bytes.saturating_sub(reserved);
            out.notes.push(Note::PresumedSelf {
                pid: p.pid,
                used: p.used.text.clone(),
                slack: SELF_PID_SLACK,
                reserved,
            });
        }
    }
    let others = || t.processes.iter().filter(|p| Some(p.pid) != out.presumed_self);
    let mut other = others().fold(0u64, |a, p| a.saturating_add(p.used.bytes));
    out.listed = other > 0;
    if !t.processes.is_empty() {
        out.figures.push(fig("other_processes", other));
    }
    let this_b = this.unwrap_or(0).max(reserved);
    let listed_self =
        out.presumed_self.and_then(|pid| t.processes.iter().find(|p| p.pid == pid)).map(|p| p.used.bytes).unwrap_or(0);
    let unaccounted =
        t.total.bytes.saturating_sub(t.free.bytes).saturating_sub(this_b.max(listed_self)).saturating_sub(other);
    if unaccounted > CONTEXT_ALLOWANCE {
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

/// Without process figures: what is neither free nor reserved, beyond a
/// CUDA context, belongs to something else.
fn outside_inferred(f: &Facts, total: u64) -> Outside {
    let outside = total.saturating_sub(f.free_b()).saturating_sub(f.reserved);
    let mut out = Outside::none();
    out.notes.push(Note::OutsideAllocator { bytes: outside, no_nvml: f.era == TorchEra::Sentences });
    out.figures.push(fig("outside_allocator", outside));
    if outside > CONTEXT_ALLOWANCE {
        out.other = outside - CONTEXT_ALLOWANCE;
        out.notes.push(Note::BeyondContext { allowance: CONTEXT_ALLOWANCE, other: out.other });
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
    }
}

fn outside(f: &Facts, smi: Option<&NvidiaSmi>) -> Outside {
    match (f.message, &f.total) {
        (Some(t), _) if has_process_figures(t) => outside_listed(t, f.reserved),
        (message, Some(total)) => {
            let mut out = outside_inferred(f, total.bytes);
            if let (Some(t), Some(smi)) = (message, smi) {
                named_by_nvidia_smi(f, smi, t.device, &mut out);
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
}

impl Ruling {
    fn new(class: OomClass, headline: Headline, notes: Vec<Note>, gap: Option<u64>, fixes: Vec<Fix>) -> Self {
        Ruling { class, headline, notes, figures: Vec::new(), gap, fixes, main: None, decisive: false }
    }
    fn decisive(mut self) -> Self {
        self.decisive = true;
        self
    }
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
    let contradicting = f.message.map(contradictions).unwrap_or_default();
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
    Some(r.decisive())
}

/// Rule 0: other figures that cannot all be true.
fn contradictory(f: &Facts) -> Option<Ruling> {
    let list = contradictions(f.message?);
    if list.is_empty() {
        return None;
    }
    let mut notes = vec![Note::Contradictions { list: list.clone() }];
    if list.iter().any(|c| c.contains("total capacity")) {
        notes.push(Note::WindowsSysmemFallback);
    }
    let first = list.into_iter().next().unwrap_or_default();
    let r = Ruling::new(OomClass::Unexplained, Headline::Contradiction { first }, notes, None, fixes::contradictory());
    Some(r.decisive())
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
            return Some(r.decisive());
        }
    }
    let r = Ruling::new(
        OomClass::Unexplained,
        Headline::FreeCoversRequest,
        vec![Note::FreeCoversRequest { free: f.free.text.clone(), requested: f.requested.text.clone() }],
        None,
        fixes::free_covers_request(),
    );
    Some(r.decisive())
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
        t.processes.len() >= 2
            && t.processes
                .iter()
                .filter(|p| Some(p.pid) != out.presumed_self)
                .all(|p| p.used.bytes <= STRAY_CONTEXT_MAX)
    })
}

/// The largest process taken for a stray context of another rank.
const STRAY_CONTEXT_MAX: u64 = 2 * CONTEXT_ALLOWANCE;

fn other_process_ruling(f: &Facts, out: &Outside, note: Note) -> Ruling {
    let device = f.message.map(|t| t.device).unwrap_or(0);
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
    Some(other_process_ruling(f, out, Note::OtherHoldsMost { other: out.other, job, share }))
}

/// Rule 3: the cache alone could serve the request: fragmentation.
fn cache_serves_request(f: &Facts, out: &Outside) -> Option<Ruling> {
    let (u, r) = (f.unallocated, f.r());
    let reach = f.free_b().saturating_add(u).saturating_add(f.tol());
    if u.saturating_add(f.unallocated_tol) < r || reach < r || !f.cache_material() {
        return None;
    }
    Some(fragmentation_ruling(f, out))
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

/// Rule 4: memory held elsewhere is needed to cover the request (listed
/// processes may also merely suffice: their attribution is certain).
fn other_process(f: &Facts, out: &Outside) -> Option<Ruling> {
    if !other_material(f, out) {
        return None;
    }
    // scraps of cache are not room: neither their bytes nor their rounding count
    let (usable_cache, tol) = if f.cache_material() { (f.unallocated, f.tol()) } else { (0, f.free.tolerance) };
    let own = f.free_b().saturating_add(usable_cache).saturating_add(tol);
    let reach = f.free_b().saturating_add(f.unallocated).saturating_add(out.other).saturating_add(f.tol());
    let needed = own < f.r() && reach >= f.r();
    if !(needed || out.listed && reach >= f.r()) {
        return None;
    }
    let note = Note::OtherNeeded {
        free: f.free.text.clone(),
        cached: f.unallocated,
        other: out.other,
        requested: f.requested.text.clone(),
    };
    Some(other_process_ruling(f, out, note))
}

/// Rule 5: only free memory and the cache together cover the request. The
/// cache is the cause unless what they leave is under the effectively-full
/// margin: then the card is full of this job's tensors, and fragmentation
/// only contributes.
fn cache_and_free(f: &Facts, out: &Outside, activity: Option<Activity>) -> Option<Ruling> {
    let together = f.free_b().saturating_add(f.unallocated);
    if together.saturating_add(f.tol()) < f.r() || !f.cache_material() {
        return None;
    }
    let left = together.saturating_sub(f.r());
    if left >= f.full_margin() {
        return Some(fragmentation_ruling(f, out));
    }
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
    Some(Ruling::new(OomClass::GenuineShortage, Headline::CardFull { need, share }, vec![note], None, all))
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
        );
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
    r
}

/// The rules in order; the first that holds decides.
pub(crate) fn rule(f: &Facts, out: &Outside, activity: Option<Activity>) -> Ruling {
    free_above_total(f)
        .or_else(|| request_exceeds_card(f))
        .or_else(|| contradictory(f))
        .or_else(|| room_on_device(f))
        .or_else(|| other_holds_most(f, out))
        .or_else(|| cache_serves_request(f, out))
        .or_else(|| other_process(f, out))
        .or_else(|| cache_and_free(f, out, activity))
        .unwrap_or_else(|| shortage(f, activity))
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

/// Verdict for one PyTorch OOM.
pub fn classify_torch(t: &TorchOom, activity: Option<Activity>) -> Verdict {
    classify_torch_with(t, activity, None)
}

/// Verdict for one PyTorch OOM, with an nvidia-smi table found in the same text.
pub fn classify_torch_with(t: &TorchOom, activity: Option<Activity>, smi: Option<&NvidiaSmi>) -> Verdict {
    let f = Facts::of_message(t);
    let out = outside(&f, smi);
    let mut figures = vec![
        fig("requested", f.r()),
        fig("total", t.total.bytes),
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
        free: t.free.text.clone(),
        total: t.total.text.clone(),
        reserved: f.reserved,
        allocated: f.allocated.bytes,
        cached: f.unallocated,
    }];
    notes.extend(out.notes.iter().cloned());
    let ruling = rule(&f, &out, activity);
    if !ruling.decisive {
        notes.extend(effectively_full_note(&f));
    }
    let (main_cause, contributors) = causes(&f, &out, &ruling);
    figures.extend(ruling.figures);
    notes.extend(ruling.notes);
    if !contributors.is_empty() {
        notes.push(Note::Contributors { main: main_cause.clone(), rest: contributors.clone() });
    }
    Verdict {
        class: ruling.class,
        main_cause,
        contributors,
        headline: ruling.headline.render(),
        figures,
        reasoning: notes.iter().map(Note::sentence).collect(),
        gap_bytes: ruling.gap,
        fixes: ruling.fixes,
    }
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
    let out = outside(&f, None);
    let ruling = rule(&f, &out, None);
    let sentence = super::sentences::state_sentence(&ruling, free, f.unallocated, requested);
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
        // free + cache covers it and the cache is a material share of reserved
        let (class, why) = classify_allocator_state(32 * MIB, Some(20 * MIB), 100 * MIB, 120 * MIB);
        assert_eq!(class, OomClass::Fragmentation, "{why}");
        // the same shortfall covered by 1 MiB of scraps in 10 GiB reserved is not fragmentation
        let (class, why) = classify_allocator_state(32 * MIB, Some(31 * MIB), 10_239 * MIB, 10_240 * MIB);
        assert_eq!(class, OomClass::GenuineShortage, "{why}");
        assert!(why.contains("scraps"), "{why}");
        assert_eq!(classify_allocator_state(32 * MIB, Some(64 * MIB), 0, 0).0, OomClass::Unexplained);
        assert_eq!(classify_allocator_state(32 * MIB, None, 0, 0).0, OomClass::Unknown);
    }
}
