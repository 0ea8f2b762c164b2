//! Writing what was fetched into the standard Hugging Face cache layout,
//! and vramfit's safetensors header sidecars.
//!
//! Layout written (as huggingface_hub `file_download.py` does, so both tools
//! share the cache):
//! - `blobs/<etag>`: the file's bytes, named by the Hub's ETag;
//! - `snapshots/<commit>/<file>`: a relative symlink to the blob (a copy
//!   where symlinks are unavailable);
//! - `refs/<revision>`: the commit the revision pointed at;
//! - `.no_exist/<commit>/<file>`: an empty file marking a file the Hub said
//!   does not exist (e.g. no `model.safetensors.index.json` for a
//!   single-file checkpoint).
//!
//! A safetensors **header** is not the file: putting it under `snapshots/`
//! would make transformers load a truncated checkpoint. Headers go to a
//! vramfit-owned sidecar instead,
//! `vramfit/safetensors-headers/<commit>/<file>.json`, inside the repo's
//! cache folder (deleting the repo's folder removes it too). It holds the header JSON verbatim and the file's size, enough to
//! check every tensor's offsets against the real file offline.
//!
//! Every write goes to a temporary name first and is renamed into place, so
//! an interrupted run leaves no half-written file under a real name.

use crate::error::IngestError;
use crate::hf_cache::repo_dir;
use crate::safetensors::{self, SafetensorsSummary};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Component, Path, PathBuf};

/// Format tag of a header sidecar.
pub const SIDECAR_FORMAT: &str = "vramfit.safetensors-header.v1";
/// Largest sidecar read: the header cap, with room for JSON escaping.
const MAX_SIDECAR_BYTES: u64 = 2 * safetensors::MAX_HEADER_BYTES + (1 << 16);

/// A safetensors header as stored in a sidecar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HeaderSidecar {
    pub format: String,
    pub repo: String,
    pub commit: String,
    pub file: String,
    /// size of the whole safetensors file on the Hub
    pub file_size: u64,
    /// the Hub's ETag of the file (its sha256 for LFS files), when given
    #[serde(default)]
    pub etag: Option<String>,
    /// the JSON header, byte for byte as in the file
    pub header: String,
}

impl HeaderSidecar {
    /// The header and size from a file's first `8 + n` bytes.
    pub fn from_prefix(
        repo: &str,
        commit: &str,
        file: &str,
        prefix: &[u8],
        file_size: u64,
        etag: Option<String>,
    ) -> Result<HeaderSidecar, IngestError> {
        let end = safetensors::header_end(prefix, Some(file_size), file)? as usize;
        let header = std::str::from_utf8(&prefix[8..end])
            .map_err(|_| IngestError::Safetensors { file: file.into(), reason: "header is not UTF-8 JSON".into() })?
            .to_string();
        Ok(HeaderSidecar {
            format: SIDECAR_FORMAT.into(),
            repo: repo.into(),
            commit: commit.into(),
            file: file.into(),
            file_size,
            etag,
            header,
        })
    }

    /// Summary with every offset checked against the file size.
    pub fn summary(&self, origin: &str) -> Result<SafetensorsSummary, IngestError> {
        let n = self.header.len() as u64;
        let mut prefix = n.to_le_bytes().to_vec();
        prefix.extend_from_slice(self.header.as_bytes());
        safetensors::summary_from_prefix(&prefix, self.file_size, origin)
    }
}

/// One repo's folder in the cache.
#[derive(Debug, Clone)]
pub struct RepoCache {
    pub repo_id: String,
    pub dir: PathBuf,
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> IngestError + '_ {
    move |e| IngestError::Io { file: path.display().to_string(), reason: e.to_string() }
}

/// `name` as a relative path of normal components only.
fn relative(name: &str) -> Option<PathBuf> {
    let p = Path::new(name);
    (!name.is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))).then(|| p.to_path_buf())
}

/// An ETag usable as a blob file name (hex or base64url-ish, bounded).
fn blob_name(etag: &str) -> Option<&str> {
    (!etag.is_empty() && etag.len() <= 128 && etag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .then_some(etag)
}

/// Write `bytes` to `path` through a temporary file in the same folder.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), IngestError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let tmp = dir.join(format!(
        ".{}.vramfit-{}-{nanos}.tmp",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("file"),
        std::process::id()
    ));
    let mut f = std::fs::File::create(&tmp).map_err(io_err(&tmp))?;
    f.write_all(bytes).and_then(|_| f.sync_all()).map_err(io_err(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_err(path)(e)
    })
}

impl RepoCache {
    pub fn new(cache_dir: &Path, repo_id: &str) -> RepoCache {
        RepoCache { repo_id: repo_id.to_string(), dir: repo_dir(cache_dir, repo_id) }
    }

    pub fn snapshot_dir(&self, commit: &str) -> PathBuf {
        self.dir.join("snapshots").join(commit)
    }

    /// `blobs/<etag>` + `snapshots/<commit>/<file>`; an existing snapshot
    /// file (e.g. one huggingface_hub downloaded) is left as it is.
    pub fn write_file(
        &self,
        commit: &str,
        file: &str,
        bytes: &[u8],
        etag: Option<&str>,
    ) -> Result<PathBuf, IngestError> {
        let rel = relative(file).ok_or_else(|| IngestError::Invalid {
            file: file.into(),
            reason: "not a relative file name inside the repo".into(),
        })?;
        let target = self.snapshot_dir(commit).join(&rel);
        if std::fs::symlink_metadata(&target).is_ok() {
            return Ok(target);
        }
        match etag.and_then(blob_name) {
            Some(name) => {
                let blob = self.dir.join("blobs").join(name);
                if std::fs::symlink_metadata(&blob).is_err() {
                    write_atomic(&blob, bytes)?;
                }
                link_or_copy(&blob, &target, rel.components().count(), name)?;
            }
            None => write_atomic(&target, bytes)?,
        }
        Ok(target)
    }

    /// `refs/<revision>` = `commit` (nothing for a revision that is the commit).
    pub fn write_ref(&self, revision: &str, commit: &str) -> Result<(), IngestError> {
        if revision == commit {
            return Ok(());
        }
        let rel = relative(revision)
            .ok_or_else(|| IngestError::Invalid { file: revision.into(), reason: "not a revision name".into() })?;
        write_atomic(&self.dir.join("refs").join(rel), commit.as_bytes())
    }

    /// `.no_exist/<commit>/<file>`.
    pub fn mark_absent(&self, commit: &str, file: &str) -> Result<(), IngestError> {
        let rel = relative(file)
            .ok_or_else(|| IngestError::Invalid { file: file.into(), reason: "not a relative file name".into() })?;
        write_atomic(&self.dir.join(".no_exist").join(commit).join(rel), b"")
    }

    /// Where the header sidecar of `file` at `commit` lives.
    pub fn sidecar_path(&self, commit: &str, file: &str) -> Option<PathBuf> {
        let rel = relative(file)?;
        let mut name = rel.into_os_string();
        name.push(".json");
        Some(self.dir.join("vramfit").join("safetensors-headers").join(commit).join(name))
    }

    pub fn write_header(&self, h: &HeaderSidecar) -> Result<PathBuf, IngestError> {
        let path = self
            .sidecar_path(&h.commit, &h.file)
            .ok_or_else(|| IngestError::Invalid { file: h.file.clone(), reason: "not a relative file name".into() })?;
        let json =
            serde_json::to_vec(h).map_err(|e| IngestError::Invalid { file: h.file.clone(), reason: e.to_string() })?;
        write_atomic(&path, &json)?;
        Ok(path)
    }

    /// The cached header of `file` at `commit`, if any, checked against the
    /// repo and commit it claims.
    pub fn read_header(&self, commit: &str, file: &str) -> Result<Option<HeaderSidecar>, IngestError> {
        let Some(path) = self.sidecar_path(commit, file) else { return Ok(None) };
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        let shown = path.display().to_string();
        let bytes = vramfit_input::read_bytes(&path, "a vramfit header sidecar", MAX_SIDECAR_BYTES)?;
        let h: HeaderSidecar = serde_json::from_slice(&bytes)
            .map_err(|e| IngestError::Json { file: shown.clone(), reason: e.to_string() })?;
        if h.format != SIDECAR_FORMAT || h.commit != commit || h.file != file {
            return Err(IngestError::Invalid {
                file: shown,
                reason: format!(
                    "not the header sidecar of {file} at {commit} (format {}, file {}, commit {}): delete it to refetch",
                    h.format.escape_debug(),
                    h.file.escape_debug(),
                    h.commit.escape_debug()
                ),
            });
        }
        Ok(Some(h))
    }
}

/// First line of a cached GGUF header: the format and the file's size.
pub const GGUF_HEADER_FORMAT: &str = "vramfit.gguf-header.v1";

impl RepoCache {
    /// Where the cached GGUF header of `file` at `commit` lives:
    /// `vramfit/gguf-headers/<commit>/<file>.header` (like the safetensors
    /// sidecars, never under `snapshots/`: a header is not the file).
    pub fn gguf_header_path(&self, commit: &str, file: &str) -> Option<PathBuf> {
        let rel = relative(file)?;
        let mut name = rel.into_os_string();
        name.push(".header");
        Some(self.dir.join("vramfit").join("gguf-headers").join(commit).join(name))
    }

    /// Cache a GGUF's header bytes (the file's first bytes, up to the end
    /// of its tensor infos) and the file's size.
    pub fn write_gguf_header(
        &self,
        commit: &str,
        file: &str,
        header: &[u8],
        file_size: u64,
    ) -> Result<PathBuf, IngestError> {
        let path = self
            .gguf_header_path(commit, file)
            .ok_or_else(|| IngestError::Invalid { file: file.into(), reason: "not a relative file name".into() })?;
        let mut bytes = format!("{GGUF_HEADER_FORMAT} {file_size}\n").into_bytes();
        bytes.extend_from_slice(header);
        write_atomic(&path, &bytes)?;
        Ok(path)
    }

    /// The cached header bytes and file size of `file` at `commit`, if any.
    pub fn read_gguf_header(&self, commit: &str, file: &str) -> Result<Option<(Vec<u8>, u64)>, IngestError> {
        let Some(path) = self.gguf_header_path(commit, file) else { return Ok(None) };
        if std::fs::symlink_metadata(&path).is_err() {
            return Ok(None);
        }
        let cap = crate::gguf::limits::MAX_HEADER_BYTES + 64;
        let mut bytes = vramfit_input::read_bytes(&path, "a vramfit GGUF header cache file", cap)?;
        let bad = || IngestError::Invalid {
            file: path.display().to_string(),
            reason: format!("not a {GGUF_HEADER_FORMAT} file (a damaged cache: delete it to refetch)"),
        };
        let nl = bytes.iter().take(64).position(|&b| b == b'\n').ok_or_else(bad)?;
        let first = std::str::from_utf8(&bytes[..nl]).map_err(|_| bad())?;
        let size = first.strip_prefix(GGUF_HEADER_FORMAT).and_then(|r| r.trim().parse::<u64>().ok()).ok_or_else(bad)?;
        bytes.drain(..=nl);
        Ok(Some((bytes, size)))
    }
}

#[cfg(unix)]
fn link_or_copy(blob: &Path, target: &Path, depth: usize, name: &str) -> Result<(), IngestError> {
    // snapshots/<commit>/<a>/<b> → ../../../blobs/<name>: one `..` per
    // component of the file name plus one for <commit>
    let mut rel = PathBuf::new();
    for _ in 0..depth + 1 {
        rel.push("..");
    }
    rel.push("blobs");
    rel.push(name);
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    match std::os::unix::fs::symlink(&rel, target) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(_) => copy(blob, target),
    }
}

#[cfg(not(unix))]
fn link_or_copy(blob: &Path, target: &Path, _depth: usize, _name: &str) -> Result<(), IngestError> {
    // huggingface_hub copies too where symlinks are not available (Windows
    // without developer mode)
    copy(blob, target)
}

fn copy(blob: &Path, target: &Path) -> Result<(), IngestError> {
    let bytes = vramfit_input::read_bytes(blob, "a cached blob", safetensors::MAX_INDEX_BYTES)?;
    write_atomic(target, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vramfit-hubcache-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn gguf_headers_are_cached_beside_the_snapshots_and_read_back() {
        let cache = tmp("gguf");
        let c = RepoCache::new(&cache, "acme/q");
        let commit = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(c.read_gguf_header(commit, "sub/m.gguf").unwrap(), None);
        let p = c.write_gguf_header(commit, "sub/m.gguf", b"GGUF\x03\0\0\0", 12345).unwrap();
        assert!(p.ends_with(format!("vramfit/gguf-headers/{commit}/sub/m.gguf.header")), "{}", p.display());
        assert!(!p.starts_with(c.snapshot_dir(commit)), "never under snapshots/");
        assert_eq!(c.read_gguf_header(commit, "sub/m.gguf").unwrap(), Some((b"GGUF\x03\0\0\0".to_vec(), 12345)));
        assert!(c.gguf_header_path(commit, "../escape.gguf").is_none());
        // a damaged file is an error naming it, never a wrong header
        std::fs::write(&p, b"something else\nGGUF").unwrap();
        let e = c.read_gguf_header(commit, "sub/m.gguf").unwrap_err().to_string();
        assert!(e.contains("m.gguf.header") && e.contains("delete it to refetch"), "{e}");
        let _ = std::fs::remove_dir_all(&cache);
    }

    #[test]
    fn layout_matches_huggingface_hub_and_reads_back() {
        let cache = tmp("layout");
        let c = RepoCache::new(&cache, "acme/tiny");
        let commit = "0123456789abcdef0123456789abcdef01234567";
        let p = c.write_file(commit, "config.json", b"{}", Some("abc123")).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"{}");
        assert_eq!(std::fs::read(cache.join("models--acme--tiny/blobs/abc123")).unwrap(), b"{}");
        #[cfg(unix)]
        assert_eq!(std::fs::read_link(&p).unwrap(), Path::new("../../blobs/abc123"));
        c.write_ref("main", commit).unwrap();
        assert_eq!(std::fs::read_to_string(cache.join("models--acme--tiny/refs/main")).unwrap(), commit);
        c.mark_absent(commit, "model.safetensors.index.json").unwrap();
        assert!(crate::hf_cache::marked_absent(&cache, "acme/tiny", commit, "model.safetensors.index.json"));
        let snap = crate::hf_cache::find_snapshot(&cache, "acme/tiny", None).unwrap().unwrap();
        assert_eq!(snap.commit, commit);

        let header = r#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        let mut prefix = (header.len() as u64).to_le_bytes().to_vec();
        prefix.extend_from_slice(header.as_bytes());
        let size = prefix.len() as u64 + 8;
        let h = HeaderSidecar::from_prefix("acme/tiny", commit, "model.safetensors", &prefix, size, None).unwrap();
        c.write_header(&h).unwrap();
        let back = c.read_header(commit, "model.safetensors").unwrap().unwrap();
        assert_eq!(back, h);
        assert_eq!(back.summary("x").unwrap().params, 2);
        // a sidecar for another file is not taken for this one
        std::fs::copy(
            c.sidecar_path(commit, "model.safetensors").unwrap(),
            c.sidecar_path(commit, "other.safetensors").unwrap(),
        )
        .unwrap();
        assert!(c.read_header(commit, "other.safetensors").is_err());
        let _ = std::fs::remove_dir_all(&cache);
    }

    #[test]
    fn names_that_leave_the_repo_are_refused() {
        let c = RepoCache::new(&tmp("names"), "acme/tiny");
        assert!(c.write_file("abc", "../x", b"", None).is_err());
        assert!(c.write_ref("../../x", "abc").is_err());
        assert!(c.sidecar_path("abc", "/etc/passwd").is_none());
        assert_eq!(blob_name("../x"), None);
    }
}
