//! How plans are ranked: cheaper first, with costs within [`PRICE_TIE`] of
//! each other counted as equal; at equal cost the plan that changes less of
//! what is computed, then the smaller bill of whole months, then the faster.

use super::report::PlanRow;
use super::search::{Scored, Search};
use std::cmp::Ordering;
use vramfit_core::workload::{Offload, Task};

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

/// The ranking: cheaper by what the user is billed for the job, with the
/// premium of each moving part added (`Scored::rank_cost`, see
/// [`super::search::Complexity::premium`]); at the same cost the simpler
/// setup, then the one that changes less of what is computed, then the
/// smaller bill, then the faster.
pub fn order(s: &Search, a: &Scored, b: &Scored) -> Ordering {
    let (ea, eb) = (&s.entries[a.mem as usize], &s.entries[b.mem as usize]);
    cost_bucket(a.cost_key())
        .cmp(&cost_bucket(b.cost_key()))
        .then(ea.complexity.cmp(&eb.complexity))
        .then(ea.inexact.cmp(&eb.inexact))
        .then(a.billed_mid().total_cmp(&b.billed_mid()))
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
    let k = &s.entries[c.mem as usize].key;
    k.offload_optimizer != Offload::None || k.offload_params != Offload::None
}

/// The candidate runs the user's job as given (same method, precision,
/// optimizer, checkpointing, micro-batch and global batch; no offload; the
/// user's weights and KV cache).
pub fn is_unchanged(s: &Search, c: &Scored) -> bool {
    let e = &s.entries[c.mem as usize];
    if e.inexact > 0 || offloads(s, c) {
        return false;
    }
    match (&s.base.task, &e.key.train, &e.key.infer) {
        (Task::Train(t), Some(k), _) => {
            k.kind == t.kind && k.checkpointing == t.checkpointing && k.micro_batch == t.batch.max(1)
        }
        (Task::Inference(i), _, Some(k)) => k.quant_bits.is_none() && k.kv_dtype == i.kv_dtype,
        _ => false,
    }
}

/// The candidate keeps the user's method (full / LoRA / QLoRA / inference).
pub fn same_method(s: &Search, c: &Scored) -> bool {
    match (&s.base.task, &s.entries[c.mem as usize].key.train) {
        (Task::Train(t), Some(k)) => k.kind == t.kind,
        (Task::Inference(_), None) => true,
        _ => false,
    }
}

/// Ranked plans in the recommended plan's currency that rent for less but
/// bill more for the job: cheaper by the month, dearer by the job (beyond a
/// price tie) because they are slower.
pub fn cheaper_to_rent(ranked: &[PlanRow], rec: &PlanRow) -> Vec<PlanRow> {
    ranked
        .iter()
        .filter(|x| x.currency == rec.currency && !(x.offer_id == rec.offer_id && x.gpus == rec.gpus))
        .filter(|x| matches!((x.monthly, rec.monthly), (Some(a), Some(b)) if a.mid() < b.mid()))
        .filter(|x| matches!((x.billed, rec.billed), (Some(a), Some(b)) if costs_more(a.mid(), b.mid())))
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
