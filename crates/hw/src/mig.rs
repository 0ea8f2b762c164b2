//! `nvidia-smi mig -lgip`, `-lgipp` and `-lgi` output, and laying a user's
//! real profile table over the catalogue's.
//!
//! Formats (MIG user guide v580; ../shared/reference/nvidia-smi-formats.md §2):
//! - `-lgip`: a box table, two lines per profile:
//!   `|   0  MIG 3g.20gb        9     2/2        19.62      No     42     2     0   |`
//!   then `|                                                             3     0     0   |`
//!   (GPU, name, ID, free/total instances, memory GiB, P2P, SM, DEC, ENC; then CE, JPEG, OFA).
//! - `-lgipp`: `GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1` (singular `Placement :` with one start).
//! - `-lgi`: a box table of existing GPU instances:
//!   `|   0  MIG 3g.20gb       9        1          4:4     |` (GPU, name, profile ID, instance ID, start:size).

use serde::Serialize;
use vramfit_mig::{MigGpu, Profile};

use crate::error::HwError;

/// Inputs larger than this are refused (real outputs are a few kB).
pub const MAX_MIG_OUTPUT_BYTES: usize = 1 << 20;
const GIB: f64 = (1u64 << 30) as f64;

/// One row of `nvidia-smi mig -lgip`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LgipRow {
    pub gpu: u32,
    pub name: String,
    pub id: u32,
    pub free: u32,
    pub total: u32,
    /// the "Memory GiB" column as printed (two decimals)
    pub memory_gib: f64,
    pub p2p: bool,
    pub sm: u32,
}

/// One line of `nvidia-smi mig -lgipp`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LgippRow {
    pub gpu: u32,
    pub id: u32,
    pub starts: Vec<u8>,
    pub size: u8,
}

/// One GPU instance of `nvidia-smi mig -lgi`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LgiRow {
    pub gpu: u32,
    pub name: String,
    pub profile_id: u32,
    pub instance_id: u32,
    pub start: u8,
    pub size: u8,
}

fn check_size(text: &str, file: &str) -> Result<(), HwError> {
    if text.len() > MAX_MIG_OUTPUT_BYTES {
        return Err(HwError::TooLarge {
            file: file.into(),
            bytes: text.len() as u64,
            limit: MAX_MIG_OUTPUT_BYTES as u64,
        });
    }
    Ok(())
}

/// The cells of a `| ... |` table line, split on whitespace.
fn box_cells(line: &str) -> Option<Vec<&str>> {
    let t = line.trim();
    let inner = t.strip_prefix('|')?.strip_suffix('|')?;
    Some(inner.split_whitespace().collect())
}

fn num<T: std::str::FromStr>(file: &str, line: usize, what: &str, s: &str, raw: &str) -> Result<T, HwError> {
    s.parse::<T>().map_err(|_| HwError::syntax(file, line, format!("{what} (a number)"), raw))
}

/// Parse `nvidia-smi mig -lgip`.
pub fn parse_lgip(text: &str, file: &str) -> Result<Vec<LgipRow>, HwError> {
    check_size(text, file)?;
    let mut rows = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let Some(cells) = box_cells(raw) else { continue };
        if cells.get(1) != Some(&"MIG") || cells.first().is_none_or(|c| c.parse::<u32>().is_err()) {
            continue;
        }
        let expected = "`GPU MIG <name> <ID> <free>/<total> <memory GiB> <P2P> <SM> <DEC> <ENC>`";
        if cells.len() < 8 {
            return Err(HwError::syntax(file, ln, expected, raw));
        }
        let (free, total) =
            cells[4].split_once('/').ok_or_else(|| HwError::syntax(file, ln, "instances as <free>/<total>", raw))?;
        let p2p = match cells[6] {
            "Yes" => true,
            "No" => false,
            _ => return Err(HwError::syntax(file, ln, "P2P column Yes or No", raw)),
        };
        let memory_gib: f64 = num(file, ln, "memory GiB", cells[5], raw)?;
        if !(memory_gib.is_finite() && memory_gib > 0.0 && memory_gib < 1e6) {
            return Err(HwError::syntax(file, ln, "a positive memory size in GiB", raw));
        }
        rows.push(LgipRow {
            gpu: num(file, ln, "GPU index", cells[0], raw)?,
            name: cells[2].to_string(),
            id: num(file, ln, "profile ID", cells[3], raw)?,
            free: num(file, ln, "free instances", free, raw)?,
            total: num(file, ln, "total instances", total, raw)?,
            memory_gib,
            p2p,
            sm: num(file, ln, "SM count", cells[7], raw)?,
        });
    }
    if rows.is_empty() {
        return Err(HwError::invalid(
            file,
            "no profile rows (`|   0  MIG 1g.5gb  19  7/7  4.75  No  14 ...|`); is this `nvidia-smi mig -lgip` output?",
        ));
    }
    Ok(rows)
}

/// Parse `nvidia-smi mig -lgipp`.
pub fn parse_lgipp(text: &str, file: &str) -> Result<Vec<LgippRow>, HwError> {
    check_size(text, file)?;
    let mut rows = Vec::new();
    let expected = "`GPU <n> Profile ID <id> Placements: {<starts>}:<size>`";
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let t = raw.trim();
        if t.is_empty() || !t.starts_with("GPU") {
            continue;
        }
        let (head, tail) = t.split_once(':').ok_or_else(|| HwError::syntax(file, ln, expected, raw))?;
        let words: Vec<&str> = head.split_whitespace().collect();
        // GPU <n> Profile ID <id> Placements|Placement
        if words.len() != 6 || words[2] != "Profile" || words[3] != "ID" || !words[5].starts_with("Placement") {
            return Err(HwError::syntax(file, ln, expected, raw));
        }
        let gpu = num(file, ln, "GPU index", words[1], raw)?;
        let id = num(file, ln, "profile ID", words[4], raw)?;
        let tail = tail.trim();
        let (set, size) = tail.rsplit_once(':').ok_or_else(|| HwError::syntax(file, ln, expected, raw))?;
        let set = set
            .trim()
            .strip_prefix('{')
            .and_then(|s| s.strip_suffix('}'))
            .ok_or_else(|| HwError::syntax(file, ln, "a start set in braces, {0,4}", raw))?;
        let starts = set
            .split(',')
            .map(|s| num::<u8>(file, ln, "start index", s.trim(), raw))
            .collect::<Result<Vec<u8>, HwError>>()?;
        let size: u8 = num(file, ln, "placement size", size.trim(), raw)?;
        if size == 0 || starts.is_empty() {
            return Err(HwError::syntax(file, ln, "a non-empty start set and a size > 0", raw));
        }
        rows.push(LgippRow { gpu, id, starts, size });
    }
    if rows.is_empty() {
        return Err(HwError::invalid(
            file,
            format!("no placement lines ({expected}); is this `nvidia-smi mig -lgipp` output?"),
        ));
    }
    Ok(rows)
}

/// Parse `nvidia-smi mig -lgi`. "No GPU instances found" gives an empty list.
pub fn parse_lgi(text: &str, file: &str) -> Result<Vec<LgiRow>, HwError> {
    check_size(text, file)?;
    let mut rows = Vec::new();
    let mut saw_header = false;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        if raw.contains("GPU instances:") || raw.contains("No GPU instances found") {
            saw_header = true;
        }
        let Some(cells) = box_cells(raw) else { continue };
        if cells.get(1) != Some(&"MIG") || cells.first().is_none_or(|c| c.parse::<u32>().is_err()) {
            continue;
        }
        let expected = "`GPU MIG <name> <profile ID> <instance ID> <start>:<size>`";
        if cells.len() != 6 {
            return Err(HwError::syntax(file, ln, expected, raw));
        }
        let (start, size) = cells[5].split_once(':').ok_or_else(|| HwError::syntax(file, ln, expected, raw))?;
        rows.push(LgiRow {
            gpu: num(file, ln, "GPU index", cells[0], raw)?,
            name: cells[2].to_string(),
            profile_id: num(file, ln, "profile ID", cells[3], raw)?,
            instance_id: num(file, ln, "instance ID", cells[4], raw)?,
            start: num(file, ln, "placement start", start, raw)?,
            size: num(file, ln, "placement size", size, raw)?,
        });
    }
    if rows.is_empty() && !saw_header {
        return Err(HwError::invalid(file, "no `GPU instances:` table; is this `nvidia-smi mig -lgi` output?"));
    }
    Ok(rows)
}

/// `3g.20gb` → 3 (the compute slices in the name).
fn compute_of(name: &str) -> Option<u8> {
    let (n, _) = name.split_once('g')?;
    n.parse().ok().filter(|&c| c > 0)
}

/// Lay the user's `-lgip` (and optional `-lgipp`) rows over a base table:
/// memory, ID, max count and SMs come from `-lgip`, placements from
/// `-lgipp` (matched by profile ID) or, without it, from the base table
/// (matched by name). Only the first GPU's rows are used. A profile that
/// is neither in the base table nor placed by `-lgipp` is an error.
pub fn apply_profiles(
    base: &MigGpu,
    lgip: &[LgipRow],
    lgip_file: &str,
    lgipp: Option<(&[LgippRow], &str)>,
) -> Result<MigGpu, HwError> {
    let Some(first) = lgip.first().map(|r| r.gpu) else {
        return Err(HwError::invalid(lgip_file, "no profile rows"));
    };
    let mut profiles: Vec<Profile> = Vec::new();
    for r in lgip.iter().filter(|r| r.gpu == first) {
        let base_p = base.profile_index(&r.name).map(|i| &base.profiles[i]);
        let placed = lgipp.and_then(|(rows, _)| rows.iter().find(|p| p.gpu == first && p.id == r.id));
        let (starts, size, from) = match (placed, base_p) {
            (Some(p), _) => (p.starts.clone(), p.size, lgipp.map(|(_, f)| f).unwrap_or("-lgipp").to_string()),
            (None, Some(b)) => (b.starts.clone(), b.memory_slices, format!("{} (by name)", base.source)),
            (None, None) => {
                return Err(HwError::invalid(
                    lgip_file,
                    format!(
                        "profile {} (ID {}) is not in the {} table; give its placements with --lgipp <nvidia-smi mig -lgipp>",
                        r.name, r.id, base.id
                    ),
                ))
            }
        };
        let compute = compute_of(&r.name)
            .or(base_p.map(|b| b.compute_slices))
            .ok_or_else(|| HwError::invalid(lgip_file, format!("profile name {} is not `<N>g.<M>gb`", r.name)))?;
        let memory_bytes = (r.memory_gib * GIB).round() as u64;
        profiles.push(Profile {
            name: r.name.clone(),
            id: Some(r.id),
            compute_slices: compute,
            memory_slices: size,
            max_instances: u8::try_from(r.total).unwrap_or(u8::MAX),
            starts,
            memory_bytes,
            sm_count: Some(r.sm),
            special: r.name.contains('+'),
            confirmed: true,
            note: Some(format!("memory, ID, count and SMs from {lgip_file}; placements from {from}")),
        });
    }
    let memory_slices = profiles
        .iter()
        .flat_map(|p| p.starts.iter().map(move |&s| s as u16 + p.memory_slices as u16))
        .max()
        .unwrap_or(0);
    let memory_slices = u8::try_from(memory_slices).unwrap_or(u8::MAX).max(base.memory_slices);
    let compute_slices = profiles.iter().map(|p| p.compute_slices).max().unwrap_or(base.compute_slices);
    let gpu = MigGpu {
        id: base.id.clone(),
        name: base.name.clone(),
        memory_slices,
        compute_slices,
        whole_card_bytes: base.whole_card_bytes,
        full_card_sms: base.full_card_sms,
        profiles,
        source: format!("{lgip_file} (nvidia-smi mig -lgip)"),
    };
    gpu.validate().map_err(|e| HwError::invalid(lgip_file, e.to_string()))?;
    Ok(gpu)
}
