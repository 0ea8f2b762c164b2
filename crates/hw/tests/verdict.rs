//! The verdict against what was rented, on the real fixtures.

use std::path::PathBuf;
use vramfit_hw::verdict::{classify, family_of, infer_mig_profile, parse_expect, MemoryClass, RefCard, RefSlice};
use vramfit_hw::{topo, verdict, xml, Expectation, Gpu, Level, Machine};

const MIB: u64 = 1 << 20;

fn read(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel);
    std::fs::read_to_string(p).unwrap()
}

fn sl(p: &str, mib: u64) -> RefSlice {
    let sms = match p {
        "1g.5gb" | "1g.10gb" | "1g.20gb" => Some(14),
        "3g.20gb" => Some(42),
        "4g.20gb" => Some(56),
        _ => None,
    };
    RefSlice { profile: p.into(), bytes: mib * MIB, sms }
}

fn refs() -> Vec<RefCard> {
    vec![
        RefCard {
            id: "a100-40gb-sxm".into(),
            name: "A100 40GB SXM4".into(),
            family: family_of("a100-40gb-sxm"),
            whole_mib: 40960,
            mig_profiles: vec![sl("1g.5gb", 4864), sl("3g.20gb", 20091), sl("4g.20gb", 20091)],
            ..RefCard::default()
        },
        RefCard {
            id: "a100-80gb-sxm".into(),
            name: "A100 80GB SXM4".into(),
            family: family_of("a100-80gb-sxm"),
            whole_mib: 81920,
            mig_profiles: vec![sl("1g.10gb", 9728), sl("1g.20gb", 19968)],
            ..RefCard::default()
        },
        RefCard {
            id: "h100-sxm".into(),
            name: "H100 SXM5 80GB".into(),
            family: family_of("h100-sxm"),
            whole_mib: 81559,
            mig_profiles: vec![],
            ..RefCard::default()
        },
    ]
}

fn codes(v: &vramfit_hw::Verdict, level: Level) -> Vec<&'static str> {
    v.findings.iter().filter(|f| f.level == level).map(|f| f.code).collect()
}

#[test]
fn families_and_expect_strings() {
    assert_eq!(family_of("a100-80gb-sxm"), "a100");
    assert_eq!(family_of("rtx-4090"), "rtx4090");
    assert_eq!(parse_expect("8xA100-80GB").unwrap(), (Some(8), "A100-80GB".into()));
    assert_eq!(parse_expect("H100").unwrap(), (None, "H100".into()));
    assert!(parse_expect("0xA100").is_err());
    assert!(parse_expect("").is_err());
}

#[test]
fn slice_sized_memory_is_called_a_mig_slice() {
    let r = refs();
    // 10240 MiB vs 1g.10gb 9728 MiB: 5.3 % off, within 6 %
    assert!(
        matches!(classify("NVIDIA A100-SXM4-80GB", 10240 * MIB, &r), MemoryClass::MigSlice { profile, .. } if profile == "1g.10gb")
    );
    assert!(
        matches!(classify("NVIDIA A100-SXM4-40GB", 5120 * MIB, &r), MemoryClass::MigSlice { profile, .. } if profile == "1g.5gb")
    );
    assert!(
        matches!(classify("NVIDIA A100-SXM4-40GB", 40960 * MIB, &r), MemoryClass::WholeCard { card, .. } if card == "A100 40GB SXM4")
    );
    assert!(
        matches!(classify("NVIDIA A100-SXM4-80GB", 81920 * MIB, &r), MemoryClass::WholeCard { card, .. } if card == "A100 80GB SXM4")
    );
    assert_eq!(classify("Tesla T4", 15360 * MIB, &r), MemoryClass::Unknown);
    // 9984 MiB is nearer an A100-40GB 2-slice profile, but the name says 80GB
    let mut r2 = r.clone();
    r2[0].mig_profiles.push(sl("1g.10gb", 9984));
    assert!(
        matches!(classify("NVIDIA A100-SXM4-80GB", 10240 * MIB, &r2), MemoryClass::MigSlice { card, profile, .. } if profile == "1g.10gb" && card == "A100 80GB SXM4")
    );
    assert!(
        matches!(classify("NVIDIA A100-SXM4-40GB", 10240 * MIB, &r2), MemoryClass::MigSlice { card, .. } if card == "A100 40GB SXM4")
    );
}

#[test]
fn mig_enabled_a100_fails_a_whole_card_rental() {
    let m = xml::parse_xml(&read("nvidia_smi/01.xml"), "01.xml").unwrap();
    let r = refs();
    let e = Expectation { count: Some(1), card: Some(r[0].clone()), nvlink: false, ..Expectation::default() };
    let v = verdict(&m, &e, &r);
    assert!(!v.ok);
    assert_eq!(codes(&v, Level::Fail), vec!["mig_enabled"]);
    assert!(codes(&v, Level::Pass).contains(&"count"));
    assert!(codes(&v, Level::Pass).contains(&"model"));
    // without an expectation the same machine is only described
    let v = verdict(&m, &Expectation { count: None, card: None, nvlink: false, ..Expectation::default() }, &r);
    assert!(v.ok);
}

#[test]
fn trimmed_count_fails_and_warns() {
    let m = xml::parse_xml(&read("nvidia_smi/02.xml"), "02.xml").unwrap();
    let r = refs();
    let e = Expectation { count: Some(4), card: Some(r[1].clone()), nvlink: false, ..Expectation::default() };
    let v = verdict(&m, &e, &r);
    assert!(codes(&v, Level::Fail).contains(&"count"));
    assert!(codes(&v, Level::Warn).contains(&"attached_mismatch"));
}

fn machine_with(n: u32, name: &str, mib: u64, topo_file: &str) -> Machine {
    let mut m = Machine::default();
    for i in 0..n {
        let mut g = Gpu::new(i, name);
        g.memory_total_bytes = Some(mib * MIB);
        m.gpus.push(g);
    }
    m.topology = Some(topo::parse_topo(&read(topo_file), topo_file).unwrap());
    m
}

#[test]
fn nvlink_expected_passes_on_nv18_and_fails_on_pcie() {
    let r = refs();
    let e = Expectation { count: Some(8), card: Some(r[2].clone()), nvlink: true, ..Expectation::default() };
    let m = machine_with(8, "NVIDIA H100 80GB HBM3", 81559, "nvidia_smi/12.txt");
    let v = verdict(&m, &e, &r);
    assert!(v.ok, "{:?}", v.findings);
    assert!(codes(&v, Level::Pass).contains(&"nvlink"));

    let m = machine_with(8, "NVIDIA H100 80GB HBM3", 81559, "nvidia_smi/13.txt");
    let v = verdict(&m, &e, &r);
    assert!(!v.ok);
    let f = v.findings.iter().find(|f| f.code == "nvlink").unwrap();
    assert_eq!(f.level, Level::Fail);
    assert!(f.message.starts_with("28 of 28 GPU pairs have no NVLink (GPU0-GPU1 SYS"), "{}", f.message);

    // no topology at all: NVLink not verified is a failure
    let mut m = machine_with(8, "NVIDIA H100 80GB HBM3", 81559, "nvidia_smi/12.txt");
    m.topology = None;
    let v = verdict(&m, &e, &r);
    assert!(v.findings.iter().any(|f| f.code == "nvlink" && f.level == Level::Fail && f.message.contains("--topo")));
}

#[test]
fn a_slice_rented_as_a_card_fails_on_memory() {
    let r = refs();
    let mut m = Machine::default();
    let mut g = Gpu::new(0, "NVIDIA A100-SXM4-80GB");
    g.memory_total_bytes = Some(10240 * MIB);
    m.gpus.push(g);
    let v = verdict(
        &m,
        &Expectation { count: Some(1), card: Some(r[1].clone()), nvlink: false, ..Expectation::default() },
        &r,
    );
    let f = v.findings.iter().find(|f| f.code == "memory").unwrap();
    assert_eq!(f.level, Level::Fail);
    assert!(f.message.contains("a MIG slice (1g.10gb of A100 80GB SXM4)"), "{}", f.message);
}

#[test]
fn mig_device_profiles_are_inferred_from_memory_and_sms() {
    let r = refs();
    let a100_40 = Some(40960 * MIB);
    // fixture 01: 19968 MiB, 42 SMs on an A100-SXM4-40GB: 3g.20gb (4g.20gb has 56 SMs)
    assert_eq!(
        infer_mig_profile("NVIDIA A100-SXM4-40GB", a100_40, 19968 * MIB, Some(42), &r).as_deref(),
        Some("3g.20gb")
    );
    // without the SM count the two 20 GB profiles are indistinguishable
    assert_eq!(infer_mig_profile("NVIDIA A100-SXM4-40GB", a100_40, 19968 * MIB, None, &r), None);
    // fixture 02: 19968 MiB, 14 SMs on an A100-SXM4-80GB: 1g.20gb
    assert_eq!(
        infer_mig_profile("NVIDIA A100-SXM4-80GB", Some(81920 * MIB), 19968 * MIB, Some(14), &r).as_deref(),
        Some("1g.20gb")
    );
    assert_eq!(infer_mig_profile("Tesla T4", None, 19968 * MIB, Some(14), &r), None);
}

#[test]
fn topology_only_counts_gpus_but_cannot_prove_the_model() {
    let r = refs();
    let m = Machine {
        topology: Some(topo::parse_topo(&read("nvidia_smi/12.txt"), "12.txt").unwrap()),
        ..Machine::default()
    };
    let e = Expectation { count: Some(8), card: Some(r[2].clone()), nvlink: true, ..Expectation::default() };
    let v = verdict(&m, &e, &r);
    assert!(codes(&v, Level::Pass).contains(&"count"));
    assert!(codes(&v, Level::Pass).contains(&"nvlink"));
    assert_eq!(codes(&v, Level::Fail), vec!["model"]);
    let v = verdict(&m, &Expectation { count: Some(8), card: None, nvlink: true, ..Expectation::default() }, &r);
    assert!(v.ok);
}

#[test]
fn expect_without_a_model_or_malformed_is_refused() {
    for bad in [
        "8x",
        "8X",
        "8",
        "8×",
        " 8x ",
        "0xA100",
        "8xxA100",
        "8xA100 80GB",
        "8x-A100",
        "-1xA100",
        "8yA100",
        "99999999999xA100",
        "8x!",
    ] {
        let e = parse_expect(bad).unwrap_err();
        assert!(e.contains("8xA100-80GB"), "{bad}: {e}");
    }
    assert!(parse_expect("8x").unwrap_err().contains("no GPU model"));
    assert!(parse_expect("8").unwrap_err().contains("without a GPU model"));
    assert_eq!(parse_expect("8×H100").unwrap(), (Some(8), "H100".into()));
    assert_eq!(parse_expect(" 2XA100-80GB ").unwrap(), (Some(2), "A100-80GB".into()));
}

#[test]
fn topo_count_disagreeing_with_the_gpu_report_fails_the_verdict() {
    // 8-GPU topology (all NV18) with a 1-GPU report: inputs from different machines.
    let r = refs();
    let m = machine_with(1, "NVIDIA H100 80GB HBM3", 81559, "nvidia_smi/12.txt");
    let v = verdict(&m, &Expectation { count: None, card: None, nvlink: true, ..Expectation::default() }, &r);
    assert!(!v.ok);
    let f = v.findings.iter().find(|f| f.code == "topo_count").unwrap();
    assert_eq!(f.level, Level::Fail);
    assert!(f.message.contains("topology lists 8 GPUs, the GPU report 1"), "{}", f.message);
    // described only (no expectation): a warning, the machine is still described
    let v = verdict(&m, &Expectation { count: None, card: None, nvlink: false, ..Expectation::default() }, &r);
    assert!(v.ok);
    assert!(codes(&v, Level::Warn).contains(&"topo_count"));
}

/// Issue 24: cards whose family token begins another's (L40 / L40S, H20 /
/// H200, RTX 4090 / 4090 D) are told apart by the longer token, on the
/// embedded catalogue, whatever the memory.
#[test]
fn a_family_token_inside_a_longer_one_is_not_that_family() {
    let (_, r) = vramfit_hw::reference::builtin_reference_cards().unwrap();
    let whole = |name: &str, mib: u64| match classify(name, mib * MIB, &r) {
        MemoryClass::WholeCard { card, .. } => card,
        other => panic!("{name}: {other:?}"),
    };
    // L40 and L40S both show 46068 MiB: only the name tells them apart
    assert_eq!(whole("NVIDIA L40S", 46068), "L40S");
    assert_eq!(whole("NVIDIA L40", 46068), "L40");
    assert_eq!(whole("NVIDIA H20", 97871), "H20 96GB");
    assert_eq!(whole("NVIDIA H200", 143771), "H200 SXM 141GB");
    assert_eq!(whole("NVIDIA GeForce RTX 4090 D", 24564), "RTX 4090 D");
    assert_eq!(whole("NVIDIA GeForce RTX 4090", 24564), "RTX 4090");
    assert_eq!(whole("Tesla V100S-PCIE-32GB", 32510), "V100S PCIe 32GB");
    // an H200 total is no H20 card's, and an H20 named as an H200 is not one either
    assert_eq!(classify("NVIDIA H200", 97871 * MIB, &r), MemoryClass::Unknown);
    // the H800 SXM and PCIe share a name stem and 81559 MiB: the PCI id tells them apart
    for (pci, want) in [("0x232410DE", "h800-sxm"), ("0x232210DE", "h800-pcie")] {
        let mut g = Gpu::new(0, "NVIDIA H800");
        g.pci_device_id = Some(pci.into());
        g.memory_total_bytes = Some(81559 * MIB);
        let (card, by) = verdict::identify(&g, &r).unwrap();
        assert_eq!((card.id.as_str(), by), (want, verdict::IdentifiedBy::PciDeviceId), "{pci}");
        assert!(matches!(verdict::classify_gpu(&g, &r).0, MemoryClass::WholeCard { .. }), "{pci}");
    }
}
