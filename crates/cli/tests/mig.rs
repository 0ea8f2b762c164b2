//! `vramfit mig`: the must-show cases through the binary, the JSON
//! schema, the mig-parted YAML parsed back, and bad input.

use assert_cmd::Command;
use serde::Deserialize;
use std::collections::BTreeMap;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

fn vramfit() -> Command {
    Command::cargo_bin("vramfit").unwrap()
}

fn run_json(args: &[&str]) -> (serde_json::Value, i32) {
    let out = vramfit().args(args).arg("--json").output().unwrap();
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (v, out.status.code().unwrap())
}

fn svc_args(specs: &[&str]) -> Vec<String> {
    specs.iter().flat_map(|s| ["--service".to_string(), s.to_string()]).collect()
}

fn plan(gpu: &str, specs: &[&str]) -> (serde_json::Value, i32) {
    let mut a = vec!["mig".to_string(), "plan".into(), "--gpu".into(), gpu.into()];
    a.extend(svc_args(specs));
    let refs: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    run_json(&refs)
}

#[test]
fn twelve_gib_on_a100_40gb_takes_3g_20gb_and_wastes_8_gb() {
    let (v, code) = plan("a100-40gb", &["chat=12GiB"]);
    assert_eq!(code, 0);
    assert_eq!(v["schema"], 1);
    assert_eq!(v["gpus_needed"], 1);
    let i = &v["layouts"][0]["instances"][0];
    assert_eq!(i["profile"], "3g.20gb");
    // 20091 MiB (19.62 GiB from -lgip) - 12288 MiB = 7803 MiB = 8.18 GB
    assert_eq!(i["waste_bytes"].as_u64().unwrap(), 7803 * MIB);
    assert_eq!(i["need_bytes"].as_u64().unwrap(), 12 * GIB);
    assert!(v["advice"].as_array().unwrap().iter().any(|a| a["kind"] == "one_user"));
}

#[test]
fn seven_4gib_services_fit_one_a100_40gb() {
    let specs: Vec<String> = (0..7).map(|i| format!("s{i}=4GiB")).collect();
    let refs: Vec<&str> = specs.iter().map(|s| s.as_str()).collect();
    let (v, code) = plan("a100-40gb", &refs);
    assert_eq!(code, 0);
    assert_eq!(v["gpus_needed"], 1);
    let inst = v["layouts"][0]["instances"].as_array().unwrap();
    assert_eq!(inst.len(), 7);
    assert!(inst.iter().all(|i| i["profile"] == "1g.5gb"));
    let share: f64 = inst.iter().map(|i| i["compute_share"].as_f64().unwrap()).sum();
    // 7 x 14 SMs = 98 of 108: well under the whole card
    assert!((share - 98.0 / 108.0).abs() < 1e-9);
}

#[test]
fn a_set_too_big_for_one_card_is_split_over_two() {
    let (v, code) = plan("a100-40gb", &["a=12GiB", "b=12GiB", "c=12GiB", "d=3GiB"]);
    assert_eq!(code, 0);
    assert_eq!(v["gpus_needed"], 2);
    for l in v["layouts"].as_array().unwrap() {
        // no two instances overlap on the memory-slice axis
        let mut used = [false; 8];
        for i in l["instances"].as_array().unwrap() {
            let (s, n) = (i["start"].as_u64().unwrap() as usize, i["size"].as_u64().unwrap() as usize);
            for slot in used.iter_mut().skip(s).take(n) {
                assert!(!*slot);
                *slot = true;
            }
        }
    }
}

#[test]
fn refusals_exit_1_with_reasons() {
    let (v, code) = plan("a100-40gb", &["ft=60GiB:task=train", "ok=2GiB", "big=13GiB:task=train,params=13B"]);
    assert_eq!(code, 1);
    assert_eq!(v["fits"], false);
    let r = v["refused"].as_array().unwrap();
    assert_eq!(r[0]["kind"], "training_across_instances");
    assert!(r[0]["reason"].as_str().unwrap().contains("no NVLink/P2P between instances"));
    assert_eq!(r[1]["kind"], "large_training");
}

#[test]
fn model_services_are_sized_by_the_estimator() {
    let (v, code) = plan("a100-80gb", &["chat=llama-2-7b:ctx=4096,conc=8", "small=llama-2-7b:dtype=int4"]);
    assert_eq!(code, 0, "{v}");
    let s = v["services"].as_array().unwrap();
    assert!(s[0]["sized_by"].as_str().unwrap().starts_with("estimate of"));
    // 8 sequences of KV cache cost more than one, and int4 weights less than bf16
    let (a, b) = (s[0]["need_bytes"].as_u64().unwrap(), s[1]["need_bytes"].as_u64().unwrap());
    assert!(a > b, "{a} {b}");
    // llama-2-7b bf16 weights alone are 13.5e9 bytes: more than a 1g.10gb slice
    assert!(a > 13_476_000_000);
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Devices {
    #[allow(dead_code)]
    All(String),
    List(Vec<u32>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Selector {
    devices: Devices,
    #[serde(rename = "device-filter")]
    device_filter: Option<Vec<String>>,
    #[serde(rename = "mig-enabled")]
    mig_enabled: bool,
    #[serde(rename = "mig-devices", default)]
    mig_devices: BTreeMap<String, u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MigParted {
    version: String,
    #[serde(rename = "mig-configs")]
    mig_configs: BTreeMap<String, Vec<Selector>>,
}

#[test]
fn mig_parted_yaml_parses_back_with_valid_profile_names() {
    let mut args = vec!["mig", "plan", "--gpu", "a100-40gb", "--emit", "mig-parted", "--config-name", "inference"];
    let specs = ["a=12GiB", "b=12GiB", "c=12GiB", "d=3GiB", "e=9GiB"];
    for s in &specs {
        args.push("--service");
        args.push(s);
    }
    let out = vramfit().args(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    let cfg: MigParted = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(cfg.version, "v1");
    let sel = &cfg.mig_configs["inference"];
    assert_eq!(sel.len(), 2);
    let (profiles, _) = run_json(&["mig", "profiles", "--gpu", "a100-40gb"]);
    let names: Vec<&str> =
        profiles["profiles"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    let mut total = 0;
    for (i, s) in sel.iter().enumerate() {
        assert!(matches!(&s.devices, Devices::List(d) if d == &vec![i as u32]));
        assert!(s.mig_enabled);
        assert!(s.device_filter.as_ref().unwrap().contains(&"0x20B010DE".to_string()));
        for (name, count) in &s.mig_devices {
            assert!(names.contains(&name.as_str()), "{name}");
            total += count;
        }
    }
    assert_eq!(total as usize, specs.len());
}

#[test]
fn profiles_listing_marks_unconfirmed_entries() {
    let out = vramfit().args(["mig", "profiles", "--gpu", "h200"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("unconfirmed:"), "{text}");
    let (v, _) = run_json(&["mig", "profiles", "--gpu", "a100-40gb"]);
    assert!(v["profiles"].as_array().unwrap().iter().all(|p| p["confirmed"] == true));
    insta::assert_snapshot!("a100_40gb_profiles", {
        let out = vramfit().args(["mig", "profiles", "--gpu", "a100-40gb"]).output().unwrap();
        String::from_utf8(out.stdout).unwrap()
    });
}

#[test]
fn human_plan_snapshot() {
    let out = vramfit()
        .args([
            "mig",
            "plan",
            "--gpu",
            "a100-40gb",
            "--service",
            "a=12GiB",
            "--service",
            "b=3GiB",
            "--service",
            "c=9GiB",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("a100_40gb_plan", String::from_utf8(out.stdout).unwrap());
}

#[test]
fn bad_input_exits_2_with_a_clear_message() {
    for (args, needle) in [
        (vec!["mig", "plan", "--gpu", "rtx4090", "--service", "a=1GiB"], "no MIG profile table"),
        (vec!["mig", "plan", "--gpu", "a100-40gb", "--service", "a=12G"], "ambiguous"),
        (vec!["mig", "plan", "--gpu", "a100-40gb", "--service", "a=1GiB", "--service", "a=2GiB"], "given twice"),
        (vec!["mig", "plan", "--gpu", "a100-40gb", "--service", "a=no-such-model-xyz"], "a=no-such-model-xyz"),
        (
            vec!["mig", "plan", "--gpu", "a100-40gb", "--service", "a=1GiB", "--lgip", "/nonexistent/lgip.txt"],
            "cannot read",
        ),
    ] {
        let out = vramfit().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(needle), "{args:?}: {err}");
    }
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
fn every_json_key_is_documented_in_docs_mig_md() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/mig.md")).unwrap();
    let (a, _) = plan("a100-40gb", &["a=12GiB", "t=60GiB:task=train", "m=llama-2-7b"]);
    let (b, _) = run_json(&["mig", "profiles", "--gpu", "h200"]);
    let mut k = Vec::new();
    keys(&a, "", &mut k);
    keys(&b, "", &mut k);
    for key in k {
        let leaf = key.rsplit('.').next().unwrap();
        assert!(
            doc.contains(&format!("`{leaf}`")) || doc.contains(&format!("`{leaf}[]`")),
            "docs/mig.md does not document `{key}`"
        );
    }
}

#[test]
fn explain_shows_the_arithmetic() {
    let out = vramfit()
        .args(["mig", "plan", "--gpu", "a100-40gb", "--service", "a=12GiB", "--explain", "--wide"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    // 20091 MiB = 21066940416 B; 12 GiB = 12884901888 B; difference 8182038528 B = 7803 MiB
    assert!(
        text.contains("waste = 19.62 GiB - 12.00 GiB = 7.62 GiB (21066940416 - 12884901888 = 8182038528 bytes)"),
        "{text}"
    );
    assert!(text.contains("too small: 1g.5gb, 1g.10gb, 2g.10gb"), "{text}");
    assert!(text.contains("42 of the card's 108 SMs"), "{text}");
}

fn hw_fx(rel: &str) -> String {
    format!("{}/../hw/tests/fixtures/{rel}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn lgip_file_overrides_the_catalogue_sizes() {
    let lgip = hw_fx("constructed/a100-40gb.lgip.txt");
    let lgipp = hw_fx("constructed/a100-40gb.lgipp.txt");
    for extra in [vec![], vec!["--lgipp".to_string(), lgipp.clone()]] {
        let mut args: Vec<String> = ["mig", "plan", "--gpu", "a100-40gb", "--service", "a=12GiB", "--lgip", &lgip]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(extra);
        let refs: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let (v, code) = run_json(&refs);
        assert_eq!(code, 0);
        assert!(v["gpu"]["source"].as_str().unwrap().contains("a100-40gb.lgip.txt"));
        let i = &v["layouts"][0]["instances"][0];
        assert_eq!(i["profile"], "3g.20gb");
        // the file says 19.50 GiB = 19968 MiB: waste 19968 - 12288 = 7680 MiB
        assert_eq!(i["waste_bytes"].as_u64().unwrap(), 7680 * MIB);
    }
}

#[test]
fn mig_parted_yaml_snapshot() {
    let out = vramfit()
        .args(["mig", "plan", "--gpu", "h100-80gb", "--emit", "mig-parted"])
        .args(["--service", "a=30GiB", "--service", "b=15GiB", "--service", "c=8GiB", "--service", "d=8GiB"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!("h100_mig_parted", String::from_utf8(out.stdout).unwrap());
}

#[test]
fn model_service_need_equals_vramfit_estimate_total() {
    for (opts, est) in [
        ("ctx=4096,conc=8", vec!["--context", "4096", "--concurrency", "8"]),
        ("dtype=int4", vec!["--dtype", "int4"]),
        ("ctx=16384,dtype=fp8", vec!["--context", "16384", "--dtype", "fp8"]),
    ] {
        let spec = format!("chat=llama-2-7b:{opts}");
        let (m, _) = plan("a100-80gb", &[&spec]);
        let mut a = vec!["estimate", "llama-2-7b"];
        a.extend(est);
        let (e, code) = run_json(&a);
        assert_eq!(code, 0);
        assert_eq!(m["services"][0]["need_bytes"], e["per_gpu"]["total_bytes"], "{opts}");
    }
}

#[test]
fn max_gpus_turns_a_two_card_plan_into_does_not_fit() {
    let mut a: Vec<String> =
        ["mig", "plan", "--gpu", "a100-40gb", "--max-gpus", "1"].iter().map(|s| s.to_string()).collect();
    a.extend(svc_args(&["a=12GiB", "b=12GiB", "c=12GiB"]));
    let refs: Vec<&str> = a.iter().map(|s| s.as_str()).collect();
    let (v, code) = run_json(&refs);
    assert_eq!(code, 1);
    assert_eq!(v["fits"], false);
    assert_eq!(v["gpus_needed"], 2);
    assert_eq!(v["max_gpus"], 1);
    let out = vramfit().args(&refs).output().unwrap();
    assert!(String::from_utf8(out.stdout).unwrap().contains("does not fit: the plan needs 2 GPU(s), 1 available"));
    let (v, code) = plan("a100-40gb", &["a=12GiB"]);
    assert_eq!((code, v["max_gpus"].is_null()), (0, true));
}

#[test]
fn mig_negative_size_is_a_size_error_not_an_unknown_model() {
    let out = vramfit().args(["mig", "plan", "--gpu", "a100-40gb", "--service", "chat=-1GiB"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("service 'chat': size -1GiB must be positive"), "{err}");
    assert!(!err.contains("model"), "{err}");
}
