//! Chinese text output (`--lang zh`, `LANG=zh_CN.UTF-8`; issue 24 item 8):
//! every sentence of a corpus of reports has a Chinese version in the
//! catalogue (crates/report/src/i18n/zh.txt), the verdict reads in
//! Chinese, and `--json` is the same in every language.

mod common;
use common::{run, vramfit};
use vramfit_report::i18n::{localize_json, localize_text, Lang};

/// Reports whose every sentence must have Chinese: `estimate` across
/// tasks, fits and misses, capacity and the sweep (the README tour's
/// estimate lines among them), a training plan, a diagnosis, a check
/// and MIG plans. Add a case here when a renderer gains a
/// sentence. Not yet here: `--explain`.
const CORPUS: &[(&[&str], i32)] = &[
    (&["estimate", "llama-3.1-8b", "--gpu", "rtx-4090"], 0),
    (&["estimate", "llama-2-7b", "--batch", "32", "--context", "4096"], 0),
    (&["estimate", "mistral-7b", "--batch", "32", "--context", "4096"], 0),
    (&["estimate", "meta-llama/Llama-3.1-8B", "--gpu", "a100-80gb", "--gpu-util", "0.9", "--context", "8192"], 0),
    (&["estimate", "mixtral-8x7b", "--tp", "2", "--kv-dtype", "fp8"], 0),
    (&["estimate", "llama-2-13b", "--gpu", "rtx-4090"], 1),
    (&["estimate", "llama-2-13b", "--gpu", "rtx-4090", "--sweep"], 1),
    (&["estimate", "llama-3.1-8b", "--gpu", "h100", "--sweep"], 0),
    (
        &[
            "estimate",
            "llama-2-7b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--optimizer",
            "adamw",
            "--batch",
            "4",
            "--seq",
            "2048",
        ],
        0,
    ),
    (
        &[
            "estimate",
            "llama-2-13b",
            "--task",
            "qlora",
            "--lora-rank",
            "16",
            "--lora-targets",
            "all-linear",
            "--checkpointing",
            "full",
            "--gpu",
            "rtx-3090",
        ],
        0,
    ),
    (&["estimate", "llama-2-13b", "--task", "lora", "--gpu", "rtx-4090", "--sweep"], 1),
    (&["estimate", "llama-2-7b", "--task", "train", "--gpu", "a100-80gb", "--sweep"], 1),
    (&["estimate", "llama-2-7b", "--gpu-mem", "24GiB", "--gpu-util", "0.9"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/composed_multi_rank_log.txt"], 0),
    (&["check", "--xml", "../hw/tests/fixtures/nvidia_smi/01.xml", "--expect", "1xA100-40GB"], 1),
    // service names are the user's (kept as given): names that are not English words here
    (
        &[
            "mig",
            "plan",
            "--gpu",
            "a100-40gb",
            "--service",
            "chat-1=12GiB",
            "--service",
            "embed-2=4GiB",
            "--service",
            "rag-3=llama-3.2-3b:ctx=8192,conc=4",
        ],
        0,
    ),
    (&["mig", "plan", "--gpu", "a100-40gb", "--service", "chat-1=12GiB"], 0),
    (&["plan", "llama-2-7b", "--task", "train", "--have", "rtx-3090", "--allow", "lora,qlora"], 0),
    // inference plans, a serving engine's cap, clusters, a deadline, a launcher, expert parallelism
    (&["plan", "llama-2-13b", "--dtype", "fp16", "--have", "rtx-3090"], 0),
    (&["plan", "llama-3.1-70b", "--concurrency", "32", "--context", "8192", "--engine", "vllm"], 0),
    (&["plan", "llama-3.1-405b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "1B"], 0),
    (&["plan", "llama-3.1-405b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "1B", "--hours", "24"], 0),
    (&["plan", "llama-3.1-405b", "--task", "train", "--precision", "mixed-bf16", "--tokens", "1B", "--hours", "12"], 1),
    (&["plan", "llama-2-7b", "--task", "train", "--launcher", "deepspeed"], 0),
    (&["estimate", "deepseek-v3", "--engine", "vllm", "--tp", "8", "--ep", "8", "--dtype", "fp8", "--gpu", "h200"], 0),
    // expert-parallel layouts in the plan (issue 21 item 4), data-parallel attention in the estimate
    (&["plan", "deepseek-v3", "--dtype", "fp8", "--concurrency", "64", "--context", "8192"], 0),
    (&["plan", "deepseek-v3", "--dtype", "fp8", "--concurrency", "64", "--context", "8192", "--engine", "vllm"], 0),
    (
        &[
            "estimate",
            "deepseek-v3",
            "--engine",
            "sglang",
            "--tp",
            "8",
            "--ep",
            "8",
            "--dp-attention",
            "8",
            "--dtype",
            "fp8",
            "--concurrency",
            "64",
            "--gpu",
            "h200",
        ],
        0,
    ),
    // GGUF under llama.cpp: a MoE file on one card, a dense one split with the host, a recurrent one
    (&["estimate", "../../fuzz/seeds/ingest_gguf/moe_f16.gguf", "--gpu", "rtx-4090"], 0),
    (&["estimate", "../../fuzz/seeds/ingest_gguf/dense_f16.gguf", "--gpu", "rtx-4090", "-ngl", "1", "-np", "4"], 0),
    (&["estimate", "../../fuzz/seeds/ingest_gguf/mamba.gguf", "--gpu", "rtx-4090"], 0),
];

#[test]
fn every_sentence_of_the_corpus_has_chinese() {
    let mut missing: Vec<String> = Vec::new();
    for (args, code) in CORPUS {
        let mut a = args.to_vec();
        a.push("--wide");
        let (en, _) = run(&a, *code);
        for m in localize_text(&en, Lang::Zh).missing {
            let line = format!("{m}\n      (from: vramfit {})", args.join(" "));
            if !missing.contains(&line) {
                missing.push(line);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} sentence(s) have no Chinese. Add each to crates/report/src/i18n/zh.txt as an `en:` line \
         (the English exactly as printed, each variable part a typed hole: {{b}} size, {{n}} number, \
         {{w}} one word, {{t}} verbatim text, {{s}} a nested sentence) and a `zh:` line placing the holes \
         as {{1}}, {{2}}, … (the file's head explains; `cargo test -p vramfit-report i18n` checks the entry):\n\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

/// JSON reports whose sentences the web page shows in Chinese (it asks
/// the API with `lang: "zh"`): plan reasons, notes, offer names and steps;
/// diagnose verdicts, causes, fixes and reasoning; check findings.
const JSON_CORPUS: &[(&[&str], i32)] = &[
    (&["plan", "llama-2-13b", "--task", "train", "--have", "rtx-3090"], 0),
    (&["diagnose", "../diagnose/tests/fixtures/oom/composed_multi_rank_log.txt"], 0),
    (&["check", "--xml", "../hw/tests/fixtures/nvidia_smi/01.xml", "--expect", "1xA100-40GB"], 1),
    (&["estimate", "mixtral-8x7b", "--tp", "2", "--kv-dtype", "fp8"], 0),
];

#[test]
fn every_sentence_the_page_shows_for_the_json_corpus_has_chinese() {
    let mut missing: Vec<String> = Vec::new();
    for (args, code) in JSON_CORPUS {
        let mut a = args.to_vec();
        a.push("--json");
        let (out, _) = run(&a, *code);
        let mut v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e})"));
        for m in localize_json(&mut v, Lang::Zh) {
            let line = format!("{m}\n      (from: vramfit {} --json)", args.join(" "));
            if !missing.contains(&line) {
                missing.push(line);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} sentence(s) of JSON reports have no Chinese (the web page shows them in English). Add each to \
         crates/report/src/i18n/zh.txt as an `en:`/`zh:` pair (the file's head explains the holes):\n\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

#[test]
fn estimate_lang_zh_prints_its_verdict_in_chinese() {
    let (zh, _) = run(&["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--lang", "zh"], 0);
    assert!(zh.contains("RTX 4090：放得下——需要 16.46 GiB"), "{zh}");
    assert!(zh.contains("峰值阶段：prefill"), "{zh}");
    assert!(!zh.contains("FITS"), "{zh}");
    let (miss, _) = run(&["estimate", "llama-2-13b", "--gpu", "rtx-4090", "--lang", "zh"], 1);
    assert!(miss.contains("RTX 4090：放不下——需要"), "{miss}");
    assert!(miss.contains("（缺 "), "{miss}");
}

#[test]
fn lang_env_gives_chinese_and_the_flag_wins() {
    let args = ["estimate", "llama-3.1-8b", "--gpu", "rtx-4090"];
    let flag = vramfit().args(args).args(["--lang", "zh"]).output().expect("runs");
    let env = vramfit().args(args).env("LANG", "zh_CN.UTF-8").output().expect("runs");
    assert_eq!(String::from_utf8_lossy(&env.stdout), String::from_utf8_lossy(&flag.stdout));
    assert!(String::from_utf8_lossy(&env.stdout).contains("放得下"));
    // LC_ALL outranks LANG, and --lang outranks both
    let c = vramfit().args(args).env("LANG", "zh_CN.UTF-8").env("LC_ALL", "C").output().expect("runs");
    assert!(String::from_utf8_lossy(&c.stdout).contains("FITS"));
    let en = vramfit().args(args).args(["--lang", "en"]).env("LANG", "zh_CN.UTF-8").output().expect("runs");
    assert!(String::from_utf8_lossy(&en.stdout).contains("RTX 4090: FITS"));
}

#[test]
fn json_is_the_same_in_every_language() {
    for args in [
        &["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--json"][..],
        &["estimate", "llama-2-13b", "--gpu", "rtx-4090", "--sweep", "--json"][..],
    ] {
        let en = vramfit().args(args).output().expect("runs");
        let zh = vramfit().args(args).args(["--lang", "zh"]).output().expect("runs");
        let env = vramfit().args(args).env("LANG", "zh_CN.UTF-8").output().expect("runs");
        assert_eq!(en.stdout, zh.stdout, "{args:?}");
        assert_eq!(en.stdout, env.stdout, "{args:?}");
        assert_eq!(en.status.code(), zh.status.code());
    }
}

#[test]
fn chinese_text_fits_the_width() {
    let out = vramfit()
        .args(["estimate", "llama-3.1-8b", "--gpu", "rtx-4090", "--lang", "zh"])
        .env("COLUMNS", "60")
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&out.stdout);
    for l in text.lines().filter(|l| !l.trim_start().starts_with(['│', '┌', '├', '╞', '└'])) {
        assert!(vramfit_report::format::display_width(l) <= 60, "{l:?} is wider than 60 columns:\n{text}");
    }
}

/// The commonest first-contact errors read in Chinese with `--lang zh`
/// (stderr; the exit code and the English text without it unchanged); an
/// error the catalogue lacks stays English rather than half-translated.
#[test]
fn common_errors_in_chinese() {
    for (args, zh, en) in [
        (&["estimate", "no-such-model"][..], "未知模型 'no-such-model'", "unknown model 'no-such-model'"),
        (&["estimate", "llama-2-7b", "--batch", "0"][..], "--batch 至少为 1", "--batch must be at least 1"),
        (&["estimate", "llama-2-7b", "--gpu", "h2"][..], "GPU 名称 'h2' 有歧义", "GPU name 'h2' is ambiguous"),
        (
            &["estimate", "llama-2-7b", "--tp", "3"][..],
            "张量并行度不能整除 32 个注意力头",
            "does not divide the 32 attention heads",
        ),
    ] {
        let (_, err) = run(&[args, &["--lang", "zh"][..]].concat(), 2);
        assert!(err.starts_with("vramfit: error: ") && err.contains(zh), "{args:?}: {err}");
        let (_, err) = run(args, 2);
        assert!(err.contains(en), "{args:?}: {err}");
    }
}
