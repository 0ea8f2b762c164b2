//! Rental offers, discounts and upgrades: `data/offers.toml`, embedded, and
//! a user's `--catalog FILE` layered on top (or replacing it with
//! `replace = true`). The same parser reads both. A catalogue file may also
//! carry `[[gpu]]` tables for cards the embedded list lacks.
//!
//! Prices are numbers or `[low, high]` ranges, in the offer's own
//! `currency` (any code: no conversion is ever made). Every error names the
//! file, the line and the field.

use crate::gpus::{check_size, field_line, find_gpu, merge_gpus, parse_gpus, toml_error, CatalogError};
use serde::Deserialize;
use std::collections::HashSet;
use vramfit_core::{GpuSpec, Link};
use vramfit_plan::{
    Discount, DiscountKind, Fabric, FabricKind, Offer, OfferFlag, PriceBook, PriceRange, Slice, Term, Upgrade,
};

pub const BUILTIN_OFFERS_TOML: &str = include_str!("../data/offers.toml");
pub const BUILTIN_OFFERS_FILE: &str = "<builtin>/offers.toml";

/// Largest sane price (per month or hour) in any currency unit.
const MAX_PRICE: f64 = 1e12;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OfferFile {
    #[serde(default)]
    #[allow(dead_code)]
    schema: Option<u32>,
    /// replace the embedded offers instead of adding to them
    #[serde(default)]
    replace: bool,
    #[serde(default)]
    offer: Vec<toml::Spanned<OfferRow>>,
    #[serde(default)]
    discount: Vec<toml::Spanned<DiscountRow>>,
    #[serde(default)]
    upgrade: Vec<toml::Spanned<UpgradeRow>>,
    /// GPU tables are read by `gpus.rs`
    #[serde(default)]
    #[allow(dead_code)]
    gpu: Option<toml::Value>,
}

/// A price as written: a number or `[low, high]` (checked by hand so the
/// message can say what was expected).
type PriceIn = toml::Value;

fn price_pair(v: &toml::Value) -> Option<(f64, f64)> {
    let num = |x: &toml::Value| match x {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    };
    match v {
        toml::Value::Array(a) if a.len() == 2 => Some((num(&a[0])?, num(&a[1])?)),
        other => num(other).map(|x| (x, x)),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SliceRow {
    fraction: f64,
    label: String,
    memory_mib: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OfferRow {
    id: String,
    provider: String,
    name: String,
    gpu: String,
    #[serde(default = "one")]
    gpus: u64,
    #[serde(default)]
    max_gpus: Option<u64>,
    #[serde(default)]
    link: Option<String>,
    #[serde(default)]
    slice: Option<SliceRow>,
    #[serde(default)]
    cpu_cores: Option<u64>,
    #[serde(default)]
    ram_gb: Option<f64>,
    #[serde(default)]
    disk_gb: Option<f64>,
    #[serde(default)]
    network_mbps: Option<f64>,
    #[serde(default)]
    monthly: Option<PriceIn>,
    #[serde(default)]
    hourly: Option<PriceIn>,
    #[serde(default)]
    min_hours: Option<f64>,
    /// priced per card-equivalent, rented as MIG instances: expanded into one
    /// slice offer per MIG profile of the card
    #[serde(default)]
    mig: bool,
    currency: String,
    #[serde(default)]
    flags: Vec<String>,
    #[serde(default)]
    source: String,
    #[serde(default)]
    max_machines: Option<u64>,
    #[serde(default)]
    inter_node_gbs: Option<f64>,
    #[serde(default)]
    fabric: Option<FabricRow>,
    #[serde(default)]
    min_machines: Option<u64>,
}

/// `fabric = { kind = "infiniband", gbps_per_node = 400, nvlink_domain = 8 }`
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FabricRow {
    kind: String,
    gbps_per_node: f64,
    #[serde(default)]
    nvlink_domain: Option<u64>,
}

fn one() -> u64 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DiscountRow {
    id: String,
    provider: String,
    name: String,
    #[serde(default)]
    factor: Option<f64>,
    #[serde(default)]
    minus_per_month: Option<f64>,
    #[serde(default)]
    term: Option<String>,
    #[serde(default)]
    min_gpus: u64,
    #[serde(default)]
    max_gpus: Option<u64>,
    #[serde(default)]
    stackable: bool,
    currency: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UpgradeRow {
    id: String,
    provider: String,
    name: String,
    #[serde(default)]
    offers: Vec<String>,
    #[serde(default)]
    ram_gb_to: Option<f64>,
    #[serde(default)]
    cpu_cores_to: Option<u64>,
    #[serde(default)]
    disk_gb_add: Option<f64>,
    #[serde(default)]
    network_mbps_to: Option<f64>,
    monthly: f64,
    currency: String,
}

/// Offers, discounts and upgrades of one file, and whether it replaces the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferFileContents {
    pub book: PriceBook,
    pub replace: bool,
}

/// Parse an offers file; GPU ids are checked against `gpus`.
pub fn parse_offers(text: &str, file: &str, gpus: &[GpuSpec]) -> Result<OfferFileContents, CatalogError> {
    check_size(file, text)?;
    let parsed: OfferFile = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
    let mut book = PriceBook::default();
    if parsed.offer.len() > MAX_OFFERS {
        return Err(CatalogError::Invalid {
            file: file.into(),
            line: 1,
            field: "offer".into(),
            reason: format!(
                "{} offers: at most {MAX_OFFERS} are read (the planner scores every offer × GPU count × setup); split the file or keep the offers you would rent",
                parsed.offer.len()
            ),
        });
    }
    let mut ids: HashSet<String> = HashSet::new();
    let mig_tables = crate::mig::builtin_mig_tables().unwrap_or_default();
    for spanned in parsed.offer {
        let span = spanned.span();
        let offers = parse_offer(spanned.into_inner(), &span, file, text, gpus, &mut ids, &mig_tables)?;
        book.offers.extend(offers);
    }
    for spanned in parsed.discount {
        let span = spanned.span();
        let bad = |field: &str, reason: String| entry_error(file, text, &span, field, reason);
        book.discounts.push(parse_discount(spanned.into_inner(), &bad)?);
    }
    for spanned in parsed.upgrade {
        let span = spanned.span();
        let bad = |field: &str, reason: String| entry_error(file, text, &span, field, reason);
        book.upgrades.push(parse_upgrade(spanned.into_inner(), &bad)?);
    }
    Ok(OfferFileContents { book, replace: parsed.replace })
}

/// The error for one field of one entry: file, line and reason.
type BadField<'a> = dyn Fn(&str, String) -> CatalogError + 'a;

/// One `[[offer]]`: its GPU from the catalogue, checked fields, and a MIG
/// offer expanded into one offer per profile.
fn parse_offer(
    mut r: OfferRow,
    span: &std::ops::Range<usize>,
    file: &str,
    text: &str,
    gpus: &[GpuSpec],
    ids: &mut HashSet<String>,
    mig_tables: &[crate::mig::MigTable],
) -> Result<Vec<Offer>, CatalogError> {
    let bad = |field: &str, reason: String| entry_error(file, text, span, field, reason);
    if r.id.trim().is_empty() {
        return Err(bad("id", "must not be empty".into()));
    }
    if !ids.insert(r.id.clone()) {
        return Err(bad("id", format!("duplicate offer id '{}'", r.id)));
    }
    let gpu = match find_gpu(gpus, &r.gpu) {
        Ok(g) => g,
        Err(CatalogError::UnknownGpu { suggestions, .. })
        | Err(CatalogError::AmbiguousGpu { candidates: suggestions, .. }) => {
            return Err(CatalogError::UnknownOfferGpu {
                file: file.into(),
                line: field_line(text, span, "gpu"),
                gpu: r.gpu.clone(),
                suggestions,
            })
        }
        Err(e) => return Err(e),
    };
    if r.gpus == 0 || r.gpus > 1024 {
        return Err(bad("gpus", format!("{} GPUs per unit is not plausible (1–1024)", r.gpus)));
    }
    let max_gpus = r.max_gpus.unwrap_or(r.gpus);
    if max_gpus < r.gpus || max_gpus > 1024 {
        return Err(bad("max_gpus", format!("{max_gpus} must be between gpus ({}) and 1024", r.gpus)));
    }
    let link = match r.link.as_deref().map(|s| s.to_ascii_lowercase()) {
        None => Link::Pcie,
        Some(s) if s == "pcie" => Link::Pcie,
        Some(s) if s == "nvlink" || s == "nvswitch" => {
            if gpu.nvlink_gbs.is_none() {
                return Err(bad("link", format!("{} has no NVLink", gpu.name)));
            }
            Link::Nvlink
        }
        Some(s) => return Err(bad("link", format!("'{s}' is not one of pcie, nvlink"))),
    };
    let monthly = offer_price(&bad, "monthly", r.monthly.clone())?;
    let hourly = offer_price(&bad, "hourly", r.hourly.clone())?;
    if monthly.is_none() && hourly.is_none() {
        return Err(bad("monthly", "an offer needs a monthly or an hourly price".into()));
    }
    if r.currency.trim().is_empty() || r.currency.len() > 16 {
        return Err(bad("currency", "give a currency code such as CNY, USD, EUR".into()));
    }
    let slice = match r.slice.take() {
        None => None,
        Some(s) => Some(offer_slice(&bad, s, gpu, r.gpus, max_gpus)?),
    };
    if let Some(h) = r.min_hours {
        if !(h.is_finite() && h > 0.0 && h <= 100_000.0) {
            return Err(bad("min_hours", format!("{h} is not a number of hours in (0, 100000]")));
        }
        if hourly.is_none() {
            return Err(bad("min_hours", "a minimum term in hours needs an hourly price".into()));
        }
    }
    let mig_profiles = if r.mig {
        if slice.is_some() || r.gpus != 1 || max_gpus != 1 {
            return Err(bad("mig", "a MIG offer is one card's worth of instances: no slice, gpus = 1".into()));
        }
        match crate::mig::find_mig_table(mig_tables, &gpu.id) {
            Ok(t) => Some(t.clone()),
            Err(_) => return Err(bad("mig", format!("{} has no MIG profile table in the catalogue", gpu.name))),
        }
    } else {
        None
    };
    let max_machines = check_machine(&bad, &r)?;
    let min_machines = r.min_machines.unwrap_or(1);
    if min_machines == 0 || min_machines > max_machines {
        return Err(bad("min_machines", format!("{min_machines} is not in 1..={max_machines} (max_machines)")));
    }
    let fabric = match r.fabric.take() {
        Some(f) => Some(offer_fabric(&bad, f, r.gpus, max_gpus, link)?),
        None => None,
    };
    // a named fabric's rate per machine, shared by its GPUs, is the per-GPU figure
    let inter_node_gbs =
        r.inter_node_gbs.or(fabric.map(|f| f.node_bytes_per_s() / 1e9 / max_gpus.max(r.gpus).max(1) as f64));
    let offer = Offer {
        id: r.id,
        provider: r.provider,
        name: r.name,
        gpu: gpu.id.clone(),
        gpus_per_machine: r.gpus,
        max_gpus,
        link,
        slice,
        cpu_cores: r.cpu_cores,
        ram_gb: r.ram_gb,
        disk_gb: r.disk_gb,
        network_mbps: r.network_mbps,
        monthly,
        hourly,
        min_hours: r.min_hours,
        currency: r.currency.trim().to_string(),
        flags: r.flags.into_iter().map(OfferFlag::from).collect(),
        source: r.source,
        max_machines,
        min_machines,
        inter_node_gbs,
        fabric,
    };
    Ok(match mig_profiles {
        Some(table) => mig_slices(&offer, &table),
        None => vec![offer],
    })
}

/// A price field: a number or `[low, high]`, finite, non-negative, low ≤ high.
fn offer_price(bad: &BadField, field: &str, p: Option<PriceIn>) -> Result<Option<PriceRange>, CatalogError> {
    let Some(p) = p else { return Ok(None) };
    let Some((low, high)) = price_pair(&p) else {
        return Err(bad(field, format!("{p} is not a price: expected a number or [low, high]")));
    };
    if !(low.is_finite() && high.is_finite() && low >= 0.0 && high < MAX_PRICE) {
        return Err(bad(field, format!("{low}–{high} is not a price")));
    }
    if low > high {
        return Err(bad(field, format!("range low {low} is above high {high}")));
    }
    Ok(Some(PriceRange { low, high }))
}

/// A slice of one card (not MIG): a fraction, at most the card's memory, one per unit.
fn offer_slice(bad: &BadField, s: SliceRow, gpu: &GpuSpec, gpus: u64, max_gpus: u64) -> Result<Slice, CatalogError> {
    if !(s.fraction > 0.0 && s.fraction <= 1.0) {
        return Err(bad("slice", format!("fraction {} is not in (0, 1]", s.fraction)));
    }
    if s.memory_mib == 0 || s.memory_mib > gpu.memory_mib {
        return Err(bad("slice", format!("memory_mib {} must be 1..={} (the card's)", s.memory_mib, gpu.memory_mib)));
    }
    if gpus != 1 || max_gpus != 1 {
        return Err(bad("slice", "a slice offer has one slice per unit (gpus = 1)".into()));
    }
    Ok(Slice { fraction: s.fraction, label: s.label, memory_mib: s.memory_mib, mig: false })
}

/// Longest machine count one job may span: far above any cluster rented
/// today (a 2,048-node cluster must be describable), low enough that GPU
/// counts stay exact in every product.
pub const MAX_MACHINES: u64 = 100_000;

/// Fastest fabric accepted per machine, Gb/s (8 × 800G NICs is 6,400).
const MAX_FABRIC_GBPS: f64 = 100_000.0;

/// The fabric between machines: a known kind, a positive rate, an NVLink
/// domain no larger than a machine (absent: the machine's GPUs on NVLink,
/// else one GPU).
fn offer_fabric(bad: &BadField, f: FabricRow, gpus: u64, max_gpus: u64, link: Link) -> Result<Fabric, CatalogError> {
    let kind = match f.kind.as_str() {
        "infiniband" => FabricKind::Infiniband,
        "roce" => FabricKind::Roce,
        "ethernet" => FabricKind::Ethernet,
        k => return Err(bad("fabric.kind", format!("'{k}' is not one of infiniband, roce, ethernet"))),
    };
    if !(f.gbps_per_node.is_finite() && f.gbps_per_node > 0.0 && f.gbps_per_node <= MAX_FABRIC_GBPS) {
        return Err(bad(
            "fabric.gbps_per_node",
            format!("{} is not a line rate: expected Gb/s per machine in (0, {MAX_FABRIC_GBPS}]", f.gbps_per_node),
        ));
    }
    let per_machine = max_gpus.max(gpus).max(1);
    let domain = f.nvlink_domain.unwrap_or(if link == Link::Nvlink { per_machine } else { 1 });
    if domain == 0 || domain > per_machine {
        return Err(bad(
            "fabric.nvlink_domain",
            format!("{domain} GPUs is not in 1..={per_machine} (the GPUs of one machine)"),
        ));
    }
    Ok(Fabric { kind, gbps_per_node: f.gbps_per_node, nvlink_domain: domain })
}

/// The machine's own fields (RAM, disk, network, fabric between machines)
/// and how many machines a job may span; returns that count.
fn check_machine(bad: &BadField, r: &OfferRow) -> Result<u64, CatalogError> {
    for (field, v) in [("ram_gb", r.ram_gb), ("disk_gb", r.disk_gb), ("network_mbps", r.network_mbps)] {
        if let Some(v) = v {
            if !(v.is_finite() && v > 0.0 && v < 1e9) {
                return Err(bad(field, format!("{v} must be a positive number")));
            }
        }
    }
    if let Some(v) = r.inter_node_gbs {
        if !(v.is_finite() && v > 0.0 && v < 1e6) {
            return Err(bad("inter_node_gbs", format!("{v} must be a positive number")));
        }
    }
    let max_machines = r.max_machines.unwrap_or(1);
    if max_machines == 0 || max_machines > MAX_MACHINES {
        return Err(bad("max_machines", format!("{max_machines} is not in 1..={MAX_MACHINES}")));
    }
    if max_machines > 1 && r.inter_node_gbs.is_none() && r.fabric.is_none() {
        return Err(bad(
            "max_machines",
            "multi-machine jobs need the network between machines: fabric = { kind, gbps_per_node } or inter_node_gbs"
                .into(),
        ));
    }
    Ok(max_machines)
}

/// One `[[discount]]`: a factor or an amount off per month, for a term.
fn parse_discount(r: DiscountRow, bad: &BadField) -> Result<Discount, CatalogError> {
    let kind = match (r.factor, r.minus_per_month) {
        (Some(f), None) if f.is_finite() && f > 0.0 && f <= 1.0 => DiscountKind::Factor(f),
        (Some(f), None) => return Err(bad("factor", format!("{f} is not in (0, 1]"))),
        (None, Some(m)) if (0.0..MAX_PRICE).contains(&m) => DiscountKind::MinusPerMonth(m),
        (None, Some(m)) => return Err(bad("minus_per_month", format!("{m} is not an amount"))),
        _ => return Err(bad("factor", "give exactly one of factor or minus_per_month".into())),
    };
    let term = match r.term.as_deref() {
        None => None,
        Some("monthly") => Some(Term::Monthly),
        Some("quarterly") => Some(Term::Quarterly),
        Some("yearly") => Some(Term::Yearly),
        Some(t) => return Err(bad("term", format!("'{t}' is not one of monthly, quarterly, yearly"))),
    };
    Ok(Discount {
        id: r.id,
        provider: r.provider,
        name: r.name,
        kind,
        term,
        min_gpus: r.min_gpus,
        max_gpus: r.max_gpus,
        stackable: r.stackable,
        currency: r.currency,
    })
}

/// One `[[upgrade]]`: a priced change to the machines of some offers.
fn parse_upgrade(r: UpgradeRow, bad: &BadField) -> Result<Upgrade, CatalogError> {
    if !(r.monthly.is_finite() && r.monthly >= 0.0 && r.monthly < MAX_PRICE) {
        return Err(bad("monthly", format!("{} is not a price", r.monthly)));
    }
    if let Some(v) = r.ram_gb_to {
        if !(v.is_finite() && v > 0.0) {
            return Err(bad("ram_gb_to", format!("{v} must be positive")));
        }
    }
    Ok(Upgrade {
        id: r.id,
        provider: r.provider,
        name: r.name,
        offers: r.offers,
        ram_gb_to: r.ram_gb_to,
        cpu_cores_to: r.cpu_cores_to,
        disk_gb_add: r.disk_gb_add,
        network_mbps_to: r.network_mbps_to,
        monthly: r.monthly,
        currency: r.currency,
    })
}

/// Most offers one catalogue file may hold (every offer is scored × GPU
/// count × setup; 10,000 plans in well under a second).
pub const MAX_OFFERS: usize = 10_000;

/// A MIG offer priced per card-equivalent, as one slice offer per MIG
/// profile: the profile's memory and SM share, priced pro rata by compute
/// slices (an assumption, flagged). The whole-card profile (7g) is left out
/// — a MIG offer is for inference and small jobs, not a whole card — and so
/// are the media-engine variants (same memory and SMs as their base profile).
fn mig_slices(offer: &Offer, table: &crate::mig::MigTable) -> Vec<Offer> {
    let g = &table.gpu;
    let full = g.compute_slices.max(1) as f64;
    g.profiles
        .iter()
        .filter(|p| !p.special && p.compute_slices < g.compute_slices)
        .map(|p| {
            let share = p.compute_slices as f64 / full;
            let sm_share = match (p.sm_count, g.full_card_sms) {
                (Some(s), Some(f)) if f > 0 => s as f64 / f as f64,
                _ => share,
            };
            let mut o = offer.clone();
            o.id = format!("{}@{}", offer.id, p.name);
            o.name = format!("{} — MIG {}", offer.name, p.name);
            o.slice = Some(Slice {
                fraction: sm_share,
                label: format!("MIG {}", p.name),
                memory_mib: p.memory_bytes / (1 << 20),
                mig: true,
            });
            o.monthly = offer.monthly.map(|m| m.scale(share));
            o.hourly = offer.hourly.map(|h| h.scale(share));
            o.flags.push(OfferFlag::Note(format!(
                "assumed: the per-card price × {}/{} compute slices for a {} instance",
                p.compute_slices, g.compute_slices, p.name
            )));
            o
        })
        .collect()
}

/// The embedded offers (checked against `gpus`).
pub fn builtin_offers(gpus: &[GpuSpec]) -> Result<PriceBook, CatalogError> {
    parse_offers(BUILTIN_OFFERS_TOML, BUILTIN_OFFERS_FILE, gpus).map(|c| c.book)
}

/// GPUs and offers together, as the planner uses them.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalogue {
    pub gpus: Vec<GpuSpec>,
    pub book: PriceBook,
}

/// The embedded catalogue with an optional user file (`text`, `file` name)
/// layered on top: its `[[gpu]]` tables add to or override the GPUs by id;
/// its offers add to the embedded ones (same id: replaced), or replace them
/// all with `replace = true`.
pub fn load(user: Option<(&str, &str)>) -> Result<Catalogue, CatalogError> {
    let mut gpus = crate::gpus::builtin_gpus()?;
    let mut book = builtin_offers(&gpus)?;
    if let Some((text, file)) = user {
        let user_gpus = parse_gpus(text, file)?;
        gpus = merge_gpus(gpus, user_gpus, false);
        let contents = parse_offers(text, file, &gpus)?;
        if contents.replace {
            book = contents.book;
        } else {
            for o in contents.book.offers {
                match book.offers.iter_mut().find(|b| b.id == o.id) {
                    Some(slot) => *slot = o,
                    None => book.offers.push(o),
                }
            }
            book.discounts.extend(contents.book.discounts);
            book.upgrades.extend(contents.book.upgrades);
        }
    }
    Ok(Catalogue { gpus, book })
}

/// A bad field inside one catalogue entry: the error names the file, the
/// field's line (found inside the entry's span) and the reason.
fn entry_error(file: &str, text: &str, span: &std::ops::Range<usize>, field: &str, reason: String) -> CatalogError {
    CatalogError::Invalid { file: file.into(), line: field_line(text, span, field), field: field.into(), reason }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpus() -> Vec<GpuSpec> {
        crate::gpus::builtin_gpus().unwrap()
    }

    #[test]
    fn seed_offers_parse_with_ranges() {
        let book = builtin_offers(&gpus()).unwrap();
        // 9 whole offers + 2 clusters + the H100 MIG offer as 5 instances (1g.10gb … 4g.40gb)
        assert_eq!(book.offers.len(), 16);
        assert_eq!(book.discounts.len(), 4);
        assert_eq!(book.upgrades.len(), 4);
        let o = |id: &str| book.offers.iter().find(|o| o.id == id).unwrap();
        let a = o("cn-guide/8x-a100-80g-nvlink");
        assert_eq!(a.monthly, Some(PriceRange { low: 25_000.0, high: 40_000.0 }));
        assert_eq!((a.gpus_per_machine, a.link), (8, Link::Nvlink));
        assert!(a.flags.iter().any(|f| f.text() == "estimated") && a.flags.iter().any(|f| f.text() == "unofficial"));
        assert_eq!(o("cn-guide/t4").monthly, Some(PriceRange::point(900.0)));
        let c = o("cn-guide/a100-40g-custom");
        assert_eq!((c.cpu_cores, c.ram_gb, c.disk_gb, c.network_mbps), (Some(8), Some(64.0), Some(400.0), Some(100.0)));
        let s = o("cn-guide/a100-slice-1-20").slice.as_ref().unwrap();
        assert_eq!((s.memory_mib, s.fraction), (2048, 0.05));
        assert!(book.offers.iter().all(|o| o.currency == "CNY"));
        // the seed's machines: dual Xeon 8380 + 1 TB; 112 cores + 2 TB
        assert_eq!((a.cpu_cores, a.ram_gb), (Some(80), Some(1024.0)));
        let h = o("cn-guide/8x-h100-sxm");
        assert_eq!((h.cpu_cores, h.ram_gb), (Some(112), Some(2048.0)));
        // the clusters: 2–32 of those machines over InfiniBand 400G per machine,
        // 0.8 × 50 GB/s shared by 8 GPUs = 5 GB/s each
        let ib = o("cn-guide/8x-h100-sxm-ib");
        assert_eq!((ib.min_machines, ib.max_machines, ib.gpus_per_machine), (2, 32, 8));
        let f = ib.fabric.unwrap();
        assert_eq!((f.kind, f.gbps_per_node, f.nvlink_domain), (FabricKind::Infiniband, 400.0, 8));
        assert!((ib.inter_node_gbs.unwrap() - 5.0).abs() < 1e-9);
        assert_eq!((ib.cpu_cores, ib.ram_gb, ib.monthly), (h.cpu_cores, h.ram_gb, h.monthly));
    }

    #[test]
    fn mig_offer_becomes_instances_never_a_whole_card() {
        let book = builtin_offers(&gpus()).unwrap();
        let mig: Vec<&Offer> = book.offers.iter().filter(|o| o.id.starts_with("cn-guide/h100-mig")).collect();
        let names: Vec<&str> = mig.iter().map(|o| o.slice.as_ref().unwrap().label.as_str()).collect();
        assert_eq!(names, ["MIG 1g.10gb", "MIG 1g.20gb", "MIG 2g.20gb", "MIG 3g.40gb", "MIG 4g.40gb"]);
        for o in &mig {
            let s = o.slice.as_ref().unwrap();
            assert!(s.mig && s.memory_mib <= 40448 && s.fraction < 0.5, "{o:?}");
            assert_eq!((o.cpu_cores, o.ram_gb), (Some(64), Some(256.0)));
        }
        // 3g.40gb: 3 of 7 compute slices of CNY 12,000–18,000, 60 of 132 SMs
        let g3 = mig.iter().find(|o| o.id.ends_with("@3g.40gb")).unwrap();
        let m = g3.monthly.unwrap();
        assert!((m.low - 12_000.0 * 3.0 / 7.0).abs() < 1e-6 && (m.high - 18_000.0 * 3.0 / 7.0).abs() < 1e-6);
        assert!((g3.slice.as_ref().unwrap().fraction - 60.0 / 132.0).abs() < 1e-9);
        assert!(g3.flags.iter().any(|f| f.text().starts_with("assumed: the per-card price × 3/7")));
    }

    #[test]
    fn seed_discounts_compute() {
        let book = builtin_offers(&gpus()).unwrap();
        let o = |id: &str| book.offers.iter().find(|o| o.id == id).unwrap();
        // 8 × A100 80G yearly: ×0.85 then −100 → 21,150–33,900
        let (p, _) = book.best_monthly(o("cn-guide/8x-a100-80g-nvlink"), Term::Yearly).unwrap();
        assert_eq!((p.low, p.high), (21_150.0, 33_900.0));
        // single RTX 3090 yearly: 1750 × 0.8 − 100 = 1300
        let (p, _) = book.best_monthly(o("cn-guide/rtx-3090"), Term::Yearly).unwrap();
        assert_eq!(p.low, 1300.0);
        // quarterly: 1750 × 0.95 − 100 = 1562.5
        let (p, _) = book.best_monthly(o("cn-guide/rtx-3090"), Term::Quarterly).unwrap();
        assert_eq!(p.low, 1562.5);
    }

    const USD: &str = r#"
replace = true

[[offer]]
id = "acme/h100"
provider = "acme"
name = "H100 hourly"
gpu = "H100"
hourly = [2.0, 3.5]
currency = "USD"
"#;

    #[test]
    fn other_currency_replaces() {
        let cat = load(Some((USD, "usd.toml"))).unwrap();
        assert_eq!(cat.book.offers.len(), 1);
        let o = &cat.book.offers[0];
        assert_eq!((o.gpu.as_str(), o.currency.as_str()), ("h100-sxm", "USD"));
        assert_eq!(o.hourly, Some(PriceRange { low: 2.0, high: 3.5 }));
        let added = load(Some((&USD.replace("replace = true", ""), "usd.toml"))).unwrap();
        assert_eq!(added.book.offers.len(), 17);
    }

    #[test]
    fn user_gpu_and_offer_in_one_file() {
        let text = r#"
[[gpu]]
id = "mystery-48"
name = "Mystery 48"
memory_mib = 49152
memory_gb = 48.0
bandwidth_gbs = 900.0
bf16_tflops = 150.0
pcie_gen = 4
source = "mine"

[[offer]]
id = "me/m48"
provider = "me"
name = "m48"
gpu = "mystery-48"
monthly = 100
currency = "EUR"
"#;
        let cat = load(Some((text, "mine.toml"))).unwrap();
        assert!(cat.gpus.iter().any(|g| g.id == "mystery-48"));
        assert!(cat.book.offers.iter().any(|o| o.id == "me/m48" && o.currency == "EUR"));
    }

    #[test]
    fn bad_offer_files_name_file_line_field() {
        let g = gpus();
        // unknown GPU id, with a suggestion
        let e = parse_offers(&USD.replace("gpu = \"H100\"", "gpu = \"rtx-3080\""), "o.toml", &g).unwrap_err();
        assert!(matches!(&e, CatalogError::UnknownOfferGpu { line: 8, .. }), "{e:?}");
        assert!(e.to_string().starts_with("o.toml:8: field `gpu`"), "{e}");
        // mistyped price
        let e = parse_offers(&USD.replace("hourly = [2.0, 3.5]", "hourly = \"cheap\""), "o.toml", &g).unwrap_err();
        assert!(matches!(&e, CatalogError::Invalid { line: 9, field, .. } if field == "hourly"), "{e:?}");
        assert!(e.to_string().contains("expected a number or [low, high]"), "{e}");
        // inverted range
        let e = parse_offers(&USD.replace("[2.0, 3.5]", "[3.5, 2.0]"), "o.toml", &g).unwrap_err();
        assert!(matches!(&e, CatalogError::Invalid { line: 9, field, .. } if field == "hourly"), "{e:?}");
        // no price at all
        let e = parse_offers(&USD.replace("hourly = [2.0, 3.5]\n", ""), "o.toml", &g).unwrap_err();
        assert!(matches!(&e, CatalogError::Invalid { field, .. } if field == "monthly"), "{e:?}");
        // unknown key
        let e = parse_offers(&USD.replace("currency = \"USD\"", "currency = \"USD\"\nprice = 3"), "o.toml", &g)
            .unwrap_err();
        assert!(matches!(&e, CatalogError::Parse { field: Some(f), .. } if f == "price"), "{e:?}");
        // NVLink on a card without it
        let e =
            parse_offers(&USD.replace("gpu = \"H100\"", "gpu = \"t4\"\nlink = \"nvlink\""), "o.toml", &g).unwrap_err();
        assert!(matches!(&e, CatalogError::Invalid { field, .. } if field == "link"), "{e:?}");
        // missing currency
        let e = parse_offers(&USD.replace("currency = \"USD\"\n", ""), "o.toml", &g).unwrap_err();
        assert!(matches!(&e, CatalogError::Parse { field: Some(f), .. } if f == "currency"), "{e:?}");
    }
}
