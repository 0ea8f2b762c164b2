//! Launch configurations for a chosen training plan, for real engines:
//! a DeepSpeed `ds_config.json`, a `torchrun` FSDP launch (Hugging Face
//! Trainer flags), an `accelerate` config YAML. Only keys the tools
//! document are written (tests check them against those lists):
//!
//! - DeepSpeed: <https://www.deepspeed.ai/docs/config-json/>
//! - torchrun: <https://pytorch.org/docs/stable/elastic/run.html>
//! - transformers `TrainingArguments` (`--fsdp`, `--fsdp_config`, …)
//! - accelerate: `accelerate config` output (`ClusterConfig` fields)
//!
//! Values the plan does not decide (learning rate, the script name) are
//! placeholders named as such in the output.

use serde_json::{json, Map, Value};
use std::fmt::Write;
use vramfit_core::hf::layer_class;
use vramfit_core::plan::{Method, SetupSummary};
use vramfit_core::train::{Checkpointing, Optimizer};
use vramfit_core::workload::validate::offload_rules;
use vramfit_core::{DType, Family, Sharding};

/// Why a config cannot be written.
#[derive(Debug, Clone, PartialEq)]
pub enum EmitError {
    /// the plan is for inference
    NotTraining,
    /// the plan uses something the tool cannot express (the message says what)
    Unsupported(String),
}

impl std::fmt::Display for EmitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EmitError::NotTraining => f.write_str("--emit writes training launch configs; this plan is for inference"),
            EmitError::Unsupported(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for EmitError {}

fn train_only(s: &SetupSummary) -> Result<(), EmitError> {
    if !s.method.is_training() {
        return Err(EmitError::NotTraining);
    }
    Ok(())
}

/// The 16-bit dtype the plan computes in (`None`: fp32).
fn half(s: &SetupSummary) -> Option<DType> {
    s.precision.map(|p| p.compute_dtype()).filter(|d| matches!(d, DType::BF16 | DType::F16))
}

fn stage(s: &SetupSummary) -> u64 {
    s.sharding.stage().into()
}

fn full_checkpointing(s: &SetupSummary) -> bool {
    s.checkpointing == Some(Checkpointing::Full)
}

/// Learning rate written where a config needs one (a placeholder: set yours).
pub const PLACEHOLDER_LR: f64 = 2e-5;

/// DeepSpeed `ds_config.json` for the plan.
pub fn deepspeed(s: &SetupSummary) -> Result<String, EmitError> {
    train_only(s)?;
    if s.tp > 1 || s.pp > 1 {
        return Err(EmitError::Unsupported(format!(
            "the plan uses TP {} × PP {}: DeepSpeed's config has no tensor/pipeline split for Hugging Face models; use Megatron-DeepSpeed, or pick a plan without TP/PP",
            s.tp, s.pp
        )));
    }
    let mut root = Map::new();
    root.insert("train_batch_size".into(), json!(s.global_batch));
    root.insert("train_micro_batch_size_per_gpu".into(), json!(s.micro_batch));
    root.insert("gradient_accumulation_steps".into(), json!(s.grad_accum));
    root.insert("gradient_clipping".into(), json!(1.0));
    match half(s) {
        Some(DType::BF16) => {
            root.insert("bf16".into(), json!({"enabled": true}));
        }
        Some(_) => {
            root.insert(
                "fp16".into(),
                json!({"enabled": true, "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1}),
            );
        }
        None => {}
    }
    let st = stage(s);
    let mut zero = Map::new();
    zero.insert("stage".into(), json!(st));
    if st >= 1 {
        zero.insert("overlap_comm".into(), json!(true));
        zero.insert("contiguous_gradients".into(), json!(true));
        zero.insert("reduce_bucket_size".into(), json!(500_000_000u64));
    }
    if st == 2 {
        zero.insert("allgather_partitions".into(), json!(true));
        zero.insert("allgather_bucket_size".into(), json!(500_000_000u64));
        zero.insert("reduce_scatter".into(), json!(true));
    }
    if st == 3 {
        zero.insert("stage3_prefetch_bucket_size".into(), json!(50_000_000u64));
        zero.insert("stage3_param_persistence_threshold".into(), json!(100_000u64));
        zero.insert("stage3_max_live_parameters".into(), json!(1_000_000_000u64));
        zero.insert("stage3_gather_16bit_weights_on_model_save".into(), json!(true));
    }
    // the same offload rules the estimator checks a workload against
    offload_rules(s.sharding, s.offload_optimizer, s.offload_params)
        .map_err(|e| EmitError::Unsupported(e.to_string()))?;
    let offload = s.offload_optimizer.is_some();
    if offload {
        zero.insert("offload_optimizer".into(), json!({"device": s.offload_optimizer.key(), "pin_memory": true}));
    }
    if s.offload_params.is_some() {
        zero.insert("offload_param".into(), json!({"device": s.offload_params.key(), "pin_memory": true}));
    }
    root.insert("zero_optimization".into(), Value::Object(zero));
    if offload {
        // ZeRO-Offload runs DeepSpeed's CPU Adam: the optimizer must be declared here
        root.insert(
            "optimizer".into(),
            json!({"type": "AdamW", "params": {"lr": PLACEHOLDER_LR, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.0}}),
        );
    }
    root.insert("steps_per_print".into(), json!(100));
    root.insert("wall_clock_breakdown".into(), json!(false));
    serde_json::to_string_pretty(&Value::Object(root)).map_err(|e| EmitError::Unsupported(e.to_string()))
}

/// FSDP sharding strategy for the plan (torch `ShardingStrategy` names).
fn fsdp_strategy(s: &SetupSummary) -> Result<Option<&'static str>, EmitError> {
    if s.offload_optimizer.is_some() && !s.offload_params.is_some() {
        return Err(EmitError::Unsupported(
            "FSDP cannot offload the optimizer alone (its CPU offload moves parameters, gradients and optimizer states together): use --emit deepspeed".into(),
        ));
    }
    Ok(match s.sharding {
        Sharding::Zero3 => Some("FULL_SHARD"),
        // FSDP has no optimizer-only sharding: SHARD_GRAD_OP shards grads + states
        Sharding::Zero2 | Sharding::Zero1 => Some("SHARD_GRAD_OP"),
        Sharding::None => None,
    })
}

/// A `torchrun` launch with Hugging Face Trainer FSDP flags, as a shell snippet.
pub fn torchrun(s: &SetupSummary, family: Family, machines: u64) -> Result<String, EmitError> {
    train_only(s)?;
    if s.tp > 1 || s.pp > 1 {
        return Err(EmitError::Unsupported(format!(
            "the plan uses TP {} × PP {}: FSDP through the Trainer does not split layers; pick a plan without TP/PP",
            s.tp, s.pp
        )));
    }
    let strategy = fsdp_strategy(s)?;
    let nodes = machines.max(1);
    let per_node = (s.gpus / nodes).max(1);
    let mut o = String::new();
    let mut cfg = Map::new();
    if strategy.is_some() {
        match layer_class(family) {
            Some(c) => {
                cfg.insert("transformer_layer_cls_to_wrap".into(), json!([c]));
            }
            None => {
                cfg.insert("min_num_params".into(), json!(100_000_000u64));
            }
        }
        cfg.insert("backward_prefetch".into(), json!("backward_pre"));
        cfg.insert("forward_prefetch".into(), json!(false));
        cfg.insert("use_orig_params".into(), json!(true));
        cfg.insert("sync_module_states".into(), json!(true));
        cfg.insert("cpu_ram_efficient_loading".into(), json!(true));
        cfg.insert("activation_checkpointing".into(), json!(full_checkpointing(s)));
        let text =
            serde_json::to_string_pretty(&Value::Object(cfg)).map_err(|e| EmitError::Unsupported(e.to_string()))?;
        let _ = writeln!(o, "cat > fsdp_config.json <<'EOF'\n{text}\nEOF");
    }
    let mut args: Vec<String> = vec!["torchrun".into()];
    if nodes == 1 {
        args.push("--standalone".into());
        args.push("--nnodes=1".into());
    } else {
        args.push(format!("--nnodes={nodes}"));
        args.push("--node-rank=$NODE_RANK".into());
        args.push("--rdzv-backend=c10d".into());
        args.push("--rdzv-endpoint=$MASTER_ADDR:29500".into());
    }
    args.push(format!("--nproc-per-node={per_node}"));
    args.push("train.py".into());
    if let Some(st) = strategy {
        let mut mode =
            if st == "FULL_SHARD" { "full_shard auto_wrap".to_string() } else { "shard_grad_op auto_wrap".to_string() };
        if s.offload_params.is_some() {
            mode.push_str(" offload");
        }
        args.push(format!("--fsdp '{mode}'"));
        args.push("--fsdp_config fsdp_config.json".into());
    }
    args.push(format!("--per_device_train_batch_size {}", s.micro_batch));
    args.push(format!("--gradient_accumulation_steps {}", s.grad_accum));
    match half(s) {
        Some(DType::BF16) => args.push("--bf16".into()),
        Some(_) => args.push("--fp16".into()),
        None => {}
    }
    // with FSDP, checkpointing goes through fsdp_config (activation_checkpointing)
    if full_checkpointing(s) && strategy.is_none() {
        args.push("--gradient_checkpointing".into());
    }
    // transformers' `--optim` names
    match s.optimizer {
        Some(Optimizer::AdamW8bit) => args.push("--optim adamw_bnb_8bit".into()),
        Some(Optimizer::PagedAdamW8bit) => args.push("--optim paged_adamw_8bit".into()),
        _ => args.push("--optim adamw_torch".into()),
    }
    if matches!(s.method, Method::Lora | Method::Qlora) {
        let _ = writeln!(
            o,
            "# {}: train.py must wrap the model with PEFT (LoraConfig{})",
            s.method.name(),
            if s.method == Method::Qlora { ", BitsAndBytesConfig(load_in_4bit=True)" } else { "" }
        );
    }
    let _ = writeln!(o, "# train.py: your Hugging Face Trainer script (it must accept TrainingArguments flags)");
    o.push_str(&args.join(" \\\n  "));
    o.push('\n');
    Ok(o)
}

fn yaml_scalar(v: &Value) -> String {
    match v {
        Value::String(s) => {
            if s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !["yes", "no", "true", "false", "null", "on", "off"].contains(&s.to_ascii_lowercase().as_str())
                && !s.chars().next().is_some_and(|c| c.is_ascii_digit())
            {
                s.clone()
            } else {
                format!("'{}'", s.replace('\'', "''"))
            }
        }
        other => other.to_string(),
    }
}

fn yaml(map: &Map<String, Value>, indent: usize, out: &mut String) {
    for (k, v) in map {
        match v {
            Value::Object(m) => {
                let _ = writeln!(out, "{:indent$}{k}:", "");
                yaml(m, indent + 2, out);
            }
            other => {
                let _ = writeln!(out, "{:indent$}{k}: {}", "", yaml_scalar(other));
            }
        }
    }
}

/// An `accelerate` config YAML (`accelerate launch --config_file …`).
pub fn accelerate(s: &SetupSummary, family: Family, machines: u64) -> Result<String, EmitError> {
    train_only(s)?;
    if s.tp > 1 || s.pp > 1 {
        return Err(EmitError::Unsupported(format!(
            "the plan uses TP {} × PP {}: pick a plan without TP/PP for accelerate",
            s.tp, s.pp
        )));
    }
    let st = stage(s);
    // DeepSpeed when FSDP cannot express the plan (ZeRO-1, optimizer-only offload)
    let use_ds = st == 1 || (s.offload_optimizer.is_some() && !s.offload_params.is_some());
    let mut m = Map::new();
    m.insert("compute_environment".into(), json!("LOCAL_MACHINE"));
    m.insert("debug".into(), json!(false));
    let dist = if use_ds {
        "DEEPSPEED"
    } else if st >= 2 {
        "FSDP"
    } else if s.gpus > 1 {
        "MULTI_GPU"
    } else {
        "NO"
    };
    m.insert("distributed_type".into(), json!(dist));
    if dist == "DEEPSPEED" {
        let mut d = Map::new();
        d.insert("gradient_accumulation_steps".into(), json!(s.grad_accum));
        d.insert("gradient_clipping".into(), json!(1.0));
        d.insert("offload_optimizer_device".into(), json!(s.offload_optimizer.key()));
        d.insert("offload_param_device".into(), json!(s.offload_params.key()));
        d.insert("zero3_init_flag".into(), json!(st == 3));
        d.insert("zero3_save_16bit_model".into(), json!(st == 3));
        d.insert("zero_stage".into(), json!(st));
        m.insert("deepspeed_config".into(), Value::Object(d));
    }
    if dist == "FSDP" {
        let mut f = Map::new();
        f.insert("fsdp_activation_checkpointing".into(), json!(full_checkpointing(s)));
        match layer_class(family) {
            Some(c) => {
                f.insert("fsdp_auto_wrap_policy".into(), json!("TRANSFORMER_BASED_WRAP"));
                f.insert("fsdp_transformer_layer_cls_to_wrap".into(), json!(c));
            }
            None => {
                f.insert("fsdp_auto_wrap_policy".into(), json!("SIZE_BASED_WRAP"));
                f.insert("fsdp_min_num_params".into(), json!(100_000_000u64));
            }
        }
        f.insert("fsdp_backward_prefetch".into(), json!("BACKWARD_PRE"));
        f.insert("fsdp_cpu_ram_efficient_loading".into(), json!(true));
        f.insert("fsdp_forward_prefetch".into(), json!(false));
        f.insert("fsdp_offload_params".into(), json!(s.offload_params.is_some()));
        f.insert("fsdp_sharding_strategy".into(), json!(if st == 3 { "FULL_SHARD" } else { "SHARD_GRAD_OP" }));
        f.insert("fsdp_state_dict_type".into(), json!("SHARDED_STATE_DICT"));
        f.insert("fsdp_sync_module_states".into(), json!(true));
        f.insert("fsdp_use_orig_params".into(), json!(true));
        m.insert("fsdp_config".into(), Value::Object(f));
    }
    m.insert("downcast_bf16".into(), json!("no"));
    m.insert("machine_rank".into(), json!(0));
    m.insert("main_training_function".into(), json!("main"));
    m.insert("mixed_precision".into(), json!(half(s).map(DType::name).unwrap_or("no")));
    m.insert("num_machines".into(), json!(machines.max(1)));
    m.insert("num_processes".into(), json!(s.gpus.max(1)));
    m.insert("rdzv_backend".into(), json!("static"));
    m.insert("same_network".into(), json!(true));
    m.insert("tpu_env".into(), json!([]));
    m.insert("tpu_use_cluster".into(), json!(false));
    m.insert("tpu_use_sudo".into(), json!(false));
    m.insert("use_cpu".into(), json!(false));
    let mut out = String::new();
    // tpu_env is a list: write it inline
    let mut plain = m.clone();
    plain.remove("tpu_env");
    yaml(&plain, 0, &mut out);
    out.push_str("tpu_env: []\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use vramfit_core::train::Precision;
    use vramfit_core::Offload;
    use Offload::{Cpu, None as NoOffload};
    use Sharding::{Zero1, Zero2, Zero3};

    /// Top-level keys of https://www.deepspeed.ai/docs/config-json/ (the subset a plan can need and more).
    const DS_TOP: &[&str] = &[
        "train_batch_size",
        "train_micro_batch_size_per_gpu",
        "gradient_accumulation_steps",
        "optimizer",
        "scheduler",
        "fp16",
        "bf16",
        "amp",
        "gradient_clipping",
        "zero_optimization",
        "steps_per_print",
        "wall_clock_breakdown",
        "activation_checkpointing",
        "communication_data_type",
        "prescale_gradients",
        "gradient_predivide_factor",
        "zero_allow_untested_optimizer",
    ];
    const DS_ZERO: &[&str] = &[
        "stage",
        "allgather_partitions",
        "allgather_bucket_size",
        "overlap_comm",
        "reduce_scatter",
        "reduce_bucket_size",
        "contiguous_gradients",
        "offload_param",
        "offload_optimizer",
        "stage3_max_live_parameters",
        "stage3_max_reuse_distance",
        "stage3_prefetch_bucket_size",
        "stage3_param_persistence_threshold",
        "stage3_gather_16bit_weights_on_model_save",
        "sub_group_size",
        "round_robin_gradients",
    ];
    const DS_OFFLOAD: &[&str] =
        &["device", "nvme_path", "pin_memory", "buffer_count", "buffer_size", "max_in_cpu", "ratio", "fast_init"];
    const DS_FP16: &[&str] = &[
        "enabled",
        "auto_cast",
        "loss_scale",
        "initial_scale_power",
        "loss_scale_window",
        "hysteresis",
        "consecutive_hysteresis",
        "min_loss_scale",
    ];
    /// accelerate `ClusterConfig` fields (accelerate/commands/config/config_args.py).
    const ACC_TOP: &[&str] = &[
        "compute_environment",
        "distributed_type",
        "mixed_precision",
        "use_cpu",
        "debug",
        "num_processes",
        "machine_rank",
        "num_machines",
        "gpu_ids",
        "main_process_ip",
        "main_process_port",
        "rdzv_backend",
        "same_network",
        "main_training_function",
        "enable_cpu_affinity",
        "deepspeed_config",
        "fsdp_config",
        "megatron_lm_config",
        "downcast_bf16",
        "tpu_name",
        "tpu_zone",
        "tpu_use_cluster",
        "tpu_use_sudo",
        "tpu_env",
        "dynamo_config",
    ];
    const ACC_DS: &[&str] = &[
        "deepspeed_config_file",
        "gradient_accumulation_steps",
        "gradient_clipping",
        "offload_optimizer_device",
        "offload_param_device",
        "offload_optimizer_nvme_path",
        "offload_param_nvme_path",
        "zero3_init_flag",
        "zero3_save_16bit_model",
        "zero_stage",
        "deepspeed_multinode_launcher",
        "deepspeed_hostfile",
    ];
    const ACC_FSDP: &[&str] = &[
        "fsdp_activation_checkpointing",
        "fsdp_auto_wrap_policy",
        "fsdp_backward_prefetch",
        "fsdp_cpu_ram_efficient_loading",
        "fsdp_forward_prefetch",
        "fsdp_min_num_params",
        "fsdp_offload_params",
        "fsdp_sharding_strategy",
        "fsdp_state_dict_type",
        "fsdp_sync_module_states",
        "fsdp_transformer_layer_cls_to_wrap",
        "fsdp_use_orig_params",
        "fsdp_version",
    ];
    /// torchrun options (torch/distributed/run.py) and the Trainer flags we write.
    const TORCHRUN: &[&str] = &[
        "--standalone",
        "--nnodes",
        "--nproc-per-node",
        "--node-rank",
        "--rdzv-backend",
        "--rdzv-endpoint",
        "--master-port",
    ];
    const TRAINER: &[&str] = &[
        "--fsdp",
        "--fsdp_config",
        "--per_device_train_batch_size",
        "--gradient_accumulation_steps",
        "--bf16",
        "--fp16",
        "--gradient_checkpointing",
        "--optim",
    ];
    /// transformers `fsdp_config` keys.
    const TRAINER_FSDP: &[&str] = &[
        "min_num_params",
        "transformer_layer_cls_to_wrap",
        "backward_prefetch",
        "forward_prefetch",
        "limit_all_gathers",
        "use_orig_params",
        "sync_module_states",
        "cpu_ram_efficient_loading",
        "activation_checkpointing",
    ];

    fn setup(sharding: Sharding, gpus: u64, off_opt: Offload, off_par: Offload) -> SetupSummary {
        SetupSummary {
            method: Method::Full,
            precision: Some(Precision::MixedBf16),
            optimizer: Some(Optimizer::AdamW),
            checkpointing: Some(Checkpointing::Full),
            micro_batch: 2,
            grad_accum: 4,
            global_batch: 2 * 4 * gpus,
            gpus,
            tp: 1,
            pp: 1,
            dp: gpus,
            replicas: 1,
            sharding,
            offload_optimizer: off_opt,
            offload_params: off_par,
            weights: None,
            kv_dtype: None,
        }
    }

    fn keys_in(v: &Value, allowed: &[&str], what: &str) {
        for k in v.as_object().unwrap_or_else(|| panic!("{what} is not an object")).keys() {
            assert!(allowed.contains(&k.as_str()), "{what}: `{k}` is not a documented key");
        }
    }

    #[test]
    fn deepspeed_configs_parse_back_with_documented_keys() {
        for (sh, opt, par) in [
            (Zero2, NoOffload, NoOffload),
            (Zero3, Cpu, Cpu),
            (Zero2, Cpu, NoOffload),
            (Sharding::None, NoOffload, NoOffload),
        ] {
            let s = setup(sh, 8, opt, par);
            let text = deepspeed(&s).unwrap();
            let v: Value = serde_json::from_str(&text).unwrap();
            keys_in(&v, DS_TOP, "ds_config");
            keys_in(&v["zero_optimization"], DS_ZERO, "zero_optimization");
            // DeepSpeed asserts train_batch_size = micro × accum × world size (no TP/PP here)
            assert_eq!(
                v["train_batch_size"].as_u64().unwrap(),
                v["train_micro_batch_size_per_gpu"].as_u64().unwrap()
                    * v["gradient_accumulation_steps"].as_u64().unwrap()
                    * 8
            );
            assert_eq!(v["bf16"]["enabled"], json!(true));
            assert_eq!(v["zero_optimization"]["stage"].as_u64().unwrap(), stage(&s));
            if opt != NoOffload {
                keys_in(&v["zero_optimization"]["offload_optimizer"], DS_OFFLOAD, "offload_optimizer");
                assert_eq!(v["zero_optimization"]["offload_optimizer"]["device"], json!("cpu"));
                assert_eq!(v["optimizer"]["type"], json!("AdamW"));
            }
            if par != NoOffload {
                keys_in(&v["zero_optimization"]["offload_param"], DS_OFFLOAD, "offload_param");
            }
        }
        let mut s = setup(Zero2, 2, NoOffload, NoOffload);
        s.precision = Some(Precision::MixedFp16);
        let v: Value = serde_json::from_str(&deepspeed(&s).unwrap()).unwrap();
        keys_in(&v["fp16"], DS_FP16, "fp16");
        assert!(v.get("bf16").is_none());
    }

    #[test]
    fn deepspeed_refuses_what_it_cannot_express() {
        let mut s = setup(Zero2, 8, NoOffload, NoOffload);
        s.tp = 2;
        assert!(matches!(deepspeed(&s), Err(EmitError::Unsupported(_))));
        let s = setup(Zero2, 8, NoOffload, Cpu);
        assert!(matches!(deepspeed(&s), Err(EmitError::Unsupported(m)) if m.contains("stage 3")));
        let mut s = setup(Sharding::None, 1, NoOffload, NoOffload);
        s.method = Method::Inference;
        assert_eq!(deepspeed(&s), Err(EmitError::NotTraining));
    }

    #[test]
    fn accelerate_yaml_parses_back_with_documented_keys() {
        for (sh, opt, par, want) in [
            (Zero3, NoOffload, NoOffload, "FSDP"),
            (Zero2, NoOffload, NoOffload, "FSDP"),
            (Zero1, NoOffload, NoOffload, "DEEPSPEED"),
            (Zero2, Cpu, NoOffload, "DEEPSPEED"),
            (Zero3, Cpu, Cpu, "FSDP"),
            (Sharding::None, NoOffload, NoOffload, "MULTI_GPU"),
        ] {
            let text = accelerate(&setup(sh, 8, opt, par), Family::Llama, 1).unwrap();
            let v: BTreeMap<String, serde_json::Value> =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            let v = Value::Object(v.into_iter().collect());
            keys_in(&v, ACC_TOP, "accelerate config");
            assert_eq!(v["distributed_type"], json!(want), "{text}");
            assert_eq!(v["num_processes"], json!(8));
            assert_eq!(v["mixed_precision"], json!("bf16"));
            if want == "FSDP" {
                keys_in(&v["fsdp_config"], ACC_FSDP, "fsdp_config");
                assert_eq!(v["fsdp_config"]["fsdp_transformer_layer_cls_to_wrap"], json!("LlamaDecoderLayer"));
                let strat = if sh == Zero3 { "FULL_SHARD" } else { "SHARD_GRAD_OP" };
                assert_eq!(v["fsdp_config"]["fsdp_sharding_strategy"], json!(strat));
                assert_eq!(v["fsdp_config"]["fsdp_offload_params"], json!(par != NoOffload));
            }
            if want == "DEEPSPEED" {
                keys_in(&v["deepspeed_config"], ACC_DS, "deepspeed_config");
                assert_eq!(v["deepspeed_config"]["gradient_accumulation_steps"], json!(4));
                assert_eq!(v["deepspeed_config"]["offload_optimizer_device"], json!(opt));
            }
        }
    }

    #[test]
    fn emitted_configs_snapshot() {
        let s = setup(Zero3, 8, Cpu, Cpu);
        insta::assert_snapshot!("ds_zero3_offload", deepspeed(&s).unwrap());
        insta::assert_snapshot!(
            "accelerate_fsdp_full_shard",
            accelerate(&setup(Zero3, 8, NoOffload, NoOffload), Family::Llama, 1).unwrap()
        );
        insta::assert_snapshot!(
            "torchrun_fsdp_two_nodes",
            torchrun(&setup(Zero3, 16, NoOffload, NoOffload), Family::Mistral, 2).unwrap()
        );
    }

    #[test]
    fn torchrun_command_uses_documented_flags() {
        for (sh, machines) in [(Zero3, 1), (Zero2, 2), (Sharding::None, 1)] {
            let text = torchrun(&setup(sh, 8, NoOffload, NoOffload), Family::Llama, machines).unwrap();
            // the fsdp_config.json here-doc parses and uses Trainer keys
            if sh != Sharding::None {
                let start = text.find("<<'EOF'\n").unwrap() + 8;
                let end = text[start..].find("\nEOF").unwrap() + start;
                let cfg: Value = serde_json::from_str(&text[start..end]).unwrap();
                keys_in(&cfg, TRAINER_FSDP, "fsdp_config.json");
                assert_eq!(cfg["transformer_layer_cls_to_wrap"], json!(["LlamaDecoderLayer"]));
            }
            let cmd: String = text[text.find("torchrun").unwrap()..].replace("\\\n", " ");
            let mut after_script = false;
            for tok in cmd.split_whitespace() {
                if tok == "train.py" {
                    after_script = true;
                    continue;
                }
                if !tok.starts_with("--") {
                    continue;
                }
                let flag = tok.split('=').next().unwrap();
                let known = if after_script { TRAINER } else { TORCHRUN };
                assert!(
                    known.contains(&flag),
                    "`{flag}` is not a documented {} flag",
                    if after_script { "Trainer" } else { "torchrun" }
                );
            }
            assert!(cmd.contains(&format!("--nproc-per-node={}", 8 / machines)));
            if sh == Zero3 {
                assert!(cmd.contains("--fsdp 'full_shard auto_wrap'"));
            }
        }
        // FSDP has no optimizer-only offload
        assert!(torchrun(&setup(Zero2, 8, Cpu, NoOffload), Family::Llama, 1).is_err());
    }
}
