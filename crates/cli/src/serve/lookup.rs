//! Model lookup for requests: presets and hub ids through
//! `vramfit_ingest::resolve::resolve_name` (never a path), a config.json
//! pasted into the request, and the Hub only when the server was started
//! with `--allow-hub`.

use super::request::{check_model_name, PASTED_CONFIG};
use crate::cmd::model_args::{HubArgs, ModelLookup};
use crate::error::{field_error, FieldId, OnField};
use vramfit_ingest::resolve::{from_config_bytes, resolve_name, ResolveOptions, ResolvedModel};
use vramfit_ingest::IngestError;

pub struct RequestLookup {
    /// the server may fetch configs from the Hugging Face Hub
    pub allow_hub: bool,
    /// text of a config.json pasted into this request
    pub pasted: Option<String>,
}

impl ModelLookup for RequestLookup {
    fn resolve(&self, query: &str, hub: &HubArgs) -> anyhow::Result<ResolvedModel> {
        if let (Some(text), PASTED_CONFIG) = (&self.pasted, query) {
            return from_config_bytes(text.as_bytes(), PASTED_CONFIG).on_field("config-json");
        }
        // the same check as the request decoder: names reach here also
        // from inside values (`mig` services)
        let q = check_model_name(query).map_err(|e| field_error(FieldId::MODEL, anyhow::anyhow!(e.message)))?;
        let env = |k: &str| std::env::var(k).ok();
        let opts = ResolveOptions {
            env: &env,
            offline: hub.offline || !self.allow_hub,
            revision: hub.revision.as_deref(),
            progress: &|_| {},
        };
        match resolve_name(&q, &opts) {
            Err(IngestError::UnknownModel { query, suggestions, .. })
                if !self.allow_hub && vramfit_ingest::hf_cache::looks_like_hub_id(&query) =>
            {
                anyhow::bail!(
                    "unknown model '{query}': not a preset and not in the local Hugging Face cache, and this server does not \
                     fetch from the Hub (start it with `vramfit serve --allow-hub` to allow that), or paste its config.json{}",
                    if suggestions.is_empty() { String::new() } else { format!("; presets with similar names: {}", suggestions.join(", ")) }
                )
            }
            other => Ok(other?),
        }
    }
}
