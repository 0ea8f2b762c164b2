//! llama.cpp behaviours by build (issue 22, llama.cpp part), through the
//! real binary: MLA files' V-less cache (PR #19067). Expected figures are
//! worked out here from the files' shapes.

mod common;
use common::{json, run};
use std::path::PathBuf;
use vramfit_ingest::gguf::writer::fixtures::{writer, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_llamacpp::GgmlType;

fn write(name: &str, w: &GgufWriter) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gguf-llama22");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    // tests of one binary run on threads of one process: a per-thread count
    // keeps two writers of the same name apart
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!("{name}.{}.{n}.tmp", std::process::id()));
    w.write_sparse(&tmp).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
    p.display().to_string()
}

/// DeepSeek-V3's attention as the current converter writes it: 61 layers,
/// 128 heads, one latent KV head of `key_length` 576 (kv_lora_rank 512 +
/// rope 64), `value_length` 512, and the MLA keys (192 / 128) that make
/// llama.cpp's `llama_hparams::is_mla()` true. FFN and vocabulary shrunk.
fn deepseek_v3_mla() -> String {
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
            .tensor(&format!("blk.{il}.attn_k_b.weight"), GgmlType::Q8_0, &[128, 512, 128])
            .tensor(&format!("blk.{il}.attn_v_b.weight"), GgmlType::Q8_0, &[512, 128, 128]);
    }
    write("deepseek-v3-mla.gguf", &w)
}

fn kv_line(v: &serde_json::Value) -> u64 {
    let b = v["devices"][0]["buffers"].as_array().unwrap();
    b.iter().find(|b| b["kind"] == "kv").map(|b| b["bytes"].as_u64().unwrap()).unwrap()
}

/// The KV line of an MLA file by build (llama.cpp PR #19067: `has_v =
/// !is_mla`, src/llama-kv-cache.cpp). At -c 32768, f16:
/// current: 61 × 576 × 2 B × 32768 = 2,302,672,896 B (K only);
/// --llamacpp-build 7916: + 61 × 512 × 2 × 32768 = 2,046,820,352 B of V,
/// 4,349,493,248 B.
#[test]
fn an_mla_file_has_no_v_cache_on_current_builds() {
    let f = deepseek_v3_mla();
    let args = |b: Option<&'static str>| {
        let mut a = vec!["estimate", f.as_str(), "-c", "32768", "--gpu-mem", "80GiB", "-ngl", "99", "--json"];
        if let Some(b) = b {
            a.extend(["--llamacpp-build", b]);
        }
        a.into_iter().map(String::from).collect::<Vec<_>>()
    };
    let go = |b| {
        let a = args(b);
        json(&a.iter().map(String::as_str).collect::<Vec<_>>(), 0)
    };
    let cur = go(None);
    assert_eq!((cur["kv"]["k_bytes"].as_u64(), cur["kv"]["v_bytes"].as_u64()), (Some(2_302_672_896), Some(0)));
    assert_eq!(kv_line(&cur), 2_302_672_896);
    let old = go(Some("b7916"));
    assert_eq!(old["kv"]["v_bytes"].as_u64(), Some(2_046_820_352));
    assert_eq!(kv_line(&old), 4_349_493_248);
    let (text, _) = run(&["estimate", &f, "-c", "32768", "--gpu-mem", "80GiB", "-ngl", "99"], 0);
    assert!(text.contains("PR #19067"), "{text}");
}
