//! The peak of one training step per GPU, computed once.
//!
//! [`TrainModel::evaluate`] works out every part (model states, saved
//! activations, logits buffers, recompute, eager attention backward, QLoRA
//! dequantization), then lays out the two competing moments — start of
//! backward and the optimizer step — as [`PeakLines`]: one field per ledger
//! line, 0 where a part is not live at that moment. The peak is the larger
//! sum; the ledger (`super::ledger`) prints exactly the lines of the winning
//! moment, so its tensor total is the peak by construction.

use super::activations::{
    act_profile, expert_gather_bytes_per_token, layer_bytes_per_token, loss_forward_bytes, loss_grad_rows, ActProfile,
};
use super::profile::{ModelStates, TrainProfile};
use crate::error::CoreError;
use crate::ledger::Phase;
use crate::model::ModelSpec;
use crate::units::{add, div_ceil, mul, part_of, product, sum};
use crate::workload::{Checkpointing, Parallelism, SelectivePolicy, TrainKind, TrainSetup};

/// Eager attention backward: fp32 gradients of softmax output and scores, bytes per
/// head × query × key element of one layer (calibrated on TinyLlama eager, group C).
pub const EAGER_BWD_BYTES: u64 = 8;

/// A model prepared for training estimates.
#[derive(Debug, Clone)]
pub struct TrainModel {
    pub profile: TrainProfile,
    pub act: ActProfile,
    pub vocab: u64,
    pub hidden: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub compute_bytes: u64,
}

/// Bytes live at one moment of the step on one GPU, one field per ledger
/// line (0: not live at that moment). [`PeakLines::total`] is the tensor
/// total of that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PeakLines {
    /// base (frozen or trainable) weights, adapters and fp32 casts excluded
    pub base_weights: u64,
    /// PEFT `prepare_model_for_kbit_training`: what casting the non-quantized parameters to fp32 added
    pub fp32_casts: u64,
    /// DDP / DeepSpeed buckets, FSDP reduce-scatter buffers
    pub comm_buffers: u64,
    pub adapters: u64,
    pub master: u64,
    pub gradients: u64,
    pub optimizer: u64,
    /// the optimizer's own temporaries at `step()` (without the fp32 gradient copy)
    pub step_temporaries: u64,
    /// mixed precision: the fp32 copy of the gradient partition at `step()`
    pub fp32_grad_copy: u64,
    pub act_layers: u64,
    pub act_ends: u64,
    pub weight_copies: u64,
    pub logits_saved: u64,
    pub logits_grad: u64,
    /// transformers ≤ 4.48's loss at the end of forward: the compute-dtype logits, their
    /// fp32 upcast and its shifted copy beside the log-softmax (`LossPath::Fp32ShiftCopy`)
    pub loss_forward: u64,
    pub recompute: u64,
    pub attention_backward: u64,
    pub dequant: u64,
    pub gathered: u64,
    /// FSDP1: the root unit (embeddings, head, final norm) left unsharded from forward
    /// to backward, less the shard already counted in the weights
    pub root_unsharded: u64,
    /// FSDP1: the root's flat gradient built at the end of backward (its views'
    /// gradients still live); competes with the other backward transients
    pub root_flat_grad: u64,
    /// FSDP1 frozen units under reentrant checkpointing: the inputs of the layers already
    /// through backward and their gradients, kept to its end (only their gradients here:
    /// the inputs are in `act_layers`); live with the recomputed layer
    pub kept_input_grads: u64,
    /// FP8 training under TransformerEngine: the FP8 copies of the decoder linears'
    /// weights (and their transposes) kept across micro-batches; persistent
    pub fp8_weights: u64,
    /// DeepSpeed ZeRO++ hpZ: the secondary parameter partition over the hpZ group;
    /// persistent ([`crate::train::ModelStates::hpz_secondary`])
    pub hpz_secondary: u64,
}

impl PeakLines {
    /// Live tensor bytes at this moment.
    pub fn total(&self) -> Result<u64, CoreError> {
        sum(
            "tensor peak",
            &[
                self.base_weights,
                self.fp32_casts,
                self.comm_buffers,
                self.adapters,
                self.master,
                self.gradients,
                self.optimizer,
                self.step_temporaries,
                self.fp32_grad_copy,
                self.act_layers,
                self.act_ends,
                self.weight_copies,
                self.logits_saved,
                self.logits_grad,
                self.loss_forward,
                self.recompute,
                self.attention_backward,
                self.dequant,
                self.gathered,
                self.root_unsharded,
                self.root_flat_grad,
                self.kept_input_grads,
                self.fp8_weights,
                self.hpz_secondary,
            ],
        )
    }
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
    /// what the loss holds beside the log-softmax at the end of forward (0 unless that
    /// moment can beat the start of backward: `LossPath::Fp32ShiftCopy`)
    pub loss_forward: u64,
    /// checkpointing: one layer recomputed in backward (its saved set, + its weight casts under autocast)
    pub recompute: u64,
    /// QLoRA: one base matrix dequantized to 16-bit at a time
    pub dequant: u64,
    /// eager attention: one layer's s × s gradients (+ the output head's gradient) in backward
    pub attention_backward: u64,
    /// micro-batches whose activations the worst stage holds (1F1B: pp on the first stage)
    pub in_flight: u64,
    /// the larger of the end of forward (the loss) and the start of backward
    pub backward_peak: u64,
    pub step_peak: u64,
    pub peak_phase: Phase,
    /// the ledger lines of the peak moment; they sum to `tensor_peak + outside_allocator`
    pub at_peak: PeakLines,
    /// communication buffers allocated once for the whole run (DDP / DeepSpeed buckets)
    pub comm_resident: u64,
    /// of `at_peak`: bytes outside the PyTorch allocator (bitsandbytes paged optimizer
    /// states in CUDA managed memory): on the card, not in `max_memory_allocated()`
    pub outside_allocator: u64,
    /// max(backward_peak, step_peak) less what lives outside the allocator: what
    /// `max_memory_allocated()` would show
    pub tensor_peak: u64,
}

/// Communication buffers of one rank.
#[derive(Debug, Clone, Copy, Default)]
struct CommBuffers {
    /// allocated once and kept (DDP buckets, DeepSpeed reduce buckets)
    resident: u64,
    /// live in backward only (FSDP reduce-scatter input)
    backward: u64,
    /// FSDP `no_sync` accumulation: unsharded gradients of every parameter
    unsharded_grads: u64,
    /// FSDP1: the root unit's flat gradient, concatenated at the end of backward
    root_flat_grad: u64,
}

/// Saved activations and logits buffers of the worst pipeline stage.
struct Saved {
    act_layers: u64,
    act_ends: u64,
    logits_saved: u64,
    logits_grad: u64,
    loss_forward: u64,
    in_flight: u64,
    /// one layer's full saved set per token (what checkpointing recomputes)
    full_layer: u64,
}

impl TrainModel {
    pub fn new(spec: &ModelSpec, setup: &TrainSetup) -> Result<TrainModel, CoreError> {
        let built = spec.as_built_by(setup.engine);
        let spec = built.as_ref();
        let profile = TrainProfile::new(spec, setup)?;
        let act = act_profile(spec, setup, &profile)?;
        Ok(TrainModel {
            profile,
            act,
            vocab: spec.vocab_size,
            hidden: spec.hidden_size,
            heads: spec.num_heads,
            kv_heads: spec.num_kv_heads,
            compute_bytes: setup.precision.compute_dtype().bytes()?,
        })
    }

    /// Per-GPU bytes for one candidate. Reads `batch`, `seq`, `grad_accum`,
    /// `checkpointing` and `first_step` from `setup`; allocation-free. The
    /// setup is assumed valid ([`crate::workload::validate`]); any size
    /// still gives a number or an overflow error, never a wrapped value.
    pub fn evaluate(&self, setup: &TrainSetup, par: &Parallelism) -> Result<TrainBreakdown, CoreError> {
        let prof = &self.profile;
        let s = prof.states(par)?;
        let saved = self.saved(setup, par)?;
        let (weight_copies, recompute) = self.casts_and_recompute(setup, par, saved.full_layer)?;
        // eager attention is refused with CP, so at most one of the two is not 0
        let attention_backward = self.attention_backward(setup, par)?.max(self.ring_attention(setup, par)?);
        let dequant = self.dequant(par)?;
        let comm = self.comm(setup, par, &s)?;
        let root_unsharded = self.root_unsharded(setup, par)?;
        let kept_grads = self.kept_input_grads(setup, par)?;
        let base_weights = part_of("base weights", part_of("base weights", s.weights, s.adapters)?, s.fp32_casts)?;
        let resident = PeakLines {
            base_weights,
            fp32_casts: s.fp32_casts,
            adapters: s.adapters,
            master: s.master,
            comm_buffers: comm.resident,
            fp8_weights: self.fp8_weights(setup, par)?,
            hpz_secondary: s.hpz_secondary,
            ..PeakLines::default()
        };
        let step = if setup.optimizer_in_backward {
            // the optimizer steps each parameter inside backward: no separate moment
            PeakLines { optimizer: s.optimizer, ..resident }
        } else {
            PeakLines {
                gradients: s.gradients,
                optimizer: s.optimizer,
                step_temporaries: part_of("optimizer temporaries", s.step_temporaries, s.fp32_grad_copy)?,
                fp32_grad_copy: s.fp32_grad_copy,
                ..resident
            }
        };
        let on_top = BackwardOnTop::of(&saved, recompute, kept_grads, attention_backward, comm.root_flat_grad)?;
        let gradients = self.backward_gradients(setup, &s, &comm)?;
        let backward = PeakLines {
            gradients,
            // optimizer states exist from the first step() on
            optimizer: if setup.first_step && !setup.optimizer_in_backward { 0 } else { s.optimizer },
            act_layers: saved.act_layers,
            act_ends: saved.act_ends,
            weight_copies,
            logits_saved: on_top.logits_saved,
            logits_grad: on_top.logits_grad,
            recompute: on_top.recompute,
            attention_backward: on_top.attention_backward,
            dequant,
            gathered: s.gathered,
            root_unsharded,
            root_flat_grad: on_top.root_flat_grad,
            kept_input_grads: on_top.kept_input_grads,
            comm_buffers: add("communication buffers", comm.resident, comm.backward)?,
            ..resident
        };
        // The end of forward, inside the loss: every saved activation and the log-softmax are
        // live, no logits gradient yet; the decoder layers are resharded after their forward
        // (the root stays unsharded under FSDP1), no reduce-scatter has started and no layer
        // is recomputed or dequantized. Only a loss path whose forward holds more than its
        // backward start makes this the peak (`saved.loss_forward` is 0 otherwise).
        let forward = PeakLines {
            gradients,
            optimizer: backward.optimizer,
            act_layers: saved.act_layers,
            act_ends: saved.act_ends,
            weight_copies,
            logits_saved: saved.logits_saved,
            loss_forward: saved.loss_forward,
            root_unsharded,
            ..resident
        };
        let backward_total = backward.total()?;
        let forward_total = if saved.loss_forward > 0 { forward.total()? } else { 0 };
        let backward_peak = backward_total.max(forward_total);
        let step_peak = step.total()?;
        let (peak_phase, at_peak, device_peak) = if step_peak > backward_peak {
            (Phase::OptimizerStep, step, step_peak)
        } else if forward_total > backward_total {
            (Phase::Forward, forward, forward_total)
        } else {
            (Phase::Backward, backward, backward_total)
        };
        // bitsandbytes paged optimizers keep their states in CUDA managed memory
        let outside_allocator = if setup.optimizer.is_paged() { at_peak.optimizer } else { 0 };
        Ok(TrainBreakdown {
            states: s,
            act_layers: saved.act_layers,
            act_ends: saved.act_ends,
            weight_copies,
            logits_saved: saved.logits_saved,
            logits_grad: saved.logits_grad,
            loss_forward: saved.loss_forward,
            recompute,
            dequant,
            attention_backward,
            in_flight: saved.in_flight,
            backward_peak,
            step_peak,
            peak_phase,
            at_peak,
            outside_allocator,
            comm_resident: comm.resident,
            tensor_peak: part_of("tensor peak", device_peak, outside_allocator)?,
        })
    }

    /// Gradient bytes live in backward: one parameter's under an optimizer in
    /// backward, every gradient when they persist between micro-batches
    /// (accumulation, or FSDP's unsharded `no_sync` gradients), else none yet.
    fn backward_gradients(&self, setup: &TrainSetup, s: &ModelStates, comm: &CommBuffers) -> Result<u64, CoreError> {
        let prof = &self.profile;
        Ok(if setup.optimizer_in_backward {
            // one parameter's gradient at a time, freed by its own step
            mul("gradients", prof.largest_trainable, prof.grad_bytes)?
        } else if comm.unsharded_grads > 0 {
            comm.unsharded_grads
        } else if setup.grad_accum > 1 || setup.framework().megatron_mixed_precision {
            // Megatron's grad buffer (`_ParamAndGradBuffer`,
            // megatron/core/distributed/param_and_grad_buffer.py) is allocated when the
            // model is wrapped in its DDP and lives for the whole run: backward
            // accumulates into `param.main_grad`, a view of it
            // gradients persist between accumulated micro-batches
            s.gradients
        } else {
            0
        })
    }

    /// Communication buffers of the data-parallel engine on this rank, and whether
    /// gradients outlive the step.
    fn comm(&self, setup: &TrainSetup, par: &Parallelism, s: &ModelStates) -> Result<CommBuffers, CoreError> {
        use crate::workload::Sharding;
        let prof = &self.profile;
        let framework = setup.framework();
        // gradients are reduced over DP × CP ([`Parallelism::shard_dp`])
        let dp = par.shard_dp();
        let mut c = CommBuffers::default();
        if dp < 2 || s.trainable_per_gpu == 0 {
            return Ok(c);
        }
        let grad_bytes = prof.grad_bytes;
        if framework.megatron_mixed_precision {
            // Megatron's DDP buckets are views of its grad buffer (`_ParamAndGradBucket`,
            // param_and_grad_buffer.py): no second copy of the gradients; the
            // distributed optimizer reduce-scatters in place
            return Ok(c);
        }
        match par.sharding {
            Sharding::None => {
                // PyTorch DDP's gradient buckets
                c.resident = super::comm::ddp_bucket_bytes(&setup.comm, s.trainable_per_gpu, grad_bytes)?;
            }
            _ if !framework.shards_with_fsdp(par.fsdp) => {
                c.resident = super::comm::deepspeed_bucket_bytes(&setup.comm, self.compute_bytes)?;
            }
            sharding => {
                // FSDP reduce-scatters each wrapped unit's unsharded gradient in backward; the
                // largest unit (a layer, or the root's embeddings and head) bounds the buffer
                let unit = prof.largest_unit_trainable(par.tp)?;
                c.backward = mul("FSDP reduce-scatter buffer", unit, grad_bytes)?;
                if framework.fsdp_root_unsharded_in_backward {
                    // FSDP1 flattens each unit into one FlatParameter whose parameters are views
                    // of it: autograd builds the unit's flat gradient by concatenating the views'
                    // gradients (the backward of the split into views), so while the root's is
                    // built at the end of backward (the embedding's gradient comes last) the head's
                    // and embedding's gradients are live too, counted by `backward` above
                    c.root_flat_grad = mul("FSDP root flat gradient", prof.root_trainable(par.tp)?, grad_bytes)?;
                }
                if framework.fsdp_accumulates_unsharded && sharding.stage() >= 2 && setup.grad_accum > 1 {
                    // FSDP under accelerate's or Fabric's gradient accumulation (`no_sync`)
                    // keeps every gradient unsharded between micro-batches
                    c.unsharded_grads = mul("FSDP unsharded gradients", s.trainable_per_gpu, grad_bytes)?;
                }
            }
        }
        Ok(c)
    }

    /// FSDP1 keeps the root unit's parameters unsharded after forward under full
    /// sharding ([`crate::workload::FrameworkFacts::fsdp_root_unsharded_in_backward`]): the
    /// whole root. FSDP1 all-gathers a unit into its own padded buffer
    /// (`FlatParamHandle._alloc_padded_unsharded_flat_param`, the
    /// `_full_param_padded` storage, `torch/distributed/fsdp/_flat_param.py`) while the
    /// rank's shard stays allocated as `_local_shard` for the reshard to switch back
    /// to, so an unsharded unit costs its full size on top of the shard the weights
    /// line holds.
    fn root_unsharded(&self, setup: &TrainSetup, par: &Parallelism) -> Result<u64, CoreError> {
        let dp = par.shard_dp();
        if dp < 2 || par.sharding.stage() < 3 || !setup.framework().fsdp_root_unsharded_in_backward {
            return Ok(0);
        }
        self.profile.root_base_bytes(par.tp)
    }

    /// FSDP1 frozen units under the HF Trainer's reentrant checkpointing
    /// ([`crate::workload::FrameworkFacts::fsdp_frozen_units_keep_checkpoint_grads`]): while the
    /// first layer is recomputed at the end of backward, the inputs of all the others are
    /// still alive (`act_layers` counts them) and so are their gradients, one
    /// layer-input-sized tensor each: (layers on the stage − 1) × tokens × layer input.
    /// LoRA and QLoRA only (their decoder-layer units hold no trainable parameter);
    /// under full checkpointing; sharded FSDP on ≥ 2 ranks.
    fn kept_input_grads(&self, setup: &TrainSetup, par: &Parallelism) -> Result<u64, CoreError> {
        let frozen_units = matches!(setup.kind, TrainKind::Lora | TrainKind::Qlora);
        if par.shard_dp() < 2
            || par.sharding.stage() < 2
            || setup.checkpointing != Checkpointing::Full
            || !frozen_units
            || !setup.framework().fsdp_frozen_units_keep_checkpoint_grads
        {
            return Ok(0);
        }
        let layers = self.profile.layers.div_ceil(par.pp.max(1));
        let input =
            if par.sequence_parallel { div_ceil(self.act.layer_input, par.tp.max(1)) } else { self.act.layer_input };
        product("kept input gradients", &[setup.batch, local_seq(setup, par), layers.saturating_sub(1), input])
    }

    /// Bytes per vocabulary entry of the loss gradient rows at the start of backward:
    /// the loss path's, + one fp32 buffer under torchtitan's vocabulary-parallel loss
    /// ([`crate::workload::FrameworkFacts::loss_parallel_under_tp`]).
    pub fn logits_grad_bytes(&self, setup: &TrainSetup, par: &Parallelism) -> u64 {
        let loss_parallel =
            par.tp > 1 && setup.framework().loss_parallel_under_tp && self.act.loss == crate::workload::LossPath::Fp32;
        self.act.logits_grad + if loss_parallel { 4 } else { 0 }
    }

    /// Activations and logits buffers saved for backward on the worst stage:
    /// the first stage holds `in_flight` micro-batches (1F1B), the last the logits.
    fn saved(&self, setup: &TrainSetup, par: &Parallelism) -> Result<Saved, CoreError> {
        let ap = &self.act;
        let tp = par.tp.max(1);
        let pp = par.pp.max(1);
        let sp = par.sequence_parallel;
        // context parallelism: each rank holds seq / cp tokens of every sequence
        let seq = local_seq(setup, par);
        let tokens = mul("tokens", setup.batch, seq)?;
        let in_flight = in_flight_micro_batches(pp, par.virtual_stages, setup.grad_accum);
        // DeepSpeed AutoEP's dispatched rows and fp32 combine copy (TP 1: not split)
        let autoep = if par.ep > 1 { ap.autoep_dispatched } else { 0 };
        let full_layer = add(
            "activations per token",
            add(
                "activations per token",
                layer_bytes_per_token(ap, seq, tp, sp, setup.checkpointing)?,
                expert_gather_bytes_per_token(ap, tp, par.expert_tp())?,
            )?,
            autoep,
        )?;
        let input = if sp { div_ceil(ap.layer_input, tp) } else { ap.layer_input };
        let kept = match setup.checkpointing {
            Checkpointing::Full => input,
            Checkpointing::Selective if setup.selective == SelectivePolicy::Ops => {
                add("activations", input, div_ceil(ap.layer_ops, tp))?
            }
            _ => full_layer,
        };
        let stage_layers = self.profile.layers.div_ceil(pp);
        // activation offloading (torchtune `OffloadActivations`) moves every saved tensor to
        // host memory in forward and brings it back in backward: about two layers' worth
        // (the one in use and the one being copied) stay on the GPU
        let kept_layers = if setup.activation_offload { stage_layers.min(2) } else { stage_layers };
        let layers_one = product("activations", &[tokens, kept_layers, kept])?;
        let ends = mul("activations", tokens, if sp { div_ceil(ap.ends, tp) } else { ap.ends })?;
        let vocab = div_ceil(self.vocab, tp);
        let logits_saved = add(
            "logits",
            product("logits", &[tokens, vocab, ap.logits_saved])?,
            mul("logits", tokens, ap.loss_saved_per_token)?,
        )?;
        let rows = loss_grad_rows(ap.loss, tokens, self.hidden, self.vocab);
        let logits_grad = product("logits", &[rows, vocab, self.logits_grad_bytes(setup, par)])?;
        let loss_forward = product("logits", &[tokens, vocab, loss_forward_bytes(ap.loss, self.compute_bytes)])?;
        let all = Saved {
            act_layers: layers_one,
            act_ends: ends,
            logits_saved,
            logits_grad,
            loss_forward,
            in_flight,
            full_layer,
        };
        if pp == 1 {
            return Ok(all);
        }
        let first = mul("activations", layers_one, in_flight)?;
        let last = sum("activations", &[layers_one, ends, logits_saved, logits_grad])?;
        Ok(if first > last {
            Saved { act_layers: first, act_ends: 0, logits_saved: 0, logits_grad: 0, loss_forward: 0, ..all }
        } else {
            all
        })
    }

    /// Autocast's 16-bit weight casts kept for backward, and the bytes of
    /// one layer recomputed under full checkpointing (its saved set + its casts).
    fn casts_and_recompute(
        &self,
        setup: &TrainSetup,
        par: &Parallelism,
        full_layer: u64,
    ) -> Result<(u64, u64), CoreError> {
        let prof = &self.profile;
        let per_param = self.act.weight_copy_bytes;
        let tp = par.tp.max(1);
        let pp = par.pp.max(1);
        // a whole layer is recomputed in backward under full and per-op checkpointing
        let ckpt_full = setup.checkpointing == Checkpointing::Full
            || (setup.checkpointing == Checkpointing::Selective && setup.selective == SelectivePolicy::Ops);
        let head_trains_fp32 = prof.kind == TrainKind::Full || prof.base_dtype.bits() == 32;
        let head_copy = if per_param > 0 && head_trains_fp32 {
            mul("weight copies", div_ceil(prof.head_params, tp), per_param)?
        } else {
            0
        };
        let copies = if per_param == 0 {
            0
        } else if ckpt_full {
            head_copy
        } else {
            let all = mul("weight copies", per_param, prof.cast_params_per_gpu(tp, pp)?)?;
            // tied heads reuse the embedding, which is not a linear group
            add("weight copies", all, if prof.tied { head_copy } else { 0 })?
        };
        let recompute = if ckpt_full {
            let layer_copies = mul("recompute", per_param, prof.layer_cast_params_per_gpu(tp, pp)?)?;
            add(
                "recompute",
                mul("recompute", mul("tokens", setup.batch, local_seq(setup, par))?, full_layer)?,
                layer_copies,
            )?
        } else {
            0
        };
        Ok((copies, recompute))
    }

    /// Eager attention: inside one layer's attention backward the fp32 gradients of the
    /// softmax output and of the scores (2 × 4 B per head × query × key) are live, after the
    /// logits buffers are freed and the output head's gradient exists (measured on
    /// TinyLlama eager, group C: 8 B per element of Temp at the peak), while that layer's
    /// 16-bit softmax cast is already freed. Selective recompute rebuilds the layer's
    /// s × s tensors first.
    fn attention_backward(&self, setup: &TrainSetup, par: &Parallelism) -> Result<u64, CoreError> {
        if self.act.layer_per_key == 0 {
            return Ok(0);
        }
        let prof = &self.profile;
        let tp = par.tp.max(1);
        let what = "attention backward";
        let elems = product(what, &[setup.batch, setup.seq, setup.seq, div_ceil(self.heads, tp)])?;
        // selective recompute rebuilds the layer's fp32 softmax (4 B per element) first
        // (measured: TinyLlama eager, attention core checkpointed: ≈ 10 B per element in all)
        let rebuilt = if setup.checkpointing == Checkpointing::Selective { mul(what, elems, 4)? } else { 0 };
        let head_grad =
            if prof.kind == TrainKind::Full { mul(what, div_ceil(prof.head_params, tp), prof.grad_bytes)? } else { 0 };
        // the layer's 16-bit softmax cast is freed once `probs @ v` has been differentiated
        let cast = if self.compute_bytes != 4 { self.compute_bytes } else { 0 };
        sum(what, &[mul(what, elems, EAGER_BWD_BYTES - cast)?, rebuilt, head_grad])
    }

    /// FP8 training (`mixed-fp8`) under Megatron-LM: TransformerEngine's `Linear`
    /// casts each weight to FP8 once per step and caches it across the step's
    /// micro-batches (`get_weight_workspace` with `cache_name="weight"` while
    /// Megatron passes `is_first_microbatch`, transformer_engine/pytorch/module/linear.py;
    /// Megatron's `TELinear`), with its transpose for the backward GEMM on Hopper
    /// (the weight quantizer's column-wise usage, `Float8Tensor`'s transpose): 2 B
    /// per decoder-linear parameter on the GPU (TP/PP split; the output head and the
    /// embedding stay bf16). torchtitan's torchao `Float8Linear` casts per GEMM and
    /// saves the bf16 weight for backward: no persistent copy. 0 otherwise.
    fn fp8_weights(&self, setup: &TrainSetup, par: &Parallelism) -> Result<u64, CoreError> {
        if !setup.precision.is_fp8() || !setup.framework().megatron_mixed_precision {
            return Ok(0);
        }
        let linears = self.profile.layer_cast_params_per_gpu(par.tp.max(1), par.pp.max(1))?;
        mul("FP8 weight copies", linears, 2)
    }

    /// Context parallelism's ring attention, one layer at a time, the larger of
    /// its two moments (TransformerEngine `AttnFuncWithCPAndKVP2P`,
    /// transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py,
    /// which Megatron-LM runs under `--context-parallel-size` with `cp_comm_type p2p`):
    /// * forward: every K/V block received stays in `p2p_comm_buffers` and every
    ///   step's partial output in `out_per_step` until the outputs are merged after
    ///   the last step, so cp blocks of seq / cp tokens, the whole sequence's
    ///   K/V and a q-sized output per token are live: batch × seq × (K/V + hidden)
    ///   per rank (split over TP);
    /// * backward: two buffers each holding a K/V block and its gradient
    ///   (`torch.empty((2, *kv.shape))` twice): 4 × batch × seq / cp × K/V.
    ///
    /// 0 without CP. torchtitan's ring (PyTorch `context_parallel`, K/V all-gathered
    /// by default: `context_parallel_rotate_method = "allgather"`) holds the same
    /// whole-sequence K/V in forward.
    fn ring_attention(&self, setup: &TrainSetup, par: &Parallelism) -> Result<u64, CoreError> {
        let cp = par.cp.max(1);
        if cp < 2 {
            return Ok(0);
        }
        let what = "ring attention buffers";
        let tp = par.tp.max(1);
        let ap = &self.act;
        let kv_heads = ap.kv_heads.max(1);
        // K and V of one layer per token on this rank (kv heads split over TP, at least one
        // each); where the saved set repeats them to every query head (`layer_kv` 0) the ring
        // still passes the kv-head-wide K/V: 2 × hidden × kv heads / heads × compute bytes
        let layer_kv = if ap.layer_kv > 0 {
            ap.layer_kv
        } else {
            div_ceil(product(what, &[2, self.hidden, kv_heads, self.compute_bytes])?, self.heads.max(1))
        };
        let kv = div_ceil(mul(what, layer_kv, kv_heads.div_ceil(tp))?, kv_heads);
        let out = div_ceil(mul(what, self.hidden, self.compute_bytes)?, tp);
        let forward = product(what, &[setup.batch, setup.seq, add(what, kv, out)?])?;
        let backward = product(what, &[4, setup.batch, local_seq(setup, par), kv])?;
        Ok(forward.max(backward))
    }

    /// QLoRA: one base matrix dequantized to 16-bit in forward and one in backward.
    fn dequant(&self, par: &Parallelism) -> Result<u64, CoreError> {
        let prof = &self.profile;
        if prof.base_quant.is_none() {
            return Ok(0);
        }
        product("dequant", &[2, div_ceil(prof.largest_base_matrix, par.tp.max(1)), self.compute_bytes])
    }
}

/// The transient on top in backward, and the others at 0: the logits
/// buffers at its start, a recomputed layer later (checkpointing, with the
/// input gradients FSDP1's frozen units keep), one layer's eager attention
/// backward, or (FSDP1) the root's flat gradient at its end.
struct BackwardOnTop {
    logits_saved: u64,
    logits_grad: u64,
    recompute: u64,
    kept_input_grads: u64,
    attention_backward: u64,
    root_flat_grad: u64,
}

impl BackwardOnTop {
    fn of(saved: &Saved, recompute: u64, kept_grads: u64, attention: u64, root_grad: u64) -> Result<Self, CoreError> {
        let none = BackwardOnTop {
            logits_saved: 0,
            logits_grad: 0,
            recompute: 0,
            kept_input_grads: 0,
            attention_backward: 0,
            root_flat_grad: 0,
        };
        let logits = add("logits", saved.logits_saved, saved.logits_grad)?;
        // the last layer recomputed comes with the input gradients FSDP1's frozen units keep
        let late = if recompute > 0 { add("recompute", recompute, kept_grads)? } else { 0 };
        Ok(if logits >= late && logits >= attention && logits >= root_grad {
            BackwardOnTop { logits_saved: saved.logits_saved, logits_grad: saved.logits_grad, ..none }
        } else if late >= attention && late >= root_grad {
            BackwardOnTop { recompute, kept_input_grads: if recompute > 0 { kept_grads } else { 0 }, ..none }
        } else if attention >= root_grad {
            BackwardOnTop { attention_backward: attention, ..none }
        } else {
            BackwardOnTop { root_flat_grad: root_grad, ..none }
        })
    }
}

/// Tokens of each sequence one rank holds: seq / cp under context parallelism
/// (Megatron-LM `get_batch_on_this_cp_rank` splits each sequence into 2 × cp
/// chunks and gives each rank two of them, for causal load balance; torchtitan
/// `context_parallel` shards the sequence dimension likewise), rounded up.
pub fn local_seq(setup: &TrainSetup, par: &Parallelism) -> u64 {
    setup.seq.div_ceil(par.cp.max(1))
}

/// Micro-batches whose activations the first (worst) pipeline stage holds.
/// Plain 1F1B: `pp`, fewer when the step has fewer micro-batches
/// (Narayanan et al. 2021 §2.2.1; Megatron-LM `theoretical_memory_usage.py`
/// discounts to min(pp, micro-batches)). Interleaved with `v` virtual stages
/// per rank: the first stage's warm-up runs further ahead, a memory penalty of
/// 1 + (pp − 1)/(pp · v) on pp micro-batches of a stage's layers, i.e.
/// ⌈pp · (1 + (pp − 1)/(pp · v))⌉ = pp + ⌈(pp − 1)/v⌉ micro-batches
/// (Megatron-LM `compute_activation_memory`: `interleaved_schedule_memory_penalty`,
/// `in_flight_microbatches`; Korthikanti et al. 2022 §4.2.3). The chunks of a
/// rank hold pp × v chunks' worth of layers in total, ⌈L / pp⌉ per rank, so
/// the per-micro-batch activations stay those of a stage.
pub fn in_flight_micro_batches(pp: u64, virtual_stages: u64, micro_batches: u64) -> u64 {
    if pp <= 1 {
        return 1;
    }
    if virtual_stages > 1 {
        return pp.saturating_add((pp - 1).div_ceil(virtual_stages));
    }
    pp.min(micro_batches.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Offload, Precision, Sharding, TrainKind};

    /// In-flight micro-batches of the first stage, by hand from Megatron-LM's
    /// `interleaved_schedule_memory_penalty` = 1 + (p − 1)/(p · v) on p:
    /// p 8, v 2: 8 × (1 + 7/16) = 11.5 → 12; v 4: 8 × (1 + 7/32) = 9.75 → 10;
    /// p 16, v 8: 16 × (1 + 15/128) = 17.875 → 18. Plain 1F1B: min(p, m).
    #[test]
    fn interleaved_stages_hold_more_micro_batches_in_flight() {
        assert_eq!(in_flight_micro_batches(8, 2, 64), 12);
        assert_eq!(in_flight_micro_batches(8, 4, 64), 10);
        assert_eq!(in_flight_micro_batches(16, 8, 64), 18);
        assert_eq!(in_flight_micro_batches(8, 1, 64), 8);
        assert_eq!(in_flight_micro_batches(8, 1, 3), 3);
        assert_eq!(in_flight_micro_batches(1, 4, 3), 1);
        // through the estimator: the same job holds more activations interleaved
        // a small vocabulary: the first stage's activations, not the last's logits, are the worst
        let spec = ModelSpec::llama_like("small", 512, 8, 8, 8, 1376, 256);
        let job = |v| crate::workload::Workload {
            task: crate::workload::Task::Train(TrainSetup {
                batch: 1,
                seq: 4096,
                grad_accum: 8,
                ..TrainSetup::default()
            }),
            parallelism: Parallelism { gpus: 4, pp: 4, virtual_stages: v, ..Parallelism::default() },
            ..crate::workload::Workload::default()
        };
        let a = crate::estimate::estimate(&spec, &job(1)).unwrap();
        let b = crate::estimate::estimate(&spec, &job(2)).unwrap();
        assert!(b.total_bytes() > a.total_bytes(), "{} vs {}", b.total_bytes(), a.total_bytes());
    }

    /// The peak is the sum of the lines of its moment, and each moment's lines
    /// sum to that moment's peak: the ledger prints exactly these lines.
    #[test]
    fn peak_lines_sum_to_the_peak() {
        let spec = ModelSpec::llama_like("small", 512, 4, 8, 8, 1376, 32000);
        for (kind, precision, ckpt, batch, seq, accum, first_step) in [
            (TrainKind::Full, Precision::MixedBf16, Checkpointing::None, 1, 64, 1, false),
            (TrainKind::Full, Precision::AmpBf16, Checkpointing::Full, 8, 2048, 4, false),
            (TrainKind::Lora, Precision::AmpBf16, Checkpointing::Selective, 4, 1024, 1, true),
            (TrainKind::Qlora, Precision::Bf16, Checkpointing::Full, 2, 4096, 2, false),
        ] {
            let setup = TrainSetup {
                kind,
                precision,
                checkpointing: ckpt,
                batch,
                seq,
                grad_accum: accum,
                first_step,
                ..TrainSetup::default()
            };
            let m = TrainModel::new(&spec, &setup).unwrap();
            for par in [
                Parallelism::default(),
                Parallelism { gpus: 4, sharding: Sharding::Zero3, ..Parallelism::default() },
                Parallelism {
                    gpus: 4,
                    sharding: Sharding::Zero2,
                    offload_optimizer: Offload::Cpu,
                    ..Parallelism::default()
                },
                Parallelism { gpus: 4, tp: 2, pp: 2, ..Parallelism::default() },
            ] {
                let b = m.evaluate(&setup, &par).unwrap();
                assert_eq!(b.at_peak.total().unwrap(), b.tensor_peak + b.outside_allocator, "{setup:?} {par:?}");
                assert_eq!(b.tensor_peak, b.backward_peak.max(b.step_peak));
                let at_step = b.peak_phase == Phase::OptimizerStep;
                assert_eq!(at_step, b.step_peak > b.backward_peak);
                // only one backward transient is live at the peak
                let transients =
                    [b.at_peak.logits_saved + b.at_peak.logits_grad, b.at_peak.recompute, b.at_peak.attention_backward];
                assert!(b.at_peak.kept_input_grads == 0 || b.at_peak.recompute > 0, "{:?}", b.at_peak);
                assert!(transients.iter().filter(|&&t| t > 0).count() <= 1, "{:?}", b.at_peak);
            }
        }
    }

    /// Context parallelism (Megatron-LM `--context-parallel-size`): a rank of a CP
    /// group holds seq / cp tokens of each sequence, so everything sized per token
    /// (saved activations, logits buffers) is that of a seq / cp job, while the
    /// model states shard over DP × CP (`with_context_parallel=True`). By hand, a
    /// Llama-like 512-hidden, 4-layer model, 8 GPUs at ZeRO-1: CP 4 at seq 8192
    /// leaves DP 2 and shards over 8 ranks, exactly as CP 1 on 8 GPUs at seq 2048.
    #[test]
    fn context_parallel_holds_a_cp_th_of_the_tokens_and_shards_over_dp_cp() {
        let spec = ModelSpec::llama_like("small", 512, 4, 8, 8, 1376, 32000);
        let setup = |seq| TrainSetup {
            engine: crate::workload::Engine::Megatron,
            precision: Precision::MixedBf16,
            batch: 1,
            seq,
            ..TrainSetup::default()
        };
        let par = |cp| Parallelism { gpus: 8, cp, sharding: Sharding::Zero1, ..Parallelism::default() };
        let m = TrainModel::new(&spec, &setup(8192)).unwrap();
        let with_cp = m.evaluate(&setup(8192), &par(4)).unwrap();
        let short = m.evaluate(&setup(2048), &par(1)).unwrap();
        let long = m.evaluate(&setup(8192), &par(1)).unwrap();
        assert_eq!(par(4).dp(), 2);
        assert_eq!(par(4).shard_dp(), 8);
        assert_eq!(with_cp.states, short.states);
        assert_eq!(with_cp.act_layers, short.act_layers);
        assert_eq!(with_cp.at_peak.logits_grad, short.at_peak.logits_grad);
        assert_eq!(long.act_layers, 4 * short.act_layers);
        // the ring's buffers exist only with CP: K + V per token = 2 × 8 kv heads × 64 × 2 B
        // = 2048 B, a q-sized output 512 × 2 B = 1024 B; forward 1 × 8192 tokens × 3072 B =
        // 25,165,824 B, backward 4 × 2048 tokens × 2048 B = 16,777,216 B: forward is the larger
        assert_eq!(m.ring_attention(&setup(8192), &par(4)).unwrap(), 8192 * 3072);
        assert_eq!(m.ring_attention(&setup(8192), &par(1)).unwrap(), 0);
        assert!(with_cp.tensor_peak < long.tensor_peak);
    }

    /// FP8 training under Megatron (TransformerEngine): the FP8 weight and its
    /// transpose of every decoder linear stay cached, 2 B per decoder-linear
    /// parameter. By hand, Llama-like hidden 512, 8 heads, 8 kv heads, MLP 1376,
    /// 4 layers: q, k, v, o 4 × 512 × 512 = 1,048,576 and gate, up, down
    /// 3 × 512 × 1376 = 2,113,536 per layer, 3,162,112 × 4 layers = 12,648,448
    /// parameters → 25,296,896 B at TP 1, half at TP 2. torchtitan (torchao) keeps none.
    #[test]
    fn fp8_training_keeps_te_weight_copies() {
        let spec = ModelSpec::llama_like("small", 512, 4, 8, 8, 1376, 32000);
        let setup = |engine| TrainSetup {
            engine,
            precision: Precision::MixedFp8,
            batch: 1,
            seq: 1024,
            ..TrainSetup::default()
        };
        let megatron = setup(crate::workload::Engine::Megatron);
        let m = TrainModel::new(&spec, &megatron).unwrap();
        let one = m.evaluate(&megatron, &Parallelism::default()).unwrap();
        assert_eq!(one.at_peak.fp8_weights, 25_296_896);
        let tp2 = Parallelism { gpus: 2, tp: 2, ..Parallelism::default() };
        assert_eq!(m.evaluate(&megatron, &tp2).unwrap().at_peak.fp8_weights, 25_296_896 / 2);
        let bf16 = TrainSetup { precision: Precision::MixedBf16, ..megatron.clone() };
        let b = TrainModel::new(&spec, &bf16).unwrap().evaluate(&bf16, &Parallelism::default()).unwrap();
        assert_eq!(one.tensor_peak, b.tensor_peak + 25_296_896);
        let titan = setup(crate::workload::Engine::Torchtitan);
        let t = TrainModel::new(&spec, &titan).unwrap().evaluate(&titan, &Parallelism::default()).unwrap();
        assert_eq!(t.at_peak.fp8_weights, 0);
    }
}
