//! Emitted launch configs loaded by the tools themselves: DeepSpeed's
//! `DeepSpeedConfig` at the plan's world size, accelerate's `ClusterConfig`
//! (`calibration/harness/check_emit.py`). Runs when a `python3` with
//! `deepspeed` and `accelerate` is present; otherwise it says it skipped
//! (the checks in crates/report/src/emit.rs still run).

mod common;
use common::run;

fn python_has_tools() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import deepspeed, accelerate"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn emitted_configs_load_in_deepspeed_and_accelerate() {
    if !python_has_tools() {
        eprintln!("skipped: no python3 with deepspeed and accelerate (pip install deepspeed accelerate)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("vramfit-emit-python-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plans: [(&str, &[&str]); 4] = [
        (
            "7b_full",
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
            ],
        ),
        (
            "13b_full",
            &[
                "plan",
                "llama-2-13b",
                "--task",
                "train",
                "--precision",
                "mixed-bf16",
                "--batch",
                "4",
                "--grad-accum",
                "16",
                "--tokens",
                "1B",
            ],
        ),
        ("7b_lora_amp", &["plan", "llama-2-7b", "--task", "lora", "--tokens", "1B"]),
        (
            "70b_offload",
            &[
                "plan",
                "llama-2-70b",
                "--task",
                "train",
                "--precision",
                "mixed-bf16",
                "--grad-accum",
                "64",
                "--tokens",
                "1B",
            ],
        ),
    ];
    for (name, args) in plans {
        // the world size of the plan `--emit deepspeed` writes (it implies `--launcher deepspeed`;
        // the best plan overall may be a TP × PP one no Hugging Face launcher runs)
        let v = common::json(&[args, &["--launcher", "deepspeed", "--json"]].concat(), 0);
        let dp = v["recommended"]["setup"]["dp"].as_u64().unwrap();
        let (ds, _) = run(&[args, &["--emit", "deepspeed"]].concat(), 0);
        std::fs::write(dir.join(format!("ds_{name}_ws{dp}.json")), ds).unwrap();
        let (acc, _) = run(&[args, &["--emit", "accelerate"]].concat(), 0);
        std::fs::write(dir.join(format!("accelerate_{name}.yaml")), acc).unwrap();
    }
    // a DeepSpeed AutoEP plan (Qwen3-30B-A3B, 100B tokens: ZeRO-1 with EP 8): its
    // expert_parallel section through validate_autoep_config at the plan's world size
    let autoep = [
        "plan",
        "qwen3-30b-a3b",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--tokens",
        "100B",
        "--launcher",
        "deepspeed",
    ];
    let v = common::json(&[&autoep[..], &["--json"]].concat(), 0);
    let dp = v["recommended"]["setup"]["dp"].as_u64().unwrap();
    assert!(v["recommended"]["setup"]["ep"].as_u64().unwrap_or(1) > 1, "{v}");
    let (ds, _) = run(&[&autoep[..], &["--emit", "deepspeed"]].concat(), 0);
    std::fs::write(dir.join(format!("ds_qwen3_autoep_ws{dp}.json")), ds).unwrap();
    // a hybrid-sharded plan over two machines (FSDP2 parallelism_config): the emit is a
    // shell snippet writing one YAML per node; the first node's file is checked
    let hsdp = [
        "plan",
        "gemma-2-27b",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--batch",
        "4",
        "--grad-accum",
        "8",
        "--catalog",
        "tests/fixtures/plan/hsdp_ethernet_cluster.toml",
        "--emit",
        "accelerate",
    ];
    let (sh, _) = run(&hsdp, 0);
    let node0 = sh.split("cat > accelerate_node0.yaml <<'EOF'\n").nth(1).and_then(|t| t.split("\nEOF").next());
    let node0 = node0.unwrap_or_else(|| panic!("no node 0 file in\n{sh}"));
    assert!(node0.contains("parallelism_config_dp_replicate_size: 2"), "{node0}");
    std::fs::write(dir.join("accelerate_hsdp_node0.yaml"), format!("{node0}\n")).unwrap();
    // a ZeRO++ hpZ plan over four machines of 8 (`zero_hpz_partition_size` 8), parsed by
    // DeepSpeedZeroConfig at world size 32
    let hpz = [
        "plan",
        "llama-3.1-70b",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--gpus",
        "32",
        "--zero",
        "3",
        "--hpz",
        "8",
        "--emit",
        "deepspeed",
    ];
    let (ds, _) = run(&hpz, 0);
    assert!(ds.contains("\"zero_hpz_partition_size\": 8"), "{ds}");
    std::fs::write(dir.join("ds_70b_hpz_ws32.json"), ds).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../calibration/harness/check_emit.py");
    let out = std::process::Command::new("python3").arg(script).arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("ok ").count(), 10, "{text}");
    assert!(text.contains("ok ds_70b_hpz_ws32.json") && text.contains("zero_hpz_partition_size 8"), "{text}");
    assert!(text.contains("AutoEP autoep_size 8 preset qwen3_moe"), "{text}");
    assert!(text.contains("accelerate launch: FSDP2, dp_replicate 2 x dp_shard 8"), "{text}");
}

/// `--emit megatron` scripts through Megatron-LM's own `parse_args` and
/// `validate_args` (`calibration/harness/check_megatron_args.py`) at each
/// script's world size: every flag exists, parses to the planned value, and
/// the layout passes Megatron's rules (TP × PP dividing the world, global
/// batch a multiple of micro-batch × DP, experts a multiple of EP, layers a
/// multiple of PP). Needs a Megatron-LM checkout in `MEGATRON_LM` (pip's
/// megatron-core ships no `megatron/training`) and a `python3` with
/// `packaging`; otherwise it says it skipped.
#[test]
fn emitted_megatron_scripts_parse_in_megatron_lm() {
    let root = std::env::var("MEGATRON_LM").unwrap_or_default();
    let has_packaging = std::process::Command::new("python3")
        .args(["-c", "import packaging"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !std::path::Path::new(&root).join("megatron/training/arguments.py").is_file() || !has_packaging {
        eprintln!("skipped: set MEGATRON_LM to a Megatron-LM checkout (and pip install packaging)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("vramfit-emit-megatron-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plans: [(&str, &[&str]); 12] = [
        // the optimizer on the host (Megatron-Core's HybridDeviceOptimizer)
        (
            "8b_offload",
            &[
                "plan",
                "llama-3.1-8b",
                "--task",
                "train",
                "--gpus",
                "8",
                "--tp",
                "2",
                "--sp",
                "--zero",
                "1",
                "--offload",
                "cpu",
            ],
        ),
        // MLA, DeepSeek's router and an uneven pipeline (61 layers on 16 stages)
        (
            "deepseek_v3_pp16",
            &[
                "plan",
                "deepseek-v3",
                "--task",
                "train",
                "--dtype",
                "bf16",
                "--gpus",
                "256",
                "--tp",
                "2",
                "--pp",
                "16",
                "--ep",
                "8",
                "--sp",
                "--zero",
                "1",
                "--checkpointing",
                "full",
            ],
        ),
        // interleaved stages (--num-layers-per-virtual-pipeline-stage)
        ("70b_interleaved", &["plan", "llama-3.1-70b", "--task", "train", "--gpus", "64", "--tp", "8", "--pp", "8"]),
        // 80 layers on 6 stages: 12, 4 × 14, 12
        ("70b_pp6", &["plan", "llama-3.1-70b", "--task", "train", "--gpus", "48", "--tp", "8", "--pp", "6"]),
        ("8b", &["plan", "llama-3.1-8b", "--task", "train", "--tokens", "1B"]),
        ("70b", &["plan", "llama-3.1-70b", "--task", "train", "--grad-accum", "16", "--tokens", "1B"]),
        ("qwen2_5_7b", &["plan", "qwen2.5-7b", "--task", "train", "--tokens", "1B"]),
        ("gpt2", &["plan", "gpt2", "--task", "train", "--seq", "1024", "--batch", "8", "--tokens", "100M"]),
        ("mixtral", &["plan", "mixtral-8x7b", "--task", "train", "--tokens", "1B"]),
        (
            "mixtral_ep8",
            &[
                "plan",
                "mixtral-8x7b",
                "--task",
                "train",
                "--gpus",
                "16",
                "--tp",
                "2",
                "--ep",
                "8",
                "--sp",
                "--zero",
                "1",
            ],
        ),
        // expert-tensor parallelism: EP 4 × ETP 2 (--expert-tensor-parallel-size 2)
        (
            "mixtral_ep4_etp2",
            &[
                "plan",
                "mixtral-8x7b",
                "--task",
                "train",
                "--gpus",
                "16",
                "--tp",
                "2",
                "--ep",
                "4",
                "--etp",
                "2",
                "--sp",
                "--zero",
                "1",
            ],
        ),
        // the planner's own MoE layout at scale (EP with ETP 1 on 8 machines)
        ("qwen3_235b", &["plan", "qwen3-235b-a22b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "1B"]),
    ];
    let written = plans.len();
    for (name, args) in plans {
        let (sh, _) = run(&[args, &["--emit", "megatron"]].concat(), 0);
        std::fs::write(dir.join(format!("megatron_{name}.sh")), sh).unwrap();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../calibration/harness/check_megatron_args.py");
    let out = std::process::Command::new("python3").arg(script).arg(&dir).env("MEGATRON_LM", &root).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("\nok megatron_").count(), written, "{text}");
    assert!(text.contains("ok control: global batch"), "{text}");
    // an expert-TP size that does not divide the world is refused (initialize_model_parallel's grid)
    assert!(text.contains("ok control: expert-TP"), "{text}");
}

/// `--emit torchtitan` recipes imported and checked in the installed
/// torchtitan (`calibration/harness/check_torchtitan.py`): the recipe runs,
/// `Trainer.Config.__post_init__` and `_validate_cuda_graphs` pass on the
/// edited config, `ParallelDims` accepts the degrees at the plan's GPU count,
/// and the batch torchtitan derives (0.3.0: `local_batch_size`,
/// `global_batch_size`, `pipeline_parallel_microbatch_size`; later: the
/// `num_tokens_*` fields) is the plan's micro-batch and accumulation. Needs a
/// python with torch and torchtitan (`TORCHTITAN_PYTHON`, default `python3`);
/// otherwise it says it skipped.
#[test]
fn emitted_torchtitan_recipes_load_in_torchtitan() {
    let python = std::env::var("TORCHTITAN_PYTHON").unwrap_or_else(|_| "python3".into());
    let importable = std::process::Command::new(&python)
        .args(["-c", "import torchtitan.trainer"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !importable {
        eprintln!("skipped: no {python} that imports torchtitan (pip install torchtitan; TORCHTITAN_PYTHON names another python)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("vramfit-emit-torchtitan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let plans: [(&str, &[&str]); 5] = [
        ("8b_fsdp", &["plan", "llama-3.1-8b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "1B"]),
        (
            "8b_accum",
            &[
                "plan",
                "llama-3.1-8b",
                "--task",
                "train",
                "--precision",
                "mixed-bf16",
                "--batch",
                "2",
                "--grad-accum",
                "8",
                "--seq",
                "4096",
                "--tokens",
                "1B",
            ],
        ),
        // TP × PP, 1F1B: the batch split into pipeline micro-batches
        ("70b_pp", &["plan", "llama-3.1-70b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "100M"]),
        // interleaved stages
        (
            "70b_interleaved",
            &[
                "plan",
                "llama-3.1-70b",
                "--task",
                "train",
                "--precision",
                "mixed-bf16",
                "--gpus",
                "64",
                "--tp",
                "8",
                "--pp",
                "8",
                "--tokens",
                "1B",
            ],
        ),
        ("qwen3_moe", &["plan", "qwen3-30b-a3b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "1B"]),
    ];
    for (name, args) in plans {
        let v = common::json(&[args, &["--launcher", "torchtitan", "--json"]].concat(), 0);
        let r = &v["recommended"];
        let s = &r["setup"];
        let n = |k: &str| s[k].as_u64().unwrap_or(1);
        let gpus = r["gpus"].as_u64().unwrap();
        let seq = args.iter().position(|a| *a == "--seq").map(|i| args[i + 1].parse::<u64>().unwrap()).unwrap_or(2048);
        let want = serde_json::json!({
            "tp": n("tp"),
            "pp": n("pp"),
            "cp": n("cp"),
            "dp": gpus / (n("tp") * n("pp") * n("cp")),
            "micro_batch": n("micro_batch"),
            "grad_accum": n("grad_accum"),
            "seq": seq,
            "checkpointing": s["checkpointing"] == "full",
        });
        let (recipe, _) = run(&[args, &["--emit", "torchtitan"]].concat(), 0);
        std::fs::write(dir.join(format!("tt_{name}_ws{gpus}.py")), recipe).unwrap();
        std::fs::write(dir.join(format!("tt_{name}_ws{gpus}.json")), want.to_string()).unwrap();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../calibration/harness/check_torchtitan.py");
    let out = std::process::Command::new(&python).arg(script).arg(&dir).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    assert_eq!(text.matches("ok   tt_").count(), plans.len(), "{text}");
}
