//! The training ledger: the lines of the peak moment of one
//! [`TrainBreakdown`], each with its explanation, then runtime, margin and
//! notes. No byte count is computed here: every line's bytes are a field of
//! [`super::breakdown::PeakLines`], so the ledger's tensors are the peak.

use super::breakdown::{TrainBreakdown, TrainModel, EAGER_BWD_BYTES};
use crate::error::CoreError;
use crate::explain::Explanation;
use crate::ledger::{Category, Ledger, Phase, Pool};
use crate::model::ModelSpec;
use crate::runtime::RuntimeSetup;
use crate::units::{add, product, GIB};
use crate::workload::{
    validate, AttentionImpl, Checkpointing, Offload, Optimizer, Parallelism, Sharding, TrainKind, TrainSetup,
};

/// The training ledger for one GPU (the worst rank).
pub fn estimate_training(
    spec: &ModelSpec,
    setup: &TrainSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
) -> Result<Ledger, CoreError> {
    validate::training(spec, setup, par, rt)?;
    let model = TrainModel::new(spec, setup)?;
    let b = model.evaluate(setup, par)?;
    let mut ledger = ledger_of(&model, &b, setup, par, rt)?;
    ledger.notes.extend(spec.untied_head_note(setup.engine));
    Ok(ledger)
}

/// The ledger of one evaluated breakdown (the planner's search calls this on
/// its prepared models, so its figures are the estimate's by construction).
pub fn ledger_of(
    model: &TrainModel,
    b: &TrainBreakdown,
    setup: &TrainSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
) -> Result<Ledger, CoreError> {
    let prof = &model.profile;
    let mut ledger = Ledger::new(b.peak_phase, par.gpus);
    ledger.params_total = prof.params_total;
    ledger.params_active = prof.params_active;
    ledger.params_trainable = prof.params_trainable;
    let lines = Lines { model, setup, par, b };
    lines.model_states(&mut ledger)?;
    if b.peak_phase == Phase::OptimizerStep {
        lines.step(&mut ledger);
    } else {
        lines.backward(&mut ledger)?;
    }
    // The lines are the fields of `b.at_peak`; a difference is a bug, never bad input.
    let lines_total = ledger.checked_total()?;
    let peak_total = add("peak", b.tensor_peak, b.outside_allocator)?;
    if lines_total != peak_total || ledger.tensor_peak_bytes() != b.tensor_peak {
        return Err(CoreError::Internal(format!(
            "training ledger lines sum to {lines_total} B ({} B allocated), the peak they come from is {peak_total} B ({} B allocated)",
            ledger.tensor_peak_bytes(),
            b.tensor_peak
        )));
    }
    // the other moment of the step, for the allocator's reserved peak
    let persistent = add("persistent", ledger.persistent_bytes(), b.comm_resident)?;
    rt.apply_moments(
        &mut ledger,
        &super::comm::training_communicators(par),
        other_moment(b, persistent),
        b.comm_resident,
    )?;
    // offloaded state: per rank in the breakdown, the whole job's in the ledger
    ledger.cpu_bytes = product("host RAM for offload", &[b.states.cpu_bytes, par.gpus])?;
    ledger.nvme_bytes = product("NVMe for offload", &[b.states.nvme_bytes, par.gpus])?;
    ledger.notes.extend(notes(setup, par, b, ledger.cpu_bytes, ledger.nvme_bytes));
    // the planner reads these figures from `totals_of` without building lines
    let t = totals_of(b, setup, par, rt)?;
    let from_lines = TrainTotals {
        total: ledger.checked_total()?,
        tensor_peak: ledger.tensor_peak_bytes(),
        weights: ledger.bytes(Category::Weights),
        model_states: crate::units::sum(
            "model states",
            &[
                ledger.bytes(Category::Weights),
                ledger.bytes(Category::MasterWeights),
                ledger.bytes(Category::Gradients),
                ledger.bytes(Category::OptimizerStates),
            ],
        )?,
        cpu_bytes: ledger.cpu_bytes,
    };
    if t != from_lines {
        return Err(CoreError::Internal(format!("training ledger {from_lines:?} differs from its totals {t:?}")));
    }
    Ok(ledger)
}

/// The other moment of the step than the tensor peak, as `(allocated,
/// transient)` bytes, for the allocator's reserved peak; `persistent`: the
/// long-lived tensors (weights, master, optimizer states, buckets).
fn other_moment(b: &TrainBreakdown, persistent: u64) -> Option<(u64, u64)> {
    let (other_device, other_phase) = if b.peak_phase == Phase::OptimizerStep {
        (b.backward_peak, Phase::Backward)
    } else {
        (b.step_peak, Phase::OptimizerStep)
    };
    // paged optimizer states are outside the allocator at every moment
    let other_alloc = other_device.saturating_sub(b.outside_allocator);
    (other_phase != b.peak_phase).then(|| (other_alloc, other_alloc.saturating_sub(persistent)))
}

/// The per-GPU figures of a training ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrainTotals {
    /// everything: tensors, allocator, runtime, margin
    pub total: u64,
    /// live tensors at the peak (`max_memory_allocated()`)
    pub tensor_peak: u64,
    /// the weights lines (base, fp32 casts, adapters)
    pub weights: u64,
    /// weights + master + gradients + optimizer states at the peak
    pub model_states: u64,
    /// host RAM of the whole job (every rank) for offloaded state
    pub cpu_bytes: u64,
}

/// The figures [`ledger_of`] gives for `b`, without building its lines: the
/// planner's search evaluates thousands of setups through this. `ledger_of`
/// checks that its lines agree with it.
pub fn totals_of(
    b: &TrainBreakdown,
    setup: &TrainSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
) -> Result<TrainTotals, CoreError> {
    let at = &b.at_peak;
    let weights =
        crate::units::sum("weights", &[at.base_weights, at.fp32_casts, at.adapters, at.fp8_weights, at.hpz_secondary])?;
    // paged optimizer states live outside the allocator: not its persistent tensors
    let optimizer_in_allocator = if setup.optimizer.is_paged() { 0 } else { at.optimizer };
    let persistent = crate::units::sum("persistent", &[weights, at.master, optimizer_in_allocator, b.comm_resident])?;
    let lines_total = add("peak", b.tensor_peak, b.outside_allocator)?;
    let comms = super::comm::training_communicators(par);
    let added = rt.added(lines_total, b.tensor_peak, persistent, &comms, other_moment(b, persistent))?;
    Ok(TrainTotals {
        total: added.total,
        tensor_peak: b.tensor_peak,
        weights,
        model_states: crate::units::sum("model states", &[weights, at.master, at.gradients, at.optimizer])?,
        cpu_bytes: product("host RAM for offload", &[b.states.cpu_bytes, par.gpus])?,
    })
}

/// What the line builders share.
struct Lines<'a> {
    model: &'a TrainModel,
    setup: &'a TrainSetup,
    par: &'a Parallelism,
    b: &'a TrainBreakdown,
}

fn with_note(e: Explanation, note: &str) -> Explanation {
    if note.is_empty() {
        e
    } else {
        e.note(note)
    }
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / GIB as f64)
}

impl Lines<'_> {
    /// How a state is split over data-parallel ranks (ZeRO shards it from `stage` on).
    fn shard_note(&self, what: &str, stage: u8) -> String {
        // the shards span DP × CP ([`Parallelism::shard_dp`])
        let dp = self.par.shard_dp();
        let group = if self.par.cp > 1 { "DP × CP" } else { "DP" };
        let megatron = self.setup.framework().megatron_mixed_precision;
        if megatron && dp > 1 && self.par.sharding.stage() >= stage {
            let ep = self.par.ep.max(1);
            let edp = self.par.expert_dp();
            let experts = if ep > 1 && self.par.expert_tp() == 1 {
                format!("; the routed experts' share ÷ expert-DP {edp} = GPUs / (PP × EP)")
            } else if ep > 1 || self.par.expert_tp() != self.par.tp.max(1) {
                format!("; the routed experts' share ÷ expert-DP {edp} = GPUs / (PP × EP × ETP)")
            } else {
                String::new()
            };
            format!("÷ {group} {dp} (Megatron --use-distributed-optimizer: {what} sharded over the data-parallel ranks{experts}; docs/user-guide/features/dist_optimizer.md: 6 + 12/d B/param under bf16)")
        } else if self.par.hybrid() && self.par.sharding.stage() >= stage {
            format!(
                "÷ shard group {} = DP {dp} ÷ {} replicas (hybrid sharding, FSDP HYBRID_SHARD: {what} sharded within each replica's ranks, replicated across the replicas)",
                self.par.shard_degree(),
                self.par.dp_replicate
            )
        } else if dp > 1 && self.par.sharding.stage() >= stage && self.par.ep > 1 {
            // DeepSpeed AutoEP: the experts' ZeRO partitions over the expert-data-parallel group
            let edp = (self.par.gpus / self.par.ep).max(1);
            format!(
                "÷ {group} {dp} ({}: {what} sharded; the routed experts' share ÷ expert-DP {edp} = GPUs / EP, DeepSpeed AutoEP)",
                self.par.sharding_label()
            )
        } else if dp > 1 && self.par.sharding.stage() >= stage {
            format!("÷ {group} {dp} ({}: {what} sharded)", self.par.sharding_label())
        } else {
            "not sharded over data-parallel ranks".to_string()
        }
    }

    fn offloaded(&self) -> bool {
        self.par.offload_optimizer != Offload::None
    }

    /// Weights, adapters, master weights, gradients and optimizer states.
    fn model_states(&self, ledger: &mut Ledger) -> Result<(), CoreError> {
        self.weight_lines(ledger)?;
        self.gradient_line(ledger);
        let (setup, at) = (self.setup, &self.b.at_peak);
        let s = &self.b.states;
        let at_step = self.b.peak_phase == Phase::OptimizerStep;
        if at.comm_buffers > 0 {
            ledger.push(Category::Temporaries, self.comm_label(), at.comm_buffers, self.comm_explain());
        }
        let states_live = at_step || !setup.first_step || setup.optimizer_in_backward;
        let pool = if setup.optimizer.is_paged() { Pool::Outside } else { Pool::Tensor };
        ledger.push_in(
            pool,
            Category::OptimizerStates,
            format!(
                "{} states{}",
                setup.optimizer.name(),
                if states_live { "" } else { " — created at the first step()" }
            ),
            at.optimizer,
            with_note(
                Explanation::new(self.optimizer_formula())
                    .term("trainable per GPU", s.trainable_per_gpu)
                    .term("states", s.optimizer)
                    .term("sharding", self.shard_note("optimizer states", 1)),
                if setup.optimizer.is_paged() {
                    "paged: CUDA managed memory (bitsandbytes get_paged), outside the PyTorch allocator: not in max_memory_allocated(), evicted to host RAM under pressure (counted as resident on the card)"
                } else if self.offloaded() {
                    "offloaded: held in host RAM / NVMe, 0 on the GPU"
                } else {
                    ""
                },
            ),
        );
        Ok(())
    }

    /// The base weights (and QLoRA's fp32 casts), the adapters and the fp32 master weights.
    fn weight_lines(&self, ledger: &mut Ledger) -> Result<(), CoreError> {
        let (prof, setup, at) = (&self.model.profile, self.setup, &self.b.at_peak);
        let s = &self.b.states;
        let base_label = match (&prof.base_quant, prof.kind) {
            (Some(q), _) => format!("frozen base weights ({} linears, 16-bit rest)", q.label),
            (None, TrainKind::Full) => format!("weights ({})", prof.base_dtype),
            (None, _) => format!("frozen base weights ({})", prof.base_dtype),
        };
        let base_formula = match prof.base_quant {
            Some(_) => "quantized decoder linears (packed 4-bit + absmax [+ double-quant scales]) + 16-bit embeddings/head/norms"
                .to_string(),
            None => format!("params × {} B", prof.base_dtype.bytes()?),
        };
        ledger.push(
            Category::Weights,
            base_label,
            at.base_weights,
            Explanation::new(base_formula)
                .term("params_total", prof.params_total)
                .term(
                    "layout",
                    if self.par.ep > 1 && self.par.expert_tp() == 1 {
                        format!(
                            "per GPU after TP {} × PP {} (worst stage); the routed experts whole, ÷ EP {} (expert-tensor-parallel 1)",
                            self.par.tp, self.par.pp, self.par.ep
                        )
                    } else if self.par.ep > 1 || self.par.expert_tp() != self.par.tp.max(1) {
                        format!(
                            "per GPU after TP {} × PP {} (worst stage); the routed experts ÷ EP {} × ETP {}",
                            self.par.tp,
                            self.par.pp,
                            self.par.ep.max(1),
                            self.par.expert_tp()
                        )
                    } else {
                        format!("per GPU after TP {} × PP {} (worst stage)", self.par.tp, self.par.pp)
                    },
                )
                .term("sharding", self.shard_note("parameters", 3)),
        );
        if at.fp32_casts > 0 {
            ledger.push(
                Category::Weights,
                "fp32 casts of norms, embeddings and head (prepare_model_for_kbit_training)",
                at.fp32_casts,
                Explanation::new("non-quantized params × (4 B − 2 B)")
                    .term("bytes added", at.fp32_casts)
                    .note("PEFT's prepare_model_for_kbit_training casts every parameter that is not 4-bit to fp32; the embeddings' fp32 output then makes the residual stream (and the checkpointed layer inputs) fp32 too; --no-kbit-prep models a QLoRA without it"),
            );
        }
        if prof.kind != TrainKind::Full {
            ledger.push(
                Category::Weights,
                format!("LoRA adapters (r={}, {} B/param)", setup.lora.rank, prof.adapter_bytes),
                at.adapters,
                Explanation::new("Σ over adapted linears of r × (d_in + d_out) × copies × bytes")
                    .term("rank", setup.lora.rank)
                    .term("targets", prof.lora_modules.join(","))
                    .term("trainable params", prof.params_trainable)
                    .note(if prof.adapter_bytes == 4 {
                        "PEFT get_peft_model(autocast_adapter_dtype=True) keeps adapters in fp32 (--adapter-dtype bf16: torchtune, LitGPT)"
                    } else {
                        "adapters in the model's dtype (torchtune, LitGPT; PEFT's default is fp32: --adapter-dtype fp32)"
                    }),
            );
        }
        if setup.precision.has_master() {
            ledger.push(
                Category::MasterWeights,
                "fp32 master weights",
                at.master,
                with_note(
                    Explanation::new("trainable params × 4 B")
                        .term("trainable per GPU", s.trainable_per_gpu)
                        .term("sharding", self.shard_note("master weights", 1)),
                    if self.offloaded() { "offloaded: 0 on the GPU" } else { "" },
                ),
            );
        }
        if at.fp8_weights > 0 {
            ledger.push(
                Category::Weights,
                "FP8 copies of the decoder linears' weights and their transposes",
                at.fp8_weights,
                Explanation::new("decoder-linear params per GPU × 2 B (an FP8 weight + its FP8 transpose)")
                    .term("decoder-linear params per GPU", at.fp8_weights / 2)
                    .note("TransformerEngine Linear caches the FP8 weight across a step's micro-batches (get_weight_workspace, cache_name \"weight\", Megatron's TELinear passes is_first_microbatch) with its transpose for the backward GEMM"),
            );
        }
        if at.hpz_secondary > 0 {
            ledger.push(
                Category::Weights,
                "ZeRO++ hpZ secondary parameter partition",
                at.hpz_secondary,
                Explanation::new("weights as stored (per GPU before sharding) ÷ hpZ group")
                    .term("hpZ group (zero_hpz_partition_size)", self.par.hpz)
                    .term("primary shard", format!("÷ DP {} (the weights line)", self.par.dp()))
                    .note("DeepSpeed _partition_param_sec (runtime/zero/partition_parameters.py) keeps a second shard of every parameter in its own dtype over the rank's group; built as each module is released after forward, dropped in _post_step after the optimizer step (stage3.py invalidate_secondary_tensor): live at every peak"),
            );
        }
        Ok(())
    }

    /// The gradients live at the peak.
    fn gradient_line(&self, ledger: &mut Ledger) {
        let (prof, setup, at) = (&self.model.profile, self.setup, &self.b.at_peak);
        let s = &self.b.states;
        let grads_live = at.gradients > 0;
        let grads_note = if setup.optimizer_in_backward {
            "optimizer in backward: each parameter is stepped as its gradient is ready and the gradient freed; one tensor's gradient at a time"
        } else if at.gradients > s.gradients {
            "FSDP under gradient accumulation (no_sync: accelerate's accumulate(), Lightning Fabric's no_backward_sync in LitGPT): every gradient kept unsharded between micro-batches"
        } else {
            "at the start of backward (grad_accum 1, zero_grad(set_to_none)) no gradient exists yet; with accumulation (or FSDP1's flat gradient buffers) they persist"
        };
        let grads_note = if setup.framework().megatron_mixed_precision {
            "Megatron's grad buffer (_ParamAndGradBuffer, megatron/core/distributed/param_and_grad_buffer.py) is allocated when the model is wrapped and lives for the whole run; backward accumulates into param.main_grad, a view of it. Under --bf16 it is fp32 (megatron/training/arguments.py validate_args sets accumulate_allreduce_grads_in_fp32; DistributedDataParallelConfig.grad_reduce_in_fp32); the distributed optimizer reduce-scatters it in place, so it is never sharded"
        } else {
            grads_note
        };
        let grad_bytes = prof.grad_bytes_stored();
        ledger.push(
            Category::Gradients,
            format!("gradients ({} B/param){}", grad_bytes, if grads_live { "" } else { " — none yet at this peak" }),
            at.gradients,
            Explanation::new("trainable params × grad bytes")
                .term("trainable per GPU", s.trainable_per_gpu)
                .term("grad bytes", grad_bytes)
                .term("full gradient buffer", s.gradients)
                .term(
                    "sharding",
                    if at.gradients > s.gradients {
                        format!(
                            "none between micro-batches (no_sync); {} once reduce-scattered",
                            self.shard_note("gradients", 2)
                        )
                    } else {
                        self.shard_note("gradients", 2)
                    },
                )
                .note(grads_note),
        );
    }

    fn comm_label(&self) -> String {
        use crate::workload::Sharding;
        match self.par.sharding {
            Sharding::None => "DDP gradient buckets".into(),
            _ if !self.is_fsdp() => {
                format!(
                    "DeepSpeed ZeRO reduce bucket{}",
                    if self.setup.comm.overlap_comm { "s (overlap_comm)" } else { "" }
                )
            }
            _ => "FSDP reduce-scatter buffer (one unit's unsharded gradient)".into(),
        }
    }

    /// Sharded data parallelism reduces through FSDP (else DeepSpeed's buckets).
    fn is_fsdp(&self) -> bool {
        self.setup.framework().shards_with_fsdp(self.par.fsdp)
    }

    fn comm_explain(&self) -> Explanation {
        use crate::workload::Sharding;
        let c = &self.setup.comm;
        match self.par.sharding {
            Sharding::None => Explanation::new("trainable params × grad bytes (the reducer's flat buckets hold a second copy of every gradient)")
                .term("trainable per GPU", self.b.states.trainable_per_gpu)
                .note("torch.nn.parallel.DistributedDataParallel copies .grad into its buckets unless gradient_as_bucket_view=True"),
            _ if !self.is_fsdp() => {
                Explanation::new("reduce_bucket_size × gradient bytes × (2 with overlap_comm, else 1)")
                    .term("reduce_bucket_size (elements)", c.reduce_bucket)
                    .term("overlap_comm", c.overlap_comm)
                    .term("gradient bytes", self.model.compute_bytes)
                    .note("DeepSpeed stage_1_and_2.py allocates its ipg reduction buffers up front (two with overlap_comm); allgather_bucket_size only chunks the all-gather into the flat buffers. From the DeepSpeed config (--deepspeed); defaults 5e8 elements")
            }
            _ => Explanation::new("trainable params of the largest wrapped unit (a layer, or the root's embeddings + head) × grad bytes")
                .term("largest unit (trainable params)", self.model.profile.largest_unit_trainable(self.par.tp).unwrap_or(0))
                .note("FSDP reduce-scatters each wrapped unit's unsharded gradient in backward; the root's head gradient lives through all of backward; the all-gathered parameters are their own line"),
        }
    }

    fn optimizer_formula(&self) -> String {
        let sb = self.model.profile.state_bytes;
        match self.setup.optimizer {
            Optimizer::AdamW => format!("trainable × 2 states × {sb} B (exp_avg, exp_avg_sq)"),
            Optimizer::PagedAdamW => "trainable × 2 states × 4 B (bitsandbytes 32-bit states are fp32)".to_string(),
            Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => {
                "trainable × 2 × (1 B + 4 B absmax / 256) (bitsandbytes blockwise 8-bit)".to_string()
            }
            Optimizer::Sgd => "none: plain SGD keeps no state".to_string(),
            Optimizer::SgdMomentum => format!("trainable × {sb} B momentum buffer"),
            Optimizer::Lion => format!("trainable × {sb} B (exp_avg)"),
            Optimizer::Adafactor => {
                "Σ matrices (rows + cols) × 4 B + vectors × 4 B (factored second moment)".to_string()
            }
        }
    }

    /// The optimizer step's temporaries (the peak of a short-sequence full fine-tune).
    fn step(&self, ledger: &mut Ledger) {
        let (setup, at) = (self.setup, &self.b.at_peak);
        ledger.push(
            Category::Temporaries,
            "optimizer-step temporaries",
            at.step_temporaries,
            Explanation::new(match setup.optimizer {
                _ if setup.framework().megatron_mixed_precision => {
                    "Megatron's FusedAdam (Transformer Engine / Apex multi_tensor_apply, megatron/core/optimizer/__init__.py) updates in place: none"
                }
                Optimizer::AdamW if setup.foreach => {
                    "foreach AdamW: torch._foreach_sqrt(exp_avg_sq) = trainable × state bytes"
                }
                Optimizer::AdamW => "per-parameter AdamW: largest tensor × state bytes",
                Optimizer::Adafactor | Optimizer::Lion => "per-parameter update buffers of the largest tensor",
                _ => "fused in-place update",
            })
            .term("bytes", at.step_temporaries)
            .note("activations are freed by now; the peak of a small-seq full fine-tune sits here"),
        );
        if setup.precision.has_master() {
            ledger.push(
                Category::Temporaries,
                "fp32 gradient copy for the master step (mixed precision)",
                at.fp32_grad_copy,
                Explanation::new("trainable params × 4 B")
                    .term("trainable per GPU", self.b.states.trainable_per_gpu)
                    .term("sharding", self.shard_note("the fp32 gradient partition", 1))
                    .note(if self.offloaded() {
                        "offloaded: the fp32 gradient partition lives in pinned host memory, 0 on the GPU"
                    } else if setup.framework().megatron_mixed_precision && matches!(setup.precision, crate::workload::Precision::MixedBf16 | crate::workload::Precision::MixedFp8) {
                        "Megatron under --bf16: the main grads are fp32 already; _copy_model_grads_to_main_grads hands the optimizer main_grad.float(), the same tensor: no copy"
                    } else if setup.framework().megatron_mixed_precision {
                        "Megatron: _copy_model_grads_to_main_grads sets main_param.grad = main_grad.float(), an fp32 copy of the 16-bit main grads (megatron/core/optimizer/optimizer.py, distrib_optimizer.py)"
                    } else {
                        "mixed precision adds a 4 B/param fp32 gradient copy at the step: DeepSpeed up-casts the 16-bit gradient partition and attaches it to the fp32 master partition before optimizer.step(), on top of the optimizer's own temporaries"
                    }),
            );
        }
    }

    /// Saved activations, logits buffers and the transients of backward.
    fn backward(&self, ledger: &mut Ledger) -> Result<(), CoreError> {
        let (model, setup, par, b, at) = (self.model, self.setup, self.par, self.b, &self.b.at_peak);
        let act = &model.act;
        // per rank: seq / cp tokens of each sequence under context parallelism
        let tokens = product("tokens", &[setup.batch, super::breakdown::local_seq(setup, par)])?;
        let per_layer_formula = match setup.checkpointing {
            Checkpointing::Full => "layers/stage × tokens × layer input (hidden × stream bytes)".to_string(),
            _ => "layers/stage × tokens × (norms + q/k/v + attention out + MLP intermediates [+ heads × seq × softmax bytes for eager])".to_string(),
        };
        let mut layers_explain = Explanation::new(per_layer_formula);
        if act.moe_dispatched > 0 {
            layers_explain = layers_explain.term(
                "of which MoE tokens dispatched to the experts (Megatron: top-k × hidden × activation bytes, the grouped fc1's saved input after MoEAlltoAllTokenDispatcher's permute + all-to-all)",
                act.moe_dispatched,
            );
            let gathered = super::activations::expert_gather_bytes_per_token(act, par.tp, par.expert_tp())?;
            if gathered > 0 {
                layers_explain = layers_explain.term(
                    "plus per token per layer: the dispatched tokens all-gathered over the expert-tensor-parallel ranks (Megatron dispatch_postprocess; ETP − 1 more copies ÷ TP)",
                    gathered,
                );
            }
        }
        if par.ep > 1 && act.autoep_dispatched > 0 {
            layers_explain = layers_explain.term(
                "of which DeepSpeed AutoEP's routed rows (top-k × hidden × activation bytes, the grouped GEMMs' input after the all-to-all) and fp32 combine copy (top-k × hidden × 4), averaged over the layers",
                act.autoep_dispatched,
            );
        }
        ledger.push(
            Category::Activations,
            "saved activations, decoder layers",
            at.act_layers,
            layers_explain
                .term("tokens", tokens)
                .term("layers per stage", model.profile.layers.div_ceil(par.pp))
                .term("per token per layer (replicated)", act.layer_rep)
                .term("per token per layer (split by TP)", act.layer_split)
                .term("per token per layer k,v (split by TP over kv heads)", act.layer_kv)
                .term("per token per layer per key", act.layer_per_key)
                .term("layer input kept under checkpointing", act.layer_input)
                .term("in-flight micro-batches", b.in_flight)
                .note(format!(
                    "checkpointing {}; attention {}; {} in flight",
                    setup.checkpointing.name(),
                    setup.attention.name(),
                    b.in_flight
                )),
        );
        ledger.push(
            Category::Activations,
            "saved activations, final norm + embeddings",
            at.act_ends,
            Explanation::new("tokens × final-norm saved bytes (+ embedding dropout mask)")
                .term("tokens", tokens)
                .term("per token", act.ends),
        );
        if at.weight_copies > 0 {
            ledger.push(
                Category::Activations,
                "16-bit weight casts kept by autocast",
                at.weight_copies,
                Explanation::new("linear params per GPU × 2 B (the cast weights each matmul saves for backward)").note(
                    if setup.checkpointing == Checkpointing::Full {
                        "with checkpointing only the output head's cast survives the forward"
                    } else {
                        "autocast caches one 16-bit copy of every fp32 weight during forward"
                    },
                ),
            );
        }
        self.backward_transients(ledger, tokens);
        Ok(())
    }

    /// Logits buffers, or the recomputed layer, or eager attention's gradients
    /// (whichever is live at the peak), QLoRA's dequantized matrix, ZeRO-3's gathered layer.
    fn backward_transients(&self, ledger: &mut Ledger, tokens: u64) {
        self.loss_lines(ledger, tokens);
        let (model, par, at) = (self.model, self.par, &self.b.at_peak);
        if at.recompute > 0 {
            ledger.push(
                Category::Temporaries,
                "checkpointing: one layer recomputed in backward",
                at.recompute,
                Explanation::new("tokens × one layer's full saved set (+ its weight casts under autocast)")
                    .term("tokens", tokens)
                    .note("later in backward than the logits buffers, which are freed by then"),
            );
        }
        if at.kept_input_grads > 0 {
            ledger.push(
                Category::Temporaries,
                "FSDP frozen units: checkpointed inputs' gradients kept to the end of backward",
                at.kept_input_grads,
                Explanation::new("(layers − 1) × tokens × layer input (hidden × stream bytes)")
                    .term("tokens", tokens)
                    .term("layers per stage", model.profile.layers.div_ceil(par.pp))
                    .term("layer input per token", model.act.layer_input)
                    .note("the HF Trainer's gradient checkpointing is reentrant (transformers gradient_checkpointing_enable: use_reentrant=True) and wraps each FSDP-wrapped decoder layer: its backward recomputes the layer on detached leaf inputs and accumulates their gradients into .grad; for a unit without trainable parameters (LoRA/QLoRA base layers; PEFT's fsdp_auto_wrap_policy wraps the adapters apart) FSDP1 reshards through register_multi_grad_hook on those inputs (_register_post_backward_reshard_only_hook, torch/distributed/fsdp/_runtime_utils.py); the hook closes over their AccumulateGrad nodes (torch/autograd/graph.py), which hold each input and its .grad until _finalize_params removes the hook at the end of backward; so when the first layer is recomputed, every other layer's input (in the saved-activations line) and its gradient are still alive"),
            );
        }
        if at.attention_backward > 0 && par.cp > 1 {
            ledger.push(
                Category::Temporaries,
                "context-parallel ring attention: K/V blocks in flight (one layer)",
                at.attention_backward,
                Explanation::new("max(batch × seq × (K/V + hidden) × compute bytes ÷ TP [forward: every received K/V block and every step's partial output kept until the merge], 4 × batch × seq / cp × K/V [backward: two buffers of a K/V block and its gradient])")
                    .term("tokens per rank", self.setup.batch.saturating_mul(self.setup.seq.div_ceil(par.cp)))
                    .term("context-parallel ranks", par.cp)
                    .note("TransformerEngine AttnFuncWithCPAndKVP2P (Megatron-LM --context-parallel-size, cp_comm_type p2p); counted on top of every saved activation, an upper bound for the forward moment"),
            );
        } else if at.attention_backward > 0 {
            ledger.push(
                Category::Temporaries,
                "eager attention backward: one layer's softmax and score gradients",
                at.attention_backward,
                Explanation::new(format!(
                    "batch × heads × seq × seq × {EAGER_BWD_BYTES} B (fp32 grads of softmax and scores) [+ output-head gradient]"
                ))
                .term("tokens", tokens)
                .term("heads per TP rank", model.heads.div_ceil(par.tp))
                .note("the peak of a long-sequence eager run sits inside attention backward, after the logits buffers are freed"),
            );
        }
        if at.dequant > 0 {
            ledger.push(
                Category::Temporaries,
                "QLoRA: one base matrix dequantized to 16-bit",
                at.dequant,
                Explanation::new("2 × largest linear (d_in × d_out) × compute bytes (forward and backward dequantize)")
                    .term("largest matrix elements", model.profile.largest_base_matrix),
            );
        }
        if at.gathered > 0 {
            ledger.push(
                Category::Temporaries,
                "ZeRO-3 / FSDP gathered parameters (running + prefetched layer)",
                at.gathered,
                if model.profile.base_quant.is_some() {
                    Explanation::new("2 × one layer's stored bytes ÷ TP (the quantized base as stored)")
                        .term("layer bytes as gathered", model.profile.layer_gather_bytes(par.tp).unwrap_or(0))
                        .note("FSDP and ZeRO-3 all-gather a quantized base as stored, not dequantized: bitsandbytes' packed 4-bit data in bnb_4bit_quant_storage (transformers _fsdp_qlora_plugin_updates), torchao NF4Tensor's fsdp_pre_all_gather (quantized data + scalers); each matrix is dequantized afterwards (the dequant line)")
                } else {
                    Explanation::new("2 × layer params ÷ TP × weight bytes").term("layer params", model.profile.layer_params)
                },
            );
        }
        if at.root_flat_grad > 0 {
            ledger.push(
                Category::Temporaries,
                "FSDP root flat gradient at the end of backward (its views' gradients live)",
                at.root_flat_grad,
                Explanation::new("root unit trainable params (per TP rank) × grad bytes")
                    .term("root trainable params", model.profile.root_trainable(par.tp).unwrap_or(0))
                    .term("grad bytes", model.profile.grad_bytes)
                    .note("FSDP1 makes each unit's parameters views of one FlatParameter: autograd concatenates the views' gradients into the flat gradient when the last of them (the embedding's) arrives, so the head's and embedding's gradients (the reduce-scatter line) and the new flat gradient are live together; later in backward than the logits buffers, which are freed by then"),
            );
        }
        if at.root_unsharded > 0 {
            let root = model.profile.root_base_bytes(par.tp).unwrap_or(0);
            ledger.push(
                Category::Temporaries,
                "FSDP root unit unsharded from forward to backward (embeddings, head, final norm)",
                at.root_unsharded,
                Explanation::new("root unit bytes: the all-gathered root, beside the shard in the weights line")
                    .term("root unit bytes (unsharded, per TP rank)", root)
                    .note("FSDP1 (accelerate, Lightning Fabric / LitGPT) does not free the root's unsharded parameters after forward under FULL_SHARD, for backward to use at once (torch/distributed/fsdp/_runtime_utils.py, _post_forward_reshard); with a per-decoder-layer wrap the root holds the embeddings, the final norm and the output head; the unsharded root is its own padded buffer (_full_param_padded, FlatParamHandle._alloc_padded_unsharded_flat_param in torch/distributed/fsdp/_flat_param.py) while the rank's shard stays allocated as _local_shard, so the root costs its full size on top of the weights line"),
            );
        }
    }

    /// The loss's buffers: the saved log-softmax, the gradients at the start of
    /// backward, and (transformers ≤ 4.48) the end of the loss forward.
    fn loss_lines(&self, ledger: &mut Ledger, tokens: u64) {
        let (model, par, at) = (self.model, self.par, &self.b.at_peak);
        ledger.push(
            Category::Logits,
            "log-softmax of the logits, saved for the loss",
            at.logits_saved,
            Explanation::new("batch × seq × vocab (per TP rank) × bytes")
                .term("tokens", tokens)
                .term("vocab per TP rank", model.vocab.div_ceil(par.tp))
                .term("bytes", model.act.logits_saved)
                .note("transformers upcasts logits to fp32 inside the loss; freed once the loss backward ran"),
        );
        let loss_parallel = model.logits_grad_bytes(self.setup, par) > model.act.logits_grad;
        ledger.push(
            Category::Logits,
            "gradients of log-softmax and logits (start of backward)",
            at.logits_grad,
            if loss_parallel {
                Explanation::new("3 × batch × seq × vocab per TP rank × bytes")
                    .term("tokens", tokens)
                    .term("bytes", model.act.logits_saved)
                    .note("vocabulary-parallel loss (torchtitan under TP, loss_parallel()): its fused nll/log-softmax backward holds zeros_like(x), exp(x) and their sum, three fp32 vocabulary-shard buffers beside the saved log-softmax (torch/distributed/tensor/parallel/loss.py, _nll_loss_and_log_softmax_backward)")
            } else {
                Explanation::new("2 × batch × seq × vocab × bytes")
                    .term("tokens", tokens)
                    .term("bytes", model.act.logits_saved)
            },
        );
        if at.loss_forward > 0 {
            ledger.push(
                Category::Logits,
                "loss forward: the logits, their fp32 upcast and its shifted copy",
                at.loss_forward,
                Explanation::new("batch × seq × vocab (per TP rank) × (compute bytes + 4 + 4)")
                    .term("tokens", tokens)
                    .term("vocab per TP rank", model.vocab.div_ceil(par.tp))
                    .term("compute bytes", model.compute_bytes)
                    .note("transformers ≤ 4.48 ForCausalLMLoss: logits = logits.float(); shift_logits = logits[..., :-1, :].contiguous(), a second fp32 copy, live beside the compute-dtype logits and the log-softmax while cross_entropy runs (removed by transformers PR #35646); the end of forward then holds more than the start of backward (decoder layers resharded, no logits gradient, no recomputed layer yet)"),
            );
        }
    }
}

/// Context parallelism in one sentence: what each rank holds and where the
/// model states shard.
fn context_parallel_note(setup: &TrainSetup, par: &Parallelism) -> String {
    let cp = par.cp.max(1);
    format!(
        "context parallel {cp}: each GPU holds {} of the {} tokens of every sequence and their activations (attention included: K/V blocks pass round the ring of {cp} ranks); gradients are reduced and states sharded over DP × CP = {} ranks",
        setup.seq / cp,
        setup.seq,
        par.shard_dp()
    )
}

/// What the user should know about this training setup, in sentences.
/// The note on DeepSpeed AutoEP's split (PR #7938; docs/code-docs/source/autoep.rst
/// "How it works"): experts whole over the EP ranks, their gradients and ZeRO
/// shards over the expert-data-parallel group, everything else over all ranks.
fn autoep_note(par: &Parallelism) -> String {
    let edp = (par.gpus / par.ep.max(1)).max(1);
    let sharded = match par.sharding.stage() {
        0 => "are not sharded (ZeRO 0)".to_string(),
        1 => format!("shard their master and optimizer states over {edp} expert-data-parallel ranks (ZeRO-1)"),
        _ => format!(
            "shard their gradients, master and optimizer states over {edp} expert-data-parallel ranks ({})",
            par.sharding_label()
        ),
    };
    format!(
        "expert parallel {}: DeepSpeed AutoEP (expert_parallel.autoep_size {}) gives each GPU 1/{} of the routed experts of every MoE layer, whole, and routes the tokens to them by all-to-all; the experts {sharded}; attention, router, shared experts and embeddings over all {} ranks",
        par.ep, par.ep, par.ep, par.gpus
    )
}

fn notes(setup: &TrainSetup, par: &Parallelism, b: &TrainBreakdown, cpu_total: u64, nvme_total: u64) -> Vec<String> {
    let dp = par.dp();
    let mut notes = Vec::new();
    let megatron = setup.framework().megatron_mixed_precision;
    if dp > 1 && par.sharding == Sharding::None && megatron {
        notes.push(format!(
            "data parallelism alone ({dp} replicas) saves no memory per GPU: every GPU holds the full model states; Megatron's distributed optimizer (--zero 1: --use-distributed-optimizer) shards the fp32 master and Adam states, 6 + 12/d B/param instead of 18 under bf16"
        ));
    } else if dp > 1 && par.sharding == Sharding::None {
        notes.push(format!(
            "data parallelism alone ({dp} replicas) saves no memory per GPU: every GPU holds the full model states; use --zero 1|2|3 / --fsdp to shard them (PyTorch DDP also keeps gradient buckets, ≈ one more gradient copy unless gradient_as_bucket_view=True)"
        ));
    }
    if par.shard_dp() == 1 && par.sharding != Sharding::None {
        notes.push(format!(
            "{} with one data-parallel rank shards nothing: give --gpus (the DP degree is gpus ÷ (tp × pp))",
            par.sharding_label()
        ));
    }
    notes.extend(sharding_notes(setup, par, dp));
    if par.gpus > 1 && par.cp > 1 {
        notes.push(format!(
            "{} GPUs = TP {} × CP {} × PP {} × DP {dp}; figures are per GPU (the worst rank)",
            par.gpus, par.tp, par.cp, par.pp
        ));
        notes.push(context_parallel_note(setup, par));
    } else if par.gpus > 1 {
        notes.push(format!(
            "{} GPUs = TP {} × PP {} × DP {dp}; figures are per GPU (the worst rank)",
            par.gpus, par.tp, par.pp
        ));
    }
    match setup.checkpointing {
        Checkpointing::Full => notes.push(
            "full activation checkpointing keeps only each layer's input and recomputes the layer in backward: ≈ one extra forward (~33% more compute)".into(),
        ),
        Checkpointing::Selective => notes.push(if setup.attention == AttentionImpl::Eager {
            "selective recompute drops the seq × seq attention tensors and recomputes the attention core (a few % more compute)".into()
        } else {
            "selective recompute only drops the seq × seq attention tensors, which SDPA/flash never keeps: no saving here".into()
        }),
        Checkpointing::None => {}
    }
    if par.pp > 1 && par.virtual_stages > 1 {
        notes.push(format!(
            "interleaved 1F1B pipeline, {} virtual stages per rank: the first stage holds {} micro-batches of activations in flight (pp + ⌈(pp − 1) / virtual stages⌉, Megatron-LM's interleaved memory penalty)",
            par.virtual_stages, b.in_flight
        ));
    } else if par.pp > 1 {
        notes.push(format!(
            "1F1B pipeline: the first stage holds {} micro-batches of activations in flight (min(pp, grad_accum))",
            b.in_flight
        ));
    }
    if setup.grad_accum > 1 {
        notes.push(format!(
            "gradient accumulation over {} micro-batches: memory of one micro-batch, gradients persist between them",
            setup.grad_accum
        ));
    }
    let s = &b.states;
    if s.cpu_bytes > 0 || s.nvme_bytes > 0 {
        notes.push(format!(
            "offload: host RAM {} and NVMe {} for all {} ranks ({} / {} per rank)",
            gib(cpu_total),
            gib(nvme_total),
            par.gpus,
            gib(s.cpu_bytes),
            gib(s.nvme_bytes)
        ));
    }
    if par.offload_optimizer.is_some() && !setup.framework().shards_with_fsdp(par.fsdp) {
        let o = setup.optimizer;
        if o.is_8bit() || o == Optimizer::PagedAdamW {
            notes.push(format!(
                "DeepSpeed runs fp32 CPU-Adam (DeepSpeedCPUAdam) under offload, not {}: it refuses a client optimizer (zero_force_ds_cpu_optimizer); host RAM counts fp32 Adam states",
                o.name()
            ));
        }
    }
    if setup.first_step {
        notes.push(
            "first-step view: optimizer states are created inside the first step(); later steps also hold them through forward/backward".into(),
        );
    }
    if setup.attention == AttentionImpl::Eager {
        notes.push(
            "eager attention keeps batch × heads × seq × seq softmax tensors per layer; sdpa/flash keeps none".into(),
        );
    }
    notes
}

/// The notes on how the model states split beyond plain DP: expert
/// parallelism (Megatron EP × ETP, DeepSpeed AutoEP), hybrid sharding and
/// ZeRO++ hpZ.
fn sharding_notes(setup: &TrainSetup, par: &Parallelism, dp: u64) -> Vec<String> {
    let mut notes = Vec::new();
    if par.ep > 1 && !setup.framework().megatron_mixed_precision {
        notes.push(autoep_note(par));
    } else if par.ep > 1 && par.expert_tp() > 1 || par.ep == 1 && par.expert_tp() != par.tp.max(1) {
        notes.push(format!(
            "expert parallel {} × expert-tensor parallel {}: each GPU holds 1/{} of the routed experts of every MoE layer, each split over {} ranks like a TP linear (Megatron --expert-model-parallel-size, --expert-tensor-parallel-size); the dispatched tokens are all-gathered over those {} ranks before the experts; the experts' master and optimizer states shard over {} expert-data-parallel ranks with --zero 1",
            par.ep.max(1),
            par.expert_tp(),
            par.ep.max(1),
            par.expert_tp(),
            par.expert_tp(),
            par.expert_dp()
        ));
    } else if par.ep > 1 {
        let edp = par.expert_dp();
        notes.push(format!(
            "expert parallel {}: each GPU holds 1/{} of the routed experts of every MoE layer, whole (Megatron --expert-model-parallel-size, expert-tensor-parallel 1); attention and the dense layers split by TP; the experts' master and optimizer states shard over {edp} expert-data-parallel ranks with --zero 1",
            par.ep, par.ep
        ));
    }
    if par.hybrid() {
        notes.push(format!(
            "hybrid sharding (HSDP): the {dp} data-parallel ranks form {} replicas of {} ranks; each replica shards the parameters, gradients and optimizer states over its {} ranks (÷ {}, not ÷ {dp}) and all-reduces its gradient shard with the other replicas (PyTorch FSDP HYBRID_SHARD, Zhao et al. 2023 §3.2.2; torchtitan data_parallel_shard_degree {} × data_parallel_replicate_degree {})",
            par.dp_replicate,
            par.shard_degree(),
            par.shard_degree(),
            par.shard_degree(),
            par.shard_degree(),
            par.dp_replicate
        ));
    }
    if par.hpz_on() {
        notes.push(format!(
            "ZeRO++ hpZ: besides the ZeRO-3 shard over all {dp} ranks, each GPU keeps a secondary partition of the parameters (as stored: 16-bit under mixed precision) over its group of {} ranks (one machine); backward and the later micro-batches' forwards all-gather from it inside the group, the first forward of each step across all ranks (DeepSpeed zero_hpz_partition_size {}; Wang et al. 2023, ZeRO++ §3.2)",
            par.hpz, par.hpz
        ));
    }
    notes
}
