//! The Megatron-LM launch script of a training plan (`plan --emit megatron`):
//! `megatron_plan.sh`, one `torchrun` per machine running `pretrain_gpt.py`
//! with the model's shape and the plan's layout as flags.
//!
//! Every flag is one of Megatron-LM's own (`megatron/training/arguments.py`,
//! NVIDIA/Megatron-LM main of 2026-08-22, Megatron-Core 0.20.0; many are
//! generated from `TransformerConfig` / `TrainingConfig` fields by its
//! `ArgumentGroupFactory`): `calibration/harness/check_megatron_args.py` runs
//! that file's `parse_args` on the emitted flags (docs/plan.md, "Emitted
//! configs in the tools"). The launcher rules (which plans Megatron runs) are
//! `emit::megatron_rules`; the architecture rules `emit::megatron_expressible`.

use crate::summary::SetupSummary;
use std::fmt::Write;
use vramfit_core::model::{MlpKind, ModelSpec, Positional};
use vramfit_core::train::{Checkpointing, Precision};
use vramfit_core::workload::{megatron_stage_split, StageSplit};
use vramfit_core::{NormKind, Offload, Sharding};

/// What the script is written for beyond the plan: the model, the machines,
/// the sequence length, the job's tokens and the tokenizer (a Hub id or a
/// local directory).
pub struct Script<'a> {
    pub spec: &'a ModelSpec,
    pub machines: u64,
    pub seq: u64,
    pub tokens: Option<u64>,
    pub tokenizer: &'a str,
}

/// The flags of the model's shape (`--num-layers` … the MoE flags).
fn model_flags(spec: &ModelSpec, seq: u64) -> Vec<String> {
    let mut a = vec![
        format!("--num-layers {}", spec.num_layers),
        format!("--hidden-size {}", spec.hidden_size),
        format!("--ffn-hidden-size {}", spec.intermediate_size),
        format!("--num-attention-heads {}", spec.num_heads),
    ];
    if let Some(m) = &spec.mla {
        // Megatron-Core `MLASelfAttention` (megatron/core/transformer/multi_latent_attention.py);
        // with MLA, --qk-layernorm is the norms of the q and kv latents (q_a_layernorm,
        // kv_a_layernorm); flags as Megatron-LM's own DeepSeek-V3 example writes them
        // (examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh)
        a.push("--multi-latent-attention".into());
        if let Some(r) = m.q_lora_rank {
            a.push(format!("--q-lora-rank {r}"));
        }
        a.push(format!("--kv-lora-rank {}", m.kv_lora_rank));
        a.push(format!("--qk-head-dim {}", m.qk_nope_head_dim));
        a.push(format!("--qk-pos-emb-head-dim {}", m.qk_rope_head_dim));
        a.push(format!("--v-head-dim {}", m.v_head_dim));
        a.push("--qk-layernorm".into());
        a.push("--rotary-scaling-factor $ROTARY_SCALING_FACTOR".into());
        a.push("--mscale $MSCALE".into());
        a.push("--mscale-all-dim $MSCALE_ALL_DIM".into());
    } else if spec.head_dim > 0 && spec.head_dim * spec.num_heads != spec.hidden_size {
        a.push(format!("--kv-channels {}", spec.head_dim));
    }
    if spec.num_kv_heads > 0 && spec.num_kv_heads < spec.num_heads {
        a.push("--group-query-attention".into());
        a.push(format!("--num-query-groups {}", spec.num_kv_heads));
    }
    a.push(format!("--seq-length {seq}"));
    a.push(format!("--max-position-embeddings {}", spec.max_position_embeddings.max(seq)));
    match spec.positional {
        Positional::Rotary => {
            a.push("--position-embedding-type rope".into());
            a.push("--rotary-base $ROTARY_BASE".into());
        }
        Positional::Learned => a.push("--position-embedding-type learned_absolute".into()),
    }
    if spec.norm == NormKind::RmsNorm {
        a.push("--normalization RMSNorm".into());
    }
    if spec.mlp == MlpKind::Gated {
        a.push("--swiglu".into());
    }
    if !spec.o_bias && !spec.mlp_bias {
        a.push("--disable-bias-linear".into());
        if spec.qkv_bias {
            a.push("--add-qkv-bias".into());
        }
    }
    if spec.qk_norm && spec.mla.is_none() {
        a.push("--qk-layernorm".into());
    }
    if !spec.tied_embeddings {
        a.push("--untie-embeddings-and-output-weights".into());
    }
    if let Some(m) = spec.moe.as_ref().filter(|m| m.num_experts > 0 && spec.moe_layers() > 0) {
        a.push(format!("--num-experts {}", m.num_experts));
        a.push(format!("--moe-router-topk {}", m.experts_per_token));
        a.push(format!("--moe-ffn-hidden-size {}", m.expert_intermediate));
        if m.shared_experts > 0 {
            // DeepSeek fuses its shared experts into one MLP of n_shared × width
            a.push(format!("--moe-shared-expert-intermediate-size {}", m.shared_intermediate * m.shared_experts));
        }
        if m.dense_layers > 0 {
            let moe = spec.num_layers.saturating_sub(m.dense_layers);
            a.push(format!("--moe-layer-freq \"[0]*{}+[1]*{moe}\"", m.dense_layers));
        }
        if m.router_bias {
            // DeepSeek-V3's router: sigmoid scores with a per-expert correction bias
            // (`e_score_correction_bias`; Megatron `moe_router_score_function`,
            // `moe_router_enable_expert_bias`), group-limited routing and a scaling
            // factor read from the model's config.json
            a.push("--moe-router-score-function sigmoid".into());
            a.push("--moe-router-enable-expert-bias".into());
            a.push("--moe-router-num-groups $MOE_ROUTER_NUM_GROUPS".into());
            a.push("--moe-router-group-topk $MOE_ROUTER_GROUP_TOPK".into());
            a.push("--moe-router-topk-scaling-factor $MOE_ROUTER_TOPK_SCALING_FACTOR".into());
        }
        a.push("--moe-token-dispatcher-type alltoall".into());
        a.push("--moe-grouped-gemm".into());
    }
    a
}

/// The flags of the plan: parallel layout, batch, recompute, precision.
fn plan_flags(s: &SetupSummary, layers: u64, moe: bool, seq: u64, tokens: Option<u64>) -> Vec<String> {
    let mut a = vec![
        format!("--tensor-model-parallel-size {}", s.tp.max(1)),
        format!("--pipeline-model-parallel-size {}", s.pp.max(1)),
    ];
    match megatron_stage_split(layers, s.pp.max(1), s.virtual_stages.max(1)) {
        Some(StageSplit::Uneven { first, last, .. }) => {
            a.push(format!("--decoder-first-pipeline-num-layers {first}"));
            a.push(format!("--decoder-last-pipeline-num-layers {last}"));
        }
        Some(StageSplit::Even { per_stage }) if s.virtual_stages > 1 => {
            // the interleaved schedule (Megatron `validate_args`: layers per stage
            // divisible by layers per virtual stage; the planner chose v dividing them)
            a.push(format!("--num-layers-per-virtual-pipeline-stage {}", per_stage / s.virtual_stages));
        }
        _ => {}
    }
    if s.sequence_parallel {
        a.push("--sequence-parallel".into());
    }
    if s.cp > 1 {
        // megatron/training/arguments.py `--context-parallel-size`; TransformerEngine's ring
        // attention (`--cp-comm-type p2p`, its default) as the time model runs it
        a.push(format!("--context-parallel-size {}", s.cp));
        a.push("--cp-comm-type p2p".into());
    }
    if moe {
        // written either way: Megatron's default when the flag is absent is the TP size
        // (megatron/training/arguments.py `validate_args`:
        // `args.expert_tensor_parallel_size = args.tensor_model_parallel_size`)
        if s.ep > 1 {
            a.push(format!("--expert-model-parallel-size {}", s.ep));
        }
        a.push(format!("--expert-tensor-parallel-size {}", expert_tp(s)));
    }
    if s.sharding == Sharding::Zero1 {
        a.push("--use-distributed-optimizer".into());
    }
    if s.offload_optimizer == Offload::Cpu {
        // Megatron-Core's HybridDeviceOptimizer, as its README gives the flags
        // (megatron/core/optimizer/cpu_offloading/README.md): the whole shard on the
        // host (fraction 1.0), the transfers overlapped with the CPU step
        a.push("--optimizer-cpu-offload".into());
        a.push("--optimizer-offload-fraction 1.0".into());
        a.push("--use-precision-aware-optimizer".into());
        a.push("--overlap-cpu-optimizer-d2h-h2d".into());
    }
    a.push(format!("--micro-batch-size {}", s.micro_batch.max(1)));
    a.push(format!("--global-batch-size {}", s.global_batch.max(1)));
    match s.checkpointing {
        Some(Checkpointing::Full) => {
            a.push("--recompute-granularity full".into());
            a.push("--recompute-method uniform".into());
            a.push("--recompute-num-layers 1".into());
        }
        Some(Checkpointing::Selective) => a.push("--recompute-granularity selective".into()),
        _ => {}
    }
    match s.precision {
        Some(Precision::MixedBf16) => a.push("--bf16".into()),
        Some(Precision::MixedFp16) => a.push("--fp16".into()),
        Some(Precision::MixedFp8) => {
            // FP8 linears over bf16 parameters: megatron/training/arguments.py `--fp8-format hybrid`
            // (TransformerEngine E4M3 forward, E5M2 gradients) with delayed scaling's amax history
            a.push("--bf16".into());
            a.push("--fp8-format hybrid".into());
            a.push("--fp8-amax-history-len 1024".into());
            a.push("--fp8-amax-compute-algo max".into());
        }
        _ => {}
    }
    let per_step = s.global_batch.max(1).saturating_mul(seq.max(1));
    match tokens {
        Some(n) => a.push(format!("--train-iters {}", n.div_ceil(per_step))),
        None => a.push("--train-iters $TRAIN_ITERS".into()),
    }
    a
}

/// The plan's expert-tensor-parallel degree: its own, else what the
/// memory was sized with ([`vramfit_core::Parallelism::expert_tp`]: TP
/// without expert parallelism, 1 with it).
fn expert_tp(s: &SetupSummary) -> u64 {
    match s.etp {
        0 if s.ep > 1 => 1,
        0 => s.tp.max(1),
        e => e,
    }
}

/// `megatron_plan.sh` for the plan `s` (checked by the caller).
pub fn script(s: &SetupSummary, t: &Script) -> String {
    let nodes = t.machines.max(1);
    let per_node = (s.gpus / nodes).max(1);
    let seq = t.seq.max(1);
    let mut flags = model_flags(t.spec, seq);
    let moe = t.spec.moe.as_ref().is_some_and(|m| m.num_experts > 0 && t.spec.moe_layers() > 0);
    flags.extend(plan_flags(s, t.spec.num_layers, moe, seq, t.tokens));
    flags.push("--tokenizer-type HuggingFaceTokenizer".into());
    flags.push(format!("--tokenizer-model {}", t.tokenizer));
    flags.push("--data-path $DATA_PATH".into());
    flags.push("--split 99,1,0".into());
    flags.push("--lr $LR".into());
    flags.push("--lr-decay-style cosine".into());
    let mut o = String::new();
    let _ = writeln!(o, "#!/usr/bin/env bash");
    let _ = writeln!(o, "# megatron_plan.sh, written by `vramfit plan --emit megatron` for {}", t.spec.name);
    let _ = writeln!(
        o,
        "# {} GPU{} on {nodes} machine{} ({per_node} each): TP {} x PP {} x DP {}{}",
        s.gpus,
        if s.gpus == 1 { "" } else { "s" },
        if nodes == 1 { "" } else { "s" },
        s.tp.max(1),
        s.pp.max(1),
        s.dp.max(1),
        if s.ep > 1 || s.etp > 0 {
            format!(", experts over EP {} x ETP {}", s.ep.max(1), expert_tp(s))
        } else {
            String::new()
        }
    );
    if let Some(line) = stage_line(t.spec.num_layers, s) {
        let _ = writeln!(o, "# {line}");
    }
    let _ =
        writeln!(o, "# Run from a Megatron-LM checkout (pretrain_gpt.py; flags of megatron/training/arguments.py).");
    if nodes > 1 {
        let _ = writeln!(
            o,
            "# {nodes} machines: run this on each with NNODES={nodes}, its NODE_RANK (0 on the first … {}) and MASTER_ADDR (the first machine's address).",
            nodes - 1
        );
    } else {
        let _ = writeln!(
            o,
            "# Several machines: NNODES, NODE_RANK and MASTER_ADDR as torchrun's --nnodes/--node_rank/--master_addr."
        );
    }
    let _ = writeln!(o, "# DATA_PATH: a Megatron indexed dataset prefix (tools/preprocess_data.py).");
    let _ = writeln!(
        o,
        "# ROTARY_BASE: the model's rope_theta (its config.json; Llama 3.x: 500000, and --use-rope-scaling for 3.1+); LR: the learning rate (not planned)."
    );
    let _ = writeln!(
        o,
        "# Fine-tuning a Hugging Face checkpoint: convert it to Megatron's format first (Megatron-Bridge, or tools/checkpoint in Megatron-LM) and add --load DIR --finetune."
    );
    for line in model_notes(t.spec) {
        let _ = writeln!(o, "# {line}");
    }
    if t.tokens.is_none() {
        let _ = writeln!(o, "# TRAIN_ITERS: optimizer steps ({} sequences of {seq} tokens each).", s.global_batch);
    }
    let _ = writeln!(o, "set -euo pipefail");
    let _ = writeln!(o, "NNODES=${{NNODES:-{nodes}}}");
    let _ = writeln!(o, "NODE_RANK=${{NODE_RANK:-0}}");
    let _ = writeln!(o, "MASTER_ADDR=${{MASTER_ADDR:-localhost}}");
    let _ = writeln!(o, "MASTER_PORT=${{MASTER_PORT:-6000}}");
    // no default: a wrong rope base trains silently wrong (vramfit's specs
    // carry no rope_theta)
    let _ = writeln!(o, "ROTARY_BASE=${{ROTARY_BASE:?set ROTARY_BASE to the model's rope_theta (config.json)}}");
    for (var, what) in required_model_vars(t.spec) {
        let _ = writeln!(o, "{var}=${{{var}:?set {var} to {what}}}");
    }
    let _ = writeln!(o, "LR=${{LR:-1.0e-4}}");
    let _ = writeln!(o, "DATA_PATH=${{DATA_PATH:?set DATA_PATH to the dataset prefix}}");
    if t.tokens.is_none() {
        let _ = writeln!(o, "TRAIN_ITERS=${{TRAIN_ITERS:?set TRAIN_ITERS to the optimizer steps}}");
    }
    let _ = writeln!(o, "export CUDA_DEVICE_MAX_CONNECTIONS=1");
    let _ = writeln!(
        o,
        "torchrun --nproc-per-node {per_node} --nnodes $NNODES --node_rank $NODE_RANK --master_addr $MASTER_ADDR --master_port $MASTER_PORT \\"
    );
    let _ = write!(o, "  pretrain_gpt.py");
    for f in &flags {
        let _ = write!(o, " \\\n  {f}");
    }
    o.push('\n');
    o
}

/// The script's line on how the layers sit on the stages, when it is not
/// plain `layers / pp` per stage.
fn stage_line(layers: u64, s: &SetupSummary) -> Option<String> {
    match megatron_stage_split(layers, s.pp.max(1), s.virtual_stages.max(1))? {
        StageSplit::Uneven { first, per_stage, last } => Some(format!(
            "{layers} layers on {} stages: {first} on the first, {per_stage} on each of the {} middle ones, {last} on the last (the fullest stage is what was sized)",
            s.pp,
            s.pp.saturating_sub(2)
        )),
        StageSplit::Even { per_stage } if s.virtual_stages > 1 => Some(format!(
            "interleaved pipeline: {} virtual stages per rank of {} layers each ({per_stage} layers per rank)",
            s.virtual_stages,
            per_stage / s.virtual_stages
        )),
        StageSplit::Even { .. } => None,
    }
}

/// Settings of the model the script takes from its config.json rather than
/// guess (a wrong one trains silently wrong): (variable, what to set it to).
fn required_model_vars(spec: &ModelSpec) -> Vec<(&'static str, &'static str)> {
    let mut v = Vec::new();
    if spec.mla.is_some() {
        v.push(("ROTARY_SCALING_FACTOR", "rope_scaling.factor of config.json (DeepSeek-V3: 40)"));
        v.push(("MSCALE", "rope_scaling.mscale of config.json (DeepSeek-V3: 1.0)"));
        v.push(("MSCALE_ALL_DIM", "rope_scaling.mscale_all_dim of config.json (DeepSeek-V3: 1.0)"));
    }
    if spec.moe.as_ref().is_some_and(|m| m.router_bias) {
        v.push(("MOE_ROUTER_NUM_GROUPS", "n_group of config.json (DeepSeek-V3: 8)"));
        v.push(("MOE_ROUTER_GROUP_TOPK", "topk_group of config.json (DeepSeek-V3: 4)"));
        v.push(("MOE_ROUTER_TOPK_SCALING_FACTOR", "routed_scaling_factor of config.json (DeepSeek-V3: 2.5)"));
    }
    v
}

/// What the script leaves out of the model, said in its header.
fn model_notes(spec: &ModelSpec) -> Vec<String> {
    let mut v = Vec::new();
    for (var, what) in required_model_vars(spec) {
        v.push(format!("{var}: {what}."));
    }
    if spec.mtp_layers > 0 {
        v.push(format!(
            "The checkpoint's {} multi-token-prediction layer(s) are not trained here (no --mtp-num-layers): neither their memory nor their time is in this plan.",
            spec.mtp_layers
        ));
    }
    v
}
