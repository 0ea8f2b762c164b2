//! The arithmetic behind every number: a formula in words plus the input
//! values, so `--explain` can show how a byte count came about.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An input's value, kept in its own type until it is rendered: a count
/// (bytes, parameters, tokens), a real number (a fraction, a factor) or text
/// (a layout, a list of names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    Count(u64),
    Number(f64),
    Flag(bool),
    Text(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Count(n) => write!(f, "{n}"),
            Value::Number(x) => write!(f, "{x}"),
            Value::Flag(b) => write!(f, "{b}"),
            Value::Text(t) => f.write_str(t),
        }
    }
}

impl From<u64> for Value {
    fn from(n: u64) -> Value {
        Value::Count(n)
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Value {
        Value::Count(n.into())
    }
}

impl From<usize> for Value {
    fn from(n: usize) -> Value {
        // usize is at most 64 bits on every target vramfit builds for
        Value::Count(u64::try_from(n).unwrap_or(u64::MAX))
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Flag(b)
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::Number(x)
    }
}

impl From<&str> for Value {
    fn from(t: &str) -> Value {
        Value::Text(t.to_string())
    }
}

impl From<String> for Value {
    fn from(t: String) -> Value {
        Value::Text(t)
    }
}

impl From<&String> for Value {
    fn from(t: &String) -> Value {
        Value::Text(t.clone())
    }
}

/// One named input of a formula.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Term {
    pub name: String,
    pub value: Value,
}

/// How a number was computed.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Explanation {
    /// e.g. `2 × layers × kv_heads × head_dim × bytes × tokens`
    pub formula: String,
    pub terms: Vec<Term>,
    /// assumption or source, when one matters
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// An explanation held by a value, copied into a report (the reports' JSON
/// is this type's serde form).
impl From<&Explanation> for Explanation {
    fn from(e: &Explanation) -> Explanation {
        e.clone()
    }
}

impl Explanation {
    pub fn new(formula: impl Into<String>) -> Self {
        Explanation { formula: formula.into(), terms: Vec::new(), note: None }
    }

    /// Add an input (builder style).
    pub fn term(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.terms.push(Term { name: name.into(), value: value.into() });
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_type_and_render_as_before() {
        let e = Explanation::new("x").term("bytes", 12_952_010_752u64).term("margin", 0.2).term("layout", "TP 1");
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["terms"][0]["value"], serde_json::json!(12_952_010_752u64));
        assert_eq!(v["terms"][1]["value"], serde_json::json!(0.2));
        assert_eq!(v["terms"][2]["value"], serde_json::json!("TP 1"));
        let shown: Vec<String> = e.terms.iter().map(|t| t.value.to_string()).collect();
        assert_eq!(shown, ["12952010752", "0.2", "TP 1"]);
    }
}
