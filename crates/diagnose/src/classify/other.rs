//! Verdicts for the OOMs of other frameworks (JAX/XLA, TensorFlow, vLLM,
//! Apple MPS) and for messages without figures (raw CUDA errors, legacy
//! THC, TensorFlow's StreamExecutor, allocator retries): one function per
//! message kind. A message without free/total figures is `unknown`, with
//! the next step that would tell the cause; an nvidia-smi table pasted
//! beside it is named as evidence.

use super::{
    b, fig, fix, verdict, Cause, FixCost, OomClass, RunnerUp, Verdict, CONTEXT_ALLOWANCE, DRIVER_PAGE,
    EFFECTIVELY_FULL_SHARE, INFERRED_OTHER_MIN_SHARE, OTHER_PROCESS_MIN, XLA_SMALL_PROGRAM,
};
use crate::nvidia_smi::NvidiaSmi;
use crate::oom::Context;
use crate::other_frameworks::{BfcStats, OtherOom, VllmProfile, XlaBuffer};
use crate::size::Size;
use vramfit_core::units::GIB;

fn runner(class: OomClass, what: &str, bytes: Option<u64>, total: Option<u64>, why: &str) -> Option<RunnerUp> {
    let c = Cause::new(class, what, bytes, total);
    Some(RunnerUp { class, what: c.what, bytes: c.bytes, share: c.share, why: why.to_string() })
}

/// Verdict for a non-PyTorch OOM.
pub(crate) fn classify_other(o: &OtherOom, ctx: &Context) -> Verdict {
    let smi = ctx.nvidia_smi.as_ref();
    let mut v = match o {
        OtherOom::Xla { requested, total_allocation, fragmentation, peak_buffers, bfc, .. } => {
            match bfc.as_ref().and_then(|s| bfc_verdict(requested, s, "XLA")) {
                Some(v) => v,
                None => xla(requested, total_allocation, fragmentation, peak_buffers),
            }
        }
        OtherOom::TensorFlow { shape, dtype, bytes, gpu, node, bfc, .. } => {
            let req = bytes.map(Size::exact);
            match (bfc, &req) {
                (Some(s), Some(r)) => {
                    bfc_verdict(r, s, "TensorFlow").unwrap_or_else(|| tensorflow(shape, dtype, bytes, gpu, node))
                }
                _ => tensorflow(shape, dtype, bytes, gpu, node),
            }
        }
        OtherOom::CudaDriver { text } => cuda_driver(text, ctx),
        OtherOom::TorchAsync { device, allocated, requested, total, free, limit, truncated } => {
            torch_async(*device, allocated, requested, total, free, limit, *truncated)
        }
        OtherOom::VllmStartupFree { device, free, total, utilization, requested, .. } => {
            vllm_startup(device, free, total, *utilization, requested)
        }
        OtherOom::Bfc { allocator, requested, not_a_failure, stats } => match requested {
            Some(r) => bfc(allocator, r, *not_a_failure, stats),
            None => bfc_summary(stats),
        },
        OtherOom::Ggml(g) => super::ggml::classify(g, smi),
        OtherOom::Cut { form, text, missing } => cut(form, text, missing),
        OtherOom::VllmNoCacheBlocks { profile } => vllm_no_cache_blocks(profile),
        OtherOom::VllmMaxLenTokens { max_model_len, kv_cache_tokens, .. } => {
            vllm_max_len_tokens(max_model_len, kv_cache_tokens)
        }
        OtherOom::VllmMaxLenMemory { max_model_len, needed, available, estimated_max_len, .. } => {
            vllm_max_len_memory(max_model_len, needed, available, estimated_max_len)
        }
        OtherOom::Mps { allocated, other, max_allowed, requested, .. } => mps(allocated, other, max_allowed, requested),
        OtherOom::CudaError { text } => cuda_error(text),
        OtherOom::LegacyThc { text } => legacy_thc(text),
        OtherOom::TensorFlowDriver { requested } => tensorflow_driver(requested),
        OtherOom::AllocatorRetries { retries } => allocator_retries(*retries),
    };
    if let Some(smi) = smi {
        v.reasoning.extend(nvidia_smi_evidence(smi));
    }
    if v.class != OomClass::Unknown && v.decided_by.is_empty() {
        v.decided_by = v.figures.iter().map(|f| f.name.clone()).collect();
    }
    v
}

/// What a pasted nvidia-smi table shows, for messages without figures:
/// the cards in use and the processes holding them.
fn nvidia_smi_evidence(smi: &NvidiaSmi) -> Vec<String> {
    let mut out = Vec::new();
    let busy: Vec<String> = smi
        .gpus
        .iter()
        .filter(|g| g.used as f64 >= 0.5 * g.total as f64)
        .map(|g| {
            format!(
                "GPU {} {} of {} ({:.0}%)",
                g.index,
                b(g.used),
                b(g.total),
                g.used as f64 * 100.0 / g.total.max(1) as f64
            )
        })
        .collect();
    let idle: Vec<String> =
        smi.gpus.iter().filter(|g| (g.used as f64) < 0.05 * g.total as f64).map(|g| g.index.to_string()).collect();
    if !busy.is_empty() {
        out.push(format!(
            "The nvidia-smi table in the log (line {}) shows {} in use{}: another job on that card leaves this one no room; run on an idle card (CUDA_VISIBLE_DEVICES) or stop the other job.",
            smi.line,
            busy.join(", "),
            if idle.is_empty() { String::new() } else { format!(" while GPU {} idle", idle.join(", ")) }
        ));
    }
    let procs: Vec<String> =
        smi.processes.iter().map(|p| format!("GPU {} PID {} {} {}", p.gpu, p.pid, p.name, b(p.used))).collect();
    if !procs.is_empty() {
        out.push(format!("Processes it lists: {}.", procs.join(", ")));
    }
    out
}

/// JAX/XLA: fragmentation when the program's own fragmentation is a
/// quarter of it; a small program cannot fill a GPU (preallocation).
fn xla(
    requested: &Size,
    total_allocation: &Option<Size>,
    fragmentation: &Option<Size>,
    peak_buffers: &[XlaBuffer],
) -> Verdict {
    let mut reasoning = vec![format!("XLA could not allocate {} bytes.", requested.bytes)];
    let mut figures = vec![fig("requested", requested.bytes)];
    if let Some(t) = total_allocation {
        figures.push(fig("program_total", t.bytes));
        reasoning.push(format!("The compiled program needs {} in all (BufferAssignment stats).", t.text));
    }
    let frag = fragmentation.as_ref().map(|f| f.bytes).unwrap_or(0);
    if let Some(buf) = peak_buffers.first() {
        reasoning.push(format!(
            "Largest live buffer at the peak: {}{}{}.",
            buf.size.text,
            buf.shape.as_ref().map(|s| format!(" {s}")).unwrap_or_default(),
            buf.operator.as_ref().map(|s| format!(" from {s}")).unwrap_or_default()
        ));
    }
    let small = total_allocation.as_ref().is_some_and(|t| t.bytes < XLA_SMALL_PROGRAM);
    let class = if total_allocation.as_ref().is_some_and(|t| t.bytes > 0 && frag * 4 > t.bytes) {
        OomClass::Fragmentation
    } else if small {
        reasoning.push(format!(
            "A program that needs less than {} cannot fill a GPU by itself: the memory was taken before it ran, typically by JAX's default preallocation (75% of the card) in this or another process, or by another framework in the same process.",
            b(XLA_SMALL_PROGRAM)
        ));
        OomClass::Unexplained
    } else {
        OomClass::GenuineShortage
    };
    let missing = if total_allocation.is_none() {
        reasoning.push("The BufferAssignment stats that follow the message (total, parameter, temp and fragmentation) are not in the text: the program's own size, which tells memory taken before it ran from a program too large, is unknown.".to_string());
        vec![super::Missing { figure: "program_total".into(), assumed_bytes: None, matters: true, otherwise: None }]
    } else {
        Vec::new()
    };
    Verdict {
        missing,
        class,
        main_cause: Cause::new(
            class,
            if class == OomClass::Unexplained { "memory taken before the program ran" } else { "the compiled program" },
            Some(total_allocation.as_ref().map(|t| t.bytes).unwrap_or(requested.bytes)),
            None,
        ),
        contributors: Vec::new(),
        runner_up: None,
        runner_up_from_missing: false,
        decided_by: Vec::new(),

        headline: format!("XLA could not allocate {} ({} bytes)", b(requested.bytes), requested.bytes),
        figures,
        reasoning,
        gap_bytes: None,
        fixes: vec![
            fix(
                FixCost::Setting,
                "XLA_PYTHON_CLIENT_PREALLOCATE=false or XLA_PYTHON_CLIENT_MEM_FRACTION=.90",
                "JAX preallocates 75% of the card by default; other frameworks in the same process get only the rest",
            ),
            fix(
                FixCost::Code,
                "jax.checkpoint (remat) around the big blocks, or shard with pjit/shard_map",
                "the peak buffers are activations of one jitted program",
            ),
            fix(
                FixCost::Workload,
                "lower the batch / sequence of the jitted step",
                "XLA buffers scale with the traced shapes",
            ),
        ],
    }
}

/// TensorFlow BFC: only the request size is known.
fn tensorflow(
    shape: &[u64],
    dtype: &Option<String>,
    bytes: &Option<u64>,
    gpu: &Option<u32>,
    node: &Option<String>,
) -> Verdict {
    Verdict {
    class: OomClass::Unknown,
    main_cause: Cause::new(OomClass::Unknown, "the request", *bytes, None),
    contributors: Vec::new(),
    runner_up: None,
    runner_up_from_missing: false,
    decided_by: Vec::new(),
    missing: Vec::new(),
    headline: format!(
        "TensorFlow could not allocate a {} tensor{}",
        bytes.map(b).unwrap_or_else(|| "?".into()),
        gpu.map(|g| format!(" on GPU {g}")).unwrap_or_default()
    ),
    figures: bytes.iter().map(|&x| fig("requested", x)).collect(),
    reasoning: vec![format!(
        "Shape {:?} of {} = {}{}. The BFC allocator message carries no free/total figures, so only the request size is known: the cause (the job's own tensors, TensorFlow's own preallocation of the card, another process) cannot be told from it. Its Stats block (Limit/InUse/MaxInUse, printed with TF_CPP_MIN_LOG_LEVEL=0) or report_tensor_allocations_upon_oom would tell.",
        shape,
        dtype.as_deref().unwrap_or("unknown dtype"),
        bytes.map(b).unwrap_or_else(|| "unknown bytes".into()),
        node.as_ref().map(|n| format!(", made by node {n}")).unwrap_or_default()
    )],
    gap_bytes: None,
    fixes: vec![
        fix(FixCost::Setting, "tf.config.experimental.set_memory_growth(gpu, True)", "TF grabs the whole card up front otherwise; growth lets it share"),
        fix(FixCost::Workload, format!("lower the leading dimension ({}) of this tensor", shape.first().copied().unwrap_or(0)), "usually the batch"),
        fix(FixCost::Code, "mixed precision (tf.keras.mixed_precision.set_global_policy('mixed_float16'))", "halves activation bytes"),
    ],
}
}

/// vLLM: no room for a single KV block.
fn vllm_no_cache_blocks(profile: &Option<VllmProfile>) -> Verdict {
    let mut reasoning = vec!["vLLM reserves gpu_memory_utilization × total for itself; after the weights and the profiling peak nothing was left for a single KV block: the budget, not the card, ran out (the memory outside the budget was never offered).".to_string()];
    let mut figures = vec![];
    if let Some(p) = profile {
        if let (Some(t), Some(u)) = (p.total_gpu_memory, p.gpu_memory_utilization) {
            let budget = (t as f64 * u) as u64;
            figures.push(fig("budget", budget));
            reasoning.push(format!("Budget: {} × {:.2} = {}.", b(t), u, b(budget)));
        }
        if let Some(w) = p.weights {
            figures.push(fig("weights", w));
            reasoning.push(format!("Weights took {}.", b(w)));
        }
        if let Some(pk) = p.peak_torch_memory {
            figures.push(fig("peak_torch_memory", pk));
            reasoning.push(format!("Profiling peak (weights + activations of max_num_batched_tokens): {}.", b(pk)));
        }
    }
    Verdict {
        class: OomClass::Budget,
        main_cause: budget_cause(profile),
        contributors: Vec::new(),
        runner_up: None,
        runner_up_from_missing: false,
        decided_by: Vec::new(),
        missing: Vec::new(),
        headline: "vLLM: no memory left for the KV cache".to_string(),
        figures,
        reasoning,
        gap_bytes: None,
        fixes: vec![
            fix(
                FixCost::Setting,
                "raise --gpu-memory-utilization (e.g. 0.95) if nothing else uses the card",
                "the budget is a fraction of the whole card",
            ),
            fix(
                FixCost::Setting,
                "lower --max-num-batched-tokens / --max-num-seqs, or --enforce-eager",
                "the profiling peak and CUDA graphs eat into the KV budget",
            ),
            fix(
                FixCost::Setting,
                "a quantized checkpoint (AWQ/GPTQ/FP8) or --tensor-parallel-size 2",
                "weights leave more room for KV blocks",
            ),
        ],
    }
}

/// vLLM V0: max_model_len does not fit the KV cache.
fn vllm_max_len_tokens(max_model_len: &u64, kv_cache_tokens: &u64) -> Verdict {
    Verdict {
    class: OomClass::GenuineShortage,
    main_cause: Cause::new(OomClass::GenuineShortage, "the KV cache for one max_model_len sequence", None, None),
    contributors: Vec::new(),
    runner_up: None,
    runner_up_from_missing: false,
    decided_by: Vec::new(),
    missing: Vec::new(),
    headline: format!("vLLM: the KV cache holds {kv_cache_tokens} tokens, max_model_len is {max_model_len}"),
    figures: vec![],
    reasoning: vec![format!(
        "One sequence of max_model_len = {max_model_len} tokens must fit in the cache, which holds {kv_cache_tokens}; {:.0}% of it.",
        *kv_cache_tokens as f64 * 100.0 / (*max_model_len).max(1) as f64
    )],
    gap_bytes: None,
    fixes: vec![
        fix(FixCost::Setting, format!("--max-model-len {kv_cache_tokens} (or lower)"), "the longest sequence the cache can hold"),
        fix(FixCost::Setting, "--kv-cache-dtype fp8", "halves KV bytes per token"),
        fix(FixCost::Setting, "raise --gpu-memory-utilization or add --tensor-parallel-size", "more bytes for the cache"),
    ],
}
}

/// vLLM V1: one max-length request needs more KV memory than available.
fn vllm_max_len_memory(
    max_model_len: &u64,
    needed: &Size,
    available: &Size,
    estimated_max_len: &Option<u64>,
) -> Verdict {
    Verdict {
        class: OomClass::GenuineShortage,
        main_cause: Cause::new(
            OomClass::GenuineShortage,
            "KV cache needed beyond what is available",
            Some(needed.bytes.saturating_sub(available.bytes)),
            None,
        ),
        contributors: Vec::new(),
        runner_up: None,
        runner_up_from_missing: false,
        decided_by: Vec::new(),
        missing: Vec::new(),
        headline: format!(
            "vLLM: one {max_model_len}-token request needs {} of KV cache, {} available",
            needed.text, available.text
        ),
        figures: vec![
            fig("kv_needed", needed.bytes),
            fig("kv_available", available.bytes),
            fig("gap", needed.bytes.saturating_sub(available.bytes)),
        ],
        reasoning: vec![format!(
            "{} needed − {} available = {} missing.",
            needed.text,
            available.text,
            b(needed.bytes.saturating_sub(available.bytes))
        )],
        gap_bytes: Some(needed.bytes.saturating_sub(available.bytes)),
        fixes: vec![
            fix(
                FixCost::Setting,
                match estimated_max_len {
                    Some(m) => format!("--max-model-len {m}"),
                    None => "lower --max-model-len".to_string(),
                },
                "vLLM's own estimate of the longest sequence that fits",
            ),
            fix(FixCost::Setting, "--kv-cache-dtype fp8", "halves KV bytes per token"),
            fix(
                FixCost::Setting,
                "raise --gpu-memory-utilization or add --tensor-parallel-size",
                "more bytes for the cache",
            ),
        ],
    }
}

/// Apple MPS: the high-watermark limit.
fn mps(allocated: &Size, other: &Size, max_allowed: &Size, requested: &Size) -> Verdict {
    let (a, o, m, r) = (allocated.bytes, other.bytes, max_allowed.bytes, requested.bytes);
    let need = a.saturating_add(o).saturating_add(r);
    let mut reasoning = vec![format!(
        "MPS allocated {} + other allocations {} + request {} = {} against the {} high-watermark limit.",
        allocated.text,
        other.text,
        requested.text,
        b(need),
        max_allowed.text
    )];
    let watermark = fix(
        FixCost::Setting,
        "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 (no limit; the system may swap or hang)",
        "the limit is a share of unified memory, not the hardware",
    );
    let (class, headline, fixes) = if r > m {
        reasoning.push(format!("{} alone exceeds the limit.", requested.text));
        (
            OomClass::RequestExceedsCard,
            format!("one allocation of {} exceeds the {} MPS limit", requested.text, max_allowed.text),
            vec![
                fix(
                    FixCost::Workload,
                    "split the operation or shrink the batch / resolution",
                    "no single tensor above the limit can be placed",
                ),
                watermark,
            ],
        )
    } else if o >= a && o >= OTHER_PROCESS_MIN {
        // MPSAllocator.mm: other = [device currentAllocatedSize] − the allocator's own buffers,
        // after it has already freed its cached buffers and retried
        reasoning.push(format!(
            "{} is Metal memory of this process outside PyTorch's MPS allocator (MPSGraph caches and kernels, other Metal users in the process), more than PyTorch's own {}; PyTorch had already freed its cached buffers and retried.",
            other.text, allocated.text
        ));
        (OomClass::GenuineShortage, format!("{} held outside PyTorch's MPS allocator, {} over the limit", other.text, b(need.saturating_sub(m))), vec![
            fix(FixCost::Code, "compare torch.mps.driver_allocated_memory() with torch.mps.current_allocated_memory() while running; release what holds the rest (other Metal/CoreML models in the process, graph caches)", "the bulk is not PyTorch tensors"),
            fix(FixCost::Workload, "lower the batch / resolution / sequence length", "fewer and smaller graphs and tensors"),
            watermark,
        ])
    } else {
        reasoning.push(format!("{} short.", b(need.saturating_sub(m))));
        (
            OomClass::GenuineShortage,
            format!("{} over the MPS limit", b(need.saturating_sub(m))),
            vec![
                fix(
                    FixCost::Workload,
                    "lower the batch / resolution / sequence length",
                    "PyTorch's own allocations are the bulk",
                ),
                fix(FixCost::Code, "fp16 weights and activations", "halves the bytes"),
                watermark,
            ],
        )
    };
    Verdict {
        class,
        main_cause: Cause::new(
            class,
            if class == OomClass::RequestExceedsCard {
                "the request"
            } else if o >= a && o >= OTHER_PROCESS_MIN {
                "Metal memory outside PyTorch's allocator"
            } else {
                "PyTorch's MPS allocations"
            },
            Some(if class == OomClass::RequestExceedsCard {
                r
            } else if o >= a && o >= OTHER_PROCESS_MIN {
                o
            } else {
                a
            }),
            Some(m),
        ),
        contributors: Vec::new(),
        runner_up: None,
        runner_up_from_missing: false,
        decided_by: Vec::new(),
        missing: Vec::new(),
        headline,
        figures: vec![fig("allocated", a), fig("other", o), fig("allowed", m), fig("requested", r)],
        reasoning,
        gap_bytes: Some(need.saturating_sub(m)),
        fixes,
    }
}

/// A raw CUDA error: memory outside the caching allocator ran out.
fn cuda_error(text: &str) -> Verdict {
    Verdict {
    class: OomClass::Unknown,
    main_cause: Cause::new(OomClass::Unknown, "memory outside the caching allocator", None, None),
    contributors: Vec::new(),
    runner_up: None,
    runner_up_from_missing: false,
    decided_by: Vec::new(),
    missing: Vec::new(),
    headline: format!("{text}: memory outside PyTorch's caching allocator ran out"),
    figures: vec![],
    reasoning: vec!["This error comes from a raw CUDA call (context creation, NCCL buffers, cuBLAS/cuDNN handles), not from the caching allocator, so no figures are printed. It usually means the card was already full of cached tensors or of another process when a library asked for its own memory.".to_string()],
    gap_bytes: None,
    fixes: vec![
        fix(FixCost::Housekeeping, "check for other processes on the card (nvidia-smi)", "contexts and NCCL buffers need room outside the cache"),
        fix(FixCost::Setting, "set torch.cuda.set_per_process_memory_fraction(0.95) or NCCL_BUFFSIZE lower", "leaves headroom for library allocations"),
    ],
}
}

/// vLLM's budget (`gpu_memory_utilization` × total) as the main cause, with
/// its share of the card when the profile line gives both.
fn budget_cause(profile: &Option<VllmProfile>) -> Cause {
    let total = profile.as_ref().and_then(|p| p.total_gpu_memory);
    let budget = profile.as_ref().and_then(|p| Some((p.total_gpu_memory? as f64 * p.gpu_memory_utilization?) as u64));
    Cause::new(OomClass::Budget, "vLLM's gpu_memory_utilization budget", budget, total)
}

fn unknown(
    headline: String,
    figures: Vec<super::Figure>,
    bytes: Option<u64>,
    reasoning: Vec<String>,
    fixes: Vec<super::Fix>,
) -> Verdict {
    Verdict {
        class: OomClass::Unknown,
        main_cause: Cause::new(OomClass::Unknown, "the request", bytes, None),
        contributors: Vec::new(),
        runner_up: None,
        runner_up_from_missing: false,
        decided_by: Vec::new(),
        missing: Vec::new(),
        headline,
        figures,
        reasoning,
        gap_bytes: None,
        fixes,
    }
}

/// PyTorch ≤ 0.4's THC message: no figures at all.
fn legacy_thc(text: &str) -> Verdict {
    unknown(
        format!("{text}: PyTorch ≤ 0.4 (THC) printed no figures"),
        vec![],
        None,
        vec!["The legacy THC allocator's message carries no request, free or total figures, so the cause cannot be told from it.".to_string()],
        vec![
            fix(FixCost::Housekeeping, "check the card while the job runs (nvidia-smi --query-gpu=memory.used,memory.total --format=csv -l 1)", "shows whether the job or another process fills it"),
            fix(FixCost::Setting, "upgrade PyTorch (≥ 1.0 prints the request, free and reserved figures; ≥ 2.1 the processes on the card)", "the figures decide the cause"),
            fix(FixCost::Workload, "halve the batch size", "the usual first step while the cause is unknown"),
        ],
    )
}

/// TensorFlow's StreamExecutor could not get memory from the driver.
fn tensorflow_driver(requested: &Size) -> Verdict {
    unknown(
        format!("TensorFlow could not get {} from the driver (CUDA_ERROR_OUT_OF_MEMORY)", b(requested.bytes)),
        vec![fig("requested", requested.bytes)],
        Some(requested.bytes),
        vec![format!(
            "cuMemAlloc of {} bytes failed in TensorFlow's StreamExecutor. It usually comes from TensorFlow reserving most of the card at start-up (or growing its region) while another process, or another framework in the same process, already holds memory; the line has no free/total figures.",
            requested.bytes
        )],
        vec![
            fix(FixCost::Setting, "tf.config.experimental.set_memory_growth(gpu, True) (or TF_FORCE_GPU_ALLOW_GROWTH=true)", "TensorFlow then takes memory as it needs it instead of most of the card"),
            fix(FixCost::Housekeeping, "check other processes on the card (nvidia-smi)", "another job's memory is not available to this one"),
            fix(FixCost::Workload, "lower the batch size", "smaller activations"),
        ],
    )
}

/// DeepSpeed's warning that the allocator had to retry cudaMalloc after
/// freeing its cache (`num_alloc_retries`): memory pressure, not yet an OOM.
fn allocator_retries(retries: u64) -> Verdict {
    unknown(
        format!("{retries} cudaMalloc retries since the last step: the allocator is at the card's limit"),
        vec![],
        None,
        vec![format!(
            "Each retry means cudaMalloc failed, PyTorch freed its whole cache and tried again: a synchronising stall that only happens at the memory limit ({retries} since the last step). No OOM yet and no figures to name a cause; the next allocation that does not fit will fail."
        )],
        vec![
            fix(FixCost::Setting, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "less fragmentation means fewer retries"),
            fix(FixCost::Code, "print torch.cuda.memory_summary() at a step and run `vramfit diagnose` on it", "its figures tell fragmentation from a shortage"),
            fix(FixCost::Workload, "lower the micro-batch or enable activation checkpointing", "headroom below the limit removes the retries"),
        ],
    )
}

/// `CUDA driver error: out of memory`: PyTorch formats "CUDA driver error: "
/// only in `C10_CUDA_DRIVER_CHECK` (c10/cuda/driver_api.h), which in the
/// caching allocator wraps only the expandable-segments driver calls
/// (`cuMemAddressReserve`, `cuMemCreate`, `cuMemMap`, `cuMemSetAccess`);
/// extensions that call the driver API raise the same words. On Jetson
/// (Tegra) boards and under WSL2 those calls fail with memory free
/// (unslothai/unsloth#2401, unsloth-zoo#1235).
fn cuda_driver(text: &str, ctx: &Context) -> Verdict {
    let ext = ctx
        .frames
        .iter()
        .rev()
        .find(|f| f.file.contains("bitsandbytes") || f.file.contains("unsloth") || f.file.contains("triton"))
        .map(|f| f.file.rsplit(['/', '\\']).next().unwrap_or(&f.file).to_string());
    let mut reasoning = vec![
        "PyTorch prints \"CUDA driver error: \" only from C10_CUDA_DRIVER_CHECK (c10/cuda/driver_api.h); inside the caching allocator that wraps only the expandable-segments driver calls (cuMemCreate, cuMemMap, cuMemSetAccess), so either PYTORCH_CUDA_ALLOC_CONF has expandable_segments:True, or an extension called the CUDA driver API itself. The message carries no figures.".to_string(),
        "On Jetson (Tegra) boards and under WSL2 those driver calls fail while memory is free (unslothai/unsloth#2401: a 1 MiB buffer on a 64 GB Jetson AGX Orin); elsewhere the card was full when a segment had to grow.".to_string(),
    ];
    if let Some(e) = &ext {
        reasoning
            .push(format!("The innermost library frame is {e}: an extension's own driver call can raise this too."));
    }
    let mut v = verdict(
        OomClass::Unknown,
        Cause::new(OomClass::Unknown, "a CUDA driver allocation", None, None),
        format!("{text}: a CUDA driver allocation failed (expandable segments or an extension), no figures"),
        vec![],
        reasoning,
        None,
        vec![
            fix(FixCost::Setting, "on Jetson or WSL2: drop expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF (and from any library that sets it at import)", "the driver's virtual-memory calls it relies on fail there with memory free"),
            fix(FixCost::Housekeeping, "check the card at the failure (nvidia-smi --query-gpu=memory.used,memory.total --format=csv -l 1)", "tells a full card from a driver limit"),
            fix(FixCost::Code, "print torch.cuda.memory_summary() and torch.cuda.mem_get_info() in an except block and run `vramfit diagnose` on the output", "its figures tell a shortage from fragmentation"),
        ],
    );
    v.missing = ["total", "free", "allocated", "reserved"]
        .iter()
        .map(|f| super::Missing { figure: f.to_string(), assumed_bytes: None, matters: true, otherwise: None })
        .collect();
    v
}

/// `set_per_process_memory_fraction` not set: the async backend's limit is
/// `SIZE_MAX` (printed `17179869184.00 GiB`).
const NO_LIMIT: u64 = 1 << 60;

/// PyTorch's cudaMallocAsync backend (CUDAMallocAsyncAllocator.cpp
/// `mallocAsync`): `Currently allocated` is what PyTorch's tensors hold;
/// the driver's pool keeps freed memory for "opportunistic" reuse only
/// (frees go through a dummy unifying stream), so memory neither free nor
/// allocated is the pool's freed blocks, the context, and other processes.
#[allow(clippy::too_many_arguments)]
fn torch_async(
    device: Option<u32>,
    allocated: &Option<Size>,
    requested: &Option<Size>,
    total: &Option<Size>,
    free: &Option<Size>,
    limit: &Option<Size>,
    truncated: bool,
) -> Verdict {
    let on = device.map(|d| format!(" on GPU {d}")).unwrap_or_default();
    let (Some(a), Some(r), Some(t), Some(f)) = (allocated, requested, total, free) else {
        return torch_async_without_figures(&on, allocated, requested, total, free, truncated);
    };
    let (ab, rb, tb, fb) = (a.bytes, r.bytes, t.bytes, f.bytes);
    let cap = limit.as_ref().map(|l| l.bytes).filter(|&l| l < NO_LIMIT && l < tb);
    let margin = DRIVER_PAGE.max((tb as f64 * EFFECTIVELY_FULL_SHARE) as u64);
    let outside = tb.saturating_sub(fb).saturating_sub(ab);
    let held_elsewhere = outside.saturating_sub(CONTEXT_ALLOWANCE);
    let mut figures = vec![
        fig("requested", rb),
        fig("total", tb),
        fig("free", fb),
        fig("allocated", ab),
        fig("outside_allocator", outside),
    ];
    let mut reasoning = vec![format!(
        "GPU {}: cudaMallocAsync asked for {} with {} free of {}; PyTorch's tensors hold {}; {} of the card is neither free nor allocated (the async pool's freed blocks, the CUDA context, other processes).",
        device.map(|d| d.to_string()).unwrap_or_else(|| "?".into()),
        r.text, f.text, t.text, a.text, b(outside)
    )];
    let total = Some(tb);
    let frag_what = "freed memory the async pool kept";
    let (class, headline, main, runner_up, decided, gap, fixes) = if rb > tb {
        reasoning.push(format!("{} > {}: one allocation larger than the card.", r.text, t.text));
        (
            OomClass::RequestExceedsCard,
            format!("one allocation of {} is larger than the {} card", r.text, t.text),
            Cause::new(OomClass::RequestExceedsCard, "the request", Some(rb), total),
            None,
            vec!["requested", "total"],
            Some(rb - tb),
            super::fixes::request_exceeds_card(),
        )
    } else if let Some(l) = cap.filter(|&l| ab.saturating_add(rb) > l) {
        figures.push(fig("allowed", l));
        reasoning.push(format!("{} allocated + {} requested > the {} memory-fraction cap.", a.text, r.text, b(l)));
        (
            OomClass::GenuineShortage,
            format!("the memory-fraction cap of {} is reached", b(l)),
            Cause::new(OomClass::GenuineShortage, "the memory-fraction cap", Some(l), total),
            None,
            vec!["allocated", "requested", "allowed"],
            Some(ab.saturating_add(rb) - l),
            super::fixes::cap(),
        )
    } else if fb >= rb.saturating_add(margin) {
        reasoning.push(format!("{} free ≥ {} requested: the driver's pool should have served it; the free figure is read after the failure (memory released in between, a Windows WDDM or vGPU limit).", f.text, r.text));
        (
            OomClass::Unexplained,
            "the card reported enough free memory for the request".to_string(),
            Cause::new(OomClass::Unexplained, "no cause these figures can show", None, total),
            None,
            vec!["free", "requested"],
            None,
            super::fixes::free_covers_request(),
        )
    } else if held_elsewhere >= rb && held_elsewhere as f64 >= INFERRED_OTHER_MIN_SHARE * tb as f64 {
        reasoning.push(format!("Beyond a context ({}), {} is held outside PyTorch's tensors — at least the request: with cudaMallocAsync that is first of all the pool's freed blocks, which it reuses only opportunistically (CUDAMallocAsyncAllocator.cpp free_impl), or another process; the message cannot tell which.", b(CONTEXT_ALLOWANCE), b(held_elsewhere)));
        (
            OomClass::Fragmentation,
            format!("{} of the card is held outside PyTorch's tensors (the async pool or another process)", b(held_elsewhere)),
            Cause::new(OomClass::Fragmentation, frag_what, Some(held_elsewhere), total),
            runner(OomClass::OtherProcess, "other users of the card", Some(held_elsewhere), total, "another process would hold the same memory; the message lists none"),
            vec!["free", "allocated", "outside_allocator", "requested"],
            None,
            vec![
                fix(FixCost::Setting, "torch.cuda.empty_cache() before the big step (it trims the async pool: cudaMemPoolTrimTo), or the native allocator with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (ComfyUI: --disable-cuda-malloc)", "the pool's freed blocks go back to the card"),
                fix(FixCost::Housekeeping, "check other processes on the card (nvidia-smi --query-compute-apps=pid,used_memory --format=csv)", "another process would hold the same memory"),
            ],
        )
    } else {
        let gap = rb.saturating_sub(fb);
        reasoning.push(format!(
            "PyTorch's own tensors ({}) and the request ({}) fill the card: {} missing beyond the free memory.",
            a.text,
            r.text,
            b(gap)
        ));
        (
            OomClass::GenuineShortage,
            format!("live tensors fill {:.0}% of the card", ab as f64 * 100.0 / tb.max(1) as f64),
            Cause::new(OomClass::GenuineShortage, "live tensors + the request", Some(ab.saturating_add(rb)), total),
            (held_elsewhere >= OTHER_PROCESS_MIN)
                .then(|| {
                    runner(
                        OomClass::OtherProcess,
                        "memory outside PyTorch's tensors",
                        Some(held_elsewhere),
                        total,
                        "memory outside PyTorch's tensors, smaller than the request",
                    )
                })
                .flatten(),
            vec!["allocated", "free", "requested"],
            Some(gap),
            super::fixes::shortage(None),
        )
    };
    let mut v = verdict(class, main, headline, figures, reasoning, gap, fixes);
    v.runner_up = runner_up;
    v.decided_by = decided.iter().map(|s| s.to_string()).collect();
    v
}

/// The cudaMallocAsync message without its figures (cut at the device
/// index, pytorch#168369): what is known and how to get the rest.
fn torch_async_without_figures(
    on: &str,
    allocated: &Option<Size>,
    requested: &Option<Size>,
    total: &Option<Size>,
    free: &Option<Size>,
    truncated: bool,
) -> Verdict {
    let mut v = verdict(
        OomClass::Unknown,
        Cause::new(OomClass::Unknown, "the request", requested.as_ref().map(|r| r.bytes), None),
        format!("PyTorch cudaMallocAsync OOM{on}: the figures are missing{}", if truncated { " (the message was cut at the device index)" } else { "" }),
        requested.iter().map(|r| fig("requested", r.bytes)).collect(),
        vec![
            "\"Allocation on device\" is the cudaMallocAsync backend's message (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync; ComfyUI turns it on by default with --cuda-malloc). PyTorch printed the device index as a character, so on GPU 0 a NUL byte cut the message before its figures (pytorch#168369, fixed in November 2025): only that an allocation failed is known.".to_string(),
        ],
        None,
        vec![
            fix(FixCost::Setting, "run with the native allocator to get the full message (ComfyUI: --disable-cuda-malloc; else PYTORCH_CUDA_ALLOC_CONF=backend:native) and run `vramfit diagnose` on it", "the caching allocator's message prints the request, free, allocated and cached figures"),
            fix(FixCost::Code, "print torch.cuda.memory_allocated(), torch.cuda.mem_get_info() (or torch.cuda.memory_summary()) in an except block", "allocated vs free vs the card tells a shortage from memory held elsewhere"),
            fix(FixCost::Workload, "lower the resolution / batch / frame count of the failing node", "the usual first step while the cause is unknown"),
        ],
    );
    v.missing = ["allocated", "requested", "total", "free"]
        .iter()
        .filter(|n| match **n {
            "allocated" => allocated.is_none(),
            "requested" => requested.is_none(),
            "total" => total.is_none(),
            _ => free.is_none(),
        })
        .map(|n| super::Missing { figure: n.to_string(), assumed_bytes: None, matters: true, otherwise: None })
        .collect();
    v
}

/// vLLM V1's start-up check (vllm/v1/worker/utils.py `request_memory`):
/// `gpu_memory_utilization × total` must be free before vLLM loads
/// anything. What is in use then is this process's CUDA context, the
/// driver's and a desktop's memory, and any other process. A shortfall
/// within [`STARTUP_CONTEXT_SPREAD`] is the utilisation set too high for
/// this card's baseline (pytorch#175666: 70 MiB short after CUDA 13's
/// larger context); a larger one is memory another process holds.
fn vllm_startup(device: &Option<String>, free: &Size, total: &Size, utilization: f64, requested: &Size) -> Verdict {
    let (fb, tb, rb) = (free.bytes, total.bytes, requested.bytes);
    let used = tb.saturating_sub(fb);
    let short = rb.saturating_sub(fb);
    let headroom = tb.saturating_sub(rb);
    // the utilisation that would have started, two decimals as vLLM takes it, leaving a page
    let fits = ((fb.saturating_sub(DRIVER_PAGE * 50)) as f64 / tb.max(1) as f64 * 100.0).floor() / 100.0;
    let on = device.as_deref().map(|d| format!(" on {d}")).unwrap_or_default();
    let figures = vec![
        fig("free", fb),
        fig("total", tb),
        fig("requested", rb),
        fig("used_at_start", used),
        fig("shortfall", short),
    ];
    let mut reasoning = vec![format!(
        "vLLM asks for gpu_memory_utilization {utilization} × {} = {} before it loads anything; {} was free{on}, so {} of the card was already in use and {} is missing. The utilisation leaves {} for everything outside vLLM's budget.",
        total.text, requested.text, free.text, b(used), b(short), b(headroom)
    )];
    let util_fix = fix(
        FixCost::Setting,
        format!("--gpu-memory-utilization {fits:.2}"),
        format!("the share of the card that was free ({} of {})", free.text, total.text),
    );
    let stop_fix = fix(FixCost::Housekeeping, "find and stop what holds the card (nvidia-smi --query-compute-apps=pid,used_memory --format=csv): another vLLM instance, a previous engine still shutting down, a training job", "its memory is what is missing");
    let mut v = if short <= STARTUP_CONTEXT_SPREAD {
        reasoning.push(format!(
            "Short by only {}: within the {} that a CUDA context varies by between builds and drivers (about 0.5 GiB with lazy loading, up to 1.3 GiB eager, more with CUDA 13) plus a desktop; the utilisation is set too high for this card's baseline, not taken by another job.",
            b(short), b(STARTUP_CONTEXT_SPREAD)
        ));
        let mut v = verdict(
            OomClass::Budget,
            Cause::new(OomClass::Budget, "vLLM's gpu_memory_utilization budget", Some(rb), Some(tb)),
            format!(
                "vLLM: gpu_memory_utilization {utilization} asks {} more than the {} free at start-up",
                b(short),
                free.text
            ),
            figures,
            reasoning,
            Some(short),
            vec![util_fix, stop_fix],
        );
        v.runner_up = runner(
            OomClass::OtherProcess,
            "memory in use before vLLM started",
            Some(used),
            Some(tb),
            "if nothing but this process should hold the memory in use at start-up",
        );
        v
    } else {
        reasoning.push(format!(
            "Short by {}: more than a CUDA context's spread ({}): another process holds the card (or a previous vLLM engine has not exited).",
            b(short), b(STARTUP_CONTEXT_SPREAD)
        ));
        let mut v = verdict(
            OomClass::OtherProcess,
            Cause::new(OomClass::OtherProcess, "memory in use before vLLM started", Some(used), Some(tb)),
            format!("vLLM: {} of the card{on} was in use before it started", b(used)),
            figures,
            reasoning,
            Some(short),
            vec![stop_fix, util_fix],
        );
        v.runner_up = runner(
            OomClass::Budget,
            "vLLM's gpu_memory_utilization budget",
            Some(rb),
            Some(tb),
            "a lower utilisation starts beside the other process, with a smaller KV cache",
        );
        v
    };
    v.decided_by = vec!["shortfall".into(), "used_at_start".into()];
    v
}

/// How much a CUDA context's footprint varies at start-up between builds,
/// drivers and loading modes (500 MiB with lazy loading, 1.34 GiB measured
/// eager: vramfit_core::runtime::DEFAULT_CUDA_CONTEXT's sources): a
/// start-up shortfall within it is the baseline, not another job.
const STARTUP_CONTEXT_SPREAD: u64 = GIB;

/// The BFC allocator's verdict from its `Stats:` block: the request above
/// the region's limit; room in the region but no block large enough; or
/// the region full.
fn bfc_verdict(requested: &Size, s: &BfcStats, who: &str) -> Option<Verdict> {
    let r = requested.bytes;
    if let Some(d) = s.device_limit.filter(|&d| r > d) {
        let reasoning = vec![format!(
            "{who} asked for {} ({} bytes); XLA's compiler plans against {} of device memory (its \"base limit\" / rematerialisation target printed beside the failure): one allocation larger than the device.",
            b(r), r, b(d)
        )];
        let mut v = verdict(
            OomClass::RequestExceedsCard,
            Cause::new(OomClass::RequestExceedsCard, "the request", Some(r), Some(d)),
            format!("one allocation of {} is larger than the {} the device offers", b(r), b(d)),
            vec![fig("requested", r), fig("device_limit", d)],
            reasoning,
            Some(r - d),
            super::fixes::request_exceeds_card(),
        );
        v.decided_by = vec!["requested".into(), "device_limit".into()];
        return Some(v);
    }
    let (limit, in_use) = (s.limit?, s.in_use?);
    let mut figures = vec![fig("requested", r), fig("bfc_limit", limit), fig("bfc_in_use", in_use)];
    if let Some(l) = s.largest_free_block {
        figures.push(fig("bfc_largest_free_block", l));
    }
    let mut reasoning = vec![format!(
        "{who}'s BFC allocator (region limit {}) had {} in use when {} was asked for{}.",
        b(limit),
        b(in_use),
        b(r),
        s.largest_free_block.map(|l| format!("; its largest free block was {}", b(l))).unwrap_or_default()
    )];
    let free_in_region = limit.saturating_sub(in_use);
    let prealloc = fix(
        FixCost::Setting,
        "XLA_PYTHON_CLIENT_MEM_FRACTION=.95 (JAX; default .75) or TF_FORCE_GPU_ALLOW_GROWTH=true",
        "the region is a fraction of the card the framework takes at start",
    );
    let v = if r > limit {
        reasoning.push(format!(
            "{} > the region's {}: one allocation larger than everything the allocator may use.",
            b(r),
            b(limit)
        ));
        let mut v = verdict(
            OomClass::RequestExceedsCard,
            Cause::new(OomClass::RequestExceedsCard, "the request", Some(r), Some(limit)),
            format!("one allocation of {} is larger than the allocator's {} region", b(r), b(limit)),
            figures,
            reasoning,
            Some(r - limit),
            super::fixes::request_exceeds_card(),
        );
        v.decided_by = vec!["requested".into(), "bfc_limit".into()];
        v
    } else if free_in_region >= r && s.largest_free_block.is_some_and(|l| l < r) {
        reasoning.push(format!(
            "{} of the region is free, at least the request, but no single block is large enough: fragmentation.",
            b(free_in_region)
        ));
        let mut v = verdict(
            OomClass::Fragmentation,
            Cause::new(
                OomClass::Fragmentation,
                "free but split memory of the region",
                Some(free_in_region),
                Some(limit),
            ),
            format!("{} free in the region, but its largest block is smaller than {}", b(free_in_region), b(r)),
            figures,
            reasoning,
            None,
            vec![
                fix(
                    FixCost::Setting,
                    "TF_GPU_ALLOCATOR=cuda_malloc_async (TensorFlow) or XLA_PYTHON_CLIENT_ALLOCATOR=platform (JAX)",
                    "the BFC allocator's own message suggests it for fragmentation",
                ),
                prealloc,
            ],
        );
        v.runner_up = runner(
            OomClass::GenuineShortage,
            "memory in use",
            Some(in_use.saturating_add(r)),
            Some(limit),
            "the region is nearly full as well",
        );
        v.decided_by =
            vec!["bfc_limit".into(), "bfc_in_use".into(), "bfc_largest_free_block".into(), "requested".into()];
        v
    } else {
        let gap = in_use.saturating_add(r).saturating_sub(limit);
        reasoning.push(format!("{} in use + {} > the {} region: {} missing.", b(in_use), b(r), b(limit), b(gap)));
        let mut v = verdict(
            OomClass::GenuineShortage,
            Cause::new(
                OomClass::GenuineShortage,
                "memory in use + the request",
                Some(in_use.saturating_add(r)),
                Some(limit),
            ),
            format!("{} more than the allocator's region can give", b(gap)),
            figures,
            reasoning,
            Some(gap),
            vec![
                prealloc,
                fix(
                    FixCost::Code,
                    "jax.checkpoint (remat) around the big blocks, or shard the computation",
                    "the buffers in use are the program's",
                ),
                fix(FixCost::Workload, "lower the batch / sequence of the step", "buffers scale with the shapes"),
            ],
        );
        v.decided_by = vec!["bfc_in_use".into(), "requested".into(), "bfc_limit".into()];
        v
    };
    Some(v)
}

/// A BFC failure line on its own (no XLA/TF error after it).
fn bfc(allocator: &str, requested: &Size, not_a_failure: bool, stats: &Option<BfcStats>) -> Verdict {
    if not_a_failure {
        return verdict(
            OomClass::Unknown,
            Cause::new(OomClass::Unknown, "an optional workspace", Some(requested.bytes), None),
            format!("{allocator} could not get {} for an optional workspace (a warning, not a failure)", b(requested.bytes)),
            vec![fig("requested", requested.bytes)],
            vec!["The caller (typically cuDNN/cuBLAS autotuning asking for scratch space) said this is not a failure and retried with less: the run goes on, perhaps slower. It shows the program runs at the edge of the allocator's region.".to_string()],
            None,
            vec![
                fix(FixCost::Setting, "XLA_PYTHON_CLIENT_MEM_FRACTION=.95 (JAX) or TF_FORCE_GPU_ALLOW_GROWTH=true", "more room for scratch space"),
                fix(FixCost::Workload, "lower the batch if the run is slow or fails later", "buffers scale with the shapes"),
            ],
        );
    }
    if let Some(v) = stats.as_ref().and_then(|s| bfc_verdict(requested, s, allocator)) {
        return v;
    }
    let mut v = verdict(
        OomClass::Unknown,
        Cause::new(OomClass::Unknown, "the request", Some(requested.bytes), None),
        format!("{allocator} could not allocate {}", b(requested.bytes)),
        vec![fig("requested", requested.bytes)],
        vec!["The BFC allocator's line carries the request only; its Stats block (Limit, InUse, LargestFreeBlock), printed after \"Current allocation summary follows\", tells a full region from a fragmented one.".to_string()],
        None,
        vec![fix(FixCost::Setting, "paste the allocator's summary up to its Stats block (TF_CPP_MIN_LOG_LEVEL=0 prints it)", "Limit, InUse and LargestFreeBlock decide the cause")],
    );
    v.missing = ["bfc_limit", "bfc_in_use"]
        .iter()
        .map(|f| super::Missing { figure: f.to_string(), assumed_bytes: None, matters: true, otherwise: None })
        .collect();
    v
}

/// A BFC `Stats:` summary pasted without its failure line: the region's
/// fill decides (the request is not known).
fn bfc_summary(stats: &Option<BfcStats>) -> Verdict {
    let s = stats.clone().unwrap_or_default();
    let (Some(limit), Some(in_use)) = (s.limit, s.in_use) else {
        return verdict(
            OomClass::Unknown,
            Cause::new(OomClass::Unknown, "the request", None, None),
            "the BFC allocator's summary, without its figures".to_string(),
            vec![],
            vec!["The summary lacks its Limit and InUse lines.".to_string()],
            None,
            vec![fix(FixCost::Setting, "paste the allocator's whole message", "the failure line names the request")],
        );
    };
    let free = limit.saturating_sub(in_use);
    let mut figures = vec![fig("bfc_limit", limit), fig("bfc_in_use", in_use)];
    if let Some(l) = s.largest_free_block {
        figures.push(fig("bfc_largest_free_block", l));
    }
    let mut reasoning = vec![format!(
        "The BFC allocator's summary: {} of its {} region in use, {} free{}; the failure line with the request is not in the text.",
        b(in_use),
        b(limit),
        b(free),
        s.largest_free_block.map(|l| format!(", largest free block {}", b(l))).unwrap_or_default()
    )];
    if let Some(d) = s.device_limit {
        reasoning.push(format!("XLA's compiler plans against {} of device memory.", b(d)));
    }
    // a region with under 2% free, or whose largest free block is under 2%
    // of it, is full (the same share below which a cache is scraps)
    let scraps = (super::FRAG_MIN_CARD_SHARE * limit as f64) as u64;
    let full = free < scraps || s.largest_free_block.is_some_and(|l| l < scraps);
    let prealloc = fix(
        FixCost::Setting,
        "XLA_PYTHON_CLIENT_MEM_FRACTION=.95 (JAX; default .75) or TF_FORCE_GPU_ALLOW_GROWTH=true",
        "the region is a fraction of the card the framework takes at start",
    );
    let mut v = if full {
        reasoning.push("The region is full of live buffers: the next allocation of any size fails.".to_string());
        verdict(
            OomClass::GenuineShortage,
            Cause::new(OomClass::GenuineShortage, "buffers in use", Some(in_use), Some(limit)),
            format!("the allocator's region is full: {} of {} in use", b(in_use), b(limit)),
            figures,
            reasoning,
            None,
            vec![
                prealloc,
                fix(FixCost::Workload, "lower the batch / array sizes", "the buffers in use are the program's"),
            ],
        )
    } else {
        reasoning.push("The region still has room: whether the failed request was larger than its free memory or than its largest free block is not known without the failure line.".to_string());
        let mut v = verdict(
            OomClass::Unknown,
            Cause::new(OomClass::Unknown, "the request", None, Some(limit)),
            format!("the BFC allocator's summary: {} of {} in use", b(in_use), b(limit)),
            figures,
            reasoning,
            None,
            vec![prealloc],
        );
        v.missing =
            vec![super::Missing { figure: "requested".into(), assumed_bytes: None, matters: true, otherwise: None }];
        v
    };
    if full {
        v.decided_by = vec!["bfc_in_use".into(), "bfc_limit".into()];
        v.missing =
            vec![super::Missing { figure: "requested".into(), assumed_bytes: None, matters: false, otherwise: None }];
    }
    v
}

/// A message recognised by its first words but cut before its figures.
fn cut(form: &str, text: &str, missing: &[String]) -> Verdict {
    let what = match form {
        "mps" => "Apple MPS",
        "vllm_startup_free" => "vLLM's start-up memory check",
        "vllm_max_len_memory" => "vLLM's KV-cache check",
        "tensorflow" => "TensorFlow",
        "xla" => "XLA",
        "vllm_max_len_tokens" => "vLLM's max-model-length check",
        "bfc" => "the BFC allocator's",
        "ggml" => "ggml's",
        "pytorch" => "PyTorch's",
        "pytorch_async" => "PyTorch cudaMallocAsync's",
        _ => "the",
    };
    let mut v = verdict(
        OomClass::Unknown,
        Cause::new(OomClass::Unknown, "the request", None, None),
        format!("{what} out-of-memory message, cut before {}", missing.join(", ")),
        vec![],
        vec![format!(
            "\"{}\" is the start of {what}'s message, but the figures that decide the cause ({}) are not in the text: it was cut or trimmed when pasted.",
            text,
            missing.join(", ")
        )],
        None,
        vec![fix(FixCost::Setting, "paste the whole message from the log", "its figures decide the cause")],
    );
    v.missing = missing
        .iter()
        .map(|m| super::Missing { figure: m.clone(), assumed_bytes: None, matters: true, otherwise: None })
        .collect();
    v
}
