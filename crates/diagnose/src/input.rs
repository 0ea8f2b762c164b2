//! Reading what the user has, without ever loading a huge file whole.
//!
//! Text (logs, messages, summaries, scripts): files up to
//! [`TEXT_WHOLE_LIMIT`] are read whole; larger ones are read as the first
//! and last [`TEXT_PART`] bytes (an OOM is almost always at the end of a
//! log, a summary or traceback near it) and the skipped middle is reported.
//! Snapshots (pickles) must be parsed whole and are refused above
//! [`PICKLE_LIMIT`]. Standard input is read up to [`TEXT_WHOLE_LIMIT`].

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Text read whole up to this size.
pub const TEXT_WHOLE_LIMIT: u64 = 64 << 20;
/// Head and tail kept of larger text.
pub const TEXT_PART: u64 = 16 << 20;
/// Largest snapshot parsed.
pub const PICKLE_LIMIT: u64 = 512 << 20;
/// Bytes looked at to decide what the input is.
pub const SNIFF: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    // The I/O error is in the message and deliberately not a `source`:
    // `{:#}` (anyhow's chain) would print it twice.
    #[error("{name}: cannot read: {error}")]
    Io { name: String, error: std::io::Error },
    #[error("{name}: the snapshot is {size} bytes, more than the {limit}-byte limit for parsing a pickle")]
    TooLarge { name: String, size: u64, limit: u64 },
}

/// What was read.
#[derive(Debug, Clone)]
pub struct Input {
    pub name: String,
    pub bytes: Vec<u8>,
    /// total size of the source
    pub size: u64,
    /// bytes not read from the middle (large text files)
    pub skipped: u64,
    /// a stream was longer than the limit and only its start was read
    pub truncated: bool,
}

fn io(name: &str) -> impl Fn(std::io::Error) -> InputError + '_ {
    move |error| InputError::Io { name: name.to_string(), error }
}

/// Is this the start of a pickle (protocol 2–5)?
pub fn looks_like_pickle(head: &[u8]) -> bool {
    head.len() >= 2 && head[0] == 0x80 && (2..=5).contains(&head[1])
}

/// Read a file under the limits above.
pub fn read_path(path: &Path) -> Result<Input, InputError> {
    let name = path.display().to_string();
    let mut f = File::open(path).map_err(io(&name))?;
    let size = f.metadata().map_err(io(&name))?.len();
    let mut head = vec![0u8; (size.min(SNIFF as u64)) as usize];
    f.read_exact(&mut head).map_err(io(&name))?;
    if looks_like_pickle(&head) {
        if size > PICKLE_LIMIT {
            return Err(InputError::TooLarge { name, size, limit: PICKLE_LIMIT });
        }
        let mut bytes = head;
        f.take(PICKLE_LIMIT).read_to_end(&mut bytes).map_err(io(&name))?;
        return Ok(Input { name, size, skipped: 0, truncated: false, bytes });
    }
    if size <= TEXT_WHOLE_LIMIT {
        let mut bytes = head;
        f.take(TEXT_WHOLE_LIMIT).read_to_end(&mut bytes).map_err(io(&name))?;
        return Ok(Input { name, size, skipped: 0, truncated: false, bytes });
    }
    let mut bytes = head;
    (&mut f).take(TEXT_PART - bytes.len() as u64).read_to_end(&mut bytes).map_err(io(&name))?;
    f.seek(SeekFrom::Start(size - TEXT_PART)).map_err(io(&name))?;
    bytes.push(b'\n');
    f.take(TEXT_PART).read_to_end(&mut bytes).map_err(io(&name))?;
    Ok(Input { name, size, skipped: size - 2 * TEXT_PART, truncated: false, bytes })
}

/// Read a stream (stdin) up to the text limit, or the pickle limit if it
/// starts like a pickle; what lies beyond is never read.
pub fn read_stream(name: &str, r: &mut dyn Read) -> Result<Input, InputError> {
    let mut bytes = Vec::new();
    r.take(2).read_to_end(&mut bytes).map_err(io(name))?;
    let limit = if looks_like_pickle(&bytes) { PICKLE_LIMIT } else { TEXT_WHOLE_LIMIT };
    r.take(limit + 1 - bytes.len() as u64).read_to_end(&mut bytes).map_err(io(name))?;
    let mut truncated = false;
    if bytes.len() as u64 > limit {
        if looks_like_pickle(&bytes) {
            return Err(InputError::TooLarge { name: name.to_string(), size: bytes.len() as u64, limit });
        }
        // the rest of the stream is left unread: it may be endless
        bytes.truncate(limit as usize);
        truncated = true;
    }
    let size = bytes.len() as u64;
    Ok(Input { name: name.to_string(), bytes, size, skipped: 0, truncated })
}
