//! Issue 21, mixture of experts in the time model: a decode step reads the
//! shared weights and only the routed experts its tokens are sent to.

mod common;
use common::json;

fn h100_catalogue() -> std::path::PathBuf {
    // one file per call: tests run in parallel threads, and a file rewritten
    // while another test's vramfit reads it reads as empty
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = std::env::temp_dir().join(format!("vramfit-moe-{}-{n}-h100.toml", std::process::id()));
    std::fs::write(
        &p,
        "replace = true\n[[offer]]\nid = \"h\"\nprovider = \"p\"\nname = \"H100\"\ngpu = \"h100-sxm\"\ngpus = 1\nhourly = 3\ncurrency = \"USD\"\n",
    )
    .unwrap();
    p
}

/// Decode speed on one H100 under transformers' `generate`, named so that
/// a batch of 64 fits whole on the card (a MoE plan with no `--engine`
/// assumes vLLM, whose 0.9 start-up share leaves no room for 64 × 4,096
/// tokens beside gpt-oss-120b's 65.9 GiB): the routed-expert rule under test
/// is the same for every engine.
fn decode(model: &[&str], concurrency: &str) -> (f64, f64) {
    let cat = h100_catalogue();
    let v = json(
        &[
            &["plan"][..],
            model,
            &[
                "--catalog",
                cat.to_str().unwrap(),
                "--engine",
                "transformers",
                "--context",
                "4096",
                "--concurrency",
                concurrency,
                "--json",
            ],
        ]
        .concat(),
        0,
    );
    let rec = &v["recommended"];
    assert_eq!(rec["gpus"], 1, "{v}");
    (rec["tokens_per_s"].as_f64().unwrap(), v["model"]["params_active"].as_f64().unwrap_or(f64::NAN))
}

/// The must-show: gpt-oss-120b (5.1B active of 117B) decodes faster on
/// one H100 than dense Llama-3.1-70B in fp8, by about the ratio of the bytes
/// each step reads — which follows the active parameters.
#[test]
fn gpt_oss_120b_decodes_faster_than_dense_70b_fp8() {
    let (moe, _) = decode(&["gpt-oss-120b"], "1");
    let (dense, _) = decode(&["llama-3.1-70b", "--dtype", "fp8"], "1");
    assert!(moe > 5.0 * dense, "gpt-oss-120b {moe} tokens/s vs 70B fp8 {dense}");
    // 70.6B × 1 B (fp8) against ~5.1B active, most of them MXFP4 (~0.53 B):
    // the ratio is within the range the active parameters and their formats give
    let ratio = moe / dense;
    assert!((6.0..=30.0).contains(&ratio), "{ratio}");
}

/// More sequences route to more experts: per-sequence decode slows as the
/// union of routed experts grows towards all of them, and a batch of 64 reads
/// nearly every expert (1 − (1 − 4/128)^64 = 87 %).
#[test]
fn more_sequences_touch_more_experts() {
    let (one, _) = decode(&["gpt-oss-120b"], "1");
    let (eight, _) = decode(&["gpt-oss-120b"], "8");
    let (sixty_four, _) = decode(&["gpt-oss-120b"], "64");
    let per_seq = |tps: f64, c: f64| tps / c;
    assert!(per_seq(eight, 8.0) < per_seq(one, 1.0));
    assert!(per_seq(sixty_four, 64.0) < per_seq(eight, 8.0));
    // total throughput still grows with the batch
    assert!(sixty_four > eight && eight > one, "{one} {eight} {sixty_four}");
}

/// The must-show: DeepSeek-V3 under vLLM with TP 8 and expert
/// parallelism 8 is accepted and shows what each rank holds of the experts:
/// 32 of 256 per MoE layer, whole. Hand-worked: the routed experts are
/// 58 MoE layers × 256 experts × 3 × 7168 × 2048 = 653.9B parameters in fp8
/// (1 B each, a per-tensor scale beside each matrix), so one rank holds
/// 32/256 of 653.9 GB = 81.74 GB — the same bytes as a TP-8 split of every
/// expert, placed whole.
#[test]
fn deepseek_v3_expert_parallel_shows_per_rank_experts() {
    let args =
        ["estimate", "deepseek-v3", "--engine", "vllm", "--tp", "8", "--ep", "8", "--dtype", "fp8", "--gpu", "h200"];
    let v = json(&[&args[..], &["--json"]].concat(), 0);
    assert_eq!(v["workload"]["ep"], 8, "{}", v["workload"]);
    let entries = v["per_gpu"]["entries"].as_array().unwrap();
    let e = entries
        .iter()
        .find(|e| e["label"].as_str().unwrap().starts_with("routed experts, 32 of 256 per rank"))
        .unwrap_or_else(|| panic!("{entries:?}"));
    let bytes = e["bytes"].as_u64().unwrap();
    let whole: u64 = 58 * 256 * 3 * 7168 * 2048;
    assert!(bytes >= whole / 8 && bytes < whole / 8 + (1 << 20), "{bytes} vs {}", whole / 8);
    // the same total as TP 8 alone: expert parallelism moves the experts, it does not shrink them
    let tp_only = json(
        &["estimate", "deepseek-v3", "--engine", "vllm", "--tp", "8", "--dtype", "fp8", "--gpu", "h200", "--json"],
        0,
    );
    let w = |v: &serde_json::Value| v["per_gpu"]["categories"]["weights"].as_u64().unwrap();
    assert!(w(&v).abs_diff(w(&tp_only)) < 1 << 20, "{} vs {}", w(&v), w(&tp_only));
    let (out, _) = common::run(&args, 0);
    assert!(out.contains("experts over EP 8") && out.contains("each GPU holds 32 of the 256 routed experts"), "{out}");
}

/// `--ep` is refused by name where it does not apply.
#[test]
fn expert_parallel_refusals_name_the_field() {
    for (args, says) in [
        (&["estimate", "llama-3.1-8b", "--engine", "vllm", "--tp", "2", "--ep", "2"][..], "no routed experts"),
        (&["estimate", "deepseek-v3", "--tp", "8", "--ep", "8"][..], "give --engine vllm or sglang"),
        (&["estimate", "deepseek-v3", "--engine", "vllm", "--tp", "8", "--ep", "4"][..], "give --ep 8"),
        // training EP is Megatron's (--engine megatron) or DeepSpeed AutoEP's (the Trainer with
        // ZeRO, --engine deepspeed); FSDP is refused naming both
        (
            &["estimate", "mixtral-8x7b", "--task", "train", "--gpus", "8", "--ep", "8", "--fsdp", "full-shard"][..],
            "(--engine megatron)",
        ),
    ] {
        let (_, err) = common::run(args, 2);
        assert!(err.contains("--ep") && err.contains(says), "{args:?}: {err}");
    }
}
