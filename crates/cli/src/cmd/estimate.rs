//! `vramfit estimate`: per-GPU memory of a model and workload (the
//! workload flags: [`crate::cmd::workload_args`]).

use crate::bail_on;
use crate::cmd::gguf::{self, GgufRequest, GgufTarget};
use crate::cmd::gpu_target::FitTarget;
use crate::cmd::workload_args::WorkloadArgs;
use crate::Outcome;
use vramfit_core::infer::{capacity, estimate_inference, fit, FitVerdict};
use vramfit_core::runtime::cuda_capacity;
use vramfit_core::units::MIB;
use vramfit_core::{Capacity, Ledger, ModelSpec, ParamLayout, Task};
use vramfit_ingest::resolve::{ModelKind, ResolvedModel};
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
    #[command(flatten)]
    pub text: crate::cmd::width::TextArgs,
    /// GPU to fit on (e.g. `a100-80gb`, `rtx-3090`, `h100`; `--list-gpus` lists them), or `auto`:
    /// the local GPUs through NVML, fitted against their free memory
    #[arg(long)]
    pub gpu: Option<String>,
    /// Fit on a card with this much memory (as nvidia-smi reports it), e.g. `24GiB`, `24576MiB`, `24GB`
    #[arg(long, value_name = "SIZE", conflicts_with = "gpu")]
    pub gpu_mem: Option<String>,
    /// With --gpu: paged-KV capacity at this memory utilisation (vLLM's gpu_memory_utilization, e.g. 0.9)
    #[arg(long, value_name = "FRACTION", visible_alias = "gpu-memory-utilization")]
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

/// Model facts for reports, with what the safetensors headers held.
pub fn model_info(r: &ResolvedModel, params_trainable: u64) -> anyhow::Result<ModelInfo> {
    model_info_of(r, &r.spec, params_trainable)
}

/// [`model_info`] of `spec`, the model as the job loads it (a checkpoint
/// dequantized for training: [`crate::cmd::workload_args::WorkloadArgs::dequantized_for_training`]).
pub fn model_info_of(r: &ResolvedModel, spec: &ModelSpec, params_trainable: u64) -> anyhow::Result<ModelInfo> {
    let checkpoint = r.checkpoint.as_ref().map(|c| CheckpointInfo {
        params: c.summary.params,
        data_bytes: c.summary.data_bytes,
        tensors: c.summary.tensors,
        params_by_dtype: c.summary.params_by_dtype.clone(),
        files: c.summary.files.len() as u64,
        matches_config: c.difference == 0,
        verdict: c.verdict.clone(),
    });
    Ok(ModelInfo::of(spec, r.source_text(), checkpoint, params_trainable)?)
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

/// A model argument that is not a transformers model (ingest's resolver
/// says which): a GGUF estimate, or the error for a quant tag; llama.cpp's
/// flags are refused for every other model.
fn other_model(args: &EstimateArgs) -> anyhow::Result<Option<Outcome>> {
    let Some(m) = args.model.as_deref() else {
        gguf::refuse_for_other_models(&args.gguf)?;
        return Ok(None);
    };
    let kind = vramfit_ingest::resolve::model_kind(m);
    if (args.sweep || args.chart.svg.is_some()) && matches!(kind, ModelKind::Gguf(_)) {
        bail_on!(
            "sweep",
            "--sweep and --svg size a transformers model; a GGUF estimate searches its own largest -ngl and context"
        );
    }
    let req = GgufRequest {
        model: m,
        args: &args.gguf,
        target: GgufTarget { gpu: args.gpu.as_deref(), gpu_mem: args.gpu_mem.as_deref(), gpu_util: args.gpu_util },
        hub: &args.hub,
        json: args.json,
        explain: args.explain,
    };
    gguf::dispatch(kind, &args.workload, &req)
}

/// An inference job's KV facts and, on a card with a memory utilisation
/// (`--gpu-util`, or a serving engine's default), its paged-KV capacity;
/// notes about the engine's start-up go to `notes`.
fn kv_and_capacity(
    spec: &vramfit_core::ModelSpec,
    workload: &vramfit_core::Workload,
    gpu: Option<&FitTarget>,
    gpu_util_flag: Option<f64>,
    notes: &mut Vec<String>,
) -> anyhow::Result<(Option<KvInfo>, Option<Capacity>)> {
    let Task::Inference(setup) = &workload.task else { return Ok((None, None)) };
    let par = &workload.parallelism;
    let (_, detail) = estimate_inference(spec, setup, par, &workload.runtime)?;
    let gpu_util = gpu.and_then(|g| setup.gpu_util_on(gpu_util_flag, g.total_bytes, par));
    if gpu.is_some() && gpu_util_flag.is_none() && setup.engine.serving().is_some() {
        let fixed = setup.serving().and_then(|d| d.default_gpu_util).is_some();
        notes.push(match gpu_util {
            Some(u) if fixed => format!(
                "--engine {}: it takes {u} of the card at start-up unless told otherwise (its gpu_memory_utilization default); the capacity and the fit use it (--gpu-util sets another)",
                setup.engine.name()
            ),
            Some(u) => format!(
                "--engine {}: it takes {u} of this card at start-up (its mem_fraction_static rule from the card's memory and the TP size); the capacity and the fit use it (--gpu-util sets another)",
                vramfit_core::serving::release_label(setup)
            ),
            None => format!(
                "--engine {}: it chooses its memory fraction from the card at start-up (mem_fraction_static); give --gpu-util to size its KV pool; until then the fit is this ledger against the whole card",
                setup.engine.name()
            ),
        });
    }
    let capacity = match (gpu, gpu_util) {
        // vLLM's gpu_memory_utilization is a fraction of the whole card
        (Some(g), Some(u)) => {
            if g.detected.is_some() && (g.memory_bytes as f64) < u * g.total_bytes as f64 {
                notes.push(format!(
                    "--gpu-util {u}: vLLM reserves {u} × total memory at start-up, but only {} is free now: it would refuse to start (lower --gpu-util or free the GPU)",
                    vramfit_report::format::bytes(g.memory_bytes)
                ));
            }
            // the utilisation applies to what CUDA reports (nvidia-smi's total less the driver's reservation)
            let c = capacity(spec, setup, par, &workload.runtime, cuda_capacity(g.total_bytes), u)?;
            // why the card does not hold the engine's CUDA graphs, else where they live
            notes.extend(c.outside_note.clone().or_else(|| c.graphs_note.clone()));
            Some(c)
        }
        _ => None,
    };
    Ok((Some(KvInfo::of(&detail, setup.block_size)), capacity))
}

/// The ledger against card `g`: the memory a process can use is the
/// capacity CUDA reports for a catalogue card (its nvidia-smi total less the
/// driver's reservation), the free memory for a local GPU, and with
/// `--gpu-util` the same budget the capacity uses.
fn fit_on(g: &FitTarget, ledger: &Ledger, capacity: Option<&Capacity>, workload: &vramfit_core::Workload) -> FitInfo {
    let (usable, what) = match (capacity, g.detected.is_some()) {
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
    let mut f = fit(ledger, g.memory_bytes, usable);
    f.explain = f.explain.term("usable memory is", what);
    if let (Some(c), Task::Inference(s)) = (capacity, &workload.task) {
        if s.engine.serving().is_some() {
            // the engine fills its budget with KV blocks: it fits when they hold the sequences
            // (and what comes on top of the budget fits the rest of the card)
            f.fits = c.holds(s.concurrency);
            if c.outside_short_bytes > 0 {
                // short by what the graphs on top of the budget lack
                f.headroom_bytes = -(c.outside_short_bytes as i128);
            }
            f.verdict = if f.fits { FitVerdict::Fits } else { FitVerdict::DoesNotFit };
            f.explain =
                f.explain.term("fits", "the engine's KV pool holds --concurrency sequences of --context tokens");
        }
    }
    FitInfo::of(&g.name, &f, capacity.map(CapacityInfo::from), g.detected.clone())
}

pub fn run(args: EstimateArgs) -> anyhow::Result<Outcome> {
    if args.list_presets {
        return Ok(Outcome::ok(list_presets()?));
    }
    if args.list_gpus {
        return Ok(Outcome::ok(list_gpus()?));
    }
    if let Some(out) = other_model(&args)? {
        return Ok(out);
    }
    let resolved = args.hub.resolve(args.model.as_deref())?;
    let dequantized = args.workload.dequantized_for_training(&resolved.spec);
    let spec = dequantized.as_ref().unwrap_or(&resolved.spec);
    let (mut workload, config_notes) = args.workload.build_with_notes(spec)?;
    let gpu = crate::cmd::gpu_target::target(args.gpu.as_deref(), args.gpu_mem.as_deref(), workload.parallelism.gpus)?;
    if let Some(card) = gpu.as_ref().and_then(|g| g.card.as_ref()) {
        vramfit_core::workload::validate::runs_on(card, &workload.task)?;
        // NCCL's channels and buffers follow the card's link (core decides)
        workload.runtime.nccl = card.nccl_hardware();
    }
    // a serving engine's batch defaults follow the card it starts on (vLLM V1)
    if let (Task::Inference(s), Some(g)) = (&mut workload.task, &gpu) {
        let cuda_total_bytes = cuda_capacity(g.total_bytes);
        s.serving_card = Some(vramfit_core::workload::ServingCard { name: g.name.clone(), cuda_total_bytes });
    }
    let mut ledger = vramfit_core::estimate(spec, &workload)?;
    ledger.notes.extend(config_notes);
    if args.gpu_util.is_some() && gpu.is_none() {
        bail_on!("gpu-util", "--gpu-util needs --gpu or --gpu-mem: the capacity is computed for a card");
    }
    if args.gpu_util.is_some() && !matches!(workload.task, Task::Inference(_)) {
        bail_on!("gpu-util", "--gpu-util is the paged-KV capacity of a serving card: it applies to --task infer only");
    }
    let (kv, capacity) = kv_and_capacity(spec, &workload, gpu.as_ref(), args.gpu_util, &mut ledger.notes)?;
    if let Some(g) = &gpu {
        ledger.notes.extend(g.notes.iter().cloned());
    }
    let fit_info = gpu.as_ref().map(|g| fit_on(g, &ledger, capacity.as_ref(), &workload));
    let fits = fit_info.as_ref().map(|f| f.fits).unwrap_or(true);
    let mut report = EstimateReport::new(
        model_info_of(&resolved, spec, ledger.params_trainable)?,
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
    let stdout = if args.json { report.to_json() } else { report.to_text_fitted(args.explain, args.text.width()) };
    Ok(Outcome { stdout, code })
}
