//! One node folder: each file recognised by content and parsed, the
//! machine assembled, the single-machine check run, and the node's facts
//! taken for the comparison.

use super::recognise::{is_read, priority, recognise};
use super::{
    Column, FileRead, FleetExpectation, FleetFinding, GpuListFrom, Manifest, NodeChecked, NodeFacts, NodeInput,
    RunInput,
};
use crate::bandwidth::bandwidth_test::{parse_bandwidth_test, Direction};
use crate::bandwidth::judge::Measurements;
use crate::bandwidth::nccl::{parse_nccl, Collective, NcclTest};
use crate::bandwidth::p2p::parse_p2p;
use crate::check::{check, Checked};
use crate::fabric::hca::{merge as merge_hcas, parse_ibstat, parse_ibv_devinfo, Hca};
use crate::fabric::perftest::{parse_perftest, Perftest};
use crate::foreign::Kind;
use crate::machine::{Gpu, Machine, MigMode};
use crate::mig::{parse_lgi, parse_lgip, LgipRow};
use crate::named::NamedText;
use crate::verdict::{Level, RefCard};

/// Everything read from one folder before it is checked.
#[derive(Default)]
struct Read {
    machine: Machine,
    has_gpu_report: bool,
    lgip: Vec<LgipRow>,
    meas: Measurements,
    /// single-host collective runs besides the one judged
    other_nccl: Vec<(String, NcclTest)>,
    hcas: Vec<Hca>,
    perftests: Vec<(String, Perftest)>,
    manifest: Option<Manifest>,
    runs: Vec<RunInput>,
}

/// A top-level file: a multi-node run, or something that belongs in a node folder.
pub(crate) fn read_top_file(t: &NamedText) -> (FileRead, Option<RunInput>) {
    let kind = recognise(&t.text);
    let mut read = FileRead { path: t.name.clone(), kind, error: None };
    match kind {
        Some(Kind::NcclTests) => match parse_nccl(&t.text, &t.name) {
            Ok(n) if n.hosts().len() > 1 => return (read, Some(RunInput { file: t.name.clone(), test: n })),
            Ok(_) => {
                read.error = Some(
                    "a single-host nccl-tests run at the top level: put it in that node's folder to judge it".into(),
                )
            }
            Err(e) => read.error = Some(e.to_string()),
        },
        Some(k) if is_read(k) => {
            read.error = Some(format!(
                "{} at the top level: the top level holds multi-node runs; put a node's outputs in its folder",
                k.describe()
            ))
        }
        Some(k) => read.error = Some(format!("{}: not checked", k.describe())),
        None => {}
    }
    (read, None)
}

/// Read and check one node folder; the multi-node runs found in it are returned too.
pub(crate) fn check_node(
    n: &NodeInput,
    top_runs: &[RunInput],
    e: &FleetExpectation,
    refs: &[RefCard],
) -> (NodeChecked, Vec<RunInput>) {
    let mut files: Vec<(&NamedText, Option<Kind>)> = n.files.iter().map(|t| (t, recognise(&t.text))).collect();
    files.sort_by_key(|(t, k)| (priority(*k), t.name.clone()));
    let mut r = Read::default();
    let mut reads = Vec::with_capacity(files.len());
    for (t, kind) in files {
        let error = read_file(t, kind, &mut r).err();
        reads.push(FileRead { path: t.name.clone(), kind, error });
    }
    let manifest_host = r.manifest.as_ref().and_then(|m| m.host.clone());
    // No nvidia-smi GPU report: the GPUs its collective runs name.
    let mut gpu_list_from = if r.machine.gpus.is_empty() { GpuListFrom::None } else { GpuListFrom::NvidiaSmi };
    if r.machine.gpus.is_empty() {
        let single =
            r.meas.nccl.iter().map(|(f, t)| (f.as_str(), t)).chain(r.other_nccl.iter().map(|(f, t)| (f.as_str(), t)));
        let multi = top_runs.iter().chain(&r.runs).map(|x| (x.file.as_str(), &x.test));
        for (file, t) in single.chain(multi) {
            let mine: Vec<&crate::bandwidth::nccl::Rank> = t
                .ranks
                .iter()
                .filter(|k| t.hosts().len() <= 1 || super::host_is(&k.host, &n.name, manifest_host.as_deref()))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let mut gpus: Vec<Gpu> = Vec::new();
            for k in mine {
                if !gpus.iter().any(|g| g.index == k.device) {
                    gpus.push(Gpu::new(k.device, k.name.clone()));
                }
            }
            gpus.sort_by_key(|g| g.index);
            r.machine.gpus = gpus;
            r.machine.sources.push(format!("{file} (GPU list from nccl-tests `# Rank` lines: names only)"));
            gpu_list_from = GpuListFrom::NcclRanks;
            break;
        }
    }
    let m = &r.machine;
    let anything = !m.gpus.is_empty() || m.topology.is_some() || !m.gpu_instances.is_empty() || !r.meas.is_empty();
    let checked = anything.then(|| check(r.machine.clone(), r.lgip.clone(), &r.meas, e.node.clone(), refs));
    let no_gpu_tools = !r.has_gpu_report && r.meas.is_empty() && r.manifest.as_ref().is_some_and(|m| m.no_gpu_tools());
    let facts = facts(checked.as_ref(), &r.hcas, &r.perftests);
    let node = NodeChecked {
        name: n.name.clone(),
        files: reads,
        checked,
        gpu_list_from,
        hcas: r.hcas,
        perftests: r.perftests,
        manifest: r.manifest,
        no_gpu_tools,
        facts,
    };
    (node, r.runs)
}

/// Parse one file into the node's reading; the error says why it was not used.
fn read_file(t: &NamedText, kind: Option<Kind>, r: &mut Read) -> Result<(), String> {
    let (name, text) = (t.name.as_str(), t.text.as_str());
    let err = |e: crate::error::HwError| e.to_string();
    let Some(kind) = kind else {
        return Err("not recognised: no tool's output the check reads (nvidia-smi -q -x/-q/-L/topo -m/--version, \
                    CUDA samples bandwidthTest/p2pBandwidthLatencyTest, nccl-tests, ibstat, ibv_devinfo, perftest)"
            .into());
    };
    match kind {
        Kind::NvidiaSmiXml | Kind::NvidiaSmiQuery | Kind::NvidiaSmiList => {
            let m = match kind {
                Kind::NvidiaSmiXml => crate::xml::parse_xml(text, name),
                Kind::NvidiaSmiQuery => crate::text::parse_text(text, name),
                _ => crate::list::parse_list(text, name),
            }
            .map_err(err)?;
            r.has_gpu_report = true;
            r.machine.merge(m);
        }
        Kind::NvidiaSmiTopo => {
            let topo = crate::topo::parse_topo(text, name).map_err(err)?;
            r.has_gpu_report = true;
            r.machine.merge(Machine {
                sources: vec![format!("{name} (nvidia-smi topo -m)")],
                topology: Some(topo),
                ..Machine::default()
            });
        }
        Kind::NvidiaSmiVersion => r.machine.merge(super::version::parse_smi_version(text, name).map_err(err)?),
        Kind::NvidiaSmiTable => r.machine.merge(super::version::parse_table_header(text, name).map_err(err)?),
        Kind::MigInstances => {
            let rows = parse_lgi(text, name).map_err(err)?;
            r.machine.gpu_instances.extend(rows);
            r.machine.sources.push(format!("{name} (nvidia-smi mig -lgi)"));
        }
        Kind::MigProfiles => {
            r.lgip = parse_lgip(text, name).map_err(err)?;
            r.machine.sources.push(format!("{name} (nvidia-smi mig -lgip)"));
        }
        Kind::BandwidthTest => {
            let b = parse_bandwidth_test(text, name).map_err(err)?;
            if let Some((first, _)) = &r.meas.bandwidth_test {
                return Err(format!("a second bandwidthTest output; {first} is the one judged"));
            }
            r.meas.bandwidth_test = Some((name.into(), b));
        }
        Kind::P2pBandwidthLatencyTest => {
            let p = parse_p2p(text, name).map_err(err)?;
            if let Some((first, _)) = &r.meas.p2p {
                return Err(format!("a second p2pBandwidthLatencyTest output; {first} is the one judged"));
            }
            r.meas.p2p = Some((name.into(), p));
        }
        Kind::NcclTests => {
            let t = parse_nccl(text, name).map_err(err)?;
            if t.hosts().len() > 1 {
                r.runs.push(RunInput { file: name.into(), test: t });
            } else {
                // the node's own all-reduce is the one compared across nodes
                let is_ar = |t: &NcclTest| matches!(t.collective, Some(Collective::AllReduce) | None);
                match &r.meas.nccl {
                    Some((_, cur)) if is_ar(cur) || !is_ar(&t) => r.other_nccl.push((name.into(), t)),
                    _ => {
                        if let Some(prev) = r.meas.nccl.take() {
                            r.other_nccl.push(prev);
                        }
                        r.meas.nccl = Some((name.into(), t));
                    }
                }
            }
        }
        Kind::Ibstat => merge_hcas(&mut r.hcas, parse_ibstat(text, name).map_err(err)?),
        Kind::IbvDevinfo => merge_hcas(&mut r.hcas, parse_ibv_devinfo(text, name).map_err(err)?),
        Kind::Perftest => r.perftests.push((name.into(), parse_perftest(text, name).map_err(err)?)),
        Kind::CollectManifest => r.manifest = Some(super::manifest::parse_manifest(text, name).map_err(err)?),
        Kind::RocmSmi | Kind::AmdSmi => {
            return Err(format!("{}: not checked", kind.describe()));
        }
    }
    Ok(())
}

/// The node's figures the comparison reads.
fn facts(c: Option<&Checked>, hcas: &[Hca], perftests: &[(String, Perftest)]) -> NodeFacts {
    let mut f = NodeFacts::default();
    if let Some(c) = c {
        let m = &c.machine;
        let g = &m.gpus;
        if !g.is_empty() {
            let mut names: Vec<(String, u32)> = Vec::new();
            for x in g {
                match names.iter_mut().find(|(n, _)| *n == x.name) {
                    Some((_, k)) => *k += 1,
                    None => names.push((x.name.clone(), 1)),
                }
            }
            f.gpus = Some(names.iter().map(|(n, k)| format!("{k} × {n}")).collect::<Vec<_>>().join(", "));
            f.gpu_count = Some(g.len() as u32);
            f.memory_mib = g.iter().filter_map(|x| x.memory_total_bytes).min().map(|b| b >> 20);
            let all = |v: Vec<Option<bool>>| -> Option<bool> {
                let known: Vec<bool> = v.into_iter().flatten().collect();
                (!known.is_empty()).then(|| known.iter().all(|&b| b))
            };
            f.ecc = all(g.iter().map(|x| x.ecc.current).collect());
            let mig: Vec<bool> = g
                .iter()
                .filter(|x| x.mig_current != MigMode::Unknown)
                .map(|x| x.mig_current == MigMode::Enabled)
                .collect();
            f.mig = (!mig.is_empty()).then(|| mig.iter().any(|&b| b));
            f.persistence = all(g.iter().map(|x| x.persistence_mode).collect());
            f.max_sm_mhz = g.iter().filter_map(|x| x.clocks.max_sm_mhz).min();
            let apps: Vec<String> = g
                .iter()
                .filter_map(|x| match (x.clocks.applications_graphics_mhz, x.clocks.applications_memory_mhz) {
                    (Some(a), Some(b)) => Some(format!("{a}/{b} MHz")),
                    _ => None,
                })
                .collect();
            f.applications_clocks = apps.iter().min().cloned();
            f.power_limit_mw = g.iter().filter_map(|x| x.power_limit_mw).min();
            let known: Vec<bool> = g
                .iter()
                .filter(|x| !x.memory_repair.is_empty())
                .map(|x| {
                    let r = &x.memory_repair;
                    r.remap_failure == Some(true) || r.remap_pending == Some(true) || r.retirement_pending == Some(true)
                })
                .collect();
            f.memory_repair_pending = (!known.is_empty()).then(|| known.iter().filter(|&&b| b).count() as u32);
        }
        f.driver = m.driver_version.clone();
        f.cuda = m.cuda_version.clone();
        if let Some(t) = &m.topology {
            let pairs = t.pairs();
            if !pairs.is_empty() {
                f.all_nvlink = Some(pairs.iter().all(|p| p.link.is_nvlink()));
            }
        }
        if let Some(b) = &c.bandwidth {
            let best = |d: Direction| {
                b.host_links
                    .iter()
                    .filter(|h| h.direction == d)
                    .map(|h| h.gbs / h.devices.max(1) as f64)
                    .min_by(f64::total_cmp)
            };
            f.host_to_device_gbs = best(Direction::HostToDevice);
            f.device_to_host_gbs = best(Direction::DeviceToHost);
            f.p2p_min_gbs = b.p2p.as_ref().and_then(|p| p.pairs.iter().map(|q| q.gbs).min_by(f64::total_cmp));
            f.allreduce_busbw_gbs = b.nccl.as_ref().filter(|n| n.hosts <= 1).map(|n| n.peak_busbw_gbs);
        }
    }
    f.fabric = super::fabric::summary(hcas, None);
    if let Some(t) = c.and_then(|c| c.machine.topology.as_ref()) {
        f.nic_affinity = super::fabric::nic_affinity(t, hcas, f.fabric.as_ref().map(|s| s.link_layer));
    }
    f.perftest_gbps = perftests
        .iter()
        .filter_map(|(_, p)| p.best_average_gbps().map(|(g, _)| if p.bidirectional { g / 2.0 } else { g }))
        .max_by(f64::total_cmp);
    f.perftest_latency_us =
        perftests.iter().filter_map(|(_, p)| p.smallest_typical_us().map(|(u, _)| u)).min_by(f64::total_cmp);
    f
}

/// A finding naming a file that was not recognised or not read.
pub(crate) fn file_finding(node: Option<&str>, f: &FileRead) -> FleetFinding {
    let (code, message) = match (&f.kind, &f.error) {
        (None, _) => (
            "file_unrecognised",
            format!(
                "{}: not recognised: not an output of a tool the check reads (nvidia-smi -q -x/-q/-L/topo -m/--version, \
                 bandwidthTest, p2pBandwidthLatencyTest, nccl-tests, ibstat, ibv_devinfo, perftest)",
                f.path
            ),
        ),
        (Some(_), Some(e)) => ("file_error", format!("{}: {e}", f.path)),
        (Some(_), None) => ("file", format!("{}: read", f.path)),
    };
    FleetFinding {
        level: if f.kind.is_none() { Level::Info } else { Level::Warn },
        code,
        node: node.map(str::to_string),
        column: Column::Files,
        evidence: vec![f.path.clone()],
        message,
    }
}

/// The node's own findings beyond its single-machine verdict: files not
/// read, tools absent or failed, where its GPU list comes from.
pub(crate) fn node_findings(n: &NodeChecked, e: &FleetExpectation) -> Vec<FleetFinding> {
    let mut out = Vec::new();
    let at = |level: Level, code: &'static str, column: Column, evidence: Vec<String>, message: String| FleetFinding {
        level,
        code,
        node: Some(n.name.clone()),
        column,
        evidence,
        message,
    };
    for f in n.files.iter().filter(|f| f.kind.is_none() || f.error.is_some()) {
        out.push(file_finding(Some(&n.name), f));
    }
    let manifest_file =
        || n.files.iter().filter(|f| f.kind == Some(Kind::CollectManifest)).map(|f| f.path.clone()).collect::<Vec<_>>();
    if n.no_gpu_tools {
        out.push(at(
            if e.judged() { Level::Fail } else { Level::Info },
            "no_gpu_tools",
            Column::Gpus,
            manifest_file(),
            format!("{}: no GPU tools found (nvidia-smi is absent on the node, per its collection manifest)", n.name),
        ));
    } else if n.checked.is_none() {
        out.push(at(
            if e.judged() { Level::Fail } else { Level::Warn },
            "no_gpu_report",
            Column::Gpus,
            Vec::new(),
            format!(
                "{}: no GPU report (nvidia-smi -q -x, -q, -L or topo -m) in its folder: its GPUs are not checked",
                n.name
            ),
        ));
    }
    if let Some(m) = &n.manifest {
        for f in &m.failed {
            out.push(at(Level::Warn, "tool_failed", Column::Files, manifest_file(), format!("{}: {f}", n.name)));
        }
    }
    if n.gpu_list_from == GpuListFrom::NcclRanks {
        out.push(at(
            Level::Info,
            "gpu_list_from_nccl",
            Column::Gpus,
            n.files.iter().filter(|f| f.kind == Some(Kind::NcclTests)).map(|f| f.path.clone()).collect(),
            format!(
                "{}: no nvidia-smi GPU report: the GPUs are the ones its nccl-tests run names; memory, ECC and MIG are not verified",
                n.name
            ),
        ));
    }
    out
}
