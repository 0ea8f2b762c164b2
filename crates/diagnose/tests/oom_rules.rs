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

// ---------------------------------------------------------------------------
// Issue 14 §1: one main cause, ranked contributors. One test per rule, each
// on a real message (tests/fixtures/oom, sources in index.json and
// SOURCES.md).

use vramfit_diagnose::classify::{OomClass, Verdict};

fn fixture(name: &str) -> Verdict {
    let path = format!("{}/tests/fixtures/oom/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let events = oom::scan(&text);
    assert_eq!(events.len(), 1, "{name}");
    classify(&events[0])
}

fn said(v: &Verdict, what: &str) -> bool {
    v.reasoning.iter().any(|r| r.contains(what))
}

const GIB: f64 = (1u64 << 30) as f64;

/// Memory held outside this process that is most of the card is the main
/// cause even when the cache alone could serve the request (rwth-i6/returnn#1469:
/// 15 workers × 1.19 GiB on GPU 0; a 677 MiB cache vs a 52 MiB request).
#[test]
fn other_users_holding_most_of_the_card_beat_a_cache_that_could_serve() {
    let v = fixture("pt22_returnn1469_workers_on_gpu0.txt");
    assert_eq!(v.class, OomClass::OtherProcess, "{:#?}", v.reasoning);
    assert_eq!(v.main_cause.class, OomClass::OtherProcess);
    let other = v.main_cause.bytes.unwrap() as f64 / GIB;
    assert!((other - 15.0 * 1.19).abs() < 0.01, "{other}");
    assert!((v.main_cause.share.unwrap() - 0.5624).abs() < 0.001, "{:?}", v.main_cause.share);
    let frag = v.contributors.iter().find(|c| c.class == OomClass::Fragmentation).expect("fragmentation contributes");
    assert!(frag.share.unwrap() < 0.03, "{frag:?}");
    assert!(said(&v, "more than this job's"), "{:#?}", v.reasoning);
    // the stray-context fix: set_device in every rank
    assert!(v.fixes.iter().any(|f| f.action.contains("set_device")), "{:#?}", v.fixes);
}

/// "Free ≥ requested" by less than the effectively-full margin is not
/// "should have fit" (nianticlabs/monodepth2#236: 25.38 MiB free for a
/// 20 MiB request; Synthintel0/MyGirlGPT#11: 41.56 MiB for 32 MiB on 4 GiB).
#[test]
fn free_just_above_the_request_is_a_full_card() {
    let v = fixture("pt15_monodepth236_granularity.txt");
    assert_ne!(v.class, OomClass::Unexplained, "{:#?}", v.reasoning);
    assert!(said(&v, "effectively full"), "{:#?}", v.reasoning);
    // the rest of the figures decide: 4.85 GiB outside PyTorch, more than the job's 3.08 GiB
    assert_eq!(v.class, OomClass::OtherProcess);
    let v = fixture("pt21_capacty_mygirlgpt11.txt");
    assert_eq!(v.class, OomClass::GenuineShortage, "{:#?}", v.reasoning);
    // well beyond the margin it stays unexplained (pytorch/pytorch#40002: 3.91 GiB free for 50 MiB)
    assert_eq!(fixture("pt14_pytorch40002_free.txt").class, OomClass::Unexplained);
}

/// A request larger than the whole card decides on its own, even when the
/// other figures contradict each other (microsoft/WSL#11050: 30 GiB on a
/// 16 GiB card with 30 GiB "allocated"; YingqianWang/iPASSR#9).
#[test]
fn a_request_larger_than_the_card_is_decisive_despite_contradictions() {
    for name in ["pt22_wsl11050_request_over_card.txt", "pt110_ipassr9_request_over_card.txt"] {
        let v = fixture(name);
        assert_eq!(v.class, OomClass::RequestExceedsCard, "{name}: {:#?}", v.reasoning);
        assert!(v.main_cause.share.unwrap() > 1.0, "{name}");
        assert!(v.contributors.is_empty(), "{name}");
        assert!(said(&v, "the request alone decides"), "{name}: {:#?}", v.reasoning);
    }
}

/// A cache smaller than the request that covers it only together with free
/// memory, on a card left under the effectively-full margin, is a shortage
/// with a fragmentation contribution (FoundationVision/GenerateU#10;
/// hiyouga/LlamaFactory#7532). Where free + cache would leave real room it
/// is still a shortage, fragmentation the runner-up (issue 27 §4;
/// replicate/cog-stable-diffusion#66: 5.6 GiB left).
#[test]
fn cache_smaller_than_the_request_is_a_shortage_with_a_fragmentation_contribution() {
    for name in ["pt22_generateu10_container_pid.txt", "pt22_llamafactory7532_deepspeed_pid.txt"] {
        let v = fixture(name);
        assert_eq!(v.class, OomClass::GenuineShortage, "{name}: {:#?}", v.reasoning);
        assert!(v.headline.starts_with("the card is effectively full"), "{name}: {}", v.headline);
        assert!(v.contributors.iter().any(|c| c.class == OomClass::Fragmentation), "{name}: {:?}", v.contributors);
        // expandable segments is still the cheapest thing to try
        assert_eq!(v.fixes[0].action, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "{name}");
    }
    // issue 27 §4: fragmentation only when the cache alone could serve the request. cog#66's
    // 12.57 GiB cache is just under its 12.66 GiB request (was fragmentation): a shortage
    // whose runner-up is fragmentation, with expandable segments still the cheapest fix
    let v = fixture("pt110_cogsd66_cache_near_request.txt");
    assert_eq!(v.class, OomClass::GenuineShortage, "{:#?}", v.reasoning);
    assert!(v.headline.contains("cache is smaller than the"), "{}", v.headline);
    assert_eq!(v.runner_up.as_ref().map(|r| r.class), Some(OomClass::Fragmentation));
    assert_eq!(v.fixes[0].action, "PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128 (try 128–512)");
}

/// A lone "Process N" with no "this process" line, within the stated
/// 4 GiB above PyTorch's reserved bytes, is this process seen from a
/// container (facebookresearch/seamless_communication#416: 14.59 GiB vs
/// 14.45 GiB reserved): no other process is blamed.
#[test]
fn a_lone_process_matching_reserved_is_this_process() {
    let v = fixture("pt22_seamless416_container_pid.txt");
    assert!(said(&v, "PID 121503 (14.59 GiB) is within 4.00 GiB above PyTorch's reserved"), "{:#?}", v.reasoning);
    assert_eq!(v.class, OomClass::GenuineShortage);
    assert!(v.contributors.iter().all(|c| c.class != OomClass::OtherProcess), "{:?}", v.contributors);
    // the same rule when NVML reports 0 bytes for "this process" (constructed
    // from the seamless message with that sentence added): applied consistently
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/oom/pt22_seamless416_container_pid.txt",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
    .replace(
        "Process 121503 has 14.59 GiB memory in use.",
        "Process 121503 has 14.59 GiB memory in use. Including non-PyTorch memory, this process has 0 bytes memory in use.",
    );
    let v = classify(&oom::scan(&text)[0]);
    assert!(said(&v, "NVML reported 0 bytes"), "{:#?}", v.reasoning);
    assert!(said(&v, "most likely this process"), "{:#?}", v.reasoning);
    assert_eq!(v.class, OomClass::GenuineShortage, "{:#?}", v.reasoning);
}

/// An nvidia-smi table pasted in the same log is evidence (yangjianxin1/
/// GPT2-chitchat#19: GPU 0 at 15514 of 16130 MiB, GPUs 1–3 idle, then a
/// raw CUDA error).
#[test]
fn a_pasted_nvidia_smi_table_is_named() {
    let v = fixture("cuda_gpt2chitchat19_nvsmi.txt");
    assert_eq!(v.class, OomClass::Unknown);
    assert!(said(&v, "GPU 0 15.15 GiB of 15.75 GiB (96%) in use while GPU 1, 2, 3 idle"), "{:#?}", v.reasoning);
}

/// Process rows of a pasted table name the other process and its memory
/// (the real ≤1.4 message of pytorch/pytorch#40863, 10.6 GiB outside
/// PyTorch; the table rows are constructed in the thread's nvidia-smi
/// layout, since the thread's own table is not stored).
#[test]
fn nvidia_smi_process_rows_name_the_other_process() {
    let message = std::fs::read_to_string(format!(
        "{}/tests/fixtures/oom/pt15_pytorch40863_other_holds_card.txt",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let table = "| Processes:                                                       GPU Memory |\n|  GPU       PID   Type   Process name                             Usage      |\n|=============================================================================|\n|    0      4242      C   python                                       892MiB |\n|    0      5151      C   /usr/bin/python3                           10240MiB |\n+-----------------------------------------------------------------------------+\n";
    let v = classify(&oom::scan(&format!("{message}{table}"))[0]);
    assert_eq!(v.class, OomClass::OtherProcess, "{:#?}", v.reasoning);
    assert!(said(&v, "PID 5151 /usr/bin/python3 10.00 GiB"), "{:#?}", v.reasoning);
    assert!(said(&v, "PID 4242 matches PyTorch's reserved bytes"), "{:#?}", v.reasoning);
    assert!(v.figures.iter().any(|f| f.name == "nvidia_smi_other_processes" && f.bytes == 10240 << 20));
}

/// Messages without figures are recognised with the next step, never
/// refused: legacy THC (jiesutd/NCRFpp#121), a raw CUDA error
/// (NVlabs/tiny-cuda-nn#387), TensorFlow's shape-only OOM
/// (keras-team/keras#9643), TensorFlow's StreamExecutor
/// (tensorflow/tensorflow#12237), vLLM's budget (netease-youdao/QAnything#302),
/// the allocator-retry warning (jzhang38/EasyContext#11).
#[test]
fn messages_without_figures_are_recognised() {
    for (name, class, step) in [
        ("thc_ncrfpp121_backward.txt", OomClass::Unknown, "upgrade PyTorch"),
        ("cuda_tinycudann387.txt", OomClass::Unknown, "nvidia-smi"),
        ("tf_keras9643_gpu1.txt", OomClass::Unknown, "set_memory_growth"),
        ("tf_tf12237_driver_oom.txt", OomClass::Unknown, "set_memory_growth"),
        ("vllm_qanything302_budget.txt", OomClass::Budget, "--gpu-memory-utilization"),
        ("ds_easycontext11_cache_flushes.txt", OomClass::Unknown, "expandable_segments"),
    ] {
        let v = fixture(name);
        assert_eq!(v.class, class, "{name}: {:#?}", v.reasoning);
        assert_eq!(v.main_cause.class, class, "{name}");
        assert!(v.fixes.iter().any(|f| f.action.contains(step)), "{name}: {:#?}", v.fixes);
    }
    // the THCudaCheck line and its RuntimeError are one failure
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/oom/thc_ncrfpp121_backward.txt",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    assert_eq!(oom::scan(&text).len(), 1);
}
