//! Serving engines run tensor parallelism over PCIe inside one machine
//! (vLLM and SGLang all-reduce through NCCL; vLLM's custom all-reduce uses
//! P2P on two PCIe cards, `CustomAllreduce.__init__`), so a plan on PCIe
//! cards may split a model by TP, its all-reduces timed at the PCIe rate.
//! Training keeps TP inside NVLink.

mod common;
use common::{json, run};

/// One offer: a machine of `gpus` cards of `gpu` on PCIe (no NVLink).
fn pcie_catalogue(tag: &str, gpu: &str, gpus: u32) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("vramfit-pcie-tp-{}-{tag}.toml", std::process::id()));
    std::fs::write(
        &p,
        format!("replace = true\n[[offer]]\nid = \"m\"\nprovider = \"p\"\nname = \"{gpus} x {gpu}\"\ngpu = \"{gpu}\"\ngpus = {gpus}\nhourly = 8\ncurrency = \"USD\"\nlink = \"pcie\"\n"),
    )
    .unwrap();
    p
}

/// The case the earlier note found: Qwen3-30B-A3B served by SGLang on four
/// PCIe A100 40G was split by pipeline stages (`--pp-size 4`), a layout no
/// practitioner serves with when the engine's default TP runs on those cards.
/// The plan now uses TP 4, and the emitted command says so.
#[test]
fn serving_on_pcie_cards_splits_by_tp() {
    let cat = pcie_catalogue("a100", "a100-40gb-pcie", 4);
    let c = cat.to_str().unwrap();
    let job = ["qwen3-30b-a3b", "--concurrency", "64", "--context", "8192", "--catalog", c];
    let v = json(&[&["plan"][..], &job, &["--engine", "sglang", "--json"]].concat(), 0);
    let setup = &v["recommended"]["setup"];
    assert_eq!((setup["tp"].as_u64(), setup["pp"].as_u64().unwrap_or(1)), (Some(4), 1), "{v}");
    let (out, err) = run(&[&["plan"][..], &job, &["--emit", "sglang"]].concat(), 0);
    let text = format!("{out}{err}");
    assert!(text.contains("--tp-size 4") || text.contains("--tp 4"), "{text}");
    assert!(!text.contains("--pp-size"), "{text}");
}

/// Training on the same PCIe cards never uses TP: its per-layer all-reduces
/// of every micro-batch over PCIe would dominate the step.
#[test]
fn training_on_pcie_cards_keeps_tp_inside_nvlink() {
    let cat = pcie_catalogue("l40s", "l40s", 8);
    let v = json(
        &["plan", "llama-3.1-8b", "--task", "train", "--catalog", cat.to_str().unwrap(), "--top", "50", "--json"],
        0,
    );
    let ranked = v["ranked"].as_array().unwrap();
    assert!(!ranked.is_empty());
    assert!(ranked.iter().all(|r| r["setup"]["tp"].as_u64().unwrap_or(1) == 1), "{v}");
}

/// The same model served over PCIe is slower than over NVLink at the same TP:
/// the all-reduces are priced, not free.
#[test]
fn tp_over_pcie_is_slower_than_over_nvlink() {
    let pcie = pcie_catalogue("h100pcie", "h100-sxm", 2);
    let nv = std::env::temp_dir().join(format!("vramfit-pcie-tp-{}-nv.toml", std::process::id()));
    std::fs::write(&nv, std::fs::read_to_string(&pcie).unwrap().replace("link = \"pcie\"", "link = \"nvlink\""))
        .unwrap();
    let tps = |cat: &std::path::Path| {
        let v = json(
            &[
                "plan",
                "llama-3.1-70b",
                "--dtype",
                "fp8",
                "--engine",
                "vllm",
                "--tp",
                "2",
                "--concurrency",
                "32",
                "--context",
                "4096",
                "--catalog",
                cat.to_str().unwrap(),
                "--json",
            ],
            0,
        );
        v["recommended"]["tokens_per_s"].as_f64().unwrap()
    };
    let (slow, fast) = (tps(&pcie), tps(&nv));
    assert!(slow < 0.95 * fast, "PCIe {slow} vs NVLink {fast}");
}
