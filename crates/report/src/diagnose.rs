//! `vramfit diagnose`: JSON schema and the text renderer.
//!
//! Schema 1 (docs/diagnose.md): `{"schema": 1, "command": "diagnose",
//! "input": {…}, "kind": "oom"|"summary"|"snapshot"|"script",
//! "diagnosis": {…}, "estimate": {…}|null, "svg": path|null}`; bytes are
//! integers, parsed sizes keep their printed text and rounding tolerance.
//! The types are in [`schema`], built from the engine's values; the text
//! renderer reads the schema, so the JSON and the text say the same.

pub mod schema;

use crate::format::{bytes, fit_lines, shown, Width};
use crate::SCHEMA_VERSION;
use schema::{DiagnosedJson, DiagnosisJson, EstimateJson, MessageJson, OtherMessageJson};
use serde::Serialize;
use std::fmt::Write;
use vramfit_diagnose::culprit::CulpritReport;
use vramfit_diagnose::Diagnosis;

/// What was read.
#[derive(Debug, Clone, Serialize)]
pub struct InputInfo {
    pub name: String,
    /// size of the source (for a stream: what was read)
    pub size_bytes: u64,
    pub read_bytes: u64,
    /// middle of a large text file not read
    pub skipped_bytes: u64,
    /// lines in that middle (counted, so reported line numbers are the file's)
    pub skipped_lines: u64,
    /// a stream longer than the limit: only its start was read
    pub truncated: bool,
}

/// `--model MODEL.gguf` beside a llama.cpp / ggml failure: the estimator's
/// largest `-ngl` and context on the failing device.
#[derive(Debug, Clone, Serialize)]
pub struct GgufFitJson {
    pub model: String,
    /// the failing device (ggml's index)
    pub device: Option<u32>,
    /// the memory fitted against
    pub memory_bytes: u64,
    /// where that memory figure comes from
    pub memory_source: String,
    /// the context the searches hold (the log's `n_ctx`, else llama.cpp's default)
    pub n_ctx: u64,
    /// the largest `-ngl` whose plan fits at that context (null: not even `-ngl 0`)
    pub max_gpu_layers: Option<u64>,
    /// the `-ngl` the largest context is searched at (the log's offloaded layers, else all)
    pub at_gpu_layers: Option<u64>,
    /// the largest context (a multiple of 256) that fits at `at_gpu_layers` (null: none)
    pub max_context: Option<u64>,
    pub reasoning: Vec<String>,
}

/// The whole `diagnose --json` document.
#[derive(Debug, Clone, Serialize)]
pub struct DiagnoseReport {
    pub schema: u32,
    pub command: &'static str,
    pub input: InputInfo,
    pub kind: &'static str,
    pub diagnosis: DiagnosisJson,
    /// the estimate beside the failure (`--model` given)
    pub estimate: Option<EstimateJson>,
    /// `--model MODEL.gguf` beside a llama.cpp failure
    pub gguf_fit: Option<GgufFitJson>,
    /// where the SVG timeline was written (`--svg`)
    pub svg: Option<String>,
}

impl DiagnoseReport {
    pub fn new(input: InputInfo, diagnosis: &Diagnosis, estimate: Option<&CulpritReport>, svg: Option<String>) -> Self {
        let diagnosis = DiagnosisJson::from(diagnosis);
        DiagnoseReport {
            schema: SCHEMA_VERSION,
            command: "diagnose",
            input,
            kind: diagnosis.kind(),
            diagnosis,
            estimate: estimate.map(Into::into),
            gguf_fit: None,
            svg,
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")) + "\n"
    }

    /// Human report, fitted to `width`: long lines wrap (quoted log lines
    /// too, under their indent).
    pub fn to_text_fitted(&self, width: Width) -> String {
        fit_lines(&self.to_text(), width)
    }

    /// Human report, as wide as it gets.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        write_input(&mut out, &self.input, self.kind);
        match &self.diagnosis {
            DiagnosisJson::Oom { ooms } => write_ooms(&mut out, ooms),
            DiagnosisJson::Summary { summary, verdict, ooms } => {
                write_summary(&mut out, summary, verdict);
                for (n, d) in ooms.iter().enumerate() {
                    write_oom(&mut out, n + 1, d);
                }
            }
            DiagnosisJson::Snapshot { report } => write_snapshot(&mut out, report),
            DiagnosisJson::Script { report } => write_script(&mut out, report),
        }
        if let Some(e) = &self.estimate {
            write_estimate(&mut out, e);
        }
        if let Some(g) = &self.gguf_fit {
            write_gguf_fit(&mut out, g);
        }
        if let Some(p) = &self.svg {
            let _ = writeln!(out, "\ntimeline written to {}", shown(p));
        }
        out
    }
}

fn write_input(out: &mut String, i: &InputInfo, kind: &str) {
    let _ = write!(out, "{} ({}, read as {kind})", shown(&i.name), bytes(i.size_bytes));
    if i.skipped_bytes > 0 {
        let _ = write!(
            out,
            "; large file: read its first and last parts, {} in the middle skipped ({} lines, counted: line numbers are the file's)",
            bytes(i.skipped_bytes),
            i.skipped_lines
        );
    }
    if i.truncated {
        let _ = write!(out, "; stream longer than the limit: only its first {} read", bytes(i.read_bytes));
    }
    out.push('\n');
}

fn write_ooms(out: &mut String, ooms: &[DiagnosedJson]) {
    let _ = writeln!(out, "{} out-of-memory message{} found", ooms.len(), if ooms.len() == 1 { "" } else { "s" });
    write_by_device(out, ooms);
    for (n, d) in ooms.iter().enumerate() {
        write_oom(out, n + 1, d);
    }
}

fn write_summary(out: &mut String, summary: &schema::SummaryJson, verdict: &schema::SummaryVerdictJson) {
    let opt = |v: Option<u64>| v.map(|d| d.to_string()).unwrap_or_else(|| "?".into());
    let _ = writeln!(
        out,
        "\ntorch.cuda.memory_summary() of device {} (line {}): CUDA OOMs {}, cudaMalloc retries {}",
        opt(summary.device.map(u64::from)),
        summary.line,
        opt(summary.cuda_ooms),
        opt(summary.cudamalloc_retries)
    );
    let _ = writeln!(out, "  {:<24}{:>12}{:>12}", "", "current", "peak");
    for r in summary.rows.iter().filter(|r| r.pool == "all") {
        let f = |c: &schema::CellJson| if c.is_bytes { bytes(c.value) } else { c.value.to_string() };
        let _ = writeln!(out, "  {:<24}{:>12}{:>12}", shown(&r.metric), f(&r.current), f(&r.peak));
    }
    if let Some(c) = verdict.class {
        let _ = writeln!(out, "verdict: {c}");
    }
    for f in &verdict.findings {
        let _ = writeln!(out, "  - {}", shown(f));
    }
    for (k, f) in verdict.fixes.iter().enumerate() {
        let _ = writeln!(out, "  fix {}. {}", k + 1, shown(f));
    }
}

fn write_snapshot(out: &mut String, report: &schema::SnapshotReportJson) {
    let _ = writeln!(
        out,
        "memory snapshot: {} unique frames in {} tracebacks ({} shared frame and {} shared traceback references)",
        report.frames, report.stacks, report.shared_frame_refs, report.shared_stack_refs
    );
    for d in &report.devices {
        write_snapshot_device(out, d);
    }
}

fn write_snapshot_device(out: &mut String, d: &schema::DeviceReportJson) {
    let _ = writeln!(
        out,
        "\nGPU {}: {} reserved in {} segments, {} allocated ({} requested by tensors), {} free inside segments (largest free block {})",
        d.device,
        bytes(d.reserved_bytes),
        d.segments,
        bytes(d.allocated_bytes),
        bytes(d.requested_bytes),
        bytes(d.cached_free_bytes),
        bytes(d.largest_free_block_bytes)
    );
    match &d.peak {
        Some(p) => {
            let _ = writeln!(
                out,
                "  peak: {} allocated ({} reserved) after trace entry {} of {}",
                bytes(p.allocated_bytes),
                bytes(p.reserved_bytes),
                p.index.map(|i| i.to_string()).unwrap_or_else(|| "0 (before the trace)".into()),
                d.trace_entries
            );
        }
        None => {
            let _ = writeln!(out, "  no trace in the snapshot: live allocations below are at the snapshot");
        }
    }
    if !d.groups.is_empty() {
        let _ = writeln!(out, "  live at the peak, by what the frames say:");
        for g in d.groups.iter().take(8) {
            let _ = writeln!(out, "    {:>12}  {:<40} ({} allocations)", bytes(g.bytes), shown(&g.label), g.count);
        }
    }
    if !d.sites.is_empty() {
        let _ = writeln!(out, "  allocation sites (the timeline's bands): most held, at the peak");
        for s in &d.sites {
            let _ = writeln!(out, "    {:>12} {:>12}  {}", bytes(s.max_bytes), bytes(s.peak_bytes), s.label);
        }
    }
    if !d.peak_top.is_empty() {
        let _ = writeln!(out, "  largest live allocations at the peak:");
        for l in d.peak_top.iter().take(5) {
            let _ = writeln!(out, "    {:>12}  {}", bytes(l.size_bytes), shown(&l.group));
            for f in l.frames.iter().take(3) {
                let _ = writeln!(out, "                  {}", shown(f));
            }
        }
    }
    if !d.most_fragmented.is_empty() {
        let _ = writeln!(out, "  segments with free space inside (reserved vs allocated):");
        for s in d.most_fragmented.iter().take(5) {
            let _ = writeln!(
                out,
                "    0x{:x} {}: {} reserved, {} allocated, {} free (largest block {})",
                s.address,
                shown(&s.segment_type),
                bytes(s.total_bytes),
                bytes(s.allocated_bytes),
                bytes(s.free_bytes),
                bytes(s.largest_free_block_bytes)
            );
        }
    }
    for o in &d.ooms {
        let _ = writeln!(out, "  OOM at trace entry {}: {} — {}", o.index, o.class, shown(&o.reasoning));
    }
    for n in &d.notes {
        let _ = writeln!(out, "  note: {}", shown(n));
    }
}

fn write_script(out: &mut String, report: &schema::LintReportJson) {
    if report.findings.is_empty() {
        let _ = writeln!(out, "no memory findings in {} lines", report.lines);
    } else {
        let n = report.findings_total;
        let _ = writeln!(out, "{n} memory finding{} in {} lines", if n == 1 { "" } else { "s" }, report.lines);
        if n > report.findings.len() {
            let _ = writeln!(out, "(the first {} are listed)", report.findings.len());
        }
    }
    if report.error_nodes > 0 {
        let _ = writeln!(
            out,
            "(the parser could not read {} part(s) of the script; findings come from the rest)",
            report.error_nodes
        );
    }
    for f in &report.findings {
        let _ = writeln!(
            out,
            "\nline {}:{} {}\n    {}\n  why: {}\n  fix: {}",
            f.line,
            f.column,
            f.rule,
            shown(&f.code),
            shown(&f.why),
            shown(&f.fix)
        );
    }
}

fn write_estimate(out: &mut String, e: &EstimateJson) {
    let _ = writeln!(out, "\nestimate beside the failure (per GPU):");
    for c in &e.categories {
        let _ = writeln!(out, "  {:<18}{:>12}  {:>4.0}%", c.category, bytes(c.bytes), c.share * 100.0);
    }
    let _ = writeln!(out, "  {:<18}{:>12}", "total", bytes(e.estimate_bytes));
    let _ = writeln!(out, "  {:<18}{:>12}", "card", bytes(e.card_bytes));
    if let Some(c) = e.culprit {
        let _ = writeln!(out, "  culprit: {c} ({})", bytes(e.culprit_bytes));
    }
    for r in &e.reasoning {
        let _ = writeln!(out, "  - {}", shown(r));
    }
    if !e.ladder.is_empty() {
        let _ = writeln!(out, "  ladder on this card (cumulative, cheapest first):");
        for r in &e.ladder {
            let what: Vec<String> = r
                .changes
                .iter()
                .map(|c| format!("{} {}", c.category, crate::format::signed_bytes(c.delta_bytes as i128)))
                .collect();
            let _ = writeln!(
                out,
                "    {:<28}{:>12}  {}{}{}",
                shown(&r.name),
                r.per_gpu_bytes.map(bytes).unwrap_or_else(|| "—".into()),
                if r.applied { "" } else { "(not applied) " },
                shown(&r.detail),
                if what.is_empty() { String::new() } else { format!(" [{}]", what.join(", ")) }
            );
        }
    }
}

fn write_gguf_fit(out: &mut String, g: &GgufFitJson) {
    let _ = writeln!(
        out,
        "\nthe model beside the failure ({}, {} on {}):",
        shown(&g.model),
        bytes(g.memory_bytes),
        g.device.map(|d| format!("device {d}")).unwrap_or_else(|| "the device".into())
    );
    let ngl = g.max_gpu_layers.map(|n| format!("-ngl {n}")).unwrap_or_else(|| "none (not even -ngl 0)".into());
    let _ = writeln!(out, "  largest -ngl at -c {}: {ngl}", g.n_ctx);
    let ctx = g.max_context.map(|c| format!("-c {c}")).unwrap_or_else(|| "none".into());
    let at = g.at_gpu_layers.map(|n| format!("-ngl {n}")).unwrap_or_else(|| "all layers".into());
    let _ = writeln!(out, "  largest context at {at}: {ctx}");
    for r in &g.reasoning {
        let _ = writeln!(out, "  - {}", shown(r));
    }
}

/// One line per GPU (and rank) when the log has several.
fn write_by_device(out: &mut String, ooms: &[DiagnosedJson]) {
    let mut by: std::collections::BTreeMap<(Option<u32>, Option<u32>), Vec<&'static str>> = Default::default();
    for d in ooms {
        let dev = match &d.event.message {
            MessageJson::Torch(t) => Some(t.device),
            MessageJson::TorchPartial(t) => t.device,
            MessageJson::Other(OtherMessageJson::TensorFlow { gpu, .. }) => *gpu,
            MessageJson::Other(OtherMessageJson::Ggml(g)) => g.device,
            MessageJson::Other(OtherMessageJson::TorchAsync { device, .. }) => *device,
            _ => None,
        };
        by.entry((dev, d.event.rank)).or_default().push(d.verdict.class);
    }
    if by.len() < 2 {
        return;
    }
    for ((dev, rank), classes) in by {
        let _ = writeln!(
            out,
            "  {}{}: {}",
            dev.map(|g| format!("GPU {g}")).unwrap_or_else(|| "device ?".into()),
            rank.map(|r| format!(" (rank {r})")).unwrap_or_default(),
            classes.join(", ")
        );
    }
}

/// What produced a message, in words.
fn source_words(m: &MessageJson) -> String {
    match m {
        MessageJson::Torch(t) => format!(
            "PyTorch {} ({}), GPU {}",
            t.backend,
            match t.era {
                "cached" => "≤1.4 message",
                "reserved" => "1.5–2.0 message",
                "parenthesised" => "≤2.0 message",
                _ => "≥2.1 message",
            },
            t.device
        ),
        MessageJson::TorchPartial(t) => format!(
            "PyTorch{} (partial message{})",
            t.backend.as_deref().map(|b| format!(" {b}")).unwrap_or_default(),
            t.device.map(|d| format!(", GPU {d}")).unwrap_or_default()
        ),
        MessageJson::Other(o) => match o {
            OtherMessageJson::Xla { .. } => "JAX/XLA".to_string(),
            OtherMessageJson::TensorFlow { gpu, .. } => {
                format!("TensorFlow{}", gpu.map(|g| format!(", GPU {g}")).unwrap_or_default())
            }
            OtherMessageJson::CudaError { .. } => "CUDA runtime".to_string(),
            OtherMessageJson::Mps { .. } => "PyTorch MPS (Apple)".to_string(),
            OtherMessageJson::LegacyThc { .. } => "PyTorch ≤0.4 (THC)".to_string(),
            OtherMessageJson::TensorFlowDriver { .. } => "TensorFlow (StreamExecutor)".to_string(),
            OtherMessageJson::AllocatorRetries { .. } => "PyTorch allocator (DeepSpeed warning)".to_string(),
            OtherMessageJson::CudaDriver { .. } => {
                "CUDA driver (PyTorch expandable segments or an extension)".to_string()
            }
            OtherMessageJson::TorchAsync { device, .. } => {
                format!("PyTorch cudaMallocAsync{}", device.map(|d| format!(", GPU {d}")).unwrap_or_default())
            }
            OtherMessageJson::VllmStartupFree { device, .. } => {
                format!(
                    "vLLM start-up check{}",
                    device.as_deref().map(|d| format!(", {}", shown(d))).unwrap_or_default()
                )
            }
            OtherMessageJson::Bfc { allocator, .. } => format!("XLA/TensorFlow BFC allocator ({})", shown(allocator)),
            OtherMessageJson::Cut { form, .. } => format!("{} (cut)", shown(form)),
            OtherMessageJson::Ggml(g) => {
                format!("llama.cpp / ggml, {} {}", shown(&g.buffer_type), g.buffer.replace('_', " "))
            }
            OtherMessageJson::VllmNoCacheBlocks { .. }
            | OtherMessageJson::VllmMaxLenTokens { .. }
            | OtherMessageJson::VllmMaxLenMemory { .. } => "vLLM".to_string(),
        },
    }
}

fn write_oom(out: &mut String, n: usize, d: &DiagnosedJson) {
    let e = &d.event;
    let v = &d.verdict;
    let _ = write!(out, "\nOOM {n}: line {}, {}", e.line, source_words(&e.message));
    if let Some(r) = e.rank {
        let _ = write!(out, ", rank {r}");
    }
    if e.occurrences > 1 {
        let lines: Vec<String> = e.lines.iter().map(|l| l.to_string()).collect();
        let _ = write!(out, " (printed {} times: lines {})", e.occurrences, lines.join(", "));
    }
    if let Some(a) = e.context.activity {
        let _ = write!(out, ", during {}", activity_words(a));
    }
    if let Some(m) = &e.context.forward_of {
        let _ = write!(out, " (forward of {})", shown(m));
    }
    if e.context.deepspeed {
        out.push_str(", DeepSpeed");
    }
    out.push('\n');
    let _ = writeln!(out, "  {}: {}", v.class, shown(&v.headline));
    if !v.figures.is_empty() {
        let figs: Vec<String> = v.figures.iter().map(|f| format!("{} {}", shown(&f.name), bytes(f.bytes))).collect();
        let _ = writeln!(out, "  figures: {}", figs.join(" · "));
    }
    if !v.decided_by.is_empty() {
        let by: Vec<String> = v
            .decided_by
            .iter()
            .filter_map(|n| v.figures.iter().find(|f| &f.name == n))
            .map(|f| format!("{} {}", shown(&f.name), bytes(f.bytes)))
            .collect();
        let _ = writeln!(out, "  decided by: {}", by.join(" · "));
    }
    if let Some(r) = &v.runner_up {
        let _ = writeln!(
            out,
            "  runner-up: {} — {}{} ({})",
            r.class,
            shown(&r.what),
            r.bytes.map(|b| format!(" {}", bytes(b))).unwrap_or_default(),
            shown(&r.why)
        );
    }
    if !v.missing.is_empty() {
        let list: Vec<String> = v
            .missing
            .iter()
            .map(|m| {
                let assumed = m.assumed_bytes.map(|b| format!(", assumed {}", bytes(b))).unwrap_or_default();
                let matters = match (&m.otherwise, m.matters) {
                    (Some(o), _) => format!(", matters: {} at {}", o.class, bytes(o.bytes)),
                    (None, true) => ", matters".to_string(),
                    (None, false) => ", does not change the cause".to_string(),
                };
                format!("{}{assumed}{matters}", shown(&m.figure))
            })
            .collect();
        let _ = writeln!(out, "  not in the text: {}", list.join("; "));
    }
    if let Some(u) = &e.context.deepspeed_usage {
        let _ = writeln!(
            out,
            "  DeepSpeed see_memory_usage (line {}): allocated {} (max {}), reserved {} (max {})",
            u.line,
            bytes(u.allocated_bytes),
            bytes(u.max_allocated_bytes),
            bytes(u.reserved_bytes),
            bytes(u.max_reserved_bytes)
        );
    }
    let _ = writeln!(out, "  why:");
    for r in &v.reasoning {
        let _ = writeln!(out, "    - {}", shown(r));
    }
    let _ = writeln!(out, "  fixes, cheapest first:");
    for (k, f) in v.fixes.iter().enumerate() {
        let _ = writeln!(out, "    {}. [{}] {} — {}", k + 1, f.cost, shown(&f.action), shown(&f.why));
    }
}

/// The activity key in words.
fn activity_words(key: &str) -> &'static str {
    match key {
        "optimizer_step" => "optimizer step",
        "backward" => "autograd backward",
        "forward" => "forward",
        "setup" => "setup (optimizer / engine construction)",
        "checkpoint_save" => "checkpoint save",
        "generation" => "generation",
        _ => "an unknown activity",
    }
}
