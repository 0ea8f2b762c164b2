//! The sweep's searches bisect: they are right only if per-GPU memory never
//! falls as the context, the concurrency or the micro-batch grows. Checked
//! here over model shapes, tasks and the searched range, and the search
//! result against a linear scan on a small range.

use proptest::prelude::*;
use vramfit_core::train::{Checkpointing, TrainKind};
use vramfit_core::{estimate, InferenceSetup, ModelSpec, Task, TrainSetup, Workload};
use vramfit_plan::sweep::{largest, Knob};

fn model(hidden_64: u64, layers: u64, kv_div: u64) -> ModelSpec {
    let hidden = hidden_64 * 64;
    let heads = hidden / 64;
    let kv = (heads / kv_div).max(1);
    let kv = if heads.is_multiple_of(kv) { kv } else { heads };
    ModelSpec::llama_like("m", hidden, layers, heads, kv, hidden * 3, 32000)
}

fn workload(train: Option<(TrainKind, bool)>, batch: u64) -> Workload {
    match train {
        None => Workload {
            task: Task::Inference(InferenceSetup { batch, concurrency: batch, ..InferenceSetup::default() }),
            ..Workload::default()
        },
        Some((kind, ckpt)) => Workload {
            task: Task::Train(TrainSetup {
                kind,
                batch,
                checkpointing: if ckpt { Checkpointing::Full } else { Checkpointing::None },
                ..TrainSetup::default()
            }),
            ..Workload::default()
        },
    }
}

fn total(spec: &ModelSpec, w: &Workload, knob: Knob, v: u64) -> u64 {
    let mut w = w.clone();
    match (&mut w.task, knob) {
        (Task::Inference(s), Knob::Context) => s.context = v,
        (Task::Inference(s), Knob::Concurrency) => s.concurrency = v,
        (Task::Train(t), Knob::Context) => t.seq = v,
        (Task::Train(t), Knob::MicroBatch) => t.batch = v,
        _ => unreachable!(),
    }
    estimate(spec, &w).unwrap().total_bytes()
}

fn task() -> impl Strategy<Value = Option<(TrainKind, bool)>> {
    prop_oneof![
        Just(None),
        (prop_oneof![Just(TrainKind::Full), Just(TrainKind::Lora), Just(TrainKind::Qlora)], any::<bool>())
            .prop_map(Some),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn memory_never_falls_as_the_knob_grows(
        h in 1u64..48, layers in 1u64..40, kv_div in 1u64..8, t in task(), batch in 1u64..8,
        a in 1u64..100_000, step in 1u64..50_000, second in any::<bool>(),
    ) {
        let spec = model(h, layers, kv_div);
        let w = workload(t, batch);
        let knob = match (&w.task, second) {
            (_, false) => Knob::Context,
            (Task::Inference(_), true) => Knob::Concurrency,
            (Task::Train(_), true) => Knob::MicroBatch,
        };
        let (a, b) = match knob {
            Knob::Context => (a.min(4096), (a + step).min(4096)),
            Knob::Concurrency => (batch + a % 512, batch + a % 512 + step % 512),
            Knob::MicroBatch => (1 + a % 64, 1 + a % 64 + step % 64),
        };
        prop_assert!(total(&spec, &w, knob, a) <= total(&spec, &w, knob, b), "{knob:?} {a} -> {b}");
    }

    #[test]
    fn bisection_matches_a_linear_scan(h in 1u64..16, layers in 1u64..8, t in task(), frac in 0.05f64..1.5) {
        let mut spec = model(h, layers, 1);
        spec.max_position_embeddings = 200;
        let w = workload(t, 1);
        let memory = (total(&spec, &w, Knob::Context, 100) as f64 * frac) as u64;
        let found = largest(&spec, &w, Knob::Context, memory).unwrap().value;
        let scan = (1..=200u64).rev().find(|&v| total(&spec, &w, Knob::Context, v) <= memory);
        prop_assert_eq!(found, scan);
    }
}
