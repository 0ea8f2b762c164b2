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
use vramfit_ingest::calibration::llamacpp::{embedded_llamacpp, replay, BufferKind, CURRENT_BUILD_FROM};

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
