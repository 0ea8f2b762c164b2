//! The vocabulary users already type (issue 24): vLLM's, DeepSpeed's and
//! llama.cpp's own flag names where they mean what a vramfit flag means,
//! and token lengths written `32k` / `128K` (k = 1024 tokens), through the
//! real binary.

mod common;
use common::{json, run};
use serde_json::Value;

fn estimate(extra: &[&str], code: i32) -> Value {
    let mut a = vec!["estimate", "llama-3.1-8b", "--json"];
    a.extend(extra);
    json(&a, code)
}

#[test]
fn vllm_flag_names_are_the_same_estimate() {
    let ours = estimate(
        &[
            "--engine",
            "vllm",
            "--gpu",
            "h100",
            "--context",
            "131072",
            "--tp",
            "2",
            "--pp",
            "1",
            "--gpus",
            "2",
            "--gpu-util",
            "0.85",
            "--kv-dtype",
            "fp8",
            "--max-num-seqs",
            "16",
            "--max-num-batched-tokens",
            "8192",
            "--dtype",
            "int4",
        ],
        0,
    );
    let vllm = estimate(
        &[
            "--engine",
            "vllm",
            "--gpu",
            "h100",
            "--max-model-len",
            "128k",
            "--tensor-parallel-size",
            "2",
            "--pipeline-parallel-size",
            "1",
            "--num-gpus",
            "2",
            "--gpu-memory-utilization",
            "0.85",
            "--kv-cache-dtype",
            "fp8_e4m3",
            "--max-num-seqs",
            "16",
            "--max-num-batched-tokens",
            "8k",
            "--quantization",
            "awq",
        ],
        0,
    );
    assert_eq!(vllm, ours);
    let w = &ours["workload"];
    assert_eq!((w["seq"].as_u64(), w["tp"].as_u64(), w["kv_dtype"].as_str()), (Some(131_072), Some(2), Some("fp8")));
    // vLLM's underscores (its parser takes both) and its -tp/-pp
    let under = estimate(
        &[
            "--engine",
            "vllm",
            "--gpu",
            "h100",
            "--max_model_len=128K",
            "-tp",
            "2",
            "-pp",
            "1",
            "--num_gpus",
            "2",
            "--gpu_memory_utilization",
            "0.85",
            "--kv_cache_dtype",
            "fp8",
            "--max_num_seqs",
            "16",
            "--max_num_batched_tokens",
            "8192",
            "--quant",
            "int4",
        ],
        0,
    );
    assert_eq!(under, ours);
    // vLLM's --dtype auto is the default: the checkpoint's own, else bf16
    assert_eq!(estimate(&["--dtype", "auto"], 0), estimate(&[], 0));
    let train = |extra: &[&str]| {
        let mut a = vec!["estimate", "llama-2-7b", "--task", "train", "--json"];
        a.extend(extra);
        json(&a, 0)
    };
    assert_eq!(train(&["--dtype", "AUTO"]), train(&[]));
}

#[test]
fn token_lengths_take_k_as_1024() {
    let plain = estimate(&["--context", "32768"], 0);
    for v in ["32k", "32K", "32768", "0.03125M"] {
        assert_eq!(estimate(&["--context", v], 0), plain, "--context {v}");
    }
    assert_eq!(plain["workload"]["seq"], 32_768);
    for alias in ["--seq", "--ctx", "--max-model-len"] {
        assert_eq!(estimate(&[alias, "32k"], 0), plain, "{alias}");
    }
    // what was 'invalid digit found in string' names the flag and the convention
    let (_, e) = run(&["estimate", "llama-3.1-8b", "--context", "128x"], 2);
    assert!(e.contains("'--context <TOKENS>'") && e.contains("unknown suffix 'x'") && e.contains("k = 1024"), "{e}");
    let (_, e) = run(&["estimate", "llama-3.1-8b", "--max-num-batched-tokens", "8GiB"], 2);
    assert!(e.contains("--max-num-batched-tokens") && e.contains("not a number of tokens"), "{e}");
    // the help states it
    let (out, _) = run(&["estimate", "--help"], 0);
    assert!(out.contains("k = 1024") && out.contains("--max-model-len"), "{out}");
}

#[test]
fn plan_and_diagnose_share_the_names() {
    let ours = json(&["plan", "llama-3.1-8b", "--json", "--context", "8192", "--kv-dtype", "fp8", "--top", "3"], 0);
    let theirs =
        json(&["plan", "llama-3.1-8b", "--json", "--max-model-len", "8k", "--kv-cache-dtype", "fp8", "--top", "3"], 0);
    assert_eq!(theirs, ours);
    // diagnose sizes the job of an OOM with the same flags
    let oom = format!("{}/../diagnose/tests/fixtures/oom/pt22_vsmtrans3_backward.txt", env!("CARGO_MANIFEST_DIR"));
    let diagnose = |extra: &[&str]| {
        let mut a = vec!["diagnose", oom.as_str(), "--model", "llama-2-7b", "--task", "train", "--json"];
        a.extend(extra);
        json(&a, 0)
    };
    assert_eq!(diagnose(&["--seq", "2k", "--num_gpus", "2"]), diagnose(&["--context", "2048", "--gpus", "2"]));
    // DeepSpeed's --num_gpus for a training job
    let ours = json(&["estimate", "llama-2-7b", "--task", "train", "--gpus", "4", "--zero", "3", "--json"], 0);
    let ds = json(&["estimate", "llama-2-7b", "--task", "train", "--num_gpus", "4", "--zero", "3", "--json"], 0);
    assert_eq!(ds, ours);
}

#[test]
fn no_llama_cpp_flag_is_suggested_for_another_model() {
    // what clap used to answer with --tensor-split, --list-gpus,
    // --quantize-lm-head, --ctx-size and `use -- --max-model-len`
    for (flag, value) in [
        ("--tensor-parallel-size", "2"),
        ("--num-gpus", "2"),
        ("--quant", "int4"),
        ("--ctx", "8k"),
        ("--max-model-len", "8k"),
    ] {
        let (out, e) = run(&["estimate", "llama-3.1-8b", flag, value], 0);
        assert!(!out.is_empty() && !e.contains("tip:"), "{flag}: {e}");
    }
    // a near miss is answered with a flag of the model given: never llama.cpp's for
    // a transformers model, never a refused workload flag for a GGUF
    let tip = |args: &[&str]| {
        let (_, e) = run(args, 2);
        e.lines().find_map(|l| l.trim().strip_prefix("tip: a similar argument exists: ")).map(str::to_string)
    };
    for (typo, want) in [
        ("--ctxsize", Some("'--context'")),
        ("--batch-sz", Some("'--batch'")),
        ("--cache-dtype", Some("'--kv-dtype'")),
        ("--ngpu-layers", None),
        ("--context-size", Some("'--context'")),
    ] {
        assert_eq!(tip(&["estimate", "llama-3.1-8b", typo, "2"]).as_deref(), want, "{typo}");
    }
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("flag-vocabulary");
    std::fs::create_dir_all(&dir).unwrap();
    let gguf = dir.join("tiny.gguf");
    let shape = vramfit_ingest::gguf::writer::fixtures::Shape::llama(2, 256, 4, 2, 512, 1000);
    vramfit_ingest::gguf::writer::fixtures::write_model(&shape, &gguf).unwrap();
    let g = gguf.to_str().unwrap();
    for (typo, want) in [
        ("--kv-cache-type", Some("'--cache-type-k'")),
        ("--tensor-parallel", Some("'--tensor-split'")),
        ("--batchh", Some("'--batch-size'")),
        ("--gpu-utilization", None),
        ("--context-size", Some("'--context'")),
        ("--ctxsize", Some("'--ctx-size'")),
    ] {
        assert_eq!(tip(&["estimate", g, typo, "2"]).as_deref(), want, "{typo}");
    }
    // --context is -c there
    assert_eq!(
        json(&["estimate", g, "--context", "1k", "--json"], 0),
        json(&["estimate", g, "-c", "1024", "--json"], 0)
    );
    // a llama.cpp flag on a transformers model names this model's flag
    for (flag, instead) in [("-c", "--context"), ("--tensor-split", "--tp or --gpus"), ("-ctk", "--kv-dtype")] {
        let (_, e) = run(&["estimate", "llama-3.1-8b", flag, if flag == "--tensor-split" { "1,1" } else { "8" }], 2);
        assert!(
            e.contains("GGUF files (llama.cpp) only") && e.contains(&format!("{instead} instead of")),
            "{flag}: {e}"
        );
    }
}

#[test]
fn a_mig_service_context_is_a_token_length() {
    let mig = |ctx: &str| {
        json(&["mig", "plan", "--gpu", "a100-80gb", "--service", &format!("chat=llama-2-7b:ctx={ctx}"), "--json"], 0)
    };
    let k = mig("4k");
    assert_eq!(k, mig("4096"));
    assert!(k["services"][0]["sized_by"].as_str().unwrap().contains("ctx 4096"), "{}", k["services"][0]);
}
