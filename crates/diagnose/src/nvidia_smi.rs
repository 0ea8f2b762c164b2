//! An `nvidia-smi` table pasted into the same log as an OOM: the per-GPU
//! `Memory-Usage` cells (`15514MiB / 16130MiB`) and the `Processes:` rows
//! (`|    0   N/A  N/A     12345      C   python     10240MiB |`, or the
//! pre-2020 layout without the GI/CI columns). It is evidence, read as the
//! tool prints it; which moment it shows is the user's (often after the
//! crash, when the failing process is gone).
//!
//! Layout: nvidia-smi's default output (reference:
//! /work/shared/reference/nvidia-smi-formats.md); MiB there are 2^20 bytes.

use crate::text::re;
use regex::Regex;
use serde::Serialize;
use std::sync::OnceLock;

/// One GPU row: its index and memory use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuUse {
    pub index: u32,
    #[serde(rename = "used_bytes")]
    pub used: u64,
    #[serde(rename = "total_bytes")]
    pub total: u64,
}

/// One row of the `Processes:` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessRow {
    pub gpu: u32,
    pub pid: u64,
    /// `C` compute, `G` graphics, `C+G`
    #[serde(rename = "type")]
    pub kind: String,
    pub name: String,
    #[serde(rename = "used_bytes")]
    pub used: u64,
}

/// What the pasted table shows.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct NvidiaSmi {
    /// 1-based line of the first row read
    pub line: usize,
    pub gpus: Vec<GpuUse>,
    pub processes: Vec<ProcessRow>,
}

impl NvidiaSmi {
    pub fn gpu(&self, index: u32) -> Option<&GpuUse> {
        self.gpus.iter().find(|g| g.index == index)
    }
    pub fn processes_on(&self, gpu: u32) -> impl Iterator<Item = &ProcessRow> {
        self.processes.iter().filter(move |p| p.gpu == gpu)
    }
}

/// At most this many rows of each kind are kept (a machine has ≤ 16 GPUs;
/// a busy one lists tens of processes).
const MAX_ROWS: usize = 256;
const MIB: u64 = 1 << 20;

/// The GPU index line (`|   0  Tesla V100-SXM2...  On   | …`) followed by
/// the line with the memory cell; the two are read as one record.
fn gpu_index_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"^\|\s{1,6}(\d{1,2})\s{1,4}\S[^|\n]{0,60}\|\s*[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d")
}
fn memory_cell_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    re(&C, r"\|\s*(\d{1,9})MiB\s*/\s*(\d{1,9})MiB\s*\|")
}
fn process_re() -> &'static Regex {
    static C: OnceLock<Regex> = OnceLock::new();
    // GPU, [GI CI], PID, type, name, usage
    re(
        &C,
        r"^\|\s{1,8}(\d{1,2})\s+(?:(?:N/A|\d{1,3})\s+(?:N/A|\d{1,3})\s+)?(\d{1,10})\s+(C\+G|C|G)\s+(\S[^\n|]{0,200}?)\s+(\d{1,9})MiB\s*\|",
    )
}

/// The first nvidia-smi table in `text` (GPU rows and process rows), or
/// `None` when there is none.
pub fn parse(text: &str) -> Option<NvidiaSmi> {
    if !text.contains("MiB /") && !text.contains("Processes:") {
        return None;
    }
    let mut t = NvidiaSmi::default();
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let l = l.trim_start_matches(['>', ' ']).trim_end();
        if let Some(c) = gpu_index_re().captures(l) {
            // the memory cell sits on the next line
            let cell = lines.get(i + 1).and_then(|n| memory_cell_re().captures(n));
            if let (Some(index), Some(cell)) = (c.get(1).and_then(|m| m.as_str().parse().ok()), cell) {
                let mib = |k: usize| cell.get(k).and_then(|m| m.as_str().parse::<u64>().ok()).map(|v| v * MIB);
                if let (Some(used), Some(total), true) = (mib(1), mib(2), t.gpus.len() < MAX_ROWS) {
                    if t.gpus.is_empty() && t.processes.is_empty() {
                        t.line = i + 1;
                    }
                    t.gpus.push(GpuUse { index, used, total });
                }
            }
        } else if let Some(c) = process_re().captures(l) {
            let (Some(gpu), Some(pid), Some(kind), Some(name), Some(used)) = (
                c.get(1).and_then(|m| m.as_str().parse().ok()),
                c.get(2).and_then(|m| m.as_str().parse().ok()),
                c.get(3),
                c.get(4),
                c.get(5).and_then(|m| m.as_str().parse::<u64>().ok()),
            ) else {
                continue;
            };
            if t.processes.len() < MAX_ROWS {
                if t.gpus.is_empty() && t.processes.is_empty() {
                    t.line = i + 1;
                }
                t.processes.push(ProcessRow {
                    gpu,
                    pid,
                    kind: kind.as_str().to_string(),
                    name: name.as_str().trim().to_string(),
                    used: used * MIB,
                });
            }
        }
    }
    (!t.gpus.is_empty() || !t.processes.is_empty()).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_rows_old_layout() {
        // yangjianxin1/GPT2-chitchat#19 (2020)
        let t = parse("|   0  Tesla V100-SXM2...  On   | 00000000:00:08.0 Off |                    0 |\n| N/A   54C    P0   246W / 300W |  15514MiB / 16130MiB |    100%      Default |\n+---+\n|   1  Tesla V100-SXM2...  On   | 00000000:00:09.0 Off |                    0 |\n| N/A   38C    P0    39W / 300W |      0MiB / 16130MiB |      0%      Default |\n").unwrap();
        assert_eq!(
            t.gpus,
            vec![
                GpuUse { index: 0, used: 15514 * MIB, total: 16130 * MIB },
                GpuUse { index: 1, used: 0, total: 16130 * MIB }
            ]
        );
        assert_eq!(t.line, 1);
    }

    #[test]
    fn process_rows_both_layouts() {
        // pytorch/pytorch#64130 (GI/CI columns) and apache/mxnet#4242 (older layout)
        let new = "|    0   N/A  N/A    331903      C   ...py3.6-torch1.8/bin/python     1733MiB |\n|    1   N/A  N/A    331904      C   ...py3.6-torch1.8/bin/python     1717MiB |";
        let t = parse(&format!("| Processes: |\n{new}")).unwrap();
        assert_eq!(t.processes.len(), 2);
        assert_eq!((t.processes[0].gpu, t.processes[0].pid, t.processes[0].used), (0, 331903, 1733 * MIB));
        assert_eq!(t.processes[0].name, "...py3.6-torch1.8/bin/python");
        let old = "| Processes:                                                       GPU Memory |\n|    0     31794    C   Unknown Error                                 5371MiB |\n|    1     13386    C   /xx/xxx/caffe             1205MiB |";
        let t = parse(old).unwrap();
        assert_eq!(
            t.processes[0],
            ProcessRow { gpu: 0, pid: 31794, kind: "C".into(), name: "Unknown Error".into(), used: 5371 * MIB }
        );
        assert_eq!(t.processes[1].name, "/xx/xxx/caffe");
        assert_eq!(t.processes_on(1).count(), 1);
    }

    #[test]
    fn no_table_no_value() {
        assert!(parse("RuntimeError: CUDA error: out of memory").is_none());
        assert!(parse("| 12MiB / x |").is_none());
    }
}
