//! `vramfit calibrate --set published` through the binary: every published
//! figure is compared with the estimate of what its tool measures, or
//! excluded with a reason; the accuracy bars of issue 10 hold per group and
//! overall (docs/training.md, "Accuracy on published measurements").

mod common;
use common::run;
use serde_json::Value;

fn report() -> Value {
    // every bar is met: exit 0
    let (out, _) = run(&["calibrate", "--set", "published", "--json"], 0);
    serde_json::from_str(&out).unwrap()
}

fn group<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["groups"].as_array().unwrap().iter().find(|g| g["group"] == name).unwrap_or_else(|| panic!("no group {name}"))
}

#[test]
fn groups_meet_the_published_bars() {
    let v = report();
    assert_eq!(v["set"], "published");
    for name in ["qlora", "lora", "full", "serving", "runtime", "multi_gpu"] {
        let g = group(&v, name);
        let median = g["median_abs_error_pct"].as_f64().unwrap();
        let mean = g["mean_signed_error_pct"].as_f64().unwrap();
        assert!(median <= 5.0, "{name}: median |error| {median:.2}% > 5%");
        assert!(mean >= -3.0, "{name}: mean signed error {mean:.2}% < -3% (under-predicts on average)");
        assert_eq!(g["pass"], true, "{name}");
    }
    // at least 10 compared figures in each of the five workload groups
    for name in ["qlora", "lora", "full", "serving", "multi_gpu"] {
        assert!(group(&v, name)["cases"].as_u64().unwrap() >= 10, "{name}");
    }
}

/// The overall bar (median |error| ≤ 3%, mean signed error ≥ −3%) and the multi-GPU
/// group's, which were not met before FSDP1's frozen units were modelled.
#[test]
fn the_overall_and_multi_gpu_bars_are_met() {
    let v = report();
    let g = group(&v, "multi_gpu");
    let (median, mean) = (g["median_abs_error_pct"].as_f64().unwrap(), g["mean_signed_error_pct"].as_f64().unwrap());
    // 9.94% / -6.28% before FSDP1's unsharded root unit and root flat gradient in
    // backward, LitGPT's unsharded gradients under Fabric's no_backward_sync accumulation
    // and torchtitan's vocabulary-parallel loss under TP; 6.15% / -3.92% before the full
    // unsharded root, the quantized base gathered as stored, transformers 4.48's loss
    // moment (6.26% / -4.86% with those) and the gradients FSDP1's frozen units keep
    // under reentrant checkpointing (3.25% / -0.79%)
    assert!(median <= 5.0, "multi_gpu median |error| {median:.2}% > 5%");
    assert!(mean >= -3.0, "multi_gpu mean signed error {mean:.2}% < -3%");
    let s = &v["summary"];
    let (median, mean) = (s["median_abs_error_pct"].as_f64().unwrap(), s["mean_signed_error_pct"].as_f64().unwrap());
    // 3.64% before the corrections above
    assert!(median <= 3.0, "overall median |error| {median:.2}% > 3%");
    assert!(mean >= -3.0, "overall mean signed error {mean:.2}% < -3%");
    assert_eq!(s["pass"], true);
}

#[test]
fn every_figure_is_compared_or_excluded_with_a_reason() {
    let v = report();
    // memory.jsonl's rows (the llamacpp and llamacpp_cpu groups are the llama.cpp logs':
    // tests/calibrate_llamacpp.rs)
    let cases: Vec<&Value> = v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["group"] != "llamacpp" && c["group"] != "llamacpp_cpu")
        .collect();
    let excluded = v["excluded"].as_array().unwrap();
    // one row per measured figure: each line's `measured` and its `other_measurements`
    let text = include_str!("../../../calibration/data/published/memory.jsonl");
    let figures: usize = text
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            1 + r["other_measurements"].as_array().map_or(0, Vec::len)
        })
        .sum();
    assert_eq!(text.lines().count(), 128);
    assert_eq!(cases.len() + excluded.len(), figures);
    for e in excluded {
        assert!(e["reason"].as_str().unwrap().len() > 20, "{e}");
    }
    // each row says how it was measured, and a capacity is compared with the sign of safety
    for c in &cases {
        assert!(c["measured"].as_str().unwrap().contains('('), "{c}");
        let (e, s) = (c["error_pct"].as_f64().unwrap(), c["safety_error_pct"].as_f64().unwrap());
        if c["quantity"] == "engine_kv_pool" {
            assert_eq!(s, -e);
        } else {
            assert_eq!(s, e);
        }
    }
    // the sources of constants are shown but not counted
    let sources: Vec<&&Value> = cases.iter().filter(|c| c["source_of_constant"] == true).collect();
    assert_eq!(sources.len(), 4, "NCCL 544/688 MiB, vLLM's non-torch 1.79 GiB, the per-layer-graph bound (0.21 GiB)");
}

#[test]
fn the_table_says_how_the_set_was_measured_and_never_prints_minus_zero() {
    let (out, _) = run(&["calibrate", "--set", "published"], 0);
    assert!(out.contains("real GPU figures others published"), "{out}");
    assert!(out.contains("Not compared ("), "{out}");
    assert!(out.contains("multi_gpu") && out.contains("mean signed error"), "{out}");
    assert!(!out.contains("-0.00%"), "{out}");
    let (fake, _) = run(&["calibrate"], 0);
    assert!(fake.contains("FakeTensorMode + MemTracker") && fake.contains("without a GPU"), "{fake}");
    assert!(!fake.contains("PyTorch-measured"));
    assert!(!fake.contains("-0.00%"), "{fake}");
}

#[test]
fn group_filters_name_the_sets_groups() {
    let (_, err) = run(&["calibrate", "--set", "published", "--group", "C"], 2);
    assert!(err.contains("qlora, lora, full, serving, multi_gpu, runtime"), "{err}");
    let (_, err) = run(&["calibrate", "--group", "qlora"], 2);
    assert!(err.contains("A, B and C"), "{err}");
    let (out, _) = run(&["calibrate", "--set", "published", "--group", "serving", "--json"], 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["cases"].as_array().unwrap().iter().all(|c| c["group"] == "serving"));
}

#[test]
fn a_bad_published_line_names_its_line_and_field() {
    let text = include_str!("../../../calibration/data/published/memory.jsonl");
    let first = text.lines().next().unwrap();
    let dir = std::env::temp_dir().join(format!("vramfit-pub-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("memory.jsonl");
    for (from, to, field) in [
        ("\"micro_batch_per_gpu\": 1", "\"micro_batch_per_gpu\": -1", "workload.micro_batch_per_gpu"),
        ("\"engine\": \"litgpt\"", "\"engine\": \"tgi\"", "vramfit.engine"),
        ("\"hidden_size\": 4544", "\"hidden_size\": \"big\"", "model.hidden_size"),
        ("\"group\": \"lora\"", "\"group\": \"other\"", "group"),
    ] {
        assert!(first.contains(from), "{from}");
        std::fs::write(&f, format!("{}\n{}\n", text.lines().nth(1).unwrap(), first.replace(from, to))).unwrap();
        let (_, err) = run(&["calibrate", "--set", "published", "--cases", f.to_str().unwrap()], 2);
        assert!(err.contains("memory.jsonl:2") && err.contains(field), "{field}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
