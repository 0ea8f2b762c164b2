//! Snapshot fixture (synthetic but structurally faithful, built by
//! tests/fixtures/snapshot/make_snapshot.py with the stdlib pickle, frames
//! shared as PyTorch shares them) and a hostile pickle.

use serde::Deserialize;
use vramfit_diagnose::classify::OomClass;
use vramfit_diagnose::pickle::PickleError;
use vramfit_diagnose::snapshot::{self, SnapshotError};

const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/tests/fixtures/snapshot/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

#[test]
fn shared_frames_are_kept_shared() {
    for name in ["snapshot_shared.pickle", "snapshot_shared_p2.pickle"] {
        let s = snapshot::load(&fixture(name)).unwrap();
        // 5 unique frame dicts, 4 unique lists (3 tracebacks + the shared empty list)
        assert_eq!(s.frames.len(), 5, "{name}");
        assert_eq!(s.stacks.len(), 4, "{name}");
        // 6 blocks + 13 trace entries reference a frame list: 19 references, 4 first sightings
        assert_eq!(s.shared_stack_refs, 19 - 4, "{name}");
        // f_train is in 3 lists: 2 of its references are re-uses (each list read once)
        assert_eq!(s.shared_frame_refs, 2, "{name}");
        assert_eq!(s.segments.len(), 2);
        assert_eq!(s.traces[0].len(), 13);
    }
}

#[test]
fn analysis_of_the_fixture() {
    let r = snapshot::load(&fixture("snapshot_shared.pickle")).unwrap().analyze();
    let d = &r.devices[0];
    // reserved 20 MiB + 2 MiB; allocated 8 + 6 MiB + 512 KiB
    assert_eq!(d.reserved, 22 * MIB);
    assert_eq!(d.allocated, 14 * MIB + 512 * KIB);
    assert_eq!(d.cached_free, 4 * MIB + 2 * MIB + 1536 * KIB);
    assert_eq!(d.largest_free_block, 4 * MIB);
    assert_eq!(d.requested, 14 * MIB + 512 * KIB - 1000);
    // peak after the third alloc: 8 + 4 + 6 = 18 MiB, reserved 20 MiB then
    let peak = d.peak.as_ref().unwrap();
    assert_eq!((peak.index, peak.allocated, peak.reserved), (Some(3), 18 * MIB, 20 * MIB));
    let sizes: Vec<u64> = d.peak_top.iter().map(|l| l.size).collect();
    assert_eq!(sizes, vec![8 * MIB, 6 * MIB, 4 * MIB]);
    assert_eq!(d.peak_top[0].group, "forward of train");
    assert_eq!(d.peak_top[0].frames[0], "/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py:125:forward");
    assert_eq!(d.peak_top[1].group, "optimizer step");
    let groups: Vec<(&str, u64)> = d.groups.iter().map(|g| (g.label.as_str(), g.bytes)).collect();
    assert_eq!(groups, vec![("forward of train", 12 * MIB), ("optimizer step", 6 * MIB)]);
    // the OOM: 32 MiB asked, 8 MiB free, 22 − 14.5 = 7.5 MiB cached → 16.5 MiB short
    let o = &d.ooms[0];
    assert_eq!(
        (o.requested, o.device_free, o.allocated_then, o.reserved_then),
        (32 * MIB, Some(8 * MIB), 14 * MIB + 512 * KIB, 22 * MIB)
    );
    assert_eq!(o.class, OomClass::GenuineShortage);
    assert!(o.reasoning.contains("16.50 MiB short"), "{}", o.reasoning);
    // timeline: baseline + 13 entries, final point equals the segments' state
    assert_eq!(d.timeline.len(), 14);
    assert_eq!(d.timeline.last().unwrap().allocated, d.allocated);
    assert_eq!(d.timeline[0].allocated, 0);
    assert!(d.notes.is_empty(), "{:?}", d.notes);
    // the timeline's bands: sites by the most they held, stacked by how long
    let sites: Vec<(&str, u64, u64)> = d.sites.iter().map(|s| (s.label.as_str(), s.max_bytes, s.peak_bytes)).collect();
    assert_eq!(
        sites,
        vec![
            ("train.py:40 forward", 12 * MIB, 12 * MIB),
            ("train.py:88 train_step", 8 * MIB, 6 * MIB),
            ("no frames recorded", 512 * KIB, 0)
        ]
    );
    for p in &d.timeline {
        assert_eq!(p.by_site.iter().sum::<u64>(), p.allocated, "{p:?}");
    }
    let seg = &d.most_fragmented[0];
    assert_eq!((seg.total, seg.allocated, seg.free, seg.largest_free_block), (20 * MIB, 14 * MIB, 6 * MIB, 4 * MIB));
}

#[test]
fn svg_has_peak_and_oom() {
    let r = snapshot::load(&fixture("snapshot_shared.pickle")).unwrap().analyze();
    let svg = vramfit_diagnose::svg::timeline(&r, "t");
    assert!(svg.starts_with("<svg"));
    assert!(svg.contains("peak 18.00 MiB"));
    assert!(svg.contains("OOM: 32.00 MiB requested (genuine-shortage)"));
    assert_eq!(svg.matches("<polyline").count(), 2);
}

#[test]
fn hostile_pickle_runs_nothing() {
    let marker = std::path::Path::new("/tmp/vramfit_pickle_pwned_marker");
    let _ = std::fs::remove_file(marker);
    let err = snapshot::load(&fixture("hostile_reduce.pickle")).unwrap_err();
    match err {
        SnapshotError::Pickle(PickleError::Forbidden { name, .. }) => {
            assert!(name == "STACK_GLOBAL" || name == "GLOBAL", "{name}")
        }
        e => panic!("expected a refusal, got {e}"),
    }
    assert!(!marker.exists(), "the hostile pickle ran a command");
}

// ---- differential test against the `pickled` crate (typed serde view)

#[derive(Deserialize)]
struct PFrame {
    filename: String,
    line: i64,
    name: String,
}
#[derive(Deserialize)]
struct PBlock {
    size: u64,
    state: String,
    frames: Vec<PFrame>,
}
#[derive(Deserialize)]
struct PSeg {
    total_size: u64,
    blocks: Vec<PBlock>,
}
#[derive(Deserialize)]
struct PTrace {
    action: String,
    size: u64,
    addr: Option<u64>,
    frames: Vec<PFrame>,
}
#[derive(Deserialize)]
struct PSnap {
    segments: Vec<PSeg>,
    device_traces: Vec<Vec<PTrace>>,
}

#[test]
fn same_data_as_pickled() {
    for name in ["snapshot_shared.pickle", "snapshot_shared_p2.pickle"] {
        let bytes = fixture(name);
        let theirs: PSnap = pickled::from_slice(&bytes, pickled::DeOptions::new()).unwrap();
        let ours = snapshot::load(&bytes).unwrap();
        let frames = |st: Option<u32>| -> Vec<(String, i64, String)> {
            st.map(|i| {
                ours.stacks[i as usize]
                    .iter()
                    .map(|&f| f as usize)
                    .map(|f| (ours.frames[f].filename.clone(), ours.frames[f].line, ours.frames[f].name.clone()))
                    .collect()
            })
            .unwrap_or_default()
        };
        let pf = |v: &[PFrame]| -> Vec<(String, i64, String)> {
            v.iter().map(|f| (f.filename.clone(), f.line, f.name.clone())).collect()
        };
        assert_eq!(theirs.segments.len(), ours.segments.len());
        for (t, o) in theirs.segments.iter().zip(&ours.segments) {
            assert_eq!(t.total_size, o.total_size);
            for (tb, ob) in t.blocks.iter().zip(&o.blocks) {
                assert_eq!(tb.size, ob.size);
                assert_eq!(tb.state, serde_json::to_value(ob.state).unwrap().as_str().unwrap());
                assert_eq!(pf(&tb.frames), frames(ob.stack));
            }
        }
        for (tt, ot) in theirs.device_traces[0].iter().zip(ours.traces[0].iter()) {
            assert_eq!(tt.action, ours.action_name(&ot.action));
            assert_eq!((tt.size, tt.addr), (ot.size, ot.addr));
            assert_eq!(pf(&tt.frames), frames(ot.stack));
        }
    }
}

#[test]
fn truncated_snapshot_is_an_error_not_a_panic() {
    let bytes = fixture("snapshot_shared.pickle");
    for cut in (0..bytes.len()).step_by(7) {
        let _ = snapshot::load(&bytes[..cut]);
    }
    assert!(matches!(snapshot::load(&bytes[..bytes.len() / 2]), Err(SnapshotError::Pickle(_))));
}

#[test]
fn legacy_history_layout() {
    let r = snapshot::load(&fixture("legacy_history.pickle")).unwrap().analyze();
    let d = &r.devices[0];
    assert_eq!(d.device, 1);
    assert_eq!((d.reserved, d.allocated, d.requested), (20 * MIB, 12 * MIB, 12 * MIB - 4096));
    assert!(d.peak.is_none());
    assert_eq!(d.peak_top[0].group, "forward of train");
    // blocks without addresses get them from the segment start
    assert_eq!(d.most_fragmented[0].largest_free_block, 8 * MIB);
}

#[test]
fn segment_list_only() {
    let r = snapshot::load(&fixture("segments_only.pickle")).unwrap().analyze();
    assert_eq!(r.devices[0].reserved, 22 * MIB);
    assert_eq!(r.devices[0].trace_entries, 0);
}

/// Issue 25 §3: a `segments` list that contains itself, after a real 1 GiB
/// segment, exited 0 with an empty report (the segment dropped unsaid); a
/// snapshot dict whose `segments` is the dict itself said only "no segments
/// key". Both are refused as reference cycles, naming the field.
#[test]
fn reference_cycles_are_refused_naming_the_field() {
    let err = snapshot::load(&fixture("cycle_segments.pickle")).unwrap_err().to_string();
    assert!(err.contains("the `segments` list contains itself (a reference cycle)"), "{err}");
    assert!(err.contains("would drop the 2 item(s)"), "{err}");
    let err = snapshot::load(&fixture("cycle_root.pickle")).unwrap_err().to_string();
    assert!(err.contains("`segments` is the dict that holds it (a reference cycle)"), "{err}");
    // a bare list that contains itself before any item (protocol 4:
    // EMPTY_LIST MEMOIZE BINGET 0 APPEND STOP, `l = []; l.append(l)`)
    let err = snapshot::load(b"\x80\x04]\x94h\x00a.").unwrap_err().to_string();
    assert!(err.contains("a list contains itself"), "{err}");
    // the acyclic file of the same shape still reads
    let ok = snapshot::load(&fixture("segments_only.pickle")).unwrap();
    assert_eq!(ok.segments.len(), 2);
}

#[test]
fn hostile_sizes_stay_cheap() {
    use vramfit_diagnose::pickle::parse;
    // LONG_BINPUT at index 4e9: a map entry, not a 4e9-slot vector
    let p = parse(b"\x80\x04]r\x00\x28\x6b\xee.").unwrap();
    assert!(p.items(&p.root).unwrap().is_empty());
    // a dict of 200,000 distinct keys in one SETITEMS
    let mut b = b"\x80\x04}(".to_vec();
    for i in 0..200_000u32 {
        b.push(b'J');
        b.extend_from_slice(&i.to_le_bytes());
        b.push(b'N');
    }
    b.extend_from_slice(b"u.");
    let p = parse(&b).unwrap();
    assert_eq!(p.entries(&p.root).unwrap().len(), 200_000);
    // a protocol-0 pickle is refused as unsupported, not misread
    assert!(matches!(parse(b"(lp0\n."), Err(PickleError::Unsupported { .. })));
}

mod common;

#[test]
fn protocols_2_to_5_decode_alike() {
    // the same generated snapshot (~2 MB, 60 code paths, shared frames) in
    // each protocol: 2/3 memoize with BINPUT/LONG_BINPUT, 4/5 with MEMOIZE
    let decoded: Vec<snapshot::Snapshot> =
        (2..=5).map(|p| snapshot::load(&common::snapshot_in(2 << 20, p).0).unwrap()).collect();
    for (p, s) in (2..=5).zip(&decoded) {
        assert_eq!(s, &decoded[0], "protocol {p}");
    }
    let s = &decoded[0];
    assert_eq!(s.stacks.len(), 60);
    assert!(s.traces[0].len() > 30_000);
    assert!(s.shared_stack_refs > 0 && s.shared_frame_refs > 0);
    // the report is the same too (it is what users see)
    let r = s.analyze();
    assert_eq!(snapshot::load(&common::snapshot_in(2 << 20, 2).0).unwrap().analyze(), r);
}

#[test]
fn labels_skip_the_recorder_and_prefer_user_code() {
    use vramfit_diagnose::snapshot::{frame_kind, group_label, site_label, Frame, FrameKind};
    let f = |file: &str, line: i64, name: &str| Frame { filename: file.into(), line, name: name.into() };
    let sp = "/opt/conda/lib/python3.11/site-packages";
    let recorder = [
        f("??", 0, "torch::unwind::unwind()"),
        f(
            "/pytorch/torch/csrc/profiler/combined_traceback.cpp",
            0,
            "torch::CapturedTraceback::gather(bool, bool, bool)",
        ),
        f("/pytorch/torch/csrc/cuda/memory_snapshot.cpp", 0, "torch::cuda::gather_with_cpp()"),
        f(
            "/pytorch/c10/cuda/CUDACachingAllocator.cpp",
            0,
            "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc",
        ),
        f("/usr/src/python/Python/ceval.c", 0, "_PyEval_EvalFrameDefault"),
    ];
    for r in &recorder {
        assert!(matches!(frame_kind(r), FrameKind::Recorder | FrameKind::Plumbing), "{r:?}");
    }
    let native = f("/pytorch/aten/src/ATen/native/Linear.cpp", 120, "at::native::addmm_out");
    let torch = f(&format!("{sp}/torch/nn/modules/linear.py"), 125, "forward");
    let hf = f(&format!("{sp}/transformers/models/llama/modeling_llama.py"), 260, "forward");
    let user = f("/home/me/proj/model.py", 55, "forward");
    let main = f("/home/me/proj/train.py", 140, "main");
    let record_fn = f(&format!("{sp}/torch/cuda/memory.py"), 1030, "_record_memory_history");
    // innermost first, as PyTorch lists them
    let full: Vec<&Frame> = recorder.iter().chain([&native, &torch, &hf, &user, &main]).collect();
    assert_eq!(site_label(&full), "model.py:55 forward");
    assert_eq!(group_label(&full), "forward of model");
    // no user frame: the library module that allocated, torch last
    let lib: Vec<&Frame> = recorder.iter().chain([&native, &torch, &hf]).collect();
    assert_eq!(site_label(&lib), "modeling_llama.py:260 forward");
    assert_eq!(group_label(&lib), "forward of modeling_llama");
    let torch_only: Vec<&Frame> = recorder.iter().chain([&native, &torch]).collect();
    assert_eq!(site_label(&torch_only), "linear.py:125 forward");
    // C++ only (stacks='cpp'): the kernel, never the allocator
    let cpp: Vec<&Frame> = recorder.iter().chain([&native]).collect();
    assert_eq!(site_label(&cpp), "at::native::addmm_out");
    // the recorder's own Python entry point is not a site
    assert_eq!(site_label(&[&record_fn, &main]), "train.py:140 main");
    assert_eq!(site_label(&recorder.iter().collect::<Vec<_>>()), "no frames recorded");
}
