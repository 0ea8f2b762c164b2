//! Strings echoed from input never reach the terminal raw (issue 15,
//! terminal injection): for each input kind — a config's name, a catalogue
//! offer's name, a DeepSpeed key, a module name quoted from an OOM
//! traceback, a GGUF's `general.name`, a model argument quoted in an error —
//! the output holds no ESC (0x1b) or BEL (0x07), and the string is shown
//! escaped (`\x1b`). Where the input can carry a line break, the escaped
//! line break on the same line shows the renderer escaped the field
//! (report::format::shown), not only the last-resort pass in main (which
//! keeps line breaks).

mod common;

use common::vramfit;
use std::path::{Path, PathBuf};

/// ESC ] 0 ; … BEL sets the terminal title; ESC [ 2 J clears the screen.
const EVIL: &str = "evil\u{1b}]0;pwned\u{7}\u{1b}[2J";
const SHOWN: &str = "evil\\x1b]0;pwned\\x07\\x1b[2J";

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vramfit-cli-inject-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Run, expect `code`, and check neither stream holds a raw ESC or BEL.
fn clean_run(args: &[&str], code: i32) -> (String, String) {
    let out = vramfit().args(args).output().expect("runs");
    let (so, se) = (String::from_utf8_lossy(&out.stdout).to_string(), String::from_utf8_lossy(&out.stderr).to_string());
    assert_eq!(out.status.code(), Some(code), "{args:?}\nstdout:\n{so}\nstderr:\n{se}");
    for (name, s) in [("stdout", &so), ("stderr", &se)] {
        assert!(!s.contains('\u{1b}') && !s.contains('\u{7}'), "{args:?}: raw ESC/BEL on {name}:\n{s:?}");
    }
    (so, se)
}

fn fixture(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../").join(rel).display().to_string()
}

#[test]
fn config_name() {
    let dir = temp("config");
    let mut cfg: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("ingest/tests/fixtures/configs/01_llama-3.1-8b.json")).unwrap(),
    )
    .unwrap();
    cfg["_name_or_path"] = format!("{EVIL}\nllama: FITS").into();
    let p = dir.join("config.json");
    std::fs::write(&p, cfg.to_string()).unwrap();
    let (so, _) = clean_run(&["estimate", p.to_str().unwrap(), "--gpu", "a100-80gb"], 0);
    assert!(so.lines().next().unwrap().starts_with(&format!("{SHOWN}\\nllama: FITS — ")), "{so}");
    // plan prints the name too
    let (so, _) = clean_run(&["plan", p.to_str().unwrap()], 0);
    assert!(so.contains(&format!("{SHOWN}\\nllama: FITS (")), "{so}");
}

#[test]
fn catalogue_offer_name() {
    let dir = temp("catalog");
    let p = dir.join("offers.toml");
    std::fs::write(
        &p,
        r#"[[offer]]
id = "evil/offer\u001b[31m"
provider = "evil"
name = "Evil \u001b]0;pwned\u0007\nA100"
gpu = "a100-80gb"
gpus = 1
link = "pcie"
monthly = 10
currency = "CNY"
flags = ["check the live price"]
source = "a test of terminal injection"
"#,
    )
    .unwrap();
    let (so, _) = clean_run(&["plan", "llama-2-7b", "--catalog", p.to_str().unwrap(), "--wide"], 0);
    assert!(so.contains("Recommended: 1 × A100 80GB SXM4 — Evil \\x1b]0;pwned\\x07\\nA100 ["), "{so}");
    assert!(so.contains("evil/offer\\x1b[31m"), "{so}");
}

#[test]
fn deepspeed_key() {
    let dir = temp("ds");
    let p = dir.join("ds.json");
    let ds = serde_json::json!({
        "train_micro_batch_size_per_gpu": 1,
        "zero_optimization": { "stage": 2, (format!("{EVIL}\nkey")): 1 },
        "bf16": { "enabled": true }
    });
    std::fs::write(&p, ds.to_string()).unwrap();
    // estimate: the unused key is a note in the report (stdout)
    let (so, _) = clean_run(&["estimate", "llama-2-7b", "--task", "train", "--deepspeed", p.to_str().unwrap()], 0);
    assert!(so.contains(&format!("zero_optimization.{SHOWN}\\nkey")), "{so}");
    // plan: the same note goes to stderr
    let (_, se) = clean_run(&["plan", "llama-2-7b", "--task", "train", "--deepspeed", p.to_str().unwrap()], 0);
    assert!(se.contains(&format!("zero_optimization.{SHOWN}")), "{se}");
}

#[test]
fn oom_text_excerpt() {
    let dir = temp("oom");
    let p = dir.join("oom.log");
    std::fs::write(
        &p,
        format!(
            "Traceback (most recent call last):\n  File \"/src/train.py\", line 10, in <module>\n    out = model(x)\n  File \"/src/modeling_{EVIL}.py\", line 42, in forward\n    h = self.mlp(x)\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 23.69 GiB total capacity; 20.1 GiB already allocated; 1.5 GiB free; 21.0 GiB reserved in total by PyTorch)\n"
        ),
    )
    .unwrap();
    let (so, _) = clean_run(&["diagnose", p.to_str().unwrap(), "--wide"], 0);
    assert!(so.contains(&format!("(forward of modeling_{SHOWN})")), "{so}");
}

#[test]
fn gguf_general_name() {
    use vramfit_ingest::gguf::writer::fixtures::{writer, Shape};
    use vramfit_ingest::gguf::writer::WValue;
    let dir = temp("gguf");
    let p = dir.join("evil.gguf");
    let s = Shape::llama(2, 256, 4, 2, 512, 32);
    writer(&s)
        .set("general.name", WValue::Str(format!("{EVIL}\nfake line")))
        .set("general.architecture", WValue::Str("llama".into()))
        .write_sparse(&p)
        .unwrap();
    let (so, _) = clean_run(&["estimate", p.to_str().unwrap()], 0);
    assert!(so.lines().next().unwrap().starts_with(&format!("{SHOWN}\\nfake line — llama")), "{so}");
}

#[test]
fn model_argument_quoted_in_an_error() {
    let (_, se) = clean_run(&["estimate", EVIL], 2);
    assert!(se.contains("unknown model 'evil\\"), "{se}");
}
