//! vLLM's CUDA-graph pool without a logged figure, through the binary: the
//! pool modelled from the release's captured sizes (`serving::graph_model`),
//! checked where the release keeps it — on top of `--gpu-util` up to 0.20
//! (captured after the KV pool, `Worker.compile_or_warm_up_model`,
//! vllm/v1/worker/gpu_worker.py), off the KV budget from 0.21 (PR #38284).

mod common;
use common::run;
use serde_json::Value;

#[test]
fn a_start_up_at_util_0_98_that_ooms_in_capture_does_not_fit() {
    // Llama-3.1-8B on an L40S, vLLM 0.20 (0.11+ sizes: 256 sequences and 2048 tokens on a
    // card under 70 GiB → max min(512, 512, 2048) = 512, 51 PIECEWISE + 35 FULL graphs):
    // 86 × 32 × 393,216 B + 512 × 102,400 B = 1,134,559,232 B (1.06 GiB), more than the
    // 912.4 MiB that 0.98 of the card leaves
    let args = ["estimate", "llama-3.1-8b", "--engine", "vllm@0.20", "--gpu", "l40s", "--gpu-util", "0.98"];
    let (out, _) = run(&args, 1);
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(flat.contains("DOES NOT FIT"), "{out}");
    assert!(flat.contains("1.06 GiB as modelled") && flat.contains("912.4 MiB left"), "{out}");
    // the default 0.9 leaves 10% of the card: the graphs fit
    let (out, _) = run(&["estimate", "llama-3.1-8b", "--engine", "vllm@0.20", "--gpu", "l40s"], 0);
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(!flat.contains("DOES NOT FIT"), "{out}");
    assert!(flat.contains("the 1.06 GiB modelled from the captured sizes fits there"), "{out}");
    // the engine's own figure still overrides the model
    let mut given = args.to_vec();
    given.extend(["--cuda-graph-mib", "500"]);
    let (out, _) = run(&given, 0);
    assert!(out.contains("FITS"), "{out}");
}

#[test]
fn vllm_0_21_takes_the_modelled_pool_off_the_kv_budget_and_explains_it() {
    // vLLM 0.21 on an H100 (1024 sequences, 8192 tokens): 51 PIECEWISE + 51 FULL graphs ×
    // 32 layers × 393,216 B + 512 × 102,400 B = 1,335,885,824 B
    let (out, _) = run(&["estimate", "llama-3.1-8b", "--engine", "vllm", "--gpu", "h100", "--json"], 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let line = v["per_gpu"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["label"] == "vllm CUDA graph pool")
        .unwrap_or_else(|| panic!("no graph pool line: {out}"));
    assert_eq!(line["bytes"], 1_335_885_824u64);
    let (out, _) = run(&["estimate", "llama-3.1-8b", "--engine", "vllm", "--gpu", "h100", "--explain"], 0);
    for term in ["capture sizes", "PIECEWISE sizes, FULL graphs = 51, 51", "largest captured size (tokens) = 512"] {
        assert!(out.contains(term), "{term}: {out}");
    }
}

#[test]
fn the_published_capture_figures_are_never_under_predicted() {
    // calibration/data/published/memory.jsonl, quantity engine_cuda_graph: vLLM PR #11349
    // (Llama-3.2-1B, V0, 0.21 GiB: the source of the per-layer-graph bound) and PR #5515
    // (Llama-3-70B-AWQ at TP 8, V0, 0.6172 GiB). The signed error must stay ≥ 0 (never
    // under) and under +100% (a regression that doubles the pool fails here).
    let (out, _) = run(&["calibrate", "--set", "published", "--group", "runtime", "--json"], 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let rows: Vec<&Value> =
        v["cases"].as_array().unwrap().iter().filter(|c| c["quantity"] == "engine_cuda_graph").collect();
    assert_eq!(rows.len(), 2, "{out}");
    for r in rows {
        let e = r["safety_error_pct"].as_f64().unwrap();
        assert!((0.0..100.0).contains(&e), "{}: {e:.2}%", r["id"]);
    }
}

#[test]
fn enforce_eager_captures_no_graphs() {
    // vLLM `--enforce-eager`: `capture_model` is skipped (V0 `Worker._warm_up_model`: `if not
    // self.model_config.enforce_eager`) and V1 sets `cudagraph_mode = NONE`, so no pool: the
    // 0.98-util start-up above fits, and 0.21 has no graph pool line
    let args = ["estimate", "llama-3.1-8b", "--engine", "vllm@0.20", "--gpu", "l40s", "--gpu-util", "0.98"];
    let mut eager = args.to_vec();
    eager.push("--enforce-eager");
    let (out, _) = run(&eager, 0);
    let flat = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(!flat.contains("DOES NOT FIT") && flat.contains("captures no CUDA graphs"), "{out}");
    let (out, _) =
        run(&["estimate", "llama-3.1-8b", "--engine", "vllm", "--gpu", "h100", "--enforce-eager", "--json"], 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let entries = v["per_gpu"]["entries"].as_array().unwrap();
    assert!(!entries.iter().any(|e| e["label"] == "vllm CUDA graph pool"), "{out}");
    // vLLM's flag only, and not beside a logged pool
    let (_, err) = run(&["estimate", "llama-3.1-8b", "--engine", "sglang", "--enforce-eager"], 2);
    assert!(err.contains("--enforce-eager is vLLM's flag"), "{err}");
    let (_, err) =
        run(&["estimate", "llama-3.1-8b", "--engine", "vllm", "--enforce-eager", "--cuda-graph-mib", "500"], 2);
    assert!(err.contains("drop one of them"), "{err}");
}
