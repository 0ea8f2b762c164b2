//! `vramfit calibrate`: estimate vs PyTorch measurement per calibration
//! case, and the accuracy summary. Schema documented in docs/training.md.

use crate::format::{bytes, shown};
use serde::Serialize;
use vramfit_core::accuracy::Accuracy;

/// One compared case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseRow {
    pub id: String,
    /// "A" (weights), "B" (inference prefill), "C" (training step)
    pub group: String,
    /// what is compared: "param_bytes" (A) or "tensor_peak_bytes" (B, C)
    pub quantity: String,
    pub estimated_bytes: u64,
    pub measured_bytes: u64,
    /// (estimated − measured) / measured × 100
    pub error_pct: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_phase_estimated: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_phase_measured: Option<String>,
    /// file:line of the record
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub cases: usize,
    pub median_abs_error_pct: f64,
    pub max_abs_error_pct: f64,
    pub median_limit_pct: f64,
    pub max_limit_pct: f64,
    pub pass: bool,
}

impl From<&Accuracy> for Summary {
    fn from(a: &Accuracy) -> Summary {
        Summary {
            cases: a.cases,
            median_abs_error_pct: a.median_abs_error_pct,
            max_abs_error_pct: a.max_abs_error_pct,
            median_limit_pct: a.median_limit_pct,
            max_limit_pct: a.max_limit_pct,
            pass: a.pass,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrateReport {
    pub schema: u32,
    /// always "calibrate"
    pub command: &'static str,
    pub cases: Vec<CaseRow>,
    pub summary: Summary,
}

impl CalibrateReport {
    /// The report of compared cases; the summary is their [`Accuracy`].
    pub fn new(cases: Vec<CaseRow>) -> CalibrateReport {
        let errors: Vec<f64> = cases.iter().map(|c| c.error_pct).collect();
        let summary = Summary::from(&Accuracy::of(&errors));
        CalibrateReport { schema: crate::SCHEMA_VERSION, command: "calibrate", cases, summary }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"schema\":1,\"error\":\"{e}\"}}")) + "\n"
    }
}

/// Human table.
pub fn render(r: &CalibrateReport) -> String {
    let mut s = String::new();
    let w = r.cases.iter().map(|c| c.id.len()).max().unwrap_or(4).max(4);
    s.push_str(&format!(
        "{:<w$}  {:>3}  {:>12}  {:>12}  {:>8}  {}\n",
        "case", "grp", "estimated", "measured", "error", "peak phase (est / meas)"
    ));
    for c in &r.cases {
        let phase = match (&c.peak_phase_estimated, &c.peak_phase_measured) {
            (Some(e), Some(m)) => format!("{e} / {m}"),
            (Some(e), None) => e.clone(),
            _ => String::new(),
        };
        let line = format!(
            "{:<w$}  {:>3}  {:>12}  {:>12}  {:>+7.2}%  {}",
            shown(&c.id),
            c.group,
            bytes(c.estimated_bytes),
            bytes(c.measured_bytes),
            c.error_pct,
            shown(&phase)
        );
        s.push_str(line.trim_end());
        s.push('\n');
    }
    let m = &r.summary;
    s.push_str(&format!(
        "\n{} cases: median |error| {:.2}% (limit {:.0}%), max |error| {:.2}% (limit {:.0}%): {}\n",
        m.cases,
        m.median_abs_error_pct,
        m.median_limit_pct,
        m.max_abs_error_pct,
        m.max_limit_pct,
        if m.pass { "PASS" } else { "FAIL" }
    ));
    s
}
