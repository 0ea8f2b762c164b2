//! How fast the planner searches. `cargo bench -p vramfit-core --bench plan_search`
//! prints, for Llama-2-7B and 70B full fine-tunes over a catalogue shaped
//! like the embedded one (10 offers of 1–8 GPUs, and two clusters of 8-GPU
//! machines over InfiniBand up to 1,024 machines), and Llama-3.1-405B:
//!
//! - `plan()` end to end (memo cold: every distinct setup estimated once);
//! - the candidate loop with the memo warm, as candidates per second
//!   (criterion's `thrpt`, in elements = candidates);
//! - one distinct training estimate on the search's fast path
//!   (`TrainModel::evaluate`, no ledger): the time per setup, criterion's
//!   `thrpt` in elements = distinct setups.

use criterion::BatchSize;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use vramfit_core::train::{Checkpointing, Optimizer, TrainKind};
use vramfit_core::train::{Engine, Precision, TrainSetup};
use vramfit_core::Sharding;
use vramfit_core::{GpuArch, GpuSpec, Link, ModelSpec, Task, Workload};
use vramfit_plan::types::TrainKey;
use vramfit_plan::{
    plan, Allow, Fabric, FabricKind, Job, MemKey, Offer, PlanRequest, PriceBook, PriceRange, Search, TimeModel,
};

fn gpu(id: &str, mib: u64, bw: f64, tf: f64, nvlink: Option<f64>, arch: GpuArch) -> GpuSpec {
    GpuSpec {
        id: id.into(),
        name: id.into(),
        aliases: vec![],
        memory_mib: mib,
        memory_gb: mib as f64 / 1024.0,
        bandwidth_gbs: bw,
        bf16_tflops: tf,
        tf32_tflops: None,
        fp32_tflops: None,
        fp8_tflops: None,
        nvlink_gbs: nvlink,
        pcie_gen: 4,
        mig_max: 0,
        bf16: true,
        arch: Some(arch),
        confirmed: false,
        source: "bench".into(),
    }
}

fn offer(id: &str, g: &str, per: u64, max: u64, link: Link, low: f64, high: f64) -> Offer {
    Offer {
        id: id.into(),
        provider: "bench".into(),
        name: id.into(),
        gpu: g.into(),
        gpus_per_machine: per,
        max_gpus: max,
        link,
        slice: None,
        cpu_cores: Some(16),
        ram_gb: Some(512.0),
        disk_gb: None,
        network_mbps: None,
        monthly: Some(PriceRange { low, high }),
        hourly: None,
        min_hours: None,
        currency: "CNY".into(),
        flags: vec![],
        source: "bench".into(),
        max_machines: 1,
        min_machines: 1,
        inter_node_gbs: None,
        fabric: None,
    }
}

fn catalogue() -> (Vec<GpuSpec>, PriceBook) {
    let gpus = vec![
        gpu("rtx-3090", 24576, 936.0, 71.0, Some(112.5), GpuArch::Ampere),
        gpu("a100-40", 40960, 1555.0, 312.0, Some(600.0), GpuArch::Ampere),
        gpu("a100-80", 81920, 2039.0, 312.0, Some(600.0), GpuArch::Ampere),
        gpu("h100", 81559, 3350.0, 989.5, Some(900.0), GpuArch::Hopper),
        gpu("l40s", 46068, 864.0, 362.0, None, GpuArch::Ada),
    ];
    let offers = vec![
        offer("3090", "rtx-3090", 1, 1, Link::Pcie, 1750.0, 1750.0),
        offer("3090x8", "rtx-3090", 1, 8, Link::Pcie, 1700.0, 1900.0),
        offer("a100-40", "a100-40", 1, 1, Link::Pcie, 2800.0, 2800.0),
        offer("a100-40-cloud", "a100-40", 1, 8, Link::Pcie, 2500.0, 2500.0),
        offer("a100-80x8", "a100-80", 8, 8, Link::Nvlink, 25_000.0, 40_000.0),
        offer("a100-80x4", "a100-80", 4, 4, Link::Nvlink, 14_000.0, 20_000.0),
        offer("h100", "h100", 1, 1, Link::Pcie, 12_000.0, 18_000.0),
        offer("h100x8", "h100", 8, 8, Link::Nvlink, 80_000.0, 120_000.0),
        offer("l40s", "l40s", 1, 8, Link::Pcie, 4000.0, 5000.0),
        offer("l40s-single", "l40s", 1, 1, Link::Pcie, 4500.0, 4500.0),
    ];
    // clusters of the 8-GPU machines over InfiniBand, up to 1,024 machines:
    // the search's machine grid and its pruning keep these in budget
    let mut offers = offers;
    for (id, g, low, high) in
        [("a100-80x8-ib", "a100-80", 25_000.0, 40_000.0), ("h100x8-ib", "h100", 80_000.0, 120_000.0)]
    {
        let mut o = offer(id, g, 8, 8, Link::Nvlink, low, high);
        o.max_machines = 1024;
        let f = Fabric { kind: FabricKind::Infiniband, gbps_per_node: 400.0, nvlink_domain: 8 };
        o.inter_node_gbs = Some(f.node_bytes_per_s() / 1e9 / 8.0);
        o.fabric = Some(f);
        offers.push(o);
    }
    (gpus, PriceBook { offers, discounts: vec![], upgrades: vec![] })
}

fn bench(c: &mut Criterion) {
    let (gpus, book) = catalogue();
    let tm = TimeModel::default();
    let cases = [
        ("llama-2-7b", ModelSpec::llama_like("llama-2-7b", 4096, 32, 32, 32, 11008, 32000), 4u64),
        ("llama-2-70b", ModelSpec::llama_like("llama-2-70b", 8192, 80, 64, 8, 28672, 32000), 1),
        ("llama-3.1-405b", ModelSpec::llama_like("llama-3.1-405b", 16384, 126, 128, 8, 53248, 128256), 1),
    ];
    // the 131,072-token Megatron job: the search adds context-parallel layouts (CP_MIN_SEQ)
    let long = ModelSpec::llama_like("llama-3.1-70b-131k", 8192, 80, 64, 8, 28672, 128256);
    for (name, model, batch) in cases.iter().chain([&("llama-3.1-70b-131k-megatron", long, 1u64)]) {
        let long_context = name.ends_with("megatron");
        let w = Workload {
            task: Task::Train(TrainSetup {
                precision: Precision::MixedBf16,
                batch: *batch,
                grad_accum: 8,
                seq: if long_context { 131_072 } else { TrainSetup::default().seq },
                engine: if long_context { Engine::Megatron } else { Engine::default() },
                ..TrainSetup::default()
            }),
            ..Workload::default()
        };
        let allow = Allow { lora: true, qlora: true, quant: false };
        let req = PlanRequest {
            model,
            workload: &w,
            gpus: &gpus,
            book: &book,
            have: None,
            allow,
            job: Job::Tokens(1_000_000_000),
            top: 10,
            time: tm.clone(),
            launcher: None,
            output_len: None,
            one_gpu: false,
            engine_assumed: false,
            checkpointing_given: false,
        };
        let first = plan(&req).expect("plans");
        eprintln!(
            "{name}: {} candidates, {} fit, {} distinct setups estimated per plan()",
            first.stats.candidates, first.stats.fitting, first.stats.estimates
        );
        c.bench_function(&format!("plan() end to end, {name} full fine-tune"), |b| {
            b.iter(|| black_box(plan(black_box(&req)).ok()))
        });

        let mut s = Search::new(model, &w, &gpus, &book, &tm, Job::Tokens(1_000_000_000), allow);
        s.run();
        let (n, fit) = s.score_all();
        eprintln!("{name}: warm candidate loop covers {n} candidates ({fit} fit) over {} setups", s.entries.len());
        let mut g = c.benchmark_group(format!("candidate loop, memo warm, {name}"));
        g.throughput(Throughput::Elements(n));
        g.bench_function("score_all", |b| b.iter(|| black_box(s.score_all())));
        g.finish();

        // distinct setups, each estimated once on the fast path (a fresh memo per batch)
        let mut keys = Vec::new();
        for gpus in [1u64, 2, 4, 8] {
            for sharding in [Sharding::None, Sharding::Zero1, Sharding::Zero2, Sharding::Zero3] {
                for ck in [Checkpointing::None, Checkpointing::Selective, Checkpointing::Full] {
                    for (micro, accum) in [(1u64, 8u64), (2, 4), (4, 2), (8, 1)] {
                        for optimizer in [Optimizer::AdamW, Optimizer::AdamW8bit] {
                            keys.push(MemKey {
                                gpus,
                                tp: 1,
                                pp: 1,
                                virtual_stages: 1,
                                replicas: 1,
                                ep: 1,
                                dp_attention: 1,
                                sharding,
                                offload_optimizer: vramfit_core::Offload::None,
                                offload_params: vramfit_core::Offload::None,
                                dp_replicate: 1,
                                hpz: 1,
                                etp: 0,
                                train: Some(TrainKey {
                                    kind: TrainKind::Full,
                                    precision: Precision::MixedBf16,
                                    optimizer,
                                    checkpointing: ck,
                                    micro_batch: micro,
                                    grad_accum: accum,
                                }),
                                infer: None,
                                cp: 1,
                            });
                        }
                    }
                }
            }
        }
        let mut g = c.benchmark_group(format!("distinct training estimate, fast path, {name}"));
        g.throughput(Throughput::Elements(keys.len() as u64));
        g.bench_function("Search::entry", |b| {
            b.iter_batched(
                || {
                    // the prepared TrainModels are built once per search, as in plan()
                    let mut s = Search::new(model, &w, &gpus, &book, &tm, Job::Tokens(1_000_000_000), allow);
                    s.entry(keys[0].clone());
                    s.entry(keys[1].clone());
                    (s, keys.clone())
                },
                |(mut s, keys)| {
                    for k in keys {
                        black_box(s.entry(k));
                    }
                    s
                },
                BatchSize::LargeInput,
            )
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
