//! The Hugging Face Hub, on demand: a hub id that is neither in the local
//! cache nor an embedded preset is fetched — its `config.json`, its
//! `model.safetensors.index.json` and the **headers** of its safetensors
//! files by HTTP `Range` requests (never the weights) — and written into the
//! standard cache layout so the next run is offline.
//!
//! - [`HubSettings`]: endpoint, token, cache, offline mode and timeout from
//!   the same environment variables huggingface_hub reads (`HF_ENDPOINT`,
//!   `HF_TOKEN`, `HF_TOKEN_PATH`/`$HF_HOME/token`, `HF_HOME`, `HF_HUB_CACHE`,
//!   `HF_HUB_OFFLINE`, `HF_HUB_DOWNLOAD_TIMEOUT`), and vramfit's own deadline
//!   for a whole fetch (`VRAMFIT_HUB_FETCH_TIMEOUT`).
//! - The token's value never reaches anything printed: every text taken
//!   from the endpoint's answers that could quote it (error messages and
//!   headers, redirect targets, names in the files) is passed through
//!   [`redact`].
//! - [`cache`]: writing and reading the cache, including vramfit's header
//!   sidecars (a header is not the file, so it never goes into `snapshots/`).
//! - `http` and `fetch` (cargo feature `hub`, on by default in the CLI): a
//!   blocking `ureq` client with bounded timeouts, one retry, redirects
//!   followed by hand (the token goes to the endpoint's host only), and a
//!   generic [`HubClient::read_range`] for any Hub file.
//! - `gguf` (feature `hub`): a GGUF's header by range requests, grown as the
//!   GGUF parser asks ([`HubClient::read_prefix`]), split models shard by
//!   shard.
//!
//! docs/hub.md describes the behaviour for users.

pub mod cache;
#[cfg(feature = "hub")]
mod fetch;
#[cfg(feature = "hub")]
pub mod gguf;
#[cfg(feature = "hub")]
mod http;

#[cfg(feature = "hub")]
pub use fetch::{fetch_model, FetchedModel};
#[cfg(feature = "hub")]
pub use http::{parse_content_range, ContentRange, HubClient, PrefixNeed, RangeRead, FIRST_READ_BYTES};

use crate::hf_cache::{self, Env};
use std::path::PathBuf;
use std::time::Duration;

/// Default endpoint (huggingface_hub `constants.ENDPOINT`).
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";
/// Default per-request timeout (huggingface_hub `HF_HUB_DOWNLOAD_TIMEOUT`
/// and `HF_HUB_ETAG_TIMEOUT` both default to 10 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default deadline of a whole fetch (every request of one model: config,
/// index and all shard headers, or every shard of a GGUF), retries
/// included; `VRAMFIT_HUB_FETCH_TIMEOUT` (seconds) overrides it. A
/// model's headers take a few seconds on a normal link (80 shards: about
/// 85 requests); two minutes leave room for a slow one.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest deadline `VRAMFIT_HUB_FETCH_TIMEOUT` may set (a day).
pub const MAX_FETCH_TIMEOUT: Duration = Duration::from_secs(86400);
/// The environment variable that sets the fetch deadline.
pub const FETCH_TIMEOUT_VAR: &str = "VRAMFIT_HUB_FETCH_TIMEOUT";
/// Largest token file read.
const MAX_TOKEN_BYTES: u64 = 4096;

/// What replaces the token's value in anything printed.
pub const REDACTED: &str = "[token redacted]";

/// `text` with every occurrence of the token's value replaced (texts from
/// the endpoint's answers may quote the `Authorization` header).
pub fn redact(text: &str, token: Option<&str>) -> String {
    match token.filter(|t| !t.is_empty()) {
        Some(t) if text.contains(t) => text.replace(t, REDACTED),
        _ => text.to_string(),
    }
}

/// Where a token came from (for messages; the token itself is never shown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Env(&'static str),
    File(PathBuf),
}

impl std::fmt::Display for TokenSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::Env(k) => write!(f, "${k}"),
            TokenSource::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// How to reach the Hub and where to cache, from the environment.
#[derive(Clone, PartialEq, Eq)]
pub struct HubSettings {
    /// `https://huggingface.co`, or `$HF_ENDPOINT` (no trailing slash)
    pub endpoint: String,
    pub token: Option<String>,
    pub token_source: Option<TokenSource>,
    /// the hub cache (`…/hub`); `None` when no home directory is known
    pub cache_dir: Option<PathBuf>,
    /// `--offline` or `HF_HUB_OFFLINE=1`
    pub offline: bool,
    /// why offline, for messages (`--offline`, `HF_HUB_OFFLINE=1`)
    pub offline_reason: Option<String>,
    /// per request, each attempt
    pub timeout: Duration,
    /// the whole fetch, every request and retry ([`DEFAULT_FETCH_TIMEOUT`])
    pub fetch_timeout: Duration,
}

impl std::fmt::Debug for HubSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubSettings")
            .field("endpoint", &self.endpoint)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("token_source", &self.token_source)
            .field("cache_dir", &self.cache_dir)
            .field("offline", &self.offline)
            .field("timeout", &self.timeout)
            .field("fetch_timeout", &self.fetch_timeout)
            .finish()
    }
}

/// huggingface_hub `_is_true`: 1, ON, YES, TRUE (any case).
fn is_true(v: &str) -> bool {
    matches!(v.trim().to_ascii_uppercase().as_str(), "1" | "ON" | "YES" | "TRUE")
}

impl HubSettings {
    /// Settings from `env`; `offline_flag` is `--offline`.
    pub fn from_env(env: Env, offline_flag: bool) -> Result<HubSettings, HubError> {
        let endpoint = env("HF_ENDPOINT")
            .map(|s| s.trim().trim_end_matches('/').to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        if !(endpoint.starts_with("https://") || endpoint.starts_with("http://"))
            || endpoint.chars().any(|c| c.is_control() || c.is_whitespace())
        {
            return Err(HubError::Settings {
                what: "HF_ENDPOINT".into(),
                reason: format!("'{}' is not an http(s) URL (e.g. https://huggingface.co)", endpoint.escape_debug()),
            });
        }
        let offline_env = env("HF_HUB_OFFLINE").is_some_and(|v| is_true(&v));
        let offline_reason = if offline_flag {
            Some("--offline".to_string())
        } else if offline_env {
            Some("HF_HUB_OFFLINE=1".to_string())
        } else {
            None
        };
        let seconds = |var: &str, default: Duration, max: Duration| -> Result<Duration, HubError> {
            match env(var).filter(|s| !s.trim().is_empty()) {
                None => Ok(default),
                Some(s) => match s.trim().parse::<f64>() {
                    Ok(t) if t.is_finite() && t > 0.0 && t <= max.as_secs_f64() => Ok(Duration::from_secs_f64(t)),
                    _ => Err(HubError::Settings {
                        what: var.into(),
                        reason: format!("'{}' is not a number of seconds in (0, {}]", s.escape_debug(), max.as_secs()),
                    }),
                },
            }
        };
        let timeout = seconds("HF_HUB_DOWNLOAD_TIMEOUT", DEFAULT_TIMEOUT, Duration::from_secs(3600))?;
        let fetch_timeout = seconds(FETCH_TIMEOUT_VAR, DEFAULT_FETCH_TIMEOUT, MAX_FETCH_TIMEOUT)?;
        let (token, token_source) = token_from_env(env)?;
        Ok(HubSettings {
            endpoint,
            token,
            token_source,
            cache_dir: hf_cache::cache_dir(env),
            offline: offline_reason.is_some(),
            offline_reason,
            timeout,
            fetch_timeout,
        })
    }

    /// The page of a repo, for messages (`https://huggingface.co/org/name`).
    pub fn repo_url(&self, repo: &str) -> String {
        format!("{}/{}", self.endpoint, repo)
    }
}

/// `HF_TOKEN` (or the older `HUGGING_FACE_HUB_TOKEN`), else the token file
/// (`HF_TOKEN_PATH`, else `$HF_HOME/token`) that `huggingface-cli login`
/// writes.
fn token_from_env(env: Env) -> Result<(Option<String>, Option<TokenSource>), HubError> {
    for key in ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"] {
        if let Some(t) = env(key).map(|t| t.trim().to_string()).filter(|t| !t.is_empty()) {
            check_token(&t, &TokenSource::Env(key))?;
            return Ok((Some(t), Some(TokenSource::Env(key))));
        }
    }
    let path = env("HF_TOKEN_PATH")
        .filter(|p| !p.trim().is_empty())
        .map(PathBuf::from)
        .or_else(|| hf_cache::hf_home(env).map(|h| h.join("token")));
    let Some(path) = path else { return Ok((None, None)) };
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok((None, None));
    }
    let text = vramfit_input::read_text(&path, "a Hugging Face token file", MAX_TOKEN_BYTES)
        .map_err(|e| HubError::Settings { what: "token file".into(), reason: e.to_string() })?;
    let t = text.trim().to_string();
    if t.is_empty() {
        return Ok((None, None));
    }
    let source = TokenSource::File(path);
    check_token(&t, &source)?;
    Ok((Some(t), Some(source)))
}

/// A token goes into an HTTP header: printable ASCII without spaces only.
fn check_token(t: &str, source: &TokenSource) -> Result<(), HubError> {
    if t.chars().all(|c| c.is_ascii_graphic()) {
        Ok(())
    } else {
        Err(HubError::Settings {
            what: source.to_string(),
            reason: "does not hold a token (printable characters without spaces, e.g. hf_…)".into(),
        })
    }
}

/// What went wrong talking to the Hub, each with what to do about it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HubError {
    #[error("{what}: {reason}")]
    Settings { what: String, reason: String },
    #[error(
        "{repo} is a gated model on {endpoint}: {}",
        if *token_sent {
            format!("the token from {} has no access to it. Accept the licence at {url} while logged in as the token's owner (approval can take a while), check the token has read access ({endpoint}/settings/tokens), then run again", token_source.as_deref().unwrap_or("HF_TOKEN"))
        } else {
            format!("accept the licence at {url} while logged in, create a read token at {endpoint}/settings/tokens, then run again with HF_TOKEN=hf_… set (or after `huggingface-cli login`)")
        }
    )]
    Gated { repo: String, endpoint: String, url: String, token_sent: bool, token_source: Option<String> },
    #[error(
        "{repo}: no such model on {endpoint}{}{hint}",
        if *token_sent { " (or your token cannot see it): check the spelling (org/name, as on its page)" } else { ": check the spelling (org/name, as on its page); a private model needs HF_TOKEN set" }
    )]
    RepoNotFound { repo: String, endpoint: String, token_sent: bool, hint: String },
    #[error("{repo}: revision '{revision}' not found on {endpoint}: give a branch, tag or commit of the repo (--revision), or drop --revision for main")]
    RevisionNotFound { repo: String, revision: String, endpoint: String },
    #[error("{repo}: the repo has no config.json at {revision} ({endpoint}/{repo}/tree/{revision}): it is not a transformers model (a GGUF-only or diffusers repo?): pass a config.json path instead, or for a GGUF name the file as {repo}:FILE.gguf")]
    NoConfig { repo: String, revision: String, endpoint: String },
    #[error(
        "{url}: HTTP {status} ({}){}",
        if *status == 401 { "unauthorized" } else { "forbidden" },
        if *token_sent { ": the token was refused; check it at https://huggingface.co/settings/tokens (HF_TOKEN or `huggingface-cli login`)" } else { ": set HF_TOKEN to a read token (https://huggingface.co/settings/tokens)" }
    )]
    Denied { url: String, status: u16, token_sent: bool },
    #[error("{url}: HTTP {status}{}{}", if message.is_empty() { String::new() } else { format!(" ({message})") }, if *attempts > 1 { format!(", after {attempts} attempts") } else { String::new() })]
    Status { url: String, status: u16, message: String, attempts: u32 },
    #[error("{url}: no answer within {secs} s (tried {attempts} time{}): check the network or HF_ENDPOINT, set HF_HUB_DOWNLOAD_TIMEOUT=<seconds> for a slow link, or run with --offline on what is cached", if *attempts == 1 { "" } else { "s" })]
    Timeout { url: String, secs: String, attempts: u32 },
    #[error("{url}: cannot connect ({reason}; tried {attempts} time{}): check the network or HF_ENDPOINT (a mirror such as https://hf-mirror.com works too), or run with --offline on what is cached", if *attempts == 1 { "" } else { "s" })]
    Connect { url: String, reason: String, attempts: u32 },
    #[error("{url}: {reason}")]
    Protocol { url: String, reason: String },
    #[error(
        "{url}: the fetch did not finish within {secs} s ({FETCH_TIMEOUT_VAR}; {done} when it stopped): run again (nothing was cached), set {FETCH_TIMEOUT_VAR}=<seconds> for a slow link or a model of many shards, or run with --offline on what is cached"
    )]
    Deadline { url: String, secs: String, done: String },
    /// an error whose text quoted the token, with the token's value replaced
    #[error("{message}")]
    Redacted { message: String },
    #[error("{repo}/{file}: safetensors header of {bytes} bytes is over the {limit}-byte limit; refusing to read it (corrupt or not a safetensors file?)")]
    HeaderTooLarge { repo: String, file: String, bytes: u64, limit: u64 },
    #[error("{url}: {what} is larger than {limit} bytes; refusing to read more")]
    TooLarge { url: String, what: String, limit: u64 },
}

impl HubError {
    /// Worth one more try (the network, not the request, failed).
    pub fn is_transient(&self) -> bool {
        match self {
            HubError::Timeout { .. } | HubError::Connect { .. } => true,
            HubError::Status { status, .. } => *status >= 500 || *status == 429,
            _ => false,
        }
    }

    /// The same error, counting `attempts` tries.
    pub fn with_attempts(self, n: u32) -> HubError {
        match self {
            HubError::Timeout { url, secs, .. } => HubError::Timeout { url, secs, attempts: n },
            HubError::Connect { url, reason, .. } => HubError::Connect { url, reason, attempts: n },
            HubError::Status { url, status, message, .. } => HubError::Status { url, status, message, attempts: n },
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(a, _)| *a == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn settings_from_the_huggingface_hub_variables() {
        let s = HubSettings::from_env(&env(&[("HOME", "/u")]), false).unwrap();
        assert_eq!(s.endpoint, DEFAULT_ENDPOINT);
        assert_eq!(s.timeout, DEFAULT_TIMEOUT);
        assert!(!s.offline && s.token.is_none());
        let s = HubSettings::from_env(
            &env(&[
                ("HF_ENDPOINT", "https://hf-mirror.com/"),
                ("HF_TOKEN", " hf_abc \n"),
                ("HF_HUB_OFFLINE", "yes"),
                ("HF_HUB_DOWNLOAD_TIMEOUT", "0.5"),
            ]),
            false,
        )
        .unwrap();
        assert_eq!(s.endpoint, "https://hf-mirror.com");
        assert_eq!(s.token.as_deref(), Some("hf_abc"));
        assert_eq!(s.offline_reason.as_deref(), Some("HF_HUB_OFFLINE=1"));
        assert_eq!(s.timeout, Duration::from_millis(500));
        assert!(!format!("{s:?}").contains("hf_abc"), "the token is never printed");
        assert_eq!(
            HubSettings::from_env(&env(&[("HF_HUB_OFFLINE", "0")]), true).unwrap().offline_reason.as_deref(),
            Some("--offline")
        );
        for (k, v) in [("HF_ENDPOINT", "ftp://x"), ("HF_HUB_DOWNLOAD_TIMEOUT", "-1"), ("HF_TOKEN", "a b")] {
            assert!(HubSettings::from_env(&env(&[(k, v)]), false).is_err(), "{k}={v}");
        }
    }

    #[test]
    fn token_file_under_hf_home() {
        let dir = std::env::temp_dir().join(format!("vramfit-hub-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("token"), "hf_fromfile\n").unwrap();
        let home = dir.display().to_string();
        let s = HubSettings::from_env(&env(&[("HF_HOME", &home)]), false).unwrap();
        assert_eq!(s.token.as_deref(), Some("hf_fromfile"));
        assert_eq!(s.token_source, Some(TokenSource::File(dir.join("token"))));
        // HF_TOKEN wins over the file
        let s = HubSettings::from_env(&env(&[("HF_HOME", &home), ("HF_TOKEN", "hf_env")]), false).unwrap();
        assert_eq!(s.token.as_deref(), Some("hf_env"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
