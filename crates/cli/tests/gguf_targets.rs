//! What a GGUF estimate fits against: `--gpu-mem SIZE` (a card by its
//! memory, one per `--tensor-split` share), `--gpu auto` (the local GPUs;
//! without a driver the error says what to give instead), and `estimate`'s
//! own workload flags refused by name instead of being ignored.

mod common;
use common::{json, run};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use vramfit_ingest::gguf::writer::fixtures::{write_model, Shape};
use vramfit_llamacpp::GgmlType;

/// Tests run in parallel and share these files: each is written under a name of
/// its own and renamed into place, so no test reads a file another is rewriting.
fn fixture(name: &str, s: &Shape) -> PathBuf {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("gguf-targets");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!("{name}.{}.{n}.tmp", std::process::id()));
    write_model(s, &tmp).unwrap();
    std::fs::rename(&tmp, &p).unwrap();
    p
}

fn llama70b() -> String {
    let mut s = Shape::llama(80, 8192, 64, 8, 28672, 32000);
    s.matrix = GgmlType::Q4K;
    fixture("llama70b-q4k.gguf", &s).display().to_string()
}

#[test]
fn gpu_mem_fits_like_the_catalogue_card_of_that_memory() {
    let m = llama70b();
    // the RTX 4090 of the catalogue has 24564 MiB
    let card = json(&["estimate", &m, "--gpu", "rtx-4090", "--json"], 1);
    let mem = json(&["estimate", &m, "--gpu-mem", "24564MiB", "--json"], 1);
    assert_eq!(mem["fit"]["max_gpu_layers"], card["fit"]["max_gpu_layers"]);
    assert_eq!(mem["fit"]["max_context"], card["fit"]["max_context"]);
    assert_eq!(mem["devices"][0]["memory_bytes"], 24564u64 << 20);
    assert_eq!(mem["devices"][0]["total_bytes"], card["devices"][0]["total_bytes"]);
    assert_eq!(mem["devices"][0]["gpu"], "a card with 23.99 GiB (--gpu-mem 24564MiB)");
    // the largest -ngl it names fits, one more does not
    let n = mem["fit"]["max_gpu_layers"].as_u64().unwrap();
    json(&["estimate", &m, "--gpu-mem", "24564MiB", "-ngl", &n.to_string(), "--json"], 0);
    json(&["estimate", &m, "--gpu-mem", "24564MiB", "-ngl", &(n + 1).to_string(), "--json"], 1);
    // the text says which card
    let (text, _) = run(&["estimate", &m, "--gpu-mem", "24564MiB"], 1);
    assert!(text.contains("CUDA0 (a card with 23.99 GiB (--gpu-mem 24564MiB)): DOES NOT FIT"), "{text}");
}

#[test]
fn gpu_mem_with_a_tensor_split_is_one_card_per_share() {
    let m = llama70b();
    let v = json(&["estimate", &m, "--gpu-mem", "48GiB", "-ts", "1,1", "--json"], 0);
    let devices = v["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 2);
    for d in devices {
        assert_eq!(d["memory_bytes"], 48u64 << 30);
        assert_eq!(d["fits"], true);
    }
    assert_eq!(v["fit"]["fits"], true);
}

#[test]
fn gpu_mem_is_checked_and_refused_where_it_cannot_apply() {
    let m = llama70b();
    let (_, e) = run(&["estimate", &m, "--gpu-mem", "24"], 2);
    assert!(e.contains("--gpu-mem"), "{e}");
    let (_, e) = run(&["estimate", &m, "--gpu-mem", "24GiB", "--cpu-only"], 2);
    assert!(e.contains("--cpu-only") && e.contains("--gpu-mem"), "{e}");
    let (_, e) = run(&["estimate", &m, "--gpu-mem", "24GiB", "--gpu", "t4"], 2);
    assert!(e.contains("--gpu-mem") && e.contains("--gpu"), "{e}");
}

#[test]
fn gpu_auto_without_a_driver_names_what_to_give_instead() {
    // test machines have no NVIDIA driver: the answer is an error that names
    // --gpu and --gpu-mem (with a driver, `slots_from_detected` unit tests
    // cover the choice of GPUs)
    if std::path::Path::new("/proc/driver/nvidia").exists() {
        return; // a machine with a driver would answer with its GPUs
    }
    let m = llama70b();
    let (_, e) = run(&["estimate", &m, "--gpu", "auto"], 2);
    assert!(e.contains("--gpu auto") && e.contains("--gpu-mem"), "{e}");
}

#[test]
fn estimate_workload_flags_are_refused_for_gguf_naming_the_llama_cpp_flag() {
    let m = llama70b();
    for (args, names) in [
        (vec!["--concurrency", "4"], vec!["--concurrency (llama.cpp: -np)"]),
        (vec!["--batch", "4", "--kv-dtype", "fp8"], vec!["--batch", "--kv-dtype (llama.cpp: -ctk/-ctv)"]),
        (vec!["--gpu", "t4", "--gpu-util", "0.9"], vec!["--gpu-util"]),
        (vec!["--tp", "2"], vec!["--tp/--pp/--gpus (llama.cpp: -ts"]),
        (vec!["--task", "lora"], vec!["--task"]),
    ] {
        let mut all = vec!["estimate", m.as_str()];
        all.extend(args.iter());
        let (_, e) = run(&all, 2);
        assert!(e.contains("is a GGUF file, sized with llama.cpp's flags"), "{e}");
        for n in names {
            assert!(e.contains(n), "{all:?}: {e}");
        }
    }
    // -c itself is fine
    json(&["estimate", &m, "-c", "8192", "--json"], 0);
}

#[test]
fn context_and_max_model_len_are_llama_cpps_c_for_a_gguf() {
    let m = llama70b();
    let c = json(&["estimate", &m, "-c", "8192", "--json"], 0);
    for args in [
        vec!["--context", "8192"],
        vec!["--context", "8k"],
        vec!["--max-model-len", "8K"],
        vec!["--ctx", "8k"],
        vec!["--ctx-size", "8k"],
        vec!["-c", "8k"],
        vec!["--context", "8k", "-c", "8192"],
    ] {
        let mut all = vec!["estimate", m.as_str(), "--json"];
        all.extend(args.iter());
        assert_eq!(json(&all, 0), c, "{args:?}");
    }
    // the llama-server command line says -c 8192
    assert!(c["command_line"].as_str().unwrap().contains(" -c 8192 "), "{}", c["command_line"]);
    let (_, e) = run(&["estimate", &m, "--context", "16k", "-c", "8192"], 2);
    assert!(e.contains("--context 16384 and -c/--ctx-size 8192") && e.contains("disagree"), "{e}");
    let (_, e) = run(&["estimate", &m, "-c", "8x"], 2);
    assert!(e.contains("'--ctx-size <TOKENS>'") && e.contains("unknown suffix 'x'"), "{e}");
}
