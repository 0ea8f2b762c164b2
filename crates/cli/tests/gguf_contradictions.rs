//! `vramfit estimate <file.gguf>` on headers that contradict their tensors
//! (issue 25 item 8): exit 2, the message names the file and the metadata
//! key, as llama.cpp refuses the file at load. The ingest tests
//! (`crates/ingest/tests/gguf_contradictions.rs`) cover every rule; these
//! check the front end's exit code and message.

mod common;
use common::run;
use std::path::PathBuf;
use vramfit_ingest::gguf::writer::fixtures::{writer, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};

fn file(name: &str, w: &GgufWriter) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gguf-contradictions");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    w.write_sparse(&p).unwrap();
    p
}

fn refused(name: &str, w: &GgufWriter, key: &str) -> String {
    let p = file(name, w);
    let (_, err) = run(&["estimate", p.to_str().unwrap(), "--json"], 2);
    assert!(err.contains(p.to_str().unwrap()), "names the file: {err}");
    assert!(err.contains(&format!("'{key}'")), "names {key}: {err}");
    err
}

fn llama() -> Shape {
    Shape::llama(4, 256, 8, 2, 512, 64)
}

#[test]
fn contradicting_headers_exit_2_naming_the_file_and_the_key() {
    let err = refused("no-tensors.gguf", &writer(&llama()).retain_tensors(|_| false), "tensor_count");
    assert!(err.contains("missing tensor"), "{err}");
    refused("short.gguf", &writer(&llama()).set("llama.block_count", WValue::U32(32)), "llama.block_count");
    refused(
        "kv-heads.gguf",
        &writer(&llama()).set("llama.attention.head_count_kv", WValue::U32(128)),
        "llama.attention.head_count_kv",
    );
    let err = refused(
        "ffn.gguf",
        &writer(&llama()).set("llama.feed_forward_length", WValue::U64(1 << 40)),
        "llama.feed_forward_length",
    );
    assert!(err.contains("wrong shape"), "{err}");
    let moe = writer(&Shape { experts: Some((8, 2, 256)), ..llama() });
    refused("experts.gguf", &moe.set("llama.expert_count", WValue::U32(64)), "llama.expert_count");
}

#[test]
fn a_recurrent_state_of_2_40_names_the_file() {
    let arch = "mamba";
    let mut w = GgufWriter::new()
        .kv("general.architecture", WValue::Str(arch.into()))
        .kv("mamba.block_count", WValue::U32(1))
        .kv("mamba.context_length", WValue::U32(4096))
        .kv("mamba.embedding_length", WValue::U32(256))
        .kv("mamba.ssm.conv_kernel", WValue::U32(4))
        .kv("mamba.ssm.inner_size", WValue::U32(512))
        .kv("mamba.ssm.state_size", WValue::U64(1 << 40))
        .kv("mamba.ssm.time_step_rank", WValue::U32(16))
        .tensor("token_embd.weight", vramfit_llamacpp::GgmlType::F32, &[256, 64]);
    for (name, ne) in [
        ("ssm_in.weight", &[256u64, 1024][..]),
        ("ssm_conv1d.weight", &[4, 512]),
        ("ssm_a", &[16, 512]),
        ("ssm_out.weight", &[512, 256]),
    ] {
        w = w.tensor(&format!("blk.0.{name}"), vramfit_llamacpp::GgmlType::F32, ne);
    }
    refused("state.gguf", &w, "mamba.ssm.state_size");
    // so large that the state overflows 64 bits before any tensor is looked at
    let w = w.set("mamba.ssm.inner_size", WValue::U64(1 << 40));
    refused("state-overflow.gguf", &w, "mamba.ssm.state_size");
}
