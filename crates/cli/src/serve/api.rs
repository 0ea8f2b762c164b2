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
    Answer { content_type, body: out.stdout, exit: out.code }
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
