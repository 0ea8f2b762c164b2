//! GGUF metadata values.

/// Value type ids of GGUF metadata (`enum gguf_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    Bool,
    String,
    Array,
    U64,
    I64,
    F64,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<ValueType> {
        Some(match id {
            0 => ValueType::U8,
            1 => ValueType::I8,
            2 => ValueType::U16,
            3 => ValueType::I16,
            4 => ValueType::U32,
            5 => ValueType::I32,
            6 => ValueType::F32,
            7 => ValueType::Bool,
            8 => ValueType::String,
            9 => ValueType::Array,
            10 => ValueType::U64,
            11 => ValueType::I64,
            12 => ValueType::F64,
            _ => return None,
        })
    }

    pub fn id(self) -> u32 {
        match self {
            ValueType::U8 => 0,
            ValueType::I8 => 1,
            ValueType::U16 => 2,
            ValueType::I16 => 3,
            ValueType::U32 => 4,
            ValueType::I32 => 5,
            ValueType::F32 => 6,
            ValueType::Bool => 7,
            ValueType::String => 8,
            ValueType::Array => 9,
            ValueType::U64 => 10,
            ValueType::I64 => 11,
            ValueType::F64 => 12,
        }
    }

    /// Fewest bytes one value of this type takes (a string: its length field).
    pub fn min_size(self) -> u64 {
        match self {
            ValueType::U8 | ValueType::I8 | ValueType::Bool => 1,
            ValueType::U16 | ValueType::I16 => 2,
            ValueType::U32 | ValueType::I32 | ValueType::F32 => 4,
            ValueType::U64 | ValueType::I64 | ValueType::F64 | ValueType::String => 8,
            ValueType::Array => 12,
        }
    }
}

/// A metadata value. Integers widen to 64 bits; long arrays keep only
/// their length.
#[derive(Debug, Clone, PartialEq)]
pub enum MetaValue {
    U64(u64),
    I64(i64),
    F64(f64),
    Bool(bool),
    String(String),
    Array { elem: ValueType, len: u64, values: Option<Vec<MetaValue>> },
}

impl MetaValue {
    /// A non-negative integer (booleans are not integers).
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            MetaValue::U64(v) => Some(*v),
            MetaValue::I64(v) if *v >= 0 => Some(*v as u64),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            MetaValue::F64(v) => Some(*v),
            MetaValue::U64(v) => Some(*v as f64),
            MetaValue::I64(v) => Some(*v as f64),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetaValue::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            MetaValue::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// Length of an array value.
    pub fn array_len(&self) -> Option<u64> {
        match self {
            MetaValue::Array { len, .. } => Some(*len),
            _ => None,
        }
    }

    /// Elements of a kept integer array.
    pub fn as_u64_vec(&self) -> Option<Vec<u64>> {
        match self {
            MetaValue::Array { values: Some(v), .. } => v.iter().map(MetaValue::as_u64).collect(),
            _ => None,
        }
    }

    /// Elements of a kept boolean array (integers 0/1 accepted).
    pub fn as_bool_vec(&self) -> Option<Vec<bool>> {
        match self {
            MetaValue::Array { values: Some(v), .. } => {
                v.iter().map(|x| x.as_bool().or_else(|| x.as_u64().map(|n| n != 0))).collect()
            }
            _ => None,
        }
    }

    /// Short rendering for messages.
    pub fn describe(&self) -> String {
        match self {
            MetaValue::U64(v) => v.to_string(),
            MetaValue::I64(v) => v.to_string(),
            MetaValue::F64(v) => v.to_string(),
            MetaValue::Bool(b) => b.to_string(),
            MetaValue::String(s) => format!("\"{}\"", s.chars().take(40).collect::<String>()),
            MetaValue::Array { elem, len, .. } => format!("array of {len} {elem:?}"),
        }
    }
}
