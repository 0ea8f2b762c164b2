//! Every real OOM message in tests/fixtures/oom (sources in index.json):
//! each figure parsed to the byte, each class as expected.

use serde_json::Value;
use vramfit_diagnose::oom::{OomKind, TorchEra};
use vramfit_diagnose::other_frameworks::OtherOom;
use vramfit_diagnose::{classify, oom};

fn fixtures() -> Vec<(String, String, Value)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/oom");
    let idx: Value = serde_json::from_str(&std::fs::read_to_string(format!("{dir}/index.json")).unwrap()).unwrap();
    let files = idx["files"].as_object().unwrap();
    files
        .iter()
        .map(|(name, v)| {
            assert!(v["source"].as_str().is_some_and(|s| !s.is_empty()), "{name}: no source");
            (name.clone(), std::fs::read_to_string(format!("{dir}/{name}")).unwrap(), v["expect"].clone())
        })
        .collect()
}

fn u(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(|x| x.as_u64())
}

#[test]
fn every_fixture_parses_and_classifies() {
    let all = fixtures();
    assert!(all.len() >= 30, "only {} fixtures", all.len());
    let mut checked = 0;
    for (name, text, expect) in all {
        let events = oom::scan(&text);
        let exp = expect.as_array().unwrap();
        if exp.len() == 1 && exp[0]["framework"] == "none" {
            assert!(events.is_empty(), "{name}: expected nothing, got {events:?}");
            continue;
        }
        assert_eq!(events.len(), exp.len(), "{name}: {events:#?}");
        for (e, x) in events.iter().zip(exp) {
            let verdict = classify(e);
            assert_eq!(verdict.class.key(), x["class"].as_str().unwrap(), "{name}: {:#?}", verdict.reasoning);
            if let Some(o) = u(x, "occurrences") {
                assert_eq!(e.occurrences as u64, o, "{name}: occurrences");
            }
            if let Some(r) = u(x, "rank") {
                assert_eq!(e.rank, Some(r as u32), "{name}: rank");
            }
            match (&e.kind, x["framework"].as_str().unwrap()) {
                (OomKind::Torch(t), "torch") => {
                    assert_eq!(t.device as u64, u(x, "device").unwrap(), "{name}: device");
                    assert_eq!(
                        t.backend,
                        x.get("backend").and_then(|b| b.as_str()).unwrap_or("CUDA"),
                        "{name}: backend"
                    );
                    assert_eq!(t.allowed.as_ref().map(|s| s.bytes), u(x, "allowed"), "{name}: allowed");
                    let era = match t.era {
                        TorchEra::Cached => "cached",
                        TorchEra::Reserved => "reserved",
                        TorchEra::Sentences => "sentences",
                    };
                    assert_eq!(era, x["era"].as_str().unwrap(), "{name}: era");
                    assert_eq!(t.requested.bytes, u(x, "requested").unwrap(), "{name}: requested");
                    assert_eq!(t.total.bytes, u(x, "total").unwrap(), "{name}: total");
                    assert_eq!(t.free.bytes, u(x, "free").unwrap(), "{name}: free");
                    assert_eq!(t.allocated.bytes, u(x, "allocated").unwrap(), "{name}: allocated");
                    assert_eq!(t.reserved.as_ref().map(|s| s.bytes), u(x, "reserved"), "{name}: reserved");
                    assert_eq!(t.unallocated.as_ref().map(|s| s.bytes), u(x, "unallocated"), "{name}: unallocated");
                    assert_eq!(t.this_process.as_ref().map(|s| s.bytes), u(x, "this_process"), "{name}: this");
                    assert_eq!(t.private_pools.as_ref().map(|s| s.bytes), u(x, "private_pools"), "{name}: pools");
                    if let Some(ps) = x.get("processes").and_then(|p| p.as_array()) {
                        let got: Vec<(u64, u64)> = t.processes.iter().map(|p| (p.pid, p.used.bytes)).collect();
                        let want: Vec<(u64, u64)> =
                            ps.iter().map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap())).collect();
                        assert_eq!(got, want, "{name}: processes");
                    }
                    assert_eq!(e.context.deepspeed, x["deepspeed"].as_bool().unwrap(), "{name}: deepspeed");
                    if let Some(a) = x.get("activity").and_then(|a| a.as_str()) {
                        let got = serde_json::to_value(e.context.activity).unwrap();
                        assert_eq!(got.as_str(), Some(a), "{name}: activity");
                    }
                }
                (
                    OomKind::Other(OtherOom::Xla {
                        requested,
                        total_allocation,
                        parameter_allocation,
                        temp_allocation,
                        fragmentation,
                        peak_buffers,
                        ..
                    }),
                    "xla",
                ) => {
                    assert_eq!(requested.bytes, u(x, "requested").unwrap(), "{name}");
                    assert_eq!(total_allocation.as_ref().map(|s| s.bytes), u(x, "total_allocation"), "{name}");
                    if let Some(p) = u(x, "parameter_allocation") {
                        assert_eq!(parameter_allocation.as_ref().map(|s| s.bytes), Some(p), "{name}");
                        assert_eq!(temp_allocation.as_ref().map(|s| s.bytes), u(x, "temp_allocation"), "{name}");
                        assert_eq!(fragmentation.as_ref().map(|s| s.bytes), u(x, "fragmentation"), "{name}");
                    }
                    if let Some(shape) = x.get("peak_top_shape").and_then(|s| s.as_str()) {
                        assert_eq!(peak_buffers[0].shape.as_deref(), Some(shape), "{name}");
                        assert_eq!(peak_buffers[0].size.bytes, u(x, "peak_top_size").unwrap(), "{name}");
                        assert_eq!(peak_buffers[0].operator.as_deref(), x["peak_top_operator"].as_str(), "{name}");
                        assert_eq!(peak_buffers.len(), 2, "{name}");
                    }
                }
                (OomKind::Other(OtherOom::TensorFlow { bytes, gpu, node, .. }), "tensorflow") => {
                    assert_eq!(*bytes, u(x, "bytes"), "{name}");
                    assert_eq!(gpu.map(|g| g as u64), u(x, "gpu"), "{name}");
                    assert_eq!(node.as_deref(), x["node"].as_str(), "{name}");
                }
                (OomKind::Other(OtherOom::VllmNoCacheBlocks { .. }), "vllm_no_cache_blocks") => {}
                (OomKind::Other(OtherOom::Mps { allocated, other, max_allowed, requested, pool }), "mps") => {
                    assert_eq!(allocated.bytes, u(x, "allocated").unwrap(), "{name}");
                    assert_eq!(other.bytes, u(x, "other").unwrap(), "{name}");
                    assert_eq!(max_allowed.bytes, u(x, "max_allowed").unwrap(), "{name}");
                    assert_eq!(requested.bytes, u(x, "requested").unwrap(), "{name}");
                    assert_eq!(pool, x["pool"].as_str().unwrap(), "{name}");
                }
                (
                    OomKind::Other(OtherOom::VllmMaxLenTokens { max_model_len, kv_cache_tokens, profile }),
                    "vllm_max_len_tokens",
                ) => {
                    assert_eq!(*max_model_len, u(x, "max_model_len").unwrap());
                    assert_eq!(*kv_cache_tokens, u(x, "kv_cache_tokens").unwrap());
                    let p = profile.as_ref().unwrap();
                    assert_eq!(p.total_gpu_memory, u(x, "total_gpu_memory"));
                    assert_eq!(p.peak_torch_memory, u(x, "peak_torch_memory"));
                    assert_eq!(p.weights, u(x, "weights"));
                    assert_eq!(p.gpu_memory_utilization, Some(0.90));
                }
                (
                    OomKind::Other(OtherOom::VllmMaxLenMemory {
                        max_model_len,
                        needed,
                        available,
                        estimated_max_len,
                        ..
                    }),
                    "vllm_max_len_memory",
                ) => {
                    assert_eq!(*max_model_len, u(x, "max_model_len").unwrap());
                    assert_eq!(needed.bytes, u(x, "needed").unwrap());
                    assert_eq!(available.bytes, u(x, "available").unwrap());
                    assert_eq!(*estimated_max_len, u(x, "estimated_max_len"));
                }
                (k, f) => panic!("{name}: expected {f}, got {k:?}"),
            }
            checked += 1;
        }
    }
    assert!(checked >= 42, "checked {checked}");
}

#[test]
fn reasoning_carries_the_numbers() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/oom/pt22_cads4_shortage.txt"))
            .unwrap();
    let e = &oom::scan(&text)[0];
    let v = classify(e);
    // 22.78 GiB − (12.73 + 9.35) GiB = 0.70 GiB; in bytes from the parsed values
    let gap = v.gap_bytes.unwrap();
    assert_eq!(gap, 24_459_838_751 - 13_668_733_420 - 10_039_486_054);
    assert!(v.reasoning.iter().any(|r| r.contains("12.73 GiB free + 9.35 GiB cached")), "{:#?}", v.reasoning);
    assert!(v.headline.contains("716.80 MiB"), "{}", v.headline);
}

#[test]
fn container_pid_is_taken_as_self_and_fix_is_expandable_segments() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/oom/pt22_llamafactory7532_deepspeed_pid.txt"
    ))
    .unwrap();
    let v = classify(&oom::scan(&text)[0]);
    assert!(v.reasoning.iter().any(|r| r.contains("PID 105400") && r.contains("container")), "{:#?}", v.reasoning);
    assert_eq!(v.fixes[0].action, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
    // old era gets max_split_size_mb instead
    let old =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/oom/pt110_hint_compvis702.txt"))
            .unwrap();
    let v = classify(&oom::scan(&old)[0]);
    assert!(v.fixes[0].action.contains("max_split_size_mb"), "{:?}", v.fixes);
}

#[test]
fn a_bare_tried_to_allocate_needs_a_size() {
    assert!(oom::scan("Tried to allocate 3 workers for the data loader").is_empty());
    assert_eq!(oom::scan("Tried to allocate 20.00 MiB (GPU 0; 1.96 GiB total capacity; 1.24 GiB already allocated; 2.88 MiB free; 1.25 GiB reserved in total by PyTorch)").len(), 1);
}

/// Messages whose figures cannot all be true (constructed from the real
/// 1.5–2.0, ≤1.4 and ≥2.1 forms above with the figures changed): each is
/// `unexplained`, the contradiction stated in the headline.
#[test]
fn impossible_oom_figures_are_unexplained() {
    let pt15 = |a: &str, f: &str, r: &str| {
        format!("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 10.76 GiB total capacity; {a} already allocated; {f} free; {r} reserved in total by PyTorch)")
    };
    let cases = [
        (pt15("12.50 GiB", "100.00 MiB", "12.60 GiB"), "12.50 GiB allocated > 10.76 GiB total capacity"),
        (pt15("8.00 GiB", "100.00 MiB", "20.80 GiB"), "20.80 GiB reserved > 10.76 GiB total capacity"),
        (pt15("9.00 GiB", "100.00 MiB", "8.00 GiB"), "9.00 GiB allocated > 8.00 GiB reserved"),
        (pt15("6.00 GiB", "5.00 GiB", "7.00 GiB"), "5.00 GiB free + 7.00 GiB reserved by PyTorch > 10.76 GiB total capacity"),
        (
            "RuntimeError: CUDA out of memory. Tried to allocate 8.13 GiB (GPU 0; 10.76 GiB total capacity; 11.57 GiB already allocated; 8.20 MiB free; 32.43 MiB cached)".to_string(),
            "11.57 GiB allocated > 10.76 GiB total capacity",
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.25 GiB is free. Including non-PyTorch memory, this process has 77.89 GiB memory in use. Of the allocated memory 70.12 GiB is allocated by PyTorch, and 16.50 GiB is reserved by PyTorch but unallocated.".to_string(),
            "70.12 GiB allocated + 16.50 GiB reserved but unallocated = 86.62 GiB > 79.15 GiB total capacity",
        ),
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.25 GiB is free. Including non-PyTorch memory, this process has 97.89 GiB memory in use. Of the allocated memory 60.12 GiB is allocated by PyTorch, and 6.50 GiB is reserved by PyTorch but unallocated.".to_string(),
            "this process has 97.89 GiB > 79.15 GiB total capacity",
        ),
    ];
    for (msg, want) in &cases {
        let events = oom::scan(msg);
        assert_eq!(events.len(), 1, "{msg}");
        let v = classify(&events[0]);
        assert_eq!(v.class.key(), "unexplained", "{want}: {:#?}", v.reasoning);
        assert_eq!(v.headline, format!("the message's figures contradict each other: {want}"), "{:#?}", v.reasoning);
        assert!(v.reasoning.iter().any(|r| r.contains(want)), "{:#?}", v.reasoning);
    }
    // the same figures within the card stay classified as before
    let ok = oom::scan(&pt15("8.00 GiB", "100.00 MiB", "10.20 GiB"));
    assert_eq!(classify(&ok[0]).class.key(), "fragmentation");
    // figures equal within print rounding are not a contradiction
    let edge = oom::scan(&pt15("8.00 GiB", "0 bytes", "8.00 GiB"));
    assert_ne!(classify(&edge[0]).class.key(), "unexplained");
}
