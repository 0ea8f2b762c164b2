//! PyTorch memory snapshots (`torch.cuda.memory._dump_snapshot`), read
//! with the restricted unpickler in [`crate::pickle`] (no code runs), and
//! what they show: the timeline of allocated/reserved bytes, the peak and
//! what was live there with its Python frames, reserved vs allocated per
//! segment, and allocations grouped by what their frames say.
//!
//! Schema: `_snapshot()` docstring (torch/cuda/memory.py) as summarised in
//! /work/shared/reference/pytorch-formats.md (c). Frames are listed
//! innermost first, as `_memory_viz` prints them.

use crate::pickle::{self, Pickle, PickleError, Value};
use serde::Serialize;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SnapshotError {
    #[error(transparent)]
    Pickle(#[from] PickleError),
    #[error("not a PyTorch memory snapshot: {0}")]
    NotASnapshot(String),
    #[error("snapshot field {path}: expected {expected}")]
    Field { path: String, expected: &'static str },
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
    ActiveAwaitingFree,
    Inactive,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Block {
    pub address: u64,
    pub size: u64,
    pub requested_size: u64,
    pub state: BlockState,
    /// index into [`Snapshot::stacks`]
    pub stack: Option<usize>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Segment {
    pub device: u64,
    pub address: u64,
    pub total_size: u64,
    pub stream: u64,
    pub segment_type: String,
    pub is_expandable: bool,
    pub blocks: Vec<Block>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
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
    Other(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TraceEntry {
    pub action: Action,
    pub addr: Option<u64>,
    pub size: u64,
    pub stream: u64,
    pub time_us: Option<i64>,
    pub device_free: Option<u64>,
    pub stack: Option<usize>,
}

/// The snapshot, with frames and frame lists interned as PyTorch shared them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Snapshot {
    pub frames: Vec<Frame>,
    /// frame lists (indices into `frames`), innermost first
    pub stacks: Vec<Vec<usize>>,
    pub segments: Vec<Segment>,
    /// one list per device
    pub traces: Vec<Vec<TraceEntry>>,
    /// frame references that reused an already-seen frame object
    pub shared_frame_refs: usize,
    /// frame-list references that reused an already-seen list
    pub shared_stack_refs: usize,
}

struct Conv<'a> {
    p: &'a Pickle,
    frames: Vec<Frame>,
    frame_ids: HashMap<usize, usize>,
    stacks: Vec<Vec<usize>>,
    stack_ids: HashMap<usize, usize>,
    shared_frame_refs: usize,
    shared_stack_refs: usize,
}

fn field_err(path: &str, expected: &'static str) -> SnapshotError {
    SnapshotError::Field { path: path.to_string(), expected }
}

impl Conv<'_> {
    fn uint(&self, d: &Value, key: &str, path: &str) -> Result<Option<u64>, SnapshotError> {
        match self.p.get(d, key) {
            None | Some(Value::None) => Ok(None),
            Some(Value::Int(i)) => {
                u64::try_from(*i).map(Some).map_err(|_| field_err(&format!("{path}.{key}"), "a non-negative integer"))
            }
            Some(Value::Bool(b)) => Ok(Some(*b as u64)),
            Some(_) => Err(field_err(&format!("{path}.{key}"), "an integer below 2^63")),
        }
    }
    fn int(&self, d: &Value, key: &str) -> Option<i64> {
        match self.p.get(d, key) {
            Some(Value::Int(i)) => Some(*i),
            Some(Value::Float(f)) if f.is_finite() => Some(*f as i64),
            _ => None,
        }
    }
    fn string(&self, d: &Value, key: &str) -> Option<String> {
        match self.p.get(d, key) {
            Some(Value::Str(s)) => Some(s.to_string()),
            _ => None,
        }
    }
    fn stack(&mut self, frames: Option<&Value>, path: &str) -> Result<Option<usize>, SnapshotError> {
        let Some(v) = frames else { return Ok(None) };
        let Value::List(list_id) = v else {
            return match v {
                Value::None => Ok(None),
                _ => Err(field_err(path, "a list of frames")),
            };
        };
        if let Some(&id) = self.stack_ids.get(list_id) {
            self.shared_stack_refs += 1;
            return Ok(Some(id));
        }
        let items = self.p.items(v).ok_or_else(|| field_err(path, "a list of frames"))?;
        let mut ids = Vec::with_capacity(items.len());
        for (i, f) in items.iter().enumerate() {
            let Value::Dict(fid) = f else { return Err(field_err(&format!("{path}[{i}]"), "a frame dict")) };
            if let Some(&id) = self.frame_ids.get(fid) {
                self.shared_frame_refs += 1;
                ids.push(id);
                continue;
            }
            let frame = Frame {
                filename: self.string(f, "filename").unwrap_or_default(),
                line: self.int(f, "line").unwrap_or(0),
                name: self.string(f, "name").unwrap_or_default(),
            };
            self.frames.push(frame);
            let id = self.frames.len() - 1;
            self.frame_ids.insert(*fid, id);
            ids.push(id);
        }
        self.stacks.push(ids);
        let id = self.stacks.len() - 1;
        self.stack_ids.insert(*list_id, id);
        Ok(Some(id))
    }
}

/// Parse snapshot bytes (a pickle) into a [`Snapshot`]. Never runs code.
pub fn load(bytes: &[u8]) -> Result<Snapshot, SnapshotError> {
    let p = pickle::parse(bytes)?;
    from_pickle(&p)
}

/// Build the typed snapshot from parsed pickle data.
pub fn from_pickle(p: &Pickle) -> Result<Snapshot, SnapshotError> {
    let root = &p.root;
    let (segments_v, traces_v) = match p.node(root) {
        Some(pickle::Node::Dict(_)) => (p.get(root, "segments"), p.get(root, "device_traces")),
        // torch.cuda.memory_snapshot() returns the segment list alone
        Some(pickle::Node::List(_)) => (Some(root), None),
        _ => return Err(SnapshotError::NotASnapshot("the top level is neither a dict nor a list".into())),
    };
    let Some(segments_v) = segments_v else {
        return Err(SnapshotError::NotASnapshot("no \"segments\" key".into()));
    };
    let mut c = Conv {
        p,
        frames: Vec::new(),
        frame_ids: HashMap::new(),
        stacks: Vec::new(),
        stack_ids: HashMap::new(),
        shared_frame_refs: 0,
        shared_stack_refs: 0,
    };
    let seg_items = p.items(segments_v).ok_or_else(|| field_err("segments", "a list"))?;
    let mut segments = Vec::with_capacity(seg_items.len());
    for (si, s) in seg_items.iter().enumerate() {
        let path = format!("segments[{si}]");
        if p.entries(s).is_none() {
            return Err(field_err(&path, "a dict"));
        }
        let total_size =
            c.uint(s, "total_size", &path)?.ok_or_else(|| field_err(&format!("{path}.total_size"), "an integer"))?;
        let mut blocks = Vec::new();
        if let Some(bv) = p.get(s, "blocks") {
            let items = p.items(bv).ok_or_else(|| field_err(&format!("{path}.blocks"), "a list"))?;
            let mut addr = c.uint(s, "address", &path)?.unwrap_or(0);
            for (bi, bl) in items.iter().enumerate() {
                let bpath = format!("{path}.blocks[{bi}]");
                if p.entries(bl).is_none() {
                    return Err(field_err(&bpath, "a dict"));
                }
                let size =
                    c.uint(bl, "size", &bpath)?.ok_or_else(|| field_err(&format!("{bpath}.size"), "an integer"))?;
                let state = match c.string(bl, "state").as_deref() {
                    Some("active_allocated") => BlockState::ActiveAllocated,
                    Some("active_awaiting_free") => BlockState::ActiveAwaitingFree,
                    Some("inactive") => BlockState::Inactive,
                    _ => {
                        return Err(field_err(
                            &format!("{bpath}.state"),
                            "active_allocated, active_awaiting_free or inactive",
                        ))
                    }
                };
                // legacy (< 2.1): history[0].real_size and frames
                let history = p.get(bl, "history").and_then(|h| p.items(h)).and_then(|h| h.first());
                let requested_size = match (c.uint(bl, "requested_size", &bpath)?, history) {
                    (Some(r), _) => r,
                    (None, Some(h)) => c.uint(h, "real_size", &bpath)?.unwrap_or(size),
                    (None, None) => size,
                };
                let frames_v = p.get(bl, "frames").or_else(|| history.and_then(|h| p.get(h, "frames")));
                let stack = c.stack(frames_v, &format!("{bpath}.frames"))?;
                let address = c.uint(bl, "address", &bpath)?.unwrap_or(addr);
                addr = address.saturating_add(size);
                blocks.push(Block { address, size, requested_size, state, stack });
            }
        }
        segments.push(Segment {
            device: c.uint(s, "device", &path)?.unwrap_or(0),
            address: c.uint(s, "address", &path)?.unwrap_or(0),
            total_size,
            stream: c.uint(s, "stream", &path)?.unwrap_or(0),
            segment_type: c.string(s, "segment_type").unwrap_or_else(|| "large".into()),
            is_expandable: matches!(p.get(s, "is_expandable"), Some(Value::Bool(true))),
            blocks,
        });
    }
    let mut traces = Vec::new();
    if let Some(tv) = traces_v {
        let devs = p.items(tv).ok_or_else(|| field_err("device_traces", "a list"))?;
        for (di, d) in devs.iter().enumerate() {
            let items = p.items(d).ok_or_else(|| field_err(&format!("device_traces[{di}]"), "a list"))?;
            let mut out = Vec::with_capacity(items.len());
            for (ti, t) in items.iter().enumerate() {
                let path = format!("device_traces[{di}][{ti}]");
                if p.entries(t).is_none() {
                    return Err(field_err(&path, "a dict"));
                }
                let action = match c.string(t, "action").as_deref() {
                    Some("alloc") => Action::Alloc,
                    Some("free_requested") => Action::FreeRequested,
                    Some("free_completed") => Action::FreeCompleted,
                    Some("segment_alloc") => Action::SegmentAlloc,
                    Some("segment_free") => Action::SegmentFree,
                    Some("segment_map") => Action::SegmentMap,
                    Some("segment_unmap") => Action::SegmentUnmap,
                    Some("oom") => Action::Oom,
                    Some("snapshot") => Action::Snapshot,
                    Some(other) => Action::Other(other.chars().take(64).collect()),
                    None => return Err(field_err(&format!("{path}.action"), "a string")),
                };
                let stack = c.stack(p.get(t, "frames"), &format!("{path}.frames"))?;
                out.push(TraceEntry {
                    action,
                    addr: c.uint(t, "addr", &path)?,
                    size: c.uint(t, "size", &path)?.unwrap_or(0),
                    stream: c.uint(t, "stream", &path)?.unwrap_or(0),
                    time_us: c.int(t, "time_us"),
                    device_free: c.uint(t, "device_free", &path)?,
                    stack,
                });
            }
            traces.push(out);
        }
    }
    Ok(Snapshot {
        frames: c.frames,
        stacks: c.stacks,
        segments,
        traces,
        shared_frame_refs: c.shared_frame_refs,
        shared_stack_refs: c.shared_stack_refs,
    })
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
    let f = path.rsplit(['/', '\\']).next().unwrap_or(path);
    f.strip_suffix(".py").unwrap_or(f)
}

fn in_torch(f: &Frame) -> bool {
    let p = f.filename.replace('\\', "/");
    p.contains("torch/") || p.starts_with("??") || p.is_empty()
}

/// What a frame list says the allocation was for.
pub fn group_label(frames: &[&Frame]) -> String {
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
    if let Some(fw) = frames.iter().find(|x| x.name == "forward" && !in_torch(x)) {
        return format!("forward of {}", stem(&fw.filename));
    }
    if let Some(fw) = frames.iter().find(|x| x.name == "forward") {
        return format!("forward of {}", stem(&fw.filename));
    }
    match frames.iter().find(|x| !in_torch(x)).or(frames.first()) {
        Some(x) => format!("{}:{}", stem(&x.filename), x.name),
        None => "no frames recorded".to_string(),
    }
}

impl Snapshot {
    fn stack_frames(&self, s: Option<usize>) -> Vec<&Frame> {
        s.and_then(|i| self.stacks.get(i))
            .map(|ids| ids.iter().filter_map(|&i| self.frames.get(i)).collect())
            .unwrap_or_default()
    }
    fn label(&self, s: Option<usize>) -> String {
        group_label(&self.stack_frames(s))
    }
    fn frame_lines(&self, s: Option<usize>) -> Vec<String> {
        self.stack_frames(s).iter().take(6).map(|f| format!("{}:{}:{}", f.filename, f.line, f.name)).collect()
    }

    /// Everything the report shows, per device.
    pub fn analyze(&self) -> SnapshotReport {
        let mut devices: Vec<u64> = self.segments.iter().map(|s| s.device).collect();
        devices.extend(
            (0..self.traces.len() as u64).filter(|&d| self.traces.get(d as usize).is_some_and(|t| !t.is_empty())),
        );
        devices.sort_unstable();
        devices.dedup();
        SnapshotReport {
            frames: self.frames.len(),
            stacks: self.stacks.len(),
            shared_frame_refs: self.shared_frame_refs,
            shared_stack_refs: self.shared_stack_refs,
            devices: devices.into_iter().map(|d| self.analyze_device(d)).collect(),
        }
    }

    fn analyze_device(&self, device: u64) -> DeviceReport {
        let segs: Vec<&Segment> = self.segments.iter().filter(|s| s.device == device).collect();
        let mut notes = Vec::new();
        let (mut reserved, mut allocated, mut requested, mut awaiting, mut cached_free, mut largest_free) =
            (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
        let mut seg_use = Vec::new();
        for s in &segs {
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

        let empty = Vec::new();
        let trace = self.traces.get(device as usize).unwrap_or(&empty);
        // net change over the trace, to place the baseline
        let (mut d_alloc, mut d_res) = (0i128, 0i128);
        for t in trace {
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
        let clamp = |v: i128| v.clamp(0, u64::MAX as i128) as u64;
        let mut points = vec![Point {
            index: None,
            time_us: trace.first().and_then(|t| t.time_us),
            allocated: clamp(base_alloc),
            reserved: clamp(base_res),
        }];
        let (mut cur_a, mut cur_r) = (base_alloc, base_res);
        let mut peak_i: Option<usize> = None;
        let mut peak_v = cur_a;
        let mut ooms = Vec::new();
        for (i, t) in trace.iter().enumerate() {
            match t.action {
                Action::Alloc => cur_a += t.size as i128,
                Action::FreeCompleted => cur_a -= t.size as i128,
                Action::SegmentAlloc | Action::SegmentMap => cur_r += t.size as i128,
                Action::SegmentFree | Action::SegmentUnmap => cur_r -= t.size as i128,
                Action::Oom => {
                    let (a, r) = (clamp(cur_a), clamp(cur_r));
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
            }
            points.push(Point { index: Some(i), time_us: t.time_us, allocated: clamp(cur_a), reserved: clamp(cur_r) });
        }
        let peak = if trace.is_empty() { None } else { points.get(peak_i.map(|i| i + 1).unwrap_or(0)).cloned() };

        // live allocations at the peak
        let mut live: Vec<LiveAlloc> = Vec::new();
        if trace.is_empty() {
            for s in &segs {
                for b in s.blocks.iter().filter(|b| b.state != BlockState::Inactive) {
                    live.push(LiveAlloc {
                        address: Some(b.address),
                        size: b.size,
                        group: self.label(b.stack),
                        frames: self.frame_lines(b.stack),
                    });
                }
            }
        } else {
            let upto = peak_i.map(|i| i + 1).unwrap_or(0);
            let mut map: HashMap<u64, (u64, Option<usize>)> = HashMap::new();
            for t in &trace[..upto] {
                match (&t.action, t.addr) {
                    (Action::Alloc, Some(a)) => {
                        map.insert(a, (t.size, t.stack));
                    }
                    (Action::FreeCompleted, Some(a)) => {
                        map.remove(&a);
                    }
                    _ => {}
                }
            }
            let touched: std::collections::HashSet<u64> = trace.iter().filter_map(|t| t.addr).collect();
            for (a, (size, st)) in &map {
                live.push(LiveAlloc {
                    address: Some(*a),
                    size: *size,
                    group: self.label(*st),
                    frames: self.frame_lines(*st),
                });
            }
            // allocated before the trace began and freed after the peak
            let mut seen_after = std::collections::HashSet::new();
            for t in &trace[upto..] {
                match (&t.action, t.addr) {
                    (Action::Alloc, Some(a)) => {
                        seen_after.insert(a);
                    }
                    (Action::FreeCompleted, Some(a)) => {
                        if !seen_after.contains(&a) && !map.contains_key(&a) {
                            live.push(LiveAlloc {
                                address: Some(a),
                                size: t.size,
                                group: self.label(t.stack),
                                frames: self.frame_lines(t.stack),
                            });
                        }
                        seen_after.insert(a);
                    }
                    _ => {}
                }
            }
            // never touched by the trace: live all along
            for s in &segs {
                for b in s.blocks.iter().filter(|b| b.state != BlockState::Inactive && !touched.contains(&b.address)) {
                    live.push(LiveAlloc {
                        address: Some(b.address),
                        size: b.size,
                        group: self.label(b.stack),
                        frames: self.frame_lines(b.stack),
                    });
                }
            }
        }
        let live_sum = live.iter().fold(0u64, |a, l| a.saturating_add(l.size));
        if let Some(p) = &peak {
            if (live_sum as f64) < LIVE_ACCOUNTED_SHARE * p.allocated as f64 {
                notes.push(format!(
                    "the live allocations found at the peak add up to {} of its {}: the rest was allocated before the recorded trace began (history ring buffer) and never freed or touched in it",
                    crate::classify::b(live_sum),
                    crate::classify::b(p.allocated)
                ));
            }
        }
        let mut groups: HashMap<String, (u64, u64)> = HashMap::new();
        for l in &live {
            let g = groups.entry(l.group.clone()).or_insert((0, 0));
            g.0 = g.0.saturating_add(l.size);
            g.1 += 1;
        }
        let mut groups: Vec<Group> =
            groups.into_iter().map(|(label, (bytes, count))| Group { label, bytes, count }).collect();
        groups.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.label.cmp(&b.label)));
        live.sort_by(|a, b| b.size.cmp(&a.size).then(a.address.cmp(&b.address)));
        live.truncate(10);

        // downsample the timeline, keeping the peak and every OOM
        let timeline = if points.len() <= MAX_POINTS {
            points
        } else {
            let step = points.len().div_ceil(MAX_POINTS);
            let keep: std::collections::HashSet<usize> =
                ooms.iter().map(|o| o.index + 1).chain(peak_i.map(|i| i + 1)).collect();
            let last = points.len() - 1;
            points
                .into_iter()
                .enumerate()
                .filter(|(i, _)| i % step == 0 || keep.contains(i) || *i == last)
                .map(|(_, p)| p)
                .collect()
        };

        DeviceReport {
            device,
            reserved,
            allocated,
            requested,
            awaiting_free: awaiting,
            cached_free,
            largest_free_block: largest_free,
            segments: segs.len(),
            most_fragmented,
            trace_entries: trace.len(),
            timeline,
            peak,
            peak_top: live,
            groups,
            ooms,
            notes,
        }
    }
}
