//! What a multi-node collective's bus bandwidth can reach over the fabric.
//!
//! nccl-tests reports busbw = algbw × 2(n−1)/n for all-reduce over n ranks
//! (doc/PERFORMANCE.md), "the speed of the hardware bottleneck". Across N
//! nodes with n ranks in all, each node sending at most B (its ports'
//! aggregate rate, one direction) over the fabric:
//!
//! - **ring**: every rank sends 2(n−1)/n × S bytes to its ring neighbour;
//!   each node has one outgoing crossing per ring, so with any number of
//!   rings a node sends 2(n−1)/n × S over the fabric: t ≥ 2(n−1)S / (nB),
//!   so busbw ≤ **B**.
//! - **tree / hierarchical**: reduce inside the node first; then the
//!   nodes need only exchange 2(N−1)/N × S each (reduce-scatter and
//!   all-gather among N nodes): busbw ≤ **B × N(n−1) / ((N−1)n)**. On 2
//!   nodes NCCL's double binary tree sends exactly that (S/2 per tree).
//! - **in-network reduction** (IB SHARP, NVLink SHARP across nodes): each
//!   node sends S once and receives the result once: busbw ≤ **B × 2(n−1)/n**.
//!
//! All-gather and reduce-scatter move (n−1)/n × S per rank: ring bound B.
//! All-to-all cannot aggregate a node's ports for one GPU: each GPU sends
//! (N−1)/N of its data across the fabric through its own port, so busbw ≤
//! **B/g × N/(N−1)** with g ranks per node (sjeaugey, NVIDIA/nccl-tests#130
//! and #267).

use serde::Serialize;

use crate::bandwidth::nccl::Collective;

/// One bound: its name, the formula as text, and the figure in GB/s.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bound {
    /// `ring`, `tree`, `in_network`, `per_gpu_port`
    pub kind: BoundKind,
    pub formula: String,
    pub gbs: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundKind {
    Ring,
    Tree,
    InNetwork,
    PerGpuPort,
}

impl BoundKind {
    pub fn label(self) -> &'static str {
        match self {
            BoundKind::Ring => "ring",
            BoundKind::Tree => "tree",
            BoundKind::InNetwork => "in-network",
            BoundKind::PerGpuPort => "per-GPU-port",
        }
    }
}

/// The bounds of a `collective` over `nodes` nodes and `ranks` ranks, each
/// node sending at most `node_gbs` GB/s (one direction) over the fabric.
/// The first bound is the one a healthy run is judged against.
pub fn bounds(collective: Collective, nodes: usize, ranks: usize, node_gbs: f64) -> Vec<Bound> {
    let (nn, n) = (nodes.max(2) as f64, ranks.max(2) as f64);
    let b = node_gbs;
    let fmt = |v: f64| format!("{v:.1}");
    match collective {
        Collective::AllReduce => vec![
            Bound { kind: BoundKind::Ring, formula: "B".into(), gbs: b },
            Bound {
                kind: BoundKind::Tree,
                formula: format!("B × N(n−1)/((N−1)n) = {} × {nn}·{}/({}·{n})", fmt(b), n - 1.0, nn - 1.0),
                gbs: b * nn * (n - 1.0) / ((nn - 1.0) * n),
            },
            Bound {
                kind: BoundKind::InNetwork,
                formula: format!("B × 2(n−1)/n = {} × 2·{}/{n}", fmt(b), n - 1.0),
                gbs: b * 2.0 * (n - 1.0) / n,
            },
        ],
        Collective::AllGather | Collective::ReduceScatter => {
            vec![Bound { kind: BoundKind::Ring, formula: "B".into(), gbs: b }]
        }
        Collective::AllToAll => {
            let g = (n / nn).max(1.0);
            vec![Bound {
                kind: BoundKind::PerGpuPort,
                formula: format!("B/g × N/(N−1) = {}/{g} × {nn}/{}", fmt(b), nn - 1.0),
                gbs: b / g * nn / (nn - 1.0),
            }]
        }
        Collective::Broadcast | Collective::Reduce | Collective::SendRecv => {
            vec![Bound { kind: BoundKind::Ring, formula: "B".into(), gbs: b }]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_nodes_of_eight() {
        // 8 × 200 Gb/s per node = 200 GB/s; 16 ranks on 2 nodes
        let b = bounds(Collective::AllReduce, 2, 16, 200.0);
        assert_eq!(b[0].gbs, 200.0);
        assert!((b[1].gbs - 375.0).abs() < 1e-9, "{}", b[1].gbs);
        assert!((b[2].gbs - 375.0).abs() < 1e-9);
        // many nodes: the tree bound tends to the ring bound, in-network stays at ~2B
        let b = bounds(Collective::AllReduce, 64, 512, 400.0);
        assert!(b[1].gbs < 410.0 && b[2].gbs > 790.0);
        // all-to-all on 2 nodes of 8: each GPU's port, doubled
        let a = bounds(Collective::AllToAll, 2, 16, 400.0);
        assert!((a[0].gbs - 100.0).abs() < 1e-9);
    }
}
