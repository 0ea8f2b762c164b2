//! A restricted, streaming unpickler: it knows only the plain-data opcodes
//! of protocols 2–5 (None, bool, int, float, str, bytes, list, dict, tuple,
//! set) and refuses every opcode that could import or call anything
//! (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT*,
//! PERSID/BINPERSID, out-of-band buffers). Nothing is ever executed: the
//! refusal happens while reading the opcode, before any name is resolved.
//!
//! The opcode machine ([`run`]) reads from any [`Read`] through a 1 MiB
//! buffer (a snapshot is never held whole) and hands every value to a
//! [`Sink`], which decides how values are represented. Two sinks exist:
//! the generic tree of this module ([`parse`]: every container in an arena,
//! memo references pointing at the same slot) and the snapshot decoder
//! (`snapshot::decode`), which turns each record into its typed form as
//! soon as it is complete and keeps nothing it does not use.
//!
//! Bounds, whatever the input: the stack (values and marks) holds at most
//! [`Limits::max_stack`] entries (deep nesting and APPEND floods stop
//! there; CPython's pickler batches 1000 items, so real pickles stay far
//! below); a string or bytes value larger than [`Limits::max_atom`] is
//! skipped, not copied; an integer of any length is read in constant
//! memory (only its sign is kept beyond 64 bits); memo indices never size an
//! allocation. Each sink adds its own memory budget.
//!
//! Opcode list and semantics: CPython `Lib/pickletools.py` / `Lib/pickle.py`
//! (protocols 2–5, the ones `pickle.dump` writes by default since 3.0).

use std::collections::HashMap;
use std::io::Read;
use std::rc::Rc;
use std::vec::Drain;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickleError {
    #[error(
        "pickle opcode {name} (0x{op:02x}) at byte {offset} would import or call Python code; refused, nothing was run"
    )]
    Forbidden { op: u8, name: &'static str, offset: u64 },
    #[error("unsupported pickle opcode 0x{op:02x} at byte {offset} (only protocol 2–5 plain data is read)")]
    Unsupported { op: u8, offset: u64 },
    #[error("pickle ends early at byte {offset} (expected {what})")]
    Truncated { offset: u64, what: &'static str },
    #[error("malformed pickle at byte {offset}: {what}")]
    Malformed { offset: u64, what: String },
    #[error("pickle refused at byte {offset}: {what}")]
    Limit { offset: u64, what: String },
    #[error("cannot read the pickle at byte {offset}: {what}")]
    Io { offset: u64, what: String },
}

/// What a sink reports; the machine adds the byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkError {
    Malformed(String),
    Limit(String),
}

/// Bounds of the opcode machine.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// values plus marks on the stack
    pub max_stack: usize,
    /// longest string or bytes value copied out (longer ones are skipped)
    pub max_atom: usize,
}

impl Default for Limits {
    fn default() -> Self {
        // 1M stack entries × 16–24 B is at most ~24 MiB; CPython batches
        // APPENDS/SETITEMS by 1000 (pickle.py `_BATCHSIZE`), so a real
        // pickle's stack is a few thousand deep
        Limits { max_stack: 1 << 20, max_atom: 16 << 20 }
    }
}

/// A scalar read from the pickle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Atom<'a> {
    None,
    Bool(bool),
    Int(i64),
    /// an integer beyond 64 bits (only its sign is kept)
    BigInt {
        negative: bool,
    },
    Float(f64),
    /// UTF-8 as written (CPython's `surrogatepass` can make it invalid)
    Str(&'a [u8]),
    /// a string longer than [`Limits::max_atom`], skipped
    LongStr(u64),
    Bytes(&'a [u8]),
    /// bytes longer than [`Limits::max_atom`], skipped
    LongBytes(u64),
}

/// Container kinds the machine builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coll {
    List,
    Dict,
    Tuple,
    Set,
    FrozenSet,
}

/// Where the machine's values go. Every value the sink returns is either
/// consumed by exactly one later call (`build`, `extend`, `set_items`,
/// `discard`, or returned as the root) or left on the stack when the
/// pickle ends; targets of `extend`/`set_items` and `dup`/`memo_put`
/// arguments are borrowed copies that stay on the stack.
pub trait Sink {
    type V: Clone;
    fn atom(&mut self, a: Atom<'_>) -> Result<Self::V, SinkError>;
    /// `atom` pushed onto the stack (a sink may write the value in place:
    /// a value built in parts and read back whole stalls store forwarding)
    #[inline]
    fn atom_push(&mut self, a: Atom<'_>, stack: &mut Vec<Self::V>) -> Result<(), SinkError> {
        let v = self.atom(a)?;
        stack.push(v);
        Ok(())
    }
    /// EMPTY_LIST, EMPTY_DICT, EMPTY_SET
    fn empty(&mut self, kind: Coll) -> Result<Self::V, SinkError>;
    /// `empty` pushed onto the stack
    #[inline]
    fn empty_push(&mut self, kind: Coll, stack: &mut Vec<Self::V>) -> Result<(), SinkError> {
        let v = self.empty(kind)?;
        stack.push(v);
        Ok(())
    }
    /// LIST, DICT, TUPLE, TUPLE1–3, EMPTY_TUPLE, FROZENSET from stack items
    fn build(&mut self, kind: Coll, items: Drain<'_, Self::V>) -> Result<Self::V, SinkError>;
    /// APPEND, APPENDS, ADDITEMS
    fn extend(&mut self, target: Self::V, items: Drain<'_, Self::V>) -> Result<(), SinkError>;
    /// SETITEM, SETITEMS (key, value, key, value, …)
    fn set_items(&mut self, target: Self::V, items: Drain<'_, Self::V>) -> Result<(), SinkError>;
    /// POP, POP_MARK, and values left when the pickle stops
    fn discard(&mut self, v: Self::V);
    /// DUP
    fn dup(&mut self, v: &Self::V) -> Self::V;
    fn memo_put(&mut self, idx: u64, v: &Self::V) -> Result<(), SinkError>;
    fn memo_get(&mut self, idx: u64) -> Result<Self::V, SinkError>;
    /// BINGET, LONG_BINGET: `memo_get` pushed onto the stack (a sink may
    /// write the value in place)
    #[inline]
    fn memo_push(&mut self, idx: u64, stack: &mut Vec<Self::V>) -> Result<(), SinkError> {
        let v = self.memo_get(idx)?;
        stack.push(v);
        Ok(())
    }
    /// entries in the memo (the index MEMOIZE uses)
    fn memo_len(&self) -> u64;
    /// called every 64 Ki opcodes with the bytes read so far: the sink's
    /// memory budget
    fn check(&mut self, _consumed: u64) -> Result<(), SinkError> {
        Ok(())
    }
}

// ------------------------------------------------------------------ input

/// The read buffer grows from `BUF_START` to `BUF` while reads fill it
/// (a small pickle does not pay for zeroing 1 MiB).
const BUF: usize = 1 << 20;
const BUF_START: usize = 8 << 10;

/// Buffered input that never holds more than one buffer (plus one copied
/// value of at most `max_atom` bytes).
struct Src<R> {
    r: R,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// offset of `buf[0]` in the stream
    base: u64,
    eof: bool,
    scratch: Vec<u8>,
}

impl<R: Read> Src<R> {
    fn new(r: R) -> Self {
        Src {
            r,
            buf: vec![0u8; BUF_START].into_boxed_slice(),
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            scratch: Vec::new(),
        }
    }
    fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }
    fn grow(&mut self, want: usize) {
        let len = want.clamp(self.buf.len(), BUF);
        let mut bigger = vec![0u8; len].into_boxed_slice();
        bigger[..self.end].copy_from_slice(&self.buf[..self.end]);
        self.buf = bigger;
    }
    /// Make at least `n` (≤ BUF) bytes available; false at end of input.
    fn fill(&mut self, n: usize) -> Result<bool, PickleError> {
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        if n > self.buf.len() {
            self.grow(n);
        }
        while self.end < n && !self.eof {
            match self.r.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => {
                    self.end += k;
                    // a read that filled the buffer: the input is big, read more at a time
                    if self.end == self.buf.len() && self.buf.len() < BUF {
                        self.grow(self.buf.len() * 4);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(PickleError::Io { offset: self.base + self.end as u64, what: e.to_string() }),
            }
        }
        Ok(self.end >= n)
    }
    #[inline]
    fn u8(&mut self, what: &'static str) -> Result<u8, PickleError> {
        if self.pos < self.end {
            let b = self.buf[self.pos];
            self.pos += 1;
            return Ok(b);
        }
        if !self.fill(1)? {
            return Err(PickleError::Truncated { offset: self.offset(), what });
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(b)
    }
    /// `n` bytes (n ≤ BUF, or copied into the scratch buffer).
    #[inline]
    fn take(&mut self, n: usize, what: &'static str) -> Result<&[u8], PickleError> {
        if self.end - self.pos >= n {
            let s = &self.buf[self.pos..self.pos + n];
            self.pos += n;
            return Ok(s);
        }
        if n <= BUF {
            if !self.fill(n)? {
                return Err(PickleError::Truncated { offset: self.base + self.end as u64, what });
            }
            let s = &self.buf[self.pos..self.pos + n];
            self.pos += n;
            return Ok(s);
        }
        // larger than the buffer: the caller bounded `n` by max_atom
        self.scratch.clear();
        self.scratch.extend_from_slice(&self.buf[self.pos..self.end]);
        self.base += self.end as u64;
        self.pos = 0;
        self.end = 0;
        let want = n - self.scratch.len();
        let got = (&mut self.r)
            .take(want as u64)
            .read_to_end(&mut self.scratch)
            .map_err(|e| PickleError::Io { offset: self.base, what: e.to_string() })?;
        self.base += got as u64;
        if self.scratch.len() < n {
            self.eof = true;
            return Err(PickleError::Truncated { offset: self.base, what });
        }
        Ok(&self.scratch)
    }
    fn skip(&mut self, mut n: u64, what: &'static str) -> Result<(), PickleError> {
        loop {
            let here = ((self.end - self.pos) as u64).min(n);
            self.pos += here as usize;
            n -= here;
            if n == 0 {
                return Ok(());
            }
            if !self.fill(1)? {
                return Err(PickleError::Truncated { offset: self.offset(), what });
            }
        }
    }
    #[inline]
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], PickleError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
}

fn forbidden_name(op: u8) -> Option<&'static str> {
    Some(match op {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => return None,
    })
}

/// Little-endian two's-complement integer of LONG1/LONG4.
#[inline]
pub fn decode_long(bytes: &[u8]) -> Atom<'static> {
    if bytes.is_empty() {
        return Atom::Int(0);
    }
    let negative = bytes[bytes.len() - 1] & 0x80 != 0;
    if bytes.len() <= 8 {
        // byte by byte: a copy of a variable length is a memcpy call
        let mut v: u64 = if negative { u64::MAX } else { 0 };
        for (i, &b) in bytes.iter().enumerate() {
            v &= !(0xff << (8 * i));
            v |= (b as u64) << (8 * i);
        }
        return Atom::Int(v as i64);
    }
    // fits if the extra high bytes are pure sign extension and bit 63 agrees
    let ext = if negative { 0xff } else { 0x00 };
    if bytes[8..].iter().all(|&x| x == ext) && ((bytes[7] & 0x80 != 0) == negative) {
        let mut a = [0u8; 8];
        a.copy_from_slice(&bytes[..8]);
        return Atom::Int(i64::from_le_bytes(a));
    }
    Atom::BigInt { negative }
}

/// Run the opcode machine over `src` into `sink`; returns the root value.
pub fn run<R: Read, S: Sink>(src: R, sink: &mut S, lim: Limits) -> Result<S::V, PickleError> {
    let mut m = Machine { r: Src::new(src), sink, lim, stack: Vec::new(), marks: Vec::new(), ops: 0 };
    let result = m.run();
    for v in m.stack.drain(..) {
        m.sink.discard(v);
    }
    result
}

/// The opcode machine's state: the input, the value stack and the marks.
/// [`Machine::step`] reads one opcode and hands it to the handler of its
/// group (framing, scalars, text, containers, filling, memo, stack ops).
struct Machine<'s, R, S: Sink> {
    r: Src<R>,
    sink: &'s mut S,
    lim: Limits,
    stack: Vec<S::V>,
    /// stack positions of the marks (CPython keeps a "metastack")
    marks: Vec<usize>,
    ops: u32,
}

#[cold]
fn malformed(offset: u64, what: &str) -> PickleError {
    PickleError::Malformed { offset, what: what.to_string() }
}

#[cold]
fn sink_error(offset: u64, e: SinkError) -> PickleError {
    match e {
        SinkError::Malformed(what) => PickleError::Malformed { offset, what },
        SinkError::Limit(what) => PickleError::Limit { offset, what },
    }
}

impl<R: Read, S: Sink> Machine<'_, R, S> {
    fn run(&mut self) -> Result<S::V, PickleError> {
        loop {
            if let Some(root) = self.step()? {
                return Ok(root);
            }
        }
    }

    /// One opcode; the root value once STOP is read.
    #[inline(always)]
    fn step(&mut self) -> Result<Option<S::V>, PickleError> {
        let offset = self.r.offset();
        let op = self.r.u8("an opcode or STOP")?;
        self.ops = self.ops.wrapping_add(1);
        if self.ops & 0xFFFF == 0 {
            self.sink.check(offset).map_err(|e| sink_error(offset, e))?;
        }
        if self.stack.len() + self.marks.len() >= self.lim.max_stack {
            return Err(self.stack_limit(offset));
        }
        match op {
            b'h' | b'j' => self.gets(op, offset)?,
            0x94 | b'q' | b'r' => self.memo(op, offset)?,
            b'(' => self.marks.push(self.stack.len()),
            b'N' | 0x88 | 0x89 | b'J' | b'K' | b'M' | 0x8a | 0x8b | b'G' => self.scalar(op, offset)?,
            0x8c | b'X' | 0x8d | b'C' | b'B' | 0x8e | 0x96 => self.text(op, offset)?,
            b']' | b'}' | 0x8f | b')' | b'l' | b'd' | b't' | 0x91 | 0x85..=0x87 => self.container(op, offset)?,
            b'a' | b'e' | 0x90 | b's' | b'u' => self.fill(op, offset)?,
            b'.' => return self.stop(offset).map(Some),
            b'0' | b'1' | b'2' => self.stack_op(op, offset)?,
            0x80 | 0x95 => self.framing(op, offset)?,
            _ => return Err(Self::unknown(op, offset)),
        }
        Ok(None)
    }

    #[cold]
    fn stack_limit(&self, offset: u64) -> PickleError {
        PickleError::Limit {
            offset,
            what: format!(
                "more than {} values and marks on the unpickling stack (nested too deep, or too many items in one batch)",
                self.lim.max_stack
            ),
        }
    }

    /// An opcode outside the plain-data set: refused by name when it could
    /// import or call code.
    #[cold]
    fn unknown(op: u8, offset: u64) -> PickleError {
        match forbidden_name(op) {
            Some(name) => PickleError::Forbidden { op, name, offset },
            None => PickleError::Unsupported { op, offset },
        }
    }

    /// Values above the innermost mark.
    #[inline]
    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    /// At least `n` values above the innermost mark, else `what`.
    #[inline]
    fn need(&self, n: usize, what: &str, offset: u64) -> Result<(), PickleError> {
        if self.stack.len() < self.floor() + n {
            return Err(malformed(offset, what));
        }
        Ok(())
    }

    #[inline]
    fn push_atom(&mut self, a: Atom<'_>, offset: u64) -> Result<(), PickleError> {
        self.sink.atom_push(a, &mut self.stack).map_err(|e| sink_error(offset, e))
    }

    /// The stack position of the innermost mark, popped.
    #[inline]
    fn pop_mark(&mut self, offset: u64) -> Result<usize, PickleError> {
        self.marks.pop().ok_or_else(|| malformed(offset, "no MARK on the stack"))
    }

    /// PROTO, FRAME
    fn framing(&mut self, op: u8, offset: u64) -> Result<(), PickleError> {
        if op == 0x80 {
            let p = self.r.u8("protocol number")?;
            if !(2..=5).contains(&p) {
                return Err(malformed(offset, &format!("protocol {p} is not 2–5")));
            }
        } else {
            self.r.array::<8>("frame length")?;
        }
        Ok(())
    }

    /// STOP: the root value.
    fn stop(&mut self, offset: u64) -> Result<S::V, PickleError> {
        self.need(1, "stack underflow (STOP with an empty stack)", offset)?;
        self.stack.pop().ok_or_else(|| malformed(offset, "STOP with an empty stack"))
    }

    /// None, booleans, integers, floats.
    #[inline]
    fn scalar(&mut self, op: u8, offset: u64) -> Result<(), PickleError> {
        let r = &mut self.r;
        let a = match op {
            b'N' => Atom::None,
            0x88 => Atom::Bool(true),
            0x89 => Atom::Bool(false),
            b'J' => Atom::Int(i32::from_le_bytes(r.array::<4>("BININT")?) as i64),
            b'K' => Atom::Int(r.u8("BININT1")? as i64),
            b'M' => Atom::Int(u16::from_le_bytes(r.array::<2>("BININT2")?) as i64),
            b'G' => Atom::Float(f64::from_be_bytes(r.array::<8>("BINFLOAT")?)),
            _ => {
                let n: u64 = if op == 0x8a {
                    r.u8("LONG1 length")? as u64
                } else {
                    let n = i32::from_le_bytes(r.array::<4>("LONG4 length")?);
                    u64::try_from(n).map_err(|_| malformed(offset, "LONG4 with a negative byte count"))?
                };
                if n <= 64 {
                    decode_long(r.take(n as usize, "LONG bytes")?)
                } else {
                    // constant memory: only the sign (the last byte) matters
                    r.skip(n - 1, "LONG bytes")?;
                    let last = r.u8("LONG bytes")?;
                    Atom::BigInt { negative: last & 0x80 != 0 }
                }
            }
        };
        self.push_atom(a, offset)
    }

    /// Strings and bytes: copied out up to `max_atom`, skipped beyond.
    #[inline]
    fn text(&mut self, op: u8, offset: u64) -> Result<(), PickleError> {
        let r = &mut self.r;
        let (n, what, is_str): (u64, &'static str, bool) = match op {
            0x8c => (r.u8("SHORT_BINUNICODE length")? as u64, "SHORT_BINUNICODE bytes", true),
            b'X' => (u32::from_le_bytes(r.array::<4>("BINUNICODE length")?) as u64, "BINUNICODE bytes", true),
            0x8d => (u64::from_le_bytes(r.array::<8>("BINUNICODE8 length")?), "BINUNICODE8 bytes", true),
            b'C' => (r.u8("SHORT_BINBYTES length")? as u64, "SHORT_BINBYTES bytes", false),
            b'B' => (u32::from_le_bytes(r.array::<4>("BINBYTES length")?) as u64, "BINBYTES bytes", false),
            _ => (u64::from_le_bytes(r.array::<8>("BINBYTES8 length")?), "BINBYTES8 bytes", false),
        };
        if n > self.lim.max_atom as u64 {
            r.skip(n, what)?;
            return self.push_atom(if is_str { Atom::LongStr(n) } else { Atom::LongBytes(n) }, offset);
        }
        let b = r.take(n as usize, what)?;
        let a = if is_str { Atom::Str(b) } else { Atom::Bytes(b) };
        self.sink.atom_push(a, &mut self.stack).map_err(|e| sink_error(offset, e))
    }

    /// EMPTY_LIST/DICT/SET/TUPLE, LIST, DICT, TUPLE, FROZENSET, TUPLE1–3.
    fn container(&mut self, op: u8, offset: u64) -> Result<(), PickleError> {
        let v = match op {
            b']' | b'}' | 0x8f => {
                let kind = match op {
                    b']' => Coll::List,
                    b'}' => Coll::Dict,
                    _ => Coll::Set,
                };
                return self.sink.empty_push(kind, &mut self.stack).map_err(|e| sink_error(offset, e));
            }
            b')' => self.sink.build(Coll::Tuple, self.stack.drain(self.stack.len()..)),
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                self.need(n, "stack underflow (TUPLE1–3)", offset)?;
                let at = self.stack.len() - n;
                self.sink.build(Coll::Tuple, self.stack.drain(at..))
            }
            _ => {
                let m = self.pop_mark(offset)?;
                let kind = match op {
                    b'l' => Coll::List,
                    b'd' => Coll::Dict,
                    b't' => Coll::Tuple,
                    _ => Coll::FrozenSet,
                };
                if kind == Coll::Dict && !(self.stack.len() - m).is_multiple_of(2) {
                    return Err(malformed(offset, "odd number of items for DICT"));
                }
                self.sink.build(kind, self.stack.drain(m..))
            }
        };
        let v = v.map_err(|e| sink_error(offset, e))?;
        self.stack.push(v);
        Ok(())
    }

    /// APPEND, APPENDS, ADDITEMS, SETITEM, SETITEMS: items into the
    /// container below them.
    #[inline]
    fn fill(&mut self, op: u8, offset: u64) -> Result<(), PickleError> {
        let (at, dict) = match op {
            b'a' => {
                self.need(2, "stack underflow (APPEND)", offset)?;
                (self.stack.len() - 1, false)
            }
            b's' => {
                self.need(3, "stack underflow (SETITEM)", offset)?;
                (self.stack.len() - 2, true)
            }
            _ => {
                let m = self.pop_mark(offset)?;
                let below = self.floor();
                let dict = op == b'u';
                if m == 0 || m <= below {
                    return Err(malformed(
                        offset,
                        if dict {
                            "SETITEMS with no dict below the MARK"
                        } else {
                            "APPENDS/ADDITEMS with no container below the MARK"
                        },
                    ));
                }
                if dict && !(self.stack.len() - m).is_multiple_of(2) {
                    return Err(malformed(offset, "odd number of items for SETITEMS"));
                }
                (m, dict)
            }
        };
        let t = self.stack[at - 1].clone();
        let items = self.stack.drain(at..);
        let r = if dict { self.sink.set_items(t, items) } else { self.sink.extend(t, items) };
        r.map_err(|e| sink_error(offset, e))
    }

    /// MEMOIZE, BINPUT, LONG_BINPUT, BINGET, LONG_BINGET.
    #[inline(always)]
    fn memo(&mut self, op: u8, offset: u64) -> Result<(), PickleError> {
        let idx = match op {
            b'h' => self.r.u8("BINGET index")? as u64,
            b'j' => u32::from_le_bytes(self.r.array::<4>("LONG_BINGET index")?) as u64,
            0x94 => self.sink.memo_len(),
            b'q' => self.r.u8("BINPUT index")? as u64,
            _ => u32::from_le_bytes(self.r.array::<4>("LONG_BINPUT index")?) as u64,
        };
        if op == b'h' || op == b'j' {
            return self.sink.memo_push(idx, &mut self.stack).map_err(|e| sink_error(offset, e));
        }
        self.need(1, "stack underflow (MEMOIZE/PUT with nothing to store)", offset)?;
        let v = self.stack.last().ok_or_else(|| malformed(offset, "MEMOIZE/PUT with nothing to store"))?;
        self.sink.memo_put(idx, v).map_err(|e| sink_error(offset, e))
    }

    /// BINGET, LONG_BINGET, and those that follow it (a traceback list is a
    /// run of them): each with the checks of [`Self::step`].
    #[inline(always)]
    fn gets(&mut self, mut op: u8, mut offset: u64) -> Result<(), PickleError> {
        loop {
            self.memo(op, offset)?;
            let r = &self.r;
            match r.buf[..r.end].get(r.pos) {
                Some(&next @ (b'h' | b'j')) => op = next,
                _ => return Ok(()),
            }
            offset = self.r.offset();
            self.r.pos += 1;
            self.ops = self.ops.wrapping_add(1);
            if self.ops & 0xFFFF == 0 {
                self.sink.check(offset).map_err(|e| sink_error(offset, e))?;
            }
            if self.stack.len() + self.marks.len() >= self.lim.max_stack {
                return Err(self.stack_limit(offset));
            }
        }
    }

    /// POP, POP_MARK, DUP.
    fn stack_op(&mut self, op: u8, offset: u64) -> Result<(), PickleError> {
        match op {
            b'0' => {
                // CPython: pop a value, or the mark when the frame is empty
                if self.stack.len() > self.floor() {
                    if let Some(v) = self.stack.pop() {
                        self.sink.discard(v);
                    }
                } else if self.marks.pop().is_none() {
                    return Err(malformed(offset, "POP on an empty stack"));
                }
            }
            b'1' => {
                let m = self.pop_mark(offset)?;
                for v in self.stack.drain(m..) {
                    self.sink.discard(v);
                }
            }
            _ => {
                self.need(1, "stack underflow (DUP)", offset)?;
                let v = self
                    .stack
                    .last()
                    .map(|v| self.sink.dup(v))
                    .ok_or_else(|| malformed(offset, "DUP on an empty stack"))?;
                self.stack.push(v);
            }
        }
        Ok(())
    }
}

// ------------------------------------------------------------------- memo

/// The memo: dense as CPython writes it (indices 0, 1, 2, …), with
/// out-of-order indices in a map, so that no index sizes an allocation.
#[derive(Debug, Clone)]
pub struct Memo<V> {
    dense: Vec<Option<V>>,
    sparse: HashMap<u64, V>,
    /// distinct indices set (CPython's `len(memo)`, the index MEMOIZE uses)
    count: u64,
}

impl<V> Default for Memo<V> {
    fn default() -> Self {
        Memo { dense: Vec::new(), sparse: HashMap::new(), count: 0 }
    }
}

impl<V> Memo<V> {
    pub fn len(&self) -> u64 {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Slots stored (for memory budgets).
    pub fn slots(&self) -> usize {
        self.dense.len() + self.sparse.len()
    }
    pub fn put(&mut self, idx: u64, v: V) {
        match usize::try_from(idx) {
            Ok(i) if i < self.dense.len() => {
                if self.dense[i].replace(v).is_none() {
                    self.count += 1;
                }
            }
            Ok(i) if i == self.dense.len() && !self.sparse.contains_key(&idx) => {
                self.dense.push(Some(v));
                self.count += 1;
            }
            _ => {
                if self.sparse.insert(idx, v).is_none() {
                    self.count += 1;
                }
            }
        }
    }
    pub fn get(&self, idx: u64) -> Option<&V> {
        match usize::try_from(idx) {
            Ok(i) if i < self.dense.len() => self.dense[i].as_ref(),
            _ => self.sparse.get(&idx),
        }
    }
    pub fn get_mut(&mut self, idx: u64) -> Option<&mut V> {
        match usize::try_from(idx) {
            Ok(i) if i < self.dense.len() => self.dense[i].as_mut(),
            _ => self.sparse.get_mut(&idx),
        }
    }
}

// ---------------------------------------------------------- generic tree

/// A value of the pickle.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// an integer beyond 64 bits (kept as its sign only)
    BigInt {
        negative: bool,
    },
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    /// index into [`Pickle::nodes`]
    List(usize),
    Dict(usize),
    Tuple(usize),
}

/// A container's contents (sets are read as lists).
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    List(Vec<Value>),
    Dict(Vec<(Value, Value)>),
    Tuple(Vec<Value>),
}

/// A parsed pickle: the root value and the container arena.
#[derive(Debug, Clone)]
pub struct Pickle {
    pub root: Value,
    pub nodes: Vec<Node>,
}

/// Most values the generic tree holds (containers plus their items), about
/// 32 B each: bounds its memory at ~512 MiB whatever the input.
pub const TREE_MAX_VALUES: usize = 16 << 20;
/// Dicts up to this size replace duplicate keys in place.
const DEDUP_LIMIT: usize = 64;

#[derive(Default)]
struct TreeSink {
    nodes: Vec<Node>,
    memo: Memo<Value>,
    values: usize,
}

impl TreeSink {
    fn count(&mut self, n: usize) -> Result<(), SinkError> {
        self.values = self.values.saturating_add(n);
        if self.values > TREE_MAX_VALUES {
            return Err(SinkError::Limit(format!("more than {TREE_MAX_VALUES} values in the pickle")));
        }
        Ok(())
    }
    fn node(&mut self, n: Node) -> Result<usize, SinkError> {
        self.count(1)?;
        self.nodes.push(n);
        Ok(self.nodes.len() - 1)
    }
}

fn utf8_lossy(b: &[u8]) -> Rc<str> {
    // PyTorch frames can carry surrogate-escaped names; accept lossily
    // rather than refuse the whole file.
    match std::str::from_utf8(b) {
        Ok(s) => Rc::from(s),
        Err(_) => Rc::from(String::from_utf8_lossy(b).as_ref()),
    }
}

fn set_pairs(d: &mut Vec<(Value, Value)>, items: Drain<'_, Value>) -> Result<(), SinkError> {
    let mut it = items;
    while let Some(k) = it.next() {
        let v = it.next().ok_or_else(|| SinkError::Malformed("odd number of items for SETITEMS".into()))?;
        // later keys replace earlier ones, as in Python; big dicts
        // skip the linear check and rely on lookups searching from the end
        let small = d.len() <= DEDUP_LIMIT;
        match d.iter_mut().take(DEDUP_LIMIT).find(|(ek, _)| *ek == k) {
            Some(slot) if small => slot.1 = v,
            _ => d.push((k, v)),
        }
    }
    Ok(())
}

impl Sink for TreeSink {
    type V = Value;
    fn atom(&mut self, a: Atom<'_>) -> Result<Value, SinkError> {
        Ok(match a {
            Atom::None => Value::None,
            Atom::Bool(b) => Value::Bool(b),
            Atom::Int(i) => Value::Int(i),
            Atom::BigInt { negative } => Value::BigInt { negative },
            Atom::Float(f) => Value::Float(f),
            Atom::Str(b) => Value::Str(utf8_lossy(b)),
            Atom::Bytes(b) => Value::Bytes(Rc::from(b)),
            Atom::LongStr(n) | Atom::LongBytes(n) => {
                return Err(SinkError::Limit(format!("a {n}-byte string or bytes value")))
            }
        })
    }
    fn empty(&mut self, kind: Coll) -> Result<Value, SinkError> {
        Ok(match kind {
            Coll::Dict => Value::Dict(self.node(Node::Dict(Vec::new()))?),
            _ => Value::List(self.node(Node::List(Vec::new()))?),
        })
    }
    fn build(&mut self, kind: Coll, items: Drain<'_, Value>) -> Result<Value, SinkError> {
        self.count(items.len())?;
        Ok(match kind {
            Coll::Dict => {
                let mut d = Vec::new();
                set_pairs(&mut d, items)?;
                Value::Dict(self.node(Node::Dict(d))?)
            }
            Coll::Tuple => Value::Tuple(self.node(Node::Tuple(items.collect()))?),
            Coll::List | Coll::Set | Coll::FrozenSet => Value::List(self.node(Node::List(items.collect()))?),
        })
    }
    fn extend(&mut self, target: Value, items: Drain<'_, Value>) -> Result<(), SinkError> {
        self.count(items.len())?;
        match (&target, target_node(&mut self.nodes, &target)) {
            (Value::List(_), Some(Node::List(l))) => {
                l.extend(items);
                Ok(())
            }
            _ => Err(SinkError::Malformed("APPEND target is not a list".into())),
        }
    }
    fn set_items(&mut self, target: Value, items: Drain<'_, Value>) -> Result<(), SinkError> {
        self.count(items.len())?;
        match target_node(&mut self.nodes, &target) {
            Some(Node::Dict(d)) => set_pairs(d, items),
            _ => Err(SinkError::Malformed("SETITEM target is not a dict".into())),
        }
    }
    fn discard(&mut self, _v: Value) {}
    fn dup(&mut self, v: &Value) -> Value {
        v.clone()
    }
    fn memo_put(&mut self, idx: u64, v: &Value) -> Result<(), SinkError> {
        self.count(1)?;
        self.memo.put(idx, v.clone());
        Ok(())
    }
    fn memo_get(&mut self, idx: u64) -> Result<Value, SinkError> {
        self.memo
            .get(idx)
            .cloned()
            .ok_or_else(|| SinkError::Malformed(format!("memo entry {idx} used before it was set")))
    }
    fn memo_len(&self) -> u64 {
        self.memo.len()
    }
}

fn target_node<'a>(nodes: &'a mut [Node], v: &Value) -> Option<&'a mut Node> {
    match v {
        Value::List(i) | Value::Dict(i) | Value::Tuple(i) => nodes.get_mut(*i),
        _ => None,
    }
}

/// Parse plain-data pickle bytes into a generic tree. Never runs code.
pub fn parse(data: &[u8]) -> Result<Pickle, PickleError> {
    let mut sink = TreeSink::default();
    let root = run(data, &mut sink, Limits::default())?;
    Ok(Pickle { root, nodes: sink.nodes })
}

impl Pickle {
    pub fn node(&self, v: &Value) -> Option<&Node> {
        match v {
            Value::List(i) | Value::Dict(i) | Value::Tuple(i) => self.nodes.get(*i),
            _ => None,
        }
    }
    /// Items of a list or tuple.
    pub fn items(&self, v: &Value) -> Option<&[Value]> {
        match self.node(v)? {
            Node::List(l) | Node::Tuple(l) => Some(l),
            Node::Dict(_) => None,
        }
    }
    /// Entries of a dict.
    pub fn entries(&self, v: &Value) -> Option<&[(Value, Value)]> {
        match self.node(v)? {
            Node::Dict(d) => Some(d),
            _ => None,
        }
    }
    /// `dict[key]` for a string key.
    pub fn get<'a>(&'a self, dict: &Value, key: &str) -> Option<&'a Value> {
        // from the end: the last binding of a key wins, as in Python
        self.entries(dict)?.iter().rev().find(|(k, _)| matches!(k, Value::Str(s) if &**s == key)).map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_dict_protocol2() {
        // python3 -c "import pickle;print(pickle.dumps({'a':[1,True,None]},protocol=2))"
        let p = parse(b"\x80\x02}q\x00X\x01\x00\x00\x00aq\x01]q\x02(K\x01\x88Nes.").unwrap();
        let a = p.get(&p.root, "a").unwrap();
        assert_eq!(p.items(a).unwrap(), &[Value::Int(1), Value::Bool(true), Value::None]);
    }

    #[test]
    fn reduce_is_refused_before_anything() {
        // cos\nsystem\n(S'touch pwned'\ntR.
        let e = parse(b"\x80\x02cos\nsystem\nq\x00X\x0b\x00\x00\x00touch pwnedq\x01\x85q\x02Rq\x03.").unwrap_err();
        assert!(matches!(e, PickleError::Forbidden { name: "GLOBAL", offset: 2, .. }), "{e}");
    }

    #[test]
    fn longs() {
        assert_eq!(decode_long(&[0xff]), Atom::Int(-1));
        assert_eq!(decode_long(&[0x00, 0x01]), Atom::Int(256));
        assert_eq!(decode_long(&[0x80]), Atom::Int(-128));
        assert_eq!(decode_long(&[0x00, 0x80]), Atom::Int(-32768));
        assert_eq!(decode_long(&[0x01, 0x02, 0x03, 0x04, 0x05, 0x86]), Atom::Int(-0x79fa_fbfc_fdff));
        assert_eq!(decode_long(&[0, 0, 0, 0, 0, 0, 0, 0x80]), Atom::Int(i64::MIN));
        assert_eq!(decode_long(&[0x00, 0x10, 0x00, 0x00, 0x2a, 0x7f]), Atom::Int(0x7f2a_0000_1000));
        // 2**70
        assert_eq!(decode_long(&[0, 0, 0, 0, 0, 0, 0, 0, 0x40]), Atom::BigInt { negative: false });
        // 2**63 - 1 in 9 bytes
        assert_eq!(decode_long(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00]), Atom::Int(i64::MAX));
    }

    #[test]
    fn huge_long_is_read_in_constant_memory() {
        // LONG4 of 100 MB: skipped, only the sign kept
        let n: u32 = 100 << 20;
        let mut b = vec![0x80, 4, 0x8b];
        b.extend(n.to_le_bytes());
        b.resize(b.len() + n as usize - 1, 0xff);
        b.push(0x80);
        b.push(b'.');
        let p = parse(&b).unwrap();
        assert_eq!(p.root, Value::BigInt { negative: true });
        // a length past the end is an error, not an allocation
        let e = parse(b"\x80\x04\x8b\xff\xff\xff\x7f\x00").unwrap_err();
        assert!(matches!(e, PickleError::Truncated { .. }), "{e}");
        let e = parse(b"\x80\x04\x8d\xff\xff\xff\xff\xff\xff\xff\xff").unwrap_err();
        assert!(matches!(e, PickleError::Limit { .. } | PickleError::Truncated { .. }), "{e}");
    }

    #[test]
    fn self_reference_is_safe() {
        // l = []; l.append(l)  → ]q\x00h\x00a.
        let p = parse(b"\x80\x02]q\x00h\x00a.").unwrap();
        let Value::List(i) = p.root else { panic!() };
        assert_eq!(p.items(&p.root).unwrap(), &[Value::List(i)]);
    }

    #[test]
    fn deep_nesting_stops_at_the_stack_limit() {
        let mut b = vec![0x80, 4];
        b.extend(std::iter::repeat_n(b'(', 2 << 20));
        let e = parse(&b).unwrap_err();
        assert!(matches!(e, PickleError::Limit { .. }), "{e}");
        let mut b = vec![0x80, 4];
        b.extend(std::iter::repeat_n(b']', 2 << 20));
        assert!(matches!(parse(&b).unwrap_err(), PickleError::Limit { .. }));
    }

    #[test]
    fn a_run_of_memo_gets_stops_at_the_stack_limit() {
        // ] MEMOIZE ( then BINGET 0 × 200: the 99th BINGET (at byte 201)
        // finds 1 value + 1 mark + 98 values on the stack
        let mut b = vec![0x80, 4, b']', 0x94, b'('];
        for _ in 0..200 {
            b.extend([b'h', 0]);
        }
        let lim = Limits { max_stack: 100, max_atom: 1 << 20 };
        let e = run(&b[..], &mut TreeSink::default(), lim).unwrap_err();
        assert!(matches!(e, PickleError::Limit { offset: 201, .. }), "{e}");
        // a run that ends the input: truncated at its end
        let e = run(&b[..], &mut TreeSink::default(), Limits::default()).unwrap_err();
        assert!(matches!(e, PickleError::Truncated { offset: 405, .. }), "{e}");
        // an unset index inside the run: its own offset
        b[5 + 2 * 50 + 1] = 7;
        let e = run(&b[..], &mut TreeSink::default(), Limits::default()).unwrap_err();
        assert_eq!(e, PickleError::Malformed { offset: 105, what: "memo entry 7 used before it was set".into() });
    }

    #[test]
    fn marks_and_frames() {
        // APPEND must not reach below a MARK: `] ( N a` appends N to…nothing
        assert!(parse(b"\x80\x04](Na.").is_err());
        // POP of an empty frame pops the mark (CPython's load_pop)
        let p = parse(b"\x80\x04K\x01(0.").unwrap();
        assert_eq!(p.root, Value::Int(1));
        // sets read as lists; frozenset too
        let p = parse(b"\x80\x04\x8f\x94(K\x01K\x02\x90.").unwrap();
        assert_eq!(p.items(&p.root).unwrap(), &[Value::Int(1), Value::Int(2)]);
    }

    #[test]
    fn truncated_and_garbage() {
        assert!(matches!(parse(b"\x80\x04"), Err(PickleError::Truncated { .. })));
        assert!(parse(b"").is_err());
        assert!(parse(b"\x80\x02e.").is_err());
        assert!(parse(b"\x80\x02X\xff\xff\xff\xff").is_err());
    }

    #[test]
    fn memo_is_sparse_beyond_the_dense_end() {
        let mut m: Memo<u32> = Memo::default();
        m.put(0, 1);
        m.put(4_000_000_000, 2);
        m.put(1, 3);
        assert_eq!((m.get(0), m.get(1), m.get(4_000_000_000), m.get(2)), (Some(&1), Some(&3), Some(&2), None));
        assert_eq!(m.slots(), 3);
    }
}
