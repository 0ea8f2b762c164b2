//! The `diagnose --json` schema (docs/diagnose.md): serde-only types, built
//! from the engine's values by the `From` impls below. The engine's types
//! may change; these change only with a documented schema change (and a
//! visible diff of the JSON snapshots). Enum values are written as the
//! strings the schema documents.

use serde::Serialize;
use vramfit_diagnose as dg;
use vramfit_diagnose::classify::{Cause, Figure, Fix, FixCost, Missing, OomClass, RunnerUp, Verdict};
use vramfit_diagnose::culprit::{CategoryDelta, CategoryShare, CulpritReport, Rung};
use vramfit_diagnose::ggml::{GgmlBuffer, GgmlLaunch, GgmlOom};
use vramfit_diagnose::lint::{Finding, LintReport};
use vramfit_diagnose::nvidia_smi::{GpuUse, NvidiaSmi, ProcessRow};
use vramfit_diagnose::oom::{
    Activity, Context, DeepSpeedUsage, Engine, EngineSeen, Hint, OomEvent, OomKind, ProcessUse, TorchEra, TorchOom,
    TraceFrame,
};
use vramfit_diagnose::other_frameworks::{BfcStats, OtherOom, VllmProfile, XlaBuffer};
use vramfit_diagnose::size::Size;
use vramfit_diagnose::snapshot::{DeviceReport, Group, LiveAlloc, Point, SegmentUse, Site, SnapOom, SnapshotReport};
use vramfit_diagnose::summary::{Cell, MemorySummary, Pool, Row, SummaryVerdict};

/// Schema key of a verdict class.
pub fn class_key(c: OomClass) -> &'static str {
    c.key()
}

fn cost_key(c: FixCost) -> &'static str {
    match c {
        FixCost::Setting => "setting",
        FixCost::Housekeeping => "housekeeping",
        FixCost::Code => "code",
        FixCost::Workload => "workload",
        FixCost::Hardware => "hardware",
    }
}

fn era_key(e: TorchEra) -> &'static str {
    match e {
        TorchEra::Cached => "cached",
        TorchEra::Reserved => "reserved",
        TorchEra::Sentences => "sentences",
        TorchEra::Parenthesised => "parenthesised",
    }
}

fn hint_key(h: Hint) -> &'static str {
    match h {
        Hint::MaxSplitSizeMb => "max_split_size_mb",
        Hint::ExpandableSegments => "expandable_segments",
    }
}

fn activity_key(a: Activity) -> &'static str {
    match a {
        Activity::OptimizerStep => "optimizer_step",
        Activity::Backward => "backward",
        Activity::Forward => "forward",
        Activity::Setup => "setup",
        Activity::CheckpointSave => "checkpoint_save",
        Activity::Generation => "generation",
    }
}

fn pool_key(p: Pool) -> &'static str {
    match p {
        Pool::All => "all",
        Pool::Large => "large",
        Pool::Small => "small",
    }
}

/// A size as printed: its bytes, the rounding the print allows, the text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeJson {
    pub bytes: u64,
    pub tolerance_bytes: u64,
    pub text: String,
}

impl From<&Size> for SizeJson {
    fn from(s: &Size) -> Self {
        SizeJson { bytes: s.bytes, tolerance_bytes: s.tolerance, text: s.text.clone() }
    }
}

fn size(s: &Option<Size>) -> Option<SizeJson> {
    s.as_ref().map(SizeJson::from)
}

// ------------------------------------------------------------------ event

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrameJson {
    pub file: String,
    pub line: u64,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeepSpeedUsageJson {
    pub line: usize,
    pub allocated_bytes: u64,
    pub max_allocated_bytes: u64,
    pub reserved_bytes: u64,
    pub max_reserved_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuUseJson {
    pub index: u32,
    pub used_bytes: u64,
    pub total_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessRowJson {
    pub gpu: u32,
    pub pid: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    pub used_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NvidiaSmiJson {
    pub line: usize,
    pub gpus: Vec<GpuUseJson>,
    pub processes: Vec<ProcessRowJson>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ContextJson {
    pub frames: Vec<FrameJson>,
    pub activity: Option<&'static str>,
    pub forward_of: Option<String>,
    pub deepspeed: bool,
    pub deepspeed_usage: Option<DeepSpeedUsageJson>,
    pub nvidia_smi: Option<NvidiaSmiJson>,
    pub engine: Option<EngineJson>,
}

/// The engine seen in the log (whose memory is outside PyTorch).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineJson {
    pub name: &'static str,
    pub line: usize,
    pub non_torch_bytes: Option<u64>,
    pub cuda_graph_bytes: Option<u64>,
}

impl From<&EngineSeen> for EngineJson {
    fn from(e: &EngineSeen) -> Self {
        EngineJson {
            name: match e.engine {
                Engine::Vllm => "vllm",
                Engine::Sglang => "sglang",
                Engine::Distributed => "distributed",
            },
            line: e.line,
            non_torch_bytes: e.non_torch_bytes,
            cuda_graph_bytes: e.cuda_graph_bytes,
        }
    }
}

impl From<&TraceFrame> for FrameJson {
    fn from(f: &TraceFrame) -> Self {
        FrameJson { file: f.file.clone(), line: f.line, name: f.name.clone() }
    }
}

impl From<&DeepSpeedUsage> for DeepSpeedUsageJson {
    fn from(u: &DeepSpeedUsage) -> Self {
        DeepSpeedUsageJson {
            line: u.line,
            allocated_bytes: u.allocated,
            max_allocated_bytes: u.max_allocated,
            reserved_bytes: u.reserved,
            max_reserved_bytes: u.max_reserved,
        }
    }
}

impl From<&GpuUse> for GpuUseJson {
    fn from(g: &GpuUse) -> Self {
        GpuUseJson { index: g.index, used_bytes: g.used, total_bytes: g.total }
    }
}

impl From<&ProcessRow> for ProcessRowJson {
    fn from(p: &ProcessRow) -> Self {
        ProcessRowJson { gpu: p.gpu, pid: p.pid, kind: p.kind.clone(), name: p.name.clone(), used_bytes: p.used }
    }
}

impl From<&NvidiaSmi> for NvidiaSmiJson {
    fn from(t: &NvidiaSmi) -> Self {
        NvidiaSmiJson {
            line: t.line,
            gpus: t.gpus.iter().map(Into::into).collect(),
            processes: t.processes.iter().map(Into::into).collect(),
        }
    }
}

impl From<&Context> for ContextJson {
    fn from(c: &Context) -> Self {
        ContextJson {
            frames: c.frames.iter().map(Into::into).collect(),
            activity: c.activity.map(activity_key),
            forward_of: c.forward_of.clone(),
            deepspeed: c.deepspeed,
            deepspeed_usage: c.deepspeed_usage.as_ref().map(Into::into),
            nvidia_smi: c.nvidia_smi.as_ref().map(Into::into),
            engine: c.engine.as_ref().map(Into::into),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessUseJson {
    pub pid: u64,
    pub used: SizeJson,
}

/// A PyTorch caching-allocator message, figures as printed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TorchMessageJson {
    pub backend: String,
    pub era: &'static str,
    pub device: u32,
    pub requested: SizeJson,
    pub total: SizeJson,
    pub free: SizeJson,
    pub allocated: SizeJson,
    pub reserved: Option<SizeJson>,
    pub unallocated: Option<SizeJson>,
    pub allowed: Option<SizeJson>,
    pub private_pools: Option<SizeJson>,
    pub this_process: Option<SizeJson>,
    pub processes: Vec<ProcessUseJson>,
    pub hint: Option<&'static str>,
}

/// A PyTorch message with figures missing (cut or trimmed when pasted):
/// every figure it holds, the rest null and named in `missing`. Without a
/// single device figure (only the request, or not even that) all are null.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TorchPartialJson {
    pub requested: Option<SizeJson>,
    pub text: String,
    pub backend: Option<String>,
    pub era: Option<&'static str>,
    pub device: Option<u32>,
    pub total: Option<SizeJson>,
    pub free: Option<SizeJson>,
    pub allocated: Option<SizeJson>,
    pub reserved: Option<SizeJson>,
    pub unallocated: Option<SizeJson>,
    pub allowed: Option<SizeJson>,
    pub private_pools: Option<SizeJson>,
    pub this_process: Option<SizeJson>,
    pub processes: Vec<ProcessUseJson>,
    pub hint: Option<&'static str>,
    /// figures the message's era prints that the text did not hold
    pub missing: Vec<&'static str>,
}

impl From<&TorchOom> for TorchPartialJson {
    fn from(t: &TorchOom) -> Self {
        TorchPartialJson {
            requested: Some((&t.requested).into()),
            text: t.text.clone().unwrap_or_default(),
            backend: Some(t.backend.clone()),
            era: Some(era_key(t.era)),
            device: t.device,
            total: size(&t.total),
            free: size(&t.free),
            allocated: size(&t.allocated),
            reserved: size(&t.reserved),
            unallocated: size(&t.unallocated),
            allowed: size(&t.allowed),
            private_pools: size(&t.private_pools),
            this_process: size(&t.this_process),
            processes: t.processes.iter().map(Into::into).collect(),
            hint: t.hint.map(hint_key),
            missing: t.missing.clone(),
        }
    }
}

impl From<&ProcessUse> for ProcessUseJson {
    fn from(p: &ProcessUse) -> Self {
        ProcessUseJson { pid: p.pid, used: (&p.used).into() }
    }
}

impl TorchMessageJson {
    /// The complete message's JSON, or `None` when a figure is missing.
    fn complete(t: &TorchOom) -> Option<Self> {
        if !t.missing.is_empty() {
            return None;
        }
        Some(TorchMessageJson {
            backend: t.backend.clone(),
            era: era_key(t.era),
            device: t.device?,
            requested: (&t.requested).into(),
            total: t.total.as_ref()?.into(),
            free: t.free.as_ref()?.into(),
            allocated: t.allocated.as_ref()?.into(),
            reserved: size(&t.reserved),
            unallocated: size(&t.unallocated),
            allowed: size(&t.allowed),
            private_pools: size(&t.private_pools),
            this_process: size(&t.this_process),
            processes: t.processes.iter().map(Into::into).collect(),
            hint: t.hint.map(hint_key),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct XlaBufferJson {
    pub size: SizeJson,
    pub shape: Option<String>,
    pub operator: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VllmProfileJson {
    pub total_gpu_memory_bytes: Option<u64>,
    pub initial_memory_usage_bytes: Option<u64>,
    pub peak_torch_memory_bytes: Option<u64>,
    pub non_torch_memory_bytes: Option<u64>,
    pub kv_cache_size_bytes: Option<u64>,
    pub gpu_memory_utilization: Option<f64>,
    pub weights_bytes: Option<u64>,
}

impl From<&XlaBuffer> for XlaBufferJson {
    fn from(b: &XlaBuffer) -> Self {
        XlaBufferJson { size: (&b.size).into(), shape: b.shape.clone(), operator: b.operator.clone() }
    }
}

impl From<&VllmProfile> for VllmProfileJson {
    fn from(p: &VllmProfile) -> Self {
        VllmProfileJson {
            total_gpu_memory_bytes: p.total_gpu_memory,
            initial_memory_usage_bytes: p.initial_memory_usage,
            peak_torch_memory_bytes: p.peak_torch_memory,
            non_torch_memory_bytes: p.non_torch_memory,
            kv_cache_size_bytes: p.kv_cache_size,
            gpu_memory_utilization: p.gpu_memory_utilization,
            weights_bytes: p.weights,
        }
    }
}

fn profile(p: &Option<VllmProfile>) -> Option<VllmProfileJson> {
    p.as_ref().map(Into::into)
}

/// A message of another framework, or one without figures (`kind`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OtherMessageJson {
    Xla {
        requested: SizeJson,
        total_allocation: Option<SizeJson>,
        parameter_allocation: Option<SizeJson>,
        temp_allocation: Option<SizeJson>,
        live_out_allocation: Option<SizeJson>,
        fragmentation: Option<SizeJson>,
        peak_buffers: Vec<XlaBufferJson>,
        bfc: Option<BfcStatsJson>,
    },
    #[serde(rename = "tensorflow")]
    TensorFlow {
        shape: Vec<u64>,
        dtype: Option<String>,
        bytes: Option<u64>,
        device: Option<String>,
        gpu: Option<u32>,
        allocator: Option<String>,
        node: Option<String>,
        bfc: Option<BfcStatsJson>,
    },
    VllmNoCacheBlocks {
        profile: Option<VllmProfileJson>,
    },
    VllmMaxLenTokens {
        max_model_len: u64,
        kv_cache_tokens: u64,
        profile: Option<VllmProfileJson>,
    },
    VllmMaxLenMemory {
        max_model_len: u64,
        needed: SizeJson,
        available: SizeJson,
        estimated_max_len: Option<u64>,
        profile: Option<VllmProfileJson>,
    },
    Mps {
        allocated: SizeJson,
        other: SizeJson,
        max_allowed: SizeJson,
        requested: SizeJson,
        pool: String,
    },
    CudaError {
        text: String,
    },
    LegacyThc {
        text: String,
    },
    #[serde(rename = "tensorflow_driver")]
    TensorFlowDriver {
        requested: SizeJson,
    },
    AllocatorRetries {
        retries: u64,
    },
    CudaDriver {
        text: String,
    },
    TorchAsync {
        device: Option<u32>,
        allocated: Option<SizeJson>,
        requested: Option<SizeJson>,
        total: Option<SizeJson>,
        free: Option<SizeJson>,
        limit: Option<SizeJson>,
        truncated: bool,
    },
    VllmStartupFree {
        device: Option<String>,
        free: SizeJson,
        total: SizeJson,
        utilization: f64,
        requested: SizeJson,
        profile: Option<VllmProfileJson>,
    },
    Bfc {
        allocator: String,
        requested: Option<SizeJson>,
        not_a_failure: bool,
        stats: Option<BfcStatsJson>,
    },
    Ggml(GgmlJson),
    Cut {
        form: String,
        text: String,
        missing: Vec<String>,
    },
}

/// The BFC allocator's `Stats:` block (bytes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BfcStatsJson {
    pub limit_bytes: Option<u64>,
    pub in_use_bytes: Option<u64>,
    pub max_in_use_bytes: Option<u64>,
    pub largest_free_block_bytes: Option<u64>,
    pub device_limit_bytes: Option<u64>,
}

impl From<&BfcStats> for BfcStatsJson {
    fn from(s: &BfcStats) -> Self {
        BfcStatsJson {
            limit_bytes: s.limit,
            in_use_bytes: s.in_use,
            max_in_use_bytes: s.max_in_use,
            largest_free_block_bytes: s.largest_free_block,
            device_limit_bytes: s.device_limit,
        }
    }
}

/// A llama.cpp / ggml buffer failure and the launch before it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GgmlJson {
    pub buffer_type: String,
    pub device: Option<u32>,
    pub requested: SizeJson,
    /// `weights`, `kv_cache`, `compute` or `unknown`
    pub buffer: &'static str,
    pub consequence: Option<String>,
    pub retried: bool,
    pub launch: GgmlLaunchJson,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GgmlLaunchJson {
    pub device_name: Option<String>,
    pub free_at_load_bytes: Option<u64>,
    pub total_bytes: Option<u64>,
    pub gpus: Option<u32>,
    /// `[offloaded, of]`
    pub layers_offloaded: Option<[u32; 2]>,
    pub model_buffer_bytes: Option<u64>,
    pub kv_buffer_bytes: Option<u64>,
    pub n_ctx: Option<u64>,
    pub n_ubatch: Option<u64>,
    pub pipeline_copies: Option<u32>,
    pub flash_attn: Option<bool>,
}

fn buffer_key(b: GgmlBuffer) -> &'static str {
    match b {
        GgmlBuffer::Weights => "weights",
        GgmlBuffer::KvCache => "kv_cache",
        GgmlBuffer::Compute => "compute",
        GgmlBuffer::Unknown => "unknown",
    }
}

impl From<&GgmlLaunch> for GgmlLaunchJson {
    fn from(l: &GgmlLaunch) -> Self {
        GgmlLaunchJson {
            device_name: l.device_name.clone(),
            free_at_load_bytes: l.free_at_load,
            total_bytes: l.total,
            gpus: l.gpus,
            layers_offloaded: l.layers_offloaded.map(|(a, b)| [a, b]),
            model_buffer_bytes: l.model_buffer,
            kv_buffer_bytes: l.kv_buffer,
            n_ctx: l.n_ctx,
            n_ubatch: l.n_ubatch,
            pipeline_copies: l.pipeline_copies,
            flash_attn: l.flash_attn,
        }
    }
}

impl From<&GgmlOom> for GgmlJson {
    fn from(g: &GgmlOom) -> Self {
        GgmlJson {
            buffer_type: g.buffer_type.clone(),
            device: g.device,
            requested: (&g.requested).into(),
            buffer: buffer_key(g.buffer),
            consequence: g.consequence.clone(),
            retried: g.retried,
            launch: (&g.launch).into(),
        }
    }
}

impl From<&OtherOom> for OtherMessageJson {
    fn from(o: &OtherOom) -> Self {
        match o {
            OtherOom::Xla {
                requested,
                total_allocation,
                parameter_allocation,
                temp_allocation,
                live_out_allocation,
                fragmentation,
                peak_buffers,
                bfc,
            } => OtherMessageJson::Xla {
                requested: requested.into(),
                total_allocation: size(total_allocation),
                parameter_allocation: size(parameter_allocation),
                temp_allocation: size(temp_allocation),
                live_out_allocation: size(live_out_allocation),
                fragmentation: size(fragmentation),
                peak_buffers: peak_buffers.iter().map(Into::into).collect(),
                bfc: bfc.as_ref().map(Into::into),
            },
            OtherOom::TensorFlow { shape, dtype, bytes, device, gpu, allocator, node, bfc } => {
                OtherMessageJson::TensorFlow {
                    shape: shape.clone(),
                    dtype: dtype.clone(),
                    bytes: *bytes,
                    device: device.clone(),
                    gpu: *gpu,
                    allocator: allocator.clone(),
                    node: node.clone(),
                    bfc: bfc.as_ref().map(Into::into),
                }
            }
            OtherOom::VllmNoCacheBlocks { profile: p } => OtherMessageJson::VllmNoCacheBlocks { profile: profile(p) },
            OtherOom::VllmMaxLenTokens { max_model_len, kv_cache_tokens, profile: p } => {
                OtherMessageJson::VllmMaxLenTokens {
                    max_model_len: *max_model_len,
                    kv_cache_tokens: *kv_cache_tokens,
                    profile: profile(p),
                }
            }
            OtherOom::VllmMaxLenMemory { max_model_len, needed, available, estimated_max_len, profile: p } => {
                OtherMessageJson::VllmMaxLenMemory {
                    max_model_len: *max_model_len,
                    needed: needed.into(),
                    available: available.into(),
                    estimated_max_len: *estimated_max_len,
                    profile: profile(p),
                }
            }
            OtherOom::Mps { allocated, other, max_allowed, requested, pool } => OtherMessageJson::Mps {
                allocated: allocated.into(),
                other: other.into(),
                max_allowed: max_allowed.into(),
                requested: requested.into(),
                pool: pool.clone(),
            },
            OtherOom::CudaError { text } => OtherMessageJson::CudaError { text: text.clone() },
            OtherOom::LegacyThc { text } => OtherMessageJson::LegacyThc { text: text.clone() },
            OtherOom::TensorFlowDriver { requested } => {
                OtherMessageJson::TensorFlowDriver { requested: requested.into() }
            }
            OtherOom::AllocatorRetries { retries } => OtherMessageJson::AllocatorRetries { retries: *retries },
            OtherOom::CudaDriver { text } => OtherMessageJson::CudaDriver { text: text.clone() },
            OtherOom::TorchAsync { device, allocated, requested, total, free, limit, truncated } => {
                OtherMessageJson::TorchAsync {
                    device: *device,
                    allocated: size(allocated),
                    requested: size(requested),
                    total: size(total),
                    free: size(free),
                    limit: size(limit),
                    truncated: *truncated,
                }
            }
            OtherOom::VllmStartupFree { device, free, total, utilization, requested, profile: p } => {
                OtherMessageJson::VllmStartupFree {
                    device: device.clone(),
                    free: free.into(),
                    total: total.into(),
                    utilization: *utilization,
                    requested: requested.into(),
                    profile: profile(p),
                }
            }
            OtherOom::Bfc { allocator, requested, not_a_failure, stats } => OtherMessageJson::Bfc {
                allocator: allocator.clone(),
                requested: size(requested),
                not_a_failure: *not_a_failure,
                stats: stats.as_ref().map(Into::into),
            },
            OtherOom::Ggml(g) => OtherMessageJson::Ggml(g.into()),
            OtherOom::Cut { form, text, missing } => {
                OtherMessageJson::Cut { form: form.clone(), text: text.clone(), missing: missing.clone() }
            }
        }
    }
}

/// The parsed message (`framework`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "framework", rename_all = "snake_case")]
pub enum MessageJson {
    Torch(TorchMessageJson),
    TorchPartial(TorchPartialJson),
    Other(OtherMessageJson),
}

impl From<&OomKind> for MessageJson {
    fn from(k: &OomKind) -> Self {
        match k {
            OomKind::Torch(t) => match TorchMessageJson::complete(t) {
                Some(m) => MessageJson::Torch(m),
                None => MessageJson::TorchPartial(t.into()),
            },
            OomKind::TorchPartial { requested, text } => MessageJson::TorchPartial(TorchPartialJson {
                requested: size(requested),
                text: text.clone(),
                backend: None,
                era: None,
                device: None,
                total: None,
                free: None,
                allocated: None,
                reserved: None,
                unallocated: None,
                allowed: None,
                private_pools: None,
                this_process: None,
                processes: Vec::new(),
                hint: None,
                missing: vec!["total", "free", "allocated", "reserved"],
            }),
            OomKind::Other(o) => MessageJson::Other(o.into()),
        }
    }
}

/// Where a message sat and what surrounded it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EventJson {
    pub line: usize,
    pub occurrences: usize,
    pub lines: Vec<usize>,
    pub rank: Option<u32>,
    pub exception: Option<String>,
    pub context: ContextJson,
    pub message: MessageJson,
}

impl From<&OomEvent> for EventJson {
    fn from(e: &OomEvent) -> Self {
        EventJson {
            line: e.line,
            occurrences: e.occurrences,
            lines: e.lines.clone(),
            rank: e.rank,
            exception: e.exception.clone(),
            context: (&e.context).into(),
            message: (&e.kind).into(),
        }
    }
}

// ---------------------------------------------------------------- verdict

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CauseJson {
    pub class: &'static str,
    pub what: String,
    pub bytes: Option<u64>,
    pub share: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FigureJson {
    pub name: String,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FixJson {
    pub cost: &'static str,
    pub action: String,
    pub why: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerdictJson {
    pub class: &'static str,
    pub main_cause: CauseJson,
    /// the cause that comes next, and why
    pub runner_up: Option<RunnerUpJson>,
    pub contributors: Vec<CauseJson>,
    pub headline: String,
    pub figures: Vec<FigureJson>,
    /// names in `figures` of the figures that decided the verdict
    pub decided_by: Vec<String>,
    /// figures the message should print but the text did not hold
    pub missing: Vec<MissingJson>,
    pub reasoning: Vec<String>,
    pub gap_bytes: Option<u64>,
    pub fixes: Vec<FixJson>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunnerUpJson {
    pub class: &'static str,
    pub what: String,
    pub bytes: Option<u64>,
    pub share: Option<f64>,
    pub why: String,
}

impl From<&RunnerUp> for RunnerUpJson {
    fn from(r: &RunnerUp) -> Self {
        RunnerUpJson {
            class: class_key(r.class),
            what: r.what.clone(),
            bytes: r.bytes,
            share: r.share,
            why: r.why.clone(),
        }
    }
}

/// What the other value of a missing figure would make the verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OtherwiseJson {
    pub class: &'static str,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MissingJson {
    pub figure: String,
    /// the value the verdict assumed (null: none was assumed)
    pub assumed_bytes: Option<u64>,
    /// whether its other possible value changes the cause
    pub matters: bool,
    pub otherwise: Option<OtherwiseJson>,
}

impl From<&Missing> for MissingJson {
    fn from(m: &Missing) -> Self {
        MissingJson {
            figure: m.figure.clone(),
            assumed_bytes: m.assumed_bytes,
            matters: m.matters,
            otherwise: m.otherwise.map(|(c, b)| OtherwiseJson { class: class_key(c), bytes: b }),
        }
    }
}

impl From<&Cause> for CauseJson {
    fn from(c: &Cause) -> Self {
        CauseJson { class: class_key(c.class), what: c.what.clone(), bytes: c.bytes, share: c.share }
    }
}

impl From<&Figure> for FigureJson {
    fn from(f: &Figure) -> Self {
        FigureJson { name: f.name.clone(), bytes: f.bytes }
    }
}

impl From<&Fix> for FixJson {
    fn from(f: &Fix) -> Self {
        FixJson { cost: cost_key(f.cost), action: f.action.clone(), why: f.why.clone() }
    }
}

impl From<&Verdict> for VerdictJson {
    fn from(v: &Verdict) -> Self {
        VerdictJson {
            class: class_key(v.class),
            main_cause: (&v.main_cause).into(),
            runner_up: v.runner_up.as_ref().map(Into::into),
            contributors: v.contributors.iter().map(Into::into).collect(),
            headline: v.headline.clone(),
            figures: v.figures.iter().map(Into::into).collect(),
            decided_by: v.decided_by.clone(),
            missing: v.missing.iter().map(Into::into).collect(),
            reasoning: v.reasoning.clone(),
            gap_bytes: v.gap_bytes,
            fixes: v.fixes.iter().map(Into::into).collect(),
        }
    }
}

/// One OOM with its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiagnosedJson {
    pub event: EventJson,
    pub verdict: VerdictJson,
}

impl From<&dg::Diagnosed> for DiagnosedJson {
    fn from(d: &dg::Diagnosed) -> Self {
        DiagnosedJson { event: (&d.event).into(), verdict: (&d.verdict).into() }
    }
}

// ---------------------------------------------------------------- summary

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellJson {
    pub value: u64,
    pub unit: u64,
    pub is_bytes: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RowJson {
    pub metric: String,
    pub pool: &'static str,
    pub current: CellJson,
    pub peak: CellJson,
    pub total_allocated: CellJson,
    pub total_freed: CellJson,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryJson {
    pub device: Option<u32>,
    pub cuda_ooms: Option<u64>,
    pub cudamalloc_retries: Option<u64>,
    pub rows: Vec<RowJson>,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SummaryVerdictJson {
    pub class: Option<&'static str>,
    pub findings: Vec<String>,
    pub fixes: Vec<String>,
}

impl From<&Cell> for CellJson {
    fn from(c: &Cell) -> Self {
        CellJson { value: c.value, unit: c.unit, is_bytes: c.is_bytes }
    }
}

impl From<&Row> for RowJson {
    fn from(r: &Row) -> Self {
        RowJson {
            metric: r.metric.clone(),
            pool: pool_key(r.pool),
            current: (&r.current).into(),
            peak: (&r.peak).into(),
            total_allocated: (&r.total_allocated).into(),
            total_freed: (&r.total_freed).into(),
        }
    }
}

impl From<&MemorySummary> for SummaryJson {
    fn from(s: &MemorySummary) -> Self {
        SummaryJson {
            device: s.device,
            cuda_ooms: s.cuda_ooms,
            cudamalloc_retries: s.cudamalloc_retries,
            rows: s.rows.iter().map(Into::into).collect(),
            line: s.line,
        }
    }
}

impl From<&SummaryVerdict> for SummaryVerdictJson {
    fn from(v: &SummaryVerdict) -> Self {
        SummaryVerdictJson { class: v.class.map(class_key), findings: v.findings.clone(), fixes: v.fixes.clone() }
    }
}

// --------------------------------------------------------------- snapshot

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointJson {
    pub index: Option<usize>,
    pub time_us: Option<i64>,
    pub allocated_bytes: u64,
    pub reserved_bytes: u64,
    /// allocated bytes by site, in the order of the device's `sites`
    pub by_site_bytes: Vec<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveAllocJson {
    pub address: Option<u64>,
    pub size_bytes: u64,
    pub group: String,
    pub frames: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupJson {
    pub label: String,
    pub bytes: u64,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SegmentUseJson {
    pub address: u64,
    pub segment_type: String,
    pub total_bytes: u64,
    pub allocated_bytes: u64,
    pub free_bytes: u64,
    pub largest_free_block_bytes: u64,
    pub blocks: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnapOomJson {
    pub index: usize,
    pub time_us: Option<i64>,
    pub requested_bytes: u64,
    pub device_free_bytes: Option<u64>,
    pub allocated_then_bytes: u64,
    pub reserved_then_bytes: u64,
    pub class: &'static str,
    pub reasoning: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceReportJson {
    pub device: u64,
    pub reserved_bytes: u64,
    pub allocated_bytes: u64,
    pub requested_bytes: u64,
    pub awaiting_free_bytes: u64,
    pub cached_free_bytes: u64,
    pub largest_free_block_bytes: u64,
    pub segments: usize,
    pub most_fragmented: Vec<SegmentUseJson>,
    pub trace_entries: usize,
    pub timeline: Vec<PointJson>,
    pub peak: Option<PointJson>,
    pub peak_top: Vec<LiveAllocJson>,
    pub groups: Vec<GroupJson>,
    /// the timeline's bands: allocation sites by the most each held
    pub sites: Vec<SiteJson>,
    pub ooms: Vec<SnapOomJson>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnapshotReportJson {
    pub frames: usize,
    pub stacks: usize,
    pub shared_frame_refs: usize,
    pub shared_stack_refs: usize,
    pub devices: Vec<DeviceReportJson>,
}

impl From<&Point> for PointJson {
    fn from(p: &Point) -> Self {
        PointJson {
            index: p.index,
            time_us: p.time_us,
            allocated_bytes: p.allocated,
            reserved_bytes: p.reserved,
            by_site_bytes: p.by_site.clone(),
        }
    }
}

impl From<&LiveAlloc> for LiveAllocJson {
    fn from(l: &LiveAlloc) -> Self {
        LiveAllocJson { address: l.address, size_bytes: l.size, group: l.group.clone(), frames: l.frames.clone() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SiteJson {
    pub label: String,
    pub peak_bytes: u64,
    pub max_bytes: u64,
}

impl From<&Site> for SiteJson {
    fn from(s: &Site) -> Self {
        SiteJson { label: s.label.clone(), peak_bytes: s.peak_bytes, max_bytes: s.max_bytes }
    }
}

impl From<&Group> for GroupJson {
    fn from(g: &Group) -> Self {
        GroupJson { label: g.label.clone(), bytes: g.bytes, count: g.count }
    }
}

impl From<&SegmentUse> for SegmentUseJson {
    fn from(s: &SegmentUse) -> Self {
        SegmentUseJson {
            address: s.address,
            segment_type: s.segment_type.clone(),
            total_bytes: s.total,
            allocated_bytes: s.allocated,
            free_bytes: s.free,
            largest_free_block_bytes: s.largest_free_block,
            blocks: s.blocks,
        }
    }
}

impl From<&SnapOom> for SnapOomJson {
    fn from(o: &SnapOom) -> Self {
        SnapOomJson {
            index: o.index,
            time_us: o.time_us,
            requested_bytes: o.requested,
            device_free_bytes: o.device_free,
            allocated_then_bytes: o.allocated_then,
            reserved_then_bytes: o.reserved_then,
            class: class_key(o.class),
            reasoning: o.reasoning.clone(),
        }
    }
}

impl From<&DeviceReport> for DeviceReportJson {
    fn from(d: &DeviceReport) -> Self {
        DeviceReportJson {
            device: d.device,
            reserved_bytes: d.reserved,
            allocated_bytes: d.allocated,
            requested_bytes: d.requested,
            awaiting_free_bytes: d.awaiting_free,
            cached_free_bytes: d.cached_free,
            largest_free_block_bytes: d.largest_free_block,
            segments: d.segments,
            most_fragmented: d.most_fragmented.iter().map(Into::into).collect(),
            trace_entries: d.trace_entries,
            timeline: d.timeline.iter().map(Into::into).collect(),
            peak: d.peak.as_ref().map(Into::into),
            peak_top: d.peak_top.iter().map(Into::into).collect(),
            groups: d.groups.iter().map(Into::into).collect(),
            sites: d.sites.iter().map(Into::into).collect(),
            ooms: d.ooms.iter().map(Into::into).collect(),
            notes: d.notes.clone(),
        }
    }
}

impl From<&SnapshotReport> for SnapshotReportJson {
    fn from(r: &SnapshotReport) -> Self {
        SnapshotReportJson {
            frames: r.frames,
            stacks: r.stacks,
            shared_frame_refs: r.shared_frame_refs,
            shared_stack_refs: r.shared_stack_refs,
            devices: r.devices.iter().map(Into::into).collect(),
        }
    }
}

// ----------------------------------------------------------------- script

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingJson {
    pub rule: &'static str,
    pub line: usize,
    pub column: usize,
    pub code: String,
    pub why: String,
    pub fix: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LintReportJson {
    pub lines: usize,
    pub error_nodes: usize,
    /// the first findings, by line (see `findings_total`)
    pub findings: Vec<FindingJson>,
    /// all findings, listed or not
    pub findings_total: usize,
}

impl From<&Finding> for FindingJson {
    fn from(f: &Finding) -> Self {
        FindingJson {
            rule: f.rule,
            line: f.line,
            column: f.column,
            code: f.code.clone(),
            why: f.why.clone(),
            fix: f.fix.clone(),
        }
    }
}

impl From<&LintReport> for LintReportJson {
    fn from(r: &LintReport) -> Self {
        LintReportJson {
            lines: r.lines,
            error_nodes: r.error_nodes,
            findings: r.findings.iter().map(Into::into).collect(),
            findings_total: r.findings_total,
        }
    }
}

// -------------------------------------------------------------- diagnosis

/// What the input held, by `kind`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DiagnosisJson {
    Oom { ooms: Vec<DiagnosedJson> },
    Summary { summary: SummaryJson, verdict: SummaryVerdictJson, ooms: Vec<DiagnosedJson> },
    Snapshot { report: SnapshotReportJson },
    Script { report: LintReportJson },
}

impl DiagnosisJson {
    pub fn kind(&self) -> &'static str {
        match self {
            DiagnosisJson::Oom { .. } => "oom",
            DiagnosisJson::Summary { .. } => "summary",
            DiagnosisJson::Snapshot { .. } => "snapshot",
            DiagnosisJson::Script { .. } => "script",
        }
    }
}

impl From<&dg::Diagnosis> for DiagnosisJson {
    fn from(d: &dg::Diagnosis) -> Self {
        let ooms = |o: &[dg::Diagnosed]| o.iter().map(Into::into).collect();
        match d {
            dg::Diagnosis::Oom { ooms: o } => DiagnosisJson::Oom { ooms: ooms(o) },
            dg::Diagnosis::Summary { summary, verdict, ooms: o } => {
                DiagnosisJson::Summary { summary: summary.into(), verdict: verdict.into(), ooms: ooms(o) }
            }
            dg::Diagnosis::Snapshot { report } => DiagnosisJson::Snapshot { report: report.into() },
            dg::Diagnosis::Script { report } => DiagnosisJson::Script { report: report.into() },
        }
    }
}

// --------------------------------------------------------------- estimate

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryDeltaJson {
    pub category: &'static str,
    pub delta_bytes: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RungJson {
    pub name: String,
    pub per_gpu_bytes: Option<u64>,
    pub applied: bool,
    pub detail: String,
    pub changes: Vec<CategoryDeltaJson>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CategoryShareJson {
    pub category: &'static str,
    pub bytes: u64,
    pub share: f64,
}

/// The estimate beside the failure (`--model`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EstimateJson {
    pub card_bytes: u64,
    pub estimate_bytes: u64,
    pub estimate_tensor_bytes: u64,
    pub gap_bytes: u64,
    pub categories: Vec<CategoryShareJson>,
    pub culprit: Option<&'static str>,
    pub culprit_bytes: u64,
    pub failing_need_bytes: Option<u64>,
    pub reasoning: Vec<String>,
    pub cheapest_switch: Option<RungJson>,
    pub ladder: Vec<RungJson>,
}

impl From<&CategoryDelta> for CategoryDeltaJson {
    fn from(c: &CategoryDelta) -> Self {
        CategoryDeltaJson { category: c.category.key(), delta_bytes: c.delta_bytes }
    }
}

impl From<&Rung> for RungJson {
    fn from(r: &Rung) -> Self {
        RungJson {
            name: r.name.clone(),
            per_gpu_bytes: r.per_gpu_bytes,
            applied: r.applied,
            detail: r.detail.clone(),
            changes: r.changes.iter().map(Into::into).collect(),
        }
    }
}

impl From<&CategoryShare> for CategoryShareJson {
    fn from(c: &CategoryShare) -> Self {
        CategoryShareJson { category: c.category.key(), bytes: c.bytes, share: c.share }
    }
}

impl From<&CulpritReport> for EstimateJson {
    fn from(r: &CulpritReport) -> Self {
        EstimateJson {
            card_bytes: r.card_bytes,
            estimate_bytes: r.estimate_bytes,
            estimate_tensor_bytes: r.estimate_tensor_bytes,
            gap_bytes: r.gap_bytes,
            categories: r.categories.iter().map(Into::into).collect(),
            culprit: r.culprit.map(|c| c.key()),
            culprit_bytes: r.culprit_bytes,
            failing_need_bytes: r.failing_need_bytes,
            reasoning: r.reasoning.clone(),
            cheapest_switch: r.cheapest_switch.as_ref().map(Into::into),
            ladder: r.ladder.iter().map(Into::into).collect(),
        }
    }
}
