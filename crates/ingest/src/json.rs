//! The one reader of fields of a JSON document, for every hand-made JSON
//! parser of the crate (DeepSpeed and PEFT configs, calibration cases, the
//! published set, `config.json`): what "a non-negative integer", "a string",
//! "a number" mean, how an absent or `null` field reads, and the one
//! [`IngestError::BadField`] that names the file, the dotted field, what was
//! expected and what was found (shortened, control characters escaped).
//!
//! It does not decide what a field means: each parser keeps its own keys,
//! defaults and rules.

use crate::error::IngestError;
use serde_json::{Map, Value};

/// A value as an error shows it: a string quoted (its first 60
/// characters), anything else as JSON (its first 60 characters), control
/// characters escaped.
pub fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("\"{}\"", s.chars().take(60).collect::<String>().escape_debug()),
        other => other.to_string().chars().take(60).collect::<String>().escape_debug().to_string(),
    }
}

/// What kind of JSON value `v` is, for a message (`a string`, `an array`).
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A non-negative integer, written as an integer or as a float with no
/// fraction (`5e8`, `4096.0`, as Python's `json` and DeepSpeed's configs
/// write them), below 2^64; `None` for anything else.
pub fn as_count(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            // 2^64 as f64 is exact; anything at or above it does not fit
            n.as_f64().filter(|x| x.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(x)).map(|x| x as u64)
        }),
        _ => None,
    }
}

/// Parse `bytes` as JSON (an [`IngestError::Json`] naming `origin` if not).
pub fn parse(bytes: &[u8], origin: &str) -> Result<Value, IngestError> {
    serde_json::from_slice(bytes).map_err(|e| IngestError::Json { file: origin.into(), reason: e.to_string() })
}

/// A JSON object of a document and the dotted path that reached it, for
/// errors. Absent and `null` fields read the same: not given.
#[derive(Clone, Copy)]
pub struct Obj<'a> {
    map: &'a Map<String, Value>,
    path: &'a str,
    origin: &'a str,
}

impl<'a> Obj<'a> {
    /// The top-level object of a document; `top` names it in the error when
    /// `v` is not an object (`(top level)`, `(line)`).
    pub fn root(v: &'a Value, origin: &'a str, top: &str) -> Result<Obj<'a>, IngestError> {
        match v {
            Value::Object(map) => Ok(Obj { map, path: "", origin }),
            other => Err(bad_field(origin, top, "a JSON object", other)),
        }
    }

    /// An object found at `path` (a dotted path for errors).
    pub fn at(map: &'a Map<String, Value>, path: &'a str, origin: &'a str) -> Obj<'a> {
        Obj { map, path, origin }
    }

    /// The document's name in errors.
    pub fn origin(&self) -> &'a str {
        self.origin
    }

    /// The object's keys and values.
    pub fn map(&self) -> &'a Map<String, Value> {
        self.map
    }

    /// The dotted name of `key` in this object.
    pub fn field(&self, key: &str) -> String {
        if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        }
    }

    /// `key` holds `found`, which is not what was `expected`.
    pub fn bad(&self, key: &str, expected: &str, found: &Value) -> IngestError {
        bad_field(self.origin, &self.field(key), expected, found)
    }

    /// `key` must be given.
    pub fn missing(&self, key: &str) -> IngestError {
        IngestError::Invalid { file: self.origin.into(), reason: format!("missing field '{}'", self.field(key)) }
    }

    /// The value of `key`; `None` when absent or `null`.
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub fn str(&self, key: &str) -> Result<Option<&'a str>, IngestError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.bad(key, "a string", v)),
        }
    }

    pub fn req_str(&self, key: &str) -> Result<&'a str, IngestError> {
        self.str(key)?.ok_or_else(|| self.missing(key))
    }

    /// A non-negative integer ([`as_count`]).
    pub fn u64(&self, key: &str) -> Result<Option<u64>, IngestError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => as_count(v).map(Some).ok_or_else(|| self.bad(key, "a non-negative integer", v)),
        }
    }

    /// A finite number.
    pub fn f64(&self, key: &str) -> Result<Option<f64>, IngestError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() => Ok(Some(x)),
                _ => Err(self.bad(key, "a finite number", v)),
            },
        }
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>, IngestError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.bad(key, "true or false", v)),
        }
    }

    /// A nested object, reported under `path` (its dotted name).
    pub fn obj(&self, key: &str, path: &'a str) -> Result<Option<Obj<'a>>, IngestError> {
        self.obj_expecting(key, path, "an object")
    }

    /// [`Obj::obj`] with what the error says was `expected` (`an object with "type"`).
    pub fn obj_expecting(&self, key: &str, path: &'a str, expected: &str) -> Result<Option<Obj<'a>>, IngestError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Obj { map, path, origin: self.origin })),
            Some(v) => Err(self.bad(key, expected, v)),
        }
    }

    /// A value parsed by `FromStr`, the error naming the field and the accepted values.
    pub fn parsed<T: std::str::FromStr<Err = String>>(&self, key: &str) -> Result<Option<T>, IngestError> {
        match self.str(key)? {
            None => Ok(None),
            Some(s) => s.parse::<T>().map(Some).map_err(|e| self.bad(key, &e, &Value::String(s.into()))),
        }
    }

    /// A count the source may give as a number or explain in words (`"vLLM default (not printed)"`).
    pub fn count_or_words(&self, key: &str) -> Result<Option<u64>, IngestError> {
        match self.get(key) {
            None | Some(Value::String(_)) => Ok(None),
            Some(v) => as_count(v).map(Some).ok_or_else(|| self.bad(key, "a non-negative integer or words", v)),
        }
    }

    /// A flag the source may give as true/false or explain in words.
    pub fn bool_or_words(&self, key: &str) -> Result<Option<bool>, IngestError> {
        match self.get(key) {
            None | Some(Value::String(_)) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.bad(key, "true, false or words", v)),
        }
    }

    /// A number the source may give in words (`"not stated"`).
    pub fn number_or_words(&self, key: &str) -> Result<Option<f64>, IngestError> {
        match self.get(key) {
            None | Some(Value::String(_)) => Ok(None),
            Some(_) => self.f64(key),
        }
    }
}

/// The one "field holds the wrong thing" error.
pub fn bad_field(origin: &str, field: &str, expected: &str, found: &Value) -> IngestError {
    IngestError::BadField { file: origin.into(), field: field.into(), expected: expected.into(), found: shown(found) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_accept_integral_floats_only() {
        assert_eq!(as_count(&json!(4096)), Some(4096));
        assert_eq!(as_count(&json!(5e8)), Some(500_000_000));
        assert_eq!(as_count(&json!(4096.0)), Some(4096));
        for bad in [json!(-1), json!(1.5), json!(-0.5), json!(1e20), json!("8"), json!(null), json!(true)] {
            assert_eq!(as_count(&bad), None, "{bad}");
        }
    }

    #[test]
    fn fields_name_the_dotted_path_and_show_the_value_escaped() {
        let v = json!({"a": {"b": "x\u{1b}[2J", "n": -3}, "s": null});
        let o = Obj::root(&v, "f.json", "(top level)").unwrap();
        assert_eq!(o.str("s").unwrap(), None, "null reads as absent");
        let a = o.obj("a", "a").unwrap().unwrap();
        let e = a.u64("n").unwrap_err().to_string();
        assert_eq!(e, "f.json: field 'a.n': expected a non-negative integer, found -3");
        let e = a.u64("b").unwrap_err().to_string();
        assert_eq!(e, "f.json: field 'a.b': expected a non-negative integer, found \"x\\u{1b}[2J\"");
        assert_eq!(a.missing("c").to_string(), "f.json: missing field 'a.c'");
        let long = json!("y".repeat(100));
        assert_eq!(shown(&long).len(), 62);
        let e = Obj::root(&json!([1]), "f.json", "(top level)").err().unwrap().to_string();
        assert_eq!(e, "f.json: field '(top level)': expected a JSON object, found [1]");
    }
}
