//! `vramfit calibrate`: measured cases estimated and compared, per case and per group.
//!
//! Two sets: `faketensor` (the default; groups A parameter bytes, B inference
//! prefill, C training step, measured on a CPU with PyTorch `FakeTensorMode` +
//! `MemTracker`: the live tensors a CUDA allocator would hold, no GPU involved)
//! and `published` (real GPU figures others have published,
//! `calibration/data/published/memory.jsonl`, each compared with the estimate
//! of the quantity its tool measures). Exit 1 when the set misses its bar
//! (`vramfit_core::accuracy`).

use crate::Outcome;
use anyhow::{bail, Context};
use std::path::PathBuf;
use vramfit_core::accuracy::{error_pct, estimate_quantity, CaseInput, Quantity};
use vramfit_core::infer::ServingSetup;
use vramfit_core::{estimate, DType, ParamLayout};
use vramfit_ingest::calibration::llamacpp::{self as llamalogs, LogFigure};
use vramfit_ingest::calibration::published::{
    embedded_published, parse_published_cases, PublishedCase, ServingCase, PUBLISHED_FILE,
};
use vramfit_ingest::calibration::{embedded, parse_cases, Case, Group, MAX_CASES_BYTES};
use vramfit_report::calibrate::{render, Bar, CalibrateReport, CaseRow, ExcludedRow};

/// How the FakeTensor sets were measured (said in every report of them).
pub const FAKETENSOR_HOW: &str = "PyTorch on a CPU under FakeTensorMode + MemTracker (calibration/harness/measure.py): the live tensors a CUDA caching allocator would hold, measured without a GPU";
/// How the published set was measured.
pub const PUBLISHED_HOW: &str = "real GPU figures others published (calibration/data/published/README.md): each compared with the estimate of what its tool measures — max_memory_allocated with the tensor peak, max_memory_reserved with tensors + allocator overhead, nvidia-smi with that + context, workspaces and NCCL, an engine's log line with the engine's own start-up sizing";
/// How the `llamacpp` group of the published set was measured.
pub const LLAMACPP_HOW: &str = "group llamacpp: published llama.cpp start-up logs (calibration/data/published/llamacpp.jsonl) replayed through the GGUF model, each model, KV and compute buffer as llama.cpp prints it, judged on its own (builds from b9400: KV within 1%, compute within 10%; older builds within 3%) and kept out of the overall figures";
/// The published set's group of llama.cpp logs.
pub const LLAMACPP_GROUP: &str = "llamacpp";
/// The llama.cpp start-up logs measured for this project on a CPU-only build
/// (calibration/data/measured/llamacpp-cpu.jsonl): a group of its own.
pub const LLAMACPP_CPU_GROUP: &str = "llamacpp_cpu";
pub const LLAMACPP_CPU_HOW: &str = "group llamacpp_cpu: llama.cpp b11312 start-up logs measured for this project on a CPU-only build (calibration/data/measured/llamacpp-cpu.jsonl, GGUF headers at real dimensions), replayed on the headers llama.cpp loaded, judged on their own (KV and state within 1%, compute within 10%) and kept out of the overall figures; CUDA's padding and host/GPU split are not in them";

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SetArg {
    /// groups A, B, C measured with PyTorch FakeTensorMode on a CPU
    #[default]
    Faketensor,
    /// real GPU measurements from public sources
    Published,
    /// the planner's time model against published training and serving throughputs
    Throughput,
}

#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    #[command(flatten)]
    pub text: crate::cmd::width::TextArgs,
    /// Which measured set: faketensor (A, B, C; measured on a CPU with PyTorch FakeTensorMode), published (real GPUs) or throughput (the planner's time model, docs/plan.md "Time model")
    #[arg(long, value_enum, default_value_t = SetArg::Faketensor)]
    pub set: SetArg,
    /// Only this group: A, B, C (faketensor); qlora, lora, full, serving, multi_gpu, runtime, llamacpp, llamacpp_cpu (published)
    #[arg(long)]
    pub group: Option<String>,
    /// A JSONL file of cases in the chosen set's format instead of the embedded ones (with --group llamacpp: llama.cpp logs in llamacpp.jsonl's format)
    #[arg(long, value_name = "FILE")]
    pub cases: Option<PathBuf>,
    /// Machine-readable output
    #[arg(long)]
    pub json: bool,
}

fn row(c: &Case) -> anyhow::Result<Option<CaseRow>> {
    let (quantity, est, meas, pe) = match c.group {
        Group::A => {
            let Some(meas) = c.measured.param_bytes else { return Ok(None) };
            let layout = ParamLayout::of(&c.spec).with_context(|| c.origin.clone())?;
            let est = DType::BF16
                .bytes_for(layout.total()?)
                .ok_or_else(|| anyhow::anyhow!("{}: parameter bytes overflow", c.origin))?;
            ("param_bytes", est, meas, None)
        }
        Group::B | Group::C => {
            let Some(meas) = c.measured.tensor_peak_bytes else { return Ok(None) };
            let Some(w) = &c.workload else { return Ok(None) };
            let l = estimate(&c.spec, w).with_context(|| format!("{}: {}", c.origin, c.id))?;
            ("tensor_peak_bytes", l.tensor_peak_bytes(), meas, Some(l.peak_phase.name().to_string()))
        }
    };
    let Some(error_pct) = error_pct(est, meas) else { bail!("{}: measured bytes are 0", c.origin) };
    Ok(Some(CaseRow {
        id: c.id.clone(),
        group: c.group.name().to_string(),
        quantity: quantity.to_string(),
        estimated_bytes: est,
        measured_bytes: meas,
        error_pct,
        safety_error_pct: error_pct,
        peak_phase_estimated: pe,
        peak_phase_measured: if c.group == Group::A { None } else { c.measured.peak_phase.clone() },
        measured: None,
        source_of_constant: false,
        source: c.origin.clone(),
    }))
}

/// Compare the FakeTensor cases; pure apart from the estimates.
pub fn compare(cases: &[Case], group: Option<Group>) -> anyhow::Result<CalibrateReport> {
    let mut rows = Vec::new();
    for c in cases.iter().filter(|c| group.is_none_or(|g| c.group == g)) {
        if let Some(r) = row(c)? {
            rows.push(r);
        }
    }
    Ok(CalibrateReport::new("faketensor", FAKETENSOR_HOW, Bar::FakeTensor, rows, Vec::new()))
}

/// The CUDA-reported capacity of the card a serving case ran on.
fn serving_setup(s: &ServingCase, origin: &str) -> anyhow::Result<ServingSetup> {
    let capacity = match (s.cuda_capacity_bytes, &s.gpu) {
        (Some(b), _) => b,
        (None, Some(id)) => {
            let gpus = vramfit_catalog::gpus::builtin_gpus()?;
            let g = vramfit_catalog::gpus::find_gpu(&gpus, id).with_context(|| format!("{origin}: vramfit.gpu"))?;
            vramfit_core::runtime::cuda_capacity(g.memory_mib * vramfit_core::units::MIB)
        }
        (None, None) => bail!("{origin}: a serving case needs vramfit.cuda_capacity_gib or vramfit.gpu"),
    };
    Ok(ServingSetup {
        gpu_util: s.gpu_memory_utilization,
        cuda_capacity_bytes: capacity,
        max_num_batched_tokens: s.max_num_batched_tokens,
        max_num_seqs: s.max_num_seqs,
    })
}

/// Compare the published cases: one row per measured figure that has a quantity, the rest excluded.
pub fn compare_published(cases: &[PublishedCase], group: Option<&str>) -> anyhow::Result<CalibrateReport> {
    let mut rows = Vec::new();
    let mut excluded = Vec::new();
    for c in cases.iter().filter(|c| group.is_none_or(|g| c.group.name() == g)) {
        let serving = c.serving.as_ref().map(|s| serving_setup(s, &c.origin)).transpose()?;
        let input = CaseInput { spec: c.spec.as_ref(), workload: c.workload.as_ref(), serving: serving.as_ref() };
        for cmp in &c.comparisons {
            let q: &Quantity = match &cmp.quantity {
                Ok(q) => q,
                Err(reason) => {
                    excluded.push(ExcludedRow {
                        id: c.id.clone(),
                        group: c.group.name().to_string(),
                        measured: cmp.measurement.what.clone(),
                        reason: reason.clone(),
                        source: c.origin.clone(),
                    });
                    continue;
                }
            };
            let est = estimate_quantity(q, input).with_context(|| format!("{}: {}", c.origin, c.id))?;
            let meas = cmp.measurement.bytes;
            let Some(err) = error_pct(est, meas) else { bail!("{}: measured bytes are 0", c.origin) };
            rows.push(CaseRow {
                id: c.id.clone(),
                group: c.group.name().to_string(),
                quantity: q.name().to_string(),
                estimated_bytes: est,
                measured_bytes: meas,
                error_pct: err,
                safety_error_pct: q.safety_error_pct(err),
                peak_phase_estimated: None,
                peak_phase_measured: None,
                measured: Some(format!("{} ({})", cmp.measurement.what, cmp.measurement.printed)),
                source_of_constant: cmp.source_of_constant,
                source: c.origin.clone(),
            });
        }
    }
    Ok(CalibrateReport::new("published", PUBLISHED_HOW, Bar::Published, rows, excluded))
}

/// The llama.cpp log figures as calibrate rows (group `llamacpp`); the
/// errors and limits are the ingest replay's.
pub fn llamacpp_rows(figs: &[LogFigure], group: &str) -> Vec<CaseRow> {
    figs.iter()
        .map(|f| CaseRow {
            id: f.id.clone(),
            group: group.to_string(),
            quantity: f.kind.quantity().to_string(),
            estimated_bytes: f.vramfit_bytes,
            measured_bytes: f.logged_bytes(),
            error_pct: f.error_pct,
            // a buffer: under-predicting it is the unsafe side, as for any memory figure
            safety_error_pct: f.error_pct,
            peak_phase_estimated: None,
            peak_phase_measured: None,
            measured: Some(format!(
                "llama.cpp b{} log: {} ({:.2} MiB; limit {}%)",
                f.build, f.key, f.logged_mib, f.limit_pct
            )),
            source_of_constant: false,
            source: format!("{} ({})", f.origin, f.source),
        })
        .collect()
}

/// The llama.cpp log set replayed: its rows and the group's accuracy.
fn llamacpp_group(
    logs: &[llamalogs::LogCase],
    group: &str,
) -> anyhow::Result<(Vec<CaseRow>, vramfit_core::accuracy::Accuracy)> {
    let figs = llamalogs::replay_all(logs)?;
    Ok((llamacpp_rows(&figs, group), llamalogs::accuracy(&figs)))
}

fn read_cases(p: &std::path::Path) -> anyhow::Result<String> {
    Ok(vramfit_input::read_text(p, "a case file", MAX_CASES_BYTES as u64)?)
}

/// `--set published`: memory.jsonl's groups, and the llama.cpp logs as the
/// `llamacpp` group (judged on its own).
fn published(args: &CalibrateArgs) -> anyhow::Result<CalibrateReport> {
    let mut names: Vec<&str> = vramfit_ingest::calibration::published::PubGroup::ALL.iter().map(|g| g.name()).collect();
    names.push(LLAMACPP_GROUP);
    names.push(LLAMACPP_CPU_GROUP);
    let group = args.group.as_deref();
    if let Some(g) = group {
        if !names.contains(&g) {
            bail!(
                "--group {g}: the published set has groups {} ({PUBLISHED_FILE}; llamacpp: {}; llamacpp_cpu: {})",
                names.join(", "),
                llamalogs::LLAMACPP_FILE,
                llamalogs::MEASURED_CPU_FILE
            );
        }
    }
    for (name, how) in [(LLAMACPP_GROUP, LLAMACPP_HOW), (LLAMACPP_CPU_GROUP, LLAMACPP_CPU_HOW)] {
        if group != Some(name) {
            continue;
        }
        // --cases: a file in llamacpp.jsonl's format instead of the embedded logs
        let logs = match (&args.cases, name == LLAMACPP_CPU_GROUP) {
            (Some(p), _) => llamalogs::parse_llamacpp_cases(&read_cases(p)?, &p.display().to_string())?,
            (None, false) => llamalogs::embedded_llamacpp()?,
            (None, true) => llamalogs::embedded_llamacpp_cpu()?,
        };
        let (rows, acc) = llamacpp_group(&logs, name)?;
        let mut r = CalibrateReport::new("published", how, Bar::Published, Vec::new(), Vec::new());
        r.push_separate_group(name, rows, acc);
        return Ok(r);
    }
    let cases = match &args.cases {
        Some(p) => parse_published_cases(&read_cases(p)?, &p.display().to_string())?,
        None => embedded_published()?,
    };
    let mut r = compare_published(&cases, group)?;
    // a --cases file replaces memory.jsonl only: the llama.cpp logs join the whole embedded set
    if args.cases.is_none() && group.is_none() {
        let (rows, acc) = llamacpp_group(&llamalogs::embedded_llamacpp()?, LLAMACPP_GROUP)?;
        r.push_separate_group(LLAMACPP_GROUP, rows, acc);
        let (rows, acc) = llamacpp_group(&llamalogs::embedded_llamacpp_cpu()?, LLAMACPP_CPU_GROUP)?;
        r.push_separate_group(LLAMACPP_CPU_GROUP, rows, acc);
        r.measured_how = format!("{PUBLISHED_HOW}; {LLAMACPP_HOW}; {LLAMACPP_CPU_HOW}");
    }
    Ok(r)
}

pub fn run(args: CalibrateArgs) -> anyhow::Result<Outcome> {
    let report = match args.set {
        SetArg::Throughput => {
            if args.group.is_some() || args.cases.is_some() {
                bail!(
                    "--set throughput compares the embedded {} as one set: --group and --cases do not apply",
                    vramfit_ingest::calibration::throughput::THROUGHPUT_FILE
                );
            }
            return crate::cmd::calibrate_throughput::run(args.json);
        }
        SetArg::Faketensor => {
            let cases = match &args.cases {
                Some(p) => parse_cases(&read_cases(p)?, &p.display().to_string())?,
                None => embedded()?,
            };
            let group = match args.group.as_deref() {
                None => None,
                Some(g) => Some(match g.to_ascii_uppercase().as_str() {
                    "A" => Group::A,
                    "B" => Group::B,
                    "C" => Group::C,
                    _ => bail!(
                        "--group {g}: the faketensor set has groups A, B and C (published groups need --set published)"
                    ),
                }),
            };
            compare(&cases, group)?
        }
        SetArg::Published => published(&args)?,
    };
    if report.cases.is_empty() {
        bail!("no measured case to compare (group filter or empty file)");
    }
    let stdout = if args.json { report.to_json() } else { render(&report, args.text.width()) };
    Ok(Outcome { stdout, code: if report.summary.pass { 0 } else { 1 } })
}
