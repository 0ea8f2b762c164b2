//! Inference memory per GPU: weights, KV cache, the prefill transient
//! (logits and the largest working set), runtime and margin; the paged
//! KV view and the largest concurrency or context that fits a card.

use crate::dtype::DType;
use crate::error::CoreError;
use crate::explain::Explanation;
use crate::ledger::{Category, Ledger, Phase};
use crate::model::{Mixer, ModelSpec};
use crate::params::ParamLayout;
use crate::runtime::RuntimeSetup;
use crate::units::{div_ceil, product};
use crate::weights::push_weights;
use crate::workload::limits::MAX_TOKENS;
use crate::workload::{validate, InferenceSetup, Parallelism, SlidingWindowCache};
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
        worst.full = worst.full.max(n(Mixer::Attention));
        worst.sliding = worst.sliding.max(n(Mixer::SlidingAttention));
        worst.linear = worst.linear.max(n(Mixer::LinearAttention));
        worst.mamba = worst.mamba.max(n(Mixer::Mamba2));
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
    let mut e = Explanation::new("2 (K,V) × layers × kv_heads × head_dim × bytes")
        .term("layers", stage.full)
        .term("kv_heads", heads)
        .term("head_dim", spec.head_dim)
        .term("bytes", bytes);
    if tp > 1 {
        e = e.note(format!(
            "{} kv heads over TP {tp}: {heads} per rank{}",
            spec.num_kv_heads,
            if spec.num_kv_heads < tp { " (replicated: fewer kv heads than ranks)" } else { "" }
        ));
    }
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

/// The inference ledger for one GPU (the worst rank).
pub fn estimate_inference(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    par: &Parallelism,
    runtime: &RuntimeSetup,
) -> Result<(Ledger, InferenceDetail), CoreError> {
    validate::inference(spec, setup, par, runtime)?;
    let layout = ParamLayout::of(spec)?;
    let tp = par.tp;
    let pp = par.pp;
    let mut ledger = Ledger::new(Phase::Prefill, par.gpus);
    ledger.params_total = layout.total()?;
    ledger.params_active = layout.active()?;
    let quant = setup.quant.as_ref();
    crate::weights::push_weights_with(
        &mut ledger,
        &layout,
        spec.num_layers,
        setup.weight_dtype,
        quant,
        setup.quantize_lm_head,
        tp,
        pp,
    )?;

    // KV cache, paged in blocks, and recurrent state.
    let kv_detail = push_kv(&mut ledger, spec, setup, tp, pp)?;

    let (logits, act_bytes) = match setup.engine.serving() {
        Some(d) => push_profiling_run(&mut ledger, spec, setup, &d, tp, runtime)?,
        None => push_prefill(&mut ledger, spec, setup, tp)?,
    };
    let prefill_moment = crate::units::sum("prefill", &[ledger.bytes(Category::KvCache), logits, act_bytes])?;
    push_load_transient(&mut ledger, &layout, setup, tp, prefill_moment)?;
    if setup.engine.serving().is_some() && tp > 1 {
        ledger.push(
            Category::Runtime,
            "vLLM custom all-reduce buffers",
            CUSTOM_ALLREDUCE_BYTES,
            Explanation::new("8 MiB IPC data buffer + its signal/metadata region + 8 MiB rank data, per GPU at TP > 1")
                .term("bytes", CUSTOM_ALLREDUCE_BYTES)
                .note("vllm/distributed/device_communicators/custom_all_reduce.py, CustomAllreduce(max_size=8192 * 1024); allocated with cudaMalloc, outside the PyTorch allocator"),
        );
    }
    runtime.apply_with(&mut ledger, &inference_communicators(setup, tp))?;
    let replicas = par.gpus / (tp * pp);
    if replicas > 1 {
        ledger.notes.push(format!(
            "{replicas} replicas of TP {tp} × PP {pp}: more throughput, the same memory on every GPU (replication saves no memory)"
        ));
    }
    if tp > 1 || pp > 1 {
        ledger.notes.push(format!("split over {} GPUs (TP {tp} × PP {pp}); figures are for the worst GPU", tp * pp));
    }
    Ok((ledger, kv_detail))
}

/// The KV cache (full-context layers, sliding-window layers) and the
/// recurrent state of `concurrency` sequences, as ledger entries; the
/// detail sizes a sequence in blocks of the full-context layers' bytes so
/// the capacity view can count them.
fn push_kv(
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
            if let Some(t) = kv.explain.terms.iter_mut().find(|t| t.name == "layers") {
                t.value = sw.layers.into();
            }
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

/// `generate`'s prefill transient: logits for every prompt token and the
/// largest working set. Returns (logits, working set) bytes.
fn push_prefill(
    ledger: &mut Ledger,
    spec: &ModelSpec,
    setup: &InferenceSetup,
    tp: u64,
) -> Result<(u64, u64), CoreError> {
    // Prefill transient: logits and the largest working set.
    let act = setup.weight_dtype_compute();
    let act_b = act.bytes()?;
    let tokens = product("prefill tokens", &[setup.batch, setup.context])?;
    let logit_b = if setup.logits_fp32 { 4 } else { act_b };
    let vocab_shard = div_ceil(spec.vocab_size, tp);
    let logits = product("logits", &[tokens, vocab_shard, logit_b])?;
    ledger.push(
        Category::Logits,
        format!("prefill logits ({})", if setup.logits_fp32 { "fp32" } else { act.name() }),
        logits,
        Explanation::new("batch × seq × vocab × bytes")
            .term("batch", setup.batch)
            .term("seq", setup.context)
            .term("vocab (per TP rank)", vocab_shard)
            .term("bytes", logit_b)
            .note("transformers computes logits for every prompt token; engines that keep only the last token need far less"),
    );
    // At the end of prefill the final hidden state, its fp32 RMSNorm/LayerNorm
    // upcast and the normalised output are live beside the logits:
    // (act + 4 + act) bytes per hidden element. Inside the last MLP the
    // residual, the normed input and three intermediate tensors
    // (act(gate), up, their product) are live: (2h + 3·I) × act bytes.
    // Calibrated on shared/calibration group B (Llama-2-7B prefill).
    let h = spec.hidden_size;
    let end_set = product("final working set", &[tokens, h, 2 * act_b + 4])?;
    let width = mlp_width(spec) / tp;
    let mlp_set = product("mlp working set", &[tokens, 2 * h + 3 * width, act_b])?;
    // the MLP's working set beyond the logits it no longer shares (none when the logits are larger)
    let mlp_beyond_logits = mlp_set.max(logits) - logits;
    let act_bytes = end_set.max(mlp_beyond_logits);
    let which = if end_set >= mlp_beyond_logits { "final norm beside the logits" } else { "largest MLP" };
    ledger.push(
        Category::Activations,
        format!("prefill working set ({which})"),
        act_bytes,
        Explanation::new(
            "max(tokens × hidden × (2·act + 4 B fp32 norm), tokens × (2·hidden + 3·mlp_width) × act − logits)",
        )
        .term("tokens", tokens)
        .term("hidden", h)
        .term("mlp_width (per TP rank)", width)
        .term("act bytes", act_b)
        .note("the peak of a no_grad prefill is at the output head; decode steps need far less"),
    );
    Ok((logits, act_bytes))
}

/// A serving engine's transient as it sizes itself at start-up: its profiling
/// run (the forward of `max_num_batched_tokens` tokens, or the sampler on
/// `max_num_seqs` rows, whichever is larger: [`profiling_run`]) instead of
/// `generate`'s logits for every prompt token, and the memory outside the
/// allocator the engine logs beyond the CUDA context and workspaces the runtime
/// counts. Returns (logits, working set) bytes: the engine's logits are inside
/// its sampler, so 0 and the profiling peak.
fn push_profiling_run(
    ledger: &mut Ledger,
    spec: &ModelSpec,
    setup: &InferenceSetup,
    d: &crate::workload::ServingDefaults,
    tp: u64,
    runtime: &RuntimeSetup,
) -> Result<(u64, u64), CoreError> {
    let (tokens, seqs) = profile_shape(setup, d);
    let run = profiling_run(spec, setup, tp, tokens, seqs)?;
    let peak = run.forward.max(run.sampler);
    let which = if run.sampler >= run.forward { "sampler" } else { "forward" };
    ledger.push(
        Category::Activations,
        format!("{} start-up profiling run ({which})", setup.engine.name()),
        peak,
        Explanation::new(
            "max(forward: tokens × (2·hidden + MLP columns) × act bytes, sampler: rows × vocab × 38 B + tokens × hidden × act bytes)",
        )
        .term("tokens (max_num_batched_tokens)", tokens)
        .term("rows (max_num_seqs, at most the tokens)", run.rows)
        .term("forward", run.forward)
        .term("sampler", run.sampler)
        .note("the engine sizes its KV pool after this run and keeps its peak reserved; logits exist only for the sampled rows, inside the sampler"),
    );
    if let Some(non_torch) = d.non_torch_tp1 {
        let counted = crate::units::add("runtime", runtime.cuda_context_bytes, runtime.workspace_bytes)?;
        ledger.push(
            Category::Runtime,
            format!("{} non-torch memory beyond the CUDA context and workspaces", setup.engine.name()),
            non_torch.saturating_sub(counted),
            Explanation::new("the engine's logged non-torch memory at one GPU − (CUDA context + workspaces counted below)")
                .term("engine's non-torch memory", non_torch)
                .term("CUDA context + workspaces", counted)
                .note("vLLM PR #10511's start-up log (Llama-3-8B, H100, TP 1): kernel images its profiling run loads and the allocator cache that accounting counted"),
        );
    }
    Ok((0, peak))
}

/// bitsandbytes quantizes a 16-bit checkpoint as it loads: each 16-bit matrix
/// is moved to the GPU and copied again by `Params4bit._quantize`
/// (`self.data.contiguous().to(device)`) before it shrinks to 4 bits, so the
/// load peaks at the quantized weights + two 16-bit copies of the largest
/// quantized matrix. When that moment tops the prefill's (KV + logits +
/// working set), the excess is a line of its own: the ledger's total is the
/// larger of the two moments.
fn push_load_transient(
    ledger: &mut Ledger,
    layout: &ParamLayout,
    setup: &InferenceSetup,
    tp: u64,
    prefill_moment: u64,
) -> Result<(), CoreError> {
    let Some(q) = setup.quant.as_ref().filter(|q| q.method == crate::quant::QuantMethod::Bnb4) else {
        return Ok(());
    };
    let largest = layout
        .groups
        .iter()
        .filter(|g| {
            crate::weights::quantized(g)
                || (setup.quantize_lm_head && g.role() == Some(crate::params::LinearRole::LmHead))
        })
        .map(|g| g.weight_elems())
        .try_fold(0u64, |m, e| e.map(|e| m.max(e)))?;
    let load = product("quantize-on-load", &[2, div_ceil(largest, tp), q.compute_dtype.bytes()?])?;
    if load > prefill_moment {
        ledger.push(
            Category::Temporaries,
            "bitsandbytes quantize-on-load: the load moment's excess over prefill",
            load - prefill_moment,
            Explanation::new("2 × largest quantized matrix × 16-bit bytes − (KV + logits + working set)")
                .term("largest quantized matrix (elements, per TP rank)", div_ceil(largest, tp))
                .term("load transient", load)
                .term("prefill moment", prefill_moment)
                .note("bitsandbytes quantizes a 16-bit checkpoint while loading it: the 16-bit matrix on the GPU and Params4bit's contiguous copy exist before it shrinks to 4 bits; the peak is then at load, before any KV cache exists"),
        );
    }
    Ok(())
}

/// Widest MLP a token passes through (dense, or top-k experts side by side
/// as transformers' loop materialises them one expert at a time: one expert).
fn mlp_width(spec: &ModelSpec) -> u64 {
    match &spec.moe {
        Some(m) if spec.moe_layers() == spec.num_layers => {
            m.expert_intermediate.max(m.shared_intermediate * m.shared_experts)
        }
        _ => spec.intermediate_size,
    }
}

/// Fit against one GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// the card's memory as given (nvidia-smi's total, or the free memory of a local GPU)
    pub gpu_memory_bytes: u64,
    /// what the job may use of it: CUDA's total (nvidia-smi's less the driver's
    /// reservation), the free memory of a local GPU, or a `--gpu-util` budget
    pub usable_bytes: u64,
    pub required_bytes: u64,
    pub fits: bool,
    /// usable memory left (negative: short by)
    pub headroom_bytes: i128,
    /// fits / tight / does not fit (see [`FitVerdict`])
    pub verdict: FitVerdict,
    pub explain: Explanation,
}

/// The fit in one word. `Tight`: the whole estimate does not fit, but
/// everything except the margin does (the caching allocator's overhead and
/// any `--margin` headroom): the job may start and run until the allocator's
/// rounding and fragmentation need the memory (a practitioner's "it might
/// just fit, expect OOMs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FitVerdict {
    Fits,
    Tight,
    DoesNotFit,
}

impl FitVerdict {
    /// The verdict of `required` bytes, `margin` of them the margin category, against `usable` bytes.
    pub fn of(required: u64, margin: u64, usable: u64) -> FitVerdict {
        if required <= usable {
            FitVerdict::Fits
        } else if required.saturating_sub(margin) <= usable {
            FitVerdict::Tight
        } else {
            FitVerdict::DoesNotFit
        }
    }
}

/// The fit of a ledger on a card of `gpu_memory_bytes` of which the job may use `usable_bytes`.
pub fn fit(ledger: &Ledger, gpu_memory_bytes: u64, usable_bytes: u64) -> Fit {
    let required = ledger.total_bytes();
    let margin = ledger.bytes(Category::Margin);
    let without_margin = required.saturating_sub(margin);
    let verdict = FitVerdict::of(required, margin, usable_bytes);
    Fit {
        gpu_memory_bytes,
        usable_bytes,
        required_bytes: required,
        fits: required <= usable_bytes,
        headroom_bytes: usable_bytes as i128 - required as i128,
        verdict,
        explain: Explanation::new(
            "fits when total per GPU (tensors + allocator + runtime [+ --margin]) ≤ usable memory; headroom = usable − total; \
             tight when only total − margin (the allocator's overhead and --margin) ≤ usable memory",
        )
        .term("GPU memory", gpu_memory_bytes)
        .term("usable memory", usable_bytes)
        .term("total per GPU", required)
        .term("total per GPU without the margin", without_margin),
    }
}

/// The paged-KV capacity of a card at a memory utilisation (vLLM's
/// `gpu_memory_utilization`): the utilisation is the margin, so the check
/// is `tensors + runtime ≤ util × memory`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capacity {
    pub gpu_util: f64,
    pub budget_bytes: u64,
    /// bytes left for KV blocks once weights, transient and runtime are placed
    pub kv_budget_bytes: u64,
    pub kv_blocks: u64,
    /// most concurrent sequences at the requested context
    pub max_concurrency: u64,
    /// longest context for the requested concurrency (multiple of the block size)
    pub max_context: u64,
    /// what the figures assume, in a sentence (and which flags reproduce them)
    pub assumes: String,
    pub explain: Explanation,
}

fn fits_util(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
    budget: u64,
) -> Result<bool, CoreError> {
    let mut no_margin = rt.clone();
    no_margin.margin = 0.0;
    let (l, _) = estimate_inference(spec, setup, par, &no_margin)?;
    Ok(l.total_bytes() <= budget)
}

/// The paged-KV capacity of one GPU at `gpu_util` of the capacity CUDA reports
/// (`cuda_capacity_bytes`, nvidia-smi's total less the driver's reservation:
/// [`crate::runtime::cuda_capacity`]).
///
/// What it assumes, said in [`Capacity::assumes`]: decoding with a paged KV
/// cache of `concurrency` sequences while `batch` sequences are prefilled at
/// once (one at a time by default: an engine chunks prefill), the estimate's
/// own runtime and allocator overhead, and no `--margin` (the utilisation is the
/// margin, as vLLM's `gpu_memory_utilization`). The same budget decides the fit
/// when `--gpu-util` is given, so `--concurrency <max concurrency>` fits, and so
/// does `--context <max context>`. A serving engine (`Engine::serving`) sizes
/// its pool from its own start-up profile instead ([`serving_profile`]).
pub fn capacity(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
    cuda_capacity_bytes: u64,
    gpu_util: f64,
) -> Result<Capacity, CoreError> {
    if !(gpu_util > 0.0 && gpu_util <= 1.0) {
        return Err(CoreError::invalid("gpu-util", format!("{gpu_util} is not in (0, 1]")));
    }
    let budget = (cuda_capacity_bytes as f64 * gpu_util).floor() as u64;
    let mut no_margin = rt.clone();
    no_margin.margin = 0.0;
    let (l, detail) = estimate_inference(spec, setup, par, &no_margin)?;
    let engine = setup.engine.serving().map(|d| serving_setup(setup, &d, gpu_util, cuda_capacity_bytes));
    let (non_kv, kv_budget) = match &engine {
        Some(s) => {
            let p = serving_profile(spec, setup, par, rt, s)?;
            (budget.saturating_sub(p.kv_pool_bytes), p.kv_pool_bytes)
        }
        None => {
            let non_kv = l.total_bytes() - l.bytes(Category::KvCache);
            (non_kv, budget.saturating_sub(non_kv))
        }
    };
    let kv_blocks = kv_budget.checked_div(detail.block_bytes).unwrap_or(0);
    let max_concurrency = kv_blocks / detail.blocks_per_sequence.max(1);

    // Longest context at this concurrency: the transient grows with context too, so
    // search, no further than the model's own position limit.
    let block = setup.block_size;
    let limit = spec.max_position_embeddings.min(MAX_TOKENS) / block;
    let max_context = if engine.is_some() {
        // the engine's pool is fixed at start-up: the context its blocks hold per sequence
        (kv_blocks / setup.concurrency.max(1)).min(limit) * block
    } else {
        let mut lo = 0u64; // fits (0 = nothing fits)
        let mut hi = limit;
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            let mut s = setup.clone();
            s.context = mid * block;
            s.batch = s.batch.min(s.concurrency);
            if fits_util(spec, &s, par, rt, budget)? {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        lo * block
    };
    let assumes = match &engine {
        Some(s) => format!(
            "{} sizes its KV pool at start-up: util × CUDA capacity − (weights + its profiling run of {} tokens / {} sequences + non-torch memory); decoding then holds as many sequences as the pool has blocks",
            setup.engine.name(),
            s.max_num_batched_tokens,
            s.max_num_seqs
        ),
        None => format!(
            "decoding with a paged KV cache of --concurrency sequences while --batch {} prefill{} at once (an engine prefills in chunks), at --gpu-util of the CUDA-reported capacity, no --margin: --concurrency {} fits this budget, --batch {} prefills them all at once and needs more",
            setup.batch,
            if setup.batch == 1 { "s" } else { "" },
            max_concurrency,
            max_concurrency
        ),
    };
    let explain = Explanation::new(
        "budget = util × CUDA capacity; kv budget = budget − (weights + transient + runtime + allocator); blocks = kv budget ÷ block bytes; \
         max concurrency = blocks ÷ blocks per sequence; max context = largest multiple of the block size whose whole estimate fits the budget",
    )
    .term("util", gpu_util)
    .term("CUDA capacity (nvidia-smi total − driver reservation)", cuda_capacity_bytes)
    .term("budget", budget)
    .term("everything but the KV cache", non_kv)
    .term("kv budget", kv_budget)
    .term("block bytes", detail.block_bytes)
    .term("blocks per sequence", detail.blocks_per_sequence)
    .term("model max_position_embeddings (cap on max context)", spec.max_position_embeddings)
    .note(assumes.clone());
    Ok(Capacity {
        gpu_util,
        budget_bytes: budget,
        kv_budget_bytes: kv_budget,
        kv_blocks,
        max_concurrency,
        max_context,
        assumes,
        explain,
    })
}

/// The start-up shape of a serving engine for this setup: the flags' values, or
/// the engine's defaults (vLLM: `max_num_batched_tokens = max(context, 2048)`
/// without chunked prefill, `max_num_seqs` 256).
pub fn serving_setup(
    setup: &InferenceSetup,
    d: &crate::workload::ServingDefaults,
    gpu_util: f64,
    cuda_capacity_bytes: u64,
) -> ServingSetup {
    let (max_num_batched_tokens, max_num_seqs) = profile_shape(setup, d);
    ServingSetup { gpu_util, cuda_capacity_bytes, max_num_batched_tokens, max_num_seqs }
}

/// (`max_num_batched_tokens`, `max_num_seqs`) of the start-up profiling run:
/// the flags' values, or the engine's defaults.
fn profile_shape(setup: &InferenceSetup, d: &crate::workload::ServingDefaults) -> (u64, u64) {
    let default_tokens = if d.max_num_batched_tokens == 0 { setup.context.max(2048) } else { d.max_num_batched_tokens };
    (setup.max_num_batched_tokens.unwrap_or(default_tokens), setup.max_num_seqs.unwrap_or(d.max_num_seqs))
}

/// The two candidates for a serving engine's profiling peak on one GPU.
struct ProfilingRun {
    forward: u64,
    sampler: u64,
    rows: u64,
}

/// The profiling run of `tokens` tokens over `seqs` sequences: the forward's
/// residual and normed input with the MLP's gate/up output and activation
/// (3 × I/tp per token for gated MLPs), and the sampler on one row per
/// sequence ([`SAMPLER_SORT_BYTES`] per vocabulary entry) beside the batch's
/// hidden states.
fn profiling_run(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    tp: u64,
    tokens: u64,
    seqs: u64,
) -> Result<ProfilingRun, CoreError> {
    let act_b = setup.weight_dtype_compute().bytes()?;
    let tokens = tokens.max(1);
    let h = spec.hidden_size;
    let width = div_ceil(mlp_width(spec), tp);
    let mlp_cols = if spec.mlp == crate::model::MlpKind::Gated { 3 * width } else { 2 * width };
    let forward = product("profiling forward", &[tokens, 2 * h + mlp_cols, act_b])?;
    let rows = seqs.min(tokens).max(1);
    let sampler = crate::units::add(
        "sampler",
        product("sampler", &[rows, spec.vocab_size, SAMPLER_SORT_BYTES])?,
        product("hidden states", &[tokens, h, act_b])?,
    )?;
    Ok(ProfilingRun { forward, sampler, rows })
}

/// A serving engine's start-up on one card (vLLM's memory profiling).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServingSetup {
    /// `gpu_memory_utilization`: the fraction of the CUDA-reported capacity the engine may use
    pub gpu_util: f64,
    /// the card's capacity as CUDA reports it (nvidia-smi total − driver reservation)
    pub cuda_capacity_bytes: u64,
    /// tokens of the profiling forward (`max_num_batched_tokens`)
    pub max_num_batched_tokens: u64,
    /// sequences in the profiling run: rows the sampler sees (`max_num_seqs`)
    pub max_num_seqs: u64,
}

/// Bytes per sampled row per vocabulary entry live at the sampler's peak in
/// vLLM's profiling run, which samples with top-p 0.99 and top-k vocab − 1:
/// the compute-dtype logits (2) and their fp32 copy (4), `logits.sort()`'s
/// values (4) and int64 indices (8), the int64 index sequence the sort permutes
/// (8) and CUB's radix-sort double buffers (4 + 8) — `_apply_top_k_top_p` in
/// `vllm/model_executor/layers/sampler.py`, `at::native::sort` on CUDA.
pub const SAMPLER_SORT_BYTES: u64 = 38;

/// What a serving engine sizes at start-up, per GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServingProfile {
    pub budget_bytes: u64,
    pub weights_bytes: u64,
    /// the forward of `max_num_batched_tokens` tokens: its largest working set
    pub forward_bytes: u64,
    /// the sampler on `max_num_seqs` rows (+ the batch's hidden states still referenced)
    pub sampler_bytes: u64,
    /// max(forward, sampler): what the engine logs as its activation peak
    pub activation_peak_bytes: u64,
    /// outside the PyTorch allocator: context and kernel images, workspaces, NCCL, custom all-reduce
    pub non_torch_bytes: u64,
    pub kv_pool_bytes: u64,
    pub block_bytes: u64,
    pub kv_blocks: u64,
    pub explain: Explanation,
}

/// vLLM's custom all-reduce buffers per GPU at TP > 1: the 8 MiB IPC data
/// buffer with its signal/metadata region and the 8 MiB rank-data buffer
/// (`CustomAllreduce(max_size=8192 * 1024)`).
pub const CUSTOM_ALLREDUCE_BYTES: u64 = 2 * 8 * crate::units::MIB + crate::units::MIB;

/// The NCCL communicators a vLLM worker holds at TP > 1: the world process
/// group (its warm-up all-reduce creates it), the TP group's device group, and
/// the TP group's own PyNccl communicator (`GroupCoordinator` with `use_pynccl`).
pub fn serving_communicators(tp: u64) -> Vec<crate::runtime::Communicator> {
    if tp < 2 {
        return Vec::new();
    }
    ["world group", "tensor-parallel group", "PyNccl (tensor parallel)"]
        .into_iter()
        .map(|role| crate::runtime::Communicator { role, ranks: tp })
        .collect()
}

/// The NCCL communicators one GPU's process holds to run inference at tensor
/// parallelism `tp`: a serving engine's [`serving_communicators`]; with
/// transformers' tensor-parallel `generate` (`tp_plan="auto"`, one process per
/// GPU) the default process group. None at TP 1: a pipeline split is one process
/// placing layers on several GPUs (accelerate's `device_map`), or a serving
/// engine's pipeline group, whose communicators are not measured here (the
/// published pipeline cases are over-estimated already, docs/inference.md).
pub fn inference_communicators(setup: &InferenceSetup, tp: u64) -> Vec<crate::runtime::Communicator> {
    if tp < 2 {
        Vec::new()
    } else if setup.engine.serving().is_some() {
        serving_communicators(tp)
    } else {
        vec![crate::runtime::Communicator { role: "default process group (tensor parallel)", ranks: tp }]
    }
}

/// The start-up memory of a vLLM-style engine on one GPU: weights, the
/// profiling run's activation peak, non-torch memory, and the KV pool sized
/// from `gpu_util × CUDA capacity`.
pub fn serving_profile(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
    s: &ServingSetup,
) -> Result<ServingProfile, CoreError> {
    if !(s.gpu_util > 0.0 && s.gpu_util <= 1.0) {
        return Err(CoreError::invalid("gpu-util", format!("{} is not in (0, 1]", s.gpu_util)));
    }
    validate::inference(spec, setup, par, rt)?;
    let layout = ParamLayout::of(spec)?;
    let (tp, pp) = (par.tp, par.pp);
    let mut scratch = Ledger::new(Phase::Prefill, par.gpus);
    let w = push_weights(&mut scratch, &layout, spec.num_layers, setup.weight_dtype, setup.quant.as_ref(), tp, pp)?;
    let ProfilingRun { forward, sampler, .. } =
        profiling_run(spec, setup, tp, s.max_num_batched_tokens, s.max_num_seqs)?;
    let activation = forward.max(sampler);
    let comms = serving_communicators(tp);
    let nccl: u64 = comms.iter().map(|c| crate::runtime::nccl_communicator_bytes(c.ranks)).sum();
    let custom_ar = if tp > 1 { CUSTOM_ALLREDUCE_BYTES } else { 0 };
    let runtime_base = crate::units::add("non-torch", rt.cuda_context_bytes, rt.workspace_bytes)?;
    let base = setup.engine.serving().and_then(|d| d.non_torch_tp1).unwrap_or(runtime_base);
    let non_torch = crate::units::sum("non-torch", &[base, nccl, custom_ar])?;
    let budget = (s.cuda_capacity_bytes as f64 * s.gpu_util).floor() as u64;
    let used = crate::units::sum("serving start-up", &[w.per_gpu, activation, non_torch])?;
    let kv_pool = budget.saturating_sub(used);
    // a block as the KV entries count it (full-attention layers' block, or the
    // sliding layers' when every layer slides)
    let block_bytes = push_kv(&mut scratch, spec, setup, tp, pp)?.block_bytes;
    let kv_blocks = kv_pool.checked_div(block_bytes).unwrap_or(0);
    let explain = Explanation::new(
        "kv pool = util × CUDA capacity − (weights + max(forward, sampler) + non-torch); blocks = kv pool ÷ block bytes",
    )
    .term("util", s.gpu_util)
    .term("CUDA capacity", s.cuda_capacity_bytes)
    .term("budget", budget)
    .term("weights", w.per_gpu)
    .term("profiling forward (max_num_batched_tokens × (2·hidden + MLP) × act bytes)", forward)
    .term("sampler (max_num_seqs × vocab × 38 B + tokens × hidden × act bytes)", sampler)
    .term("non-torch at one GPU (engine's start-up figure, or context + workspaces)", base)
    .term("NCCL communicators (world, TP group, PyNccl) + custom all-reduce", nccl + custom_ar)
    .term("kv pool", kv_pool)
    .term("block bytes", block_bytes)
    .note("vLLM sizes the KV pool once at start-up from a profiling run of max_num_batched_tokens tokens over max_num_seqs sequences; CUDA graphs are captured afterwards, outside this budget");
    Ok(ServingProfile {
        budget_bytes: budget,
        weights_bytes: w.per_gpu,
        forward_bytes: forward,
        sampler_bytes: sampler,
        activation_peak_bytes: activation,
        non_torch_bytes: non_torch,
        kv_pool_bytes: kv_pool,
        block_bytes,
        kv_blocks,
        explain,
    })
}
