//! Invariants of the training estimate: monotone in batch and seq; per-GPU
//! memory never rises with ZeRO stage, TP or PP degree; categories sum to
//! the total.

use proptest::prelude::*;
use vramfit_core::train::{AttentionImpl, Checkpointing, Optimizer, Precision, TrainKind};
use vramfit_core::{estimate, ModelSpec, Parallelism, Sharding, Task, TrainSetup, Workload};

fn model(idx: usize) -> ModelSpec {
    match idx {
        0 => ModelSpec::llama_like("tinyllama", 2048, 22, 32, 4, 5632, 32000),
        1 => ModelSpec::llama_like("llama-7b", 4096, 32, 32, 32, 11008, 32000),
        _ => ModelSpec::llama_like("small", 1024, 16, 16, 8, 2816, 50000),
    }
}

fn setup_strategy() -> impl Strategy<Value = TrainSetup> {
    (
        0usize..3,
        0usize..6,
        prop::sample::select(vec![
            Optimizer::AdamW,
            Optimizer::AdamW8bit,
            Optimizer::Sgd,
            Optimizer::Lion,
            Optimizer::Adafactor,
        ]),
        prop::sample::select(vec![Checkpointing::None, Checkpointing::Full, Checkpointing::Selective]),
        prop::bool::ANY,
        1u64..4,
    )
        .prop_map(|(k, p, o, c, eager, ga)| TrainSetup {
            kind: [TrainKind::Full, TrainKind::Lora, TrainKind::Qlora][k],
            precision: Precision::ALL[p],
            optimizer: o,
            checkpointing: c,
            attention: if eager { AttentionImpl::Eager } else { AttentionImpl::Sdpa },
            grad_accum: ga,
            ..TrainSetup::default()
        })
}

fn peak(spec: &ModelSpec, s: &TrainSetup, par: &Parallelism) -> u64 {
    let w = Workload { task: Task::Train(s.clone()), parallelism: par.clone(), ..Workload::default() };
    estimate(spec, &w).unwrap().total_bytes()
}

/// The model states and activations alone: communication buffers (DDP
/// buckets, DeepSpeed's fixed 5e8-element reduce bucket, FSDP's reduce-scatter
/// buffer, NCCL communicators) come with the engine, not with sharding, and a
/// fixed DeepSpeed bucket can outweigh what ZeRO-1 saves on a small model.
fn states_and_activations(spec: &ModelSpec, s: &TrainSetup, par: &Parallelism) -> u64 {
    let w = Workload { task: Task::Train(s.clone()), parallelism: par.clone(), ..Workload::default() };
    let l = estimate(spec, &w).unwrap();
    let comm = ["NCCL communicator", "DDP gradient buckets", "DeepSpeed ZeRO reduce bucket", "FSDP reduce-scatter"];
    l.entries
        .iter()
        .filter(|e| e.category.is_tensor() && !comm.iter().any(|c| e.label.starts_with(c)))
        .map(|e| e.bytes)
        .sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn monotone_in_batch_and_seq(m in 0usize..3, s in setup_strategy(), b in 1u64..8, q in 64u64..4096) {
        let spec = model(m);
        let par = Parallelism::default();
        let base = TrainSetup { batch: b, seq: q, ..s };
        let more_b = TrainSetup { batch: b + 1, ..base.clone() };
        let more_s = TrainSetup { seq: q + 64, ..base.clone() };
        let p0 = peak(&spec, &base, &par);
        prop_assert!(peak(&spec, &more_b, &par) >= p0);
        prop_assert!(peak(&spec, &more_s, &par) >= p0);
    }

    #[test]
    fn zero_stage_never_raises_per_gpu_memory(m in 0usize..3, s in setup_strategy(), dp in 2u64..16, q in 128u64..2048) {
        let spec = model(m);
        let s = TrainSetup { seq: q, ..s };
        let mut last = u64::MAX;
        for stage in 0..=3u8 {
            let par = Parallelism { gpus: dp, sharding: Sharding::from_stage(stage).unwrap(), ..Parallelism::default() };
            let p = states_and_activations(&spec, &s, &par);
            prop_assert!(p <= last, "stage {stage}: {p} > {last}");
            last = p;
        }
    }

    #[test]
    fn tp_never_raises_per_gpu_memory(m in 0usize..3, s in setup_strategy(), sp in prop::bool::ANY, q in 128u64..2048) {
        let spec = model(m);
        let s = TrainSetup { seq: q, ..s };
        let mut last = u64::MAX;
        for tp in [1u64, 2, 4, 8] {
            let par = Parallelism { gpus: tp, tp, sequence_parallel: sp && tp > 1, ..Parallelism::default() };
            let p = states_and_activations(&spec, &s, &par);
            prop_assert!(p <= last, "tp {tp}: {p} > {last}");
            last = p;
        }
    }

    #[test]
    fn pp_never_raises_per_gpu_memory(m in 0usize..3, s in setup_strategy(), q in 128u64..2048) {
        let spec = model(m);
        let s = TrainSetup { seq: q, ..s };
        let mut last = u64::MAX;
        for pp in (1..=spec.num_layers).filter(|p| spec.num_layers.is_multiple_of(*p) && *p <= 8) {
            let par = Parallelism { gpus: pp, pp, ..Parallelism::default() };
            let p = states_and_activations(&spec, &s, &par);
            prop_assert!(p <= last, "pp {pp}: {p} > {last}");
            last = p;
        }
    }

    #[test]
    fn categories_sum_to_total(m in 0usize..3, s in setup_strategy(), b in 1u64..8, q in 64u64..4096, dp in 1u64..4, stage in 0u8..4) {
        let spec = model(m);
        let s = TrainSetup { batch: b, seq: q, ..s };
        let par = Parallelism { gpus: dp, sharding: Sharding::from_stage(stage).unwrap(), ..Parallelism::default() };
        let w = Workload { task: Task::Train(s), parallelism: par, ..Workload::default() };
        let l = estimate(&spec, &w).unwrap();
        let sum: u64 = l.categories().iter().map(|(_, b)| *b).sum();
        prop_assert_eq!(sum, l.total_bytes());
        let tensors: u64 = l.entries.iter().filter(|e| e.pool == vramfit_core::Pool::Tensor).map(|e| e.bytes).sum();
        prop_assert_eq!(tensors, l.tensor_peak_bytes());
    }
}
