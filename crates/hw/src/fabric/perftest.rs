//! perftest reports (linux-rdma/perftest): `ib_write_bw`, `ib_read_bw`,
//! `ib_send_bw` and the latency tests `ib_send_lat`, `ib_write_lat`,
//! `ib_read_lat`.
//!
//! Layout (perftest src/perftest_parameters.h `RESULT_FMT*`, `REPORT_FMT*`):
//! a title (`RDMA_Write BW Test`, `Send Latency Test`, `RDMA_Write
//! Bidirectional BW Test`), settings as `Key : value` pairs two to a line
//! (`Dual-port : OFF\t\tDevice : mlx5_0`, `Link type : IB`), then a header
//! `#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]`
//! (or `[MB/sec]` / `[MiB/sec]`) or `#bytes #iterations t_min[usec]
//! t_max[usec] t_typical[usec] …`, then one row per message size. Older
//! releases print no `MsgRate` column and fewer settings (fixture
//! `jebtang-send-bw-old`).
//!
//! Units: `Gb/sec` is 10^9 bits per second; `MB/sec` and `MiB/sec` are
//! both 2^20 bytes per second (perftest_parameters.c: `format_factor =
//! 0x100000` unless `--report_gbits`; the label was corrected to `MiB` in
//! 2024, commit 1d202bb "Display proper unit for MiB/sec results").

use serde::Serialize;

use super::LinkLayer;
use crate::clean::{escape_controls, normalize_newlines};
use crate::error::HwError;

/// Rows accepted (`-a` sweeps 2 B to 8 MiB: 23 rows).
pub const MAX_PERFTEST_ROWS: usize = 4096;

/// What the test measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Bandwidth,
    Latency,
}

/// The RDMA operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Write,
    Read,
    Send,
    Atomic,
    Unknown,
}

/// One bandwidth row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BwRow {
    pub bytes: u64,
    pub iterations: u64,
    /// Gb/s (0 when the run did not measure the peak)
    pub peak_gbps: f64,
    pub average_gbps: f64,
}

/// One latency row, microseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatRow {
    pub bytes: u64,
    pub iterations: u64,
    pub min_us: f64,
    pub max_us: f64,
    pub typical_us: f64,
    /// absent in early releases
    pub average_us: Option<f64>,
}

/// A parsed perftest report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Perftest {
    /// the title as printed (`RDMA_Write BW Test`)
    pub title: String,
    pub metric: Metric,
    pub operation: Operation,
    /// both directions at once (`-b`): the figure is the sum of both
    pub bidirectional: bool,
    /// `Device : mlx5_0`
    pub device: Option<String>,
    /// `Link type : IB` / `Ethernet`
    pub link_layer: LinkLayer,
    pub bandwidth: Vec<BwRow>,
    pub latency: Vec<LatRow>,
}

impl Perftest {
    /// The best average bandwidth over the sizes, Gb/s.
    pub fn best_average_gbps(&self) -> Option<(f64, u64)> {
        self.bandwidth.iter().map(|r| (r.average_gbps, r.bytes)).max_by(|a, b| a.0.total_cmp(&b.0))
    }

    /// The typical latency of the smallest message, µs.
    pub fn smallest_typical_us(&self) -> Option<(f64, u64)> {
        self.latency.iter().min_by_key(|r| r.bytes).map(|r| (r.typical_us, r.bytes))
    }
}

/// Bandwidth unit of the header: Gb/s per cell unit.
fn unit_gbps(header: &str) -> Option<f64> {
    if header.contains("[Gb/sec]") {
        Some(1.0)
    } else if header.contains("[MB/sec]") || header.contains("[MiB/sec]") {
        Some((1u64 << 20) as f64 * 8.0 / 1e9)
    } else {
        None
    }
}

fn title_of(t: &str) -> Option<(Metric, Operation, bool)> {
    let metric = if t.ends_with("BW Test") {
        Metric::Bandwidth
    } else if t.ends_with("Latency Test") {
        Metric::Latency
    } else {
        return None;
    };
    let first = t.split_whitespace().next().unwrap_or("");
    let op = match first {
        "RDMA_Write" => Operation::Write,
        "RDMA_Read" => Operation::Read,
        "Send" => Operation::Send,
        "Atomic" | "Atomic_Fetch_and_Add" | "Atomic_Compare_and_Swap" => Operation::Atomic,
        _ => Operation::Unknown,
    };
    Some((metric, op, t.contains("Bidirectional")))
}

fn cell(s: &str, file: &str, ln: usize, raw: &str, what: &str) -> Result<f64, HwError> {
    let v: f64 = s.parse().map_err(|_| HwError::syntax(file, ln, what.to_string(), raw))?;
    if !(v.is_finite() && (0.0..=1e9).contains(&v)) {
        return Err(HwError::syntax(file, ln, format!("{what} between 0 and 10^9"), raw));
    }
    Ok(v)
}

/// Parse one perftest report.
pub fn parse_perftest(text: &str, file: &str) -> Result<Perftest, HwError> {
    let text = normalize_newlines(text);
    let mut title: Option<(String, Metric, Operation, bool)> = None;
    let mut device = None;
    let mut link_layer = LinkLayer::Unknown;
    let mut unit: Option<f64> = None;
    let mut lat_cols: Option<usize> = None;
    let mut bandwidth = Vec::new();
    let mut latency = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let t = raw.trim();
        if title.is_none() {
            if let Some((m, o, b)) = title_of(t) {
                title = Some((escape_controls(&t.chars().take(80).collect::<String>()), m, o, b));
                continue;
            }
        }
        if t.starts_with("#bytes") {
            if t.contains("t_typical") || t.contains("t_min") {
                // #bytes #iterations t_min t_max t_typical [t_avg …]
                lat_cols = Some(if t.contains("t_avg") { 6 } else { 5 });
                unit = None;
            } else {
                unit = Some(unit_gbps(t).ok_or_else(|| {
                    HwError::syntax(file, ln, "a bandwidth header in [Gb/sec], [MB/sec] or [MiB/sec]", raw)
                })?);
                lat_cols = None;
            }
            continue;
        }
        // settings: `Key : value` pairs, two to a line, separated by tabs
        if t.contains(" : ") || t.contains(":\t") {
            for pair in t.split('\t').filter(|p| !p.trim().is_empty()) {
                if let Some((k, v)) = pair.split_once(':') {
                    match k.trim() {
                        "Device" => device = Some(escape_controls(&v.trim().chars().take(64).collect::<String>())),
                        "Link type" => link_layer = LinkLayer::parse(v),
                        _ => {}
                    }
                }
            }
            continue;
        }
        let toks: Vec<&str> = t.split_whitespace().collect();
        if toks.first().is_none_or(|f| !f.bytes().all(|b| b.is_ascii_digit())) {
            continue;
        }
        if bandwidth.len() + latency.len() >= MAX_PERFTEST_ROWS {
            return Err(HwError::invalid(file, format!("more than {MAX_PERFTEST_ROWS} rows")));
        }
        let int = |s: &str, what: &str| s.parse::<u64>().map_err(|_| HwError::syntax(file, ln, what.to_string(), raw));
        if let Some(u) = unit {
            if toks.len() < 4 {
                return Err(HwError::syntax(file, ln, "#bytes #iterations BW-peak BW-average [MsgRate]", raw));
            }
            bandwidth.push(BwRow {
                bytes: int(toks[0], "a message size in bytes")?,
                iterations: int(toks[1], "an iteration count")?,
                peak_gbps: cell(toks[2], file, ln, raw, "a peak bandwidth")? * u,
                average_gbps: cell(toks[3], file, ln, raw, "an average bandwidth")? * u,
            });
        } else if let Some(n) = lat_cols {
            if toks.len() < n {
                return Err(HwError::syntax(file, ln, "#bytes #iterations t_min t_max t_typical [t_avg …]", raw));
            }
            latency.push(LatRow {
                bytes: int(toks[0], "a message size in bytes")?,
                iterations: int(toks[1], "an iteration count")?,
                min_us: cell(toks[2], file, ln, raw, "t_min")?,
                max_us: cell(toks[3], file, ln, raw, "t_max")?,
                typical_us: cell(toks[4], file, ln, raw, "t_typical")?,
                average_us: if n > 5 { Some(cell(toks[5], file, ln, raw, "t_avg")?) } else { None },
            });
        }
    }
    if bandwidth.is_empty() && latency.is_empty() {
        if let Some(e) = crate::foreign::refuse(&text, file, "perftest") {
            return Err(e);
        }
        return Err(HwError::invalid(
            file,
            "no result rows (`#bytes #iterations BW peak… / t_min…` header, then rows); is this perftest output?",
        ));
    }
    let (title, metric, operation, bidirectional) = title.unwrap_or_else(|| {
        let metric = if bandwidth.is_empty() { Metric::Latency } else { Metric::Bandwidth };
        ("perftest".into(), metric, Operation::Unknown, false)
    });
    Ok(Perftest { title, metric, operation, bidirectional, device, link_layer, bandwidth, latency })
}
