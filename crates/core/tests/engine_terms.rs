//! The ledger terms of issue 10, each worked by hand: QLoRA's overheads
//! (bitsandbytes saved inputs, kbit preparation's fp32 casts and fp32 stream,
//! paged optimizer states), the loss paths, adapter dtype and extra LoRA
//! targets (lm_head, embeddings, PEFT regular expressions), communication
//! buffers (DDP, DeepSpeed, FSDP, NCCL), optimizer in backward, activation
//! offload, the allocator, the CUDA-reported capacity and a vLLM start-up.

use vramfit_core::infer::{serving_profile, ServingSetup};
use vramfit_core::nccl::{Arch, Link, NcclHardware};
use vramfit_core::runtime::{cuda_capacity, nccl_communicator_bytes, RuntimeSetup, DRIVER_RESERVED};
use vramfit_core::train::comm::deepspeed_bucket_bytes;
use vramfit_core::train::{
    Checkpointing, CommSetup, LoraSetup, LoraTargets, LossPath, Optimizer, Precision, TrainKind, TrainModel,
};
use vramfit_core::workload::{Engine, VLLM_NON_TORCH};
use vramfit_core::{
    estimate, Category, DType, InferenceSetup, ModelSpec, Parallelism, Pool, Sharding, Task, TrainSetup, Workload,
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Mistral-7B's shape (h 4096, 32 layers, 32/8 heads, FFN 14336, vocab 32000).
fn mistral() -> ModelSpec {
    ModelSpec::llama_like("mistral-7b", 4096, 32, 32, 8, 14336, 32000)
}

fn train(spec: &ModelSpec, t: TrainSetup, par: Parallelism) -> vramfit_core::Ledger {
    estimate(spec, &Workload { task: Task::Train(t), parallelism: par, ..Workload::default() }).unwrap()
}

fn line(l: &vramfit_core::Ledger, label_start: &str) -> u64 {
    l.entries.iter().filter(|e| e.label.starts_with(label_start)).map(|e| e.bytes).sum()
}

fn qlora(engine: Engine) -> TrainSetup {
    TrainSetup {
        kind: TrainKind::Qlora,
        precision: Precision::AmpBf16,
        batch: 4,
        seq: 4096,
        checkpointing: Checkpointing::Full,
        lora: LoraSetup {
            rank: 16,
            dropout: 0.0,
            targets: LoraTargets::Modules(vec!["q_proj".into()]),
            ..LoraSetup::default()
        },
        ..TrainSetup::default()
    }
    .with_engine(engine)
}

#[test]
fn kbit_preparation_casts_to_fp32_and_makes_the_stream_fp32() {
    let spec = mistral();
    let with = train(&spec, qlora(Engine::Transformers), Parallelism::default());
    let without = train(&spec, TrainSetup { kbit_prep: false, ..qlora(Engine::Transformers) }, Parallelism::default());
    // embeddings + head (2 × 32000 × 4096) + 65 norms × 4096, each 4 B − 2 B
    let casts = (2 * 32000 * 4096 + 65 * 4096) * 2;
    assert_eq!(line(&with, "fp32 casts"), casts);
    assert_eq!(line(&without, "fp32 casts"), 0);
    // checkpointed layer inputs: 32 layers × 16,384 tokens × 4096 × 4 B instead of × 2 B
    let act = |l: &vramfit_core::Ledger| line(l, "saved activations, decoder layers");
    assert_eq!(act(&with), 32 * 16_384 * 4096 * 4);
    assert_eq!(act(&without), 32 * 16_384 * 4096 * 2);
}

#[test]
fn bitsandbytes_keeps_each_quantized_linears_input_torchao_does_not() {
    let spec = mistral();
    let no_ckpt = |e| TrainSetup { checkpointing: Checkpointing::None, kbit_prep: false, ..qlora(e) };
    let bnb = TrainModel::new(&spec, &no_ckpt(Engine::Transformers)).unwrap().act;
    let tao = TrainModel::new(&spec, &no_ckpt(Engine::Torchtune)).unwrap().act;
    // per token per layer, bf16: the attention input, the MLP input (norm outputs, h each),
    // o_proj's input (h) and down_proj's input (14336)
    let extra = 2 * (4096 + 4096 + 4096 + 14336);
    let total = |a: &vramfit_core::train::ActProfile| a.layer_rep + a.layer_split + a.layer_kv;
    // torchtune keeps bf16 adapters (the adapter's own input copy is 2 B too)
    assert_eq!(total(&bnb) - total(&tao), extra);
}

#[test]
fn paged_optimizer_states_are_on_the_card_but_not_in_the_allocator() {
    let spec = ModelSpec::llama_like("small", 1024, 8, 16, 16, 2816, 32000);
    let t = |o| TrainSetup { optimizer: o, precision: Precision::Bf16, batch: 1, seq: 512, ..TrainSetup::default() };
    let paged = train(&spec, t(Optimizer::PagedAdamW8bit), Parallelism::default());
    let plain = train(&spec, t(Optimizer::AdamW8bit), Parallelism::default());
    let states = paged.bytes(Category::OptimizerStates);
    assert_eq!(states, plain.bytes(Category::OptimizerStates));
    assert!(paged.entries.iter().any(|e| e.category == Category::OptimizerStates && e.pool == Pool::Outside));
    assert_eq!(paged.tensor_peak_bytes() + states, plain.tensor_peak_bytes());
    // 32-bit paged AdamW: fp32 states whatever the parameter dtype
    let p32 = train(&spec, t(Optimizer::PagedAdamW), Parallelism::default());
    let params = p32.params_trainable;
    assert_eq!(p32.bytes(Category::OptimizerStates), params * 8);
}

#[test]
fn loss_paths_per_token_and_vocab_entry() {
    // 2 × 2048 tokens × 32000 vocab, bf16 compute, no checkpointing: the logits lines at the start of backward
    let spec = ModelSpec::llama_like("small", 1024, 4, 16, 16, 2816, 32000);
    let n = 4096 * 32000u64;
    let logits = |loss| {
        let t = TrainSetup { precision: Precision::Bf16, batch: 2, seq: 2048, loss, ..TrainSetup::default() };
        let l = train(&spec, t, Parallelism::default());
        (line(&l, "log-softmax"), line(&l, "gradients of log-softmax"))
    };
    assert_eq!(logits(LossPath::Fp32), (4 * n, 8 * n));
    assert_eq!(logits(LossPath::Compute), (2 * n, 4 * n));
    // torchtune: every chunk's fp32 log-softmax is saved; one chunk of 512 tokens of fp32 + bf16 gradients
    assert_eq!(logits(LossPath::Chunked { chunks: 8 }), (4 * n, 512 * 32000 * 10));
    // LitGPT: the bf16 logit chunks and their bf16 log-softmax; one 128-token chunk of bf16 gradients
    assert_eq!(logits(LossPath::ChunkedTokens { tokens: 128 }), (4 * n, 128 * 32000 * 4));
    // Liger: the head input's gradient (tokens × hidden × 2 B); chunk rows = next_pow2(4096 / ceil(32000/1024)) = 128
    assert_eq!(logits(LossPath::Fused), (4096 * 1024 * 2, 128 * 32000 * 6));
}

#[test]
fn adapters_on_the_head_and_the_embeddings_and_adapter_dtype() {
    let spec = mistral();
    let lora = |targets: Vec<&str>, fp32: bool| TrainSetup {
        kind: TrainKind::Lora,
        lora: LoraSetup {
            rank: 8,
            targets: LoraTargets::Modules(targets.into_iter().map(String::from).collect()),
            adapter_fp32: fp32,
            ..LoraSetup::default()
        },
        ..TrainSetup::default()
    };
    let m = TrainModel::new(&spec, &lora(vec!["lm_head", "embed_tokens"], true)).unwrap();
    // r × (d_in + d_out) each: head 8 × (4096 + 32000), embedding 8 × (32000 + 4096)
    assert_eq!(m.profile.params_trainable, 2 * 8 * (4096 + 32000));
    assert_eq!(m.profile.adapter_bytes, 4);
    let bf16 = TrainModel::new(&spec, &lora(vec!["q_proj"], false)).unwrap();
    assert_eq!(bf16.profile.adapter_bytes, 2);
    // AdamW keeps its states in the parameter dtype: bf16 adapters, 2 + 2 B
    assert_eq!(bf16.profile.state_bytes, 2);
}

#[test]
fn peft_regular_expressions_match_full_module_names() {
    let spec = mistral();
    let regex = |re: &str| TrainSetup {
        kind: TrainKind::Lora,
        lora: LoraSetup { rank: 8, targets: LoraTargets::Regex(re.into()), ..LoraSetup::default() },
        ..TrainSetup::default()
    };
    let qv = TrainModel::new(&spec, &regex(r".*\.(q_proj|v_proj)")).unwrap();
    // q: 8 × (4096 + 4096), v: 8 × (4096 + 1024), 32 layers
    assert_eq!(qv.profile.params_trainable, 32 * 8 * (8192 + 5120));
    assert_eq!(qv.profile.lora_modules, ["q_proj", "v_proj"]);
    // re.fullmatch: layers 0-9 only
    let some = TrainModel::new(&spec, &regex(r"model\.layers\.\d\.self_attn\.q_proj")).unwrap();
    assert_eq!(some.profile.params_trainable, 10 * 8 * 8192);
    // a bare leaf name does not fullmatch a full name
    let e = TrainModel::new(&spec, &regex("q_proj")).unwrap_err().to_string();
    assert!(e.contains("matches no linear module") && e.contains("model.layers.0.self_attn.q_proj"), "{e}");
    let e = TrainModel::new(&spec, &regex(r"(?<=x)q")).unwrap_err().to_string();
    assert!(e.contains("look-around"), "{e}");
}

#[test]
fn communication_buffers_per_engine() {
    let spec = ModelSpec::llama_like("small", 1024, 8, 16, 16, 2816, 32000);
    let t = TrainSetup { precision: Precision::MixedBf16, batch: 1, seq: 512, ..TrainSetup::default() };
    let par = |sharding, fsdp| Parallelism { gpus: 4, sharding, fsdp, ..Parallelism::default() };
    // DDP: a second bf16 copy of every gradient, and one NCCL communicator of 4
    // ranks; the link not known: 32 channels × (ring 6 + 6 MiB + tree 6 + 6 MiB on
    // a middle rank) + 256 MiB residual = 1024 MiB (vramfit_core::nccl)
    let ddp = train(&spec, t.clone(), par(Sharding::None, false));
    let params = ddp.params_trainable;
    assert_eq!(line(&ddp, "DDP gradient buckets"), params * 2);
    assert_eq!(line(&ddp, "NCCL communicator"), 1024 * MIB);
    // DeepSpeed ZeRO-2: reduce_bucket_size × 2 B, twice with overlap_comm
    let comm = CommSetup { reduce_bucket: 200_000_000, overlap_comm: true, ..CommSetup::default() };
    let ds = train(&spec, TrainSetup { comm, ..t.clone() }, par(Sharding::Zero2, false));
    assert_eq!(line(&ds, "DeepSpeed ZeRO reduce bucket"), 800_000_000);
    assert_eq!(deepspeed_bucket_bytes(&CommSetup::default(), 2).unwrap(), 1_000_000_000);
    // the two figures of DeepSpeed issue #1302: (5e8 − 1e7) × 2 B × 2 and 5e8 × 2 B
    let overlap = |n, o| {
        deepspeed_bucket_bytes(&CommSetup { reduce_bucket: n, overlap_comm: o, ..CommSetup::default() }, 2).unwrap()
    };
    assert_eq!(overlap(500_000_000, true) - overlap(10_000_000, true), 1_960_000_000);
    assert_eq!(overlap(500_000_000, true) - overlap(500_000_000, false), 1_000_000_000);
    // FSDP: one layer's unsharded gradient in backward; accelerate's no_sync accumulation keeps all of them
    let f = TrainSetup { engine: Engine::Fsdp, precision: Precision::Bf16, ..t.clone() };
    let fsdp = train(&spec, f.clone(), par(Sharding::Zero3, true));
    // the largest wrapped unit is the root: embeddings + head (2 × 32000 × 1024) + final norm
    let root = 2 * 32000 * 1024 + 1024;
    assert!(TrainModel::new(&spec, &f).unwrap().profile.layer_params < root);
    assert_eq!(line(&fsdp, "FSDP reduce-scatter"), root * 2);
    let accum = train(&spec, TrainSetup { grad_accum: 4, ..f }, par(Sharding::Zero3, true));
    assert_eq!(accum.bytes(Category::Gradients), params * 2, "unsharded, not ÷ 4");
    // 2 ranks, link not known: 32 × (6 + 6) MiB + 256 MiB
    assert_eq!(nccl_communicator_bytes(2), 640 * MIB);
    assert_eq!(nccl_communicator_bytes(1), 0);
}

#[test]
fn fsdp1_keeps_the_root_unsharded_and_fabric_accumulates_unsharded() {
    let spec = ModelSpec::llama_like("small", 1024, 8, 16, 16, 2816, 32000);
    let t = TrainSetup { precision: Precision::Bf16, batch: 1, seq: 512, ..TrainSetup::default() };
    let par = Parallelism { gpus: 4, sharding: Sharding::Zero3, fsdp: true, ..Parallelism::default() };
    // the root unit: embeddings + head (2 × 32000 × 1024) + final norm (1024), bf16, unsharded:
    // 131,074,048 B in its own all-gather buffer (_full_param_padded), while the rank's quarter
    // (the _local_shard, in the weights line) stays allocated beside it
    let root: u64 = (2 * 32000 * 1024 + 1024) * 2;
    assert_eq!(root, 131_074_048);
    let fsdp1 = train(&spec, t.clone().with_engine(Engine::Fsdp), par.clone());
    assert_eq!(line(&fsdp1, "FSDP root unit"), root);
    let fabric = train(&spec, t.clone().with_engine(Engine::Litgpt), par.clone());
    assert_eq!(line(&fabric, "FSDP root unit"), root);
    // FSDP2 (torchtitan) is not FSDP1: no such line; nor without full sharding
    assert_eq!(line(&train(&spec, t.clone().with_engine(Engine::Torchtitan), par.clone()), "FSDP root unit"), 0);
    let zero2 = Parallelism { sharding: Sharding::Zero2, ..par.clone() };
    assert_eq!(line(&train(&spec, t.clone().with_engine(Engine::Fsdp), zero2), "FSDP root unit"), 0);
    // at the end of backward the root's flat gradient is built from its views' gradients:
    // one more root-sized bf16 gradient (131,074,048 B), larger than the logits buffers at the
    // start of backward (64 tokens × 32000 × 4 B × 3 = 24,576,000 B on transformers' fp32 path,
    // less with LitGPT's chunks), which are freed by then
    let short = TrainSetup { seq: 64, ..t.clone() };
    for engine in [Engine::Fsdp, Engine::Litgpt] {
        let l = train(&spec, short.clone().with_engine(engine), par.clone());
        assert_eq!(line(&l, "FSDP root flat gradient"), root, "{engine:?}");
        assert_eq!(line(&l, "log-softmax"), 0, "{engine:?}: the logits buffers are freed by then");
    }
    assert_eq!(line(&train(&spec, short.with_engine(Engine::Torchtitan), par.clone()), "FSDP root flat gradient"), 0);
    // a long sequence: the logits buffers at the start of backward are the larger transient
    let long = train(&spec, TrainSetup { seq: 2048, ..t.clone() }.with_engine(Engine::Fsdp), par.clone());
    assert_eq!(line(&long, "FSDP root flat gradient"), 0);
    assert!(line(&long, "log-softmax") > 0);
    // LitGPT accumulates under Fabric's no_backward_sync: every gradient unsharded (bf16, not ÷ 4)
    let accum = train(&spec, TrainSetup { grad_accum: 4, ..t.clone() }.with_engine(Engine::Litgpt), par.clone());
    assert_eq!(accum.bytes(Category::Gradients), accum.params_trainable * 2);
    // without accumulation there is nothing to keep between micro-batches
    let one = train(&spec, t.with_engine(Engine::Litgpt), par);
    assert!(one.bytes(Category::Gradients) < one.params_trainable * 2);
}

#[test]
fn torchtitan_computes_the_loss_vocabulary_parallel_under_tp() {
    let spec = ModelSpec::llama_like("small", 1024, 8, 16, 16, 2816, 32000);
    let t = TrainSetup { precision: Precision::Bf16, batch: 1, seq: 4096, ..TrainSetup::default() };
    let tp2 = Parallelism { gpus: 2, tp: 2, ..Parallelism::default() };
    // 4096 rows × 16000 vocabulary entries per TP rank: the saved fp32 log-softmax (4 B) …
    let titan = train(&spec, t.clone().with_engine(Engine::Torchtitan), tp2.clone());
    assert_eq!(titan.peak_phase, vramfit_core::Phase::Backward);
    assert_eq!(line(&titan, "log-softmax of the logits"), 4096 * 16000 * 4);
    // … and loss_parallel's fused backward: zeros_like(x), exp(x) and their sum, 3 × 4 B
    assert_eq!(line(&titan, "gradients of log-softmax"), 4096 * 16000 * 12);
    // the plain log_softmax backward (transformers' fp32 path, same TP): 2 × 4 B
    let hf = train(&spec, t.clone().with_engine(Engine::Transformers), tp2);
    assert_eq!(line(&hf, "gradients of log-softmax"), 4096 * 16000 * 8);
    // without TP torchtitan's loss is the plain one
    let one = train(&spec, t.with_engine(Engine::Torchtitan), Parallelism::default());
    assert_eq!(line(&one, "gradients of log-softmax"), 4096 * 32000 * 8);
}

#[test]
fn optimizer_in_backward_and_activation_offload() {
    let spec = ModelSpec::llama_like("small", 1024, 8, 16, 16, 2816, 32000);
    let t = TrainSetup {
        precision: Precision::Bf16,
        batch: 2,
        seq: 1024,
        checkpointing: Checkpointing::Full,
        ..TrainSetup::default()
    };
    let m = TrainModel::new(&spec, &t).unwrap();
    let b = m.evaluate(&TrainSetup { optimizer_in_backward: true, ..t.clone() }, &Parallelism::default()).unwrap();
    // one tensor's gradient (the largest, the 32000 × 1024 embedding) at a time, bf16
    assert_eq!(b.at_peak.gradients, 32000 * 1024 * 2);
    assert_eq!(b.at_peak.step_temporaries, 0);
    assert_eq!(b.peak_phase, vramfit_core::Phase::Backward);
    // offloaded activations: two layers' inputs stay (of 8): 2 × 2048 tokens × 1024 × 2 B
    let off = m.evaluate(&TrainSetup { activation_offload: true, ..t.clone() }, &Parallelism::default()).unwrap();
    assert_eq!(off.act_layers, 2 * 2048 * 1024 * 2);
    let on = m.evaluate(&t, &Parallelism::default()).unwrap();
    assert_eq!(on.act_layers, 8 * 2048 * 1024 * 2);
}

#[test]
fn allocator_and_cuda_capacity() {
    assert_eq!(DRIVER_RESERVED, 450 * MIB);
    // an H100 80GB: 81,559 MiB in nvidia-smi, 81,109 MiB = 79.21 GiB to CUDA
    assert_eq!(cuda_capacity(81_559 * MIB), 81_109 * MIB);
    let rt = RuntimeSetup::default();
    assert_eq!(rt.allocator_overhead(1_000_000_000).unwrap(), 290_000_000);
    assert_eq!(rt.margin, 0.0);
}

#[test]
fn a_vllm_start_up_by_hand() {
    // Llama-3-8B bf16, TP 1, H100 at 0.9 of 79.22 GiB (vLLM PR #10511's log: the V0 engine, row 0.2)
    let spec = ModelSpec::llama_like("llama-3-8b", 4096, 32, 32, 8, 14336, 128256);
    let s = InferenceSetup {
        engine: Engine::Vllm,
        engine_version: Some("0.6".parse().unwrap()),
        context: 8192,
        kv_dtype: DType::BF16,
        ..InferenceSetup::default()
    };
    let serving = ServingSetup {
        gpu_util: 0.9,
        cuda_capacity_bytes: (79.22 * GIB as f64) as u64,
        max_num_batched_tokens: 8192,
        max_num_seqs: 256,
    };
    let rt = RuntimeSetup::default();
    let p = serving_profile(&spec, &s, &Parallelism::default(), &rt, &serving).unwrap();
    assert_eq!(p.weights_bytes, 8_030_261_248 * 2);
    // forward: 8192 × (2 × 4096 + 3 × 14336) × 2 B; sampler: 256 × 128256 × 38 B + 8192 × 4096 × 2 B
    assert_eq!(p.forward_bytes, 8192 * (8192 + 43008) * 2);
    assert_eq!(p.sampler_bytes, 256 * 128256 * 38 + 8192 * 4096 * 2);
    assert_eq!(p.activation_peak_bytes, p.sampler_bytes);
    assert_eq!(p.non_torch_bytes, VLLM_NON_TORCH);
    assert_eq!(p.kv_pool_bytes, p.budget_bytes - p.weights_bytes - p.sampler_bytes - VLLM_NON_TORCH);
    assert_eq!(p.kv_blocks, p.kv_pool_bytes / (131_072 * 16));
    // TP 2 on H100 NVLink: three NCCL communicators of 2 ranks (world, TP group,
    // PyNccl), each 32 channels × (6 + 6) MiB + 256 MiB = 640 MiB (vLLM 0.6 turns
    // cuMem off: no NVLS), and the custom all-reduce buffers (17 MiB)
    let h100 = NcclHardware { link: Some(Link::Nvlink), arch: Some(Arch::Hopper), pcie_gen: Some(5) };
    let rt_h100 = RuntimeSetup { nccl: h100, ..RuntimeSetup::default() };
    let p2 = serving_profile(&spec, &s, &Parallelism { gpus: 2, tp: 2, ..Parallelism::default() }, &rt_h100, &serving)
        .unwrap();
    assert_eq!(p2.non_torch_bytes, VLLM_NON_TORCH + 3 * 640 * MIB + 17 * MIB);
    // PR #10511 logs non_torch_memory 1.79 GiB at TP 1 and 3.58 GiB at TP 2: the
    // 1.79 GiB (1833 MiB) TP 2 adds is not under the 3 × 640 + 17 = 1937 MiB counted
    assert!(3 * 640 * MIB + 17 * MIB >= (1.79 * GIB as f64) as u64);
    // the 0.20 row (FlashInfer's sampler, vllm-project/vllm#40376) at 1024 sequences:
    // sampler 1024 × 128256 × 14 B + 8192 × 4096 × 2 B = 1,905,786,880 B, where sorting
    // (38 B) would hold 1024 × 128256 × 38 + 67,108,864 = 5,057,806,336 B
    let latest = InferenceSetup { engine_version: Some("0.20".parse().unwrap()), ..s.clone() };
    let wide = ServingSetup { max_num_seqs: 1024, ..serving.clone() };
    let p3 = serving_profile(&spec, &latest, &Parallelism::default(), &rt, &wide).unwrap();
    assert_eq!(p3.sampler_bytes, 1_905_786_880);
    let p0 = serving_profile(&spec, &s, &Parallelism::default(), &rt, &wide).unwrap();
    assert_eq!(p0.sampler_bytes, 5_057_806_336);
    assert_eq!(p3.kv_pool_bytes - p0.kv_pool_bytes, 5_057_806_336 - 1_905_786_880);
}

#[test]
fn a_vllm_ledger_is_its_start_up_not_a_generate_prefill() {
    // Llama-3-8B bf16 at 1024 tokens: transformers' generate computes the last row of logits
    // and its fp32 copy (128256 × (2 + 4) B; 1024 rows before v4.45); vLLM's profiling run samples 256 rows (256 × 128256
    // × 38 B) beside 2048 tokens' hidden states (max_num_batched_tokens = max(1024, 2048))
    // and logs 1.79 GiB of non-torch memory: sizing it as generate under-stated it by GiBs
    let spec = ModelSpec::llama_like("llama-3-8b", 4096, 32, 32, 8, 14336, 128256);
    let at = |engine: Engine| {
        // PR #10511's V0 engine (row 0.2) for vLLM
        let engine_version = (engine == Engine::Vllm).then(|| "0.6".parse().unwrap());
        let s = InferenceSetup {
            engine,
            engine_version,
            context: 1024,
            kv_dtype: DType::BF16,
            ..InferenceSetup::default()
        };
        estimate(&spec, &Workload { task: Task::Inference(s), ..Workload::default() }).unwrap()
    };
    let (vllm, hf) = (at(Engine::Vllm), at(Engine::Transformers));
    let sampler = 256 * 128256 * 38 + 2048 * 4096 * 2;
    let forward = 2048 * (2 * 4096 + 3 * 14336) * 2;
    assert!(sampler > forward);
    assert_eq!(vllm.bytes(Category::Activations), sampler);
    assert_eq!(line(&vllm, "vllm start-up profiling run (sampler)"), sampler);
    assert_eq!(vllm.bytes(Category::Logits), 0, "the sampled rows' logits are inside the sampler");
    assert_eq!(hf.bytes(Category::Logits), 128256 * (2 + 4));
    // non-torch: the engine's logged figure, of which the runtime's context + workspaces are a part
    let rt = RuntimeSetup::default();
    assert_eq!(line(&vllm, "vllm non-torch memory"), VLLM_NON_TORCH - rt.cuda_context_bytes - rt.workspace_bytes);
    assert_eq!(vllm.bytes(Category::Runtime), VLLM_NON_TORCH);
    // same weights and KV cache; the whole is larger, never smaller
    assert_eq!(vllm.bytes(Category::Weights), hf.bytes(Category::Weights));
    assert_eq!(vllm.bytes(Category::KvCache), hf.bytes(Category::KvCache));
    assert!(vllm.total_bytes() > hf.total_bytes() + GIB, "{} vs {}", vllm.total_bytes(), hf.total_bytes());
    // SGLang: the same profiling shape at its 8192-token chunk, where the sampler
    // (1.31 GB) still tops the forward (0.84 GB); no logged non-torch figure
    let sg = at(Engine::Sglang);
    let (sg_sampler, sg_forward) = (256 * 128256 * 38 + 8192 * 4096 * 2, 8192 * (2 * 4096 + 3 * 14336) * 2);
    assert!(sg_sampler > sg_forward);
    assert_eq!(line(&sg, "sglang start-up profiling run (sampler)"), sg_sampler);
    assert_eq!(sg.bytes(Category::Activations), sg_sampler);
    assert_eq!(line(&sg, "sglang non-torch"), 0);
}

#[test]
fn bitsandbytes_quantizes_while_loading() {
    // Llama-2-7B nf4 with the head quantized (LitGPT): the load moment holds two
    // bf16 copies of the 32000 × 4096 head beyond the quantized weights
    let spec = ModelSpec::llama_like("llama-2-7b", 4096, 32, 32, 32, 11008, 32000);
    let s = InferenceSetup {
        weight_dtype: DType::I4,
        quant: Some(vramfit_core::QuantSpec::nf4(false, DType::BF16)),
        quantize_lm_head: true,
        context: 56,
        block_size: 1,
        kv_dtype: DType::BF16,
        ..InferenceSetup::default()
    };
    let l = estimate(&spec, &Workload { task: Task::Inference(s), ..Workload::default() }).unwrap();
    let prefill = l.bytes(Category::KvCache) + l.bytes(Category::Logits) + l.bytes(Category::Activations);
    assert_eq!(line(&l, "bitsandbytes quantize-on-load"), 2 * 32000 * 4096 * 2 - prefill);
}

#[test]
fn tensor_parallel_inference_counts_its_communicators() {
    // Mistral-7B shape at TP 4: vLLM holds the world group, the TP device group
    // and the TP PyNccl communicator (1024 MiB each at 4 ranks on a link not
    // known: 32 channels × 24 MiB + 256 MiB, vramfit_core::nccl) and its custom
    // all-reduce buffers (8 MiB + 1 MiB + 8 MiB); transformers' TP generate
    // holds the default process group only; TP 1 holds none.
    let spec = mistral();
    let at = |engine: Engine, tp: u64| {
        let s = InferenceSetup { engine, ..InferenceSetup::default() };
        let par = Parallelism { gpus: tp, tp, ..Parallelism::default() };
        estimate(&spec, &Workload { task: Task::Inference(s), parallelism: par, ..Workload::default() }).unwrap()
    };
    let vllm = at(Engine::Vllm, 4);
    assert_eq!(line(&vllm, "NCCL communicator"), 3 * 1024 * MIB);
    assert_eq!(line(&vllm, "vLLM custom all-reduce"), 17 * MIB);
    let hf = at(Engine::Transformers, 4);
    assert_eq!(line(&hf, "NCCL communicator"), 1024 * MIB);
    assert_eq!(line(&hf, "vLLM custom all-reduce"), 0);
    let hf2 = at(Engine::Transformers, 2);
    assert_eq!(line(&hf2, "NCCL communicator"), 640 * MIB);
    let one = at(Engine::Vllm, 1);
    assert_eq!(line(&one, "NCCL communicator") + line(&one, "vLLM custom all-reduce"), 0);
    // they are runtime, outside the tensor peak (beside the CUDA graph pool,
    // whose per-token activations shrink with TP: tests/cuda_graphs.rs)
    let runtime = |l: &vramfit_core::Ledger| l.bytes(Category::Runtime) - line(l, "vllm CUDA graph pool");
    assert_eq!(runtime(&vllm) - runtime(&one), 3 * 1024 * MIB + 17 * MIB);
}

#[test]
fn zero3_gathers_a_quantized_base_as_stored() {
    let spec = mistral();
    let par = Parallelism { gpus: 2, sharding: Sharding::Zero3, fsdp: true, ..Parallelism::default() };
    let t = TrainSetup { kbit_prep: false, ..qlora(Engine::Fsdp) };
    let l = train(&spec, t, par);
    // one Mistral layer: 4096 × (4096 + 1024 + 1024 + 4096) + 3 × 4096 × 14336 = 218,103,808
    // linear weights in NF4 with double quantization: 0.5 B each + one uint8 absmax per
    // 64-block + one fp32 absmax per 256 of those: 109,051,904 + 3,407,872 + 53,248 =
    // 112,513,024 B; its two RMSNorm weights stay bf16: 2 × 4096 × 2 = 16,384 B.
    let layer = 218_103_808 / 2 + 218_103_808 / 64 + 218_103_808 / 64 / 256 * 4 + 2 * 4096 * 2;
    assert_eq!(layer, 112_529_408);
    // the running and the prefetched layer, as stored: not 2 × 218,103,808 × 2 B dequantized
    assert_eq!(line(&l, "ZeRO-3 / FSDP gathered"), 2 * layer);
}

#[test]
fn transformers_4_48_loss_peaks_at_the_end_of_forward() {
    let spec = ModelSpec::llama_like("small", 1024, 8, 16, 16, 2816, 32000);
    let t = TrainSetup {
        kind: TrainKind::Lora,
        precision: Precision::Bf16,
        batch: 1,
        seq: 2048,
        checkpointing: Checkpointing::Full,
        ..TrainSetup::default()
    };
    let old = train(&spec, TrainSetup { loss: LossPath::Fp32ShiftCopy, ..t.clone() }, Parallelism::default());
    let new = train(&spec, TrainSetup { loss: LossPath::Fp32, ..t }, Parallelism::default());
    // 2048 tokens × 32000: inside cross_entropy the bf16 logits (2 B), their fp32 upcast (4 B)
    // and its contiguous shifted copy (4 B) = 655,360,000 B beside the fp32 log-softmax
    // (262,144,000 B); no logits gradient exists yet
    assert_eq!(old.peak_phase, vramfit_core::Phase::Forward);
    assert_eq!(line(&old, "loss forward"), 2048 * 32000 * 10);
    assert_eq!(line(&old, "log-softmax"), 2048 * 32000 * 4);
    assert_eq!(line(&old, "gradients of log-softmax"), 0);
    // the padded-labels loss (transformers ≥ 4.49) peaks at the start of backward instead:
    // log-softmax + its gradient + the logits gradient, 2048 × 32000 × 12 B
    assert_eq!(new.peak_phase, vramfit_core::Phase::Backward);
    assert_eq!(line(&new, "loss forward"), 0);
    assert_eq!(line(&new, "log-softmax") + line(&new, "gradients of log-softmax"), 2048 * 32000 * 12);
    // the rest of both moments is the same here (single GPU, no recompute yet): 14 B against 12 B
    assert_eq!(old.tensor_peak_bytes() - new.tensor_peak_bytes(), 2048 * 32000 * 2);
}

#[test]
fn fsdp1_frozen_units_keep_checkpointed_inputs_grads_to_the_end_of_backward() {
    let spec = mistral();
    let par = Parallelism { gpus: 2, sharding: Sharding::Zero3, fsdp: true, ..Parallelism::default() };
    let lora = TrainSetup {
        kind: TrainKind::Lora,
        precision: Precision::Bf16,
        batch: 2,
        seq: 4096,
        checkpointing: Checkpointing::Full,
        lora: LoraSetup { rank: 16, targets: LoraTargets::Modules(vec!["q_proj".into()]), ..LoraSetup::default() },
        ..TrainSetup::default()
    };
    let l = train(&spec, lora.clone().with_engine(Engine::Fsdp), par.clone());
    // while layer 0 is recomputed, layers 1..31 are through backward: their bf16 inputs
    // (8192 tokens × 4096 × 2 B = 67,108,864 B each, in the saved-activations line) and
    // their gradients stay alive: 31 × 67,108,864 = 2,080,374,784 B
    assert_eq!(line(&l, "FSDP frozen units"), 31 * 8192 * 4096 * 2);
    assert_eq!(line(&l, "FSDP frozen units"), 2_080_374_784);
    assert!(line(&l, "checkpointing: one layer recomputed") > 0, "live with the recomputed layer");
    assert_eq!(line(&l, "log-softmax"), 0, "the logits buffers are freed by then");
    // not with trainable units (full fine-tune), not without checkpointing, not on one GPU,
    // and not for Fabric (LitGPT checkpoints inside the FSDP unit, non-reentrant)
    let full = TrainSetup { kind: TrainKind::Full, ..lora.clone() };
    assert_eq!(line(&train(&spec, full.with_engine(Engine::Fsdp), par.clone()), "FSDP frozen units"), 0);
    let no_ckpt = TrainSetup { checkpointing: Checkpointing::None, ..lora.clone() };
    assert_eq!(line(&train(&spec, no_ckpt.with_engine(Engine::Fsdp), par.clone()), "FSDP frozen units"), 0);
    assert_eq!(
        line(&train(&spec, lora.clone().with_engine(Engine::Fsdp), Parallelism::default()), "FSDP frozen units"),
        0
    );
    assert_eq!(line(&train(&spec, lora.with_engine(Engine::Litgpt), par), "FSDP frozen units"), 0);
}

#[test]
fn vllm_0_21_takes_its_cuda_graph_pool_off_the_kv_budget() {
    // vLLM 0.21+ (PR #38284): the CUDA-graph estimate comes off the KV budget; 0.20
    // captured the graphs after the pool (`compile_or_warm_up_model`), outside the budget.
    // Llama-3-8B on 79.22 GiB = 85,061,827,297 B (floor): at 0.92 the budget is
    // floor(0.92 × C) = 78,256,881,113 B. The modelled pool (both releases: 0.11+'s sizes,
    // `_set_cudagraph_sizes` in vllm/config/vllm.py): max size min(2 × 1024, 512, 8192) = 512,
    // sizes [1, 2, 4] + 8..248 step 8 (31) + 256..512 step 16 (17) = 51 PIECEWISE, all ≤ 1024
    // sequences FULL too: 102 graphs × 32 layers × 393,216 B = 1,283,457,024 B, + 512 tokens ×
    // (2 × 4096 + 3 × 14336) × 2 B = 52,428,800 B → 1,335,885,824 B
    let spec = ModelSpec::llama_like("llama-3-8b", 4096, 32, 32, 8, 14336, 128256);
    let at = |v: &str, util: f64| {
        let s = InferenceSetup {
            engine: Engine::Vllm,
            engine_version: Some(v.parse().unwrap()),
            context: 8192,
            kv_dtype: DType::BF16,
            ..InferenceSetup::default()
        };
        let serving = ServingSetup {
            gpu_util: util,
            cuda_capacity_bytes: (79.22 * GIB as f64) as u64,
            max_num_batched_tokens: 8192,
            max_num_seqs: 1024,
        };
        serving_profile(&spec, &s, &Parallelism::default(), &RuntimeSetup::default(), &serving).unwrap()
    };
    let (old, new) = (at("0.20", 0.9), at("0.21", 0.92));
    assert_eq!(new.budget_bytes, 78_256_881_113);
    assert_eq!(new.cuda_graph_bytes, 1_335_885_824);
    assert_eq!((new.graphs_outside_bytes, old.cuda_graph_bytes), (0, 0));
    assert_eq!(old.graphs_outside_bytes, 1_335_885_824);
    assert_eq!(
        new.kv_pool_bytes,
        new.budget_bytes - new.weights_bytes - new.activation_peak_bytes - new.non_torch_bytes - 1_335_885_824
    );
    // 0.20 at 0.9 leaves 10% of the card (8,506,182,730 B) for the graphs: they fit
    assert!(old.outside_fits());
    assert!(new.explain.note.as_deref().unwrap_or("").contains("Estimated CUDA graph memory"));
    assert!(old.explain.note.as_deref().unwrap_or("").contains("Graph capturing finished"));
}

#[test]
fn before_vllm_pr_2031_the_memory_outside_the_allocator_is_not_in_the_budget() {
    // vllm-project/vllm#2031 (first in 0.2.5): before it `profile_num_available_blocks` took
    // `torch.cuda.max_memory_allocated()` alone, so the pool was util × total − (weights +
    // activation peak); after it, total − free also takes the CUDA context and NCCL. Llama-2-7B
    // at TP 1 on 79.15 GiB: the pool shrinks by exactly the non-torch memory counted
    // (context 500 MiB + workspaces), which the PR logged as 7,449 → 7,351 blocks
    let spec = ModelSpec::llama_like("llama-2-7b", 4096, 32, 32, 32, 11008, 32000);
    let at = |v: &str| {
        let s = InferenceSetup {
            engine: Engine::Vllm,
            engine_version: Some(v.parse().unwrap()),
            context: 4096,
            ..InferenceSetup::default()
        };
        let serving = ServingSetup {
            gpu_util: 0.9,
            cuda_capacity_bytes: (79.15 * GIB as f64) as u64,
            max_num_batched_tokens: 4096,
            max_num_seqs: 256,
        };
        serving_profile(&spec, &s, &Parallelism::default(), &RuntimeSetup::default(), &serving).unwrap()
    };
    let (before, after) = (at("0.2.4"), at("0.2.5"));
    assert_eq!(before.kv_pool_bytes, before.budget_bytes - before.weights_bytes - before.activation_peak_bytes);
    // 0.2.4 has no engine non-torch figure: the runtime's context + workspaces; 0.2.5 PR #10511's 1.79 GiB
    assert_eq!(before.kv_pool_bytes - after.kv_pool_bytes, after.non_torch_bytes);
    assert!(before.kv_blocks > after.kv_blocks);
}
