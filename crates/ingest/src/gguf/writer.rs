//! A minimal GGUF v3 writer: metadata of every value type and tensor infos
//! with zero-filled data. For tests, fuzz seeds and fixtures — vramfit
//! never writes a model.

use super::value::ValueType;
use vramfit_llamacpp::GgmlType;

/// A metadata value to write.
#[derive(Debug, Clone, PartialEq)]
pub enum WValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    Str(String),
    U64(u64),
    I64(i64),
    F64(f64),
    /// an array of scalars of one type
    Array(ValueType, Vec<WValue>),
}

impl WValue {
    fn ty(&self) -> ValueType {
        match self {
            WValue::U8(_) => ValueType::U8,
            WValue::I8(_) => ValueType::I8,
            WValue::U16(_) => ValueType::U16,
            WValue::I16(_) => ValueType::I16,
            WValue::U32(_) => ValueType::U32,
            WValue::I32(_) => ValueType::I32,
            WValue::F32(_) => ValueType::F32,
            WValue::Bool(_) => ValueType::Bool,
            WValue::Str(_) => ValueType::String,
            WValue::U64(_) => ValueType::U64,
            WValue::I64(_) => ValueType::I64,
            WValue::F64(_) => ValueType::F64,
            WValue::Array(..) => ValueType::Array,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            WValue::U8(v) => out.push(*v),
            WValue::I8(v) => out.push(*v as u8),
            WValue::U16(v) => out.extend(v.to_le_bytes()),
            WValue::I16(v) => out.extend(v.to_le_bytes()),
            WValue::U32(v) => out.extend(v.to_le_bytes()),
            WValue::I32(v) => out.extend(v.to_le_bytes()),
            WValue::F32(v) => out.extend(v.to_le_bytes()),
            WValue::Bool(v) => out.push(u8::from(*v)),
            WValue::Str(s) => write_str(out, s),
            WValue::U64(v) => out.extend(v.to_le_bytes()),
            WValue::I64(v) => out.extend(v.to_le_bytes()),
            WValue::F64(v) => out.extend(v.to_le_bytes()),
            WValue::Array(t, vals) => {
                out.extend(t.id().to_le_bytes());
                out.extend((vals.len() as u64).to_le_bytes());
                for v in vals {
                    v.write(out);
                }
            }
        }
    }
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

/// A GGUF file under construction.
#[derive(Debug, Clone, Default)]
pub struct GgufWriter {
    kv: Vec<(String, WValue)>,
    tensors: Vec<(String, GgmlType, Vec<u64>)>,
    /// leave tensor data out (the header then claims bytes past the end)
    pub truncate_data: bool,
}

impl GgufWriter {
    pub fn new() -> Self {
        GgufWriter::default()
    }

    pub fn kv(mut self, key: &str, v: WValue) -> Self {
        self.kv.push((key.to_string(), v));
        self
    }

    /// Set `key`: replace its value if present, else add it.
    pub fn set(mut self, key: &str, v: WValue) -> Self {
        match self.kv.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = v,
            None => self.kv.push((key.to_string(), v)),
        }
        self
    }

    pub fn tensor(mut self, name: &str, ty: GgmlType, ne: &[u64]) -> Self {
        self.tensors.push((name.to_string(), ty, ne.to_vec()));
        self
    }

    /// Remove `key`.
    pub fn unset(mut self, key: &str) -> Self {
        self.kv.retain(|(k, _)| k != key);
        self
    }

    /// Keep only the tensors whose name passes `keep`.
    pub fn retain_tensors(mut self, keep: impl Fn(&str) -> bool) -> Self {
        self.tensors.retain(|(name, _, _)| keep(name));
        self
    }

    /// Bytes of the file: header, padding to 32, zero-filled tensor data.
    pub fn to_bytes(&self) -> Vec<u8> {
        let (mut out, len) = self.header_and_len();
        if !self.truncate_data {
            out.resize(len as usize, 0);
        }
        out
    }

    /// Write the file with its tensor data as a hole (`set_len`): a
    /// realistic 5 GB model costs a few kilobytes of disk on most file systems.
    pub fn write_sparse(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write;
        let (head, len) = self.header_and_len();
        let mut f = std::fs::File::create(path)?;
        f.write_all(&head)?;
        if !self.truncate_data {
            f.set_len(len)?;
        }
        Ok(())
    }

    /// The header bytes (up to the data section) and the full file length:
    /// what a range reader would see of the file.
    pub fn header_and_len(&self) -> (Vec<u8>, u64) {
        const ALIGN: u64 = 32;
        let mut out = Vec::new();
        out.extend(b"GGUF");
        out.extend(3u32.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.kv.len() as u64).to_le_bytes());
        for (k, v) in &self.kv {
            write_str(&mut out, k);
            out.extend(v.ty().id().to_le_bytes());
            v.write(&mut out);
        }
        let mut offset = 0u64;
        let mut sizes = Vec::new();
        for (name, ty, ne) in &self.tensors {
            write_str(&mut out, name);
            out.extend((ne.len() as u32).to_le_bytes());
            for d in ne {
                out.extend(d.to_le_bytes());
            }
            out.extend(ty.id().to_le_bytes());
            out.extend(offset.to_le_bytes());
            let bytes = ty.nbytes(ne).unwrap_or(0);
            sizes.push(bytes);
            offset = (offset + bytes).next_multiple_of(ALIGN);
        }
        let data_start = (out.len() as u64).next_multiple_of(ALIGN);
        (out, data_start + offset)
    }
}

/// Small but well-formed model files in the layouts llama.cpp expects.
pub mod fixtures {
    use super::{GgufWriter, WValue};
    use crate::gguf::value::ValueType;
    use vramfit_llamacpp::GgmlType;

    /// Shape of a fixture model.
    #[derive(Debug, Clone)]
    pub struct Shape {
        pub arch: &'static str,
        pub n_layer: u64,
        pub n_embd: u64,
        pub n_head: u64,
        pub n_head_kv: u64,
        pub head_dim: u64,
        pub n_ff: u64,
        pub n_vocab: u64,
        pub ctx: u64,
        /// type of the big matrices (attention, FFN)
        pub matrix: GgmlType,
        /// type of token_embd and output
        pub embd: GgmlType,
        /// (count, used, expert_ff) for an MoE
        pub experts: Option<(u64, u64, u64)>,
        /// sliding window (tokens) with llama.cpp's per-arch pattern
        pub sliding_window: Option<u64>,
        /// per-layer KV head counts (overrides n_head_kv)
        pub kv_heads_per_layer: Option<Vec<u64>>,
        /// leave out output.weight (tied to token_embd)
        pub tied: bool,
    }

    impl Shape {
        /// A Llama-shaped model: RMSNorm, GQA, SwiGLU.
        pub fn llama(n_layer: u64, n_embd: u64, n_head: u64, n_head_kv: u64, n_ff: u64, n_vocab: u64) -> Shape {
            Shape {
                arch: "llama",
                n_layer,
                n_embd,
                n_head,
                n_head_kv,
                head_dim: n_embd / n_head,
                n_ff,
                n_vocab,
                ctx: 8192,
                matrix: GgmlType::Q4K,
                embd: GgmlType::Q6K,
                experts: None,
                sliding_window: None,
                kv_heads_per_layer: None,
                tied: false,
            }
        }
    }

    /// The GGUF bytes of a model of this shape (zero weights).
    pub fn model(s: &Shape) -> Vec<u8> {
        writer(s).to_bytes()
    }

    /// Write a model of this shape with sparse (hole) tensor data.
    pub fn write_model(s: &Shape, path: &std::path::Path) -> std::io::Result<()> {
        writer(s).write_sparse(path)
    }

    /// The writer of a model of this shape.
    pub fn writer(s: &Shape) -> GgufWriter {
        let a = s.arch;
        let mut w = GgufWriter::new()
            .kv("general.architecture", WValue::Str(a.into()))
            .kv("general.name", WValue::Str(format!("fixture-{a}")))
            .kv(&format!("{a}.block_count"), WValue::U32(s.n_layer as u32))
            .kv(&format!("{a}.context_length"), WValue::U32(s.ctx as u32))
            .kv(&format!("{a}.embedding_length"), WValue::U32(s.n_embd as u32))
            .kv(&format!("{a}.feed_forward_length"), WValue::U32(s.n_ff as u32))
            .kv(&format!("{a}.attention.head_count"), WValue::U32(s.n_head as u32))
            .kv(&format!("{a}.attention.key_length"), WValue::U32(s.head_dim as u32))
            .kv(&format!("{a}.attention.value_length"), WValue::U32(s.head_dim as u32))
            .kv(&format!("{a}.attention.layer_norm_rms_epsilon"), WValue::F32(1e-5))
            .kv(&format!("{a}.rope.freq_base"), WValue::F32(10000.0))
            .kv("general.file_type", WValue::U32(15))
            .kv(
                "tokenizer.ggml.tokens",
                WValue::Array(ValueType::String, (0..s.n_vocab).map(|i| WValue::Str(format!("t{i}"))).collect()),
            )
            .kv("tokenizer.ggml.bos_token_id", WValue::U32(1));
        w = match &s.kv_heads_per_layer {
            Some(v) => w.kv(
                &format!("{a}.attention.head_count_kv"),
                WValue::Array(ValueType::I32, v.iter().map(|&x| WValue::I32(x as i32)).collect()),
            ),
            None => w.kv(&format!("{a}.attention.head_count_kv"), WValue::U32(s.n_head_kv as u32)),
        };
        if let Some(win) = s.sliding_window {
            w = w.kv(&format!("{a}.attention.sliding_window"), WValue::U32(win as u32));
        }
        if let Some((n, used, eff)) = s.experts {
            w = w
                .kv(&format!("{a}.expert_count"), WValue::U32(n as u32))
                .kv(&format!("{a}.expert_used_count"), WValue::U32(used as u32))
                .kv(&format!("{a}.expert_feed_forward_length"), WValue::U32(eff as u32));
        }
        let e = s.n_embd;
        w = w.tensor("token_embd.weight", s.embd, &[e, s.n_vocab]);
        for il in 0..s.n_layer {
            let kvh = s.kv_heads_per_layer.as_ref().map(|v| v[il as usize]).unwrap_or(s.n_head_kv);
            let p = |t: &str| format!("blk.{il}.{t}");
            w = w
                .tensor(&p("attn_norm.weight"), GgmlType::F32, &[e])
                .tensor(&p("attn_q.weight"), s.matrix, &[e, s.n_head * s.head_dim])
                .tensor(&p("attn_k.weight"), s.matrix, &[e, kvh * s.head_dim])
                .tensor(&p("attn_v.weight"), s.matrix, &[e, kvh * s.head_dim])
                .tensor(&p("attn_output.weight"), s.matrix, &[s.n_head * s.head_dim, e])
                .tensor(&p("ffn_norm.weight"), GgmlType::F32, &[e]);
            match s.experts {
                Some((n, _, eff)) => {
                    w = w
                        .tensor(&p("ffn_gate_inp.weight"), GgmlType::F32, &[e, n])
                        .tensor(&p("ffn_gate_exps.weight"), s.matrix, &[e, eff, n])
                        .tensor(&p("ffn_up_exps.weight"), s.matrix, &[e, eff, n])
                        .tensor(&p("ffn_down_exps.weight"), s.matrix, &[eff, e, n]);
                }
                None => {
                    w = w
                        .tensor(&p("ffn_gate.weight"), s.matrix, &[e, s.n_ff])
                        .tensor(&p("ffn_up.weight"), s.matrix, &[e, s.n_ff])
                        .tensor(&p("ffn_down.weight"), s.matrix, &[s.n_ff, e]);
                }
            }
        }
        w = w.tensor("output_norm.weight", GgmlType::F32, &[e]);
        if !s.tied {
            w = w.tensor("output.weight", s.embd, &[e, s.n_vocab]);
        }
        w
    }
}
