//! `vramfit calibrate`: every embedded case with its error, the summary, exit codes.

use assert_cmd::Command;
use serde_json::Value;

#[test]
fn embedded_cases_pass_the_accuracy_bar() {
    let out = Command::cargo_bin("vramfit").unwrap().args(["calibrate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.contains("C_tinyllama-1.1b_b_amp_bf16_b8_s2048_sdpa_ckpt0"));
    assert!(s.contains("A_llama2-7b_bf16") && s.contains("B_llama2-7b_prefill_b1_s4096"));
    assert!(s.contains("median |error|") && s.contains("PASS"));
}

#[test]
fn json_summary_and_group_filter() {
    let out = Command::cargo_bin("vramfit").unwrap().args(["calibrate", "--group", "C", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], 1);
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() >= 37);
    assert!(cases.iter().all(|c| c["group"] == "C" && c["quantity"] == "tensor_peak_bytes"));
    assert!(v["summary"]["median_abs_error_pct"].as_f64().unwrap() <= 3.0);
    assert!(v["summary"]["max_abs_error_pct"].as_f64().unwrap() <= 10.0);
    assert_eq!(v["summary"]["pass"], true);
}

#[test]
fn a_badly_estimated_case_fails_with_exit_1() {
    // a real shared case whose measured peak is doubled: the estimate is then −50% off
    let shared = include_str!("../../../calibration/data/shared-cases.jsonl");
    let line = shared.lines().find(|l| l.contains("\"C_gpt2-124m-pos2048_a_fp32_b4_s512_sdpa_ckpt0\"")).unwrap();
    let doctored = line.replace("\"peak_total\": 4021429448", "\"peak_total\": 8042858896");
    assert_ne!(line, doctored);
    let dir = std::env::temp_dir().join(format!("vramfit-cal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("cases.jsonl");
    std::fs::write(&f, doctored).unwrap();
    let out = Command::cargo_bin("vramfit").unwrap().args(["calibrate", "--cases"]).arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("FAIL"));
    std::fs::write(&f, "{not json").unwrap();
    let out = Command::cargo_bin("vramfit").unwrap().args(["calibrate", "--cases"]).arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cases.jsonl:1"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn group_a_table_snapshot() {
    let out = Command::cargo_bin("vramfit").unwrap().args(["calibrate", "--group", "A"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!(String::from_utf8_lossy(&out.stdout));
}

#[test]
fn calibrate_json_has_command_field() {
    let out = Command::cargo_bin("vramfit").unwrap().args(["calibrate", "--group", "A", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], 1);
    assert_eq!(v["command"], "calibrate");
}

#[test]
fn calibrate_bad_precision_wording() {
    let shared = include_str!("../../../calibration/data/shared-cases.jsonl");
    let line = shared.lines().find(|l| l.contains("\"C_gpt2-124m-pos2048_a_fp32_b4_s512_sdpa_ckpt0\"")).unwrap();
    let mut rec: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
    rec.insert("precision".into(), Value::String("fp64".into()));
    let dir = std::env::temp_dir().join(format!("vramfit-cal-prec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("cases.jsonl");
    std::fs::write(&f, serde_json::to_string(&rec).unwrap()).unwrap();
    let out = Command::cargo_bin("vramfit").unwrap().args(["calibrate", "--cases"]).arg(&f).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("expected one of fp32, amp-bf16"), "{err}");
    assert!(err.contains("fp64") && !err.contains("expected unknown"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
