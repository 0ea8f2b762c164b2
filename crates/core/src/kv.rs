//! KV-cache sizing shared by every engine model.
//!
//! llama.cpp's sliding-window cache rule lives here, not in `vramfit-llamacpp`:
//! core's `--sliding-window-cache llamacpp` policy sizes Hugging Face models
//! with it, and the llama.cpp simulator (which depends on core) re-exports it.

use crate::error::CoreError;
use crate::units::{add, product};

/// llama.cpp pads the context to a multiple of 256: `GGML_PAD(n_ctx, 256)`
/// (`llama_context` constructor, `src/llama-context.cpp`, since
/// ggml-org/llama.cpp PR #17046; discussion r2503085732).
pub const LLAMACPP_CTX_PAD: u64 = 256;
/// llama.cpp always pads its sliding-window cache to 256 cells
/// (`src/llama-kv-cache-iswa.cpp`, issue #17037).
pub const LLAMACPP_SWA_PAD: u64 = 256;

/// Cells per stream of llama.cpp's sliding-window cache
/// (`llama_kv_cache_iswa`): `pad(min(n_ctx_seq, n_swa · (unified ? N : 1) + n_ubatch), 256)`,
/// or the whole `n_ctx_seq` with `--swa-full`. Also what core's
/// `SlidingWindowCache::LlamaCpp` policy keeps per sequence.
pub fn llamacpp_swa_cells(
    n_ctx_seq: u64,
    n_swa: u64,
    n_parallel: u64,
    unified: bool,
    n_ubatch: u64,
    swa_full: bool,
) -> Result<u64, CoreError> {
    if swa_full {
        return Ok(n_ctx_seq);
    }
    let window = add("swa cells", product("swa cells", &[n_swa, if unified { n_parallel } else { 1 }])?, n_ubatch)?;
    n_ctx_seq
        .min(window)
        .checked_next_multiple_of(LLAMACPP_SWA_PAD)
        .ok_or_else(|| CoreError::Overflow { what: "swa cells".into() })
}
