//! `vramfit calibrate --set throughput`: the planner's time model against
//! published throughputs. The JSON document is the planner's
//! [`ThroughputComparison`] under a header (`schema`, `command`, `set`); the
//! text is a table of the ratio per case and the bar.

use serde::Serialize;
use std::fmt::Write;
use vramfit_plan::calibrate::{ThroughputComparison, CASE_RANGE, MEDIAN_RANGE};

/// The `calibrate --set throughput --json` document.
#[derive(Debug, Clone, Serialize)]
pub struct ThroughputDocument {
    pub schema: u32,
    pub command: &'static str,
    pub set: &'static str,
    #[serde(flatten)]
    pub comparison: ThroughputComparison,
}

impl ThroughputDocument {
    pub fn new(comparison: ThroughputComparison) -> Self {
        ThroughputDocument { schema: crate::SCHEMA_VERSION, command: "calibrate", set: "throughput", comparison }
    }
}

/// `--json`.
pub fn json(doc: &ThroughputDocument) -> String {
    serde_json::to_string_pretty(doc).unwrap_or_else(|e| format!("{{\"schema\":1,\"error\":\"{e}\"}}"))
}

/// The human table; `file` names the set.
pub fn render(doc: &ThroughputDocument, file: &str) -> String {
    let r = &doc.comparison;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "vramfit calibrate --set throughput: the planner's time model against published throughputs ({file})"
    );
    let _ = writeln!(o, "ratio = modelled / published (< 1: the model is slower than measured)\n");
    let _ = writeln!(o, "{:<44} {:>8} {:>12} {:>12} {:>6}  unit", "case", "group", "published", "modelled", "ratio");
    for c in &r.cases {
        match (c.modelled, c.ratio) {
            (Some(m), Some(x)) => {
                let flag = if (CASE_RANGE.0..=CASE_RANGE.1).contains(&x) { "" } else { "  ← outside 0.6–1.6" };
                let _ = writeln!(
                    o,
                    "{:<44} {:>8} {:>12.1} {:>12.1} {:>6.2}  {}{flag}",
                    c.id,
                    c.group,
                    c.published,
                    m,
                    x,
                    c.unit.text()
                );
            }
            _ => {
                let _ = writeln!(
                    o,
                    "{:<44} {:>8} {:>12.1} {:>12} {:>6}  {} (not modelled: {})",
                    c.id,
                    c.group,
                    c.published,
                    "–",
                    "–",
                    c.unit.text(),
                    c.skipped.as_ref().map(|s| s.to_string()).unwrap_or_default()
                );
            }
        }
    }
    let f = |x: Option<f64>| x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "–".into());
    let _ = writeln!(
        o,
        "\n{} of {} cases modelled: median ratio {} (bar {:.2}–{:.2}), min {}, max {} (bar {:.1}–{:.1}): {}",
        r.counted,
        r.cases.len(),
        f(r.median_ratio),
        MEDIAN_RANGE.0,
        MEDIAN_RANGE.1,
        f(r.min_ratio),
        f(r.max_ratio),
        CASE_RANGE.0,
        CASE_RANGE.1,
        if r.pass { "pass" } else { "FAIL" }
    );
    o
}
