//! Issue 24: `--gpu` (and `plan --have`, `diagnose --gpu`, the GGUF
//! command's `--gpu`) names a catalogue card exactly or is refused with
//! the close names; the cards rented in China are in the catalogue.

mod common;
use common::{json, run};
use vramfit_catalog::gpus::builtin_gpus;

const MIB: u64 = 1 << 20;

/// The catalogue's memory for `id` (what every fit below must use).
fn catalogue_bytes(id: &str) -> u64 {
    let all = builtin_gpus().unwrap();
    all.iter().find(|g| g.id == id).unwrap_or_else(|| panic!("no catalogue id {id}")).memory_mib * MIB
}

#[test]
fn estimate_on_an_h20_sizes_against_the_96_gb_h20() {
    let v = json(&["estimate", "llama-3.1-8b", "--gpu", "h20", "--json"], 0);
    assert_eq!(v["fit"]["gpu"], "H20 96GB");
    assert_eq!(v["fit"]["gpu_memory_bytes"], catalogue_bytes("h20"));
    // the H20's nvidia-smi total, 97871 MiB, is 95.58 GiB: not the H200's 140.40 GiB
    assert_eq!(catalogue_bytes("h20"), 97871 * MIB);
    assert!(catalogue_bytes("h20") < catalogue_bytes("h200-sxm"));
    let (text, _) = run(&["estimate", "llama-3.1-8b", "--gpu", "h20"], 0);
    assert!(text.contains("H20 96GB: FITS") && text.contains("of 95.58 GiB"), "{text}");
    // nvidia-smi's product name reaches the same card
    let v = json(&["estimate", "llama-3.1-8b", "--gpu", "NVIDIA H20", "--json"], 0);
    assert_eq!(v["fit"]["gpu_memory_bytes"], 97871 * MIB);
}

#[test]
fn every_rented_card_is_accepted_by_gpu_and_have() {
    // (name as typed, catalogue id)
    let cards = [
        ("h20", "h20"),
        ("h800", "h800-sxm"),
        ("h800-pcie", "h800-pcie"),
        ("a800-40gb", "a800-40gb-pcie"),
        ("a800-80gb", "a800-80gb-sxm"),
        ("a800-80gb-pcie", "a800-80gb-pcie"),
        ("l20", "l20"),
        ("l40", "l40"),
        ("rtx-4090d", "rtx-4090d"),
        ("RTX 4090 D", "rtx-4090d"),
        ("rtx-5090", "rtx-5090"),
        ("rtx-4080", "rtx-4080"),
        ("rtx-a6000", "rtx-a6000"),
        ("rtx-6000-ada", "rtx-6000-ada"),
        ("rtx-pro-6000", "rtx-pro-6000"),
        ("a40", "a40"),
        ("a30", "a30"),
    ];
    for (name, id) in cards {
        // a 1B model fits every card, the 16 GB RTX 4080 included
        let v = json(&["estimate", "llama-3.2-1b", "--gpu", name, "--json"], 0);
        assert_eq!(v["fit"]["gpu_memory_bytes"], catalogue_bytes(id), "--gpu {name}");
    }
    let v = json(&["plan", "llama-3.1-8b", "--have", "h20", "--json"], 0);
    assert_eq!(v["have"], "h20");
    // what CUDA lets a process allocate of the H20's nvidia-smi total
    assert_eq!(v["have_memory_bytes"], vramfit_core::runtime::cuda_capacity(catalogue_bytes("h20")));
}

#[test]
fn a_name_that_only_begins_catalogue_names_is_refused_with_them_listed() {
    let cases: [(&str, &[&str]); 6] = [
        ("h2", &["h20", "h200-sxm"]),
        ("a100", &["a100-40gb-pcie", "a100-80gb-sxm"]),
        ("v100", &["v100-sxm2-16gb", "v100-sxm2-32gb"]),
        ("a800", &["a800-40gb-pcie", "a800-80gb-sxm"]),
        ("rtx-6000", &["rtx-6000-ada"]),
        ("h80", &["h800-pcie", "h800-sxm"]),
    ];
    for (name, listed) in cases {
        let (_, err) = run(&["estimate", "llama-3.1-8b", "--gpu", name], 2);
        assert!(err.contains("--gpu: ") && err.contains(&format!("'{name}'")), "{err}");
        assert!(err.contains("--gpu-mem"), "{err}");
        for id in listed {
            assert!(err.contains(id), "--gpu {name}: {id} not listed: {err}");
        }
        let (_, err) = run(&["plan", "llama-3.1-8b", "--have", name], 2);
        assert!(err.contains("--have: ") && listed.iter().all(|id| err.contains(id)), "{err}");
    }
    // an unknown name points at --gpu-mem, and --gpu-mem works for it
    let (_, err) = run(&["estimate", "llama-3.1-8b", "--gpu", "rtx-9999"], 2);
    assert!(err.contains("--gpu: unknown GPU 'rtx-9999'") && err.contains("--gpu-mem"), "{err}");
    let v = json(&["estimate", "llama-3.1-8b", "--gpu-mem", "96GiB", "--json"], 0);
    assert_eq!(v["fit"]["gpu_memory_bytes"], 96u64 << 30);
}

#[test]
fn diagnose_gpu_is_exact_too() {
    let fx = format!("{}/../diagnose/tests/fixtures/snapshot/snapshot_shared.pickle", env!("CARGO_MANIFEST_DIR"));
    let args = ["diagnose", &fx, "--model", "gpt2", "--task", "train", "--seq", "1024", "--json", "--gpu"];
    let (_, err) = run(&[&args[..], &["h2"]].concat(), 2);
    assert!(err.contains("--gpu: GPU name 'h2' is ambiguous") && err.contains("h20, h200-sxm"), "{err}");
    let v = json(&[&args[..], &["h20"]].concat(), 0);
    assert_eq!(v["estimate"]["card_bytes"], catalogue_bytes("h20"));
}
