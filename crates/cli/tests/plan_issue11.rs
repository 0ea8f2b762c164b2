//! Issue 11, item by item, through the real binary on the commands the issue
//! quotes (or the smallest that shows the item), with the reason the output
//! prints: a plan a practitioner would sign.

mod common;
use common::{json, run};
use serde_json::Value;

const GIB: u64 = 1 << 30;

fn ranked(v: &Value) -> &Vec<Value> {
    v["ranked"].as_array().unwrap()
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/plan/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("vramfit-issue11-{}-{name}", std::process::id()));
    std::fs::write(&p, text).unwrap();
    p
}

const L13B_1B: [&str; 11] = [
    "plan",
    "llama-2-13b",
    "--task",
    "train",
    "--precision",
    "mixed-bf16",
    "--batch",
    "4",
    "--grad-accum",
    "16",
    "--tokens",
];

/// Item 1: monthly-only offers bill whole months: the ~1-day 13B job bills a
/// month of 8 × A100 40G (CNY 20,000), not of the faster 8 × A100 80G machine
/// (CNY 25,000–40,000); the prorated figure is secondary.
#[test]
fn item01_monthly_offers_bill_whole_months() {
    let v = json(&[&L13B_1B[..], &["1B", "--json"]].concat(), 0);
    let rec = &v["recommended"];
    assert_eq!(rec["billing"], "monthly");
    assert_eq!(rec["months_billed"], 1);
    // a ~1-day job bills a whole month: 8 × A100 40G (CNY 20,000) beats the faster
    // 8 × A100 80G machine (CNY 25,000–40,000 for the same month)
    assert_eq!(rec["billed"]["low"], 20_000.0, "{rec}");
    assert!(rec["job_hours"].as_f64().unwrap() < 730.0);
    let m = ranked(&v).iter().find(|r| r["offer_id"] == "cn-guide/8x-a100-80g-nvlink").unwrap();
    assert!(m["billed"]["low"].as_f64().unwrap() >= 25_000.0);
    assert!(m["job_hours"].as_f64().unwrap() < rec["job_hours"].as_f64().unwrap() * 1.5);
    assert!(m["rank_cost"].as_f64().unwrap() > rec["rank_cost"].as_f64().unwrap());
    // one A100 40G with full offload would need 312 GB of host RAM: the note says why it is out
    assert!(v["notes"].as_array().unwrap().iter().any(|n| n
        .as_str()
        .unwrap()
        .starts_with("A100 40G whole card (AI cloud)")
        && n.as_str().unwrap().contains("GPUs: left out")));
    let (out, _) = run(&[&L13B_1B[..], &["1B", "--wide"]].concat(), 0);
    let line = out.lines().find(|l| l.starts_with("Recommended:")).unwrap();
    assert!(line.contains("billed CNY 20,000 (1 month)"), "{line}");
    assert!(line.contains("prorated") && line.contains("if you have other work for the rest of the month"), "{line}");
}

/// Item 2: Simplicity is ranked and offload is the last resort: with no job size a
/// 1B-token job is assumed (and said); offload wins only when clearly cheaper,
/// and the reason says by how much.
#[test]
fn item02_offload_is_the_last_resort() {
    let (out, _) = run(&["plan", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16"], 0);
    assert!(out.contains("job: 1,000,000,000 tokens (assumed: no --tokens/--hours given)"), "{out}");
    let v = json(&["plan", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--json"], 0);
    assert_eq!(v["job"]["assumed"], true);
    assert_eq!(v["job"]["tokens"], 1_000_000_000u64);
    let rec = &v["recommended"];
    let offload = rec["setup"]["offload_optimizer"] != "none";
    if offload {
        assert!(v["reason"].as_str().unwrap().contains("cheaper than the cheapest plan without offload"), "{v}");
    } else {
        assert!(!rec["complexity"].as_str().unwrap().starts_with("offload"), "{rec}");
    }
    // near-ties on one card: plain checkpointing beats ZeRO-3 and offload (LoRA on a 3090)
    let v = json(&["plan", "llama-2-7b", "--task", "lora", "--have", "rtx-3090", "--json"], 0);
    for r in ranked(&v).iter().filter(|r| r["gpus"] == 1 && r["offer_id"] == "cn-guide/rtx-3090") {
        assert_eq!(r["complexity"], "plain", "{r}");
    }
    // QLoRA 8B on a 3090: micro-batch 2 × accumulation 8 + checkpointing, no offload
    let v = json(
        &[
            "plan",
            "llama-3.1-8b",
            "--task",
            "qlora",
            "--batch",
            "4",
            "--grad-accum",
            "4",
            "--hours",
            "24",
            "--have",
            "rtx-3090",
            "--json",
        ],
        0,
    );
    let own = &v["own_card"];
    assert_eq!(own["setup"]["offload_params"], "none", "{own}");
    assert_eq!(own["setup"]["offload_optimizer"], "none");
    assert_eq!(own["setup"]["checkpointing"], "full");
    assert_eq!((own["setup"]["micro_batch"].as_u64(), own["setup"]["grad_accum"].as_u64()), (Some(2), Some(8)));
}

/// Item 3: Host RAM and CPU come from the seed's machine descriptions; offload
/// needing more RAM than the machine has buys the upgrade or is refused, with
/// DeepSpeed's own estimate.
#[test]
fn item03_host_ram_is_checked_and_upgraded() {
    let v = json(&[&L13B_1B[..], &["1B", "--json"]].concat(), 0);
    let machine = ranked(&v).iter().find(|r| r["offer_id"] == "cn-guide/8x-a100-80g-nvlink").unwrap();
    assert_eq!((machine["host_cpu_cores"].as_u64(), machine["host_ram_gb"].as_f64()), (Some(80), Some(1024.0)));
    // a 3B full fine-tune on the custom A100 40G (64 GB): optimizer offload needs
    // 3.2 B × 16 B × 1.5 ≈ 77 GB (DeepSpeed's estimator): the 128 GB upgrade is bought
    let cat = temp_file(
        "custom.toml",
        r#"
replace = true
[[offer]]
id = "cn-guide/a100-40g-custom"
provider = "cn-guide"
name = "A100 40G custom single-card machine"
gpu = "a100-40gb-pcie"
cpu_cores = 8
ram_gb = 64
monthly = 2800
currency = "CNY"
[[upgrade]]
id = "cn-guide/ram-128"
provider = "cn-guide"
name = "RAM to 128 GB (+¥600/month)"
offers = ["cn-guide/a100-40g-custom"]
ram_gb_to = 128
monthly = 600
currency = "CNY"
"#,
    );
    let cat = cat.to_str().unwrap();
    let v =
        json(&["plan", "llama-3.2-3b", "--task", "train", "--precision", "mixed-bf16", "--catalog", cat, "--json"], 0);
    let rec = &v["recommended"];
    assert_ne!(rec["setup"]["offload_optimizer"], "none", "{rec}");
    assert_eq!(rec["upgrades"][0], "RAM to 128 GB (+¥600/month)");
    assert_eq!(rec["monthly"]["low"], 3400.0);
    let need = rec["host_ram_bytes"].as_u64().unwrap();
    assert!(need > 64_000_000_000 && need <= 128_000_000_000, "{need}");
    assert!(rec["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("DeepSpeed's estimate")));
    // a 7B one needs ~162 GB: more than the upgrade, refused, and the note says so
    let (out, _) = run(&["plan", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--catalog", cat], 1);
    assert!(out.contains("left out") && out.contains("it has 64 GB"), "{out}");
}

/// Item 4: The global batch is kept (micro × accumulation × ranks); a change is a
/// listed switch with its learning-rate caveat, never silent.
#[test]
fn item04_global_batch_is_kept_or_listed() {
    let v = json(
        &[
            "plan",
            "llama-3.2-1b",
            "--task",
            "train",
            "--precision",
            "fp32",
            "--batch",
            "8",
            "--have",
            "rtx-3090",
            "--json",
        ],
        0,
    );
    let rows: Vec<&Value> = ranked(&v).iter().chain([&v["own_card"]]).collect();
    for r in rows {
        let s = &r["setup"];
        let gb = s["micro_batch"].as_u64().unwrap() * s["grad_accum"].as_u64().unwrap() * s["dp"].as_u64().unwrap();
        assert_eq!(gb, s["global_batch"].as_u64().unwrap());
        assert_eq!(gb, 8, "{r}");
        assert!(r["notes"].as_array().unwrap().iter().all(|n| !n.as_str().unwrap().contains("not divisible")));
    }
    // a global batch of 1 over 4 ranks cannot be kept: the change is listed, with the caveat
    let v = json(&["plan", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--json"], 0);
    for r in ranked(&v).iter().filter(|r| r["setup"]["global_batch"] != 1) {
        let sw: Vec<&str> = r["switches"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
        assert!(sw.iter().any(|s| s.starts_with("global batch 1 →") && s.contains("learning rate")), "{sw:?}");
    }
}

/// Item 5: Serving searches replicas × TP/PP: for a job of 10B generated tokens,
/// four replicas of 8 sequences on four A100 40G (29.46 GiB each: 12.55 GiB fp16
/// weights + 16 GiB of KV for 8 × 4096 tokens + runtime and allocator) bill less
/// than a pipeline over PCIe (PP 2 fits at 39.25 of 39.56 GiB usable, but decodes
/// at ~484 tokens/s: 8 months against 3). Requests of 32 prompt tokens and
/// 4,064 generated ones keep the job decode-bound, as the item is about.
#[test]
fn item05_serving_uses_replicas() {
    let args = [
        "plan",
        "llama-2-7b",
        "--dtype",
        "fp16",
        "--concurrency",
        "32",
        "--context",
        "4096",
        "--output-len",
        "4064",
        "--have",
        "a100-40gb-pcie",
        "--tokens",
        "10B",
    ];
    let v = json(&[&args[..], &["--json"]].concat(), 0);
    let rows = ranked(&v);
    let on = |gpus: u64| {
        rows.iter()
            .position(|r| r["gpu_id"] == "a100-40gb-pcie" && r["gpus"].as_u64() == Some(gpus))
            .unwrap_or_else(|| panic!("no {gpus} × A100 40GB row in {rows:?}"))
    };
    let (four, two) = (on(4), on(2));
    let rec = &rows[four];
    assert_eq!(rec["setup"]["replicas"].as_u64(), Some(4), "{rec}");
    assert_eq!((rec["setup"]["tp"].as_u64(), rec["setup"]["pp"].as_u64()), (Some(1), Some(1)));
    let gib = rec["per_gpu_bytes"].as_f64().unwrap() / GIB as f64;
    assert!((gib - 29.46).abs() < 0.01, "{gib}");
    // decode from memory bandwidth: weights + 8 sequences' KV per step, 4 replicas
    assert!(rec["tokens_per_s"].as_f64().unwrap() > 1000.0, "{rec}");
    // the replicas bill less over this job than the cheaper-per-month pipeline
    assert_eq!(rows[two]["setup"]["pp"].as_u64(), Some(2), "{}", rows[two]);
    assert!(four < two, "4 replicas rank {four}, PP 2 ranks {two}");
    let (out, _) = run(&args, 0);
    assert!(out.contains("4 replicas × 8 seq"), "{out}");
    assert!(out.contains("replicas split the sequences"), "{out}");
}

/// Item 6: Each precision runs at its own peak, and the output says which.
#[test]
fn item06_precision_peaks() {
    let v = json(&["plan", "llama-3.2-1b", "--task", "train", "--precision", "fp32", "--batch", "8", "--json"], 0);
    let mut seen = 0;
    for r in ranked(&v) {
        let p = r["setup"]["precision"].as_str().unwrap();
        let peak = r["peak_tflops"].as_f64().unwrap();
        if p == "fp32" {
            seen += 1;
            assert_eq!(r["peak"], "fp32", "{r}");
            // never above the fp32 peak: 6 FLOPs per parameter per token
            let per_gpu = r["tokens_per_s"].as_f64().unwrap() / r["gpus"].as_f64().unwrap();
            assert!(per_gpu * 6.0 * 1.236e9 < peak * 1e12, "{r}");
        } else {
            assert_eq!(r["peak"], "bf16", "{r}");
        }
    }
    assert!(seen > 0);
    let (out, _) = run(&["plan", "llama-3.2-1b", "--task", "train", "--precision", "fp32", "--batch", "8"], 0);
    assert!(out.contains("at the fp32 peak (CUDA cores"), "{out}");
}

/// Item 8: Your own card first; `--zero`/`--gpus` are honoured.
#[test]
fn item08_own_card_first_and_layout_as_given() {
    let (out, _) = run(&["plan", "llama-2-7b", "--task", "lora", "--have", "rtx-3090"], 0);
    let line = out.lines().find(|l| l.starts_with("Recommended:")).unwrap();
    assert!(line.starts_with("Recommended: your own card — 1 × RTX 3090"), "{line}");
    assert!(out.contains("no rental needed"), "{out}");
    let args = ["plan", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--zero", "2", "--gpus", "8"];
    let v = json(&[&args[..], &["--have", "a100-80gb-sxm", "--json"]].concat(), 0);
    assert_eq!(v["pinned"], "8 GPUs, ZeRO-2");
    // the job as given: ZeRO-2 over 8 GPUs, not the whole job on one card
    assert!(v["baseline_bytes"].as_u64().unwrap() < 80 * GIB, "{}", v["baseline_bytes"]);
    for r in ranked(&v) {
        assert_eq!((r["gpus"].as_u64(), r["setup"]["sharding"].as_str()), (Some(8), Some("zero2")), "{r}");
    }
    assert_eq!(v["own_card"]["gpus"], 8);
    let (out, _) = run(&[&args[..], &["--have", "a100-80gb-sxm"]].concat(), 0);
    assert!(out.contains("layout as given: 8 GPUs, ZeRO-2"), "{out}");
}

/// Item 9: The H100 MIG offer is MIG instances (memory and SM share), never a whole
/// card in a training plan.
#[test]
fn item09_mig_offers_are_slices() {
    let v = json(&["plan", "llama-2-7b", "--task", "lora", "--tokens", "1B", "--json"], 0);
    for r in ranked(&v).iter().filter(|r| r["offer_id"].as_str().unwrap().starts_with("cn-guide/h100-mig")) {
        assert!(r["gpu_memory_bytes"].as_u64().unwrap() <= 40 * GIB, "{r}");
        assert!(r["peak_tflops"].as_f64().unwrap() < 989.5 / 2.0, "{r}");
        assert_eq!(r["gpus"], 1);
        assert!(r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("for inference and small jobs")));
    }
    assert!(ranked(&v).iter().all(|r| r["offer_id"] != "cn-guide/h100-per-card"));
}

/// Item 10: Break-even in the seed's terms: how many single cards cost as much as
/// the machine, and from how many cards the machine is the better buy.
#[test]
fn item10_break_even_in_cards() {
    let args = ["plan", "llama-2-7b", "--task", "lora", "--tokens", "1B"];
    let v = json(&[&args[..], &["--json"]].concat(), 0);
    let be = &v["break_even"];
    let p = &be["price_ratio"];
    assert_eq!((p["low"].as_f64(), p["high"].as_f64()), (Some(10.0), Some(16.0)));
    assert_eq!(be["cards"].as_array().unwrap().len(), 4);
    let (out, _) = run(&args, 0);
    assert!(out.contains("the machine costs as much as 10.0–16.0 single cards"), "{out}");
    assert!(out.contains("single cards stacked (cn-guide/a100-40g-cloud)"), "{out}");
    assert!(out.contains("per token"), "{out}");
}

/// Item 11: ZeRO-Offload memory as DeepSpeed does it: the 10B model of Ren et al.
/// 2021 trains on one 32 GB V100 with ZeRO-2 + optimizer offload.
#[test]
fn item11_zero_offload_10b_on_one_v100() {
    let cfg = fixture("gpt2-10b-zero-offload.json");
    let v = json(
        &[
            "plan",
            &cfg,
            "--task",
            "train",
            "--precision",
            "mixed-fp16",
            "--batch",
            "10",
            "--context",
            "1024",
            "--zero",
            "2",
            "--offload",
            "cpu",
            "--have",
            "v100-sxm2-32gb",
            "--json",
        ],
        0,
    );
    let own = &v["own_card"];
    assert!(own["fits"].as_bool().unwrap(), "{own}");
    assert!(own["per_gpu_bytes"].as_u64().unwrap() <= own["gpu_memory_bytes"].as_u64().unwrap());
    assert_eq!(own["setup"]["offload_optimizer"], "cpu");
    assert!(v["params_total"].as_u64().unwrap() > 10_000_000_000);
    // the gradients are the reduce buckets (2 × 5e8 × 2 B), not 10B × 2 B
    let (out, _) = run(
        &[
            "estimate",
            &cfg,
            "--task",
            "train",
            "--precision",
            "mixed-fp16",
            "--batch",
            "2",
            "--context",
            "1024",
            "--checkpointing",
            "full",
            "--zero",
            "2",
            "--offload",
            "cpu",
            "--gpu",
            "v100-sxm2-32gb",
            "--first-step",
        ],
        0,
    );
    assert!(out.contains("FITS"), "{out}");
}

/// Item 12: `--emit` carries the plan or refuses: an 8-bit optimizer and
/// checkpointing reach the DeepSpeed launch, and a plan the launcher cannot
/// express is replaced by the best one it can, saying why.
#[test]
fn item12_emit_carries_every_switch() {
    let args =
        ["plan", "llama-2-7b", "--task", "train", "--precision", "mixed-bf16", "--grad-accum", "8", "--tokens", "1B"];
    let (out, err) = run(&[&args[..], &["--emit", "deepspeed"]].concat(), 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let launch =
        err.lines().find(|l| l.starts_with("vramfit: launch with: deepspeed")).unwrap_or_else(|| panic!("{err}"));
    let plan = json(&[&args[..], &["--json"]].concat(), 0);
    let s = &plan["recommended"]["setup"];
    assert!(launch.contains(&format!("--per_device_train_batch_size {}", s["micro_batch"])), "{launch}");
    assert_eq!(v["train_micro_batch_size_per_gpu"], s["micro_batch"]);
    if s["checkpointing"] == "full" {
        assert!(launch.contains("--gradient_checkpointing") && v.get("activation_checkpointing").is_some());
    }
    match s["optimizer"].as_str().unwrap() {
        "adamw-8bit" => {
            assert!(launch.contains("--optim adamw_bnb_8bit"), "{launch}");
            assert_eq!(v["zero_allow_untested_optimizer"], true);
        }
        _ => assert_eq!(v["optimizer"]["params"]["lr"], "auto"),
    }
    // a plan with TP (70B serving-size full fine-tune on NVLink machines) is re-searched
    let (out, err) = run(
        &[
            "plan",
            "llama-2-13b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--tokens",
            "1B",
            "--emit",
            "torchrun",
        ],
        0,
    );
    assert!(out.contains("torchrun"), "{out}");
    if err.contains("cannot be written") {
        assert!(err.contains("writing the best plan it can express"), "{err}");
    }
}

/// Issue 15: a catalogue of 24k multi-node offers is refused at once with the
/// count; 10k is the most read.
#[test]
fn huge_catalogue_is_refused_with_the_count() {
    let mut text = String::from("replace = true\n");
    for i in 0..24_000 {
        text.push_str(&format!(
            "[[offer]]\nid=\"o{i}\"\nprovider=\"p\"\nname=\"o\"\ngpu=\"h100-sxm\"\ngpus=8\nlink=\"nvlink\"\nmax_machines=8\ninter_node_gbs=25\nhourly=20\ncurrency=\"USD\"\n"
        ));
    }
    assert!(text.len() < 4 << 20);
    let p = temp_file("24k.toml", &text);
    let (_, err) = run(&["plan", "llama-2-7b", "--catalog", p.to_str().unwrap()], 2);
    assert!(err.contains("24000 offers: at most 10000 are read"), "{err}");
}

/// Item 12 (mig-parted): the config selects every GPU of the host — the plan's
/// cards with their instances, the rest with MIG disabled — or says how to.
#[test]
fn item12_mig_parted_covers_every_gpu_on_the_host() {
    let args =
        ["mig", "plan", "--gpu", "h100-80gb", "--service", "a=10GiB", "--service", "b=30GiB", "--emit", "mig-parted"];
    let (out, _) = run(&[&args[..], &["--max-gpus", "8"]].concat(), 0);
    let mut devices: Vec<u64> = Vec::new();
    for l in out.lines().filter_map(|l| l.trim().strip_prefix("- devices: [")) {
        devices.extend(l.trim_end_matches(']').split(", ").map(|d| d.parse::<u64>().unwrap()));
    }
    devices.sort();
    assert_eq!(devices, (0..8).collect::<Vec<u64>>(), "{out}");
    assert!(out.contains("mig-enabled: false"), "{out}");
    let (out, _) = run(&args, 0);
    assert!(out.starts_with("# every GPU of the host must be selected"), "{out}");
}
