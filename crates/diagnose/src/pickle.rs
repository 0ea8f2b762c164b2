//! A restricted unpickler: builds plain data (None, bool, int, float,
//! str, bytes, list, dict, tuple) and refuses every opcode that could
//! import or call anything (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ,
//! NEWOBJ, NEWOBJ_EX, EXT*, PERSID/BINPERSID, buffers). Nothing is ever
//! executed: the refusal happens while reading the opcode, before any
//! name is resolved.
//!
//! Shared objects stay shared: containers live in an arena and values refer
//! to them by index, so a memo reference (`BINGET`) to a frame dict that
//! PyTorch appended to many tracebacks (combined_traceback.cpp) yields the
//! same arena slot every time, and self-referencing structures cannot make
//! a reader loop forever (readers walk with a depth limit).
//!
//! Opcode list and semantics: CPython `Lib/pickletools.py` / `Lib/pickle.py`
//! (protocols 2–5, the ones `pickle.dump` writes by default since 3.0).

use std::collections::HashMap;
use std::rc::Rc;

/// A value of the pickle.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    /// an integer beyond 64 bits (kept as its decimal sign only)
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

/// A container's contents.
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

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickleError {
    #[error(
        "pickle opcode {name} (0x{op:02x}) at byte {offset} would import or call Python code; refused, nothing was run"
    )]
    Forbidden { op: u8, name: &'static str, offset: usize },
    #[error("unsupported pickle opcode 0x{op:02x} at byte {offset} (only protocol 2–5 plain data is read)")]
    Unsupported { op: u8, offset: usize },
    #[error("pickle ends early at byte {offset} (expected {what})")]
    Truncated { offset: usize, what: &'static str },
    #[error("malformed pickle at byte {offset}: {what}")]
    Malformed { offset: usize, what: String },
    #[error("pickle too large or too deep: {what}")]
    Limit { what: &'static str },
}

/// Most values on the stack and memo entries (bounds memory on hostile input).
const MAX_ITEMS: usize = 50_000_000;
/// Dicts up to this size replace duplicate keys in place.
const DEDUP_LIMIT: usize = 64;

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], PickleError> {
        let end = self.pos.checked_add(n).ok_or(PickleError::Truncated { offset: self.pos, what })?;
        if end > self.data.len() {
            return Err(PickleError::Truncated { offset: self.pos, what });
        }
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, PickleError> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, PickleError> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, PickleError> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &'static str) -> Result<u64, PickleError> {
        let b = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn len64(&mut self, what: &'static str) -> Result<usize, PickleError> {
        let n = self.u64(what)?;
        usize::try_from(n).map_err(|_| PickleError::Truncated { offset: self.pos, what })
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

enum Slot {
    V(Value),
    Mark,
}

/// Little-endian two's-complement integer of LONG1/LONG4.
fn decode_long(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Int(0);
    }
    let negative = bytes[bytes.len() - 1] & 0x80 != 0;
    if bytes.len() <= 8 {
        let mut a = if negative { [0xffu8; 8] } else { [0u8; 8] };
        a[..bytes.len()].copy_from_slice(bytes);
        return Value::Int(i64::from_le_bytes(a));
    }
    // fits if the extra high bytes are pure sign extension and bit 63 agrees
    let ext = if negative { 0xff } else { 0x00 };
    if bytes[8..].iter().all(|&x| x == ext) && ((bytes[7] & 0x80 != 0) == negative) {
        let mut a = [0u8; 8];
        a.copy_from_slice(&bytes[..8]);
        return Value::Int(i64::from_le_bytes(a));
    }
    Value::BigInt { negative }
}

/// Parse plain-data pickle bytes. Never runs code.
pub fn parse(data: &[u8]) -> Result<Pickle, PickleError> {
    let mut r = Reader { data, pos: 0 };
    let mut stack: Vec<Slot> = Vec::new();
    // a map, not a Vec: a hostile LONG_BINPUT index must not allocate
    let mut memo: HashMap<usize, Value> = HashMap::new();
    let mut nodes: Vec<Node> = Vec::new();

    fn pop(stack: &mut Vec<Slot>, offset: usize) -> Result<Value, PickleError> {
        match stack.pop() {
            Some(Slot::V(v)) => Ok(v),
            Some(Slot::Mark) => Err(PickleError::Malformed { offset, what: "mark where a value was expected".into() }),
            None => Err(PickleError::Malformed { offset, what: "stack underflow".into() }),
        }
    }
    fn pop_mark(stack: &mut Vec<Slot>, offset: usize) -> Result<Vec<Value>, PickleError> {
        let Some(m) = stack.iter().rposition(|s| matches!(s, Slot::Mark)) else {
            return Err(PickleError::Malformed { offset, what: "no MARK on the stack".into() });
        };
        let items = stack.split_off(m + 1);
        stack.pop();
        Ok(items.into_iter().filter_map(|s| if let Slot::V(v) = s { Some(v) } else { None }).collect())
    }
    fn top_container(stack: &[Slot], offset: usize) -> Result<Value, PickleError> {
        match stack.last() {
            Some(Slot::V(v)) => Ok(v.clone()),
            _ => Err(PickleError::Malformed { offset, what: "no container on the stack".into() }),
        }
    }
    fn push_node(nodes: &mut Vec<Node>, n: Node) -> Result<usize, PickleError> {
        if nodes.len() >= MAX_ITEMS {
            return Err(PickleError::Limit { what: "too many containers" });
        }
        nodes.push(n);
        Ok(nodes.len() - 1)
    }
    fn memo_put(memo: &mut HashMap<usize, Value>, idx: usize, v: Value) -> Result<(), PickleError> {
        if memo.len() >= MAX_ITEMS {
            return Err(PickleError::Limit { what: "too many memo entries" });
        }
        memo.insert(idx, v);
        Ok(())
    }
    fn memo_get(memo: &HashMap<usize, Value>, idx: usize, offset: usize) -> Result<Value, PickleError> {
        memo.get(&idx)
            .cloned()
            .ok_or_else(|| PickleError::Malformed { offset, what: format!("memo entry {idx} used before it was set") })
    }
    fn utf8(b: &[u8], offset: usize) -> Result<Rc<str>, PickleError> {
        // PyTorch frames can carry surrogate-escaped names; accept lossily
        // rather than refuse the whole snapshot.
        match std::str::from_utf8(b) {
            Ok(s) => Ok(Rc::from(s)),
            Err(_) if b.len() < (1 << 30) => Ok(Rc::from(String::from_utf8_lossy(b).as_ref())),
            Err(_) => Err(PickleError::Malformed { offset, what: "string is not UTF-8".into() }),
        }
    }
    fn extend(nodes: &mut [Node], target: &Value, items: Vec<Value>, offset: usize) -> Result<(), PickleError> {
        match target {
            Value::List(i) => match nodes.get_mut(*i) {
                Some(Node::List(l)) => {
                    l.extend(items);
                    Ok(())
                }
                _ => Err(PickleError::Malformed { offset, what: "APPEND target is not a list".into() }),
            },
            _ => Err(PickleError::Malformed { offset, what: "APPEND target is not a list".into() }),
        }
    }
    fn set_items(nodes: &mut [Node], target: &Value, items: Vec<Value>, offset: usize) -> Result<(), PickleError> {
        if !items.len().is_multiple_of(2) {
            return Err(PickleError::Malformed { offset, what: "odd number of items for SETITEMS".into() });
        }
        let Value::Dict(i) = target else {
            return Err(PickleError::Malformed { offset, what: "SETITEM target is not a dict".into() });
        };
        let Some(Node::Dict(d)) = nodes.get_mut(*i) else {
            return Err(PickleError::Malformed { offset, what: "SETITEM target is not a dict".into() });
        };
        let mut it = items.into_iter();
        while let (Some(k), Some(v)) = (it.next(), it.next()) {
            // later keys replace earlier ones, as in Python; big dicts
            // (never in a snapshot) skip the linear check and rely on
            // lookups searching from the end
            let small = d.len() <= DEDUP_LIMIT;
            match d.iter_mut().take(DEDUP_LIMIT).find(|(ek, _)| *ek == k) {
                Some(slot) if small => slot.1 = v,
                _ => d.push((k, v)),
            }
        }
        Ok(())
    }

    loop {
        let offset = r.pos;
        let op = r.u8("an opcode or STOP")?;
        if let Some(name) = forbidden_name(op) {
            return Err(PickleError::Forbidden { op, name, offset });
        }
        if stack.len() >= MAX_ITEMS {
            return Err(PickleError::Limit { what: "stack too deep" });
        }
        match op {
            0x80 => {
                let p = r.u8("protocol number")?;
                if !(2..=5).contains(&p) {
                    return Err(PickleError::Malformed { offset, what: format!("protocol {p} is not 2–5") });
                }
            }
            0x95 => {
                r.u64("frame length")?;
            }
            b'.' => {
                let root = pop(&mut stack, offset)?;
                return Ok(Pickle { root, nodes });
            }
            b'(' => stack.push(Slot::Mark),
            b'N' => stack.push(Slot::V(Value::None)),
            0x88 => stack.push(Slot::V(Value::Bool(true))),
            0x89 => stack.push(Slot::V(Value::Bool(false))),
            b'J' => {
                let v = r.u32("BININT")? as i32;
                stack.push(Slot::V(Value::Int(v as i64)));
            }
            b'K' => {
                let v = r.u8("BININT1")?;
                stack.push(Slot::V(Value::Int(v as i64)));
            }
            b'M' => {
                let v = r.u16("BININT2")?;
                stack.push(Slot::V(Value::Int(v as i64)));
            }
            0x8a => {
                let n = r.u8("LONG1 length")? as usize;
                let b = r.take(n, "LONG1 bytes")?;
                stack.push(Slot::V(decode_long(b)));
            }
            0x8b => {
                let n = r.u32("LONG4 length")? as usize;
                let b = r.take(n, "LONG4 bytes")?;
                stack.push(Slot::V(decode_long(b)));
            }
            b'G' => {
                let b = r.take(8, "BINFLOAT")?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                stack.push(Slot::V(Value::Float(f64::from_be_bytes(a))));
            }
            0x8c => {
                let n = r.u8("SHORT_BINUNICODE length")? as usize;
                let s = utf8(r.take(n, "SHORT_BINUNICODE bytes")?, offset)?;
                stack.push(Slot::V(Value::Str(s)));
            }
            b'X' => {
                let n = r.u32("BINUNICODE length")? as usize;
                let s = utf8(r.take(n, "BINUNICODE bytes")?, offset)?;
                stack.push(Slot::V(Value::Str(s)));
            }
            0x8d => {
                let n = r.len64("BINUNICODE8 length")?;
                let s = utf8(r.take(n, "BINUNICODE8 bytes")?, offset)?;
                stack.push(Slot::V(Value::Str(s)));
            }
            b'C' => {
                let n = r.u8("SHORT_BINBYTES length")? as usize;
                stack.push(Slot::V(Value::Bytes(Rc::from(r.take(n, "SHORT_BINBYTES bytes")?))));
            }
            b'B' => {
                let n = r.u32("BINBYTES length")? as usize;
                stack.push(Slot::V(Value::Bytes(Rc::from(r.take(n, "BINBYTES bytes")?))));
            }
            0x8e => {
                let n = r.len64("BINBYTES8 length")?;
                stack.push(Slot::V(Value::Bytes(Rc::from(r.take(n, "BINBYTES8 bytes")?))));
            }
            b']' => {
                let i = push_node(&mut nodes, Node::List(Vec::new()))?;
                stack.push(Slot::V(Value::List(i)));
            }
            b'}' => {
                let i = push_node(&mut nodes, Node::Dict(Vec::new()))?;
                stack.push(Slot::V(Value::Dict(i)));
            }
            b')' => {
                let i = push_node(&mut nodes, Node::Tuple(Vec::new()))?;
                stack.push(Slot::V(Value::Tuple(i)));
            }
            b'l' => {
                let items = pop_mark(&mut stack, offset)?;
                let i = push_node(&mut nodes, Node::List(items))?;
                stack.push(Slot::V(Value::List(i)));
            }
            b'd' => {
                let items = pop_mark(&mut stack, offset)?;
                let i = push_node(&mut nodes, Node::Dict(Vec::new()))?;
                set_items(&mut nodes, &Value::Dict(i), items, offset)?;
                stack.push(Slot::V(Value::Dict(i)));
            }
            b't' => {
                let items = pop_mark(&mut stack, offset)?;
                let i = push_node(&mut nodes, Node::Tuple(items))?;
                stack.push(Slot::V(Value::Tuple(i)));
            }
            0x85..=0x87 => {
                let n = (op - 0x84) as usize;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(pop(&mut stack, offset)?);
                }
                items.reverse();
                let i = push_node(&mut nodes, Node::Tuple(items))?;
                stack.push(Slot::V(Value::Tuple(i)));
            }
            b'a' => {
                let v = pop(&mut stack, offset)?;
                let target = top_container(&stack, offset)?;
                extend(&mut nodes, &target, vec![v], offset)?;
            }
            b'e' => {
                let items = pop_mark(&mut stack, offset)?;
                let target = top_container(&stack, offset)?;
                extend(&mut nodes, &target, items, offset)?;
            }
            b's' => {
                let v = pop(&mut stack, offset)?;
                let k = pop(&mut stack, offset)?;
                let target = top_container(&stack, offset)?;
                set_items(&mut nodes, &target, vec![k, v], offset)?;
            }
            b'u' => {
                let items = pop_mark(&mut stack, offset)?;
                let target = top_container(&stack, offset)?;
                set_items(&mut nodes, &target, items, offset)?;
            }
            0x94 => {
                let v = top_container(&stack, offset)?;
                let idx = memo.len();
                memo_put(&mut memo, idx, v)?;
            }
            b'q' => {
                let idx = r.u8("BINPUT index")? as usize;
                let v = top_container(&stack, offset)?;
                memo_put(&mut memo, idx, v)?;
            }
            b'r' => {
                let idx = r.u32("LONG_BINPUT index")? as usize;
                let v = top_container(&stack, offset)?;
                memo_put(&mut memo, idx, v)?;
            }
            b'h' => {
                let idx = r.u8("BINGET index")? as usize;
                stack.push(Slot::V(memo_get(&memo, idx, offset)?));
            }
            b'j' => {
                let idx = r.u32("LONG_BINGET index")? as usize;
                stack.push(Slot::V(memo_get(&memo, idx, offset)?));
            }
            b'0' => {
                stack.pop().ok_or(PickleError::Malformed { offset, what: "POP on an empty stack".into() })?;
            }
            b'1' => {
                pop_mark(&mut stack, offset)?;
            }
            b'2' => {
                let v = top_container(&stack, offset)?;
                stack.push(Slot::V(v));
            }
            _ => return Err(PickleError::Unsupported { op, offset }),
        }
    }
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
        assert_eq!(decode_long(&[0xff]), Value::Int(-1));
        assert_eq!(decode_long(&[0x00, 0x01]), Value::Int(256));
        // 2**70
        assert_eq!(decode_long(&[0, 0, 0, 0, 0, 0, 0, 0, 0x40]), Value::BigInt { negative: false });
        // 2**63 - 1 in 9 bytes
        assert_eq!(decode_long(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00]), Value::Int(i64::MAX));
    }

    #[test]
    fn self_reference_is_safe() {
        // l = []; l.append(l)  → ]q\x00h\x00a.
        let p = parse(b"\x80\x02]q\x00h\x00a.").unwrap();
        let Value::List(i) = p.root else { panic!() };
        assert_eq!(p.items(&p.root).unwrap(), &[Value::List(i)]);
    }

    #[test]
    fn truncated_and_garbage() {
        assert!(matches!(parse(b"\x80\x04"), Err(PickleError::Truncated { .. })));
        assert!(parse(b"").is_err());
        assert!(parse(b"\x80\x02e.").is_err());
        assert!(parse(b"\x80\x02X\xff\xff\xff\xff").is_err());
    }
}
