//! A GGUF on the Hub, read by range requests: its header (metadata and
//! tensor infos), never the weights. The first read is the Hub client's
//! `FIRST_READ_BYTES` (100 kB); while the parser answers "need N bytes" the prefix
//! grows to N, at least doubling (so a 20 MB header takes ~8 requests, not
//! thousands) but never more than [`MAX_READ_AHEAD`] past what the parser
//! asked for, so what is read past the header stays small. A split model
//! (`NAME-00001-of-0000n.gguf`) is read shard by shard, at the commit the
//! first read resolved, and merged as a local one is
//! ([`crate::gguf::merge_split`]). The headers are cached in the Hugging
//! Face cache (`vramfit/gguf-headers/<commit>/<file>.header`, with
//! `refs/<revision>`), so the next run — also `--offline` — reads them
//! from disk ([`read_cached_gguf`]).

use super::cache::RepoCache;
use super::http::HubClient;
use super::HubError;
use crate::gguf::{limits, merge_split, parse, GgufError, GgufFileError, GgufHeader, Parsed};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Most bytes read past what the parser asked for, per request.
pub const MAX_READ_AHEAD: u64 = 4 << 20;

/// A Hub GGUF's merged header and how it was read.
#[derive(Debug, Clone)]
pub struct HubGguf {
    pub repo: String,
    pub revision: String,
    /// the commit the revision resolved to (`X-Repo-Commit`)
    pub commit: String,
    pub file: String,
    pub header: GgufHeader,
    pub shards: u64,
    /// HTTP range requests made and body bytes received
    pub requests: u64,
    pub bytes_received: u64,
    /// why the header could not be cached, when it could not
    pub cache_note: Option<String>,
}

impl HubGguf {
    /// `org/name@<commit>/file.gguf`, as reports show it.
    pub fn label(&self) -> String {
        format!("{}@{}/{}", self.repo, &self.commit[..self.commit.len().min(12)], self.file)
    }
}

/// How many bytes from the start to read next, given the prefix read and
/// the file's size: `None` when the parser needs no more (complete, or an
/// error it will report).
fn next_read(prefix: &[u8], file_size: Option<u64>) -> Option<u64> {
    let size = file_size?;
    match parse(prefix, size) {
        Ok(Parsed::NeedMore { bytes }) => {
            let have = prefix.len() as u64;
            let grown = bytes.max(have.saturating_mul(2)).min(bytes.saturating_add(MAX_READ_AHEAD));
            Some(grown.min(size).min(limits::MAX_HEADER_BYTES).max(bytes))
        }
        _ => None,
    }
}

/// One file as read from the Hub: its header, the header's bytes (for the
/// cache), the file's size and the commit the Hub named.
struct OneFile {
    header: GgufHeader,
    bytes: Vec<u8>,
    file_size: u64,
    commit: Option<String>,
}

/// One file's header at `revision`, by range requests.
fn read_one(
    client: &HubClient,
    repo: &str,
    revision: &str,
    file: &str,
    requests: &AtomicU64,
    received: &AtomicU64,
) -> Result<OneFile, GgufFileError> {
    let label = format!("{repo}/{file}");
    let url = client.file_url(repo, revision, file);
    let mut grown = 0u64;
    let mut need = |prefix: &[u8], size: Option<u64>| {
        let next = next_read(prefix, size);
        // each answer that asks for more costs one more range request
        grown += u64::from(next.is_some());
        next
    };
    let read = client.read_prefix(repo, revision, file, limits::MAX_HEADER_BYTES, &mut need)?.ok_or_else(|| {
        GgufFileError::Split {
            file: label.clone(),
            message: format!("the repo has no such file at revision '{revision}' (check the name on {url})"),
        }
    })?;
    requests.fetch_add(1 + grown, Ordering::Relaxed);
    received.fetch_add(read.bytes.len() as u64, Ordering::Relaxed);
    client.status().file_done();
    let size = read.file_size.ok_or_else(|| HubError::Protocol {
        url: url.clone(),
        reason: "no file size in the answer (Content-Range, X-Linked-Size or Content-Length)".into(),
    })?;
    let header = parse_complete(&read.bytes, size, &label)?;
    let mut bytes = read.bytes;
    bytes.truncate(header.header_bytes as usize);
    Ok(OneFile { header, bytes, file_size: size, commit: read.commit })
}

/// The header in `bytes` (the file's first bytes) of a file of `size`.
fn parse_complete(bytes: &[u8], size: u64, label: &str) -> Result<GgufHeader, GgufFileError> {
    match parse(bytes, size) {
        Ok(Parsed::Complete(h)) => Ok(*h),
        Ok(Parsed::NeedMore { bytes: needed }) => Err(GgufFileError::Header {
            file: label.to_string(),
            error: GgufError::PastEnd { field: "header".into(), at: bytes.len() as u64, needed, file_len: size },
        }),
        Err(error) => Err(GgufFileError::Header { file: label.to_string(), error }),
    }
}

/// A Hub GGUF from the local Hugging Face cache (its header as an earlier
/// run cached it, every shard of a split model), at the commit
/// `refs/<revision>` names: `None` when anything is missing.
pub fn read_cached_gguf(
    cache_dir: &Path,
    repo: &str,
    revision: &str,
    file: &str,
) -> Result<Option<HubGguf>, GgufFileError> {
    let cache = RepoCache::new(cache_dir, repo);
    let commit = if crate::hf_cache::is_commit(revision) {
        revision.to_string()
    } else {
        match crate::hf_cache::read_ref(&cache.dir, revision)? {
            Some(c) => c,
            None => return Ok(None),
        }
    };
    let one = |name: &str| -> Result<Option<GgufHeader>, GgufFileError> {
        match cache.read_gguf_header(&commit, name)? {
            Some((bytes, size)) => Ok(Some(parse_complete(&bytes, size, &format!("{repo}/{name} (cached)"))?)),
            None => Ok(None),
        }
    };
    let Some(first) = one(file)? else { return Ok(None) };
    let mut shards = 1;
    let mut missing = false;
    let header = merge_split(Path::new(file), first, &mut |p: &Path| {
        shards += 1;
        let name = p.to_string_lossy().replace('\\', "/");
        match one(&name)? {
            Some(h) => Ok(h),
            None => {
                missing = true;
                Err(GgufFileError::Split { file: name, message: "not cached".into() })
            }
        }
    });
    let header = match header {
        Ok(h) => h,
        Err(_) if missing => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(Some(HubGguf {
        repo: repo.into(),
        revision: revision.into(),
        commit,
        file: file.into(),
        header,
        shards,
        requests: 0,
        bytes_received: 0,
        cache_note: None,
    }))
}

/// Read `file` of `repo` at `revision` (every shard of a split model) from
/// the Hub, and cache the headers (and the revision's commit) in the Hugging
/// Face cache when there is one, for [`read_cached_gguf`]. A cache that
/// cannot be written is a note in `cache_note`, not an error.
///
/// Within the client's deadline; once it takes more than a second, what it
/// has read is reported on `progress`. Texts of the file that quote the
/// token (names, metadata strings) have its value replaced.
pub fn read_gguf(
    client: &HubClient,
    repo: &str,
    revision: &str,
    file: &str,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<HubGguf, GgufFileError> {
    let token = client.settings().token.clone();
    let read = client.with_progress(&format!("reading the header of {repo}/{file}"), progress, || {
        read_gguf_now(client, repo, revision, file)
    });
    match read {
        Ok(mut g) => {
            redact_header(&mut g.header, token.as_deref());
            Ok(g)
        }
        Err(e) => {
            let text = e.to_string();
            let clean = super::redact(&text, token.as_deref());
            Err(if clean == text { e } else { GgufFileError::Hub(HubError::Redacted { message: clean }) })
        }
    }
}

/// Replace the token's value in the header's strings (metadata and tensor
/// names): an endpoint that echoes it must not get it printed.
fn redact_header(h: &mut crate::gguf::GgufHeader, token: Option<&str>) {
    let Some(t) = token.filter(|t| !t.is_empty()) else { return };
    fn strings(v: &mut crate::gguf::MetaValue, t: &str) {
        match v {
            crate::gguf::MetaValue::String(s) if s.contains(t) => *s = super::redact(s, Some(t)),
            crate::gguf::MetaValue::Array { values: Some(vals), .. } => vals.iter_mut().for_each(|v| strings(v, t)),
            _ => {}
        }
    }
    h.metadata.values_mut().for_each(|v| strings(v, t));
    for tensor in &mut h.tensors {
        if tensor.name.contains(t) {
            tensor.name = super::redact(&tensor.name, Some(t));
        }
    }
}

fn read_gguf_now(client: &HubClient, repo: &str, revision: &str, file: &str) -> Result<HubGguf, GgufFileError> {
    let requests = AtomicU64::new(0);
    let received = AtomicU64::new(0);
    let first = read_one(client, repo, revision, file, &requests, &received)?;
    let commit =
        match first.commit.clone() {
            Some(c) if (7..=64).contains(&c.len()) && c.chars().all(|c| c.is_ascii_hexdigit()) => c,
            Some(c) => {
                return Err(HubError::Protocol {
                    url: client.file_url(repo, revision, file),
                    reason: format!("X-Repo-Commit '{}' is not a commit hash", c.escape_debug()),
                }
                .into())
            }
            None if crate::hf_cache::is_commit(revision) => revision.to_string(),
            None => return Err(HubError::Protocol {
                url: client.file_url(repo, revision, file),
                reason:
                    "the answer has no X-Repo-Commit header: is HF_ENDPOINT a Hugging Face Hub (or a mirror of one)?"
                        .into(),
            }
            .into()),
        };
    let mut read: Vec<(String, OneFile)> = Vec::new();
    let first_header = first.header.clone();
    read.push((file.to_string(), first));
    // later shards at the commit, so they match the first
    let header = merge_split(Path::new(file), first_header, &mut |p: &Path| {
        let name = p.to_string_lossy().replace('\\', "/");
        let one = read_one(client, repo, &commit, &name, &requests, &received)?;
        let h = one.header.clone();
        read.push((name, one));
        Ok(h)
    })?;
    let cache_note = match &client.settings().cache_dir {
        None => {
            Some("no Hugging Face cache folder (set HF_HOME or HF_HUB_CACHE): the next run reads the Hub again".into())
        }
        Some(dir) => {
            let cache = RepoCache::new(dir, repo);
            let written = read
                .iter()
                .try_for_each(|(name, one)| {
                    cache.write_gguf_header(&commit, name, &one.bytes, one.file_size).map(|_| ())
                })
                .and_then(|()| cache.write_ref(revision, &commit));
            written
                .err()
                .map(|e| format!("could not write the Hugging Face cache ({e}): the next run reads the Hub again"))
        }
    };
    Ok(HubGguf {
        repo: repo.into(),
        revision: revision.into(),
        commit,
        file: file.into(),
        header,
        shards: read.len() as u64,
        requests: requests.load(Ordering::Relaxed),
        bytes_received: received.load(Ordering::Relaxed),
        cache_note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parser_decides_when_to_stop() {
        // an invalid prefix needs no more (the parser reports the error)
        assert_eq!(next_read(b"NOTGGUF!", Some(1 << 20)), None);
        // no size known: the caller reports that
        assert_eq!(next_read(b"GGUF", None), None);
        // a valid start asks for more: at least double, within the file
        assert_eq!(next_read(b"GGUF\x03\0\0\0", Some(1000)), Some(16));
        assert_eq!(next_read(&[b'G', b'G', b'U', b'F', 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], Some(10)), None);
    }
}
