//! vramfit-diagnose: why a run ran out of GPU memory, from what the user
//! already has: the error text (PyTorch of every era, JAX/XLA, TensorFlow,
//! vLLM, DeepSpeed logs, an nvidia-smi table pasted beside them),
//! `torch.cuda.memory_summary()`, a memory snapshot
//! pickle (read without running any pickle code), or the training script.
//!
//! [`detect`] decides what the input is; [`diagnose`] parses it and
//! classifies each OOM ([`classify`]); [`culprit`] puts a vramfit estimate
//! beside a failing request. Everything except [`input`] is a pure
//! function of bytes.

pub mod classify;
pub mod culprit;
pub mod ggml;
pub mod input;
pub mod lint;
pub mod nvidia_smi;
pub mod oom;
pub mod other_frameworks;
pub mod pickle;
mod reflow;
pub mod size;
pub mod snapshot;
pub mod summary;
pub mod svg;
mod text;

use serde::Serialize;

pub use classify::{classify, OomClass, Verdict};
pub use input::{Input, InputError};
pub use oom::{OomEvent, OomKind};

/// What the input is (`--kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Oom,
    Summary,
    Snapshot,
    Script,
}

impl Kind {
    pub fn key(self) -> &'static str {
        match self {
            Kind::Oom => "oom",
            Kind::Summary => "summary",
            Kind::Snapshot => "snapshot",
            Kind::Script => "script",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DiagnoseError {
    #[error("{name}: not recognised: {why}")]
    NotRecognised { name: String, why: String },
    #[error(transparent)]
    Input(#[from] InputError),
    // The inner error is in the message and deliberately not a `source`:
    // `{:#}` (anyhow's chain) would print it twice.
    #[error("{name}: {error}")]
    Snapshot { name: String, error: snapshot::SnapshotError },
    #[error("{name}: {error}")]
    Lint { name: String, error: lint::LintError },
}

/// One OOM with its verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnosed {
    pub event: OomEvent,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Diagnosis {
    Oom {
        ooms: Vec<Diagnosed>,
    },
    Summary {
        summary: summary::MemorySummary,
        verdict: summary::SummaryVerdict,
        /// OOM messages printed beside the summary
        ooms: Vec<Diagnosed>,
    },
    Snapshot {
        report: snapshot::SnapshotReport,
    },
    Script {
        report: lint::LintReport,
    },
}

impl Diagnosis {
    pub fn kind(&self) -> Kind {
        match self {
            Diagnosis::Oom { .. } => Kind::Oom,
            Diagnosis::Summary { .. } => Kind::Summary,
            Diagnosis::Snapshot { .. } => Kind::Snapshot,
            Diagnosis::Script { .. } => Kind::Script,
        }
    }
}

/// Does the text look like binary data (NULs, or mostly invalid UTF-8)?
fn binary_reason(bytes: &[u8]) -> Option<String> {
    let head = &bytes[..bytes.len().min(input::SNIFF)];
    if head.contains(&0) {
        return Some("binary data (NUL bytes), not a log, summary, snapshot pickle or script".into());
    }
    let lossy = String::from_utf8_lossy(head);
    let bad = lossy.chars().filter(|&c| c == '\u{fffd}').count();
    if bad * 20 > lossy.chars().count().max(1) {
        return Some("binary data (not UTF-8 text)".into());
    }
    None
}

/// Like [`detect`], but answers `Oom` for any text that is not a snapshot
/// or a summary (the caller scans for messages itself).
fn detect_without_scan(input: &Input) -> Result<Kind, DiagnoseError> {
    let nr = |why: &str| DiagnoseError::NotRecognised { name: input.name.clone(), why: why.to_string() };
    if input.bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(nr("the input is empty"));
    }
    if input::looks_like_pickle(&input.bytes) {
        return Ok(Kind::Snapshot);
    }
    if let Some(why) = binary_reason(&input.bytes) {
        return Err(nr(&why));
    }
    if String::from_utf8_lossy(&input.bytes).contains("PyTorch CUDA memory summary") {
        return Ok(Kind::Summary);
    }
    Ok(Kind::Oom)
}

/// What the input is, or why it is not recognised.
pub fn detect(input: &Input) -> Result<Kind, DiagnoseError> {
    let nr = |why: &str| DiagnoseError::NotRecognised { name: input.name.clone(), why: why.to_string() };
    if input.bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(nr("the input is empty"));
    }
    if input::looks_like_pickle(&input.bytes) {
        return Ok(Kind::Snapshot);
    }
    if let Some(why) = binary_reason(&input.bytes) {
        return Err(nr(&why));
    }
    let text = String::from_utf8_lossy(&input.bytes);
    if text.contains("PyTorch CUDA memory summary") {
        return Ok(Kind::Summary);
    }
    if !oom::scan(&text).is_empty() {
        return Ok(Kind::Oom);
    }
    if lint::looks_like_python(&text) {
        return Ok(Kind::Script);
    }
    Err(nr("no OOM message, torch.cuda.memory_summary() table, memory snapshot or Python script found"))
}

fn diagnosed(input: &Input, text: &str) -> Vec<Diagnosed> {
    oom::scan(text)
        .into_iter()
        .map(|mut e| {
            // line numbers of the file, not of the head + tail read (input.rs)
            e.line = input.true_line(e.line);
            e.lines.iter_mut().for_each(|l| *l = input.true_line(*l));
            if let Some(u) = e.context.deepspeed_usage.as_mut() {
                u.line = input.true_line(u.line);
            }
            Diagnosed { verdict: classify(&e), event: e }
        })
        .collect()
}

/// Lint the script `input` holds (a file too large to be read whole is too
/// large to lint, and the error gives its size, not the part read).
fn lint_input(input: &Input, text: &str) -> Result<lint::LintReport, DiagnoseError> {
    let err = |error| DiagnoseError::Lint { name: input.name.clone(), error };
    if input.skipped > 0 || input.truncated {
        return Err(err(lint::LintError::TooLarge(input.size.max(text.len() as u64) as usize)));
    }
    lint::lint(text).map_err(err)
}

/// Parse and diagnose `input` as `kind` (detected when `None`).
pub fn diagnose(input: &Input, kind: Option<Kind>) -> Result<Diagnosis, DiagnoseError> {
    let kind = match kind {
        Some(k) => k,
        None => {
            // scan once: detect() would scan for OOMs and diagnosing would again
            let k = detect_without_scan(input)?;
            if k == Kind::Oom {
                let text = String::from_utf8_lossy(&input.bytes);
                let ooms = diagnosed(input, &text);
                // a script that merely mentions the message (an except
                // clause matching it) is still a script
                let only_mentions = ooms.iter().all(|o| matches!(o.event.kind, OomKind::TorchPartial { .. }));
                let script = (input.name.ends_with(".py") || only_mentions) && lint::looks_like_python(&text);
                if !ooms.is_empty() && !script {
                    return Ok(Diagnosis::Oom { ooms });
                }
                if script {
                    return Ok(Diagnosis::Script { report: lint_input(input, &text)? });
                }
            }
            match k {
                Kind::Oom => detect(input)?,
                k => k,
            }
        }
    };
    let nr = |why: &str| DiagnoseError::NotRecognised { name: input.name.clone(), why: why.to_string() };
    if kind != Kind::Snapshot {
        if input.bytes.iter().all(|b| b.is_ascii_whitespace()) {
            return Err(nr("the input is empty"));
        }
        if let Some(why) = binary_reason(&input.bytes) {
            return Err(nr(&why));
        }
    }
    let text = || String::from_utf8_lossy(&input.bytes);
    match kind {
        Kind::Snapshot => {
            if !input::looks_like_pickle(&input.bytes) {
                return Err(nr("not a pickle (a snapshot starts with the bytes 0x80 0x02–0x05)"));
            }
            let snap = input::load_snapshot(input)?;
            Ok(Diagnosis::Snapshot { report: snap.analyze() })
        }
        Kind::Summary => {
            let t = text();
            let mut s = summary::parse(&t).ok_or_else(|| nr("no torch.cuda.memory_summary() table found"))?;
            s.line = input.true_line(s.line);
            Ok(Diagnosis::Summary { verdict: s.verdict(), summary: s, ooms: diagnosed(input, &t) })
        }
        Kind::Oom => {
            let ooms = diagnosed(input, &text());
            if ooms.is_empty() {
                return Err(nr("no out-of-memory message found"));
            }
            Ok(Diagnosis::Oom { ooms })
        }
        Kind::Script => {
            let t = text();
            if let Some(why) = lint::not_python_reason(&t) {
                return Err(nr(&why));
            }
            Ok(Diagnosis::Script { report: lint_input(input, &t)? })
        }
    }
}
