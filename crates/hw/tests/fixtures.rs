//! One test per fixture file (tests/fixtures/SOURCES.md): parse, check the
//! facts the check relies on, snapshot the parsed result. A file under
//! tests/fixtures without its own test fails `every_fixture_file_has_its_own_test`,
//! so the first failure never hides the rest. Then malformed inputs.

use std::path::PathBuf;
use vramfit_hw::bandwidth::bandwidth_test::{parse_bandwidth_test, Direction, HostMemory};
use vramfit_hw::bandwidth::nccl::parse_nccl;
use vramfit_hw::bandwidth::p2p::{parse_p2p, MatrixKind};
use vramfit_hw::fabric::hca::{parse_ibstat, parse_ibv_devinfo, PortState};
use vramfit_hw::fabric::perftest::parse_perftest;
use vramfit_hw::fabric::LinkLayer;
use vramfit_hw::machine::MigMode;
use vramfit_hw::topo::Link;
use vramfit_hw::{list, mig, text, topo, xml, HwError};

/// A file of a fleet folder (fixtures/fleet, SOURCES.md there): recognised
/// by its content as the output of a tool the fleet check reads, and read
/// by that tool's parser (the fleet behaviour itself: tests/fleet.rs).
fn fleet_file(t: &str, f: &str) {
    use vramfit_hw::foreign::Kind;
    let kind = vramfit_hw::fleet::recognise::recognise(t).unwrap_or_else(|| panic!("{f}: not recognised"));
    let ok = match kind {
        Kind::NvidiaSmiTopo => topo::parse_topo(t, f).is_ok(),
        Kind::NvidiaSmiTable => vramfit_hw::fleet::version::parse_table_header(t, f).is_ok(),
        Kind::BandwidthTest => parse_bandwidth_test(t, f).is_ok(),
        Kind::P2pBandwidthLatencyTest => parse_p2p(t, f).is_ok(),
        Kind::NcclTests => parse_nccl(t, f).is_ok(),
        Kind::Ibstat => parse_ibstat(t, f).is_ok(),
        other => panic!("{f}: {other:?} is not a kind the fleet fixtures hold"),
    };
    assert!(ok, "{f}: recognised as {kind:?} but refused by its parser");
}

fn path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

fn read(rel: &str) -> String {
    vramfit_hw::files::read_text(&path(rel), vramfit_hw::files::MAX_INPUT_BYTES).unwrap()
}

const MIB: u64 = 1 << 20;

/// `name: "path" => |text, file| { … };` — one `#[test]` per fixture file,
/// and the list of files covered.
macro_rules! fixtures {
    ($($name:ident : $path:literal => $check:expr;)*) => {
        $(
            #[test]
            fn $name() {
                let text = read($path);
                let check: fn(&str, &str) = $check;
                check(&text, $path);
            }
        )*
        const COVERED: &[&str] = &[$($path),*];
    };
}

#[test]
fn every_fixture_file_has_its_own_test() {
    fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, base, out);
            } else {
                out.push(p.strip_prefix(base).unwrap().to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let base = path("");
    let mut files = Vec::new();
    walk(&base, &base, &mut files);
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| !f.ends_with("SOURCES.md") && !f.ends_with("index.json") && !COVERED.contains(&f.as_str()))
        .collect();
    assert!(missing.is_empty(), "fixture files without a test: {missing:?}");
}

fixtures! {
    xml_01_a100_40gb_mig_two_3g: "nvidia_smi/01.xml" => |t, f| {
        let m = xml::parse_xml(t, f).unwrap();
        assert_eq!(m.driver_version.as_deref(), Some("510.47.03"));
        assert_eq!(m.cuda_version.as_deref(), Some("11.6"));
        assert_eq!(m.gpus.len(), 1);
        let g = &m.gpus[0];
        assert_eq!(g.name, "NVIDIA A100-SXM4-40GB");
        assert_eq!(g.mig_current, MigMode::Enabled);
        assert_eq!(g.mig_pending, MigMode::Enabled);
        assert_eq!(g.memory_total_bytes, Some(40960 * MIB));
        assert_eq!(g.mig_devices.len(), 2);
        assert!(g.mig_devices.iter().all(|d| d.sm_count == Some(42) && d.memory_total_bytes == Some(19968 * MIB)));
        assert_eq!(g.pci_device_id.as_deref(), Some("20B010DE"));
        insta::assert_json_snapshot!("xml_01", m);
    };
    xml_02_a100_80gb_mig_four_1g_and_trimmed_count: "nvidia_smi/02.xml" => |t, f| {
        let m = xml::parse_xml(t, f).unwrap();
        assert_eq!(m.attached_gpus, Some(4));
        assert_eq!(m.gpus.len(), 1);
        let g = &m.gpus[0];
        assert_eq!(g.memory_total_bytes, Some(81920 * MIB));
        assert_eq!(g.mig_devices.len(), 4);
        assert!(g.mig_devices.iter().all(|d| d.sm_count == Some(14)));
        assert_eq!(g.ecc.current, Some(true));
        insta::assert_json_snapshot!("xml_02", m);
    };
    xml_03_dual_a5000_v13: "nvidia_smi/03.xml" => |t, f| {
        let m = xml::parse_xml(t, f).unwrap();
        assert_eq!(m.gpus.len(), 2);
        assert!(m.gpus.iter().all(|g| g.mig_current == MigMode::NotSupported && g.mig_devices.is_empty()));
        assert_eq!(m.gpus[0].memory_total_bytes, Some(24564 * MIB));
        assert_eq!(m.gpus[1].bus_id.as_deref(), Some("00000000:C1:00.0"));
        assert_eq!(m.gpus[0].ecc.current, Some(false));
        insta::assert_json_snapshot!("xml_03", m);
    };
    xml_04_tesla_t4: "nvidia_smi/04.xml" => |t, f| {
        let m = xml::parse_xml(t, f).unwrap();
        assert_eq!(m.gpus[0].name, "Tesla T4");
        insta::assert_json_snapshot!("xml_04", m);
    };
    xml_05_a10g: "nvidia_smi/05.xml" => |t, f| {
        let m = xml::parse_xml(t, f).unwrap();
        assert_eq!(m.gpus[0].name, "NVIDIA A10G");
        // a virtual GPU prints device 0000: no PCI id to identify it by
        assert_eq!(vramfit_hw::verdict::pci_device(m.gpus[0].pci_device_id.as_deref().unwrap()), None);
        insta::assert_json_snapshot!("xml_05", m);
    };
    xml_06_tesla_p100: "nvidia_smi/06.xml" => |t, f| {
        let m = xml::parse_xml(t, f).unwrap();
        assert_eq!(m.gpus[0].name, "Tesla P100-PCIE-16GB");
        insta::assert_json_snapshot!("xml_06", m);
    };
    xml_07_rtx_4000_ada_v13: "nvidia_smi/07.xml" => |t, f| {
        let m = xml::parse_xml(t, f).unwrap();
        assert_eq!(m.gpus[0].name, "NVIDIA RTX 4000 SFF Ada Generation");
        insta::assert_json_snapshot!("xml_07", m);
    };
    list_11_seven_1g_10gb: "nvidia_smi/11.txt" => |t, f| {
        let m = list::parse_list(t, f).unwrap();
        assert_eq!(m.gpus.len(), 1);
        assert_eq!(m.gpus[0].name, "NVIDIA A100-SXM4-80GB");
        assert_eq!(m.gpus[0].mig_devices.len(), 7);
        assert!(m.gpus[0].mig_devices.iter().all(|d| d.profile.as_deref() == Some("1g.10gb")));
        insta::assert_json_snapshot!("list_11", m);
    };
    topo_12_h100_nv18_everywhere: "nvidia_smi/12.txt" => |t, f| {
        let t = topo::parse_topo(t, f).unwrap();
        assert_eq!(t.gpus.len(), 8);
        let p = t.pairs();
        assert_eq!(p.len(), 28);
        assert!(p.iter().all(|p| p.link == Link::Nvlink { links: 18 }));
        assert_eq!(t.numa_affinity[4].as_deref(), Some("1"));
        insta::assert_json_snapshot!("topo_12", t);
    };
    topo_13_pcie_only_sys_with_nics: "nvidia_smi/13.txt" => |t, f| {
        let t = topo::parse_topo(t, f).unwrap();
        assert_eq!(t.gpus.len(), 8);
        assert_eq!(t.nics, vec!["NIC0", "NIC1"]);
        assert!(t.pairs().iter().all(|p| p.link == Link::Sys));
        assert_eq!(t.cpu_affinity[6].as_deref(), Some("56-111,168-223"));
        insta::assert_json_snapshot!("topo_13", t);
    };
    topo_14_pcie_mixed: "nvidia_smi/14.txt" => |t, f| {
        let t = topo::parse_topo(t, f).unwrap();
        assert_eq!(t.gpus.len(), 5);
        assert_eq!(t.links[1][2], Link::Phb);
        assert_eq!(t.links[1][3], Link::Node);
        assert_eq!(t.links[0][4], Link::Sys);
        assert!(!t.pairs().iter().any(|p| p.link.is_nvlink()));
        insta::assert_json_snapshot!("topo_14", t);
    };
    topo_15_two_5090_phb: "nvidia_smi/15.txt" => |t, f| {
        let t = topo::parse_topo(t, f).unwrap();
        assert_eq!(t.pairs(), vec![topo::Pair { a: 0, b: 1, link: Link::Phb }]);
        insta::assert_json_snapshot!("topo_15", t);
    };
    constructed_lgip: "constructed/a100-40gb.lgip.txt" => |t, f| {
        let rows = mig::parse_lgip(t, f).unwrap();
        assert_eq!(rows.len(), 7);
        assert_eq!((rows[4].name.as_str(), rows[4].id, rows[4].total, rows[4].sm), ("3g.20gb", 9, 2, 42));
        assert!((rows[4].memory_gib - 19.50).abs() < 1e-9);
        insta::assert_json_snapshot!("lgip", rows);
    };
    constructed_lgipp: "constructed/a100-40gb.lgipp.txt" => |t, f| {
        let pp = mig::parse_lgipp(t, f).unwrap();
        assert_eq!(pp.len(), 7);
        assert_eq!(pp[5], mig::LgippRow { gpu: 0, id: 5, starts: vec![0], size: 4 });
        insta::assert_json_snapshot!("lgipp", pp);
    };
    constructed_lgi: "constructed/a100-40gb.lgi.txt" => |t, f| {
        let gi = mig::parse_lgi(t, f).unwrap();
        assert_eq!(gi.len(), 3);
        assert_eq!((gi[0].start, gi[0].size), (4, 4));
        insta::assert_json_snapshot!("lgi", gi);
    };
    constructed_q_text_with_mig_device: "constructed/a100-40gb-mig.q.txt" => |t, f| {
        let m = text::parse_text(t, f).unwrap();
        let g = &m.gpus[0];
        assert_eq!(g.name, "NVIDIA A100-PCIE-40GB");
        assert_eq!(g.memory_total_bytes, Some(40960 * MIB));
        assert_eq!(g.memory_reserved_bytes, Some(473 * MIB));
        assert_eq!(g.mig_current, MigMode::Enabled);
        assert_eq!(g.mig_devices.len(), 1);
        assert_eq!(g.mig_devices[0].sm_count, Some(42));
        assert_eq!(g.mig_devices[0].memory_total_bytes, Some(20096 * MIB));
        assert_eq!(g.pci_device_id.as_deref(), Some("20F110DE"));
        assert_eq!((g.pcie_gen_max, g.pcie_width_current), (Some(4), Some(16)));
        assert_eq!(g.ecc.current, Some(true));
        assert_eq!(m.driver_version.as_deref(), Some("535.129.03"));
        insta::assert_json_snapshot!("q_text_constructed", m);
    };

    // -- issue 14 §3: the files people actually paste --
    capture_h100_topo_ansi_header: "captures/h100-hbm3-590.topo.txt" => |t, f| {
        // current drivers underline the header: `\t\x1b[4mGPU0\tCPU Affinity…\x1b[0m`
        assert!(t.contains("\x1b[4mGPU0"));
        let t = topo::parse_topo(t, f).unwrap();
        assert_eq!(t.gpus, vec!["GPU0"]);
        assert_eq!(t.cpu_affinity[0].as_deref(), Some("0-19"));
        assert!(t.pairs().is_empty());
    };
    capture_windows_topo_ansi_empty_affinity: "captures/rtx2080s-win-610.topo.txt" => |t, f| {
        let t = topo::parse_topo(t, f).unwrap();
        assert_eq!(t.gpus, vec!["GPU0"]);
        assert_eq!(t.cpu_affinity[0], None);
    };
    capture_h100_q_ecc_mode_and_device_id: "captures/h100-hbm3-590.q.txt" => |t, f| {
        let m = text::parse_text(t, f).unwrap();
        let g = &m.gpus[0];
        assert_eq!(g.name, "NVIDIA H100 80GB HBM3");
        // `ECC Mode` (R590), not `Ecc Mode`: read
        assert_eq!((g.ecc.current, g.ecc.pending), (Some(true), Some(true)));
        assert_eq!(g.pci_device_id.as_deref(), Some("233010DE"));
        assert_eq!(g.memory_total_bytes, Some(81559 * MIB));
        assert_eq!((g.pcie_gen_max, g.pcie_width_max), (Some(5), Some(16)));
        assert_eq!(m.cuda_version.as_deref(), Some("13.1"));
        insta::assert_json_snapshot!("capture_h100_q", m);
    };
    capture_h100_list: "captures/h100-hbm3-590.L.txt" => |t, f| {
        let m = list::parse_list(t, f).unwrap();
        assert_eq!(m.gpus[0].name, "NVIDIA H100 80GB HBM3");
    };
    capture_h100_mig_q_four_devices: "captures/h100-mig-590.q.txt" => |t, f| {
        let m = text::parse_text(t, f).unwrap();
        let g = &m.gpus[0];
        assert_eq!(g.mig_current, MigMode::Enabled);
        let d: Vec<(Option<u32>, Option<u64>)> = g.mig_devices.iter().map(|d| (d.sm_count, d.memory_total_bytes.map(|b| b / MIB))).collect();
        assert_eq!(d, vec![(Some(60), Some(40448)), (Some(32), Some(20096)), (Some(16), Some(9984)), (Some(16), Some(9984))]);
        insta::assert_json_snapshot!("capture_h100_mig_q", m);
    };
    capture_driver_610_deprecated_version_labels: "captures/rtx2080s-610.q.txt" => |t, f| {
        // `CUDA Version : 13.3 [Deprecated; …]` plus `KMD Version` / `CUDA UMD Version`
        let m = text::parse_text(t, f).unwrap();
        assert_eq!(m.driver_version.as_deref(), Some("610.57.04"));
        assert_eq!(m.cuda_version.as_deref(), Some("13.3"));
        assert_eq!(m.gpus[0].pci_device_id.as_deref(), Some("1E8110DE"));
    };
    capture_l40s_q: "captures/l40s-595.q.txt" => |t, f| {
        let m = text::parse_text(t, f).unwrap();
        assert_eq!(m.gpus[0].name, "NVIDIA L40S");
        assert_eq!(m.gpus[0].memory_total_bytes, Some(46068 * MIB));
        assert_eq!(m.gpus[0].ecc.current, Some(true));
    };
    derived_8x_nv18_with_ansi_header_and_crlf: "derived/12-ansi-crlf.topo.txt" => |t, f| {
        assert!(t.contains("\x1b[4mGPU0") && t.contains("\r\n"));
        let a = topo::parse_topo(t, f).unwrap();
        let b = topo::parse_topo(&read("nvidia_smi/12.txt"), "12.txt").unwrap();
        assert_eq!(a, b, "escapes and CRLF change nothing");
    };
    derived_nic_cell_dropped_is_refused: "derived/13-nic-cell-dropped.topo.txt" => |t, f| {
        let e = topo::parse_topo(t, f).unwrap_err().to_string();
        assert!(e.contains("line 8") && e.contains("GPU6-NIC1") && e.contains("mangled paste"), "{e}");
    };
    derived_header_lost_nic_labels_is_refused: "derived/13-header-nics-lost.topo.txt" => |t, f| {
        // the old parser read `SYS` as GPU0's CPU affinity here
        let e = topo::parse_topo(t, f).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("more link cells than the header has device columns"), "{e}");
    };
    derived_xml_cuda_not_found: "derived/04-cuda-not-found.xml" => |t, f| {
        let m = xml::parse_xml(t, f).unwrap();
        assert_eq!(m.cuda_version, None, "\"Not Found\" is not a version");
        assert_eq!(m.driver_version.as_deref(), Some("515.105.01"));
        let q = t.replace("<cuda_version>Not Found</cuda_version>", "<cuda_version>CUDA Not Found</cuda_version>");
        assert_eq!(xml::parse_xml(&q, f).unwrap().cuda_version, None);
    };
    rocm_smi_table_is_named: "rocm/roc-smi-90.txt" => |t, f| {
        for e in [
            xml::parse_xml(t, f).unwrap_err(),
            text::parse_text(t, f).unwrap_err(),
            list::parse_list(t, f).unwrap_err(),
            topo::parse_topo(t, f).unwrap_err(),
        ] {
            let e = e.to_string();
            assert!(e.contains("this is rocm-smi output (AMD GPUs)") && e.contains("`nvidia-smi -q -x` (--xml)"), "{e}");
        }
    };
    rocm_smi_id_is_named: "rocm/legacy-rocm-build-4750-mi300x.txt" => |t, f| {
        let e = xml::parse_xml(t, f).unwrap_err().to_string();
        assert!(e.contains("this is rocm-smi output"), "{e}");
    };

    // -- issue 14 §4: bandwidth reports --
    bw_autodl_2080ti_quick: "bandwidth/autodl-2080ti.bandwidthTest.txt" => |t, f| {
        let b = parse_bandwidth_test(t, f).unwrap();
        assert_eq!(b.devices, vec![(0, "NVIDIA GeForce RTX 2080 Ti".to_string())]);
        assert_eq!(b.best(Direction::HostToDevice).unwrap().gbs, 12.2);
        assert_eq!(b.best(Direction::DeviceToHost).unwrap().gbs, 13.2);
        assert_eq!(b.best(Direction::DeviceToDevice).unwrap().gbs, 518.9);
        assert_eq!(b.passed, Some(true));
    };
    bw_cloud_a100_gen3_speed: "bandwidth/cloud-a100-sxm4-40gb.bandwidthTest.txt" => |t, f| {
        let b = parse_bandwidth_test(t, f).unwrap();
        assert_eq!(b.devices[0].1, "NVIDIA A100-SXM4-40GB");
        assert_eq!(b.best(Direction::HostToDevice).unwrap().gbs, 12.3);
    };
    bw_cloud_t4: "bandwidth/cloud-t4.bandwidthTest.txt" => |t, f| {
        let b = parse_bandwidth_test(t, f).unwrap();
        assert_eq!(b.devices[0].1, "Tesla T4");
        assert_eq!(b.best(Direction::HostToDevice).unwrap().gbs, 9.7);
    };
    bw_cloud_v100: "bandwidth/cloud-v100-sxm2-16gb.bandwidthTest.txt" => |t, f| {
        let b = parse_bandwidth_test(t, f).unwrap();
        assert_eq!(b.best(Direction::DeviceToDevice).unwrap().gbs, 739.8);
    };
    bw_p100_mb_per_s: "bandwidth/gearshifft-p100-numa0.bandwidthTest.txt" => |t, f| {
        // CUDA < 11 prints MB/s
        let b = parse_bandwidth_test(t, f).unwrap();
        assert!((b.best(Direction::HostToDevice).unwrap().gbs - 12.1507).abs() < 1e-9);
        assert!((b.best(Direction::DeviceToDevice).unwrap().gbs - 443.8377).abs() < 1e-9);
        assert_eq!(b.passed, None);
    };
    bw_p100_other_numa_node: "bandwidth/gearshifft-p100-numa1.bandwidthTest.txt" => |t, f| {
        let b = parse_bandwidth_test(t, f).unwrap();
        assert!((b.best(Direction::HostToDevice).unwrap().gbs - 3.7834).abs() < 1e-9);
        assert!(b.best(Direction::DeviceToDevice).is_none());
    };
    bw_range_mode: "bandwidth/helixer-2080ti-range.bandwidthTest.txt" => |t, f| {
        let b = parse_bandwidth_test(t, f).unwrap();
        let h = b.best(Direction::HostToDevice).unwrap();
        assert_eq!((h.size_bytes, h.gbs, h.memory), (100_000_000, 13.1, HostMemory::Pinned));
    };
    p2p_autodl_2080ti_no_peer_access: "bandwidth/autodl-2080ti.p2p.txt" => |t, f| {
        let p = parse_p2p(t, f).unwrap();
        assert_eq!(p.devices.len(), 2);
        assert_eq!(p.access[0][1], Some(false));
        assert_eq!(p.matrices.len(), 4);
        assert_eq!(p.pair_gbs(0, 1), Some((5.72, MatrixKind::UnidirectionalWrites)));
    };
    p2p_h100_sxm_nvlink_bidirectional: "bandwidth/nccl1264-h100-sxm-bidir.p2p.txt" => |t, f| {
        let p = parse_p2p(t, f).unwrap();
        assert_eq!(p.size(), 8);
        let (v, k) = p.pair_gbs(0, 4).unwrap();
        assert_eq!(k, MatrixKind::BidirectionalEnabled);
        // the slower direction of the pair, halved: min(740.60, 748.38) / 2
        assert!((v - 740.60 / 2.0).abs() < 1e-9, "{v}");
    };
    p2p_three_4090_pcie: "bandwidth/tinygrad6-3x4090-bidir.p2p.txt" => |t, f| {
        let p = parse_p2p(t, f).unwrap();
        assert_eq!(p.pair_gbs(0, 1).map(|x| x.0), Some(41.38 / 2.0));
    };
    p2p_six_gpus_enabled_slower_than_disabled: "bandwidth/nccl814-6gpu-uni.p2p.txt" => |t, f| {
        let p = parse_p2p(t, f).unwrap();
        assert_eq!(p.matrices.len(), 3);
        assert_eq!(p.pair_gbs(0, 1), Some((9.90, MatrixKind::UnidirectionalWrites)));
    };
    nccl_autodl_2080ti_all_reduce: "bandwidth/autodl-2080ti.all_reduce.txt" => |t, f| {
        let n = parse_nccl(t, f).unwrap();
        assert_eq!(n.test.as_deref(), Some("all_reduce_perf"));
        assert_eq!(n.ranks.len(), 2);
        assert_eq!(n.rows.len(), 28);
        assert_eq!(n.peak().unwrap().busbw(), 4.00);
        assert_eq!(n.avg_busbw, Some(2.05774));
        assert_eq!(n.hosts(), vec!["autodl-container-xxxxx"]);
    };
    nccl_two_h100_hosts: "bandwidth/a3mega-2x8-h100.all_reduce.txt" => |t, f| {
        let n = parse_nccl(t, f).unwrap();
        assert_eq!(n.ranks.len(), 16);
        assert_eq!(n.hosts().len(), 2);
        let p = n.peak().unwrap();
        assert_eq!((p.size_bytes, p.busbw()), (8_589_934_592, 338.82));
    };
    default_table_autodl_is_named: "bandwidth/autodl-2080ti.table.txt" => |t, f| {
        let e = xml::parse_xml(t, f).unwrap_err().to_string();
        assert!(e.contains("the default `nvidia-smi` table"), "{e}");
    };
    topo_autodl_2080ti_pix: "bandwidth/autodl-2080ti.topo.txt" => |t, f| {
        // a shell prompt before, `topo -p2p p` after the legend: both skipped
        let t = topo::parse_topo(t, f).unwrap();
        assert_eq!(t.pairs(), vec![topo::Pair { a: 0, b: 1, link: Link::Pix }]);
    };
    fabric_gpud_h100_ib400_all_active_ibstat_txt: "fabric/gpud-h100-ib400-all-active.ibstat.txt" => |t, f| {
        let h = parse_ibstat(t, f).unwrap(); assert_eq!(h.len(), 9); assert_eq!(h.iter().flat_map(|x| &x.ports).filter(|p| p.link_layer == LinkLayer::InfiniBand && p.rate_gbps == Some(400.0)).count(), 8);
    };
    fabric_gpud_h100_ib400_frontend_down_ibstat_txt: "fabric/gpud-h100-ib400-frontend-down.ibstat.txt" => |t, f| {
        let h = parse_ibstat(t, f).unwrap(); assert_eq!(h.len(), 12); assert_eq!(h.iter().flat_map(|x| &x.ports).filter(|p| p.state == PortState::Down).count(), 3);
    };
    fabric_gpud_h100_roce400_two_down_ibstat_txt: "fabric/gpud-h100-roce400-two-down.ibstat.txt" => |t, f| {
        let h = parse_ibstat(t, f).unwrap(); assert!(h.iter().flat_map(|x| &x.ports).all(|p| p.link_layer == LinkLayer::Ethernet)); assert_eq!(h.iter().flat_map(|x| &x.ports).filter(|p| p.state == PortState::Down).count(), 2);
    };
    fabric_gpud_h100_roce400_polling_ibstat_txt: "fabric/gpud-h100-roce400-polling.ibstat.txt" => |t, f| {
        let h = parse_ibstat(t, f).unwrap(); assert_eq!(h.iter().flat_map(|x| &x.ports).filter(|p| p.physical_state.as_deref() == Some("Polling")).count(), 1);
    };
    fabric_gpud_a100_ib200_all_active_ibstat_txt: "fabric/gpud-a100-ib200-all-active.ibstat.txt" => |t, f| {
        let h = parse_ibstat(t, f).unwrap(); assert!(h.iter().flat_map(|x| &x.ports).all(|p| p.rate_gbps == Some(200.0)));
    };
    fabric_gpud_a100_ibpanic_ibstat_txt: "fabric/gpud-a100-ibpanic.ibstat.txt" => |t, f| {
        let h = parse_ibstat(t, f).unwrap(); assert!(!h.is_empty()); assert!(!h.iter().any(|x| x.name == "mlx5_8"), "the ibpanic line is not an adapter");
    };
    fabric_l2fwd_nv6_cx6dx_roce100_ibstat_txt: "fabric/l2fwd-nv6-cx6dx-roce100.ibstat.txt" => |t, f| {
        let h = parse_ibstat(t, f).unwrap(); assert_eq!(h.len(), 2); assert_eq!(h[0].ports[0].rate_gbps, Some(100.0));
    };
    fabric_constructed_h100_ib400_mlx5_4_at_200_ibstat_txt: "fabric/constructed/h100-ib400-mlx5_4-at-200.ibstat.txt" => |t, f| {
        let h = parse_ibstat(t, f).unwrap(); let m = h.iter().find(|x| x.name == "mlx5_4").unwrap(); assert_eq!(m.ports[0].rate_gbps, Some(200.0));
    };
    fabric_heioy_mlx4_two_hcas_ibv_devinfo_txt: "fabric/heioy-mlx4-two-hcas.ibv_devinfo.txt" => |t, f| {
        let h = parse_ibv_devinfo(t, f).unwrap(); assert_eq!(h.len(), 2); assert_eq!(h[1].name, "mlx4_0");
    };
    fabric_heioy_mlx4_port2_verbose_ibv_devinfo_txt: "fabric/heioy-mlx4-port2-verbose.ibv_devinfo.txt" => |t, f| {
        let h = parse_ibv_devinfo(t, f).unwrap(); assert_eq!(h[0].ports[0].rate_gbps, Some(10.0));
    };
    fabric_jebtang_mlx4_send_bw_old_perftest_txt: "fabric/jebtang-mlx4-send-bw-old.perftest.txt" => |t, f| {
        let p = parse_perftest(t, f).unwrap(); assert_eq!(p.bandwidth.len(), 11); assert_eq!(p.device, None);
    };
    fabric_perftest273_roce_post_list_perftest_txt: "fabric/perftest273-roce-post-list.perftest.txt" => |t, f| {
        let p = parse_perftest(t, f).unwrap(); assert_eq!(p.title, "RDMA_Write Post List BW Test"); assert_eq!(p.link_layer, LinkLayer::Ethernet);
    };
    fabric_nccltests78_8x8_v100_ib100_alltoall_txt: "fabric/nccltests78-8x8-v100-ib100.alltoall.txt" => |t, f| {
        let n = parse_nccl(t, f).unwrap(); assert_eq!(n.rows.len(), 2); assert_eq!(n.avg_busbw, Some(0.507636));
    };
    fabric_nccl1435_2gpu_all_gather_txt: "fabric/nccl1435-2gpu.all_gather.txt" => |t, f| {
        let n = parse_nccl(t, f).unwrap(); assert_eq!(n.test.as_deref(), Some("all_gather_perf")); assert_eq!(n.rows.len(), 7);
    };
    captures_h100_hbm3_590_version_txt: "captures/h100-hbm3-590.version.txt" => |t, f| {
        let m = vramfit_hw::fleet::version::parse_smi_version(t, f).unwrap(); assert_eq!(m.driver_version.as_deref(), Some("590.48.01")); assert_eq!(m.cuda_version.as_deref(), Some("13.1"));
    };
    fleet_a3mega_2_all_reduce_2nodes_txt: "fleet/a3mega-2/all_reduce-2nodes.txt" => fleet_file;
    fleet_a3mega_2_ztan_mig_235z_topo_txt: "fleet/a3mega-2/ztan-mig-235z/topo.txt" => fleet_file;
    fleet_a3mega_2_ztan_mig_gq73_topo_txt: "fleet/a3mega-2/ztan-mig-gq73/topo.txt" => fleet_file;
    fleet_autodl_4_ok_node_a_all_reduce_txt: "fleet/autodl-4-ok/node-a/all_reduce.txt" => fleet_file;
    fleet_autodl_4_ok_node_a_bandwidthtest_txt: "fleet/autodl-4-ok/node-a/bandwidthTest.txt" => fleet_file;
    fleet_autodl_4_ok_node_a_nvidia_smi_txt: "fleet/autodl-4-ok/node-a/nvidia-smi.txt" => fleet_file;
    fleet_autodl_4_ok_node_a_p2p_txt: "fleet/autodl-4-ok/node-a/p2p.txt" => fleet_file;
    fleet_autodl_4_ok_node_a_topo_txt: "fleet/autodl-4-ok/node-a/topo.txt" => fleet_file;
    fleet_autodl_4_ok_node_b_all_reduce_txt: "fleet/autodl-4-ok/node-b/all_reduce.txt" => fleet_file;
    fleet_autodl_4_ok_node_b_bandwidthtest_txt: "fleet/autodl-4-ok/node-b/bandwidthTest.txt" => fleet_file;
    fleet_autodl_4_ok_node_b_nvidia_smi_txt: "fleet/autodl-4-ok/node-b/nvidia-smi.txt" => fleet_file;
    fleet_autodl_4_ok_node_b_p2p_txt: "fleet/autodl-4-ok/node-b/p2p.txt" => fleet_file;
    fleet_autodl_4_ok_node_b_topo_txt: "fleet/autodl-4-ok/node-b/topo.txt" => fleet_file;
    fleet_autodl_4_ok_node_c_all_reduce_txt: "fleet/autodl-4-ok/node-c/all_reduce.txt" => fleet_file;
    fleet_autodl_4_ok_node_c_bandwidthtest_txt: "fleet/autodl-4-ok/node-c/bandwidthTest.txt" => fleet_file;
    fleet_autodl_4_ok_node_c_nvidia_smi_txt: "fleet/autodl-4-ok/node-c/nvidia-smi.txt" => fleet_file;
    fleet_autodl_4_ok_node_c_p2p_txt: "fleet/autodl-4-ok/node-c/p2p.txt" => fleet_file;
    fleet_autodl_4_ok_node_c_topo_txt: "fleet/autodl-4-ok/node-c/topo.txt" => fleet_file;
    fleet_autodl_4_ok_node_d_all_reduce_txt: "fleet/autodl-4-ok/node-d/all_reduce.txt" => fleet_file;
    fleet_autodl_4_ok_node_d_bandwidthtest_txt: "fleet/autodl-4-ok/node-d/bandwidthTest.txt" => fleet_file;
    fleet_autodl_4_ok_node_d_nvidia_smi_txt: "fleet/autodl-4-ok/node-d/nvidia-smi.txt" => fleet_file;
    fleet_autodl_4_ok_node_d_p2p_txt: "fleet/autodl-4-ok/node-d/p2p.txt" => fleet_file;
    fleet_autodl_4_ok_node_d_topo_txt: "fleet/autodl-4-ok/node-d/topo.txt" => fleet_file;
    fleet_autodl_4_node_a_all_reduce_txt: "fleet/autodl-4/node-a/all_reduce.txt" => fleet_file;
    fleet_autodl_4_node_a_bandwidthtest_txt: "fleet/autodl-4/node-a/bandwidthTest.txt" => fleet_file;
    fleet_autodl_4_node_a_nvidia_smi_txt: "fleet/autodl-4/node-a/nvidia-smi.txt" => fleet_file;
    fleet_autodl_4_node_a_p2p_txt: "fleet/autodl-4/node-a/p2p.txt" => fleet_file;
    fleet_autodl_4_node_a_topo_txt: "fleet/autodl-4/node-a/topo.txt" => fleet_file;
    fleet_autodl_4_node_b_all_reduce_txt: "fleet/autodl-4/node-b/all_reduce.txt" => fleet_file;
    fleet_autodl_4_node_b_bandwidthtest_txt: "fleet/autodl-4/node-b/bandwidthTest.txt" => fleet_file;
    fleet_autodl_4_node_b_nvidia_smi_txt: "fleet/autodl-4/node-b/nvidia-smi.txt" => fleet_file;
    fleet_autodl_4_node_b_p2p_txt: "fleet/autodl-4/node-b/p2p.txt" => fleet_file;
    fleet_autodl_4_node_b_topo_txt: "fleet/autodl-4/node-b/topo.txt" => fleet_file;
    fleet_autodl_4_node_c_all_reduce_txt: "fleet/autodl-4/node-c/all_reduce.txt" => fleet_file;
    fleet_autodl_4_node_c_bandwidthtest_txt: "fleet/autodl-4/node-c/bandwidthTest.txt" => fleet_file;
    fleet_autodl_4_node_c_nvidia_smi_txt: "fleet/autodl-4/node-c/nvidia-smi.txt" => fleet_file;
    fleet_autodl_4_node_c_p2p_txt: "fleet/autodl-4/node-c/p2p.txt" => fleet_file;
    fleet_autodl_4_node_c_topo_txt: "fleet/autodl-4/node-c/topo.txt" => fleet_file;
    fleet_autodl_4_node_d_all_reduce_txt: "fleet/autodl-4/node-d/all_reduce.txt" => fleet_file;
    fleet_autodl_4_node_d_bandwidthtest_txt: "fleet/autodl-4/node-d/bandwidthTest.txt" => fleet_file;
    fleet_autodl_4_node_d_nvidia_smi_txt: "fleet/autodl-4/node-d/nvidia-smi.txt" => fleet_file;
    fleet_autodl_4_node_d_p2p_txt: "fleet/autodl-4/node-d/p2p.txt" => fleet_file;
    fleet_autodl_4_node_d_topo_txt: "fleet/autodl-4/node-d/topo.txt" => fleet_file;
    fleet_ib_2_ib_a_ibstat_txt: "fleet/ib-2/ib-a/ibstat.txt" => fleet_file;
    fleet_ib_2_ib_a_topo_txt: "fleet/ib-2/ib-a/topo.txt" => fleet_file;
    fleet_ib_2_ib_b_ibstat_txt: "fleet/ib-2/ib-b/ibstat.txt" => fleet_file;
    fleet_ib_2_ib_b_topo_txt: "fleet/ib-2/ib-b/topo.txt" => fleet_file;
    fleet_stelline_1_coyote2_bandwidthtest_txt: "fleet/stelline-1/coyote2/bandwidthTest.txt" => fleet_file;
    fleet_stelline_1_coyote2_nvidia_smi_txt: "fleet/stelline-1/coyote2/nvidia-smi.txt" => fleet_file;
    fleet_stelline_1_coyote2_p2pbandwidthlatencytest_txt: "fleet/stelline-1/coyote2/p2pBandwidthLatencyTest.txt" => fleet_file;
    fleet_stelline_1_coyote2_topo_txt: "fleet/stelline-1/coyote2/topo.txt" => fleet_file;
}

#[test]
fn lgip_overrides_the_catalogue_table() {
    let rows = mig::parse_lgip(&read("constructed/a100-40gb.lgip.txt"), "lgip.txt").unwrap();
    let pp = mig::parse_lgipp(&read("constructed/a100-40gb.lgipp.txt"), "lgipp.txt").unwrap();
    let base = vramfit_mig::MigGpu {
        id: "a100-40gb".into(),
        name: "A100".into(),
        memory_slices: 8,
        compute_slices: 7,
        whole_card_bytes: 40960 * MIB,
        full_card_sms: Some(108),
        profiles: vec![],
        source: "none".into(),
    };
    let g = mig::apply_profiles(&base, &rows, "lgip.txt", Some((&pp, "lgipp.txt"))).unwrap();
    assert_eq!(g.memory_slices, 8);
    let p = &g.profiles[g.profile_index("3g.20gb").unwrap()];
    assert_eq!(p.starts, vec![0, 4]);
    // 19.50 GiB = 19968 MiB
    assert_eq!(p.memory_bytes, 19968 * MIB);
    assert!(g.profiles[1].special);
    // without -lgipp and without a base profile of that name: an error naming the profile
    let e = mig::apply_profiles(&base, &rows, "lgip.txt", None).unwrap_err();
    assert!(e.to_string().contains("1g.5gb") && e.to_string().contains("--lgipp"), "{e}");
}

fn err(r: Result<impl std::fmt::Debug, HwError>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn malformed_inputs_give_clear_errors() {
    let x = read("nvidia_smi/01.xml");
    let cut = &x[..x.len() / 2];
    let e = err(xml::parse_xml(cut, "cut.xml"));
    assert!(e.starts_with("cut.xml: not `nvidia-smi -q -x` XML"), "{e}");
    let e = err(xml::parse_xml("hello", "h.xml"));
    assert!(e.contains("no <nvidia_smi_log> root"), "{e}");
    let e = err(xml::parse_xml("<nvidia_smi_log><attached_gpus>1</attached_gpus></nvidia_smi_log>", "e.xml"));
    assert!(e.contains("no <gpu> element"), "{e}");
    let e = err(xml::parse_xml(
        "<nvidia_smi_log><attached_gpus>one</attached_gpus><gpu><product_name>X</product_name></gpu></nvidia_smi_log>",
        "a.xml",
    ));
    assert!(e.contains("<attached_gpus>") && e.contains("expected a count"), "{e}");

    let t = read("nvidia_smi/15.txt").replace("PHB", "FOO");
    let e = err(topo::parse_topo(&t, "t.txt"));
    assert!(e.starts_with("t.txt: line 2: expected X, NV#, PIX"), "{e}");
    let e = err(topo::parse_topo(&read("nvidia_smi/11.txt"), "l.txt"));
    assert!(e.contains("this is `nvidia-smi -L` output (give it with --list), not what --topo reads"), "{e}");
    let e = err(topo::parse_topo("nothing here\n", "n.txt"));
    assert!(e.contains("no header row starting with GPU0"), "{e}");
    let t: String = read("nvidia_smi/12.txt").lines().filter(|l| !l.starts_with("GPU3")).collect::<Vec<_>>().join("\n");
    assert!(err(topo::parse_topo(&t, "t.txt")).contains("no row for GPU3"));

    // topo_asymmetric_matrix_is_an_error: GPU0→GPU1 NV4 but GPU1→GPU0 SYS
    let e = err(topo::parse_topo("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1\tSYS\t X \n", "asym.txt"));
    assert!(e.starts_with("asym.txt: asymmetric matrix: GPU0→GPU1 is NV4 but GPU1→GPU0 is SYS"), "{e}");
    let t = read("nvidia_smi/12.txt");
    let row7 = t.lines().find(|l| l.starts_with("GPU7")).unwrap();
    let broken = t.replacen(row7, &row7.replacen("NV18", "PIX", 1), 1);
    let e = err(topo::parse_topo(&broken, "t.txt"));
    assert!(e.contains("GPU0→GPU7 is NV18 but GPU7→GPU0 is PIX"), "{e}");

    let e = err(mig::parse_lgip("|   0  MIG 1g.5gb  19  7/7  lots  No  14  0  0 |", "p.txt"));
    assert!(e.contains("p.txt: line 1: expected memory GiB (a number)"), "{e}");
    assert!(err(mig::parse_lgip("nothing here", "p.txt")).contains("no profile rows"));
    let e = err(mig::parse_lgipp("GPU  0 Profile ID 19 Placements: 0,1,2:1", "pp.txt"));
    assert!(e.contains("a start set in braces"), "{e}");
    assert!(err(mig::parse_lgi("garbage", "gi.txt")).contains("no `GPU instances:` table"));
    assert_eq!(mig::parse_lgi("No GPU instances found: Not Found", "gi.txt").unwrap(), vec![]);

    assert!(err(list::parse_list("hello\n", "L.txt")).contains("no `GPU <n>: <name>` line"));
    assert!(err(list::parse_list("  MIG 1g.5gb Device 0: (UUID: x)\n", "L.txt")).contains("a GPU line before MIG"));
    assert!(err(text::parse_text("GPU 0\n    Product Name : X\n", "q.txt")).contains("NVSMI LOG"));
    let q = read("constructed/a100-40gb-mig.q.txt").replace("    Product Name", "\tProduct Name");
    assert!(err(text::parse_text(&q, "q.txt")).contains("space indentation"));

    let big = "x".repeat(2 << 20);
    assert!(matches!(mig::parse_lgip(&big, "big"), Err(HwError::TooLarge { .. })));
    let e = err(vramfit_hw::files::read_text(&path("nope.xml"), 10));
    assert!(e.contains("nope.xml: cannot read"), "{e}");
    let e = err(vramfit_hw::files::read_text(&path("nvidia_smi/03.xml"), 1000));
    assert!(e.contains("larger than the 1000-byte limit for nvidia-smi output"), "{e}");
}

#[test]
fn nvml_without_a_driver_says_absent() {
    use vramfit_hw::GpuProbe;
    // On a machine with a driver this test is not meaningful; CI has none.
    if std::path::Path::new("/dev/nvidiactl").exists() {
        return;
    }
    let e = vramfit_hw::NvmlProbe.probe().unwrap_err();
    assert!(matches!(e, HwError::NvmlAbsent { .. }), "{e:?}");
    assert!(e.to_string().contains("--xml"), "{e}");
}

/// nvidia-smi outputs held in memory (the web page's uploads) give the
/// machine that the same files give.
#[test]
fn texts_in_memory_probe_as_files_do() {
    use vramfit_hw::{FilesProbe, GpuProbe, NamedText, TextsProbe};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let xml = dir.join("nvidia_smi/01.xml");
    let q = dir.join("captures/h100-hbm3-590.q.txt");
    let topo = dir.join("captures/h100-hbm3-590.topo.txt");
    let list = dir.join("captures/h100-hbm3-590.L.txt");
    let named = |p: &std::path::Path| {
        Some(NamedText { name: p.display().to_string(), text: std::fs::read_to_string(p).unwrap() })
    };
    for (files, texts) in [
        (
            FilesProbe { xml: Some(xml.clone()), ..FilesProbe::default() },
            TextsProbe { xml: named(&xml), ..TextsProbe::default() },
        ),
        (
            FilesProbe {
                text: Some(q.clone()),
                topo: Some(topo.clone()),
                list: Some(list.clone()),
                ..FilesProbe::default()
            },
            TextsProbe { text: named(&q), topo: named(&topo), list: named(&list), ..TextsProbe::default() },
        ),
    ] {
        let a = files.probe().unwrap();
        let b = texts.probe().unwrap();
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert!(!a.gpus.is_empty());
    }
    // a parse error names the upload as it names a file
    let bad = TextsProbe {
        xml: Some(NamedText { name: "upload.xml".into(), text: "<nvidia_smi_log>".into() }),
        ..TextsProbe::default()
    };
    assert!(bad.probe().unwrap_err().to_string().contains("upload.xml"));
}
