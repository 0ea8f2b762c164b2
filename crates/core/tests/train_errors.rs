//! Bad training inputs: an error naming the field, never a panic or a wrapped number.

use vramfit_core::train::{LoraSetup, LoraTargets, TrainKind};
use vramfit_core::{estimate, CoreError, ModelSpec, Offload, Parallelism, Phase, Sharding, Task, TrainSetup, Workload};

fn spec() -> ModelSpec {
    ModelSpec::llama_like("tiny", 256, 4, 4, 4, 688, 32000)
}

fn run(s: TrainSetup, p: Parallelism) -> Result<vramfit_core::Ledger, CoreError> {
    estimate(&spec(), &Workload { task: Task::Train(s), parallelism: p, ..Workload::default() })
}

/// The id of the field a workload error names (`CoreError::Workload`).
fn field(r: Result<vramfit_core::Ledger, CoreError>) -> String {
    match r {
        Err(CoreError::Workload(e)) => e.field().id().to_string(),
        other => panic!("expected a workload error, got {other:?}"),
    }
}

#[test]
fn sizes_and_layouts_are_checked() {
    let d = TrainSetup::default;
    let p = Parallelism::default;
    assert_eq!(field(run(TrainSetup { batch: 0, ..d() }, p())), "batch");
    assert_eq!(field(run(TrainSetup { seq: u64::MAX, ..d() }, p())), "seq");
    assert_eq!(field(run(TrainSetup { grad_accum: 0, ..d() }, p())), "grad-accum");
    assert_eq!(field(run(d(), Parallelism { gpus: 3, tp: 3, ..p() })), "tp");
    assert_eq!(field(run(d(), Parallelism { gpus: 8, pp: 8, ..p() })), "pp");
    assert_eq!(field(run(d(), Parallelism { gpus: 3, tp: 2, ..p() })), "gpus");
    assert_eq!(field(run(d(), Parallelism { sequence_parallel: true, ..p() })), "sp");
    assert_eq!(field(run(d(), Parallelism { gpus: 2, offload_optimizer: Offload::Cpu, ..p() })), "offload");
    assert_eq!(
        field(run(d(), Parallelism { gpus: 2, sharding: Sharding::Zero2, offload_params: Offload::Cpu, ..p() })),
        "offload"
    );
    let lora = |l: LoraSetup| TrainSetup { kind: TrainKind::Lora, lora: l, ..d() };
    assert_eq!(field(run(lora(LoraSetup { rank: 0, ..LoraSetup::default() }), p())), "lora-rank");
    assert_eq!(field(run(lora(LoraSetup { dropout: 1.0, ..LoraSetup::default() }), p())), "lora-dropout");
    assert_eq!(
        field(run(lora(LoraSetup { targets: LoraTargets::Modules(vec![]), ..LoraSetup::default() }), p())),
        "lora-targets"
    );
}

#[test]
fn huge_but_accepted_sizes_do_not_overflow() {
    // 2^20 sequences × 2^24 tokens: an error or a number, never a panic
    let s = TrainSetup { batch: 1 << 20, seq: 1 << 24, ..TrainSetup::default() };
    let big = ModelSpec::llama_like("big", 1 << 16, 1 << 10, 1 << 9, 1 << 9, 1 << 18, 1 << 20);
    let r = estimate(&big, &Workload { task: Task::Train(s), ..Workload::default() });
    assert!(matches!(r, Err(CoreError::Overflow { .. })) || r.is_ok(), "{r:?}");
}

#[test]
fn steady_state_keeps_states_through_backward() {
    // batch 4 × seq 2048 peaks in backward; in steady state the AdamW states are live there,
    // in a first-step view they are not yet created.
    let s = TrainSetup { batch: 4, seq: 2048, ..TrainSetup::default() };
    let steady = run(s.clone(), Parallelism::default()).unwrap();
    let first = run(TrainSetup { first_step: true, ..s }, Parallelism::default()).unwrap();
    assert_eq!(steady.peak_phase, Phase::Backward);
    let states = steady.bytes(vramfit_core::Category::OptimizerStates);
    assert!(states > 0);
    assert_eq!(first.bytes(vramfit_core::Category::OptimizerStates), 0);
    assert_eq!(steady.tensor_peak_bytes() - first.tensor_peak_bytes(), states);
}

#[test]
fn quantized_checkpoint_cannot_be_fully_fine_tuned() {
    let mut m = spec();
    m.quantization = Some(vramfit_core::QuantSpec::int(4, 128, vramfit_core::DType::F16));
    let r = estimate(&m, &Workload { task: Task::Train(TrainSetup::default()), ..Workload::default() });
    assert!(matches!(r, Err(CoreError::Unsupported(_))), "{r:?}");
}
