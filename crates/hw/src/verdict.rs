//! The machine against what was rented: `--expect 8xA100-80GB --expect-nvlink`.
//!
//! Findings, each Pass / Fail / Warn / Info with a stable code. The verdict
//! fails (exit 1) when any finding fails: wrong GPU count or model, a card
//! whose memory is a MIG slice or smaller than the whole card, MIG enabled
//! when whole cards were rented, or a GPU pair without NVLink when NVLink
//! was expected (or no topology to prove it).

use serde::Serialize;

use crate::machine::{Gpu, Machine, MigMode};

/// How far a reported whole-card memory total may be from the catalogue's (nvidia-smi totals vary by a few MiB between drivers).
pub const WHOLE_CARD_TOLERANCE: f64 = 0.03;
/// How far a device's memory may be from a MIG profile's `-lgip` size and still be called that slice.
pub const SLICE_TOLERANCE: f64 = 0.06;

/// A known card: whole-card memory and MIG slice sizes (from the catalogue).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RefCard {
    pub id: String,
    pub name: String,
    /// lowercase alphanumeric token the product name must contain (`a100`, `rtx4090`)
    pub family: String,
    pub whole_mib: u64,
    pub mig_profiles: Vec<RefSlice>,
    /// PCI device ids (the high 16 bits of nvidia-smi's `20B010DE`) that
    /// are this card, from the catalogue (`gpu_pci_ids.toml`, sourced)
    pub pci_device_ids: Vec<u16>,
    /// product names nvidia-smi prints for this card when they do not say
    /// the variant (`NVIDIA H100 80GB HBM3` is the SXM5 card)
    pub product_names: Vec<String>,
    /// PCIe generation of the card's host link (catalogue)
    pub pcie_gen: Option<u8>,
    /// NVLink aggregate per GPU, both directions, GB/s (catalogue; absent: PCIe only)
    pub nvlink_gbs: Option<f64>,
    /// architecture, for the NVLink generation (None: the catalogue gives none)
    pub arch: Option<vramfit_core::GpuArch>,
    /// memory bandwidth, decimal GB/s (catalogue)
    pub memory_gbs: Option<f64>,
}

/// One MIG profile of a known card.
#[derive(Debug, Clone, PartialEq)]
pub struct RefSlice {
    pub profile: String,
    pub bytes: u64,
    pub sms: Option<u32>,
}

/// What was rented.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Expectation {
    pub count: Option<u32>,
    pub card: Option<RefCard>,
    pub nvlink: bool,
    /// the model as typed names a variant (`sxm`, `pcie`, `nvl`): a GPU whose
    /// PCI device id is another variant of the family then fails `model`
    pub variant_named: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Pass,
    Fail,
    Warn,
    Info,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub level: Level,
    pub code: &'static str,
    pub message: String,
}

/// What a GPU's memory total says it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MemoryClass {
    /// matches a known whole card
    WholeCard {
        card: String,
        whole_card_bytes: u64,
    },
    /// matches a MIG profile of a known card
    MigSlice {
        card: String,
        profile: String,
        whole_card_bytes: u64,
    },
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// per GPU, in order
    pub memory: Vec<MemoryClass>,
    /// per GPU, how its card was identified
    pub identified_by: Vec<IdentifiedBy>,
    pub findings: Vec<Finding>,
    /// no finding failed
    pub ok: bool,
}

pub fn norm(s: &str) -> String {
    s.to_ascii_lowercase().chars().filter(|c| c.is_ascii_alphanumeric()).collect()
}

/// Family token of a catalogue id: its segments up to the first with a digit
/// (`a100-80gb-sxm` → `a100`, `rtx-4090` → `rtx4090`, `h100-nvl` → `h100`).
pub fn family_of(id: &str) -> String {
    let mut out = String::new();
    for seg in id.split('-') {
        out.push_str(&norm(seg));
        if seg.chars().any(|c| c.is_ascii_digit()) {
            break;
        }
    }
    out
}

/// Whether the normalized product name `n` names `family`: it contains the
/// family and no longer family that contains it (`l40s` is not an `l40`,
/// `h200` not an `h20`, `rtx4090d` not an `rtx4090`).
pub(crate) fn names_family(n: &str, family: &str, refs: &[RefCard]) -> bool {
    !family.is_empty()
        && n.contains(family)
        && !refs.iter().any(|r| r.family.len() > family.len() && r.family.contains(family) && n.contains(&r.family))
}

/// `a` within `tol` (a fraction) of `b`.
pub fn within(a: u64, b: u64, tol: f64) -> bool {
    let (a, b) = (a as f64, b as f64);
    b > 0.0 && (a - b).abs() <= b * tol
}

/// The known cards a product name can be: same family and, when the name
/// states a size (`A100-SXM4-80GB`, `H100 80GB HBM3`), that size (whole-card
/// GiB rounded).
pub(crate) fn family_cards<'a>(name: &str, refs: &'a [RefCard]) -> Vec<&'a RefCard> {
    let n = norm(name);
    let fam: Vec<&RefCard> = refs.iter().filter(|r| names_family(&n, &r.family, refs)).collect();
    let lower = name.to_ascii_lowercase();
    let stated: Option<u64> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find_map(|w| w.strip_suffix("gb").and_then(|d| d.parse::<u64>().ok()));
    let sized: Vec<&RefCard> = match stated {
        Some(gb) => fam.iter().copied().filter(|r| (r.whole_mib as f64 / 1024.0).round() as u64 == gb).collect(),
        None => Vec::new(),
    };
    if sized.is_empty() {
        fam
    } else {
        sized
    }
}

/// Classify one memory total against the known cards of the GPU's family.
pub fn classify(name: &str, bytes: u64, refs: &[RefCard]) -> MemoryClass {
    classify_among(name, bytes, family_cards(name, refs))
}

/// Classify a memory total against the given cards (the family's, or the
/// one card a PCI id named).
fn classify_among(name: &str, bytes: u64, fam: Vec<&RefCard>) -> MemoryClass {
    let n = norm(name);
    // Among cards of the family with that memory, prefer the one whose id
    // segments (`sxm`, `pcie`, `nvl`) the product name also contains.
    let score = |r: &RefCard| r.id.split('-').filter(|seg| n.contains(&norm(seg))).count();
    if let Some(r) = fam
        .iter()
        .filter(|r| within(bytes, r.whole_mib << 20, WHOLE_CARD_TOLERANCE))
        .min_by_key(|r| (std::cmp::Reverse(score(r)), (bytes as i128 - ((r.whole_mib << 20) as i128)).unsigned_abs()))
    {
        return MemoryClass::WholeCard { card: r.name.clone(), whole_card_bytes: r.whole_mib << 20 };
    }
    let mut best: Option<((std::cmp::Reverse<usize>, u128), MemoryClass)> = None;
    for r in &fam {
        for RefSlice { profile: p, bytes: b, .. } in &r.mig_profiles {
            if within(bytes, *b, SLICE_TOLERANCE) {
                let key = (std::cmp::Reverse(score(r)), (bytes as i128 - *b as i128).unsigned_abs());
                if best.as_ref().is_none_or(|(bk, _)| key < *bk) {
                    best = Some((
                        key,
                        MemoryClass::MigSlice {
                            card: r.name.clone(),
                            profile: p.clone(),
                            whole_card_bytes: r.whole_mib << 20,
                        },
                    ));
                }
            }
        }
    }
    best.map(|(_, c)| c).unwrap_or(MemoryClass::Unknown)
}

/// How a GPU was matched to a known card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentifiedBy {
    /// its PCI device id is one of the card's (catalogue `gpu_pci_ids.toml`)
    PciDeviceId,
    /// its product name is one nvidia-smi prints for the card alone
    ProductName,
    /// family in the name, then memory total (and variant words in the name)
    NameAndMemory,
}

impl IdentifiedBy {
    pub fn describe(self) -> &'static str {
        match self {
            IdentifiedBy::PciDeviceId => "PCI device id",
            IdentifiedBy::ProductName => "product name",
            IdentifiedBy::NameAndMemory => "name and memory",
        }
    }
}

/// The 16-bit PCI device id in nvidia-smi's `20B010DE` / `0x233010DE`
/// (device in the high 16 bits, vendor 0x10DE in the low 16); `None` for
/// another vendor, a zero device (virtual GPUs print `000000DE`) or text
/// that is not 8 hex digits.
pub fn pci_device(s: &str) -> Option<u16> {
    let hex = s.trim().trim_start_matches("0x").trim_start_matches("0X");
    let v = (hex.len() == 8).then(|| u32::from_str_radix(hex, 16).ok()).flatten()?;
    let (device, vendor) = ((v >> 16) as u16, (v & 0xffff) as u16);
    (vendor == 0x10de && device != 0).then_some(device)
}

/// The known card a GPU is, when its PCI device id or its product name
/// says so unambiguously.
pub fn identify<'a>(g: &Gpu, refs: &'a [RefCard]) -> Option<(&'a RefCard, IdentifiedBy)> {
    if let Some(d) = g.pci_device_id.as_deref().and_then(pci_device) {
        if let Some(r) = refs.iter().find(|r| r.pci_device_ids.contains(&d)) {
            return Some((r, IdentifiedBy::PciDeviceId));
        }
    }
    let by_name: Vec<&RefCard> =
        refs.iter().filter(|r| r.product_names.iter().any(|n| n.eq_ignore_ascii_case(g.name.trim()))).collect();
    match by_name.as_slice() {
        [one] => Some((one, IdentifiedBy::ProductName)),
        _ => None,
    }
}

/// What a GPU's memory total says it is, and how the card was identified:
/// by PCI device id or product name when the catalogue knows them (so an
/// H100 SXM5, printed "NVIDIA H100 80GB HBM3" with the H100 PCIe's 81559
/// MiB, is not taken for the PCIe card), else by [`classify`].
pub fn classify_gpu(g: &Gpu, refs: &[RefCard]) -> (MemoryClass, IdentifiedBy) {
    let known = identify(g, refs);
    let by = known.map(|(_, b)| b).unwrap_or(IdentifiedBy::NameAndMemory);
    let Some(bytes) = g.memory_total_bytes else {
        return (MemoryClass::Unknown, by);
    };
    match known {
        Some((r, _)) => (classify_among(&g.name, bytes, vec![r]), by),
        None => (classify(&g.name, bytes, refs), by),
    }
}

/// The profile of a MIG device, from its memory (within [`SLICE_TOLERANCE`])
/// and, when both are known, its SM count, among the MIG profiles of the
/// cards of the GPU's family whose whole-card memory matches the parent's.
/// `None` when no profile or more than one fits.
pub fn infer_mig_profile(
    gpu_name: &str,
    parent_bytes: Option<u64>,
    dev_bytes: u64,
    sms: Option<u32>,
    refs: &[RefCard],
) -> Option<String> {
    let mut hits: Vec<&str> = Vec::new();
    for r in family_cards(gpu_name, refs) {
        if parent_bytes.is_some_and(|p| !within(p, r.whole_mib << 20, WHOLE_CARD_TOLERANCE)) {
            continue;
        }
        for s in &r.mig_profiles {
            let sm_ok = match (sms, s.sms) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            };
            if sm_ok && within(dev_bytes, s.bytes, SLICE_TOLERANCE) && !hits.contains(&s.profile.as_str()) {
                hits.push(&s.profile);
            }
        }
    }
    match hits.as_slice() {
        [one] => Some(one.to_string()),
        _ => None,
    }
}

fn mib(b: u64) -> String {
    format!("{} MiB", b >> 20)
}

fn push(f: &mut Vec<Finding>, level: Level, code: &'static str, message: String) {
    f.push(Finding { level, code, message });
}

fn mig_summary(g: &Gpu) -> String {
    let parts: Vec<String> = g
        .mig_devices
        .iter()
        .map(|d| match (&d.profile, d.memory_total_bytes) {
            (Some(p), _) => p.clone(),
            (None, Some(b)) => mib(b),
            (None, None) => "?".into(),
        })
        .collect();
    if parts.is_empty() {
        "no instances listed".into()
    } else {
        format!("{} instance(s): {}", parts.len(), parts.join(", "))
    }
}

/// Judge a machine.
pub fn verdict(m: &Machine, e: &Expectation, refs: &[RefCard]) -> Verdict {
    let mut f = Vec::new();
    let classes: Vec<(MemoryClass, IdentifiedBy)> = m.gpus.iter().map(|g| classify_gpu(g, refs)).collect();
    let identified: Vec<IdentifiedBy> = classes.iter().map(|(_, b)| *b).collect();
    let memory: Vec<MemoryClass> = classes.into_iter().map(|(c, _)| c).collect();
    let versions = format!(
        "driver {}, CUDA {}",
        m.driver_version.as_deref().unwrap_or("unknown"),
        m.cuda_version.as_deref().unwrap_or("unknown")
    );
    push(&mut f, Level::Info, "versions", versions);

    count_findings(&mut f, m, e);
    for (g, class) in m.gpus.iter().zip(&memory) {
        match &e.card {
            Some(card) => card_findings(&mut f, g, class, card, e, refs),
            None => memory_findings(&mut f, g, class),
        }
        state_findings(&mut f, g, e);
    }
    interconnect_findings(&mut f, m, e);
    let ok = !f.iter().any(|x| x.level == Level::Fail);
    Verdict { memory, identified_by: identified, findings: f, ok }
}

/// Count: the GPUs listed against the GPUs expected.
fn count_findings(f: &mut Vec<Finding>, m: &Machine, e: &Expectation) {
    let n = m.gpus.len() as u32;
    if let Some(a) = m.attached_gpus.filter(|&a| a != n) {
        push(f, Level::Warn, "attached_mismatch", format!("the source says {a} GPUs are attached but lists {n}"));
    }
    if let Some(c) = e.count {
        // Only a topology given: count its GPUs, but the model cannot be checked.
        let (n, from) = match (&m.topology, m.gpus.is_empty()) {
            (Some(t), true) => (t.gpus.len() as u32, " (in the topology)"),
            _ => (n, ""),
        };
        let lvl = if c == n { Level::Pass } else { Level::Fail };
        push(f, lvl, "count", format!("{n} GPU(s) found{from}, {c} expected"));
    }
    if let (Some(card), true) = (&e.card, m.gpus.is_empty()) {
        push(
            f,
            Level::Fail,
            "model",
            format!("{} not verified: no GPU list; give --xml, --text or --list (or --nvml)", card.name),
        );
    }
}

/// Model and memory of one GPU against the rented card.
fn card_findings(
    f: &mut Vec<Finding>,
    g: &Gpu,
    class: &MemoryClass,
    card: &RefCard,
    e: &Expectation,
    refs: &[RefCard],
) {
    let mut name_ok = names_family(&norm(&g.name), &card.family, refs);
    if !name_ok {
        push(f, Level::Fail, "model", format!("GPU {}: {} is not a {}", g.index, g.name, card.name));
    }
    // Same family, another variant (H100 PCIe for an H100 SXM5): the PCI device id says so.
    if let Some((is, by)) = identify(g, refs).filter(|(is, _)| name_ok && is.id != card.id && is.family == card.family)
    {
        let how = match (by, g.pci_device_id.as_deref().and_then(pci_device)) {
            (IdentifiedBy::PciDeviceId, Some(d)) => format!("PCI device id {d:04X}"),
            _ => format!("product name \"{}\"", g.name),
        };
        if e.variant_named {
            name_ok = false;
            push(
                f,
                Level::Fail,
                "model",
                format!("GPU {}: {} is an {} ({how}), not an {}", g.index, g.name, is.name, card.name),
            );
        } else {
            push(
                f,
                Level::Info,
                "variant",
                format!(
                    "GPU {}: {} is an {} ({how}); {} was read as the catalogue's {}: name the variant \
                     (e.g. {}) to have it checked",
                    g.index, g.name, is.name, card.name, card.id, is.id
                ),
            );
        }
    }
    match g.memory_total_bytes {
        // An unreadable total (`-1 MiB`, `NaN MiB`, past 2^64 bytes) is a damaged or
        // forged report: it cannot confirm the memory that was rented.
        None if g.memory_total_unreadable.is_some() => push(
            f,
            Level::Fail,
            "memory",
            format!(
                "GPU {}: memory total \"{}\" is not a readable size; it cannot confirm a whole {} ({})",
                g.index,
                g.memory_total_unreadable.as_deref().unwrap_or_default(),
                card.name,
                mib(card.whole_mib << 20)
            ),
        ),
        None => push(f, Level::Warn, "memory_unknown", format!("GPU {}: memory total not reported", g.index)),
        Some(b) if within(b, card.whole_mib << 20, WHOLE_CARD_TOLERANCE) => {
            if name_ok {
                push(
                    f,
                    Level::Pass,
                    "model",
                    format!("GPU {}: {} with {} (a whole {})", g.index, g.name, mib(b), card.name),
                );
            }
        }
        Some(b) => {
            let what = match class {
                MemoryClass::MigSlice { profile, card: c, .. } => format!("a MIG slice ({profile} of {c})"),
                MemoryClass::WholeCard { card: c, .. } => format!("a whole {c}"),
                MemoryClass::Unknown => "not the rented card".into(),
            };
            push(
                f,
                Level::Fail,
                "memory",
                format!(
                    "GPU {}: {} of memory, a whole {} has {}: this is {what}",
                    g.index,
                    mib(b),
                    card.name,
                    mib(card.whole_mib << 20)
                ),
            );
        }
    }
}

/// Memory of one GPU when no card was named: only what is suspicious.
fn memory_findings(f: &mut Vec<Finding>, g: &Gpu, class: &MemoryClass) {
    if let Some(raw) = &g.memory_total_unreadable {
        push(
            f,
            Level::Warn,
            "memory_unreadable",
            format!("GPU {}: memory total \"{raw}\" is not a readable size", g.index),
        );
    } else if let (MemoryClass::MigSlice { profile, card, .. }, Some(b)) = (class, g.memory_total_bytes) {
        push(
            f,
            Level::Warn,
            "memory",
            format!("GPU {}: {} looks like a MIG slice ({profile} of {card})", g.index, mib(b)),
        );
    }
}

/// MIG mode, ECC and PCIe link width of one GPU.
fn state_findings(f: &mut Vec<Finding>, g: &Gpu, e: &Expectation) {
    // MIG mode.
    if g.mig_current == MigMode::Enabled {
        let lvl = if e.card.is_some() { Level::Fail } else { Level::Info };
        push(
            f,
            lvl,
            "mig_enabled",
            format!(
                "GPU {}: MIG is enabled ({}); processes get instances, not the whole card",
                g.index,
                mig_summary(g)
            ),
        );
    }
    if g.mig_current != g.mig_pending && g.mig_pending != MigMode::Unknown && g.mig_current != MigMode::Unknown {
        push(
            f,
            Level::Warn,
            "mig_pending",
            format!(
                "GPU {}: MIG mode is {} but {} is pending: it changes after a GPU reset or reboot",
                g.index,
                g.mig_current.name(),
                g.mig_pending.name()
            ),
        );
    }
    // ECC.
    match (g.ecc.current, g.ecc.pending) {
        (Some(c), Some(p)) if c != p => push(
            f,
            Level::Warn,
            "ecc_pending",
            format!("GPU {}: ECC is {} but {} is pending (after reboot)", g.index, onoff(c), onoff(p)),
        ),
        (Some(c), _) => push(f, Level::Info, "ecc", format!("GPU {}: ECC {}", g.index, onoff(c))),
        _ => {}
    }
    // Memory taken out of service: retired pages (to Turing), remapped rows (Ampere on).
    let r = &g.memory_repair;
    if r.remap_failure == Some(true) {
        push(
            f,
            if e.card.is_some() { Level::Fail } else { Level::Warn },
            "memory_errors",
            format!("GPU {}: a row remapping failed (`Remapping Failure Occurred`): the card needs service", g.index),
        );
    } else if r.remap_pending == Some(true) || r.retirement_pending == Some(true) {
        push(
            f,
            Level::Warn,
            "memory_errors",
            format!("GPU {}: a row remap or page retirement is pending until the next GPU reset", g.index),
        );
    }
    let bad = r.remapped_uncorrectable.unwrap_or(0).saturating_add(r.retired_double_bit.unwrap_or(0));
    if bad > 0 {
        push(
            f,
            Level::Info,
            "memory_errors",
            format!("GPU {}: {bad} row(s)/page(s) already taken out of service after uncorrectable errors", g.index),
        );
    }
    if let (Some(c), Some(mx)) = (g.pcie_width_current, g.pcie_width_max) {
        if c < mx {
            push(f, Level::Warn, "pcie_width", format!("GPU {}: PCIe link runs x{c} of x{mx}", g.index));
        }
    }
}

/// Interconnect: NVLink between every GPU pair when it was rented, and a
/// topology that agrees with the GPU report.
fn interconnect_findings(f: &mut Vec<Finding>, m: &Machine, e: &Expectation) {
    match &m.topology {
        Some(t) => {
            if t.gpus.len() != m.gpus.len() && !m.gpus.is_empty() {
                // Inputs that disagree on the GPU count come from different
                // machines (or a trimmed dump): nothing they say together can
                // pass a verdict.
                let judged = e.count.is_some() || e.card.is_some() || e.nvlink;
                push(
                    f,
                    if judged { Level::Fail } else { Level::Warn },
                    "topo_count",
                    format!(
                        "inputs disagree: the topology lists {} GPUs, the GPU report {}; \
                         give files from the same machine",
                        t.gpus.len(),
                        m.gpus.len()
                    ),
                );
            }
            let pairs = t.pairs();
            let bad: Vec<String> = pairs
                .iter()
                .filter(|p| !p.link.is_nvlink())
                .map(|p| format!("GPU{}-GPU{} {}", p.a, p.b, p.link.label()))
                .collect();
            if e.nvlink {
                if pairs.is_empty() {
                    push(f, Level::Fail, "nvlink", "one GPU: no pair to join with NVLink".into());
                } else if bad.is_empty() {
                    push(f, Level::Pass, "nvlink", format!("all {} GPU pairs are joined by NVLink", pairs.len()));
                } else {
                    let shown: Vec<String> = bad.iter().take(8).cloned().collect();
                    push(
                        f,
                        Level::Fail,
                        "nvlink",
                        format!(
                            "{} of {} GPU pairs have no NVLink ({}{})",
                            bad.len(),
                            pairs.len(),
                            shown.join(", "),
                            if bad.len() > shown.len() { ", …" } else { "" }
                        ),
                    );
                }
            } else if !pairs.is_empty() {
                push(
                    f,
                    Level::Info,
                    "interconnect",
                    format!("{} of {} GPU pairs joined by NVLink", pairs.len() - bad.len(), pairs.len()),
                );
            }
        }
        None if e.nvlink => push(
            f,
            Level::Fail,
            "nvlink",
            "NVLink not verified: no topology; give --topo <nvidia-smi topo -m> (or --nvml)".into(),
        ),
        None => {}
    }
}

fn onoff(b: bool) -> &'static str {
    if b {
        "enabled"
    } else {
        "disabled"
    }
}

/// `8xA100-80GB` → (Some(8), "A100-80GB"); `A100-80GB` → (None, …) (the model
/// only). A count without a model (`8`, `8x`), a count of 0, a model with
/// spaces or stray characters (`8xxA100`, `8xA100 80GB`) are errors naming the
/// expected format.
pub fn parse_expect(s: &str) -> Result<(Option<u32>, String), String> {
    const FORMAT: &str = "expected COUNTxMODEL with a GPU model, e.g. 8xA100-80GB (or MODEL alone: A100-80GB)";
    let t = s.trim();
    let digits = t.chars().take_while(|c| c.is_ascii_digit()).count();
    let after = &t[digits..];
    let (count, model) = if digits > 0 {
        let Some(model) = after.strip_prefix(['x', 'X', '×']) else {
            return Err(if after.is_empty() {
                format!("--expect {s}: a GPU count without a GPU model; {FORMAT}")
            } else {
                format!("--expect {s}: {FORMAT}")
            });
        };
        let n = t[..digits].parse::<u32>().map_err(|_| format!("--expect {s}: GPU count too large; {FORMAT}"))?;
        if n == 0 {
            return Err(format!("--expect {s}: a count of 0 GPUs; {FORMAT}"));
        }
        (Some(n), model)
    } else {
        (None, t)
    };
    if model.is_empty() {
        return Err(format!("--expect {s}: no GPU model; {FORMAT}"));
    }
    let model_ok = model.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && model.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !(count.is_some() && model.starts_with(['x', 'X']));
    if !model_ok {
        return Err(format!("--expect {s}: {model:?} is not a GPU model name; {FORMAT}"));
    }
    Ok((count, model.to_string()))
}
