//! Header-only reading of safetensors files: the exact parameter count and
//! dtypes of a checkpoint without touching tensor data.
//!
//! Format (safetensors README): 8-byte little-endian header length `n`,
//! then `n` bytes of JSON mapping tensor names to `{dtype, shape,
//! data_offsets}` (plus an optional `__metadata__`), then the data section.
//! Offsets are relative to the data section; the reference loader requires
//! the tensors to tile it exactly (sorted by offset, no gap, no overlap, the
//! last one ending at the end of the file), and so do we when the file size
//! is known: a truncated download or a corrupt header is reported, never
//! summed as if it matched.
//!
//! We cap `n` (a header claiming 10 GB of JSON is refused before any
//! allocation) and require the JSON to start right after the length, so a
//! file that is not safetensors at all (a symlink to a text file, an HTML
//! error page) is called that, without decoding its first bytes as a size.
//! Files are read through `vramfit-input` (regular files only).

use crate::error::IngestError;
use crate::json::Obj;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Largest header accepted. Real headers are well under 10 MiB even for
/// 400B-parameter shards; 100 MiB leaves room without risking memory.
pub const MAX_HEADER_BYTES: u64 = 100 << 20;
/// Most shards listed in one index file.
pub const MAX_SHARDS: usize = 10_000;
/// Largest `model.safetensors.index.json` read. DeepSeek-V3's index (91k
/// tensors) is about 8 MiB.
pub const MAX_INDEX_BYTES: u64 = 64 << 20;

/// What the headers say.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct SafetensorsSummary {
    /// element count over all tensors
    pub params: u64,
    /// bytes of tensor data over all tensors
    pub data_bytes: u64,
    pub tensors: u64,
    /// element count per safetensors dtype (`BF16`, `F32`, `I32`, …)
    pub params_by_dtype: BTreeMap<String, u64>,
    pub files: Vec<String>,
}

impl SafetensorsSummary {
    /// Add another shard's summary (checked: a sum that overflows is an error).
    pub fn add(&mut self, other: SafetensorsSummary, origin: &str) -> Result<(), IngestError> {
        let overflow = || err(origin, "parameter or byte count over all shards overflows 64 bits");
        self.params = self.params.checked_add(other.params).ok_or_else(overflow)?;
        self.data_bytes = self.data_bytes.checked_add(other.data_bytes).ok_or_else(overflow)?;
        self.tensors = self.tensors.checked_add(other.tensors).ok_or_else(overflow)?;
        for (k, v) in other.params_by_dtype {
            let e = self.params_by_dtype.entry(k).or_insert(0);
            *e = e.checked_add(v).ok_or_else(overflow)?;
        }
        self.files.extend(other.files);
        Ok(())
    }
}

fn err(file: &str, reason: impl Into<String>) -> IngestError {
    IngestError::Safetensors { file: file.into(), reason: reason.into() }
}

/// A tensor name as it may be echoed in a message: control characters
/// escaped (a name is untrusted input), long names cut.
fn shown(name: &str) -> String {
    let cut: String = name.chars().take(120).collect();
    let mut s = cut.escape_debug().to_string();
    if name.chars().count() > 120 {
        s.push('…');
    }
    s
}

/// Bits per element of a safetensors dtype name.
pub fn dtype_bits(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "F64" | "I64" | "U64" => 64,
        "F32" | "I32" | "U32" => 32,
        "F16" | "BF16" | "I16" | "U16" => 16,
        "F8_E4M3" | "F8_E5M2" | "I8" | "U8" | "BOOL" | "F8_E8M0" => 8,
        "F4" | "I4" | "U4" => 4,
        _ => return None,
    })
}

/// Where the header ends (`8 + n`), from the first bytes of a file:
/// `prefix` holds at least the 8-byte length and, when the file has it, the
/// first JSON byte. `file_size` is the whole file's length when known.
///
/// Errors say "not a safetensors file" when the bytes cannot be one (too
/// short, no JSON object after the length, an implausible length) without
/// printing the decoded length, which would only echo the file's content.
pub fn header_end(prefix: &[u8], file_size: Option<u64>, file: &str) -> Result<u64, IngestError> {
    let not_safetensors = |why: &str| err(file, format!("not a safetensors file: {why}"));
    let Some(len8) = prefix.get(..8) else {
        return Err(not_safetensors(&format!(
            "{} bytes, too short for the 8-byte header length",
            file_size.unwrap_or(prefix.len() as u64)
        )));
    };
    let n = u64::from_le_bytes(len8.try_into().expect("8 bytes"));
    let json_starts = prefix.get(8) == Some(&b'{');
    if !json_starts {
        return Err(not_safetensors("the 8-byte header length is not followed by a JSON object"));
    }
    if n < 2 {
        return Err(not_safetensors("the header length is smaller than an empty JSON object"));
    }
    if n > MAX_HEADER_BYTES {
        return Err(err(
            file,
            format!("header claims {n} bytes of JSON; refusing anything over {MAX_HEADER_BYTES} (corrupt file?)"),
        ));
    }
    let end = 8 + n; // n ≤ 100 MiB: no overflow
    if let Some(size) = file_size {
        // a claimed size shorter than what arrived (a lying Content-Range)
        if size < 8 {
            return Err(not_safetensors(&format!("{size} bytes, too short for the 8-byte header length")));
        }
        if end > size {
            return Err(err(
                file,
                format!(
                    "truncated: the header length says {n} bytes of JSON but the file holds only {} after the length",
                    size - 8
                ),
            ));
        }
    }
    Ok(end)
}

/// Parse header bytes (the JSON) into a summary, checking each entry. No
/// file size is known here: offsets are checked against each other only
/// (see [`parse_header_sized`]).
pub fn parse_header(json: &[u8], file: &str) -> Result<SafetensorsSummary, IngestError> {
    parse_header_sized(json, file, None)
}

/// Parse header bytes with the size of the data section (`file size − 8 −
/// header length`) when known: every tensor must lie inside it, tensors
/// must not overlap or leave gaps, and the last must end at the end of the
/// file (what the safetensors loader itself requires).
pub fn parse_header_sized(json: &[u8], file: &str, data_len: Option<u64>) -> Result<SafetensorsSummary, IngestError> {
    let v: Value = serde_json::from_slice(json).map_err(|e| err(file, format!("header is not valid JSON: {e}")))?;
    let map = v.as_object().ok_or_else(|| err(file, "header is not a JSON object"))?;
    let mut s = SafetensorsSummary { files: vec![file.to_string()], ..Default::default() };
    let mut spans: Vec<(u64, u64, &str)> = Vec::with_capacity(map.len());
    for (name, t) in map {
        if name == "__metadata__" {
            continue;
        }
        let dtype = t
            .get("dtype")
            .and_then(Value::as_str)
            .ok_or_else(|| err(file, format!("tensor '{}': missing string field dtype", shown(name))))?;
        let bits = dtype_bits(dtype)
            .ok_or_else(|| err(file, format!("tensor '{}': unknown dtype '{}'", shown(name), shown(dtype))))?;
        let shape = t
            .get("shape")
            .and_then(Value::as_array)
            .ok_or_else(|| err(file, format!("tensor '{}': missing array field shape", shown(name))))?;
        let mut n: u64 = 1;
        for d in shape {
            let d = d.as_u64().ok_or_else(|| {
                err(file, format!("tensor '{}': shape entries must be non-negative integers", shown(name)))
            })?;
            n = n
                .checked_mul(d)
                .ok_or_else(|| err(file, format!("tensor '{}': shape overflows 64 bits", shown(name))))?;
        }
        let bytes = (n as u128 * bits as u128).div_ceil(8);
        let off = t
            .get("data_offsets")
            .and_then(Value::as_array)
            .ok_or_else(|| err(file, format!("tensor '{}': missing data_offsets", shown(name))))?;
        let (a, b) = match (off.len(), off.first().and_then(Value::as_u64), off.get(1).and_then(Value::as_u64)) {
            (2, Some(a), Some(b)) if b >= a && (b - a) as u128 == bytes => (a, b),
            _ => {
                return Err(err(
                    file,
                    format!("tensor '{}': data_offsets do not match shape × dtype ({bytes} bytes)", shown(name)),
                ))
            }
        };
        spans.push((a, b, name));
        s.params = s.params.checked_add(n).ok_or_else(|| err(file, "parameter count overflows"))?;
        s.data_bytes = s.data_bytes.checked_add(b - a).ok_or_else(|| err(file, "byte count overflows"))?;
        s.tensors += 1;
        let e = s.params_by_dtype.entry(dtype.to_string()).or_insert(0);
        *e = e.checked_add(n).ok_or_else(|| err(file, "parameter count overflows"))?;
    }
    check_layout(&mut spans, file, data_len)?;
    Ok(s)
}

/// Tensors tile the data section: sorted by offset, each starts where the
/// previous ended; with the section's length known, none ends past it and
/// the last ends exactly at it.
fn check_layout(spans: &mut [(u64, u64, &str)], file: &str, data_len: Option<u64>) -> Result<(), IngestError> {
    spans.sort_unstable_by_key(|&(a, b, _)| (a, b));
    let mut cursor = 0u64;
    let mut prev = "";
    for &(a, b, name) in spans.iter() {
        if let Some(len) = data_len {
            if b > len {
                return Err(err(
                    file,
                    format!(
                        "tensor '{}' ends at byte {b} of the data section, past the end of the file ({len} bytes of data): the file is truncated (an interrupted download?) or its header is wrong",
                        shown(name)
                    ),
                ));
            }
        }
        if a < cursor {
            return Err(err(
                file,
                format!("tensors '{}' and '{}' overlap (bytes {a}..{cursor})", shown(prev), shown(name)),
            ));
        }
        if a > cursor {
            return Err(err(
                file,
                format!(
                    "bytes {cursor}..{a} of the data section belong to no tensor (before '{}'): the safetensors loader refuses such a file",
                    shown(name)
                ),
            ));
        }
        cursor = b;
        prev = name;
    }
    if let Some(len) = data_len {
        if cursor < len {
            return Err(err(
                file,
                format!(
                    "{} bytes after the last tensor belong to no tensor (data section {len} bytes, tensors end at {cursor}): the safetensors loader refuses such a file",
                    len - cursor
                ),
            ));
        }
    }
    Ok(())
}

/// A summary from a file's first `8 + n` bytes and its total size: the
/// shared path of local files and of headers read over HTTP.
pub fn summary_from_prefix(prefix: &[u8], file_size: u64, file: &str) -> Result<SafetensorsSummary, IngestError> {
    let end = header_end(prefix, Some(file_size), file)?;
    let json = prefix
        .get(8..end as usize)
        .ok_or_else(|| err(file, format!("header cut short: {} of {end} header bytes available", prefix.len())))?;
    parse_header_sized(json, file, Some(file_size - end))
}

/// Read only the header of one `.safetensors` file (a regular file, or a
/// symlink to one as in the Hugging Face cache).
pub fn read_file(path: &Path) -> Result<SafetensorsSummary, IngestError> {
    let file = path.display().to_string();
    let (mut f, len) = vramfit_input::open_regular(path)?;
    let head = vramfit_input::read_range(&mut f, &file, 0, 9)?;
    let end = header_end(&head, Some(len), &file)?;
    let json = vramfit_input::read_range(&mut f, &file, 8, end - 8)?;
    if json.len() as u64 != end - 8 {
        return Err(err(&file, "the file shrank while it was read"));
    }
    parse_header_sized(&json, &file, Some(len - end))
}

/// The shard files a `model.safetensors.index.json` lists (sorted, unique),
/// each a plain file name or a relative path inside the checkpoint.
pub fn index_shards(bytes: &[u8], file: &str) -> Result<Vec<String>, IngestError> {
    let v = crate::json::parse(bytes, file)?;
    let top = Obj::root(&v, file, "(top level)")?;
    let expected = "an object of tensor name → shard file";
    let wm = top.obj_expecting("weight_map", "weight_map", expected)?.ok_or_else(|| top.missing("weight_map"))?;
    let mut shards: Vec<&str> = Vec::new();
    for (tensor, shard) in wm.map() {
        let shard = shard.as_str().ok_or_else(|| wm.bad(&shown(tensor), "a shard file name", shard))?;
        shards.push(shard);
    }
    shards.sort_unstable();
    shards.dedup();
    if shards.len() > MAX_SHARDS {
        return Err(IngestError::Invalid {
            file: file.into(),
            reason: format!("{} shards listed (limit {MAX_SHARDS})", shards.len()),
        });
    }
    for shard in &shards {
        let p = Path::new(shard);
        let safe = !shard.is_empty()
            && !p.is_absolute()
            && p.components().all(|c| matches!(c, std::path::Component::Normal(_)))
            && !shard.contains('\\');
        if !safe {
            return Err(IngestError::Invalid {
                file: file.into(),
                reason: format!("shard path '{}' leaves the checkpoint directory", shown(shard)),
            });
        }
    }
    Ok(shards.into_iter().map(str::to_string).collect())
}

/// Read a sharded checkpoint through `model.safetensors.index.json`.
pub fn read_index(index: &Path) -> Result<SafetensorsSummary, IngestError> {
    let dir = index.parent().unwrap_or(Path::new("."));
    read_index_with(index, &mut |shard| read_file(&dir.join(shard)))
}

/// Read an index and sum its shards, each summarised by `shard_summary`
/// (a local file, or a cached header for a checkpoint fetched from the Hub).
pub fn read_index_with(
    index: &Path,
    shard_summary: &mut dyn FnMut(&str) -> Result<SafetensorsSummary, IngestError>,
) -> Result<SafetensorsSummary, IngestError> {
    let file = index.display().to_string();
    let bytes = vramfit_input::read_bytes(index, "a safetensors index", MAX_INDEX_BYTES)?;
    let mut total = SafetensorsSummary::default();
    for shard in index_shards(&bytes, &file)? {
        total.add(shard_summary(&shard)?, &file)?;
    }
    Ok(total)
}

/// Summaries of whatever safetensors a directory holds (index first).
pub fn read_dir(dir: &Path) -> Result<Option<SafetensorsSummary>, IngestError> {
    let index = dir.join("model.safetensors.index.json");
    if index.exists() {
        return read_index(&index).map(Some);
    }
    let single = dir.join("model.safetensors");
    if single.exists() {
        return read_file(&single).map(Some);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(header: &str, data: usize) -> Vec<u8> {
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend(std::iter::repeat_n(0u8, data));
        v
    }

    const TWO: &str = r#"{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[4,8],"data_offsets":[0,64]},"b":{"dtype":"F32","shape":[8],"data_offsets":[64,96]}}"#;

    #[test]
    fn counts_params_and_dtypes() {
        let s = parse_header(TWO.as_bytes(), "x").unwrap();
        assert_eq!(s.params, 40);
        assert_eq!(s.data_bytes, 96);
        assert_eq!(s.params_by_dtype["BF16"], 32);
        let f = file_with(TWO, 96);
        assert_eq!(summary_from_prefix(&f, f.len() as u64, "x").unwrap(), s);
    }

    #[test]
    fn rejects_inconsistent_offsets() {
        let h = r#"{"a":{"dtype":"BF16","shape":[4,8],"data_offsets":[0,60]}}"#;
        assert!(parse_header(h.as_bytes(), "x").is_err());
    }

    #[test]
    fn data_missing_past_the_end_overlapping_or_with_gaps_is_reported() {
        // 96 bytes of data promised, 50 present: truncated
        let f = file_with(TWO, 50);
        let e = summary_from_prefix(&f, f.len() as u64, "x").unwrap_err().to_string();
        assert!(e.contains("past the end of the file") && e.contains("truncated"), "{e}");
        // data section longer than the tensors
        let f = file_with(TWO, 100);
        let e = summary_from_prefix(&f, f.len() as u64, "x").unwrap_err().to_string();
        assert!(e.contains("4 bytes after the last tensor"), "{e}");
        // overlap
        let h = r#"{"a":{"dtype":"BF16","shape":[4,8],"data_offsets":[0,64]},"b":{"dtype":"F32","shape":[8],"data_offsets":[32,64]}}"#;
        let e = parse_header(h.as_bytes(), "x").unwrap_err().to_string();
        assert!(e.contains("overlap"), "{e}");
        // gap before the first tensor
        let h = r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}"#;
        let e = parse_header(h.as_bytes(), "x").unwrap_err().to_string();
        assert!(e.contains("bytes 0..8"), "{e}");
        // zero-sized tensors are fine anywhere on the tiling
        let h = r#"{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        assert_eq!(parse_header_sized(h.as_bytes(), "x", Some(8)).unwrap().tensors, 2);
    }

    #[test]
    fn not_a_safetensors_file_is_named_without_echoing_content() {
        let passwd = b"root:x:0:0:root:/root:/bin/bash\n";
        let e = header_end(passwd, Some(passwd.len() as u64), "x").unwrap_err().to_string();
        assert!(e.contains("not a safetensors file"), "{e}");
        let as_len = u64::from_le_bytes(passwd[..8].try_into().unwrap()).to_string();
        assert!(!e.contains(&as_len) && !e.contains("root"), "{e}");
        let e = header_end(b"abc", Some(3), "x").unwrap_err().to_string();
        assert!(e.contains("not a safetensors file: 3 bytes"), "{e}");
        assert!(!e.contains("18446744073709551"), "{e}");
        // a plausible-looking header that is cut short: sizes, never wrapped
        let mut f = file_with(TWO, 96);
        f.truncate(40);
        let e = header_end(&f, Some(40), "x").unwrap_err().to_string();
        assert!(e.contains("holds only 32 after the length"), "{e}");
        // a claimed file size below 8 with a longer prefix (a server whose
        // Content-Range total lies; found by fuzz/ ingest_safetensors_prefix)
        let e = header_end(b"\x02\0\0\0\0\0\0\0{}", Some(2), "x").unwrap_err().to_string();
        assert!(e.contains("not a safetensors file: 2 bytes") && !e.contains("18446744073709551"), "{e}");
    }

    #[test]
    fn index_shard_paths_stay_inside() {
        let ok = br#"{"weight_map":{"a":"m-1.safetensors","b":"m-2.safetensors","c":"m-1.safetensors"}}"#;
        assert_eq!(index_shards(ok, "i").unwrap(), ["m-1.safetensors", "m-2.safetensors"]);
        for bad in ["../x.safetensors", "/etc/passwd", "a/../../b", "", "a\\\\..\\\\b"] {
            let j = format!(r#"{{"weight_map":{{"a":"{bad}"}}}}"#);
            assert!(index_shards(j.as_bytes(), "i").is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn prefix_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64), size in 0u64..1000) {
            let _ = summary_from_prefix(&bytes, size, "p");
            let _ = header_end(&bytes, Some(size), "p");
        }
    }
}
