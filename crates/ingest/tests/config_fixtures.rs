//! Named cases on the real and constructed config.json files (each real
//! file is also parsed and snapshotted on its own in fixture_files.rs).

use vramfit_core::{ModelSpec, ParamLayout, QuantMethod};
use vramfit_ingest::config::parse_config;

fn load(name: &str) -> ModelSpec {
    let path = format!("{}/tests/fixtures/configs/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap();
    parse_config(&bytes, name).unwrap_or_else(|e| panic!("{e}"))
}

fn total(s: &ModelSpec) -> u64 {
    ParamLayout::of(s).unwrap().total().unwrap()
}
#[test]
fn falcon_multi_query_has_one_kv_head() {
    // multi_query without the new decoder architecture: 1 kv head, though
    // the file says num_kv_heads 71 (configuration_falcon.py ignores it).
    let s = load("12_falcon-7b-arch.json");
    assert_eq!(s.num_kv_heads, 1);
    assert_eq!(s.attention_kind(), "MQA");
}

#[test]
fn deepseek_is_mla_with_dense_first_layers() {
    let s = load("09_deepseek-v3.json");
    assert_eq!(s.attention_kind(), "MLA");
    let moe = s.moe.as_ref().unwrap();
    assert_eq!((moe.num_experts, moe.experts_per_token, moe.shared_experts, moe.dense_layers), (256, 8, 1, 3));
    let q = s.quantization.as_ref().unwrap();
    assert_eq!((q.method, q.block), (QuantMethod::Fp8, Some((128, 128))));
}

#[test]
fn multimodal_counts_text_config_only() {
    let s = load("14_qwen3-vl-8b-instruct.json");
    assert!(s.notes.iter().any(|n| n.contains("text_config")));
    assert_eq!((s.hidden_size, s.num_layers, s.num_kv_heads, s.head_dim), (4096, 36, 8, 128));
    assert!(s.qk_norm);
}

#[test]
fn quantization_configs() {
    let g = load("q_gptq.json").quantization.unwrap();
    assert_eq!((g.method, g.bits, g.group_size), (QuantMethod::Gptq, 4, Some(128)));
    let a = load("q_awq.json").quantization.unwrap();
    assert_eq!((a.method, a.bits, a.group_size), (QuantMethod::Awq, 4, Some(128)));
    let b = load("q_bnb4.json").quantization.unwrap();
    assert_eq!((b.method, b.double_quant, b.compute_dtype), (QuantMethod::Bnb4, true, vramfit_core::DType::BF16));
    let b8 = load("q_bnb8.json").quantization.unwrap();
    assert_eq!(b8.method, QuantMethod::Bnb8);
}

#[test]
fn unknown_model_type_falls_back_and_says_so() {
    let s = load("unknown_type.json");
    assert_eq!(s.family, vramfit_core::Family::Generic);
    assert!(s.notes.iter().any(|n| n.contains("unknown model_type 'brand_new_arch'")));
    // Llama-shaped: 4 × (4·1024² + 3·1024·2816 + 2·1024) + 2·32000·1024 + 1024
    assert_eq!(total(&s), 4 * (4 * 1024 * 1024 + 3 * 1024 * 2816 + 2 * 1024) + 2 * 32000 * 1024 + 1024);
}

#[test]
fn gptq_checkpoint_weights_with_overhead() {
    use vramfit_core::{infer::estimate_inference, Category, DType, InferenceSetup, Parallelism, RuntimeSetup};
    let s = load("q_gptq.json");
    let q = s.quantization.clone();
    let setup = InferenceSetup { weight_dtype: DType::I4, quant: q, ..InferenceSetup::default() };
    let (l, _) = estimate_inference(&s, &setup, &Parallelism::default(), &RuntimeSetup::default()).unwrap();
    // Linear layers per layer: 4·4096² + 3·4096·11008 = 202,375,168 weights.
    // qweight n/2, scales (d_in/128)·d_out·2, qzeros (d_in/128)·d_out/2, g_idx d_in·4.
    let mats: [(u64, u64); 7] =
        [(4096, 4096), (4096, 4096), (4096, 4096), (4096, 4096), (4096, 11008), (4096, 11008), (11008, 4096)];
    let per_layer: u64 =
        mats.iter().map(|&(i, o)| i * o / 2 + i.div_ceil(128) * o * 2 + i.div_ceil(128) * o / 2 + i * 4).sum();
    let rest = (2 * 32000 * 4096 + 65 * 4096) * 2; // embeddings, lm_head, norms in fp16
    assert_eq!(l.bytes(Category::Weights), 32 * per_layer + rest);
}
