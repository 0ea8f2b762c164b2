//! Out-of-memory messages in a log: PyTorch's CUDA caching-allocator
//! message of every era, plus the other frameworks
//! ([`crate::other_frameworks`]), found anywhere in the text (inside
//! tracebacks, behind `[rankN]:` prefixes, several per log).
//!
//! Sources of the formats: /work/shared/reference/pytorch-formats.md (a),
//! i.e. `c10/cuda/CUDACachingAllocator.cpp` `DeviceCachingAllocator::malloc`
//! for ≥2.1 and the old `THCCachingAllocator` / 1.x message, where the ≤1.4
//! "cached" figure is `amount_cached - amount_allocated` (cached but
//! unallocated) and the 1.5+ "reserved in total by PyTorch" is all reserved.

use crate::nvidia_smi::{self, NvidiaSmi};
use crate::other_frameworks::{self, BfcStats, OtherOom};
use crate::reflow::{self, Compact};
use crate::size::{csize, parse_size, Size, CSIZE};
use crate::text::{floor_boundary, re, LineIndex};
use regex::Regex;
use serde::Serialize;
use std::sync::OnceLock;

/// Which wording the message used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TorchEra {
    /// ≤1.4: `… free; X cached)` (X = cached but unallocated)
    Cached,
    /// 1.5–2.0: `… free; X reserved in total by PyTorch)`
    Reserved,
    /// ≥2.1: `GPU 0 has a total capacity of … Of the allocated memory …`
    Sentences,
    /// ≤2.0's parenthesis `(GPU 0; … total capacity; …`, cut before the
    /// last figure that tells ≤1.4 (`cached`) from 1.5–2.0 (`reserved`)
    Parenthesised,
}

/// Which tuning hint PyTorch printed after the numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Hint {
    MaxSplitSizeMb,
    ExpandableSegments,
}

/// A process named in the ≥2.1 message (from NVML).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessUse {
    pub pid: u64,
    pub used: Size,
}

/// What the job was doing when it ran out, read off the traceback frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    OptimizerStep,
    Backward,
    Forward,
    /// `deepspeed.initialize` / optimizer construction
    Setup,
    CheckpointSave,
    Generation,
}

impl Activity {
    pub fn name(self) -> &'static str {
        match self {
            Activity::OptimizerStep => "optimizer step",
            Activity::Backward => "autograd backward",
            Activity::Forward => "forward",
            Activity::Setup => "setup (optimizer / engine construction)",
            Activity::CheckpointSave => "checkpoint save",
            Activity::Generation => "generation",
        }
    }
}

/// One frame of a Python traceback printed before the message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceFrame {
    pub file: String,
    pub line: u64,
    pub name: String,
}

/// DeepSpeed's last `see_memory_usage` line before the OOM (GiB, as printed).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeepSpeedUsage {
    pub line: usize,
    /// memory_allocated (MA), bytes
    #[serde(rename = "allocated_bytes")]
    pub allocated: u64,
    #[serde(rename = "max_allocated_bytes")]
    pub max_allocated: u64,
    /// memory_reserved (CA), bytes
    #[serde(rename = "reserved_bytes")]
    pub reserved: u64,
    #[serde(rename = "max_reserved_bytes")]
    pub max_reserved: u64,
}

/// Where the message sat and what surrounded it.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Context {
    /// the traceback frames before the message, outermost first (last 12)
    pub frames: Vec<TraceFrame>,
    pub activity: Option<Activity>,
    /// the innermost `forward` outside torch/ (module file stem)
    pub forward_of: Option<String>,
    pub deepspeed: bool,
    /// the ZeRO stage DeepSpeed's frames show: 3 from `zero/stage3.py`; 1
    /// from `zero/stage_1_and_2.py`, which runs stages 1 and 2 alike (the
    /// stage that shards less, so an estimate built on it is not low)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_stage: Option<u8>,
    pub deepspeed_usage: Option<DeepSpeedUsage>,
    /// an nvidia-smi table pasted in the same text (its GPU memory cells and process rows)
    pub nvidia_smi: Option<NvidiaSmi>,
    /// the engine that ran the job, when the log says (whose memory is outside PyTorch)
    pub engine: Option<EngineSeen>,
}

/// A job runner whose own memory outside PyTorch's allocator is large
/// enough to matter: a serving engine (CUDA graphs' non-pool memory, NCCL
/// and custom all-reduce buffers, kernel images), or several ranks (NCCL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    Vllm,
    Sglang,
    /// torchrun / DeepSpeed / FSDP ranks: NCCL communicators
    Distributed,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Vllm => "vLLM",
            Engine::Sglang => "SGLang",
            Engine::Distributed => "a multi-rank job (NCCL)",
        }
    }
}

/// The engine seen in the log, and what its own lines say it holds
/// outside PyTorch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EngineSeen {
    pub engine: Engine,
    /// the line that named it (1-based)
    pub line: usize,
    /// vLLM's `non_torch_memory` from its profiling line, bytes
    pub non_torch_bytes: Option<u64>,
    /// memory the engine logged for CUDA graph capture, bytes (vLLM
    /// `Graph capturing finished … took X GiB`, SGLang `Capture cuda graph
    /// end … mem usage=X GB`)
    pub cuda_graph_bytes: Option<u64>,
}

/// One PyTorch CUDA OOM, numbers as printed. A figure the text did not
/// hold (the message cut or trimmed when pasted) is `None` and named in
/// `missing`; the verdict says whether it would have changed the cause.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TorchOom {
    /// `CUDA`, `HIP` (ROCm) or `XPU`; `CUDA` when the message was pasted without it
    pub backend: String,
    pub era: TorchEra,
    /// `None`: the message was pasted without its `GPU N`
    pub device: Option<u32>,
    /// the rounded size the allocator asked for (`get_allocation_size`)
    pub requested: Size,
    pub total: Option<Size>,
    /// `cudaMemGetInfo` free on the device
    pub free: Option<Size>,
    /// allocated by PyTorch (≥2.1: including private pools)
    pub allocated: Option<Size>,
    /// 1.5–2.0: reserved in total
    pub reserved: Option<Size>,
    /// ≤1.4 "cached", ≥2.1 "reserved by PyTorch but unallocated"
    pub unallocated: Option<Size>,
    /// `set_per_process_memory_fraction` cap
    pub allowed: Option<Size>,
    pub private_pools: Option<Size>,
    /// ≥2.1 "Including non-PyTorch memory, this process has …"
    pub this_process: Option<Size>,
    /// ≥2.1 "Process N has …"
    pub processes: Vec<ProcessUse>,
    pub hint: Option<Hint>,
    /// figures this era prints that the text did not hold, by name
    /// (`device`, `total`, `free`, `allocated`, `reserved`, `cached`, `unallocated`)
    pub missing: Vec<&'static str>,
    /// the start of the message as pasted, when figures are missing
    pub text: Option<String>,
}

impl TorchOom {
    /// The cache figure as the era prints it (`reserved` 1.5–2.0, else the unallocated bytes).
    fn cache_known(&self) -> bool {
        self.reserved.is_some() || self.unallocated.is_some()
    }
    /// Reserved by the caching allocator, from whichever figures the era printed.
    pub fn reserved_bytes(&self) -> u64 {
        let a = self.allocated.as_ref().map(|s| s.bytes).unwrap_or(0);
        match (&self.reserved, &self.unallocated) {
            (Some(r), _) => r.bytes,
            (None, Some(u)) => a.saturating_add(u.bytes),
            (None, None) => a,
        }
    }
    /// Reserved but not handed to a tensor (the cache).
    pub fn unallocated_bytes(&self) -> u64 {
        let a = self.allocated.as_ref().map(|s| s.bytes).unwrap_or(0);
        match (&self.unallocated, &self.reserved) {
            (Some(u), _) => u.bytes,
            (None, Some(r)) => r.bytes.saturating_sub(a),
            (None, None) => 0,
        }
    }
    /// Rounding slack of the cache figure.
    pub fn unallocated_tolerance(&self) -> u64 {
        let a = self.allocated.as_ref().map(|s| s.tolerance).unwrap_or(0);
        match (&self.unallocated, &self.reserved) {
            (Some(u), _) => u.tolerance,
            (None, Some(r)) => r.tolerance.saturating_add(a),
            (None, None) => 0,
        }
    }
    /// Every figure the verdict needs is present.
    pub fn is_complete(&self) -> bool {
        self.total.is_some() && self.free.is_some() && self.allocated.is_some() && self.cache_known()
    }
}

/// A message found in the text: what kind, where, how often.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OomEvent {
    /// 1-based line of the first occurrence
    pub line: usize,
    /// identical messages (same numbers, device, rank) folded into this one
    pub occurrences: usize,
    /// lines of the occurrences (first 20)
    pub lines: Vec<usize>,
    /// `[rankN]:` prefix of the line, when present
    pub rank: Option<u32>,
    /// the exception type printed before the message
    pub exception: Option<String>,
    pub context: Context,
    /// the parsed message (JSON key `message`)
    #[serde(rename = "message")]
    pub kind: OomKind,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "framework", rename_all = "snake_case")]
pub enum OomKind {
    /// PyTorch caching allocator
    Torch(TorchOom),
    /// "CUDA out of memory. Tried to allocate X" with every figure after it missing
    TorchPartial {
        requested: Option<Size>,
        text: String,
    },
    Other(OtherOom),
}

fn cap_size(c: &regex::Captures, i: usize) -> Option<Size> {
    c.get(i).and_then(|m| csize(m.as_str()))
}

/// One fact of a PyTorch message: its pattern in the compact text.
struct Fact {
    re: &'static OnceLock<Regex>,
    pat: String,
}

impl Fact {
    fn get(&self) -> &'static Regex {
        re(self.re, &self.pat)
    }
}

macro_rules! fact {
    ($name:ident, $pat:expr) => {
        fn $name() -> &'static Regex {
            static C: OnceLock<Regex> = OnceLock::new();
            Fact { re: &C, pat: $pat }.get()
        }
    };
}

// Each sentence of every era, read on its own (the compact text has no
// spaces): any subset, in any order, is used.
fact!(f_requested, format!(r"^(?:(?:CUDA|HIP|XPU)outofmemory\.)?Triedtoallocate{CSIZE}"));
fact!(f_old_gpu, r"\(GPU(\d{1,4});".to_string());
fact!(f_old_total, format!(r"{CSIZE}totalcapacity;"));
fact!(f_old_allocated, format!(r"{CSIZE}alreadyallocated;"));
fact!(f_old_free, format!(r"{CSIZE}free(?:;|\))"));
fact!(f_allowed, format!(r"{CSIZE}allowed;"));
fact!(f_old_reserved, format!(r"{CSIZE}reservedintotalbyPyTorch"));
fact!(f_old_cached, format!(r"{CSIZE}cached(?:\)|$|[^a-z])"));
fact!(f_new_total, format!(r"GPU(\d{{1,4}})hasatotalcapaci?tyof{CSIZE}"));
fact!(f_new_free, format!(r"ofwhich{CSIZE}isfree"));
fact!(f_process, format!(r"Process(\d{{1,12}})has{CSIZE}memoryinuse"));
fact!(f_this, format!(r"thisprocesshas{CSIZE}memoryinuse"));
fact!(f_new_allocated, format!(r"Oftheallocatedmemory{CSIZE}isallocatedbyPyTorch"));
fact!(f_pools, format!(r"with{CSIZE}allocatedinprivatepools"));
fact!(f_new_unallocated, format!(r"{CSIZE}isreservedbyPyTorchbutunallocated"));

fn first(re: &Regex, w: &str, i: usize) -> Option<Size> {
    re.captures(w).and_then(|c| cap_size(&c, i))
}

/// Parse one PyTorch message from its compact form (whitespace and line
/// prefixes removed: [`crate::reflow`]): every sentence is a fact read on
/// its own, so a message wrapped anywhere, cut short or pasted in parts
/// gives every figure it holds.
pub(crate) fn parse_compact(window: &str, shown: &str) -> OomKind {
    let requested = f_requested().captures(window).and_then(|c| cap_size(&c, 1));
    let hint = if window.contains("expandable_segments") {
        Some(Hint::ExpandableSegments)
    } else if window.contains("max_split_size_mb") {
        Some(Hint::MaxSplitSizeMb)
    } else {
        None
    };
    let backend = ["HIP", "XPU"].iter().find(|b| window.starts_with(&format!("{b}outofmemory"))).unwrap_or(&"CUDA");
    let partial = |requested: Option<Size>| OomKind::TorchPartial { requested, text: shown_text(shown) };
    let Some(req) = requested.clone() else { return partial(requested) };
    // ≤2.0: the parenthesis; ≥2.1: sentences. Either is recognised by any of its figures.
    let old_total = first(f_old_total(), window, 1);
    let old_alloc = first(f_old_allocated(), window, 1);
    let old_free = first(f_old_free(), window, 1);
    let old_reserved = first(f_old_reserved(), window, 1);
    let old_cached = first(f_old_cached(), window, 1);
    let old_gpu = f_old_gpu().captures(window).and_then(|c| c.get(1)?.as_str().parse().ok());
    let new_head = f_new_total().captures(window);
    let new_free = first(f_new_free(), window, 1);
    let new_alloc = first(f_new_allocated(), window, 1);
    let new_unalloc = first(f_new_unallocated(), window, 1);
    let this_process = first(f_this(), window, 1);
    let processes: Vec<ProcessUse> = f_process()
        .captures_iter(window)
        .filter_map(|p| Some(ProcessUse { pid: p.get(1)?.as_str().parse().ok()?, used: cap_size(&p, 2)? }))
        .take(64)
        .collect();
    let old_any = old_total.is_some()
        || old_alloc.is_some()
        || old_free.is_some()
        || old_reserved.is_some()
        || old_cached.is_some();
    let new_any = new_head.is_some()
        || new_free.is_some()
        || new_alloc.is_some()
        || new_unalloc.is_some()
        || this_process.is_some()
        || !processes.is_empty();
    let mut missing = Vec::new();
    let mut need = |name: &'static str, v: bool| {
        if !v {
            missing.push(name);
        }
    };
    let t = if old_any && !new_any {
        let era = match (&old_reserved, &old_cached) {
            (Some(_), _) => TorchEra::Reserved,
            (None, Some(_)) => TorchEra::Cached,
            (None, None) => TorchEra::Parenthesised,
        };
        need("device", old_gpu.is_some());
        need("total", old_total.is_some());
        need("allocated", old_alloc.is_some());
        need("free", old_free.is_some());
        need(if era == TorchEra::Cached { "cached" } else { "reserved" }, era != TorchEra::Parenthesised);
        TorchOom {
            backend: backend.to_string(),
            era,
            device: old_gpu,
            requested: req,
            total: old_total,
            free: old_free,
            allocated: old_alloc,
            reserved: old_reserved,
            unallocated: if era == TorchEra::Cached { old_cached } else { None },
            allowed: first(f_allowed(), window, 1),
            private_pools: None,
            this_process: None,
            processes: Vec::new(),
            hint,
            text: (!missing.is_empty()).then(|| shown_text(shown)),
            missing,
        }
    } else if new_any {
        let device = new_head.as_ref().and_then(|c| c.get(1)?.as_str().parse().ok());
        let total = new_head.as_ref().and_then(|c| cap_size(c, 2));
        need("device", device.is_some());
        need("total", total.is_some());
        need("free", new_free.is_some());
        need("allocated", new_alloc.is_some());
        need("unallocated", new_unalloc.is_some());
        TorchOom {
            backend: backend.to_string(),
            era: TorchEra::Sentences,
            device,
            requested: req,
            total,
            free: new_free,
            allocated: new_alloc,
            reserved: None,
            unallocated: new_unalloc,
            allowed: first(f_allowed(), window, 1),
            private_pools: first(f_pools(), window, 1),
            this_process,
            processes,
            hint,
            text: (!missing.is_empty()).then(|| shown_text(shown)),
            missing,
        }
    } else {
        return partial(requested);
    };
    OomKind::Torch(t)
}

/// The start of a message as pasted, for a partial one.
fn shown_text(shown: &str) -> String {
    shown.chars().take(300).collect::<String>().trim().to_string()
}

/// Parse one PyTorch message starting at `window` (any layout: wrapped,
/// squashed or as printed).
pub fn parse_torch_message(window: &str) -> OomKind {
    let c = reflow::compact(window, 0, window.len());
    parse_compact(&c.text, window)
}

fn rank_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"\[rank(\d+)\]")
}
fn exc_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"((?:torch\.)?(?:cuda\.)?OutOfMemoryError|RuntimeError|ValueError)")
}
fn frame_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r#"File "([^"\n]{1,500})", line (\d{1,9}), in ([^\s]{1,200})"#)
}
fn ds_usage_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"MA ([\d.]+) GB\s+Max_MA ([\d.]+) GB\s+CA ([\d.]+) GB\s+Max_CA ([\d.]+) GB")
}

/// The longest compact span a single PyTorch message can take (a dozen
/// `Process N` sentences included).
const MESSAGE_WINDOW: usize = 3072;
/// How far back to look for the traceback of a message.
const CONTEXT_BACK: usize = 16 * 1024;
/// How far back to look for DeepSpeed's memory line.
const DS_BACK: usize = 64 * 1024;

/// Classify a traceback's frames (innermost decides).
fn context_from(text: &str, start: usize, line_of: impl Fn(usize) -> usize) -> Context {
    let back = floor_boundary(text, start.saturating_sub(CONTEXT_BACK));
    let before = &text[back..start];
    let tb_start = before.rfind("Traceback (most recent call last)").unwrap_or(0);
    let region = &before[tb_start..];
    let mut frames: Vec<TraceFrame> = frame_re()
        .captures_iter(region)
        .filter_map(|c| {
            Some(TraceFrame {
                file: c.get(1)?.as_str().to_string(),
                line: c.get(2)?.as_str().parse().ok()?,
                name: c.get(3)?.as_str().trim_end_matches(|ch: char| !ch.is_alphanumeric() && ch != '_').to_string(),
            })
        })
        .collect();
    if frames.len() > 12 {
        frames.drain(..frames.len() - 12);
    }
    let deepspeed = frames.iter().any(|f| f.file.contains("deepspeed"));
    let zero_stage = frames.iter().rev().find_map(|f| {
        let file = f.file.replace('\\', "/");
        if file.contains("deepspeed/runtime/zero/stage3.py") {
            Some(3)
        } else if file.contains("deepspeed/runtime/zero/stage_1_and_2.py") {
            Some(1)
        } else {
            None
        }
    });
    let mut activity = None;
    for f in frames.iter().rev() {
        let name = f.name.as_str();
        let file = f.file.replace('\\', "/");
        let a = if name.contains("step") && (file.contains("optim") || name == "_optimizer_step") {
            Some(Activity::OptimizerStep)
        } else if name.contains("backward") || file.contains("torch/autograd") {
            Some(Activity::Backward)
        } else if name == "generate" || name.starts_with("_sample") || name.contains("greedy_search") {
            Some(Activity::Generation)
        } else if name.contains("save") && (file.contains("checkpoint") || name.contains("checkpoint")) {
            Some(Activity::CheckpointSave)
        } else if file.contains("deepspeed")
            && matches!(
                name,
                "_configure_optimizer" | "_configure_zero_optimizer" | "initialize_optimizer_states" | "initialize"
            )
        {
            Some(Activity::Setup)
        } else if name == "forward" || name == "_call_impl" {
            Some(Activity::Forward)
        } else {
            None
        };
        if a.is_some() {
            activity = a;
            break;
        }
    }
    let forward_of = frames
        .iter()
        .rev()
        .find(|f| f.name == "forward" && !f.file.replace('\\', "/").contains("torch/"))
        .map(|f| f.file.rsplit(['/', '\\']).next().unwrap_or(&f.file).trim_end_matches(".py").to_string());
    let ds_back = floor_boundary(text, start.saturating_sub(DS_BACK));
    let deepspeed_usage = ds_usage_re().captures_iter(&text[ds_back..start]).last().and_then(|c| {
        let g = |i: usize| c.get(i).and_then(|m| parse_size(&format!("{} GiB", m.as_str()))).map(|s| s.bytes);
        Some(DeepSpeedUsage {
            line: line_of(ds_back + c.get(0)?.start()),
            allocated: g(1)?,
            max_allocated: g(2)?,
            reserved: g(3)?,
            max_reserved: g(4)?,
        })
    });
    Context {
        frames,
        activity,
        forward_of,
        deepspeed: deepspeed || deepspeed_usage.is_some(),
        zero_stage,
        deepspeed_usage,
        nvidia_smi: None,
        engine: None,
    }
}

fn engine_res() -> &'static [(Engine, Regex); 3] {
    static C: OnceLock<[(Engine, Regex); 3]> = OnceLock::new();
    C.get_or_init(|| {
        let r = |p: &str| Regex::new(p).unwrap_or_else(|e| panic!("bad built-in regex {p}: {e}"));
        [
            (
                Engine::Vllm,
                r(r"\((?:EngineCore|VllmWorker|EngineCore_DP\d+|APIServer)[^)\n]{0,40}pid=\d+\)|/vllm/|vllm\.(?:engine|entrypoints|v1)|Initializing a V1 LLM engine|vLLM (?:API server )?version"),
            ),
            (Engine::Sglang, r(r"/sglang/|sglang\.(?:srt|launch_server)|\[TP\d+\] (?:Load weight|Capture cuda graph)")),
            (Engine::Distributed, r(r"\[rank\d+\]:|NCCL INFO|ProcessGroupNCCL|torch\.distributed\.elastic|deepspeed")),
        ]
    })
}
fn vllm_non_torch_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"non_torch_memory(?: takes |=)([\d.]{1,12}) ?(GiB|GB)")
}
fn graph_mem_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(
        &C,
        r"Graph capturing finished in [\d.]{1,8} secs?, took ([\d.]{1,12}) ?(GiB|GB)|Capture cuda graph end\. [^\n]{0,80}mem usage=([\d.]{1,12}) ?(GB|GiB)",
    )
}

/// How far around a message the engine's own lines are looked for.
const ENGINE_BACK: usize = 256 * 1024;

/// The engine that ran the job, from its log lines before (and just after)
/// the message: the first engine of [`engine_res`] seen, in that order.
fn engine_of(text: &str, at: usize) -> Option<EngineSeen> {
    let a = floor_boundary(text, at.saturating_sub(ENGINE_BACK));
    let b = floor_boundary(text, at.saturating_add(4096));
    let region = &text[a..b];
    let (engine, m) = engine_res().iter().find_map(|(e, r)| r.find(region).map(|m| (*e, m)))?;
    let gib = |v: &str| parse_size(&format!("{v} GiB")).map(|s| s.bytes);
    let non_torch = vllm_non_torch_re().captures_iter(region).last().and_then(|c| gib(c.get(1)?.as_str()));
    let graphs = graph_mem_re().captures_iter(region).last().and_then(|c| gib(c.get(1).or(c.get(3))?.as_str()));
    let line = text[..a + m.start()].matches('\n').count() + 1;
    Some(EngineSeen { engine, line, non_torch_bytes: non_torch, cuda_graph_bytes: graphs })
}

/// Offsets in the compact text where a PyTorch message starts:
/// `CUDA out of memory.` (HIP, XPU) or a bare `Tried to allocate <size>`
/// (pasted without its first sentence). Literal search first.
fn message_starts(c: &str) -> Vec<usize> {
    /// CUDA, ROCm (HIP) and Intel (XPU) builds print the same message
    const HEADS: [&str; 3] = ["CUDAoutofmemory.", "HIPoutofmemory.", "XPUoutofmemory."];
    const TRIED: &str = "Triedtoallocate";
    let mut starts: Vec<usize> = Vec::new();
    let mut tried: Vec<usize> = Vec::new();
    for m in starts_re().find_iter(c) {
        if m.as_str() == TRIED {
            tried.push(m.start());
        } else {
            starts.push(m.start());
        }
    }
    for i in tried {
        // part of a "CUDA out of memory. Tried to allocate" already found?
        let back = floor_boundary(c, i.saturating_sub(HEADS[0].len() + 2));
        if HEADS.iter().any(|h| c[back..i].contains(h)) {
            continue;
        }
        // MPS prints "Tried to allocate" after its own figures (other_frameworks)
        let mps_back = floor_boundary(c, i.saturating_sub(MPS_REACH));
        if c[mps_back..i].contains("MPSbackendoutofmemory") {
            continue;
        }
        // a bare "Tried to allocate" counts only when a size follows it
        let end = floor_boundary(c, i + TRIED.len() + 24);
        if f_requested().is_match(&c[i..end]) {
            starts.push(i);
        }
    }
    starts.sort_unstable();
    starts
}

/// The heads of [`message_starts`], searched together.
fn starts_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"CUDAoutofmemory\.|HIPoutofmemory\.|XPUoutofmemory\.|Triedtoallocate")
}

/// How far (compact bytes) before "Tried to allocate" an MPS message starts.
const MPS_REACH: usize = 160;

/// Most events reported from one input (the rest are counted, not kept).
pub const MAX_EVENTS: usize = 200;

/// The PyTorch messages of one compact chunk, with their original offsets;
/// only those starting before `own_end` (later ones belong to the next chunk).
fn scan_torch(text: &str, c: &Compact, own_end: usize, out: &mut Vec<(usize, OomKind)>) {
    let starts = message_starts(&c.text);
    for (i, &s) in starts.iter().enumerate() {
        let orig = c.orig(s);
        if orig >= own_end {
            break;
        }
        let next = starts.get(i + 1).copied().unwrap_or(c.text.len());
        let end = floor_boundary(&c.text, (s + MESSAGE_WINDOW).min(next));
        let orig_end = floor_boundary(text, c.orig(end).max(orig).min(text.len()));
        out.push((orig, parse_compact(&c.text[s..end], &text[orig..orig_end])));
    }
}

/// Every OOM message in `text`, identical ones folded, in order of first
/// appearance. Messages are read on the compact text ([`crate::reflow`]),
/// so wrapping, reflowing and line prefixes do not matter.
pub fn scan(text: &str) -> Vec<OomEvent> {
    let idx = LineIndex::new(text);
    let smi = nvidia_smi::parse(text);
    let mut raw: Vec<(usize, OomKind)> = Vec::new();
    let chunks = reflow::regions(text);
    for (k, &(s, e)) in chunks.iter().enumerate() {
        // a chunk owns the messages that start before the next chunk of the same span
        let own_end = match chunks.get(k + 1) {
            Some(&(ns, _)) if ns < e => ns,
            _ => e,
        };
        let c = reflow::compact(text, s, e);
        let before = raw.len();
        scan_torch(text, &c, own_end, &mut raw);
        for (o, m) in other_frameworks::scan_compact(text, &c, own_end) {
            raw.push((o, OomKind::Other(m)));
        }
        // messages recognised by their first words only (cut before their figures)
        let found: Vec<usize> = raw[before..].iter().map(|(o, _)| *o).collect();
        for (o, m) in other_frameworks::scan_cut(text, &c, &found, own_end) {
            raw.push((o, OomKind::Other(m)));
        }
    }
    fold(&mut raw);
    raw.sort_by_key(|(s, _)| *s);
    let mut events: Vec<OomEvent> = Vec::new();
    for (s, kind) in raw {
        let line = idx.line(s);
        let prefix = &text[idx.line_start(s).min(s)..s];
        let rank = rank_re().captures(prefix).and_then(|c| c.get(1)?.as_str().parse().ok());
        if let Some(e) = events.iter_mut().find(|e| e.kind == kind && e.rank == rank) {
            e.occurrences += 1;
            if e.lines.len() < 20 {
                e.lines.push(line);
            }
            continue;
        }
        if events.len() >= MAX_EVENTS {
            continue;
        }
        let exception = exc_re().captures_iter(prefix).last().and_then(|c| Some(c.get(1)?.as_str().to_string()));
        let mut context = context_from(text, s, |o| idx.line(o));
        context.nvidia_smi = smi.clone();
        context.engine = engine_of(text, s);
        events.push(OomEvent { line, occurrences: 1, lines: vec![line], rank, exception, context, kind });
    }
    events
}

/// Fold the reports of one failure printed by two layers into one event:
/// the BFC allocator's summary goes into the XLA or TensorFlow error that
/// follows it (same failure), and its "not a failure" warnings are dropped
/// when the text holds a real failure.
fn fold(raw: &mut Vec<(usize, OomKind)>) {
    raw.sort_by_key(|(s, _)| *s);
    let failure_seen = raw.iter().any(|(_, k)| match k {
        OomKind::Other(OtherOom::Bfc { not_a_failure, .. }) => !not_a_failure,
        _ => true,
    });
    let mut pending: Option<(usize, BfcStats)> = None;
    let mut out = Vec::with_capacity(raw.len());
    for (s, k) in raw.drain(..) {
        match k {
            OomKind::Other(OtherOom::Bfc { not_a_failure: true, .. }) if failure_seen => {}
            OomKind::Other(OtherOom::Bfc { stats, not_a_failure: false, allocator, requested })
                if requested.is_some() =>
            {
                // kept as its own event unless an XLA/TF error follows within reach
                pending = Some((out.len(), stats.clone().unwrap_or_default()));
                out.push((s, OomKind::Other(OtherOom::Bfc { stats, not_a_failure: false, allocator, requested })));
            }
            mut k @ OomKind::Other(OtherOom::Xla { .. } | OtherOom::TensorFlow { .. }) => {
                // the error takes the BFC summary printed just before it
                if let OomKind::Other(OtherOom::Xla { bfc, .. } | OtherOom::TensorFlow { bfc, .. }) = &mut k {
                    if bfc.is_none() {
                        *bfc = take_pending(&mut pending, &mut out, s);
                    }
                }
                out.push((s, k));
            }
            other => out.push((s, other)),
        }
    }
    *raw = out.into_iter().flatten_kinds();
}

/// How far after a BFC summary its framework's error may come.
const BFC_REACH: usize = 64 * 1024;

/// The BFC summary printed just before an XLA/TF error: removed as its own
/// event and handed to the error.
fn take_pending(pending: &mut Option<(usize, BfcStats)>, out: &mut [(usize, OomKind)], at: usize) -> Option<BfcStats> {
    let (i, stats) = pending.take()?;
    let (s, k) = out.get_mut(i)?;
    if at.saturating_sub(*s) > BFC_REACH {
        return None;
    }
    // mark the BFC event as folded (removed by `flatten_kinds`)
    *k = OomKind::TorchPartial { requested: None, text: FOLDED.to_string() };
    Some(stats)
}

/// Marks an event folded into the next one.
const FOLDED: &str = "\u{0}folded";

trait FlattenKinds {
    fn flatten_kinds(self) -> Vec<(usize, OomKind)>;
}

impl<I: Iterator<Item = (usize, OomKind)>> FlattenKinds for I {
    fn flatten_kinds(self) -> Vec<(usize, OomKind)> {
        self.filter(|(_, k)| !matches!(k, OomKind::TorchPartial { requested: None, text } if text == FOLDED)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn torch(text: &str) -> TorchOom {
        match scan(text).into_iter().next().map(|e| e.kind) {
            Some(OomKind::Torch(t)) => t,
            other => panic!("not a torch OOM: {other:?}"),
        }
    }

    #[test]
    fn old_cached_form_means_unallocated() {
        // pytorch-formats.md (a) row "≤1.4"
        let t = torch("CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)");
        assert_eq!(t.era, TorchEra::Cached);
        assert_eq!(t.requested.bytes, 13_107_200); // 12.5 × 2^20
        assert_eq!(t.unallocated_bytes(), parse_size("4.68 MiB").unwrap().bytes);
        // reserved = allocated + cached
        assert_eq!(t.reserved_bytes(), parse_size("8.57 MiB").unwrap().bytes + parse_size("4.68 MiB").unwrap().bytes);
    }

    #[test]
    fn new_form_with_processes_and_pools() {
        let t = torch("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.63 GiB. GPU 3 has a total capacity of 79.11 GiB of which 2.61 GiB is free. Process 7 has 1.00 GiB memory in use. Including non-PyTorch memory, this process has 0 bytes memory in use. Of the allocated memory 48.16 GiB is allocated by PyTorch, with 50.00 MiB allocated in private pools (e.g., CUDA Graphs), and 3.48 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.");
        assert_eq!(t.device, Some(3));
        assert_eq!(t.processes, vec![ProcessUse { pid: 7, used: parse_size("1.00 GiB").unwrap() }]);
        assert_eq!(t.this_process.unwrap().bytes, 0);
        assert_eq!(t.private_pools.unwrap().bytes, 50 * 1024 * 1024);
        assert_eq!(t.hint, Some(Hint::ExpandableSegments));
    }

    #[test]
    fn wrapped_and_repeated_messages_fold() {
        let text = "x\nOutOfMemoryError: CUDA out of memory. Tried to allocate 172.00 MiB (GPU 0; 79.35 GiB total capacity; 73.95 GiB already allocated; 12.19 MiB free; 76.80 GiB reserved in total by PyTorch) If \nreserved memory is >> allocated memory try setting max_split_size_mb\nagain:\nOutOfMemoryError: CUDA out of memory. Tried to allocate 172.00 MiB (GPU 0; 79.35 GiB total capacity; 73.95 GiB already allocated; 12.19 MiB free; 76.80 GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb\n";
        let ev = scan(text);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].occurrences, 2);
        assert_eq!(ev[0].lines, vec![2, 5]);
        assert_eq!(ev[0].exception.as_deref(), Some("OutOfMemoryError"));
    }

    #[test]
    fn truncated_message_is_partial() {
        let ev = scan("RuntimeError: CUDA out of memory. Tried to allocate 264.00 MiB (GPU 0; 2.00 GiB total");
        assert!(matches!(&ev[0].kind, OomKind::TorchPartial { requested: Some(r), .. } if r.bytes == 264 << 20));
    }

    #[test]
    fn multibyte_text_does_not_panic() {
        let mut s = "é".repeat(3000);
        s.push_str("CUDA out of memory. Tried to allocate ");
        s.push_str(&"日本".repeat(3000));
        let _ = scan(&s);
    }
}
