//! Reading what the user has, bounded in bytes, memory and time, through
//! the one reader of user-named files (`vramfit-input`: regular files only,
//! so `/dev/zero`, a FIFO or a socket is refused before it is read).
//!
//! Text (logs, messages, summaries, scripts): files up to
//! [`TEXT_WHOLE_LIMIT`] are read whole; larger ones (up to [`TEXT_LIMIT`])
//! are read as their first and last [`TEXT_PART`] bytes (an OOM is almost
//! always at the end of a log, a summary or traceback near it). The
//! skipped middle is streamed once to count its lines, so every line
//! number reported is the line's number in the file.
//! Snapshots (pickles) are never held whole: the file is streamed through
//! the decoder (up to [`PICKLE_LIMIT`]). Standard input is read up to
//! [`TEXT_WHOLE_LIMIT`] (a pickle up to [`PICKLE_STDIN_LIMIT`]) and never
//! past it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Text read whole up to this size.
pub const TEXT_WHOLE_LIMIT: u64 = 64 << 20;
/// Head and tail kept of larger text.
pub const TEXT_PART: u64 = 16 << 20;
/// Largest text file read (its middle is only counted for line numbers:
/// about a second per GiB from the page cache).
pub const TEXT_LIMIT: u64 = 16 << 30;
/// Largest snapshot file decoded (streamed; the decoded form of a real
/// snapshot is smaller than the file).
pub const PICKLE_LIMIT: u64 = 4 << 30;
/// Largest snapshot read from standard input (held in memory).
pub const PICKLE_STDIN_LIMIT: u64 = 512 << 20;
/// Bytes looked at to decide what the input is.
pub const SNIFF: usize = 64 * 1024;
/// Chunk in which the skipped middle of a large text is counted.
const COUNT_CHUNK: usize = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum InputError {
    // The I/O error is in the message and deliberately not a `source`:
    // `{:#}` (anyhow's chain) would print it twice.
    #[error("{name}: cannot read: {error}")]
    Io { name: String, error: std::io::Error },
    #[error("{name}: the snapshot is {size} bytes, more than the {limit}-byte limit for parsing a pickle")]
    TooLarge { name: String, size: u64, limit: u64 },
    #[error(
        "{name}: {size} bytes, more than the {limit}-byte limit for a log or text file: pass its end instead (`tail -c 64M {name} | vramfit diagnose -`)"
    )]
    TextTooLarge { name: String, size: u64, limit: u64 },
    #[error(transparent)]
    File(#[from] vramfit_input::InputError),
}

/// What was read.
#[derive(Debug, Clone, Default)]
pub struct Input {
    pub name: String,
    /// the text (whole, or head and tail), or a snapshot's first bytes
    /// when the snapshot is streamed from `pickle_file`
    pub bytes: Vec<u8>,
    /// total size of the source
    pub size: u64,
    /// bytes not read from the middle (large text files)
    pub skipped: u64,
    /// lines that start in the skipped middle
    pub skipped_lines: u64,
    /// line numbers up to this one are the file's; later ones (the tail)
    /// are shifted by [`Input::line_shift`]
    pub head_lines: u64,
    pub line_shift: i64,
    /// a stream was longer than the limit and only its start was read
    pub truncated: bool,
    /// a snapshot file to stream (its first bytes are in `bytes`)
    pub pickle_file: Option<PathBuf>,
}

impl Input {
    /// Text or bytes held whole (tests, fuzzing, callers with data in memory).
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Input {
        Input { name: name.to_string(), size: bytes.len() as u64, bytes, ..Input::default() }
    }

    /// The file's line number of line `line` of [`Input::bytes`].
    pub fn true_line(&self, line: usize) -> usize {
        if self.skipped == 0 || line as u64 <= self.head_lines {
            return line;
        }
        (line as i64).saturating_add(self.line_shift).max(1) as usize
    }
}

fn io(name: &str) -> impl Fn(std::io::Error) -> InputError + '_ {
    move |error| InputError::Io { name: name.to_string(), error }
}

/// Is this the start of a pickle (protocol 2–5)?
pub fn looks_like_pickle(head: &[u8]) -> bool {
    head.len() >= 2 && head[0] == 0x80 && (2..=5).contains(&head[1])
}

fn newlines(b: &[u8]) -> u64 {
    b.iter().filter(|&&c| c == b'\n').count() as u64
}

/// Count the newlines in `len` bytes of `f` from its current position.
fn count_newlines(f: &mut File, name: &str, len: u64) -> Result<u64, InputError> {
    let mut buf = vec![0u8; COUNT_CHUNK];
    let mut left = len;
    let mut n = 0u64;
    while left > 0 {
        let want = left.min(COUNT_CHUNK as u64) as usize;
        let got = f.read(&mut buf[..want]).map_err(io(name))?;
        if got == 0 {
            break; // the file shrank while being read
        }
        n += newlines(&buf[..got]);
        left -= got as u64;
    }
    Ok(n)
}

/// Read a file under the limits above (regular files only).
pub fn read_path(path: &Path) -> Result<Input, InputError> {
    let name = path.display().to_string();
    let (mut f, size) = vramfit_input::open_regular(path)?;
    let mut head = Vec::new();
    (&mut f).take(SNIFF as u64).read_to_end(&mut head).map_err(io(&name))?;
    if looks_like_pickle(&head) {
        if size > PICKLE_LIMIT {
            return Err(InputError::TooLarge { name, size, limit: PICKLE_LIMIT });
        }
        return Ok(Input { name, size, bytes: head, pickle_file: Some(path.to_path_buf()), ..Input::default() });
    }
    if size > TEXT_LIMIT {
        return Err(InputError::TextTooLarge { name, size, limit: TEXT_LIMIT });
    }
    if size <= TEXT_WHOLE_LIMIT {
        let mut bytes = head;
        bytes.reserve_exact((size as usize).saturating_sub(bytes.len()));
        // the cap is on what is read, not on the length the metadata gave
        f.take(TEXT_WHOLE_LIMIT - bytes.len() as u64).read_to_end(&mut bytes).map_err(io(&name))?;
        return Ok(Input { name, size: size.max(bytes.len() as u64), bytes, ..Input::default() });
    }
    // the first and last TEXT_PART bytes; the middle is streamed once to
    // count its lines (so the tail's line numbers are the file's) and dropped
    let mut bytes = head;
    bytes.reserve_exact((2 * TEXT_PART + 1) as usize - bytes.len());
    (&mut f).take(TEXT_PART - bytes.len() as u64).read_to_end(&mut bytes).map_err(io(&name))?;
    let head_newlines = newlines(&bytes);
    let head_len = bytes.len() as u64;
    // a head cut inside a line is ended here (that line continues in the middle)
    let appended = !bytes.ends_with(b"\n");
    if appended {
        bytes.push(b'\n');
    }
    let tail_start = size - TEXT_PART;
    let skipped = tail_start - head_len;
    // binary data is refused by every reader of the text: no need to count
    let binary = bytes[..bytes.len().min(SNIFF)].contains(&0);
    let skipped_lines = if binary { 0 } else { count_newlines(&mut f, &name, skipped)? };
    f.seek(SeekFrom::Start(tail_start)).map_err(io(&name))?;
    f.take(TEXT_PART).read_to_end(&mut bytes).map_err(io(&name))?;
    let head_lines = head_newlines + appended as u64;
    // the tail's first line is head_lines + 1 here and head_newlines +
    // skipped_lines + 1 in the file
    let line_shift = skipped_lines as i64 - appended as i64;
    Ok(Input { name, size, bytes, skipped, skipped_lines, head_lines, line_shift, ..Input::default() })
}

/// Read a stream (stdin) up to the text limit, or the pickle limit if it
/// starts like a pickle; what lies beyond is never read.
pub fn read_stream(name: &str, r: &mut dyn Read) -> Result<Input, InputError> {
    let mut bytes = Vec::new();
    r.take(2).read_to_end(&mut bytes).map_err(io(name))?;
    let limit = if looks_like_pickle(&bytes) { PICKLE_STDIN_LIMIT } else { TEXT_WHOLE_LIMIT };
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
    Ok(Input { name: name.to_string(), bytes, size, truncated, ..Input::default() })
}

/// Stream the snapshot an [`Input`] names (or decode the bytes it holds).
pub fn load_snapshot(input: &Input) -> Result<crate::snapshot::Snapshot, crate::DiagnoseError> {
    let snap_err = |error| crate::DiagnoseError::Snapshot { name: input.name.clone(), error };
    match &input.pickle_file {
        Some(path) => {
            let (f, len) = vramfit_input::open_regular(path).map_err(InputError::from)?;
            if len > PICKLE_LIMIT {
                return Err(InputError::TooLarge { name: input.name.clone(), size: len, limit: PICKLE_LIMIT }.into());
            }
            // the byte cap holds even if the file grows while it is read
            crate::snapshot::load_reader(f.take(PICKLE_LIMIT), len).map_err(snap_err)
        }
        None => crate::snapshot::load(&input.bytes).map_err(snap_err),
    }
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
        return Ok(Input::from_bytes(name, bytes));
    }
    if size > TEXT_LIMIT {
        return Err(InputError::TextTooLarge { name: name.to_string(), size, limit: TEXT_LIMIT });
    }
    if size <= TEXT_WHOLE_LIMIT {
        return Ok(Input::from_bytes(name, bytes));
    }
    // as read_path: the first and last TEXT_PART bytes, the middle's lines counted
    let part = TEXT_PART as usize;
    let tail = bytes.split_off(bytes.len() - part);
    let binary = bytes[..bytes.len().min(SNIFF)].contains(&0);
    let skipped_lines = if binary { 0 } else { newlines(&bytes[part..]) };
    bytes.truncate(part);
    let head_newlines = newlines(&bytes);
    let appended = !bytes.ends_with(b"\n");
    if appended {
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(&tail);
    let head_lines = head_newlines + appended as u64;
    let line_shift = skipped_lines as i64 - appended as i64;
    Ok(Input {
        name: name.to_string(),
        bytes,
        size,
        skipped: size - 2 * TEXT_PART,
        skipped_lines,
        head_lines,
        line_shift,
        ..Input::default()
    })
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
        // a big.log of 64 MiB per run would pile up in the temporary directory
        let _ = std::fs::remove_file(&p);
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
