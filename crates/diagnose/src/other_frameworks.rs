//! OOMs that are not PyTorch's caching-allocator message: JAX/XLA
//! `RESOURCE_EXHAUSTED`, TensorFlow `OOM when allocating tensor` and its
//! StreamExecutor `CUDA_ERROR_OUT_OF_MEMORY`, vLLM's KV-cache start-up
//! errors, Apple MPS, raw `CUDA error: out of memory` (memory the caching
//! allocator does not manage: context, NCCL, cuBLAS handles), the legacy
//! THC `cuda runtime error (2)`, and DeepSpeed's allocator-retry warning.
//! DeepSpeed OOMs are PyTorch messages with DeepSpeed frames; they are
//! recognised in [`crate::oom`] (frames, `see_memory_usage` lines).

use crate::size::{parse_size, Size};
use crate::text::{floor_boundary, re};
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
}

const XSIZE: &str = r"(\d+(?:\.\d+)? ?(?:[KMGTP]i?B|B|bytes))";

fn xla_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"(?i:resource[_ ]exhausted): Out of memory (?:while trying to allocate|allocating) (\d{1,20}) bytes")
}
fn xla_stat_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(
        &C,
        &format!(r"(parameter|constant|maybe_live_out|preallocated temp|total) (allocation|fragmentation):\s+{XSIZE}"),
    )
}
fn xla_buf_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, &format!(r"Buffer \d+:\s+Size: {XSIZE}"))
}
fn tf_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(
        &C,
        r"OOM when allocating tensor (?:with|of) shape ?\[([\d,\s]{0,200})\](?: and type (\w+))?(?: on (\S+?))?(?: by allocator (\w+))?(?:\s|$)",
    )
}
fn tf_node_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"\[\[(?:\{\{node ([^}\s]{1,300})|Node: ([^\s=]{1,300}))")
}
fn vllm_none_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"ValueError: No available memory for the cache blocks")
}
fn vllm_tokens_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(
        &C,
        r"max seq len \((\d{1,12})\) is larger than the maximum number of tokens that can be stored in KV cache \((\d{1,12})\)",
    )
}
fn vllm_mem_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(
        &C,
        &format!(
            r"To serve at least one request with the models?'s max seq len \((\d{{1,12}})\), \({XSIZE} KV cache is needed, which is larger than the available KV cache memory \({XSIZE}\)\.(?: Based on the available memory, the estimated maximum model length is (\d{{1,12}}))?"
        ),
    )
}
fn vllm_profile_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"Memory profiling results: ([^\n]{1,600})")
}
fn vllm_weights_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"(?:Loading model weights took|Model loading took) ([\d.]{1,12}) ?Gi?B")
}
fn mps_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(
        &C,
        &format!(
            r"MPS backend out of memory \(MPS allocated: {XSIZE}, other allocations: {XSIZE}, max allowed: {XSIZE}\)\. Tried to allocate {XSIZE} on (\w+) pool"
        ),
    )
}
fn cuda_err_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(
        &C,
        r"CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|NCCL[^\n]{0,200}'out of memory'",
    )
}
fn thc_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"cuda runtime error \(2\) ?: out of memory|THCudaCheck FAIL file=[^\n]{0,300}? error=2 : out of memory")
}
fn tf_driver_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(
        &C,
        r"failed to allocate [\d.]{1,12}[KMGT]? \((\d{1,20}) bytes\) from device: CUDA_ERROR_OUT_OF_MEMORY(?:: out of memory)?",
    )
}
fn retries_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"(\d{1,12}) pytorch allocator cache flushes since last step")
}

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

/// Every non-PyTorch OOM in `text`, with its byte offset.
pub fn scan(text: &str) -> Vec<(usize, OtherOom)> {
    // Each scanner runs only when its literal is present: std's substring
    // search is fast in every build, the regex engine is not in debug.
    let has = |lits: &[&str]| lits.iter().any(|l| text.contains(l));
    let mut out = Vec::new();
    if has(&["Out of memory while trying to allocate", "Out of memory allocating"]) {
        out.extend(scan_xla(text));
    }
    if has(&["OOM when allocating tensor"]) {
        out.extend(scan_tensorflow(text));
    }
    if has(&["No available memory for the cache blocks", "max seq len"]) {
        out.extend(scan_vllm(text));
    }
    if has(&["MPS backend out of memory"]) {
        out.extend(scan_mps(text));
    }
    if has(&[
        "out of memory'",
        "CUDA error: out of memory",
        "CUBLAS_STATUS_ALLOC_FAILED",
        "cudaErrorMemoryAllocation",
        "CUDA_ERROR_OUT_OF_MEMORY",
    ]) {
        out.extend(scan_cuda_errors(text));
    }
    if has(&[": out of memory"]) {
        out.extend(scan_legacy_thc(text));
    }
    if has(&["pytorch allocator cache flushes"]) {
        out.extend(retries_re().captures_iter(text).filter_map(|c| {
            Some((c.get(0)?.start(), OtherOom::AllocatorRetries { retries: c.get(1)?.as_str().parse().ok()? }))
        }));
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

fn scan_xla(text: &str) -> Vec<(usize, OtherOom)> {
    let mut out = Vec::new();
    for c in xla_re().captures_iter(text) {
        let (Some(m), Some(n)) = (c.get(0), c.get(1)) else { continue };
        let Ok(bytes) = n.as_str().parse::<u64>() else { continue };
        let end = floor_boundary(text, m.end() + 8192);
        let after = &text[m.end()..end];
        // stop at the next OOM so stats are not borrowed from it
        let after = match xla_re().find(after) {
            Some(nx) => &after[..nx.start()],
            None => after,
        };
        let mut stats = xla_stats(after);
        out.push((
            m.start(),
            OtherOom::Xla {
                requested: Size::exact(bytes),
                total_allocation: stats.remove("total allocation"),
                parameter_allocation: stats.remove("parameter allocation"),
                temp_allocation: stats.remove("preallocated temp allocation"),
                live_out_allocation: stats.remove("maybe_live_out allocation"),
                fragmentation: stats.remove("total fragmentation"),
                peak_buffers: xla_peak_buffers(after),
            },
        ));
    }
    out
}

fn scan_tensorflow(text: &str) -> Vec<(usize, OtherOom)> {
    let mut out = Vec::new();
    for c in tf_re().captures_iter(text) {
        let Some(m) = c.get(0) else { continue };
        let shape: Vec<u64> =
            c.get(1).map(|s| s.as_str().split(',').filter_map(|d| d.trim().parse().ok()).collect()).unwrap_or_default();
        let dtype = c.get(2).map(|d| d.as_str().to_string());
        let bytes = dtype
            .as_deref()
            .and_then(tf_dtype_bytes)
            .and_then(|e| shape.iter().try_fold(e, |acc: u64, &d| acc.checked_mul(d)));
        let device = c.get(3).map(|d| d.as_str().to_string());
        let gpu = device
            .as_deref()
            .and_then(|d| d.to_ascii_lowercase().rsplit_once("gpu:").and_then(|(_, n)| n.parse().ok()));
        let end = floor_boundary(text, m.end() + 600);
        let node = tf_node_re()
            .captures(&text[m.end()..end])
            .and_then(|n| n.get(1).or(n.get(2)).map(|x| x.as_str().to_string()));
        let allocator = c.get(4).map(|a| a.as_str().to_string());
        out.push((m.start(), OtherOom::TensorFlow { shape, dtype, bytes, device, gpu, allocator, node }));
    }
    out
}

fn scan_vllm(text: &str) -> Vec<(usize, OtherOom)> {
    let mut out = Vec::new();
    for m in vllm_none_re().find_iter(text) {
        out.push((m.start(), OtherOom::VllmNoCacheBlocks { profile: vllm_profile(text, m.start()) }));
    }
    for c in vllm_tokens_re().captures_iter(text) {
        let (Some(m), Some(a), Some(b)) = (c.get(0), c.get(1), c.get(2)) else { continue };
        let (Ok(max_model_len), Ok(kv_cache_tokens)) = (a.as_str().parse(), b.as_str().parse()) else { continue };
        let profile = vllm_profile(text, m.start());
        out.push((m.start(), OtherOom::VllmMaxLenTokens { max_model_len, kv_cache_tokens, profile }));
    }
    for c in vllm_mem_re().captures_iter(text) {
        let Some(m) = c.get(0) else { continue };
        let (Some(len), Some(needed), Some(available)) = (
            c.get(1).and_then(|v| v.as_str().parse().ok()),
            c.get(2).and_then(|v| parse_size(v.as_str())),
            c.get(3).and_then(|v| parse_size(v.as_str())),
        ) else {
            continue;
        };
        out.push((
            m.start(),
            OtherOom::VllmMaxLenMemory {
                max_model_len: len,
                needed,
                available,
                estimated_max_len: c.get(4).and_then(|v| v.as_str().parse().ok()),
                profile: vllm_profile(text, m.start()),
            },
        ));
    }
    out
}

fn scan_mps(text: &str) -> Vec<(usize, OtherOom)> {
    let mut out = Vec::new();
    for c in mps_re().captures_iter(text) {
        let Some(m) = c.get(0) else { continue };
        let size = |i: usize| c.get(i).and_then(|v| parse_size(v.as_str()));
        let (Some(allocated), Some(other), Some(max_allowed), Some(requested)) = (size(1), size(2), size(3), size(4))
        else {
            continue;
        };
        let pool = c.get(5).map(|p| p.as_str().to_string()).unwrap_or_default();
        out.push((m.start(), OtherOom::Mps { allocated, other, max_allowed, requested, pool }));
    }
    out
}

/// Raw CUDA errors; a TensorFlow StreamExecutor line carries its request
/// and is reported as such (not twice).
fn scan_cuda_errors(text: &str) -> Vec<(usize, OtherOom)> {
    let mut out = Vec::new();
    let mut driver_spans = Vec::new();
    for c in tf_driver_re().captures_iter(text) {
        let (Some(m), Some(n)) = (c.get(0), c.get(1)) else { continue };
        let Ok(bytes) = n.as_str().parse::<u64>() else { continue };
        driver_spans.push(m.range());
        out.push((m.start(), OtherOom::TensorFlowDriver { requested: Size::exact(bytes) }));
    }
    for m in cuda_err_re().find_iter(text) {
        if driver_spans.iter().any(|r| r.contains(&m.start())) {
            continue;
        }
        out.push((m.start(), OtherOom::CudaError { text: m.as_str().to_string() }));
    }
    out
}

/// How far a THC `RuntimeError` may follow its `THCudaCheck FAIL` line.
const THC_PAIR_REACH: usize = 4096;

/// Legacy THC messages; the `THCudaCheck FAIL` line printed before the
/// `RuntimeError` of the same failure is folded into it.
fn scan_legacy_thc(text: &str) -> Vec<(usize, OtherOom)> {
    let hits: Vec<regex::Match> = thc_re().find_iter(text).collect();
    let mut out = Vec::new();
    for (i, m) in hits.iter().enumerate() {
        let is_check = m.as_str().starts_with("THCudaCheck");
        let runtime_follows = hits
            .get(i + 1)
            .is_some_and(|n| !n.as_str().starts_with("THCudaCheck") && n.start() - m.end() <= THC_PAIR_REACH);
        if is_check && runtime_follows {
            continue;
        }
        out.push((m.start(), OtherOom::LegacyThc { text: m.as_str().to_string() }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
