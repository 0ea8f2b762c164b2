//! `vramfit calibrate --set throughput`: the planner's time model against
//! the published throughputs of `calibration/data/published/throughput.jsonl`
//! (llm-foundry, torchtitan, torchtune, fms-acceleration, LLaMA-Factory,
//! TensorRT-LLM, ZeRO-Offload; each with its URL and quote). Prints the
//! ratio modelled / published per case and exits 1 when the median ratio
//! leaves 0.85–1.15 or a case leaves 0.6–1.6. Cases the time model does not
//! cover (eager batch-1 generation, a GPU outside the catalogue, no
//! architecture) are listed with the reason and not counted.

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write;
use vramfit_catalog::find_gpu;
use vramfit_core::train::{Checkpointing, Optimizer, Precision, TrainKind, TrainSetup};
use vramfit_core::{DType, GpuSpec, Link, MlpKind, ModelSpec, Offload, Parallelism, Sharding, Task, Workload};
use vramfit_plan::calibrate::{
    serve_tokens_per_s, train_model_flops_per_token, train_peak_and_flops, train_tokens_per_gpu,
};
use vramfit_plan::calibrate::{ServeCase, TrainCase};
use vramfit_plan::TimeModel;

/// The published set, embedded.
pub const THROUGHPUT_JSONL: &str = include_str!("../../../../calibration/data/published/throughput.jsonl");
pub const THROUGHPUT_FILE: &str = "calibration/data/published/throughput.jsonl";

/// The bar: the median ratio inside this range…
pub const MEDIAN_RANGE: (f64, f64) = (0.85, 1.15);
/// …and every counted case inside this one.
pub const CASE_RANGE: (f64, f64) = (0.6, 1.6);

/// Fabric between machines assumed where a multi-node source does not state
/// it: 400 Gb/s per GPU (50 GB/s), the torchtitan cluster's figure.
const DEFAULT_INTER_NODE_GBS: f64 = 50.0;

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub id: String,
    pub group: String,
    pub hardware: String,
    pub unit: String,
    pub published: f64,
    /// None: not modelled (see `skipped`)
    pub modelled: Option<f64>,
    pub ratio: Option<f64>,
    pub confidence: String,
    pub url: String,
    /// why the case is not counted
    pub skipped: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema: u32,
    pub command: &'static str,
    pub set: &'static str,
    pub cases: Vec<Row>,
    pub counted: usize,
    pub median_ratio: Option<f64>,
    pub min_ratio: Option<f64>,
    pub max_ratio: Option<f64>,
    pub pass: bool,
}

fn s<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut x = v;
    for p in path {
        x = x.get(p)?;
    }
    Some(x)
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    s(v, path).and_then(|x| x.as_f64().or_else(|| x.as_str().and_then(|t| t.split_whitespace().next()?.parse().ok())))
}

fn text(v: &Value, path: &[&str]) -> String {
    s(v, path).and_then(|x| x.as_str()).unwrap_or_default().to_string()
}

/// The catalogue GPU a source names (None: not in the catalogue).
fn gpu_of(name: &str, gpus: &[GpuSpec]) -> Option<GpuSpec> {
    let n = name.to_ascii_lowercase();
    let id = if n.contains("h100") {
        "h100-sxm"
    } else if n.contains("a100") && n.contains("40gb") && !n.contains("or 80") {
        if n.contains("sxm") {
            "a100-40gb-sxm"
        } else {
            "a100-40gb-pcie"
        }
    } else if n.contains("a100") {
        "a100-80gb-sxm"
    } else if n.contains("4090") {
        "rtx-4090"
    } else if n.contains("v100") {
        "v100-sxm2-32gb"
    } else {
        return None;
    };
    find_gpu(gpus, id).ok().cloned()
}

fn model_of(v: &Value) -> Option<ModelSpec> {
    let m = s(v, &["model"])?;
    let h = num(m, &["hidden_size"])? as u64;
    let l = num(m, &["num_layers"])? as u64;
    // a GPT-2-shaped model given by width and depth only (ZeRO-Offload's 10B):
    // heads of 128, a 4h plain MLP, GPT-2's vocabulary (none of them moves the FLOPs much)
    let heads = num(m, &["num_attention_heads"]).map(|x| x as u64).unwrap_or(h / 128);
    let kv = num(m, &["num_key_value_heads"]).map(|x| x as u64).unwrap_or(heads);
    let i = num(m, &["intermediate_size"]).map(|x| x as u64).unwrap_or(4 * h);
    let vocab = num(m, &["vocab_size"]).map(|x| x as u64).unwrap_or(50257);
    let mut spec = ModelSpec::llama_like(&text(v, &["id"]), h, l, heads, kv, i, vocab);
    let family = text(m, &["family"]).to_ascii_lowercase();
    let plain = text(m, &["mlp"]).contains("2 matrices")
        || family == "mpt"
        || family.contains("gpt")
        || num(m, &["intermediate_size"]).is_none();
    if plain {
        spec.mlp = MlpKind::Plain;
    }
    if family.contains("gpt") || family == "mpt" {
        spec.tied_embeddings = true;
    }
    spec.max_position_embeddings = 1 << 20;
    Some(spec)
}

fn checkpointing(w: &Value) -> Checkpointing {
    let c = text(w, &["checkpointing"]).to_ascii_lowercase();
    if c.contains("selective") {
        Checkpointing::Selective
    } else if c.starts_with("none") || c.is_empty() {
        Checkpointing::None
    } else {
        Checkpointing::Full
    }
}

fn train_case(v: &Value, gpus_cat: &[GpuSpec]) -> Result<TrainCase, String> {
    let gpu_name = text(v, &["hardware", "gpu"]);
    let gpu = gpu_of(&gpu_name, gpus_cat).ok_or(format!("{gpu_name} is not in the GPU catalogue"))?;
    let model = model_of(v).ok_or("the source gives no architecture")?;
    let w = s(v, &["workload"]).ok_or("no workload")?;
    let method = text(w, &["method"]).to_ascii_lowercase();
    let kind = if method.starts_with("qlora") {
        TrainKind::Qlora
    } else if method.starts_with("lora") {
        TrainKind::Lora
    } else {
        TrainKind::Full
    };
    let precision_text = text(w, &["precision"]).to_ascii_lowercase();
    let precision =
        if precision_text.starts_with("amp") || kind != TrainKind::Full && precision_text.contains("autocast") {
            Precision::AmpBf16
        } else if precision_text.contains("fp16 mixed") {
            Precision::MixedFp16
        } else if precision_text.contains("fsdp2") || precision_text.contains("param_dtype") {
            Precision::MixedBf16
        } else {
            Precision::Bf16
        };
    let micro = num(w, &["micro_batch_per_gpu"]).ok_or("no micro-batch")? as u64;
    let seq = num(w, &["seq_len"]).unwrap_or(1024.0) as u64;
    let accum = num(w, &["grad_accum"]).unwrap_or(1.0).max(1.0) as u64;
    let par = s(w, &["parallelism"]).cloned().unwrap_or(Value::Null);
    let gpus = num(&par, &["gpus"]).or(num(v, &["hardware", "count"])).unwrap_or(1.0) as u64;
    let tp = num(&par, &["tp"]).unwrap_or(1.0) as u64;
    let fsdp = par.get("fsdp").is_some_and(|f| !f.is_null())
        || par.get("dp_shard").is_some()
        || text(&par, &["fsdp"]).contains("SHARD");
    let zero = num(&par, &["zero_stage"]).map(|z| z as u8);
    let offload_text = format!("{} {}", par, text(w, &["optimizer"])).to_ascii_lowercase();
    let cpu_offload = offload_text.contains("cpu_offload\":true") || offload_text.contains("offload\":\"optimizer");
    let dp = (gpus / tp.max(1)).max(1);
    let sharding = match zero {
        Some(z) => Sharding::from_stage(z).unwrap_or(Sharding::None),
        None if fsdp && dp > 1 => Sharding::Zero3,
        None if cpu_offload => Sharding::Zero3,
        None => Sharding::None,
    };
    let (off_opt, off_par) = match (cpu_offload, sharding) {
        (true, Sharding::Zero3) => (Offload::Cpu, Offload::Cpu),
        (true, _) => (Offload::Cpu, Offload::None),
        _ => (Offload::None, Offload::None),
    };
    let workload = Workload {
        task: Task::Train(TrainSetup {
            kind,
            precision,
            optimizer: Optimizer::AdamW,
            batch: micro,
            seq,
            grad_accum: accum,
            checkpointing: checkpointing(w),
            ..TrainSetup::default()
        }),
        parallelism: Parallelism {
            gpus,
            tp,
            pp: 1,
            sharding,
            offload_optimizer: off_opt,
            offload_params: off_par,
            ..Parallelism::default()
        },
        ..Workload::default()
    };
    let inter = text(v, &["hardware", "interconnect"]).to_ascii_lowercase();
    let nvlink = gpus > 1 && (inter.contains("nvlink") || gpu.nvlink_gbs.is_some() && !gpu.id.contains("pcie"));
    let inter_node_gbs = if inter.contains("400 gb/s") {
        Some(50.0)
    } else if inter.contains("1600 gbps") {
        Some(1600.0 / 8.0 / 8.0)
    } else {
        Some(DEFAULT_INTER_NODE_GBS)
    };
    Ok(TrainCase {
        model,
        workload,
        gpu,
        link: if nvlink { Link::Nvlink } else { Link::Pcie },
        gpus_per_node: 8,
        inter_node_gbs,
        fp8_linears: precision_text.contains("float8") && !precision_text.contains("no float8"),
        cpu_cores: None,
    })
}

fn serve_case(v: &Value, gpus_cat: &[GpuSpec]) -> Result<ServeCase, String> {
    let gpu_name = text(v, &["hardware", "gpu"]);
    let gpu = gpu_of(&gpu_name, gpus_cat).ok_or(format!("{gpu_name} is not in the GPU catalogue"))?;
    let model = model_of(v).ok_or("the source gives no architecture")?;
    let w = s(v, &["workload"]).ok_or("no workload")?;
    let input = num(w, &["input_len"]).ok_or("no input length")? as u64;
    let output = num(w, &["output_len"]).ok_or("no output length")? as u64;
    let fp8 = text(w, &["precision"]).to_ascii_lowercase().contains("fp8");
    Ok(ServeCase {
        model,
        gpu,
        tp: num(w, &["parallelism", "tp"]).unwrap_or(1.0) as u64,
        weight_dtype: if fp8 { DType::F8 } else { DType::BF16 },
        // TensorRT-LLM's FP8 checkpoints quantize the KV cache to fp8 too (assumed)
        kv_dtype: if fp8 { DType::F8 } else { DType::F16 },
        input_len: input,
        output_len: output,
        // kv_cache_free_gpu_mem_fraction 0.95 ("0.90 or lower on OOM"): 0.9 of the rest
        kv_fraction: 0.9,
        // "cuda_graphs: padding on, batch sizes 1..8192"
        max_batch: 8192,
    })
}

/// One case: its modelled figure in the source's unit, or why it is not modelled.
fn evaluate(v: &Value, gpus: &[GpuSpec], tm: &TimeModel) -> Result<f64, String> {
    let group = text(v, &["group"]);
    let unit = text(v, &["figure", "unit"]);
    let method = text(v, &["workload", "method"]).to_ascii_lowercase();
    match group.as_str() {
        "inference" if method.contains("eager") => Err(
            "eager PyTorch generation at batch 1 is bound by kernel launches, not memory bandwidth: outside the time model (serving engines)".into(),
        ),
        "inference" | "serving" => {
            let c = serve_case(v, gpus)?;
            let t = serve_tokens_per_s(&c, tm).map_err(|e| e.to_string())?;
            Ok(if text(v, &["figure", "per"]) == "per_gpu" { t / c.tp.max(1) as f64 } else { t })
        }
        _ => {
            let c = train_case(v, gpus)?;
            if c.fp8_linears {
                return Err("float8 training (torchao float8 linears): the planner does not plan fp8 training, so its time model has no fp8-training rate".into());
            }
            let per_gpu = train_tokens_per_gpu(&c, tm).map_err(|e| e.to_string())?;
            if unit == "tokens/s/GPU" {
                // the published figure must be possible on one GPU at all
                let (peak, flops) = train_peak_and_flops(&c).map_err(|e| e.to_string())?;
                let published = num(v, &["figure", "value"]).unwrap_or(0.0);
                let used = published * flops / peak;
                if used > 1.0 {
                    let n = c.workload.parallelism.gpus.max(1);
                    return Err(format!(
                        "as tokens/s per GPU it needs {:.0}% of the GPU's dense peak ({} FLOPs a token): impossible; read as the total over {n} GPUs the model gives ratio {:.2}",
                        used * 100.0,
                        fmt_flops(flops),
                        per_gpu * n as f64 / published
                    ));
                }
            }
            match unit.as_str() {
                "tokens/s/GPU" => Ok(per_gpu),
                "TFLOPS/GPU" => Ok(per_gpu * train_model_flops_per_token(&c).map_err(|e| e.to_string())? / 1e12),
                u => Err(format!("unit {u} is not compared")),
            }
        }
    }
}

fn fmt_flops(f: f64) -> String {
    format!("{:.2e}", f)
}

fn median(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// Compare every case of `text` (JSONL) with the time model.
pub fn compare(jsonl: &str, file: &str, gpus: &[GpuSpec], tm: &TimeModel) -> anyhow::Result<Report> {
    let mut cases = Vec::new();
    for (i, line) in jsonl.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line).with_context(|| format!("{file}:{}: not a JSON object", i + 1))?;
        let id = text(&v, &["id"]);
        let Some(published) = num(&v, &["figure", "value"]) else {
            bail!("{file}:{}: field `figure.value`: expected a number", i + 1);
        };
        let r = evaluate(&v, gpus, tm);
        let count = num(&v, &["hardware", "count"]).unwrap_or(1.0);
        let (modelled, skipped) = match r {
            Ok(m) => (Some(m), None),
            Err(why) => (None, Some(why)),
        };
        cases.push(Row {
            id,
            group: text(&v, &["group"]),
            hardware: format!("{count} × {}", text(&v, &["hardware", "gpu"])),
            unit: text(&v, &["figure", "unit"]),
            published,
            modelled,
            ratio: modelled.map(|m| m / published),
            confidence: text(&v, &["confidence"]),
            url: text(&v, &["url"]),
            skipped,
        });
    }
    let mut ratios: Vec<f64> = cases.iter().filter_map(|c| c.ratio).collect();
    let min_ratio = ratios.iter().copied().reduce(f64::min);
    let max_ratio = ratios.iter().copied().reduce(f64::max);
    let counted = ratios.len();
    let median_ratio = median(&mut ratios);
    let pass = median_ratio.is_some_and(|m| (MEDIAN_RANGE.0..=MEDIAN_RANGE.1).contains(&m))
        && min_ratio.is_some_and(|m| m >= CASE_RANGE.0)
        && max_ratio.is_some_and(|m| m <= CASE_RANGE.1);
    Ok(Report {
        schema: 1,
        command: "calibrate",
        set: "throughput",
        cases,
        counted,
        median_ratio,
        min_ratio,
        max_ratio,
        pass,
    })
}

/// The human table.
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "vramfit calibrate --set throughput: the planner's time model against published throughputs ({THROUGHPUT_FILE})");
    let _ = writeln!(o, "ratio = modelled / published (< 1: the model is slower than measured)\n");
    let _ = writeln!(o, "{:<44} {:>8} {:>12} {:>12} {:>6}  unit", "case", "group", "published", "modelled", "ratio");
    for c in &r.cases {
        match (c.modelled, c.ratio) {
            (Some(m), Some(x)) => {
                let flag = if (CASE_RANGE.0..=CASE_RANGE.1).contains(&x) { "" } else { "  ← outside 0.6–1.6" };
                let _ = writeln!(
                    o,
                    "{:<44} {:>8} {:>12.1} {:>12.1} {:>6.2}  {}{flag}",
                    c.id, c.group, c.published, m, x, c.unit
                );
            }
            _ => {
                let _ = writeln!(
                    o,
                    "{:<44} {:>8} {:>12.1} {:>12} {:>6}  {} (not modelled: {})",
                    c.id,
                    c.group,
                    c.published,
                    "–",
                    "–",
                    c.unit,
                    c.skipped.as_deref().unwrap_or("")
                );
            }
        }
    }
    let f = |x: Option<f64>| x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "–".into());
    let _ = writeln!(
        o,
        "\n{} of {} cases modelled: median ratio {} (bar {:.2}–{:.2}), min {}, max {} (bar {:.1}–{:.1}): {}",
        r.counted,
        r.cases.len(),
        f(r.median_ratio),
        MEDIAN_RANGE.0,
        MEDIAN_RANGE.1,
        f(r.min_ratio),
        f(r.max_ratio),
        CASE_RANGE.0,
        CASE_RANGE.1,
        if r.pass { "pass" } else { "FAIL" }
    );
    o
}

/// The CLI entry: the embedded set, the embedded GPU catalogue, the default time model.
pub fn run(json: bool) -> anyhow::Result<crate::Outcome> {
    let cat = vramfit_catalog::offers::load(None)?;
    let r = compare(THROUGHPUT_JSONL, THROUGHPUT_FILE, &cat.gpus, &TimeModel::default())?;
    let stdout = if json { serde_json::to_string_pretty(&r)? + "\n" } else { render(&r) };
    Ok(crate::Outcome { stdout, code: if r.pass { 0 } else { 1 } })
}
