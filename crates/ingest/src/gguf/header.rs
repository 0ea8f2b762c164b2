//! The GGUF header parser: magic, version, metadata key/values, tensor
//! infos. Never reads tensor data.
//!
//! Format (ggml `docs/gguf.md`; llama.cpp `ggml/src/gguf.cpp`): all
//! integers little-endian; `"GGUF"`, `u32 version` (2 or 3; version 1 used
//! 32-bit counts and is obsolete), `u64 tensor_count`, `u64 kv_count`; each
//! key/value is a string key (`u64` length + UTF-8 bytes), a `u32` value
//! type and the value (types 0–12: u8, i8, u16, i16, u32, i32, f32, bool,
//! string, array, u64, i64, f64; an array is `u32` element type, `u64`
//! count, elements); each tensor info is a name, `u32 n_dims` (≤ 4), `u64`
//! dimensions, `u32 ggml_type` and a `u64` offset into the data section,
//! which starts at the end of the infos padded to `general.alignment`
//! (default 32).
//!
//! The parser is total and bounded: counts, string and array lengths are
//! capped ([`limits`]) and checked against the bytes the file can still
//! hold before anything is allocated; any claim that runs past the file
//! is refused naming the field. It works on a *prefix* of the file: when
//! the prefix ends before the header does, it answers
//! [`Parsed::NeedMore`] with how many bytes it needs, so a caller reading
//! over HTTP ranges can fetch more and call again.

use super::value::{MetaValue, ValueType};
use std::collections::BTreeMap;
use vramfit_llamacpp::GgmlType;

/// Caps on what a header may claim. Real files are far below each.
pub mod limits {
    /// Largest header (metadata + tensor infos) parsed; a 262k-token
    /// vocabulary with scores and merges is ~20 MB.
    pub const MAX_HEADER_BYTES: u64 = 128 << 20;
    /// Tensors (a 1T-parameter MoE GGUF has a few thousand).
    pub const MAX_TENSORS: u64 = 1 << 20;
    /// Metadata key/values.
    pub const MAX_KV: u64 = 1 << 16;
    /// Key length (the GGUF spec caps keys at 65535 bytes).
    pub const MAX_KEY_LEN: u64 = 65_535;
    /// One string value (chat templates run to ~100 KB).
    pub const MAX_STRING_LEN: u64 = 16 << 20;
    /// Elements of one array (vocabularies and merges run to ~300k).
    pub const MAX_ARRAY_LEN: u64 = 1 << 24;
    /// Arrays up to this many elements keep their values; longer ones
    /// (tokens, scores, merges) keep only their length.
    pub const MAX_KEPT_ARRAY: u64 = 4096;
    /// Tensor dimensions (`GGML_MAX_DIMS`).
    pub const MAX_DIMS: u32 = 4;
    /// Largest `general.alignment` accepted.
    pub const MAX_ALIGNMENT: u64 = 1 << 20;
}

/// Why a header is refused. Each variant names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufError {
    #[error("not a GGUF file: the first 4 bytes are {found:?}, expected \"GGUF\"")]
    NotGguf { found: String },
    #[error("GGUF version {version} is not supported (expected 2 or 3{hint})")]
    Version { version: u32, hint: &'static str },
    #[error(
        "field {field}: needs {needed} bytes at offset {at} but the file ends at {file_len} (truncated or corrupt)"
    )]
    PastEnd { field: String, at: u64, needed: u64, file_len: u64 },
    #[error("field {field}: {value} exceeds the limit of {limit} ({what})")]
    TooLarge { field: String, value: u64, limit: u64, what: &'static str },
    #[error("field {field}: unknown metadata value type {type_id} (expected 0–12)")]
    ValueType { field: String, type_id: u32 },
    #[error("field {field}: nested arrays are not supported (llama.cpp refuses them too)")]
    NestedArray { field: String },
    #[error("field {field}: bool byte {byte} is neither 0 nor 1")]
    Bool { field: String, byte: u8 },
    #[error("field {field}: not valid UTF-8")]
    Utf8 { field: String },
    #[error("duplicate key '{key}'")]
    DuplicateKey { key: String },
    #[error("tensor '{tensor}': ggml type {type_id} is unknown: {reason}")]
    TensorType { tensor: String, type_id: u32, reason: &'static str },
    #[error("tensor '{tensor}': {reason}")]
    Tensor { tensor: String, reason: String },
    #[error("duplicate tensor name '{tensor}'")]
    DuplicateTensor { tensor: String },
    #[error("general.alignment: {value} is not a power of two between 1 and {max}")]
    Alignment { value: u64, max: u64 },
}

/// One tensor info.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgufTensor {
    pub name: String,
    pub ty: GgmlType,
    pub ne: Vec<u64>,
    /// offset within the data section
    pub offset: u64,
    /// `ggml_nbytes`
    pub bytes: u64,
}

/// The parsed header.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufHeader {
    pub version: u32,
    pub metadata: BTreeMap<String, MetaValue>,
    pub tensors: Vec<GgufTensor>,
    pub alignment: u64,
    /// file offset of the data section
    pub data_offset: u64,
    /// bytes of the header (= where the infos end, before padding)
    pub header_bytes: u64,
    pub file_len: u64,
}

impl GgufHeader {
    pub fn get(&self, key: &str) -> Option<&MetaValue> {
        self.metadata.get(key)
    }

    /// Total tensor data bytes.
    pub fn tensor_bytes(&self) -> u64 {
        self.tensors.iter().fold(0u64, |a, t| a.saturating_add(t.bytes))
    }
}

/// Result of parsing a prefix.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    Complete(Box<GgufHeader>),
    /// the prefix ends inside the header: at least this many bytes of the
    /// file (from its start) are needed to go on
    NeedMore {
        bytes: u64,
    },
}

/// Internal: a parse step either fails or lacks input.
enum Stop {
    Err(GgufError),
    Need(u64),
}

impl From<GgufError> for Stop {
    fn from(e: GgufError) -> Self {
        Stop::Err(e)
    }
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: u64,
    file_len: u64,
}

impl<'a> Cursor<'a> {
    /// Take `n` bytes for `field`.
    fn take(&mut self, n: u64, field: &dyn Fn() -> String) -> Result<&'a [u8], Stop> {
        let end = self.pos.checked_add(n).ok_or_else(|| {
            Stop::Err(GgufError::PastEnd { field: field(), at: self.pos, needed: n, file_len: self.file_len })
        })?;
        if end > self.file_len {
            return Err(Stop::Err(GgufError::PastEnd {
                field: field(),
                at: self.pos,
                needed: n,
                file_len: self.file_len,
            }));
        }
        if end > limits::MAX_HEADER_BYTES {
            return Err(Stop::Err(GgufError::TooLarge {
                field: field(),
                value: end,
                limit: limits::MAX_HEADER_BYTES,
                what: "bytes of header",
            }));
        }
        if end > self.buf.len() as u64 {
            return Err(Stop::Need(end));
        }
        let s = &self.buf[self.pos as usize..end as usize];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self, f: &dyn Fn() -> String) -> Result<u8, Stop> {
        Ok(self.take(1, f)?[0])
    }
    fn u16(&mut self, f: &dyn Fn() -> String) -> Result<u16, Stop> {
        let b = self.take(2, f)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, f: &dyn Fn() -> String) -> Result<u32, Stop> {
        let b = self.take(4, f)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, f: &dyn Fn() -> String) -> Result<u64, Stop> {
        let b = self.take(8, f)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Bytes left in the file from here.
    fn remaining(&self) -> u64 {
        self.file_len.saturating_sub(self.pos)
    }

    /// A count that must fit `limit` and whose elements (each at least
    /// `min_size` bytes) must fit in the rest of the file.
    fn count(&mut self, limit: u64, min_size: u64, what: &'static str, f: &dyn Fn() -> String) -> Result<u64, Stop> {
        let n = self.u64(f)?;
        if n > limit {
            return Err(Stop::Err(GgufError::TooLarge { field: f(), value: n, limit, what }));
        }
        let need = n.saturating_mul(min_size);
        if need > self.remaining() {
            return Err(Stop::Err(GgufError::PastEnd {
                field: f(),
                at: self.pos,
                needed: need,
                file_len: self.file_len,
            }));
        }
        Ok(n)
    }

    /// A GGUF string (u64 length + bytes), raw.
    fn string_bytes(&mut self, limit: u64, f: &dyn Fn() -> String) -> Result<&'a [u8], Stop> {
        let n = self.u64(f)?;
        if n > limit {
            return Err(Stop::Err(GgufError::TooLarge { field: f(), value: n, limit, what: "string bytes" }));
        }
        self.take(n, f)
    }

    fn string_strict(&mut self, limit: u64, f: &dyn Fn() -> String) -> Result<String, Stop> {
        let b = self.string_bytes(limit, f)?;
        std::str::from_utf8(b).map(str::to_string).map_err(|_| Stop::Err(GgufError::Utf8 { field: f() }))
    }
}

/// Parse the header from `prefix`, the first bytes of a file of `file_len`
/// bytes. Pass the whole file (or more of it) when the answer is
/// [`Parsed::NeedMore`].
pub fn parse(prefix: &[u8], file_len: u64) -> Result<Parsed, GgufError> {
    match parse_inner(prefix, file_len) {
        Ok(h) => Ok(Parsed::Complete(Box::new(h))),
        Err(Stop::Need(n)) => Ok(Parsed::NeedMore { bytes: n }),
        Err(Stop::Err(e)) => Err(e),
    }
}

fn parse_inner(buf: &[u8], file_len: u64) -> Result<GgufHeader, Stop> {
    let file_len = file_len.max(buf.len() as u64);
    let mut c = Cursor { buf, pos: 0, file_len };
    let magic = c.take(4, &|| "magic".into())?;
    if magic != b"GGUF" {
        return Err(GgufError::NotGguf { found: String::from_utf8_lossy(magic).into_owned() }.into());
    }
    let version = c.u32(&|| "version".into())?;
    check_version(version)?;
    // each tensor info takes at least 8 (name len) + 4 + 4 + 8 bytes; each kv 8 + 4 + 1
    let n_tensors = c.count(limits::MAX_TENSORS, 24, "tensors", &|| "tensor_count".into())?;
    let n_kv = c.count(limits::MAX_KV, 13, "key/value pairs", &|| "metadata_kv_count".into())?;
    let mut metadata: BTreeMap<String, MetaValue> = BTreeMap::new();
    for i in 0..n_kv {
        let key = c.string_strict(limits::MAX_KEY_LEN, &|| format!("metadata key #{i}"))?;
        let kf = key.clone();
        let f = move || format!("metadata '{kf}'");
        let ty_id = c.u32(&|| format!("{} value type", f()))?;
        let ty = ValueType::from_id(ty_id).ok_or_else(|| GgufError::ValueType { field: f(), type_id: ty_id })?;
        let value = read_value(&mut c, ty, &f)?;
        if metadata.insert(key.clone(), value).is_some() {
            return Err(GgufError::DuplicateKey { key }.into());
        }
    }
    let alignment = match metadata.get("general.alignment") {
        None => 32,
        Some(v) => {
            let a = v.as_u64().unwrap_or(0);
            if a == 0 || !a.is_power_of_two() || a > limits::MAX_ALIGNMENT {
                return Err(GgufError::Alignment { value: a, max: limits::MAX_ALIGNMENT }.into());
            }
            a
        }
    };
    let mut tensors = Vec::with_capacity(n_tensors.min(4096) as usize);
    let mut names = std::collections::HashSet::new();
    for i in 0..n_tensors {
        let t = read_tensor_info(&mut c, i, alignment)?;
        if !names.insert(t.name.clone()) {
            return Err(GgufError::DuplicateTensor { tensor: t.name }.into());
        }
        tensors.push(t);
    }
    let header_bytes = c.pos;
    let data_offset = header_bytes.div_ceil(alignment).saturating_mul(alignment);
    check_tensor_data(&tensors, data_offset, file_len)?;
    Ok(GgufHeader { version, metadata, tensors, alignment, data_offset, header_bytes, file_len })
}

/// Versions 2 and 3 are read; version 1 and big-endian files are refused with a hint.
fn check_version(version: u32) -> Result<(), Stop> {
    match version {
        2 | 3 => {}
        1 => {
            return Err(GgufError::Version {
                version,
                hint: "; version 1 (2023) used 32-bit counts: re-convert the model",
            }
            .into())
        }
        v if v.swap_bytes() == 2 || v.swap_bytes() == 3 => {
            return Err(GgufError::Version {
                version,
                hint: "; this looks like a big-endian GGUF, which vramfit does not read",
            }
            .into())
        }
        _ => return Err(GgufError::Version { version, hint: "" }.into()),
    }
    Ok(())
}

/// Tensor info `i`: name, dimensions, type and data offset, each checked;
/// its byte count from the type.
fn read_tensor_info(c: &mut Cursor, i: u64, alignment: u64) -> Result<GgufTensor, Stop> {
    let name = c.string_strict(limits::MAX_KEY_LEN, &|| format!("tensor #{i} name"))?;
    let nf = name.clone();
    let f = move |what: &str| format!("tensor '{nf}' {what}");
    let n_dims = c.u32(&|| f("n_dims"))?;
    if n_dims == 0 || n_dims > limits::MAX_DIMS {
        return Err(
            GgufError::Tensor { tensor: name, reason: format!("n_dims {n_dims} is not between 1 and 4") }.into()
        );
    }
    let mut ne = Vec::with_capacity(n_dims as usize);
    for d in 0..n_dims {
        let v = c.u64(&|| f(&format!("ne[{d}]")))?;
        if v > i64::MAX as u64 {
            return Err(GgufError::Tensor {
                tensor: name,
                reason: format!("dimension ne[{d}] = {v} is negative as int64"),
            }
            .into());
        }
        ne.push(v);
    }
    let type_id = c.u32(&|| f("type"))?;
    let ty = GgmlType::from_id(type_id).ok_or_else(|| GgufError::TensorType {
        tensor: name.clone(),
        type_id,
        reason: GgmlType::unknown_id_reason(type_id),
    })?;
    let offset = c.u64(&|| f("offset"))?;
    if ne[0] % ty.block_size() != 0 {
        return Err(GgufError::Tensor {
            tensor: name,
            reason: format!("ne[0] = {} is not a multiple of the {} block size {}", ne[0], ty.name(), ty.block_size()),
        }
        .into());
    }
    let bytes = ty.nbytes(&ne).ok_or_else(|| GgufError::Tensor {
        tensor: name.clone(),
        reason: format!("{:?} × {} overflows 64-bit byte counts", ne, ty.name()),
    })?;
    if offset % alignment != 0 {
        return Err(GgufError::Tensor {
            tensor: name,
            reason: format!("data offset {offset} is not a multiple of general.alignment {alignment}"),
        }
        .into());
    }
    Ok(GgufTensor { name, ty, ne, offset, bytes })
}

/// Tensor data must lie inside the file (we never read it), and no two
/// tensors' data may overlap (a corrupt file).
fn check_tensor_data(tensors: &[GgufTensor], data_offset: u64, file_len: u64) -> Result<(), Stop> {
    let data_len = file_len.saturating_sub(data_offset);
    for t in tensors {
        let end = t.offset.checked_add(t.bytes);
        match end {
            Some(e) if e <= data_len => {}
            _ => {
                return Err(GgufError::PastEnd {
                    field: format!("tensor '{}' data", t.name),
                    at: data_offset.saturating_add(t.offset),
                    needed: t.bytes,
                    file_len,
                }
                .into())
            }
        }
    }
    // overlapping tensor data means a corrupt file
    let mut spans: Vec<(u64, u64, &str)> =
        tensors.iter().map(|t| (t.offset, t.offset + t.bytes, t.name.as_str())).collect();
    spans.sort_unstable();
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(GgufError::Tensor {
                tensor: w[1].2.to_string(),
                reason: format!("data [{}, {}) overlaps tensor '{}'", w[1].0, w[1].1, w[0].2),
            }
            .into());
        }
    }
    Ok(())
}

fn read_scalar(c: &mut Cursor, ty: ValueType, f: &dyn Fn() -> String) -> Result<MetaValue, Stop> {
    Ok(match ty {
        ValueType::U8 => MetaValue::U64(c.u8(f)? as u64),
        ValueType::I8 => MetaValue::I64(c.u8(f)? as i8 as i64),
        ValueType::U16 => MetaValue::U64(c.u16(f)? as u64),
        ValueType::I16 => MetaValue::I64(c.u16(f)? as i16 as i64),
        ValueType::U32 => MetaValue::U64(c.u32(f)? as u64),
        ValueType::I32 => MetaValue::I64(c.u32(f)? as i32 as i64),
        ValueType::U64 => MetaValue::U64(c.u64(f)?),
        ValueType::I64 => MetaValue::I64(c.u64(f)? as i64),
        ValueType::F32 => MetaValue::F64(f32::from_bits(c.u32(f)?) as f64),
        ValueType::F64 => MetaValue::F64(f64::from_bits(c.u64(f)?)),
        ValueType::Bool => {
            let b = c.u8(f)?;
            if b > 1 {
                return Err(GgufError::Bool { field: f(), byte: b }.into());
            }
            MetaValue::Bool(b == 1)
        }
        ValueType::String => {
            MetaValue::String(String::from_utf8_lossy(c.string_bytes(limits::MAX_STRING_LEN, f)?).into_owned())
        }
        ValueType::Array => unreachable!("arrays are read by read_value"),
    })
}

fn read_value(c: &mut Cursor, ty: ValueType, f: &dyn Fn() -> String) -> Result<MetaValue, Stop> {
    if ty != ValueType::Array {
        return read_scalar(c, ty, f);
    }
    let et_id = c.u32(&|| format!("{} array element type", f()))?;
    let et = ValueType::from_id(et_id).ok_or_else(|| GgufError::ValueType { field: f(), type_id: et_id })?;
    if et == ValueType::Array {
        return Err(GgufError::NestedArray { field: f() }.into());
    }
    let len = c.count(limits::MAX_ARRAY_LEN, et.min_size(), "array elements", &|| format!("{} array length", f()))?;
    let keep = len <= limits::MAX_KEPT_ARRAY;
    let mut values = Vec::with_capacity(if keep { len as usize } else { 0 });
    for i in 0..len {
        let v = read_scalar(c, et, &|| format!("{}[{i}]", f()))?;
        if keep {
            values.push(v);
        }
    }
    Ok(MetaValue::Array { elem: et, len, values: if keep { Some(values) } else { None } })
}
