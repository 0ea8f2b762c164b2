//! Fetch a model's config and safetensors headers from the Hub and cache
//! them: `config.json`, then `model.safetensors.index.json` (or the single
//! `model.safetensors`), then each shard's header by range requests — the
//! first [`FIRST_READ_BYTES`], then exactly the rest of the header if it is
//! longer. Never the tensor data.

use super::cache::{HeaderSidecar, RepoCache};
use super::http::{HubClient, FIRST_READ_BYTES};
use super::HubError;
use crate::error::IngestError;
use crate::hf_cache::is_commit;
use crate::safetensors::{self, SafetensorsSummary};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// Shards whose headers are read at once.
const PARALLEL_READS: usize = 8;

/// What a fetch brought back.
#[derive(Debug, Clone)]
pub struct FetchedModel {
    pub repo: String,
    pub revision: String,
    pub commit: String,
    pub config: Vec<u8>,
    /// summed headers; `None` when the repo has no safetensors files
    pub checkpoint: Option<SafetensorsSummary>,
    /// sentences for the user (what was and was not found)
    pub notes: Vec<String>,
    /// the snapshot folder written, or why the cache could not be written
    pub cached: Result<PathBuf, String>,
    /// HTTP requests made and body bytes received, for the record
    pub requests: u64,
    pub bytes_received: u64,
}

struct Header {
    file: String,
    prefix: Vec<u8>,
    file_size: u64,
    etag: Option<String>,
}

/// Per shard index, its header (or absence, or error).
type ShardResults = Mutex<Vec<(usize, Result<Option<Header>, IngestError>)>>;

struct Counter {
    requests: AtomicU64,
    bytes: AtomicU64,
}

impl Counter {
    fn add(&self, r: &Option<super::RangeRead>) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if let Some(r) = r {
            self.bytes.fetch_add(r.bytes.len() as u64, Ordering::Relaxed);
        }
    }
}

/// Fetch `repo` at `revision` through `client` (within its deadline, what it
/// has done reported on `progress` once it takes more than a second) and
/// write it to the cache.
pub fn fetch_model(
    client: &HubClient,
    repo: &str,
    revision: &str,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<FetchedModel, IngestError> {
    let endpoint = client.settings().endpoint.clone();
    progress(&format!(
        "fetching {repo} (revision {revision}) from {endpoint}: config.json and safetensors headers, not the weights"
    ));
    client.with_progress(&format!("fetching {repo}"), progress, || fetch(client, repo, revision, progress))
}

fn fetch(
    client: &HubClient,
    repo: &str,
    revision: &str,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<FetchedModel, IngestError> {
    let endpoint = client.settings().endpoint.clone();
    let count = Counter { requests: AtomicU64::new(0), bytes: AtomicU64::new(0) };
    let config = client.get_file(repo, revision, "config.json", crate::config::MAX_CONFIG_BYTES as u64)?;
    count.add(&config);
    let config = config.ok_or_else(|| HubError::NoConfig {
        repo: repo.into(),
        revision: revision.into(),
        endpoint: endpoint.clone(),
    })?;
    let commit =
        match config.commit.clone() {
            Some(c) if c.len() >= 7 && c.len() <= 64 && c.chars().all(|c| c.is_ascii_hexdigit()) => c,
            Some(c) => {
                return Err(HubError::Protocol {
                    url: client.file_url(repo, revision, "config.json"),
                    reason: format!("X-Repo-Commit '{}' is not a commit hash", c.escape_debug()),
                }
                .into())
            }
            None if is_commit(revision) => revision.to_string(),
            None => return Err(HubError::Protocol {
                url: client.file_url(repo, revision, "config.json"),
                reason:
                    "the answer has no X-Repo-Commit header: is HF_ENDPOINT a Hugging Face Hub (or a mirror of one)?"
                        .into(),
            }
            .into()),
        };
    let short = &commit[..commit.len().min(12)];
    let mut notes = Vec::new();

    // Later files are read at the commit, so they match the config.
    let index_name = "model.safetensors.index.json";
    let index = absent_on_bare_404(client.get_file(repo, &commit, index_name, safetensors::MAX_INDEX_BYTES))?;
    count.add(&index);
    let shards = match &index {
        Some(i) => safetensors::index_shards(&i.bytes, &format!("{repo}@{short}/{index_name}"))?,
        None => vec!["model.safetensors".to_string()],
    };
    if shards.len() > 1 {
        progress(&format!("reading the headers of {} safetensors shards by range requests", shards.len()));
    }
    client.status().expect_files(shards.len() as u64);
    let headers = read_headers(client, repo, &commit, &shards, &count)?;
    let single_missing = index.is_none() && headers.is_empty();
    let checkpoint = if single_missing {
        notes.push(format!(
            "{repo} has no safetensors files at {short} (model.safetensors.index.json and model.safetensors are absent): the parameter count comes from config.json alone"
        ));
        None
    } else {
        let mut total = SafetensorsSummary::default();
        for h in &headers {
            let label = format!("{repo}@{short}/{}", h.file);
            total.add(safetensors::summary_from_prefix(&h.prefix, h.file_size, &label)?, &label)?;
        }
        Some(total)
    };

    let cached = match &client.settings().cache_dir {
        None => Err("no cache folder: set HF_HOME or HF_HUB_CACHE".to_string()),
        Some(dir) => {
            let cache = RepoCache::new(dir, repo);
            write_cache(&cache, revision, &commit, &config, index.as_ref(), &headers, single_missing)
                .map(|()| cache.snapshot_dir(&commit))
                .map_err(|e| e.to_string())
        }
    };
    if let Err(why) = &cached {
        notes.push(format!("could not write the Hugging Face cache ({why}): the next run fetches again"));
    }
    Ok(FetchedModel {
        repo: repo.into(),
        revision: revision.into(),
        commit,
        config: config.bytes,
        checkpoint,
        notes,
        cached,
        requests: count.requests.load(Ordering::Relaxed),
        bytes_received: count.bytes.load(Ordering::Relaxed),
    })
}

/// The first `8 + n` bytes of one safetensors file; `None` if it is absent.
/// A file read once config.json came from this endpoint with its commit: a
/// 404 without the Hub's `X-Error-Code` is then a file the repository does
/// not have (a mirror or plain file server answers so), not a server that
/// is no Hub. The optional index and the first read of each safetensors
/// file go through here, so a single-file model on such a mirror is read.
fn absent_on_bare_404<T>(r: Result<Option<T>, HubError>) -> Result<Option<T>, HubError> {
    match r {
        Err(HubError::Status { status: 404, .. }) => Ok(None),
        other => other,
    }
}

fn read_header(
    client: &HubClient,
    repo: &str,
    commit: &str,
    file: &str,
    count: &Counter,
) -> Result<Option<Header>, IngestError> {
    let label = format!("{repo}@{}/{file}", &commit[..commit.len().min(12)]);
    let first = absent_on_bare_404(client.read_range(repo, commit, file, 0, FIRST_READ_BYTES))?;
    count.add(&first);
    let Some(first) = first else { return Ok(None) };
    let url = client.file_url(repo, commit, file);
    let size = first.file_size.ok_or_else(|| HubError::Protocol {
        url: url.clone(),
        reason: "no file size in the answer (Content-Range, X-Linked-Size or Content-Length)".into(),
    })?;
    let end = safetensors::header_end(&first.bytes, Some(size), &label)?;
    let got = first.bytes.len() as u64;
    let mut prefix = first.bytes;
    if end > got {
        // exactly the rest of the header: bytes got..end-1 (inclusive range)
        let rest = client.read_range(repo, commit, file, got, end - got)?;
        count.add(&rest);
        let rest = rest.ok_or_else(|| HubError::Protocol {
            url: url.clone(),
            reason: "the file disappeared between two range requests".into(),
        })?;
        if rest.bytes.len() as u64 != end - got {
            return Err(HubError::Protocol {
                url,
                reason: format!("asked for {} header bytes, received {}", end - got, rest.bytes.len()),
            }
            .into());
        }
        prefix.extend_from_slice(&rest.bytes);
    } else {
        prefix.truncate(end as usize);
    }
    client.status().file_done();
    Ok(Some(Header { file: file.into(), prefix, file_size: size, etag: first.etag }))
}

/// Headers of every shard (a few at a time); a listed shard that is absent
/// is an error, the single `model.safetensors` being absent is not.
fn read_headers(
    client: &HubClient,
    repo: &str,
    commit: &str,
    shards: &[String],
    count: &Counter,
) -> Result<Vec<Header>, IngestError> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: ShardResults = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL_READS.min(shards.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= shards.len() || failed.load(Ordering::Relaxed) {
                    break;
                }
                let r = read_header(client, repo, commit, &shards[i], count);
                if r.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                results.lock().unwrap_or_else(|p| p.into_inner()).push((i, r));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|(i, _)| *i);
    let listed = !(shards.len() == 1 && shards[0] == "model.safetensors");
    let mut out = Vec::with_capacity(shards.len());
    for (i, r) in results {
        match r? {
            Some(h) => out.push(h),
            None if listed => {
                return Err(IngestError::Invalid {
                    file: format!("{repo}@{}/model.safetensors.index.json", &commit[..commit.len().min(12)]),
                    reason: format!("lists shard '{}', which the Hub does not have", shards[i].escape_debug()),
                })
            }
            None => {}
        }
    }
    Ok(out)
}

fn write_cache(
    cache: &RepoCache,
    revision: &str,
    commit: &str,
    config: &super::RangeRead,
    index: Option<&super::RangeRead>,
    headers: &[Header],
    single_missing: bool,
) -> Result<(), IngestError> {
    cache.write_file(commit, "config.json", &config.bytes, config.etag.as_deref())?;
    match index {
        Some(i) => {
            cache.write_file(commit, "model.safetensors.index.json", &i.bytes, i.etag.as_deref())?;
        }
        None => cache.mark_absent(commit, "model.safetensors.index.json")?,
    }
    if single_missing {
        cache.mark_absent(commit, "model.safetensors")?;
    }
    for h in headers {
        let sidecar =
            HeaderSidecar::from_prefix(&cache.repo_id, commit, &h.file, &h.prefix, h.file_size, h.etag.clone())?;
        cache.write_header(&sidecar)?;
    }
    // the ref last: a run that stops halfway leaves no ref to a partial snapshot
    cache.write_ref(revision, commit)
}
