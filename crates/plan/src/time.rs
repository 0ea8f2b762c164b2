//! How long a job takes: a roofline-style model with every constant named,
//! documented and overridable ([`TimeModel`]). It is deliberately simple
//! and meant for *comparing* setups (which is faster, by about how much),
//! not for promising a wall-clock figure.
//!
//! Training: FLOPs per token ≈ 6·N (Kaplan et al. 2020, "Scaling Laws",
//! §2.1) plus the attention score/value matmuls, 12·L·h·s per token
//! (Chowdhery et al. 2022, PaLM, App. B); full checkpointing repeats the
//! forward (+ 2·N + 4·L·h·s), selective recompute repeats the attention core
//! (+ 4·L·h·s); LoRA skips the frozen weights' gradients (4·N instead of
//! 6·N). Achieved throughput = dense tensor peak × MFU (per architecture) ×
//! the compute efficiency of the GEMMs each GPU runs ([`crate::gemm`]: NVIDIA's
//! wave quantization, where the card's SM count is sourced), else a
//! micro-batch efficiency. Communication per step follows the ZeRO paper
//! (Rajbhandari et al. 2020, §7): DP and ZeRO-1/2 move 2Ψ per step, ZeRO-3
//! 3Ψ; Megatron TP all-reduces the activations 4× per layer per micro-batch
//! (Shoeybi et al. 2019, §3). Offload is bounded by PCIe host bandwidth and
//! the CPU optimizer step. Pipeline bubbles: (p−1)/m of the step under 1F1B,
//! (p−1)/(v·m) interleaved over v virtual stages per rank (Narayanan et al.
//! 2021, §2.2), whose stage-to-stage traffic is v times 1F1B's.
//!
//! Inference: a decode step reads every weight byte and the KV cache once,
//! so tokens/s = concurrency / (bytes per GPU / (bandwidth × efficiency));
//! prefill is bound by FLOPs (2·N per token + attention).

pub use crate::gemm::GemmShapes;
use crate::gemm::{gemm_efficiency, sm_count};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use vramfit_core::hardware::{GpuArch, GpuSpec, Link, PeakKind};

/// Achievable model-FLOPs utilisation by architecture for dense training
/// (bf16/fp16, fp32 accumulate). Rules of thumb from published runs:
/// Megatron/DeepSpeed report 40–55 % on A100 (Narayanan et al. 2021:
/// 52 % for GPT-3 175B on 3072 A100s), 35–45 % on H100 without FP8
/// (MosaicML/Databricks blog figures); consumer and older cards lower.
/// Unconfirmed for any particular model: override with `mfu`.
pub const DEFAULT_MFU: &[(GpuArch, f64)] = &[
    (GpuArch::Ampere, 0.55),
    (GpuArch::Hopper, 0.45),
    (GpuArch::Blackwell, 0.40),
    (GpuArch::Ada, 0.65),
    (GpuArch::Volta, 0.45),
    (GpuArch::Turing, 0.35),
    (GpuArch::Cdna3, 0.30),
];
/// MFU for an architecture not in the table.
pub const FALLBACK_MFU: f64 = 0.30;

/// A micro-batch of `t` tokens per GPU runs at `t / (t + MICRO_BATCH_HALF_TOKENS)`
/// of the saturated rate: small matmuls underuse the tensor cores. 512 tokens
/// gives 80 % at seq 2048 × batch 1 and 94 % at batch 4 (heuristic).
pub const MICRO_BATCH_HALF_TOKENS: f64 = 512.0;

/// Share of the NVLink aggregate (bidirectional) figure a collective achieves
/// per direction: NCCL bus bandwidth on A100 NVLink3 is ~230 GB/s of the
/// 300 GB/s per direction (NCCL tests, commonly reported).
pub const NVLINK_EFFICIENCY: f64 = 0.75;

/// GPU↔GPU bandwidth over PCIe by generation, GB/s per direction: the
/// "typical measured" pinned copy figures of shared/reference/gpus.md
/// (Gen3 ~12, Gen4 ~25, Gen5 ~50; unconfirmed rules of thumb). Consumer
/// cards without P2P go through host memory at about the same rate.
pub fn pcie_gbs(gen: u8) -> f64 {
    match gen {
        0..=3 => 12.0,
        4 => 25.0,
        5 => 50.0,
        _ => 100.0,
    }
}

/// Share of the gradient communication hidden behind the backward pass
/// (DDP/ZeRO bucketing overlaps reduction with compute).
pub const DP_OVERLAP: f64 = 0.8;
/// Share of ZeRO-3 parameter gathering hidden by prefetching.
pub const ZERO3_OVERLAP: f64 = 0.5;

/// DeepSpeed CPU-Adam throughput per core, parameters per second. The
/// ZeRO-Offload paper (Ren et al. 2021, Table 3) reports CPU-Adam updating
/// 1B parameters in ~0.2–0.3 s on a 20–28 core Xeon, i.e. ~1.5e8 per core
/// (rough; unconfirmed for today's CPUs).
pub const CPU_ADAM_PARAMS_PER_CORE_S: f64 = 1.5e8;
/// Cores assumed when an offer does not list its CPU.
pub const DEFAULT_CPU_CORES: u64 = 16;

/// QLoRA's NF4 dequantisation in every forward/backward costs throughput:
/// bitsandbytes 4-bit matmuls run at ~0.7 of 16-bit ones (heuristic).
pub const QLORA_SPEED: f64 = 0.85;

/// Share of memory bandwidth a decode step achieves (vLLM reaches 70–85 %).
pub const DECODE_BW_EFFICIENCY: f64 = 0.8;
/// MFU of a prefill (large matmuls).
pub const PREFILL_MFU: f64 = 0.5;
/// Latency of one small all-reduce in a TP decode step, seconds.
pub const NVLINK_ALLREDUCE_S: f64 = 10e-6;
pub const PCIE_ALLREDUCE_S: f64 = 30e-6;
/// Latency of one small send/recv between machines over the fabric, seconds:
/// nccl-tests `sendrecv_perf` between two nodes measured 30.7–34.2 µs for
/// 256 B–8 KiB messages (NVIDIA/nccl-tests#214, A40 over InfiniBand), and
/// `all_reduce_perf` between two A100 nodes on HDR 19–20 µs at 8 B
/// (NVIDIA/nccl-tests#150).
pub const FABRIC_SENDRECV_S: f64 = 30e-6;

/// Every constant of the model, overridable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimeModel {
    /// MFU by architecture
    pub mfu: BTreeMap<GpuArch, f64>,
    /// MFU by catalogue GPU id (wins over its architecture's)
    pub mfu_by_gpu: BTreeMap<String, f64>,
    pub fallback_mfu: f64,
    pub micro_batch_half_tokens: f64,
    pub nvlink_efficiency: f64,
    pub dp_overlap: f64,
    pub zero3_overlap: f64,
    pub cpu_adam_params_per_core_s: f64,
    pub default_cpu_cores: u64,
    pub qlora_speed: f64,
    pub decode_bw_efficiency: f64,
    pub prefill_mfu: f64,
}

impl Default for TimeModel {
    fn default() -> Self {
        TimeModel {
            mfu: DEFAULT_MFU.iter().copied().collect(),
            mfu_by_gpu: BTreeMap::new(),
            fallback_mfu: FALLBACK_MFU,
            micro_batch_half_tokens: MICRO_BATCH_HALF_TOKENS,
            nvlink_efficiency: NVLINK_EFFICIENCY,
            dp_overlap: DP_OVERLAP,
            zero3_overlap: ZERO3_OVERLAP,
            cpu_adam_params_per_core_s: CPU_ADAM_PARAMS_PER_CORE_S,
            default_cpu_cores: DEFAULT_CPU_CORES,
            qlora_speed: QLORA_SPEED,
            decode_bw_efficiency: DECODE_BW_EFFICIENCY,
            prefill_mfu: PREFILL_MFU,
        }
    }
}

/// One GPU as the time model sees it (a slice scales compute and bandwidth).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Device {
    /// dense FLOP/s at `peak` (a card without that rate: the next slower one it has)
    pub flops: f64,
    /// which peak `flops` is
    pub peak: PeakKind,
    pub mfu: f64,
    /// memory bandwidth, bytes/s
    pub mem_bw: f64,
    /// GPU↔GPU bandwidth inside the machine, bytes/s per direction
    pub intra_bw: f64,
    /// host↔GPU bandwidth, bytes/s
    pub host_bw: f64,
    /// GPU↔GPU bandwidth between machines, bytes/s (when the job spans several)
    pub inter_bw: Option<f64>,
    pub link: Link,
    /// streaming multiprocessors (a slice: its share) where a source gives
    /// them ([`sm_count`]); None: the micro-batch token rule times the GEMMs
    pub sms: Option<f64>,
    /// the 16-bit tensor rate, FLOP/s: what FP8 training's non-GEMM work runs at
    pub bf16_flops: f64,
}

impl TimeModel {
    pub fn mfu_for(&self, gpu: &GpuSpec) -> f64 {
        self.mfu_by_gpu
            .get(&gpu.id)
            .or_else(|| gpu.arch.and_then(|a| self.mfu.get(&a)))
            .copied()
            .filter(|v| v.is_finite() && *v > 0.0 && *v <= 1.0)
            .unwrap_or(self.fallback_mfu)
    }

    /// The device figures for `gpu` on a machine with `link` (a slice takes
    /// `fraction` of it), computing at the `peak` rate the precision runs at.
    pub fn device(
        &self,
        gpu: &GpuSpec,
        link: Link,
        fraction: f64,
        inter_node_gbs: Option<f64>,
        peak: PeakKind,
    ) -> Device {
        let intra = match (link, gpu.nvlink_gbs) {
            (Link::Nvlink, Some(nv)) => nv / 2.0 * self.nvlink_efficiency,
            _ => pcie_gbs(gpu.pcie_gen),
        };
        let (peak, tflops) = gpu.peak_tflops(peak);
        Device {
            flops: tflops * 1e12 * fraction,
            peak,
            mfu: self.mfu_for(gpu),
            mem_bw: gpu.bandwidth_gbs * 1e9 * fraction,
            intra_bw: intra * 1e9,
            host_bw: pcie_gbs(gpu.pcie_gen) * 1e9,
            inter_bw: inter_node_gbs.map(|g| g * 1e9),
            link: if gpu.nvlink_gbs.is_some() { link } else { Link::Pcie },
            sms: sm_count(gpu).map(|s| s as f64 * fraction),
            bf16_flops: gpu.bf16_tflops * 1e12 * fraction,
        }
    }

    pub fn micro_batch_efficiency(&self, tokens_per_micro: f64) -> f64 {
        let t = tokens_per_micro.max(1.0);
        t / (t + self.micro_batch_half_tokens.max(0.0))
    }

    /// The share of the saturated rate a training step's compute reaches:
    /// from the per-GPU GEMM shapes on the card's SMs ([`crate::gemm`]: NVIDIA's
    /// wave quantization) where both are known, else the micro-batch token
    /// rule ([`TimeModel::micro_batch_efficiency`]: a card without a sourced
    /// SM count, a model whose layers are not plain dense transformer layers).
    pub fn compute_efficiency(&self, w: &TrainWork, dev: &Device) -> f64 {
        match (w.gemm_inverse_tiles, dev.sms) {
            (Some(inverse_tiles), Some(sms)) => gemm_efficiency(inverse_tiles, sms),
            _ => self.micro_batch_efficiency(w.tokens_per_micro),
        }
    }
}

/// What a training step does, independent of the hardware (computed once per
/// memory configuration).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrainWork {
    /// FLOPs per trained token, including recompute
    pub flops_per_token: f64,
    /// FLOPs per token without recompute (the "useful" work; MFU basis)
    pub model_flops_per_token: f64,
    /// tokens per optimizer step over the whole job (global batch × seq)
    pub tokens_per_step: f64,
    /// tokens per micro-batch per GPU
    pub tokens_per_micro: f64,
    /// micro-batches per optimizer step on each rank
    pub micro_steps: f64,
    /// bytes each GPU sends per optimizer step for DP/ZeRO collectives
    pub dp_bytes_per_step: f64,
    /// which overlap applies to them
    pub zero3: bool,
    /// bytes each GPU all-reduces per step for TP
    pub tp_bytes_per_step: f64,
    /// bytes moved host↔GPU per step per GPU (offload)
    pub offload_bytes_per_step: f64,
    /// parameters the CPU optimizer updates per step on one machine
    pub cpu_params_per_step: f64,
    pub pp: f64,
    /// QLoRA dequantisation factor applies
    pub qlora: bool,
    /// job spans more than one machine
    pub multi_node: bool,
    pub gpus: f64,
    /// tensor-parallel degree (a TP group stays inside one NVLink domain)
    #[serde(default = "one")]
    pub tp: f64,
    /// machines the job spans (set per offer by the search; 1 by default)
    #[serde(default = "one")]
    pub machines: f64,
    /// bytes each GPU sends to its next pipeline stage per step: the
    /// activations forward and their gradients backward (Megatron-LM's
    /// `p2p_communication`, scattered over the TP ranks)
    #[serde(default)]
    pub pp_bytes_per_step: f64,
    /// virtual pipeline stages per rank (interleaved 1F1B; 1: plain 1F1B)
    #[serde(default = "one")]
    pub virtual_stages: f64,
    /// the peak rate the precision computes at (fp32 without TF32, or 16-bit tensor cores)
    pub peak: PeakKind,
    /// MoE training with expert parallelism (Megatron `--expert-model-parallel-size`):
    /// all-to-alls per step on each GPU (a dispatch and a combine per MoE layer of
    /// the stage in forward, the same two in backward, per micro-batch); 0 without EP
    #[serde(default)]
    pub a2a_per_step: f64,
    /// bytes one GPU sends per step in those all-to-alls
    #[serde(default)]
    pub a2a_bytes_per_step: f64,
    /// expert-parallel degree (the all-to-all group; 1: none)
    #[serde(default = "one")]
    pub ep: f64,
    /// expert-tensor-parallel degree (Megatron `--expert-tensor-parallel-size`;
    /// its ranks sit next to each other in the expert grid, `tp-ep-dp-pp`)
    #[serde(default = "one")]
    pub etp: f64,
    /// bytes one GPU sends per step in the expert-TP group's all-gathers and
    /// reduce-scatters of the dispatched tokens ([`crate::work::train_etp_bytes`]); 0 without
    #[serde(default)]
    pub etp_bytes_per_step: f64,
    /// the FLOP-weighted mean of 1 / tiles over a layer's per-GPU GEMMs
    /// ([`GemmShapes::new`]; dense transformers): all the GEMM-shape rule needs
    /// per candidate, kept as one number so the search's memo stays small.
    /// None: the micro-batch token rule ([`TimeModel::micro_batch_efficiency`])
    #[serde(default)]
    pub gemm_inverse_tiles: Option<f64>,
    /// context-parallel degree (the ring of K/V blocks; 1: none)
    #[serde(default = "one")]
    pub cp: f64,
    /// bytes one GPU sends per step round the context-parallel ring
    /// ([`crate::work::train_cp_bytes`])
    #[serde(default)]
    pub cp_bytes_per_step: f64,
    /// the share of attention time the ring's exchange can hide behind
    /// ([`crate::work::cp_hidden_share`])
    #[serde(default)]
    pub cp_hidden_share: f64,
    /// attention's share of the FLOPs of a step (with CP; 0 without)
    #[serde(default)]
    pub attn_share: f64,
    /// FP8 training: the share of `flops_per_token` in the FP8 linear GEMMs
    /// ([`crate::work::fp8_gemm_flops_per_token`]); 0 otherwise
    #[serde(default)]
    pub fp8_gemm_share: f64,
    /// FP8 training: HBM bytes per trained token (whole model) of the casts to FP8
    /// ([`crate::work::fp8_cast_bytes_per_token`]); 0 otherwise
    #[serde(default)]
    pub fp8_cast_bytes_per_token: f64,
    /// hybrid sharding (HSDP): replicas of the ZeRO-3 shard group, one per
    /// machine (1: plain sharding); `dp_bytes_per_step` then covers the shard
    /// group's all-gathers and reduce-scatters only
    #[serde(default = "one")]
    pub dp_replicate: f64,
    /// bytes one GPU sends per step in HSDP's all-reduce of its gradient shard
    /// across the replicas (`work::hsdp_replicate_bytes`); 0 without HSDP
    #[serde(default)]
    pub replicate_bytes_per_step: f64,
    /// DeepSpeed ZeRO++ hpZ: ranks of the secondary partition's group, one
    /// machine (1: none); `dp_bytes_per_step` then covers the collectives over
    /// every rank only (the first forward's all-gather, the reduce-scatters)
    #[serde(default = "one")]
    pub hpz: f64,
    /// bytes one GPU sends per step in hpZ's all-gathers inside its group
    /// (`work::hpz_gathers`); 0 without hpZ
    #[serde(default)]
    pub hpz_intra_bytes_per_step: f64,
}

fn one() -> f64 {
    1.0
}

/// Seconds per optimizer step, split so the output can say where time goes.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct StepTime {
    pub compute_s: f64,
    /// compute without recompute, pipeline bubble or small-batch loss at MFU: the ideal
    pub ideal_s: f64,
    pub comm_s: f64,
    pub offload_s: f64,
    pub bubble_s: f64,
    pub total_s: f64,
    /// model FLOPs utilisation this step implies: the model's FLOPs (no
    /// recompute) over the GPUs' dense peak for the whole step
    #[serde(default)]
    pub mfu: f64,
}

impl StepTime {
    /// How much slower than the ideal (≥ 1).
    pub fn slowdown(&self) -> f64 {
        if self.ideal_s > 0.0 {
            self.total_s / self.ideal_s
        } else {
            1.0
        }
    }
}

impl TimeModel {
    /// Time of one optimizer step of `w` on `gpus` copies of `dev`.
    pub fn train_step(&self, w: &TrainWork, dev: &Device, cpu_cores: Option<u64>) -> StepTime {
        let per_gpu = self.train_rate(w, dev) * dev.mfu * if w.qlora { self.qlora_speed } else { 1.0 };
        let eff = self.compute_efficiency(w, dev);
        let total_flops = w.flops_per_token * w.tokens_per_step;
        let ideal = w.model_flops_per_token * w.tokens_per_step / (w.gpus * per_gpu);
        // FP8 training: the casts to FP8 are memory-bound kernels on the critical path
        let casts = w.fp8_cast_bytes_per_token * w.tokens_per_step / (w.gpus * dev.mem_bw.max(1.0));
        let compute = total_flops / (w.gpus * per_gpu * eff) + casts;
        // 1F1B idles (p − 1)/m of the step; the interleaved schedule with v
        // virtual stages per rank (p − 1)/(v·m) (Narayanan et al. 2021 §2.2.2)
        let bubble = if w.pp > 1.0 {
            compute * (w.pp - 1.0) / (w.virtual_stages.max(1.0) * w.micro_steps.max(1.0))
        } else {
            0.0
        };
        let dp_comm = self.dp_comm_s(w, dev);
        let overlap = if w.zero3 { self.zero3_overlap } else { self.dp_overlap };
        let exposed_dp = (dp_comm - overlap * compute).max(0.0);
        // TP all-reduces sit on the critical path: no overlap.
        let tp_comm = w.tp_bytes_per_step / dev.intra_bw;
        let cores = cpu_cores.unwrap_or(self.default_cpu_cores).max(1) as f64;
        let offload = if w.offload_bytes_per_step > 0.0 || w.cpu_params_per_step > 0.0 {
            w.offload_bytes_per_step / dev.host_bw + w.cpu_params_per_step / (cores * self.cpu_adam_params_per_core_s)
        } else {
            0.0
        };
        // stage-to-stage sends sit on the critical path of 1F1B (no overlap);
        // between machines each GPU has its share of the fabric
        let pp_bw = if w.machines > 1.0 { dev.inter_bw.unwrap_or(dev.intra_bw) } else { dev.intra_bw };
        let pp_comm = w.pp_bytes_per_step / pp_bw;
        let comm = exposed_dp
            + tp_comm
            + pp_comm
            + self.train_all_to_all_s(w, dev)
            + self.expert_tp_s(w, dev)
            + self.context_parallel_s(w, dev, compute);
        let total = compute + bubble + comm + offload;
        let mfu = if total > 0.0 && dev.flops > 0.0 {
            w.model_flops_per_token * w.tokens_per_step / (w.gpus * dev.flops * total)
        } else {
            0.0
        };
        StepTime {
            compute_s: compute,
            ideal_s: ideal,
            comm_s: comm,
            offload_s: offload,
            bubble_s: bubble,
            total_s: total,
            mfu,
        }
    }

    /// The dense rate a training step computes at, FLOP/s per GPU: the
    /// precision's peak, or under FP8 training the harmonic blend of the FP8
    /// peak for its linear GEMMs (`fp8_gemm_share` of the FLOPs) and the 16-bit
    /// peak for the rest (attention, which TransformerEngine and torchao run in
    /// bf16 flash attention, the output head, recompute of those), both at the
    /// architecture's MFU: 1 / (share / fp8 + (1 − share) / bf16).
    pub fn train_rate(&self, w: &TrainWork, dev: &Device) -> f64 {
        if w.fp8_gemm_share <= 0.0 || dev.peak != PeakKind::Fp8 || dev.bf16_flops <= 0.0 {
            return dev.flops;
        }
        let share = w.fp8_gemm_share.min(1.0);
        1.0 / (share / dev.flops + (1.0 - share) / dev.bf16_flops)
    }

    /// Exposed seconds of context parallelism's K/V ring per step: its bytes
    /// over NVLink while the TP × CP ranks fit in one machine (Megatron-LM's
    /// rank order `tp-cp-ep-dp-pp` puts a CP group next to its TP ranks),
    /// else over this GPU's share of the fabric; less the part hidden behind
    /// attention (`cp_hidden_share` of attention's share of `compute`:
    /// TransformerEngine overlaps each hop with the previous block's attention).
    pub fn context_parallel_s(&self, w: &TrainWork, dev: &Device, compute: f64) -> f64 {
        if w.cp <= 1.0 || w.cp_bytes_per_step <= 0.0 {
            return 0.0;
        }
        let per_machine = (w.gpus / w.machines.max(1.0)).max(1.0);
        let bw = if w.tp.max(1.0) * w.cp > per_machine { dev.inter_bw.unwrap_or(dev.intra_bw) } else { dev.intra_bw };
        let ring = w.cp_bytes_per_step / bw;
        (ring - w.cp_hidden_share * w.attn_share * compute).max(0.0)
    }

    /// Seconds of DP/ZeRO collectives per step, hierarchical across machines
    /// as NCCL runs them (rings/trees inside the machine over NVLink, then
    /// between machines; NCCL's `NCCL_ALGO` topology-aware rings): ranks are
    /// laid out TP fastest, then DP, then PP (Megatron-LM's
    /// `RankGenerator` order `tp-cp-ep-dp-pp`), so a DP group has
    /// `dp_local` = min(dp, GPUs per machine / tp) ranks in each machine and
    /// spans dp / dp_local machines. Inside the machine every GPU moves its
    /// `b` bytes over NVLink/PCIe; between machines a reduce-scatter inside the
    /// machine first leaves each of the machine's GPUs 1/dp_local of the
    /// traffic, so a machine sends (GPUs / dp_local) × b × (m−1)/m over the
    /// fabric it shares: b × (m−1)/m / (per-GPU fabric share × dp_local).
    /// NCCL pipelines the two levels (chunks stream through the intra- and
    /// inter-machine hops of one ring or tree), so the slower level sets the
    /// time, not their sum.
    pub fn dp_comm_s(&self, w: &TrainWork, dev: &Device) -> f64 {
        if w.dp_replicate > 1.0 {
            return self.hsdp_comm_s(w, dev);
        }
        // ZeRO++ hpZ: the gathers from the secondary partition run inside the
        // machine (its group) over NVLink/PCIe, after the collectives over every rank
        let hpz = if w.hpz > 1.0 { w.hpz_intra_bytes_per_step / dev.intra_bw } else { 0.0 };
        self.all_ranks_s(w, dev, w.dp_bytes_per_step) + hpz
    }

    /// Seconds of `b` bytes per GPU of DP/ZeRO collectives over every
    /// data-parallel rank, hierarchical across machines ([`Self::dp_comm_s`]).
    fn all_ranks_s(&self, w: &TrainWork, dev: &Device, b: f64) -> f64 {
        let machines = w.machines.max(1.0);
        if machines <= 1.0 || b <= 0.0 {
            return b / dev.intra_bw;
        }
        let tp = w.tp.max(1.0);
        let dp = (w.gpus / (tp * w.pp.max(1.0))).max(1.0);
        let per_machine = (w.gpus / machines).max(1.0);
        let dp_local = dp.min((per_machine / tp).max(1.0)).max(1.0);
        let spans = (dp / dp_local).max(1.0);
        let inter_bw = dev.inter_bw.unwrap_or(dev.intra_bw);
        let intra = if dp_local > 1.0 { b / dev.intra_bw } else { 0.0 };
        intra.max(b * (spans - 1.0) / spans / (inter_bw * dp_local))
    }
}

impl TimeModel {
    /// Seconds of hybrid sharding's collectives per step (PyTorch FSDP
    /// `HYBRID_SHARD`, Zhao et al. 2023 §3.2.2 and §4): the shard group is
    /// one machine, so its all-gathers and reduce-scatters (`dp_bytes_per_step`,
    /// ZeRO-3's traffic over g ranks) run over NVLink/PCIe inside it; then each
    /// GPU all-reduces its 1/g gradient shard with the same shard of the other
    /// replicas over its share of the fabric (`replicate_bytes_per_step`). FSDP
    /// issues the all-reduce after the reduce-scatter of the same unit
    /// (`_reduce_grad`), on the fabric while the next unit's reduce-scatter
    /// uses NVLink; counted here as their sum, the slower bound.
    pub fn hsdp_comm_s(&self, w: &TrainWork, dev: &Device) -> f64 {
        let intra = w.dp_bytes_per_step / dev.intra_bw;
        let inter_bw = if w.machines > 1.0 { dev.inter_bw.unwrap_or(dev.intra_bw) } else { dev.intra_bw };
        intra + w.replicate_bytes_per_step / inter_bw
    }
}

/// What an inference setup does per decode step and per prefill, per GPU.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InferWork {
    /// bytes one GPU reads per decode step (its weights + its KV cache)
    pub bytes_per_step: f64,
    /// sequences one replica decodes together
    pub concurrency: f64,
    /// independent copies of the model (each tp × pp GPUs), sharing the sequences
    pub replicas: f64,
    /// FLOPs of one decoded token, whole model (2·N active + attention over the context)
    pub decode_flops_per_token: f64,
    pub peak: PeakKind,
    /// FLOPs of one prefill of `batch × context` tokens, whole model
    pub prefill_flops: f64,
    pub tp: f64,
    pub pp: f64,
    pub layers: f64,
    /// active parameters (2 FLOPs each per prefilled token)
    #[serde(default)]
    pub params_active: f64,
    /// hidden size (the attention term of a prefill: 2 · layers · hidden · position)
    #[serde(default)]
    pub hidden: f64,
    /// data-parallel attention groups (MoE serving; 1: none): attention runs
    /// at TP `tp / dp_attention`, with no all-reduce when that is 1
    #[serde(default = "one")]
    pub dp_attention: f64,
    /// MoE layers whose tokens are dispatched to and combined from the
    /// expert ranks by all-to-all (data-parallel attention; 0 otherwise)
    #[serde(default)]
    pub a2a_layers: f64,
    /// bytes one GPU sends per decode step in those all-to-alls
    #[serde(default)]
    pub a2a_bytes_per_step: f64,
    /// tokens of one prefill (`prefill_flops`' batch × prompt): what its TP
    /// all-reduces carry
    #[serde(default)]
    pub prefill_tokens: f64,
    /// machines one replica spans (its pipeline stages cross machines over
    /// the fabric at machines − 1 boundaries; set by the search per offer)
    #[serde(default = "one")]
    pub machines: f64,
}

impl InferWork {
    /// Bytes one GPU moves in the tensor-parallel all-reduces of `tokens`
    /// tokens through the model: two per layer (after attention's output
    /// projection and after the MLP's down projection, the row-parallel
    /// linears: vLLM `RowParallelLinear.forward` →
    /// `tensor_model_parallel_all_reduce`; Megatron-LM, Shoeybi et al. 2019
    /// §3), each of tokens × hidden 16-bit activations (fp8 weights still
    /// reduce bf16 outputs), a ring all-reduce sending 2(t − 1)/t of it per
    /// GPU. Engines run them between the matmuls, not overlapped: at 4,096
    /// prompt tokens of a 70B model that is 10.7 GB per GPU at TP 2, 0.4 s
    /// over PCIe 4.0 (about its compute time on two H100s). 0 without TP (or when data-parallel attention leaves
    /// attention groups of one GPU: then the experts' all-to-all is
    /// counted instead).
    pub fn tp_allreduce_bytes(&self, tokens: f64) -> f64 {
        let t = self.tp / self.dp_attention.max(1.0);
        if t <= 1.0 {
            return 0.0;
        }
        2.0 * self.layers * tokens * self.hidden * 2.0 * 2.0 * (t - 1.0) / t
    }

    /// FLOPs to prefill one sequence's prompt of `prompt` tokens, whole
    /// model: 2·N per token plus causal attention over the positions before
    /// it, 2·L·h·prompt per token on average (the QKᵀ and AV matmuls over
    /// half the prompt² scores, ×2 FLOPs each).
    pub fn prompt_flops(&self, prompt: f64) -> f64 {
        (2.0 * self.params_active + 2.0 * self.layers * self.hidden * prompt) * prompt
    }
}

/// The requests a serving plan is timed for: each prefills `prompt` tokens,
/// then generates `output` ones.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Requests {
    pub prompt: u64,
    pub output: u64,
    /// `output` is the planner's assumption (half the context), not the user's `--output-len`
    pub assumed: bool,
}

impl Requests {
    /// Requests of `context` tokens generating `output_len` each (None:
    /// half the context, assumed). `None` when the output leaves no prompt.
    pub fn of(context: u64, output_len: Option<u64>) -> Option<Requests> {
        let context = context.max(1);
        let (output, assumed) = match output_len {
            Some(o) => (o, false),
            None => ((context / 2).max(1), true),
        };
        (output >= 1 && output < context).then_some(Requests { prompt: context - output, output, assumed })
    }
}

/// Decode and prefill throughput.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct InferTime {
    pub decode_step_s: f64,
    /// generated tokens per second over all sequences
    pub decode_tokens_per_s: f64,
    pub prefill_s: f64,
}

impl TimeModel {
    pub fn infer(&self, w: &InferWork, dev: &Device) -> InferTime {
        let read = w.bytes_per_step / (dev.mem_bw * self.decode_bw_efficiency);
        // a large batch turns a decode step compute-bound: every sequence's token
        // costs its FLOPs, split over the TP ranks of a stage
        let compute =
            w.concurrency * w.decode_flops_per_token / w.pp.max(1.0) / (w.tp.max(1.0) * dev.flops * self.prefill_mfu);
        // pipeline stages run one after another for a decode step
        let mut step = read.max(compute) * w.pp.max(1.0);
        let lat = if dev.link == Link::Nvlink { NVLINK_ALLREDUCE_S } else { PCIE_ALLREDUCE_S };
        if w.tp / w.dp_attention.max(1.0) > 1.0 {
            step += 2.0 * w.layers * lat + w.tp_allreduce_bytes(w.concurrency) / dev.intra_bw;
        }
        step += self.all_to_all_s(w, dev, lat);
        step += self.stage_sends_s(w, dev, lat, w.concurrency);
        let prefill = w.prefill_flops / (w.tp.max(1.0) * dev.flops * self.prefill_mfu)
            + w.tp_allreduce_bytes(w.prefill_tokens) / dev.intra_bw
            + self.stage_sends_s(w, dev, lat, w.prefill_tokens);
        InferTime {
            decode_step_s: step,
            decode_tokens_per_s: if step > 0.0 { w.replicas.max(1.0) * w.concurrency / step } else { 0.0 },
            prefill_s: prefill,
        }
    }

    /// Generated tokens/s of a server running `r`-shaped requests: each
    /// replica takes `concurrency` requests together, prefills their prompts
    /// (compute-bound, at the prefill MFU over its TP × PP GPUs), then decodes
    /// their outputs a step at a time (`t`, from [`TimeModel::infer`]); the
    /// two are added (the engine's chunked prefill can hide part of one
    /// behind the other: this is the slower bound). A 128K-token prompt on an
    /// 8B model is ~2.2 PFLOP, tens of seconds on one card: decode-only
    /// figures would hide it.
    pub fn served_tokens_per_s(&self, w: &InferWork, t: &InferTime, dev: &Device, r: Requests) -> f64 {
        let output = r.output as f64;
        let prompts = w.concurrency * r.prompt as f64;
        let lat = if dev.link == Link::Nvlink { NVLINK_ALLREDUCE_S } else { PCIE_ALLREDUCE_S };
        let prefill = w.concurrency * w.prompt_flops(r.prompt as f64)
            / (w.tp.max(1.0) * w.pp.max(1.0) * dev.flops * self.prefill_mfu)
            + w.tp_allreduce_bytes(prompts) / w.pp.max(1.0) / dev.intra_bw
            + self.stage_sends_s(w, dev, lat, prompts) / w.pp.max(1.0);
        let round = prefill + output * t.decode_step_s;
        if round > 0.0 {
            w.replicas.max(1.0) * w.concurrency * output / round
        } else {
            0.0
        }
    }
}

impl TimeModel {
    /// Seconds of the stage-to-stage sends of `tokens` tokens' activations
    /// through one replica's pipeline: at each of its pp − 1 boundaries one
    /// send of tokens × hidden 16-bit values, twice (vLLM's models hand the
    /// next stage `IntermediateTensors` of `hidden_states` and `residual`,
    /// `LlamaModel.forward`), each TP rank sending 1/tp of it and the next
    /// stage all-gathering (`GroupCoordinator.send_tensor_dict` with
    /// `all_gather_group`), its latency and its bytes at the link it crosses — the fabric (`FABRIC_SENDRECV_S`,
    /// each GPU's share of the machine's fabric) at the machines − 1
    /// boundaries between machines, the machine's own link at the rest.
    pub fn stage_sends_s(&self, w: &InferWork, dev: &Device, lat: f64, tokens: f64) -> f64 {
        let boundaries = (w.pp - 1.0).max(0.0);
        if boundaries == 0.0 {
            return 0.0;
        }
        let crossing = (w.machines.max(1.0) - 1.0).min(boundaries);
        // sent by each TP rank of the stage, its share of the activations
        let bytes = 2.0 * tokens * w.hidden * 2.0 / w.tp.max(1.0);
        let inside = (boundaries - crossing) * (lat + bytes / dev.intra_bw);
        let across = crossing * (FABRIC_SENDRECV_S + bytes / dev.inter_bw.unwrap_or(dev.intra_bw));
        inside + across
    }

    /// Seconds of a training step's expert all-to-alls (Megatron EP): each a
    /// collective of one small-message latency plus its bytes, on the critical
    /// path (`MoEAlltoAllTokenDispatcher.token_dispatch` / `token_combine`,
    /// megatron/core/transformer/moe/token_dispatcher.py, run between the router
    /// and the experts; the default dispatcher does not overlap them). Over
    /// NVLink while the EP group fits one machine, else over the fabric.
    pub fn train_all_to_all_s(&self, w: &TrainWork, dev: &Device) -> f64 {
        if w.a2a_per_step <= 0.0 {
            return 0.0;
        }
        let per_machine = (w.gpus / w.machines.max(1.0)).max(1.0);
        // an EP group's ranks are ETP apart in Megatron's expert grid (`tp-ep-dp-pp`)
        let (bw, lat) = if w.ep * w.etp.max(1.0) <= per_machine || dev.inter_bw.is_none() {
            (dev.intra_bw, if dev.link == Link::Nvlink { NVLINK_ALLREDUCE_S } else { PCIE_ALLREDUCE_S })
        } else {
            (dev.inter_bw.unwrap_or(dev.intra_bw), PCIE_ALLREDUCE_S)
        };
        w.a2a_per_step * lat + w.a2a_bytes_per_step / bw
    }

    /// Seconds of a training step's expert-tensor-parallel collectives: the
    /// all-gather of the dispatched tokens before the experts and the
    /// reduce-scatter of their outputs (`dispatch_postprocess` /
    /// `combine_preprocess`, megatron/core/transformer/moe/token_dispatcher.py),
    /// on the critical path like TP's; over NVLink while the ETP group (the
    /// fastest axis of the expert grid) fits one machine, else the fabric.
    pub fn expert_tp_s(&self, w: &TrainWork, dev: &Device) -> f64 {
        if w.etp_bytes_per_step <= 0.0 {
            return 0.0;
        }
        let per_machine = (w.gpus / w.machines.max(1.0)).max(1.0);
        let bw = if w.etp <= per_machine { dev.intra_bw } else { dev.inter_bw.unwrap_or(dev.intra_bw) };
        w.etp_bytes_per_step / bw
    }

    /// Seconds of a decode step's expert all-to-alls (data-parallel
    /// attention): a dispatch and a combine per MoE layer, each a collective
    /// of one small-message latency, plus the bytes over NVLink (the TP group
    /// is one machine's NVLink domain). DeepSeek-V3 technical report §3.2.2
    /// and DeepEP's low-latency kernels run exactly these two per layer.
    pub fn all_to_all_s(&self, w: &InferWork, dev: &Device, lat: f64) -> f64 {
        if w.a2a_layers <= 0.0 {
            return 0.0;
        }
        2.0 * w.a2a_layers * lat + w.a2a_bytes_per_step / dev.intra_bw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step with no work and no parallelism: each test sets what it times.
    fn work() -> TrainWork {
        TrainWork {
            flops_per_token: 0.0,
            model_flops_per_token: 0.0,
            tokens_per_step: 0.0,
            tokens_per_micro: 0.0,
            micro_steps: 1.0,
            dp_bytes_per_step: 0.0,
            zero3: false,
            tp_bytes_per_step: 0.0,
            offload_bytes_per_step: 0.0,
            cpu_params_per_step: 0.0,
            pp: 1.0,
            qlora: false,
            multi_node: false,
            gpus: 1.0,
            tp: 1.0,
            machines: 1.0,
            pp_bytes_per_step: 0.0,
            virtual_stages: 1.0,
            peak: PeakKind::Bf16,
            a2a_per_step: 0.0,
            a2a_bytes_per_step: 0.0,
            ep: 1.0,
            etp: 1.0,
            etp_bytes_per_step: 0.0,
            gemm_inverse_tiles: None,
            cp: 1.0,
            cp_bytes_per_step: 0.0,
            cp_hidden_share: 0.0,
            attn_share: 0.0,
            fp8_gemm_share: 0.0,
            fp8_cast_bytes_per_token: 0.0,
            dp_replicate: 1.0,
            replicate_bytes_per_step: 0.0,
            hpz: 1.0,
            hpz_intra_bytes_per_step: 0.0,
        }
    }

    fn a100() -> GpuSpec {
        GpuSpec {
            id: "a100-80gb-sxm".into(),
            name: "A100".into(),
            aliases: vec![],
            memory_mib: 81920,
            memory_gb: 80.0,
            bandwidth_gbs: 2039.0,
            bf16_tflops: 312.0,
            tf32_tflops: None,
            fp32_tflops: None,
            fp8_tflops: None,
            nvlink_gbs: Some(600.0),
            pcie_gen: 4,
            mig_max: 7,
            bf16: true,
            arch: Some(GpuArch::Ampere),
            confirmed: false,
            source: "t".into(),
        }
    }

    #[test]
    fn compute_bound_step_by_hand() {
        let tm = TimeModel::default();
        let dev = tm.device(&a100(), Link::Nvlink, 1.0, None, PeakKind::Bf16);
        // NVLink 600 GB/s aggregate → 300 per direction × 0.75 = 225 GB/s
        assert!((dev.intra_bw - 225e9).abs() < 1.0);
        let w = TrainWork {
            flops_per_token: 6.0e9,
            model_flops_per_token: 6.0e9,
            tokens_per_step: 8.0 * 2048.0,
            tokens_per_micro: 2048.0,
            gpus: 8.0,
            ..work()
        };
        let t = tm.train_step(&w, &dev, None);
        // ideal: 6e9 × 16384 / (8 × 312e12 × 0.55) = 9.8304e13 / 1.37280e15 = 0.071608 s
        assert!((t.ideal_s - 0.071608).abs() < 1e-6, "{}", t.ideal_s);
        // micro-batch efficiency 2048 / 2560 = 0.8 → slowdown 1.25
        assert!((t.slowdown() - 1.25).abs() < 1e-9);
    }

    /// The interleaved bubble by hand (Narayanan et al. 2021 §2.2.2): p 8,
    /// m 16 micro-batches, compute C: 1F1B idles (8 − 1)/16 = 0.4375 C; with
    /// v 4 virtual stages (8 − 1)/(4 × 16) = 0.109375 C, and the stage sends
    /// are v times 1F1B's: 4 × 2.25 GB over 225 GB/s = 40 ms instead of 10.
    #[test]
    fn interleaved_stages_shrink_the_bubble_by_v() {
        let tm = TimeModel::default();
        let dev = tm.device(&a100(), Link::Nvlink, 1.0, None, PeakKind::Bf16);
        let w = |v: f64| TrainWork {
            flops_per_token: 6.0e9,
            model_flops_per_token: 6.0e9,
            tokens_per_step: 16.0 * 2048.0,
            tokens_per_micro: 2048.0,
            micro_steps: 16.0,
            pp: 8.0,
            gpus: 8.0,
            pp_bytes_per_step: 2.25e9 * v,
            virtual_stages: v,
            ..work()
        };
        let (a, b) = (tm.train_step(&w(1.0), &dev, None), tm.train_step(&w(4.0), &dev, None));
        assert!((a.bubble_s / a.compute_s - 0.4375).abs() < 1e-12, "{}", a.bubble_s / a.compute_s);
        assert!((b.bubble_s / b.compute_s - 0.109375).abs() < 1e-12, "{}", b.bubble_s / b.compute_s);
        assert!((a.comm_s - 0.01).abs() < 1e-9 && (b.comm_s - 0.04).abs() < 1e-9, "{} {}", a.comm_s, b.comm_s);
        assert!(b.total_s < a.total_s);
    }

    #[test]
    fn megatron_expert_all_to_alls_cost_latency_and_bytes_on_the_critical_path() {
        // MoEAlltoAllTokenDispatcher: 4 all-to-alls per MoE layer per micro-batch (dispatch and
        // combine, forward and backward). 32 MoE layers, 1 micro-batch: 128 collectives;
        // 1e9 bytes over NVLink (A100: 225 GB/s effective) = 1/225 s
        let tm = TimeModel::default();
        let dev = tm.device(&a100(), Link::Nvlink, 1.0, None, PeakKind::Bf16);
        let mut w = TrainWork {
            flops_per_token: 1.0,
            model_flops_per_token: 1.0,
            tokens_per_step: 1.0,
            tokens_per_micro: 1e9,
            gpus: 8.0,
            a2a_per_step: 128.0,
            a2a_bytes_per_step: 1e9,
            ep: 8.0,
            ..work()
        };
        let expect = 128.0 * NVLINK_ALLREDUCE_S + 1e9 / 225e9;
        assert!((tm.train_all_to_all_s(&w, &dev) - expect).abs() < 1e-12);
        let with = tm.train_step(&w, &dev, None).comm_s;
        w.a2a_per_step = 0.0;
        assert!((with - tm.train_step(&w, &dev, None).comm_s - expect).abs() < 1e-12);
    }

    /// The expert-TP group's all-gathers and reduce-scatters (token_dispatcher.py
    /// `dispatch_postprocess` / `combine_preprocess`): 4.5e9 bytes per step over A100
    /// NVLink (225 GB/s effective) = 0.02 s, added to the step's communication; an
    /// ETP group wider than a machine's 8 GPUs pays the fabric (here none: NVLink).
    /// The EP all-to-all leaves NVLink once EP × ETP spans more than a machine.
    #[test]
    fn expert_tensor_parallel_collectives_by_hand() {
        let tm = TimeModel::default();
        let dev = tm.device(&a100(), Link::Nvlink, 1.0, Some(25.0), PeakKind::Bf16);
        let w = TrainWork {
            flops_per_token: 1.0,
            model_flops_per_token: 1.0,
            tokens_per_step: 1.0,
            gpus: 16.0,
            machines: 2.0,
            etp: 2.0,
            etp_bytes_per_step: 4.5e9,
            ..work()
        };
        assert!((tm.expert_tp_s(&w, &dev) - 4.5e9 / 225e9).abs() < 1e-12);
        let none = TrainWork { etp_bytes_per_step: 0.0, ..w };
        let with = tm.train_step(&w, &dev, None).comm_s;
        assert!((with - tm.train_step(&none, &dev, None).comm_s - 0.02).abs() < 1e-12);
        // EP 8 × ETP 2 = 16 ranks over 2 machines of 8: the all-to-all crosses the fabric
        let a2a = TrainWork { a2a_per_step: 1.0, a2a_bytes_per_step: 1e9, ep: 8.0, ..w };
        let inside = TrainWork { etp: 1.0, ..a2a };
        assert!(tm.train_all_to_all_s(&a2a, &dev) > tm.train_all_to_all_s(&inside, &dev));
    }

    /// Context parallelism's ring by hand: 9e9 bytes per step over A100 NVLink
    /// (225 GB/s effective) = 0.04 s. Megatron (TransformerEngine overlaps each hop
    /// with the previous block's attention) hides it behind attention's share of
    /// compute: 0.5 of 0.1 s = 0.05 s ≥ 0.04 s, nothing exposed; torchtitan's
    /// all-gather hides behind the local block only, 1/cp = 1/4 of that: 0.0125 s,
    /// so 0.0275 s is exposed. Across machines (TP 8 × CP 4 on 8-GPU machines) the
    /// ring runs on the fabric.
    #[test]
    fn context_parallel_ring_hides_behind_attention_as_the_engine_overlaps() {
        let tm = TimeModel::default();
        let dev = tm.device(&a100(), Link::Nvlink, 1.0, None, PeakKind::Bf16);
        let w = TrainWork {
            flops_per_token: 1.0,
            model_flops_per_token: 1.0,
            tokens_per_step: 1.0,
            tokens_per_micro: 1.0,
            gpus: 8.0,
            tp: 2.0,
            cp: 4.0,
            cp_bytes_per_step: 9e9,
            cp_hidden_share: 1.0,
            attn_share: 0.5,
            ..work()
        };
        assert!((9e9 / dev.intra_bw - 0.04).abs() < 1e-12, "{}", dev.intra_bw);
        assert_eq!(tm.context_parallel_s(&w, &dev, 0.1), 0.0);
        let titan = TrainWork { cp_hidden_share: 0.25, ..w };
        assert!((tm.context_parallel_s(&titan, &dev, 0.1) - 0.0275).abs() < 1e-12);
        let none = TrainWork { cp: 1.0, ..w };
        assert_eq!(tm.context_parallel_s(&none, &dev, 0.0), 0.0);
        let across = TrainWork { tp: 8.0, gpus: 32.0, machines: 4.0, ..w };
        let slow = tm.device(&a100(), Link::Nvlink, 1.0, Some(25.0), PeakKind::Bf16);
        assert!(tm.context_parallel_s(&across, &slow, 0.0) > tm.context_parallel_s(&w, &slow, 0.0));
    }

    /// FP8 training's rate by hand on an H100 SXM (989 TFLOP/s bf16, 1979 fp8): with
    /// 80 % of the FLOPs in FP8 GEMMs, 1 / (0.8 / 1979e12 + 0.2 / 989e12) =
    /// 1 / (4.0424e-16 + 2.0222e-16) = 1.6489e15 FLOP/s; without FP8 GEMMs (or on a
    /// card timed at its 16-bit peak) the precision's peak.
    #[test]
    fn fp8_training_blends_the_fp8_and_bf16_peaks_by_flops() {
        let tm = TimeModel::default();
        let h100 = GpuSpec { bf16_tflops: 989.0, fp8_tflops: Some(1979.0), ..a100() };
        let dev = tm.device(&h100, Link::Nvlink, 1.0, None, PeakKind::Fp8);
        let w = TrainWork {
            flops_per_token: 1.0,
            model_flops_per_token: 1.0,
            tokens_per_step: 1.0,
            tokens_per_micro: 1.0,
            peak: PeakKind::Fp8,
            fp8_gemm_share: 0.8,
            ..work()
        };
        let expect = 1.0 / (0.8 / 1979e12 + 0.2 / 989e12);
        assert!((tm.train_rate(&w, &dev) / expect - 1.0).abs() < 1e-12, "{}", tm.train_rate(&w, &dev));
        assert!((expect - 1.6489e15).abs() < 1e11);
        let bf16 = tm.device(&h100, Link::Nvlink, 1.0, None, PeakKind::Bf16);
        assert_eq!(tm.train_rate(&w, &bf16), 989e12);
        assert_eq!(tm.train_rate(&TrainWork { fp8_gemm_share: 0.0, ..w }, &dev), 1979e12);
        // the casts are memory-bound time on top: 3.35e12 bytes per token at 3.35 TB/s = 1 s more
        let h = GpuSpec { bandwidth_gbs: 3350.0, ..h100 };
        let d = tm.device(&h, Link::Nvlink, 1.0, None, PeakKind::Fp8);
        let a = tm.train_step(&w, &d, None).compute_s;
        let b = tm.train_step(&TrainWork { fp8_cast_bytes_per_token: 3.35e12, ..w }, &d, None).compute_s;
        assert!((b - a - 1.0).abs() < 1e-9, "{a} {b}");
    }

    #[test]
    fn pcie_offload_and_comm_cost() {
        let tm = TimeModel::default();
        let mut g = a100();
        g.nvlink_gbs = None;
        let dev = tm.device(&g, Link::Nvlink, 1.0, None, PeakKind::Bf16);
        assert_eq!(dev.link, Link::Pcie);
        assert_eq!(dev.intra_bw, 25e9);
        let w = TrainWork {
            flops_per_token: 1.0,
            model_flops_per_token: 1.0,
            tokens_per_step: 1.0,
            tokens_per_micro: 1e9,
            dp_bytes_per_step: 25e9,
            zero3: true,
            offload_bytes_per_step: 25e9,
            cpu_params_per_step: 16.0 * 1.5e8,
            ..work()
        };
        let t = tm.train_step(&w, &dev, Some(16));
        // 25 GB over 25 GB/s = 1 s of comm (compute negligible), 1 s PCIe + 1 s CPU Adam
        assert!((t.comm_s - 1.0).abs() < 1e-6);
        assert!((t.offload_s - 2.0).abs() < 1e-6);
    }

    #[test]
    fn decode_is_bandwidth_bound() {
        let tm = TimeModel::default();
        let dev = tm.device(&a100(), Link::Nvlink, 1.0, None, PeakKind::Bf16);
        let w = InferWork {
            bytes_per_step: 13.0e9,
            concurrency: 1.0,
            replicas: 1.0,
            decode_flops_per_token: 13.0e9,
            peak: PeakKind::Bf16,
            prefill_flops: 0.0,
            tp: 1.0,
            pp: 1.0,
            layers: 32.0,
            params_active: 6.5e9,
            hidden: 4096.0,
            dp_attention: 1.0,
            a2a_layers: 0.0,
            a2a_bytes_per_step: 0.0,
            prefill_tokens: 0.0,
            machines: 1.0,
        };
        let t = tm.infer(&w, &dev);
        // 13 GB / (2039 GB/s × 0.8) = 7.97 ms → 125 tokens/s
        assert!((t.decode_tokens_per_s - 125.48).abs() < 0.1, "{}", t.decode_tokens_per_s);
    }

    /// The compute efficiency follows the per-GPU GEMM shapes where the card's
    /// SMs are known (an A100: 108, `crate::gemm::sm_count`) and stays the
    /// micro-batch token rule where they are not. By hand: hidden 4096 whole
    /// on one GPU, 2048 tokens, QKV 4096 → 12288: fwd 2048 × 12288 = 8 × 96 =
    /// 768 tiles, W 7.111, 0.93431; dgrad 2048 × 4096 = 256 tiles, W 2.3704,
    /// 0.82581; wgrad 4096 × 12288 = 1536 tiles, W 14.222, 0.96604; harmonic
    /// mean 3 / (1/0.93431 + 1/0.82581 + 1/0.96604) = 0.90459.
    #[test]
    fn compute_efficiency_from_gemm_shapes_where_the_sms_are_known() {
        let tm = TimeModel::default();
        let shapes =
            crate::gemm::GemmShapes::new(2048.0, [(4096.0, 12288.0), (0.0, 0.0), (0.0, 0.0), (0.0, 0.0)], true, false);
        let w = TrainWork {
            flops_per_token: 6.0e9,
            model_flops_per_token: 6.0e9,
            tokens_per_step: 2048.0,
            tokens_per_micro: 2048.0,
            gemm_inverse_tiles: Some(shapes.inverse_tiles),
            ..work()
        };
        let dev = tm.device(&a100(), Link::Nvlink, 1.0, None, PeakKind::Bf16);
        assert_eq!(dev.sms, Some(108.0));
        let e = tm.compute_efficiency(&w, &dev);
        assert!((e - 0.90459).abs() < 1e-4, "{e}");
        let t = tm.train_step(&w, &dev, None);
        assert!((t.slowdown() - 1.0 / e).abs() < 1e-9);
        // a card without a sourced SM count keeps the token rule: 2048 / 2560
        let mut g = a100();
        g.id = "rtx-4090".into();
        let other = tm.device(&g, Link::Nvlink, 1.0, None, PeakKind::Bf16);
        assert_eq!(other.sms, None);
        assert!((tm.compute_efficiency(&w, &other) - 0.8).abs() < 1e-12);
        // a MIG-like slice has its share of the SMs
        assert_eq!(tm.device(&a100(), Link::Nvlink, 0.5, None, PeakKind::Bf16).sms, Some(54.0));
    }

    #[test]
    fn mfu_override_by_id_wins() {
        let mut tm = TimeModel::default();
        assert_eq!(tm.mfu_for(&a100()), 0.55);
        tm.mfu_by_gpu.insert("a100-80gb-sxm".into(), 0.5);
        assert_eq!(tm.mfu_for(&a100()), 0.5);
    }

    /// A 128K-token prompt on an 8B model, then 512 generated tokens, on one
    /// A100 (issue 22: the prefill is tens of seconds, not free). By hand:
    /// prompt FLOPs (2 × 8.03e9 + 2 × 32 × 4096 × 130560) × 130560 = 6.5653e15;
    /// at 312 TFLOP/s × 0.5: 42.08 s. Decode: 16 GB / (2039 GB/s × 0.8) = 9.809
    /// ms a step, × 512 = 5.02 s. 512 tokens / 47.10 s = 10.87 tokens/s.
    #[test]
    fn a_long_prompt_prefill_is_counted() {
        let tm = TimeModel::default();
        let dev = tm.device(&a100(), Link::Nvlink, 1.0, None, PeakKind::Bf16);
        let w = InferWork {
            bytes_per_step: 16.0e9,
            concurrency: 1.0,
            replicas: 1.0,
            decode_flops_per_token: 2.0 * 8.03e9,
            peak: PeakKind::Bf16,
            prefill_flops: 0.0,
            tp: 1.0,
            pp: 1.0,
            layers: 32.0,
            params_active: 8.03e9,
            hidden: 4096.0,
            dp_attention: 1.0,
            a2a_layers: 0.0,
            a2a_bytes_per_step: 0.0,
            prefill_tokens: 0.0,
            machines: 1.0,
        };
        assert!((w.prompt_flops(130560.0) - 6.5653e15).abs() / 6.5653e15 < 1e-4);
        let t = tm.infer(&w, &dev);
        assert!((t.decode_step_s - 9.809e-3).abs() < 1e-5, "{}", t.decode_step_s);
        let r = Requests::of(131072, Some(512)).unwrap();
        assert_eq!((r.prompt, r.output, r.assumed), (130560, 512, false));
        let tps = tm.served_tokens_per_s(&w, &t, &dev, r);
        assert!((tps - 10.87).abs() < 0.05, "{tps}");
        // decode alone would claim 102 tokens/s
        assert!(t.decode_tokens_per_s > 9.0 * tps);
        // no output or no prompt: no requests
        assert_eq!(Requests::of(4096, Some(4096)), None);
        assert_eq!(Requests::of(4096, None), Some(Requests { prompt: 2048, output: 2048, assumed: true }));
    }

    /// TP's all-reduces cost their bytes (issue 21: "TP all-reduces never
    /// overlapped"; vLLM `RowParallelLinear` reduces after each row-parallel
    /// matmul). A 70B-shaped model (80 layers, hidden 8192) at TP 2, a
    /// 4,096-token prompt: 2 × 80 × 4096 × 8192 × 2 B × 2(2 − 1)/2 =
    /// 10,737,418,240 B per GPU: 0.43 s over PCIe 4.0 (25 GB/s), 0.048 s over
    /// A100 NVLink (225 GB/s). A decode step of 32 sequences moves 32/4096 of it.
    #[test]
    fn tp_all_reduces_cost_their_bytes_at_the_link_rate() {
        let tm = TimeModel::default();
        let w = InferWork {
            bytes_per_step: 70e9,
            concurrency: 32.0,
            replicas: 1.0,
            decode_flops_per_token: 2.0 * 70e9,
            peak: PeakKind::Bf16,
            prefill_flops: 2.0 * 70e9 * 4096.0,
            tp: 2.0,
            pp: 1.0,
            layers: 80.0,
            params_active: 70e9,
            hidden: 8192.0,
            dp_attention: 1.0,
            a2a_layers: 0.0,
            a2a_bytes_per_step: 0.0,
            prefill_tokens: 4096.0,
            machines: 1.0,
        };
        assert_eq!(w.tp_allreduce_bytes(4096.0), 10_737_418_240.0);
        assert_eq!(w.tp_allreduce_bytes(32.0), 83_886_080.0);
        let nvlink = tm.device(&a100(), Link::Nvlink, 1.0, None, PeakKind::Bf16);
        let mut g = a100();
        g.nvlink_gbs = None;
        let pcie = tm.device(&g, Link::Pcie, 1.0, None, PeakKind::Bf16);
        let (fast, slow) = (tm.infer(&w, &nvlink), tm.infer(&w, &pcie));
        let compute = 2.0 * 70e9 * 4096.0 / (2.0 * 312e12 * tm.prefill_mfu);
        assert!((fast.prefill_s - compute - 10_737_418_240.0 / 225e9).abs() < 1e-9, "{}", fast.prefill_s);
        assert!((slow.prefill_s - compute - 10_737_418_240.0 / 25e9).abs() < 1e-9, "{}", slow.prefill_s);
        // decode: the same reads, plus latency and 83.9 MB at each link's rate
        let pcie_extra =
            2.0 * 80.0 * (PCIE_ALLREDUCE_S - NVLINK_ALLREDUCE_S) + 83_886_080.0 * (1.0 / 25e9 - 1.0 / 225e9);
        assert!((slow.decode_step_s - fast.decode_step_s - pcie_extra).abs() < 1e-9);
        // no TP: nothing to reduce
        assert_eq!(InferWork { tp: 1.0, ..w }.tp_allreduce_bytes(4096.0), 0.0);
    }

    /// Pipeline stages of a served model cost their sends (issue 21: "no
    /// inter-node term for inference"). DeepSeek-V3-shaped (hidden 7168) at
    /// TP 8 × PP 2, a decode step of 64 sequences: 2 × 64 × 7168 × 2 B / 8 =
    /// 229,376 B per GPU per boundary. Inside one A100 machine: 10 µs +
    /// 229,376 / 225e9 = 11.02 µs; across two machines at 6.25 GB/s per GPU
    /// (400 Gb/s per machine of 8): 30 µs + 36.70 µs = 66.70 µs.
    #[test]
    fn stage_sends_cost_their_link() {
        let tm = TimeModel::default();
        let w = InferWork {
            bytes_per_step: 1e9,
            concurrency: 64.0,
            replicas: 1.0,
            decode_flops_per_token: 1e9,
            peak: PeakKind::Bf16,
            prefill_flops: 0.0,
            tp: 8.0,
            pp: 2.0,
            layers: 61.0,
            params_active: 37e9,
            hidden: 7168.0,
            dp_attention: 1.0,
            a2a_layers: 0.0,
            a2a_bytes_per_step: 0.0,
            prefill_tokens: 0.0,
            machines: 1.0,
        };
        let one = tm.device(&a100(), Link::Nvlink, 1.0, None, PeakKind::Bf16);
        let two = tm.device(&a100(), Link::Nvlink, 1.0, Some(6.25), PeakKind::Bf16);
        let inside = tm.stage_sends_s(&w, &one, NVLINK_ALLREDUCE_S, 64.0);
        assert!((inside - (10e-6 + 229_376.0 / 225e9)).abs() < 1e-12, "{inside}");
        let across = tm.stage_sends_s(&InferWork { machines: 2.0, ..w }, &two, NVLINK_ALLREDUCE_S, 64.0);
        assert!((across - (30e-6 + 229_376.0 / 6.25e9)).abs() < 1e-12, "{across}");
        assert!((across - 66.70e-6).abs() < 1e-8);
        // one stage: no sends
        assert_eq!(tm.stage_sends_s(&InferWork { pp: 1.0, ..w }, &one, NVLINK_ALLREDUCE_S, 64.0), 0.0);
        // the decode step includes them
        let step = |w: &InferWork, d: &Device| tm.infer(w, d).decode_step_s;
        assert!(step(&InferWork { machines: 2.0, ..w }, &two) > step(&w, &one) + 55e-6);
    }

    /// Hybrid sharding's collectives by hand (PyTorch FSDP HYBRID_SHARD, Zhao et
    /// al. 2023 §3.2.2/§4): a 7B (N = 6,738,415,616) full fine-tune, mixed-bf16,
    /// grad_accum 1, on 4 machines × 8 A100 (NVLink 600 GB/s → 225 GB/s per
    /// direction at 75 %) with a 5 GB/s-per-GPU fabric, as 4 replicas × 8 ranks:
    /// - shard group (NVLink): ZeRO-3's 2 all-gathers + 1 reduce-scatter of bf16
    ///   over 8 ranks: (2·2N + 2N)·7/8 = 6N·7/8 = 35,376,681,984 B → 0.15723 s
    /// - replicas (fabric): ring all-reduce of the 1/8 bf16 gradient shard over
    ///   4: 2·(2N/8)·3/4 = 2,526,905,856 B → 0.50538 s; summed: 0.66261 s.
    ///
    /// Plain ZeRO-3 over the 32 ranks: b = 6N·31/32 = 39,167,040,768 B; the
    /// fabric leg b·(4−1)/4 / (5 GB/s × 8 ranks per machine) = 0.73438 s, its
    /// NVLink leg b / 225 GB/s = 0.17407 s, pipelined: 0.73438 s.
    #[test]
    fn hybrid_sharding_moves_the_gradient_shard_over_the_fabric() {
        use crate::work::train_work;
        use vramfit_core::train::{Precision, TrainKind, TrainSetup};
        use vramfit_core::workload::{Parallelism, Sharding};
        let n = 6_738_415_616u64;
        let spec = vramfit_core::ModelSpec::llama_like("7b", 4096, 32, 32, 32, 11008, 32000);
        let m = counts_only(n);
        let t = TrainSetup { precision: Precision::MixedBf16, grad_accum: 1, ..TrainSetup::default() };
        let z3 = Parallelism { gpus: 32, sharding: Sharding::Zero3, ..Parallelism::default() };
        let hsdp = Parallelism { dp_replicate: 4, ..z3.clone() };
        let mut wh = train_work(&spec, &t, TrainKind::Full, &hsdp, &m);
        let mut wz = train_work(&spec, &t, TrainKind::Full, &z3, &m);
        assert_eq!(wh.dp_bytes_per_step, 35_376_681_984.0);
        assert_eq!(wh.replicate_bytes_per_step, 2_526_905_856.0);
        assert_eq!(wz.dp_bytes_per_step, 39_167_040_768.0);
        assert_eq!(wz.replicate_bytes_per_step, 0.0);
        wh.machines = 4.0;
        wz.machines = 4.0;
        let tm = TimeModel::default();
        let dev = tm.device(&a100(), Link::Nvlink, 1.0, Some(5.0), PeakKind::Bf16);
        assert!((tm.dp_comm_s(&wh, &dev) - (35_376_681_984.0 / 225e9 + 2_526_905_856.0 / 5e9)).abs() < 1e-9);
        assert!((tm.dp_comm_s(&wh, &dev) - 0.66261).abs() < 1e-5);
        assert!((tm.dp_comm_s(&wz, &dev) - 0.73438).abs() < 1e-5);
        // on a fabric twice as fast HSDP's edge shrinks: 0.15723 + 0.25269 vs 0.36719
        let fast = tm.device(&a100(), Link::Nvlink, 1.0, Some(10.0), PeakKind::Bf16);
        assert!(tm.dp_comm_s(&wh, &fast) > tm.dp_comm_s(&wz, &fast));
    }

    /// A dense model's parameter counts, all trainable; the byte figures 0 (what
    /// the collectives' tests need of a memory summary).
    fn counts_only(n: u64) -> crate::types::MemSummary {
        crate::types::MemSummary {
            total: 0,
            tensor_peak: 0,
            weights: 0,
            kv: 0,
            model_states: 0,
            cpu: 0,
            params_total: n,
            params_active: n,
            params_trainable: n,
        }
    }

    /// ZeRO++ hpZ's collectives by hand (DeepSpeed `zero_hpz_partition_size`,
    /// Wang et al. 2023 §3.2; `work::hpz_gathers`): the 7B above (N =
    /// 6,738,415,616), mixed-bf16, 4 machines × 8 A100 (NVLink 225 GB/s per
    /// direction) with a 5 GB/s-per-GPU fabric, hpZ groups of 8, grad_accum 1:
    /// - every rank (fabric): the forward all-gather of 2N + the reduce-scatter of
    ///   2N: 4N·31/32 = 26,111,360,512 B; fabric leg b·3/4 / (5 GB/s × 8) = 0.48959 s
    ///   (its NVLink leg 0.11605 s, pipelined under it)
    /// - inside the machine (NVLink): backward's all-gather from the secondary
    ///   partition, (2N − N)·2·7/8 = 11,792,227,328 B → 0.05241 s; summed 0.54200 s
    ///
    /// against plain ZeRO-3's 6N·31/32 = 39,167,040,768 B over the fabric, 0.73438 s.
    /// With grad_accum 4 the secondary partition serves the 3 later forwards too:
    /// 10N·31/32 = 65,278,401,280 B across, 14N·7/8 = 82,545,591,296 B inside,
    /// 1.22395 + 0.36687 = 1.59084 s against plain ZeRO-3's 24N·31/32 → 2.93753 s.
    #[test]
    fn hpz_gathers_backward_inside_the_machine() {
        use crate::work::train_work;
        use vramfit_core::train::{Precision, TrainKind, TrainSetup};
        use vramfit_core::workload::{Parallelism, Sharding};
        let n = 6_738_415_616u64;
        let spec = vramfit_core::ModelSpec::llama_like("7b", 4096, 32, 32, 32, 11008, 32000);
        let m = counts_only(n);
        let z3 = Parallelism { gpus: 32, sharding: Sharding::Zero3, ..Parallelism::default() };
        let hpz = Parallelism { hpz: 8, ..z3.clone() };
        let tm = TimeModel::default();
        let dev = tm.device(&a100(), Link::Nvlink, 1.0, Some(5.0), PeakKind::Bf16);
        for (accum, across, inside, want_h, want_z) in [
            (1, 26_111_360_512.0, 11_792_227_328.0, 0.54200, 0.73438),
            (4, 65_278_401_280.0, 82_545_591_296.0, 1.59084, 2.93753),
        ] {
            let t = TrainSetup { precision: Precision::MixedBf16, grad_accum: accum, ..TrainSetup::default() };
            let mut wh = train_work(&spec, &t, TrainKind::Full, &hpz, &m);
            let mut wz = train_work(&spec, &t, TrainKind::Full, &z3, &m);
            assert_eq!(wh.dp_bytes_per_step, across);
            assert_eq!(wh.hpz_intra_bytes_per_step, inside);
            assert_eq!(wz.hpz_intra_bytes_per_step, 0.0);
            wh.machines = 4.0;
            wz.machines = 4.0;
            assert!((tm.dp_comm_s(&wh, &dev) - want_h).abs() < 1e-5, "{}", tm.dp_comm_s(&wh, &dev));
            assert!((tm.dp_comm_s(&wz, &dev) - want_z).abs() < 1e-5, "{}", tm.dp_comm_s(&wz, &dev));
        }
    }
}
