//! Writes the GGUF seeds of the `ingest_gguf` corpus: small, well-formed
//! models in the layouts llama.cpp expects (dense, GQA per-layer heads,
//! sliding window, MoE, tied output, several quant types, Mamba, RWKV-6),
//! and headers that contradict their tensors (no tensors, fewer layers
//! than `block_count`, KV heads above the heads, an FFN width of 2^40, more
//! experts than the tensors hold, recurrent sizes of 2^40: refused naming
//! the key), built with the test writer (`vramfit_ingest::gguf::writer`),
//! tensor data zero-filled.
//!
//! `cargo run --manifest-path fuzz/Cargo.toml --example gguf_seeds -- fuzz/seeds/ingest_gguf`

use vramfit_ingest::gguf::writer::fixtures::{model, writer, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_llamacpp::GgmlType;

/// A one-layer recurrent model: `arch`, its keys, its layer's tensors (f32).
fn recurrent(arch: &str, keys: &[(&str, WValue)], layer: &[(&str, &[u64])]) -> GgufWriter {
    let mut w = GgufWriter::new()
        .kv("general.architecture", WValue::Str(arch.into()))
        .kv(&format!("{arch}.block_count"), WValue::U32(1))
        .kv(&format!("{arch}.context_length"), WValue::U32(4096))
        .kv(&format!("{arch}.embedding_length"), WValue::U32(16))
        .tensor("token_embd.weight", GgmlType::F16, &[16, 8])
        .tensor("output_norm.weight", GgmlType::F32, &[16]);
    for (k, v) in keys {
        w = w.kv(&format!("{arch}.{k}"), v.clone());
    }
    for (name, ne) in layer {
        w = w.tensor(&format!("blk.0.{name}"), GgmlType::F16, ne);
    }
    w
}

fn mamba(state_size: u64) -> GgufWriter {
    recurrent(
        "mamba",
        &[
            ("ssm.conv_kernel", WValue::U32(4)),
            ("ssm.inner_size", WValue::U32(32)),
            ("ssm.state_size", WValue::U64(state_size)),
            ("ssm.time_step_rank", WValue::U32(2)),
        ],
        &[
            ("attn_norm.weight", &[16]),
            ("ssm_in.weight", &[16, 64]),
            ("ssm_conv1d.weight", &[4, 32]),
            ("ssm_x.weight", &[32, 34]),
            ("ssm_dt.weight", &[2, 32]),
            ("ssm_a", &[16, 32]),
            ("ssm_d", &[32]),
            ("ssm_out.weight", &[32, 16]),
        ],
    )
}

fn rwkv6(head_size: u64) -> GgufWriter {
    recurrent(
        "rwkv6",
        &[("wkv.head_size", WValue::U64(head_size)), ("feed_forward_length", WValue::U32(56))],
        &[
            ("attn_norm.weight", &[16]),
            ("time_mix_first.weight", &[8, 2]),
            ("time_mix_key.weight", &[16, 16]),
            ("time_mix_value.weight", &[16, 16]),
            ("time_mix_output.weight", &[16, 16]),
            ("channel_mix_key.weight", &[16, 56]),
            ("channel_mix_value.weight", &[56, 16]),
        ],
    )
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "fuzz/seeds/ingest_gguf".into());
    std::fs::create_dir_all(&dir).expect("seed folder");
    let base = Shape::llama(2, 64, 4, 2, 128, 32);
    let mut shapes = vec![("dense_q4k", base.clone())];
    shapes.push(("q8_0_tied", Shape { matrix: GgmlType::Q8_0, embd: GgmlType::F16, tied: true, ..base.clone() }));
    shapes.push(("iq4_nl", Shape { matrix: GgmlType::Iq4Nl, ..base.clone() }));
    shapes.push(("mxfp4_moe", Shape { matrix: GgmlType::Mxfp4, experts: Some((4, 2, 64)), ..base.clone() }));
    shapes.push((
        "gemma2_swa",
        Shape { arch: "gemma2", sliding_window: Some(128), n_layer: 4, ..Shape::llama(4, 64, 4, 2, 128, 32) },
    ));
    shapes.push(("per_layer_kv", Shape { kv_heads_per_layer: Some(vec![2, 0]), ..base.clone() }));
    let mut files: Vec<(&str, Vec<u8>)> = shapes.iter().map(|(name, s)| (*name, model(s))).collect();
    // recurrent models, and headers that contradict their tensors (issue 25)
    // f16 throughout and small: these parse, so the model checks run on them
    let base = Shape { matrix: GgmlType::F16, embd: GgmlType::F16, ..Shape::llama(2, 16, 2, 1, 32, 8) };
    let moe = Shape { experts: Some((4, 2, 16)), ..base.clone() };
    let contradictions = [
        ("dense_f16", writer(&base)),
        ("moe_f16", writer(&moe)),
        ("mamba", mamba(16)),
        ("rwkv6", rwkv6(8)),
        ("no_tensors", writer(&base).retain_tensors(|_| false)),
        ("block_count_past_tensors", writer(&base).set("llama.block_count", WValue::U32(8))),
        ("kv_heads_over_heads", writer(&base).set("llama.attention.head_count_kv", WValue::U32(8))),
        ("kv_heads_against_attn_k", writer(&base).set("llama.attention.head_count_kv", WValue::U32(2))),
        ("ffn_2_40", writer(&base).set("llama.feed_forward_length", WValue::U64(1 << 40))),
        ("experts_over_tensors", writer(&moe).set("llama.expert_count", WValue::U32(1000))),
        ("experts_used_over_count", writer(&moe).set("llama.expert_used_count", WValue::U32(5))),
        ("mamba_state_2_40", mamba(1 << 40)),
        ("rwkv6_head_2_40", rwkv6(1 << 40)),
    ];
    files.extend(contradictions.iter().map(|(name, w)| (*name, w.to_bytes())));
    for (name, bytes) in files {
        let path = std::path::Path::new(&dir).join(format!("{name}.gguf"));
        std::fs::write(&path, bytes).expect("write seed");
        println!("{}", path.display());
    }
}
