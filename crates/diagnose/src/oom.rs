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
use crate::other_frameworks::{self, OtherOom};
use crate::size::{parse_size, Size};
use crate::text::{floor_boundary, re, squash, LineIndex};
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
    pub deepspeed_usage: Option<DeepSpeedUsage>,
    /// an nvidia-smi table pasted in the same text (its GPU memory cells and process rows)
    pub nvidia_smi: Option<NvidiaSmi>,
}

/// One PyTorch CUDA OOM, numbers as printed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TorchOom {
    /// `CUDA`, `HIP` (ROCm) or `XPU`; `CUDA` when the message was pasted without it
    pub backend: String,
    pub era: TorchEra,
    pub device: u32,
    /// the rounded size the allocator asked for (`get_allocation_size`)
    pub requested: Size,
    pub total: Size,
    /// `cudaMemGetInfo` free on the device
    pub free: Size,
    /// allocated by PyTorch (≥2.1: including private pools)
    pub allocated: Size,
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
}

impl TorchOom {
    /// Reserved by the caching allocator, from whichever figures the era printed.
    pub fn reserved_bytes(&self) -> u64 {
        match (&self.reserved, &self.unallocated) {
            (Some(r), _) => r.bytes,
            (None, Some(u)) => self.allocated.bytes.saturating_add(u.bytes),
            (None, None) => self.allocated.bytes,
        }
    }
    /// Reserved but not handed to a tensor (the cache).
    pub fn unallocated_bytes(&self) -> u64 {
        match (&self.unallocated, &self.reserved) {
            (Some(u), _) => u.bytes,
            (None, Some(r)) => r.bytes.saturating_sub(self.allocated.bytes),
            (None, None) => 0,
        }
    }
    /// Rounding slack of the cache figure.
    pub fn unallocated_tolerance(&self) -> u64 {
        match (&self.unallocated, &self.reserved) {
            (Some(u), _) => u.tolerance,
            (None, Some(r)) => r.tolerance.saturating_add(self.allocated.tolerance),
            (None, None) => 0,
        }
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
    /// "CUDA out of memory. Tried to allocate X" with the rest missing or cut
    TorchPartial {
        requested: Option<Size>,
        text: String,
    },
    Other(OtherOom),
}

const SIZE: &str = r"(\d+(?:\.\d+)? (?:bytes|[KMGTP]i?B))";

fn requested_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, &format!(r"^(?:(?:CUDA|HIP|XPU) out of memory\. ?)?Tried to allocate {SIZE}"))
}
fn old_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(
        &C,
        &format!(
            r"\(GPU (\d+); {SIZE} total capacity; {SIZE} already allocated; (?:{SIZE} current active; )?{SIZE} free; (?:{SIZE} allowed; )?{SIZE} (reserved in total by PyTorch|cached)\)?"
        ),
    )
}
fn new_head_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, &format!(r"GPU (\d+) has a total capaci?ty of {SIZE} of which {SIZE} is free\."))
}
fn proc_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, &format!(r"(?:Process (\d+)|Including non-PyTorch memory, this process) has {SIZE} memory in use\."))
}
fn allowed_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, &format!(r"{SIZE} allowed;"))
}
fn new_tail_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(
        &C,
        &format!(
            r"Of the allocated memory {SIZE} is allocated by PyTorch, (?:with {SIZE} allocated in private pools \(e\.g\., \w+ Graphs\), )?and {SIZE} is reserved by PyTorch but unallocated\."
        ),
    )
}
fn rank_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"\[rank(\d+)\]")
}
fn exc_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"((?:torch\.)?(?:cuda\.)?OutOfMemoryError|RuntimeError)")
}
fn frame_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r#"File "([^"\n]{1,500})", line (\d{1,9}), in ([^\s]{1,200})"#)
}
fn ds_usage_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"MA ([\d.]+) GB\s+Max_MA ([\d.]+) GB\s+CA ([\d.]+) GB\s+Max_CA ([\d.]+) GB")
}

fn size_at(caps: &regex::Captures, i: usize) -> Option<Size> {
    caps.get(i).and_then(|m| parse_size(m.as_str()))
}

/// The longest window a single PyTorch message can span.
const MESSAGE_WINDOW: usize = 4096;
/// How far back to look for the traceback of a message.
const CONTEXT_BACK: usize = 16 * 1024;
/// How far back to look for DeepSpeed's memory line.
const DS_BACK: usize = 64 * 1024;

fn backend(window: &str) -> String {
    ["HIP", "XPU"].iter().find(|b| window.starts_with(&format!("{b} out of memory"))).unwrap_or(&"CUDA").to_string()
}

/// Parse one PyTorch message starting at `window` (already squashed).
pub fn parse_torch_message(window: &str) -> OomKind {
    let requested = requested_re().captures(window).and_then(|c| size_at(&c, 1));
    let hint = if window.contains("expandable_segments") {
        Some(Hint::ExpandableSegments)
    } else if window.contains("max_split_size_mb") {
        Some(Hint::MaxSplitSizeMb)
    } else {
        None
    };
    let partial = |requested: Option<Size>| OomKind::TorchPartial {
        requested,
        text: window.chars().take(300).collect::<String>().trim().to_string(),
    };
    let Some(req) = requested.clone() else { return partial(requested) };
    // old form: everything in one parenthesis
    if let Some(c) = old_re().captures(window) {
        let (Some(device), Some(total), Some(alloc), Some(free), Some(last)) = (
            c.get(1).and_then(|m| m.as_str().parse().ok()),
            size_at(&c, 2),
            size_at(&c, 3),
            size_at(&c, 5),
            size_at(&c, 7),
        ) else {
            return partial(requested);
        };
        let cached = c.get(8).map(|m| m.as_str() == "cached").unwrap_or(false);
        return OomKind::Torch(TorchOom {
            backend: backend(window),
            era: if cached { TorchEra::Cached } else { TorchEra::Reserved },
            device,
            requested: req,
            total,
            free,
            allocated: alloc,
            reserved: if cached { None } else { Some(last.clone()) },
            unallocated: if cached { Some(last) } else { None },
            allowed: size_at(&c, 6),
            private_pools: None,
            this_process: None,
            processes: Vec::new(),
            hint,
        });
    }
    let Some(head) = new_head_re().captures(window) else { return partial(requested) };
    let Some(tail) = new_tail_re().captures(window) else { return partial(requested) };
    let (Some(device), Some(total), Some(free)) =
        (head.get(1).and_then(|m| m.as_str().parse().ok()), size_at(&head, 2), size_at(&head, 3))
    else {
        return partial(requested);
    };
    let (Some(head_m), Some(tail_m)) = (head.get(0), tail.get(0)) else { return partial(requested) };
    let between = if head_m.end() <= tail_m.start() { &window[head_m.end()..tail_m.start()] } else { "" };
    let mut this_process = None;
    let mut processes = Vec::new();
    for p in proc_re().captures_iter(between) {
        let Some(used) = size_at(&p, 2) else { continue };
        match p.get(1).and_then(|m| m.as_str().parse::<u64>().ok()) {
            Some(pid) => processes.push(ProcessUse { pid, used }),
            None => this_process = Some(used),
        }
    }
    let allowed = allowed_re().captures(between).and_then(|c| size_at(&c, 1));
    let Some(allocated) = size_at(&tail, 1) else { return partial(requested) };
    OomKind::Torch(TorchOom {
        backend: backend(window),
        era: TorchEra::Sentences,
        device,
        requested: req,
        total,
        free,
        allocated,
        reserved: None,
        unallocated: size_at(&tail, 3),
        allowed,
        private_pools: size_at(&tail, 2),
        this_process,
        processes,
        hint,
    })
}

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
        deepspeed_usage,
        nvidia_smi: None,
    }
}

/// Offsets where a PyTorch message starts: "CUDA out of memory." or a
/// bare "Tried to allocate <digit>" (pasted without its first sentence).
/// Literal search first (std's substring search is fast in every build),
/// the regex only on a few bytes around each hit.
fn message_starts(text: &str) -> Vec<usize> {
    /// CUDA, ROCm (HIP) and Intel (XPU) builds print the same message
    const HEADS: [&str; 3] = ["CUDA out of memory.", "HIP out of memory.", "XPU out of memory."];
    const TRIED: &str = "Tried to allocate ";
    let mut starts: Vec<usize> = HEADS.iter().flat_map(|h| text.match_indices(h).map(|(i, _)| i)).collect();
    for (i, _) in text.match_indices(TRIED) {
        // part of a "CUDA out of memory. Tried to allocate" already found?
        let back = floor_boundary(text, i.saturating_sub(HEADS[0].len() + 2));
        if HEADS.iter().any(|h| text[back..i].contains(h)) {
            continue;
        }
        // MPS prints "Tried to allocate" after its own figures (other_frameworks)
        let mps_back = floor_boundary(text, i.saturating_sub(MPS_REACH));
        if text[mps_back..i].contains("MPS backend out of memory") {
            continue;
        }
        // a bare "Tried to allocate" counts only when a size follows it
        let end = floor_boundary(text, i + TRIED.len() + 24);
        if requested_re().is_match(&text[i..end]) {
            starts.push(i);
        }
    }
    starts.sort_unstable();
    starts
}

/// How far before "Tried to allocate" an MPS message starts.
const MPS_REACH: usize = 200;

/// Most events reported from one input (the rest are counted, not kept).
pub const MAX_EVENTS: usize = 200;

/// Every OOM message in `text`, identical ones folded, in order of first
/// appearance.
pub fn scan(text: &str) -> Vec<OomEvent> {
    let idx = LineIndex::new(text);
    let smi = nvidia_smi::parse(text);
    let mut raw: Vec<(usize, OomKind)> = Vec::new();
    let starts = message_starts(text);
    for (i, &s) in starts.iter().enumerate() {
        let next = starts.get(i + 1).copied().unwrap_or(text.len());
        let end = floor_boundary(text, (s + MESSAGE_WINDOW).min(next));
        raw.push((s, parse_torch_message(&squash(&text[s..end]))));
    }
    for (s, o) in other_frameworks::scan(text) {
        raw.push((s, OomKind::Other(o)));
    }
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
        events.push(OomEvent { line, occurrences: 1, lines: vec![line], rank, exception, context, kind });
    }
    events
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
        assert_eq!(t.device, 3);
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
