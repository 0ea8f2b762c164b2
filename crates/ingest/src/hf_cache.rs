//! Find a hub id in the local Hugging Face cache, offline.
//!
//! Layout (huggingface_hub `file_download.py`): `<cache>/models--{org}--{name}/`
//! with `refs/<revision>` holding a commit hash and `snapshots/<hash>/`
//! holding the files. The cache is `$HF_HUB_CACHE`, else `$HF_HOME/hub`,
//! else `~/.cache/huggingface/hub`. Never touches the network.

use std::path::{Path, PathBuf};

/// The cache directory as the environment names it. `env` is a lookup so
/// tests can pass their own.
pub fn cache_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(c) = env("HF_HUB_CACHE").filter(|s| !s.is_empty()) {
        return Some(PathBuf::from(c));
    }
    if let Some(h) = env("HF_HOME").filter(|s| !s.is_empty()) {
        return Some(Path::new(&h).join("hub"));
    }
    env("HOME").filter(|s| !s.is_empty()).map(|h| Path::new(&h).join(".cache").join("huggingface").join("hub"))
}

/// Is `query` shaped like a hub id (`org/name`, no path tricks)?
pub fn looks_like_hub_id(query: &str) -> bool {
    let mut parts = query.split('/');
    let (Some(org), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let ok = |s: &str| {
        !s.is_empty() && s != "." && s != ".." && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    ok(org) && ok(name)
}

/// The snapshot directory of `repo_id` holding a `config.json`, preferring
/// the revision `refs/main` points at.
pub fn find_snapshot(cache: &Path, repo_id: &str) -> Option<PathBuf> {
    if !looks_like_hub_id(repo_id) {
        return None;
    }
    let repo = cache.join(format!("models--{}", repo_id.replace('/', "--")));
    let snapshots = repo.join("snapshots");
    if let Ok(hash) = std::fs::read_to_string(repo.join("refs").join("main")) {
        let hash = hash.trim();
        if !hash.is_empty() && hash.chars().all(|c| c.is_ascii_alphanumeric()) {
            let dir = snapshots.join(hash);
            if dir.join("config.json").is_file() {
                return Some(dir);
            }
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&snapshots)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("config.json").is_file())
        .collect();
    dirs.sort();
    dirs.pop()
}
