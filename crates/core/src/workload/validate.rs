//! The one check of a workload against a model.
//!
//! Every rule a workload must satisfy lives here: sizes against
//! [`super::limits`], the parallel layout (GPUs = TP × PP × DP, TP divides
//! the heads, PP at most the layers), ZeRO / offload / sequence-parallel
//! rules, inference dtypes and concurrency, the LoRA shape and targets, the
//! position table and the runtime margin. Each rule is a small function
//! returning data (a [`WorkloadError`] naming its [`Field`]); the sentence
//! is rendered separately by [`WorkloadError::render`], with a name for
//! each field: core writes field ids (`batch`, `grad-accum`), the CLI its
//! flags (`--batch`, or `train_micro_batch_size_per_gpu` when a DeepSpeed
//! config set it).

use super::limits::{
    MAX_BLOCK_SIZE, MAX_GPUS, MAX_GRAD_ACCUM, MAX_LORA_RANK, MAX_MODEL_PARALLEL, MAX_SEQUENCES, MAX_TOKENS,
};
use super::{
    AttentionImpl, Engine, InferenceSetup, LoraTargets, Offload, Optimizer, Parallelism, Precision, Sharding, Task,
    TrainKind, TrainSetup, Workload,
};
pub use crate::error::{Field, WorkloadError};
use crate::model::{ModelSpec, Positional};
use crate::params::{LinearRole, ParamGroupKind, ParamLayout};
use crate::runtime::RuntimeSetup;

/// Check `workload` against `model`: the first rule broken, or `Ok`.
pub fn validate(model: &ModelSpec, workload: &Workload) -> Result<(), WorkloadError> {
    match &workload.task {
        Task::Inference(s) => inference(model, s, &workload.parallelism, &workload.runtime),
        Task::Train(t) => training(model, t, &workload.parallelism, &workload.runtime),
    }
}

/// The rules of an inference job.
pub fn inference(
    model: &ModelSpec,
    s: &InferenceSetup,
    par: &Parallelism,
    rt: &RuntimeSetup,
) -> Result<(), WorkloadError> {
    size(Field::Batch, s.batch, MAX_SEQUENCES)?;
    size(Field::Concurrency, s.concurrency, MAX_SEQUENCES)?;
    size(Field::Context, s.context, MAX_TOKENS)?;
    size(Field::BlockSize, s.block_size, MAX_BLOCK_SIZE)?;
    layout(model, par)?;
    no_training_parallelism(par)?;
    expert_parallel(model, s, par)?;
    dp_attention(model, s, par)?;
    if s.batch > s.concurrency {
        return Err(WorkloadError::BatchOverConcurrency { batch: s.batch, concurrency: s.concurrency });
    }
    if s.kv_dtype.bits() < 8 {
        return Err(WorkloadError::KvDtype { dtype: s.kv_dtype.name() });
    }
    match &s.quant {
        None if !s.weight_dtype.is_compute_float() => {
            return Err(WorkloadError::IntegerWeights { dtype: s.weight_dtype.name() })
        }
        None => {}
        Some(q) => {
            if q.group_size == Some(0) {
                return Err(WorkloadError::Zero { field: Field::GroupSize });
            }
            q.validate().map_err(|e| WorkloadError::Quantization { reason: e.to_string() })?;
        }
    }
    positions(model, Field::Context, s.context)?;
    runtime(rt)
}

/// The rules of a training job.
pub fn training(model: &ModelSpec, t: &TrainSetup, par: &Parallelism, rt: &RuntimeSetup) -> Result<(), WorkloadError> {
    size(Field::Batch, t.batch, MAX_SEQUENCES)?;
    size(Field::Seq, t.seq, MAX_TOKENS)?;
    size(Field::GradAccum, t.grad_accum, MAX_GRAD_ACCUM)?;
    layout(model, par)?;
    sharding(par)?;
    hybrid_shard(par)?;
    hpz(t, par)?;
    virtual_stages(model, par, t.grad_accum)?;
    context_parallel(t, par)?;
    fp8_training(t)?;
    if par.dp_attention != 1 {
        return Err(WorkloadError::DpAttention {
            dp: par.dp_attention,
            reason: "data-parallel attention is a serving layout (SGLang, vLLM); training is not modelled with it"
                .into(),
        });
    }
    if t.engine != Engine::Megatron && par.etp != 0 {
        return Err(WorkloadError::ExpertTensorParallel {
            etp: par.etp,
            reason:
                "expert-tensor parallelism is Megatron-LM's (--expert-tensor-parallel-size): give --engine megatron"
                    .into(),
        });
    }
    if t.engine == Engine::Megatron {
        megatron(model, t, par)?;
    } else {
        deepspeed_autoep(model, t, par)?;
    }
    if t.kind != TrainKind::Full {
        lora(model, t)?;
    }
    positions(model, Field::Seq, t.seq)?;
    runtime(rt)
}

/// Expert parallelism outside Megatron: DeepSpeed AutoEP (PR #7938) for a
/// Hugging Face MoE model of a preset family, under `--engine deepspeed` or
/// the Trainer with a DeepSpeed config ([`super::autoep::autoep_rules`]).
fn deepspeed_autoep(model: &ModelSpec, t: &TrainSetup, par: &Parallelism) -> Result<(), WorkloadError> {
    let ep = par.ep;
    if ep == 0 {
        return Err(WorkloadError::Zero { field: Field::Ep });
    }
    if ep == 1 {
        return Ok(());
    }
    if !super::autoep::runs_autoep(t, par) {
        return Err(WorkloadError::ExpertParallel {
            ep,
            reason: format!(
                "expert parallelism in training is modelled as Megatron runs it (--engine megatron) and as DeepSpeed AutoEP runs a Hugging Face MoE model (--engine deepspeed, or the Trainer with ZeRO); not for --engine {}{}",
                t.engine.name(),
                if par.fsdp { " with --fsdp" } else { "" }
            ),
        });
    }
    super::autoep::autoep_rules(model, t, par).map_err(|reason| WorkloadError::ExpertParallel { ep, reason })
}

/// A size is at least 1 and at most its limit.
fn size(field: Field, value: u64, limit: u64) -> Result<(), WorkloadError> {
    if value == 0 {
        Err(WorkloadError::Zero { field })
    } else if value > limit {
        Err(WorkloadError::TooLarge { field, value, limit })
    } else {
        Ok(())
    }
}

/// GPUs = TP × PP × DP; TP divides the attention heads; PP at most the layers.
fn layout(model: &ModelSpec, par: &Parallelism) -> Result<(), WorkloadError> {
    // TP and PP first: an unset GPU count defaults to their product
    size(Field::Tp, par.tp, MAX_MODEL_PARALLEL)?;
    size(Field::Pp, par.pp, MAX_MODEL_PARALLEL)?;
    size(Field::Gpus, par.gpus, MAX_GPUS)?;
    // both at most 2^12: the product cannot overflow
    if !par.gpus.is_multiple_of(par.tp * par.pp) {
        return Err(WorkloadError::GpusNotMultiple { gpus: par.gpus, tp: par.tp, pp: par.pp });
    }
    if !model.num_heads.is_multiple_of(par.tp) {
        return Err(WorkloadError::TpSplitsHeads { tp: par.tp, heads: model.num_heads });
    }
    if par.pp > model.num_layers {
        return Err(WorkloadError::PpOverLayers { pp: par.pp, layers: model.num_layers });
    }
    Ok(())
}

/// Interleaved pipeline stages (`virtual_stages` > 1) as Megatron-LM runs
/// them: two or more stages, the layers split into pp × v equal chunks
/// (`--num-layers-per-virtual-pipeline-stage` must divide the layers of a
/// stage), and the micro-batches of a step a multiple of pp
/// (`forward_backward_pipelining_with_interleaving` in
/// megatron/core/pipeline_parallel/schedules.py: "number of microbatches … is
/// not divisible by pipeline-model-parallel-size when using interleaved
/// schedule"; Narayanan et al. 2021 §2.2.2).
pub fn virtual_stages(model: &ModelSpec, par: &Parallelism, micro_batches: u64) -> Result<(), WorkloadError> {
    let v = par.virtual_stages;
    if v <= 1 {
        return Ok(());
    }
    let chunks = par.pp.saturating_mul(v);
    if par.pp < 2 || !model.num_layers.is_multiple_of(chunks) || !micro_batches.is_multiple_of(par.pp) {
        return Err(WorkloadError::VirtualStages {
            virtual_stages: v,
            pp: par.pp,
            layers: model.num_layers,
            micro_batches,
        });
    }
    Ok(())
}

/// Context parallelism (`cp` > 1) as the engines that run it for training do:
/// Megatron-LM (`--context-parallel-size`, TransformerEngine's ring attention)
/// and torchtitan (`context_parallel_degree`, PyTorch `context_parallel`);
/// GPUs a multiple of TP × CP × PP; a flash/SDPA attention kernel (ring
/// attention runs blockwise flash attention: Liu et al. 2023; TransformerEngine
/// `AttnFuncWithCPAndKVP2P`, PyTorch's templated ring attention over
/// `scaled_dot_product_attention`); each sequence split into 2 × CP chunks
/// for causal load balance, so the sequence a multiple of 2 × CP (torchtitan
/// `ParallelDims.seq_len_divisor`; TransformerEngine: "Sequence length per GPU
/// needs to be divisible by 2"). The Hugging Face engines are refused by name:
/// the DeepSpeed a HF Trainer user gets splits sequences with DeepSpeed-Ulysses
/// (`sequence_parallel_size`: all-to-all over attention heads, not a K/V ring),
/// which is not modelled.
pub fn context_parallel(t: &TrainSetup, par: &Parallelism) -> Result<(), WorkloadError> {
    let cp = par.cp;
    size(Field::Cp, cp, MAX_MODEL_PARALLEL)?;
    if cp == 1 {
        return Ok(());
    }
    let bad = |reason: String| Err(WorkloadError::ContextParallel { cp, reason });
    match t.engine {
        Engine::Megatron | Engine::Torchtitan => {}
        Engine::Deepspeed => {
            return bad("DeepSpeed splits sequences with DeepSpeed-Ulysses (sequence_parallel_size: an all-to-all over the attention heads), not ring context parallelism; Ulysses is not modelled: use --engine megatron or torchtitan".into())
        }
        other => {
            return bad(format!(
                "{} has no ring context parallelism to model; it is run by --engine megatron (--context-parallel-size) or torchtitan (context_parallel_degree)",
                other.name()
            ))
        }
    }
    if t.attention == AttentionImpl::Eager {
        return bad("ring attention runs blockwise flash attention over the K/V blocks; eager attention cannot: give --attention sdpa".into());
    }
    // tp, cp, pp ≤ 2^12 each: the product cannot overflow
    let ranks = par.tp.max(1) * cp * par.pp.max(1);
    if !par.gpus.is_multiple_of(ranks) {
        return bad(format!(
            "{} GPUs are not a multiple of TP {} × CP {cp} × PP {} = {ranks}",
            par.gpus,
            par.tp.max(1),
            par.pp.max(1)
        ));
    }
    if !t.seq.is_multiple_of(2 * cp) {
        return bad(format!(
            "the sequence of {} tokens is split into 2 × {cp} chunks for causal load balance: give a multiple of {}",
            t.seq,
            2 * cp
        ));
    }
    Ok(())
}

/// FP8 training (`mixed-fp8`) where an engine runs it: Megatron-LM
/// (`--fp8-format hybrid`, TransformerEngine) and torchtitan (its `float8`
/// converter, torchao `Float8Linear`), full training only (both train full
/// models; an FP8 LoRA base is not modelled). The Hugging Face engines are
/// refused by name: accelerate's FP8 backends (TransformerEngine, MS-AMP,
/// torchao) are not modelled.
pub fn fp8_training(t: &TrainSetup) -> Result<(), WorkloadError> {
    if !t.precision.is_fp8() {
        return Ok(());
    }
    let engine = match t.engine {
        Engine::Megatron => "megatron",
        Engine::Torchtitan => "torchtitan",
        other => {
            return Err(WorkloadError::EngineRefuses {
                field: Field::Precision,
                engine: other.name(),
                reason: "FP8 training is modelled as Megatron-LM (--engine megatron: TransformerEngine, --fp8-format hybrid) and torchtitan (--engine torchtitan: torchao float8 linears) run it; accelerate's FP8 backends are not".into(),
            })
        }
    };
    if t.kind != TrainKind::Full {
        return Err(WorkloadError::EngineRefuses {
            field: Field::Precision,
            engine,
            reason: "FP8 training is modelled for full training (--task train): the FP8 linears' weights are the trained bf16 ones".into(),
        });
    }
    Ok(())
}

/// What a card cannot compute: FP8 training on a card without FP8 tensor
/// cores. TransformerEngine refuses below compute capability 8.9 ("Device
/// compute capability 8.9 or higher required for FP8 execution",
/// transformer_engine/pytorch/fp8.py `check_fp8_support`), and torchao's
/// float8 linears need SM89+ likewise; the catalogue marks such cards by
/// having no `fp8_tflops`. The planner leaves them out; `estimate --gpu`
/// refuses them here.
pub fn runs_on(card: &crate::GpuSpec, task: &Task) -> Result<(), WorkloadError> {
    if let Task::Train(t) = task {
        if !trains_in(card, t.precision) {
            return Err(WorkloadError::CardCannot {
                field: Field::Precision,
                card: card.name.clone(),
                reason: "FP8 training (mixed-fp8) needs FP8 tensor cores (compute capability 8.9 or higher: Ada, Hopper, Blackwell; TransformerEngine and torchao float8 refuse below it) and this card has none: use --precision mixed-bf16 on it, or a card with FP8".into(),
            });
        }
    }
    Ok(())
}

/// Whether `card` can train at `precision` (see [`runs_on`]): FP8 needs FP8 tensor cores.
pub fn trains_in(card: &crate::GpuSpec, precision: Precision) -> bool {
    !(precision.is_fp8() && card.fp8_tflops.is_none())
}

/// Sharding, offload, sequence parallelism and virtual pipeline stages exist for training only.
fn no_training_parallelism(par: &Parallelism) -> Result<(), WorkloadError> {
    let field = if par.sharding != Sharding::None {
        Field::Sharding
    } else if par.offload_optimizer.is_some() || par.offload_params.is_some() {
        Field::Offload
    } else if par.sequence_parallel {
        Field::SequenceParallel
    } else if par.virtual_stages > 1 {
        // interleaved stages are a training schedule (no backward to interleave in serving)
        Field::Pp
    } else if par.cp > 1 {
        // context parallelism is modelled for training (its ring attention's backward)
        Field::Cp
    } else if par.dp_replicate != 1 {
        Field::DpReplicate
    } else if par.hpz != 1 {
        Field::Hpz
    } else if par.etp != 0 {
        // expert-tensor parallelism is modelled for Megatron-LM training
        Field::Etp
    } else {
        return Ok(());
    };
    Err(WorkloadError::TrainingOnly { field })
}

/// What Megatron-LM's `pretrain_gpt.py` runs (megatron/training/arguments.py
/// `validate_args`, Megatron-LM main of August 2026): full training only; `--bf16`
/// / `--fp16` (16-bit parameters, fp32 master) or fp32; the distributed optimizer
/// (ZeRO-1) as its only sharding of model states, no offload; expert parallelism
/// for a MoE model with `--num-experts` divisible by it (`validate_args`: "Number of
/// experts should be a multiple of expert model parallel_size"), the expert grid
/// ETP × EP dividing the ranks of a pipeline stage ([`megatron_expert_grid`]); MoE with TP
/// needs sequence parallelism in training (`MoELayer.forward` raises without it,
/// megatron/core/transformer/moe/moe_layer.py).
fn megatron(model: &ModelSpec, t: &TrainSetup, par: &Parallelism) -> Result<(), WorkloadError> {
    let no = |field: Field, reason: &str| {
        Err(WorkloadError::EngineRefuses { field, engine: "megatron", reason: reason.to_string() })
    };
    if t.kind != TrainKind::Full {
        return no(Field::Task, "Megatron-LM trains full models (pretrain_gpt.py has no LoRA/QLoRA); use --task train, or another --engine for LoRA/QLoRA");
    }
    if !matches!(t.precision, Precision::MixedBf16 | Precision::MixedFp16 | Precision::Fp32 | Precision::MixedFp8) {
        return no(Field::Precision, "Megatron trains 16-bit parameters with an fp32 master copy (--bf16: mixed-bf16, --fp16: mixed-fp16, --bf16 --fp8-format hybrid: mixed-fp8) or in fp32; not autocast over fp32 weights or pure bf16");
    }
    if !matches!(t.optimizer, Optimizer::AdamW | Optimizer::Sgd | Optimizer::SgdMomentum) {
        return no(Field::Optimizer, "Megatron's --optimizer is adam (decoupled weight decay: adamw) or sgd (with momentum); bitsandbytes, Lion and Adafactor are not among them");
    }
    if par.fsdp || par.sharding.stage() >= 2 {
        return no(Field::Sharding, "its distributed optimizer (--use-distributed-optimizer) shards the fp32 master and optimizer states over the data-parallel ranks: --zero 1; gradients and parameters stay whole (ZeRO-2/3, FSDP: DeepSpeed or torchtitan)");
    }
    // Megatron-Core's HybridDeviceOptimizer (--optimizer-cpu-offload, with the
    // distributed optimizer and --use-precision-aware-optimizer): the optimizer's
    // shard to host memory; no NVMe and no parameter offload
    if par.offload_params.is_some() || par.offload_optimizer == Offload::Nvme {
        return no(Field::Offload, "Megatron offloads the optimizer to CPU memory only (--optimizer-cpu-offload, Megatron-Core's HybridDeviceOptimizer): --offload cpu; parameters and NVMe stay DeepSpeed's");
    }
    // layers that do not divide by the stages go on the end stages
    // (--decoder-first/last-pipeline-num-layers, `megatron_stage_split`)
    if super::megatron_stage_split(model.num_layers, par.pp.max(1), par.virtual_stages).is_none() {
        return Err(WorkloadError::EngineRefuses {
            field: Field::Pp,
            engine: "megatron",
            reason: format!(
                "{} pipeline stages for {} layers: Megatron needs the layers even over the stages, or at least one on each end stage and the rest even over the middle ones (--decoder-first/last-pipeline-num-layers; not with interleaved virtual stages)",
                par.pp, model.num_layers
            ),
        });
    }
    let experts = model.moe.as_ref().map(|m| m.num_experts).unwrap_or(0);
    if experts > 0 && model.moe_layers() > 0 && par.tp > 1 && !par.sequence_parallel {
        return no(Field::SequenceParallel, "a MoE model with tensor parallelism trains with sequence parallelism in Megatron (MoELayer.forward raises without it): add --sp");
    }
    let ep = par.ep;
    if ep == 0 {
        return Err(WorkloadError::Zero { field: Field::Ep });
    }
    if ep > 1 {
        let bad = |reason: String| Err(WorkloadError::ExpertParallel { ep, reason });
        if experts == 0 {
            return bad(format!("{} has no routed experts to split", model.name));
        }
        if !experts.is_multiple_of(ep) {
            return bad(format!("Megatron needs the {experts} routed experts to be a multiple of the expert-parallel size (--num-experts % --expert-model-parallel-size == 0)"));
        }
    }
    megatron_expert_grid(model, par)
}

/// Megatron's expert grid (megatron/core/parallel_state.py
/// `initialize_model_parallel`, "MoE parallel folding"): the ranks of a
/// pipeline stage are laid out again as ETP × EP × expert-DP, so ETP × EP must
/// divide GPUs / PP (`RuntimeError: world_size … is not divisible by
/// expert_tensor_model_pipeline_parallel size`). An explicit `--etp`: a MoE
/// model (`--expert-tensor-parallel-size` splits the routed experts only),
/// the expert width divisible by it (`TEGroupedLinear` divides the fc1
/// outputs and fc2 inputs by the expert-TP size,
/// megatron/core/extensions/transformer_engine.py), and above 1 no biases in
/// the linears (transformer_config.py `__post_init__`: "Bias in Moe is only
/// supported when ETP==1").
fn megatron_expert_grid(model: &ModelSpec, par: &Parallelism) -> Result<(), WorkloadError> {
    let moe = model.moe.as_ref().filter(|m| m.num_experts > 0 && model.moe_layers() > 0);
    let etp = par.etp;
    if etp > 0 {
        size(Field::Etp, etp, MAX_MODEL_PARALLEL)?;
        let bad = |reason: String| Err(WorkloadError::ExpertTensorParallel { etp, reason });
        let Some(m) = moe else {
            return bad(format!(
                "{} has no routed experts to split (--expert-tensor-parallel-size splits the experts only)",
                model.name
            ));
        };
        if !m.expert_intermediate.is_multiple_of(etp) {
            return bad(format!(
                "each expert's {} intermediate columns must divide evenly over the expert-tensor-parallel ranks (Megatron's grouped expert linears split them like a TP linear)",
                m.expert_intermediate
            ));
        }
        if etp > 1 && (model.o_bias || model.mlp_bias) {
            return bad(format!(
                "{} has biases in its linears; Megatron runs MoE biases only with --expert-tensor-parallel-size 1",
                model.name
            ));
        }
    }
    if moe.is_none() {
        return Ok(());
    }
    let stage_ranks = par.gpus / par.pp.max(1);
    let grid = par.ep.max(1).saturating_mul(par.expert_tp());
    if stage_ranks.is_multiple_of(grid) {
        return Ok(());
    }
    let reason = format!(
        "Megatron lays the {stage_ranks} ranks of a pipeline stage (--gpus {} / --pp {}) out as expert-tensor-parallel {} × expert-parallel {} × expert-data-parallel, so ETP × EP = {grid} must divide them",
        par.gpus,
        par.pp,
        par.expert_tp(),
        par.ep.max(1)
    );
    if par.etp == 0 && par.ep > 1 {
        Err(WorkloadError::ExpertParallel { ep: par.ep, reason })
    } else {
        Err(WorkloadError::ExpertTensorParallel { etp: par.expert_tp(), reason })
    }
}

/// ZeRO with pipelines, offload and sequence parallelism.
fn sharding(par: &Parallelism) -> Result<(), WorkloadError> {
    if par.sequence_parallel && par.tp == 1 {
        return Err(WorkloadError::SequenceParallelWithoutTp);
    }
    // DeepSpeed's PipelineEngine asserts ZeRO stage < 2 (gradient and parameter
    // partitioning conflict with per-micro-batch pipeline gradients); FSDP is not DeepSpeed.
    if par.pp > 1 && !par.fsdp && par.sharding.stage() >= 2 {
        return Err(WorkloadError::ShardedPipeline { stage: par.sharding.stage(), pp: par.pp });
    }
    offload_rules(par.sharding, par.offload_optimizer, par.offload_params)
}

/// Hybrid sharding (`dp_replicate` > 1) as PyTorch runs it: FSDP
/// `HYBRID_SHARD` / FSDP2 on a 2-D mesh shard the full (ZeRO-3) states over
/// each replica's ranks, so it needs ZeRO-3, a replicate degree that divides
/// the data-parallel degree, and at least 2 ranks in each shard group (1 is
/// plain data parallelism, all replicas is plain ZeRO-3); expert parallelism
/// shards the experts over other groups and is not modelled with it.
fn hybrid_shard(par: &Parallelism) -> Result<(), WorkloadError> {
    let r = par.dp_replicate;
    if r == 0 {
        return Err(WorkloadError::Zero { field: Field::DpReplicate });
    }
    if r == 1 {
        return Ok(());
    }
    let bad = |reason: String| Err(WorkloadError::HybridShard { replicate: r, reason });
    let dp = par.dp();
    if par.sharding != Sharding::Zero3 {
        return bad(format!(
            "hybrid sharding (FSDP HYBRID_SHARD, torchtitan data_parallel_replicate_degree) replicates a ZeRO-3 / FSDP FULL_SHARD shard group; this layout uses {}: add --zero 3 (or --fsdp full-shard)",
            par.sharding_label()
        ));
    }
    if !dp.is_multiple_of(r) || dp / r < 2 {
        return bad(format!(
            "the {dp} data-parallel ranks (GPUs ÷ (TP × PP)) must split into {r} replicas of 2 or more ranks each, the shard group (usually the GPUs of one machine)"
        ));
    }
    if par.ep > 1 {
        return bad("hybrid sharding with expert parallelism is not modelled".into());
    }
    Ok(())
}

/// DeepSpeed ZeRO++ hpZ (`hpz` > 1) as DeepSpeed runs it: a ZeRO-3 option
/// (`zero_optimization.zero_hpz_partition_size`, read by `DeepSpeedZeroConfig`
/// and used by stage 3 only: `DeepSpeedZeroOptimizer_Stage3`,
/// deepspeed/runtime/zero/stage3.py), so DeepSpeed ZeRO-3 (not FSDP, not an
/// engine sharding with FSDP); the groups are consecutive ranks of the whole
/// world, which must divide by the group size
/// (`groups._create_zero_param_parallel_group`: `_ensure_divisibility(world_size,
/// group_size)`, deepspeed/utils/groups.py). A group of every rank would be a
/// second copy of the primary shard; with tensor or pipeline parallelism the
/// world's consecutive ranks are not data-parallel peers, with parameter
/// offload the secondary partition lives on the offload device
/// (`torch.empty(..., device=self.remote_device)` in `_partition_param_sec`),
/// and with HSDP there are two answers to one question: none of these is modelled.
fn hpz(t: &TrainSetup, par: &Parallelism) -> Result<(), WorkloadError> {
    let h = par.hpz;
    if h == 0 {
        return Err(WorkloadError::Zero { field: Field::Hpz });
    }
    if h == 1 {
        return Ok(());
    }
    let bad = |reason: String| Err(WorkloadError::Hpz { hpz: h, reason });
    let fsdp = par.fsdp || t.framework().sharder == super::Sharder::Fsdp;
    if par.sharding != Sharding::Zero3 || fsdp || t.engine == Engine::Megatron {
        return bad(format!(
            "ZeRO++ hierarchical partitioning (zero_hpz_partition_size) is an option of DeepSpeed ZeRO-3; this layout uses {} under --engine {}: give --zero 3 with --engine deepspeed or transformers",
            par.sharding_label(),
            t.engine.name()
        ));
    }
    if par.tp > 1 || par.pp > 1 || par.cp > 1 || par.ep > 1 {
        return bad("DeepSpeed forms the hpZ groups from consecutive ranks of the whole world; with tensor, pipeline, context or expert parallelism that is not modelled".into());
    }
    if par.hybrid() {
        return bad(
            "hpZ and hybrid sharding (--dp-replicate) both decide where the parameters are gathered from: give one"
                .into(),
        );
    }
    if par.offload_params.is_some() {
        return bad("with parameter offload DeepSpeed keeps the secondary partition on the offload device; that is not modelled".into());
    }
    if !par.gpus.is_multiple_of(h) || h >= par.gpus {
        return bad(format!(
            "the {} GPUs (DeepSpeed's world size) must split into groups of {h} ranks, 2 or more groups (usually one group per machine)",
            par.gpus
        ));
    }
    Ok(())
}

/// Offload needs sharded states: the optimizer's at ZeRO-1 or more, the
/// parameters' at ZeRO-3 (what DeepSpeed accepts; also what a launch config
/// for a plan must respect).
pub fn offload_rules(sharding: Sharding, optimizer: Offload, params: Offload) -> Result<(), WorkloadError> {
    if params.is_some() && sharding != Sharding::Zero3 {
        return Err(WorkloadError::ParamOffloadNeedsZero3);
    }
    if optimizer.is_some() && sharding == Sharding::None {
        return Err(WorkloadError::OptimizerOffloadNeedsZero);
    }
    Ok(())
}

/// LoRA rank and dropout, the base dtype, and targets that exist in the model.
fn lora(model: &ModelSpec, t: &TrainSetup) -> Result<(), WorkloadError> {
    size(Field::LoraRank, t.lora.rank, MAX_LORA_RANK)?;
    if !(0.0..1.0).contains(&t.lora.dropout) {
        return Err(WorkloadError::Probability { field: Field::LoraDropout, value: t.lora.dropout });
    }
    if let Some(d) = t.base_dtype.filter(|d| !d.is_compute_float()) {
        return Err(WorkloadError::LoraBaseDtype { dtype: d.name() });
    }
    if t.lora.targets == LoraTargets::AllLinear {
        return Ok(());
    }
    // a model the layout refuses is reported by the estimate itself
    let Ok(layout) = ParamLayout::of(model) else { return Ok(()) };
    lora_targets(model, &layout, &t.lora.targets).map(|_| ())
}

/// The linears that get LoRA adapters: PEFT's `all-linear` (every decoder
/// linear but the output head and routers), or the listed modules, each of
/// which must be a linear of the model, its output head or its token
/// embedding, or the modules a PEFT regular expression matches. Returns the
/// leaf names of the adapted modules.
pub fn lora_targets(
    model: &ModelSpec,
    layout: &ParamLayout,
    targets: &LoraTargets,
) -> Result<Vec<String>, WorkloadError> {
    lora_placement(model, layout, targets).map(|p| p.modules)
}

/// Where LoRA adapters go: for each parameter group of the layout (same
/// order) the instances that carry an adapter (0: none; `copies`: every
/// layer), and the leaf names of the adapted modules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoraPlacement {
    pub copies: Vec<u64>,
    pub modules: Vec<String>,
}

/// Adapters on the groups of `layout` for `targets`.
///
/// A regular expression follows PEFT's `check_target_module_exists`: a string
/// `target_modules` is matched with `re.fullmatch` against every full module
/// name of the base model (`model.layers.0.self_attn.q_proj`, `lm_head`), so it
/// may pick some layers only. Rust's `regex` syntax is Python's `re` without
/// look-around and back-references; a pattern that uses them is refused by name.
pub fn lora_placement(
    model: &ModelSpec,
    layout: &ParamLayout,
    targets: &LoraTargets,
) -> Result<LoraPlacement, WorkloadError> {
    let names = crate::hf::names(model.family);
    let adaptable = |g: &crate::params::ParamGroup| match g.kind {
        ParamGroupKind::Linear(LinearRole::Router) => false,
        ParamGroupKind::Linear(_) | ParamGroupKind::Embedding => true,
        _ => false,
    };
    let copies: Vec<u64> = match targets {
        LoraTargets::AllLinear => layout
            .groups
            .iter()
            .map(|g| match g.role() {
                Some(LinearRole::Router | LinearRole::LmHead) | None => 0,
                Some(_) => g.copies,
            })
            .collect(),
        LoraTargets::Modules(list) if list.is_empty() => return Err(WorkloadError::NoLoraTargets),
        LoraTargets::Modules(list) => {
            let known = |n: &str| layout.groups.iter().any(|g| adaptable(g) && g.module == n);
            if let Some(name) = list.iter().find(|n| !known(n)) {
                let mut linears = layout.linear_module_names();
                linears.push(names.lm_head.to_string());
                linears.push(names.embed.to_string());
                linears.retain(|n| known(n));
                return Err(WorkloadError::UnknownLoraTarget {
                    name: name.clone(),
                    family: model.family.name(),
                    linears,
                });
            }
            layout.groups.iter().map(|g| if adaptable(g) && list.contains(&g.module) { g.copies } else { 0 }).collect()
        }
        LoraTargets::Regex(pattern) => {
            let re = regex::Regex::new(&format!("^(?:{pattern})$")).map_err(|e| WorkloadError::LoraRegex {
                pattern: pattern.clone(),
                reason: format!(
                    "is not a regular expression vramfit can read (Python re without look-around or back-references): {}",
                    e.to_string().lines().last().unwrap_or("invalid")
                ),
            })?;
            let copies: Vec<u64> =
                layout.groups.iter().map(|g| if adaptable(g) { matched_instances(model, g, &re) } else { 0 }).collect();
            if copies.iter().all(|&c| c == 0) {
                return Err(WorkloadError::LoraRegex {
                    pattern: pattern.clone(),
                    reason: format!(
                        "matches no linear module of this {} model (PEFT matches it with re.fullmatch against full names such as {})",
                        model.family.name(),
                        layout
                            .groups
                            .iter()
                            .find(|g| g.role() == Some(LinearRole::Attention))
                            .map(|g| full_name(model, g, 0, 0))
                            .unwrap_or_else(|| names.lm_head.to_string())
                    ),
                });
            }
            copies
        }
    };
    let mut modules: Vec<String> = Vec::new();
    for (g, &c) in layout.groups.iter().zip(&copies) {
        if c > 0 && !modules.contains(&g.module) {
            modules.push(g.module.clone());
        }
    }
    Ok(LoraPlacement { copies, modules })
}

/// The top-level prefix of the decoder body's modules in the Hugging Face
/// `*ForCausalLM` class (`model.` for Llama-likes, `transformer.` for GPT-2 and
/// Falcon, `gpt_neox.` for GPT-NeoX); the output head sits at the top level.
fn body_root(family: crate::model::Family) -> &'static str {
    use crate::model::Family;
    match family {
        Family::Gpt2 | Family::Falcon => "transformer.",
        Family::GptNeox => "gpt_neox.",
        _ => "model.",
    }
}

/// The full module name of instance (`layer`, `expert`) of a group.
fn full_name(model: &ModelSpec, g: &crate::params::ParamGroup, layer: u64, expert: u64) -> String {
    if g.role() == Some(LinearRole::LmHead) {
        return g.path.clone();
    }
    let mut out = String::from(body_root(model.family));
    let mut stars = 0;
    for part in g.path.split('.') {
        if !out.ends_with('.') {
            out.push('.');
        }
        if part == "*" {
            out.push_str(&(if stars == 0 { layer } else { expert }).to_string());
            stars += 1;
        } else {
            out.push_str(part);
        }
    }
    out
}

/// How many instances of `g` the anchored regular expression matches.
fn matched_instances(model: &ModelSpec, g: &crate::params::ParamGroup, re: &regex::Regex) -> u64 {
    let stars = g.path.matches('*').count();
    if stars == 0 {
        return if re.is_match(&full_name(model, g, 0, 0)) { g.copies } else { 0 };
    }
    let inner = if stars >= 2 { model.moe.as_ref().map(|m| m.num_experts).unwrap_or(1).max(1) } else { 1 };
    let layers = g.copies / inner;
    let first = model.num_layers.saturating_sub(layers);
    let mut n = 0;
    for l in first..first + layers {
        for e in 0..inner {
            if re.is_match(&full_name(model, g, l, e)) {
                n += 1;
            }
        }
    }
    n
}

/// A learned position table has exactly `max_position_embeddings` rows: a
/// longer sequence cannot run at all (GPT-2: 1024).
fn positions(model: &ModelSpec, field: Field, tokens: u64) -> Result<(), WorkloadError> {
    if model.positional == Positional::Learned && tokens > model.max_position_embeddings {
        return Err(WorkloadError::LearnedPositions {
            field,
            tokens,
            model: model.name.clone(),
            positions: model.max_position_embeddings,
        });
    }
    Ok(())
}

/// The margin is a finite fraction (0.2 = the ×1.2 rule), at most 10.
fn runtime(rt: &RuntimeSetup) -> Result<(), WorkloadError> {
    if !rt.margin.is_finite() || !(0.0..=10.0).contains(&rt.margin) {
        return Err(WorkloadError::Margin { value: rt.margin });
    }
    if !rt.fragmentation.is_finite() || !(0.0..=10.0).contains(&rt.fragmentation) {
        return Err(WorkloadError::Margin { value: rt.fragmentation });
    }
    Ok(())
}

/// Expert parallelism (`--ep`) as the serving engines run it: a MoE model,
/// a serving engine, and — with vLLM's `--enable-expert-parallel` over a TP
/// group — an EP degree equal to TP (vLLM `FusedMoEParallelConfig.make`:
/// `ep_size = dp_size × tp_size`; data-parallel attention is not modelled),
/// at most one rank per routed expert.
fn expert_parallel(model: &ModelSpec, s: &InferenceSetup, par: &Parallelism) -> Result<(), WorkloadError> {
    let ep = par.ep;
    if ep == 0 {
        return Err(WorkloadError::Zero { field: Field::Ep });
    }
    if ep == 1 {
        return Ok(());
    }
    let bad = |reason: String| Err(WorkloadError::ExpertParallel { ep, reason });
    let Some(moe) = model.moe.as_ref().filter(|m| m.num_experts > 0) else {
        return bad(format!("{} has no routed experts to split", model.name));
    };
    if s.serving().is_none() {
        return bad("expert parallelism is modelled as vLLM and SGLang serve it: give --engine vllm or sglang".into());
    }
    if par.tp <= 1 {
        return bad(format!("the experts are split over the tensor-parallel ranks: give --tp {ep} with it"));
    }
    if ep != par.tp.max(1) {
        return bad(format!(
            "the serving engines split the experts over all the ranks of the tensor-parallel group (vLLM: EP = TP × DP; with --dp-attention the TP group spans the data-parallel attention groups): give --ep {}",
            par.tp.max(1)
        ));
    }
    if ep > moe.num_experts {
        return bad(format!("more ranks than the {} routed experts", moe.num_experts));
    }
    Ok(())
}

/// Data-parallel attention (`--dp-attention N`): a MoE model served by
/// vLLM or SGLang with its experts split over every rank (`--ep` = `--tp`),
/// N dividing the TP ranks into whole attention groups (SGLang
/// `compute_dp_attention_world_info`: `attn_tp_size = tp_size // dp_size`,
/// which asserts `tp_size % dp_size == 0`), and a sequence for each group.
fn dp_attention(model: &ModelSpec, s: &InferenceSetup, par: &Parallelism) -> Result<(), WorkloadError> {
    let dp = par.dp_attention;
    if dp == 0 {
        return Err(WorkloadError::Zero { field: Field::DpAttention });
    }
    if dp == 1 {
        return Ok(());
    }
    let bad = |reason: String| Err(WorkloadError::DpAttention { dp, reason });
    if model.moe.as_ref().is_none_or(|m| m.num_experts == 0) {
        return bad(format!(
            "{} has no routed experts: data-parallel attention is modelled for MoE models, whose experts stay split over every rank",
            model.name
        ));
    }
    if s.engine.serving().is_none() {
        return bad(
            "data-parallel attention is modelled as vLLM and SGLang serve it: give --engine vllm or sglang".into()
        );
    }
    let tp = par.tp.max(1);
    if !tp.is_multiple_of(dp) || dp > tp {
        return bad(format!(
            "the {tp} tensor-parallel ranks split into whole attention groups: give a divisor of --tp {tp}"
        ));
    }
    if par.ep != tp {
        return bad(format!("the routed experts stay split over all {tp} ranks: give --ep {tp}"));
    }
    if s.concurrency < dp {
        return bad(format!(
            "each attention group serves its own sequences: --concurrency {} leaves a group idle",
            s.concurrency
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::quant::QuantSpec;

    fn llama() -> ModelSpec {
        ModelSpec::llama_like("tiny", 256, 4, 4, 4, 688, 32000)
    }

    fn infer(s: InferenceSetup, par: Parallelism) -> Result<(), WorkloadError> {
        inference(&llama(), &s, &par, &RuntimeSetup::default())
    }

    /// Megatron-LM's interleaved schedule: 2+ stages, layers in pp × v equal
    /// chunks, micro-batches a multiple of pp (`schedules.py`); serving refuses it.
    #[test]
    fn virtual_stages_follow_megatrons_rules() {
        let m = llama(); // 4 layers
        let par = |pp, v| Parallelism { gpus: pp, pp, virtual_stages: v, ..Parallelism::default() };
        assert_eq!(virtual_stages(&m, &par(2, 2), 4), Ok(())); // 4 layers = 2 × 2 chunks, 4 micro-batches
        assert_eq!(virtual_stages(&m, &par(2, 1), 3), Ok(())); // plain 1F1B: no rule
        for (pp, v, micro) in [(1, 2, 4), (2, 4, 4), (2, 2, 3)] {
            let e = virtual_stages(&m, &par(pp, v), micro).unwrap_err();
            assert_eq!(e.field(), Field::Pp, "{e:?}");
        }
        assert_eq!(infer(InferenceSetup::default(), par(2, 2)).unwrap_err().field(), Field::Pp);
    }

    #[test]
    fn inference_rules_name_their_field() {
        let d = InferenceSetup::default;
        let p = Parallelism::default;
        let field = |r: Result<(), WorkloadError>| r.unwrap_err().field();
        assert_eq!(infer(d(), p()), Ok(()));
        assert_eq!(field(infer(InferenceSetup { batch: 4, concurrency: 2, ..d() }, p())), Field::Batch);
        assert_eq!(field(infer(InferenceSetup { kv_dtype: DType::I4, ..d() }, p())), Field::KvDtype);
        assert_eq!(field(infer(InferenceSetup { weight_dtype: DType::I8, ..d() }, p())), Field::Dtype);
        let g0 = QuantSpec { group_size: Some(0), ..QuantSpec::int(4, 128, DType::F16) };
        assert_eq!(field(infer(InferenceSetup { quant: Some(g0), ..d() }, p())), Field::GroupSize);
        assert_eq!(field(infer(InferenceSetup { block_size: 0, ..d() }, p())), Field::BlockSize);
        assert_eq!(field(infer(InferenceSetup { context: 1 << 40, ..d() }, p())), Field::Context);
        assert_eq!(field(infer(d(), Parallelism { gpus: 2, sharding: Sharding::Zero1, ..p() })), Field::Sharding);
        assert_eq!(field(infer(d(), Parallelism { gpus: 3, tp: 2, ..p() })), Field::Gpus);
        let mut gpt2 = llama();
        gpt2.positional = Positional::Learned;
        gpt2.max_position_embeddings = 1024;
        let e = inference(&gpt2, &InferenceSetup { context: 2048, ..d() }, &p(), &RuntimeSetup::default());
        assert!(matches!(e, Err(WorkloadError::LearnedPositions { field: Field::Context, positions: 1024, .. })));
        let rt = RuntimeSetup { margin: f64::NAN, ..RuntimeSetup::default() };
        assert_eq!(inference(&llama(), &d(), &p(), &rt).unwrap_err().field(), Field::Margin);
    }

    #[test]
    fn batch_limit_is_one_for_both_tasks() {
        use super::super::limits::MAX_SEQUENCES;
        let t = TrainSetup { batch: MAX_SEQUENCES + 1, ..TrainSetup::default() };
        let rt = RuntimeSetup::default();
        let e = training(&llama(), &t, &Parallelism::default(), &rt).unwrap_err();
        assert_eq!(e, WorkloadError::TooLarge { field: Field::Batch, value: MAX_SEQUENCES + 1, limit: MAX_SEQUENCES });
        let s =
            InferenceSetup { batch: MAX_SEQUENCES + 1, concurrency: MAX_SEQUENCES + 1, ..InferenceSetup::default() };
        assert_eq!(infer(s, Parallelism::default()).unwrap_err().field(), Field::Batch);
        let t = TrainSetup { batch: MAX_SEQUENCES, seq: 1, ..TrainSetup::default() };
        assert_eq!(training(&llama(), &t, &Parallelism::default(), &rt), Ok(()));
    }

    #[test]
    fn offload_needs_the_right_stage() {
        assert_eq!(offload_rules(Sharding::Zero2, Offload::Cpu, Offload::None), Ok(()));
        assert_eq!(
            offload_rules(Sharding::Zero2, Offload::Cpu, Offload::Cpu),
            Err(WorkloadError::ParamOffloadNeedsZero3)
        );
        assert_eq!(
            offload_rules(Sharding::None, Offload::Cpu, Offload::None),
            Err(WorkloadError::OptimizerOffloadNeedsZero)
        );
    }

    /// Context parallelism as the engines that run it accept it: Megatron-LM and
    /// torchtitan only, flash/SDPA attention, GPUs a multiple of TP × CP × PP and
    /// the sequence a multiple of 2 × CP (torchtitan `ParallelDims.seq_len_divisor`).
    #[test]
    fn context_parallel_follows_the_engines_rules() {
        let t = |engine, seq, attention| TrainSetup { engine, seq, attention, ..TrainSetup::default() };
        let par = |gpus, tp, cp| Parallelism { gpus, tp, cp, ..Parallelism::default() };
        let ok = t(Engine::Megatron, 8192, AttentionImpl::Sdpa);
        assert_eq!(context_parallel(&ok, &par(8, 2, 4)), Ok(()));
        assert_eq!(context_parallel(&t(Engine::Torchtitan, 8192, AttentionImpl::Sdpa), &par(8, 1, 8)), Ok(()));
        assert_eq!(context_parallel(&t(Engine::Transformers, 8192, AttentionImpl::Sdpa), &par(8, 1, 1)), Ok(()));
        let refused = |t: &TrainSetup, p: &Parallelism, words: &str| {
            let e = context_parallel(t, p).unwrap_err();
            assert_eq!(e.field(), Field::Cp);
            let text = e.to_string();
            assert!(text.contains(words), "{text}");
        };
        refused(&t(Engine::Deepspeed, 8192, AttentionImpl::Sdpa), &par(8, 1, 8), "Ulysses");
        refused(&t(Engine::Transformers, 8192, AttentionImpl::Sdpa), &par(8, 1, 8), "megatron");
        refused(&t(Engine::Megatron, 8192, AttentionImpl::Eager), &par(8, 1, 8), "--attention sdpa");
        refused(&ok, &par(12, 2, 4), "TP 2 × CP 4 × PP 1 = 8");
        refused(&t(Engine::Megatron, 8196, AttentionImpl::Sdpa), &par(8, 1, 4), "multiple of 8");
        assert_eq!(context_parallel(&ok, &par(8, 1, 0)).unwrap_err(), WorkloadError::Zero { field: Field::Cp });
    }

    /// FP8 training where an engine runs it: Megatron-LM and torchtitan, full
    /// training; the Hugging Face engines and LoRA refused naming --precision.
    #[test]
    fn fp8_training_needs_fp8_tensor_cores() {
        // the catalogue's A100 has no fp8_tflops, its H100 has: TransformerEngine's
        // check_fp8_support refuses compute capability below 8.9
        let card = |name: &str, fp8_tflops| crate::GpuSpec {
            id: name.to_lowercase(),
            name: name.into(),
            aliases: vec![],
            memory_mib: 81_559,
            memory_gb: 80.0,
            bandwidth_gbs: 2039.0,
            bf16_tflops: 312.0,
            tf32_tflops: None,
            fp32_tflops: None,
            fp8_tflops,
            nvlink_gbs: None,
            pcie_gen: 4,
            mig_max: 7,
            bf16: true,
            arch: None,
            confirmed: false,
            source: "test".into(),
        };
        let a100 = card("A100 80GB SXM", None);
        let h100 = card("H100 SXM", Some(989.0));
        let fp8 = Task::Train(TrainSetup {
            engine: Engine::Megatron,
            precision: Precision::MixedFp8,
            ..TrainSetup::default()
        });
        let e = runs_on(&a100, &fp8).unwrap_err();
        assert_eq!(e.field(), Field::Precision);
        assert!(
            e.to_string().starts_with("--precision on A100 80GB SXM: FP8 training (mixed-fp8) needs FP8 tensor cores"),
            "{e}"
        );
        assert_eq!(runs_on(&h100, &fp8), Ok(()));
        let bf16 = Task::Train(TrainSetup { precision: Precision::MixedBf16, ..TrainSetup::default() });
        assert_eq!(runs_on(&a100, &bf16), Ok(()));
    }

    #[test]
    fn fp8_training_follows_the_engines_that_run_it() {
        let t = |engine, kind| TrainSetup { engine, kind, precision: Precision::MixedFp8, ..TrainSetup::default() };
        assert_eq!(fp8_training(&t(Engine::Megatron, TrainKind::Full)), Ok(()));
        assert_eq!(fp8_training(&t(Engine::Torchtitan, TrainKind::Full)), Ok(()));
        for bad in [
            t(Engine::Transformers, TrainKind::Full),
            t(Engine::Deepspeed, TrainKind::Full),
            t(Engine::Torchtitan, TrainKind::Lora),
        ] {
            let e = fp8_training(&bad).unwrap_err();
            assert_eq!(e.field(), Field::Precision, "{e}");
            assert!(e.to_string().contains("FP8 training is modelled"), "{e}");
        }
        let bf16 = TrainSetup { precision: Precision::MixedBf16, ..TrainSetup::default() };
        assert_eq!(fp8_training(&bf16), Ok(()));
    }
}
