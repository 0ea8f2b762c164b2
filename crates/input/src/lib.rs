//! vramfit-input: the one way vramfit reads a file a user named.
//!
//! Every input path (model configs, safetensors headers, DeepSpeed and PEFT
//! configs, catalogues, OOM logs, snapshots, nvidia-smi outputs, the Hugging
//! Face cache's `refs/*`) goes through these functions, so that
//! * only **regular files** are read: `/dev/zero`, a FIFO, a socket or a
//!   directory (also behind a symlink) is refused before it is opened for
//!   reading, so nothing can stream forever or block;
//! * no read takes more than the caller's **byte cap**: the cap is enforced
//!   on what is actually read, never on the metadata length (which is 0 for
//!   devices and may change while reading);
//! * text is decoded with its **encoding named**: a UTF-8 byte-order mark is
//!   dropped, UTF-16 (with a BOM) is decoded, anything else that is not
//!   UTF-8 is an error that says so and where.
//!
//! It does no parsing and holds no limits of its own: each caller passes the
//! cap of its input kind (docs/limits.md lists them all).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// Why a file could not be read.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum InputError {
    #[error("{file}: cannot read: {reason}")]
    Io { file: String, reason: String },
    #[error(
        "{file}: is {kind}, not a regular file: vramfit reads only regular files (save the output to a file first)"
    )]
    NotRegular { file: String, kind: &'static str },
    #[error("{file}: larger than the {limit}-byte limit for {what}")]
    TooLarge { file: String, what: String, limit: u64 },
    #[error("{file}: {detail}")]
    Encoding { file: String, detail: String },
}

fn io_err(file: &str) -> impl Fn(std::io::Error) -> InputError + '_ {
    move |e| InputError::Io { file: file.to_string(), reason: io_reason(&e) }
}

/// An I/O error in words for the user: a permission problem says so and
/// what to check (the file's mode, or a directory above it that this user
/// may not search); anything else as the system says it.
pub fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => {
            "permission denied: this user may not read it (check its mode, and that every directory above it can be searched)"
                .into()
        }
        _ => e.to_string(),
    }
}

/// What kind of non-regular file a metadata describes (for the message).
fn kind_of(m: &std::fs::Metadata) -> &'static str {
    let t = m.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// Open `path` for reading if (after following symlinks) it is a regular
/// file; returns the file and its length. The type is checked before the
/// open (opening a FIFO blocks) and again on the opened handle (the path
/// may have been replaced in between).
pub fn open_regular(path: &Path) -> Result<(File, u64), InputError> {
    let file = path.display().to_string();
    let m = std::fs::metadata(path).map_err(io_err(&file))?;
    if !m.is_file() {
        return Err(InputError::NotRegular { file, kind: kind_of(&m) });
    }
    let f = File::open(path).map_err(io_err(&file))?;
    let m = f.metadata().map_err(io_err(&file))?;
    if !m.is_file() {
        return Err(InputError::NotRegular { file, kind: kind_of(&m) });
    }
    Ok((f, m.len()))
}

/// Read at most `limit` bytes from `r`; more is an error naming `what`.
pub fn read_capped(r: impl Read, file: &str, what: &str, limit: u64) -> Result<Vec<u8>, InputError> {
    let mut buf = Vec::new();
    r.take(limit.saturating_add(1)).read_to_end(&mut buf).map_err(io_err(file))?;
    if buf.len() as u64 > limit {
        return Err(InputError::TooLarge { file: file.to_string(), what: what.to_string(), limit });
    }
    Ok(buf)
}

/// A whole regular file of at most `limit` bytes (`what` names the input
/// kind in the error, e.g. "a DeepSpeed config").
pub fn read_bytes(path: &Path, what: &str, limit: u64) -> Result<Vec<u8>, InputError> {
    let (f, _) = open_regular(path)?;
    read_capped(f, &path.display().to_string(), what, limit)
}

/// A whole regular text file of at most `limit` bytes, decoded (see
/// [`decode_text`]).
pub fn read_text(path: &Path, what: &str, limit: u64) -> Result<String, InputError> {
    let bytes = read_bytes(path, what, limit)?;
    decode_text(&path.display().to_string(), bytes)
}

/// `len` bytes at `offset` of a regular file opened with [`open_regular`]
/// (fewer at the end of the file).
pub fn read_range(f: &mut File, file: &str, offset: u64, len: u64) -> Result<Vec<u8>, InputError> {
    f.seek(SeekFrom::Start(offset)).map_err(io_err(file))?;
    let mut buf = Vec::new();
    f.take(len).read_to_end(&mut buf).map_err(io_err(file))?;
    Ok(buf)
}

/// Text from bytes: UTF-8 (a leading byte-order mark dropped), or UTF-16
/// LE/BE when it starts with the matching byte-order mark (Windows editors
/// and PowerShell's `>` write that). Anything else that is not UTF-8 is an
/// error naming the first bad byte.
pub fn decode_text(file: &str, bytes: Vec<u8>) -> Result<String, InputError> {
    const UTF8_BOM: &[u8] = &[0xEF, 0xBB, 0xBF];
    let utf16 = |le: bool| -> Result<String, InputError> {
        let body = &bytes[2..];
        if !body.len().is_multiple_of(2) {
            return Err(InputError::Encoding {
                file: file.to_string(),
                detail: "UTF-16 text (byte-order mark) with an odd number of bytes: the file is cut".into(),
            });
        }
        let units = body.chunks_exact(2).map(|c| {
            if le {
                u16::from_le_bytes([c[0], c[1]])
            } else {
                u16::from_be_bytes([c[0], c[1]])
            }
        });
        char::decode_utf16(units).collect::<Result<String, _>>().map_err(|e| InputError::Encoding {
            file: file.to_string(),
            detail: format!("UTF-16 text (byte-order mark) with an invalid code unit {:#06x}", e.unpaired_surrogate()),
        })
    };
    if bytes.starts_with(&[0xFF, 0xFE]) {
        return utf16(true);
    }
    if bytes.starts_with(&[0xFE, 0xFF]) {
        return utf16(false);
    }
    let body = if bytes.starts_with(UTF8_BOM) { bytes[3..].to_vec() } else { bytes };
    String::from_utf8(body).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let hint = if e.as_bytes().iter().take(4096).filter(|&&b| b == 0).count() > 8 {
            "; it has NUL bytes: UTF-16 without a byte-order mark, or a binary file"
        } else {
            ""
        };
        InputError::Encoding {
            file: file.to_string(),
            detail: format!("not UTF-8 text (invalid byte at offset {at}){hint}"),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn tmp(name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("vramfit-input-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::File::create(&p).unwrap().write_all(bytes).unwrap();
        p
    }

    #[test]
    fn regular_file_under_cap_reads() {
        let p = tmp("a.txt", b"hello");
        assert_eq!(read_text(&p, "a test file", 5).unwrap(), "hello");
    }

    #[test]
    fn over_cap_is_refused_by_what_was_read() {
        let p = tmp("b.txt", b"hello!");
        let e = read_text(&p, "a test file", 5).unwrap_err();
        assert!(matches!(e, InputError::TooLarge { limit: 5, .. }), "{e}");
        assert!(e.to_string().contains("a test file"));
    }

    #[cfg(unix)]
    #[test]
    fn devices_directories_and_fifos_are_refused_without_blocking() {
        let e = read_bytes(Path::new("/dev/zero"), "a config", 1 << 20).unwrap_err();
        assert!(matches!(e, InputError::NotRegular { kind: "a character device", .. }), "{e}");
        let e = read_bytes(&std::env::temp_dir(), "a config", 10).unwrap_err();
        assert!(matches!(e, InputError::NotRegular { kind: "a directory", .. }), "{e}");
        // a symlink to /dev/zero is followed and refused
        let dir = std::env::temp_dir().join(format!("vramfit-input-{}-link", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("config.json");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(read_text(&link, "a config", 10), Err(InputError::NotRegular { .. })));
        // a FIFO: refused before open (opening it would block with no writer)
        let fifo = dir.join("fifo");
        let _ = std::fs::remove_file(&fifo);
        if std::process::Command::new("mkfifo").arg(&fifo).status().map(|s| s.success()).unwrap_or(false) {
            let e = read_text(&fifo, "a log", 10).unwrap_err();
            assert!(matches!(e, InputError::NotRegular { kind: "a FIFO (named pipe)", .. }), "{e}");
        }
    }

    #[test]
    fn permission_denied_says_so() {
        // tests may run as root, where no file is unreadable: the mapping itself
        let e = io_err("/data/m/config.json")(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        let text = e.to_string();
        assert!(text.starts_with("/data/m/config.json: cannot read: permission denied"), "{text}");
        assert!(text.contains("every directory above it"), "{text}");
        let e = io_err("f")(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(!e.to_string().contains("permission"), "{e}");
    }

    #[test]
    fn encodings() {
        assert_eq!(decode_text("f", b"\xEF\xBB\xBF{}".to_vec()).unwrap(), "{}");
        let le: Vec<u8> =
            [0xFF, 0xFE].into_iter().chain("{\"a\":1}".encode_utf16().flat_map(|u| u.to_le_bytes())).collect();
        assert_eq!(decode_text("f", le).unwrap(), "{\"a\":1}");
        let be: Vec<u8> = [0xFE, 0xFF].into_iter().chain("ok".encode_utf16().flat_map(|u| u.to_be_bytes())).collect();
        assert_eq!(decode_text("f", be).unwrap(), "ok");
        let e = decode_text("f", b"ab\xC3(".to_vec()).unwrap_err();
        assert!(e.to_string().contains("offset 2"), "{e}");
        let no_bom: Vec<u8> = "{\"model_type\":\"llama\"}".encode_utf16().flat_map(|u| u.to_le_bytes()).collect();
        // valid UTF-8 technically (NULs are valid), so it decodes; parsers then see NULs
        assert!(decode_text("f", no_bom).is_ok());
        let e = decode_text("f", vec![0xFF, 0xFE, 0x41]).unwrap_err();
        assert!(e.to_string().contains("odd number"), "{e}");
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let _ = decode_text("f", bytes);
        }
    }
}
