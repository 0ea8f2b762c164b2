//! Rental offers and their prices: plain data (parsed by
//! `vramfit-catalog`), and the arithmetic that turns an offer, a card count
//! and a job length into money. Prices stay low–high ranges to the output;
//! currencies are never converted (plans in different currencies are ranked
//! separately).

use serde::{Deserialize, Serialize};
use vramfit_core::hardware::Link;

/// Hours in a billing month (365 × 24 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// A price that may be a range (`low == high` for a single figure).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PriceRange {
    pub low: f64,
    pub high: f64,
}

impl PriceRange {
    pub fn point(v: f64) -> PriceRange {
        PriceRange { low: v, high: v }
    }
    pub fn scale(self, f: f64) -> PriceRange {
        PriceRange { low: self.low * f, high: self.high * f }
    }
    pub fn plus(self, o: PriceRange) -> PriceRange {
        PriceRange { low: self.low + o.low, high: self.high + o.high }
    }
    pub fn offset(self, v: f64) -> PriceRange {
        PriceRange { low: (self.low + v).max(0.0), high: (self.high + v).max(0.0) }
    }
    /// The middle of the range: what plans are ranked and compared by. A
    /// range's low end is the cheapest listing a guide saw, not a price the
    /// user can count on; ranking on it let an offer with a wide range (or a
    /// derived one, such as a MIG slice's pro-rata price) beat a plain
    /// listed price it only matches at its most optimistic.
    pub fn mid(self) -> f64 {
        (self.low + self.high) / 2.0
    }
    pub fn is_range(self) -> bool {
        (self.high - self.low).abs() > f64::EPSILON * self.high.abs().max(1.0)
    }
}

/// A fractional GPU: a vGPU or time-sliced share of one card.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slice {
    /// share of the card's compute and bandwidth, e.g. 0.05 for 1/20
    pub fraction: f64,
    /// how the provider spells it, e.g. "1/20"
    pub label: String,
    /// memory of the slice as the guest sees it, MiB
    pub memory_mib: u64,
    /// a MIG instance (hardware-isolated SMs and memory) rather than a vGPU /
    /// time-sliced share
    #[serde(default)]
    pub mig: bool,
}

impl Slice {
    /// Memory of the slice in bytes (as [`vramfit_core::GpuSpec::memory_bytes`]).
    pub fn memory_bytes(&self) -> u64 {
        self.memory_mib.saturating_mul(vramfit_core::units::MIB)
    }
}

/// A remark the catalogue attaches to an offer. One is a kind the output
/// treats apart — [`OfferFlag::CheckLivePrice`], said once for every plan in
/// the report's footer rather than on each row — the rest are notes shown as
/// written (`estimated`, `unofficial`, an assumption). Written (JSON, the
/// catalogue's TOML) as its text either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OfferFlag {
    /// the price is a snapshot of a listing: check the provider's live price
    CheckLivePrice,
    Note(String),
}

impl OfferFlag {
    /// The catalogue's spelling of [`OfferFlag::CheckLivePrice`].
    pub const CHECK_LIVE_PRICE: &'static str = "check the live price";

    pub fn text(&self) -> &str {
        match self {
            OfferFlag::CheckLivePrice => Self::CHECK_LIVE_PRICE,
            OfferFlag::Note(s) => s,
        }
    }
}

impl From<String> for OfferFlag {
    fn from(s: String) -> OfferFlag {
        if s == Self::CHECK_LIVE_PRICE {
            OfferFlag::CheckLivePrice
        } else {
            OfferFlag::Note(s)
        }
    }
}

impl From<&str> for OfferFlag {
    fn from(s: &str) -> OfferFlag {
        OfferFlag::from(s.to_string())
    }
}

impl std::fmt::Display for OfferFlag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

impl Serialize for OfferFlag {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.text())
    }
}

impl<'de> Deserialize<'de> for OfferFlag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<OfferFlag, D::Error> {
        String::deserialize(d).map(OfferFlag::from)
    }
}

/// The kind of network joining the machines of a multi-machine job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FabricKind {
    Infiniband,
    Roce,
    Ethernet,
}

impl FabricKind {
    pub fn name(self) -> &'static str {
        match self {
            FabricKind::Infiniband => "InfiniBand",
            FabricKind::Roce => "RoCE",
            FabricKind::Ethernet => "Ethernet",
        }
    }
}

/// Share of a fabric's line rate NCCL collectives reach between machines:
/// `nccl-tests` bus bandwidth over InfiniBand NDR (400 Gb/s, 50 GB/s) is
/// commonly reported at 40–45 GB/s per NIC, ~0.8–0.9 of the line rate
/// (NVIDIA, "Doubling all2all Performance with NVIDIA Collective
/// Communication Library 2.12"; NCCL's `NCCL_IB` tuning notes). 0.8 is the
/// conservative end.
pub const FABRIC_EFFICIENCY: f64 = 0.8;

/// The network between the machines of an offer: its kind, its line rate
/// per machine (all of one machine's NICs together) and how many GPUs share
/// one NVLink domain (tensor parallelism never leaves one).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Fabric {
    pub kind: FabricKind,
    /// line rate per machine, Gb/s (e.g. one 400G InfiniBand NIC: 400)
    pub gbps_per_node: f64,
    /// GPUs joined by NVLink (a machine's GPUs on an NVLink machine)
    pub nvlink_domain: u64,
}

impl Fabric {
    /// What a collective reaches between machines, bytes/s per machine
    /// (line rate / 8 × [`FABRIC_EFFICIENCY`]).
    pub fn node_bytes_per_s(&self) -> f64 {
        self.gbps_per_node * 1e9 / 8.0 * FABRIC_EFFICIENCY
    }

    /// "InfiniBand 400 Gb/s per machine".
    pub fn describe(&self) -> String {
        format!("{} {} Gb/s per machine", self.kind.name(), self.gbps_per_node)
    }
}

fn one_machine() -> u64 {
    1
}

/// One rentable machine type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Offer {
    /// unique id, e.g. `cn-guide/a100-40g-custom`
    pub id: String,
    pub provider: String,
    /// what the provider calls it
    pub name: String,
    /// GPU catalogue id
    pub gpu: String,
    /// GPUs in one rented unit (the price is per unit)
    pub gpus_per_machine: u64,
    /// most GPUs one machine can hold when units are stacked (per-card pricing);
    /// equals `gpus_per_machine` for a fixed machine
    pub max_gpus: u64,
    /// interconnect between this machine's GPUs
    pub link: Link,
    /// a fraction of one GPU (vGPU / time-slicing), never multi-instance
    pub slice: Option<Slice>,
    pub cpu_cores: Option<u64>,
    pub ram_gb: Option<f64>,
    pub disk_gb: Option<f64>,
    pub network_mbps: Option<f64>,
    /// price per unit per month
    pub monthly: Option<PriceRange>,
    /// price per unit per hour
    pub hourly: Option<PriceRange>,
    /// hourly billing: the fewest hours a rental bills (None: 1 hour)
    #[serde(default)]
    pub min_hours: Option<f64>,
    pub currency: String,
    /// e.g. "estimated", "unofficial", "check the live price"
    pub flags: Vec<OfferFlag>,
    pub source: String,
    /// machines that can be joined into one job
    pub max_machines: u64,
    /// fewest machines it is rented as (a cluster offer beside its single
    /// machine: 2); 1 by default
    #[serde(default = "one_machine")]
    pub min_machines: u64,
    /// bandwidth between machines, GB/s per GPU (None: no multi-machine jobs);
    /// with a [`Fabric`], its rate per machine shared by the machine's GPUs
    pub inter_node_gbs: Option<f64>,
    /// the network between machines, when the catalogue names it
    #[serde(default)]
    pub fabric: Option<Fabric>,
}

impl Offer {
    /// Hourly price of one unit: the hourly figure, else the monthly one prorated.
    pub fn hourly_rate(&self) -> Option<(PriceRange, bool)> {
        match (self.hourly, self.monthly) {
            (Some(h), _) => Some((h, false)),
            (None, Some(m)) => Some((m.scale(1.0 / HOURS_PER_MONTH), true)),
            (None, None) => None,
        }
    }

    /// Units needed for `gpus` cards.
    pub fn units_for(&self, gpus: u64) -> u64 {
        gpus.div_ceil(self.gpus_per_machine.max(1))
    }

    /// GPUs one machine holds (for TP domains and the intra-node link).
    pub fn gpus_per_node(&self) -> u64 {
        self.max_gpus.max(self.gpus_per_machine).max(1)
    }
}

/// How a discount changes a price.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiscountKind {
    /// multiply the monthly price
    Factor(f64),
    /// subtract this much per month per unit (in the discount's currency)
    MinusPerMonth(f64),
}

/// Commitment term a discount needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Term {
    Monthly,
    Quarterly,
    Yearly,
}

impl Term {
    pub fn name(self) -> &'static str {
        match self {
            Term::Monthly => "monthly",
            Term::Quarterly => "quarterly",
            Term::Yearly => "yearly",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Discount {
    pub id: String,
    pub provider: String,
    pub name: String,
    pub kind: DiscountKind,
    /// term it needs (None: any)
    pub term: Option<Term>,
    /// applies only to units with at least this many GPUs
    pub min_gpus: u64,
    /// applies only to units with fewer than this many GPUs (None: no limit)
    pub max_gpus: Option<u64>,
    /// can be combined with other discounts
    pub stackable: bool,
    pub currency: String,
}

/// A paid hardware upgrade of a machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Upgrade {
    pub id: String,
    pub provider: String,
    pub name: String,
    /// offers it applies to (empty: all of the provider's offers)
    pub offers: Vec<String>,
    pub ram_gb_to: Option<f64>,
    pub cpu_cores_to: Option<u64>,
    pub disk_gb_add: Option<f64>,
    pub network_mbps_to: Option<f64>,
    /// extra per month per unit
    pub monthly: f64,
    pub currency: String,
}

/// The priced catalogue the planner searches.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PriceBook {
    pub offers: Vec<Offer>,
    pub discounts: Vec<Discount>,
    pub upgrades: Vec<Upgrade>,
}

impl PriceBook {
    /// The best monthly price per unit for a term: the best non-stackable
    /// discount (or none) combined with every stackable one that applies.
    /// Returns the price and the discount ids used.
    pub fn best_monthly(&self, offer: &Offer, term: Term) -> Option<(PriceRange, Vec<String>)> {
        let base = offer.monthly?;
        let applies = |d: &&Discount| {
            d.provider == offer.provider
                && d.currency == offer.currency
                && d.term.is_none_or(|t| t == term)
                && offer.gpus_per_machine >= d.min_gpus
                && d.max_gpus.is_none_or(|m| offer.gpus_per_machine < m)
        };
        let apply = |p: PriceRange, d: &Discount| match d.kind {
            DiscountKind::Factor(f) => p.scale(f),
            DiscountKind::MinusPerMonth(v) => p.offset(-v),
        };
        let stack: Vec<&Discount> = self.discounts.iter().filter(applies).filter(|d| d.stackable).collect();
        let mut best: Option<(PriceRange, Vec<String>)> = None;
        let singles: Vec<Option<&Discount>> = std::iter::once(None)
            .chain(self.discounts.iter().filter(applies).filter(|d| !d.stackable).map(Some))
            .collect();
        for single in singles {
            let mut p = base;
            let mut ids = Vec::new();
            if let Some(d) = single {
                p = apply(p, d);
                ids.push(d.id.clone());
            }
            // factors before fixed amounts
            for d in stack.iter().filter(|d| matches!(d.kind, DiscountKind::Factor(_))) {
                p = apply(p, d);
                ids.push(d.id.clone());
            }
            for d in stack.iter().filter(|d| matches!(d.kind, DiscountKind::MinusPerMonth(_))) {
                p = apply(p, d);
                ids.push(d.id.clone());
            }
            if best.as_ref().is_none_or(|(b, _)| p.low < b.low) {
                best = Some((p, ids));
            }
        }
        best
    }

    /// Cheapest upgrades that bring the machine's RAM to `need_gb` (None: not possible).
    pub fn ram_upgrade(&self, offer: &Offer, need_gb: f64) -> Option<Vec<&Upgrade>> {
        let have = offer.ram_gb?;
        if have >= need_gb {
            return Some(Vec::new());
        }
        self.upgrades
            .iter()
            .filter(|u| u.provider == offer.provider && u.currency == offer.currency)
            .filter(|u| u.offers.is_empty() || u.offers.iter().any(|o| o == &offer.id))
            .filter(|u| u.ram_gb_to.is_some_and(|r| r >= need_gb))
            .min_by(|a, b| a.monthly.total_cmp(&b.monthly))
            .map(|u| vec![u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(gpus: u64) -> Offer {
        Offer {
            id: "p/x".into(),
            provider: "p".into(),
            name: "x".into(),
            gpu: "a100-80gb-sxm".into(),
            gpus_per_machine: gpus,
            max_gpus: gpus,
            link: Link::Nvlink,
            slice: None,
            cpu_cores: Some(8),
            ram_gb: Some(64.0),
            disk_gb: None,
            network_mbps: None,
            monthly: Some(PriceRange { low: 25_000.0, high: 40_000.0 }),
            hourly: None,
            min_hours: None,
            currency: "CNY".into(),
            flags: vec![],
            source: "t".into(),
            max_machines: 1,
            min_machines: 1,
            inter_node_gbs: None,
            fabric: None,
        }
    }

    fn d(id: &str, kind: DiscountKind, term: Option<Term>, min_gpus: u64, max: Option<u64>, stack: bool) -> Discount {
        Discount {
            id: id.into(),
            provider: "p".into(),
            name: id.into(),
            kind,
            term,
            min_gpus,
            max_gpus: max,
            stackable: stack,
            currency: "CNY".into(),
        }
    }

    #[test]
    fn discounts_pick_best_and_stack() {
        let book = PriceBook {
            offers: vec![],
            discounts: vec![
                d("yearly", DiscountKind::Factor(0.8), Some(Term::Yearly), 0, Some(8), false),
                d("yearly-8gpu", DiscountKind::Factor(0.85), Some(Term::Yearly), 8, None, false),
                d("quarterly", DiscountKind::Factor(0.95), Some(Term::Quarterly), 0, None, false),
                d("repeat", DiscountKind::MinusPerMonth(100.0), None, 0, None, true),
            ],
            upgrades: vec![],
        };
        // 8-GPU machine yearly: 25,000 × 0.85 − 100 = 21,150; 40,000 × 0.85 − 100 = 33,900
        let (p, ids) = book.best_monthly(&offer(8), Term::Yearly).unwrap();
        assert_eq!((p.low, p.high), (21_150.0, 33_900.0));
        assert_eq!(ids, vec!["yearly-8gpu", "repeat"]);
        // single card yearly: 2,800 × 0.8 − 100 = 2,140
        let mut single = offer(1);
        single.monthly = Some(PriceRange::point(2800.0));
        let (p, _) = book.best_monthly(&single, Term::Yearly).unwrap();
        assert_eq!(p.low, 2140.0);
        // monthly term: only the repeat discount, 2,800 − 100
        let (p, ids) = book.best_monthly(&single, Term::Monthly).unwrap();
        assert_eq!((p.low, ids.len()), (2700.0, 1));
    }

    #[test]
    fn prorated_hourly() {
        let o = offer(8);
        let (h, prorated) = o.hourly_rate().unwrap();
        assert!(prorated);
        // 25,000 / 730 = 34.246…
        assert!((h.low - 34.2466).abs() < 1e-3);
        assert_eq!(o.units_for(16), 2);
    }
}
