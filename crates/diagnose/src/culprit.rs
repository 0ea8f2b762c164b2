//! The estimate beside the failure: given vramfit's per-GPU ledger for the
//! user's model and workload, the card, and the failing request, which
//! category is the culprit and which switch (of the planner's ladder, in
//! its cost order) is the cheapest that removes the gap.
//!
//! Pure: the caller computes the ledger and the ladder's rungs (each rung's
//! per-GPU bytes comes from `vramfit_core::estimate` on the changed
//! workload) and passes them in.

use crate::classify::b;
use crate::oom::TorchOom;
use serde::Serialize;
use vramfit_core::{Category, Ledger};

/// One rung of the planner's ladder, as the caller evaluated it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rung {
    pub name: String,
    /// per-GPU bytes after this rung (cumulative with the rungs before it)
    pub per_gpu_bytes: Option<u64>,
    /// kept (false: shown only, e.g. not allowed or not applicable)
    pub applied: bool,
    pub detail: String,
    /// what the rung changes, category by category, against the state before it
    pub changes: Vec<CategoryDelta>,
}

/// A category's change in bytes (negative: saved).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CategoryDelta {
    pub category: Category,
    pub delta_bytes: i64,
}

/// Category-by-category difference `after − before` (non-zero entries only).
pub fn deltas(before: &Ledger, after: &Ledger) -> Vec<CategoryDelta> {
    before
        .categories()
        .into_iter()
        .zip(after.categories())
        .filter_map(|((c, x), (_, y))| {
            let d = (y as i128 - x as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
            (d != 0).then_some(CategoryDelta { category: c, delta_bytes: d })
        })
        .collect()
}

fn signed(d: i64) -> String {
    if d < 0 {
        format!("−{}", b(d.unsigned_abs()))
    } else {
        format!("+{}", b(d as u64))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryShare {
    pub category: Category,
    pub bytes: u64,
    /// share of the estimate's total, 0–1
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CulpritReport {
    pub card_bytes: u64,
    pub estimate_bytes: u64,
    /// live tensors only (what `max_memory_allocated` would show)
    pub estimate_tensor_bytes: u64,
    /// estimate − card when positive
    pub gap_bytes: u64,
    pub categories: Vec<CategoryShare>,
    pub culprit: Option<Category>,
    pub culprit_bytes: u64,
    /// allocated + requested at the failure, when an OOM message was given
    pub failing_need_bytes: Option<u64>,
    pub reasoning: Vec<String>,
    /// first applied rung after which the estimate fits the card
    pub cheapest_switch: Option<Rung>,
    /// every rung the caller evaluated, in ladder order
    pub ladder: Vec<Rung>,
}

/// How far the failure may exceed the estimate's tensors before the excess
/// is called out as something the model does not account for.
pub const UNEXPLAINED_EXCESS: f64 = 0.20;

/// What was live and what was asked for when the allocation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// bytes PyTorch held in tensors
    pub held_bytes: u64,
    pub requested_bytes: u64,
}

impl From<&TorchOom> for Failing {
    fn from(t: &TorchOom) -> Self {
        // a message cut before its allocated figure: the request alone is known
        Failing { held_bytes: t.allocated.as_ref().map(|a| a.bytes).unwrap_or(0), requested_bytes: t.requested.bytes }
    }
}

/// Put `ledger` beside `card_bytes` and the failing request.
pub fn culprit(ledger: &Ledger, card_bytes: u64, failing: Option<&Failing>, ladder: &[Rung]) -> CulpritReport {
    let total = ledger.total_bytes();
    let tensors = ledger.tensor_peak_bytes();
    let categories: Vec<CategoryShare> = ledger
        .categories()
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(c, v)| CategoryShare {
            category: c,
            bytes: v,
            share: if total > 0 { v as f64 / total as f64 } else { 0.0 },
        })
        .collect();
    let top = categories.iter().filter(|c| c.category.is_tensor()).max_by_key(|c| c.bytes);
    let gap = total.saturating_sub(card_bytes);
    let mut reasoning = vec![format!(
        "Estimate: {} per GPU ({} in live tensors) against a {} card: {}.",
        b(total),
        b(tensors),
        b(card_bytes),
        if gap > 0 { format!("{} over", b(gap)) } else { format!("{} to spare", b(card_bytes - total)) }
    )];
    if let Some(t) = top {
        reasoning.push(format!(
            "Largest category: {} at {} ({:.0}% of the estimate).",
            t.category.key(),
            b(t.bytes),
            t.share * 100.0
        ));
    }
    let failing_need = failing.map(|f| f.held_bytes.saturating_add(f.requested_bytes));
    if let (Some(need), Some(f)) = (failing_need, failing) {
        reasoning.push(format!(
            "At the failure PyTorch held {} and asked for {} more: {} of tensors.",
            b(f.held_bytes),
            b(f.requested_bytes),
            b(need)
        ));
        if tensors > 0 && need as f64 > tensors as f64 * (1.0 + UNEXPLAINED_EXCESS) {
            reasoning.push(format!(
                "That is {} more than the model and workload account for ({} estimated): something beyond them is alive, e.g. tensors kept across steps (run `vramfit diagnose train.py`) or a larger batch/sequence than given.",
                b(need - tensors),
                b(tensors)
            ));
        } else if total <= card_bytes {
            reasoning.push("The estimate fits the card, so the failure points at fragmentation or memory outside this job rather than at the model's size.".to_string());
        }
    }
    let cheapest = if gap == 0 {
        None
    } else {
        ladder.iter().find(|r| r.applied && r.per_gpu_bytes.is_some_and(|x| x <= card_bytes)).cloned()
    };
    match &cheapest {
        Some(r) => {
            let what: Vec<String> =
                r.changes.iter().map(|c| format!("{} {}", c.category.key(), signed(c.delta_bytes))).collect();
            reasoning.push(format!(
                "Cheapest switch that removes the gap: {} → {} per GPU{}.",
                r.name,
                r.per_gpu_bytes.map(b).unwrap_or_default(),
                if what.is_empty() { String::new() } else { format!(" ({})", what.join(", ")) }
            ))
        }
        None if gap > 0 => reasoning.push(
            "No single-card switch of the ladder closes the gap: more GPUs with sharding, or a bigger card."
                .to_string(),
        ),
        None => {}
    }
    CulpritReport {
        card_bytes,
        estimate_bytes: total,
        estimate_tensor_bytes: tensors,
        gap_bytes: gap,
        culprit: top.map(|t| t.category),
        culprit_bytes: top.map(|t| t.bytes).unwrap_or(0),
        categories,
        failing_need_bytes: failing_need,
        reasoning,
        cheapest_switch: cheapest,
        ladder: ladder.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramfit_core::{Explanation, Phase, GIB};

    fn ledger() -> Ledger {
        let mut l = Ledger::new(Phase::Backward, 1);
        l.push(Category::Weights, "w", 14 * GIB, Explanation::new("x"));
        l.push(Category::OptimizerStates, "adam", 56 * GIB, Explanation::new("x"));
        l.push(Category::Activations, "act", 20 * GIB, Explanation::new("x"));
        l.push(Category::Runtime, "ctx", GIB, Explanation::new("x"));
        l
    }

    #[test]
    fn culprit_and_cheapest_rung() {
        // 14 + 56 + 20 + 1 = 91 GiB on an 80 GiB card: 11 GiB over
        let rung = |name: &str, gib: u64, applied: bool, changes: Vec<CategoryDelta>| Rung {
            name: name.into(),
            per_gpu_bytes: Some(gib * GIB),
            applied,
            detail: String::new(),
            changes,
        };
        let rungs = vec![
            rung("mixed precision", 91, false, vec![]),
            rung("checkpointing", 85, true, vec![]),
            rung(
                "8-bit optimizer",
                43,
                true,
                vec![CategoryDelta { category: Category::OptimizerStates, delta_bytes: -42 * GIB as i64 }],
            ),
        ];
        let r = culprit(&ledger(), 80 * GIB, None, &rungs);
        assert_eq!(r.gap_bytes, 11 * GIB);
        assert_eq!(r.culprit, Some(Category::OptimizerStates));
        assert_eq!(r.cheapest_switch.unwrap().name, "8-bit optimizer");
        assert!(r.reasoning.iter().any(|x| x.contains("(optimizer_states −42.00 GiB)")), "{:?}", r.reasoning);
        assert_eq!(r.estimate_tensor_bytes, 90 * GIB);
    }

    #[test]
    fn deltas_by_category() {
        let mut after = ledger();
        after.entries[1].bytes = 14 * GIB; // 56 → 14 GiB of optimizer states
        let d = deltas(&ledger(), &after);
        assert_eq!(d, vec![CategoryDelta { category: Category::OptimizerStates, delta_bytes: -42 * GIB as i64 }]);
    }

    #[test]
    fn fits_means_no_switch() {
        let r = culprit(&ledger(), 96 * GIB, None, &[]);
        assert_eq!(r.gap_bytes, 0);
        assert!(r.cheapest_switch.is_none());
    }
}
