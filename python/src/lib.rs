//! `vramfit._native`: the CLI's commands in-process, for the Python package
//! (python/vramfit). No figure is computed here: a call is the CLI's own
//! command line (built by `vramfit_cli::cmd::mcp::argv` from keyword
//! arguments named as the flags), parsed by clap with the CLI's
//! definitions and run by `vramfit_cli::run`; the answer is its `--json`
//! text and exit code. `main` is `src/main.rs` of the CLI, for the
//! `vramfit` console script and `python -m vramfit`.

mod ranks;

use pyo3::prelude::*;
use serde_json::{json, Map, Value};
use std::ffi::OsString;
use std::io::Write;
use vramfit_cli::cmd::mcp::{self, CallError, Kind, Tool};
use vramfit_cli::{cmd, error_text, exit_code, to_stderr, Cli, EXIT_BAD_INPUT, EXIT_INTERNAL};

/// What a call gives Python: (0, json text, None, exit code) for a document,
/// (2, message, field, 2) for bad input, (3, message, None, 3) for an
/// internal error. Python raises its own exception types from it.
type Answer = (u8, String, Option<String>, u8);

fn tool(name: &str) -> PyResult<Tool> {
    Tool::from_name(name).ok_or_else(|| pyo3::exceptions::PyKeyError::new_err(format!("no vramfit tool {name}")))
}

fn answer(t: Tool, args: &Map<String, Value>, json: bool) -> Answer {
    let mut argv = match mcp::argv(t, args) {
        Ok(a) => a,
        Err(e) => return error_answer(e),
    };
    if !json {
        argv.retain(|a| a != "--json");
    }
    let cli = match <Cli as clap::Parser>::try_parse_from(cmd::gguf::llama_cpp_short_flags(
        argv.into_iter().map(OsString::from),
    )) {
        Ok(c) => c,
        Err(e) => {
            let text = e.render().to_string();
            let message = text.trim_end().strip_prefix("error: ").unwrap_or(text.trim_end()).to_string();
            return (EXIT_BAD_INPUT, message, mcp::field_of_clap(t, &e), EXIT_BAD_INPUT);
        }
    };
    match vramfit_cli::run(cli.command) {
        Ok(out) => (0, out.stdout, None, out.code),
        Err(e) => {
            let code = exit_code(&e);
            let field = if code == EXIT_INTERNAL { None } else { mcp::field_of_error(&e) };
            (code, error_text(&e), field, code)
        }
    }
}

fn error_answer(e: CallError) -> Answer {
    match e {
        CallError::Input(i) => (EXIT_BAD_INPUT, i.message, i.field, EXIT_BAD_INPUT),
        CallError::Internal(m) => (EXIT_INTERNAL, m, None, EXIT_INTERNAL),
    }
}

/// Python values (str, int, float, bool, None, lists of them) as JSON;
/// `_call._value` has already turned paths and numpy scalars into these.
fn to_json(name: &str, v: &Bound<'_, PyAny>) -> Result<Value, String> {
    use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyString, PyTuple};
    if v.is_none() {
        Ok(Value::Null)
    } else if let Ok(b) = v.cast::<PyBool>() {
        Ok(Value::Bool(b.is_true()))
    } else if v.cast::<PyInt>().is_ok() {
        if let Ok(u) = v.extract::<u64>() {
            Ok(json!(u))
        } else if let Ok(i) = v.extract::<i64>() {
            Ok(json!(i))
        } else {
            Err(format!("{name}: {v} is too large"))
        }
    } else if let Ok(f) = v.cast::<PyFloat>() {
        Ok(json!(f.value()))
    } else if v.cast::<PyString>().is_ok() {
        v.extract::<String>().map(Value::String).map_err(|e| format!("{name}: {e}"))
    } else if v.cast::<PyList>().is_ok() || v.cast::<PyTuple>().is_ok() {
        v.try_iter()
            .map_err(|e| format!("{name}: {e}"))?
            .map(|i| i.map_err(|e| format!("{name}: {e}")).and_then(|i| to_json(name, &i)))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array)
    } else {
        Err(format!(
            "{name}: cannot pass a {} as a flag value",
            v.get_type().name().map(|n| n.to_string()).unwrap_or_default()
        ))
    }
}

/// A JSON document as Python dicts, lists and scalars (no `json` module at import).
fn to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    use pyo3::types::{PyDict, PyList};
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => pyo3::types::PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_u64(), n.as_i64(), n.as_f64()) {
            (Some(u), _, _) => u.into_pyobject(py)?.into_any(),
            (None, Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, None, Some(f)) => f.into_pyobject(py)?.into_any(),
            _ => py.None().into_bound(py),
        },
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        Value::Array(a) => {
            let l = PyList::empty(py);
            for i in a {
                l.append(to_py(py, i)?)?;
            }
            l.into_any()
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, i) in m {
                d.set_item(k, to_py(py, i)?)?;
            }
            d.into_any()
        }
    })
}

fn arguments(args: &Bound<'_, pyo3::types::PyDict>) -> Result<Map<String, Value>, (String, String)> {
    let mut m = Map::new();
    for (k, v) in args.iter() {
        let key: String =
            k.extract().map_err(|_| ("arguments".to_string(), "keyword names must be strings".to_string()))?;
        let value = to_json(&key, &v).map_err(|e| (key.clone(), e))?;
        m.insert(key, value);
    }
    Ok(m)
}

/// Run tool `name` with keyword arguments `args` (a dict): (0, the `--json`
/// document as a dict, None, exit code), or (2, message, field, 2) for bad
/// input, (3, message, None, 3) for an internal error.
#[pyfunction]
fn call<'py>(
    py: Python<'py>,
    name: &str,
    args: &Bound<'py, pyo3::types::PyDict>,
) -> PyResult<(u8, Bound<'py, PyAny>, Option<String>, u8)> {
    let t = tool(name)?;
    let args = match arguments(args) {
        Ok(a) => a,
        Err((field, m)) => return Ok((EXIT_BAD_INPUT, m.into_pyobject(py)?.into_any(), Some(field), EXIT_BAD_INPUT)),
    };
    // the command may read files or the network: other Python threads run meanwhile
    let (status, text, field, code) = py.detach(move || answer(t, &args, true));
    if status != 0 {
        return Ok((status, text.into_pyobject(py)?.into_any(), field, code));
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(doc) => Ok((0, to_py(py, &doc)?, None, code)),
        Err(e) => {
            let m = format!("{name} --json printed something that is not JSON: {e}");
            Ok((EXIT_INTERNAL, m.into_pyobject(py)?.into_any(), None, EXIT_INTERNAL))
        }
    }
}

/// The same, for the command's text report (what the CLI prints without `--json`).
#[pyfunction]
fn call_text(py: Python<'_>, name: &str, args: &Bound<'_, pyo3::types::PyDict>) -> PyResult<Answer> {
    let t = tool(name)?;
    let args = match arguments(args) {
        Ok(a) => a,
        Err((field, m)) => return Ok((EXIT_BAD_INPUT, m, Some(field), EXIT_BAD_INPUT)),
    };
    Ok(py.detach(move || answer(t, &args, false)))
}

/// The cross-rank report (`ranks.rs`) of `[(rank, diagnose --json text)]`, as JSON text.
#[pyfunction]
fn merge_ranks(ranks: Vec<(u64, String)>) -> PyResult<String> {
    let docs = ranks
        .into_iter()
        .map(|(r, t)| serde_json::from_str::<Value>(&t).map(|v| (r, v)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("a rank's diagnosis is not JSON: {e}")))?;
    let report = ranks::merge(&docs).map_err(pyo3::exceptions::PyValueError::new_err)?;
    serde_json::to_string(&report).map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))
}

/// The arguments of tool `name` as JSON (for signatures, docstrings and stubs).
#[pyfunction]
fn params(name: &str) -> PyResult<String> {
    let t = tool(name)?;
    let ps: Vec<Value> = mcp::params(t)
        .into_iter()
        .map(|p| {
            let (kind, choices) = match &p.kind {
                Kind::Bool => ("bool", Vec::new()),
                Kind::Int => ("int", Vec::new()),
                Kind::Tokens => ("tokens", Vec::new()),
                Kind::Float => ("float", Vec::new()),
                Kind::Choice(c) => ("choice", c.clone()),
                Kind::Str => ("str", Vec::new()),
            };
            json!({
                "name": p.name, "flag": p.long.map(|l| format!("--{l}")), "aliases": p.aliases,
                "kind": kind, "choices": choices, "many": p.many, "required": p.required,
                "help": p.help, "default": p.default,
            })
        })
        .collect();
    Ok(json!({"name": t.name(), "command": t.path().join(" "), "about": t.description(), "params": ps}).to_string())
}

/// The tool names, in order.
#[pyfunction]
fn tools() -> Vec<&'static str> {
    Tool::ALL.iter().map(|t| t.name()).collect()
}

/// The `vramfit` command line, as the CLI's `main` runs it: stdout and
/// stderr written to file descriptors 1 and 2, the exit code returned.
#[pyfunction]
fn main(py: Python<'_>, argv: Vec<OsString>) -> u8 {
    py.detach(move || cli_main(argv))
}

/// crates/cli/src/main.rs, returning the exit code instead of exiting.
fn cli_main(argv: Vec<OsString>) -> u8 {
    use vramfit_report::format::shown_lines;
    let argv = cmd::gguf::llama_cpp_short_flags(argv);
    let cli = match <Cli as clap::Parser>::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            // what clap's parse_from prints before it exits (help and version go to stdout, exit 0)
            let e = cmd::gguf::fit_suggestion(&argv, e);
            let _ = e.print();
            let _ = std::io::stdout().flush();
            return u8::try_from(e.exit_code()).unwrap_or(EXIT_BAD_INPUT);
        }
    };
    match vramfit_cli::run(cli.command) {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            match stdout.write_all(shown_lines(&out.stdout).as_bytes()).and_then(|_| stdout.flush()) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                Err(e) => {
                    to_stderr(&format!("vramfit: cannot write output: {e}"));
                    return EXIT_BAD_INPUT;
                }
            }
            out.code
        }
        Err(e) => {
            to_stderr(&format!("vramfit: error: {}", error_text(&e)));
            exit_code(&e)
        }
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(call, m)?)?;
    m.add_function(wrap_pyfunction!(call_text, m)?)?;
    m.add_function(wrap_pyfunction!(merge_ranks, m)?)?;
    m.add_function(wrap_pyfunction!(params, m)?)?;
    m.add_function(wrap_pyfunction!(tools, m)?)?;
    m.add_function(wrap_pyfunction!(main, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
