//! [`plan()`]: the search, then each path out and the recommendation, each
//! a small function over the scored candidates.

use super::ladder;
use super::pricing::{Offer, PriceBook, PriceRange};
use super::rank::{best_where, better, cheaper_to_rent, is_unchanged, offloads, order, same_method};
use super::report::{BiggerCard, BreakEven, JobKind, MoreCards, PlanReport, PlanRow, SearchStats};
use super::request::{Allow, Job, PlanRequest};
use super::row::row;
use super::search::{self, Scored, Search};
use crate::error::CoreError;
use crate::estimate::estimate;
use crate::hardware::{GpuSpec, Link};
use crate::workload::{Parallelism, Task, Workload};

/// A multi-GPU plan must be cheaper than the best single-card plan by more
/// than this share to be recommended over it: sharding adds launch
/// complexity, communication and failure modes that a small saving does
/// not pay for (the seed's "a 2 GB gap is not worth sharding").
pub const SHARDING_PREMIUM: f64 = 0.25;

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
    let single_ledger = estimate(req.model, &single)?;
    let baseline = single_ledger.total_bytes();
    let mut search = Search::new(req.model, &single, req.gpus, req.book, &req.time, req.job, req.allow);
    search.run();
    let currencies = currencies(req.book);
    let ranked = ranked(&search, &currencies, req.top);
    let bigger_card = bigger_card(&search, req.gpus, baseline);
    let more_cards = more_cards(req, &search, &single, baseline);
    let software = req.have.map(|g| ladder::ladder(req.model, &single, g, req.allow, &req.time));
    // the first currency of the catalogue in which something fits
    let primary = currencies
        .iter()
        .find(|cur| search.scored.iter().any(|c| &search.offer(c.offer).currency == *cur))
        .or(currencies.first())
        .cloned();
    let break_even = primary.as_ref().and_then(|cur| break_even(&search, cur));
    let (recommended, mut reason) = recommend(&search, primary.as_deref());
    let have_gap = req.have.map(|g| baseline as i128 - g.memory_bytes() as i128);
    if let (Some(rec), Some(h), Some(g), Some(gap)) = (&recommended, &more_cards.on_have, req.have, have_gap) {
        if rec.gpus == 1 && gap > 0 && (gap as u64) < g.memory_bytes() {
            reason.push_str(&format!(
                "; {} of your {} with {} would also hold it, but a gap smaller than one card is not worth sharding: the next card up needs no split and no PCIe hops",
                h.gpus,
                g.name,
                if h.setup.pp > 1 {
                    format!("a PP {} split over PCIe", h.setup.pp)
                } else {
                    format!("{} sharding", h.setup.sharding.label())
                }
            ));
        }
    }
    let cheaper_to_rent = match (req.job, &recommended) {
        (Job::Tokens(_), Some(rec)) => cheaper_to_rent(&ranked, rec),
        _ => Vec::new(),
    };
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
    Ok(PlanReport {
        task: match req.workload.task {
            Task::Train(_) => JobKind::Train,
            Task::Inference(_) => JobKind::Inference,
        },
        params_total: single_ledger.params_total,
        baseline_bytes: Some(baseline),
        have: req.have.map(|g| g.id.clone()),
        have_memory_bytes: req.have.map(|g| g.memory_bytes()),
        have_gap_bytes: have_gap,
        ranked,
        software,
        more_cards,
        bigger_card,
        break_even,
        recommended,
        reason,
        cheaper_to_rent,
        stats: SearchStats {
            candidates: search.evaluated,
            fitting: search.scored.len() as u64,
            estimates: search.estimated,
        },
        notes,
    })
}

/// Currencies in the catalogue's order (each is ranked on its own).
fn currencies(book: &PriceBook) -> Vec<String> {
    let mut currencies: Vec<String> = Vec::new();
    for o in &book.offers {
        if !currencies.contains(&o.currency) {
            currencies.push(o.currency.clone());
        }
    }
    currencies
}

/// The best setup per (offer, GPU count), then per currency by cost, `top` each.
fn ranked(search: &Search, currencies: &[String], top: usize) -> Vec<PlanRow> {
    let mut best_per: Vec<Scored> = Vec::new();
    for c in &search.scored {
        match best_per.iter_mut().find(|b| b.offer == c.offer && b.gpus == c.gpus) {
            Some(b) => {
                if better(search, c, b) {
                    *b = *c;
                }
            }
            None => best_per.push(*c),
        }
    }
    let currency = |c: &Scored| currencies.iter().position(|cur| *cur == search.offer(c.offer).currency);
    best_per.sort_by(|a, b| currency(a).cmp(&currency(b)).then(order(search, a, b)));
    let mut ranked = Vec::new();
    for cur in currencies {
        ranked.extend(
            best_per
                .iter()
                .filter(|c| &search.offer(c.offer).currency == cur)
                .take(top.max(1))
                .filter_map(|c| row(search, c)),
        );
    }
    ranked
}

/// Path (3): the unchanged job on one bigger card.
fn bigger_card(search: &Search, gpus: &[GpuSpec], baseline: u64) -> BiggerCard {
    let best = best_where(search, |c| c.gpus == 1 && is_unchanged(search, c)).and_then(|c| row(search, c));
    let gpus_that_fit = gpus.iter().filter(|g| g.memory_bytes() >= baseline).map(|g| g.id.clone()).collect();
    BiggerCard { need_bytes: Some(baseline), best, gpus_that_fit }
}

/// Path (2): more cards with the same method and no offload, beside plain
/// data parallelism on as many GPUs and the fewest of the user's own cards.
fn more_cards(req: &PlanRequest, search: &Search, single: &Workload, baseline: u64) -> MoreCards {
    let best = best_where(search, |c| c.gpus >= 2 && same_method(search, c) && !offloads(search, c))
        .and_then(|c| row(search, c));
    let dp_gpus = best.as_ref().map(|r| r.gpus).unwrap_or(8).max(2);
    let dp_only = {
        let mut w = single.clone();
        w.parallelism.gpus = dp_gpus;
        if let Task::Train(t) = &mut w.task {
            t.grad_accum = t.grad_accum.div_ceil(dp_gpus).max(1);
        }
        estimate(req.model, &w).ok().map(|l| l.total_bytes())
    };
    let on_have = req.have.and_then(|g| on_have(req, single, g));
    MoreCards { single_bytes: Some(baseline), dp_only_bytes: dp_only, dp_gpus, best, on_have }
}

/// The fewest of the user's own cards (2, 4 or 8 over PCIe, unpriced) that hold the job.
fn on_have(req: &PlanRequest, single: &Workload, g: &GpuSpec) -> Option<PlanRow> {
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
    let mut s2 = Search::new(req.model, single, one, &book, &req.time, req.job, Allow::default());
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
}

/// The best single card against the best whole machine of ≥ 8 GPUs in `cur`.
fn break_even(search: &Search, cur: &str) -> Option<BreakEven> {
    let single_c = best_where(search, |c| {
        let o = search.offer(c.offer);
        c.gpus == 1 && o.gpus_per_machine == 1 && o.slice.is_none() && o.currency == cur
    })?;
    let machine_c = best_where(search, |c| {
        let o = search.offer(c.offer);
        o.gpus_per_machine >= 8 && c.gpus >= 8 && o.currency == cur
    })?;
    let single = row(search, single_c)?;
    let machine = row(search, machine_c)?;
    let price_ratio = match (single.monthly, machine.monthly) {
        (Some(a), Some(b)) if a.low > 0.0 && a.high > 0.0 => {
            Some(PriceRange { low: b.low / a.high.max(a.low), high: b.high / a.low })
        }
        _ => None,
    };
    let speed_ratio = if single.tokens_per_s > 0.0 { machine.tokens_per_s / single.tokens_per_s } else { 0.0 };
    // cheaper per token when the speed gain beats the whole price range; dearer below it
    let machine_cheaper_per_token = match price_ratio {
        Some(p) if speed_ratio > p.high => Some(true),
        Some(p) if speed_ratio < p.low => Some(false),
        _ => None,
    };
    Some(BreakEven { single, machine, currency: cur.to_string(), price_ratio, speed_ratio, machine_cheaper_per_token })
}

/// The cheapest plan in the primary currency; a multi-GPU plan must beat the
/// best single card by more than [`SHARDING_PREMIUM`]. Returns the plan and why.
fn recommend(search: &Search, primary: Option<&str>) -> (Option<PlanRow>, String) {
    let Some(cur) = primary else { return (None, "the catalogue has no offers".to_string()) };
    let overall = best_where(search, |c| search.offer(c.offer).currency == cur);
    let single_best = best_where(search, |c| c.gpus == 1 && search.offer(c.offer).currency == cur);
    match (overall, single_best) {
        (None, _) => (None, "no offer in the catalogue fits this job".to_string()),
        (Some(o), Some(sb)) if o.gpus > 1 && sb.cost_key() <= o.cost_key() * (1.0 + SHARDING_PREMIUM) => (
            row(search, sb),
            format!(
                "one card that fits costs within {:.0}% of the cheapest multi-GPU plan: not worth sharding",
                SHARDING_PREMIUM * 100.0
            ),
        ),
        (Some(o), _) => (
            row(search, o),
            if o.gpus > 1 {
                "the cheapest setup that fits; no single card fits for less".to_string()
            } else {
                "the cheapest setup that fits".to_string()
            },
        ),
    }
}
