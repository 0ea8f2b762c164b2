//! The arithmetic behind every number: a formula in words plus the input
//! values, so `--explain` can show how a byte count came about.

use serde::{Deserialize, Serialize};

/// One named input of a formula.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Term {
    pub name: String,
    pub value: String,
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

impl Explanation {
    pub fn new(formula: impl Into<String>) -> Self {
        Explanation { formula: formula.into(), terms: Vec::new(), note: None }
    }

    /// Add an input (builder style).
    pub fn term(mut self, name: impl Into<String>, value: impl ToString) -> Self {
        self.terms.push(Term { name: name.into(), value: value.to_string() });
        self
    }

    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }
}
