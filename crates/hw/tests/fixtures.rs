//! One test per fixture (tests/fixtures/SOURCES.md): parse, check the facts
//! the check relies on, snapshot the parsed result. Then malformed inputs.

use std::path::PathBuf;
use vramfit_hw::machine::MigMode;
use vramfit_hw::topo::Link;
use vramfit_hw::{list, mig, text, topo, xml, HwError};

fn path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

fn read(rel: &str) -> String {
    vramfit_hw::files::read_text(&path(rel), vramfit_hw::files::MAX_INPUT_BYTES).unwrap()
}

const MIB: u64 = 1 << 20;

#[test]
fn xml_01_a100_40gb_mig_two_3g() {
    let m = xml::parse_xml(&read("nvidia_smi/01.xml"), "01.xml").unwrap();
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
}

#[test]
fn xml_02_a100_80gb_mig_four_1g_and_trimmed_count() {
    let m = xml::parse_xml(&read("nvidia_smi/02.xml"), "02.xml").unwrap();
    assert_eq!(m.attached_gpus, Some(4));
    assert_eq!(m.gpus.len(), 1);
    let g = &m.gpus[0];
    assert_eq!(g.memory_total_bytes, Some(81920 * MIB));
    assert_eq!(g.mig_devices.len(), 4);
    assert!(g.mig_devices.iter().all(|d| d.sm_count == Some(14)));
    assert_eq!(g.ecc.current, Some(true));
    insta::assert_json_snapshot!("xml_02", m);
}

#[test]
fn xml_03_dual_a5000_v13() {
    let m = xml::parse_xml(&read("nvidia_smi/03.xml"), "03.xml").unwrap();
    assert_eq!(m.gpus.len(), 2);
    assert!(m.gpus.iter().all(|g| g.mig_current == MigMode::NotSupported && g.mig_devices.is_empty()));
    assert_eq!(m.gpus[0].memory_total_bytes, Some(24564 * MIB));
    assert_eq!(m.gpus[1].bus_id.as_deref(), Some("00000000:C1:00.0"));
    assert_eq!(m.gpus[0].ecc.current, Some(false));
    insta::assert_json_snapshot!("xml_03", m);
}

#[test]
fn xml_04_tesla_t4() {
    let m = xml::parse_xml(&read("nvidia_smi/04.xml"), "04.xml").unwrap();
    assert_eq!(m.gpus[0].name, "Tesla T4");
    insta::assert_json_snapshot!("xml_04", m);
}

#[test]
fn xml_05_a10g() {
    let m = xml::parse_xml(&read("nvidia_smi/05.xml"), "05.xml").unwrap();
    assert_eq!(m.gpus[0].name, "NVIDIA A10G");
    insta::assert_json_snapshot!("xml_05", m);
}

#[test]
fn xml_06_tesla_p100() {
    let m = xml::parse_xml(&read("nvidia_smi/06.xml"), "06.xml").unwrap();
    assert_eq!(m.gpus[0].name, "Tesla P100-PCIE-16GB");
    insta::assert_json_snapshot!("xml_06", m);
}

#[test]
fn xml_07_rtx_4000_ada_v13() {
    let m = xml::parse_xml(&read("nvidia_smi/07.xml"), "07.xml").unwrap();
    assert_eq!(m.gpus[0].name, "NVIDIA RTX 4000 SFF Ada Generation");
    insta::assert_json_snapshot!("xml_07", m);
}

#[test]
fn list_11_seven_1g_10gb() {
    let m = list::parse_list(&read("nvidia_smi/11.txt"), "11.txt").unwrap();
    assert_eq!(m.gpus.len(), 1);
    assert_eq!(m.gpus[0].name, "NVIDIA A100-SXM4-80GB");
    assert_eq!(m.gpus[0].mig_devices.len(), 7);
    assert!(m.gpus[0].mig_devices.iter().all(|d| d.profile.as_deref() == Some("1g.10gb")));
    insta::assert_json_snapshot!("list_11", m);
}

#[test]
fn topo_12_h100_nv18_everywhere() {
    let t = topo::parse_topo(&read("nvidia_smi/12.txt"), "12.txt").unwrap();
    assert_eq!(t.gpus.len(), 8);
    let p = t.pairs();
    assert_eq!(p.len(), 28);
    assert!(p.iter().all(|p| p.link == Link::Nvlink { links: 18 }));
    assert_eq!(t.numa_affinity[4].as_deref(), Some("1"));
    insta::assert_json_snapshot!("topo_12", t);
}

#[test]
fn topo_13_pcie_only_sys_with_nics() {
    let t = topo::parse_topo(&read("nvidia_smi/13.txt"), "13.txt").unwrap();
    assert_eq!(t.gpus.len(), 8);
    assert_eq!(t.nics, vec!["NIC0", "NIC1"]);
    assert!(t.pairs().iter().all(|p| p.link == Link::Sys));
    insta::assert_json_snapshot!("topo_13", t);
}

#[test]
fn topo_14_pcie_mixed() {
    let t = topo::parse_topo(&read("nvidia_smi/14.txt"), "14.txt").unwrap();
    assert_eq!(t.gpus.len(), 5);
    assert_eq!(t.links[1][2], Link::Phb);
    assert_eq!(t.links[1][3], Link::Node);
    assert_eq!(t.links[0][4], Link::Sys);
    assert!(!t.pairs().iter().any(|p| p.link.is_nvlink()));
    insta::assert_json_snapshot!("topo_14", t);
}

#[test]
fn topo_15_two_5090_phb() {
    let t = topo::parse_topo(&read("nvidia_smi/15.txt"), "15.txt").unwrap();
    assert_eq!(t.pairs(), vec![topo::Pair { a: 0, b: 1, link: Link::Phb }]);
    insta::assert_json_snapshot!("topo_15", t);
}

#[test]
fn constructed_lgip_lgipp_lgi() {
    let rows = mig::parse_lgip(&read("constructed/a100-40gb.lgip.txt"), "lgip").unwrap();
    assert_eq!(rows.len(), 7);
    assert_eq!((rows[4].name.as_str(), rows[4].id, rows[4].total, rows[4].sm), ("3g.20gb", 9, 2, 42));
    assert!((rows[4].memory_gib - 19.50).abs() < 1e-9);
    let pp = mig::parse_lgipp(&read("constructed/a100-40gb.lgipp.txt"), "lgipp").unwrap();
    assert_eq!(pp.len(), 7);
    assert_eq!(pp[5], mig::LgippRow { gpu: 0, id: 5, starts: vec![0], size: 4 });
    let gi = mig::parse_lgi(&read("constructed/a100-40gb.lgi.txt"), "lgi").unwrap();
    assert_eq!(gi.len(), 3);
    assert_eq!((gi[0].start, gi[0].size), (4, 4));
    insta::assert_json_snapshot!("lgip", rows);
    insta::assert_json_snapshot!("lgipp", pp);
    insta::assert_json_snapshot!("lgi", gi);
}

#[test]
fn constructed_q_text_with_mig_device() {
    let m = text::parse_text(&read("constructed/a100-40gb-mig.q.txt"), "q.txt").unwrap();
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
