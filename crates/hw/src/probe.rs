//! Where the machine facts come from: `trait GpuProbe` with three
//! implementations: files of nvidia-smi output, a fixed [`Machine`] (tests,
//! fixtures), and NVML loaded at run time (nvml-wrapper `dlopen`s
//! `libnvidia-ml.so.1` in `Nvml::init`, so the binary builds and runs
//! without a driver; without one the probe says NVML is absent and asks
//! for files).

use std::path::PathBuf;

use crate::error::HwError;
use crate::files::{read_kind, MAX_INPUT_BYTES};
use crate::machine::{Ecc, Gpu, Machine, MigDevice, MigMode};
use crate::named::NamedText;
use crate::topo::{Link, Topology};

/// A source of machine facts.
pub trait GpuProbe {
    /// What this probe reads, for messages.
    fn describe(&self) -> String;
    fn probe(&self) -> Result<Machine, HwError>;
}

/// A fixed machine (fixtures, tests).
pub struct FakeProbe(pub Machine);

impl GpuProbe for FakeProbe {
    fn describe(&self) -> String {
        "fixed machine".into()
    }
    fn probe(&self) -> Result<Machine, HwError> {
        Ok(self.0.clone())
    }
}

/// nvidia-smi outputs saved to files; any subset.
#[derive(Debug, Clone, Default)]
pub struct FilesProbe {
    /// `nvidia-smi -q -x`
    pub xml: Option<PathBuf>,
    /// `nvidia-smi -q`
    pub text: Option<PathBuf>,
    /// `nvidia-smi -L`
    pub list: Option<PathBuf>,
    /// `nvidia-smi topo -m`
    pub topo: Option<PathBuf>,
    /// `nvidia-smi mig -lgi`
    pub lgi: Option<PathBuf>,
}

impl FilesProbe {
    pub fn is_empty(&self) -> bool {
        self.xml.is_none() && self.text.is_none() && self.list.is_none() && self.topo.is_none() && self.lgi.is_none()
    }
}

impl GpuProbe for FilesProbe {
    fn describe(&self) -> String {
        "nvidia-smi output files".into()
    }

    fn probe(&self) -> Result<Machine, HwError> {
        let read = |p: &Option<PathBuf>, what: &str| -> Result<Option<NamedText>, HwError> {
            match p {
                Some(p) => {
                    Ok(Some(NamedText { name: p.display().to_string(), text: read_kind(p, what, MAX_INPUT_BYTES)? }))
                }
                None => Ok(None),
            }
        };
        TextsProbe {
            xml: read(&self.xml, "`nvidia-smi -q -x` output")?,
            text: read(&self.text, "`nvidia-smi -q` output")?,
            list: read(&self.list, "`nvidia-smi -L` output")?,
            topo: read(&self.topo, "`nvidia-smi topo -m` output")?,
            lgi: read(&self.lgi, "`nvidia-smi mig -lgi` output")?,
        }
        .probe()
    }
}

/// nvidia-smi outputs already in memory (uploaded to the local web page);
/// any subset. [`FilesProbe`] reads its files and parses them here, so both
/// give the same machine and the same errors for the same text.
#[derive(Debug, Clone, Default)]
pub struct TextsProbe {
    /// `nvidia-smi -q -x`
    pub xml: Option<NamedText>,
    /// `nvidia-smi -q`
    pub text: Option<NamedText>,
    /// `nvidia-smi -L`
    pub list: Option<NamedText>,
    /// `nvidia-smi topo -m`
    pub topo: Option<NamedText>,
    /// `nvidia-smi mig -lgi`
    pub lgi: Option<NamedText>,
}

impl TextsProbe {
    pub fn is_empty(&self) -> bool {
        self.xml.is_none() && self.text.is_none() && self.list.is_none() && self.topo.is_none() && self.lgi.is_none()
    }
}

impl GpuProbe for TextsProbe {
    fn describe(&self) -> String {
        "nvidia-smi outputs".into()
    }

    fn probe(&self) -> Result<Machine, HwError> {
        let mut m = Machine::default();
        if let Some(t) = &self.xml {
            m.merge(crate::xml::parse_xml(&t.text, &t.name)?);
        }
        if let Some(t) = &self.text {
            m.merge(crate::text::parse_text(&t.text, &t.name)?);
        }
        if let Some(t) = &self.list {
            m.merge(crate::list::parse_list(&t.text, &t.name)?);
        }
        if let Some(t) = &self.topo {
            let topo = crate::topo::parse_topo(&t.text, &t.name)?;
            m.sources.push(format!("{} (nvidia-smi topo -m)", t.name));
            m.topology = Some(topo);
        }
        if let Some(t) = &self.lgi {
            m.gpu_instances = crate::mig::parse_lgi(&t.text, &t.name)?;
            m.sources.push(format!("{} (nvidia-smi mig -lgi)", t.name));
        }
        Ok(m)
    }
}

/// Live query through NVML.
pub struct NvmlProbe;

fn absent(e: impl std::fmt::Display) -> HwError {
    HwError::NvmlAbsent { reason: e.to_string() }
}

/// NVML reports an NVLink as up to this many links per GPU (nvml.h `NVML_NVLINK_MAX_LINKS`).
const NVLINK_MAX_LINKS: u32 = 18;

impl GpuProbe for NvmlProbe {
    fn describe(&self) -> String {
        "NVML (libnvidia-ml.so.1, loaded at run time)".into()
    }

    fn probe(&self) -> Result<Machine, HwError> {
        let nvml = nvml_wrapper::Nvml::init().map_err(absent)?;
        let count = nvml.device_count().map_err(absent)?;
        let mut m = Machine {
            sources: vec!["NVML".into()],
            driver_version: nvml.sys_driver_version().ok(),
            cuda_version: nvml.sys_cuda_driver_version().ok().map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
            attached_gpus: Some(count),
            ..Machine::default()
        };
        let mut bus_ids: Vec<String> = Vec::new();
        for i in 0..count {
            let d = nvml.device_by_index(i).map_err(absent)?;
            let mut g = Gpu::new(i, d.name().unwrap_or_else(|_| "unknown".into()));
            g.uuid = d.uuid().ok();
            if let Ok(p) = d.pci_info() {
                g.bus_id = Some(p.bus_id.clone());
                g.pci_device_id = Some(format!("{:08X}", p.pci_device_id));
                bus_ids.push(p.bus_id.to_ascii_lowercase());
            } else {
                bus_ids.push(String::new());
            }
            if let Ok(mem) = d.memory_info() {
                g.memory_total_bytes = Some(mem.total);
                g.memory_used_bytes = Some(mem.used);
                g.memory_reserved_bytes = Some(mem.reserved);
                g.memory_free_bytes = Some(mem.free);
            }
            match d.mig_mode() {
                Ok(mm) => {
                    g.mig_current = if mm.current == 1 { MigMode::Enabled } else { MigMode::Disabled };
                    g.mig_pending = if mm.pending == 1 { MigMode::Enabled } else { MigMode::Disabled };
                }
                Err(_) => {
                    g.mig_current = MigMode::NotSupported;
                    g.mig_pending = MigMode::NotSupported;
                }
            }
            if g.mig_current == MigMode::Enabled {
                let n = d.mig_device_count().unwrap_or(0);
                for k in 0..n {
                    if let Ok(md) = d.mig_device_by_index(k) {
                        g.mig_devices.push(MigDevice {
                            index: Some(k),
                            gpu_instance_id: None,
                            compute_instance_id: None,
                            sm_count: None,
                            memory_total_bytes: md.memory_info().ok().map(|x| x.total),
                            profile: None,
                        });
                    }
                }
            }
            if let Ok(e) = d.is_ecc_enabled() {
                g.ecc = Ecc { current: Some(e.currently_enabled), pending: Some(e.pending_enabled) };
            }
            g.pcie_gen_max = d.max_pcie_link_gen().ok();
            g.pcie_gen_current = d.current_pcie_link_gen().ok();
            g.pcie_width_max = d.max_pcie_link_width().ok();
            g.pcie_width_current = d.current_pcie_link_width().ok();
            m.gpus.push(g);
        }
        if count >= 2 {
            m.topology = nvml_topology(&nvml, count, &bus_ids);
        }
        Ok(m)
    }
}

#[cfg(target_os = "linux")]
fn nvml_topology(nvml: &nvml_wrapper::Nvml, count: u32, bus_ids: &[String]) -> Option<Topology> {
    use nvml_wrapper::enum_wrappers::device::TopologyLevel;
    let n = count as usize;
    let mut nv = vec![vec![0u32; n]; n];
    for i in 0..count {
        let Ok(d) = nvml.device_by_index(i) else { continue };
        for l in 0..NVLINK_MAX_LINKS {
            let link = d.link_wrapper_for(l);
            if link.is_active().unwrap_or(false) {
                if let Ok(r) = link.remote_pci_info() {
                    let rid = r.bus_id.to_ascii_lowercase();
                    if let Some(j) = bus_ids.iter().position(|b| *b == rid) {
                        nv[i as usize][j] += 1;
                    }
                }
            }
        }
    }
    let mut links = vec![vec![Link::Sys; n]; n];
    for i in 0..n {
        for j in 0..n {
            links[i][j] = if i == j {
                Link::SelfLink
            } else if nv[i][j] > 0 {
                Link::Nvlink { links: nv[i][j] }
            } else {
                let level = match (nvml.device_by_index(i as u32), nvml.device_by_index(j as u32)) {
                    (Ok(a), Ok(b)) => a.topology_common_ancestor(b).ok(),
                    _ => None,
                };
                match level {
                    Some(TopologyLevel::Internal) | Some(TopologyLevel::Single) => Link::Pix,
                    Some(TopologyLevel::Multiple) => Link::Pxb,
                    Some(TopologyLevel::HostBridge) => Link::Phb,
                    Some(TopologyLevel::Node) => Link::Node,
                    _ => Link::Sys,
                }
            };
        }
    }
    Some(Topology {
        gpus: (0..n).map(|k| format!("GPU{k}")).collect(),
        nics: Vec::new(),
        links,
        cpu_affinity: vec![None; n],
        numa_affinity: vec![None; n],
        nic_links: Vec::new(),
        nic_names: Vec::new(),
    })
}

#[cfg(not(target_os = "linux"))]
fn nvml_topology(_nvml: &nvml_wrapper::Nvml, _count: u32, _bus_ids: &[String]) -> Option<Topology> {
    // NVML's topology calls are Linux-only: claim nothing; the verdict asks for `--topo`.
    None
}
