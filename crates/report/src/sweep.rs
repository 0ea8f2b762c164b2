//! `estimate --sweep`: the estimate's neighbourhood (schema 1, additive:
//! the `sweep` field of `estimate --json`, docs/schema.md). Built from
//! `vramfit_core::sweep` values; the variants are estimated by the caller
//! with the same flag parsing as the point itself.

use crate::format::{bytes, signed_bytes};
use serde::Serialize;
use std::fmt::Write;
use vramfit_core::Explanation as ExplainInfo;
use vramfit_plan::sweep::{CardFit, Largest};

/// The sweep beside one estimate.
#[derive(Debug, Clone, Serialize)]
pub struct SweepInfo {
    /// the card the searches fit against (`fit.gpu`); null without `--gpu`/`--gpu-mem`
    pub gpu: Option<String>,
    pub gpu_memory_bytes: Option<u64>,
    /// largest context and concurrency (inference) or context and micro-batch
    /// (training) that fit the card, every other setting unchanged; empty without a card
    pub largest: Vec<LargestInfo>,
    /// the same job in other weight formats (inference) or methods (training)
    pub variants: Vec<VariantInfo>,
    /// every catalogue GPU against the total per GPU, smallest memory first
    pub cards: Vec<CardInfo>,
}

/// One search: `value` is null when not even `from` fits.
#[derive(Debug, Clone, Serialize)]
pub struct LargestInfo {
    /// `context`, `concurrency` or `micro_batch`
    pub knob: &'static str,
    pub current: u64,
    pub value: Option<u64>,
    pub from: u64,
    pub limit: u64,
    pub limit_reason: &'static str,
    /// the search reached its limit: memory is not what bounds it
    pub at_limit: bool,
    pub explain: ExplainInfo,
}

impl From<&Largest> for LargestInfo {
    fn from(l: &Largest) -> Self {
        LargestInfo {
            knob: l.knob.key(),
            current: l.current,
            value: l.value,
            from: l.from,
            limit: l.limit,
            limit_reason: l.limit_reason,
            at_limit: l.at_limit(),
            explain: (&l.explain).into(),
        }
    }
}

/// The job with one setting changed: `--dtype NAME` (inference) or `--task
/// NAME` (training). `error` is the message that flag would give (then no
/// bytes).
#[derive(Debug, Clone, Serialize)]
pub struct VariantInfo {
    /// the flag that makes this variant (`--dtype` or `--task`)
    pub flag: &'static str,
    /// its value (`int4`, `qlora`)
    pub value: String,
    /// the workload's weights or precision label (`GPTQ-style int4 g128`)
    pub label: String,
    /// the variant is the job as given
    pub current: bool,
    pub total_bytes: Option<u64>,
    /// with a card: whether it fits, and the headroom (negative: short by)
    pub fits: Option<bool>,
    pub headroom_bytes: Option<i128>,
    pub error: Option<String>,
}

/// One catalogue GPU against the total per GPU.
#[derive(Debug, Clone, Serialize)]
pub struct CardInfo {
    pub id: String,
    pub name: String,
    pub memory_bytes: u64,
    pub fits: bool,
    pub headroom_bytes: i128,
    /// the job computes in bf16 and the card has none (it would not run as given)
    pub lacks_bf16: bool,
    /// fits and runs as given: `fits && !lacks_bf16`
    pub holds: bool,
}

impl From<&CardFit> for CardInfo {
    fn from(c: &CardFit) -> Self {
        CardInfo {
            id: c.id.clone(),
            name: c.name.clone(),
            memory_bytes: c.memory_bytes,
            fits: c.fits,
            headroom_bytes: c.headroom_bytes,
            lacks_bf16: c.lacks_bf16,
            holds: c.fits && !c.lacks_bf16,
        }
    }
}

fn knob_words(k: &str) -> &'static str {
    match k {
        "context" => "context (tokens per sequence)",
        "concurrency" => "concurrency (resident sequences)",
        "micro_batch" => "micro-batch (sequences per GPU)",
        _ => "value",
    }
}

impl SweepInfo {
    /// The sweep as text, after the estimate's own.
    pub fn write_text(&self, out: &mut String) {
        let _ = writeln!(out, "\nSweep{}:", self.gpu.as_deref().map(|g| format!(" on {g}")).unwrap_or_default());
        for l in &self.largest {
            let what = knob_words(l.knob);
            match l.value {
                None => {
                    let _ = writeln!(out, "  largest {what}: none fits (not even {})", l.from);
                }
                Some(v) if l.at_limit => {
                    let _ = writeln!(out, "  largest {what}: {v}, the limit ({}); now {}", l.limit_reason, l.current);
                }
                Some(v) => {
                    let _ = writeln!(out, "  largest {what}: {v}; now {}", l.current);
                }
            }
        }
        if !self.variants.is_empty() {
            let _ = writeln!(out, "  the same job as:");
            for v in &self.variants {
                let mark = if v.current { " (as given)" } else { "" };
                match (&v.error, v.total_bytes) {
                    (Some(e), _) => {
                        let _ = writeln!(out, "    {} {}{mark}: {e}", v.flag, v.value);
                    }
                    (None, Some(t)) => {
                        let fit = match (v.fits, v.headroom_bytes) {
                            (Some(true), Some(h)) => format!(" — fits, {} headroom", signed_bytes(h)),
                            (Some(false), Some(h)) => {
                                format!(
                                    " — does not fit, short by {}",
                                    bytes(h.unsigned_abs().min(u64::MAX as u128) as u64)
                                )
                            }
                            _ => String::new(),
                        };
                        let _ = writeln!(
                            out,
                            "    {} {:<6} {:>11} per GPU ({}){fit}{mark}",
                            v.flag,
                            v.value,
                            bytes(t),
                            v.label
                        );
                    }
                    (None, None) => {}
                }
            }
        }
        let holds: Vec<String> =
            self.cards.iter().filter(|c| c.holds).map(|c| format!("{} ({})", c.id, bytes(c.memory_bytes))).collect();
        let _ = writeln!(
            out,
            "  catalogue GPUs that hold it: {}",
            if holds.is_empty() { "none".to_string() } else { holds.join(", ") }
        );
        let no_bf16: Vec<&str> = self.cards.iter().filter(|c| c.fits && c.lacks_bf16).map(|c| c.id.as_str()).collect();
        if !no_bf16.is_empty() {
            let _ = writeln!(out, "  large enough but without bf16 (the job computes in bf16): {}", no_bf16.join(", "));
        }
    }
}
