//! The local web page's API, in process (tower `oneshot`, no socket): every
//! endpoint answers the CLI's own `--json` (compared with the real binary
//! on the same input), bad input is a 400 naming the field with the CLI's
//! message, an oversized body a 413, and requests from elsewhere a 403.
//! The decoders never panic (proptests here, a cargo-fuzz target in fuzz/).

mod common;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use proptest::prelude::*;
use std::net::SocketAddr;
use tower::ServiceExt;
use vramfit_cli::serve::api::Settings;
use vramfit_cli::serve::request::{self, Endpoint};
use vramfit_cli::serve::{router, Config, CSP};

const ADDR: &str = "127.0.0.1:8080";

fn app() -> axum::Router {
    router(Config { settings: Settings::default(), addr: ADDR.parse::<SocketAddr>().unwrap() })
}

struct Reply {
    status: StatusCode,
    content_type: String,
    exit: Option<String>,
    csp: Option<String>,
    body: String,
}

impl Reply {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn send(req: Request<Body>) -> Reply {
    rt().block_on(async {
        let r = app().oneshot(req).await.unwrap();
        let h = r.headers().clone();
        let get = |k: &str| h.get(k).map(|v| v.to_str().unwrap().to_string());
        let status = r.status();
        let body = r.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            content_type: get("content-type").unwrap_or_default(),
            exit: get("x-vramfit-exit"),
            csp: get("content-security-policy"),
            body: String::from_utf8_lossy(&body).to_string(),
        }
    })
}

fn post(path: &str, body: impl Into<Body>) -> Reply {
    send(Request::post(path).header("host", ADDR).header("content-type", "application/json").body(body.into()).unwrap())
}

fn post_json(path: &str, v: serde_json::Value) -> Reply {
    post(path, v.to_string())
}

/// The CLI's stdout as JSON for `args` (exit `code`).
fn cli(args: &[&str], code: i32) -> serde_json::Value {
    common::json(args, code)
}

/// The CLI's error message (stderr without `vramfit: error: ` or clap's `error: `, first paragraph).
fn cli_error(args: &[&str]) -> String {
    let (_, err) = common::run(args, 2);
    let first: Vec<&str> = err.lines().take_while(|l| !l.trim().is_empty()).collect();
    let s = first.join(" ");
    s.strip_prefix("vramfit: error: ").or_else(|| s.strip_prefix("error: ")).unwrap_or(&s).trim().to_string()
}

fn fixture(rel: &str) -> String {
    format!("{}/../{rel}", env!("CARGO_MANIFEST_DIR"))
}

// ------------------------------------------------------------------ good input: the CLI's JSON

#[test]
fn estimate_is_the_clis_json() {
    let r = post_json(
        "/api/estimate",
        serde_json::json!({"model": "llama-2-7b", "gpu": "rtx-4090", "batch": 2, "sweep": true}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.content_type, "application/json");
    assert_eq!(r.exit.as_deref(), Some("0"));
    let want = cli(&["estimate", "llama-2-7b", "--gpu", "rtx-4090", "--batch", "2", "--sweep", "--json"], 0);
    assert_eq!(r.json(), want);
    // a card too small: still 200 (an answer), the exit code says it does not fit
    let r = post_json("/api/estimate", serde_json::json!({"model": "llama-2-13b", "gpu": "rtx-4090"}));
    assert_eq!((r.status.as_u16(), r.exit.as_deref()), (200, Some("1")));
    assert_eq!(r.json(), cli(&["estimate", "llama-2-13b", "--gpu", "rtx-4090", "--json"], 1));
    // training flags, a custom card size
    let r = post_json(
        "/api/estimate",
        serde_json::json!({"model": "llama-2-7b", "task": "lora", "lora_rank": 8, "checkpointing": "full", "gpu_mem": "24GiB"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let want = cli(
        &[
            "estimate",
            "llama-2-7b",
            "--task",
            "lora",
            "--lora-rank",
            "8",
            "--checkpointing",
            "full",
            "--gpu-mem",
            "24GiB",
            "--json",
        ],
        0,
    );
    assert_eq!(r.json(), want);
}

/// Issue 24: the page's `gpu` names a card exactly, as `--gpu` does: `h20`
/// is the 96 GB H20 (not the H200), and a name that only begins catalogue
/// names is a 400 on `gpu` listing them, with the CLI's message.
#[test]
fn gpu_names_match_exactly_on_the_page() {
    let r = post_json("/api/estimate", serde_json::json!({"model": "llama-3.1-8b", "gpu": "h20"}));
    assert_eq!(r.status, 200, "{}", r.body);
    let j = r.json();
    assert_eq!(j, cli(&["estimate", "llama-3.1-8b", "--gpu", "h20", "--json"], 0));
    assert_eq!(
        (j["fit"]["gpu"].as_str(), j["fit"]["gpu_memory_bytes"].as_u64()),
        (Some("H20 96GB"), Some(97871 << 20))
    );
    let r = post_json("/api/plan", serde_json::json!({"model": "llama-3.1-8b", "have": "h20"}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), cli(&["plan", "llama-3.1-8b", "--have", "h20", "--json"], 0));
    for (path, body, args, field) in [
        (
            "/api/estimate",
            serde_json::json!({"model": "llama-3.1-8b", "gpu": "h2"}),
            ["estimate", "--gpu", "h2"],
            "gpu",
        ),
        (
            "/api/estimate",
            serde_json::json!({"model": "llama-3.1-8b", "gpu": "v100"}),
            ["estimate", "--gpu", "v100"],
            "gpu",
        ),
        ("/api/plan", serde_json::json!({"model": "llama-3.1-8b", "have": "h2"}), ["plan", "--have", "h2"], "have"),
    ] {
        let r = post_json(path, body.clone());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        let j = r.json();
        assert_eq!(j["field"], field, "{body}: {}", r.body);
        let cli_args = [args[0], "llama-3.1-8b", args[1], args[2], "--json"];
        assert_eq!(j["error"], cli_error(&cli_args), "{body}");
        assert!(j["error"].as_str().unwrap().contains("is ambiguous: it begins the names of"), "{}", r.body);
    }
}

#[test]
fn a_pasted_config_is_the_config_file() {
    let path = fixture("ingest/tests/fixtures/configs/02_llama-2-7b-arch.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let r = post_json("/api/estimate", serde_json::json!({"config_json": text, "gpu": "a100-80gb"}));
    assert_eq!(r.status, 200, "{}", r.body);
    let mut api = r.json();
    let mut want = cli(&["estimate", &path, "--gpu", "a100-80gb", "--json"], 0);
    // the source names the input: the path on the command line, "pasted config.json" here
    assert_eq!(api["model"]["source"], "pasted config.json");
    api["model"]["source"] = serde_json::Value::Null;
    want["model"]["source"] = serde_json::Value::Null;
    api["model"]["name"] = serde_json::Value::Null;
    want["model"]["name"] = serde_json::Value::Null;
    assert_eq!(api, want);
    // a config pasted as a JSON object works too
    let obj: serde_json::Value = serde_json::from_str(&text).unwrap();
    let r = post_json("/api/estimate", serde_json::json!({"config_json": obj}));
    assert_eq!(r.status, 200, "{}", r.body);
    // a broken one names the paste
    let r = post_json("/api/estimate", serde_json::json!({"config_json": "{\"model_type\": \"llama\"}"}));
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().unwrap().starts_with("pasted config.json"), "{}", r.body);
}

#[test]
fn plan_is_the_clis_json_and_its_files() {
    let args = ["llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--have", "rtx-3090", "--tokens", "1B"];
    let body = serde_json::json!({"model": "llama-2-7b", "task": "train", "precision": "mixed-bf16", "have": "rtx-3090", "tokens": "1B"});
    let r = post_json("/api/plan", body.clone());
    assert_eq!(r.status, 200, "{}", r.body);
    let mut full = vec!["plan"];
    full.extend(args);
    full.push("--json");
    assert_eq!(r.json(), cli(&full, 0));
    // the emitted launch configs are the CLI's --emit output
    for kind in ["deepspeed", "accelerate", "torchrun"] {
        let mut b = body.clone();
        b["emit"] = kind.into();
        let r = post_json("/api/plan", b);
        assert_eq!(r.status, 200, "{kind}: {}", r.body);
        assert!(r.content_type.starts_with("text/plain"), "{}", r.content_type);
        let mut e = vec!["plan"];
        e.extend(args);
        e.extend(["--emit", kind]);
        let (out, _) = common::run(&e, 0);
        assert_eq!(r.body, out, "{kind}");
    }
    // allow as a list
    let r =
        post_json("/api/plan", serde_json::json!({"model": "llama-2-7b", "task": "train", "allow": ["lora", "qlora"]}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["job"]["allow"], serde_json::json!(["lora", "qlora"]));
}

fn diagnose(query: &str, body: Vec<u8>) -> Reply {
    send(
        Request::post(format!("/api/diagnose?{query}"))
            .header("host", ADDR)
            .header("content-type", "application/octet-stream")
            .body(Body::from(body))
            .unwrap(),
    )
}

/// The CLI reading the same bytes from stdin (`diagnose - --json`).
fn cli_stdin(args: &[&str], input: &[u8]) -> String {
    let out = common::vramfit().args(args).write_stdin(input.to_vec()).output().unwrap();
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn diagnose_is_the_clis_json() {
    for f in [
        "oom/pt22_cads4_shortage.txt",
        "memory_summary/01.txt",
        "snapshot/snapshot_shared.pickle",
        "scripts/train_bad.py",
    ] {
        let bytes = std::fs::read(fixture(&format!("diagnose/tests/fixtures/{f}"))).unwrap();
        let r = diagnose("name=%3Cstdin%3E", bytes.clone());
        assert_eq!(r.status, 200, "{f}: {}", r.body);
        let want: serde_json::Value = serde_json::from_str(&cli_stdin(&["diagnose", "-", "--json"], &bytes)).unwrap();
        assert_eq!(r.json(), want, "{f}");
    }
    // with the estimate beside it
    let oom = std::fs::read(fixture("diagnose/tests/fixtures/oom/pt22_cads4_shortage.txt")).unwrap();
    let r = diagnose("name=%3Cstdin%3E&model=llama-2-7b&task=train&batch=2", oom.clone());
    assert_eq!(r.status, 200, "{}", r.body);
    let want: serde_json::Value = serde_json::from_str(&cli_stdin(
        &["diagnose", "-", "--json", "--model", "llama-2-7b", "--task", "train", "--batch", "2"],
        &oom,
    ))
    .unwrap();
    assert_eq!(r.json(), want);
    assert!(r.json()["estimate"].is_object());
}

#[test]
fn charts_are_the_clis_svg() {
    let snap = std::fs::read(fixture("diagnose/tests/fixtures/snapshot/snapshot_shared.pickle")).unwrap();
    let r = diagnose("name=s.pickle&svg=true&svg_lang=zh", snap.clone());
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.content_type, "image/svg+xml");
    let dir = std::env::temp_dir().join(format!("vramfit-web-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("s.pickle");
    std::fs::write(&p, &snap).unwrap();
    let (out, _) = common::run(&["diagnose", p.to_str().unwrap(), "--svg", "-", "--svg-lang", "zh"], 0);
    assert_eq!(r.body.replace("s.pickle", "X"), out.replace(p.to_str().unwrap(), "X"));
    assert!(r.body.contains("峰值"), "Chinese labels");

    let r = post_json("/api/estimate", serde_json::json!({"model": "llama-2-7b", "gpu": "rtx-4090", "svg": true}));
    assert_eq!(r.content_type, "image/svg+xml");
    let (out, _) = common::run(&["estimate", "llama-2-7b", "--gpu", "rtx-4090", "--svg", "-"], 0);
    assert_eq!(r.body, out);
    let r = post_json(
        "/api/plan",
        serde_json::json!({"model": "llama-2-7b", "task": "train", "have": "rtx-3090", "svg": true}),
    );
    let (out, _) = common::run(&["plan", "llama-2-7b", "--task", "train", "--have", "rtx-3090", "--svg", "-"], 0);
    assert_eq!(r.body, out);
    let r =
        post_json("/api/mig", serde_json::json!({"gpu": "a100-80gb", "service": ["a=30GiB", "b=10GiB"], "svg": true}));
    let (out, _) = common::run(
        &["mig", "plan", "--gpu", "a100-80gb", "--service", "a=30GiB", "--service", "b=10GiB", "--svg", "-"],
        0,
    );
    assert_eq!(r.body, out);
    // no ladder without --have: the CLI's message
    let r = post_json("/api/plan", serde_json::json!({"model": "llama-2-7b", "svg": true}));
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"], cli_error(&["plan", "llama-2-7b", "--svg", "-"]));
}

#[test]
fn mig_and_check_are_the_clis_json() {
    let r = post_json(
        "/api/mig",
        serde_json::json!({"gpu": "a100-80gb", "service": ["chat=llama-2-7b:ctx=4096", "embed=6GiB"], "max_gpus": 1}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let want = cli(
        &[
            "mig",
            "plan",
            "--gpu",
            "a100-80gb",
            "--service",
            "chat=llama-2-7b:ctx=4096",
            "--service",
            "embed=6GiB",
            "--max-gpus",
            "1",
            "--json",
        ],
        0,
    );
    assert_eq!(r.json(), want);
    let r = post_json("/api/mig", serde_json::json!({"gpu": "a100-80gb", "service": "a=10GiB", "emit": "mig-parted"}));
    let (out, _) =
        common::run(&["mig", "plan", "--gpu", "a100-80gb", "--service", "a=10GiB", "--emit", "mig-parted"], 0);
    assert_eq!(r.body, out);

    let xml = fixture("hw/tests/fixtures/nvidia_smi/01.xml");
    let topo = fixture("hw/tests/fixtures/captures/h100-hbm3-590.topo.txt");
    let files = serde_json::json!({
        "xml": {"name": xml, "text": std::fs::read_to_string(&xml).unwrap()},
    });
    let r = post_json("/api/check", serde_json::json!({"files": files, "expect": "1xA100-40GB"}));
    assert_eq!(r.status, 200, "{}", r.body);
    // a MIG-enabled card where a whole one was rented: exit 1 in both
    assert_eq!(r.exit.as_deref(), Some("1"));
    assert_eq!(r.json(), cli(&["check", "--xml", &xml, "--expect", "1xA100-40GB", "--json"], 1));
    let r = post_json(
        "/api/check",
        serde_json::json!({"files": {"topo": {"name": topo, "text": std::fs::read_to_string(&topo).unwrap()}}, "expect": "8xA100-80GB"}),
    );
    assert_eq!(r.exit.as_deref(), Some("1"), "{}", r.body);
    assert_eq!(r.json(), cli(&["check", "--topo", &topo, "--expect", "8xA100-80GB", "--json"], 1));
}

// ------------------------------------------------------------------ bad input: 400 with the CLI's message

#[test]
fn bad_input_is_a_400_naming_the_field_with_the_clis_message() {
    let cases: &[(&str, serde_json::Value, &[&str], &str)] = &[
        (
            "/api/estimate",
            serde_json::json!({"model": "llama-2-7b", "batch": "abc"}),
            &["estimate", "--batch=abc", "--json", "--", "llama-2-7b"],
            "batch",
        ),
        (
            "/api/estimate",
            serde_json::json!({"model": "llama-2-7b", "zero": 2}),
            &["estimate", "llama-2-7b", "--zero", "2", "--json"],
            "zero",
        ),
        (
            "/api/estimate",
            serde_json::json!({"model": "llama-2-7b", "gpu": "rtx-9999"}),
            &["estimate", "llama-2-7b", "--gpu", "rtx-9999", "--json"],
            "gpu",
        ),
        (
            "/api/estimate",
            serde_json::json!({"model": "llama-2-7b", "gpu_mem": "24"}),
            &["estimate", "llama-2-7b", "--gpu-mem", "24", "--json"],
            "gpu_mem",
        ),
        (
            "/api/estimate",
            serde_json::json!({"model": "llama-2-7b", "task": "train", "lora_rank": 8}),
            &["estimate", "llama-2-7b", "--task", "train", "--lora-rank", "8", "--json"],
            "lora_rank",
        ),
        (
            "/api/estimate",
            serde_json::json!({"model": "llama-2-7b", "task": "fly"}),
            &["estimate", "--task=fly", "--json", "--", "llama-2-7b"],
            "task",
        ),
        (
            "/api/plan",
            serde_json::json!({"model": "llama-2-7b", "tokens": "lots"}),
            &["plan", "llama-2-7b", "--tokens", "lots", "--json"],
            "tokens",
        ),
        (
            "/api/plan",
            serde_json::json!({"model": "llama-2-7b", "have": "nope-gpu"}),
            &["plan", "llama-2-7b", "--have", "nope-gpu", "--json"],
            "have",
        ),
        (
            "/api/mig",
            serde_json::json!({"gpu": "a100-80gb", "service": ["chat=-1GiB"]}),
            &["mig", "plan", "--gpu", "a100-80gb", "--service", "chat=-1GiB", "--json"],
            "service",
        ),
        (
            "/api/check",
            serde_json::json!({"files": {"xml": {"name": "smi.xml", "text": "<nvidia_smi_log>"}}}),
            &[],
            "files",
        ),
    ];
    for (path, body, args, field) in cases {
        let r = post_json(path, body.clone());
        assert_eq!(r.status, 400, "{path} {body}: {}", r.body);
        let j = r.json();
        if !args.is_empty() {
            assert_eq!(j["error"], cli_error(args), "{path} {body}");
        }
        if *field != "files" && *field != "service" && *field != "gpu" && *field != "have" {
            assert_eq!(j["field"], *field, "{path} {body}: {}", r.body);
        }
        let e = j["error"].as_str().unwrap();
        assert!(!e.contains("panicked") && !e.contains("backtrace") && !e.contains(".rs:"), "no internals: {e}");
    }
    // a check upload that is not nvidia-smi output names the upload
    let r =
        post_json("/api/check", serde_json::json!({"files": {"xml": {"name": "smi.xml", "text": "<nvidia_smi_log>"}}}));
    assert!(r.json()["error"].as_str().unwrap().contains("smi.xml"), "{}", r.body);
    // diagnose: nothing recognisable, named like the CLI names stdin
    let r = diagnose("name=%3Cstdin%3E", b"hello".to_vec());
    assert_eq!(r.status, 400);
    let (_, err) = {
        let out = common::vramfit().args(["diagnose", "-", "--json"]).write_stdin("hello").output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    assert_eq!(r.json()["error"], err.trim().strip_prefix("vramfit: error: ").unwrap());
    let r = diagnose("kind=fish", b"x".to_vec());
    assert_eq!((r.status.as_u16(), r.json()["field"].as_str()), (400, Some("kind")));
}

/// The field of an error is the one the command's typed error carries
/// (never read from the message): the page marks that input.
#[test]
fn errors_carry_their_field_not_a_flag_found_in_the_text() {
    let cases: &[(&str, serde_json::Value, &str)] = &[
        // the message mentions `--list-presets`; the field is the model
        ("/api/estimate", serde_json::json!({}), "model"),
        ("/api/plan", serde_json::json!({"tokens": "1B"}), "model"),
        ("/api/estimate", serde_json::json!({"model": "llama-2-7x"}), "model"),
        ("/api/estimate", serde_json::json!({"model": "llama-2-7b", "gpu": "rtx-9999"}), "gpu"),
        ("/api/estimate", serde_json::json!({"config_json": "not json"}), "config_json"),
        // core's validate names its field; `--seq`/`--context` is the request's `context`
        ("/api/estimate", serde_json::json!({"model": "gpt2", "task": "train", "context": 5000}), "context"),
        ("/api/estimate", serde_json::json!({"model": "llama-2-7b", "engine": "vllm", "task": "train"}), "engine"),
        ("/api/mig", serde_json::json!({"gpu": "a100-80gb", "service": ["chat=-1GiB"]}), "service"),
        ("/api/check", serde_json::json!({"files": {"text": "garbage"}}), "files"),
    ];
    for (path, body, field) in cases {
        let r = post_json(path, body.clone());
        assert_eq!(r.status, 400, "{path} {body}: {}", r.body);
        assert_eq!(r.json()["field"], *field, "{path} {body}: {}", r.body);
    }
    let r = diagnose(
        "model=llama-2-7b",
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.".to_vec(),
    );
    assert_eq!((r.status.as_u16(), r.json()["field"].as_str()), (400, Some("gpu")), "{}", r.body);
}

/// Every flag of the CLI that applies is a field: `engine` and the serving
/// engines' sizes reach the same code path as on the command line.
#[test]
fn the_engine_and_every_workload_flag_are_fields() {
    let r = post_json(
        "/api/estimate",
        serde_json::json!({"model": "llama-2-7b", "engine": "vllm", "gpu": "a100-80gb", "max_num_seqs": 128}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let want = cli(
        &["estimate", "llama-2-7b", "--engine", "vllm", "--gpu", "a100-80gb", "--max-num-seqs", "128", "--json"],
        0,
    );
    assert_eq!(r.json(), want);
    let r = post_json(
        "/api/estimate",
        serde_json::json!({"model": "llama-2-7b", "task": "qlora", "loss": "chunked", "no_double_quant": true}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        cli(&["estimate", "llama-2-7b", "--task", "qlora", "--loss", "chunked", "--no-double-quant", "--json"], 0)
    );
    // what a request cannot set is refused by name
    for (field, words) in [("ctx_size", "unknown field"), ("offline", "unknown field"), ("json", "unknown field")] {
        let r = post_json("/api/estimate", serde_json::json!({"model": "llama-2-7b", field: 1}));
        assert_eq!(r.status, 400, "{field}");
        assert!(r.json()["error"].as_str().unwrap().contains(words), "{field}: {}", r.body);
    }
}

/// A token length as the page's URL writes it (`context=128k`) is read as
/// the CLI reads it (k = 1024), or refused naming the field: never dropped.
#[test]
fn a_context_of_128k_is_read_or_refused_by_name() {
    let r = post_json("/api/estimate", serde_json::json!({"model": "llama-3.1-8b", "context": "128k"}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), cli(&["estimate", "llama-3.1-8b", "--context", "131072", "--json"], 0));
    assert_eq!(r.json()["workload"]["seq"], 131_072);
    let r = post_json("/api/plan", serde_json::json!({"model": "llama-3.1-8b", "context": "8K", "top": 2}));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json(), cli(&["plan", "llama-3.1-8b", "--context", "8192", "--top", "2", "--json"], 0));
    for (body, field) in [
        (serde_json::json!({"model": "llama-3.1-8b", "context": "128x"}), "context"),
        (serde_json::json!({"model": "llama-3.1-8b", "max_num_batched_tokens": "lots"}), "max_num_batched_tokens"),
    ] {
        let r = post_json("/api/estimate", body.clone());
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(r.json()["field"], field, "{}", r.body);
        assert!(r.json()["error"].as_str().unwrap().contains("k = 1024"), "{}", r.body);
    }
    // vLLM's names are the CLI's aliases, not fields of their own (as `seq` is not)
    for alias in ["max_model_len", "tensor_parallel_size", "num_gpus", "seq"] {
        assert!(!Endpoint::Estimate.fields().contains(&alias), "{alias}");
    }
}

/// docs/web.md and docs/schema.md list every field of every endpoint.
#[test]
fn the_docs_list_every_field() {
    for doc in ["docs/web.md", "docs/schema.md"] {
        let text = std::fs::read_to_string(fixture(&format!("../{doc}"))).unwrap();
        for ep in Endpoint::ALL {
            for f in ep.fields() {
                assert!(text.contains(&format!("`{f}`")), "{doc} does not list /api/{} field `{f}`", ep.name());
            }
        }
    }
}

#[test]
fn no_path_from_a_request_is_opened() {
    let dir = std::env::temp_dir().join(format!("vramfit-web-paths-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("config.json");
    std::fs::copy(fixture("ingest/tests/fixtures/configs/02_llama-2-7b-arch.json"), &cfg).unwrap();
    let c = cfg.to_str().unwrap();
    for model in
        [c, dir.to_str().unwrap(), "/etc/passwd", "./config.json", "x.gguf", "a/b.gguf", "tmp/config.json", "~/x"]
    {
        let r = post_json("/api/estimate", serde_json::json!({ "model": model }));
        assert_eq!(r.status, 400, "{model}: {}", r.body);
        assert_eq!(r.json()["field"], "model", "{model}");
    }
    for (path, field) in [
        ("/api/estimate", "deepspeed"),
        ("/api/estimate", "adapter_config"),
        ("/api/plan", "catalog"),
        ("/api/mig", "lgip"),
        ("/api/check", "xml"),
    ] {
        let r = post_json(path, serde_json::json!({ field: c }));
        assert_eq!(r.status, 400, "{path} {field}: {}", r.body);
        assert!(r.json()["error"].as_str().unwrap().contains("names a file"), "{}", r.body);
    }
    // a MIG service naming a path is refused before any lookup
    let r = post_json("/api/mig", serde_json::json!({"gpu": "a100-80gb", "service": [format!("a={c}")]}));
    assert_eq!(r.status, 400, "{}", r.body);
    assert!(r.json()["error"].as_str().unwrap().contains("looks like a path"), "{}", r.body);
    // a hub id the cache does not hold is not fetched: the server was not started with --allow-hub
    let r = post_json("/api/estimate", serde_json::json!({"model": "someone/not-a-preset-model"}));
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().unwrap().contains("--allow-hub"), "{}", r.body);
    // diagnose --svg names no file here: the chart comes back
    let r = diagnose("svg=/tmp/x.svg", b"x".to_vec());
    assert_eq!(r.status, 400, "{}", r.body);
}

// ------------------------------------------------------------------ limits, origin, headers

#[test]
fn oversized_bodies_are_a_413() {
    for ep in Endpoint::ALL {
        let n = ep.body_limit() + 1;
        let r = if ep == Endpoint::Diagnose {
            diagnose("", vec![b'a'; n])
        } else {
            post(&format!("/api/{}", ep.name()), vec![b' '; n])
        };
        assert_eq!(r.status, 413, "/api/{}", ep.name());
        assert!(r.json()["error"].as_str().unwrap().contains(&format!("{}-byte limit", ep.body_limit())), "{}", r.body);
    }
    // a check input over the CLI's cap for its kind
    let big = "x".repeat((4 << 20) + 1);
    let r = post_json("/api/check", serde_json::json!({"files": {"nccl": big}}));
    assert_eq!(r.status, 413, "{}", &r.body[..200.min(r.body.len())]);
}

#[test]
fn requests_from_elsewhere_are_refused() {
    let evil = send(Request::get("/").header("host", "evil.example:8080").body(Body::empty()).unwrap());
    assert_eq!(evil.status, 403);
    let rebind = send(Request::post("/api/estimate").header("host", "attacker.test").body(Body::from("{}")).unwrap());
    assert_eq!(rebind.status, 403);
    let cross = send(
        Request::post("/api/estimate")
            .header("host", ADDR)
            .header("origin", "http://evil.example")
            .body(Body::from(r#"{"model":"llama-2-7b"}"#))
            .unwrap(),
    );
    assert_eq!(cross.status, 403);
    let same = send(
        Request::post("/api/estimate")
            .header("host", ADDR)
            .header("origin", format!("http://{ADDR}"))
            .body(Body::from(r#"{"model":"llama-2-7b"}"#))
            .unwrap(),
    );
    assert_eq!(same.status, 200);
    let put = send(Request::put("/api/estimate").header("host", ADDR).body(Body::empty()).unwrap());
    assert_eq!(put.status, 405);
    let get = send(Request::get("/api/estimate").header("host", "localhost:8080").body(Body::empty()).unwrap());
    assert_eq!(get.status, 405);
    let missing = send(Request::get("/etc/passwd").header("host", ADDR).body(Body::empty()).unwrap());
    assert_eq!(missing.status, 404);
    assert_eq!(missing.csp.as_deref(), Some(CSP));
}

#[test]
fn the_page_and_its_assets() {
    for (path, ty) in [
        ("/", "text/html"),
        ("/app.js", "text/javascript"),
        ("/app.css", "text/css"),
        ("/favicon.svg", "image/svg+xml"),
        ("/api/catalog", "application/json"),
    ] {
        let r = send(Request::get(path).header("host", ADDR).body(Body::empty()).unwrap());
        assert_eq!(r.status, 200, "{path}");
        assert!(r.content_type.starts_with(ty), "{path}: {}", r.content_type);
        assert_eq!(r.csp.as_deref(), Some(CSP), "{path}");
    }
    // no address outside this server in the page
    let page = vramfit_cli::serve::assets::INDEX_HTML.to_string()
        + vramfit_cli::serve::assets::APP_JS
        + vramfit_cli::serve::assets::APP_CSS;
    for needle in ["http://", "https://", "//cdn", "@import", "fonts.g", "googleapis", "analytics"] {
        assert!(!page.contains(needle), "the page mentions {needle}");
    }
    assert!(
        vramfit_cli::serve::assets::page_bytes() < 200_000,
        "page is {} bytes",
        vramfit_cli::serve::assets::page_bytes()
    );
    let c = send(Request::get("/api/catalog").header("host", ADDR).body(Body::empty()).unwrap()).json();
    assert!(c["presets"].as_array().unwrap().iter().any(|p| p["name"] == "llama-2-7b"));
    assert!(c["gpus"].as_array().unwrap().iter().any(|g| g["id"] == "rtx-4090"));
    assert_eq!(c["choices"]["estimate"]["task"], serde_json::json!(["infer", "train", "lora", "qlora"]));
    assert_eq!(c["body_limits"]["diagnose"], request::DIAGNOSE_BODY_LIMIT);
}

// ------------------------------------------------------------------ decoders never panic

fn any_json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map(serde_json::Value::Number).unwrap_or_default()),
        "\\PC{0,12}".prop_map(serde_json::Value::from),
        prop_oneof![
            Just("llama-2-7b"),
            Just("a100-80gb"),
            Just("24GiB"),
            Just("int4"),
            Just("train"),
            Just("-1"),
            Just("1e30")
        ]
        .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(serde_json::Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..3)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn field_name(ep: Endpoint) -> impl Strategy<Value = String> {
    let mut names: Vec<String> = ep.fields().iter().map(|s| s.to_string()).collect();
    names.extend(["model", "config_json", "files", "name", "deepspeed", "nope"].map(String::from));
    prop::sample::select(names)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn json_decoder_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256), ep in prop::sample::select(Endpoint::ALL.to_vec())) {
        let _ = request::decode_json(ep, &bytes);
    }

    #[test]
    fn query_decoder_never_panics(q in "\\PC{0,200}", ep in prop::sample::select(Endpoint::ALL.to_vec())) {
        if let Ok(d) = request::decode_query(ep, &q) {
            let _ = request::argv(ep, &d);
        }
    }

    /// Random requests made of real field names run the real command: an
    /// answer or a 4xx, never a panic or a 5xx.
    #[test]
    fn random_requests_get_an_answer_or_a_4xx(
        (ep, fields) in prop::sample::select(vec![Endpoint::Estimate, Endpoint::Plan, Endpoint::Mig, Endpoint::Check])
            .prop_flat_map(|ep| (Just(ep), prop::collection::vec((field_name(ep), any_json()), 0..5))),
    ) {
        let mut obj: serde_json::Map<String, serde_json::Value> = fields.into_iter().collect();
        if ep != Endpoint::Mig && !obj.contains_key("model") {
            obj.insert("model".into(), "llama-2-7b".into());
        }
        let body = serde_json::Value::Object(obj);
        if let Ok(d) = request::decode_json(ep, body.to_string().as_bytes()) {
            match vramfit_cli::serve::api::run(&Settings::default(), ep, d, None) {
                Ok(a) => prop_assert!(a.exit <= 1),
                Err(e) => prop_assert!((400..500).contains(&e.status), "{body}: {} {}", e.status, e.message),
            }
        }
    }
}

// ------------------------------------------------------------------ the binary

/// `vramfit serve --port 0` says where it listens and serves the page there;
/// a port in use is a clear error (exit 2); another address than loopback warns.
#[test]
fn the_binary_serves_and_says_where() {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vramfit"))
        .args(["serve", "--port", "0"])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    assert!(line.starts_with("vramfit: serving http://127.0.0.1:"), "{line}");
    let addr = line.split("http://").nth(1).unwrap().split('/').next().unwrap().to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    write!(s, "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut page = String::new();
    s.read_to_string(&mut page).unwrap();
    assert!(
        page.starts_with("HTTP/1.1 200") && page.contains("<title>vramfit</title>"),
        "{}",
        &page[..200.min(page.len())]
    );

    // the same port again: in use
    let port = addr.rsplit(':').next().unwrap();
    let out = common::vramfit().args(["serve", "--port", port]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains(&format!("--port {port}: already in use")), "{e}");
    child.kill().unwrap();
    child.wait().unwrap();

    // not loopback: a warning before anything is served
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_vramfit"))
        .args(["serve", "--port", "0", "--host", "0.0.0.0"])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.contains("warning") && first.contains("other machines on the network"), "{first}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// `serve --open` where the opener exits non-zero (a machine with no
/// browser: `xdg-open` starts and fails) says so and keeps serving.
#[cfg(unix)]
#[test]
fn serve_open_without_a_browser_says_so() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("vramfit-no-browser-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for opener in ["xdg-open", "open"] {
        let p = dir.join(opener);
        std::fs::write(&p, "#!/bin/sh\necho 'no method available' >&2\nexit 3\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    let out = common::vramfit()
        .args(["serve", "--open", "--port", "0"])
        .env("PATH", path)
        .timeout(std::time::Duration::from_secs(5))
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("vramfit: serving http://127.0.0.1:"), "{stderr}");
    assert!(stderr.contains("--open could not open a browser") && stderr.contains("in a browser yourself"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}
