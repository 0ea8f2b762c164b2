//! `vramfit check` on the real fixtures of crates/hw/tests/fixtures
//! (sources in SOURCES.md there): report, verdict, exit codes, errors.

use assert_cmd::Command;
use std::path::PathBuf;

fn fx(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../hw/tests/fixtures").join(rel).display().to_string()
}

fn vramfit() -> Command {
    Command::cargo_bin("vramfit").unwrap()
}

fn json(args: &[String]) -> (serde_json::Value, i32) {
    let out = vramfit().args(args).arg("--json").output().unwrap();
    let v =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (v, out.status.code().unwrap())
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

#[test]
fn mig_enabled_a100_reported_and_fails_a_whole_card_rental() {
    let xml = fx("nvidia_smi/01.xml");
    let (v, code) = json(&s(&["check", "--xml", &xml]));
    assert_eq!(code, 0, "no expectation: report only");
    assert_eq!(v["schema"], 1);
    assert_eq!(v["gpu_count"], 1);
    let g = &v["gpus"][0];
    assert_eq!(g["name"], "NVIDIA A100-SXM4-40GB");
    assert_eq!(g["memory_class"], "whole_card");
    assert_eq!(g["memory_matches"], "A100 40GB SXM4");
    assert_eq!(g["mig_current"], "enabled");
    assert_eq!(g["mig_devices"].as_array().unwrap().len(), 2);
    assert_eq!(v["driver_version"], "510.47.03");
    let (v, code) = json(&s(&["check", "--xml", &xml, "--expect", "1xA100-40GB"]));
    assert_eq!(code, 1);
    assert_eq!(v["ok"], false);
    assert!(v["findings"].as_array().unwrap().iter().any(|f| f["code"] == "mig_enabled" && f["level"] == "fail"));
}

#[test]
fn nvlink_topology_passes_and_pcie_only_fails() {
    let (v, code) = json(&s(&["check", "--topo", &fx("nvidia_smi/12.txt"), "--expect-nvlink"]));
    assert_eq!(code, 0);
    assert_eq!(v["interconnect"]["all_nvlink"], true);
    assert_eq!(v["interconnect"]["pairs"].as_array().unwrap().len(), 28);
    assert_eq!(v["interconnect"]["pairs"][0]["link"], "NV18");
    for f in ["13.txt", "14.txt", "15.txt"] {
        let (v, code) = json(&s(&["check", "--topo", &fx(&format!("nvidia_smi/{f}")), "--expect-nvlink"]));
        assert_eq!(code, 1, "{f}");
        assert_eq!(v["interconnect"]["all_nvlink"], false);
        assert!(v["interconnect"]["pairs"].as_array().unwrap().iter().all(|p| p["nvlink"] == false));
    }
}

#[test]
fn wrong_count_model_and_missing_topology_fail() {
    let (v, code) =
        json(&s(&["check", "--xml", &fx("nvidia_smi/03.xml"), "--expect", "8xA100-80GB", "--expect-nvlink"]));
    assert_eq!(code, 1);
    let fails: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["level"] == "fail")
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(fails.contains(&"count") && fails.contains(&"model") && fails.contains(&"nvlink"), "{fails:?}");
    assert_eq!(v["expectation"]["card_id"], "a100-80gb-sxm");
}

#[test]
fn list_and_lgi_add_mig_profiles_and_instances() {
    let (v, _) =
        json(&s(&["check", "--list", &fx("nvidia_smi/11.txt"), "--lgi", &fx("constructed/a100-40gb.lgi.txt")]));
    let d = v["gpus"][0]["mig_devices"].as_array().unwrap();
    assert_eq!(d.len(), 7);
    assert!(d.iter().all(|x| x["profile"] == "1g.10gb"));
    assert_eq!(v["gpu_instances"][0]["start"], 4);
}

#[test]
fn human_report_snapshot() {
    let out = vramfit().args(["check", "--xml", &fx("nvidia_smi/01.xml"), "--expect", "1xA100-40GB"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap().replace(&fx(""), "<fixtures>/");
    insta::assert_snapshot!("check_01_expect_a100_40gb", text);
}

#[test]
fn no_driver_no_files_asks_for_files() {
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return; // a real driver: NVML works here
    }
    let out = vramfit().arg("check").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("NVML is absent") && err.contains("--xml"), "{err}");
}

#[test]
fn malformed_files_exit_2_naming_file_and_expectation() {
    let dir = std::env::temp_dir().join(format!("vramfit-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.xml");
    std::fs::write(&bad, "<nvidia_smi_log><gpu><product_name>X</product_name>").unwrap();
    let out = vramfit().args(["check", "--xml", bad.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("bad.xml: not `nvidia-smi -q -x` XML"), "{err}");
    let topo = dir.join("topo.txt");
    std::fs::write(&topo, "\tGPU0\tGPU1\nGPU0\t X \tNVX\nGPU1\tNV4\t X \n").unwrap();
    let out = vramfit().args(["check", "--topo", topo.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("topo.txt: line 2: expected X, NV#, PIX, PXB, PHB, NODE or SYS for GPU0-GPU1"), "{err}");
    let out = vramfit().args(["check", "--xml", &fx("nvidia_smi/01.xml"), "--expect", "8xB9000"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).ok();
}

fn keys(v: &serde_json::Value, prefix: &str, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                out.push(format!("{prefix}{k}"));
                keys(x, &format!("{prefix}{k}."), out);
            }
        }
        serde_json::Value::Array(a) => {
            for x in a {
                keys(x, prefix, out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_json_key_is_documented_in_docs_check_md() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/check.md")).unwrap();
    let (v, _) = json(&s(&[
        "check",
        "--xml",
        &fx("nvidia_smi/01.xml"),
        "--list",
        &fx("nvidia_smi/11.txt"),
        "--topo",
        &fx("nvidia_smi/13.txt"),
        "--lgi",
        &fx("constructed/a100-40gb.lgi.txt"),
        "--lgip",
        &fx("constructed/a100-40gb.lgip.txt"),
        "--expect",
        "8xA100-40GB",
        "--expect-nvlink",
    ]));
    let mut k = Vec::new();
    keys(&v, "", &mut k);
    assert!(k.len() > 40);
    for key in k {
        let leaf = key.rsplit('.').next().unwrap();
        assert!(
            doc.contains(&format!("`{leaf}`")) || doc.contains(&format!("`{leaf}[]`")),
            "docs/check.md does not document `{key}`"
        );
    }
}

#[test]
fn slice_sized_devices_are_called_mig_slices_against_the_real_catalogue() {
    let dir = std::env::temp_dir().join(format!("vramfit-check-slice-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (src, whole, slice, expect, want) in [
        ("nvidia_smi/02.xml", "81920 MiB", "10240 MiB", "1xA100-80GB", "1g.10gb of A100 80GB SXM4"),
        ("nvidia_smi/01.xml", "40960 MiB", "5120 MiB", "1xA100-40GB", "1g.5gb of A100 40GB SXM4"),
    ] {
        let text = std::fs::read_to_string(fx(src)).unwrap();
        let needle = format!("<total>{whole}</total>");
        assert!(text.contains(&needle));
        let p = dir.join(src.replace('/', "_"));
        std::fs::write(&p, text.replacen(&needle, &format!("<total>{slice}</total>"), 1)).unwrap();
        let (v, code) = json(&s(&["check", "--xml", p.to_str().unwrap(), "--expect", expect]));
        assert_eq!(code, 1);
        assert_eq!(v["gpus"][0]["memory_class"], "mig_slice");
        assert_eq!(v["gpus"][0]["memory_matches"], want);
        let f = v["findings"].as_array().unwrap().iter().find(|f| f["code"] == "memory").unwrap();
        assert!(f["message"].as_str().unwrap().contains(&format!("a MIG slice ({want})")), "{f}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn asymmetric_topo_matrix_is_an_error_naming_the_cells() {
    let p = std::env::temp_dir().join(format!("vramfit-check-asym-{}.txt", std::process::id()));
    std::fs::write(&p, "\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tSYS\t X \n").unwrap();
    let out = vramfit().args(["check", "--topo", p.to_str().unwrap(), "--expect-nvlink"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(p.to_str().unwrap()) && err.contains("GPU0→GPU1 is NV4 but GPU1→GPU0 is SYS"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn topo_and_xml_disagreeing_on_gpu_count_fail_the_verdict() {
    let args = s(&["check", "--xml", &fx("nvidia_smi/04.xml"), "--topo", &fx("nvidia_smi/12.txt"), "--expect-nvlink"]);
    let (v, code) = json(&args);
    assert_eq!(code, 1);
    assert_eq!(v["ok"], false);
    let f = v["findings"].as_array().unwrap().iter().find(|f| f["code"] == "topo_count").unwrap();
    assert_eq!(f["level"], "fail");
    assert!(f["message"].as_str().unwrap().contains("topology lists 8 GPUs, the GPU report 1"), "{f}");
}

#[test]
fn expect_without_a_gpu_model_exits_2_with_the_format() {
    for bad in ["8x", "8", "0xA100-80GB", "8xxA100", "8xA100 80GB", "8x!"] {
        let out = vramfit().args(["check", "--xml", &fx("nvidia_smi/04.xml"), "--expect", bad]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("8xA100-80GB"), "{bad}: {err}");
    }
}
