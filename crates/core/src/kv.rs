//! KV-cache sizing: the geometry of a model's cache (what grows with the
//! context, what stops at a window, what is fixed per sequence), the tokens a
//! sliding-window policy keeps, and the inference ledger's KV lines.
//!
//! llama.cpp's sliding-window cache rule lives here, not in `vramfit-llamacpp`:
//! core's `--sliding-window-cache llamacpp` policy sizes Hugging Face models
//! with it, and the llama.cpp simulator (which depends on core) re-exports it.

use crate::dtype::DType;
use crate::error::CoreError;
use crate::explain::Explanation;
use crate::ledger::{Category, Ledger};
use crate::model::{Mixer, ModelSpec};
use crate::units::{add, product};
use crate::workload::{InferenceSetup, SlidingWindowCache};
use serde::{Deserialize, Serialize};

/// KV cache geometry of a model: what grows with the context (full
/// attention), what stops at a window (sliding layers) and what is fixed
/// per sequence (linear-attention and SSM state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvGeometry {
    /// bytes one token of context occupies on one GPU in the layers that
    /// keep the whole context (all layers of its stage for a plain model)
    pub bytes_per_token: u64,
    /// "MHA", "GQA", "MQA", "MLA"
    pub kind: String,
    pub explain: Explanation,
    /// the sliding-window layers, when some layers attend over a window
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding: Option<SlidingKv>,
    /// the fixed-size state per sequence of linear-attention / SSM layers
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<StateBytes>,
}

/// The KV of the sliding-window layers of one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlidingKv {
    pub layers: u64,
    pub window: u64,
    /// bytes one cached token occupies in these layers
    pub bytes_per_token: u64,
    pub explain: Explanation,
}

/// The recurrent state of one sequence on one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateBytes {
    /// "Gated DeltaNet", "Mamba-2", or both
    pub kind: String,
    pub layers: u64,
    pub bytes_per_sequence: u64,
    pub explain: Explanation,
}

/// Layers of each kind on the worst pipeline stage (stages hold
/// `ceil(L/pp)` consecutive layers; each count is its own stage's maximum,
/// which can only over-state).
struct StageLayers {
    full: u64,
    sliding: u64,
    linear: u64,
    mamba: u64,
}

fn stage_layers(spec: &ModelSpec, pp: u64) -> StageLayers {
    let layers = spec.layers();
    let per = spec.num_layers.div_ceil(pp.max(1)).max(1) as usize;
    let mut worst = StageLayers { full: 0, sliding: 0, linear: 0, mamba: 0 };
    for stage in layers.chunks(per) {
        let n = |m: Mixer| stage.iter().filter(|l| l.mixer == m).count() as u64;
        // Falcon-H1's parallel layers count as full attention AND as Mamba-2
        worst.full = worst.full.max(stage.iter().filter(|l| l.mixer.is_full_attention()).count() as u64);
        worst.sliding = worst.sliding.max(n(Mixer::SlidingAttention));
        worst.linear = worst.linear.max(n(Mixer::LinearAttention));
        worst.mamba = worst.mamba.max(stage.iter().filter(|l| l.mixer.has_mamba()).count() as u64);
    }
    worst
}

/// Per-token KV bytes per GPU, and the fixed per-sequence state.
///
/// MHA/GQA/MQA: `2 × layers × kv_heads × head_dim × bytes` (K and V).
/// MLA: `layers × (kv_lora_rank + qk_rope_head_dim) × bytes`, the
/// compressed latent that vLLM/SGLang cache (DeepSeek-V2 paper §2.1.2);
/// replicated on every TP rank; with a DeepSeek sparse-attention indexer,
/// plus its fp8 key and fp32 scale per token (vLLM `DeepseekV32IndexerCache`:
/// `index_head_dim + index_head_dim / 128 × 4` bytes). Tensor parallelism
/// splits K/V heads, replicating when kv_heads < tp (each rank keeps ≥ 1
/// head). Sliding-window layers are returned apart ([`SlidingKv`]); Gated
/// DeltaNet and Mamba-2 layers keep a state ([`StateBytes`]) in
/// `state_dtype` (the compute dtype, or the config's fixed state dtype).
pub fn kv_geometry(
    spec: &ModelSpec,
    kv_dtype: DType,
    state_dtype: DType,
    tp: u64,
    pp: u64,
) -> Result<KvGeometry, CoreError> {
    let stage = stage_layers(spec, pp);
    // a sub-byte KV dtype is refused by validate (and by `bytes` here)
    let bytes = kv_dtype.bytes()?;
    let state = state_bytes(spec, state_dtype, tp, &stage)?;
    if spec.encoder.is_some() {
        return Ok(KvGeometry {
            bytes_per_token: 0,
            kind: spec.attention_kind().into(),
            explain: Explanation::new("none: an encoder attends over its whole input at once and caches nothing")
                .note("encoder-only model (embeddings / classification): no KV cache applies"),
            sliding: None,
            state,
        });
    }
    if let Some(m) = &spec.mla {
        let layers = stage.full + stage.sliding;
        let width = m.kv_lora_rank + m.qk_rope_head_dim;
        let mut b = product("kv bytes per token", &[layers, width, bytes])?;
        let mut e = Explanation::new("layers × (kv_lora_rank + qk_rope_head_dim) × bytes")
            .term("layers", layers)
            .term("kv_lora_rank", m.kv_lora_rank)
            .term("qk_rope_head_dim", m.qk_rope_head_dim)
            .term("bytes", bytes)
            .note("compressed latent as vLLM/SGLang cache it; HF transformers caches decompressed K/V (much larger); replicated per TP rank");
        if spec.indexer.is_some() && bytes == 1 {
            // DeepSeek sparse attention with an fp8 cache is vLLM's `fp8_ds_mla`
            // layout: the latent in fp8, one fp32 scale per 128 of it, the rope
            // part kept 16-bit (MLAAttentionSpec.real_page_size_bytes: 656 B for
            // DeepSeek-V3.2's 512 + 64)
            let per = m.kv_lora_rank + m.kv_lora_rank.div_ceil(128) * 4 + m.qk_rope_head_dim * 2;
            b = product("kv bytes per token", &[layers, per])?;
            e = Explanation::new(
                "layers × (kv_lora_rank × 1 B + kv_lora_rank/128 × 4 B scales + qk_rope_head_dim × 2 B)",
            )
            .term("layers", layers)
            .term("kv_lora_rank", m.kv_lora_rank)
            .term("qk_rope_head_dim", m.qk_rope_head_dim)
            .note("vLLM's fp8_ds_mla cache of sparse MLA (DeepSeek-V3.2, GLM-5): fp8 latent, fp32 scales, 16-bit rope key; replicated per TP rank");
        }
        if let Some(ix) = &spec.indexer {
            // vLLM's indexer cache: fp8 key + one fp32 scale per 128 values
            let per = ix.head_dim + ix.head_dim.div_ceil(128) * 4;
            let indexer = product("indexer cache", &[layers, per])?;
            b = crate::units::add("kv bytes per token", b, indexer)?;
            e.formula = format!("{} + layers × (index_head_dim + index_head_dim/128 × 4 B)", e.formula);
            e = e.term("index_head_dim", ix.head_dim).term("indexer bytes per token", indexer);
        }
        return Ok(KvGeometry { bytes_per_token: b, kind: "MLA".into(), explain: e, sliding: None, state });
    }
    let heads = spec.num_kv_heads.div_ceil(tp.max(1));
    let per_layer = product("kv bytes per token", &[2, heads, spec.head_dim, bytes])?;
    let b = product("kv bytes per token", &[per_layer, stage.full])?;
    let e = attention_kv_explain(spec, stage.full, tp, bytes);
    let sliding = match (stage.sliding, spec.sliding_window) {
        (0, _) | (_, None) => None,
        (layers, Some(window)) => Some(SlidingKv {
            layers,
            window,
            bytes_per_token: product("sliding kv bytes per token", &[per_layer, layers])?,
            explain: Explanation::new("2 (K,V) × sliding layers × kv_heads × head_dim × bytes")
                .term("sliding layers", layers)
                .term("window", window)
                .term("kv_heads", heads)
                .term("head_dim", spec.head_dim)
                .term("bytes", bytes),
        }),
    };
    Ok(KvGeometry { bytes_per_token: b, kind: spec.attention_kind().into(), explain: e, sliding, state })
}

/// The explanation of the K/V bytes per token of `layers` plain-attention
/// layers (kv heads split over TP, at least one per rank).
fn attention_kv_explain(spec: &ModelSpec, layers: u64, tp: u64, bytes: u64) -> Explanation {
    let heads = spec.num_kv_heads.div_ceil(tp.max(1));
    let e = Explanation::new("2 (K,V) × layers × kv_heads × head_dim × bytes")
        .term("layers", layers)
        .term("kv_heads", heads)
        .term("head_dim", spec.head_dim)
        .term("bytes", bytes);
    if tp <= 1 {
        return e;
    }
    e.note(format!(
        "{} kv heads over TP {tp}: {heads} per rank{}",
        spec.num_kv_heads,
        if spec.num_kv_heads < tp { " (replicated: fewer kv heads than ranks)" } else { "" }
    ))
}

/// The recurrent state of one sequence (`None` without such layers), as
/// vLLM sizes it (`MambaStateShapeCalculator`): Gated DeltaNet keeps a
/// convolution state of `conv_dim × (conv_kernel − 1)` and a recurrent
/// state of `value_heads × key_head_dim × value_head_dim`; Mamba-2 a
/// convolution state of `(d_inner + 2·n_groups·d_state) × (d_conv − 1)` and
/// an SSM state of `heads × head_dim × d_state`. Heads and channels split
/// over TP.
fn state_bytes(spec: &ModelSpec, dtype: DType, tp: u64, stage: &StageLayers) -> Result<Option<StateBytes>, CoreError> {
    let tp = tp.max(1);
    let conv_b = dtype.bytes()?;
    let mut total = 0u64;
    let mut kinds = Vec::new();
    let mut e = Explanation::new("per layer: conv channels × (kernel − 1) × conv bytes + state elements × state bytes");
    if let (Some(la), n) = (&spec.linear_attention, stage.linear) {
        if n > 0 {
            let state_b = la.state_dtype.unwrap_or(dtype).bytes()?;
            let conv = product("conv state", &[la.conv_dim().div_ceil(tp), la.conv_kernel.saturating_sub(1), conv_b])?;
            let rec = product(
                "recurrent state",
                &[la.value_heads.div_ceil(tp), la.key_head_dim, la.value_head_dim, state_b],
            )?;
            let per_layer = crate::units::add("state", conv, rec)?;
            total = crate::units::add("state", total, product("state", &[per_layer, n])?)?;
            kinds.push("Gated DeltaNet");
            e = e
                .term("Gated DeltaNet layers", n)
                .term(
                    "conv_dim (2·key_heads·key_head_dim + value_heads·value_head_dim, per TP rank)",
                    la.conv_dim().div_ceil(tp),
                )
                .term("conv kernel", la.conv_kernel)
                .term(
                    "recurrent state (value_heads × key_head_dim × value_head_dim, per TP rank)",
                    la.value_heads.div_ceil(tp) * la.key_head_dim * la.value_head_dim,
                )
                .term("state bytes", state_b)
                .term("Gated DeltaNet bytes per layer", per_layer);
        }
    }
    if let (Some(m), n) = (&spec.mamba, stage.mamba) {
        if n > 0 {
            let state_b = m.state_dtype.unwrap_or(dtype).bytes()?;
            let conv = product("conv state", &[m.conv_dim().div_ceil(tp), m.conv_kernel.saturating_sub(1), conv_b])?;
            let ssm = product("ssm state", &[m.heads.div_ceil(tp), m.head_dim, m.state_size, state_b])?;
            let per_layer = crate::units::add("state", conv, ssm)?;
            total = crate::units::add("state", total, product("state", &[per_layer, n])?)?;
            kinds.push("Mamba-2");
            e = e
                .term("Mamba-2 layers", n)
                .term("conv_dim (d_inner + 2·n_groups·d_state, per TP rank)", m.conv_dim().div_ceil(tp))
                .term("conv kernel", m.conv_kernel)
                .term(
                    "ssm state (heads × head_dim × d_state, per TP rank)",
                    m.heads.div_ceil(tp) * m.head_dim * m.state_size,
                )
                .term("state bytes", state_b)
                .term("Mamba-2 bytes per layer", per_layer);
        }
    }
    if kinds.is_empty() {
        return Ok(None);
    }
    e = e.term("conv bytes", conv_b).note(
        "fixed per sequence, whatever the context; vLLM keeps kernel − 1 conv columns (transformers keeps kernel, llama.cpp stores both states in fp32)",
    );
    Ok(Some(StateBytes {
        kind: kinds.join(" + "),
        layers: stage.linear + stage.mamba,
        bytes_per_sequence: total,
        explain: e,
    }))
}

/// Tokens one sequence keeps in each sliding-window layer under `policy`.
///
/// `Window` (vLLM `SlidingWindowSpec`): the last `window` tokens span at
/// most `ceil(window / block) + 1` blocks (the window rarely starts on a
/// block boundary), never more than the sequence's own blocks. `LlamaCpp`:
/// [`crate::kv::llamacpp_swa_cells`] with the context padded to 256 and one
/// stream per sequence. `Full`: the whole context, in blocks.
pub fn sliding_tokens(window: u64, context: u64, block: u64, policy: SlidingWindowCache) -> Result<u64, CoreError> {
    let block = block.max(1);
    let whole = product("tokens", &[context.div_ceil(block), block])?;
    match policy {
        SlidingWindowCache::Full => Ok(whole),
        SlidingWindowCache::Window => {
            let blocks = (window.div_ceil(block) + 1).min(context.div_ceil(block));
            product("sliding tokens", &[blocks, block])
        }
        SlidingWindowCache::LlamaCpp { ubatch } => {
            let n_ctx_seq = context
                .checked_next_multiple_of(crate::kv::LLAMACPP_CTX_PAD)
                .ok_or_else(|| CoreError::Overflow { what: "n_ctx".into() })?;
            crate::kv::llamacpp_swa_cells(n_ctx_seq, window, 1, false, ubatch, false)
        }
    }
}

/// Outcome of an inference estimate beyond the ledger.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InferenceDetail {
    pub kv: KvGeometry,
    /// tokens each sequence reserves: context rounded up to whole blocks
    pub tokens_per_sequence: u64,
    pub blocks_per_sequence: u64,
    pub block_bytes: u64,
}

/// The KV cache (full-context layers, sliding-window layers) and the
/// recurrent state of `concurrency` sequences, as ledger entries; the
/// detail sizes a sequence in blocks of the full-context layers' bytes so
/// the capacity view can count them.
pub(crate) fn push_kv(
    ledger: &mut Ledger,
    spec: &ModelSpec,
    setup: &InferenceSetup,
    tp: u64,
    pp: u64,
) -> Result<InferenceDetail, CoreError> {
    let state_dtype = setup.weight_dtype_compute();
    let mut kv = kv_geometry(spec, setup.kv_dtype, state_dtype, tp, pp)?;
    let mut blocks = setup.context.div_ceil(setup.block_size);
    let mut tokens_per_seq = product("tokens", &[blocks, setup.block_size])?;
    // Every KV layer slides (Mistral v0.1, a Qwen2 with use_sliding_window):
    // one cache of what the policy keeps, in the plain entry.
    if kv.bytes_per_token == 0 && kv.state.is_none() {
        if let Some(sw) = kv.sliding.take() {
            tokens_per_seq = sliding_tokens(sw.window, setup.context, setup.block_size, setup.sliding_window_cache)?;
            blocks = tokens_per_seq.div_ceil(setup.block_size);
            kv.bytes_per_token = sw.bytes_per_token;
            kv.explain = attention_kv_explain(spec, sw.layers, tp, setup.kv_dtype.bytes()?);
            if sw.window < setup.context {
                kv.explain = kv.explain.note(format!(
                    "every layer attends over a sliding window of {}: --sliding-window-cache {} keeps {} tokens per sequence",
                    sw.window,
                    setup.sliding_window_cache.name(),
                    tokens_per_seq
                ));
            }
        }
    }
    let per_seq_full = product("kv cache", &[kv.bytes_per_token, tokens_per_seq])?;
    let kv_bytes = product("kv cache", &[per_seq_full, setup.concurrency])?;
    let hybrid = kv.sliding.is_some() || kv.state.is_some();
    if kv.bytes_per_token > 0 || !hybrid {
        let mut kv_explain = kv.explain.clone();
        kv_explain.formula = format!("{} × tokens", kv_explain.formula);
        kv_explain = kv_explain
            .term(
                "tokens",
                format!(
                    "{} sequences × {} (context {} in blocks of {})",
                    setup.concurrency, tokens_per_seq, setup.context, setup.block_size
                ),
            )
            .term("bytes per token", kv.bytes_per_token);
        let label = if spec.encoder.is_some() {
            "KV cache (none: encoder-only model)".to_string()
        } else if hybrid {
            format!("KV cache, full-attention layers ({}, {})", kv.kind, setup.kv_dtype)
        } else {
            format!("KV cache ({}, {})", kv.kind, setup.kv_dtype)
        };
        ledger.push(Category::KvCache, label, kv_bytes, kv_explain);
    }
    let mut per_seq = per_seq_full;
    if let Some(sw) = &kv.sliding {
        let policy = setup.sliding_window_cache;
        let tokens = sliding_tokens(sw.window, setup.context, setup.block_size, policy)?;
        let seq = product("sliding kv", &[sw.bytes_per_token, tokens])?;
        per_seq = crate::units::add("kv per sequence", per_seq, seq)?;
        let why = match policy {
            SlidingWindowCache::Window => format!(
                "window-sized: min(ceil({} / {b}) + 1, ceil({} / {b})) blocks of {b} (vLLM hybrid KV-cache manager, SGLang SWA pool, transformers DynamicSlidingWindowLayer)",
                sw.window, setup.context, b = setup.block_size
            ),
            SlidingWindowCache::Full => "the whole context: the engine keeps sliding layers at full length (vLLM --disable-hybrid-kv-cache-manager, transformers DynamicCache() without a config)".to_string(),
            SlidingWindowCache::LlamaCpp { ubatch } => format!(
                "llama.cpp iSWA: pad(min(pad(context, 256), window + {ubatch} ubatch), 256) cells"
            ),
        };
        let mut e = sw.explain.clone();
        e.formula = format!("{} × tokens kept × sequences", e.formula);
        e = e
            .term("tokens kept per sequence", tokens)
            .term("sequences", setup.concurrency)
            .note(format!("--sliding-window-cache {}: {why}", policy.name()));
        ledger.push(
            Category::KvCache,
            format!("KV cache, sliding-window layers (window {}, {})", sw.window, setup.kv_dtype),
            product("sliding kv", &[seq, setup.concurrency])?,
            e,
        );
    }
    if let Some(st) = &kv.state {
        per_seq = crate::units::add("kv per sequence", per_seq, st.bytes_per_sequence)?;
        let mut e = st.explain.clone();
        e.formula = format!("({}) × layers × sequences", e.formula);
        e = e.term("bytes per sequence", st.bytes_per_sequence).term("sequences", setup.concurrency);
        ledger.push(
            Category::KvCache,
            format!("recurrent state ({}, {} layers)", st.kind, st.layers),
            product("recurrent state", &[st.bytes_per_sequence, setup.concurrency])?,
            e,
        );
    }
    // Capacity counts sequences in blocks: a block of the full-context
    // layers (or of the sliding ones, or one whole sequence of state).
    let (block_bytes, blocks_per_sequence) = if kv.bytes_per_token > 0 || !hybrid {
        let b = product("kv block", &[kv.bytes_per_token, setup.block_size])?;
        (b, if hybrid { per_seq.div_ceil(b.max(1)) } else { blocks })
    } else if let Some(sw) = kv.sliding.as_ref().filter(|s| s.bytes_per_token > 0) {
        let b = product("kv block", &[sw.bytes_per_token, setup.block_size])?;
        (b, per_seq.div_ceil(b))
    } else {
        (per_seq, 1)
    };
    Ok(InferenceDetail { kv, tokens_per_sequence: tokens_per_seq, blocks_per_sequence, block_bytes })
}

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
