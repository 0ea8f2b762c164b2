//! Model presets: Hugging Face config objects embedded as data
//! (`data/presets.json`), looked up by name, alias or hub id,
//! case-insensitively. The config objects are parsed by
//! `vramfit-ingest`'s config parser, the same code that reads a user's
//! `config.json`.

use serde::Deserialize;

/// The embedded presets file.
pub const PRESETS_JSON: &str = include_str!("../data/presets.json");

/// One preset.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Preset {
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    #[serde(default)]
    pub hub_ids: Vec<String>,
    /// where the dimensions come from
    pub source: String,
    /// parameter count as the model card states it (free text)
    #[serde(default)]
    pub params_card: Option<String>,
    /// a config.json object
    pub config: serde_json::Value,
    /// the checkpoint's `hf_quant_config.json` (ModelOpt), when its config.json
    /// does not declare the quantization
    #[serde(default)]
    pub hf_quant_config: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct PresetFile {
    version: u32,
    presets: Vec<Preset>,
}

/// Errors reading a presets file.
#[derive(Debug, thiserror::Error)]
pub enum PresetError {
    #[error("{file}: line {line}, column {column}: {reason}")]
    Parse { file: String, line: usize, column: usize, reason: String },
    #[error("{file}: version {found} is not supported (expected 1)")]
    Version { file: String, found: u32 },
}

/// Parse a presets document (embedded or a user's own).
pub fn parse(text: &str, file: &str) -> Result<Vec<Preset>, PresetError> {
    let doc: PresetFile = serde_json::from_str(text).map_err(|e| PresetError::Parse {
        file: file.into(),
        line: e.line(),
        column: e.column(),
        reason: e.to_string(),
    })?;
    if doc.version != 1 {
        return Err(PresetError::Version { file: file.into(), found: doc.version });
    }
    Ok(doc.presets)
}

/// The embedded presets.
pub fn builtin() -> Result<Vec<Preset>, PresetError> {
    parse(PRESETS_JSON, "embedded presets.json")
}

fn norm(s: &str) -> String {
    s.trim().to_ascii_lowercase().replace('_', "-")
}

/// Find a preset by name or alias (case-insensitive; `_` = `-`) or by
/// hub id (case-insensitive like the Hub, otherwise exact: `_` and `-` are
/// different repos there, e.g. `TinyLlama/TinyLlama_v1.1`). A hub id matches
/// only the repos a preset lists, never a sibling with a different config.
pub fn find<'a>(presets: &'a [Preset], query: &str) -> Option<&'a Preset> {
    let q = norm(query);
    let hub = query.trim();
    presets.iter().find(|p| {
        norm(&p.name) == q
            || p.aliases.iter().any(|a| norm(a) == q)
            || p.hub_ids.iter().any(|h| h.eq_ignore_ascii_case(hub))
    })
}

/// Up to three preset names closest to `query`, for "did you mean".
pub fn suggestions(presets: &[Preset], query: &str) -> Vec<String> {
    let q = norm(query);
    let q_tail = q.rsplit('/').next().unwrap_or(&q).to_string();
    let mut scored: Vec<(f64, &str)> = presets
        .iter()
        .map(|p| {
            let best = std::iter::once(&p.name)
                .chain(p.aliases.iter())
                .chain(p.hub_ids.iter())
                .map(|n| {
                    let n = norm(n);
                    let tail = n.rsplit('/').next().unwrap_or(&n).to_string();
                    strsim::jaro_winkler(&q, &n).max(strsim::jaro_winkler(&q_tail, &tail))
                })
                .fold(0.0, f64::max);
            (best, p.name.as_str())
        })
        .filter(|(s, _)| *s > 0.75)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(3).map(|(_, n)| n.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_presets_parse_sorted_and_unique() {
        let p = builtin().unwrap();
        assert!(p.len() >= 80, "only {} presets (issue 12: at least 80)", p.len());
        let names: Vec<_> = p.iter().map(|p| p.name.clone()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted, "presets must be sorted by name");
        let mut all: Vec<String> = p
            .iter()
            .flat_map(|p| std::iter::once(&p.name).chain(&p.aliases).chain(&p.hub_ids))
            .map(|s| norm(s))
            .collect();
        let n = all.len();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), n, "a name, alias or hub id is used twice");
    }

    #[test]
    fn lookup_is_case_insensitive_and_knows_hub_ids() {
        let p = builtin().unwrap();
        assert_eq!(find(&p, "LLaMA-2-7B").unwrap().name, "llama-2-7b");
        assert_eq!(find(&p, "meta-llama/Llama-2-7b-hf").unwrap().name, "llama-2-7b");
        assert!(find(&p, "llama-9-7b").is_none());
        assert!(suggestions(&p, "lama-2-7b").contains(&"llama-2-7b".to_string()));
    }

    #[test]
    fn a_hub_id_never_resolves_to_a_sibling() {
        let p = builtin().unwrap();
        // Llama 3 (8192 positions) is not Llama 3.1 (131072): issue 15.
        assert!(find(&p, "meta-llama/Meta-Llama-3-8B").is_none());
        assert!(find(&p, "llama-3-8b").is_none());
        assert!(find(&p, "llama3-8b").is_none());
        assert!(find(&p, "llama-3-70b").is_none());
        assert_eq!(find(&p, "meta-llama/Meta-Llama-3.1-8B").unwrap().name, "llama-3.1-8b");
        // hub ids: case-insensitive, but `_` and `-` name different repos
        assert_eq!(find(&p, "tinyllama/tinyllama_v1.1").unwrap().name, "tinyllama-1.1b");
        assert!(find(&p, "TinyLlama/TinyLlama-v1.1").is_none());
        // family names are not models
        for family in ["mistral", "mixtral", "qwen3-moe"] {
            assert!(find(&p, family).is_none(), "{family}");
        }
    }

    #[test]
    fn sources_cite_no_path_outside_the_repo() {
        for p in builtin().unwrap() {
            assert!(!p.source.contains("shared/"), "{}: {}", p.name, p.source);
        }
    }
}
