//! deepseek2 GGUFs converted before the MLA keys existed (no
//! `attention.key_length_mla` / `value_length_mla`; issue 22, llama.cpp
//! part). llama.cpp then takes the non-absorbed path of
//! `llm_build_deepseek2` (src/models/deepseek2.cpp, `is_mla` false):
//! `kv = wkv_b · kv_cmpr` is split per head into K (qk_nope + rope = 192)
//! and V (128), and `build_attn` runs plain multi-head attention ("MLA
//! without the absorption optimization converts into MHA (ie: GQA with full
//! n_head groups)") over a cache of `n_head` K and V heads.

use vramfit_ingest::gguf::writer::fixtures::{writer, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_ingest::gguf::*;
use vramfit_llamacpp::{plan, FlashAttn, GgmlType, GpuSlot, LineKind, LlamaCppOptions};

fn header(w: &GgufWriter) -> GgufHeader {
    let bytes = w.to_bytes();
    match parse(&bytes, bytes.len() as u64).unwrap() {
        Parsed::Complete(h) => *h,
        Parsed::NeedMore { bytes } => panic!("needs {bytes}"),
    }
}

/// A DeepSeek-V2-Lite-shaped file as the old converter wrote it: 2 layers,
/// 4 heads, `key_length` 192 (qk_nope 128 + rope 64), `value_length` 128,
/// `head_count_kv` = `head_count`, the latent projections
/// (`attn_kv_a_mqa`: kv_lora_rank 512 + rope 64; `attn_kv_b`:
/// n_head × (128 + 128)) and no MLA keys.
fn old_deepseek2() -> GgufWriter {
    let s = Shape { arch: "deepseek2", head_dim: 192, ..Shape::llama(2, 512, 4, 4, 1536, 1000) };
    let mut w = writer(&s)
        .set("deepseek2.attention.value_length", WValue::U32(128))
        .set("deepseek2.attention.kv_lora_rank", WValue::U32(512))
        .set("deepseek2.rope.dimension_count", WValue::U32(64))
        .retain_tensors(|n| !n.contains("attn_k.") && !n.contains("attn_v."));
    for il in 0..2 {
        w = w
            .tensor(&format!("blk.{il}.attn_kv_a_mqa.weight"), GgmlType::F16, &[512, 512 + 64])
            .tensor(&format!("blk.{il}.attn_kv_a_norm.weight"), GgmlType::F32, &[512])
            .tensor(&format!("blk.{il}.attn_kv_b.weight"), GgmlType::F16, &[512, 4 * (128 + 128)]);
    }
    w
}

fn at(ctx: u64) -> LlamaCppOptions {
    LlamaCppOptions {
        ctx_size: ctx,
        // head size 192 has no CUDA flash-attention kernel in vramfit's table: auto → off
        flash_attn: FlashAttn::Auto,
        gpus: vec![GpuSlot { name: "g".into(), memory_bytes: None }],
        ..LlamaCppOptions::default()
    }
}

/// KV: every layer caches n_head K heads of 192 and V heads of 128 (f16):
/// per token 2 layers × 4 heads × (192 + 128) × 2 B = 5,120 B; at -c 4096,
/// 20,971,520 B. The compute buffer grows with the context as llama.cpp's
/// non-flash MHA graph does: per extra KV cell, the scores
/// `kq` = n_kv × n_ubatch × n_head f32 (soft-maxed in place) and the f32 KQ
/// mask n_kv × n_ubatch: (4 + 1) × 512 × 4 B = 10,240 B per cell, so
/// 4096 → 8192 adds 41,943,040 B (build_attn_mha, src/llama-graph.cpp).
#[test]
fn without_mla_keys_the_cache_and_scores_are_per_head() {
    let m = model_from_header(&header(&old_deepseek2()), "ds2").unwrap();
    assert!(m.layers.iter().all(|l| (l.n_head_kv, l.head_dim_k, l.head_dim_v) == (4, 192, 128)));
    let (p4, p8) = (plan(&m, &at(4096)).unwrap(), plan(&m, &at(8192)).unwrap());
    assert!(!p4.flash_attn);
    assert_eq!(p4.kv.k_bytes + p4.kv.v_bytes, 2 * 4 * (192 + 128) * 2 * 4096);
    assert_eq!(p4.kv.k_bytes + p4.kv.v_bytes, 20_971_520);
    let compute = |p: &vramfit_llamacpp::LlamaCppPlan| p.gpus[0].bytes(LineKind::Compute);
    assert_eq!(compute(&p8) - compute(&p4), (4 + 1) * 512 * 4 * 4096);
    assert!(p4.compute.approximate.is_some(), "the latent family is flagged approximate");
}
