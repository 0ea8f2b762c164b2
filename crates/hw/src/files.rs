//! Reading the files a user names, through the one bounded reader
//! (`vramfit-input`): regular files only (a FIFO or `/dev/zero` is refused
//! before it is opened), at most a byte cap read, UTF-8 BOM and UTF-16
//! (PowerShell's `nvidia-smi -q > f.txt` writes UTF-16LE) decoded.

use std::path::Path;

use crate::error::HwError;

/// Cap for nvidia-smi outputs: 16 MiB (a 16-GPU `-q -x` is ~1.5 MB).
pub const MAX_INPUT_BYTES: u64 = 16 << 20;
/// Cap for a bandwidth tool's output (`bandwidthTest`, `p2pBandwidthLatencyTest`,
/// `all_reduce_perf`): a few kB each; a range-mode bandwidthTest ~20 kB.
pub const MAX_BANDWIDTH_BYTES: u64 = 4 << 20;

/// Read a text file of at most `limit` bytes; `what` names the input kind
/// in errors ("`nvidia-smi -q -x` output").
pub fn read_kind(path: &Path, what: &str, limit: u64) -> Result<String, HwError> {
    Ok(vramfit_input::read_text(path, what, limit)?)
}

/// Read an nvidia-smi output file of at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, HwError> {
    read_kind(path, "nvidia-smi output", limit)
}
