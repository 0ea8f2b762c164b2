//! The planner: the cheapest setup that fits a job, and what each of the
//! three ways out costs — (1) software switches on the card the user has,
//! (2) more cards with sharding that really lowers per-GPU memory, (3) a
//! bigger single card — with job time and cost from a documented time model.
//!
//! Pure: it takes the model, the user's workload, the GPU catalogue and the
//! price book as values and returns a [`PlanReport`]. Memory comes only from
//! [`crate::estimate()`]; this module holds no memory formulas. Money stays
//! in the offer's currency (no exchange rates): plans in different
//! currencies are ranked separately.
//!
//! Submodules: [`search`] (the candidate space and the memoized scoring
//! loop), [`time`] (the time model and its constants), [`pricing`]
//! (offers, discounts, upgrades, price ranges), [`ladder`] (path 1).

pub mod ladder;
pub mod pricing;
pub mod search;
#[cfg(test)]
mod tests;
pub mod time;

pub use ladder::{Ladder, LadderStep, StepStatus};
pub use pricing::{Discount, DiscountKind, Offer, PriceBook, PriceRange, Slice, Term, Upgrade, HOURS_PER_MONTH};
pub use search::{MemKey, Scored, Search};
pub use time::{StepTime, TimeModel};

use crate::error::CoreError;
use crate::hardware::{GpuSpec, Link};
use crate::ledger::Category;
use crate::model::ModelSpec;
use crate::train::TrainKind;
use crate::workload::{Offload, Parallelism, Sharding, Task, Workload};
use serde::{Deserialize, Serialize};

/// Method changes the user allows (`--allow lora,qlora,quant`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Allow {
    pub lora: bool,
    pub qlora: bool,
    /// inference: int8/int4 weights and an fp8 KV cache
    pub quant: bool,
}

/// How big the job is.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Job {
    /// no size given: rank by monthly price
    #[default]
    None,
    /// tokens to train on (or to generate)
    Tokens(u64),
    /// hours of rental
    Hours(f64),
}

/// A multi-GPU plan must be cheaper than the best single-card plan by more
/// than this share to be recommended over it: sharding adds launch
/// complexity, communication and failure modes that a small saving does
/// not pay for (the seed's "a 2 GB gap is not worth sharding").
pub const SHARDING_PREMIUM: f64 = 0.25;

/// Everything the planner needs.
#[derive(Debug, Clone)]
pub struct PlanRequest<'a> {
    pub model: &'a ModelSpec,
    /// the user's job as given (its GPU count is the user's, the baseline)
    pub workload: &'a Workload,
    pub gpus: &'a [GpuSpec],
    pub book: &'a PriceBook,
    /// the card the user has (path 1)
    pub have: Option<&'a GpuSpec>,
    pub allow: Allow,
    pub job: Job,
    /// rows in the ranked table, per currency
    pub top: usize,
    pub time: TimeModel,
}

/// The software and parallel setup of a plan, in words and numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetupSummary {
    /// `full`, `lora`, `qlora` or `inference`
    pub method: String,
    pub precision: Option<String>,
    pub optimizer: Option<String>,
    pub checkpointing: Option<String>,
    pub micro_batch: u64,
    pub grad_accum: u64,
    /// sequences per optimizer step over all ranks
    pub global_batch: u64,
    pub gpus: u64,
    pub tp: u64,
    pub pp: u64,
    pub dp: u64,
    /// `none` (plain DP), `zero1`, `zero2`, `zero3`
    pub sharding: String,
    pub offload_optimizer: String,
    pub offload_params: String,
    /// inference weight format
    pub weights: Option<String>,
    pub kv_dtype: Option<String>,
}

/// One priced, scored plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRow {
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
    pub setup: SetupSummary,
    /// what differs from the user's job
    pub switches: Vec<String>,
    pub per_gpu_bytes: u64,
    pub gpu_memory_bytes: u64,
    pub headroom_bytes: i128,
    /// weights + master weights + gradients + optimizer states, per GPU
    pub model_states_bytes: u64,
    pub cpu_bytes: u64,
    pub fits: bool,
    /// time per token against the ideal on this hardware (recompute, comm, offload, bubbles)
    pub slowdown: f64,
    pub step: StepTime,
    pub tokens_per_s: f64,
    pub monthly: Option<PriceRange>,
    /// best monthly price on a yearly term, with the discounts used
    pub monthly_yearly: Option<PriceRange>,
    pub yearly_discounts: Vec<String>,
    pub hourly: Option<PriceRange>,
    /// the hourly figure is the monthly one / 730
    pub hourly_prorated: bool,
    pub job_hours: Option<f64>,
    pub job_tokens: Option<f64>,
    pub job_cost: Option<PriceRange>,
    /// whole months billed when only monthly prices exist
    pub months_billed: Option<u64>,
    pub upgrades: Vec<String>,
    pub notes: Vec<String>,
    #[serde(skip)]
    pub workload: Option<Workload>,
}

/// Path (2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoreCards {
    /// per-GPU bytes of the unchanged job on one GPU
    pub single_bytes: Option<u64>,
    /// per-GPU bytes of the unchanged job with plain data parallelism over `dp_gpus`
    pub dp_only_bytes: Option<u64>,
    pub dp_gpus: u64,
    pub best: Option<PlanRow>,
    /// the fewest of the user's own cards that would hold it (PCIe, unpriced)
    pub on_have: Option<PlanRow>,
}

/// Path (3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BiggerCard {
    /// per-GPU bytes of the unchanged job on one GPU
    pub need_bytes: Option<u64>,
    pub best: Option<PlanRow>,
    /// catalogue GPUs big enough, offered or not
    pub gpus_that_fit: Vec<String>,
}

/// Single cards against a whole 8-GPU machine for this job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakEven {
    pub single: PlanRow,
    pub machine: PlanRow,
    pub currency: String,
    /// machine monthly price / single-card monthly price
    pub price_ratio: Option<PriceRange>,
    /// machine tokens/s / single-card tokens/s
    pub speed_ratio: f64,
    /// the machine is cheaper per token (speed ratio above the price ratio)
    pub machine_cheaper_per_token: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchStats {
    pub candidates: u64,
    pub fitting: u64,
    pub estimates: u64,
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    pub task: String,
    pub params_total: u64,
    /// the unchanged job on one GPU, per-GPU bytes
    pub baseline_bytes: Option<u64>,
    pub have: Option<String>,
    pub have_memory_bytes: Option<u64>,
    /// bytes the unchanged job lacks on the user's card (negative: spare)
    pub have_gap_bytes: Option<i128>,
    pub ranked: Vec<PlanRow>,
    pub software: Option<Ladder>,
    pub more_cards: MoreCards,
    pub bigger_card: BiggerCard,
    pub break_even: Option<BreakEven>,
    pub recommended: Option<PlanRow>,
    pub reason: String,
    pub stats: SearchStats,
    pub notes: Vec<String>,
}

fn sharding_name(s: Sharding) -> &'static str {
    match s {
        Sharding::None => "none",
        Sharding::Zero1 => "zero1",
        Sharding::Zero2 => "zero2",
        Sharding::Zero3 => "zero3",
    }
}

fn offload_name(o: Offload) -> &'static str {
    match o {
        Offload::None => "none",
        Offload::Cpu => "cpu",
        Offload::Nvme => "nvme",
    }
}

/// Describe a workload.
pub fn summarize(w: &Workload) -> SetupSummary {
    let p = &w.parallelism;
    let dp = p.dp();
    match &w.task {
        Task::Train(t) => SetupSummary {
            method: match t.kind {
                TrainKind::Full => "full".into(),
                k => k.name().into(),
            },
            precision: Some(t.precision.name().into()),
            optimizer: Some(t.optimizer.name().into()),
            checkpointing: Some(t.checkpointing.name().into()),
            micro_batch: t.batch,
            grad_accum: t.grad_accum,
            global_batch: t.batch.saturating_mul(t.grad_accum.max(1)).saturating_mul(dp),
            gpus: p.gpus,
            tp: p.tp,
            pp: p.pp,
            dp,
            sharding: sharding_name(p.sharding).into(),
            offload_optimizer: offload_name(p.offload_optimizer).into(),
            offload_params: offload_name(p.offload_params).into(),
            weights: None,
            kv_dtype: None,
        },
        Task::Inference(s) => SetupSummary {
            method: "inference".into(),
            precision: None,
            optimizer: None,
            checkpointing: None,
            micro_batch: s.batch,
            grad_accum: 1,
            global_batch: s.concurrency,
            gpus: p.gpus,
            tp: p.tp,
            pp: p.pp,
            dp,
            sharding: "none".into(),
            offload_optimizer: "none".into(),
            offload_params: "none".into(),
            weights: Some(match &s.quant {
                Some(q) => q.label.clone(),
                None => s.weight_dtype.name().into(),
            }),
            kv_dtype: Some(s.kv_dtype.name().into()),
        },
    }
}

/// What a plan changes against the user's job.
pub fn switches(base: &Workload, w: &Workload) -> Vec<String> {
    let mut v = Vec::new();
    let (a, b) = (summarize(base), summarize(w));
    if a.method != b.method {
        v.push(b.method.to_string());
    }
    if a.precision != b.precision {
        v.push(format!("precision {}", b.precision.clone().unwrap_or_default()));
    }
    if a.optimizer != b.optimizer {
        v.push(format!("optimizer {}", b.optimizer.clone().unwrap_or_default()));
    }
    if a.checkpointing != b.checkpointing {
        v.push(format!("checkpointing {}", b.checkpointing.clone().unwrap_or_default()));
    }
    if a.micro_batch != b.micro_batch && b.method != "inference" {
        v.push(format!("micro-batch {} × accum {}", b.micro_batch, b.grad_accum));
    }
    if a.weights != b.weights {
        v.push(format!("weights {}", b.weights.clone().unwrap_or_default()));
    }
    if a.kv_dtype != b.kv_dtype {
        v.push(format!("kv {}", b.kv_dtype.clone().unwrap_or_default()));
    }
    if b.offload_optimizer != "none" {
        v.push(format!("offload optimizer → {}", b.offload_optimizer));
    }
    if b.offload_params != "none" {
        v.push(format!("offload params → {}", b.offload_params));
    }
    v
}

fn row(s: &Search, sc: &Scored) -> Option<PlanRow> {
    let e = &s.entries[sc.mem as usize];
    let m = e.mem?;
    let offer = s.offer(sc.offer);
    let gpu = s.offer_gpu(sc.offer)?;
    let cap = match &offer.slice {
        Some(sl) => sl.memory_mib.saturating_mul(crate::units::MIB),
        None => gpu.memory_bytes(),
    };
    let (my, yd) = match search::yearly(s.book, offer) {
        Some((p, ids)) => {
            let units = offer.units_for(sc.gpus).max(sc.machines) as f64;
            (Some(p.scale(units)), ids)
        }
        None => (None, Vec::new()),
    };
    let mut notes = Vec::new();
    if let Task::Train(t) = &e.workload.task {
        if !gpu.bf16 && t.precision.compute_dtype() == crate::dtype::DType::BF16 {
            notes.push(format!("{} has no bf16: run the same setup in fp16 (same memory)", gpu.name));
        }
        if let Task::Train(bt) = &s.base.task {
            let want = search::global_batch(bt, &s.base.parallelism);
            let got = t.batch * t.grad_accum.max(1) * e.workload.parallelism.dp();
            if got != want {
                notes.push(format!(
                    "global batch {got} (asked {want}: not divisible over {} ranks)",
                    e.workload.parallelism.dp()
                ));
            }
        }
    }
    if sc.ram_unchecked {
        notes.push(format!("offload needs {:.0} GB of host RAM; the offer does not list its RAM", m.cpu as f64 / 1e9));
    }
    if let Some(sl) = &offer.slice {
        notes.push(format!("{} slice of one card: compute and bandwidth shared", sl.label));
    }
    let upgrades = sc.upgrade.map(|u| vec![s.book.upgrades[u as usize].name.clone()]).unwrap_or_default();
    let months_billed = match (sc.job_hours, offer.hourly) {
        (Some(h), None) if offer.monthly.is_some() => Some((h / HOURS_PER_MONTH).ceil().max(1.0) as u64),
        _ => None,
    };
    Some(PlanRow {
        offer_id: offer.id.clone(),
        provider: offer.provider.clone(),
        offer_name: offer.name.clone(),
        gpu_id: gpu.id.clone(),
        gpu_name: gpu.name.clone(),
        gpus: sc.gpus,
        machines: sc.machines,
        link: if gpu.nvlink_gbs.is_some() { offer.link } else { Link::Pcie },
        currency: offer.currency.clone(),
        flags: offer.flags.clone(),
        setup: summarize(&e.workload),
        switches: switches(s.base, &e.workload),
        per_gpu_bytes: m.total,
        gpu_memory_bytes: cap,
        headroom_bytes: cap as i128 - m.total as i128,
        model_states_bytes: m.model_states,
        cpu_bytes: m.cpu,
        fits: m.total <= cap,
        slowdown: sc.slowdown,
        step: sc.step,
        tokens_per_s: sc.tokens_per_s,
        monthly: sc.monthly,
        monthly_yearly: my,
        yearly_discounts: yd,
        hourly: sc.hourly,
        hourly_prorated: sc.hourly_prorated,
        job_hours: sc.job_hours,
        job_tokens: sc.job_tokens,
        job_cost: sc.job_cost,
        months_billed,
        upgrades,
        notes,
        workload: Some(e.workload.clone()),
    })
}

/// Switches that change what is computed (the method, the optimizer's
/// numerics, precision, quantization), as opposed to exact ones
/// (checkpointing, accumulation, sharding, offload).
fn inexact_switches(s: &Search, c: &Scored) -> u8 {
    s.entries[c.mem as usize].inexact
}

/// Costs within about 0.5 % of each other rank as equal (logarithmic
/// buckets keep the order total, as sorting needs).
fn cost_bucket(c: f64) -> i64 {
    if c.is_nan() || c == f64::INFINITY {
        i64::MAX
    } else if c <= 0.0 {
        i64::MIN
    } else {
        (c.ln() * 200.0).round() as i64
    }
}

/// What a monthly-only rental actually bills for the job (whole months);
/// hourly offers bill what they cost.
fn billed(c: &Scored) -> f64 {
    match (c.job_hours, c.monthly, c.hourly_prorated) {
        (Some(h), Some(m), true) => (h / HOURS_PER_MONTH).ceil().max(1.0) * m.low,
        _ => c.cost_key(),
    }
}

/// The ranking: cheaper (job cost, else monthly price); at the same cost,
/// the one that changes less of what is computed, then the smaller bill
/// of whole months, then faster.
fn order(s: &Search, a: &Scored, b: &Scored) -> std::cmp::Ordering {
    cost_bucket(a.cost_key())
        .cmp(&cost_bucket(b.cost_key()))
        .then(inexact_switches(s, a).cmp(&inexact_switches(s, b)))
        .then(billed(a).total_cmp(&billed(b)))
        .then(b.tokens_per_s.total_cmp(&a.tokens_per_s))
}

fn better(s: &Search, a: &Scored, b: &Scored) -> bool {
    order(s, a, b) == std::cmp::Ordering::Less
}

fn best_where<'s>(s: &'s Search, f: impl Fn(&Scored) -> bool) -> Option<&'s Scored> {
    let mut best: Option<&Scored> = None;
    for c in s.scored.iter().filter(|c| f(c)) {
        if best.is_none_or(|b| better(s, c, b)) {
            best = Some(c);
        }
    }
    best
}

fn offloads(s: &Search, c: &Scored) -> bool {
    let p = &s.entries[c.mem as usize].workload.parallelism;
    p.offload_optimizer != Offload::None || p.offload_params != Offload::None
}

fn is_unchanged(s: &Search, c: &Scored) -> bool {
    let w = &s.entries[c.mem as usize].workload;
    switches(s.base, w).is_empty()
}

fn same_method(s: &Search, c: &Scored) -> bool {
    summarize(&s.entries[c.mem as usize].workload).method == summarize(s.base).method
}

/// The user's job on one GPU, as given (global batch kept).
fn single_gpu(base: &Workload) -> Workload {
    let mut w = base.clone();
    if let Task::Train(t) = &mut w.task {
        let gb = search::global_batch(t, &base.parallelism);
        t.grad_accum = gb.div_ceil(t.batch.max(1)).max(1);
    }
    w.parallelism = Parallelism { gpus: 1, tp: 1, pp: 1, ..Parallelism::default() };
    w
}

/// Plan. Errors only when the user's job itself is refused by the estimator.
pub fn plan(req: &PlanRequest) -> Result<PlanReport, CoreError> {
    let single = single_gpu(req.workload);
    let single_ledger = crate::estimate::estimate(req.model, &single)?;
    let baseline = single_ledger.total_bytes();
    let mut search = Search::new(req.model, &single, req.gpus, req.book, &req.time, req.job, req.allow);
    search.run();

    // ranked: best per (offer, gpus), then per currency by cost
    let mut best_per: Vec<Scored> = Vec::new();
    for c in &search.scored {
        match best_per.iter_mut().find(|b| b.offer == c.offer && b.gpus == c.gpus) {
            Some(b) => {
                if better(&search, c, b) {
                    *b = *c;
                }
            }
            None => best_per.push(*c),
        }
    }
    let mut currencies: Vec<String> = Vec::new();
    for o in &req.book.offers {
        if !currencies.contains(&o.currency) {
            currencies.push(o.currency.clone());
        }
    }
    best_per.sort_by(|a, b| {
        let ca = currencies.iter().position(|c| *c == search.offer(a.offer).currency);
        let cb = currencies.iter().position(|c| *c == search.offer(b.offer).currency);
        ca.cmp(&cb).then(order(&search, a, b))
    });
    let mut ranked = Vec::new();
    for cur in &currencies {
        ranked.extend(
            best_per
                .iter()
                .filter(|c| &search.offer(c.offer).currency == cur)
                .take(req.top.max(1))
                .filter_map(|c| row(&search, c)),
        );
    }

    // path 3: the unchanged job on one bigger card
    let bigger_best = best_where(&search, |c| c.gpus == 1 && is_unchanged(&search, c)).and_then(|c| row(&search, c));
    let gpus_that_fit = req.gpus.iter().filter(|g| g.memory_bytes() >= baseline).map(|g| g.id.clone()).collect();

    // path 2: more cards, same method
    let more_best = best_where(&search, |c| c.gpus >= 2 && same_method(&search, c) && !offloads(&search, c))
        .and_then(|c| row(&search, c));
    let dp_gpus = more_best.as_ref().map(|r| r.gpus).unwrap_or(8).max(2);
    let dp_only = {
        let mut w = single.clone();
        w.parallelism.gpus = dp_gpus;
        if let Task::Train(t) = &mut w.task {
            t.grad_accum = t.grad_accum.div_ceil(dp_gpus).max(1);
        }
        crate::estimate::estimate(req.model, &w).ok().map(|l| l.total_bytes())
    };
    let on_have = req.have.and_then(|g| {
        let book = PriceBook {
            offers: vec![Offer {
                id: format!("yours/{}", g.id),
                provider: "yours".into(),
                name: format!("your {} cards (PCIe, unpriced)", g.name),
                gpu: g.id.clone(),
                // counts 2, 4, 8: one card is the ladder's business
                gpus_per_machine: 2,
                max_gpus: 8,
                link: Link::Pcie,
                slice: None,
                cpu_cores: None,
                ram_gb: None,
                disk_gb: None,
                network_mbps: None,
                monthly: None,
                hourly: None,
                currency: "-".into(),
                flags: vec!["hypothetical".into()],
                source: "--have".into(),
                max_machines: 1,
                inter_node_gbs: None,
            }],
            discounts: vec![],
            upgrades: vec![],
        };
        let one = std::slice::from_ref(g);
        let mut s2 = Search::new(req.model, &single, one, &book, &req.time, req.job, Allow::default());
        s2.run();
        let mut best: Option<&Scored> = None;
        for c in s2.scored.iter().filter(|c| c.gpus >= 2 && same_method(&s2, c) && !offloads(&s2, c)) {
            let take = match best {
                None => true,
                Some(b) => c.gpus < b.gpus || (c.gpus == b.gpus && c.tokens_per_s > b.tokens_per_s),
            };
            if take {
                best = Some(c);
            }
        }
        best.and_then(|c| row(&s2, c))
    });

    // path 1
    let software = req.have.map(|g| ladder::ladder(req.model, &single, g, req.allow, &req.time));

    // break-even: best single card vs best whole machine of ≥ 8 GPUs, same currency
    // the first currency of the catalogue in which something fits
    let primary = currencies
        .iter()
        .find(|cur| search.scored.iter().any(|c| &search.offer(c.offer).currency == *cur))
        .or(currencies.first())
        .cloned();
    let break_even = primary.as_ref().and_then(|cur| {
        let single_c = best_where(&search, |c| {
            let o = search.offer(c.offer);
            c.gpus == 1 && o.gpus_per_machine == 1 && o.slice.is_none() && &o.currency == cur
        })?;
        let machine_c = best_where(&search, |c| {
            let o = search.offer(c.offer);
            o.gpus_per_machine >= 8 && c.gpus >= 8 && &o.currency == cur
        })?;
        let single = row(&search, single_c)?;
        let machine = row(&search, machine_c)?;
        let price_ratio = match (single.monthly, machine.monthly) {
            (Some(a), Some(b)) if a.low > 0.0 && a.high > 0.0 => {
                Some(PriceRange { low: b.low / a.high.max(a.low), high: b.high / a.low })
            }
            _ => None,
        };
        let speed_ratio = if single.tokens_per_s > 0.0 { machine.tokens_per_s / single.tokens_per_s } else { 0.0 };
        let cheaper = price_ratio.map(|p| speed_ratio > p.high).or(None);
        let cheaper = match (cheaper, price_ratio) {
            (Some(true), _) => Some(true),
            (_, Some(p)) if speed_ratio < p.low => Some(false),
            _ => None,
        };
        Some(BreakEven {
            single,
            machine,
            currency: cur.clone(),
            price_ratio,
            speed_ratio,
            machine_cheaper_per_token: cheaper,
        })
    });

    // recommendation: cheapest in the primary currency; a multi-GPU plan
    // must beat the best single card by more than the sharding premium
    let (recommended, reason) = match primary.as_ref() {
        None => (None, "the catalogue has no offers".to_string()),
        Some(cur) => {
            let overall = best_where(&search, |c| &search.offer(c.offer).currency == cur);
            let single_best = best_where(&search, |c| c.gpus == 1 && &search.offer(c.offer).currency == cur);
            match (overall, single_best) {
                (None, _) => (None, "no offer in the catalogue fits this job".to_string()),
                (Some(o), Some(sb)) if o.gpus > 1 && sb.cost_key() <= o.cost_key() * (1.0 + SHARDING_PREMIUM) => (
                    row(&search, sb),
                    format!(
                        "one card that fits costs within {:.0}% of the cheapest multi-GPU plan: not worth sharding",
                        SHARDING_PREMIUM * 100.0
                    ),
                ),
                (Some(o), _) => (
                    row(&search, o),
                    if o.gpus > 1 {
                        "the cheapest setup that fits; no single card fits for less".to_string()
                    } else {
                        "the cheapest setup that fits".to_string()
                    },
                ),
            }
        }
    };

    let have_gap = req.have.map(|g| baseline as i128 - g.memory_bytes() as i128);
    let mut reason = reason;
    if let (Some(rec), Some(h), Some(g), Some(gap)) = (&recommended, &on_have, req.have, have_gap) {
        if rec.gpus == 1 && gap > 0 && (gap as u64) < g.memory_bytes() {
            reason.push_str(&format!(
                "; {} of your {} with {} would also hold it, but a gap smaller than one card is not worth sharding: the next card up needs no split and no PCIe hops",
                h.gpus,
                g.name,
                if h.setup.pp > 1 { format!("a PP {} split over PCIe", h.setup.pp) } else { format!("{} sharding", h.setup.sharding) }
            ));
        }
    }
    let mut notes = Vec::new();
    if currencies.len() > 1 {
        notes.push(format!(
            "prices in {} are ranked separately: vramfit does not convert currencies",
            currencies.join(", ")
        ));
    }
    if matches!(req.workload.task, Task::Train(_)) {
        notes.push("data parallelism alone (ZeRO-0 / plain DDP) keeps a full copy of the model states on every GPU: it does not lower per-GPU memory; ZeRO-1/2/3, FSDP, TP and PP do".into());
    }
    let fitting = search.scored.len() as u64;
    Ok(PlanReport {
        task: match req.workload.task {
            Task::Train(_) => "train".into(),
            Task::Inference(_) => "inference".into(),
        },
        params_total: single_ledger.params_total,
        baseline_bytes: Some(baseline),
        have: req.have.map(|g| g.id.clone()),
        have_memory_bytes: req.have.map(|g| g.memory_bytes()),
        have_gap_bytes: have_gap,
        ranked,
        software,
        more_cards: MoreCards {
            single_bytes: Some(baseline),
            dp_only_bytes: dp_only,
            dp_gpus,
            best: more_best,
            on_have,
        },
        bigger_card: BiggerCard { need_bytes: Some(baseline), best: bigger_best, gpus_that_fit },
        break_even,
        recommended,
        reason,
        stats: SearchStats { candidates: search.evaluated, fitting, estimates: search.estimated },
        notes,
    })
}

/// Model-state bytes of a ledger (weights + master + gradients + optimizer states).
pub fn model_states(l: &crate::ledger::Ledger) -> u64 {
    [Category::Weights, Category::MasterWeights, Category::Gradients, Category::OptimizerStates]
        .iter()
        .fold(0u64, |a, &c| a.saturating_add(l.bytes(c)))
}
