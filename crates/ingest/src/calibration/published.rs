//! Published GPU measurements (`calibration/data/published/memory.jsonl`,
//! the set `vramfit calibrate --set published`): real figures others have
//! printed, each with its source, hardware, framework, workload, what was
//! measured and how. Format: `calibration/data/published/README.md`.
//!
//! The parser is typed and total: every line gives a [`PublishedCase`] or an
//! [`IngestError`] naming `file:line` and the dotted field. Each line's
//! `vramfit` block says how the case is expressed in vramfit's terms (engine,
//! precision, optimizer, …, or why it is excluded); numbers the source states
//! (micro-batch, sequence length, accumulation, LoRA rank, parallel degrees)
//! are read from the source's own fields, never duplicated there.

use crate::error::IngestError;
use crate::json::Obj;
use serde_json::Value;
use vramfit_core::accuracy::Quantity;
use vramfit_core::train::{
    AttentionImpl, Checkpointing, LoraSetup, LossPath, Optimizer, Precision, SelectivePolicy, TrainKind,
};
use vramfit_core::workload::{CommSetup, Engine};
use vramfit_core::{
    Attention, DType, Family, InferenceSetup, MlpKind, ModelSpec, NormKind, Offload, Parallelism, Positional,
    QuantSpec, RuntimeSetup, Sharding, Task, TrainSetup, Workload,
};

/// The published memory set, embedded.
pub const PUBLISHED_CASES: &str = include_str!("../../../../calibration/data/published/memory.jsonl");
/// Where the embedded set lives in the repository (named in errors and rows).
pub const PUBLISHED_FILE: &str = "calibration/data/published/memory.jsonl";

/// Group of a published case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PubGroup {
    Qlora,
    Lora,
    Full,
    Serving,
    MultiGpu,
    Runtime,
}

impl PubGroup {
    pub const ALL: [PubGroup; 6] =
        [PubGroup::Qlora, PubGroup::Lora, PubGroup::Full, PubGroup::Serving, PubGroup::MultiGpu, PubGroup::Runtime];

    pub fn name(self) -> &'static str {
        match self {
            PubGroup::Qlora => "qlora",
            PubGroup::Lora => "lora",
            PubGroup::Full => "full",
            PubGroup::Serving => "serving",
            PubGroup::MultiGpu => "multi_gpu",
            PubGroup::Runtime => "runtime",
        }
    }
}

/// How sure the collector is of the case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confidence {
    High,
    Medium,
    Low,
}

impl Confidence {
    pub fn name(self) -> &'static str {
        match self {
            Confidence::High => "high",
            Confidence::Medium => "medium",
            Confidence::Low => "low",
        }
    }
}

/// One measured figure of a case.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// the `what` field as written (`allocated_peak`, `engine_kv_pool`, …)
    pub what: String,
    pub bytes: u64,
    /// half of the last printed digit, in bytes
    pub resolution_bytes: u64,
    /// the figure as printed, with its unit
    pub printed: String,
    /// the `how` field: the mechanism that measured it
    pub how: String,
}

/// A measurement and what it is compared with, or why it is not.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub measurement: Measurement,
    pub quantity: Result<Quantity, String>,
    /// the figure is the source of a constant of the quantity it is compared
    /// with (`vramfit.source_of_constant`): shown, not counted as evidence
    pub source_of_constant: bool,
}

/// The start-up of a serving engine (vLLM `gpu_memory_utilization`, …).
#[derive(Debug, Clone, PartialEq)]
pub struct ServingCase {
    pub gpu_memory_utilization: f64,
    /// the card's capacity as CUDA reports it (`cudaMemGetInfo` total), when the source prints it
    pub cuda_capacity_bytes: Option<u64>,
    /// the card's catalogue id, when the capacity is not printed
    pub gpu: Option<String>,
    pub max_model_len: u64,
    pub max_num_batched_tokens: u64,
    pub max_num_seqs: u64,
}

/// One published case, ready to estimate.
#[derive(Debug, Clone)]
pub struct PublishedCase {
    pub id: String,
    pub group: PubGroup,
    pub confidence: Confidence,
    pub url: String,
    /// `hardware.gpu` as the source names it
    pub gpu: String,
    /// `framework.name` and `framework.version`
    pub framework: String,
    /// the model, when the case has one and it can be expressed
    pub spec: Option<ModelSpec>,
    /// the workload, when the case has one and it can be expressed
    pub workload: Option<Workload>,
    pub serving: Option<ServingCase>,
    /// NCCL ranks or DeepSpeed knobs of a runtime case live in its quantities
    pub comparisons: Vec<Comparison>,
    /// why the whole case is not compared
    pub excluded: Option<String>,
    /// the `vramfit.note`: why a choice in the mapping was made
    pub note: Option<String>,
    /// `file:line`
    pub origin: String,
}

/// The dotted paths used in errors (static so sub-objects can borrow them).
mod paths {
    pub const MODEL: &str = "model";
    pub const WORKLOAD: &str = "workload";
    pub const PARALLELISM: &str = "workload.parallelism";
    pub const FSDP: &str = "workload.parallelism.fsdp";
    pub const LORA: &str = "workload.lora";
    pub const QUANT: &str = "workload.quantization";
    pub const VRAMFIT: &str = "vramfit";
    pub const HARDWARE: &str = "hardware";
    pub const FRAMEWORK: &str = "framework";
    pub const MEASURED: &str = "measured";
    pub const FROM: &str = "vramfit.from";
    pub const TO: &str = "vramfit.to";
}

fn group(o: Obj) -> Result<PubGroup, IngestError> {
    let g = o.req_str("group")?;
    PubGroup::ALL.into_iter().find(|x| x.name() == g).ok_or_else(|| {
        o.bad("group", "one of qlora, lora, full, serving, multi_gpu, runtime", &Value::String(g.into()))
    })
}

fn confidence(o: Obj) -> Result<Confidence, IngestError> {
    match o.req_str("confidence")? {
        "high" => Ok(Confidence::High),
        "medium" => Ok(Confidence::Medium),
        "low" => Ok(Confidence::Low),
        other => Err(o.bad("confidence", "high, medium or low", &Value::String(other.into()))),
    }
}

fn measurement(o: Obj) -> Result<Measurement, IngestError> {
    let bytes = o.u64("bytes")?.ok_or_else(|| o.missing("bytes"))?;
    if bytes == 0 {
        return Err(o.bad("bytes", "a positive byte count", &Value::from(0)));
    }
    Ok(Measurement {
        what: o.req_str("what")?.to_string(),
        bytes,
        resolution_bytes: o.u64("resolution_bytes")?.unwrap_or(0),
        printed: format!("{} {}", o.req_str("value_as_printed")?, o.req_str("unit")?),
        how: o.req_str("how")?.to_string(),
    })
}

/// The quantity a measurement's `what` is compared with, or why it is not.
fn quantity_of(what: &str) -> Result<Quantity, String> {
    Ok(match what {
        "allocated_peak" | "active_peak" => Quantity::TensorPeak,
        "reserved_peak" => Quantity::Reserved,
        "nvidia_smi" | "nvidia_smi_peak_minus_initial" => Quantity::DeviceUsed,
        "reported_vram_unspecified" => Quantity::DeviceUsed,
        "allocated_after_train" => Quantity::Persistent,
        "engine_weights" => Quantity::EngineWeights,
        "engine_kv_pool" => Quantity::EngineKvPool,
        "engine_activation_peak" => Quantity::EngineActivation,
        "engine_non_torch" => Quantity::EngineNonTorch,
        "engine_cuda_graph" => Quantity::EngineCudaGraph,
        "reserved_peak_model_init" | "nvidia_smi_after_weights_load" => {
            return Err(format!("'{what}' is a loading transient, not a training-step figure"))
        }
        other => return Err(format!("'{other}' needs an explicit vramfit.compare")),
    })
}

/// An explicit `compare` of the vramfit block (runtime cases, model init).
fn explicit_quantity(v: Obj) -> Result<Option<Quantity>, IngestError> {
    let Some(c) = v.str("compare")? else { return Ok(None) };
    Ok(Some(match c {
        "model_init" => Quantity::ModelInit,
        "cuda_context" => Quantity::CudaContext,
        "nccl_communicator" => {
            let ranks = v.u64("ranks")?.ok_or_else(|| v.missing("ranks"))?;
            if ranks < 2 {
                return Err(v.bad("ranks", "2 or more GPUs in the communicator", &Value::from(ranks)));
            }
            Quantity::NcclCommunicator { ranks }
        }
        "deepspeed_buckets_delta" => {
            let from = v.obj("from", paths::FROM)?.ok_or_else(|| v.missing("from"))?;
            let to = v.obj("to", paths::TO)?.ok_or_else(|| v.missing("to"))?;
            Quantity::DeepspeedBucketsDelta { from: comm(from)?, to: comm(to)? }
        }
        other => {
            return Err(v.bad(
                "compare",
                "model_init, cuda_context, nccl_communicator or deepspeed_buckets_delta",
                &Value::String(other.into()),
            ))
        }
    }))
}

/// The `link` ("nvlink", "pcie") and `arch` ("ampere", …) of the vramfit
/// block of a runtime case, which an NCCL communicator's figure follows.
fn nccl_hardware(v: Obj) -> Result<Option<vramfit_core::nccl::NcclHardware>, IngestError> {
    use vramfit_core::nccl::{Arch, Link};
    let link = match v.str("link")? {
        None => return Ok(None),
        Some("nvlink") => Link::Nvlink,
        Some("pcie") => Link::Pcie,
        Some(other) => return Err(v.bad("link", "nvlink or pcie", &Value::String(other.into()))),
    };
    let arch = match v.str("arch")? {
        None => None,
        Some(a) => Some(
            Arch::parse(a)
                .ok_or_else(|| v.bad("arch", "a GPU architecture (ampere, hopper, …)", &Value::String(a.into())))?,
        ),
    };
    Ok(Some(vramfit_core::nccl::NcclHardware { link: Some(link), arch, pcie_gen: None }))
}

/// DeepSpeed bucket knobs of a `from`/`to` object.
fn comm(o: Obj) -> Result<CommSetup, IngestError> {
    let d = CommSetup::default();
    Ok(CommSetup {
        reduce_bucket: o.u64("reduce_bucket_size")?.unwrap_or(d.reduce_bucket),
        allgather_bucket: o.u64("allgather_bucket_size")?.unwrap_or(d.allgather_bucket),
        overlap_comm: o.bool("overlap_comm")?.unwrap_or(d.overlap_comm),
        ..d
    })
}

/// A decoder-only model from the case's `model` object. Module names follow
/// the Llama layout (q/k/v/o separate) whatever the framework's own fused
/// layout: the parameter counts, and LoRA's on separate q and v slices, are the same.
fn model(m: Obj, id: &str) -> Result<ModelSpec, IngestError> {
    let family = m.req_str("family")?.to_ascii_lowercase();
    let dim = |k: &str| m.u64(k)?.ok_or_else(|| m.missing(k));
    let hidden = dim("hidden_size")?;
    let heads = dim("num_attention_heads")?;
    let norm = match m.str("norm")? {
        Some(n) if n.eq_ignore_ascii_case("layernorm") => NormKind::LayerNorm,
        _ => NormKind::RmsNorm,
    };
    let gated = m.str("mlp")?.is_none_or(|s| s.starts_with("gated"));
    let gemma = family.starts_with("gemma");
    let mut spec = ModelSpec::llama_like(
        m.str("hf_model_id")?.unwrap_or(id),
        hidden,
        dim("num_layers")?,
        heads,
        dim("num_key_value_heads")?,
        dim("intermediate_size")?,
        dim("vocab_size")?,
    );
    spec.family = if gemma { Family::Gemma } else { Family::Llama };
    spec.head_dim = m.u64("head_dim")?.unwrap_or(hidden / heads.max(1));
    spec.mlp = if gated { MlpKind::Gated } else { MlpKind::Plain };
    spec.activation = match (gated, gemma) {
        (true, true) => "gelu_pytorch_tanh",
        (true, false) => "silu",
        (false, _) => "gelu",
    }
    .into();
    spec.norm = norm;
    spec.attention = Attention::Separate;
    let bias = m.bool("bias")?.unwrap_or(false);
    (spec.qkv_bias, spec.o_bias, spec.mlp_bias) = (bias, bias, bias);
    spec.parallel_residual = m.bool("parallel_residual")?.unwrap_or(false);
    spec.norms_per_layer = if m.bool("shared_attention_norm")? == Some(true) {
        1
    } else if m.bool("post_attention_norm")? == Some(true) {
        4
    } else {
        2
    };
    if spec.norms_per_layer == 4 {
        spec.family = Family::Gemma2;
    }
    spec.tied_embeddings = m.bool("tie_word_embeddings")?.unwrap_or(false);
    spec.positional = Positional::Rotary;
    // a rotary model's position limit changes no memory figure; the workload's length is what counts
    spec.max_position_embeddings = 1 << 20;
    spec.sliding_window = m.u64("sliding_window")?;
    spec.validate().map_err(|error| IngestError::Model { file: m.origin().into(), error })?;
    Ok(spec)
}

/// The vramfit block's training and serving settings, with the source's numbers.
struct Mapping<'a> {
    v: Obj<'a>,
    w: Obj<'a>,
}

impl Mapping<'_> {
    fn engine(&self) -> Result<Engine, IngestError> {
        self.choice().map(|c| c.engine)
    }

    /// The engine and its release (`vllm@0.8`).
    fn choice(&self) -> Result<vramfit_core::workload::EngineChoice, IngestError> {
        self.v.parsed::<vramfit_core::workload::EngineChoice>("engine")?.ok_or_else(|| self.v.missing("engine"))
    }

    /// A size the source states (`workload.<key>`) or the vramfit block supplies.
    fn size(&self, source_key: &str, vramfit_key: &str) -> Result<Option<u64>, IngestError> {
        match self.v.u64(vramfit_key)? {
            Some(n) => Ok(Some(n)),
            None => self.w.count_or_words(source_key),
        }
    }

    fn parallelism(&self) -> Result<Parallelism, IngestError> {
        let mut par = Parallelism::default();
        let Some(p) = self.w.obj("parallelism", paths::PARALLELISM)? else { return Ok(par) };
        par.tp = p.u64("tp")?.unwrap_or(1).max(1);
        par.pp = p.u64("pp")?.unwrap_or(1).max(1);
        par.gpus = p.u64("gpus")?.unwrap_or(par.tp * par.pp).max(1);
        if let Some(f) = p.obj("fsdp", paths::FSDP)? {
            par.sharding = Sharding::Zero3;
            par.fsdp = true;
            if f.bool("cpu_offload")? == Some(true) || f.bool("offload_params")? == Some(true) {
                par.offload_optimizer = Offload::Cpu;
                par.offload_params = Offload::Cpu;
            }
        }
        if let Some(sp) = self.v.bool("sequence_parallel")? {
            par.sequence_parallel = sp;
        }
        if let Some(stage) = p.u64("zero_stage")? {
            par.sharding = Sharding::from_stage(stage.min(255) as u8)
                .ok_or_else(|| p.bad("zero_stage", "a ZeRO stage 0–3", &Value::from(stage)))?;
        }
        Ok(par)
    }

    fn lora(&self, kind: TrainKind) -> Result<LoraSetup, IngestError> {
        let mut lora = LoraSetup::default();
        if kind == TrainKind::Full {
            return Ok(lora);
        }
        if let Some(l) = self.w.obj("lora", paths::LORA)? {
            lora.rank = l.u64("r")?.ok_or_else(|| l.missing("r"))?;
            // alpha and dropout may be stated in words ("not stated"): alpha has no memory effect,
            // an unstated dropout needs vramfit.lora_dropout
            lora.alpha = l.number_or_words("alpha")?.unwrap_or(2.0 * lora.rank as f64);
            lora.dropout = match (l.number_or_words("dropout")?, self.v.f64("lora_dropout")?) {
                (_, Some(d)) | (Some(d), None) => d,
                (None, None) if l.get("dropout").is_some() => return Err(self.v.missing("lora_dropout")),
                (None, None) => 0.0,
            };
        } else {
            return Err(self.w.missing("lora"));
        }
        lora.targets =
            crate::lora::from_json(&self.v, "lora_targets")?.ok_or_else(|| self.v.missing("lora_targets"))?;
        Ok(lora)
    }

    fn train(&self, kind: TrainKind, engine: Engine) -> Result<TrainSetup, IngestError> {
        let v = self.v;
        let mut t = TrainSetup { kind, ..TrainSetup::default() }.with_engine(engine);
        t.precision = v.parsed::<Precision>("precision")?.ok_or_else(|| v.missing("precision"))?;
        t.optimizer = v.parsed::<Optimizer>("optimizer")?.ok_or_else(|| v.missing("optimizer"))?;
        t.batch = self.size("micro_batch_per_gpu", "batch")?.ok_or_else(|| self.w.missing("micro_batch_per_gpu"))?;
        t.seq = self.size("seq_len", "seq")?.ok_or_else(|| self.w.missing("seq_len"))?;
        t.grad_accum = self.w.count_or_words("grad_accum")?.unwrap_or(1).max(1);
        t.checkpointing = match v.req_str("checkpointing")? {
            "none" => Checkpointing::None,
            "full" => Checkpointing::Full,
            "selective" => Checkpointing::Selective,
            other => return Err(v.bad("checkpointing", "none, full or selective", &Value::String(other.into()))),
        };
        t.lora = self.lora(kind)?;
        t.lora.adapter_fp32 = match v.str("adapter_dtype")? {
            None => t.framework().adapters_fp32,
            Some("fp32") => true,
            Some("bf16") => false,
            Some(o) => return Err(v.bad("adapter_dtype", "fp32 or bf16", &Value::String(o.into()))),
        };
        if let Some(loss) = v.parsed::<LossPath>("loss")? {
            t.loss = loss;
        }
        if let Some(k) = v.bool("kbit_prep")? {
            t.kbit_prep = k;
        }
        if let Some(q) = self.w.obj("quantization", paths::QUANT)? {
            t.qlora_double_quant = match v.bool("double_quant")? {
                Some(d) => d,
                None => q.bool_or_words("double_quant")?.unwrap_or(true),
            };
        }
        t.attention = match v.str("attention")? {
            None | Some("sdpa") => AttentionImpl::Sdpa,
            Some("eager") => AttentionImpl::Eager,
            Some(o) => return Err(v.bad("attention", "sdpa or eager", &Value::String(o.into()))),
        };
        t.selective = match v.str("selective")? {
            None | Some("attention-core") => SelectivePolicy::AttentionCore,
            Some("ops") => SelectivePolicy::Ops,
            Some(o) => return Err(v.bad("selective", "attention-core or ops", &Value::String(o.into()))),
        };
        t.optimizer_in_backward = v.bool("optimizer_in_backward")?.unwrap_or(false);
        t.activation_offload = v.bool("activation_offload")?.unwrap_or(false);
        Ok(t)
    }

    /// `generate` of a whole model (LitGPT, torchtune): weights, a KV cache of
    /// `context` tokens, the prompt's logits.
    fn infer(&self, spec: &ModelSpec) -> Result<InferenceSetup, IngestError> {
        let context = self.v.u64("context")?.ok_or_else(|| self.v.missing("context"))?;
        let mut s = InferenceSetup {
            weight_dtype: DType::BF16,
            kv_dtype: DType::BF16,
            batch: 1,
            concurrency: 1,
            context,
            block_size: 1,
            ..InferenceSetup::default()
        };
        if let Some(q) = self.w.obj("quantization", paths::QUANT)? {
            s.quant = Some(QuantSpec::nf4(q.bool_or_words("double_quant")?.unwrap_or(false), DType::BF16));
            s.weight_dtype = DType::I4;
            s.quantize_lm_head = self.v.bool("quantize_lm_head")?.unwrap_or(false);
        }
        let _ = spec;
        Ok(s)
    }

    fn serving(&self) -> Result<ServingCase, IngestError> {
        let v = self.v;
        let need = |k: &str| v.u64(k)?.ok_or_else(|| v.missing(k));
        Ok(ServingCase {
            gpu_memory_utilization: v
                .f64("gpu_memory_utilization")?
                .ok_or_else(|| v.missing("gpu_memory_utilization"))?,
            cuda_capacity_bytes: v.f64("cuda_capacity_gib")?.map(|g| (g * (1u64 << 30) as f64).round() as u64),
            gpu: v.str("gpu")?.map(str::to_string),
            max_model_len: need("max_model_len")?,
            max_num_batched_tokens: need("max_num_batched_tokens")?,
            max_num_seqs: need("max_num_seqs")?,
        })
    }
}

/// The case's `measured` figure, then its `other_measurements`.
fn measurements(o: Obj) -> Result<Vec<Measurement>, IngestError> {
    let measured = o.obj("measured", paths::MEASURED)?.ok_or_else(|| o.missing("measured"))?;
    let mut out = vec![measurement(measured)?];
    let others = match o.get("other_measurements") {
        None => return Ok(out),
        Some(Value::Array(a)) => a,
        Some(v) => return Err(o.bad("other_measurements", "a list of measurements", v)),
    };
    let names: Vec<String> = (0..others.len()).map(|i| format!("other_measurements[{i}]")).collect();
    for (x, path) in others.iter().zip(&names) {
        let map = x.as_object().ok_or_else(|| o.bad(path, "a measurement object", x))?;
        out.push(measurement(Obj::at(map, path, o.origin()))?);
    }
    Ok(out)
}

/// The quantity each measurement is compared with: an explicit `compare`
/// (the primary's in the vramfit block `v`, the others' in `v.others`),
/// else the one its `what` names.
fn comparisons(v: Obj, measurements: Vec<Measurement>) -> Result<Vec<Comparison>, IngestError> {
    let explicit_others: Vec<Value> = match v.get("others") {
        None => Vec::new(),
        Some(Value::Array(a)) => a.clone(),
        Some(x) => return Err(v.bad("others", "a list aligned with other_measurements", x)),
    };
    if explicit_others.len() > measurements.len() - 1 {
        return Err(v.bad("others", "no more entries than other_measurements", &Value::Array(explicit_others)));
    }
    let primary = explicit_quantity(v)?;
    let mut out = Vec::with_capacity(measurements.len());
    for (i, m) in measurements.into_iter().enumerate() {
        let mut source_of_constant = false;
        let quantity = if i == 0 {
            source_of_constant = v.bool("source_of_constant")?.unwrap_or(false);
            match primary {
                Some(q) => Ok(q),
                None => quantity_of(&m.what),
            }
        } else {
            match explicit_others.get(i - 1) {
                Some(Value::Object(map)) => {
                    let e = Obj::at(map, "vramfit.others[]", v.origin());
                    source_of_constant = e.bool("source_of_constant")?.unwrap_or(false);
                    match e.str("excluded")? {
                        Some(reason) => Err(reason.to_string()),
                        None => explicit_quantity(e)?.ok_or_else(|| e.missing("compare")).map(Ok)?,
                    }
                }
                Some(x) => return Err(v.bad("others", "objects", x)),
                None => quantity_of(&m.what),
            }
        };
        out.push(Comparison { measurement: m, quantity, source_of_constant });
    }
    Ok(out)
}

/// Parse one line of the published set.
pub fn parse_published(line: &str, origin: &str) -> Result<PublishedCase, IngestError> {
    let root = crate::json::parse(line.as_bytes(), origin)?;
    let o = Obj::root(&root, origin, "(line)")?;
    let id = o.req_str("id")?.to_string();
    let hw = o.obj("hardware", paths::HARDWARE)?.ok_or_else(|| o.missing("hardware"))?;
    let fw = o.obj("framework", paths::FRAMEWORK)?.ok_or_else(|| o.missing("framework"))?;
    let measurements = measurements(o)?;
    let v = o.obj("vramfit", paths::VRAMFIT)?.ok_or_else(|| o.missing("vramfit"))?;
    let w = o.obj("workload", paths::WORKLOAD)?.ok_or_else(|| o.missing("workload"))?;
    let mut case = PublishedCase {
        id: id.clone(),
        group: group(o)?,
        confidence: confidence(o)?,
        url: o.req_str("url")?.to_string(),
        gpu: hw.req_str("gpu")?.to_string(),
        framework: format!("{} {}", fw.req_str("name")?, fw.req_str("version")?),
        spec: None,
        workload: None,
        serving: None,
        comparisons: Vec::new(),
        excluded: v.str("excluded")?.map(str::to_string),
        note: v.str("note")?.map(str::to_string),
        origin: origin.to_string(),
    };
    if let Some(reason) = &case.excluded {
        case.comparisons = measurements
            .into_iter()
            .map(|measurement| Comparison { measurement, quantity: Err(reason.clone()), source_of_constant: false })
            .collect();
        return Ok(case);
    }
    case.comparisons = comparisons(v, measurements)?;
    let map = Mapping { v, w };
    let task = v.req_str("task")?;
    if task == "runtime" {
        if let Some(p) = v.parsed::<Precision>("precision")? {
            // the bytes per bucket element of a runtime case
            let t = TrainSetup { precision: p, ..TrainSetup::default() };
            case.workload = Some(Workload { task: Task::Train(t), ..Workload::default() });
        }
        if let Some(nccl) = nccl_hardware(v)? {
            // the link and architecture an NCCL figure was measured on
            let mut w = case.workload.take().unwrap_or_default();
            w.runtime.nccl = nccl;
            case.workload = Some(w);
        }
        return Ok(case);
    }
    let m = o.obj("model", paths::MODEL)?.ok_or_else(|| o.missing("model"))?;
    let spec = model(m, &id)?;
    let engine = map.engine()?;
    let parallelism = map.parallelism()?;
    let runtime = RuntimeSetup::default();
    let task = match task {
        "train" => Task::Train(map.train(TrainKind::Full, engine)?),
        "lora" => Task::Train(map.train(TrainKind::Lora, engine)?),
        "qlora" => Task::Train(map.train(TrainKind::Qlora, engine)?),
        "infer" => Task::Inference(InferenceSetup {
            engine,
            sliding_window_cache: engine.sliding_window_cache(),
            ..map.infer(&spec)?
        }),
        "serve" => {
            let s = map.serving()?;
            let setup = InferenceSetup {
                weight_dtype: DType::BF16,
                kv_dtype: DType::BF16,
                context: s.max_model_len,
                engine,
                engine_version: map.choice()?.version,
                sliding_window_cache: engine.sliding_window_cache(),
                ..InferenceSetup::default()
            };
            case.serving = Some(s);
            Task::Inference(setup)
        }
        other => {
            return Err(v.bad("task", "train, lora, qlora, infer, serve or runtime", &Value::String(other.into())))
        }
    };
    case.spec = Some(spec);
    case.workload = Some(Workload { task, parallelism, runtime });
    Ok(case)
}

/// Parse the whole published set (`file` names it in errors); blank lines are skipped.
pub fn parse_published_cases(text: &str, file: &str) -> Result<Vec<PublishedCase>, IngestError> {
    if text.len() > super::MAX_CASES_BYTES {
        return Err(IngestError::Invalid {
            file: file.into(),
            reason: format!("{} bytes is too large for a case file (limit {})", text.len(), super::MAX_CASES_BYTES),
        });
    }
    let mut out: Vec<PublishedCase> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let origin = format!("{file}:{}", i + 1);
        if line.len() > super::MAX_LINE_BYTES {
            return Err(IngestError::Invalid { file: origin, reason: "line longer than 1 MiB".into() });
        }
        let case = parse_published(line, &origin)?;
        if let Some(first) = out.iter().find(|c| c.id == case.id) {
            return Err(IngestError::Invalid {
                file: origin,
                reason: format!("id '{}' is already used at {}", case.id, first.origin),
            });
        }
        out.push(case);
    }
    Ok(out)
}

/// The embedded published set.
pub fn embedded_published() -> Result<Vec<PublishedCase>, IngestError> {
    parse_published_cases(PUBLISHED_CASES, PUBLISHED_FILE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_set_parses_and_every_case_is_expressed_or_excluded() {
        let cases = embedded_published().unwrap();
        assert_eq!(cases.len(), 128);
        for c in &cases {
            match &c.excluded {
                Some(reason) => assert!(c.comparisons.iter().all(|m| m.quantity.as_ref().err() == Some(reason))),
                None => {
                    let runtime = c.group == PubGroup::Runtime && c.spec.is_none();
                    assert!(runtime || (c.spec.is_some() && c.workload.is_some()), "{}", c.id);
                    assert!(c.comparisons.iter().any(|m| m.quantity.is_ok()), "{}", c.id);
                }
            }
        }
        // every group of the issue holds at least ten compared figures
        for g in [PubGroup::Qlora, PubGroup::Lora, PubGroup::Full, PubGroup::Serving, PubGroup::MultiGpu] {
            let n: usize = cases
                .iter()
                .filter(|c| c.group == g)
                .map(|c| c.comparisons.iter().filter(|m| m.quantity.is_ok()).count())
                .sum();
            assert!(n >= 10, "{}: {n}", g.name());
        }
    }

    #[test]
    fn fields_come_from_the_source_and_the_mapping() {
        let cases = embedded_published().unwrap();
        let c = cases.iter().find(|c| c.id == "fms_mistral7b_qlora_g1_bs4").unwrap();
        let Some(Workload { task: Task::Train(t), .. }) = &c.workload else { panic!("training") };
        assert_eq!((t.batch, t.seq, t.lora.rank), (4, 4096, 16));
        assert_eq!(t.kind, TrainKind::Qlora);
        assert!(t.kbit_prep && t.lora.adapter_fp32 && t.qlora_double_quant);
        assert_eq!(c.comparisons[0].quantity, Ok(Quantity::TensorPeak));
        assert_eq!(c.comparisons[1].quantity, Ok(Quantity::DeviceUsed));
        assert_eq!(c.comparisons[2].quantity, Ok(Quantity::Persistent));
        let v = cases.iter().find(|c| c.id == "vllm_pr10511_l3_8b_tp1_kv").unwrap();
        let s = v.serving.as_ref().unwrap();
        assert_eq!((s.max_num_batched_tokens, s.max_num_seqs), (8192, 256));
        assert_eq!(s.cuda_capacity_bytes, Some((79.22 * (1u64 << 30) as f64).round() as u64));
        let nccl = cases.iter().find(|c| c.id == "nccl_issue964_pg2_a100").unwrap();
        assert_eq!(nccl.comparisons[1].quantity, Ok(Quantity::NcclCommunicator { ranks: 4 }));
        assert!(nccl.comparisons.iter().all(|m| m.source_of_constant));
    }

    #[test]
    fn errors_name_the_line_and_the_field() {
        let first = PUBLISHED_CASES.lines().next().unwrap();
        for (from, to, field) in [
            ("\"seq_len\": 512", "\"seq_len\": 1.5", None),
            ("\"r\": 32", "\"r\": \"thirty-two\"", Some("workload.lora.r")),
            ("\"precision\": \"bf16\"", "\"precision\": \"fp64\"", Some("vramfit.precision")),
            (
                "\"checkpointing\": \"none\", \"lora_targets\"",
                "\"checkpointing\": \"some\", \"lora_targets\"",
                Some("vramfit.checkpointing"),
            ),
            ("\"bytes\": 16690000000", "\"bytes\": 0", Some("measured.bytes")),
        ] {
            assert!(first.contains(from), "{from}");
            let e = parse_published(&first.replace(from, to), "m.jsonl:7").unwrap_err().to_string();
            assert!(e.contains("m.jsonl:7"), "{e}");
            if let Some(f) = field {
                assert!(e.contains(f), "{f}: {e}");
            }
        }
        let e = parse_published("[1]", "m.jsonl:1").unwrap_err().to_string();
        assert!(e.contains("a JSON object"), "{e}");
        let twice = format!("{first}\n{first}\n");
        let e = parse_published_cases(&twice, "m.jsonl").unwrap_err().to_string();
        assert!(e.contains("m.jsonl:2") && e.contains("already used at m.jsonl:1"), "{e}");
    }
}
