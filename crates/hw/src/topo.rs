//! `nvidia-smi topo -m`: the GPU-to-GPU connection matrix.
//!
//! Format (../shared/reference/nvidia-smi-formats.md §3): a header row of
//! device labels (`GPU0 … GPUn`, then `NIC0 …` or `mlx5_0 …`), then
//! `CPU Affinity`, `NUMA Affinity`, `GPU NUMA ID`; one row per device with
//! ` X ` on the diagonal; then a legend. Cells are tab-separated on a
//! terminal; pasted copies often have spaces, so cells are split on
//! whitespace (no cell contains a space).

use serde::Serialize;

use crate::error::HwError;

/// Largest matrix accepted.
pub const MAX_DEVICES: usize = 256;
pub const MAX_TOPO_BYTES: usize = 1 << 20;

/// How two GPUs are connected, best first (NVML `nvmlGpuTopologyLevel_t` order).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Link {
    /// the diagonal
    #[serde(rename = "self")]
    SelfLink,
    /// `NV#`: a bonded set of # NVLinks
    Nvlink { links: u32 },
    /// at most a single PCIe bridge
    Pix,
    /// multiple PCIe bridges, no host bridge
    Pxb,
    /// through a PCIe host bridge (the CPU)
    Phb,
    /// between host bridges within a NUMA node
    Node,
    /// across the inter-socket link (QPI/UPI); `SOC` on old drivers
    Sys,
}

impl Link {
    pub fn parse(cell: &str) -> Option<Link> {
        let c = cell.trim();
        Some(match c {
            "X" => Link::SelfLink,
            "PIX" => Link::Pix,
            "PXB" => Link::Pxb,
            "PHB" => Link::Phb,
            "NODE" => Link::Node,
            "SYS" | "SOC" => Link::Sys,
            _ => {
                let n = c.strip_prefix("NV")?;
                Link::Nvlink { links: n.parse().ok().filter(|&n: &u32| n > 0)? }
            }
        })
    }

    pub fn label(&self) -> String {
        match self {
            Link::SelfLink => "X".into(),
            Link::Nvlink { links } => format!("NV{links}"),
            Link::Pix => "PIX".into(),
            Link::Pxb => "PXB".into(),
            Link::Phb => "PHB".into(),
            Link::Node => "NODE".into(),
            Link::Sys => "SYS".into(),
        }
    }

    pub fn is_nvlink(&self) -> bool {
        matches!(self, Link::Nvlink { .. })
    }

    /// What the legend says it means.
    pub fn meaning(&self) -> &'static str {
        match self {
            Link::SelfLink => "self",
            Link::Nvlink { .. } => "NVLink",
            Link::Pix => "PCIe, at most one bridge",
            Link::Pxb => "PCIe, several bridges",
            Link::Phb => "PCIe through the CPU host bridge",
            Link::Node => "PCIe across host bridges in one NUMA node",
            Link::Sys => "PCIe across NUMA nodes (QPI/UPI)",
        }
    }
}

/// The GPU part of the matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Topology {
    /// `GPU0`…`GPUn`
    pub gpus: Vec<String>,
    /// NIC labels (`NIC0`, `mlx5_0`, …)
    pub nics: Vec<String>,
    /// `links[i][j]` for GPUs i, j
    pub links: Vec<Vec<Link>>,
    pub cpu_affinity: Vec<Option<String>>,
    pub numa_affinity: Vec<Option<String>>,
}

/// One pair of GPUs and how they are connected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pair {
    pub a: usize,
    pub b: usize,
    pub link: Link,
}

impl Topology {
    /// Every unordered pair (i < j).
    pub fn pairs(&self) -> Vec<Pair> {
        let n = self.gpus.len();
        let mut out = Vec::with_capacity(n * n.saturating_sub(1) / 2);
        for a in 0..n {
            for b in a + 1..n {
                out.push(Pair { a, b, link: self.links[a][b].clone() });
            }
        }
        out
    }
}

fn is_device(tok: &str) -> bool {
    let gpu = tok.strip_prefix("GPU").is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    let nic = tok.strip_prefix("NIC").is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    gpu || nic || tok.starts_with("mlx") || tok.starts_with("ib")
}

/// Parse `nvidia-smi topo -m`.
pub fn parse_topo(text: &str, file: &str) -> Result<Topology, HwError> {
    if text.len() > MAX_TOPO_BYTES {
        return Err(HwError::TooLarge { file: file.into(), bytes: text.len() as u64, limit: MAX_TOPO_BYTES as u64 });
    }
    let lines: Vec<&str> = text.lines().collect();
    let (hline, header) = lines
        .iter()
        .enumerate()
        .find_map(|(i, l)| {
            let toks: Vec<&str> = l.split_whitespace().collect();
            (toks.first() == Some(&"GPU0") && !l.starts_with("GPU0")).then_some((i, toks))
        })
        .ok_or_else(|| {
            HwError::invalid(
                file,
                "no header row starting with GPU0 (`\\tGPU0\\tGPU1 …`); is this `nvidia-smi topo -m`?",
            )
        })?;
    let devices: Vec<&str> = header.iter().copied().take_while(|t| is_device(t)).collect();
    if devices.len() > MAX_DEVICES {
        return Err(HwError::invalid(file, format!("{} devices; at most {MAX_DEVICES}", devices.len())));
    }
    let gpus: Vec<String> = devices.iter().filter(|d| d.starts_with("GPU")).map(|s| s.to_string()).collect();
    let nics: Vec<String> = devices.iter().filter(|d| !d.starts_with("GPU")).map(|s| s.to_string()).collect();
    for (k, g) in gpus.iter().enumerate() {
        if *g != format!("GPU{k}") {
            return Err(HwError::syntax(file, hline + 1, format!("GPU{k} in the header"), lines[hline]));
        }
    }
    let n = gpus.len();
    let mut links: Vec<Option<Vec<Link>>> = vec![None; n];
    let mut cpu_affinity = vec![None; n];
    let mut numa_affinity = vec![None; n];
    for (i, raw) in lines.iter().enumerate().skip(hline + 1) {
        let toks: Vec<&str> = raw.split_whitespace().collect();
        let Some(first) = toks.first() else { continue };
        if *first == "Legend:" {
            break;
        }
        let Some(row) = first.strip_prefix("GPU").and_then(|k| k.parse::<usize>().ok()) else { continue };
        if row >= n {
            return Err(HwError::syntax(file, i + 1, format!("a row label GPU0..GPU{}", n.saturating_sub(1)), raw));
        }
        if toks.len() < 1 + devices.len() {
            return Err(HwError::syntax(file, i + 1, format!("{} connection cells after {first}", devices.len()), raw));
        }
        let mut r = Vec::with_capacity(n);
        for (j, cell) in toks[1..=n].iter().enumerate() {
            let l = Link::parse(cell).ok_or_else(|| {
                HwError::syntax(file, i + 1, format!("X, NV#, PIX, PXB, PHB, NODE or SYS for GPU{row}-GPU{j}"), raw)
            })?;
            if (l == Link::SelfLink) != (j == row) {
                return Err(HwError::syntax(
                    file,
                    i + 1,
                    format!("X exactly on the diagonal (GPU{row}, GPU{row})"),
                    raw,
                ));
            }
            r.push(l);
        }
        let rest = &toks[1 + devices.len()..];
        // CPU affinity is one token (`0-47,96-143`), NUMA affinity the next.
        cpu_affinity[row] = rest.first().filter(|s| **s != "N/A").map(|s| s.to_string());
        numa_affinity[row] = rest.get(1).filter(|s| **s != "N/A").map(|s| s.to_string());
        if links[row].is_some() {
            return Err(HwError::syntax(file, i + 1, format!("one row for GPU{row}"), raw));
        }
        links[row] = Some(r);
    }
    let links: Vec<Vec<Link>> = links
        .into_iter()
        .enumerate()
        .map(|(k, r)| r.ok_or_else(|| HwError::invalid(file, format!("no row for GPU{k}"))))
        .collect::<Result<_, _>>()?;
    // A real matrix is symmetric: the link between two GPUs is one link.
    for (a, row) in links.iter().enumerate() {
        for (b, ab) in row.iter().enumerate().skip(a + 1) {
            let ba = &links[b][a];
            if ab != ba {
                return Err(HwError::invalid(
                    file,
                    format!(
                        "asymmetric matrix: GPU{a}→GPU{b} is {} but GPU{b}→GPU{a} is {}; \
                         `nvidia-smi topo -m` is symmetric, so this file was edited or damaged",
                        ab.label(),
                        ba.label()
                    ),
                ));
            }
        }
    }
    Ok(Topology { gpus, nics, links, cpu_affinity, numa_affinity })
}
