//! What llama.cpp loads beside and around a model (issue 22, llama.cpp
//! part): MTP/NextN layers it skips, and a multimodal projector's header
//! (`--mmproj`). Each test cites the llama.cpp source it follows.

use vramfit_ingest::gguf::mmproj::{mmproj_from_header, WARMUP_AUDIO_FRAMES};
use vramfit_ingest::gguf::writer::fixtures::{writer, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_ingest::gguf::*;
use vramfit_llamacpp::companion::ClipInput;
use vramfit_llamacpp::model::LlamaModel;
use vramfit_llamacpp::{plan, GgmlType, GpuSlot, LineKind, LlamaCppOptions};

fn header(w: &GgufWriter) -> GgufHeader {
    let bytes = w.to_bytes();
    match parse(&bytes, bytes.len() as u64).unwrap() {
        Parsed::Complete(h) => *h,
        Parsed::NeedMore { bytes } => panic!("needs {bytes}"),
    }
}

fn load(w: &GgufWriter) -> LlamaModel {
    model_from_header(&header(w), "x").unwrap_or_else(|e| panic!("refused: {e}"))
}

/// A GLM-4.5-style file: `block_count` 5 of which the last is the NextN
/// (MTP) layer, `nextn_predict_layers` 1, and the layer's `nextn.*` tensors.
fn with_nextn(arch: &'static str) -> GgufWriter {
    let s = Shape { arch, ..Shape::llama(5, 512, 8, 2, 1536, 1000) };
    writer(&s)
        .kv(&format!("{arch}.nextn_predict_layers"), WValue::U32(1))
        .tensor("blk.4.nextn.eh_proj.weight", GgmlType::F16, &[1024, 512])
        .tensor("blk.4.nextn.enorm.weight", GgmlType::F32, &[512])
        .tensor("blk.4.nextn.hnorm.weight", GgmlType::F32, &[512])
}

fn on_gpu() -> LlamaCppOptions {
    LlamaCppOptions {
        gpus: vec![GpuSlot { name: "g".into(), memory_bytes: None }],
        ctx_size: 8192,
        ..LlamaCppOptions::default()
    }
}

/// glm4moe: llama.cpp creates the NextN layer's tensors with TENSOR_SKIP
/// ("skip all tensors in the NextN layers", src/models/glm4-moe.cpp
/// `load_arch_tensors`; logged "model has unused tensor … -- ignoring") and
/// gives it no KV (`n_layer_kv_from_start = n_layer − nextn_predict_layers`):
/// the file sizes as the same file with 4 layers and no NextN block.
#[test]
fn glm4moe_nextn_layers_are_not_loaded_and_get_no_kv() {
    let m = load(&with_nextn("glm4moe"));
    assert_eq!(m.n_layer, 4);
    assert!(m.tensors.iter().all(|t| !t.name.starts_with("blk.4.")));
    assert!(m.notes.iter().any(|n| n.contains("MTP/NextN") && n.contains("blk.4")), "{:?}", m.notes);
    // kept apart for --spec-type draft-mtp (mparams.load_mtp loads them): the
    // block's attention KV heads (2, as the trunk's) and its blk.4.* tensors
    let nextn = m.nextn.as_ref().expect("the NextN layer is kept apart");
    assert_eq!((nextn.layers.len(), nextn.layers[0].n_head_kv, nextn.layers[0].recurrent), (1, 2, None));
    assert!(nextn.tensors.iter().all(|t| t.name.starts_with("blk.4.")));
    assert!(nextn.tensors.iter().any(|t| t.name == "blk.4.nextn.eh_proj.weight"));
    let four = load(&writer(&Shape { arch: "glm4moe", ..Shape::llama(4, 512, 8, 2, 1536, 1000) }));
    let (p, q) = (plan(&m, &on_gpu()).unwrap(), plan(&four, &on_gpu()).unwrap());
    assert_eq!(p.kv.k_bytes + p.kv.v_bytes, q.kv.k_bytes + q.kv.v_bytes);
    // 4 layers × (K + V) × 2 kv heads × 64 × 2 B × 8192 cells = 32 MiB
    assert_eq!(p.kv.k_bytes + p.kv.v_bytes, 4 * 2 * 2 * 64 * 2 * 8192);
    assert_eq!(p.gpus[0].bytes(LineKind::Model), q.gpus[0].bytes(LineKind::Model));
}

/// An architecture whose loader does not read `nextn_predict_layers`
/// (plain llama) loads every block as a layer: nothing is skipped.
#[test]
fn other_architectures_keep_every_block() {
    let m = load(&with_nextn("llama"));
    assert_eq!(m.n_layer, 5);
    assert!(m.nextn.is_none());
    // nextn_predict_layers ≥ block_count: llama.cpp asserts n_layer_nextn < n_layer_all
    let bad = writer(&Shape { arch: "glm4moe", ..Shape::llama(2, 512, 8, 2, 1536, 1000) })
        .kv("glm4moe.nextn_predict_layers", WValue::U32(2));
    let e = model_from_header(&header(&bad), "x").unwrap_err().to_string();
    assert!(e.contains("glm4moe.nextn_predict_layers"), "{e}");
}

/// A LLaVA-1.5 projector's header (CLIP ViT-L/14-336, tools/mtmd
/// `clip_model_loader::load_hparams` keys): positions (336/14)² + 1 = 577
/// with the class token (`v.class_embd`), warm-up at `image_size`.
fn llava_mmproj() -> GgufWriter {
    let u = |v: u32| WValue::U32(v);
    GgufWriter::new()
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
        .tensor("v.patch_embd.weight", GgmlType::F16, &[14, 14, 3, 1024])
        .tensor("mm.0.weight", GgmlType::F16, &[1024, 4096])
}

#[test]
fn a_projector_header_gives_its_encoder_and_tensors() {
    let p = mmproj_from_header(&header(&llava_mmproj()), "mmproj.gguf", true).unwrap();
    assert_eq!(p.encoders.len(), 1);
    assert_eq!(p.encoders[0].input, ClipInput::Image { size: 336, patch_size: 14, class_token: true });
    assert_eq!(p.encoders[0].input.positions().unwrap(), 577);
    // f32 1024 + f16 14·14·3·1024 + f16 1024·4096
    let bytes: u64 = p.tensors.iter().map(|t| t.2).sum();
    assert_eq!(bytes, 4096 + 2 * 602_112 + 2 * 4_194_304);
    // an audio encoder warms up with clip_hparams::warmup_audio_size frames
    let a = llava_mmproj()
        .kv("clip.has_audio_encoder", WValue::Bool(true))
        .kv("clip.audio.num_mel_bins", WValue::U32(128))
        .kv("clip.audio.embedding_length", WValue::U32(1280))
        .kv("clip.audio.feed_forward_length", WValue::U32(5120))
        .kv("clip.audio.block_count", WValue::U32(32))
        .kv("clip.audio.attention.head_count", WValue::U32(20));
    let p = mmproj_from_header(&header(&a), "omni.gguf", true).unwrap();
    assert_eq!(p.encoders[1].input, ClipInput::Audio { frames: WARMUP_AUDIO_FRAMES, n_mel_bins: 128 });
}

/// A model file passed as the projector is refused naming the key, as
/// llama.cpp's clip_init refuses it.
#[test]
fn a_model_is_not_a_projector() {
    let e = mmproj_from_header(&header(&with_nextn("llama")), "m.gguf", true).unwrap_err().to_string();
    assert!(e.contains("general.architecture") && e.contains("mmproj"), "{e}");
    let e = mmproj_from_header(&header(&llava_mmproj().unset("clip.vision.patch_size")), "p.gguf", true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("clip.vision.patch_size"), "{e}");
}
