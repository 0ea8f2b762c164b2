//! Per-architecture rules llama.cpp applies when it loads a GGUF, each
//! test citing the llama.cpp source it follows (issue 22, llama.cpp block).

use vramfit_ingest::gguf::writer::fixtures::{writer, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_ingest::gguf::*;
use vramfit_llamacpp::model::LlamaModel;
use vramfit_llamacpp::{plan, GgmlType, LlamaCppOptions};

fn load(w: &GgufWriter) -> LlamaModel {
    let bytes = w.to_bytes();
    let h = match parse(&bytes, bytes.len() as u64).unwrap() {
        Parsed::Complete(h) => *h,
        Parsed::NeedMore { bytes } => panic!("needs {bytes}"),
    };
    model_from_header(&h, "x").unwrap_or_else(|e| panic!("refused: {e}"))
}

fn u32v(v: u64) -> WValue {
    WValue::U32(v as u32)
}

/// A Qwen3.5 (`qwen35`) file as its converter writes it: one scalar
/// head_count_kv for every layer and the gated-delta-net sizes, no
/// `full_attention_interval` (llama.cpp then takes 4).
fn qwen35(arch: &'static str, interval: Option<u64>) -> GgufWriter {
    let s = Shape { arch, ..Shape::llama(8, 1024, 8, 2, 2816, 1000) };
    let mut w = writer(&s)
        .kv(&format!("{arch}.ssm.conv_kernel"), u32v(4))
        .kv(&format!("{arch}.ssm.inner_size"), u32v(2048))
        .kv(&format!("{arch}.ssm.state_size"), u32v(128))
        .kv(&format!("{arch}.ssm.group_count"), u32v(16))
        .kv(&format!("{arch}.ssm.time_step_rank"), u32v(16));
    if let Some(n) = interval {
        w = w.kv(&format!("{arch}.full_attention_interval"), u32v(n));
    }
    w
}

/// Regression (issue 22): `qwen35` was missing from the hybrid list, so
/// every layer got a KV cache and none a recurrent state. llama.cpp:
/// `llm_arch_is_hybrid` lists qwen35 and qwen35moe (src/llama-arch.cpp),
/// and the qwen35 hparams loader marks layer i recurrent when
/// `(i + 1) % full_attn_interval != 0`, the interval defaulting to 4
/// (src/llama-model.cpp).
#[test]
fn qwen35_is_a_hybrid_with_every_fourth_layer_attending() {
    for arch in ["qwen35", "qwen35moe", "qwen3next"] {
        let m = load(&qwen35(arch, None));
        let attending: Vec<usize> = (0..8).filter(|&il| m.layers[il].has_kv()).collect();
        assert_eq!(attending, vec![3, 7], "{arch}");
        for (il, l) in m.layers.iter().enumerate() {
            assert_eq!(l.recurrent.is_some(), !l.has_kv(), "{arch} layer {il}");
        }
        // n_embd_r = (d_conv - 1)·(d_inner + 2·n_group·d_state) = 3·(2048 + 2·16·128) = 18432,
        // n_embd_s = d_state·d_inner = 128·2048 = 262144 (llama_hparams::n_embd_r/s)
        let st = m.layers[0].recurrent.unwrap();
        assert_eq!((st.r, st.s), (18432, 262144), "{arch}");
    }
    // the file's own interval wins
    let m = load(&qwen35("qwen35", Some(2)));
    assert_eq!((0..8).filter(|&il| m.layers[il].has_kv()).collect::<Vec<_>>(), vec![1, 3, 5, 7]);
}

/// The KV cache of a Qwen3.5 launch covers its attention layers only, and
/// the recurrent state is there: at -c 4096 -np 1, f16, 2 layers × 2 KV
/// heads × 128 × 2 B × 4096 cells × (K + V) = 8 MiB; the state is
/// 6 layers × (18432 + 262144) f32 × 1 sequence.
#[test]
fn qwen35_cache_is_two_attention_layers_and_six_states() {
    let m = load(&qwen35("qwen35", None));
    let opts = LlamaCppOptions { ctx_size: 4096, gpus: vec![], n_gpu_layers: Some(0), ..Default::default() };
    let p = plan(&m, &opts).unwrap();
    assert_eq!(p.kv.k_bytes + p.kv.v_bytes, 2 * 2 * 128 * 2 * 4096 * 2);
    assert_eq!(p.kv.state_bytes, 6 * (18432 + 262144) * 4);
}

/// A file with an interval of 0 is refused by name (llama.cpp would
/// divide by zero in `(i + 1) % full_attn_interval`).
#[test]
fn a_zero_full_attention_interval_is_refused() {
    let bytes = qwen35("qwen35", Some(0)).to_bytes();
    let Parsed::Complete(h) = parse(&bytes, bytes.len() as u64).unwrap() else { panic!() };
    let e = model_from_header(&h, "x").unwrap_err().to_string();
    assert!(e.contains("qwen35.full_attention_interval"), "{e}");
}

/// Gemma 4: sliding-window layers use `key_length_swa` /
/// `value_length_swa` (256) instead of the global head size (512)
/// (llama_model::load_hparams, "head size and n_rot for SWA layers",
/// src/llama-model.cpp; the KV cache reads n_embd_k_gqa(il) per layer).
/// Regression (issue 22): the sliding part was sized at twice its size.
#[test]
fn gemma4_sliding_layers_use_their_own_head_size() {
    let (e, heads, kvh, full, swa) = (1024u64, 8u64, 2u64, 512u64, 256u64);
    let pattern = [true, true, true, true, true, false]; // five sliding, one full
    let s = Shape {
        arch: "gemma4",
        head_dim: full,
        sliding_window: Some(1024),
        ..Shape::llama(6, e, heads, kvh, 4096, 1000)
    };
    let mut w = writer(&s)
        .kv("gemma4.attention.key_length_swa", u32v(swa))
        .kv("gemma4.attention.value_length_swa", u32v(swa))
        .kv(
            "gemma4.attention.sliding_window_pattern",
            WValue::Array(gguf_value_type_bool(), pattern.iter().map(|&b| WValue::Bool(b)).collect()),
        )
        .retain_tensors(|n| {
            !(n.contains("attn_q.") || n.contains("attn_k.") || n.contains("attn_v.") || n.contains("attn_output."))
        });
    for (il, &sliding) in pattern.iter().enumerate() {
        let hd = if sliding { swa } else { full };
        let p = |t: &str| format!("blk.{il}.{t}");
        w = w
            .tensor(&p("attn_q.weight"), GgmlType::Q4K, &[e, heads * hd])
            .tensor(&p("attn_k.weight"), GgmlType::Q4K, &[e, kvh * hd])
            .tensor(&p("attn_v.weight"), GgmlType::Q4K, &[e, kvh * hd])
            .tensor(&p("attn_output.weight"), GgmlType::Q4K, &[heads * hd, e]);
    }
    let m = load(&w);
    for (il, l) in m.layers.iter().enumerate() {
        let hd = if pattern[il] { swa } else { full };
        assert_eq!((l.sliding, l.head_dim_k, l.head_dim_v), (pattern[il], hd, hd), "layer {il}");
    }
    // -c 8192 -fa on -np 1: the sliding cache holds pad(min(8192, 1024 + 512), 256) = 1536 cells;
    // K + V f16 of 5 sliding layers = 5 × 2 × 256 × 2 B × 1536 × 2 = 15 MiB, not 30 MiB
    let opts = LlamaCppOptions {
        ctx_size: 8192,
        flash_attn: vramfit_llamacpp::FlashAttn::On,
        n_gpu_layers: Some(0),
        gpus: vec![],
        ..Default::default()
    };
    let p = plan(&m, &opts).unwrap();
    assert_eq!(p.kv.size.swa_cells, 1536);
    assert_eq!(p.kv.swa_bytes, 5 * kvh * swa * 2 * 1536 * 2);
}

/// A Gemma 4 file of 6 layers, sliding pattern [S, S, F, S, S, F], its
/// sliding layers at head size 256 and its full ones at 512, 2 KV heads,
/// `attention.shared_kv_layers` = `shared` when given.
fn gemma4_shared(shared: Option<u64>) -> GgufWriter {
    let (e, heads, kvh, full, swa) = (1024u64, 8u64, 2u64, 512u64, 256u64);
    let pattern = [true, true, false, true, true, false];
    let s = Shape {
        arch: "gemma4",
        head_dim: full,
        sliding_window: Some(1024),
        ..Shape::llama(6, e, heads, kvh, 4096, 1000)
    };
    let mut w = writer(&s)
        .kv("gemma4.attention.key_length_swa", u32v(swa))
        .kv("gemma4.attention.value_length_swa", u32v(swa))
        .kv(
            "gemma4.attention.sliding_window_pattern",
            WValue::Array(gguf_value_type_bool(), pattern.iter().map(|&b| WValue::Bool(b)).collect()),
        )
        .retain_tensors(|n| {
            !(n.contains("attn_q.") || n.contains("attn_k.") || n.contains("attn_v.") || n.contains("attn_output."))
        });
    if let Some(n) = shared {
        w = w.kv("gemma4.attention.shared_kv_layers", u32v(n));
    }
    for (il, &sliding) in pattern.iter().enumerate() {
        let hd = if sliding { swa } else { full };
        let p = |t: &str| format!("blk.{il}.{t}");
        w = w
            .tensor(&p("attn_q.weight"), GgmlType::Q4K, &[e, heads * hd])
            .tensor(&p("attn_k.weight"), GgmlType::Q4K, &[e, kvh * hd])
            .tensor(&p("attn_v.weight"), GgmlType::Q4K, &[e, kvh * hd])
            .tensor(&p("attn_output.weight"), GgmlType::Q4K, &[heads * hd, e]);
    }
    w
}

/// Gemma 4 KV sharing: with `shared_kv_layers` = 3 of 6 only layers 0–2
/// keep a cache (`n_layer_kv_from_start` = 6 − 3,
/// `llama_model_gemma4::load_arch_hparams`, src/models/gemma4.cpp); the
/// sliding layers 3 and 4 read layer 3 − 2 = 1's, the full layer 5 reads
/// layer 3 − 1 = 2's (`llama_model::create_memory`, the `reuse` callback,
/// src/llama-model.cpp, b11312). Regression (issue 22): every layer got a
/// cache (measured: gemma-4-e2b logs 204 MiB at -c 32768 -np 1, vramfit
/// said 476 MiB).
#[test]
fn gemma4_kv_shared_layers_keep_no_cache() {
    let m = load(&gemma4_shared(Some(3)));
    let from: Vec<Option<u32>> = m.layers.iter().map(|l| l.kv_from).collect();
    assert_eq!(from, vec![None, None, None, Some(1), Some(1), Some(2)]);
    assert_eq!((0..6).filter(|&il| m.layers[il].has_kv()).collect::<Vec<_>>(), vec![0, 1, 2]);
    let opts = LlamaCppOptions {
        ctx_size: 8192,
        flash_attn: vramfit_llamacpp::FlashAttn::On,
        n_gpu_layers: Some(0),
        gpus: vec![],
        ..Default::default()
    };
    let p = plan(&m, &opts).unwrap();
    // f16 K + V, -np 1: the full layer 2 over 8192 cells, 2 heads × 512:
    //   1 × 2 × 512 × 2 B × 8192 × 2 = 32 MiB;
    // the sliding layers 0, 1 over pad(min(8192, 1024 + 512), 256) = 1536 cells, 2 heads × 256:
    //   2 × 2 × 256 × 2 B × 1536 × 2 = 6 MiB
    assert_eq!(p.kv.swa_bytes, 2 * 2 * 256 * 2 * 1536 * 2);
    assert_eq!(p.kv.k_bytes + p.kv.v_bytes, 2 * 512 * 2 * 8192 * 2 + 2 * 2 * 256 * 2 * 1536 * 2);
    // without the key every layer keeps its own cache
    let all = load(&gemma4_shared(None));
    assert!(all.layers.iter().all(|l| l.has_kv() && l.kv_from.is_none()));
}

/// llama.cpp asserts `n_layer_kv_from_start >= 2` in the reuse callback: a
/// file sharing all but one layer is refused, naming the key.
#[test]
fn gemma4_sharing_all_but_one_layer_is_refused() {
    for shared in [5, 6, 7] {
        let bytes = gemma4_shared(Some(shared)).to_bytes();
        let Parsed::Complete(h) = parse(&bytes, bytes.len() as u64).unwrap() else { panic!() };
        let e = model_from_header(&h, "x").unwrap_err().to_string();
        assert!(e.contains("gemma4.attention.shared_kv_layers"), "{shared}: {e}");
    }
}

/// `-fa auto` with Gemma 4's 512-wide full layers: on a CPU-only build
/// llama.cpp turns it on (measured, b11312: "Flash Attention enabled" in
/// calibration/data/measured/llamacpp-cpu-logs/gemma-4-e2b-q8_0-c32k-np1.log);
/// on CUDA the 512 kernel needs a GQA ratio of at least 2
/// (ggml_cuda_get_best_fattn_kernel, ggml/src/ggml-cuda/fattn.cu, b11312).
/// Regression: vramfit assumed it off for any head size outside CUDA's list.
#[test]
fn gemma4_flash_attention_auto_follows_the_device() {
    let m = load(&gemma4_shared(None)); // 8 heads, 2 KV heads: GQA ratio 4
    let cpu = LlamaCppOptions { ctx_size: 8192, gpus: vec![], n_gpu_layers: Some(0), ..Default::default() };
    assert!(plan(&m, &cpu).unwrap().flash_attn);
    let gpu = vramfit_llamacpp::GpuSlot { name: "x".into(), memory_bytes: None };
    let cuda = LlamaCppOptions { ctx_size: 8192, gpus: vec![gpu], ..Default::default() };
    assert!(plan(&m, &cuda).unwrap().flash_attn);
    // every head its own KV head (ratio 1): no CUDA kernel for 512, auto → off
    let mut mha = m.clone();
    for l in &mut mha.layers {
        l.n_head_kv = l.n_head;
    }
    assert!(!plan(&mha, &cuda).unwrap().flash_attn);
}

/// Gemma 3n: llama.cpp fixes `n_layer_kv_from_start` at 20
/// (src/models/gemma3n.cpp), so layers 20 and 21 of a 22-layer file (both
/// sliding: `il % 6 < 5`) read layer 20 − 2 = 18's cache
/// (`llama_model::create_memory`, the `reuse` callback). They keep no
/// cache of their own but still attend: the compute graph keeps them
/// (vramfit builds them as ordinary layers, so the buffer equals the
/// unshared model's instead of dropping two layers).
#[test]
fn gemma3n_layers_from_20_share_the_cache_and_still_attend() {
    let mk =
        |arch| load(&writer(&Shape { arch, sliding_window: Some(512), ..Shape::llama(22, 1024, 8, 2, 4096, 1000) }));
    let (shared, plain) = (mk("gemma3n"), mk("gemma3"));
    assert_eq!((shared.layers[20].kv_from, shared.layers[21].kv_from), (Some(18), Some(18)));
    assert!(shared.layers[..20].iter().all(|l| l.kv_from.is_none()));
    let opts = LlamaCppOptions {
        ctx_size: 8192,
        flash_attn: vramfit_llamacpp::FlashAttn::On,
        n_gpu_layers: Some(0),
        gpus: vec![],
        ..Default::default()
    };
    let (ps, pp) = (plan(&shared, &opts).unwrap(), plan(&plain, &opts).unwrap());
    // two sliding layers fewer: 2 × (K + V) × 2 heads × 128 × 2 B × pad(512 + 512, 256) = 1024 cells
    let two_swa_layers = 2 * 2 * 2 * 128 * 2 * 1024;
    assert_eq!(pp.kv.k_bytes + pp.kv.v_bytes - (ps.kv.k_bytes + ps.kv.v_bytes), two_swa_layers);
    assert_eq!(ps.compute.buffers, pp.compute.buffers);
}

fn gguf_value_type_bool() -> vramfit_ingest::gguf::ValueType {
    vramfit_ingest::gguf::ValueType::Bool
}
