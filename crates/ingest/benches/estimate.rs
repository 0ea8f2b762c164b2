//! How fast the estimator answers: resolving a preset (parse the embedded
//! config through the config.json parser) and computing inference ledgers.
//! `cargo bench -p vramfit-ingest --bench estimate` prints the times.

use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;
use vramfit_core::{estimate, InferenceSetup, Parallelism, Task, Workload};
use vramfit_ingest::resolve::resolve_with_env;

fn bench(c: &mut Criterion) {
    c.bench_function("resolve preset llama-2-7b", |b| b.iter(|| resolve_with_env(black_box("llama-2-7b"), &|_| None)));
    let specs: Vec<_> = ["llama-2-7b", "mixtral-8x7b", "deepseek-v3", "gpt2"]
        .iter()
        .map(|n| resolve_with_env(n, &|_| None).map(|r| r.spec))
        .collect::<Result<_, _>>()
        .expect("presets resolve");
    let w = Workload {
        task: Task::Inference(InferenceSetup { batch: 8, concurrency: 32, context: 8192, ..InferenceSetup::default() }),
        parallelism: Parallelism { gpus: 2, tp: 2, ..Parallelism::default() },
        ..Workload::default()
    };
    c.bench_function("inference ledger x4 models", |b| {
        b.iter(|| {
            for s in &specs {
                black_box(estimate(s, &w).ok());
            }
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
