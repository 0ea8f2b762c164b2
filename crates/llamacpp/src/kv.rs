//! The KV cache (and recurrent state) llama.cpp allocates for a context.
//!
//! Context size (`llama_context` constructor, `src/llama-context.cpp`,
//! since ggml-org/llama.cpp PR #17046): `n_ctx` is padded up to a multiple
//! of 256; with `--parallel N` and a split (non-unified) cache each of the
//! `N` streams gets `n_ctx_seq = pad(n_ctx / N, 256)` cells and `n_ctx`
//! becomes `N · n_ctx_seq`; a unified cache (`--kv-unified`) is one stream
//! of `n_ctx` cells shared by all sequences. Either way the non-SWA cache
//! holds `n_ctx` cells in total.
//!
//! Per layer with a KV cache (`llama_kv_cache`, `src/llama-kv-cache.cpp`):
//! K = `ggml_row_size(type_k, n_embd_k_gqa) × cells × streams`, V likewise
//! with `type_v` and `n_embd_v_gqa` (the widest layer's when V is stored
//! transposed, i.e. without flash attention). Quantized cache types store
//! blocks: q8_0 is 34 bytes per 32 values, q4_0 18 per 32.
//!
//! Sliding-window layers (`llama_kv_cache_iswa`) keep their own cache of
//! `pad(min(cells, n_swa · (unified ? N : 1) + n_ubatch), 256)` cells per
//! stream — the window plus one micro-batch, not the whole context — unless
//! `--swa-full` asks for full size.
//!
//! Recurrent layers (`llama_memory_recurrent`) hold one state per sequence
//! (`max(1, N)` cells) in f32: `n_embd_r` conv/shift values and `n_embd_s`
//! SSM/WKV values per cell.
//!
//! Each layer's cache lives on its layer's device unless `--no-kv-offload`
//! keeps it on the host.

use crate::ggml::GgmlType;
use crate::graph::Device;
use crate::model::LlamaModel;
use crate::placement::Placement;
use serde::{Deserialize, Serialize};
use vramfit_core::units::{add, product};
use vramfit_core::CoreError;
use vramfit_core::Explanation;

/// `GGML_PAD(n_ctx, 256)`: defined in core, whose `--sliding-window-cache
/// llamacpp` policy shares it.
pub use vramfit_core::kv::LLAMACPP_CTX_PAD as CTX_PAD;
/// The SWA cache's padding, and its cells per stream (defined in core, see [`CTX_PAD`]).
pub use vramfit_core::kv::{llamacpp_swa_cells as swa_cells, LLAMACPP_SWA_PAD as SWA_PAD};
/// Before the KV-cache rework, the context was padded to
/// `llama_kv_cache_get_padding(cparams)`: 256 with flash attention, else 32
/// (llama.cpp up to mid-2025, e.g. build 4897's `llama_context`).
pub const LEGACY_CTX_PAD_NO_FA: u64 = 32;

/// The context padding of a graph era.
pub fn ctx_pad(era: crate::compute::GraphEra, flash_attn: bool) -> u64 {
    match era {
        crate::compute::GraphEra::Current => CTX_PAD,
        crate::compute::GraphEra::Legacy if flash_attn => CTX_PAD,
        crate::compute::GraphEra::Legacy => LEGACY_CTX_PAD_NO_FA,
    }
}

/// How the context is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextSize {
    /// `n_ctx` after padding (all sequences together)
    pub n_ctx: u64,
    /// cells per stream of the non-SWA cache
    pub n_ctx_seq: u64,
    /// streams: 1 when unified, else `--parallel`
    pub streams: u64,
    /// cells per stream of the SWA cache (0 without sliding layers)
    pub swa_cells: u64,
}

/// Pad `n` up to a multiple of `to`.
fn pad(what: &str, n: u64, to: u64) -> Result<u64, CoreError> {
    n.checked_next_multiple_of(to).ok_or_else(|| CoreError::Overflow { what: what.into() })
}

/// Size the context as llama.cpp does.
pub fn context_size(
    model: &LlamaModel,
    requested: u64,
    n_parallel: u64,
    unified: bool,
    n_ubatch: u64,
    swa_full: bool,
    ctx_pad: u64,
) -> Result<ContextSize, CoreError> {
    let req = if requested == 0 { model.n_ctx_train } else { requested };
    vramfit_core::units::check_size("ctx-size", req, crate::model::limits::MAX_CTX)?;
    let mut n_ctx = pad("n_ctx", req, ctx_pad.max(1))?;
    let (n_ctx_seq, streams) = if unified {
        (n_ctx, 1)
    } else {
        // n_parallel ≥ 1 after LlamaCppOptions::validate; a direct caller gets the same error
        let per_stream = n_ctx
            .checked_div(n_parallel)
            .ok_or(crate::options::OptionsError::Zero { field: crate::options::OptionField::Parallel })?;
        let per = pad("n_ctx_seq", per_stream, ctx_pad.max(1))?;
        if per == 0 {
            return Err(CoreError::invalid(
                "ctx-size",
                format!("{req} tokens over {n_parallel} sequences leaves none per sequence"),
            ));
        }
        n_ctx = product("n_ctx", &[per, n_parallel])?;
        (per, n_parallel)
    };
    let swa_cells = if model.layers.iter().any(|l| l.sliding) {
        swa_cells(n_ctx_seq, model.n_swa, n_parallel, unified, n_ubatch, swa_full)?
    } else {
        0
    };
    Ok(ContextSize { n_ctx, n_ctx_seq, streams, swa_cells })
}

/// What a cache buffer holds, by llama.cpp's log name (`CUDA0 KV buffer`,
/// `CPU RS buffer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum CacheKind {
    /// keys and values of attention layers (`llama_kv_cache`)
    #[serde(rename = "KV")]
    Kv,
    /// recurrent state of Mamba/RWKV-style layers (`llama_memory_recurrent`)
    #[serde(rename = "RS")]
    Rs,
}

impl CacheKind {
    /// llama.cpp's name in its buffer log lines.
    pub fn log_name(self) -> &'static str {
        match self {
            CacheKind::Kv => "KV",
            CacheKind::Rs => "RS",
        }
    }
}

impl std::fmt::Display for CacheKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.log_name())
    }
}

/// One device's KV (or recurrent-state) buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheBuffer {
    pub device: Device,
    pub kind: CacheKind,
    pub bytes: u64,
    pub layers: u64,
    pub explain: Explanation,
}

/// The cache of a whole context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvCache {
    pub size: ContextSize,
    pub k_bytes: u64,
    pub v_bytes: u64,
    /// bytes of the sliding-window layers (included in k/v above)
    pub swa_bytes: u64,
    /// recurrent state bytes
    pub state_bytes: u64,
    pub buffers: Vec<CacheBuffer>,
    /// KV bytes one more token of context costs (non-SWA layers; all streams)
    pub bytes_per_token: u64,
}

/// Options of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheOptions {
    pub type_k: GgmlType,
    pub type_v: GgmlType,
    pub flash_attn: bool,
    pub offload_kqv: bool,
    pub n_parallel: u64,
    /// no V cache: an MLA file (`LlamaModel::mla`) under a build from
    /// [`crate::build::V_LESS_MLA`] (`has_v = !is_mla`,
    /// `llama_kv_cache::llama_kv_cache`, src/llama-kv-cache.cpp, PR #19067)
    pub v_less: bool,
}

/// KV cache and recurrent state per device.
pub fn kv_cache(
    model: &LlamaModel,
    placement: &Placement,
    size: ContextSize,
    opt: CacheOptions,
) -> Result<KvCache, CoreError> {
    let row = |ty: GgmlType, width: u64, what: &str| -> Result<u64, CoreError> {
        ty.row_size(width).ok_or_else(|| {
            CoreError::invalid(
                what,
                format!(
                    "{width} values per token is not a whole number of {} blocks ({} values)",
                    ty.name(),
                    ty.block_size()
                ),
            )
        })
    };
    let v_max = model.layers.iter().map(|l| l.v_width()).max().unwrap_or(0);
    let mut k_total = 0u64;
    let mut v_total = 0u64;
    let mut swa_total = 0u64;
    let mut state_total = 0u64;
    let mut per_token = 0u64;
    let mut per_dev: Vec<(Device, CacheKind, u64, u64)> = Vec::new(); // device, kind, bytes, layers
    let cells_rs = opt.n_parallel.max(1);
    for (il, l) in model.layers.iter().enumerate() {
        let dev = if opt.offload_kqv { placement.layers[il] } else { Device::Cpu };
        let mut push = |kind: CacheKind, bytes: u64| match per_dev.iter_mut().find(|e| e.0 == dev && e.1 == kind) {
            Some(e) => {
                e.2 = e.2.saturating_add(bytes);
                e.3 += 1;
            }
            None => per_dev.push((dev, kind, bytes, 1)),
        };
        if l.has_kv() {
            let cells = if l.sliding { size.swa_cells } else { size.n_ctx_seq };
            let k_row = row(opt.type_k, l.k_width(), "cache-type-k")?;
            let v_width = if opt.flash_attn { l.v_width() } else { v_max };
            // V-less (MLA, PR #19067): no V tensor is created for the layer
            let v_row = if opt.v_less { 0 } else { row(opt.type_v, v_width, "cache-type-v")? };
            let k = product("K cache", &[k_row, cells, size.streams])?;
            let v = product("V cache", &[v_row, cells, size.streams])?;
            k_total = add("K cache", k_total, k)?;
            v_total = add("V cache", v_total, v)?;
            if l.sliding {
                swa_total = add("SWA cache", swa_total, add("SWA cache", k, v)?)?;
            } else {
                per_token = add("KV per token", per_token, product("KV per token", &[add("row", k_row, v_row)?, 1])?)?;
            }
            push(CacheKind::Kv, add("KV", k, v)?);
        }
        if let Some(st) = l.recurrent {
            let b = product("recurrent state", &[add("state", st.r, st.s)?, 4, cells_rs])?;
            state_total = add("recurrent state", state_total, b)?;
            push(CacheKind::Rs, b);
        }
    }
    let buffers = per_dev
        .into_iter()
        .map(|(device, kind, bytes, layers)| CacheBuffer {
            device,
            kind,
            bytes,
            layers,
            explain: match kind {
                CacheKind::Kv if opt.v_less => {
                Explanation::new("Σ over this device's layers of row_size(type_k, n_head_kv·head_dim_k)·cells·streams (no V cache: MLA keeps the latent in K and reads V as a view of it)")
                    .term("layers", layers)
                    .term("cells per stream (full / sliding)", format!("{} / {}", size.n_ctx_seq, size.swa_cells))
                    .term("streams", size.streams)
                    .term("cache type (K)", opt.type_k.to_string())
                    .note("llama.cpp src/llama-kv-cache.cpp: has_v = !is_mla (PR #19067, from b7917 in vramfit's build table)")
                }
                CacheKind::Kv => {
                Explanation::new("Σ over this device's layers of row_size(type_k, n_head_kv·head_dim_k)·cells·streams + row_size(type_v, n_head_kv·head_dim_v)·cells·streams")
                    .term("layers", layers)
                    .term("cells per stream (full / sliding)", format!("{} / {}", size.n_ctx_seq, size.swa_cells))
                    .term("streams", size.streams)
                    .term("cache types (K, V)", format!("{}, {}", opt.type_k, opt.type_v))
                    .note("llama.cpp src/llama-kv-cache.cpp; sliding layers sized by src/llama-kv-cache-iswa.cpp")
                }
                CacheKind::Rs => {
                Explanation::new("Σ over this device's recurrent layers of (n_embd_r + n_embd_s) × 4 B (f32) × max(1, parallel) cells")
                    .term("layers", layers)
                    .term("cells", cells_rs)
                    .note("llama.cpp src/llama-memory-recurrent.cpp; n_embd_r/n_embd_s in src/llama-hparams.cpp")
                }
            },
        })
        .collect();
    Ok(KvCache {
        size,
        k_bytes: k_total,
        v_bytes: v_total,
        swa_bytes: swa_total,
        state_bytes: state_total,
        buffers,
        bytes_per_token: product("KV per token", &[per_token, 1])?,
    })
}
