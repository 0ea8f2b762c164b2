//! One request, one CLI run: the decoded request becomes the typed command
//! the CLI builds ([`request::command`]: clap parses it with the CLI's
//! definitions), its in-memory inputs become [`crate::Inputs`], and
//! [`crate::run_with`] answers it as it answers the CLI. The answer is the
//! CLI's stdout (its `--json`, its `--svg -` chart or its `--emit` file)
//! and exit code; an error is the message the CLI prints on stderr, with
//! the request field the error carries ([`crate::error::error_field`]).

use super::lookup::RequestLookup;
use super::request::{self, request_field, ApiError, Decoded, Endpoint};
use crate::cmd::check::CheckInputs;
use crate::cmd::model_args::Lookup;
use crate::{Inputs, Outcome};
use std::sync::Arc;
use vramfit_hw::NamedText;

/// What a request produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// `application/json`, `image/svg+xml` or `text/plain` (an emitted config)
    pub content_type: &'static str,
    pub body: String,
    /// the CLI's exit code (0 fits / ok, 1 does not fit / a failed check)
    pub exit: u8,
}

/// Server settings a request sees.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// fetch configs from the Hugging Face Hub (`vramfit serve --allow-hub`)
    pub allow_hub: bool,
}

fn answer(d: &Decoded, out: Outcome) -> Answer {
    let content_type = if d.wants_svg() {
        "image/svg+xml"
    } else if d.wants_emit() {
        "text/plain; charset=utf-8"
    } else {
        "application/json"
    };
    let body = if content_type == "application/json" { localized_json(d, out.stdout) } else { out.stdout };
    Answer { content_type, body, exit: out.code }
}

/// The request's `lang` (`zh`: Simplified Chinese; anything else, or none: English).
fn request_lang(d: &Decoded) -> vramfit_report::i18n::Lang {
    match d.get("lang") {
        Some(request::FlagValue::One(l)) => vramfit_report::i18n::Lang::from_locale(l),
        _ => vramfit_report::i18n::Lang::En,
    }
}

/// The CLI's JSON with its sentences in the request's language (the same
/// schema; the catalogue of `vramfit_report::i18n`, as the CLI's `--lang`).
fn localized_json(d: &Decoded, body: String) -> String {
    let lang = request_lang(d);
    if lang == vramfit_report::i18n::Lang::En {
        return body;
    }
    match serde_json::from_str::<serde_json::Value>(&body) {
        Ok(mut v) => {
            vramfit_report::i18n::localize_json(&mut v, lang);
            serde_json::to_string_pretty(&v).map_or(body, |s| s + "\n")
        }
        Err(_) => body,
    }
}

/// An error of the command as the CLI would print it: 400 for bad input,
/// 500 for vramfit's own inconsistency (exit 3); the field is the one the
/// error carries, when a request of `ep` has it.
fn command_error(ep: Endpoint, e: &anyhow::Error) -> ApiError {
    let message = crate::error_text(e);
    let status = if crate::exit_code(e) == crate::EXIT_INTERNAL { 500 } else { 400 };
    let field = crate::error::error_field(e).and_then(|f| request_field(ep, &f));
    ApiError { status, message, field }
}

/// A failed `check --fleet`: the field is one of `/api/fleet`'s when the
/// error names one.
fn fleet_error(e: &anyhow::Error) -> ApiError {
    let message = crate::error_text(e);
    let status = if crate::exit_code(e) == crate::EXIT_INTERNAL { 500 } else { 400 };
    let field = crate::error::error_field(e)
        .map(|f| f.request_key())
        .filter(|k| ["files", "expect", "expect_nvlink", "expect_fabric"].contains(&k.as_str()));
    ApiError { status, message, field }
}

/// Run `ep` on a decoded request; `upload` is the diagnose body.
pub fn run(settings: &Settings, ep: Endpoint, d: Decoded, upload: Option<Vec<u8>>) -> Result<Answer, ApiError> {
    let command = request::command(ep, &d)?;
    let mut inputs = Inputs {
        lookup: Lookup::new(Arc::new(RequestLookup { allow_hub: settings.allow_hub, pasted: d.config_json.clone() })),
        offline: !settings.allow_hub,
        ..Inputs::default()
    };
    match ep {
        Endpoint::Diagnose => {
            let name = d.name.clone().unwrap_or_else(|| "upload".into());
            let input = vramfit_diagnose::input::from_bytes(&name, upload.unwrap_or_default())
                .map_err(|e| command_error(ep, &anyhow::Error::from(e)))?;
            inputs.diagnose = Some(input);
        }
        Endpoint::Check => inputs.check = Some(check_inputs(&d)?),
        Endpoint::Estimate | Endpoint::Plan | Endpoint::Mig => {}
    }
    crate::run_with(command, inputs).map(|out| answer(&d, out)).map_err(|e| command_error(ep, &e))
}

/// The check's uploads, each under the byte cap the CLI reads its file with.
fn check_inputs(d: &Decoded) -> Result<CheckInputs, ApiError> {
    use vramfit_hw::files::{MAX_BANDWIDTH_BYTES, MAX_INPUT_BYTES};
    for (k, (name, text)) in &d.files {
        let cap = match k.as_str() {
            "lgip" => vramfit_hw::mig::MAX_MIG_OUTPUT_BYTES as u64,
            "bandwidth" | "p2p" | "nccl" => MAX_BANDWIDTH_BYTES,
            _ => MAX_INPUT_BYTES,
        };
        if text.len() as u64 > cap {
            return Err(ApiError {
                status: 413,
                message: format!("{name}: larger than the {cap}-byte limit for files.{k}"),
                field: Some("files".into()),
            });
        }
    }
    let get = |k: &str| d.files.get(k).map(|(name, text)| NamedText { name: name.clone(), text: text.clone() });
    Ok(CheckInputs {
        machine: vramfit_hw::TextsProbe {
            xml: get("xml"),
            text: get("text"),
            list: get("list"),
            topo: get("topo"),
            lgi: get("lgi"),
        },
        lgip: get("lgip"),
        bandwidth: get("bandwidth"),
        p2p: get("p2p"),
        nccl: get("nccl"),
    })
}

// ------------------------------------------------------------------ fleet
// `/api/fleet`: `check --fleet` on a folder the page uploads. Kept in its
// own section (a route and this function) so it merges beside the
// request/api rework.

/// Most bytes of one `/api/fleet` request (a fleet of 16 nodes with full
/// `-q -x` reports is ~30 MB).
pub const FLEET_BODY_LIMIT: usize = 64 << 20;
/// Most files in one upload.
pub const FLEET_MAX_FILES: usize = 4096;

/// `{"files": [{"path": "cluster/node-a/nvidia-smi.xml", "text": "…"}, …],
/// "expect": "4x8xH100-80GB", "expect_nvlink": true, "expect_fabric": "8xib400"}`:
/// the paths as the browser gives them for a chosen folder (its name first,
/// then the node folder, then the file). Every field is checked before
/// anything runs; an error names its field.
pub fn fleet(body: &[u8]) -> Result<Answer, ApiError> {
    let bad = |field: &str, message: String| ApiError { status: 400, message, field: Some(field.into()) };
    let v: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| bad("files", format!("the request is not JSON: {e}")))?;
    let obj = v.as_object().ok_or_else(|| bad("files", "the request must be a JSON object".into()))?;
    let mut o = crate::cmd::check::FleetOptions { json: true, ..Default::default() };
    for (k, val) in obj {
        match k.as_str() {
            "files" => {}
            "expect" | "expect_fabric" => {
                let s = val.as_str().ok_or_else(|| bad(k, format!("{k} must be text")))?.trim().to_string();
                if s.chars().count() > super::request::MAX_VALUE_CHARS {
                    return Err(bad(k, format!("{k}: longer than {} characters", super::request::MAX_VALUE_CHARS)));
                }
                if !s.is_empty() {
                    if k == "expect" {
                        o.expect = Some(s);
                    } else {
                        o.expect_fabric = Some(s);
                    }
                }
            }
            "expect_nvlink" => {
                o.expect_nvlink = val.as_bool().ok_or_else(|| bad(k, "expect_nvlink must be true or false".into()))?
            }
            other => {
                return Err(bad(
                    other,
                    format!("{other}: not a field of /api/fleet (files, expect, expect_nvlink, expect_fabric)"),
                ))
            }
        }
    }
    // the two expectations, checked here so an error points at its field
    if let Some(s) = &o.expect {
        let (n, rest) = vramfit_hw::fleet::split_fleet_expect(s);
        vramfit_hw::verdict::parse_expect(rest).map_err(|e| bad("expect", e))?;
        if n == Some(0) {
            return Err(bad("expect", format!("--expect {s}: a fleet of 0 nodes")));
        }
    }
    if let Some(s) = &o.expect_fabric {
        vramfit_hw::fabric::expect::parse_expect_fabric(s).map_err(|e| bad("expect_fabric", e))?;
    }
    let files = obj.get("files").and_then(|f| f.as_array()).ok_or_else(|| {
        bad("files", "files: choose the fleet folder (one sub-folder per node with its tool outputs)".into())
    })?;
    if files.len() > FLEET_MAX_FILES {
        return Err(ApiError {
            status: 413,
            message: format!("{} files; at most {FLEET_MAX_FILES}", files.len()),
            field: Some("files".into()),
        });
    }
    let mut entries: Vec<(Vec<String>, String)> = Vec::with_capacity(files.len());
    for f in files {
        let (Some(path), Some(text)) = (f.get("path").and_then(|p| p.as_str()), f.get("text").and_then(|t| t.as_str()))
        else {
            return Err(bad("files", "files: each entry is {\"path\": …, \"text\": …}".into()));
        };
        if text.len() as u64 > vramfit_hw::files::MAX_INPUT_BYTES {
            return Err(ApiError {
                status: 413,
                message: format!(
                    "{path}: larger than the {}-byte limit of one file",
                    vramfit_hw::files::MAX_INPUT_BYTES
                ),
                field: Some("files".into()),
            });
        }
        let parts: Vec<String> = path
            .split('/')
            .filter(|p| !p.is_empty() && *p != "." && *p != "..")
            .map(|p| vramfit_hw::clean::escape_controls(&p.chars().take(200).collect::<String>()))
            .collect();
        if parts.is_empty() || parts.iter().any(|p| p.starts_with('.')) {
            continue;
        }
        entries.push((parts, text.to_string()));
    }
    // a chosen folder's own name comes first in every path: drop it
    let first = entries.first().map(|(p, _)| p[0].clone());
    if entries.iter().all(|(p, _)| p.len() >= 2 && Some(&p[0]) == first.as_ref())
        && entries.iter().any(|(p, _)| p.len() >= 3)
    {
        for (p, _) in &mut entries {
            p.remove(0);
        }
    }
    let input = fleet_input(entries, first);
    if input.nodes.is_empty() {
        return Err(bad("files", "no node folder: choose the fleet folder, with one sub-folder per node".into()));
    }
    let out = crate::cmd::check::run_fleet(&o, &input).map_err(|e| fleet_error(&e))?;
    Ok(Answer { content_type: "application/json", body: out.stdout, exit: out.code })
}

/// The uploaded files as a fleet: `NODE/FILE` into the node's folder, a
/// top-level `FILE` into the top level, anything deeper listed as not read.
fn fleet_input(entries: Vec<(Vec<String>, String)>, first: Option<String>) -> vramfit_hw::fleet::FleetInput {
    use vramfit_hw::fleet::{FleetInput, NodeInput, Unreadable};
    let mut input = FleetInput { source: first.unwrap_or_else(|| "upload".into()), ..FleetInput::default() };
    for (parts, text) in entries {
        let rel = parts.join("/");
        match parts.as_slice() {
            [_file] => input.top.push(NamedText { name: rel, text }),
            [node, _file] => {
                let count = input.nodes.len();
                match input.nodes.iter().position(|n| &n.name == node) {
                    Some(i) if input.nodes[i].files.len() < vramfit_hw::fleet::MAX_FILES_PER_NODE => {
                        input.nodes[i].files.push(NamedText { name: rel, text })
                    }
                    Some(_) => input
                        .unreadable
                        .push(Unreadable { path: rel, reason: "more files than a node folder may hold".into() }),
                    None if count < vramfit_hw::fleet::MAX_NODES => {
                        input.nodes.push(NodeInput { name: node.clone(), files: vec![NamedText { name: rel, text }] })
                    }
                    None => input
                        .unreadable
                        .push(Unreadable { path: rel, reason: "more node folders than a fleet may hold".into() }),
                }
            }
            _ => input
                .unreadable
                .push(Unreadable { path: rel, reason: "a folder inside a node folder is not read".into() }),
        }
    }
    input.nodes.sort_by(|a, b| a.name.cmp(&b.name));
    for n in &mut input.nodes {
        n.files.sort_by(|a, b| a.name.cmp(&b.name));
    }
    input
}
