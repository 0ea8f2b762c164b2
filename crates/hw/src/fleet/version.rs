//! Driver and CUDA versions from the two short nvidia-smi outputs that
//! carry nothing else the check reads: `nvidia-smi --version` and the
//! header line of the default `nvidia-smi` table.
//!
//! `--version` (driver 590, the H100 capture of tests/fixtures/SOURCES.md):
//! `NVIDIA-SMI version  : 590.48.01`, `NVML version : 590.48`,
//! `DRIVER version : 590.48.01`, `CUDA Version : 13.1`.
//! The table's first box line: `| NVIDIA-SMI 550.90.07   Driver Version:
//! 550.90.07   CUDA Version: 12.4 |`. The table's GPU rows are not read
//! (the check reads `-q -x` for GPUs): only this line.

use crate::clean::normalize_newlines;
use crate::error::HwError;
use crate::machine::{read_version, Machine};

/// `nvidia-smi --version` → a machine with only its versions.
pub fn parse_smi_version(text: &str, file: &str) -> Result<Machine, HwError> {
    let text = normalize_newlines(text);
    let mut m = Machine { sources: vec![format!("{file} (nvidia-smi --version)")], ..Machine::default() };
    for l in text.lines() {
        let Some((k, v)) = l.split_once(':') else { continue };
        match k.trim() {
            "DRIVER version" => m.driver_version = read_version(v.trim()),
            "CUDA Version" => m.cuda_version = read_version(v.trim()),
            _ => {}
        }
    }
    if m.driver_version.is_none() {
        return Err(HwError::invalid(file, "no `DRIVER version : <x.y.z>` line; is this `nvidia-smi --version`?"));
    }
    Ok(m)
}

/// The header line of the default `nvidia-smi` table → a machine with only
/// its versions.
pub fn parse_table_header(text: &str, file: &str) -> Result<Machine, HwError> {
    let text = normalize_newlines(text);
    let mut m = Machine { sources: vec![format!("{file} (nvidia-smi table header)")], ..Machine::default() };
    let after = |line: &str, label: &str| line.split(label).nth(1).and_then(|r| read_version(r.trim()));
    if let Some(l) = text.lines().find(|l| l.contains("NVIDIA-SMI") && l.contains("Driver Version:")) {
        m.driver_version = after(l, "Driver Version:");
        m.cuda_version = after(l, "CUDA Version:");
    }
    if m.driver_version.is_none() {
        return Err(HwError::invalid(
            file,
            "no `| NVIDIA-SMI … Driver Version: <x.y.z> …` header line; is this the `nvidia-smi` table?",
        ));
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms() {
        let v = "NVIDIA-SMI version  : 590.48.01\nNVML version        : 590.48\nDRIVER version      : 590.48.01\nCUDA Version        : 13.1\n";
        let m = parse_smi_version(v, "v").unwrap();
        assert_eq!((m.driver_version.as_deref(), m.cuda_version.as_deref()), (Some("590.48.01"), Some("13.1")));
        let t = "| NVIDIA-SMI 550.90.07              Driver Version: 550.90.07      CUDA Version: 12.4     |";
        let m = parse_table_header(t, "t").unwrap();
        assert_eq!((m.driver_version.as_deref(), m.cuda_version.as_deref()), (Some("550.90.07"), Some("12.4")));
        assert!(parse_table_header("| NVIDIA-SMI x Driver Version: N/A |", "t").is_err());
        assert!(parse_smi_version("DRIVER version : \x1b[2J", "v").is_err());
    }
}
