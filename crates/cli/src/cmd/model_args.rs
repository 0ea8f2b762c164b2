//! Flags that say where a model comes from (shared by `estimate` and
//! `plan`): `--offline` and `--revision` for hub ids. The model argument
//! itself stays with each command.

use anyhow::bail;
use vramfit_ingest::resolve::{resolve_with, ResolveOptions, ResolvedModel};

#[derive(clap::Args, Debug, Clone, Default)]
pub struct HubArgs {
    /// Never use the network: presets, local files and the local Hugging Face cache only
    /// (HF_HUB_OFFLINE=1 does the same)
    #[arg(long)]
    pub offline: bool,
    /// Revision of a hub id on the Hugging Face Hub: a branch, tag or commit [default: main]
    #[arg(long, value_name = "REV")]
    pub revision: Option<String>,
}

impl HubArgs {
    /// Resolve a model argument (path, preset, hub id in the cache or on the
    /// Hub). Network progress goes to stderr.
    pub fn resolve(&self, model: Option<&str>) -> anyhow::Result<ResolvedModel> {
        let Some(q) = model else {
            bail!(
                "no model given: name a preset (e.g. llama-2-7b; `vramfit estimate --list-presets`), a hub id \
                 (org/name, e.g. Qwen/Qwen2.5-7B-Instruct), a config.json or the directory holding it"
            );
        };
        let env = |k: &str| std::env::var(k).ok();
        let progress = |m: &str| crate::to_stderr(&format!("vramfit: {m}"));
        let opts = ResolveOptions {
            offline: self.offline,
            revision: self.revision.as_deref(),
            progress: &progress,
            env: &env,
        };
        Ok(resolve_with(q, &opts)?)
    }
}
