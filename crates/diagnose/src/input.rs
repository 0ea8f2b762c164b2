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

/// Bytes already in memory (a text pasted or a file uploaded to the local
/// web page), under the same limits as [`read_path`]: a pickle above
/// [`PICKLE_LIMIT`] is refused, text above [`TEXT_WHOLE_LIMIT`] keeps its
/// first and last [`TEXT_PART`] bytes and reports the middle as skipped.
pub fn from_bytes(name: &str, mut bytes: Vec<u8>) -> Result<Input, InputError> {
    let size = bytes.len() as u64;
    if looks_like_pickle(&bytes) {
        if size > PICKLE_LIMIT {
            return Err(InputError::TooLarge { name: name.to_string(), size, limit: PICKLE_LIMIT });
        }
        return Ok(Input { name: name.to_string(), bytes, size, skipped: 0, truncated: false });
    }
    if size <= TEXT_WHOLE_LIMIT {
        return Ok(Input { name: name.to_string(), bytes, size, skipped: 0, truncated: false });
    }
    let part = TEXT_PART as usize;
    let tail = bytes.split_off(bytes.len() - part);
    bytes.truncate(part);
    bytes.push(b'\n');
    bytes.extend_from_slice(&tail);
    Ok(Input { name: name.to_string(), bytes, size, skipped: size - 2 * TEXT_PART, truncated: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn via_file(name: &str, bytes: &[u8]) -> Input {
        let dir = std::env::temp_dir().join(format!("vramfit-diag-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        let mut i = read_path(&p).unwrap();
        i.name = name.to_string();
        i
    }

    fn same(a: &Input, b: &Input) {
        assert_eq!((a.size, a.skipped, a.truncated, a.bytes.len()), (b.size, b.skipped, b.truncated, b.bytes.len()));
        assert!(a.bytes == b.bytes);
    }

    #[test]
    fn bytes_in_memory_read_as_a_file_would() {
        let text = b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.".to_vec();
        same(&from_bytes("t.txt", text.clone()).unwrap(), &via_file("t.txt", &text));
        let pickle = vec![0x80, 0x04, 0x95, 0x00, b'.'];
        same(&from_bytes("s.pickle", pickle.clone()).unwrap(), &via_file("s.pickle", &pickle));
        // a text larger than the whole-read limit: head and tail, the middle skipped
        let mut big = vec![b'a'; (TEXT_WHOLE_LIMIT + 1000) as usize];
        *big.last_mut().unwrap() = b'z';
        let m = from_bytes("big.log", big.clone()).unwrap();
        same(&m, &via_file("big.log", &big));
        assert_eq!(m.skipped, TEXT_WHOLE_LIMIT + 1000 - 2 * TEXT_PART);
        assert_eq!(m.bytes.last(), Some(&b'z'));
    }

    #[test]
    fn oversized_pickle_is_refused_in_memory_too() {
        let mut p = vec![0u8; (PICKLE_LIMIT + 1) as usize];
        p[0] = 0x80;
        p[1] = 0x04;
        let e = from_bytes("s.pickle", p).unwrap_err().to_string();
        assert!(e.contains("s.pickle") && e.contains("limit"), "{e}");
    }
}
