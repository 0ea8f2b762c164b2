//! `--engine vllm@X`: the release's row sizes the start-up (crates/core/src/workload/engine.rs):
//! vLLM's sorting sampler (`apply_top_k_top_p`, 38 B per row per vocabulary entry) up to
//! 0.19, FlashInfer's (14 B) from 0.20 (vllm-project/vllm#40376).

use std::process::Command;

fn vramfit(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_vramfit")).args(args).output().unwrap()
}

fn kv_budget_gib(engine: &str) -> f64 {
    let out = vramfit(&[
        "estimate",
        "llama-3.1-8b",
        "--task",
        "infer",
        "--engine",
        engine,
        "--gpu",
        "h100-sxm",
        "--max-num-seqs",
        "1024",
        "--context",
        "8192",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).replace('\n', " ");
    let at = text.find("KV budget ").expect("KV budget line");
    text[at + 10..].split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn the_latest_release_samples_without_sorting_so_its_pool_is_larger() {
    // 1024 rows × 128256 vocab × (38 − 14) B = 2.94 GiB more sampler on 0.8 than on 0.20
    let (old, new) = (kv_budget_gib("vllm@0.8"), kv_budget_gib("vllm"));
    assert!((new - old - 2.94).abs() < 0.05, "0.8: {old} GiB, latest: {new} GiB");
    // 0.19 lies between the 0.8 and 0.20 rows: the 0.8 row sizes it
    assert_eq!(kv_budget_gib("vllm@0.19"), old);
}

#[test]
fn an_unmodelled_release_is_refused_with_the_list() {
    let out = vramfit(&["estimate", "llama-3.1-8b", "--task", "infer", "--engine", "vllm@0.1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--engine") && err.contains("0.2, 0.8, 0.20"), "{err}");
}
