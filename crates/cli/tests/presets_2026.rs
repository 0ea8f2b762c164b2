//! Architectures added in 2026 (issue 22): Llama 4 Scout and Maverick, with
//! exact parameter counts and hand-worked KV bytes.

mod common;
use common::{json, run};

#[test]
fn list_presets_names_llama_4_scout_and_maverick() {
    let (out, _) = run(&["estimate", "--list-presets"], 0);
    assert!(out.contains("llama-4-scout-17b-16e-instruct"), "{out}");
    assert!(out.contains("llama-4-maverick-17b-128e-instruct"), "{out}");
}

/// Parameter counts against the Hub's safetensors totals (BF16 parameters:
/// Scout 108,641,793,536, Maverick 401,583,781,376), from transformers'
/// `modeling_llama4.py`, hidden 5120, 40 q heads, 8 kv heads, head_dim 128:
/// - attention per layer: q 5120·5120 + k, v 5120·1024 each + o 5120·5120 = 62,914,560;
///   two RMSNorms 10,240; the q/k norm is an L2 norm without weights;
/// - a MoE layer (`Llama4TextMoe`): E experts of 3·5120·8192 = 125,829,120 (fused
///   `gate_up_proj` + `down_proj`), one shared expert as wide, a router 5120·E;
/// - a dense layer (`Llama4TextMLP`, `intermediate_size_mlp` 16384): 3·5120·16384 = 251,658,240;
/// - embeddings and untied head 2·202048·5120 = 2,068,971,520, final norm 5120;
/// - vision (`Llama4VisionModel`, 34 layers, hidden 1408, MLP 5632): patch linear
///   588·1408 = 827,904, class token 1408, positions 577·1408 = 812,416, pre/post
///   LayerNorms 5632, 34 × (4 biased 1408² projections 7,935,488 + fc1 7,935,488 +
///   fc2 7,931,264 + 2 LayerNorms 5632) = 809,467,648, pixel-shuffle MLP 5632·4096 +
///   4096² = 39,845,888, projector 4096·5120 = 20,971,520: 871,932,416.
///
/// Scout: 48 MoE layers with 16 experts = 48 × 2,202,101,760 = 105,700,884,480,
/// plus 2,068,976,640 + 871,932,416 = 108,641,793,536.
///
/// Maverick: 24 MoE layers with 128 experts (16,295,536,640 each) and 24 dense layers
/// (314,583,040 each) = 398,642,872,320, plus 2,068,976,640 + 871,932,416 = 401,583,781,376.
#[test]
fn llama_4_parameter_counts_are_the_hubs() {
    for (model, total) in [("llama-4-scout", 108_641_793_536u64), ("llama-4-maverick", 401_583_781_376)] {
        let v = json(&["estimate", model, "--json"], 0);
        assert_eq!(v["model"]["params_total"].as_u64().unwrap(), total, "{model}");
        // bf16 weights: 2 B each
        assert_eq!(v["per_gpu"]["categories"]["weights"].as_u64().unwrap(), 2 * total, "{model}");
    }
}

/// KV bytes at 131072 tokens, batch 1, fp16 KV, blocks of 16 tokens: K and V of one
/// token in one layer are 2 × 8 × 128 × 2 B = 4096 B. `no_rope_layers` (default every
/// 4th layer NoPE, `Llama4TextConfig`) leaves 12 global layers over the whole context:
/// 12 × 131072 × 4096 = 6,442,450,944 B. The other 36 attend within chunks of
/// `attention_chunk_size` 8192 tokens, sized as a window: ⌈8192 / 16⌉ + 1 = 513 blocks
/// = 8208 tokens, 36 × 8208 × 4096 = 1,210,318,848 B. Total 7,652,769,792 B, where
/// 48 full layers would hold 25,769,803,776 B.
#[test]
fn llama_4_chunked_attention_kv_by_hand() {
    for model in ["llama-4-scout", "llama-4-maverick"] {
        let v = json(&["estimate", model, "--context", "131072", "--json"], 0);
        let kv = v["per_gpu"]["categories"]["kv_cache"].as_u64().unwrap();
        assert_eq!(kv, 12 * 131_072 * 4096 + 36 * 8208 * 4096, "{model}");
    }
}
