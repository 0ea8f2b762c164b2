//! DeepSpeed AutoEP: expert parallelism for a Hugging Face MoE model under
//! DeepSpeed, set in the DeepSpeed config only (`"expert_parallel": {"enabled":
//! true, "autoep_size": N, "preset_model": …}`; DeepSpeed PR #7938 "Add AutoEP",
//! first released in v0.19.2; docs/code-docs/source/autoep.rst).
//!
//! During `deepspeed.initialize()` AutoEP replaces each detected MoE block with
//! `AutoEPMoELayer` (deepspeed/module_inject/auto_ep_layer.py): the router runs
//! on every rank, the routed (token, expert) rows go to the rank holding the
//! expert by an all-to-all, the rank's `num_experts / autoep_size` local experts
//! run as grouped GEMMs (`torch._grouped_mm`, TorchTitan's kernels), and a second
//! all-to-all brings the outputs back. Expert parameters reduce and shard over
//! the expert-data-parallel group (world ÷ autoep_size ranks), the router,
//! attention, shared experts and embeddings over all ranks.

use super::{Engine, Offload, Optimizer, Parallelism, Sharding, TrainKind, TrainSetup};
use crate::model::{Family, ModelSpec};

/// The AutoEP preset (`expert_parallel.preset_model`) that covers `spec`, or
/// why none does. Presets and the `model_type`s each accepts from
/// deepspeed/module_inject/auto_ep_presets/*.py (`hf_model_types`):
/// `mixtral` (mixtral), `qwen3_moe` (qwen3_moe, qwen2_moe), `qwen3_5_moe`
/// (qwen3_5_moe_text), `deepseek_v2` (deepseek_v2), `deepseek_v3`
/// (deepseek_v3). vramfit's DeepSeek family also holds DeepSeek-V3.2 and
/// GLM-5 (their DSA indexer: model types deepseek_v32 and glm_moe_dsa, no
/// preset) and Kimi-K2 (kimi_k2, no preset, but not told apart from
/// DeepSeek-V3 by its shape); V2 and V3 are told apart by V3's routing
/// correction bias (`e_score_correction_bias`, absent from V2).
pub fn autoep_preset(spec: &ModelSpec) -> Result<&'static str, String> {
    let routed = spec.moe.as_ref().filter(|m| m.num_experts > 0 && spec.moe_layers() > 0);
    let Some(moe) = routed else {
        return Err(format!("{} has no routed experts to split", spec.name));
    };
    if spec.vision.is_some() {
        // the presets match `model.layers.N.mlp`: a vision-language model's text
        // layers sit under `model.language_model`
        return Err(format!(
            "{} is a vision-language model; AutoEP's presets match a text model's decoder layers",
            spec.name
        ));
    }
    match spec.family {
        Family::Mixtral => Ok("mixtral"),
        Family::Qwen3Moe | Family::Qwen2Moe => Ok("qwen3_moe"),
        Family::Qwen35 => Ok("qwen3_5_moe"),
        Family::DeepseekV3 if spec.indexer.is_some() => Err(format!(
            "{} uses DeepSeek sparse attention (model type deepseek_v32 / glm_moe_dsa): AutoEP has no preset for it",
            spec.name
        )),
        Family::DeepseekV3 if moe.router_bias => Ok("deepseek_v3"),
        Family::DeepseekV3 => Ok("deepseek_v2"),
        f => Err(format!(
            "AutoEP has presets for Mixtral, Qwen2/Qwen3-MoE, Qwen3.5-MoE, DeepSeek-V2 and DeepSeek-V3; not for the {} family",
            f.name()
        )),
    }
}

/// Is a training job with `par` run under DeepSpeed, so that `--ep` means
/// AutoEP? `--engine deepspeed`, or the Hugging Face Trainer (`--engine
/// transformers`, the default) sharding with a DeepSpeed ZeRO config (not `--fsdp`).
pub fn runs_autoep(t: &TrainSetup, par: &Parallelism) -> bool {
    match t.engine {
        Engine::Deepspeed => true,
        Engine::Transformers => !par.fsdp,
        _ => false,
    }
}

/// The rules of AutoEP for `--ep` > 1 (deepspeed/module_inject/auto_ep_config.py
/// `validate_autoep_config`, auto_ep_folding.py `validate_folding_global` and
/// `build_folding_spec`), as modelled here; `Err` is the reason to show.
pub fn autoep_rules(spec: &ModelSpec, t: &TrainSetup, par: &Parallelism) -> Result<(), String> {
    let ep = par.ep;
    // a model AutoEP has no preset for still trains with EP under Megatron
    let preset = autoep_preset(spec).map_err(|e| format!("{e} (Megatron's EP: --engine megatron)"))?;
    let experts = spec.moe.as_ref().map(|m| m.num_experts).unwrap_or(0);
    if !experts.is_multiple_of(ep) {
        return Err(format!(
            "DeepSpeed AutoEP needs autoep_size to divide the {experts} routed experts (preset {preset})"
        ));
    }
    if !par.gpus.is_multiple_of(ep) {
        // build_folding_spec: the expert width must tile the ranks (edp = world / ep)
        return Err(format!("{} GPUs are not a multiple of the expert-parallel size: AutoEP's expert-data-parallel groups are world ÷ autoep_size ranks", par.gpus));
    }
    if par.tp > 1 || par.pp > 1 {
        return Err("DeepSpeed AutoEP is modelled without tensor or pipeline parallelism (AutoEP + AutoTP folding is not modelled)".into());
    }
    if t.kind != TrainKind::Full {
        return Err("DeepSpeed AutoEP replaces the MoE blocks with its own grouped-GEMM experts; it is modelled for full fine-tuning (--task train), not LoRA/QLoRA adapters on them".into());
    }
    if !matches!(t.optimizer, Optimizer::AdamW | Optimizer::Sgd | Optimizer::SgdMomentum | Optimizer::Lion) {
        // deepspeed.initialize() swaps the MoE blocks (engine.py `_configure_expert_parallel`)
        // before it builds its own optimizer from the swapped model (`_configure_optimizer`);
        // an optimizer built beforehand (the Trainer's --optim for bitsandbytes or Adafactor)
        // holds the replaced experts' old parameters
        return Err(format!(
            "DeepSpeed AutoEP replaces the experts' parameters inside deepspeed.initialize(), so the optimizer must be one DeepSpeed builds from its config after that (AdamW, SGD, Lion), not the {} the Trainer builds before it",
            t.optimizer.name()
        ));
    }
    if par.sharding == Sharding::Zero3 {
        // PR #7938 shipped ZeRO 0/1/2; ZeRO-3 came with PR #8060 (v0.19.3), which
        // partitions expert parameters over the expert replica groups: not modelled
        return Err("AutoEP with ZeRO-3 (DeepSpeed ≥ 0.19.3, PR #8060; AutoEP itself, PR #7938, shipped ZeRO 0/1/2 only) is not modelled: use --zero 0, 1 or 2".into());
    }
    if par.offload_optimizer != Offload::None || par.offload_params != Offload::None {
        return Err("ZeRO-Offload with AutoEP is not modelled (the expert states' host share follows the expert-data-parallel groups)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_follow_deepspeed_model_types() {
        // auto_ep_presets/*.py hf_model_types: Qwen2-MoE goes to the qwen3_moe preset
        let mut m = ModelSpec::llama_like("moe", 512, 4, 8, 2, 1376, 32000);
        assert!(autoep_preset(&m).is_err(), "a dense model has no experts");
        m.moe = Some(crate::model::MoeSpec {
            num_experts: 8,
            experts_per_token: 2,
            expert_intermediate: 1376,
            shared_experts: 0,
            shared_intermediate: 0,
            shared_expert_gate: false,
            dense_layers: 0,
            router_bias: false,
            router_linear_bias: false,
        });
        m.family = Family::Qwen2Moe;
        assert_eq!(autoep_preset(&m), Ok("qwen3_moe"));
        m.family = Family::DeepseekV3;
        assert_eq!(autoep_preset(&m), Ok("deepseek_v2"));
        m.moe.as_mut().unwrap().router_bias = true;
        assert_eq!(autoep_preset(&m), Ok("deepseek_v3"));
        m.family = Family::GptOss;
        assert!(autoep_preset(&m).unwrap_err().contains("gpt_oss"));
    }
}
