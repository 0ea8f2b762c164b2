//! `vramfit diagnose` end to end: every input kind, JSON schema, bad input
//! (exit 2 "not recognised"), a 1 GiB file, a hostile pickle, --svg, --model.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;

fn fx(rel: &str) -> String {
    format!("{}/../diagnose/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn vramfit() -> Command {
    Command::cargo_bin("vramfit").unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vramfit-diagnose-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn json(args: &[&str]) -> Value {
    let out = vramfit().arg("diagnose").args(args).arg("--json").assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn oom_log_text_and_json() {
    vramfit()
        .args(["diagnose", &fx("oom/pt22_cads4_shortage.txt")])
        .assert()
        .success()
        .stdout(predicate::str::contains("genuine-shortage: 716.80 MiB more than the card can give"))
        .stdout(predicate::str::contains("12.73 GiB free + 9.35 GiB cached = 22.08 GiB < 22.78 GiB"));
    let j = json(&[&fx("oom/composed_multi_rank_log.txt")]);
    assert_eq!(j["schema"], 1);
    assert_eq!(j["command"], "diagnose");
    assert_eq!(j["kind"], "oom");
    let ooms = j["diagnosis"]["ooms"].as_array().unwrap();
    assert_eq!(ooms.len(), 2);
    assert_eq!(ooms[0]["event"]["rank"], 1);
    assert_eq!(ooms[0]["event"]["occurrences"], 2);
    // relabelled by issue 14 §1 (was "fragmentation"): the 1.59 GiB cache is smaller than the
    // 3.39 GiB request and covers it only with the free 2.40 GiB, leaving 0.6 GiB of 79.32 GiB:
    // the card is full, fragmentation only contributes
    assert_eq!(ooms[0]["verdict"]["class"], "genuine-shortage");
    assert_eq!(ooms[0]["verdict"]["main_cause"]["class"], "genuine-shortage");
    assert_eq!(ooms[0]["verdict"]["contributors"][0]["class"], "fragmentation");
    assert_eq!(ooms[0]["verdict"]["contributors"][0]["bytes"].as_u64(), Some(1_707_249_500));
    let t = &ooms[0]["event"]["message"];
    assert_eq!(t["framework"], "torch");
    // 3.39 GiB = 339 × 1073741824 / 100 = 3639984783.36 → 3639984783 bytes, an integer
    assert_eq!(t["requested"]["bytes"].as_u64(), Some(3_639_984_783));
    assert_eq!(t["requested"]["text"], "3.39 GiB");
    assert_eq!(ooms[0]["verdict"]["fixes"][0]["action"], "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
    assert!(j["estimate"].is_null());
}

/// Messages without figures are diagnosed (exit 0), never "not recognised" (issue 14 §1).
#[test]
fn messages_without_figures_exit_zero() {
    for (f, class) in [
        ("oom/thc_ncrfpp121_backward.txt", "unknown"),
        ("oom/thc_neuralmotifs58.txt", "unknown"),
        ("oom/cuda_tinycudann387.txt", "unknown"),
        ("oom/tf_tf12237_driver_oom.txt", "unknown"),
        ("oom/vllm_qwen12_budget.txt", "budget"),
        ("oom/ds_easycontext11_cache_flushes.txt", "unknown"),
    ] {
        let j = json(&[&fx(f)]);
        assert_eq!(j["diagnosis"]["ooms"][0]["verdict"]["class"], class, "{f}");
        assert!(!j["diagnosis"]["ooms"][0]["verdict"]["fixes"].as_array().unwrap().is_empty(), "{f}");
    }
}

#[test]
fn other_frameworks_are_recognised() {
    for (f, class) in [
        ("oom/xla_afprofile8_stats.txt", "genuine-shortage"),
        // relabelled by issue 14 §1 (was "genuine-shortage"): TensorFlow's shape-only OOM has no figures
        ("oom/tf_keras9643_gpu1.txt", "unknown"),
        ("oom/vllm_v1_tpu223_estimated.txt", "genuine-shortage"),
    ] {
        let j = json(&[&fx(f)]);
        assert_eq!(j["diagnosis"]["ooms"][0]["verdict"]["class"], class, "{f}");
    }
    vramfit()
        .args(["diagnose", &fx("oom/vllm_v1_tpu223_estimated.txt")])
        .assert()
        .success()
        .stdout(predicate::str::contains("--max-model-len 5632"));
}

/// Issue 27 §1: the 2025–26 message forms are diagnosed (exit 0), each with
/// the figures that decided it and its runner-up in the JSON.
#[test]
fn the_2025_26_forms_are_diagnosed() {
    for (f, class, runner_up) in [
        ("oom/vllm_startup_pytorch175666_budget.txt", "budget", Some("other-process")),
        ("oom/vllm_startup_omni276_other.txt", "other-process", Some("budget")),
        ("oom/async_comfyui4852_cut.txt", "unknown", None),
        ("oom/async_chattts9_pool.txt", "fragmentation", Some("other-process")),
        ("oom/cudadriver_unsloth2401_jetson.txt", "unknown", None),
        ("oom/bfc_jax27354_tib.txt", "request-exceeds-card", None),
        ("oom/ggml_llamacpp16725_rocm_compute.txt", "genuine-shortage", Some("other-process")),
        ("oom/pt22_club3090_58_title_cut.txt", "genuine-shortage", Some("fragmentation")),
    ] {
        let j = json(&[&fx(f)]);
        let v = &j["diagnosis"]["ooms"][0]["verdict"];
        assert_eq!(v["class"], class, "{f}");
        assert_eq!(v["runner_up"]["class"].as_str(), runner_up, "{f}");
        if class != "unknown" {
            assert!(!v["decided_by"].as_array().unwrap().is_empty(), "{f}: {v}");
        }
    }
    // a message cut after its free figure: the missing figures named, whether they matter said
    let j = json(&[&fx("oom/pt22_club3090_58_title_cut.txt")]);
    let o = &j["diagnosis"]["ooms"][0];
    assert_eq!(o["event"]["message"]["framework"], "torch_partial");
    assert_eq!(o["event"]["message"]["free"]["text"], "56.88 MiB");
    let missing: Vec<&str> =
        o["verdict"]["missing"].as_array().unwrap().iter().map(|m| m["figure"].as_str().unwrap()).collect();
    assert_eq!(missing, ["allocated", "unallocated"]);
    assert_eq!(o["verdict"]["missing"][1]["otherwise"]["class"], "fragmentation");
    vramfit()
        .args(["diagnose", &fx("oom/vllm_startup_pytorch175666_budget.txt")])
        .assert()
        .success()
        .stdout(predicate::str::contains("--gpu-memory-utilization 0.89"))
        .stdout(predicate::str::contains("runner-up: other-process"))
        .stdout(predicate::str::contains("decided by: shortfall 71.7 MiB"));
}

/// Issue 27 §1: a llama.cpp buffer failure beside its GGUF model: the
/// estimator's largest -ngl and context on the failing device. The log is
/// constructed (llama.cpp's line formats, this test's figures) for a
/// Llama-3-8B-shaped Q4_K file written by the test.
#[test]
fn ggml_failure_beside_its_gguf_model() {
    use vramfit_ingest::gguf::writer::fixtures::{write_model, Shape};
    let mut shape = Shape::llama(32, 4096, 32, 8, 14336, 128256);
    shape.matrix = vramfit_llamacpp::GgmlType::Q4K;
    shape.ctx = 131072;
    let model = tmp("llama8b-q4k-diag.gguf");
    write_model(&shape, &model).unwrap();
    let log = tmp("llama-server.log");
    std::fs::write(
        &log,
        "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 4060) - 7700 MiB free
         load_tensors: offloaded 33/33 layers to GPU
         load_tensors:        CUDA0 model buffer size =  4403.49 MiB
         llama_context: n_ctx         = 131072
         llama_context: n_ubatch      = 512
         ggml_backend_cuda_buffer_type_alloc_buffer: allocating 16384.00 MiB on device 0: cudaMalloc failed: out of memory
         llama_kv_cache_init: failed to allocate buffer for kv cache
",
    )
    .unwrap();
    let j = json(&[log.to_str().unwrap()]);
    let v = &j["diagnosis"]["ooms"][0]["verdict"];
    assert_eq!(v["class"], "genuine-shortage");
    // 16 GiB of KV for 131072 cells: 128 KiB a token; 7700 MiB − 4403.49 MiB model − 1 GiB leaves 18,176 tokens
    assert_eq!(v["fixes"][0]["action"], "-c 18176", "{v}");
    let j = json(&[log.to_str().unwrap(), "--model", model.to_str().unwrap()]);
    let g = &j["gguf_fit"];
    assert_eq!(g["memory_bytes"].as_u64(), Some(7700 << 20));
    assert_eq!(g["n_ctx"], 131072);
    assert_eq!(g["at_gpu_layers"], 33);
    let ctx = g["max_context"].as_u64().unwrap();
    assert!(ctx.is_multiple_of(256) && ctx > 8192 && ctx < 131072, "{g}");
    assert!(g["max_gpu_layers"].as_u64().unwrap() < 33, "{g}");
    // without a free figure or --gpu there is nothing to fit against
    std::fs::write(&log, "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 16384.00 MiB on device 0: cudaMalloc failed: out of memory
llama_kv_cache_init: failed to allocate buffer for kv cache
").unwrap();
    vramfit()
        .args(["diagnose", log.to_str().unwrap(), "--model", model.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("give the card with --gpu"));
}

#[test]
fn stdin_and_forced_kind() {
    let text = std::fs::read_to_string(fx("oom/pt21_capacty_neurolens2.txt")).unwrap();
    vramfit()
        .args(["diagnose", "-"])
        .write_stdin(text.clone())
        .assert()
        .success()
        .stdout(predicate::str::contains("request-exceeds-card"));
    // forcing a kind the text is not
    vramfit()
        .args(["diagnose", "-", "--kind", "summary"])
        .write_stdin(text)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not recognised: no torch.cuda.memory_summary() table found"));
}

#[test]
fn memory_summary() {
    let j = json(&[&fx("memory_summary/01.raw.txt")]);
    assert_eq!(j["kind"], "summary");
    assert_eq!(j["diagnosis"]["verdict"]["class"], "genuine-shortage");
    assert_eq!(j["diagnosis"]["summary"]["cuda_ooms"], 1);
}

#[test]
fn snapshot_with_svg() {
    let svg = tmp("t.svg");
    let j = json(&[&fx("snapshot/snapshot_shared.pickle"), "--svg", svg.to_str().unwrap()]);
    assert_eq!(j["kind"], "snapshot");
    let d = &j["diagnosis"]["report"]["devices"][0];
    assert_eq!(d["reserved_bytes"], 22 * 1024 * 1024);
    assert_eq!(d["peak"]["allocated_bytes"], 18 * 1024 * 1024);
    assert_eq!(d["groups"][0]["label"], "forward of train");
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.starts_with("<svg") && s.contains("polyline"));
    // --svg on a non-snapshot is refused
    vramfit()
        .args(["diagnose", &fx("oom/pt22_cads4_shortage.txt"), "--svg", svg.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("only a memory snapshot has a timeline"));
}

#[test]
fn hostile_pickle_runs_nothing() {
    let marker = std::path::Path::new("/tmp/vramfit_pickle_pwned_marker");
    let _ = std::fs::remove_file(marker);
    vramfit()
        .args(["diagnose", &fx("snapshot/hostile_reduce.pickle")])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("refused, nothing was run"));
    assert!(!marker.exists());
}

/// Issue 25 §3: a snapshot whose `segments` list contains itself (after a real
/// 1 GiB segment) exited 0 with an empty report; it is refused, exit 2, naming
/// the field, and nothing is printed on stdout as if it were a report.
#[test]
fn snapshot_reference_cycle_exits_2_naming_the_field() {
    vramfit()
        .args(["diagnose", &fx("snapshot/cycle_segments.pickle")])
        .assert()
        .code(2)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("cycle_segments.pickle"))
        .stderr(predicate::str::contains("the `segments` list contains itself (a reference cycle)"));
    vramfit()
        .args(["diagnose", &fx("snapshot/cycle_root.pickle"), "--json"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("`segments` is the dict that holds it (a reference cycle)"));
}

#[test]
fn script_lint() {
    vramfit()
        .args(["diagnose", &fx("scripts/train_bad.py")])
        .assert()
        .success()
        .stdout(predicate::str::contains("10 memory findings"))
        .stdout(predicate::str::contains("line 32:9 accumulated-loss"));
    let j = json(&[&fx("scripts/train_good.py")]);
    assert_eq!(j["kind"], "script");
    assert_eq!(j["diagnosis"]["report"]["findings"].as_array().unwrap().len(), 0);
}

#[test]
fn garbage_binary_and_empty_are_not_recognised() {
    let garbage = tmp("garbage.txt");
    std::fs::write(&garbage, "hello world\nthis is not a log of anything\n").unwrap();
    let binary = tmp("binary.bin");
    std::fs::write(&binary, (0u8..=255).cycle().take(10_000).collect::<Vec<u8>>()).unwrap();
    let empty = tmp("empty.txt");
    std::fs::write(&empty, "").unwrap();
    for (p, why) in [(&garbage, "no OOM message"), (&binary, "binary data"), (&empty, "empty")] {
        vramfit()
            .args(["diagnose", p.to_str().unwrap()])
            .assert()
            .code(2)
            .stdout(predicate::str::is_empty())
            .stderr(predicate::str::contains("not recognised").and(predicate::str::contains(why)));
    }
    vramfit()
        .args(["diagnose", "/nonexistent/file.log"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read"));
}

#[test]
fn one_gib_files_are_not_loaded_whole() {
    // sparse 1 GiB of zeros: binary, refused after reading at most 32 MiB
    let zeros = tmp("zeros.bin");
    let f = std::fs::File::create(&zeros).unwrap();
    f.set_len(1 << 30).unwrap();
    vramfit()
        .args(["diagnose", zeros.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not recognised"));
    // 1 GiB "log": text at the start, a hole, the OOM at the very end
    let log = tmp("big.log");
    let mut f = std::fs::File::create(&log).unwrap();
    f.write_all("INFO step 1 loss 2.3\n".repeat(4000).as_bytes()).unwrap();
    let msg = std::fs::read(fx("oom/pt22_cads4_shortage.txt")).unwrap();
    f.seek(SeekFrom::Start((1 << 30) - msg.len() as u64)).unwrap();
    f.write_all(&msg).unwrap();
    drop(f);
    let j = json(&[log.to_str().unwrap()]);
    assert_eq!(j["input"]["size_bytes"], 1u64 << 30);
    assert_eq!(j["input"]["skipped_bytes"], (1u64 << 30) - (32 << 20));
    assert_eq!(j["input"]["read_bytes"], (32u64 << 20) + 1);
    assert_eq!(j["diagnosis"]["ooms"][0]["verdict"]["class"], "genuine-shortage");
    let _ = std::fs::remove_file(&zeros);
    let _ = std::fs::remove_file(&log);
}

#[test]
fn estimate_beside_the_failure() {
    let j = json(&[
        &fx("oom/pt22_vsmtrans3_backward.txt"),
        "--model",
        "llama-2-7b",
        "--task",
        "train",
        "--batch",
        "4",
        "--seq",
        "2048",
    ]);
    let e = &j["estimate"];
    // the card comes from the message: 15.70 GiB = 1570 × 1073741824 / 100 = 16857746636.8 → 16857746637
    assert_eq!(e["card_bytes"].as_u64(), Some(16_857_746_637));
    assert!(e["estimate_bytes"].as_u64().unwrap() > e["card_bytes"].as_u64().unwrap());
    let cats = e["categories"].as_array().unwrap();
    let max = cats
        .iter()
        .filter(|c| c["category"] != "margin" && c["category"] != "runtime")
        .map(|c| c["bytes"].as_u64().unwrap())
        .max()
        .unwrap();
    let culprit = cats.iter().find(|c| c["category"] == e["culprit"]).unwrap();
    assert_eq!(culprit["bytes"].as_u64().unwrap(), max);
    assert_eq!(e["culprit_bytes"].as_u64().unwrap(), max);
    // the failing request: 14.81 GiB held + 226.00 MiB asked
    assert_eq!(e["failing_need_bytes"].as_u64(), Some(15_902_116_413 + 236_978_176));
    // without a card: a clear error
    vramfit()
        .args(["diagnose", &fx("scripts/train_good.py"), "--model", "llama-2-7b"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--model needs the card"));
}

fn keys(v: &Value, out: &mut std::collections::BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.insert(k.clone());
                keys(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
        _ => {}
    }
}

#[test]
fn every_emitted_key_is_documented() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/diagnose.md")).unwrap();
    let mut all = std::collections::BTreeSet::new();
    let dir = fx("oom");
    let mut inputs: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".txt") && !p.contains("shannonai"))
        .collect();
    inputs.sort();
    inputs.extend([
        fx("memory_summary/01.txt"),
        fx("snapshot/snapshot_shared.pickle"),
        fx("snapshot/legacy_history.pickle"),
        fx("scripts/train_bad.py"),
    ]);
    for p in &inputs {
        keys(&json(&[p]), &mut all);
    }
    keys(&json(&[&fx("oom/pt22_vsmtrans3_backward.txt"), "--model", "llama-2-7b", "--task", "train"]), &mut all);
    assert!(all.len() > 140, "{}", all.len());
    let missing: Vec<&String> =
        all.iter().filter(|k| !doc.contains(&format!("`{k}`")) && !doc.contains(&format!(".{k}`"))).collect();
    assert!(missing.is_empty(), "docs/diagnose.md does not document {missing:?}");
}

#[test]
fn deepspeed_config_on_several_gpus() {
    let ds = concat!(env!("CARGO_MANIFEST_DIR"), "/../ingest/tests/fixtures/deepspeed/03_zero3_bf16.json");
    if !std::path::Path::new(ds).exists() {
        return; // the shared fixtures are not part of every checkout
    }
    let j = json(&[
        &fx("oom/pt110_hint_gpt4llm_deepspeed_wrapped.txt"),
        "--model",
        "llama-2-7b",
        "--task",
        "train",
        "--gpus",
        "2",
        "--deepspeed",
        ds,
    ]);
    let e = &j["estimate"];
    assert!(e["estimate_bytes"].as_u64().unwrap() > 0);
    assert!(e["ladder"].as_array().unwrap().is_empty());
    assert!(e["reasoning"].as_array().unwrap().iter().any(|r| r.as_str().unwrap().contains("vramfit plan")));
}

#[test]
fn snapshot_oom_is_the_failing_request_with_a_gpu() {
    // gpt2 has 1024 positions: the training default of 2048 is refused
    let j = json(&[
        &fx("snapshot/snapshot_shared.pickle"),
        "--model",
        "gpt2",
        "--task",
        "train",
        "--seq",
        "1024",
        "--gpu",
        "rtx-3090",
    ]);
    // the trace's OOM: 14.5 MiB live + 32 MiB asked
    assert_eq!(j["estimate"]["failing_need_bytes"].as_u64(), Some((14 << 20) + (512 << 10) + (32 << 20)));
    // the card from the catalogue: 24 GiB class
    assert!(j["estimate"]["card_bytes"].as_u64().unwrap() > 20u64 << 30);
}

#[test]
fn forced_script_kind_on_a_log_text_or_json_is_refused() {
    let log = tmp("crash.log");
    std::fs::write(&log, std::fs::read_to_string(fx("oom/pt22_vsmtrans3_backward.txt")).unwrap()).unwrap();
    let txt = tmp("hello.txt");
    std::fs::write(&txt, "hello world\n").unwrap();
    let js = tmp("config.json");
    std::fs::write(&js, "{\"hidden_size\": 4096, \"layers\": [1, 2, 3], \"name\": \"x\"}\n").unwrap();
    for p in [&log, &txt, &js] {
        vramfit()
            .args(["diagnose", p.to_str().unwrap(), "--kind", "script"])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("not recognised: not a Python script"));
    }
    // a real script with a syntax error is still linted
    let py = tmp("broken.py");
    let src = std::fs::read_to_string(fx("scripts/train_bad.py")).unwrap();
    std::fs::write(&py, format!("{src}\ndef broken(:\n    pass\n")).unwrap();
    let j = json(&[py.to_str().unwrap(), "--kind", "script"]);
    assert_eq!(j["kind"], "script");
    assert!(j["diagnosis"]["report"]["error_nodes"].as_u64().unwrap() > 0);
    assert!(!j["diagnosis"]["report"]["findings"].as_array().unwrap().is_empty());
}

#[test]
fn error_messages_are_not_printed_twice() {
    let dir = tmp("a_directory");
    std::fs::create_dir_all(&dir).unwrap();
    let out = vramfit().args(["diagnose", dir.to_str().unwrap()]).assert().code(2).get_output().stderr.clone();
    let err = String::from_utf8(out).unwrap();
    // refused before it is opened (vramfit-input reads regular files only), once
    assert_eq!(err.matches("not a regular file").count(), 1, "{err}");
    // a truncated snapshot: the pickle error once
    let pk = std::fs::read(fx("snapshot/snapshot_shared.pickle")).unwrap();
    let cut = tmp("trunc.pickle");
    std::fs::write(&cut, &pk[..pk.len() / 2]).unwrap();
    let out = vramfit().args(["diagnose", cut.to_str().unwrap()]).assert().code(2).get_output().stderr.clone();
    let err = String::from_utf8(out).unwrap();
    assert_eq!(err.matches("pickle ends early").count(), 1, "{err}");
}

#[test]
fn impossible_oom_figures_get_no_confident_verdict() {
    let log = tmp("impossible.log");
    std::fs::write(&log, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 10.76 GiB total capacity; 12.50 GiB already allocated; 100.00 MiB free; 12.60 GiB reserved in total by PyTorch)\n").unwrap();
    let j = json(&[log.to_str().unwrap()]);
    let v = &j["diagnosis"]["ooms"][0]["verdict"];
    assert_eq!(v["class"], "unexplained");
    assert!(v["headline"].as_str().unwrap().contains("12.50 GiB allocated > 10.76 GiB total capacity"), "{v}");
}

/// Issue 24 item 9: a DeepSpeed ZeRO-3 log compared against an unsharded
/// single-GPU estimate blamed the wrong thing. The log's ZeRO stage goes
/// into the estimate beside it, the world size it cannot show is assumed
/// at its smallest and asked for; flags the user gave win.
#[test]
fn the_logs_deepspeed_setup_goes_into_the_estimate_beside_it() {
    let log = fx("oom/pt22_llamafactory7532_deepspeed_pid.txt");
    let base = ["--model", "llama-2-7b", "--task", "train", "--batch", "4", "--seq", "2048"];
    let mut args = vec![log.as_str()];
    args.extend(base);
    let taken = json(&args);
    let reasons = taken["estimate"]["reasoning"].to_string();
    assert!(reasons.contains("ZeRO-3 (deepspeed/runtime/zero/stage3.py)"), "{reasons}");
    assert!(reasons.contains("2 GPUs assumed") && reasons.contains("give --gpus N"), "{reasons}");
    // the user's own world size: no assumption, and a smaller share per GPU
    let mut given = args.clone();
    given.extend(["--gpus", "8"]);
    let eight = json(&given);
    assert!(!eight["estimate"]["reasoning"].to_string().contains("GPUs assumed"));
    assert!(eight["estimate"]["estimate_bytes"].as_u64() < taken["estimate"]["estimate_bytes"].as_u64());
    // an explicit --zero wins over the log
    let mut zero1 = args.clone();
    zero1.extend(["--zero", "1", "--gpus", "2"]);
    let z1 = json(&zero1);
    assert!(!z1["estimate"]["reasoning"].to_string().contains("frames show ZeRO"));
    assert!(z1["estimate"]["estimate_bytes"].as_u64() > taken["estimate"]["estimate_bytes"].as_u64());
}
