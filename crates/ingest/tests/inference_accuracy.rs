//! Inference estimates against PyTorch measurements:
//! shared/calibration/cases.jsonl groups A (weights) and B (Llama-2-7B
//! bf16 prefill with KV cache, sdpa, measured as the live-tensor peak).
//! The error is printed; the test fails when it regresses past 1%.

use vramfit_core::infer::estimate_inference;
use vramfit_core::{Category, DType, InferenceSetup, Parallelism, ParamLayout, PrefillLogits, RuntimeSetup};
use vramfit_ingest::resolve::resolve_with_env;

/// (id, batch, seq, measured peak_total, measured kv_cache_bytes, measured logits_bytes)
const GROUP_B: &[(&str, u64, u64, u64, u64, u64)] = &[
    ("B_llama2-7b_prefill_b1_s4096", 1, 4096, 16_031_228_416, 2_147_483_648, 262_144_000),
    ("B_llama2-7b_prefill_b8_s4096", 8, 4096, 33_897_095_680, 17_179_869_184, 2_097_152_000),
    ("B_llama2-7b_prefill_b32_s4096", 32, 4096, 95_151_497_728, 68_719_476_736, 8_388_608_000),
];

#[test]
fn group_b_prefill_peak_within_one_percent() {
    let spec = resolve_with_env("llama-2-7b", &|_| None).unwrap().spec;
    let mut worst: f64 = 0.0;
    for &(id, batch, seq, peak, kv, logits) in GROUP_B {
        // HF transformers' DynamicCache holds exactly `seq` tokens: block size 1.
        let setup = InferenceSetup {
            weight_dtype: DType::BF16,
            kv_dtype: DType::BF16,
            batch,
            concurrency: batch,
            context: seq,
            block_size: 1,
            // measured as a plain forward: every prompt token's logits
            prefill_logits: PrefillLogits::AllTokens,
            ..InferenceSetup::default()
        };
        let (l, _) = estimate_inference(&spec, &setup, &Parallelism::default(), &RuntimeSetup::default()).unwrap();
        assert_eq!(l.bytes(Category::KvCache), kv, "{id}: KV cache is exact");
        assert_eq!(l.bytes(Category::Logits), logits, "{id}: logits are exact");
        let est = l.tensor_peak_bytes();
        let err = (est as f64 - peak as f64) / peak as f64 * 100.0;
        println!("{id}: estimated {est} measured {peak} error {err:+.3}%");
        worst = worst.max(err.abs());
    }
    println!("group B: max |error| {worst:.3}%");
    assert!(worst < 1.0, "group B max |error| {worst:.3}% ≥ 1%");
}

#[test]
fn group_a_weight_bytes_exact() {
    // (preset, params_total, bf16 param_bytes) from group A.
    for (name, params, bytes) in [
        ("llama-2-7b", 6_738_415_616u64, 13_476_831_232u64),
        ("llama-2-13b", 13_015_864_320, 26_031_728_640),
        ("mistral-7b", 7_241_732_096, 14_483_464_192),
        ("qwen2.5-7b", 7_615_616_512, 15_231_233_024),
        ("tinyllama-1.1b", 1_100_048_384, 2_200_096_768),
    ] {
        let spec = resolve_with_env(name, &|_| None).unwrap().spec;
        assert_eq!(ParamLayout::of(&spec).unwrap().total().unwrap(), params, "{name}");
        let (l, _) =
            estimate_inference(&spec, &InferenceSetup::default(), &Parallelism::default(), &RuntimeSetup::default())
                .unwrap();
        assert_eq!(l.bytes(Category::Weights), bytes, "{name} bf16 weights");
    }
}
