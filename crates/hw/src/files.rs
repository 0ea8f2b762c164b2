//! Reading user files with a size cap (never load a huge file whole).

use std::io::Read;
use std::path::Path;

use crate::error::HwError;

/// Default cap for nvidia-smi outputs: 16 MiB (a 16-GPU `-q -x` is ~1.5 MB).
pub const MAX_INPUT_BYTES: u64 = 16 << 20;

/// Read a UTF-8 text file of at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, HwError> {
    let file = path.display().to_string();
    let io = |e: std::io::Error| HwError::Io { file: file.clone(), message: e.to_string() };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut buf = Vec::new();
    f.take(limit.saturating_add(1)).read_to_end(&mut buf).map_err(io)?;
    if buf.len() as u64 > limit {
        let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(buf.len() as u64);
        return Err(HwError::TooLarge { file, bytes, limit });
    }
    String::from_utf8(buf).map_err(|e| HwError::Invalid {
        file: file.clone(),
        what: format!("not UTF-8 text (byte {}): is this nvidia-smi output?", e.utf8_error().valid_up_to()),
    })
}
