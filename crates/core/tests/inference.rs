//! Inference formulas: hand-worked cases and invariants.

use proptest::prelude::*;
use vramfit_core::infer::{estimate_inference, kv_geometry};
use vramfit_core::{Category, DType, InferenceSetup, MlaSpec, ModelSpec, Parallelism, RuntimeSetup};

fn llama7b() -> ModelSpec {
    ModelSpec::llama_like("llama-2-7b", 4096, 32, 32, 32, 11008, 32000)
}

fn setup(batch: u64, context: u64) -> InferenceSetup {
    InferenceSetup { batch, concurrency: batch, context, ..InferenceSetup::default() }
}

fn run(spec: &ModelSpec, s: &InferenceSetup, tp: u64) -> vramfit_core::Ledger {
    let par = Parallelism { gpus: tp, tp, ..Parallelism::default() };
    estimate_inference(spec, s, &par, &RuntimeSetup::default()).unwrap().0
}

#[test]
fn kv_per_token_mha_gqa_mqa() {
    // 2 × 32 × 32 × 128 × 2 B = 524,288 B (512 KiB) per token for Llama-2-7B.
    assert_eq!(kv_geometry(&llama7b(), DType::F16, DType::BF16, 1, 1).unwrap().bytes_per_token, 524_288);
    // GQA with 8 kv heads: a quarter.
    let mistral = ModelSpec::llama_like("m", 4096, 32, 32, 8, 14336, 32000);
    assert_eq!(kv_geometry(&mistral, DType::F16, DType::BF16, 1, 1).unwrap().bytes_per_token, 131_072);
    // fp8 halves it again.
    assert_eq!(kv_geometry(&mistral, DType::F8, DType::BF16, 1, 1).unwrap().bytes_per_token, 65_536);
    // TP 16 over 8 kv heads: each rank still keeps one head (replicated).
    let g = kv_geometry(&mistral, DType::F16, DType::BF16, 16, 1).unwrap();
    assert_eq!(g.bytes_per_token, 2 * 32 * 128 * 2);
    assert!(g.explain.note.unwrap().contains("replicated"));
}

#[test]
fn kv_per_token_mla_is_the_latent() {
    // DeepSeek-V3: 61 layers × (512 + 64) × 2 B = 70,272 B per token.
    let mut s = ModelSpec::llama_like("dsv3", 7168, 61, 128, 128, 18432, 129280);
    s.attention = vramfit_core::Attention::Mla;
    s.head_dim = 192;
    s.mla = Some(MlaSpec {
        q_lora_rank: Some(1536),
        kv_lora_rank: 512,
        qk_nope_head_dim: 128,
        qk_rope_head_dim: 64,
        v_head_dim: 128,
    });
    let g = kv_geometry(&s, DType::BF16, DType::BF16, 1, 1).unwrap();
    assert_eq!(g.bytes_per_token, 70_272);
    assert_eq!(g.kind, "MLA");
}

#[test]
fn paged_blocks_round_each_sequence_up() {
    // 100 tokens in blocks of 16 → 7 blocks = 112 tokens reserved.
    let s = InferenceSetup { context: 100, ..setup(1, 100) };
    let l = run(&llama7b(), &s, 1);
    assert_eq!(l.bytes(Category::KvCache), 112 * 524_288);
}

#[test]
fn pipeline_stage_holds_its_layers() {
    let spec = llama7b();
    let par = Parallelism { gpus: 4, pp: 4, ..Parallelism::default() };
    let (l, _) = estimate_inference(&spec, &setup(1, 4096), &par, &RuntimeSetup::default()).unwrap();
    // 8 of 32 layers of KV per stage.
    assert_eq!(l.bytes(Category::KvCache), 2 * 8 * 32 * 128 * 2 * 4096);
    let one = run(&spec, &setup(1, 4096), 1);
    assert!(l.bytes(Category::Weights) < one.bytes(Category::Weights) / 3);
}

#[test]
fn replicas_keep_per_gpu_memory_and_say_so() {
    let spec = llama7b();
    let par = Parallelism { gpus: 4, ..Parallelism::default() };
    let (l, _) = estimate_inference(&spec, &setup(1, 4096), &par, &RuntimeSetup::default()).unwrap();
    assert_eq!(l.total_bytes(), run(&spec, &setup(1, 4096), 1).total_bytes());
    assert!(l.notes.iter().any(|n| n.contains("saves no memory")));
    assert_eq!(l.gpus, 4);
}

#[test]
fn allocator_overhead_is_a_fraction_of_the_transient_tensors() {
    // default: no --margin; the margin category holds the allocator's overhead,
    // fragmentation × (tensor peak − weights − KV cache)
    let l = run(&llama7b(), &setup(1, 4096), 1);
    let transient = l.tensor_peak_bytes() - l.bytes(Category::Weights) - l.bytes(Category::KvCache);
    assert_eq!(transient, l.bytes(Category::Logits) + l.bytes(Category::Activations));
    let overhead = (transient as f64 * vramfit_core::runtime::DEFAULT_FRAGMENTATION).ceil() as u64;
    assert_eq!(l.bytes(Category::Margin), overhead);
    assert_eq!(l.reserved_bytes(), l.tensor_peak_bytes() + overhead);
    assert_eq!(l.device_bytes(), l.reserved_bytes() + l.bytes(Category::Runtime));
    // --margin 0.2 adds the old × 1.2 rule on top of the prediction
    let rt = RuntimeSetup { margin: 0.2, ..RuntimeSetup::default() };
    let (m, _) = estimate_inference(&llama7b(), &setup(1, 4096), &Parallelism::default(), &rt).unwrap();
    assert_eq!(m.total_bytes() - m.device_bytes(), (m.device_bytes() as f64 * 0.2).ceil() as u64);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn more_batch_or_context_never_less_memory(b in 1u64..64, c in 1u64..16_384, db in 0u64..8, dc in 0u64..4096) {
        let spec = llama7b();
        let a = run(&spec, &setup(b, c), 1);
        let more_b = run(&spec, &setup(b + db, c), 1);
        let more_c = run(&spec, &setup(b, c + dc), 1);
        prop_assert!(more_b.tensor_peak_bytes() >= a.tensor_peak_bytes());
        prop_assert!(more_c.tensor_peak_bytes() >= a.tensor_peak_bytes());
    }

    #[test]
    fn tensor_parallel_never_raises_per_gpu_memory(b in 1u64..16, c in 16u64..8192, tp_pow in 0u32..5) {
        let spec = llama7b();
        let tp = 1u64 << tp_pow;
        let lo = run(&spec, &setup(b, c), tp);
        let hi = run(&spec, &setup(b, c), tp * 2);
        prop_assert!(hi.total_bytes() <= lo.total_bytes());
    }

    #[test]
    fn categories_sum_to_total(b in 1u64..64, c in 1u64..32_768) {
        let l = run(&llama7b(), &setup(b, c), 1);
        let sum: u64 = l.categories().iter().map(|(_, v)| v).sum();
        prop_assert_eq!(sum, l.total_bytes());
    }
}

#[test]
fn mla_down_projections_stay_whole_under_tp() {
    // vLLM and SGLang build DeepSeek's q_a_proj and kv_a_proj_with_mqa as
    // ReplicatedLinear (DeepseekV2MLAAttention, vllm/model_executor/models/deepseek_v2.py,
    // sglang/srt/models/deepseek_v2.py): every TP rank keeps them whole.
    let mut s = ModelSpec::llama_like("dsv3-dense", 7168, 61, 128, 128, 18432, 129280);
    s.attention = vramfit_core::Attention::Mla;
    s.head_dim = 192;
    s.mla = Some(MlaSpec {
        q_lora_rank: Some(1536),
        kv_lora_rank: 512,
        qk_nope_head_dim: 128,
        qk_rope_head_dim: 64,
        v_head_dim: 128,
    });
    let st = InferenceSetup { weight_dtype: DType::BF16, ..setup(1, 16) };
    let w1 = run(&s, &st, 1).bytes(Category::Weights);
    let w8 = run(&s, &st, 8).bytes(Category::Weights);
    // replicated: 61 × (7168 × 1536 + 7168 × 576) × 2 B = 1,846,935,552 B
    let replicated = 61 * (7168 * 1536 + 7168 * 576) * 2;
    assert_eq!(replicated, 1_846_935_552);
    // norms (never split): 61 × (7168 + 7168 + 1536 + 512) × 2 B + the final 7168 × 2 B
    let norms = 61 * (7168 + 7168 + 1536 + 512) * 2 + 7168 * 2;
    assert_eq!(norms, 2_013_184);
    // everything else splits 8 ways (each group rounded up: a few bytes)
    let split = (w1 - replicated - norms) / 8;
    let expected = replicated + norms + split;
    assert!(w8 >= expected && w8 <= expected + 8 * 16, "TP 8 weights {w8} B, expected {expected} B");
}
