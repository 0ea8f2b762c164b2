//! Megatron-LM's model states (`--engine megatron`), worked by hand against
//! its distributed-optimizer table (Megatron-LM
//! docs/user-guide/features/dist_optimizer.md, main of August 2026): bf16
//! parameters with fp32 main grads hold 18 B/param without the distributed
//! optimizer and 6 + 12/d with it (2 bf16 params + 4 fp32 grad buffer, never
//! sharded; 4 fp32 master + 8 Adam m, v sharded over the d data-parallel ranks).

use vramfit_core::model::MoeSpec;
use vramfit_core::train::{Precision, TrainKind};
use vramfit_core::workload::{validate, Engine, Field};
use vramfit_core::{estimate, Category, ModelSpec, Parallelism, Sharding, Task, TrainSetup, Workload};

/// Mistral-7B's shape (h 4096, 32 layers, 32/8 heads, FFN 14336, vocab 32000).
fn mistral() -> ModelSpec {
    ModelSpec::llama_like("mistral-7b", 4096, 32, 32, 8, 14336, 32000)
}

fn megatron_step() -> TrainSetup {
    TrainSetup { kind: TrainKind::Full, precision: Precision::MixedBf16, ..TrainSetup::default() }
        .with_engine(Engine::Megatron)
}

fn ledger(spec: &ModelSpec, par: Parallelism) -> vramfit_core::Ledger {
    estimate(spec, &Workload { task: Task::Train(megatron_step()), parallelism: par, ..Workload::default() }).unwrap()
}

/// weights, fp32 master, gradients, optimizer states on one GPU.
fn states(l: &vramfit_core::Ledger) -> [u64; 4] {
    [
        l.bytes(Category::Weights),
        l.bytes(Category::MasterWeights),
        l.bytes(Category::Gradients),
        l.bytes(Category::OptimizerStates),
    ]
}

#[test]
fn megatron_bf16_is_18_bytes_per_param_and_6_plus_12_over_d_with_the_distributed_optimizer() {
    let spec = mistral();
    let dp8 = Parallelism { gpus: 8, ..Parallelism::default() };
    let plain = states(&ledger(&spec, dp8.clone()));
    // P from the bf16 weights line: 2 B/param
    let p = plain[0] / 2;
    // Mistral-7B: 32 × (4096 × (4096 + 2 × 1024 + 4096) + 3 × 4096 × 14336 + 2 × 4096)
    // + 2 × 32000 × 4096 + 4096 = 7,241,732,096
    assert_eq!(p, 7_241_732_096);
    // 2 (bf16) + 4 (fp32 master) + 4 (fp32 main grads in the grad buffer, live all run) + 8 (m, v)
    assert_eq!(plain, [2 * p, 4 * p, 4 * p, 8 * p]);
    assert_eq!(plain.iter().sum::<u64>(), 18 * p); // 130,351,177,728 B
                                                   // --use-distributed-optimizer over d = 8: 6 + 12/8 = 7.5 B/param
    let sharded = states(&ledger(&spec, Parallelism { sharding: Sharding::Zero1, ..dp8 }));
    assert_eq!(sharded, [2 * p, 4 * p / 8, 4 * p, 8 * p / 8]);
    assert_eq!(sharded.iter().sum::<u64>(), 6 * p + 12 * p / 8); // 54,312,990,720 B
                                                                 // no step temporaries (fused Adam) and no fp32 copy of the fp32 main grads
    let l = ledger(&spec, Parallelism { gpus: 8, sharding: Sharding::Zero1, ..Parallelism::default() });
    assert_eq!(l.bytes(Category::Temporaries), 0);
}

/// A Mixtral-like MoE: 8 experts of width 14336, top-2, on Mistral's shape.
fn moe() -> ModelSpec {
    let mut m = mistral();
    m.name = "moe-8x7b".into();
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

#[test]
fn expert_parallel_splits_whole_experts_and_shards_their_states_over_expert_data_parallel() {
    let spec = moe();
    // 16 GPUs, TP 2, EP 8, distributed optimizer: DP 8, expert-DP 16 / 8 = 2
    let par = Parallelism {
        gpus: 16,
        tp: 2,
        ep: 8,
        sequence_parallel: true,
        sharding: Sharding::Zero1,
        ..Parallelism::default()
    };
    let [w, master, grads, opt] = states(&ledger(&spec, par));
    // experts: 32 layers × 8 × 3 × 4096 × 14336 = 45,097,156,608 params, 1/8 per GPU (EP, not TP)
    let experts = 32 * 8 * 3 * 4096 * 14336u64;
    let expert_rank = experts / 8; // 5,637,144,576
                                   // the rest (Mistral less its MLPs): 7,241,732,096 − 32 × 3 × 4096 × 14336 = 1,604,587,520,
                                   // of which attention (32 × 4096 × 6144 + 32 × 4096 × 4096 = 1,342,177,280) and the embeddings and
                                   // head (2 × 32000 × 4096 = 262,144,000) split by TP 2, norms (65 × 4096 = 266,240) and routers
                                   // (32 × 4096 × 8 = 1,048,576) whole
    let dense_rank = 1_342_177_280 / 2 + 262_144_000 / 2 + 266_240 + 1_048_576;
    let t = expert_rank + dense_rank;
    assert_eq!(w, 2 * t);
    assert_eq!(grads, 4 * t);
    // master and m, v: the dense share over DP 8, the experts' over expert-DP 2
    // (each share rounded up: DpSplit::shard)
    let shard = |bytes_per: u64| {
        let (v, t) = (u128::from(bytes_per * t), u128::from(t));
        let part = |n: u64, ranks: u128| (v * u128::from(n)).div_ceil(t).div_ceil(ranks);
        u64::try_from(part(dense_rank, 8) + part(expert_rank, 2)).unwrap()
    };
    assert_eq!(master, shard(4));
    assert_eq!(opt, shard(8));
    assert!(master < 4 * expert_rank / 2 + 4 * dense_rank / 8 + 2);
}

#[test]
fn megatron_refuses_what_it_does_not_run_naming_the_flag() {
    let spec = moe();
    let check = |t: TrainSetup, par: Parallelism| {
        validate(&spec, &Workload { task: Task::Train(t), parallelism: par, ..Workload::default() })
    };
    let base = Parallelism { gpus: 16, tp: 2, sequence_parallel: true, ..Parallelism::default() };
    // 8 experts are not a multiple of EP 16… (and 3 does not divide the 16 ranks)
    assert_eq!(check(megatron_step(), Parallelism { ep: 16, ..base.clone() }).unwrap_err().field(), Field::Ep);
    // MoE with TP needs sequence parallelism (MoELayer.forward)
    let no_sp = Parallelism { ep: 8, sequence_parallel: false, ..base.clone() };
    assert_eq!(check(megatron_step(), no_sp).unwrap_err().field(), Field::SequenceParallel);
    // ZeRO-2/3 are not Megatron's distributed optimizer
    let z3 = Parallelism { sharding: Sharding::Zero3, ..base.clone() };
    assert_eq!(check(megatron_step(), z3).unwrap_err().field(), Field::Sharding);
    // autocast over fp32 weights is not a Megatron mode; LoRA is not Megatron's
    let amp = TrainSetup { precision: Precision::AmpBf16, ..megatron_step() };
    assert_eq!(check(amp, base.clone()).unwrap_err().field(), Field::Precision);
    let lora = TrainSetup { kind: TrainKind::Lora, ..megatron_step() };
    assert_eq!(check(lora, base.clone()).unwrap_err().field(), Field::Task);
    // EP under another framework names Megatron
    let ds = megatron_step().with_engine(Engine::Deepspeed);
    let err = check(ds, Parallelism { ep: 8, ..base.clone() }).unwrap_err();
    assert!(err.to_string().contains("--engine megatron"), "{err}");
    assert!(check(megatron_step(), Parallelism { ep: 8, ..base }).is_ok());
}

/// Megatron-Core's optimizer CPU offload (`--optimizer-cpu-offload` with the
/// distributed optimizer and `--use-precision-aware-optimizer`,
/// megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py): the GPU keeps
/// the bf16 parameters and the fp32 main-grad buffer (6 B/param); each rank's
/// shard lives on the host as a pinned fp32 copy, pinned fp32 gradients and
/// AdamW's two fp32 states (16 B per shard element), and no fp32 main params
/// stay on the GPU (distrib_optimizer.py: "main params are held by" the
/// optimizer under the precision-aware path).
#[test]
fn megatron_optimizer_offload_keeps_6_bytes_per_param_on_the_gpu_and_16_over_d_on_the_host() {
    let spec = mistral();
    let p = 7_241_732_096u64;
    let par = Parallelism {
        gpus: 8,
        sharding: Sharding::Zero1,
        offload_optimizer: vramfit_core::Offload::Cpu,
        ..Parallelism::default()
    };
    let l = ledger(&spec, par);
    assert_eq!(states(&l), [2 * p, 0, 4 * p, 0]);
    // the host: 16 B × P / 8 per rank, all 8 ranks counted = 16 × P = 115,867,713,536 B
    assert_eq!(l.cpu_bytes, 16 * p);
    // NVMe and parameter offload are DeepSpeed's, not Megatron's
    let nvme = Parallelism {
        gpus: 8,
        sharding: Sharding::Zero1,
        offload_optimizer: vramfit_core::Offload::Nvme,
        ..Parallelism::default()
    };
    let w = Workload { task: Task::Train(megatron_step()), parallelism: nvme, ..Workload::default() };
    assert_eq!(validate(&spec, &w).unwrap_err().field(), Field::Offload);
}

/// Expert-tensor parallelism (Megatron `--expert-tensor-parallel-size`):
/// `MoELayer` keeps `num_moe_experts / ep` local experts
/// (megatron/core/transformer/moe/moe_layer.py), `TEGroupedMLP` splits each
/// over the expert-TP group like a TP linear (experts.py, `TEGroupedLinear`
/// dividing its sizes by the group's size), and the distributed optimizer
/// shards the experts' states over the expert-data-parallel group, GPUs /
/// (PP × EP × ETP) (parallel_state.py `initialize_model_parallel`).
#[test]
fn expert_tensor_parallel_splits_each_expert_and_shrinks_the_expert_data_parallel_group() {
    let spec = moe();
    // 16 GPUs, TP 2, EP 4, ETP 2: DP 8, expert-DP 16 / (4 × 2) = 2
    let par = Parallelism {
        gpus: 16,
        tp: 2,
        ep: 4,
        etp: 2,
        sequence_parallel: true,
        sharding: Sharding::Zero1,
        ..Parallelism::default()
    };
    assert_eq!(par.expert_dp(), 2);
    let [w, master, grads, opt] = states(&ledger(&spec, par.clone()));
    // experts: 32 layers × 8 × 3 × 4096 × 14336 = 45,097,156,608 params; ÷ (EP 4 × ETP 2) = 5,637,144,576
    let expert_rank = 32 * 8 * 3 * 4096 * 14336u64 / 8;
    // the dense rest as in the EP-only test: attention, embeddings and head ÷ TP 2, norms and routers whole
    let dense_rank = 1_342_177_280 / 2 + 262_144_000 / 2 + 266_240 + 1_048_576;
    let t = expert_rank + dense_rank;
    // bf16 weights 2 B, fp32 main grads 4 B: same bytes as EP 8 × ETP 1 (8 ranks share the experts either way)
    assert_eq!(w, 2 * t);
    assert_eq!(grads, 4 * t);
    let shard = |bytes_per: u64| {
        let (v, t) = (u128::from(bytes_per * t), u128::from(t));
        let part = |n: u64, ranks: u128| (v * u128::from(n)).div_ceil(t).div_ceil(ranks);
        u64::try_from(part(dense_rank, 8) + part(expert_rank, 2)).unwrap()
    };
    assert_eq!(master, shard(4));
    assert_eq!(opt, shard(8));
    // ETP 1 on the same EP 4: each rank holds 2 whole experts (twice the expert bytes),
    // their states over expert-DP 16 / 4 = 4: the sharded master and Adam bytes stay the same
    let etp1 = Parallelism { etp: 1, ..par.clone() };
    let [w1, master1, grads1, _] = states(&ledger(&spec, etp1));
    assert_eq!(w1, 2 * (2 * expert_rank + dense_rank));
    assert_eq!(grads1, 4 * (2 * expert_rank + dense_rank));
    assert!(master1.abs_diff(master) <= 4, "{master1} vs {master}");
    // EP 1 with ETP = TP (unset: Megatron's default) is the plain TP split of the experts
    let default = Parallelism { ep: 1, etp: 0, ..par.clone() };
    let explicit = Parallelism { ep: 1, etp: 2, ..par };
    assert_eq!(states(&ledger(&spec, default)), states(&ledger(&spec, explicit)));
}

/// The dispatched tokens under ETP: `dispatch_postprocess` all-gathers the
/// all-to-all's output over the expert-TP group
/// (megatron/core/transformer/moe/token_dispatcher.py), and the grouped fc1
/// keeps the gathered input: ETP × the rank's own rows of top-k × hidden.
#[test]
fn expert_tensor_parallel_gathers_the_dispatched_tokens() {
    let spec = moe();
    let setup = TrainSetup {
        batch: 1,
        seq: 4096,
        checkpointing: vramfit_core::workload::Checkpointing::Selective,
        ..megatron_step()
    };
    let run = |etp| {
        let par = Parallelism {
            gpus: 16,
            tp: 2,
            ep: 4,
            etp,
            sequence_parallel: true,
            sharding: Sharding::Zero1,
            ..Parallelism::default()
        };
        estimate(&spec, &Workload { task: Task::Train(setup.clone()), parallelism: par, ..Workload::default() })
            .unwrap()
            .bytes(Category::Activations)
    };
    // ETP 2 − ETP 1: one more copy of each rank's dispatched rows per layer:
    // 32 layers × (4096 tokens / TP 2) × top-2 × 4096 hidden × 2 B (bf16) = 536,870,912 B
    assert_eq!(run(2) - run(1), 32 * (4096 / 2) * 2 * 4096 * 2);
}

#[test]
fn megatron_refuses_an_expert_grid_it_cannot_lay_out_naming_etp() {
    let spec = moe();
    let check = |par: Parallelism| {
        validate(&spec, &Workload { task: Task::Train(megatron_step()), parallelism: par, ..Workload::default() })
    };
    let base = Parallelism { gpus: 16, tp: 2, sequence_parallel: true, ..Parallelism::default() };
    // ETP 4 × EP 8 = 32 does not divide the 16 ranks of the stage
    assert_eq!(check(Parallelism { ep: 8, etp: 4, ..base.clone() }).unwrap_err().field(), Field::Etp);
    // ETP 3 splits neither the 14336 expert columns nor the 16 ranks of the stage
    assert_eq!(check(Parallelism { etp: 3, ..base.clone() }).unwrap_err().field(), Field::Etp);
    // a dense model has no experts to split
    let dense = validate(
        &mistral(),
        &Workload {
            task: Task::Train(megatron_step()),
            parallelism: Parallelism { etp: 2, ..base.clone() },
            ..Workload::default()
        },
    );
    assert_eq!(dense.unwrap_err().field(), Field::Etp);
    // another engine: Megatron's flag
    let ds = TrainSetup { kind: TrainKind::Full, precision: Precision::MixedBf16, ..TrainSetup::default() };
    let err = validate(
        &spec,
        &Workload { task: Task::Train(ds), parallelism: Parallelism { etp: 2, ..base.clone() }, ..Workload::default() },
    );
    assert_eq!(err.unwrap_err().field(), Field::Etp);
    assert!(check(Parallelism { ep: 4, etp: 2, ..base.clone() }).is_ok());
    assert!(check(Parallelism { ep: 8, etp: 2, gpus: 16, tp: 2, ..base }).is_ok());
}
