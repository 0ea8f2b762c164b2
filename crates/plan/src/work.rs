//! The hardware-independent work of a setup: FLOPs per token, bytes to
//! communicate and to offload per optimizer step (training), bytes read per
//! decode step and prefill FLOPs (inference). The time model
//! ([`crate::time`]) turns it into seconds on a device; the sources of each
//! term are there.

use crate::time::{GemmShapes, InferWork, TrainWork};
use crate::types::{MemSummary, Work};
use vramfit_core::dtype::DType;
use vramfit_core::hardware::PeakKind;
use vramfit_core::model::{MlpKind, ModelSpec};
use vramfit_core::params::ParamLayout;
use vramfit_core::train::{Checkpointing, TrainKind, TrainSetup};
use vramfit_core::weights::routed_expert_bytes_per_gpu;
use vramfit_core::workload::InferenceSetup;
use vramfit_core::workload::{Engine, Offload, Parallelism, Sharding, Task, Workload};

/// Hardware-independent work of a setup (FLOPs, bytes to communicate and
/// to offload per optimizer step): see [`crate::time`] for the sources.
pub fn work_of(spec: &ModelSpec, w: &Workload, m: &MemSummary, replicas: u64) -> Work {
    match &w.task {
        Task::Train(t) => Work::Train(train_work(spec, t, t.kind, &w.parallelism, m)),
        Task::Inference(s) => {
            let l = spec.num_layers as f64;
            let h = spec.hidden_size as f64;
            let n_act = m.params_active as f64;
            let ctx = s.context as f64;
            let prefill = (2.0 * n_act + 2.0 * l * h * ctx) * s.batch as f64 * ctx;
            let peak = if s.weight_dtype_compute().bits() <= 8 { PeakKind::Fp8 } else { PeakKind::Bf16 };
            Work::Infer(InferWork {
                bytes_per_step: decode_weight_bytes(spec, s, &w.parallelism, m) + m.kv as f64,
                concurrency: s.concurrency as f64,
                replicas: replicas.max(1) as f64,
                // half the context on average over a generation
                decode_flops_per_token: 2.0 * n_act + 2.0 * l * h * ctx,
                peak,
                prefill_flops: prefill,
                tp: w.parallelism.tp.max(1) as f64,
                pp: w.parallelism.pp.max(1) as f64,
                layers: l,
                params_active: n_act,
                hidden: h,
                dp_attention: w.parallelism.dp_attention.max(1) as f64,
                a2a_layers: all_to_all_layers(spec, &w.parallelism),
                a2a_bytes_per_step: all_to_all_bytes(spec, s, &w.parallelism),
                prefill_tokens: s.batch as f64 * ctx,
                // one machine until the search places the replica on an offer
                machines: 1.0,
            })
        }
    }
}

/// Weight bytes one GPU reads per decode step. A dense model reads every
/// weight. A mixture of experts reads its shared parts (attention, shared
/// experts, embeddings, norms) and, per MoE layer, only the routed experts
/// its `c` sequences' tokens are sent to: with top-k of E experts and
/// uniform routing, an expert is missed by one token with probability
/// 1 − k/E, so a step touches 1 − (1 − k/E)^c of them (the fused MoE
/// kernels of vLLM/SGLang load only the experts with tokens:
/// `fused_moe`'s `moe_align_block_size` skips empty experts). At batch 1
/// that is k/E of the experts; it tends to all of them as `c` grows.
///
/// With expert parallelism a GPU holds ⌈E / ep⌉ whole experts instead of a
/// 1/TP slice of each, and reads those its tokens touch: the same expected
/// share. With data-parallel attention the `c` sequences of every group are
/// dispatched to the same experts, so the union is over all of them, while
/// the replicated attention and dense parts (in `m.weights`) are read
/// whole by every rank.
pub fn decode_weight_bytes(spec: &ModelSpec, s: &InferenceSetup, par: &Parallelism, m: &MemSummary) -> f64 {
    let all = m.weights as f64;
    let Some(moe) = spec.moe.as_ref().filter(|e| e.num_experts > 0) else { return all };
    // experts split whole over `ep` ranks: the whole model's routed bytes
    // (TP 1) × ⌈E / ep⌉ / E, as `push_weights_ep` stores them
    let (tp, share) = if par.ep > 1 {
        (1, moe.num_experts.div_ceil(par.ep) as f64 / moe.num_experts as f64)
    } else {
        (par.tp.max(1), 1.0)
    };
    let routed = ParamLayout::of(spec)
        .and_then(|l| {
            routed_expert_bytes_per_gpu(&l, spec.num_layers, s.weight_dtype, s.quant.as_ref(), tp, par.pp.max(1))
        })
        .map(|b| (b as f64 * share).min(all))
        .unwrap_or(0.0);
    let k = moe.experts_per_token.min(moe.num_experts) as f64;
    let miss = 1.0 - k / moe.num_experts as f64;
    let touched = 1.0 - miss.powf(s.concurrency.max(1) as f64);
    all - routed + routed * touched
}

/// MoE layers whose tokens cross ranks by all-to-all in a decode step: with
/// data-parallel attention every MoE layer dispatches its group's tokens to
/// the expert ranks and combines the results back (SGLang
/// `--enable-dp-attention`, vLLM DP + EP); 0 otherwise — with EP = TP and no
/// DP attention, vLLM keeps the tokens replicated over the TP ranks and sums
/// the experts' outputs with the same all-reduce TP uses
/// (`FusedMoE.forward`: `tensor_model_parallel_all_reduce` when
/// `reduce_results`), which the TP term already counts.
pub fn all_to_all_layers(spec: &ModelSpec, par: &Parallelism) -> f64 {
    match spec.moe.as_ref().filter(|m| m.num_experts > 0) {
        Some(_) if par.dp_attention > 1 => spec.moe_layers() as f64 / par.pp.max(1) as f64,
        _ => 0.0,
    }
}

/// Bytes one GPU sends per decode step in the expert all-to-alls of
/// [`all_to_all_layers`]: per MoE layer its group's tokens (one per
/// sequence; a group of TP > 1 splits them over its ranks) go out to the
/// ranks holding their top-k experts and come back weighted (dispatch +
/// combine), `tokens × hidden × activation bytes × min(k, ranks) ×
/// (ranks − 1) / ranks × 2`: each token reaches at most k ranks, and the
/// share on its own rank stays local (DeepSeek-V3 technical report §3.2.2: each token is
/// dispatched to the GPUs of its routed experts and combined back; DeepEP
/// `low_latency_dispatch`/`low_latency_combine`). Activations are counted
/// at the compute dtype (DeepEP dispatches in fp8, combines in bf16: an
/// upper bound).
pub fn all_to_all_bytes(spec: &ModelSpec, s: &InferenceSetup, par: &Parallelism) -> f64 {
    let layers = all_to_all_layers(spec, par);
    let Some(moe) = spec.moe.as_ref().filter(|_| layers > 0.0) else { return 0.0 };
    let ranks = par.tp.max(1) as f64;
    let groups = par.dp_attention.max(1);
    let tokens = s.concurrency.div_ceil(groups) as f64 / par.attn_tp() as f64;
    let fanout = (moe.experts_per_token as f64).min(ranks) * (ranks - 1.0) / ranks;
    let act = s.weight_dtype_compute().bytes_f64();
    tokens * spec.hidden_size as f64 * act * fanout * 2.0 * layers
}

/// Bytes per gradient element the data-parallel collectives move.
fn grad_bytes(t: &TrainSetup, lora: bool) -> f64 {
    if lora {
        if t.lora.adapter_fp32 {
            4.0
        } else {
            2.0
        }
    } else if t.framework().megatron_mixed_precision
        && matches!(t.precision, vramfit_core::train::Precision::MixedBf16 | vramfit_core::train::Precision::MixedFp8)
    {
        // Megatron reduces its fp32 main grads under --bf16 (`grad_reduce_in_fp32`)
        4.0
    } else {
        t.precision.weight_dtype().bytes_f64()
    }
}

/// Bytes per weight element ZeRO-3 gathers (QLoRA: packed 4-bit).
fn weight_bytes(t: &TrainSetup, kind: TrainKind) -> f64 {
    match kind {
        TrainKind::Full => t.precision.weight_dtype().bytes_f64(),
        TrainKind::Lora => t.lora_base_dtype().bytes_f64(),
        TrainKind::Qlora => 0.5,
    }
}

/// The training work of `t` (method `kind`) under `par`.
pub fn train_work(spec: &ModelSpec, t: &TrainSetup, kind: TrainKind, par: &Parallelism, m: &MemSummary) -> TrainWork {
    let l = spec.num_layers as f64;
    let h = spec.hidden_size as f64;
    let n_act = m.params_active as f64;
    let s = t.seq as f64;
    // causal attention: QKᵀ and AV over half the s × s scores on average (flash
    // kernels skip the masked blocks): 2·2·L·h·s/2 per token forward, ×3 with backward
    let attn = 6.0 * l * h * s;
    let lora = kind != TrainKind::Full;
    let model_flops = if lora { 4.0 * n_act } else { 6.0 * n_act } + attn;
    let recompute = match t.checkpointing {
        Checkpointing::None => 0.0,
        Checkpointing::Selective => 2.0 * l * h * s,
        Checkpointing::Full => 2.0 * n_act + 2.0 * l * h * s,
    };
    // sequences: the data-parallel replicas; gradients and shards: DP × CP
    let dp = par.dp() as f64;
    let cp = par.cp.max(1) as f64;
    // tokens of each sequence one rank holds (context parallelism: s / cp)
    let s_rank = s / cp;
    let mp = (par.tp.max(1) * par.pp.max(1)) as f64;
    let psi_t = m.params_trainable as f64 / mp;
    let psi = m.params_total as f64 / mp;
    let (gb, wb) = (grad_bytes(t, lora), weight_bytes(t, kind));
    let k = t.grad_accum.max(1) as f64;
    // gradients reduce and states shard over DP × CP ([`Parallelism::shard_dp`]);
    // under hybrid sharding the ZeRO-3 collectives run over one replica's shard group
    let shard = par.shard_degree() as f64;
    let frac = if shard > 1.0 { (shard - 1.0) / shard } else { 0.0 };
    let (hpz_fwd, hpz_intra) = hpz_gathers(par, psi, psi_t, wb, k);
    // DeepSpeed AutoEP: the experts' share reduces over world ÷ EP ranks ([`autoep_reduced`])
    let psi_t_frac = autoep_reduced(spec, t, par, psi_t).unwrap_or(psi_t * frac);
    let dp_bytes = match par.sharding {
        Sharding::None | Sharding::Zero1 => 2.0 * psi_t_frac * gb,
        Sharding::Zero2 => k * psi_t_frac * gb + psi_t_frac * wb,
        Sharding::Zero3 if par.hpz_on() => (hpz_fwd + k * psi_t * gb) * frac,
        Sharding::Zero3 => k * (2.0 * psi * wb + psi_t * gb) * frac,
    };
    let replicate_bytes = hsdp_replicate_bytes(par, psi_t * gb, k);
    let tp = par.tp.max(1) as f64;
    let act_b = t.precision.compute_dtype().bytes_f64();
    let tp_bytes = if tp > 1.0 {
        let per_micro = 4.0 * (l / par.pp.max(1) as f64) * t.batch as f64 * s_rank * h * act_b;
        let recompute_factor = if t.checkpointing == Checkpointing::Full { 1.5 } else { 1.0 };
        k * per_micro * 2.0 * (tp - 1.0) / tp * recompute_factor
    } else {
        0.0
    };
    // activations to the next stage and their gradients back, per micro-batch,
    // split over the TP ranks (Megatron-LM `scatter_gather_tensors_in_pipeline`);
    // interleaved, each micro-batch crosses v chunk boundaries per rank: v times
    // the traffic (Narayanan et al. 2021 §2.2.2: "the amount of communication
    // also increases by v")
    let pp = par.pp.max(1) as f64;
    let v = if pp > 1.0 { par.virtual_stages.max(1) as f64 } else { 1.0 };
    let pp_bytes = if pp > 1.0 { k * 2.0 * t.batch as f64 * s_rank * h * act_b / tp * v } else { 0.0 };
    let mut offload_bytes = 0.0;
    let mut cpu_params = 0.0;
    if par.offload_optimizer != Offload::None {
        offload_bytes += psi_t * (gb + 2.0) / shard;
        cpu_params = m.params_trainable as f64;
    }
    if par.offload_params != Offload::None {
        offload_bytes += k * 2.0 * psi * wb / shard;
    }
    let peak = if t.precision.compute_dtype() == DType::F32 {
        PeakKind::Fp32
    } else if t.precision.is_fp8() {
        PeakKind::Fp8
    } else {
        PeakKind::Bf16
    };
    let fp8_flops = fp8_gemm_flops_per_token(spec, t, m);
    TrainWork {
        flops_per_token: model_flops + recompute,
        model_flops_per_token: model_flops,
        tokens_per_step: t.batch as f64 * k * dp * s,
        tokens_per_micro: t.batch as f64 * s_rank,
        micro_steps: k,
        dp_bytes_per_step: dp_bytes,
        zero3: par.sharding == Sharding::Zero3,
        tp_bytes_per_step: tp_bytes,
        offload_bytes_per_step: offload_bytes,
        cpu_params_per_step: cpu_params,
        pp: par.pp.max(1) as f64,
        qlora: kind == TrainKind::Qlora,
        multi_node: false,
        gpus: par.gpus.max(1) as f64,
        tp,
        machines: 1.0,
        pp_bytes_per_step: pp_bytes,
        virtual_stages: v,
        peak,
        a2a_per_step: (train_all_to_alls(spec, par) + autoep_count_exchanges(spec, t, par)) * k,
        a2a_bytes_per_step: train_all_to_all_bytes(spec, t, par) * k,
        ep: par.ep.max(1) as f64,
        etp: par.expert_tp() as f64,
        etp_bytes_per_step: train_etp_bytes(spec, t, par) * k,
        gemm_inverse_tiles: gemm_shapes(spec, t, kind, par).map(|g| g.inverse_tiles),
        cp,
        cp_bytes_per_step: train_cp_bytes(spec, t, par) * k,
        cp_hidden_share: cp_hidden_share(t, par),
        attn_share: if cp > 1.0 {
            (attn + recompute_attn(t.checkpointing, l, h, s)) / (model_flops + recompute)
        } else {
            0.0
        },
        fp8_gemm_share: fp8_flops / (model_flops + recompute),
        fp8_cast_bytes_per_token: if fp8_flops > 0.0 { fp8_cast_bytes_per_token(spec) } else { 0.0 },
        dp_replicate: par.dp_replicate.max(1) as f64,
        replicate_bytes_per_step: replicate_bytes,
        hpz: par.hpz.max(1) as f64,
        hpz_intra_bytes_per_step: hpz_intra,
    }
}

/// DeepSpeed ZeRO++ hpZ's parameter all-gathers per step, as (elements × bytes
/// gathered across every rank, bytes one GPU sends inside its hpZ group);
/// (0, 0) without hpZ. An all-gather reads the secondary partition, over the
/// hpZ group, whenever the parameter has one (`use_secondary_tensor =
/// params[0].ds_secondary_tensor is not None` → `zero_param_process_group`,
/// `_all_gather_params` in deepspeed/runtime/zero/partition_parameters.py),
/// and the secondary partition is built when a module is released after its
/// forward and dropped only after the optimizer step (`_post_step` →
/// `invalidate_secondary_tensor`, stage3.py), for the trainable parameters
/// only (it walks `fp16_groups`; a frozen base keeps its secondary partition
/// from the first step on). So per step the first micro-batch's forward
/// gathers the trainable ψ_t across all ranks, and the other 2k − 1 passes'
/// gathers (and every gather of a frozen base) run inside the group: (2kψ −
/// ψ_t) × bytes × (h − 1)/h per GPU (Wang et al. 2023 "ZeRO++" §3.2: forward
/// across nodes, backward within the node). The gradient reduce-scatter stays
/// over all ranks.
pub fn hpz_gathers(par: &Parallelism, psi: f64, psi_t: f64, wb: f64, micro_steps: f64) -> (f64, f64) {
    let h = par.hpz.max(1) as f64;
    if h <= 1.0 || par.sharding != Sharding::Zero3 {
        return (0.0, 0.0);
    }
    let intra = (2.0 * micro_steps * psi - psi_t).max(0.0) * wb * (h - 1.0) / h;
    (psi_t * wb, intra)
}

/// FP8 training (`mixed-fp8`): FLOPs per token of the decoder's linear GEMMs,
/// which run in FP8 — 6 per decoder-linear parameter a token passes through
/// (8 under full recompute, whose forward repeats them): the active parameters
/// less the embedding and the output head, which TransformerEngine's Megatron
/// layers and torchtitan's float8 converter (`filter_fqns = ["output"]`) keep
/// in bf16 (one vocabulary × hidden matrix when tied). 0 otherwise.
pub fn fp8_gemm_flops_per_token(spec: &ModelSpec, t: &TrainSetup, m: &MemSummary) -> f64 {
    if !t.precision.is_fp8() {
        return 0.0;
    }
    let vh = (spec.vocab_size * spec.hidden_size) as f64;
    let outside = if spec.tied_embeddings { vh } else { 2.0 * vh };
    let linears = (m.params_active as f64 - outside).max(0.0);
    let passes = if t.checkpointing == Checkpointing::Full { 8.0 } else { 6.0 };
    passes * linears
}

/// FP8 training: HBM bytes per token (whole model) the casts to FP8 move.
/// Dynamic per-tensor scaling reads a tensor for its amax, then reads it
/// again and writes it in FP8 (2 + 2 + 1 B per element): each decoder
/// linear's input in forward and its output gradient in backward; the
/// weight-gradient GEMM takes both transposed, one FP8 copy each (1 + 1 B;
/// torchao `Float8Linear` / `hp_tensor_and_scale_to_float8`, TransformerEngine's
/// quantizers with column-wise usage on Hopper): 7 B per element of input and
/// of output, over the linears of a layer — q, k, v, o and the MLP's gate, up,
/// down: 7·h + 2·q_width + 2·kv_width + 3·intermediate elements — and the layers.
pub fn fp8_cast_bytes_per_token(spec: &ModelSpec) -> f64 {
    let h = spec.hidden_size as f64;
    let per_layer =
        7.0 * h + 2.0 * spec.q_width() as f64 + 2.0 * spec.kv_width() as f64 + 3.0 * spec.intermediate_size as f64;
    7.0 * per_layer * spec.num_layers as f64
}

/// Attention FLOPs per token a checkpointed step recomputes: the forward of
/// attention (2·L·h·s/2·2 = 2·L·h·s per token) under selective or full recompute.
fn recompute_attn(ckpt: Checkpointing, l: f64, h: f64, s: f64) -> f64 {
    match ckpt {
        Checkpointing::None => 0.0,
        Checkpointing::Selective | Checkpointing::Full => 2.0 * l * h * s,
    }
}

/// Bytes one GPU sends per micro-batch in context parallelism's ring
/// attention: per layer of its stage, cp − 1 hops of its K/V block,
/// 2 × batch × s/cp × kv heads (split over TP) × head_dim × activation bytes,
/// in forward; in backward the K/V block and its gradient travel the ring
/// together (2× forward); a fully checkpointed layer runs its forward ring
/// again (TransformerEngine `AttnFuncWithCPAndKVP2P` forward and backward,
/// `cp_comm_type p2p`, what Megatron-LM's `--context-parallel-size` runs;
/// Liu et al. 2023, Ring Attention). torchtitan's default all-gathers the
/// same K/V blocks (`context_parallel_rotate_method = "allgather"`): the
/// same bytes per rank. 0 without CP.
pub fn train_cp_bytes(spec: &ModelSpec, t: &TrainSetup, par: &Parallelism) -> f64 {
    let cp = par.cp.max(1) as f64;
    if cp < 2.0 {
        return 0.0;
    }
    let tp = par.tp.max(1);
    let kv_heads = spec.num_kv_heads.max(1).div_ceil(tp) as f64;
    let act_b = t.precision.compute_dtype().bytes_f64();
    let block = 2.0 * t.batch as f64 * (t.seq as f64 / cp) * kv_heads * spec.head_dim as f64 * act_b;
    let layers = (spec.num_layers as f64 / par.pp.max(1) as f64).ceil();
    let passes = if t.checkpointing == Checkpointing::Full { 4.0 } else { 3.0 };
    layers * (cp - 1.0) * block * passes
}

/// The share of a rank's attention time behind which the CP exchange hides:
/// all of it under Megatron-LM (TransformerEngine sends block i + 1 on one
/// stream while attention runs on block i: `flash_attn_streams`,
/// `send_recv_reqs` in `AttnFuncWithCPAndKVP2P.forward`), 1/cp under
/// torchtitan's default all-gather ("all-gather all kv shards on ranks after
/// the first sub-SDPA computation": `context_parallel_rotate_method` in
/// torchtitan/config/job_config.py), whose gather overlaps only the local block.
pub fn cp_hidden_share(t: &TrainSetup, par: &Parallelism) -> f64 {
    let cp = par.cp.max(1) as f64;
    match t.engine {
        vramfit_core::workload::Engine::Megatron => 1.0,
        _ => 1.0 / cp,
    }
}

/// The per-GPU GEMMs of one layer of `spec` under `par` ([`crate::gemm`]):
/// Megatron-style TP keeps 1/tp of the QKV and MLP-up outputs and of the
/// attention-output and MLP-down inputs (Shoeybi et al. 2019 §3; the gated
/// MLP's gate and up fused into one `linear_fc1` of 2 × ffn outputs, as
/// Megatron-LM's `--swiglu` builds it). None for layers that are not plain
/// dense attention + MLP (mixture of experts, multi-latent attention, Mamba,
/// linear attention, mixed layer patterns): their GEMMs are other shapes, and
/// the token rule times them.
pub fn gemm_shapes(spec: &ModelSpec, t: &TrainSetup, kind: TrainKind, par: &Parallelism) -> Option<GemmShapes> {
    let plain = spec.moe.as_ref().is_none_or(|m| m.num_experts == 0)
        && spec.mla.is_none()
        && spec.mamba.is_none()
        && spec.linear_attention.is_none()
        && spec.layer_pattern.is_empty();
    if !plain || spec.hidden_size == 0 {
        return None;
    }
    let tp = par.tp.max(1) as f64;
    let h = spec.hidden_size as f64;
    let hd = spec.head_dim as f64;
    let q = spec.num_heads as f64 * hd;
    let kv = spec.num_kv_heads as f64 * hd;
    let ffn = spec.intermediate_size as f64;
    let up = if spec.mlp == MlpKind::Gated { 2.0 * ffn } else { ffn };
    Some(GemmShapes::new(
        t.batch as f64 * t.seq as f64,
        [(h, (q + 2.0 * kv) / tp), (q / tp, h), (h, up / tp), (ffn / tp, h)],
        kind == TrainKind::Full,
        t.checkpointing == Checkpointing::Full,
    ))
}

/// Bytes one GPU sends per step in hybrid sharding's all-reduce across the
/// replicas: after the reduce-scatter inside its shard group each rank holds
/// the reduced gradient of its 1/g shard (`grad_bytes` = ψ_t × gradient bytes
/// per GPU before sharding) and all-reduces it with the rank holding the same
/// shard in each other replica (PyTorch FSDP `HYBRID_SHARD`: `_reduce_grad`
/// reduce-scatters over the intra-node group, then `all_reduce`s over
/// `_inter_node_pg`, torch/distributed/fsdp/_runtime_utils.py; Zhao et al.
/// 2023 §3.2.2, §4), a ring all-reduce sending 2 (r − 1)/r of it, once per
/// micro-batch as the reduce-scatter is; 0 without hybrid sharding.
pub fn hsdp_replicate_bytes(par: &Parallelism, grad_bytes: f64, micro_steps: f64) -> f64 {
    let r = par.dp_replicate.max(1) as f64;
    if r <= 1.0 {
        return 0.0;
    }
    micro_steps * 2.0 * grad_bytes / par.shard_degree() as f64 * (r - 1.0) / r
}

/// DeepSpeed AutoEP (`--ep` > 1 outside Megatron): the trainable elements
/// per rank `psi_t` (routed experts counted whole) weighted by the share each
/// sends in the data-parallel reduction: the dense part over the shard ranks,
/// (s − 1)/s; the rank's 1/EP of the routed experts over the
/// expert-data-parallel group of world ÷ EP ranks, (e − 1)/e (engine.py
/// `split_params_into_different_moe_groups_for_optimizer`; stage_1_and_2.py
/// reduces the MoE groups over `expert_data_parallel_group`). The routed
/// experts: MoE layers × experts × (3 gated, 2 plain) × hidden × expert width.
/// None otherwise.
fn autoep_reduced(spec: &ModelSpec, t: &TrainSetup, par: &Parallelism, psi_t: f64) -> Option<f64> {
    if par.ep <= 1 || t.engine == Engine::Megatron {
        return None;
    }
    let moe = spec.moe.as_ref().filter(|m| m.num_experts > 0)?;
    let mats = if spec.mlp == MlpKind::Gated { 3.0 } else { 2.0 };
    let experts = spec.moe_layers() as f64
        * moe.num_experts as f64
        * mats
        * spec.hidden_size as f64
        * moe.expert_intermediate as f64;
    let ep = par.ep as f64;
    let share = |n: f64| if n > 1.0 { (n - 1.0) / n } else { 0.0 };
    let edp = (par.gpus as f64 / ep).max(1.0);
    Some((psi_t - experts).max(0.0) * share(par.shard_degree() as f64) + experts / ep * share(edp))
}

/// DeepSpeed AutoEP's extra collective per MoE layer per micro-batch: before
/// the dispatch each rank tells the others how many rows it sends to each of
/// their experts (`_split_plan_from_expert_counts`, an `all_to_all_single` of
/// the counts, auto_ep_layer.py), a latency-bound all-to-all the backward
/// does not repeat (`_AllToAllV` keeps the splits). 0 under Megatron or without EP.
fn autoep_count_exchanges(spec: &ModelSpec, t: &TrainSetup, par: &Parallelism) -> f64 {
    if t.engine == Engine::Megatron {
        return 0.0;
    }
    train_all_to_alls(spec, par) / 4.0
}

/// All-to-alls per micro-batch on one GPU in MoE training with expert
/// parallelism: per MoE layer of its stage a dispatch and a combine forward
/// and their two transposes backward (`MoEAlltoAllTokenDispatcher`,
/// megatron/core/transformer/moe/token_dispatcher.py: `all_to_all` is an
/// autograd function whose backward is the reverse all-to-all); 0 without EP.
pub fn train_all_to_alls(spec: &ModelSpec, par: &Parallelism) -> f64 {
    match spec.moe.as_ref().filter(|m| m.num_experts > 0) {
        Some(_) if par.ep > 1 => 4.0 * spec.moe_layers() as f64 / par.pp.max(1) as f64,
        _ => 0.0,
    }
}

/// Bytes one GPU sends per micro-batch in [`train_all_to_alls`]: each MoE layer
/// sends its tokens (the micro-batch's, split over the TP ranks by sequence
/// parallelism) to the ranks holding their top-k experts, `tokens × hidden ×
/// activation bytes × min(k, EP) × (EP − 1) / EP`, four times (dispatch and
/// combine, forward and backward); the share on its own rank stays local.
pub fn train_all_to_all_bytes(spec: &ModelSpec, t: &TrainSetup, par: &Parallelism) -> f64 {
    let alls = train_all_to_alls(spec, par);
    let Some(moe) = spec.moe.as_ref().filter(|_| alls > 0.0) else { return 0.0 };
    let ep = par.ep.max(1) as f64;
    let tokens = (t.batch * t.seq) as f64 / par.tp.max(1) as f64;
    // DeepSpeed AutoEP sends one row per (token, expert) whichever rank holds the
    // expert (`x[token_indices // top_k]` then `_AllToAllV`, auto_ep_layer.py):
    // k rows, not min(k, EP)
    let rows = moe.experts_per_token as f64;
    let fanout = if t.engine == Engine::Megatron { rows.min(ep) } else { rows } * (ep - 1.0) / ep;
    tokens * spec.hidden_size as f64 * t.precision.compute_dtype().bytes_f64() * fanout * alls
}

/// Bytes one GPU sends per micro-batch in the expert-tensor-parallel group's
/// collectives under Megatron: per MoE layer of its stage, the all-gather of
/// the tokens it received by all-to-all before the experts and the
/// reduce-scatter of the experts' outputs after them
/// (`MoEAlltoAllTokenDispatcher.dispatch_postprocess` /
/// `combine_preprocess`, megatron/core/transformer/moe/token_dispatcher.py,
/// over `pg_collection.expt_tp`), and their two transposes in backward: four
/// ring collectives, each sending (ETP − 1) × the rank's own rows — its
/// tokens (the micro-batch's ÷ TP under sequence parallelism) × top-k —
/// × hidden × activation bytes; × 1.5 under full recompute (its forward
/// repeats them, as [`train_work`]'s TP traffic). Megatron's default (EP 1,
/// ETP = TP) runs them too; 0 with ETP 1, a dense model or another engine.
pub fn train_etp_bytes(spec: &ModelSpec, t: &TrainSetup, par: &Parallelism) -> f64 {
    let etp = par.expert_tp() as f64;
    let moe = spec.moe.as_ref().filter(|m| m.num_experts > 0 && spec.moe_layers() > 0);
    let Some(moe) = moe.filter(|_| etp > 1.0 && t.engine == vramfit_core::workload::Engine::Megatron) else {
        return 0.0;
    };
    let layers = spec.moe_layers() as f64 / par.pp.max(1) as f64;
    let rows = (t.batch * t.seq) as f64 / par.cp.max(1) as f64 / par.tp.max(1) as f64 * moe.experts_per_token as f64;
    let recompute = if t.checkpointing == Checkpointing::Full { 1.5 } else { 1.0 };
    4.0 * layers * (etp - 1.0) * rows * spec.hidden_size as f64 * t.precision.compute_dtype().bytes_f64() * recompute
}

#[cfg(test)]
mod fp8_tests {
    use super::*;

    /// The FP8 casts by hand for a Llama-like layer, hidden 512, 8 heads of 64, 2 kv
    /// heads, MLP 1376, 4 layers: elements per token of the linears' inputs and outputs
    /// 7 × 512 + 2 × 512 + 2 × 128 + 3 × 1376 = 3584 + 1024 + 256 + 4128 = 8992, × 7 B
    /// × 4 layers = 251,776 B per token.
    #[test]
    fn fp8_casts_count_every_decoder_linear() {
        let spec = ModelSpec::llama_like("small", 512, 4, 8, 2, 1376, 32000);
        assert_eq!(fp8_cast_bytes_per_token(&spec), 251_776.0);
    }
}

#[cfg(test)]
mod etp_tests {
    use super::*;
    use vramfit_core::train::Precision;
    use vramfit_core::workload::Engine;

    /// Mistral's shape with 8 experts of 14336, top-2, in all 32 layers.
    fn moe() -> ModelSpec {
        super::autoep_tests::moe(8, 2)
    }

    /// The ETP collectives by hand (token_dispatcher.py: all-gather before the
    /// experts, reduce-scatter after, and their transposes in backward).
    #[test]
    fn expert_tp_bytes_by_hand() {
        let t = TrainSetup {
            kind: TrainKind::Full,
            precision: Precision::MixedBf16,
            batch: 1,
            seq: 4096,
            checkpointing: Checkpointing::Selective,
            ..TrainSetup::default()
        }
        .with_engine(Engine::Megatron);
        let par =
            Parallelism { gpus: 16, tp: 2, pp: 2, ep: 4, etp: 2, sequence_parallel: true, ..Parallelism::default() };
        // 4 collectives × 16 MoE layers per stage × (ETP 2 − 1) × (4096 / TP 2 × top-2 = 4096 rows)
        // × 4096 hidden × 2 B = 64 × 33,554,432 = 2,147,483,648 B per micro-batch
        assert_eq!(train_etp_bytes(&moe(), &t, &par), 2_147_483_648.0);
        // ETP 1: the experts whole, nothing gathered
        assert_eq!(train_etp_bytes(&moe(), &t, &Parallelism { etp: 1, ..par.clone() }), 0.0);
        // EP 1 with Megatron's default ETP = TP 2 gathers the same
        assert_eq!(train_etp_bytes(&moe(), &t, &Parallelism { ep: 1, etp: 0, ..par.clone() }), 2_147_483_648.0);
        // another engine does not run Megatron's dispatcher
        let ds = TrainSetup { engine: Engine::Deepspeed, ..t.clone() };
        assert_eq!(train_etp_bytes(&moe(), &ds, &par), 0.0);
    }
}

#[cfg(test)]
mod autoep_tests {
    use super::*;
    use vramfit_core::model::MoeSpec;
    use vramfit_core::train::Precision;

    /// Mixtral-8x7B's shape with `k` of `e` experts (width 14336, 32 MoE layers).
    pub(super) fn moe(e: u64, k: u64) -> ModelSpec {
        let mut m = ModelSpec::llama_like("moe", 4096, 32, 32, 8, 14336, 32000);
        m.moe = Some(MoeSpec {
            num_experts: e,
            experts_per_token: k,
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

    fn step(engine: Engine) -> TrainSetup {
        TrainSetup { seq: 4096, precision: Precision::MixedBf16, ..TrainSetup::default() }.with_engine(engine)
    }

    #[test]
    fn autoep_sends_every_routed_row_where_megatron_counts_min_k_ep() {
        // top-8 of 16 experts over EP 4, one 4096-token sequence, bf16: 32 MoE layers × 4
        // all-to-alls (dispatch, combine; forward, backward) = 128. AutoEP (auto_ep_layer.py)
        // sends k = 8 rows per token, 3/4 of them off the rank: 4096 × 4096 × 2 B × 8 × 3/4
        // × 128 = 25,769,803,776 B; Megatron's formula takes min(8, 4) = 4 rows: half of it
        let spec = moe(16, 8);
        let par = Parallelism { gpus: 8, ep: 4, ..Parallelism::default() };
        let ds = train_all_to_all_bytes(&spec, &step(Engine::Deepspeed), &par);
        assert_eq!(ds, 25_769_803_776.0);
        assert_eq!(train_all_to_all_bytes(&spec, &step(Engine::Megatron), &par), ds / 2.0);
    }

    #[test]
    fn autoep_reduces_the_experts_over_world_over_ep() {
        // Mixtral shape, 16 GPUs, EP 8: experts 32 × 8 × 3 × 4096 × 14336 = 45,097,156,608,
        // dense 1,605,636,096 (attention, embeddings, head, norms, routers); psi_t = the sum.
        // dense × 15/16 = 1,505,283,840; experts ÷ 8 × (2 − 1)/2 (expert-DP 16 / 8 = 2)
        // = 2,818,572,288: 4,323,856,128 elements reduced
        let spec = moe(8, 2);
        let par = Parallelism { gpus: 16, ep: 8, sharding: Sharding::Zero1, ..Parallelism::default() };
        let psi_t = 45_097_156_608.0 + 1_605_636_096.0;
        assert_eq!(autoep_reduced(&spec, &step(Engine::Deepspeed), &par, psi_t), Some(4_323_856_128.0));
        assert_eq!(autoep_reduced(&spec, &step(Engine::Megatron), &par, psi_t), None);
    }
}
