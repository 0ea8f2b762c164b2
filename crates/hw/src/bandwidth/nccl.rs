//! nccl-tests `all_reduce_perf`, `all_gather_perf`, `alltoall_perf` (and the
//! other `*_perf`) output, on one host or many.
//!
//! Layout (NVIDIA/nccl-tests src/util.cu; fixtures in tests/fixtures/bandwidth
//! and tests/fixtures/fabric): a `# nThread 1 nGpus 8 minBytes …` line (newer
//! releases first print `# Collective test starting: all_reduce_perf`),
//! `#  Rank  0 Group  0 Pid 4349 on host device  0 [0x01] NVIDIA A100 80GB
//! PCIe` lines, a column header, one row per size: `size count type redop
//! root time algbw busbw #wrong` out of place then `time algbw busbw #wrong`
//! in place, then `# Avg bus bandwidth : 2.05774`. The columns are found by
//! their names in the header, so older releases (no `redop` or `root`, an
//! `error` column instead of `#wrong`), `-C` (`cputime`), `-I` (per-iteration
//! columns after each `#wrong`) and `-S` (a timestamp at the end) all read.
//! NCCL INFO/WARN log lines interleaved by `NCCL_DEBUG` are skipped.
//!
//! busbw is algbw times a factor of the collective and the rank count n
//! (nccl-tests doc/PERFORMANCE.md): 2(n−1)/n for all-reduce, (n−1)/n for
//! all-gather, reduce-scatter and all-to-all, 1 for broadcast and reduce.
//! The parser checks it, so a table that is not the collective's output, or
//! was edited, is refused rather than judged.

use serde::Serialize;

use super::rate;
use crate::clean::{escape_controls, normalize_newlines};
use crate::error::HwError;
use crate::machine::MAX_GPUS;

/// Rows accepted (a run from 8 B to 16 GiB by doubling has 32).
pub const MAX_ROWS: usize = 4096;
/// Ranks accepted (a multi-node run lists every rank).
pub const MAX_RANKS: usize = 65536;

/// The collective a report measures, from the test binary's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
    SendRecv,
}

impl Collective {
    /// `all_reduce_perf` (or `all_reduce_perf_mpi`) → all-reduce.
    pub fn from_test(name: &str) -> Option<Collective> {
        Some(match name.trim_end_matches("_mpi").trim_end_matches("_perf") {
            "all_reduce" => Collective::AllReduce,
            "all_gather" => Collective::AllGather,
            "reduce_scatter" => Collective::ReduceScatter,
            "alltoall" => Collective::AllToAll,
            "broadcast" => Collective::Broadcast,
            "reduce" => Collective::Reduce,
            "sendrecv" => Collective::SendRecv,
            _ => return None,
        })
    }

    /// busbw ÷ algbw for `n` ranks (nccl-tests doc/PERFORMANCE.md, "Summary").
    pub fn bus_factor(self, n: usize) -> f64 {
        let n = n.max(1) as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => (n - 1.0) / n,
            Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
        }
    }

    /// The factor as a formula, for messages.
    pub fn factor_formula(self) -> &'static str {
        match self {
            Collective::AllReduce => "2(n−1)/n",
            Collective::AllGather | Collective::ReduceScatter | Collective::AllToAll => "(n−1)/n",
            Collective::Broadcast | Collective::Reduce | Collective::SendRecv => "1",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Collective::AllReduce => "all-reduce",
            Collective::AllGather => "all-gather",
            Collective::ReduceScatter => "reduce-scatter",
            Collective::AllToAll => "all-to-all",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::SendRecv => "send/recv",
        }
    }
}

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
    /// the test binary, when the file names it (`all_reduce_perf`)
    pub test: Option<String>,
    /// the collective the test binary measures
    pub collective: Option<Collective>,
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

    /// The largest size measured.
    pub fn max_size(&self) -> Option<u64> {
        self.rows.iter().map(|r| r.size_bytes).max()
    }
}

/// A `#wrong` cell: a count (`%6g` prints large ones as `1e+06`), `N/A`
/// (validation off: 0), or, in the `error` column of early releases, the
/// largest relative error (`1e-07`): not a count, 0.
fn wrong_cell(cell: &str, error_column: bool) -> Option<u64> {
    if cell == "N/A" {
        return Some(0);
    }
    if let Ok(n) = cell.parse::<u64>() {
        return Some(n);
    }
    let v: f64 = cell.parse().ok()?;
    if !(v.is_finite() && v >= 0.0) {
        return None;
    }
    if error_column {
        Some(0)
    } else {
        (v <= u64::MAX as f64 / 2.0).then(|| v.round() as u64)
    }
}

/// Where the judged columns are in a row, from the header's names: the
/// out-of-place and in-place blocks (`time algbw busbw #wrong`, plus the
/// four per-iteration columns of `-I`) are the last cells of a row, so
/// they are counted from the right: leading columns vary (`redop` and
/// `root` absent in early releases, `redop` printed empty by early
/// `alltoall_perf`, as in NVIDIA/nccl-tests#78).
struct Columns {
    /// cells per block
    block: usize,
    /// offsets within a block
    time: usize,
    algbw: usize,
    busbw: usize,
    wrong: usize,
    /// the `#wrong` column is the `error` column of early releases
    error_column: bool,
}

fn columns(header: &str) -> Option<Columns> {
    let toks: Vec<&str> = header.split_whitespace().filter(|t| *t != "timestamp").collect();
    if toks.first() != Some(&"size") {
        return None;
    }
    let starts: Vec<usize> =
        toks.iter().enumerate().filter(|(_, t)| matches!(**t, "time" | "cputime")).map(|(i, _)| i).collect();
    let [a, b] = starts[..] else { return None };
    let block = b - a;
    if block < 4 || b + block != toks.len() {
        return None;
    }
    let first = &toks[a..b];
    let at = |names: &[&str]| first.iter().position(|t| names.contains(t));
    let wrong = at(&["#wrong"]);
    let c = Columns {
        block,
        time: 0,
        algbw: at(&["algbw"])?,
        busbw: at(&["busbw"])?,
        wrong: wrong.or_else(|| at(&["error"]))?,
        error_column: wrong.is_none(),
    };
    // the second block names the same columns in the same places
    let second = &toks[b..];
    (second[c.algbw] == "algbw" && second[c.busbw] == "busbw").then_some(c)
}

/// Parse nccl-tests output.
pub fn parse_nccl(text: &str, file: &str) -> Result<NcclTest, HwError> {
    let text = normalize_newlines(text);
    let mut test = None;
    let mut ranks: Vec<Rank> = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    let mut avg = None;
    let mut cols: Option<Columns> = None;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let t = raw.trim();
        if test.is_none() {
            test = test_name(t);
        }
        let Some(body) = t.strip_prefix('#') else {
            // a data row: starts with the size; NCCL log lines start with a host name
            let toks: Vec<&str> = t.split_whitespace().collect();
            let Some(c) = &cols else { continue };
            if toks.first().is_none_or(|f| !f.bytes().all(|b| b.is_ascii_digit())) {
                continue;
            }
            if rows.len() >= MAX_ROWS {
                return Err(HwError::invalid(file, format!("more than {MAX_ROWS} rows")));
            }
            rows.push(row(&toks, c, file, ln, raw)?);
            continue;
        };
        let b = body.trim();
        if b.contains("busbw") {
            // the column header; another comment naming busbw leaves the columns as they were
            if let Some(c) = columns(b) {
                cols = Some(c);
            }
        } else if let Some(v) = b.strip_prefix("Avg bus bandwidth") {
            // `: 70.742 ` then, on newer releases with -c, `OK` or `FAILED`
            let v = v.trim_start().trim_start_matches(':').split_whitespace().next().unwrap_or("");
            avg = Some(rate(v, 1.0, file, ln, raw)?);
        } else if let Some(rest) = b.strip_prefix("Rank") {
            if ranks.len() >= MAX_RANKS {
                return Err(HwError::invalid(file, format!("more than {MAX_RANKS} ranks")));
            }
            ranks.push(rank(rest, file, ln, raw)?);
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
    let collective = test.as_deref().and_then(Collective::from_test);
    let r = NcclTest { test, collective, ranks, rows, avg_busbw: avg };
    check_bus_factor(&r, file)?;
    Ok(r)
}

/// The test binary a line names: `# Collective test starting: all_gather_perf`
/// (newer releases) or a command line with a word ending `_perf`.
fn test_name(line: &str) -> Option<String> {
    if let Some(n) = line.strip_prefix('#').map(str::trim).and_then(|b| b.strip_prefix("Collective test starting:")) {
        let n = n.trim();
        return (!n.is_empty()).then(|| escape_controls(&n.chars().take(64).collect::<String>()));
    }
    line.split_whitespace().find_map(|w| {
        let base = w.rsplit('/').next()?;
        let base = base.trim_end_matches("_mpi");
        base.ends_with("_perf").then(|| escape_controls(&base.chars().take(64).collect::<String>()))
    })
}

/// `#  Rank  0 Group  0 Pid 4349 on host device  0 [0x01] NVIDIA A100 80GB PCIe` (host may be empty).
fn rank(rest: &str, file: &str, ln: usize, raw: &str) -> Result<Rank, HwError> {
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
    if device as usize >= MAX_GPUS {
        return Err(HwError::invalid(file, format!("line {ln}: device index {device}; at most {MAX_GPUS} per host")));
    }
    Ok(Rank {
        rank,
        host: escape_controls(&w[on + 1..dev].join(" ")),
        device,
        name: escape_controls(&w[dev + 3..].join(" ")),
    })
}

/// `-S` ends a row with the date and the time (`2026-07-09 16:03:21`).
fn is_timestamp(date: &str, time: &str) -> bool {
    let digits = |s: &str, sep: char, parts: usize| {
        let p: Vec<&str> = s.split(sep).collect();
        p.len() == parts && p.iter().all(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()))
    };
    digits(date, '-', 3) && digits(time, ':', 3)
}

/// One size row: the two blocks are its last cells (after a `-S`
/// timestamp, if any); before them at least the size, count and type.
fn row(toks: &[&str], c: &Columns, file: &str, ln: usize, raw: &str) -> Result<Row, HwError> {
    let mut cells = toks;
    if let [rest @ .., date, time] = cells {
        if is_timestamp(date, time) {
            cells = rest;
        }
    }
    if cells.len() < 2 * c.block + 3 || cells.len() > 2 * c.block + 5 {
        let expected = format!(
            "size count type [redop] [root], then two blocks of {} cells (time algbw busbw #wrong…) as the header names",
            c.block
        );
        return Err(HwError::syntax(file, ln, expected, raw));
    }
    let out = cells.len() - 2 * c.block;
    let inp = out + c.block;
    let size_bytes = cells[0].parse().map_err(|_| HwError::syntax(file, ln, "a size in bytes", raw))?;
    let num = |j: usize| rate(cells[j], 1.0, file, ln, raw);
    let (wo, wi) = (wrong_cell(cells[out + c.wrong], c.error_column), wrong_cell(cells[inp + c.wrong], c.error_column));
    let (Some(wo), Some(wi)) = (wo, wi) else {
        return Err(HwError::syntax(file, ln, "#wrong counts (a number or N/A)", raw));
    };
    // times must be numbers too (they are not judged): microseconds, finite, not negative
    for j in [out + c.time, inp + c.time] {
        let ok = cells[j].parse::<f64>().is_ok_and(|v| v.is_finite() && (0.0..=1e12).contains(&v));
        if !ok {
            return Err(HwError::syntax(file, ln, "a time in microseconds", raw));
        }
    }
    Ok(Row {
        size_bytes,
        algbw_out: num(out + c.algbw)?,
        busbw_out: num(out + c.busbw)?,
        algbw_in: num(inp + c.algbw)?,
        busbw_in: num(inp + c.busbw)?,
        wrong: wo.saturating_add(wi),
    })
}

/// The last digit a rate cell shows: `%6.2f` up to 999.99, then one
/// decimal, then none (nccl-tests src/util.cu `getFloatStr`, width 6).
fn printed_step(v: f64) -> f64 {
    if v >= 10_000.0 {
        1.0
    } else if v >= 1000.0 {
        0.1
    } else {
        0.01
    }
}

/// busbw = algbw × the collective's factor (nccl-tests doc/PERFORMANCE.md).
/// Both columns are rounded as printed, so the check allows the last digit
/// of each (the algbw's scaled by the factor) plus 2%. A report that does not name its
/// test is checked as all-reduce, the default of every acceptance routine.
fn check_bus_factor(r: &NcclTest, file: &str) -> Result<(), HwError> {
    if r.ranks.is_empty() || (r.test.is_some() && r.collective.is_none()) {
        return Ok(());
    }
    let coll = r.collective.unwrap_or(Collective::AllReduce);
    let n = r.ranks.len();
    let factor = coll.bus_factor(n);
    let fits = |alg: f64, bus: f64, f: f64| {
        let want = alg * f;
        (bus - want).abs() <= 0.02 * want + printed_step(bus) + printed_step(alg) * f
    };
    // Before June 2020 all_gather_perf and reduce_scatter_perf folded
    // (n−1)/n into algbw and printed busbw = algbw (NVIDIA/nccl-tests#45).
    let legacy = matches!(coll, Collective::AllGather | Collective::ReduceScatter)
        && r.rows.iter().all(|x| fits(x.algbw_out, x.busbw_out, 1.0) && fits(x.algbw_in, x.busbw_in, 1.0));
    if legacy {
        return Ok(());
    }
    for row in &r.rows {
        for (alg, bus) in [(row.algbw_out, row.busbw_out), (row.algbw_in, row.busbw_in)] {
            let want = alg * factor;
            if !fits(alg, bus, factor) {
                return Err(HwError::invalid(
                    file,
                    format!(
                        "size {}: busbw {bus} is not algbw {alg} × {} = {want:.2} for the {n} ranks listed; \
                         not {} output, or edited",
                        row.size_bytes,
                        coll.factor_formula(),
                        r.test.as_deref().unwrap_or("all-reduce")
                    ),
                ));
            }
        }
    }
    Ok(())
}
