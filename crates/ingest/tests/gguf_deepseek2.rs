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
    // the header and the file's length, as a range reader sees it (a
    // DeepSeek-V3-shaped file's data would be tens of GB)
    let (bytes, len) = w.header_and_len();
    match parse(&bytes, len).unwrap() {
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

/// A file as the current converter writes DeepSeek-V3's attention
/// (convert_hf_to_gguf.py `DeepseekV2Model`, since llama.cpp PR #12801):
/// 61 layers, 128 heads, `head_count_kv` 1, `key_length` 576
/// (kv_lora_rank 512 + rope 64), `value_length` 512 (kv_lora_rank),
/// `key_length_mla` 192 and `value_length_mla` 128 (the per-head sizes),
/// the latent projections `attn_kv_a_mqa` and the split `attn_k_b` /
/// `attn_v_b`. The FFN and vocabulary are shrunk: the KV cache does not
/// depend on them.
fn deepseek_v3_mla() -> GgufWriter {
    let s = Shape { arch: "deepseek2", head_dim: 576, ..Shape::llama(61, 7168, 128, 1, 256, 1000) };
    let mut w = writer(&s)
        .set("deepseek2.attention.value_length", WValue::U32(512))
        .set("deepseek2.attention.key_length_mla", WValue::U32(192))
        .set("deepseek2.attention.value_length_mla", WValue::U32(128))
        .set("deepseek2.attention.kv_lora_rank", WValue::U32(512))
        .set("deepseek2.rope.dimension_count", WValue::U32(64))
        .retain_tensors(|n| !n.contains("attn_k.") && !n.contains("attn_v."));
    for il in 0..61 {
        w = w
            .tensor(&format!("blk.{il}.attn_kv_a_mqa.weight"), GgmlType::Q8_0, &[7168, 512 + 64])
            .tensor(&format!("blk.{il}.attn_kv_a_norm.weight"), GgmlType::F32, &[512])
            .tensor(&format!("blk.{il}.attn_k_b.weight"), GgmlType::Q8_0, &[128, 512, 128])
            .tensor(&format!("blk.{il}.attn_v_b.weight"), GgmlType::Q8_0, &[512, 128, 128]);
    }
    w
}

fn built(ctx: u64, build: Option<u64>) -> LlamaCppOptions {
    LlamaCppOptions { build, ..at(ctx) }
}

/// MLA cache by build (llama.cpp PR #19067, `has_v = !is_mla` in
/// `llama_kv_cache::llama_kv_cache`, src/llama-kv-cache.cpp; `is_mla()` is
/// "both MLA head sizes in the file", src/llama-hparams.cpp). Bytes per
/// cell of DeepSeek-V3's shape, f16 cache:
/// - from b7917: K only, 61 layers × 1 head × 576 × 2 B = 70,272 B; at
///   -c 4096: 70,272 × 4096 = 287,834,112 B, V 0.
/// - before: K as above plus V 61 × 512 × 2 B = 62,464 B per cell
///   (255,852,544 B at 4096): 132,736 B per cell, 543,686,656 B in all.
#[test]
fn mla_files_keep_only_the_latent_k_cache_in_current_builds() {
    let m = model_from_header(&header(&deepseek_v3_mla()), "ds3").unwrap();
    assert!(m.mla, "key_length_mla and value_length_mla make it is_mla()");
    assert!(m.layers.iter().all(|l| (l.n_head_kv, l.head_dim_k, l.head_dim_v) == (1, 576, 512)));
    let cur = plan(&m, &built(4096, None)).unwrap();
    assert!(cur.flash_attn, "head size 576 has a CUDA flash-attention kernel");
    assert_eq!(cur.kv.bytes_per_token, 61 * 576 * 2);
    assert_eq!(cur.kv.bytes_per_token, 70_272);
    assert_eq!((cur.kv.k_bytes, cur.kv.v_bytes), (287_834_112, 0));
    assert_eq!(cur.gpus[0].bytes(LineKind::Kv), 287_834_112);
    let new_first = plan(&m, &built(4096, Some(7917))).unwrap();
    assert_eq!(new_first.kv.k_bytes + new_first.kv.v_bytes, 287_834_112);
    let old = plan(&m, &built(4096, Some(7916))).unwrap();
    assert_eq!(old.kv.bytes_per_token, 61 * (576 + 512) * 2);
    assert_eq!(old.kv.bytes_per_token, 132_736);
    assert_eq!((old.kv.k_bytes, old.kv.v_bytes), (287_834_112, 255_852_544));
    assert_eq!(old.gpus[0].bytes(LineKind::Kv), 543_686_656);
    assert!(
        cur.notes.iter().any(|n| n.contains("PR #19067") && n.contains("--llamacpp-build 7916")),
        "{:?}",
        cur.notes
    );
    assert!(old.notes.iter().any(|n| n.contains("Builds from b7917 keep only K")), "{:?}", old.notes);
}

/// A file with only one of the two MLA keys is not `is_mla()` (llama.cpp
/// asserts both or neither; vramfit keeps the V cache, the larger figure).
#[test]
fn one_mla_key_alone_keeps_the_v_cache() {
    let w = deepseek_v3_mla().unset("deepseek2.attention.value_length_mla");
    let m = model_from_header(&header(&w), "ds3").unwrap();
    assert!(!m.mla);
    assert_eq!(plan(&m, &built(4096, None)).unwrap().kv.v_bytes, 255_852_544);
    let old = model_from_header(&header(&old_deepseek2()), "ds2").unwrap();
    assert!(!old.mla, "the pre-MLA-keys conversion");
}
