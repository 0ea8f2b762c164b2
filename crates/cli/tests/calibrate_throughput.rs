//! `vramfit calibrate --set throughput`: the planner's time model against the
//! published throughputs (calibration/data/published/throughput.jsonl), through
//! the real binary. The bar of issue 11: median ratio modelled / published
//! within 0.85–1.15, no counted case outside 0.6–1.6.

mod common;
use common::run;

#[test]
fn time_model_meets_the_bar_on_published_throughputs() {
    let (out, _) = run(&["calibrate", "--set", "throughput", "--json"], 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["set"], "throughput");
    let median = v["median_ratio"].as_f64().unwrap();
    assert!((0.85..=1.15).contains(&median), "median ratio {median}");
    let cases = v["cases"].as_array().unwrap();
    let mut counted = 0;
    for c in cases {
        match c["ratio"].as_f64() {
            Some(r) => {
                counted += 1;
                assert!((0.6..=1.6).contains(&r), "{}: ratio {r}", c["id"]);
                assert!(c["url"].as_str().unwrap().starts_with("https://"), "{c}");
            }
            // a case left out says why
            None => assert!(!c["skipped"].as_str().unwrap_or("").is_empty(), "{c}"),
        }
    }
    // most of the set is modelled, every group among them
    assert!(counted >= 55, "only {counted} cases modelled");
    assert_eq!(v["counted"].as_u64().unwrap(), counted as u64);
    for g in ["full", "lora", "qlora", "offload", "serving"] {
        assert!(cases.iter().any(|c| c["group"] == g && c["ratio"].is_number()), "no {g} case modelled");
    }
    assert_eq!(v["pass"], true);
    // the human table prints the ratio per case
    let (text, _) = run(&["calibrate", "--set", "throughput"], 0);
    assert!(text.contains("foundry_mpt7b_a100_80gb_8gpu_s2048") && text.contains("median ratio"), "{text}");
}
