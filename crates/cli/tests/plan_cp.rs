//! Issue 21, context parallelism (`--cp`): through the binary, what a CP
//! layout holds per GPU, the engines that run it, and that a recommended CP
//! plan is what `--emit megatron` / `--emit torchtitan` writes.

mod common;
use common::{json, run, vramfit};

/// The flag's number after `name` in an emitted text.
fn flag(text: &str, name: &str) -> Option<u64> {
    let i = text.find(name)? + name.len();
    text[i..].trim_start_matches([' ', '=']).split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// Megatron-LM `--context-parallel-size`: Llama-3.1-8B, 131,072-token sequences,
/// 8 GPUs with the distributed optimizer and full recompute. CP 8 keeps 16,384
/// tokens per GPU, so the saved activations and the logits buffers are an eighth
/// of CP 1's (same DP × CP = 8 shard group, so the model states are equal).
#[test]
fn context_parallel_divides_the_tokens_each_gpu_holds() {
    let job = |cp: &str| {
        json(
            &[
                "estimate",
                "llama-3.1-8b",
                "--task",
                "train",
                "--engine",
                "megatron",
                "--seq",
                "131072",
                "--gpus",
                "8",
                "--zero",
                "1",
                "--checkpointing",
                "full",
                "--cp",
                cp,
                "--json",
            ],
            0,
        )
    };
    let (one, eight) = (job("1"), job("8"));
    let cat = |v: &serde_json::Value, k: &str| v["per_gpu"]["categories"][k].as_u64().unwrap_or(0);
    // full recompute: the layers' inputs, 32 × tokens × 4096 × 2 B, and the logits rows: ÷ 8
    assert_eq!(cat(&one, "activations"), 8 * cat(&eight, "activations"), "{one}");
    assert_eq!(cat(&one, "logits"), 8 * cat(&eight, "logits"));
    for k in ["weights", "master_weights", "gradients", "optimizer_states"] {
        assert_eq!(cat(&one, k), cat(&eight, k), "{k}");
    }
    assert_eq!(eight["workload"]["cp"], 8, "{}", eight["workload"]);
    assert_eq!(eight["workload"]["dp"], 1);
    assert!(one["workload"].get("cp").is_none(), "CP 1 is not written: {}", one["workload"]);
    let (text, _) = run(
        &[
            "estimate",
            "llama-3.1-8b",
            "--task",
            "train",
            "--engine",
            "megatron",
            "--seq",
            "131072",
            "--gpus",
            "8",
            "--zero",
            "1",
            "--checkpointing",
            "full",
            "--cp",
            "8",
            "--explain",
            "--wide",
        ],
        0,
    );
    assert!(text.contains("(TP 1 × CP 8 × PP 1 × DP 1)"), "{text}");
    assert!(text.contains("context parallel 8: each GPU holds 16384 of the 131072 tokens"), "{text}");
    assert!(text.contains("÷ DP × CP 8"), "{text}");
}

/// CP only where an engine runs ring attention (validate::context_parallel):
/// the Hugging Face Trainer and DeepSpeed (whose sequence split is Ulysses) are
/// refused by name, as are eager attention, a GPU count that TP × CP × PP does
/// not divide, and inference.
#[test]
fn context_parallel_is_refused_where_no_engine_runs_it() {
    let cases: [(&[&str], &str); 5] = [
        (&["--seq", "32768", "--gpus", "8", "--cp", "8"], "--cp 8: transformers has no ring context parallelism"),
        (&["--engine", "deepspeed", "--seq", "32768", "--gpus", "8", "--cp", "8"], "DeepSpeed-Ulysses"),
        (&["--engine", "megatron", "--attention", "eager", "--seq", "32768", "--cp", "2"], "--attention sdpa"),
        (&["--engine", "megatron", "--seq", "32768", "--gpus", "12", "--cp", "8"], "12 GPUs are not a multiple"),
        (&["--engine", "megatron", "--seq", "32766", "--cp", "2"], "a multiple of 4"),
    ];
    for (args, words) in cases {
        let (_, err) = run(&[&["estimate", "llama-3.1-8b", "--task", "train"][..], args].concat(), 2);
        assert!(err.contains(words), "{args:?}: {err}");
    }
    let (_, err) = run(&["estimate", "llama-3.1-8b", "--cp", "2"], 2);
    assert!(err.contains("--cp applies to training only"), "{err}");
}

/// A long-sequence job under the two CP launchers: the search tries CP (the
/// sequence is ≥ 32K tokens, `CP_MIN_SEQ`), recommends a CP layout, and
/// `--emit` writes that layout: Megatron `--context-parallel-size`, torchtitan
/// `context_parallel_degree`, GPUs = TP × CP × PP × DP.
#[test]
fn a_context_parallel_plan_is_what_emit_writes() {
    let megatron = ["llama-3.1-8b", "--task", "train", "--engine", "megatron", "--seq", "131072", "--tokens", "1B"];
    let titan = [
        "llama-3.1-8b",
        "--task",
        "train",
        "--engine",
        "torchtitan",
        "--precision",
        "mixed-bf16",
        "--seq",
        "131072",
        "--tokens",
        "1B",
    ];
    for (job, launcher) in [(&megatron[..], "megatron"), (&titan[..], "torchtitan")] {
        let v = json(&[&["plan"][..], job, &["--launcher", launcher, "--json"]].concat(), 0);
        let rec = &v["recommended"];
        let s = &rec["setup"];
        let cp = s["cp"].as_u64().unwrap_or(1);
        assert!(cp > 1, "{launcher}: no CP plan recommended: {s}");
        let (tp, pp, dp) = (s["tp"].as_u64().unwrap(), s["pp"].as_u64().unwrap(), s["dp"].as_u64().unwrap());
        let gpus = rec["gpus"].as_u64().unwrap();
        assert_eq!(gpus, tp * cp * pp * dp, "{s}");
        let o = vramfit().args([&["plan"][..], job, &["--emit", launcher]].concat()).output().unwrap();
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert!(o.status.success(), "{launcher}: {err}");
        assert!(!err.contains("cannot be written for"), "--emit swapped plans: {err}");
        if launcher == "megatron" {
            assert_eq!(flag(&out, "--context-parallel-size "), Some(cp), "{out}");
            assert_eq!(flag(&out, "--tensor-model-parallel-size "), Some(tp), "{out}");
            assert_eq!(flag(&out, "--global-batch-size "), s["global_batch"].as_u64(), "{out}");
            assert!(out.contains("--cp-comm-type p2p"), "{out}");
        } else {
            let get =
                |k: &str| flag(&out, &format!("config.parallelism.{k} = ")).unwrap_or_else(|| panic!("{k}: {out}"));
            assert_eq!(get("context_parallel_degree"), cp, "{out}");
            assert_eq!(get("tensor_parallel_degree"), tp);
            let ranks = get("data_parallel_replicate_degree") * get("data_parallel_shard_degree");
            assert_eq!(ranks, dp, "{out}");
            assert_eq!(flag(&err, "NGPU="), Some(gpus), "{err}");
        }
    }
}
