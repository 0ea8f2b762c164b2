//! A serving engine's start-up (vLLM's memory profiling): the profiling
//! run's peak, the memory outside the allocator the engine logs, and the KV
//! pool it sizes from `gpu_memory_utilization`.

use crate::error::CoreError;
use crate::explain::Explanation;
use crate::kv::push_kv;
use crate::ledger::{Category, Ledger, Phase};
use crate::model::ModelSpec;
use crate::params::ParamLayout;
use crate::runtime::RuntimeSetup;
use crate::units::{div_ceil, product};
use crate::workload::{
    validate, GraphCapture, GraphSizes, InferenceSetup, Parallelism, ServingDefaults, VllmEntry,
    GRAPH_BYTES_PER_LAYER_GRAPH,
};
use serde::{Deserialize, Serialize};

/// A serving engine's transient as it sizes itself at start-up: its profiling
/// run (the forward of `max_num_batched_tokens` tokens, or the sampler on
/// `max_num_seqs` rows, whichever is larger: [`profiling_run`]) instead of
/// `generate`'s logits for every prompt token, and the memory outside the
/// allocator the engine logs beyond the CUDA context and workspaces the runtime
/// counts. Returns (logits, working set) bytes: the engine's logits are inside
/// its sampler, so 0 and the profiling peak.
pub(crate) fn push_profiling_run(
    ledger: &mut Ledger,
    spec: &ModelSpec,
    setup: &InferenceSetup,
    d: &ServingDefaults,
    (tp, pp): (u64, u64),
    runtime: &RuntimeSetup,
) -> Result<(u64, u64), CoreError> {
    let (tokens, seqs) = profile_shape(setup, d);
    let run = profiling_run(spec, setup, d, tp, tokens, seqs)?;
    let peak = run.forward.max(run.sampler);
    let which = if run.sampler >= run.forward { "sampler" } else { "forward" };
    ledger.push(
        Category::Activations,
        format!("{} start-up profiling run ({which})", setup.engine.name()),
        peak,
        Explanation::new(
            "max(forward: tokens × (2·hidden + MLP columns) × act bytes, sampler: rows × vocab × sampler bytes + tokens × hidden × act bytes)",
        )
        .term("engine release assumed", release_label(setup))
        .term("batch defaults assumed", batch_basis(setup, d))
        .term("tokens (max_num_batched_tokens)", tokens)
        .term("sampler bytes per row per vocabulary entry (38: sorting top-k/top-p; 14: FlashInfer's)", d.sampler_bytes_per_entry)
        .term("rows (max_num_seqs, at most the tokens)", run.rows)
        .term("forward", run.forward)
        .term("sampler", run.sampler)
        .note("the engine sizes its KV pool after this run and keeps its peak reserved; logits exist only for the sampled rows, inside the sampler"),
    );
    if let Some(graphs) = graph_pool_bytes(spec, setup, d, tp, pp)? {
        let model = graph_model(spec, setup, d, tp, pp, tokens, seqs)?;
        let mut e = Explanation::new(match (setup.cuda_graph_bytes, &model) {
            (Some(_), _) => "the engine's own figure (--cuda-graph-mib)",
            (None, _) => "graphs × layers × bytes per layer-graph + largest captured size × bytes per token (the pool is shared, the largest size captured first)",
        })
        .term("engine release assumed", release_label(setup));
        if let Some(m) = model.filter(|_| setup.cuda_graph_bytes.is_none()) {
            e = graph_terms(e, &m);
        }
        ledger.push(
            Category::Runtime,
            format!("{} CUDA graph pool", setup.engine.name()),
            graphs,
            e.note("estimated during the start-up profile and taken off the KV pool (vLLM PR #30515, on by default since 0.21: PR #38284)"),
        );
    }
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

/// The release whose row sizes this setup: `vllm@0.20`, with the release asked
/// for when the row is an older one's (`vllm@0.9 (asked 0.19)`).
pub fn release_label(setup: &InferenceSetup) -> String {
    let Some(f) = setup.serving_facts() else { return setup.engine.name().to_string() };
    let row = format!("{}@{}", setup.engine.name(), f.version);
    match setup.engine_version {
        Some(v) if v != f.version => format!("{row} (asked {v})"),
        _ => row,
    }
}

/// The start-up shape of a serving engine for this setup: the flags' values, or
/// the engine's defaults (vLLM: `max_num_batched_tokens = max(context, 2048)`
/// without chunked prefill, `max_num_seqs` 256).
pub fn serving_setup(
    setup: &InferenceSetup,
    d: &ServingDefaults,
    gpu_util: f64,
    cuda_capacity_bytes: u64,
) -> ServingSetup {
    let (max_num_batched_tokens, max_num_seqs) = profile_shape(setup, d);
    ServingSetup { gpu_util, cuda_capacity_bytes, max_num_batched_tokens, max_num_seqs }
}

/// (`max_num_batched_tokens`, `max_num_seqs`) of the start-up profiling run:
/// the flags' values, or the release's defaults on the setup's card
/// ([`ServingDefaults::batch_on`]: the larger ones when the card is not known).
fn profile_shape(setup: &InferenceSetup, d: &ServingDefaults) -> (u64, u64) {
    let (tokens, seqs, basis) = d.batch_on(setup.serving_card.as_ref());
    let tokens = llm_class_tokens(setup, d, basis).unwrap_or(tokens);
    (setup.max_num_batched_tokens.unwrap_or(tokens.at(setup.context)), setup.max_num_seqs.unwrap_or(seqs))
}

/// The `LLM(...)` class's `max_num_batched_tokens` default on the card the
/// defaults were taken for (vLLM V1 `get_batch_defaults`, UsageContext.LLM_CLASS:
/// the larger on the cards the release marks large or when the card is not
/// known); `None` for `vllm serve` or a release without usage contexts.
fn llm_class_tokens(
    setup: &InferenceSetup,
    d: &ServingDefaults,
    basis: crate::workload::BatchBasis,
) -> Option<crate::workload::ProfileTokens> {
    let (large, small) = d.llm_class_tokens?;
    (setup.vllm_entry == VllmEntry::Llm).then_some(if basis == crate::workload::BatchBasis::SmallCard {
        small
    } else {
        large
    })
}

/// Which defaults the start-up took, in words (the flags when both are given).
fn batch_basis(setup: &InferenceSetup, d: &ServingDefaults) -> String {
    if setup.max_num_batched_tokens.is_some() && setup.max_num_seqs.is_some() {
        return "--max-num-batched-tokens and --max-num-seqs as given".to_string();
    }
    let basis = d.batch_on(setup.serving_card.as_ref()).2;
    match llm_class_tokens(setup, d, basis) {
        Some(t) => format!("{}; the LLM(...) class's {t} tokens (--vllm-entry llm)", basis.describe()),
        None => basis.describe().to_string(),
    }
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
/// sequence (the release's bytes per vocabulary entry:
/// [`SAMPLER_SORT_BYTES`] for a sorting sampler,
/// [`SAMPLER_FUSED_BYTES`] for FlashInfer's) beside
/// the batch's hidden states.
fn profiling_run(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    d: &ServingDefaults,
    tp: u64,
    tokens: u64,
    seqs: u64,
) -> Result<ProfilingRun, CoreError> {
    let act_b = setup.weight_dtype_compute().bytes()?;
    let tokens = tokens.max(1);
    let h = spec.hidden_size;
    let forward = product("profiling forward", &[tokens, forward_bytes_per_token(spec, setup, tp)?])?;
    let rows = seqs.min(tokens).max(1);
    let sampler = crate::units::add(
        "sampler",
        product("sampler", &[rows, spec.vocab_size, d.sampler_bytes_per_entry])?,
        product("hidden states", &[tokens, h, act_b])?,
    )?;
    Ok(ProfilingRun { forward, sampler, rows })
}

/// One layer's forward working set per token at TP `tp`: the residual and
/// normed input (2 × hidden) with the MLP's gate/up output and activation
/// (3 × I/tp for gated MLPs, 2 × I/tp otherwise), in the compute dtype.
fn forward_bytes_per_token(spec: &ModelSpec, setup: &InferenceSetup, tp: u64) -> Result<u64, CoreError> {
    let act_b = setup.weight_dtype_compute().bytes()?;
    let width = div_ceil(spec.token_mlp_width(), tp);
    let mlp_cols = if spec.mlp == crate::model::MlpKind::Gated { 3 * width } else { 2 * width };
    product("forward bytes per token", &[2 * spec.hidden_size + mlp_cols, act_b])
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

pub use crate::workload::{SAMPLER_FUSED_BYTES, SAMPLER_SORT_BYTES};

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
    /// the CUDA-graph pool the start-up takes off the KV budget (vLLM 0.21+:
    /// [`graph_allowance_bytes`]); 0 where the graphs come after the pool
    #[serde(default)]
    pub cuda_graph_bytes: u64,
    /// the CUDA-graph pool that comes on top of the budget (a release that
    /// captures after sizing the pool, with `--cuda-graph-mib` given)
    #[serde(default)]
    pub graphs_outside_bytes: u64,
    /// the CUDA capacity left outside the budget: `capacity − util × capacity`
    #[serde(default)]
    pub left_outside_bytes: u64,
    pub explain: Explanation,
}

impl ServingProfile {
    /// The card holds what comes on top of the budget: the CUDA graphs of a
    /// release that captures them after sizing the pool fit in what the
    /// utilisation leaves.
    pub fn outside_fits(&self) -> bool {
        self.graphs_outside_bytes <= self.left_outside_bytes
    }
}

/// The CUDA graphs a release captures for one start-up shape and the pool
/// they need per GPU ([`graph_model`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphModel {
    pub sizes: GraphSizes,
    /// batch sizes captured as PIECEWISE graphs (one graph per piece between attention layers)
    pub piecewise_sizes: u64,
    /// batch sizes captured as FULL graphs (the whole model, uniform decode)
    pub full_graphs: u64,
    /// the largest captured size, in tokens
    pub largest: u64,
    /// decoder layers on this GPU (the layers ÷ PP)
    pub layers: u64,
    /// one layer's forward working set per token at TP (as the profiling forward counts it)
    pub bytes_per_token: u64,
    pub bytes: u64,
}

/// The capture sizes of `sizes` for `tokens` = `max_num_batched_tokens` and
/// `seqs` = `max_num_seqs`: (PIECEWISE sizes, FULL graphs, largest size).
fn capture_sizes(sizes: GraphSizes, tokens: u64, seqs: u64) -> (u64, u64, u64) {
    let grid = |max: u64, step16_from: u64| -> Vec<u64> {
        let mut v: Vec<u64> = [1, 2, 4].into_iter().filter(|&s| s <= max).collect();
        v.extend((8..=max.min(step16_from.saturating_sub(1))).step_by(8));
        if max >= step16_from {
            v.extend((step16_from..=max).step_by(16));
        }
        v
    };
    match sizes {
        // vllm/worker/model_runner.py: `_BATCH_SIZES_TO_CAPTURE` up to
        // `max_num_seqs` rounded up to a captured size (`_get_graph_batch_size`), at most 256
        GraphSizes::V0Full => {
            let all = grid(256, u64::MAX);
            let max = all.iter().copied().find(|&s| s >= seqs).unwrap_or(256);
            let n = all.iter().filter(|&&s| s <= max).count() as u64;
            (0, n, max)
        }
        // V1 0.8 – 0.10: `[1, 2, 4] + range(8, 513, 8)`, none above max_num_batched_tokens
        GraphSizes::V1Piecewise512 => {
            let v: Vec<u64> = grid(512, u64::MAX).into_iter().filter(|&s| s <= tokens.max(1)).collect();
            (v.len() as u64, 0, v.last().copied().unwrap_or(1))
        }
        // 0.11+: `_set_cudagraph_sizes`, vllm/config/vllm.py
        GraphSizes::V1FullAndPiecewise => {
            let max = (seqs.saturating_mul(2)).min(512).min(tokens).max(1);
            let v = grid(max, 256);
            let full = v.iter().filter(|&&s| s <= seqs).count() as u64;
            (v.len() as u64, full, v.last().copied().unwrap_or(1))
        }
        GraphSizes::V1LargerOf | GraphSizes::NotModelled => (0, 0, 0),
    }
}

/// The modelled CUDA-graph pool of a vLLM release per GPU, `None` where the
/// release captures none or vramfit does not model it (SGLang):
/// (PIECEWISE sizes + FULL graphs) × layers × [`GRAPH_BYTES_PER_LAYER_GRAPH`]
/// + largest captured size × one layer's forward bytes per token. All graphs
///   share one pool (`graph_pool_handle`) and are captured largest first, so
///   the activations are those of the largest size alone ("if you capture
///   batchsize 768, it has the same cost of capturing 760, 752, ... together",
///   youkaichao in vllm-project/vllm#7894); each graph adds its own fixed part.
pub fn graph_model(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    d: &ServingDefaults,
    tp: u64,
    pp: u64,
    tokens: u64,
    seqs: u64,
) -> Result<Option<GraphModel>, CoreError> {
    if d.graphs == GraphCapture::None || setup.enforce_eager {
        return Ok(None);
    }
    let of = |sizes: GraphSizes| -> Result<GraphModel, CoreError> {
        let (piecewise_sizes, full_graphs, largest) = capture_sizes(sizes, tokens, seqs);
        let layers = div_ceil(spec.num_layers, pp.max(1));
        let bytes_per_token = forward_bytes_per_token(spec, setup, tp)?;
        let graphs = product(
            "CUDA graphs",
            &[crate::units::add("CUDA graphs", piecewise_sizes, full_graphs)?, layers, GRAPH_BYTES_PER_LAYER_GRAPH],
        )?;
        let activations = product("CUDA graph activations", &[largest, bytes_per_token])?;
        let bytes = crate::units::add("CUDA graph pool", graphs, activations)?;
        Ok(GraphModel { sizes, piecewise_sizes, full_graphs, largest, layers, bytes_per_token, bytes })
    };
    Ok(match d.graph_sizes {
        GraphSizes::NotModelled => None,
        GraphSizes::V1LargerOf => {
            let (a, b) = (of(GraphSizes::V1Piecewise512)?, of(GraphSizes::V1FullAndPiecewise)?);
            Some(if a.bytes >= b.bytes { a } else { b })
        }
        s => Some(of(s)?),
    })
}

/// The explain terms of a modelled graph pool.
fn graph_terms(e: Explanation, m: &GraphModel) -> Explanation {
    let sizes = match m.sizes {
        GraphSizes::V0Full => "V0: [1, 2, 4] + 8·i up to max_num_seqs (≤ 256), FULL graphs (vllm/worker/model_runner.py)",
        GraphSizes::V1Piecewise512 => "V1 0.8 – 0.10: [1, 2, 4] + range(8, 513, 8) ≤ max_num_batched_tokens, PIECEWISE",
        _ => "V1 0.11+: [1, 2, 4] + range(8, 256, 8) + range(256, max + 1, 16), max = min(2 × max_num_seqs, 512, max_num_batched_tokens), PIECEWISE + FULL decode up to max_num_seqs (vllm/config/vllm.py _set_cudagraph_sizes)",
    };
    e.term("capture sizes", sizes)
        .term("PIECEWISE sizes, FULL graphs", format!("{}, {}", m.piecewise_sizes, m.full_graphs))
        .term("largest captured size (tokens)", m.largest)
        .term("layers on this GPU", m.layers)
        .term("bytes per layer-graph (the bound of the published capture figures)", GRAPH_BYTES_PER_LAYER_GRAPH)
        .term("bytes per token ((2·hidden + MLP columns) × act bytes)", m.bytes_per_token)
}

/// The CUDA-graph pool of this start-up: the figure given (`--cuda-graph-mib`),
/// else the modelled pool ([`graph_model`]); `None` without graphs or a model.
fn graph_bytes(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    d: &ServingDefaults,
    tp: u64,
    pp: u64,
    tokens: u64,
    seqs: u64,
) -> Result<Option<u64>, CoreError> {
    if d.graphs == GraphCapture::None || setup.enforce_eager {
        return Ok(None);
    }
    match setup.cuda_graph_bytes {
        Some(g) => Ok(Some(g)),
        None => Ok(graph_model(spec, setup, d, tp, pp, tokens, seqs)?.map(|m| m.bytes)),
    }
}

/// (inside the budget, on top of it): the CUDA-graph pool a release takes off
/// its KV budget (vLLM 0.21+, [`GraphCapture::InsideBudget`]) and the one it
/// captures after sizing the pool, on top of `gpu_memory_utilization ×
/// capacity` ([`GraphCapture::AfterPool`]); each the figure given
/// (`--cuda-graph-mib`) or the modelled pool ([`graph_model`]), 0 otherwise.
pub fn graph_split_bytes(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    d: &ServingDefaults,
    tp: u64,
    pp: u64,
    tokens: u64,
    seqs: u64,
) -> Result<(u64, u64), CoreError> {
    let g = graph_bytes(spec, setup, d, tp, pp, tokens, seqs)?.unwrap_or(0);
    Ok(match d.graphs {
        GraphCapture::InsideBudget => (g, 0),
        GraphCapture::AfterPool => (0, g),
        GraphCapture::None => (0, 0),
    })
}

/// The CUDA-graph pool inside the engine's budget, for the ledger (vLLM
/// 0.21+): the figure given, else the modelled pool; `None` when there are
/// no graphs or when they come on top of the budget (a release that captures
/// after sizing the pool: the capacity checks them against what the fraction
/// leaves, and its note says so, [`graph_note`]).
pub fn graph_pool_bytes(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    d: &ServingDefaults,
    tp: u64,
    pp: u64,
) -> Result<Option<u64>, CoreError> {
    if d.graphs != GraphCapture::InsideBudget {
        return Ok(None);
    }
    let (tokens, seqs) = profile_shape(setup, d);
    graph_bytes(spec, setup, d, tp, pp, tokens, seqs)
}

/// Where the release's CUDA graphs live, in a sentence for the explain
/// notes: on top of `util × capacity` (with the room left for them, and
/// whether the figure given or modelled fits it), inside it, or none.
pub fn graph_note(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    par: &Parallelism,
    d: &ServingDefaults,
    s: &ServingSetup,
) -> Result<String, CoreError> {
    let b = crate::units::fmt_bytes;
    let model =
        graph_model(spec, setup, d, par.attn_tp(), par.pp, s.max_num_batched_tokens, s.max_num_seqs)?.map(|m| m.bytes);
    let (gpu_util, cuda_capacity_bytes) = (s.gpu_util, s.cuda_capacity_bytes);
    if setup.enforce_eager && d.graphs != GraphCapture::None {
        return Ok("--enforce-eager: the engine captures no CUDA graphs, so there is no graph pool".to_string());
    }
    Ok(match (d.graphs, setup.cuda_graph_bytes, model) {
        (GraphCapture::AfterPool, given, model) => {
            let left = cuda_capacity_bytes.saturating_sub((cuda_capacity_bytes as f64 * gpu_util).floor() as u64);
            let head = format!(
                "this release captures its CUDA graphs after sizing the KV pool, so their pool comes on top of util × CUDA capacity, in the {} left",
                b(left)
            );
            match (given, model) {
                (Some(g), _) if g > left => format!("{head}: the {} given (--cuda-graph-mib) does not fit there", b(g)),
                (Some(g), _) => format!("{head}: the {} given (--cuda-graph-mib) fits there", b(g)),
                (None, Some(m)) if m > left => format!(
                    "{head}: the {} modelled from the captured sizes does not fit there (vLLM logs their size: \"Graph capturing finished in … took X GiB\"; --cuda-graph-mib takes it)",
                    b(m)
                ),
                (None, Some(m)) => format!(
                    "{head}: the {} modelled from the captured sizes fits there (vLLM logs their size: \"Graph capturing finished in … took X GiB\"; --cuda-graph-mib takes it)",
                    b(m)
                ),
                (None, None) => format!(
                    "{head} (vLLM logs their size: \"Graph capturing finished in … took X GiB\"; give it as --cuda-graph-mib to check it)"
                ),
            }
        }
        (GraphCapture::InsideBudget, Some(g), _) => format!(
            "this release estimates its CUDA graphs during the start-up profile and takes them off the KV pool (vLLM PR #38284, default since 0.21): the {} given (--cuda-graph-mib)",
            b(g)
        ),
        (GraphCapture::InsideBudget, None, m) => format!(
            "this release estimates its CUDA graphs during the start-up profile and takes them off the KV pool (vLLM PR #38284, default since 0.21): the {} modelled from the captured sizes (its log gives the estimate, \"Estimated CUDA graph memory: X GiB\", which --cuda-graph-mib takes)",
            b(m.unwrap_or(0))
        ),
        (GraphCapture::None, _, _) => "this release captures no CUDA graphs".to_string(),
    })
}

/// The NCCL of a vLLM release (its torch's pin) and whether vLLM turns cuMem
/// off: vLLM ships `NCCL_CUMEM_ENABLE=0` from PR #5091 (merged 2024-05-28,
/// first in 0.5.0: "NCCL 2.19 will turn on virtual memory by default, which
/// costs memory during cudagraph capture") until PR #24141 (merged
/// 2025-09-03: "NCCL 2.22.3 resolved the memory overhead issue"; 0.10.2 is
/// counted with it, the larger side). Before 0.5 vLLM used NCCL 2.18 (its
/// `vllm-nccl` package), where cuMem is off by default. Without cuMem NCCL
/// builds no NVLS and connects every algorithm at init.
pub fn vllm_stack(version: crate::workload::EngineVersion) -> crate::nccl::NcclStack {
    use crate::workload::EngineVersion as V;
    let (pinned_by, release, cumem) = if version < V::new(0, 5) {
        ("vLLM 0.2–0.4 (torch 2.1, vllm-nccl 2.18.1)", crate::nccl::NcclRelease::new(2, 18, 1), false)
    } else if version < V::patch(0, 6, 4) {
        ("vLLM 0.5–0.6.3 (torch 2.3/2.4)", crate::nccl::NcclRelease::new(2, 20, 5), false)
    } else if version < V::new(0, 9) {
        ("vLLM 0.6.4–0.8 (torch 2.5/2.6)", crate::nccl::NcclRelease::new(2, 21, 5), false)
    } else if version < V::patch(0, 10, 2) {
        ("vLLM 0.9–0.10.1 (torch 2.7)", crate::nccl::NcclRelease::new(2, 26, 2), false)
    } else if version < V::new(0, 12) {
        ("vLLM 0.10.2–0.11 (torch 2.8)", crate::nccl::NcclRelease::new(2, 27, 3), true)
    } else {
        ("vLLM 0.12+ (torch 2.9)", crate::nccl::NcclRelease::new(2, 27, 5), true)
    };
    crate::nccl::NcclStack { pinned_by, release, cumem, nvls: true }
}

/// The stack of an inference setup: its serving engine's release, else torch's.
pub fn nccl_stack_of(setup: &InferenceSetup) -> crate::nccl::NcclStack {
    use crate::workload::{EngineKind, ServingEngine};
    match (setup.engine.kind(), setup.serving_facts()) {
        (EngineKind::Serving(ServingEngine::Vllm), Some(f)) => vllm_stack(setup.engine_version.unwrap_or(f.version)),
        (EngineKind::Serving(ServingEngine::Sglang), _) => crate::nccl::SGLANG_STACK,
        _ => crate::nccl::TORCH_DEFAULT,
    }
}

/// vLLM's custom all-reduce buffers per GPU at TP > 1: the 8 MiB IPC data
/// buffer with its signal/metadata region and the 8 MiB rank-data buffer
/// (`CustomAllreduce(max_size=8192 * 1024)`).
pub const CUSTOM_ALLREDUCE_BYTES: u64 = 2 * 8 * crate::units::MIB + crate::units::MIB;

/// The custom all-reduce buffers a vLLM worker allocates at TP `tp`
/// ([`CUSTOM_ALLREDUCE_BYTES`]), 0 where vLLM disables it: one GPU, a TP
/// group size outside `CustomAllreduce._SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]`
/// ("Custom allreduce is disabled due to an unsupported world size"), or more
/// than two GPUs linked by PCIe only (`if world_size > 2 and not
/// fully_connected`: "Custom allreduce is disabled because it's not supported
/// on more than two PCIe-only GPUs"), both in `CustomAllreduce.__init__`,
/// vllm/distributed/device_communicators/custom_all_reduce.py. A link that is
/// not known keeps the buffers (17 MiB over, never under).
pub fn custom_allreduce_bytes(tp: u64, link: Option<crate::nccl::Link>) -> u64 {
    let pcie_only = link == Some(crate::nccl::Link::Pcie);
    if matches!(tp, 2 | 4 | 6 | 8) && !(tp > 2 && pcie_only) {
        CUSTOM_ALLREDUCE_BYTES
    } else {
        0
    }
}

/// The NCCL communicators a vLLM worker holds at TP > 1: the world process
/// group (its warm-up all-reduce creates it), the TP group's device group, and
/// the TP group's own PyNccl communicator (`GroupCoordinator` with `use_pynccl`),
/// all with the NCCL of `stack`.
pub fn serving_communicators(tp: u64, stack: crate::nccl::NcclStack) -> Vec<crate::runtime::Communicator> {
    if tp < 2 {
        return Vec::new();
    }
    ["world group", "tensor-parallel group", "PyNccl (tensor parallel)"]
        .into_iter()
        .map(|role| crate::runtime::Communicator { role, ranks: tp, stack })
        .collect()
}

/// The NCCL release and link a serving start-up assumes, with one
/// communicator's bytes, for `--explain`.
fn nccl_label(setup: &InferenceSetup, rt: &RuntimeSetup, tp: u64) -> String {
    let stack = nccl_stack_of(setup);
    let b = crate::nccl::communicator(tp, &rt.nccl, &stack);
    format!(
        "NCCL {} ({}), {}: {} channels × {} B + NVLS {} B + residual {} B = {} B",
        stack.release,
        stack.pinned_by,
        rt.nccl.label(),
        b.channels,
        b.per_channel,
        b.nvls,
        b.residual,
        b.total
    )
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
    // attention, dense layers and the KV cache at TP `attn_tp` (data-parallel
    // attention, `estimate_inference`); the routed experts over `ep`
    let (tp, pp, attn_tp) = (par.tp, par.pp, par.attn_tp());
    let mut scratch = Ledger::new(Phase::Prefill, par.gpus);
    let experts = spec.moe.as_ref().map(|m| m.num_experts).unwrap_or(0);
    let (dtype, quant) = (setup.weight_dtype, setup.quant.as_ref());
    let w = crate::weights::push_weights_ep(
        &mut scratch,
        &layout,
        spec.num_layers,
        dtype,
        quant,
        setup.quantize_lm_head,
        attn_tp,
        pp,
        par.ep,
        experts,
    )?;
    let pad = push_mxfp4_moe_padding(&mut scratch, spec, &layout, setup, tp, pp)?;
    let weights = crate::units::add("weights", w.per_gpu, pad)?;
    let d = setup
        .serving()
        .ok_or_else(|| CoreError::invalid("engine", "the serving profile needs --engine vllm or sglang"))?;
    let ProfilingRun { forward, sampler, .. } =
        profiling_run(spec, setup, &d, attn_tp, s.max_num_batched_tokens, s.max_num_seqs)?;
    let activation = forward.max(sampler);
    let comms = serving_communicators(tp, nccl_stack_of(setup));
    let mut nccl = 0u64;
    for c in &comms {
        nccl = crate::units::add("NCCL communicators", nccl, rt.communicator_bytes(c).total)?;
    }
    let custom_ar = custom_allreduce_bytes(tp, rt.nccl.link);
    let runtime_base = crate::units::add("non-torch", rt.cuda_context_bytes, rt.workspace_bytes)?;
    let base = d.non_torch_tp1.unwrap_or(runtime_base);
    let non_torch = crate::units::sum("non-torch", &[base, nccl, custom_ar])?;
    let budget = (s.cuda_capacity_bytes as f64 * s.gpu_util).floor() as u64;
    // before vLLM PR #2031 the budget took the allocator's peak alone
    let non_torch_in_budget = if d.budget_counts_non_torch { non_torch } else { 0 };
    let (graphs, graphs_outside) =
        graph_split_bytes(spec, setup, &d, attn_tp, pp, s.max_num_batched_tokens, s.max_num_seqs)?;
    let used = crate::units::sum("serving start-up", &[weights, activation, non_torch_in_budget, graphs])?;
    let kv_pool = budget.saturating_sub(used);
    // a block as the KV entries count it (full-attention layers' block, or the
    // sliding layers' when every layer slides)
    let block_bytes = push_kv(&mut scratch, spec, setup, attn_tp, pp)?.block_bytes;
    let kv_blocks = kv_pool.checked_div(block_bytes).unwrap_or(0);
    let explain = Explanation::new(
        "kv pool = util × CUDA capacity − (weights + max(forward, sampler) + non-torch); blocks = kv pool ÷ block bytes",
    )
    .term("util", s.gpu_util)
    .term("CUDA capacity", s.cuda_capacity_bytes)
    .term("budget", budget)
    .term("weights", weights)
    .term("profiling forward (max_num_batched_tokens × (2·hidden + MLP) × act bytes)", forward)
    .term("engine release assumed", release_label(setup))
    .term("batch defaults assumed", batch_basis(setup, &d))
    .term("max_num_batched_tokens, max_num_seqs", format!("{}, {}", s.max_num_batched_tokens, s.max_num_seqs))
    .term("sampler (max_num_seqs × vocab × sampler bytes + tokens × hidden × act bytes)", sampler)
    .term("sampler bytes per row per vocabulary entry", d.sampler_bytes_per_entry)
    .term("non-torch at one GPU (engine's start-up figure, or context + workspaces)", base)
    .term("NCCL communicators (world, TP group, PyNccl) + custom all-reduce", nccl + custom_ar)
    .term("NCCL per communicator (release, link)", nccl_label(setup, rt, tp))
    .term("non-torch memory taken off the budget (0 before vLLM PR #2031, vllm@0.2)", non_torch_in_budget)
    .term("CUDA graphs taken off the budget", graphs)
    .term("kv pool", kv_pool)
    .term("block bytes", block_bytes)
    .note(format!(
        "vLLM sizes the KV pool once at start-up from a profiling run of max_num_batched_tokens tokens over max_num_seqs sequences; {}",
        graph_note(spec, setup, par, &d, s)?
    ));
    Ok(ServingProfile {
        cuda_graph_bytes: graphs,
        graphs_outside_bytes: graphs_outside,
        left_outside_bytes: s.cuda_capacity_bytes.saturating_sub(budget),
        budget_bytes: budget,
        weights_bytes: weights,
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

/// vLLM's MXFP4 MoE kernels read padded expert matrices
/// (`Mxfp4MoEMethod.create_weights`, vllm/model_executor/layers/quantization/mxfp4.py):
/// the Marlin backend, which vLLM picks on A100/L40/RTX cards and on H100
/// without `triton_kernels` (vLLM 0.10.1's "Using Marlin backend" in issue
/// #23278), needs n % 256 and k % 128, so it pads the hidden size to 256 and
/// each TP rank's intermediate size to 128. Blackwell's FlashInfer path pads
/// the intermediate size to 256 (more); Hopper's Triton path pads it to 64.
pub const MXFP4_MARLIN_HIDDEN_ALIGN: u64 = 256;
/// See [`MXFP4_MARLIN_HIDDEN_ALIGN`].
pub const MXFP4_MARLIN_INTERMEDIATE_ALIGN: u64 = 128;

fn round_up(x: u64, to: u64) -> Result<u64, CoreError> {
    product("padded width", &[x.div_ceil(to), to])
}

/// The bytes per GPU vLLM's MXFP4 MoE layout adds to the expert weights
/// (Marlin's padding, [`MXFP4_MARLIN_HIDDEN_ALIGN`]), pushed as a weights entry
/// when there are any; 0 for other engines and formats.
pub(crate) fn push_mxfp4_moe_padding(
    ledger: &mut Ledger,
    spec: &ModelSpec,
    layout: &ParamLayout,
    setup: &InferenceSetup,
    tp: u64,
    pp: u64,
) -> Result<u64, CoreError> {
    let Some(q) = setup.quant.as_ref().filter(|q| q.method == crate::quant::QuantMethod::Mxfp4) else { return Ok(0) };
    let Some(moe) = spec.moe.as_ref() else { return Ok(0) };
    if setup.engine != crate::workload::Engine::Vllm {
        return Ok(0);
    }
    let h = spec.hidden_size;
    let width = moe.expert_intermediate;
    let hidden = round_up(h, MXFP4_MARLIN_HIDDEN_ALIGN)?;
    // each rank pads its own slice: the whole model holds tp padded slices
    let inter = product("padded intermediate", &[round_up(div_ceil(width, tp), MXFP4_MARLIN_INTERMEDIATE_ALIGN)?, tp])?;
    let mut extra = 0u64;
    for g in &layout.groups {
        if g.role() != Some(crate::params::LinearRole::Expert) || !crate::weights::quantized(g) || width == 0 {
            continue;
        }
        let mut padded = g.clone();
        if g.d_in == h && g.d_out % width == 0 {
            // gate/up (fused: 2 × intermediate): k = hidden, n = intermediate
            padded.d_in = hidden;
            padded.d_out = product("padded gate/up", &[g.d_out / width, inter])?;
        } else if g.d_out == h && g.d_in == width {
            // down: k = intermediate, n = hidden
            padded.d_in = inter;
            padded.d_out = hidden;
        } else {
            continue;
        }
        let before = crate::weights::shard(
            g,
            crate::weights::group_bytes(g, setup.weight_dtype, Some(q))?,
            spec.num_layers,
            tp,
            pp,
        )?;
        let after = crate::weights::shard(
            &padded,
            crate::weights::group_bytes(&padded, setup.weight_dtype, Some(q))?,
            spec.num_layers,
            tp,
            pp,
        )?;
        // padding only grows a matrix
        let grown =
            after.checked_sub(before).ok_or_else(|| CoreError::invalid("quant", "mxfp4 padding shrank a matrix"))?;
        extra = crate::units::add("mxfp4 padding", extra, grown)?;
    }
    if extra > 0 {
        ledger.push(
            Category::Weights,
            "vLLM MXFP4 MoE padding (Marlin layout)",
            extra,
            Explanation::new("expert matrices with hidden rounded up to 256 and each TP rank's intermediate to 128, less the unpadded experts")
                .term("hidden size → padded", format!("{h} → {hidden}"))
                .term("intermediate per TP rank → padded", format!("{} → {}", div_ceil(width, tp), inter / tp))
                .term("bytes per GPU", extra)
                .note("vllm/model_executor/layers/quantization/mxfp4.py, Mxfp4MoEMethod.create_weights (Marlin: n % 256, k % 128); vLLM 0.10.1 logs 'Model loading took 65.9651 GiB' for gpt-oss-120b on one H100 with Marlin (vllm-project/vllm#23278); Blackwell's FlashInfer path pads the intermediate to 256, about 4% more expert bytes than counted here"),
        );
    }
    Ok(extra)
}

/// What a serving engine needs on one GPU for this job, and the card that
/// gives it that much. The engine takes `gpu_util` of the CUDA capacity C
/// (vLLM's `gpu_memory_utilization`, `determine_available_memory` in
/// `vllm/v1/worker/gpu_worker.py`) and fills what its start-up leaves with KV
/// blocks, so the job fits when `floor(C × gpu_util) ≥ need`, need being the
/// start-up ([`serving_profile`]) plus the blocks of `--concurrency` sequences.
/// This is the rule by which `infer::capacity`'s pool holds the
/// sequences; `estimate` and `plan` both decide a serving fit by it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineNeed {
    pub gpu_util: f64,
    /// weights + profiling peak + non-torch memory + KV blocks of the sequences
    pub need_bytes: u64,
    /// the smallest CUDA capacity C with `floor(C × gpu_util) ≥ need_bytes`
    pub card_bytes: u64,
}

/// The [`EngineNeed`] of a serving job at `gpu_util`.
pub fn engine_need(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
    d: &ServingDefaults,
    gpu_util: f64,
) -> Result<EngineNeed, CoreError> {
    let s = serving_setup(setup, d, gpu_util, 0);
    let p = serving_profile(spec, setup, par, rt, &s)?;
    // the KV detail the estimate and its capacity count by (`estimate_inference` returns the same)
    // (with data-parallel attention: the group's share of the sequences at its TP)
    let detail = push_kv(&mut Ledger::new(Phase::Prefill, par.gpus), spec, setup, par.attn_tp(), par.pp)?;
    let seqs = setup.concurrency.div_ceil(par.dp_attention.max(1));
    let kv = product("KV blocks of the sequences", &[seqs, detail.blocks_per_sequence, detail.block_bytes])?;
    let need_bytes =
        crate::units::sum("serving need", &[p.weights_bytes, p.activation_peak_bytes, p.non_torch_bytes, kv])?;
    // before vLLM PR #2031 the budget holds the allocator's part only, and the
    // memory outside it comes on top: the card must hold both
    let (in_budget, card_floor) = if d.budget_counts_non_torch {
        (need_bytes, 0)
    } else {
        (need_bytes.saturating_sub(p.non_torch_bytes), need_bytes)
    };
    // vLLM 0.21+ takes its CUDA graphs off the budget too, the figure given or
    // the modelled pool (`graph_split_bytes`); up to 0.20 they are captured
    // after the pool and must fit in what the fraction leaves:
    // C − floor(C × util) ≥ graphs
    let in_budget = crate::units::add("serving need", in_budget, p.cuda_graph_bytes)?;
    let util = gpu_util;
    let card_floor = card_floor.max(card_leaving(p.graphs_outside_bytes, gpu_util)?);
    Ok(EngineNeed { gpu_util, need_bytes, card_bytes: card_for(in_budget, util)?.max(card_floor) })
}

/// The smallest capacity `c` with `c − floor(c × util) ≥ left` (0 for nothing
/// to leave), `util` in (0, 1].
fn card_leaving(left: u64, util: f64) -> Result<u64, CoreError> {
    if left == 0 {
        return Ok(0);
    }
    if util >= 1.0 {
        return Err(CoreError::invalid(
            "gpu-util",
            "1.0 leaves nothing for the CUDA graphs this release captures after sizing its pool (--cuda-graph-mib)",
        ));
    }
    let leaves = |c: u64| c - (c as f64 * util).floor() as u64 >= left;
    let mut c = (left as f64 / (1.0 - util)).floor() as u64;
    while !leaves(c) {
        c = c.checked_add(1).ok_or_else(|| CoreError::invalid("gpu-util", "the card for this need overflows u64"))?;
    }
    while c > 0 && leaves(c - 1) {
        c -= 1;
    }
    Ok(c)
}

/// The [`EngineNeed`] of an inference job on a serving engine that takes a
/// fraction of the card: `gpu_util` given, else the engine's default
/// ([`crate::workload::Engine::gpu_util`]), else the release's rule from the
/// card (SGLang's `mem_fraction_static`: the smallest card whose own fraction
/// holds the need, [`card_for_rule`]); `None` for other engines.
pub fn engine_need_of(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
    gpu_util: Option<f64>,
) -> Result<Option<EngineNeed>, CoreError> {
    let Some(d) = setup.serving() else { return Ok(None) };
    // the given fraction, else the release's own default (vLLM 0.92 from 0.21, 0.9 before)
    if let Some(u) = gpu_util.or(d.default_gpu_util) {
        return engine_need_by_card_class(spec, setup, par, rt, &d, u).map(Some);
    }
    if d.share_rule.is_none() {
        return Ok(None);
    }
    // the need does not depend on the fraction; the card does
    let n = engine_need(spec, setup, par, rt, &d, 1.0)?;
    let share = |cuda: u64| {
        let total = cuda.saturating_add(crate::runtime::DRIVER_RESERVED);
        setup.gpu_util_on(None, total, par).unwrap_or(1.0)
    };
    let card_bytes = card_for_rule(n.need_bytes, share)?;
    Ok(Some(EngineNeed { gpu_util: share(card_bytes), need_bytes: n.need_bytes, card_bytes }))
}

/// The [`EngineNeed`] at `gpu_util` when the release's batch defaults depend
/// on the card ([`crate::workload::CardRule`]) and the setup names none (`plan`,
/// which sizes one need for every card): the need at the smaller defaults when
/// the card that holds it is under 70 GiB — such a card takes them (vLLM
/// `get_batch_defaults`) — else the need at the larger defaults (a larger
/// card may take them; an A100 80GB, which does not, is then over-stated).
/// With the card known, or one set of defaults, the plain [`engine_need`].
fn engine_need_by_card_class(
    spec: &ModelSpec,
    setup: &InferenceSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
    d: &ServingDefaults,
    gpu_util: f64,
) -> Result<EngineNeed, CoreError> {
    let large = engine_need(spec, setup, par, rt, d, gpu_util)?;
    if setup.serving_card.is_some() || d.small_card_batch.is_none() {
        return Ok(large);
    }
    // a card the rule does not mark large: unnamed, under 70 GiB
    let small_card = crate::workload::ServingCard { name: String::new(), cuda_total_bytes: 0 };
    let small_setup = InferenceSetup { serving_card: Some(small_card), ..setup.clone() };
    let small = engine_need(spec, &small_setup, par, rt, d, gpu_util)?;
    Ok(if small.card_bytes < 70 * crate::units::GIB { small } else { large })
}

/// The smallest CUDA capacity `c` (searched upwards from the need) whose own
/// fraction `share(c)` gives `floor(c × share(c)) ≥ need`: a fixed point of
/// [`card_for`], then MiB steps while the card's fraction still falls short.
fn card_for_rule(need: u64, share: impl Fn(u64) -> f64) -> Result<u64, CoreError> {
    let holds = |c: u64| (c as f64 * share(c)).floor() as u64 >= need;
    let mut c = need;
    for _ in 0..64 {
        let next = card_for(need, share(c))?;
        if next == c {
            break;
        }
        c = next;
    }
    let mut steps = 0u32;
    while !holds(c) {
        c = c
            .checked_add(crate::units::MIB)
            .filter(|_| steps < 1 << 22)
            .ok_or_else(|| CoreError::invalid("gpu-util", "no card holds this need at the engine's fraction"))?;
        steps += 1;
    }
    Ok(c)
}

/// The smallest capacity `c` with `floor(c × util) ≥ need` (the budget
/// [`serving_profile`] computes), `util` in (0, 1].
fn card_for(need: u64, util: f64) -> Result<u64, CoreError> {
    if !(util > 0.0 && util <= 1.0) {
        return Err(CoreError::invalid("gpu-util", format!("{util} is not in (0, 1]")));
    }
    let budget = |c: u64| (c as f64 * util).floor() as u64;
    let mut c = (need as f64 / util).ceil() as u64;
    while budget(c) < need {
        c = c.checked_add(1).ok_or_else(|| CoreError::invalid("gpu-util", "the card for this need overflows u64"))?;
    }
    while c > 0 && budget(c - 1) >= need {
        c -= 1;
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_for_a_need_is_the_smallest_whose_budget_holds_it() {
        for (need, util) in [(35_600_000_000u64, 0.9), (1, 0.9), (0, 0.5), (40_959_974_441, 0.87), (7, 1.0)] {
            let c = card_for(need, util).unwrap();
            assert!((c as f64 * util).floor() as u64 >= need, "{need} {util}");
            assert!(c == 0 || (((c - 1) as f64 * util).floor() as u64) < need, "{need} {util}");
        }
        assert!(card_for(1, 0.0).is_err() && card_for(1, 1.5).is_err());
    }

    #[test]
    fn custom_all_reduce_only_at_its_supported_world_sizes() {
        // vllm/distributed/device_communicators/custom_all_reduce.py:
        // `_SUPPORTED_WORLD_SIZES = [2, 4, 6, 8]`; 8 MiB buffer + (meta + 8 MiB) + 8 MiB rank data ≈ 17 MiB
        let sizes: Vec<u64> = (1..=16).filter(|&tp| custom_allreduce_bytes(tp, None) > 0).collect();
        assert_eq!(sizes, [2, 4, 6, 8]);
        assert_eq!(custom_allreduce_bytes(4, None), 17 * crate::units::MIB);
    }

    #[test]
    fn custom_all_reduce_is_off_on_more_than_two_pcie_only_gpus() {
        // `CustomAllreduce.__init__`: `if world_size > 2 and not fully_connected`
        // disables it; two PCIe GPUs keep it, NVLink keeps it at every supported size
        use crate::nccl::Link;
        let pcie: Vec<u64> = (1..=8).filter(|&tp| custom_allreduce_bytes(tp, Some(Link::Pcie)) > 0).collect();
        assert_eq!(pcie, [2]);
        let nvlink: Vec<u64> = (1..=8).filter(|&tp| custom_allreduce_bytes(tp, Some(Link::Nvlink)) > 0).collect();
        assert_eq!(nvlink, [2, 4, 6, 8]);
    }

    #[test]
    fn vllm_turns_cumem_off_between_pr_5091_and_pr_24141() {
        use crate::workload::EngineVersion as V;
        assert!(!vllm_stack(V::new(0, 4)).cumem);
        assert!(!vllm_stack(V::new(0, 5)).cumem);
        assert!(!vllm_stack(V::patch(0, 10, 1)).cumem);
        assert!(vllm_stack(V::patch(0, 10, 2)).cumem);
        assert_eq!(vllm_stack(V::new(0, 8)).release, crate::nccl::NcclRelease::new(2, 21, 5));
    }
}
