//! The bandwidth reports against what the cards and links should give.
//!
//! - Host↔device (`bandwidthTest`, pinned memory): the rate against the
//!   GPU's PCIe link, nominal gen × width ([`links::pcie_gbs`]); below
//!   [`links::FINDING_SHARE`] of nominal is a finding, saying which
//!   generation the rate looks like (an A100's gen4 x16 link at 12.3 GB/s
//!   is gen3 speed).
//! - GPU↔GPU (`p2pBandwidthLatencyTest`): a pair whose P2P rate is at most
//!   one direction of the widest PCIe link any of the GPUs has cannot have
//!   used NVLink. With `--expect-nvlink` such a pair fails the verdict.
//!   NVLink pairs are compared with links × per-link rate.
//! - Collectives (`all_reduce_perf`): the peak bus bandwidth is "the speed
//!   of the hardware bottleneck: NVLink, PCI, QPI, or network"
//!   (nccl-tests doc/PERFORMANCE.md); on one host, at PCIe speed it fails
//!   `--expect-nvlink`; across hosts it measures the network too and is
//!   reported, not judged against a link.

use serde::Serialize;

use super::bandwidth_test::{BandwidthTest, Direction, HostMemory};
use super::links::{self, looks_like_gen, nvlink_link_gbs, nvlink_links, pcie_gbs, FINDING_SHARE, TYPICAL_EFFICIENCY};
use super::nccl::NcclTest;
use super::p2p::{MatrixKind, P2pTest};
use crate::machine::Machine;
use crate::verdict::{family_cards, identify, norm, Expectation, Finding, Level, RefCard};

/// The reports given, each with its file name.
#[derive(Debug, Clone, Default)]
pub struct Measurements {
    pub bandwidth_test: Option<(String, BandwidthTest)>,
    pub p2p: Option<(String, P2pTest)>,
    pub nccl: Option<(String, NcclTest)>,
}

impl Measurements {
    pub fn is_empty(&self) -> bool {
        self.bandwidth_test.is_none() && self.p2p.is_none() && self.nccl.is_none()
    }
}

/// Where a GPU's link figures come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Link {
    pub gen: u32,
    pub width: u32,
    /// `nvidia-smi` (the GPU's reported maximum) or `catalogue (<card>; x16 assumed)`
    pub from: String,
}

/// One host↔device rate judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostLink {
    pub device: u32,
    pub name: String,
    pub direction: Direction,
    pub memory: HostMemory,
    /// devices whose rates the figure sums (bandwidthTest `--device=all`)
    pub devices: u32,
    pub size_bytes: u64,
    pub gbs: f64,
    pub link: Option<Link>,
    /// nominal rate of that link, one direction
    pub nominal_gbs: Option<f64>,
    /// measured per device over nominal
    pub share: Option<f64>,
    /// the PCIe generation (at the link's width) the rate looks like
    pub looks_like_gen: Option<u32>,
}

/// Device-to-device copy rate against the card's memory bandwidth.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceMemory {
    pub device: u32,
    pub name: String,
    pub gbs: f64,
    pub card: Option<String>,
    pub card_gbs: Option<f64>,
    pub share: Option<f64>,
}

/// One GPU pair of the P2P test.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairRate {
    pub a: usize,
    pub b: usize,
    /// one direction, the slower of the two, GB/s
    pub gbs: f64,
    pub matrix: MatrixKind,
    /// faster than any PCIe link here: it used NVLink
    pub over_nvlink: bool,
    /// peer access as the test reports it (`CAN`/`CANNOT Access Peer`)
    pub peer_access: Option<bool>,
    /// `NV18`, `PIX`, … when a topology was given
    pub topo_link: Option<String>,
    /// NVLink rate expected for the pair (links × per-link rate), one direction
    pub nvlink_gbs: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct P2pSummary {
    pub devices: usize,
    pub pcie_ceiling_gbs: f64,
    pub pcie_ceiling: String,
    pub pairs: Vec<PairRate>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    Nvlink,
    Pcie,
    /// ranks on more than one host
    Network,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NcclSummary {
    pub test: Option<String>,
    pub ranks: usize,
    pub hosts: usize,
    pub peak_busbw_gbs: f64,
    pub peak_size_bytes: u64,
    pub avg_busbw_gbs: Option<f64>,
    pub wrong: u64,
    pub bottleneck: Bottleneck,
    /// the bottleneck's nominal rate, one direction (NVLink per GPU, or the PCIe link)
    pub reference_gbs: Option<f64>,
    pub share: Option<f64>,
}

/// Everything the bandwidth reports say.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct BandwidthReport {
    pub sources: Vec<String>,
    pub host_links: Vec<HostLink>,
    pub device_memory: Vec<DeviceMemory>,
    pub p2p: Option<P2pSummary>,
    pub nccl: Option<NcclSummary>,
    pub findings: Vec<Finding>,
}

/// A rate as the tools print it: whole GB/s from 100 up, else up to two
/// decimals (`12.3 GB/s`, `15.75 GB/s`, `4 GB/s`).
fn gbs(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} GB/s")
    } else {
        let s = format!("{v:.2}");
        format!("{} GB/s", s.trim_end_matches('0').trim_end_matches('.'))
    }
}

fn pct(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

/// The known card a GPU name is, for a tool that prints names only: the
/// product-name match, else the family's cards when they agree.
fn card_by_name<'a>(name: &str, refs: &'a [RefCard]) -> Vec<&'a RefCard> {
    let probe = crate::machine::Gpu::new(0, name);
    if let Some((r, _)) = identify(&probe, refs) {
        return vec![r];
    }
    // among the family's cards, those whose id words the name also has
    // (`A100-SXM4-40GB` is the SXM card, not the PCIe one)
    let n = norm(name);
    let fam = family_cards(name, refs);
    let score = |r: &RefCard| r.id.split('-').filter(|seg| n.contains(&norm(seg))).count();
    let best = fam.iter().map(|r| score(r)).max().unwrap_or(0);
    fam.into_iter().filter(|r| score(r) == best).collect()
}

/// The GPU's PCIe link: the machine's report for that GPU (same index, same
/// family) when given, else the catalogue generation of the card the name
/// is (when all candidate cards agree), at x16.
fn link_of(index: Option<u32>, name: &str, m: &Machine, refs: &[RefCard]) -> Option<Link> {
    let same = |g: &&crate::machine::Gpu| {
        let fam = card_by_name(name, refs).first().map(|r| r.family.clone());
        fam.is_none_or(|f| norm(&g.name).contains(&f))
    };
    if let Some(g) = index.and_then(|i| m.gpus.iter().find(|g| g.index == i)).filter(same) {
        if let (Some(gen), Some(width)) = (g.pcie_gen_max, g.pcie_width_max) {
            return Some(Link { gen, width, from: format!("nvidia-smi (GPU {} maximum)", g.index) });
        }
    }
    let cards = card_by_name(name, refs);
    let gens: Vec<u8> = cards.iter().filter_map(|r| r.pcie_gen).collect();
    match (cards.first(), gens.first()) {
        (Some(r), Some(&g)) if gens.iter().all(|&x| x == g) => {
            Some(Link { gen: g as u32, width: 16, from: format!("catalogue ({}: gen{g}; x16 assumed)", r.name) })
        }
        _ => None,
    }
}

fn push(f: &mut Vec<Finding>, level: Level, code: &'static str, message: String) {
    f.push(Finding { level, code, message });
}

/// Judge the reports against the machine, the expectation and the known cards.
pub fn judge(meas: &Measurements, m: &Machine, e: &Expectation, refs: &[RefCard]) -> BandwidthReport {
    let mut r = BandwidthReport::default();
    let judged = e.count.is_some() || e.card.is_some() || e.nvlink;
    if let Some((file, bt)) = &meas.bandwidth_test {
        r.sources.push(format!("{file} (bandwidthTest)"));
        host_links(bt, m, refs, &mut r);
    }
    // The PCIe ceiling: one direction of the widest link of any GPU involved.
    // The GPUs the GPU↔GPU reports cover: as they name them, else as the
    // GPU report does, else the expected card.
    let names: Vec<String> = match (&meas.p2p, &meas.nccl) {
        (Some((_, p)), _) if !p.devices.is_empty() => p.devices.clone(),
        (_, Some((_, n))) if !n.ranks.is_empty() => n.ranks.iter().map(|x| x.name.clone()).collect(),
        _ if !m.gpus.is_empty() => m.gpus.iter().map(|g| g.name.clone()).collect(),
        _ => e.card.iter().map(|c| c.name.clone()).collect(),
    };
    let ceiling = names
        .iter()
        .enumerate()
        .filter_map(|(i, n)| link_of(Some(i as u32), n, m, refs))
        .filter_map(|l| pcie_gbs(l.gen, l.width).map(|g| (g, l)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let (ceiling_gbs, ceiling_label) = match ceiling {
        Some((g, l)) => (g, format!("PCIe gen{} x{} ({})", l.gen, l.width, l.from)),
        None => (
            pcie_gbs(links::WIDEST_PCIE_GEN, 16).unwrap_or(63.0),
            format!("PCIe gen{} x16, the widest GPU link (the GPUs' links are not known)", links::WIDEST_PCIE_GEN),
        ),
    };
    let nvcard: Option<&RefCard> = names
        .first()
        .and_then(|n| card_by_name(n, refs).into_iter().find(|c| c.nvlink_gbs.is_some()))
        .or(e.card.as_ref().filter(|c| c.nvlink_gbs.is_some()));
    if let Some((file, p)) = &meas.p2p {
        r.sources.push(format!("{file} (p2pBandwidthLatencyTest)"));
        p2p(p, m, e, nvcard, ceiling_gbs, &ceiling_label, &mut r);
    }
    if let Some((file, n)) = &meas.nccl {
        r.sources.push(format!("{file} (nccl-tests)"));
        nccl(n, m, e, judged, nvcard, ceiling_gbs, &ceiling_label, &mut r);
    }
    // Reports from another machine than the GPU report describe.
    let reported: Vec<(&str, usize)> = [
        meas.bandwidth_test.as_ref().map(|(f, b)| (f.as_str(), b.devices.len())),
        meas.p2p.as_ref().map(|(f, p)| (f.as_str(), p.size())),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !m.gpus.is_empty() {
        let fams: Vec<String> =
            m.gpus.iter().filter_map(|g| card_by_name(&g.name, refs).first().map(|c| c.family.clone())).collect();
        let foreign: Vec<&String> =
            names.iter().filter(|n| !fams.is_empty() && !fams.iter().any(|f| norm(n).contains(f))).collect();
        if let Some(n) = foreign.first() {
            push(
                &mut r.findings,
                if judged { Level::Fail } else { Level::Warn },
                "bandwidth_inputs",
                format!("a bandwidth report names {n}, which is not a GPU of this machine: give reports from the same machine"),
            );
        }
        for (file, k) in reported {
            if k > m.gpus.len() {
                push(
                    &mut r.findings,
                    Level::Warn,
                    "bandwidth_inputs",
                    format!("{file} covers {k} GPUs, the GPU report {}", m.gpus.len()),
                );
            }
        }
    }
    r
}

fn host_links(bt: &BandwidthTest, m: &Machine, refs: &[RefCard], r: &mut BandwidthReport) {
    let (dev, name) =
        bt.devices.first().cloned().unwrap_or((0, m.gpus.first().map(|g| g.name.clone()).unwrap_or_default()));
    let link = link_of(Some(dev), &name, m, refs);
    for d in [Direction::HostToDevice, Direction::DeviceToHost] {
        let Some(t) = bt.best(d) else {
            if bt.transfers.iter().any(|t| t.direction == d) {
                push(
                    &mut r.findings,
                    Level::Info,
                    "host_link",
                    format!(
                        "GPU {dev} {}: only pageable memory was measured; pinned (the default) is what the link gives",
                        d.label()
                    ),
                );
            }
            continue;
        };
        let per_device = t.gbs / t.devices.max(1) as f64;
        let nominal = link.as_ref().and_then(|l| pcie_gbs(l.gen, l.width));
        let share = nominal.map(|n| per_device / n);
        let like = link.as_ref().and_then(|l| looks_like_gen(per_device, l.width));
        let summed = if t.devices > 1 {
            format!(" ({} devices summed: {} each)", t.devices, gbs(per_device))
        } else {
            String::new()
        };
        match (&link, nominal, share) {
            (Some(l), Some(n), Some(s)) if s < FINDING_SHARE => push(
                &mut r.findings,
                Level::Warn,
                "host_link",
                format!(
                    "GPU {dev} {} {}{summed} is {} of its PCIe gen{} x{} link ({} nominal, ~{} typical at {}; link from {}): {}. \
                     Check the link's current generation and width (nvidia-smi -q: PCIe Generation / Link Width Current), \
                     the slot or riser, and that the test ran on the GPU's NUMA node",
                    d.label(),
                    gbs(t.gbs),
                    pct(s),
                    l.gen,
                    l.width,
                    gbs(n),
                    gbs(n * TYPICAL_EFFICIENCY),
                    pct(TYPICAL_EFFICIENCY),
                    l.from,
                    match like {
                        Some(g) if g < l.gen => format!("that is PCIe gen{g} x{} speed", l.width),
                        _ => "below any healthy PCIe link of that width".into(),
                    }
                ),
            ),
            (Some(l), Some(n), Some(s)) => push(
                &mut r.findings,
                Level::Info,
                "host_link",
                format!(
                    "GPU {dev} {} {}{summed}: {} of PCIe gen{} x{} ({} nominal; link from {})",
                    d.label(),
                    gbs(t.gbs),
                    pct(s),
                    l.gen,
                    l.width,
                    gbs(n),
                    l.from
                ),
            ),
            _ => push(
                &mut r.findings,
                Level::Info,
                "host_link",
                format!("GPU {dev} {} {}{summed}: the GPU's PCIe link is not known, so it is not judged", d.label(), gbs(t.gbs)),
            ),
        }
        r.host_links.push(HostLink {
            device: dev,
            name: name.clone(),
            direction: d,
            memory: t.memory,
            devices: t.devices,
            size_bytes: t.size_bytes,
            gbs: t.gbs,
            link: link.clone(),
            nominal_gbs: nominal,
            share,
            looks_like_gen: like,
        });
    }
    if let Some(t) = bt
        .best(Direction::DeviceToDevice)
        .or_else(|| bt.transfers.iter().find(|t| t.direction == Direction::DeviceToDevice))
    {
        // bandwidthTest counts a device copy's read and write (2 × size / time).
        let card = card_by_name(&name, refs).into_iter().find(|c| c.memory_gbs.is_some());
        let card_gbs = card.and_then(|c| c.memory_gbs);
        let share = card_gbs.map(|c| t.gbs / c);
        if let (Some(c), Some(cg), Some(s)) = (card, card_gbs, share) {
            push(
                &mut r.findings,
                Level::Info,
                "device_memory",
                format!(
                    "GPU {dev} device→device copy {}: {} of the {}'s {} memory bandwidth",
                    gbs(t.gbs),
                    pct(s),
                    c.name,
                    gbs(cg)
                ),
            );
        }
        r.device_memory.push(DeviceMemory {
            device: dev,
            name: name.clone(),
            gbs: t.gbs,
            card: card.map(|c| c.name.clone()),
            card_gbs,
            share,
        });
    }
}

fn pair_list(pairs: &[&PairRate]) -> String {
    let shown: Vec<String> = pairs.iter().take(6).map(|p| format!("GPU{}↔GPU{} {}", p.a, p.b, gbs(p.gbs))).collect();
    format!("{}{}", shown.join(", "), if pairs.len() > shown.len() { ", …" } else { "" })
}

fn p2p(
    p: &P2pTest,
    m: &Machine,
    e: &Expectation,
    nvcard: Option<&RefCard>,
    ceiling: f64,
    ceiling_label: &str,
    r: &mut BandwidthReport,
) {
    let n = p.size();
    let pairs = pair_rates(p, m, nvcard, ceiling);
    let slow: Vec<&PairRate> = pairs.iter().filter(|q| !q.over_nvlink).collect();
    let no_access = slow.iter().any(|q| q.peer_access == Some(false));
    let access_note = if no_access { " (peer access is off: the test says `CANNOT Access Peer`)" } else { "" };
    if pairs.is_empty() {
        push(&mut r.findings, Level::Info, "p2p_bandwidth", "the P2P test has one GPU: no pair to measure".into());
    } else if e.nvlink && !slow.is_empty() {
        push(
            &mut r.findings,
            Level::Fail,
            "nvlink_p2p",
            format!(
                "{} of {} GPU pairs move data at PCIe speed in the P2P test ({}): at most one direction of {} = {}, so not over NVLink{access_note}",
                slow.len(),
                pairs.len(),
                pair_list(&slow),
                ceiling_label,
                gbs(ceiling)
            ),
        );
    } else if e.nvlink {
        push(
            &mut r.findings,
            Level::Pass,
            "nvlink_p2p",
            format!(
                "all {} GPU pairs move data faster than any PCIe link here ({}) in the P2P test",
                pairs.len(),
                gbs(ceiling)
            ),
        );
    }
    let topo_nv_slow: Vec<&PairRate> =
        slow.iter().copied().filter(|q| q.topo_link.as_deref().is_some_and(|l| l.starts_with("NV"))).collect();
    if !topo_nv_slow.is_empty() {
        push(
            &mut r.findings,
            Level::Warn,
            "nvlink_unused",
            format!(
                "the topology shows NVLink but {} pair(s) copy at PCIe speed ({}){access_note}: peer-to-peer over NVLink is not in use",
                topo_nv_slow.len(),
                pair_list(&topo_nv_slow)
            ),
        );
    }
    let weak: Vec<&PairRate> =
        pairs.iter().filter(|q| q.over_nvlink && q.nvlink_gbs.is_some_and(|x| q.gbs < x * FINDING_SHARE)).collect();
    if let (Some(q), Some(x)) = (weak.first(), weak.first().and_then(|q| q.nvlink_gbs)) {
        push(
            &mut r.findings,
            Level::Warn,
            "p2p_bandwidth",
            format!(
                "{} NVLink pair(s) below {} of their nominal rate ({}; e.g. GPU{}↔GPU{} {} of {} per direction, ~{} typical)",
                weak.len(),
                pct(FINDING_SHARE),
                pair_list(&weak),
                q.a,
                q.b,
                gbs(q.gbs),
                gbs(x),
                pct(TYPICAL_EFFICIENCY)
            ),
        );
    }
    throttle_finding(p, &pairs, &mut r.findings);
    slowest_pair_finding(&pairs, slow.len(), ceiling, ceiling_label, &mut r.findings);
    r.p2p = Some(P2pSummary { devices: n, pcie_ceiling_gbs: ceiling, pcie_ceiling: ceiling_label.into(), pairs });
}

/// The measured rate of every GPU pair, beside what the topology and the
/// card say its NVLink should carry.
fn pair_rates(p: &P2pTest, m: &Machine, nvcard: Option<&RefCard>, ceiling: f64) -> Vec<PairRate> {
    let n = p.size();
    let per_link = nvcard.and_then(nvlink_link_gbs);
    let max_links = nvcard.and_then(nvlink_links);
    let mut pairs = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            let Some((v, kind)) = p.pair_gbs(a, b) else { continue };
            let topo = m.topology.as_ref().filter(|t| t.gpus.len() == n).map(|t| t.links[a][b].clone());
            let links = match &topo {
                Some(crate::topo::Link::Nvlink { links }) => Some(*links),
                Some(_) => None,
                None => max_links,
            };
            let access = match (p.access[a][b], p.access[b][a]) {
                (Some(x), Some(y)) => Some(x && y),
                (x, y) => x.or(y),
            };
            pairs.push(PairRate {
                a,
                b,
                gbs: v,
                matrix: kind,
                over_nvlink: v > ceiling,
                peer_access: access,
                topo_link: topo.as_ref().map(|l| l.label()),
                nvlink_gbs: links.zip(per_link).map(|(l, g)| l as f64 * g),
            });
        }
    }
    pairs
}

/// Peer copies slower than copies staged through the host: P2P is
/// throttled on this PCIe path (NVIDIA/nccl#814 shows 9.9 vs 22 GB/s).
fn throttle_finding(p: &P2pTest, pairs: &[PairRate], findings: &mut Vec<Finding>) {
    if let Some(d) = p.matrix(MatrixKind::UnidirectionalDisabled) {
        let throttled: Vec<&PairRate> = pairs
            .iter()
            .filter(|q| !q.over_nvlink && q.gbs < 0.8 * d.values[q.a][q.b].min(d.values[q.b][q.a]))
            .collect();
        if let Some(q) = throttled.first() {
            push(
                findings,
                Level::Warn,
                "p2p_bandwidth",
                format!(
                    "{} pair(s) copy slower peer-to-peer than through host memory (GPU{}↔GPU{} {} with P2P, {} without): \
                     peer traffic is held back on this PCIe path; a known cause is PCIe ACS redirecting it through \
                     the CPU (NCCL troubleshooting guide)",
                    throttled.len(),
                    q.a,
                    q.b,
                    gbs(q.gbs),
                    gbs(d.values[q.a][q.b].min(d.values[q.b][q.a]))
                ),
            );
        }
    }
}

/// The slowest pair, against NVLink when it is over NVLink, else against
/// the PCIe ceiling.
fn slowest_pair_finding(
    pairs: &[PairRate],
    slow: usize,
    ceiling: f64,
    ceiling_label: &str,
    findings: &mut Vec<Finding>,
) {
    if let Some(lo) = pairs.iter().min_by(|a, b| a.gbs.total_cmp(&b.gbs)) {
        let of = match (lo.over_nvlink, lo.nvlink_gbs) {
            (true, Some(x)) => format!(", {} of {} NVLink per direction", pct(lo.gbs / x), gbs(x)),
            (true, None) => format!(", above one direction of {} ({}): over NVLink", ceiling_label, gbs(ceiling)),
            (false, _) => {
                format!(", {} of one direction of {} ({})", pct(lo.gbs / ceiling), ceiling_label, gbs(ceiling))
            }
        };
        push(
            findings,
            Level::Info,
            "p2p_bandwidth",
            format!(
                "P2P ({}): {} pairs, {} over NVLink; slowest GPU{}↔GPU{} {} per direction{of}",
                lo.matrix.label(),
                pairs.len(),
                pairs.len() - slow,
                lo.a,
                lo.b,
                gbs(lo.gbs)
            ),
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn nccl(
    t: &NcclTest,
    m: &Machine,
    e: &Expectation,
    judged: bool,
    nvcard: Option<&RefCard>,
    ceiling: f64,
    ceiling_label: &str,
    r: &mut BandwidthReport,
) {
    let Some(peak) = t.peak() else { return };
    let hosts = t.hosts().len().max(1);
    let wrong: u64 = t.rows.iter().map(|x| x.wrong).sum();
    let p = peak.busbw();
    let name = t.test.clone().unwrap_or_else(|| "the collective".into());
    if wrong > 0 {
        push(
            &mut r.findings,
            if judged { Level::Fail } else { Level::Warn },
            "nccl_errors",
            format!("{name} reports {wrong} wrong elements (#wrong): the collective returned wrong data"),
        );
    }
    let nv_total = nvcard.and_then(|c| c.nvlink_gbs).map(|x| x / 2.0);
    let all_nv_topo =
        m.topology.as_ref().is_some_and(|tp| tp.pairs().iter().all(|q| q.link.is_nvlink()) && !tp.pairs().is_empty());
    let (bottleneck, reference) = if hosts > 1 {
        (Bottleneck::Network, None)
    } else if p > ceiling || (all_nv_topo && nv_total.is_some()) {
        (Bottleneck::Nvlink, nv_total)
    } else {
        (Bottleneck::Pcie, Some(ceiling))
    };
    let share = reference.map(|x| p / x);
    let at = format!("{} bus bandwidth (at {} bytes)", gbs(p), peak.size_bytes);
    match bottleneck {
        Bottleneck::Network => push(
            &mut r.findings,
            Level::Info,
            "nccl_bandwidth",
            format!(
                "{name} over {} ranks on {hosts} hosts peaks at {at}: across hosts it measures the network \
                 as much as NVLink, so it is not judged against a link",
                t.ranks.len()
            ),
        ),
        _ if e.nvlink && p <= ceiling => push(
            &mut r.findings,
            Level::Fail,
            "nvlink_nccl",
            format!(
                "{name} on one host peaks at {at}, at most one direction of {ceiling_label} = {}: \
                 the GPUs do not exchange over NVLink",
                gbs(ceiling)
            ),
        ),
        Bottleneck::Nvlink => {
            if e.nvlink {
                push(
                    &mut r.findings,
                    Level::Pass,
                    "nvlink_nccl",
                    format!("{name} peaks at {at}, beyond any PCIe link here ({})", gbs(ceiling)),
                );
            }
            let of = match (reference, share) {
                (Some(x), Some(s)) => format!(": {} of the {} per direction of NVLink per GPU", pct(s), gbs(x)),
                _ => String::new(),
            };
            let lvl = if share.is_some_and(|s| s < FINDING_SHARE) { Level::Warn } else { Level::Info };
            push(&mut r.findings, lvl, "nccl_bandwidth", format!("{name} peaks at {at}{of}"));
        }
        Bottleneck::Pcie => {
            let s = share.unwrap_or(0.0);
            let why = if s < FINDING_SHARE {
                let p2p_off = r.p2p.as_ref().is_some_and(|q| q.pairs.iter().any(|x| x.peer_access == Some(false)));
                if p2p_off {
                    ": below a healthy PCIe ring; the P2P test shows peer access off, so NCCL copies through host memory"
                } else {
                    ": below a healthy PCIe ring (cross-socket traffic, P2P disabled, or a narrow link)"
                }
            } else {
                ""
            };
            push(
                &mut r.findings,
                if s < FINDING_SHARE { Level::Warn } else { Level::Info },
                "nccl_bandwidth",
                format!("{name} peaks at {at}, {} of one direction of {ceiling_label} ({}){why}", pct(s), gbs(ceiling)),
            );
        }
    }
    r.nccl = Some(NcclSummary {
        test: t.test.clone(),
        ranks: t.ranks.len(),
        hosts,
        peak_busbw_gbs: p,
        peak_size_bytes: peak.size_bytes,
        avg_busbw_gbs: t.avg_busbw,
        wrong,
        bottleneck,
        reference_gbs: reference,
        share,
    });
}
