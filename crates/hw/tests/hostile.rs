//! Issue 15, the machine-check part: hostile or damaged inputs give a clear
//! refusal or an escaped value, never a pass, a raw terminal code, a hang
//! or a silently dropped GPU. One regression test per item.

use std::path::PathBuf;
use vramfit_hw::verdict::{family_of, RefCard};
use vramfit_hw::{files, text, topo, verdict, xml, Expectation, HwError, Level};

fn fixture(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel);
    files::read_text(&p, files::MAX_INPUT_BYTES).unwrap()
}

fn a100_40() -> RefCard {
    RefCard {
        id: "a100-40gb-sxm".into(),
        name: "A100-40GB".into(),
        family: family_of("a100-40gb-sxm"),
        whole_mib: 40960,
        mig_profiles: vec![],
        ..RefCard::default()
    }
}

/// 01.xml (a real A100-SXM4-40GB dump) with its whole-GPU total replaced.
fn xml_with_total(total: &str) -> String {
    let x = fixture("nvidia_smi/01.xml");
    let needle = "<total>40960 MiB</total>";
    assert!(x.contains(needle));
    x.replacen(needle, &format!("<total>{total}</total>"), 1)
}

#[test]
fn unreadable_memory_totals_fail_expect_instead_of_passing_with_a_warning() {
    for total in ["-1 MiB", "NaN MiB", "18446744073709551616 MiB", "17592186044416 MiB"] {
        let m = xml::parse_xml(&xml_with_total(total), "m.xml").unwrap();
        let g = &m.gpus[0];
        assert_eq!(g.memory_total_bytes, None, "{total}");
        assert_eq!(g.memory_total_unreadable.as_deref(), Some(total));
        let e = Expectation { count: Some(1), card: Some(a100_40()), nvlink: false, ..Expectation::default() };
        let v = verdict(&m, &e, &[a100_40()]);
        assert!(!v.ok, "{total}: an unreadable memory total must not pass");
        let f = v.findings.iter().find(|f| f.code == "memory" && f.level == Level::Fail).expect("memory fail");
        assert!(f.message.contains(&format!("\"{total}\" is not a readable size")), "{}", f.message);
    }
    // N/A is "not reported", not damaged: a warning, as before
    let m = xml::parse_xml(&xml_with_total("N/A"), "m.xml").unwrap();
    assert_eq!(m.gpus[0].memory_total_unreadable, None);
}

#[test]
fn escape_sequences_from_an_xml_entity_or_q_text_are_shown_escaped() {
    let x = fixture("nvidia_smi/01.xml")
        .replacen("NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB&#27;[2J&#27;]0;pwned&#7;", 1)
        .replacen("<driver_version>510.47.03", "<driver_version>510.47.03&#27;[31m", 1);
    let m = xml::parse_xml(&x, "e.xml").unwrap();
    let name = &m.gpus[0].name;
    assert_eq!(name, "NVIDIA A100-SXM4-40GB\\x1b[2J\\x1b]0;pwned\\x07");
    assert!(!name.contains('\x1b') && !name.contains('\x07'));
    // a version with garbage after it keeps only the version
    // a version with a terminal code glued to it is not a version
    assert_eq!(m.driver_version, None);

    let q = fixture("constructed/a100-40gb-mig.q.txt").replacen("NVIDIA A100-PCIE-40GB", "NVIDIA A100\x1b[8mhidden", 1);
    let m = text::parse_text(&q, "q.txt").unwrap();
    assert_eq!(m.gpus[0].name, "NVIDIA A100\\x1b[8mhidden");
}

#[test]
fn an_esc_inside_a_topo_label_is_refused_not_a_dropped_gpu() {
    let t = fixture("nvidia_smi/12.txt");
    // in the header
    let bad = t.replacen("GPU3", "GP\x1bU3", 1);
    let e = topo::parse_topo(&bad, "t.txt").unwrap_err().to_string();
    assert!(e.contains("control character \\x1b"), "{e}");
    assert!(!e.contains('\x1b'), "the error itself must not carry the raw ESC: {e:?}");
    // in a row label
    let row = t.lines().find(|l| l.starts_with("GPU5")).unwrap();
    let bad = t.replacen(row, &row.replacen("GPU5", "GPU5\x1b", 1), 1);
    let e = topo::parse_topo(&bad, "t.txt").unwrap_err().to_string();
    assert!(e.contains("line 8") && e.contains("GPU5\\x1b"), "{e}");
}

#[test]
fn a_hundred_thousand_gpu_elements_are_refused_by_count() {
    let gpu = "<gpu><product_name>NVIDIA A100-SXM4-80GB</product_name>\
               <fb_memory_usage><total>81920 MiB</total></fb_memory_usage></gpu>\n";
    let x =
        format!("<nvidia_smi_log><attached_gpus>130000</attached_gpus>\n{}</nvidia_smi_log>\n", gpu.repeat(130_000));
    let e = xml::parse_xml(&x, "big.xml").unwrap_err().to_string();
    assert!(e.contains("130000 <gpu> elements; one machine has at most 256"), "{e}");
    // 256 parse, and merging them twice (files + NVML path) is not quadratic
    let x = format!("<nvidia_smi_log>{}</nvidia_smi_log>", gpu.repeat(256));
    let mut m = vramfit_hw::Machine::default();
    m.merge(xml::parse_xml(&x, "ok.xml").unwrap());
    m.merge(xml::parse_xml(&x, "ok.xml").unwrap());
    assert_eq!(m.gpus.len(), 256);
    assert!(m.gpus.windows(2).all(|w| w[0].index < w[1].index));
}

#[cfg(unix)]
#[test]
fn special_files_are_refused_before_reading() {
    for p in ["/dev/zero", "/dev/null"] {
        let e = files::read_kind(std::path::Path::new(p), "`nvidia-smi -q -x` output", 1 << 20).unwrap_err();
        assert!(matches!(e, HwError::Input(_)), "{e:?}");
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
    let dir = std::env::temp_dir().join(format!("vramfit-hw-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("topo.txt");
    let _ = std::fs::remove_file(&fifo);
    if std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()) {
        let e = files::read_kind(&fifo, "`nvidia-smi topo -m` output", 1 << 20).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
    }
    std::fs::remove_dir_all(&dir).ok();
}
