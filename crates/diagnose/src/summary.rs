//! `torch.cuda.memory_summary()` text: the table parsed into numbers, and
//! what they say about fragmentation and pressure.
//!
//! Layout: torch/cuda/memory.py `memory_summary` (pytorch-formats.md (b)):
//! `|`-bordered rows `| <metric> | cur | peak | tot alloc | tot freed |`,
//! each metric followed by `from large pool` / `from small pool` rows unless
//! abbreviated. Size cells are `f"{n:6d} {unit}"` (integer-divided, so each
//! is a floor: tolerance is one unit), count cells `f"{n:7d} {K|M}"`.

use crate::classify::{b, OomClass};
use crate::size::unit_multiplier;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pool {
    All,
    Large,
    Small,
}

/// One cell: bytes (floor of the printed unit) or a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cell {
    pub value: u64,
    /// the printed figure is a floor: the true value is below value + unit
    pub unit: u64,
    pub is_bytes: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    pub metric: String,
    pub pool: Pool,
    pub current: Cell,
    pub peak: Cell,
    pub total_allocated: Cell,
    pub total_freed: Cell,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemorySummary {
    pub device: Option<u32>,
    pub cuda_ooms: Option<u64>,
    pub cudamalloc_retries: Option<u64>,
    pub rows: Vec<Row>,
    /// 1-based line of the title
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryVerdict {
    pub class: Option<OomClass>,
    pub findings: Vec<String>,
    pub fixes: Vec<String>,
}

fn parse_cell(s: &str) -> Option<Cell> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, rest) = t.split_at(split);
    let n: u64 = num.parse().ok()?;
    let rest = rest.trim();
    if rest.is_empty() {
        return Some(Cell { value: n, unit: 1, is_bytes: false });
    }
    if let Some(m) = match rest {
        "K" => Some(1000u64),
        "M" => Some(1_000_000),
        _ => None,
    } {
        return Some(Cell { value: n.checked_mul(m)?, unit: m, is_bytes: false });
    }
    let m = unit_multiplier(rest)?;
    Some(Cell { value: n.checked_mul(m)?, unit: m, is_bytes: true })
}

/// Find and parse the first summary in `text`.
pub fn parse(text: &str) -> Option<MemorySummary> {
    let mut lines = text.lines().enumerate().skip_while(|(_, l)| !l.contains("PyTorch CUDA memory summary"));
    let (title_i, title) = lines.next()?;
    let device = title.split("device ID").nth(1).and_then(|r| r.trim().trim_end_matches('|').trim().parse().ok());
    let mut s =
        MemorySummary { device, cuda_ooms: None, cudamalloc_retries: None, rows: Vec::new(), line: title_i + 1 };
    let mut metric = String::new();
    for (_, l) in lines.take(80) {
        // tolerate "# " comment markers and logger prefixes before the table
        let t = match l.find('|') {
            Some(i) if i < MAX_PREFIX => l[i..].trim_end(),
            _ => l.trim(),
        };
        if t.starts_with("|===") && !s.rows.is_empty() {
            break;
        }
        if !t.starts_with('|') {
            if s.rows.is_empty() {
                continue;
            }
            break;
        }
        if t.contains("CUDA OOMs:") {
            for part in t.trim_matches('|').split('|') {
                let part = part.trim();
                if let Some(v) = part.strip_prefix("CUDA OOMs:") {
                    s.cuda_ooms = v.trim().parse().ok();
                } else if let Some(v) = part.strip_prefix("cudaMalloc retries:") {
                    s.cudamalloc_retries = v.trim().parse().ok();
                }
            }
            continue;
        }
        let cells: Vec<&str> = t.trim_matches('|').split('|').collect();
        if cells.len() != 5 {
            continue;
        }
        let name = cells[0].trim();
        if name == "Metric" {
            continue;
        }
        let (Some(c), Some(p), Some(a), Some(f)) =
            (parse_cell(cells[1]), parse_cell(cells[2]), parse_cell(cells[3]), parse_cell(cells[4]))
        else {
            continue;
        };
        let pool = match name {
            "from large pool" => Pool::Large,
            "from small pool" => Pool::Small,
            _ => {
                metric = name.to_string();
                Pool::All
            }
        };
        s.rows.push(Row { metric: metric.clone(), pool, current: c, peak: p, total_allocated: a, total_freed: f });
    }
    (!s.rows.is_empty()).then_some(s)
}

impl MemorySummary {
    pub fn row(&self, metrics: &[&str]) -> Option<&Row> {
        self.rows.iter().find(|r| r.pool == Pool::All && metrics.contains(&r.metric.as_str()))
    }

    /// What the figures say.
    pub fn verdict(&self) -> SummaryVerdict {
        let mut findings = Vec::new();
        let mut fixes = Vec::new();
        let alloc = self.row(&["Allocated memory"]);
        let reserved = self.row(&["GPU reserved memory", "Reserved memory"]);
        let nonrel = self.row(&["Non-releasable memory"]);
        let mut class = None;
        if let Some(n) = self.cuda_ooms.filter(|&n| n > 0) {
            findings.push(format!("{n} CUDA OOM(s) recorded in this process."));
        }
        if let Some(n) = self.cudamalloc_retries.filter(|&n| n > 0) {
            findings.push(format!(
                "{n} cudaMalloc retr{}: the allocator had to free its whole cache and try again, a synchronising stall that happens only at the memory limit.",
                if n == 1 { "y" } else { "ies" }
            ));
        }
        if let (Some(a), Some(r)) = (alloc, reserved) {
            let cached_now = r.current.value.saturating_sub(a.current.value);
            findings.push(format!(
                "Now: {} allocated of {} reserved ({} cached but unallocated).",
                b(a.current.value),
                b(r.current.value),
                b(cached_now)
            ));
            let gap_peak = r.peak.value.saturating_sub(a.peak.value);
            findings.push(format!(
                "Peaks: {} allocated, {} reserved; the peaks may fall at different moments, so their difference ({}) bounds the cache overhead at the allocated peak from below.",
                b(a.peak.value),
                b(r.peak.value),
                b(gap_peak)
            ));
            let frag_peak = nonrel.map(|n| n.peak.value).unwrap_or(0);
            if r.peak.value > 0 {
                let share = frag_peak as f64 / r.peak.value as f64;
                if let Some(n) = nonrel {
                    findings.push(format!(
                        "Non-releasable (free pieces of split blocks): {} now, {} at peak = {:.1}% of peak reserved.",
                        b(n.current.value),
                        b(n.peak.value),
                        share * 100.0
                    ));
                }
                let pressure = self.cuda_ooms.unwrap_or(0) > 0 || self.cudamalloc_retries.unwrap_or(0) > 0;
                if !pressure {
                    findings.push("No OOM and no cudaMalloc retry recorded: this process never hit the memory limit, so there is no cause to name.".to_string());
                } else if share >= FRAGMENTED_SHARE || gap_peak as f64 >= CACHE_GAP_SHARE * r.peak.value as f64 {
                    class = Some(OomClass::Fragmentation);
                    fixes.push(
                        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (PyTorch ≥ 2.1), else max_split_size_mb:128"
                            .to_string(),
                    );
                } else if self.cuda_ooms.unwrap_or(0) > 0 {
                    class = Some(OomClass::GenuineShortage);
                    findings.push(format!(
                        "Live tensors filled {:.1}% of the reserved peak: the cache was not the problem, the tensors were.",
                        a.peak.value as f64 * 100.0 / r.peak.value as f64
                    ));
                    fixes.push("reduce live tensors at the peak: activation checkpointing, smaller micro-batch, 8-bit optimizer, sharding".to_string());
                }
            }
            if cached_now >= r.current.value / 2 && cached_now >= (1 << 30) {
                findings.push(format!(
                    "{} is cached while only {} is in use: other processes on this card cannot use it (torch.cuda.empty_cache() between phases returns it).",
                    b(cached_now),
                    b(a.current.value)
                ));
            }
        }
        if let Some(o) = self.row(&["Oversize allocations"]).filter(|o| o.peak.value > 0) {
            findings.push(format!(
                "{} oversize allocation(s) at peak (max_split_size_mb is set; those blocks are never split).",
                o.peak.value
            ));
        }
        SummaryVerdict { class, findings, fixes }
    }
}

/// Longest prefix (comment marker, logger header) before a table row.
const MAX_PREFIX: usize = 120;
/// Non-releasable bytes at this share of peak reserved mean fragmentation.
pub const FRAGMENTED_SHARE: f64 = 0.10;
/// Reserved peak this much above allocated peak means fragmentation.
pub const CACHE_GAP_SHARE: f64 = 0.20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells() {
        assert_eq!(parse_cell(" 682537 KiB ").unwrap().value, 682_537 * 1024);
        assert_eq!(parse_cell("     502    ").unwrap(), Cell { value: 502, unit: 1, is_bytes: false });
        assert_eq!(parse_cell("  1234 K ").unwrap().value, 1_234_000);
        assert_eq!(parse_cell("      0 B  ").unwrap().value, 0);
        assert!(parse_cell("abc").is_none());
    }
}
