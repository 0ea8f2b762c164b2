//! Calibration against llama.cpp's own start-up log lines
//! (`calibration/data/published/llamacpp.jsonl`, one published log per line),
//! replayed by `vramfit_ingest::calibration::llamacpp` (the same code
//! `vramfit calibrate --set published` runs for its `llamacpp` group).
//!
//! Each case's GGUF header is written as llama.cpp's converter and
//! `llama-quantize` would have written it, parsed with the parser `vramfit
//! estimate` uses, and the logged launch planned; every quoted figure (model,
//! KV and compute buffer per device) is compared as llama.cpp prints it. The
//! test prints the signed error of every figure and fails when one is outside
//! its limit: on current builds (≥ b9400) KV 1 % and compute 10 % (issue 22),
//! otherwise 3 %.

use std::collections::BTreeMap;
use std::path::PathBuf;
use vramfit_ingest::calibration::llamacpp::{
    embedded_llamacpp, header_path, parse_llamacpp_cases, replay, replay_header, BufferKind, LogFigure,
    CURRENT_BUILD_FROM, MEASURED_CPU_FILE,
};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[test]
fn published_llama_cpp_logs_are_reproduced_within_their_limits() {
    let cases = embedded_llamacpp().expect("the embedded set parses");
    assert!(cases.len() >= 15, "at least 15 published logs, found {}", cases.len());
    let mut failures = Vec::new();
    let mut by_field: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut all = Vec::new();
    println!(
        "{:<44} {:>6} {:<18} {:>10} {:>10} {:>9} {:>6}",
        "case", "build", "figure", "logged", "vramfit", "error", "limit"
    );
    // VRAMFIT_CALIBRATION_CASE=<id> runs one case (for tracing)
    let only = std::env::var("VRAMFIT_CALIBRATION_CASE").ok();
    for c in cases.iter().filter(|c| only.as_deref().is_none_or(|o| o == c.id)) {
        for f in replay(c).unwrap_or_else(|e| panic!("{}: {e}", c.id)) {
            let exact = f.vramfit_bytes as f64 / 1048576.0;
            println!(
                "{:<44} {:>6} {:<18} {:>10.2} {:>10.3} {:>+8.2}% {:>5.0}%",
                f.id, f.build, f.key, f.logged_mib, exact, f.error_pct, f.limit_pct
            );
            let era = if f.build >= CURRENT_BUILD_FROM { "current" } else { "older" };
            by_field.entry(format!("{} ({era})", f.key)).or_default().push(f.error_pct.abs());
            all.push(f.error_pct.abs());
            if !f.within_limit() {
                failures.push(format!(
                    "{} {} (b{}): logged {:.2} MiB, vramfit {:.2} MiB ({:+.2} %, limit {} %)",
                    f.id, f.key, f.build, f.logged_mib, exact, f.error_pct, f.limit_pct
                ));
            }
        }
    }
    for (k, v) in &by_field {
        println!(
            "{k:<28} n={:<3} median |error| {:.2} %  max {:.2} %",
            v.len(),
            median(v.clone()),
            v.iter().fold(0.0f64, |a, &b| a.max(b))
        );
    }
    println!(
        "all figures n={} median |error| {:.2} %  max {:.2} %",
        all.len(),
        median(all.clone()),
        all.iter().fold(0.0f64, |a, &b| a.max(b))
    );
    assert!(failures.is_empty(), "outside their limits:\n{}", failures.join("\n"));
}

/// The set holds figures of every buffer kind.
#[test]
fn every_buffer_kind_is_checked() {
    let cases = embedded_llamacpp().unwrap();
    let kinds: Vec<BufferKind> = cases.iter().flat_map(|c| replay(c).unwrap()).map(|f| f.kind).collect();
    for k in [BufferKind::Model, BufferKind::Kv, BufferKind::Compute] {
        assert!(kinds.contains(&k), "{k:?} never compared");
    }
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The measured CPU-only set (calibration/data/measured/llamacpp-cpu.jsonl,
/// README beside it): llama-server of ggml-org/llama.cpp@0c1e57098 (b11312)
/// started on GGUFs at the real dimensions of Qwen3-0.6B, Gemma 3 1B,
/// Qwen3-30B-A3B, Qwen3.5-27B (also with its MTP layer, with and without
/// `--spec-type draft-mtp`) and gpt-oss-20b, its log lines quoted
/// verbatim. Each case is replayed on the header llama.cpp loaded (kept
/// beside the set) and held to issue 22's bar: KV (and recurrent state)
/// within 1 %, compute within 10 %, model buffers within 3 %.
#[test]
fn measured_cpu_logs_are_reproduced_within_their_limits() {
    let root = repo_root();
    let text = std::fs::read_to_string(root.join(MEASURED_CPU_FILE)).expect("the measured set is in the repository");
    let cases = parse_llamacpp_cases(&text, MEASURED_CPU_FILE).expect("the measured set parses");
    assert!(cases.len() >= 8, "at least 8 measured logs, found {}", cases.len());
    let mut failures = Vec::new();
    let mut figs: Vec<LogFigure> = Vec::new();
    for c in &cases {
        assert!(c.build >= CURRENT_BUILD_FROM, "{}: a current build", c.id);
        let path = root.join(header_path(c).unwrap_or_else(|e| panic!("{}: {e}", c.id)));
        let head = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {}: {e}", c.id, path.display()));
        let len = c.file_len().unwrap_or_else(|e| panic!("{}: {e}", c.id));
        for f in replay_header(c, &head, len).unwrap_or_else(|e| panic!("{}: {e}", c.id)) {
            let exact = f.vramfit_bytes as f64 / 1048576.0;
            println!(
                "{:<30} {:<16} {:>10.2} {:>10.3} {:>+8.2}% {:>5.0}%",
                f.id, f.key, f.logged_mib, exact, f.error_pct, f.limit_pct
            );
            // the graphs vramfit rebuilds op for op (all but the qwen35moe
            // trunk, 3.9 % under at -np 1: docs/gguf.md) land on llama.cpp's
            // printed figure: within 0.1 % (b11312's embeddings input,
            // build::EMBD_INPUT, was 2.00–5.63 MiB, 4.5–7.4 %, before)
            // (the MTP context's head, src/models/qwen35.cpp graph_mtp, is
            // rebuilt op for op: its figures are held to 0.1 % too)
            // (Qwen3.5's gated delta-net trunk, src/models/qwen35.cpp, is rebuilt
            // op for op: the dense qwen35 figures, with and without n_rs_seq
            // snapshots, are held to 0.1 %)
            let recurrent_trunk = c.arch().unwrap_or("") == "qwen35moe";
            let exact_graph = !recurrent_trunk || f.key.starts_with("mtp ");
            if !f.within_limit() || (exact_graph && f.error_pct.abs() > 0.1) {
                failures.push(format!(
                    "{} {}: logged {:.2} MiB, vramfit {:.2} MiB ({:+.2} %, limit {} %)",
                    f.id, f.key, f.logged_mib, exact, f.error_pct, f.limit_pct
                ));
            }
            figs.push(f);
        }
    }
    for k in [BufferKind::Kv, BufferKind::Compute] {
        assert!(figs.iter().any(|f| f.kind == k), "{k:?} never compared");
    }
    assert!(failures.is_empty(), "outside their limits:\n{}", failures.join("\n"));
}
