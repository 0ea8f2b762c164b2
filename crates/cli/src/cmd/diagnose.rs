//! `vramfit diagnose <FILE|->`: why a run ran out of memory, from its
//! error text, `torch.cuda.memory_summary()`, a memory snapshot, or the
//! training script; with `--model` and the workload flags, the estimate
//! beside the failure and the cheapest switch of the planner's ladder.

use crate::bail_on;
use crate::cmd::model_args::{HubArgs, Lookup};
use crate::cmd::workload_args::WorkloadArgs;
use crate::Outcome;
use anyhow::Context;
use vramfit_core::GpuSpec;
use vramfit_diagnose::culprit::{culprit, deltas, CulpritReport, Failing, Rung};
use vramfit_diagnose::input::{read_path, read_stream, Input};
use vramfit_diagnose::oom::{OomEvent, OomKind, TorchOom};
use vramfit_diagnose::{diagnose, Diagnosis, Kind};
use vramfit_plan::{ladder::ladder, Allow, StepStatus, TimeModel};
use vramfit_report::diagnose::{DiagnoseReport, GgufFitJson, InputInfo};

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KindArg {
    #[default]
    Auto,
    Oom,
    Summary,
    Snapshot,
    Script,
}

#[derive(clap::Args, Debug)]
pub struct DiagnoseArgs {
    /// What the failed run left: a log or error text, memory_summary() output, a
    /// memory snapshot pickle (_dump_snapshot), or the training script; `-` reads stdin
    pub file: String,
    /// What the input is [default: detected]
    #[arg(long, value_enum, default_value_t = KindArg::Auto)]
    pub kind: KindArg,
    /// Machine-readable output (schema 1, docs/diagnose.md)
    #[arg(long)]
    pub json: bool,
    /// Snapshots: the allocated/reserved timeline and the live bytes at the peak by allocation site
    #[command(flatten)]
    pub chart: crate::cmd::svg_args::SvgArgs,
    /// Put this model's estimate beside the failure (preset, hub id, config.json, directory);
    /// the workload flags below describe the job
    #[arg(long)]
    pub model: Option<String>,
    /// The card, when the input does not say (e.g. a100-80gb); default: the total in the OOM message
    #[arg(long)]
    pub gpu: Option<String>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// How `--model` is resolved (the CLI's own lookup when empty)
    #[arg(skip)]
    pub lookup: Lookup,
    #[command(flatten)]
    pub text: crate::cmd::width::TextArgs,
}

fn first_torch(d: &Diagnosis) -> Option<&TorchOom> {
    first_torch_event(d).and_then(|e| match &e.kind {
        OomKind::Torch(t) => Some(t),
        _ => None,
    })
}

/// The event of the first PyTorch message (its context: frames, DeepSpeed).
fn first_torch_event(d: &Diagnosis) -> Option<&OomEvent> {
    let ooms = match d {
        Diagnosis::Oom { ooms } | Diagnosis::Summary { ooms, .. } => ooms,
        _ => return None,
    };
    ooms.iter().map(|o| &o.event).find(|e| matches!(e.kind, OomKind::Torch(_)))
}

/// The training setup the log shows and the flags did not give: DeepSpeed's
/// ZeRO stage from its frames, and then the world size, which a PyTorch
/// message never prints: the fewest GPUs that have the failing device (or
/// rank), so the estimate is not low (ZeRO shares fall with more GPUs). The
/// sentences say what was taken and what to give.
fn setup_from_log(w: &WorkloadArgs, d: &Diagnosis) -> (WorkloadArgs, Vec<String>) {
    let mut w = w.clone();
    let mut said = Vec::new();
    let Some(ev) = first_torch_event(d) else { return (w, said) };
    let Some(stage) = ev.context.zero_stage else { return (w, said) };
    if w.task == crate::cmd::train_args::TaskKind::Infer || w.train.zero.is_some() || w.train.fsdp.is_some() {
        return (w, said);
    }
    w.train.zero = Some(stage);
    said.push(format!(
        "The log's DeepSpeed frames show ZeRO-{stage} ({}): the estimate beside it shards as that stage does (--zero gives another).",
        if stage == 3 { "deepspeed/runtime/zero/stage3.py" } else { "deepspeed/runtime/zero/stage_1_and_2.py, which runs stages 1 and 2: 1 assumed, the one that shards less" }
    ));
    if w.gpus.is_none() {
        let device = match &ev.kind {
            OomKind::Torch(t) => t.device.unwrap_or(0),
            _ => 0,
        };
        let n = u64::from(device.max(ev.rank.unwrap_or(0))).saturating_add(1).max(2);
        w.gpus = Some(n);
        said.push(format!(
            "The world size is not in the log: {n} GPUs assumed, the fewest that have a GPU {device}; every GPU more shrinks each one's share, so give --gpus N for the real figure."
        ));
    }
    (w, said)
}

/// The card to compare against: `--gpu`, else the catalogue GPU closest to
/// the message's total (for speed figures) with the message's memory.
fn card(gpu: Option<&str>, failing: Option<&TorchOom>) -> anyhow::Result<(GpuSpec, u64, String)> {
    let all = vramfit_catalog::gpus::builtin_gpus()?;
    if let Some(name) = gpu {
        let g = vramfit_catalog::gpus::find_gpu(&all, name)
            .map_err(|e| crate::error::field_error("gpu", anyhow::anyhow!("--gpu: {e}")))?
            .clone();
        let m = g.memory_bytes();
        let what = format!("{} (--gpu)", g.name);
        return Ok((g, m, what));
    }
    let Some(t) = failing.and_then(|t| t.total.as_ref()) else {
        bail_on!("gpu", "--model needs the card: give --gpu (e.g. --gpu a100-80gb), or a PyTorch OOM message that states the total capacity");
    };
    let total = t.bytes;
    let closest =
        all.iter().min_by_key(|g| g.memory_bytes().abs_diff(total)).cloned().context("the GPU catalogue is empty")?;
    let mut g = closest.clone();
    g.memory_mib = total / vramfit_core::MIB;
    Ok((g, total, format!("{} total from the message (speed figures of {})", t.text, closest.name)))
}

fn estimate_beside(args: &DiagnoseArgs, d: &Diagnosis) -> anyhow::Result<Option<CulpritReport>> {
    let Some(model) = &args.model else { return Ok(None) };
    let resolved = HubArgs { lookup: args.lookup.clone(), ..HubArgs::default() }.resolve(Some(model))?;
    let spec = &resolved.spec;
    let (workload_args, from_log) = setup_from_log(&args.workload, d);
    let workload = workload_args.build(spec)?;
    let ledger = vramfit_core::estimate(spec, &workload)?;
    let failing_torch = first_torch(d);
    let (gpu, card_bytes, card_what) = card(args.gpu.as_deref(), failing_torch)?;
    // the failing request: the first PyTorch message, else a snapshot's first OOM entry
    let failing: Option<Failing> = failing_torch.map(Failing::from).or_else(|| match d {
        Diagnosis::Snapshot { report } => report
            .devices
            .iter()
            .flat_map(|dv| dv.ooms.iter())
            .next()
            .map(|o| Failing { held_bytes: o.allocated_then, requested_bytes: o.requested }),
        _ => None,
    });
    let (rungs, note) = if workload.parallelism.gpus <= 1 {
        let l = ladder(spec, &workload, &gpu, Allow::default(), &TimeModel::default());
        // each rung's ledger against the state before it (the kept rungs chain)
        let mut prev = ledger.clone();
        let mut rungs = Vec::new();
        for s in &l.steps {
            let applied = s.status == StepStatus::Applied;
            let after = s.workload.as_ref().and_then(|w| vramfit_core::estimate(spec, w).ok());
            let changes = after.as_ref().map(|a| deltas(&prev, a)).unwrap_or_default();
            if let (true, Some(a)) = (applied, after) {
                prev = a;
            }
            rungs.push(Rung {
                name: s.name.clone(),
                per_gpu_bytes: s.per_gpu_bytes,
                applied,
                detail: s.detail.clone(),
                changes,
            });
        }
        (rungs, None)
    } else {
        (Vec::new(), Some("The job spans several GPUs: `vramfit plan` searches sharding and card counts; the single-card ladder is not applied here.".to_string()))
    };
    let mut r = culprit(&ledger, card_bytes, failing.as_ref(), &rungs);
    r.reasoning.insert(0, format!("Card: {card_what}; model: {}.", resolved.source_text()));
    for (i, s) in from_log.into_iter().enumerate() {
        r.reasoning.insert(1 + i, s);
    }
    if let Some(n) = note {
        r.reasoning.push(n);
    }
    Ok(Some(r))
}

/// `--model` names a GGUF model (a file or a Hub reference).
fn is_gguf(model: &str) -> bool {
    matches!(vramfit_ingest::resolve::model_kind(model), vramfit_ingest::resolve::ModelKind::Gguf(_))
}

/// `--model MODEL.gguf` beside a llama.cpp / ggml failure: the estimator's
/// searches (vramfit_llamacpp: the largest `-ngl` at the log's
/// context, the largest context at the log's `-ngl`) on the failing
/// device, against `--gpu`'s memory or the free memory llama.cpp printed at
/// load. The one place this command calls the llama.cpp model.
fn gguf_fit(args: &DiagnoseArgs, d: &Diagnosis) -> anyhow::Result<Option<GgufFitJson>> {
    use vramfit_diagnose::other_frameworks::OtherOom;
    use vramfit_llamacpp::{context_search_cap, max_context, max_gpu_layers, FlashAttn, GpuSlot, LlamaCppOptions};
    let Some(path) = args.model.as_deref().filter(|m| is_gguf(m)) else {
        return Ok(None);
    };
    let ooms = match d {
        Diagnosis::Oom { ooms } | Diagnosis::Summary { ooms, .. } => ooms.as_slice(),
        _ => &[],
    };
    let Some(g) = ooms.iter().find_map(|o| match &o.event.kind {
        OomKind::Other(OtherOom::Ggml(g)) if !g.is_host() => Some(g),
        _ => None,
    }) else {
        bail_on!("model", "--model {path}: a GGUF model is put beside a llama.cpp / ggml GPU buffer failure, and the input holds none");
    };
    let l = &g.launch;
    let (memory, source) = match (args.gpu.as_deref(), l.free_at_load) {
        (Some(name), _) => {
            let all = vramfit_catalog::gpus::builtin_gpus()?;
            let gpu = vramfit_catalog::gpus::find_gpu(&all, name)
                .map_err(|e| crate::error::field_error("gpu", anyhow::anyhow!("--gpu: {e}")))?;
            (gpu.memory_bytes(), format!("{} (--gpu)", gpu.name))
        }
        (None, Some(f)) => (f, "the free memory llama.cpp printed at load".to_string()),
        (None, None) => bail_on!(
            "gpu",
            "--model {path}: the log does not print the free memory llama.cpp saw at load; give the card with --gpu (e.g. --gpu rtx-4090)"
        ),
    };
    let (_, model) = vramfit_ingest::gguf::read_model(std::path::Path::new(path))?;
    let defaults = LlamaCppOptions::default();
    let mut opts = LlamaCppOptions {
        ctx_size: l.n_ctx.unwrap_or(defaults.ctx_size),
        ubatch: l.n_ubatch.unwrap_or(defaults.ubatch),
        gpus: vec![GpuSlot { name: l.device_name.clone().unwrap_or_default(), memory_bytes: Some(memory) }],
        flash_attn: match l.flash_attn {
            Some(true) => FlashAttn::On,
            Some(false) => FlashAttn::Off,
            None => FlashAttn::Auto,
        },
        ..defaults
    };
    let ngl = max_gpu_layers(&model, &opts)?;
    let at = l.layers_offloaded.map(|(n, _)| u64::from(n));
    opts.n_gpu_layers = at;
    let ctx = max_context(&model, &opts, context_search_cap(&model))?;
    let mut reasoning = vec![format!(
        "Planned as llama.cpp plans it (vramfit estimate's model: weights, KV cache, compute buffers and a {} reserve per GPU) on one device of {} ({source}).",
        vramfit_report::format::bytes(opts.gpu_reserve),
        vramfit_report::format::bytes(memory)
    )];
    if l.gpus.is_some_and(|n| n > 1) {
        reasoning.push("The log lists several GPUs: this searches the failing device alone, as if it held the whole launch; `vramfit estimate MODEL.gguf --gpu … --gpu …` plans the split.".to_string());
    }
    Ok(Some(GgufFitJson {
        model: path.to_string(),
        device: g.device,
        memory_bytes: memory,
        memory_source: source,
        n_ctx: opts.ctx_size,
        max_gpu_layers: ngl,
        at_gpu_layers: at,
        max_context: ctx,
        reasoning,
    }))
}

pub fn run(args: DiagnoseArgs) -> anyhow::Result<Outcome> {
    let input = if args.file == "-" {
        read_stream("<stdin>", &mut std::io::stdin().lock())?
    } else {
        read_path(std::path::Path::new(&args.file))?
    };
    run_input(args, input)
}

/// `diagnose` on an input already read (a file, stdin, or bytes uploaded to
/// the web page: `vramfit_diagnose::input::from_bytes`).
pub fn run_input(args: DiagnoseArgs, input: Input) -> anyhow::Result<Outcome> {
    let kind = match args.kind {
        KindArg::Auto => None,
        KindArg::Oom => Some(Kind::Oom),
        KindArg::Summary => Some(Kind::Summary),
        KindArg::Snapshot => Some(Kind::Snapshot),
        KindArg::Script => Some(Kind::Script),
    };
    let d = diagnose(&input, kind)?;
    let svg = match (&args.chart.svg, &d) {
        (None, _) => None,
        (Some(_), Diagnosis::Snapshot { report }) => {
            let json = vramfit_report::diagnose::schema::SnapshotReportJson::from(report);
            let name = input.name.clone();
            if let Some(out) =
                args.chart.emit(0, |lang| Ok(vramfit_report::svg::diagnose::snapshot(&json, &name, lang)))?
            {
                return Ok(out);
            }
            args.chart.svg.clone()
        }
        (Some(_), other) => {
            bail_on!("svg", "--svg: only a memory snapshot has a timeline; {} is a {}", input.name, other.kind().key())
        }
    };
    let gguf_fit = gguf_fit(&args, &d)?;
    let estimate = if args.model.as_deref().is_some_and(is_gguf) { None } else { estimate_beside(&args, &d)? };
    let mut report = DiagnoseReport::new(
        InputInfo {
            name: input.name.clone(),
            size_bytes: input.size,
            read_bytes: input.bytes.len() as u64,
            skipped_bytes: input.skipped,
            skipped_lines: input.skipped_lines,
            truncated: input.truncated,
        },
        &d,
        estimate.as_ref(),
        svg,
    );
    report.gguf_fit = gguf_fit;
    Ok(Outcome::ok(if args.json { report.to_json() } else { report.to_text_fitted(args.text.width()) }))
}
