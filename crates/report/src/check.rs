//! `vramfit check`: JSON schema and renderer. Every field is documented in docs/check.md.

use crate::format::{bytes, fit_lines, fit_table, shown, Width};
use crate::SCHEMA_VERSION;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, Table};
use serde::Serialize;
use std::fmt::Write;
use vramfit_hw::bandwidth::bandwidth_test::{Direction, HostMemory};
use vramfit_hw::bandwidth::bytes_per_s;
use vramfit_hw::bandwidth::judge::{BandwidthReport, Bottleneck};
use vramfit_hw::bandwidth::links::{FINDING_SHARE, TYPICAL_EFFICIENCY};
use vramfit_hw::bandwidth::p2p::MatrixKind;
use vramfit_hw::check::{Checked, DeviceProfile, ProfileSource};
use vramfit_hw::machine::{Gpu, MigDevice, MigMode};
use vramfit_hw::mig::{LgiRow, LgipRow};
use vramfit_hw::topo::Topology;
use vramfit_hw::verdict::{Finding, IdentifiedBy, Level, MemoryClass};

#[derive(Debug, Clone, Serialize)]
pub struct MigDeviceInfo {
    pub index: Option<u32>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    pub sm_count: Option<u32>,
    pub memory_total_bytes: Option<u64>,
    pub profile: Option<String>,
    /// `named by the source` (`nvidia-smi -L`) or `inferred from memory and SM count`
    pub profile_source: Option<ProfileSource>,
}

/// What a GPU's memory total matches (`check --json` `gpus[].memory_class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryKind {
    WholeCard,
    MigSlice,
    Unknown,
}

#[derive(Debug, Clone, Serialize)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub bus_id: Option<String>,
    pub uuid: Option<String>,
    pub pci_device_id: Option<String>,
    pub memory_total_bytes: Option<u64>,
    pub memory_reserved_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    /// `whole_card`, `mig_slice` or `unknown`
    pub memory_class: MemoryKind,
    /// the card (and profile, for a slice) the memory total matches
    pub memory_matches: Option<String>,
    /// memory of the whole card it matches
    pub full_card_bytes: Option<u64>,
    /// `enabled`, `disabled`, `not_supported`, `unknown`
    pub mig_current: MigMode,
    pub mig_pending: MigMode,
    pub mig_devices: Vec<MigDeviceInfo>,
    pub ecc_current: Option<bool>,
    pub ecc_pending: Option<bool>,
    pub pcie_gen_current: Option<u32>,
    pub pcie_gen_max: Option<u32>,
    pub pcie_width_current: Option<u32>,
    pub pcie_width_max: Option<u32>,
    /// the memory total as printed when it is not a readable size (`-1 MiB`)
    pub memory_total_unreadable: Option<String>,
    /// how the card was identified: `pci_device_id`, `product_name` or `name_and_memory`
    pub identified_by: IdentifiedBy,
}

#[derive(Debug, Clone, Serialize)]
pub struct PairInfo {
    pub a: usize,
    pub b: usize,
    /// as `nvidia-smi topo -m` prints it: `NV12`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`
    pub link: String,
    pub nvlink: bool,
    pub meaning: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct InterconnectInfo {
    pub gpus: usize,
    pub nics: Vec<String>,
    /// every pair is NVLink (false with fewer than 2 GPUs)
    pub all_nvlink: bool,
    pub pairs: Vec<PairInfo>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GpuInstanceInfo {
    pub gpu: u32,
    pub profile: String,
    pub profile_id: u32,
    pub instance_id: u32,
    pub start: u8,
    pub size: u8,
}

#[derive(Debug, Clone, Serialize)]
pub struct MigProfileRowInfo {
    pub gpu: u32,
    pub name: String,
    pub id: u32,
    pub free: u32,
    pub total: u32,
    pub memory_bytes: u64,
    pub p2p: bool,
    pub sm: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExpectInfo {
    pub count: Option<u32>,
    /// as given on the command line
    pub model: Option<String>,
    /// catalogue id it resolved to
    pub card_id: Option<String>,
    pub whole_card_bytes: Option<u64>,
    pub nvlink: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct FindingInfo {
    /// `pass`, `fail`, `warn`, `info`
    pub level: Level,
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelCount {
    pub name: String,
    pub count: usize,
}

/// `check --json`.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub schema: u32,
    pub command: &'static str,
    pub sources: Vec<String>,
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
    pub attached_gpus: Option<u32>,
    pub gpu_count: usize,
    pub models: Vec<ModelCount>,
    pub gpus: Vec<GpuInfo>,
    pub interconnect: Option<InterconnectInfo>,
    pub gpu_instances: Vec<GpuInstanceInfo>,
    pub mig_profiles: Vec<MigProfileRowInfo>,
    pub expectation: Option<ExpectInfo>,
    pub findings: Vec<FindingInfo>,
    /// no finding failed
    pub ok: bool,
    /// the bandwidth reports given (`--bandwidth`, `--p2p`, `--nccl`), judged; `null` without them
    pub bandwidth: Option<BandwidthInfo>,
}

/// One host↔device rate (`bandwidthTest`, best over sizes).
#[derive(Debug, Clone, Serialize)]
pub struct HostLinkInfo {
    pub gpu: u32,
    pub name: String,
    /// `host_to_device` or `device_to_host`
    pub direction: Direction,
    /// `pinned` or `pageable`
    pub memory: HostMemory,
    /// devices the figure sums
    pub devices: u32,
    pub size_bytes: u64,
    pub measured_bytes_per_s: u64,
    pub link_gen: Option<u32>,
    pub link_width: Option<u32>,
    /// where the link figures come from
    pub link_from: Option<String>,
    pub nominal_bytes_per_s: Option<u64>,
    pub share_of_nominal: Option<f64>,
    pub looks_like_gen: Option<u32>,
}

/// The device-to-device copy rate against the card's memory bandwidth.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceMemoryInfo {
    pub gpu: u32,
    pub name: String,
    pub measured_bytes_per_s: u64,
    pub card: Option<String>,
    pub card_bytes_per_s: Option<u64>,
    pub share: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct P2pPairInfo {
    pub a: usize,
    pub b: usize,
    /// one direction, the slower of the two
    pub bytes_per_s: u64,
    /// the matrix the figure comes from
    pub matrix: MatrixKind,
    pub over_nvlink: bool,
    pub peer_access: Option<bool>,
    pub topo_link: Option<String>,
    pub nvlink_bytes_per_s: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct P2pInfo {
    pub gpus: usize,
    pub pcie_ceiling_bytes_per_s: u64,
    pub pcie_ceiling: String,
    pub pairs: Vec<P2pPairInfo>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NcclInfo {
    pub test: Option<String>,
    pub ranks: usize,
    pub hosts: usize,
    pub peak_busbw_bytes_per_s: u64,
    pub peak_size_bytes: u64,
    pub avg_busbw_bytes_per_s: Option<u64>,
    pub wrong: u64,
    /// `nvlink`, `pcie` or `network`
    pub bottleneck: Bottleneck,
    pub reference_bytes_per_s: Option<u64>,
    pub share: Option<f64>,
}

/// `check --json` `bandwidth`.
#[derive(Debug, Clone, Serialize)]
pub struct BandwidthInfo {
    pub sources: Vec<String>,
    pub host_links: Vec<HostLinkInfo>,
    pub device_memory: Vec<DeviceMemoryInfo>,
    pub p2p: Option<P2pInfo>,
    pub nccl: Option<NcclInfo>,
    /// share of nominal a healthy link measures (0.8)
    pub typical_efficiency: f64,
    /// below this share of nominal a rate is a finding (0.6)
    pub finding_share: f64,
}

impl From<&BandwidthReport> for BandwidthInfo {
    fn from(b: &BandwidthReport) -> Self {
        BandwidthInfo {
            sources: b.sources.clone(),
            host_links: b
                .host_links
                .iter()
                .map(|h| HostLinkInfo {
                    gpu: h.device,
                    name: h.name.clone(),
                    direction: h.direction,
                    memory: h.memory,
                    devices: h.devices,
                    size_bytes: h.size_bytes,
                    measured_bytes_per_s: bytes_per_s(h.gbs),
                    link_gen: h.link.as_ref().map(|l| l.gen),
                    link_width: h.link.as_ref().map(|l| l.width),
                    link_from: h.link.as_ref().map(|l| l.from.clone()),
                    nominal_bytes_per_s: h.nominal_gbs.map(bytes_per_s),
                    share_of_nominal: h.share,
                    looks_like_gen: h.looks_like_gen,
                })
                .collect(),
            device_memory: b
                .device_memory
                .iter()
                .map(|d| DeviceMemoryInfo {
                    gpu: d.device,
                    name: d.name.clone(),
                    measured_bytes_per_s: bytes_per_s(d.gbs),
                    card: d.card.clone(),
                    card_bytes_per_s: d.card_gbs.map(bytes_per_s),
                    share: d.share,
                })
                .collect(),
            p2p: b.p2p.as_ref().map(|p| P2pInfo {
                gpus: p.devices,
                pcie_ceiling_bytes_per_s: bytes_per_s(p.pcie_ceiling_gbs),
                pcie_ceiling: p.pcie_ceiling.clone(),
                pairs: p
                    .pairs
                    .iter()
                    .map(|q| P2pPairInfo {
                        a: q.a,
                        b: q.b,
                        bytes_per_s: bytes_per_s(q.gbs),
                        matrix: q.matrix,
                        over_nvlink: q.over_nvlink,
                        peer_access: q.peer_access,
                        topo_link: q.topo_link.clone(),
                        nvlink_bytes_per_s: q.nvlink_gbs.map(bytes_per_s),
                    })
                    .collect(),
            }),
            nccl: b.nccl.as_ref().map(|n| NcclInfo {
                test: n.test.clone(),
                ranks: n.ranks,
                hosts: n.hosts,
                peak_busbw_bytes_per_s: bytes_per_s(n.peak_busbw_gbs),
                peak_size_bytes: n.peak_size_bytes,
                avg_busbw_bytes_per_s: n.avg_busbw_gbs.map(bytes_per_s),
                wrong: n.wrong,
                bottleneck: n.bottleneck.clone(),
                reference_bytes_per_s: n.reference_gbs.map(bytes_per_s),
                share: n.share,
            }),
            typical_efficiency: TYPICAL_EFFICIENCY,
            finding_share: FINDING_SHARE,
        }
    }
}

/// A finding's level as the text report tags it (`FAIL`).
pub fn level_tag(l: Level) -> &'static str {
    match l {
        Level::Pass => "PASS",
        Level::Fail => "FAIL",
        Level::Warn => "WARN",
        Level::Info => "INFO",
    }
}

/// A MIG mode as the schema names it (`not_supported`).
fn mig_mode(m: MigMode) -> &'static str {
    match m {
        MigMode::Enabled => "enabled",
        MigMode::Disabled => "disabled",
        MigMode::NotSupported => "not_supported",
        MigMode::Unknown => "unknown",
    }
}

fn memory_name(m: HostMemory) -> &'static str {
    match m {
        HostMemory::Pinned => "pinned",
        HostMemory::Pageable => "pageable",
    }
}

fn bottleneck_name(b: &Bottleneck) -> &'static str {
    match b {
        Bottleneck::Nvlink => "nvlink",
        Bottleneck::Pcie => "pcie",
        Bottleneck::Network => "network",
    }
}

impl From<&Finding> for FindingInfo {
    fn from(f: &Finding) -> Self {
        FindingInfo { level: f.level, code: f.code.into(), message: f.message.clone() }
    }
}

impl From<&Topology> for InterconnectInfo {
    fn from(t: &Topology) -> Self {
        let pairs: Vec<PairInfo> = t
            .pairs()
            .into_iter()
            .map(|p| PairInfo {
                a: p.a,
                b: p.b,
                link: p.link.label(),
                nvlink: p.link.is_nvlink(),
                meaning: p.link.meaning().into(),
            })
            .collect();
        InterconnectInfo {
            gpus: t.gpus.len(),
            nics: t.nics.clone(),
            all_nvlink: !pairs.is_empty() && pairs.iter().all(|p| p.nvlink),
            pairs,
        }
    }
}

impl From<&LgiRow> for GpuInstanceInfo {
    fn from(i: &LgiRow) -> Self {
        GpuInstanceInfo {
            gpu: i.gpu,
            profile: i.name.clone(),
            profile_id: i.profile_id,
            instance_id: i.instance_id,
            start: i.start,
            size: i.size,
        }
    }
}

impl From<&LgipRow> for MigProfileRowInfo {
    fn from(r: &LgipRow) -> Self {
        MigProfileRowInfo {
            gpu: r.gpu,
            name: r.name.clone(),
            id: r.id,
            free: r.free,
            total: r.total,
            // the column is GiB with two decimals: bytes rounded to the nearest
            memory_bytes: (r.memory_gib * (1u64 << 30) as f64).round() as u64,
            p2p: r.p2p,
            sm: r.sm,
        }
    }
}

impl From<(&MigDevice, &Option<DeviceProfile>)> for MigDeviceInfo {
    fn from((d, p): (&MigDevice, &Option<DeviceProfile>)) -> Self {
        MigDeviceInfo {
            index: d.index,
            gpu_instance_id: d.gpu_instance_id,
            compute_instance_id: d.compute_instance_id,
            sm_count: d.sm_count,
            memory_total_bytes: d.memory_total_bytes,
            profile: p.as_ref().map(|p| p.profile.clone()),
            profile_source: p.as_ref().map(|p| p.source),
        }
    }
}

impl From<(&Gpu, &MemoryClass, IdentifiedBy, &[Option<DeviceProfile>])> for GpuInfo {
    fn from((g, class, by, profiles): (&Gpu, &MemoryClass, IdentifiedBy, &[Option<DeviceProfile>])) -> Self {
        let (memory_class, memory_matches, full_card_bytes) = match class {
            MemoryClass::WholeCard { card, whole_card_bytes } => {
                (MemoryKind::WholeCard, Some(card.clone()), Some(*whole_card_bytes))
            }
            MemoryClass::MigSlice { card, profile, whole_card_bytes } => {
                (MemoryKind::MigSlice, Some(format!("{profile} of {card}")), Some(*whole_card_bytes))
            }
            MemoryClass::Unknown => (MemoryKind::Unknown, None, None),
        };
        GpuInfo {
            index: g.index,
            name: g.name.clone(),
            bus_id: g.bus_id.clone(),
            uuid: g.uuid.clone(),
            pci_device_id: g.pci_device_id.clone(),
            memory_total_bytes: g.memory_total_bytes,
            memory_reserved_bytes: g.memory_reserved_bytes,
            memory_used_bytes: g.memory_used_bytes,
            memory_class,
            memory_matches,
            full_card_bytes,
            mig_current: g.mig_current,
            mig_pending: g.mig_pending,
            mig_devices: g.mig_devices.iter().zip(profiles).map(MigDeviceInfo::from).collect(),
            ecc_current: g.ecc.current,
            ecc_pending: g.ecc.pending,
            pcie_gen_current: g.pcie_gen_current,
            pcie_gen_max: g.pcie_gen_max,
            pcie_width_current: g.pcie_width_current,
            pcie_width_max: g.pcie_width_max,
            memory_total_unreadable: g.memory_total_unreadable.clone(),
            identified_by: by,
        }
    }
}

impl From<&Checked> for CheckReport {
    fn from(c: &Checked) -> Self {
        let m = &c.machine;
        let gpus: Vec<GpuInfo> = m
            .gpus
            .iter()
            .zip(&c.verdict.memory)
            .zip(&c.verdict.identified_by)
            .zip(&c.device_profiles)
            .map(|(((g, class), by), p)| GpuInfo::from((g, class, *by, p.as_slice())))
            .collect();
        let mut models: Vec<ModelCount> = Vec::new();
        for g in &gpus {
            match models.iter_mut().find(|x| x.name == g.name) {
                Some(x) => x.count += 1,
                None => models.push(ModelCount { name: g.name.clone(), count: 1 }),
            }
        }
        let e = &c.expectation;
        let expectation = c.judged.then(|| ExpectInfo {
            count: e.count,
            model: e.card.as_ref().map(|k| k.name.clone()),
            card_id: e.card.as_ref().map(|k| k.id.clone()),
            whole_card_bytes: e.card.as_ref().map(|k| k.whole_mib << 20),
            nvlink: e.nvlink,
        });
        let findings: Vec<FindingInfo> = c.verdict.findings.iter().map(FindingInfo::from).collect();
        CheckReport {
            schema: SCHEMA_VERSION,
            command: "check",
            sources: m.sources.clone(),
            driver_version: m.driver_version.clone(),
            cuda_version: m.cuda_version.clone(),
            attached_gpus: m.attached_gpus,
            gpu_count: gpus.len(),
            models,
            gpus,
            interconnect: m.topology.as_ref().map(InterconnectInfo::from),
            gpu_instances: m.gpu_instances.iter().map(GpuInstanceInfo::from).collect(),
            mig_profiles: c.mig_profiles.iter().map(MigProfileRowInfo::from).collect(),
            expectation,
            ok: c.verdict.ok,
            findings,
            bandwidth: c.bandwidth.as_ref().map(BandwidthInfo::from),
        }
    }
}

fn opt_bytes(b: Option<u64>) -> String {
    b.map(bytes).unwrap_or_else(|| "?".into())
}

/// A decimal rate as the tools print it (`12.3 GB/s`).
fn rate(bytes_per_s: u64) -> String {
    let v = bytes_per_s as f64 / 1e9;
    if v >= 100.0 {
        format!("{v:.0} GB/s")
    } else {
        let s = format!("{v:.2}");
        format!("{} GB/s", s.trim_end_matches('0').trim_end_matches('.'))
    }
}

fn share(s: Option<f64>) -> String {
    s.map(|s| format!("{:.0}%", s * 100.0)).unwrap_or_else(|| "?".into())
}

fn render_bandwidth(out: &mut String, b: &BandwidthInfo) {
    let _ = writeln!(out, "\nbandwidth (decimal GB/s, as the tools print; from {}):", shown(&b.sources.join("; ")));
    for h in &b.host_links {
        let link = match (h.link_gen, h.link_width, h.nominal_bytes_per_s) {
            (Some(g), Some(w), Some(n)) => {
                format!(", {} of PCIe gen{g} x{w} ({} nominal)", share(h.share_of_nominal), rate(n))
            }
            _ => ", link not known".into(),
        };
        let dir = match h.direction {
            Direction::HostToDevice => "host→device",
            _ => "device→host",
        };
        let _ =
            writeln!(out, "  GPU {} {dir} {} ({}){link}", h.gpu, rate(h.measured_bytes_per_s), memory_name(h.memory));
    }
    for d in &b.device_memory {
        let of = match (&d.card, d.card_bytes_per_s) {
            (Some(c), Some(n)) => format!(", {} of the {}'s {}", share(d.share), shown(c), rate(n)),
            _ => String::new(),
        };
        let _ = writeln!(out, "  GPU {} device→device {}{of}", d.gpu, rate(d.measured_bytes_per_s));
    }
    if let Some(p) = &b.p2p {
        let nv = p.pairs.iter().filter(|q| q.over_nvlink).count();
        let slow = p.pairs.iter().min_by_key(|q| q.bytes_per_s);
        let _ = writeln!(
            out,
            "  P2P: {} GPUs, {} pairs, {nv} faster than PCIe ({}){}",
            p.gpus,
            p.pairs.len(),
            rate(p.pcie_ceiling_bytes_per_s),
            slow.map(|q| format!("; slowest GPU{}↔GPU{} {} per direction", q.a, q.b, rate(q.bytes_per_s)))
                .unwrap_or_default()
        );
    }
    if let Some(n) = &b.nccl {
        let _ = writeln!(
            out,
            "  {}: peak bus bandwidth {} at {} bytes ({} ranks on {} host(s)); bottleneck {}{}",
            shown(n.test.as_deref().unwrap_or("nccl-tests")),
            rate(n.peak_busbw_bytes_per_s),
            n.peak_size_bytes,
            n.ranks,
            n.hosts,
            bottleneck_name(&n.bottleneck),
            n.reference_bytes_per_s.map(|x| format!(", {} of {}", share(n.share), rate(x))).unwrap_or_default()
        );
    }
}

/// Human report, fitted to `width` (the GPU table's cells wrap, long lines
/// wrap; the link matrix stays as it is).
pub fn render_check(r: &CheckReport, width: Width) -> String {
    let mut out = String::new();
    let models: Vec<String> = r.models.iter().map(|m| format!("{} x {}", m.count, shown(&m.name))).collect();
    let count = match (&r.interconnect, r.gpu_count) {
        (Some(ic), 0) => format!("{} GPU(s) in the topology, no GPU list", ic.gpus),
        (_, n) => format!("{n} GPU(s)"),
    };
    let _ = writeln!(
        out,
        "machine: {}{}{}",
        count,
        if models.is_empty() { String::new() } else { format!(": {}", models.join(", ")) },
        match (&r.driver_version, &r.cuda_version) {
            (None, None) => String::new(),
            (d, c) =>
                format!(" (driver {}, CUDA {})", shown(d.as_deref().unwrap_or("?")), shown(c.as_deref().unwrap_or("?"))),
        }
    );
    let _ = writeln!(out, "from: {}", shown(&r.sources.join("; ")));
    if !r.gpus.is_empty() {
        render_gpus(&mut out, &r.gpus, width);
    }
    if !r.gpu_instances.is_empty() {
        let gis: Vec<String> = r
            .gpu_instances
            .iter()
            .map(|i| format!("GPU {} {} (GI {}) at {}:{}", i.gpu, shown(&i.profile), i.instance_id, i.start, i.size))
            .collect();
        let _ = writeln!(out, "GPU instances: {}", gis.join("; "));
    }
    if let Some(ic) = &r.interconnect {
        render_interconnect(&mut out, ic);
    }
    if !r.mig_profiles.is_empty() {
        let ps: Vec<String> = r
            .mig_profiles
            .iter()
            .map(|p| format!("{} {}/{} ({})", shown(&p.name), p.free, p.total, bytes(p.memory_bytes)))
            .collect();
        let _ = writeln!(out, "MIG profiles (-lgip): {}", ps.join(", "));
    }
    let _ = writeln!(out, "\nfindings:");
    for f in &r.findings {
        let _ = writeln!(out, "  {:<4} {}: {}", level_tag(f.level), f.code, shown(&f.message));
    }
    match &r.bandwidth {
        None => {
            let _ = writeln!(out, "bandwidth: not measured (give --bandwidth, --p2p or --nccl reports to judge it)");
        }
        Some(b) => render_bandwidth(&mut out, b),
    }
    match &r.expectation {
        Some(_) if r.ok => {
            let _ = writeln!(out, "\nverdict: OK, the machine is what was expected");
        }
        Some(_) => {
            let n = r.findings.iter().filter(|f| f.level == Level::Fail).count();
            let _ = writeln!(out, "\nverdict: NOT what was expected ({n} failed check(s))");
        }
        None => {
            let _ = writeln!(out, "\n(no --expect given: nothing to judge against)");
        }
    }
    fit_lines(&out, width)
}

/// One row per GPU, then the MIG devices of each GPU that has them.
fn render_gpus(out: &mut String, gpus: &[GpuInfo], width: Width) {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.set_header(vec!["GPU", "name", "memory", "is", "MIG now/pending", "ECC", "PCIe now/max"]);
    for g in gpus {
        let is = match (g.memory_class, &g.memory_matches) {
            (MemoryKind::WholeCard, Some(m)) => format!("whole {m}"),
            (MemoryKind::MigSlice, Some(m)) => format!("MIG slice: {m}"),
            _ => "?".into(),
        };
        let ecc = match g.ecc_current {
            Some(true) => "on",
            Some(false) => "off",
            None => "-",
        };
        let pcie = match (g.pcie_gen_current, g.pcie_width_current, g.pcie_gen_max, g.pcie_width_max) {
            (Some(a), Some(b), Some(c), Some(d)) => format!("gen{a} x{b} / gen{c} x{d}"),
            _ => "-".into(),
        };
        t.add_row(vec![
            Cell::new(g.index),
            Cell::new(shown(&g.name)),
            Cell::new(opt_bytes(g.memory_total_bytes)),
            Cell::new(is),
            Cell::new(format!("{}/{}", mig_mode(g.mig_current), mig_mode(g.mig_pending))),
            Cell::new(ecc),
            Cell::new(pcie),
        ]);
    }
    // too wide: the PCIe link goes first (a slow link is a finding of its own)
    let (table, hidden) = fit_table(t, width, &[6], &[0, 2]);
    let _ = writeln!(out, "{table}");
    if !hidden.is_empty() {
        let _ = writeln!(out, "{hidden}");
    }
    for g in gpus.iter().filter(|g| !g.mig_devices.is_empty()) {
        let devs: Vec<String> = g
            .mig_devices
            .iter()
            .map(|d| {
                let mut s = shown(d.profile.as_deref().unwrap_or_default()).into_owned();
                if let Some(b) = d.memory_total_bytes {
                    if !s.is_empty() {
                        s.push(' ');
                    }
                    s.push_str(&bytes(b));
                }
                if let Some(sm) = d.sm_count {
                    s.push_str(&format!(" {sm} SMs"));
                }
                s
            })
            .collect();
        let _ = writeln!(out, "GPU {} MIG devices: {}", g.index, devs.join("; "));
    }
}

/// The link matrix (up to 16 GPUs) and how many pairs are NVLink.
fn render_interconnect(out: &mut String, ic: &InterconnectInfo) {
    let _ = writeln!(out, "\ninterconnect ({} GPUs):", ic.gpus);
    let n = ic.gpus;
    if n <= 16 {
        let mut t = Table::new();
        t.load_style(UTF8_FULL_CONDENSED);
        let mut head = vec![String::new()];
        head.extend((0..n).map(|k| format!("GPU{k}")));
        t.set_header(head);
        for a in 0..n {
            let mut row = vec![format!("GPU{a}")];
            for b in 0..n {
                let (x, y) = (a.min(b), a.max(b));
                row.push(if a == b {
                    "X".into()
                } else {
                    ic.pairs
                        .iter()
                        .find(|p| p.a == x && p.b == y)
                        .map(|p| shown(&p.link).into_owned())
                        .unwrap_or_default()
                });
            }
            t.add_row(row);
        }
        let _ = writeln!(out, "{t}");
    }
    let nv = ic.pairs.iter().filter(|p| p.nvlink).count();
    let _ = writeln!(out, "{nv} of {} pairs NVLink", ic.pairs.len());
}
