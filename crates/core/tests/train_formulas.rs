//! Hand-worked formula checks for the training estimate.

use vramfit_core::train::{
    LoraSetup, LoraTargets, ModelStates, Optimizer, Precision, TrainKind, TrainModel, TrainProfile,
};
use vramfit_core::{Family, MlpKind, ModelSpec, NormKind, Parallelism, Positional, Sharding, TrainSetup};

fn tinyllama() -> ModelSpec {
    ModelSpec::llama_like("tinyllama", 2048, 22, 32, 4, 5632, 32000)
}

fn gpt2() -> ModelSpec {
    let mut m = ModelSpec::llama_like("gpt2", 768, 12, 12, 12, 3072, 50257);
    m.family = Family::Gpt2;
    m.mlp = MlpKind::Plain;
    m.activation = "gelu_new".into();
    m.norm = NormKind::LayerNorm;
    m.attention = vramfit_core::Attention::FusedQkv;
    m.positional = Positional::Learned;
    m.max_position_embeddings = 2048;
    m.tied_embeddings = true;
    m.qkv_bias = true;
    m.o_bias = true;
    m.mlp_bias = true;
    m.attention_dropout = 0.1;
    m.hidden_dropout = 0.1;
    m
}

#[test]
fn tinyllama_amp_layer_bytes_per_token() {
    // amp-bf16, fp32 stream, h=2048, q_width 2048, kv_width 256, I=5632, 32 heads:
    // 2 RMSNorms × (4h fp32 input + 4 rsqrt + 4h normed + 2h bf16 cast) = 2 × 20,484 = 40,968
    // q,k,v bf16 2·(2048 + 2·256) = 5,120; out 2·2048 = 4,096; lse 4·32 = 128;
    // RoPE under autocast 6·2048 = 12,288; SwiGLU 4 × 2·5632 = 45,056 → split 66,688, of which
    // k,v (2·2·256 = 1,024) split by kv heads; total 107,656 B per token per layer
    // (measured from group C: 107,660)
    let m = TrainModel::new(&tinyllama(), &TrainSetup::default()).unwrap();
    assert_eq!(m.act.layer_rep, 40_968);
    assert_eq!(m.act.layer_split + m.act.layer_kv, 66_688);
    assert_eq!(m.act.layer_kv, 1_024);
    assert_eq!(m.act.layer_per_key, 0);
    assert_eq!(m.act.layer_input, 4 * 2048);
    assert_eq!(m.act.logits_saved, 4);
    assert_eq!(m.act.logits_grad, 8);
}

#[test]
fn gpt2_fp32_layer_bytes_per_token() {
    // 2 LayerNorms × (4h input + 8 stats + 4h output) + 2 dropout masks × h = 12,304 + 1,536
    // fused qkv 4·3·768 = 9,216; out 3,072; lse 48; o_proj copy (attention dropout) 3,072;
    // gelu_new MLP: fc 4·3072 + 3 python intermediates 3·4·3072 + act 4·3072 = 61,440
    let s = TrainSetup { precision: Precision::Fp32, ..TrainSetup::default() };
    let m = TrainModel::new(&gpt2(), &s).unwrap();
    assert_eq!(m.act.layer_rep, 13_840);
    assert_eq!(m.act.layer_split + m.act.layer_kv, 9_216 + 3_072 + 48 + 3_072 + 61_440);
}

#[test]
fn eager_attention_per_key_term() {
    // amp-bf16, eager, no attention dropout: heads × (4 B fp32 softmax + 2 B bf16 cast) = 32 × 6
    let s = TrainSetup { attention: vramfit_core::train::AttentionImpl::Eager, ..TrainSetup::default() };
    let m = TrainModel::new(&tinyllama(), &s).unwrap();
    assert_eq!(m.act.layer_per_key, 192);
}

#[test]
fn eight_bit_adamw_states() {
    // 2 states × (1 B + 4 B absmax / 256) = 2.03125 B/param:
    // 6,738,415,616 × 520 / 256 = 13,687,406,720 B
    let spec = ModelSpec::llama_like("7b", 4096, 32, 32, 32, 11008, 32000);
    let s = TrainSetup { optimizer: Optimizer::AdamW8bit, ..TrainSetup::default() };
    let st = TrainProfile::new(&spec, &s).unwrap().states(&Parallelism::default()).unwrap();
    assert_eq!(st.optimizer, 13_687_406_720);
    assert_eq!(st.step_temporaries, 0);
}

#[test]
fn lora_all_linear_parameter_count() {
    // r=8: per layer q,k,v,o 4·8·(4096+4096) = 262,144; gate,up 2·8·(4096+11008) = 241,664;
    // down 8·(11008+4096) = 120,832 → 624,640 × 32 = 19,988,480 (PEFT prints the same)
    let spec = ModelSpec::llama_like("7b", 4096, 32, 32, 32, 11008, 32000);
    let s = TrainSetup {
        kind: TrainKind::Lora,
        lora: LoraSetup { rank: 8, targets: LoraTargets::AllLinear, ..LoraSetup::default() },
        ..TrainSetup::default()
    };
    assert_eq!(TrainProfile::new(&spec, &s).unwrap().params_trainable, 19_988_480);
    let bad = TrainSetup {
        lora: LoraSetup { targets: LoraTargets::Modules(vec!["c_attn".into()]), ..LoraSetup::default() },
        ..s
    };
    let e = TrainProfile::new(&spec, &bad).unwrap_err().to_string();
    assert!(e.contains("c_attn") && e.contains("q_proj"), "{e}");
}

#[test]
fn tp_and_sp_split_activations() {
    let spec = tinyllama();
    let s = TrainSetup { batch: 1, seq: 1024, ..TrainSetup::default() };
    let m = TrainModel::new(&spec, &s).unwrap();
    let one = m.evaluate(&s, &Parallelism::default()).unwrap();
    let tp2 = m.evaluate(&s, &Parallelism { gpus: 2, tp: 2, ..Parallelism::default() }).unwrap();
    let sp2 =
        m.evaluate(&s, &Parallelism { gpus: 2, tp: 2, sequence_parallel: true, ..Parallelism::default() }).unwrap();
    // 1024 tokens × 22 layers × (40,968 replicated + 66,688 / 2) without SP; all halved with SP
    assert_eq!(one.act_layers, 1024 * 22 * (40_968 + 66_688));
    assert_eq!(tp2.act_layers, 1024 * 22 * (40_968 + 33_344));
    assert_eq!(sp2.act_layers, 1024 * 22 * (20_484 + 33_344));
    // vocab-parallel logits
    assert_eq!(tp2.logits_saved, one.logits_saved / 2);
    // 4 kv heads over TP 8: each rank keeps one kv head (1,024 × 1/4), the rest ÷ 8
    let tp8 = m.evaluate(&s, &Parallelism { gpus: 8, tp: 8, ..Parallelism::default() }).unwrap();
    assert_eq!(tp8.act_layers, 1024 * 22 * (40_968 + 65_664 / 8 + 256));
}

#[test]
fn pipeline_first_stage_holds_pp_micro_batches() {
    // pp=2, grad_accum 8: the first stage keeps 2 micro-batches × 11 layers
    let spec = tinyllama();
    let s = TrainSetup { batch: 1, seq: 1024, grad_accum: 8, ..TrainSetup::default() };
    let m = TrainModel::new(&spec, &s).unwrap();
    let b = m.evaluate(&s, &Parallelism { gpus: 2, pp: 2, ..Parallelism::default() }).unwrap();
    assert_eq!(b.in_flight, 2);
    assert_eq!(b.act_layers, 2 * 1024 * 11 * (40_968 + 66_688));
}

#[test]
fn zero3_gathers_two_layers() {
    // layer params = (1,100,048,384 − 2·65,536,000 embeddings/head − 2,048 final norm) / 22 = 44,044,288
    // gathered = 2 layers × 44,044,288 × 2 B (bf16)
    let spec = tinyllama();
    let s = TrainSetup { precision: Precision::MixedBf16, ..TrainSetup::default() };
    let p = TrainProfile::new(&spec, &s).unwrap();
    let st = p.states(&Parallelism { gpus: 8, sharding: Sharding::Zero3, ..Parallelism::default() }).unwrap();
    assert_eq!(p.layer_params, 44_044_288);
    assert_eq!(st.gathered, 2 * 44_044_288 * 2);
    assert_eq!(st.weights, (2 * 1_100_048_384u64).div_ceil(8));
}

#[test]
fn hybrid_sharding_shards_over_one_replica() {
    // HSDP (PyTorch FSDP HYBRID_SHARD, Zhao et al. 2023 §3.2.2): 32 GPUs, DP 32 as 4
    // replicas × 8 ranks; the ZeRO-3 states shard over the 8 ranks of a replica.
    // 7B llama-like, N = 6,738,415,616 params, mixed-bf16 AdamW:
    //   bf16 weights 2N / 8  = 13,476,831,232 / 8 = 1,684,603,904 B
    //   fp32 master  4N / 8  = N / 2              = 3,369,207,808 B
    //   Adam states  8N / 8  = N                  = 6,738,415,616 B
    //   bf16 grads   2N / 8                       = 1,684,603,904 B
    // against plain ZeRO-3 over all 32 ranks: ÷ 32, a quarter of each.
    let spec = ModelSpec::llama_like("7b", 4096, 32, 32, 32, 11008, 32000);
    let s = TrainSetup { precision: Precision::MixedBf16, ..TrainSetup::default() };
    let p = TrainProfile::new(&spec, &s).unwrap();
    assert_eq!(p.params_total, 6_738_415_616);
    let plain = Parallelism { gpus: 32, sharding: Sharding::Zero3, ..Parallelism::default() };
    let hsdp = Parallelism { dp_replicate: 4, ..plain.clone() };
    assert_eq!((hsdp.dp(), hsdp.shard_degree()), (32, 8));
    let h = p.states(&hsdp).unwrap();
    assert_eq!(h.weights, 1_684_603_904);
    assert_eq!(h.master, 3_369_207_808);
    assert_eq!(h.optimizer, 6_738_415_616);
    assert_eq!(h.gradients, 1_684_603_904);
    // the states of a plain ZeRO-3 run on one replica's 8 GPUs, exactly
    let eight = p.states(&Parallelism { gpus: 8, sharding: Sharding::Zero3, ..Parallelism::default() }).unwrap();
    assert_eq!(h, eight);
    let z = p.states(&plain).unwrap();
    assert_eq!(z.weights, 13_476_831_232 / 32);
    assert_eq!(z.optimizer, 6_738_415_616 / 4);
}

#[test]
fn hybrid_sharding_is_refused_where_it_cannot_run() {
    use vramfit_core::workload::validate;
    let spec = ModelSpec::llama_like("7b", 4096, 32, 32, 32, 11008, 32000);
    let s = TrainSetup::default();
    let rt = vramfit_core::RuntimeSetup::default();
    let z3 = Parallelism { gpus: 32, sharding: Sharding::Zero3, ..Parallelism::default() };
    assert!(validate::training(&spec, &s, &Parallelism { dp_replicate: 4, ..z3.clone() }, &rt).is_ok());
    // 3 does not divide DP 32; 32 leaves shard groups of 1 rank (plain DP)
    for r in [3, 32] {
        let e = validate::training(&spec, &s, &Parallelism { dp_replicate: r, ..z3.clone() }, &rt).unwrap_err();
        assert!(e.to_string().starts_with(&format!("--dp-replicate {r}: the 32 data-parallel ranks")), "{e}");
    }
    // a replicate group of ZeRO-2 is not HYBRID_SHARD's full sharding
    let z2 = Parallelism { sharding: Sharding::Zero2, dp_replicate: 4, ..z3.clone() };
    let e = validate::training(&spec, &s, &z2, &rt).unwrap_err().to_string();
    assert!(e.contains("--dp-replicate 4") && e.contains("ZeRO-2") && e.contains("--zero 3"), "{e}");
    let e = validate::training(&spec, &s, &Parallelism { dp_replicate: 0, ..z3 }, &rt).unwrap_err().to_string();
    assert_eq!(e, "--dp-replicate must be at least 1");
}

#[test]
fn hpz_adds_a_secondary_partition_over_its_group() {
    // DeepSpeed ZeRO++ hpZ (Wang et al. 2023 §3.2; `_partition_param_sec` in
    // deepspeed/runtime/zero/partition_parameters.py: a tensor of aligned numel ÷
    // zero_hpz_partition_size in the parameter's dtype): 32 GPUs, ZeRO-3 over all 32,
    // hpZ groups of 8. 7B llama-like, N = 6,738,415,616 params, mixed-bf16 AdamW:
    //   primary bf16 shard  2N / 32 = 13,476,831,232 / 32 =   421,150,976 B (as plain ZeRO-3)
    //   secondary partition 2N / 8  = 13,476,831,232 / 8  = 1,684,603,904 B
    //   optimizer states    8N / 32                       = 1,684,603,904 B (unchanged)
    let spec = ModelSpec::llama_like("7b", 4096, 32, 32, 32, 11008, 32000);
    let s = TrainSetup { precision: Precision::MixedBf16, ..TrainSetup::default() };
    let p = TrainProfile::new(&spec, &s).unwrap();
    assert_eq!(p.params_total, 6_738_415_616);
    let plain = Parallelism { gpus: 32, sharding: Sharding::Zero3, ..Parallelism::default() };
    let hpz = Parallelism { hpz: 8, ..plain.clone() };
    let (z, h) = (p.states(&plain).unwrap(), p.states(&hpz).unwrap());
    assert_eq!(h.hpz_secondary, 1_684_603_904);
    assert_eq!(z.hpz_secondary, 0);
    assert_eq!(h.weights, 421_150_976);
    // everything else is plain ZeRO-3's
    assert_eq!(ModelStates { hpz_secondary: 0, ..h }, z);
    // the whole estimate grows by the secondary partition (a persistent line, live at
    // the peak) and the hpZ group's NCCL communicator (crates/core/src/nccl.rs)
    let m = TrainModel::new(&spec, &s).unwrap();
    let (bz, bh) = (m.evaluate(&s, &plain).unwrap(), m.evaluate(&s, &hpz).unwrap());
    assert_eq!(bh.at_peak.hpz_secondary, 1_684_603_904);
    assert_eq!(bh.tensor_peak - bz.tensor_peak, 1_684_603_904);
}

#[test]
fn hpz_is_refused_where_deepspeed_does_not_run_it() {
    use vramfit_core::workload::{validate, Engine};
    let spec = ModelSpec::llama_like("7b", 4096, 32, 32, 32, 11008, 32000);
    let s = TrainSetup::default();
    let rt = vramfit_core::RuntimeSetup::default();
    let z3 = Parallelism { gpus: 32, sharding: Sharding::Zero3, hpz: 8, ..Parallelism::default() };
    assert!(validate::training(&spec, &s, &z3, &rt).is_ok());
    let refused =
        |par: &Parallelism, setup: &TrainSetup| validate::training(&spec, setup, par, &rt).unwrap_err().to_string();
    // hpZ is a ZeRO-3 option (stage3.py); FSDP and Megatron have none
    let e = refused(&Parallelism { sharding: Sharding::Zero2, ..z3.clone() }, &s);
    assert!(e.starts_with("--hpz 8: ") && e.contains("ZeRO-2") && e.contains("--zero 3"), "{e}");
    let e = refused(&Parallelism { fsdp: true, ..z3.clone() }, &s);
    assert!(e.contains("FSDP FULL_SHARD"), "{e}");
    let e = refused(&z3, &TrainSetup { engine: Engine::Torchtitan, ..s.clone() });
    assert!(e.contains("--engine torchtitan"), "{e}");
    // groups of consecutive ranks must divide the world (groups._create_zero_param_parallel_group)
    // and be fewer than all of it; 12 and 8 do not, nor 32 and 32
    for (gpus, h) in [(12, 8), (32, 32)] {
        let e = refused(&Parallelism { gpus, hpz: h, ..z3.clone() }, &s);
        assert!(e.starts_with(&format!("--hpz {h}: the {gpus} GPUs")), "{e}");
    }
    let e = refused(&Parallelism { tp: 2, ..z3.clone() }, &s);
    assert!(e.contains("tensor, pipeline"), "{e}");
    let e = refused(
        &Parallelism {
            offload_params: vramfit_core::Offload::Cpu,
            offload_optimizer: vramfit_core::Offload::Cpu,
            ..z3.clone()
        },
        &s,
    );
    assert!(e.contains("offload device"), "{e}");
    let e = refused(&Parallelism { dp_replicate: 4, ..z3.clone() }, &s);
    assert!(e.starts_with("--hpz 8:") && e.contains("--dp-replicate"), "{e}");
    assert_eq!(refused(&Parallelism { hpz: 0, ..z3 }, &s), "--hpz must be at least 1");
}
