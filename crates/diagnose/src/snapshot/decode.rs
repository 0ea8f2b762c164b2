//! Streaming decoder of `torch.cuda.memory._snapshot()` pickles: a
//! [`Sink`] for the opcode machine in [`crate::pickle`] that turns every
//! dict into its typed record as soon as it is complete, and keeps nothing
//! the analysis does not use.
//!
//! How it stays bounded on a 1 GB snapshot or a hostile one:
//! - **Records are typed when they complete.** A dict is complete when it
//!   leaves the stack, or when a memo reference to it appears first
//!   (CPython's pickler writes a container's items right after creating
//!   it, before anything can refer to it again). Its shape names it:
//!   `action` → trace entry, `state` → block, `total_size`/`blocks` →
//!   segment, `real_size` → legacy history item, `filename` → frame,
//!   `segments`/`device_traces` → the snapshot. Trace entries, blocks,
//!   segments and history items are moved straight into the list that
//!   receives them; other dicts (allocator settings, annotations, metadata)
//!   are dropped. A dict's items are never stored: each key is recognised
//!   as it arrives and only the fields the decoder knows are kept, so a
//!   dict of any size costs one fixed slot.
//! - **Shared objects stay shared.** Frame dicts (one per unique frame,
//!   combined_traceback.cpp `py_symbolize`) are stored once and referred to
//!   by id; frame lists are interned by content, so the million distinct
//!   traceback lists of a long trace collapse into the few thousand code
//!   paths they spell. A memo reference (`BINGET`) to a record that was
//!   already placed yields a marker, never a copy: PyTorch writes each
//!   segment, block and trace entry once (fresh dicts in Module.cpp), so a
//!   file that lists one twice is refused by name instead of expanded.
//! - **Strings** live in one arena, each recognised (key, action, state)
//!   once, when first used as one; no per-string allocation or hashing.
//! - **A memory budget** counts what is held (records, frames, strings,
//!   the memo, open containers) and stops the read with a clear error when
//!   it would pass the caller's limit.

use super::{Action, Block, BlockState, Frame, Segment, Snapshot, SnapshotError, Trace, TraceEntry};
use crate::pickle::{self, Atom, Coll, Limits, Sink, SinkError};
use std::collections::HashMap;
use std::io::Read;
use std::vec::Drain;

/// Longest string kept (frame file names and function names are far
/// shorter); longer ones are skipped unread.
const MAX_STR: usize = 64 << 10;
/// Stack entries: CPython batches 1000 items per APPENDS/SETITEMS and a
/// snapshot nests about 8 deep, so a real one stays under ~20k.
const MAX_STACK: usize = 1 << 16;

/// Keys and values the decoder recognises (added to the string arena first,
/// so that their ids are these indices; equal strings elsewhere in the file
/// are recognised by content).
const KNOWN: [&str; 36] = [
    // keys 0..=21
    "action",
    "addr",
    "size",
    "stream",
    "time_us",
    "device_free",
    "frames",
    "filename",
    "line",
    "name",
    "state",
    "requested_size",
    "address",
    "total_size",
    "blocks",
    "segment_type",
    "device",
    "is_expandable",
    "history",
    "real_size",
    "segments",
    "device_traces",
    // actions 22..=30
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "segment_map",
    "segment_unmap",
    "oom",
    "snapshot",
    // block states 31..=34 (Module.cpp writes active_pending_free; the
    // docstring and older releases say active_awaiting_free)
    "active_allocated",
    "active_awaiting_free",
    "active_pending_free",
    "inactive",
    // the empty string (missing names)
    "",
];
const N_KEYS: u32 = 22;
const K_ACTION: usize = 0;
const K_ADDR: usize = 1;
const K_SIZE: usize = 2;
const K_STREAM: usize = 3;
const K_TIME: usize = 4;
const K_DEVICE_FREE: usize = 5;
const K_FRAMES: usize = 6;
const K_FILENAME: usize = 7;
const K_LINE: usize = 8;
const K_NAME: usize = 9;
const K_STATE: usize = 10;
const K_REQUESTED: usize = 11;
const K_ADDRESS: usize = 12;
const K_TOTAL: usize = 13;
const K_BLOCKS: usize = 14;
const K_SEGTYPE: usize = 15;
const K_DEVICE: usize = 16;
const K_EXPANDABLE: usize = 17;
const K_HISTORY: usize = 18;
const K_REAL_SIZE: usize = 19;
const K_SEGMENTS: usize = 20;
const K_TRACES: usize = 21;
const S_EMPTY: u32 = 35;

/// Record kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Entry,
    Block,
    Segment,
    Hist,
}

/// A value on the stack or in the memo.
#[derive(Debug, Clone, Copy, PartialEq)]
enum V {
    None,
    Bool(bool),
    Int(i64),
    BigInt,
    Float(f64),
    /// interned string id
    Str(u32),
    LongStr,
    Bytes,
    /// a container still being filled (index into `open`)
    Open(u32),
    /// a frame (index into `frames`)
    Frame(u32),
    /// an interned frame list (index into the stack table)
    Stack(u32),
    /// a typed list (index into `lists`)
    List(u32),
    EmptyList,
    /// the snapshot dict (index into `roots`)
    Root(u32),
    /// a record already moved into a list (a second reference to it)
    Moved(Kind),
    /// something the decoder does not interpret
    Opaque(Opaque),
    /// a reference to a container while it was still being filled
    Cyclic,
}

fn describe(v: &V) -> &'static str {
    match v {
        V::None => "None",
        V::Bool(_) => "a bool",
        V::Int(_) | V::BigInt => "an integer",
        V::Float(_) => "a float",
        V::Str(_) | V::LongStr => "a string",
        V::Bytes => "bytes",
        V::Open(_) | V::Cyclic => "a container that contains itself",
        V::Frame(_) => "a frame dict",
        V::Stack(_) => "a list of frames",
        V::List(_) | V::EmptyList => "a list",
        V::Root(_) => "a snapshot dict",
        V::Moved(Kind::Segment) => "the same segment dict again (a memo reference)",
        V::Moved(Kind::Block) => "the same block dict again (a memo reference)",
        V::Moved(Kind::Entry) => "the same trace entry dict again (a memo reference)",
        V::Moved(Kind::Hist) => "the same history dict again (a memo reference)",
        V::Opaque(o) => OPAQUE[*o as usize],
    }
}

/// The snapshot field a list of these items is.
fn list_field(items: &Items) -> &'static str {
    match items {
        Items::Segments(_) => "segments",
        Items::Blocks(_) => "blocks",
        Items::Entries(..) | Items::Lists(_) => "device_traces",
        Items::Hists(_) => "history",
        Items::Frames(_) => "frames",
        _ => "",
    }
}

/// The snapshot field a list holding this (completed) value is.
fn value_field(v: &V) -> &'static str {
    match v {
        V::Opaque(Opaque::SegmentOutside) => "segments",
        V::Opaque(Opaque::BlockOutside) => "blocks",
        V::Opaque(Opaque::EntryOutside) => "device_traces",
        V::Opaque(Opaque::HistOutside) => "history",
        V::Frame(_) => "frames",
        _ => "",
    }
}

/// A field that could not be read, kept with the record and reported with
/// its path when the record is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bad {
    field: &'static str,
    expected: &'static str,
}

#[derive(Debug, Clone)]
struct BlockRec {
    address: Option<u64>,
    size: Option<u64>,
    requested_size: Option<u64>,
    state: Option<BlockState>,
    stack: Option<u32>,
    history: Option<V2>,
    bad: Option<Bad>,
}

#[derive(Debug, Clone)]
struct HistRec {
    real_size: Option<u64>,
    stack: Option<u32>,
    bad: Option<Bad>,
}

#[derive(Debug, Clone)]
struct SegRec {
    device: Option<u64>,
    address: Option<u64>,
    total_size: Option<u64>,
    stream: Option<u64>,
    segment_type: Option<u32>,
    is_expandable: bool,
    blocks: Option<V2>,
    bad: Option<Bad>,
}

/// A list reference as records keep it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct V2(V);

struct RootRec {
    segments: Option<V>,
    traces: Option<V>,
}

/// What a list holds.
#[derive(Debug)]
enum Items {
    Empty,
    Frames(Vec<u32>),
    Entries(Trace, Vec<(u32, Bad)>),
    Blocks(Vec<BlockRec>),
    Segments(Vec<SegRec>),
    Hists(Vec<HistRec>),
    /// lists of trace entries (device_traces); `u32::MAX` = an empty list
    Lists(Vec<u32>),
    /// an element that does not fit the kind of the first
    Bad {
        index: u64,
        found: &'static str,
        expected: &'static str,
    },
    /// starts with something that is no record: nothing kept
    Other,
    /// taken by the assembly
    Taken,
}

impl Items {
    fn expected(&self) -> &'static str {
        match self {
            Items::Frames(_) => "a frame dict",
            Items::Entries(..) => "a trace entry dict",
            Items::Blocks(_) => "a block dict",
            Items::Segments(_) => "a segment dict",
            Items::Hists(_) => "a history dict",
            Items::Lists(_) => "a list of trace entries",
            _ => "",
        }
    }
}

const NO_MEMO: u64 = u64::MAX;
const NO_FIELDS: u32 = u32::MAX;
/// A list whose first element is no record (nothing of it is kept).
const OTHER_LIST: &str = "a list of other values";

/// Whether an open container was already turned into its typed form.
enum Done {
    No,
    /// completed early (referenced before its parent took it): every
    /// reference gets this value
    Val(V),
    /// a record completed early: the first to take it places it, later
    /// references get `V::Moved`
    Rec(Option<Box<Item>>, Kind),
}

struct OpenC {
    dict: bool,
    done: Done,
    /// memo index that points at this container (CPython memoizes each
    /// container once, right after creating it); more in `memo_more`
    memo: u64,
    memo_more: Vec<u64>,
    /// for a dict: its slot in `Decoder::fields`, the values of the keys
    /// the decoder knows (the last binding wins, as in Python); other items
    /// are dropped as they arrive
    fields: u32,
    items: Items,
    len: u64,
}

/// What a completed container becomes before it is placed.
enum Item {
    V(V),
    Frame(u32, u32, i64),
    Entry(TraceEntry, Option<Bad>),
    // rare next to trace entries: boxed, so an Item stays small to move
    Block(Box<BlockRec>),
    Segment(Box<SegRec>),
    Hist(Box<HistRec>),
}

/// Memo entries of a completed container, to point at what it became once
/// it is placed.
struct Settle {
    open: u32,
    first: u64,
    more: Vec<u64>,
}

/// The memo, packed: CPython memoizes every container and string, so a
/// 1 GB snapshot has ~25 M entries; 4 bytes each (a 4-bit kind and a
/// 28-bit id). Numbers (which CPython never memoizes) and ids past 2^28
/// go to a side map.
#[derive(Default)]
struct PackedMemo {
    dense: Vec<u32>,
    sparse: HashMap<u64, V>,
    count: u64,
}

const UNSET: u32 = 0;
const KINDS: [Kind; 4] = [Kind::Entry, Kind::Block, Kind::Segment, Kind::Hist];
const PAYLOAD_BITS: u32 = 28;

#[inline]
fn pack(v: V) -> Option<u32> {
    let (tag, payload): (u32, u32) = match v {
        V::None => (1, 0),
        V::Bool(b) => (2, b as u32),
        V::Str(s) => (3, s),
        V::LongStr => (4, 0),
        V::Bytes => (5, 0),
        V::Open(i) => (6, i),
        V::Frame(i) => (7, i),
        V::Stack(i) => (8, i),
        V::List(i) => (9, i),
        V::EmptyList => (10, 0),
        V::Root(i) => (11, i),
        V::Moved(k) => (12, KINDS.iter().position(|&x| x == k).unwrap_or(0) as u32),
        V::Cyclic => (13, 0),
        V::BigInt => (14, 0),
        V::Opaque(o) => (15, o as u32),
        V::Int(_) | V::Float(_) => return None,
    };
    (payload < 1 << PAYLOAD_BITS).then_some((tag << PAYLOAD_BITS) | payload)
}

#[inline]
fn unpack(x: u32) -> Option<V> {
    let p = x & ((1 << PAYLOAD_BITS) - 1);
    Some(match x >> PAYLOAD_BITS {
        1 => V::None,
        2 => V::Bool(p != 0),
        3 => V::Str(p),
        4 => V::LongStr,
        5 => V::Bytes,
        6 => V::Open(p),
        7 => V::Frame(p),
        8 => V::Stack(p),
        9 => V::List(p),
        10 => V::EmptyList,
        11 => V::Root(p),
        12 => V::Moved(KINDS[p as usize & 3]),
        13 => V::Cyclic,
        14 => V::BigInt,
        15 => V::Opaque(*OPAQUES.get(p as usize)?),
        _ => return None,
    })
}

/// Values the decoder does not interpret, by what they are (the memo
/// stores the discriminant).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opaque {
    Dict,
    Tuple,
    Set,
    OtherList,
    EntryOutside,
    BlockOutside,
    SegmentOutside,
    HistOutside,
}

const OPAQUES: [Opaque; 8] = [
    Opaque::Dict,
    Opaque::Tuple,
    Opaque::Set,
    Opaque::OtherList,
    Opaque::EntryOutside,
    Opaque::BlockOutside,
    Opaque::SegmentOutside,
    Opaque::HistOutside,
];

/// What a [`V::Opaque`] is, in messages (by the discriminant).
const OPAQUE: [&str; 8] = [
    "a dict",
    "a tuple",
    "a set",
    OTHER_LIST,
    "a trace entry dict outside a trace list",
    "a block dict outside a block list",
    "a segment dict outside the segment list",
    "a history dict outside a history list",
];

impl PackedMemo {
    fn is_set(&self, idx: u64) -> bool {
        usize::try_from(idx).ok().and_then(|i| self.dense.get(i)).is_some_and(|&x| x != UNSET)
            || (!self.sparse.is_empty() && self.sparse.contains_key(&idx))
    }
    fn unsparse(&mut self, idx: u64) {
        if !self.sparse.is_empty() {
            self.sparse.remove(&idx);
        }
    }
    #[inline]
    fn put(&mut self, idx: u64, v: V) {
        // CPython's order: the next index, a packable value
        if idx == self.dense.len() as u64 && self.sparse.is_empty() {
            if let Some(p) = pack(v) {
                push(&mut self.dense, p);
                self.count += 1;
                return;
            }
        }
        if !self.is_set(idx) {
            self.count += 1;
        }
        let packed = pack(v);
        match usize::try_from(idx) {
            Ok(i) if i < self.dense.len() => match packed {
                Some(p) => {
                    self.dense[i] = p;
                    self.unsparse(idx);
                }
                None => {
                    self.dense[i] = UNSET;
                    self.sparse.insert(idx, v);
                }
            },
            Ok(i) if i == self.dense.len() => match packed {
                Some(p) => {
                    push(&mut self.dense, p);
                    self.unsparse(idx);
                }
                None => {
                    push(&mut self.dense, UNSET);
                    self.sparse.insert(idx, v);
                }
            },
            _ => {
                self.sparse.insert(idx, v);
            }
        }
    }
    #[inline(always)]
    fn get(&self, idx: u64) -> Option<V> {
        if let Some(&x) = usize::try_from(idx).ok().and_then(|i| self.dense.get(i)) {
            // what BINGET fetches nearly always: a frame or a key string
            let p = x & ((1 << PAYLOAD_BITS) - 1);
            match x >> PAYLOAD_BITS {
                7 => return Some(V::Frame(p)),
                3 => return Some(V::Str(p)),
                _ => {}
            }
            if x != UNSET {
                return unpack(x);
            }
        }
        if self.sparse.is_empty() {
            return None;
        }
        self.sparse.get(&idx).copied()
    }
    fn bytes(&self) -> u64 {
        self.dense.len() as u64 * 4 + self.sparse.len() as u64 * 48
    }
}

/// Every string the pickle holds, in one arena (no per-string allocation,
/// no hashing while reading): ids in read order; a string equal to the one
/// before it (PyTorch's "N/A" compile_context of every entry) reuses its id.
/// What a string means (a key, an action, a block state) is looked up once
/// per id, when it is first used as one.
#[derive(Default)]
struct Strings {
    arena: Vec<u8>,
    spans: Vec<(u32, u32)>,
    /// index into KNOWN, NOT_KNOWN, or UNCLASSIFIED
    class: Vec<u8>,
}

const UNCLASSIFIED: u8 = 0xff;
const NOT_KNOWN: u8 = 0xfe;

impl Strings {
    fn add(&mut self, b: &[u8]) -> u32 {
        if let Some(&(start, len)) = self.spans.last() {
            if &self.arena[start as usize..(start + len) as usize] == b {
                return (self.spans.len() - 1) as u32;
            }
        }
        // the arena stays under 4 GiB: snapshots are refused above that
        let start = u32::try_from(self.arena.len()).unwrap_or(u32::MAX);
        let len = u32::try_from(b.len()).unwrap_or(0);
        if start.checked_add(len).is_some() {
            push_slice(&mut self.arena, b);
        }
        push(&mut self.spans, (start, if start == u32::MAX { 0 } else { len }));
        push(&mut self.class, UNCLASSIFIED);
        (self.spans.len() - 1) as u32
    }
    fn get(&self, id: u32) -> &[u8] {
        match self.spans.get(id as usize) {
            Some(&(start, len)) => self.arena.get(start as usize..(start + len) as usize).unwrap_or(&[]),
            None => &[],
        }
    }
    fn text(&self, id: u32) -> String {
        String::from_utf8_lossy(self.get(id)).into_owned()
    }
    /// The KNOWN index of string `id`, if it is one.
    fn known(&mut self, id: u32) -> Option<u8> {
        let c = *self.class.get(id as usize)?;
        let c = if c == UNCLASSIFIED {
            let b = self.get(id);
            let c = KNOWN.iter().position(|k| k.as_bytes() == b).map(|i| i as u8).unwrap_or(NOT_KNOWN);
            self.class[id as usize] = c;
            c
        } else {
            c
        };
        (c != NOT_KNOWN).then_some(c)
    }
    fn bytes(&self) -> u64 {
        self.arena.len() as u64 + self.spans.len() as u64 * 9
    }
}

#[inline]
fn push_slice(v: &mut Vec<u8>, b: &[u8]) {
    if v.len() + b.len() > v.capacity() && v.len() >= 1 << 20 {
        v.reserve_exact(v.len() / 8 + b.len());
    }
    v.extend_from_slice(b);
}

/// Buckets of [`Decoder::stack_cache`].
const STACK_CACHE: usize = 1 << 12;

/// The decoder state.
struct Decoder {
    strings: Strings,
    /// unique frames: (filename, name, line)
    frames: Vec<(u32, u32, i64)>,
    frame_seen: Vec<bool>,
    /// interned frame lists: all frame ids, then (start, len) per stack
    stack_frames: Vec<u32>,
    stack_spans: Vec<(u32, u32)>,
    /// content hash → a stack with it; collisions chain through `stack_next`
    stack_index: HashMap<u64, u32>,
    /// the last stack seen per bucket of the content hash, checked before
    /// the index (a training loop repeats its code paths)
    stack_cache: Vec<u32>,
    stack_next: Vec<u32>,
    stack_seen: Vec<bool>,
    empty_stack: Option<u32>,
    shared_frame_refs: usize,
    shared_stack_refs: usize,
    open: Vec<OpenC>,
    free_open: Vec<u32>,
    /// emptied frame-id buffers of finished traceback lists, for reuse
    frame_bufs: Vec<Vec<u32>>,
    /// the known fields of each open dict (slots reused)
    fields: Vec<Fields>,
    free_fields: Vec<u32>,
    lists: Vec<Items>,
    roots: Vec<RootRec>,
    memo: PackedMemo,
    /// bytes held by records, list items and open containers
    held: u64,
    budget: u64,
    /// records kept so far (for the budget message)
    records: u64,
}

/// a packed trace entry (snapshot.rs `Packed`)
const ENTRY_BYTES: u64 = 32;
const BLOCK_BYTES: u64 = std::mem::size_of::<BlockRec>() as u64;
const SEG_BYTES: u64 = std::mem::size_of::<SegRec>() as u64;
const HIST_BYTES: u64 = std::mem::size_of::<HistRec>() as u64;
/// The known fields of a dict: values, and which of them are set (so a
/// reused slot is cleared by zeroing the mask, not 22 values).
#[derive(Clone, Copy)]
struct Fields {
    set: u32,
    v: [V; N_KEYS as usize],
}

impl Fields {
    const EMPTY: Fields = Fields { set: 0, v: [V::None; N_KEYS as usize] };
    #[inline]
    fn get(&self, k: usize) -> Option<V> {
        (self.set & (1 << k) != 0).then(|| self.v[k])
    }
}

fn uint(v: Option<V>) -> Result<Option<u64>, &'static str> {
    match v {
        None | Some(V::None) => Ok(None),
        Some(V::Int(i)) => u64::try_from(i).map(Some).map_err(|_| "a non-negative integer"),
        Some(V::Bool(b)) => Ok(Some(b as u64)),
        Some(_) => Err("an integer below 2^63"),
    }
}

fn int(v: Option<V>) -> Option<i64> {
    match v {
        Some(V::Int(i)) => Some(i),
        Some(V::Float(f)) if f.is_finite() => Some(f as i64),
        _ => None,
    }
}

/// The value, keeping the first bad field of a record.
fn note(bad: &mut Option<Bad>, field: &'static str, r: Result<Option<u64>, &'static str>) -> Option<u64> {
    match r {
        Ok(v) => v,
        Err(expected) => {
            bad.get_or_insert(Bad { field, expected });
            None
        }
    }
}

/// FNV-1a over the frame ids of a list (the index is a std HashMap, whose
/// SipHash keeps hostile collisions out; this only picks the bucket key).
/// Push, growing a large vector by an eighth instead of doubling it: the
/// trace-entry and memo vectors of a 1 GB snapshot are hundreds of MB, and
/// doubling would reserve (and, on a copying realloc, briefly hold) as
/// much again.
#[inline]
fn push<T>(v: &mut Vec<T>, x: T) {
    if v.len() == v.capacity() && v.len() >= 1 << 16 {
        v.reserve_exact(v.len() / 8);
    }
    v.push(x);
}

fn stack_hash(ids: &[u32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &x in ids {
        h ^= x as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^ ids.len() as u64
}

impl Decoder {
    fn new(budget: u64) -> Self {
        let mut d = Decoder {
            strings: Strings::default(),
            frames: Vec::new(),
            frame_seen: Vec::new(),
            stack_frames: Vec::new(),
            stack_spans: Vec::new(),
            stack_index: HashMap::new(),
            stack_cache: Vec::new(),
            stack_next: Vec::new(),
            stack_seen: Vec::new(),
            empty_stack: None,
            shared_frame_refs: 0,
            shared_stack_refs: 0,
            open: Vec::new(),
            free_open: Vec::new(),
            frame_bufs: Vec::new(),
            fields: Vec::new(),
            free_fields: Vec::new(),
            lists: Vec::new(),
            roots: Vec::new(),
            memo: PackedMemo::default(),
            held: 0,
            budget,
            records: 0,
        };
        for (i, k) in KNOWN.iter().enumerate() {
            let id = d.strings.add(k.as_bytes());
            d.strings.class[id as usize] = i as u8;
        }
        d
    }

    /// Bytes the decoder holds (an estimate by element sizes).
    fn used_bytes(&self) -> u64 {
        self.held
            + self.strings.bytes()
            + self.memo.bytes()
            + self.frames.len() as u64 * 17
            + self.stack_frames.len() as u64 * 4
            + self.stack_spans.len() as u64 * 30
            + self.lists.len() as u64 * std::mem::size_of::<Items>() as u64
            + self.open.len() as u64 * std::mem::size_of::<OpenC>() as u64
            + self.fields.len() as u64 * std::mem::size_of::<Fields>() as u64
    }

    fn new_open(&mut self, dict: bool) -> u32 {
        let fields = if dict {
            match self.free_fields.pop() {
                Some(f) => {
                    self.fields[f as usize].set = 0;
                    f
                }
                None => {
                    self.fields.push(Fields::EMPTY);
                    (self.fields.len() - 1) as u32
                }
            }
        } else {
            NO_FIELDS
        };
        let i = self.new_open_slot(dict);
        self.open[i as usize].fields = fields;
        i
    }

    fn new_open_slot(&mut self, dict: bool) -> u32 {
        match self.free_open.pop() {
            Some(i) => {
                let c = &mut self.open[i as usize];
                c.dict = dict;
                c.done = Done::No;
                c.memo = NO_MEMO;
                c.memo_more.clear();
                c.fields = NO_FIELDS;
                c.items = Items::Empty;
                c.len = 0;
                i
            }
            None => {
                self.open.push(OpenC {
                    dict,
                    done: Done::No,
                    memo: NO_MEMO,
                    memo_more: Vec::new(),
                    fields: NO_FIELDS,
                    items: Items::Empty,
                    len: 0,
                });
                (self.open.len() - 1) as u32
            }
        }
    }

    /// A value leaves the stack into its parent (or is dropped). An open
    /// container is complete by then: CPython's pickler writes all of a
    /// container's items right after creating it.
    fn consume(&mut self, v: V) -> (Item, Option<Settle>) {
        let V::Open(i) = v else { return (Item::V(v), None) };
        match std::mem::replace(&mut self.open[i as usize].done, Done::No) {
            Done::Val(v) => {
                self.free_open.push(i);
                (Item::V(v), None)
            }
            Done::Rec(Some(item), _) => {
                self.free_open.push(i);
                (*item, None)
            }
            Done::Rec(None, kind) => {
                self.free_open.push(i);
                (Item::V(V::Moved(kind)), None)
            }
            Done::No => {
                let (item, settle) = self.complete(i);
                self.free_open.push(i);
                (item, Some(settle))
            }
        }
    }

    /// A second reference (BINGET, DUP) to a container that is still on the
    /// stack, pending in its parent's batch (the segment's shared empty
    /// frame list, referenced by its blocks before the segment's SETITEMS):
    /// its items are all written by then (CPython writes them right after
    /// creating it; only a cycle refers to a container while it is being
    /// filled, and items that arrive after this are refused as a cycle:
    /// [`Self::cycle_in_list`]), so it is completed now and this reference
    /// gets what it became.
    #[cold]
    #[inline(never)]
    fn complete_early(&mut self, i: u32) -> V {
        match &self.open[i as usize].done {
            Done::Val(v) => return *v,
            Done::Rec(_, kind) => return V::Moved(*kind),
            Done::No => {}
        }
        let (item, settle) = self.complete(i);
        let (done, v) = match item {
            Item::V(v) => (Done::Val(v), v),
            Item::Frame(f, n, l) => {
                let v = self.add_frame(f, n, l);
                (Done::Val(v), v)
            }
            rec => {
                let kind = match rec {
                    Item::Entry(..) => Kind::Entry,
                    Item::Block(_) => Kind::Block,
                    Item::Segment(_) => Kind::Segment,
                    _ => Kind::Hist,
                };
                (Done::Rec(Some(Box::new(rec)), kind), V::Moved(kind))
            }
        };
        self.settle(Some(settle), v);
        self.open[i as usize].done = done;
        v
    }

    /// The typed form of open container `i` (its slot is not freed).
    fn complete(&mut self, i: u32) -> (Item, Settle) {
        let c = &mut self.open[i as usize];
        let settle = Settle { open: i, first: c.memo, more: std::mem::take(&mut c.memo_more) };
        c.memo = NO_MEMO;
        let item = if c.dict {
            let slot = c.fields;
            if slot != NO_FIELDS {
                self.free_fields.push(slot);
                self.open[i as usize].fields = NO_FIELDS;
            }
            // read in place (`record` does not touch the slots): a copy is
            // 22 values per dict
            let fields = std::mem::take(&mut self.fields);
            let item = self.record(fields.get(slot as usize).unwrap_or(&Fields::EMPTY));
            self.fields = fields;
            item
        } else {
            let items = std::mem::replace(&mut c.items, Items::Empty);
            Item::V(self.finish_list(items))
        };
        (item, settle)
    }

    /// Point the memo entries of a completed container at what it became.
    fn settle(&mut self, s: Option<Settle>, to: V) {
        let Some(s) = s else { return };
        let from = V::Open(s.open);
        // the common case: one dense entry, re-pointed in place
        if let (Some(pf), Some(pt)) = (pack(from), pack(to)) {
            if let Some(x) = usize::try_from(s.first).ok().and_then(|i| self.memo.dense.get_mut(i)) {
                if *x == pf && s.more.is_empty() {
                    *x = pt;
                    return;
                }
            }
        }
        for idx in std::iter::once(s.first).chain(s.more.iter().copied()) {
            if idx != NO_MEMO && self.memo.get(idx) == Some(from) {
                self.memo.put(idx, to);
            }
        }
        let mut more = s.more;
        more.clear();
        if let Some(c) = self.open.get_mut(s.open as usize) {
            if c.memo_more.capacity() == 0 {
                c.memo_more = more;
            }
        }
    }

    /// A completed container as a plain value (a dict value, a tuple item,
    /// the root): frames go to the frame table, records out of place are
    /// not interpreted.
    fn item_value(&mut self, item: Item) -> V {
        match item {
            Item::V(v) => v,
            Item::Frame(f, n, l) => self.add_frame(f, n, l),
            Item::Entry(..) => V::Opaque(Opaque::EntryOutside),
            Item::Block(_) => V::Opaque(Opaque::BlockOutside),
            Item::Segment(_) => V::Opaque(Opaque::SegmentOutside),
            Item::Hist(_) => V::Opaque(Opaque::HistOutside),
        }
    }

    fn add_frame(&mut self, filename: u32, name: u32, line: i64) -> V {
        self.frames.push((filename, name, line));
        self.frame_seen.push(false);
        V::Frame((self.frames.len() - 1) as u32)
    }

    fn consume_value(&mut self, v: V) -> V {
        if !matches!(v, V::Open(_)) {
            return v;
        }
        let (item, s) = self.consume(v);
        let v = self.item_value(item);
        self.settle(s, v);
        v
    }

    /// Add a value to open list `i`.
    #[inline(always)]
    fn push_item(&mut self, i: u32, v: &V) {
        // the common case: a frame reference into a traceback list
        let c = &mut self.open[i as usize];
        if let (V::Frame(f), Items::Frames(ids)) = (v, &mut c.items) {
            push(ids, *f);
            c.len += 1;
            self.held += 4;
            return;
        }
        self.push_other(i, *v);
    }

    /// [`Self::push_item`] of anything but a frame into a frame list.
    fn push_other(&mut self, i: u32, v: V) {
        let (item, s) = self.consume(v);
        let c = &mut self.open[i as usize];
        let index = c.len;
        c.len += 1;
        // the first element decides what the list holds
        if matches!(c.items, Items::Empty) {
            c.items = match &item {
                Item::Frame(..) | Item::V(V::Frame(_)) => Items::Frames(self.frame_bufs.pop().unwrap_or_default()),
                Item::Entry(..) => Items::Entries(Trace::default(), Vec::new()),
                Item::Block(_) => Items::Blocks(Vec::new()),
                Item::Segment(_) => Items::Segments(Vec::new()),
                Item::Hist(_) => Items::Hists(Vec::new()),
                Item::V(V::List(_) | V::EmptyList) => Items::Lists(Vec::new()),
                Item::V(_) => Items::Other,
            };
        }
        // what a later memo reference to this element gets
        let mut to = match &item {
            Item::V(x) => *x,
            _ => V::Cyclic,
        };
        let mut added = 0u64;
        let mut new_frame = None;
        let mismatch = match (&mut c.items, item) {
            (Items::Frames(ids), Item::V(V::Frame(f))) => {
                ids.push(f);
                added = 4;
                None
            }
            (Items::Frames(_), Item::Frame(f, n, l)) => {
                new_frame = Some((f, n, l));
                None
            }
            (Items::Entries(es, bads), Item::Entry(e, bad)) => {
                if let Some(b) = bad {
                    bads.push((es.len() as u32, b));
                }
                es.push(e);
                added = ENTRY_BYTES;
                to = V::Moved(Kind::Entry);
                None
            }
            (Items::Blocks(bs), Item::Block(b)) => {
                push(bs, *b);
                added = BLOCK_BYTES;
                to = V::Moved(Kind::Block);
                None
            }
            (Items::Segments(ss), Item::Segment(sg)) => {
                push(ss, *sg);
                added = SEG_BYTES;
                to = V::Moved(Kind::Segment);
                None
            }
            (Items::Hists(hs), Item::Hist(h)) => {
                push(hs, *h);
                added = HIST_BYTES;
                to = V::Moved(Kind::Hist);
                None
            }
            (Items::Lists(ls), Item::V(V::List(l))) => {
                push(ls, l);
                added = 4;
                None
            }
            (Items::Lists(ls), Item::V(V::EmptyList)) => {
                push(ls, u32::MAX);
                added = 4;
                None
            }
            // nothing kept; a record here is not interpreted
            (Items::Other | Items::Bad { .. }, other) => Some(("", other)),
            (items, other) => Some((items.expected(), other)),
        };
        if added > 0 {
            self.held += added;
            self.records += 1;
        }
        if let Some(("", other)) = mismatch {
            if !matches!(other, Item::V(_)) {
                to = self.item_value(other);
            }
        } else if let Some((expected, other)) = mismatch {
            // the list is not what its first element said: remember where
            let found = match &other {
                Item::V(x) => describe(x),
                Item::Frame(..) => "a frame dict",
                Item::Entry(..) => "a trace entry dict",
                Item::Block(_) => "a block dict",
                Item::Segment(_) => "a segment dict",
                Item::Hist(_) => "a history dict",
            };
            let old = std::mem::replace(&mut self.open[i as usize].items, Items::Bad { index, found, expected });
            self.held = self.held.saturating_sub(items_bytes(&old));
            to = self.item_value(other);
        }
        if let Some((f, n, l)) = new_frame {
            to = self.add_frame(f, n, l);
            if let (Items::Frames(ids), V::Frame(id)) = (&mut self.open[i as usize].items, to) {
                ids.push(id);
                self.held += 4;
            }
        }
        self.settle(s, to);
    }

    /// A completed list as a value.
    fn finish_list(&mut self, items: Items) -> V {
        match items {
            Items::Empty => V::EmptyList,
            Items::Frames(mut ids) => {
                self.held = self.held.saturating_sub(ids.len() as u64 * 4);
                let sid = self.intern_stack(&ids);
                // the buffer serves the next traceback list (one per trace
                // entry: no allocation and regrowth for each)
                if self.frame_bufs.len() < 16 && ids.capacity() <= 1 << 12 {
                    ids.clear();
                    self.frame_bufs.push(ids);
                }
                V::Stack(sid)
            }
            Items::Other => V::Opaque(Opaque::OtherList),
            other => {
                self.lists.push(other);
                V::List((self.lists.len() - 1) as u32)
            }
        }
    }

    /// The id of a frame list with these frames (stored once per content).
    fn intern_stack(&mut self, ids: &[u32]) -> u32 {
        let h = stack_hash(ids);
        let slot = ((h ^ (h >> 29)) as usize) & (STACK_CACHE - 1);
        let sid = match self.stack_cache.get(slot) {
            Some(&sid) if self.stack_is(sid, ids) => Some(sid),
            _ => self.find_stack(h, ids),
        };
        if let Some(sid) = sid {
            // every frame of a list seen before was seen (and counted) then
            self.shared_frame_refs += ids.len();
            if let Some(c) = self.stack_cache.get_mut(slot) {
                *c = sid;
            }
            return sid;
        }
        // frame re-use, counted per list object as PyTorch shares them
        for &f in ids {
            if let Some(seen) = self.frame_seen.get_mut(f as usize) {
                if *seen {
                    self.shared_frame_refs += 1;
                } else {
                    *seen = true;
                }
            }
        }
        let sid = self.stack_spans.len() as u32;
        let start = self.stack_frames.len() as u32;
        self.stack_frames.extend_from_slice(ids);
        self.stack_spans.push((start, ids.len() as u32));
        self.stack_seen.push(false);
        let prev = self.stack_index.insert(h, sid).unwrap_or(u32::MAX);
        self.stack_next.push(prev);
        if self.stack_cache.is_empty() {
            self.stack_cache = vec![u32::MAX; STACK_CACHE];
        }
        self.stack_cache[slot] = sid;
        sid
    }

    /// Whether stack `sid` holds exactly these frames.
    #[inline]
    fn stack_is(&self, sid: u32, ids: &[u32]) -> bool {
        match self.stack_spans.get(sid as usize) {
            Some(&(start, len)) => &self.stack_frames[start as usize..(start + len) as usize] == ids,
            None => false,
        }
    }

    /// The stack with these frames through the hash index.
    fn find_stack(&self, h: u64, ids: &[u32]) -> Option<u32> {
        let mut cur = self.stack_index.get(&h).copied();
        while let Some(sid) = cur {
            if self.stack_is(sid, ids) {
                return Some(sid);
            }
            cur = Some(self.stack_next[sid as usize]).filter(|&n| n != u32::MAX);
        }
        None
    }

    /// A record's frames field as a stack id (counting shared references).
    fn stack_of(&mut self, v: Option<V>, bad: &mut Option<Bad>) -> Option<u32> {
        let sid = match v {
            None | Some(V::None) => return None,
            Some(V::Stack(s)) => s,
            Some(V::EmptyList) => match self.empty_stack {
                Some(s) => s,
                None => {
                    let s = self.intern_stack(&[]);
                    self.empty_stack = Some(s);
                    s
                }
            },
            Some(_) => {
                bad.get_or_insert(Bad { field: "frames", expected: "a list of frames" });
                return None;
            }
        };
        if let Some(seen) = self.stack_seen.get_mut(sid as usize) {
            if *seen {
                self.shared_stack_refs += 1;
            } else {
                *seen = true;
            }
        }
        Some(sid)
    }

    /// A completed dict: its record, by the keys it has.
    fn record(&mut self, f: &Fields) -> Item {
        let has = |k: usize| f.set & (1 << k) != 0;
        if has(K_SEGMENTS) || has(K_TRACES) {
            self.roots.push(RootRec { segments: f.get(K_SEGMENTS), traces: f.get(K_TRACES) });
            return Item::V(V::Root((self.roots.len() - 1) as u32));
        }
        if has(K_ACTION) {
            let mut bad = None;
            let action = match f.get(K_ACTION) {
                Some(V::Str(s)) => match self.strings.known(s) {
                    Some(22) => Action::Alloc,
                    Some(23) => Action::FreeRequested,
                    Some(24) => Action::FreeCompleted,
                    Some(25) => Action::SegmentAlloc,
                    Some(26) => Action::SegmentFree,
                    Some(27) => Action::SegmentMap,
                    Some(28) => Action::SegmentUnmap,
                    Some(29) => Action::Oom,
                    Some(30) => Action::Snapshot,
                    _ => Action::Other(s),
                },
                _ => {
                    bad = Some(Bad { field: "action", expected: "a string" });
                    Action::Other(S_EMPTY)
                }
            };
            let stack = self.stack_of(f.get(K_FRAMES), &mut bad);
            let e = TraceEntry {
                action,
                addr: note(&mut bad, "addr", uint(f.get(K_ADDR))),
                size: note(&mut bad, "size", uint(f.get(K_SIZE))).unwrap_or(0),
                stream: note(&mut bad, "stream", uint(f.get(K_STREAM))).unwrap_or(0),
                time_us: int(f.get(K_TIME)),
                device_free: note(&mut bad, "device_free", uint(f.get(K_DEVICE_FREE))),
                stack,
            };
            return Item::Entry(e, bad);
        }
        if has(K_TOTAL) || has(K_BLOCKS) {
            let mut bad = None;
            let blocks = match f.get(K_BLOCKS) {
                None => None,
                Some(v @ (V::List(_) | V::EmptyList)) => Some(V2(v)),
                Some(_) => {
                    bad = Some(Bad { field: "blocks", expected: "a list" });
                    None
                }
            };
            let s = SegRec {
                device: note(&mut bad, "device", uint(f.get(K_DEVICE))),
                address: note(&mut bad, "address", uint(f.get(K_ADDRESS))),
                total_size: note(&mut bad, "total_size", uint(f.get(K_TOTAL))),
                stream: note(&mut bad, "stream", uint(f.get(K_STREAM))),
                segment_type: match f.get(K_SEGTYPE) {
                    Some(V::Str(s)) => Some(s),
                    _ => None,
                },
                is_expandable: matches!(f.get(K_EXPANDABLE), Some(V::Bool(true))),
                blocks,
                bad,
            };
            return Item::Segment(Box::new(s));
        }
        if has(K_STATE) {
            let mut bad = None;
            let state = match f.get(K_STATE) {
                Some(V::Str(s)) => match self.strings.known(s) {
                    Some(31) => Some(BlockState::ActiveAllocated),
                    Some(32 | 33) => Some(BlockState::ActiveAwaitingFree),
                    Some(34) => Some(BlockState::Inactive),
                    _ => None,
                },
                _ => None,
            };
            let stack = self.stack_of(f.get(K_FRAMES), &mut bad);
            let history = match f.get(K_HISTORY) {
                Some(v @ (V::List(_) | V::EmptyList)) => Some(V2(v)),
                _ => None,
            };
            let b = BlockRec {
                address: note(&mut bad, "address", uint(f.get(K_ADDRESS))),
                size: note(&mut bad, "size", uint(f.get(K_SIZE))),
                requested_size: note(&mut bad, "requested_size", uint(f.get(K_REQUESTED))),
                state,
                stack,
                history,
                bad,
            };
            return Item::Block(Box::new(b));
        }
        if has(K_REAL_SIZE) {
            let mut bad = None;
            let stack = self.stack_of(f.get(K_FRAMES), &mut bad);
            let real_size = note(&mut bad, "real_size", uint(f.get(K_REAL_SIZE)));
            return Item::Hist(Box::new(HistRec { real_size, stack, bad }));
        }
        if has(K_FILENAME) || (has(K_NAME) && has(K_LINE)) {
            let s = |v: Option<V>| match v {
                Some(V::Str(s)) => s,
                _ => S_EMPTY,
            };
            return Item::Frame(s(f.get(K_FILENAME)), s(f.get(K_NAME)), int(f.get(K_LINE)).unwrap_or(0));
        }
        Item::V(V::Opaque(Opaque::Dict))
    }
}

fn items_bytes(it: &Items) -> u64 {
    match it {
        Items::Frames(v) => v.len() as u64 * 4,
        Items::Entries(v, _) => v.len() as u64 * ENTRY_BYTES,
        Items::Blocks(v) => v.len() as u64 * BLOCK_BYTES,
        Items::Segments(v) => v.len() as u64 * SEG_BYTES,
        Items::Hists(v) => v.len() as u64 * HIST_BYTES,
        Items::Lists(v) => v.len() as u64 * 4,
        _ => 0,
    }
}

#[cold]
fn memo_unset(idx: u64) -> SinkError {
    SinkError::Malformed(format!("memo entry {idx} used before it was set"))
}

fn sink_malformed(what: &str) -> SinkError {
    SinkError::Malformed(what.to_string())
}

impl Sink for Decoder {
    type V = V;
    #[inline]
    fn atom(&mut self, a: Atom<'_>) -> Result<V, SinkError> {
        Ok(match a {
            Atom::None => V::None,
            Atom::Bool(b) => V::Bool(b),
            Atom::Int(i) => V::Int(i),
            Atom::BigInt { .. } => V::BigInt,
            Atom::Float(f) => V::Float(f),
            Atom::Str(b) => V::Str(self.strings.add(b)),
            Atom::LongStr(_) => V::LongStr,
            Atom::Bytes(_) | Atom::LongBytes(_) => V::Bytes,
        })
    }
    #[inline]
    fn atom_push(&mut self, a: Atom<'_>, stack: &mut Vec<V>) -> Result<(), SinkError> {
        // each arm writes its value in place (see `memo_push`)
        match a {
            Atom::Int(i) => stack.push(V::Int(i)),
            Atom::Str(b) => {
                let id = self.strings.add(b);
                stack.push(V::Str(id));
            }
            other => {
                let v = self.atom(other)?;
                stack.push(v);
            }
        }
        Ok(())
    }
    fn empty(&mut self, kind: Coll) -> Result<V, SinkError> {
        Ok(V::Open(self.new_open(kind == Coll::Dict)))
    }
    #[inline]
    fn empty_push(&mut self, kind: Coll, stack: &mut Vec<V>) -> Result<(), SinkError> {
        let i = self.new_open(kind == Coll::Dict);
        stack.push(V::Open(i));
        Ok(())
    }
    fn build(&mut self, kind: Coll, items: Drain<'_, V>) -> Result<V, SinkError> {
        match kind {
            Coll::List | Coll::Dict => {
                let i = self.new_open(kind == Coll::Dict);
                let items: Vec<V> = items.collect();
                if kind == Coll::Dict {
                    self.fill_dict(V::Open(i), &items)?;
                } else {
                    for v in items {
                        self.push_item(i, &v);
                    }
                }
                Ok(V::Open(i))
            }
            Coll::Tuple | Coll::Set | Coll::FrozenSet => {
                for v in items {
                    self.consume_value(v);
                }
                Ok(V::Opaque(if kind == Coll::Tuple { Opaque::Tuple } else { Opaque::Set }))
            }
        }
    }
    fn extend(&mut self, target: V, items: Drain<'_, V>) -> Result<(), SinkError> {
        let V::Open(i) = target else {
            for v in items {
                self.consume_value(v);
            }
            return match target {
                V::Opaque(_) | V::Cyclic => Ok(()),
                _ => {
                    Err(sink_malformed("APPEND to a list that was already stored (or to something that is not a list)"))
                }
            };
        };
        if self.open[i as usize].dict {
            return Err(sink_malformed("APPEND target is a dict"));
        }
        if !matches!(self.open[i as usize].done, Done::No) {
            // items after a reference to the list inside itself: a cycle
            return Err(self.cycle_in_list(i, items.as_slice()));
        }
        // by reference from the stack: a frame id is read alone, not the
        // whole value (written in parts moments ago: store forwarding)
        for v in items.as_slice() {
            self.push_item(i, v);
        }
        Ok(())
    }
    fn set_items(&mut self, target: V, items: Drain<'_, V>) -> Result<(), SinkError> {
        self.fill_dict(target, items.as_slice())
    }
    fn discard(&mut self, v: V) {
        self.consume_value(v);
    }
    fn dup(&mut self, v: &V) -> V {
        match v {
            V::Open(i) => self.complete_early(*i),
            other => *other,
        }
    }
    #[inline]
    fn memo_put(&mut self, idx: u64, v: &V) -> Result<(), SinkError> {
        if let V::Open(i) = v {
            let c = &mut self.open[*i as usize];
            if c.memo == NO_MEMO {
                c.memo = idx;
            } else if c.memo != idx && c.memo_more.len() < 64 {
                c.memo_more.push(idx);
            }
        }
        self.memo.put(idx, *v);
        Ok(())
    }
    #[inline]
    fn memo_get(&mut self, idx: u64) -> Result<V, SinkError> {
        match self.memo.get(idx) {
            Some(V::Open(i)) => Ok(self.complete_early(i)),
            Some(v) => Ok(v),
            None => Err(memo_unset(idx)),
        }
    }
    #[inline]
    fn memo_push(&mut self, idx: u64, stack: &mut Vec<V>) -> Result<(), SinkError> {
        // straight onto the stack: a value built in parts and read back
        // whole stalls store forwarding
        match self.memo.get(idx) {
            Some(V::Open(i)) => {
                let v = self.complete_early(i);
                stack.push(v);
            }
            Some(v) => stack.push(v),
            None => return Err(memo_unset(idx)),
        }
        Ok(())
    }
    fn memo_len(&self) -> u64 {
        self.memo.count
    }
    fn check(&mut self, consumed: u64) -> Result<(), SinkError> {
        let used = self.used_bytes();
        if used > self.budget {
            return Err(SinkError::Limit(format!(
                "holding it would take more than {} MiB ({} records and {} frames after {} MiB of the file; the limit is the file's size plus a margin, see docs/diagnose.md)",
                self.budget >> 20,
                self.records,
                self.frames.len(),
                consumed >> 20
            )));
        }
        Ok(())
    }
}

impl Decoder {
    fn fill_dict(&mut self, target: V, items: &[V]) -> Result<(), SinkError> {
        let V::Open(i) = target else {
            for &v in items {
                self.consume_value(v);
            }
            return match target {
                V::Opaque(_) | V::Cyclic => Ok(()),
                _ => Err(sink_malformed(
                    "SETITEM on a dict that was already stored (or on something that is not a dict)",
                )),
            };
        };
        if !self.open[i as usize].dict {
            return Err(sink_malformed("SETITEM target is a list"));
        }
        if !matches!(self.open[i as usize].done, Done::No) {
            // items after a reference to the dict inside itself: a cycle
            return Err(self.cycle_in_dict(i, items));
        }
        // read in place from the stack (a value yielded by the iterator is
        // re-assembled from its parts, which stalls store forwarding)
        let pairs = items.chunks_exact(2);
        let odd = !pairs.remainder().is_empty();
        for kv in pairs {
            let (k, v) = (kv[0], &kv[1]);
            // a container as key (never a known string once completed) or
            // value is completed first, the key before the value
            let key = match k {
                V::Str(s) => self.strings.known(s).filter(|&c| (c as u32) < N_KEYS),
                V::Open(_) => {
                    self.consume_value(k);
                    None
                }
                _ => None,
            };
            let c = &mut self.open[i as usize];
            c.len += 1;
            let slot = c.fields;
            // each branch stores its own value (merging them first builds
            // the value in parts again)
            match (key, v) {
                (_, V::Open(_)) => {
                    let v = self.consume_value(*v);
                    self.set_field(slot, key, v);
                }
                (Some(_), v) => self.set_field(slot, key, *v),
                (None, _) => {}
            }
        }
        if odd {
            return Err(sink_malformed("odd number of items for SETITEMS"));
        }
        Ok(())
    }

    /// A list that receives items after a reference to it was read inside
    /// it (`segs.append(segs)`): a reference cycle. CPython's pickler
    /// writes a container's items right after creating it, so only a cycle
    /// refers to a container while it is being filled; reading past it
    /// would drop every item listed with or after the reference (issue 25
    /// §3: a 1 GiB segment vanished from the report). PyTorch's snapshots
    /// hold no cycles (fresh dicts and lists in Module.cpp), so the file is
    /// refused, naming the list by what it holds.
    #[cold]
    fn cycle_in_list(&mut self, i: u32, items: &[V]) -> SinkError {
        let held = match &self.open[i as usize].done {
            Done::Val(V::List(l)) => self.lists.get(*l as usize).map(list_field).unwrap_or(""),
            _ => "",
        };
        let mut field = held;
        for &v in items {
            let v = self.consume_value(v);
            if field.is_empty() {
                field = value_field(&v);
            }
        }
        let name = if field.is_empty() { "a list".to_string() } else { format!("the `{field}` list") };
        SinkError::Malformed(format!(
            "{name} contains itself (a reference cycle); torch.cuda.memory._dump_snapshot never writes one, and reading past it would drop the {} item(s) listed with the reference, so the file is refused",
            items.len()
        ))
    }

    /// [`Self::cycle_in_list`] for a dict: named by the key whose value is
    /// the dict itself (`d["segments"] = d`).
    #[cold]
    fn cycle_in_dict(&mut self, i: u32, items: &[V]) -> SinkError {
        let itself = match &self.open[i as usize].done {
            Done::Val(v) => Some(*v),
            _ => None,
        };
        let mut key = None;
        for kv in items.chunks(2) {
            if let (Some(V::Str(s)), Some(v)) = (kv.first(), kv.get(1)) {
                if key.is_none() && Some(*v) == itself {
                    key = self.strings.known(*s).filter(|&c| (c as u32) < N_KEYS).map(|c| KNOWN[c as usize]);
                }
            }
            for &v in kv {
                self.consume_value(v);
            }
        }
        let name = match key {
            Some(k) => format!("`{k}` is the dict that holds it"),
            None => "a dict contains itself".to_string(),
        };
        SinkError::Malformed(format!(
            "{name} (a reference cycle); torch.cuda.memory._dump_snapshot never writes one, and reading past it would drop the {} item(s) listed with the reference, so the file is refused",
            items.len() / 2
        ))
    }

    /// Field `key` (a KNOWN index below N_KEYS) of the dict whose fields
    /// are in `slot`.
    #[inline(always)]
    fn set_field(&mut self, slot: u32, key: Option<u8>, v: V) {
        if let (Some(key), Some(f)) = (key, self.fields.get_mut(slot as usize)) {
            f.v[key as usize] = v;
            f.set |= 1 << key;
        }
    }

    /// Decode a whole snapshot from `src`.
    fn run<R: Read>(src: R, budget: u64) -> Result<Snapshot, SnapshotError> {
        let mut d = Decoder::new(budget);
        let root = pickle::run(src, &mut d, Limits { max_atom: MAX_STR, max_stack: MAX_STACK })?;
        let root = d.consume_value(root);
        d.memo = PackedMemo::default();
        d.open = Vec::new();
        d.assemble(root)
    }
}

// ------------------------------------------------------------- assembly

fn field(path: impl Into<String>, expected: &'static str) -> SnapshotError {
    SnapshotError::Field { path: path.into(), expected }
}

impl Decoder {
    fn take_list(&mut self, v: V, path: &str, want: &'static str) -> Result<Items, SnapshotError> {
        match v {
            V::EmptyList => Ok(Items::Empty),
            V::List(l) => {
                let it = std::mem::replace(&mut self.lists[l as usize], Items::Taken);
                match it {
                    Items::Taken => Err(SnapshotError::Shared(format!(
                        "{path} is the same list object as an earlier one (a memo reference); PyTorch writes each list once"
                    ))),
                    Items::Bad { index, found, expected } => {
                        if found.contains("(a memo reference)") {
                            Err(SnapshotError::Shared(format!(
                                "{path}[{index}] is {found}; PyTorch writes each record once, so this file was not written by torch.cuda.memory._dump_snapshot (refused rather than counted twice)"
                            )))
                        } else {
                            Err(field(format!("{path}[{index}]"), expected))
                        }
                    }
                    other => Ok(other),
                }
            }
            V::Opaque(Opaque::OtherList) => Err(field(format!("{path}[0]"), want)),
            _ => Err(field(path, "a list")),
        }
    }

    fn assemble(mut self, root: V) -> Result<Snapshot, SnapshotError> {
        let (segs_v, traces_v) = match root {
            V::Root(r) => {
                let rr = &self.roots[r as usize];
                let Some(s) = rr.segments else {
                    return Err(SnapshotError::NotASnapshot("no \"segments\" key".into()));
                };
                (s, rr.traces)
            }
            // torch.cuda.memory_snapshot() returns the segment list alone
            V::List(_) | V::EmptyList | V::Opaque(Opaque::OtherList) => (root, None),
            V::Opaque(Opaque::Dict) => return Err(SnapshotError::NotASnapshot("no \"segments\" key".into())),
            _ => return Err(SnapshotError::NotASnapshot("the top level is neither a dict nor a list".into())),
        };
        let segs = match self.take_list(segs_v, "segments", "a dict")? {
            Items::Empty => Vec::new(),
            Items::Segments(s) => s,
            _ => return Err(field("segments[0]", "a dict")),
        };
        let mut segments = Vec::with_capacity(segs.len());
        for (si, s) in segs.into_iter().enumerate() {
            segments.push(self.segment(&format!("segments[{si}]"), s)?);
        }
        let (traces, other_actions) = match traces_v {
            Some(tv) => self.traces(tv)?,
            None => (Vec::new(), Vec::new()),
        };
        let frames = self
            .frames
            .iter()
            .map(|&(f, n, line)| Frame { filename: self.strings.text(f), line, name: self.strings.text(n) })
            .collect();
        let stacks =
            self.stack_spans.iter().map(|&(s, l)| self.stack_frames[s as usize..(s + l) as usize].to_vec()).collect();
        Ok(Snapshot {
            frames,
            stacks,
            segments,
            traces,
            other_actions,
            shared_frame_refs: self.shared_frame_refs,
            shared_stack_refs: self.shared_stack_refs,
        })
    }

    /// Segment `path`: its blocks in address order (a block without an
    /// address follows the previous one).
    fn segment(&mut self, path: &str, s: SegRec) -> Result<Segment, SnapshotError> {
        if let Some(b) = s.bad {
            return Err(field(format!("{path}.{}", b.field), b.expected));
        }
        let total_size = s.total_size.ok_or_else(|| field(format!("{path}.total_size"), "an integer"))?;
        let recs = match s.blocks {
            None => Vec::new(),
            Some(V2(v)) => match self.take_list(v, &format!("{path}.blocks"), "a dict")? {
                Items::Empty => Vec::new(),
                Items::Blocks(b) => b,
                _ => return Err(field(format!("{path}.blocks[0]"), "a dict")),
            },
        };
        let mut addr = s.address.unwrap_or(0);
        let mut blocks = Vec::with_capacity(recs.len());
        for (bi, b) in recs.into_iter().enumerate() {
            let block = self.block(&format!("{path}.blocks[{bi}]"), b, addr)?;
            addr = block.address.saturating_add(block.size);
            blocks.push(block);
        }
        Ok(Segment {
            device: s.device.unwrap_or(0),
            address: s.address.unwrap_or(0),
            total_size,
            stream: s.stream.unwrap_or(0),
            segment_type: match s.segment_type {
                Some(id) => self.strings.text(id),
                None => "large".to_string(),
            },
            is_expandable: s.is_expandable,
            blocks,
        })
    }

    /// Block `bpath`; `addr` is where it lies when it names no address.
    fn block(&mut self, bpath: &str, b: BlockRec, addr: u64) -> Result<Block, SnapshotError> {
        if let Some(bad) = b.bad {
            return Err(field(format!("{bpath}.{}", bad.field), bad.expected));
        }
        let size = b.size.ok_or_else(|| field(format!("{bpath}.size"), "an integer"))?;
        let state = b
            .state
            .ok_or_else(|| field(format!("{bpath}.state"), "active_allocated, active_pending_free or inactive"))?;
        // legacy (< 2.1): history[0].real_size and frames
        let first_hist = match b.history {
            Some(V2(v)) => match self.take_list(v, &format!("{bpath}.history"), "a dict")? {
                Items::Hists(h) => h.into_iter().next(),
                _ => None,
            },
            None => None,
        };
        if let Some(h) = first_hist.as_ref().and_then(|h| h.bad) {
            return Err(field(format!("{bpath}.history[0].{}", h.field), h.expected));
        }
        let requested_size = match (b.requested_size, &first_hist) {
            (Some(r), _) => r,
            (None, Some(h)) => h.real_size.unwrap_or(size),
            (None, None) => size,
        };
        let stack = b.stack.or_else(|| first_hist.as_ref().and_then(|h| h.stack));
        let address = b.address.unwrap_or(addr);
        Ok(Block { address, size, requested_size, state, stack })
    }

    /// `device_traces`: one trace per device; unknown actions get ids into
    /// the returned names.
    fn traces(&mut self, tv: V) -> Result<(Vec<Trace>, Vec<String>), SnapshotError> {
        let mut traces = Vec::new();
        let mut other_actions: Vec<String> = Vec::new();
        let mut other_ids: HashMap<u32, u32> = HashMap::new();
        let lists = match self.take_list(tv, "device_traces", "a list")? {
            Items::Empty => Vec::new(),
            Items::Lists(l) => l,
            _ => return Err(field("device_traces[0]", "a list")),
        };
        for (di, l) in lists.into_iter().enumerate() {
            let path = format!("device_traces[{di}]");
            let mut es = if l == u32::MAX {
                Trace::default()
            } else {
                match self.take_list(V::List(l), &path, "a dict")? {
                    Items::Empty => Trace::default(),
                    Items::Entries(es, bads) => {
                        if let Some((ti, b)) = bads.first() {
                            return Err(field(format!("{path}[{ti}].{}", b.field), b.expected));
                        }
                        es
                    }
                    _ => return Err(field(format!("{path}[0]"), "a dict")),
                }
            };
            // unknown actions: from string ids to names
            for (_, x) in es.extras.iter_mut() {
                if let Some(sid) = x.other_action {
                    let next = other_ids.len() as u32;
                    let id = *other_ids.entry(sid).or_insert_with(|| {
                        other_actions.push(self.strings.text(sid).chars().take(64).collect());
                        next
                    });
                    x.other_action = Some(id);
                }
            }
            es.shrink_to_fit();
            traces.push(es);
        }
        Ok((traces, other_actions))
    }
}

/// Decode a snapshot pickle from `src`, holding at most `budget` bytes of
/// decoded data.
pub fn decode<R: Read>(src: R, budget: u64) -> Result<Snapshot, SnapshotError> {
    Decoder::run(src, budget)
}
