//! LoRA target modules: one parser for both spellings, PEFT's JSON
//! `target_modules` (adapter_config.json, calibration cases) and the
//! `--lora-targets` text of the command line.
//!
//! PEFT (`tuners/lora/config.py`, `check_target_module_exists`): a list
//! names modules by their last component(s); the string `"all-linear"`
//! (`INCLUDE_LINEAR_LAYERS_SHORTHAND`) is every linear but the output head;
//! any other string is a regular expression matched with `re.fullmatch`
//! against full module names. The text form spells the same three things
//! `q_proj,v_proj`, `all-linear` (or `all`) and `re:PATTERN`. Whether the
//! names exist in a model is core's check (`workload::validate`).

use crate::error::IngestError;
use crate::json::Obj;
use serde_json::Value;
use vramfit_core::train::LoraTargets;

/// What a spelling said, before the shared rules.
enum Spelled<'a> {
    AllLinear,
    Pattern(&'a str),
    Names(Vec<&'a str>),
}

/// A target list that breaks a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetsError {
    /// a regular expression with nothing in it
    EmptyPattern,
    /// a module name that is empty
    EmptyName,
    /// a list without names
    NoNames,
}

impl std::fmt::Display for TargetsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TargetsError::EmptyPattern => "an empty regular expression",
            TargetsError::EmptyName => "an empty module name",
            TargetsError::NoNames => "no module names",
        })
    }
}

impl std::error::Error for TargetsError {}

/// The rules every spelling shares.
fn targets(s: Spelled) -> Result<LoraTargets, TargetsError> {
    match s {
        Spelled::AllLinear => Ok(LoraTargets::AllLinear),
        Spelled::Pattern(p) if p.trim().is_empty() => Err(TargetsError::EmptyPattern),
        Spelled::Pattern(p) => Ok(LoraTargets::Regex(p.to_string())),
        Spelled::Names(n) if n.iter().any(|x| x.is_empty()) => Err(TargetsError::EmptyName),
        Spelled::Names(n) if n.is_empty() => Err(TargetsError::NoNames),
        Spelled::Names(n) => Ok(LoraTargets::Modules(n.into_iter().map(str::to_string).collect())),
    }
}

/// `--lora-targets`: `q_proj,v_proj` (spaces and empty entries ignored),
/// `all-linear` or `all`, or `re:PATTERN` (PEFT's string form).
pub fn from_text(s: &str) -> Result<LoraTargets, TargetsError> {
    let s = s.trim();
    let spelled = if s.eq_ignore_ascii_case("all-linear") || s.eq_ignore_ascii_case("all") {
        Spelled::AllLinear
    } else if let Some(re) = s.strip_prefix("re:") {
        Spelled::Pattern(re)
    } else {
        Spelled::Names(s.split(',').map(str::trim).filter(|x| !x.is_empty()).collect())
    };
    targets(spelled)
}

/// PEFT's `target_modules` at `key` of `o`; `None` when absent or `null`
/// (each format says what that means).
pub fn from_json(o: &Obj, key: &str) -> Result<Option<LoraTargets>, IngestError> {
    let Some(v) = o.get(key) else { return Ok(None) };
    let spelled = match v {
        Value::String(s) if s == "all-linear" => Spelled::AllLinear,
        Value::String(s) => Spelled::Pattern(s),
        Value::Array(a) => Spelled::Names(
            a.iter()
                .map(|x| x.as_str().ok_or_else(|| o.bad(key, "module names (strings)", x)))
                .collect::<Result<_, _>>()?,
        ),
        other => return Err(o.bad(key, "a list of module names or \"all-linear\"", other)),
    };
    targets(spelled).map(Some).map_err(|e| {
        let expected = match e {
            TargetsError::EmptyPattern => "module names, a regular expression or \"all-linear\"",
            TargetsError::EmptyName => "module names (strings)",
            TargetsError::NoNames => "at least one module name",
        };
        o.bad(key, expected, v)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn json_targets(v: Value) -> Result<Option<LoraTargets>, String> {
        let doc = json!({ "target_modules": v });
        let o = Obj::root(&doc, "adapter_config.json", "(top level)").unwrap();
        from_json(&o, "target_modules").map_err(|e| e.to_string())
    }

    #[test]
    fn both_spellings_mean_the_same_targets() {
        let qv = LoraTargets::Modules(vec!["q_proj".into(), "v_proj".into()]);
        assert_eq!(from_text("q_proj, v_proj,"), Ok(qv.clone()));
        assert_eq!(json_targets(json!(["q_proj", "v_proj"])), Ok(Some(qv)));
        assert_eq!(from_text("ALL-linear"), Ok(LoraTargets::AllLinear));
        assert_eq!(from_text("all"), Ok(LoraTargets::AllLinear));
        assert_eq!(json_targets(json!("all-linear")), Ok(Some(LoraTargets::AllLinear)));
        let re = LoraTargets::Regex(r".*\.(q|v)_proj".into());
        assert_eq!(from_text(r"re:.*\.(q|v)_proj"), Ok(re.clone()));
        assert_eq!(json_targets(json!(r".*\.(q|v)_proj")), Ok(Some(re)));
        assert_eq!(json_targets(json!(null)), Ok(None));
    }

    #[test]
    fn the_shared_rules_refuse_empty_targets() {
        assert_eq!(from_text(" , "), Err(TargetsError::NoNames));
        assert_eq!(from_text("re: "), Err(TargetsError::EmptyPattern));
        let e = json_targets(json!([])).unwrap_err();
        assert!(e.contains("expected at least one module name"), "{e}");
        let e = json_targets(json!(["q_proj", ""])).unwrap_err();
        assert!(e.contains("expected module names (strings)"), "{e}");
        let e = json_targets(json!(["q_proj", 3])).unwrap_err();
        assert!(e.contains("expected module names (strings), found 3"), "{e}");
        let e = json_targets(json!("  ")).unwrap_err();
        assert!(e.contains("a regular expression"), "{e}");
        let e = json_targets(json!(7)).unwrap_err();
        assert!(e.contains("a list of module names or \"all-linear\""), "{e}");
    }
}
