//! DeepSpeed `ds_config.json`: the parts that decide memory — ZeRO stage,
//! optimizer/parameter offload, bf16/fp16, micro-batch and gradient
//! accumulation, the optimizer type. `"auto"` values (filled in by the
//! Hugging Face Trainer from its own arguments) are reported as such, and
//! every key this reader does not know is listed, never silently ignored.
//!
//! Key names follow DeepSpeed's config classes (`DeepSpeedZeroConfig`,
//! `DeepSpeedFP16Config`…), including the unprefixed aliases of the
//! `stage3_*` knobs and the legacy `"cpu_offload": true`.

use crate::error::IngestError;
use crate::json::{as_count, Obj};
use serde_json::{Map, Value};
use vramfit_core::Offload;

/// Largest DeepSpeed config accepted (real ones are ~1 KiB).
pub const MAX_DS_BYTES: usize = 1 << 20;

/// A value that may be `"auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DsValue<T> {
    #[default]
    Absent,
    /// `"auto"`: the Hugging Face Trainer fills it from its own arguments
    Auto,
    Set(T),
}

impl<T: Copy> DsValue<T> {
    pub fn value(&self) -> Option<T> {
        match self {
            DsValue::Set(v) => Some(*v),
            _ => None,
        }
    }
}

/// What a DeepSpeed config says about memory.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DeepSpeedConfig {
    pub zero_stage: DsValue<u8>,
    pub offload_optimizer: DsValue<Offload>,
    pub offload_param: DsValue<Offload>,
    pub bf16: DsValue<bool>,
    pub fp16: DsValue<bool>,
    pub micro_batch: DsValue<u64>,
    pub grad_accum: DsValue<u64>,
    pub train_batch_size: DsValue<u64>,
    /// `optimizer.type` as written (AdamW, Adam, Lamb, OneBitAdam…)
    pub optimizer_type: Option<String>,
    /// `activation_checkpointing.partition_activations` etc. present
    pub activation_checkpointing: bool,
    /// `zero_optimization.reduce_bucket_size` (elements)
    pub reduce_bucket_size: DsValue<u64>,
    /// `zero_optimization.allgather_bucket_size` (elements)
    pub allgather_bucket_size: DsValue<u64>,
    /// `zero_optimization.overlap_comm`
    pub overlap_comm: DsValue<bool>,
    /// `zero_optimization.zero_hpz_partition_size`: ZeRO++ hpZ's secondary
    /// partition group (1, or 0, which DeepSpeed also reads as off: hpZ off)
    pub hpz_partition: DsValue<u64>,
    /// `expert_parallel.autoep_size` with `"enabled": true`: DeepSpeed AutoEP's
    /// expert-parallel degree (absent, or the section disabled: no AutoEP)
    pub autoep_size: DsValue<u64>,
    /// statements about `"auto"` values and legacy keys
    pub notes: Vec<String>,
    /// dotted paths of keys this reader does not know
    pub unknown_keys: Vec<String>,
}

const TOP_KEYS: &[&str] = &[
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "gradient_clipping",
    "steps_per_print",
    "wall_clock_breakdown",
    "dump_state",
    "fp16",
    "bf16",
    "amp",
    "zero_optimization",
    "optimizer",
    "scheduler",
    "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer",
    "activation_checkpointing",
    "communication_data_type",
    "seq_parallel_communication_data_type",
    "prescale_gradients",
    "gradient_predivide_factor",
    "sparse_gradients",
    "flops_profiler",
    "tensorboard",
    "wandb",
    "csv_monitor",
    "comet",
    "comms_logger",
    "aio",
    "data_types",
    "elasticity",
    "checkpoint",
    "compression_training",
    "data_efficiency",
    "pipeline",
    "memory_breakdown",
    "disable_allgather",
    "fp32_allreduce",
    "torch_autocast",
    "graph_harvesting",
    "use_data_before_expert_parallelism",
    "expert_parallel",
];

const ZERO_KEYS: &[&str] = &[
    "stage",
    "offload_optimizer",
    "offload_param",
    "cpu_offload",
    "cpu_offload_params",
    "cpu_offload_use_pin_memory",
    "overlap_comm",
    "contiguous_gradients",
    "sub_group_size",
    "reduce_bucket_size",
    "reduce_scatter",
    "allgather_partitions",
    "allgather_bucket_size",
    "round_robin_gradients",
    "load_from_fp32_weights",
    "elastic_checkpoint",
    "ignore_unused_parameters",
    "legacy_stage1",
    "memory_efficient_linear",
    "zero_hpz_partition_size",
    "zero_quantized_weights",
    "zero_quantized_nontrainable_weights",
    "zero_quantized_gradients",
    "mics_shard_size",
    "mics_hierarchical_params_gather",
    "use_multi_rank_bucket_allreduce",
    "pipeline_loading_checkpoint",
    "override_module_apply",
    "log_trace_cache_warnings",
    "module_granularity_threshold",
    "use_all_reduce_for_fetch_params",
    "stage3_prefetch_bucket_size",
    "prefetch_bucket_size",
    "stage3_param_persistence_threshold",
    "param_persistence_threshold",
    "stage3_model_persistence_threshold",
    "model_persistence_threshold",
    "stage3_max_live_parameters",
    "max_live_parameters",
    "stage3_max_reuse_distance",
    "max_reuse_distance",
    "stage3_gather_16bit_weights_on_model_save",
    "gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save",
    "stage3_use_all_reduce_for_fetch_params",
    "stage3_module_granularity_threshold",
];

const OFFLOAD_KEYS: &[&str] = &[
    "device",
    "pin_memory",
    "nvme_path",
    "buffer_count",
    "buffer_size",
    "max_in_cpu",
    "fast_init",
    "ratio",
    "pipeline_read",
    "pipeline_write",
    "pipeline",
];
const PRECISION_KEYS: &[&str] = &[
    "enabled",
    "auto_cast",
    "loss_scale",
    "initial_scale_power",
    "loss_scale_window",
    "hysteresis",
    "consecutive_hysteresis",
    "min_loss_scale",
    "fp16_master_weights_and_grads",
    "immediate_grad_update",
    "check_grad_overflow",
    "bf16_master_weights_and_grads",
    "bf16_optimizer_states",
];

fn is_auto(v: &Value) -> bool {
    v.as_str().is_some_and(|s| s.eq_ignore_ascii_case("auto"))
}

/// A positive count up to 2^24, or `"auto"`.
fn count(o: &Obj, key: &str) -> Result<DsValue<u64>, IngestError> {
    match o.get(key) {
        None => Ok(DsValue::Absent),
        Some(v) if is_auto(v) => Ok(DsValue::Auto),
        Some(v) => match as_count(v) {
            Some(n) if (1..=1 << 24).contains(&n) => Ok(DsValue::Set(n)),
            _ => Err(o.bad(key, "a positive integer or \"auto\"", v)),
        },
    }
}

/// A bucket size in elements (`5e8`, `500000000` or `"auto"`), at most 2^40.
fn elements(o: &Obj, key: &str) -> Result<DsValue<u64>, IngestError> {
    match o.get(key) {
        None => Ok(DsValue::Absent),
        Some(v) if is_auto(v) => Ok(DsValue::Auto),
        Some(v) => match as_count(v) {
            Some(n) if (1..=1 << 40).contains(&n) => Ok(DsValue::Set(n)),
            _ => Err(o.bad(key, "a positive element count (e.g. 5e8) or \"auto\"", v)),
        },
    }
}

/// `true`, `false` or `"auto"`.
fn flag(o: &Obj, key: &str) -> Result<DsValue<bool>, IngestError> {
    match o.get(key) {
        None => Ok(DsValue::Absent),
        Some(v) if is_auto(v) => Ok(DsValue::Auto),
        Some(Value::Bool(b)) => Ok(DsValue::Set(*b)),
        Some(v) => Err(o.bad(key, "true, false or \"auto\"", v)),
    }
}

fn unknown(m: &Map<String, Value>, known: &[&str], prefix: &str, out: &mut Vec<String>) {
    for k in m.keys() {
        if !known.contains(&k.as_str()) {
            out.push(format!("{prefix}{k}"));
        }
    }
}

fn offload(
    o: &Obj,
    key: &str,
    path: &'static str,
    unknown_keys: &mut Vec<String>,
) -> Result<DsValue<Offload>, IngestError> {
    let Some(v) = o.get(key) else { return Ok(DsValue::Absent) };
    let Value::Object(map) = v else { return Err(o.bad(key, "an object with \"device\"", v)) };
    let inner = Obj::at(map, path, o.origin());
    unknown(map, OFFLOAD_KEYS, &format!("{path}."), unknown_keys);
    match inner.get("device") {
        None => Ok(DsValue::Set(Offload::None)),
        Some(d) if is_auto(d) => Ok(DsValue::Auto),
        Some(d) => match d.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("cpu") => Ok(DsValue::Set(Offload::Cpu)),
            Some("nvme") => Ok(DsValue::Set(Offload::Nvme)),
            Some("none") => Ok(DsValue::Set(Offload::None)),
            _ => Err(inner.bad("device", "\"cpu\", \"nvme\" or \"none\"", d)),
        },
    }
}

/// The `zero_optimization` block: stage, buckets, offload (and the legacy
/// `cpu_offload` switches).
fn zero(z: &Obj, c: &mut DeepSpeedConfig) -> Result<(), IngestError> {
    unknown(z.map(), ZERO_KEYS, "zero_optimization.", &mut c.unknown_keys);
    c.zero_stage = match z.get("stage") {
        None => DsValue::Set(0),
        Some(s) if is_auto(s) => DsValue::Auto,
        Some(s) => match as_count(s) {
            Some(n) if n <= 3 => DsValue::Set(n as u8),
            _ => return Err(z.bad("stage", "0, 1, 2 or 3", s)),
        },
    };
    c.reduce_bucket_size = elements(z, "reduce_bucket_size")?;
    c.allgather_bucket_size = elements(z, "allgather_bucket_size")?;
    c.overlap_comm = flag(z, "overlap_comm")?;
    c.offload_optimizer = offload(z, "offload_optimizer", "zero_optimization.offload_optimizer", &mut c.unknown_keys)?;
    c.offload_param = offload(z, "offload_param", "zero_optimization.offload_param", &mut c.unknown_keys)?;
    hierarchical_partitions(z, c)?;
    if z.bool("cpu_offload").ok().flatten() == Some(true) {
        c.notes.push("legacy \"cpu_offload\": true read as offload_optimizer.device = cpu".into());
        if c.offload_optimizer == DsValue::Absent {
            c.offload_optimizer = DsValue::Set(Offload::Cpu);
        }
    }
    if z.bool("cpu_offload_params").ok().flatten() == Some(true) {
        c.notes.push("legacy \"cpu_offload_params\": true read as offload_param.device = cpu".into());
        if c.offload_param == DsValue::Absent {
            c.offload_param = DsValue::Set(Offload::Cpu);
        }
    }
    Ok(())
}

/// ZeRO++ hpZ's group and MiCS. hpZ (`zero_hpz_partition_size` N > 1; Wang
/// et al. 2023 "ZeRO++" §3.2; `DeepSpeedZeroConfig.zero_hpz_partition_size`,
/// an int ≥ 0 that stage 3 uses when > 1, deepspeed/runtime/zero/config.py and
/// stage3.py) is read into `hpz_partition` and modelled (`--hpz`); MiCS
/// (`mics_shard_size` N > 0, `deepspeed/runtime/zero/mics.py`) shards every
/// state over N ranks and replicates across the groups: hybrid sharding,
/// which `--dp-replicate` models; it keeps more per GPU than the ZeRO-3
/// estimate of the config, so it is said, not ignored (under-prediction is
/// the worst error).
fn hierarchical_partitions(z: &Obj, c: &mut DeepSpeedConfig) -> Result<(), IngestError> {
    let key = "zero_hpz_partition_size";
    c.hpz_partition = match z.get(key) {
        None => DsValue::Absent,
        Some(v) => match as_count(v) {
            Some(n) if n <= 1 << 24 => DsValue::Set(n.max(1)),
            _ => return Err(z.bad(key, "a non-negative integer (DeepSpeed's int field; 0 and 1: hpZ off)", v)),
        },
    };
    if let Some(n) = z.get("mics_shard_size").and_then(as_count).filter(|&n| n > 0) {
        c.notes.push(format!(
            "zero_optimization.mics_shard_size {n}: MiCS shards the model states over {n} ranks and replicates them across the groups, more per GPU than ZeRO-3 over every rank: add --dp-replicate (data-parallel ranks ÷ {n}) to size it"
        ));
    }
    Ok(())
}

/// DeepSpeed AutoEP's section (`expert_parallel`; deepspeed/module_inject/auto_ep_config.py
/// `parse_autoep_config`, DeepSpeed ≥ 0.19.2, PR #7938): `enabled` (default false) and
/// `autoep_size` (default 1) give the expert-parallel degree `--ep` models; the routing and
/// kernel keys change no bytes vramfit counts. `expert_tensor_parallel_size` above 1 splits
/// each expert further, which is not modelled: said, and the experts sized whole on each EP
/// rank (more than DeepSpeed keeps: over, never under).
fn expert_parallel(e: &Obj, c: &mut DeepSpeedConfig) -> Result<(), IngestError> {
    if e.bool("enabled")? != Some(true) {
        return Ok(());
    }
    c.autoep_size = match e.get("autoep_size") {
        None => DsValue::Set(1),
        Some(v) => match as_count(v) {
            Some(n) if (1..=1 << 24).contains(&n) => DsValue::Set(n),
            _ => return Err(e.bad("autoep_size", "a positive integer (AutoEP's expert-parallel degree)", v)),
        },
    };
    if let Some(n) = e.get("expert_tensor_parallel_size").and_then(as_count).filter(|&n| n > 1) {
        c.notes.push(format!(
            "expert_parallel.expert_tensor_parallel_size {n}: AutoEP's expert-tensor split is not modelled; each EP rank's experts are sized whole (more than DeepSpeed keeps)"
        ));
    }
    Ok(())
}

/// Parse a DeepSpeed config. `origin` names the file in errors.
pub fn parse_deepspeed(bytes: &[u8], origin: &str) -> Result<DeepSpeedConfig, IngestError> {
    if bytes.len() > MAX_DS_BYTES {
        return Err(IngestError::Invalid {
            file: origin.into(),
            reason: format!("{} bytes is too large for a DeepSpeed config (limit {MAX_DS_BYTES})", bytes.len()),
        });
    }
    let v = crate::json::parse(bytes, origin)?;
    let top = Obj::root(&v, origin, "(top level)")?;
    let mut c = DeepSpeedConfig::default();
    unknown(top.map(), TOP_KEYS, "", &mut c.unknown_keys);
    c.micro_batch = count(&top, "train_micro_batch_size_per_gpu")?;
    c.grad_accum = count(&top, "gradient_accumulation_steps")?;
    c.train_batch_size = count(&top, "train_batch_size")?;
    for (key, slot) in [("bf16", &mut c.bf16), ("fp16", &mut c.fp16)] {
        let Some(section) = top.obj_expecting(key, key, "an object with \"enabled\"")? else { continue };
        unknown(section.map(), PRECISION_KEYS, &format!("{key}."), &mut c.unknown_keys);
        *slot = flag(&section, "enabled")?;
        if *slot == DsValue::Absent {
            // DeepSpeed: a present section without "enabled" is disabled
            *slot = DsValue::Set(false);
        }
    }
    if let Some(z) = top.obj("zero_optimization", "zero_optimization")? {
        zero(&z, &mut c)?;
    }
    if let Some(e) = top.obj_expecting("expert_parallel", "expert_parallel", "an object with \"enabled\"")? {
        expert_parallel(&e, &mut c)?;
    }
    if let Some(o) = top.obj_expecting("optimizer", "optimizer", "an object with \"type\"")? {
        c.optimizer_type = o.str("type")?.map(str::to_string);
    }
    c.activation_checkpointing = top.map().get("activation_checkpointing").is_some();
    for (name, auto) in [
        ("train_micro_batch_size_per_gpu", c.micro_batch == DsValue::Auto),
        ("gradient_accumulation_steps", c.grad_accum == DsValue::Auto),
        ("train_batch_size", c.train_batch_size == DsValue::Auto),
        ("bf16.enabled", c.bf16 == DsValue::Auto),
        ("fp16.enabled", c.fp16 == DsValue::Auto),
        ("zero_optimization.stage", c.zero_stage == DsValue::Auto),
        ("zero_optimization.reduce_bucket_size", c.reduce_bucket_size == DsValue::Auto),
        ("zero_optimization.allgather_bucket_size", c.allgather_bucket_size == DsValue::Auto),
        ("zero_optimization.overlap_comm", c.overlap_comm == DsValue::Auto),
    ] {
        if auto {
            c.notes.push(format!(
                "{name} is \"auto\": the Hugging Face Trainer fills it from its own arguments; vramfit uses the command-line flag (or its default) instead"
            ));
        }
    }
    if let (DsValue::Set(tb), DsValue::Set(mb), DsValue::Set(ga)) = (c.train_batch_size, c.micro_batch, c.grad_accum) {
        if tb % (mb * ga) != 0 {
            return Err(IngestError::Invalid {
                file: origin.into(),
                reason: format!(
                    "train_batch_size {tb} is not micro-batch {mb} × gradient_accumulation_steps {ga} × a whole number of GPUs"
                ),
            });
        }
    }
    if c.bf16 == DsValue::Set(true) && c.fp16 == DsValue::Set(true) {
        return Err(IngestError::Invalid {
            file: origin.into(),
            reason: "bf16.enabled and fp16.enabled are both true".into(),
        });
    }
    Ok(c)
}
