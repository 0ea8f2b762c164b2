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
