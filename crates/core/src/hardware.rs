//! GPU facts the formulas need. Data comes from `vramfit-catalog`.

use serde::{Deserialize, Serialize};

/// Interconnect between GPUs of one machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Link {
    /// NVLink/NVSwitch: tensor parallelism is allowed
    Nvlink,
    /// PCIe only: no TP across cards
    #[default]
    Pcie,
}

/// One GPU model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSpec {
    /// catalogue id, e.g. `a100-80gb-sxm`
    pub id: String,
    /// display name
    pub name: String,
    /// other spellings accepted on the command line
    #[serde(default)]
    pub aliases: Vec<String>,
    /// memory as nvidia-smi reports it (`memory.total`), in MiB
    pub memory_mib: u64,
    /// memory on the box (GB, decimal), for display
    pub memory_gb: f64,
    /// HBM/GDDR bandwidth in GB/s
    pub bandwidth_gbs: f64,
    /// dense bf16 (or fp16 where no bf16) tensor TFLOP/s
    pub bf16_tflops: f64,
    #[serde(default)]
    pub fp8_tflops: Option<f64>,
    /// aggregate NVLink bandwidth per GPU, GB/s (None: PCIe only)
    #[serde(default)]
    pub nvlink_gbs: Option<f64>,
    /// PCIe generation (3, 4, 5)
    pub pcie_gen: u8,
    /// MIG instances supported (0: no MIG)
    #[serde(default)]
    pub mig_max: u8,
    /// has native bf16 (Ampere and later)
    #[serde(default = "yes")]
    pub bf16: bool,
    /// architecture (`turing`, `volta`, `ampere`, `ada`, `hopper`, `blackwell`, `cdna3`);
    /// the planner's time model picks its achievable MFU by this
    #[serde(default)]
    pub arch: String,
    /// figures checked against a source
    #[serde(default)]
    pub confirmed: bool,
    /// where the figures come from
    pub source: String,
}

fn yes() -> bool {
    true
}

impl GpuSpec {
    /// Usable memory in bytes (what the driver exposes). The catalogue
    /// refuses a `memory_mib` above its plausible maximum, so the product
    /// cannot saturate for a catalogue card.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_mib.saturating_mul(crate::units::MIB)
    }
}
