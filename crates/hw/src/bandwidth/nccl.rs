//! nccl-tests `all_reduce_perf` (and the other `*_perf`) output.
//!
//! Layout (NVIDIA/nccl-tests; fixtures in tests/fixtures/bandwidth): a
//! `# nThread 1 nGpus 8 minBytes …` line, `#  Rank  0 Group  0 Pid 4349 on
//! host device  0 [0x01] NVIDIA A100 80GB PCIe` lines, a column header, one
//! row per size: `size count type redop root time algbw busbw #wrong` out of
//! place then `time algbw busbw #wrong` in place (older releases have no
//! `redop` or `root` column), then `# Avg bus bandwidth : 2.05774`.
//! NCCL INFO/WARN log lines interleaved by `NCCL_DEBUG` are skipped.
//!
//! busbw is algbw times 2(n−1)/n for all-reduce over n ranks
//! (nccl-tests doc/PERFORMANCE.md): the parser checks it, so a table that
//! is not all-reduce output, or was edited, is refused rather than judged.

use serde::Serialize;

use super::rate;
use crate::clean::{escape_controls, normalize_newlines};
use crate::error::HwError;
use crate::machine::MAX_GPUS;

/// Rows accepted (a run from 8 B to 16 GiB by doubling has 32).
pub const MAX_ROWS: usize = 4096;
/// Ranks accepted (a multi-node run lists every rank).
pub const MAX_RANKS: usize = 65536;

/// One `# Rank` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rank {
    pub rank: u32,
    pub host: String,
    pub device: u32,
    pub name: String,
}

/// One size row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub size_bytes: u64,
    pub algbw_out: f64,
    pub busbw_out: f64,
    pub algbw_in: f64,
    pub busbw_in: f64,
    /// `#wrong` out of place plus in place (`N/A` counts 0)
    pub wrong: u64,
}

impl Row {
    pub fn busbw(&self) -> f64 {
        self.busbw_out.max(self.busbw_in)
    }
}

/// A parsed nccl-tests report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NcclTest {
    /// the test binary, when the command line is in the file (`all_reduce_perf`)
    pub test: Option<String>,
    pub ranks: Vec<Rank>,
    pub rows: Vec<Row>,
    /// `# Avg bus bandwidth`, GB/s
    pub avg_busbw: Option<f64>,
}

impl NcclTest {
    /// Distinct hosts the ranks ran on.
    pub fn hosts(&self) -> Vec<&str> {
        let mut h: Vec<&str> = self.ranks.iter().map(|r| r.host.as_str()).collect();
        h.sort_unstable();
        h.dedup();
        h
    }

    /// The row with the highest bus bandwidth (out of or in place).
    pub fn peak(&self) -> Option<&Row> {
        self.rows.iter().max_by(|a, b| a.busbw().total_cmp(&b.busbw()))
    }
}

fn count(cell: &str) -> Option<u64> {
    if cell == "N/A" {
        Some(0)
    } else {
        cell.parse().ok()
    }
}

/// Parse nccl-tests output.
pub fn parse_nccl(text: &str, file: &str) -> Result<NcclTest, HwError> {
    let text = normalize_newlines(text);
    let mut test = None;
    let mut ranks: Vec<Rank> = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    let mut avg = None;
    let mut saw_header = false;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let t = raw.trim();
        if test.is_none() {
            if let Some(bin) = t.split_whitespace().find_map(|w| {
                let base = w.rsplit('/').next()?;
                base.ends_with("_perf").then(|| base.trim_end_matches("_mpi").to_string())
            }) {
                test = Some(escape_controls(&bin));
            }
        }
        let Some(body) = t.strip_prefix('#') else {
            // a data row: starts with the size; NCCL log lines start with a host name
            let toks: Vec<&str> = t.split_whitespace().collect();
            if !saw_header || toks.first().is_none_or(|f| !f.bytes().all(|b| b.is_ascii_digit())) {
                continue;
            }
            if rows.len() >= MAX_ROWS {
                return Err(HwError::invalid(file, format!("more than {MAX_ROWS} rows")));
            }
            // size count type [redop] [root] | time algbw busbw wrong | time algbw busbw wrong
            let expected = "`size count type redop root  time algbw busbw #wrong  time algbw busbw #wrong`";
            if toks.len() < 11 || toks.len() > 13 {
                return Err(HwError::syntax(file, ln, expected, raw));
            }
            let k = toks.len() - 8;
            let size_bytes = toks[0].parse().map_err(|_| HwError::syntax(file, ln, "a size in bytes", raw))?;
            let num = |j: usize| rate(toks[k + j], 1.0, file, ln, raw);
            let (wo, wi) = (count(toks[k + 3]), count(toks[k + 7]));
            let (Some(wo), Some(wi)) = (wo, wi) else {
                return Err(HwError::syntax(file, ln, "#wrong counts (a number or N/A)", raw));
            };
            // times must be numbers too (they are not judged)
            num(0)?;
            num(4)?;
            rows.push(Row {
                size_bytes,
                algbw_out: num(1)?,
                busbw_out: num(2)?,
                algbw_in: num(5)?,
                busbw_in: num(6)?,
                wrong: wo.saturating_add(wi),
            });
            continue;
        };
        let b = body.trim();
        if b.contains("busbw") {
            saw_header = true;
        } else if let Some(v) = b.strip_prefix("Avg bus bandwidth") {
            let v = v.trim_start().trim_start_matches(':').trim();
            avg = Some(rate(v, 1.0, file, ln, raw)?);
        } else if let Some(rest) = b.strip_prefix("Rank") {
            // `0 Group  0 Pid   4349 on        device  0 [0x01] NVIDIA A100 80GB PCIe` (host may be empty)
            let w: Vec<&str> = rest.split_whitespace().collect();
            let on = w.iter().position(|x| *x == "on");
            let dev = w.iter().position(|x| *x == "device");
            let bad = || HwError::syntax(file, ln, "`# Rank <r> … on <host> device <d> [<bus>] <name>`", raw);
            let (Some(on), Some(dev)) = (on, dev) else { return Err(bad()) };
            if dev < on || dev + 3 > w.len() {
                return Err(bad());
            }
            let rank: u32 = w.first().and_then(|r| r.parse().ok()).ok_or_else(bad)?;
            let device: u32 = w[dev + 1].parse().map_err(|_| bad())?;
            if device as usize >= MAX_GPUS || ranks.len() >= MAX_RANKS {
                return Err(HwError::invalid(
                    file,
                    format!("more than {MAX_RANKS} ranks or a device index past {MAX_GPUS}"),
                ));
            }
            ranks.push(Rank {
                rank,
                host: escape_controls(&w[on + 1..dev].join(" ")),
                device,
                name: escape_controls(&w[dev + 3..].join(" ")),
            });
        }
    }
    if rows.is_empty() {
        if let Some(e) = crate::foreign::refuse(&text, file, "--nccl") {
            return Err(e);
        }
        return Err(HwError::invalid(
            file,
            "no result rows (`# … busbw #wrong` header, then `size count type …` rows); is this nccl-tests `all_reduce_perf` output?",
        ));
    }
    let r = NcclTest { test, ranks, rows, avg_busbw: avg };
    check_all_reduce(&r, file)?;
    Ok(r)
}

/// busbw = algbw × 2(n−1)/n for all-reduce (nccl-tests doc/PERFORMANCE.md);
/// with both columns printed to two decimals the check allows the rounding
/// of both (±0.01 each, scaled) plus 2%.
fn check_all_reduce(r: &NcclTest, file: &str) -> Result<(), HwError> {
    if r.test.as_deref().is_some_and(|t| t != "all_reduce_perf") || r.ranks.is_empty() {
        return Ok(());
    }
    let n = r.ranks.len() as f64;
    let factor = 2.0 * (n - 1.0) / n;
    for row in &r.rows {
        for (alg, bus) in [(row.algbw_out, row.busbw_out), (row.algbw_in, row.busbw_in)] {
            let want = alg * factor;
            if (bus - want).abs() > 0.02 * want + 0.01 * (1.0 + factor) {
                return Err(HwError::invalid(
                    file,
                    format!(
                        "size {}: busbw {bus} is not algbw {alg} × 2(n−1)/n = {want:.2} for the {} ranks listed; \
                         not all-reduce output, or edited",
                        row.size_bytes,
                        r.ranks.len()
                    ),
                ));
            }
        }
    }
    Ok(())
}
