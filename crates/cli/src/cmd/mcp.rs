//! `vramfit mcp`: a Model Context Protocol server on stdio, and the
//! keyword-argument front end it shares with the Python package.
//!
//! A tool call is a JSON object of arguments named as the command's flags
//! (`gpu`, `lora_rank` or `lora-rank`, the positional `model` / `file`).
//! [`argv`] turns it into the command line the CLI would get, clap parses it
//! with the CLI's own definitions, and the command's own `run` answers with
//! its `--json` document and exit code ([`call`]). The JSON Schema of each
//! tool's arguments ([`input_schema`]) is read from the same definitions, so
//! a flag added to the CLI appears here and in Python with no code to keep
//! in step. Nothing here computes a figure.
//!
//! Protocol: revision 2025-11-25 of the Model Context Protocol
//! (modelcontextprotocol.io/specification/2025-11-25: basic/lifecycle,
//! basic/transports "stdio", server/tools). Messages are JSON-RPC 2.0, one
//! per line on stdin and stdout, never with an embedded newline; stdout
//! carries nothing else (notes of the commands go to stderr, as the
//! transport allows). A client asking for an older revision that this
//! server also speaks (2025-06-18, 2025-03-26, 2024-11-05: the tools
//! messages used here did not change) gets it back; any other request is
//! answered with 2025-11-25 and the client decides. Tool failures the
//! caller can fix are results with `isError: true` naming the argument
//! (`_meta.field`); unknown methods and tools are JSON-RPC errors.

use crate::{Cli, Command};
use clap::builder::ArgAction;
use clap::{CommandFactory, Parser};
use serde_json::{json, Map, Value};
use std::any::TypeId;
use std::io::{BufRead, Write};

/// The protocol revision this server follows, and the older ones it accepts.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
const OLDER_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];

/// A line longer than this is refused (a tool call is a few hundred bytes).
const MAX_MESSAGE_BYTES: usize = 1 << 20;

#[derive(clap::Args, Debug)]
pub struct McpArgs {}

/// A command exposed as a tool (and as a function of the Python package).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    Estimate,
    Plan,
    Diagnose,
    MigPlan,
    Check,
}

impl Tool {
    pub const ALL: [Tool; 5] = [Tool::Estimate, Tool::Plan, Tool::Diagnose, Tool::MigPlan, Tool::Check];

    /// The tool's name (MCP) and function name (Python).
    pub fn name(self) -> &'static str {
        match self {
            Tool::Estimate => "estimate",
            Tool::Plan => "plan",
            Tool::Diagnose => "diagnose",
            Tool::MigPlan => "mig_plan",
            Tool::Check => "check",
        }
    }

    pub fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The subcommand path on the command line.
    pub fn path(self) -> &'static [&'static str] {
        match self {
            Tool::Estimate => &["estimate"],
            Tool::Plan => &["plan"],
            Tool::Diagnose => &["diagnose"],
            Tool::MigPlan => &["mig", "plan"],
            Tool::Check => &["check"],
        }
    }

    /// One line on what the tool answers (the subcommand's own `about`).
    pub fn description(self) -> String {
        let about = self.command().get_about().map(|s| s.to_string()).unwrap_or_default();
        let detail = match self {
            Tool::Estimate => "Returns the `vramfit estimate --json` document (docs/schema.md): per-GPU memory by category; with `gpu`, `fit.fits` and `fit.verdict`.",
            Tool::Plan => "Returns the `vramfit plan --json` document (docs/plan.md): ranked setups, the recommended one and why.",
            Tool::Diagnose => "Returns the `vramfit diagnose --json` document (docs/diagnose.md) for a file on this machine: an OOM log, memory_summary() output, a memory snapshot pickle or a training script.",
            Tool::MigPlan => "Returns the `vramfit mig plan --json` document (docs/mig.md).",
            Tool::Check => "Returns the `vramfit check --json` document (docs/check.md); with no file, the local GPUs through NVML.",
        };
        format!("{about}. {detail} `exit_code` is the CLI's exit code (docs/exit-codes.md).")
    }

    /// The clap definition of the subcommand.
    pub fn command(self) -> clap::Command {
        let mut c = Cli::command();
        c.build();
        let mut cur = c;
        for part in self.path() {
            cur = cur.find_subcommand(part).expect("the tool's subcommand exists").clone();
        }
        cur
    }
}

/// Flags that choose another output than the JSON document, write files,
/// or list catalogues: the tools always answer with `--json`.
const NOT_ARGUMENTS: [&str; 12] = [
    "lang",
    "json",
    "explain",
    "wide",
    "svg",
    "svg_lang",
    "emit",
    "config_name",
    "list_presets",
    "list_gpus",
    "help",
    "version",
];

/// What kind of value an argument takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// a switch: `true` gives the flag
    Bool,
    /// a non-negative integer
    Int,
    /// a token length: an integer, or a string such as `128k` (k = 1024 tokens)
    Tokens,
    Float,
    /// one of these words
    Choice(Vec<String>),
    Str,
}

/// One argument of a tool, read from the CLI's definition.
#[derive(Debug, Clone)]
pub struct Param {
    /// the argument's name: the flag with `_` for `-` (`lora_rank`), or the positional's name (`model`)
    pub name: String,
    /// `--flag` (None for a positional)
    pub long: Option<String>,
    /// other accepted names, as the flag's aliases (`seq` for `context`)
    pub aliases: Vec<String>,
    pub kind: Kind,
    /// takes several values: a list (repeated flag, or a comma list)
    pub many: bool,
    pub required: bool,
    pub help: String,
    /// the value clap fills in when the argument is absent
    pub default: Option<String>,
}

impl Param {
    /// The JSON Schema of the argument's value.
    pub fn schema(&self) -> Value {
        let item = match &self.kind {
            Kind::Bool => json!({"type": "boolean"}),
            Kind::Int => json!({"type": "integer", "minimum": 0}),
            Kind::Tokens => json!({"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}]}),
            Kind::Float => json!({"type": "number"}),
            Kind::Choice(c) => json!({"type": "string", "enum": c}),
            Kind::Str => json!({"type": "string"}),
        };
        let mut s = if self.many { json!({"anyOf": [item.clone(), {"type": "array", "items": item}]}) } else { item };
        let mut help = self.help.clone();
        if let Some(d) = &self.default {
            if !help.contains("[default") {
                help.push_str(&format!(" [default: {d}]"));
            }
        }
        if let Some(l) = &self.long {
            help.push_str(&format!(" (CLI: --{l})"));
        }
        s["description"] = Value::String(help);
        s
    }
}

fn kind_of(arg: &clap::Arg) -> Kind {
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return Kind::Bool;
    }
    let choices: Vec<String> =
        arg.get_possible_values().iter().filter(|p| !p.is_hide_set()).map(|p| p.get_name().to_string()).collect();
    if !choices.is_empty() {
        return Kind::Choice(choices);
    }
    // the token-length flags (`--context 128k`) name their value TOKENS
    if arg.get_value_names().is_some_and(|n| n.len() == 1 && n[0] == "TOKENS") {
        return Kind::Tokens;
    }
    let t = arg.get_value_parser().type_id();
    let ints =
        [TypeId::of::<u64>(), TypeId::of::<u32>(), TypeId::of::<u8>(), TypeId::of::<u16>(), TypeId::of::<usize>()];
    if ints.iter().any(|i| t == *i) {
        Kind::Int
    } else if t == TypeId::of::<f64>() || t == TypeId::of::<f32>() {
        Kind::Float
    } else {
        Kind::Str
    }
}

/// The arguments of a tool, in the CLI's order (positionals first).
pub fn params(tool: Tool) -> Vec<Param> {
    let cmd = tool.command();
    let mut out: Vec<Param> = Vec::new();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if NOT_ARGUMENTS.contains(&id) || arg.is_hide_set() {
            continue;
        }
        if matches!(arg.get_action(), ArgAction::Help | ArgAction::HelpShort | ArgAction::HelpLong | ArgAction::Version)
        {
            continue;
        }
        let long = arg.get_long().map(str::to_string);
        let name = match &long {
            Some(l) => l.replace('-', "_"),
            None => id.to_string(),
        };
        let aliases =
            arg.get_all_aliases().unwrap_or_default().into_iter().map(|a| a.replace('-', "_")).collect::<Vec<_>>();
        let many = matches!(arg.get_action(), ArgAction::Append) || arg.get_value_delimiter().is_some();
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let default = match arg.get_default_values() {
            [] => None,
            vs => Some(vs.iter().map(|v| v.to_string_lossy().into_owned()).collect::<Vec<_>>().join(",")),
        };
        out.push(Param {
            name,
            long,
            aliases,
            kind: kind_of(arg),
            many,
            required: arg.is_required_set(),
            help,
            default,
        });
    }
    out.sort_by_key(|p| p.long.is_some());
    out
}

/// The JSON Schema of a tool's arguments object.
pub fn input_schema(tool: Tool) -> Value {
    let ps = params(tool);
    let mut props = Map::new();
    for p in &ps {
        props.insert(p.name.clone(), p.schema());
    }
    let required: Vec<&str> = ps.iter().filter(|p| p.required).map(|p| p.name.as_str()).collect();
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

/// Bad input: the message the CLI would print, and the argument it is
/// about when a typed error names one (never guessed from the text).
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    pub message: String,
    pub field: Option<String>,
}

/// Why a call gave no document.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// exit 2: the caller can fix it
    Input(InputError),
    /// exit 3: vramfit broke one of its own invariants
    Internal(String),
}

impl CallError {
    fn input(message: impl Into<String>, field: Option<&str>) -> CallError {
        CallError::Input(InputError { message: message.into(), field: field.map(str::to_string) })
    }
}

fn find<'a>(ps: &'a [Param], key: &str) -> Option<&'a Param> {
    let k = key.replace('-', "_");
    ps.iter().find(|p| p.name == k || p.aliases.contains(&k))
}

fn scalar(p: &Param, v: &Value) -> Result<String, CallError> {
    let bad = |what: &str| CallError::input(format!("{}: {what}", p.name), Some(&p.name));
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => match p.kind {
            Kind::Int | Kind::Tokens if n.as_u64().is_none() => Err(bad(&format!("{n} is not a non-negative integer"))),
            _ => Ok(n.to_string()),
        },
        Value::Bool(_) => Err(bad("expects a value, not true/false")),
        Value::Null => Err(bad("expects a value, not null")),
        Value::Array(_) | Value::Object(_) => Err(bad("expects one value")),
    }
}

/// The command line for a tool call: the subcommand, `--json`, each
/// argument as `--flag=value` (so a value that starts with `-` stays a
/// value), and the positionals after `--`.
pub fn argv(tool: Tool, args: &Map<String, Value>) -> Result<Vec<String>, CallError> {
    let ps = params(tool);
    let mut flags: Vec<String> = Vec::new();
    let mut positionals: Vec<String> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for (key, value) in args {
        let Some(p) = find(&ps, key) else {
            let known: Vec<&str> = ps.iter().map(|p| p.name.as_str()).collect();
            return Err(CallError::input(
                format!("unknown argument '{key}' for {}: known arguments are {}", tool.name(), known.join(", ")),
                Some(key),
            ));
        };
        if seen.contains(&p.name) {
            return Err(CallError::input(format!("{} is given twice (once as an alias)", p.name), Some(&p.name)));
        }
        seen.push(p.name.clone());
        if value.is_null() {
            continue;
        }
        let Some(long) = &p.long else {
            positionals.push(scalar(p, value)?);
            continue;
        };
        if p.kind == Kind::Bool {
            match value {
                Value::Bool(true) => flags.push(format!("--{long}")),
                Value::Bool(false) => {}
                _ => return Err(CallError::input(format!("{}: expects true or false", p.name), Some(&p.name))),
            }
            continue;
        }
        let values: Vec<String> = match value {
            Value::Array(items) if p.many => items.iter().map(|i| scalar(p, i)).collect::<Result<_, _>>()?,
            Value::Array(_) => {
                return Err(CallError::input(format!("{}: expects one value, not a list", p.name), Some(&p.name)))
            }
            v => vec![scalar(p, v)?],
        };
        for v in values {
            flags.push(format!("--{long}={v}"));
        }
    }
    let mut out: Vec<String> = vec!["vramfit".into()];
    out.extend(tool.path().iter().map(|s| s.to_string()));
    out.push("--json".into());
    out.extend(flags);
    if !positionals.is_empty() {
        out.push("--".into());
        out.extend(positionals);
    }
    Ok(out)
}

/// The argument a clap error is about, from its typed context
/// (`ContextKind::InvalidArg` holds the argument as clap renders it, `--batch <BATCH>`),
/// matched against the command's own arguments.
pub fn field_of_clap(tool: Tool, e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let ContextValue::String(rendered) = e.get(ContextKind::InvalidArg)? else { return None };
    let cmd = tool.command();
    if let Some(arg) = cmd.get_arguments().find(|a| a.to_string() == *rendered) {
        return Some(match arg.get_long() {
            Some(l) => l.replace('-', "_"),
            None => arg.get_id().as_str().to_string(),
        });
    }
    // an unknown flag: clap names it as given (`--nope`)
    rendered.strip_prefix("--").map(|f| f.split(['=', ' ']).next().unwrap_or(f).replace('-', "_"))
}

/// The argument an error of a command is about, as a keyword (`gpu_util`):
/// the CLI's own reading of the error's chain (`crate::error::error_field`:
/// a flag error, a workload rule, a quantity). None when no input is named.
pub fn field_of_error(e: &anyhow::Error) -> Option<String> {
    crate::error::error_field(e).map(|f| f.request_key())
}

/// A clap error as the CLI prints it, without the terminal styling.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let text = text.trim_end();
    text.strip_prefix("error: ").unwrap_or(text).to_string()
}

/// Run a tool in-process: its `--json` document (parsed) and the CLI's
/// exit code (0 fits / ok, 1 does not fit / a failed check).
pub fn call(tool: Tool, args: &Map<String, Value>) -> Result<(Value, u8), CallError> {
    let argv = argv(tool, args)?;
    run_argv(tool, argv)
}

/// Run a command line built for `tool` (its `--json` is already there).
pub fn run_argv(tool: Tool, argv: Vec<String>) -> Result<(Value, u8), CallError> {
    let argv = crate::cmd::gguf::llama_cpp_short_flags(argv.into_iter().map(Into::into));
    let cli = match Cli::try_parse_from(&argv) {
        Ok(c) => c,
        Err(e) => {
            let e = crate::cmd::gguf::fit_suggestion(&argv, e);
            return Err(CallError::input(clap_message(&e), field_of_clap(tool, &e).as_deref()));
        }
    };
    if matches!(cli.command, Command::Mcp(_)) {
        return Err(CallError::Internal("a tool call parsed as `vramfit mcp`".into()));
    }
    match crate::run(cli.command) {
        Ok(out) => {
            let doc: Value = serde_json::from_str(&out.stdout).map_err(|e| {
                CallError::Internal(format!("{} --json printed something that is not JSON: {e}", tool.name()))
            })?;
            Ok((doc, out.code))
        }
        Err(e) if crate::exit_code(&e) == crate::EXIT_INTERNAL => Err(CallError::Internal(crate::error_text(&e))),
        Err(e) => Err(CallError::input(crate::error_text(&e), field_of_error(&e).as_deref())),
    }
}

/// `vramfit mcp`: serve until stdin closes.
pub fn run(_args: McpArgs) -> anyhow::Result<crate::Outcome> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    serve(stdin.lock(), stdout.lock())?;
    Ok(crate::Outcome::ok(String::new()))
}

/// Serve JSON-RPC messages, one per line, until `input` ends.
pub fn serve(mut input: impl BufRead, mut output: impl Write) -> anyhow::Result<()> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = std::io::Read::take(input.by_ref(), MAX_MESSAGE_BYTES as u64 + 1).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(());
        }
        let reply = if line.len() > MAX_MESSAGE_BYTES && !line.ends_with(b"\n") {
            skip_line(&mut input)?;
            Some(error(Value::Null, -32600, &format!("message longer than {MAX_MESSAGE_BYTES} bytes")))
        } else {
            let text = String::from_utf8_lossy(&line);
            if text.trim().is_empty() {
                continue;
            }
            handle_line(text.trim())
        };
        if let Some(r) = reply {
            let mut s = serde_json::to_string(&r)?;
            s.push('\n');
            match output.write_all(s.as_bytes()).and_then(|_| output.flush()) {
                Ok(()) => {}
                // the client went away
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Drop the rest of the current line without holding it (it may be endless).
fn skip_line(input: &mut impl BufRead) -> std::io::Result<()> {
    loop {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Ok(());
        }
        match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                input.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = buf.len();
                input.consume(n);
            }
        }
    }
}

fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn result(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The reply to one message (None for a notification).
pub fn handle_line(line: &str) -> Option<Value> {
    let msg: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return Some(error(Value::Null, -32700, &format!("parse error: {e}"))),
    };
    let Some(obj) = msg.as_object() else {
        return Some(error(Value::Null, -32600, "a message must be a JSON object (batches are not part of MCP)"));
    };
    let id = obj.get("id").cloned();
    let Some(method) = obj.get("method").and_then(Value::as_str) else {
        // a response to a request this server never sends, or garbage
        return id.map(|id| error(id, -32600, "a request needs a string 'method'"));
    };
    let Some(id) = id else {
        // notifications (notifications/initialized, cancelled, …) need no answer
        return None;
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Some(error(id, -32600, "'jsonrpc' must be \"2.0\""));
    }
    let params = obj.get("params").cloned().unwrap_or(Value::Object(Map::new()));
    Some(match method {
        "initialize" => result(id, initialize(&params)),
        "ping" => result(id, json!({})),
        "tools/list" => result(id, json!({"tools": tools()})),
        "tools/call" => match tool_call(&params) {
            Ok(r) => result(id, r),
            Err((code, m)) => error(id, code, &m),
        },
        other => error(id, -32601, &format!("method not found: {other}")),
    })
}

fn initialize(params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or(PROTOCOL_VERSION);
    let version = if asked == PROTOCOL_VERSION || OLDER_VERSIONS.contains(&asked) { asked } else { PROTOCOL_VERSION };
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "vramfit", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "GPU memory answers: `estimate` (will this model and workload fit this card), `plan` (the cheapest setup that fits), `diagnose` (why a run ran out of memory, from a log, memory_summary, snapshot pickle or script on this machine), `mig_plan` (MIG slices for services), `check` (is this machine what was rented). Arguments are the CLI's flags with _ for -. Every answer is the CLI's --json document plus exit_code.",
    })
}

/// The tools/list entries.
pub fn tools() -> Vec<Value> {
    Tool::ALL
        .iter()
        .map(|t| {
            json!({
                "name": t.name(),
                "title": format!("vramfit {}", t.path().join(" ")),
                "description": t.description(),
                "inputSchema": input_schema(*t),
                "annotations": {"readOnlyHint": true, "openWorldHint": matches!(t, Tool::Estimate | Tool::Plan)},
            })
        })
        .collect()
}

fn tool_call(params: &Value) -> Result<Value, (i64, String)> {
    let name = params.get("name").and_then(Value::as_str).ok_or((-32602, "tools/call needs a string 'name'".into()))?;
    let tool = Tool::from_name(name).ok_or_else(|| (-32602, format!("unknown tool: {name}")))?;
    let empty = Map::new();
    let args = match params.get("arguments") {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => return Err((-32602, "'arguments' must be an object".into())),
    };
    Ok(match call(tool, args) {
        Ok((mut doc, code)) => {
            if let Value::Object(m) = &mut doc {
                m.insert("exit_code".into(), json!(code));
            }
            let text = serde_json::to_string(&doc).unwrap_or_default();
            json!({"content": [{"type": "text", "text": text}], "structuredContent": doc, "isError": false})
        }
        Err(CallError::Input(e)) => json!({
            "content": [{"type": "text", "text": format!("vramfit: error: {}", e.message)}],
            "isError": true,
            "_meta": {"field": e.field, "exit_code": crate::EXIT_BAD_INPUT},
        }),
        Err(CallError::Internal(m)) => json!({
            "content": [{"type": "text", "text": format!("vramfit: error: {m}")}],
            "isError": true,
            "_meta": {"field": null, "exit_code": crate::EXIT_INTERNAL},
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn arguments_become_the_cli_command_line() {
        let a = argv(
            Tool::Estimate,
            &args(json!({"model": "llama-2-7b", "gpu": "rtx-4090", "lora_rank": 8, "task": "lora", "logits_fp32": true, "first-step": false, "seq": 1024, "offline": null})),
        )
        .unwrap();
        assert_eq!(
            a,
            [
                "vramfit",
                "estimate",
                "--json",
                "--gpu=rtx-4090",
                "--logits-fp32",
                "--lora-rank=8",
                "--context=1024",
                "--task=lora",
                "--",
                "llama-2-7b"
            ]
        );
        let m = argv(Tool::MigPlan, &args(json!({"gpu": "a100-80gb", "service": ["a=8GiB", "b=12GiB"]}))).unwrap();
        assert_eq!(m[1..4], ["mig", "plan", "--json"]);
        assert!(m.contains(&"--service=a=8GiB".to_string()) && m.contains(&"--service=b=12GiB".to_string()));
    }

    #[test]
    fn bad_arguments_name_themselves() {
        let e = |tool, v| match argv(tool, &args(v)) {
            Err(CallError::Input(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(e(Tool::Estimate, json!({"nope": 1})).field.as_deref(), Some("nope"));
        assert_eq!(e(Tool::Estimate, json!({"batch": -1})).field.as_deref(), Some("batch"));
        assert_eq!(e(Tool::Estimate, json!({"logits_fp32": "yes"})).field.as_deref(), Some("logits_fp32"));
        assert_eq!(e(Tool::Estimate, json!({"gpu": ["a", "b"]})).field.as_deref(), Some("gpu"));
        assert_eq!(e(Tool::Estimate, json!({"json": true})).field.as_deref(), Some("json"));
        assert_eq!(e(Tool::Estimate, json!({"seq": 1, "context": 2})).field.as_deref(), Some("context"));
    }

    #[test]
    fn clap_errors_name_the_flag_from_their_context() {
        let run = |tool, v| match call(tool, &args(v)) {
            Err(CallError::Input(e)) => e,
            other => panic!("{other:?}"),
        };
        let e = run(Tool::Estimate, json!({"model": "llama-2-7b", "batch": "many"}));
        assert_eq!(e.field.as_deref(), Some("batch"), "{}", e.message);
        let e = run(Tool::Estimate, json!({"model": "llama-2-7b", "task": "dance"}));
        assert_eq!(e.field.as_deref(), Some("task"), "{}", e.message);
        assert!(e.message.contains("dance"), "{}", e.message);
        let e = run(Tool::Plan, json!({"model": "llama-2-7b", "zero": 7}));
        assert_eq!(e.field.as_deref(), Some("zero"), "{}", e.message);
    }

    #[test]
    fn workload_errors_in_the_chain_name_their_field() {
        use vramfit_core::workload::Field;
        use vramfit_core::workload::WorkloadError;
        use vramfit_core::CoreError;
        let e = anyhow::Error::from(CoreError::Workload(WorkloadError::Zero { field: Field::GradAccum }));
        assert_eq!(field_of_error(&e.context("estimate")).as_deref(), Some("grad_accum"));
        let e = anyhow::Error::new(WorkloadError::Zero { field: Field::LoraRank });
        assert_eq!(field_of_error(&e).as_deref(), Some("lora_rank"));
        assert_eq!(field_of_error(&anyhow::anyhow!("--batch 0 is bad")), None, "never read from the text");
    }

    #[test]
    fn an_over_long_line_is_refused_and_the_next_one_answered() {
        let mut input = vec![b'x'; MAX_MESSAGE_BYTES + 10];
        input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n");
        let mut out = Vec::new();
        serve(std::io::Cursor::new(input), &mut out).unwrap();
        let replies: Vec<Value> =
            String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(replies.len(), 2, "{replies:?}");
        assert_eq!(replies[0]["error"]["code"], -32600);
        assert_eq!(replies[1]["id"], 7);
        assert_eq!(replies[1]["result"], json!({}));
    }

    #[test]
    fn every_tool_has_a_schema_of_its_flags() {
        for t in Tool::ALL {
            let s = input_schema(t);
            assert_eq!(s["type"], "object");
            let props = s["properties"].as_object().unwrap();
            assert!(!props.contains_key("json") && !props.contains_key("svg"), "{}", t.name());
            for (k, v) in props {
                assert!(
                    v["description"].as_str().is_some_and(|d| !d.is_empty()),
                    "{} {k} has no description",
                    t.name()
                );
            }
        }
        let e = input_schema(Tool::Estimate);
        assert_eq!(e["properties"]["batch"]["type"], "integer");
        // a token length takes 131072 or "128k"
        assert_eq!(e["properties"]["context"]["anyOf"][1]["type"], "string");
        assert_eq!(e["properties"]["max_num_batched_tokens"]["anyOf"][0]["type"], "integer");
        assert_eq!(e["properties"]["gpu_util"]["type"], "number");
        assert_eq!(e["properties"]["logits_fp32"]["type"], "boolean");
        assert!(e["properties"]["task"]["enum"].as_array().unwrap().contains(&json!("qlora")));
        assert_eq!(input_schema(Tool::Diagnose)["required"], json!(["file"]));
        assert_eq!(input_schema(Tool::MigPlan)["required"], json!(["gpu", "service"]));
    }

    #[test]
    fn vllm_names_and_token_lengths_reach_the_same_flags() {
        // the keyword arguments of Python and MCP: aliases are the flags themselves
        let args = |v: Value| v.as_object().unwrap().clone();
        let ours = call(
            Tool::Estimate,
            &args(json!({"model": "llama-3.1-8b", "context": 131072, "tp": 2, "gpus": 2, "kv_dtype": "fp8", "gpu_util": 0.8, "gpu": "h100"})),
        )
        .unwrap();
        let theirs = call(
            Tool::Estimate,
            &args(json!({"model": "llama-3.1-8b", "max_model_len": "128k", "tensor_parallel_size": 2, "num_gpus": 2, "kv_cache_dtype": "fp8_e4m3", "gpu_memory_utilization": 0.8, "gpu": "h100"})),
        )
        .unwrap();
        assert_eq!(theirs, ours);
        assert_eq!(ours.0["workload"]["seq"], 131_072);
        let Err(CallError::Input(e)) =
            call(Tool::Estimate, &args(json!({"model": "llama-3.1-8b", "context": 8192, "max_model_len": "8k"})))
        else {
            panic!("an alias beside its flag is refused")
        };
        assert!(e.message.contains("given twice"), "{}", e.message);
        let Err(CallError::Input(e)) = call(Tool::Estimate, &args(json!({"model": "llama-3.1-8b", "ctx": "8q"})))
        else {
            panic!("8q is not a token length")
        };
        assert_eq!(e.field.as_deref(), Some("context"), "{}", e.message);
    }
}
