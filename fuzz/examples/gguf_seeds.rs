//! Writes the GGUF seeds of the `ingest_gguf` corpus: small, well-formed
//! models in the layouts llama.cpp expects (dense, GQA per-layer heads,
//! sliding window, MoE, tied output, several quant types), built with the
//! test writer (`vramfit_ingest::gguf::writer`), tensor data zero-filled.
//!
//! `cargo run --manifest-path fuzz/Cargo.toml --example gguf_seeds -- fuzz/seeds/ingest_gguf`

use vramfit_ingest::gguf::writer::fixtures::{model, Shape};
use vramfit_llamacpp::GgmlType;

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
    for (name, s) in shapes {
        let path = std::path::Path::new(&dir).join(format!("{name}.gguf"));
        std::fs::write(&path, model(&s)).expect("write seed");
        println!("{}", path.display());
    }
}
