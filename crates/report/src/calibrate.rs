//! `vramfit calibrate`: estimate vs measurement per calibration case, the
//! accuracy per group and of the whole set. Schema documented in
//! docs/training.md (`vramfit calibrate --json`).

use crate::format::{bytes, display_width, fit_lines, shown, Width};
use serde::Serialize;
use vramfit_core::accuracy::Accuracy;

/// One compared case (one measured figure of it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseRow {
    pub id: String,
    /// "A" (weights), "B" (inference prefill), "C" (training step); published:
    /// qlora, lora, full, serving, multi_gpu, runtime, llamacpp
    pub group: String,
    /// what is compared: "param_bytes" (A), "tensor_peak_bytes" (B, C); published:
    /// tensor_peak, reserved, device_used, persistent, model_init, engine_weights,
    /// engine_kv_pool, engine_activation, engine_non_torch, cuda_context,
    /// nccl_communicator, deepspeed_buckets_delta; published group llamacpp:
    /// llamacpp_model_buffer, llamacpp_kv_buffer, llamacpp_compute_buffer
    pub quantity: String,
    pub estimated_bytes: u64,
    pub measured_bytes: u64,
    /// (estimated − measured) / measured × 100
    pub error_pct: f64,
    /// the error with the sign of safety: negative = the unsafe side (memory
    /// under-predicted, or a capacity such as a KV pool over-stated)
    pub safety_error_pct: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_phase_estimated: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_phase_measured: Option<String>,
    /// published: how the figure was measured (`max_memory_allocated()`, nvidia-smi, an engine log line)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<String>,
    /// published: this figure is the source of a constant it is compared with,
    /// so it is shown but not counted in the accuracy
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub source_of_constant: bool,
    /// file:line of the record
    pub source: String,
}

/// A published figure that is not compared, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExcludedRow {
    pub id: String,
    pub group: String,
    /// the `what` of the measurement
    pub measured: String,
    pub reason: String,
    pub source: String,
}

/// The accuracy of a set or group: core's [`Accuracy`] (its serde form is
/// the schema, so a field is written once).
pub type Summary = Accuracy;

/// The accuracy of one group.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupSummary {
    pub group: String,
    #[serde(flatten)]
    pub summary: Summary,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrateReport {
    pub schema: u32,
    /// always "calibrate"
    pub command: &'static str,
    /// "faketensor" (groups A, B, C) or "published" (its `llamacpp` group is
    /// judged on its own and kept out of `summary`'s figures)
    pub set: String,
    /// how the set was measured, in words
    pub measured_how: String,
    pub cases: Vec<CaseRow>,
    /// published figures not compared, with the reason (empty for faketensor)
    pub excluded: Vec<ExcludedRow>,
    pub groups: Vec<GroupSummary>,
    pub summary: Summary,
}

/// How the per-group and overall bars are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bar {
    /// FakeTensor sets: median |error| ≤ 3% and every case ≤ 10%, per group and overall
    FakeTensor,
    /// published sets: overall median ≤ 3%, each group median ≤ 5%, no mean signed error below −3%
    Published,
}

impl CalibrateReport {
    /// The report of compared cases; the summaries are their [`Accuracy`]
    /// (rows that are the source of a constant are left out of them).
    pub fn new(set: &str, measured_how: &str, bar: Bar, cases: Vec<CaseRow>, excluded: Vec<ExcludedRow>) -> Self {
        let counted = |g: Option<&str>| -> Vec<f64> {
            cases
                .iter()
                .filter(|c| !c.source_of_constant && g.is_none_or(|g| c.group == g))
                .map(|c| c.safety_error_pct)
                .collect()
        };
        let mut names: Vec<String> = Vec::new();
        for c in &cases {
            if !names.contains(&c.group) {
                names.push(c.group.clone());
            }
        }
        let groups = names
            .into_iter()
            .filter_map(|g| {
                let errs = counted(Some(&g));
                if errs.is_empty() {
                    return None;
                }
                let a = match bar {
                    Bar::FakeTensor => Accuracy::of(&errs),
                    Bar::Published => Accuracy::of_group(&errs),
                };
                Some(GroupSummary { group: g, summary: a })
            })
            .collect::<Vec<_>>();
        let all = counted(None);
        let mut summary = match bar {
            Bar::FakeTensor => Accuracy::of(&all),
            // one group alone (`--group qlora`) is judged on the group bar it
            // passes in the whole set, not on the overall 3% meant for the mix
            Bar::Published if groups.len() == 1 => groups[0].summary,
            Bar::Published => Accuracy::of_published(&all),
        };
        summary.pass = summary.pass && groups.iter().all(|g| g.summary.pass);
        CalibrateReport {
            schema: crate::SCHEMA_VERSION,
            command: "calibrate",
            set: set.to_string(),
            measured_how: measured_how.to_string(),
            cases,
            excluded,
            groups,
            summary,
        }
    }

    /// Add a group judged by its own bar and kept out of the overall
    /// figures (`--set published`'s `llamacpp` group: llama.cpp start-up
    /// logs, each buffer against its own limit). Its rows join the table and
    /// its summary the groups; the overall verdict passes only if the group
    /// does. A report with no other case takes the group's summary as its own.
    pub fn push_separate_group(&mut self, group: &str, rows: Vec<CaseRow>, summary: Summary) {
        if rows.is_empty() {
            return;
        }
        if self.cases.is_empty() {
            self.summary = summary;
        } else {
            self.summary.pass = self.summary.pass && summary.pass;
        }
        self.cases.extend(rows);
        self.groups.push(GroupSummary { group: group.to_string(), summary });
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"schema\":1,\"error\":\"{e}\"}}")) + "\n"
    }
}

/// A percentage with its sign, and no sign when it rounds to zero (never "-0.00%").
pub fn signed_pct(x: f64) -> String {
    let s = format!("{x:+.2}%");
    match s.as_str() {
        "+0.00%" | "-0.00%" => "0.00%".to_string(),
        _ => s,
    }
}

fn summary_line(label: &str, m: &Summary) -> String {
    let max = match m.max_limit_pct {
        Some(l) => format!("max |error| {:.2}% (limit {l:.0}%)", m.max_abs_error_pct),
        None => format!("max |error| {:.2}%", m.max_abs_error_pct),
    };
    format!(
        "{label}{} cases: median |error| {:.2}% (limit {:.0}%), {max}, mean signed error {}: {}",
        m.cases,
        m.median_abs_error_pct,
        m.median_limit_pct,
        signed_pct(m.mean_signed_error_pct),
        if m.pass { "PASS" } else { "FAIL" }
    )
}

/// Notes of a case row: the peak phases, what an error means.
fn case_notes(c: &CaseRow) -> String {
    let mut notes = Vec::new();
    match (&c.peak_phase_estimated, &c.peak_phase_measured) {
        (Some(e), Some(m)) => notes.push(format!("peak {e} / {m}")),
        (Some(e), None) => notes.push(format!("peak {e}")),
        _ => {}
    }
    if c.safety_error_pct != c.error_pct {
        notes.push("capacity: + is optimistic".into());
    }
    if c.source_of_constant {
        notes.push("source of its constant (not counted)".into());
    }
    shown(&notes.join("; ")).into_owned()
}

/// Human table, fitted to `width`: there the columns are as wide as their
/// content, a quantity is named without its `_bytes` (every one is bytes),
/// the notes go under their row when the row would be too wide with them,
/// and a case id that leaves no room goes on a line of its own. Without a
/// width (`--wide`): one row per case, fixed columns.
pub fn render(r: &CalibrateReport, width: Width) -> String {
    let mut s = format!("Set: {} — {}\n\n", r.set, r.measured_how);
    let quantity =
        |q: &str| if width.is_some() { q.strip_suffix("_bytes").unwrap_or(q).to_string() } else { q.to_string() };
    let rows: Vec<[String; 7]> = r
        .cases
        .iter()
        .map(|c| {
            [
                shown(&c.id).into_owned(),
                c.group.clone(),
                quantity(&c.quantity),
                bytes(c.estimated_bytes),
                bytes(c.measured_bytes),
                signed_pct(c.error_pct),
                case_notes(c),
            ]
        })
        .collect();
    let head = ["case", "grp", "quantity", "estimated", "measured", "error", "notes"];
    let col = |k: usize, min: usize| {
        rows.iter().map(|r| display_width(&r[k])).chain([display_width(head[k]), min]).max().unwrap_or(min)
    };
    let (w, gw, qw) = (col(0, 4), col(1, 3), col(2, 8));
    let (ew, mw, xw) = if width.is_some() { (col(3, 0), col(4, 0), col(5, 0)) } else { (12, 12, 8) };
    let spaced = |r: &[String], gap: &str| {
        format!("{:<gw$}  {:<qw$}  {:>ew$}{gap}{:>mw$}{gap}{:>xw$}", r[1], r[2], r[3], r[4], r[5])
    };
    let limit = width.unwrap_or(usize::MAX);
    let head_row: Vec<String> = head.iter().map(|h| h.to_string()).collect();
    // too wide: the right-aligned figures one space apart, then the case id on a line of its own
    let gap = if w + 2 + display_width(&spaced(&head_row, "  ")) > limit { " " } else { "  " };
    let values = |r: &[String]| spaced(r, gap);
    let id_apart = w + 2 + display_width(&values(&head_row)) > limit;
    let line = |r: &[String]| -> String {
        let v = values(r);
        let main = if id_apart { format!("{}\n    {v}", r[0]) } else { format!("{:<w$}  {v}", r[0]) };
        let last = main.rsplit('\n').next().unwrap_or_default();
        if r[6].is_empty() {
            main.trim_end().to_string()
        } else if display_width(last) + 2 + display_width(&r[6]) <= limit {
            format!("{main}  {}", r[6])
        } else {
            format!("{}\n      {}", main.trim_end(), r[6])
        }
    };
    let header = if id_apart { format!("case\n    {}  notes", values(&head_row)) } else { line(&head_row) };
    s.push_str(header.trim_end());
    s.push('\n');
    for r in &rows {
        s.push_str(&line(r));
        s.push('\n');
    }
    if !r.excluded.is_empty() {
        s.push_str(&format!("\nNot compared ({}):\n", r.excluded.len()));
        for e in &r.excluded {
            s.push_str(&format!("  {} [{}, {}]: {}\n", e.id, e.group, e.measured, e.reason));
        }
    }
    s.push('\n');
    if r.groups.len() > 1 {
        let gw = r.groups.iter().map(|g| g.group.len()).max().unwrap_or(3);
        for g in &r.groups {
            s.push_str(&summary_line(&format!("{:<gw$}  ", g.group), &g.summary));
            s.push('\n');
        }
    }
    s.push_str(&summary_line("all  ", &r.summary));
    s.push('\n');
    fit_lines(&s, width)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(group: &str, err: f64) -> CaseRow {
        CaseRow {
            id: "c".into(),
            group: group.into(),
            quantity: "tensor_peak".into(),
            estimated_bytes: 100,
            measured_bytes: 100,
            error_pct: err,
            safety_error_pct: err,
            peak_phase_estimated: None,
            peak_phase_measured: None,
            measured: None,
            source_of_constant: false,
            source: "f:1".into(),
        }
    }

    /// A separate group joins the table and the groups, not the overall
    /// figures; its failure fails the report; alone, its summary is the report's.
    #[test]
    fn a_separate_group_is_kept_out_of_the_overall_figures() {
        let mut r = CalibrateReport::new("published", "how", Bar::Published, vec![row("lora", 1.0)], Vec::new());
        let mut failing = Accuracy::of(&[20.0]);
        failing.pass = false;
        r.push_separate_group("llamacpp", vec![row("llamacpp", 20.0)], failing);
        assert_eq!(r.cases.len(), 2);
        assert_eq!(r.summary.cases, 1);
        assert_eq!(r.summary.median_abs_error_pct, 1.0);
        assert!(!r.summary.pass);
        assert_eq!(r.groups.last().map(|g| g.group.as_str()), Some("llamacpp"));
        let mut alone = CalibrateReport::new("published", "how", Bar::Published, Vec::new(), Vec::new());
        let ok = Accuracy::of(&[0.5]);
        alone.push_separate_group("llamacpp", vec![row("llamacpp", 0.5)], ok);
        assert_eq!(alone.summary, ok);
    }

    /// `calibrate --set published --group qlora` exited 1 on a group whose
    /// median (3.7%) passes its own 5% bar: the lone group's bar decides.
    #[test]
    fn one_published_group_alone_is_judged_on_the_group_bar() {
        let rows = vec![row("qlora", 3.7), row("qlora", -3.8), row("qlora", 1.0)];
        let alone = CalibrateReport::new("published", "how", Bar::Published, rows.clone(), Vec::new());
        assert!(alone.summary.pass, "{:?}", alone.summary);
        assert_eq!(alone.summary.median_limit_pct, 5.0);
        // the same rows beside another group are judged on the overall 3% median
        let mixed = CalibrateReport::new(
            "published",
            "how",
            Bar::Published,
            [rows, vec![row("lora", 3.5)]].concat(),
            Vec::new(),
        );
        assert!(!mixed.summary.pass, "{:?}", mixed.summary);
    }

    #[test]
    fn no_negative_zero() {
        assert_eq!(signed_pct(-0.0001), "0.00%");
        assert_eq!(signed_pct(0.004), "0.00%");
        assert_eq!(signed_pct(-1.234), "-1.23%");
        assert_eq!(signed_pct(2.5), "+2.50%");
    }
}
