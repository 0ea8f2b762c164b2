//! Inference memory per GPU: weights, KV cache, the prefill transient
//! (logits and the largest working set), runtime and margin; the paged
//! KV view and the largest concurrency or context that fits a card.
//!
//! KV sizing is [`crate::kv`], a serving engine's start-up profiling
//! [`crate::serving`], the fit verdict [`crate::fit`]; their items are
//! re-exported here for callers that name them `infer::…`.

use crate::error::CoreError;
use crate::explain::Explanation;
use crate::kv::push_kv;
use crate::ledger::{Category, Ledger, Phase};
use crate::model::ModelSpec;
use crate::params::ParamLayout;
use crate::runtime::RuntimeSetup;
use crate::serving::push_profiling_run;
use crate::units::{div_ceil, product};
use crate::workload::limits::MAX_TOKENS;
use crate::workload::{validate, InferenceSetup, Parallelism};
use serde::{Deserialize, Serialize};

pub use crate::fit::{fit, Fit, FitVerdict};
pub use crate::kv::{kv_geometry, sliding_tokens, InferenceDetail, KvGeometry, SlidingKv, StateBytes};
pub use crate::serving::{
    custom_allreduce_bytes, engine_need, engine_need_of, serving_communicators, serving_profile, serving_setup,
    EngineNeed, ServingProfile, ServingSetup, CUSTOM_ALLREDUCE_BYTES, SAMPLER_SORT_BYTES,
};

/// The inference ledger for one GPU (the worst rank).
pub fn estimate_inference(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    par: &Parallelism,
    runtime: &RuntimeSetup,
) -> Result<(Ledger, InferenceDetail), CoreError> {
    validate::inference(spec, setup, par, runtime)?;
    let head_note = spec.untied_head_note(setup.engine);
    let built = spec.as_built_by(setup.engine);
    let spec = built.as_ref();
    let layout = ParamLayout::of(spec)?;
    // with data-parallel attention, attention, the dense layers and the KV
    // cache of each group run at TP `tp / dp` over the group's own sequences
    let tp = par.attn_tp();
    let pp = par.pp;
    let local = dp_attention_share(setup, par.dp_attention);
    let setup = local.as_ref().unwrap_or(setup);
    let mut ledger = Ledger::new(Phase::Prefill, par.gpus);
    ledger.params_total = layout.total()?;
    ledger.params_active = layout.active()?;
    let quant = setup.quant.as_ref();
    crate::weights::push_weights_ep(
        &mut ledger,
        &layout,
        spec.num_layers,
        setup.weight_dtype,
        quant,
        setup.quantize_lm_head,
        tp,
        pp,
        par.ep,
        spec.moe.as_ref().map(|m| m.num_experts).unwrap_or(0),
    )?;
    crate::serving::push_mxfp4_moe_padding(&mut ledger, spec, &layout, setup, par.tp, pp)?;

    // KV cache, paged in blocks, and recurrent state.
    let kv_detail = push_kv(&mut ledger, spec, setup, tp, pp)?;

    let (logits, act_bytes) = match setup.serving() {
        Some(d) => push_profiling_run(&mut ledger, spec, setup, &d, (tp, pp), runtime)?,
        None => push_prefill(&mut ledger, spec, setup, tp)?,
    };
    let prefill_moment = crate::units::sum("prefill", &[ledger.bytes(Category::KvCache), logits, act_bytes])?;
    push_load_transient(&mut ledger, &layout, setup, tp, prefill_moment)?;
    let custom_ar = custom_allreduce_bytes(par.tp, runtime.nccl.link);
    if setup.engine.serving().is_some() && custom_ar > 0 {
        ledger.push(
            Category::Runtime,
            "vLLM custom all-reduce buffers",
            custom_ar,
            Explanation::new("8 MiB IPC data buffer + its signal/metadata region + 8 MiB rank data, per GPU at TP 2, 4, 6 or 8")
                .term("bytes", custom_ar)
                .note("vllm/distributed/device_communicators/custom_all_reduce.py, CustomAllreduce(max_size=8192 * 1024), only for world sizes 2, 4, 6, 8 (_SUPPORTED_WORLD_SIZES) and not on more than two PCIe-only GPUs (world_size > 2 and not fully_connected); with the card's link not known it is counted"),
        );
    }
    runtime.apply_with(&mut ledger, &inference_communicators(setup, par.tp))?;
    ledger.notes.extend(head_note);
    let replicas = par.gpus / (par.tp.max(1) * pp);
    if replicas > 1 {
        ledger.notes.push(format!(
            "{replicas} replicas of TP {tp} × PP {pp}: more throughput, the same memory on every GPU (replication saves no memory)"
        ));
    }
    if par.dp_attention > 1 {
        ledger.notes.push(format!(
            "data-parallel attention {d}: the {t} ranks run attention, the dense layers and the KV cache as {d} groups of TP {tp}, each with its own {c} of the sequences; the routed experts stay split over all {t} (SGLang --enable-dp-attention, vLLM --data-parallel-size with --enable-expert-parallel)",
            d = par.dp_attention,
            t = par.tp,
            c = setup.concurrency
        ));
    }
    if par.tp > 1 || pp > 1 {
        ledger.notes.push(format!(
            "split over {} GPUs (TP {} × PP {pp}); figures are for the worst GPU",
            par.tp * pp,
            par.tp
        ));
    }
    if par.ep > 1 {
        if let Some(e) = ledger.entries.iter().find(|e| e.label.starts_with("routed experts")) {
            let experts = spec.moe.as_ref().map(|m| m.num_experts).unwrap_or(0);
            let note = format!(
                "expert parallel {}: each GPU holds {} of the {experts} routed experts of every MoE layer, whole ({}; not split by TP)",
                par.ep,
                experts.div_ceil(par.ep),
                crate::units::fmt_bytes(e.bytes)
            );
            ledger.notes.push(note);
        }
    }
    Ok((ledger, kv_detail))
}

/// The share of the sequences one data-parallel attention group serves
/// (`dp` > 1): ⌈concurrency / dp⌉, the prefill batch capped by it (SGLang's
/// scheduler and vLLM's DP engine cores each admit their own requests; the
/// worst group takes the rounded-up share). None without DP attention.
fn dp_attention_share(setup: &InferenceSetup, dp: u64) -> Option<InferenceSetup> {
    if dp <= 1 {
        return None;
    }
    let concurrency = setup.concurrency.div_ceil(dp).max(1);
    Some(InferenceSetup { concurrency, batch: setup.batch.min(concurrency).max(1), ..setup.clone() })
}

/// `generate`'s prefill transient: the logits and the largest working set.
/// Returns (logits, working set) bytes.
fn push_prefill(
    ledger: &mut Ledger,
    spec: &ModelSpec,
    setup: &InferenceSetup,
    tp: u64,
) -> Result<(u64, u64), CoreError> {
    let act = setup.weight_dtype_compute();
    let act_b = act.bytes()?;
    let tokens = product("prefill tokens", &[setup.batch, setup.context])?;
    let logit_b = if setup.logits_fp32 { 4 } else { act_b };
    let vocab_shard = div_ceil(spec.vocab_size, tp);
    let logits = if setup.last_logits_only() {
        // transformers' `generate` (v4.45+) runs the head on the last position only
        // (`logits_to_keep=1`), then `_sample` copies that row to fp32
        // (`outputs.logits[:, -1, :].to(copy=True, dtype=torch.float32)`).
        let logits = product("logits", &[setup.batch, vocab_shard, logit_b + 4])?;
        let every_token = product("logits", &[tokens, vocab_shard, logit_b])?;
        ledger.push(
            Category::Logits,
            format!("prefill logits, last token ({} + fp32 copy)", if setup.logits_fp32 { "fp32" } else { act.name() }),
            logits,
            Explanation::new("batch × vocab × (bytes + 4)")
                .term("batch", setup.batch)
                .term("vocab (per TP rank)", vocab_shard)
                .term("bytes", logit_b)
                .note(format!(
                    "transformers 4.45+ generate passes logits_to_keep=1 (num_logits_to_keep before 4.49): the head runs on the last prompt token only, and _sample copies that row to fp32. Older releases and a plain model(input_ids) forward keep every prompt token's logits: {every_token} B"
                )),
        );
        logits
    } else {
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
                .note("the head runs on every prompt token (a plain forward, transformers before 4.45, LitGPT's and torchtune's generate)"),
        );
        logits
    };
    // At the end of prefill the final hidden state, its fp32 RMSNorm/LayerNorm
    // upcast and the normalised output are live beside the logits:
    // (act + 4 + act) bytes per hidden element. Inside the last MLP the
    // residual, the normed input and three intermediate tensors
    // (act(gate), up, their product) are live: (2h + 3·I) × act bytes.
    // Calibrated on shared/calibration group B (Llama-2-7B prefill).
    let h = spec.hidden_size;
    let end_set = product("final working set", &[tokens, h, 2 * act_b + 4])?;
    let width = spec.token_mlp_width() / tp;
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
        serving_communicators(tp, crate::serving::nccl_stack_of(setup))
    } else {
        vec![crate::runtime::Communicator::torch("default process group (tensor parallel)", tp)]
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
    /// by how much a serving engine's CUDA graphs captured after its pool
    /// exceed what the utilisation leaves of the card
    /// ([`crate::serving::ServingProfile::outside_fits`]; 0 when they fit, when
    /// there are none, or when their size is not known)
    #[serde(default)]
    pub outside_short_bytes: u64,
    /// why the card does not hold what comes on top of the budget, when it does not
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outside_note: Option<String>,
    /// where vLLM's CUDA graphs live for this release, in a sentence
    /// ([`crate::serving::graph_note`]); `None` for other engines
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graphs_note: Option<String>,
    pub explain: Explanation,
}

impl Capacity {
    /// A serving engine holds `concurrency` sequences on this card: its pool
    /// has their blocks, and what comes on top of its budget (CUDA graphs
    /// captured after the pool) fits in the rest of the card.
    pub fn holds(&self, concurrency: u64) -> bool {
        self.max_concurrency >= concurrency && self.outside_short_bytes == 0
    }
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

/// What comes on top of a serving engine's budget and does not fit the rest
/// of the card: a sentence saying so and the bytes it lacks (`None`, 0 when it
/// fits: [`crate::serving::ServingProfile::outside_fits`]).
fn outside_of(setup: &InferenceSetup, s: &ServingSetup, p: &ServingProfile) -> (Option<String>, u64) {
    if p.outside_fits() {
        return (None, 0);
    }
    let how = if setup.cuda_graph_bytes.is_some() { "given by --cuda-graph-mib" } else { "as modelled" };
    let note = format!(
        "{}'s CUDA graphs ({} {how}) are captured after its KV pool is sized and come on top of --gpu-util {} × CUDA capacity: they exceed the {} left, so the card does not hold the engine (lower --gpu-util)",
        crate::serving::release_label(setup),
        crate::units::fmt_bytes(p.graphs_outside_bytes),
        s.gpu_util,
        crate::units::fmt_bytes(p.left_outside_bytes)
    );
    (Some(note), p.graphs_outside_bytes - p.left_outside_bytes)
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
    let engine = setup.serving().map(|d| serving_setup(setup, &d, gpu_util, cuda_capacity_bytes));
    let (mut outside_note, mut outside_short_bytes) = (None, 0);
    let graphs_note = match (&engine, setup.serving()) {
        (Some(s), Some(d)) if setup.engine == crate::workload::Engine::Vllm => {
            Some(crate::serving::graph_note(spec, setup, par, &d, s)?)
        }
        _ => None,
    };
    let (non_kv, kv_budget) = match &engine {
        Some(s) => {
            let p = serving_profile(spec, setup, par, rt, s)?;
            (outside_note, outside_short_bytes) = outside_of(setup, s, &p);
            (budget.saturating_sub(p.kv_pool_bytes), p.kv_pool_bytes)
        }
        None => {
            let non_kv = l.total_bytes() - l.bytes(Category::KvCache);
            (non_kv, budget.saturating_sub(non_kv))
        }
    };
    let kv_blocks = kv_budget.checked_div(detail.block_bytes).unwrap_or(0);
    // with data-parallel attention each group's ranks pool the KV of its own
    // sequences: the pool is per group, the sequences N groups' worth
    let groups = par.dp_attention.max(1);
    let max_concurrency = (kv_blocks / detail.blocks_per_sequence.max(1)).saturating_mul(groups);

    // Longest context at this concurrency: the transient grows with context too, so
    // search, no further than the model's own position limit.
    let block = setup.block_size;
    let limit = spec.max_position_embeddings.min(MAX_TOKENS) / block;
    let max_context = if engine.is_some() {
        // the engine's pool is fixed at start-up: the context its blocks hold per sequence
        (kv_blocks / setup.concurrency.div_ceil(groups).max(1)).min(limit) * block
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
        outside_short_bytes,
        outside_note,
        graphs_note,
        explain,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::workload::{Engine, PrefillLogits};

    fn logits(setup: &InferenceSetup) -> u64 {
        let spec = ModelSpec::llama_like("llama-3.1-8b", 4096, 32, 32, 8, 14336, 128256);
        let (l, _) = estimate_inference(&spec, setup, &Parallelism::default(), &RuntimeSetup::default()).unwrap();
        l.bytes(Category::Logits)
    }

    /// transformers' `generate` passes `logits_to_keep=1` (v4.45+, PR #31292;
    /// `num_logits_to_keep` until v4.49): at 131072 prompt tokens the head runs
    /// on one row, 128256 × 2 B, and `_sample` copies it to fp32, 128256 × 4 B =
    /// 769,536 B; every prompt token's logits would be 131072 × 128256 × 2 B =
    /// 31.31 GiB (issue 22).
    #[test]
    fn long_context_generate_keeps_the_last_logits_only() {
        let s = InferenceSetup { context: 131_072, kv_dtype: DType::BF16, ..InferenceSetup::default() };
        assert_eq!(logits(&s), 128_256 * (2 + 4));
        let all = InferenceSetup { prefill_logits: PrefillLogits::AllTokens, ..s.clone() };
        assert_eq!(logits(&all), 131_072 * 128_256 * 2);
        // LitGPT's generate runs the head over the whole prompt (litgpt/generate/base.py
        // `next_token`: `logits = model(x, input_pos)` then `logits[0, -1]`)
        let lit = InferenceSetup { engine: Engine::Litgpt, ..s.clone() };
        assert_eq!(logits(&lit), 131_072 * 128_256 * 2);
        // batch 4: four rows
        let b4 = InferenceSetup { batch: 4, concurrency: 4, ..s };
        assert_eq!(logits(&b4), 4 * 128_256 * 6);
    }
}
