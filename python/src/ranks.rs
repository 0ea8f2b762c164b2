//! The cross-rank report of `vramfit.torch.on_oom`: every rank's snapshot
//! diagnosis (the `vramfit diagnose --json` documents) side by side, and
//! whether the ranks' peaks differ by more than data parallelism explains.
//!
//! Data-parallel ranks run the same model on same-shaped batches, so their
//! peaks should agree to within the allocator's rounding; a rank far above
//! the others is the one to look at (rank 0 gathering a checkpoint or
//! running evaluation, a pipeline stage holding the embeddings and the
//! head, a longer sequence in an unpadded batch, a ZeRO bucket that is not
//! sharded). The threshold below is a judgement, stated in the report.
//! Tested from Python (python/tests/test_api.py, `merge_ranks`): this crate
//! links only as an extension module.

use serde::Serialize;
use serde_json::Value;

/// Ranks are flagged as imbalanced when the highest peak exceeds the lowest
/// by more than this fraction of the highest. 10 %: well above the spread of
/// identical data-parallel ranks (allocator rounding to 2 MiB / 20 MiB
/// segments and per-rank caching), well below a pipeline stage holding an
/// extra embedding table or rank 0 gathering a full state dict.
pub const IMBALANCE_FRACTION_PERCENT: u64 = 10;

#[derive(Debug, Serialize, PartialEq)]
pub struct RankRow {
    pub rank: u64,
    pub device: Option<u64>,
    /// allocated bytes at the snapshot's peak (trace)
    pub peak_allocated_bytes: Option<u64>,
    pub peak_reserved_bytes: Option<u64>,
    /// at the dump
    pub allocated_bytes: Option<u64>,
    pub reserved_bytes: Option<u64>,
    /// the allocation site that held the most at the peak
    pub top_site: Option<String>,
    pub top_site_bytes: Option<u64>,
    /// the last OOM the trace recorded: its class and the diagnosis's reasoning
    pub oom_requested_bytes: Option<u64>,
    pub oom_class: Option<String>,
    pub oom_reasoning: Option<String>,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Spread {
    pub min_rank: u64,
    pub min_bytes: u64,
    pub max_rank: u64,
    pub max_bytes: u64,
    pub spread_bytes: u64,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct RanksReport {
    pub schema: u32,
    pub ranks: Vec<RankRow>,
    /// over ranks whose snapshot has a peak
    pub peak_allocated: Option<Spread>,
    pub imbalance_threshold_percent: u64,
    pub imbalanced: bool,
    /// one sentence per finding
    pub findings: Vec<String>,
}

fn u(v: &Value) -> Option<u64> {
    v.as_u64()
}

fn row(rank: u64, doc: &Value) -> Result<RankRow, String> {
    if doc["kind"] != "snapshot" {
        return Err(format!("rank {rank}: the diagnosis is of a {} input, not a memory snapshot", doc["kind"]));
    }
    let devices = doc["diagnosis"]["report"]["devices"].as_array().cloned().unwrap_or_default();
    // the device that ran out, else the one with the highest peak
    let dev = devices
        .iter()
        .find(|d| d["ooms"].as_array().is_some_and(|o| !o.is_empty()))
        .or_else(|| devices.iter().max_by_key(|d| d["peak"]["allocated_bytes"].as_u64().unwrap_or(0)));
    let Some(dev) = dev else {
        return Ok(RankRow {
            rank,
            device: None,
            peak_allocated_bytes: None,
            peak_reserved_bytes: None,
            allocated_bytes: None,
            reserved_bytes: None,
            top_site: None,
            top_site_bytes: None,
            oom_requested_bytes: None,
            oom_class: None,
            oom_reasoning: None,
        });
    };
    let top = dev["sites"]
        .as_array()
        .and_then(|s| s.iter().max_by_key(|x| x["peak_bytes"].as_u64().unwrap_or(0)))
        .cloned()
        .unwrap_or(Value::Null);
    let oom = dev["ooms"].as_array().and_then(|o| o.last()).cloned().unwrap_or(Value::Null);
    Ok(RankRow {
        rank,
        device: u(&dev["device"]),
        peak_allocated_bytes: u(&dev["peak"]["allocated_bytes"]),
        peak_reserved_bytes: u(&dev["peak"]["reserved_bytes"]),
        allocated_bytes: u(&dev["allocated_bytes"]),
        reserved_bytes: u(&dev["reserved_bytes"]),
        top_site: top["label"].as_str().map(str::to_string),
        top_site_bytes: u(&top["peak_bytes"]),
        oom_requested_bytes: u(&oom["requested_bytes"]),
        oom_class: oom["class"].as_str().map(str::to_string),
        oom_reasoning: oom["reasoning"].as_str().map(str::to_string),
    })
}

fn mib(b: u64) -> String {
    vramfit_report::format::bytes(b)
}

/// The report over `(rank, diagnose --json document)` pairs.
pub fn merge(ranks: &[(u64, Value)]) -> Result<RanksReport, String> {
    let mut rows = ranks.iter().map(|(r, d)| row(*r, d)).collect::<Result<Vec<_>, _>>()?;
    rows.sort_by_key(|r| r.rank);
    let peaks: Vec<(u64, u64)> = rows.iter().filter_map(|r| Some((r.rank, r.peak_allocated_bytes?))).collect();
    let spread = match (peaks.iter().min_by_key(|p| p.1), peaks.iter().max_by_key(|p| p.1)) {
        (Some(lo), Some(hi)) => {
            Some(Spread { min_rank: lo.0, min_bytes: lo.1, max_rank: hi.0, max_bytes: hi.1, spread_bytes: hi.1 - lo.1 })
        }
        _ => None,
    };
    let mut findings = Vec::new();
    // spread > max × 10 % ⇔ spread × 100 > max × 10 (u128: no overflow)
    let imbalanced = peaks.len() >= 2
        && spread.as_ref().is_some_and(|s| {
            (s.spread_bytes as u128) * 100 > (s.max_bytes as u128) * IMBALANCE_FRACTION_PERCENT as u128
        });
    if let Some(s) = &spread {
        if imbalanced {
            findings.push(format!(
                "ranks are imbalanced: rank {} peaked at {}, rank {} at {} ({} apart, more than {} % of the highest): look at what rank {} does that the others do not (evaluation, checkpoint gathering, a pipeline stage with the embeddings or the head, longer sequences)",
                s.max_rank,
                mib(s.max_bytes),
                s.min_rank,
                mib(s.min_bytes),
                mib(s.spread_bytes),
                IMBALANCE_FRACTION_PERCENT,
                s.max_rank
            ));
        } else if peaks.len() >= 2 {
            findings.push(format!(
                "ranks are balanced: peaks from {} (rank {}) to {} (rank {}), within {} % of the highest: the job as a whole needs more memory per GPU, not one rank",
                mib(s.min_bytes),
                s.min_rank,
                mib(s.max_bytes),
                s.max_rank,
                IMBALANCE_FRACTION_PERCENT
            ));
        }
    }
    let oomed: Vec<String> = rows.iter().filter(|r| r.oom_class.is_some()).map(|r| r.rank.to_string()).collect();
    if !oomed.is_empty() {
        findings.push(format!("out of memory on rank{} {}", if oomed.len() == 1 { "" } else { "s" }, oomed.join(", ")));
    }
    Ok(RanksReport {
        schema: 1,
        ranks: rows,
        peak_allocated: spread,
        imbalance_threshold_percent: IMBALANCE_FRACTION_PERCENT,
        imbalanced,
        findings,
    })
}
