//! One llama.cpp launch: where every byte goes per device, the command
//! line that reproduces it, and the largest `-ngl` / context that fit.

use crate::compute::{compute_buffers, ComputeBuffers, ComputeSetup};
use crate::ggml::GgmlType;
use crate::graph::Device;
use crate::kv::{context_size, kv_cache, CacheKind, CacheOptions, ContextSize, KvCache};
use crate::model::LlamaModel;
use crate::options::{FlashAttn, GpuSlot, LlamaCppOptions, DEFAULT_BATCH, DEFAULT_CTX_SIZE, DEFAULT_UBATCH};
use crate::placement::{model_buffers, place, BufferType, ModelBuffer, Placement};
use serde::{Deserialize, Serialize};

use vramfit_core::units::{product, sum};
use vramfit_core::CoreError;
use vramfit_core::Explanation;

use crate::lines::shell_quote;
pub use crate::lines::{DeviceMemory, LineKind, MemoryLine};

impl From<CacheKind> for LineKind {
    fn from(k: CacheKind) -> LineKind {
        match k {
            CacheKind::Kv => LineKind::Kv,
            CacheKind::Rs => LineKind::State,
        }
    }
}

/// The plan of one launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LlamaCppPlan {
    pub context: ContextSize,
    pub n_ubatch: u64,
    pub flash_attn: bool,
    pub n_gpu_layers: u64,
    pub placement: Placement,
    pub model_buffers: Vec<ModelBuffer>,
    pub kv: KvCache,
    pub compute: ComputeBuffers,
    pub gpus: Vec<DeviceMemory>,
    pub host: DeviceMemory,
    pub notes: Vec<String>,
}

impl LlamaCppPlan {
    /// Every GPU within its memory (true when no GPU).
    pub fn fits(&self) -> bool {
        self.gpus.iter().all(|g| g.fits().unwrap_or(true))
    }
}

fn resolve_flash_attn(model: &LlamaModel, opts: &LlamaCppOptions) -> (bool, Option<String>) {
    match opts.flash_attn {
        FlashAttn::On => (true, None),
        FlashAttn::Off => (false, None),
        FlashAttn::Auto => {
            // llama.cpp's auto check turns FA on when the device of every
            // attention layer supports it. The CPU backend runs
            // FLASH_ATTN_EXT at any head size (measured on b11312: Gemma 4's
            // 512-wide full layers log "Flash Attention enabled" on a
            // CPU-only build, calibration/data/measured/llamacpp-cpu.jsonl).
            // CUDA's kernels take K = V head sizes 64/80/96/112/128/256, 576
            // (MLA), and 512 when the GQA ratio is at least 2
            // (ggml_cuda_get_best_fattn_kernel, ggml/src/ggml-cuda/fattn.cu,
            // b11312: `case 512: … if (!gqa_opt_applies) return NONE`).
            if opts.gpus.is_empty() {
                return (
                    true,
                    Some("flash attention auto → on (the CPU backend supports it at every head size)".into()),
                );
            }
            let cuda = |l: &crate::model::LayerHparams| {
                [64, 80, 96, 112, 128, 256, 576].contains(&l.head_dim_k)
                    || (l.head_dim_k == 512 && l.head_dim_v == 512 && l.n_head >= 2 * l.n_head_kv)
            };
            let odd = model.layers.iter().any(|l| l.has_kv() && !cuda(l));
            if odd {
                (false, Some("flash attention auto → assumed off: a head size outside the CUDA kernels' 64/80/96/112/128/256/576 (512 with grouped-query attention)".into()))
            } else {
                (true, Some("flash attention auto → on (llama.cpp enables it when the attention devices support it; pass -fa off to compare)".into()))
            }
        }
    }
}

/// Where every byte goes for one launch.
pub fn plan(model: &LlamaModel, opts: &LlamaCppOptions) -> Result<LlamaCppPlan, CoreError> {
    model.validate()?;
    opts.validate()?;
    let mut notes = Vec::new();
    let (fa, fa_note) = resolve_flash_attn(model, opts);
    notes.extend(fa_note);
    if !fa && opts.cache_type_v.is_quantized() {
        return Err(CoreError::invalid(
            "cache-type-v",
            format!(
                "a quantized V cache ({}) needs flash attention: llama.cpp refuses it with -fa off",
                opts.cache_type_v
            ),
        ));
    }
    let ubatch = opts.ubatch.min(opts.batch); // llama.cpp: n_ubatch = min(n_batch, n_ubatch)
    let pad = crate::kv::ctx_pad(opts.era, fa);
    let size = context_size(model, opts.ctx_size, opts.parallel, opts.kv_unified, ubatch, opts.swa_full, pad)?;
    if size.n_ctx_seq > model.n_ctx_train && model.n_ctx_train > 0 {
        notes.push(format!(
            "context per sequence {} exceeds the model's training context {}: llama.cpp allows it (with a warning), quality may suffer",
            size.n_ctx_seq, model.n_ctx_train
        ));
    }
    let split = tensor_split(opts);
    let ngl = opts.n_gpu_layers.unwrap_or(model.n_layer as u64 + 1).min(model.n_layer as u64 + 1);
    // draft-mtp without -md: the NextN layers' weights are loaded (mparams.load_mtp)
    let loaded = crate::mtp::on_target(model, opts)?.then(|| crate::mtp::with_nextn_weights(model, opts.n_gpu_layers));
    let model = loaded.as_ref().unwrap_or(model);
    let mut placement = place(model.n_layer, ngl, &split, opts.order)?;
    tensor_overrides(model, opts, &mut placement, &mut notes)?;
    experts_on_host(model, opts, &mut placement, &mut notes);
    let rules = crate::build::BuildRules::of(opts.build);
    let cpu_repack = effective_repack(model, opts, rules, &placement, &mut notes);
    let buffers = model_buffers(model, &placement, opts.mmap, cpu_repack)?;
    let cache_opt = CacheOptions {
        type_k: opts.cache_type_k,
        type_v: opts.cache_type_v,
        flash_attn: fa,
        offload_kqv: opts.offload_kqv,
        n_parallel: opts.parallel,
        v_less: model.mla && rules.v_less_mla,
    };
    let mut kv = kv_cache(model, &placement, size, cache_opt)?;
    let n_rs_seq = crate::mtp::launch_rs_snapshots(&mut kv, model, opts, rules.draft_auto_spec, &mut notes)?;
    notes.extend(model.mla.then(|| mla_note(rules)));
    let n_tokens = size.n_ctx.min(ubatch);
    let n_draft = speculative_draft_tokens(opts, rules, &mut notes)?;
    let n_outputs = crate::build::reserved_outputs(rules, n_tokens, opts.batch, opts.parallel, n_draft);
    // llama_context: pipeline parallelism when several devices hold every
    // layer (-ngl > n_layer), split by layer, KV offloaded
    let pipelined = opts.gpus.len() > 1 && ngl > model.n_layer as u64 && opts.offload_kqv;
    notes.push(outputs_note(rules, n_outputs, n_tokens));
    let compute_setup = ComputeSetup {
        n_tokens,
        n_outputs,
        f16_fa_mask: rules.f16_fa_mask,
        n_kv: size.n_ctx_seq,
        n_kv_swa: size.swa_cells,
        streams: size.streams,
        flash_attn: fa,
        offload_kqv: opts.offload_kqv,
        op_offload: opts.op_offload,
        type_k: opts.cache_type_k,
        type_v: opts.cache_type_v,
        era: opts.era,
        cpu_repack,
        v_less: cache_opt.v_less,
        embd_input: rules.embd_input,
        rs_snapshots: n_rs_seq.saturating_mul(opts.parallel),
        rs_seqs: opts.parallel,
        gpus: opts.gpus.len() as u32,
        pipeline_copies: if pipelined { crate::graph::PIPELINE_COPIES } else { 1 },
    };
    let compute = compute_buffers(model, &placement, compute_setup)?;
    notes.extend(pipelined.then(pipeline_note));
    if let Some(a) = &compute.approximate {
        notes.push(format!("compute buffers approximate: {a}"));
    }
    // output buffer: logits of max(1, n_seq) outputs, pinned host memory
    let output_bytes = product("output buffer", &[model.n_vocab, opts.parallel, 4])?;
    let compute_note = ComputeNote { n_tokens, size, flash_attn: fa };
    let gpus = opts
        .gpus
        .iter()
        .enumerate()
        .map(|(i, g)| gpu_memory(i as u32, g, opts.gpu_reserve, &buffers, &kv, &compute, &compute_note))
        .collect::<Result<Vec<_>, _>>()?;
    let host = host_memory(model, opts, output_bytes, &buffers, &kv, &compute, &compute_note)?;
    if placement.offloaded == 0 && !opts.gpus.is_empty() {
        notes.push("-ngl 0: no layer on the GPU; prompt processing still offloads large matrix multiplications to it (op offload), hence its compute buffer".into());
    }
    if let Some(mb) = buffers.iter().find(|b| b.name == BufferType::CpuMapped) {
        if mb.bytes != mb.used_bytes {
            notes.push(format!(
                "llama.cpp will log a CPU_Mapped model buffer of {:.2} MiB: the mapped file range, which also covers GPU (or repacked) tensors lying between host tensors; only the {:.2} MiB of host tensors stay in use, and that is what the host total counts",
                mb.bytes as f64 / vramfit_core::units::MIB as f64,
                mb.used_bytes as f64 / vramfit_core::units::MIB as f64
            ));
        }
    }
    let mut p = LlamaCppPlan {
        context: size,
        n_ubatch: ubatch,
        flash_attn: fa,
        n_gpu_layers: ngl,
        placement,
        model_buffers: buffers,
        kv,
        compute,
        gpus,
        host,
        notes,
    };
    add_companions(&mut p, opts)?;
    if loaded.is_some() {
        add_mtp_context(&mut p, model, opts, compute_setup)?;
    }
    Ok(p)
}

/// `--spec-type draft-mtp` on the target's own NextN layers: the MTP
/// context's lines (see [`crate::mtp`]).
fn add_mtp_context(
    p: &mut LlamaCppPlan,
    model: &LlamaModel,
    opts: &LlamaCppOptions,
    compute: ComputeSetup,
) -> Result<(), CoreError> {
    let setup = crate::mtp::MtpSetup {
        size: p.context,
        placement: &p.placement,
        n_gpu_layers: opts.n_gpu_layers,
        compute,
        n_parallel: opts.parallel,
        n_batch: opts.batch.min(p.context.n_ctx),
        host_prefix: if opts.gpus.is_empty() { "CPU" } else { "CUDA_Host" },
    };
    let (lines, note) = crate::mtp::context_lines(model, &setup)?;
    crate::mtp::push(&mut p.gpus, &mut p.host, lines)?;
    p.notes.push(note);
    Ok(())
}

/// The note of a pipeline-parallel scheduler (several GPUs, every layer offloaded).
fn pipeline_note() -> String {
    format!(
        "pipeline parallelism (several GPUs, every layer offloaded): the scheduler keeps {} copies of every graph input and cross-device copy, as llama.cpp logs 'pipeline parallelism enabled (n_copies={})'",
        crate::graph::PIPELINE_COPIES,
        crate::graph::PIPELINE_COPIES
    )
}

/// `--spec-type` checked against what is loaded, and the draft tokens per
/// slot the target verifies (`common_speculative_n_max`).
fn speculative_draft_tokens(
    opts: &LlamaCppOptions,
    rules: crate::build::BuildRules,
    notes: &mut Vec<String>,
) -> Result<u64, CoreError> {
    use crate::companion::MAX_DRAFT_N_MAX;
    let spec = &opts.companions.speculative;
    let has_draft = opts.companions.draft.is_some();
    if spec.draft_n_max > MAX_DRAFT_N_MAX {
        return Err(CoreError::invalid(
            "spec-draft-n-max",
            format!("{} is more than {MAX_DRAFT_N_MAX}", spec.draft_n_max),
        ));
    }
    let types = spec.effective(has_draft, rules.draft_auto_spec);
    if let Some(t) = types.iter().find(|t| t.needs_draft_model()).filter(|_| !has_draft) {
        return Err(CoreError::invalid(
            "spec-type",
            format!("{} drafts with a model of its own: add -md FILE (the drafter's GGUF)", t.name()),
        ));
    }
    // draft-mtp without -md is checked and planned by crate::mtp
    let n = spec.n_max(has_draft, rules.draft_auto_spec);
    if has_draft && spec.types.is_empty() && !rules.draft_auto_spec {
        notes.push(format!(
            "-md without --spec-type: llama-server {} loads the draft model and its context but does not speculate (--spec-type defaults to none since b{}); add --spec-type draft-simple to draft with it",
            rules.label(),
            crate::build::SPEC_TYPE_DEFAULT_NONE
        ));
    }
    if n > 0 && rules.outputs_for_slots {
        let names: Vec<&str> = types.iter().map(|t| t.name()).collect();
        notes.push(format!(
            "speculative decoding ({}): the target verifies up to {n} draft tokens per slot, so it reserves logits for {} outputs per slot (server_n_outputs_max = min(batch, parallel × (1 + n_draft)))",
            names.join(","),
            n + 1
        ));
    }
    Ok(n)
}

/// The draft model's launch: llama-server derives it from the target's
/// (`common_base_params_to_speculative`, common/speculative.cpp): the same
/// batch, micro-batch, slots, unified-KV and flash-attention settings, the
/// draft's own `-ngld`, `-ctkd`/`-ctvd` and `-otd`, and a context of the
/// target's `llama_n_ctx` (`common_speculative_init_result`: "the draft
/// context holds as many tokens per sequence as the target context");
/// `n_outputs_max = n_parallel`, as the current build's reserved outputs
/// already are. The CUDA context is the target process's, counted once.
///
/// Builds before [`crate::build::SHARED_DRAFT_CONTEXT`] made one context
/// per slot instead (`server_context::load_model` / `init`): `n_ctx = -cd`
/// or the target's cells per slot (`llama_n_ctx_seq`), one sequence,
/// `n_batch = n_ctx_dft`, the target's `-ub`; see [`add_companions`].
pub fn draft_options(
    target: &LlamaCppOptions,
    size: ContextSize,
    d: &crate::companion::Draft,
    rules: crate::build::BuildRules,
) -> LlamaCppOptions {
    let base = LlamaCppOptions {
        n_gpu_layers: d.n_gpu_layers,
        cache_type_k: d.cache_type_k,
        cache_type_v: d.cache_type_v,
        n_cpu_moe: 0,
        override_tensor: d.override_tensor.clone(),
        gpu_reserve: 0,
        companions: crate::companion::Companions::default(),
        ..target.clone()
    };
    if rules.shared_draft_context {
        LlamaCppOptions { ctx_size: size.n_ctx, ..base }
    } else {
        let n_ctx_dft = d.ctx_size.unwrap_or(size.n_ctx_seq);
        LlamaCppOptions {
            ctx_size: n_ctx_dft,
            parallel: 1,
            kv_unified: false,
            batch: n_ctx_dft.clamp(1, crate::options::MAX_BATCH),
            ..base
        }
    }
}

/// The projector's and the draft model's lines on the plan's devices.
fn add_companions(p: &mut LlamaCppPlan, opts: &LlamaCppOptions) -> Result<(), CoreError> {
    use crate::companion::{add_draft, add_mmproj, DraftPlanned};
    let rules = crate::build::BuildRules::of(opts.build);
    if let Some(m) = &opts.companions.mmproj {
        if opts.companions.draft.is_some() && !rules.shared_draft_context {
            return Err(CoreError::invalid(
                "model-draft",
                format!(
                    "llama-server {} refuses a draft model beside a projector ('err: speculative decode is not supported by multimodal', server load_model); builds from b{} load both",
                    rules.label(),
                    crate::build::SHARED_DRAFT_CONTEXT
                ),
            ));
        }
        add_mmproj(&mut p.gpus, &mut p.host, &mut p.notes, m, p.flash_attn)?;
    }
    if let Some(d) = &opts.companions.draft {
        let dp = plan(&d.model, &draft_options(opts, p.context, d, rules)).map_err(|e| match e {
            CoreError::Invalid { field, reason } => CoreError::invalid(format!("model-draft {field}"), reason),
            other => other,
        })?;
        // one draft context per slot before b9109, each with its own KV,
        // compute and output buffers (the weights are loaded once)
        let contexts = if rules.shared_draft_context { 1 } else { opts.parallel.max(1) };
        let planned = DraftPlanned {
            gpus: &dp.gpus,
            host: &dp.host,
            n_gpu_layers: dp.n_gpu_layers,
            n_ctx_seq: dp.context.n_ctx_seq,
            streams: dp.context.streams,
            contexts,
        };
        add_draft(&mut p.gpus, &mut p.host, &mut p.notes, d, planned)?;
        if d.ctx_size.is_some() && rules.shared_draft_context {
            p.notes.push(format!(
                "-cd/--ctx-size-draft: llama.cpp build {} sizes the draft context at the target's n_ctx ({}) whatever -cd says (common_speculative_init_result: cparams.n_ctx = llama_n_ctx(ctx_tgt)); -cd applied to builds before b{}",
                rules.label(),
                p.context.n_ctx,
                crate::build::SHARED_DRAFT_CONTEXT
            ));
        }
    }
    Ok(())
}

/// The GPU shares of `--tensor-split` (missing shares are 0; no more
/// shares than GPUs, [`LlamaCppOptions::validate`]), or by memory when none
/// are given.
fn tensor_split(opts: &LlamaCppOptions) -> Vec<f64> {
    if opts.gpus.is_empty() {
        Vec::new()
    } else if opts.tensor_split.is_empty() {
        // llama.cpp splits by free memory; equal shares when it is not known
        default_split(&opts.gpus)
    } else {
        let mut s = opts.tensor_split.clone();
        s.resize(opts.gpus.len(), 0.0);
        s
    }
}

/// What the compute buffers' explanation cites.
struct ComputeNote {
    n_tokens: u64,
    size: ContextSize,
    flash_attn: bool,
}

impl ComputeNote {
    fn explain(&self, d: Device) -> Explanation {
        Explanation::new("peak of ggml's graph allocator over llama.cpp's reserved graph (one full micro-batch against a full KV cache), replayed op by op")
            .term("micro-batch tokens", self.n_tokens)
            .term("KV cells attended (full / sliding)", format!("{} / {}", self.size.n_ctx_seq, self.size.swa_cells))
            .term("flash attention", self.flash_attn)
            .term("device", format!("{d:?}"))
            .note("llama.cpp llama_context::graph_reserve → ggml_backend_sched_reserve; ggml-alloc.c gallocr; see docs/gguf.md")
    }
}

/// GPU `i`: its model, KV (or state) and compute buffers and the CUDA context reserve.
fn gpu_memory(
    i: u32,
    g: &GpuSlot,
    gpu_reserve: u64,
    buffers: &[ModelBuffer],
    kv: &KvCache,
    compute: &ComputeBuffers,
    compute_note: &ComputeNote,
) -> Result<DeviceMemory, CoreError> {
    let d = Device::Gpu(i);
    let mut lines = Vec::new();
    for b in buffers.iter().filter(|b| b.device == d) {
        lines.push(MemoryLine {
            kind: LineKind::Model,
            label: format!("{} model buffer", b.name),
            bytes: b.bytes,
            explain: b.explain.clone(),
        });
    }
    for c in kv.buffers.iter().filter(|c| c.device == d) {
        lines.push(MemoryLine {
            kind: c.kind.into(),
            label: format!("CUDA{i} {} buffer", c.kind),
            bytes: c.bytes,
            explain: c.explain.clone(),
        });
    }
    for c in compute.buffers.iter().filter(|c| c.device == d) {
        lines.push(MemoryLine {
            kind: LineKind::Compute,
            label: format!("CUDA{i} compute buffer"),
            bytes: c.bytes,
            explain: compute_note.explain(d),
        });
    }
    lines.push(MemoryLine {
        kind: LineKind::Reserve,
        label: "CUDA context, cuBLAS (outside llama.cpp's buffers)".into(),
        bytes: gpu_reserve,
        explain: Explanation::new("constant per process per GPU; not printed by llama.cpp")
            .term("reserve", gpu_reserve)
            .note("core::runtime::DEFAULT_CUDA_CONTEXT unless --gpu-reserve-mib overrides it"),
    });
    let total = sum("GPU total", &lines.iter().map(|l| l.bytes).collect::<Vec<_>>())?;
    Ok(DeviceMemory { device: d, name: format!("CUDA{i}"), lines, total_bytes: total, capacity_bytes: g.memory_bytes })
}

/// The host: model buffers left on the CPU (a mapped range counted by its
/// host tensors), KV on the CPU, the CPU compute buffer and the output buffer.
fn host_memory(
    model: &LlamaModel,
    opts: &LlamaCppOptions,
    output_bytes: u64,
    buffers: &[ModelBuffer],
    kv: &KvCache,
    compute: &ComputeBuffers,
    compute_note: &ComputeNote,
) -> Result<DeviceMemory, CoreError> {
    let mut host_lines = Vec::new();
    let host_prefix = if opts.gpus.is_empty() { "CPU" } else { "CUDA_Host" };
    for b in buffers.iter().filter(|b| b.device == Device::Cpu) {
        // a mapped range that spans other devices' (or repacked) tensors
        // costs only its host tensors' pages: count those, show the range
        let (bytes, explain) = if b.name == BufferType::CpuMapped && b.bytes != b.used_bytes {
            (
                b.used_bytes,
                b.explain
                    .clone()
                    .term("counted (host tensors' pages)", b.used_bytes)
                    .term("mapped range as llama.cpp logs it", b.bytes),
            )
        } else {
            (b.bytes, b.explain.clone())
        };
        host_lines.push(MemoryLine {
            kind: LineKind::Model,
            label: format!("{} model buffer", b.name),
            bytes,
            explain,
        });
    }
    for c in kv.buffers.iter().filter(|c| c.device == Device::Cpu) {
        host_lines.push(MemoryLine {
            kind: c.kind.into(),
            label: format!("CPU {} buffer", c.kind),
            bytes: c.bytes,
            explain: c.explain.clone(),
        });
    }
    for c in compute.buffers.iter().filter(|c| c.device == Device::Cpu) {
        host_lines.push(MemoryLine {
            kind: LineKind::Compute,
            label: format!("{host_prefix} compute buffer"),
            bytes: c.bytes,
            explain: compute_note.explain(Device::Cpu),
        });
    }
    host_lines.push(MemoryLine {
        kind: LineKind::Output,
        label: format!("{host_prefix} output buffer"),
        bytes: output_bytes,
        explain: Explanation::new("n_vocab × max(1, parallel) × 4 B (f32 logits of one output per sequence)")
            .term("n_vocab", model.n_vocab)
            .term("sequences", opts.parallel)
            .note("llama_context::output_reserve"),
    });
    let host_total = sum("host total", &host_lines.iter().map(|l| l.bytes).collect::<Vec<_>>())?;
    Ok(DeviceMemory {
        device: Device::Cpu,
        name: "host".into(),
        lines: host_lines,
        total_bytes: host_total,
        capacity_bytes: None,
    })
}

/// Which model `llama-server` loads: a local file (`-m`), or a file of a
/// Hugging Face repo, which llama.cpp downloads itself (`--hf-repo`,
/// `--hf-file`; the other shards of a split model come with the first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelArg {
    File(String),
    Hub { repo: String, file: String },
}

impl From<&str> for ModelArg {
    fn from(path: &str) -> ModelArg {
        ModelArg::File(path.to_string())
    }
}

impl ModelArg {
    fn flags(&self) -> String {
        match self {
            ModelArg::File(p) => format!("-m {}", shell_quote(p)),
            ModelArg::Hub { repo, file } => format!("--hf-repo {} --hf-file {}", shell_quote(repo), shell_quote(file)),
        }
    }
}

/// The llama.cpp command line for a plan.
pub fn command_line(model_arg: &ModelArg, model: &LlamaModel, opts: &LlamaCppOptions, p: &LlamaCppPlan) -> String {
    let mut c = format!("llama-server {}", model_arg.flags());
    c.push_str(&format!(" -c {}", p.context.n_ctx));
    let ngl = if opts.gpus.is_empty() { 0 } else { p.n_gpu_layers.min(model.n_layer as u64 + 1) };
    c.push_str(&format!(" -ngl {ngl}"));
    if opts.gpus.len() > 1 {
        let shares: Vec<String> = if opts.tensor_split.is_empty() {
            default_split(&opts.gpus).iter().map(|s| trim_float(*s)).collect()
        } else {
            opts.tensor_split.iter().map(|s| trim_float(*s)).collect()
        };
        c.push_str(&format!(" -ts {}", shares.join(",")));
    }
    c.push_str(&format!(" -fa {}", if p.flash_attn { "on" } else { "off" }));
    if opts.cache_type_k != GgmlType::F16 {
        c.push_str(&format!(" -ctk {}", opts.cache_type_k));
    }
    if opts.cache_type_v != GgmlType::F16 {
        c.push_str(&format!(" -ctv {}", opts.cache_type_v));
    }
    c.push_str(&format!(" -np {}", opts.parallel));
    if opts.kv_unified {
        c.push_str(" --kv-unified");
    }
    if opts.ubatch != DEFAULT_UBATCH {
        c.push_str(&format!(" -ub {}", opts.ubatch));
    }
    if opts.batch != DEFAULT_BATCH {
        c.push_str(&format!(" -b {}", opts.batch));
    }
    if !opts.offload_kqv {
        c.push_str(" --no-kv-offload");
    }
    if opts.swa_full {
        c.push_str(" --swa-full");
    }
    if !opts.mmap {
        c.push_str(" --no-mmap");
    }
    if !opts.op_offload {
        c.push_str(" --no-op-offload");
    }
    if !opts.cpu_repack {
        c.push_str(" --no-repack");
    }
    for (p, d) in &opts.override_tensor {
        let buft = match d {
            Device::Cpu => "CPU".to_string(),
            Device::Gpu(g) => format!("CUDA{g}"),
        };
        c.push_str(&format!(" -ot '{p}={buft}'"));
    }
    if opts.n_cpu_moe >= crate::options::CPU_MOE_ALL {
        c.push_str(" --cpu-moe");
    } else if opts.n_cpu_moe > 0 {
        c.push_str(&format!(" --n-cpu-moe {}", opts.n_cpu_moe));
    }
    c.push_str(&crate::companion::command_flags(&opts.companions));
    c
}

/// The `-ts` llama.cpp uses without one: proportional to each GPU's
/// memory (whole GiB, as a user would type it), or equal shares when a
/// GPU's memory is not known.
fn default_split(gpus: &[GpuSlot]) -> Vec<f64> {
    match gpus.iter().map(|g| g.memory_bytes).collect::<Option<Vec<u64>>>() {
        Some(mem) => mem.iter().map(|m| (m / (1 << 30)).max(1) as f64).collect(),
        None => vec![1.0; gpus.len()],
    }
}

fn trim_float(v: f64) -> String {
    format!("{v}")
}

/// Where the context search stops: the model's trained context, at least
/// [`CONTEXT_SEARCH_MIN`] (a model that declares less, or none, is still
/// searched up to llama.cpp's default `-c`) and at most
/// [`CONTEXT_SEARCH_MAX`] (2^21 tokens: above every trained context
/// published; each probe is a full plan, and the search is binary, so the
/// cap bounds it to ~13 plans). llama.cpp itself accepts more than the
/// trained context, with a warning.
pub fn context_search_cap(model: &LlamaModel) -> u64 {
    model.n_ctx_train.clamp(CONTEXT_SEARCH_MIN, CONTEXT_SEARCH_MAX)
}

/// Lowest cap of the context search: llama.cpp's default `-c`.
pub const CONTEXT_SEARCH_MIN: u64 = DEFAULT_CTX_SIZE;
/// Highest cap of the context search (2^21 tokens).
pub const CONTEXT_SEARCH_MAX: u64 = 1 << 21;

/// What the given GPUs allow around one plan.
#[derive(Debug, Clone, PartialEq)]
pub struct FitSearch {
    /// every GPU holds the plan
    pub fits: bool,
    /// largest `-ngl` that fits at the requested context (None: not even 0)
    pub max_gpu_layers: Option<u64>,
    /// largest context (a multiple of 256) that fits at the requested `-ngl`
    pub max_context: Option<u64>,
    /// where the context search stopped ([`context_search_cap`])
    pub max_context_cap: u64,
    /// the command line at the largest `-ngl`, when it differs from the
    /// plan's own (the one worth copying)
    pub max_gpu_layers_command: Option<String>,
    pub explain: Explanation,
}

/// The largest `-ngl` and context that fit the options' GPUs, around
/// `plan` (the plan of `opts`). `None` when there is no GPU or a GPU's
/// memory is not known: nothing to fit against.
pub fn fit_search(
    model_arg: &ModelArg,
    model: &LlamaModel,
    opts: &LlamaCppOptions,
    plan: &LlamaCppPlan,
) -> Result<Option<FitSearch>, CoreError> {
    if opts.gpus.is_empty() || opts.gpus.iter().any(|g| g.memory_bytes.is_none()) {
        return Ok(None);
    }
    let max_gpu_layers = max_gpu_layers(model, opts)?;
    let cap = context_search_cap(model);
    let max_context = max_context(model, opts, cap)?;
    let max_gpu_layers_command = match max_gpu_layers {
        Some(n) if n != plan.n_gpu_layers => {
            let mut o = opts.clone();
            o.n_gpu_layers = Some(n);
            let p = self::plan(model, &o)?;
            Some(command_line(model_arg, model, &o, &p))
        }
        _ => None,
    };
    let explain = Explanation::new(
        "fits when, on every GPU, model + KV + compute buffers + reserve ≤ memory; largest -ngl: the highest 0..=n_layer+1 whose plan fits; largest context: binary search over multiples of 256 up to the context search cap",
    )
    .term("GPUs", opts.gpus.iter().map(|g| g.name.clone()).collect::<Vec<_>>().join(", "))
    .term("reserve per GPU", opts.gpu_reserve)
    .term("context search cap", cap)
    .note(format!(
        "cap = the trained context clamped to [{CONTEXT_SEARCH_MIN}, 2^{}] (vramfit_llamacpp::plan::context_search_cap)",
        CONTEXT_SEARCH_MAX.ilog2()
    ));
    Ok(Some(FitSearch {
        fits: plan.fits(),
        max_gpu_layers,
        max_context,
        max_context_cap: cap,
        max_gpu_layers_command,
        explain,
    }))
}

/// The largest `-ngl` whose plan fits every GPU (None: not even `-ngl 0`).
pub fn max_gpu_layers(model: &LlamaModel, opts: &LlamaCppOptions) -> Result<Option<u64>, CoreError> {
    let top = model.n_layer as u64 + 1;
    for ngl in (0..=top).rev() {
        let mut o = opts.clone();
        o.n_gpu_layers = Some(ngl);
        if plan(model, &o)?.fits() {
            return Ok(Some(ngl));
        }
    }
    Ok(None)
}

/// The largest context (a multiple of 256, at most the training context
/// unless `cap` is larger) whose plan fits every GPU at the options' `-ngl`.
pub fn max_context(model: &LlamaModel, opts: &LlamaCppOptions, cap: u64) -> Result<Option<u64>, CoreError> {
    let step = crate::kv::CTX_PAD;
    let fits = |ctx: u64| -> Result<bool, CoreError> {
        let mut o = opts.clone();
        o.ctx_size = ctx;
        Ok(plan(model, &o)?.fits())
    };
    let hi_steps = (cap / step).max(1);
    if !fits(step)? {
        return Ok(None);
    }
    let (mut lo, mut hi) = (1u64, hi_steps);
    if fits(hi * step)? {
        return Ok(Some(hi * step));
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid * step)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(Some(lo * step))
}

/// `-ot/--override-tensor`: compile the patterns, check their GPUs, and
/// say how many tensors each moved.
fn tensor_overrides(
    model: &LlamaModel,
    opts: &LlamaCppOptions,
    placement: &mut Placement,
    notes: &mut Vec<String>,
) -> Result<(), CoreError> {
    if opts.override_tensor.is_empty() {
        return Ok(());
    }
    for (p, d) in &opts.override_tensor {
        if let Device::Gpu(g) = d {
            if *g as usize >= opts.gpus.len() {
                return Err(CoreError::invalid(
                    "override-tensor",
                    format!("'{p}=CUDA{g}' names a GPU the launch does not have ({} GPUs)", opts.gpus.len()),
                ));
            }
        }
    }
    placement.overrides = crate::placement::TensorOverrides::new(opts.override_tensor.clone())
        .map_err(|e| CoreError::invalid("override-tensor", e))?;
    for (p, d) in &opts.override_tensor {
        let single = crate::placement::TensorOverrides::new(vec![(p.clone(), *d)])
            .map_err(|e| CoreError::invalid("override-tensor", e))?;
        let n = model.tensors.iter().filter(|t| single.device_of(&t.name).is_some()).count();
        let target = match d {
            Device::Cpu => {
                "CPU (llama.cpp logs 'buffer type overridden to CUDA_Host' with a GPU, kept in CPU_Mapped with mmap)"
                    .to_string()
            }
            Device::Gpu(g) => format!("CUDA{g}"),
        };
        notes.push(format!("-ot {p}: {n} tensors match, placed on {target}"));
    }
    Ok(())
}

/// `--n-cpu-moe` / `--cpu-moe`: the routed experts of the first layers
/// stay on the host (see `placement::is_routed_expert`), with a note.
fn experts_on_host(model: &LlamaModel, opts: &LlamaCppOptions, placement: &mut Placement, notes: &mut Vec<String>) {
    if opts.n_cpu_moe > 0 && model.experts.is_some() {
        placement.host_expert_layers = opts.n_cpu_moe.min(model.n_layer as u64) as u32;
        let moved = model
            .tensors
            .iter()
            .filter(|t| placement.tensor_device(t) == Device::Cpu && placement.slot_device(t.slot) != Device::Cpu)
            .count();
        notes.push(format!(
            "{}: the routed experts of layers 0–{} stay in host memory ({moved} tensors moved off a GPU; llama.cpp logs each as 'tensor blk.N.ffn_…_exps.weight (… MiB …) buffer type overridden to CUDA_Host', demoted to CPU_Mapped with mmap); with batches of 32 tokens or more the GPU copies each layer's experts into its compute buffer to run them",
            if opts.n_cpu_moe >= crate::options::CPU_MOE_ALL { "--cpu-moe".to_string() } else { format!("--n-cpu-moe {}", opts.n_cpu_moe) },
            placement.host_expert_layers - 1
        ));
    } else if opts.n_cpu_moe > 0 {
        notes.push("--n-cpu-moe / --cpu-moe: the model has no experts, nothing moves".to_string());
    }
}

/// Whether the CPU repacks host matrices on this launch: only without a
/// GPU, or on builds up to `LAST_REPACK_BESIDE_GPU` (see `crate::build`).
fn effective_repack(
    model: &LlamaModel,
    opts: &LlamaCppOptions,
    rules: crate::build::BuildRules,
    placement: &Placement,
    notes: &mut Vec<String>,
) -> bool {
    // the CPU repacks host matrices when no GPU host buffer type comes
    // first in its list (a build without GPUs), or on builds up to
    // LAST_REPACK_BESIDE_GPU (see crate::build)
    let cpu_repack = opts.cpu_repack && (opts.gpus.is_empty() || rules.repack_beside_gpu);
    if opts.cpu_repack
        && !cpu_repack
        && model.tensors.iter().any(crate::placement::cpu_repacked)
        && placement_has_host_layers(placement)
    {
        notes.push(format!(
            "no CPU_REPACK buffer: with a GPU, llama.cpp (builds after b{}, PR #12632) keeps host weights in the GPU's host buffer type, demoted to CPU_Mapped with mmap, so they are not repacked",
            crate::build::LAST_REPACK_BESIDE_GPU
        ));
    }
    cpu_repack
}

/// The note that says which build's logits rule was assumed.
fn outputs_note(rules: crate::build::BuildRules, n_outputs: u64, n_tokens: u64) -> String {
    if rules.outputs_for_slots {
        format!(
            "llama.cpp build {}: the compute buffer holds the logits of {n_outputs} of the {n_tokens} tokens of a micro-batch (llama-server's n_outputs_max = min(batch, parallel), PR #23861). llama-bench and llama-perplexity keep all {n_tokens}: pass --llamacpp-build {} to size them",
            rules.label(),
            crate::build::OUTPUTS_FOR_SLOTS - 1
        )
    } else {
        format!(
            "llama.cpp build {}: the compute buffer holds the logits of all {n_tokens} tokens of a micro-batch. Builds from b{} keep them for llama-server's slots only",
            rules.label(),
            crate::build::OUTPUTS_FOR_SLOTS
        )
    }
}

/// The note that says how an MLA file's cache was sized (PR #19067).
fn mla_note(rules: crate::build::BuildRules) -> String {
    if rules.v_less_mla {
        format!(
            "llama.cpp build {}: an MLA file keeps only its latent K cache (kv_lora_rank + rope values per cell); V is a view of it and has no buffer (PR #19067). Builds before b{} also stored a V cache of kv_lora_rank values: pass --llamacpp-build {} to size them",
            rules.label(),
            crate::build::V_LESS_MLA,
            crate::build::V_LESS_MLA - 1
        )
    } else {
        format!(
            "llama.cpp build {}: an MLA file keeps a V cache of kv_lora_rank values per cell beside its latent K cache. Builds from b{} keep only K (PR #19067)",
            rules.label(),
            crate::build::V_LESS_MLA
        )
    }
}

/// Some layer (or the output layer) stays on the host.
fn placement_has_host_layers(p: &Placement) -> bool {
    p.layers.contains(&Device::Cpu) || p.output == Device::Cpu
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{slot_of, GraphFamily, LayerHparams, TensorInfo};

    /// A small Llama-shaped model, f16 matrices (64 wide, 4 heads of 16).
    fn tiny(n_layer: u32, n_ctx_train: u64) -> LlamaModel {
        let e = 64;
        let mut names: Vec<(String, GgmlType, Vec<u64>)> =
            vec![("token_embd.weight".into(), GgmlType::F16, vec![e, 32])];
        for il in 0..n_layer {
            for (t, ty, ne) in [
                ("attn_norm.weight", GgmlType::F32, vec![e]),
                ("attn_q.weight", GgmlType::F16, vec![e, e]),
                ("attn_k.weight", GgmlType::F16, vec![e, 32]),
                ("attn_v.weight", GgmlType::F16, vec![e, 32]),
                ("attn_output.weight", GgmlType::F16, vec![e, e]),
                ("ffn_norm.weight", GgmlType::F32, vec![e]),
                ("ffn_gate.weight", GgmlType::F16, vec![e, 128]),
                ("ffn_up.weight", GgmlType::F16, vec![e, 128]),
                ("ffn_down.weight", GgmlType::F16, vec![128, e]),
            ] {
                names.push((format!("blk.{il}.{t}"), ty, ne));
            }
        }
        names.push(("output_norm.weight".into(), GgmlType::F32, vec![e]));
        names.push(("output.weight".into(), GgmlType::F16, vec![e, 32]));
        let mut offset = 0;
        let tensors = names
            .into_iter()
            .map(|(name, ty, ne)| {
                let bytes = ty.nbytes(&ne).unwrap();
                let t = TensorInfo { slot: slot_of(&name), name, ty, ne, bytes, offset };
                offset += bytes.next_multiple_of(32);
                t
            })
            .collect();
        let layer = LayerHparams {
            n_head: 4,
            n_head_kv: 2,
            head_dim_k: 16,
            head_dim_v: 16,
            n_ff: 128,
            sliding: false,
            recurrent: None,
            kv_from: None,
        };
        LlamaModel {
            name: "tiny".into(),
            arch: "llama".into(),
            n_layer,
            n_embd: e,
            n_vocab: 32,
            n_ctx_train,
            layers: vec![layer; n_layer as usize],
            n_swa: 0,
            experts: None,
            causal: true,
            family: GraphFamily::Sequential,
            fused_qkv: false,
            qk_norm: false,
            gated_ffn: true,
            tied_output: false,
            mla: false,
            tensors,
            notes: Vec::new(),
            nextn: None,
        }
    }

    /// build_inp_embd (src/llama-graph.cpp, PR #18898) reserves the f32
    /// embeddings input beside the token path in every graph, never freed:
    /// a CPU-only compute buffer grows by exactly n_embd × n_tokens × 4 B.
    /// tiny: n_embd 64, -c 256 → n_tokens = min(256, -ub 512) = 256, so
    /// 64 × 256 × 4 = 65,536 B (a multiple of the host's 32-B alignment).
    /// b11312 measured it: Qwen3-0.6B 1024 × 512 × 4 = 2.00 MiB
    /// (calibration/data/measured/llamacpp-cpu.jsonl).
    #[test]
    fn embeddings_input_is_reserved_from_its_build() {
        let m = tiny(4, 4096);
        let compute = |build: u64| {
            let o = LlamaCppOptions { ctx_size: 256, build: Some(build), ..on(&[]) };
            plan(&m, &o).unwrap().host.bytes(LineKind::Compute)
        };
        let (before, after) = (compute(crate::build::EMBD_INPUT - 1), compute(crate::build::EMBD_INPUT));
        assert_eq!(after - before, 64 * 256 * 4, "before {before}, after {after}");
    }

    fn on(gpus: &[Option<u64>]) -> LlamaCppOptions {
        LlamaCppOptions {
            gpus: gpus.iter().map(|m| GpuSlot { name: "g".into(), memory_bytes: *m }).collect(),
            gpu_reserve: 0,
            ..LlamaCppOptions::default()
        }
    }

    #[test]
    fn the_context_search_cap_is_the_trained_context_within_bounds() {
        assert_eq!(context_search_cap(&tiny(2, 0)), CONTEXT_SEARCH_MIN);
        assert_eq!(context_search_cap(&tiny(2, 2048)), 4096);
        assert_eq!(context_search_cap(&tiny(2, 131072)), 131072);
        assert_eq!(context_search_cap(&tiny(2, 1 << 30)), CONTEXT_SEARCH_MAX);
    }

    /// A draft model (-md) is planned with the target's launch at the
    /// target's n_ctx (common_speculative_init_result, common/speculative.cpp:
    /// "the draft context holds as many tokens per sequence as the target
    /// context"), its own -ngld and -ctkd/-ctvd, and its lines join the
    /// target's devices. Hand-worked KV: tiny(2) at -c 8192 -np 2, f16:
    /// 2 layers × (K + V) × 2 kv heads × 16 × 2 B × 8192 cells = 2 MiB
    /// (n_ctx_seq = 4096 per stream × 2 streams).
    #[test]
    fn a_draft_model_adds_its_own_weights_kv_and_compute() {
        use crate::companion::{Companions, Draft};
        let target = tiny(4, 8192);
        let base = LlamaCppOptions { ctx_size: 8192, parallel: 2, ..on(&[Some(80 << 30)]) };
        let alone = plan(&target, &base).unwrap();
        let draft = Draft {
            file: "d.gguf".into(),
            model: Box::new(tiny(2, 8192)),
            n_gpu_layers: None,
            cache_type_k: GgmlType::F16,
            cache_type_v: GgmlType::F16,
            ctx_size: None,
            override_tensor: Vec::new(),
        };
        let with = LlamaCppOptions {
            companions: Companions { draft: Some(draft.clone()), ..Companions::default() },
            ..base.clone()
        };
        let p = plan(&target, &with).unwrap();
        let kv = |label: &str| p.gpus[0].lines.iter().filter(|l| l.label == label).map(|l| l.bytes).sum::<u64>();
        assert_eq!(kv("draft: CUDA0 KV buffer"), 2 * 2 * 2 * 16 * 2 * 8192);
        let rules = crate::build::BuildRules::of(None);
        let draft_alone = plan(&draft.model, &draft_options(&base, alone.context, &draft, rules)).unwrap();
        let draft_gpu = draft_alone.gpus[0].total_bytes;
        assert_eq!(draft_alone.gpus[0].bytes(LineKind::Reserve), 0, "one CUDA context per process");
        assert_eq!(p.gpus[0].total_bytes, alone.gpus[0].total_bytes + draft_gpu);
        assert!(p.notes.iter().any(|n| n.starts_with("-md d.gguf")));
        // -ngld 0: the draft's weights and KV stay on the host
        let host_draft = Draft { n_gpu_layers: Some(0), ..draft };
        let o = LlamaCppOptions { companions: Companions { draft: Some(host_draft), ..Companions::default() }, ..base };
        let q = plan(&target, &o).unwrap();
        assert!(q.host.lines.iter().any(|l| l.label == "draft: CPU KV buffer"), "{:?}", q.host.lines);
        assert!(q.gpus[0].total_bytes < p.gpus[0].total_bytes);
    }

    /// Builds before b9109 gave every slot a draft context of its own
    /// (server `load_model`: `params_dft.n_ctx = -cd or llama_n_ctx_seq(ctx)`,
    /// `n_parallel = 1`; `init`: `slot.ctx_dft = llama_init_from_model(…)`
    /// per slot). tiny(2) drafts for tiny(4) at -c 8192 -np 2, f16:
    /// per slot 4096 cells (the target's n_ctx_seq) × 2 layers × (K + V) ×
    /// 2 kv heads × 16 × 2 B = 1 MiB, two contexts 2,097,152 B; with -cd 1024
    /// 262,144 B per context, 524,288 B. The compute and output buffers are
    /// twice one context's. The current build ignores -cd (one context at
    /// the target's n_ctx, 2 MiB as in the test above).
    #[test]
    fn builds_before_b9109_give_each_slot_a_draft_context() {
        use crate::companion::{Companions, Draft};
        let target = tiny(4, 8192);
        let draft = Draft {
            file: "d.gguf".into(),
            model: Box::new(tiny(2, 8192)),
            n_gpu_layers: None,
            cache_type_k: GgmlType::F16,
            cache_type_v: GgmlType::F16,
            ctx_size: None,
            override_tensor: Vec::new(),
        };
        let opts = |d: Draft, build: Option<u64>| LlamaCppOptions {
            ctx_size: 8192,
            parallel: 2,
            build,
            companions: Companions { draft: Some(d), ..Companions::default() },
            ..on(&[Some(80 << 30)])
        };
        let line = |p: &LlamaCppPlan, l: &str| p.gpus[0].lines.iter().find(|x| x.label == l).map(|x| x.bytes);
        let old = plan(&target, &opts(draft.clone(), Some(9108))).unwrap();
        assert_eq!(line(&old, "draft: CUDA0 KV buffer × 2 slot contexts"), Some(2 * 2 * 2 * 16 * 2 * 4096 * 2));
        let rules = crate::build::BuildRules::of(Some(9108));
        let one =
            plan(&draft.model, &draft_options(&opts(draft.clone(), Some(9108)), old.context, &draft, rules)).unwrap();
        assert_eq!((one.context.n_ctx, one.context.streams), (4096, 1));
        let compute = one.gpus[0].bytes(LineKind::Compute);
        assert_eq!(line(&old, "draft: CUDA0 compute buffer × 2 slot contexts"), Some(2 * compute));
        assert_eq!(line(&old, "draft: CUDA0 model buffer"), Some(one.gpus[0].bytes(LineKind::Model)));
        let cd = Draft { ctx_size: Some(1024), ..draft.clone() };
        let old_cd = plan(&target, &opts(cd.clone(), Some(9108))).unwrap();
        assert_eq!(line(&old_cd, "draft: CUDA0 KV buffer × 2 slot contexts"), Some(524_288));
        let cur_cd = plan(&target, &opts(cd, None)).unwrap();
        assert_eq!(line(&cur_cd, "draft: CUDA0 KV buffer"), Some(2 * 2 * 2 * 16 * 2 * 8192));
        assert!(cur_cd.notes.iter().any(|n| n.starts_with("-cd/--ctx-size-draft")), "{:?}", cur_cd.notes);
    }

    /// --spec-type: the target reserves 1 + n_draft outputs per slot
    /// (server_n_outputs_max); a drafter type without -md, and draft-mtp on
    /// the target's own NextN layers, are refused naming the flag.
    #[test]
    fn speculative_types_reserve_draft_outputs_and_need_their_drafter() {
        use crate::companion::{Companions, SpecType, Speculative};
        let target = tiny(2, 8192);
        let spec = |types: Vec<SpecType>| LlamaCppOptions {
            parallel: 4,
            companions: Companions {
                speculative: Speculative { types, ..Speculative::default() },
                ..Companions::default()
            },
            ..on(&[Some(80 << 30)])
        };
        let plain = plan(&target, &spec(vec![])).unwrap();
        let ngram = plan(&target, &spec(vec![SpecType::NgramMod])).unwrap();
        assert!(ngram.gpus[0].bytes(LineKind::Compute) > plain.gpus[0].bytes(LineKind::Compute));
        assert!(ngram.notes.iter().any(|n| n.contains("65 outputs per slot")), "{:?}", ngram.notes);
        let e = plan(&target, &spec(vec![SpecType::DraftSimple])).unwrap_err().to_string();
        assert!(e.contains("spec-type") && e.contains("-md"), "{e}");
        // tiny has no NextN layers to draft with (see crate::mtp's tests)
        let e = plan(&target, &spec(vec![SpecType::DraftMtp])).unwrap_err().to_string();
        assert!(e.contains("draft-mtp") && e.contains("NextN"), "{e}");
        assert_eq!(plan(&target, &spec(vec![SpecType::None])).unwrap().gpus, plain.gpus);
    }

    /// --mmproj: the projector's weights (CUDA-padded) and its warm-up
    /// compute buffer go on CUDA0, or the host with --no-mmproj-offload;
    /// offloaded with no GPU is refused naming the flag.
    #[test]
    fn a_projector_adds_its_lines_to_the_first_gpu() {
        use crate::companion::{ClipEncoder, ClipInput, Companions, Mmproj};
        let target = tiny(2, 8192);
        let mm = Mmproj {
            file: "mmproj.gguf".into(),
            // 1000 f16 elements = 2000 B → 2048 B at CUDA's 128-byte alignment
            tensors: vec![(GgmlType::F16, vec![1000], 2000)],
            encoders: vec![ClipEncoder {
                n_layer: 1,
                n_embd: 64,
                n_head: 4,
                n_ff: 128,
                projection_dim: 64,
                input: ClipInput::Image { size: 32, patch_size: 16, class_token: false },
            }],
            offload: true,
        };
        let with = |mm: Mmproj, gpus: &[Option<u64>]| LlamaCppOptions {
            flash_attn: FlashAttn::On,
            companions: Companions { mmproj: Some(mm), ..Companions::default() },
            ..on(gpus)
        };
        let p = plan(&target, &with(mm.clone(), &[Some(80 << 30)])).unwrap();
        let line = |d: &DeviceMemory, l: &str| d.lines.iter().find(|x| x.label == l).map(|x| x.bytes);
        assert_eq!(line(&p.gpus[0], "mmproj CUDA0 model buffer"), Some(2048));
        // 4 positions: (32·32·3 + 4·64 + max(6·256, 2·256 + 2·4·128) + 4·64)·4 = (3072 + 256 + 1536 + 256)·4
        assert_eq!(line(&p.gpus[0], "mmproj CUDA0 compute buffer"), Some(20_480));
        let host = plan(&target, &with(Mmproj { offload: false, ..mm.clone() }, &[Some(80 << 30)])).unwrap();
        // host buffers align to 32 B: 2000 → 2016
        assert_eq!(line(&host.host, "mmproj CPU model buffer"), Some(2016));
        let e = plan(&target, &with(mm, &[])).unwrap_err();
        assert!(e.to_string().contains("--no-mmproj-offload"), "{e}");
    }

    #[test]
    fn fit_search_needs_every_gpus_memory() {
        let m = tiny(4, 8192);
        let opts = on(&[None]);
        let p = plan(&m, &opts).unwrap();
        assert!(fit_search(&"m.gguf".into(), &m, &opts, &p).unwrap().is_none(), "no memory: nothing to fit");
        let opts = on(&[Some(80 << 30), None]);
        let p = plan(&m, &opts).unwrap();
        assert!(fit_search(&"m.gguf".into(), &m, &opts, &p).unwrap().is_none());
        assert!(fit_search(&"m.gguf".into(), &m, &on(&[]), &p).unwrap().is_none(), "no GPU");
    }

    #[test]
    fn the_max_ngl_command_is_shown_only_when_it_differs() {
        let m = tiny(4, 8192);
        // a big card holds everything: the largest -ngl is the plan's own
        let opts = on(&[Some(80 << 30)]);
        let p = plan(&m, &opts).unwrap();
        let f = fit_search(&"m.gguf".into(), &m, &opts, &p).unwrap().unwrap();
        assert!(f.fits);
        assert_eq!(f.max_gpu_layers, Some(5));
        assert_eq!(f.max_gpu_layers_command, None);
        assert_eq!(f.max_context, Some(8192), "the cap: the trained context");
        assert_eq!(f.max_context_cap, 8192);
        // a card that holds the compute buffers and part of the model
        let all = p.gpus[0].total_bytes;
        let host_only = {
            let mut o = opts.clone();
            o.n_gpu_layers = Some(0);
            plan(&m, &o).unwrap().gpus[0].total_bytes
        };
        let opts = on(&[Some((all + host_only) / 2)]);
        let p = plan(&m, &opts).unwrap();
        let f = fit_search(&"m.gguf".into(), &m, &opts, &p).unwrap().unwrap();
        assert!(!f.fits);
        let n = f.max_gpu_layers.unwrap();
        assert!(n < 5, "{n}");
        let cmd = f.max_gpu_layers_command.unwrap();
        assert!(cmd.starts_with("llama-server -m m.gguf -c 4096 ") && cmd.contains(&format!(" -ngl {n} ")), "{cmd}");
    }

    #[test]
    fn type_tallies_and_totals_are_checked_not_saturated() {
        let mut m = tiny(2, 8192);
        let by = m.tensors_by_type().unwrap();
        assert_eq!(by.iter().map(|(t, _)| *t).collect::<Vec<_>>(), [GgmlType::F32, GgmlType::F16]);
        let total: u64 = by.iter().map(|(_, c)| c.bytes).sum();
        assert_eq!(total, m.weight_bytes().unwrap());
        assert_eq!(by.iter().map(|(_, c)| c.tensors).sum::<u64>(), m.tensors.len() as u64);
        // a tensor claiming more than 2^64 elements (a 1-bit type packs 8 per byte)
        m.tensors[0].ne = vec![1 << 40, 1 << 30];
        assert!(m.tensors_by_type().is_err());
        assert!(m.params().is_err());
        m.tensors[0].ne = vec![64, 32];
        m.tensors[0].bytes = u64::MAX;
        assert!(m.weight_bytes().is_err());
        assert!(m.tensors_by_type().is_err());
    }

    #[test]
    fn command_lines_quote_paths_and_split_by_memory() {
        let m = tiny(2, 8192);
        let opts = on(&[Some(24 << 30), Some(48 << 30)]);
        let p = plan(&m, &opts).unwrap();
        let c = command_line(&"dir with space/it's.gguf".into(), &m, &opts, &p);
        assert!(c.starts_with(r"llama-server -m 'dir with space/it'\''s.gguf' -c 4096 -ngl 3 -ts 24,48 "), "{c}");
        // control characters: bash's $'…' with them escaped, nothing raw
        let c = command_line(&"evil\u{1b}[2J\n.gguf".into(), &m, &opts, &p);
        assert!(c.starts_with(r"llama-server -m $'evil\x1b[2J\x0a.gguf' "), "{c}");
        assert!(!c.chars().any(char::is_control));
        // memory not known: equal shares
        let opts = on(&[None, None]);
        let p = plan(&m, &opts).unwrap();
        assert!(command_line(&"m.gguf".into(), &m, &opts, &p).contains(" -ts 1,1 "));
        // a Hub file: llama.cpp downloads it
        let hub = ModelArg::Hub { repo: "org/name".into(), file: "sub/m-Q4_K_M.gguf".into() };
        assert!(command_line(&hub, &m, &opts, &p)
            .starts_with("llama-server --hf-repo org/name --hf-file sub/m-Q4_K_M.gguf -c 4096 "));
    }
}
