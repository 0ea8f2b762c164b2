//! Memory outside the allocator's live tensors, per process per GPU, and
//! the headroom margin. All constants are documented and overridable.

use crate::error::CoreError;
use crate::explain::Explanation;
use crate::ledger::{Category, Ledger};
use crate::units::{scale, MIB};
use serde::{Deserialize, Serialize};

/// CUDA context + cuDNN/cuBLAS handles + kernel images. No authoritative
/// figure exists (shared/reference/pytorch-formats.md §e): the rule of thumb
/// is 250–600 MiB per process per GPU, smaller with lazy module loading
/// (the CUDA 12 default). We take 500 MiB; `--cuda-context-mib` overrides.
pub const DEFAULT_CUDA_CONTEXT: u64 = 500 * MIB;

/// cuBLAS workspace (default `:4096:2:16:8` = 8,519,680 B, seen as an
/// 8519680 B block in snapshots) + cuBLASLt workspace (4 MiB on sm80 ≥ 24 GiB,
/// PR pytorch#120925). Hopper uses 32 MiB each; `--workspace-mib` overrides.
pub const DEFAULT_WORKSPACE: u64 = 8_519_680 + 4 * MIB;

/// Headroom for allocator rounding, fragmentation and unaccounted buffers:
/// the seed's "× 1.2" rule.
pub const DEFAULT_MARGIN: f64 = 0.20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeSetup {
    pub cuda_context_bytes: u64,
    pub workspace_bytes: u64,
    /// fraction added on top of tensors + runtime
    pub margin: f64,
}

impl Default for RuntimeSetup {
    fn default() -> Self {
        RuntimeSetup {
            cuda_context_bytes: DEFAULT_CUDA_CONTEXT,
            workspace_bytes: DEFAULT_WORKSPACE,
            margin: DEFAULT_MARGIN,
        }
    }
}

impl RuntimeSetup {
    /// Append the runtime and margin entries to a ledger whose tensor
    /// entries are complete. The margin is checked with the rest of the
    /// workload ([`crate::workload::validate`]); `scale` refuses a
    /// non-finite or negative one here too.
    pub fn apply(&self, ledger: &mut Ledger) -> Result<(), CoreError> {
        ledger.push(
            Category::Runtime,
            "CUDA context + library handles",
            self.cuda_context_bytes,
            Explanation::new("constant per process per GPU")
                .term("cuda_context_mib", self.cuda_context_bytes / MIB)
                .note("rule of thumb 250–600 MiB (no authoritative figure); measure nvidia-smi usage − memory_reserved(); override with --cuda-context-mib"),
        );
        ledger.push(
            Category::Runtime,
            "cuBLAS + cuBLASLt workspaces",
            self.workspace_bytes,
            Explanation::new("cuBLAS :4096:2:16:8 (8,519,680 B) + cuBLASLt 4 MiB")
                .term("workspace_bytes", self.workspace_bytes)
                .note("Hopper defaults are 32 MiB each; override with --workspace-mib"),
        );
        let base = ledger.checked_total()?;
        let m = scale("margin", base, self.margin)?;
        ledger.push(
            Category::Margin,
            "headroom (rounding, fragmentation)",
            m,
            Explanation::new("margin × (tensors + runtime)")
                .term("margin", self.margin)
                .term("tensors + runtime", base)
                .note("the ×1.2 rule; the caching allocator rounds to 512 B / 2 MiB / 20 MiB segments and fragments; --margin changes it"),
        );
        ledger.checked_total()?;
        Ok(())
    }
}
