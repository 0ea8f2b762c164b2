//! The Hugging Face Hub through the real binary, against an in-process fake
//! Hub (HF_ENDPOINT → 127.0.0.1; never the network): a public model, a
//! sharded one, a gated one with and without a token, 404, a slow Hub,
//! offline with and without a cache, and the second run offline from the
//! cache. Also `--gpu auto` / `--gpu-mem` and the unknown-model advice.
#![cfg(feature = "hub")]

mod common;
#[path = "../../ingest/tests/support/fake_hub.rs"]
mod fake_hub;

use common::{run, vramfit};
use fake_hub::*;
use std::path::{Path, PathBuf};

fn temp_home(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vramfit-cli-hub-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The binary pointed at the fake Hub, online, with its own HF_HOME.
fn online(hub: &FakeHub, home: &Path) -> assert_cmd::Command {
    let mut c = vramfit();
    c.env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", home)
        .env("HF_HUB_DOWNLOAD_TIMEOUT", "5")
        .env_remove("HF_HUB_OFFLINE");
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        c.env_remove(k);
    }
    c
}

fn out(c: &mut assert_cmd::Command, args: &[&str], code: i32) -> (String, String) {
    let o = c.args(args).output().unwrap();
    let (so, se) = (String::from_utf8_lossy(&o.stdout).to_string(), String::from_utf8_lossy(&o.stderr).to_string());
    assert_eq!(o.status.code(), Some(code), "{args:?}\nstdout:\n{so}\nstderr:\n{se}");
    (so, se)
}

fn tiny_repo(tag: &str) -> Repo {
    Repo::new(&commit(tag))
        .file("config.json", TINY_CONFIG.into())
        .file("model.safetensors", st_file(&tiny_tensors(0..2, true, true), 0))
}

fn sharded_repo(tag: &str) -> Repo {
    let a = tiny_tensors(0..1, true, false);
    let b = tiny_tensors(1..2, false, true);
    Repo::new(&commit(tag))
        .file("config.json", TINY_CONFIG.into())
        .file("model-00001-of-00002.safetensors", st_file(&a, 0))
        .file("model-00002-of-00002.safetensors", st_file(&b, 0))
        .file(
            "model.safetensors.index.json",
            index_json(&[("model-00001-of-00002.safetensors", &a), ("model-00002-of-00002.safetensors", &b)]),
        )
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}):\n{s}"))
}

#[test]
fn public_model_fetched_then_offline_from_the_cache() {
    let hub = FakeHub::start();
    hub.add("acme/tiny", tiny_repo("tiny"));
    let home = temp_home("public");
    let (so, se) = out(&mut online(&hub, &home), &["estimate", "acme/tiny", "--json"], 0);
    assert!(se.contains("fetching acme/tiny (revision main)") && se.contains("not the weights"), "{se}");
    let v = json(&so);
    assert_eq!(v["model"]["params_total"], TINY_PARAMS);
    assert_eq!(v["model"]["checkpoint"]["params"], TINY_PARAMS);
    assert_eq!(v["model"]["checkpoint"]["matches_config"], true);
    let src = v["model"]["source"].as_str().unwrap();
    assert!(src.starts_with("acme/tiny (main, commit 74696e790000) fetched from http://127.0.0.1:"), "{src}");
    // the weights were never asked for: every range ends inside the first 100,000 bytes
    assert!(hub.log().iter().all(|l| l.range.is_none_or(|(_, b)| b < 100_000)), "{:?}", hub.log());

    // second run: offline (flag, then variable), same numbers, no connection
    let before = hub.connections();
    for (flag, env) in [(Some("--offline"), None), (None, Some(("HF_HUB_OFFLINE", "1")))] {
        let mut c = online(&hub, &home);
        if let Some((k, val)) = env {
            c.env(k, val);
        }
        let mut args = vec!["estimate", "acme/tiny", "--json"];
        args.extend(flag);
        let (so, se) = out(&mut c, &args, 0);
        assert!(!se.contains("fetching"), "{se}");
        let w = json(&so);
        assert_eq!(w["per_gpu"], v["per_gpu"]);
        assert_eq!(w["model"]["checkpoint"]["params"], TINY_PARAMS);
        assert!(w["model"]["source"].as_str().unwrap().contains("from the local Hugging Face cache"), "{w}");
    }
    assert_eq!(hub.connections(), before, "offline runs made no connection");
}

#[test]
fn sharded_checkpoint_counts_every_shard_through_the_cdn() {
    let hub = FakeHub::start();
    hub.add("acme/sharded", sharded_repo("shard"));
    let home = temp_home("sharded");
    let (so, _) = out(&mut online(&hub, &home), &["estimate", "acme/sharded", "--json"], 0);
    let v = json(&so);
    assert_eq!(v["model"]["checkpoint"]["files"], 2);
    assert_eq!(v["model"]["checkpoint"]["params"], TINY_PARAMS);
    assert_eq!(v["model"]["checkpoint"]["matches_config"], true);
    let cdn: Vec<_> = hub.log().into_iter().filter(|l| l.server == "cdn").collect();
    assert_eq!(cdn.len(), 2, "one range request per shard: {cdn:?}");
    // plan takes the same model flags
    let (so, _) = out(&mut online(&hub, &home), &["plan", "acme/sharded", "--offline", "--json"], 0);
    assert!(json(&so)["model"]["source"].as_str().unwrap().contains("local Hugging Face cache"), "{so}");
}

#[test]
fn gated_model_without_and_with_a_token() {
    let hub = FakeHub::start();
    let mut repo = tiny_repo("gated");
    repo.gated = true;
    hub.add("meta/gated", repo);
    let home = temp_home("gated");
    let (_, se) = out(&mut online(&hub, &home), &["estimate", "meta/gated"], 2);
    assert!(se.contains("meta/gated is a gated model"), "{se}");
    assert!(se.contains(&format!("accept the licence at {}/meta/gated", hub.url)), "{se}");
    assert!(se.contains("HF_TOKEN=hf_"), "{se}");
    // a token without access
    let (_, se) = out(online(&hub, &home).env("HF_TOKEN", "hf_nope"), &["estimate", "meta/gated"], 2);
    assert!(se.contains("the token from $HF_TOKEN has no access") && !se.contains("hf_nope"), "{se}");
    // HF_TOKEN
    hub.clear_log();
    out(online(&hub, &home).env("HF_TOKEN", GOOD_TOKEN), &["estimate", "meta/gated"], 0);
    let log = hub.log();
    assert!(log.iter().filter(|l| l.server == "hub").all(|l| l.authorization.is_some()), "{log:?}");
    assert!(
        log.iter().filter(|l| l.server == "cdn").all(|l| l.authorization.is_none()),
        "token leaked to the CDN: {log:?}"
    );
    // the token file `huggingface-cli login` writes ($HF_HOME/token), in a fresh cache
    let home2 = temp_home("gated-file");
    std::fs::write(home2.join("token"), format!("{GOOD_TOKEN}\n")).unwrap();
    out(&mut online(&hub, &home2), &["estimate", "meta/gated"], 0);
}

#[test]
fn not_found_slow_and_offline_without_a_cache() {
    let hub = FakeHub::start();
    let mut slow = tiny_repo("slow");
    slow.delay = std::time::Duration::from_secs(5);
    slow.slow_requests = usize::MAX;
    hub.add("acme/slow", slow);
    let home = temp_home("errors");
    let (_, se) = out(&mut online(&hub, &home), &["estimate", "acme/nope"], 2);
    assert!(se.contains("acme/nope: no such model on http://127.0.0.1:") && se.contains("HF_TOKEN"), "{se}");
    let (_, se) = out(online(&hub, &home).env("HF_HUB_DOWNLOAD_TIMEOUT", "0.3"), &["estimate", "acme/slow"], 2);
    assert!(se.contains("no answer within 0.3 s (tried 2 times)"), "{se}");
    // offline and not cached: the message names the cache and what to run
    let (_, se) = out(&mut online(&hub, &home), &["estimate", "acme/never-fetched", "--offline"], 2);
    assert!(se.contains(&format!("not in the local Hugging Face cache at {}", home.join("hub").display())), "{se}");
    assert!(
        se.contains("--offline forbids the network")
            && se.contains("huggingface-cli download acme/never-fetched config.json"),
        "{se}"
    );
}

#[test]
fn revision_flag_fetches_and_caches_that_revision() {
    let hub = FakeHub::start();
    let mut repo = tiny_repo("main");
    let one_layer = TINY_CONFIG.replace("\"num_hidden_layers\":2", "\"num_hidden_layers\":1");
    repo.revisions.insert("v1".into(), (commit("v1"), [("config.json".to_string(), one_layer.into_bytes())].into()));
    hub.add("acme/tiny", repo);
    let home = temp_home("rev");
    let (so, _) = out(&mut online(&hub, &home), &["estimate", "acme/tiny", "--revision", "v1", "--json"], 0);
    let v = json(&so);
    assert_eq!(v["model"]["layers"], 1);
    assert!(v["model"]["source"].as_str().unwrap().starts_with("acme/tiny (v1, commit 763100000000)"), "{v}");
    let (so, _) =
        out(&mut online(&hub, &home), &["estimate", "acme/tiny", "--revision", "v1", "--offline", "--json"], 0);
    assert_eq!(json(&so)["model"]["layers"], 1);
    let (_, se) = out(&mut online(&hub, &home), &["estimate", "llama-2-7b", "--revision", "v1"], 2);
    assert!(se.contains("--revision") && se.contains("hub ids"), "{se}");
}

#[test]
fn an_id_resolves_to_its_own_config_not_a_presets_sibling() {
    // issue 15: meta-llama/Meta-Llama-3-8B was the Llama 3.1 8B preset (131072 positions)
    let hub = FakeHub::start();
    let llama3 = r#"{"architectures":["LlamaForCausalLM"],"hidden_size":4096,"intermediate_size":14336,"max_position_embeddings":8192,"model_type":"llama","num_attention_heads":32,"num_hidden_layers":32,"num_key_value_heads":8,"rms_norm_eps":1e-05,"rope_theta":500000.0,"tie_word_embeddings":false,"torch_dtype":"bfloat16","vocab_size":128256}"#;
    hub.add("meta-llama/Meta-Llama-3-8B", Repo::new(&commit("llama3")).file("config.json", llama3.into()));
    let home = temp_home("sibling");
    let args = ["estimate", "meta-llama/Meta-Llama-3-8B", "--gpu", "h100", "--gpu-util", "0.9", "--json"];
    let (so, _) = out(&mut online(&hub, &home), &args, 0);
    let v = json(&so);
    assert!(v["model"]["source"].as_str().unwrap().starts_with("meta-llama/Meta-Llama-3-8B (main, commit"), "{v}");
    assert_eq!(v["fit"]["capacity"]["max_context"], 8192, "Llama 3's own 8192 positions");
    // the preset's own id stays offline and is Llama 3.1
    let (so, _) = run(&["estimate", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "--gpu-util", "0.9", "--json"], 0);
    let p = json(&so);
    assert!(p["model"]["source"].as_str().unwrap().starts_with("preset llama-3.1-8b"), "{p}");
    assert!(p["fit"]["capacity"]["max_context"].as_u64().unwrap() > 8192, "{p}");
}

#[test]
fn unknown_model_errors_say_what_to_do() {
    let (_, se) = run(&["estimate", "lama-2-7b"], 2);
    assert!(
        se.contains("--list-presets") && se.contains("org/name") && se.contains("did you mean: llama-2-7b"),
        "{se}"
    );
    let (_, se) = run(&["estimate", "meta-llama/Meta-Llama-3-8B"], 2);
    assert!(se.contains("HF_HUB_OFFLINE=1 forbids the network") && se.contains("unset HF_HUB_OFFLINE"), "{se}");
    assert!(se.contains("other models: check their source"), "siblings are not offered as the same model: {se}");
    assert!(!se.contains("did you mean"), "{se}");
}

#[test]
fn gpu_auto_reads_nvml_or_says_there_is_no_driver() {
    let o = vramfit().args(["estimate", "llama-2-7b", "--gpu", "auto", "--json"]).output().unwrap();
    let (so, se) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    match o.status.code() {
        // no driver (this machine): a clear message naming the other two ways
        Some(2) => {
            assert!(se.contains("--gpu auto: cannot read the local GPUs: no NVIDIA driver answered"), "{se}");
            assert!(se.contains("--gpu a100-80gb") && se.contains("--gpu-mem 24GiB"), "{se}");
        }
        // a machine with a GPU: the fit is against free memory, and says so
        Some(0) | Some(1) => {
            let v = json(&so);
            assert_eq!(v["fit"]["detected"]["source"], "NVML", "{v}");
            let g = &v["fit"]["detected"]["gpus"][0];
            assert_eq!(v["fit"]["gpu_memory_bytes"], g["free_bytes"], "{v}");
        }
        c => panic!("exit {c:?}: {se}"),
    }
}

#[test]
fn gpu_mem_for_a_card_not_in_the_catalogue() {
    let (so, _) = run(&["estimate", "llama-2-7b", "--gpu-mem", "24GiB", "--json"], 0);
    let v = json(&so);
    assert_eq!(v["fit"]["gpu_memory_bytes"], 24u64 << 30);
    assert_eq!(v["fit"]["gpu"], "a card with 24.00 GiB (--gpu-mem 24GiB)");
    let (so, _) = run(&["estimate", "llama-2-7b", "--gpu-mem", "16GB", "--json"], 1);
    assert_eq!(json(&so)["fit"]["gpu_memory_bytes"], 16_000_000_000u64);
    let (_, se) = run(&["estimate", "llama-2-7b", "--gpu-mem", "24"], 2);
    assert!(se.contains("has no unit"), "{se}");
}
