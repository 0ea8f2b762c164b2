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
    let (old, new) = (kv_budget_gib("vllm@0.8"), kv_budget_gib("vllm@0.20"));
    assert!((new - old - 2.94).abs() < 0.05, "0.8: {old} GiB, 0.20: {new} GiB");
    // the latest (0.21) takes 0.92 of the card instead of 0.9 (+0.02 × 79.21 GiB = 1.58 GiB)
    // and the modelled CUDA-graph pool off the budget (1,335,885,824 B = 1.24 GiB:
    // tests/cuda_graphs.rs)
    let latest = kv_budget_gib("vllm");
    assert!((latest - new - (1.584 - 1.244)).abs() < 0.02, "0.20: {new} GiB, latest: {latest} GiB");
    // 0.19 lies between the 0.9 and 0.20 rows: the 0.9 row sizes it, whose sampler sorts as 0.8's
    assert_eq!(kv_budget_gib("vllm@0.19"), old);
}

#[test]
fn an_unmodelled_release_is_refused_with_the_list() {
    let out = vramfit(&["estimate", "llama-3.1-8b", "--task", "infer", "--engine", "vllm@0.1"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--engine") && err.contains("0.2, 0.2.5, 0.8, 0.8.4, 0.9, 0.20, 0.21"), "{err}");
}

/// The sampler rows the start-up profile took (`--explain`'s "rows (max_num_seqs, …)").
fn profile_rows(engine: &str, gpu: Option<&str>) -> (u64, String) {
    let mut args = vec!["estimate", "llama-3.1-8b", "--task", "infer", "--engine", engine, "--explain"];
    if let Some(g) = gpu {
        args.extend(["--gpu", g]);
    }
    let out = vramfit(&args);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let at = text.find("rows (max_num_seqs, at most the tokens) = ").expect("rows term");
    let rows = text[at + 42..].split_whitespace().next().unwrap().parse().unwrap();
    (rows, text)
}

#[test]
fn vllm_serve_batch_defaults_follow_the_release_and_the_card() {
    // vllm/engine/arg_utils.py, `vllm serve` (OPENAI_API_SERVER): 0.9+ (`get_batch_defaults`,
    // PRs #17073 and #17885) 1024 sequences on cards ≥ 70 GiB other than A100, else 256;
    // 0.8.4 (PR #16158) 1024 only on H100/H200 by name; 0.8.0 – 0.8.3 1024 on every card
    for (engine, gpu, rows) in [
        ("vllm", "h100-sxm", 1024),
        ("vllm", "l40s", 256),
        ("vllm", "a100-80gb-sxm", 256),
        ("vllm@0.9", "h200", 1024),
        ("vllm@0.8.4", "l40s", 256),
        ("vllm@0.8.4", "h100-sxm", 1024),
        ("vllm@0.8", "l40s", 1024),
        ("vllm@0.2", "h100-sxm", 256),
    ] {
        let (got, text) = profile_rows(engine, Some(gpu));
        assert_eq!(got, rows, "{engine} on {gpu}");
        assert!(text.contains("batch defaults assumed"), "{engine} {gpu}");
    }
    // no card: the larger defaults, and the explain line says why
    let (rows, text) = profile_rows("vllm", None);
    assert_eq!(rows, 1024);
    assert!(text.replace('\n', " ").replace("  ", " ").contains("the card is not known"), "{text}");
    // the tokens too: 2048 on an L40S (and under 2048 the forward is smaller than on an H100)
    let (_, l40s) = profile_rows("vllm", Some("l40s"));
    assert!(l40s.contains("tokens (max_num_batched_tokens) = 2048"), "{l40s}");
}

/// SGLang's `mem_fraction_static` note for a release on a card.
fn sglang_fraction(engine: &str, model: &str, extra: &[&str]) -> f64 {
    let mut args = vec!["estimate", model, "--task", "infer", "--engine", engine, "--json"];
    args.extend_from_slice(extra);
    let out = vramfit(&args);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["fit"]["capacity"]["gpu_util"].as_f64().unwrap()
}

#[test]
fn sglang_0_5_2_and_0_5_3_take_different_fractions() {
    // python/sglang/srt/server_args.py: 0.4.8 – 0.5.2 (PR #7054) reserve (9.5 + TP·PP/2) GiB
    // under 90 GiB: H100 SXM (81,559 MiB) at TP 1 → (81,559 − 10,240) / 81,559 = 0.874;
    // 0.5.3+ (PR #10975): 512 + 8192 × 1.5 + 256 × 2 + 128 = 13,440 MiB → 0.835
    assert_eq!(sglang_fraction("sglang@0.5.2", "llama-3.1-8b", &["--gpu", "h100-sxm"]), 0.874);
    assert_eq!(sglang_fraction("sglang@0.5", "llama-3.1-8b", &["--gpu", "h100-sxm"]), 0.874);
    assert_eq!(sglang_fraction("sglang@0.5.3", "llama-3.1-8b", &["--gpu", "h100-sxm"]), 0.835);
    assert_eq!(sglang_fraction("sglang", "llama-3.1-8b", &["--gpu", "h100-sxm"]), 0.835);
}

#[test]
fn sglang_kv_pool_on_a_large_moe_at_tp8_stays_within_its_own_rule() {
    // DeepSeek-V3 fp8 over 8 H200 (143,771 MiB): 0.5.2 takes (143,771 − 16,384) / 143,771 =
    // 0.886. SGLang's pool is fraction × the memory it saw at start − the weights
    // (`ModelRunner.profile_max_num_token`: available after loading − total × (1 − fraction)),
    // the memory at start being the CUDA capacity less the context and NCCL already there;
    // vramfit also takes the profiling peak and non-torch memory out of it: never a larger pool
    let args = ["--tp", "8", "--gpus", "8", "--dtype", "fp8", "--gpu", "h200"];
    let mut a = vec!["estimate", "deepseek-v3", "--task", "infer", "--engine", "sglang@0.5.2", "--json"];
    a.extend_from_slice(&args);
    let out = vramfit(&a);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cap = &v["fit"]["capacity"];
    assert_eq!(cap["gpu_util"].as_f64(), Some(0.886), "{cap:#}");
    let cuda = (143_771u64 - 450) * (1 << 20);
    let of = |category: &str| -> u64 {
        let entries = v["per_gpu"]["entries"].as_array().unwrap();
        entries.iter().filter(|e| e["category"] == category).map(|e| e["bytes"].as_u64().unwrap()).sum()
    };
    let at_start = cuda - of("runtime");
    let sglang_pool = (at_start as f64 * 0.886) as u64 - of("weights");
    let pool = cap["kv_budget_bytes"].as_u64().unwrap_or_else(|| panic!("{cap:#}"));
    assert!(pool > 0 && pool <= sglang_pool, "vramfit {pool} B, SGLang's rule {sglang_pool} B");
}

/// KV blocks of a vLLM start-up on A100-80GB cards (`--json`'s capacity).
fn a100_blocks(model: &str, engine: &str, tp: &str) -> u64 {
    let args = [
        "estimate",
        model,
        "--task",
        "infer",
        "--engine",
        engine,
        "--tp",
        tp,
        "--gpus",
        tp,
        "--gpu",
        "a100-80gb-sxm",
        "--context",
        "4096",
        "--json",
    ];
    let out = vramfit(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["fit"]["capacity"]["kv_blocks"].as_u64().unwrap()
}

#[test]
fn before_pr_2031_vllm_left_the_larger_pool_the_pr_reports() {
    // vllm-project/vllm#2031 ("Fix peak memory profiling", WoosukKwon's comment of 2023-12-12):
    // "Llama2-7B with TP=1 and 1xA100-80GB — Current main: # GPU blocks: 7449, This PR: 7351;
    // Llama2-70B with TP=4 and 4xA100-80GB — Current main: 31615, This PR: 20865". Before it
    // (vllm@0.2, to 0.2.4) the budget took `torch.cuda.max_memory_allocated()` alone; after it
    // (0.2.5) `total − free`, the memory outside the allocator too
    let (b7, a7) = (a100_blocks("llama-2-7b", "vllm@0.2.4", "1"), a100_blocks("llama-2-7b", "vllm@0.2.5", "1"));
    let (b70, a70) = (a100_blocks("llama-2-70b", "vllm@0.2", "4"), a100_blocks("llama-2-70b", "vllm@0.2.5", "4"));
    // the pre-fix pools within 2% of the PR's own figures
    assert!((b7 as f64 / 7449.0 - 1.0).abs() < 0.02, "7B before the fix: {b7} blocks vs 7449");
    assert!((b70 as f64 / 31615.0 - 1.0).abs() < 0.02, "70B TP 4 before the fix: {b70} blocks vs 31615");
    // and the fix takes blocks away, more at TP 4 (NCCL) than at TP 1, as the PR saw
    assert!(a7 < b7 && a70 < b70, "{a7} {b7} {a70} {b70}");
    assert!((b70 - a70) as f64 / b70 as f64 > (b7 - a7) as f64 / b7 as f64, "{a7} {b7} {a70} {b70}");
}

#[test]
fn the_llm_class_profiles_its_own_token_budget() {
    // vllm/engine/arg_utils.py `get_batch_defaults`: UsageContext.LLM_CLASS takes 16384 tokens on
    // cards ≥ 70 GiB other than A100 and 8192 on the others, `vllm serve` 8192 / 2048
    for (gpu, serve, llm) in [("h100-sxm", 8192, 16384), ("l40s", 2048, 8192)] {
        for (entry, tokens) in [("serve", serve), ("llm", llm)] {
            let text = profile_text(&["--vllm-entry", entry], gpu);
            assert!(text.contains(&format!("tokens (max_num_batched_tokens) = {tokens}")), "{gpu} {entry}: {text}");
        }
    }
    // V0 has no usage contexts: the LLM class profiles as the server
    let v0 = profile_text(&["--vllm-entry", "llm", "--engine", "vllm@0.6"], "h100-sxm");
    assert!(v0.contains("tokens (max_num_batched_tokens) = 4096"), "{v0}");
    // another engine refuses the flag, naming it
    let out = vramfit(&["estimate", "llama-3.1-8b", "--engine", "sglang", "--vllm-entry", "llm"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--vllm-entry"));
}

/// `estimate --explain` of Llama-3.1-8B under vLLM (unless `extra` names an engine) on `gpu`.
fn profile_text(extra: &[&str], gpu: &str) -> String {
    let mut args = vec!["estimate", "llama-3.1-8b", "--task", "infer", "--explain", "--gpu", gpu];
    if !extra.contains(&"--engine") {
        args.extend(["--engine", "vllm"]);
    }
    args.extend_from_slice(extra);
    let out = vramfit(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).to_string()
}

#[test]
fn graphs_captured_after_the_pool_must_fit_what_the_fraction_leaves() {
    // Up to vLLM 0.20 the CUDA graphs are captured after the KV pool is sized
    // (`Worker.compile_or_warm_up_model` after `initialize_from_config`), on top of
    // gpu_memory_utilization × capacity. An L40S at 0.98 leaves 2% of its 44.99 GiB CUDA capacity,
    // 912.4 MiB; a 1,024 MiB graph pool ("Graph capturing finished … took 1.00 GiB") does not fit
    let run = |extra: &[&str]| {
        let mut a = vec!["estimate", "llama-3.1-8b", "--task", "infer", "--gpu", "l40s", "--gpu-util", "0.98"];
        a.extend_from_slice(extra);
        let out = vramfit(&a);
        (out.status.success(), String::from_utf8_lossy(&out.stdout).replace('\n', " ").replace("  ", " "))
    };
    let (_, short) = run(&["--engine", "vllm@0.20", "--cuda-graph-mib", "1024"]);
    assert!(short.contains("DOES NOT FIT") && short.contains("short by 111.6 MiB"), "{short}");
    assert!(short.contains("they exceed the 912.4 MiB left"), "{short}");
    // 800 MiB fits there; without a figure the note says how much is left for them
    let (_, fits) = run(&["--engine", "vllm@0.20", "--cuda-graph-mib", "800"]);
    assert!(fits.contains("FITS") && fits.contains("fits there"), "{fits}");
    // without a figure the modelled pool (1.06 GiB: tests/cuda_graphs.rs) does not fit either
    let (_, unknown) = run(&["--engine", "vllm@0.20"]);
    assert!(unknown.contains("DOES NOT FIT") && unknown.contains("1.06 GiB as modelled"), "{unknown}");
    // from 0.21 the figure comes off the KV pool instead: 1,024 MiB less pool than 0 MiB
    let pool = |mib: &str| {
        let out = vramfit(&[
            "estimate",
            "llama-3.1-8b",
            "--engine",
            "vllm",
            "--gpu",
            "l40s",
            "--cuda-graph-mib",
            mib,
            "--json",
        ]);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["fit"]["capacity"]["kv_budget_bytes"].as_u64().unwrap()
    };
    assert_eq!(pool("0") - pool("1024"), 1024 << 20);
}

#[test]
fn sglang_keeps_a_reserve_for_a_speculative_draft() {
    // python/sglang/srt/server_args.py `_handle_gpu_memory_settings` (0.5.3+): after the 10 GiB
    // floor, EAGLE/EAGLE3/NEXTN + 2 GiB ("eagle draft models and cuda graphs"), STANDALONE + 6 GiB,
    // NGRAM nothing. H100 SXM (81,559 MiB), TP 1: 13,440 + 2,048 = 15,488 MiB → 0.810
    let h100 = ["--gpu", "h100-sxm"];
    let with =
        |a: &str| sglang_fraction("sglang", "llama-3.1-8b", &[&h100[..], &["--speculative-algorithm", a]].concat());
    assert_eq!(with("EAGLE"), 0.810);
    assert_eq!(with("STANDALONE"), 0.760);
    assert_eq!(with("NGRAM"), 0.835);
    // 0.4.8 – 0.5.2: 2 GiB for any algorithm: (9.5 + 0.5 + 2) GiB → 0.849
    let old =
        sglang_fraction("sglang@0.5.2", "llama-3.1-8b", &[&h100[..], &["--speculative-algorithm", "NEXTN"]].concat());
    assert_eq!(old, 0.849);
    // vLLM does not take SGLang's flag
    let out = vramfit(&["estimate", "llama-3.1-8b", "--engine", "vllm", "--speculative-algorithm", "EAGLE"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--speculative-algorithm"));
}
