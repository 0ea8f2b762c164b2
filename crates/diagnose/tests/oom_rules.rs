//! Rules of the classifier on real and constructed messages (named cases;
//! every fixture file is checked on its own in oom_fixtures.rs).

use vramfit_diagnose::{classify, oom};

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
