//! Bandwidth reports from the tools people run after renting a machine,
//! parsed (total: a value or an error naming the file, line and field) and
//! judged against what the cards and links should give.
//!
//! - [`bandwidth_test`]: CUDA samples `bandwidthTest` (host↔device, device↔device)
//! - [`p2p`]: CUDA samples `p2pBandwidthLatencyTest` (GPU↔GPU matrices)
//! - [`nccl`]: nccl-tests `all_reduce_perf` (bus bandwidth)
//! - [`links`]: nominal PCIe and NVLink rates and the expected efficiency
//! - [`judge`]: the findings they add to the verdict
//!
//! All rates are decimal GB/s (10^9 bytes per second), as the tools print
//! them and as PCIe and NVLink are specified.

pub mod bandwidth_test;
pub mod judge;
pub mod links;
pub mod nccl;
pub mod p2p;

use crate::error::HwError;

/// Largest rate accepted, GB/s: no link or memory comes near 10^6 GB/s; a
/// bigger number is a damaged or edited file.
pub const MAX_GBS: f64 = 1.0e6;

/// A rate cell: a finite, non-negative number of at most [`MAX_GBS`] (after
/// scaling by `scale`, e.g. 1e-3 for MB/s).
pub(crate) fn rate(cell: &str, scale: f64, file: &str, line: usize, raw: &str) -> Result<f64, HwError> {
    let v: f64 = cell.parse().map_err(|_| HwError::syntax(file, line, "a bandwidth (a number)", raw))?;
    let v = v * scale;
    if !(v.is_finite() && (0.0..=MAX_GBS).contains(&v)) {
        return Err(HwError::syntax(file, line, format!("a bandwidth between 0 and {MAX_GBS} GB/s"), raw));
    }
    Ok(v)
}

/// Bytes per second of a decimal GB/s rate, for the JSON (integers).
pub fn bytes_per_s(gbs: f64) -> u64 {
    // finite and ≤ MAX_GBS by construction: 1e6 GB/s = 1e15 B/s fits in u64
    (gbs * 1e9).round().clamp(0.0, 1e15) as u64
}
