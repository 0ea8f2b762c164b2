//! CUDA samples `bandwidthTest` output.
//!
//! Layout (cuda-samples `Samples/1_Utilities/bandwidthTest`; fixtures in
//! tests/fixtures/bandwidth): ` Device 0: <name>` lines, then per measured
//! direction a section ` Host to Device Bandwidth, 1 Device(s)`, the memory
//! kind ` PINNED Memory Transfers` (or `PAGEABLE`), a unit header
//! `Transfer Size (Bytes)  Bandwidth(GB/s)` (`MB/s` in releases before
//! CUDA 11), and one `size  rate` row per size (one in quick mode, many in
//! range or shmoo mode). `--csv` prints instead lines such as
//! `bandwidthTest-H2D-Pinned, Bandwidth = 12150.7 MB/s, Size = 33554432 bytes, NumDevsUsed = 1`.

use serde::Serialize;

use super::rate;
use crate::clean::{escape_controls, normalize_newlines};
use crate::error::HwError;
use crate::machine::MAX_GPUS;

/// Rows accepted: a shmoo run prints ~80 sizes per direction.
pub const MAX_ROWS: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
}

impl Direction {
    pub fn label(self) -> &'static str {
        match self {
            Direction::HostToDevice => "host→device",
            Direction::DeviceToHost => "device→host",
            Direction::DeviceToDevice => "device→device",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HostMemory {
    /// page-locked host memory: what the link can do
    Pinned,
    /// ordinary host memory: bounded by a staging copy, not judged
    Pageable,
}

/// One measured row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transfer {
    pub direction: Direction,
    pub memory: HostMemory,
    /// devices the section says it used (`, 2 Device(s)`: the rate is their sum)
    pub devices: u32,
    pub size_bytes: u64,
    /// decimal GB/s
    pub gbs: f64,
}

/// A parsed `bandwidthTest` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BandwidthTest {
    /// `Device N: <name>` lines (index, name), names escaped
    pub devices: Vec<(u32, String)>,
    pub transfers: Vec<Transfer>,
    /// `Result = PASS` / `FAIL`, when printed
    pub passed: Option<bool>,
}

impl BandwidthTest {
    /// The best pinned rate in one direction (over sizes), with the number of devices.
    pub fn best(&self, d: Direction) -> Option<&Transfer> {
        self.transfers
            .iter()
            .filter(|t| t.direction == d && t.memory == HostMemory::Pinned)
            .max_by(|a, b| a.gbs.total_cmp(&b.gbs))
    }
}

fn direction_of(s: &str) -> Option<Direction> {
    let s = s.trim();
    [
        ("Host to Device Bandwidth", Direction::HostToDevice),
        ("Device to Host Bandwidth", Direction::DeviceToHost),
        ("Device to Device Bandwidth", Direction::DeviceToDevice),
    ]
    .into_iter()
    .find_map(|(p, d)| s.starts_with(p).then_some(d))
}

/// `, 2 Device(s)` at the end of a section header; 1 when absent.
fn devices_in(header: &str) -> Option<u32> {
    match header.split_once(',') {
        None => Some(1),
        Some((_, rest)) => rest.trim().strip_suffix("Device(s)")?.trim().parse().ok().filter(|&n| n > 0),
    }
}

/// Parse `bandwidthTest` output (normal or `--csv`).
pub fn parse_bandwidth_test(text: &str, file: &str) -> Result<BandwidthTest, HwError> {
    let text = normalize_newlines(text);
    let mut devices: Vec<(u32, String)> = Vec::new();
    let mut transfers: Vec<Transfer> = Vec::new();
    let mut passed = None;
    // current section: direction, devices, memory kind, scale to GB/s once the unit header is seen
    let mut section: Option<(Direction, u32)> = None;
    let mut memory: Option<HostMemory> = None;
    let mut scale: Option<f64> = None;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let t = raw.trim();
        if t.is_empty() {
            continue;
        }
        if transfers.len() >= MAX_ROWS {
            return Err(HwError::invalid(file, format!("more than {MAX_ROWS} bandwidth rows")));
        }
        if let Some(rest) =
            t.strip_prefix("Device ").filter(|r| r.split(':').next().is_some_and(|n| n.trim().parse::<u32>().is_ok()))
        {
            let (n, name) = rest.split_once(':').unwrap_or((rest, ""));
            let idx: u32 = n.trim().parse().map_err(|_| HwError::syntax(file, ln, "`Device <n>: <name>`", raw))?;
            if devices.len() >= MAX_GPUS {
                return Err(HwError::invalid(file, format!("more than {MAX_GPUS} devices")));
            }
            devices.push((idx, escape_controls(name.trim())));
            continue;
        }
        if let Some(d) = direction_of(t) {
            let n = devices_in(t)
                .ok_or_else(|| HwError::syntax(file, ln, "`<direction> Bandwidth, <n> Device(s)`", raw))?;
            section = Some((d, n));
            memory = None;
            scale = None;
            continue;
        }
        if t.ends_with("Memory Transfers") {
            memory = Some(if t.starts_with("PAGEABLE") { HostMemory::Pageable } else { HostMemory::Pinned });
            continue;
        }
        if t.starts_with("Transfer Size") {
            scale = Some(if t.contains("(MB/s)") {
                1e-3
            } else if t.contains("(GB/s)") {
                1.0
            } else {
                return Err(HwError::syntax(file, ln, "a unit header with Bandwidth(GB/s) or Bandwidth(MB/s)", raw));
            });
            continue;
        }
        if let Some(r) = t.strip_prefix("Result = ") {
            passed = Some(r.trim() == "PASS");
            continue;
        }
        if let Some(csv) = t.strip_prefix("bandwidthTest-") {
            transfers.push(csv_row(csv, file, ln, raw)?);
            continue;
        }
        let toks: Vec<&str> = t.split_whitespace().collect();
        if toks.first().is_some_and(|f| f.bytes().all(|b| b.is_ascii_digit())) {
            let (Some((direction, devs)), Some(scale)) = (section, scale) else {
                return Err(HwError::syntax(
                    file,
                    ln,
                    "a `<direction> Bandwidth` section and a `Transfer Size (Bytes) Bandwidth(GB/s)` header before rows",
                    raw,
                ));
            };
            if toks.len() != 2 {
                return Err(HwError::syntax(file, ln, "`<size in bytes> <bandwidth>`", raw));
            }
            let size_bytes = toks[0].parse().map_err(|_| HwError::syntax(file, ln, "a transfer size in bytes", raw))?;
            let gbs = rate(toks[1], scale, file, ln, raw)?;
            transfers.push(Transfer {
                direction,
                memory: memory.unwrap_or(HostMemory::Pinned),
                devices: devs,
                size_bytes,
                gbs,
            });
        }
    }
    if transfers.is_empty() {
        if let Some(e) = crate::foreign::refuse(&text, file, "--bandwidth") {
            return Err(e);
        }
        return Err(HwError::invalid(
            file,
            "no bandwidth rows (` Host to Device Bandwidth, 1 Device(s)` … `32000000  24.5`); is this CUDA samples `bandwidthTest` output?",
        ));
    }
    Ok(BandwidthTest { devices, transfers, passed })
}

/// `H2D-Pinned, Bandwidth = 12150.7 MB/s, Size = 33554432 bytes, NumDevsUsed = 1`
fn csv_row(csv: &str, file: &str, ln: usize, raw: &str) -> Result<Transfer, HwError> {
    let expected = "`bandwidthTest-<H2D|D2H|D2D>-<Pinned|Pageable>, Bandwidth = <x> <GB/s|MB/s>, Size = <n> bytes, NumDevsUsed = <k>`";
    let mut fields = csv.split(',').map(str::trim);
    let head = fields.next().unwrap_or("");
    let (dir, mem) = head.split_once('-').ok_or_else(|| HwError::syntax(file, ln, expected, raw))?;
    let direction = match dir {
        "H2D" => Direction::HostToDevice,
        "D2H" => Direction::DeviceToHost,
        "D2D" => Direction::DeviceToDevice,
        _ => return Err(HwError::syntax(file, ln, expected, raw)),
    };
    let memory = match mem {
        "Pinned" => HostMemory::Pinned,
        "Paged" | "Pageable" => HostMemory::Pageable,
        _ => return Err(HwError::syntax(file, ln, expected, raw)),
    };
    let (mut gbs, mut size, mut devices) = (None, None, 1);
    for f in fields {
        let (k, v) = f.split_once('=').ok_or_else(|| HwError::syntax(file, ln, expected, raw))?;
        let v = v.trim();
        match k.trim() {
            "Bandwidth" => {
                let (num, unit) = v.split_once(' ').ok_or_else(|| HwError::syntax(file, ln, expected, raw))?;
                let scale = match unit.trim() {
                    "GB/s" => 1.0,
                    "MB/s" => 1e-3,
                    _ => return Err(HwError::syntax(file, ln, expected, raw)),
                };
                gbs = Some(rate(num, scale, file, ln, raw)?);
            }
            "Size" => size = v.trim_end_matches("bytes").trim().parse::<u64>().ok(),
            "NumDevsUsed" => {
                devices =
                    v.parse().ok().filter(|&n: &u32| n > 0).ok_or_else(|| HwError::syntax(file, ln, expected, raw))?
            }
            _ => {}
        }
    }
    match (gbs, size) {
        (Some(gbs), Some(size_bytes)) => Ok(Transfer { direction, memory, devices, size_bytes, gbs }),
        _ => Err(HwError::syntax(file, ln, expected, raw)),
    }
}
