//! GGUF header parsing: every value type, every ggml type, prefixes,
//! hostile headers refused naming the field, and the model llama.cpp loads.

use proptest::prelude::*;
use vramfit_ingest::gguf::writer::fixtures::{model, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_ingest::gguf::*;
use vramfit_llamacpp::GgmlType;

fn complete(bytes: &[u8]) -> GgufHeader {
    match parse(bytes, bytes.len() as u64).unwrap() {
        Parsed::Complete(h) => *h,
        Parsed::NeedMore { bytes } => panic!("needs {bytes}"),
    }
}

fn error(bytes: &[u8]) -> GgufError {
    match parse(bytes, bytes.len() as u64) {
        Err(e) => e,
        Ok(p) => panic!("accepted {} bytes: {p:?}", bytes.len()),
    }
}

#[test]
fn every_value_type_round_trips() {
    let w = GgufWriter::new()
        .kv("u8", WValue::U8(200))
        .kv("i8", WValue::I8(-5))
        .kv("u16", WValue::U16(65000))
        .kv("i16", WValue::I16(-300))
        .kv("u32", WValue::U32(4_000_000_000))
        .kv("i32", WValue::I32(-7))
        .kv("f32", WValue::F32(0.5))
        .kv("bool", WValue::Bool(true))
        .kv("str", WValue::Str("héllo".into()))
        .kv("u64", WValue::U64(u64::MAX))
        .kv("i64", WValue::I64(i64::MIN))
        .kv("f64", WValue::F64(-2.25))
        .kv("arr_i32", WValue::Array(ValueType::I32, vec![WValue::I32(8), WValue::I32(0), WValue::I32(8)]))
        .kv("arr_str", WValue::Array(ValueType::String, vec![WValue::Str("a".into()), WValue::Str("b".into())]))
        .kv("arr_bool", WValue::Array(ValueType::Bool, vec![WValue::Bool(true), WValue::Bool(false)]));
    let h = complete(&w.to_bytes());
    assert_eq!(h.version, 3);
    assert_eq!(h.get("u8").unwrap().as_u64(), Some(200));
    assert_eq!(h.get("i8"), Some(&MetaValue::I64(-5)));
    assert_eq!(h.get("u16").unwrap().as_u64(), Some(65000));
    assert_eq!(h.get("i16"), Some(&MetaValue::I64(-300)));
    assert_eq!(h.get("u32").unwrap().as_u64(), Some(4_000_000_000));
    assert_eq!(h.get("i32"), Some(&MetaValue::I64(-7)));
    assert_eq!(h.get("f32").unwrap().as_f64(), Some(0.5));
    assert_eq!(h.get("bool").unwrap().as_bool(), Some(true));
    assert_eq!(h.get("str").unwrap().as_str(), Some("héllo"));
    assert_eq!(h.get("u64").unwrap().as_u64(), Some(u64::MAX));
    assert_eq!(h.get("i64"), Some(&MetaValue::I64(i64::MIN)));
    assert_eq!(h.get("f64").unwrap().as_f64(), Some(-2.25));
    assert_eq!(h.get("arr_i32").unwrap().as_u64_vec(), Some(vec![8, 0, 8]));
    assert_eq!(h.get("arr_str").unwrap().array_len(), Some(2));
    assert_eq!(h.get("arr_bool").unwrap().as_bool_vec(), Some(vec![true, false]));
}

#[test]
fn every_ggml_type_gets_its_exact_size() {
    // one tensor of each type, 2 rows of 256 elements (a whole block for every type)
    let mut w = GgufWriter::new();
    for t in GgmlType::ALL {
        w = w.tensor(&format!("t_{}", t.name()), t, &[256, 2]);
    }
    let bytes = w.to_bytes();
    let h = complete(&bytes);
    assert_eq!(h.tensors.len(), GgmlType::ALL.len());
    for (t, info) in GgmlType::ALL.iter().zip(&h.tensors) {
        assert_eq!(info.ty, *t);
        assert_eq!(info.bytes, 2 * 256 / t.block_size() * t.type_size(), "{}", t.name());
    }
    // spot checks against llama.cpp's block structs
    let size = |n: &str| h.tensors.iter().find(|x| x.name == n).unwrap().bytes;
    assert_eq!(size("t_q4_K"), 2 * 144);
    assert_eq!(size("t_iq2_xxs"), 2 * 66);
    assert_eq!(size("t_mxfp4"), 2 * 8 * 17);
    assert_eq!(size("t_tq1_0"), 2 * 54);
    assert_eq!(size("t_bf16"), 2 * 256 * 2);
    assert_eq!(h.data_offset % 32, 0);
    let end = h.data_offset + h.tensors.last().unwrap().offset + h.tensors.last().unwrap().bytes;
    assert!(end <= bytes.len() as u64 && bytes.len() as u64 - end < 32);
}

#[test]
fn prefixes_ask_for_more_until_complete() {
    let bytes = model(&Shape::llama(2, 256, 4, 2, 512, 32));
    let len = bytes.len() as u64;
    let full = complete(&bytes);
    let mut have = 0u64;
    let mut rounds = 0;
    loop {
        match parse(&bytes[..have as usize], len).unwrap() {
            Parsed::Complete(h) => {
                assert_eq!(*h, full);
                break;
            }
            Parsed::NeedMore { bytes: need } => {
                assert!(need > have && need <= len, "need {need} with {have} of {len}");
                have = need;
            }
        }
        rounds += 1;
        assert!(rounds < 10_000);
    }
    // every prefix answers consistently: the header, or a need beyond the prefix
    for cut in 0..full.header_bytes as usize {
        match parse(&bytes[..cut], len).unwrap() {
            Parsed::NeedMore { bytes: need } => assert!(need > cut as u64),
            Parsed::Complete(_) => panic!("complete at {cut} < {}", full.header_bytes),
        }
    }
}

#[test]
fn hostile_headers_are_refused_naming_the_field() {
    let mut h = b"GGUF".to_vec();
    h.extend(3u32.to_le_bytes());
    // a tensor count above the cap
    let mut b = h.clone();
    b.extend(u64::MAX.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    let e = error(&b);
    assert!(matches!(e, GgufError::TooLarge { ref field, .. } if field == "tensor_count"), "{e}");
    // a count under the cap that the file cannot hold
    let mut b = h.clone();
    b.extend(1000u64.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    let e = error(&b);
    assert!(matches!(e, GgufError::PastEnd { ref field, .. } if field == "tensor_count"), "{e}");
    assert!(e.to_string().contains("tensor_count"));
    // a key whose length runs past the file
    let mut b = h.clone();
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(1_000_000u64.to_le_bytes());
    b.extend(b"general");
    let e = error(&b);
    assert!(e.to_string().contains("metadata key #0"), "{e}");
    // an unknown value type
    let b = GgufWriter::new().kv("x", WValue::U8(1)).to_bytes();
    let mut b2 = b.clone();
    let pos = 4 + 4 + 8 + 8 + 8 + 1; // after key "x"
    b2[pos..pos + 4].copy_from_slice(&77u32.to_le_bytes());
    let e = error(&b2);
    assert!(matches!(e, GgufError::ValueType { ref field, type_id: 77 } if field == "metadata 'x'"), "{e}");
    // a string value claiming more than the cap
    let mut b = h.clone();
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(b"k");
    b.extend(8u32.to_le_bytes());
    b.extend(u64::MAX.to_le_bytes());
    let e = error(&b);
    assert!(matches!(e, GgufError::TooLarge { ref field, .. } if field == "metadata 'k'"), "{e}");
    // an array longer than the file
    let mut b = h.clone();
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(b"a");
    b.extend(9u32.to_le_bytes());
    b.extend(6u32.to_le_bytes());
    b.extend(1_000_000u64.to_le_bytes());
    let e = error(&b);
    assert!(e.to_string().contains("metadata 'a' array length"), "{e}");
    // nested arrays, a bool that is not 0/1
    let mut b = h.clone();
    b.extend(0u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(b"n");
    b.extend(9u32.to_le_bytes());
    b.extend(9u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    assert!(matches!(error(&b), GgufError::NestedArray { .. }));
    let mut b = GgufWriter::new().kv("b", WValue::Bool(true)).to_bytes();
    let last = complete(&b).header_bytes as usize - 1;
    b[last] = 2;
    assert!(matches!(error(&b), GgufError::Bool { byte: 2, .. }));
}

#[test]
fn unknown_and_retired_tensor_types_are_refused() {
    let b = GgufWriter::new().tensor("w", GgmlType::Q4_0, &[32, 1]).to_bytes();
    let h = complete(&b);
    // the type field sits 12 bytes before the end of the infos (type u32 + offset u64)
    let pos = h.header_bytes as usize - 12;
    for (id, hint) in [(31u32, "repacks Q4_0"), (4, "removed"), (99, "not a ggml type")] {
        let mut b2 = b.clone();
        b2[pos..pos + 4].copy_from_slice(&id.to_le_bytes());
        let e = error(&b2);
        assert!(
            matches!(e, GgufError::TensorType { ref tensor, type_id, .. } if tensor == "w" && type_id == id),
            "{e}"
        );
        assert!(e.to_string().contains(hint), "{e}");
    }
}

#[test]
fn tensor_data_past_the_file_is_refused() {
    let mut w = GgufWriter::new().tensor("blk.0.w", GgmlType::F16, &[64, 64]);
    w.truncate_data = true;
    let e = error(&w.to_bytes());
    assert!(matches!(e, GgufError::PastEnd { ref field, .. } if field == "tensor 'blk.0.w' data"), "{e}");
}

#[test]
fn versions_magic_alignment_dims() {
    let mut b = GgufWriter::new().to_bytes();
    b[4..8].copy_from_slice(&1u32.to_le_bytes());
    assert!(error(&b).to_string().contains("version 1"));
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    assert!(error(&b).to_string().contains("big-endian"));
    assert!(matches!(error(b"PK\x03\x04 not gguf"), GgufError::NotGguf { .. }));
    let b = GgufWriter::new().kv("general.alignment", WValue::U32(48)).to_bytes();
    assert!(matches!(error(&b), GgufError::Alignment { value: 48, .. }));
    // a row that is not a whole number of blocks
    let b = GgufWriter::new().tensor("w", GgmlType::Q4K, &[100, 2]).to_bytes();
    assert!(error(&b).to_string().contains("not a multiple of the q4_K block size 256"));
    // duplicate keys and tensors
    let b = GgufWriter::new().kv("a", WValue::U8(1)).kv("a", WValue::U8(2)).to_bytes();
    assert!(matches!(error(&b), GgufError::DuplicateKey { .. }));
    let b = GgufWriter::new().tensor("w", GgmlType::F32, &[4]).tensor("w", GgmlType::F32, &[4]).to_bytes();
    assert!(matches!(error(&b), GgufError::DuplicateTensor { .. }));
}

#[test]
fn llama_model_from_header() {
    let s = Shape::llama(4, 256, 8, 2, 512, 64);
    let h = complete(&model(&s));
    let m = model_from_header(&h, "x").unwrap();
    assert_eq!((m.arch.as_str(), m.n_layer, m.n_embd, m.n_vocab, m.n_ctx_train), ("llama", 4, 256, 64, 8192));
    assert!(m.layers.iter().all(|l| l.n_head == 8 && l.n_head_kv == 2 && l.head_dim_k == 32 && l.n_ff == 512));
    assert!(!m.fused_qkv && m.gated_ffn && !m.tied_output && m.causal);
    // weights exact to the byte against the tensor infos
    assert_eq!(m.weight_bytes().unwrap(), h.tensor_bytes());
    let q4k_rows = |rows: u64, cols: u64| rows / 256 * 144 * cols;
    let layer = 2 * 256 * 4 /* norms */ + q4k_rows(256, 256) * 2 + q4k_rows(256, 64) * 2 + q4k_rows(256, 512) * 2 + q4k_rows(512, 256);
    let q6k_rows = |rows: u64, cols: u64| rows / 256 * 210 * cols;
    let embd = q6k_rows(256, 64);
    assert_eq!(m.weight_bytes().unwrap(), 4 * layer + 2 * embd + 256 * 4);
}

#[test]
fn per_layer_heads_sliding_windows_experts_and_missing_keys() {
    let mut s = Shape::llama(6, 256, 8, 4, 512, 64);
    s.arch = "gemma3";
    s.sliding_window = Some(512);
    s.kv_heads_per_layer = Some(vec![4, 4, 2, 4, 4, 1]);
    let m = model_from_header(&complete(&model(&s)), "x").unwrap();
    assert_eq!(m.n_swa, 512);
    // gemma3's pattern 6: five sliding layers, then a global one
    assert_eq!(m.layers.iter().map(|l| l.sliding).collect::<Vec<_>>(), vec![true, true, true, true, true, false]);
    assert_eq!(m.layers.iter().map(|l| l.n_head_kv).collect::<Vec<_>>(), vec![4, 4, 2, 4, 4, 1]);
    let mut s = Shape::llama(2, 256, 8, 2, 512, 64);
    s.experts = Some((8, 2, 256));
    let m = model_from_header(&complete(&model(&s)), "x").unwrap();
    let ex = m.experts.unwrap();
    assert_eq!((ex.count, ex.used, ex.ff), (8, 2, 256));
    // a sliding window llama.cpp ignores for plain llama is noted, not used
    let mut s = Shape::llama(2, 256, 8, 2, 512, 64);
    s.sliding_window = Some(4096);
    let m = model_from_header(&complete(&model(&s)), "x").unwrap();
    assert!(m.layers.iter().all(|l| !l.sliding));
    assert!(m.notes.iter().any(|n| n.contains("sliding window")));
    // a missing required key is named
    let b = GgufWriter::new().kv("general.architecture", WValue::Str("llama".into())).to_bytes();
    let e = model_from_header(&complete(&b), "x").unwrap_err();
    assert!(e.to_string().contains("llama.block_count"), "{e}");
}

#[test]
fn local_files_go_through_the_bounded_reader() {
    let dir = std::env::temp_dir().join(format!("vramfit-gguf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("m.gguf");
    // a vocabulary large enough that the first read does not hold the header
    let s = Shape { n_vocab: 120_000, ..Shape::llama(2, 256, 8, 2, 512, 64) };
    let bytes = model(&s);
    std::fs::write(&p, &bytes).unwrap();
    let (h, m) = read_model(&p).unwrap();
    assert!(h.header_bytes > FIRST_READ);
    assert_eq!(m.n_vocab, 120_000);
    #[cfg(unix)]
    {
        let e = read_header(std::path::Path::new("/dev/zero")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
    let e = read_header(&dir.join("missing.gguf")).unwrap_err();
    assert!(e.to_string().contains("missing.gguf"), "{e}");
}

/// Write `s` as `count` shards the way `llama-gguf-split` does: metadata in
/// shard 1, `split.*` keys in every shard, tensors spread over the shards.
fn write_split(dir: &std::path::Path, prefix: &str, s: &Shape, count: u16) -> Vec<std::path::PathBuf> {
    let full = complete(&model(s));
    let n = full.tensors.len();
    let mut paths = Vec::new();
    for no in 0..count {
        let mut w = GgufWriter::new()
            .kv("split.no", WValue::U16(no))
            .kv("split.count", WValue::U16(count))
            .kv("split.tensors.count", WValue::I32(n as i32));
        if no == 0 {
            let a = s.arch;
            w = w
                .kv("general.architecture", WValue::Str(a.into()))
                .kv(&format!("{a}.block_count"), WValue::U32(s.n_layer as u32))
                .kv(&format!("{a}.context_length"), WValue::U32(s.ctx as u32))
                .kv(&format!("{a}.embedding_length"), WValue::U32(s.n_embd as u32))
                .kv(&format!("{a}.feed_forward_length"), WValue::U32(s.n_ff as u32))
                .kv(&format!("{a}.attention.head_count"), WValue::U32(s.n_head as u32))
                .kv(&format!("{a}.attention.head_count_kv"), WValue::U32(s.n_head_kv as u32));
        }
        let per = n.div_ceil(count as usize);
        for t in full.tensors.iter().skip(no as usize * per).take(per) {
            w = w.tensor(&t.name, t.ty, &t.ne);
        }
        let p = dir.join(format!("{prefix}-{:05}-of-{count:05}.gguf", no + 1));
        w.write_sparse(&p).unwrap();
        paths.push(p);
    }
    paths
}

#[test]
fn split_models_are_read_whole() {
    let dir = std::env::temp_dir().join(format!("vramfit-gguf-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let s = Shape::llama(4, 256, 8, 2, 512, 64);
    let whole = complete(&model(&s));
    let paths = write_split(&dir, "m", &s, 3);
    // any shard names the whole model
    for p in &paths {
        let (h, m) = read_model(p).unwrap();
        assert_eq!(h.tensors.len(), whole.tensors.len());
        assert_eq!(m.weight_bytes().unwrap(), whole.tensor_bytes());
        assert_eq!(m.n_layer, 4);
    }
    // a missing shard is named
    std::fs::remove_file(&paths[2]).unwrap();
    let e = read_model(&paths[0]).unwrap_err().to_string();
    assert!(e.contains("m-00003-of-00003.gguf"), "{e}");
    // a shard renamed out of the convention cannot find its siblings
    let odd = dir.join("renamed.gguf");
    std::fs::rename(&paths[1], &odd).unwrap();
    let e = read_model(&odd).unwrap_err().to_string();
    assert!(e.contains("split GGUF") && e.contains("00001-of-00003"), "{e}");
    // shard numbering must match split.no
    let paths = write_split(&dir, "n", &s, 2);
    std::fs::rename(&paths[1], dir.join("n-00002-of-00002.tmp")).unwrap();
    std::fs::copy(&paths[0], &paths[1]).unwrap();
    let e = read_model(&paths[0]).unwrap_err().to_string();
    assert!(e.contains("split.no"), "{e}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512), claimed in 0u64..1_000_000) {
        let _ = parse(&data, claimed);
        let mut g = b"GGUF\x03\x00\x00\x00".to_vec();
        g.extend(&data);
        let _ = parse(&g, g.len() as u64);
    }

    #[test]
    fn mutated_files_never_panic_and_stay_consistent(pos in 0usize..2000, byte in any::<u8>(), cut in 0usize..3000) {
        let mut b = model(&Shape::llama(2, 256, 4, 2, 512, 16));
        let p = pos % b.len();
        b[p] = byte;
        let len = b.len() as u64;
        let full = parse(&b, len);
        let c = cut.min(b.len());
        match parse(&b[..c], len) {
            // a prefix never succeeds where the whole file fails, and agrees when both succeed
            Ok(Parsed::Complete(h)) => prop_assert_eq!(full, Ok(Parsed::Complete(h))),
            Ok(Parsed::NeedMore { bytes }) => prop_assert!(bytes > c as u64 && bytes <= len),
            Err(e) => prop_assert_eq!(full, Err(e)),
        }
        if let Ok(Parsed::Complete(h)) = parse(&b, len) {
            let _ = model_from_header(&h, "p");
        }
    }
}

/// A random small model and launch: every tensor is placed exactly once,
/// device totals are the sums of their lines, the KV buffers add up to the
/// cache, and more offloaded layers never move weights back to the host.
fn plan_case(
    shape: (u32, u64, u64, u64, u64, u64),
    ty: usize,
    arch: usize,
    moe: bool,
    swa: bool,
    launch: (u64, u64, u64, bool, bool, usize),
) -> Result<(), TestCaseError> {
    use vramfit_llamacpp::{plan, FlashAttn, GpuSlot, LlamaCppOptions};
    let (n_layer, embd_blocks, heads, kv_div, ff_blocks, vocab) = shape;
    let (ngl, ctx, np, unified, fa, gpus) = launch;
    let types = [GgmlType::Q4K, GgmlType::Q8_0, GgmlType::Iq4Xs, GgmlType::Mxfp4, GgmlType::F16, GgmlType::Q4_0];
    let mut s = Shape::llama(n_layer as u64, embd_blocks * 256, heads, (heads / kv_div).max(1), ff_blocks * 256, vocab);
    s.arch = ["llama", "gemma3", "gptneox", "qwen3"][arch];
    s.matrix = types[ty];
    if moe {
        s.experts = Some((4, 2, 256));
    }
    if swa {
        s.sliding_window = Some(512);
    }
    let h = complete(&model(&s));
    let m = model_from_header(&h, "p").map_err(|e| TestCaseError::fail(e.to_string()))?;
    let opts = |ngl: u64| LlamaCppOptions {
        ctx_size: ctx,
        parallel: np,
        kv_unified: unified,
        flash_attn: if fa { FlashAttn::On } else { FlashAttn::Off },
        n_gpu_layers: Some(ngl),
        gpus: (0..gpus).map(|i| GpuSlot { name: format!("g{i}"), memory_bytes: Some(80 << 30) }).collect(),
        tensor_split: if gpus == 2 { vec![1.0, 2.0] } else { vec![] },
        ..LlamaCppOptions::default()
    };
    let p = plan(&m, &opts(ngl)).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let placed: u64 = p.model_buffers.iter().map(|b| b.used_bytes).sum();
    prop_assert_eq!(placed, m.weight_bytes().unwrap());
    for d in p.gpus.iter().chain(std::iter::once(&p.host)) {
        prop_assert_eq!(d.total_bytes, d.lines.iter().map(|l| l.bytes).sum::<u64>());
    }
    let kv: u64 = p.kv.buffers.iter().map(|b| b.bytes).sum();
    prop_assert_eq!(kv, p.kv.k_bytes + p.kv.v_bytes + p.kv.state_bytes);
    prop_assert!(p.context.n_ctx >= ctx.min(m.n_ctx_train.max(1)) || ctx == 0);
    if gpus > 0 {
        let q = plan(&m, &opts(ngl + 1)).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let on_gpu = |p: &vramfit_llamacpp::LlamaCppPlan| {
            p.gpus.iter().map(|g| g.bytes(vramfit_llamacpp::LineKind::Model)).sum::<u64>()
        };
        prop_assert!(on_gpu(&q) >= on_gpu(&p));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn plans_place_every_tensor_once_and_add_up(
        shape in (1u32..5, 1u64..4, prop::sample::select(vec![4u64, 8]), prop::sample::select(vec![1u64, 2, 4]), 1u64..5, 16u64..300),
        ty in 0usize..6,
        arch in 0usize..4,
        moe in any::<bool>(),
        swa in any::<bool>(),
        launch in (0u64..7, 0u64..5000, 1u64..4, any::<bool>(), any::<bool>(), 0usize..3),
    ) {
        plan_case(shape, ty, arch, moe, swa, launch)?;
    }
}
