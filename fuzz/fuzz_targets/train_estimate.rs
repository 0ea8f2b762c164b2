//! Training estimate over arbitrary sizes and layouts: a ledger or an error, never a panic
//! or a wrapped number (categories always sum to the total).
#![no_main]
use libfuzzer_sys::fuzz_target;
use vramfit_core::train::{Checkpointing, Optimizer, Precision, TrainKind};
use vramfit_core::{estimate, ModelSpec, Parallelism, Sharding, Task, TrainSetup, Workload};

fuzz_target!(|d: [u64; 8]| {
    let spec =
        ModelSpec::llama_like("fuzz", 1 + d[0] % 65536, 1 + d[1] % 256, 32, 8, 1 + d[2] % 100_000, 1 + d[3] % 300_000);
    let setup = TrainSetup {
        kind: [TrainKind::Full, TrainKind::Lora, TrainKind::Qlora][(d[4] % 3) as usize],
        precision: Precision::ALL[(d[4] / 3 % 6) as usize],
        optimizer: Optimizer::ALL[(d[4] / 18 % 7) as usize],
        checkpointing: [Checkpointing::None, Checkpointing::Full, Checkpointing::Selective][(d[4] / 126 % 3) as usize],
        batch: d[5],
        seq: d[6],
        grad_accum: 1 + d[7] % 64,
        ..TrainSetup::default()
    };
    let par = Parallelism {
        gpus: 1 + d[7] % 4096,
        tp: 1 << (d[7] / 4096 % 4),
        pp: 1 + d[7] / 65536 % 8,
        sharding: Sharding::from_stage((d[7] / 1_000_000 % 4) as u8).unwrap_or_default(),
        ..Parallelism::default()
    };
    let w = Workload { task: Task::Train(setup), parallelism: par, ..Workload::default() };
    if let Ok(l) = estimate(&spec, &w) {
        let sum: u64 = l.categories().iter().map(|(_, b)| *b).sum();
        assert_eq!(sum, l.total_bytes());
    }
});
