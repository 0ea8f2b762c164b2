//! OOMs that are not PyTorch's caching-allocator message: JAX/XLA
//! `RESOURCE_EXHAUSTED`, TensorFlow `OOM when allocating tensor` and its
//! StreamExecutor `CUDA_ERROR_OUT_OF_MEMORY`, vLLM's KV-cache start-up
//! errors, Apple MPS, raw `CUDA error: out of memory` (memory the caching
//! allocator does not manage: context, NCCL, cuBLAS handles), the legacy
//! THC `cuda runtime error (2)`, DeepSpeed's allocator-retry warning, and
//! the 2025–26 forms: PyTorch's `CUDA driver error: out of memory`
//! (expandable segments' driver calls), the cudaMallocAsync backend's
//! `Allocation on device …` (ComfyUI), vLLM V1's start-up free-memory
//! check, XLA/TensorFlow BFC allocator warnings, and llama.cpp / ggml
//! buffer failures ([`crate::ggml`]). DeepSpeed OOMs are PyTorch messages
//! with DeepSpeed frames; they are recognised in [`crate::oom`].
//!
//! Messages are matched on the compact text ([`crate::reflow`]): no
//! whitespace, so wrapped and reflowed messages read the same; the
//! multi-line blocks that follow some (XLA's stats, the BFC summary) are
//! read from the original text.

use crate::ggml::{self, GgmlOom};
use crate::reflow::Compact;
use crate::size::{csize, CSIZE};
use crate::size::{parse_size, Size};
use crate::text::{floor_boundary, re, squash};
use regex::Regex;
use serde::Serialize;
use std::sync::OnceLock;

/// One of XLA's "Peak buffers" entries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct XlaBuffer {
    pub size: Size,
    pub shape: Option<String>,
    pub operator: Option<String>,
}

/// vLLM's memory profile line (`Memory profiling results: …`), bytes.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct VllmProfile {
    #[serde(rename = "total_gpu_memory_bytes")]
    pub total_gpu_memory: Option<u64>,
    #[serde(rename = "initial_memory_usage_bytes")]
    pub initial_memory_usage: Option<u64>,
    #[serde(rename = "peak_torch_memory_bytes")]
    pub peak_torch_memory: Option<u64>,
    #[serde(rename = "non_torch_memory_bytes")]
    pub non_torch_memory: Option<u64>,
    #[serde(rename = "kv_cache_size_bytes")]
    pub kv_cache_size: Option<u64>,
    pub gpu_memory_utilization: Option<f64>,
    /// "Loading model weights took X GB" (vLLM divides by 2^30)
    #[serde(rename = "weights_bytes")]
    pub weights: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum OtherOom {
    /// JAX / XLA (also TF with XLA): `RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes`
    Xla {
        requested: Size,
        /// BufferAssignment stats: total allocation
        total_allocation: Option<Size>,
        parameter_allocation: Option<Size>,
        temp_allocation: Option<Size>,
        live_out_allocation: Option<Size>,
        fragmentation: Option<Size>,
        /// largest first, at most 5
        peak_buffers: Vec<XlaBuffer>,
        /// the BFC allocator's summary printed before the error, when present
        bfc: Option<BfcStats>,
    },
    /// TensorFlow BFC allocator
    #[serde(rename = "tensorflow")]
    TensorFlow {
        shape: Vec<u64>,
        dtype: Option<String>,
        /// shape × dtype size, when both are known
        bytes: Option<u64>,
        device: Option<String>,
        gpu: Option<u32>,
        allocator: Option<String>,
        node: Option<String>,
        /// the BFC allocator's summary printed before the error, when present
        bfc: Option<BfcStats>,
    },
    /// vLLM: no room for a single KV block after weights + profile peak
    VllmNoCacheBlocks { profile: Option<VllmProfile> },
    /// vLLM V0: max_model_len tokens do not fit in the KV cache
    VllmMaxLenTokens { max_model_len: u64, kv_cache_tokens: u64, profile: Option<VllmProfile> },
    /// vLLM V1: one max-length request needs more KV memory than available
    VllmMaxLenMemory {
        max_model_len: u64,
        needed: Size,
        available: Size,
        estimated_max_len: Option<u64>,
        profile: Option<VllmProfile>,
    },
    /// Apple MPS: `MPS backend out of memory (MPS allocated: A, other allocations: O, max allowed: M). Tried to allocate R on private pool`
    Mps { allocated: Size, other: Size, max_allowed: Size, requested: Size, pool: String },
    /// `CUDA error: out of memory` / `CUBLAS_STATUS_ALLOC_FAILED` / `CUDA_ERROR_OUT_OF_MEMORY` / NCCL
    CudaError { text: String },
    /// PyTorch ≤ 0.4 (THC): `cuda runtime error (2) : out of memory at …/THCStorage.cu:58`, no figures
    LegacyThc { text: String },
    /// TensorFlow's StreamExecutor: `failed to allocate 1.51G (1617277696 bytes) from device: CUDA_ERROR_OUT_OF_MEMORY`
    #[serde(rename = "tensorflow_driver")]
    TensorFlowDriver { requested: Size },
    /// DeepSpeed ZeRO-3's warning `N pytorch allocator cache flushes since last step` (the allocator's
    /// `num_alloc_retries`: cudaMalloc failed, the cache was freed and the call retried)
    AllocatorRetries { retries: u64 },
    /// `RuntimeError: CUDA driver error: out of memory`: `C10_CUDA_DRIVER_CHECK` (c10/cuda/driver_api.h),
    /// which in the caching allocator wraps only the expandable-segments driver calls
    /// (`cuMemCreate`, `cuMemMap`, `cuMemSetAccess`); also raised by extensions that call the driver API
    CudaDriver { text: String },
    /// PyTorch's cudaMallocAsync backend (`PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync`, ComfyUI's
    /// default): `Allocation on device 0 would exceed allowed memory. (out of memory) Currently allocated
    /// : A Requested : R Device limit : T Free (according to CUDA): F PyTorch limit (…) : L`. Before
    /// pytorch#168369 the device index (an int8) was printed as a character, so on device 0 a NUL cut the
    /// message to `Allocation on device ` (`truncated`).
    TorchAsync {
        device: Option<u32>,
        allocated: Option<Size>,
        requested: Option<Size>,
        /// `Device limit`: the card's total (`cudaMemGetInfo`)
        total: Option<Size>,
        free: Option<Size>,
        /// `set_per_process_memory_fraction`; 16 EiB (`SIZE_MAX`) when none was set
        limit: Option<Size>,
        truncated: bool,
    },
    /// vLLM V1's start-up check (`request_memory`, vllm/v1/worker/utils.py): `Free memory on device cuda:0
    /// (F/T GiB) on startup is less than desired GPU memory utilization (u, R GiB)`
    VllmStartupFree {
        device: Option<String>,
        free: Size,
        total: Size,
        utilization: f64,
        requested: Size,
        profile: Option<VllmProfile>,
    },
    /// XLA / TensorFlow's BFC allocator: `Allocator (GPU_0_bfc) ran out of memory trying to allocate
    /// 1.25TiB (rounded to N)requested by op …`, or its warning `… with freed_by_count=0. The caller
    /// indicates that this is not a failure`, with the `Stats:` summary that follows
    Bfc {
        allocator: String,
        /// `None`: the summary alone was pasted, without its failure line
        requested: Option<Size>,
        not_a_failure: bool,
        stats: Option<BfcStats>,
    },
    /// llama.cpp / ggml (also inside Ollama, LM Studio, ik_llama.cpp): a backend buffer it could not allocate
    Ggml(GgmlOom),
    /// A message of one of the forms above, recognised by its first words
    /// but cut (or reflowed beyond repair) before the figures its reader
    /// needs: named, with what is missing
    Cut {
        /// `mps`, `vllm_startup_free`, `vllm_max_len_memory`, `vllm_max_len_tokens`, `tensorflow`, `xla`
        form: String,
        text: String,
        missing: Vec<String>,
    },
}

/// The BFC allocator's `Stats:` block (bytes).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct BfcStats {
    /// `Limit`: the region the allocator may use (JAX: 75% of the card by default)
    #[serde(rename = "limit_bytes")]
    pub limit: Option<u64>,
    #[serde(rename = "in_use_bytes")]
    pub in_use: Option<u64>,
    #[serde(rename = "max_in_use_bytes")]
    pub max_in_use: Option<u64>,
    #[serde(rename = "largest_free_block_bytes")]
    pub largest_free_block: Option<u64>,
    /// the device memory XLA plans against, from its compiler's lines nearby
    /// (`… exceeds the base limit (N)`, gpu_hlo_schedule.cc; `Can't reduce
    /// memory use below X (N bytes) by rematerialization`)
    #[serde(rename = "device_limit_bytes")]
    pub device_limit: Option<u64>,
}

/// A size as XLA and vLLM print it, in the original text (`372.76MiB`, `16.00 GiB`).
const XSIZE: &str = r"(\d+(?:\.\d+)? ?(?:[KMGTP]i?B|B|bytes))";
/// The same in the compact text.
const XSIZE_C: &str = r"(\d{1,20}(?:\.\d{1,6})?(?:[KMGTP]i?B|bytes|B))";

macro_rules! cre {
    ($name:ident, $pat:expr) => {
        fn $name() -> &'static Regex {
            static C: OnceLock<Regex> = OnceLock::new();
            re(&C, &$pat)
        }
    };
}

// compact-text patterns (no whitespace)
cre!(xla_re, r"(?i:resource_?exhausted):Outofmemory(?:whiletryingtoallocate|allocating)(\d{1,20})bytes");
cre!(
    tf_re,
    r"OOMwhenallocatingtensor(?:with|of)shape\[([\d,]{0,200})\](?:andtype([a-z0-9_]+?)(?:on|by|$|[^a-z0-9_]))?"
);
cre!(tf_device_re, r"on(/[\w:/.-]{1,200}?)(?:byallocator|$|\[|[^\w:/.-])");
cre!(tf_alloc_re, r"byallocator(\w{1,64}?_bfc|\w{1,64})");
cre!(vllm_none_re, r"Noavailablememoryforthecacheblocks");
cre!(
    vllm_tokens_re,
    r"maxseqlen\((\d{1,12})\)islargerthanthemaximumnumberoftokensthatcanbestoredinKVcache\((\d{1,12})\)"
);
cre!(
    vllm_mem_re,
    format!(
        r"Toserveatleastonerequestwiththemodels?'smaxseqlen\((\d{{1,12}})\),\({XSIZE_C}KVcacheisneeded,whichislargerthantheavailableKVcachememory\({XSIZE_C}\)\.(?:Basedontheavailablememory,theestimatedmaximummodellengthis(\d{{1,12}}))?"
    )
);
cre!(
    vllm_startup_re,
    r"Freememoryondevice([a-z]{2,8}:\d{1,3})?\((\d{1,6}(?:\.\d{1,4})?)/(\d{1,6}(?:\.\d{1,4})?)GiB\)onstartupislessthandesiredGPUmemoryutilization\((\d(?:\.\d{1,6})?),(\d{1,6}(?:\.\d{1,4})?)GiB\)"
);
cre!(
    mps_re,
    format!(
        r"MPSbackendoutofmemory\(MPSallocated:{XSIZE_C},otherallocations:{XSIZE_C},maxallowed:{XSIZE_C}\)\.Triedtoallocate{XSIZE_C}on(private|shared)pool"
    )
);
cre!(
    cuda_err_re,
    r"CUDAerror:outofmemory|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|NCCL.{0,200}?'outofmemory'"
);
cre!(driver_err_re, r"CUDAdrivererror:outofmemory");
cre!(thc_re, r"cudaruntimeerror\(2\):?outofmemory|THCudaCheckFAILfile=.{0,300}?error=2:outofmemory");
cre!(
    tf_driver_re,
    r"failedtoallocate[\d.]{1,12}[KMGT]?\((\d{1,20})bytes\)fromdevice:CUDA_ERROR_OUT_OF_MEMORY(?::outofmemory)?"
);
cre!(retries_re, r"(\d{1,12})pytorchallocatorcacheflushessincelaststep");
cre!(async_head_re, r"Allocationondevice(\d{1,3})?(wouldexceedallowedmemory)?");
cre!(async_alloc_re, format!(r"Currentlyallocated:{CSIZE}"));
cre!(async_req_re, format!(r"Requested:{CSIZE}"));
cre!(async_total_re, format!(r"Devicelimit:{CSIZE}"));
cre!(async_free_re, format!(r"Free\(accordingtoCUDA\):{CSIZE}"));
cre!(async_limit_re, format!(r"memoryfraction\):{CSIZE}"));
cre!(
    bfc_re,
    format!(
        r"Allocator\((\w{{1,64}})\)ranoutofmemorytryingtoallocate{XSIZE_C}(?:\(roundedto(\d{{1,20}})\))?(?:withfreed_by_count=\d{{1,12}}\.Thecallerindicatesthatthisisnotafailure)?"
    )
);

cre!(bfc_summary_re, r"Stats:Limit:");
cre!(base_limit_re, r"exceeds the base limit \((\d{1,20})\)");
cre!(remat_limit_re, r"Can't reduce memory use below [^\n(]{1,20}\((\d{1,20}) bytes\) by rematerialization");

// original-text patterns (the multi-line blocks after a message)
cre!(
    xla_stat_re,
    format!(r"(parameter|constant|maybe_live_out|preallocated temp|total) (allocation|fragmentation):\s+{XSIZE}")
);
cre!(xla_buf_re, format!(r"Buffer \d+:\s+Size: {XSIZE}"));
cre!(tf_node_re, r"\[\[(?:\{\{node ([^}\s]{1,300})|Node: ([^\s=]{1,300}))");
cre!(vllm_profile_re, r"Memory profiling results: ([^\n]{1,600})");
cre!(vllm_weights_re, r"(?:Loading model weights took|Model loading took) ([\d.]{1,12}) ?Gi?B");
cre!(bfc_stat_re, r"(?m)^\s*(Limit|InUse|MaxInUse|LargestFreeBlock):\s+(\d{1,20}(?:\.\d{1,6})?(?:[KMGTP]i?B|B)?)\s*$");

/// Size of one element of a TensorFlow dtype name.
fn tf_dtype_bytes(dtype: &str) -> Option<u64> {
    Some(match dtype {
        "float" | "float32" | "int32" | "uint32" | "qint32" => 4,
        "half" | "float16" | "bfloat16" | "int16" | "uint16" => 2,
        "double" | "float64" | "int64" | "uint64" | "complex64" => 8,
        "int8" | "uint8" | "bool" | "qint8" | "quint8" => 1,
        "complex128" => 16,
        _ => return None,
    })
}

fn vllm_profile(text: &str, before: usize) -> Option<VllmProfile> {
    let back = floor_boundary(text, before.saturating_sub(256 * 1024));
    let region = &text[back..before];
    let mut p = VllmProfile::default();
    let mut any = false;
    if let Some(c) = vllm_profile_re().captures_iter(region).last() {
        for kv in c.get(1)?.as_str().split_whitespace() {
            let Some((k, v)) = kv.split_once('=') else { continue };
            let v = v.trim_end_matches(',');
            let bytes = parse_size(v).map(|s| s.bytes);
            any = true;
            match k {
                "total_gpu_memory" => p.total_gpu_memory = bytes,
                "initial_memory_usage" => p.initial_memory_usage = bytes,
                "peak_torch_memory" => p.peak_torch_memory = bytes,
                "non_torch_memory" => p.non_torch_memory = bytes,
                "kv_cache_size" => p.kv_cache_size = bytes,
                "gpu_memory_utilization" => p.gpu_memory_utilization = v.parse().ok(),
                _ => {}
            }
        }
    }
    if let Some(c) = vllm_weights_re().captures_iter(region).last() {
        p.weights = c.get(1).and_then(|m| parse_size(&format!("{} GiB", m.as_str()))).map(|s| s.bytes);
        any = any || p.weights.is_some();
    }
    any.then_some(p)
}

/// A compact size (`16.00GiB`, `372.76MiB`, `0B`) as a [`Size`].
fn xsize(s: &str) -> Option<Size> {
    csize(s).or_else(|| parse_size(s))
}

/// The original text of a compact match, whitespace folded.
fn shown(text: &str, c: &Compact, m: &regex::Match) -> String {
    let a = c.orig(m.start());
    let b = floor_boundary(text, c.orig(m.end().saturating_sub(1)).saturating_add(1).min(text.len())).max(a);
    squash(text.get(a..b).unwrap_or_default()).trim().to_string()
}

/// The literals that gate each scanner below, searched in one pass.
const GATES: [&str; 24] = [
    "Outofmemorywhiletryingtoallocate",
    "Outofmemoryallocating",
    "OOMwhenallocatingtensor",
    "Noavailablememoryforthecacheblocks",
    "maxseqlen",
    "onstartupislessthandesired",
    "MPSbackendoutofmemory",
    "outofmemory'",
    "CUDAerror:outofmemory",
    "CUBLAS_STATUS_ALLOC_FAILED",
    "cudaErrorMemoryAllocation",
    "CUDA_ERROR_OUT_OF_MEMORY",
    "CUDAdrivererror:outofmemory",
    ":outofmemory",
    "pytorchallocatorcacheflushes",
    "Allocationondevice",
    "ranoutofmemorytryingtoallocate",
    "Stats:Limit:",
    "failedtoallocate",
    "failed:outofmemory",
    "MPSbackend",
    "Toserveatleastonerequest",
    "islargerthanthemaximumnumberoftokens",
    "cacheblocks",
];

fn gates_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, &GATES.iter().map(|a| regex::escape(a)).collect::<Vec<_>>().join("|"))
}

/// Every non-PyTorch OOM in one compact chunk, with its original offset;
/// only those starting before `own_end`.
pub(crate) fn scan_compact(text: &str, c: &Compact, own_end: usize) -> Vec<(usize, OtherOom)> {
    // Each scanner runs only when its literal is present: std's substring
    // search is fast in every build, the regex engine is not in debug.
    let t = c.text.as_str();
    let seen = crate::reflow::present(gates_re(), t);
    let has = |lits: &[&str]| lits.iter().any(|l| seen.contains(l));
    let mut out = Vec::new();
    if has(&["Outofmemorywhiletryingtoallocate", "Outofmemoryallocating"]) {
        out.extend(scan_xla(text, c));
    }
    if has(&["OOMwhenallocatingtensor"]) {
        out.extend(scan_tensorflow(text, c));
    }
    if has(&["Noavailablememoryforthecacheblocks", "maxseqlen", "onstartupislessthandesired"]) {
        out.extend(scan_vllm(text, c));
    }
    if has(&["MPSbackendoutofmemory"]) {
        out.extend(scan_mps(c));
    }
    if has(&[
        "outofmemory'",
        "CUDAerror:outofmemory",
        "CUBLAS_STATUS_ALLOC_FAILED",
        "cudaErrorMemoryAllocation",
        "CUDA_ERROR_OUT_OF_MEMORY",
    ]) {
        out.extend(scan_cuda_errors(text, c));
    }
    if has(&["CUDAdrivererror:outofmemory"]) {
        out.extend(
            driver_err_re()
                .find_iter(t)
                .map(|m| (c.orig(m.start()), OtherOom::CudaDriver { text: shown(text, c, &m) })),
        );
    }
    if has(&[":outofmemory"]) {
        out.extend(scan_legacy_thc(text, c));
    }
    if has(&["pytorchallocatorcacheflushes"]) {
        out.extend(retries_re().captures_iter(t).filter_map(|m| {
            Some((c.orig(m.get(0)?.start()), OtherOom::AllocatorRetries { retries: m.get(1)?.as_str().parse().ok()? }))
        }));
    }
    if has(&["Allocationondevice"]) {
        out.extend(scan_torch_async(c));
    }
    if has(&["ranoutofmemorytryingtoallocate", "Stats:Limit:"]) {
        out.extend(scan_bfc(text, c));
    }
    if has(&["failedtoallocate", "failed:outofmemory"]) {
        out.extend(ggml::scan(text, c).into_iter().map(|(o, g)| (o, OtherOom::Ggml(g))));
    }
    out.retain(|(o, _)| *o < own_end);
    out
}

/// The first words of each form, and the figures its reader needs after them.
const CUT_HEADS: [(&str, &str, &[&str]); 14] = [
    ("MPSbackendoutofmemory", "mps", &["allocated", "other", "max_allowed", "requested"]),
    ("onstartupislessthandesiredGPUmemoryutilization", "vllm_startup_free", &["utilization", "requested"]),
    ("Freememoryondevice", "vllm_startup_free", &["free", "total", "utilization", "requested"]),
    ("Toserveatleastonerequestwiththemodel", "vllm_max_len_memory", &["needed", "available"]),
    ("maxseqlen(", "vllm_max_len_tokens", &["kv_cache_tokens"]),
    ("OOMwhenallocatingtensor", "tensorflow", &["shape", "dtype"]),
    ("Outofmemorywhiletryingtoallocate", "xla", &["requested"]),
    ("RESOURCE_EXHAUSTED:", "xla", &["requested"]),
    ("ranoutofmemory", "bfc", &["requested"]),
    ("buffer_type_alloc_buffer:failedtoallocate", "ggml", &["requested"]),
    ("CUDAoutofmemory", "pytorch", &["requested", "total", "free", "allocated"]),
    ("HIPoutofmemory", "pytorch", &["requested", "total", "free", "allocated"]),
    ("OutOfMemoryError:", "pytorch", &["requested", "total", "free", "allocated"]),
    ("Allocationondevice", "pytorch_async", &["allocated", "requested", "total", "free"]),
];

fn cut_heads_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, &CUT_HEADS.iter().map(|(h, _, _)| regex::escape(h)).collect::<Vec<_>>().join("|"))
}

/// How far (original bytes) before a full message a head of its own form
/// may sit (`torch.OutOfMemoryError: ` before `CUDA out of memory.`, vLLM's
/// second head inside its message), and how far after it.
const CUT_BEFORE: usize = 600;
const CUT_AFTER: usize = 80;

/// Messages recognised by their first words with no full message of any
/// form at that place (`found`: the original offsets of every message read
/// in the chunk): cut before their figures.
pub(crate) fn scan_cut(text: &str, c: &Compact, found: &[usize], own_end: usize) -> Vec<(usize, OtherOom)> {
    let t = c.text.as_str();
    let mut out: Vec<(usize, OtherOom)> = Vec::new();
    let mut taken: Vec<usize> = found.to_vec();
    let heads: Vec<(usize, &str, &[&str])> = cut_heads_re()
        .find_iter(t)
        .filter_map(|m| {
            let (_, form, missing) = CUT_HEADS.iter().find(|(h, _, _)| *h == m.as_str())?;
            Some((m.start(), *form, *missing))
        })
        .collect();
    for (i, form, missing) in heads {
        let o = c.orig(i);
        if o >= own_end {
            continue;
        }
        let covered = taken.iter().any(|&fo| fo + CUT_BEFORE >= o && fo <= o + CUT_AFTER);
        if covered {
            continue;
        }
        taken.push(o);
        let end = floor_boundary(text, (o + 300).min(text.len()));
        let shown = squash(&text[o..end]).trim().chars().take(200).collect::<String>();
        out.push((
            o,
            OtherOom::Cut {
                form: form.to_string(),
                text: shown,
                missing: missing.iter().map(|m| m.to_string()).collect(),
            },
        ));
    }
    out
}

/// XLA's BufferAssignment stats after one message, up to the next message.
fn xla_stats(after: &str) -> std::collections::HashMap<String, Size> {
    let mut stats = std::collections::HashMap::new();
    for s in xla_stat_re().captures_iter(after) {
        let (Some(k), Some(kind), Some(v)) = (s.get(1), s.get(2), s.get(3)) else { continue };
        if let Some(sz) = parse_size(v.as_str()) {
            stats.entry(format!("{} {}", k.as_str(), kind.as_str())).or_insert(sz);
        }
    }
    stats
}

/// XLA's "Peak buffers" list: largest first, at most 5.
fn xla_peak_buffers(after: &str) -> Vec<XlaBuffer> {
    let mut peak_buffers = Vec::new();
    let bufs: Vec<_> = xla_buf_re().captures_iter(after).collect();
    for (i, b) in bufs.iter().enumerate() {
        let (Some(whole), Some(sz)) = (b.get(0), b.get(1).and_then(|v| parse_size(v.as_str()))) else { continue };
        let stop = bufs.get(i + 1).and_then(|n| n.get(0)).map(|n| n.start()).unwrap_or(after.len());
        let body = &after[whole.end()..stop.max(whole.end())];
        let field = |name: &str| {
            body.lines().find_map(|l| l.trim().strip_prefix(name)).map(|v| v.trim().trim_matches('"').to_string())
        };
        peak_buffers.push(XlaBuffer {
            size: sz,
            shape: field("Shape:"),
            operator: field("Operator: op_name=").map(|o| o.split('"').next().unwrap_or("").to_string()),
        });
    }
    peak_buffers.sort_by_key(|b| std::cmp::Reverse(b.size.bytes));
    peak_buffers.truncate(5);
    peak_buffers
}

fn scan_xla(text: &str, c: &Compact) -> Vec<(usize, OtherOom)> {
    let mut out = Vec::new();
    let hits: Vec<_> = xla_re().captures_iter(&c.text).collect();
    for (i, cap) in hits.iter().enumerate() {
        let (Some(m), Some(n)) = (cap.get(0), cap.get(1)) else { continue };
        let Ok(bytes) = n.as_str().parse::<u64>() else { continue };
        let start = c.orig(m.end()).min(text.len());
        // stop at the next OOM so stats are not borrowed from it
        let next = hits.get(i + 1).and_then(|h| h.get(0)).map(|h| c.orig(h.start())).unwrap_or(usize::MAX);
        let end = floor_boundary(text, (start + 8192).min(next).max(start));
        let after = &text[floor_boundary(text, start)..end];
        let mut stats = xla_stats(after);
        out.push((
            c.orig(m.start()),
            OtherOom::Xla {
                requested: Size::exact(bytes),
                total_allocation: stats.remove("total allocation"),
                parameter_allocation: stats.remove("parameter allocation"),
                temp_allocation: stats.remove("preallocated temp allocation"),
                live_out_allocation: stats.remove("maybe_live_out allocation"),
                fragmentation: stats.remove("total fragmentation"),
                peak_buffers: xla_peak_buffers(after),
                bfc: None,
            },
        ));
    }
    out
}

fn scan_tensorflow(text: &str, c: &Compact) -> Vec<(usize, OtherOom)> {
    let mut out = Vec::new();
    for cap in tf_re().captures_iter(&c.text) {
        let Some(m) = cap.get(0) else { continue };
        let shape: Vec<u64> = cap
            .get(1)
            .map(|s| s.as_str().split(',').filter_map(|d| d.trim().parse().ok()).collect())
            .unwrap_or_default();
        let dtype = cap.get(2).map(|d| d.as_str().to_string());
        let bytes = dtype
            .as_deref()
            .and_then(tf_dtype_bytes)
            .and_then(|e| shape.iter().try_fold(e, |acc: u64, &d| acc.checked_mul(d)));
        let tail = &c.text[cap.get(1).map(|g| g.end()).unwrap_or(m.end())..floor_boundary(&c.text, m.end() + 400)];
        let device = tf_device_re().captures(tail).and_then(|d| Some(d.get(1)?.as_str().to_string()));
        let gpu = device
            .as_deref()
            .and_then(|d| d.to_ascii_lowercase().rsplit_once("gpu:").and_then(|(_, n)| n.parse().ok()));
        let allocator = tf_alloc_re().captures(tail).and_then(|a| Some(a.get(1)?.as_str().to_string()));
        let o_end = c.orig(m.end().saturating_sub(1)).min(text.len());
        let end = floor_boundary(text, o_end + 600);
        let node = tf_node_re()
            .captures(&text[floor_boundary(text, o_end)..end])
            .and_then(|n| n.get(1).or(n.get(2)).map(|x| x.as_str().to_string()));
        out.push((
            c.orig(m.start()),
            OtherOom::TensorFlow { shape, dtype, bytes, device, gpu, allocator, node, bfc: None },
        ));
    }
    out
}

fn scan_vllm(text: &str, c: &Compact) -> Vec<(usize, OtherOom)> {
    let t = c.text.as_str();
    let mut out = Vec::new();
    for m in vllm_none_re().find_iter(t) {
        let o = c.orig(m.start());
        out.push((o, OtherOom::VllmNoCacheBlocks { profile: vllm_profile(text, o) }));
    }
    for cap in vllm_tokens_re().captures_iter(t) {
        let (Some(m), Some(a), Some(b)) = (cap.get(0), cap.get(1), cap.get(2)) else { continue };
        let (Ok(max_model_len), Ok(kv_cache_tokens)) = (a.as_str().parse(), b.as_str().parse()) else { continue };
        let o = c.orig(m.start());
        out.push((o, OtherOom::VllmMaxLenTokens { max_model_len, kv_cache_tokens, profile: vllm_profile(text, o) }));
    }
    for cap in vllm_mem_re().captures_iter(t) {
        let Some(m) = cap.get(0) else { continue };
        let (Some(len), Some(needed), Some(available)) = (
            cap.get(1).and_then(|v| v.as_str().parse().ok()),
            cap.get(2).and_then(|v| xsize(v.as_str())),
            cap.get(3).and_then(|v| xsize(v.as_str())),
        ) else {
            continue;
        };
        let o = c.orig(m.start());
        out.push((
            o,
            OtherOom::VllmMaxLenMemory {
                max_model_len: len,
                needed,
                available,
                estimated_max_len: cap.get(4).and_then(|v| v.as_str().parse().ok()),
                profile: vllm_profile(text, o),
            },
        ));
    }
    for cap in vllm_startup_re().captures_iter(t) {
        let Some(m) = cap.get(0) else { continue };
        // vLLM prints GiB rounded to two decimals (`round(b / GiB_bytes, 2)`)
        let gib = |i: usize| cap.get(i).and_then(|v| parse_size(&format!("{} GiB", v.as_str())));
        let (Some(free), Some(total), Some(utilization), Some(requested)) =
            (gib(2), gib(3), cap.get(4).and_then(|v| v.as_str().parse::<f64>().ok()), gib(5))
        else {
            continue;
        };
        let o = c.orig(m.start());
        out.push((
            o,
            OtherOom::VllmStartupFree {
                device: cap.get(1).map(|d| d.as_str().to_string()),
                free,
                total,
                utilization,
                requested,
                profile: vllm_profile(text, o),
            },
        ));
    }
    out
}

fn scan_mps(c: &Compact) -> Vec<(usize, OtherOom)> {
    let mut out = Vec::new();
    for cap in mps_re().captures_iter(&c.text) {
        let Some(m) = cap.get(0) else { continue };
        let size = |i: usize| cap.get(i).and_then(|v| xsize(v.as_str()));
        let (Some(allocated), Some(other), Some(max_allowed), Some(requested)) = (size(1), size(2), size(3), size(4))
        else {
            continue;
        };
        let pool = cap.get(5).map(|p| p.as_str().to_string()).unwrap_or_default();
        out.push((c.orig(m.start()), OtherOom::Mps { allocated, other, max_allowed, requested, pool }));
    }
    out
}

/// Raw CUDA errors; a TensorFlow StreamExecutor line carries its request
/// and is reported as such (not twice).
fn scan_cuda_errors(text: &str, c: &Compact) -> Vec<(usize, OtherOom)> {
    let t = c.text.as_str();
    let mut out = Vec::new();
    let mut driver_spans = Vec::new();
    for cap in tf_driver_re().captures_iter(t) {
        let (Some(m), Some(n)) = (cap.get(0), cap.get(1)) else { continue };
        let Ok(bytes) = n.as_str().parse::<u64>() else { continue };
        driver_spans.push(m.range());
        out.push((c.orig(m.start()), OtherOom::TensorFlowDriver { requested: Size::exact(bytes) }));
    }
    for m in cuda_err_re().find_iter(t) {
        if driver_spans.iter().any(|r| r.contains(&m.start())) {
            continue;
        }
        out.push((c.orig(m.start()), OtherOom::CudaError { text: shown(text, c, &m) }));
    }
    out
}

/// How far (compact bytes) a THC `RuntimeError` may follow its `THCudaCheck FAIL` line.
const THC_PAIR_REACH: usize = 4096;

/// Legacy THC messages; the `THCudaCheck FAIL` line printed before the
/// `RuntimeError` of the same failure is folded into it.
fn scan_legacy_thc(text: &str, c: &Compact) -> Vec<(usize, OtherOom)> {
    let hits: Vec<regex::Match> = thc_re().find_iter(&c.text).collect();
    let mut out = Vec::new();
    for (i, m) in hits.iter().enumerate() {
        let is_check = m.as_str().starts_with("THCudaCheck");
        let runtime_follows = hits
            .get(i + 1)
            .is_some_and(|n| !n.as_str().starts_with("THCudaCheck") && n.start() - m.end() <= THC_PAIR_REACH);
        if is_check && runtime_follows {
            continue;
        }
        out.push((c.orig(m.start()), OtherOom::LegacyThc { text: shown(text, c, m) }));
    }
    out
}

/// How far (compact bytes) from a truncated `Allocation on device` the
/// exception name must be (ComfyUI prints it on the line before, or at the
/// end of the traceback that follows).
const ASYNC_EXC_REACH: usize = 4096;

/// PyTorch's cudaMallocAsync messages: whole (every figure a fact), or cut
/// at the device index (pytorch#168369).
fn scan_torch_async(c: &Compact) -> Vec<(usize, OtherOom)> {
    let t = c.text.as_str();
    let mut out = Vec::new();
    let heads: Vec<_> = async_head_re().captures_iter(t).collect();
    for (i, cap) in heads.iter().enumerate() {
        let Some(m) = cap.get(0) else { continue };
        let whole = cap.get(2).is_some();
        if !whole {
            let a = floor_boundary(t, m.start().saturating_sub(ASYNC_EXC_REACH));
            let b = floor_boundary(t, m.end() + ASYNC_EXC_REACH);
            // ComfyUI prints the exception's type on its own line, or its
            // "!!! Exception during processing !!!" before the message
            let near = &t[a..b];
            let device_named = cap.get(1).is_some();
            if !device_named
                && !near.contains("OutOfMemoryError")
                && !t[a..m.start()].ends_with("Exceptionduringprocessing!!!")
            {
                continue;
            }
        }
        let next = heads.get(i + 1).and_then(|h| h.get(0)).map(|h| h.start()).unwrap_or(t.len());
        let w = &t[m.end()..floor_boundary(t, (m.end() + 600).min(next))];
        let get =
            |r: &Regex| if whole { r.captures(w).and_then(|x| x.get(1)).and_then(|v| csize(v.as_str())) } else { None };
        out.push((
            c.orig(m.start()),
            OtherOom::TorchAsync {
                device: cap.get(1).and_then(|d| d.as_str().parse().ok()),
                allocated: get(async_alloc_re()),
                requested: get(async_req_re()),
                total: get(async_total_re()),
                free: get(async_free_re()),
                limit: get(async_limit_re()),
                truncated: !whole,
            },
        ));
    }
    out
}

/// The BFC allocator's failure lines and the `Stats:` summary after each;
/// a summary pasted without its failure line is an event of its own.
fn scan_bfc(text: &str, c: &Compact) -> Vec<(usize, OtherOom)> {
    let mut out = Vec::new();
    let hits: Vec<_> = bfc_re().captures_iter(&c.text).collect();
    for (i, cap) in hits.iter().enumerate() {
        let (Some(m), Some(a), Some(r)) = (cap.get(0), cap.get(1), cap.get(2)) else { continue };
        let not_a_failure = m.as_str().ends_with("notafailure");
        let requested = match cap.get(3).and_then(|n| n.as_str().parse::<u64>().ok()) {
            Some(n) => Size::exact(n),
            None => match xsize(r.as_str()) {
                Some(s) => s,
                None => continue,
            },
        };
        let start = c.orig(m.end().saturating_sub(1)).min(text.len());
        let next = hits.get(i + 1).and_then(|h| h.get(0)).map(|h| c.orig(h.start())).unwrap_or(usize::MAX);
        let end = floor_boundary(text, (start + 32 * 1024).min(next).max(start));
        let stats = bfc_stats(text, c.orig(m.start()), &text[floor_boundary(text, start)..end]);
        out.push((
            c.orig(m.start()),
            OtherOom::Bfc { allocator: a.as_str().to_string(), requested: Some(requested), not_a_failure, stats },
        ));
    }
    // summaries without a failure line before them
    for m in bfc_summary_re().find_iter(&c.text) {
        let before = floor_boundary(&c.text, m.start().saturating_sub(32 * 1024));
        if bfc_re().is_match(&c.text[before..m.start()]) {
            continue;
        }
        let o = c.orig(m.start());
        let end = floor_boundary(text, o + 4096);
        let Some(stats) = bfc_stats(text, o, &text[o..end]) else { continue };
        out.push((
            o,
            OtherOom::Bfc {
                allocator: "the BFC allocator".to_string(),
                requested: None,
                not_a_failure: false,
                stats: Some(stats),
            },
        ));
    }
    out
}

/// The `Stats:` block of a BFC summary: bytes (older TensorFlow) or human
/// sizes (`89.77GiB`).
fn bfc_stats(text: &str, at: usize, after: &str) -> Option<BfcStats> {
    let mut s = BfcStats::default();
    // the device limit XLA's compiler printed around the failure
    let a = floor_boundary(text, at.saturating_sub(64 * 1024));
    let b = floor_boundary(text, at.saturating_add(64 * 1024));
    let around = &text[a..b];
    s.device_limit = base_limit_re()
        .captures(around)
        .or_else(|| remat_limit_re().captures(around))
        .and_then(|c| c.get(1)?.as_str().parse().ok())
        .filter(|&n: &u64| n > 0);
    let Some(i) = after.find("Stats:") else {
        return (s != BfcStats::default()).then_some(s);
    };
    let block = &after[i..floor_boundary(after, i + 2048)];
    for cap in bfc_stat_re().captures_iter(block) {
        let (Some(k), Some(v)) = (cap.get(1), cap.get(2)) else { continue };
        let v = v.as_str();
        let bytes = if v.bytes().all(|b| b.is_ascii_digit()) { v.parse().ok() } else { parse_size(v).map(|x| x.bytes) };
        let slot = match k.as_str() {
            "Limit" => &mut s.limit,
            "InUse" => &mut s.in_use,
            "MaxInUse" => &mut s.max_in_use,
            _ => &mut s.largest_free_block,
        };
        if slot.is_none() {
            *slot = bytes;
        }
    }
    (s != BfcStats::default()).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(t: &str) -> Vec<(usize, OtherOom)> {
        let c = crate::reflow::compact(t, 0, t.len());
        scan_compact(t, &c, t.len())
    }

    #[test]
    fn tf_bytes_from_shape() {
        let v = scan("ResourceExhaustedError: OOM when allocating tensor with shape[16,112,112,147] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc\n\t [[{{node resnet_v1_50/conv1/ExtractImagePatches}}]]");
        let OtherOom::TensorFlow { bytes, gpu, node, .. } = &v[0].1 else { panic!("{v:?}") };
        // 16·112·112·147 = 29,503,488 elements × 4 B = 118,013,952 B
        assert_eq!(*bytes, Some(118_013_952));
        assert_eq!(*gpu, Some(0));
        assert_eq!(node.as_deref(), Some("resnet_v1_50/conv1/ExtractImagePatches"));
    }

    #[test]
    fn vllm_v1_memory_message() {
        let v = scan("ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger than the available KV cache memory (0.71 GiB). Based on the available memory, the estimated maximum model length is 5632. Try increasing");
        let OtherOom::VllmMaxLenMemory { max_model_len, needed, estimated_max_len, .. } = &v[0].1 else { panic!() };
        assert_eq!((*max_model_len, needed.bytes, *estimated_max_len), (131_072, 16 << 30, Some(5632)));
    }
}
