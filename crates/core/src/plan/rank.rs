//! How plans are ranked: cheaper first, with costs within [`PRICE_TIE`] of
//! each other counted as equal; at equal cost the plan that changes less of
//! what is computed, then the smaller bill of whole months, then the faster.

use super::pricing::HOURS_PER_MONTH;
use super::report::PlanRow;
use super::search::{Scored, Search};
use super::summary::switches;
use crate::workload::Offload;
use std::cmp::Ordering;

/// Prices within this share of each other rank as equal (0.5 %): catalogue
/// prices are rounded list prices and the time model is a ±50 % estimate,
/// so a 0.3 % difference decides nothing.
pub const PRICE_TIE: f64 = 0.005;

/// Costs within about [`PRICE_TIE`] of each other fall in one bucket
/// (logarithmic buckets keep the order total, as sorting needs).
fn cost_bucket(c: f64) -> i64 {
    if c.is_nan() || c == f64::INFINITY {
        i64::MAX
    } else if c <= 0.0 {
        i64::MIN
    } else {
        (c.ln() * (1.0 / PRICE_TIE)).round() as i64
    }
}

/// `a` costs more than `b` beyond a price tie.
pub fn costs_more(a: f64, b: f64) -> bool {
    a > b * (1.0 + PRICE_TIE)
}

/// Switches that change what is computed (the method, the optimizer's
/// numerics, precision, quantization), as opposed to exact ones
/// (checkpointing, accumulation, sharding, offload).
fn inexact_switches(s: &Search, c: &Scored) -> u8 {
    s.entries[c.mem as usize].inexact
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
pub fn order(s: &Search, a: &Scored, b: &Scored) -> Ordering {
    cost_bucket(a.cost_key())
        .cmp(&cost_bucket(b.cost_key()))
        .then(inexact_switches(s, a).cmp(&inexact_switches(s, b)))
        .then(billed(a).total_cmp(&billed(b)))
        .then(b.tokens_per_s.total_cmp(&a.tokens_per_s))
}

pub fn better(s: &Search, a: &Scored, b: &Scored) -> bool {
    order(s, a, b) == Ordering::Less
}

/// The best scored candidate that `f` accepts.
pub fn best_where<'s>(s: &'s Search, f: impl Fn(&Scored) -> bool) -> Option<&'s Scored> {
    let mut best: Option<&Scored> = None;
    for c in s.scored.iter().filter(|c| f(c)) {
        if best.is_none_or(|b| better(s, c, b)) {
            best = Some(c);
        }
    }
    best
}

pub fn offloads(s: &Search, c: &Scored) -> bool {
    let p = &s.entries[c.mem as usize].workload.parallelism;
    p.offload_optimizer != Offload::None || p.offload_params != Offload::None
}

/// The candidate runs the user's job as given.
pub fn is_unchanged(s: &Search, c: &Scored) -> bool {
    switches(s.base, &s.entries[c.mem as usize].workload).is_empty()
}

/// The candidate keeps the user's method (full / LoRA / QLoRA / inference).
pub fn same_method(s: &Search, c: &Scored) -> bool {
    let method = |w| super::summary::summarize(w).method;
    method(&s.entries[c.mem as usize].workload) == method(s.base)
}

/// Ranked plans in the recommended plan's currency that rent for less but
/// cost more over the job: cheaper by the month, dearer by the job (beyond
/// a price tie) because they are slower.
pub fn cheaper_to_rent(ranked: &[PlanRow], rec: &PlanRow) -> Vec<PlanRow> {
    ranked
        .iter()
        .filter(|x| x.currency == rec.currency && !(x.offer_id == rec.offer_id && x.gpus == rec.gpus))
        .filter(|x| matches!((x.monthly, rec.monthly), (Some(a), Some(b)) if a.low < b.low))
        .filter(|x| matches!((x.job_cost, rec.job_cost), (Some(a), Some(b)) if costs_more(a.low, b.low)))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_within_half_a_percent() {
        assert_eq!(cost_bucket(1000.0), cost_bucket(1000.0 * (1.0 + PRICE_TIE / 4.0)));
        assert!(cost_bucket(1000.0) < cost_bucket(1000.0 * (1.0 + 3.0 * PRICE_TIE)));
        assert!(!costs_more(1004.0, 1000.0));
        assert!(costs_more(1006.0, 1000.0));
        // the exact multipliers the ranking always used
        assert_eq!(1.0 / PRICE_TIE, 200.0);
        assert_eq!(1.0 + PRICE_TIE, 1.005);
    }
}
