//! `vramfit check --fleet`: JSON schema, the node × check grid, and the
//! text renderer. Every field is documented in docs/check.md ("Fleet").

use crate::check::{level_tag, CheckReport};
use crate::format::{fit_lines, fit_table, shown, Width};
use crate::SCHEMA_VERSION;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, Table};
use serde::Serialize;
use std::fmt::Write;
use vramfit_hw::bandwidth::bytes_per_s;
use vramfit_hw::bandwidth::nccl::Collective;
use vramfit_hw::fabric::bounds::BoundKind;
use vramfit_hw::fabric::hca::PortState;
use vramfit_hw::fabric::perftest::{Metric, Operation};
use vramfit_hw::fabric::LinkLayer;
use vramfit_hw::fleet::fabric::FABRIC_SHARE;
use vramfit_hw::fleet::{
    Column, FileRead, FleetChecked, GpuListFrom, NodeChecked, NodeFacts, Unreadable, NODE_SHARE_OF_MEDIAN,
};
use vramfit_hw::foreign::Kind;
use vramfit_hw::verdict::Level;

/// Bits per second of a Gb/s rate (ports are rated in bits).
fn bits_per_s(gbps: f64) -> u64 {
    (gbps * 1e9).round().clamp(0.0, 1e17) as u64
}

#[derive(Debug, Clone, Serialize)]
pub struct FleetExpectInfo {
    pub nodes: Option<u32>,
    pub gpus_per_node: Option<u32>,
    pub model: Option<String>,
    pub card_id: Option<String>,
    pub nvlink: bool,
    pub fabric: Option<FabricExpectInfo>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FabricExpectInfo {
    pub ports: Option<u32>,
    pub link_layer: LinkLayer,
    pub rate_bits_per_s: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FileInfo {
    pub path: String,
    /// what the content is (`nvidia_smi_xml`, `ibstat`, …); null: nothing recognised it
    pub kind: Option<Kind>,
    /// why it was not used, when it was not
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PortInfo {
    pub port: u32,
    pub state: PortState,
    pub physical_state: Option<String>,
    pub rate_bits_per_s: Option<u64>,
    pub width: Option<u32>,
    pub link_layer: LinkLayer,
}

#[derive(Debug, Clone, Serialize)]
pub struct HcaInfo {
    pub name: String,
    pub ca_type: Option<String>,
    pub firmware: Option<String>,
    pub ports: Vec<PortInfo>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PerftestInfo {
    pub file: String,
    pub title: String,
    pub metric: Metric,
    pub operation: Operation,
    pub bidirectional: bool,
    pub device: Option<String>,
    pub link_layer: LinkLayer,
    /// best average over the sizes (the sum of both directions when bidirectional)
    pub best_average_bits_per_s: Option<u64>,
    pub best_at_bytes: Option<u64>,
    /// typical latency of the smallest message, nanoseconds
    pub latency_ns: Option<u64>,
}

/// The figures the nodes are compared on.
#[derive(Debug, Clone, Serialize)]
pub struct FactsInfo {
    pub gpus: Option<String>,
    pub gpu_count: Option<u32>,
    pub memory_bytes: Option<u64>,
    pub driver: Option<String>,
    pub cuda: Option<String>,
    pub ecc: Option<bool>,
    pub mig: Option<bool>,
    pub persistence: Option<bool>,
    pub max_sm_clock_mhz: Option<u32>,
    pub applications_clocks: Option<String>,
    pub power_limit_mw: Option<u64>,
    pub memory_repair_pending: Option<u32>,
    pub all_nvlink: Option<bool>,
    pub host_to_device_bytes_per_s: Option<u64>,
    pub device_to_host_bytes_per_s: Option<u64>,
    pub p2p_min_bytes_per_s: Option<u64>,
    pub allreduce_busbw_bytes_per_s: Option<u64>,
    /// `8 × InfiniBand 400 Gb/s`
    pub fabric: Option<String>,
    pub fabric_aggregate_bits_per_s: Option<u64>,
    /// per GPU: `{gpu, nic, link}` of its nearest fabric NIC
    pub nic_affinity: Vec<NicAffinityInfo>,
    pub perftest_bits_per_s: Option<u64>,
    pub perftest_latency_ns: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NicAffinityInfo {
    pub gpu: usize,
    pub nic: String,
    /// `PIX`, `PXB`, `PHB`, `NODE`, `SYS`
    pub link: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct NodeInfo {
    pub name: String,
    pub files: Vec<FileInfo>,
    /// `nvidia_smi`, `nccl_ranks` (names only), `none`
    pub gpu_list_from: GpuListFrom,
    pub no_gpu_tools: bool,
    /// the single-machine check of the node (`check --json` of its files); null with nothing to check
    pub check: Option<CheckReport>,
    pub hcas: Vec<HcaInfo>,
    pub perftests: Vec<PerftestInfo>,
    pub facts: FactsInfo,
    /// no finding about this node failed
    pub ok: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct BoundInfo {
    pub kind: BoundKind,
    pub formula: String,
    pub bytes_per_s: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunInfo {
    pub file: String,
    pub test: Option<String>,
    pub collective: Option<Collective>,
    pub hosts: Vec<String>,
    pub unknown_hosts: Vec<String>,
    pub ranks: usize,
    pub peak_busbw_bytes_per_s: u64,
    pub peak_size_bytes: u64,
    pub max_size_bytes: u64,
    pub wrong: u64,
    /// B: the slowest node's fabric ports together, one direction
    pub node_fabric_bytes_per_s: Option<u64>,
    pub node_fabric_from: Option<String>,
    pub bounds: Vec<BoundInfo>,
    pub share_of_bound: Option<f64>,
}

/// Where a finding comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// the fleet check: nodes compared, the fabric, the files
    Fleet,
    /// one node's single-machine check (`check` on its files)
    Node,
}

#[derive(Debug, Clone, Serialize)]
pub struct FleetFindingInfo {
    pub origin: Origin,
    pub level: Level,
    pub code: String,
    /// the node it is about; null for the fleet or the fabric
    pub node: Option<String>,
    /// the grid column
    pub column: Column,
    /// the files it rests on
    pub evidence: Vec<String>,
    pub message: String,
}

/// A cell's state: the worst finding in it, `absent` without data or findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CellState {
    Absent,
    Info,
    Pass,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct GridCell {
    pub column: Column,
    pub state: CellState,
    /// the node's figure for the column (`550.90.07`, `4.00 GB/s`)
    pub value: Option<String>,
    pub evidence: Vec<String>,
    /// indexes into `findings`
    pub findings: Vec<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GridRow {
    pub node: String,
    pub cells: Vec<GridCell>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GridColumn {
    pub id: Column,
    pub label: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct GridInfo {
    /// the columns any node has data or a finding in
    pub columns: Vec<GridColumn>,
    pub rows: Vec<GridRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Thresholds {
    /// a node below this share of the fleet median is flagged (0.9)
    pub node_share_of_median: f64,
    /// perftest below this share of the line rate, a multi-node run below this share of its bound (0.9)
    pub fabric_share: f64,
}

/// `check --fleet --json`.
#[derive(Debug, Clone, Serialize)]
pub struct FleetReport {
    pub schema: u32,
    pub command: &'static str,
    pub mode: &'static str,
    pub source: String,
    pub expectation: Option<FleetExpectInfo>,
    pub node_count: usize,
    pub nodes: Vec<NodeInfo>,
    /// multi-node collective runs, each against its fabric's bounds
    pub runs: Vec<RunInfo>,
    /// every finding: the fleet's, the fabric's, and each node's single-machine ones
    pub findings: Vec<FleetFindingInfo>,
    pub grid: GridInfo,
    pub top_files: Vec<FileInfo>,
    pub unreadable: Vec<Unreadable>,
    pub thresholds: Thresholds,
    /// no finding failed
    pub ok: bool,
}

fn files(v: &[FileRead]) -> Vec<FileInfo> {
    v.iter().map(|f| FileInfo { path: f.path.clone(), kind: f.kind, error: f.error.clone() }).collect()
}

fn facts(f: &NodeFacts) -> FactsInfo {
    FactsInfo {
        gpus: f.gpus.clone(),
        gpu_count: f.gpu_count,
        memory_bytes: f.memory_mib.map(|m| m << 20),
        driver: f.driver.clone(),
        cuda: f.cuda.clone(),
        ecc: f.ecc,
        mig: f.mig,
        persistence: f.persistence,
        max_sm_clock_mhz: f.max_sm_mhz,
        applications_clocks: f.applications_clocks.clone(),
        power_limit_mw: f.power_limit_mw,
        memory_repair_pending: f.memory_repair_pending,
        all_nvlink: f.all_nvlink,
        host_to_device_bytes_per_s: f.host_to_device_gbs.map(bytes_per_s),
        device_to_host_bytes_per_s: f.device_to_host_gbs.map(bytes_per_s),
        p2p_min_bytes_per_s: f.p2p_min_gbs.map(bytes_per_s),
        allreduce_busbw_bytes_per_s: f.allreduce_busbw_gbs.map(bytes_per_s),
        fabric: f.fabric.as_ref().map(|s| s.describe()),
        fabric_aggregate_bits_per_s: f.fabric.as_ref().map(|s| bits_per_s(s.aggregate_gbps)),
        nic_affinity: f
            .nic_affinity
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.as_ref().map(|(n, l)| NicAffinityInfo { gpu: i, nic: n.clone(), link: l.label() }))
            .collect(),
        perftest_bits_per_s: f.perftest_gbps.map(bits_per_s),
        perftest_latency_ns: f.perftest_latency_us.map(|u| (u * 1000.0).round() as u64),
    }
}

/// A rate as the tools print it (`12.3 GB/s`).
fn gbs(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} GB/s")
    } else {
        format!("{v:.2} GB/s")
    }
}

/// The node's figure for a column, for the grid.
fn value(n: &NodeChecked, c: Column) -> Option<String> {
    let f = &n.facts;
    let yes = |b: bool, y: &str, no: &str| if b { y.to_string() } else { no.to_string() };
    match c {
        Column::Files => Some(format!("{} file(s)", n.files.len())),
        // the grid is narrow: the vendor's name is the same in every cell
        Column::Gpus => {
            f.gpus.as_ref().map(|g| g.replace("NVIDIA ", "")).or_else(|| n.no_gpu_tools.then(|| "no GPU tools".into()))
        }
        Column::Memory => f.memory_mib.map(|m| format!("{m} MiB")),
        Column::Driver => match (&f.driver, &f.cuda) {
            (Some(d), Some(c)) => Some(format!("{d} / CUDA {c}")),
            (Some(d), None) => Some(d.clone()),
            _ => None,
        },
        Column::Ecc => f.ecc.map(|b| yes(b, "on", "off")),
        Column::Mig => f.mig.map(|b| yes(b, "enabled", "disabled")),
        Column::Persistence => f.persistence.map(|b| yes(b, "on", "off")),
        Column::Clocks => f.max_sm_mhz.map(|m| format!("max SM {m} MHz")),
        Column::Power => f.power_limit_mw.map(|m| format!("{:.0} W", m as f64 / 1000.0)),
        Column::MemoryRepair => f.memory_repair_pending.map(|k| format!("{k} pending")),
        Column::Nvlink => f.all_nvlink.map(|b| yes(b, "all pairs", "not all pairs")),
        Column::HostLink => f.host_to_device_gbs.map(|g| format!("{} H→D", gbs(g))),
        Column::P2p => f.p2p_min_gbs.map(|g| format!("min {}", gbs(g))),
        Column::Nccl => f.allreduce_busbw_gbs.map(gbs),
        Column::Fabric => f.fabric.as_ref().map(|s| s.describe()),
        Column::NicAffinity => {
            let worst = f.nic_affinity.iter().flatten().max_by_key(|(_, l)| vramfit_hw::fleet::fabric::nearness(l));
            worst.map(|(_, l)| format!("farthest {}", l.label()))
        }
        Column::Perftest => f.perftest_gbps.map(|g| format!("{g:.1} Gb/s")),
    }
}

fn state_of(l: Level) -> CellState {
    match l {
        Level::Pass => CellState::Pass,
        Level::Fail => CellState::Fail,
        Level::Warn => CellState::Warn,
        Level::Info => CellState::Info,
    }
}

fn node_evidence(n: &NodeChecked, c: Column) -> Vec<String> {
    let kinds = c.evidence_kinds();
    n.files
        .iter()
        .filter(|f| f.error.is_none() && f.kind.is_some_and(|k| kinds.contains(&k)))
        .map(|f| f.path.clone())
        .collect()
}

impl From<&FleetChecked> for FleetReport {
    fn from(c: &FleetChecked) -> Self {
        let e = &c.expectation;
        let expectation = e.judged().then(|| FleetExpectInfo {
            nodes: e.nodes,
            gpus_per_node: e.node.count,
            model: e.node.card.as_ref().map(|k| k.name.clone()),
            card_id: e.node.card.as_ref().map(|k| k.id.clone()),
            nvlink: e.node.nvlink,
            fabric: e.fabric.map(|f| FabricExpectInfo {
                ports: f.ports,
                link_layer: f.link_layer,
                rate_bits_per_s: bits_per_s(f.rate_gbps),
            }),
        });
        // every finding: the fleet's, then each node's single-machine verdict
        let mut findings: Vec<FleetFindingInfo> = c
            .findings
            .iter()
            .map(|f| FleetFindingInfo {
                origin: Origin::Fleet,
                level: f.level,
                code: f.code.into(),
                node: f.node.clone(),
                column: f.column,
                evidence: f.evidence.clone(),
                message: f.message.clone(),
            })
            .collect();
        for n in &c.nodes {
            if let Some(ch) = &n.checked {
                for f in &ch.verdict.findings {
                    let column = Column::of_code(f.code);
                    findings.push(FleetFindingInfo {
                        origin: Origin::Node,
                        level: f.level,
                        code: f.code.into(),
                        node: Some(n.name.clone()),
                        column,
                        evidence: node_evidence(n, column),
                        message: format!("{}: {}", n.name, f.message),
                    });
                }
            }
        }
        let nodes: Vec<NodeInfo> = c.nodes.iter().map(|n| node_info(n, &findings)).collect();
        let grid = grid(c, &findings);
        FleetReport {
            schema: SCHEMA_VERSION,
            command: "check",
            mode: "fleet",
            source: c.source.clone(),
            expectation,
            node_count: c.nodes.len(),
            nodes,
            runs: c
                .runs
                .iter()
                .map(|r| RunInfo {
                    file: r.file.clone(),
                    test: r.test.clone(),
                    collective: r.collective,
                    hosts: r.hosts.clone(),
                    unknown_hosts: r.unknown_hosts.clone(),
                    ranks: r.ranks,
                    peak_busbw_bytes_per_s: bytes_per_s(r.peak_busbw_gbs),
                    peak_size_bytes: r.peak_size_bytes,
                    max_size_bytes: r.max_size_bytes,
                    wrong: r.wrong,
                    node_fabric_bytes_per_s: r.node_fabric_gbs.map(bytes_per_s),
                    node_fabric_from: r.node_fabric_from.clone(),
                    bounds: r
                        .bounds
                        .iter()
                        .map(|b| BoundInfo {
                            kind: b.kind,
                            formula: b.formula.clone(),
                            bytes_per_s: bytes_per_s(b.gbs),
                        })
                        .collect(),
                    share_of_bound: r.share_of_bound,
                })
                .collect(),
            findings,
            grid,
            top_files: files(&c.top_files),
            unreadable: c.unreadable.clone(),
            thresholds: Thresholds { node_share_of_median: NODE_SHARE_OF_MEDIAN, fabric_share: FABRIC_SHARE },
            ok: c.ok,
        }
    }
}

/// One node of the report.
fn node_info(n: &NodeChecked, findings: &[FleetFindingInfo]) -> NodeInfo {
    NodeInfo {
        name: n.name.clone(),
        files: files(&n.files),
        gpu_list_from: n.gpu_list_from,
        no_gpu_tools: n.no_gpu_tools,
        check: n.checked.as_ref().map(CheckReport::from),
        hcas: n
            .hcas
            .iter()
            .map(|h| HcaInfo {
                name: h.name.clone(),
                ca_type: h.ca_type.clone(),
                firmware: h.firmware.clone(),
                ports: h
                    .ports
                    .iter()
                    .map(|p| PortInfo {
                        port: p.port,
                        state: p.state,
                        physical_state: p.physical_state.clone(),
                        rate_bits_per_s: p.rate_gbps.map(bits_per_s),
                        width: p.width,
                        link_layer: p.link_layer,
                    })
                    .collect(),
            })
            .collect(),
        perftests: n
            .perftests
            .iter()
            .map(|(file, p)| PerftestInfo {
                file: file.clone(),
                title: p.title.clone(),
                metric: p.metric,
                operation: p.operation,
                bidirectional: p.bidirectional,
                device: p.device.clone(),
                link_layer: p.link_layer,
                best_average_bits_per_s: p.best_average_gbps().map(|(g, _)| bits_per_s(g)),
                best_at_bytes: p.best_average_gbps().map(|(_, b)| b),
                latency_ns: p.smallest_typical_us().map(|(u, _)| (u * 1000.0).round() as u64),
            })
            .collect(),
        facts: facts(&n.facts),
        ok: !findings.iter().any(|f| f.level == Level::Fail && f.node.as_deref() == Some(&n.name)),
    }
}

/// The node × check grid: per node and column, the worst finding, the
/// node's figure and the files behind it.
fn grid(c: &FleetChecked, findings: &[FleetFindingInfo]) -> GridInfo {
    let mut rows = Vec::new();
    for n in &c.nodes {
        let mut cells = Vec::new();
        for col in Column::ALL {
            let idx: Vec<usize> = findings
                .iter()
                .enumerate()
                .filter(|(_, f)| f.column == col && f.node.as_deref() == Some(&n.name))
                .map(|(i, _)| i)
                .collect();
            // a fleet-wide pass on the column (every node alike) counts for each node with data
            let value = value(n, col);
            let fleet_pass = value.is_some()
                && findings.iter().any(|f| f.column == col && f.node.is_none() && f.level == Level::Pass);
            let mut state = idx.iter().map(|&i| state_of(findings[i].level)).max().unwrap_or(CellState::Absent);
            if fleet_pass && state < CellState::Pass {
                state = CellState::Pass;
            }
            if state == CellState::Absent && value.is_some() && col != Column::Files {
                state = CellState::Info;
            }
            let mut evidence = node_evidence(n, col);
            for &i in &idx {
                for e in &findings[i].evidence {
                    if !evidence.contains(e) {
                        evidence.push(e.clone());
                    }
                }
            }
            cells.push(GridCell { column: col, state, value, evidence, findings: idx });
        }
        rows.push(GridRow { node: n.name.clone(), cells });
    }
    let used: Vec<Column> = Column::ALL
        .into_iter()
        .filter(|&col| {
            rows.iter().any(|r: &GridRow| r.cells.iter().any(|x| x.column == col && x.state != CellState::Absent))
        })
        .collect();
    for r in &mut rows {
        r.cells.retain(|x| used.contains(&x.column));
    }
    GridInfo { columns: used.into_iter().map(|id| GridColumn { id, label: id.label() }).collect(), rows }
}

fn mark(s: CellState) -> &'static str {
    match s {
        CellState::Absent => "-",
        CellState::Info => "·",
        CellState::Pass => "ok",
        CellState::Warn => "WARN",
        CellState::Fail => "FAIL",
    }
}

/// Human report, fitted to `width` (the grid's cells wrap, long lines wrap).
pub fn render_fleet(r: &FleetReport, width: Width) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "fleet: {} node(s) from {}", r.node_count, shown(&r.source));
    if let Some(e) = &r.expectation {
        let mut parts = Vec::new();
        if let Some(n) = e.nodes {
            parts.push(format!("{n} nodes"));
        }
        match (e.gpus_per_node, &e.model) {
            (Some(k), Some(m)) => parts.push(format!("{k} × {} per node", shown(m))),
            (None, Some(m)) => parts.push(format!("{} per node", shown(m))),
            (Some(k), None) => parts.push(format!("{k} GPUs per node")),
            _ => {}
        }
        if e.nvlink {
            parts.push("NVLink between every GPU pair".into());
        }
        if let Some(f) = &e.fabric {
            let layer = if f.link_layer == LinkLayer::InfiniBand { "InfiniBand" } else { "RoCE" };
            let rate = f.rate_bits_per_s as f64 / 1e9;
            parts.push(match f.ports {
                Some(p) => format!("{p} × {layer} {rate} Gb/s per node"),
                None => format!("{layer} {rate} Gb/s ports"),
            });
        }
        let _ = writeln!(out, "expected: {}", parts.join(", "));
    }
    if !r.grid.rows.is_empty() {
        let mut t = Table::new();
        t.load_style(UTF8_FULL_CONDENSED);
        let mut head = vec!["node".to_string()];
        head.extend(r.grid.columns.iter().map(|c| c.label.to_string()));
        t.set_header(head);
        for row in &r.grid.rows {
            let mut cells = vec![Cell::new(shown(&row.node))];
            for c in &row.cells {
                let v = c.value.as_deref().map(|v| shown(v).into_owned()).unwrap_or_else(|| "?".into());
                let text = match c.state {
                    CellState::Fail | CellState::Warn => format!("{} {v}", mark(c.state)),
                    CellState::Absent => "-".into(),
                    _ => v,
                };
                cells.push(Cell::new(text));
            }
            t.add_row(cells);
        }
        let _ = writeln!(out, "{}", fit_table(t, width, &[], &[0]).0);
    }
    for run in &r.runs {
        let _ = writeln!(
            out,
            "multi-node: {} {} over {} ranks on {} nodes: peak bus bandwidth {}{}",
            shown(&run.file),
            shown(run.test.as_deref().unwrap_or("nccl-tests")),
            run.ranks,
            run.hosts.len(),
            gbs(run.peak_busbw_bytes_per_s as f64 / 1e9),
            match (run.bounds.first(), run.share_of_bound) {
                (Some(b), Some(s)) => {
                    format!(", {:.0}% of the {} bound {}", s * 100.0, b.kind.label(), gbs(b.bytes_per_s as f64 / 1e9))
                }
                _ => String::new(),
            }
        );
    }
    let _ = writeln!(out, "\nfindings (fail and warn first):");
    let hidden = r.findings.iter().filter(|f| f.origin == Origin::Node && f.level == Level::Info).count();
    let mut order: Vec<&FleetFindingInfo> =
        r.findings.iter().filter(|f| !(f.origin == Origin::Node && f.level == Level::Info)).collect();
    order.sort_by_key(|f| match f.level {
        Level::Fail => 0,
        Level::Warn => 1,
        Level::Pass => 2,
        Level::Info => 3,
    });
    for f in order {
        let ev = if f.evidence.is_empty() || f.level == Level::Info || f.level == Level::Pass {
            String::new()
        } else {
            format!(" [{}]", shown(&f.evidence.join(", ")))
        };
        let _ = writeln!(out, "  {:<4} {}: {}{ev}", level_tag(f.level), f.code, shown(&f.message));
    }
    if hidden > 0 {
        let _ = writeln!(out, "  ({hidden} informational line(s) of the nodes' own checks: see --json)");
    }
    for u in &r.unreadable {
        let _ = writeln!(out, "  not read: {} ({})", shown(&u.path), shown(&u.reason));
    }
    let fails = r.findings.iter().filter(|f| f.level == Level::Fail).count();
    let odd: Vec<&str> = {
        let mut v: Vec<&str> =
            r.findings.iter().filter(|f| f.level == Level::Fail).filter_map(|f| f.node.as_deref()).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let unchecked: Vec<&str> = r.nodes.iter().filter(|n| n.check.is_none()).map(|n| n.name.as_str()).collect();
    if r.ok && unchecked.len() == r.nodes.len() {
        let why = if r.nodes.iter().all(|n| n.no_gpu_tools) { "no GPU tools found" } else { "no GPU output" };
        let _ = writeln!(out, "\nverdict: nothing to judge: {why} on {}", shown(&unchecked.join(", ")));
    } else if r.ok {
        let what = if r.expectation.is_some() {
            "the fleet is what was expected"
        } else {
            "the nodes are alike (nothing expected)"
        };
        let _ = writeln!(out, "\nverdict: OK, {what}");
    } else {
        let _ = writeln!(
            out,
            "\nverdict: NOT OK ({fails} failed check(s){})",
            if odd.is_empty() { String::new() } else { format!("; nodes: {}", shown(&odd.join(", "))) }
        );
    }
    fit_lines(&out, width)
}
