//! `vramfit plan` through the real binary: the seed's cases, the JSON
//! schema, catalogue files (another currency, bad files), --emit, bad input.

mod common;
use common::{json, run};

const GIB: u64 = 1 << 30;

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("vramfit-plan-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn llama13b_fp16_inference_on_a_3090_goes_to_the_next_card() {
    let v = json(&["plan", "llama-2-13b", "--dtype", "fp16", "--have", "rtx-3090", "--json"], 0);
    assert_eq!(v["schema"], 1);
    assert_eq!(v["command"], "plan");
    assert_eq!(v["task"], "inference");
    let rec = &v["recommended"];
    assert_eq!(rec["gpus"], 1);
    assert!(rec["gpu_memory_bytes"].as_u64().unwrap() > 24 * GIB);
    assert!(rec["per_gpu_bytes"].as_u64().unwrap() <= rec["gpu_memory_bytes"].as_u64().unwrap());
    assert!(v["have_gap_bytes"].as_i64().unwrap() > 0);
    assert_eq!(v["more_cards"]["on_have"]["gpus"], 2);
    assert!(v["reason"].as_str().unwrap().contains("not worth sharding"));
    // prices stay ranges with their currency
    for r in v["ranked"].as_array().unwrap() {
        assert_eq!(r["currency"], "CNY");
        let m = &r["monthly"];
        assert!(m["low"].as_f64().unwrap() <= m["high"].as_f64().unwrap());
    }
    // the H100 MIG offer appears only as MIG instances (at most 4g.40gb), priced pro rata
    let mig: Vec<&serde_json::Value> = v["ranked"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["offer_id"].as_str().unwrap().starts_with("cn-guide/h100-mig@"))
        .collect();
    assert!(!mig.is_empty());
    for r in mig {
        assert!(r["gpu_memory_bytes"].as_u64().unwrap() <= 40 * GIB, "{r}");
        assert!(r["monthly"]["high"].as_f64().unwrap() < 18000.0);
    }
}

#[test]
fn llama13b_human_report_snapshot() {
    let (out, _) = run(&["plan", "llama-2-13b", "--dtype", "fp16", "--have", "rtx-3090", "--top", "5"], 0);
    assert!(out.contains("(1) Software switches"));
    assert!(out.contains("(2) More cards"));
    assert!(out.contains("(3) A bigger single card"));
    insta::assert_snapshot!("plan_llama13b_fp16_have_3090", out);
}

#[test]
fn allow_quant_lets_int8_fit_the_3090() {
    let v = json(&["plan", "llama-2-13b", "--dtype", "fp16", "--have", "rtx-3090", "--allow", "quant", "--json"], 0);
    let steps = v["software"]["steps"].as_array().unwrap();
    let int8 = steps.iter().find(|s| s["name"] == "int8 weights").unwrap();
    assert_eq!(int8["status"], "applied");
    assert_eq!(int8["fits"], true);
    assert!(int8["saved_bytes"].as_i64().unwrap() > 10 * GIB as i64);
}

#[test]
fn another_currency_just_works() {
    let cat = temp_file(
        "usd.toml",
        r#"
replace = true

[[offer]]
id = "acme/a100-80"
provider = "acme"
name = "A100 80GB hourly"
gpu = "a100-80gb"
hourly = [1.5, 2.2]
currency = "USD"
flags = ["example"]
"#,
    );
    let v = json(
        &["plan", "llama-2-13b", "--dtype", "fp16", "--catalog", cat.to_str().unwrap(), "--hours", "10", "--json"],
        0,
    );
    let rec = &v["recommended"];
    assert_eq!(rec["currency"], "USD");
    assert_eq!(rec["hourly_prorated"], false);
    // 10 h × 1.5–2.2 USD/h
    assert!((rec["job_cost"]["low"].as_f64().unwrap() - 15.0).abs() < 1e-9);
    assert!((rec["job_cost"]["high"].as_f64().unwrap() - 22.0).abs() < 1e-9);
    assert!(v["ranked"].as_array().unwrap().iter().all(|r| r["currency"] == "USD"));
    std::fs::remove_file(cat).ok();
}

#[test]
fn bad_catalogue_names_file_line_and_field() {
    let cat = temp_file(
        "bad.toml",
        "[[offer]]\nid = \"x/y\"\nprovider = \"x\"\nname = \"y\"\ngpu = \"t4\"\nmonthly = \"cheap\"\ncurrency = \"EUR\"\n",
    );
    let path = cat.to_str().unwrap().to_string();
    let (_, err) = run(&["plan", "llama-2-7b", "--catalog", &path], 2);
    assert!(err.contains(&format!("{path}:6:")), "{err}");
    assert!(err.contains("field `monthly`"), "{err}");
    let cat2 = temp_file("bad2.toml", "[[offer]]\nid = \"x/y\"\nprovider = \"x\"\nname = \"y\"\ngpu = \"rtx-9090\"\nmonthly = 5\ncurrency = \"EUR\"\n");
    let (_, err) = run(&["plan", "llama-2-7b", "--catalog", cat2.to_str().unwrap()], 2);
    assert!(err.contains(":5: field `gpu`: unknown GPU id 'rtx-9090'"), "{err}");
    std::fs::remove_file(cat).ok();
    std::fs::remove_file(cat2).ok();
}

#[test]
fn bad_input_exits_2() {
    let (_, err) = run(&["plan", "llama-2-7b", "--have", "rtx-3080"], 2);
    assert!(err.contains("did you mean"), "{err}");
    run(&["plan", "llama-2-7b", "--tokens", "1e9", "--hours", "0"], 2);
    let (_, err) = run(&["plan", "llama-2-7b", "--tokens", "lots"], 2);
    assert!(err.contains("--tokens"), "{err}");
    let (_, err) = run(&["plan", "llama-2-7b", "--emit", "deepspeed"], 2);
    assert!(err.contains("inference"), "{err}");
    let (_, err) = run(&["plan", "llama-2-7b", "--allow", "lora"], 2);
    assert!(err.contains("training"), "{err}");
    run(&["plan", "llama-2-7b", "--catalog", "/nonexistent/vramfit.toml"], 2);
    run(&["plan", "llama-2-7b", "--mfu", "ampere=3"], 2);
}

#[test]
fn nothing_fits_exits_1() {
    // the whole 70B in fp32 with a million-token context fits no offer
    let (out, _) = run(&["plan", "llama-2-70b", "--dtype", "fp32", "--context", "1000000"], 1);
    assert!(out.contains("Recommended: nothing"), "{out}");
}
