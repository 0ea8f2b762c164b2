//! NCCL's device memory follows the card's link and the engine's NCCL release
//! (crates/core/src/nccl.rs, issue 22): channels × protocol buffers from NCCL's
//! src/transport/p2p.cc and src/graph/{search,connect}.cc, NVLS from
//! src/transport/nvls.cc, and vLLM's custom all-reduce off on more than two
//! PCIe-only GPUs (`world_size > 2 and not fully_connected`,
//! vllm/distributed/device_communicators/custom_all_reduce.py).

mod common;
use common::{json, run};

const MIB: u64 = 1 << 20;

/// The bytes of the first ledger entry whose label starts with `label`, 0 when none.
fn entry(gpu: &str, engine: &str, tp: &str, label: &str) -> u64 {
    let v = json(
        &["estimate", "llama-3.1-8b", "--task", "infer", "--engine", engine, "--tp", tp, "--gpu", gpu, "--json"],
        0,
    );
    let entries = v["per_gpu"]["entries"].as_array().expect("entries");
    entries
        .iter()
        .find(|e| e["label"].as_str().is_some_and(|l| l.starts_with(label)))
        .map(|e| e["bytes"].as_u64().unwrap())
        .unwrap_or(0)
}

#[test]
fn a_pcie_pair_holds_less_nccl_memory_than_an_nvlink_pair() {
    // L40S (PCIe Gen4, no P2P read): 2 channels × (2 + 10) MiB + 256 MiB = 280 MiB
    let pcie = entry("l40s", "vllm", "2", "NCCL communicator (world group");
    assert_eq!(pcie, 280 * MIB);
    // A100 SXM (NVLink, Ampere): 24 channels × (6 + 6) MiB + 256 MiB = 544 MiB, NCCL issue #964's figure
    let a100 = entry("a100-80gb-sxm", "vllm", "2", "NCCL communicator (world group");
    assert_eq!(a100, 544 * MIB);
    // H100 SXM with vLLM 0.21 (cuMem on since vLLM PR #24141, NCCL 2.27): 32 × 12 MiB
    // + NVLS 16 channels × 2 × 1 MiB × 2 ranks + 256 MiB = 704 MiB
    let h100 = entry("h100-sxm", "vllm", "2", "NCCL communicator (world group");
    assert_eq!(h100, 704 * MIB);
    // vLLM 0.6 sets NCCL_CUMEM_ENABLE=0 (PR #5091): no NVLS, 640 MiB
    assert_eq!(entry("h100-sxm", "vllm@0.6", "2", "NCCL communicator (world group"), 640 * MIB);
    assert!(pcie < a100 && a100 < h100);
}

#[test]
fn explain_names_the_nccl_release_the_link_and_the_terms() {
    let (out, _) = run(
        &[
            "estimate",
            "llama-3.1-8b",
            "--task",
            "infer",
            "--engine",
            "vllm@0.8",
            "--tp",
            "2",
            "--gpu",
            "l40s",
            "--explain",
        ],
        0,
    );
    let at = out.find("NCCL communicator (world group, 2 ranks)").expect("NCCL line");
    let block: String = out[at..].chars().take(900).collect();
    // vLLM 0.8 runs torch 2.6's NCCL 2.21.5
    assert!(block.contains("NCCL release assumed = 2.21.5"), "{block}");
    assert!(block.contains("link = PCIe, ada"), "{block}");
    assert!(block.contains("channels = 2"), "{block}");
    assert!(block.contains("2097152 + 10485760 B (P2P read off)"), "{block}");
    assert!(block.contains("NCCL issue #964"), "{block}");
}

#[test]
fn custom_all_reduce_stays_off_on_four_pcie_gpus() {
    let label = "vLLM custom all-reduce";
    // two PCIe GPUs keep it; four do not (not fully connected); NVLink keeps it at TP 4
    assert_eq!(entry("l40s", "vllm", "2", label), 17 * MIB);
    assert_eq!(entry("l40s", "vllm", "4", label), 0);
    assert_eq!(entry("h100-sxm", "vllm", "4", label), 17 * MIB);
}
