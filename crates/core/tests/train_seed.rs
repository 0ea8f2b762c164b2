//! The seed's training figures, reproduced with the arithmetic shown.

use vramfit_core::train::{Checkpointing, LoraSetup, LoraTargets, Precision, TrainKind, TrainModel, TrainProfile};
use vramfit_core::{estimate, Category, Parallelism, Phase, Sharding, Task, TrainSetup, Workload, GIB};

fn llama2_7b() -> vramfit_core::ModelSpec {
    vramfit_core::ModelSpec::llama_like("llama-2-7b", 4096, 32, 32, 32, 11008, 32000)
}

fn llama2_13b() -> vramfit_core::ModelSpec {
    vramfit_core::ModelSpec::llama_like("llama-2-13b", 5120, 40, 40, 40, 13824, 32000)
}

const P7: u64 = 6_738_415_616;

fn mixed() -> TrainSetup {
    TrainSetup { precision: Precision::MixedBf16, ..TrainSetup::default() }
}

#[test]
fn full_finetune_7b_is_16_bytes_per_param() {
    // 2 (bf16 weights) + 2 (bf16 grads) + 4 (fp32 master) + 8 (fp32 exp_avg, exp_avg_sq)
    // = 16 B/param × 6,738,415,616 = 107,814,649,856 B (100.4 GiB)
    let prof = TrainProfile::new(&llama2_7b(), &mixed()).unwrap();
    let s = prof.states(&Parallelism::default()).unwrap();
    assert_eq!(s.weights, 2 * P7);
    assert_eq!(s.gradients, 2 * P7);
    assert_eq!(s.master, 4 * P7);
    assert_eq!(s.optimizer, 8 * P7);
    assert_eq!(s.total().unwrap(), 16 * P7);
    assert_eq!(s.total().unwrap(), 107_814_649_856);
    // so a single 80 GB card cannot hold the model states alone, before any activation
    assert!(s.total().unwrap() > 80_000_000_000);
    assert!(s.total().unwrap() > 80 * GIB);
}

#[test]
fn zero2_on_8_gpus_is_about_25_gb_per_gpu() {
    // ZeRO-2 shards gradients, master and states over 8 ranks; bf16 weights stay whole:
    // 2P + (2P + 4P + 8P) / 8 = 2P + 1.75P = 3.75P = 25,269,058,560 B ≈ 25.3 GB
    let prof = TrainProfile::new(&llama2_7b(), &mixed()).unwrap();
    let par = Parallelism { gpus: 8, sharding: Sharding::Zero2, ..Parallelism::default() };
    let s = prof.states(&par).unwrap();
    assert_eq!(s.weights, 2 * P7);
    assert_eq!(s.gradients, 2 * P7 / 8);
    assert_eq!(s.master + s.optimizer, 12 * P7 / 8);
    assert_eq!(s.total().unwrap(), 25_269_058_560);
    assert!((s.total().unwrap() as f64 / 1e9 - 25.0).abs() < 0.5);
    // and it fits a 40 GB card with room for activations
    assert!(s.total().unwrap() < 40_000_000_000);
}

#[test]
fn data_parallel_alone_saves_nothing_and_says_so() {
    let w1 = Workload { task: Task::Train(mixed()), ..Workload::default() };
    let mut w8 = w1.clone();
    w8.parallelism.gpus = 8;
    let l1 = estimate(&llama2_7b(), &w1).unwrap();
    let l8 = estimate(&llama2_7b(), &w8).unwrap();
    // the same states and activations; DDP adds its gradient buckets (a second
    // bf16 copy of every gradient: 6,738,415,616 × 2 B) and one NCCL communicator
    let buckets = l8.entries.iter().find(|e| e.label == "DDP gradient buckets").unwrap().bytes;
    assert_eq!(buckets, 2 * 6_738_415_616);
    assert_eq!(l1.tensor_peak_bytes() + buckets, l8.tensor_peak_bytes());
    let nccl = l8.entries.iter().find(|e| e.label.starts_with("NCCL communicator")).unwrap().bytes;
    // 8 ranks on a link not known (vramfit_core::nccl): 32 channels × 24 MiB + 256 MiB
    assert_eq!(nccl, 1024 * (1 << 20));
    assert!(l8.notes.iter().any(|n| n.contains("saves no memory per GPU")), "{:?}", l8.notes);
}

#[test]
fn checkpointing_saves_most_activations_for_one_extra_forward() {
    // amp-bf16, batch 4, seq 2048: without checkpointing each layer keeps
    // norms + q/k/v + attention out + 4 MLP tensors per token; with it only the
    // layer input (4096 × 4 B per token per layer).
    let spec = llama2_7b();
    let base = TrainSetup { batch: 4, seq: 2048, ..TrainSetup::default() };
    let ck = TrainSetup { checkpointing: Checkpointing::Full, ..base.clone() };
    let m = TrainModel::new(&spec, &base).unwrap();
    let par = Parallelism::default();
    let none = m.evaluate(&base, &par).unwrap();
    let full = m.evaluate(&ck, &par).unwrap();
    // layer input kept: 8192 tokens × 32 layers × 16,384 B = 4,294,967,296 B
    assert_eq!(full.act_layers, 8192 * 32 * 4096 * 4);
    let saved = 1.0 - full.act_layers as f64 / none.act_layers as f64;
    println!(
        "activations: none {} B, full checkpointing {} B: {:.1}% saved",
        none.act_layers,
        full.act_layers,
        saved * 100.0
    );
    assert!(saved > 0.9, "checkpointing should save most activation memory, saved {saved}");
    let w = Workload { task: Task::Train(ck), ..Workload::default() };
    let l = estimate(&spec, &w).unwrap();
    assert!(l.notes.iter().any(|n| n.contains("one extra forward")), "{:?}", l.notes);
}

#[test]
fn lora_7b_fits_a_24_gb_card() {
    // Frozen bf16 base 13,476,831,232 B + fp32 adapters r=16 on q,v:
    // 32 layers × 2 × 16 × (4096 + 4096) = 8,388,608 params × (4 + 4 grad + 8 Adam) B.
    let setup = TrainSetup {
        kind: TrainKind::Lora,
        batch: 1,
        seq: 2048,
        checkpointing: Checkpointing::Full,
        lora: LoraSetup {
            rank: 16,
            targets: LoraTargets::Modules(vec!["q_proj".into(), "v_proj".into()]),
            ..LoraSetup::default()
        },
        ..TrainSetup::default()
    };
    let w = Workload { task: Task::Train(setup), ..Workload::default() };
    let l = estimate(&llama2_7b(), &w).unwrap();
    assert_eq!(l.params_trainable, 8_388_608);
    println!("7B LoRA: tensors {} B, total with runtime + 20% margin {} B", l.tensor_peak_bytes(), l.total_bytes());
    assert!(l.total_bytes() < 24 * GIB, "{} B does not fit 24 GiB", l.total_bytes());
}

#[test]
fn qlora_13b_base_weights_are_about_7_gb() {
    // NF4 with double quantization on the decoder linears: n/2 + n/64 (8-bit absmax)
    // + n/64/256 × 4 B; 40 layers × (4·5120² + 3·5120·13824) = 12,687,769,600 params
    // → 6,343,884,800 + 198,246,400 + 3,097,600 = 6,545,228,800 B;
    // embeddings + lm_head stay bf16: 2 × 32000 × 5120 × 2 = 655,360,000 B;
    // norms (81 × 5120 × 2 B) = 829,440 B. Total 7,201,418,240 B ≈ 7.2 GB.
    let setup = TrainSetup { kind: TrainKind::Qlora, ..TrainSetup::default() };
    let w = Workload { task: Task::Train(setup), ..Workload::default() };
    let l = estimate(&llama2_13b(), &w).unwrap();
    let base: u64 = l
        .entries
        .iter()
        .filter(|e| e.category == Category::Weights && e.label.starts_with("frozen"))
        .map(|e| e.bytes)
        .sum();
    assert_eq!(base, 6_545_228_800 + 655_360_000 + 829_440);
    assert!((base as f64 / 1e9 - 7.0).abs() < 0.5);
}

#[test]
fn small_seq_full_finetune_peaks_at_the_optimizer_step() {
    // amp-bf16 AdamW foreach, batch 1, seq 256: 4 (fp32 weights) + 4 (grads) + 8 (states)
    // + 4 (foreach sqrt buffer) = 20 B/param at the step, more than the backward.
    let setup = TrainSetup { batch: 1, seq: 256, ..TrainSetup::default() };
    let w = Workload { task: Task::Train(setup), ..Workload::default() };
    let l = estimate(&llama2_7b(), &w).unwrap();
    assert_eq!(l.peak_phase, Phase::OptimizerStep);
    assert_eq!(l.tensor_peak_bytes(), 20 * P7);
}

#[test]
fn offload_reports_host_memory() {
    let par = Parallelism {
        gpus: 8,
        sharding: Sharding::Zero3,
        offload_optimizer: vramfit_core::Offload::Cpu,
        offload_params: vramfit_core::Offload::Cpu,
        ..Parallelism::default()
    };
    let w = Workload { task: Task::Train(mixed()), parallelism: par, ..Workload::default() };
    let l = estimate(&llama2_7b(), &w).unwrap();
    // per rank on the host: (8 states + 4 master + 4 fp32 grads) × P / 8 + 2P / 8 (bf16 params)
    let per_rank = (16 * P7).div_ceil(8) + (2 * P7).div_ceil(8);
    assert_eq!(l.cpu_bytes, 8 * per_rank);
    assert_eq!(l.bytes(Category::OptimizerStates), 0);
    assert_eq!(l.bytes(Category::MasterWeights), 0);
    assert!(l.notes.iter().any(|n| n.contains("host RAM")));
}

#[test]
fn mixed_precision_fp32_grad_copy_at_the_step() {
    // mixed-bf16 AdamW foreach, batch 1, seq 128: model states stay 16 B/param
    // (2 weights + 2 grads + 4 master + 8 states); the step adds the foreach sqrt buffer
    // (4 B/param) AND the fp32 copy of the gradient partition (4 B/param):
    // 24 × 6,738,415,616 = 161,721,974,784 B at the step.
    let setup = TrainSetup { batch: 1, seq: 128, ..mixed() };
    let w = Workload { task: Task::Train(setup.clone()), ..Workload::default() };
    let l = estimate(&llama2_7b(), &w).unwrap();
    assert_eq!(l.peak_phase, Phase::OptimizerStep);
    assert_eq!(l.bytes(Category::Temporaries), 8 * P7);
    assert_eq!(l.tensor_peak_bytes(), 24 * P7);
    let copy = l.entries.iter().find(|e| e.label.starts_with("fp32 gradient copy")).expect("its own ledger line");
    assert_eq!(copy.bytes, 4 * P7);
    let prof = TrainProfile::new(&llama2_7b(), &setup).unwrap();
    let s = prof.states(&Parallelism::default()).unwrap();
    assert_eq!(s.total().unwrap(), 16 * P7);
    assert_eq!((s.step_temporaries, s.fp32_grad_copy), (8 * P7, 4 * P7));
    // ZeRO-1 over 8 ranks: the copy is of the rank's partition
    let par = Parallelism { gpus: 8, sharding: Sharding::Zero1, ..Parallelism::default() };
    let s8 = prof.states(&par).unwrap();
    assert_eq!(s8.fp32_grad_copy, (4 * P7).div_ceil(8));
    // batch 4 × seq 2048: the step (24 B/param = 161,721,974,784 B) now beats backward
    let big = TrainSetup { batch: 4, seq: 2048, ..mixed() };
    let b = TrainModel::new(&llama2_7b(), &big).unwrap().evaluate(&big, &Parallelism::default()).unwrap();
    assert_eq!(b.step_peak, 24 * P7);
    assert!(b.step_peak > b.backward_peak, "{b:?}");
    assert_eq!(b.peak_phase, Phase::OptimizerStep);
    // amp-bf16 (group C's setup) has no master and no copy: 20 B/param as before
    let amp = TrainSetup { batch: 1, seq: 128, ..TrainSetup::default() };
    let s = TrainProfile::new(&llama2_7b(), &amp).unwrap().states(&Parallelism::default()).unwrap();
    assert_eq!((s.step_temporaries, s.fp32_grad_copy), (4 * P7, 0));
}

#[test]
fn zero_2_3_with_pipeline_parallelism_is_refused() {
    for (z, ok) in [(Sharding::Zero1, true), (Sharding::Zero2, false), (Sharding::Zero3, false)] {
        let par = Parallelism { gpus: 8, pp: 2, sharding: z, ..Parallelism::default() };
        let w = Workload { task: Task::Train(mixed()), parallelism: par, ..Workload::default() };
        let r = estimate(&llama2_7b(), &w);
        assert_eq!(r.is_ok(), ok, "{z:?}: {r:?}");
        if let Err(e) = r {
            let m = e.to_string();
            assert!(m.contains("--zero") && m.contains("--pp"), "{m}");
        }
    }
}

/// DeepSpeed ZeRO-Offload keeps an fp32 master partition, the fp32 gradient
/// partition and fp32 CPU-Adam states on the host in every precision:
/// `estimate_zero2_model_states_mem_needs` (deepspeed/runtime/zero/stage_1_and_2.py)
/// counts 16 B per parameter with `cpu_offload=True` on one GPU (max(4 × 1, 16),
/// before its 1.5 buffer factor). ZeRO-1/2 since v0.17.0 (PR #7309) also pins a
/// copy of the partition in the weights' dtype (`param_buffer_of_bit16_for_cpu_offload_groups`).
/// Issue 22: amp-bf16 counted 12 B (no master), 8-bit Adam counted 1-byte states.
#[test]
fn deepspeed_offload_host_ram_matches_its_estimator_in_every_precision() {
    use vramfit_core::train::Optimizer;
    let par = Parallelism {
        gpus: 2,
        sharding: Sharding::Zero2,
        offload_optimizer: vramfit_core::Offload::Cpu,
        ..Parallelism::default()
    };
    // (precision, bytes of the 16-bit/fp32 staging copy): 16 + 4 for fp32 weights, 16 + 2 for 16-bit
    for (precision, staging) in [
        (Precision::AmpBf16, 4),
        (Precision::Fp32, 4),
        (Precision::MixedBf16, 2),
        (Precision::MixedFp16, 2),
        (Precision::Bf16, 2),
    ] {
        for optimizer in [Optimizer::AdamW, Optimizer::AdamW8bit] {
            let setup = TrainSetup { precision, optimizer, ..TrainSetup::default() };
            let s = TrainProfile::new(&llama2_7b(), &setup).unwrap().states(&par).unwrap();
            // per rank: (4 master + 4 grads + 8 Adam) × P / 2, + staging × P / 2
            let per_rank =
                (4 * P7).div_ceil(2) + (4 * P7).div_ceil(2) + (8 * P7).div_ceil(2) + (staging * P7).div_ceil(2);
            assert_eq!(s.cpu_bytes, per_rank, "{precision:?} {optimizer:?}");
            assert!(s.cpu_bytes >= (16 * P7).div_ceil(2), "never below DeepSpeed's own 16 B/param");
            assert_eq!((s.optimizer, s.master), (0, 0), "nothing of it on the GPU");
        }
    }
    // the 8-bit optimizer: a note says DeepSpeed runs fp32 CPU-Adam instead
    let setup = TrainSetup { optimizer: Optimizer::AdamW8bit, ..mixed() };
    let l = estimate(&llama2_7b(), &Workload { task: Task::Train(setup), parallelism: par, ..Workload::default() })
        .unwrap();
    assert!(l.notes.iter().any(|n| n.contains("fp32 CPU-Adam")), "{:?}", l.notes);
}
