//! `vramfit plan`: JSON schema and the human renderer.
//!
//! Schema 1 (docs/plan.md): the planner's [`PlanReport`] flattened under a
//! header with the model and the job. Bytes are integers; prices are
//! `{low, high}` ranges in the offer's `currency` (never converted); hours
//! and tokens/s are floats.

use crate::format::{bytes, params, signed_bytes, thousands};
use crate::SCHEMA_VERSION;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use serde::Serialize;
use std::fmt::Write;
use vramfit_core::plan::{Job, Ladder, PlanReport, PlanRow, PriceRange, StepStatus};

/// The model a plan is for.
#[derive(Debug, Clone, Serialize)]
pub struct PlanModel {
    pub name: String,
    pub source: String,
    pub params_total: u64,
}

/// What the user asked.
#[derive(Debug, Clone, Serialize)]
pub struct PlanJob {
    /// `train` or `inference`
    pub task: String,
    /// the user's setup in words
    pub setup: String,
    /// tokens to train on / generate (`--tokens`)
    pub tokens: Option<u64>,
    /// rental hours (`--hours`)
    pub hours: Option<f64>,
    /// `--allow` values
    pub allow: Vec<String>,
}

/// The whole `plan --json` document.
#[derive(Debug, Clone, Serialize)]
pub struct PlanDocument {
    pub schema: u32,
    pub command: &'static str,
    pub model: PlanModel,
    pub job: PlanJob,
    #[serde(flatten)]
    pub report: PlanReport,
}

impl PlanDocument {
    pub fn new(model: PlanModel, job: PlanJob, report: PlanReport) -> Self {
        PlanDocument { schema: SCHEMA_VERSION, command: "plan", model, job, report }
    }
}

/// `Job` as the header records it.
pub fn job_fields(job: Job) -> (Option<u64>, Option<f64>) {
    match job {
        Job::None => (None, None),
        Job::Tokens(t) => (Some(t), None),
        Job::Hours(h) => (None, Some(h)),
    }
}

/// A money amount: thousands separators, two decimals under 100.
pub fn money(v: f64) -> String {
    if !v.is_finite() {
        return "?".into();
    }
    if v.abs() >= 100.0 {
        thousands(v.round().max(0.0) as u64)
    } else {
        format!("{v:.2}")
    }
}

/// A price range in its currency: `CNY 25,000–40,000` or `CNY 2,500`.
pub fn price(p: &PriceRange, currency: &str) -> String {
    if p.is_range() {
        format!("{currency} {}–{}", money(p.low), money(p.high))
    } else {
        format!("{currency} {}", money(p.low))
    }
}

/// Hours as `18.7 h`, `12.3 days`.
pub fn duration(h: f64) -> String {
    if !h.is_finite() {
        "?".into()
    } else if h < 48.0 {
        format!("{h:.1} h")
    } else {
        format!("{:.1} days", h / 24.0)
    }
}

fn setup_words(r: &PlanRow) -> String {
    let s = &r.setup;
    let mut parts = Vec::new();
    if s.method != "inference" {
        parts.push(s.method.clone());
        if s.sharding != "none" {
            parts.push(s.sharding.replace("zero", "ZeRO-"));
        } else if s.dp > 1 {
            parts.push(format!("DP {}", s.dp));
        }
    }
    if s.tp > 1 {
        parts.push(format!("TP {}", s.tp));
    }
    if s.pp > 1 {
        parts.push(format!("PP {}", s.pp));
    }
    if let Some(c) = &s.checkpointing {
        if c != "none" {
            parts.push(format!("ckpt {c}"));
        }
    }
    if let Some(o) = &s.optimizer {
        if o != "adamw" {
            parts.push(o.clone());
        }
    }
    if s.method != "inference" {
        parts.push(format!("mb {}×{}", s.micro_batch, s.grad_accum));
    }
    if s.offload_optimizer != "none" {
        parts.push(format!("offload opt→{}", s.offload_optimizer));
    }
    if s.offload_params != "none" {
        parts.push(format!("offload params→{}", s.offload_params));
    }
    if let Some(w) = &s.weights {
        parts.push(w.clone());
    }
    if let Some(k) = &s.kv_dtype {
        parts.push(format!("kv {k}"));
    }
    parts.join(", ")
}

fn hardware(r: &PlanRow) -> String {
    format!("{} × {}", r.gpus, r.gpu_name)
}

fn monthly(r: &PlanRow) -> String {
    match (&r.monthly, &r.hourly) {
        (Some(m), _) => format!("{}/mo", price(m, &r.currency)),
        (None, Some(h)) => format!("{}/h", price(h, &r.currency)),
        _ => "unpriced".into(),
    }
}

fn job_cost(r: &PlanRow) -> String {
    match (&r.job_cost, r.hourly_prorated) {
        (Some(c), true) => format!("{} (prorated)", price(c, &r.currency)),
        (Some(c), false) => price(c, &r.currency),
        _ => "–".into(),
    }
}

fn rate(r: &PlanRow) -> String {
    if r.setup.method == "inference" {
        format!("~{:.0} tokens/s decode", r.tokens_per_s)
    } else {
        format!("~{} tokens/s, ×{:.2} of ideal time", thousands(r.tokens_per_s.max(0.0).round() as u64), r.slowdown)
    }
}

/// Where a training plan loses time against its ideal, in words.
fn overhead(r: &PlanRow) -> String {
    let st = &r.step;
    if st.total_s <= 0.0 || r.setup.method == "inference" {
        return String::new();
    }
    let recompute = (st.compute_s - st.ideal_s).max(0.0);
    let link = if r.link == vramfit_core::Link::Nvlink { "NVLink" } else { "PCIe" };
    let parts = [
        (st.offload_s, "offload over PCIe and the CPU optimizer step".to_string()),
        (st.comm_s, format!("exposed {} collectives over {link}", r.setup.sharding.replace("zero", "ZeRO-"))),
        (st.bubble_s, "pipeline bubbles".to_string()),
        (recompute, "recompute and small micro-batches".to_string()),
    ];
    let (t, what) = parts.iter().max_by(|a, b| a.0.total_cmp(&b.0)).cloned().unwrap_or((0.0, String::new()));
    if t <= 0.0 {
        return String::new();
    }
    format!(" (×{:.2} of ideal; most lost to {what}: {:.0}% of each step)", r.slowdown, t / st.total_s * 100.0)
}

fn row_line(r: &PlanRow) -> String {
    let mut s = format!(
        "{} — {} [{}]: {} per GPU of {}, {}, {}",
        hardware(r),
        r.offer_name,
        setup_words(r),
        bytes(r.per_gpu_bytes),
        bytes(r.gpu_memory_bytes),
        monthly(r),
        rate(r)
    );
    if let Some(h) = r.job_hours {
        let _ = write!(s, "; job {} costing {}", duration(h), job_cost(r));
        if let (Some(n), Some(m)) = (r.months_billed, &r.monthly) {
            let _ = write!(
                s,
                " — a monthly rental bills {n} month{}: {}",
                if n == 1 { "" } else { "s" },
                price(&m.scale(n as f64), &r.currency)
            );
        }
    }
    s
}

/// `1.33× slower`, `1.72× faster`, `same`.
pub fn speed_words(x: f64) -> String {
    if !x.is_finite() || x <= 0.0 {
        "?".into()
    } else if (x - 1.0).abs() < 0.005 {
        "same".into()
    } else if x > 1.0 {
        format!("{x:.2}× slower")
    } else {
        format!("{:.2}× faster", 1.0 / x)
    }
}

fn ladder_table(l: &Ladder) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    t.set_header(vec!["step", "status", "per GPU", "saves", "fits", "speed vs start"]);
    t.add_row(vec![
        Cell::new("as given"),
        Cell::new(""),
        Cell::new(l.start_bytes.map(bytes).unwrap_or_else(|| "refused".into())).set_alignment(CellAlignment::Right),
        Cell::new(""),
        Cell::new(if l.start_fits { "yes" } else { "no" }),
        Cell::new("1.00×").set_alignment(CellAlignment::Right),
    ]);
    for (i, s) in l.steps.iter().enumerate() {
        let status = match s.status {
            StepStatus::Applied => {
                let what = if s.detail.is_empty() { "applied".to_string() } else { format!("applied ({})", s.detail) };
                if l.first_fit == Some(i) {
                    format!("{what} ← fits from here")
                } else {
                    what
                }
            }
            StepStatus::AlreadyOn => format!("already on ({})", s.detail),
            StepStatus::NotAllowed => s.detail.clone(),
            StepStatus::NotApplicable => format!("n/a ({})", s.detail),
            StepStatus::Refused => "refused by the estimator".into(),
            StepStatus::Skipped => format!("skipped: {}", s.detail),
        };
        let speed = s.slowdown.map(speed_words).unwrap_or_default();
        let mut per_gpu = s.per_gpu_bytes.map(bytes).unwrap_or_default();
        if s.cpu_bytes > 0 {
            let _ = write!(per_gpu, " (+{} host RAM)", bytes(s.cpu_bytes));
        }
        t.add_row(vec![
            Cell::new(&s.name),
            Cell::new(status),
            Cell::new(per_gpu).set_alignment(CellAlignment::Right),
            Cell::new(s.saved_bytes.map(signed_bytes).unwrap_or_default()).set_alignment(CellAlignment::Right),
            Cell::new(match (s.per_gpu_bytes, s.fits) {
                (None, _) => "",
                (_, true) => "yes",
                (_, false) => "no",
            }),
            Cell::new(speed).set_alignment(CellAlignment::Right),
        ]);
    }
    t.to_string()
}

fn ranked_table(rows: &[PlanRow], has_job: bool) -> String {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    let mut header = vec!["#", "GPUs", "offer", "setup", "per GPU", "tokens/s", "price"];
    if has_job {
        header.push("job time");
        header.push("job cost");
    }
    t.set_header(header);
    for (i, r) in rows.iter().enumerate() {
        let mut cells = vec![
            Cell::new(i + 1),
            Cell::new(hardware(r)),
            Cell::new(&r.offer_id),
            Cell::new(setup_words(r)),
            Cell::new(format!("{} / {}", bytes(r.per_gpu_bytes), bytes(r.gpu_memory_bytes)))
                .set_alignment(CellAlignment::Right),
            Cell::new(thousands(r.tokens_per_s.max(0.0).round() as u64)).set_alignment(CellAlignment::Right),
            Cell::new(monthly(r)).set_alignment(CellAlignment::Right),
        ];
        if has_job {
            cells.push(
                Cell::new(r.job_hours.map(duration).unwrap_or_else(|| "–".into())).set_alignment(CellAlignment::Right),
            );
            cells.push(Cell::new(job_cost(r)).set_alignment(CellAlignment::Right));
        }
        t.add_row(cells);
    }
    t.to_string()
}

/// The human report.
pub fn render(doc: &PlanDocument) -> String {
    let r = &doc.report;
    let mut o = String::new();
    let _ =
        writeln!(o, "vramfit plan: {} ({} params) — {}", doc.model.name, params(doc.model.params_total), doc.job.setup);
    match (doc.job.tokens, doc.job.hours) {
        (Some(t), _) => {
            let _ = writeln!(o, "job: {} tokens; ranked by job cost", thousands(t));
        }
        (_, Some(h)) => {
            let _ = writeln!(o, "job: {h} hours of rental; ranked by cost, then tokens/s");
        }
        _ => {
            let _ = writeln!(
                o,
                "no job size: ranked by monthly price (give --tokens N or --hours H for job time and cost)"
            );
        }
    }
    if let Some(b) = r.baseline_bytes {
        let _ = writeln!(o, "the job as given needs {} per GPU on one card", bytes(b));
    }
    if let (Some(h), Some(gap)) = (&r.have, r.have_gap_bytes) {
        if gap > 0 {
            let _ =
                writeln!(o, "your {h} ({}) is short by {}", bytes(r.have_memory_bytes.unwrap_or(0)), bytes(gap as u64));
        } else {
            let _ = writeln!(o, "your {h} holds it with {} to spare", bytes((-gap) as u64));
        }
    }
    o.push('\n');
    match &r.recommended {
        Some(rec) => {
            let _ = writeln!(o, "Recommended: {}", row_line(rec));
            if !rec.switches.is_empty() {
                let _ = writeln!(o, "  changes: {}", rec.switches.join("; "));
            }
            for n in rec.notes.iter().chain(rec.flags.iter().filter(|f| f.as_str() != "check the live price")) {
                let _ = writeln!(o, "  note: {n}");
            }
            if let (Some(y), false) = (&rec.monthly_yearly, rec.yearly_discounts.is_empty()) {
                let _ =
                    writeln!(o, "  yearly term: {}/mo ({})", price(y, &rec.currency), rec.yearly_discounts.join(", "));
            }
            let _ = writeln!(o, "  why: {}", r.reason);
        }
        None => {
            let _ = writeln!(o, "Recommended: nothing — {}", r.reason);
        }
    }

    let _ = writeln!(o, "\n(1) Software switches on your card");
    match &r.software {
        Some(l) => {
            let _ = writeln!(o, "{} ({}), applied in order:", l.gpu_name, bytes(l.gpu_memory_bytes));
            o.push_str(&ladder_table(l));
            o.push('\n');
            match (l.start_fits, l.first_fit) {
                (true, _) => {
                    let _ = writeln!(o, "it already fits as given");
                }
                (false, Some(i)) => {
                    let _ = writeln!(
                        o,
                        "fits after: {}",
                        l.steps[..=i]
                            .iter()
                            .filter(|s| s.status == StepStatus::Applied)
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(" → ")
                    );
                }
                (false, None) => {
                    let _ = writeln!(o, "no allowed switch makes it fit this card");
                }
            }
        }
        None => {
            let _ = writeln!(o, "give --have GPU to see what each switch saves on your card");
        }
    }

    let _ = writeln!(o, "\n(2) More cards, sharded");
    let mc = &r.more_cards;
    if let (Some(single), Some(dp)) = (mc.single_bytes, mc.dp_only_bytes) {
        if r.task == "train" {
            let _ = writeln!(
                o,
                "plain data parallelism on {} GPUs: {} per GPU (one GPU: {}) — DP alone does not lower per-GPU memory; sharding does",
                mc.dp_gpus,
                bytes(dp),
                bytes(single)
            );
        } else {
            let _ = writeln!(o, "replicas on more GPUs do not lower per-GPU memory; splitting the model (TP inside NVLink, PP over PCIe) does");
        }
    }
    match &mc.best {
        Some(b) => {
            let _ = writeln!(o, "cheapest: {}", row_line(b));
        }
        None if r.task == "train" => {
            let _ = writeln!(o, "no multi-GPU offer fits without offload");
        }
        None => {
            let _ = writeln!(o, "no multi-GPU split in the catalogue fits");
        }
    }
    if let Some(h) = &mc.on_have {
        let _ = writeln!(
            o,
            "on your own cards: {} over PCIe [{}]: {} per GPU",
            hardware(h),
            setup_words(h),
            bytes(h.per_gpu_bytes)
        );
    }

    let _ = writeln!(o, "\n(3) A bigger single card, job unchanged");
    let bc = &r.bigger_card;
    match &bc.best {
        Some(b) => {
            let _ = writeln!(o, "cheapest: {}", row_line(b));
        }
        None => {
            let need = bc.need_bytes.map(bytes).unwrap_or_default();
            if bc.gpus_that_fit.is_empty() {
                let _ = writeln!(o, "no single card holds it (needs {need}); no GPU in the catalogue is that big");
            } else {
                let _ = writeln!(
                    o,
                    "no offered single card holds it (needs {need}); big enough but not offered: {}",
                    bc.gpus_that_fit.join(", ")
                );
            }
        }
    }

    let has_job = doc.job.tokens.is_some() || doc.job.hours.is_some();
    if let (Some(rec), Some(_)) = (&r.recommended, doc.job.tokens) {
        let cheaper: Vec<&PlanRow> = r
            .ranked
            .iter()
            .filter(|x| x.currency == rec.currency && !(x.offer_id == rec.offer_id && x.gpus == rec.gpus))
            .filter(|x| match (x.monthly, rec.monthly) {
                (Some(a), Some(b)) => a.low < b.low,
                _ => false,
            })
            .filter(|x| match (x.job_cost, rec.job_cost) {
                (Some(a), Some(b)) => a.low > b.low * 1.005,
                _ => false,
            })
            .collect();
        if !cheaper.is_empty() {
            let _ = writeln!(
                o,
                "
Cheaper to rent, but not over this job"
            );
            for x in cheaper.iter().take(3) {
                let _ = writeln!(
                    o,
                    "  {} ({}): {} against {}{}; job {} against {}",
                    hardware(x),
                    monthly(x),
                    x.job_hours.map(duration).unwrap_or_default(),
                    rec.job_hours.map(duration).unwrap_or_default(),
                    overhead(x),
                    job_cost(x),
                    job_cost(rec)
                );
                if let (Some(a), Some(b)) = (x.job_cost, rec.job_cost) {
                    if a.low < b.high {
                        let _ = writeln!(
                            o,
                            "    (the price ranges overlap: at the top of the recommended plan's range it would cost more)"
                        );
                    }
                }
            }
        }
    }
    if !r.ranked.is_empty() {
        let _ = writeln!(o, "\nTop {} plans that fit (best setup per offer and GPU count)", r.ranked.len());
        o.push_str(&ranked_table(&r.ranked, has_job));
        o.push('\n');
    }

    if let Some(be) = &r.break_even {
        let _ = writeln!(o, "\nBreak-even: single cards vs a whole 8-GPU machine");
        let _ = writeln!(o, "  single: {}", row_line(&be.single));
        let _ = writeln!(o, "  machine: {}", row_line(&be.machine));
        if let Some(p) = &be.price_ratio {
            let verdict = match be.machine_cheaper_per_token {
                Some(true) => "the machine is cheaper per token",
                Some(false) => "single cards are cheaper per token; the machine buys time, not savings",
                None => "about even per token (inside the price range)",
            };
            let _ = writeln!(
                o,
                "  the machine costs {:.1}–{:.1}× a single card and runs this job {:.1}× faster: {verdict}",
                p.low, p.high, be.speed_ratio
            );
        }
    }

    if !r.notes.is_empty() {
        let _ = writeln!(o, "\nnotes:");
        for n in &r.notes {
            let _ = writeln!(o, "  - {n}");
        }
    }
    let _ = writeln!(
        o,
        "\nsearched {} candidates ({} fit) over {} estimated setups; prices as listed: check the live price",
        thousands(r.stats.candidates),
        thousands(r.stats.fitting),
        thousands(r.stats.estimates)
    );
    o
}

/// `--json`.
pub fn json(doc: &PlanDocument) -> String {
    serde_json::to_string_pretty(doc).unwrap_or_else(|e| format!("{{\"schema\":1,\"error\":\"{e}\"}}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_and_ranges() {
        assert_eq!(price(&PriceRange { low: 25_000.0, high: 40_000.0 }, "CNY"), "CNY 25,000–40,000");
        assert_eq!(price(&PriceRange::point(2.5), "USD"), "USD 2.50");
        assert_eq!(duration(36.0), "36.0 h");
        assert_eq!(duration(72.0), "3.0 days");
    }
}
