//! `vramfit plan` for training through the real binary: the seed's cases,
//! `--deepspeed` input, and `--emit` outputs parsed back.

mod common;
use common::{json, run};

const GIB: u64 = 1 << 30;

fn ranked(v: &serde_json::Value) -> &Vec<serde_json::Value> {
    v["ranked"].as_array().unwrap()
}

#[test]
fn llama7b_full_finetune_no_80gb_card_and_zero2_on_8x40() {
    let v =
        json(&["plan", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--grad-accum", "8", "--json"], 0);
    assert_eq!(v["task"], "train");
    // the job unchanged fits no offered single card, no 80 GB card at all
    assert!(v["bigger_card"]["best"].is_null());
    assert!(v["baseline_bytes"].as_u64().unwrap() > 80 * GIB);
    let fit: Vec<&str> =
        v["bigger_card"]["gpus_that_fit"].as_array().unwrap().iter().map(|g| g.as_str().unwrap()).collect();
    assert!(!fit.iter().any(|g| g.contains("80gb") || g.starts_with("h100")), "{fit:?}");
    // 8 × A100 40G, ZeRO-2: 2Ψ + 14Ψ/8 = 13.48 + 11.79 = 25.27 GB of model states per GPU
    let row =
        ranked(&v).iter().find(|r| r["gpus"] == 8 && r["gpu_id"].as_str().unwrap().starts_with("a100-40gb")).unwrap();
    assert_eq!(row["setup"]["sharding"], "zero2");
    let states = row["model_states_bytes"].as_f64().unwrap() / 1e9;
    // 2Ψ + 12Ψ/8 = 23.58 GB without the gradient partition (none yet at a backward peak), 25.27 GB with it
    assert!((23.5..25.8).contains(&states), "{states}");
    // DP alone: the same per-GPU bytes as one GPU, plus DDP's gradient buckets
    // (a second bf16 copy of every gradient) and an NCCL communicator (plan sizes
    // once for every offer: the link not known, 32 channels × 24 MiB + 256 MiB =
    // 1024 MiB, crates/core/src/nccl.rs)
    let dp = v["more_cards"]["dp_only_bytes"].as_u64().unwrap();
    let single = v["more_cards"]["single_bytes"].as_u64().unwrap();
    assert_eq!(dp - single, 2 * 6_738_415_616 + 1024 * (1 << 20), "DDP buckets + one NCCL communicator");
    let (out, _) = run(&["plan", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--wide"], 0);
    assert!(out.contains("DP alone does not lower per-GPU memory"), "{out}");
}

#[test]
fn llama7b_with_lora_is_cheapest_on_a_24gb_card() {
    let v = json(
        &[
            "plan",
            "llama-2-7b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--grad-accum",
            "8",
            "--have",
            "rtx-3090",
            "--allow",
            "lora",
            "--json",
        ],
        0,
    );
    let rec = &v["recommended"];
    assert_eq!(rec["setup"]["method"], "lora");
    assert_eq!(rec["gpus"], 1);
    // what CUDA lets a process use of the 24 GiB: 450 MiB less
    assert_eq!(rec["gpu_memory_bytes"].as_u64().unwrap(), 24 * GIB - 450 * (1 << 20));
    // the ladder on the 3090 in the seed's order
    let names: Vec<&str> =
        v["software"]["steps"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "mixed precision",
            "gradient accumulation",
            "activation checkpointing",
            "8-bit optimizer",
            "LoRA",
            "activation checkpointing",
            "QLoRA",
            "CPU offload (optimizer)",
            "CPU offload (parameters too)"
        ]
    );
    let steps = &v["software"]["steps"];
    // the peak starts at the optimizer step: checkpointing saves nothing there and is
    // skipped, then retried once LoRA has moved the peak to backward
    assert_eq!(steps[2]["status"], "skipped");
    assert_eq!(steps[2]["saved_bytes"], 0);
    assert!(steps[2]["detail"].as_str().unwrap().contains("peak is at the optimizer step"));
    let lora = &steps[4];
    assert_eq!(lora["status"], "applied");
    assert_eq!(steps[5]["status"], "applied");
    assert_eq!(steps[5]["fits"], true);
    assert!(steps[5]["saved_bytes"].as_i64().unwrap() > 0);
    assert_eq!(steps[6]["status"], "not_allowed");
}

#[test]
fn llama70b_full_finetune_needs_the_host_ram_offload_needs() {
    let args =
        ["plan", "llama-2-70b", "--task", "train", "--precision", "mixed-bf16", "--grad-accum", "64", "--tokens", "1B"];
    let v = json(&[&args[..], &["--json"]].concat(), 0);
    // two 8 × A100 80G machines over InfiniBand hold it without offload, for
    // less than one 8 × H100 machine with offload (issue 21: clusters)
    let rec = &v["recommended"];
    assert_eq!((rec["gpus"].as_u64(), rec["machines"].as_u64()), (Some(16), Some(2)), "{rec}");
    assert_eq!(rec["setup"]["offload_optimizer"], "none");
    // on one machine of 8 it needs ZeRO + CPU offload
    let one = ranked(&v).iter().find(|r| r["offer_id"] == "cn-guide/8x-h100-sxm").unwrap();
    assert_eq!(one["gpus"], 8);
    assert!(one["gpu_memory_bytes"].as_u64().unwrap() > 79 * GIB);
    let sh = one["setup"]["sharding"].as_str().unwrap();
    assert!(sh == "zero2" || sh == "zero3", "{sh}");
    // 70B × 16 B of offloaded states × DeepSpeed's 1.5 buffer factor: more than the
    // 8 × A100 80G machine's 1 TB, within the 8 × H100 machine's 2 TB
    let need = one["host_ram_bytes"].as_u64().unwrap();
    assert!(need > 1_024_000_000_000 && need < 2_048_000_000_000, "{need}");
    assert!(ranked(&v).iter().all(|r| r["offer_id"] != "cn-guide/8x-a100-80g-nvlink"));
    let (out, _) = run(&[&args[..], &["--wide"]].concat(), 0);
    let note =
        out.lines().find(|l| l.contains("8 × A100 80G NVLink machine: left out")).unwrap_or_else(|| panic!("{out}"));
    assert!(note.contains("it has 1,024 GB") && note.contains("DeepSpeed"), "{note}");
}

#[test]
fn deepspeed_config_as_input() {
    let v = json(
        &[
            "plan",
            "llama-2-7b",
            "--task",
            "train",
            "--deepspeed",
            "tests/fixtures/plan/ds_zero3_bf16.json",
            "--gpus",
            "8",
            "--json",
        ],
        0,
    );
    assert!(
        v["job"]["setup"].as_str().unwrap().contains("mixed-bf16")
            || v["job"]["setup"].as_str().unwrap().contains("bf16")
    );
    assert!(v["recommended"].is_object());
}

#[test]
fn emit_deepspeed_is_a_valid_config() {
    let (out, _) = run(
        &[
            "plan",
            "llama-2-7b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--grad-accum",
            "8",
            "--tokens",
            "1B",
            "--emit",
            "deepspeed",
        ],
        0,
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    let micro = v["train_micro_batch_size_per_gpu"].as_u64().unwrap();
    let accum = v["gradient_accumulation_steps"].as_u64().unwrap();
    let total = v["train_batch_size"].as_u64().unwrap();
    assert_eq!(total % (micro * accum), 0);
    assert!(v["zero_optimization"]["stage"].as_u64().unwrap() <= 3);
    assert_eq!(v["bf16"]["enabled"], true);
}

#[test]
fn emit_accelerate_and_torchrun_parse_back() {
    let args =
        ["plan", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--grad-accum", "8", "--tokens", "1B"];
    let (out, _) = run(&[&args[..], &["--emit", "accelerate"]].concat(), 0);
    let v: std::collections::BTreeMap<String, serde_json::Value> =
        serde_saphyr::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    assert!(["FSDP", "DEEPSPEED", "MULTI_GPU", "NO"].contains(&v["distributed_type"].as_str().unwrap()));
    assert_eq!(v["mixed_precision"], "bf16");
    assert!(v["num_processes"].as_u64().unwrap() >= 1);
    let (out, _) = run(&[&args[..], &["--emit", "torchrun"]].concat(), 0);
    assert!(out.contains("torchrun"), "{out}");
    assert!(out.contains("--nproc-per-node="), "{out}");
}

fn collect_keys(v: &serde_json::Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                collect_keys(x, out);
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_keys(x, out)),
        _ => {}
    }
}

#[test]
fn every_emitted_json_key_is_documented() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/plan.md")).unwrap();
    let mut keys = std::collections::BTreeSet::new();
    for args in [
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
            "lora",
            "--tokens",
            "1B",
            "--json",
        ][..],
        &["plan", "llama-2-13b", "--dtype", "fp16", "--have", "rtx-3090", "--hours", "5", "--json"][..],
    ] {
        collect_keys(&json(args, 0), &mut keys);
    }
    // keys of free-form maps (none today) would be skipped here; every field name must be in the doc
    let documented = |k: &str| {
        [
            format!("`{k}`"),
            format!("{{{k},"),
            format!(", {k}}}"),
            format!(", {k},"),
            format!("{{{k}}}"),
            format!("{{{k}:"),
            format!(", {k}:"),
            format!(", {k} ("),
            format!("`{k} ("),
            format!("`{k} "),
        ]
        .iter()
        .any(|p| doc.contains(p.as_str()))
    };
    let missing: Vec<&String> = keys.iter().filter(|k| !documented(k)).collect();
    assert!(missing.is_empty(), "docs/plan.md does not document {missing:?}");
}

#[test]
fn mfu_override_and_hours_budget() {
    let base = [
        "plan",
        "llama-2-7b",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--grad-accum",
        "8",
        "--tokens",
        "1B",
        "--json",
    ];
    let v = json(&base, 0);
    let faster = json(&[&base[..], &["--mfu", "ampere=0.9"]].concat(), 0);
    let hours = |v: &serde_json::Value, offer: &str, gpus: u64| {
        ranked(v).iter().find(|r| r["offer_id"] == offer && r["gpus"] == gpus).and_then(|r| r["job_hours"].as_f64())
    };
    let (a, b) = (
        hours(&v, "cn-guide/8x-a100-80g-nvlink", 8).unwrap(),
        hours(&faster, "cn-guide/8x-a100-80g-nvlink", 8).unwrap(),
    );
    // doubling the A100's MFU (0.45 → 0.9) at least shortens the job, at most halves it
    assert!(b < a && b >= a / 2.0 - 1e-9, "{a} h → {b} h");
    // --hours: tokens = tokens/s × hours × 3600, cost = hourly × hours
    let v = json(&["plan", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--hours", "10", "--json"], 0);
    let rec = &v["recommended"];
    let tps = rec["tokens_per_s"].as_f64().unwrap();
    assert!((rec["job_tokens"].as_f64().unwrap() - tps * 36000.0).abs() < 1e-6 * tps * 36000.0);
    assert!((rec["job_cost"]["low"].as_f64().unwrap() - rec["hourly"]["low"].as_f64().unwrap() * 10.0).abs() < 1e-6);
    assert_eq!(v["job"]["hours"], 10.0);
}

#[test]
fn ladder_step_that_saves_nothing_is_skipped() {
    // QA repro: checkpointing saved 0 B (peak at the optimizer step) but was kept in the chain
    let (out, _) =
        run(&["plan", "llama-2-7b", "--task", "train", "--have", "rtx-3090", "--allow", "lora,qlora", "--wide"], 0);
    assert!(out.contains("skipped: peak is at the optimizer step: checkpointing saves nothing there"), "{out}");
    // no kept step saves 0 B
    for l in out.lines().filter(|l| l.contains("┆ applied")) {
        assert!(!l.contains("┆       0 B ┆"), "{l}");
    }
    let chain = out.lines().find(|l| l.starts_with("fits after:")).unwrap();
    assert_eq!(chain, "fits after: 8-bit optimizer → activation checkpointing → LoRA");
}

#[test]
fn ladder_gradient_accumulation_that_raises_the_peak_is_skipped() {
    let v = json(&["plan", "llama-2-7b", "--task", "train", "--batch", "2", "--have", "rtx-3090", "--json"], 0);
    let ga = v["software"]["steps"].as_array().unwrap().iter().find(|s| s["name"] == "gradient accumulation").unwrap();
    assert_eq!(ga["status"], "skipped", "{ga}");
    assert!(ga["saved_bytes"].as_i64().unwrap() < 0, "{ga}");
    assert!(ga["detail"].as_str().unwrap().contains("raises the peak"), "{ga}");
}

#[test]
fn zero_2_3_with_pipeline_parallelism_never_proposed() {
    let v = json(
        &[
            "plan",
            "llama-2-7b",
            "--task",
            "train",
            "--have",
            "rtx-3090",
            "--allow",
            "lora,qlora",
            "--json",
            "--top",
            "50",
        ],
        0,
    );
    let mut setups: Vec<&serde_json::Value> = v["ranked"].as_array().unwrap().iter().map(|r| &r["setup"]).collect();
    if let Some(h) = v["more_cards"]["on_have"].get("setup") {
        setups.push(h);
    }
    assert!(!setups.is_empty());
    for s in setups {
        let pp = s["pp"].as_u64().unwrap();
        assert!(pp == 1 || !matches!(s["sharding"].as_str(), Some("zero2" | "zero3")), "{s}");
    }
}

#[test]
fn unknown_mfu_key_is_an_error() {
    let (_, err) = run(&["plan", "llama-2-7b", "--mfu", "foo=0.3"], 2);
    assert!(err.contains("'foo'") && err.contains("ampere") && err.contains("rtx-3090"), "{err}");
    // known keys still work: an architecture and a GPU id
    run(&["plan", "llama-2-7b", "--mfu", "ampere=0.5", "--mfu", "rtx-3090=0.4"], 0);
}

#[test]
fn more_cards_for_training_split_what_holds_the_memory() {
    // LoRA on Llama-3.1-8B fits one 40 GB card with checkpointing, so a plain data-parallel
    // pair (or ZeRO-1/2, which shard only the adapter's few MB of states) also fits — only
    // thanks to that switch. Path (2) shows a plan that splits the frozen base (ZeRO-3) or
    // the model (TP, PP); for a full fine-tune any ZeRO stage splits real state
    for task in ["lora", "qlora", "train"] {
        let v = json(&["plan", "llama-3.1-8b", "--task", task, "--json"], 0);
        let best = &v["more_cards"]["best"];
        assert!(best.is_object(), "{task}: no path (2) plan: {v:#}");
        let s = &best["setup"];
        let model_split = s["tp"].as_u64() > Some(1) || s["pp"].as_u64() > Some(1);
        let shards = if task == "train" { s["sharding"] != "none" } else { s["sharding"] == "zero3" };
        assert!(shards || model_split, "{task}: path (2) splits nothing that holds memory: {s}");
        assert!(best["gpus"].as_u64() >= Some(2));
    }
    // the ranked table still holds data-parallel plans
    let v = json(&["plan", "llama-3.1-8b", "--task", "lora", "--json"], 0);
    assert!(ranked(&v).iter().any(|r| r["setup"]["sharding"] == "none" && r["gpus"].as_u64() > Some(1)));
}

/// Issue 21: `--gpus 1` is a pin like any other count: only one-GPU setups
/// are searched, and the report names the layout as given ("1 GPU").
#[test]
fn one_gpu_is_a_pinned_count() {
    let v = json(&["plan", "llama-2-7b", "--task", "train", "--gpus", "1", "--allow", "lora,qlora", "--json"], 0);
    assert_eq!(v["pinned"], "1 GPU", "{}", v["pinned"]);
    let rows = v["ranked"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r["gpus"] == 1), "{rows:?}");
    assert_eq!(v["recommended"]["gpus"], 1);
    let (out, _) = run(&["plan", "llama-2-7b", "--task", "train", "--gpus", "1", "--allow", "lora,qlora"], 0);
    assert!(out.contains("layout as given: 1 GPU (only this layout is searched)"), "{out}");
    // without --gpus the search spans counts (the full fine-tune needs several cards)
    let free = json(&["plan", "llama-2-7b", "--task", "train", "--json"], 0);
    assert!(free["pinned"].is_null());
    assert!(free["recommended"]["gpus"].as_u64().unwrap() > 1);
}
