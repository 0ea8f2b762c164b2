//! `vramfit estimate <file.gguf>` through the real binary, on GGUF files
//! written by the test (tensor data left as holes: a 40 GB model costs a
//! few kilobytes of disk). Expected figures are computed here from the
//! files' tensor infos with ggml's block sizes, independently of the code
//! under test.

mod common;
use common::{json, run};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use vramfit_ingest::gguf::writer::fixtures::{write_model, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_ingest::gguf::{read_header, GgufHeader};
use vramfit_llamacpp::GgmlType;

const MIB: u64 = 1 << 20;

/// Tests run in parallel and share these files: each is written under a name of
/// its own and renamed into place, so no test reads a file another is rewriting.
fn fixture(name: &str, s: &Shape) -> (PathBuf, GgufHeader) {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gguf-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("{name}.{}.{n}.tmp", std::process::id()));
    write_model(s, &tmp).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
    let h = read_header(&p).unwrap();
    (p, h)
}

/// (elements per block, bytes per block) from llama.cpp's
/// `gguf-py/gguf/constants.py` GGML_QUANT_SIZES, restated here so the test
/// does not trust the table under test.
fn block(ty_id: u32) -> (u64, u64) {
    match ty_id {
        0 => (1, 4),      // F32
        1 => (1, 2),      // F16
        8 => (32, 34),    // Q8_0
        12 => (256, 144), // Q4_K
        13 => (256, 176), // Q5_K
        14 => (256, 210), // Q6_K
        16 => (256, 66),  // IQ2_XXS
        23 => (256, 136), // IQ4_XS
        29 => (256, 56),  // IQ1_M
        30 => (1, 2),     // BF16
        35 => (256, 66),  // TQ2_0
        39 => (32, 17),   // MXFP4
        other => panic!("type {other} not in the test's table"),
    }
}

fn nbytes(ty: u32, ne: &[u64]) -> u64 {
    let (b, s) = block(ty);
    assert_eq!(ne[0] % b, 0);
    ne.iter().product::<u64>() / b * s
}

/// `ggml_backend_cuda_buffer_type_get_alloc_size` + 128-byte alignment.
fn cuda_size(ty: u32, ne: &[u64]) -> u64 {
    let mut n = nbytes(ty, ne);
    let quantized = block(ty).0 > 1;
    if quantized && !ne[0].is_multiple_of(512) {
        n += nbytes(ty, &[512 - ne[0] % 512]);
    }
    n.next_multiple_of(128)
}

fn is_layer(name: &str, range: std::ops::RangeInclusive<u64>) -> bool {
    name.strip_prefix("blk.")
        .and_then(|r| r.split('.').next())
        .and_then(|n| n.parse::<u64>().ok())
        .is_some_and(|il| range.contains(&il))
}

fn device<'a>(v: &'a Value, name: &str) -> &'a Value {
    if name == "host" {
        return &v["host"];
    }
    v["devices"].as_array().unwrap().iter().find(|d| d["name"] == name).unwrap_or_else(|| panic!("no {name}"))
}

/// Bytes of the buffer lines of `dev` whose label starts with `label`.
fn buf(v: &Value, dev: &str, label: &str) -> u64 {
    device(v, dev)["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["label"].as_str().unwrap().starts_with(label))
        .map(|b| b["bytes"].as_u64().unwrap())
        .sum()
}

fn p(path: &std::path::Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn weights_are_exact_to_the_byte_for_every_quant_family() {
    for (ty, embd) in [
        (GgmlType::Q4K, GgmlType::Q6K),
        (GgmlType::Q5K, GgmlType::Q6K),
        (GgmlType::Q8_0, GgmlType::Q8_0),
        (GgmlType::Iq2Xxs, GgmlType::Q4K),
        (GgmlType::Iq4Xs, GgmlType::Q6K),
        (GgmlType::Iq1M, GgmlType::Q6K),
        (GgmlType::Tq2_0, GgmlType::F16),
        (GgmlType::Mxfp4, GgmlType::Q8_0),
        (GgmlType::Bf16, GgmlType::Bf16),
    ] {
        let mut s = Shape::llama(4, 512, 8, 2, 1024, 1024);
        s.matrix = ty;
        s.embd = embd;
        let (path, h) = fixture(&format!("quant-{ty}.gguf"), &s);
        let v = json(&["estimate", p(&path), "--gpu", "h100-sxm", "--json"], 0);
        let total: u64 = h.tensors.iter().map(|t| nbytes(t.ty.id(), &t.ne)).sum();
        assert_eq!(v["model"]["tensor_bytes"], total, "{ty}");
        let n = 4 * 7 + if embd == ty { 2 } else { 0 };
        assert_eq!(v["model"]["tensors_by_type"][ty.name()]["tensors"], n, "{ty}");
        // all layers and the output on the GPU; token_embd mapped on the host
        let gpu: u64 =
            h.tensors.iter().filter(|t| t.name != "token_embd.weight").map(|t| cuda_size(t.ty.id(), &t.ne)).sum();
        assert_eq!(buf(&v, "CUDA0", "CUDA0 model buffer"), gpu, "{ty}");
        let emb = h.tensors.iter().find(|t| t.name == "token_embd.weight").unwrap();
        assert_eq!(buf(&v, "host", "CPU_Mapped model buffer"), nbytes(emb.ty.id(), &emb.ne), "{ty}");
        // the host total is the sum of its lines, the GPU's likewise
        for d in ["CUDA0", "host"] {
            let lines: u64 =
                device(&v, d)["buffers"].as_array().unwrap().iter().map(|b| b["bytes"].as_u64().unwrap()).sum();
            assert_eq!(device(&v, d)["total_bytes"], lines);
        }
    }
}

#[test]
fn mxfp4_rows_not_a_multiple_of_512_are_padded_on_cuda() {
    // gpt-oss widths: 2880 = 5·512 + 320 → 192 more elements per tensor (6 MXFP4 blocks)
    let mut s = Shape::llama(2, 2880, 45, 9, 2880, 1024);
    s.head_dim = 64;
    s.matrix = GgmlType::Mxfp4;
    s.embd = GgmlType::Q8_0;
    let (path, h) = fixture("mxfp4-2880.gguf", &s);
    let v = json(&["estimate", p(&path), "--gpu", "h100-sxm", "--json"], 0);
    let gpu: u64 =
        h.tensors.iter().filter(|t| t.name != "token_embd.weight").map(|t| cuda_size(t.ty.id(), &t.ne)).sum();
    let plain: u64 = h.tensors.iter().filter(|t| t.name != "token_embd.weight").map(|t| nbytes(t.ty.id(), &t.ne)).sum();
    assert_eq!(buf(&v, "CUDA0", "CUDA0 model buffer"), gpu);
    assert!(gpu > plain + 7 * 102, "row padding counted: {gpu} vs {plain}");
}

fn llama8b() -> (PathBuf, GgufHeader) {
    let mut s = Shape::llama(32, 4096, 32, 8, 14336, 128256);
    s.matrix = GgmlType::Q4K;
    s.ctx = 131072;
    fixture("llama8b-q4k.gguf", &s)
}

#[test]
fn partial_offload_puts_the_output_layer_first_and_splits_vram_and_host_ram() {
    let (path, h) = llama8b();
    // build b4897 still repacked host matrices beside a GPU (see current_builds_do_not_repack_beside_a_gpu)
    let v = json(&["estimate", p(&path), "--gpu", "rtx-4090", "-ngl", "20", "--llamacpp-build", "4897", "--json"], 0);
    // -ngl 20 = the output layer + the last 19 repeating layers (13..=31)
    let r = &v["placement"]["layers"];
    assert_eq!(r[0]["device"], "CPU");
    assert_eq!((r[0]["first"].as_u64(), r[0]["last"].as_u64()), (Some(0), Some(12)));
    assert_eq!(r[1]["device"], "CUDA0");
    assert_eq!((r[1]["first"].as_u64(), r[1]["last"].as_u64()), (Some(13), Some(31)));
    assert_eq!(v["placement"]["output"], "CUDA0");
    let on_gpu = |n: &str| is_layer(n, 13..=31) || n.starts_with("output");
    let gpu: u64 = h.tensors.iter().filter(|t| on_gpu(&t.name)).map(|t| cuda_size(t.ty.id(), &t.ne)).sum();
    assert_eq!(buf(&v, "CUDA0", "CUDA0 model buffer"), gpu);
    // host: Q4_K matrices of layers 0..=12 are repacked (x86-64 AVX2), the rest stays mapped
    let host: Vec<_> = h.tensors.iter().filter(|t| !on_gpu(&t.name)).collect();
    let repacked: u64 = host
        .iter()
        .filter(|t| t.ty.id() == 12 && t.ne.len() == 2 && t.name != "token_embd.weight")
        .map(|t| nbytes(t.ty.id(), &t.ne))
        .sum();
    assert_eq!(buf(&v, "host", "CPU_REPACK model buffer"), repacked);
    let mapped: Vec<_> = host.iter().filter(|t| !(t.ty.id() == 12 && t.name != "token_embd.weight")).collect();
    let end = mapped.iter().map(|t| t.offset + nbytes(t.ty.id(), &t.ne)).max().unwrap();
    let start = mapped.iter().map(|t| t.offset).min().unwrap();
    // the host counts the mapped tensors; the mapped range llama.cpp logs is a note
    let resident: u64 = mapped.iter().map(|t| nbytes(t.ty.id(), &t.ne)).sum();
    assert_eq!(buf(&v, "host", "CPU_Mapped model buffer"), resident);
    let range = format!("CPU_Mapped model buffer of {:.2} MiB", (end - start) as f64 / MIB as f64);
    assert!(
        v["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains(&range)),
        "{range}: {}",
        v["notes"]
    );
    // KV at -c 4096, f16: 2 × 8 heads × 128 × 2 B × 4096 = 16 MiB per layer
    assert_eq!(buf(&v, "CUDA0", "CUDA0 KV buffer"), 19 * 16 * MIB);
    assert_eq!(buf(&v, "host", "CPU KV buffer"), 13 * 16 * MIB);
    assert_eq!(
        v["command_line"].as_str().unwrap(),
        format!("llama-server -m {} -c 4096 -ngl 20 -fa on -np 1", p(&path))
    );
    // --no-repack: every host tensor mapped, nothing repacked
    let v = json(&["estimate", p(&path), "--gpu", "rtx-4090", "-ngl", "20", "--no-repack", "--json"], 0);
    assert_eq!(buf(&v, "host", "CPU_REPACK"), 0);
    assert!(v["command_line"].as_str().unwrap().ends_with("--no-repack"));
}

#[test]
fn tensor_split_gives_vram_per_gpu() {
    let (path, h) = llama8b();
    let v = json(&["estimate", p(&path), "--gpu", "rtx-4090,rtx-4090", "-ts", "3,1", "--json"], 0);
    // 33 slots over 3:1 → slot il on GPU0 while il/33 < 0.75: layers 0..=24
    let r = &v["placement"]["layers"];
    assert_eq!((r[0]["device"].as_str(), r[0]["last"].as_u64()), (Some("CUDA0"), Some(24)));
    assert_eq!((r[1]["device"].as_str(), r[1]["first"].as_u64()), (Some("CUDA1"), Some(25)));
    assert_eq!(v["placement"]["output"], "CUDA1");
    let g0: u64 = h.tensors.iter().filter(|t| is_layer(&t.name, 0..=24)).map(|t| cuda_size(t.ty.id(), &t.ne)).sum();
    let g1: u64 = h
        .tensors
        .iter()
        .filter(|t| is_layer(&t.name, 25..=31) || t.name.starts_with("output"))
        .map(|t| cuda_size(t.ty.id(), &t.ne))
        .sum();
    assert_eq!(buf(&v, "CUDA0", "CUDA0 model buffer"), g0);
    assert_eq!(buf(&v, "CUDA1", "CUDA1 model buffer"), g1);
    assert_eq!(buf(&v, "CUDA0", "CUDA0 KV buffer"), 25 * 16 * MIB);
    assert_eq!(buf(&v, "CUDA1", "CUDA1 KV buffer"), 7 * 16 * MIB);
    assert!(v["command_line"].as_str().unwrap().contains(" -ngl 33 -ts 3,1 "));
    // the text view prints the same command line
    let (text, _) = run(&["estimate", p(&path), "--gpu", "rtx-4090", "-ts", "3,1"], 0);
    assert!(
        text.contains(&format!("command: llama-server -m {} -c 4096 -ngl 33 -ts 3,1 -fa on -np 1", p(&path))),
        "{text}"
    );
    assert!(text.contains("CUDA1 (RTX 4090): FITS"), "{text}");
}

#[test]
fn largest_ngl_and_context_that_fit_are_the_boundary() {
    // a 70B-class Q4_K model does not fit one 24 GB card
    let mut s = Shape::llama(80, 8192, 64, 8, 28672, 32000);
    s.matrix = GgmlType::Q4K;
    let (path, _) = fixture("llama70b-q4k.gguf", &s);
    let v = json(&["estimate", p(&path), "--gpu", "rtx-4090", "--json"], 1);
    assert_eq!(v["fit"]["fits"], false);
    let n = v["fit"]["max_gpu_layers"].as_u64().expect("some layers fit");
    assert!(n > 10 && n < 80, "{n}");
    let ngl = n.to_string();
    let ok = json(&["estimate", p(&path), "--gpu", "rtx-4090", "-ngl", &ngl, "--json"], 0);
    assert_eq!(ok["fit"]["fits"], true);
    let more = (n + 1).to_string();
    let _ = json(&["estimate", p(&path), "--gpu", "rtx-4090", "-ngl", &more, "--json"], 1);
    let cmd = v["fit"]["max_gpu_layers_command"].as_str().unwrap();
    assert_eq!(cmd, format!("llama-server -m {} -c 4096 -ngl {n} -fa on -np 1", p(&path)));
    let (text, _) = run(&["estimate", p(&path), "--gpu", "rtx-4090"], 1);
    assert!(text.contains(&format!("largest -ngl that fits: {n}")), "{text}");

    // the 8B model fits a 16 GB T4 whole; its 128k training context does not
    let (path, _) = llama8b();
    let v = json(&["estimate", p(&path), "--gpu", "t4", "--json"], 0);
    let c = v["fit"]["max_context"].as_u64().unwrap();
    assert!(c > 8192 && c < 131072 && c.is_multiple_of(256), "{c}");
    let _ = json(&["estimate", p(&path), "--gpu", "t4", "-c", &c.to_string(), "--json"], 0);
    let _ = json(&["estimate", p(&path), "--gpu", "t4", "-c", &(c + 256).to_string(), "--json"], 1);
    let (text, _) = run(&["estimate", p(&path), "--gpu", "t4"], 0);
    assert!(text.contains(&format!("largest context that fits at this -ngl: {c}")), "{text}");
}

#[test]
fn sliding_window_layers_get_a_small_cache() {
    // gemma3: 5 of every 6 layers slide over 1024 tokens
    let mut s = Shape::llama(6, 1024, 8, 4, 4096, 1024);
    s.arch = "gemma3";
    s.head_dim = 128;
    s.sliding_window = Some(1024);
    s.matrix = GgmlType::Q8_0;
    s.embd = GgmlType::Q8_0;
    let (path, _) = fixture("gemma3-swa.gguf", &s);
    let per_cell = 2 * 4 * 128 * 2; // K + V, f16
    let v = json(&["estimate", p(&path), "--gpu", "l4", "-c", "8192", "--json"], 0);
    assert_eq!(v["model"]["sliding_layers"], 5);
    // SWA cells: pad(min(8192, 1024 + 512), 256) = 1536
    assert_eq!(v["launch"]["swa_cells"], 1536);
    assert_eq!(buf(&v, "CUDA0", "CUDA0 KV buffer"), (5 * 1536 + 8192) * per_cell);
    // 4 sequences, non-unified: 2048 cells per sequence, SWA min(2048, 1536) per stream
    let v = json(&["estimate", p(&path), "--gpu", "l4", "-c", "8192", "-np", "4", "--json"], 0);
    assert_eq!(v["launch"]["n_ctx_seq"], 2048);
    assert_eq!(buf(&v, "CUDA0", "CUDA0 KV buffer"), 4 * (5 * 1536 + 2048) * per_cell);
    // --swa-full: every layer at the full context
    let v = json(&["estimate", p(&path), "--gpu", "l4", "-c", "8192", "--swa-full", "--json"], 0);
    assert_eq!(buf(&v, "CUDA0", "CUDA0 KV buffer"), 6 * 8192 * per_cell);
    // q8_0 K and V caches (V quantized needs flash attention, on by default)
    let v = json(&["estimate", p(&path), "--gpu", "l4", "-c", "8192", "-ctk", "q8_0", "-ctv", "q8_0", "--json"], 0);
    assert_eq!(buf(&v, "CUDA0", "CUDA0 KV buffer"), (5 * 1536 + 8192) * 2 * (4 * 128 / 32 * 34));
    let (_, err) = run(&["estimate", p(&path), "-ctv", "q4_0", "-fa", "off"], 2);
    assert!(err.contains("cache-type-v"), "{err}");
}

#[test]
fn moe_experts_are_counted_and_placed_by_layer() {
    let mut s = Shape::llama(4, 1024, 16, 4, 2048, 1024);
    s.matrix = GgmlType::Q4K;
    s.experts = Some((8, 2, 512));
    let (path, h) = fixture("moe.gguf", &s);
    let v = json(&["estimate", p(&path), "--gpu", "l4", "-ngl", "3", "--llamacpp-build", "b4897", "--json"], 0);
    assert_eq!(v["model"]["experts"]["count"], 8);
    let total: u64 = h.tensors.iter().map(|t| nbytes(t.ty.id(), &t.ne)).sum();
    assert_eq!(v["model"]["tensor_bytes"], total);
    // -ngl 3: output + layers 2 and 3
    let on_gpu = |n: &str| is_layer(n, 2..=3) || n.starts_with("output");
    let gpu: u64 = h.tensors.iter().filter(|t| on_gpu(&t.name)).map(|t| cuda_size(t.ty.id(), &t.ne)).sum();
    assert_eq!(buf(&v, "CUDA0", "CUDA0 model buffer"), gpu);
    // the 3D Q4_K expert stacks of layers 0 and 1 are repacked on the host
    let repacked: u64 = h
        .tensors
        .iter()
        .filter(|t| is_layer(&t.name, 0..=1) && t.ty.id() == 12)
        .map(|t| nbytes(t.ty.id(), &t.ne))
        .sum();
    assert_eq!(buf(&v, "host", "CPU_REPACK model buffer"), repacked);
}

/// Regression (issue 22): a host Q4 partial-offload run on a current
/// build logs no CPU_REPACK buffer although its system info lists
/// repacking. llama.cpp PR #12632 ordered the host buffer types "ACCEL ->
/// GPU host -> CPU extra -> CPU" (`make_cpu_buft_list`,
/// src/llama-model.cpp): the GPU's host buffer takes the host weights, and
/// with mmap `load_tensors` demotes it to the plain CPU buffer ("avoid
/// using a host buffer when using mmap"). A CPU-only build still repacks.
#[test]
fn current_builds_do_not_repack_beside_a_gpu() {
    let (path, h) = llama8b();
    let v = json(&["estimate", p(&path), "--gpu", "rtx-4090", "-ngl", "20", "--json"], 0);
    let bufs = v["host"]["buffers"].to_string();
    assert!(!bufs.contains("CPU_REPACK"), "{bufs}");
    let on_gpu = |n: &str| is_layer(n, 13..=31) || n.starts_with("output");
    let host: u64 = h.tensors.iter().filter(|t| !on_gpu(&t.name)).map(|t| nbytes(t.ty.id(), &t.ne)).sum();
    assert_eq!(buf(&v, "host", "CPU_Mapped model buffer"), host);
    let notes = v["notes"].to_string();
    assert!(notes.contains("no CPU_REPACK buffer") && notes.contains("#12632"), "{notes}");
    // a CPU-only build repacks the Q4_K matrices
    let v = json(&["estimate", p(&path), "--cpu-only", "--json"], 0);
    assert!(buf(&v, "host", "CPU_REPACK model buffer") > 0);
}

/// llama-server reserves logits for its slots only since llama.cpp PR
/// #23861 (`server_n_outputs_max` = min(n_batch, n_parallel),
/// tools/server/server-context.cpp; first in tag b9479): the reserve
/// graph's logits are n_vocab × 4 rows at -np 4 instead of n_vocab × 512.
/// Regression (issue 22): vramfit reserved the full micro-batch on every build.
#[test]
fn current_builds_reserve_logits_for_the_slots_only() {
    let (path, _) = llama8b();
    let cuda = |build: &str| {
        let mut a = vec!["estimate", p(&path), "--gpu", "h100-sxm", "-c", "8192", "-np", "4", "--json"];
        if !build.is_empty() {
            a.extend(["--llamacpp-build", build]);
        }
        let v = json(&a, 0);
        (buf(&v, "CUDA0", "CUDA0 compute buffer"), v["notes"].to_string())
    };
    let (now, note_now) = cuda("");
    let (before, note_before) = cuda("9478");
    let (after, _) = cuda("9479");
    assert_eq!(now, after);
    // the micro-batch's logits alone are 128256 × 512 × 4 B = 250.5 MiB: the older build's
    // buffer holds them, the current one (4 rows, 2 MiB) is smaller than they are
    let logits = 128256 * 512 * 4;
    assert!(before >= logits && now < logits, "before {before}, now {now}");
    assert!(note_now.contains("build current") && note_now.contains("logits of 4 of the 512 tokens"), "{note_now}");
    assert!(note_before.contains("build b9478") && note_before.contains("logits of all 512 tokens"), "{note_before}");
    let (_, err) = run(&["estimate", p(&path), "--llamacpp-build", "x12"], 2);
    assert!(err.contains("--llamacpp-build") && err.contains("x12"), "{err}");
    let (_, err) = run(&["estimate", p(&path), "--llamacpp-build", "0"], 2);
    assert!(err.contains("--llamacpp-build"), "{err}");
}

/// `--n-cpu-moe N` keeps the routed-expert stacks of layers 0..N in host
/// memory (llama.cpp's `llm_ffn_exps_block_regex` overrides,
/// common/common.h; common/arg.cpp): the GPU's model buffer loses them,
/// the host maps them, the router and the rest of the layer stay, and the
/// GPU's compute buffer grows by the copy it makes to run them (op offload).
#[test]
fn n_cpu_moe_keeps_the_first_layers_experts_on_the_host() {
    let mut s = Shape::llama(4, 1024, 16, 4, 2048, 1024);
    s.matrix = GgmlType::Q4K;
    s.experts = Some((8, 2, 512));
    let (path, h) = fixture("moe-ncmoe.gguf", &s);
    let base = json(&["estimate", p(&path), "--gpu", "l4", "--json"], 0);
    let v = json(&["estimate", p(&path), "--gpu", "l4", "-ncmoe", "2", "--json"], 0);
    let exps = |t: &&vramfit_ingest::gguf::GgufTensor| is_layer(&t.name, 0..=1) && t.name.contains("_exps.");
    let moved: u64 = h.tensors.iter().filter(exps).map(|t| cuda_size(t.ty.id(), &t.ne)).sum();
    assert!(moved > 0);
    assert_eq!(buf(&base, "CUDA0", "CUDA0 model buffer") - buf(&v, "CUDA0", "CUDA0 model buffer"), moved);
    let host_moved: u64 = h.tensors.iter().filter(exps).map(|t| nbytes(t.ty.id(), &t.ne)).sum();
    assert!(buf(&v, "host", "CPU_Mapped model buffer") >= host_moved);
    assert!(buf(&v, "CUDA0", "CUDA0 compute buffer") > buf(&base, "CUDA0", "CUDA0 compute buffer"));
    assert!(v["command_line"].as_str().unwrap().contains(" --n-cpu-moe 2"), "{}", v["command_line"]);
    assert!(v["notes"].to_string().contains("overridden to CUDA_Host"));
    // --cpu-moe: every layer
    let all = json(&["estimate", p(&path), "--gpu", "l4", "--cpu-moe", "--json"], 0);
    let every: u64 = h.tensors.iter().filter(|t| t.name.contains("_exps.")).map(|t| cuda_size(t.ty.id(), &t.ne)).sum();
    assert_eq!(buf(&base, "CUDA0", "CUDA0 model buffer") - buf(&all, "CUDA0", "CUDA0 model buffer"), every);
    assert!(all["command_line"].as_str().unwrap().contains(" --cpu-moe"));
}

/// llama.cpp PR #23764 (in tag b9442) reserves the flash-attention KQ
/// mask in f16 instead of an f32 input cast to f16 (llm_graph_input_attn_kv,
/// src/llama-graph.cpp): with -fa on the compute buffer shrinks, with -fa
/// off nothing changes. At -c 131072 the f32 mask (131072 × 512 × 4 B = 256 MiB)
/// outgrows the micro-batch logits (250.5 MiB), so the peak moves.
#[test]
fn builds_from_b9442_reserve_the_flash_attention_mask_in_f16() {
    let (path, _) = llama8b();
    let cuda = |build: &str, fa: &str| {
        let v = json(
            &[
                "estimate",
                p(&path),
                "--gpu",
                "h100-sxm",
                "-c",
                "131072",
                "-fa",
                fa,
                "--llamacpp-build",
                build,
                "--json",
            ],
            0,
        );
        buf(&v, "CUDA0", "CUDA0 compute buffer")
    };
    assert!(cuda("9442", "on") < cuda("9441", "on"), "f16 mask: {} vs {}", cuda("9442", "on"), cuda("9441", "on"));
    assert_eq!(cuda("9442", "off"), cuda("9441", "off"));
}

/// `-ot PATTERN=BUFT` (llama.cpp's `tensor_buft_overrides`: the first
/// pattern found in a tensor's name picks its buffer type, `load_tensors`
/// in src/llama-model.cpp): the pattern `--n-cpu-moe 2` stands for places
/// the same tensors; bad patterns and absent GPUs are refused by name.
#[test]
fn override_tensor_places_the_matching_tensors() {
    let mut s = Shape::llama(4, 1024, 16, 4, 2048, 1024);
    s.matrix = GgmlType::Q4K;
    s.experts = Some((8, 2, 512));
    let (path, _) = fixture("moe-ot.gguf", &s);
    let ncmoe = json(&["estimate", p(&path), "--gpu", "l4", "-ncmoe", "2", "--json"], 0);
    let pattern = r"blk\.(0|1)\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU";
    let ot = json(&["estimate", p(&path), "--gpu", "l4", "-ot", pattern, "--json"], 0);
    for (dev, label) in
        [("CUDA0", "CUDA0 model buffer"), ("host", "CPU_Mapped model buffer"), ("CUDA0", "CUDA0 compute buffer")]
    {
        assert_eq!(buf(&ot, dev, label), buf(&ncmoe, dev, label), "{label}");
    }
    assert!(ot["command_line"].as_str().unwrap().contains(" -ot '"), "{}", ot["command_line"]);
    assert!(ot["notes"].to_string().contains("6 tensors match"), "{}", ot["notes"]);
    let (_, err) = run(&["estimate", p(&path), "--gpu", "l4", "-ot", "exps=CUDA1"], 2);
    assert!(err.contains("override-tensor") && err.contains("CUDA1"), "{err}");
    let (_, err) = run(&["estimate", p(&path), "--gpu", "l4", "-ot", "(=CPU"], 2);
    assert!(err.contains("override-tensor") && err.contains("not a regular expression"), "{err}");
    let (_, err) = run(&["estimate", p(&path), "--gpu", "l4", "-ot", "exps=Metal"], 2);
    assert!(err.contains("--override-tensor") && err.contains("Metal"), "{err}");
}

#[test]
fn cpu_only_keeps_everything_on_the_host() {
    let mut s = Shape::llama(2, 512, 8, 8, 1024, 1024);
    s.matrix = GgmlType::F16;
    s.embd = GgmlType::F16;
    let (path, h) = fixture("cpu-only.gguf", &s);
    let v = json(&["estimate", p(&path), "--cpu-only", "--json"], 0);
    assert!(v["devices"].as_array().unwrap().is_empty());
    let total: u64 = h.tensors.iter().map(|t| nbytes(t.ty.id(), &t.ne)).sum();
    assert_eq!(buf(&v, "host", "CPU_Mapped model buffer"), total);
    assert!(buf(&v, "host", "CPU compute buffer") > 0);
    assert!(v["command_line"].as_str().unwrap().contains(" -ngl 0 "));
    let (_, err) = run(&["estimate", p(&path), "--cpu-only", "--gpu", "l4"], 2);
    assert!(err.contains("--cpu-only"), "{err}");
}

#[test]
fn explain_gives_formula_inputs_and_source_for_every_buffer() {
    let (path, _) = llama8b();
    let (text, _) =
        run(&["estimate", p(&path), "--gpu", "rtx-4090", "-ngl", "20", "--llamacpp-build", "4897", "--explain"], 0);
    for label in
        ["CUDA0 model buffer", "CUDA0 KV buffer", "CUDA0 compute buffer", "CPU_REPACK model buffer", "CPU KV buffer"]
    {
        let at = text.find(&format!("] {label} =")).unwrap_or_else(|| panic!("{label} not explained:\n{text}"));
        let block = &text[at..text[at..].find("\n\n").map(|e| at + e).unwrap_or(text.len())];
        assert!(block.contains("formula:"), "{block}");
        assert!(block.contains("note:"), "{block}");
        assert!(block.lines().count() >= 4, "{block}");
    }
}

fn hostile(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gguf-cli");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn hostile_files_are_refused_naming_the_field() {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend((1u64 << 40).to_le_bytes());
    b.extend(0u64.to_le_bytes());
    let (_, err) = run(&["estimate", p(&hostile("huge-count.gguf", &b)), "--json"], 2);
    assert!(err.contains("tensor_count"), "{err}");

    let w = GgufWriter::new()
        .kv("general.architecture", WValue::Str("llama".into()))
        .kv("llama.block_count", WValue::U32(1))
        .kv("llama.embedding_length", WValue::U32(64));
    let mut b = w.to_bytes();
    // a string claiming 2^50 bytes
    let key = b"general.architecture";
    let at = b.windows(key.len()).position(|x| x == key).unwrap() + key.len() + 4;
    b[at..at + 8].copy_from_slice(&(1u64 << 50).to_le_bytes());
    let (_, err) = run(&["estimate", p(&hostile("long-string.gguf", &b)), "--json"], 2);
    assert!(err.contains("general.architecture"), "{err}");

    let (_, err) = run(&["estimate", p(&hostile("not.gguf", b"PK\x03\x04 a zip")), "--json"], 2);
    assert!(err.to_lowercase().contains("gguf"), "{err}");

    // a directory named like a model is not a regular file
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gguf-cli").join("dir.gguf");
    std::fs::create_dir_all(&dir).unwrap();
    let _ = run(&["estimate", p(&dir)], 2);
}

#[test]
fn llama_cpp_flags_on_other_models_are_refused() {
    let (_, err) = run(&["estimate", "llama-2-7b", "-ngl", "10"], 2);
    assert!(err.contains("--n-gpu-layers") && err.contains("GGUF"), "{err}");
    let (_, err) = run(&["estimate", "llama-2-7b", "--ctx-size", "8192", "-np", "2"], 2);
    assert!(err.contains("--ctx-size") && err.contains("--parallel"), "{err}");
}

#[test]
fn json_snapshot() {
    let mut s = Shape::llama(2, 256, 4, 2, 512, 512);
    s.matrix = GgmlType::Q4K;
    s.embd = GgmlType::Q8_0;
    s.ctx = 2048;
    let (path, _) = fixture("snapshot.gguf", &s);
    let (out, _) = run(&["estimate", p(&path), "--gpu", "t4", "-c", "2048", "--json"], 0);
    let out = out.replace(p(&path), "<FILE>");
    let v: Value = serde_json::from_str(&out).unwrap();
    insta::assert_json_snapshot!("gguf_estimate_json", v);
}

#[test]
fn launch_options_out_of_bounds_name_the_llama_cpp_flag() {
    let (path, _) = llama8b();
    for (args, flag, says) in [
        (&["-np", "0"][..], "-np/--parallel", "at least 1"),
        // llama.cpp refuses more than LLAMA_MAX_SEQ (256) sequences
        (&["-np", "257"][..], "-np/--parallel", "LLAMA_MAX_SEQ"),
        (&["-ub", "0"][..], "-ub/--ubatch-size", "at least 1"),
        (&["-b", "0"][..], "-b/--batch-size", "at least 1"),
        (&["-ts", "0,0"][..], "-ts/--tensor-split", "not all zero"),
    ] {
        let mut a = vec!["estimate", p(&path), "--gpu", "l4"];
        a.extend_from_slice(args);
        let (_, err) = run(&a, 2);
        assert!(err.contains(flag) && err.contains(says), "{args:?}: {err}");
    }
    let (v, _) = run(&["estimate", p(&path), "--gpu", "a100-80gb", "-np", "256", "--json"], 0);
    assert!(v.contains("\"parallel\": 256"), "the bound itself is accepted");
}
