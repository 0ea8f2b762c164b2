//! What `estimate` fits against: a catalogue card (`--gpu a100-80gb`), the
//! local GPUs read through NVML (`--gpu auto`, against their **free**
//! memory), or a card given by its memory (`--gpu-mem 24GiB`).

use anyhow::bail;
use vramfit_hw::{GpuProbe, HwError, Machine, MigMode, NvmlProbe};
use vramfit_report::estimate::{DetectedGpu, DetectedGpus};
use vramfit_report::format::bytes;

/// A card to fit on.
#[derive(Debug, Clone)]
pub struct FitTarget {
    /// display name
    pub name: String,
    /// memory the fit is checked against (free memory for `--gpu auto`)
    pub memory_bytes: u64,
    /// the card's whole memory: vLLM's `gpu_memory_utilization` is a
    /// fraction of it (`--gpu-util` capacity)
    pub total_bytes: u64,
    pub detected: Option<DetectedGpus>,
    /// sentences for the report's notes
    pub notes: Vec<String>,
}

impl FitTarget {
    /// What a process may allocate: the free memory of a local GPU, else the
    /// capacity CUDA reports (nvidia-smi's total less the driver's reservation).
    pub fn usable_bytes(&self) -> u64 {
        match self.detected {
            Some(_) => self.memory_bytes,
            None => vramfit_core::runtime::cuda_capacity(self.memory_bytes),
        }
    }
}

/// The target `--gpu` / `--gpu-mem` name; `gpus_needed` is the workload's
/// GPU count (for `--gpu auto`; 0: every usable GPU, as llama.cpp uses).
pub fn target(gpu: Option<&str>, gpu_mem: Option<&str>, gpus_needed: u64) -> anyhow::Result<Option<FitTarget>> {
    if let Some(m) = gpu_mem {
        let b = parse_memory(m)?;
        return Ok(Some(FitTarget {
            name: format!("a card with {} (--gpu-mem {m})", bytes(b)),
            memory_bytes: b,
            total_bytes: b,
            detected: None,
            notes: Vec::new(),
        }));
    }
    let Some(name) = gpu else { return Ok(None) };
    if name.trim().eq_ignore_ascii_case("auto") {
        let machine = NvmlProbe.probe().map_err(|e| match e {
            HwError::NvmlAbsent { reason } => anyhow::anyhow!(
                "--gpu auto: cannot read the local GPUs: no NVIDIA driver answered (NVML: {reason}). Name the card \
                 instead with --gpu (e.g. --gpu a100-80gb; `vramfit estimate --list-gpus` lists them) or give its \
                 memory with --gpu-mem (e.g. --gpu-mem 24GiB)"
            ),
            other => anyhow::Error::new(other).context("--gpu auto"),
        })?;
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        let order = std::env::var("CUDA_DEVICE_ORDER").ok();
        return from_machine(&machine, gpus_needed, visible.as_deref(), order.as_deref()).map(Some);
    }
    let all = vramfit_catalog::gpus::builtin_gpus()?;
    let g = vramfit_catalog::gpus::find_gpu(&all, name)?;
    Ok(Some(FitTarget {
        name: g.name.clone(),
        memory_bytes: g.memory_bytes(),
        total_bytes: g.memory_bytes(),
        detected: None,
        notes: Vec::new(),
    }))
}

/// The local GPUs as a fit target: the `gpus_needed` GPUs with the most
/// free memory (among those `CUDA_VISIBLE_DEVICES` shows), fitted against
/// the smallest free memory among them.
pub fn from_machine(
    m: &Machine,
    gpus_needed: u64,
    cuda_visible: Option<&str>,
    cuda_order: Option<&str>,
) -> anyhow::Result<FitTarget> {
    let mut skipped = Vec::new();
    let mut notes = Vec::new();
    let visible: Option<Vec<&vramfit_hw::Gpu>> = match cuda_visible.map(str::trim) {
        None => None,
        Some(list) => {
            let mut out = Vec::new();
            for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let g = if let Ok(i) = entry.parse::<u32>() {
                    m.gpus.iter().find(|g| g.index == i)
                } else if entry.starts_with("GPU-") {
                    let found: Vec<_> =
                        m.gpus.iter().filter(|g| g.uuid.as_deref().is_some_and(|u| u.starts_with(entry))).collect();
                    if found.len() > 1 {
                        bail!("--gpu auto: CUDA_VISIBLE_DEVICES entry '{entry}' matches several GPUs");
                    }
                    found.first().copied()
                } else {
                    bail!(
                        "--gpu auto: CUDA_VISIBLE_DEVICES entry '{}' is not a GPU index or GPU-… UUID (MIG devices: give --gpu-mem with the slice's memory)",
                        entry.escape_debug()
                    );
                };
                let Some(g) = g else {
                    bail!("--gpu auto: CUDA_VISIBLE_DEVICES names '{entry}', which NVML does not list");
                };
                out.push(g);
            }
            let by_index = list.split(',').any(|e| e.trim().parse::<u32>().is_ok());
            if by_index && cuda_order != Some("PCI_BUS_ID") && m.gpus.windows(2).any(|w| w[0].name != w[1].name) {
                notes.push(
                    "CUDA_VISIBLE_DEVICES indices were read in NVML's order (PCI bus); CUDA numbers mixed GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID".into(),
                );
            }
            for g in &m.gpus {
                if !out.iter().any(|v| v.index == g.index) {
                    skipped.push(format!("GPU {} {}: hidden by CUDA_VISIBLE_DEVICES", g.index, g.name));
                }
            }
            Some(out)
        }
    };
    let candidates: Vec<&vramfit_hw::Gpu> = visible.unwrap_or_else(|| m.gpus.iter().collect());
    let mut usable: Vec<DetectedGpu> = Vec::new();
    for g in candidates {
        if g.mig_current == MigMode::Enabled {
            skipped.push(format!(
                "GPU {} {}: MIG is enabled (a process sees one slice: give its memory with --gpu-mem, see `nvidia-smi -L`)",
                g.index, g.name
            ));
            continue;
        }
        let Some(total) = g.memory_total_bytes else {
            skipped.push(format!("GPU {} {}: NVML gave no memory size", g.index, g.name));
            continue;
        };
        let used = g.memory_used_bytes.unwrap_or(0);
        let reserved = g.memory_reserved_bytes.unwrap_or(0);
        let free =
            g.memory_free_bytes.unwrap_or_else(|| total.saturating_sub(used).saturating_sub(reserved)).min(total);
        usable.push(DetectedGpu {
            index: g.index,
            name: g.name.clone(),
            total_bytes: total,
            used_bytes: used,
            reserved_bytes: reserved,
            free_bytes: free,
        });
    }
    if usable.is_empty() {
        let why = if skipped.is_empty() { "NVML lists no GPU".to_string() } else { skipped.join("; ") };
        bail!(
            "--gpu auto: no usable GPU on this machine ({why}); name the card with --gpu or its memory with --gpu-mem"
        );
    }
    let needed = if gpus_needed == 0 { usable.len() } else { usize::try_from(gpus_needed).unwrap_or(usize::MAX) };
    if usable.len() < needed {
        bail!(
            "--gpu auto: the workload needs {needed} GPUs (--tp × --pp, or --gpus) but {} {} usable here: {}",
            usable.len(),
            if usable.len() == 1 { "is" } else { "are" },
            usable.iter().map(|g| format!("GPU {} {}", g.index, g.name)).collect::<Vec<_>>().join(", ")
        );
    }
    // most free memory first (then the lower index)
    usable.sort_by(|a, b| b.free_bytes.cmp(&a.free_bytes).then(a.index.cmp(&b.index)));
    for g in usable.drain(needed..) {
        skipped.push(format!("GPU {} {}: not needed ({} free)", g.index, g.name, bytes(g.free_bytes)));
    }
    let used = usable;
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
            bytes(others),
            if used.len() == 1 { "" } else { "s" }
        ));
    }
    Ok(FitTarget {
        name,
        memory_bytes: memory,
        total_bytes: total,
        detected: Some(DetectedGpus { source: "NVML".into(), gpus: used, skipped }),
        notes,
    })
}

/// A memory size with its unit: binary `KiB`/`MiB`/`GiB`/`TiB`, or decimal
/// `KB`/`MB`/`GB`/`TB` (powers of 1000, as on a spec sheet: `24GB` is less
/// than `24GiB`, never more, so a decimal figure cannot make a card look
/// bigger than it is). Bare numbers are refused: the unit decides a 7%
/// difference.
pub fn parse_memory(s: &str) -> anyhow::Result<u64> {
    // 1 MiB .. 1 PiB: a GPU's memory, not a typo
    Ok(vramfit_core::quantity::parse_size("--gpu-mem", s, (1 << 20)..=(1 << 50))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vramfit_hw::Gpu;

    const GIB: u64 = 1 << 30;
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

    #[test]
    fn memory_sizes_with_units() {
        assert_eq!(parse_memory("24GiB").unwrap(), 24 * GIB);
        assert_eq!(parse_memory("24576 MiB").unwrap(), 24 * GIB);
        assert_eq!(parse_memory("24GB").unwrap(), 24_000_000_000);
        // fractions round up to whole bytes (core::quantity)
        assert_eq!(parse_memory("79.6gib").unwrap(), (79.6 * GIB as f64).ceil() as u64);
        for bad in ["24", "24 GiBs", "-1GiB", "0GiB", "1e400GiB", "GiB", "2PiB", "99999999TB"] {
            assert!(parse_memory(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn fits_against_free_memory_and_names_what_others_hold() {
        // an 80 GB H100 with 10 GiB held by another process
        let m = machine(vec![gpu(0, "NVIDIA H100 80GB HBM3", 81559, 10240, 566)]);
        let t = from_machine(&m, 1, None, None).unwrap();
        assert_eq!(t.memory_bytes, (81559 - 10240 - 566) * MIB);
        assert_eq!(t.total_bytes, 81559 * MIB);
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
        let t = from_machine(&m, 2, None, None).unwrap();
        assert_eq!(t.memory_bytes, (81920 - 2000) * MIB);
        let d = t.detected.unwrap();
        assert_eq!(d.gpus.iter().map(|g| g.index).collect::<Vec<_>>(), [1, 2]);
        assert!(d.skipped[0].starts_with("GPU 0") && d.skipped[0].contains("not needed"), "{:?}", d.skipped);
        let e = from_machine(&m, 4, None, None).unwrap_err().to_string();
        assert!(e.contains("needs 4 GPUs") && e.contains("3 are usable"), "{e}");
    }

    #[test]
    fn auto_fit_renders_free_memory_and_what_others_hold() {
        use vramfit_report::estimate::{EstimateReport, FitInfo, WorkloadInfo};
        // 15.53 GiB needed: the whole card (23.99 GiB) would fit, its free memory does not
        let m = machine(vec![gpu(0, "NVIDIA GeForce RTX 4090", 24564, 9000, 0)]);
        let t = from_machine(&m, 1, None, None).unwrap();
        let r = vramfit_ingest::resolve::resolve_with_env("llama-2-7b", &|_| None).unwrap();
        let w = vramfit_core::Workload::default();
        let ledger = vramfit_core::estimate(&r.spec, &w).unwrap();
        let f = vramfit_core::infer::fit(&ledger, t.memory_bytes, t.memory_bytes);
        let fit = FitInfo::of(&t.name, &f, None, t.detected.clone());
        let wi = WorkloadInfo {
            task: "infer".into(),
            dtype: "bf16".into(),
            kv_dtype: None,
            batch: 1,
            seq: 4096,
            concurrency: None,
            tp: 1,
            pp: 1,
            dp: 1,
            settings: Default::default(),
        };
        let model = crate::cmd::estimate::model_info(&r, 0).unwrap();
        let report = EstimateReport::new(model, wi, &ledger, None, Some(fit));
        let text = report.to_text(false);
        assert!(
            text.contains("NVIDIA GeForce RTX 4090 (GPU 0, free memory): DOES NOT FIT — needs 15.53 GiB of 15.20 GiB"),
            "{text}"
        );
        assert!(
            text.contains(
                "GPU 0 NVIDIA GeForce RTX 4090 (NVML): 15.20 GiB free of 23.99 GiB; other processes hold 8.79 GiB"
            ),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
        assert_eq!(json["fit"]["gpu_memory_bytes"], (24564u64 - 9000) * MIB);
        assert_eq!(json["fit"]["usable_bytes"], (24564u64 - 9000) * MIB);
        assert_eq!(json["fit"]["detected"]["gpus"][0]["used_bytes"], 9000 * MIB);
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
        let t = from_machine(&m, 1, Some("0"), None).unwrap();
        assert_eq!(t.memory_bytes, (40960 - 30000) * MIB, "GPU 2 is hidden: only GPU 0 counts");
        let t = from_machine(&m, 1, Some("GPU-2222"), None).unwrap();
        assert_eq!(t.detected.unwrap().gpus[0].index, 2);
        let e = from_machine(&m, 1, Some("1"), None).unwrap_err().to_string();
        assert!(e.contains("MIG is enabled") && e.contains("--gpu-mem"), "{e}");
        assert!(from_machine(&m, 1, Some("7"), None).unwrap_err().to_string().contains("does not list"));
        assert!(from_machine(&m, 1, Some("MIG-xyz"), None).is_err());
        let e = from_machine(&m, 1, Some(""), None).unwrap_err().to_string();
        assert!(e.contains("no usable GPU"), "{e}");
        let e = from_machine(&machine(vec![]), 1, None, None).unwrap_err().to_string();
        assert!(e.contains("NVML lists no GPU"), "{e}");
    }
}
