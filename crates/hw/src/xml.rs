//! `nvidia-smi -q -x` (XML, DTD v11-v13) → [`Machine`], with quick-xml serde.
//!
//! Only the fields the check needs are declared; everything else is
//! ignored, so newer DTDs parse. Values stay strings (`"81559 MiB"`,
//! `"N/A"`) and are interpreted here.

use serde::Deserialize;

use crate::clean::value;
use crate::error::HwError;
use crate::machine::{
    parse_count, parse_mhz, parse_mib, parse_toggle, parse_watts_mw, parse_yes_no, read_size, read_version, Clocks,
    Ecc, Gpu, Machine, MigDevice, MigMode, Size, MAX_GPUS,
};

#[derive(Debug, Deserialize)]
struct Log {
    driver_version: Option<String>,
    cuda_version: Option<String>,
    attached_gpus: Option<String>,
    #[serde(default)]
    gpu: Vec<XGpu>,
}

#[derive(Debug, Deserialize)]
struct XGpu {
    #[serde(rename = "@id")]
    id: Option<String>,
    product_name: Option<String>,
    mig_mode: Option<XMigMode>,
    mig_devices: Option<XMigDevices>,
    uuid: Option<String>,
    minor_number: Option<String>,
    pci: Option<XPci>,
    fb_memory_usage: Option<XMem>,
    ecc_mode: Option<XEcc>,
    persistence_mode: Option<String>,
    /// up to R525: `power_limit`, `enforced_power_limit`
    power_readings: Option<XPower>,
    /// R535 and later: `current_power_limit`
    gpu_power_readings: Option<XPower>,
    max_clocks: Option<XClocks>,
    applications_clocks: Option<XClocks>,
    retired_pages: Option<XRetired>,
    /// `N/A` (text) before Ampere, the four counters after
    remapped_rows: Option<XRemapped>,
}

#[derive(Debug, Deserialize)]
struct XPower {
    enforced_power_limit: Option<String>,
    current_power_limit: Option<String>,
}

#[derive(Debug, Deserialize)]
struct XClocks {
    graphics_clock: Option<String>,
    sm_clock: Option<String>,
    mem_clock: Option<String>,
}

#[derive(Debug, Deserialize)]
struct XRetired {
    multiple_single_bit_retirement: Option<XRetiredCount>,
    double_bit_retirement: Option<XRetiredCount>,
    pending_blacklist: Option<String>,
    pending_retirement: Option<String>,
}

#[derive(Debug, Deserialize)]
struct XRetiredCount {
    retired_count: Option<String>,
}

#[derive(Debug, Deserialize)]
struct XRemapped {
    remapped_row_corr: Option<String>,
    remapped_row_unc: Option<String>,
    remapped_row_pending: Option<String>,
    remapped_row_failure: Option<String>,
}

#[derive(Debug, Deserialize)]
struct XMigMode {
    current_mig: Option<String>,
    pending_mig: Option<String>,
}

#[derive(Debug, Deserialize)]
struct XMigDevices {
    #[serde(default)]
    mig_device: Vec<XMigDevice>,
}

#[derive(Debug, Deserialize)]
struct XMigDevice {
    index: Option<String>,
    gpu_instance_id: Option<String>,
    compute_instance_id: Option<String>,
    device_attributes: Option<XAttrs>,
    #[serde(alias = "shared_fb_memory_usage")]
    fb_memory_usage: Option<XMem>,
}

#[derive(Debug, Deserialize)]
struct XAttrs {
    shared: Option<XShared>,
}

#[derive(Debug, Deserialize)]
struct XShared {
    multiprocessor_count: Option<String>,
}

#[derive(Debug, Deserialize)]
struct XMem {
    total: Option<String>,
    reserved: Option<String>,
    used: Option<String>,
}

#[derive(Debug, Deserialize)]
struct XEcc {
    current_ecc: Option<String>,
    pending_ecc: Option<String>,
}

#[derive(Debug, Deserialize)]
struct XPci {
    pci_device_id: Option<String>,
    pci_bus_id: Option<String>,
    pci_gpu_link_info: Option<XLink>,
}

#[derive(Debug, Deserialize)]
struct XLink {
    pcie_gen: Option<XGen>,
    link_widths: Option<XWidths>,
}

#[derive(Debug, Deserialize)]
struct XGen {
    max_link_gen: Option<String>,
    current_link_gen: Option<String>,
}

#[derive(Debug, Deserialize)]
struct XWidths {
    max_link_width: Option<String>,
    current_link_width: Option<String>,
}

fn num(s: &Option<String>) -> Option<u32> {
    s.as_deref().and_then(|v| v.trim().trim_end_matches('x').parse().ok())
}

/// A text value, trimmed, control characters escaped; `None` when empty or `N/A`.
fn text(s: Option<String>) -> Option<String> {
    s.as_deref().and_then(value).filter(|v| v != "N/A")
}

/// How many `<gpu>` elements the text has (`<gpu>` or `<gpu id=…>`), counted
/// without parsing, so an absurd file is refused before any allocation.
fn count_gpu_elements(input: &str) -> usize {
    input
        .match_indices("<gpu")
        .filter(|(i, _)| matches!(input.as_bytes().get(i + 4), Some(b'>' | b' ' | b'\t' | b'\n' | b'\r' | b'/')))
        .count()
}

/// Persistence mode, power limit, clocks and memory repair of one `<gpu>`.
fn state(g: &XGpu, gpu: &mut Gpu) {
    gpu.persistence_mode = g.persistence_mode.as_deref().and_then(parse_toggle);
    gpu.power_limit_mw = g
        .gpu_power_readings
        .as_ref()
        .and_then(|p| p.current_power_limit.as_deref())
        .or_else(|| g.power_readings.as_ref().and_then(|p| p.enforced_power_limit.as_deref()))
        .and_then(parse_watts_mw);
    let clock = |c: &Option<XClocks>, f: fn(&XClocks) -> &Option<String>| {
        c.as_ref().and_then(|c| f(c).as_deref()).and_then(parse_mhz)
    };
    gpu.clocks = Clocks {
        max_sm_mhz: clock(&g.max_clocks, |c| &c.sm_clock),
        max_memory_mhz: clock(&g.max_clocks, |c| &c.mem_clock),
        applications_graphics_mhz: clock(&g.applications_clocks, |c| &c.graphics_clock),
        applications_memory_mhz: clock(&g.applications_clocks, |c| &c.mem_clock),
    };
    let count = |c: &Option<XRetiredCount>| c.as_ref().and_then(|c| c.retired_count.as_deref()).and_then(parse_count);
    let flag = |v: &Option<String>| v.as_deref().and_then(parse_yes_no);
    if let Some(r) = &g.retired_pages {
        gpu.memory_repair.retired_single_bit = count(&r.multiple_single_bit_retirement);
        gpu.memory_repair.retired_double_bit = count(&r.double_bit_retirement);
        gpu.memory_repair.retirement_pending = flag(&r.pending_retirement).or(flag(&r.pending_blacklist));
    }
    if let Some(r) = &g.remapped_rows {
        gpu.memory_repair.remapped_correctable = r.remapped_row_corr.as_deref().and_then(parse_count);
        gpu.memory_repair.remapped_uncorrectable = r.remapped_row_unc.as_deref().and_then(parse_count);
        gpu.memory_repair.remap_pending = flag(&r.remapped_row_pending);
        gpu.memory_repair.remap_failure = flag(&r.remapped_row_failure);
    }
}

/// Parse `nvidia-smi -q -x` output.
pub fn parse_xml(input: &str, file: &str) -> Result<Machine, HwError> {
    if !input.contains("<nvidia_smi_log") {
        if let Some(e) = crate::foreign::refuse(input, file, "--xml") {
            return Err(e);
        }
        return Err(HwError::Xml { file: file.into(), message: "no <nvidia_smi_log> root element".into() });
    }
    let n = count_gpu_elements(input);
    if n > MAX_GPUS {
        return Err(HwError::invalid(
            file,
            format!(
                "{n} <gpu> elements; one machine has at most {MAX_GPUS} (is this file generated, or joined from many machines?)"
            ),
        ));
    }
    let log: Log = quick_xml::de::from_str(input)
        .map_err(|e| HwError::Xml { file: file.into(), message: e.to_string().chars().take(300).collect() })?;
    if log.gpu.is_empty() {
        return Err(HwError::Xml { file: file.into(), message: "no <gpu> element".into() });
    }
    let attached_gpus = match log.attached_gpus.as_deref().map(str::trim) {
        None => None,
        Some(s) => Some(s.parse::<u32>().map_err(|_| HwError::Xml {
            file: file.into(),
            message: format!("<attached_gpus> is {s:?}, expected a count"),
        })?),
    };
    let mut gpus = Vec::with_capacity(log.gpu.len());
    for (i, g) in log.gpu.into_iter().enumerate() {
        let name = text(g.product_name.clone()).ok_or_else(|| HwError::Xml {
            file: file.into(),
            message: format!("<gpu> #{} has no <product_name>", i + 1),
        })?;
        // nvidia-smi orders <gpu> by index; minor_number is the /dev/nvidiaN number, not the index.
        let _ = g.minor_number;
        let mut gpu = Gpu::new(i as u32, name);
        state(&g, &mut gpu);
        gpu.bus_id = text(g.id).or_else(|| g.pci.as_ref().and_then(|p| text(p.pci_bus_id.clone())));
        gpu.uuid = text(g.uuid);
        if let Some(p) = &g.pci {
            gpu.pci_device_id = text(p.pci_device_id.clone());
            if let Some(l) = &p.pci_gpu_link_info {
                if let Some(gen) = &l.pcie_gen {
                    gpu.pcie_gen_max = num(&gen.max_link_gen);
                    gpu.pcie_gen_current = num(&gen.current_link_gen);
                }
                if let Some(w) = &l.link_widths {
                    gpu.pcie_width_max = num(&w.max_link_width);
                    gpu.pcie_width_current = num(&w.current_link_width);
                }
            }
        }
        if let Some(m) = &g.fb_memory_usage {
            match m.total.as_deref().map(read_size) {
                Some(Size::Bytes(b)) => gpu.memory_total_bytes = Some(b),
                Some(Size::Unreadable(raw)) => gpu.memory_total_unreadable = Some(raw),
                Some(Size::NotReported) | None => {}
            }
            gpu.memory_reserved_bytes = m.reserved.as_deref().and_then(parse_mib);
            gpu.memory_used_bytes = m.used.as_deref().and_then(parse_mib);
        }
        if let Some(m) = &g.mig_mode {
            gpu.mig_current = m.current_mig.as_deref().map(MigMode::parse).unwrap_or(MigMode::Unknown);
            gpu.mig_pending = m.pending_mig.as_deref().map(MigMode::parse).unwrap_or(MigMode::Unknown);
        }
        if let Some(e) = &g.ecc_mode {
            gpu.ecc = Ecc {
                current: e.current_ecc.as_deref().and_then(parse_toggle),
                pending: e.pending_ecc.as_deref().and_then(parse_toggle),
            };
        }
        if let Some(md) = g.mig_devices {
            gpu.mig_devices = md
                .mig_device
                .into_iter()
                .map(|d| MigDevice {
                    index: num(&d.index),
                    gpu_instance_id: num(&d.gpu_instance_id),
                    compute_instance_id: num(&d.compute_instance_id),
                    sm_count: d.device_attributes.and_then(|a| a.shared).and_then(|s| num(&s.multiprocessor_count)),
                    memory_total_bytes: d.fb_memory_usage.and_then(|m| m.total).as_deref().and_then(parse_mib),
                    profile: None,
                })
                .take(MAX_GPUS)
                .collect();
        }
        gpus.push(gpu);
    }
    Ok(Machine {
        sources: vec![format!("{file} (nvidia-smi -q -x)")],
        driver_version: log.driver_version.as_deref().and_then(read_version),
        cuda_version: log.cuda_version.as_deref().and_then(read_version),
        attached_gpus,
        gpus,
        topology: None,
        gpu_instances: Vec::new(),
    })
}
