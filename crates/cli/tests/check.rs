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
        "--bandwidth",
        &fx("bandwidth/autodl-2080ti.bandwidthTest.txt"),
        "--p2p",
        &fx("bandwidth/autodl-2080ti.p2p.txt"),
        "--nccl",
        &fx("bandwidth/autodl-2080ti.all_reduce.txt"),
        "--expect",
        "8xA100-40GB",
        "--expect-nvlink",
    ]));
    assert!(v["bandwidth"]["p2p"]["pairs"].is_array() && v["bandwidth"]["nccl"].is_object());
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

// -- issue 14 §3: the files people actually paste, through the binary --

#[test]
fn h100_sxm_capture_is_the_sxm_card_and_ecc_is_read() {
    let (v, code) = json(&s(&["check", "--text", &fx("captures/h100-hbm3-590.q.txt"), "--expect", "1xH100-SXM"]));
    assert_eq!(code, 0, "{v}");
    let g = &v["gpus"][0];
    assert_eq!(g["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(g["memory_matches"], "H100 SXM5 80GB", "it was reported as the H100 PCIe 80GB");
    assert_eq!(g["identified_by"], "pci_device_id");
    assert_eq!(g["ecc_current"], true);
    // renting the PCIe card and getting the SXM one (or the reverse) is a model failure when the variant is named
    let (v, code) = json(&s(&["check", "--text", &fx("captures/h100-hbm3-590.q.txt"), "--expect", "1xH100-PCIe"]));
    assert_eq!(code, 1);
    let f = v["findings"].as_array().unwrap().iter().find(|f| f["code"] == "model" && f["level"] == "fail").unwrap();
    assert!(
        f["message"].as_str().unwrap().contains("is an H100 SXM5 80GB (PCI device id 2330), not an H100-PCIe"),
        "{f}"
    );
}

#[test]
fn ansi_topo_and_cuda_not_found_and_rocm_smi() {
    let (v, code) = json(&s(&["check", "--topo", &fx("derived/12-ansi-crlf.topo.txt"), "--expect-nvlink"]));
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["interconnect"]["pairs"].as_array().unwrap().len(), 28);
    let (v, _) = json(&s(&["check", "--xml", &fx("derived/04-cuda-not-found.xml")]));
    assert_eq!(v["cuda_version"], serde_json::Value::Null);
    let out = vramfit().args(["check", "--xml", &fx("rocm/roc-smi-90.txt")]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("this is rocm-smi output (AMD GPUs); vramfit check reads NVIDIA tools' output"), "{err}");
    let out = vramfit().args(["check", "--topo", &fx("derived/13-nic-cell-dropped.topo.txt")]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("GPU6-NIC1"));
}

#[test]
fn escape_sequences_are_never_printed_raw() {
    let dir = std::env::temp_dir().join(format!("vramfit-check-esc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let x = std::fs::read_to_string(fx("nvidia_smi/01.xml")).unwrap().replacen(
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA A100-SXM4-40GB&#27;]0;owned&#7;&#27;[2J",
        1,
    );
    let p = dir.join("esc.xml");
    std::fs::write(&p, x).unwrap();
    for json_flag in [false, true] {
        let mut cmd = vramfit();
        cmd.args(["check", "--xml", p.to_str().unwrap()]);
        if json_flag {
            cmd.arg("--json");
        }
        let out = cmd.output().unwrap();
        assert!(!out.stdout.contains(&0x1b) && !out.stdout.contains(&0x07), "raw control bytes in the output");
        assert!(String::from_utf8_lossy(&out.stdout).contains("\\x1b]0;owned"));
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn unreadable_memory_total_fails_expect() {
    let dir = std::env::temp_dir().join(format!("vramfit-check-mem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let x = std::fs::read_to_string(fx("nvidia_smi/04.xml")).unwrap();
    let needle = x.split("<fb_memory_usage>").nth(1).unwrap().split("</total>").next().unwrap().to_string();
    let p = dir.join("neg.xml");
    std::fs::write(&p, x.replacen(&needle, "\n\t\t\t<total>-1 MiB", 1)).unwrap();
    let (v, code) = json(&s(&["check", "--xml", p.to_str().unwrap(), "--expect", "1xT4"]));
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["gpus"][0]["memory_total_unreadable"], "-1 MiB");
    std::fs::remove_dir_all(&dir).ok();
}

// -- issue 14 §4: bandwidth reports --

#[test]
fn bandwidth_reports_of_a_rented_pcie_pair_fail_expect_nvlink() {
    let b = |f: &str| fx(&format!("bandwidth/{f}"));
    let args = s(&[
        "check",
        "--topo",
        &b("autodl-2080ti.topo.txt"),
        "--bandwidth",
        &b("autodl-2080ti.bandwidthTest.txt"),
        "--p2p",
        &b("autodl-2080ti.p2p.txt"),
        "--nccl",
        &b("autodl-2080ti.all_reduce.txt"),
        "--expect-nvlink",
    ]);
    let (v, code) = json(&args);
    assert_eq!(code, 1);
    let bw = &v["bandwidth"];
    assert_eq!(bw["host_links"][0]["measured_bytes_per_s"], 12_200_000_000u64);
    assert_eq!(bw["p2p"]["pairs"][0]["over_nvlink"], false);
    assert_eq!(bw["p2p"]["pairs"][0]["peer_access"], false);
    assert_eq!(bw["nccl"]["peak_busbw_bytes_per_s"], 4_000_000_000u64);
    assert_eq!(bw["nccl"]["bottleneck"], "pcie");
    let fails: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["level"] == "fail")
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(fails, vec!["nvlink", "nvlink_p2p", "nvlink_nccl"]);
}

#[test]
fn a100_host_link_at_gen3_speed_is_a_finding_with_the_xml() {
    // the link from a real A100-SXM4-40GB -q -x (gen4 x16) and a real A100-SXM4-40GB bandwidthTest (12.3 GB/s)
    let (v, code) = json(&s(&[
        "check",
        "--xml",
        &fx("nvidia_smi/01.xml"),
        "--bandwidth",
        &fx("bandwidth/cloud-a100-sxm4-40gb.bandwidthTest.txt"),
    ]));
    assert_eq!(code, 0);
    let h = &v["bandwidth"]["host_links"][0];
    assert_eq!(
        (h["link_gen"].as_u64(), h["link_width"].as_u64(), h["looks_like_gen"].as_u64()),
        (Some(4), Some(16), Some(3))
    );
    assert_eq!(h["link_from"], "nvidia-smi (GPU 0 maximum)");
    let f = v["findings"].as_array().unwrap().iter().find(|f| f["code"] == "host_link").unwrap();
    assert_eq!(f["level"], "warn");
    assert!(f["message"].as_str().unwrap().contains("that is PCIe gen3 x16 speed"), "{f}");
}

#[test]
fn bandwidth_report_errors_name_the_file_and_line() {
    let dir = std::env::temp_dir().join(format!("vramfit-check-bw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("p2p.txt");
    let cut: String = std::fs::read_to_string(fx("bandwidth/nccl1264-h100-sxm-bidir.p2p.txt"))
        .unwrap()
        .lines()
        .take(6)
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&p, cut).unwrap();
    let out = vramfit().args(["check", "--p2p", p.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("p2p.txt: the bidirectional, P2P enabled matrix is cut: 4 of 8 rows"), "{err}");
    let out = vramfit().args(["check", "--nccl", &fx("bandwidth/autodl-2080ti.p2p.txt")]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`p2pBandwidthLatencyTest` output (give it with --p2p)"));
    std::fs::remove_dir_all(&dir).ok();
}
