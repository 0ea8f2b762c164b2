//! `vramfit plan`: JSON schema and the human renderer.
//!
//! Schema 1 (docs/plan.md): serde-only types built from the planner's
//! [`PlanReport`] (`From` impls), under a header with the model and the
//! job. Bytes are integers; prices are `{low, high}` ranges in the offer's
//! `currency` (never converted); hours and tokens/s are floats. Enum values
//! are written with their serde names, which equal their `name()`.

use crate::format::{bytes, params, shown, signed_bytes, thousands};
use crate::SCHEMA_VERSION;
use comfy_table::{presets::UTF8_FULL_CONDENSED, Cell, CellAlignment, Table};
use serde::Serialize;
use std::fmt::Write;
use vramfit_core::hardware::PeakKind;
use vramfit_core::train::{Checkpointing, Optimizer, Precision};
use vramfit_core::{DType, Link, Offload, Sharding, Task, Workload};
use vramfit_plan::{
    self as core_plan, Billing, Complexity, JobKind, Ladder, LadderStep, Method, PlanReport, PlanRow, PriceRange,
    SetupSummary, StepStatus, StepTime,
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
}

/// The whole `plan --json` document.
#[derive(Debug, Clone, Serialize)]
pub struct PlanDocument {
    pub schema: u32,
    pub command: &'static str,
    pub model: PlanModel,
    pub job: PlanJob,
    pub task: JobKind,
    /// the layout the user fixed (`--gpus`, `--zero`, …), the only one searched
    pub pinned: Option<String>,
    pub params_total: u64,
    /// the unchanged job on one GPU, per-GPU bytes
    pub baseline_bytes: Option<u64>,
    pub have: Option<String>,
    pub have_memory_bytes: Option<u64>,
    /// bytes the unchanged job lacks on the user's card (negative: spare)
    pub have_gap_bytes: Option<i128>,
    pub ranked: Vec<Row>,
    pub software: Option<LadderInfo>,
    pub more_cards: MoreCards,
    pub bigger_card: BiggerCard,
    pub break_even: Option<BreakEven>,
    pub recommended: Option<Row>,
    pub reason: String,
    /// with `--have`: your own card(s) running the job without offload (then also `recommended`)
    pub own_card: Option<Row>,
    /// the best rental plan
    pub best_rental: Option<Row>,
    /// with `--tokens`: plans that rent for less than `recommended` but cost more over the job
    pub cheaper_to_rent: Vec<Row>,
    pub stats: Stats,
    pub notes: Vec<String>,
}

impl PlanDocument {
    pub fn new(model: PlanModel, mut job: PlanJob, r: &PlanReport) -> Self {
        job.tokens = r.job.tokens;
        job.hours = r.job.hours;
        job.assumed = r.job.assumed;
        PlanDocument {
            schema: SCHEMA_VERSION,
            command: "plan",
            model,
            job,
            task: r.task,
            pinned: r.pinned.clone(),
            params_total: r.params_total,
            baseline_bytes: r.baseline_bytes,
            have: r.have.clone(),
            have_memory_bytes: r.have_memory_bytes,
            have_gap_bytes: r.have_gap_bytes,
            ranked: r.ranked.iter().map(Row::from).collect(),
            software: r.software.as_ref().map(LadderInfo::from),
            more_cards: MoreCards::from(&r.more_cards),
            bigger_card: BiggerCard::from(&r.bigger_card),
            break_even: r.break_even.as_ref().map(BreakEven::from),
            recommended: r.recommended.as_ref().map(Row::from),
            reason: r.reason.clone(),
            own_card: r.own_card.as_ref().map(Row::from),
            best_rental: r.best_rental.as_ref().map(Row::from),
            cheaper_to_rent: r.cheaper_to_rent.iter().map(Row::from).collect(),
            stats: Stats { candidates: r.stats.candidates, fitting: r.stats.fitting, estimates: r.stats.estimates },
            notes: r.notes.clone(),
        }
    }
}

/// A price range in the offer's currency.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Price {
    pub low: f64,
    pub high: f64,
}

impl From<PriceRange> for Price {
    fn from(p: PriceRange) -> Price {
        Price { low: p.low, high: p.high }
    }
}

impl Price {
    fn range(self) -> PriceRange {
        PriceRange { low: self.low, high: self.high }
    }
}

/// Seconds per optimizer step (training; zeros for inference).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Step {
    pub compute_s: f64,
    pub ideal_s: f64,
    pub comm_s: f64,
    pub offload_s: f64,
    pub bubble_s: f64,
    pub total_s: f64,
}

impl From<StepTime> for Step {
    fn from(s: StepTime) -> Step {
        Step {
            compute_s: s.compute_s,
            ideal_s: s.ideal_s,
            comm_s: s.comm_s,
            offload_s: s.offload_s,
            bubble_s: s.bubble_s,
            total_s: s.total_s,
        }
    }
}

/// A plan's setup (docs/plan.md "SetupSummary").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Setup {
    pub method: Method,
    pub precision: Option<Precision>,
    pub optimizer: Option<Optimizer>,
    pub checkpointing: Option<Checkpointing>,
    pub micro_batch: u64,
    pub grad_accum: u64,
    pub global_batch: u64,
    pub gpus: u64,
    pub tp: u64,
    pub pp: u64,
    pub dp: u64,
    /// inference: model copies sharing the sequences (1 for training)
    pub replicas: u64,
    pub sharding: Sharding,
    pub offload_optimizer: Offload,
    pub offload_params: Offload,
    pub weights: Option<String>,
    /// the dtype's name (`fp16`, `fp8`)
    pub kv_dtype: Option<&'static str>,
}

impl From<&SetupSummary> for Setup {
    fn from(s: &SetupSummary) -> Setup {
        Setup {
            method: s.method,
            precision: s.precision,
            optimizer: s.optimizer,
            checkpointing: s.checkpointing,
            micro_batch: s.micro_batch,
            grad_accum: s.grad_accum,
            global_batch: s.global_batch,
            gpus: s.gpus,
            tp: s.tp,
            pp: s.pp,
            dp: s.dp,
            replicas: s.replicas,
            sharding: s.sharding,
            offload_optimizer: s.offload_optimizer,
            offload_params: s.offload_params,
            weights: s.weights.clone(),
            kv_dtype: s.kv_dtype.map(DType::name),
        }
    }
}

/// One priced plan (docs/plan.md "PlanRow").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub offer_id: String,
    pub provider: String,
    pub offer_name: String,
    pub gpu_id: String,
    pub gpu_name: String,
    pub gpus: u64,
    pub machines: u64,
    pub link: Link,
    pub currency: String,
    pub flags: Vec<String>,
    pub setup: Setup,
    pub switches: Vec<String>,
    pub per_gpu_bytes: u64,
    pub gpu_memory_bytes: u64,
    pub headroom_bytes: i128,
    pub model_states_bytes: u64,
    /// host RAM for offloaded state, the whole job (all ranks, all machines)
    pub cpu_bytes: u64,
    /// host RAM one machine needs for offload (DeepSpeed's estimator; 0 without offload)
    pub host_ram_bytes: u64,
    /// the offer's CPU cores and RAM (GB), as listed
    pub host_cpu_cores: Option<u64>,
    pub host_ram_gb: Option<f64>,
    pub fits: bool,
    pub slowdown: f64,
    pub step: Step,
    pub tokens_per_s: f64,
    pub monthly: Option<Price>,
    pub monthly_yearly: Option<Price>,
    pub yearly_discounts: Vec<String>,
    pub hourly: Option<Price>,
    pub hourly_prorated: bool,
    pub job_hours: Option<f64>,
    pub job_tokens: Option<f64>,
    pub job_cost: Option<Price>,
    pub months_billed: Option<u64>,
    /// what the rental bills for the job
    pub billed: Option<Price>,
    /// `monthly` (whole months) or `hourly` (hours, at least the minimum term)
    pub billing: Billing,
    /// the ranking key: billed × (1 + premiums for moving parts)
    pub rank_cost: f64,
    /// `plain`, `zero_1_2`, `zero_3`, `model_parallel`, `offload_optimizer`, `offload_params`
    pub complexity: Complexity,
    /// the peak rate the time model used (`fp32`, `tf32`, `bf16`, `fp8`) and its dense TFLOP/s per GPU
    pub peak: PeakKind,
    pub peak_tflops: f64,
    pub upgrades: Vec<String>,
    pub notes: Vec<String>,
}

impl From<&PlanRow> for Row {
    fn from(r: &PlanRow) -> Row {
        Row {
            offer_id: r.offer_id.clone(),
            provider: r.provider.clone(),
            offer_name: r.offer_name.clone(),
            gpu_id: r.gpu_id.clone(),
            gpu_name: r.gpu_name.clone(),
            gpus: r.gpus,
            machines: r.machines,
            link: r.link,
            currency: r.currency.clone(),
            flags: r.flags.clone(),
            setup: Setup::from(&r.setup),
            switches: r.switches.iter().map(|s| s.to_string()).collect(),
            per_gpu_bytes: r.per_gpu_bytes,
            gpu_memory_bytes: r.gpu_memory_bytes,
            headroom_bytes: r.headroom_bytes,
            model_states_bytes: r.model_states_bytes,
            cpu_bytes: r.cpu_bytes,
            host_ram_bytes: r.host_ram_bytes,
            host_cpu_cores: r.host_cpu_cores,
            host_ram_gb: r.host_ram_gb,
            fits: r.fits,
            slowdown: r.slowdown,
            step: r.step.into(),
            tokens_per_s: r.tokens_per_s,
            monthly: r.monthly.map(Price::from),
            monthly_yearly: r.monthly_yearly.map(Price::from),
            yearly_discounts: r.yearly_discounts.clone(),
            hourly: r.hourly.map(Price::from),
            hourly_prorated: r.hourly_prorated,
            job_hours: r.job_hours,
            job_tokens: r.job_tokens,
            job_cost: r.job_cost.map(Price::from),
            months_billed: r.months_billed,
            billed: r.billed.map(Price::from),
            billing: r.billing,
            rank_cost: r.rank_cost,
            complexity: r.complexity,
            peak: r.peak,
            peak_tflops: r.peak_tflops,
            upgrades: r.upgrades.clone(),
            notes: r.notes.clone(),
        }
    }
}

/// One rung of the software ladder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LadderStepInfo {
    pub name: String,
    pub status: StepStatus,
    pub detail: String,
    pub per_gpu_bytes: Option<u64>,
    pub saved_bytes: Option<i128>,
    pub fits: bool,
    pub slowdown: Option<f64>,
    pub tokens_per_s: Option<f64>,
    pub cpu_bytes: u64,
}

impl From<&LadderStep> for LadderStepInfo {
    fn from(s: &LadderStep) -> LadderStepInfo {
        LadderStepInfo {
            name: s.name.clone(),
            status: s.status,
            detail: s.detail.clone(),
            per_gpu_bytes: s.per_gpu_bytes,
            saved_bytes: s.saved_bytes,
            fits: s.fits,
            slowdown: s.slowdown,
            tokens_per_s: s.tokens_per_s,
            cpu_bytes: s.cpu_bytes,
        }
    }
}

/// Path (1): the software switches on the user's card.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LadderInfo {
    pub gpu_id: String,
    pub gpu_name: String,
    pub gpu_memory_bytes: u64,
    pub start_bytes: Option<u64>,
    pub start_fits: bool,
    pub steps: Vec<LadderStepInfo>,
    pub first_fit: Option<usize>,
}

impl From<&Ladder> for LadderInfo {
    fn from(l: &Ladder) -> LadderInfo {
        LadderInfo {
            gpu_id: l.gpu_id.clone(),
            gpu_name: l.gpu_name.clone(),
            gpu_memory_bytes: l.gpu_memory_bytes,
            start_bytes: l.start_bytes,
            start_fits: l.start_fits,
            steps: l.steps.iter().map(LadderStepInfo::from).collect(),
            first_fit: l.first_fit,
        }
    }
}

/// Path (2): more cards, sharded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MoreCards {
    pub single_bytes: Option<u64>,
    pub dp_only_bytes: Option<u64>,
    pub dp_gpus: u64,
    pub best: Option<Row>,
    pub on_have: Option<Row>,
}

impl From<&core_plan::MoreCards> for MoreCards {
    fn from(m: &core_plan::MoreCards) -> MoreCards {
        MoreCards {
            single_bytes: m.single_bytes,
            dp_only_bytes: m.dp_only_bytes,
            dp_gpus: m.dp_gpus,
            best: m.best.as_ref().map(Row::from),
            on_have: m.on_have.as_ref().map(Row::from),
        }
    }
}

/// Path (3): a bigger single card.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BiggerCard {
    pub need_bytes: Option<u64>,
    pub best: Option<Row>,
    pub gpus_that_fit: Vec<String>,
}

impl From<&core_plan::BiggerCard> for BiggerCard {
    fn from(b: &core_plan::BiggerCard) -> BiggerCard {
        BiggerCard {
            need_bytes: b.need_bytes,
            best: b.best.as_ref().map(Row::from),
            gpus_that_fit: b.gpus_that_fit.clone(),
        }
    }
}

/// Single cards against a whole 8-GPU machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakEven {
    pub single: Row,
    pub machine: Row,
    pub currency: String,
    pub price_ratio: Option<Price>,
    pub speed_ratio: f64,
    pub machine_cheaper_per_token: Option<bool>,
    /// the per-card offer stacked in `cards`
    pub cards_offer: Option<String>,
    /// the single-card offer at each GPU count that holds the job
    pub cards: Vec<CardsPoint>,
    pub fewest_cards: Option<u64>,
    /// from how many single cards the machine costs less per token
    pub machine_better_from: Option<u64>,
}

/// Renting `gpus` single cards for this job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardsPoint {
    pub gpus: u64,
    pub tokens_per_s: f64,
    pub monthly: Option<Price>,
    pub billed: Option<Price>,
    pub job_hours: Option<f64>,
    /// monthly price per million tokens/s (proportional to cost per token)
    pub cost_per_mtok: Option<f64>,
}

impl From<&core_plan::BreakEven> for BreakEven {
    fn from(b: &core_plan::BreakEven) -> BreakEven {
        BreakEven {
            single: Row::from(&b.single),
            machine: Row::from(&b.machine),
            currency: b.currency.clone(),
            price_ratio: b.price_ratio.map(Price::from),
            speed_ratio: b.speed_ratio,
            machine_cheaper_per_token: b.machine_cheaper_per_token,
            cards_offer: b.cards_offer.clone(),
            cards: b
                .cards
                .iter()
                .map(|p| CardsPoint {
                    gpus: p.gpus,
                    tokens_per_s: p.tokens_per_s,
                    monthly: p.monthly.map(Price::from),
                    billed: p.billed.map(Price::from),
                    job_hours: p.job_hours,
                    cost_per_mtok: p.cost_per_mtok,
                })
                .collect(),
            fewest_cards: b.fewest_cards,
            machine_better_from: b.machine_better_from,
        }
    }
}

/// How big the search was.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    pub candidates: u64,
    pub fitting: u64,
    pub estimates: u64,
}

/// `Job` as the header records it.
pub fn job_fields(job: core_plan::Job) -> (Option<u64>, Option<f64>) {
    match job {
        core_plan::Job::None => (None, None),
        core_plan::Job::Tokens(t) => (Some(t), None),
        core_plan::Job::Hours(h) => (None, Some(h)),
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

fn price_of(p: &Price, currency: &str) -> String {
    price(&p.range(), currency)
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

fn setup_words(r: &Row) -> String {
    let s = &r.setup;
    let training = s.method.is_training();
    let mut parts = Vec::new();
    if training {
        parts.push(s.method.name().to_string());
        if s.sharding != Sharding::None {
            parts.push(s.sharding.label().to_string());
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
    if s.pp > 1 {
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

fn hardware(r: &Row) -> String {
    format!("{} × {}", r.gpus, shown(&r.gpu_name))
}

fn monthly(r: &Row) -> String {
    match (&r.monthly, &r.hourly) {
        (Some(m), _) => format!("{}/mo", price_of(m, &r.currency)),
        (None, Some(h)) => format!("{}/h", price_of(h, &r.currency)),
        _ => "unpriced".into(),
    }
}

/// What the rental bills for the job: `CNY 2,500 (1 month)`, `USD 412 (137 h)`.
fn billed(r: &Row) -> String {
    match (&r.billed, r.billing) {
        (Some(b), Billing::Monthly) => {
            let n = r.months_billed.unwrap_or(1);
            format!("{} ({n} month{})", price_of(b, &r.currency), if n == 1 { "" } else { "s" })
        }
        (Some(b), Billing::Hourly) => {
            let h = r.job_hours.unwrap_or(0.0);
            format!("{} ({h:.0} h)", price_of(b, &r.currency))
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

fn rate(r: &Row) -> String {
    if r.setup.method.is_training() {
        format!(
            "~{} tokens/s at {} ({:.1} TFLOP/s per GPU), ×{:.2} of ideal time",
            thousands(r.tokens_per_s.max(0.0).round() as u64),
            peak_words(r.peak),
            r.peak_tflops,
            r.slowdown
        )
    } else {
        format!("~{} tokens/s decode", thousands(r.tokens_per_s.max(0.0).round() as u64))
    }
}

/// Where a training plan loses time against its ideal, in words.
fn overhead(r: &Row) -> String {
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

fn row_line(r: &Row) -> String {
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
                let _ = write!(
                    s,
                    " (prorated {} if you have other work for the rest of the month)",
                    price_of(c, &r.currency)
                );
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

fn ladder_table(l: &LadderInfo) -> String {
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

fn ranked_table(rows: &[Row], has_job: bool) -> String {
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
    t.to_string()
}

/// The human report.
pub fn render(doc: &PlanDocument) -> String {
    let mut o = String::new();
    header(&mut o, doc);
    recommendation(&mut o, doc);
    software(&mut o, doc);
    more_cards(&mut o, doc);
    bigger_card(&mut o, doc);
    cheaper_to_rent(&mut o, doc);
    if !doc.ranked.is_empty() {
        let has_job = doc.task == JobKind::Train || doc.job.tokens.is_some();
        let _ = writeln!(o, "\nTop {} plans that fit (best setup per offer and GPU count)", doc.ranked.len());
        o.push_str(&ranked_table(&doc.ranked, has_job));
        o.push('\n');
    }
    break_even(&mut o, doc);
    if !doc.notes.is_empty() {
        let _ = writeln!(o, "\nnotes:");
        for n in &doc.notes {
            let _ = writeln!(o, "  - {}", shown(n));
        }
    }
    let _ = writeln!(
        o,
        "\nsearched {} candidates ({} fit) over {} estimated setups; prices as listed: check the live price",
        thousands(doc.stats.candidates),
        thousands(doc.stats.fitting),
        thousands(doc.stats.estimates)
    );
    o
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
        (Some(t), _) => {
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
    if let Some(p) = &doc.pinned {
        let _ = writeln!(o, "layout as given: {p} (only this layout is searched)");
    }
    if let Some(b) = doc.baseline_bytes {
        let _ = writeln!(
            o,
            "the job as given needs {} per GPU{}",
            bytes(b),
            if doc.pinned.is_some() { "" } else { " on one card" }
        );
    }
    if let (Some(h), Some(gap)) = (&doc.have, doc.have_gap_bytes) {
        if gap > 0 {
            let have = bytes(doc.have_memory_bytes.unwrap_or(0));
            let _ = writeln!(o, "your {} ({have} usable) is short by {}", shown(h), bytes(gap as u64));
        } else {
            let _ = writeln!(o, "your {} holds it with {} to spare", shown(h), bytes((-gap) as u64));
        }
    }
    o.push('\n');
}

fn recommendation(o: &mut String, doc: &PlanDocument) {
    let Some(rec) = &doc.recommended else {
        let _ = writeln!(o, "Recommended: nothing — {}", shown(&doc.reason));
        return;
    };
    if doc.own_card.is_some() {
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
        let _ = writeln!(o, "  changes: {}", rec.switches.join("; "));
    }
    for n in rec.notes.iter().chain(rec.flags.iter().filter(|f| f.as_str() != "check the live price")) {
        let _ = writeln!(o, "  note: {}", shown(n));
    }
    if let (Some(y), false) = (&rec.monthly_yearly, rec.yearly_discounts.is_empty()) {
        let discounts: Vec<_> = rec.yearly_discounts.iter().map(|d| shown(d)).collect();
        let _ = writeln!(o, "  yearly term: {}/mo ({})", price_of(y, &rec.currency), discounts.join(", "));
    }
    let _ = writeln!(o, "  why: {}", shown(&doc.reason));
    if let (Some(_), Some(rent)) = (&doc.own_card, &doc.best_rental) {
        let _ = writeln!(o, "  if you rent instead: {}", row_line(rent));
    }
}

fn software(o: &mut String, doc: &PlanDocument) {
    let _ = writeln!(o, "\n(1) Software switches on your card");
    let Some(l) = &doc.software else {
        let _ = writeln!(o, "give --have GPU to see what each switch saves on your card");
        return;
    };
    let _ = writeln!(o, "{} ({} usable), applied in order:", shown(&l.gpu_name), bytes(l.gpu_memory_bytes));
    o.push_str(&ladder_table(l));
    o.push('\n');
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
    let mc = &doc.more_cards;
    let train = doc.task == JobKind::Train;
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
    let bc = &doc.bigger_card;
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
    let Some(rec) = doc.best_rental.as_ref().or(doc.recommended.as_ref()) else { return };
    if doc.cheaper_to_rent.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nCheaper to rent than {}, but not over this job", hardware(rec));
    for x in doc.cheaper_to_rent.iter().take(3) {
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
    let Some(be) = &doc.break_even else { return };
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
            "  the machine costs as much as {:.1}–{:.1} single cards and runs this job {:.1}× faster: {verdict}",
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
                        (Some(b), Some(h)) => format!("{} billed for {}", price_of(b, &be.currency), duration(h)),
                        (Some(b), None) => price_of(b, &be.currency),
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
