//! Calibration against llama.cpp's own start-up log lines
//! (`calibration/data/published/llamacpp.jsonl`, one published log per line).
//!
//! Each case names its model's architecture and quantization recipe. The
//! test writes the GGUF header llama.cpp's converter and `llama-quantize`
//! would have written (tensor names, shapes and types by
//! `llama_tensor_get_type`'s rules for that file type, checked against the
//! log's per-type tensor counts where the log gives them), parses it with the
//! same parser `vramfit estimate` uses, plans the logged launch and compares
//! every figure the case quotes: model buffer per device, KV buffer per
//! device, compute buffer per device. It prints the signed error of every
//! figure and fails when one is off by more than 3 %.

use serde_json::Value;
use std::collections::BTreeMap;
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_ingest::gguf::{model_from_header, parse, Parsed, ValueType};
use vramfit_llamacpp::compute::GraphEra;
use vramfit_llamacpp::placement::OffloadOrder;
use vramfit_llamacpp::{plan, FlashAttn, GgmlType, GpuSlot, LineKind, LlamaCppOptions, LlamaCppPlan};

const TOLERANCE: f64 = 0.03;
const MIB: f64 = 1048576.0;

fn cases() -> Vec<Value> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../calibration/data/published/llamacpp.jsonl");
    let text = std::fs::read_to_string(path).expect("calibration file");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} missing"))
}

/// `use_more_bits` of llama.cpp's `llama_tensor_get_type`.
fn use_more_bits(i: u64, n: u64) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// The type `llama-quantize` gives a 2D weight under a file-type recipe
/// (the subset of `llama_tensor_get_type` these cases need).
fn quant_type(recipe: &str, name: &str, il: u64, n_layer: u64) -> GgmlType {
    use GgmlType::*;
    let is = |s: &str| name.ends_with(s);
    match recipe {
        "f16" => F16,
        "q8_0" => Q8_0,
        "q4_0" | "q4_1" | "q5_0" | "q5_1" => {
            let base = match recipe {
                "q4_0" => Q4_0,
                "q4_1" => Q4_1,
                "q5_0" => Q5_0,
                _ => Q5_1,
            };
            if name == "output.weight" {
                Q6K
            } else {
                base
            }
        }
        "q3_k_m" => {
            if name == "output.weight" {
                Q6K
            } else if is("attn_qkv.weight") || is("attn_output.weight") {
                Q4K
            } else if is("attn_v.weight") {
                if il < 2 {
                    Q5K
                } else {
                    Q4K
                }
            } else if is("ffn_down.weight") {
                if il < n_layer / 16 {
                    Q5K
                } else {
                    Q4K
                }
            } else {
                Q3K
            }
        }
        "q4_k_m" => {
            if name == "output.weight" {
                Q6K
            } else if is("attn_qkv.weight") {
                Q5K
            } else if (is("attn_v.weight") || is("ffn_down.weight")) && use_more_bits(il, n_layer) {
                Q6K
            } else {
                Q4K
            }
        }
        "q5_k_m" => {
            let more = (is("attn_v.weight") || is("ffn_down.weight")) && use_more_bits(il, n_layer);
            if name == "output.weight" || is("attn_qkv.weight") || more {
                Q6K
            } else {
                Q5K
            }
        }
        other => panic!("recipe {other} not modelled"),
    }
}

/// The GGUF header of the case's model, tensors in the converter's order
/// (token embedding, the layers, output norm, output).
fn writer(a: &Value, recipe: &str) -> GgufWriter {
    let arch = a["arch"].as_str().unwrap();
    let (nl, e, h, hkv, d, ff, v) = (
        u(a, "n_layer"),
        u(a, "n_embd"),
        u(a, "n_head"),
        u(a, "n_head_kv"),
        u(a, "head_dim"),
        u(a, "n_ff"),
        u(a, "n_vocab"),
    );
    let biases = a["biases"].as_bool().unwrap_or(false);
    let fused = a["fused_qkv"].as_bool().unwrap_or(false);
    let gated = a["gated_ffn"].as_bool().unwrap_or(true);
    // tied embeddings: no output.weight, and llama-quantize types token_embd as the output
    let tied = a["tied"].as_bool().unwrap_or(false);
    let mut w = GgufWriter::new()
        .kv("general.architecture", WValue::Str(arch.into()))
        .kv(&format!("{arch}.block_count"), WValue::U32(nl as u32))
        .kv(&format!("{arch}.context_length"), WValue::U32(u(a, "n_ctx_train") as u32))
        .kv(&format!("{arch}.embedding_length"), WValue::U32(e as u32))
        .kv(&format!("{arch}.feed_forward_length"), WValue::U32(ff as u32))
        .kv(&format!("{arch}.attention.head_count"), WValue::U32(h as u32))
        .kv(&format!("{arch}.attention.head_count_kv"), WValue::U32(hkv as u32))
        .kv(&format!("{arch}.attention.key_length"), WValue::U32(d as u32))
        .kv(&format!("{arch}.attention.value_length"), WValue::U32(d as u32))
        .kv(
            "tokenizer.ggml.tokens",
            WValue::Array(ValueType::String, (0..v).map(|i| WValue::Str(format!("t{i}"))).collect()),
        );
    let t = |w: GgufWriter, name: String, ne: &[u64], il: u64| {
        let ty = if ne.len() == 1 { GgmlType::F32 } else { quant_type(recipe, &name, il, nl) };
        w.tensor(&name, ty, ne)
    };
    w = if tied {
        w.tensor("token_embd.weight", quant_type(recipe, "output.weight", 0, nl), &[e, v])
    } else {
        t(w, "token_embd.weight".into(), &[e, v], 0)
    };
    for il in 0..nl {
        let p = |s: &str| format!("blk.{il}.{s}");
        let (q, kv) = (h * d, hkv * d);
        w = t(w, p("attn_norm.weight"), &[e], il);
        if biases {
            w = t(w, p("attn_norm.bias"), &[e], il);
        }
        if fused {
            w = t(w, p("attn_qkv.weight"), &[e, q + 2 * kv], il);
            if biases {
                w = t(w, p("attn_qkv.bias"), &[q + 2 * kv], il);
            }
        } else {
            w = t(w, p("attn_q.weight"), &[e, q], il);
            w = t(w, p("attn_k.weight"), &[e, kv], il);
            w = t(w, p("attn_v.weight"), &[e, kv], il);
        }
        w = t(w, p("attn_output.weight"), &[q, e], il);
        if biases {
            w = t(w, p("attn_output.bias"), &[e], il);
        }
        w = t(w, p("ffn_norm.weight"), &[e], il);
        if biases {
            w = t(w, p("ffn_norm.bias"), &[e], il);
        }
        if gated {
            w = t(w, p("ffn_gate.weight"), &[e, ff], il);
        }
        w = t(w, p("ffn_up.weight"), &[e, ff], il);
        if biases {
            w = t(w, p("ffn_up.bias"), &[ff], il);
        }
        w = t(w, p("ffn_down.weight"), &[ff, e], il);
        if biases {
            w = t(w, p("ffn_down.bias"), &[e], il);
        }
    }
    w = t(w, "output_norm.weight".into(), &[e], nl);
    if biases {
        w = t(w, "output_norm.bias".into(), &[e], nl);
    }
    if tied {
        w
    } else {
        t(w, "output.weight".into(), &[e, v], nl)
    }
}

fn figure(p: &LlamaCppPlan, key: &str) -> f64 {
    let gpu0 = || p.gpus.first().expect("a GPU");
    let bytes = match key {
        "model CUDA0" => gpu0().bytes(LineKind::Model),
        "kv CUDA0" => gpu0().bytes(LineKind::Kv),
        "compute CUDA0" => gpu0().bytes(LineKind::Compute),
        "kv CPU" => p.host.bytes(LineKind::Kv),
        "compute host" => p.host.bytes(LineKind::Compute),
        // the buffer as llama.cpp logs it (for CPU_Mapped: the mapped range)
        "model CPU_Mapped" | "model CPU_REPACK" => {
            let name = &key["model ".len()..];
            p.model_buffers.iter().filter(|b| b.name.to_string() == name).fold(0, |a, b| a + b.bytes)
        }
        other => panic!("unknown figure {other}"),
    };
    bytes as f64 / MIB
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return 0.0;
    }
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[test]
fn published_llama_cpp_logs_are_reproduced_within_three_percent() {
    let cases = cases();
    assert!(cases.len() >= 15, "at least 15 published logs, found {}", cases.len());
    let mut failures = Vec::new();
    let mut by_field: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut all = Vec::new();
    println!("{:<40} {:<18} {:>10} {:>10} {:>9}", "case", "figure", "logged", "vramfit", "error");
    // VRAMFIT_CALIBRATION_CASE=<id> runs one case (for tracing)
    let only = std::env::var("VRAMFIT_CALIBRATION_CASE").ok();
    for c in &cases {
        let id = c["id"].as_str().unwrap();
        if only.as_deref().is_some_and(|o| o != id) {
            continue;
        }
        for k in ["source", "model_file", "quant", "command", "quoted", "assumptions"] {
            assert!(!c[k].is_null(), "{id}: {k} missing");
        }
        assert!(c["source"].as_str().unwrap().starts_with("https://"), "{id}: source is a URL");
        let w = writer(&c["arch"], c["recipe"].as_str().unwrap());
        let (head, len) = w.header_and_len();
        let header = match parse(&head, len).expect("header parses") {
            Parsed::Complete(h) => h,
            Parsed::NeedMore { bytes } => panic!("{id}: header needs {bytes} bytes"),
        };
        let model = model_from_header(&header, id).expect("model");
        if let Some(counts) = c["type_counts"].as_object() {
            let mut ours: BTreeMap<String, u64> = BTreeMap::new();
            for t in &model.tensors {
                *ours.entry(t.ty.name().to_ascii_lowercase()).or_default() += 1;
            }
            let theirs: BTreeMap<String, u64> =
                counts.iter().map(|(k, v)| (k.to_ascii_lowercase(), v.as_u64().unwrap())).collect();
            assert_eq!(ours, theirs, "{id}: tensor types per the log");
        }
        let f = &c["flags"];
        let gpus = u(f, "gpus");
        let opts = LlamaCppOptions {
            ctx_size: u(f, "ctx"),
            batch: u(f, "b"),
            ubatch: u(f, "ub"),
            parallel: u(f, "np"),
            kv_unified: f["kv_unified"].as_bool().unwrap(),
            cache_type_k: GgmlType::parse_cache_type(f["ctk"].as_str().unwrap()).unwrap(),
            cache_type_v: GgmlType::parse_cache_type(f["ctv"].as_str().unwrap()).unwrap(),
            flash_attn: if f["fa"].as_bool().unwrap() { FlashAttn::On } else { FlashAttn::Off },
            n_gpu_layers: Some(if gpus == 0 { 0 } else { u(f, "ngl") }),
            gpus: (0..gpus).map(|i| GpuSlot { name: format!("gpu{i}"), memory_bytes: Some(16 << 30) }).collect(),
            era: match c["era"].as_str().unwrap() {
                "legacy" => GraphEra::Legacy,
                _ => GraphEra::Current,
            },
            // the rules of the log's build: its number, or (a log that
            // names none) the newest build its era allows (`build_at_most`)
            build: Some(
                c["build"]
                    .as_str()
                    .and_then(|b| b.split(|ch: char| !ch.is_ascii_digit()).next())
                    .and_then(|n| n.parse().ok())
                    .or_else(|| c["build_at_most"].as_u64())
                    .unwrap_or_else(|| panic!("{id}: no build number and no build_at_most")),
            ),
            order: match c["order"].as_str().unwrap() {
                "output_last" => OffloadOrder::OutputLast,
                _ => OffloadOrder::OutputFirst,
            },
            ..LlamaCppOptions::default()
        };
        let p = plan(&model, &opts).unwrap_or_else(|e| panic!("{id}: {e}"));
        for (key, logged) in c["expect"].as_object().unwrap() {
            let logged = logged.as_f64().unwrap();
            // llama.cpp prints MiB with two decimals: compare what it would print
            let exact = figure(&p, key);
            let ours = (exact * 100.0).round() / 100.0;
            let err = (ours - logged) / logged;
            println!("{id:<40} {key:<18} {logged:>10.2} {exact:>10.3} {:>+8.2}%", err * 100.0);
            by_field.entry(key.clone()).or_default().push(err.abs());
            all.push(err.abs());
            if err.abs() > TOLERANCE {
                failures
                    .push(format!("{id} {key}: logged {logged:.2} MiB, vramfit {ours:.2} MiB ({:+.2} %)", err * 100.0));
            }
        }
    }
    for (k, v) in &by_field {
        println!(
            "{k:<18} n={:<3} median |error| {:.2} %  max {:.2} %",
            v.len(),
            median(v.clone()) * 100.0,
            v.iter().fold(0.0f64, |a, &b| a.max(b)) * 100.0
        );
    }
    println!(
        "all figures n={} median |error| {:.2} %  max {:.2} %",
        all.len(),
        median(all.clone()) * 100.0,
        all.iter().fold(0.0f64, |a, &b| a.max(b)) * 100.0
    );
    assert!(failures.is_empty(), "off by more than 3 %:\n{}", failures.join("\n"));
}
