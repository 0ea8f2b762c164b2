//! The MIG profile model: a GPU's memory-slice axis, its GPU-instance
//! profiles and the placement rules that decide which sets of instances can
//! exist together.
//!
//! Source: NVIDIA MIG User Guide (v580), "supported MIG profiles" and the
//! `nvidia-smi mig -lgipp` output it prints (`{valid starts}:size`, size in
//! memory slices). A set of GPU instances is valid when every instance sits
//! at one of its profile's legal starts, no two `[start, start+size)` ranges
//! on the memory-slice axis overlap, no profile is used more often than its
//! maximum count, and the compute slices used do not exceed the card's.

use serde::{Deserialize, Serialize};

use crate::error::MigError;

/// Largest memory-slice axis we accept (real cards have 4 or 8).
pub const MAX_MEMORY_SLICES: u8 = 16;
/// Largest number of profiles per GPU we accept (real cards list 5-7, up to ~10 with +gfx).
pub const MAX_PROFILES: usize = 32;

/// One GPU-instance profile, e.g. `3g.20gb`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// name as `nvidia-smi` and mig-parted spell it, without the `MIG ` prefix
    pub name: String,
    /// `nvidia-smi mig -lgip` profile ID (device- and driver-specific; prefer names)
    pub id: Option<u32>,
    /// SM (compute) slices, the `Ng` in the name
    pub compute_slices: u8,
    /// memory slices taken on the placement axis (the `:size` in `-lgipp`)
    pub memory_slices: u8,
    /// how many of this profile one GPU can hold
    pub max_instances: u8,
    /// legal start indices on the memory-slice axis
    pub starts: Vec<u8>,
    /// memory the instance exposes, bytes (`-lgip` "Memory GiB" × 2^30)
    pub memory_bytes: u64,
    /// SMs of the instance, when known
    pub sm_count: Option<u32>,
    /// a media-extension (`+me`) or other special variant; never chosen automatically
    pub special: bool,
    /// every figure of this profile was read from a source
    pub confirmed: bool,
    /// what is not confirmed, or where the numbers come from
    pub note: Option<String>,
}

/// A MIG-capable GPU model with its profile table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MigGpu {
    /// catalogue id, e.g. `a100-40gb`
    pub id: String,
    /// display name
    pub name: String,
    /// width of the placement axis (8, or 4 on A30)
    pub memory_slices: u8,
    /// compute slices (7, or 4 on A30)
    pub compute_slices: u8,
    /// memory of the whole card as `nvidia-smi` reports it without MIG, bytes
    pub whole_card_bytes: u64,
    /// SMs of the whole card outside MIG mode, when known
    pub full_card_sms: Option<u32>,
    pub profiles: Vec<Profile>,
    /// where the table comes from (catalogue, or the user's `-lgip` file)
    pub source: String,
}

impl MigGpu {
    /// Check the table itself: a profile that cannot be placed, or a start
    /// that runs off the axis, is an error naming the profile.
    pub fn validate(&self) -> Result<(), MigError> {
        let bad = |field: String, reason: String| Err(MigError::BadProfile { gpu: self.id.clone(), field, reason });
        if self.memory_slices == 0 || self.memory_slices > MAX_MEMORY_SLICES {
            return bad("memory_slices".into(), format!("{} is not in 1..={MAX_MEMORY_SLICES}", self.memory_slices));
        }
        if self.compute_slices == 0 || self.compute_slices > MAX_MEMORY_SLICES {
            return bad("compute_slices".into(), format!("{} is not in 1..={MAX_MEMORY_SLICES}", self.compute_slices));
        }
        if self.profiles.is_empty() || self.profiles.len() > MAX_PROFILES {
            return bad("profiles".into(), format!("{} profiles; expected 1..={MAX_PROFILES}", self.profiles.len()));
        }
        for p in &self.profiles {
            let f = |what: &str| format!("profile {}: {what}", p.name);
            if p.memory_slices == 0 || p.memory_slices > self.memory_slices {
                return bad(f("memory_slices"), format!("{} is not in 1..={}", p.memory_slices, self.memory_slices));
            }
            if p.compute_slices == 0 || p.compute_slices > self.compute_slices {
                return bad(f("compute_slices"), format!("{} is not in 1..={}", p.compute_slices, self.compute_slices));
            }
            if p.max_instances == 0 {
                return bad(f("max_instances"), "0: the profile could never be created".into());
            }
            if p.starts.is_empty() {
                return bad(f("starts"), "no legal start".into());
            }
            if let Some(s) = p.starts.iter().find(|&&s| s as u16 + p.memory_slices as u16 > self.memory_slices as u16) {
                return bad(
                    f("starts"),
                    format!("start {s} + size {} runs past the {}-slice axis", p.memory_slices, self.memory_slices),
                );
            }
            if p.memory_bytes == 0 {
                return bad(f("memory_bytes"), "0".into());
            }
        }
        Ok(())
    }

    /// Index of a profile by name (case-insensitive, `MIG ` prefix allowed).
    pub fn profile_index(&self, name: &str) -> Option<usize> {
        let n = name.trim();
        let n = n.strip_prefix("MIG ").unwrap_or(n);
        self.profiles.iter().position(|p| p.name.eq_ignore_ascii_case(n))
    }
}

/// One GPU instance on one card: a profile at a start index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placed {
    /// index into [`MigGpu::profiles`]
    pub profile: usize,
    /// start on the memory-slice axis
    pub start: u8,
}

/// Why a set of placed instances is not a valid MIG layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("profile index {0} is not in the table")]
    UnknownProfile(usize),
    #[error("{profile} cannot start at {start}: legal starts are {legal:?}")]
    IllegalStart { profile: String, start: u8, legal: Vec<u8> },
    #[error("{a} at {a_start} and {b} at {b_start} overlap on the memory-slice axis")]
    Overlap { a: String, a_start: u8, b: String, b_start: u8 },
    #[error("{profile} used {count} times; at most {max} per GPU")]
    TooMany { profile: String, count: usize, max: u8 },
    #[error("{used} compute slices used; the card has {total}")]
    ComputeExceeded { used: u32, total: u8 },
}

/// Check a layout of one card against the placement rules (module doc).
pub fn check_layout(gpu: &MigGpu, placed: &[Placed]) -> Result<(), LayoutError> {
    let mut counts = vec![0usize; gpu.profiles.len()];
    let mut compute = 0u32;
    for (i, pl) in placed.iter().enumerate() {
        let p = gpu.profiles.get(pl.profile).ok_or(LayoutError::UnknownProfile(pl.profile))?;
        if !p.starts.contains(&pl.start) || pl.start as u16 + p.memory_slices as u16 > gpu.memory_slices as u16 {
            return Err(LayoutError::IllegalStart {
                profile: p.name.clone(),
                start: pl.start,
                legal: p.starts.clone(),
            });
        }
        counts[pl.profile] += 1;
        compute += p.compute_slices as u32;
        for other in &placed[..i] {
            let q = &gpu.profiles[other.profile];
            let (a0, a1) = (pl.start as u16, pl.start as u16 + p.memory_slices as u16);
            let (b0, b1) = (other.start as u16, other.start as u16 + q.memory_slices as u16);
            if a0 < b1 && b0 < a1 {
                return Err(LayoutError::Overlap {
                    a: q.name.clone(),
                    a_start: other.start,
                    b: p.name.clone(),
                    b_start: pl.start,
                });
            }
        }
    }
    for (i, &c) in counts.iter().enumerate() {
        let p = &gpu.profiles[i];
        if c > p.max_instances as usize {
            return Err(LayoutError::TooMany { profile: p.name.clone(), count: c, max: p.max_instances });
        }
    }
    if compute > gpu.compute_slices as u32 {
        return Err(LayoutError::ComputeExceeded { used: compute, total: gpu.compute_slices });
    }
    Ok(())
}

/// Find starts for a multiset of profiles on one card, or `None` when no
/// valid layout exists. Exhaustive backtracking over the legal starts
/// (at most 8 slices, so at most a few hundred nodes). Larger profiles are
/// placed first and at the lowest start: NVIDIA documents that creating the
/// 3g profile first avoids `Insufficient Resources` on A100, so the order
/// returned is also a safe creation order.
pub fn find_placement(gpu: &MigGpu, profiles: &[usize]) -> Option<Vec<Placed>> {
    let mut counts = vec![0usize; gpu.profiles.len()];
    let mut compute = 0u32;
    for &p in profiles {
        let prof = gpu.profiles.get(p)?;
        *counts.get_mut(p)? += 1;
        compute += prof.compute_slices as u32;
    }
    if compute > gpu.compute_slices as u32 {
        return None;
    }
    if counts.iter().enumerate().any(|(i, &c)| c > gpu.profiles[i].max_instances as usize) {
        return None;
    }
    let mem: u32 = profiles.iter().map(|&p| gpu.profiles[p].memory_slices as u32).sum();
    if mem > gpu.memory_slices as u32 {
        return None;
    }
    let mut order: Vec<usize> = profiles.to_vec();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&gpu.profiles[a], &gpu.profiles[b]);
        pb.memory_slices
            .cmp(&pa.memory_slices)
            .then(pb.compute_slices.cmp(&pa.compute_slices))
            .then(pa.starts.len().cmp(&pb.starts.len()))
            .then(a.cmp(&b))
    });
    let mut out = Vec::with_capacity(order.len());
    if place(gpu, &order, 0, 0u32, &mut out) {
        Some(out)
    } else {
        None
    }
}

fn place(gpu: &MigGpu, order: &[usize], i: usize, used: u32, out: &mut Vec<Placed>) -> bool {
    let Some(&p) = order.get(i) else { return true };
    let prof = &gpu.profiles[p];
    // Identical profiles in a row take increasing starts (symmetry).
    let min_start = match (i.checked_sub(1).map(|j| order[j]), out.last()) {
        (Some(prev), Some(last)) if prev == p => last.start.saturating_add(1),
        _ => 0,
    };
    for &s in &prof.starts {
        if s < min_start || s as u32 + prof.memory_slices as u32 > gpu.memory_slices as u32 {
            continue;
        }
        // memory_slices <= MAX_MEMORY_SLICES (16) on a validated table; checked anyway
        let Some(mask) = 1u32.checked_shl(prof.memory_slices as u32).and_then(|b| (b - 1).checked_shl(s as u32)) else {
            continue;
        };
        if used & mask != 0 {
            continue;
        }
        out.push(Placed { profile: p, start: s });
        if place(gpu, order, i + 1, used | mask, out) {
            return true;
        }
        out.pop();
    }
    false
}
