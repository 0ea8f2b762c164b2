//! A GPU's generation: one type for the fact, used by the catalogue, the
//! time model and NCCL's channel tables (kept apart from `hardware` so that
//! `nccl` can key on it without an import circle).

use serde::{Deserialize, Serialize};

/// A GPU architecture (the generation of its tensor cores and links): the
/// planner's time model picks an achievable MFU by it, `vramfit check` the
/// NVLink generation. Spelled in lowercase (`ampere`) in the catalogue, in
/// `--mfu ampere=0.5` and in JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuArch {
    Volta,
    Turing,
    Ampere,
    Ada,
    Hopper,
    Blackwell,
    /// AMD Instinct MI300
    Cdna3,
}

impl GpuArch {
    pub const ALL: [GpuArch; 7] = [
        GpuArch::Volta,
        GpuArch::Turing,
        GpuArch::Ampere,
        GpuArch::Ada,
        GpuArch::Hopper,
        GpuArch::Blackwell,
        GpuArch::Cdna3,
    ];

    pub fn name(self) -> &'static str {
        match self {
            GpuArch::Volta => "volta",
            GpuArch::Turing => "turing",
            GpuArch::Ampere => "ampere",
            GpuArch::Ada => "ada",
            GpuArch::Hopper => "hopper",
            GpuArch::Blackwell => "blackwell",
            GpuArch::Cdna3 => "cdna3",
        }
    }

    /// The architecture spelled `s` (any case), None when there is none.
    pub fn parse(s: &str) -> Option<GpuArch> {
        GpuArch::ALL.into_iter().find(|a| a.name().eq_ignore_ascii_case(s.trim()))
    }
}

impl std::fmt::Display for GpuArch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
