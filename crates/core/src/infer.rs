//! Inference memory per GPU: weights, KV cache, the prefill transient
//! (logits and the largest working set), runtime and margin; the paged
//! KV view and the largest concurrency or context that fits a card.

use crate::dtype::DType;
use crate::error::CoreError;
use crate::explain::Explanation;
use crate::ledger::{Category, Ledger, Phase};
use crate::model::ModelSpec;
use crate::params::ParamLayout;
use crate::runtime::RuntimeSetup;
use crate::units::{div_ceil, product};
use crate::weights::push_weights;
use crate::workload::limits::MAX_TOKENS;
use crate::workload::{validate, InferenceSetup, Parallelism};
use serde::{Deserialize, Serialize};

/// KV cache geometry of a model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvGeometry {
    /// bytes one token occupies on one GPU, all layers of its stage
    pub bytes_per_token: u64,
    /// "MHA", "GQA", "MQA", "MLA"
    pub kind: String,
    pub explain: Explanation,
}

/// Per-token KV bytes per GPU.
///
/// MHA/GQA/MQA: `2 × layers × kv_heads × head_dim × bytes` (K and V).
/// MLA: `layers × (kv_lora_rank + qk_rope_head_dim) × bytes`, the
/// compressed latent that vLLM/SGLang cache (DeepSeek-V2 paper §2.1.2);
/// replicated on every TP rank. Tensor parallelism splits K/V heads,
/// replicating when kv_heads < tp (each rank keeps ≥ 1 head).
pub fn kv_geometry(spec: &ModelSpec, kv_dtype: DType, tp: u64, pp: u64) -> Result<KvGeometry, CoreError> {
    let layers = spec.num_layers.div_ceil(pp.max(1));
    // a sub-byte KV dtype is refused by validate (and by `bytes` here)
    let bytes = kv_dtype.bytes()?;
    if let Some(m) = &spec.mla {
        let width = m.kv_lora_rank + m.qk_rope_head_dim;
        let b = product("kv bytes per token", &[layers, width, bytes])?;
        return Ok(KvGeometry {
            bytes_per_token: b,
            kind: "MLA".into(),
            explain: Explanation::new("layers × (kv_lora_rank + qk_rope_head_dim) × bytes")
                .term("layers", layers)
                .term("kv_lora_rank", m.kv_lora_rank)
                .term("qk_rope_head_dim", m.qk_rope_head_dim)
                .term("bytes", bytes)
                .note("compressed latent as vLLM/SGLang cache it; HF transformers caches decompressed K/V (much larger); replicated per TP rank"),
        });
    }
    let heads = spec.num_kv_heads.div_ceil(tp.max(1));
    let b = product("kv bytes per token", &[2, layers, heads, spec.head_dim, bytes])?;
    let mut e = Explanation::new("2 (K,V) × layers × kv_heads × head_dim × bytes")
        .term("layers", layers)
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
    Ok(KvGeometry { bytes_per_token: b, kind: spec.attention_kind().into(), explain: e })
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
    push_weights(&mut ledger, &layout, spec.num_layers, setup.weight_dtype, setup.quant.as_ref(), tp, pp)?;

    // KV cache, paged in blocks.
    let kv = kv_geometry(spec, setup.kv_dtype, tp, pp)?;
    let blocks = setup.context.div_ceil(setup.block_size);
    let tokens_per_seq = product("tokens", &[blocks, setup.block_size])?;
    let block_bytes = product("kv block", &[kv.bytes_per_token, setup.block_size])?;
    let kv_bytes = product("kv cache", &[kv.bytes_per_token, tokens_per_seq, setup.concurrency])?;
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
    ledger.push(Category::KvCache, format!("KV cache ({}, {})", kv.kind, setup.kv_dtype), kv_bytes, kv_explain);

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
    runtime.apply(&mut ledger)?;
    let replicas = par.gpus / (tp * pp);
    if replicas > 1 {
        ledger.notes.push(format!(
            "{replicas} replicas of TP {tp} × PP {pp}: more throughput, the same memory on every GPU (replication saves no memory)"
        ));
    }
    if tp > 1 || pp > 1 {
        ledger.notes.push(format!("split over {} GPUs (TP {tp} × PP {pp}); figures are for the worst GPU", tp * pp));
    }
    if let Some(w) = spec.sliding_window {
        if w < setup.context {
            ledger.notes.push(format!(
                "sliding window {w} < context {}: a window-aware cache could hold {w} tokens per sequence; the figure assumes a full cache as vLLM allocates",
                setup.context
            ));
        }
    }
    Ok((ledger, InferenceDetail { kv, tokens_per_sequence: tokens_per_seq, blocks_per_sequence: blocks, block_bytes }))
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
    pub gpu_memory_bytes: u64,
    pub required_bytes: u64,
    pub fits: bool,
    /// memory left (negative: short by)
    pub headroom_bytes: i128,
    /// fits / tight / does not fit (see [`FitVerdict`])
    pub verdict: FitVerdict,
    pub explain: Explanation,
}

/// The fit in one word. `Tight`: the whole estimate does not fit, but
/// everything except the margin does: the job may start and run until the
/// allocator's rounding and fragmentation, which the margin stands for,
/// need the memory (a practitioner's "it might just fit, expect OOMs").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FitVerdict {
    Fits,
    Tight,
    DoesNotFit,
}

pub fn fit(ledger: &Ledger, gpu_memory_bytes: u64) -> Fit {
    let required = ledger.total_bytes();
    let without_margin = required.saturating_sub(ledger.bytes(Category::Margin));
    let verdict = if required <= gpu_memory_bytes {
        FitVerdict::Fits
    } else if without_margin <= gpu_memory_bytes {
        FitVerdict::Tight
    } else {
        FitVerdict::DoesNotFit
    };
    Fit {
        gpu_memory_bytes,
        required_bytes: required,
        fits: required <= gpu_memory_bytes,
        headroom_bytes: gpu_memory_bytes as i128 - required as i128,
        verdict,
        explain: Explanation::new(
            "fits when total per GPU (tensors + runtime + margin) ≤ GPU memory; headroom = memory − total; \
             tight when only total − margin ≤ memory",
        )
        .term("GPU memory (as nvidia-smi reports it)", gpu_memory_bytes)
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

pub fn capacity(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
    gpu_memory_bytes: u64,
    gpu_util: f64,
) -> Result<Capacity, CoreError> {
    if !(gpu_util > 0.0 && gpu_util <= 1.0) {
        return Err(CoreError::invalid("gpu-util", format!("{gpu_util} is not in (0, 1]")));
    }
    let budget = (gpu_memory_bytes as f64 * gpu_util).floor() as u64;
    let mut no_margin = rt.clone();
    no_margin.margin = 0.0;
    let (l, detail) = estimate_inference(spec, setup, par, &no_margin)?;
    let non_kv = l.total_bytes() - l.bytes(Category::KvCache);
    let kv_budget = budget.saturating_sub(non_kv);
    let kv_blocks = kv_budget.checked_div(detail.block_bytes).unwrap_or(0);
    let max_concurrency = kv_blocks / detail.blocks_per_sequence.max(1);

    // Longest context: the transient grows with context too, so search,
    // no further than the model's own position limit.
    let mut lo = 0u64; // fits (0 = nothing fits)
    let mut hi = spec.max_position_embeddings.min(MAX_TOKENS) / setup.block_size;
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        let mut s = setup.clone();
        s.context = mid * setup.block_size;
        s.batch = s.batch.min(s.concurrency);
        if fits_util(spec, &s, par, rt, budget)? {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let explain = Explanation::new(
        "budget = util × memory; kv budget = budget − (weights + transient + runtime); blocks = kv budget ÷ block bytes; \
         max concurrency = blocks ÷ blocks per sequence; max context = largest multiple of the block size whose whole estimate fits the budget",
    )
    .term("util", gpu_util)
    .term("memory", gpu_memory_bytes)
    .term("budget", budget)
    .term("weights + transient + runtime", non_kv)
    .term("kv budget", kv_budget)
    .term("block bytes", detail.block_bytes)
    .term("blocks per sequence", detail.blocks_per_sequence)
    .term("model max_position_embeddings (cap on max context)", spec.max_position_embeddings)
    .note("the utilisation is the safety margin here (as vLLM's gpu_memory_utilization), so --margin is not added; max context never exceeds the model's max_position_embeddings");
    Ok(Capacity {
        gpu_util,
        budget_bytes: budget,
        kv_budget_bytes: kv_budget,
        kv_blocks,
        max_concurrency,
        max_context: lo * setup.block_size,
        explain,
    })
}
