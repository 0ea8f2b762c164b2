//! `vramfit estimate` through the real binary: the issue's figures, the
//! JSON schema, exit codes and bad input.

mod common;
use common::{json, run, vramfit};
use std::io::Write;

const GIB: u64 = 1 << 30;

fn cat(v: &serde_json::Value, c: &str) -> u64 {
    v["per_gpu"]["categories"][c].as_u64().unwrap_or_else(|| panic!("no category {c}"))
}

#[test]
fn llama2_7b_params_and_bf16_weights() {
    let v = json(&["estimate", "llama-2-7b", "--json"], 0);
    assert_eq!(v["schema"], 1);
    assert_eq!(v["model"]["params_total"], 6_738_415_616u64);
    assert_eq!(v["model"]["params_active"], 6_738_415_616u64);
    assert_eq!(cat(&v, "weights"), 13_476_831_232);
}

#[test]
fn hub_style_ids_and_case_resolve_to_presets() {
    let v = json(&["estimate", "meta-llama/Llama-2-7b-hf", "--json"], 0);
    assert_eq!(v["model"]["params_total"], 6_738_415_616u64);
    let v = json(&["estimate", "MISTRAL-7B", "--json"], 0);
    assert_eq!(v["model"]["params_total"], 7_241_732_096u64);
    let v = json(&["estimate", "Qwen/Qwen2.5-7B-Instruct", "--json"], 0);
    assert_eq!(v["model"]["params_total"], 7_615_616_512u64);
}

#[test]
fn kv_cache_gqa_difference_32_by_4096() {
    // 2 × 32 layers × 32 kv heads × 128 × 2 B × (32 × 4096) tokens = 64 GiB;
    // Mistral has 8 kv heads: a quarter, 16 GiB.
    let args = ["--batch", "32", "--context", "4096", "--kv-dtype", "fp16", "--json"];
    let l = json(&[&["estimate", "llama-2-7b"][..], &args].concat(), 0);
    let m = json(&[&["estimate", "mistral-7b"][..], &args].concat(), 0);
    assert_eq!(cat(&l, "kv_cache"), 64 * GIB);
    assert_eq!(cat(&m, "kv_cache"), 16 * GIB);
    assert_eq!(l["model"]["attention"], "MHA");
    assert_eq!(m["model"]["attention"], "GQA");
    let (text, _) = run(&["estimate", "mistral-7b", "--batch", "32", "--context", "4096"], 0);
    assert!(text.contains("GQA heads / 8 kv"), "{text}");
    assert!(text.contains("16.00 GiB"), "{text}");
}

#[test]
fn llama2_13b_bf16_is_about_24_2_gib() {
    let v = json(&["estimate", "llama-2-13b", "--dtype", "bf16", "--json"], 0);
    let gib = cat(&v, "weights") as f64 / GIB as f64;
    assert!((gib - 24.24).abs() < 0.01, "{gib}");
}

#[test]
fn llama2_70b_int4_shows_its_overhead() {
    let v = json(&["estimate", "llama-2-70b", "--dtype", "int4", "--json"], 0);
    let w = cat(&v, "weights");
    let params = v["model"]["params_total"].as_u64().unwrap();
    // Pure 4-bit would be params/2; scales, zeros and the 16-bit embeddings add to it.
    assert!(w > params / 2, "{w} vs {}", params / 2);
    assert!(w < params * 6 / 10, "{w}");
    let entries = v["per_gpu"]["entries"].as_array().unwrap();
    let lin = entries.iter().find(|e| e["label"].as_str().unwrap().contains("int4 g128")).unwrap();
    assert!(lin["explain"]["formula"].as_str().unwrap().contains("scale"));
    let (text, _) = run(&["estimate", "llama-2-70b", "--dtype", "int4", "--explain"], 0);
    assert!(text.contains("(d_in/g)·d_out·(2 B scale + bits/8 zero)"), "{text}");
    assert!(text.contains("keep embeddings and lm_head in 16-bit"), "{text}");
}

#[test]
fn categories_sum_to_total_and_tensor_peak_excludes_runtime() {
    let v = json(&["estimate", "mixtral-8x7b", "--batch", "4", "--tp", "2", "--json"], 0);
    let cats = v["per_gpu"]["categories"].as_object().unwrap();
    let sum: u64 = cats.values().map(|x| x.as_u64().unwrap()).sum();
    assert_eq!(sum, v["per_gpu"]["total_bytes"].as_u64().unwrap());
    let peak = sum - cat(&v, "runtime") - cat(&v, "margin");
    assert_eq!(peak, v["per_gpu"]["tensor_peak_bytes"].as_u64().unwrap());
    for key in [
        "weights",
        "master_weights",
        "gradients",
        "optimizer_states",
        "activations",
        "kv_cache",
        "logits",
        "temporaries",
        "runtime",
        "margin",
    ] {
        assert!(cats.contains_key(key), "missing {key}");
    }
    assert_eq!(v["gpus"], 2);
}

#[test]
fn tensor_parallel_halves_weights_and_kv() {
    let one = json(&["estimate", "llama-2-70b", "--json"], 0);
    let two = json(&["estimate", "llama-2-70b", "--tp", "2", "--json"], 0);
    assert_eq!(cat(&two, "kv_cache") * 2, cat(&one, "kv_cache"));
    let (w1, w2) = (cat(&one, "weights"), cat(&two, "weights"));
    assert!(w2 < w1 / 2 + w1 / 100, "{w1} {w2}");
}

#[test]
fn fit_exit_codes() {
    let v = json(&["estimate", "llama-2-7b", "--gpu", "a100-80gb", "--json"], 0);
    assert_eq!(v["fit"]["fits"], true);
    let v = json(&["estimate", "llama-2-70b", "--gpu", "rtx-3090", "--json"], 1);
    assert_eq!(v["fit"]["fits"], false);
    assert!(v["fit"]["headroom_bytes"].as_i64().unwrap() < 0);
}

#[test]
fn paged_capacity_at_gpu_util() {
    let v = json(
        &["estimate", "llama-3.1-8b", "--gpu", "a100-80gb", "--gpu-util", "0.9", "--context", "8192", "--json"],
        0,
    );
    let c = &v["fit"]["capacity"];
    let per_token = v["kv"]["bytes_per_token"].as_u64().unwrap();
    assert_eq!(per_token, 2 * 32 * 8 * 128 * 2); // 128 KiB
    let blocks = c["kv_blocks"].as_u64().unwrap();
    let conc = c["max_concurrency"].as_u64().unwrap();
    assert_eq!(conc, blocks / (8192 / 16));
    assert!(conc > 10 && conc < 80, "{conc}");
    assert!(c["max_context"].as_u64().unwrap().is_multiple_of(16));
    // The longest context for one sequence must itself fit the budget.
    let max_ctx = c["max_context"].as_u64().unwrap().to_string();
    let budget = c["budget_bytes"].as_u64().unwrap();
    let at = json(&["estimate", "llama-3.1-8b", "--context", &max_ctx, "--margin", "0", "--json"], 0);
    assert!(at["per_gpu"]["total_bytes"].as_u64().unwrap() <= budget);
}

#[test]
fn unknown_preset_suggests() {
    let (_, err) = run(&["estimate", "lama-2-7b"], 2);
    assert!(err.contains("unknown model 'lama-2-7b'") && err.contains("did you mean: llama-2-7b"), "{err}");
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("vramfit-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn malformed_and_incomplete_configs() {
    let d = temp_dir("bad-config");
    let bad = d.join("bad.json");
    std::fs::write(&bad, b"{\"hidden_size\": 4096,").unwrap();
    let (_, err) = run(&["estimate", bad.to_str().unwrap()], 2);
    assert!(err.contains("bad.json") && err.contains("not valid JSON"), "{err}");

    let missing = d.join("missing.json");
    std::fs::write(&missing, br#"{"model_type":"llama","hidden_size":4096}"#).unwrap();
    let (_, err) = run(&["estimate", missing.to_str().unwrap()], 2);
    assert!(
        err.contains("missing or invalid fields") && err.contains("num_hidden_layers") && err.contains("vocab_size"),
        "{err}"
    );

    let zero = d.join("zero.json");
    std::fs::write(&zero, br#"{"model_type":"llama","hidden_size":0,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":8,"vocab_size":10}"#).unwrap();
    let (_, err) = run(&["estimate", zero.to_str().unwrap()], 2);
    assert!(err.contains("hidden_size") && err.contains("at least 1"), "{err}");

    let absurd = d.join("absurd.json");
    std::fs::write(&absurd, br#"{"model_type":"llama","hidden_size":4096,"num_hidden_layers":99999999,"num_attention_heads":32,"intermediate_size":8,"vocab_size":10}"#).unwrap();
    let (_, err) = run(&["estimate", absurd.to_str().unwrap()], 2);
    assert!(err.contains("num_hidden_layers") && err.contains("larger than any real model"), "{err}");

    let wrong_type = d.join("wrong.json");
    std::fs::write(&wrong_type, br#"{"model_type":"llama","hidden_size":"big","num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":8,"vocab_size":10}"#).unwrap();
    let (_, err) = run(&["estimate", wrong_type.to_str().unwrap()], 2);
    assert!(err.contains("hidden_size (a non-negative integer, found a string)"), "{err}");
}

#[test]
fn zero_and_absurd_workload_sizes() {
    let (_, err) = run(&["estimate", "llama-2-7b", "--batch", "0"], 2);
    assert!(err.contains("batch") && err.contains("at least 1"), "{err}");
    let (_, err) = run(&["estimate", "llama-2-7b", "--context", "99999999999"], 2);
    assert!(err.contains("context") && err.contains("absurdly large"), "{err}");
    let (_, err) = run(&["estimate", "llama-2-7b", "--tp", "3"], 2);
    assert!(err.contains("does not divide the 32 attention heads"), "{err}");
}

#[test]
fn byte_arithmetic_overflow_is_an_error_not_a_wrap() {
    // 405B with 16M concurrent sequences of 2^31 tokens: the KV cache alone
    // exceeds 2^64 bytes.
    let (_, err) = run(&["estimate", "llama-3.1-405b", "--concurrency", "16777216", "--context", "2147483648"], 2);
    assert!(err.contains("overflows 64-bit byte arithmetic"), "{err}");
}

fn safetensors_bytes(header: &str, data: usize) -> Vec<u8> {
    let mut v = (header.len() as u64).to_le_bytes().to_vec();
    v.extend_from_slice(header.as_bytes());
    v.extend(std::iter::repeat_n(0u8, data));
    v
}

/// A tiny GPT-2 (n_embd 4, 1 layer, vocab 8, 2 positions) and a
/// safetensors header listing exactly its tensors.
fn tiny_gpt2(dir: &std::path::Path, drop_one: bool) {
    std::fs::write(
        dir.join("config.json"),
        br#"{"model_type":"gpt2","n_embd":4,"n_layer":1,"n_head":2,"vocab_size":8,"n_positions":2}"#,
    )
    .unwrap();
    let mut tensors = vec![
        ("wte.weight", vec![8, 4]),
        ("wpe.weight", vec![2, 4]),
        ("h.0.ln_1.weight", vec![4]),
        ("h.0.ln_1.bias", vec![4]),
        ("h.0.attn.c_attn.weight", vec![4, 12]),
        ("h.0.attn.c_attn.bias", vec![12]),
        ("h.0.attn.c_proj.weight", vec![4, 4]),
        ("h.0.attn.c_proj.bias", vec![4]),
        ("h.0.ln_2.weight", vec![4]),
        ("h.0.ln_2.bias", vec![4]),
        ("h.0.mlp.c_fc.weight", vec![4, 16]),
        ("h.0.mlp.c_fc.bias", vec![16]),
        ("h.0.mlp.c_proj.weight", vec![16, 4]),
        ("h.0.mlp.c_proj.bias", vec![4]),
        ("ln_f.weight", vec![4]),
        ("ln_f.bias", vec![4]),
    ];
    if drop_one {
        tensors.pop();
    }
    let mut off = 0u64;
    let mut parts = vec![r#""__metadata__":{"format":"pt"}"#.to_string()];
    for (name, shape) in &tensors {
        let n: u64 = shape.iter().product();
        let b = n * 4;
        parts.push(format!(r#""{name}":{{"dtype":"F32","shape":{shape:?},"data_offsets":[{off},{}]}}"#, off + b));
        off += b;
    }
    let header = format!("{{{}}}", parts.join(","));
    std::fs::write(dir.join("model.safetensors"), safetensors_bytes(&header, off as usize)).unwrap();
}

#[test]
fn safetensors_headers_match_or_mismatch_the_config() {
    let d = temp_dir("st-ok");
    tiny_gpt2(&d, false);
    let v = json(&["estimate", d.to_str().unwrap(), "--context", "2", "--json"], 0);
    // wte 32 + wpe 8 + ln 8 + c_attn 60 + c_proj 20 + ln 8 + c_fc 80 + c_proj 68 + ln_f 8 = 292
    assert_eq!(v["model"]["params_total"], 292);
    assert_eq!(v["model"]["checkpoint"]["params"], 292);
    assert_eq!(v["model"]["checkpoint"]["matches_config"], true);

    let d = temp_dir("st-mismatch");
    tiny_gpt2(&d, true);
    let v = json(&["estimate", d.join("model.safetensors").to_str().unwrap(), "--context", "2", "--json"], 0);
    assert_eq!(v["model"]["checkpoint"]["matches_config"], false);
    assert!(v["model"]["checkpoint"]["verdict"].as_str().unwrap().starts_with("MISMATCH"));
}

#[test]
fn truncated_and_hostile_safetensors_headers() {
    let d = temp_dir("st-bad");
    std::fs::write(
        d.join("config.json"),
        br#"{"model_type":"gpt2","n_embd":4,"n_layer":1,"n_head":2,"vocab_size":8,"n_positions":2}"#,
    )
    .unwrap();
    // Header length says 200 bytes, only 10 follow.
    let mut f = std::fs::File::create(d.join("model.safetensors")).unwrap();
    f.write_all(&200u64.to_le_bytes()).unwrap();
    f.write_all(b"{\"a\":{\"dty").unwrap();
    drop(f);
    let (_, err) = run(&["estimate", d.to_str().unwrap()], 2);
    assert!(err.contains("truncated") && err.contains("model.safetensors"), "{err}");

    // A header that claims 10 GB of JSON is refused before any allocation.
    let mut huge = 10_000_000_000u64.to_le_bytes().to_vec();
    huge.extend_from_slice(b"{\"a\":");
    std::fs::write(d.join("model.safetensors"), huge).unwrap();
    let (_, err) = run(&["estimate", d.to_str().unwrap()], 2);
    assert!(err.contains("claims 10000000000 bytes"), "{err}");
    // Eight bytes and nothing after: not a safetensors file, no decoded size.
    std::fs::write(d.join("model.safetensors"), 10_000_000_000u64.to_le_bytes()).unwrap();
    let (_, err) = run(&["estimate", d.to_str().unwrap()], 2);
    assert!(err.contains("not a safetensors file") && !err.contains("10000000000"), "{err}");

    // Three bytes: not even a length.
    std::fs::write(d.join("model.safetensors"), b"abc").unwrap();
    let (_, err) = run(&["estimate", d.to_str().unwrap()], 2);
    assert!(err.contains("too short"), "{err}");
}

#[test]
fn hub_id_found_in_local_hf_cache_offline() {
    let home = temp_dir("hf-home");
    let repo = home.join("hub/models--acme--tiny-llama");
    let snap = repo.join("snapshots/0123abcd");
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), "0123abcd").unwrap();
    std::fs::write(
        snap.join("config.json"),
        br#"{"model_type":"llama","hidden_size":256,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,"intermediate_size":688,"vocab_size":32000}"#,
    )
    .unwrap();
    let out = vramfit().env("HF_HOME", &home).args(["estimate", "acme/tiny-llama", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // validation.jsonl's llama-tiny-2L-256: 71,865,344 params (fp32 bytes / 4).
    assert_eq!(v["model"]["params_total"], 71_865_344u64 / 4);
    assert!(v["model"]["source"].as_str().unwrap().contains("local Hugging Face cache"));
}

#[test]
fn multimodal_config_counts_the_vision_tower_and_says_so() {
    let (text, _) = run(&["estimate", "qwen3-vl-8b"], 0);
    assert!(text.contains("language model is read from `text_config`"), "{text}");
    assert!(text.contains("vision tower counted (27 layers, hidden 1152)"), "{text}");
    let v = json(&["estimate", "qwen3-vl-8b", "--json"], 0);
    // 8,767,123,696 with the tower (transformers' own count of this config)
    assert_eq!(v["model"]["params_total"], 8_767_123_696u64);
    let entries = v["per_gpu"]["entries"].as_array().unwrap();
    assert!(entries.iter().any(|e| e["label"].as_str().unwrap().starts_with("vision tower (bf16)")));
}

#[test]
fn sliding_window_cache_is_a_flag() {
    // Gemma 3 27B at 32k: 10 global layers keep 32,768 tokens, 52 sliding layers
    // 1,040 (window) or 32,768 (full): 3,127,377,920 B vs 16,642,998,272 B of KV.
    let kv = |policy: &str| {
        let v = json(&["estimate", "gemma-3-27b", "--context", "32768", "--sliding-window-cache", policy, "--json"], 0);
        v["per_gpu"]["categories"]["kv_cache"].as_u64().unwrap()
    };
    assert_eq!(kv("window"), 3_127_377_920);
    assert_eq!(kv("full"), 16_642_998_272);
    let (_, err) = run(&["estimate", "gemma-3-27b", "--sliding-window-cache", "half"], 2);
    assert!(err.contains("--sliding-window-cache") && err.contains("window, full, llamacpp"), "{err}");
}

#[test]
fn an_architecture_vramfit_cannot_lay_out_is_refused_by_name() {
    // (Llama 4 was the example here until it was laid out, issue 22)
    let dir = temp_dir("minimax");
    let cfg = dir.join("config.json");
    std::fs::write(&cfg, br#"{"model_type":"minimax","hidden_size":6144}"#).unwrap();
    let (_, err) = run(&["estimate", cfg.to_str().unwrap()], 2);
    assert!(err.contains("minimax") && err.contains("MiniMax-Text-01") && err.contains("safetensors"), "{err}");
}

#[test]
fn list_presets_and_gpus() {
    let (text, _) = run(&["estimate", "--list-presets"], 0);
    assert!(text.lines().count() > 25, "{text}");
    let (text, _) = run(&["estimate", "--list-gpus"], 0);
    assert!(text.contains("MiB"), "{text}");
}

#[test]
fn text_output_snapshot() {
    let (text, _) = run(&["estimate", "llama-2-7b", "--batch", "8", "--context", "2048", "--gpu", "rtx-4090"], 0);
    insta::assert_snapshot!(text);
}

#[test]
fn json_output_snapshot() {
    let v = json(&["estimate", "mistral-7b", "--dtype", "fp8", "--kv-dtype", "fp8", "--json"], 0);
    insta::assert_json_snapshot!(v);
}

#[test]
fn documented_schema_keys_are_the_emitted_keys() {
    // Every top-level and per_gpu key emitted must appear in docs/schema.md.
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/schema.md")).unwrap();
    let v = json(&["estimate", "llama-2-7b", "--gpu", "a100-80gb", "--gpu-util", "0.9", "--json"], 0);
    let mut keys: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
    for sub in ["model", "workload", "per_gpu", "kv", "fit"] {
        keys.extend(v[sub].as_object().unwrap().keys().map(|k| format!("{sub}.{k}")));
    }
    keys.extend(v["fit"]["capacity"].as_object().unwrap().keys().cloned());
    for k in keys {
        let leaf = k.rsplit('.').next().unwrap();
        assert!(
            doc.contains(&format!("`{k}`")) || doc.contains(&format!("\"{leaf}\"")) || doc.contains(leaf),
            "docs/schema.md does not document `{k}`"
        );
    }
}

#[test]
fn regression_training_flags_on_inference_are_refused() {
    // QA: `--task infer --zero 2 --optimizer sgd` used to be accepted silently.
    let (_, err) = run(&["estimate", "llama-2-7b", "--task", "infer", "--zero", "2", "--optimizer", "sgd"], 2);
    assert!(err.contains("--optimizer, --zero apply to training only"), "{err}");
    let (_, err) = run(&["estimate", "llama-2-7b", "--task", "train", "--concurrency", "4"], 2);
    assert!(err.contains("--concurrency applies to inference only"), "{err}");
    let (_, err) = run(&["estimate", "llama-2-7b", "--task", "train", "--gpu", "a100-80gb", "--gpu-util", "0.9"], 2);
    assert!(err.contains("--task infer only"), "{err}");
}

#[test]
fn regression_context_beyond_positions() {
    // QA: gpt2 --context 4096 was accepted; GPT-2 has 1024 learned positions.
    let (_, err) = run(&["estimate", "gpt2", "--context", "4096"], 2);
    assert!(err.contains("learned position table of 1024 positions"), "{err}");
    // Rotary models run past the limit, with a note.
    let v = json(&["estimate", "llama-2-7b", "--context", "8192", "--json"], 0);
    assert!(v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|n| n.as_str().unwrap().contains("max_position_embeddings 4096")));
    // QA: max_context was 115,744 on a 4096-position model at --gpu-util 1.0.
    let v = json(&["estimate", "llama-2-7b", "--gpu", "h200", "--gpu-util", "1.0", "--json"], 0);
    assert_eq!(v["fit"]["capacity"]["max_context"], 4096);
}

#[test]
fn regression_errors_are_not_printed_twice() {
    // QA: "invalid num_attention_heads: must be at least 1: invalid num_attention_heads: …"
    let d = temp_dir("twice");
    let f = d.join("zh.json");
    std::fs::write(&f, br#"{"model_type":"llama","hidden_size":4096,"num_hidden_layers":2,"num_attention_heads":0,"intermediate_size":8,"vocab_size":10}"#).unwrap();
    let (_, err) = run(&["estimate", f.to_str().unwrap()], 2);
    assert_eq!(err.matches("must be at least 1").count(), 1, "{err}");
    // A negative value is reported once, as invalid, with its value.
    let f = d.join("neg.json");
    std::fs::write(&f, br#"{"model_type":"llama","hidden_size":-4096,"num_hidden_layers":2,"num_attention_heads":4,"intermediate_size":8,"vocab_size":10}"#).unwrap();
    let (_, err) = run(&["estimate", f.to_str().unwrap()], 2);
    assert!(err.contains("missing or invalid field hidden_size (a non-negative integer, found -4096)"), "{err}");
    assert_eq!(err.matches("hidden_size").count(), 1, "{err}");
    let (_, err) = run(&["estimate", "llama-2-7b", "--gpus", "0"], 2);
    assert!(err.contains("--gpus must be at least 1"), "{err}");
}

#[test]
fn regression_deepspeed_micro_batch_is_reported() {
    // QA: a DeepSpeed micro-batch of 4 was used in the sums but reported as batch 1.
    let ds = concat!(env!("CARGO_MANIFEST_DIR"), "/../ingest/tests/fixtures/deepspeed/03_zero3_bf16.json");
    let text = std::fs::read_to_string(ds).unwrap();
    let dir = temp_dir("ds-mb");
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["train_micro_batch_size_per_gpu"] = serde_json::json!(4);
    let f = dir.join("ds.json");
    std::fs::write(&f, v.to_string()).unwrap();
    let out = json(
        &["estimate", "llama-2-7b", "--task", "train", "--gpus", "8", "--deepspeed", f.to_str().unwrap(), "--json"],
        0,
    );
    assert_eq!(out["workload"]["batch"], 4);
}

#[test]
fn workload_errors_name_the_flag() {
    // one core validation; the CLI names the flag that set the value
    for (args, needle) in [
        (vec!["--kv-dtype", "int4"], "--kv-dtype int4 is not a KV cache dtype"),
        (vec!["--dtype", "int4", "--group-size", "0"], "--group-size must be at least 1"),
        (vec!["--batch", "8", "--concurrency", "4"], "--batch 8 is more than --concurrency 4"),
        (vec!["--tp", "0"], "--tp must be at least 1"),
        (vec!["--gpus", "3", "--tp", "2"], "--gpus 3 is not a multiple of --tp 2 × --pp 1"),
        (vec!["--margin", "11"], "--margin 11 is not a fraction between 0 and 10"),
    ] {
        let mut argv = vec!["estimate", "llama-2-7b"];
        argv.extend(args.iter().copied());
        let (out, err) = run(&argv, 2);
        assert!(out.is_empty());
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn a_group_size_wider_than_every_matrix_is_refused() {
    // issue 15: --group-size 2^64−1 used to count no scale groups at all
    let (_, err) = run(&["estimate", "llama-2-7b", "--dtype", "int4", "--group-size", "18446744073709551615"], 2);
    assert!(err.contains("group-size") && err.contains("input dimension 4096"), "{err}");
    // 4096 is the widest group Llama-2-7B's q/k/v/o (4096 inputs) allow
    run(&["estimate", "llama-2-7b", "--dtype", "int4", "--group-size", "4096"], 0);
}

#[test]
fn a_local_nvfp4_checkpoint_reads_its_hf_quant_config() {
    // NVIDIA's ModelOpt checkpoints declare NVFP4 only in hf_quant_config.json
    let d = temp_dir("nvfp4");
    let cfg = br#"{"model_type":"llama","hidden_size":256,"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":4,"intermediate_size":512,"vocab_size":1000}"#;
    std::fs::write(d.join("config.json"), cfg).unwrap();
    let bf16 = json(&["estimate", d.to_str().unwrap(), "--json"], 0);
    std::fs::write(
        d.join("hf_quant_config.json"),
        br#"{"quantization":{"quant_algo":"NVFP4","kv_cache_quant_algo":"FP8","group_size":16,"exclude_modules":["lm_head","model.layers.1.mlp.down_proj"]}}"#,
    )
    .unwrap();
    let v = json(&["estimate", d.to_str().unwrap(), "--json"], 0);
    let w = |v: &serde_json::Value| cat(v, "weights");
    // per layer 4·256² + 3·256·512 = 655,360 weights; NVFP4 0.5625 B each + 8 B per matrix
    // (7 matrices), except layer 1's down_proj (131,072 weights) kept bf16
    let nvfp4 = |n: u64| n / 2 + n / 16 + 8;
    let layer = 4 * nvfp4(256 * 256) + 3 * nvfp4(256 * 512);
    let quantized = 2 * layer - nvfp4(512 * 256) + 512 * 256 * 2;
    let rest = (2 * 1000 * 256 + 5 * 256) * 2; // embeddings, lm_head, norms (bf16)
    assert_eq!(w(&v), quantized + rest);
    assert!(w(&v) < w(&bf16));
    assert!(v["model"]["notes"].to_string().contains("FP8 KV-cache scales"), "{}", v["model"]["notes"]);
}

/// Issue 24 item 3: `--gpus N` for inference without `--tp`/`--pp` runs one
/// model across the cards as the engine would (vLLM: tensor parallel;
/// transformers: device_map="auto" layer split) and says so; with an
/// explicit layout, extra cards stay replicas.
#[test]
fn named_gpus_without_a_layout_split_the_model_as_the_engine_would() {
    let v = json(&["estimate", "deepseek-v3", "--gpus", "8", "--gpu", "h200", "--engine", "vllm", "--json"], 0);
    assert_eq!(
        (v["workload"]["tp"].as_u64(), v["workload"]["pp"].as_u64(), v["workload"]["dp"].as_u64()),
        (Some(8), Some(1), Some(1))
    );
    assert_eq!(v["fit"]["fits"], true);
    let notes = v["notes"].to_string();
    assert!(notes.contains("8 GPUs and no --tp/--pp: sized as vllm runs one model across them, TP 8"), "{notes}");
    // the default engine (transformers): a pipeline of 8 stages, and it fits
    let (out, _) = run(&["estimate", "deepseek-v3", "--gpus", "8", "--gpu", "h200"], 0);
    assert!(out.contains("TP 1 × PP 8 × DP 1") && out.contains("FITS"), "{out}");
    assert!(out.contains("device_map=\"auto\""), "{out}");
    // an explicit layout keeps replicas: the same memory per card as one GPU
    let replicas = json(&["estimate", "llama-3.1-8b", "--gpus", "4", "--tp", "1", "--pp", "1", "--json"], 0);
    assert_eq!(replicas["workload"]["dp"], 4);
    let one = json(&["estimate", "llama-3.1-8b", "--json"], 0);
    assert_eq!(replicas["per_gpu"]["total_bytes"], one["per_gpu"]["total_bytes"]);
}

/// Issue 22: bitsandbytes' head and double-quant switches are inference
/// settings too. Llama-3.1-8B's head is 4096 × 128256 = 525,336,576 weights:
/// bf16 2 B each against NF4 with double quantization (n/2 + n/64 absmax
/// bytes + 4 B per 256 absmax); without double quantization every linear's
/// absmax is 4 B per 64 weights.
#[test]
fn nf4_inference_takes_the_heads_and_double_quants_switches() {
    let weights = |extra: &[&str]| {
        let mut args = vec!["estimate", "llama-3.1-8b", "--dtype", "nf4", "--json"];
        args.extend(extra);
        json(&args, 0)["per_gpu"]["categories"]["weights"].as_u64().unwrap()
    };
    let base = weights(&[]);
    let n: u64 = 4096 * 128_256;
    let nf4_dq = n / 2 + n / 64 + (n / 64).div_ceil(256) * 4;
    assert_eq!(base - weights(&["--quantize-lm-head"]), n * 2 - nf4_dq);
    assert!(weights(&["--no-double-quant"]) > base);
    // only where bitsandbytes quantizes
    let (_, err) = run(&["estimate", "llama-3.1-8b", "--quantize-lm-head"], 2);
    assert!(err.contains("--quantize-lm-head") && err.contains("--dtype nf4"), "{err}");
    let (_, err) = run(&["estimate", "llama-3.1-8b", "--dtype", "int4", "--no-double-quant"], 2);
    assert!(err.contains("--no-double-quant applies to NF4"), "{err}");
}
