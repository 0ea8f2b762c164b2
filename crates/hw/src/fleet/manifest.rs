//! The manifest the collection script (`vramfit check --collect-script`)
//! writes beside the outputs of a node: which commands ran, which tools
//! were absent, which failed or timed out. It is how the fleet check tells
//! "no GPU tools on this node" from "files missing".
//!
//! ```text
//! # vramfit collect 1
//! host: gpu-node-07
//! ran: nvidia-smi -q -x > nvidia-smi-q.xml
//! absent: ibstat
//! failed: bandwidthTest (exit 1)
//! ```

use serde::Serialize;

use crate::clean::{escape_controls, normalize_newlines};
use crate::error::HwError;

/// The first line of every manifest.
pub const MAGIC: &str = "# vramfit collect";

/// Entries read (a run has about 20).
const MAX_ENTRIES: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Manifest {
    pub host: Option<String>,
    /// commands that ran, as written
    pub ran: Vec<String>,
    /// tools not installed on the node
    pub absent: Vec<String>,
    /// commands that failed or timed out, with the exit status
    pub failed: Vec<String>,
}

impl Manifest {
    /// nvidia-smi was not found on the node: no GPU tool ran.
    pub fn no_gpu_tools(&self) -> bool {
        self.absent.iter().any(|a| a == "nvidia-smi")
    }
}

/// Parse a manifest.
pub fn parse_manifest(text: &str, file: &str) -> Result<Manifest, HwError> {
    let text = normalize_newlines(text);
    if !text.starts_with(MAGIC) {
        return Err(HwError::invalid(file, format!("no `{MAGIC}` first line; is this a vramfit collection manifest?")));
    }
    let mut m = Manifest::default();
    for (i, raw) in text.lines().enumerate().skip(1) {
        let t = raw.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if m.ran.len() + m.absent.len() + m.failed.len() >= MAX_ENTRIES {
            return Err(HwError::invalid(file, format!("more than {MAX_ENTRIES} entries")));
        }
        let Some((k, v)) = t.split_once(':') else {
            return Err(HwError::syntax(file, i + 1, "`host:`, `ran:`, `absent:` or `failed:` and a value", raw));
        };
        let v = escape_controls(&v.trim().chars().take(200).collect::<String>());
        match k.trim() {
            "host" => m.host = Some(v),
            "ran" => m.ran.push(v),
            "absent" => m.absent.push(v),
            "failed" => m.failed.push(v),
            _ => {}
        }
    }
    Ok(m)
}
