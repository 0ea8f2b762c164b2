//! A rented cluster, checked node by node and as a whole (`vramfit check
//! --fleet DIR`, docs/check.md "Fleet").
//!
//! The input is one folder per node (named as the node) holding whatever
//! the node's tools printed, and the folder's top level (multi-node
//! nccl-tests runs). Files are recognised by their content
//! ([`recognise`]), never by their names; a file nothing recognises is
//! named in the report. Each node gets the single-machine check
//! ([`crate::check`]); then the nodes are compared ([`compare`]): the
//! same GPUs, memory, driver, CUDA, ECC, MIG, persistence, clocks and
//! power limit everywhere, bandwidth against the fleet median, GPU↔NIC
//! affinity; and the fabric is judged ([`fabric`]): each HCA's state and
//! rate, perftest against the line rate, multi-node collectives against
//! what the fabric allows.
//!
//! No I/O here: the CLI reads the folder (bounded), the web page sends
//! the files; both give a [`FleetInput`].

pub mod compare;
pub mod fabric;
pub mod manifest;
pub mod node;
pub mod recognise;
pub mod version;

use serde::Serialize;

use crate::bandwidth::nccl::NcclTest;
use crate::check::Checked;
use crate::fabric::bounds::Bound;
use crate::fabric::expect::FabricExpectation;
use crate::fabric::hca::Hca;
use crate::fabric::perftest::Perftest;
use crate::foreign::Kind;
use crate::named::NamedText;
use crate::topo::Link;
use crate::verdict::{Expectation, Level, RefCard};

pub use manifest::Manifest;

/// The collection script `vramfit check --collect-script` prints.
pub const COLLECT_SCRIPT: &str = include_str!("collect.sh");

/// Most nodes one fleet may have (the largest rentals are a few thousand
/// GPUs, a few hundred nodes).
pub const MAX_NODES: usize = 1024;
/// Most files read per node folder (the collection script writes about 15).
pub const MAX_FILES_PER_NODE: usize = 64;

/// A node's share of the fleet median below which its figure is flagged:
/// 90 %, the margin nccl-tests itself allows against a stated bus
/// bandwidth (src/common.cu: with `NCCL_TESTS_MIN_BW` set, a run whose
/// average busbw is below 0.9 × that figure fails). A healthy node matches
/// its peers within run-to-run noise of a few percent; one slow GPU, a
/// link at the wrong PCIe generation or a throttled card is far below.
pub const NODE_SHARE_OF_MEDIAN: f64 = 0.9;

/// What the fleet should be: `--expect 4x8xH100-80GB` (nodes × GPUs per
/// node × model), `--expect-nvlink`, `--expect-fabric 8xib400`.
#[derive(Debug, Clone, Default)]
pub struct FleetExpectation {
    pub nodes: Option<u32>,
    /// per node: GPU count, card, NVLink
    pub node: Expectation,
    pub fabric: Option<FabricExpectation>,
}

impl FleetExpectation {
    pub fn judged(&self) -> bool {
        self.nodes.is_some()
            || self.node.count.is_some()
            || self.node.card.is_some()
            || self.node.nvlink
            || self.fabric.is_some()
    }
}

/// One node's folder.
#[derive(Debug, Clone, Default)]
pub struct NodeInput {
    pub name: String,
    pub files: Vec<NamedText>,
}

/// A file that could not be read (too large, not text, not a regular file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    pub path: String,
    pub reason: String,
}

/// Everything the fleet check reads.
#[derive(Debug, Clone, Default)]
pub struct FleetInput {
    /// where it came from (a folder, or "upload")
    pub source: String,
    pub nodes: Vec<NodeInput>,
    /// files at the folder's top level (multi-node runs)
    pub top: Vec<NamedText>,
    /// files the reader could not read, with why
    pub unreadable: Vec<Unreadable>,
}

/// The columns of the node × check grid: which part of a node a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Column {
    Files,
    Gpus,
    Memory,
    Driver,
    Ecc,
    Mig,
    Persistence,
    Clocks,
    Power,
    MemoryRepair,
    Nvlink,
    HostLink,
    P2p,
    Nccl,
    Fabric,
    NicAffinity,
    Perftest,
}

impl Column {
    pub const ALL: [Column; 17] = [
        Column::Files,
        Column::Gpus,
        Column::Memory,
        Column::Driver,
        Column::Ecc,
        Column::Mig,
        Column::Persistence,
        Column::Clocks,
        Column::Power,
        Column::MemoryRepair,
        Column::Nvlink,
        Column::HostLink,
        Column::P2p,
        Column::Nccl,
        Column::Fabric,
        Column::NicAffinity,
        Column::Perftest,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Column::Files => "files",
            Column::Gpus => "GPUs",
            Column::Memory => "memory",
            Column::Driver => "driver/CUDA",
            Column::Ecc => "ECC",
            Column::Mig => "MIG",
            Column::Persistence => "persistence",
            Column::Clocks => "clocks",
            Column::Power => "power limit",
            Column::MemoryRepair => "retired/remapped",
            Column::Nvlink => "NVLink",
            Column::HostLink => "host link",
            Column::P2p => "P2P",
            Column::Nccl => "all-reduce",
            Column::Fabric => "fabric",
            Column::NicAffinity => "GPU↔NIC",
            Column::Perftest => "perftest",
        }
    }

    /// The column a single-machine verdict finding belongs to, by its code
    /// (crate::verdict and crate::bandwidth::judge).
    pub fn of_code(code: &str) -> Column {
        match code {
            "versions" => Column::Driver,
            "count" | "model" | "variant" | "attached_mismatch" | "topo_count" => Column::Gpus,
            "memory" | "memory_unknown" | "memory_unreadable" => Column::Memory,
            "mig_enabled" | "mig_pending" => Column::Mig,
            "ecc" | "ecc_pending" => Column::Ecc,
            "nvlink" | "interconnect" => Column::Nvlink,
            "pcie_width" | "host_link" | "device_memory" => Column::HostLink,
            "nvlink_p2p" | "nvlink_unused" | "p2p_bandwidth" => Column::P2p,
            "nvlink_nccl" | "nccl_bandwidth" | "nccl_errors" => Column::Nccl,
            "memory_errors" => Column::MemoryRepair,
            _ => Column::Files,
        }
    }

    /// The kinds of file a column's figures come from (its evidence).
    pub fn evidence_kinds(self) -> &'static [Kind] {
        const SMI: &[Kind] = &[Kind::NvidiaSmiXml, Kind::NvidiaSmiQuery, Kind::NvidiaSmiList];
        match self {
            Column::Files => &[],
            Column::Gpus => &[Kind::NvidiaSmiXml, Kind::NvidiaSmiQuery, Kind::NvidiaSmiList, Kind::NvidiaSmiTopo],
            Column::Memory | Column::Ecc | Column::Persistence | Column::Clocks | Column::Power => SMI,
            Column::MemoryRepair => &[Kind::NvidiaSmiXml, Kind::NvidiaSmiQuery],
            Column::Mig => &[Kind::NvidiaSmiXml, Kind::NvidiaSmiQuery, Kind::NvidiaSmiList, Kind::MigInstances],
            Column::Driver => &[Kind::NvidiaSmiXml, Kind::NvidiaSmiQuery, Kind::NvidiaSmiVersion, Kind::NvidiaSmiTable],
            Column::Nvlink => &[Kind::NvidiaSmiTopo],
            Column::HostLink => &[Kind::BandwidthTest],
            Column::P2p => &[Kind::P2pBandwidthLatencyTest],
            Column::Nccl => &[Kind::NcclTests],
            Column::Fabric => &[Kind::Ibstat, Kind::IbvDevinfo],
            Column::NicAffinity => &[Kind::NvidiaSmiTopo, Kind::Ibstat, Kind::IbvDevinfo],
            Column::Perftest => &[Kind::Perftest],
        }
    }
}

/// A finding of the fleet check: the node it is about (none for the
/// whole fleet or the fabric), the grid column, and the files it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetFinding {
    pub level: Level,
    pub code: &'static str,
    pub node: Option<String>,
    pub column: Column,
    /// the files the finding rests on (paths as reported)
    pub evidence: Vec<String>,
    pub message: String,
}

/// How a file of a node folder was read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileRead {
    pub path: String,
    /// what the content is; `None`: nothing recognised it
    pub kind: Option<Kind>,
    /// read but refused (the parser's error), or not read at all
    pub error: Option<String>,
}

/// Where a node's GPU list comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuListFrom {
    /// `nvidia-smi -q -x`, `-q` or `-L`
    NvidiaSmi,
    /// no nvidia-smi report: the `# Rank` lines of the node's nccl-tests run
    /// (names only: memory is not verified)
    NcclRanks,
    None,
}

/// What the nodes are compared on: one value per node.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct NodeFacts {
    /// `8 × NVIDIA H100 80GB HBM3`
    pub gpus: Option<String>,
    pub gpu_count: Option<u32>,
    /// smallest whole-GPU memory total, MiB
    pub memory_mib: Option<u64>,
    pub driver: Option<String>,
    pub cuda: Option<String>,
    /// ECC on every GPU (`Some(false)` when any is off)
    pub ecc: Option<bool>,
    /// MIG enabled on any GPU
    pub mig: Option<bool>,
    /// persistence mode on every GPU
    pub persistence: Option<bool>,
    /// lowest `Max Clocks / SM` of the GPUs, MHz
    pub max_sm_mhz: Option<u32>,
    /// application clocks (graphics/memory MHz) when set
    pub applications_clocks: Option<String>,
    /// lowest power limit in force, mW
    pub power_limit_mw: Option<u64>,
    /// GPUs with a remapping failure or a pending retirement/remap
    pub memory_repair_pending: Option<u32>,
    /// every GPU pair over NVLink
    pub all_nvlink: Option<bool>,
    /// best pinned host→device rate, GB/s (per device when summed)
    pub host_to_device_gbs: Option<f64>,
    pub device_to_host_gbs: Option<f64>,
    /// slowest GPU pair of the P2P test, GB/s
    pub p2p_min_gbs: Option<f64>,
    /// peak bus bandwidth of the node's own all-reduce, GB/s
    pub allreduce_busbw_gbs: Option<f64>,
    pub fabric: Option<fabric::FabricSummary>,
    /// per GPU, the nearest fabric HCA and how far (`PIX` … `SYS`)
    pub nic_affinity: Vec<Option<(String, Link)>>,
    /// best perftest bandwidth of the node, Gb/s
    pub perftest_gbps: Option<f64>,
    /// smallest-message perftest latency, µs
    pub perftest_latency_us: Option<f64>,
}

/// One node, checked.
#[derive(Debug, Clone)]
pub struct NodeChecked {
    pub name: String,
    pub files: Vec<FileRead>,
    /// the single-machine check, when the node had anything to check
    pub checked: Option<Checked>,
    pub gpu_list_from: GpuListFrom,
    pub hcas: Vec<Hca>,
    pub perftests: Vec<(String, Perftest)>,
    pub manifest: Option<Manifest>,
    /// nvidia-smi was absent (the manifest says so) and no GPU output was given
    pub no_gpu_tools: bool,
    pub facts: NodeFacts,
}

/// A multi-node collective run, against what the fabric allows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MultiNodeRun {
    pub file: String,
    pub test: Option<String>,
    pub collective: Option<crate::bandwidth::nccl::Collective>,
    pub hosts: Vec<String>,
    /// hosts with no node folder of that name
    pub unknown_hosts: Vec<String>,
    pub ranks: usize,
    pub peak_busbw_gbs: f64,
    pub peak_size_bytes: u64,
    pub max_size_bytes: u64,
    pub wrong: u64,
    /// B: the slowest node's fabric ports together, one direction, GB/s
    pub node_fabric_gbs: Option<f64>,
    /// where B comes from
    pub node_fabric_from: Option<String>,
    pub bounds: Vec<Bound>,
    /// peak over the first bound (the ring's, for all-reduce)
    pub share_of_bound: Option<f64>,
}

/// The fleet, checked.
#[derive(Debug, Clone)]
pub struct FleetChecked {
    pub source: String,
    pub nodes: Vec<NodeChecked>,
    pub top_files: Vec<FileRead>,
    pub unreadable: Vec<Unreadable>,
    pub runs: Vec<MultiNodeRun>,
    pub expectation: FleetExpectation,
    pub findings: Vec<FleetFinding>,
    /// no finding failed, in the fleet or any node
    pub ok: bool,
}

impl FleetChecked {
    /// Every failed finding: the fleet's and each node's single-machine verdict.
    pub fn failed(&self) -> usize {
        let nodes: usize = self
            .nodes
            .iter()
            .filter_map(|n| n.checked.as_ref())
            .map(|c| c.verdict.findings.iter().filter(|f| f.level == Level::Fail).count())
            .sum();
        nodes + self.findings.iter().filter(|f| f.level == Level::Fail).count()
    }
}

/// A multi-node run read at the top level or in a node folder.
#[derive(Debug, Clone)]
pub(crate) struct RunInput {
    pub file: String,
    pub test: NcclTest,
}

/// Check a fleet.
pub fn check_fleet(input: &FleetInput, expectation: FleetExpectation, refs: &[RefCard]) -> FleetChecked {
    let mut runs_in: Vec<RunInput> = Vec::new();
    let mut top_files = Vec::new();
    let mut findings = Vec::new();
    for t in &input.top {
        let (read, run) = node::read_top_file(t);
        if let Some(r) = run {
            runs_in.push(r);
        }
        top_files.push(read);
    }
    let mut nodes: Vec<NodeChecked> = Vec::with_capacity(input.nodes.len());
    for n in &input.nodes {
        let (checked, node_runs) = node::check_node(n, &runs_in, &expectation, refs);
        runs_in.extend(node_runs);
        nodes.push(checked);
    }
    for f in top_files.iter().filter(|f| f.kind.is_none() || f.error.is_some()) {
        findings.push(node::file_finding(None, f));
    }
    for u in &input.unreadable {
        findings.push(FleetFinding {
            level: Level::Warn,
            code: "file_unreadable",
            node: None,
            column: Column::Files,
            evidence: vec![u.path.clone()],
            message: format!("{}: not read ({})", u.path, u.reason),
        });
    }
    for n in &nodes {
        findings.extend(node::node_findings(n, &expectation));
    }
    if let Some(want) = expectation.nodes {
        let have = nodes.len() as u32;
        findings.push(FleetFinding {
            level: if have == want { Level::Pass } else { Level::Fail },
            code: "node_count",
            node: None,
            column: Column::Gpus,
            evidence: Vec::new(),
            message: format!("{have} node folder(s) found, {want} expected"),
        });
    }
    findings.extend(compare::compare(&nodes, expectation.fabric.is_some()));
    findings.extend(fabric::fabric_findings(&nodes, &expectation));
    let runs = fabric::judge_runs(&runs_in, &nodes, &expectation, &mut findings);
    let mut fleet = FleetChecked {
        source: input.source.clone(),
        nodes,
        top_files,
        unreadable: input.unreadable.clone(),
        runs,
        expectation,
        findings,
        ok: true,
    };
    fleet.ok = fleet.failed() == 0;
    fleet
}

/// Whether an nccl-tests host name is this node (the folder's name, its
/// short name, or the host the collection manifest recorded).
pub(crate) fn host_is(host: &str, node: &str, manifest_host: Option<&str>) -> bool {
    let short = |h: &str| h.split('.').next().unwrap_or(h).to_string();
    host == node || short(host) == short(node) || manifest_host.is_some_and(|m| m == host || short(m) == short(host))
}

/// The median of some figures (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 { v[m] } else { (v[m - 1] + v[m]) / 2.0 })
}

/// `4x8xH100-80GB` → (Some(4), "8xH100-80GB"): a leading node count when
/// the rest is itself `COUNTxMODEL`; else the whole text is per node.
pub fn split_fleet_expect(s: &str) -> (Option<u32>, &str) {
    let t = s.trim();
    let digits = t.chars().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return (None, t);
    }
    let rest = &t[digits..];
    let Some(after) = rest.strip_prefix(['x', 'X']).or_else(|| rest.strip_prefix('×')) else { return (None, t) };
    let inner_digits = after.chars().take_while(|c| c.is_ascii_digit()).count();
    let inner_has_count = inner_digits > 0 && after[inner_digits..].starts_with(['x', 'X', '×']);
    match (inner_has_count, t[..digits].parse::<u32>()) {
        (true, Ok(n)) => (Some(n), after),
        _ => (None, t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expect_forms() {
        assert_eq!(split_fleet_expect("4x8xH100-80GB"), (Some(4), "8xH100-80GB"));
        assert_eq!(split_fleet_expect("8xH100-80GB"), (None, "8xH100-80GB"));
        assert_eq!(split_fleet_expect("H100"), (None, "H100"));
        assert_eq!(split_fleet_expect("2×4×A100-80GB"), (Some(2), "4×A100-80GB"));
        assert_eq!(median(&[4.0, 4.0, 4.0, 3.2]), Some(4.0));
        assert_eq!(median(&[1.0, 3.0, 2.0]), Some(2.0));
        assert_eq!(median(&[]), None);
    }
}
