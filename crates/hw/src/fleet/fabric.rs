//! The fabric of a fleet: each node's HCAs against what was rented, the
//! GPU↔NIC affinity of each node, perftest against the line rate, and
//! multi-node collective runs against the bounds of
//! [`crate::fabric::bounds`].

use serde::Serialize;

use super::{host_is, Column, FleetExpectation, FleetFinding, MultiNodeRun, NodeChecked, RunInput};
use crate::bandwidth::nccl::Collective;
use crate::fabric::bounds::bounds;
use crate::fabric::hca::{Hca, PortState};
use crate::fabric::LinkLayer;
use crate::foreign::Kind;
use crate::topo::{Link, Topology};
use crate::verdict::Level;

/// A share of the line rate (perftest) or of the ring bound (multi-node
/// all-reduce) below which the fabric under-delivers: 90 %. A healthy
/// link gets more: NDR 400 Gb/s ports give "46-48 GB/s per NIC" to NCCL
/// (92-96 % of 50 GB/s; AddyLaddy, NVIDIA/nccl-tests#290), "24GB/s is the
/// peak performance per 200G NIC" (96 %; sjeaugey, NVIDIA/nccl-tests#119).
/// A port trained at half rate, or a missing rail of four, is far below.
pub const FABRIC_SHARE: f64 = 0.9;

/// A node's fabric ports: the ones of the rented link layer (or, with no
/// expectation, InfiniBand when there is any, else Ethernet).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FabricSummary {
    pub link_layer: LinkLayer,
    pub ports: u32,
    pub active: u32,
    /// slowest active port, Gb/s
    pub min_rate_gbps: Option<f64>,
    /// every active port's rate, fastest first, Gb/s
    pub rates_gbps: Vec<f64>,
    /// the active ports together, Gb/s
    pub aggregate_gbps: f64,
}

impl FabricSummary {
    /// `8 × InfiniBand 400 Gb/s`, `7 × 400 + 1 × 200 Gb/s InfiniBand (1 not active)`.
    pub fn describe(&self) -> String {
        let mut groups: Vec<(f64, u32)> = Vec::new();
        for &r in &self.rates_gbps {
            match groups.iter_mut().find(|(g, _)| (g - r).abs() < 1e-9) {
                Some((_, k)) => *k += 1,
                None => groups.push((r, 1)),
            }
        }
        let unrated = self.active as usize - self.rates_gbps.len();
        let down = if self.ports > self.active {
            format!(" ({} not active)", self.ports - self.active)
        } else {
            String::new()
        };
        let layer = self.link_layer.label();
        match groups.as_slice() {
            [] => format!("{} × {layer}{down}", self.active),
            [(r, k)] if unrated == 0 => format!("{k} × {layer} {} Gb/s{down}", fmt_gbps(*r)),
            _ => {
                let mut parts: Vec<String> = groups.iter().map(|(r, k)| format!("{k} × {}", fmt_gbps(*r))).collect();
                if unrated > 0 {
                    parts.push(format!("{unrated} × ?"));
                }
                format!("{} Gb/s {layer}{down}", parts.join(" + "))
            }
        }
    }
}

pub(crate) fn fmt_gbps(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}

/// Summarise a node's HCAs for the fabric of `layer` (auto when `None`).
pub fn summary(hcas: &[Hca], layer: Option<LinkLayer>) -> Option<FabricSummary> {
    let ports: Vec<&crate::fabric::hca::HcaPort> = hcas.iter().flat_map(|h| &h.ports).collect();
    if ports.is_empty() {
        return None;
    }
    let layer = layer.unwrap_or_else(|| {
        if ports.iter().any(|p| p.link_layer == LinkLayer::InfiniBand) {
            LinkLayer::InfiniBand
        } else {
            LinkLayer::Ethernet
        }
    });
    let mine: Vec<_> = ports.iter().filter(|p| p.link_layer == layer).collect();
    let active: Vec<_> = mine.iter().filter(|p| p.state == PortState::Active).collect();
    let mut rates: Vec<f64> = active.iter().filter_map(|p| p.rate_gbps).collect();
    rates.sort_by(|a, b| b.total_cmp(a));
    Some(FabricSummary {
        link_layer: layer,
        ports: mine.len() as u32,
        active: active.len() as u32,
        min_rate_gbps: rates.last().copied(),
        rates_gbps: rates,
        aggregate_gbps: active.iter().filter_map(|p| p.rate_gbps).sum(),
    })
}

/// How close a PCIe path is: PIX nearest, SYS farthest (nvidia-smi's legend order).
pub fn nearness(l: &Link) -> u8 {
    match l {
        Link::SelfLink | Link::Nvlink { .. } => 0,
        Link::Pix => 1,
        Link::Pxb => 2,
        Link::Phb => 3,
        Link::Node => 4,
        Link::Sys => 5,
    }
}

/// Per GPU, its nearest fabric NIC (device name, path). A NIC counts when
/// the node's HCAs list it with an active port of the fabric's link layer;
/// when the names cannot be matched (no `ibstat`, no NIC Legend) every NIC
/// column counts.
pub fn nic_affinity(t: &Topology, hcas: &[Hca], layer: Option<LinkLayer>) -> Vec<Option<(String, Link)>> {
    if t.nics.is_empty() || t.nic_links.len() != t.gpus.len() {
        return Vec::new();
    }
    let name = |k: usize| t.nic_names.get(k).cloned().flatten().unwrap_or_else(|| t.nics[k].clone());
    let fabric: Vec<usize> = (0..t.nics.len())
        .filter(|&k| {
            let n = name(k);
            hcas.iter().any(|h| {
                h.name == n
                    && h.ports.iter().any(|p| p.state == PortState::Active && layer.is_none_or(|l| p.link_layer == l))
            })
        })
        .collect();
    let cols: Vec<usize> = if fabric.is_empty() { (0..t.nics.len()).collect() } else { fabric };
    t.nic_links
        .iter()
        .map(|row| {
            cols.iter()
                .filter_map(|&k| row.get(k).map(|l| (k, l)))
                .min_by_key(|(_, l)| nearness(l))
                .map(|(k, l)| (name(k), l.clone()))
        })
        .collect()
}

fn files_of(n: &NodeChecked, kinds: &[Kind]) -> Vec<String> {
    n.files
        .iter()
        .filter(|f| f.error.is_none() && f.kind.is_some_and(|k| kinds.contains(&k)))
        .map(|f| f.path.clone())
        .collect()
}

/// Each node's HCAs against the rented fabric, its GPU↔NIC affinity, its
/// perftest reports against the line rate.
pub(crate) fn fabric_findings(nodes: &[NodeChecked], e: &FleetExpectation) -> Vec<FleetFinding> {
    let mut out = Vec::new();
    let best_affinity =
        nodes.iter().flat_map(|n| n.facts.nic_affinity.iter().flatten()).map(|(_, l)| nearness(l)).min();
    for n in nodes {
        hca_findings(n, e, &mut out);
        affinity_findings(n, best_affinity, &mut out);
        perftest_findings(n, e, &mut out);
    }
    out
}

fn push(
    out: &mut Vec<FleetFinding>,
    n: &NodeChecked,
    level: Level,
    code: &'static str,
    column: Column,
    evidence: Vec<String>,
    message: String,
) {
    out.push(FleetFinding { level, code, node: Some(n.name.clone()), column, evidence, message });
}

fn port_name(h: &Hca, port: u32) -> String {
    format!("{} port {port}", h.name)
}

fn hca_findings(n: &NodeChecked, e: &FleetExpectation, out: &mut Vec<FleetFinding>) {
    let ev = files_of(n, &[Kind::Ibstat, Kind::IbvDevinfo]);
    if n.hcas.is_empty() {
        if let Some(want) = &e.fabric {
            push(
                out,
                n,
                Level::Fail,
                "fabric_unverified",
                Column::Fabric,
                Vec::new(),
                format!(
                    "{}: {} not verified: no `ibstat` or `ibv_devinfo` output in its folder",
                    n.name,
                    want.describe()
                ),
            );
        }
        return;
    }
    let layer = e.fabric.map(|f| f.link_layer);
    let Some(s) = summary(&n.hcas, layer) else { return };
    let judged = e.fabric.is_some();
    let fail_or_warn = if judged { Level::Fail } else { Level::Warn };
    // ports of the fabric's link layer that are not up
    for h in &n.hcas {
        for p in h.ports.iter().filter(|p| p.link_layer == s.link_layer && p.state != PortState::Active) {
            push(
                out,
                n,
                fail_or_warn,
                "fabric_port_down",
                Column::Fabric,
                ev.clone(),
                format!(
                    "{}: {} ({}) is {}{}",
                    n.name,
                    port_name(h, p.port),
                    s.link_layer.label(),
                    p.state.label(),
                    p.physical_state.as_deref().map(|x| format!(", physical state {x}")).unwrap_or_default()
                ),
            );
        }
    }
    let others: Vec<String> = n
        .hcas
        .iter()
        .flat_map(|h| h.ports.iter().map(move |p| (h, p)))
        .filter(|(_, p)| p.link_layer != s.link_layer && p.state == PortState::Active)
        .map(|(h, p)| {
            format!(
                "{} ({}, {} Gb/s)",
                port_name(h, p.port),
                p.link_layer.label(),
                p.rate_gbps.map(fmt_gbps).unwrap_or("?".into())
            )
        })
        .collect();
    match e.fabric {
        Some(want) => judged_ports(n, &s, want, &others, &ev, out),
        None => {
            push(
                out,
                n,
                Level::Info,
                "fabric_ports",
                Column::Fabric,
                ev.clone(),
                format!(
                    "{}: {}{}",
                    n.name,
                    s.describe(),
                    if others.is_empty() { String::new() } else { format!("; also {}", others.join(", ")) }
                ),
            );
        }
    }
}

/// A node's fabric ports against the rented fabric.
fn judged_ports(
    n: &NodeChecked,
    s: &FabricSummary,
    want: crate::fabric::expect::FabricExpectation,
    others: &[String],
    ev: &[String],
    out: &mut Vec<FleetFinding>,
) {
    let ev = ev.to_vec();
    if s.ports == 0 {
        let seen = if others.is_empty() { "no active port".to_string() } else { others.join(", ") };
        push(
            out,
            n,
            Level::Fail,
            "fabric_layer",
            Column::Fabric,
            ev.clone(),
            format!("{}: no {} port: {seen}; {} was rented", n.name, want.link_layer.label(), want.describe()),
        );
        return;
    }
    for h in &n.hcas {
        for p in h.ports.iter().filter(|p| p.link_layer == s.link_layer && p.state == PortState::Active) {
            match p.rate_gbps {
                Some(r) if r + 1e-9 < want.rate_gbps => push(
                    out,
                    n,
                    Level::Fail,
                    "fabric_rate",
                    Column::Fabric,
                    ev.clone(),
                    format!(
                        "{}: {} runs at {} Gb/s{}, {} Gb/s rented",
                        n.name,
                        port_name(h, p.port),
                        fmt_gbps(r),
                        match (p.width, p.lane_gbps) {
                            (Some(w), Some(l)) => format!(" ({w}X × {} Gb/s)", fmt_gbps(l)),
                            _ => String::new(),
                        },
                        fmt_gbps(want.rate_gbps)
                    ),
                ),
                None => push(
                    out,
                    n,
                    Level::Warn,
                    "fabric_rate",
                    Column::Fabric,
                    ev.clone(),
                    format!("{}: {} reports no rate", n.name, port_name(h, p.port)),
                ),
                _ => {}
            }
        }
    }
    let at_rate = n
        .hcas
        .iter()
        .flat_map(|h| &h.ports)
        .filter(|p| {
            p.link_layer == s.link_layer
                && p.state == PortState::Active
                && p.rate_gbps.is_some_and(|r| r + 1e-9 >= want.rate_gbps)
        })
        .count() as u32;
    if let Some(k) = want.ports {
        let lvl = if at_rate >= k { Level::Pass } else { Level::Fail };
        push(
            out,
            n,
            lvl,
            "fabric_ports",
            Column::Fabric,
            ev.clone(),
            format!(
                "{}: {at_rate} {} port(s) active at {} Gb/s or more, {k} rented",
                n.name,
                s.link_layer.label(),
                fmt_gbps(want.rate_gbps)
            ),
        );
    } else if at_rate == s.ports {
        push(out, n, Level::Pass, "fabric_ports", Column::Fabric, ev.clone(), format!("{}: {}", n.name, s.describe()));
    }
    if !others.is_empty() {
        push(
            out,
            n,
            Level::Info,
            "fabric_other",
            Column::Fabric,
            ev.clone(),
            format!("{}: not part of the rented {} fabric: {}", n.name, want.link_layer.label(), others.join(", ")),
        );
    }
}

/// A GPU whose nearest fabric HCA is across the CPU interconnect. Fails
/// when other GPUs of the fleet reach an HCA through a PCIe switch
/// (PIX/PXB) and this one only through the host bridges (NODE) or the
/// inter-socket link (SYS): its GPUDirect RDMA traffic crosses the CPU.
/// Where no GPU of the fleet is closer, the design puts every NIC far
/// away: a SYS path is a warning, not a fault of one node.
fn affinity_findings(n: &NodeChecked, best: Option<u8>, out: &mut Vec<FleetFinding>) {
    let ev = files_of(n, &[Kind::NvidiaSmiTopo]);
    let mut far: Vec<String> = Vec::new();
    let mut across: Vec<String> = Vec::new();
    for (i, a) in n.facts.nic_affinity.iter().enumerate() {
        let Some((nic, l)) = a else { continue };
        let d = nearness(l);
        let item = format!("GPU{i} → {nic} {}", l.label());
        if best.is_some_and(|b| b <= 2) && d >= 4 {
            far.push(item);
        } else if d == 5 {
            across.push(item);
        }
    }
    if !far.is_empty() {
        push(out, n, Level::Fail, "nic_affinity", Column::NicAffinity, ev.clone(), format!(
            "{}: {} GPU(s) whose nearest HCA is across the CPU interconnect (NODE/SYS) while other GPUs reach one through a PCIe switch (PIX/PXB): {}",
            n.name, far.len(), far.join(", ")));
    }
    if !across.is_empty() {
        push(
            out,
            n,
            Level::Warn,
            "nic_affinity",
            Column::NicAffinity,
            ev,
            format!(
                "{}: {} GPU(s) whose nearest HCA is across the NUMA boundary (SYS: through the inter-socket link): {}",
                n.name,
                across.len(),
                across.join(", ")
            ),
        );
    }
}

/// A perftest bandwidth report against the port's line rate: the rented
/// rate, else the rate `ibstat` shows for the device the test used.
fn perftest_findings(n: &NodeChecked, e: &FleetExpectation, out: &mut Vec<FleetFinding>) {
    for (file, p) in &n.perftests {
        let ev = vec![file.clone()];
        if let Some((us, bytes)) = p.smallest_typical_us() {
            push(
                out,
                n,
                Level::Info,
                "perftest_latency",
                Column::Perftest,
                ev.clone(),
                format!(
                    "{}: {} typical latency {us} µs at {bytes} bytes{}",
                    n.name,
                    p.title,
                    p.device.as_deref().map(|d| format!(" on {d}")).unwrap_or_default()
                ),
            );
        }
        let Some((avg, bytes)) = p.best_average_gbps() else { continue };
        let per_dir = if p.bidirectional { avg / 2.0 } else { avg };
        let port_rate = p.device.as_deref().and_then(|d| {
            n.hcas
                .iter()
                .find(|h| h.name == d)
                .and_then(|h| h.ports.iter().filter_map(|x| x.rate_gbps).max_by(f64::total_cmp))
        });
        let (line, from) = match (e.fabric, port_rate) {
            (Some(f), _) => (Some(f.rate_gbps), "rented".to_string()),
            (None, Some(r)) => (Some(r), "the port's rate in ibstat".to_string()),
            (None, None) => (None, String::new()),
        };
        let dev = p.device.as_deref().map(|d| format!(" on {d}")).unwrap_or_default();
        let both = if p.bidirectional { " (bidirectional: per direction)" } else { "" };
        match line {
            Some(l) => {
                let share = per_dir / l;
                let lvl = if share < FABRIC_SHARE { if e.fabric.is_some() { Level::Fail } else { Level::Warn } } else { Level::Info };
                push(out, n, lvl, "perftest_bandwidth", Column::Perftest, ev, format!(
                    "{}: {}{dev} averages {:.1} Gb/s{both} at {bytes} bytes: {:.0}% of the {} Gb/s line rate ({from}){}",
                    n.name, p.title, per_dir, share * 100.0, fmt_gbps(l),
                    if share < FABRIC_SHARE { format!("; below {:.0}%", FABRIC_SHARE * 100.0) } else { String::new() }));
            }
            None => push(out, n, Level::Info, "perftest_bandwidth", Column::Perftest, ev, format!(
                "{}: {}{dev} averages {:.1} Gb/s{both} at {bytes} bytes (line rate not known: give ibstat or --expect-fabric)",
                n.name, p.title, per_dir)),
        }
    }
}

/// The multi-node runs, each against the bounds its fabric allows.
pub(crate) fn judge_runs(
    runs: &[RunInput],
    nodes: &[NodeChecked],
    e: &FleetExpectation,
    out: &mut Vec<FleetFinding>,
) -> Vec<MultiNodeRun> {
    let mut judged = Vec::new();
    for r in runs {
        let t = &r.test;
        let Some(peak) = t.peak() else { continue };
        let hosts: Vec<String> = t.hosts().into_iter().map(str::to_string).collect();
        let node_of =
            |h: &str| nodes.iter().find(|n| host_is(h, &n.name, n.manifest.as_ref().and_then(|m| m.host.as_deref())));
        let unknown_hosts: Vec<String> = hosts.iter().filter(|h| node_of(h).is_none()).cloned().collect();
        // B: the slowest node's fabric, from the rented fabric or each node's ibstat
        let layer = e.fabric.map(|f| f.link_layer);
        let from_ibstat: Vec<f64> = hosts
            .iter()
            .filter_map(|h| node_of(h))
            .filter_map(|n| summary(&n.hcas, layer).filter(|s| s.active > 0).map(|s| s.aggregate_gbps))
            .collect();
        let (b_gbps, from) = match e.fabric {
            Some(f) if f.ports.is_some() => {
                (Some(f.ports.unwrap_or(1) as f64 * f.rate_gbps), format!("--expect-fabric: {}", f.describe()))
            }
            _ if from_ibstat.len() == hosts.len() && !hosts.is_empty() => (
                from_ibstat.iter().copied().min_by(f64::total_cmp),
                "the slowest node's active ports in ibstat".to_string(),
            ),
            _ => (None, String::new()),
        };
        let coll = t.collective.unwrap_or(Collective::AllReduce);
        let node_gbs = b_gbps.map(|g| g / 8.0);
        let bs = node_gbs.map(|b| bounds(coll, hosts.len(), t.ranks.len(), b)).unwrap_or_default();
        let first = bs.first().map(|b| b.gbs);
        let p = peak.busbw();
        let share = first.map(|f| p / f);
        let name = t.test.clone().unwrap_or_else(|| "the collective".into());
        let ev = vec![r.file.clone()];
        let head = format!(
            "{name} over {} ranks on {} nodes peaks at {:.2} GB/s bus bandwidth (at {} bytes)",
            t.ranks.len(),
            hosts.len(),
            p,
            peak.size_bytes
        );
        let wrong: u64 = t.rows.iter().map(|x| x.wrong).sum();
        if wrong > 0 {
            out.push(FleetFinding {
                level: Level::Fail,
                code: "fabric_nccl_errors",
                node: None,
                column: Column::Nccl,
                evidence: ev.clone(),
                message: format!(
                    "{}: {name} reports {wrong} wrong elements (#wrong): the collective returned wrong data",
                    r.file
                ),
            });
        }
        match (node_gbs, share) {
            (Some(b), Some(s)) => {
                let list: Vec<String> = bs.iter().map(|x| format!("{} {} = {:.1} GB/s", x.kind.label(), x.formula, x.gbs)).collect();
                let ceiling = bs.iter().map(|x| x.gbs).fold(0.0, f64::max);
                let (lvl, verdict) = if p > ceiling * 1.05 {
                    (Level::Warn, format!("above every bound of this fabric ({:.1} GB/s): the run did not use it as stated (wrong --expect-fabric, or the nodes are not these)", ceiling))
                } else if s < FABRIC_SHARE {
                    (if e.fabric.is_some() { Level::Fail } else { Level::Warn }, format!(
                        "{:.0}% of the {} bound; a healthy fabric gives {:.0}% or more", s * 100.0, bs[0].kind.label(), FABRIC_SHARE * 100.0))
                } else if p > bs[0].gbs * 1.02 {
                    (Level::Info, format!("{:.0}% of the {} bound: above it, so NCCL used a tree or in-network reduction", s * 100.0, bs[0].kind.label()))
                } else {
                    (Level::Info, format!("{:.0}% of the {} bound", s * 100.0, bs[0].kind.label()))
                };
                out.push(FleetFinding { level: lvl, code: "fabric_collective", node: None, column: Column::Nccl, evidence: ev.clone(),
                    message: format!("{}: {head}: {verdict}. B = {:.1} GB/s per node ({from}); bounds: {}", r.file, b, list.join("; ")) });
            }
            _ => out.push(FleetFinding { level: Level::Info, code: "fabric_collective", node: None, column: Column::Nccl, evidence: ev.clone(),
                message: format!("{}: {head}; not judged against the fabric: give each node's ibstat, or --expect-fabric PORTSxib400", r.file) }),
        }
        let largest = t.max_size().unwrap_or(0);
        if largest < (1u64 << 30) {
            out.push(FleetFinding { level: Level::Info, code: "fabric_collective_size", node: None, column: Column::Nccl, evidence: ev.clone(),
                message: format!("{}: the largest size is {largest} bytes; bus bandwidth keeps rising up to several GiB (run to -e 8G)", r.file) });
        }
        if !unknown_hosts.is_empty() {
            out.push(FleetFinding {
                level: Level::Info,
                code: "fabric_hosts",
                node: None,
                column: Column::Nccl,
                evidence: ev.clone(),
                message: format!("{}: host(s) with no node folder of that name: {}", r.file, unknown_hosts.join(", ")),
            });
        }
        judged.push(MultiNodeRun {
            file: r.file.clone(),
            test: t.test.clone(),
            collective: t.collective,
            hosts,
            unknown_hosts,
            ranks: t.ranks.len(),
            peak_busbw_gbs: p,
            peak_size_bytes: peak.size_bytes,
            max_size_bytes: largest,
            wrong,
            node_fabric_gbs: node_gbs,
            node_fabric_from: (!from.is_empty()).then_some(from),
            bounds: bs,
            share_of_bound: share,
        });
    }
    judged
}
