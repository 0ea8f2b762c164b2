//! One entry point for a model argument:
//!
//! 1. a path: a `config.json`, a `.safetensors` file or index, or a
//!    directory holding them;
//! 2. a hub id (`org/name`): the local Hugging Face cache at the revision;
//!    else the embedded preset that lists exactly this id (no revision
//!    asked); else, unless offline, the Hub itself (config.json and
//!    safetensors headers, cached for next time — see [`crate::hub`]);
//! 3. a preset name or alias.
//!
//! A hub id resolves to its own config, never a sibling's: presets list only
//! the repos whose config they embed. Every file is read through
//! `vramfit-input` (regular files only, a byte cap per kind).

use crate::config::parse_config;
use crate::error::IngestError;
use crate::hf_cache::{self, Snapshot};
use crate::hub::cache::RepoCache;
use crate::safetensors::{self, SafetensorsSummary};
use serde::Serialize;
use std::path::{Path, PathBuf};
use vramfit_catalog::presets;
use vramfit_core::{ModelSpec, ParamLayout};

pub use crate::hf_cache::Env;

/// Where a model came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Source {
    Preset {
        name: String,
        source: String,
    },
    ConfigFile {
        path: String,
    },
    /// found in the local Hugging Face cache
    HfCache {
        repo_id: String,
        revision: String,
        commit: String,
        snapshot: String,
    },
    /// fetched from the Hub in this run
    Hub {
        repo_id: String,
        revision: String,
        commit: String,
        endpoint: String,
        /// the snapshot folder written, if the cache could be written
        cached_in: Option<String>,
    },
}

/// Count check against a checkpoint's safetensors headers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointCheck {
    pub summary: SafetensorsSummary,
    pub config_params: u64,
    /// `summary.params - config_params` (negative: checkpoint smaller)
    pub difference: i128,
    /// a sentence for the user
    pub verdict: String,
}

/// A resolved model.
#[derive(Debug, Clone)]
pub struct ResolvedModel {
    pub spec: ModelSpec,
    pub source: Source,
    pub checkpoint: Option<CheckpointCheck>,
}

fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}

impl ResolvedModel {
    /// One-line description of the source.
    pub fn source_text(&self) -> String {
        match &self.source {
            Source::Preset { name, source } => format!("preset {name} ({source})"),
            Source::ConfigFile { path } => path.clone(),
            Source::HfCache { repo_id, revision, commit, snapshot } => {
                let rev = if revision == commit { String::new() } else { format!("{revision}, ") };
                format!("{repo_id} ({rev}commit {}) from the local Hugging Face cache ({snapshot})", short(commit))
            }
            Source::Hub { repo_id, revision, commit, endpoint, cached_in } => {
                let rev = if revision == commit { String::new() } else { format!("{revision}, ") };
                format!(
                    "{repo_id} ({rev}commit {}) fetched from {endpoint}: config.json and safetensors headers{}",
                    short(commit),
                    match cached_in {
                        Some(d) => format!(", cached in {d}"),
                        None => String::new(),
                    }
                )
            }
        }
    }
}

/// What kind of model a model argument names, decided before anything is
/// read: the front end dispatches on it (a GGUF goes to llama.cpp's
/// sizing, everything else through [`resolve_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelKind {
    /// a GGUF file for llama.cpp (`.gguf`)
    Gguf(GgufLocation),
    /// llama.cpp's `-hf org/name:QUANT` form: a quant tag picks a file from
    /// the repo's file list, which vramfit does not read (the file must be named)
    GgufQuantTag { repo: String, tag: String },
    /// a Hugging Face model: a preset, a hub id, a config.json, a
    /// safetensors file or index, or a directory
    Transformers,
}

/// Where a GGUF file is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GgufLocation {
    /// a local path
    File(PathBuf),
    /// a file of a Hub repo, written `org/name:path/file.gguf`
    Hub(crate::gguf::HubGgufRef),
}

/// The kind of model `query` names. A local file wins over a Hub reading of
/// the same text (`org/name:file.gguf` that exists on disk is that file).
pub fn model_kind(query: &str) -> ModelKind {
    kind_of(query, &|| std::fs::symlink_metadata(query).is_ok())
}

/// [`model_kind`] with the file check given (`on_disk`: a path `query` names exists).
fn kind_of(query: &str, on_disk: &dyn Fn() -> bool) -> ModelKind {
    if query.to_ascii_lowercase().ends_with(".gguf") {
        return match crate::gguf::HubGgufRef::parse(query) {
            Some(r) if !on_disk() => ModelKind::Gguf(GgufLocation::Hub(r)),
            _ => ModelKind::Gguf(GgufLocation::File(PathBuf::from(query))),
        };
    }
    match crate::gguf::HubGgufRef::quant_tag(query) {
        Some((repo, tag)) if !on_disk() => ModelKind::GgufQuantTag { repo, tag },
        _ => ModelKind::Transformers,
    }
}

/// How to resolve: environment, offline mode, revision, progress messages.
pub struct ResolveOptions<'a> {
    pub env: Env<'a>,
    /// `--offline` (`HF_HUB_OFFLINE=1` in `env` works too)
    pub offline: bool,
    /// `--revision`: a branch, tag or commit of a hub id
    pub revision: Option<&'a str>,
    /// called before network work starts (e.g. "fetching …" on stderr) and,
    /// once a fetch takes more than a second, with what it has done
    pub progress: &'a (dyn Fn(&str) + Sync),
}

impl<'a> ResolveOptions<'a> {
    pub fn new(env: Env<'a>) -> ResolveOptions<'a> {
        ResolveOptions { env, offline: false, revision: None, progress: &|_| {} }
    }
}

/// Resolve `query` with the process environment.
pub fn resolve_model(query: &str) -> Result<ResolvedModel, IngestError> {
    resolve_with_env(query, &|k| std::env::var(k).ok())
}

/// Resolve `query` with `env` and no flags.
pub fn resolve_with_env(query: &str, env: Env) -> Result<ResolvedModel, IngestError> {
    resolve_with(query, &ResolveOptions::new(env))
}

/// Resolve `query`: path, then hub id (cache, preset, Hub), then preset.
pub fn resolve_with(query: &str, opts: &ResolveOptions) -> Result<ResolvedModel, IngestError> {
    let (q, all) = checked_query(query, opts)?;
    let path = Path::new(q);
    if is_path(path, std::fs::symlink_metadata(path))? {
        return from_path(path);
    }
    resolve_name_in(q, opts, &all)
}

/// Whether the query is a path, from what looking it up gave: a path that
/// exists, no such path (then it is a name), or a path that exists but this
/// user may not look at: an error naming it (and the directory that cannot
/// be searched, when one can be found), never "unknown model" and never a
/// Hub request for `dir/config.json` because `dir` is not searchable.
fn is_path(path: &Path, lookup: std::io::Result<std::fs::Metadata>) -> Result<bool, IngestError> {
    match lookup {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            Err(IngestError::Io { file: path.display().to_string(), reason: denied_reason(path, &e) })
        }
        Err(_) => Ok(false),
    }
}

/// "permission denied …", naming the first directory on the way to `path`
/// that cannot be searched when that is the cause.
fn denied_reason(path: &Path, e: &std::io::Error) -> String {
    let mut prefixes: Vec<&Path> = path.ancestors().filter(|p| !p.as_os_str().is_empty()).collect();
    prefixes.reverse();
    let blocked = prefixes.iter().find_map(|p| match std::fs::symlink_metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Some(p.parent()),
        _ => None,
    });
    match blocked.flatten().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => format!("permission denied: the directory {} cannot be searched by this user", dir.display()),
        None => vramfit_input::io_reason(e),
    }
}

/// Resolve a hub id or a preset name, never a path: a front end that takes
/// model names from someone else (the local web page) uses this, so no file
/// it names is ever opened. A hub id is still looked up in the local Hugging
/// Face cache (the path is built from the checked id, [`hf_cache::looks_like_hub_id`])
/// and, unless `opts` say offline, on the Hub.
pub fn resolve_name(query: &str, opts: &ResolveOptions) -> Result<ResolvedModel, IngestError> {
    let (q, all) = checked_query(query, opts)?;
    resolve_name_in(q, opts, &all)
}

/// The trimmed query and the presets, after the checks every lookup makes
/// (empty query, a revision for something that is not a hub id).
fn checked_query<'q>(query: &'q str, opts: &ResolveOptions) -> Result<(&'q str, Vec<presets::Preset>), IngestError> {
    let q = query.trim();
    let all = presets::builtin()
        .map_err(|e| IngestError::Invalid { file: "embedded presets".into(), reason: e.to_string() })?;
    if q.is_empty() {
        return Err(IngestError::UnknownModel {
            query: query.into(),
            advice: not_a_model_advice(),
            suggestions: vec![],
        });
    }
    if let Some(rev) = opts.revision {
        hf_cache::check_revision(rev)?;
        if !hf_cache::looks_like_hub_id(q) {
            return Err(IngestError::Invalid {
                file: "--revision".into(),
                reason: format!("applies to hub ids (org/name), not to '{}'", q.escape_debug()),
            });
        }
    }
    Ok((q, all))
}

fn resolve_name_in(q: &str, opts: &ResolveOptions, all: &[presets::Preset]) -> Result<ResolvedModel, IngestError> {
    if hf_cache::looks_like_hub_id(q) {
        let cache = hf_cache::cache_dir(opts.env);
        if let Some(cache) = &cache {
            if let Some(snap) = hf_cache::find_snapshot(cache, q, opts.revision)? {
                return from_cache(cache, q, opts.revision.unwrap_or("main"), snap);
            }
        }
        if opts.revision.is_none() {
            if let Some(p) = presets::find(all, q) {
                return from_preset(p);
            }
        }
        return from_hub(q, opts, cache.as_deref(), all);
    }
    if let Some(p) = presets::find(all, q) {
        return from_preset(p);
    }
    Err(IngestError::UnknownModel {
        query: q.into(),
        advice: not_a_model_advice(),
        suggestions: presets::suggestions(all, q),
    })
}

/// A model from the text of a `config.json` held in memory (pasted into
/// the web page); `origin` names it in errors and in the report's source.
/// The same decoding, parser and byte cap as a config file on disk.
pub fn from_config_bytes(bytes: &[u8], origin: &str) -> Result<ResolvedModel, IngestError> {
    let text = vramfit_input::decode_text(origin, bytes.to_vec())?;
    let mut spec = parse_config(text.as_bytes(), origin)?;
    if spec.name.is_empty() || spec.name == origin {
        spec.name = origin.into();
    }
    Ok(ResolvedModel { spec, source: Source::ConfigFile { path: origin.into() }, checkpoint: None })
}

fn not_a_model_advice() -> String {
    "not a preset, a file or directory, or a hub id. Name a preset (`vramfit estimate --list-presets` lists them), \
     a model on the Hugging Face Hub as org/name (e.g. Qwen/Qwen2.5-7B-Instruct), or a local config.json or the \
     directory holding it"
        .to_string()
}

fn from_preset(p: &presets::Preset) -> Result<ResolvedModel, IngestError> {
    let origin = format!("preset {}", p.name);
    let mut spec = crate::config::parse_config_value(&p.config, &origin)?;
    if let Some(q) = &p.hf_quant_config {
        let bytes =
            serde_json::to_vec(q).map_err(|e| IngestError::Invalid { file: origin.clone(), reason: e.to_string() })?;
        crate::config::apply_hf_quant_config(&mut spec, &bytes, &format!("{origin} hf_quant_config.json"))?;
    }
    spec.name = p.name.clone();
    Ok(ResolvedModel {
        spec,
        source: Source::Preset { name: p.name.clone(), source: p.source.clone() },
        checkpoint: None,
    })
}

/// Presets named like a hub id are other models (a sibling's config is the
/// bug this avoids): list them as such, not as "did you mean".
fn similar_presets(all: &[presets::Preset], q: &str) -> String {
    let s = presets::suggestions(all, q);
    if s.is_empty() {
        String::new()
    } else {
        format!("; presets with similar names (other models: check their source before using one): {}", s.join(", "))
    }
}

/// What to say when a hub id is neither cached nor a preset and the Hub
/// cannot be asked (`why`); `online_helps`: running with the network would.
fn offline_advice(q: &str, why: &str, cache: Option<&Path>, online_helps: bool) -> String {
    let cache = match cache {
        Some(c) => format!("not in the local Hugging Face cache at {}", c.display()),
        None => "not in a local Hugging Face cache (none found: HOME, HF_HOME and HF_HUB_CACHE are unset)".into(),
    };
    let online = if online_helps {
        "Run once with the network (drop --offline, unset HF_HUB_OFFLINE) to fetch its config.json and safetensors \
         headers into the cache, or "
    } else {
        ""
    };
    let download = format!("`huggingface-cli download {q} config.json` puts its config in the cache");
    let download = if online_helps { download } else { download[..1].to_uppercase() + &download[1..] };
    format!("{cache}, not a preset, and {why}. {online}{download}, or pass the path of a config.json")
}

#[cfg(not(feature = "hub"))]
fn from_hub(
    q: &str,
    opts: &ResolveOptions,
    cache: Option<&Path>,
    all: &[presets::Preset],
) -> Result<ResolvedModel, IngestError> {
    let _ = opts;
    Err(IngestError::UnknownModel {
        query: q.into(),
        advice: offline_advice(
            q,
            "this vramfit was built without Hub access (cargo feature `hub`, on by default; rebuild without --no-default-features)",
            cache,
            false,
        ) + &similar_presets(all, q),
        suggestions: Vec::new(),
    })
}

#[cfg(feature = "hub")]
fn from_hub(
    q: &str,
    opts: &ResolveOptions,
    cache: Option<&Path>,
    all: &[presets::Preset],
) -> Result<ResolvedModel, IngestError> {
    let settings = crate::hub::HubSettings::from_env(opts.env, opts.offline)?;
    if let Some(why) = &settings.offline_reason {
        return Err(IngestError::UnknownModel {
            query: q.into(),
            advice: offline_advice(q, &format!("{why} forbids the network"), cache, true) + &similar_presets(all, q),
            suggestions: Vec::new(),
        });
    }
    let token = settings.token.clone();
    let r = fetch_from_hub(q, opts, settings, all);
    // texts from the endpoint's answers that quote the token: its value replaced
    let clean = |t: &str| crate::hub::redact(t, token.as_deref());
    match r {
        Ok(mut m) => {
            if clean(&m.spec.name) != m.spec.name {
                // a name that quotes the token: the hub id names the model better
                m.spec.name = q.to_string();
            }
            m.spec.notes.iter_mut().for_each(|n| *n = clean(n));
            Ok(m)
        }
        Err(e) => {
            let text = e.to_string();
            if clean(&text) == text {
                Err(e)
            } else {
                Err(IngestError::Hub(crate::hub::HubError::Redacted { message: clean(&text) }))
            }
        }
    }
}

#[cfg(feature = "hub")]
fn fetch_from_hub(
    q: &str,
    opts: &ResolveOptions,
    settings: crate::hub::HubSettings,
    all: &[presets::Preset],
) -> Result<ResolvedModel, IngestError> {
    let revision = opts.revision.unwrap_or("main");
    let client = crate::hub::HubClient::new(settings.clone())?;
    let fetched = crate::hub::fetch_model(&client, q, revision, opts.progress).map_err(|e| match e {
        IngestError::Hub(crate::hub::HubError::RepoNotFound { repo, endpoint, token_sent, .. }) => {
            IngestError::Hub(crate::hub::HubError::RepoNotFound {
                repo,
                endpoint,
                token_sent,
                hint: similar_presets(all, q),
            })
        }
        other => other,
    })?;
    let origin = format!("{q}@{}/config.json", short(&fetched.commit));
    let text = vramfit_input::decode_text(&origin, fetched.config.clone())?;
    let mut spec = parse_config(text.as_bytes(), &origin)?;
    name_spec(&mut spec, &origin, q);
    spec.notes.extend(fetched.notes.iter().cloned());
    let checkpoint = match fetched.checkpoint.clone() {
        Some(s) => Some(check(&spec, s)?),
        None => None,
    };
    (opts.progress)(&format!(
        "fetched {q} at commit {}: {} requests, {} bytes{}",
        short(&fetched.commit),
        fetched.requests,
        fetched.bytes_received,
        match &fetched.cached {
            Ok(d) => format!("; cached in {}", d.display()),
            Err(_) => String::new(),
        }
    ));
    Ok(ResolvedModel {
        spec,
        source: Source::Hub {
            repo_id: q.into(),
            revision: revision.into(),
            commit: fetched.commit.clone(),
            endpoint: settings.endpoint,
            cached_in: fetched.cached.ok().map(|d| d.display().to_string()),
        },
        checkpoint,
    })
}

/// A config's `_name_or_path` is often a training machine's folder; a hub
/// id names the model better.
fn name_spec(spec: &mut ModelSpec, origin: &str, repo_id: &str) {
    if spec.name == origin || spec.name.is_empty() || spec.name.ends_with("config.json") || spec.name.starts_with('/') {
        spec.name = repo_id.into();
    }
}

fn from_cache(cache: &Path, repo_id: &str, revision: &str, snap: Snapshot) -> Result<ResolvedModel, IngestError> {
    let mut r = read_config(&snap.dir.join("config.json"))?;
    name_spec(&mut r.spec, &snap.dir.join("config.json").display().to_string(), repo_id);
    if r.spec.name == snap.dir.file_name().and_then(|n| n.to_str()).unwrap_or("") {
        r.spec.name = repo_id.into();
    }
    let (summary, note) = cached_checkpoint(cache, repo_id, &snap)?;
    if let Some(s) = summary {
        r.checkpoint = Some(check(&r.spec, s)?);
    }
    r.spec.notes.extend(note);
    r.source = Source::HfCache {
        repo_id: repo_id.into(),
        revision: if snap.via == "commit" { snap.commit.clone() } else { revision.into() },
        commit: snap.commit.clone(),
        snapshot: snap.dir.display().to_string(),
    };
    Ok(r)
}

/// Safetensors headers of a cached snapshot: real files where they are
/// (huggingface_hub downloaded them), vramfit's header sidecars where not.
/// A shard known in neither way leaves the count unchecked, with a note.
fn cached_checkpoint(
    cache: &Path,
    repo_id: &str,
    snap: &Snapshot,
) -> Result<(Option<SafetensorsSummary>, Option<String>), IngestError> {
    let repo = RepoCache::new(cache, repo_id);
    let index = snap.dir.join("model.safetensors.index.json");
    let mut missing: Option<String> = None;
    let one = |shard: &str| -> Result<Option<SafetensorsSummary>, IngestError> {
        let file = snap.dir.join(shard);
        if std::fs::symlink_metadata(&file).is_ok() {
            return safetensors::read_file(&file).map(Some);
        }
        match repo.read_header(&snap.commit, shard)? {
            Some(h) => {
                let origin = format!("{repo_id}@{}/{shard} (header cached in {})", short(&snap.commit), {
                    repo.sidecar_path(&snap.commit, shard).map(|p| p.display().to_string()).unwrap_or_default()
                });
                h.summary(&origin).map(Some)
            }
            None => Ok(None),
        }
    };
    if std::fs::symlink_metadata(&index).is_ok() {
        let mut total = SafetensorsSummary::default();
        let bytes = vramfit_input::read_bytes(&index, "a safetensors index", safetensors::MAX_INDEX_BYTES)?;
        let shown = index.display().to_string();
        for shard in safetensors::index_shards(&bytes, &shown)? {
            match one(&shard)? {
                Some(s) => total.add(s, &shown)?,
                None => {
                    missing = Some(shard);
                    break;
                }
            }
        }
        if let Some(shard) = missing {
            return Ok((
                None,
                Some(format!(
                    "the cache holds neither shard {shard} nor its header: the parameter count is not checked against the checkpoint (run once with the network after deleting {} to fetch the headers)",
                    snap.dir.display()
                )),
            ));
        }
        return Ok((Some(total), None));
    }
    if let Some(s) = one("model.safetensors")? {
        return Ok((Some(s), None));
    }
    Ok((None, None))
}

fn from_path(path: &Path) -> Result<ResolvedModel, IngestError> {
    if path.is_dir() {
        return from_dir(path);
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json") {
        // A checkpoint file: its config.json sits beside it.
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        let mut r = read_config(&dir.join("config.json"))?;
        let summary =
            if name.ends_with(".json") { safetensors::read_index(path)? } else { safetensors::read_file(path)? };
        r.checkpoint = Some(check(&r.spec, summary)?);
        return Ok(r);
    }
    read_config(path)
}

fn read_config(path: &Path) -> Result<ResolvedModel, IngestError> {
    let file = path.display().to_string();
    let text = vramfit_input::read_text(path, "a config.json", crate::config::MAX_CONFIG_BYTES as u64)?;
    let mut spec = parse_config(text.as_bytes(), &file)?;
    // NVIDIA ModelOpt checkpoints declare NVFP4/FP8 only in a sibling file
    let quant = path.with_file_name("hf_quant_config.json");
    if std::fs::symlink_metadata(&quant).is_ok() {
        let bytes =
            vramfit_input::read_bytes(&quant, "an hf_quant_config.json", crate::config::MAX_CONFIG_BYTES as u64)?;
        crate::config::apply_hf_quant_config(&mut spec, &bytes, &quant.display().to_string())?;
    }
    if spec.name == file || spec.name.is_empty() {
        spec.name = name_of_config_file(path).unwrap_or_else(|| file.clone());
    }
    Ok(ResolvedModel { spec, source: Source::ConfigFile { path: file }, checkpoint: None })
}

/// Folder names that say nothing about the model in them.
const GENERIC_FOLDERS: &[&str] = &["config", "configs", "model", "models", "checkpoint", "checkpoints", "tmp"];

/// The name of a config file without `_name_or_path`: a file named for
/// its model (`qwen2.5-7b-instruct.json`) by its stem, a `config.json` by
/// its folder (`Llama-3.1-8B/config.json`, `.` resolved), unless the
/// folder's name is generic (`configs/`); `None`: the path is the name.
fn name_of_config_file(path: &Path) -> Option<String> {
    let file_name = path.file_name()?.to_str()?;
    if !file_name.eq_ignore_ascii_case("config.json") {
        let stem = Path::new(file_name).file_stem()?.to_str()?;
        return (!stem.is_empty()).then(|| stem.to_string());
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let folder = parent.file_name().map(|n| n.to_os_string()).or_else(|| {
        // `.` or `..`: the folder's own name
        std::fs::canonicalize(parent).ok()?.file_name().map(|n| n.to_os_string())
    })?;
    let folder = folder.to_str()?;
    (!folder.is_empty() && !GENERIC_FOLDERS.contains(&folder.to_ascii_lowercase().as_str())).then(|| folder.to_string())
}

fn from_dir(dir: &Path) -> Result<ResolvedModel, IngestError> {
    let cfg = dir.join("config.json");
    match std::fs::symlink_metadata(&cfg) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(IngestError::Io {
                file: cfg.display().to_string(),
                reason: format!("permission denied: the directory {} cannot be searched by this user", dir.display()),
            })
        }
        Err(_) => {
            return Err(IngestError::Io {
                file: cfg.display().to_string(),
                reason: "no config.json in this directory".into(),
            })
        }
    }
    let mut r = read_config(&cfg)?;
    if let Some(summary) = safetensors::read_dir(dir)? {
        r.checkpoint = Some(check(&r.spec, summary)?);
    }
    Ok(r)
}

/// Compare the config's parameter count with the checkpoint's.
pub fn check(spec: &ModelSpec, summary: SafetensorsSummary) -> Result<CheckpointCheck, IngestError> {
    let config_params = ParamLayout::of(spec)
        .and_then(|l| l.total())
        .map_err(|e| IngestError::Model { file: spec.name.clone(), error: e })?;
    let difference = summary.params as i128 - config_params as i128;
    let verdict = if difference == 0 {
        "safetensors headers match the config's parameter count exactly".to_string()
    } else if spec.quantization.is_some() {
        format!(
            "checkpoint holds {} elements vs {} parameters from the config: expected for a quantized checkpoint (packed weights, scales and zeros are separate tensors)",
            summary.params, config_params
        )
    } else {
        let rel = difference as f64 / config_params.max(1) as f64 * 100.0;
        let why = if difference > 0 {
            "extra tensors (e.g. an MTP layer, vision tower, buffers) or a config that does not describe this checkpoint"
        } else {
            "missing tensors (an incomplete download, shards not listed in the index) or a config that does not describe this checkpoint"
        };
        format!(
            "MISMATCH: checkpoint holds {} parameters, the config implies {} ({:+} = {:+.3}%): {why}",
            summary.params, config_params, difference, rel
        )
    };
    Ok(CheckpointCheck { summary, config_params, difference, verdict })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_file_without_name_or_path_is_named_by_its_file_or_folder() {
        let name = |p: &str| name_of_config_file(Path::new(p));
        assert_eq!(
            name("tests/fixtures/configs/05_qwen2.5-7b-instruct.json").as_deref(),
            Some("05_qwen2.5-7b-instruct")
        );
        assert_eq!(name("/models/Llama-3.1-8B/config.json").as_deref(), Some("Llama-3.1-8B"));
        assert_eq!(name("ckpt/configs/config.json"), None);
        assert_eq!(name("out/Mistral-7B/config.json").as_deref(), Some("Mistral-7B"));
        assert_eq!(name("out/Model/config.json"), None);
        assert_eq!(name("out/models/config.json"), None);
        // `config.json` in the working folder: that folder's own name
        let here = std::env::current_dir().unwrap();
        assert_eq!(name("config.json").as_deref(), here.file_name().and_then(|n| n.to_str()));
        let fixture = format!("{}/tests/fixtures/configs/05_qwen2.5-7b-instruct.json", env!("CARGO_MANIFEST_DIR"));
        assert_eq!(from_path(Path::new(&fixture)).unwrap().spec.name, "05_qwen2.5-7b-instruct");
    }

    #[test]
    fn model_kinds() {
        let hub = crate::gguf::HubGgufRef { repo: "org/name-GGUF".into(), file: "m-Q4_K_M.gguf".into() };
        assert_eq!(model_kind("org/name-GGUF:m-Q4_K_M.gguf"), ModelKind::Gguf(GgufLocation::Hub(hub)));
        assert_eq!(model_kind("dir/M.GGUF"), ModelKind::Gguf(GgufLocation::File("dir/M.GGUF".into())));
        assert_eq!(
            model_kind("org/name-GGUF:Q4_K_M"),
            ModelKind::GgufQuantTag { repo: "org/name-GGUF".into(), tag: "Q4_K_M".into() }
        );
        for hf in ["llama-2-7b", "Qwen/Qwen2.5-7B-Instruct", "config.json", "ckpt/model.safetensors", "."] {
            assert_eq!(model_kind(hf), ModelKind::Transformers, "{hf}");
        }
        // a file on disk named like a Hub reference (or a quant tag) is that file
        let on_disk = || true;
        assert_eq!(kind_of("org/name:m.gguf", &on_disk), ModelKind::Gguf(GgufLocation::File("org/name:m.gguf".into())));
        assert_eq!(kind_of("org/name:Q4_K_M", &on_disk), ModelKind::Transformers);
    }

    #[test]
    fn a_path_this_user_may_not_look_at_is_permission_denied_not_unknown() {
        // tests may run as root, where every path can be looked at: the decision itself
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = is_path(Path::new("/srv/models/m/config.json"), Err(denied)).unwrap_err().to_string();
        assert!(e.starts_with("/srv/models/m/config.json: cannot read: permission denied"), "{e}");
        assert!(!e.contains("unknown model"), "{e}");
        // no such path: then it is a name (preset, hub id)
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert!(!is_path(Path::new("org/name"), Err(missing)).unwrap());
        assert!(is_path(Path::new("."), std::fs::symlink_metadata(".")).unwrap());
    }

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(a, _)| *a == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn unknown_names_say_what_to_do() {
        let e = resolve_with_env("no-such-model-xyz", &env(&[])).unwrap_err().to_string();
        assert!(e.contains("--list-presets") && e.contains("org/name") && e.contains("config.json"), "{e}");
    }

    #[test]
    fn a_sibling_hub_id_is_not_a_preset_offline() {
        // Meta-Llama-3-8B is not Llama 3.1 8B: offline it is unknown, with the way out
        let e = resolve_with_env(
            "meta-llama/Meta-Llama-3-8B",
            &env(&[("HF_HUB_OFFLINE", "1"), ("HF_HOME", "/nonexistent-vramfit")]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown model 'meta-llama/Meta-Llama-3-8B'"), "{e}");
        assert!(e.contains("/nonexistent-vramfit/hub"), "names the cache it looked in: {e}");
        assert!(e.contains("huggingface-cli download meta-llama/Meta-Llama-3-8B config.json"), "{e}");
        #[cfg(feature = "hub")]
        assert!(e.contains("HF_HUB_OFFLINE=1 forbids the network"), "{e}");
        #[cfg(not(feature = "hub"))]
        assert!(e.contains("built without Hub access"), "{e}");
        // the preset's own ids still resolve, offline
        let r = resolve_with_env("meta-llama/Llama-3.1-8B", &env(&[("HF_HUB_OFFLINE", "1")])).unwrap();
        assert_eq!(r.spec.name, "llama-3.1-8b");
    }

    #[test]
    fn revision_only_for_hub_ids() {
        let o = ResolveOptions { revision: Some("v1"), ..ResolveOptions::new(&|_| None) };
        let e = resolve_with("llama-2-7b", &o).unwrap_err().to_string();
        assert!(e.contains("--revision") && e.contains("hub ids"), "{e}");
        let o = ResolveOptions { revision: Some("../x"), ..ResolveOptions::new(&|_| None) };
        assert!(resolve_with("a/b", &o).is_err());
    }

    #[test]
    fn resolve_name_never_opens_a_path() {
        // a real config.json on disk, named by its path and by its directory
        let dir = std::env::temp_dir().join(format!("vramfit-resolve-name-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = dir.join("config.json");
        std::fs::write(&cfg, r#"{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":128,"vocab_size":100}"#).unwrap();
        let o = ResolveOptions { offline: true, ..ResolveOptions::new(&|_| None) };
        assert!(resolve_with(cfg.to_str().unwrap(), &o).is_ok(), "the CLI reads paths");
        for q in [cfg.to_str().unwrap(), dir.to_str().unwrap(), "/etc/passwd", "./config.json", "../x/y"] {
            let e = resolve_name(q, &o).unwrap_err();
            assert!(matches!(e, IngestError::UnknownModel { .. }), "{q}: {e}");
        }
        // presets and preset hub ids still resolve
        assert_eq!(resolve_name("llama-2-7b", &o).unwrap().spec.name, "llama-2-7b");
        assert_eq!(resolve_name("meta-llama/Llama-3.1-8B", &o).unwrap().spec.name, "llama-3.1-8b");
    }

    #[test]
    fn config_from_bytes_is_the_file_parser() {
        let text = br#"{"model_type":"llama","hidden_size":64,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":128,"vocab_size":100}"#;
        let r = from_config_bytes(text, "pasted config.json").unwrap();
        assert_eq!(r.source_text(), "pasted config.json");
        assert_eq!(r.spec.num_layers, 2);
        // the same errors as a file: invalid JSON, a missing field, the size cap, the encoding
        let e = from_config_bytes(b"{", "pasted config.json").unwrap_err().to_string();
        assert!(e.starts_with("pasted config.json: not valid JSON"), "{e}");
        let e = from_config_bytes(br#"{"model_type":"llama"}"#, "pasted config.json").unwrap_err().to_string();
        assert!(e.contains("hidden_size"), "{e}");
        let big = vec![b' '; crate::config::MAX_CONFIG_BYTES + 1];
        assert!(from_config_bytes(&big, "pasted config.json").unwrap_err().to_string().contains("too large"));
        assert!(from_config_bytes(&[0xff, 0x00, 0x41], "p").is_err());
    }
}
