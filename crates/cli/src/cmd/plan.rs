//! `vramfit plan`: the cheapest setup that fits, the three ways out, and
//! launch configs for the chosen plan. Parses flags, loads the catalogue
//! (embedded + `--catalog FILE`), calls `vramfit_plan::plan`, renders.

use crate::bail_on;
use crate::cmd::workload_args::WorkloadArgs;
use crate::error::{field_error, OnField};
use crate::Outcome;
use anyhow::{bail, Context};
use std::path::PathBuf;
use vramfit_catalog::gpus::MAX_CATALOG_BYTES;
use vramfit_catalog::offers::load;
use vramfit_core::{Family, GpuArch, GpuSpec, Task};
use vramfit_plan::emit::{self, Launcher};
use vramfit_plan::{plan, runnable_plan, Allow, Job, NotRunnable, PlanReport, PlanRequest, TimeModel};
use vramfit_report::plan::{job_fields, job_setup_words, json, render, PlanDocument, PlanJob, PlanModel};

/// Method changes `--allow` can permit.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowKind {
    /// LoRA adapters instead of a full fine-tune
    Lora,
    /// QLoRA (NF4 base) instead of a full fine-tune or LoRA
    Qlora,
    /// inference: int8/int4 weights and an fp8 KV cache
    Quant,
}

/// What `--emit` writes.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitKind {
    /// a DeepSpeed ds_config.json
    Deepspeed,
    /// a torchrun launch with Hugging Face Trainer FSDP flags
    Torchrun,
    /// an accelerate config YAML
    Accelerate,
    /// a torchtitan recipe (a Python `Trainer.Config` function) and its launch line
    Torchtitan,
    /// a Megatron-LM launch script (torchrun + pretrain_gpt.py flags)
    Megatron,
    /// a `vllm serve` command (inference plans)
    Vllm,
    /// an SGLang `launch_server` command (inference plans)
    Sglang,
}

#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// Model: preset name (`llama-2-7b`), hub id (the local HF cache, else fetched from the Hub),
    /// a config.json or a directory
    pub model: Option<String>,
    #[command(flatten)]
    pub hub: crate::cmd::model_args::HubArgs,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    /// The card you have (path 1: software switches on it), e.g. `rtx-3090`
    #[arg(long, value_name = "GPU")]
    pub have: Option<String>,
    /// Method changes you accept: lora, qlora (training), quant (inference)
    #[arg(long, value_enum, value_delimiter = ',')]
    pub allow: Vec<AllowKind>,
    /// Job size in tokens (trained, or generated for inference): 1000000000, 1e9, 1B, 500M
    #[arg(long, value_name = "N")]
    pub tokens: Option<String>,
    /// Serving: tokens each request generates; the rest of --context is its prompt, prefilled
    /// first. Tokens/s and the job time count both [default: half the context]
    #[arg(long, value_name = "TOKENS", alias = "random-output-len")]
    pub output_len: Option<String>,
    /// Job size in rental hours; with --tokens, a deadline: the cheapest plan
    /// that finishes the tokens within these hours
    #[arg(long, value_name = "H")]
    pub hours: Option<f64>,
    #[command(flatten)]
    pub text: crate::cmd::width::TextArgs,
    /// Rows in the ranked table (per currency)
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// A catalogue file layered on the embedded one (format: docs/catalog.md)
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// Write a launch config for the recommended plan instead of the report
    #[arg(long, value_enum, conflicts_with = "json")]
    pub emit: Option<EmitKind>,
    /// Only plans this launcher can run (`--emit K` implies `--launcher K`): the recommendation
    /// is what `--emit` writes; the notes say what the best plan overall would need
    #[arg(long, value_enum, value_name = "LAUNCHER")]
    pub launcher: Option<EmitKind>,
    /// Override an achievable MFU of the time model: ARCH=V or GPU_ID=V (e.g. ampere=0.5)
    #[arg(long, value_name = "KEY=MFU")]
    pub mfu: Vec<String>,
    /// Machine-readable output (schema in docs/plan.md)
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub chart: crate::cmd::svg_args::SvgArgs,
}

/// Parse `1000000000`, `1e9`, `1.5B`, `500M`, `2T`, `10k` (a count: `B` is
/// billions; core::quantity), between 1 and 10^18.
pub fn parse_tokens(s: &str) -> anyhow::Result<u64> {
    Ok(vramfit_core::quantity::parse_count("--tokens", s, 1..=1_000_000_000_000_000_000)?)
}

/// `--catalog FILE` through the one bounded reader (regular files only, at
/// most [`MAX_CATALOG_BYTES`] read, a BOM or UTF-16 decoded).
fn read_catalog(path: &std::path::Path) -> anyhow::Result<String> {
    vramfit_input::read_text(path, "a catalogue file", MAX_CATALOG_BYTES as u64).context("--catalog")
}

fn time_model(overrides: &[String], gpus: &[GpuSpec]) -> anyhow::Result<TimeModel> {
    let mut tm = TimeModel::default();
    for o in overrides {
        let Some((k, v)) = o.split_once('=') else { bail!("--mfu: '{o}' is not KEY=VALUE (e.g. ampere=0.5)") };
        let key = k.trim().to_ascii_lowercase();
        // valid keys: an architecture or a catalogue GPU id
        let arch = GpuArch::parse(&key);
        if arch.is_none() && !gpus.iter().any(|g| g.id.eq_ignore_ascii_case(&key)) {
            let mut arches: Vec<&str> = GpuArch::ALL.iter().map(|a| a.name()).collect();
            arches.sort();
            let ids: Vec<&str> = gpus.iter().map(|g| g.id.as_str()).collect();
            bail!(
                "--mfu: unknown key '{}': give an architecture ({}) or a GPU id ({})",
                k.trim(),
                arches.join(", "),
                ids.join(", ")
            );
        }
        let v: f64 = v.trim().parse().map_err(|_| anyhow::anyhow!("--mfu: '{v}' is not a number"))?;
        if !(v > 0.0 && v <= 1.0) {
            bail!("--mfu: {v} is not a fraction in (0, 1]");
        }
        match arch {
            Some(a) => tm.mfu.insert(a, v),
            None => tm.mfu_by_gpu.insert(key, v),
        };
    }
    Ok(tm)
}

/// The launcher the plan is for (`--launcher`, `--emit`; they must agree):
/// a serving engine's launcher serves an inference job with that engine
/// (`--engine` implied; another `--engine` is refused).
fn resolve_launcher(args: &mut PlanArgs, spec: &vramfit_core::ModelSpec) -> anyhow::Result<Option<Launcher>> {
    let launcher = match (args.launcher, args.emit) {
        (Some(l), Some(e)) if l != e => {
            bail_on!("launcher", "--launcher {} and --emit {} name different launchers: give one", l.name(), e.name())
        }
        (l, e) => l.or(e).map(Launcher::from),
    };
    let launcher_field = if args.emit.is_some() { "emit" } else { "launcher" };
    // a serving engine's launcher serves an inference job with that engine
    // (a workload that does not build is reported by the caller's build)
    // (else built with the launcher's engine when none is given: `--ep` needs one)
    let serving_engine = |l: Launcher| {
        if l == Launcher::Vllm {
            vramfit_core::workload::Engine::Vllm
        } else {
            vramfit_core::workload::Engine::Sglang
        }
    };
    // Megatron trains with its own accounting: the job is built with --engine megatron
    if launcher == Some(Launcher::Megatron) {
        let megatron = vramfit_core::workload::Engine::Megatron;
        match args.workload.engine {
            None => {
                args.workload.engine = Some(vramfit_core::workload::EngineChoice { engine: megatron, version: None })
            }
            Some(e) if e.engine == megatron => {}
            Some(e) => {
                bail_on!(launcher_field, "--launcher megatron trains with megatron, not --engine {}", e.engine.name())
            }
        }
    }
    let built = args.workload.clone().build(spec).ok().or_else(|| {
        let l = launcher.filter(|l| l.serves() && args.workload.engine.is_none())?;
        let mut probe = args.workload.clone();
        probe.engine = Some(vramfit_core::workload::EngineChoice { engine: serving_engine(l), version: None });
        probe.build(spec).ok()
    });
    let built = built.map(|w| matches!(w.task, Task::Inference(_)));
    let inference = built == Some(true);
    if let Some(l) = launcher.filter(|l| l.serves() && inference) {
        let engine = serving_engine(l);
        match args.workload.engine {
            None => args.workload.engine = Some(vramfit_core::workload::EngineChoice { engine, version: None }),
            Some(e) if e.engine == engine => {}
            Some(e) => {
                bail_on!(
                    launcher_field,
                    "--launcher {} serves with {}, not --engine {}",
                    l.name(),
                    l.name(),
                    e.engine.name()
                )
            }
        }
    }
    if let Some(l) = launcher {
        if let Err(why) = l.runs(spec) {
            bail_on!(launcher_field, "--launcher {}: {why}", l.name());
        }
        if l.serves() && built == Some(false) {
            bail_on!(launcher_field, "--launcher {} serves models: this job is training", l.name());
        }
        if !l.serves() && built == Some(true) {
            bail_on!(
                launcher_field,
                "--launcher {} runs training; this job is inference (--launcher vllm or sglang serves it)",
                l.name()
            );
        }
    }
    Ok(launcher)
}

/// A served job with no `--engine`: the engine the planner assumes for
/// this model (`vramfit_plan::assumed_serving_engine`), when the job builds
/// with it. Returns whether one was assumed.
fn assume_serving_engine(args: &mut PlanArgs, spec: &vramfit_core::ModelSpec) -> bool {
    let Some(engine) = vramfit_plan::assumed_serving_engine(spec).filter(|_| args.workload.engine.is_none()) else {
        return false;
    };
    let mut probe = args.workload.clone();
    probe.engine = Some(vramfit_core::workload::EngineChoice { engine, version: None });
    match probe.build(spec) {
        Ok(w) if matches!(w.task, Task::Inference(_)) => {
            args.workload = probe;
            true
        }
        _ => false,
    }
}

/// `--output-len`: tokens each served request generates, below the context.
fn output_len(given: Option<&str>, workload: &vramfit_core::workload::Workload) -> anyhow::Result<Option<u64>> {
    match (given, &workload.task) {
        (None, _) => Ok(None),
        (Some(_), Task::Train(_)) => {
            bail_on!("output_len", "--output-len applies to inference (the tokens each request generates)")
        }
        (Some(o), Task::Inference(s)) => {
            let n = vramfit_core::quantity::parse_count("--output-len", o, 1..=u64::MAX).on_field("output_len")?;
            if n >= s.context {
                bail_on!(
                    "output_len",
                    "--output-len {n} leaves no prompt in a context of {} tokens: give fewer output tokens, or a longer --context",
                    s.context
                );
            }
            Ok(Some(n))
        }
    }
}

pub fn run(mut args: PlanArgs) -> anyhow::Result<Outcome> {
    let resolved = args.hub.resolve(args.model.as_deref())?;
    let dequantized = args.workload.dequantized_for_training(&resolved.spec);
    let spec = dequantized.as_ref().unwrap_or(&resolved.spec);
    let launcher = resolve_launcher(&mut args, spec)?;
    let engine_assumed = assume_serving_engine(&mut args, spec);
    let workload = args.workload.build(spec)?;
    if let Some(l) = launcher {
        if let Err(why) = vramfit_plan::emit::pinned_layout_runs(l, &workload.parallelism) {
            let field = if args.emit.is_some() { "emit" } else { "launcher" };
            bail_on!(field, "--{field} {}: {why}", l.name());
        }
    }
    let user = match &args.catalog {
        Some(p) => Some((read_catalog(p).on_field("catalog")?, p.display().to_string())),
        None => None,
    };
    let cat = load(user.as_ref().map(|(t, f)| (t.as_str(), f.as_str())))?;
    let have = match &args.have {
        Some(h) => Some(
            vramfit_catalog::find_gpu(&cat.gpus, h).map_err(|e| field_error("have", anyhow::anyhow!("--have: {e}")))?,
        ),
        None => None,
    };
    if let Some(h) = args.hours {
        if !(h.is_finite() && h > 0.0 && h <= 1e7) {
            bail_on!("hours", "--hours: {h} must be a positive number of hours");
        }
    }
    let job = match (&args.tokens, args.hours) {
        (Some(t), Some(h)) => Job::Deadline { tokens: parse_tokens(t).on_field("tokens")?, hours: h },
        (Some(t), None) => Job::Tokens(parse_tokens(t).on_field("tokens")?),
        (None, Some(h)) => Job::Hours(h),
        (None, None) => Job::None,
    };
    let mut allow = Allow::default();
    for a in &args.allow {
        match a {
            AllowKind::Lora => allow.lora = true,
            AllowKind::Qlora => allow.qlora = true,
            AllowKind::Quant => allow.quant = true,
        }
    }
    let train = matches!(workload.task, Task::Train(_));
    if train && allow.quant {
        bail_on!("allow", "--allow quant applies to inference; for training use --allow qlora");
    }
    if !train && (allow.lora || allow.qlora) {
        bail_on!("allow", "--allow lora/qlora applies to training (--task train)");
    }
    if args.top == 0 || args.top > 1000 {
        bail_on!("top", "--top must be between 1 and 1000");
    }
    let output_len = output_len(args.output_len.as_deref(), &workload)?;
    let req = PlanRequest {
        model: spec,
        workload: &workload,
        gpus: &cat.gpus,
        book: &cat.book,
        have,
        allow,
        job,
        top: args.top,
        time: time_model(&args.mfu, &cat.gpus).on_field("mfu")?,
        launcher,
        output_len,
        one_gpu: args.workload.gpus == Some(1),
        engine_assumed,
        checkpointing_given: args.workload.train.checkpointing.is_some(),
    };
    let report = plan(&req)?;
    let code = if report.recommended.is_some() { 0 } else { 1 };

    if let Some(kind) = args.emit {
        return emit_plan(kind, &req, &report, spec.family, &spec.name, &serve_id(&resolved)).on_field("emit");
    }

    let (tokens, hours) = job_fields(job);
    let mut allow_names = Vec::new();
    if allow.lora {
        allow_names.push("lora".to_string());
    }
    if allow.qlora {
        allow_names.push("qlora".to_string());
    }
    if allow.quant {
        allow_names.push("quant".to_string());
    }
    let doc = PlanDocument::new(
        PlanModel { name: spec.name.clone(), source: resolved.source_text(), params_total: report.params_total },
        PlanJob {
            task: report.task,
            setup: job_setup_words(&workload),
            tokens,
            hours,
            allow: allow_names,
            assumed: false,
            requests: None,
        },
        report,
    );
    if let Some(out) = args
        .chart
        .emit(code, |lang| {
            vramfit_report::svg::plan::ladder(&doc, lang)
                .context("--svg: the chart is the switch ladder on your card: give --have (e.g. --have rtx-3090)")
        })
        .on_field("svg")?
    {
        return Ok(out);
    }
    let stdout = if args.json { json(&doc) + "\n" } else { render(&doc, args.text.width()) };
    Ok(Outcome { stdout, code })
}

/// What a serving engine loads for this model: the Hub id it came from (a
/// preset's first listed id), or the directory of a local config.json.
fn serve_id(r: &vramfit_ingest::resolve::ResolvedModel) -> String {
    use vramfit_ingest::resolve::Source;
    match &r.source {
        Source::HfCache { repo_id, .. } | Source::Hub { repo_id, .. } => repo_id.clone(),
        Source::ConfigFile { path } => {
            let p = std::path::Path::new(path);
            let dir = if p.is_dir() { Some(p) } else { p.parent() };
            dir.map(|d| d.display().to_string()).filter(|d| !d.is_empty()).unwrap_or_else(|| ".".into())
        }
        Source::Preset { name, .. } => vramfit_catalog::presets::builtin()
            .ok()
            .and_then(|ps| vramfit_catalog::presets::find(&ps, name).and_then(|p| p.hub_ids.first().cloned()))
            .unwrap_or_else(|| format!("<the Hub id of {name}>")),
    }
}

impl EmitKind {
    fn name(self) -> &'static str {
        Launcher::from(self).name()
    }
}

impl From<EmitKind> for Launcher {
    fn from(kind: EmitKind) -> Launcher {
        match kind {
            EmitKind::Deepspeed => Launcher::Deepspeed,
            EmitKind::Torchrun => Launcher::Torchrun,
            EmitKind::Accelerate => Launcher::Accelerate,
            EmitKind::Torchtitan => Launcher::Torchtitan,
            EmitKind::Megatron => Launcher::Megatron,
            EmitKind::Vllm => Launcher::Vllm,
            EmitKind::Sglang => Launcher::Sglang,
        }
    }
}

/// `--emit`: the recommended plan in the launcher's terms; when the launcher
/// cannot express it (TP/PP, selective checkpointing, …), the best plan it can
/// express (the planner's [`runnable_plan`]; the note says why).
fn emit_plan(
    kind: EmitKind,
    req: &PlanRequest,
    report: &PlanReport,
    family: Family,
    model_name: &str,
    serve_id: &str,
) -> anyhow::Result<Outcome> {
    let l = Launcher::from(kind);
    let runnable = match runnable_plan(req, report, l) {
        Ok(r) => r,
        Err(NotRunnable::NothingFits { reason }) => {
            bail!("--emit: no plan fits this job, so there is nothing to write ({reason})")
        }
        Err(NotRunnable::NoneExpressible { launcher, why }) => {
            bail!("--emit {}: {why}; and no plan it can express fits this job", launcher.name())
        }
        Err(NotRunnable::Emit(e)) => bail!("--emit: {e}"),
        Err(NotRunnable::Core(e)) => return Err(e.into()),
    };
    let rec = &runnable.row;
    if let Some(best) = &report.best_overall {
        crate::to_stderr(&format!(
            "vramfit: note: {} cannot launch the best plan overall ({} × {}, {}): {}",
            l.name(),
            best.gpus,
            best.gpu_name,
            best.offer_id,
            emit::check(l, &best.setup).err().map(|e| e.to_string()).unwrap_or_default()
        ));
    }
    if let Some(old) = &runnable.replaces {
        crate::to_stderr(&format!(
            "vramfit: note: the recommended plan ({} × {}) cannot be written for {}: {}; writing the best plan it can express: {} × {} ({}) [{}]",
            old.row.gpus,
            old.row.gpu_name,
            l.name(),
            old.why,
            rec.gpus,
            rec.gpu_name,
            rec.offer_id,
            rec.switches.iter().map(|s| s.to_string()).collect::<Vec<_>>().join("; ")
        ));
    }
    let (seq, context) = match rec.workload.as_ref().map(|w| &w.task) {
        Some(Task::Train(t)) => (t.seq, 0),
        Some(Task::Inference(i)) => (0, i.context),
        None => (0, 0),
    };
    let tokens = match req.job {
        vramfit_plan::Job::Tokens(n) | vramfit_plan::Job::Deadline { tokens: n, .. } => Some(n),
        _ => None,
    };
    let target = emit::Target {
        model: model_name,
        family,
        machines: rec.machines,
        seq,
        serve_id,
        context,
        layers: req.model.num_layers,
        spec: Some(req.model),
        tokens,
    };
    let emitted = emit::config(l, &rec.setup, &target).map_err(|e| anyhow::anyhow!("--emit: {e}"))?;
    if let Some(launch) = emitted.launch {
        crate::to_stderr(&format!("vramfit: launch with: {launch}"));
    }
    Ok(Outcome { stdout: emitted.text, code: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_suffixes() {
        assert_eq!(parse_tokens("1e9").unwrap(), 1_000_000_000);
        assert_eq!(parse_tokens("1B").unwrap(), 1_000_000_000);
        assert_eq!(parse_tokens("500M").unwrap(), 500_000_000);
        assert_eq!(parse_tokens("1_000").unwrap(), 1000);
        assert_eq!(parse_tokens("2.5k").unwrap(), 2500);
        assert!(parse_tokens("lots").is_err());
        assert!(parse_tokens("0").is_err());
        assert!(parse_tokens("1e30").is_err());
    }
}
