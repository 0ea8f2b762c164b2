//! `vramfit plan`: JSON schema and the human renderer.
//!
//! Schema 1 (docs/plan.md): the planner's [`PlanReport`] as it serializes
//! (its types carry the serde attributes: a field is declared once, in
//! `vramfit-plan`), under a header with the model and the job. Bytes are
//! integers; prices are `{low, high}` ranges in the offer's `currency`
//! (never converted); hours and tokens/s are floats. Enum values are written
//! with their serde names, which equal their `name()`.

use crate::format::{bytes, fit_lines, fit_table, params, shown, signed_bytes, thousands, Width};
use crate::SCHEMA_VERSION;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use serde::Serialize;
use std::fmt::Write;
use vramfit_core::hardware::PeakKind;
use vramfit_core::train::{Checkpointing, Optimizer, Precision};
use vramfit_core::{Link, Sharding, Task, Workload};
use vramfit_plan::{
    self as core_plan, Billing, JobKind, Ladder, OfferFlag, PlanReport, PlanRow, PriceRange, StepStatus,
};

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
    pub task: JobKind,
    /// the user's setup in words
    pub setup: String,
    /// tokens to train on / generate (`--tokens`)
    pub tokens: Option<u64>,
    /// rental hours (`--hours`)
    pub hours: Option<f64>,
    /// `--allow` values
    pub allow: Vec<String>,
    /// no `--tokens`/`--hours` was given: `tokens`/`hours` is the planner's default
    pub assumed: bool,
    /// serving: each request's prompt (prefilled) and output (decoded) tokens,
    /// which tokens/s and the job time count; `assumed`: the output is half
    /// the context because `--output-len` was not given
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<core_plan::Requests>,
}

/// The whole `plan --json` document: a header (the model and the job as
/// asked) around the planner's [`PlanReport`], whose fields are written as
/// they are (their serde attributes are the schema).
#[derive(Debug, Clone, Serialize)]
pub struct PlanDocument {
    pub schema: u32,
    pub command: &'static str,
    pub model: PlanModel,
    pub job: PlanJob,
    #[serde(flatten)]
    pub plan: PlanReport,
}

impl PlanDocument {
    pub fn new(model: PlanModel, mut job: PlanJob, plan: PlanReport) -> Self {
        job.tokens = plan.job.tokens;
        job.hours = plan.job.hours;
        job.assumed = plan.job.assumed;
        job.requests = plan.job.requests;
        PlanDocument { schema: SCHEMA_VERSION, command: "plan", model, job, plan }
    }
}

/// `Job` as the header records it.
pub fn job_fields(job: core_plan::Job) -> (Option<u64>, Option<f64>) {
    match job {
        core_plan::Job::None => (None, None),
        core_plan::Job::Tokens(t) => (Some(t), None),
        core_plan::Job::Hours(h) => (None, Some(h)),
        core_plan::Job::Deadline { tokens, hours } => (Some(tokens), Some(hours)),
    }
}

/// The user's job in words, for the header.
pub fn job_setup_words(w: &Workload) -> String {
    let s = core_plan::summarize(w);
    let name = |x: Option<&'static str>| x.unwrap_or_default();
    match &w.task {
        Task::Train(t) => format!(
            "{} fine-tune, {} {}, checkpointing {}, micro-batch {} × seq {} × accum {} (global batch {})",
            s.method.name(),
            name(s.precision.map(Precision::name)),
            name(s.optimizer.map(Optimizer::name)),
            name(s.checkpointing.map(Checkpointing::name)),
            t.batch,
            t.seq,
            t.grad_accum,
            s.global_batch
        ),
        Task::Inference(i) => format!(
            "inference, weights {}, kv {}, {} sequence{} × {} tokens",
            s.weights.unwrap_or_default(),
            i.kv_dtype,
            i.concurrency,
            if i.concurrency == 1 { "" } else { "s" },
            i.context
        ),
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
    let currency = shown(currency);
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
    let training = s.method.is_training();
    let mut parts = Vec::new();
    if training {
        parts.push(s.method.name().to_string());
        if s.dp_replicate > 1 {
            // hybrid sharding (FSDP HYBRID_SHARD): one shard group per machine
            parts.push(format!("HSDP: sharded ×{} within a machine, replicated ×{}", s.shard_degree(), s.dp_replicate));
        } else if s.sharding != Sharding::None {
            parts.push(s.sharding.label().to_string());
            if s.hpz > 1 {
                // DeepSpeed ZeRO++ hpZ: a secondary parameter partition per machine
                parts.push(format!("ZeRO++ hpZ: secondary copy within each machine of {}", s.hpz));
            }
        } else if s.dp > 1 {
            parts.push(format!("DP {}", s.dp));
        }
    }
    if !training && s.replicas > 1 {
        parts.push(format!("{} replicas × {} seq", s.replicas, s.global_batch.div_ceil(s.replicas)));
    }
    if s.tp > 1 {
        parts.push(format!("TP {}", s.tp));
    }
    if s.cp > 1 {
        // context parallelism: each rank holds seq / cp tokens of every sequence
        parts.push(format!("CP {}", s.cp));
    }
    if s.ep > 1 {
        parts.push(format!("EP {}", s.ep));
    }
    if s.etp > 1 {
        // Megatron expert-tensor parallelism: each routed expert split over etp ranks
        parts.push(format!("ETP {}", s.etp));
    }
    if s.dp_attention > 1 {
        parts.push(format!("DP-attn {}", s.dp_attention));
    }
    if s.pp > 1 && s.virtual_stages > 1 {
        // interleaved 1F1B: v virtual stages per rank (Megatron-LM VPP, torchtitan Interleaved1F1B)
        parts.push(format!("PP {} interleaved ×{}", s.pp, s.virtual_stages));
    } else if s.pp > 1 {
        parts.push(format!("PP {}", s.pp));
    }
    if let Some(c) = s.checkpointing.filter(|c| *c != Checkpointing::None) {
        parts.push(format!("ckpt {}", c.name()));
    }
    if let Some(o) = s.optimizer.filter(|o| *o != Optimizer::AdamW) {
        parts.push(o.name().to_string());
    }
    if training {
        parts.push(format!("mb {}×{}", s.micro_batch, s.grad_accum));
    }
    if s.offload_optimizer.is_some() {
        parts.push(format!("offload opt→{}", s.offload_optimizer.key()));
    }
    if s.offload_params.is_some() {
        parts.push(format!("offload params→{}", s.offload_params.key()));
    }
    if let Some(w) = &s.weights {
        parts.push(w.clone());
    }
    if let Some(k) = s.kv_dtype {
        parts.push(format!("kv {k}"));
    }
    parts.join(", ")
}

fn hardware(r: &PlanRow) -> String {
    if r.machines > 1 {
        let per = r.gpus / r.machines.max(1);
        let fabric = r.fabric.map(|f| format!(", {}", f.describe())).unwrap_or_default();
        return format!("{} × {} ({} machines × {per}{fabric})", r.gpus, shown(&r.gpu_name), r.machines);
    }
    format!("{} × {}", r.gpus, shown(&r.gpu_name))
}

fn monthly(r: &PlanRow) -> String {
    match (&r.monthly, &r.hourly) {
        (Some(m), _) => format!("{}/mo", price(m, &r.currency)),
        (None, Some(h)) => format!("{}/h", price(h, &r.currency)),
        _ => "unpriced".into(),
    }
}

/// What the rental bills for the job: `CNY 2,500 (1 month)`, `USD 412 (137 h)`.
fn billed(r: &PlanRow) -> String {
    match (&r.billed, r.billing) {
        (Some(b), Billing::Monthly) => {
            let n = r.months_billed.unwrap_or(1);
            format!("{} ({n} month{})", price(b, &r.currency), if n == 1 { "" } else { "s" })
        }
        (Some(b), Billing::Hourly) => {
            let h = r.job_hours.unwrap_or(0.0);
            format!("{} ({h:.0} h)", price(b, &r.currency))
        }
        _ => "–".into(),
    }
}

fn peak_words(p: PeakKind) -> &'static str {
    match p {
        PeakKind::Fp32 => "the fp32 peak (CUDA cores: PyTorch leaves TF32 off for fp32 matmuls)",
        PeakKind::Tf32 => "the TF32 tensor peak",
        PeakKind::Bf16 => "the bf16/fp16 tensor peak",
        PeakKind::Fp8 => "the fp8 tensor peak",
    }
}

fn rate(r: &PlanRow) -> String {
    if r.setup.method.is_training() {
        format!(
            "~{} tokens/s at {} ({:.1} TFLOP/s per GPU), ×{:.2} of ideal time (MFU {:.0}%)",
            thousands(r.tokens_per_s.max(0.0).round() as u64),
            peak_words(r.peak),
            r.peak_tflops,
            r.slowdown,
            r.step.mfu * 100.0
        )
    } else {
        format!("~{} generated tokens/s, prompts' prefill included", thousands(r.tokens_per_s.max(0.0).round() as u64))
    }
}

/// Where a training plan loses time against its ideal, in words.
fn overhead(r: &PlanRow) -> String {
    let st = &r.step;
    if st.total_s <= 0.0 || !r.setup.method.is_training() {
        return String::new();
    }
    let recompute = (st.compute_s - st.ideal_s).max(0.0);
    let link = if r.link == Link::Nvlink { "NVLink" } else { "PCIe" };
    let parts = [
        (st.offload_s, "offload over PCIe and the CPU optimizer step".to_string()),
        (st.comm_s, format!("exposed {} collectives over {link}", r.setup.sharding.label())),
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
        "{} — {} [{}]: {} per GPU of {} usable, {}, {}",
        hardware(r),
        shown(&r.offer_name),
        setup_words(r),
        bytes(r.per_gpu_bytes),
        bytes(r.gpu_memory_bytes),
        monthly(r),
        rate(r)
    );
    if let Some(h) = r.job_hours {
        if r.setup.method.is_training() {
            let _ = write!(s, "; job {} billed {}", duration(h), billed(r));
        } else {
            let _ = write!(s, "; billed {} for {} of serving", billed(r), duration(h));
        }
        if r.hourly_prorated && r.months_billed.is_some_and(|n| (n as f64) * 730.0 > h * 1.05) {
            if let Some(c) = &r.job_cost {
                let _ =
                    write!(s, " (prorated {} if you have other work for the rest of the month)", price(c, &r.currency));
            }
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

/// The ladder; too wide for `width`, the saved bytes go first (the per-GPU
/// column shows them), then the cells wrap.
fn ladder_table(l: &Ladder, width: Width) -> (String, String) {
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
    fit_table(t, width, &[3], &[4, 5])
}

/// The ranked plans; too wide for `width`, what a practitioner needs least
/// goes first: tokens/s (the job time says it) and the monthly price (the
/// bill says it) when there is a job, then the offer id; then the cells wrap.
fn ranked_table(rows: &[PlanRow], has_job: bool, width: Width) -> (String, String) {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED);
    let mut header = vec!["#", "GPUs", "offer", "setup", "per GPU", "tokens/s", "price"];
    if has_job {
        header.push("job time");
        header.push("billed");
    }
    t.set_header(header);
    for (i, r) in rows.iter().enumerate() {
        let mut cells = vec![
            Cell::new(i + 1),
            Cell::new(hardware(r)),
            Cell::new(shown(&r.offer_id)),
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
            cells.push(Cell::new(billed(r)).set_alignment(CellAlignment::Right));
        }
        t.add_row(cells);
    }
    let drop: &[usize] = if has_job { &[5, 6, 2] } else { &[2] };
    fit_table(t, width, drop, &[0, 4, 7])
}

/// The human report, fitted to `width` columns (tables drop their least
/// needed columns and wrap, prose lines wrap; `None`: as wide as it gets).
pub fn render(doc: &PlanDocument, width: Width) -> String {
    let mut o = String::new();
    header(&mut o, doc);
    recommendation(&mut o, doc);
    software(&mut o, doc, width);
    more_cards(&mut o, doc);
    bigger_card(&mut o, doc);
    cheaper_to_rent(&mut o, doc);
    if !doc.plan.ranked.is_empty() {
        let has_job = doc.plan.task == JobKind::Train || doc.job.tokens.is_some();
        let _ = writeln!(o, "\nTop {} plans that fit (best setup per offer and GPU count)", doc.plan.ranked.len());
        let (table, hidden) = ranked_table(&doc.plan.ranked, has_job, width);
        o.push_str(&table);
        o.push('\n');
        if !hidden.is_empty() {
            let _ = writeln!(o, "{hidden}");
        }
    }
    break_even(&mut o, doc);
    if !doc.plan.notes.is_empty() {
        let _ = writeln!(o, "\nnotes:");
        for n in &doc.plan.notes {
            let _ = writeln!(o, "  - {}", shown(n));
        }
    }
    let _ = writeln!(
        o,
        "\nsearched {} candidates ({} fit) over {} estimated setups; prices as listed: check the live price",
        thousands(doc.plan.stats.candidates),
        thousands(doc.plan.stats.fitting),
        thousands(doc.plan.stats.estimates)
    );
    fit_lines(&o, width)
}

fn header(o: &mut String, doc: &PlanDocument) {
    let _ = writeln!(
        o,
        "vramfit plan: {} ({} params) — {}",
        shown(&doc.model.name),
        params(doc.model.params_total),
        doc.job.setup
    );
    let assumed = if doc.job.assumed { " (assumed: no --tokens/--hours given)" } else { "" };
    match (doc.job.tokens, doc.job.hours) {
        (Some(t), Some(h)) => {
            let _ = writeln!(
                o,
                "job: {} tokens within {}; plans that take longer are left out; ranked by what each rental bills for it",
                thousands(t),
                duration(h)
            );
        }
        (Some(t), None) => {
            let _ = writeln!(
                o,
                "job: {} tokens{assumed}; ranked by what each rental bills for it (whole months for monthly-only offers), simpler setups first at a similar bill",
                thousands(t)
            );
        }
        (_, Some(h)) => {
            let _ = writeln!(
                o,
                "job: {} hours of rental{assumed}; ranked by what each rental bills for it, simpler setups first, then tokens/s",
                money(h)
            );
        }
        _ => {}
    }
    if let Some(r) = &doc.job.requests {
        let _ = writeln!(
            o,
            "each request: a {}-token prompt, then {} generated tokens{}; tokens/s and the job time count both",
            thousands(r.prompt),
            thousands(r.output),
            if r.assumed { " (assumed: half the context; --output-len sets it)" } else { "" }
        );
    }
    if let Some(p) = &doc.plan.pinned {
        let _ = writeln!(o, "layout as given: {p} (only this layout is searched)");
    }
    if let Some(b) = doc.plan.baseline_bytes {
        let _ = writeln!(
            o,
            "the job as given needs {} per GPU{}",
            bytes(b),
            if doc.plan.pinned.is_some() { "" } else { " on one card" }
        );
    }
    if let (Some(h), Some(gap)) = (&doc.plan.have, doc.plan.have_gap_bytes) {
        if gap > 0 {
            let have = bytes(doc.plan.have_memory_bytes.unwrap_or(0));
            let _ = writeln!(o, "your {} ({have} usable) is short by {}", shown(h), bytes(gap as u64));
        } else {
            let _ = writeln!(o, "your {} holds it with {} to spare", shown(h), bytes((-gap) as u64));
        }
    }
    o.push('\n');
}

fn recommendation(o: &mut String, doc: &PlanDocument) {
    let Some(rec) = &doc.plan.recommended else {
        let _ = writeln!(o, "Recommended: nothing — {}", shown(&doc.plan.reason));
        if let Some(f) = &doc.plan.fastest_late {
            let _ = writeln!(o, "fastest found: {}", row_line(f));
        }
        return;
    };
    if doc.plan.own_card.is_some() {
        let _ = writeln!(
            o,
            "Recommended: your own card — {} [{}]: {} per GPU of {} usable, {}",
            hardware(rec),
            setup_words(rec),
            bytes(rec.per_gpu_bytes),
            bytes(rec.gpu_memory_bytes),
            rate(rec)
        );
    } else {
        let _ = writeln!(o, "Recommended: {}", row_line(rec));
    }
    if !rec.switches.is_empty() {
        let _ =
            writeln!(o, "  changes: {}", rec.switches.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "));
    }
    let flags = rec.flags.iter().filter(|f| **f != OfferFlag::CheckLivePrice).map(OfferFlag::text);
    for n in rec.notes.iter().map(String::as_str).chain(flags) {
        let _ = writeln!(o, "  note: {}", shown(n));
    }
    if let (Some(y), false) = (&rec.monthly_yearly, rec.yearly_discounts.is_empty()) {
        let discounts: Vec<_> = rec.yearly_discounts.iter().map(|d| shown(d)).collect();
        let _ = writeln!(o, "  yearly term: {}/mo ({})", price(y, &rec.currency), discounts.join(", "));
    }
    let _ = writeln!(o, "  why: {}", shown(&doc.plan.reason));
    if let (Some(_), Some(rent)) = (&doc.plan.own_card, &doc.plan.best_rental) {
        let _ = writeln!(o, "  if you rent instead: {}", row_line(rent));
    }
}

fn software(o: &mut String, doc: &PlanDocument, width: Width) {
    let _ = writeln!(o, "\n(1) Software switches on your card");
    let Some(l) = &doc.plan.software else {
        let _ = writeln!(o, "give --have GPU to see what each switch saves on your card");
        return;
    };
    let _ = writeln!(o, "{} ({} usable), applied in order:", shown(&l.gpu_name), bytes(l.gpu_memory_bytes));
    let (table, hidden) = ladder_table(l, width);
    o.push_str(&table);
    o.push('\n');
    if !hidden.is_empty() {
        let _ = writeln!(o, "{hidden}");
    }
    match (l.start_fits, l.first_fit) {
        (true, _) => {
            let _ = writeln!(o, "it already fits as given");
        }
        (false, Some(i)) => {
            let applied: Vec<&str> =
                l.steps[..=i].iter().filter(|s| s.status == StepStatus::Applied).map(|s| s.name.as_str()).collect();
            let _ = writeln!(o, "fits after: {}", applied.join(" → "));
        }
        (false, None) => {
            let _ = writeln!(o, "no allowed switch makes it fit this card");
        }
    }
}

fn more_cards(o: &mut String, doc: &PlanDocument) {
    let _ = writeln!(o, "\n(2) More cards, sharded");
    let mc = &doc.plan.more_cards;
    let train = doc.plan.task == JobKind::Train;
    if let (Some(single), Some(dp)) = (mc.single_bytes, mc.dp_only_bytes) {
        if train {
            let _ = writeln!(
                o,
                "plain data parallelism on {} GPUs: {} per GPU (one GPU: {}) — DP alone does not lower per-GPU memory; sharding does",
                mc.dp_gpus,
                bytes(dp),
                bytes(single)
            );
        } else {
            if dp < single {
                let _ = writeln!(
                    o,
                    "replicas split the sequences: each holds its share of the KV cache ({} replicas: {} per GPU, one GPU with all: {}); splitting the model (TP inside NVLink, PP over PCIe) also splits the weights",
                    mc.dp_gpus,
                    bytes(dp),
                    bytes(single)
                );
            } else {
                let _ = writeln!(
                    o,
                    "too few sequences to split over replicas; splitting the model (TP inside NVLink, PP over PCIe) splits the weights"
                );
            }
        }
    }
    match &mc.best {
        Some(b) => {
            let _ = writeln!(o, "cheapest: {}", row_line(b));
        }
        None if train => {
            let _ = writeln!(
                o,
                "no multi-GPU plan that splits the model or its states (ZeRO/FSDP, TP or PP) fits without offload"
            );
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
}

fn bigger_card(o: &mut String, doc: &PlanDocument) {
    let _ = writeln!(o, "\n(3) A bigger single card, job unchanged");
    let bc = &doc.plan.bigger_card;
    if let Some(b) = &bc.best {
        let _ = writeln!(o, "cheapest: {}", row_line(b));
        return;
    }
    let need = bc.need_bytes.map(bytes).unwrap_or_default();
    if bc.gpus_that_fit.is_empty() {
        let _ = writeln!(o, "no single card holds it (needs {need}); no GPU in the catalogue is that big");
    } else {
        let _ = writeln!(
            o,
            "no offered single card holds it (needs {need}); big enough but not offered: {}",
            bc.gpus_that_fit.iter().map(|g| shown(g)).collect::<Vec<_>>().join(", ")
        );
    }
}

/// Plans that rent for less but cost more over the job (chosen by the planner).
fn cheaper_to_rent(o: &mut String, doc: &PlanDocument) {
    let Some(rec) = doc.plan.best_rental.as_ref().or(doc.plan.recommended.as_ref()) else { return };
    if doc.plan.cheaper_to_rent.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nCheaper to rent than {}, but not over this job", hardware(rec));
    for x in doc.plan.cheaper_to_rent.iter().take(3) {
        let _ = writeln!(
            o,
            "  {} ({}): {} against {}{}; billed {} against {}",
            hardware(x),
            monthly(x),
            x.job_hours.map(duration).unwrap_or_default(),
            rec.job_hours.map(duration).unwrap_or_default(),
            overhead(x),
            billed(x),
            billed(rec)
        );
        if let (Some(a), Some(b)) = (x.billed, rec.billed) {
            if a.low < b.high {
                let _ = writeln!(
                    o,
                    "    (the price ranges overlap: at the top of the recommended plan's range it would cost more)"
                );
            }
        }
    }
}

fn break_even(o: &mut String, doc: &PlanDocument) {
    let Some(be) = &doc.plan.break_even else { return };
    let _ = writeln!(o, "\nBreak-even: single cards vs a whole 8-GPU machine");
    let _ = writeln!(o, "  single: {}", row_line(&be.single));
    let _ = writeln!(o, "  machine: {}", row_line(&be.machine));
    if let Some(p) = &be.price_ratio {
        let verdict = match be.machine_cheaper_per_token {
            Some(true) => "the machine is cheaper per token",
            Some(false) => "single cards are cheaper per token; the machine buys time, not savings",
            None => "about even per token (inside the price range)",
        };
        let than = if be.single.gpus > 1 { format!(" than {} cards", be.single.gpus) } else { String::new() };
        let _ = writeln!(
            o,
            "  the machine costs as much as {:.1}–{:.1} single cards and runs this job {:.1}× faster{than}: {verdict}",
            p.low, p.high, be.speed_ratio
        );
    }
    if !be.cards.is_empty() {
        let pts: Vec<String> = be
            .cards
            .iter()
            .map(|p| {
                format!(
                    "{} card{}: {} tokens/s, {}",
                    p.gpus,
                    if p.gpus == 1 { "" } else { "s" },
                    thousands(p.tokens_per_s.max(0.0).round() as u64),
                    match (&p.billed, p.job_hours) {
                        (Some(b), Some(h)) => format!("{} billed for {}", price(b, &be.currency), duration(h)),
                        (Some(b), None) => price(b, &be.currency),
                        _ => "unpriced".into(),
                    }
                )
            })
            .collect();
        let _ =
            writeln!(o, "  single cards stacked ({}): {}", be.cards_offer.as_deref().unwrap_or("-"), pts.join("; "));
        let fewest = be.fewest_cards.filter(|n| *n > 1).map(|n| format!("it needs at least {n} cards"));
        let from = match be.machine_better_from {
            Some(n) if Some(n) == be.fewest_cards => {
                "the machine costs less per token than any number of these cards, even at the top of its price range"
                    .to_string()
            }
            Some(n) => format!(
                "the machine is the better buy per token from {n} cards on (even at the top of its price range)"
            ),
            None => format!(
                "single cards stay cheaper per token up to {} (the machine buys speed, not savings)",
                be.cards.last().map(|p| p.gpus).unwrap_or(1)
            ),
        };
        let _ = writeln!(o, "  {}{from}", fewest.map(|f| f + "; ").unwrap_or_default());
    }
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
