//! vLLM's CUDA-graph pool as `serving::graph_model` counts it, by release:
//! the captured sizes (vllm/worker/model_runner.py for V0,
//! `VllmConfig._set_cudagraph_sizes` in vllm/config/vllm.py for V1 0.11+),
//! one shared pool holding the largest size's activations (vllm-project/vllm#7894),
//! and [`GRAPH_BYTES_PER_LAYER_GRAPH`] per graph per layer.

use vramfit_core::serving::graph_model;
use vramfit_core::workload::{EngineChoice, GraphSizes, InferenceSetup, GRAPH_BYTES_PER_LAYER_GRAPH};
use vramfit_core::ModelSpec;

fn vllm(version: &str) -> InferenceSetup {
    let choice: EngineChoice = format!("vllm@{version}").parse().unwrap();
    InferenceSetup { engine: choice.engine, engine_version: choice.version, ..InferenceSetup::default() }
}

fn pool(spec: &ModelSpec, version: &str, tp: u64, tokens: u64, seqs: u64) -> vramfit_core::serving::GraphModel {
    let setup = vllm(version);
    let d = setup.serving().unwrap();
    graph_model(spec, &setup, &d, tp, 1, tokens, seqs).unwrap().unwrap()
}

#[test]
fn v0_captures_one_full_graph_per_batch_size_up_to_max_num_seqs() {
    // Llama-3.2-1B (16 layers, hidden 2048, MLP 8192): V0's `_BATCH_SIZES_TO_CAPTURE` = [1, 2, 4] +
    // 8·1..8·32, all 35 up to the default 256 sequences (vllm-project/vllm#11349 logs "35/35").
    // 35 × 16 × 393,216 = 220,200,960 B + 256 × (2 × 2048 + 3 × 8192) × 2 B = 14,680,064 B
    let spec = ModelSpec::llama_like("llama-3.2-1b", 2048, 16, 32, 8, 8192, 128256);
    let m = pool(&spec, "0.6", 1, 8192, 256);
    assert_eq!((m.sizes, m.piecewise_sizes, m.full_graphs, m.largest), (GraphSizes::V0Full, 0, 35, 256));
    assert_eq!(m.bytes, 234_881_024);
    // vLLM logs "Graph capturing finished in 14 secs, took 0.21 GiB" (225,485,783 B): +4.2%
    let logged = (0.21 * (1u64 << 30) as f64) as u64;
    assert!(m.bytes >= logged && m.bytes < logged + logged / 20, "{} vs {logged}", m.bytes);
    // 20 sequences round up to the captured 24: sizes 1, 2, 4, 8, 16, 24
    let few = pool(&spec, "0.6", 1, 8192, 20);
    assert_eq!((few.full_graphs, few.largest), (6, 24));
    assert_eq!(few.bytes, 6 * 16 * GRAPH_BYTES_PER_LAYER_GRAPH + 24 * 57_344);
}

#[test]
fn v1_before_0_11_captures_piecewise_graphs_up_to_512_tokens() {
    // vLLM 0.8 – 0.10: [1, 2, 4] + range(8, 513, 8) = 67 sizes, none above
    // max_num_batched_tokens ("By default, vLLM captures 67 graphs", vllm-project/vllm#20098)
    let spec = ModelSpec::llama_like("llama-3-8b", 4096, 32, 32, 8, 14336, 128256);
    let m = pool(&spec, "0.8", 1, 8192, 1024);
    assert_eq!((m.piecewise_sizes, m.full_graphs, m.largest), (67, 0, 512));
    // 67 × 32 × 393,216 + 512 × 102,400
    assert_eq!(m.bytes, 67 * 32 * 393_216 + 512 * 102_400);
    // a 256-token batch budget drops the sizes above it: 3 + 32 = 35
    let small = pool(&spec, "0.8", 1, 256, 1024);
    assert_eq!((small.piecewise_sizes, small.largest), (35, 256));
}

#[test]
fn v1_from_0_11_adds_full_decode_graphs_and_the_coarser_grid() {
    // max_cudagraph_capture_size = min(2 × 256, 512, 2048) = 512: 3 + 31 + 17 = 51 PIECEWISE
    // sizes; the 35 of them ≤ 256 sequences are FULL decode graphs too. At TP 2 the MLP's
    // columns halve: 512 × (2 × 4096 + 3 × 7168) × 2 B = 30,408,704 B
    let spec = ModelSpec::llama_like("llama-3-8b", 4096, 32, 32, 8, 14336, 128256);
    let m = pool(&spec, "0.20", 2, 2048, 256);
    assert_eq!((m.sizes, m.piecewise_sizes, m.full_graphs, m.largest), (GraphSizes::V1FullAndPiecewise, 51, 35, 512));
    assert_eq!(m.bytes, 86 * 32 * 393_216 + 30_408_704);
    // 8 sequences: max min(16, 512, 2048) = 16, sizes 1, 2, 4, 8, 16, all FULL too
    let few = pool(&spec, "0.21", 1, 2048, 8);
    assert_eq!((few.piecewise_sizes, few.full_graphs, few.largest), (5, 4, 16));
}

#[test]
fn the_row_spanning_0_11_takes_the_larger_pool() {
    // vllm@0.9 covers 0.9 – 0.19, across the change in 0.11: at 256 sequences and 2048 tokens
    // the 0.11+ set (51 + 35 = 86 graphs) is larger than 0.10's 67 sizes, and it is taken
    let spec = ModelSpec::llama_like("llama-3-8b", 4096, 32, 32, 8, 14336, 128256);
    let m = pool(&spec, "0.9", 1, 2048, 256);
    assert_eq!((m.sizes, m.piecewise_sizes + m.full_graphs), (GraphSizes::V1FullAndPiecewise, 86));
    // at 8 sequences 0.10's 67 sizes are the larger
    let few = pool(&spec, "0.9", 1, 2048, 8);
    assert_eq!((few.sizes, few.piecewise_sizes), (GraphSizes::V1Piecewise512, 67));
}

#[test]
fn no_graphs_before_0_2_6_and_sglang_not_modelled() {
    let spec = ModelSpec::llama_like("llama-3-8b", 4096, 32, 32, 8, 14336, 128256);
    let setup = vllm("0.2");
    assert_eq!(graph_model(&spec, &setup, &setup.serving().unwrap(), 1, 1, 2048, 256).unwrap(), None);
    let sg: EngineChoice = "sglang".parse().unwrap();
    let setup = InferenceSetup { engine: sg.engine, engine_version: sg.version, ..InferenceSetup::default() };
    assert_eq!(graph_model(&spec, &setup, &setup.serving().unwrap(), 1, 1, 2048, 256).unwrap(), None);
}
