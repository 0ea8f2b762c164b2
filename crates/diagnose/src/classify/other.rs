//! Verdicts for the OOMs of other frameworks (JAX/XLA, TensorFlow, vLLM,
//! Apple MPS) and for messages without figures (raw CUDA errors, legacy
//! THC, TensorFlow's StreamExecutor, allocator retries): one function per
//! message kind. A message without free/total figures is `unknown`, with
//! the next step that would tell the cause; an nvidia-smi table pasted
//! beside it is named as evidence.

use super::{b, fig, fix, Cause, FixCost, OomClass, Verdict, OTHER_PROCESS_MIN, XLA_SMALL_PROGRAM};
use crate::nvidia_smi::NvidiaSmi;
use crate::other_frameworks::{OtherOom, VllmProfile, XlaBuffer};
use crate::size::Size;

/// Verdict for a non-PyTorch OOM.
pub(crate) fn classify_other(o: &OtherOom, smi: Option<&NvidiaSmi>) -> Verdict {
    let mut v = match o {
        OtherOom::Xla { requested, total_allocation, fragmentation, peak_buffers, .. } => {
            xla(requested, total_allocation, fragmentation, peak_buffers)
        }
        OtherOom::TensorFlow { shape, dtype, bytes, gpu, node, .. } => tensorflow(shape, dtype, bytes, gpu, node),
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
    Verdict {
        class,
        main_cause: Cause::new(
            class,
            if class == OomClass::Unexplained { "memory taken before the program ran" } else { "the compiled program" },
            Some(total_allocation.as_ref().map(|t| t.bytes).unwrap_or(requested.bytes)),
            None,
        ),
        contributors: Vec::new(),
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
