//! `nvidia-smi -L`: GPU names and UUIDs, with MIG devices under their GPU.
//!
//! `GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-…)` then
//! `  MIG 1g.10gb     Device  0: (UUID: MIG-…)` (MIG user guide; fixture 11).

use crate::clean::{escape_controls, normalize_newlines};
use crate::error::HwError;
use crate::machine::{Gpu, Machine, MigDevice, MAX_GPUS};

pub const MAX_LIST_BYTES: usize = 1 << 20;

/// Parse `nvidia-smi -L`. Lines that are neither GPU nor MIG lines (a shell prompt) are skipped.
pub fn parse_list(text: &str, file: &str) -> Result<Machine, HwError> {
    if text.len() > MAX_LIST_BYTES {
        return Err(HwError::TooLarge { file: file.into(), bytes: text.len() as u64, limit: MAX_LIST_BYTES as u64 });
    }
    let text = normalize_newlines(text);
    // rocm-smi prints `GPU  Temp …` rows: name the tool before reading lines as -L's
    if let Some(e) = crate::foreign::refuse(&text, file, "--list") {
        return Err(e);
    }
    let mut gpus: Vec<Gpu> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let t = raw.trim();
        if let Some(rest) = t.strip_prefix("GPU ") {
            let (idx, tail) =
                rest.split_once(':').ok_or_else(|| HwError::syntax(file, i + 1, "`GPU <n>: <name> (UUID: …)`", raw))?;
            let index: u32 = idx.trim().parse().map_err(|_| HwError::syntax(file, i + 1, "a GPU index", raw))?;
            let (name, uuid) = match tail.rsplit_once("(UUID:") {
                Some((n, u)) => (n.trim(), Some(u.trim().trim_end_matches(')').trim().to_string())),
                None => (tail.trim(), None),
            };
            if name.is_empty() {
                return Err(HwError::syntax(file, i + 1, "a GPU name", raw));
            }
            if gpus.len() == MAX_GPUS {
                return Err(HwError::invalid(
                    file,
                    format!("more than {MAX_GPUS} GPU lines; one machine has at most {MAX_GPUS}"),
                ));
            }
            let mut g = Gpu::new(index, escape_controls(name));
            g.uuid = uuid.map(|u| escape_controls(&u));
            gpus.push(g);
        } else if let Some(rest) = t.strip_prefix("MIG ") {
            let gpu =
                gpus.last_mut().ok_or_else(|| HwError::syntax(file, i + 1, "a GPU line before MIG lines", raw))?;
            let mut words = rest.split_whitespace();
            let profile =
                words.next().ok_or_else(|| HwError::syntax(file, i + 1, "`MIG <profile> Device <n>:`", raw))?;
            if words.next() != Some("Device") {
                return Err(HwError::syntax(file, i + 1, "`MIG <profile> Device <n>:`", raw));
            }
            let n = words.next().map(|w| w.trim_end_matches(':')).and_then(|w| w.parse::<u32>().ok());
            gpu.mig_devices.push(MigDevice {
                index: n,
                gpu_instance_id: None,
                compute_instance_id: None,
                sm_count: None,
                memory_total_bytes: None,
                profile: Some(escape_controls(profile)),
            });
        }
    }
    if gpus.is_empty() {
        return Err(HwError::invalid(file, "no `GPU <n>: <name>` line; is this `nvidia-smi -L` output?"));
    }
    Ok(Machine { sources: vec![format!("{file} (nvidia-smi -L)")], gpus, ..Machine::default() })
}
