//! PyTorch caching-allocator OOMs: the figures derived once ([`Facts`]),
//! the memory on the card outside this process's allocator ([`Outside`]),
//! then the rules of the module doc of [`crate::classify`] in order, each a
//! small function that returns a [`Ruling`] (data) or nothing. Sentences
//! are rendered from the data in [`super::sentences`].

use super::fixes;
use super::sentences::{Headline, Note};
use super::{fig, Figure, OomClass, Verdict, CONTEXT_ALLOWANCE, FRAG_MIN_SHARE, OTHER_PROCESS_MIN, SELF_PID_SLACK};
use crate::classify::{b, Fix};
use crate::oom::{Activity, ProcessUse, TorchEra, TorchOom};
use crate::size::Size;
use vramfit_core::units::GIB;

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
}

/// Memory on the card outside this process's allocator, as far as the
/// message tells: attributed to other users of the card (`other`), with
/// the notes and figures that show how.
pub(crate) struct Outside {
    pub other: u64,
    /// a listed PID taken to be this process (container PID namespace)
    pub presumed_self: Option<u64>,
    pub notes: Vec<Note>,
    pub figures: Vec<Figure>,
}

/// ≥2.1 messages list processes when NVML answered.
fn has_process_figures(t: &TorchOom) -> bool {
    t.era == TorchEra::Sentences && (t.this_process.is_some() || !t.processes.is_empty())
}

/// The listed process most likely to be this one seen from a container:
/// within [`SELF_PID_SLACK`] above the allocator's reserved bytes.
fn presumed_self(processes: &[ProcessUse], reserved: u64) -> Option<&ProcessUse> {
    processes
        .iter()
        .filter(|p| p.used.hi() >= reserved && p.used.bytes - reserved.min(p.used.bytes) <= SELF_PID_SLACK)
        .min_by_key(|p| p.used.bytes.saturating_sub(reserved))
}

/// From the process figures of a ≥2.1 message (NVML answered).
fn outside_listed(t: &TorchOom, reserved: u64) -> Outside {
    let mut out = Outside { other: 0, presumed_self: None, notes: Vec::new(), figures: Vec::new() };
    if let Some(this) = &t.this_process {
        if this.bytes == 0 && reserved > 0 {
            out.notes.push(Note::NvmlZeroThisProcess { reserved });
        } else {
            let non_pytorch = this.bytes.saturating_sub(reserved);
            out.figures.push(fig("this_process", this.bytes));
            out.figures.push(fig("this_process_non_pytorch", non_pytorch));
            out.notes.push(Note::ThisProcess { this: this.text.clone(), non_pytorch });
        }
    } else if let Some(p) = presumed_self(&t.processes, reserved) {
        out.presumed_self = Some(p.pid);
        out.notes.push(Note::PresumedSelf { pid: p.pid, used: p.used.text.clone(), slack: SELF_PID_SLACK, reserved });
    }
    let others = || t.processes.iter().filter(|p| Some(p.pid) != out.presumed_self);
    let mut other = others().fold(0u64, |a, p| a.saturating_add(p.used.bytes));
    if !t.processes.is_empty() {
        out.figures.push(fig("other_processes", other));
    }
    let this_b = t.this_process.as_ref().map(|x| x.bytes).unwrap_or(0).max(reserved);
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
    let mut out = Outside {
        other: 0,
        presumed_self: None,
        notes: vec![Note::OutsideAllocator { bytes: outside, no_nvml: f.era == TorchEra::Sentences }],
        figures: vec![fig("outside_allocator", outside)],
    };
    if outside > CONTEXT_ALLOWANCE {
        out.other = outside - CONTEXT_ALLOWANCE;
        out.notes.push(Note::BeyondContext { allowance: CONTEXT_ALLOWANCE, other: out.other });
    }
    out
}

fn outside(f: &Facts) -> Outside {
    match (f.message, &f.total) {
        (Some(t), _) if has_process_figures(t) => outside_listed(t, f.reserved),
        (_, Some(total)) => outside_inferred(f, total.bytes),
        (_, None) => Outside { other: 0, presumed_self: None, notes: Vec::new(), figures: Vec::new() },
    }
}

/// What a rule decided: the class, the headline and the reasoning as data,
/// the gap, the fixes.
pub(crate) struct Ruling {
    pub class: OomClass,
    pub headline: Headline,
    pub notes: Vec<Note>,
    pub figures: Vec<Figure>,
    pub gap: Option<u64>,
    pub fixes: Vec<Fix>,
}

impl Ruling {
    fn new(class: OomClass, headline: Headline, notes: Vec<Note>, gap: Option<u64>, fixes: Vec<Fix>) -> Self {
        Ruling { class, headline, notes, figures: Vec::new(), gap, fixes }
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
    })
}

/// Rule 0b: other figures that cannot all be true.
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
    Some(Ruling::new(OomClass::Unexplained, Headline::Contradiction { first }, notes, None, fixes::contradictory()))
}

/// Rule 1: one request larger than the card.
fn request_exceeds_card(f: &Facts) -> Option<Ruling> {
    let total = f.total.as_ref()?;
    (f.requested.lo() > total.hi()).then(|| {
        Ruling::new(
            OomClass::RequestExceedsCard,
            Headline::RequestExceedsCard { requested: f.requested.text.clone(), total: total.text.clone() },
            vec![Note::RequestAboveCard { requested: f.requested.text.clone(), total: total.text.clone() }],
            Some(f.r() - total.bytes),
            fixes::request_exceeds_card(),
        )
    })
}

/// Rule 2: the device had room: a memory-fraction cap, or unexplained.
fn room_on_device(f: &Facts) -> Option<Ruling> {
    if f.free.lo() < f.requested.hi() {
        return None;
    }
    if let Some(cap) = &f.allowed {
        let need = f.allocated.bytes.saturating_add(f.unallocated).saturating_add(f.r());
        let slack = cap.tolerance.saturating_add(f.allocated.tolerance).saturating_add(f.unallocated_tol);
        if need.saturating_add(slack) >= cap.bytes {
            return Some(Ruling::new(
                OomClass::GenuineShortage,
                Headline::CapReached { cap: cap.bytes },
                vec![Note::CapReached { cap: cap.bytes, reserved: f.reserved, requested: f.requested.text.clone() }],
                Some(need.saturating_sub(cap.bytes)),
                fixes::cap(),
            ));
        }
    }
    Some(Ruling::new(
        OomClass::Unexplained,
        Headline::FreeCoversRequest,
        vec![Note::FreeCoversRequest { free: f.free.text.clone(), requested: f.requested.text.clone() }],
        None,
        fixes::free_covers_request(),
    ))
}

/// Rule 3: the cache covers the shortfall and is a material share of what
/// PyTorch reserved (a few MiB of scraps on a full card are not the cause).
fn fragmentation(f: &Facts, other: u64) -> Option<Ruling> {
    let (u, r) = (f.unallocated, f.r());
    let tol = f.free.tolerance.saturating_add(f.unallocated_tol);
    let material = u as f64 >= FRAG_MIN_SHARE * f.reserved as f64 && u > 0;
    if f.free_b().saturating_add(u).saturating_add(tol) < r || !material {
        return None;
    }
    let mut notes = vec![Note::CacheSplit {
        free: f.free.text.clone(),
        cached: u,
        sum: f.free_b().saturating_add(u),
        requested: f.requested.text.clone(),
    }];
    if u >= r {
        notes.push(Note::CacheAloneLarger { cached: u });
    }
    if other >= OTHER_PROCESS_MIN {
        notes.push(Note::OtherMakesWorse { other });
    }
    Some(Ruling::new(
        OomClass::Fragmentation,
        Headline::CacheUnusable { cached: u, requested: f.requested.text.clone() },
        notes,
        None,
        fixes::fragmentation(f.era),
    ))
}

/// Rule 4: memory held elsewhere on the card covers the shortfall.
fn other_process(f: &Facts, out: &Outside) -> Option<Ruling> {
    let tol = f.free.tolerance.saturating_add(f.unallocated_tol);
    let reach = f.free_b().saturating_add(f.unallocated).saturating_add(out.other).saturating_add(tol);
    if out.other < OTHER_PROCESS_MIN || reach < f.r() {
        return None;
    }
    // several small processes: usually other ranks' stray contexts on GPU 0
    let small_many = f.message.is_some_and(|t| {
        t.processes.len() >= 2
            && t.processes
                .iter()
                .filter(|p| Some(p.pid) != out.presumed_self)
                .all(|p| p.used.bytes <= CONTEXT_ALLOWANCE)
    });
    let device = f.message.map(|t| t.device).unwrap_or(0);
    Some(Ruling::new(
        OomClass::OtherProcess,
        Headline::HeldElsewhere { other: out.other, device },
        vec![Note::OtherNeeded {
            free: f.free.text.clone(),
            cached: f.unallocated,
            other: out.other,
            requested: f.requested.text.clone(),
        }],
        None,
        fixes::other_process(small_many),
    ))
}

/// Rule 5: genuine shortage: what is missing even if the cache were reusable.
fn shortage(f: &Facts, activity: Option<Activity>) -> Ruling {
    let (u, a) = (f.unallocated, f.allocated.bytes);
    let gap = f.r().saturating_sub(f.free_b().saturating_add(u));
    if gap == 0 {
        let total = f.total.as_ref().map(|t| t.bytes).unwrap_or(0);
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
        .or_else(|| contradictory(f))
        .or_else(|| request_exceeds_card(f))
        .or_else(|| room_on_device(f))
        .or_else(|| fragmentation(f, out.other))
        .or_else(|| other_process(f, out))
        .unwrap_or_else(|| shortage(f, activity))
}

/// Verdict for one PyTorch OOM.
pub fn classify_torch(t: &TorchOom, activity: Option<Activity>) -> Verdict {
    let f = Facts::of_message(t);
    let out = outside(&f);
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
    figures.extend(ruling.figures);
    notes.extend(ruling.notes);
    Verdict {
        class: ruling.class,
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
    let out = outside(&f);
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
