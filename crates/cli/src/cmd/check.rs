//! `vramfit check`: is this machine what was rented? (docs/check.md)

use crate::Outcome;
use anyhow::{anyhow, bail};
use std::path::PathBuf;
use vramfit_catalog::gpus::{builtin_gpus, find_gpu};
use vramfit_catalog::mig::builtin_mig_tables;
use vramfit_hw::verdict::{
    family_of, infer_mig_profile, parse_expect, MemoryClass, RefCard, RefSlice, WHOLE_CARD_TOLERANCE,
};
use vramfit_hw::{verdict, Expectation, FilesProbe, GpuProbe, Level, Machine, MigMode, NvmlProbe};
use vramfit_report::check::{
    render_check, CheckReport, ExpectInfo, FindingInfo, GpuInfo, GpuInstanceInfo, InterconnectInfo, MigDeviceInfo,
    MigProfileRowInfo, PairInfo,
};

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Output of `nvidia-smi -q -x`
    #[arg(long, value_name = "FILE")]
    pub xml: Option<PathBuf>,
    /// Output of `nvidia-smi -q`
    #[arg(long, value_name = "FILE")]
    pub text: Option<PathBuf>,
    /// Output of `nvidia-smi -L`
    #[arg(long, value_name = "FILE")]
    pub list: Option<PathBuf>,
    /// Output of `nvidia-smi topo -m`
    #[arg(long, value_name = "FILE")]
    pub topo: Option<PathBuf>,
    /// Output of `nvidia-smi mig -lgi` (existing GPU instances)
    #[arg(long, value_name = "FILE")]
    pub lgi: Option<PathBuf>,
    /// Output of `nvidia-smi mig -lgip` (the card's MIG profiles)
    #[arg(long, value_name = "FILE")]
    pub lgip: Option<PathBuf>,
    /// Query the GPUs live through NVML (the default when no file is given)
    #[arg(long)]
    pub nvml: bool,
    /// What was rented: COUNTxMODEL, e.g. 8xA100-80GB (exit 1 when the machine differs)
    #[arg(long, value_name = "COUNTxMODEL")]
    pub expect: Option<String>,
    /// Every GPU pair must be joined by NVLink
    #[arg(long)]
    pub expect_nvlink: bool,
    /// Machine-readable output (schema 1, docs/check.md)
    #[arg(long)]
    pub json: bool,
}

/// Known cards for the memory classification: the GPU catalogue, with the
/// MIG slice sizes of the matching MIG table (same family, whole-card
/// memory within tolerance).
fn reference_cards() -> anyhow::Result<Vec<RefCard>> {
    let gpus = builtin_gpus()?;
    let tables = builtin_mig_tables()?;
    Ok(gpus
        .iter()
        .map(|g| {
            let family = family_of(&g.id);
            let mig_profiles = tables
                .iter()
                .filter(|t| family_of(&t.gpu.id) == family)
                .filter(|t| {
                    let (a, b) = (t.gpu.whole_card_bytes as f64, g.memory_bytes() as f64);
                    b > 0.0 && (a - b).abs() <= b * WHOLE_CARD_TOLERANCE
                })
                .flat_map(|t| {
                    t.gpu.profiles.iter().map(|p| RefSlice {
                        profile: p.name.clone(),
                        bytes: p.memory_bytes,
                        sms: p.sm_count,
                    })
                })
                .collect();
            RefCard { id: g.id.clone(), name: g.name.clone(), family, whole_mib: g.memory_mib, mig_profiles }
        })
        .collect())
}

fn mode(m: MigMode) -> String {
    match m {
        MigMode::Enabled => "enabled",
        MigMode::Disabled => "disabled",
        MigMode::NotSupported => "not_supported",
        MigMode::Unknown => "unknown",
    }
    .into()
}

pub fn run(a: CheckArgs) -> anyhow::Result<Outcome> {
    let files = FilesProbe {
        xml: a.xml.clone(),
        text: a.text.clone(),
        list: a.list.clone(),
        topo: a.topo.clone(),
        lgi: a.lgi.clone(),
    };
    let mut machine = Machine::default();
    if a.nvml || (files.is_empty() && a.lgip.is_none()) {
        machine = NvmlProbe.probe()?;
    }
    if !files.is_empty() {
        machine.merge(files.probe()?);
    }
    let mut mig_profiles = Vec::new();
    if let Some(p) = &a.lgip {
        let name = p.display().to_string();
        let text = vramfit_hw::files::read_text(p, vramfit_hw::mig::MAX_MIG_OUTPUT_BYTES as u64)?;
        mig_profiles = vramfit_hw::mig::parse_lgip(&text, &name)?
            .into_iter()
            .map(|r| MigProfileRowInfo {
                gpu: r.gpu,
                name: r.name,
                id: r.id,
                free: r.free,
                total: r.total,
                memory_bytes: (r.memory_gib * (1u64 << 30) as f64).round() as u64,
                p2p: r.p2p,
                sm: r.sm,
            })
            .collect();
        machine.sources.push(format!("{name} (nvidia-smi mig -lgip)"));
    }
    if machine.gpus.is_empty()
        && machine.topology.is_none()
        && machine.gpu_instances.is_empty()
        && mig_profiles.is_empty()
    {
        bail!("no GPU found in the inputs");
    }

    let refs = reference_cards()?;
    let (count, model) = match &a.expect {
        Some(s) => parse_expect(s).map_err(|e| anyhow!(e))?,
        None => (None, String::new()),
    };
    let card = if model.is_empty() {
        None
    } else {
        let all = builtin_gpus()?;
        let spec = find_gpu(&all, &model).map_err(|e| anyhow!("--expect: {e}"))?;
        let mut r = refs
            .iter()
            .find(|r| r.id == spec.id)
            .cloned()
            .ok_or_else(|| anyhow!("--expect: {} has no reference entry", spec.id))?;
        r.name = model.clone();
        Some(r)
    };
    let expectation = Expectation { count, card: card.clone(), nvlink: a.expect_nvlink };
    let v = verdict(&machine, &expectation, &refs);

    let gpus = machine
        .gpus
        .iter()
        .zip(&v.memory)
        .map(|(g, class)| {
            let (memory_class, memory_matches, full_card_bytes) = match class {
                MemoryClass::WholeCard { card, whole_card_bytes } => {
                    ("whole_card", Some(card.clone()), Some(*whole_card_bytes))
                }
                MemoryClass::MigSlice { card, profile, whole_card_bytes } => {
                    ("mig_slice", Some(format!("{profile} of {card}")), Some(*whole_card_bytes))
                }
                MemoryClass::Unknown => ("unknown", None, None),
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
                memory_class: memory_class.into(),
                memory_matches,
                full_card_bytes,
                mig_current: mode(g.mig_current),
                mig_pending: mode(g.mig_pending),
                mig_devices: g
                    .mig_devices
                    .iter()
                    .map(|d| {
                        let inferred = match (&d.profile, d.memory_total_bytes) {
                            (None, Some(b)) => infer_mig_profile(&g.name, g.memory_total_bytes, b, d.sm_count, &refs),
                            _ => None,
                        };
                        MigDeviceInfo {
                            index: d.index,
                            gpu_instance_id: d.gpu_instance_id,
                            compute_instance_id: d.compute_instance_id,
                            sm_count: d.sm_count,
                            memory_total_bytes: d.memory_total_bytes,
                            profile_source: match (&d.profile, &inferred) {
                                (Some(_), _) => Some("named by the source".into()),
                                (None, Some(_)) => Some("inferred from memory and SM count".into()),
                                _ => None,
                            },
                            profile: d.profile.clone().or(inferred),
                        }
                    })
                    .collect(),
                ecc_current: g.ecc.current,
                ecc_pending: g.ecc.pending,
                pcie_gen_current: g.pcie_gen_current,
                pcie_gen_max: g.pcie_gen_max,
                pcie_width_current: g.pcie_width_current,
                pcie_width_max: g.pcie_width_max,
            }
        })
        .collect();
    let interconnect = machine.topology.as_ref().map(|t| {
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
    });
    let gpu_instances = machine
        .gpu_instances
        .iter()
        .map(|i| GpuInstanceInfo {
            gpu: i.gpu,
            profile: i.name.clone(),
            profile_id: i.profile_id,
            instance_id: i.instance_id,
            start: i.start,
            size: i.size,
        })
        .collect();
    let findings = v
        .findings
        .iter()
        .map(|f| FindingInfo {
            level: match f.level {
                Level::Pass => "pass",
                Level::Fail => "fail",
                Level::Warn => "warn",
                Level::Info => "info",
            }
            .into(),
            code: f.code.into(),
            message: f.message.clone(),
        })
        .collect();
    let expect_info = (a.expect.is_some() || a.expect_nvlink).then(|| ExpectInfo {
        count,
        model: (!model.is_empty()).then(|| model.clone()),
        card_id: card.as_ref().map(|c| c.id.clone()),
        whole_card_bytes: card.as_ref().map(|c| c.whole_mib << 20),
        nvlink: a.expect_nvlink,
    });
    let report = CheckReport::new(
        machine.sources.clone(),
        machine.driver_version.clone(),
        machine.cuda_version.clone(),
        machine.attached_gpus,
        gpus,
        interconnect,
        gpu_instances,
        mig_profiles,
        expect_info,
        findings,
    );
    let code = if report.ok { 0 } else { 1 };
    let stdout = if a.json { serde_json::to_string_pretty(&report)? + "\n" } else { render_check(&report) };
    Ok(Outcome { stdout, code })
}
