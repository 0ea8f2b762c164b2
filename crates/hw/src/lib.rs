//! vramfit-hw: what machine is this? Parsers of `nvidia-smi` outputs, a
//! probe trait (files, fixtures, NVML loaded at run time), and the verdict
//! against what was rented.
//!
//! - [`xml`]: `nvidia-smi -q -x`; [`text`]: `nvidia-smi -q`; [`topo`]:
//!   `nvidia-smi topo -m`; [`list`]: `nvidia-smi -L`; [`mig`]:
//!   `nvidia-smi mig -lgi`/`-lgip`/`-lgipp`
//! - [`probe`]: `trait GpuProbe` with files, fake and NVML implementations
//! - [`bandwidth`]: `bandwidthTest`, `p2pBandwidthLatencyTest` and nccl-tests
//!   reports, and their judgement against the links
//! - [`reference`](mod@reference): the known cards (catalogue × MIG tables × PCI ids) and
//!   the card an `--expect` model names
//! - [`verdict`](mod@verdict): the machine against `--expect 8xA100-80GB --expect-nvlink`
//! - [`select`]: which card a job is fitted against (a catalogue card, a
//!   memory size, or the local GPUs with the most free memory)
//! - [`check`]: one decided check (machine, verdict, bandwidth), for the report
//! - [`fabric`]: `ibstat`, `ibv_devinfo`, perftest, and what a multi-node
//!   collective may reach over the fabric
//! - [`fleet`]: many nodes (`check --fleet`): each checked, then compared,
//!   and the fabric judged
//! - [`clean`], [`foreign`], [`files`]: input hygiene: escaped text, other
//!   tools' outputs named, bounded reads

pub mod bandwidth;
pub mod check;
pub mod clean;
pub mod error;
pub mod fabric;
pub mod files;
pub mod fleet;
pub mod foreign;
pub mod list;
pub mod machine;
pub mod mig;
pub mod named;
pub mod probe;
pub mod reference;
pub mod select;
pub mod text;
pub mod topo;
pub mod verdict;
pub mod xml;

pub use error::HwError;
pub use machine::{Gpu, Machine, MigDevice, MigMode};
pub use named::NamedText;
pub use probe::{FakeProbe, FilesProbe, GpuProbe, NvmlProbe, TextsProbe};
pub use topo::{Link, Topology};
pub use verdict::{verdict, Expectation, Finding, Level, RefCard, RefSlice, Verdict};
