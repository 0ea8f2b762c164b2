//! A GGUF on the Hub, read by range requests: its header (metadata and
//! tensor infos), never the weights. The first read is the Hub client's
//! `FIRST_READ_BYTES` (100 kB); while the parser answers "need N bytes" the prefix
//! grows to N, at least doubling (so a 20 MB header takes ~8 requests, not
//! thousands) but never more than [`MAX_READ_AHEAD`] past what the parser
//! asked for, so what is read past the header stays small. A split model
//! (`NAME-00001-of-0000n.gguf`) is read shard by shard, at the commit the
//! first read resolved, and merged as a local one is
//! ([`crate::gguf::merge_split`]).

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

/// One file's header at `revision`: (header, commit the Hub named).
fn read_one(
    client: &HubClient,
    repo: &str,
    revision: &str,
    file: &str,
    requests: &AtomicU64,
    received: &AtomicU64,
) -> Result<(GgufHeader, Option<String>), GgufFileError> {
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
    let size = read.file_size.ok_or_else(|| HubError::Protocol {
        url: url.clone(),
        reason: "no file size in the answer (Content-Range, X-Linked-Size or Content-Length)".into(),
    })?;
    match parse(&read.bytes, size) {
        Ok(Parsed::Complete(h)) => Ok((*h, read.commit)),
        Ok(Parsed::NeedMore { bytes }) => Err(GgufFileError::Header {
            file: label,
            error: GgufError::PastEnd {
                field: "header".into(),
                at: read.bytes.len() as u64,
                needed: bytes,
                file_len: size,
            },
        }),
        Err(error) => Err(GgufFileError::Header { file: label, error }),
    }
}

/// Read `file` of `repo` at `revision` (every shard of a split model).
pub fn read_gguf(client: &HubClient, repo: &str, revision: &str, file: &str) -> Result<HubGguf, GgufFileError> {
    let requests = AtomicU64::new(0);
    let received = AtomicU64::new(0);
    let (first, commit) = read_one(client, repo, revision, file, &requests, &received)?;
    let commit =
        match commit {
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
    let mut shards = 1;
    // later shards at the commit, so they match the first
    let header = merge_split(Path::new(file), first, &mut |p: &Path| {
        shards += 1;
        let name = p.to_string_lossy().replace('\\', "/");
        read_one(client, repo, &commit, &name, &requests, &received).map(|(h, _)| h)
    })?;
    Ok(HubGguf {
        repo: repo.into(),
        revision: revision.into(),
        commit,
        file: file.into(),
        header,
        shards,
        requests: requests.load(Ordering::Relaxed),
        bytes_received: received.load(Ordering::Relaxed),
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
