//! Header-only reading of safetensors files: the exact parameter count and
//! dtypes of a checkpoint without touching tensor data.
//!
//! Format: 8-byte little-endian header length `n`, then `n` bytes of JSON
//! mapping tensor names to `{dtype, shape, data_offsets}` (plus an optional
//! `__metadata__`). We cap `n` (a header claiming 10 GB of JSON is refused
//! before any allocation) and check the file is long enough to hold it.

use crate::error::IngestError;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// Largest header accepted. Real headers are well under 10 MiB even for
/// 400B-parameter shards; 100 MiB leaves room without risking memory.
pub const MAX_HEADER_BYTES: u64 = 100 << 20;
/// Most shards listed in one index file.
pub const MAX_SHARDS: usize = 10_000;

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

fn err(file: &str, reason: impl Into<String>) -> IngestError {
    IngestError::Safetensors { file: file.into(), reason: reason.into() }
}

/// Bytes per element of a safetensors dtype name.
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

/// Parse header bytes (the JSON) into a summary, checking each entry.
pub fn parse_header(json: &[u8], file: &str) -> Result<SafetensorsSummary, IngestError> {
    let v: Value = serde_json::from_slice(json).map_err(|e| err(file, format!("header is not valid JSON: {e}")))?;
    let map = v.as_object().ok_or_else(|| err(file, "header is not a JSON object"))?;
    let mut s = SafetensorsSummary { files: vec![file.to_string()], ..Default::default() };
    for (name, t) in map {
        if name == "__metadata__" {
            continue;
        }
        let dtype = t
            .get("dtype")
            .and_then(Value::as_str)
            .ok_or_else(|| err(file, format!("tensor '{name}': missing string field dtype")))?;
        let bits = dtype_bits(dtype).ok_or_else(|| err(file, format!("tensor '{name}': unknown dtype '{dtype}'")))?;
        let shape = t
            .get("shape")
            .and_then(Value::as_array)
            .ok_or_else(|| err(file, format!("tensor '{name}': missing array field shape")))?;
        let mut n: u64 = 1;
        for d in shape {
            let d = d
                .as_u64()
                .ok_or_else(|| err(file, format!("tensor '{name}': shape entries must be non-negative integers")))?;
            n = n.checked_mul(d).ok_or_else(|| err(file, format!("tensor '{name}': shape overflows 64 bits")))?;
        }
        let bytes = (n as u128 * bits as u128).div_ceil(8);
        if let Some(off) = t.get("data_offsets").and_then(Value::as_array) {
            let (a, b) = (off.first().and_then(Value::as_u64), off.get(1).and_then(Value::as_u64));
            match (a, b) {
                (Some(a), Some(b)) if b >= a && (b - a) as u128 == bytes => {}
                _ => {
                    return Err(err(
                        file,
                        format!("tensor '{name}': data_offsets do not match shape × dtype ({bytes} bytes)"),
                    ))
                }
            }
        } else {
            return Err(err(file, format!("tensor '{name}': missing data_offsets")));
        }
        s.params = s.params.checked_add(n).ok_or_else(|| err(file, "parameter count overflows"))?;
        s.data_bytes = s.data_bytes.checked_add(bytes as u64).ok_or_else(|| err(file, "byte count overflows"))?;
        s.tensors += 1;
        *s.params_by_dtype.entry(dtype.to_string()).or_insert(0) += n;
    }
    Ok(s)
}

/// Read only the header of one `.safetensors` file.
pub fn read_file(path: &Path) -> Result<SafetensorsSummary, IngestError> {
    let file = path.display().to_string();
    let mut f = std::fs::File::open(path).map_err(|e| IngestError::Io { file: file.clone(), reason: e.to_string() })?;
    let len =
        f.metadata().map(|m| m.len()).map_err(|e| IngestError::Io { file: file.clone(), reason: e.to_string() })?;
    let mut n8 = [0u8; 8];
    f.read_exact(&mut n8)
        .map_err(|_| err(&file, format!("file is {len} bytes: too short for the 8-byte header length")))?;
    let n = u64::from_le_bytes(n8);
    if n > MAX_HEADER_BYTES {
        return Err(err(&file, format!("header claims {n} bytes of JSON; refusing anything over {MAX_HEADER_BYTES} (corrupt or not a safetensors file)")));
    }
    if 8 + n > len {
        return Err(err(
            &file,
            format!("truncated: header claims {n} bytes but the file has only {} after the length", len - 8),
        ));
    }
    let mut buf = vec![0u8; n as usize];
    f.read_exact(&mut buf).map_err(|e| err(&file, format!("cannot read header: {e}")))?;
    parse_header(&buf, &file)
}

/// Read a sharded checkpoint through `model.safetensors.index.json`.
pub fn read_index(index: &Path) -> Result<SafetensorsSummary, IngestError> {
    let file = index.display().to_string();
    let meta = std::fs::metadata(index).map_err(|e| IngestError::Io { file: file.clone(), reason: e.to_string() })?;
    if meta.len() > 256 << 20 {
        return Err(IngestError::Invalid { file, reason: "index file larger than 256 MiB".into() });
    }
    let bytes = std::fs::read(index).map_err(|e| IngestError::Io { file: file.clone(), reason: e.to_string() })?;
    let v: Value =
        serde_json::from_slice(&bytes).map_err(|e| IngestError::Json { file: file.clone(), reason: e.to_string() })?;
    let wm = v.get("weight_map").and_then(Value::as_object).ok_or_else(|| IngestError::BadField {
        file: file.clone(),
        field: "weight_map".into(),
        expected: "an object of tensor name → shard file".into(),
        found: "nothing".into(),
    })?;
    let mut shards: Vec<&str> = wm.values().filter_map(Value::as_str).collect();
    shards.sort_unstable();
    shards.dedup();
    if shards.len() > MAX_SHARDS {
        return Err(IngestError::Invalid {
            file,
            reason: format!("{} shards listed (limit {MAX_SHARDS})", shards.len()),
        });
    }
    let dir = index.parent().unwrap_or(Path::new("."));
    let mut total = SafetensorsSummary::default();
    for shard in shards {
        if shard.contains("..") || Path::new(shard).is_absolute() {
            return Err(IngestError::Invalid {
                file: file.clone(),
                reason: format!("shard path '{shard}' leaves the checkpoint directory"),
            });
        }
        let s = read_file(&dir.join(shard))?;
        total.params = total.params.saturating_add(s.params);
        total.data_bytes = total.data_bytes.saturating_add(s.data_bytes);
        total.tensors += s.tensors;
        for (k, v) in s.params_by_dtype {
            *total.params_by_dtype.entry(k).or_insert(0) += v;
        }
        total.files.extend(s.files);
    }
    Ok(total)
}

/// Summaries of whatever safetensors a directory holds (index first).
pub fn read_dir(dir: &Path) -> Result<Option<SafetensorsSummary>, IngestError> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        return read_index(&index).map(Some);
    }
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return read_file(&single).map(Some);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(header: &str, extra_data: usize) -> Vec<u8> {
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.extend(std::iter::repeat_n(0u8, extra_data));
        v
    }

    #[test]
    fn counts_params_and_dtypes() {
        let h = r#"{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[4,8],"data_offsets":[0,64]},"b":{"dtype":"F32","shape":[8],"data_offsets":[64,96]}}"#;
        let s = parse_header(h.as_bytes(), "x").unwrap();
        assert_eq!(s.params, 40);
        assert_eq!(s.data_bytes, 96);
        assert_eq!(s.params_by_dtype["BF16"], 32);
        let _ = file_with(h, 96);
    }

    #[test]
    fn rejects_inconsistent_offsets() {
        let h = r#"{"a":{"dtype":"BF16","shape":[4,8],"data_offsets":[0,60]}}"#;
        assert!(parse_header(h.as_bytes(), "x").is_err());
    }
}
