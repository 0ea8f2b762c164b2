//! `nvidia-smi topo -m`: the GPU-to-GPU connection matrix.
//!
//! Format (../shared/reference/nvidia-smi-formats.md §3): a header row of
//! device labels (`GPU0 … GPUn`, then `NIC0 …` or `mlx5_0 …`), then
//! `CPU Affinity`, `NUMA Affinity`, `GPU NUMA ID`; one row per device with
//! ` X ` on the diagonal; then a legend. Cells are tab-separated on a
//! terminal; pasted copies often have spaces, so cells are split on
//! whitespace (no cell contains a space).

use serde::Serialize;

use crate::clean::{first_control, strip_terminal_codes};
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
    /// `nic_links[i][k]`: how GPU i reaches NIC k (`PIX`, `PXB`, `PHB`,
    /// `NODE`, `SYS`); empty without NIC columns
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub nic_links: Vec<Vec<Link>>,
    /// the device name of each NIC column: the `NIC Legend` (`NIC0: mlx5_0`,
    /// drivers from R515) or the column label itself (`mlx5_0`, older
    /// drivers); `None` when a `NICn` column has no legend line
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub nic_names: Vec<Option<String>>,
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

fn is_gpu_label(tok: &str) -> bool {
    tok.strip_prefix("GPU").is_some_and(|n| !n.is_empty() && n.len() <= 4 && n.bytes().all(|c| c.is_ascii_digit()))
}

/// A NIC column label: `NIC0` (drivers ≥ R515, with a NIC legend) or the
/// device name older drivers print (`mlx5_0`, `bnxt_re0`).
fn is_nic_label(tok: &str) -> bool {
    let nic = tok.strip_prefix("NIC").is_some_and(|n| !n.is_empty() && n.bytes().all(|c| c.is_ascii_digit()));
    nic || (tok.len() <= 32
        && tok.starts_with(|c: char| c.is_ascii_lowercase())
        && tok.bytes().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'))
}

/// The trailing column titles, as whitespace-split words.
const TITLES: [&[&str]; 3] = [&["CPU", "Affinity"], &["NUMA", "Affinity"], &["GPU", "NUMA", "ID"]];

/// An affinity cell: a CPU or NUMA list (`0-47,96-143`, `1`) or `N/A`.
fn is_affinity(tok: &str) -> bool {
    tok == "N/A"
        || tok.split(',').all(|r| {
            let mut ends = r.splitn(2, '-');
            ends.all(|n| !n.is_empty() && n.len() <= 6 && n.bytes().all(|c| c.is_ascii_digit()))
        })
}

/// The header row: the first line whose first cell is `GPU0` and whose
/// second is not a matrix cell (the `GPU0` row has ` X ` there).
fn find_header(lines: &[&str]) -> Option<usize> {
    lines.iter().position(|l| {
        let mut toks = l.split_whitespace();
        toks.next() == Some("GPU0") && toks.next().is_none_or(|t| Link::parse(t).is_none())
    })
}

/// Parse `nvidia-smi topo -m`.
///
/// Terminal codes and CRLF are removed first ([`crate::clean`]). Every row
/// is checked against the header, so a mangled paste is refused with the
/// line and the cell rather than miscounted: a GPU row must have one link
/// cell per device column (GPU columns `X`/`NV#`/`PIX`/`PXB`/`PHB`/`NODE`/
/// `SYS`, NIC columns the PCIe levels), then at most one affinity cell per
/// affinity title; a CPU list where a link should be means a column is
/// missing, a link where an affinity should be means the header lost a
/// column. Any other control character is an error showing it escaped.
pub fn parse_topo(text: &str, file: &str) -> Result<Topology, HwError> {
    if text.len() > MAX_TOPO_BYTES {
        return Err(HwError::TooLarge { file: file.into(), bytes: text.len() as u64, limit: MAX_TOPO_BYTES as u64 });
    }
    let text = strip_terminal_codes(text);
    let lines: Vec<&str> = text.lines().collect();
    let Some(hline) = find_header(&lines) else {
        if let Some(e) = crate::foreign::refuse(&text, file, "--topo") {
            return Err(e);
        }
        return Err(HwError::invalid(
            file,
            "no header row starting with GPU0 (`\\tGPU0\\tGPU1 …`); is this `nvidia-smi topo -m`?",
        ));
    };
    let control = |i: usize, raw: &str| -> Result<(), HwError> {
        match first_control(raw) {
            Some(c) => Err(HwError::syntax(
                file,
                i + 1,
                format!("printable cells (found the control character {c}, which is not part of a terminal code)"),
                raw,
            )),
            None => Ok(()),
        }
    };
    control(hline, lines[hline])?;
    let TopoHeader { header, gpus, nics, titles } = parse_header(&lines, hline, file)?;
    let (ngpus, nnics) = (gpus.len(), nics.len());
    let ndev = ngpus + nnics;
    let n = ngpus;
    let mut links: Vec<Option<Vec<Link>>> = vec![None; n];
    let mut nic_links: Vec<Option<Vec<Link>>> = vec![None; nnics];
    let mut cpu_affinity = vec![None; n];
    let mut numa_affinity = vec![None; n];
    for (i, raw) in lines.iter().enumerate().skip(hline + 1) {
        let toks: Vec<&str> = raw.split_whitespace().collect();
        let Some(first) = toks.first() else { continue };
        if *first == "Legend:" || (*first == "NIC" && toks.get(1) == Some(&"Legend:")) {
            break;
        }
        control(i, raw)?;
        let (row, is_gpu) = match gpus.iter().position(|g| g == first) {
            Some(r) => (r, true),
            None => match nics.iter().position(|x| x == first) {
                Some(r) => (r, false),
                None => {
                    return Err(HwError::syntax(
                        file,
                        i + 1,
                        format!(
                            "a row labelled with a header device ({}{})",
                            header[0],
                            if ndev > 1 { " …" } else { "" }
                        ),
                        raw,
                    ))
                }
            },
        };
        let cells = &toks[1..];
        if cells.len() < ndev {
            return Err(HwError::syntax(
                file,
                i + 1,
                format!("{ndev} connection cells after {first} (one per header device); found {} cells", cells.len()),
                raw,
            ));
        }
        let r = row_links(first, &cells[..ndev], &header, is_gpu, row, ngpus, i, raw, file)?;
        let trailing = &cells[ndev..];
        if let Some(bad) = trailing.iter().find(|t| !is_affinity(t)) {
            let why = if Link::parse(bad).is_some() {
                "more link cells than the header has device columns (did the header lose a NIC or GPU label?)"
            } else {
                "an affinity (a CPU list such as 0-47,96-143, a NUMA node, or N/A)"
            };
            return Err(HwError::syntax(file, i + 1, format!("{why}; found `{bad}` after the {ndev} link cells"), raw));
        }
        if trailing.len() > titles {
            return Err(HwError::syntax(
                file,
                i + 1,
                format!("at most {titles} affinity cells (the header's titles); found {}", trailing.len()),
                raw,
            ));
        }
        if is_gpu {
            if links[row].is_some() {
                return Err(HwError::syntax(file, i + 1, format!("one row for {first}"), raw));
            }
            // CPU affinity is one token (`0-47,96-143`), NUMA affinity the next.
            cpu_affinity[row] = trailing.first().filter(|s| **s != "N/A").map(|s| s.to_string());
            numa_affinity[row] = trailing.get(1).filter(|s| **s != "N/A").map(|s| s.to_string());
            links[row] = Some(r);
        } else {
            if nic_links[row].is_some() {
                return Err(HwError::syntax(file, i + 1, format!("one row for {first}"), raw));
            }
            nic_links[row] = Some(r);
        }
    }
    let full: Vec<Vec<Link>> = links
        .into_iter()
        .enumerate()
        .map(|(k, r)| r.ok_or_else(|| HwError::invalid(file, format!("no row for GPU{k}"))))
        .collect::<Result<_, _>>()?;
    check_symmetric(&full, &nic_links, &gpus, &nics, file)?;
    let nic_links: Vec<Vec<Link>> =
        if nnics == 0 { Vec::new() } else { full.iter().map(|r| r[n..].to_vec()).collect() };
    let nic_names = nic_legend(&lines, &nics);
    let links = full.into_iter().map(|mut r| {
        r.truncate(n);
        r
    });
    Ok(Topology { gpus, nics, links: links.collect(), cpu_affinity, numa_affinity, nic_links, nic_names })
}

/// The device name of each NIC column: `NICn: <device>` lines of the
/// `NIC Legend` (drivers from R515 print it after the legend), else the
/// column label when it is a device name already (`mlx5_0`).
fn nic_legend(lines: &[&str], nics: &[String]) -> Vec<Option<String>> {
    let mut names: Vec<Option<String>> = nics.iter().map(|l| (!l.starts_with("NIC")).then(|| l.clone())).collect();
    let Some(start) = lines.iter().position(|l| l.trim() == "NIC Legend:") else { return names };
    for l in &lines[start + 1..] {
        let t = l.trim();
        let Some((label, dev)) = t.split_once(':') else {
            if t.is_empty() {
                continue;
            }
            break;
        };
        let dev = dev.trim();
        let ok = dev.len() <= 64 && !dev.is_empty() && dev.bytes().all(|b| b.is_ascii_graphic());
        if let (Some(k), true) = (nics.iter().position(|x| x == label.trim()), ok) {
            names[k] = Some(dev.to_string());
        }
    }
    names
}

/// The header row: GPU columns, NIC columns, then the affinity titles.
struct TopoHeader<'a> {
    /// every token of the header row
    header: Vec<&'a str>,
    gpus: Vec<String>,
    nics: Vec<String>,
    /// how many affinity titles follow the device columns
    titles: usize,
}

/// Reads the header row (line `hline`): devices in order (GPUs, then NICs),
/// then each affinity title at most once, in order.
fn parse_header<'a>(lines: &[&'a str], hline: usize, file: &str) -> Result<TopoHeader<'a>, HwError> {
    let header: Vec<&str> = lines[hline].split_whitespace().collect();
    let ngpus = header.iter().take_while(|t| is_gpu_label(t)).count();
    let nnics = header[ngpus..].iter().take_while(|t| !TITLES.iter().any(|w| w[0] == **t) && is_nic_label(t)).count();
    let ndev = ngpus + nnics;
    if ndev > MAX_DEVICES {
        return Err(HwError::invalid(file, format!("{ndev} devices; at most {MAX_DEVICES}")));
    }
    // The rest of the header: the affinity titles, each once, in order.
    let mut rest = &header[ndev..];
    let mut titles = 0;
    for title in TITLES {
        if rest.starts_with(title) {
            rest = &rest[title.len()..];
            titles += 1;
        }
    }
    if let Some(odd) = rest.first() {
        let what = if is_gpu_label(odd) {
            "GPU columns before NIC columns".to_string()
        } else {
            format!("device labels (GPU0…, NIC0…, mlx5_0…) then `CPU Affinity`, `NUMA Affinity`, `GPU NUMA ID`; `{odd}` is none of these")
        };
        return Err(HwError::syntax(file, hline + 1, what, lines[hline]));
    }
    let gpus: Vec<String> = header[..ngpus].iter().map(|s| s.to_string()).collect();
    let nics: Vec<String> = header[ngpus..ndev].iter().map(|s| s.to_string()).collect();
    for (k, g) in gpus.iter().enumerate() {
        if *g != format!("GPU{k}") {
            return Err(HwError::syntax(file, hline + 1, format!("GPU{k} in the header"), lines[hline]));
        }
    }
    Ok(TopoHeader { header, gpus, nics, titles })
}

/// The link cells of one row (GPU `row` or NIC `row`): each a link, `X`
/// exactly on the diagonal.
#[allow(clippy::too_many_arguments)]
fn row_links(
    first: &str,
    cells: &[&str],
    header: &[&str],
    is_gpu: bool,
    row: usize,
    ngpus: usize,
    i: usize,
    raw: &str,
    file: &str,
) -> Result<Vec<Link>, HwError> {
    let ndev = cells.len();
    let mut r = Vec::with_capacity(ndev);
    for (j, cell) in cells.iter().enumerate() {
        let col = header[j];
        let diagonal = (is_gpu && j == row) || (!is_gpu && j == ngpus + row);
        let Some(l) = Link::parse(cell) else {
            let hint = if is_affinity(cell) {
                " (this row has fewer link cells than the header has columns, so a CPU/NUMA list \
                 stands where a link should be: a mangled paste?)"
            } else {
                ""
            };
            return Err(HwError::syntax(
                file,
                i + 1,
                format!("X, NV#, PIX, PXB, PHB, NODE or SYS for {first}-{col}{hint}"),
                raw,
            ));
        };
        if (l == Link::SelfLink) != diagonal {
            return Err(HwError::syntax(file, i + 1, format!("X exactly on the diagonal ({first}, {first})"), raw));
        }
        r.push(l);
    }
    Ok(r)
}

/// A real matrix is symmetric: the link between two devices is one link.
fn check_symmetric(
    full: &[Vec<Link>],
    nic_links: &[Option<Vec<Link>>],
    gpus: &[String],
    nics: &[String],
    file: &str,
) -> Result<(), HwError> {
    let n = gpus.len();
    for (a, row) in full.iter().enumerate() {
        for (b, ab) in row.iter().enumerate().take(n).skip(a + 1) {
            let ba = &full[b][a];
            if ab != ba {
                return Err(asymmetric(file, &gpus[a], &gpus[b], ab, ba));
            }
        }
        for (k, nic_row) in nic_links.iter().enumerate() {
            if let Some(nr) = nic_row {
                let (gn, ng) = (&row[n + k], &nr[a]);
                if gn != ng {
                    return Err(asymmetric(file, &gpus[a], &nics[k], gn, ng));
                }
            }
        }
    }
    Ok(())
}

fn asymmetric(file: &str, a: &str, b: &str, ab: &Link, ba: &Link) -> HwError {
    HwError::invalid(
        file,
        format!(
            "asymmetric matrix: {a}→{b} is {} but {b}→{a} is {}; `nvidia-smi topo -m` is symmetric, so this file was edited or damaged",
            ab.label(),
            ba.label()
        ),
    )
}
