//! `vramfit mig plan` / `vramfit mig profiles`: split cards with MIG for
//! several services (docs/mig.md).

use crate::cmd::model_args::{HubArgs, Lookup};
use crate::cmd::workload_args::parse_dtype;
use crate::error::{field_error, OnField};
use crate::Outcome;
use anyhow::{anyhow, bail, Context};
use std::path::PathBuf;
use vramfit_catalog::mig::{builtin_mig_tables, find_mig_table, MigTable};
use vramfit_core::quantity::{self, looks_like_quantity, QuantityError};
use vramfit_core::workload::{defaults, validate, Field};
use vramfit_core::{InferenceSetup, ParamLayout, Task, Workload};
use vramfit_mig::{training_state_bytes, MigGpu, Service, ServiceKind, TRAIN_BYTES_PER_PARAM};
use vramfit_report::mig::{
    profile_infos, render_explain, render_mig_parted, render_plan, render_profiles, AdviceInfo, MigGpuInfo,
    MigPlanReport, MigProfilesReport, ServiceInfo,
};

#[derive(clap::Args, Debug)]
pub struct MigArgs {
    #[command(subcommand)]
    pub command: MigCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum MigCommand {
    /// Find MIG instances for services: fewest GPUs, then least wasted memory (exact search)
    Plan(PlanArgs),
    /// List the MIG profiles and placements of a card
    Profiles(ProfilesArgs),
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    /// NVIDIA mig-parted config YAML (`version: v1`, `mig-configs`)
    MigParted,
}

#[derive(clap::Args, Debug)]
pub struct TableArgs {
    /// Card type: a100-40gb, a100-80gb, a30, h100-80gb, h100-94gb, h200-141gb (aliases and PCI ids accepted)
    #[arg(long)]
    pub gpu: String,
    /// The card's real profile table: output of `nvidia-smi mig -lgip` (overrides memory sizes, IDs, counts)
    #[arg(long, value_name = "FILE")]
    pub lgip: Option<PathBuf>,
    /// The card's placements: output of `nvidia-smi mig -lgipp` (needs --lgip)
    #[arg(long, value_name = "FILE", requires = "lgip")]
    pub lgipp: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    #[command(flatten)]
    pub table: TableArgs,
    #[command(flatten)]
    pub text: crate::cmd::width::TextArgs,
    /// A service: NAME=SIZE (12GiB, 4.5GB, 800MiB) or NAME=MODEL[:ctx=N,conc=N,batch=N,dtype=D,task=infer|train]
    /// (ctx=8k is 8192 tokens);
    /// raw sizes also take :task=train,params=13B. Repeat for each service.
    #[arg(long = "service", value_name = "SPEC", required = true)]
    pub services: Vec<String>,
    /// Cards available: the plan does not fit (exit 1) when it needs more
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_gpus: Option<u64>,
    /// Write a config for another tool instead of the table
    #[arg(long, value_enum)]
    pub emit: Option<Emit>,
    /// Name of the mig-parted config (with --emit mig-parted)
    #[arg(long, default_value = "vramfit-plan")]
    pub config_name: String,
    /// Machine-readable output (schema 1, docs/mig.md)
    #[arg(long, conflicts_with = "emit")]
    pub json: bool,
    /// Show, per service, the sizing, the profiles large enough, and the waste and share arithmetic
    #[arg(long, conflicts_with_all = ["emit", "json"])]
    pub explain: bool,
    #[command(flatten)]
    pub chart: crate::cmd::svg_args::SvgArgs,
    /// How service models are resolved (the CLI's own lookup when empty)
    #[arg(skip)]
    pub lookup: Lookup,
}

#[derive(clap::Args, Debug)]
pub struct ProfilesArgs {
    #[command(flatten)]
    pub table: TableArgs,
    /// Machine-readable output (schema 1, docs/mig.md)
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: MigArgs) -> anyhow::Result<Outcome> {
    match args.command {
        MigCommand::Plan(a) => run_plan(a),
        MigCommand::Profiles(a) => run_profiles(a),
    }
}

fn load_table(t: &TableArgs) -> anyhow::Result<(MigGpu, MigTable)> {
    let tables = builtin_mig_tables()?;
    let table = find_mig_table(&tables, &t.gpu).map_err(|e| field_error("gpu", anyhow!("--gpu: {e}")))?.clone();
    let Some(lgip) = &t.lgip else {
        return Ok((table.gpu.clone(), table));
    };
    let limit = vramfit_hw::mig::MAX_MIG_OUTPUT_BYTES as u64;
    let lgip_name = lgip.display().to_string();
    let rows = vramfit_hw::mig::parse_lgip(&vramfit_hw::files::read_text(lgip, limit).on_field("lgip")?, &lgip_name)
        .on_field("lgip")?;
    let lgipp = match &t.lgipp {
        Some(p) => {
            let name = p.display().to_string();
            let text = vramfit_hw::files::read_text(p, limit).on_field("lgipp")?;
            Some((vramfit_hw::mig::parse_lgipp(&text, &name).on_field("lgipp")?, name))
        }
        None => None,
    };
    let gpu = vramfit_hw::mig::apply_profiles(
        &table.gpu,
        &rows,
        &lgip_name,
        lgipp.as_ref().map(|(r, n)| (r.as_slice(), n.as_str())),
    )?;
    Ok((gpu, table))
}

fn gpu_info(gpu: &MigGpu, table: &MigTable) -> MigGpuInfo {
    MigGpuInfo::new(gpu, table.pci_device_ids.clone())
}

fn run_profiles(a: ProfilesArgs) -> anyhow::Result<Outcome> {
    let (gpu, table) = load_table(&a.table)?;
    let r = MigProfilesReport::new(gpu_info(&gpu, &table), profile_infos(&gpu));
    let out = if a.json { serde_json::to_string_pretty(&r)? + "\n" } else { render_profiles(&r) };
    Ok(Outcome::ok(out))
}

/// A MIG service's `SIZE` or `MODEL`: a size when the value looks like a
/// typed quantity ([`looks_like_quantity`]: `12GiB`, `-1GiB`, `7B`), read
/// by the one quantity parser of core (sizes need a unit; `7B` is refused
/// as a size, it is a parameter count); `None` means a model name. A size
/// that is negative, zero, or not a number is an error, never a model lookup.
/// `flag` names the service in errors (`service 'chat'`).
pub fn parse_size(flag: &str, s: &str) -> Option<Result<u64, QuantityError>> {
    looks_like_quantity(s).then(|| quantity::parse_size(flag, s, 1..=u64::MAX))
}

/// Largest parameter count `params=` accepts (10^16: far beyond any model).
const MAX_PARAMS: u64 = 10_000_000_000_000_000;

/// `params=13B`, `7.6B`, `350M` → parameter count (`B` is billions here).
fn parse_params(flag: &str, s: &str) -> Result<u64, QuantityError> {
    quantity::parse_count(flag, s, 1..=MAX_PARAMS)
}

/// A parsed `--service` with how it was sized.
struct Sized {
    service: Service,
    sized_by: String,
}

fn parse_service(spec: &str, lookup: &Lookup) -> anyhow::Result<Sized> {
    let ctx = || format!("--service {spec}");
    let (name, rest) = spec.split_once('=').ok_or_else(|| {
        anyhow!("--service {spec}: expected NAME=SIZE (chat=12GiB) or NAME=MODEL[:ctx=N,conc=N,dtype=D]")
    })?;
    let name = name.trim();
    if name.is_empty() || name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
        bail!("--service {spec}: the name must be 1-64 characters of letters, digits, '-', '_' or '.'");
    }
    let (target, opts) = match rest.split_once(':') {
        Some((t, o)) => (t.trim(), o),
        None => (rest.trim(), ""),
    };
    let mut kv: Vec<(String, String)> = Vec::new();
    for o in opts.split(',').map(str::trim).filter(|o| !o.is_empty()) {
        let (k, v) = o.split_once('=').ok_or_else(|| anyhow!("{}: option '{o}' is not key=value", ctx()))?;
        let k = k.trim().to_ascii_lowercase();
        let known = ["ctx", "context", "conc", "concurrency", "batch", "dtype", "task", "params"];
        if !known.contains(&k.as_str()) {
            bail!("{}: unknown option '{k}' (ctx, conc, batch, dtype, task, params)", ctx());
        }
        kv.push((k, v.trim().to_string()));
    }
    let get = |keys: &[&str]| kv.iter().find(|(k, _)| keys.contains(&k.as_str())).map(|(_, v)| v.clone());
    // counts: `conc=16`; the context a token length, `ctx=8k` = 8192 (core::quantity;
    // the estimator checks the limits)
    let num = |keys: &[&str]| -> Result<Option<u64>, QuantityError> {
        let flag = format!("{}: {}", ctx(), keys[0]);
        let parse = if keys[0] == "ctx" { quantity::parse_tokens } else { quantity::parse_count };
        get(keys).map(|v| parse(&flag, &v, 1..=u64::MAX)).transpose()
    };
    let kind = match get(&["task"]).as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("infer") | Some("inference") | Some("serve") => ServiceKind::Inference,
        Some("train") | Some("training") | Some("finetune") => ServiceKind::Training,
        Some(other) => bail!("{}: task '{other}' is not infer or train", ctx()),
    };
    if let Some(size) = parse_size(&format!("service '{name}'"), target) {
        let need = size?;
        for k in ["ctx", "context", "conc", "concurrency", "batch", "dtype"] {
            if get(&[k]).is_some() {
                bail!("{}: '{k}' applies to a model, not to a raw size", ctx());
            }
        }
        let params = get(&["params"]).map(|p| parse_params(&format!("{}: params", ctx()), &p)).transpose()?;
        return Ok(Sized {
            service: Service { name: name.into(), need_bytes: need, kind, params },
            sized_by: format!("given: {target}"),
        });
    }
    if get(&["params"]).is_some() {
        bail!("{}: 'params' is for raw sizes; a model's parameters are counted from its config", ctx());
    }
    let resolved = match lookup.get() {
        Some(l) => l.resolve(target, &HubArgs::default()),
        None => vramfit_ingest::resolve_model(target).map_err(anyhow::Error::from),
    }
    .with_context(ctx)?;
    let spec_m = &resolved.spec;
    let params = ParamLayout::of(spec_m)?.total()?;
    if kind == ServiceKind::Training {
        if kv.iter().any(|(k, _)| k != "task") {
            bail!("{}: training services take no ctx/conc/batch/dtype here; give a measured size instead (NAME=40GiB:task=train)", ctx());
        }
        let need = training_state_bytes(params)?;
        return Ok(Sized {
            service: Service { name: name.into(), need_bytes: need, kind, params: Some(params) },
            sized_by: format!(
                "{} ({}): {params} params x {TRAIN_BYTES_PER_PARAM} B (mixed-precision Adam states; a lower bound, activations not counted)",
                spec_m.name,
                resolved.source_text()
            ),
        });
    }
    // core's defaults and core's check, the service's own keys named in its errors
    let context = num(&["ctx", "context"])?.unwrap_or(defaults::CONTEXT);
    let batch = num(&["batch"])?.unwrap_or(defaults::BATCH);
    let concurrency = num(&["conc", "concurrency"])?.unwrap_or(batch);
    let (weight_dtype, quant) = match get(&["dtype"]) {
        Some(d) => parse_dtype(&d, defaults::GROUP_SIZE, spec_m).with_context(ctx)?,
        None => defaults::weights(spec_m),
    };
    let setup = InferenceSetup { weight_dtype, quant, batch, concurrency, context, ..InferenceSetup::default() };
    let wl = Workload { task: Task::Inference(setup), ..Workload::default() };
    validate(spec_m, &wl).map_err(|e| anyhow!("{}: {}", ctx(), e.render(&service_key)))?;
    let ledger = vramfit_core::estimate(spec_m, &wl).with_context(ctx)?;
    let need = ledger.checked_total()?;
    Ok(Sized {
        service: Service { name: name.into(), need_bytes: need, kind, params: Some(params) },
        sized_by: format!(
            "estimate of {} ({}): inference, ctx {context}, conc {concurrency}, batch {batch}, weights {}",
            spec_m.name,
            resolved.source_text(),
            weight_dtype
        ),
    })
}

/// How a service spec names a workload field in an error (`ctx`, `conc`, …).
fn service_key(f: Field) -> String {
    match f {
        Field::Context => "ctx".into(),
        Field::Concurrency => "conc".into(),
        Field::Batch => "batch".into(),
        Field::Dtype => "dtype".into(),
        other => other.id().into(),
    }
}

fn run_plan(a: PlanArgs) -> anyhow::Result<Outcome> {
    let (gpu, table) = load_table(&a.table)?;
    // every error of a service spec is about `--service`
    let sized: Vec<Sized> =
        a.services.iter().map(|s| parse_service(s, &a.lookup).on_field("service")).collect::<anyhow::Result<_>>()?;
    let services: Vec<Service> = sized.iter().map(|s| s.service.clone()).collect();
    let plan = vramfit_mig::plan(&gpu, &services)?;
    let catalogue_note = table
        .whole_card_note
        .iter()
        .map(|note| AdviceInfo { kind: "unconfirmed_whole_card".into(), text: format!("whole-card memory: {note}") })
        .collect();
    let service_info = sized.iter().map(|s| ServiceInfo::new(&s.service, s.sized_by.clone())).collect();
    let max_gpus = a.max_gpus.map(|m| m as usize);
    let report = MigPlanReport::from_plan(gpu_info(&gpu, &table), service_info, &plan, catalogue_note, max_gpus);
    let code = if report.fits { 0 } else { 1 };
    if let Some(out) = a.chart.emit(code, |lang| Ok(vramfit_report::svg::mig::layout(&report, lang)))? {
        return Ok(out);
    }
    let stdout = match (a.emit, a.json) {
        (Some(Emit::MigParted), _) => render_mig_parted(&report, &a.config_name),
        (None, true) => serde_json::to_string_pretty(&report)? + "\n",
        (None, false) if a.explain => {
            render_plan(&report, a.text.width()) + &render_explain(&report, &profile_infos(&gpu), a.text.width())
        }
        (None, false) => render_plan(&report, a.text.width()),
    };
    Ok(Outcome { stdout, code })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("size", "12GiB").unwrap().unwrap(), 12 << 30);
        assert_eq!(parse_size("size", "4.5GB").unwrap().unwrap(), 4_500_000_000);
        assert_eq!(parse_size("size", "800 MiB").unwrap().unwrap(), 800 << 20);
        assert!(parse_size("size", "12G").unwrap().is_err());
        assert!(parse_size("size", "12").unwrap().is_err());
        assert!(parse_size("size", "1e30GiB").unwrap().is_err());
        assert!(parse_size("size", "llama-2-7b").is_none());
        assert!(parse_size("size", "01-ai/Yi-6B").is_none());
        assert_eq!(parse_size("size", "1.5e1GiB").unwrap().unwrap(), 15 << 30);
        assert_eq!(parse_size("size", "+2GiB").unwrap().unwrap(), 2 << 30);
        assert_eq!(parse_params("params", "13B").unwrap(), 13_000_000_000);
    }

    fn parse_service_cli(spec: &str) -> anyhow::Result<Sized> {
        parse_service(spec, &Lookup::default())
    }

    #[test]
    fn service_specs() {
        let s = parse_service_cli("chat=12GiB").unwrap();
        assert_eq!(s.service.need_bytes, 12 << 30);
        let s = parse_service_cli("ft=30GiB:task=train,params=13B").unwrap();
        assert_eq!(s.service.kind, ServiceKind::Training);
        assert_eq!(s.service.params, Some(13_000_000_000));
        assert!(parse_service_cli("=12GiB").is_err());
        assert!(parse_service_cli("a=12GiB:ctx=5").is_err());
        assert!(parse_service_cli("a=12GiB:foo=1").is_err());
        assert!(parse_service_cli("a").is_err());
    }

    #[test]
    fn service_workloads_use_cores_defaults_and_check() {
        // core's default context (defaults::CONTEXT) and its check, named by the service's keys
        let s = parse_service_cli("chat=llama-2-7b").unwrap();
        assert!(s.sized_by.contains(&format!("ctx {}, conc 1, batch 1", defaults::CONTEXT)), "{}", s.sized_by);
        let e = format!("{:#}", parse_service_cli("chat=llama-2-7b:conc=1,batch=4").err().unwrap());
        assert!(e.starts_with("--service chat=llama-2-7b:conc=1,batch=4: batch 4 is more than conc 1"), "{e}");
        let e = format!("{:#}", parse_service_cli("g=gpt2:ctx=5000").err().unwrap());
        assert!(e.contains("ctx 5000: 5000 tokens per sequence, but gpt2 has a learned position table"), "{e}");
        // int4 without a group size: core's default group
        let s = parse_service_cli("q=llama-2-7b:dtype=int4").unwrap();
        assert!(s.sized_by.contains("weights int4"), "{}", s.sized_by);
    }

    #[test]
    fn mig_negative_or_garbled_size_is_a_size_error_not_a_model() {
        for (spec, want) in [
            ("chat=-1GiB", "service 'chat': size -1GiB must be positive"),
            ("chat=0GiB", "service 'chat': size 0GiB must be positive"),
            ("chat=0.0MiB", "service 'chat': size 0.0MiB must be positive"),
            ("chat=-0.5GB:task=train", "service 'chat': size -0.5GB must be positive"),
            ("chat=1..2GiB", "service 'chat': size 1..2GiB: '1..2' is not a number"),
            ("chat=12GiBs", "service 'chat': size 12GiBs: unknown unit 'GiBs'"),
        ] {
            let e = parse_service_cli(spec).err().map(|e| format!("{e:#}")).unwrap_or_default();
            assert!(e.starts_with(want), "{spec}: {e}");
            assert!(!e.contains("model"), "{spec}: {e}");
        }
    }
}
