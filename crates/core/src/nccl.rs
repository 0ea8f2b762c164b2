//! NCCL's device memory per communicator, from NCCL's own source (issue 22):
//! the protocol buffers of every point-to-point connection a rank holds, times
//! the channels NCCL opens on that link, plus NVLink SHARP (NVLS) buffers on
//! Hopper and Blackwell NVSwitch systems when the stack leaves NVLS on, plus a
//! measured per-communicator residual that the buffers do not explain.
//!
//! Every constant cites the NCCL file and release tag (github.com/NVIDIA/nccl)
//! it comes from; the buffer sizes below are the same from v2.14.3-1 to
//! v2.28.9-1. Host memory (proxy state, the work FIFO in `cudaHostAlloc`
//! memory, SHM transport buffers) is not device memory and is not counted.

use crate::units::MIB;
use serde::{Deserialize, Serialize};

/// `CUDA_IPC_MIN` (src/include/comm.h, v2.14.3-1 … v2.28.9-1): every P2P
/// connection buffer is rounded up to it (`ALIGN_SIZE(sendSize, CUDA_IPC_MIN)`
/// in `p2pSendSetup` / `p2pRecvSetup`, src/transport/p2p.cc).
pub const CUDA_IPC_MIN: u64 = 2 * MIB;

/// `sizeof(struct ncclSendMem)` and `sizeof(struct ncclRecvMem)`: unions padded
/// to `MEM_ALIGN` 4096 (src/include/comm.h, v2.18.3-1).
pub const CONN_HEADER: u64 = 4096;

/// `DEFAULT_LL_BUFFSIZE` = `NCCL_LL_LINES_PER_THREAD` 8 × `NCCL_LL_MAX_NTHREADS`
/// 512 × `NCCL_STEPS` 8 × `sizeof(union ncclLLFifoLine)` 16 (src/init.cc,
/// src/include/device.h, v2.18.3-1 … v2.28.9-1) = 524,288 B.
pub const LL_BUFFSIZE: u64 = 8 * 512 * 8 * 16;

/// `DEFAULT_LL128_BUFFSIZE` = `NCCL_LL128_ELEMS_PER_THREAD` 120 ×
/// `NCCL_LL128_MAX_NTHREADS` 640 × `NCCL_STEPS` 8 × `sizeof(uint64_t)` (src/init.cc,
/// v2.18.3-1 … v2.28.9-1) = 4,915,200 B.
pub const LL128_BUFFSIZE: u64 = 120 * 640 * 8 * 8;

/// `DEFAULT_BUFFSIZE` (1 << 22, the SIMPLE protocol; src/init.cc): 4 MiB.
/// `NCCL_BUFFSIZE` changes it.
pub const SIMPLE_BUFFSIZE: u64 = 4 * MIB;

/// Device memory per communicator that NCCL's buffers do not explain: NCCL
/// issue #964 measured 544 MiB per 2-rank group and 688 MiB per 3- or 4-rank
/// group on 4 × A100 NVLink (PyTorch, August 2023). The buffers below account
/// for 288 MiB and 432 MiB of those on the rank measured (24 channels × 12 MiB;
/// the tree adds one 6 MiB receive per channel on the chain's head): both leave
/// the same 256 MiB, which is kept per communicator so that the figure never
/// falls below what was measured.
pub const COMM_RESIDUAL: u64 = 256 * MIB;

/// The GPUs of one NVSwitch board (HGX: 8), NVLS's heads per communicator at
/// most on one node (`nHeads` = the NVLS graph's channels, one per local GPU,
/// src/graph/connect.cc `connectNvls`). NVL72 racks (MNNVL) are not modelled.
pub const NVLS_MAX_LOCAL_RANKS: u64 = 8;

/// An NCCL release (`major.minor.patch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NcclRelease {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl NcclRelease {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        NcclRelease { major, minor, patch }
    }
}

impl std::fmt::Display for NcclRelease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The link between the GPUs of a communicator, as NCCL sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Link {
    /// NVLink / NVSwitch
    Nvlink,
    /// PCIe only
    Pcie,
}

/// The GPU generation NCCL's choices follow (P2P read from Ampere, NVLS from
/// Hopper, channel counts); the catalogue's architecture maps onto it
/// (`GpuSpec::nccl_hardware`).
/// The card's generation, as the catalogue names it (one type for the fact:
/// [`crate::arch::GpuArch`]); NCCL's channel counts follow it.
pub use crate::arch::GpuArch as Arch;

/// The interconnect facts NCCL's channel count and transport follow: the
/// card's link, generation and PCIe generation. `None`: not known (no
/// catalogue card), then the largest figure is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct NcclHardware {
    #[serde(default)]
    pub link: Option<Link>,
    #[serde(default)]
    pub arch: Option<Arch>,
    #[serde(default)]
    pub pcie_gen: Option<u8>,
}

impl NcclHardware {
    /// Said in `--explain`.
    pub fn label(&self) -> String {
        let link = match self.link {
            Some(Link::Nvlink) => "NVLink",
            Some(Link::Pcie) => "PCIe",
            None => "link not known (no catalogue card: the largest figure)",
        };
        match self.arch {
            Some(a) => format!("{link}, {}", a.name()),
            None => link.to_string(),
        }
    }
}

/// The NCCL a software stack runs and what it turns off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NcclStack {
    /// who pins it (engine release → its torch)
    pub pinned_by: &'static str,
    pub release: NcclRelease,
    /// NCCL allocates with cuMem (`NCCL_CUMEM_ENABLE`): NVLS needs it
    pub cumem: bool,
    /// NVLS is left on (`NCCL_NVLS_ENABLE`)
    pub nvls: bool,
}

/// PyTorch's NCCL when the job's stack is not given (training, transformers'
/// `generate`): torch 2.9's wheel pins `nvidia-nccl-cu12==2.27.5`; NCCL
/// enables cuMem by itself since 2.19 ("auto-enabled by default if the system
/// supports it", NCCL's `NCCL_CUMEM_ENABLE` documentation quoted in vLLM PR
/// #5091) and NVLS where NVSwitch multicast exists.
pub const TORCH_DEFAULT: NcclStack =
    NcclStack { pinned_by: "torch 2.9", release: NcclRelease::new(2, 27, 5), cumem: true, nvls: true };

/// SGLang sets `NCCL_CUMEM_ENABLE=0` and `NCCL_NVLS_ENABLE=0` before it starts
/// its workers (`_set_envs_and_config`, python/sglang/srt/entrypoints/engine.py):
/// no NVLS whatever the release, and the release does not change the figure.
pub const SGLANG_STACK: NcclStack = NcclStack {
    pinned_by: "SGLang with cuMem and NVLS off: any release holds the same bytes",
    release: NcclRelease::new(2, 21, 5),
    cumem: false,
    nvls: false,
};

/// One P2P connection's device buffer on the rank that allocates it
/// (`p2pSendSetup` / `p2pRecvSetup`, src/transport/p2p.cc, v2.14.3-1 …
/// v2.28.9-1): the sender holds the SIMPLE buffer when it is read remotely
/// (P2P read, `useRead`), the receiver holds LL, LL128 and (without read)
/// SIMPLE; each rounded up to `CUDA_IPC_MIN`.
pub fn p2p_send_bytes(read: bool) -> u64 {
    let size = CONN_HEADER + if read { SIMPLE_BUFFSIZE } else { 0 };
    size.div_ceil(CUDA_IPC_MIN) * CUDA_IPC_MIN
}

/// See [`p2p_send_bytes`].
pub fn p2p_recv_bytes(read: bool) -> u64 {
    let size = CONN_HEADER + LL_BUFFSIZE + LL128_BUFFSIZE + if read { 0 } else { SIMPLE_BUFFSIZE };
    size.div_ceil(CUDA_IPC_MIN) * CUDA_IPC_MIN
}

/// Whether NCCL reads the SIMPLE buffer from the peer: Ampere or later over
/// NVLink (`ncclTopoCheckP2p` sets `read`, src/graph/paths.cc; "if the GPUs are
/// Ampere and connected via NVLink, we enable P2P Read by default", p2p.cc).
/// The two layouts hold the same bytes per send + receive pair (6 + 6 MiB with
/// read, 2 + 10 MiB without).
pub fn p2p_read(hw: &NcclHardware) -> bool {
    hw.link == Some(Link::Nvlink) && !matches!(hw.arch, Some(Arch::Volta | Arch::Turing))
}

/// Collective channels on one node: NCCL's ring search finds channels of a
/// bandwidth its link carries, `ncclTopoDupChannels` doubles them where a
/// channel runs at 25 GB/s or more, and `ncclTopoPostset` doubles them again
/// (`nChannels = std::min(MAXCHANNELS, nChannels*2)`, src/graph/connect.cc).
/// - PCIe: one ring at the link's bandwidth (Gen4 24 GB/s: under 25, so not
///   duplicated) → 2 channels (NCCL issue #1358 logs "nChannels 1" across a
///   PCIe/SYS path); Gen5 carries one 40 GB/s ring, duplicated → 4.
/// - NVLink, Ampere: 12 search channels at 20 GB/s (12 NVLinks, NCCL's
///   `SM80_NVLINK_BW` 20) → 24, what NCCL issue #964's figures fit.
/// - NVLink, Hopper: 32 (`MAXCHANNELS` up to 2.24; 8 × H100 logs in NCCL issue
///   #1259 number channels past 22); Blackwell from 2.25 (`MAXCHANNELS` 64): 64.
/// - Link not known: 32.
pub fn channels(hw: &NcclHardware, release: NcclRelease) -> u64 {
    match (hw.link, hw.arch) {
        (Some(Link::Pcie), _) if hw.pcie_gen.is_some_and(|g| g >= 5) => 4,
        (Some(Link::Pcie), _) => 2,
        (Some(Link::Nvlink), Some(Arch::Volta | Arch::Turing | Arch::Ampere | Arch::Ada)) => 24,
        (Some(Link::Nvlink), Some(Arch::Blackwell)) if release >= NcclRelease::new(2, 25, 0) => 64,
        _ => 32,
    }
}

/// Where a rank sits in the intra-node tree NCCL builds in the ring's order
/// (`connectTrees`): the chain's head (rank 0, what NCCL issue #964 measured)
/// or a middle rank (the most memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainPosition {
    Head,
    Middle,
}

/// Buffers per channel of one rank. Ring: a send to the next rank and a
/// receive from the previous one (`ncclTransportRingConnect`). Tree: a send and
/// a receive with its parent and with its child (`ncclTransportTreeConnect`);
/// those that are the ring's own peer connections are shared (a connector is
/// set up once per peer and `connIndex`, `ncclTransportP2pSetup`). With 2
/// ranks the tree's peer is the ring's: nothing more. With 3 or more the chain's
/// head adds the receive from its child, a middle rank also the send to its
/// parent. NCCL ≥ 2.22 connects an algorithm only when first used
/// (`NCCL_RUNTIME_CONNECT`, with cuMem): which the tuner picks is not known
/// here, so the tree stays counted.
pub fn per_channel_bytes(ranks: u64, read: bool, at: ChainPosition) -> u64 {
    let (send, recv) = (p2p_send_bytes(read), p2p_recv_bytes(read));
    match (ranks, at) {
        (0 | 1, _) => 0,
        (2, _) => send + recv,
        (_, ChainPosition::Head) => send + 2 * recv,
        (_, ChainPosition::Middle) => 2 * (send + recv),
    }
}

/// NVLS buffers of one rank (`ncclNvlsBufferSetup`, src/transport/nvls.cc):
/// `nvlsChannels × 2 × buffSize × nHeads`, physical memory bound to the
/// multicast object, rounded to 2 MiB. Only where NVLS exists: NVLink on Hopper
/// or Blackwell, cuMem on, NVLS left on (from NCCL 2.17).
/// - channels: `NCCL_NVLS_NCHANNELS` 16; Blackwell 32 in 2.26
///   (`NVLS_NCHANNELS_SM100`), 24 on one node from 2.27 (`NVLS_NCHANNELS_SM100_NVL`);
/// - per channel and head: 2.17–2.20 `buffSizes[SIMPLE]` + `NVLS_MEM_ALIGN_SIZE`
///   (4 + 2 MiB), 2.21–2.22 `NCCL_NVLS_CHUNKSIZE` 128 KiB × `NCCL_STEPS` 8 + 2 MiB,
///   from 2.23 the 1 MiB alone;
/// - heads: the communicator's ranks on one board ([`NVLS_MAX_LOCAL_RANKS`]).
pub fn nvls_bytes(ranks: u64, hw: &NcclHardware, stack: &NcclStack) -> u64 {
    let hopper_up = matches!(hw.arch, Some(Arch::Hopper | Arch::Blackwell));
    let r = stack.release;
    if ranks < 2 || hw.link != Some(Link::Nvlink) || !hopper_up || !stack.cumem || !stack.nvls {
        return 0;
    }
    if r < NcclRelease::new(2, 17, 0) {
        return 0;
    }
    let channels = match hw.arch {
        Some(Arch::Blackwell) if r >= NcclRelease::new(2, 27, 0) => 24,
        Some(Arch::Blackwell) if r >= NcclRelease::new(2, 26, 0) => 32,
        _ => 16,
    };
    let chunk_buff = 128 * 1024 * 8;
    let per = if r < NcclRelease::new(2, 21, 0) {
        SIMPLE_BUFFSIZE + 2 * MIB
    } else if r < NcclRelease::new(2, 23, 0) {
        chunk_buff + 2 * MIB
    } else {
        chunk_buff
    };
    let heads = ranks.min(NVLS_MAX_LOCAL_RANKS);
    (channels * 2 * per * heads).div_ceil(2 * MIB) * 2 * MIB
}

/// One communicator's device memory on one rank, by term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommBytes {
    pub channels: u64,
    pub per_channel: u64,
    /// channels × per channel
    pub p2p: u64,
    pub nvls: u64,
    pub residual: u64,
    pub total: u64,
}

/// The device memory of one NCCL communicator of `ranks` GPUs on the rank at
/// `at` (0 for one rank: no buffers).
pub fn communicator_at(ranks: u64, hw: &NcclHardware, stack: &NcclStack, at: ChainPosition) -> CommBytes {
    if ranks < 2 {
        return CommBytes { channels: 0, per_channel: 0, p2p: 0, nvls: 0, residual: 0, total: 0 };
    }
    let channels = channels(hw, stack.release);
    let per_channel = per_channel_bytes(ranks, p2p_read(hw), at);
    let p2p = channels * per_channel;
    let nvls = nvls_bytes(ranks, hw, stack);
    CommBytes { channels, per_channel, p2p, nvls, residual: COMM_RESIDUAL, total: p2p + nvls + COMM_RESIDUAL }
}

/// The device memory of one NCCL communicator on its fullest rank (a middle
/// rank of the tree's chain): what every rank must have room for.
pub fn communicator(ranks: u64, hw: &NcclHardware, stack: &NcclStack) -> CommBytes {
    communicator_at(ranks, hw, stack, ChainPosition::Middle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A100_NVLINK: NcclHardware =
        NcclHardware { link: Some(Link::Nvlink), arch: Some(Arch::Ampere), pcie_gen: Some(4) };
    const PCIE4: NcclHardware = NcclHardware { link: Some(Link::Pcie), arch: Some(Arch::Ampere), pcie_gen: Some(4) };
    const H100_NVLINK: NcclHardware =
        NcclHardware { link: Some(Link::Nvlink), arch: Some(Arch::Hopper), pcie_gen: Some(5) };
    /// NCCL issue #964 (August 2023): PyTorch 2.0's NCCL 2.14.3, cuMem off
    const ISSUE_964: NcclStack =
        NcclStack { pinned_by: "torch 2.0", release: NcclRelease::new(2, 14, 3), cumem: false, nvls: true };

    #[test]
    fn connection_buffers_follow_p2p_cc() {
        // read (Ampere NVLink): send 4096 + 4 MiB → 6 MiB; receive 4096 + 524,288
        // + 4,915,200 = 5,443,584 → 6 MiB
        assert_eq!((p2p_send_bytes(true), p2p_recv_bytes(true)), (6 * MIB, 6 * MIB));
        // without read (PCIe): send 4096 → 2 MiB; receive 5,443,584 + 4,194,304 =
        // 9,637,888 → 10 MiB (the 10,485,760 B and 2,097,152 B allocations of
        // NCCL issue #1685's NCCL_DEBUG_SUBSYS=ALLOC log)
        assert_eq!((p2p_send_bytes(false), p2p_recv_bytes(false)), (2 * MIB, 10 * MIB));
    }

    #[test]
    fn issue_964_is_reproduced_on_the_rank_it_measured() {
        // 2 ranks: 24 channels × (6 + 6) MiB = 288 MiB + 256 MiB residual = 544 MiB
        let two = communicator_at(2, &A100_NVLINK, &ISSUE_964, ChainPosition::Head);
        assert_eq!((two.channels, two.p2p, two.total), (24, 288 * MIB, 544 * MIB));
        // 4 ranks, rank 0 heads the chain: 24 × (6 + 6 + 6) = 432 MiB + 256 = 688 MiB
        let four = communicator_at(4, &A100_NVLINK, &ISSUE_964, ChainPosition::Head);
        assert_eq!(four.total, 688 * MIB);
        // a middle rank also sends to its parent: 24 × 24 MiB = 576 + 256 = 832 MiB
        assert_eq!(communicator(4, &A100_NVLINK, &ISSUE_964).total, 832 * MIB);
    }

    #[test]
    fn pcie_holds_a_fraction_of_nvlink() {
        // PCIe Gen4, 2 ranks: 2 channels × (2 + 10) MiB = 24 MiB + 256 = 280 MiB
        let stack = NcclStack { release: NcclRelease::new(2, 20, 5), cumem: false, ..TORCH_DEFAULT };
        assert_eq!(communicator(2, &PCIE4, &stack).total, 280 * MIB);
        assert!(communicator(2, &PCIE4, &stack).total < communicator(2, &A100_NVLINK, &stack).total);
        // Gen5: 4 channels × 12 MiB = 48 + 256 = 304 MiB
        let gen5 = NcclHardware { pcie_gen: Some(5), ..PCIE4 };
        assert_eq!(communicator(2, &gen5, &stack).total, 304 * MIB);
    }

    #[test]
    fn nvls_follows_the_release_and_the_stack() {
        // cuMem off (vLLM 0.5–0.10.1): no NVLS; H100 2 ranks = 32 × 12 + 256 = 640 MiB
        let v06 = NcclStack { release: NcclRelease::new(2, 20, 5), cumem: false, ..TORCH_DEFAULT };
        assert_eq!(communicator(2, &H100_NVLINK, &v06).total, 640 * MIB);
        // torch 2.9's NCCL 2.27.5: 16 channels × 2 × 1 MiB × 8 heads = 256 MiB at 8 ranks
        assert_eq!(nvls_bytes(8, &H100_NVLINK, &TORCH_DEFAULT), 256 * MIB);
        // NCCL 2.21: 16 × 2 × 3 MiB × 8 = 768 MiB; 2.18–2.20: 16 × 2 × 6 MiB × 8 = 1536 MiB
        let s = |r| NcclStack { release: r, ..TORCH_DEFAULT };
        assert_eq!(nvls_bytes(8, &H100_NVLINK, &s(NcclRelease::new(2, 21, 5))), 768 * MIB);
        assert_eq!(nvls_bytes(8, &H100_NVLINK, &s(NcclRelease::new(2, 20, 5))), 1536 * MIB);
        // SGLang turns NVLS off; A100 has no NVLS
        assert_eq!(nvls_bytes(8, &H100_NVLINK, &SGLANG_STACK), 0);
        assert_eq!(nvls_bytes(8, &A100_NVLINK, &TORCH_DEFAULT), 0);
    }

    #[test]
    fn one_rank_holds_nothing() {
        assert_eq!(communicator(1, &H100_NVLINK, &TORCH_DEFAULT).total, 0);
    }
}
