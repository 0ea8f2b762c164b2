//! Outputs that are not the one a flag expects, recognised so the error
//! says what the file is and what to give instead.
//!
//! The markers are banner lines each tool prints on every run:
//! `ROCm System Management Interface` / `End of ROCm SMI Log` (rocm-smi,
//! every mode, e.g. ROCm/ROC-smi issue 90), `AMDSMI Tool` (amd-smi
//! version), `NVSMI LOG` (nvidia-smi -q), `<nvidia_smi_log` (-q -x), the
//! default table's `| NVIDIA-SMI … Driver Version:` header, and the titles
//! of the CUDA samples' and nccl-tests' reports.

use crate::error::HwError;

/// What a text is, when it is recognisably some known tool's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    RocmSmi,
    AmdSmi,
    NvidiaSmiQuery,
    NvidiaSmiXml,
    NvidiaSmiTable,
    NvidiaSmiList,
    NvidiaSmiTopo,
    BandwidthTest,
    P2pBandwidthLatencyTest,
    NcclTests,
    /// `nvidia-smi --version`
    NvidiaSmiVersion,
    /// infiniband-diags `ibstat`
    Ibstat,
    /// libibverbs `ibv_devinfo`
    IbvDevinfo,
    /// perftest `ib_write_bw`, `ib_read_bw`, `ib_send_lat`, …
    Perftest,
    /// `nvidia-smi mig -lgi`
    MigInstances,
    /// `nvidia-smi mig -lgip`
    MigProfiles,
    /// the manifest `vramfit check --collect-script` writes beside the outputs
    CollectManifest,
}

impl Kind {
    /// The tool, and the flag that reads it (or why none does).
    pub fn describe(self) -> &'static str {
        match self {
            Kind::RocmSmi => "rocm-smi output (AMD GPUs)",
            Kind::AmdSmi => "amd-smi output (AMD GPUs)",
            Kind::NvidiaSmiQuery => "`nvidia-smi -q` text (give it with --text)",
            Kind::NvidiaSmiXml => "`nvidia-smi -q -x` XML (give it with --xml)",
            Kind::NvidiaSmiTable => {
                "the default `nvidia-smi` table, which vramfit does not read (save `nvidia-smi -q -x` instead, for --xml)"
            }
            Kind::NvidiaSmiList => "`nvidia-smi -L` output (give it with --list)",
            Kind::NvidiaSmiTopo => "`nvidia-smi topo -m` output (give it with --topo)",
            Kind::BandwidthTest => "CUDA samples `bandwidthTest` output (give it with --bandwidth)",
            Kind::P2pBandwidthLatencyTest => "CUDA samples `p2pBandwidthLatencyTest` output (give it with --p2p)",
            Kind::NcclTests => "nccl-tests output (give `all_reduce_perf` output with --nccl)",
            Kind::NvidiaSmiVersion => "`nvidia-smi --version` output (read by check --fleet)",
            Kind::Ibstat => "`ibstat` output (read by check --fleet)",
            Kind::IbvDevinfo => "`ibv_devinfo` output (read by check --fleet)",
            Kind::Perftest => "perftest (`ib_write_bw`, `ib_read_bw`, `ib_send_lat`) output (read by check --fleet)",
            Kind::MigInstances => "`nvidia-smi mig -lgi` output (give it with --lgi)",
            Kind::MigProfiles => "`nvidia-smi mig -lgip` output (give it with --lgip)",
            Kind::CollectManifest => "the manifest of `vramfit check --collect-script` (read by check --fleet)",
        }
    }

    /// The flag that reads this kind, if any.
    pub fn flag(self) -> Option<&'static str> {
        match self {
            Kind::NvidiaSmiQuery => Some("--text"),
            Kind::NvidiaSmiXml => Some("--xml"),
            Kind::NvidiaSmiList => Some("--list"),
            Kind::NvidiaSmiTopo => Some("--topo"),
            Kind::BandwidthTest => Some("--bandwidth"),
            Kind::P2pBandwidthLatencyTest => Some("--p2p"),
            Kind::NcclTests => Some("--nccl"),
            Kind::MigInstances => Some("--lgi"),
            Kind::MigProfiles => Some("--lgip"),
            // read by the fleet check only; its parsers name themselves
            Kind::NvidiaSmiVersion => Some("nvidia-smi --version"),
            Kind::Ibstat => Some("ibstat"),
            Kind::IbvDevinfo => Some("ibv_devinfo"),
            Kind::Perftest => Some("perftest"),
            Kind::CollectManifest => Some("manifest"),
            _ => None,
        }
    }
}

/// Recognise a text by its banner (first 64 kB looked at).
pub fn identify(text: &str) -> Option<Kind> {
    let head = match text.char_indices().nth(65536) {
        Some((i, _)) => &text[..i],
        None => text,
    };
    let has = |m: &str| head.contains(m);
    let line_starts = |m: &str| head.lines().any(|l| l.trim_start().starts_with(m));
    Some(if head.starts_with(crate::fleet::manifest::MAGIC) {
        Kind::CollectManifest
    } else if has("ROCm System Management Interface") || has("ROCm SMI Log") || has("rocm-smi") {
        Kind::RocmSmi
    } else if has("AMDSMI") || has("amd-smi") {
        Kind::AmdSmi
    } else if has("<nvidia_smi_log") {
        Kind::NvidiaSmiXml
    } else if has("NVSMI LOG") {
        Kind::NvidiaSmiQuery
    } else if has("NVIDIA-SMI version") && has("DRIVER version") {
        Kind::NvidiaSmiVersion
    } else if has("NVIDIA-SMI") && has("Driver Version:") {
        Kind::NvidiaSmiTable
    } else if has("[CUDA Bandwidth Test]") || has("Host to Device Bandwidth") {
        Kind::BandwidthTest
    } else if has("P2P (Peer-to-Peer) GPU Bandwidth Latency Test") || has("P2P=Enabled") {
        Kind::P2pBandwidthLatencyTest
    } else if has("# nThread") || has("busbw") {
        Kind::NcclTests
    } else if has("#bytes") && (has("BW peak") || has("t_min[usec]") || has("t_typical")) {
        Kind::Perftest
    } else if line_starts("CA '") && (has("Link layer:") || has("CA type:") || has("Port GUID:")) {
        Kind::Ibstat
    } else if line_starts("hca_id:") && (has("transport:") || has("phys_port_cnt") || has("link_layer:")) {
        Kind::IbvDevinfo
    } else if has("GPU instance profiles:") {
        Kind::MigProfiles
    } else if has("GPU instances:") {
        Kind::MigInstances
    } else if has("NV#  =") || (has("Legend:") && has("PHB")) || (has("CPU Affinity") && line_starts("GPU0")) {
        Kind::NvidiaSmiTopo
    } else if head.lines().any(|l| l.starts_with("GPU ") && l.contains("(UUID: GPU-")) {
        Kind::NvidiaSmiList
    } else {
        return None;
    })
}

/// An error saying what `text` is, when it is a known kind other than
/// the one `flag` reads; `None` when it is not recognised (the parser
/// then says what it expected).
pub fn refuse(text: &str, file: &str, flag: &str) -> Option<HwError> {
    let kind = identify(text)?;
    if kind.flag() == Some(flag) {
        return None;
    }
    let what = match kind {
        Kind::RocmSmi | Kind::AmdSmi => format!(
            "this is {}; vramfit check reads NVIDIA tools' output: `nvidia-smi -q -x` (--xml), `-q` (--text), \
             `-L` (--list), `topo -m` (--topo), `mig -lgi`/`-lgip`, and CUDA samples / nccl-tests bandwidth \
             reports; AMD GPUs are not checked",
            kind.describe()
        ),
        _ => format!("this is {}, not what {flag} reads", kind.describe()),
    };
    Some(HwError::invalid(file, what))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn banners() {
        assert_eq!(identify("====ROCm System Management Interface===="), Some(Kind::RocmSmi));
        assert_eq!(identify("\n==============NVSMI LOG==============\n"), Some(Kind::NvidiaSmiQuery));
        assert_eq!(identify("hello"), None);
        let e = refuse("==== ROCm System Management Interface ====", "r.txt", "--xml").unwrap().to_string();
        assert!(e.starts_with("r.txt: this is rocm-smi output (AMD GPUs); vramfit check reads"), "{e}");
        assert!(refuse("<nvidia_smi_log>", "x.xml", "--xml").is_none());
        let e = refuse("<nvidia_smi_log>", "x.xml", "--text").unwrap().to_string();
        assert!(e.contains("give it with --xml"), "{e}");
    }
}
