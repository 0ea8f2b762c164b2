//! What a machine is, as read from nvidia-smi outputs or NVML: the common
//! model every parser fills and the verdict reads.

use serde::Serialize;

use crate::mig::LgiRow;
use crate::topo::Topology;

/// MIG mode of a GPU (`current_mig` / `pending_mig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MigMode {
    Enabled,
    Disabled,
    /// `N/A`: the GPU cannot do MIG
    NotSupported,
    /// not reported by the source
    Unknown,
}

impl MigMode {
    pub fn parse(s: &str) -> MigMode {
        match s.trim() {
            "Enabled" => MigMode::Enabled,
            "Disabled" => MigMode::Disabled,
            "N/A" | "[N/A]" => MigMode::NotSupported,
            _ => MigMode::Unknown,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            MigMode::Enabled => "enabled",
            MigMode::Disabled => "disabled",
            MigMode::NotSupported => "not supported",
            MigMode::Unknown => "unknown",
        }
    }
}

/// ECC mode (`current_ecc` / `pending_ecc`): `None` when not reported or N/A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ecc {
    pub current: Option<bool>,
    pub pending: Option<bool>,
}

/// Clocks as nvidia-smi reports them, MHz.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct Clocks {
    /// `Max Clocks / SM`: the card's ceiling (a lower one is another SKU or a capped board)
    pub max_sm_mhz: Option<u32>,
    pub max_memory_mhz: Option<u32>,
    /// `Applications Clocks` (`nvidia-smi -ac`), when set and reported
    /// (drivers from R550 print "deprecated" on Hopper: not reported)
    pub applications_graphics_mhz: Option<u32>,
    pub applications_memory_mhz: Option<u32>,
}

impl Clocks {
    pub fn is_empty(&self) -> bool {
        *self == Clocks::default()
    }
}

/// Memory the driver has taken out of service: retired pages (up to
/// Volta/Turing) or remapped rows (Ampere and later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct MemoryRepair {
    pub retired_single_bit: Option<u32>,
    pub retired_double_bit: Option<u32>,
    /// a page waits to be retired at the next reset
    pub retirement_pending: Option<bool>,
    pub remapped_correctable: Option<u32>,
    pub remapped_uncorrectable: Option<u32>,
    /// a row waits to be remapped at the next reset
    pub remap_pending: Option<bool>,
    /// a remapping failed: the card needs service
    pub remap_failure: Option<bool>,
}

impl MemoryRepair {
    pub fn is_empty(&self) -> bool {
        *self == MemoryRepair::default()
    }
}

/// One MIG device listed under a GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MigDevice {
    pub index: Option<u32>,
    pub gpu_instance_id: Option<u32>,
    pub compute_instance_id: Option<u32>,
    pub sm_count: Option<u32>,
    pub memory_total_bytes: Option<u64>,
    /// profile name when the source gives one (`nvidia-smi -L`)
    pub profile: Option<String>,
}

/// One physical GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gpu {
    pub index: u32,
    pub name: String,
    pub bus_id: Option<String>,
    pub uuid: Option<String>,
    /// `20B010DE` (device id + vendor)
    pub pci_device_id: Option<String>,
    /// whole-GPU framebuffer total (`fb_memory_usage/total`)
    pub memory_total_bytes: Option<u64>,
    /// the total as printed when it is not a readable size (`-1 MiB`,
    /// `NaN MiB`, past 2^64 bytes), control characters escaped; such a GPU
    /// cannot confirm what was rented
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_total_unreadable: Option<String>,
    pub memory_reserved_bytes: Option<u64>,
    pub memory_used_bytes: Option<u64>,
    /// free framebuffer memory (NVML `memory_info().free`: total − reserved − used)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_free_bytes: Option<u64>,
    pub mig_current: MigMode,
    pub mig_pending: MigMode,
    pub mig_devices: Vec<MigDevice>,
    pub ecc: Ecc,
    pub pcie_gen_max: Option<u32>,
    pub pcie_gen_current: Option<u32>,
    pub pcie_width_max: Option<u32>,
    pub pcie_width_current: Option<u32>,
    /// `Persistence Mode`
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistence_mode: Option<bool>,
    /// the power limit in force, milliwatts (`Current Power Limit`, or
    /// `Enforced Power Limit` on older drivers)
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_limit_mw: Option<u64>,
    #[serde(skip_serializing_if = "Clocks::is_empty")]
    pub clocks: Clocks,
    #[serde(skip_serializing_if = "MemoryRepair::is_empty")]
    pub memory_repair: MemoryRepair,
}

impl Gpu {
    pub fn new(index: u32, name: impl Into<String>) -> Gpu {
        Gpu {
            index,
            name: name.into(),
            bus_id: None,
            uuid: None,
            pci_device_id: None,
            memory_total_bytes: None,
            memory_total_unreadable: None,
            memory_reserved_bytes: None,
            memory_used_bytes: None,
            memory_free_bytes: None,
            mig_current: MigMode::Unknown,
            mig_pending: MigMode::Unknown,
            mig_devices: Vec::new(),
            ecc: Ecc { current: None, pending: None },
            pcie_gen_max: None,
            pcie_gen_current: None,
            pcie_width_max: None,
            pcie_width_current: None,
            persistence_mode: None,
            power_limit_mw: None,
            clocks: Clocks::default(),
            memory_repair: MemoryRepair::default(),
        }
    }
}

/// Everything known about one machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Machine {
    /// where each part came from (file names, or `NVML`)
    pub sources: Vec<String>,
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
    /// `attached_gpus` as the source states it (may differ from `gpus.len()`)
    pub attached_gpus: Option<u32>,
    pub gpus: Vec<Gpu>,
    pub topology: Option<Topology>,
    /// existing GPU instances (`nvidia-smi mig -lgi`)
    pub gpu_instances: Vec<LgiRow>,
}

impl Machine {
    /// Merge another reading of the same machine: fields this one lacks are
    /// filled from `other`; GPUs are matched by index (sorted, then binary
    /// search: linear-logarithmic in the GPU count, never quadratic).
    pub fn merge(&mut self, other: Machine) {
        self.sources.extend(other.sources);
        self.driver_version = self.driver_version.take().or(other.driver_version);
        self.cuda_version = self.cuda_version.take().or(other.cuda_version);
        self.attached_gpus = self.attached_gpus.or(other.attached_gpus);
        if self.topology.is_none() {
            self.topology = other.topology;
        }
        self.gpu_instances.extend(other.gpu_instances);
        self.gpus.sort_by_key(|g| g.index);
        let mut added = Vec::new();
        for g in other.gpus {
            match self.gpus.binary_search_by_key(&g.index, |x| x.index) {
                Err(_) => added.push(g),
                Ok(i) => self.gpus[i].fill_from(g),
            }
        }
        self.gpus.extend(added);
        self.gpus.sort_by_key(|g| g.index);
    }
}

impl Gpu {
    /// Fill the fields this reading lacks from another reading of the same GPU.
    fn fill_from(&mut self, g: Gpu) {
        let x = self;
        x.bus_id = x.bus_id.take().or(g.bus_id);
        x.uuid = x.uuid.take().or(g.uuid);
        x.pci_device_id = x.pci_device_id.take().or(g.pci_device_id);
        if x.memory_total_bytes.is_none() && x.memory_total_unreadable.is_none() {
            x.memory_total_bytes = g.memory_total_bytes;
            x.memory_total_unreadable = g.memory_total_unreadable;
        }
        x.memory_reserved_bytes = x.memory_reserved_bytes.or(g.memory_reserved_bytes);
        x.memory_used_bytes = x.memory_used_bytes.or(g.memory_used_bytes);
        x.memory_free_bytes = x.memory_free_bytes.or(g.memory_free_bytes);
        if x.mig_current == MigMode::Unknown {
            x.mig_current = g.mig_current;
        }
        if x.mig_pending == MigMode::Unknown {
            x.mig_pending = g.mig_pending;
        }
        if x.mig_devices.is_empty() {
            x.mig_devices = g.mig_devices;
        } else {
            for (a, b) in x.mig_devices.iter_mut().zip(g.mig_devices) {
                a.profile = a.profile.take().or(b.profile);
                a.memory_total_bytes = a.memory_total_bytes.or(b.memory_total_bytes);
            }
        }
        x.ecc.current = x.ecc.current.or(g.ecc.current);
        x.ecc.pending = x.ecc.pending.or(g.ecc.pending);
        x.pcie_gen_max = x.pcie_gen_max.or(g.pcie_gen_max);
        x.pcie_gen_current = x.pcie_gen_current.or(g.pcie_gen_current);
        x.pcie_width_max = x.pcie_width_max.or(g.pcie_width_max);
        x.pcie_width_current = x.pcie_width_current.or(g.pcie_width_current);
        x.persistence_mode = x.persistence_mode.or(g.persistence_mode);
        x.power_limit_mw = x.power_limit_mw.or(g.power_limit_mw);
        if x.clocks.is_empty() {
            x.clocks = g.clocks;
        }
        if x.memory_repair.is_empty() {
            x.memory_repair = g.memory_repair;
        }
    }
}

/// Most GPUs one file may list. The largest single machines expose 16
/// GPUs (DGX-2, HGX-2); NVML numbers devices with an unsigned int but no
/// real host comes near this. A file with more was generated or joined
/// from many machines, and is refused with this number in the message.
pub const MAX_GPUS: usize = 256;

/// A memory figure as printed by nvidia-smi.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Size {
    Bytes(u64),
    /// `N/A`, `[N/A]`, `Not Supported`, empty: the source does not report it
    NotReported,
    /// anything else (`-1 MiB`, `NaN MiB`, a number past 2^64 bytes), as
    /// printed, control characters escaped
    Unreadable(String),
}

/// Read a memory figure (`"81559 MiB"`, `"19968MiB"`).
pub fn read_size(s: &str) -> Size {
    let t = s.trim();
    if t.is_empty() || matches!(t, "N/A" | "[N/A]" | "Not Supported" | "[Not Supported]" | "Unknown Error") {
        return Size::NotReported;
    }
    match parse_mib(t) {
        Some(b) => Size::Bytes(b),
        None => Size::Unreadable(crate::clean::escape_controls(&t.chars().take(40).collect::<String>())),
    }
}

/// A version as nvidia-smi prints it: the leading dotted number
/// (`"13.3 [Deprecated; … Use CUDA UMD Version instead]"` → `13.3`, driver
/// 610); `None` for `N/A`, `Not Found` (no CUDA driver library) or
/// anything else that is not a version.
pub fn read_version(s: &str) -> Option<String> {
    let first = s.split_whitespace().next()?;
    let ok = first.split('.').all(|p| !p.is_empty() && p.len() <= 9 && p.bytes().all(|b| b.is_ascii_digit()));
    ok.then(|| first.to_string())
}

/// `"40960 MiB"` → bytes; `N/A` and other non-sizes → `None`.
pub fn parse_mib(s: &str) -> Option<u64> {
    let t = s.trim();
    let (num, unit) = t.split_once(' ').unwrap_or((t.trim_end_matches(|c: char| c.is_alphabetic()), ""));
    let unit = if unit.is_empty() { t.trim_start_matches(|c: char| c.is_ascii_digit()) } else { unit };
    let n: u64 = num.trim().parse().ok()?;
    let mult: u64 = match unit.trim() {
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KiB" => 1 << 10,
        "B" => 1,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// `"1410 MHz"` → 1410; anything else (`N/A`, "Requested functionality has
/// been deprecated") → `None`.
pub fn parse_mhz(s: &str) -> Option<u32> {
    let n = s.trim().strip_suffix("MHz")?.trim();
    n.parse().ok().filter(|&v: &u32| v > 0 && v < 100_000)
}

/// `"700.00 W"` → 700 000 mW; anything else → `None`. At most 100 kW: no
/// board draws more, so a larger figure is not a power limit.
pub fn parse_watts_mw(s: &str) -> Option<u64> {
    let n: f64 = s.trim().strip_suffix('W')?.trim().parse().ok()?;
    (n.is_finite() && n > 0.0 && n <= 100_000.0).then(|| (n * 1000.0).round() as u64)
}

/// `Yes` / `No` → bool; anything else → `None`.
pub fn parse_yes_no(s: &str) -> Option<bool> {
    match s.trim() {
        "Yes" => Some(true),
        "No" => Some(false),
        _ => None,
    }
}

/// A small count (`0`, `12`); `N/A` and anything else → `None`.
pub fn parse_count(s: &str) -> Option<u32> {
    s.trim().parse().ok()
}

/// `Enabled` / `Disabled` → bool; anything else → `None`.
pub fn parse_toggle(s: &str) -> Option<bool> {
    match s.trim() {
        "Enabled" => Some(true),
        "Disabled" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sizes() {
        assert_eq!(parse_mib("40960 MiB"), Some(40960 << 20));
        assert_eq!(parse_mib("19968MiB"), Some(19968 << 20));
        assert_eq!(parse_mib("N/A"), None);
        assert_eq!(parse_mib("99999999999999999 MiB"), None);
        assert_eq!(parse_toggle("Enabled"), Some(true));
        assert_eq!(read_size("81559 MiB"), Size::Bytes(81559 << 20));
        assert_eq!(read_size("N/A"), Size::NotReported);
        for bad in ["-1 MiB", "NaN MiB", "18446744073709551616 MiB", "17592186044416 MiB", "1.5 MiB"] {
            assert!(matches!(read_size(bad), Size::Unreadable(_)), "{bad}");
        }
        assert_eq!(read_size("1\x1b[2J MiB"), Size::Unreadable("1\\x1b[2J MiB".into()));
        assert_eq!(read_version("13.3 [Deprecated; will be removed in CUDA 14.0]"), Some("13.3".into()));
        assert_eq!(read_version("535.129.03"), Some("535.129.03".into()));
        for none in ["Not Found", "CUDA Not Found", "N/A", "", "12.", "1a.2"] {
            assert_eq!(read_version(none), None, "{none}");
        }
    }
}
