//! Memory beyond the allocator's live tensors, per process per GPU: the
//! CUDA context, library workspaces, NCCL communicators, the caching
//! allocator's own overhead (what turns `max_memory_allocated()` into
//! `max_memory_reserved()`), and the card's driver reservation. With these,
//! the ledger's device total predicts what nvidia-smi shows. All constants
//! are documented with their source and overridable.

use crate::error::CoreError;
use crate::explain::Explanation;
use crate::ledger::{Category, Ledger, Pool};
use crate::units::{scale, MIB};
use serde::{Deserialize, Serialize};

/// CUDA context + cuDNN/cuBLAS handles + kernel images. No authoritative
/// figure exists (shared/reference/pytorch-formats.md §e): the rule of thumb
/// is 250–600 MiB per process per GPU, smaller with lazy module loading
/// (the CUDA 12 default). We take 500 MiB; `--cuda-context-mib` overrides.
/// Measured higher: 1343 MiB on a V100 with CUDA 11 eager module loading
/// (Hugging Face "model memory anatomy"), 1.79 GiB of non-torch memory in a
/// vLLM V0 server on an H100 (vLLM PR #10511), whose profiling run loads
/// every kernel image the model uses.
pub const DEFAULT_CUDA_CONTEXT: u64 = 500 * MIB;

/// cuBLAS workspace (default `:4096:2:16:8` = 8,519,680 B, seen as an
/// 8519680 B block in snapshots) + cuBLASLt workspace (4 MiB on sm80 ≥ 24 GiB,
/// PR pytorch#120925). Hopper uses 32 MiB each; `--workspace-mib` overrides.
pub const DEFAULT_WORKSPACE: u64 = 8_519_680 + 4 * MIB;

/// Extra headroom on top of the prediction, as a fraction of tensors +
/// runtime + allocator overhead. 0 by default: the allocator model below is
/// what the old "× 1.2" rule stood in for; `--margin 0.2` brings the rule back.
pub const DEFAULT_MARGIN: f64 = 0.0;

/// Fraction of the transient tensors at the peak (activations, logits,
/// temporaries: what is not weights, master weights or optimizer states) that
/// PyTorch's caching allocator holds on top of them: freed blocks of other
/// sizes it keeps cached (`max_memory_reserved() − max_memory_allocated()`).
///
/// Fitted: median of (nvidia-smi peak − allocated peak − 500 MiB context) ÷
/// (allocated peak − allocated after training) over the nine single-GPU
/// fms-acceleration A100-80GB runs of `calibration/data/published` (0.12 –
/// 0.37, median 0.29). Block rounding (512 B) and segment rounding (2 MiB, 20
/// MiB) add nothing measurable for LLM weights, whose sizes are multiples of
/// 2 MiB; they are in this fraction for activations.
pub const DEFAULT_FRAGMENTATION: f64 = 0.29;

/// What the driver keeps of each card for itself: nvidia-smi's total minus the
/// total CUDA reports (`cudaMemGetInfo`, `torch.cuda.mem_get_info`), the
/// "Reserved" row of `nvidia-smi -q`. Median of the `nvidia-smi -q -x`
/// fixtures in shared/fixtures/nvidia_smi (A10G 435, RTX A5000 450, RTX 4000
/// Ada 460, T4 388, A100-40GB 605 MiB); an H100 80GB's 81,559 MiB are 79.22 GiB
/// to CUDA in vLLM PR #10511's log (438 MiB reserved).
pub const DRIVER_RESERVED: u64 = 450 * MIB;

/// NCCL memory of one communicator of `ranks` GPUs on a link that is not
/// known, with PyTorch's NCCL ([`crate::nccl::communicator`]; 0 for one rank).
pub fn nccl_communicator_bytes(ranks: u64) -> u64 {
    crate::nccl::communicator(ranks, &crate::nccl::NcclHardware::default(), &crate::nccl::TORCH_DEFAULT).total
}

/// The card's memory as CUDA reports it, from the total nvidia-smi shows.
pub fn cuda_capacity(nvidia_smi_total: u64) -> u64 {
    nvidia_smi_total.saturating_sub(DRIVER_RESERVED)
}

/// One NCCL communicator a process holds on its GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Communicator {
    /// what it serves ("data parallel", "tensor parallel", …)
    pub role: &'static str,
    pub ranks: u64,
    /// the NCCL release and settings of the stack that creates it
    pub stack: crate::nccl::NcclStack,
}

impl Communicator {
    /// A communicator PyTorch creates with its own NCCL ([`crate::nccl::TORCH_DEFAULT`]).
    pub fn torch(role: &'static str, ranks: u64) -> Self {
        Communicator { role, ranks, stack: crate::nccl::TORCH_DEFAULT }
    }
}

/// What the runtime adds on top of a ledger's tensor lines ([`RuntimeSetup::added`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuntimeBytes {
    /// the caching allocator's cached free blocks at the reserved peak
    pub allocator: u64,
    /// that peak is reached at another moment of the step than the tensor peak
    pub allocator_elsewhere: bool,
    /// NCCL communicators
    pub nccl: u64,
    /// the `--margin` headroom line
    pub margin: u64,
    /// the ledger's total once these lines (and the context and workspaces) are added
    pub total: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeSetup {
    pub cuda_context_bytes: u64,
    pub workspace_bytes: u64,
    /// extra headroom on top of the prediction (fraction)
    pub margin: f64,
    /// caching-allocator overhead as a fraction of the transient tensors at the peak
    pub fragmentation: f64,
    /// the card's link and architecture, which NCCL's channels and buffers
    /// follow (not known by default: the largest figure)
    #[serde(default)]
    pub nccl: crate::nccl::NcclHardware,
}

impl Default for RuntimeSetup {
    fn default() -> Self {
        RuntimeSetup {
            cuda_context_bytes: DEFAULT_CUDA_CONTEXT,
            workspace_bytes: DEFAULT_WORKSPACE,
            margin: DEFAULT_MARGIN,
            fragmentation: DEFAULT_FRAGMENTATION,
            nccl: crate::nccl::NcclHardware::default(),
        }
    }
}

impl RuntimeSetup {
    /// One NCCL communicator's device memory on this card ([`crate::nccl::communicator`]).
    pub fn communicator_bytes(&self, c: &Communicator) -> crate::nccl::CommBytes {
        crate::nccl::communicator(c.ranks, &self.nccl, &c.stack)
    }

    /// The caching allocator's overhead for a peak of `transient` bytes of
    /// short-lived tensors.
    pub fn allocator_overhead(&self, transient: u64) -> Result<u64, CoreError> {
        scale("allocator overhead", transient, self.fragmentation)
    }

    /// The bytes [`RuntimeSetup::apply_moments`] adds to a ledger whose lines
    /// so far sum to `lines_total`, `tensors` of them live tensors and
    /// `persistent` of those long-lived (weights, master, optimizer states, KV,
    /// communication buckets). The one computation of these figures: the
    /// ledger's lines and the planner's summaries both come from it.
    pub fn added(
        &self,
        lines_total: u64,
        tensors: u64,
        persistent: u64,
        comms: &[Communicator],
        other: Option<(u64, u64)>,
    ) -> Result<RuntimeBytes, CoreError> {
        let transient = tensors.saturating_sub(persistent);
        let at_peak = self.allocator_overhead(transient)?;
        let elsewhere = match other {
            Some((alloc, trans)) => {
                crate::units::add("reserved", alloc, self.allocator_overhead(trans)?)?.saturating_sub(tensors)
            }
            None => 0,
        };
        let allocator = at_peak.max(elsewhere);
        let mut nccl = 0u64;
        for c in comms {
            nccl = crate::units::add("NCCL communicators", nccl, self.communicator_bytes(c).total)?;
        }
        let base = crate::units::sum(
            "total per-GPU bytes",
            &[lines_total, allocator, self.cuda_context_bytes, self.workspace_bytes, nccl],
        )?;
        let margin = scale("margin", base, self.margin)?;
        Ok(RuntimeBytes {
            allocator,
            allocator_elsewhere: elsewhere > at_peak,
            nccl,
            margin,
            total: crate::units::add("total per-GPU bytes", base, margin)?,
        })
    }

    /// Append the runtime, NCCL, allocator and margin entries to a ledger whose
    /// tensor entries are complete. The margin is checked with the rest of the
    /// workload ([`crate::workload::validate`]); `scale` refuses a non-finite
    /// or negative one here too.
    pub fn apply(&self, ledger: &mut Ledger) -> Result<(), CoreError> {
        self.apply_with(ledger, &[])
    }

    /// As [`RuntimeSetup::apply`], with the NCCL communicators this process holds.
    pub fn apply_with(&self, ledger: &mut Ledger, comms: &[Communicator]) -> Result<(), CoreError> {
        self.apply_moments(ledger, comms, None, 0)
    }

    /// As [`RuntimeSetup::apply_with`], also given another moment of the step
    /// (`(allocated, transient)` bytes, e.g. backward when the tensor peak is the
    /// optimizer step): the allocator never gives cached memory back, so the
    /// reserved peak is the largest `allocated + fragmentation × transient` over
    /// the moments, even when that moment is not the allocated peak. `resident`:
    /// tensors allocated once for the whole run beyond the persistent categories
    /// (communication buckets), which do not fragment.
    pub fn apply_moments(
        &self,
        ledger: &mut Ledger,
        comms: &[Communicator],
        other: Option<(u64, u64)>,
        resident: u64,
    ) -> Result<(), CoreError> {
        let tensors = ledger.tensor_peak_bytes();
        let persistent = ledger.persistent_bytes().saturating_add(resident);
        let transient = tensors.saturating_sub(persistent);
        let added = self.added(ledger.checked_total()?, tensors, persistent, comms, other)?;
        let overhead = added.allocator;
        let moment = if added.allocator_elsewhere { "another moment of the step" } else { "the tensor peak" };
        ledger.push_in(
            Pool::Allocator,
            Category::Margin,
            "allocator: cached free blocks at the peak (reserved − allocated)",
            overhead,
            Explanation::new("max over the step's moments of (allocated + fragmentation × transient) − tensor peak")
                .term("fragmentation", self.fragmentation)
                .term("transient tensors at the tensor peak (peak − weights, master, optimizer states)", transient)
                .term("reserved peak reached at", moment)
                .note(format!(
                    "PyTorch's caching allocator rounds blocks to 512 B and carves 2 MiB / 20 MiB segments, and keeps freed blocks of other sizes cached: max_memory_reserved() exceeds max_memory_allocated() by about this much. The fraction {:.2} is fitted on nine single-GPU fms-acceleration A100 runs (nvidia-smi vs allocated peaks); PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lowers it",
                    self.fragmentation
                )),
        );
        ledger.push(
            Category::Runtime,
            "CUDA context + library handles",
            self.cuda_context_bytes,
            Explanation::new("constant per process per GPU")
                .term("cuda_context_mib", self.cuda_context_bytes / MIB)
                .note("rule of thumb 250–600 MiB with CUDA 12 lazy module loading (no authoritative figure); 1.3 GiB with CUDA 11 eager loading; measure nvidia-smi usage − memory_reserved(); override with --cuda-context-mib"),
        );
        ledger.push(
            Category::Runtime,
            "cuBLAS + cuBLASLt workspaces",
            self.workspace_bytes,
            Explanation::new("cuBLAS :4096:2:16:8 (8,519,680 B) + cuBLASLt 4 MiB")
                .term("workspace_bytes", self.workspace_bytes)
                .note("Hopper defaults are 32 MiB each; override with --workspace-mib"),
        );
        for c in comms {
            self.push_communicator(ledger, c);
        }
        let base = ledger.checked_total()?;
        let m = added.margin;
        if m > 0 {
            ledger.push(
                Category::Margin,
                "headroom asked for (--margin)",
                m,
                Explanation::new("margin × (tensors + allocator + runtime)")
                    .term("margin", self.margin)
                    .term("tensors + allocator + runtime", base)
                    .note("on top of the prediction of what nvidia-smi shows; --margin 0.2 is the old × 1.2 rule"),
            );
        }
        let total = ledger.checked_total()?;
        if total != added.total {
            return Err(CoreError::Internal(format!(
                "runtime lines bring the ledger to {total} B, RuntimeSetup::added says {} B",
                added.total
            )));
        }
        Ok(())
    }

    /// The ledger line of one NCCL communicator, with its terms.
    fn push_communicator(&self, ledger: &mut Ledger, c: &Communicator) {
        let b = self.communicator_bytes(c);
        let read = crate::nccl::p2p_read(&self.nccl);
        let chain = if c.ranks > 2 {
            "ring send + receive, and the tree's send to its parent and receive from its child (a middle rank of the chain)"
        } else {
            "ring send + receive (the tree's peer is the ring's)"
        };
        ledger.push(
            Category::Runtime,
            format!("NCCL communicator ({}, {} ranks)", c.role, c.ranks),
            b.total,
            Explanation::new("channels × buffers per channel + NVLS buffers + per-communicator residual")
                .term("ranks", c.ranks)
                .term("NCCL release assumed", format!("{} ({})", c.stack.release, c.stack.pinned_by))
                .term("link", self.nccl.label())
                .term("channels", b.channels)
                .term(format!("buffers per channel: {chain}"), b.per_channel)
                .term(
                    "one send + receive pair",
                    format!(
                        "{} + {} B (P2P read {})",
                        crate::nccl::p2p_send_bytes(read),
                        crate::nccl::p2p_recv_bytes(read),
                        if read { "on" } else { "off" }
                    ),
                )
                .term("channels × buffers", b.p2p)
                .term("NVLS buffers (Hopper+ NVSwitch, cuMem and NVLS on)", b.nvls)
                .term("residual per communicator (NCCL issue #964)", b.residual)
                .note("NCCL's LL 512 KiB + LL128 4,915,200 B + SIMPLE 4 MiB protocol buffers per connection, each side rounded to 2 MiB (src/transport/p2p.cc); channels from NCCL's ring search, doubled (src/graph/search.cc, connect.cc); NVLS from src/transport/nvls.cc; allocated by NCCL outside the PyTorch allocator. The 256 MiB residual is what NCCL issue #964's 544 / 688 MiB on 4 × A100 NVLink leave after the buffers. NCCL_BUFFSIZE / NCCL_MAX_NCHANNELS / NCCL_NVLS_ENABLE change it"),
        );
    }
}
