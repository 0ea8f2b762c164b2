//! One entry point for a model argument: a `config.json` path, a directory
//! holding one (and maybe safetensors), a hub id found in the local
//! Hugging Face cache, or an embedded preset. Never the network.

use crate::config::parse_config;
use crate::error::IngestError;
use crate::hf_cache;
use crate::safetensors::{self, SafetensorsSummary};
use serde::Serialize;
use std::path::{Path, PathBuf};
use vramfit_catalog::presets;
use vramfit_core::{ModelSpec, ParamLayout};

/// Where a model came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Source {
    Preset { name: String, source: String },
    ConfigFile { path: String },
    HfCache { repo_id: String, snapshot: String },
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

impl ResolvedModel {
    /// One-line description of the source.
    pub fn source_text(&self) -> String {
        match &self.source {
            Source::Preset { name, source } => format!("preset {name} ({source})"),
            Source::ConfigFile { path } => path.clone(),
            Source::HfCache { repo_id, snapshot } => {
                format!("{repo_id} from the local Hugging Face cache ({snapshot})")
            }
        }
    }
}

/// Environment lookups, injectable for tests.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Resolve `query` with the process environment.
pub fn resolve_model(query: &str) -> Result<ResolvedModel, IngestError> {
    resolve_with_env(query, &|k| std::env::var(k).ok())
}

/// Resolve `query`: path, then local HF cache (for hub ids), then preset.
pub fn resolve_with_env(query: &str, env: Env) -> Result<ResolvedModel, IngestError> {
    let q = query.trim();
    if q.is_empty() {
        return Err(IngestError::UnknownModel { query: query.into(), suggestions: vec![] });
    }
    let path = Path::new(q);
    if path.exists() {
        return from_path(path);
    }
    if hf_cache::looks_like_hub_id(q) {
        if let Some(cache) = hf_cache::cache_dir(env) {
            if let Some(snap) = hf_cache::find_snapshot(&cache, q) {
                let mut r = from_dir(&snap)?;
                r.source = Source::HfCache { repo_id: q.into(), snapshot: snap.display().to_string() };
                if r.spec.name.ends_with("config.json") {
                    r.spec.name = q.into();
                }
                return Ok(r);
            }
        }
    }
    let all = presets::builtin()
        .map_err(|e| IngestError::Invalid { file: "embedded presets".into(), reason: e.to_string() })?;
    if let Some(p) = presets::find(&all, q) {
        let origin = format!("preset {}", p.name);
        let mut spec = crate::config::parse_config_value(&p.config, &origin)?;
        spec.name = p.name.clone();
        return Ok(ResolvedModel {
            spec,
            source: Source::Preset { name: p.name.clone(), source: p.source.clone() },
            checkpoint: None,
        });
    }
    Err(IngestError::UnknownModel { query: q.into(), suggestions: presets::suggestions(&all, q) })
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
    let meta = std::fs::metadata(path).map_err(|e| IngestError::Io { file: file.clone(), reason: e.to_string() })?;
    if meta.len() > crate::config::MAX_CONFIG_BYTES as u64 {
        return Err(IngestError::Invalid {
            file,
            reason: format!("{} bytes is too large for a config.json", meta.len()),
        });
    }
    let bytes = std::fs::read(path).map_err(|e| IngestError::Io { file: file.clone(), reason: e.to_string() })?;
    let mut spec = parse_config(&bytes, &file)?;
    if spec.name == file || spec.name.is_empty() {
        spec.name = path
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .unwrap_or(file.clone());
    }
    Ok(ResolvedModel { spec, source: Source::ConfigFile { path: file }, checkpoint: None })
}

fn from_dir(dir: &Path) -> Result<ResolvedModel, IngestError> {
    let cfg = dir.join("config.json");
    if !cfg.is_file() {
        return Err(IngestError::Io {
            file: cfg.display().to_string(),
            reason: "no config.json in this directory".into(),
        });
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
