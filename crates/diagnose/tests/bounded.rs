//! Bounded work on every `diagnose` input (issues 14 and 15): memory is
//! measured in-process with a counting global allocator (peak bytes live
//! on the heap while one test runs; the tests take a lock so they are
//! measured one at a time), never with wall-clock time. Each hostile input
//! is built here, not committed.

// A global allocator is an `unsafe` trait; this one only forwards to the
// system allocator and counts bytes (test binary only).
#![allow(unsafe_code)]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use vramfit_diagnose::input::{read_path, read_stream, Input};
use vramfit_diagnose::lint::{lint, LintError, MAX_FINDINGS};
use vramfit_diagnose::snapshot::{self, SnapshotError};
use vramfit_diagnose::{diagnose, Diagnosis, Kind};

struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, l, new) };
        if !q.is_null() {
            if new >= l.size() {
                let now = LIVE.fetch_add(new - l.size(), Ordering::Relaxed) + new - l.size();
                PEAK.fetch_max(now, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(l.size() - new, Ordering::Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static A: Counting = Counting;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const MIB: usize = 1 << 20;

/// Run `f`; the peak heap bytes above what was live when it started.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    (out, peak)
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("vramfit-bounded-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn lock() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_50_mb_snapshot_streams_within_its_size() {
    let _g = lock();
    let (bytes, entries) = common::snapshot(50 * MIB);
    let path = tmp("big.pickle");
    std::fs::write(&path, &bytes).unwrap();
    let len = bytes.len();
    drop(bytes);
    let ((snap, report), peak) = peak_during(|| {
        let input = read_path(&path).unwrap();
        // streamed: only the first 64 KiB are held to tell what it is
        assert!(input.bytes.len() <= 64 << 10);
        let snap = vramfit_diagnose::input::load_snapshot(&input).unwrap();
        let report = snap.analyze();
        (snap, report)
    });
    assert_eq!(snap.traces[0].len(), entries);
    // 60 code paths: the traceback lists (one per allocation) collapse to them
    assert_eq!(snap.stacks.len(), 60);
    assert!(report.devices[0].peak.is_some());
    // the decoded snapshot and the analysis hold less than the file: trace
    // entries are 80 B where the pickle spends ~95 B, frames are interned;
    // the 1 MiB read buffer and the packed memo (4 B per memoized object)
    // come on top
    assert!(peak < len, "peak heap {} MiB for a {} MiB snapshot", peak / MIB, len / MIB);
    let _ = std::fs::remove_file(&path);
}

/// 20 KB: a segment referenced 400 times through the memo, each with 400
/// references to one block (the file expanded to 3.6 GB).
fn memo_reuse_pickle() -> Vec<u8> {
    let mut p = common::Pickler::new();
    p.dict_begin();
    p.str_shared("segments");
    p.list_begin();
    p.mark();
    // the segment, written once
    let seg = p.dict_begin();
    p.mark();
    p.str_shared("total_size");
    p.int(1 << 20);
    p.str_shared("blocks");
    p.list_begin();
    p.mark();
    let block = p.dict(2, |p, k| {
        if k == 0 {
            p.str_shared("size");
            p.int(1 << 20);
        } else {
            p.str_shared("state");
            p.str_shared("active_allocated");
        }
    });
    for _ in 1..400 {
        p.get(block);
    }
    p.appends();
    p.setitems();
    for _ in 1..400 {
        p.get(seg);
    }
    p.appends();
    p.setitem();
    p.finish()
}

#[test]
fn memo_references_are_not_expanded() {
    let _g = lock();
    let b = memo_reuse_pickle();
    assert!(b.len() < 20_000, "{}", b.len());
    let (r, peak) = peak_during(|| snapshot::load(&b));
    match r {
        Err(SnapshotError::Shared(why)) => {
            assert!(why.contains("segments[1] is the same segment dict again"), "{why}");
        }
        other => panic!("expected a refusal of the shared block, got {other:?}"),
    }
    // nothing was copied: the 1 MiB read buffer and a few tables
    assert!(peak < 4 * MIB, "{peak}");
}

#[test]
fn append_flood_is_bounded_and_does_not_grow_with_the_input() {
    let _g = lock();
    // `[None, None, …]` by single APPENDs, as the 200 MB file (here 2 MB and 8 MB)
    let flood = |n: usize| {
        let mut b = vec![0x80, 4, b']'];
        for _ in 0..n {
            b.extend([b'N', b'a']);
        }
        b.push(b'.');
        b
    };
    let mut peaks = Vec::new();
    for n in [1_000_000, 4_000_000] {
        let b = flood(n);
        let (r, peak) = peak_during(|| snapshot::load(&b));
        // a list of Nones is no segment list
        assert!(matches!(r, Err(SnapshotError::Field { ref path, .. }) if path == "segments[0]"), "{r:?}");
        peaks.push(peak);
    }
    assert!(peaks[1] < 4 * MIB && peaks[1] <= peaks[0] + MIB, "{peaks:?}");
    // the same flood of *trace entries* is held, but within the budget
    // (the file's size plus 64 MiB, at least 320 MiB)
    let mut p = common::Pickler::new();
    p.list_begin();
    for _ in 0..200_000 {
        p.dict(1, |p, _| {
            p.str_shared("action");
            p.str_shared("alloc");
        });
        p.append();
    }
    let b = p.finish();
    let (r, peak) = peak_during(|| snapshot::load(&b));
    assert!(r.is_err());
    assert!(peak < 64 * MIB, "{peak}");
}

#[test]
fn deep_nesting_stops_early() {
    let _g = lock();
    // 30 MB of EMPTY_LIST / MARK: refused at the stack limit, after ~64 KiB
    for op in [b']', b'('] {
        let mut b = vec![0x80, 4];
        b.resize(30 * MIB, op);
        let (r, peak) = peak_during(|| snapshot::load(&b));
        match r {
            Err(SnapshotError::Pickle(vramfit_diagnose::pickle::PickleError::Limit { offset, .. })) => {
                assert!(offset < (1 << 20), "{offset}")
            }
            other => panic!("{other:?}"),
        }
        assert!(peak < 64 * MIB, "{peak}");
    }
    // nested dicts: `{` key `{` key … (each value a new dict)
    let mut b = vec![0x80, 4];
    for _ in 0..2_000_000 {
        b.extend([b'}', 0x8c, 1, b'k']);
    }
    let (r, peak) = peak_during(|| snapshot::load(&b));
    assert!(matches!(r, Err(SnapshotError::Pickle(_))), "{r:?}");
    assert!(peak < 128 * MIB, "{peak}");
}

#[test]
fn many_references_to_one_huge_dict_cost_one_read() {
    let _g = lock();
    // a 500k-key dict referenced 10k times (the 7 MB file), and once
    let build = |refs: usize| {
        let mut p = common::Pickler::new();
        p.list_begin();
        p.mark();
        let d = p.dict(500_000, |p, i| {
            p.str_new(&format!("key{i}"));
            p.none();
        });
        for _ in 1..refs {
            p.get(d);
        }
        p.appends();
        p.finish()
    };
    let mut peaks = Vec::new();
    for refs in [1, 10_000] {
        let b = build(refs);
        assert!(b.len() > 6 * MIB, "{}", b.len());
        let (r, peak) = peak_during(|| snapshot::load(&b));
        assert!(r.is_err());
        // a dict over 256 items is not a record: its items are never kept;
        // its keys are strings, held once each (~2 bytes per byte of file)
        assert!(peak < 3 * b.len(), "{peak}");
        peaks.push(peak);
    }
    // the 10k references cost nothing beyond their stack slots
    assert!(peaks[1] < peaks[0] + MIB, "{peaks:?}");
}

#[test]
fn big_integers_and_strings_are_skipped_not_held() {
    let _g = lock();
    // LONG4 of 32 MB and a 32 MB string as values of an unknown key
    let mut b = vec![0x80, 4, b'}', 0x8c, 1, b'x', 0x8b];
    b.extend((32u32 << 20).to_le_bytes());
    b.resize(b.len() + (32 << 20), 0x7f);
    b.extend([b's', 0x8c, 1, b'y', b'X']);
    b.extend((32u32 << 20).to_le_bytes());
    b.resize(b.len() + (32 << 20), b'a');
    b.extend([b's', b'.']);
    let (r, peak) = peak_during(|| snapshot::load(&b));
    assert!(matches!(r, Err(SnapshotError::NotASnapshot(_))), "{r:?}");
    assert!(peak < 4 * MIB, "{peak}");
}

/// A script with a finding every 4 lines.
fn many_findings(bytes: usize) -> String {
    let block = "for batch in loader:\n    total += loss\n    hist.append(logits)\n    torch.cuda.empty_cache()\n";
    let mut s = String::from("import torch\nhist = []\n");
    while s.len() < bytes {
        s.push_str(block);
    }
    s
}

#[test]
fn lint_is_capped_and_bounded() {
    let _g = lock();
    // 64 MB: refused by size before parsing
    let big = many_findings(64 * MIB);
    let (r, peak) = peak_during(|| lint(&big));
    assert!(matches!(r, Err(LintError::TooLarge(_))), "{r:?}");
    assert!(peak < MIB, "{peak}");
    drop(big);
    // 2 MB with ~190k findings: linted, first MAX_FINDINGS listed, all counted
    let src = many_findings(2 * MIB);
    let (r, peak) = peak_during(|| lint(&src));
    let r = r.unwrap();
    assert_eq!(r.findings.len(), MAX_FINDINGS);
    assert!(r.findings_total > 50_000, "{}", r.findings_total);
    // the lint's own heap: findings hold a few words each until listed
    // (tree-sitter's tree lives in C allocations this allocator does not
    // see: ~70 B per byte of code, measured with the CLI in docs/diagnose.md)
    assert!(peak < 20 * src.len(), "{} MiB for {} MiB", peak / MIB, src.len() / MIB);
}

#[test]
fn line_numbers_are_the_files_when_the_middle_is_skipped() {
    let _g = lock();
    // 80 MB log (over the 64 MiB read-whole limit), the OOM on its last line
    let path = tmp("big.log");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let line = "INFO step 123 loss 2.345 lr 1e-4\n"; // 33 bytes
    let n = 80 * MIB / line.len();
    for _ in 0..n {
        f.write_all(line.as_bytes()).unwrap();
    }
    let oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 23.65 GiB of which 11.06 MiB is free. Including non-PyTorch memory, this process has 23.60 GiB memory in use. Of the allocated memory 22.90 GiB is allocated by PyTorch, and 194.87 MiB is reserved by PyTorch but unallocated.\n";
    f.write_all(oom.as_bytes()).unwrap();
    drop(f);
    let (input, peak) = peak_during(|| read_path(&path).unwrap());
    assert!(input.skipped > 0);
    // the middle is counted in 1 MiB chunks, never held
    assert!(peak < 34 * MIB + 2 * MIB, "{peak}");
    // the lines that end in the skipped middle, counted here independently
    let all = std::fs::read(&path).unwrap();
    let middle = &all[16 * MIB..all.len() - 16 * MIB];
    assert_eq!(input.skipped_lines as usize, middle.iter().filter(|&&c| c == b'\n').count());
    drop(all);
    let Diagnosis::Oom { ooms } = diagnose(&input, None).unwrap() else { panic!() };
    assert_eq!(ooms[0].event.line, n + 1);
    let _ = std::fs::remove_file(&path);
}

#[cfg(unix)]
#[test]
fn special_files_are_refused_and_stdin_is_capped() {
    let _g = lock();
    for dev in ["/dev/zero", "/dev/urandom"] {
        let e = read_path(std::path::Path::new(dev)).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
    let fifo = tmp("snapshot.pickle");
    let _ = std::fs::remove_file(&fifo);
    if std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success()) {
        // nothing writes to it: opening it for reading would block forever
        let e = read_path(&fifo).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
    }
    // an endless stdin: the first 64 MiB are read, the rest is never asked for
    let (input, peak) = peak_during(|| read_stream("<stdin>", &mut std::io::repeat(b'x')).unwrap());
    assert!(input.truncated);
    assert_eq!(input.bytes.len(), 64 << 20);
    assert!(peak < 160 * MIB, "{peak}");
    // an endless pickle on stdin: refused at its byte budget
    let mut endless = std::io::Read::chain(&[0x80u8, 4][..], std::io::repeat(b'N'));
    let e = read_stream("<stdin>", &mut endless).unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");
    let _ = Input::default();
    let _ = Kind::Snapshot;
}
