//! Published training and serving throughputs
//! (`calibration/data/published/throughput.jsonl`, the set `vramfit
//! calibrate --set throughput`; format: `calibration/data/published/README.md`)
//! as the planner's typed cases ([`ThroughputCase`]): the model, the workload
//! and the hardware each source ran, for the time model to be compared with
//! (`vramfit_plan::calibrate::compare_throughput`).
//!
//! The parser is total: a line gives a case or an [`IngestError`] naming
//! `file:line` and the dotted field. A case the time model cannot run says
//! why ([`NotModelled`]) instead of being dropped. The GPU is the catalogue
//! card whose id, name or alias is `hardware.catalog_gpu` when the line
//! gives one (the source's own words are a description: "NVIDIA A100 (40 or
//! 80 GB not stated; …)"), else `hardware.gpu` exactly — never a substring.
//! What a source leaves out of a model takes the family defaults core keeps
//! ([`vramfit_core::model::defaults`]). The workload is read from the
//! source's words as documented on each function (method, precision,
//! checkpointing, interconnect).

use crate::error::IngestError;
use crate::json::Obj;
use serde_json::Value;
use vramfit_catalog::gpus::gpu_named;
use vramfit_core::model::defaults as model_defaults;
use vramfit_core::train::{Checkpointing, Optimizer, Precision, TrainKind, TrainSetup};
use vramfit_core::workload::defaults;
use vramfit_core::{DType, GpuSpec, Link, MlpKind, ModelSpec, Offload, Parallelism, Sharding, Task, Workload};
use vramfit_plan::calibrate::{CaseSetup, FigureUnit, NotModelled, ServeCase, ThroughputCase, TrainCase};

/// The published throughput set, embedded.
pub const THROUGHPUT_CASES: &str = include_str!("../../../../calibration/data/published/throughput.jsonl");
/// Where the embedded set lives in the repository (named in errors and in the report).
pub const THROUGHPUT_FILE: &str = "calibration/data/published/throughput.jsonl";

/// Fabric between machines assumed where a multi-node source does not state
/// it: 400 Gb/s per GPU (50 GB/s), the torchtitan cluster's figure.
const DEFAULT_INTER_NODE_GBS: f64 = 50.0;
/// GPUs per machine of every multi-GPU source in the set (8-GPU HGX/DGX nodes).
const GPUS_PER_NODE: u64 = 8;
/// TensorRT-LLM's `kv_cache_free_gpu_mem_fraction` 0.95 ("0.90 or lower on
/// OOM"): 0.9 of the memory left after the weights goes to the KV cache.
const TRTLLM_KV_FRACTION: f64 = 0.9;
/// TensorRT-LLM's largest batch in the benchmark ("cuda_graphs: padding on,
/// batch sizes 1..8192").
const TRTLLM_MAX_BATCH: u64 = 8192;
/// Largest case file and line accepted (the published memory set's limits).
const MAX_FILE_BYTES: usize = super::MAX_CASES_BYTES;
const MAX_LINE_BYTES: usize = super::MAX_LINE_BYTES;

/// The dotted paths used in errors.
mod paths {
    pub const HARDWARE: &str = "hardware";
    pub const MODEL: &str = "model";
    pub const WORKLOAD: &str = "workload";
    pub const PARALLELISM: &str = "workload.parallelism";
    pub const FIGURE: &str = "figure";
}

/// A number, or words that start with one (`"10 in the DeepSpeed tutorial
/// (paper's value not read)"`: the set states some values with a note).
fn number(o: Obj, key: &str) -> Result<Option<f64>, IngestError> {
    match o.get(key) {
        None => Ok(None),
        Some(v @ Value::Number(n)) => match n.as_f64() {
            Some(x) if x.is_finite() => Ok(Some(x)),
            _ => Err(o.bad(key, "a finite number", v)),
        },
        Some(Value::String(s)) => {
            Ok(s.split_whitespace().next().and_then(|t| t.parse::<f64>().ok()).filter(|x| x.is_finite()))
        }
        Some(v) => Err(o.bad(key, "a number, or words that start with one", v)),
    }
}

/// A count: a whole number of at least 0 (or words that start with one).
fn count(o: Obj, key: &str) -> Result<Option<u64>, IngestError> {
    match number(o, key)? {
        None => Ok(None),
        Some(x) if x >= 0.0 && x.fract() == 0.0 && x <= (1u64 << 53) as f64 => Ok(Some(x as u64)),
        Some(x) => Err(o.bad(key, "a whole number of at least 0", &Value::from(x))),
    }
}

/// A field's words, lowercased ("" when absent).
fn words(o: Option<Obj>, key: &str) -> Result<String, IngestError> {
    match o {
        Some(o) => Ok(o.str(key)?.unwrap_or_default().to_ascii_lowercase()),
        None => Ok(String::new()),
    }
}

/// The catalogue card of the case (see the module's note), or why there is none.
fn gpu_of(hw: Obj, gpus: &[GpuSpec]) -> Result<Result<GpuSpec, NotModelled>, IngestError> {
    let named = hw.req_str("gpu")?;
    match hw.str("catalog_gpu")? {
        Some(id) => match gpu_named(gpus, id) {
            Some(g) => Ok(Ok(g.clone())),
            None => Err(hw.bad("catalog_gpu", "a catalogue GPU id or alias", &Value::String(id.into()))),
        },
        None => Ok(gpu_named(gpus, named).cloned().ok_or_else(|| NotModelled::GpuNotInCatalogue(named.into()))),
    }
}

/// The model the source states (None: it gives no width and depth). Left
/// out: heads of [`model_defaults::HEAD_DIM`], as many KV heads, GPT-2's
/// MLP ratio and vocabulary (ZeRO-Offload's 10B GPT-2 is given by width and
/// depth only); a GPT/MPT family or a two-matrix MLP is a plain MLP with
/// tied embeddings (GPT/MPT). Positions are not limited (the source ran it).
fn model_of(o: Obj, id: &str) -> Result<Option<ModelSpec>, IngestError> {
    let Some(m) = o.obj("model", paths::MODEL)? else { return Ok(None) };
    let (Some(h), Some(l)) = (count(m, "hidden_size")?, count(m, "num_layers")?) else { return Ok(None) };
    let heads = count(m, "num_attention_heads")?.unwrap_or(h / model_defaults::HEAD_DIM);
    let kv = count(m, "num_key_value_heads")?.unwrap_or(heads);
    let stated_mlp = count(m, "intermediate_size")?;
    let mlp = stated_mlp.unwrap_or(h.saturating_mul(model_defaults::GPT2_MLP_RATIO));
    let vocab = count(m, "vocab_size")?.unwrap_or(model_defaults::GPT2_VOCAB_SIZE);
    let mut spec = ModelSpec::llama_like(id, h, l, heads, kv, mlp, vocab);
    let family = words(Some(m), "family")?;
    let gpt = family.contains("gpt") || family == "mpt";
    if words(Some(m), "mlp")?.contains("2 matrices") || gpt || stated_mlp.is_none() {
        spec.mlp = MlpKind::Plain;
    }
    spec.tied_embeddings |= gpt;
    spec.max_position_embeddings = 1 << 20;
    Ok(Some(spec))
}

/// The training method: the workload's `method` words (`qlora…`, `lora…`, else full).
fn train_kind(method: &str) -> TrainKind {
    if method.starts_with("qlora") {
        TrainKind::Qlora
    } else if method.starts_with("lora") {
        TrainKind::Lora
    } else {
        TrainKind::Full
    }
}

/// The precision from the source's words: AMP (`amp_bf16`, an adapter under
/// autocast), fp16 mixed, FSDP2 mixed precision (`param_dtype`), else pure bf16.
fn precision(words: &str, kind: TrainKind) -> Precision {
    if words.starts_with("amp") || kind != TrainKind::Full && words.contains("autocast") {
        Precision::AmpBf16
    } else if words.contains("fp16 mixed") {
        Precision::MixedFp16
    } else if words.contains("fsdp2") || words.contains("param_dtype") {
        Precision::MixedBf16
    } else {
        Precision::Bf16
    }
}

/// Checkpointing from the source's words: `selective…`, `none`/absent, else full.
fn checkpointing(words: &str) -> Checkpointing {
    if words.contains("selective") {
        Checkpointing::Selective
    } else if words.starts_with("none") || words.is_empty() {
        Checkpointing::None
    } else {
        Checkpointing::Full
    }
}

/// The parallel layout: GPUs (`parallelism.gpus`, else the hardware count),
/// TP, pipeline stages (`pp`), ZeRO stage, FSDP (a `fsdp` entry or `dp_shard`: full sharding over
/// more than one rank) and CPU offload (`fsdp.cpu_offload: true`, or an
/// `offload` of the optimizer).
fn parallelism(w: Obj, hardware_count: Option<u64>) -> Result<Parallelism, IngestError> {
    let par = w.obj("parallelism", paths::PARALLELISM)?;
    let get = |key: &str| par.map(|p| count(p, key)).transpose().map(Option::flatten);
    let gpus = get("gpus")?.or(hardware_count).unwrap_or(1);
    let tp = get("tp")?.unwrap_or(1);
    let zero = get("zero_stage")?;
    let fsdp = par.is_some_and(|p| p.get("fsdp").is_some() || p.get("dp_shard").is_some());
    // `fsdp` is the FSDP settings object, or the sharding strategy in words
    let fsdp_offload = match par.and_then(|p| p.get("fsdp")) {
        Some(Value::Object(f)) => f.get("cpu_offload") == Some(&Value::Bool(true)),
        _ => false,
    };
    let cpu_offload = fsdp_offload || words(par, "offload")?.starts_with("optimizer");
    let pp = get("pp")?.unwrap_or(1).max(1);
    let dp = (gpus / tp.max(1) / pp).max(1);
    let sharding = match zero {
        Some(z) => u8::try_from(z).ok().and_then(Sharding::from_stage).unwrap_or(Sharding::None),
        None if fsdp && dp > 1 => Sharding::Zero3,
        None if cpu_offload => Sharding::Zero3,
        None => Sharding::None,
    };
    let (offload_optimizer, offload_params) = match (cpu_offload, sharding) {
        (true, Sharding::Zero3) => (Offload::Cpu, Offload::Cpu),
        (true, _) => (Offload::Cpu, Offload::None),
        _ => (Offload::None, Offload::None),
    };
    // interleaved 1F1B: the source's virtual stages per rank (Megatron-LM's
    // `--num-layers-per-virtual-pipeline-stage` = layers / (pp × this))
    let virtual_stages = get("virtual_stages")?.unwrap_or(1).max(1);
    // context parallelism: the source's CP degree (Llama 3's long-context stage, Table 4)
    let cp = get("cp")?.unwrap_or(1).max(1);
    Ok(Parallelism {
        gpus,
        tp,
        pp,
        virtual_stages,
        sharding,
        offload_optimizer,
        offload_params,
        cp,
        ..Parallelism::default()
    })
}

/// A layout part the time model cannot express yet, named: an interleaved
/// pipeline schedule whose virtual stages per rank the source does not state
/// (its bubble depends on them: (p − 1)/(v·m), Narayanan et al. 2021 §2.2.2).
/// Context parallelism (`parallelism.cp`) is expressed (`Parallelism::cp`).
fn unexpressed_layout(w: Obj) -> Result<Option<NotModelled>, IngestError> {
    let Some(par) = w.obj("parallelism", paths::PARALLELISM)? else { return Ok(None) };
    let schedule = words(Some(par), "pipeline_schedule")?;
    if schedule.contains("interleaved") && count(par, "virtual_stages")?.is_none() {
        return Ok(Some(NotModelled::Layout("an interleaved pipeline with unstated virtual stages".into())));
    }
    Ok(None)
}

/// A serving layout the calibration cannot run, named (issue 21, item 3:
/// published large-scale serving): prefill/decode disaggregation
/// (`parallelism.pd_disaggregation`: separate prefill and decode servers,
/// each figure one phase's with the other "assumed unlimited", as the SGLang
/// team's 96-H100 DeepSeek deployment measured them), and expert parallelism
/// or data-parallel attention (`ep`, `dp_attention` above 1), which the
/// serving comparison does not run (its cases are one TP group of dense
/// layers, [`ServeCase`]). Checked before the card and the model: such a case
/// says why it is not counted whatever else it lacks.
fn unexpressed_serving_layout(w: Obj) -> Result<Option<NotModelled>, IngestError> {
    let Some(par) = w.obj("parallelism", paths::PARALLELISM)? else { return Ok(None) };
    let ep = count(par, "ep")?.unwrap_or(1);
    let machines = count(par, "machines")?.unwrap_or(1);
    if par.get("pd_disaggregation") == Some(&Value::Bool(true)) {
        return Ok(Some(NotModelled::Layout(format!(
            "prefill/decode disaggregation with expert parallelism over {machines} machines (EP {ep})"
        ))));
    }
    if ep > 1 || count(par, "dp_attention")?.is_some_and(|d| d > 1) {
        return Ok(Some(NotModelled::Layout(format!("expert parallelism in a serving case (EP {ep})"))));
    }
    Ok(None)
}

/// A run with context parallelism is timed as torchtitan runs CP, the public
/// PyTorch-native 4D stack (FSDP2, TP, PP, CP): its K/V exchange is an
/// all-gather that overlaps only the local block's attention, as Llama 3's
/// own CP does ("we all-gather the K and V tensors, and then compute attention
/// output for the local Q tensor chunk", Dubey et al. 2024 §3.3.2); the
/// Hugging Face default engine runs no CP (`validate::context_parallel`).
fn context_parallel_engine(mut w: Workload) -> Workload {
    if w.parallelism.cp > 1 {
        if let Task::Train(t) = &mut w.task {
            t.engine = vramfit_core::workload::Engine::Torchtitan;
        }
    }
    w
}

/// torchtitan's float8 linears (torchao `Float8Linear` over FSDP2 bf16
/// parameters, the rows' own words): FP8 training as `mixed-fp8` under
/// `--engine torchtitan`, the framework that ran them.
fn float8_training(mut w: Workload) -> Workload {
    if let Task::Train(t) = &mut w.task {
        t.precision = Precision::MixedFp8;
        t.engine = vramfit_core::workload::Engine::Torchtitan;
    }
    w
}

/// The fabric between machines from the source's words: 400 Gb/s RDMA per
/// GPU (50 GB/s), 1600 Gb/s per 8-GPU node (25 GB/s per GPU), else
/// [`DEFAULT_INTER_NODE_GBS`].
fn inter_node_gbs(interconnect: &str) -> f64 {
    if interconnect.contains("400 gb/s") {
        50.0
    } else if interconnect.contains("1600 gbps") {
        1600.0 / 8.0 / 8.0
    } else {
        DEFAULT_INTER_NODE_GBS
    }
}

/// A training case. Micro-batch is required; the sequence defaults to
/// GPT-2's 1024 positions (the one source without it is Megatron GPT-2's
/// ZeRO-Offload run), accumulation to core's default.
fn train_case(o: Obj, hw: Obj, gpus: &[GpuSpec], id: &str) -> Result<Result<CaseSetup, NotModelled>, IngestError> {
    let gpu = match gpu_of(hw, gpus)? {
        Ok(g) => g,
        Err(why) => return Ok(Err(why)),
    };
    let Some(model) = model_of(o, id)? else { return Ok(Err(NotModelled::NoArchitecture)) };
    let Some(w) = o.obj("workload", paths::WORKLOAD)? else { return Ok(Err(NotModelled::Missing("workload"))) };
    let kind = train_kind(&words(Some(w), "method")?);
    let precision_words = words(Some(w), "precision")?;
    let Some(micro) = count(w, "micro_batch_per_gpu")? else { return Ok(Err(NotModelled::Missing("micro-batch"))) };
    if let Some(why) = unexpressed_layout(w)? {
        return Ok(Err(why));
    }
    let parallelism = parallelism(w, count(hw, "count")?)?;
    let workload = Workload {
        task: Task::Train(TrainSetup {
            kind,
            precision: precision(&precision_words, kind),
            optimizer: Optimizer::AdamW,
            batch: micro,
            seq: count(w, "seq_len")?.unwrap_or(model_defaults::GPT2_POSITIONS),
            grad_accum: count(w, "grad_accum")?.unwrap_or(defaults::GRAD_ACCUM).max(1),
            checkpointing: checkpointing(&words(Some(w), "checkpointing")?),
            ..TrainSetup::default()
        }),
        parallelism,
        ..Workload::default()
    };
    let workload = context_parallel_engine(workload);
    let fp8_linears = precision_words.contains("float8") && !precision_words.contains("no float8");
    let workload = if fp8_linears { float8_training(workload) } else { workload };
    let interconnect = words(Some(hw), "interconnect")?;
    let multi = workload.parallelism.gpus > 1;
    // a PCIe card's NVLink figure is a bridge's: only a source that says NVLink has it
    let nvlink = multi && (interconnect.contains("nvlink") || gpu.nvlink_gbs.is_some() && !gpu.id.contains("pcie"));
    Ok(Ok(CaseSetup::Train(Box::new(TrainCase {
        model,
        workload,
        gpu,
        link: if nvlink { Link::Nvlink } else { Link::Pcie },
        gpus_per_node: GPUS_PER_NODE,
        inter_node_gbs: Some(inter_node_gbs(&interconnect)),
        fp8_linears,
        cpu_cores: None,
    }))))
}

/// A serving case (TensorRT-LLM's offline benchmark): input and output
/// lengths required; fp8 weights take an fp8 KV cache (TensorRT-LLM's FP8
/// checkpoints quantize it too, assumed).
fn serve_case(
    o: Obj,
    hw: Obj,
    gpus: &[GpuSpec],
    id: &str,
    per_gpu: bool,
) -> Result<Result<CaseSetup, NotModelled>, IngestError> {
    if let Some(why) = o.obj("workload", paths::WORKLOAD)?.map(unexpressed_serving_layout).transpose()?.flatten() {
        return Ok(Err(why));
    }
    let gpu = match gpu_of(hw, gpus)? {
        Ok(g) => g,
        Err(why) => return Ok(Err(why)),
    };
    let Some(model) = model_of(o, id)? else { return Ok(Err(NotModelled::NoArchitecture)) };
    let Some(w) = o.obj("workload", paths::WORKLOAD)? else { return Ok(Err(NotModelled::Missing("workload"))) };
    let Some(input_len) = count(w, "input_len")? else { return Ok(Err(NotModelled::Missing("input length"))) };
    let Some(output_len) = count(w, "output_len")? else { return Ok(Err(NotModelled::Missing("output length"))) };
    let fp8 = words(Some(w), "precision")?.contains("fp8");
    let par = w.obj("parallelism", paths::PARALLELISM)?;
    let tp = par.map(|p| count(p, "tp")).transpose()?.flatten().unwrap_or(1);
    let case = ServeCase {
        model,
        gpu,
        tp,
        weight_dtype: if fp8 { DType::F8 } else { DType::BF16 },
        kv_dtype: if fp8 { DType::F8 } else { DType::F16 },
        input_len,
        output_len,
        kv_fraction: TRTLLM_KV_FRACTION,
        max_batch: TRTLLM_MAX_BATCH,
    };
    Ok(Ok(CaseSetup::Serve { case: Box::new(case), per_gpu }))
}

/// Parse one line of the throughput set against the GPU catalogue `gpus`.
pub fn parse_throughput(line: &str, origin: &str, gpus: &[GpuSpec]) -> Result<ThroughputCase, IngestError> {
    let root: Value =
        serde_json::from_str(line).map_err(|e| IngestError::Json { file: origin.into(), reason: e.to_string() })?;
    let o = Obj::root(&root, origin, "(line)")?;
    let id = o.req_str("id")?;
    let group = o.req_str("group")?;
    let hw = o.obj("hardware", paths::HARDWARE)?.ok_or_else(|| o.missing("hardware"))?;
    let figure = o.obj("figure", paths::FIGURE)?.ok_or_else(|| o.missing("figure"))?;
    let published = match figure.get("value") {
        Some(Value::Number(n)) if n.as_f64().is_some_and(|x| x.is_finite() && x > 0.0) => n.as_f64().unwrap_or(0.0),
        Some(v) => return Err(figure.bad("value", "a positive number", v)),
        None => return Err(figure.missing("value")),
    };
    let unit = FigureUnit::parse(figure.req_str("unit")?);
    let per_gpu = figure.str("per")? == Some("per_gpu");
    let method = words(o.obj("workload", paths::WORKLOAD)?, "method")?;
    let setup = match group {
        "inference" if method.contains("eager") => Err(NotModelled::EagerGeneration),
        "inference" | "serving" => serve_case(o, hw, gpus, id, per_gpu)?,
        _ => train_case(o, hw, gpus, id)?,
    };
    let count = number(hw, "count")?.unwrap_or(1.0);
    Ok(ThroughputCase {
        id: id.to_string(),
        group: group.to_string(),
        hardware: format!("{count} × {}", hw.req_str("gpu")?),
        unit,
        published,
        confidence: o.str("confidence")?.unwrap_or_default().to_string(),
        url: o.str("url")?.unwrap_or_default().to_string(),
        setup,
    })
}

/// Parse a whole throughput set (`file` names it in errors); blank lines are skipped.
pub fn parse_throughput_cases(text: &str, file: &str, gpus: &[GpuSpec]) -> Result<Vec<ThroughputCase>, IngestError> {
    if text.len() > MAX_FILE_BYTES {
        return Err(IngestError::Invalid {
            file: file.into(),
            reason: format!("{} bytes is too large for a case file (limit {MAX_FILE_BYTES})", text.len()),
        });
    }
    let mut out: Vec<(ThroughputCase, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let origin = format!("{file}:{}", i + 1);
        if line.len() > MAX_LINE_BYTES {
            return Err(IngestError::Invalid { file: origin, reason: "line longer than 1 MiB".into() });
        }
        let case = parse_throughput(line, &origin, gpus)?;
        if let Some((_, first)) = out.iter().find(|(c, _)| c.id == case.id) {
            return Err(IngestError::Invalid {
                file: origin,
                reason: format!("id '{}' is already used at {first}", case.id),
            });
        }
        out.push((case, origin));
    }
    Ok(out.into_iter().map(|(c, _)| c).collect())
}

/// The embedded throughput set against the GPU catalogue `gpus`.
pub fn embedded_throughput(gpus: &[GpuSpec]) -> Result<Vec<ThroughputCase>, IngestError> {
    parse_throughput_cases(THROUGHPUT_CASES, THROUGHPUT_FILE, gpus)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramfit_catalog::gpus::builtin_gpus;

    #[test]
    fn every_embedded_case_resolves_its_gpu_through_the_catalogue() {
        let gpus = builtin_gpus().unwrap();
        let cases = embedded_throughput(&gpus).unwrap();
        assert_eq!(cases.len(), 89);
        for c in &cases {
            match &c.setup {
                Err(NotModelled::GpuNotInCatalogue(g)) => assert_eq!(g, "NVIDIA RTX A6000", "{}", c.id),
                Err(NotModelled::EagerGeneration) | Err(NotModelled::NoArchitecture) => {}
                Err(NotModelled::Layout(_)) => {
                    assert!(c.id.starts_with("llama3_t4_405b") || c.id.starts_with("lmsys2025_"), "{}", c.id)
                }
                Err(other) => panic!("{}: {other}", c.id),
                Ok(_) => {}
            }
        }
        let gpu_of = |id: &str| match &cases.iter().find(|c| c.id == id).unwrap().setup {
            Ok(CaseSetup::Train(t)) => t.gpu.id.clone(),
            Ok(CaseSetup::Serve { case, .. }) => case.gpu.id.clone(),
            Err(e) => panic!("{id}: {e}"),
        };
        // a source's description resolves through `catalog_gpu`, a product name through the aliases
        assert_eq!(gpu_of("tt_l31_70b_lora_8xa100"), "a100-80gb-sxm");
        assert_eq!(gpu_of("ti_l31_8b_fsdp8_sac"), "h100-sxm");
        assert_eq!(gpu_of("trtllm_l31_8b_fp8_h100_tp1_128_128"), "h100-sxm");
        assert_eq!(gpu_of("foundry_mpt7b_a100_80gb_8gpu_s2048"), "a100-80gb-sxm");
        assert_eq!(gpu_of("zero_offload_paper_10b_v100"), "v100-sxm2-32gb");
        assert_eq!(gpu_of("trtllm_l31_405b_fp8_h200_tp8_1000_1000"), "h200-sxm");
        // the SGLang team's 96-H100 DeepSeek deployment (lmsys blog, 2025-05-05) is listed with its reason
        let lmsys = cases.iter().find(|c| c.id == "lmsys2025_dsv3_decode_h100_72gpu_ep72").unwrap();
        assert_eq!(
            lmsys.setup.as_ref().unwrap_err().to_string(),
            "prefill/decode disaggregation with expert parallelism over 9 machines (EP 72) is a layout the time model cannot express yet"
        );
    }

    const LINE: &str = r#"{"id": "x", "group": "full", "hardware": {"gpu": "NVIDIA A100-SXM4-80GB", "count": 8, "interconnect": "NVLink"}, "model": {"family": "llama", "hidden_size": 4096, "num_layers": 32}, "workload": {"method": "full", "precision": "amp_bf16", "micro_batch_per_gpu": 2, "parallelism": {"gpus": 8, "fsdp": {"cpu_offload": true}}}, "figure": {"value": 3000.0, "unit": "tokens/s/GPU", "per": "per_gpu"}}"#;

    #[test]
    fn a_line_reads_into_a_typed_case() {
        let gpus = builtin_gpus().unwrap();
        let c = parse_throughput(LINE, "t.jsonl:1", &gpus).unwrap();
        assert_eq!(c.hardware, "8 × NVIDIA A100-SXM4-80GB");
        let Ok(CaseSetup::Train(t)) = &c.setup else { panic!("{:?}", c.setup) };
        assert_eq!(t.gpu.id, "a100-80gb-sxm");
        assert_eq!(t.link, Link::Nvlink);
        // heads of 128, a plain 4h MLP and GPT-2's vocabulary where the source gives none
        assert_eq!((t.model.num_heads, t.model.intermediate_size, t.model.vocab_size), (32, 16384, 50_257));
        assert_eq!(t.model.mlp, MlpKind::Plain);
        let p = &t.workload.parallelism;
        assert_eq!((p.sharding, p.offload_optimizer, p.offload_params), (Sharding::Zero3, Offload::Cpu, Offload::Cpu));
        let Task::Train(s) = &t.workload.task else { panic!() };
        assert_eq!((s.precision, s.batch, s.seq), (Precision::AmpBf16, 2, 1024));
    }

    /// Pipeline stages and context parallelism are read (Megatron-LM's Table 1
    /// rows run PP up to 64; Llama 3's 128K stage CP 16, timed as torchtitan's
    /// all-gather CP); an interleaved schedule without its virtual stages is
    /// named as a layout the time model cannot express.
    #[test]
    fn pipeline_stages_are_read_and_unexpressed_layouts_named() {
        let gpus = builtin_gpus().unwrap();
        let line = LINE.replace(r#""fsdp": {"cpu_offload": true}"#, r#""tp": 2, "pp": 4, "zero_stage": 0"#);
        let c = parse_throughput(&line, "t", &gpus).unwrap();
        let Ok(CaseSetup::Train(t)) = &c.setup else { panic!("{:?}", c.setup) };
        let p = &t.workload.parallelism;
        assert_eq!((p.gpus, p.tp, p.pp, p.dp(), p.sharding), (8, 2, 4, 1, Sharding::None));
        let cp = parse_throughput(
            &line.replace(r#""gpus": 8"#, r#""gpus": 16"#).replace(r#""pp": 4"#, r#""pp": 4, "cp": 2"#),
            "t",
            &gpus,
        )
        .unwrap();
        let Ok(CaseSetup::Train(t)) = &cp.setup else { panic!("{:?}", cp.setup) };
        let p = &t.workload.parallelism;
        assert_eq!((p.gpus, p.tp, p.cp, p.pp, p.dp(), p.shard_dp()), (16, 2, 2, 4, 1, 2));
        let Task::Train(s) = &t.workload.task else { panic!() };
        assert_eq!(s.engine, vramfit_core::workload::Engine::Torchtitan);
        let il = line.replace(r#""pp": 4"#, r#""pp": 4, "pipeline_schedule": "interleaved 1F1B""#);
        assert!(matches!(parse_throughput(&il, "t", &gpus).unwrap().setup, Err(NotModelled::Layout(_))));
    }

    #[test]
    fn bad_lines_name_file_line_and_field() {
        let gpus = builtin_gpus().unwrap();
        let err = |line: &str| parse_throughput_cases(line, "t.jsonl", &gpus).unwrap_err().to_string();
        assert!(err("{").starts_with("t.jsonl:1: not valid JSON"), "{}", err("{"));
        let e = err(&LINE.replace(r#""value": 3000.0"#, r#""value": "fast""#));
        assert!(e.contains("t.jsonl:1: field 'figure.value': expected a positive number"), "{e}");
        let e = err(&LINE.replace(r#""micro_batch_per_gpu": 2"#, r#""micro_batch_per_gpu": 2.5"#));
        assert!(e.contains("field 'workload.micro_batch_per_gpu': expected a whole number"), "{e}");
        let e = err(&LINE.replace(r#""count": 8,"#, r#""count": 8, "catalog_gpu": "a100-81gb","#));
        assert!(e.contains("field 'hardware.catalog_gpu': expected a catalogue GPU id or alias"), "{e}");
        let e = err(&format!("{LINE}\n\n{LINE}"));
        assert!(e.contains("t.jsonl:3: id 'x' is already used at t.jsonl:1"), "{e}");
        // a GPU named by a substring of a catalogue name is not that card
        let c = parse_throughput(&LINE.replace("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB SXM4 (DGX)"), "t", &gpus);
        assert!(matches!(c.unwrap().setup, Err(NotModelled::GpuNotInCatalogue(_))));
    }
}
