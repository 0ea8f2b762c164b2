//! llama.cpp / ggml out-of-memory failures (also inside Ollama, LM Studio,
//! llamafile, ik_llama.cpp), as their logs print them:
//!
//! ```text
//! ggml_backend_cuda_buffer_type_alloc_buffer: allocating 144817.04 MiB on device 0: cudaMalloc failed: out of memory
//! alloc_tensor_range: failed to allocate CUDA0 buffer of size 151851674624
//! llama_model_load: error loading model: unable to allocate CUDA0 buffer
//! ```
//!
//! The first line is ggml-cuda's (`ggml_backend_cuda_buffer_type_alloc_buffer`,
//! ggml/src/ggml-cuda/ggml-cuda.cu; ROCm builds print the same through
//! HIP), the second the allocator that asked (`alloc_tensor_range` in
//! ggml-alloc.c for a model's or the KV cache's tensors,
//! `ggml_gallocr_reserve_n` for a compute graph), the third what llama.cpp
//! gave up on. Which buffer failed is read from the asking function and
//! the lines after it; the launch (layers offloaded, context, micro-batch,
//! the buffers already placed, the free memory llama.cpp saw at load) from
//! the log before it.

use crate::reflow::Compact;
use crate::size::csize;
use crate::size::{parse_size, Size};
use crate::text::{floor_boundary, re};
use regex::Regex;
use serde::Serialize;
use std::sync::OnceLock;

/// Which of llama.cpp's buffers could not be allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GgmlBuffer {
    /// the model's weights on this device (`load_tensors` / `llm_load_tensors`)
    Weights,
    /// the KV cache (`llama_kv_cache_init`, `llama_kv_cache_unified`)
    KvCache,
    /// a compute graph's scratch (`ggml_gallocr_reserve_n`: "failed to allocate compute buffers")
    Compute,
    /// the log does not say
    Unknown,
}

impl GgmlBuffer {
    pub fn words(self) -> &'static str {
        match self {
            GgmlBuffer::Weights => "model weights buffer",
            GgmlBuffer::KvCache => "KV cache buffer",
            GgmlBuffer::Compute => "compute buffer",
            GgmlBuffer::Unknown => "buffer",
        }
    }
}

/// The launch as the log printed it before the failure (bytes; MiB as
/// printed × 2^20). Buffers are those of the failing device.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct GgmlLaunch {
    /// the device's name (`Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6`,
    /// `using device CUDA0 (NVIDIA GeForce RTX 4090)`)
    pub device_name: Option<String>,
    /// free memory llama.cpp saw on the device at load (`using device CUDA0 (…) - 23008 MiB free`),
    /// or Ollama's `available` figure
    #[serde(rename = "free_at_load_bytes")]
    pub free_at_load: Option<u64>,
    /// the card's total, when the log prints it (Ollama's `total="24.0 GiB"`)
    #[serde(rename = "total_bytes")]
    pub total: Option<u64>,
    /// GPU devices the log lists
    pub gpus: Option<u32>,
    /// `offloaded N/M layers to GPU`
    pub layers_offloaded: Option<(u32, u32)>,
    /// `CUDA0 model buffer size = X MiB` (older: `CUDA0 buffer size = X MiB`)
    #[serde(rename = "model_buffer_bytes")]
    pub model_buffer: Option<u64>,
    /// `CUDA0 KV buffer size = X MiB`
    #[serde(rename = "kv_buffer_bytes")]
    pub kv_buffer: Option<u64>,
    /// `n_ctx = N`
    pub n_ctx: Option<u64>,
    /// `n_ubatch = N`
    pub n_ubatch: Option<u64>,
    /// `pipeline parallelism enabled (n_copies=N)`
    pub pipeline_copies: Option<u32>,
    /// `flash_attn = 1|enabled|0|disabled`
    pub flash_attn: Option<bool>,
}

/// One buffer llama.cpp / ggml could not allocate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GgmlOom {
    /// the buffer type's name as printed: `CUDA0`, `ROCm1`, `CUDA_Host`, `CPU`, `Vulkan0`, `Metal`
    pub buffer_type: String,
    /// the device index (`on device N`, or the digits of the buffer type)
    pub device: Option<u32>,
    /// the bytes asked for (`buffer of size N`, else `allocating X MiB`)
    pub requested: Size,
    pub buffer: GgmlBuffer,
    /// what llama.cpp gave up on (`llama_model_load: error loading model: …`, `failed to allocate compute buffers`)
    pub consequence: Option<String>,
    /// llama.cpp retried without pipeline parallelism (newer builds): the failure may not have stopped the load
    pub retried: bool,
    pub launch: GgmlLaunch,
}

impl GgmlOom {
    /// The failing buffer is in host memory (a CPU or pinned host buffer), not on a GPU.
    pub fn is_host(&self) -> bool {
        self.buffer_type.starts_with("CPU") || self.buffer_type.contains("Host")
    }
}

macro_rules! cre {
    ($name:ident, $pat:expr) => {
        fn $name() -> &'static Regex {
            static C: OnceLock<Regex> = OnceLock::new();
            re(&C, $pat)
        }
    };
}

// compact text
cre!(
    alloc_re,
    r"(?-u)ggml_backend_(\w{1,16}?)_buffer_type_alloc_buffer:allocating(\d{1,9}(?:\.\d{1,4})?MiB)ondevice(\d{1,3}):(\w{1,40}?)failed:outofmemory"
);
cre!(cpu_alloc_re, r"(?-u)ggml_backend_cpu_buffer_type_alloc_buffer:failedtoallocatebufferofsize(\d{1,20})");
cre!(fail_re, r"(?-u)(\w{1,60}):failedtoallocate(\w{1,24}?)bufferofsize(\d{1,20})");
cre!(
    consequence_re,
    r"(?-u)(llama_model_load:errorloadingmodel:[\w:]{0,80}?buffer|failedtoallocatebufferforkvcache|llama_kv_cache_init\(\)failed|failedtoallocatecompute(?:pp)?buffers|unabletoallocatebackendbuffer|failedtoinitializethecontext)"
);
cre!(retry_re, r"(?-u)retryingwithoutpipelineparallelism");

// original text (line-structured context)
cre!(free_re, r"using device ([A-Za-z0-9_]{1,24}) \(([^)\n]{1,120})\)[^\n]{0,60}? - ([0-9]{1,9}) MiB free");
cre!(ollama_gpu_re, r#"name="([^"\n]{1,80})" total="([0-9.]{1,12} ?[KMGT]i?B)" available="([0-9.]{1,12} ?[KMGT]i?B)""#);
cre!(device_re, r"(?m)^\W{0,40}Device ([0-9]{1,3}): ([^,\n]{1,80}),");
cre!(offloaded_re, r"(?-u)offloaded (\d{1,4})/(\d{1,4}) layers to GPU");
cre!(model_buf_re, r"(?-u)(?m)[\s:](\w{1,24}) (?:model )?buffer size\s*=\s*([\d.]{1,12}) MiB");
cre!(kv_buf_re, r"(?-u)(\w{1,24}) KV buffer size\s*=\s*([\d.]{1,12}) MiB");
cre!(n_ctx_re, r"(?-u)\bn_ctx\s*=\s*(\d{1,9})\b");
cre!(n_ubatch_re, r"(?-u)\bn_ubatch\s*=\s*(\d{1,9})\b");
cre!(copies_re, r"(?-u)pipeline parallelism enabled \(n_copies=(\d{1,3})\)");
cre!(flash_re, r"(?-u)\bflash_attn\s*=\s*(\w{1,12})");

/// How far after the first line of a failure its other lines may come (compact bytes).
const GROUP: usize = 1200;
/// How far back the launch is read.
const LAUNCH_BACK: usize = 512 * 1024;

fn mib(v: &str) -> Option<u64> {
    parse_size(&format!("{v} MiB")).map(|s| s.bytes)
}

/// The device index of a buffer type name (`CUDA1` → 1).
fn index_of(buffer_type: &str) -> Option<u32> {
    let digits: String = buffer_type.chars().rev().take_while(|c| c.is_ascii_digit()).collect();
    digits.chars().rev().collect::<String>().parse().ok()
}

/// Every ggml buffer failure in a compact chunk, with its original offset.
pub(crate) fn scan(text: &str, c: &Compact) -> Vec<(usize, GgmlOom)> {
    let t = c.text.as_str();
    // (compact start, end, buffer type, device, bytes, asking function)
    let mut raw: Vec<(usize, usize, String, Option<u32>, Size, String)> = Vec::new();
    for cap in alloc_re().captures_iter(t) {
        let (Some(m), Some(sz), Some(dev)) = (cap.get(0), cap.get(2), cap.get(3)) else { continue };
        let Some(size) = csize(sz.as_str()) else { continue };
        let device = dev.as_str().parse().ok();
        let backend = cap.get(1).map(|b| b.as_str().to_ascii_uppercase()).unwrap_or_default();
        raw.push((m.start(), m.end(), format!("{backend}{}", device.unwrap_or(0)), device, size, String::new()));
    }
    for cap in cpu_alloc_re().captures_iter(t) {
        let (Some(m), Some(n)) = (cap.get(0), cap.get(1)) else { continue };
        let Ok(bytes) = n.as_str().parse() else { continue };
        raw.push((m.start(), m.end(), "CPU".into(), None, Size::exact(bytes), String::new()));
    }
    raw.sort_by_key(|r| r.0);
    // the asking function's line: joins the allocation line just before it, or stands alone
    for cap in fail_re().captures_iter(t) {
        let (Some(m), Some(f), Some(bt), Some(n)) = (cap.get(0), cap.get(1), cap.get(2), cap.get(3)) else { continue };
        let Ok(bytes) = n.as_str().parse::<u64>() else { continue };
        let bt = bt.as_str().to_string();
        match raw.iter_mut().rev().find(|r| r.0 <= m.start() && m.start() <= r.1 + GROUP && r.5.is_empty()) {
            Some(r) => {
                r.1 = m.end();
                r.2 = bt.clone();
                r.3 = r.3.or_else(|| index_of(&bt));
                r.4 = Size::exact(bytes);
                r.5 = f.as_str().to_string();
            }
            None => {
                raw.push((m.start(), m.end(), bt.clone(), index_of(&bt), Size::exact(bytes), f.as_str().to_string()))
            }
        }
    }
    raw.sort_by_key(|r| r.0);
    let mut out = Vec::new();
    for (i, (s, e, buffer_type, device, requested, func)) in raw.iter().enumerate() {
        let next = raw.get(i + 1).map(|r| r.0).unwrap_or(t.len());
        let after = &t[*e..floor_boundary(t, (*e + GROUP).min(next).max(*e))];
        let consequence = consequence_re().find(after).map(|m| m.as_str().to_string());
        let buffer = if func.contains("ggml_gallocr") || consequence.as_deref().is_some_and(|c| c.contains("compute")) {
            GgmlBuffer::Compute
        } else if consequence.as_deref().is_some_and(|c| c.contains("kv")) {
            GgmlBuffer::KvCache
        } else if consequence.as_deref().is_some_and(|c| c.contains("loadingmodel") || c.contains("backendbuffer")) {
            GgmlBuffer::Weights
        } else {
            GgmlBuffer::Unknown
        };
        let orig = c.orig(*s);
        let launch = launch_before(text, orig, buffer_type, *device);
        out.push((
            orig,
            GgmlOom {
                buffer_type: buffer_type.clone(),
                device: *device,
                requested: requested.clone(),
                buffer,
                consequence: consequence.map(|c| consequence_words(&c)),
                retried: retry_re().is_match(after),
                launch,
            },
        ));
    }
    out
}

/// The compact consequence line in words.
fn consequence_words(c: &str) -> String {
    if c.contains("loadingmodel") || c.contains("backendbuffer") {
        "the model failed to load".to_string()
    } else if c.contains("kv") {
        "the KV cache could not be allocated".to_string()
    } else if c.contains("compute") {
        "the compute buffers could not be allocated".to_string()
    } else {
        "the context could not be created".to_string()
    }
}

/// The launch figures printed before offset `at` for this buffer type.
fn launch_before(text: &str, at: usize, buffer_type: &str, device: Option<u32>) -> GgmlLaunch {
    let a = floor_boundary(text, at.saturating_sub(LAUNCH_BACK));
    let region = &text[a..floor_boundary(text, at)];
    let mut l = GgmlLaunch::default();
    let this =
        |name: &str| name == buffer_type || device.is_some_and(|d| index_of(name) == Some(d) && !name.contains("Host"));
    for cap in free_re().captures_iter(region) {
        let (Some(n), Some(name), Some(free)) = (cap.get(1), cap.get(2), cap.get(3)) else { continue };
        if this(n.as_str()) {
            l.device_name = Some(name.as_str().trim().to_string());
            l.free_at_load = mib(free.as_str());
        }
    }
    let devices: Vec<(u32, String)> = device_re()
        .captures_iter(region)
        .filter_map(|c| Some((c.get(1)?.as_str().parse().ok()?, c.get(2)?.as_str().trim().to_string())))
        .collect();
    if !devices.is_empty() {
        l.gpus = Some(devices.iter().map(|d| d.0 + 1).max().unwrap_or(1));
        if l.device_name.is_none() {
            l.device_name = devices.iter().rev().find(|d| Some(d.0) == device).map(|d| d.1.clone());
        }
    }
    let ollama: Vec<_> = ollama_gpu_re().captures_iter(region).collect();
    if ollama.len() == 1 {
        let c = &ollama[0];
        l.total = c.get(2).and_then(|v| parse_size(v.as_str())).map(|s| s.bytes);
        if l.free_at_load.is_none() {
            l.free_at_load = c.get(3).and_then(|v| parse_size(v.as_str())).map(|s| s.bytes);
        }
        if l.device_name.is_none() {
            l.device_name = c.get(1).map(|v| v.as_str().to_string());
        }
    }
    let last = |r: &Regex| r.captures_iter(region).last().and_then(|c| c.get(1)?.as_str().parse::<u64>().ok());
    l.layers_offloaded = offloaded_re()
        .captures_iter(region)
        .last()
        .and_then(|c| Some((c.get(1)?.as_str().parse().ok()?, c.get(2)?.as_str().parse().ok()?)));
    l.model_buffer = model_buf_re()
        .captures_iter(region)
        .filter(|c| c.get(1).is_some_and(|n| this(n.as_str())))
        .last()
        .and_then(|c| mib(c.get(2)?.as_str()));
    l.kv_buffer = kv_buf_re()
        .captures_iter(region)
        .filter(|c| c.get(1).is_some_and(|n| this(n.as_str())))
        .last()
        .and_then(|c| mib(c.get(2)?.as_str()));
    l.n_ctx = last(n_ctx_re());
    l.n_ubatch = last(n_ubatch_re());
    l.pipeline_copies = last(copies_re()).and_then(|n| u32::try_from(n).ok());
    l.flash_attn = flash_re().captures_iter(region).last().and_then(|c| match c.get(1)?.as_str() {
        "1" | "true" | "enabled" | "on" => Some(true),
        "0" | "false" | "disabled" | "off" => Some(false),
        _ => None,
    });
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(t: &str) -> Vec<GgmlOom> {
        let c = crate::reflow::compact(t, 0, t.len());
        scan(t, &c).into_iter().map(|x| x.1).collect()
    }

    #[test]
    fn weights_failure_is_one_event_with_its_exact_size() {
        // ggml-org/llama.cpp#20431
        let v = scan_all("load_tensors: loading model tensors, this can take a while... (mmap = true, direct_io = false)\nggml_backend_cuda_buffer_type_alloc_buffer: allocating 144817.04 MiB on device 0: cudaMalloc failed: out of memory\nalloc_tensor_range: failed to allocate CUDA0 buffer of size 151851674624\nllama_model_load: error loading model: unable to allocate CUDA0 buffer\n");
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].device, v[0].requested.bytes, v[0].buffer), (Some(0), 151_851_674_624, GgmlBuffer::Weights));
        assert_eq!(v[0].buffer_type, "CUDA0");
    }

    #[test]
    fn compute_and_kv_failures_and_the_launch_before_them() {
        let log = "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 4090) - 23008 MiB free\nload_tensors: offloaded 33/33 layers to GPU\nload_tensors:        CUDA0 model buffer size =  4403.49 MiB\nllama_context: n_ctx         = 32768\nllama_context: n_ubatch      = 512\nllama_kv_cache_unified:      CUDA0 KV buffer size =  4096.00 MiB\nggml_backend_cuda_buffer_type_alloc_buffer: allocating 16000.00 MiB on device 0: cudaMalloc failed: out of memory\nggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 16777216000\ngraph_reserve: failed to allocate compute buffers\n";
        let v = scan_all(log);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].buffer, GgmlBuffer::Compute);
        let l = &v[0].launch;
        assert_eq!(l.free_at_load, Some(23008 << 20));
        assert_eq!(l.layers_offloaded, Some((33, 33)));
        assert_eq!(l.kv_buffer, Some(4096 << 20));
        assert_eq!((l.n_ctx, l.n_ubatch), (Some(32768), Some(512)));
        assert_eq!(l.device_name.as_deref(), Some("NVIDIA GeForce RTX 4090"));
        let kv = scan_all("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 204800.00 MiB on device 0: cudaMalloc failed: out of memory\nllama_kv_cache_init: failed to allocate buffer for kv cache\n");
        assert_eq!((kv[0].buffer, kv[0].requested.bytes), (GgmlBuffer::KvCache, 204_800 << 20));
    }
}
