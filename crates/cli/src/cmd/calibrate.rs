//! `vramfit calibrate`: every embedded PyTorch-measured case (A: parameter
//! bytes, B: inference prefill peak, C: training-step peak) estimated and
//! compared; median and max |error|. Exit 1 when the set misses the accuracy
//! bar of `vramfit_core::accuracy` (median |error| above 3% or any case above 10%).

use crate::Outcome;
use anyhow::{bail, Context};
use std::path::PathBuf;
use vramfit_core::accuracy::error_pct;
use vramfit_core::{estimate, DType, ParamLayout};
use vramfit_ingest::calibration::{embedded, parse_cases, Case, Group, MAX_CASES_BYTES};
use vramfit_report::calibrate::{render, CalibrateReport, CaseRow};

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupArg {
    #[value(name = "A", alias = "a")]
    A,
    #[value(name = "B", alias = "b")]
    B,
    #[value(name = "C", alias = "c")]
    C,
}

#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// Only this group: A (parameter bytes), B (inference prefill), C (training step)
    #[arg(long, value_enum)]
    pub group: Option<GroupArg>,
    /// A JSONL file of measured cases (format of calibration/data/*.jsonl) instead of the embedded ones
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
        peak_phase_estimated: pe,
        peak_phase_measured: if c.group == Group::A { None } else { c.measured.peak_phase.clone() },
        source: c.origin.clone(),
    }))
}

/// Compare the cases; pure apart from the estimates.
pub fn compare(cases: &[Case], group: Option<Group>) -> anyhow::Result<CalibrateReport> {
    let mut rows = Vec::new();
    for c in cases.iter().filter(|c| group.is_none_or(|g| c.group == g)) {
        if let Some(r) = row(c)? {
            rows.push(r);
        }
    }
    Ok(CalibrateReport::new(rows))
}

pub fn run(args: CalibrateArgs) -> anyhow::Result<Outcome> {
    let cases = match &args.cases {
        Some(p) => {
            let text = vramfit_input::read_text(p, "a calibration case file", MAX_CASES_BYTES as u64)?;
            parse_cases(&text, &p.display().to_string())?
        }
        None => embedded()?,
    };
    let group = args.group.map(|g| match g {
        GroupArg::A => Group::A,
        GroupArg::B => Group::B,
        GroupArg::C => Group::C,
    });
    let report = compare(&cases, group)?;
    if report.cases.is_empty() {
        bail!("no measured case to compare (group filter or empty file)");
    }
    let stdout = if args.json { report.to_json() } else { render(&report) };
    Ok(Outcome { stdout, code: if report.summary.pass { 0 } else { 1 } })
}
