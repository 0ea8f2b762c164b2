//! One JSON snapshot per command: the machine interface (docs/schema.md)
//! may only change as a visible, reviewed diff of these files.

mod common;
use common::json;

/// The checkout's absolute path appears where a command names its input
/// file; it is written as `[cli]` so the snapshots hold in any checkout.
fn snap(name: &str, args: &[&str], code: i32) {
    let text = json(args, code).to_string().replace(env!("CARGO_MANIFEST_DIR"), "[cli]");
    let v: serde_json::Value = serde_json::from_str(&text).expect("still JSON");
    insta::assert_json_snapshot!(name, v);
}

#[test]
fn estimate_inference_json() {
    snap("estimate_infer", &["estimate", "llama-2-7b", "--gpu", "a100-80gb", "--batch", "4", "--json"], 0);
}

#[test]
fn estimate_train_json() {
    snap(
        "estimate_train",
        &[
            "estimate",
            "llama-2-7b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--batch",
            "2",
            "--gpus",
            "8",
            "--zero",
            "2",
            "--json",
        ],
        0,
    );
}

#[test]
fn estimate_qlora_json() {
    snap(
        "estimate_qlora",
        &["estimate", "llama-2-13b", "--task", "qlora", "--checkpointing", "full", "--gpu", "rtx-3090", "--json"],
        0,
    );
}

/// `--sweep` adds `sweep` (docs/schema.md): the searches on the card, the
/// weight formats, the catalogue cards. A tight fit says `tight`.
#[test]
fn estimate_sweep_json() {
    snap(
        "estimate_sweep",
        &["estimate", "llama-2-13b", "--gpu", "rtx-4090", "--dtype", "int8", "--sweep", "--json"],
        0,
    );
    // 15.46 GiB, of which 0.11 GiB is the allocator's overhead, against 15.85 GiB less the
    // driver's 450 MiB (15.41 GiB usable): only the margin does not fit
    let tight = json(&["estimate", "llama-2-7b", "--gpu-mem", "15.85GiB", "--json"], 1);
    assert_eq!(tight["fit"]["verdict"], "tight");
    let short = json(&["estimate", "llama-2-7b", "--gpu-mem", "15.8GiB", "--json"], 1);
    assert_eq!(short["fit"]["verdict"], "does_not_fit");
}

#[test]
fn plan_inference_json() {
    snap("plan_infer", &["plan", "llama-2-13b", "--dtype", "fp16", "--have", "rtx-3090", "--json"], 0);
}

#[test]
fn plan_train_json() {
    snap(
        "plan_train",
        &[
            "plan",
            "llama-2-7b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--have",
            "rtx-3090",
            "--allow",
            "lora,qlora",
            "--json",
        ],
        0,
    );
}

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../diagnose/tests/fixtures/");

#[test]
fn diagnose_oom_json() {
    let f = format!("{FIX}oom/composed_multi_rank_log.txt");
    snap("diagnose_oom", &["diagnose", &f, "--json"], 0);
}

#[test]
fn diagnose_summary_json() {
    let f = format!("{FIX}memory_summary/01.txt");
    snap("diagnose_summary", &["diagnose", &f, "--json"], 0);
}

#[test]
fn diagnose_snapshot_json() {
    let f = format!("{FIX}snapshot/snapshot_shared.pickle");
    snap("diagnose_snapshot", &["diagnose", &f, "--json"], 0);
}

#[test]
fn diagnose_script_json() {
    let f = format!("{FIX}scripts/train_bad.py");
    snap("diagnose_script", &["diagnose", &f, "--json"], 0);
}

#[test]
fn mig_plan_json() {
    snap(
        "mig_plan",
        &["mig", "plan", "--gpu", "a100-40gb", "--service", "chat=12GiB", "--service", "embed=4GiB", "--json"],
        0,
    );
}

const HW: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../hw/tests/fixtures/nvidia_smi/");

#[test]
fn check_json() {
    let f = format!("{HW}01.xml");
    snap("check_xml", &["check", "--xml", &f, "--expect", "1xA100-40GB", "--json"], 1);
}

#[test]
fn calibrate_json() {
    snap("calibrate_b", &["calibrate", "--group", "B", "--json"], 0);
}
