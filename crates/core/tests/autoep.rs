//! DeepSpeed AutoEP (`expert_parallel.autoep_size`, DeepSpeed PR #7938) for a
//! Hugging Face MoE model, worked by hand: the routed experts whole over the EP
//! ranks, their ZeRO-1/2 partitions (gradients under ZeRO-2 too) over the
//! expert-data-parallel group of world ÷ EP ranks, the rest over all ranks
//! (docs/code-docs/source/autoep.rst "How it works"; engine.py
//! `split_params_into_different_moe_groups_for_optimizer`, stage_1_and_2.py
//! `real_dp_process_group`).

use vramfit_core::model::{Family, MoeSpec};
use vramfit_core::train::{Checkpointing, Precision, TrainKind};
use vramfit_core::workload::{validate, Engine, Field};
use vramfit_core::{estimate, Category, ModelSpec, Parallelism, Sharding, Task, TrainSetup, Workload};

/// A Mixtral-8x7B-shaped model (Mistral-7B's attention, 8 experts of width 14336, top-2).
fn mixtral() -> ModelSpec {
    let mut m = ModelSpec::llama_like("mixtral-like", 4096, 32, 32, 8, 14336, 32000);
    m.family = Family::Mixtral;
    m.moe = Some(MoeSpec {
        num_experts: 8,
        experts_per_token: 2,
        expert_intermediate: 14336,
        shared_experts: 0,
        shared_intermediate: 0,
        shared_expert_gate: false,
        dense_layers: 0,
        router_bias: false,
        router_linear_bias: false,
    });
    m
}

fn ds_step() -> TrainSetup {
    TrainSetup { kind: TrainKind::Full, precision: Precision::MixedBf16, ..TrainSetup::default() }
        .with_engine(Engine::Deepspeed)
}

fn work(t: TrainSetup, par: Parallelism) -> Workload {
    Workload { task: Task::Train(t), parallelism: par, ..Workload::default() }
}

#[test]
fn autoep_zero2_shards_expert_gradients_and_states_over_expert_data_parallel() {
    let spec = mixtral();
    // 16 GPUs, EP 8, ZeRO-2: DP 16, expert-DP 16 / 8 = 2
    let par = Parallelism { gpus: 16, ep: 8, sharding: Sharding::Zero2, ..Parallelism::default() };
    let l = estimate(&spec, &work(ds_step(), par)).unwrap();
    // experts: 32 layers × 8 × 3 × 4096 × 14336 = 45,097,156,608 params; 1/8 per GPU
    let expert = 32 * 8 * 3 * 4096 * 14336u64 / 8; // 5,637,144,576
                                                   // the rest, whole on every rank (TP 1): attention 32 × 4096 × (6144 + 4096) = 1,342,177,280,
                                                   // embeddings + head 2 × 32000 × 4096 = 262,144,000, norms 65 × 4096 = 266,240,
                                                   // routers 32 × 4096 × 8 = 1,048,576: 1,605,636,096
    let dense = 1_342_177_280 + 262_144_000 + 266_240 + 1_048_576u64;
    assert_eq!(l.bytes(Category::Weights), 2 * (expert + dense)); // 14,485,561,344
                                                                  // ZeRO-2 bf16 gradients: dense 2 × 1,605,636,096 / 16 = 200,704,512
                                                                  //                      + experts 2 × 5,637,144,576 / 2 = 5,637,144,576 → 5,837,849,088
                                                                  // (÷ 16 over all ranks would give 905,347,584: 4.9 GB short)
    assert_eq!(l.bytes(Category::Gradients), 2 * dense / 16 + 2 * expert / 2);
    assert_eq!(l.bytes(Category::Gradients), 5_837_849_088);
    // fp32 master: 4 × dense / 16 + 4 × experts / 2 = 401,409,024 + 11,274,289,152
    assert_eq!(l.bytes(Category::MasterWeights), 4 * dense / 16 + 4 * expert / 2);
    // Adam m, v: 8 × dense / 16 + 8 × experts / 2 = 802,818,048 + 22,548,578,304
    assert_eq!(l.bytes(Category::OptimizerStates), 8 * dense / 16 + 8 * expert / 2);
}

#[test]
fn autoep_keeps_the_routed_rows_and_the_fp32_combine_copy_per_moe_layer() {
    let spec = mixtral();
    // a long sequence so the backward (saved activations) is the peak
    let t = TrainSetup { seq: 8192, checkpointing: Checkpointing::None, ..ds_step() };
    let layers = |ep: u64| {
        let par = Parallelism { gpus: 8, ep, sharding: Sharding::Zero2, ..Parallelism::default() };
        let l = estimate(&spec, &work(t.clone(), par)).unwrap();
        l.entries.iter().find(|x| x.label == "saved activations, decoder layers").map(|x| x.bytes).unwrap()
    };
    // auto_ep_layer.py: the grouped GEMMs' input, top-k × hidden × 2 B = 2 × 4096 × 2 = 16,384,
    // and combine_from_routed's fp32 copy, top-k × hidden × 4 B = 32,768: 49,152 B per token per
    // MoE layer; × 32 layers × 8192 tokens = 12,884,901,888 B more than without AutoEP
    assert_eq!(layers(8) - layers(1), 49_152 * 32 * 8192);
}

#[test]
fn autoep_refuses_what_it_does_not_run() {
    let spec = mixtral();
    let check = |t: TrainSetup, par: Parallelism| validate(&spec, &work(t, par));
    let base = Parallelism { gpus: 8, ep: 8, sharding: Sharding::Zero2, ..Parallelism::default() };
    assert!(check(ds_step(), base.clone()).is_ok());
    // the Trainer with a DeepSpeed config (the default engine, no --fsdp) is AutoEP too
    assert!(check(ds_step().with_engine(Engine::Transformers), base.clone()).is_ok());
    // 8 experts do not split over EP 16; 12 GPUs are not a multiple of EP 8
    assert_eq!(check(ds_step(), Parallelism { gpus: 16, ep: 16, ..base.clone() }).unwrap_err().field(), Field::Ep);
    assert_eq!(check(ds_step(), Parallelism { gpus: 12, ..base.clone() }).unwrap_err().field(), Field::Ep);
    // ZeRO-3 names AutoEP's PRs
    let err = check(ds_step(), Parallelism { sharding: Sharding::Zero3, ..base.clone() }).unwrap_err();
    assert!(err.to_string().contains("#8060"), "{err}");
    // FSDP runs no AutoEP
    let err = check(ds_step().with_engine(Engine::Fsdp), base.clone()).unwrap_err();
    assert!(err.to_string().contains("AutoEP"), "{err}");
    // a family without a preset
    let mut dense = spec.clone();
    dense.family = Family::GptOss;
    let err = validate(&dense, &work(ds_step(), base.clone())).unwrap_err();
    assert!(err.to_string().contains("--engine megatron"), "{err}");
    // LoRA on AutoEP's experts is not modelled
    let lora = TrainSetup { kind: TrainKind::Lora, ..ds_step() };
    assert_eq!(check(lora, base).unwrap_err().field(), Field::Ep);
}
