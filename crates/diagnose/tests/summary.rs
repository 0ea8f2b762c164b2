//! torch.cuda.memory_summary() outputs from public repositories
//! (tests/fixtures/memory_summary/index.json names each source).

use vramfit_diagnose::classify::OomClass;
use vramfit_diagnose::summary::{parse, Pool};

fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{}/tests/fixtures/memory_summary/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

#[test]
fn summary_01_after_an_oom() {
    let s = parse(&fixture("01.txt")).unwrap();
    assert_eq!((s.device, s.cuda_ooms, s.cudamalloc_retries), (Some(0), Some(1), Some(1)));
    let a = s.row(&["Allocated memory"]).unwrap();
    assert_eq!((a.current.value, a.peak.value, a.total_allocated.value), (682_537 * KIB, 65_430 * MIB, 3115 * GIB));
    let r = s.row(&["GPU reserved memory"]).unwrap();
    assert_eq!((r.current.value, r.total_freed.value), (66_984 * MIB, 151_552 * KIB));
    let n = s.row(&["Non-releasable memory"]).unwrap();
    assert_eq!((n.current.value, n.peak.value), (7639 * KIB, 2381 * MIB));
    assert!(s.row(&["Requested memory"]).is_some());
    let allocs = s.row(&["Allocations"]).unwrap();
    assert_eq!((allocs.current.value, allocs.peak.value, allocs.total_allocated.value), (502, 517, 33_598));
    // 11 metrics, 9 with two pool rows = 29 rows
    assert_eq!(s.rows.len(), 29);
    assert_eq!(s.rows.iter().filter(|r| r.pool == Pool::Small).count(), 9);
    let v = s.verdict();
    // peak allocated 65430 MiB of 66984 MiB reserved peak: 97.7% → the tensors, not the cache
    assert_eq!(v.class, Some(OomClass::GenuineShortage));
    assert!(v.findings.iter().any(|f| f.contains("97.7%")), "{:#?}", v.findings);
    assert!(v.findings.iter().any(|f| f.contains("1 cudaMalloc retry")), "{:#?}", v.findings);
}

#[test]
fn summary_02_old_units_no_requested_row() {
    let s = parse(&fixture("02.txt")).unwrap();
    assert_eq!(s.cuda_ooms, Some(0));
    assert!(s.row(&["Requested memory"]).is_none());
    assert_eq!(s.row(&["Allocated memory"]).unwrap().current.value, 512);
    assert_eq!(s.row(&["GPU reserved memory"]).unwrap().current.value, 2048 * KIB);
    assert_eq!(s.row(&["Non-releasable memory"]).unwrap().total_freed.value, 11_264);
    // no OOM and a 2 MiB cache: no verdict class
    let v = s.verdict();
    assert_eq!(v.class, None);
}

#[test]
fn summary_03_sglang() {
    let s = parse(&fixture("03.txt")).unwrap();
    assert_eq!(s.row(&["Allocated memory"]).unwrap().current.value, 184_648 * KIB);
    assert_eq!(s.row(&["GPU reserved memory"]).unwrap().current.value, 235_520 * KIB);
    assert_eq!(s.row(&["Non-releasable memory"]).unwrap().current.value, 30_391 * KIB);
}

#[test]
fn raw_commented_original_is_found_too() {
    // 01.raw.txt is the same table behind "# " comment markers
    let raw = fixture("01.raw.txt");
    let s = parse(&raw).unwrap();
    assert_eq!(s.rows.len(), 29);
}

#[test]
fn issue_35901_cut_table_is_fragmentation() {
    // 12420 MB reserved at peak for a 4877 MB allocated peak: 61% cache overhead
    let s = parse(&fixture("issue_pytorch35901_partial.txt")).unwrap();
    assert_eq!(s.row(&["Allocated memory"]).unwrap().peak.value, 4877 * MIB);
    assert_eq!(s.row(&["GPU reserved memory"]).unwrap().peak.value, 12_420 * MIB);
    // the cut "from large pool" row of reserved memory is not read
    assert_eq!(s.rows.len(), 7);
    assert_eq!(s.verdict().class, Some(OomClass::Fragmentation));
}

#[test]
fn issue_37250_summary_with_an_oom_beside_it() {
    let text = fixture("issue_pytorch37250_with_oom.txt");
    let input = vramfit_diagnose::Input::from_bytes("x", text.into_bytes());
    let vramfit_diagnose::Diagnosis::Summary { summary, verdict, ooms } =
        vramfit_diagnose::diagnose(&input, None).unwrap()
    else {
        panic!("not a summary")
    };
    assert_eq!(summary.cudamalloc_retries, Some(1));
    assert_eq!(summary.rows.len(), 2);
    // no reserved row in the cut table: no class from the summary itself
    assert_eq!(verdict.class, None);
    // the OOM: 10.91 GiB − 100.81 MiB free − 5.75 GiB reserved ≈ 5.06 GiB outside PyTorch
    assert_eq!(ooms.len(), 1);
    assert_eq!(ooms[0].verdict.class, OomClass::OtherProcess);
}
