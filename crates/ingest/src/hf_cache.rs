//! The local Hugging Face cache, offline: where it is, and the snapshot of
//! a hub id at a revision.
//!
//! Layout (huggingface_hub `file_download.py`, "Understand caching" guide):
//! `<cache>/models--{org}--{name}/` with `refs/<revision>` holding a commit
//! hash, `snapshots/<commit>/` holding the files (symlinks into `blobs/`),
//! and `.no_exist/<commit>/<file>` marking files the Hub said are absent.
//! The cache is `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
//! `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`
//! (huggingface_hub `constants.py`). Every file is read through
//! `vramfit-input`: a `refs/main` that is a device or a FIFO is refused,
//! never read until memory runs out or blocked on.

use crate::error::IngestError;
use std::path::{Path, PathBuf};

/// Longest `refs/<revision>` file read: a 40-hex commit and a newline.
const MAX_REF_BYTES: u64 = 256;

/// Environment lookups, injectable for tests.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

fn non_empty(env: Env, key: &str) -> Option<String> {
    env(key).filter(|s| !s.trim().is_empty())
}

/// `$HF_HOME`, else `$XDG_CACHE_HOME/huggingface`, else `~/.cache/huggingface`.
pub fn hf_home(env: Env) -> Option<PathBuf> {
    if let Some(h) = non_empty(env, "HF_HOME") {
        return Some(PathBuf::from(h));
    }
    if let Some(x) = non_empty(env, "XDG_CACHE_HOME") {
        return Some(Path::new(&x).join("huggingface"));
    }
    non_empty(env, "HOME").map(|h| Path::new(&h).join(".cache").join("huggingface"))
}

/// The cache directory as the environment names it (`HUGGINGFACE_HUB_CACHE`
/// is the older name huggingface_hub still reads).
pub fn cache_dir(env: Env) -> Option<PathBuf> {
    if let Some(c) = non_empty(env, "HF_HUB_CACHE").or_else(|| non_empty(env, "HUGGINGFACE_HUB_CACHE")) {
        return Some(PathBuf::from(c));
    }
    hf_home(env).map(|h| h.join("hub"))
}

/// Is `query` shaped like a hub id (`org/name`, no path tricks)?
pub fn looks_like_hub_id(query: &str) -> bool {
    let mut parts = query.split('/');
    let (Some(org), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let ok = |s: &str| {
        !s.is_empty()
            && s.len() <= 96
            && s != "."
            && s != ".."
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    };
    ok(org) && ok(name)
}

/// Is `rev` a full commit hash (40 hex digits)?
pub fn is_commit(rev: &str) -> bool {
    rev.len() == 40 && rev.chars().all(|c| c.is_ascii_hexdigit())
}

/// Check a revision (branch, tag, commit, `refs/pr/N`) before it becomes a
/// path under `refs/` or part of a URL.
pub fn check_revision(rev: &str) -> Result<(), IngestError> {
    let ok = !rev.is_empty()
        && rev.len() <= 256
        && rev.split('/').all(|p| !p.is_empty() && p != "." && p != "..")
        && rev.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    if ok {
        Ok(())
    } else {
        Err(IngestError::Invalid {
            file: "--revision".into(),
            reason: format!(
                "'{}' is not a revision: a branch, tag or commit hash (letters, digits, - _ . /)",
                rev.escape_debug()
            ),
        })
    }
}

/// `<cache>/models--{org}--{name}`.
pub fn repo_dir(cache: &Path, repo_id: &str) -> PathBuf {
    cache.join(format!("models--{}", repo_id.replace('/', "--")))
}

/// The commit `refs/<revision>` points at, if the file exists. A ref that is
/// not a regular file or does not hold a commit hash is an error naming it.
pub fn read_ref(repo: &Path, revision: &str) -> Result<Option<String>, IngestError> {
    let path = repo.join("refs").join(revision);
    if std::fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let text = vramfit_input::read_text(&path, "a Hugging Face cache ref", MAX_REF_BYTES)?;
    let hash = text.trim();
    if !(hash.len() >= 7 && hash.len() <= 64 && hash.chars().all(|c| c.is_ascii_hexdigit())) {
        return Err(IngestError::Invalid {
            file: path.display().to_string(),
            reason: "does not hold a commit hash (a damaged Hugging Face cache: delete this file to refetch)".into(),
        });
    }
    Ok(Some(hash.to_string()))
}

/// A snapshot found in the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// `snapshots/<commit>`
    pub dir: PathBuf,
    pub commit: String,
    /// how it was chosen, for the source line (`refs/main`, `commit`, …)
    pub via: String,
}

/// The snapshot of `repo_id` at `revision` (default `main`) holding a
/// `config.json`: the commit `refs/<revision>` names, or the commit itself.
/// Without a revision, in a cache with no refs at all and a single
/// snapshot, that snapshot is taken and `via` says so.
pub fn find_snapshot(cache: &Path, repo_id: &str, revision: Option<&str>) -> Result<Option<Snapshot>, IngestError> {
    if !looks_like_hub_id(repo_id) {
        return Ok(None);
    }
    let repo = repo_dir(cache, repo_id);
    if !repo.is_dir() {
        return Ok(None);
    }
    let snapshots = repo.join("snapshots");
    let rev = revision.unwrap_or("main");
    check_revision(rev)?;
    let has_config = |dir: &Path| std::fs::symlink_metadata(dir.join("config.json")).is_ok();
    if is_commit(rev) && has_config(&snapshots.join(rev)) {
        return Ok(Some(Snapshot { dir: snapshots.join(rev), commit: rev.to_string(), via: "commit".into() }));
    }
    if let Some(hash) = read_ref(&repo, rev)? {
        let dir = snapshots.join(&hash);
        if has_config(&dir) {
            return Ok(Some(Snapshot { dir, commit: hash, via: format!("refs/{rev}") }));
        }
        return Ok(None);
    }
    // No ref for the revision. Only when the cache holds no refs at all (a
    // download by commit) and a single snapshot, take that one: guessing
    // among several would hand back another revision's config.
    let no_refs = std::fs::read_dir(repo.join("refs")).map(|mut d| d.next().is_none()).unwrap_or(true);
    if revision.is_some() || !no_refs {
        return Ok(None);
    }
    let Ok(entries) = std::fs::read_dir(&snapshots) else { return Ok(None) };
    let mut with_config: Vec<(String, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| has_config(&e.path()))
        .filter_map(|e| Some((e.file_name().to_str()?.to_string(), e.path())))
        .take(2)
        .collect();
    if with_config.len() != 1 {
        return Ok(None);
    }
    let (commit, dir) = with_config.remove(0);
    Ok(Some(Snapshot { dir, commit, via: "the only snapshot (no refs)".into() }))
}

/// Does `.no_exist/<commit>/<file>` mark `file` as absent at `commit`?
pub fn marked_absent(cache: &Path, repo_id: &str, commit: &str, file: &str) -> bool {
    std::fs::symlink_metadata(repo_dir(cache, repo_id).join(".no_exist").join(commit).join(file)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| pairs.iter().find(|(a, _)| *a == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn cache_dir_follows_huggingface_hub() {
        assert_eq!(cache_dir(&env(&[("HF_HUB_CACHE", "/c"), ("HF_HOME", "/h")])), Some("/c".into()));
        assert_eq!(cache_dir(&env(&[("HUGGINGFACE_HUB_CACHE", "/old")])), Some("/old".into()));
        assert_eq!(cache_dir(&env(&[("HF_HOME", "/h"), ("HOME", "/u")])), Some("/h/hub".into()));
        assert_eq!(cache_dir(&env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/u")])), Some("/x/huggingface/hub".into()));
        assert_eq!(cache_dir(&env(&[("HOME", "/u")])), Some("/u/.cache/huggingface/hub".into()));
        assert_eq!(cache_dir(&env(&[])), None);
    }

    #[test]
    fn revisions_are_checked_before_they_become_paths() {
        for ok in ["main", "v1.0", "refs/pr/1", "0123456789abcdef0123456789abcdef01234567"] {
            assert!(check_revision(ok).is_ok(), "{ok}");
        }
        for bad in ["", "../x", "a//b", "/abs", "a b", "a\u{1b}[31m"] {
            assert!(check_revision(bad).is_err(), "{bad:?}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_ref_that_is_a_device_or_fifo_is_refused_not_read() {
        let dir = std::env::temp_dir().join(format!("vramfit-hfcache-{}", std::process::id()));
        let repo = repo_dir(&dir, "acme/x");
        std::fs::create_dir_all(repo.join("refs")).unwrap();
        std::fs::create_dir_all(repo.join("snapshots")).unwrap();
        let main = repo.join("refs/main");
        let _ = std::fs::remove_file(&main);
        std::os::unix::fs::symlink("/dev/zero", &main).unwrap();
        let e = find_snapshot(&dir, "acme/x", None).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_file(&main).unwrap();
        if std::process::Command::new("mkfifo").arg(&main).status().map(|s| s.success()).unwrap_or(false) {
            let e = find_snapshot(&dir, "acme/x", None).unwrap_err().to_string();
            assert!(e.contains("FIFO"), "{e}");
            std::fs::remove_file(&main).unwrap();
        }
        std::fs::write(&main, "not a hash\n").unwrap();
        let e = find_snapshot(&dir, "acme/x", None).unwrap_err().to_string();
        assert!(e.contains("does not hold a commit hash"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
