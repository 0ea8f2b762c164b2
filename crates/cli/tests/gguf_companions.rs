//! `vramfit estimate model.gguf` with what llama-server loads beside the
//! model (issue 22, llama.cpp part), through the real binary: a multimodal
//! projector (`--mmproj`, tools/mtmd/clip.cpp) and a draft model (`-md`,
//! common/speculative.cpp). Expected figures are worked out here from the
//! files' shapes.

mod common;
use common::{json, run};
use serde_json::Value;
use std::path::PathBuf;
use vramfit_ingest::gguf::writer::fixtures::{writer, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_llamacpp::GgmlType;

fn write(name: &str, w: &GgufWriter) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gguf-companions");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    // tests of this binary run on threads of one process: the pid alone would
    // let two threads write and rename the same temporary file
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!("{name}.{}.{n}.tmp", std::process::id()));
    w.write_sparse(&tmp).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
    p.display().to_string()
}

fn target() -> String {
    write("target.gguf", &writer(&Shape::llama(8, 1024, 16, 4, 2816, 1000)))
}

/// The draft: 2 layers, 8 heads of 64, 2 KV heads.
fn draft() -> String {
    write("draft.gguf", &writer(&Shape::llama(2, 512, 8, 2, 1536, 1000)))
}

/// A LLaVA-1.5-style projector: CLIP ViT-L/14 at 336 px (577 positions with
/// the class token), 23 blocks, 1024 wide, 16 heads, FFN 4096, projection 768.
fn mmproj() -> String {
    let u = |v: u32| WValue::U32(v);
    let w = GgufWriter::new()
        .kv("general.architecture", WValue::Str("clip".into()))
        .kv("clip.has_vision_encoder", WValue::Bool(true))
        .kv("clip.vision.image_size", u(336))
        .kv("clip.vision.patch_size", u(14))
        .kv("clip.vision.embedding_length", u(1024))
        .kv("clip.vision.feed_forward_length", u(4096))
        .kv("clip.vision.block_count", u(23))
        .kv("clip.vision.attention.head_count", u(16))
        .kv("clip.vision.projection_dim", u(768))
        .tensor("v.class_embd", GgmlType::F32, &[1024])
        .tensor("mm.0.weight", GgmlType::F16, &[1024, 4096]);
    write("mmproj.gguf", &w)
}

fn line(v: &Value, device: usize, label: &str) -> Option<u64> {
    v["devices"][device]["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["label"] == label)
        .map(|b| b["bytes"].as_u64().unwrap())
}

fn host_line(v: &Value, label: &str) -> Option<u64> {
    v["host"]["buffers"].as_array().unwrap().iter().find(|b| b["label"] == label).map(|b| b["bytes"].as_u64().unwrap())
}

/// -md: the draft's KV cache at the target's context with the target's
/// slots (common_speculative_init_result: "the draft context holds as many
/// tokens per sequence as the target context"; n_seq = -np).
/// 2 layers × (K + V) × 2 kv heads × 64 × 2 B (f16) × 8192 cells = 8 MiB;
/// with -ctkd q8_0 the K half is 34/32 B per element: 2 × 128 × 8192 × 34/32 +
/// 2 × 128 × 2 × 8192 = 2,228,224 + 4,194,304 = 6,422,528 B.
#[test]
fn a_draft_model_adds_weights_kv_and_compute_to_the_gpu() {
    let (t, d) = (target(), draft());
    let base = json(&["estimate", &t, "--gpu-mem", "24GiB", "-c", "8192", "-np", "2", "--json"], 0);
    let v = json(&["estimate", &t, "--gpu-mem", "24GiB", "-c", "8192", "-np", "2", "-md", &d, "--json"], 0);
    assert_eq!(line(&v, 0, "draft: CUDA0 KV buffer"), Some(2 * 2 * 2 * 64 * 2 * 8192));
    assert!(line(&v, 0, "draft: CUDA0 model buffer").unwrap() > 0);
    assert!(line(&v, 0, "draft: CUDA0 compute buffer").unwrap() > 0);
    let total = |v: &Value| v["devices"][0]["total_bytes"].as_u64().unwrap();
    let draft_lines: u64 = v["devices"][0]["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["label"].as_str().unwrap().starts_with("draft: "))
        .map(|b| b["bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(total(&v), total(&base) + draft_lines, "one CUDA context for both models");
    assert!(v["command_line"].as_str().unwrap().contains(" -md "), "{}", v["command_line"]);
    let q = json(
        &["estimate", &t, "--gpu-mem", "24GiB", "-c", "8192", "-np", "2", "-md", &d, "-ctkd", "q8_0", "--json"],
        0,
    );
    assert_eq!(line(&q, 0, "draft: CUDA0 KV buffer"), Some(2_228_224 + 4_194_304));
    // -ngld 0: the draft's layers and KV on the host
    let h = json(&["estimate", &t, "--gpu-mem", "24GiB", "-c", "8192", "-md", &d, "-ngld", "0", "--json"], 0);
    assert!(host_line(&h, "draft: CPU KV buffer").is_some(), "{}", h["host"]);
    assert_eq!(line(&h, 0, "draft: CUDA0 KV buffer"), None);
}

/// --mmproj: the projector's weights on CUDA0 (f32 1024 → 4096 B; f16
/// 1024 × 4096 → 8 MiB, both multiples of 128) and its warm-up compute
/// buffer, an upper bound over one encoder block (crates/llamacpp
/// companion::clip_compute_bytes): with -fa off, 4 B × (336²·3 + 577·1024 +
/// 5·577·1024 + 16·577² + 577·1024) = 39,205,952 B.
#[test]
fn a_projector_adds_its_weights_and_compute_buffer() {
    let (t, m) = (target(), mmproj());
    let v = json(&["estimate", &t, "--gpu-mem", "24GiB", "--mmproj", &m, "-fa", "off", "--json"], 0);
    assert_eq!(line(&v, 0, "mmproj CUDA0 model buffer"), Some(4096 + 8 * (1 << 20)));
    assert_eq!(line(&v, 0, "mmproj CUDA0 compute buffer"), Some(39_205_952));
    assert!(v["command_line"].as_str().unwrap().contains(" --mmproj "));
    let h = json(&["estimate", &t, "--gpu-mem", "24GiB", "--mmproj", &m, "--no-mmproj-offload", "--json"], 0);
    assert_eq!(line(&h, 0, "mmproj CUDA0 model buffer"), None);
    assert!(host_line(&h, "mmproj CPU model buffer").is_some());
}

/// What cannot be sized is refused naming the flag and what to pass.
#[test]
fn companions_that_are_not_files_are_refused() {
    let t = target();
    let (_, err) = run(&["estimate", &t, "--gpu-mem", "24GiB", "--mmproj", "llava"], 2);
    assert!(err.contains("--mmproj llava") && err.contains("mmproj-*.gguf"), "{err}");
    // a model given as the projector: llama.cpp's clip_init refuses it too
    let (_, err) = run(&["estimate", &t, "--gpu-mem", "24GiB", "--mmproj", &t], 2);
    assert!(err.contains("general.architecture") && err.contains("'clip'"), "{err}");
    let (_, err) = run(&["estimate", &t, "-md", "tiny-draft"], 2);
    assert!(err.contains("-md/--model-draft tiny-draft"), "{err}");
    // a preset (not a GGUF) with --mmproj: llama.cpp's flags are for GGUF files
    let (_, err) = run(&["estimate", "llama-3.1-8b", "--mmproj", &mmproj()], 2);
    assert!(err.contains("--mmproj") && err.contains("GGUF"), "{err}");
    // -ngld needs -md
    let (_, err) = run(&["estimate", &t, "-ngld", "3"], 2);
    assert!(err.contains("--model-draft"), "{err}");
}
