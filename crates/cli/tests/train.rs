//! `vramfit estimate --task train|lora|qlora`: figures, JSON fields, notes, and contradictions rejected.

use assert_cmd::Command;
use serde_json::Value;

const P7: u64 = 6_738_415_616;

fn fixture(rel: &str) -> String {
    format!("{}/../ingest/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn json(args: &[&str]) -> Value {
    let out = Command::cargo_bin("vramfit").unwrap().args(args).arg("--json").output().unwrap();
    assert!(out.status.code() == Some(0) || out.status.code() == Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn cat(v: &Value, c: &str) -> u64 {
    v["per_gpu"]["categories"][c].as_u64().unwrap_or_else(|| panic!("no category {c}"))
}

#[test]
fn full_finetune_7b_does_not_fit_one_80gb_card() {
    let out = Command::cargo_bin("vramfit")
        .unwrap()
        .args(["estimate", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--gpu", "a100-80gb"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "does not fit → exit 1");
    let v = json(&["estimate", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--seq", "256"]);
    // 16 B/param: weights 2 + master 4 + optimizer 8 (+ gradients 2 at the step)
    assert_eq!(cat(&v, "weights"), 2 * P7);
    assert_eq!(cat(&v, "master_weights"), 4 * P7);
    assert_eq!(cat(&v, "optimizer_states"), 8 * P7);
    assert_eq!(v["peak_phase"], "optimizer_step");
    assert_eq!(cat(&v, "gradients"), 2 * P7);
    assert_eq!(v["model"]["params_trainable"].as_u64(), Some(P7));
    let t = v["per_gpu"]["tensor_peak_bytes"].as_u64().unwrap();
    let sum: u64 =
        ["weights", "master_weights", "gradients", "optimizer_states", "activations", "logits", "temporaries"]
            .iter()
            .map(|c| cat(&v, c))
            .sum();
    assert_eq!(t, sum);
}

#[test]
fn zero2_on_8_gpus_and_dp_note() {
    let v =
        json(&["estimate", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--gpus", "8", "--zero", "2"]);
    assert_eq!(cat(&v, "weights"), 2 * P7);
    assert_eq!(cat(&v, "master_weights") + cat(&v, "optimizer_states"), 12 * P7 / 8);
    let v = json(&["estimate", "llama-2-7b", "--task", "train", "--gpus", "8"]);
    let notes = v["notes"].as_array().unwrap();
    assert!(notes.iter().any(|n| n.as_str().unwrap().contains("saves no memory per GPU")), "{notes:?}");
}

#[test]
fn offload_reports_cpu_bytes() {
    let v = json(&[
        "estimate",
        "llama-2-7b",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--gpus",
        "8",
        "--zero",
        "3",
        "--offload",
        "cpu",
    ]);
    assert!(v["cpu_bytes"].as_u64().unwrap() > 16 * P7);
    assert_eq!(cat(&v, "optimizer_states"), 0);
}

#[test]
fn lora_and_qlora() {
    // q,v at r=8 from a PEFT-written adapter_config.json: 32 layers × 2 × 8 × (4096 + 4096)
    let ac = fixture("peft/01_lora_qv_r8.json");
    let v = json(&["estimate", "llama-2-7b", "--task", "lora", "--adapter-config", &ac]);
    assert_eq!(v["model"]["params_trainable"].as_u64(), Some(4_194_304));
    let v = json(&[
        "estimate",
        "llama-2-7b",
        "--task",
        "lora",
        "--lora-rank",
        "16",
        "--lora-targets",
        "q_proj,v_proj",
        "--checkpointing",
        "full",
        "--gpu",
        "rtx-4090",
    ]);
    assert_eq!(v["model"]["params_trainable"].as_u64(), Some(8_388_608));
    assert!(v["per_gpu"]["total_bytes"].as_u64().unwrap() < 24 << 30);
    // the frozen NF4 base ≈ 7.2 GB (arithmetic in crates/core/tests/train_seed.rs); adapters come on top
    let v = json(&["estimate", "llama-2-13b", "--task", "qlora"]);
    let entries = v["per_gpu"]["entries"].as_array().unwrap();
    let base = entries.iter().find(|e| e["label"].as_str().unwrap().starts_with("frozen base")).unwrap();
    assert_eq!(base["bytes"].as_u64(), Some(7_201_418_240));
    assert!(cat(&v, "weights") > 7_201_418_240);
}

#[test]
fn deepspeed_config_is_read() {
    let ds = fixture("deepspeed/03_zero3_bf16.json");
    let v = json(&["estimate", "llama-2-7b", "--task", "train", "--gpus", "8", "--deepspeed", &ds]);
    assert_eq!(v["workload"]["settings"]["sharding"], "zero3");
    assert_eq!(v["workload"]["dtype"], "mixed-bf16");
    let out = Command::cargo_bin("vramfit")
        .unwrap()
        .args([
            "estimate",
            "llama-2-7b",
            "--task",
            "train",
            "--gpus",
            "8",
            "--deepspeed",
            &fixture("deepspeed/04_zero3_offload_optimizer_param_auto.json"),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    // the config's notes are reported with the estimate's notes (stdout)
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("\"auto\""), "{text}");
}

#[test]
fn contradictions_are_rejected_naming_the_flags() {
    let ds = fixture("deepspeed/03_zero3_bf16.json");
    for (args, needles) in [
        (vec!["--task", "train", "--zero", "2", "--fsdp", "full-shard"], vec!["--zero", "--fsdp"]),
        (vec!["--task", "train", "--lora-rank", "8"], vec!["--lora-rank"]),
        (
            vec!["--task", "train", "--gpus", "8", "--deepspeed", ds.as_str(), "--zero", "2"],
            vec!["--zero 2", "zero_optimization.stage 3"],
        ),
        (vec!["--task", "train", "--offload", "cpu"], vec!["--offload", "--zero"]),
        (vec!["--task", "train", "--sp"], vec!["--sp", "--tp"]),
        (vec!["--task", "train", "--precision", "amp-fp16", "--deepspeed", ds.as_str()], vec!["--precision amp-fp16"]),
        (vec!["--task", "lora", "--lora-targets", "nonexistent_proj"], vec!["nonexistent_proj", "q_proj"]),
        (vec!["--task", "train", "--batch", "0"], vec!["batch"]),
        (vec!["--task", "train", "--tp", "3"], vec!["tp"]),
    ] {
        let out =
            Command::cargo_bin("vramfit").unwrap().arg("estimate").arg("llama-2-7b").args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stdout));
        let err = String::from_utf8_lossy(&out.stderr);
        for n in needles {
            assert!(err.contains(n), "{args:?}: '{n}' not in {err}");
        }
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn zero_2_3_with_pipeline_parallelism_is_rejected() {
    let ds = fixture("deepspeed/03_zero3_bf16.json");
    for (args, needles) in [
        (vec!["--gpus", "8", "--zero", "3", "--pp", "2"], vec!["--zero 3", "--pp 2"]),
        (vec!["--gpus", "8", "--zero", "2", "--pp", "2"], vec!["--zero 2", "--pp 2"]),
        (vec!["--gpus", "8", "--deepspeed", ds.as_str(), "--pp", "2"], vec!["zero_optimization.stage 3", "--pp 2"]),
    ] {
        let out = Command::cargo_bin("vramfit")
            .unwrap()
            .args(["estimate", "llama-2-7b", "--task", "train"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stdout));
        let err = String::from_utf8_lossy(&out.stderr);
        for n in needles {
            assert!(err.contains(n), "{args:?}: '{n}' not in {err}");
        }
    }
    // ZeRO-1 + PP is allowed
    let v = json(&["estimate", "llama-2-7b", "--task", "train", "--gpus", "8", "--zero", "1", "--pp", "2"]);
    assert_eq!(v["schema"], 1);
}

#[test]
fn mixed_precision_fp32_grad_copy_at_the_step() {
    // 8 B/param of step temporaries: foreach sqrt (4) + the fp32 gradient copy (4)
    let v = json(&[
        "estimate",
        "llama-2-7b",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--batch",
        "1",
        "--seq",
        "128",
    ]);
    assert_eq!(cat(&v, "temporaries"), 8 * P7);
    assert_eq!(v["per_gpu"]["tensor_peak_bytes"].as_u64().unwrap(), 24 * P7);
    let v = json(&[
        "estimate",
        "llama-2-7b",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--batch",
        "4",
        "--seq",
        "2048",
    ]);
    assert_eq!(v["per_gpu"]["tensor_peak_bytes"].as_u64().unwrap(), 24 * P7);
    assert_eq!(v["peak_phase"], "optimizer_step");
}

#[test]
fn training_flags_with_task_infer_are_rejected() {
    for (args, needles) in [
        (
            vec!["--zero", "2", "--optimizer", "sgd", "--lora-rank", "8", "--first-step", "--checkpointing", "full"],
            vec!["--zero", "--optimizer", "--lora-rank", "--first-step", "--checkpointing"],
        ),
        (vec!["--deepspeed", "ds.json"], vec!["--deepspeed"]),
    ] {
        let out = Command::cargo_bin("vramfit")
            .unwrap()
            .args(["estimate", "llama-2-7b", "--task", "infer"])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stdout));
        let err = String::from_utf8_lossy(&out.stderr);
        for n in needles {
            assert!(err.contains(n), "{args:?}: '{n}' not in {err}");
        }
    }
}

#[test]
fn regression_batch_flag_and_deepspeed_micro_batch_are_not_silently_merged() {
    // QA (issue 9): `--batch 1 --deepspeed ds.json` with micro-batch 4 in the file
    // silently ran batch 4, because "was --batch given?" was decided by comparing
    // with its default 1. An explicit --batch that disagrees with the file is refused,
    // naming both values; one that agrees (or none) runs the file's micro-batch.
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("deepspeed/03_zero3_bf16.json")).unwrap()).unwrap();
    v["train_micro_batch_size_per_gpu"] = serde_json::json!(4);
    let dir = std::env::temp_dir().join(format!("vramfit-ds-batch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ds = dir.join("ds.json");
    std::fs::write(&ds, v.to_string()).unwrap();
    let ds = ds.to_str().unwrap();
    let base = ["estimate", "llama-2-7b", "--task", "train", "--gpus", "8", "--deepspeed", ds];
    let out = Command::cargo_bin("vramfit").unwrap().args(base).args(["--batch", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--batch 1") && err.contains("train_micro_batch_size_per_gpu 4"), "{err}");
    assert!(out.stdout.is_empty());
    let agreed = json(&[&base[..], &["--batch", "4"]].concat());
    assert_eq!(agreed["workload"]["batch"], 4);
    let from_file = json(&base);
    assert_eq!(from_file["workload"]["batch"], 4);
    assert_eq!(agreed["per_gpu"], from_file["per_gpu"]);
}

#[test]
fn errors_name_the_config_key_that_set_a_value() {
    // a value from the DeepSpeed file is named by its key, not by a flag the user never typed
    let ds = fixture("deepspeed/03_zero3_bf16.json");
    let out = Command::cargo_bin("vramfit")
        .unwrap()
        .args(["estimate", "llama-2-7b", "--task", "train", "--gpus", "8", "--deepspeed", &ds, "--pp", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("zero_optimization.stage 3 with --pp 2"), "{err}");
    assert!(!err.contains("--zero"), "{err}");
}

/// QLoRA without --checkpointing: PEFT's prepare_model_for_kbit_training turns
/// gradient checkpointing on by default, so the estimate does too (and says so);
/// without that preparation, or with the flag, the flag's value stands.
#[test]
fn qlora_checkpoints_by_default_as_peft_prepares_it() {
    let ckpt = |v: &Value| v["workload"]["settings"]["checkpointing"].as_str().unwrap().to_string();
    let noted = |v: &Value| {
        v["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("prepare_model_for_kbit_training turns it on"))
    };
    let dflt = json(&["estimate", "llama-2-7b", "--task", "qlora"]);
    assert_eq!(ckpt(&dflt), "full");
    assert!(noted(&dflt), "{}", dflt["notes"]);
    let explicit = json(&["estimate", "llama-2-7b", "--task", "qlora", "--checkpointing", "full"]);
    assert_eq!(cat(&dflt, "activations"), cat(&explicit, "activations"));
    assert!(!noted(&explicit));
    let none = json(&["estimate", "llama-2-7b", "--task", "qlora", "--checkpointing", "none"]);
    assert_eq!(ckpt(&none), "none");
    assert!(cat(&none, "activations") > 2 * cat(&dflt, "activations"));
    let raw = json(&["estimate", "llama-2-7b", "--task", "qlora", "--no-kbit-prep"]);
    assert_eq!(ckpt(&raw), "none");
    // LoRA on a 16-bit base: the Trainer's default, off
    assert_eq!(ckpt(&json(&["estimate", "llama-2-7b", "--task", "lora"])), "none");
}

/// Issue 21: `--task train --dtype bf16` on a quantized checkpoint (gpt-oss's
/// MXFP4 experts) sizes the weights dequantized to bf16, as transformers'
/// `Mxfp4Config(dequantize=True)` loads them, instead of refusing to train
/// quantized weights; without `--dtype` the refusal says how to ask for it.
#[test]
fn a_quantized_checkpoint_trains_dequantized_when_dtype_asks() {
    let v = json(&["estimate", "gpt-oss-120b", "--task", "train", "--dtype", "bf16"]);
    assert!(v["model"]["quantization"].is_null(), "{}", v["model"]);
    let notes = v["model"]["notes"].to_string();
    assert!(notes.contains("MXFP4 weights are sized dequantized to bf16"), "{notes}");
    // every parameter at 2 bytes: the weights line is params × 2 exactly
    let params = v["model"]["params_total"].as_u64().unwrap();
    assert_eq!(cat(&v, "weights"), params * 2);
    let out =
        Command::cargo_bin("vramfit").unwrap().args(["estimate", "gpt-oss-120b", "--task", "train"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("or --dtype bf16 to train the weights dequantized"), "{err}");
    // the planner sizes the same dequantized model
    let p = json(&["plan", "gpt-oss-120b", "--task", "train", "--dtype", "bf16"]);
    assert!(p["recommended"].is_object(), "{p}");
}

/// Hybrid sharding through the binary (PyTorch FSDP HYBRID_SHARD, Zhao et al.
/// 2023 §3.2.2): 32 GPUs as 4 replicas × 8 ranks hold the ZeRO-3 states of 8
/// ranks, not 32: bf16 weights 2 × 6,738,415,616 / 8 = 1,684,603,904 B, fp32
/// master 4 P / 8, Adam 8 P / 8; `--explain` names the shard group; the JSON
/// settings gain `dp_replicate`; a layout HSDP cannot run is refused by flag.
#[test]
fn hybrid_sharding_shards_over_one_replica() {
    let base =
        ["estimate", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--gpus", "32", "--zero", "3"];
    let v = json(&[&base[..], &["--dp-replicate", "4"]].concat());
    assert_eq!(cat(&v, "weights"), 2 * P7 / 8);
    assert_eq!(cat(&v, "master_weights"), 4 * P7 / 8);
    assert_eq!(cat(&v, "optimizer_states"), 8 * P7 / 8);
    assert_eq!(v["workload"]["settings"]["dp_replicate"], "4");
    let plain = json(&base);
    assert_eq!(cat(&plain, "weights"), 2 * P7 / 32);
    assert!(plain["workload"]["settings"]["dp_replicate"].is_null());
    let out = Command::cargo_bin("vramfit")
        .unwrap()
        .args([&base[..], &["--dp-replicate", "4", "--explain"]].concat())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("sharding = ÷ shard group 8 = DP 32 ÷ 4 replicas"), "{text}");
    assert!(text.contains("NCCL communicator (HSDP replicate group, 4 ranks)"), "{text}");
    for (extra, says) in [
        (&["--dp-replicate", "3"][..], "--dp-replicate 3: the 32 data-parallel ranks"),
        (&["--dp-replicate", "4", "--zero", "2"][..], "this layout uses ZeRO-2"),
    ] {
        let args: Vec<&str> = [&base[..8], extra].concat();
        let args = if extra.contains(&"--zero") { args } else { [&base[..], extra].concat() };
        let out = Command::cargo_bin("vramfit").unwrap().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

/// DeepSpeed ZeRO++ hpZ through the binary (Wang et al. 2023 §3.2;
/// `_partition_param_sec`, deepspeed/runtime/zero/partition_parameters.py): 32
/// GPUs with ZeRO-3 over all 32 and hpZ groups of 8 keep plain ZeRO-3's shards
/// (bf16 weights 2 × 6,738,415,616 / 32 = 421,150,976 B) plus the secondary
/// partition 2 × 6,738,415,616 / 8 = 1,684,603,904 B, a second weights line;
/// the total grows by it and by the hpZ group's NCCL communicator (1,024 MiB
/// at 8 ranks on a link not known, crates/core/src/nccl.rs): 1,684,603,904 +
/// 1,073,741,824 = 2,758,345,728 B. A
/// ds_config's `zero_hpz_partition_size` 8 sizes the same; refusals name the
/// flag or the config key.
#[test]
fn hpz_adds_the_secondary_partition() {
    let base =
        ["estimate", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--gpus", "32", "--zero", "3"];
    let v = json(&[&base[..], &["--hpz", "8"]].concat());
    let plain = json(&base);
    assert_eq!(cat(&plain, "weights"), 2 * P7 / 32);
    assert_eq!(cat(&v, "weights"), 2 * P7 / 32 + 2 * P7 / 8);
    assert_eq!(cat(&v, "optimizer_states"), cat(&plain, "optimizer_states"));
    let total = |v: &Value| v["per_gpu"]["total_bytes"].as_u64().unwrap();
    // + the hpZ group's NCCL communicator of 8 ranks, link not known: 32 channels ×
    // 24 MiB + 256 MiB = 1,073,741,824 B (crates/core/src/nccl.rs)
    assert_eq!(total(&v) - total(&plain), 2 * P7 / 8 + 1_073_741_824);
    assert_eq!(v["workload"]["settings"]["hpz"], "8");
    assert!(plain["workload"]["settings"]["hpz"].is_null());
    let out = Command::cargo_bin("vramfit")
        .unwrap()
        .args([&base[..], &["--hpz", "8", "--explain"]].concat())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ZeRO++ hpZ secondary parameter partition = 1.57 GiB (1,684,603,904 B)"), "{text}");
    assert!(text.contains("NCCL communicator (ZeRO++ hpZ group, 8 ranks)"), "{text}");
    // the same job from a ds_config
    let dir = std::env::temp_dir().join(format!("vramfit-hpz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ds = dir.join("ds.json");
    std::fs::write(
        &ds,
        r#"{"bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8}}"#,
    )
    .unwrap();
    let ds = ds.to_str().unwrap();
    let from_file = json(&["estimate", "llama-2-7b", "--task", "train", "--gpus", "32", "--deepspeed", ds]);
    assert_eq!(cat(&from_file, "weights"), 2 * P7 / 32 + 2 * P7 / 8);
    for (args, says) in [
        (
            vec!["estimate", "llama-2-7b", "--task", "train", "--gpus", "12", "--deepspeed", ds],
            "zero_optimization.zero_hpz_partition_size 8: the 12 GPUs",
        ),
        ([&base[..8], &["--zero", "2", "--hpz", "8"]].concat(), "--hpz 8: ZeRO++ hierarchical partitioning"),
        ([&base[..], &["--deepspeed", ds, "--hpz", "4"]].concat(), "--hpz 4 contradicts"),
    ] {
        let out = Command::cargo_bin("vramfit").unwrap().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

/// Megatron expert-tensor parallelism through the binary (issue 21 item 4):
/// Mixtral-8x7B on 16 GPUs, TP 2, EP 4. `MoELayer` keeps 8 / 4 = 2 experts
/// per rank (moe_layer.py) and `TEGroupedMLP` splits each over the
/// expert-TP group (experts.py): with ETP 2 a rank holds one expert's worth
/// of each MoE layer instead of two — 32 layers × 3 × 4096 × 14336 =
/// 5,637,144,576 params fewer, × 2 B of bf16 weights = 11,274,289,152 B and
/// × 4 B of fp32 main grads = 22,548,578,304 B; the master weights shard
/// over expert-DP 16 / (4 × 2) = 2 instead of 4, the same bytes (±rounding).
/// The JSON names the ETP; `--etp 4` (EP 4 × ETP 4 = 16 does not divide
/// 16 ÷ PP 2 = 8 ranks) is refused naming the flag.
#[test]
fn megatron_expert_tensor_parallel_splits_each_expert() {
    let base = [
        "estimate",
        "mixtral-8x7b",
        "--task",
        "train",
        "--engine",
        "megatron",
        "--precision",
        "mixed-bf16",
        "--gpus",
        "16",
        "--tp",
        "2",
        "--ep",
        "4",
        "--sp",
        "--zero",
        "1",
    ];
    let one = json(&[&base[..], &["--etp", "1"]].concat());
    let two = json(&[&base[..], &["--etp", "2"]].concat());
    let expert = 32 * 3 * 4096 * 14336u64;
    assert_eq!(cat(&one, "weights") - cat(&two, "weights"), 2 * expert);
    assert_eq!(cat(&one, "gradients") - cat(&two, "gradients"), 4 * expert);
    assert!(cat(&one, "master_weights").abs_diff(cat(&two, "master_weights")) <= 4);
    assert_eq!(two["workload"]["etp"], 2);
    // without --etp, EP runs the experts whole: ETP 1, as --emit megatron writes
    let default = json(&base);
    assert_eq!(default["workload"]["etp"], 1);
    assert_eq!(cat(&default, "weights"), cat(&one, "weights"));
    let o = Command::cargo_bin("vramfit")
        .unwrap()
        .args([&base[..], &["--pp", "2", "--etp", "4"]].concat())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--etp 4: Megatron lays the 8 ranks of a pipeline stage"), "{err}");
}

/// A DeepSpeed config that turns AutoEP on (`"expert_parallel": {"enabled":
/// true, "autoep_size": 8}`, DeepSpeed PR #7938) sizes the same job as `--ep 8`
/// under `--engine deepspeed` with its stage and precision; `--ep` saying
/// another degree is refused naming the key, and AutoEP's own rules (ZeRO-3 not
/// modelled) name the config key, not `--ep`.
#[test]
fn deepspeed_config_with_autoep_sizes_as_ep() {
    let dir = std::env::temp_dir().join(format!("vramfit-autoep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, stage: u8| {
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!(
                r#"{{"bf16": {{"enabled": true}}, "zero_optimization": {{"stage": {stage}}}, "expert_parallel": {{"enabled": true, "autoep_size": 8, "preset_model": "mixtral"}}}}"#
            ),
        )
        .unwrap();
        p.to_str().unwrap().to_string()
    };
    let z2 = write("z2.json", 2);
    let from_file = json(&["estimate", "mixtral-8x7b", "--task", "train", "--gpus", "16", "--deepspeed", &z2]);
    let flags = json(&[
        "estimate",
        "mixtral-8x7b",
        "--task",
        "train",
        "--engine",
        "deepspeed",
        "--precision",
        "mixed-bf16",
        "--gpus",
        "16",
        "--zero",
        "2",
        "--ep",
        "8",
    ]);
    assert_eq!(from_file["workload"]["ep"], 8);
    for k in ["weights", "gradients", "optimizer_states", "master_weights"] {
        assert_eq!(cat(&from_file, k), cat(&flags, k), "{k}");
    }
    // without the section the experts are not split: more weights per GPU
    let plain = json(&[
        "estimate",
        "mixtral-8x7b",
        "--task",
        "train",
        "--gpus",
        "16",
        "--zero",
        "2",
        "--precision",
        "mixed-bf16",
    ]);
    assert!(cat(&plain, "weights") > cat(&from_file, "weights"));
    let err = |args: &[&str]| {
        let o = Command::cargo_bin("vramfit").unwrap().args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&o.stderr).to_string()
    };
    let e = err(&["estimate", "mixtral-8x7b", "--task", "train", "--gpus", "16", "--deepspeed", &z2, "--ep", "4"]);
    assert!(e.contains("--ep 4 contradicts expert_parallel.autoep_size 8"), "{e}");
    let z3 = write("z3.json", 3);
    let e = err(&["estimate", "mixtral-8x7b", "--task", "train", "--gpus", "16", "--deepspeed", &z3]);
    assert!(e.contains("expert_parallel.autoep_size 8: AutoEP with ZeRO-3"), "{e}");
}
