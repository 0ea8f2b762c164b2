//! GGUF files: the header (metadata and tensor infos, never tensor data)
//! and the model llama.cpp would load from it.
//!
//! - [`header`]: the total, bounded parser ([`parse`] takes a prefix of the
//!   file and answers the header or how many bytes it still needs)
//! - [`value`]: metadata values
//! - [`model`]: header → `vramfit_llamacpp::LlamaModel`
//! - [`mmproj`]: a projector's header (`--mmproj`) → `vramfit_llamacpp::companion::Mmproj`
//! - [`writer`]: a small GGUF writer for tests, fuzz seeds and fixtures
//!
//! Local files are read through `vramfit-input` (regular files only, a byte
//! cap on what is read): [`read_file`] reads a growing prefix until the
//! header is complete. A Hub GGUF is read the same way through HTTP range
//! requests by the Hub fetcher: feed [`parse`] what has arrived and fetch
//! [`Parsed::NeedMore`]`.bytes` when asked.

pub mod header;
pub mod mmproj;
pub mod model;
pub mod value;
pub mod writer;

pub use header::{limits, parse, GgufError, GgufHeader, GgufTensor, Parsed};
pub use model::{model_from_header, ModelError};
pub use value::{MetaValue, ValueType};

use std::path::Path;

/// First read of a local file; doubled while the header asks for more.
pub const FIRST_READ: u64 = 1 << 20;

/// Why a GGUF file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GgufFileError {
    #[error(transparent)]
    Input(#[from] vramfit_input::InputError),
    #[error("{file}: GGUF header: {error}")]
    Header { file: String, error: GgufError },
    #[error("{file}: {error}")]
    Model { file: String, error: ModelError },
    #[error("{file}: split GGUF: {message}")]
    Split { file: String, message: String },
    #[error(transparent)]
    Hub(#[from] crate::hub::HubError),
    /// reading the Hugging Face cache (a damaged ref or cached header)
    #[error(transparent)]
    Cache(#[from] crate::error::IngestError),
}

/// Most shards a split model may have (`split.count`).
pub const MAX_SPLITS: u64 = 1024;

/// `NAME-00001-of-00003.gguf` → (`NAME`, 1, 3): llama.cpp's
/// `llama_split_path` naming (`%s-%05d-of-%05d.gguf`).
fn split_name(path: &Path) -> Option<(String, u64, u64)> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".gguf").or_else(|| name.strip_suffix(".GGUF"))?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, no) = rest.rsplit_once('-')?;
    if no.len() != 5 || count.len() != 5 {
        return None;
    }
    Some((prefix.to_string(), no.parse().ok()?, count.parse().ok()?))
}

/// `split.count` of a header (1 when absent).
fn split_count(h: &GgufHeader, file: &str) -> Result<u64, GgufFileError> {
    match h.get("split.count") {
        None => Ok(1),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_SPLITS).contains(&n) => Ok(n),
            _ => Err(GgufFileError::Split {
                file: file.to_string(),
                message: format!("metadata 'split.count' is {}, expected 1 to {MAX_SPLITS}", v.describe()),
            }),
        },
    }
}

/// The header of a local model, all shards of a split model merged (see
/// [`merge_split`]).
pub fn read_model_header(path: &Path) -> Result<GgufHeader, GgufFileError> {
    let first = read_header(path)?;
    merge_split(path, first, &mut |p: &Path| read_header(p))
}

/// A model's header from its first-read file `path` (header `first`): the
/// same header when the model is one file; for a split model
/// (`split.count` > 1), the metadata of the first shard and every shard's
/// tensors, each shard read by `read_shard` (a local file, or a Hub file
/// by range requests) under llama.cpp's names beside `path`, with offsets
/// rebased as if the shards were one file (llama.cpp maps each shard on
/// its own; the rebased offsets only feed the mapped-range note).
pub fn merge_split(
    path: &Path,
    first: GgufHeader,
    read_shard: &mut dyn FnMut(&Path) -> Result<GgufHeader, GgufFileError>,
) -> Result<GgufHeader, GgufFileError> {
    let file = path.display().to_string();
    let count = split_count(&first, &file)?;
    if count == 1 {
        return Ok(first);
    }
    let (prefix, _, named_count) = split_name(path).ok_or_else(|| GgufFileError::Split {
        file: file.clone(),
        message: format!(
            "this is one of {count} shards, but its name does not follow llama.cpp's NAME-00001-of-{count:05}.gguf, so the other shards cannot be found"
        ),
    })?;
    if named_count != count {
        return Err(GgufFileError::Split {
            file,
            message: format!("the name says {named_count} shards, metadata 'split.count' says {count}"),
        });
    }
    let dir = path.parent().unwrap_or(Path::new(""));
    let mut merged: Option<GgufHeader> = None;
    let mut base = 0u64;
    for no in 1..=count {
        let shard_path = dir.join(format!("{prefix}-{no:05}-of-{count:05}.gguf"));
        let shard_file = shard_path.display().to_string();
        let h = if shard_path == path { first.clone() } else { read_shard(&shard_path)? };
        match h.get("split.no").and_then(MetaValue::as_u64) {
            Some(n) if n == no - 1 => {}
            other => {
                return Err(GgufFileError::Split {
                    file: shard_file,
                    message: format!(
                        "metadata 'split.no' is {}, expected {} for shard {no} of {count}",
                        other.map(|n| n.to_string()).unwrap_or_else(|| "missing".into()),
                        no - 1
                    ),
                })
            }
        }
        let shard_base = base.checked_add(h.data_offset).ok_or_else(|| GgufFileError::Split {
            file: shard_file.clone(),
            message: "shard offsets overflow".into(),
        })?;
        let mut tensors = h.tensors.clone();
        for t in &mut tensors {
            t.offset = t.offset.checked_add(shard_base).ok_or_else(|| GgufFileError::Split {
                file: shard_file.clone(),
                message: format!("tensor '{}': offset overflows", t.name),
            })?;
        }
        base = base
            .checked_add(h.file_len)
            .ok_or_else(|| GgufFileError::Split { file: shard_file.clone(), message: "shard sizes overflow".into() })?;
        match &mut merged {
            None => merged = Some(GgufHeader { tensors, ..h }),
            Some(m) => {
                if m.tensors.len() + tensors.len() > limits::MAX_TENSORS as usize {
                    return Err(GgufFileError::Split {
                        file: shard_file,
                        message: format!("more than {} tensors over all shards", limits::MAX_TENSORS),
                    });
                }
                m.tensors.extend(tensors);
            }
        }
    }
    let mut m = merged.ok_or_else(|| GgufFileError::Split { file: file.clone(), message: "no shard read".into() })?;
    // the data of shard 1 starts at its own data offset
    for t in &mut m.tensors {
        t.offset -= m.data_offset;
    }
    m.file_len = base;
    let mut seen = std::collections::HashSet::new();
    for t in &m.tensors {
        if !seen.insert(t.name.as_str()) {
            return Err(GgufFileError::Split { file, message: format!("tensor '{}' appears in two shards", t.name) });
        }
    }
    if let Some(want) = m.get("split.tensors.count").and_then(MetaValue::as_u64) {
        if want != m.tensors.len() as u64 {
            return Err(GgufFileError::Split {
                file,
                message: format!(
                    "metadata 'split.tensors.count' is {want}, the {count} shards hold {} tensors",
                    m.tensors.len()
                ),
            });
        }
    }
    Ok(m)
}

/// Read and parse the header of a local `.gguf` file.
pub fn read_header(path: &Path) -> Result<GgufHeader, GgufFileError> {
    let file = path.display().to_string();
    let (mut f, len) = vramfit_input::open_regular(path)?;
    let mut want = FIRST_READ.min(len);
    loop {
        let buf = vramfit_input::read_range(&mut f, &file, 0, want)?;
        match parse(&buf, len) {
            Ok(Parsed::Complete(h)) => return Ok(*h),
            Ok(Parsed::NeedMore { bytes }) => {
                // the parser never asks past the file or the header cap
                let next = bytes.max(want.saturating_mul(2)).min(len).min(limits::MAX_HEADER_BYTES);
                if next <= want || (buf.len() as u64) < want {
                    return Err(GgufFileError::Header {
                        file,
                        error: GgufError::PastEnd {
                            field: "header".into(),
                            at: buf.len() as u64,
                            needed: bytes,
                            file_len: len,
                        },
                    });
                }
                want = next;
            }
            Err(error) => return Err(GgufFileError::Header { file, error }),
        }
    }
}

/// Read a local `.gguf` file (every shard of a split model) into the model
/// llama.cpp would load.
pub fn read_model(path: &Path) -> Result<(GgufHeader, vramfit_llamacpp::LlamaModel), GgufFileError> {
    let h = read_model_header(path)?;
    let m = model_of(&h, path, &path.display().to_string())?;
    Ok((h, m))
}

/// The model llama.cpp would load from a (merged) header; `path` names the
/// model when `general.name` is absent, `label` the file in errors.
pub fn model_of(h: &GgufHeader, path: &Path, label: &str) -> Result<vramfit_llamacpp::LlamaModel, GgufFileError> {
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    model_from_header(h, &name).map_err(|error| GgufFileError::Model { file: label.to_string(), error })
}

/// Read a local projector file (`--mmproj FILE`): its header only.
pub fn read_mmproj(path: &Path, offload: bool) -> Result<vramfit_llamacpp::companion::Mmproj, GgufFileError> {
    let file = path.display().to_string();
    let h = read_header(path)?;
    mmproj::mmproj_from_header(&h, &file, offload).map_err(|error| GgufFileError::Model { file, error })
}

/// A GGUF file on the Hugging Face Hub, written `org/name:path/file.gguf`
/// (the repo, a colon, the file's path in the repo).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubGgufRef {
    pub repo: String,
    pub file: String,
}

impl HubGgufRef {
    /// `org/name:file.gguf` → the repo and file; `None` for anything else
    /// (a local path has no `org/name:` in front). The repo follows the
    /// Hub's naming (letters, digits, `-`, `_`, `.`); the file is a
    /// relative path of plain components ending in `.gguf`.
    pub fn parse(s: &str) -> Option<HubGgufRef> {
        let (repo, file) = s.split_once(':')?;
        let (org, name) = repo.split_once('/')?;
        let part = |p: &str| {
            !p.is_empty()
                && p.len() <= 96
                && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                && !p.starts_with(['.', '-'])
        };
        let file_ok = file.to_ascii_lowercase().ends_with(".gguf")
            && file.split('/').all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\\'))
            && !file.chars().any(char::is_control);
        (part(org) && part(name) && file_ok).then(|| HubGgufRef { repo: repo.to_string(), file: file.to_string() })
    }

    /// llama.cpp's `-hf org/name:Q4_K_M` form (a quant tag, not a file):
    /// the repo and the tag, so the error can say to name the file.
    pub fn quant_tag(s: &str) -> Option<(String, String)> {
        let (repo, tag) = s.split_once(':')?;
        let (org, name) = repo.split_once('/')?;
        let word = |p: &str| {
            !p.is_empty()
                && p.len() <= 96
                && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                && !p.starts_with(['.', '-'])
        };
        (word(org) && word(name) && word(tag) && !tag.to_ascii_lowercase().ends_with(".gguf"))
            .then(|| (repo.to_string(), tag.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_gguf_references() {
        let r = HubGgufRef::parse("bartowski/Qwen2.5-7B-Instruct-GGUF:Qwen2.5-7B-Instruct-Q4_K_M.gguf").unwrap();
        assert_eq!(
            (r.repo.as_str(), r.file.as_str()),
            ("bartowski/Qwen2.5-7B-Instruct-GGUF", "Qwen2.5-7B-Instruct-Q4_K_M.gguf")
        );
        assert_eq!(HubGgufRef::parse("org/name:sub/dir/m.GGUF").unwrap().file, "sub/dir/m.GGUF");
        for bad in [
            "./model.gguf",
            "model.gguf",
            "org/name:../x.gguf",
            "org/name:/abs.gguf",
            "org/name:a//b.gguf",
            "org/name:x.bin",
            "org/name/extra:x.gguf",
            "/abs/path:x.gguf",
            "org/.hidden:x.gguf",
            "org/name:x\u{1b}.gguf",
        ] {
            assert_eq!(HubGgufRef::parse(bad), None, "{bad}");
        }
        assert_eq!(
            HubGgufRef::quant_tag("bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M"),
            Some(("bartowski/Llama-3.2-3B-Instruct-GGUF".into(), "Q4_K_M".into()))
        );
        assert_eq!(HubGgufRef::quant_tag("org/name:file.gguf"), None);
        assert_eq!(HubGgufRef::quant_tag("./a:b"), None);
    }
}
