//! `vramfit check`: is this machine what was rented? (docs/check.md)

use crate::Outcome;
use anyhow::{anyhow, bail};
use std::path::PathBuf;
use vramfit_hw::bandwidth::bandwidth_test::parse_bandwidth_test;
use vramfit_hw::bandwidth::judge::Measurements;
use vramfit_hw::bandwidth::nccl::parse_nccl;
use vramfit_hw::bandwidth::p2p::parse_p2p;
use vramfit_hw::check::check;
use vramfit_hw::files::{read_kind, MAX_BANDWIDTH_BYTES};
use vramfit_hw::mig::{parse_lgip, MAX_MIG_OUTPUT_BYTES};
use vramfit_hw::reference::{builtin_reference_cards, expectation};
use vramfit_hw::verdict::parse_expect;
use vramfit_hw::{FilesProbe, GpuProbe, Machine, NvmlProbe};
use vramfit_report::check::{render_check, CheckReport};

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
    /// Output of CUDA samples `bandwidthTest` (host↔device, device↔device)
    #[arg(long, value_name = "FILE")]
    pub bandwidth: Option<PathBuf>,
    /// Output of CUDA samples `p2pBandwidthLatencyTest` (GPU↔GPU)
    #[arg(long, value_name = "FILE")]
    pub p2p: Option<PathBuf>,
    /// Output of nccl-tests `all_reduce_perf` (bus bandwidth)
    #[arg(long, value_name = "FILE")]
    pub nccl: Option<PathBuf>,
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

/// The bandwidth reports named on the command line, read and parsed.
fn read_measurements(a: &CheckArgs) -> anyhow::Result<Measurements> {
    let read = |p: &PathBuf, what: &str| -> anyhow::Result<(String, String)> {
        Ok((p.display().to_string(), read_kind(p, what, MAX_BANDWIDTH_BYTES)?))
    };
    let mut m = Measurements::default();
    if let Some(p) = &a.bandwidth {
        let (name, text) = read(p, "`bandwidthTest` output")?;
        m.bandwidth_test = Some((name.clone(), parse_bandwidth_test(&text, &name)?));
    }
    if let Some(p) = &a.p2p {
        let (name, text) = read(p, "`p2pBandwidthLatencyTest` output")?;
        m.p2p = Some((name.clone(), parse_p2p(&text, &name)?));
    }
    if let Some(p) = &a.nccl {
        let (name, text) = read(p, "nccl-tests output")?;
        m.nccl = Some((name.clone(), parse_nccl(&text, &name)?));
    }
    Ok(m)
}

pub fn run(a: CheckArgs) -> anyhow::Result<Outcome> {
    let files = FilesProbe {
        xml: a.xml.clone(),
        text: a.text.clone(),
        list: a.list.clone(),
        topo: a.topo.clone(),
        lgi: a.lgi.clone(),
    };
    let measurements = read_measurements(&a)?;
    let mut machine = Machine::default();
    if a.nvml || (files.is_empty() && a.lgip.is_none() && measurements.is_empty()) {
        machine = NvmlProbe.probe()?;
    }
    if !files.is_empty() {
        machine.merge(files.probe()?);
    }
    let mut mig_profiles = Vec::new();
    if let Some(p) = &a.lgip {
        let name = p.display().to_string();
        let text = read_kind(p, "`nvidia-smi mig -lgip` output", MAX_MIG_OUTPUT_BYTES as u64)?;
        mig_profiles = parse_lgip(&text, &name)?;
        machine.sources.push(format!("{name} (nvidia-smi mig -lgip)"));
    }
    if machine.gpus.is_empty()
        && machine.topology.is_none()
        && machine.gpu_instances.is_empty()
        && mig_profiles.is_empty()
        && measurements.is_empty()
    {
        bail!("no GPU found in the inputs");
    }
    let (gpus, refs) = builtin_reference_cards()?;
    let (count, model) = match &a.expect {
        Some(s) => {
            let (c, m) = parse_expect(s).map_err(|e| anyhow!(e))?;
            (c, Some(m))
        }
        None => (None, None),
    };
    let expectation = expectation(count, model.as_deref(), a.expect_nvlink, &gpus, &refs).map_err(|e| anyhow!(e))?;
    let checked = check(machine, mig_profiles, &measurements, expectation, &refs);
    let report = CheckReport::from(&checked);
    let code = if report.ok { 0 } else { 1 };
    let stdout = if a.json { serde_json::to_string_pretty(&report)? + "\n" } else { render_check(&report) };
    Ok(Outcome { stdout, code })
}
