//! `vramfit check --fleet` on the fleet folders of crates/hw/tests/fixtures/fleet
//! (sources and the constructed edits in fleet/SOURCES.md), and the
//! collection script of `check --collect-script`.

use assert_cmd::Command;
use std::path::PathBuf;

fn fx(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../hw/tests/fixtures").join(rel).display().to_string()
}

fn vramfit() -> Command {
    Command::cargo_bin("vramfit").unwrap()
}

fn json(args: &[&str]) -> (serde_json::Value, i32) {
    let out = vramfit().args(args).arg("--json").output().unwrap();
    let v =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (v, out.status.code().unwrap())
}

fn failed(v: &serde_json::Value) -> Vec<(String, String, String)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["level"] == "fail")
        .map(|f| {
            (
                f["node"].as_str().unwrap_or_default().to_string(),
                f["code"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn four_nodes_one_slow_one_on_another_driver_exit_1_naming_exactly_those_two() {
    let dir = fx("fleet/autodl-4");
    let (v, code) = json(&["check", "--fleet", &dir]);
    assert_eq!(code, 1);
    assert_eq!((v["schema"].as_u64(), v["mode"].as_str(), v["node_count"].as_u64()), (Some(1), Some("fleet"), Some(4)));
    let f = failed(&v);
    let nodes: std::collections::BTreeSet<&str> = f.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(nodes.into_iter().collect::<Vec<_>>(), ["node-b", "node-c"], "{f:#?}");
    let b = f.iter().find(|x| x.0 == "node-b").unwrap();
    assert_eq!(b.2, "node-b: all-reduce bus bandwidth 3.20 GB/s, 80% of the fleet median 4.00 GB/s (below 90%)");
    let c = f.iter().find(|x| x.0 == "node-c").unwrap();
    assert_eq!(c.2, "node-c: driver 550.127.05; the other 3 node(s): 550.90.07");
    // each finding names its evidence file
    let ev =
        |code: &str| v["findings"].as_array().unwrap().iter().find(|x| x["code"] == code).unwrap()["evidence"].clone();
    assert_eq!(ev("fleet_allreduce"), serde_json::json!(["node-b/all_reduce.txt"]));
    assert_eq!(ev("fleet_driver"), serde_json::json!(["node-c/nvidia-smi.txt"]));
    // per-node verdicts: each node's own check
    assert_eq!(v["nodes"][1]["check"]["command"], "check");
    assert_eq!(v["nodes"][1]["facts"]["allreduce_busbw_bytes_per_s"], 3_200_000_000u64);
    // the text report says the same
    let out = vramfit().args(["check", "--fleet", &dir]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("verdict: NOT OK (2 failed check(s); nodes: node-b, node-c)"), "{text}");
    // the same fleet without the two faults
    let (v, code) = json(&["check", "--fleet", &fx("fleet/autodl-4-ok")]);
    assert_eq!(code, 0, "{:#?}", failed(&v));
    assert_eq!(v["ok"], true);
}

#[test]
fn lower_port_rate_and_a_nic_across_numa_named() {
    let (v, code) = json(&["check", "--fleet", &fx("fleet/ib-2"), "--expect-fabric", "8xib400"]);
    assert_eq!(code, 1);
    let f = failed(&v);
    assert!(
        f.iter().any(|x| x.0 == "ib-b" && x.2 == "ib-b: mlx5_4 port 1 runs at 200 Gb/s, 400 Gb/s rented"),
        "{f:#?}"
    );
    assert!(f.iter().all(|x| x.0 == "ib-b"), "{f:#?}");
    let numa: Vec<&serde_json::Value> =
        v["findings"].as_array().unwrap().iter().filter(|x| x["code"] == "nic_affinity").collect();
    assert_eq!(numa.len(), 2);
    assert!(numa[0]["message"].as_str().unwrap().contains("GPU0 → NIC0 SYS"), "{}", numa[0]["message"]);
    assert_eq!(v["expectation"]["fabric"]["rate_bits_per_s"], 400_000_000_000u64);
}

#[test]
fn fleet_expectation_counts_nodes_and_gpus() {
    let dir = fx("fleet/a3mega-2");
    let (v, code) = json(&["check", "--fleet", &dir, "--expect", "2x8xH100-80GB", "--expect-nvlink"]);
    assert_eq!(code, 0, "{:#?}", failed(&v));
    assert_eq!(v["expectation"]["nodes"], 2);
    assert_eq!(v["expectation"]["gpus_per_node"], 8);
    assert_eq!(v["runs"][0]["peak_busbw_bytes_per_s"], 338_820_000_000u64);
    let (v, code) = json(&["check", "--fleet", &dir, "--expect", "4x8xH100-80GB"]);
    assert_eq!(code, 1);
    assert!(failed(&v).iter().any(|x| x.1 == "node_count" && x.2 == "2 node folder(s) found, 4 expected"));
    // a fleet expectation without --fleet, a bad fabric: exit 2, named
    let out =
        vramfit().args(["check", "--topo", &fx("nvidia_smi/12.txt"), "--expect", "4x8xH100-80GB"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--fleet DIR"));
    let out = vramfit().args(["check", "--fleet", &dir, "--expect-fabric", "ethernet400"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("ib400"));
    let out = vramfit().args(["check", "--fleet", &fx("nvidia_smi/12.txt")]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a folder"));
}

#[test]
fn a_file_nothing_recognises_is_named() {
    let dir = std::env::temp_dir().join(format!("vramfit-fleet-unknown-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("n1")).unwrap();
    std::fs::copy(fx("nvidia_smi/12.txt"), dir.join("n1").join("a.txt")).unwrap();
    std::fs::write(dir.join("n1").join("notes.md"), "rack 7, slot 3\n").unwrap();
    let (v, code) = json(&["check", "--fleet", dir.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, 0);
    let f = v["findings"].as_array().unwrap().iter().find(|x| x["code"] == "file_unrecognised").unwrap();
    assert_eq!(f["node"], "n1");
    assert!(f["message"].as_str().unwrap().starts_with("n1/notes.md: not recognised"), "{}", f["message"]);
    assert_eq!(v["nodes"][0]["files"][0]["kind"], "nvidia_smi_topo");
}

/// The script is POSIX sh: shellcheck when installed, else `sh -n`.
#[test]
fn collection_script_is_posix_sh() {
    let out = vramfit().args(["check", "--collect-script"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(script.starts_with("#!/bin/sh\n"));
    let path = std::env::temp_dir().join(format!("vramfit-collect-{}.sh", std::process::id()));
    std::fs::write(&path, &script).unwrap();
    let shellcheck =
        ["/usr/bin/shellcheck", "/usr/local/bin/shellcheck"].into_iter().find(|p| std::path::Path::new(p).exists());
    let (tool, status) = match shellcheck {
        Some(sc) => (sc, std::process::Command::new(sc).args(["-s", "sh"]).arg(&path).status().unwrap()),
        None => ("sh -n", std::process::Command::new("sh").arg("-n").arg(&path).status().unwrap()),
    };
    std::fs::remove_file(&path).unwrap();
    eprintln!("collection script checked with {tool}");
    assert!(status.success(), "{tool} found problems in the collection script");
}

/// Run on a machine without GPU tools, the script writes a folder that
/// `check --fleet` reads and reports as "no GPU tools found", exit 0.
#[test]
fn collection_script_on_a_machine_without_gpus() {
    if std::process::Command::new("sh").arg("-c").arg("command -v nvidia-smi").status().unwrap().success() {
        eprintln!("nvidia-smi is installed here: the no-GPU run is not what this machine gives; skipped");
        return;
    }
    let out = vramfit().args(["check", "--collect-script"]).output().unwrap();
    let root = std::env::temp_dir().join(format!("vramfit-collect-run-{}", std::process::id()));
    std::fs::create_dir_all(&root).unwrap();
    let script = root.join("collect.sh");
    std::fs::write(&script, &out.stdout).unwrap();
    let fleet = root.join("fleet");
    let run = std::process::Command::new("sh")
        .arg(&script)
        .args(["-o", fleet.to_str().unwrap(), "-t", "20"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let nodes: Vec<_> = std::fs::read_dir(&fleet).unwrap().collect();
    assert_eq!(nodes.len(), 1, "one folder, named after the host");
    let manifest = std::fs::read_to_string(nodes[0].as_ref().unwrap().path().join("vramfit-collect.txt")).unwrap();
    assert!(manifest.starts_with("# vramfit collect 1\n") && manifest.contains("absent: nvidia-smi"), "{manifest}");
    let (v, code) = json(&["check", "--fleet", fleet.to_str().unwrap()]);
    assert_eq!(code, 0, "{v:#}");
    let f = v["findings"].as_array().unwrap().iter().find(|x| x["code"] == "no_gpu_tools").unwrap();
    assert!(f["message"].as_str().unwrap().contains("no GPU tools found"), "{}", f["message"]);
    let text = vramfit().args(["check", "--fleet", fleet.to_str().unwrap()]).output().unwrap();
    assert_eq!(text.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&text.stdout).contains("no GPU tools found"));
    // the multi-node commands are printed with the hosts, not run
    let p =
        std::process::Command::new("sh").arg(&script).args(["--print-multinode", "gpu-a", "gpu-b"]).output().unwrap();
    let printed = String::from_utf8(p.stdout).unwrap();
    assert!(printed.contains("-H gpu-a:GPUS,gpu-b:GPUS all_reduce_perf"), "{printed}");
    assert!(
        printed.contains("ib_write_bw -d HCA --report_gbits -F -D 10 gpu-a' > gpu-b/ib_write_bw-HCA-from-gpu-a.txt"),
        "{printed}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

/// The fleet JSON is a stable interface (docs/check.md "JSON: check --fleet --json"): its snapshot.
#[test]
fn fleet_json_snapshot() {
    let (mut v, _) = json(&["check", "--fleet", &fx("fleet/autodl-4")]);
    v["source"] = serde_json::json!("[fleet]/autodl-4");
    insta::assert_json_snapshot!("check_fleet_autodl_4", v);
}
