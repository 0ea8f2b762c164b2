//! Model states per GPU (weights, fp32 master, gradients, optimizer states,
//! optimizer-step temporaries) as a function of the parallel layout.
//!
//! [`TrainProfile::new`] does the per-model work once (parameter layout,
//! LoRA adapter counts, quantized base bytes); [`TrainProfile::states`]
//! is then a loop over ~15 parameter groups with no allocation, cheap
//! enough for the planner to call per candidate.
//!
//! Bytes per trainable parameter (sources: ZeRO paper §3.1 for 2+2+4+8
//! mixed precision; `torch.optim.AdamW` for exp_avg + exp_avg_sq; the
//! bitsandbytes 8-bit optimizer for 1-byte states with an fp32 absmax per
//! block of 256):
//!
//! | precision | weights | master | grads | AdamW states |
//! |---|---|---|---|---|
//! | fp32 / amp-* | 4 | 0 | 4 | 8 |
//! | mixed-* | 2 | 4 | 2 | 8 |
//! | bf16 | 2 | 0 | 2 | 4 |

use crate::dtype::DType;
use crate::error::CoreError;
use crate::model::ModelSpec;
use crate::params::{LinearRole, ParamGroup, ParamGroupKind, ParamLayout};
use crate::quant::QuantSpec;
use crate::units::{add, div_ceil, mul, mul_div_ceil, part_of, product, sum};
use crate::weights::{group_bytes, in_layers, quantized, tp_shards};
use crate::workload::{validate, Offload, Optimizer, Parallelism, Precision, TrainKind, TrainSetup};

/// bitsandbytes 8-bit optimizers quantize states in blocks of 256 values,
/// each block with one fp32 absmax (`Optimizer2State.init_state`).
pub const BNB_OPT_BLOCK: u64 = 256;

/// Where a group sits for pipeline splitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// inside the decoder layers: split over stages
    Layers,
    /// token (and position) embeddings: first stage
    Embed,
    /// output head: last stage
    Head,
    /// final norm and other small non-layer tensors (replicated)
    Other,
}

/// One parameter group, reduced to what the memory arithmetic needs.
#[derive(Debug, Clone)]
pub(crate) struct GroupInfo {
    pub place: Place,
    pub tp_split: bool,
    /// routed experts: split whole over the expert-parallel ranks under `--ep`
    /// (Megatron, expert-tensor-parallel 1) instead of by TP
    pub expert: bool,
    /// storage bytes of the base (frozen or trainable) tensors, whole model
    pub base_bytes: u64,
    /// trainable parameters in the group (full: all; LoRA: adapters)
    pub trainable: u64,
    /// elements Adafactor keeps for the trainable tensors (factored rows + cols)
    pub adafactor_elems: u64,
    /// parameters of the decoder linears (autocast casts them)
    pub cast_params: u64,
    /// of `base_bytes`: what PEFT's fp32 cast of a non-quantized tensor added
    pub fp32_extra: u64,
}

/// Per-GPU model-state bytes (the worst rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelStates {
    /// parameters resident on the GPU (storage dtype; ZeRO-3 shard), adapters included
    pub weights: u64,
    /// of `weights`: what PEFT's fp32 casts of the non-quantized parameters added
    /// (`prepare_model_for_kbit_training`; 0 otherwise)
    pub fp32_casts: u64,
    /// of `weights`: the LoRA adapters (0 for a full fine-tune)
    pub adapters: u64,
    /// fp32 master copy (mixed precision)
    pub master: u64,
    pub gradients: u64,
    pub optimizer: u64,
    /// transient at the optimizer step (foreach temporaries + the fp32 grad partition)
    pub step_temporaries: u64,
    /// of `step_temporaries`: mixed precision's fp32 copy of the gradient partition
    /// the optimizer steps the fp32 master with (4 B/param; 0 otherwise)
    pub fp32_grad_copy: u64,
    /// ZeRO-3 / FSDP: parameters all-gathered for the running layer (+ prefetch)
    pub gathered: u64,
    /// DeepSpeed ZeRO++ hpZ: the secondary partition of the parameters over the
    /// rank's hpZ group, as stored (0 without hpZ); beside `weights`, not in it
    pub hpz_secondary: u64,
    /// trainable parameters held per GPU before data-parallel sharding
    pub trainable_per_gpu: u64,
    /// host RAM needed by this rank for offloaded state (the ledger's
    /// `cpu_bytes` is the whole job's: this × ranks)
    pub cpu_bytes: u64,
    /// NVMe needed by this rank for offloaded state
    pub nvme_bytes: u64,
}

impl ModelStates {
    /// weights + master + gradients + optimizer states.
    pub fn total(&self) -> Result<u64, CoreError> {
        sum("model states per GPU", &[self.weights, self.master, self.gradients, self.optimizer])
    }
}

/// DeepSpeed ZeRO++ hpZ's secondary partition of `weights` (the rank's
/// parameters as stored, before ZeRO-3 sharding): `_partition_param_sec`
/// (deepspeed/runtime/zero/partition_parameters.py) keeps, besides the primary
/// 1/dp shard, `aligned numel / zero_hpz_partition_size` elements in the
/// parameter's own dtype (`torch.empty(secondary_partition_size,
/// dtype=param.dtype)`): the weights as stored ÷ hpz. It is built as each
/// module is released after its forward and dropped only in `_post_step`
/// (`invalidate_secondary_tensor`, stage3.py), after the optimizer step, so it
/// is live at every peak of the step (Wang et al. 2023 "ZeRO++" §3.2: "a
/// secondary copy of the model parameters ... within each node"). 0 without hpZ.
fn hpz_secondary_bytes(par: &Parallelism, weights: u64) -> u64 {
    if par.hpz > 1 {
        div_ceil(weights, par.hpz)
    } else {
        0
    }
}

/// Precomputed per-model figures for training estimates.
#[derive(Debug, Clone)]
pub struct TrainProfile {
    pub(crate) groups: Vec<GroupInfo>,
    pub layers: u64,
    pub params_total: u64,
    pub params_active: u64,
    pub params_trainable: u64,
    /// bytes per trainable weight / gradient element
    pub weight_bytes: u64,
    pub grad_bytes: u64,
    /// bytes per element of full-precision optimizer states (4, or 2 for pure bf16)
    pub state_bytes: u64,
    /// bytes of optimizer state per trainable element, in 1/256 B (to keep 8-bit block overhead exact)
    pub state_bytes_x256: u64,
    /// largest single trainable tensor (elements): non-foreach optimizer temporaries
    pub largest_trainable: u64,
    /// largest single base matrix (elements): QLoRA dequantizes one at a time; ZeRO-3 gathers per layer
    pub largest_base_matrix: u64,
    /// parameters of one decoder layer (ZeRO-3 gathers a layer at a time)
    pub layer_params: u64,
    /// the frozen base is quantized (QLoRA, or a quantized checkpoint under LoRA)
    pub base_quant: Option<QuantSpec>,
    /// dtype of the frozen base or of the trainable weights
    pub base_dtype: DType,
    pub precision: Precision,
    pub optimizer: Optimizer,
    pub kind: TrainKind,
    pub foreach: bool,
    /// LoRA adapter tensors are fp32
    pub adapter_bytes: u64,
    /// module names the LoRA targets matched
    pub lora_modules: Vec<String>,
    /// every linear module name of the model (PEFT `all-linear` candidates)
    pub linear_names: Vec<String>,
    /// embeddings are tied to the output head
    pub tied: bool,
    /// vocabulary × hidden (the head's parameters, tied or not)
    pub head_params: u64,
    /// the training framework's row (who shards and offloads: DeepSpeed or FSDP)
    pub framework: &'static crate::workload::FrameworkFacts,
}

/// What the per-group loop of [`TrainProfile::new`] adds up.
#[derive(Default)]
struct GroupTotals {
    trainable: u64,
    largest_trainable: u64,
    largest_base: u64,
    layer_params: u64,
}

impl TrainProfile {
    pub fn new(spec: &ModelSpec, setup: &TrainSetup) -> Result<TrainProfile, CoreError> {
        let layout = ParamLayout::of(spec)?;
        let p = setup.precision;
        let lora = setup.kind != TrainKind::Full;
        if setup.kind == TrainKind::Full && spec.quantization.is_some() {
            return Err(CoreError::Unsupported(
                "full fine-tuning of a quantized checkpoint: quantized weights cannot be trained; use --task lora or qlora, or --dtype bf16 to train the weights dequantized"
                    .into(),
            ));
        }
        let base_quant = match setup.kind {
            // QLoRA quantizes the base to NF4 at load, whatever the checkpoint's own format
            TrainKind::Qlora => Some(QuantSpec::nf4(setup.qlora_double_quant, p.compute_dtype())),
            TrainKind::Lora => spec.quantization.clone(),
            TrainKind::Full => None,
        };
        if let Some(q) = &base_quant {
            q.validate()?;
        }
        let base_dtype = match setup.kind {
            TrainKind::Full => p.weight_dtype(),
            TrainKind::Lora => setup.lora_base_dtype(),
            TrainKind::Qlora => p.compute_dtype(),
        };
        // PEFT `prepare_model_for_kbit_training` casts every parameter that is not
        // quantized (norms, embeddings, the head) to fp32
        let kbit_fp32 = setup.kind == TrainKind::Qlora && setup.kbit_prep;
        let adapter_dtype =
            if setup.lora.adapter_fp32 || p == Precision::Fp32 { DType::F32 } else { p.compute_dtype() };
        let all_names = layout.linear_module_names();
        let placement = if lora {
            validate::lora_placement(spec, &layout, &setup.lora.targets)?
        } else {
            validate::LoraPlacement { copies: vec![0; layout.groups.len()], modules: Vec::new() }
        };
        let quantize_head = setup.kind == TrainKind::Qlora && setup.qlora_quantize_lm_head;
        let mut groups = Vec::with_capacity(layout.groups.len());
        let mut totals = GroupTotals::default();
        for (g, &adapted) in layout.groups.iter().zip(&placement.copies) {
            let base =
                BaseFormat { dtype: base_dtype, quant: base_quant.as_ref(), quantize_head, rest_fp32: kbit_fp32 };
            groups.push(group_info(g, lora, adapted, setup.lora.rank, &base, &mut totals)?);
        }
        let weight_bytes = if lora { adapter_dtype.bytes()? } else { p.weight_dtype().bytes()? };
        // torch optimizers keep their states in the parameter's dtype (fp32 master
        // states under mixed precision): LoRA's are the adapter dtype
        let state_bytes = if lora && !p.has_master() { adapter_dtype.bytes()? } else { p.state_dtype().bytes()? };
        let state_bytes_x256 = match setup.optimizer {
            Optimizer::AdamW => 2 * state_bytes * 256,
            // bitsandbytes 32-bit optimizers keep fp32 states whatever the parameter dtype
            Optimizer::PagedAdamW => 2 * 4 * 256,
            // 2 states × (1 B + 4 B absmax / 256)
            Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => 2 * (BNB_OPT_BLOCK + 4),
            Optimizer::Sgd => 0,
            Optimizer::SgdMomentum | Optimizer::Lion => state_bytes * 256,
            // factored: counted from adafactor_elems instead
            Optimizer::Adafactor => 0,
        };
        let targets = placement.modules;
        Ok(TrainProfile {
            groups,
            layers: spec.num_layers,
            params_total: layout.total()?,
            params_active: layout.active()?,
            params_trainable: totals.trainable,
            weight_bytes,
            grad_bytes: weight_bytes,
            state_bytes,
            state_bytes_x256,
            largest_trainable: totals.largest_trainable,
            largest_base_matrix: totals.largest_base,
            layer_params: totals.layer_params / spec.num_layers.max(1),
            base_quant,
            base_dtype,
            precision: p,
            optimizer: setup.optimizer,
            kind: setup.kind,
            foreach: setup.foreach,
            adapter_bytes: adapter_dtype.bytes()?,
            lora_modules: targets,
            linear_names: all_names,
            tied: spec.tied_embeddings,
            head_params: mul("head params", spec.vocab_size, spec.hidden_size)?,
            framework: setup.framework(),
        })
    }

    /// Per-GPU share of a per-group quantity on the worst pipeline stage,
    /// following [`crate::weights::shard`]: TP splits what it splits,
    /// layers go ceil(L/pp) per stage, the worst stage carries the larger
    /// of embeddings and head when pp > 1.
    fn per_gpu(&self, what: &str, tp: u64, pp: u64, f: impl Fn(&GroupInfo) -> u64) -> Result<u64, CoreError> {
        self.per_gpu_ep(what, tp, pp, Experts::AS_TP, f)
    }

    /// As [`Self::per_gpu`], with the routed experts split over the expert grid
    /// `x` instead of by TP: Megatron's `MoELayer` builds `num_moe_experts /
    /// ep_size` local experts (megatron/core/transformer/moe/moe_layer.py) and
    /// `TEGroupedMLP` splits each one's fc1 columns and fc2 rows over the
    /// expert-tensor-parallel group (`pg_collection.expt_tp`,
    /// megatron/core/transformer/moe/experts.py; `TEGroupedLinear` divides the
    /// sizes by its TP size, megatron/core/extensions/transformer_engine.py):
    /// ⌈f / (EP × ETP)⌉ per rank. EP 1 with ETP = TP is the TP split itself.
    fn per_gpu_ep(
        &self,
        what: &str,
        tp: u64,
        pp: u64,
        x: Experts,
        f: impl Fn(&GroupInfo) -> u64,
    ) -> Result<u64, CoreError> {
        let tp = tp.max(1);
        let pp = pp.max(1);
        let (ep, etp) = (x.ep.max(1), if x.etp == 0 { tp } else { x.etp });
        let own_grid = ep > 1 || etp != tp;
        let (mut layers, mut emb, mut head, mut other) = (0u64, 0u64, 0u64, 0u64);
        for g in &self.groups {
            let v = if own_grid && g.expert {
                div_ceil(f(g), ep.saturating_mul(etp))
            } else if g.tp_split {
                div_ceil(f(g), tp)
            } else {
                f(g)
            };
            let slot = match g.place {
                Place::Layers => &mut layers,
                Place::Embed => &mut emb,
                Place::Head => &mut head,
                Place::Other => &mut other,
            };
            *slot = add(what, *slot, v)?;
        }
        let layers =
            if pp > 1 { mul_div_ceil(what, layers, self.layers.div_ceil(pp), self.layers.max(1))? } else { layers };
        let ends = if pp > 1 { emb.max(head) } else { add(what, emb, head)? };
        sum(what, &[layers, ends, other])
    }

    /// Bytes per stored gradient element: the parameter dtype's, or 4 for
    /// Megatron's fp32 main-grad buffer under `--bf16`
    /// ([`crate::workload::FrameworkFacts::megatron_mixed_precision`]).
    pub fn grad_bytes_stored(&self) -> u64 {
        // `--bf16`, with or without `--fp8-format` (FP8 keeps bf16 parameters and fp32 main grads)
        if self.framework.megatron_mixed_precision
            && matches!(self.precision, Precision::MixedBf16 | Precision::MixedFp8)
        {
            4
        } else {
            self.grad_bytes
        }
    }

    /// Trainable parameters on the worst GPU before ZeRO sharding.
    pub fn trainable_per_gpu(&self, tp: u64, pp: u64) -> Result<u64, CoreError> {
        self.per_gpu("trainable per GPU", tp, pp, |g| g.trainable)
    }

    /// Model-state bytes per GPU under `par`. Allocation-free.
    pub fn states(&self, par: &Parallelism) -> Result<ModelStates, CoreError> {
        let tp = par.tp.max(1);
        let pp = par.pp.max(1);
        let ep = Experts::of(par);
        // the ranks the states shard over: DP × CP ([`Parallelism::shard_dp`]), or under
        // hybrid sharding one replica's shard group (FSDP HYBRID_SHARD: "shard within the
        // group, replicate across groups", Zhao et al. 2023 §3.2.2), whose ZeRO-3 states
        // are those of a plain ZeRO-3 run on its ranks ([`Parallelism::shard_degree`])
        let dp = par.shard_degree();
        let stage = par.sharding.stage();
        let t = self.per_gpu_ep("trainable per GPU", tp, pp, ep, |g| g.trainable)?;
        let base = self.per_gpu_ep("weights per GPU", tp, pp, ep, |g| g.base_bytes)?;
        let mut fp32_casts = self.per_gpu("fp32 casts per GPU", tp, pp, |g| g.fp32_extra)?;
        let lora = self.kind != TrainKind::Full;
        // Megatron under --bf16: fp32 main gradients in the grad buffer, stepped in place
        // by a fused Adam ([`crate::workload::FrameworkFacts::megatron_mixed_precision`])
        let megatron = self.framework.megatron_mixed_precision;
        let fp32_main_grads = megatron && matches!(self.precision, Precision::MixedBf16 | Precision::MixedFp8);
        // weights on the GPU: the base (frozen or trainable) + adapters
        let mut adapters = if lora { mul("adapters per GPU", t, self.adapter_bytes)? } else { 0 };
        let mut weights = add("weights per GPU", base, adapters)?;
        let mut master = if self.precision.has_master() { mul("master weights per GPU", t, 4)? } else { 0 };
        let grad_bytes = self.grad_bytes_stored();
        let mut grads = mul("gradients per GPU", t, grad_bytes)?;
        let mut opt = match self.optimizer {
            Optimizer::Adafactor => mul(
                "optimizer states per GPU",
                self.per_gpu("optimizer states per GPU", tp, pp, |g| g.adafactor_elems)?,
                self.state_bytes,
            )?,
            _ => mul_div_ceil("optimizer states per GPU", t, self.state_bytes_x256, 256)?,
        };
        // Megatron's fused multi-tensor Adam updates in place: no step temporaries
        let mut temps = if megatron { 0 } else { self.step_temporaries(t)? };
        // Mixed precision: DeepSpeed's FP16/BF16 optimizers up-cast the 16-bit gradient
        // partition to an fp32 buffer and attach it to the fp32 master partition
        // (`single_partition_of_fp32_groups[i].grad`) before `optimizer.step()`; the
        // optimizer's own temporaries come on top of it. Megatron's fp16 path does the
        // same (`_copy_model_grads_to_main_grads`: `main_grad.float()`); under bf16 its
        // main grads are fp32 already and `.float()` returns them.
        let mut grad_copy =
            if self.precision.has_master() && !fp32_main_grads { mul("fp32 gradient copy", t, 4)? } else { 0 };
        // ZeRO sharding (Megatron: the distributed optimizer) over the data-parallel
        // ranks; under expert parallelism the experts' share over the expert-data-parallel ranks
        if dp > 1 && stage >= 1 {
            let split = self.dp_split(par, t)?;
            opt = split.shard(opt)?;
            master = split.shard(master)?;
            temps = split.shard(temps)?;
            grad_copy = split.shard(grad_copy)?;
        }
        if dp > 1 && stage >= 2 {
            grads = self.zero2_grads(par, t, grads)?;
        }
        if stage >= 2 && par.offload_optimizer != Offload::None {
            // ZeRO-Offload / FSDP CPU offload: gradients stream to the pinned CPU partition
            // as they are produced (DeepSpeed stage_1_and_2.py `backward`, Ren et al. 2021 §4;
            // FSDP2 CPUOffloadPolicy). What stays on the GPU is the buffer they pass through:
            // DeepSpeed's reduce buckets or FSDP's reduce-scatter buffer, counted once as
            // communication buffers (train/comm.rs), so no gradient partition here.
            grads = 0;
        }
        let mut gathered = 0;
        let hpz_secondary = if stage >= 3 && dp > 1 { hpz_secondary_bytes(par, weights) } else { 0 };
        if stage >= 3 && dp > 1 {
            weights = div_ceil(weights, dp);
            adapters = div_ceil(adapters, dp);
            fp32_casts = div_ceil(fp32_casts, dp);
            // the running layer and the prefetched next one, gathered as stored
            gathered = mul("gathered parameters", 2, self.layer_gather_bytes(tp)?)?;
        }
        // Offload.
        let mut cpu = 0;
        let mut nvme = 0;
        if par.offload_optimizer != Offload::None {
            // ZeRO-Offload also keeps the fp32 gradient partition in pinned host memory
            let grad_partition = div_ceil(mul("offloaded bytes", t, 4)?, dp);
            let states = self.offloaded_states(par, t, stage, opt, master)?;
            match par.offload_optimizer {
                Offload::Cpu => cpu = add("offloaded bytes", states, grad_partition)?,
                Offload::Nvme => {
                    nvme = states;
                    // the fp32 gradient partition stays in pinned host memory
                    cpu = grad_partition;
                }
                Offload::None => {}
            }
            opt = 0;
            master = 0;
            // the step runs on the CPU (DeepSpeedCPUAdam): no GPU temporaries
            temps = 0;
            grad_copy = 0;
        }
        if par.offload_params != Offload::None && stage >= 3 {
            match par.offload_params {
                Offload::Cpu => cpu = add("offloaded bytes", cpu, weights)?,
                Offload::Nvme => nvme = add("offloaded bytes", nvme, weights)?,
                Offload::None => {}
            }
            weights = 0;
            adapters = 0;
            fp32_casts = 0;
        }
        Ok(ModelStates {
            weights,
            fp32_casts,
            adapters,
            master,
            gradients: grads,
            optimizer: opt,
            step_temporaries: add("optimizer temporaries", temps, grad_copy)?,
            fp32_grad_copy: grad_copy,
            gathered,
            hpz_secondary,
            trainable_per_gpu: t,
            cpu_bytes: cpu,
            nvme_bytes: nvme,
        })
    }

    /// ZeRO-2's gradient partition of `grads` bytes: over the DP ranks, and under
    /// DeepSpeed AutoEP the experts' share over the expert-data-parallel group as
    /// the states are (stage_1_and_2.py partitions each parameter group over its
    /// `real_dp_process_group`, the MoE groups' being `expert_data_parallel_group`);
    /// Megatron runs no ZeRO-2.
    fn zero2_grads(&self, par: &Parallelism, t: u64, grads: u64) -> Result<u64, CoreError> {
        if par.ep > 1 {
            self.dp_split(par, t)?.shard(grads)
        } else {
            Ok(div_ceil(grads, par.shard_degree()))
        }
    }

    /// How `t` trainable parameters per GPU shard over the data-parallel ranks of
    /// `par`: the routed experts' share over the expert-data-parallel ranks under EP.
    fn dp_split(&self, par: &Parallelism, t: u64) -> Result<DpSplit, CoreError> {
        let (tp, pp, x) = (par.tp.max(1), par.pp.max(1), Experts::of(par));
        // the experts' own grid shards them over the expert-data-parallel ranks;
        // EP 1 with ETP = TP is the dense grid (expert-DP = DP without CP)
        let expert_t = if x.ep > 1 || x.etp != tp {
            self.per_gpu_ep("expert params per GPU", tp, pp, x, |g| if g.expert { g.trainable } else { 0 })?
        } else {
            0
        };
        Ok(DpSplit { t, expert_t, dp: par.shard_degree(), edp: par.expert_dp() })
    }

    /// The host's share of offloaded optimizer states besides the fp32 gradient
    /// shard: the sharded master and states under FSDP's CPU offload and under
    /// Megatron-Core's HybridDeviceOptimizer (`--optimizer-cpu-offload` with the
    /// precision-aware distributed optimizer,
    /// megatron/core/optimizer/cpu_offloading/hybrid_optimizer.py
    /// `_get_sub_optimizer_param_groups`: a pinned fp32 copy of each shard
    /// parameter, pinned fp32 gradients, torch AdamW's two fp32 states on it;
    /// distrib_optimizer.py then keeps no fp32 main params on the GPU); DeepSpeed's
    /// own accounting otherwise.
    fn offloaded_states(&self, par: &Parallelism, t: u64, stage: u8, opt: u64, master: u64) -> Result<u64, CoreError> {
        if self.framework.shards_with_fsdp(par.fsdp) || self.framework.megatron_mixed_precision {
            add("offloaded bytes", opt, master)
        } else {
            self.deepspeed_offloaded_states(t, par.shard_degree(), stage, opt)
        }
    }

    /// What DeepSpeed's ZeRO-Offload keeps in host memory besides the fp32
    /// gradient partition, for `t` trainable parameters per GPU sharded over
    /// `dp` ranks, in every precision:
    /// - the fp32 master partition (`single_partition_of_fp32_groups`, cloned in
    ///   `master_weights_and_grads_dtype`, fp32 by default: stage_1_and_2.py
    ///   `DeepSpeedZeroOptimizer.__init__`; stage3.py `_create_fp32_partitions`);
    /// - the CPU optimizer's two fp32 states (DeepSpeedCPUAdam): DeepSpeed refuses
    ///   a client optimizer under offload (engine.py `_configure_basic_optimizer`,
    ///   `zero_force_ds_cpu_optimizer`), so an 8-bit or 16-bit-state optimizer
    ///   runs as fp32 CPU-Adam; Lion keeps one state (DeepSpeedCPULion);
    /// - ZeRO-1/2 since v0.17.0 (PR #7309): a 16-bit copy of the partition
    ///   (`param_buffer_of_bit16_for_cpu_offload_groups`), in the weights' dtype.
    ///
    /// With the fp32 gradient partition counted by the caller this is
    /// `estimate_zero2_model_states_mem_needs`' 16 B per parameter (4 + 4 + 8,
    /// before its 1.5 buffer factor), plus the 16-bit copy.
    fn deepspeed_offloaded_states(&self, t: u64, dp: u64, stage: u8, opt: u64) -> Result<u64, CoreError> {
        let what = "offloaded bytes";
        let master = div_ceil(mul(what, t, 4)?, dp);
        let states = match self.optimizer {
            Optimizer::Lion => div_ceil(mul(what, t, 4)?, dp),
            // a client optimizer (only with zero_force_ds_cpu_optimizer: false): its own states
            Optimizer::Sgd | Optimizer::SgdMomentum | Optimizer::Adafactor => opt,
            _ => div_ceil(mul(what, t, 8)?, dp),
        };
        let staging = if stage <= 2 { div_ceil(mul(what, t, self.weight_bytes)?, dp) } else { 0 };
        sum(what, &[master, states, staging])
    }

    /// The optimizer's own temporaries at `step()` for `t` trainable
    /// parameters per GPU (before ZeRO sharding).
    fn step_temporaries(&self, t: u64) -> Result<u64, CoreError> {
        let sb = self.state_bytes;
        let largest = self.largest_trainable;
        let what = "optimizer temporaries";
        match self.optimizer {
            // _multi_tensor_adamw: torch._foreach_sqrt(exp_avg_sq) is one state-sized buffer
            Optimizer::AdamW if self.foreach => mul(what, t, sb),
            Optimizer::AdamW => mul(what, largest, sb),
            // fused CUDA kernels update in place
            Optimizer::AdamW8bit
            | Optimizer::PagedAdamW8bit
            | Optimizer::PagedAdamW
            | Optimizer::Sgd
            | Optimizer::SgdMomentum => Ok(0),
            // per-parameter: update and its square for the largest tensor
            Optimizer::Adafactor => product(what, &[2, largest, 4]),
            Optimizer::Lion => product(what, &[2, largest, sb]),
        }
    }

    /// Bytes of one decoder layer as ZeRO-3 / FSDP all-gathers it, on one TP rank: the
    /// layer's parameters in the weight dtype, or, for a quantized base, its storage as
    /// stored. FSDP flattens and all-gathers each parameter's storage without
    /// dequantizing it: bitsandbytes' `Params4bit` hold the packed 4-bit data in
    /// `bnb_4bit_quant_storage` (transformers `_fsdp_qlora_plugin_updates` sets FSDP's
    /// mixed precision to that dtype so nothing is cast), and torchao's `NF4Tensor`
    /// (torchtune) all-gathers its quantized data and scalers through
    /// `fsdp_pre_all_gather`. The layer is dequantized one matrix at a time afterwards
    /// (the QLoRA dequant line).
    pub fn layer_gather_bytes(&self, tp: u64) -> Result<u64, CoreError> {
        let tp = tp.max(1);
        if self.base_quant.is_none() {
            return mul("gathered parameters", div_ceil(self.layer_params, tp), self.base_dtype.bytes()?);
        }
        let mut layers = 0u64;
        for g in self.groups.iter().filter(|g| g.place == Place::Layers) {
            let stored = part_of("gathered parameters", g.base_bytes, g.fp32_extra)?;
            layers = add("gathered parameters", layers, if g.tp_split { div_ceil(stored, tp) } else { stored })?;
        }
        Ok(div_ceil(layers, self.layers.max(1)))
    }

    /// Storage bytes of what sits outside the decoder layers (embeddings, output head,
    /// final norm) on one TP rank, unsharded: FSDP's root unit under a per-layer wrap.
    pub fn root_base_bytes(&self, tp: u64) -> Result<u64, CoreError> {
        let tp = tp.max(1);
        let mut root = 0u64;
        for g in self.groups.iter().filter(|g| g.place != Place::Layers) {
            root = add("root unit", root, if g.tp_split { div_ceil(g.base_bytes, tp) } else { g.base_bytes })?;
        }
        Ok(root)
    }

    /// Trainable parameters outside the decoder layers (embeddings, head, final norm)
    /// on one TP rank: FSDP's root unit under a per-layer wrap.
    pub fn root_trainable(&self, tp: u64) -> Result<u64, CoreError> {
        let tp = tp.max(1);
        let mut root = 0u64;
        for g in self.groups.iter().filter(|g| g.place != Place::Layers) {
            root = add("root unit", root, if g.tp_split { div_ceil(g.trainable, tp) } else { g.trainable })?;
        }
        Ok(root)
    }

    /// Trainable parameters of FSDP's largest wrapped unit on one GPU before
    /// sharding: one decoder layer, or the root (embeddings, head, final norm).
    pub fn largest_unit_trainable(&self, tp: u64) -> Result<u64, CoreError> {
        let tp = tp.max(1);
        let (mut layers, mut root) = (0u64, 0u64);
        for g in &self.groups {
            let v = if g.tp_split { div_ceil(g.trainable, tp) } else { g.trainable };
            if g.place == Place::Layers {
                layers = add("unit", layers, v)?;
            } else {
                root = add("unit", root, v)?;
            }
        }
        Ok((layers / self.layers.max(1)).max(root))
    }

    /// Decoder-linear parameters (what autocast casts to 16-bit) per GPU on the worst stage.
    pub fn cast_params_per_gpu(&self, tp: u64, pp: u64) -> Result<u64, CoreError> {
        self.per_gpu("cast parameters", tp, pp, |g| g.cast_params)
    }

    /// Cast parameters of the decoder layers only (per GPU).
    pub fn layer_cast_params_per_gpu(&self, tp: u64, pp: u64) -> Result<u64, CoreError> {
        self.per_gpu("cast parameters", tp, pp, |g| if g.place == Place::Layers { g.cast_params } else { 0 })
    }
}

/// The routed experts' grid: expert-parallel and expert-tensor-parallel
/// degrees ([`Parallelism::expert_tp`]); `etp` 0 splits them by TP like
/// any linear.
#[derive(Debug, Clone, Copy)]
struct Experts {
    ep: u64,
    etp: u64,
}

impl Experts {
    /// split by TP like the dense linears
    const AS_TP: Experts = Experts { ep: 1, etp: 0 };

    fn of(par: &Parallelism) -> Experts {
        Experts { ep: par.ep.max(1), etp: par.expert_tp() }
    }
}

/// How a data-parallel-sharded state divides: the dense parameters' share over
/// the `dp` data-parallel ranks, the routed experts' over the `edp`
/// expert-data-parallel ranks (Megatron: world / (PP × EP × expert-TP), the group
/// its distributed optimizer shards expert parameters over,
/// `ProcessGroupCollection.expt_dp`, megatron/core/optimizer/__init__.py).
struct DpSplit {
    /// trainable parameters on the GPU before sharding
    t: u64,
    /// of `t`: routed-expert parameters (0 without expert parallelism)
    expert_t: u64,
    dp: u64,
    edp: u64,
}

impl DpSplit {
    /// The share of `v` bytes (proportional to the parameters) one rank keeps.
    fn shard(&self, v: u64) -> Result<u64, CoreError> {
        if self.expert_t == 0 || self.t == 0 {
            return Ok(div_ceil(v, self.dp));
        }
        let what = "sharded states";
        let dense = mul_div_ceil(what, v, self.t - self.expert_t.min(self.t), self.t)?;
        let expert = mul_div_ceil(what, v, self.expert_t, self.t)?;
        add(what, div_ceil(dense, self.dp), div_ceil(expert, self.edp.max(1)))
    }
}

/// How the frozen (or trainable) base is stored.
struct BaseFormat<'a> {
    /// dtype of what is not quantized
    dtype: DType,
    /// quantization of the decoder linears
    quant: Option<&'a QuantSpec>,
    /// the output head is quantized too
    quantize_head: bool,
    /// what is not quantized is cast to fp32 (PEFT `prepare_model_for_kbit_training`)
    rest_fp32: bool,
}

/// One parameter group reduced to what the memory arithmetic needs, and
/// its share of the model-wide totals.
fn group_info(
    g: &ParamGroup,
    lora: bool,
    adapted_copies: u64,
    rank: u64,
    base: &BaseFormat,
    totals: &mut GroupTotals,
) -> Result<GroupInfo, CoreError> {
    let place = match g.kind {
        ParamGroupKind::Linear(LinearRole::LmHead) => Place::Head,
        ParamGroupKind::Embedding | ParamGroupKind::PositionEmbedding => Place::Embed,
        _ if in_layers(g) => Place::Layers,
        _ => Place::Other,
    };
    let head = g.role() == Some(LinearRole::LmHead);
    let quant = base.quant.filter(|_| quantized(g) || (head && base.quantize_head));
    let mut base_bytes = group_bytes(g, base.dtype, quant)?;
    // fp32 casts of what stays unquantized (biases of quantized linears included)
    let fp32_extra = if base.rest_fp32 && quant.is_none() && base.dtype.bits() < 32 {
        let cast = group_bytes(g, DType::F32, None)?;
        let extra = cast.saturating_sub(base_bytes);
        base_bytes = cast;
        extra
    } else {
        0
    };
    let params = g.params()?;
    if place == Place::Layers {
        totals.layer_params = add("layer params", totals.layer_params, params)?;
    }
    if g.is_linear() {
        totals.largest_base = totals.largest_base.max(g.weight_elems()?);
    }
    let (trainable, adafactor_elems) = if !lora {
        // Adafactor factors a matrix's second moment into rows + columns
        let ada = match g.kind {
            ParamGroupKind::Linear(_) | ParamGroupKind::Embedding | ParamGroupKind::PositionEmbedding => {
                product("adafactor", &[sum("adafactor", &[g.d_in, g.d_out, g.bias_elems()])?, g.copies])?
            }
            _ => params,
        };
        totals.largest_trainable = totals.largest_trainable.max(g.weight_elems()?);
        (params, ada)
    } else if adapted_copies > 0 {
        // A is r × d_in, B is d_out × r (an embedding: r × vocab and hidden × r)
        let a = product("trainable params", &[rank, add("lora", g.d_in, g.d_out)?, adapted_copies])?;
        let ada = product("adafactor", &[sum("adafactor", &[2 * rank, g.d_in, g.d_out])?, adapted_copies])?;
        totals.largest_trainable = totals.largest_trainable.max(mul("lora", rank, g.d_in.max(g.d_out))?);
        (a, ada)
    } else {
        (0, 0)
    };
    totals.trainable = add("trainable params", totals.trainable, trainable)?;
    Ok(GroupInfo {
        place,
        tp_split: tp_shards(g),
        expert: g.role() == Some(LinearRole::Expert),
        base_bytes,
        trainable,
        adafactor_elems,
        cast_params: if g.is_linear() { params } else { 0 },
        fp32_extra,
    })
}
