//! Issue 14 §4: each bandwidth report of tests/fixtures/bandwidth (real
//! outputs, sources in SOURCES.md) with the verdict it gives, against the
//! built-in catalogue.

use std::path::PathBuf;
use vramfit_hw::bandwidth::bandwidth_test::parse_bandwidth_test;
use vramfit_hw::bandwidth::judge::{Bottleneck, Measurements};
use vramfit_hw::bandwidth::nccl::parse_nccl;
use vramfit_hw::bandwidth::p2p::parse_p2p;
use vramfit_hw::check::{check, Checked};
use vramfit_hw::reference::{builtin_reference_cards, expectation};
use vramfit_hw::{files, topo, xml, Level, Machine};

fn read(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel);
    files::read_text(&p, files::MAX_INPUT_BYTES).unwrap()
}

#[derive(Default)]
struct Case<'a> {
    xml: Option<&'a str>,
    topo: Option<&'a str>,
    bandwidth: Option<&'a str>,
    p2p: Option<&'a str>,
    nccl: Option<&'a str>,
    expect: Option<(Option<u32>, &'a str)>,
    nvlink: bool,
}

fn run(c: Case) -> Checked {
    let mut m = Machine::default();
    if let Some(f) = c.xml {
        m.merge(xml::parse_xml(&read(f), f).unwrap());
    }
    if let Some(f) = c.topo {
        m.topology = Some(topo::parse_topo(&read(f), f).unwrap());
    }
    let meas = Measurements {
        bandwidth_test: c.bandwidth.map(|f| (f.to_string(), parse_bandwidth_test(&read(f), f).unwrap())),
        p2p: c.p2p.map(|f| (f.to_string(), parse_p2p(&read(f), f).unwrap())),
        nccl: c.nccl.map(|f| (f.to_string(), parse_nccl(&read(f), f).unwrap())),
    };
    let (gpus, refs) = builtin_reference_cards().unwrap();
    let (count, model) = c.expect.map(|(n, m)| (n, Some(m))).unwrap_or((None, None));
    let e = expectation(count, model, c.nvlink, &gpus, &refs).unwrap();
    check(m, vec![], &meas, e, &refs)
}

fn finding<'a>(c: &'a Checked, code: &str) -> Vec<(Level, &'a str)> {
    c.verdict.findings.iter().filter(|f| f.code == code).map(|f| (f.level, f.message.as_str())).collect()
}

fn level(c: &Checked, code: &str) -> Option<Level> {
    finding(c, code).iter().map(|(l, _)| *l).max_by_key(|l| match l {
        Level::Fail => 3,
        Level::Warn => 2,
        Level::Pass => 1,
        Level::Info => 0,
    })
}

#[test]
fn a100_host_link_at_gen3_speed_is_a_finding() {
    // router-gao/cuda-demo: an A100-SXM4-40GB cloud VM measuring 12.3 GB/s host→device
    let c = run(Case { bandwidth: Some("bandwidth/cloud-a100-sxm4-40gb.bandwidthTest.txt"), ..Case::default() });
    let f = finding(&c, "host_link");
    let (lvl, msg) = f[0];
    assert_eq!(lvl, Level::Warn, "{msg}");
    assert!(msg.contains("host→device 12.3 GB/s is 39% of its PCIe gen4 x16 link (31.51 GB/s nominal"), "{msg}");
    assert!(
        msg.contains("that is PCIe gen3 x16 speed") && msg.contains("catalogue (A100 40GB SXM4: gen4; x16 assumed)"),
        "{msg}"
    );
    let b = c.bandwidth.as_ref().unwrap();
    assert_eq!(b.host_links[0].looks_like_gen, Some(3));
    // a finding, not a failure: the card is what was rented
    assert!(c.verdict.ok);
    // the device copy against the A100 40GB's 1555 GB/s
    assert!(
        finding(&c, "device_memory")[0].1.contains("1158 GB/s: 74% of the A100 40GB"),
        "{:?}",
        finding(&c, "device_memory")
    );
}

#[test]
fn healthy_gen3_links_are_described_not_flagged() {
    for (f, want) in [
        ("bandwidth/cloud-t4.bandwidthTest.txt", "host→device 9.7 GB/s: 62% of PCIe gen3 x16"),
        ("bandwidth/cloud-v100-sxm2-16gb.bandwidthTest.txt", "host→device 9.6 GB/s: 61% of PCIe gen3 x16"),
    ] {
        let c = run(Case { bandwidth: Some(f), ..Case::default() });
        let h = finding(&c, "host_link");
        assert!(h.iter().all(|(l, _)| *l == Level::Info), "{f}: {h:?}");
        assert!(h[0].1.contains(want), "{f}: {}", h[0].1);
    }
}

#[test]
fn p100_on_the_far_numa_node_is_a_finding_and_the_near_one_is_not() {
    // gearshifft PR 82: the same P100 run from NUMA node 0 (12.2 GB/s) and node 1 (3.8 GB/s);
    // the link (gen3 x16) comes from a real P100 -q -x (06.xml), the catalogue has no P100
    let near = run(Case {
        xml: Some("nvidia_smi/06.xml"),
        bandwidth: Some("bandwidth/gearshifft-p100-numa0.bandwidthTest.txt"),
        ..Case::default()
    });
    let h = finding(&near, "host_link");
    assert!(h.iter().all(|(l, _)| *l == Level::Info), "{h:?}");
    assert!(
        h[0].1.contains("12.15 GB/s: 77% of PCIe gen3 x16 (15.75 GB/s nominal; link from nvidia-smi (GPU 0 maximum))"),
        "{}",
        h[0].1
    );
    let far = run(Case {
        xml: Some("nvidia_smi/06.xml"),
        bandwidth: Some("bandwidth/gearshifft-p100-numa1.bandwidthTest.txt"),
        ..Case::default()
    });
    let h = finding(&far, "host_link");
    assert_eq!(h[0].0, Level::Warn);
    assert!(h[0].1.contains("3.78 GB/s is 24%") && h[0].1.contains("NUMA node"), "{}", h[0].1);
    assert_eq!(h[1].0, Level::Warn, "device→host 2.54 GB/s too: {}", h[1].1);
    // range mode on a 2080 Ti: no card in the catalogue, no GPU report: measured, not judged
    let r = run(Case { bandwidth: Some("bandwidth/helixer-2080ti-range.bandwidthTest.txt"), ..Case::default() });
    assert!(finding(&r, "host_link")[0].1.contains("link is not known"), "{:?}", finding(&r, "host_link"));
}

#[test]
fn h100_sxm_p2p_over_nvlink_passes_expect_nvlink() {
    // NVIDIA/nccl#1264: HGX H100, bidirectional P2P ~742 GB/s per pair; topology 12.txt (NV18)
    let c = run(Case {
        topo: Some("nvidia_smi/12.txt"),
        p2p: Some("bandwidth/nccl1264-h100-sxm-bidir.p2p.txt"),
        expect: Some((Some(8), "H100-SXM")),
        nvlink: true,
        ..Case::default()
    });
    assert_eq!(level(&c, "nvlink_p2p"), Some(Level::Pass));
    let info = finding(&c, "p2p_bandwidth");
    // slowest pair: min(739.42, 742.34)/2 = 369.71 GB/s of 18 links × 25 GB/s
    assert!(
        info.iter().any(|(_, m)| m.contains("slowest GPU0↔GPU3 370 GB/s per direction, 82% of 450 GB/s NVLink")),
        "{info:?}"
    );
    assert!(c.bandwidth.as_ref().unwrap().p2p.as_ref().unwrap().pairs.iter().all(|p| p.over_nvlink));
}

#[test]
fn p2p_at_pcie_speed_fails_expect_nvlink() {
    // tinygrad/open-gpu-kernel-modules#6: three RTX 4090 (PCIe gen4), P2P 41.4 GB/s both ways
    let c = run(Case {
        p2p: Some("bandwidth/tinygrad6-3x4090-bidir.p2p.txt"),
        expect: Some((Some(3), "RTX-4090")),
        nvlink: true,
        ..Case::default()
    });
    let f = finding(&c, "nvlink_p2p");
    assert_eq!(f[0].0, Level::Fail);
    assert!(
        f[0].1.contains("3 of 3 GPU pairs move data at PCIe speed") && f[0].1.contains("PCIe gen4 x16"),
        "{}",
        f[0].1
    );
    assert!(!c.verdict.ok);
    // without --expect-nvlink it is only described
    let c = run(Case { p2p: Some("bandwidth/tinygrad6-3x4090-bidir.p2p.txt"), ..Case::default() });
    assert!(c.verdict.ok && level(&c, "nvlink_p2p").is_none());
}

#[test]
fn peer_copies_slower_than_host_copies_are_a_finding() {
    // NVIDIA/nccl#814: 6 GPUs, 9.9 GB/s with P2P against 20–22 GB/s without
    let c = run(Case { p2p: Some("bandwidth/nccl814-6gpu-uni.p2p.txt"), ..Case::default() });
    let w: Vec<_> = finding(&c, "p2p_bandwidth").into_iter().filter(|(l, _)| *l == Level::Warn).collect();
    assert!(w[0].1.contains("15 pair(s) copy slower peer-to-peer than through host memory"), "{w:?}");
}

#[test]
fn rented_2080ti_pair_without_peer_access() {
    // Anthony-Hoo: an AutoDL container with 2 × RTX 2080 Ti, PCIe PIX, peer access off
    let all = Case {
        topo: Some("bandwidth/autodl-2080ti.topo.txt"),
        bandwidth: Some("bandwidth/autodl-2080ti.bandwidthTest.txt"),
        p2p: Some("bandwidth/autodl-2080ti.p2p.txt"),
        nccl: Some("bandwidth/autodl-2080ti.all_reduce.txt"),
        ..Case::default()
    };
    let c = run(Case { ..all });
    assert!(c.verdict.ok);
    let n = finding(&c, "nccl_bandwidth");
    assert_eq!(n[0].0, Level::Warn);
    assert!(n[0].1.contains("peaks at 4 GB/s bus bandwidth") && n[0].1.contains("peer access off"), "{}", n[0].1);
    let b = c.bandwidth.as_ref().unwrap();
    assert_eq!(b.nccl.as_ref().unwrap().bottleneck, Bottleneck::Pcie);
    assert_eq!(b.p2p.as_ref().unwrap().pairs[0].peer_access, Some(false));
    // sold as NVLink: topology, P2P and NCCL all fail it
    let c = run(Case { nvlink: true, ..all });
    for code in ["nvlink", "nvlink_p2p", "nvlink_nccl"] {
        assert_eq!(level(&c, code), Some(Level::Fail), "{code}");
    }
    assert!(finding(&c, "nvlink_p2p")[0].1.contains("`CANNOT Access Peer`"));
}

#[test]
fn two_host_all_reduce_is_reported_not_judged_against_nvlink() {
    // lessizzmore/create-a3mega-ztan-fork: 16 ranks on 2 hosts of 8 × H100
    let c = run(Case { nccl: Some("bandwidth/a3mega-2x8-h100.all_reduce.txt"), nvlink: true, ..Case::default() });
    let n = finding(&c, "nccl_bandwidth");
    assert!(n[0].1.contains("16 ranks on 2 hosts peaks at 339 GB/s bus bandwidth (at 8589934592 bytes)"), "{}", n[0].1);
    assert_eq!(c.bandwidth.as_ref().unwrap().nccl.as_ref().unwrap().bottleneck, Bottleneck::Network);
    assert!(level(&c, "nvlink_nccl").is_none());
}

#[test]
fn reports_from_another_machine_are_flagged() {
    // an A100 GPU report with a 2080 Ti P2P test: different machines
    let c = run(Case {
        xml: Some("nvidia_smi/01.xml"),
        p2p: Some("bandwidth/autodl-2080ti.p2p.txt"),
        expect: Some((Some(1), "A100-40GB")),
        ..Case::default()
    });
    let f = finding(&c, "bandwidth_inputs");
    assert_eq!(f[0].0, Level::Fail);
    assert!(f[0].1.contains("NVIDIA GeForce RTX 2080 Ti, which is not a GPU of this machine"), "{}", f[0].1);
}
