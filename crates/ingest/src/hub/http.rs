//! A small blocking Hub client on `ureq`: whole small files and byte ranges
//! of any file under `{endpoint}/{repo}/resolve/{revision}/{file}`.
//!
//! - Every request is bounded: `HF_HUB_DOWNLOAD_TIMEOUT` (10 s by default)
//!   per attempt, from connect to the last body byte, and a failed attempt
//!   (timeout, connection error, HTTP 5xx/429) is retried once. The whole
//!   fetch is bounded too: a client serves one fetch and stops it at its
//!   deadline (`VRAMFIT_HUB_FETCH_TIMEOUT`, 120 s by default), each attempt's
//!   timeout cut to what is left; [`HubClient::with_progress`] reports on
//!   stderr what a fetch has done once it runs past a second.
//! - Redirects are followed by hand (at most [`MAX_REDIRECTS`]): the Hub
//!   answers large files with a 302 to a CDN on another host. The token is
//!   sent only to the endpoint's own origin (scheme, host, port), so it is
//!   dropped on a cross-host redirect as huggingface_hub (requests) does.
//!   The repo's metadata (`X-Repo-Commit`, `X-Linked-Etag`/`ETag`,
//!   `X-Linked-Size`) is taken from the endpoint's answers, not the CDN's.
//!   A `Location` with another scheme than http(s) (`file:`, `ftp:`, …) is
//!   refused at once.
//! - An answer that is not valid HTTP (a malformed status line or header)
//!   is reported as such, not as a network failure; the token's value is
//!   replaced in every error text ([`super::redact`]).
//! - Bodies are read up to what was asked: a server that ignores `Range` and
//!   starts sending a 5 GB shard is cut off after the requested bytes.
//! - Errors map the Hub's `X-Error-Code` (GatedRepo, RepoNotFound,
//!   RevisionNotFound, EntryNotFound) to messages that say what to do.

use super::{redact, HubError, HubSettings};
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use ureq::http::{HeaderMap, Uri};

/// Redirect hops followed per request.
pub const MAX_REDIRECTS: u32 = 5;
/// Attempts per request (one retry).
pub const ATTEMPTS: u32 = 2;
/// First read of a file's prefix: `bytes=0-99999` (HTTP ranges are
/// inclusive). huggingface_hub asks `bytes=0-100000` and once compared the
/// header length with 100000 instead of the bytes received (its issue
/// #4602); callers here compare with `bytes.len()`.
pub const FIRST_READ_BYTES: u64 = 100_000;
/// Most bytes skipped from a `200` answer to a range request that does not
/// start at 0 (a server that ignores `Range`).
const MAX_SKIP_BYTES: u64 = 64 << 20;

/// Bytes of a Hub file and what the Hub said about it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RangeRead {
    pub bytes: Vec<u8>,
    /// size of the whole file (`Content-Range` total, `X-Linked-Size` or
    /// the `Content-Length` of a full answer)
    pub file_size: Option<u64>,
    /// `X-Repo-Commit`: the commit the revision resolved to
    pub commit: Option<String>,
    /// `X-Linked-Etag` (LFS sha256) or `ETag`, unquoted
    pub etag: Option<String>,
}

/// How many bytes from the start a prefix parser needs, given the prefix
/// read so far and the file's size (see [`HubClient::read_prefix`]).
pub type PrefixNeed<'a> = dyn FnMut(&[u8], Option<u64>) -> Option<u64> + 'a;

/// `(scheme, host, port)` of a URL.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin(String, String, u16);

fn origin(url: &str) -> Option<Origin> {
    let u: Uri = url.parse().ok()?;
    let scheme = u.scheme_str()?.to_ascii_lowercase();
    let host = u.host()?.to_ascii_lowercase();
    let port = u.port_u16().unwrap_or(if scheme == "https" { 443 } else { 80 });
    Some(Origin(scheme, host, port))
}

/// The scheme of an absolute URL reference (RFC 3986: a letter, then
/// letters, digits, `+`, `-`, `.`, before the first `:`), lowercased.
fn scheme_of(reference: &str) -> Option<String> {
    let (scheme, _) = reference.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)))
        .then(|| scheme.to_ascii_lowercase())
}

/// Resolve a `Location` against the URL it answered; `Err(why)` for a
/// location that is not an http(s) URL (refused, never joined as a path).
fn join(base: &str, location: &str) -> Result<String, String> {
    let unusable = || format!("redirect to an unusable Location '{}'", location.chars().take(200).collect::<String>());
    match scheme_of(location).as_deref() {
        Some("http") | Some("https") => return Ok(location.to_string()),
        Some(other) => {
            return Err(format!(
                "redirect to '{}', a {other}: URL: only http(s) redirects are followed",
                location.chars().take(200).collect::<String>()
            ))
        }
        None => {}
    }
    let u: Uri = base.parse().map_err(|_| unusable())?;
    let (scheme, authority) = (u.scheme_str().ok_or_else(unusable)?, u.authority().ok_or_else(unusable)?);
    let root = format!("{scheme}://{}", authority.as_str());
    if let Some(rest) = location.strip_prefix("//") {
        return Ok(format!("{scheme}://{rest}"));
    }
    if location.starts_with('/') {
        return Ok(format!("{root}{location}"));
    }
    let path = u.path();
    let dir = &path[..path.rfind('/').map(|i| i + 1).unwrap_or(0)];
    Ok(format!("{root}{dir}{location}"))
}

/// Percent-encode for a URL path segment (`keep_slash` for file paths).
fn encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) || (keep_slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A parsed `Content-Range` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContentRange {
    /// first and last byte (inclusive); `None` for `bytes */total` (a 416 answer)
    pub span: Option<(u64, u64)>,
    /// the whole file's size; `None` for `*`
    pub total: Option<u64>,
}

/// `Content-Range: bytes a-b/total` (or `bytes */total`); `None` when
/// malformed or inconsistent (`b < a`, `b ≥ total`).
pub fn parse_content_range(v: &str) -> Option<ContentRange> {
    let rest = v.trim().strip_prefix("bytes")?.trim_start();
    let (span, total) = rest.split_once('/')?;
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse::<u64>().ok()?),
    };
    let span = match span.trim() {
        "*" => None,
        s => {
            let (a, b) = s.split_once('-')?;
            let (a, b) = (a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?);
            if b < a || total.is_some_and(|t| b >= t) {
                return None;
            }
            Some((a, b))
        }
    };
    Some(ContentRange { span, total })
}

fn header<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok()).map(str::trim)
}

fn unquote_etag(e: &str) -> String {
    e.trim().trim_start_matches("W/").trim_matches('"').to_string()
}

/// A server-sent text made safe to print: the token's value replaced (before
/// the cut, so no part of it survives), control characters escaped, cut.
fn shown(s: &str, token: Option<&str>) -> String {
    let cut: String = redact(s, token).chars().take(200).collect();
    cut.escape_debug().to_string()
}

/// First progress line after this long (a fetch that takes more than a
/// second says what it is doing).
pub const PROGRESS_AFTER: Duration = Duration::from_secs(1);
/// Then one line this often.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// What a fetch has done so far (read by the progress reporter).
#[derive(Debug, Default)]
pub struct FetchStatus {
    requests: AtomicU64,
    bytes: AtomicU64,
    files_total: AtomicU64,
    files_done: AtomicU64,
}

impl FetchStatus {
    /// The fetch will read `n` files (shard headers).
    pub fn expect_files(&self, n: u64) {
        self.files_total.store(n, Ordering::Relaxed);
    }

    /// One more file read.
    pub fn file_done(&self) {
        self.files_done.fetch_add(1, Ordering::Relaxed);
    }

    /// `12 of 80 files, 25 requests, 1.2 MiB received`.
    pub fn summary(&self) -> String {
        let (done, total) = (self.files_done.load(Ordering::Relaxed), self.files_total.load(Ordering::Relaxed));
        let files = if total > 0 { format!("{done} of {total} files") } else { format!("{done} files") };
        let bytes = self.bytes.load(Ordering::Relaxed);
        format!(
            "{files} read, {} requests, {:.1} MiB received",
            self.requests.load(Ordering::Relaxed),
            bytes as f64 / (1u64 << 20) as f64
        )
    }
}

/// The Hub client. One client serves one fetch: its deadline runs from
/// [`HubClient::new`].
pub struct HubClient {
    settings: HubSettings,
    agent: ureq::Agent,
    origin: Origin,
    started: Instant,
    deadline: Instant,
    status: FetchStatus,
}

impl HubClient {
    pub fn new(settings: HubSettings) -> Result<HubClient, HubError> {
        let origin = origin(&settings.endpoint).ok_or_else(|| HubError::Settings {
            what: "HF_ENDPOINT".into(),
            reason: format!("'{}' is not a URL with a host", shown(&settings.endpoint, None)),
        })?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(settings.timeout))
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(format!("vramfit/{}", env!("CARGO_PKG_VERSION")))
            .build()
            .into();
        let started = Instant::now();
        let deadline = started + settings.fetch_timeout;
        Ok(HubClient { settings, agent, origin, started, deadline, status: FetchStatus::default() })
    }

    pub fn settings(&self) -> &HubSettings {
        &self.settings
    }

    /// What this fetch has done so far.
    pub fn status(&self) -> &FetchStatus {
        &self.status
    }

    /// `s` made safe to print: the token's value replaced, cut, escaped.
    fn shown(&self, s: &str) -> String {
        shown(s, self.settings.token.as_deref())
    }

    /// Run `work` (the fetch); once it has run for [`PROGRESS_AFTER`],
    /// report `what` and the fetch's status on `progress` every
    /// [`PROGRESS_EVERY`] until it returns.
    pub fn with_progress<T>(&self, what: &str, progress: &(dyn Fn(&str) + Sync), work: impl FnOnce() -> T) -> T {
        let (done, finished) = std::sync::mpsc::channel::<()>();
        std::thread::scope(|s| {
            s.spawn(move || {
                let mut wait = PROGRESS_AFTER;
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(wait) {
                    progress(&format!(
                        "{what}: {} in {:.0} s (the fetch stops at {} s: {})",
                        self.status.summary(),
                        self.started.elapsed().as_secs_f64(),
                        self.settings.fetch_timeout.as_secs_f64(),
                        super::FETCH_TIMEOUT_VAR
                    ));
                    wait = PROGRESS_EVERY;
                }
            });
            let r = work();
            drop(done);
            r
        })
    }

    /// `{endpoint}/{repo}/resolve/{revision}/{file}`.
    pub fn file_url(&self, repo: &str, revision: &str, file: &str) -> String {
        format!("{}/{}/resolve/{}/{}", self.settings.endpoint, repo, encode(revision, false), encode(file, true))
    }

    /// A whole file of at most `cap` bytes; `None` when the Hub says the
    /// file does not exist at that revision.
    pub fn get_file(&self, repo: &str, revision: &str, file: &str, cap: u64) -> Result<Option<RangeRead>, HubError> {
        self.request(repo, revision, &self.file_url(repo, revision, file), None, cap)
    }

    /// `len` bytes of a Hub file from `start` (fewer at the end of the
    /// file); `None` when the file does not exist. This is the generic
    /// ranged read behind safetensors headers, and for any other format
    /// whose parser says how many bytes of the file it needs (GGUF).
    pub fn read_range(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
        start: u64,
        len: u64,
    ) -> Result<Option<RangeRead>, HubError> {
        if len == 0 {
            return Ok(Some(RangeRead::default()));
        }
        let end = start.checked_add(len - 1).ok_or_else(|| HubError::Protocol {
            url: self.file_url(repo, revision, file),
            reason: "byte range past 2^64".into(),
        })?;
        self.request(repo, revision, &self.file_url(repo, revision, file), Some((start, end)), len)
    }

    /// A prefix of a Hub file, grown until `needed` is satisfied: after each
    /// read, `needed(prefix, file_size)` returns how many bytes from the
    /// start it needs (`None` or a number ≤ the prefix: enough), and exactly
    /// the missing bytes are fetched. A parser that says how many bytes it
    /// needs (GGUF: header, then metadata of unknown length) reads only what
    /// it parses. More than `cap` bytes is an error; a file that ends first
    /// returns the short prefix (the parser reports the truncation). `None`
    /// when the file does not exist.
    pub fn read_prefix(
        &self,
        repo: &str,
        revision: &str,
        file: &str,
        cap: u64,
        needed: &mut PrefixNeed,
    ) -> Result<Option<RangeRead>, HubError> {
        let Some(mut out) = self.read_range(repo, revision, file, 0, FIRST_READ_BYTES.min(cap))? else {
            return Ok(None);
        };
        loop {
            let have = out.bytes.len() as u64;
            let want = match needed(&out.bytes, out.file_size) {
                Some(n) if n > have => n,
                _ => return Ok(Some(out)),
            };
            if want > cap {
                return Err(HubError::TooLarge {
                    url: self.file_url(repo, revision, file),
                    what: format!("the part of {file} to parse ({want} bytes)"),
                    limit: cap,
                });
            }
            let Some(more) = self.read_range(repo, revision, file, have, want - have)? else {
                return Ok(Some(out));
            };
            if more.bytes.is_empty() {
                return Ok(Some(out));
            }
            out.bytes.extend_from_slice(&more.bytes);
            out.file_size = more.file_size.or(out.file_size);
        }
    }

    fn request(
        &self,
        repo: &str,
        revision: &str,
        url: &str,
        range: Option<(u64, u64)>,
        cap: u64,
    ) -> Result<Option<RangeRead>, HubError> {
        self.status.requests.fetch_add(1, Ordering::Relaxed);
        let mut attempt = 1;
        let r = loop {
            if Instant::now() >= self.deadline {
                break Err(self.deadline_error(url));
            }
            match self.request_once(repo, revision, url, range, cap) {
                // the attempt's timeout was cut to the deadline: the fetch is over
                Err(e) if e.is_transient() && Instant::now() >= self.deadline => break Err(self.deadline_error(url)),
                Err(e) if e.is_transient() && attempt < ATTEMPTS => {
                    attempt += 1;
                    std::thread::sleep(
                        Duration::from_millis(250).min(self.deadline.saturating_duration_since(Instant::now())),
                    );
                }
                r => break r.map_err(|e| e.with_attempts(attempt)),
            }
        };
        if let Ok(Some(read)) = &r {
            self.status.bytes.fetch_add(read.bytes.len() as u64, Ordering::Relaxed);
        }
        r.map_err(|e| self.redacted(e))
    }

    fn deadline_error(&self, url: &str) -> HubError {
        HubError::Deadline {
            url: url.into(),
            secs: format!("{}", self.settings.fetch_timeout.as_secs_f64()),
            done: self.status.summary(),
        }
    }

    /// `e`, or the same text with the token's value replaced when it quotes it.
    fn redacted(&self, e: HubError) -> HubError {
        let text = e.to_string();
        let clean = redact(&text, self.settings.token.as_deref());
        if clean == text {
            e
        } else {
            HubError::Redacted { message: clean }
        }
    }

    fn request_once(
        &self,
        repo: &str,
        revision: &str,
        first_url: &str,
        range: Option<(u64, u64)>,
        cap: u64,
    ) -> Result<Option<RangeRead>, HubError> {
        let mut url = first_url.to_string();
        let mut out = RangeRead::default();
        for _ in 0..=MAX_REDIRECTS {
            let to_endpoint = origin(&url).as_ref() == Some(&self.origin);
            // each attempt gets its timeout, cut to what is left of the fetch's deadline
            let left = self.deadline.saturating_duration_since(Instant::now());
            let mut req = self.agent.get(&url).config().timeout_global(Some(self.settings.timeout.min(left))).build();
            if let Some((a, b)) = range {
                req = req.header("Range", format!("bytes={a}-{b}"));
            }
            if to_endpoint {
                if let Some(t) = &self.settings.token {
                    req = req.header("Authorization", format!("Bearer {t}"));
                }
            }
            let resp = req.call().map_err(|e| self.net_error(&url, e))?;
            let status = resp.status().as_u16();
            let h = resp.headers();
            if to_endpoint {
                if let Some(c) = header(h, "x-repo-commit") {
                    out.commit.get_or_insert_with(|| c.to_string());
                }
                if let Some(e) = header(h, "x-linked-etag").or_else(|| header(h, "etag")) {
                    out.etag.get_or_insert_with(|| unquote_etag(e));
                }
                if let Some(s) = header(h, "x-linked-size").and_then(|s| s.parse::<u64>().ok()) {
                    out.file_size.get_or_insert(s);
                }
            }
            if (300..400).contains(&status) {
                let loc = header(h, "location").ok_or_else(|| HubError::Protocol {
                    url: url.clone(),
                    reason: format!("HTTP {status} redirect without a Location"),
                })?;
                url =
                    join(&url, loc).map_err(|why| HubError::Protocol { url: url.clone(), reason: self.shown(&why) })?;
                continue;
            }
            match status {
                200 | 206 => return self.read_body(resp, &url, status, range, cap, out).map(Some),
                416 => {
                    // the range starts at or past the end: an empty read with the size
                    let total =
                        header(resp.headers(), "content-range").and_then(parse_content_range).and_then(|r| r.total);
                    out.file_size = total.or(out.file_size);
                    return Ok(Some(out));
                }
                _ => return self.status_error(repo, revision, &url, status, h),
            }
        }
        Err(HubError::Protocol { url: first_url.into(), reason: format!("more than {MAX_REDIRECTS} redirects") })
    }

    fn read_body(
        &self,
        resp: ureq::http::Response<ureq::Body>,
        url: &str,
        status: u16,
        range: Option<(u64, u64)>,
        cap: u64,
        mut out: RangeRead,
    ) -> Result<RangeRead, HubError> {
        let h = resp.headers();
        let length = header(h, "content-length").and_then(|s| s.parse::<u64>().ok());
        let mut skip = 0;
        match (status, range) {
            (206, Some((a, _))) => {
                let cr = header(h, "content-range").and_then(parse_content_range);
                let Some(ContentRange { span: Some((start, _)), total }) = cr else {
                    return Err(HubError::Protocol {
                        url: url.into(),
                        reason: "HTTP 206 without a usable Content-Range".into(),
                    });
                };
                if start != a {
                    return Err(HubError::Protocol {
                        url: url.into(),
                        reason: format!("asked for bytes from {a}, the server sent bytes from {start}"),
                    });
                }
                if total.is_some() {
                    out.file_size = total;
                }
            }
            (200, Some((a, _))) => {
                // Range ignored: the body is the whole file
                if a > MAX_SKIP_BYTES {
                    return Err(HubError::Protocol {
                        url: url.into(),
                        reason: "the server ignores Range requests; refusing to download the file to reach its header"
                            .into(),
                    });
                }
                skip = a;
                out.file_size = length.or(out.file_size);
            }
            _ => out.file_size = out.file_size.or(length),
        }
        let whole_file = range.is_none();
        let mut reader = resp.into_body().into_reader();
        if skip > 0 {
            let skipped = std::io::copy(&mut (&mut reader).take(skip), &mut std::io::sink())
                .map_err(|e| self.body_error(url, e))?;
            if skipped < skip {
                return Ok(out);
            }
        }
        let mut buf = Vec::new();
        let limit = if whole_file { cap.saturating_add(1) } else { cap };
        reader.take(limit).read_to_end(&mut buf).map_err(|e| self.body_error(url, e))?;
        if whole_file && buf.len() as u64 > cap {
            return Err(HubError::TooLarge { url: url.into(), what: "the file".into(), limit: cap });
        }
        out.bytes = buf;
        Ok(out)
    }

    fn status_error(
        &self,
        repo: &str,
        revision: &str,
        url: &str,
        status: u16,
        h: &HeaderMap,
    ) -> Result<Option<RangeRead>, HubError> {
        let code = header(h, "x-error-code").unwrap_or("");
        let message = header(h, "x-error-message").map(|m| self.shown(m)).unwrap_or_default();
        let endpoint = self.settings.endpoint.clone();
        let token_sent = self.settings.token.is_some();
        Err(match (code, status) {
            ("GatedRepo", _) => HubError::Gated {
                repo: repo.into(),
                url: self.settings.repo_url(repo),
                endpoint,
                token_sent,
                token_source: self.settings.token_source.as_ref().map(|s| s.to_string()),
            },
            ("RepoNotFound", _) => {
                HubError::RepoNotFound { repo: repo.into(), endpoint, token_sent, hint: String::new() }
            }
            ("RevisionNotFound", _) => {
                HubError::RevisionNotFound { repo: repo.into(), revision: revision.into(), endpoint }
            }
            ("EntryNotFound", _) => return Ok(None),
            // the Hub names the commit even when a file is absent; a bare 404 is some other server
            (_, 404) if header(h, "x-repo-commit").is_some() => return Ok(None),
            (_, 404) => HubError::Status {
                url: url.into(),
                status,
                message:
                    "not found, without the Hub's X-Error-Code: is HF_ENDPOINT a Hugging Face Hub or a mirror of one?"
                        .into(),
                attempts: 1,
            },
            (_, 401) | (_, 403) if message.is_empty() => HubError::Denied { url: url.into(), status, token_sent },
            _ => HubError::Status { url: url.into(), status, message, attempts: 1 },
        })
    }

    fn net_error(&self, url: &str, e: ureq::Error) -> HubError {
        let secs = format!("{}", self.settings.timeout.as_secs_f64());
        match e {
            ureq::Error::Timeout(_) => HubError::Timeout { url: url.into(), secs, attempts: 1 },
            ureq::Error::Io(io) => self.body_error(url, io),
            // the server answered, but not in HTTP: say what was wrong with the answer
            ureq::Error::Protocol(_) | ureq::Error::Http(_) | ureq::Error::LargeResponseHeader(..) => {
                HubError::Protocol { url: url.into(), reason: self.bad_answer(&e.to_string()) }
            }
            ureq::Error::HostNotFound => {
                HubError::Connect { url: url.into(), reason: "host not found".into(), attempts: 1 }
            }
            ureq::Error::ConnectionFailed => {
                HubError::Connect { url: url.into(), reason: "connection failed".into(), attempts: 1 }
            }
            ureq::Error::Tls(m) => HubError::Connect { url: url.into(), reason: format!("TLS: {m}"), attempts: 1 },
            other => HubError::Connect { url: url.into(), reason: self.shown(&other.to_string()), attempts: 1 },
        }
    }

    fn bad_answer(&self, detail: &str) -> String {
        format!(
            "the server's answer is not valid HTTP ({}): is HF_ENDPOINT a Hugging Face Hub (or a mirror of one)?",
            self.shown(detail)
        )
    }

    fn body_error(&self, url: &str, e: std::io::Error) -> HubError {
        let secs = format!("{}", self.settings.timeout.as_secs_f64());
        let timed_out = e.kind() == std::io::ErrorKind::TimedOut
            || e.get_ref()
                .and_then(|i| i.downcast_ref::<ureq::Error>())
                .is_some_and(|u| matches!(u, ureq::Error::Timeout(_)));
        let inner = e.get_ref().and_then(|i| i.downcast_ref::<ureq::Error>());
        if timed_out {
            HubError::Timeout { url: url.into(), secs, attempts: 1 }
        } else if let Some(u @ (ureq::Error::Protocol(_) | ureq::Error::Http(_))) = inner {
            HubError::Protocol { url: url.into(), reason: self.bad_answer(&u.to_string()) }
        } else {
            HubError::Connect { url: url.into(), reason: self.shown(&e.to_string()), attempts: 1 }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range() {
        let cr = |span, total| Some(ContentRange { span, total });
        assert_eq!(parse_content_range("bytes 0-99999/1507691856"), cr(Some((0, 99_999)), Some(1_507_691_856)));
        assert_eq!(parse_content_range("bytes 5-5/*"), cr(Some((5, 5)), None));
        assert_eq!(parse_content_range("bytes */42"), cr(None, Some(42)));
        for bad in ["bytes 9-3/100", "bytes 0-100/100", "items 0-1/2", "bytes 0-/5", "bytes x-1/2", ""] {
            assert_eq!(parse_content_range(bad), None, "{bad}");
        }
    }

    #[test]
    fn redirects_resolve_and_origins_compare_scheme_host_port() {
        let base = "https://huggingface.co/a/b/resolve/main/model.safetensors";
        assert_eq!(join(base, "https://cdn.example/x?sig=1").unwrap(), "https://cdn.example/x?sig=1");
        assert_eq!(join(base, "HTTPS://cdn.example/x").unwrap(), "HTTPS://cdn.example/x");
        for other in ["file:///etc/passwd", "ftp://h/x", "data:text/plain,x", "javascript:alert(1)", "FILE:/x"] {
            let why = join(base, other).unwrap_err();
            assert!(why.contains("only http(s) redirects are followed") && why.contains(other), "{other}: {why}");
        }
        assert_eq!(join(base, "/api/resolve-cache/x").unwrap(), "https://huggingface.co/api/resolve-cache/x");
        assert_eq!(join(base, "other.json").unwrap(), "https://huggingface.co/a/b/resolve/main/other.json");
        assert_eq!(join(base, "//cdn.example/y").unwrap(), "https://cdn.example/y");
        assert_eq!(origin("https://HuggingFace.co/x"), origin("https://huggingface.co:443/y"));
        assert_ne!(origin("http://127.0.0.1:1/x"), origin("http://127.0.0.1:2/x"));
        assert_ne!(origin("http://h/x"), origin("https://h/x"));
    }

    #[test]
    fn urls_encode_revision_and_file() {
        let c = HubClient::new(HubSettings {
            endpoint: "https://huggingface.co".into(),
            token: None,
            token_source: None,
            cache_dir: None,
            offline: false,
            offline_reason: None,
            timeout: Duration::from_secs(1),
            fetch_timeout: Duration::from_secs(1),
        })
        .unwrap();
        assert_eq!(
            c.file_url("a/b", "refs/pr/1", "sub dir/model.safetensors"),
            "https://huggingface.co/a/b/resolve/refs%2Fpr%2F1/sub%20dir/model.safetensors"
        );
    }

    #[test]
    fn printed_texts_never_hold_the_token() {
        let t = "hf_secret123";
        let long = format!("{}Authorization: Bearer {t}", "x".repeat(190));
        // replaced before the cut: not even a prefix of the token survives
        assert!(!shown(&long, Some(t)).contains("hf_sec"), "{}", shown(&long, Some(t)));
        assert_eq!(shown("Bearer hf_secret123", Some(t)), "Bearer [token redacted]");
        assert_eq!(shown("no token here", Some(t)), "no token here");
    }

    proptest::proptest! {
        #[test]
        fn content_range_never_panics(s in ".{0,40}") {
            let _ = parse_content_range(&s);
        }
    }
}
