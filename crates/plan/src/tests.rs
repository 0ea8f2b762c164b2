//! Planner properties on small hand-made catalogues: every figure comes
//! from `estimate()`, rankings are sorted, fits are real, prices scale
//! without changing the answer, more offers never make it dearer.

use super::*;
use proptest::prelude::*;
use vramfit_core::hardware::{GpuSpec, Link};
use vramfit_core::model::ModelSpec;
use vramfit_core::train::TrainSetup;
use vramfit_core::workload::{Offload, Sharding, Workload};

fn gpu(id: &str, mib: u64, tf: f64, nvlink: bool) -> GpuSpec {
    GpuSpec {
        id: id.into(),
        name: id.into(),
        aliases: vec![],
        memory_mib: mib,
        memory_gb: mib as f64 / 1024.0,
        bandwidth_gbs: 1000.0,
        bf16_tflops: tf,
        tf32_tflops: None,
        fp32_tflops: None,
        fp8_tflops: None,
        nvlink_gbs: if nvlink { Some(600.0) } else { None },
        pcie_gen: 4,
        mig_max: 0,
        bf16: true,
        arch: Some(vramfit_core::GpuArch::Ampere),
        confirmed: false,
        source: "test".into(),
    }
}

fn offer(id: &str, g: &str, per: u64, max: u64, nvlink: bool, price: f64) -> Offer {
    Offer {
        id: id.into(),
        provider: "p".into(),
        name: id.into(),
        gpu: g.into(),
        gpus_per_machine: per,
        max_gpus: max,
        link: if nvlink { Link::Nvlink } else { Link::Pcie },
        slice: None,
        cpu_cores: Some(16),
        ram_gb: Some(256.0),
        disk_gb: None,
        network_mbps: None,
        monthly: Some(PriceRange { low: price, high: price * 1.5 }),
        hourly: None,
        min_hours: None,
        currency: "XTS".into(),
        flags: vec![],
        source: "test".into(),
        max_machines: 1,
        min_machines: 1,
        inter_node_gbs: None,
        fabric: None,
    }
}

fn model() -> ModelSpec {
    // ~0.5 B params: small enough for quick estimates, big enough to need cards
    ModelSpec::llama_like("small", 1536, 16, 12, 12, 4096, 32000)
}

fn gpus() -> Vec<GpuSpec> {
    vec![gpu("g8", 8192, 100.0, false), gpu("g16", 16384, 200.0, true), gpu("g48", 49152, 300.0, true)]
}

fn train(batch: u64) -> Workload {
    Workload {
        task: vramfit_core::workload::Task::Train(TrainSetup {
            batch,
            seq: 1024,
            grad_accum: 2,
            ..TrainSetup::default()
        }),
        ..Workload::default()
    }
}

fn request<'a>(m: &'a ModelSpec, w: &'a Workload, g: &'a [GpuSpec], b: &'a PriceBook, job: Job) -> PlanRequest<'a> {
    PlanRequest {
        model: m,
        workload: w,
        gpus: g,
        book: b,
        have: None,
        allow: Allow::default(),
        job,
        top: 50,
        time: TimeModel::default(),
        launcher: None,
        output_len: None,
        one_gpu: false,
        engine_assumed: false,
        checkpointing_given: false,
    }
}

#[test]
fn figures_come_from_the_estimator() {
    let (m, w, g) = (model(), train(2), gpus());
    let book = PriceBook { offers: vec![offer("big", "g48", 1, 1, false, 100.0)], discounts: vec![], upgrades: vec![] };
    let r = plan(&request(&m, &w, &g, &book, Job::None)).unwrap();
    let rec = r.recommended.unwrap();
    let l = vramfit_core::estimate(&m, rec.workload.as_ref().unwrap()).unwrap();
    assert_eq!(rec.per_gpu_bytes, l.total_bytes());
    assert_eq!(rec.model_states_bytes, l.model_states_bytes().unwrap());
    assert_eq!(r.baseline_bytes, Some(vramfit_core::estimate(&m, &w).unwrap().total_bytes()));
    // one 48 GiB card holds a 0.5 B full fine-tune unchanged: no switches needed
    assert!(rec.switches.is_empty(), "{:?}", rec.switches);
}

#[test]
fn tp_never_over_pcie_and_slices_never_shared() {
    let (m, w, g) = (model(), train(4), gpus());
    let mut slice = offer("slice", "g48", 1, 1, false, 1.0);
    slice.slice = Some(Slice { fraction: 0.5, label: "1/2".into(), memory_mib: 2048, mig: false });
    let book = PriceBook {
        offers: vec![offer("pcie8", "g8", 1, 8, false, 10.0), offer("nv16", "g16", 8, 8, true, 100.0), slice],
        discounts: vec![],
        upgrades: vec![],
    };
    let tm = TimeModel::default();
    let mut s = Search::new(&m, &w, &g, &book, &tm, Job::None, Allow::default());
    s.run();
    assert!(!s.scored.is_empty());
    for c in &s.scored {
        let e = &s.entries[c.mem as usize];
        let o = s.offer(c.offer);
        if e.key.tp > 1 {
            assert_eq!(o.link, Link::Nvlink, "TP {} on {}", e.key.tp, o.id);
        }
        if o.slice.is_some() {
            assert_eq!(c.gpus, 1);
            assert_eq!(e.key.offload_optimizer, Offload::None);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn ranked_rows_fit_and_are_sorted(p8 in 1.0f64..5000.0, p16 in 1.0f64..5000.0, p48 in 1.0f64..20000.0, batch in 1u64..5) {
        let (m, w, g) = (model(), train(batch), gpus());
        let book = PriceBook {
            offers: vec![offer("a", "g8", 1, 8, false, p8), offer("b", "g16", 8, 8, true, p16 * 8.0), offer("c", "g48", 1, 1, false, p48)],
            discounts: vec![],
            upgrades: vec![],
        };
        let r = plan(&request(&m, &w, &g, &book, Job::None)).unwrap();
        for row in &r.ranked {
            prop_assert!(row.fits && row.per_gpu_bytes <= row.gpu_memory_bytes);
        }
        for pair in r.ranked.windows(2) {
            // bills (with the premium of each moving part) within ~0.5 % rank as equal
            // (then simplicity, exactness, bill, speed decide)
            prop_assert!(pair[0].rank_cost <= pair[1].rank_cost * 1.006);
        }
        if let Some(rec) = &r.recommended {
            prop_assert!(rec.fits);
        }
    }

    #[test]
    fn scaling_prices_changes_no_choice(k in 0.01f64..100.0, tokens in 1_000_000u64..10_000_000_000) {
        let (m, w, g) = (model(), train(2), gpus());
        let base = PriceBook {
            offers: vec![offer("a", "g8", 1, 8, false, 300.0), offer("b", "g16", 8, 8, true, 4000.0), offer("c", "g48", 1, 1, false, 1500.0)],
            discounts: vec![],
            upgrades: vec![],
        };
        let mut scaled = base.clone();
        for o in &mut scaled.offers {
            o.monthly = o.monthly.map(|p| p.scale(k));
        }
        let a = plan(&request(&m, &w, &g, &base, Job::Tokens(tokens))).unwrap();
        let b = plan(&request(&m, &w, &g, &scaled, Job::Tokens(tokens))).unwrap();
        let key = |r: &PlanReport| r.recommended.as_ref().map(|x| (x.offer_id.clone(), x.gpus, x.setup.clone()));
        prop_assert_eq!(key(&a), key(&b));
    }

    #[test]
    fn another_offer_never_makes_it_dearer(price in 1.0f64..10000.0, mib in 4096u64..65536) {
        let (m, w) = (model(), train(2));
        let mut g = gpus();
        g.push(gpu("extra", mib, 150.0, false));
        let base = PriceBook { offers: vec![offer("c", "g48", 1, 1, false, 1500.0)], discounts: vec![], upgrades: vec![] };
        let mut more = base.clone();
        more.offers.push(offer("x", "extra", 1, 4, false, price));
        let a = plan(&request(&m, &w, &g, &base, Job::None)).unwrap();
        let b = plan(&request(&m, &w, &g, &more, Job::None)).unwrap();
        let cheapest = |r: &PlanReport| r.ranked.first().map(|x| x.rank_cost).unwrap_or(f64::INFINITY);
        prop_assert!(cheapest(&b) <= cheapest(&a) + 1e-9);
    }
}

#[test]
fn offload_ram_buys_the_upgrade_or_is_refused() {
    let (m, w, g) = (model(), train(2), gpus());
    let mut o = offer("small-ram", "g8", 1, 1, false, 100.0);
    o.ram_gb = Some(1.0);
    let up = Upgrade {
        id: "ram".into(),
        provider: "p".into(),
        name: "RAM to 512 GB".into(),
        offers: vec![],
        ram_gb_to: Some(512.0),
        cpu_cores_to: None,
        disk_gb_add: None,
        network_mbps_to: None,
        monthly: 50.0,
        currency: "XTS".into(),
    };
    let tm = TimeModel::default();
    let with = PriceBook { offers: vec![o.clone()], discounts: vec![], upgrades: vec![up] };
    let mut s = Search::new(&m, &w, &g, &with, &tm, Job::None, Allow::default());
    s.run();
    let offloaded: Vec<&Scored> = s.scored.iter().filter(|c| s.entries[c.mem as usize].mem.unwrap().cpu > 0).collect();
    assert!(!offloaded.is_empty(), "an 8 GiB card needs offload for this job");
    for c in &offloaded {
        assert_eq!(c.upgrade, Some(0));
        // the upgrade is added to the unit price: 100 + 50 per month
        assert_eq!(c.monthly.unwrap().low, 150.0);
    }
    let without = PriceBook { offers: vec![o], discounts: vec![], upgrades: vec![] };
    let mut s = Search::new(&m, &w, &g, &without, &tm, Job::None, Allow::default());
    s.run();
    assert!(s.scored.iter().all(|c| s.entries[c.mem as usize].mem.unwrap().cpu == 0));
}

#[test]
fn machine_grid_has_every_small_count_then_two_per_doubling() {
    use crate::search::machine_grid;
    assert_eq!(machine_grid(1), vec![1]);
    assert_eq!(machine_grid(6), vec![1, 2, 3, 4, 5, 6]);
    assert_eq!(machine_grid(40), vec![1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32]);
    let big = machine_grid(100_000);
    assert_eq!(big.last(), Some(&98_304));
    assert!(big.len() < 40, "{}", big.len());
    assert!(big.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn multi_machine_counts_and_tp_inside_a_node() {
    let mut o = offer("cluster", "g16", 8, 8, true, 1000.0);
    o.max_machines = 4;
    o.inter_node_gbs = Some(50.0);
    assert_eq!(Search::counts_for(&o, None), vec![(8, 1), (16, 2), (24, 3), (32, 4)]);
    // a pinned count keeps only itself: 48 GPUs on six machines of 8
    o.max_machines = 16;
    assert_eq!(Search::counts_for(&o, Some(48)), vec![(48, 6)]);
    assert_eq!(Search::counts_for(&o, Some(40)), vec![(40, 5)]);
    // 44 GPUs do not split into machines of 8: none
    assert_eq!(Search::counts_for(&o, Some(44)), vec![]);
    o.max_machines = 4;
    let per_card = offer("cloud", "g8", 1, 8, false, 10.0);
    assert_eq!(Search::counts_for(&per_card, None), vec![(1, 1), (2, 1), (4, 1), (8, 1)]);
    assert_eq!(Search::counts_for(&per_card, Some(6)), vec![(6, 1)]);
    let (m, w, g) = (model(), train(2), gpus());
    let book = PriceBook { offers: vec![o], discounts: vec![], upgrades: vec![] };
    let tm = TimeModel::default();
    let mut s = Search::new(&m, &w, &g, &book, &tm, Job::Tokens(1_000_000_000), Allow::default());
    s.run();
    assert!(s.scored.iter().any(|c| c.machines == 4));
    for c in &s.scored {
        assert!(s.entries[c.mem as usize].key.tp <= 8);
    }
    // the same job is slower per GPU across machines (50 GB/s fabric vs NVLink)
    let per_gpu = |machines: u64| {
        s.scored
            .iter()
            .filter(|c| c.machines == machines && s.entries[c.mem as usize].key.sharding == Sharding::Zero3)
            .map(|c| c.tokens_per_s / c.gpus as f64)
            .fold(0.0, f64::max)
    };
    assert!(per_gpu(1) > 0.0 && per_gpu(4) > 0.0);
    assert!(per_gpu(4) <= per_gpu(1), "{} vs {}", per_gpu(4), per_gpu(1));
}

#[test]
fn ladder_applies_switches_in_the_seed_order() {
    let m = model();
    let w = Workload {
        task: vramfit_core::workload::Task::Train(TrainSetup {
            precision: vramfit_core::train::Precision::Fp32,
            batch: 8,
            seq: 1024,
            ..TrainSetup::default()
        }),
        ..Workload::default()
    };
    let card = gpu("g8", 8192, 100.0, false);
    let l = ladder::ladder(&m, &w, &card, Allow { lora: true, ..Allow::default() }, &TimeModel::default());
    let names: Vec<&str> = l.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        &names[..5],
        ["mixed precision", "gradient accumulation", "activation checkpointing", "8-bit optimizer", "LoRA"]
    );
    // fp32 → amp-bf16 and micro-batch 8 → 1 × accum 8 both apply
    assert_eq!(l.steps[0].status, StepStatus::Applied);
    assert_eq!(l.steps[1].status, StepStatus::Applied);
    // accumulation keeps the global batch and lowers memory (activations of 1 sequence, not 8)
    assert!(l.steps[1].saved_bytes.unwrap() > 0, "{:?}", l.steps[1]);
    // every applied step's bytes are the estimator's for its workload, and savings chain
    let mut prev = l.start_bytes.unwrap() as i128;
    for s in l.steps.iter().filter(|s| s.status == StepStatus::Applied) {
        let b = vramfit_core::estimate(&m, s.workload.as_ref().unwrap()).unwrap().total_bytes();
        assert_eq!(s.per_gpu_bytes, Some(b));
        assert_eq!(s.saved_bytes, Some(prev - b as i128));
        prev = b as i128;
    }
    // QLoRA is not allowed: shown, not kept
    let q = l.steps.iter().find(|s| s.name == "QLoRA").unwrap();
    assert_eq!(q.status, StepStatus::NotAllowed);
    assert!(q.detail.contains("--allow qlora"));
    // checkpointing costs time (≈ one more forward), accumulation keeps it about the same
    let ck = l.steps.iter().find(|s| s.name == "activation checkpointing").unwrap();
    assert!(ck.slowdown.unwrap() > l.steps[1].slowdown.unwrap());
}

#[test]
fn recommendation_uses_the_first_currency_that_has_a_fit() {
    let (m, w, g) = (model(), train(2), gpus());
    // the first currency's only offer is too small; the second one fits
    let mut tiny = offer("tiny", "g8", 1, 1, false, 1.0);
    tiny.slice = Some(Slice { fraction: 0.1, label: "1/10".into(), memory_mib: 512, mig: false });
    let mut usd = offer("usd", "g48", 1, 1, false, 3.0);
    usd.currency = "USD".into();
    let book = PriceBook { offers: vec![tiny, usd], discounts: vec![], upgrades: vec![] };
    let r = plan(&request(&m, &w, &g, &book, Job::None)).unwrap();
    assert_eq!(r.recommended.as_ref().map(|x| x.currency.as_str()), Some("USD"));
    assert!(r.notes.iter().any(|n| n.contains("ranked separately")));
}

#[test]
fn a_wide_price_range_ranks_by_its_middle_not_its_low_end() {
    let (m, w, g) = (model(), train(2), gpus());
    // same card; "wide" is listed at 80–160 (middle 120), "plain" at 100 flat
    let mut wide = offer("wide", "g48", 1, 1, false, 80.0);
    wide.monthly = Some(PriceRange { low: 80.0, high: 160.0 });
    let mut plain = offer("plain", "g48", 1, 1, false, 100.0);
    plain.monthly = Some(PriceRange::point(100.0));
    let book = PriceBook { offers: vec![wide, plain], discounts: vec![], upgrades: vec![] };
    let r = plan(&request(&m, &w, &g, &book, Job::None)).unwrap();
    assert_eq!(r.recommended.as_ref().map(|x| x.offer_id.as_str()), Some("plain"));
    // and a range whose middle is below the flat price still wins
    let mut narrow = offer("narrow", "g48", 1, 1, false, 80.0);
    narrow.monthly = Some(PriceRange { low: 80.0, high: 110.0 });
    let mut plain = offer("plain", "g48", 1, 1, false, 100.0);
    plain.monthly = Some(PriceRange::point(100.0));
    let book = PriceBook { offers: vec![narrow, plain], discounts: vec![], upgrades: vec![] };
    let r = plan(&request(&m, &w, &g, &book, Job::None)).unwrap();
    assert_eq!(r.recommended.as_ref().map(|x| x.offer_id.as_str()), Some("narrow"));
}

#[test]
fn ladder_step_that_saves_nothing_is_skipped() {
    // llama-2-7b amp-bf16 full fine-tune, batch 1 × seq 2048 on a 24 GiB card: the peak is at
    // the optimizer step, so checkpointing saves 0 B there; it is skipped (not in the speed
    // cost nor the chain) and retried once the 8-bit optimizer moves the peak to backward.
    let m = ModelSpec::llama_like("llama-2-7b", 4096, 32, 32, 32, 11008, 32000);
    let w = Workload {
        task: vramfit_core::workload::Task::Train(TrainSetup { batch: 1, seq: 2048, ..TrainSetup::default() }),
        ..Workload::default()
    };
    let card = gpu("g24", 24576, 71.0, false);
    let l = ladder::ladder(&m, &w, &card, Allow { lora: true, qlora: true, ..Allow::default() }, &TimeModel::default());
    let ck: Vec<&ladder::LadderStep> = l.steps.iter().filter(|s| s.name == "activation checkpointing").collect();
    assert_eq!(ck.len(), 2, "{:#?}", l.steps);
    assert_eq!(ck[0].status, StepStatus::Skipped);
    assert!(ck[0].detail.contains("peak is at the optimizer step"), "{}", ck[0].detail);
    assert_eq!(ck[0].saved_bytes, Some(0));
    assert_eq!(ck[0].slowdown, None);
    // the 8-bit optimizer right after it carries no checkpointing slowdown
    let i8 = l.steps.iter().position(|s| s.name == "8-bit optimizer").unwrap();
    assert!(l.steps[i8].slowdown.unwrap() < 1.05, "{:?}", l.steps[i8]);
    assert_eq!(l.steps[i8 + 1].name, "activation checkpointing");
    assert_eq!(ck[1].status, StepStatus::Applied);
    assert!(ck[1].saved_bytes.unwrap() > 0 && ck[1].detail.contains("backward"), "{:?}", ck[1]);
    // every applied step lowers memory
    for s in l.steps.iter().filter(|s| s.status == StepStatus::Applied) {
        assert!(s.saved_bytes.unwrap() > 0, "{s:?}");
    }
}

#[test]
fn ladder_gradient_accumulation_that_raises_the_peak_is_skipped() {
    // batch 2 vs batch 1 × accum 2 on llama-2-7b full fine-tune: the step holds the
    // gradients either way, and accumulation adds them to backward too
    let m = ModelSpec::llama_like("llama-2-7b", 4096, 32, 32, 32, 11008, 32000);
    let w = Workload {
        task: vramfit_core::workload::Task::Train(TrainSetup { batch: 2, seq: 2048, ..TrainSetup::default() }),
        ..Workload::default()
    };
    let card = gpu("g24", 24576, 71.0, false);
    let l = ladder::ladder(&m, &w, &card, Allow::default(), &TimeModel::default());
    let ga = l.steps.iter().find(|s| s.name == "gradient accumulation").unwrap();
    let b1 = vramfit_core::estimate(&m, ga.workload.as_ref().unwrap()).unwrap().total_bytes();
    assert!(b1 >= l.start_bytes.unwrap(), "accumulation does not lower it here");
    assert_eq!(ga.status, StepStatus::Skipped);
    assert!(ga.detail.contains("accumulation"), "{}", ga.detail);
}

#[test]
fn zero_2_3_with_pipeline_parallelism_never_proposed() {
    let m = ModelSpec::llama_like("llama-2-7b", 4096, 32, 32, 32, 11008, 32000);
    let w = Workload {
        task: vramfit_core::workload::Task::Train(TrainSetup { batch: 1, seq: 2048, ..TrainSetup::default() }),
        ..Workload::default()
    };
    for g in [2, 4, 8, 16] {
        for l in search::layouts(&m, g, &w) {
            assert!(l.pp == 1 || l.sharding.stage() <= 1, "{g} GPUs: {l:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The search's allocation-free training path (`TrainModel::evaluate` per
    /// setup) gives exactly the figures of `estimate()`, refusals included.
    #[test]
    fn fast_path_agrees_with_estimate(
        kind in 0usize..3, precision in 0usize..6, optimizer in 0usize..7, ckpt in 0usize..3,
        micro in 1u64..9, accum in 1u64..5, dp_log in 0u32..3, tp_log in 0u32..2, pp_log in 0u32..3,
        stage in 0u8..4, off in 0usize..9, seq_log in 8u32..13, first_step in any::<bool>(),
    ) {
        use vramfit_core::train::{Checkpointing, Optimizer, Precision, TrainKind};
        use crate::types::{MemKey, MemSummary, TrainKey};
        let m = model();
        let base = Workload {
            task: vramfit_core::workload::Task::Train(TrainSetup {
                seq: 1 << seq_log,
                first_step,
                ..TrainSetup::default()
            }),
            ..Workload::default()
        };
        let g = gpus();
        let book = PriceBook::default();
        let tm = TimeModel::default();
        let mut s = Search::new(&m, &base, &g, &book, &tm, Job::None, Allow { lora: true, qlora: true, quant: false });
        let (off_opt, off_par) = [(Offload::None, Offload::None), (Offload::Cpu, Offload::None), (Offload::Cpu, Offload::Cpu)][off % 3];
        // off 3..6: hybrid sharding with 2 replicas (refused unless ZeRO-3 on 4+ ranks);
        // off 6..9: ZeRO++ hpZ groups of 2 (refused unless DeepSpeed ZeRO-3 on 4+ GPUs, no TP/PP)
        let dp_replicate = if (3..6).contains(&off) { 2 } else { 1 };
        let hpz = if off >= 6 { 2 } else { 1 };
        let key = MemKey {
            gpus: 1 << (dp_log + tp_log + pp_log),
            tp: 1 << tp_log,
            pp: 1 << pp_log,
            virtual_stages: 1,
            replicas: 1,
            ep: 1,
            dp_attention: 1,
            sharding: vramfit_core::workload::Sharding::from_stage(stage).unwrap(),
            offload_optimizer: off_opt,
            offload_params: off_par,
            dp_replicate,
            hpz,
            etp: 0,
            train: Some(TrainKey {
                kind: [TrainKind::Full, TrainKind::Lora, TrainKind::Qlora][kind],
                precision: Precision::ALL[precision],
                optimizer: Optimizer::ALL[optimizer],
                checkpointing: [Checkpointing::None, Checkpointing::Selective, Checkpointing::Full][ckpt],
                micro_batch: micro,
                grad_accum: accum,
            }),
            infer: None,
            cp: 1,
        };
        let i = s.entry(key.clone());
        let fast = s.entries[i as usize].mem;
        let slow = vramfit_core::estimate(&m, &s.workload_for(&key)).and_then(|l| MemSummary::of(&l)).ok();
        prop_assert_eq!(fast, slow, "{:?}", key);
    }
}

/// The fast path on a grid: most setups are valid (so the property above
/// compares numbers, not refusals) and every one matches `estimate()`.
#[test]
fn fast_path_grid_matches_estimate() {
    use crate::types::{MemKey, MemSummary, TrainKey};
    use vramfit_core::train::{Checkpointing, Optimizer, Precision, TrainKind};
    let m = model();
    let base = Workload {
        task: vramfit_core::workload::Task::Train(TrainSetup { seq: 1024, ..TrainSetup::default() }),
        ..Workload::default()
    };
    let (g, book, tm) = (gpus(), PriceBook::default(), TimeModel::default());
    let mut s = Search::new(&m, &base, &g, &book, &tm, Job::None, Allow { lora: true, qlora: true, quant: false });
    let (mut valid, mut all) = (0, 0);
    for kind in [TrainKind::Full, TrainKind::Lora, TrainKind::Qlora] {
        for precision in [Precision::MixedBf16, Precision::AmpBf16, Precision::Fp32] {
            for optimizer in [Optimizer::AdamW, Optimizer::AdamW8bit, Optimizer::Sgd] {
                for (gpus, tp, pp, stage, o, p) in [
                    (1, 1, 1, 0, Offload::None, Offload::None),
                    (4, 1, 1, 2, Offload::None, Offload::None),
                    (8, 1, 1, 3, Offload::None, Offload::None),
                    (2, 1, 1, 2, Offload::Cpu, Offload::None),
                    (1, 1, 1, 3, Offload::Cpu, Offload::Cpu),
                    (8, 2, 2, 1, Offload::None, Offload::None),
                ] {
                    for ck in [Checkpointing::None, Checkpointing::Full] {
                        let key = MemKey {
                            gpus,
                            tp,
                            pp,
                            virtual_stages: 1,
                            replicas: 1,
                            ep: 1,
                            dp_attention: 1,
                            sharding: Sharding::from_stage(stage).unwrap(),
                            offload_optimizer: o,
                            offload_params: p,
                            dp_replicate: 1,
                            hpz: 1,
                            etp: 0,
                            train: Some(TrainKey {
                                kind,
                                precision,
                                optimizer,
                                checkpointing: ck,
                                micro_batch: 2,
                                grad_accum: 4,
                            }),
                            infer: None,
                            cp: 1,
                        };
                        let i = s.entry(key.clone());
                        let fast = s.entries[i as usize].mem;
                        let slow =
                            vramfit_core::estimate(&m, &s.workload_for(&key)).and_then(|l| MemSummary::of(&l)).ok();
                        assert_eq!(fast, slow, "{key:?}");
                        all += 1;
                        valid += fast.is_some() as u32;
                    }
                }
            }
        }
    }
    assert!(valid * 10 >= all * 9, "{valid} of {all} setups valid");
}

/// Across machines ZeRO ranks as TP/PP do (the faster wins at the same
/// bill); inside one machine the order of moving parts stands.
#[test]
fn zero_ranks_as_model_parallel_only_across_machines() {
    use crate::types::Complexity;
    assert_eq!(Complexity::Zero3.ranked_across(1), Complexity::Zero3);
    assert_eq!(Complexity::Zero12.ranked_across(1), Complexity::Zero12);
    assert_eq!(Complexity::Zero3.ranked_across(2), Complexity::ModelParallel);
    assert_eq!(Complexity::Zero12.ranked_across(12), Complexity::ModelParallel);
    assert_eq!(Complexity::Plain.ranked_across(2), Complexity::Plain);
    assert_eq!(Complexity::OffloadOptimizer.ranked_across(2), Complexity::OffloadOptimizer);
}

/// A pipeline gets 4 micro-batches per stage: (p − 1) / 4p < 25 % bubble.
#[test]
fn a_pipeline_is_filled_with_four_micro_batches_per_stage() {
    use crate::types::pipeline_min_micro_batches;
    assert_eq!(pipeline_min_micro_batches(1), 1);
    assert_eq!(pipeline_min_micro_batches(12), 48);
    for p in 2..=16u64 {
        let m = pipeline_min_micro_batches(p) as f64;
        assert!((p as f64 - 1.0) / m < 0.25, "{p}");
    }
}

/// A DeepSeek-shaped MoE with MLA (a latent KV cache that TP replicates on
/// every rank, `kv.rs`): 8 layers, hidden 2048, 64 routed experts (top-8)
/// of width 512 and one shared expert, first layer dense.
fn mla_moe() -> ModelSpec {
    let mut m = ModelSpec::llama_like("mla-moe", 2048, 8, 16, 16, 8192, 32000);
    m.mla = Some(vramfit_core::model::MlaSpec {
        q_lora_rank: Some(512),
        kv_lora_rank: 256,
        qk_nope_head_dim: 64,
        qk_rope_head_dim: 32,
        v_head_dim: 64,
    });
    m.moe = Some(vramfit_core::model::MoeSpec {
        num_experts: 64,
        experts_per_token: 8,
        expert_intermediate: 512,
        shared_experts: 1,
        shared_intermediate: 512,
        shared_expert_gate: false,
        dense_layers: 1,
        router_bias: true,
        router_linear_bias: false,
    });
    m
}

/// The bytes one GPU reads per decode step, and the all-to-all bytes it
/// sends, for `mla_moe` served by vLLM on 8 GPUs at concurrency 64.
fn decode_bytes(ep: u64, dp_attention: u64) -> (f64, f64) {
    use crate::types::{MemSummary, Work};
    use vramfit_core::estimate::estimate;
    use vramfit_core::workload::{Engine, InferenceSetup, Parallelism, Task};
    let m = mla_moe();
    let w = Workload {
        task: Task::Inference(InferenceSetup {
            engine: Engine::Vllm,
            concurrency: 64,
            context: 8192,
            ..InferenceSetup::default()
        }),
        parallelism: Parallelism { gpus: 8, tp: 8, ep, dp_attention, ..Parallelism::default() },
        ..Workload::default()
    };
    let ledger = estimate(&m, &w).unwrap();
    let sum = MemSummary::of_job(&m, &w, &ledger).unwrap();
    match crate::work::work_of(&m, &w, &sum, 1) {
        Work::Infer(i) => (i.bytes_per_step, i.a2a_bytes_per_step),
        Work::Train(_) => unreachable!(),
    }
}

/// Issue 21 item 4: EP = TP reads the same expert bytes per rank as TP alone
/// (8 whole experts of 64 against 1/8 of each, the same touched share
/// 1 − (1 − 8/64)^64 ≈ 99.98 %), and no all-to-all (vLLM all-reduces the
/// replicated tokens' expert outputs). Data-parallel attention 8 reads less
/// per rank at concurrency 64: each rank reads its own 8 sequences' latent
/// KV (8 × 8192 × 8 layers × (256 + 32) × 2 B = 302 MB) instead of all 64
/// sequences' (2.42 GB, MLA's cache is whole on every TP rank), against the
/// attention and dense weights it now holds whole (~0.18 GB more), and sends
/// 8 tokens × 2048 × 2 B × min(8, 8) × 7/8 × 2 × 7 MoE layers = 3.2 MB.
#[test]
fn dp_attention_reads_fewer_bytes_per_rank_at_concurrency_64() {
    let (tp, tp_a2a) = decode_bytes(1, 1);
    let (ep, ep_a2a) = decode_bytes(8, 1);
    let (dpa, dpa_a2a) = decode_bytes(8, 8);
    assert!((ep - tp).abs() < 0.01 * tp, "EP {ep} vs TP {tp}");
    assert_eq!((tp_a2a, ep_a2a), (0.0, 0.0));
    let kv_saved = 64.0 * 8192.0 * 8.0 * 288.0 * 2.0 * 7.0 / 8.0;
    assert!(dpa < tp - 0.5 * kv_saved, "DP-attention {dpa} vs TP {tp}");
    assert_eq!(dpa_a2a, 8.0 * 2048.0 * 2.0 * 8.0 * 7.0 / 8.0 * 2.0 * 7.0);
}

/// Megatron MoE training: the search tries each EP with expert-tensor-parallel
/// 1 and TP (Megatron's two common choices) where ETP × EP divides the ranks of
/// a pipeline stage (parallel_state.py `initialize_model_parallel`), and only
/// EP 1 keeps the experts split by TP (etp 0: Megatron's default ETP = TP).
#[test]
fn megatron_moe_search_tries_expert_tensor_parallel_one_and_tp() {
    let mut m = ModelSpec::llama_like("moe", 1024, 8, 16, 4, 2816, 32000);
    m.moe = Some(vramfit_core::model::MoeSpec {
        num_experts: 8,
        experts_per_token: 2,
        expert_intermediate: 2816,
        shared_experts: 0,
        shared_intermediate: 0,
        shared_expert_gate: false,
        dense_layers: 0,
        router_bias: false,
        router_linear_bias: false,
    });
    let t = TrainSetup {
        kind: vramfit_core::train::TrainKind::Full,
        precision: vramfit_core::train::Precision::MixedBf16,
        seq: 1024,
        ..TrainSetup::default()
    }
    .with_engine(vramfit_core::workload::Engine::Megatron);
    let w = Workload { task: vramfit_core::workload::Task::Train(t), ..Workload::default() };
    let g = gpus();
    let book = PriceBook { offers: vec![offer("nv", "g48", 8, 8, true, 10.0)], discounts: vec![], upgrades: vec![] };
    let tm = TimeModel::default();
    let s = Search::new(&m, &w, &g, &book, &tm, Job::None, Allow::default());
    let keys: Vec<MemKey> = s.key_groups(8).into_iter().flatten().collect();
    let grids = |tp: u64, pp: u64| {
        let mut v: Vec<(u64, u64)> = keys.iter().filter(|k| k.tp == tp && k.pp == pp).map(|k| (k.ep, k.etp)).collect();
        v.sort();
        v.dedup();
        v
    };
    // TP 2 on 8 GPUs, a stage of 8 ranks: ETP 1 with EP 8; ETP 2 with EP 4 (8 ÷ 2 ranks per slot)
    assert_eq!(grids(2, 1), vec![(1, 0), (4, 2), (8, 1)]);
    // TP 2 × PP 2, a stage of 4 ranks: EP 4 × ETP 1, EP 2 × ETP 2
    assert_eq!(grids(2, 2), vec![(1, 0), (2, 2), (4, 1)]);
    // TP 1: ETP 1 is TP
    assert_eq!(grids(1, 2), vec![(1, 0), (4, 1)]);
    // TP 2 × PP 4, a stage of 2 ranks: EP 2 × ETP 1 only (EP 1 × ETP 2 is the (1, 0) default)
    assert_eq!(grids(2, 4), vec![(1, 0), (2, 1)]);
    // every key with EP names its ETP; each is a layout Megatron lays out
    for k in keys.iter().filter(|k| k.ep > 1) {
        assert!(k.etp >= 1 && (k.gpus / k.pp).is_multiple_of(k.ep * k.etp), "{k:?}");
    }
}

/// A multi-GPU setup is sized for each offer's card as `estimate --gpu` sizes
/// it: NCCL's channels follow the card's link and generation (vramfit_core::nccl:
/// PCIe Gen4 2 channels, Ampere NVLink 24, Hopper NVLink 32 and NVLS), so the
/// memo's figure (interconnect not known) is re-estimated per card, never
/// reused across cards whose NCCL buffers differ.
#[test]
fn multi_gpu_memory_follows_each_offers_nccl_interconnect() {
    use crate::types::{MemKey, MemSummary, TrainKey};
    use vramfit_core::train::{Checkpointing, Optimizer, Precision, TrainKind};
    let m = model();
    let base = train(2);
    let mut hopper = gpu("h", 81920, 900.0, true);
    hopper.arch = Some(vramfit_core::GpuArch::Hopper);
    let g = vec![gpu("pcie", 49152, 300.0, false), gpu("ampere", 81920, 300.0, true), hopper];
    let book = PriceBook {
        offers: vec![
            offer("pcie", "pcie", 8, 8, false, 100.0),
            offer("ampere", "ampere", 8, 8, true, 200.0),
            offer("h", "h", 8, 8, true, 300.0),
        ],
        discounts: vec![],
        upgrades: vec![],
    };
    let tm = TimeModel::default();
    let mut s = Search::new(&m, &base, &g, &book, &tm, Job::None, Allow { lora: false, qlora: false, quant: false });
    let key = MemKey {
        gpus: 4,
        tp: 1,
        pp: 1,
        virtual_stages: 1,
        replicas: 1,
        ep: 1,
        dp_attention: 1,
        sharding: Sharding::from_stage(2).unwrap(),
        offload_optimizer: Offload::None,
        offload_params: Offload::None,
        dp_replicate: 1,
        hpz: 1,
        etp: 0,
        train: Some(TrainKey {
            kind: TrainKind::Full,
            precision: Precision::MixedBf16,
            optimizer: Optimizer::AdamW,
            checkpointing: Checkpointing::Full,
            micro_batch: 2,
            grad_accum: 2,
        }),
        infer: None,
        cp: 1,
    };
    let i = s.entry(key);
    let mut totals = Vec::new();
    for (oi, card) in g.iter().enumerate() {
        let on_card = s.mem_on(i, oi as u32).expect("valid").total;
        // what estimate computes with the card named (the CLI sets runtime.nccl from it)
        let mut w = s.workload_of(i);
        w.runtime.nccl = card.nccl_hardware();
        let slow = vramfit_core::estimate(&m, &w).and_then(|l| MemSummary::of(&l)).unwrap().total;
        assert_eq!(on_card, slow, "{}", card.id);
        assert_eq!(s.workload_on(i, oi as u32).runtime.nccl, card.nccl_hardware());
        totals.push(on_card);
    }
    // PCIe Gen4 (2 channels) < Ampere NVLink (24) < Hopper NVLink (32 + NVLS)
    assert!(totals[0] < totals[1] && totals[1] < totals[2], "{totals:?}");
    // the memo's own figure (link not known: 32 channels, no NVLS) is not what any of these cards hold
    let unknown = s.entries[i as usize].mem.unwrap().total;
    assert!(unknown > totals[1] && unknown < totals[2], "{unknown} vs {totals:?}");
}
