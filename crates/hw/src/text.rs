//! `nvidia-smi -q` (text) → [`Machine`].
//!
//! The layout is an indented tree: 4 spaces per level, `Label : value`
//! with labels padded to a column, and section headers without a value
//! (`MIG Mode`, `FB Memory Usage`, `GPU 00000000:01:00.0`). Parsed by
//! keeping the path of section headers by indentation, then reading the
//! values by path. Source of the layout: nvidia-smi-formats.md §2 and
//! public `-q` dumps (one of which shows the `MIG Device` block with
//! `Shared FB Memory Usage` on a newer driver).

use crate::clean::{escape_controls, normalize_newlines};
use crate::error::HwError;
use crate::machine::{
    parse_count, parse_mhz, parse_mib, parse_toggle, parse_watts_mw, parse_yes_no, read_size, read_version, Clocks,
    Ecc, Gpu, Machine, MemoryRepair, MigDevice, MigMode, Size, MAX_GPUS,
};

pub const MAX_TEXT_BYTES: usize = 16 << 20;

struct Entry {
    /// section headers above, outermost first (GPU section excluded)
    path: Vec<String>,
    key: String,
    value: String,
}

fn indent(s: &str) -> usize {
    s.chars().take_while(|c| *c == ' ').count()
}

/// Parse `nvidia-smi -q` output.
pub fn parse_text(text: &str, file: &str) -> Result<Machine, HwError> {
    if text.len() > MAX_TEXT_BYTES {
        return Err(HwError::TooLarge { file: file.into(), bytes: text.len() as u64, limit: MAX_TEXT_BYTES as u64 });
    }
    if !text.contains("NVSMI LOG") {
        if let Some(e) = crate::foreign::refuse(text, file, "--text") {
            return Err(e);
        }
        return Err(HwError::invalid(
            file,
            "no `==============NVSMI LOG==============` banner; is this `nvidia-smi -q` output?",
        ));
    }
    // CRLF (a file saved on Windows) is layout; terminal codes are content, shown escaped.
    let text = normalize_newlines(text);
    let mut m = Machine { sources: vec![format!("{file} (nvidia-smi -q)")], ..Machine::default() };
    // Driver 610 marks the old labels deprecated and adds these; prefer them when present.
    let (mut kmd, mut umd) = (None, None);
    // per GPU: its entries
    let mut sections: Vec<(String, Vec<Entry>)> = Vec::new();
    let mut stack: Vec<(usize, String)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.contains('\t') {
            return Err(HwError::syntax(file, i + 1, "space indentation (nvidia-smi -q never prints tabs)", raw));
        }
        let t = raw.trim();
        if t.is_empty() || t.starts_with("====") {
            continue;
        }
        let ind = indent(raw);
        let (key, value) = match t.split_once(" : ").or_else(|| t.strip_suffix(" :").map(|k| (k, ""))) {
            Some((k, v)) => (k.trim().to_string(), Some(v.trim().to_string())),
            None => (t.to_string(), None),
        };
        if ind == 0 {
            stack.clear();
            match value {
                Some(v) => match key.as_str() {
                    "Driver Version" => m.driver_version = read_version(&v),
                    "CUDA Version" => m.cuda_version = read_version(&v),
                    "KMD Version" => kmd = read_version(&v),
                    "CUDA UMD Version" => umd = read_version(&v),
                    "Attached GPUs" => {
                        m.attached_gpus =
                            Some(v.parse().map_err(|_| HwError::syntax(file, i + 1, "Attached GPUs : <count>", raw))?)
                    }
                    _ => {}
                },
                None if key.starts_with("GPU ") => {
                    if sections.len() == MAX_GPUS {
                        return Err(HwError::invalid(
                            file,
                            format!("more than {MAX_GPUS} `GPU <bus id>` sections; one machine has at most {MAX_GPUS}"),
                        ));
                    }
                    sections.push((key.clone(), Vec::new()))
                }
                None => {}
            }
            continue;
        }
        let Some((_, entries)) = sections.last_mut() else {
            return Err(HwError::syntax(file, i + 1, "a `GPU <bus id>` line before indented fields", raw));
        };
        while stack.last().is_some_and(|(d, _)| *d >= ind) {
            stack.pop();
        }
        match value {
            None => stack.push((ind, key)),
            Some(v) => entries.push(Entry { path: stack.iter().map(|(_, s)| s.clone()).collect(), key, value: v }),
        }
    }
    if sections.is_empty() {
        return Err(HwError::invalid(file, "no `GPU <bus id>` section"));
    }
    m.driver_version = kmd.or(m.driver_version.take());
    m.cuda_version = umd.or(m.cuda_version.take());
    for (idx, (header, entries)) in sections.into_iter().enumerate() {
        m.gpus.push(gpu_of(idx as u32, &header, &entries, file)?);
    }
    Ok(m)
}

/// One `GPU <bus id>` section: identity, memory, MIG and ECC modes, PCIe link.
fn gpu_of(idx: u32, header: &str, entries: &[Entry], file: &str) -> Result<Gpu, HwError> {
    // Labels are matched without regard to case: drivers print `Ecc Mode`
    // (R535 and older) and `ECC Mode` (R590, the H100 capture of SOURCES.md).
    let get = |path: &[&str], key: &str| -> Option<&str> {
        entries
            .iter()
            .find(|e| {
                e.key.eq_ignore_ascii_case(key)
                    && e.path.len() == path.len()
                    && e.path.iter().zip(path).all(|(a, b)| a.eq_ignore_ascii_case(b))
            })
            .map(|e| e.value.as_str())
    };
    let name = get(&[], "Product Name")
        .ok_or_else(|| HwError::invalid(file, format!("{}: no `Product Name` field", escape_controls(header))))?;
    let mut g = Gpu::new(idx, escape_controls(name));
    g.bus_id = header.strip_prefix("GPU ").map(|s| escape_controls(s.trim()));
    g.uuid = get(&[], "GPU UUID").map(escape_controls);
    g.pci_device_id = get(&["PCI"], "Device Id").map(|s| escape_controls(s.trim_start_matches("0x")));
    match get(&["FB Memory Usage"], "Total").map(read_size) {
        Some(Size::Bytes(b)) => g.memory_total_bytes = Some(b),
        Some(Size::Unreadable(raw)) => g.memory_total_unreadable = Some(raw),
        Some(Size::NotReported) | None => {}
    }
    g.memory_reserved_bytes = get(&["FB Memory Usage"], "Reserved").and_then(parse_mib);
    g.memory_used_bytes = get(&["FB Memory Usage"], "Used").and_then(parse_mib);
    g.mig_current = get(&["MIG Mode"], "Current").map(MigMode::parse).unwrap_or(MigMode::Unknown);
    g.mig_pending = get(&["MIG Mode"], "Pending").map(MigMode::parse).unwrap_or(MigMode::Unknown);
    g.ecc = Ecc {
        current: get(&["ECC Mode"], "Current").and_then(parse_toggle),
        pending: get(&["ECC Mode"], "Pending").and_then(parse_toggle),
    };
    let n = |s: Option<&str>| s.and_then(|v| v.trim_end_matches('x').trim().parse::<u32>().ok());
    g.pcie_gen_max = n(get(&["PCI", "GPU Link Info", "PCIe Generation"], "Max"));
    g.pcie_gen_current = n(get(&["PCI", "GPU Link Info", "PCIe Generation"], "Current"));
    g.pcie_width_max = n(get(&["PCI", "GPU Link Info", "Link Width"], "Max"));
    g.pcie_width_current = n(get(&["PCI", "GPU Link Info", "Link Width"], "Current"));
    g.mig_devices = mig_devices(entries);
    g.persistence_mode = get(&[], "Persistence Mode").and_then(parse_toggle);
    // `GPU Power Readings` (R535+) or `Power Readings` (older: `Enforced Power Limit`)
    g.power_limit_mw = get(&["GPU Power Readings"], "Current Power Limit")
        .or_else(|| get(&["Power Readings"], "Enforced Power Limit"))
        .or_else(|| get(&["Power Readings"], "Current Power Limit"))
        .and_then(parse_watts_mw);
    g.clocks = Clocks {
        max_sm_mhz: get(&["Max Clocks"], "SM").and_then(parse_mhz),
        max_memory_mhz: get(&["Max Clocks"], "Memory").and_then(parse_mhz),
        applications_graphics_mhz: get(&["Applications Clocks"], "Graphics").and_then(parse_mhz),
        applications_memory_mhz: get(&["Applications Clocks"], "Memory").and_then(parse_mhz),
    };
    g.memory_repair = MemoryRepair {
        retired_single_bit: get(&["Retired Pages"], "Single Bit ECC").and_then(parse_count),
        retired_double_bit: get(&["Retired Pages"], "Double Bit ECC").and_then(parse_count),
        retirement_pending: get(&["Retired Pages"], "Pending Page Blacklist")
            .or_else(|| get(&["Retired Pages"], "Pending"))
            .and_then(parse_yes_no),
        remapped_correctable: get(&["Remapped Rows"], "Correctable Error").and_then(parse_count),
        remapped_uncorrectable: get(&["Remapped Rows"], "Uncorrectable Error").and_then(parse_count),
        remap_pending: get(&["Remapped Rows"], "Pending").and_then(parse_yes_no),
        remap_failure: get(&["Remapped Rows"], "Remapping Failure Occurred").and_then(parse_yes_no),
    };
    Ok(g)
}

/// MIG device blocks: `MIG Device` (one section per device; unconfirmed layout).
fn mig_devices(entries: &[Entry]) -> Vec<MigDevice> {
    let mut devs: Vec<MigDevice> = Vec::new();
    for e in entries {
        if e.path.first().is_none_or(|p| !p.starts_with("MIG Device")) {
            continue;
        }
        if e.path.len() == 1 && e.key == "Index" {
            devs.push(MigDevice {
                index: e.value.parse().ok(),
                gpu_instance_id: None,
                compute_instance_id: None,
                sm_count: None,
                memory_total_bytes: None,
                profile: None,
            });
            continue;
        }
        let Some(d) = devs.last_mut() else { continue };
        match (e.path.len(), e.key.as_str()) {
            (1, "GPU Instance ID") => d.gpu_instance_id = e.value.parse().ok(),
            (1, "Compute Instance ID") => d.compute_instance_id = e.value.parse().ok(),
            (_, "Multiprocessor count") => d.sm_count = e.value.parse().ok(),
            // newer drivers print `Shared FB Memory Usage` inside a MIG device
            (2, "Total") if e.path[1] == "FB Memory Usage" || e.path[1] == "Shared FB Memory Usage" => {
                d.memory_total_bytes = parse_mib(&e.value)
            }
            _ => {}
        }
    }
    devs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_driver_shared_fb_label_in_mig_device() {
        // Layout of a public `nvidia-smi -q` MIG section on a newer driver (labels padded wider).
        let t = r#"==============NVSMI LOG==============
Driver Version                            : 580.65.06
GPU 00000000:01:00.0
    Product Name                                       : NVIDIA H100 NVL
    MIG Mode
        Current                                        : Enabled
        Pending                                        : Enabled
    MIG Device
        Index                                          : 0
        GPU Instance ID                                : 0
        Compute Instance ID                            : 0
        Device Attributes
            Shared
                Multiprocessor count                   : 70
        Shared FB Memory Usage
            Total                                      : 64912 MiB
            Used                                       : 1 MiB
"#;
        let m = parse_text(t, "q").unwrap();
        let d = &m.gpus[0].mig_devices[0];
        assert_eq!((d.sm_count, d.memory_total_bytes, d.gpu_instance_id), (Some(70), Some(64912 << 20), Some(0)));
        assert_eq!(m.gpus[0].memory_total_bytes, None);
    }
}
