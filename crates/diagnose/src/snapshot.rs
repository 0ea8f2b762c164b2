//! PyTorch memory snapshots (`torch.cuda.memory._dump_snapshot`), read
//! with the restricted unpickler in [`crate::pickle`] (no code runs), and
//! what they show: the timeline of allocated/reserved bytes, the peak and
//! what was live there with its Python frames, reserved vs allocated per
//! segment, and allocations grouped by what their frames say.
//!
//! Schema: `_snapshot()` docstring (torch/cuda/memory.py) as summarised in
//! /work/shared/reference/pytorch-formats.md (c). Frames are listed
//! innermost first, as `_memory_viz` prints them.

use crate::pickle::PickleError;
use serde::Serialize;
use std::collections::HashMap;
use std::io::Read;

mod decode;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Pickle(#[from] PickleError),
    #[error("not a PyTorch memory snapshot: {0}")]
    NotASnapshot(String),
    #[error("snapshot field {path}: expected {expected}")]
    Field { path: String, expected: &'static str },
    /// a record listed twice through a memo reference
    #[error("snapshot refused: {0}")]
    Shared(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Frame {
    pub filename: String,
    pub line: i64,
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockState {
    ActiveAllocated,
    /// `active_pending_free` in current PyTorch (Module.cpp), `active_awaiting_free` in the docstring
    ActiveAwaitingFree,
    Inactive,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub address: u64,
    pub size: u64,
    pub requested_size: u64,
    pub state: BlockState,
    /// index into [`Snapshot::stacks`]
    pub stack: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub device: u64,
    pub address: u64,
    pub total_size: u64,
    pub stream: u64,
    pub segment_type: String,
    pub is_expandable: bool,
    pub blocks: Vec<Block>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Oom,
    Snapshot,
    /// index into [`Snapshot::other_actions`]
    Other(u32),
}

/// One trace entry, as [`Trace`] hands it out (stored packed in 32 bytes:
/// a 1 GB snapshot holds ~10 M of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceEntry {
    pub action: Action,
    pub addr: Option<u64>,
    pub size: u64,
    pub stream: u64,
    pub time_us: Option<i64>,
    pub device_free: Option<u64>,
    /// index into [`Snapshot::stacks`]
    pub stack: Option<u32>,
}

/// The snapshot, with frames stored once and frame lists interned by
/// content (identical tracebacks share one entry of `stacks`).
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// unique frames
    pub frames: Vec<Frame>,
    /// unique frame lists (indices into `frames`), innermost first
    pub stacks: Vec<Vec<u32>>,
    pub segments: Vec<Segment>,
    /// one trace per device
    pub traces: Vec<Trace>,
    /// names of actions this reader does not know ([`Action::Other`]), at most 64 characters
    pub other_actions: Vec<String>,
    /// frame references that reused an already-seen frame object
    pub shared_frame_refs: usize,
    /// frame-list references that reused an already-seen frame list
    pub shared_stack_refs: usize,
}

/// A device's trace entries, packed (32 bytes each instead of the 80 of a
/// [`TraceEntry`]): what is rare (an OOM's `device_free` beside an
/// address, more than 65 535 streams) lives in side tables.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    entries: Vec<Packed>,
    /// distinct stream values (index = `Packed::stream`)
    streams: Vec<u64>,
    stream_ids: HashMap<u64, u16>,
    /// rare fields, by entry index (sorted)
    extras: Vec<(u32, Extra)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Packed {
    /// the address, or an OOM's `device_free` (see `flags`)
    word: u64,
    size: u64,
    time_us: i64,
    stack: u32,
    stream: u16,
    action: u8,
    flags: u8,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Extra {
    device_free: Option<u64>,
    stream: Option<u64>,
    other_action: Option<u32>,
}

const F_ADDR: u8 = 1;
const F_TIME: u8 = 2;
const F_STACK: u8 = 4;
const F_FREE_IN_WORD: u8 = 8;
const F_EXTRA: u8 = 16;
const A_OTHER: u8 = 255;
const STREAM_EXTRA: u16 = u16::MAX;

fn action_code(a: Action) -> u8 {
    match a {
        Action::Alloc => 0,
        Action::FreeRequested => 1,
        Action::FreeCompleted => 2,
        Action::SegmentAlloc => 3,
        Action::SegmentFree => 4,
        Action::SegmentMap => 5,
        Action::SegmentUnmap => 6,
        Action::Oom => 7,
        Action::Snapshot => 8,
        Action::Other(_) => A_OTHER,
    }
}

impl Trace {
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// Append an entry (the decoder's).
    pub fn push(&mut self, e: TraceEntry) {
        let i = self.entries.len() as u32;
        let mut flags = 0u8;
        let mut extra = Extra { device_free: None, stream: None, other_action: None };
        let word = match (e.addr, e.device_free) {
            (Some(a), free) => {
                flags |= F_ADDR;
                extra.device_free = free;
                a
            }
            (None, Some(f)) => {
                flags |= F_FREE_IN_WORD;
                f
            }
            (None, None) => 0,
        };
        let last = self.entries.last().map(|p| p.stream).filter(|&k| self.streams.get(k as usize) == Some(&e.stream));
        let stream = match last.or_else(|| self.stream_ids.get(&e.stream).copied()) {
            Some(k) => k,
            None if self.streams.len() < STREAM_EXTRA as usize => {
                self.streams.push(e.stream);
                let k = (self.streams.len() - 1) as u16;
                self.stream_ids.insert(e.stream, k);
                k
            }
            None => {
                extra.stream = Some(e.stream);
                STREAM_EXTRA
            }
        };
        if let Action::Other(k) = e.action {
            extra.other_action = Some(k);
        }
        if extra.device_free.is_some() || extra.stream.is_some() || extra.other_action.is_some() {
            flags |= F_EXTRA;
            self.extras.push((i, extra));
        }
        if e.time_us.is_some() {
            flags |= F_TIME;
        }
        if e.stack.is_some() {
            flags |= F_STACK;
        }
        let p = Packed {
            word,
            size: e.size,
            time_us: e.time_us.unwrap_or(0),
            stack: e.stack.unwrap_or(0),
            stream,
            action: action_code(e.action),
            flags,
        };
        // grow by an eighth, not double: this is the largest vector
        if self.entries.len() == self.entries.capacity() && self.entries.len() >= 1 << 16 {
            self.entries.reserve_exact(self.entries.len() / 8);
        }
        self.entries.push(p);
    }
    fn unpack(&self, i: usize, p: &Packed) -> TraceEntry {
        let extra = if p.flags & F_EXTRA != 0 {
            self.extras.binary_search_by_key(&(i as u32), |x| x.0).ok().map(|k| self.extras[k].1)
        } else {
            None
        };
        let action = match p.action {
            0 => Action::Alloc,
            1 => Action::FreeRequested,
            2 => Action::FreeCompleted,
            3 => Action::SegmentAlloc,
            4 => Action::SegmentFree,
            5 => Action::SegmentMap,
            6 => Action::SegmentUnmap,
            7 => Action::Oom,
            8 => Action::Snapshot,
            _ => Action::Other(extra.and_then(|x| x.other_action).unwrap_or(0)),
        };
        TraceEntry {
            action,
            addr: (p.flags & F_ADDR != 0).then_some(p.word),
            size: p.size,
            stream: if p.stream == STREAM_EXTRA {
                extra.and_then(|x| x.stream).unwrap_or(0)
            } else {
                self.streams.get(p.stream as usize).copied().unwrap_or(0)
            },
            time_us: (p.flags & F_TIME != 0).then_some(p.time_us),
            device_free: if p.flags & F_FREE_IN_WORD != 0 { Some(p.word) } else { extra.and_then(|x| x.device_free) },
            stack: (p.flags & F_STACK != 0).then_some(p.stack),
        }
    }
    pub fn get(&self, i: usize) -> Option<TraceEntry> {
        self.entries.get(i).map(|p| self.unpack(i, p))
    }
    pub fn first(&self) -> Option<TraceEntry> {
        self.get(0)
    }
    /// The entries in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = TraceEntry> + '_ {
        self.entries.iter().enumerate().map(|(i, p)| self.unpack(i, p))
    }
    fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
        self.extras.shrink_to_fit();
    }
}

impl Snapshot {
    /// The name of an action as PyTorch writes it.
    pub fn action_name<'a>(&'a self, a: &Action) -> &'a str {
        match a {
            Action::Alloc => "alloc",
            Action::FreeRequested => "free_requested",
            Action::FreeCompleted => "free_completed",
            Action::SegmentAlloc => "segment_alloc",
            Action::SegmentFree => "segment_free",
            Action::SegmentMap => "segment_map",
            Action::SegmentUnmap => "segment_unmap",
            Action::Oom => "oom",
            Action::Snapshot => "snapshot",
            Action::Other(i) => self.other_actions.get(*i as usize).map(|s| s.as_str()).unwrap_or("?"),
        }
    }
}

/// Memory the decoder may hold for a pickle of `len` bytes: the decoded
/// form of a real snapshot is smaller than the file (frames and tracebacks
/// are interned; a trace entry of ~100 pickle bytes becomes 80 bytes), so
/// the file's size plus 64 MiB (at least 256 MiB) bounds what any input can
/// make the reader hold.
pub fn decode_budget(len: u64) -> u64 {
    len.max(256 << 20).saturating_add(64 << 20)
}

/// Parse snapshot bytes (a pickle) into a [`Snapshot`]. Never runs code.
pub fn load(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    decode::decode(bytes, decode_budget(bytes.len() as u64))
}

/// Parse a snapshot streamed from `r` (at most `len` bytes are expected:
/// the memory budget follows it), holding one 1 MiB buffer of it at a time.
pub fn load_reader(r: impl Read, len: u64) -> Result<Snapshot, SnapshotError> {
    decode::decode(r, decode_budget(len))
}

// ---------------------------------------------------------------- analysis

/// One point of the timeline (after trace entry `index`; `None` = before the first).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Point {
    pub index: Option<usize>,
    pub time_us: Option<i64>,
    #[serde(rename = "allocated_bytes")]
    pub allocated: u64,
    #[serde(rename = "reserved_bytes")]
    pub reserved: u64,
    /// allocated bytes by site, in the order of [`DeviceReport::sites`]
    #[serde(rename = "by_site_bytes")]
    pub by_site: Vec<u64>,
}

/// A band of the timeline: an allocation site (see [`site_label`]), the
/// allocations made before the trace began, or all other sites.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Site {
    pub label: String,
    /// live bytes of this site at the peak (without a trace: now)
    pub peak_bytes: u64,
    /// the most this site held at any point of the timeline
    pub max_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveAlloc {
    pub address: Option<u64>,
    #[serde(rename = "size_bytes")]
    pub size: u64,
    pub group: String,
    /// innermost first, `file:line:name`, at most 6
    pub frames: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    pub label: String,
    pub bytes: u64,
    pub count: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SegmentUse {
    pub address: u64,
    pub segment_type: String,
    #[serde(rename = "total_bytes")]
    pub total: u64,
    #[serde(rename = "allocated_bytes")]
    pub allocated: u64,
    /// inactive blocks (free inside the segment)
    #[serde(rename = "free_bytes")]
    pub free: u64,
    #[serde(rename = "largest_free_block_bytes")]
    pub largest_free_block: u64,
    pub blocks: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnapOom {
    pub index: usize,
    pub time_us: Option<i64>,
    #[serde(rename = "requested_bytes")]
    pub requested: u64,
    #[serde(rename = "device_free_bytes")]
    pub device_free: Option<u64>,
    #[serde(rename = "allocated_then_bytes")]
    pub allocated_then: u64,
    #[serde(rename = "reserved_then_bytes")]
    pub reserved_then: u64,
    pub class: crate::classify::OomClass,
    pub reasoning: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeviceReport {
    pub device: u64,
    #[serde(rename = "reserved_bytes")]
    pub reserved: u64,
    #[serde(rename = "allocated_bytes")]
    pub allocated: u64,
    /// Σ requested_size of allocated blocks (user bytes; the rest is 512-B rounding)
    #[serde(rename = "requested_bytes")]
    pub requested: u64,
    #[serde(rename = "awaiting_free_bytes")]
    pub awaiting_free: u64,
    /// free bytes inside segments (reserved but unallocated)
    #[serde(rename = "cached_free_bytes")]
    pub cached_free: u64,
    #[serde(rename = "largest_free_block_bytes")]
    pub largest_free_block: u64,
    pub segments: usize,
    /// segments with the most free bytes inside them, at most 8
    pub most_fragmented: Vec<SegmentUse>,
    pub trace_entries: usize,
    /// downsampled to at most [`MAX_POINTS`]
    pub timeline: Vec<Point>,
    pub peak: Option<Point>,
    /// largest live allocations at the peak (or at the snapshot without a trace), at most 10
    pub peak_top: Vec<LiveAlloc>,
    /// live bytes at the peak grouped by what the frames say
    pub groups: Vec<Group>,
    /// the timeline's bands: the largest allocation sites at the peak, at
    /// most [`TOP_SITES`], then "other sites"; "allocated before the trace"
    /// first when the trace did not see everything allocated
    pub sites: Vec<Site>,
    pub ooms: Vec<SnapOom>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SnapshotReport {
    pub frames: usize,
    pub stacks: usize,
    pub shared_frame_refs: usize,
    pub shared_stack_refs: usize,
    pub devices: Vec<DeviceReport>,
}

pub const MAX_POINTS: usize = 2000;
/// Below this share of the peak, the live set found there is reported as incomplete.
pub const LIVE_ACCOUNTED_SHARE: f64 = 0.9;

fn stem(path: &str) -> &str {
    let f = basename(path);
    f.strip_suffix(".py").unwrap_or(f)
}

fn basename(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// What a frame is, for labelling an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// the history recorder and the caching allocator themselves
    Recorder,
    /// the interpreter and dispatcher plumbing memory_viz hides
    Plumbing,
    /// other C/C++ frames (ATen kernels, autograd engine)
    Native,
    /// Python in site-packages/dist-packages, the standard library or torch
    Library,
    /// the user's own Python
    User,
}

/// Frames memory_viz hides (torch/utils/viz/MemoryViz.js `frameFilter`,
/// torch/cuda/_memory_viz.py `_frame_filter`), plus the recorder's Python
/// entry point and the caching allocator's own functions.
const RECORDER_NAMES: [&str; 6] = [
    "unwind::unwind",
    "CapturedTraceback::gather",
    "gather_with_cpp",
    "_record_memory_history",
    "CachingAllocator",
    "c10::cuda::",
];
const RECORDER_FILES: [&str; 4] = ["CachingAllocator", "combined_traceback", "memory_snapshot", "/c10/cuda/"];
const PLUMBING_NAMES: [&str; 5] = ["__libc_start_main", "PyEval_", "PyObject_", "PyFunction_", "_PyEval"];
const PLUMBING_FILES: [&str; 10] = [
    "core/boxing",
    "/Register",
    "/Redispatch",
    "pythonrun.c",
    "Modules/main.c",
    "Objects/call.c",
    "Objects/methodobject.c",
    "pycore_ceval.h",
    "ceval.c",
    "cpython/abstract.h",
];

pub fn frame_kind(f: &Frame) -> FrameKind {
    let file = f.filename.replace('\\', "/");
    if RECORDER_NAMES.iter().any(|n| f.name.contains(n)) || RECORDER_FILES.iter().any(|n| file.contains(n)) {
        return FrameKind::Recorder;
    }
    if f.name == "_start"
        || PLUMBING_NAMES.iter().any(|n| f.name.contains(n))
        || PLUMBING_FILES.iter().any(|n| file.contains(n))
    {
        return FrameKind::Plumbing;
    }
    if !file.ends_with(".py") {
        return FrameKind::Native;
    }
    let library = file.contains("site-packages/")
        || file.contains("dist-packages/")
        || file.contains("/lib/python")
        || file.contains("torch/")
        || file.starts_with('<');
    if library {
        FrameKind::Library
    } else {
        FrameKind::User
    }
}

/// The frames worth showing: without the recorder and plumbing.
fn shown<'a>(frames: &[&'a Frame]) -> Vec<&'a Frame> {
    frames.iter().copied().filter(|f| !matches!(frame_kind(f), FrameKind::Recorder | FrameKind::Plumbing)).collect()
}

fn in_torch(f: &Frame) -> bool {
    f.filename.replace('\\', "/").contains("torch/")
}

/// The Python frame that names an allocation: the innermost of the user's
/// code, else of a library other than torch (the model's code in
/// transformers, say), else of torch.
fn naming_frame<'a>(f: &[&'a Frame], pred: impl Fn(&Frame) -> bool) -> Option<&'a Frame> {
    let kind = |x: &Frame| frame_kind(x);
    f.iter()
        .find(|x| pred(x) && kind(x) == FrameKind::User)
        .or_else(|| f.iter().find(|x| pred(x) && kind(x) == FrameKind::Library && !in_torch(x)))
        .or_else(|| f.iter().find(|x| pred(x) && kind(x) == FrameKind::Library))
        .copied()
}

/// Where an allocation was made: the innermost frame of the user's code,
/// else the innermost library module (torch last), else the innermost
/// native function (never the recorder or the allocator), as
/// `file:line function`.
pub fn site_label(frames: &[&Frame]) -> String {
    let f = shown(frames);
    let pick = naming_frame(&f, |_| true).or(f.first().copied());
    match pick {
        Some(x) if x.filename.ends_with(".py") => format!("{}:{} {}", basename(&x.filename), x.line, x.name),
        Some(x) => x.name.chars().take(80).collect(),
        None => "no frames recorded".to_string(),
    }
}

/// What a frame list says the allocation was for.
pub fn group_label(frames: &[&Frame]) -> String {
    let frames = shown(frames);
    if frames.is_empty() {
        return "no frames recorded".to_string();
    }
    let f = |f: &&Frame| f.filename.replace('\\', "/");
    if frames.iter().any(|x| (x.name == "step" || x.name.ends_with("_step")) && f(x).contains("optim")) {
        return "optimizer step".to_string();
    }
    if frames.iter().any(|x| x.name.contains("backward") || f(x).contains("torch/autograd")) {
        return "autograd backward".to_string();
    }
    if let Some(fw) = naming_frame(&frames, |x| x.name == "forward") {
        return format!("forward of {}", stem(&fw.filename));
    }
    match naming_frame(&frames, |_| true).or(frames.first().copied()) {
        Some(x) if x.filename.ends_with(".py") => format!("{}:{}", stem(&x.filename), x.name),
        Some(x) => x.name.chars().take(80).collect(),
        None => "no frames recorded".to_string(),
    }
}

/// Sites tracked one by one on the timeline; more share one band.
const MAX_TRACKED_SITES: usize = 1024;
/// Sites drawn as their own band (the rest are "other sites").
pub const TOP_SITES: usize = 8;
pub const SITE_BEFORE_TRACE: &str = "allocated before the trace";
pub const SITE_OTHER: &str = "other sites";

/// Hasher for allocation addresses: a keyed multiply-xorshift (addresses
/// come from the file; the per-process key keeps crafted collisions out
/// at a fraction of SipHash's cost on ~10 M lookups).
#[derive(Clone, Copy)]
struct AddrHasher(u64);
impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        let x = self.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        x ^ (x >> 29)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(31);
    }
}
#[derive(Clone, Copy)]
struct AddrKey(u64);
impl std::hash::BuildHasher for AddrKey {
    type Hasher = AddrHasher;
    fn build_hasher(&self) -> AddrHasher {
        AddrHasher(self.0)
    }
}
fn addr_key() -> AddrKey {
    use std::hash::{BuildHasher, Hasher};
    AddrKey(std::collections::hash_map::RandomState::new().build_hasher().finish() | 1)
}
type AddrMap<V> = HashMap<u64, V, AddrKey>;

/// Labels of every stack, computed once per stack.
struct Labels {
    group: Vec<u32>,
    site: Vec<u32>,
    groups: Vec<String>,
    sites: Vec<String>,
}

impl Snapshot {
    fn stack_frames(&self, s: Option<u32>) -> Vec<&Frame> {
        s.and_then(|i| self.stacks.get(i as usize))
            .map(|ids| ids.iter().filter_map(|&i| self.frames.get(i as usize)).collect())
            .unwrap_or_default()
    }
    /// The frames to print for an allocation, innermost first: its Python
    /// frames when it has any (C++ frames of ATen say little to the user),
    /// else its native frames; never the recorder's.
    fn frame_lines(&self, s: Option<u32>) -> Vec<String> {
        let frames = shown(&self.stack_frames(s));
        let python: Vec<&Frame> = frames.iter().copied().filter(|f| f.filename.ends_with(".py")).collect();
        let pick = if python.is_empty() { frames } else { python };
        pick.iter().take(6).map(|f| format!("{}:{}:{}", f.filename, f.line, f.name)).collect()
    }

    fn labels(&self) -> Labels {
        let mut l = Labels { group: Vec::new(), site: Vec::new(), groups: Vec::new(), sites: Vec::new() };
        let mut gi: HashMap<String, u32> = HashMap::new();
        let mut si: HashMap<String, u32> = HashMap::new();
        // index 0 of both: an allocation without a frame list
        for s in std::iter::once(None).chain((0..self.stacks.len() as u32).map(Some)) {
            let frames = self.stack_frames(s);
            let (g, st) = (group_label(&frames), site_label(&frames));
            let n = gi.len() as u32;
            let g = *gi.entry(g.clone()).or_insert_with(|| {
                l.groups.push(g);
                n
            });
            let n = si.len() as u32;
            let st = *si.entry(st.clone()).or_insert_with(|| {
                l.sites.push(st);
                n
            });
            l.group.push(g);
            l.site.push(st);
        }
        l
    }

    /// Everything the report shows, per device.
    pub fn analyze(&self) -> SnapshotReport {
        let mut devices: Vec<u64> = self.segments.iter().map(|s| s.device).collect();
        devices.extend(
            (0..self.traces.len() as u64).filter(|&d| self.traces.get(d as usize).is_some_and(|t| !t.is_empty())),
        );
        devices.sort_unstable();
        devices.dedup();
        let labels = self.labels();
        SnapshotReport {
            frames: self.frames.len(),
            stacks: self.stacks.len(),
            shared_frame_refs: self.shared_frame_refs,
            shared_stack_refs: self.shared_stack_refs,
            devices: devices.into_iter().map(|d| self.analyze_device(d, &labels)).collect(),
        }
    }

    fn analyze_device(&self, device: u64, labels: &Labels) -> DeviceReport {
        let segs: Vec<&Segment> = self.segments.iter().filter(|s| s.device == device).collect();
        let mut notes = Vec::new();
        let totals = segment_totals(&segs, &mut notes);
        let empty = Trace::default();
        let trace = self.traces.get(device as usize).unwrap_or(&empty);
        let Timeline { mut points, base_alloc, peak_at, ooms } =
            timeline(trace, totals.allocated, totals.reserved, &mut notes);

        let n_sites = labels.sites.len().min(MAX_TRACKED_SITES);
        let SiteReplay { series, live } = replay_sites(&segs, trace, labels, n_sites, &points, base_alloc, peak_at);
        let peak =
            peak_at.map(|idx| points.iter().find(|x| x.index == idx).cloned().unwrap_or_else(|| points[0].clone()));
        let live_sum = live.iter().fold(0u64, |a, l| a.saturating_add(l.1));
        if let Some(p) = &peak {
            if (live_sum as f64) < LIVE_ACCOUNTED_SHARE * p.allocated as f64 {
                notes.push(format!(
                    "the live allocations found at the peak add up to {} of its {}: the rest was allocated before the recorded trace began (history ring buffer) and never freed or touched in it",
                    crate::classify::b(live_sum),
                    crate::classify::b(p.allocated)
                ));
            }
        }
        let LiveAtPeak { groups, site_bytes, peak_top } = self.live_at_peak(live, labels);
        let sites = site_bands(series, &mut points, &site_bytes, labels, n_sites, trace.is_empty(), peak.as_ref());
        let peak = peak.map(|p| points.iter().find(|x| x.index == p.index).cloned().unwrap_or(p));
        if trace.is_empty() {
            points.clear();
        }

        DeviceReport {
            device,
            reserved: totals.reserved,
            allocated: totals.allocated,
            requested: totals.requested,
            awaiting_free: totals.awaiting_free,
            cached_free: totals.cached_free,
            largest_free_block: totals.largest_free_block,
            segments: segs.len(),
            most_fragmented: totals.most_fragmented,
            trace_entries: trace.len(),
            timeline: points,
            peak,
            peak_top,
            groups,
            sites,
            ooms,
            notes,
        }
    }

    /// Groups and sites of what was live at the peak (or now, without a
    /// trace), and the largest of those allocations.
    fn live_at_peak(&self, mut live: Vec<(u64, u64, Option<u32>)>, labels: &Labels) -> LiveAtPeak {
        let mut group_bytes: HashMap<u32, (u64, u64)> = HashMap::new();
        let mut site_bytes: HashMap<u32, u64> = HashMap::new();
        for &(_, size, st) in &live {
            let s = st.map(|s| s as usize + 1).unwrap_or(0);
            let g = group_bytes.entry(labels.group.get(s).copied().unwrap_or(0)).or_insert((0, 0));
            g.0 = g.0.saturating_add(size);
            g.1 += 1;
            let e = site_bytes.entry(labels.site.get(s).copied().unwrap_or(0)).or_insert(0);
            *e = e.saturating_add(size);
        }
        let mut groups: Vec<Group> = group_bytes
            .into_iter()
            .map(|(g, (bytes, count))| Group { label: labels.groups[g as usize].clone(), bytes, count })
            .collect();
        groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.label.cmp(&b.label)));
        live.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let peak_top: Vec<LiveAlloc> = live
            .iter()
            .take(10)
            .map(|&(a, size, st)| LiveAlloc {
                address: Some(a),
                size,
                group: labels.groups
                    [labels.group.get(st.map(|s| s as usize + 1).unwrap_or(0)).copied().unwrap_or(0) as usize]
                    .clone(),
                frames: self.frame_lines(st),
            })
            .collect();
        LiveAtPeak { groups, site_bytes, peak_top }
    }
}

/// A replayed byte count as a reported one: below zero and above u64 clamp.
#[inline]
fn clamp_bytes(v: i128) -> u64 {
    v.clamp(0, u64::MAX as i128) as u64
}

/// What a device's segments hold as the snapshot left them.
struct SegmentTotals {
    reserved: u64,
    allocated: u64,
    requested: u64,
    awaiting_free: u64,
    cached_free: u64,
    largest_free_block: u64,
    most_fragmented: Vec<SegmentUse>,
}

/// Sums the blocks of each segment; a segment whose blocks do not add up
/// gets a note (at most ten).
fn segment_totals(segs: &[&Segment], notes: &mut Vec<String>) -> SegmentTotals {
    let (mut reserved, mut allocated, mut requested, mut awaiting, mut cached_free, mut largest_free) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut seg_use = Vec::new();
    for s in segs {
        reserved = reserved.saturating_add(s.total_size);
        let (mut sa, mut sf, mut sl) = (0u64, 0u64, 0u64);
        for b in &s.blocks {
            match b.state {
                BlockState::ActiveAllocated => {
                    sa = sa.saturating_add(b.size);
                    requested = requested.saturating_add(b.requested_size.min(b.size));
                }
                BlockState::ActiveAwaitingFree => {
                    sa = sa.saturating_add(b.size);
                    awaiting = awaiting.saturating_add(b.size);
                }
                BlockState::Inactive => {
                    sf = sf.saturating_add(b.size);
                    sl = sl.max(b.size);
                }
            }
        }
        let block_sum = s.blocks.iter().fold(0u64, |a, b| a.saturating_add(b.size));
        if !s.blocks.is_empty() && block_sum != s.total_size {
            notes.push(format!(
                "segment 0x{:x}: blocks sum to {} B but the segment is {} B",
                s.address, block_sum, s.total_size
            ));
        }
        allocated = allocated.saturating_add(sa);
        cached_free = cached_free.saturating_add(sf);
        largest_free = largest_free.max(sl);
        seg_use.push(SegmentUse {
            address: s.address,
            segment_type: s.segment_type.clone(),
            total: s.total_size,
            allocated: sa,
            free: sf,
            largest_free_block: sl,
            blocks: s.blocks.len(),
        });
    }
    notes.truncate(10);
    seg_use.sort_by(|a, b| b.free.cmp(&a.free).then(a.address.cmp(&b.address)));
    let most_fragmented: Vec<SegmentUse> = seg_use.into_iter().filter(|s| s.free > 0).take(8).collect();
    SegmentTotals {
        reserved,
        allocated,
        requested,
        awaiting_free: awaiting,
        cached_free,
        largest_free_block: largest_free,
        most_fragmented,
    }
}

/// Allocated and reserved bytes over the trace, and its OOMs.
struct Timeline {
    /// the baseline, then the kept entries in trace order (`by_site` empty)
    points: Vec<Point>,
    /// allocated bytes before the first entry
    base_alloc: i128,
    /// `None` without a trace; `Some(None)` when the peak is the baseline
    peak_at: Option<Option<usize>>,
    ooms: Vec<SnapOom>,
}

/// Replays the trace backwards from the final state to place the baseline,
/// then forwards: the timeline keeps every point up to MAX_POINTS, else the
/// end of each of MAX_POINTS buckets, the peak and every OOM.
fn timeline(trace: &Trace, allocated: u64, reserved: u64, notes: &mut Vec<String>) -> Timeline {
    // net change over the trace, to place the baseline
    let (mut d_alloc, mut d_res) = (0i128, 0i128);
    for t in trace.iter() {
        match t.action {
            Action::Alloc => d_alloc += t.size as i128,
            Action::FreeCompleted => d_alloc -= t.size as i128,
            Action::SegmentAlloc | Action::SegmentMap => d_res += t.size as i128,
            Action::SegmentFree | Action::SegmentUnmap => d_res -= t.size as i128,
            _ => {}
        }
    }
    let mut base_alloc = allocated as i128 - d_alloc;
    let mut base_res = reserved as i128 - d_res;
    if !trace.is_empty() && (base_alloc < 0 || base_res < 0) {
        notes.push("the trace does not add up to the final state (ring buffer wrapped or entries missing); the timeline is clamped at 0".to_string());
        base_alloc = base_alloc.max(0);
        base_res = base_res.max(0);
    }
    let step = (trace.len() + 1).div_ceil(MAX_POINTS).max(1);
    let point = |i: Option<usize>, time_us: Option<i64>, a: i128, r: i128| Point {
        index: i,
        time_us,
        allocated: clamp_bytes(a),
        reserved: clamp_bytes(r),
        by_site: Vec::new(),
    };
    let mut points = vec![point(None, trace.first().and_then(|t| t.time_us), base_alloc, base_res)];
    let (mut cur_a, mut cur_r) = (base_alloc, base_res);
    let mut peak_i: Option<usize> = None;
    let mut peak_v = cur_a;
    let mut peak_point = None;
    let mut ooms = Vec::new();
    for (i, t) in trace.iter().enumerate() {
        match t.action {
            Action::Alloc => cur_a += t.size as i128,
            Action::FreeCompleted => cur_a -= t.size as i128,
            Action::SegmentAlloc | Action::SegmentMap => cur_r += t.size as i128,
            Action::SegmentFree | Action::SegmentUnmap => cur_r -= t.size as i128,
            Action::Oom => {
                let (a, r) = (clamp_bytes(cur_a), clamp_bytes(cur_r));
                let (class, reasoning) = crate::classify::classify_allocator_state(t.size, t.device_free, a, r);
                ooms.push(SnapOom {
                    index: i,
                    time_us: t.time_us,
                    requested: t.size,
                    device_free: t.device_free,
                    allocated_then: a,
                    reserved_then: r,
                    class,
                    reasoning,
                });
            }
            _ => {}
        }
        if cur_a > peak_v {
            peak_v = cur_a;
            peak_i = Some(i);
            peak_point = Some(point(Some(i), t.time_us, cur_a, cur_r));
        }
        let kept = (i + 1) % step == 0 || i + 1 == trace.len() || matches!(t.action, Action::Oom);
        if kept {
            points.push(point(Some(i), t.time_us, cur_a, cur_r));
        }
    }
    if let Some(pp) = peak_point {
        // the peak, in order, unless a bucket end already is it
        if let Err(at) = points.binary_search_by(|p| p.index.cmp(&pp.index)) {
            points.insert(at, pp);
        }
    }
    let peak_at = if trace.is_empty() { None } else { Some(peak_i) };
    Timeline { points, base_alloc, peak_at, ooms }
}

/// Band 0: allocated before the trace; 1..=n_sites: sites; n_sites + 1: the rest.
type Bands = Vec<i128>;

/// The trace replayed with addresses.
struct SiteReplay {
    /// bytes per band at each point of the timeline: (index into the points, bands)
    series: Vec<(usize, Bands)>,
    /// live at the peak: (address, size, stack)
    live: Vec<(u64, u64, Option<u32>)>,
}

/// Replays the trace with addresses: bytes per site over time, and what
/// was live at the peak (blocks the trace never touched were live all along).
fn replay_sites(
    segs: &[&Segment],
    trace: &Trace,
    labels: &Labels,
    n_sites: usize,
    points: &[Point],
    base_alloc: i128,
    peak_at: Option<Option<usize>>,
) -> SiteReplay {
    let band_of = |stack: Option<u32>| -> usize {
        let s = stack.map(|s| s as usize + 1).unwrap_or(0);
        let site = labels.site.get(s).copied().unwrap_or(0) as usize;
        if site < n_sites {
            site + 1
        } else {
            n_sites + 1
        }
    };
    let mut bands: Bands = vec![0i128; n_sites + 2];
    bands[0] = base_alloc;
    // live allocations: address → (size, stack, band)
    let mut live_map: AddrMap<(u64, Option<u32>, u32)> = HashMap::with_hasher(addr_key());
    let mut block_addrs: AddrMap<()> = HashMap::with_hasher(addr_key());
    block_addrs.extend(
        segs.iter().flat_map(|s| s.blocks.iter()).filter(|b| b.state != BlockState::Inactive).map(|b| (b.address, ())),
    );
    let mut touched: AddrMap<()> = HashMap::with_hasher(addr_key());
    let mut series: Vec<(usize, Bands)> = Vec::new();
    let mut live: Vec<(u64, u64, Option<u32>)> = Vec::new();
    let mut seen_after: AddrMap<()> = HashMap::with_hasher(addr_key());
    let peak_idx = peak_at.flatten();
    // entry i comes after the peak (a peak at the baseline precedes every entry)
    let after_peak = |i: usize| match peak_at {
        Some(None) => true,
        Some(Some(p)) => i > p,
        None => false,
    };
    series.push((0, bands.clone())); // points[0]: the baseline
    let mut next_point = 1;
    for (i, t) in trace.iter().enumerate() {
        match (&t.action, t.addr) {
            (Action::Alloc, Some(a)) => {
                let band = band_of(t.stack);
                if let Some((old, _, ob)) = live_map.insert(a, (t.size, t.stack, band as u32)) {
                    bands[ob as usize] -= old as i128; // allocated twice without a free
                }
                bands[band] += t.size as i128;
                if !block_addrs.is_empty() && block_addrs.contains_key(&a) {
                    touched.insert(a, ());
                }
                if after_peak(i) {
                    seen_after.insert(a, ());
                }
            }
            (Action::FreeCompleted, Some(a)) => {
                match live_map.remove(&a) {
                    Some((size, _, band)) => bands[band as usize] -= size as i128,
                    None => {
                        bands[0] -= t.size as i128;
                        // allocated before the trace began and freed after the peak
                        if after_peak(i) && !seen_after.contains_key(&a) {
                            live.push((a, t.size, t.stack));
                        }
                    }
                }
                if !block_addrs.is_empty() && block_addrs.contains_key(&a) {
                    touched.insert(a, ());
                }
                if after_peak(i) {
                    seen_after.insert(a, ());
                }
            }
            _ => {}
        }
        if peak_idx == Some(i) {
            live.extend(live_map.iter().map(|(&a, &(s, st, _))| (a, s, st)));
        }
        while points.get(next_point).is_some_and(|p| p.index == Some(i)) {
            series.push((next_point, bands.clone()));
            next_point += 1;
        }
    }
    // never touched by the trace (or no trace): live all along
    for s in segs {
        for b in s.blocks.iter().filter(|b| b.state != BlockState::Inactive && !touched.contains_key(&b.address)) {
            live.push((b.address, b.size, b.stack));
        }
    }
    SiteReplay { series, live }
}

/// What was live at the peak, by group and by site.
struct LiveAtPeak {
    groups: Vec<Group>,
    /// live bytes at the peak per site label
    site_bytes: HashMap<u32, u64>,
    /// the largest live allocations
    peak_top: Vec<LiveAlloc>,
}

/// The sites drawn as their own band, as (site, most held at any point,
/// held at the peak), bottom band first; and the peak bytes of the rest.
fn top_sites(
    series: &[(usize, Bands)],
    max_of: &[i128],
    site_bytes: &HashMap<u32, u64>,
    labels: &Labels,
    n_sites: usize,
) -> (Vec<(u32, u64, u64)>, u64) {
    // the largest sites get their own band: by the most they held at
    // any point of the timeline (activations are gone by the optimizer's
    // peak, yet they are what the sawtooth is made of), then at the peak
    let mut ranked: Vec<(u32, u64, u64)> = (0..n_sites as u32)
        .map(|s| (s, clamp_bytes(max_of[s as usize + 1]), site_bytes.get(&s).copied().unwrap_or(0)))
        .filter(|&(_, max, now)| max > 0 || now > 0)
        .collect();
    ranked.sort_by(|a, b| {
        b.1.max(b.2)
            .cmp(&a.1.max(a.2))
            .then(b.2.cmp(&a.2))
            .then(labels.sites[a.0 as usize].cmp(&labels.sites[b.0 as usize]))
    });
    let rest: u64 = ranked.iter().skip(TOP_SITES).map(|r| r.2).sum();
    ranked.truncate(TOP_SITES);
    // stacked as memory_viz stacks older allocations under newer ones:
    // what is held most of the time (parameters, optimizer state) at the
    // bottom, the per-step sawtooth on top
    let mean = |band: usize| series.iter().map(|(_, v)| v[band].max(0)).sum::<i128>();
    ranked.sort_by(|a, b| mean(b.0 as usize + 1).cmp(&mean(a.0 as usize + 1)).then(a.0.cmp(&b.0)));
    (ranked, rest)
}

/// The bands of the timeline (before the trace, the top sites, the rest),
/// and each point's bytes per band in [`Point::by_site`].
fn site_bands(
    series: Vec<(usize, Bands)>,
    points: &mut [Point],
    site_bytes: &HashMap<u32, u64>,
    labels: &Labels,
    n_sites: usize,
    no_trace: bool,
    peak: Option<&Point>,
) -> Vec<Site> {
    let mut max_of = vec![0i128; n_sites + 2];
    for (_, v) in &series {
        for (m, x) in max_of.iter_mut().zip(v) {
            *m = (*m).max(*x);
        }
    }
    let (ranked, rest) = top_sites(&series, &max_of, site_bytes, labels, n_sites);
    let top: Vec<usize> = ranked.iter().map(|&(s, _, _)| s as usize + 1).collect();
    let other = |v: &[i128]| -> i128 {
        v.iter().enumerate().filter(|(b, _)| *b != 0 && !top.contains(b)).map(|(_, x)| *x).sum::<i128>()
    };
    let before_used = series.iter().any(|(_, v)| v[0] > 0);
    let other_max = series.iter().map(|(_, v)| other(v)).max().unwrap_or(0);
    let other_used = other_max > 0 || (no_trace && rest > 0);
    // each band's bytes at the peak, from the replay (without a trace: the blocks now)
    let at_peak = peak.and_then(|p| series.iter().find(|(k, _)| points[*k].index == p.index));
    let mut sites: Vec<Site> = Vec::new();
    if before_used {
        sites.push(Site {
            label: SITE_BEFORE_TRACE.into(),
            peak_bytes: at_peak.map(|(_, v)| clamp_bytes(v[0])).unwrap_or(0),
            max_bytes: clamp_bytes(max_of[0]),
        });
    }
    for (&(s, max, now), &band) in ranked.iter().zip(&top) {
        let peak_bytes = at_peak.map(|(_, v)| clamp_bytes(v[band])).unwrap_or(now);
        sites.push(Site { label: labels.sites[s as usize].clone(), peak_bytes, max_bytes: max.max(peak_bytes) });
    }
    if other_used {
        let peak_bytes = at_peak.map(|(_, v)| clamp_bytes(other(v))).unwrap_or(rest);
        sites.push(Site { label: SITE_OTHER.into(), peak_bytes, max_bytes: clamp_bytes(other_max).max(peak_bytes) });
    }
    for (k, v) in series {
        let mut by = Vec::with_capacity(sites.len());
        if before_used {
            by.push(clamp_bytes(v[0]));
        }
        by.extend(top.iter().map(|&b| clamp_bytes(v[b])));
        if other_used {
            by.push(clamp_bytes(other(&v)));
        }
        points[k].by_site = by;
    }
    sites
}
