//! The fleet check (`check --fleet`) and the fabric parsers on the
//! fixtures of tests/fixtures/fabric and tests/fixtures/fleet (sources and
//! every constructed edit in tests/fixtures/fabric/SOURCES.md).

use std::path::{Path, PathBuf};

use vramfit_hw::fabric::expect::parse_expect_fabric;
use vramfit_hw::fabric::hca::{parse_ibstat, parse_ibv_devinfo, PortState};
use vramfit_hw::fabric::perftest::{parse_perftest, Metric};
use vramfit_hw::fabric::LinkLayer;
use vramfit_hw::files::read_fleet_dir;
use vramfit_hw::fleet::{check_fleet, FleetChecked, FleetExpectation};
use vramfit_hw::reference::{builtin_reference_cards, expectation};
use vramfit_hw::verdict::Level;

fn fx(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(fx(rel)).unwrap()
}

fn fleet(rel: &str, e: FleetExpectation) -> FleetChecked {
    let input = read_fleet_dir(&fx(rel)).unwrap();
    let (_, refs) = builtin_reference_cards().unwrap();
    check_fleet(&input, e, &refs)
}

/// Failed findings of the fleet and of each node's verdict, as (node, code, message).
fn fails(f: &FleetChecked) -> Vec<(String, String, String)> {
    let mut v: Vec<(String, String, String)> = f
        .findings
        .iter()
        .filter(|x| x.level == Level::Fail)
        .map(|x| (x.node.clone().unwrap_or_default(), x.code.to_string(), x.message.clone()))
        .collect();
    for n in &f.nodes {
        if let Some(c) = &n.checked {
            for x in c.verdict.findings.iter().filter(|x| x.level == Level::Fail) {
                v.push((n.name.clone(), x.code.to_string(), x.message.clone()));
            }
        }
    }
    v
}

fn dump(f: &FleetChecked) -> String {
    f.findings.iter().map(|x| format!("{:?} {} {:?}: {}\n", x.level, x.code, x.node, x.message)).collect()
}

#[test]
fn ibstat_h100_eight_ndr_ports_and_a_roce_bond() {
    let h = parse_ibstat(&read("fabric/gpud-h100-ib400-all-active.ibstat.txt"), "i").unwrap();
    assert_eq!(h.len(), 9);
    let ib: Vec<_> = h.iter().flat_map(|x| &x.ports).filter(|p| p.link_layer == LinkLayer::InfiniBand).collect();
    assert_eq!(ib.len(), 8);
    assert!(ib.iter().all(|p| p.state == PortState::Active && p.rate_gbps == Some(400.0)));
    let bond = h.iter().find(|x| x.name == "mlx5_bond_0").unwrap();
    assert_eq!((bond.ports[0].link_layer, bond.ports[0].rate_gbps), (LinkLayer::Ethernet, Some(200.0)));
    assert_eq!(h[0].ca_type.as_deref(), Some("MT4129"));
    // tab-indented, ports down, a polling port, an ibpanic line after the output
    let d = parse_ibstat(&read("fabric/gpud-h100-roce400-polling.ibstat.txt"), "p").unwrap();
    let m11 = d.iter().find(|x| x.name == "mlx5_11").unwrap();
    assert_eq!((m11.ports[0].state, m11.ports[0].physical_state.as_deref()), (PortState::Down, Some("Polling")));
    let p = parse_ibstat(&read("fabric/gpud-a100-ibpanic.ibstat.txt"), "x").unwrap();
    assert!(p.iter().all(|x| x.ports[0].rate_gbps == Some(200.0)));
    let l = parse_ibstat(&read("fabric/l2fwd-nv6-cx6dx-roce100.ibstat.txt"), "l").unwrap();
    assert_eq!(l.len(), 2);
    // not ibstat: named
    let e = parse_ibstat(&read("nvidia_smi/13.txt"), "t.txt").unwrap_err().to_string();
    assert!(e.contains("topo -m"), "{e}");
}

#[test]
fn ibv_devinfo_plain_and_verbose() {
    let h = parse_ibv_devinfo(&read("fabric/heioy-mlx4-two-hcas.ibv_devinfo.txt"), "d").unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(h[0].name, "mlx4_1");
    assert_eq!(h[0].firmware.as_deref(), Some("2.42.5000"));
    assert_eq!(h[0].ports.iter().map(|p| p.state).collect::<Vec<_>>(), [PortState::Active, PortState::Down]);
    let v = parse_ibv_devinfo(&read("fabric/heioy-mlx4-port2-verbose.ibv_devinfo.txt"), "v").unwrap();
    let p = &v[0].ports[0];
    assert_eq!((p.port, p.width, p.lane_gbps, p.rate_gbps), (2, Some(4), Some(2.5), Some(10.0)));
    assert_eq!(p.physical_state.as_deref(), Some("POLLING"));
}

#[test]
fn perftest_units_and_old_layout() {
    let p = parse_perftest(&read("fabric/jebtang-mlx4-send-bw-old.perftest.txt"), "o").unwrap();
    assert_eq!((p.metric, p.bandwidth.len()), (Metric::Bandwidth, 11));
    // 2919.91 MB/s (2^20 B/s) = 24.49 Gb/s
    let (best, at) = p.best_average_gbps().unwrap();
    assert_eq!(at, 2048);
    assert!((best - 2919.91 * 8.0 * 1048576.0 / 1e9).abs() < 1e-9, "{best}");
    let r = parse_perftest(&read("fabric/perftest273-roce-post-list.perftest.txt"), "r").unwrap();
    assert_eq!((r.device.as_deref(), r.link_layer), (Some("ib0"), LinkLayer::Ethernet));
    assert_eq!(r.bandwidth[0].average_gbps, 0.48);
}

#[test]
fn nccl_alltoall_and_all_gather_layouts() {
    use vramfit_hw::bandwidth::nccl::{parse_nccl, Collective};
    let a = parse_nccl(&read("fabric/nccltests78-8x8-v100-ib100.alltoall.txt"), "a").unwrap();
    assert_eq!(a.rows.len(), 2);
    assert_eq!((a.rows[0].algbw_out, a.rows[0].busbw_out, a.rows[1].wrong), (0.52, 0.51, 0));
    let g = parse_nccl(&read("fabric/nccl1435-2gpu.all_gather.txt"), "g").unwrap();
    assert_eq!(g.collective, Some(Collective::AllGather));
    assert_eq!(g.peak().unwrap().busbw(), 144.59);
}

#[test]
fn expect_fabric_forms() {
    assert!(parse_expect_fabric("8xib400").is_ok());
    assert!(parse_expect_fabric("8xeth400").is_err());
}

#[test]
fn four_nodes_slow_allreduce_and_odd_driver_named() {
    let f = fleet("fleet/autodl-4", FleetExpectation::default());
    let fails = fails(&f);
    eprintln!("{}", dump(&f));
    let nodes: std::collections::BTreeSet<&str> = fails.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(nodes.into_iter().collect::<Vec<_>>(), ["node-b", "node-c"], "{fails:#?}");
    let b = fails.iter().find(|(n, _, _)| n == "node-b").unwrap();
    assert_eq!(b.1, "fleet_allreduce");
    assert!(b.2.contains("3.20 GB/s") && b.2.contains("80%") && b.2.contains("4.00 GB/s"), "{}", b.2);
    let c = fails.iter().find(|(n, _, _)| n == "node-c").unwrap();
    assert_eq!(c.1, "fleet_driver");
    assert!(c.2.contains("550.127.05") && c.2.contains("550.90.07"), "{}", c.2);
    assert!(!f.ok);
    let ok = fleet("fleet/autodl-4-ok", FleetExpectation::default());
    assert!(ok.ok, "{:#?}", self::fails(&ok));
}

#[test]
fn port_below_rented_rate_and_nics_across_numa_named() {
    let e = FleetExpectation { fabric: Some(parse_expect_fabric("8xib400").unwrap()), ..FleetExpectation::default() };
    let f = fleet("fleet/ib-2", e);
    eprintln!("{}", dump(&f));
    let rate = f.findings.iter().find(|x| x.code == "fabric_rate").unwrap();
    assert_eq!((rate.level, rate.node.as_deref()), (Level::Fail, Some("ib-b")));
    assert!(rate.message.contains("mlx5_4 port 1 runs at 200 Gb/s, 400 Gb/s rented"), "{}", rate.message);
    let numa: Vec<_> = f.findings.iter().filter(|x| x.code == "nic_affinity").collect();
    assert_eq!(numa.len(), 2, "one per node");
    assert!(numa[0].message.contains("GPU0 → NIC0 SYS") && !numa[0].message.contains("GPU6"), "{}", numa[0].message);
}

#[test]
fn multi_node_allreduce_against_the_fabric_bounds() {
    let (gpus, refs) = builtin_reference_cards().unwrap();
    let node = expectation(Some(8), Some("H100-80GB"), true, &gpus, &refs).unwrap();
    let f = fleet("fleet/a3mega-2", FleetExpectation { nodes: Some(2), node, fabric: None });
    eprintln!("{}", dump(&f));
    assert!(f.ok, "{:#?}", fails(&f));
    assert_eq!(f.runs.len(), 1);
    let r = &f.runs[0];
    assert_eq!((r.hosts.len(), r.ranks), (2, 16));
    assert_eq!(r.peak_busbw_gbs, 338.82);
    assert!(r.bounds.is_empty(), "no ibstat, no fabric expectation: not judged");
}

#[test]
fn multi_node_allreduce_judged_with_each_nodes_ibstat() {
    // a3mega-2 plus the ibstat of an 8 × NDR 400 H100 node in each node folder (constructed composition)
    let dir = std::env::temp_dir().join(format!("vramfit-fleet-a3-{}", std::process::id()));
    for n in ["ztan-mig-235z", "ztan-mig-gq73"] {
        std::fs::create_dir_all(dir.join(n)).unwrap();
        std::fs::copy(fx("fleet/a3mega-2").join(n).join("topo.txt"), dir.join(n).join("topo.txt")).unwrap();
        std::fs::copy(fx("fabric/gpud-h100-ib400-all-active.ibstat.txt"), dir.join(n).join("ibstat.txt")).unwrap();
    }
    std::fs::copy(fx("fleet/a3mega-2/all_reduce-2nodes.txt"), dir.join("all_reduce-2nodes.txt")).unwrap();
    let (_, refs) = builtin_reference_cards().unwrap();
    let input = read_fleet_dir(&dir).unwrap();
    let f = check_fleet(&input, FleetExpectation::default(), &refs);
    let r = &f.runs[0];
    // B = 8 × 400 Gb/s = 400 GB/s per node: ring 400, tree and in-network 400 × 2·15/16 = 750
    assert_eq!(r.node_fabric_gbs, Some(400.0));
    assert_eq!(r.bounds.iter().map(|b| b.gbs.round()).collect::<Vec<_>>(), [400.0, 750.0, 750.0]);
    assert!((r.share_of_bound.unwrap() - 338.82 / 400.0).abs() < 1e-9);
    let c = f.findings.iter().find(|x| x.code == "fabric_collective").unwrap();
    assert_eq!(c.level, Level::Warn, "85% of the ring bound, no fabric rented: a warning");
    assert!(c.message.contains("85% of the ring bound"), "{}", c.message);
    let e = FleetExpectation { fabric: Some(parse_expect_fabric("8xib400").unwrap()), ..FleetExpectation::default() };
    let f = check_fleet(&input, e, &refs);
    let c = f.findings.iter().find(|x| x.code == "fabric_collective").unwrap();
    assert_eq!(c.level, Level::Fail, "{}", c.message);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn nic_legend_names_the_nearest_hca() {
    let f = fleet("fleet/stelline-1", FleetExpectation::default());
    let n = &f.nodes[0];
    let names: Vec<String> = n.facts.nic_affinity.iter().map(|a| a.as_ref().unwrap().0.clone()).collect();
    assert_eq!(names, ["mlx5_0", "mlx5_0", "mlx5_2", "mlx5_2"]);
    assert_eq!(n.facts.driver.as_deref(), Some("575.51.03"));
    // NODE, no GPU of the fleet closer: not flagged
    assert!(!f.findings.iter().any(|x| x.code == "nic_affinity"));
    assert!(f.ok, "{}", dump(&f));
}

#[test]
fn perftest_against_the_rented_line_rate() {
    // one node with the early ib_send_bw run (mlx4_0, 2919.91 MB/s = 24.5 Gb/s) and an 8 × 400 ibstat,
    // judged against a rented 56 Gb/s port (FDR): 44 % of the line rate (constructed composition)
    let dir = std::env::temp_dir().join(format!("vramfit-fleet-perftest-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("n1")).unwrap();
    std::fs::copy(fx("fabric/jebtang-mlx4-send-bw-old.perftest.txt"), dir.join("n1").join("p.txt")).unwrap();
    std::fs::copy(fx("fabric/heioy-mlx4-two-hcas.ibv_devinfo.txt"), dir.join("n1").join("d.txt")).unwrap();
    let (_, refs) = builtin_reference_cards().unwrap();
    let input = read_fleet_dir(&dir).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let e = FleetExpectation { fabric: Some(parse_expect_fabric("ib56").unwrap()), ..FleetExpectation::default() };
    let f = check_fleet(&input, e, &refs);
    let p = f.findings.iter().find(|x| x.code == "perftest_bandwidth").unwrap();
    assert_eq!((p.level, p.node.as_deref()), (Level::Fail, Some("n1")), "{}", p.message);
    assert!(
        p.message.contains("averages 24.5 Gb/s at 2048 bytes: 44% of the 56 Gb/s line rate (rented)"),
        "{}",
        p.message
    );
    assert_eq!(p.evidence, ["n1/p.txt"]);
    // the ibv_devinfo ports: port 1 active on both adapters, port 2 down on both
    let down: Vec<_> = f.findings.iter().filter(|x| x.code == "fabric_port_down").collect();
    assert_eq!(down.len(), 2);
    assert!(down[0].message.contains("mlx4_1 port 2 (InfiniBand) is Down"), "{}", down[0].message);
}

#[test]
fn a_gpu_far_from_its_nic_where_the_others_are_near_fails() {
    // constructed from fleet/stelline-1's topo -m (4 GPUs, 4 NICs, NODE paths): GPU0↔NIC0 and
    // GPU2↔NIC2 set to PIX (a PCIe switch), so GPU1 and GPU3, still NODE, are the odd ones
    let topo = read("fleet/stelline-1/coyote2/topo.txt")
        .replace("GPU0     X      NODE    SYS     SYS     NODE ", "GPU0     X      NODE    SYS     SYS     PIX  ")
        .replace("NIC0    NODE    NODE    SYS ", "NIC0    PIX     NODE    SYS ")
        .replace(
            "GPU2    SYS     SYS      X      NODE    SYS     SYS     NODE ",
            "GPU2    SYS     SYS      X      NODE    SYS     SYS     PIX  ",
        )
        .replace("NIC2    SYS     SYS     NODE ", "NIC2    SYS     SYS     PIX  ");
    let input = vramfit_hw::fleet::FleetInput {
        source: "t".into(),
        nodes: vec![vramfit_hw::fleet::NodeInput {
            name: "n".into(),
            files: vec![vramfit_hw::NamedText { name: "n/topo.txt".into(), text: topo }],
        }],
        ..Default::default()
    };
    let (_, refs) = builtin_reference_cards().unwrap();
    let f = check_fleet(&input, FleetExpectation::default(), &refs);
    let a = f.findings.iter().find(|x| x.code == "nic_affinity").unwrap();
    assert_eq!(a.level, Level::Fail, "{}", a.message);
    assert!(a.message.contains("GPU1 → mlx5_0 NODE") && a.message.contains("GPU3 → mlx5_2 NODE"), "{}", a.message);
    assert!(!a.message.contains("GPU0") && !a.message.contains("GPU2 "), "{}", a.message);
}
