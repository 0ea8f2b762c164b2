//! GGUF files: the header (metadata and tensor infos, never tensor data)
//! and the model llama.cpp would load from it.
//!
//! - [`header`]: the total, bounded parser ([`parse`] takes a prefix of the
//!   file and answers the header or how many bytes it still needs)
//! - [`value`]: metadata values
//! - [`model`]: header → `vramfit_core::llamacpp::LlamaModel`
//! - [`writer`]: a small GGUF writer for tests, fuzz seeds and fixtures
//!
//! Local files are read through `vramfit-input` (regular files only, a byte
//! cap on what is read): [`read_file`] reads a growing prefix until the
//! header is complete. A Hub GGUF is read the same way through HTTP range
//! requests by the Hub fetcher: feed [`parse`] what has arrived and fetch
//! [`Parsed::NeedMore`]`.bytes` when asked.

pub mod header;
pub mod model;
pub mod value;
pub mod writer;

pub use header::{limits, parse, GgufError, GgufHeader, GgufTensor, Parsed};
pub use model::{model_from_header, ModelError};
pub use value::{MetaValue, ValueType};

use std::path::Path;

/// First read of a local file; doubled while the header asks for more.
pub const FIRST_READ: u64 = 1 << 20;

/// Why a GGUF file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GgufFileError {
    #[error(transparent)]
    Input(#[from] vramfit_input::InputError),
    #[error("{file}: GGUF header: {error}")]
    Header { file: String, error: GgufError },
    #[error("{file}: {error}")]
    Model { file: String, error: ModelError },
}

/// Read and parse the header of a local `.gguf` file.
pub fn read_header(path: &Path) -> Result<GgufHeader, GgufFileError> {
    let file = path.display().to_string();
    let (mut f, len) = vramfit_input::open_regular(path)?;
    let mut want = FIRST_READ.min(len);
    loop {
        let buf = vramfit_input::read_range(&mut f, &file, 0, want)?;
        match parse(&buf, len) {
            Ok(Parsed::Complete(h)) => return Ok(*h),
            Ok(Parsed::NeedMore { bytes }) => {
                // the parser never asks past the file or the header cap
                let next = bytes.max(want.saturating_mul(2)).min(len).min(limits::MAX_HEADER_BYTES);
                if next <= want || (buf.len() as u64) < want {
                    return Err(GgufFileError::Header {
                        file,
                        error: GgufError::PastEnd {
                            field: "header".into(),
                            at: buf.len() as u64,
                            needed: bytes,
                            file_len: len,
                        },
                    });
                }
                want = next;
            }
            Err(error) => return Err(GgufFileError::Header { file, error }),
        }
    }
}

/// Read a local `.gguf` file into the model llama.cpp would load.
pub fn read_model(path: &Path) -> Result<(GgufHeader, vramfit_core::llamacpp::LlamaModel), GgufFileError> {
    let h = read_header(path)?;
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let m = model_from_header(&h, &name)
        .map_err(|error| GgufFileError::Model { file: path.display().to_string(), error })?;
    Ok((h, m))
}
