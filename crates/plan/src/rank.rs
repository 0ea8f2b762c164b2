//! How plans are ranked: cheaper first, with costs within [`PRICE_TIE`] of
//! each other counted as equal; at equal cost the plan that changes less of
//! what is computed, then the smaller bill of whole months, then the faster.

use crate::report::PlanRow;
use crate::types::{MemEntry, MemKey, Scored};
use std::cmp::Ordering;
use vramfit_core::workload::{Offload, Task};

/// Prices within this share of each other rank as equal (0.5 %): catalogue
/// prices are rounded list prices and the time model is a ±50 % estimate,
/// so a 0.3 % difference decides nothing.
pub const PRICE_TIE: f64 = 0.005;

/// A plan billing at most this share more than the recommended one is named
/// beside it when it finishes in at most [`FASTER_FOR_MORE_TIME`] of the
/// time (product policy: a quarter more for half the wait or better is a
/// trade a practitioner weighs; the ranking itself stays by bill).
pub const FASTER_FOR_MORE_BILL: f64 = 0.25;

/// See [`FASTER_FOR_MORE_BILL`].
pub const FASTER_FOR_MORE_TIME: f64 = 0.5;

/// The recommended job takes at least this many hours before a faster plan
/// is named beside it (a day of waiting; shorter jobs save hours).
pub const FASTER_FOR_MORE_MIN_HOURS: f64 = 24.0;

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
/// [`crate::types::Complexity::premium`]); at the same cost the simpler
/// setup, then the one that changes less of what is computed, then the
/// smaller bill, then the faster.
pub fn order(a: &Scored, b: &Scored) -> Ordering {
    cost_bucket(a.cost_key())
        .cmp(&cost_bucket(b.cost_key()))
        .then(a.ranked_complexity().cmp(&b.ranked_complexity()))
        .then(a.inexact.cmp(&b.inexact))
        .then(a.billed_mid().total_cmp(&b.billed_mid()))
        .then(b.tokens_per_s.total_cmp(&a.tokens_per_s))
}

/// `a` ranks before `b`.
pub fn better(a: &Scored, b: &Scored) -> bool {
    order(a, b) == Ordering::Less
}

/// The best of `candidates` that `f` accepts.
pub fn best_where(candidates: &[Scored], f: impl Fn(&Scored) -> bool) -> Option<&Scored> {
    let mut best: Option<&Scored> = None;
    for c in candidates.iter().filter(|c| f(c)) {
        if best.is_none_or(|b| better(c, b)) {
            best = Some(c);
        }
    }
    best
}

/// Simpler first, then faster: how own-card setups (no bill) are compared.
pub fn simpler_then_faster(a: &Scored, b: &Scored) -> Ordering {
    a.ranked_complexity()
        .cmp(&b.ranked_complexity())
        .then(a.inexact.cmp(&b.inexact))
        .then(b.tokens_per_s.total_cmp(&a.tokens_per_s))
}

/// The setup moves optimizer states or parameters to the host.
pub fn offloads(key: &MemKey) -> bool {
    key.offload_optimizer != Offload::None || key.offload_params != Offload::None
}

/// The setup runs the user's job `base` as given (same method, precision,
/// optimizer, checkpointing, micro-batch and global batch; no offload; the
/// user's weights and KV cache).
pub fn is_unchanged(base: &Task, e: &MemEntry) -> bool {
    if e.inexact > 0 || offloads(&e.key) {
        return false;
    }
    match (base, &e.key.train, &e.key.infer) {
        (Task::Train(t), Some(k), _) => {
            k.kind == t.kind && k.checkpointing == t.checkpointing && k.micro_batch == t.batch.max(1)
        }
        (Task::Inference(i), _, Some(k)) => k.quant_bits.is_none() && k.kv_dtype == i.kv_dtype,
        _ => false,
    }
}

/// The setup keeps the method of the user's job `base` (full / LoRA / QLoRA / inference).
pub fn same_method(base: &Task, key: &MemKey) -> bool {
    match (base, &key.train) {
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
