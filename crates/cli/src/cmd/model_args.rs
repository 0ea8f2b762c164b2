//! Flags that say where a model comes from (shared by `estimate` and
//! `plan`): `--offline` and `--revision` for hub ids. The model argument
//! itself stays with each command.
//!
//! Also [`Lookup`]: where model names are resolved. The CLI leaves it empty
//! (paths, presets, the local cache, the Hub); the local web page installs
//! one that never opens a path a client named, and everything after the
//! lookup is the CLI's code path.

use crate::bail_on;
use crate::error::{FieldId, OnField};
use std::sync::Arc;
use vramfit_ingest::resolve::{resolve_with, ResolveOptions, ResolvedModel};

/// Resolves a model argument in place of the CLI's path-first lookup.
pub trait ModelLookup: Send + Sync {
    /// `query` is the model argument (never empty); `hub` holds `--offline`
    /// and `--revision`.
    fn resolve(&self, query: &str, hub: &HubArgs) -> anyhow::Result<ResolvedModel>;
}

/// An optional [`ModelLookup`], carried inside the clap `Args` (never set
/// from the command line: `#[arg(skip)]`).
#[derive(Clone, Default)]
pub struct Lookup(Option<Arc<dyn ModelLookup>>);

impl Lookup {
    pub fn new(l: Arc<dyn ModelLookup>) -> Lookup {
        Lookup(Some(l))
    }

    /// The installed lookup, if any.
    pub fn get(&self) -> Option<&dyn ModelLookup> {
        self.0.as_deref()
    }
}

impl std::fmt::Debug for Lookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Lookup(installed)" } else { "Lookup(cli)" })
    }
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct HubArgs {
    /// Never use the network: presets, local files and the local Hugging Face cache only
    /// (HF_HUB_OFFLINE=1 does the same)
    #[arg(long)]
    pub offline: bool,
    /// Revision of a hub id on the Hugging Face Hub: a branch, tag or commit [default: main]
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
    /// How model names are resolved (the CLI's own lookup when empty)
    #[arg(skip)]
    pub lookup: Lookup,
}

impl HubArgs {
    /// Resolve a model argument (path, preset, hub id in the cache or on the
    /// Hub). Network progress goes to stderr.
    pub fn resolve(&self, model: Option<&str>) -> anyhow::Result<ResolvedModel> {
        let Some(q) = model else {
            bail_on!(
                FieldId::MODEL,
                "no model given: name a preset (e.g. llama-2-7b; `vramfit estimate --list-presets`), a hub id \
                 (org/name, e.g. Qwen/Qwen2.5-7B-Instruct), a config.json or the directory holding it"
            );
        };
        if let Some(rev) = &self.revision {
            vramfit_ingest::hf_cache::check_revision(rev).on_field("revision")?;
        }
        if let Some(l) = self.lookup.get() {
            return l.resolve(q, self).or_field(FieldId::MODEL);
        }
        let env = |k: &str| std::env::var(k).ok();
        let progress = |m: &str| crate::to_stderr(&format!("vramfit: {m}"));
        let opts = ResolveOptions {
            offline: self.offline,
            revision: self.revision.as_deref(),
            progress: &progress,
            env: &env,
        };
        resolve_with(q, &opts).on_field(FieldId::MODEL)
    }
}
