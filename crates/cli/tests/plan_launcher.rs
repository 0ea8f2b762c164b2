//! Issue 21, "only plans a launcher can run": for every launcher, `plan …
//! --launcher K --json` recommends the setup that `plan … --emit K` writes —
//! sharding stage, TP/PP, GPUs, micro-batch, accumulation, checkpointing,
//! optimizer, offload and context parallelism — over a spread of jobs (29 plans).

mod common;
use common::{json, vramfit};
use serde_json::Value;

/// The Hugging Face launchers run every dense model; torchtitan its own
/// definitions (the `titan` jobs below).
const LAUNCHERS: [&str; 3] = ["deepspeed", "torchrun", "accelerate"];

/// Training jobs: dense models of several sizes, precisions, batches and a
/// pinned layout; each is planned for each launcher.
const JOBS: [&[&str]; 8] = [
    &["llama-2-7b", "--task", "train"],
    &["llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--batch", "4", "--grad-accum", "8"],
    &["llama-2-13b", "--task", "train", "--precision", "mixed-bf16", "--batch", "4", "--grad-accum", "8"],
    &["llama-3.1-8b", "--task", "train", "--precision", "amp-bf16", "--tokens", "100M"],
    &["llama-2-70b", "--task", "train", "--precision", "mixed-bf16", "--grad-accum", "64"],
    &["qwen3-1.7b", "--task", "train", "--batch", "8"],
    &["llama-3.1-8b", "--task", "train", "--precision", "mixed-bf16", "--gpus", "8", "--zero", "2"],
    &["llama-2-13b", "--task", "train", "--precision", "mixed-bf16", "--allow", "lora", "--have", "rtx-3090"],
];

/// What an emitted config says about the setup, in the planner's JSON terms.
#[derive(Debug, PartialEq)]
struct Setup {
    gpus: u64,
    tp: u64,
    pp: u64,
    sharding: String,
    micro_batch: u64,
    grad_accum: u64,
    checkpointing: bool,
    eight_bit: bool,
    offload_optimizer: bool,
    offload_params: bool,
    /// context-parallel degree (Megatron `--context-parallel-size`, torchtitan
    /// `context_parallel_degree`); 1 for the Hugging Face launchers
    cp: u64,
    /// hybrid sharding: replicas of the shard group (1: none)
    dp_replicate: u64,
    /// DeepSpeed ZeRO++ hpZ: the secondary partition's group (1: none)
    hpz: u64,
    /// expert-parallel degree (DeepSpeed AutoEP `expert_parallel.autoep_size`; 1: none)
    ep: u64,
}

fn flag(text: &str, name: &str) -> Option<u64> {
    let i = text.find(name)? + name.len();
    text[i..].trim_start_matches([' ', '=']).split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

fn from_plan(rec: &Value, launcher: &str) -> Setup {
    let s = &rec["setup"];
    if launcher != "torchtitan" {
        assert_eq!(
            (s["tp"].as_u64(), s["pp"].as_u64()),
            (Some(1), Some(1)),
            "a Hugging Face launcher ran TP/PP: {rec}"
        );
    }
    Setup {
        tp: s["tp"].as_u64().unwrap(),
        pp: s["pp"].as_u64().unwrap(),
        gpus: rec["gpus"].as_u64().unwrap(),
        sharding: s["sharding"].as_str().unwrap().to_string(),
        micro_batch: s["micro_batch"].as_u64().unwrap(),
        grad_accum: s["grad_accum"].as_u64().unwrap(),
        checkpointing: s["checkpointing"] == "full",
        eight_bit: s["optimizer"].as_str().unwrap().contains("8bit"),
        offload_optimizer: s["offload_optimizer"] != "none",
        offload_params: s["offload_params"] != "none",
        cp: s["cp"].as_u64().unwrap_or(1),
        // absent from the JSON when 1 (docs/schema.md)
        dp_replicate: s["dp_replicate"].as_u64().unwrap_or(1),
        hpz: s["hpz"].as_u64().unwrap_or(1),
        ep: s["ep"].as_u64().unwrap_or(1),
    }
}

fn from_emitted(launcher: &str, out: &str, err: &str) -> Setup {
    let all = format!("{out}\n{err}");
    match launcher {
        "deepspeed" => {
            let v: Value = serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"));
            let z = &v["zero_optimization"];
            let stage = z["stage"].as_u64().unwrap_or(0);
            Setup {
                gpus: flag(err, "--num_gpus").unwrap() * flag(err, "--num_nodes").unwrap_or(1),
                tp: 1,
                pp: 1,
                sharding: if stage == 0 { "none".into() } else { format!("zero{stage}") },
                micro_batch: v["train_micro_batch_size_per_gpu"].as_u64().unwrap(),
                grad_accum: v["gradient_accumulation_steps"].as_u64().unwrap(),
                checkpointing: err.contains("--gradient_checkpointing"),
                eight_bit: err.contains("8bit"),
                offload_optimizer: z["offload_optimizer"]["device"] == "cpu",
                offload_params: z["offload_param"]["device"] == "cpu",
                cp: 1,
                dp_replicate: 1,
                hpz: z["zero_hpz_partition_size"].as_u64().unwrap_or(1),
                // DeepSpeed AutoEP (docs/code-docs/source/autoep.rst "Usage")
                ep: match &v["expert_parallel"] {
                    Value::Null => 1,
                    e => {
                        assert_eq!(e["enabled"], true, "{out}");
                        e["autoep_size"].as_u64().unwrap()
                    }
                },
            }
        }
        "torchrun" => {
            // FSDP1 HYBRID_SHARD shards within each node and replicates across the nodes
            let hybrid = out.contains("--fsdp 'hybrid_shard");
            let sharding = if out.contains("full_shard") || hybrid {
                "zero3"
            } else if out.contains("shard_grad_op") {
                "zero2"
            } else {
                "none"
            };
            Setup {
                gpus: flag(out, "--nproc-per-node").unwrap() * flag(out, "--nnodes").unwrap_or(1),
                tp: 1,
                pp: 1,
                sharding: sharding.into(),
                micro_batch: flag(out, "--per_device_train_batch_size").unwrap(),
                grad_accum: flag(out, "--gradient_accumulation_steps").unwrap(),
                checkpointing: out.contains("\"activation_checkpointing\": true")
                    || out.contains("--gradient_checkpointing"),
                eight_bit: out.contains("8bit"),
                offload_optimizer: out.contains(" offload"),
                offload_params: out.contains(" offload"),
                cp: 1,
                dp_replicate: if hybrid { flag(out, "--nnodes").unwrap() } else { 1 },
                hpz: 1,
                ep: 1,
            }
        }
        "accelerate" => {
            let fsdp = out.contains("distributed_type: FSDP");
            let ds = out.contains("distributed_type: DEEPSPEED");
            let sharding = if fsdp {
                if out.contains("fsdp_reshard_after_forward: true") || out.contains("FULL_SHARD") {
                    "zero3".to_string()
                } else {
                    "zero2".to_string()
                }
            } else if ds {
                format!("zero{}", flag(out, "zero_stage:").unwrap())
            } else {
                "none".to_string()
            };
            Setup {
                gpus: flag(out, "num_processes:").unwrap(),
                tp: 1,
                pp: 1,
                sharding,
                micro_batch: flag(&all, "--per_device_train_batch_size").unwrap(),
                grad_accum: flag(&all, "--gradient_accumulation_steps").unwrap(),
                checkpointing: out.contains("fsdp_activation_checkpointing: true")
                    || all.contains("--gradient_checkpointing"),
                eight_bit: all.contains("8bit"),
                offload_optimizer: out.contains("fsdp_offload_params: true")
                    || out.contains("offload_optimizer_device: cpu"),
                offload_params: out.contains("fsdp_offload_params: true") || out.contains("offload_param_device: cpu"),
                cp: 1,
                // FSDP2 hybrid sharding: accelerate's ParallelismConfig (every node's file says the same)
                dp_replicate: flag(out, "parallelism_config_dp_replicate_size:").unwrap_or(1),
                hpz: 1,
                ep: 1,
            }
        }
        "torchtitan" => {
            let v = |k: &str| flag(out, &format!("config.{k} = ")).unwrap_or_else(|| panic!("no {k} in\n{out}"));
            let (replicate, shard) =
                (v("parallelism.data_parallel_replicate_degree"), v("parallelism.data_parallel_shard_degree"));
            let (tp, pp) = (v("parallelism.tensor_parallel_degree"), v("parallelism.pipeline_parallel_degree"));
            let cp = flag(out, "config.parallelism.context_parallel_degree = ").unwrap_or(1);
            let seq = v("training.max_context_length");
            let micro_tokens = v("training.num_tokens_per_microbatch_per_dp_rank");
            let dp = replicate * shard;
            // FSDP2 over the dp_shard × cp ranks (torchtitan `ParallelDims.fsdp_enabled`)
            let sharding = if shard * cp > 1 {
                if out.contains("fsdp_reshard_after_forward = \"never\"") {
                    "zero2"
                } else {
                    "zero3"
                }
            } else {
                "none"
            };
            let gpus = match flag(err, "NGPU=") {
                Some(n) => n,
                None => flag(err, "--nnodes=").unwrap() * flag(err, "--nproc-per-node=").unwrap(),
            };
            assert_eq!(gpus, dp * tp * pp * cp, "{out}\n{err}");
            Setup {
                gpus,
                tp,
                pp,
                sharding: sharding.into(),
                micro_batch: micro_tokens / seq,
                grad_accum: v("training.num_tokens_per_train_step") / (micro_tokens * dp),
                checkpointing: out.contains("config.activation_checkpoint = FullAC.Config()"),
                eight_bit: false,
                offload_optimizer: out.contains("enable_cpu_offload = True"),
                offload_params: out.contains("enable_cpu_offload = True"),
                cp,
                // HSDP: FSDP2 over the replicate × shard mesh (sharded, more than one replica)
                dp_replicate: if shard > 1 { replicate } else { 1 },
                hpz: 1,
                ep: 1,
            }
        }
        _ => unreachable!(),
    }
}

#[test]
fn recommended_is_what_emit_writes_for_every_launcher() {
    let mut compared = 0;
    let mut skipped = Vec::new();
    let titan: [&[&str]; 5] = [
        &["llama-3.1-8b", "--task", "train", "--precision", "mixed-bf16", "--batch", "2", "--grad-accum", "8"],
        &["llama-3.1-70b", "--task", "train", "--precision", "mixed-bf16", "--grad-accum", "16"],
        &["llama-3.1-405b", "--task", "train", "--precision", "mixed-bf16", "--grad-accum", "64", "--tokens", "1B"],
        &["qwen3-1.7b", "--task", "train", "--precision", "mixed-bf16", "--batch", "8"],
        // a long sequence under torchtitan: a context-parallel plan (CP from 32K tokens)
        &["llama-3.1-8b", "--task", "train", "--engine", "torchtitan", "--precision", "mixed-bf16", "--seq", "131072"],
    ];
    let runs = JOBS
        .iter()
        .flat_map(|j| LAUNCHERS.iter().map(move |l| (*j, *l)))
        .chain(titan.iter().map(|j| (*j, "torchtitan")));
    for (job, l) in runs {
        match compare(job, l) {
            Ok(_) => compared += 1,
            Err(e) => skipped.push(e),
        }
    }
    assert!(skipped.is_empty(), "{skipped:?}");
    assert!(compared >= 20, "{compared}");
}

/// `plan JOB --launcher L --json` against `plan JOB --emit L`: the
/// recommended setup as the emitted file states it (`Err`: the emit failed).
fn compare(job: &[&str], l: &str) -> Result<Value, String> {
    let v = json(&[&["plan"][..], job, &["--launcher", l, "--json"]].concat(), 0);
    assert_eq!(v["launcher"], l, "{job:?}");
    let rec = &v["recommended"];
    if v["own_card"].is_object() {
        // the user's own card: the recommendation is that card, written the same way
        assert!(rec.is_object());
    }
    let planned = from_plan(rec, l);
    let o = vramfit().args([&["plan"][..], job, &["--emit", l]].concat()).output().unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    if !o.status.success() {
        return Err(format!("{job:?} {l}: {err}"));
    }
    let emitted = from_emitted(l, &out, &err);
    // FSDP offloads parameters and optimizer together (`offload_params`)
    let fsdp = out.contains("fsdp");
    let planned = if fsdp && (planned.offload_optimizer || planned.offload_params) {
        Setup { offload_optimizer: true, offload_params: true, ..planned }
    } else {
        planned
    };
    assert_eq!(emitted, planned, "{job:?} --launcher {l}\nemitted:\n{out}\n{err}");
    assert!(!err.contains("cannot be written for"), "--emit swapped plans: {err}");
    Ok(rec.clone())
}

/// A two-machine cluster of 8 × H100 on a 100 Gb/s Ethernet fabric, rented as a
/// cluster only: where hybrid sharding pays.
fn slow_cluster() -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("vramfit-launcher-hsdp-{}.toml", std::process::id()));
    std::fs::write(
        &p,
        "replace = true\n[[offer]]\nid = \"c\"\nprovider = \"p\"\nname = \"H100 cluster\"\ngpu = \"h100-sxm\"\ngpus = 8\nlink = \"nvlink\"\nram_gb = 2048\nhourly = 20\ncurrency = \"USD\"\nmax_machines = 4\nmin_machines = 2\nfabric = { kind = \"ethernet\", gbps_per_node = 100, nvlink_domain = 8 }\n",
    )
    .unwrap();
    p
}

/// Hybrid sharding plans (issue 21 item 3): the JSON's `setup.dp_replicate` is
/// what each FSDP launcher writes — accelerate's FSDP2 `parallelism_config`
/// (dp_replicate × dp_shard), the Trainer's `--fsdp 'hybrid_shard …'` on one
/// node per replica, torchtitan's `data_parallel_replicate_degree` ×
/// `data_parallel_shard_degree`. The Hugging Face launchers get HSDP as the
/// recommendation for a 27B full fine-tune on the slow cluster (ZeRO-2 needs
/// 3 machines and changes the batch, ZeRO-3 moves every parameter over
/// Ethernet); torchtitan, which has TP, is pinned to it.
#[test]
fn hybrid_sharding_plans_are_what_emit_writes() {
    let cat = slow_cluster();
    let cat = cat.to_str().unwrap();
    let gemma = [
        "gemma-2-27b",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--batch",
        "4",
        "--grad-accum",
        "8",
        "--tokens",
        "1B",
        "--catalog",
        cat,
    ];
    for l in ["accelerate", "torchrun"] {
        let rec = compare(&gemma, l).unwrap();
        assert_eq!((rec["setup"]["dp_replicate"].as_u64(), rec["machines"].as_u64()), (Some(2), Some(2)), "{rec}");
    }
    let titan = [
        "llama-3.1-8b",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--gpus",
        "16",
        "--zero",
        "3",
        "--dp-replicate",
        "2",
        "--catalog",
        cat,
    ];
    let rec = compare(&titan, "torchtitan").unwrap();
    assert_eq!(rec["setup"]["dp_replicate"], 2, "{rec}");
    // DeepSpeed writes no hybrid sharding: its plan for the job is another layout
    let rec = compare(&gemma, "deepspeed").unwrap();
    assert!(rec["setup"]["dp_replicate"].is_null(), "{rec}");
}

/// ZeRO++ hpZ plans (issue 21 item 3; DeepSpeed `zero_hpz_partition_size`, Wang
/// et al. 2023 §3.2): the JSON's `setup.hpz` is the emitted ds_config's
/// `zero_optimization.zero_hpz_partition_size`. On the slow two-machine cluster
/// the DeepSpeed plan of the 27B job is ZeRO-3 + hpZ over the 8 GPUs of each
/// machine (backward's all-gathers stay on NVLink); a 70B full fine-tune with a
/// 40-hour deadline on the embedded InfiniBand A100 machines gets hpZ on four
/// of them (plain ZeRO-3 on 32 takes ~48 h: docs/plan.md). The FSDP launchers
/// have no hpZ: their plan for the same job carries none.
#[test]
fn hpz_plans_are_what_emit_writes() {
    let cat = slow_cluster();
    let cat = cat.to_str().unwrap();
    let gemma = [
        "gemma-2-27b",
        "--task",
        "train",
        "--precision",
        "mixed-bf16",
        "--batch",
        "4",
        "--grad-accum",
        "8",
        "--tokens",
        "1B",
        "--catalog",
        cat,
    ];
    let rec = compare(&gemma, "deepspeed").unwrap();
    assert_eq!((rec["setup"]["hpz"].as_u64(), rec["machines"].as_u64()), (Some(8), Some(2)), "{rec}");
    let llama = ["llama-3.1-70b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "1B", "--hours", "40"];
    let rec = compare(&llama, "deepspeed").unwrap();
    assert_eq!((rec["setup"]["hpz"].as_u64(), rec["machines"].as_u64()), (Some(8), Some(4)), "{rec}");
    assert!(rec["job_hours"].as_f64().unwrap() <= 40.0, "{rec}");
    for l in ["accelerate", "torchrun"] {
        let rec = compare(&gemma, l).unwrap();
        assert!(rec["setup"]["hpz"].is_null(), "{l}: {rec}");
    }
    // pinned: --hpz for a launcher that cannot run it is refused by name
    let (_, err) = common::run(
        &["plan", "llama-2-7b", "--task", "train", "--gpus", "16", "--zero", "3", "--hpz", "8", "--emit", "accelerate"],
        2,
    );
    assert!(err.contains("--emit accelerate: ZeRO++ hpZ") && err.contains("--emit deepspeed"), "{err}");
}

/// `--launcher` and `--emit` naming different launchers is refused by field;
/// inference has nothing to launch.
#[test]
fn launcher_conflicts_and_inference_are_refused() {
    let o = vramfit()
        .args(["plan", "llama-2-7b", "--task", "train", "--launcher", "deepspeed", "--emit", "torchrun"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("name different launchers"));
    let o = vramfit().args(["plan", "llama-2-7b", "--launcher", "deepspeed"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("this job is inference"));
    let o = vramfit().args(["plan", "llama-2-7b", "--task", "train", "--emit", "vllm"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("serves models: this job is training"));
    let o = vramfit().args(["plan", "llama-3.1-8b", "--engine", "sglang", "--emit", "vllm"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("serves with vllm, not --engine sglang"));
}

/// When the launcher cannot run the best plan overall, the report says what
/// that plan needs and what it bills, and names it in `best_overall`: a 405B
/// full fine-tune's best is TP 8 × PP 12 across 12 machines, which DeepSpeed
/// cannot run on a Hugging Face model; DeepSpeed's own best (ZeRO-3 on the
/// same machines) bills the same month and takes longer — the days are what
/// the best saves.
#[test]
fn the_best_plan_a_launcher_cannot_run_is_named() {
    let args = ["plan", "llama-3.1-405b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "1B"];
    let v = json(&[&args[..], &["--launcher", "deepspeed", "--json"]].concat(), 0);
    let best = &v["best_overall"];
    assert!(best.is_object(), "{v}");
    assert!(best["setup"]["pp"].as_u64().unwrap() > 1 || best["setup"]["tp"].as_u64().unwrap() > 1, "{best}");
    let rec = &v["recommended"];
    assert!(rec["setup"]["tp"] == 1 && rec["setup"]["pp"] == 1, "{rec}");
    assert!(best["job_hours"].as_f64().unwrap() < rec["job_hours"].as_f64().unwrap() * 0.9, "{best}\n{rec}");
    let notes: Vec<&str> = v["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert!(notes[0].starts_with("deepspeed cannot launch the best plan overall"), "{notes:?}");
    assert!(notes[0].contains("for the job, this plan"), "{notes:?}");
    // without a launcher the same plan is the recommendation
    let free = json(&[&args[..], &["--json"]].concat(), 0);
    assert_eq!(free["recommended"]["setup"], best["setup"]);
}

/// Serving plans: `plan … --launcher vllm|sglang --json` recommends the split
/// the emitted command starts — TP, PP, data-parallel replicas, sequences per
/// replica, context, KV dtype — and the plan is sized with that engine.
#[test]
fn serving_recommendation_is_what_the_command_starts() {
    let jobs: [&[&str]; 5] = [
        &["llama-3.1-8b", "--concurrency", "64", "--context", "8192"],
        &["llama-3.1-70b", "--concurrency", "32", "--context", "8192"],
        &["llama-3.1-70b", "--concurrency", "32", "--context", "8192", "--kv-dtype", "fp8"],
        &["qwen3-32b", "--concurrency", "128", "--context", "4096"],
        &["llama-3.1-405b", "--concurrency", "16", "--context", "8192"],
    ];
    let mut compared = 0;
    for job in jobs {
        for l in ["vllm", "sglang"] {
            let v = json(&[&["plan"][..], job, &["--launcher", l, "--json"]].concat(), 0);
            assert_eq!(v["launcher"], l);
            let rec = &v["recommended"];
            let s = &rec["setup"];
            let o = vramfit().args([&["plan"][..], job, &["--emit", l]].concat()).output().unwrap();
            assert!(o.status.success(), "{job:?} {l}: {}", String::from_utf8_lossy(&o.stderr));
            let out = String::from_utf8_lossy(&o.stdout);
            let (tp, pp, dp, ctx, seqs) = if l == "vllm" {
                assert!(out.contains("vllm serve meta-llama/") || out.contains("vllm serve Qwen/"), "{out}");
                (
                    flag(&out, "--tensor-parallel-size"),
                    flag(&out, "--pipeline-parallel-size").or(Some(1)),
                    flag(&out, "--data-parallel-size").or(Some(1)),
                    flag(&out, "--max-model-len"),
                    flag(&out, "--max-num-seqs"),
                )
            } else {
                assert!(out.contains("python -m sglang.launch_server --model-path "), "{out}");
                (
                    flag(&out, "--tp-size"),
                    flag(&out, "--pp-size").or(Some(1)),
                    flag(&out, "--dp-size").or(Some(1)),
                    flag(&out, "--context-length"),
                    flag(&out, "--max-running-requests"),
                )
            };
            let replicas = s["replicas"].as_u64().unwrap();
            // replicas spread over machines run one server per machine
            let machines = rec["machines"].as_u64().unwrap();
            let per_server = if out.contains("balance requests over the") { replicas / machines } else { replicas };
            assert_eq!((tp, pp, dp), (s["tp"].as_u64(), s["pp"].as_u64(), Some(per_server)), "{job:?} {l}\n{out}\n{s}");
            assert_eq!(ctx, job.iter().position(|a| *a == "--context").and_then(|i| job[i + 1].parse().ok()));
            assert_eq!(seqs, Some(s["global_batch"].as_u64().unwrap().div_ceil(replicas)));
            assert_eq!(out.contains("--kv-cache-dtype"), s["kv_dtype"] == "fp8", "{out}");
            // the machines the plan spans are the ones the command joins
            if rec["machines"].as_u64().unwrap() > 1 {
                assert!(out.contains("machines"), "{out}");
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 10);
}

/// MoE serving plans: the command `--emit vllm|sglang` writes starts the
/// expert layout the plan recommends — vLLM `--enable-expert-parallel`, with
/// data-parallel attention as `--data-parallel-size N` over engine cores of
/// `--tensor-parallel-size TP / N` each serving `--max-num-seqs` of their
/// own (`FusedMoEParallelConfig.make`: EP = DP × TP); SGLang `--ep-size`,
/// `--enable-dp-attention --dp-size N` over `--tp-size` ranks with
/// `--max-running-requests` the server's total (its model runner divides it
/// by dp_size). DeepSeek-V3 on one machine of 8 H200 (data-parallel
/// attention), and DeepSeek-V3 and Qwen3-30B-A3B pinned to TP 8 × EP 8.
#[test]
fn moe_serving_recommendation_is_what_the_command_starts() {
    let cat = std::env::temp_dir().join(format!("vramfit-launcher-{}-h200.toml", std::process::id()));
    std::fs::write(
        &cat,
        "replace = true\n[[offer]]\nid = \"h200x8\"\nprovider = \"p\"\nname = \"8 x H200\"\ngpu = \"h200\"\ngpus = 8\nhourly = 30\ncurrency = \"USD\"\nlink = \"nvlink\"\n",
    )
    .unwrap();
    let c = cat.to_str().unwrap();
    let ds = ["deepseek-v3", "--dtype", "fp8", "--concurrency", "64", "--context", "8192", "--catalog", c];
    let jobs: [Vec<&str>; 3] = [
        [&ds[..], &["--tokens", "1000000000"]].concat(),
        [&ds[..], &["--tp", "8", "--ep", "8"]].concat(),
        vec!["qwen3-30b-a3b", "--concurrency", "64", "--context", "4096", "--catalog", c, "--tp", "8", "--ep", "8"],
    ];
    let mut expert_layouts = 0;
    for job in &jobs {
        for l in ["vllm", "sglang"] {
            let v = json(&[&["plan"][..], job, &["--launcher", l, "--json"]].concat(), 0);
            let s = &v["recommended"]["setup"];
            let (tp, ep, dpa) =
                (s["tp"].as_u64().unwrap(), s["ep"].as_u64().unwrap_or(1), s["dp_attention"].as_u64().unwrap_or(1));
            let seqs = s["global_batch"].as_u64().unwrap().div_ceil(s["replicas"].as_u64().unwrap());
            let o = vramfit().args([&["plan"][..], job, &["--emit", l]].concat()).output().unwrap();
            assert!(o.status.success(), "{job:?} {l}: {}", String::from_utf8_lossy(&o.stderr));
            let out = String::from_utf8_lossy(&o.stdout);
            if l == "vllm" {
                let emitted = (
                    flag(&out, "--tensor-parallel-size").unwrap() * flag(&out, "--data-parallel-size").unwrap_or(1),
                    out.contains("--enable-expert-parallel"),
                    flag(&out, "--data-parallel-size").unwrap_or(1),
                    flag(&out, "--max-num-seqs"),
                );
                assert_eq!(emitted, (tp, ep > 1, dpa, Some(seqs.div_ceil(dpa))), "{job:?}\n{out}\n{s}");
            } else {
                let emitted = (
                    flag(&out, "--tp-size"),
                    flag(&out, "--ep-size").unwrap_or(1),
                    out.contains("--enable-dp-attention"),
                    flag(&out, "--dp-size").unwrap_or(1),
                    flag(&out, "--max-running-requests"),
                );
                assert_eq!(emitted, (Some(tp), ep, dpa > 1, dpa, Some(seqs)), "{job:?}\n{out}\n{s}");
            }
            expert_layouts += (ep > 1) as u32;
        }
    }
    // every job here recommends an expert layout, on both engines
    assert_eq!(expert_layouts, 6);
}

/// Megatron-LM (`--launcher megatron` / `--emit megatron`): the recommended
/// plan is what `megatron_plan.sh` runs — GPUs (torchrun's `--nproc-per-node`
/// × machines), `--tensor-model-parallel-size`, `--pipeline-model-parallel-size`,
/// `--expert-model-parallel-size` and `--expert-tensor-parallel-size` (written
/// for every MoE plan: Megatron's default when absent is the TP size),
/// `--sequence-parallel`, `--use-distributed-optimizer` (ZeRO-1),
/// `--micro-batch-size`, `--global-batch-size`, full / selective recompute and
/// `--bf16` (megatron/training/arguments.py, Megatron-LM main of August 2026),
/// and `--train-iters` = ⌈tokens / (global batch × seq)⌉. Five dense jobs and
/// four MoE ones (Mixtral and Qwen3-30B-A3B with EP, one pinned to TP 2 × EP 8,
/// one to TP 2 × EP 4 × ETP 2).
#[test]
fn megatron_recommendation_is_what_the_script_runs() {
    let jobs: [&[&str]; 13] = [
        // the optimizer on the host (--optimizer-cpu-offload)
        &[
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
            "--tokens",
            "1B",
        ],
        // an interleaved pipeline (the planner picks virtual stages for PP 8)
        &["llama-3.1-70b", "--task", "train", "--gpus", "64", "--tp", "8", "--pp", "8", "--tokens", "1B"],
        // 61 layers on 16 stages: the end stages take the remainder (uneven PP), with MLA
        &[
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
            "--tokens",
            "1B",
        ],
        &["deepseek-v3", "--task", "train", "--dtype", "bf16", "--tokens", "1B"],
        &["llama-3.1-8b", "--task", "train", "--tokens", "1B"],
        &["llama-2-13b", "--task", "train", "--batch", "4", "--grad-accum", "8", "--tokens", "500M"],
        &["llama-3.1-70b", "--task", "train", "--grad-accum", "16", "--tokens", "1B"],
        &["qwen3-1.7b", "--task", "train", "--batch", "8", "--tokens", "100M"],
        &["llama-3.1-8b", "--task", "train", "--gpus", "8", "--tp", "2", "--sp", "--zero", "1", "--tokens", "1B"],
        &["mixtral-8x7b", "--task", "train", "--tokens", "1B"],
        &["qwen3-30b-a3b", "--task", "train", "--tokens", "1B"],
        &[
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
            "--tokens",
            "1B",
        ],
        // expert-tensor parallelism pinned: each expert split over 2 ranks (EP 4 × ETP 2)
        &[
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
            "--tokens",
            "1B",
        ],
    ];
    let (mut expert_plans, mut uneven, mut mla, mut interleaved, mut offload) = (0, 0, 0, 0, 0);
    let mut split_experts = 0;
    for job in jobs {
        let v = json(&[&["plan"][..], job, &["--launcher", "megatron", "--json"]].concat(), 0);
        assert_eq!(v["launcher"], "megatron", "{job:?}");
        let rec = &v["recommended"];
        let s = &rec["setup"];
        let o = vramfit().args([&["plan"][..], job, &["--emit", "megatron"]].concat()).output().unwrap();
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{job:?}: {err}");
        assert!(!err.contains("cannot be written for"), "--emit swapped plans: {err}");
        assert!(out.contains("  pretrain_gpt.py"), "{out}");
        let get = |k: &str| flag(&out, &format!("{k} ")).unwrap_or_else(|| panic!("no {k} in\n{out}"));
        let machines = flag(&out, "NNODES=${NNODES:-").unwrap();
        let emitted = (
            get("--nproc-per-node") * machines,
            get("--tensor-model-parallel-size"),
            get("--pipeline-model-parallel-size"),
            flag(&out, "--expert-model-parallel-size ").unwrap_or(1),
            out.contains("--sequence-parallel"),
            if out.contains("--use-distributed-optimizer") { "zero1" } else { "none" },
            get("--micro-batch-size"),
            get("--global-batch-size"),
            if out.contains("--recompute-granularity full") {
                "full"
            } else if out.contains("--recompute-granularity selective") {
                "selective"
            } else {
                "none"
            },
            out.contains("--bf16"),
            flag(&out, "--context-parallel-size ").unwrap_or(1),
            flag(&out, "--expert-tensor-parallel-size "),
        );
        // a MoE model's script always states the expert-TP size (Megatron's default
        // when the flag is absent is the TP size): the plan's `etp`, absent meaning TP
        let moe = ["deepseek-v3", "mixtral-8x7b", "qwen3-30b-a3b"].contains(&job[0]);
        let planned = (
            rec["gpus"].as_u64().unwrap(),
            s["tp"].as_u64().unwrap(),
            s["pp"].as_u64().unwrap(),
            s["ep"].as_u64().unwrap_or(1),
            s["sequence_parallel"].as_bool().unwrap_or(false),
            s["sharding"].as_str().unwrap(),
            s["micro_batch"].as_u64().unwrap(),
            s["global_batch"].as_u64().unwrap(),
            s["checkpointing"].as_str().unwrap(),
            s["precision"] == "mixed-bf16",
            s["cp"].as_u64().unwrap_or(1),
            moe.then(|| s["etp"].as_u64().unwrap_or(s["tp"].as_u64().unwrap())),
        );
        assert_eq!(emitted, planned, "{job:?}\n{out}\n{s}");
        // the pipeline schedule: virtual stages (interleaved) and the layers per stage
        let layers = get("--num-layers");
        let (pp, v) = (planned.2, s["virtual_stages"].as_u64().unwrap_or(1));
        match flag(&out, "--num-layers-per-virtual-pipeline-stage ") {
            Some(per_virtual) => assert_eq!(layers / (pp * per_virtual), v, "{job:?}\n{out}"),
            None => assert_eq!(v, 1, "{job:?}: planned {v} virtual stages, the script runs 1F1B\n{out}"),
        }
        if layers % pp != 0 {
            // Megatron's uneven split: the middle stages even, one layer at least on each end
            let (first, last) = (get("--decoder-first-pipeline-num-layers"), get("--decoder-last-pipeline-num-layers"));
            assert!(first >= 1 && last >= 1 && first.max(last) <= layers.div_ceil(pp), "{out}");
            assert_eq!((layers - first - last) % (pp - 2).max(1), 0, "{out}");
            uneven += 1;
        }
        if out.contains("--multi-latent-attention") {
            assert!(out.contains("--kv-lora-rank 512") && out.contains("--q-lora-rank 1536"), "{out}");
            assert!(out.contains("MOE_ROUTER_TOPK_SCALING_FACTOR=${MOE_ROUTER_TOPK_SCALING_FACTOR:?"), "{out}");
            mla += 1;
        }
        interleaved += usize::from(v > 1);
        let offloaded = s["offload_optimizer"] == "cpu";
        assert_eq!(out.contains("--optimizer-cpu-offload"), offloaded, "{job:?}\n{out}");
        offload += usize::from(offloaded);
        assert_eq!(machines, rec["machines"].as_u64().unwrap());
        // micro-batch × accumulation × data-parallel ranks = the global batch
        let dp = s["dp"].as_u64().unwrap();
        assert_eq!(s["micro_batch"].as_u64().unwrap() * s["grad_accum"].as_u64().unwrap() * dp, planned.7);
        if planned.3 > 1 {
            expert_plans += 1;
            split_experts += usize::from(planned.11.unwrap_or(1) > 1);
        }
        // --train-iters from --tokens: ⌈tokens / (global batch × 2048)⌉
        let tokens: u64 = match job[job.iter().position(|a| *a == "--tokens").unwrap() + 1] {
            "1B" => 1_000_000_000,
            "500M" => 500_000_000,
            _ => 100_000_000,
        };
        assert_eq!(get("--train-iters"), tokens.div_ceil(planned.7 * 2048), "{out}");
    }
    assert!(expert_plans >= 2, "{expert_plans}");
    assert!(split_experts >= 1, "no plan with expert-tensor parallelism above 1");
    assert!(
        uneven >= 1 && mla >= 2 && interleaved >= 1 && offload >= 1,
        "uneven {uneven}, MLA {mla}, interleaved {interleaved}, offload {offload}"
    );
}

/// What Megatron does not run is refused by name: LoRA (pretrain_gpt.py
/// trains full models), a model its GPT flags cannot express (DeepSeek-V3.2's
/// sparse-attention indexer), another --engine with --launcher megatron, and EP
/// under a framework other than Megatron.
#[test]
fn megatron_refusals_name_why() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["plan", "llama-3.1-8b", "--task", "lora", "--launcher", "megatron"],
            "--task with --engine megatron: Megatron-LM trains full models",
        ),
        (
            &["plan", "deepseek-v3.2", "--task", "train", "--dtype", "bf16", "--emit", "megatron"],
            "sparse-attention indexer",
        ),
        (
            &["plan", "llama-3.1-8b", "--task", "train", "--engine", "deepspeed", "--launcher", "megatron"],
            "not --engine deepspeed",
        ),
        (
            &["estimate", "mixtral-8x7b", "--task", "train", "--engine", "fsdp", "--gpus", "8", "--ep", "8"],
            "(--engine megatron)",
        ),
    ];
    for (args, says) in cases {
        let o = vramfit().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// DeepSpeed AutoEP (`expert_parallel`, DeepSpeed PR #7938): a MoE model of an
/// AutoEP preset planned for DeepSpeed — pinned layouts and jobs long enough
/// that the AutoEP layout is the recommendation — is what `--emit deepspeed`
/// writes, EP included (`expert_parallel.autoep_size` = the plan's `ep`, with
/// the model's preset).
#[test]
fn autoep_plans_are_what_emit_writes() {
    let jobs: [&[&str]; 4] = [
        &["qwen3-30b-a3b", "--task", "train", "--precision", "mixed-bf16", "--gpus", "16", "--zero", "1", "--ep", "16"],
        &["mixtral-8x7b", "--task", "train", "--precision", "mixed-bf16", "--gpus", "32", "--zero", "2", "--ep", "8"],
        &["mixtral-8x7b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "100B"],
        &["qwen3-30b-a3b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "100B"],
    ];
    for job in jobs {
        let rec = compare(job, "deepspeed").unwrap_or_else(|e| panic!("{e}"));
        assert!(rec["setup"]["ep"].as_u64().unwrap() > 1, "{job:?}: not an AutoEP plan: {rec}");
        let o = vramfit().args([&["plan"][..], job, &["--emit", "deepspeed"]].concat()).output().unwrap();
        let out: Value = serde_json::from_slice(&o.stdout).unwrap();
        let preset = if job[0].starts_with("mixtral") { "mixtral" } else { "qwen3_moe" };
        assert_eq!(out["expert_parallel"]["preset_model"], preset, "{job:?}");
    }
    // a launcher without expert parallelism for training plans without it
    let v = json(&[&["plan"][..], jobs[2], &["--launcher", "torchrun", "--json"]].concat(), 0);
    assert_eq!(v["recommended"]["setup"]["ep"].as_u64().unwrap_or(1), 1, "{v}");
}
