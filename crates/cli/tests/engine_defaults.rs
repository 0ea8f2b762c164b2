//! `--engine` sets the defaults of what it does, each overridable by its own
//! flag: here the sliding-window cache policy (docs/inference.md, "KV cache").

mod common;
use common::run;
use serde_json::Value;

fn kv_bytes(extra: &[&str]) -> u64 {
    let mut args = vec!["estimate", "gemma-2-9b", "--context", "8192", "--json"];
    args.extend_from_slice(extra);
    let (out, _) = run(&args, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    v["per_gpu"]["categories"]["kv_cache"].as_u64().unwrap()
}

#[test]
fn litgpt_and_torchtune_cache_every_layer_at_full_length() {
    // LitGPT `set_kv_cache(batch, max_seq_length)` and torchtune `setup_caches`: one dense
    // cache per layer; Gemma-2-9B: 2 (K, V) × 42 layers × 8 KV heads × 256 × 2 B × 8192 tokens
    let full = 2 * 42 * 8 * 256 * 2 * 8192;
    assert_eq!(kv_bytes(&["--engine", "litgpt"]), full);
    assert_eq!(kv_bytes(&["--engine", "torchtune"]), full);
    assert_eq!(kv_bytes(&["--sliding-window-cache", "full"]), full);
    // vLLM, SGLang and transformers keep only the window of the sliding layers
    let window = kv_bytes(&["--engine", "vllm"]);
    assert!(window < full, "{window} !< {full}");
    assert_eq!(kv_bytes(&["--engine", "sglang"]), window);
    assert_eq!(kv_bytes(&[]), window);
    // the flag overrides the engine
    assert_eq!(kv_bytes(&["--engine", "litgpt", "--sliding-window-cache", "window"]), window);
}

fn estimate_json(extra: &[&str]) -> Value {
    let mut args = vec!["estimate", "llama-3.1-8b", "--gpu", "a100-80gb", "--json"];
    args.extend_from_slice(extra);
    let (out, _) = run(&args, 0);
    serde_json::from_str(&out).unwrap()
}

fn notes(v: &Value) -> String {
    v["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect::<Vec<_>>().join("\n")
}

#[test]
fn vllm_on_a_card_takes_its_default_utilisation_unless_one_is_given() {
    // vLLM's EngineArgs.gpu_memory_utilization = 0.92 from 0.21 (PR #38284; 0.9 before):
    // without --gpu-util the card is still sized as vLLM sizes it, and the fit is its KV pool
    // holding the sequences
    let v = estimate_json(&["--engine", "vllm"]);
    let cap = &v["fit"]["capacity"];
    assert_eq!(cap["gpu_util"].as_f64(), Some(0.92), "{v:#}");
    assert_eq!(v["fit"]["usable_bytes"], cap["budget_bytes"]);
    assert!(notes(&v).contains("--engine vllm: it takes 0.92 of the card"), "{}", notes(&v));
    // the same figures as saying 0.92 outright, less the note
    let given = estimate_json(&["--engine", "vllm", "--gpu-util", "0.92"]);
    assert_eq!(given["fit"]["capacity"]["kv_blocks"], cap["kv_blocks"]);
    assert!(!notes(&given).contains("it takes 0.92"));
    // a release before 0.21 takes 0.9
    let old = estimate_json(&["--engine", "vllm@0.20"]);
    assert_eq!(old["fit"]["capacity"]["gpu_util"].as_f64(), Some(0.9), "{old:#}");
    // a given utilisation wins
    let half = estimate_json(&["--engine", "vllm", "--gpu-util", "0.5"]);
    assert_eq!(half["fit"]["capacity"]["gpu_util"].as_f64(), Some(0.5));
    assert!(half["fit"]["capacity"]["kv_blocks"].as_u64() < cap["kv_blocks"].as_u64());
}

#[test]
fn sglang_takes_its_releases_fraction_and_transformers_none() {
    // SGLang picks mem_fraction_static from the card at start-up (crates/core/src/workload/engine.rs,
    // ShareRule): 0.5.3+ (PR #10975) by the card's memory, 0.4.8 – 0.5.2 by the card's tier
    // and TP × PP (PR #7054), 0.4 by the TP size (0.88 at TP 1)
    let s = estimate_json(&["--engine", "sglang"]);
    let u = s["fit"]["capacity"]["gpu_util"].as_f64().unwrap();
    assert!(u > 0.5 && u < 0.95, "{s:#}");
    assert!(notes(&s).contains("--engine sglang@0.5.3: it takes"), "{}", notes(&s));
    let old = estimate_json(&["--engine", "sglang@0.4"]);
    assert_eq!(old["fit"]["capacity"]["gpu_util"].as_f64(), Some(0.88), "{old:#}");
    assert_eq!(old["workload"]["engine_version"], "0.4");
    // transformers' generate takes what it needs: no capacity, no note
    let t = estimate_json(&[]);
    assert!(t["fit"]["capacity"].is_null());
    assert!(!notes(&t).contains("--gpu-util"));
}

/// Weight bytes per GPU of gpt-oss-120b (MXFP4 experts) on one H100 under an engine.
fn gpt_oss_weights(engine: &str, tp: &str) -> (u64, u64) {
    let (out, _) =
        run(&["estimate", "gpt-oss-120b", "--engine", engine, "--tp", tp, "--gpus", tp, "--gpu", "h100", "--json"], 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let entries = v["per_gpu"]["entries"].as_array().unwrap();
    let padding = entries
        .iter()
        .filter(|e| e["label"].as_str().unwrap().contains("MXFP4 MoE padding"))
        .map(|e| e["bytes"].as_u64().unwrap())
        .sum();
    (v["per_gpu"]["categories"]["weights"].as_u64().unwrap(), padding)
}

#[test]
fn vllm_loads_mxfp4_experts_in_marlins_padded_layout() {
    // vLLM's Mxfp4MoEMethod.create_weights (Marlin: n % 256, k % 128) pads gpt-oss's hidden
    // size 2880 to 3072 and the intermediate 2880 to 2944: 128 experts × 36 layers ×
    // 3 × (3072 × 2944 − 2880 × 2880) weights at 17/32 B (e2m1 + one E8M0 scale per 32)
    // and at most the padded gate/up (2 × 64) and down (192) bias rows in bf16
    let (vllm, pad) = gpt_oss_weights("vllm", "1");
    let grown = 128 * 36 * 3 * (3072 * 2944 - 2880 * 2880);
    let bias = 128 * 36 * (2 * 64 + 192) * 2;
    assert!(pad >= grown / 2 + grown / 32 && pad <= grown / 2 + grown / 32 + bias, "{pad}");
    // vLLM 0.10.1 on one H100 with the Marlin backend (vllm-project/vllm#23278):
    // "Model loading took 65.9651 GiB"; within 0.5% of it, was 7.9% under
    let logged = 65.9651 * (1u64 << 30) as f64;
    let err = (vllm as f64 - logged) / logged;
    assert!(err.abs() < 0.005, "{vllm} vs {logged}: {err:+.4}");
    // SGLang and transformers are not given vLLM's layout
    assert_eq!(gpt_oss_weights("sglang", "1"), (vllm - pad, 0));
    // each TP rank pads its own slice of the intermediate size (1440 → 1536 at TP 2)
    let (_, pad2) = gpt_oss_weights("vllm", "2");
    let grown2 = 128 * 36 * 3 * (3072 * 1536 - 2880 * 1440);
    let bias2 = 128 * 36 * (2 * 96 + 192) * 2;
    assert!(pad2 >= grown2 / 2 + grown2 / 32 && pad2 <= grown2 / 2 + grown2 / 32 + bias2, "{pad2}");
}
