//! Request decoders of the local web page's API: a JSON body (or, for
//! `/api/diagnose`, a query string beside the uploaded bytes) becomes the
//! command line the CLI would parse, checked by the same clap definitions.
//!
//! Pure functions of their input (no I/O): fuzzed (`fuzz/fuzz_targets/
//! web_request.rs`) and proptested (`tests/web_api.rs`). Whatever the
//! bytes, they return a request or an [`ApiError`] naming the field.
//!
//! What a request may say is read from the CLI's own clap definitions
//! ([`Endpoint::fields`]): every long flag of the command, less those a
//! request cannot set ([`NOT_FOR_REQUESTS`], llama.cpp's GGUF flags) and
//! those that name a file. A flag that names a file (any flag whose value
//! is a path: `--deepspeed`, `--catalog`, `--lgip`, …) is refused by name:
//! the server never opens a path a request gives; file contents travel in
//! the request itself (`config_json`, the `/api/diagnose` body,
//! `/api/check`'s `files`). A flag added to the CLI is a field of the API.

use crate::error::FieldId;
use clap::{ArgAction, CommandFactory};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// An API endpoint: one CLI command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Estimate,
    Plan,
    Diagnose,
    Mig,
    Check,
}

/// Body limits, bytes (docs/web.md). A config.json pasted into estimate or
/// plan is at most a few hundred KiB; nvidia-smi outputs are a few MB for
/// 16 GPUs (the CLI's cap per file is 16 MiB); the diagnose body is the
/// uploaded text or snapshot itself.
pub const ESTIMATE_BODY_LIMIT: usize = 2 << 20;
pub const PLAN_BODY_LIMIT: usize = 2 << 20;
pub const MIG_BODY_LIMIT: usize = 64 << 10;
pub const CHECK_BODY_LIMIT: usize = 24 << 20;
pub const DIAGNOSE_BODY_LIMIT: usize = 64 << 20;
/// Longest query string (`/api/diagnose` takes its fields there; they are a few short values).
pub const MAX_QUERY_BYTES: usize = 16 << 10;
/// Longest value of one flag (a model name, a service spec, …).
pub const MAX_VALUE_CHARS: usize = 1024;
/// Most values of a repeated flag (`service`, `mfu`, `allow`).
pub const MAX_VALUES: usize = 64;

/// Flags of the CLI a request cannot set, and why (docs/web.md lists them).
pub const NOT_FOR_REQUESTS: &[(&str, &str)] = &[
    ("json", "the answer is always the CLI's JSON, or the chart or config the request asks for"),
    ("explain", "the JSON carries every explanation already"),
    ("wide", "it fits text output to a terminal; the answer is JSON"),
    ("list-presets", "GET /api/catalog lists the presets"),
    ("list-gpus", "GET /api/catalog lists the GPUs"),
    ("offline", "the server decides: it reaches the Hub only when started with --allow-hub"),
    ("nvml", "/api/check judges the outputs a request uploads"),
    ("expect-fabric", "the fabric between nodes is judged by /api/fleet (its expect_fabric field)"),
    ("collect-script", "it prints the script that collects a node's outputs: `vramfit check --collect-script`"),
    ("help", "not a command"),
    ("version", "not a command"),
];

impl Endpoint {
    pub const ALL: [Endpoint; 5] =
        [Endpoint::Estimate, Endpoint::Plan, Endpoint::Diagnose, Endpoint::Mig, Endpoint::Check];

    /// `/api/<name>`.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Estimate => "estimate",
            Endpoint::Plan => "plan",
            Endpoint::Diagnose => "diagnose",
            Endpoint::Mig => "mig",
            Endpoint::Check => "check",
        }
    }

    /// The subcommand path of the CLI.
    pub fn command(self) -> &'static [&'static str] {
        match self {
            Endpoint::Estimate => &["estimate"],
            Endpoint::Plan => &["plan"],
            Endpoint::Diagnose => &["diagnose"],
            Endpoint::Mig => &["mig", "plan"],
            Endpoint::Check => &["check"],
        }
    }

    pub fn body_limit(self) -> usize {
        match self {
            Endpoint::Estimate => ESTIMATE_BODY_LIMIT,
            Endpoint::Plan => PLAN_BODY_LIMIT,
            Endpoint::Diagnose => DIAGNOSE_BODY_LIMIT,
            Endpoint::Mig => MIG_BODY_LIMIT,
            Endpoint::Check => CHECK_BODY_LIMIT,
        }
    }

    /// The flags a request may set (snake_case of the CLI's long flags),
    /// in the order the CLI declares them.
    pub fn fields(self) -> Vec<&'static str> {
        derived(self).iter().map(|(k, _)| k.as_str()).collect()
    }

    /// Keys that are not flags: the model (estimate, plan, diagnose), a
    /// pasted config.json (estimate, plan), the upload's name (diagnose),
    /// nvidia-smi outputs (check).
    pub fn extra_keys(self) -> &'static [&'static str] {
        match self {
            Endpoint::Estimate | Endpoint::Plan => &["model", "config_json"],
            Endpoint::Diagnose => &["model", "name"],
            Endpoint::Check => &["files"],
            Endpoint::Mig => &[],
        }
    }
}

/// The inputs `/api/check` takes in `files` (the CLI's file flags of the same names).
pub const CHECK_FILES: &[&str] = &["xml", "text", "list", "topo", "lgi", "lgip", "bandwidth", "p2p", "nccl"];

/// An error for the client: HTTP status, message, and the request field it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn bad(message: impl Into<String>, field: Option<&str>) -> ApiError {
        ApiError { status: 400, message: message.into(), field: field.map(str::to_string) }
    }

    pub fn too_large(what: &str, limit: usize) -> ApiError {
        ApiError { status: 413, message: format!("{what} is larger than the {limit}-byte limit"), field: None }
    }
}

/// A flag's value as the request gave it.
#[derive(Debug, Clone, PartialEq)]
pub enum FlagValue {
    Switch(bool),
    One(String),
    Many(Vec<String>),
}

/// A decoded request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decoded {
    /// flags in the order given, snake_case keys
    pub flags: Vec<(String, FlagValue)>,
    /// the model argument: a preset or a hub id (checked by [`check_model_name`])
    pub model: Option<String>,
    /// text of a pasted config.json
    pub config_json: Option<String>,
    /// diagnose: the upload's name
    pub name: Option<String>,
    /// check: nvidia-smi outputs by file flag (`xml`, `topo`, …), each (name, text)
    pub files: BTreeMap<String, (String, String)>,
}

impl Decoded {
    pub fn get(&self, key: &str) -> Option<&FlagValue> {
        self.flags.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The chart was asked for (`svg: true`).
    pub fn wants_svg(&self) -> bool {
        matches!(self.get("svg"), Some(FlagValue::Switch(true)))
    }

    /// A launch config was asked for (`emit`).
    pub fn wants_emit(&self) -> bool {
        matches!(self.get("emit"), Some(FlagValue::One(_)))
    }
}

/// How the CLI takes a flag: read from the clap definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    Switch,
    One,
    Many,
}

/// The CLI's command definition of `path` (`["mig", "plan"]`), built (so an
/// argument renders as clap's errors render it).
fn clap_command(path: &[&str]) -> Option<clap::Command> {
    let mut cmd = crate::Cli::command();
    cmd.build();
    for p in path {
        cmd = cmd.find_subcommand(p)?.clone();
    }
    Some(cmd)
}

/// The argument takes a path.
fn takes_path(a: &clap::Arg) -> bool {
    a.get_value_parser().type_id() == std::any::TypeId::of::<std::path::PathBuf>()
}

/// Every flag of the CLI that names a file (any command's), snake_case.
pub fn file_flags() -> &'static BTreeSet<String> {
    static FILES: OnceLock<BTreeSet<String>> = OnceLock::new();
    FILES.get_or_init(|| {
        fn walk(c: &clap::Command, out: &mut BTreeSet<String>) {
            for a in c.get_arguments().filter(|a| takes_path(a)) {
                if let Some(l) = a.get_long() {
                    out.insert(l.replace('-', "_"));
                }
            }
            for s in c.get_subcommands() {
                walk(s, out);
            }
        }
        let mut out = BTreeSet::new();
        walk(&crate::Cli::command(), &mut out);
        out
    })
}

/// llama.cpp's flags (`--ctx-size`, `-ngl`, …): they size a GGUF file, which no request can name.
fn gguf_flags() -> BTreeSet<String> {
    use clap::Args;
    crate::cmd::gguf::GgufArgs::augment_args(clap::Command::new("gguf"))
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect()
}

/// The fields of `ep` and how each is taken, from the clap definitions.
fn derive_fields(ep: Endpoint) -> Fields {
    let Some(cmd) = clap_command(ep.command()) else { return Vec::new() };
    let gguf = gguf_flags();
    cmd.get_arguments()
        .filter(|a| !takes_path(a))
        .filter_map(|a| {
            let long = a.get_long()?;
            if NOT_FOR_REQUESTS.iter().any(|(f, _)| *f == long) || gguf.contains(long) {
                return None;
            }
            let key = long.replace('-', "_");
            if ep.extra_keys().contains(&key.as_str()) {
                // diagnose's --model: read as the model key, checked like every model name
                return None;
            }
            let kind = match a.get_action() {
                // the chart goes back in the response: `svg: true` is `--svg -`
                _ if key == "svg" => ArgKind::Switch,
                ArgAction::SetTrue | ArgAction::SetFalse => ArgKind::Switch,
                ArgAction::Append => ArgKind::Many,
                _ => ArgKind::One,
            };
            Some((key, kind))
        })
        .collect()
}

/// An endpoint's fields and how each is taken.
type Fields = Vec<(String, ArgKind)>;

/// The fields of every endpoint, read once from clap.
fn derived(ep: Endpoint) -> &'static [(String, ArgKind)] {
    static FIELDS: OnceLock<Vec<(Endpoint, Fields)>> = OnceLock::new();
    let all = FIELDS.get_or_init(|| Endpoint::ALL.iter().map(|&e| (e, derive_fields(e))).collect());
    all.iter().find(|(e, _)| *e == ep).map(|(_, f)| f.as_slice()).unwrap_or(&[])
}

/// The kinds of every field of an endpoint.
pub fn kinds(ep: Endpoint) -> &'static BTreeMap<String, ArgKind> {
    static KINDS: OnceLock<Vec<(Endpoint, BTreeMap<String, ArgKind>)>> = OnceLock::new();
    let all = KINDS.get_or_init(|| {
        Endpoint::ALL.iter().map(|&e| (e, derived(e).iter().map(|(k, v)| (k.clone(), *v)).collect())).collect()
    });
    all.iter().find(|(e, _)| *e == ep).map(|(_, m)| m).expect("every endpoint has kinds")
}

fn unknown_field(ep: Endpoint, key: &str) -> ApiError {
    let shown: String = key.chars().take(64).flat_map(char::escape_debug).collect();
    if file_flags().contains(key) {
        return ApiError::bad(
            format!(
                "field '{shown}' names a file: the server never opens a path a request gives{}",
                match (ep, key) {
                    (Endpoint::Check, _) => "; put the output's text in `files`".to_string(),
                    (_, "deepspeed" | "adapter_config" | "catalog") => {
                        format!("; use `vramfit {}` with --{} on the command line", ep.name(), key.replace('_', "-"))
                    }
                    _ => String::new(),
                }
            ),
            Some(key),
        );
    }
    let mut known: Vec<&str> = ep.extra_keys().to_vec();
    known.extend(ep.fields());
    ApiError::bad(
        format!("unknown field '{shown}' for /api/{}: known fields are {}", ep.name(), known.join(", ")),
        Some(key),
    )
}

fn check_value(key: &str, s: &str) -> Result<String, ApiError> {
    if s.chars().count() > MAX_VALUE_CHARS {
        return Err(ApiError::bad(format!("{key}: more than {MAX_VALUE_CHARS} characters"), Some(key)));
    }
    if s.chars().any(|c| c.is_control()) {
        return Err(ApiError::bad(format!("{key}: control characters are not allowed"), Some(key)));
    }
    Ok(s.to_string())
}

fn scalar(key: &str, v: &Value) -> Result<String, ApiError> {
    match v {
        Value::String(s) => check_value(key, s),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(_) => Err(ApiError::bad(format!("{key}: takes a value, not true/false"), Some(key))),
        _ => Err(ApiError::bad(format!("{key}: expected a string or a number"), Some(key))),
    }
}

/// The one check of a model name from a request: a preset name or a hub id
/// (`org/name`), never something that reads as a path or a GGUF file.
pub fn check_model_name(s: &str) -> Result<String, ApiError> {
    let bad = |why: &str| {
        ApiError::bad(
            format!(
                "model: '{}' {why}: give a preset name (e.g. llama-2-7b) or a hub id (org/name), or paste a config.json",
                s.chars().take(80).flat_map(char::escape_debug).collect::<String>()
            ),
            Some("model"),
        )
    };
    let t = s.trim();
    if t.is_empty() {
        return Err(bad("is empty"));
    }
    if t.len() > 200 {
        return Err(bad("is too long"));
    }
    let path_like = t.starts_with(['.', '/', '~', '-'])
        || t.contains('\\')
        || t.contains("..")
        || t.matches('/').count() > 1
        || t.contains(':');
    if path_like {
        return Err(bad("looks like a path; the server never opens files a request names"));
    }
    let lower = t.to_ascii_lowercase();
    if [".gguf", ".json", ".safetensors"].iter().any(|e| lower.ends_with(e)) {
        return Err(bad("names a file; the server never opens files a request names"));
    }
    if !t.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) {
        return Err(bad("has characters no preset or hub id has"));
    }
    Ok(t.to_string())
}

/// A JSON request body.
pub fn decode_json(ep: Endpoint, body: &[u8]) -> Result<Decoded, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad(format!("the request body is not a JSON object: {e}"), None))?;
    let Value::Object(map) = v else {
        return Err(ApiError::bad("the request body must be a JSON object of fields", None));
    };
    let kinds = kinds(ep);
    let mut d = Decoded::default();
    for (key, v) in &map {
        if v.is_null() {
            continue;
        }
        match (ep, key.as_str()) {
            (Endpoint::Estimate | Endpoint::Plan | Endpoint::Diagnose, "model") => {
                d.model = Some(check_model_name(&scalar(key, v)?)?);
            }
            (Endpoint::Estimate | Endpoint::Plan, "config_json") => {
                d.config_json = Some(match v {
                    Value::String(s) => s.clone(),
                    // a JSON object pasted as such is its own text
                    Value::Object(_) => v.to_string(),
                    _ => return Err(ApiError::bad("config_json: expected the text of a config.json", Some(key))),
                });
            }
            (Endpoint::Diagnose, "name") => d.name = Some(check_value(key, &scalar(key, v)?)?),
            (Endpoint::Check, "files") => d.files = check_files(v)?,
            _ => {
                let Some(kind) = kinds.get(key) else { return Err(unknown_field(ep, key)) };
                d.flags.push((key.clone(), flag_value(key, *kind, v)?));
            }
        }
    }
    finish(ep, d)
}

fn flag_value(key: &str, kind: ArgKind, v: &Value) -> Result<FlagValue, ApiError> {
    Ok(match (kind, v) {
        (ArgKind::Switch, Value::Bool(b)) => FlagValue::Switch(*b),
        (ArgKind::Switch, _) => return Err(ApiError::bad(format!("{key}: a switch: true or false"), Some(key))),
        (ArgKind::Many, Value::Array(a)) => {
            if a.len() > MAX_VALUES {
                return Err(ApiError::bad(format!("{key}: more than {MAX_VALUES} values"), Some(key)));
            }
            FlagValue::Many(a.iter().map(|x| scalar(key, x)).collect::<Result<_, _>>()?)
        }
        (ArgKind::Many, other) => FlagValue::Many(vec![scalar(key, other)?]),
        (ArgKind::One, other) => FlagValue::One(scalar(key, other)?),
    })
}

fn check_files(v: &Value) -> Result<BTreeMap<String, (String, String)>, ApiError> {
    let Value::Object(m) = v else {
        return Err(ApiError::bad(
            "files: expected an object of nvidia-smi outputs (xml, text, topo, …)",
            Some("files"),
        ));
    };
    let mut out = BTreeMap::new();
    for (k, v) in m {
        if !CHECK_FILES.contains(&k.as_str()) {
            let shown: String = k.chars().take(64).flat_map(char::escape_debug).collect();
            return Err(ApiError::bad(
                format!("files: unknown input '{shown}': known inputs are {}", CHECK_FILES.join(", ")),
                Some("files"),
            ));
        }
        let (name, text) = match v {
            Value::Null => continue,
            Value::String(t) => (format!("{k} (uploaded)"), t.clone()),
            Value::Object(o) => {
                let name = match o.get("name") {
                    Some(Value::String(n)) => check_value(k, n)?,
                    None => format!("{k} (uploaded)"),
                    _ => return Err(ApiError::bad(format!("files.{k}.name: expected a string"), Some("files"))),
                };
                match o.get("text") {
                    Some(Value::String(t)) => (name, t.clone()),
                    _ => {
                        return Err(ApiError::bad(format!("files.{k}.text: expected the output's text"), Some("files")))
                    }
                }
            }
            _ => return Err(ApiError::bad(format!("files.{k}: expected the output's text"), Some("files"))),
        };
        out.insert(k.clone(), (name, text));
    }
    Ok(out)
}

/// A query string (`/api/diagnose?kind=oom&model=llama-2-7b&svg=true`).
pub fn decode_query(ep: Endpoint, query: &str) -> Result<Decoded, ApiError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(ApiError::too_large("the query string", MAX_QUERY_BYTES));
    }
    let kinds = kinds(ep);
    let mut d = Decoded::default();
    let mut many: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        let (key, val) = (k.into_owned(), v.into_owned());
        match (ep, key.as_str()) {
            (Endpoint::Estimate | Endpoint::Plan | Endpoint::Diagnose, "model") => {
                if !val.is_empty() {
                    d.model = Some(check_model_name(&val)?);
                }
            }
            (Endpoint::Diagnose, "name") => d.name = Some(check_value(&key, &val)?),
            _ => {
                let Some(kind) = kinds.get(&key) else { return Err(unknown_field(ep, &key)) };
                let val = check_value(&key, &val)?;
                match kind {
                    ArgKind::Switch => {
                        let on = match val.as_str() {
                            "" | "true" | "1" | "on" => true,
                            "false" | "0" | "off" => false,
                            _ => return Err(ApiError::bad(format!("{key}: a switch: true or false"), Some(&key))),
                        };
                        d.flags.push((key, FlagValue::Switch(on)));
                    }
                    ArgKind::Many => many.entry(key).or_default().push(val),
                    ArgKind::One => {
                        if !val.is_empty() {
                            d.flags.push((key, FlagValue::One(val)));
                        }
                    }
                }
            }
        }
    }
    for (k, v) in many {
        if v.len() > MAX_VALUES {
            return Err(ApiError::bad(format!("{k}: more than {MAX_VALUES} values"), Some(&k)));
        }
        d.flags.push((k, FlagValue::Many(v)));
    }
    finish(ep, d)
}

/// Checks across fields, and one flag given once.
fn finish(ep: Endpoint, d: Decoded) -> Result<Decoded, ApiError> {
    for (i, (k, _)) in d.flags.iter().enumerate() {
        if d.flags[..i].iter().any(|(j, _)| j == k) {
            return Err(ApiError::bad(format!("{k}: given more than once"), Some(k)));
        }
    }
    if d.model.is_some() && d.config_json.is_some() {
        return Err(ApiError::bad("give model or config_json, not both", Some("model")));
    }
    if d.wants_svg() && d.wants_emit() {
        return Err(ApiError::bad("svg and emit each replace the report: ask for one of them", Some("svg")));
    }
    if ep == Endpoint::Check && d.files.is_empty() {
        return Err(ApiError::bad(
            "files: give at least one nvidia-smi output (xml, text, list, topo, lgi, lgip) or bandwidth report; \
             the server never reads this machine's GPUs for a request",
            Some("files"),
        ));
    }
    Ok(d)
}

/// What the pasted config.json is called in the report and in errors.
pub const PASTED_CONFIG: &str = "pasted config.json";

/// The command line of a decoded request: the CLI's own flags, `--json`
/// unless a chart (`--svg -`) or a launch config (`--emit`) replaces the
/// report. `positional` is the diagnose input's name.
pub fn argv(ep: Endpoint, d: &Decoded) -> Vec<String> {
    let mut a: Vec<String> = vec!["vramfit".into()];
    a.extend(ep.command().iter().map(|s| s.to_string()));
    for (k, v) in &d.flags {
        let flag = format!("--{}", k.replace('_', "-"));
        match (k.as_str(), v) {
            ("svg", FlagValue::Switch(true)) => a.push("--svg=-".into()),
            (_, FlagValue::Switch(true)) => a.push(flag),
            (_, FlagValue::Switch(false)) => {}
            (_, FlagValue::One(s)) => a.push(format!("{flag}={s}")),
            (_, FlagValue::Many(vs)) => a.extend(vs.iter().map(|s| format!("{flag}={s}"))),
        }
    }
    if !d.wants_svg() && !d.wants_emit() {
        a.push("--json".into());
    }
    match ep {
        Endpoint::Estimate | Endpoint::Plan => {
            let model = match (&d.model, &d.config_json) {
                (Some(m), _) => Some(m.clone()),
                (None, Some(_)) => Some(PASTED_CONFIG.to_string()),
                (None, None) => None,
            };
            if let Some(m) = model {
                a.push("--".into());
                a.push(m);
            }
        }
        Endpoint::Diagnose => {
            if let Some(m) = &d.model {
                a.push(format!("--model={m}"));
            }
            a.push("--".into());
            a.push(d.name.clone().unwrap_or_else(|| "upload".into()));
        }
        Endpoint::Mig | Endpoint::Check => {}
    }
    a
}

/// The parsed command of a decoded request: the CLI's own definitions
/// parse the request's flags ([`argv`]) into the same typed [`crate::Command`]
/// the CLI builds from its command line.
pub fn command(ep: Endpoint, d: &Decoded) -> Result<crate::Command, ApiError> {
    use crate::Command as C;
    let cli = <crate::Cli as clap::Parser>::try_parse_from(argv(ep, d)).map_err(|e| clap_error(ep, &e))?;
    let is_ep = match (&cli.command, ep) {
        (C::Estimate(_), Endpoint::Estimate) | (C::Plan(_), Endpoint::Plan) | (C::Diagnose(_), Endpoint::Diagnose) => {
            true
        }
        (C::Mig(m), Endpoint::Mig) => matches!(m.command, crate::cmd::mig::MigCommand::Plan(_)),
        (C::Check(_), Endpoint::Check) => true,
        _ => false,
    };
    if !is_ep {
        // argv() builds only the endpoint's own command
        return Err(ApiError { status: 500, message: "internal error: unexpected command".into(), field: None });
    }
    Ok(cli.command)
}

/// A clap error as the CLI prints its first line (without `error: `, the
/// usage and the `--help` hint), and the request field it is about: the
/// argument clap's error names ([`clap::error::ContextKind::InvalidArg`]).
pub fn clap_error(ep: Endpoint, e: &clap::Error) -> ApiError {
    let text = e.render().to_string();
    let first: Vec<&str> = text.lines().take_while(|l| !l.trim().is_empty()).collect();
    let msg = first.join(" ");
    let msg = msg.strip_prefix("error: ").unwrap_or(&msg).trim().to_string();
    ApiError::bad(msg, clap_field(ep, e).as_deref())
}

/// The request field of the argument a clap error names.
fn clap_field(ep: Endpoint, e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let shown = match e.get(ContextKind::InvalidArg)? {
        ContextValue::String(s) => s.clone(),
        ContextValue::Strings(v) => v.first()?.clone(),
        _ => return None,
    };
    let cmd = clap_command(ep.command())?;
    let arg = cmd.get_arguments().find(|a| a.to_string() == shown)?;
    match arg.get_long() {
        Some(long) => Some(long.replace('-', "_")),
        None => (arg.get_id() == "model").then(|| "model".to_string()),
    }
}

/// The request field of a command's error on `ep`: the field the error
/// carries ([`crate::error::error_field`]), when it is one a request of
/// `ep` can set (check's file flags are its `files`).
pub fn request_field(ep: Endpoint, field: &FieldId) -> Option<String> {
    let key = field.request_key();
    if ep == Endpoint::Check && (CHECK_FILES.contains(&key.as_str()) || key == "files") {
        return Some("files".into());
    }
    (kinds(ep).contains_key(&key) || ep.extra_keys().contains(&key.as_str())).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_a_flag_of_its_command() {
        // read from clap: a flag added to the CLI is a field of the API
        for ep in Endpoint::ALL {
            assert_eq!(kinds(ep).len(), ep.fields().len(), "/api/{}", ep.name());
        }
        let est = Endpoint::Estimate.fields();
        for f in ["engine", "max_num_batched_tokens", "max_num_seqs", "sliding_window_cache", "loss", "gpu_util"] {
            assert!(est.contains(&f), "/api/estimate lacks {f}");
        }
        // what no request sets: output switches, the server's own decisions, llama.cpp's flags
        for f in ["json", "explain", "list_presets", "offline", "ctx_size", "n_gpu_layers", "help"] {
            assert!(!est.contains(&f), "/api/estimate takes {f}");
        }
        assert!(!Endpoint::Check.fields().contains(&"nvml"));
        assert!(!Endpoint::Diagnose.fields().contains(&"model"), "the model is its own key");
        assert_eq!(kinds(Endpoint::Estimate)["sp"], ArgKind::Switch);
        assert_eq!(kinds(Endpoint::Estimate)["svg"], ArgKind::Switch);
        assert_eq!(kinds(Endpoint::Mig)["service"], ArgKind::Many);
        assert_eq!(kinds(Endpoint::Estimate)["batch"], ArgKind::One);
    }

    #[test]
    fn no_field_takes_a_path() {
        // every flag the CLI reads a file from is refused by name
        let files = file_flags();
        for f in ["deepspeed", "adapter_config", "catalog", "lgip", "lgipp", "xml", "topo", "nccl", "cases"] {
            assert!(files.contains(f), "{f}");
        }
        for ep in Endpoint::ALL {
            for f in ep.fields() {
                assert!(!files.contains(f), "{f}");
            }
            for f in files {
                let e = decode_json(ep, format!(r#"{{"{f}": "/etc/passwd"}}"#).as_bytes()).unwrap_err();
                assert_eq!(e.status, 400);
                assert!(e.message.contains("names a file"), "{}", e.message);
            }
        }
    }

    #[test]
    fn json_to_argv() {
        let d = decode_json(
            Endpoint::Estimate,
            br#"{"model":"llama-2-7b","batch":4,"gpu":"rtx-4090","sp":false,"logits_fp32":true,"margin":0.1,"sweep":true}"#,
        )
        .unwrap();
        assert_eq!(
            argv(Endpoint::Estimate, &d),
            [
                "vramfit",
                "estimate",
                "--batch=4",
                "--gpu=rtx-4090",
                "--logits-fp32",
                "--margin=0.1",
                "--sweep",
                "--json",
                "--",
                "llama-2-7b"
            ]
        );
        let d = decode_json(Endpoint::Mig, br#"{"gpu":"a100-80gb","service":["a=10GiB","b=llama-2-7b"],"svg":true}"#)
            .unwrap();
        assert_eq!(
            argv(Endpoint::Mig, &d),
            ["vramfit", "mig", "plan", "--gpu=a100-80gb", "--service=a=10GiB", "--service=b=llama-2-7b", "--svg=-"]
        );
    }

    #[test]
    fn query_to_argv() {
        let d = decode_query(Endpoint::Diagnose, "kind=oom&name=train.log&model=llama-2-7b&svg=&batch=4").unwrap();
        assert_eq!(
            argv(Endpoint::Diagnose, &d),
            ["vramfit", "diagnose", "--kind=oom", "--svg=-", "--batch=4", "--model=llama-2-7b", "--", "train.log"]
        );
    }

    #[test]
    fn bad_requests_name_the_field() {
        let cases: &[(&[u8], Option<&str>, &str)] = &[
            (b"[1]", None, "JSON object"),
            (b"{", None, "not a JSON object"),
            (br#"{"batch": true}"#, Some("batch"), "takes a value"),
            (br#"{"sp": "yes"}"#, Some("sp"), "switch"),
            (br#"{"nope": 1}"#, Some("nope"), "unknown field 'nope'"),
            (br#"{"model": "../etc/passwd"}"#, Some("model"), "path"),
            (br#"{"model": "/etc/passwd"}"#, Some("model"), "path"),
            (br#"{"model": "x.gguf"}"#, Some("model"), "names a file"),
            (br#"{"model": "a/b.gguf"}"#, Some("model"), "names a file"),
            (br#"{"model": "C:\\x"}"#, Some("model"), "path"),
            (br#"{"model": "llama-2-7b", "config_json": "{}"}"#, Some("model"), "not both"),
            (br#"{"gpu": {"a": 1}}"#, Some("gpu"), "expected a string"),
            (br#"{"gpu": "a\u0000b"}"#, Some("gpu"), "control"),
        ];
        for (body, field, words) in cases {
            let e = decode_json(Endpoint::Estimate, body).unwrap_err();
            assert_eq!(e.status, 400);
            assert_eq!(e.field.as_deref(), *field, "{}", e.message);
            assert!(e.message.contains(words), "{}: {}", String::from_utf8_lossy(body), e.message);
        }
        let e = decode_json(Endpoint::Check, br#"{"expect": "8xA100"}"#).unwrap_err();
        assert!(e.message.contains("at least one nvidia-smi output"), "{}", e.message);
        let e = decode_json(Endpoint::Check, br#"{"files": {"xml": "x", "passwd": "y"}}"#).unwrap_err();
        assert!(e.message.contains("unknown input 'passwd'"), "{}", e.message);
    }

    #[test]
    fn clap_messages_are_the_clis_and_name_their_argument() {
        use clap::Parser;
        let e = crate::Cli::try_parse_from(["vramfit", "estimate", "--batch=abc", "--", "llama-2-7b"]).unwrap_err();
        let a = clap_error(Endpoint::Estimate, &e);
        assert_eq!(a.field.as_deref(), Some("batch"));
        assert!(a.message.starts_with("invalid value 'abc' for '--batch <BATCH>'"), "{}", a.message);
        // a conflict: the argument clap's message names first
        let e = crate::Cli::try_parse_from(["vramfit", "estimate", "--gpu-mem=24GiB", "--gpu=t4"]).unwrap_err();
        let a = clap_error(Endpoint::Estimate, &e);
        assert!(a.message.starts_with("the argument '--gpu-mem <SIZE>' cannot be used with"), "{}", a.message);
        assert_eq!(a.field.as_deref(), Some("gpu_mem"));
        // missing required arguments: the first
        let e = crate::Cli::try_parse_from(["vramfit", "mig", "plan", "--gpu=a100-80gb"]).unwrap_err();
        assert_eq!(clap_error(Endpoint::Mig, &e).field.as_deref(), Some("service"));
        let e = crate::Cli::try_parse_from(["vramfit", "mig", "plan", "--max-gpus=0"]).unwrap_err();
        assert_eq!(clap_error(Endpoint::Mig, &e).field.as_deref(), Some("max_gpus"));
    }

    #[test]
    fn command_errors_map_to_the_endpoints_fields() {
        assert_eq!(request_field(Endpoint::Estimate, &FieldId::flag("gpu-mem")).as_deref(), Some("gpu_mem"));
        assert_eq!(request_field(Endpoint::Estimate, &FieldId::MODEL).as_deref(), Some("model"));
        assert_eq!(request_field(Endpoint::Estimate, &FieldId::flag("config-json")).as_deref(), Some("config_json"));
        assert_eq!(request_field(Endpoint::Check, &FieldId::flag("xml")).as_deref(), Some("files"));
        assert_eq!(request_field(Endpoint::Check, &FieldId::FILES).as_deref(), Some("files"));
        // a field no request of the endpoint has is not named
        assert_eq!(request_field(Endpoint::Estimate, &FieldId::flag("deepspeed")), None);
        assert_eq!(request_field(Endpoint::Mig, &FieldId::flag("dtype")), None);
    }
}
