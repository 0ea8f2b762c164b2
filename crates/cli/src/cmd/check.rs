//! `vramfit check`: is this machine what was rented? (docs/check.md)

use crate::error::{field_error, FieldId, OnField};
use crate::Outcome;
use anyhow::{anyhow, bail};
use std::path::PathBuf;
use vramfit_hw::bandwidth::bandwidth_test::parse_bandwidth_test;
use vramfit_hw::bandwidth::judge::Measurements;
use vramfit_hw::bandwidth::nccl::parse_nccl;
use vramfit_hw::bandwidth::p2p::parse_p2p;
use vramfit_hw::check::check;
use vramfit_hw::fabric::expect::parse_expect_fabric;
use vramfit_hw::files::read_fleet_dir;
use vramfit_hw::files::{read_kind, MAX_BANDWIDTH_BYTES, MAX_INPUT_BYTES};
use vramfit_hw::fleet::{check_fleet, split_fleet_expect, FleetExpectation, FleetInput, COLLECT_SCRIPT};
use vramfit_hw::mig::{parse_lgip, MAX_MIG_OUTPUT_BYTES};
use vramfit_hw::reference::{builtin_reference_cards, expectation};
use vramfit_hw::verdict::parse_expect;
use vramfit_hw::{GpuProbe, Machine, NamedText, NvmlProbe, TextsProbe};
use vramfit_report::check::{render_check, CheckReport};
use vramfit_report::fleet::{render_fleet, FleetReport};

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
    /// A rented cluster: a folder with one sub-folder per node (named as the node) holding that node's
    /// tool outputs, and multi-node runs at its top level (docs/check.md "Fleet")
    #[arg(long, value_name = "DIR")]
    pub fleet: Option<PathBuf>,
    /// The fabric rented, per node: [PORTSx](ib|roce)RATE in Gb/s per port, e.g. 8xib400, roce200
    #[arg(long, value_name = "SPEC")]
    pub expect_fabric: Option<String>,
    /// Print the POSIX shell script that collects a node's outputs for --fleet, and exit
    #[arg(long)]
    pub collect_script: bool,
    /// Machine-readable output (schema 1, docs/check.md)
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub layout: crate::cmd::width::TextArgs,
}

/// What `check --fleet` is asked beyond the folder (the CLI's flags, or the web page's fields).
#[derive(Debug, Clone, Default)]
pub struct FleetOptions {
    /// `NODESxCOUNTxMODEL`, `COUNTxMODEL` or `MODEL`
    pub expect: Option<String>,
    pub expect_nvlink: bool,
    pub expect_fabric: Option<String>,
    pub json: bool,
    /// the text report's width (`None`: as wide as it gets)
    pub width: vramfit_report::format::Width,
}

/// What `check` reads: nvidia-smi outputs and bandwidth reports, each with
/// the name it is reported under. The CLI reads them from the files named
/// on the command line ([`read_inputs`]); the web page from its uploads.
#[derive(Debug, Clone, Default)]
pub struct CheckInputs {
    pub machine: TextsProbe,
    pub lgip: Option<NamedText>,
    pub bandwidth: Option<NamedText>,
    pub p2p: Option<NamedText>,
    pub nccl: Option<NamedText>,
}

impl CheckInputs {
    pub fn is_empty(&self) -> bool {
        self.machine.is_empty()
            && self.lgip.is_none()
            && self.bandwidth.is_none()
            && self.p2p.is_none()
            && self.nccl.is_none()
    }
}

/// The files named on the command line, read under each kind's byte cap.
pub fn read_inputs(a: &CheckArgs) -> anyhow::Result<CheckInputs> {
    let read = |p: &Option<PathBuf>, what: &str, limit: u64| -> anyhow::Result<Option<NamedText>> {
        match p {
            Some(p) => Ok(Some(NamedText { name: p.display().to_string(), text: read_kind(p, what, limit)? })),
            None => Ok(None),
        }
    };
    Ok(CheckInputs {
        bandwidth: read(&a.bandwidth, "`bandwidthTest` output", MAX_BANDWIDTH_BYTES)?,
        p2p: read(&a.p2p, "`p2pBandwidthLatencyTest` output", MAX_BANDWIDTH_BYTES)?,
        nccl: read(&a.nccl, "nccl-tests output", MAX_BANDWIDTH_BYTES)?,
        machine: TextsProbe {
            xml: read(&a.xml, "`nvidia-smi -q -x` output", MAX_INPUT_BYTES)?,
            text: read(&a.text, "`nvidia-smi -q` output", MAX_INPUT_BYTES)?,
            list: read(&a.list, "`nvidia-smi -L` output", MAX_INPUT_BYTES)?,
            topo: read(&a.topo, "`nvidia-smi topo -m` output", MAX_INPUT_BYTES)?,
            lgi: read(&a.lgi, "`nvidia-smi mig -lgi` output", MAX_INPUT_BYTES)?,
        },
        lgip: read(&a.lgip, "`nvidia-smi mig -lgip` output", MAX_MIG_OUTPUT_BYTES as u64)?,
    })
}

/// The bandwidth reports, parsed.
fn measurements(i: &CheckInputs) -> anyhow::Result<Measurements> {
    let mut m = Measurements::default();
    if let Some(t) = &i.bandwidth {
        m.bandwidth_test = Some((t.name.clone(), parse_bandwidth_test(&t.text, &t.name)?));
    }
    if let Some(t) = &i.p2p {
        m.p2p = Some((t.name.clone(), parse_p2p(&t.text, &t.name)?));
    }
    if let Some(t) = &i.nccl {
        m.nccl = Some((t.name.clone(), parse_nccl(&t.text, &t.name)?));
    }
    Ok(m)
}

pub fn run(a: CheckArgs) -> anyhow::Result<Outcome> {
    if a.collect_script {
        return Ok(Outcome::ok(COLLECT_SCRIPT.to_string()));
    }
    if let Some(dir) = &a.fleet {
        let single = [&a.xml, &a.text, &a.list, &a.topo, &a.lgi, &a.lgip, &a.bandwidth, &a.p2p, &a.nccl];
        if single.iter().any(|f| f.is_some()) || a.nvml {
            bail!("--fleet reads every node's files from its folder: put them there instead of giving --xml, --topo, … (or --nvml)");
        }
        let input = read_fleet_dir(dir)?;
        let o = FleetOptions {
            expect: a.expect.clone(),
            expect_nvlink: a.expect_nvlink,
            expect_fabric: a.expect_fabric.clone(),
            json: a.json,
            width: a.layout.width(),
        };
        return run_fleet(&o, &input);
    }
    if a.expect_fabric.is_some() {
        bail!("--expect-fabric judges the fabric between nodes: use it with --fleet DIR");
    }
    if let Some(e) = &a.expect {
        if let (Some(n), rest) = split_fleet_expect(e) {
            bail!("--expect {e}: {n} nodes of {rest} is a fleet: give the nodes' folder with --fleet DIR (or --expect {rest} for one machine)");
        }
    }
    let inputs = read_inputs(&a)?;
    run_with(a, inputs)
}

/// `check --fleet` on a fleet already read (a folder, or the web page's upload).
pub fn run_fleet(o: &FleetOptions, input: &FleetInput) -> anyhow::Result<Outcome> {
    let (gpus, refs) = builtin_reference_cards()?;
    let (nodes, per_node) = match &o.expect {
        Some(s) => {
            let (n, rest) = split_fleet_expect(s);
            let (c, m) = parse_expect(rest).map_err(|e| anyhow!(e))?;
            (n, (c, Some(m)))
        }
        None => (None, (None, None)),
    };
    if nodes == Some(0) {
        bail!("--expect {}: a fleet of 0 nodes", o.expect.as_deref().unwrap_or_default());
    }
    let node = expectation(per_node.0, per_node.1.as_deref(), o.expect_nvlink, &gpus, &refs).map_err(|e| anyhow!(e))?;
    let fabric = o.expect_fabric.as_deref().map(parse_expect_fabric).transpose().map_err(|e| anyhow!(e))?;
    let checked = check_fleet(input, FleetExpectation { nodes, node, fabric }, &refs);
    let report = FleetReport::from(&checked);
    let code = if report.ok { 0 } else { 1 };
    let stdout = if o.json { serde_json::to_string_pretty(&report)? + "\n" } else { render_fleet(&report, o.width) };
    Ok(Outcome { stdout, code })
}

/// `check` on inputs already read (the files' flags in `a` are not read again).
pub fn run_with(a: CheckArgs, inputs: CheckInputs) -> anyhow::Result<Outcome> {
    // an input that is not what it should be is an error about the inputs (each names its file)
    let measurements = measurements(&inputs).on_field(FieldId::FILES)?;
    let mut machine = Machine::default();
    if a.nvml || inputs.is_empty() {
        machine = NvmlProbe.probe()?;
    }
    if !inputs.machine.is_empty() {
        machine.merge(inputs.machine.probe().on_field(FieldId::FILES)?);
    }
    let mut mig_profiles = Vec::new();
    if let Some(t) = &inputs.lgip {
        mig_profiles = parse_lgip(&t.text, &t.name).on_field(FieldId::FILES)?;
        machine.sources.push(format!("{} (nvidia-smi mig -lgip)", t.name));
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
            let (c, m) = parse_expect(s).map_err(|e| field_error("expect", anyhow!(e)))?;
            (c, Some(m))
        }
        None => (None, None),
    };
    let expectation = expectation(count, model.as_deref(), a.expect_nvlink, &gpus, &refs)
        .map_err(|e| field_error("expect", anyhow!(e)))?;
    let checked = check(machine, mig_profiles, &measurements, expectation, &refs);
    let report = CheckReport::from(&checked);
    let code = if report.ok { 0 } else { 1 };
    let stdout =
        if a.json { serde_json::to_string_pretty(&report)? + "\n" } else { render_check(&report, a.layout.width()) };
    Ok(Outcome { stdout, code })
}
