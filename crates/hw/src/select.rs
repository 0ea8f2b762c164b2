//! Which card a job is fitted against: a catalogue card (`--gpu a100-80gb`),
//! a card given by its memory (`--gpu-mem 24GiB`), or the local GPUs read
//! through a [`GpuProbe`] (`--gpu auto`), fitted against their **free**
//! memory. The policy for local GPUs: the GPUs `CUDA_VISIBLE_DEVICES`
//! shows, less those in MIG mode or without a memory size, the freest
//! first, as many as the job needs; the fit uses the smallest free memory
//! among them.
//!
//! Values in, values out: the probe and CUDA's environment variables are
//! arguments ([`CudaEnv`]), so the policy is tested on fixtures. Parsing
//! the flags stays with the front end.

use crate::machine::{Gpu, Machine, MigMode};
use crate::probe::GpuProbe;
use crate::HwError;
use serde::Serialize;
use thiserror::Error;
use vramfit_catalog::gpus::{builtin_gpus, find_gpu, CatalogError};
use vramfit_core::GpuSpec;

/// The local GPUs `--gpu auto` read.
#[derive(Debug, Clone, Serialize)]
pub struct DetectedGpus {
    /// `NVML`
    pub source: String,
    /// the GPUs the workload uses (most free memory first)
    pub gpus: Vec<DetectedGpu>,
    /// GPUs seen but not used, and why (MIG enabled, not needed, hidden by `CUDA_VISIBLE_DEVICES`)
    pub skipped: Vec<String>,
}

/// One local GPU's memory as NVML reports it.
#[derive(Debug, Clone, Serialize)]
pub struct DetectedGpu {
    pub index: u32,
    pub name: String,
    pub total_bytes: u64,
    /// held by other processes (and this driver's contexts)
    pub used_bytes: u64,
    /// reserved by the driver
    pub reserved_bytes: u64,
    pub free_bytes: u64,
}

/// A card to fit on.
#[derive(Debug, Clone)]
pub struct FitTarget {
    /// display name
    pub name: String,
    /// memory the fit is checked against (free memory for local GPUs)
    pub memory_bytes: u64,
    /// the card's whole memory: vLLM's `gpu_memory_utilization` is a
    /// fraction of it (`--gpu-util` capacity)
    pub total_bytes: u64,
    pub detected: Option<DetectedGpus>,
    /// the catalogue card when the target is one (`--gpu NAME`): what it can
    /// compute in (bf16, FP8 tensor cores) is known only then
    pub card: Option<vramfit_core::GpuSpec>,
    /// sentences for the report's notes
    pub notes: Vec<String>,
}

impl FitTarget {
    /// A card known only by its memory; `given` is the size as the user wrote it.
    pub fn of_memory(bytes: u64, given: &str) -> FitTarget {
        FitTarget {
            name: memory_card_name(bytes, given),
            memory_bytes: bytes,
            total_bytes: bytes,
            detected: None,
            card: None,
            notes: Vec::new(),
        }
    }

    /// What a process may allocate: the free memory of a local GPU, else the
    /// capacity CUDA reports (nvidia-smi's total less the driver's reservation).
    pub fn usable_bytes(&self) -> u64 {
        match self.detected {
            Some(_) => self.memory_bytes,
            None => vramfit_core::runtime::cuda_capacity(self.memory_bytes),
        }
    }
}

/// How a card known by its memory is named in reports (`--gpu-mem 24GiB`).
pub fn memory_card_name(bytes: u64, given: &str) -> String {
    format!("a card with {} (--gpu-mem {given})", vramfit_core::units::fmt_bytes(bytes))
}

/// The card a job is fitted against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Card<'a> {
    /// a catalogue id, alias or name (`a100-80gb`)
    Named(&'a str),
    /// a card with this much memory; `given` is the size as written (`24GiB`)
    Memory { bytes: u64, given: &'a str },
    /// the local GPUs (`--gpu auto`)
    Local,
}

/// CUDA's device selection, as the environment of the process sets it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CudaEnv {
    /// `CUDA_VISIBLE_DEVICES`: indices or `GPU-…` UUID prefixes
    pub visible_devices: Option<String>,
    /// `CUDA_DEVICE_ORDER` (`PCI_BUS_ID` makes CUDA's indices NVML's)
    pub device_order: Option<String>,
}

impl CudaEnv {
    /// The variables of this process.
    pub fn from_process() -> CudaEnv {
        CudaEnv {
            visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
            device_order: std::env::var("CUDA_DEVICE_ORDER").ok(),
        }
    }
}

/// Why no card could be chosen.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum SelectError {
    /// No driver answered the probe.
    #[error(
        "--gpu auto: cannot read the local GPUs: no NVIDIA driver answered (NVML: {reason}). Name the card \
         instead with --gpu (e.g. --gpu a100-80gb; `vramfit estimate --list-gpus` lists them) or give its \
         memory with --gpu-mem (e.g. --gpu-mem 24GiB)"
    )]
    NoDriver { reason: String },
    /// The probe answered with an error.
    #[error("--gpu auto: {0}")]
    Probe(#[source] HwError),
    /// The catalogue has no such card (or the name only begins some):
    /// the error lists the close names and points at `--gpu-mem`.
    #[error("--gpu: {}{}", .0, gpu_mem_hint(.0))]
    Catalog(#[from] CatalogError),
    #[error("--gpu auto: CUDA_VISIBLE_DEVICES entry '{entry}' matches several GPUs")]
    AmbiguousUuid { entry: String },
    #[error(
        "--gpu auto: CUDA_VISIBLE_DEVICES entry '{}' is not a GPU index or GPU-… UUID (MIG devices: give --gpu-mem with the slice's memory)",
        entry.escape_debug()
    )]
    NotADevice { entry: String },
    #[error("--gpu auto: CUDA_VISIBLE_DEVICES names '{entry}', which NVML does not list")]
    NotListed { entry: String },
    /// Every GPU was skipped; `why` lists the reasons.
    #[error(
        "--gpu auto: no usable GPU on this machine ({why}); name the card with --gpu or its memory with --gpu-mem"
    )]
    NoUsableGpu { why: String },
    /// Fewer usable GPUs than the job needs; `usable` names them.
    #[error(
        "--gpu auto: the workload needs {needed} GPUs (--tp × --pp, or --gpus) but {} {} usable here: {}",
        usable.len(),
        if usable.len() == 1 { "is" } else { "are" },
        usable.join(", ")
    )]
    TooFew { needed: usize, usable: Vec<String> },
}

/// Where an unknown `--gpu` name's error sends the user: the catalogue
/// list, or the card's memory.
fn gpu_mem_hint(e: &CatalogError) -> &'static str {
    match e {
        CatalogError::UnknownGpu { .. } | CatalogError::AmbiguousGpu { .. } => {
            "; `vramfit estimate --list-gpus` lists the catalogue, and a card not in it can be given by its memory \
             with --gpu-mem (e.g. --gpu-mem 96GiB)"
        }
        _ => "",
    }
}

/// The catalogue card `--gpu NAME` names: an id, display name or alias,
/// exactly (never a prefix), else the refusal with the close names and
/// `--gpu-mem`.
pub fn catalogue_card<'a>(all: &'a [GpuSpec], name: &str) -> Result<&'a GpuSpec, SelectError> {
    Ok(find_gpu(all, name)?)
}

/// The target for `card`; `gpus_needed` is the job's GPU count (for local
/// GPUs; 0: every usable GPU, as llama.cpp uses every visible device).
pub fn target(card: Card, gpus_needed: u64, probe: &dyn GpuProbe, env: &CudaEnv) -> Result<FitTarget, SelectError> {
    match card {
        Card::Memory { bytes, given } => Ok(FitTarget::of_memory(bytes, given)),
        Card::Named(name) => {
            let all = builtin_gpus()?;
            let g = catalogue_card(&all, name)?;
            Ok(FitTarget {
                name: g.name.clone(),
                memory_bytes: g.memory_bytes(),
                total_bytes: g.memory_bytes(),
                detected: None,
                card: Some(g.clone()),
                notes: Vec::new(),
            })
        }
        Card::Local => {
            let machine = probe.probe().map_err(|e| match e {
                HwError::NvmlAbsent { reason } => SelectError::NoDriver { reason },
                other => SelectError::Probe(other),
            })?;
            from_machine(&machine, gpus_needed, env)
        }
    }
}

/// The GPUs `CUDA_VISIBLE_DEVICES` shows (all when unset), and a skip
/// reason for each it hides, plus a note when CUDA's numbering may differ.
fn visible<'m>(
    m: &'m Machine,
    env: &CudaEnv,
    skipped: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Result<Vec<&'m Gpu>, SelectError> {
    let Some(list) = env.visible_devices.as_deref().map(str::trim) else { return Ok(m.gpus.iter().collect()) };
    let mut out = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let g = if let Ok(i) = entry.parse::<u32>() {
            m.gpus.iter().find(|g| g.index == i)
        } else if entry.starts_with("GPU-") {
            let found: Vec<_> =
                m.gpus.iter().filter(|g| g.uuid.as_deref().is_some_and(|u| u.starts_with(entry))).collect();
            if found.len() > 1 {
                return Err(SelectError::AmbiguousUuid { entry: entry.to_string() });
            }
            found.first().copied()
        } else {
            return Err(SelectError::NotADevice { entry: entry.to_string() });
        };
        let Some(g) = g else { return Err(SelectError::NotListed { entry: entry.to_string() }) };
        out.push(g);
    }
    let by_index = list.split(',').any(|e| e.trim().parse::<u32>().is_ok());
    if by_index
        && env.device_order.as_deref() != Some("PCI_BUS_ID")
        && m.gpus.windows(2).any(|w| w[0].name != w[1].name)
    {
        notes.push(
            "CUDA_VISIBLE_DEVICES indices were read in NVML's order (PCI bus); CUDA numbers mixed GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID".into(),
        );
    }
    for g in &m.gpus {
        if !out.iter().any(|v| v.index == g.index) {
            skipped.push(format!("GPU {} {}: hidden by CUDA_VISIBLE_DEVICES", g.index, g.name));
        }
    }
    Ok(out)
}

/// A GPU's memory, or why it cannot be used (MIG mode, no memory size).
fn usable(g: &Gpu) -> Result<DetectedGpu, String> {
    if g.mig_current == MigMode::Enabled {
        return Err(format!(
            "GPU {} {}: MIG is enabled (a process sees one slice: give its memory with --gpu-mem, see `nvidia-smi -L`)",
            g.index, g.name
        ));
    }
    let Some(total) = g.memory_total_bytes else {
        return Err(format!("GPU {} {}: NVML gave no memory size", g.index, g.name));
    };
    let used = g.memory_used_bytes.unwrap_or(0);
    let reserved = g.memory_reserved_bytes.unwrap_or(0);
    let free = g.memory_free_bytes.unwrap_or_else(|| total.saturating_sub(used).saturating_sub(reserved)).min(total);
    Ok(DetectedGpu {
        index: g.index,
        name: g.name.clone(),
        total_bytes: total,
        used_bytes: used,
        reserved_bytes: reserved,
        free_bytes: free,
    })
}

/// The local GPUs as a fit target: the `gpus_needed` GPUs with the most
/// free memory (among those `CUDA_VISIBLE_DEVICES` shows), fitted against
/// the smallest free memory among them.
pub fn from_machine(m: &Machine, gpus_needed: u64, env: &CudaEnv) -> Result<FitTarget, SelectError> {
    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    let mut candidates: Vec<DetectedGpu> = Vec::new();
    for g in visible(m, env, &mut skipped, &mut notes)? {
        match usable(g) {
            Ok(d) => candidates.push(d),
            Err(why) => skipped.push(why),
        }
    }
    if candidates.is_empty() {
        let why = if skipped.is_empty() { "NVML lists no GPU".to_string() } else { skipped.join("; ") };
        return Err(SelectError::NoUsableGpu { why });
    }
    let needed = if gpus_needed == 0 { candidates.len() } else { usize::try_from(gpus_needed).unwrap_or(usize::MAX) };
    if candidates.len() < needed {
        let usable = candidates.iter().map(|g| format!("GPU {} {}", g.index, g.name)).collect();
        return Err(SelectError::TooFew { needed, usable });
    }
    // most free memory first (then the lower index)
    candidates.sort_by(|a, b| b.free_bytes.cmp(&a.free_bytes).then(a.index.cmp(&b.index)));
    for g in candidates.drain(needed..) {
        skipped.push(format!(
            "GPU {} {}: not needed ({} free)",
            g.index,
            g.name,
            vramfit_core::units::fmt_bytes(g.free_bytes)
        ));
    }
    Ok(local_target(candidates, skipped, notes))
}

/// The fit target of the chosen local GPUs (at least one).
fn local_target(used: Vec<DetectedGpu>, skipped: Vec<String>, mut notes: Vec<String>) -> FitTarget {
    let memory = used.iter().map(|g| g.free_bytes).min().unwrap_or(0);
    let total = used.iter().map(|g| g.total_bytes).min().unwrap_or(0);
    let others: u64 = used.iter().map(|g| g.used_bytes).max().unwrap_or(0);
    let indices: Vec<String> = used.iter().map(|g| g.index.to_string()).collect();
    let same = used.windows(2).all(|w| w[0].name == w[1].name);
    let name = if used.len() == 1 {
        format!("{} (GPU {}, free memory)", used[0].name, used[0].index)
    } else if same {
        format!("{} × {} (GPUs {}, smallest free memory)", used.len(), used[0].name, indices.join(","))
    } else {
        format!("GPUs {} (mixed models, smallest free memory)", indices.join(","))
    };
    if others > 0 {
        notes.push(format!(
            "--gpu auto fits against free memory: other processes hold up to {} on the GPU{} used",
            vramfit_core::units::fmt_bytes(others),
            if used.len() == 1 { "" } else { "s" }
        ));
    }
    FitTarget {
        name,
        memory_bytes: memory,
        total_bytes: total,
        detected: Some(DetectedGpus { source: "NVML".into(), gpus: used, skipped }),
        // NVML names the card, not its catalogue row: its capabilities stay unknown
        card: None,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::FakeProbe;

    const MIB: u64 = 1 << 20;

    fn gpu(i: u32, name: &str, total_mib: u64, used_mib: u64, reserved_mib: u64) -> Gpu {
        let mut g = Gpu::new(i, name);
        g.uuid = Some(format!("GPU-{i}{i}{i}{i}-abcd"));
        g.memory_total_bytes = Some(total_mib * MIB);
        g.memory_used_bytes = Some(used_mib * MIB);
        g.memory_reserved_bytes = Some(reserved_mib * MIB);
        g.memory_free_bytes = Some((total_mib - used_mib - reserved_mib) * MIB);
        g.mig_current = MigMode::Disabled;
        g
    }

    fn machine(gpus: Vec<Gpu>) -> Machine {
        Machine { sources: vec!["NVML".into()], gpus, ..Machine::default() }
    }

    fn env(visible: &str) -> CudaEnv {
        CudaEnv { visible_devices: Some(visible.into()), device_order: None }
    }

    #[test]
    fn fits_against_free_memory_and_names_what_others_hold() {
        // an 80 GB H100 with 10 GiB held by another process
        let m = machine(vec![gpu(0, "NVIDIA H100 80GB HBM3", 81559, 10240, 566)]);
        let t = from_machine(&m, 1, &CudaEnv::default()).unwrap();
        assert_eq!(t.memory_bytes, (81559 - 10240 - 566) * MIB);
        assert_eq!(t.total_bytes, 81559 * MIB);
        assert_eq!(t.usable_bytes(), t.memory_bytes, "free memory is already what a process may allocate");
        assert!(t.name.contains("GPU 0, free memory"), "{}", t.name);
        assert!(t.notes[0].contains("other processes hold up to 10.00 GiB"), "{:?}", t.notes);
    }

    #[test]
    fn several_gpus_take_the_freest_and_fit_the_smallest() {
        let m = machine(vec![
            gpu(0, "NVIDIA A100-SXM4-80GB", 81920, 40000, 0),
            gpu(1, "NVIDIA A100-SXM4-80GB", 81920, 100, 0),
            gpu(2, "NVIDIA A100-SXM4-80GB", 81920, 2000, 0),
        ]);
        let t = from_machine(&m, 2, &CudaEnv::default()).unwrap();
        assert_eq!(t.memory_bytes, (81920 - 2000) * MIB);
        let d = t.detected.unwrap();
        assert_eq!(d.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), [1, 2]);
        assert!(d.skipped[0].starts_with("GPU 0") && d.skipped[0].contains("not needed"), "{:?}", d.skipped);
        let e = from_machine(&m, 4, &CudaEnv::default()).unwrap_err();
        assert!(matches!(&e, SelectError::TooFew { needed: 4, usable } if usable.len() == 3), "{e:?}");
        let e = e.to_string();
        assert!(e.contains("needs 4 GPUs") && e.contains("3 are usable"), "{e}");
        // 0: every usable GPU
        assert_eq!(from_machine(&m, 0, &CudaEnv::default()).unwrap().detected.unwrap().gpus.len(), 3);
    }

    #[test]
    fn cuda_visible_devices_and_mig() {
        let mut mig = gpu(1, "NVIDIA A100-SXM4-40GB", 40960, 0, 0);
        mig.mig_current = MigMode::Enabled;
        let m = machine(vec![
            gpu(0, "NVIDIA A100-SXM4-40GB", 40960, 30000, 0),
            mig,
            gpu(2, "NVIDIA A100-SXM4-40GB", 40960, 0, 0),
        ]);
        let t = from_machine(&m, 1, &env("0")).unwrap();
        assert_eq!(t.memory_bytes, (40960 - 30000) * MIB, "GPU 2 is hidden: only GPU 0 counts");
        let t = from_machine(&m, 1, &env("GPU-2222")).unwrap();
        assert_eq!(t.detected.unwrap().gpus[0].index, 2);
        let e = from_machine(&m, 1, &env("1")).unwrap_err().to_string();
        assert!(e.contains("MIG is enabled") && e.contains("--gpu-mem"), "{e}");
        assert_eq!(from_machine(&m, 1, &env("7")).unwrap_err(), SelectError::NotListed { entry: "7".into() });
        assert_eq!(
            from_machine(&m, 1, &env("MIG-xyz")).unwrap_err(),
            SelectError::NotADevice { entry: "MIG-xyz".into() }
        );
        let e = from_machine(&m, 1, &env("")).unwrap_err().to_string();
        assert!(e.contains("no usable GPU"), "{e}");
        let e = from_machine(&machine(vec![]), 1, &CudaEnv::default()).unwrap_err().to_string();
        assert!(e.contains("NVML lists no GPU"), "{e}");
    }

    #[test]
    fn mixed_models_by_index_note_cuda_order() {
        let m = machine(vec![gpu(0, "NVIDIA A100-SXM4-80GB", 81920, 0, 0), gpu(1, "NVIDIA L4", 23034, 0, 0)]);
        let t = from_machine(&m, 1, &env("1")).unwrap();
        assert!(t.notes.iter().any(|n| n.contains("CUDA_DEVICE_ORDER=PCI_BUS_ID")), "{:?}", t.notes);
        let ordered = CudaEnv { visible_devices: Some("1".into()), device_order: Some("PCI_BUS_ID".into()) };
        assert!(from_machine(&m, 1, &ordered).unwrap().notes.is_empty());
    }

    #[test]
    fn cards_by_name_memory_or_probe() {
        let none = CudaEnv::default();
        let t = target(Card::Named("a100-80gb"), 1, &FakeProbe(Machine::default()), &none).unwrap();
        assert!(t.detected.is_none() && t.memory_bytes > 80_000 * MIB, "{t:?}");
        assert!(t.usable_bytes() < t.memory_bytes, "the driver's reservation is not usable");
        let e = target(Card::Named("rtx-9999"), 1, &FakeProbe(Machine::default()), &none).unwrap_err();
        assert!(matches!(e, SelectError::Catalog(CatalogError::UnknownGpu { .. })), "{e:?}");
        assert!(e.to_string().contains("with --gpu-mem (e.g. --gpu-mem 96GiB)"), "{e}");
        let t =
            target(Card::Memory { bytes: 24 << 30, given: "24GiB" }, 1, &FakeProbe(Machine::default()), &none).unwrap();
        assert_eq!(t.name, "a card with 24.00 GiB (--gpu-mem 24GiB)");
        let probe = FakeProbe(machine(vec![gpu(0, "NVIDIA L4", 23034, 0, 0)]));
        assert_eq!(target(Card::Local, 1, &probe, &none).unwrap().memory_bytes, 23034 * MIB);
    }

    /// Issue 24: `--gpu h20` is the 96 GB H20, not the 141 GB H200, and no
    /// `--gpu` name is a prefix guess: every proper prefix of a catalogue id
    /// that is not itself a catalogue name is refused, naming close cards
    /// and `--gpu-mem`.
    #[test]
    fn named_cards_match_exactly_and_prefixes_are_refused() {
        let none = CudaEnv::default();
        let probe = FakeProbe(Machine::default());
        let h20 = target(Card::Named("h20"), 1, &probe, &none).unwrap();
        assert_eq!(h20.memory_bytes, 97871 * MIB);
        assert_eq!(h20.name, "H20 96GB");
        let all = builtin_gpus().unwrap();
        let mut refused = 0;
        for g in &all {
            assert_eq!(target(Card::Named(&g.id), 1, &probe, &none).unwrap().memory_bytes, g.memory_bytes());
            for end in 1..g.id.len() {
                let prefix = &g.id[..end];
                if vramfit_catalog::gpus::gpu_named(&all, prefix).is_some() {
                    continue;
                }
                let e = match target(Card::Named(prefix), 1, &probe, &none) {
                    Ok(t) => panic!("--gpu {prefix} (a prefix of {}) picked {}", g.id, t.name),
                    Err(e) => e.to_string(),
                };
                assert!(
                    e.starts_with(&format!("--gpu: GPU name '{prefix}'"))
                        || e.starts_with(&format!("--gpu: unknown GPU '{prefix}'")),
                    "{e}"
                );
                assert!(e.contains("--gpu-mem"), "{e}");
                assert!(e.contains("did you mean") || e.contains("give one of these ids"), "{e}");
                refused += 1;
            }
        }
        assert!(refused >= 200, "{refused}");
    }
}
