//! Training memory per GPU (full fine-tune, LoRA, QLoRA): model states,
//! activations saved for backward, logits and loss, optimizer-step
//! temporaries, ZeRO/FSDP sharding, tensor/pipeline/sequence parallelism and
//! offload.
//!
//! # The peak
//! Two moments compete (both measured by `shared/calibration` group C):
//! * **start of backward**: weights (+ master, + optimizer states in steady
//!   state, + gradients when accumulating) + every saved activation + the
//!   saved log-softmax + the fp32 gradients of the logits
//!   (2 × batch × seq × vocab × 4 B); with checkpointing, later in backward
//!   one recomputed layer's saved set replaces the logits buffers;
//! * **optimizer step**: weights + master + gradients + states + the step's
//!   temporaries (AdamW `foreach`: one state-sized buffer; mixed precision:
//!   + the fp32 copy of the gradient partition, 4 B/param).
//!
//! # For the planner (fast path)
//! Build a [`TrainModel`] once per (model, precision, kind, optimizer,
//! attention, LoRA shape) and call [`TrainModel::evaluate`] per candidate:
//! it reads only `batch`, `seq`, `grad_accum`, `checkpointing` and
//! `first_step` from the setup it is given, does no allocation and returns
//! a [`TrainBreakdown`] whose `tensor_peak` is what
//! `torch.cuda.max_memory_allocated()` would show (add runtime + margin for
//! the card). [`TrainProfile::states`] alone gives the per-GPU model states
//! as a function of ZeRO stage / TP / PP / offload.

mod activations;
mod profile;
mod setup;

pub use activations::{act_profile, ActProfile, AMP_ROPE_EXTRA_PER_QW};
pub use profile::{ModelStates, TrainProfile, BNB_OPT_BLOCK};
pub use setup::{AttentionImpl, Checkpointing, LoraSetup, LoraTargets, Optimizer, Precision, TrainKind, TrainSetup};

use crate::error::CoreError;
use crate::explain::Explanation;
use crate::ledger::{Category, Ledger, Phase};
use crate::model::ModelSpec;
use crate::runtime::RuntimeSetup;
use crate::units::GIB;
use crate::workload::{Offload, Parallelism, Sharding};

/// Largest micro-batch accepted.
pub const MAX_BATCH: u64 = 1 << 20;
/// Longest sequence accepted.
pub const MAX_SEQ: u64 = 1 << 24;
/// Eager attention backward: fp32 gradients of softmax output and scores, bytes per
/// head × query × key element of one layer (calibrated on TinyLlama eager, group C).
pub const EAGER_BWD_BYTES: u64 = 8;
/// Most micro-batches accumulated.
pub const MAX_GRAD_ACCUM: u64 = 1 << 20;

/// A model prepared for training estimates.
#[derive(Debug, Clone)]
pub struct TrainModel {
    pub profile: TrainProfile,
    pub act: ActProfile,
    pub vocab: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub compute_bytes: u64,
}

/// Per-GPU bytes of a training step at its peak, by part.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrainBreakdown {
    pub states: ModelStates,
    /// saved activations of the decoder layers (worst stage, all in-flight micro-batches)
    pub act_layers: u64,
    /// saved activations outside the layers (final norm, embedding dropout)
    pub act_ends: u64,
    /// 16-bit weight casts autocast keeps for backward
    pub weight_copies: u64,
    /// the saved log-softmax (batch × seq × vocab)
    pub logits_saved: u64,
    /// gradients of log-softmax and logits at the start of backward
    pub logits_grad: u64,
    /// checkpointing: one layer recomputed in backward (its saved set, + its weight casts under autocast)
    pub recompute: u64,
    /// QLoRA: one base matrix dequantized to 16-bit at a time
    pub dequant: u64,
    /// eager attention: one layer's s × s gradients (+ the output head's gradient) in backward
    pub attention_backward: u64,
    /// micro-batches whose activations the worst stage holds (1F1B: pp on the first stage)
    pub in_flight: u64,
    pub backward_peak: u64,
    pub step_peak: u64,
    pub peak_phase: Phase,
    /// max(backward_peak, step_peak): what `max_memory_allocated()` would show
    pub tensor_peak: u64,
}

fn ck(what: &str, v: u128) -> Result<u64, CoreError> {
    u64::try_from(v).map_err(|_| CoreError::Overflow { what: what.to_string() })
}

/// Check sizes and the parallel layout.
pub fn validate(spec: &ModelSpec, setup: &TrainSetup, par: &Parallelism) -> Result<(), CoreError> {
    let check = crate::units::check_size;
    check("batch", setup.batch, MAX_BATCH)?;
    check("seq", setup.seq, MAX_SEQ)?;
    check("grad-accum", setup.grad_accum, MAX_GRAD_ACCUM)?;
    check("gpus", par.gpus, 1 << 20)?;
    check("tp", par.tp, 1 << 12)?;
    check("pp", par.pp, 1 << 12)?;
    if !(0.0..1.0).contains(&setup.lora.dropout) {
        return Err(CoreError::invalid(
            "lora-dropout",
            format!("{} is not a probability in [0, 1)", setup.lora.dropout),
        ));
    }
    let tp_pp = par.tp * par.pp;
    if !par.gpus.is_multiple_of(tp_pp) {
        return Err(CoreError::invalid(
            "gpus",
            format!("{} GPUs is not a multiple of tp {} × pp {} = {tp_pp}", par.gpus, par.tp, par.pp),
        ));
    }
    if !spec.num_heads.is_multiple_of(par.tp) {
        return Err(CoreError::invalid(
            "tp",
            format!("tensor-parallel degree {} does not divide the {} attention heads", par.tp, spec.num_heads),
        ));
    }
    if par.pp > spec.num_layers {
        return Err(CoreError::invalid("pp", format!("{} stages for {} layers", par.pp, spec.num_layers)));
    }
    if par.sequence_parallel && par.tp == 1 {
        return Err(CoreError::invalid("sp", "sequence parallelism needs tensor parallelism (--tp > 1)"));
    }
    if par.pp > 1 && !par.fsdp && par.sharding.stage() >= 2 {
        return Err(CoreError::invalid(
            "zero",
            format!(
                "--zero {} with --pp {}: DeepSpeed's pipeline engine does not support ZeRO-2/3 with pipeline parallelism (ZeRO-1 + PP is allowed)",
                par.sharding.stage(),
                par.pp
            ),
        ));
    }
    if par.offload_params != Offload::None && par.sharding != Sharding::Zero3 {
        return Err(CoreError::invalid("offload", "parameter offload needs ZeRO-3 / FSDP full-shard"));
    }
    if par.offload_optimizer != Offload::None && par.sharding == Sharding::None {
        return Err(CoreError::invalid("offload", "optimizer offload needs ZeRO (stage 1 or more)"));
    }
    Ok(())
}

impl TrainModel {
    pub fn new(spec: &ModelSpec, setup: &TrainSetup) -> Result<TrainModel, CoreError> {
        let profile = TrainProfile::new(spec, setup)?;
        let act = act_profile(spec, setup, &profile);
        Ok(TrainModel {
            profile,
            act,
            vocab: spec.vocab_size,
            heads: spec.num_heads,
            kv_heads: spec.num_kv_heads,
            compute_bytes: setup.precision.compute_dtype().bits() / 8,
        })
    }

    /// Per-GPU bytes for one candidate. Reads `batch`, `seq`, `grad_accum`,
    /// `checkpointing` and `first_step` from `setup`; allocation-free.
    pub fn evaluate(&self, setup: &TrainSetup, par: &Parallelism) -> Result<TrainBreakdown, CoreError> {
        if setup.batch > MAX_BATCH || setup.seq > MAX_SEQ || par.tp > 1 << 12 || par.pp > 1 << 12 {
            return Err(CoreError::invalid("batch/seq/tp/pp", "outside the sane range (see train::validate)"));
        }
        let prof = &self.profile;
        let ap = &self.act;
        let tp = par.tp.max(1);
        let pp = par.pp.max(1);
        let states = prof.states(par)?;
        let t = setup.batch as u128 * setup.seq as u128;
        let l_stage = prof.layers.div_ceil(pp) as u128;
        let in_flight = if pp > 1 { pp.min(setup.grad_accum) } else { 1 };
        let full_layer =
            activations::layer_bytes_per_token(ap, setup.seq, tp, par.sequence_parallel, setup.checkpointing);
        let kept = if setup.checkpointing == Checkpointing::Full {
            let i = ap.layer_input as u128;
            if par.sequence_parallel {
                i.div_ceil(tp as u128)
            } else {
                i
            }
        } else {
            full_layer
        };
        let layers_one = t * l_stage * kept;
        let ends = t * if par.sequence_parallel { (ap.ends as u128).div_ceil(tp as u128) } else { ap.ends as u128 };
        let v = self.vocab.div_ceil(tp) as u128;
        let logits_saved = t * v * ap.logits_saved as u128;
        let logits_grad = t * v * ap.logits_grad as u128;
        // autocast weight casts
        let ckpt_full = setup.checkpointing == Checkpointing::Full;
        let head_copy = if ap.weight_copy_bytes > 0 {
            let head = if prof.kind == TrainKind::Full || prof.base_dtype.bits() == 32 {
                prof.head_params.div_ceil(tp) as u128
            } else {
                0
            };
            head * ap.weight_copy_bytes as u128
        } else {
            0
        };
        let layer_copies = ap.weight_copy_bytes as u128 * prof.layer_cast_params_per_gpu(tp, pp) as u128;
        let copies = if ap.weight_copy_bytes == 0 {
            0
        } else if ckpt_full {
            head_copy
        } else {
            let all = ap.weight_copy_bytes as u128 * prof.cast_params_per_gpu(tp, pp) as u128;
            // tied heads reuse the embedding, which is not a linear group
            all + if prof.tied { head_copy } else { 0 }
        };
        let recompute = if ckpt_full { t * full_layer + layer_copies } else { 0 };
        // Eager attention: inside one layer's attention backward the fp32 gradients of the
        // softmax output and of the scores (2 × 4 B per head × query × key) are live, after the
        // logits buffers are freed and the output head's gradient exists (measured on
        // TinyLlama eager, group C: 8 B per element of Temp at the peak), while that layer's
        // 16-bit softmax cast is already freed. Selective recompute rebuilds the layer's
        // s × s tensors first.
        let attn_bwd = if ap.layer_per_key > 0 {
            let elems = t * setup.seq as u128 * self.heads.div_ceil(tp) as u128;
            // selective recompute rebuilds the layer's fp32 softmax (4 B per element) first
            // (measured: TinyLlama eager, attention core checkpointed: ≈ 10 B per element in all)
            let rebuilt = if setup.checkpointing == Checkpointing::Selective { elems * 4 } else { 0 };
            let head_grad = if prof.kind == TrainKind::Full {
                prof.head_params.div_ceil(tp) as u128 * prof.grad_bytes as u128
            } else {
                0
            };
            // the layer's 16-bit softmax cast is freed once `probs @ v` has been differentiated
            let cast = if self.compute_bytes != 4 { self.compute_bytes } else { 0 };
            elems * (EAGER_BWD_BYTES - cast) as u128 + rebuilt + head_grad
        } else {
            0
        };
        let dequant = if prof.base_quant.is_some() {
            2 * (prof.largest_base_matrix.div_ceil(tp) as u128) * self.compute_bytes as u128
        } else {
            0
        };
        // Worst pipeline stage: the first holds `in_flight` micro-batches, the last the logits.
        let (act_layers, act_ends, l_saved, l_grad) = if pp > 1 {
            let first = layers_one * in_flight as u128;
            let last = layers_one + ends + logits_saved + logits_grad;
            if first > last {
                (first, 0, 0, 0)
            } else {
                (layers_one, ends, logits_saved, logits_grad)
            }
        } else {
            (layers_one, ends, logits_saved, logits_grad)
        };
        let s = &states;
        let mut base = s.weights as u128 + s.master as u128 + s.gathered as u128 + dequant;
        if !setup.first_step {
            base += s.optimizer as u128;
        }
        if setup.grad_accum > 1 {
            base += s.gradients as u128;
        }
        let bwd = base + act_layers + act_ends + copies + (l_saved + l_grad).max(recompute).max(attn_bwd);
        let step = s.weights as u128
            + s.master as u128
            + s.gradients as u128
            + s.optimizer as u128
            + s.step_temporaries as u128;
        let (phase, peak) = if step > bwd { (Phase::OptimizerStep, step) } else { (Phase::Backward, bwd) };
        Ok(TrainBreakdown {
            states,
            act_layers: ck("activations", act_layers)?,
            act_ends: ck("activations", act_ends)?,
            weight_copies: ck("weight copies", copies)?,
            logits_saved: ck("logits", l_saved)?,
            logits_grad: ck("logits", l_grad)?,
            recompute: ck("recompute", recompute)?,
            dequant: ck("dequant", dequant)?,
            attention_backward: ck("attention backward", attn_bwd)?,
            in_flight,
            backward_peak: ck("backward peak", bwd)?,
            step_peak: ck("optimizer step peak", step)?,
            peak_phase: phase,
            tensor_peak: ck("tensor peak", peak)?,
        })
    }
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

/// The training ledger for one GPU (the worst rank).
pub fn estimate_training(
    spec: &ModelSpec,
    setup: &TrainSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
) -> Result<Ledger, CoreError> {
    validate(spec, setup, par)?;
    let model = TrainModel::new(spec, setup)?;
    let b = model.evaluate(setup, par)?;
    let prof = &model.profile;
    let s = &b.states;
    let p = setup.precision;
    let dp = par.dp();
    let mut ledger = Ledger::new(b.peak_phase, par.gpus);
    ledger.params_total = prof.params_total;
    ledger.params_active = prof.params_active;
    ledger.params_trainable = prof.params_trainable;
    let at_step = b.peak_phase == Phase::OptimizerStep;
    let shard_note = |what: &str, stage: u8| -> String {
        if dp > 1 && par.sharding.stage() >= stage {
            format!("÷ DP {dp} ({}: {what} sharded)", TrainProfile::sharding_name(par))
        } else {
            "not sharded over data-parallel ranks".to_string()
        }
    };
    let split = format!("per GPU after TP {} × PP {} (worst stage)", par.tp, par.pp);

    // Weights.
    let base_w = s.weights - s.adapters;
    let base_label = match (&prof.base_quant, prof.kind) {
        (Some(q), _) => format!("frozen base weights ({} linears, 16-bit rest)", q.label),
        (None, TrainKind::Full) => format!("weights ({})", prof.base_dtype),
        (None, _) => format!("frozen base weights ({})", prof.base_dtype),
    };
    ledger.push(
        Category::Weights,
        base_label,
        base_w,
        Explanation::new(if prof.base_quant.is_some() {
            "quantized decoder linears (packed 4-bit + absmax [+ double-quant scales]) + 16-bit embeddings/head/norms"
                .to_string()
        } else {
            format!("params × {} B", prof.base_dtype.bits() / 8)
        })
        .term("params_total", prof.params_total)
        .term("layout", &split)
        .term("sharding", shard_note("parameters", 3)),
    );
    if prof.kind != TrainKind::Full {
        ledger.push(
            Category::Weights,
            format!("LoRA adapters (r={}, {} B/param)", setup.lora.rank, prof.adapter_bytes),
            s.adapters,
            Explanation::new("Σ over adapted linears of r × (d_in + d_out) × copies × bytes")
                .term("rank", setup.lora.rank)
                .term("targets", prof.lora_modules.join(","))
                .term("trainable params", prof.params_trainable)
                .note("PEFT autocast_adapter_dtype=True keeps adapters in fp32"),
        );
    }
    // Master, gradients, optimizer states.
    if p.has_master() {
        ledger.push(
            Category::MasterWeights,
            "fp32 master weights",
            s.master,
            with_note(
                Explanation::new("trainable params × 4 B")
                    .term("trainable per GPU", s.trainable_per_gpu)
                    .term("sharding", shard_note("master weights", 1)),
                if par.offload_optimizer != Offload::None { "offloaded: 0 on the GPU" } else { "" },
            ),
        );
    }
    let grads_live = at_step || setup.grad_accum > 1;
    ledger.push(
        Category::Gradients,
        format!("gradients ({} B/param){}", prof.grad_bytes, if grads_live { "" } else { " — none yet at this peak" }),
        if grads_live { s.gradients } else { 0 },
        Explanation::new("trainable params × grad bytes")
            .term("trainable per GPU", s.trainable_per_gpu)
            .term("grad bytes", prof.grad_bytes)
            .term("full gradient buffer", s.gradients)
            .term("sharding", shard_note("gradients", 2))
            .note("at the start of backward (grad_accum 1, zero_grad(set_to_none)) no gradient exists yet; with accumulation they persist"),
    );
    let states_live = at_step || !setup.first_step;
    let opt_formula = match setup.optimizer {
        Optimizer::AdamW => format!("trainable × 2 states × {} B (exp_avg, exp_avg_sq)", p.state_dtype().bits() / 8),
        Optimizer::AdamW8bit | Optimizer::PagedAdamW8bit => {
            "trainable × 2 × (1 B + 4 B absmax / 256) (bitsandbytes blockwise 8-bit)".to_string()
        }
        Optimizer::Sgd => "none: plain SGD keeps no state".to_string(),
        Optimizer::SgdMomentum => format!("trainable × {} B momentum buffer", p.state_dtype().bits() / 8),
        Optimizer::Lion => format!("trainable × {} B (exp_avg)", p.state_dtype().bits() / 8),
        Optimizer::Adafactor => "Σ matrices (rows + cols) × 4 B + vectors × 4 B (factored second moment)".to_string(),
    };
    ledger.push(
        Category::OptimizerStates,
        format!("{} states{}", setup.optimizer.name(), if states_live { "" } else { " — created at the first step()" }),
        if states_live { s.optimizer } else { 0 },
        with_note(
            Explanation::new(opt_formula)
                .term("trainable per GPU", s.trainable_per_gpu)
                .term("states", s.optimizer)
                .term("sharding", shard_note("optimizer states", 1)),
            if setup.optimizer == Optimizer::PagedAdamW8bit {
                "paged: CUDA unified memory, evicted to host RAM under pressure (counted as resident)"
            } else if par.offload_optimizer != Offload::None {
                "offloaded: held in host RAM / NVMe, 0 on the GPU"
            } else {
                ""
            },
        ),
    );

    // Phase-dependent parts.
    let tokens = setup.batch * setup.seq;
    if at_step {
        ledger.push(
            Category::Temporaries,
            "optimizer-step temporaries",
            s.step_temporaries - s.fp32_grad_copy,
            Explanation::new(match setup.optimizer {
                Optimizer::AdamW if setup.foreach => {
                    "foreach AdamW: torch._foreach_sqrt(exp_avg_sq) = trainable × state bytes"
                }
                Optimizer::AdamW => "per-parameter AdamW: largest tensor × state bytes",
                Optimizer::Adafactor | Optimizer::Lion => "per-parameter update buffers of the largest tensor",
                _ => "fused in-place update",
            })
            .term("bytes", s.step_temporaries - s.fp32_grad_copy)
            .note("activations are freed by now; the peak of a small-seq full fine-tune sits here"),
        );
        if p.has_master() {
            ledger.push(
                Category::Temporaries,
                "fp32 gradient copy for the master step (mixed precision)",
                s.fp32_grad_copy,
                Explanation::new("trainable params × 4 B")
                    .term("trainable per GPU", s.trainable_per_gpu)
                    .term("sharding", shard_note("the fp32 gradient partition", 1))
                    .note(if par.offload_optimizer != Offload::None {
                        "offloaded: the fp32 gradient partition lives in pinned host memory, 0 on the GPU"
                    } else {
                        "mixed precision adds a 4 B/param fp32 gradient copy at the step: DeepSpeed up-casts the 16-bit gradient partition and attaches it to the fp32 master partition before optimizer.step(), on top of the optimizer's own temporaries"
                    }),
            );
        }
    } else {
        let act_note = format!(
            "checkpointing {}; attention {}; {} in flight",
            setup.checkpointing.name(),
            setup.attention.name(),
            b.in_flight
        );
        let per_layer_formula = match setup.checkpointing {
            Checkpointing::Full => "layers/stage × tokens × layer input (hidden × stream bytes)".to_string(),
            _ => "layers/stage × tokens × (norms + q/k/v + attention out + MLP intermediates [+ heads × seq × softmax bytes for eager])".to_string(),
        };
        ledger.push(
            Category::Activations,
            "saved activations, decoder layers",
            b.act_layers,
            Explanation::new(per_layer_formula)
                .term("tokens", tokens)
                .term("layers per stage", prof.layers.div_ceil(par.pp))
                .term("per token per layer (replicated)", model.act.layer_rep)
                .term("per token per layer (split by TP)", model.act.layer_split)
                .term("per token per layer k,v (split by TP over kv heads)", model.act.layer_kv)
                .term("per token per layer per key", model.act.layer_per_key)
                .term("layer input kept under checkpointing", model.act.layer_input)
                .term("in-flight micro-batches", b.in_flight)
                .note(act_note),
        );
        ledger.push(
            Category::Activations,
            "saved activations, final norm + embeddings",
            b.act_ends,
            Explanation::new("tokens × final-norm saved bytes (+ embedding dropout mask)")
                .term("tokens", tokens)
                .term("per token", model.act.ends),
        );
        if b.weight_copies > 0 {
            ledger.push(
                Category::Activations,
                "16-bit weight casts kept by autocast",
                b.weight_copies,
                Explanation::new("linear params per GPU × 2 B (the cast weights each matmul saves for backward)").note(
                    if setup.checkpointing == Checkpointing::Full {
                        "with checkpointing only the output head's cast survives the forward"
                    } else {
                        "autocast caches one 16-bit copy of every fp32 weight during forward"
                    },
                ),
            );
        }
        let logit_bufs = b.logits_saved + b.logits_grad;
        let logits_here = logit_bufs >= b.recompute && logit_bufs >= b.attention_backward;
        ledger.push(
            Category::Logits,
            "log-softmax of the logits, saved for the loss",
            if logits_here { b.logits_saved } else { 0 },
            Explanation::new("batch × seq × vocab (per TP rank) × bytes")
                .term("tokens", tokens)
                .term("vocab per TP rank", model.vocab.div_ceil(par.tp))
                .term("bytes", model.act.logits_saved)
                .note("transformers upcasts logits to fp32 inside the loss; freed once the loss backward ran"),
        );
        ledger.push(
            Category::Logits,
            "gradients of log-softmax and logits (start of backward)",
            if logits_here { b.logits_grad } else { 0 },
            Explanation::new("2 × batch × seq × vocab × bytes")
                .term("tokens", tokens)
                .term("bytes", model.act.logits_saved),
        );
        if !logits_here && b.recompute >= b.attention_backward {
            ledger.push(
                Category::Temporaries,
                "checkpointing: one layer recomputed in backward",
                b.recompute,
                Explanation::new("tokens × one layer's full saved set (+ its weight casts under autocast)")
                    .term("tokens", tokens)
                    .note("later in backward than the logits buffers, which are freed by then"),
            );
        } else if !logits_here {
            ledger.push(
                Category::Temporaries,
                "eager attention backward: one layer's softmax and score gradients",
                b.attention_backward,
                Explanation::new(format!(
                    "batch × heads × seq × seq × {EAGER_BWD_BYTES} B (fp32 grads of softmax and scores) [+ output-head gradient]"
                ))
                .term("tokens", tokens)
                .term("heads per TP rank", model.heads.div_ceil(par.tp))
                .note("the peak of a long-sequence eager run sits inside attention backward, after the logits buffers are freed"),
            );
        }
        if b.dequant > 0 {
            ledger.push(
                Category::Temporaries,
                "QLoRA: one base matrix dequantized to 16-bit",
                b.dequant,
                Explanation::new("2 × largest linear (d_in × d_out) × compute bytes (forward and backward dequantize)")
                    .term("largest matrix elements", prof.largest_base_matrix),
            );
        }
        if s.gathered > 0 {
            ledger.push(
                Category::Temporaries,
                "ZeRO-3 / FSDP gathered parameters (running + prefetched layer)",
                s.gathered,
                Explanation::new("2 × layer params ÷ TP × weight bytes").term("layer params", prof.layer_params),
            );
        }
    }
    let tensors = ledger.checked_total()?;
    if tensors != b.tensor_peak {
        return Err(CoreError::Unsupported(format!(
            "internal: ledger tensors {tensors} B differ from the computed peak {} B",
            b.tensor_peak
        )));
    }
    rt.apply(&mut ledger)?;

    // Notes.
    if dp > 1 && par.sharding == Sharding::None {
        ledger.notes.push(format!(
            "data parallelism alone ({dp} replicas) saves no memory per GPU: every GPU holds the full model states; use --zero 1|2|3 / --fsdp to shard them (PyTorch DDP also keeps gradient buckets, ≈ one more gradient copy unless gradient_as_bucket_view=True)"
        ));
    }
    if dp == 1 && par.sharding != Sharding::None {
        ledger.notes.push(format!(
            "{} with one data-parallel rank shards nothing: give --gpus (the DP degree is gpus ÷ (tp × pp))",
            TrainProfile::sharding_name(par)
        ));
    }
    if par.gpus > 1 {
        ledger.notes.push(format!(
            "{} GPUs = TP {} × PP {} × DP {dp}; figures are per GPU (the worst rank)",
            par.gpus, par.tp, par.pp
        ));
    }
    if setup.checkpointing == Checkpointing::Full {
        ledger.notes.push(
            "full activation checkpointing keeps only each layer's input and recomputes the layer in backward: ≈ one extra forward (~33% more compute)".into(),
        );
    }
    if setup.checkpointing == Checkpointing::Selective {
        ledger.notes.push(if setup.attention == AttentionImpl::Eager {
            "selective recompute drops the seq × seq attention tensors and recomputes the attention core (a few % more compute)".into()
        } else {
            "selective recompute only drops the seq × seq attention tensors, which SDPA/flash never keeps: no saving here".into()
        });
    }
    if par.pp > 1 {
        ledger.notes.push(format!(
            "1F1B pipeline: the first stage holds {} micro-batches of activations in flight (min(pp, grad_accum))",
            b.in_flight
        ));
    }
    if setup.grad_accum > 1 {
        ledger.notes.push(format!(
            "gradient accumulation over {} micro-batches: memory of one micro-batch, gradients persist between them",
            setup.grad_accum
        ));
    }
    if s.cpu_bytes > 0 || s.nvme_bytes > 0 {
        ledger.cpu_bytes = s.cpu_bytes.saturating_mul(par.gpus);
        ledger.nvme_bytes = s.nvme_bytes.saturating_mul(par.gpus);
        ledger.notes.push(format!(
            "offload: host RAM {} and NVMe {} for all {} ranks ({} / {} per rank)",
            gib(ledger.cpu_bytes),
            gib(ledger.nvme_bytes),
            par.gpus,
            gib(s.cpu_bytes),
            gib(s.nvme_bytes)
        ));
    }
    if setup.first_step {
        ledger.notes.push(
            "first-step view: optimizer states are created inside the first step(); later steps also hold them through forward/backward".into(),
        );
    }
    if setup.attention == AttentionImpl::Eager {
        ledger.notes.push(
            "eager attention keeps batch × heads × seq × seq softmax tensors per layer; sdpa/flash keeps none".into(),
        );
    }
    Ok(ledger)
}
