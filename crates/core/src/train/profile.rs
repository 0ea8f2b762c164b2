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

use super::setup::{LoraTargets, Optimizer, Precision, TrainKind, TrainSetup};
use crate::dtype::DType;
use crate::error::CoreError;
use crate::model::ModelSpec;
use crate::params::{LinearRole, ParamGroupKind, ParamLayout};
use crate::quant::QuantSpec;
use crate::weights::{group_bytes, in_layers, quantized, tp_shards};
use crate::workload::{Offload, Parallelism, Sharding};

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
    /// storage bytes of the base (frozen or trainable) tensors, whole model
    pub base_bytes: u64,
    /// trainable parameters in the group (full: all; LoRA: adapters)
    pub trainable: u64,
    /// elements Adafactor keeps for the trainable tensors (factored rows + cols)
    pub adafactor_elems: u64,
    /// parameters of the decoder linears (autocast casts them)
    pub cast_params: u64,
}

/// Per-GPU model-state bytes (the worst rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelStates {
    /// parameters resident on the GPU (storage dtype; ZeRO-3 shard), adapters included
    pub weights: u64,
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
    /// trainable parameters held per GPU before data-parallel sharding
    pub trainable_per_gpu: u64,
    /// host RAM needed per rank for offloaded state
    pub cpu_bytes: u64,
    /// NVMe needed per rank for offloaded state
    pub nvme_bytes: u64,
}

impl ModelStates {
    /// weights + master + gradients + optimizer states.
    pub fn total(&self) -> u64 {
        self.weights.saturating_add(self.master).saturating_add(self.gradients).saturating_add(self.optimizer)
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
}

fn u(what: &str, v: u128) -> Result<u64, CoreError> {
    u64::try_from(v).map_err(|_| CoreError::Overflow { what: what.to_string() })
}

fn div_ceil128(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        a.div_ceil(b)
    }
}

impl TrainProfile {
    pub fn new(spec: &ModelSpec, setup: &TrainSetup) -> Result<TrainProfile, CoreError> {
        let layout = ParamLayout::of(spec)?;
        let p = setup.precision;
        let lora = setup.kind != TrainKind::Full;
        if setup.kind == TrainKind::Full && spec.quantization.is_some() {
            return Err(CoreError::Unsupported(
                "full fine-tuning of a quantized checkpoint: quantized weights cannot be trained; use --task lora or qlora"
                    .into(),
            ));
        }
        if lora && setup.lora.rank == 0 {
            return Err(CoreError::invalid("lora-rank", "must be at least 1"));
        }
        if lora && setup.lora.rank > 1 << 16 {
            return Err(CoreError::invalid("lora-rank", format!("{} is absurdly large", setup.lora.rank)));
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
        let adapter_dtype =
            if setup.lora.adapter_fp32 || p == Precision::Fp32 { DType::F32 } else { p.compute_dtype() };
        // Which linears get adapters.
        let all_names = layout.linear_module_names();
        let targets: Vec<String> = match &setup.lora.targets {
            LoraTargets::AllLinear => all_names
                .iter()
                .filter(|n| layout.groups.iter().any(|g| &g.module == *n && g.role() != Some(LinearRole::Router)))
                .cloned()
                .collect(),
            LoraTargets::Modules(m) => {
                if lora && m.is_empty() {
                    return Err(CoreError::invalid("lora-targets", "no target modules given"));
                }
                for name in m {
                    if lora && !all_names.iter().any(|n| n == name) {
                        return Err(CoreError::invalid(
                            "lora-targets",
                            format!(
                                "'{name}' is not a linear module of this {} model; its linears are: {}",
                                spec.family.name(),
                                all_names.join(", ")
                            ),
                        ));
                    }
                }
                m.clone()
            }
        };
        let r = setup.lora.rank as u128;
        let mut groups = Vec::with_capacity(layout.groups.len());
        let mut trainable_total: u128 = 0;
        let mut largest_trainable = 0u64;
        let mut largest_base = 0u64;
        let mut layer_params: u128 = 0;
        for g in &layout.groups {
            let place = match g.kind {
                ParamGroupKind::Linear(LinearRole::LmHead) => Place::Head,
                ParamGroupKind::Embedding | ParamGroupKind::PositionEmbedding => Place::Embed,
                _ if in_layers(g) => Place::Layers,
                _ => Place::Other,
            };
            let is_q = base_quant.is_some() && quantized(g);
            let base_bytes =
                if is_q { group_bytes(g, base_dtype, base_quant.as_ref())? } else { group_bytes(g, base_dtype, None)? };
            let params = g.params()? as u128;
            if place == Place::Layers {
                layer_params += params;
            }
            if g.is_linear() {
                largest_base = largest_base.max(g.weight_elems());
            }
            let (trainable, ada) = if !lora {
                let ada = match g.kind {
                    ParamGroupKind::Linear(_) | ParamGroupKind::Embedding | ParamGroupKind::PositionEmbedding => {
                        (g.d_in as u128 + g.d_out as u128 + g.bias_elems() as u128) * g.copies as u128
                    }
                    _ => params,
                };
                largest_trainable = largest_trainable.max(g.weight_elems());
                (params, ada)
            } else if g.is_linear() && g.role() != Some(LinearRole::LmHead) && targets.iter().any(|t| t == &g.module) {
                let a = r * (g.d_in as u128 + g.d_out as u128) * g.copies as u128;
                let ada = (2 * r + g.d_in as u128 + g.d_out as u128) * g.copies as u128;
                largest_trainable = largest_trainable.max(u("lora", r * g.d_in.max(g.d_out) as u128)?);
                (a, ada)
            } else {
                (0, 0)
            };
            trainable_total += trainable;
            let cast_params = match g.kind {
                ParamGroupKind::Linear(_) => params,
                _ => 0,
            };
            groups.push(GroupInfo {
                place,
                tp_split: tp_shards(g),
                base_bytes,
                trainable: u("trainable params", trainable)?,
                adafactor_elems: u("adafactor", ada)?,
                cast_params: u("params", cast_params)?,
            });
        }
        let weight_bytes = if lora { adapter_dtype.bits() / 8 } else { p.weight_dtype().bits() / 8 };
        let grad_bytes = weight_bytes;
        let sb = p.state_dtype().bits() / 8;
        let state_bytes_x256 = match setup.optimizer {
            Optimizer::AdamW => 2 * sb * 256,
            // 2 states × (1 B + 4 B absmax / 256)
            Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => 2 * (256 + 4),
            Optimizer::Sgd => 0,
            Optimizer::SgdMomentum | Optimizer::Lion => sb * 256,
            // factored: counted from adafactor_elems instead
            Optimizer::Adafactor => 0,
        };
        let lora_modules = if lora { targets } else { Vec::new() };
        Ok(TrainProfile {
            groups,
            layers: spec.num_layers,
            params_total: layout.total()?,
            params_active: layout.active()?,
            params_trainable: u("trainable params", trainable_total)?,
            weight_bytes,
            grad_bytes,
            state_bytes_x256,
            largest_trainable,
            largest_base_matrix: largest_base,
            layer_params: u("layer params", layer_params / spec.num_layers.max(1) as u128)?,
            base_quant,
            base_dtype,
            precision: p,
            optimizer: setup.optimizer,
            kind: setup.kind,
            foreach: setup.foreach,
            adapter_bytes: adapter_dtype.bits() / 8,
            lora_modules,
            linear_names: all_names,
            tied: spec.tied_embeddings,
            head_params: u("head params", spec.vocab_size as u128 * spec.hidden_size as u128)?,
        })
    }

    /// Per-GPU share of a per-group quantity on the worst pipeline stage,
    /// following [`crate::weights::shard`]: TP splits what it splits,
    /// layers go ceil(L/pp) per stage, the worst stage carries the larger
    /// of embeddings and head when pp > 1.
    fn per_gpu(&self, tp: u64, pp: u64, f: impl Fn(&GroupInfo) -> u64) -> u128 {
        let tp = tp.max(1) as u128;
        let pp = pp.max(1);
        let l = self.layers.max(1) as u128;
        let per_stage = self.layers.div_ceil(pp) as u128;
        let (mut layers, mut emb, mut head, mut other) = (0u128, 0u128, 0u128, 0u128);
        for g in &self.groups {
            let mut v = f(g) as u128;
            if g.tp_split && tp > 1 {
                v = div_ceil128(v, tp);
            }
            match g.place {
                Place::Layers => layers += v,
                Place::Embed => emb += v,
                Place::Head => head += v,
                Place::Other => other += v,
            }
        }
        let layers = if pp > 1 { div_ceil128(layers * per_stage, l) } else { layers };
        let ends = if pp > 1 { emb.max(head) } else { emb + head };
        layers + ends + other
    }

    /// Trainable parameters on the worst GPU before ZeRO sharding.
    pub fn trainable_per_gpu(&self, tp: u64, pp: u64) -> u64 {
        u64::try_from(self.per_gpu(tp, pp, |g| g.trainable)).unwrap_or(u64::MAX)
    }

    /// Model-state bytes per GPU under `par`. Allocation-free.
    pub fn states(&self, par: &Parallelism) -> Result<ModelStates, CoreError> {
        let tp = par.tp.max(1);
        let pp = par.pp.max(1);
        let dp = par.dp() as u128;
        let stage = par.sharding.stage();
        let t = self.per_gpu(tp, pp, |g| g.trainable);
        let base = self.per_gpu(tp, pp, |g| g.base_bytes);
        let lora = self.kind != TrainKind::Full;
        // weights on the GPU: the base (frozen or trainable) + adapters
        let mut adapters = if lora { t * self.adapter_bytes as u128 } else { 0 };
        let mut weights = base + adapters;
        let mut master = if self.precision.has_master() { t * 4 } else { 0 };
        let mut grads = t * self.grad_bytes as u128;
        let mut opt = match self.optimizer {
            Optimizer::Adafactor => {
                self.per_gpu(tp, pp, |g| g.adafactor_elems) * (self.precision.state_dtype().bits() / 8) as u128
            }
            _ => div_ceil128(t * self.state_bytes_x256 as u128, 256),
        };
        let sb = (self.precision.state_dtype().bits() / 8) as u128;
        let largest = self.largest_trainable as u128;
        let mut temps = match self.optimizer {
            // _multi_tensor_adamw: torch._foreach_sqrt(exp_avg_sq) is one state-sized buffer
            Optimizer::AdamW if self.foreach => t * sb,
            Optimizer::AdamW => largest * sb,
            // fused CUDA kernels update in place
            Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit | Optimizer::Sgd => 0,
            Optimizer::SgdMomentum => 0,
            // per-parameter: update and its square for the largest tensor
            Optimizer::Adafactor => 2 * largest * 4,
            Optimizer::Lion => 2 * largest * sb,
        };
        // Mixed precision: DeepSpeed's FP16/BF16 optimizers up-cast the 16-bit gradient
        // partition to an fp32 buffer and attach it to the fp32 master partition
        // (`single_partition_of_fp32_groups[i].grad`) before `optimizer.step()`; the
        // optimizer's own temporaries come on top of it.
        let mut grad_copy = if self.precision.has_master() { t * 4 } else { 0 };
        // ZeRO sharding over the data-parallel ranks.
        if dp > 1 {
            if stage >= 1 {
                opt = div_ceil128(opt, dp);
                master = div_ceil128(master, dp);
                temps = div_ceil128(temps, dp);
                grad_copy = div_ceil128(grad_copy, dp);
            }
            if stage >= 2 {
                grads = div_ceil128(grads, dp);
            }
        }
        let mut gathered = 0u128;
        if stage >= 3 && dp > 1 {
            weights = div_ceil128(weights, dp);
            adapters = div_ceil128(adapters, dp);
            // the running layer and the prefetched next one, gathered in the weight dtype
            let w_b = (self.base_dtype.bits() / 8).max(1) as u128;
            gathered = 2 * div_ceil128(self.layer_params as u128, tp as u128) * w_b;
        }
        // Offload.
        let mut cpu = 0u128;
        let mut nvme = 0u128;
        if par.offload_optimizer != Offload::None {
            // ZeRO-Offload also keeps the fp32 gradient partition in pinned host memory
            let moved = opt + master + div_ceil128(t * 4, dp);
            match par.offload_optimizer {
                Offload::Cpu => cpu += moved,
                Offload::Nvme => {
                    nvme += opt + master;
                    // the fp32 gradient partition stays in pinned host memory
                    cpu += moved - opt - master;
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
                Offload::Cpu => cpu += weights,
                Offload::Nvme => nvme += weights,
                Offload::None => {}
            }
            weights = 0;
            adapters = 0;
        }
        Ok(ModelStates {
            weights: u("weights per GPU", weights)?,
            adapters: u("adapters per GPU", adapters)?,
            master: u("master weights per GPU", master)?,
            gradients: u("gradients per GPU", grads)?,
            optimizer: u("optimizer states per GPU", opt)?,
            step_temporaries: u("optimizer temporaries", temps + grad_copy)?,
            fp32_grad_copy: u("fp32 gradient copy", grad_copy)?,
            gathered: u("gathered parameters", gathered)?,
            trainable_per_gpu: u("trainable per GPU", t)?,
            cpu_bytes: u("offloaded bytes", cpu)?,
            nvme_bytes: u("offloaded bytes", nvme)?,
        })
    }

    /// Decoder-linear parameters (what autocast casts to 16-bit) per GPU on the worst stage.
    pub fn cast_params_per_gpu(&self, tp: u64, pp: u64) -> u64 {
        u64::try_from(self.per_gpu(tp, pp, |g| g.cast_params)).unwrap_or(u64::MAX)
    }

    /// Cast parameters of the decoder layers only (per GPU).
    pub fn layer_cast_params_per_gpu(&self, tp: u64, pp: u64) -> u64 {
        let all = self.per_gpu(tp, pp, |g| if g.place == Place::Layers { g.cast_params } else { 0 });
        u64::try_from(all).unwrap_or(u64::MAX)
    }

    /// Whether the sharding is the only thing splitting model states.
    pub fn sharding_name(par: &Parallelism) -> &'static str {
        match (par.sharding, par.fsdp) {
            (Sharding::None, _) => "none",
            (Sharding::Zero1, _) => "ZeRO-1",
            (Sharding::Zero2, false) => "ZeRO-2",
            (Sharding::Zero2, true) => "FSDP SHARD_GRAD_OP",
            (Sharding::Zero3, false) => "ZeRO-3",
            (Sharding::Zero3, true) => "FSDP FULL_SHARD",
        }
    }
}
