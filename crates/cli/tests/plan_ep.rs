//! Issue 21 item 4: expert parallelism and data-parallel attention for MoE
//! serving — `estimate --ep N --dp-attention N` sizes a rank, and `plan`
//! ranks EP layouts beside the TP-only ones.

mod common;
use common::json;
use serde_json::Value;

/// One offer of a machine of 8 H200 on NVLink (141 GB each).
fn h200_catalogue() -> std::path::PathBuf {
    // one file per call: tests run in parallel threads, and a file rewritten
    // while another test's vramfit reads it reads as empty
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = std::env::temp_dir().join(format!("vramfit-ep-{}-{n}-h200.toml", std::process::id()));
    std::fs::write(
        &p,
        "replace = true\n[[offer]]\nid = \"h200x8\"\nprovider = \"p\"\nname = \"8 x H200\"\ngpu = \"h200\"\ngpus = 8\nhourly = 30\ncurrency = \"USD\"\nlink = \"nvlink\"\n",
    )
    .unwrap();
    p
}

const DEEPSEEK_JOB: [&str; 7] = ["deepseek-v3", "--dtype", "fp8", "--concurrency", "64", "--context", "8192"];

fn rows(v: &Value) -> Vec<(u64, u64, u64, u64, String)> {
    v["ranked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let s = &r["setup"];
            let n = |k: &str| s[k].as_u64().unwrap_or(1);
            (r["gpus"].as_u64().unwrap(), n("tp"), n("ep"), n("dp_attention"), r["complexity"].as_str().unwrap().into())
        })
        .collect()
}

/// The must-show, served by vLLM: the DeepSeek-V3 plan lists EP
/// layouts (`TP 8, EP 8`) beside the TP-only ones of the same cards, and
/// without a serving engine the plan says where EP layouts are searched.
#[test]
fn deepseek_v3_plan_lists_ep_layouts() {
    let v = json(&[&["plan"][..], &DEEPSEEK_JOB, &["--engine", "vllm", "--top", "20", "--json"]].concat(), 0);
    let r = rows(&v);
    let ep: Vec<_> = r.iter().filter(|x| x.2 == 8).collect();
    assert!(!ep.is_empty(), "{r:?}");
    assert!(ep.iter().all(|x| x.1 == 8 && x.4 == "expert_parallel"), "{r:?}");
    // each EP row's cards also have a TP-only row
    assert!(ep.iter().all(|x| r.iter().any(|y| y.0 == x.0 && y.2 == 1 && y.4 == "plain")), "{r:?}");
    let (text, _) = common::run(&[&["plan"][..], &DEEPSEEK_JOB, &["--engine", "vllm", "--top", "20"]].concat(), 0);
    assert!(text.contains("TP 8, EP 8"), "{text}");
    assert!(text.contains("expert-parallel layouts are listed beside the TP-only ones"), "{text}");
    let (text, _) = common::run(&[&["plan"][..], &DEEPSEEK_JOB, &["--engine", "transformers"]].concat(), 0);
    assert!(text.contains("are searched for vLLM and SGLang: add --engine vllm or sglang"), "{text}");
    assert!(!text.contains("TP 8, EP 8"), "{text}");
}

/// The must-show exactly as written, with no `--engine`: a MoE model
/// served is planned with vLLM (`vramfit_plan::assumed_serving_engine`), so
/// the ranked table holds EP layouts, the same rows as `--engine vllm`
/// gives, and the report says the engine was assumed. A dense model keeps
/// transformers.
#[test]
fn moe_serving_plan_without_engine_assumes_vllm_and_ranks_ep() {
    let asked = json(&[&["plan"][..], &DEEPSEEK_JOB, &["--top", "20", "--json"]].concat(), 0);
    let given = json(&[&["plan"][..], &DEEPSEEK_JOB, &["--engine", "vllm", "--top", "20", "--json"]].concat(), 0);
    assert_eq!(rows(&asked), rows(&given));
    assert!(rows(&asked).iter().any(|x| x.2 == 8 && x.4 == "expert_parallel"), "{:?}", rows(&asked));
    let notes = asked["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n.as_str().unwrap().starts_with("served with vllm (assumed: no --engine given)")),
        "{notes:?}"
    );
    assert!(!given["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("assumed: no --engine")));
    let dense = json(&["plan", "llama-3.1-8b", "--concurrency", "8", "--json"], 0);
    assert!(!dense["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("assumed: no --engine")));
}

/// On one machine of 8 H200 the plan recommends data-parallel attention:
/// MLA's latent KV cache is whole on every TP rank (34.3 GiB at 64 × 8192
/// tokens), one eighth of it per rank with DP attention 8 (4.3 GiB), for
/// 15.2 GB of attention and dense weights held whole — less memory and
/// fewer bytes read per step, so the same machine serves the tokens faster
/// and the job costs less. The TP-only layout is still listed.
#[test]
fn deepseek_v3_on_h200_recommends_dp_attention() {
    let cat = h200_catalogue();
    for engine in ["vllm", "sglang"] {
        let opts = ["--engine", engine, "--catalog", cat.to_str().unwrap(), "--tokens", "1000000000", "--json"];
        let v = json(&[&["plan"][..], &DEEPSEEK_JOB, &opts].concat(), 0);
        let rec = &v["recommended"]["setup"];
        assert_eq!((rec["tp"].as_u64(), rec["ep"].as_u64(), rec["dp_attention"].as_u64()), (Some(8), Some(8), Some(8)));
        let r = rows(&v);
        let tp_only = v["ranked"].as_array().unwrap().iter().find(|x| x["setup"].get("ep").is_none()).unwrap();
        let dpa = &v["recommended"];
        assert!(dpa["tokens_per_s"].as_f64() > tp_only["tokens_per_s"].as_f64(), "{r:?}");
        assert!(v["reason"].as_str().unwrap().contains("with expert parallelism"), "{}", v["reason"]);
        if engine == "sglang" {
            // SGLang sizes the card from the need and its own fraction: the DP-attention rank
            // needs less, but with --enable-dp-attention SGLang reserves cuda_graph_max_bs × dp ×
            // 4.5 MiB more (512 × 8 × 4.5 = 18,432 MiB: `_handle_gpu_memory_settings`,
            // python/sglang/srt/server_args.py), so its card is larger; it still fits the H200
            // (143,771 MiB − 450 MiB the driver keeps)
            let h200 = (143_771u64 - 450) << 20;
            assert!(dpa["per_gpu_bytes"].as_u64().unwrap() <= h200, "{r:?}");
            assert!(dpa["per_gpu_bytes"].as_u64() > tp_only["per_gpu_bytes"].as_u64(), "{r:?}");
        }
    }
}

/// The per-rank memory of DeepSeek-V3 under vLLM with TP 8, EP 8 and
/// data-parallel attention 8, hand-worked:
/// - routed experts: 58 MoE layers × 256 × 3 × 7168 × 2048 = 653.9B fp8
///   parameters, 32 of 256 per rank: 81,738,618,624 B (+ 4 B scales);
/// - attention, dense and shared-expert linears whole on every rank (TP 1):
///   61 × (7168·1536 + 1536·128·192 + 7168·576 + 512·128·256 + 128·128·7168) +
///   3 × 3 × 7168 × 18432 + 58 × 3 × 7168 × 2048 = 15,156,838,400 fp8
///   parameters, and 488 per-tensor fp32 scales: 15,156,840,352 B;
/// - embeddings and head whole (bf16): 2 × 129,280 × 7168 × 2 = 3,706,716,160 B;
/// - KV: the group's 64 / 8 = 8 sequences × 8192 tokens × 61 layers ×
///   (512 + 64) × 2 B = 4,605,345,792 B (TP 8 alone holds all 64: × 8).
#[test]
fn dp_attention_rank_memory_by_hand() {
    let base = ["estimate", "deepseek-v3", "--engine", "vllm", "--tp", "8", "--ep", "8", "--dtype", "fp8"];
    let job = ["--concurrency", "64", "--context", "8192", "--gpu", "h200", "--json"];
    let v = json(&[&base[..], &["--dp-attention", "8"], &job].concat(), 0);
    assert_eq!(v["workload"]["dp_attention"], 8, "{}", v["workload"]);
    let entries = v["per_gpu"]["entries"].as_array().unwrap();
    let line = |prefix: &str| {
        entries
            .iter()
            .find(|e| e["label"].as_str().unwrap().starts_with(prefix))
            .unwrap_or_else(|| panic!("{prefix}: {entries:?}"))["bytes"]
            .as_u64()
            .unwrap()
    };
    let experts = line("routed experts, 32 of 256 per rank");
    assert!(experts.abs_diff(58 * 256 * 3 * 7168 * 2048 / 8) < 1 << 20, "{experts}");
    assert_eq!(line("decoder linear weights"), 15_156_838_400 + 488 * 4);
    assert_eq!(line("embeddings + output head"), 2 * 129_280 * 7168 * 2);
    let kv = line("KV cache");
    assert_eq!(kv, 8 * 8192 * 61 * (512 + 64) * 2);
    let tp_only = json(&[&base[..], &job].concat(), 0);
    assert_eq!(tp_only["per_gpu"]["categories"]["kv_cache"].as_u64(), Some(8 * kv));
    assert!(v["per_gpu"]["total_bytes"].as_u64() < tp_only["per_gpu"]["total_bytes"].as_u64());
    // vLLM's KV pool per rank (`--gpu h200`, util 0.9) loses the weights the rank
    // now holds whole, and its blocks serve each of the 8 groups: 8 × per-group
    // sequences of 8192 tokens (512 blocks of 16)
    let cap = |v: &Value, k: &str| v["fit"]["capacity"][k].as_u64().unwrap();
    let weights = |v: &Value| v["per_gpu"]["categories"]["weights"].as_u64().unwrap();
    assert!(cap(&v, "kv_budget_bytes") <= cap(&tp_only, "kv_budget_bytes") - (weights(&v) - weights(&tp_only)));
    assert_eq!(cap(&v, "max_concurrency"), cap(&v, "kv_blocks") / 512 * 8);
    let (text, _) = common::run(&[&base[..], &["--dp-attention", "8"], &job[..6]].concat(), 0);
    assert!(text.contains("attention over DP 8") && text.contains("data-parallel attention 8: the 8 ranks"), "{text}");
}

/// `plan --ep` is no longer refused: it pins the EP layout; the rules name
/// their flag where EP or DP attention does not apply.
#[test]
fn plan_pins_ep_and_refusals_name_the_flag() {
    let cat = h200_catalogue();
    let c = cat.to_str().unwrap();
    let v = json(
        &[&["plan"][..], &DEEPSEEK_JOB, &["--engine", "sglang", "--catalog", c, "--tp", "8", "--ep", "8", "--json"]]
            .concat(),
        0,
    );
    let rec = &v["recommended"]["setup"];
    assert_eq!((rec["ep"].as_u64(), rec.get("dp_attention")), (Some(8), None), "{rec}");
    for (args, flag, says) in [
        (&["plan", "llama-3.1-8b", "--engine", "vllm", "--tp", "2", "--ep", "2"][..], "--ep", "no routed experts"),
        (&["plan", "deepseek-v3", "--engine", "vllm", "--ep", "8"][..], "--ep", "give --tp 8 with it"),
        (
            &["estimate", "llama-3.1-8b", "--engine", "vllm", "--tp", "2", "--dp-attention", "2"][..],
            "--dp-attention",
            "no routed experts",
        ),
        (
            &["estimate", "deepseek-v3", "--engine", "vllm", "--tp", "8", "--ep", "8", "--dp-attention", "3"][..],
            "--dp-attention",
            "give a divisor of --tp 8",
        ),
        (
            &["estimate", "deepseek-v3", "--engine", "vllm", "--tp", "8", "--dp-attention", "8"][..],
            "--dp-attention",
            "give --ep 8",
        ),
        (
            &["estimate", "deepseek-v3", "--tp", "8", "--ep", "8", "--dp-attention", "8"][..],
            "--",
            "--engine vllm or sglang",
        ),
        (
            &["estimate", "mixtral-8x7b", "--task", "train", "--dp-attention", "2"][..],
            "--dp-attention",
            "inference only",
        ),
    ] {
        let (_, err) = common::run(args, 2);
        assert!(err.contains(flag) && err.contains(says), "{args:?}: {err}");
    }
}
