//! `/api/catalog`: what the page's pickers offer — the embedded presets and
//! GPUs (as `vramfit estimate --list-presets` / `--list-gpus` list them),
//! the MIG cards, the choices of every enumerated flag (read from the clap
//! definitions) and the request limits. Data only; docs/web.md documents it.

use super::request::{kinds, Endpoint};
use clap::CommandFactory;
use serde::Serialize;
use std::collections::BTreeMap;
use vramfit_core::ParamLayout;

#[derive(Debug, Clone, Serialize)]
pub struct Catalog {
    pub schema: u32,
    pub command: &'static str,
    pub version: &'static str,
    /// the server fetches hub ids it does not know from the Hugging Face Hub
    pub allow_hub: bool,
    pub presets: Vec<PresetEntry>,
    pub gpus: Vec<GpuEntry>,
    pub mig_gpus: Vec<MigEntry>,
    /// per endpoint, per field: the values an enumerated flag accepts
    pub choices: BTreeMap<&'static str, BTreeMap<String, Vec<String>>>,
    /// per endpoint: the largest request body accepted, bytes
    pub body_limits: BTreeMap<&'static str, usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PresetEntry {
    pub name: String,
    pub aliases: Vec<String>,
    pub hub_ids: Vec<String>,
    pub params_total: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct GpuEntry {
    pub id: String,
    pub name: String,
    pub memory_bytes: u64,
    pub bf16: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct MigEntry {
    pub id: String,
    pub name: String,
    pub memory_slices: u8,
    pub compute_slices: u8,
}

/// The possible values of each enumerated flag of `ep`.
fn choices(ep: Endpoint) -> BTreeMap<String, Vec<String>> {
    let mut cmd = crate::Cli::command();
    for p in ep.command() {
        match cmd.find_subcommand(p) {
            Some(c) => cmd = c.clone(),
            None => return BTreeMap::new(),
        }
    }
    let fields = kinds(ep);
    cmd.get_arguments()
        .filter_map(|a| {
            let key = a.get_long()?.replace('-', "_");
            if !fields.contains_key(&key) {
                return None;
            }
            let values: Vec<String> = a.get_possible_values().iter().map(|v| v.get_name().to_string()).collect();
            (!values.is_empty() && key != "svg").then_some((key, values))
        })
        .collect()
}

/// The catalogue document.
pub fn catalog(allow_hub: bool) -> anyhow::Result<Catalog> {
    let mut presets = Vec::new();
    for p in vramfit_catalog::presets::builtin()? {
        let r = vramfit_ingest::resolve::resolve_with_env(&p.name, &|_| None)?;
        presets.push(PresetEntry {
            params_total: ParamLayout::of(&r.spec)?.total()?,
            name: p.name,
            aliases: p.aliases,
            hub_ids: p.hub_ids,
        });
    }
    let gpus = vramfit_catalog::gpus::builtin_gpus()?
        .into_iter()
        .map(|g| GpuEntry { memory_bytes: g.memory_bytes(), id: g.id, name: g.name, bf16: g.bf16 })
        .collect();
    let mig_gpus = vramfit_catalog::mig::builtin_mig_tables()?
        .into_iter()
        .map(|t| MigEntry {
            id: t.gpu.id.clone(),
            name: t.gpu.name.clone(),
            memory_slices: t.gpu.memory_slices,
            compute_slices: t.gpu.compute_slices,
        })
        .collect();
    Ok(Catalog {
        schema: vramfit_report::SCHEMA_VERSION,
        command: "catalog",
        version: env!("CARGO_PKG_VERSION"),
        allow_hub,
        presets,
        gpus,
        mig_gpus,
        choices: Endpoint::ALL.iter().map(|e| (e.name(), choices(*e))).collect(),
        body_limits: Endpoint::ALL.iter().map(|e| (e.name(), e.body_limit())).collect(),
    })
}
