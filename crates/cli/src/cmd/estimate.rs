//! `vramfit estimate`: per-GPU memory of a model and workload.
//!
//! Also home of [`WorkloadArgs`] (the workload flags shared by `plan`,
//! `diagnose` and `mig`) and [`ModelArgs`] helpers: parse once, convert
//! once into domain values, reject contradictions naming the flags.

use crate::cmd::train_args::{Common, FieldNames, TaskKind, TrainArgs};
use crate::Outcome;
use anyhow::{bail, Context};
use vramfit_core::infer::{capacity, estimate_inference, fit, FitVerdict};
use vramfit_core::runtime::cuda_capacity;
use vramfit_core::units::MIB;
use vramfit_core::workload::{defaults, validate, Engine, ServingDefaults, ServingEngine};
use vramfit_core::{
    DType, InferenceSetup, ModelSpec, Parallelism, ParamLayout, QuantSpec, RuntimeSetup, Task, Workload,
};
use vramfit_ingest::resolve::ResolvedModel;
use vramfit_report::estimate::{
    CapacityInfo, CheckpointInfo, EstimateReport, FitInfo, KvInfo, ModelInfo, WorkloadInfo,
};

#[derive(clap::Args, Debug)]
pub struct EstimateArgs {
    /// Model: preset name (`llama-2-7b`), hub id (`Qwen/Qwen2.5-7B-Instruct`: the local HF cache,
    /// else fetched from the Hub), a config.json, a .safetensors file or index, or a directory
    pub model: Option<String>,
    #[command(flatten)]
    pub hub: crate::cmd::model_args::HubArgs,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub gguf: crate::cmd::gguf::GgufArgs,
    /// GPU to fit on (e.g. `a100-80gb`, `rtx-3090`, `h100`; `--list-gpus` lists them), or `auto`:
    /// the local GPUs through NVML, fitted against their free memory
    #[arg(long)]
    pub gpu: Option<String>,
    /// Fit on a card with this much memory (as nvidia-smi reports it), e.g. `24GiB`, `24576MiB`, `24GB`
    #[arg(long, value_name = "SIZE", conflicts_with = "gpu")]
    pub gpu_mem: Option<String>,
    /// With --gpu: paged-KV capacity at this memory utilisation (vLLM's gpu_memory_utilization, e.g. 0.9)
    #[arg(long, value_name = "FRACTION")]
    pub gpu_util: Option<f64>,
    /// Machine-readable output (schema in docs/schema.md)
    #[arg(long)]
    pub json: bool,
    /// Show the formula and inputs behind every number
    #[arg(long)]
    pub explain: bool,
    /// List the embedded model presets and exit
    #[arg(long)]
    pub list_presets: bool,
    /// List the embedded GPU catalogue and exit
    #[arg(long)]
    pub list_gpus: bool,
    /// Also: the largest context and concurrency (or micro-batch) that fit the card, the job in
    /// every weight format (or training method), and the catalogue GPUs that hold it
    #[arg(long)]
    pub sweep: bool,
    #[command(flatten)]
    pub chart: crate::cmd::svg_args::SvgArgs,
}

/// Workload flags common to every command that sizes a job. A flag the user
/// did not give is `None`; its default comes from
/// `vramfit_core::workload::defaults` (or `vramfit_core::runtime`).
#[derive(clap::Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// What is run: inference, full training, LoRA or QLoRA
    #[arg(long, value_enum, default_value_t = TaskKind::Infer)]
    pub task: TaskKind,
    /// Weight dtype: fp32, fp16, bf16, fp8, int8, int4 (weight-only, --group-size) or nf4 (bitsandbytes);
    /// default: the checkpoint's quantization if any, else bf16
    #[arg(long)]
    pub dtype: Option<String>,
    #[arg(long, help = format!("KV cache dtype: fp16, bf16, fp8, fp32 [default: {}]", defaults::KV_DTYPE))]
    pub kv_dtype: Option<String>,
    #[arg(long, help = format!(
        "Sequences per step (inference prefill batch; training micro-batch per GPU) [default: {}]",
        defaults::BATCH
    ))]
    pub batch: Option<u64>,
    #[arg(long, visible_alias = "seq", help = format!(
        "Tokens per sequence (prompt + generated for inference) [default: {} inference, {} training]",
        defaults::CONTEXT,
        defaults::TRAIN_SEQ
    ))]
    pub context: Option<u64>,
    /// Sequences whose KV cache is resident at once [default: --batch]
    #[arg(long)]
    pub concurrency: Option<u64>,
    /// Tensor-parallel degree [default: 1]
    #[arg(long)]
    pub tp: Option<u64>,
    /// Pipeline-parallel stages [default: 1]
    #[arg(long)]
    pub pp: Option<u64>,
    /// Total GPUs [default: tp × pp]
    #[arg(long)]
    pub gpus: Option<u64>,
    #[arg(long, help = format!(
        "Input features per scale group for --dtype int4/int8 (GPTQ/AWQ-style) [default: {}]",
        defaults::GROUP_SIZE
    ))]
    pub group_size: Option<u64>,
    /// Materialise logits in fp32 (an upcast before sampling or loss)
    #[arg(long)]
    pub logits_fp32: bool,
    #[arg(long, help = format!("Paged KV block size in tokens [default: {}]", defaults::BLOCK_SIZE))]
    pub block_size: Option<u64>,
    /// How sliding-window layers are cached: window (vLLM/SGLang hybrid KV manager,
    /// transformers' generate), full (vLLM --disable-hybrid-kv-cache-manager), llamacpp
    /// (window + 512-token ubatch, padded to 256) [default: window]
    #[arg(long, value_name = "window|full|llamacpp")]
    pub sliding_window_cache: Option<String>,
    #[arg(long, help = format!(
        "CUDA context + library handles per process per GPU, MiB [default: {}]",
        vramfit_core::runtime::DEFAULT_CUDA_CONTEXT / MIB
    ))]
    pub cuda_context_mib: Option<u64>,
    /// cuBLAS + cuBLASLt workspaces per GPU, MiB (fractional allowed) [default: 8.1 + 4 MiB]
    #[arg(long)]
    pub workspace_mib: Option<f64>,
    #[arg(long, help = format!(
        "Headroom fraction on top of tensors + runtime (0.2 = the ×1.2 rule) [default: {}]",
        vramfit_core::runtime::DEFAULT_MARGIN
    ))]
    pub margin: Option<f64>,
    /// The engine that runs the job: its behaviour sets the defaults (loss path, adapter dtype,
    /// QLoRA preparation, communication buffers; vLLM/SGLang start-up sizing with --gpu-util)
    /// [default: transformers]
    #[arg(long, value_parser = parse_engine, value_name = "ENGINE")]
    pub engine: Option<Engine>,
    #[arg(long, value_name = "N", help = serving_default_help(
        "Serving engines: tokens of the start-up profiling forward (vLLM max_num_batched_tokens)",
        |d| d.max_num_batched_tokens.to_string(),
    ))]
    pub max_num_batched_tokens: Option<u64>,
    #[arg(long, value_name = "N", help = serving_default_help(
        "Serving engines: sequences the sampler sees at start-up (vLLM max_num_seqs)",
        |d| d.max_num_seqs.to_string(),
    ))]
    pub max_num_seqs: Option<u64>,
    #[command(flatten)]
    pub train: TrainArgs,
}

/// A flag's help with each serving engine's default from its row of facts:
/// `[default: 256]` when they agree, else `[default: max(--context, 2048) for
/// vllm, 8192 for sglang]`.
fn serving_default_help(what: &str, value: fn(&ServingDefaults) -> String) -> String {
    let per: Vec<(String, &str)> =
        ServingEngine::ALL.iter().map(|e| (value(&e.facts().startup), e.engine().name())).collect();
    let defaults = if per.iter().all(|(v, _)| *v == per[0].0) {
        per[0].0.clone()
    } else {
        per.iter().map(|(v, name)| format!("{v} for {name}")).collect::<Vec<_>>().join(", ")
    };
    format!("{what} [default: {defaults}]")
}

fn parse_engine(s: &str) -> Result<Engine, String> {
    s.parse()
}

/// Parse a `--dtype` value into (storage dtype, quantization); `group` is
/// the scale group of int4/int8 (checked with the rest of the workload).
pub fn parse_dtype(s: &str, group: u64, model: &ModelSpec) -> anyhow::Result<(DType, Option<QuantSpec>)> {
    let compute = model.native_dtype.filter(|d| matches!(d, DType::F16 | DType::BF16)).unwrap_or(DType::BF16);
    let lower = s.to_ascii_lowercase();
    Ok(match lower.as_str() {
        "nf4" | "bnb4" | "qlora" => (DType::I4, Some(QuantSpec::nf4(true, compute))),
        "int4" | "q4" | "gptq" | "awq" => (DType::I4, Some(QuantSpec::int(4, group, DType::F16))),
        "int8" | "i8" => (DType::I8, Some(QuantSpec::int(8, group, DType::F16))),
        "fp8" | "f8" | "e4m3" => (DType::F8, Some(QuantSpec::fp8_per_tensor(compute))),
        other => {
            let d: DType = other.parse().map_err(|e: String| anyhow::anyhow!("--dtype: {e}, nf4"))?;
            (d, None)
        }
    })
}

impl WorkloadArgs {
    fn tp(&self) -> u64 {
        self.tp.unwrap_or(1)
    }

    fn pp(&self) -> u64 {
        self.pp.unwrap_or(1)
    }

    /// Total GPUs: `--gpus`, else one replica of TP × PP (validate refuses a
    /// TP or PP above 2^12, so their product is only a stand-in when absurd).
    fn gpus(&self) -> u64 {
        self.gpus.unwrap_or(self.tp().saturating_mul(self.pp()))
    }

    fn common(&self) -> Common {
        Common {
            task: self.task,
            batch: self.batch,
            seq: self.context.unwrap_or(defaults::TRAIN_SEQ),
            gpus: self.gpus(),
            tp: self.tp(),
            pp: self.pp(),
            dtype: None,
            engine: self.engine.unwrap_or_default(),
        }
    }

    pub fn runtime(&self) -> anyhow::Result<RuntimeSetup> {
        let defaults = RuntimeSetup::default();
        let workspace = match self.workspace_mib {
            Some(w) if !(w.is_finite() && w >= 0.0) => bail!("--workspace-mib: {w} is not a non-negative number"),
            Some(w) => (w * MIB as f64) as u64,
            None => defaults.workspace_bytes,
        };
        let cuda_context_bytes = match self.cuda_context_mib {
            Some(m) => m.checked_mul(MIB).context("--cuda-context-mib is absurdly large")?,
            None => defaults.cuda_context_bytes,
        };
        Ok(RuntimeSetup {
            cuda_context_bytes,
            workspace_bytes: workspace,
            margin: self.margin.unwrap_or(defaults.margin),
            ..defaults
        })
    }

    /// The inference setup these flags describe.
    pub fn inference(&self, spec: &ModelSpec) -> anyhow::Result<InferenceSetup> {
        let (weight_dtype, quant) = match &self.dtype {
            Some(d) => parse_dtype(d, self.group_size.unwrap_or(defaults::GROUP_SIZE), spec)?,
            None => match &spec.quantization {
                Some(q) => (if q.bits <= 4 { DType::I4 } else { DType::I8 }, Some(q.clone())),
                None => (defaults::WEIGHT_DTYPE, None),
            },
        };
        let kv_dtype: DType = match &self.kv_dtype {
            Some(k) => k.parse().map_err(|e: String| anyhow::anyhow!("--kv-dtype: {e}"))?,
            None => defaults::KV_DTYPE,
        };
        let batch = self.batch.unwrap_or(defaults::BATCH);
        let engine = self.engine.unwrap_or_default();
        Ok(InferenceSetup {
            weight_dtype,
            quant,
            kv_dtype,
            batch,
            concurrency: self.concurrency.unwrap_or(batch),
            context: self.context.unwrap_or(defaults::CONTEXT),
            logits_fp32: self.logits_fp32,
            block_size: self.block_size.unwrap_or(defaults::BLOCK_SIZE),
            engine,
            max_num_batched_tokens: self.max_num_batched_tokens,
            max_num_seqs: self.max_num_seqs,
            // the engine's policy unless the flag says otherwise
            sliding_window_cache: match &self.sliding_window_cache {
                Some(p) => p.parse().map_err(|e: String| anyhow::anyhow!("--sliding-window-cache: {e}"))?,
                None => engine.sliding_window_cache(),
            },
            ..InferenceSetup::default()
        })
    }

    /// The full workload for `spec`, checked; notes about config files ("auto"
    /// values, unknown keys) go to stderr.
    pub fn build(&self, spec: &ModelSpec) -> anyhow::Result<Workload> {
        let (w, notes) = self.build_with_notes(spec)?;
        for n in notes {
            crate::to_stderr(&format!("note: {n}"));
        }
        Ok(w)
    }

    /// The full workload for `spec` and the notes its config files raised.
    /// The workload is checked here (`vramfit_core::workload::validate`), so
    /// an error names the flag, or the config-file key, that set the value.
    pub fn build_with_notes(&self, spec: &ModelSpec) -> anyhow::Result<(Workload, Vec<String>)> {
        let runtime = self.runtime()?;
        let (workload, notes, names) = match self.task {
            TaskKind::Infer => {
                self.refuse_training_flags()?;
                // Replicas (gpus > tp × pp) keep per-GPU memory; the ledger says so.
                let parallelism =
                    Parallelism { gpus: self.gpus(), tp: self.tp(), pp: self.pp(), ..Parallelism::default() };
                let task = Task::Inference(self.inference(spec)?);
                (Workload { task, parallelism, runtime }, Vec::new(), FieldNames::default())
            }
            _ => {
                self.refuse_inference_flags()?;
                let mut common = self.common();
                if let Some(d) = &self.dtype {
                    common.dtype = Some(d.parse::<DType>().map_err(|e| anyhow::anyhow!("--dtype: {e}"))?);
                }
                if self.engine.is_some_and(Engine::serves_only) {
                    bail!("--engine {} serves models; training needs transformers, deepspeed, fsdp, litgpt, torchtune or torchtitan", self.engine.unwrap_or_default().name());
                }
                let mut b = self.train.build(&common)?;
                if b.reduce_bucket_auto {
                    // the HF Trainer fills "auto" with hidden_size² (transformers integrations/deepspeed.py)
                    b.setup.comm.reduce_bucket = spec.hidden_size.saturating_mul(spec.hidden_size);
                    b.notes.push(format!(
                        "zero_optimization.reduce_bucket_size is \"auto\": the Hugging Face Trainer sets hidden_size² = {} elements",
                        b.setup.comm.reduce_bucket
                    ));
                }
                (Workload { task: Task::Train(b.setup), parallelism: b.parallelism, runtime }, b.notes, b.names)
            }
        };
        validate(spec, &workload).map_err(|e| anyhow::anyhow!(names.render(&e)))?;
        Ok((workload, notes))
    }

    fn refuse_training_flags(&self) -> anyhow::Result<()> {
        let given = self.train.given_flags();
        if !given.is_empty() {
            bail!(
                "{} appl{} to training only: add --task train|lora|qlora, or drop {}",
                given.join(", "),
                if given.len() == 1 { "ies" } else { "y" },
                if given.len() == 1 { "it" } else { "them" }
            );
        }
        Ok(())
    }

    fn refuse_inference_flags(&self) -> anyhow::Result<()> {
        let inference_only: Vec<&str> = [
            ("--concurrency", self.concurrency.is_some()),
            ("--max-num-batched-tokens", self.max_num_batched_tokens.is_some()),
            ("--max-num-seqs", self.max_num_seqs.is_some()),
            ("--kv-dtype", self.kv_dtype.is_some()),
            ("--block-size", self.block_size.is_some()),
            ("--sliding-window-cache", self.sliding_window_cache.is_some()),
        ]
        .into_iter()
        .filter_map(|(flag, given)| given.then_some(flag))
        .collect();
        if !inference_only.is_empty() {
            bail!(
                "{} appl{} to inference only (--task infer)",
                inference_only.join(", "),
                if inference_only.len() == 1 { "ies" } else { "y" }
            );
        }
        Ok(())
    }
}

/// Resolve a model argument with a helpful error (default `--offline` and
/// `--revision`: the environment decides).
pub fn resolve(model: Option<&str>) -> anyhow::Result<ResolvedModel> {
    crate::cmd::model_args::HubArgs::default().resolve(model)
}

/// Model facts for reports, with what the safetensors headers held.
pub fn model_info(r: &ResolvedModel, params_trainable: u64) -> anyhow::Result<ModelInfo> {
    let checkpoint = r.checkpoint.as_ref().map(|c| CheckpointInfo {
        params: c.summary.params,
        data_bytes: c.summary.data_bytes,
        tensors: c.summary.tensors,
        params_by_dtype: c.summary.params_by_dtype.clone(),
        files: c.summary.files.len() as u64,
        matches_config: c.difference == 0,
        verdict: c.verdict.clone(),
    });
    Ok(ModelInfo::of(&r.spec, r.source_text(), checkpoint, params_trainable)?)
}

fn list_presets() -> anyhow::Result<String> {
    let mut out = String::from("Embedded model presets (name — params — hub ids):\n");
    for p in vramfit_catalog::presets::builtin()? {
        let r = vramfit_ingest::resolve::resolve_with_env(&p.name, &|_| None)?;
        let l = ParamLayout::of(&r.spec)?;
        out.push_str(&format!(
            "  {:<16} {:>9}  {}\n",
            p.name,
            vramfit_report::format::params(l.total()?),
            p.hub_ids.join(", ")
        ));
    }
    Ok(out)
}

fn list_gpus() -> anyhow::Result<String> {
    let mut out = String::from("Embedded GPU catalogue (id — memory as nvidia-smi shows it — name):\n");
    for g in vramfit_catalog::gpus::builtin_gpus()? {
        out.push_str(&format!("  {:<22} {:>7} MiB  {}\n", g.id, g.memory_mib, g.name));
    }
    Ok(out)
}

pub fn run(args: EstimateArgs) -> anyhow::Result<Outcome> {
    if args.list_presets {
        return Ok(Outcome::ok(list_presets()?));
    }
    if args.list_gpus {
        return Ok(Outcome::ok(list_gpus()?));
    }
    if (args.sweep || args.chart.svg.is_some()) && crate::cmd::gguf::is_gguf(args.model.as_deref()) {
        bail!("--sweep and --svg size a transformers model; a GGUF estimate searches its own largest -ngl and context");
    }
    let gguf_target = crate::cmd::gguf::GgufTarget {
        gpu: args.gpu.as_deref(),
        gpu_mem: args.gpu_mem.as_deref(),
        gpu_util: args.gpu_util,
    };
    if let Some(out) = crate::cmd::gguf::dispatch(
        args.model.as_deref(),
        &args.gguf,
        &args.workload,
        gguf_target,
        &args.hub,
        args.json,
        args.explain,
    )? {
        return Ok(out);
    }
    let resolved = args.hub.resolve(args.model.as_deref())?;
    let spec = &resolved.spec;
    let (workload, config_notes) = args.workload.build_with_notes(spec)?;
    let mut ledger = vramfit_core::estimate(spec, &workload)?;
    ledger.notes.extend(config_notes);
    let gpu = crate::cmd::gpu_target::target(args.gpu.as_deref(), args.gpu_mem.as_deref(), workload.parallelism.gpus)?;
    if args.gpu_util.is_some() && gpu.is_none() {
        bail!("--gpu-util needs --gpu or --gpu-mem: the capacity is computed for a card");
    }
    if args.gpu_util.is_some() && !matches!(workload.task, Task::Inference(_)) {
        bail!("--gpu-util is the paged-KV capacity of a serving card: it applies to --task infer only");
    }

    let (kv, capacity) = match &workload.task {
        Task::Inference(setup) => {
            let par = &workload.parallelism;
            let (_, detail) = estimate_inference(spec, setup, par, &workload.runtime)?;
            let gpu_util = if gpu.is_some() { setup.engine.gpu_util(args.gpu_util) } else { None };
            if gpu.is_some() && args.gpu_util.is_none() && setup.engine.serving().is_some() {
                ledger.notes.push(match gpu_util {
                    Some(u) => format!(
                        "--engine {}: it takes {u} of the card at start-up unless told otherwise (its gpu_memory_utilization default); the capacity and the fit use it (--gpu-util sets another)",
                        setup.engine.name()
                    ),
                    None => format!(
                        "--engine {}: it chooses its memory fraction from the card at start-up (mem_fraction_static); give --gpu-util to size its KV pool; until then the fit is this ledger against the whole card",
                        setup.engine.name()
                    ),
                });
            }
            let capacity = match (&gpu, gpu_util) {
                // vLLM's gpu_memory_utilization is a fraction of the whole card
                (Some(g), Some(u)) => {
                    if g.detected.is_some() && (g.memory_bytes as f64) < u * g.total_bytes as f64 {
                        ledger.notes.push(format!(
                            "--gpu-util {u}: vLLM reserves {u} × total memory at start-up, but only {} is free now: it would refuse to start (lower --gpu-util or free the GPU)",
                            vramfit_report::format::bytes(g.memory_bytes)
                        ));
                    }
                    // the utilisation applies to what CUDA reports (nvidia-smi's total less the driver's reservation)
                    Some(capacity(spec, setup, par, &workload.runtime, cuda_capacity(g.total_bytes), u)?)
                }
                _ => None,
            };
            (Some(KvInfo::of(&detail, setup.block_size)), capacity)
        }
        Task::Train(_) => (None, None),
    };
    if let Some(g) = &gpu {
        ledger.notes.extend(g.notes.iter().cloned());
    }
    let serving_engine = matches!(&workload.task, Task::Inference(s) if s.engine.serving().is_some());
    let fit_info = gpu.as_ref().map(|g| {
        // the memory a process can use: the capacity CUDA reports for a catalogue card (its
        // nvidia-smi total less the driver's reservation), the free memory for a local GPU, and
        // with --gpu-util the same budget the capacity uses
        let (usable, what) = match (&capacity, g.detected.is_some()) {
            (Some(c), _) => {
                (c.budget_bytes, format!("--gpu-util {} × CUDA-reported capacity (the capacity's budget)", c.gpu_util))
            }
            (None, true) => (g.usable_bytes(), "free memory now (NVML: total − reserved − used)".to_string()),
            (None, false) => (
                g.usable_bytes(),
                format!(
                    "nvidia-smi total − {} MiB the driver reserves (CUDA's total)",
                    vramfit_core::runtime::DRIVER_RESERVED / MIB
                ),
            ),
        };
        let mut f = fit(&ledger, g.memory_bytes, usable);
        f.explain = f.explain.term("usable memory is", what);
        if let (Some(c), Task::Inference(s)) = (&capacity, &workload.task) {
            if serving_engine {
                // the engine fills its budget with KV blocks: it fits when they hold the sequences
                f.fits = c.max_concurrency >= s.concurrency;
                f.verdict = if f.fits { FitVerdict::Fits } else { FitVerdict::DoesNotFit };
                f.explain =
                    f.explain.term("fits", "the engine's KV pool holds --concurrency sequences of --context tokens");
            }
        }
        FitInfo::of(&g.name, &f, capacity.as_ref().map(CapacityInfo::from), g.detected.clone())
    });
    let fits = fit_info.as_ref().map(|f| f.fits).unwrap_or(true);
    let mut report = EstimateReport::new(
        model_info(&resolved, ledger.params_trainable)?,
        WorkloadInfo::from(&workload),
        &ledger,
        kv,
        fit_info,
    );
    if args.sweep {
        report.sweep = Some(crate::cmd::sweep::sweep(&args.workload, spec, &workload, &ledger, gpu.as_ref())?);
    }
    let code = if fits { 0 } else { 1 };
    if let Some(out) = args.chart.emit(code, |lang| Ok(vramfit_report::svg::estimate::bar(&report, lang)))? {
        return Ok(out);
    }
    let stdout = if args.json { report.to_json() } else { report.to_text(args.explain) };
    Ok(Outcome { stdout, code: if fits { 0 } else { 1 } })
}
