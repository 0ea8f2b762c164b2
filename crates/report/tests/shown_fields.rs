//! The text renderers escape the strings they take from input
//! (`format::shown`) themselves, field by field: a line break inside a
//! model name is shown as `\n`, never breaks the line (the CLI's last-resort
//! pass keeps line breaks, so only the renderer can catch this).

use vramfit_core::{estimate, ModelSpec, Workload};
use vramfit_report::estimate::{EstimateReport, FitInfo, ModelInfo, WorkloadInfo};

const EVIL: &str = "evil\u{1b}]0;pwned\u{7}\nllama: FITS";

fn no_raw_controls(text: &str) {
    assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "{text:?}");
}

#[test]
fn estimate_report_escapes_the_model_name_source_gpu_and_notes() {
    let spec = ModelSpec::llama_like(EVIL, 1024, 4, 16, 4, 4096, 32000);
    let w = Workload::default();
    let mut ledger = estimate(&spec, &w).unwrap();
    ledger.notes.push(format!("config key {EVIL}"));
    let model = ModelInfo::of(&spec, format!("/tmp/{EVIL}/config.json"), None, 0).unwrap();
    let fit = vramfit_core::infer::fit(&ledger, 80 << 30, 80 << 30);
    let fit = FitInfo::of(EVIL, &fit, None, None);
    let r = EstimateReport::new(model, WorkloadInfo::from(&w), &ledger, None, Some(fit));
    for explain in [false, true] {
        let text = r.to_text(explain);
        no_raw_controls(&text);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("evil\\x1b]0;pwned\\x07\\nllama: FITS — "), "{}", lines[0]);
        assert_eq!(lines[1], "source: /tmp/evil\\x1b]0;pwned\\x07\\nllama: FITS/config.json");
        assert!(lines.contains(&"note: config key evil\\x1b]0;pwned\\x07\\nllama: FITS"), "{text}");
        assert!(text.contains("evil\\x1b]0;pwned\\x07\\nllama: FITS: FITS — needs"), "{text}");
        assert!(!lines.contains(&"llama: FITS"), "a line break from input reached the output:\n{text}");
    }
    // JSON keeps the name as it is (serde escapes it)
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["model"]["name"], EVIL);
}
