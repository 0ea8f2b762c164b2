//! MIG profile tables (embedded `data/mig_profiles.json`, from
//! ../shared/reference/mig.json) turned into [`vramfit_mig::MigGpu`].
//!
//! Entries whose figures are not confirmed by a source read carry
//! `confirmed: false` and a note; the planner surfaces them in its output.
//! A user's `nvidia-smi mig -lgip`/`-lgipp` output (parsed in `vramfit-hw`)
//! replaces the table of one card.

use serde::Deserialize;
use thiserror::Error;
use vramfit_mig::{MigGpu, Profile};

/// The embedded file.
pub const MIG_PROFILES_JSON: &str = include_str!("../data/mig_profiles.json");
const FILE: &str = "mig_profiles.json";
const MIB: u64 = 1 << 20;
/// A user-supplied table larger than this is refused.
pub const MAX_MIG_TABLE_BYTES: usize = 1 << 20;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum MigCatalogError {
    #[error("{file}: line {line}, column {column}: {message}")]
    Parse { file: String, line: usize, column: usize, message: String },
    #[error("{file}: {gpu}: {reason}")]
    Invalid { file: String, gpu: String, reason: String },
    #[error("{file}: {bytes} bytes; at most {limit} are read")]
    TooLarge { file: String, bytes: usize, limit: usize },
    #[error("no MIG profile table for '{query}'; known: {known}")]
    Unknown { query: String, known: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    schema: u32,
    #[allow(dead_code)]
    description: String,
    gpus: Vec<GpuEntry>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct GpuEntry {
    id: String,
    name: String,
    #[serde(default)]
    aliases: Vec<String>,
    #[serde(default)]
    pci_device_ids: Vec<String>,
    memory_slices: u8,
    compute_slices: u8,
    whole_card_mib: u64,
    whole_card_note: Option<String>,
    full_card_sms: Option<u32>,
    #[serde(default)]
    sources: Vec<String>,
    profiles: Vec<ProfileEntry>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileEntry {
    name: String,
    id: Option<u32>,
    compute_slices: u8,
    memory_slices: u8,
    max_instances: u8,
    starts: Vec<u8>,
    memory_mib: u64,
    sm_count: Option<u32>,
    special: bool,
    confirmed: bool,
    note: Option<String>,
}

/// One MIG-capable GPU model of the catalogue.
#[derive(Debug, Clone, PartialEq)]
pub struct MigTable {
    pub gpu: MigGpu,
    pub aliases: Vec<String>,
    /// PCI device ids as mig-parted writes them (`0x20B010DE`)
    pub pci_device_ids: Vec<String>,
    /// what is not confirmed about the whole-card memory
    pub whole_card_note: Option<String>,
    pub sources: Vec<String>,
}

impl MigTable {
    /// Every figure of every profile confirmed.
    pub fn confirmed(&self) -> bool {
        self.gpu.profiles.iter().all(|p| p.confirmed) && self.whole_card_note.is_none()
    }
}

/// Parse a MIG profile file (the embedded one or a user's, same format).
pub fn parse_mig_tables(text: &str, file: &str) -> Result<Vec<MigTable>, MigCatalogError> {
    if text.len() > MAX_MIG_TABLE_BYTES {
        return Err(MigCatalogError::TooLarge { file: file.into(), bytes: text.len(), limit: MAX_MIG_TABLE_BYTES });
    }
    let doc: FileDoc = serde_json::from_str(text).map_err(|e| MigCatalogError::Parse {
        file: file.into(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    if doc.schema != 1 {
        return Err(MigCatalogError::Invalid {
            file: file.into(),
            gpu: "-".into(),
            reason: format!("schema {} (expected 1)", doc.schema),
        });
    }
    let mut out: Vec<MigTable> = Vec::with_capacity(doc.gpus.len());
    for g in doc.gpus {
        let profiles = g
            .profiles
            .iter()
            .map(|p| {
                let memory_bytes = p.memory_mib.checked_mul(MIB).ok_or_else(|| MigCatalogError::Invalid {
                    file: file.into(),
                    gpu: g.id.clone(),
                    reason: format!("profile {}: memory_mib {} is too large", p.name, p.memory_mib),
                })?;
                Ok(Profile {
                    name: p.name.clone(),
                    id: p.id,
                    compute_slices: p.compute_slices,
                    memory_slices: p.memory_slices,
                    max_instances: p.max_instances,
                    starts: p.starts.clone(),
                    memory_bytes,
                    sm_count: p.sm_count,
                    special: p.special,
                    confirmed: p.confirmed,
                    note: p.note.clone(),
                })
            })
            .collect::<Result<Vec<_>, MigCatalogError>>()?;
        let gpu = MigGpu {
            id: g.id.clone(),
            name: g.name.clone(),
            memory_slices: g.memory_slices,
            compute_slices: g.compute_slices,
            whole_card_bytes: g.whole_card_mib.saturating_mul(MIB),
            full_card_sms: g.full_card_sms,
            profiles,
            source: if file == FILE { "built-in catalogue (mig_profiles.json)".into() } else { file.to_string() },
        };
        gpu.validate().map_err(|e| MigCatalogError::Invalid {
            file: file.into(),
            gpu: g.id.clone(),
            reason: e.to_string(),
        })?;
        if out.iter().any(|t| t.gpu.id == g.id) {
            return Err(MigCatalogError::Invalid { file: file.into(), gpu: g.id, reason: "id given twice".into() });
        }
        out.push(MigTable {
            gpu,
            aliases: g.aliases,
            pci_device_ids: g.pci_device_ids,
            whole_card_note: g.whole_card_note,
            sources: g.sources,
        });
    }
    Ok(out)
}

/// The embedded tables.
pub fn builtin_mig_tables() -> Result<Vec<MigTable>, MigCatalogError> {
    parse_mig_tables(MIG_PROFILES_JSON, FILE)
}

fn norm(s: &str) -> String {
    s.trim().to_ascii_lowercase().trim_start_matches("nvidia").chars().filter(|c| c.is_ascii_alphanumeric()).collect()
}

/// Find a table by id, alias or PCI device id (`0x20B010DE` or `20B010DE`).
pub fn find_mig_table<'a>(tables: &'a [MigTable], query: &str) -> Result<&'a MigTable, MigCatalogError> {
    let q = norm(query);
    let pci = |id: &str| norm(id).trim_start_matches("0x").to_string();
    let hit = tables.iter().find(|t| {
        norm(&t.gpu.id) == q
            || t.aliases.iter().any(|a| norm(a) == q)
            || (!q.is_empty() && t.pci_device_ids.iter().any(|d| pci(d) == q.trim_start_matches("0x")))
    });
    hit.ok_or_else(|| MigCatalogError::Unknown {
        query: query.to_string(),
        known: tables.iter().map(|t| t.gpu.id.as_str()).collect::<Vec<_>>().join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_tables_parse_and_validate() {
        let t = builtin_mig_tables().unwrap();
        let ids: Vec<&str> = t.iter().map(|t| t.gpu.id.as_str()).collect();
        assert_eq!(ids, ["a100-40gb", "a100-80gb", "a30", "h100-80gb", "h100-94gb", "h200-141gb"]);
        let a100 = find_mig_table(&t, "A100-40GB").unwrap();
        assert!(a100.confirmed());
        let p = &a100.gpu.profiles[a100.gpu.profile_index("3g.20gb").unwrap()];
        // 19.62 GiB x 1024 = 20090.88 -> 20091 MiB
        assert_eq!(p.memory_bytes, 20091 * MIB);
        assert_eq!(p.starts, vec![0, 4]);
        // H200 and A30 figures are estimates and say so
        assert!(!find_mig_table(&t, "h200").unwrap().confirmed());
        assert!(!find_mig_table(&t, "a30").unwrap().confirmed());
        assert!(find_mig_table(&t, "0x20B010DE").is_ok());
        assert!(find_mig_table(&t, "20B210DE").unwrap().gpu.id == "a100-80gb");
        assert!(matches!(find_mig_table(&t, "rtx4090"), Err(MigCatalogError::Unknown { .. })));
    }

    /// Issue 24: a bare `a100` is the 40 GB or the 80 GB table; it is
    /// refused with the tables listed rather than read as the 40 GB one.
    #[test]
    fn a_name_of_two_tables_is_refused_with_the_tables_listed() {
        let t = builtin_mig_tables().unwrap();
        for q in ["a100", "A100", "h2", "h20"] {
            let e = find_mig_table(&t, q).unwrap_err().to_string();
            assert!(
                e.contains(&format!("no MIG profile table for '{q}'")) && e.contains("a100-40gb, a100-80gb"),
                "{e}"
            );
        }
        assert_eq!(find_mig_table(&t, "a100-40gb").unwrap().gpu.id, "a100-40gb");
        assert_eq!(find_mig_table(&t, "a800-80gb").unwrap().gpu.id, "a100-80gb");
    }

    #[test]
    fn bad_user_file_names_line_and_gpu() {
        assert!(matches!(parse_mig_tables("{", "u.json"), Err(MigCatalogError::Parse { line: 1, .. })));
        // 3g.20gb (4 memory slices) moved to start 6: runs off the 8-slice axis
        let t = MIG_PROFILES_JSON.replacen("0,\n      4\n     ]", "0,\n      6\n     ]", 1);
        assert_ne!(t, MIG_PROFILES_JSON);
        let e = parse_mig_tables(&t, "u.json").unwrap_err();
        assert!(matches!(&e, MigCatalogError::Invalid { gpu, .. } if gpu == "a100-40gb"), "{e:?}");
        assert!(e.to_string().contains("runs past"), "{e}");
    }
}
