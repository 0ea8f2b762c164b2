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

pub use crate::arch::GpuArch;

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
    /// dense TF32 tensor TFLOP/s (None: no TF32, pre-Ampere)
    #[serde(default)]
    pub tf32_tflops: Option<f64>,
    /// fp32 TFLOP/s on the CUDA cores (no tensor cores): fp32 matmuls without TF32
    #[serde(default)]
    pub fp32_tflops: Option<f64>,
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
    /// architecture; the planner's time model picks its achievable MFU by
    /// this (None: not given, the fallback MFU)
    #[serde(default)]
    pub arch: Option<GpuArch>,
    /// figures checked against a source
    #[serde(default)]
    pub confirmed: bool,
    /// where the figures come from
    pub source: String,
}

impl GpuSpec {
    /// The facts NCCL's channels and buffers follow ([`crate::nccl`]): NVLink
    /// when the card has NVLink bandwidth (`nvlink_gbs`), else PCIe; its
    /// generation (none for AMD's CDNA3, whose RCCL is not modelled: the largest
    /// figure).
    pub fn nccl_hardware(&self) -> crate::nccl::NcclHardware {
        // AMD Instinct runs RCCL, not NCCL: its generation is not one NCCL's
        // tables key on, so the figure for a generation not known is taken
        let arch = self.arch.filter(|a| *a != GpuArch::Cdna3);
        let link = if self.nvlink_gbs.is_some() { crate::nccl::Link::Nvlink } else { crate::nccl::Link::Pcie };
        crate::nccl::NcclHardware { link: Some(link), arch, pcie_gen: Some(self.pcie_gen) }
    }
}

fn yes() -> bool {
    true
}

/// Which of a GPU's peak rates a computation runs at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakKind {
    /// fp32 on the CUDA cores (PyTorch's default for fp32 matmuls: TF32 is off
    /// unless `torch.backends.cuda.matmul.allow_tf32` / `--tf32` turns it on)
    Fp32,
    /// TF32 tensor cores
    Tf32,
    /// fp16/bf16 tensor cores
    Bf16,
    /// fp8 tensor cores
    Fp8,
}

impl PeakKind {
    pub fn name(self) -> &'static str {
        match self {
            PeakKind::Fp32 => "fp32",
            PeakKind::Tf32 => "tf32",
            PeakKind::Bf16 => "bf16/fp16",
            PeakKind::Fp8 => "fp8",
        }
    }
}

impl GpuSpec {
    /// Dense peak TFLOP/s for `kind`, and the kind actually used: a card
    /// without the rate falls back to the next slower one it has (fp8 → 16-bit;
    /// TF32 → fp32), never to a faster one. An fp32 figure missing from the
    /// catalogue is taken as 1/16 of the 16-bit tensor rate (A100: 19.5 vs 312).
    pub fn peak_tflops(&self, kind: PeakKind) -> (PeakKind, f64) {
        let fp32 = || self.fp32_tflops.unwrap_or(self.bf16_tflops / 16.0);
        match kind {
            PeakKind::Fp8 => match self.fp8_tflops {
                Some(v) => (PeakKind::Fp8, v),
                None => (PeakKind::Bf16, self.bf16_tflops),
            },
            PeakKind::Bf16 => (PeakKind::Bf16, self.bf16_tflops),
            PeakKind::Tf32 => match self.tf32_tflops {
                Some(v) => (PeakKind::Tf32, v),
                None => (PeakKind::Fp32, fp32()),
            },
            PeakKind::Fp32 => (PeakKind::Fp32, fp32()),
        }
    }

    /// Usable memory in bytes (what the driver exposes). The catalogue
    /// refuses a `memory_mib` above its plausible maximum, so the product
    /// cannot saturate for a catalogue card.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_mib.saturating_mul(crate::units::MIB)
    }

    /// What a process can allocate on the whole card: the capacity CUDA reports
    /// (nvidia-smi's total less the driver's reservation,
    /// [`crate::runtime::cuda_capacity`]). Every fit against a catalogue card uses it.
    pub fn usable_bytes(&self) -> u64 {
        crate::runtime::cuda_capacity(self.memory_bytes())
    }
}
