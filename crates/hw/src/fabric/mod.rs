//! The fabric between machines: the HCAs each node has (`ibstat`,
//! `ibv_devinfo`), point-to-point RDMA tests between node pairs (perftest
//! `ib_write_bw`, `ib_read_bw`, `ib_send_lat`), and what a multi-node
//! collective may reach over it.
//!
//! - [`hca`]: `ibstat` and `ibv_devinfo` → [`hca::Hca`] (ports, state, rate, width, link layer)
//! - [`perftest`]: perftest bandwidth and latency reports
//! - [`expect`]: what was rented (`--expect-fabric 8xib400`)
//! - [`bounds`]: bus-bandwidth bounds of multi-node collectives (ring, tree, in-network)
//!
//! Rates are Gb/s (10^9 bits per second) as the tools print them; the
//! report converts to bytes per second.

pub mod bounds;
pub mod expect;
pub mod hca;
pub mod perftest;

use serde::Serialize;

/// The link layer of a port: InfiniBand, or Ethernet (RDMA over it is RoCE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkLayer {
    #[serde(rename = "infiniband")]
    InfiniBand,
    /// RoCE when RDMA runs over it (an HCA listed by `ibstat` is RDMA-capable)
    Ethernet,
    Unknown,
}

impl LinkLayer {
    pub fn parse(s: &str) -> LinkLayer {
        match s.trim() {
            "InfiniBand" | "IB" => LinkLayer::InfiniBand,
            "Ethernet" => LinkLayer::Ethernet,
            _ => LinkLayer::Unknown,
        }
    }

    /// How a report names it.
    pub fn label(self) -> &'static str {
        match self {
            LinkLayer::InfiniBand => "InfiniBand",
            LinkLayer::Ethernet => "Ethernet (RoCE)",
            LinkLayer::Unknown => "unknown link layer",
        }
    }
}

/// A rate cell in Gb/s: finite, positive, at most 100 000 (no port comes
/// near 100 Tb/s; a bigger figure is a damaged or edited file).
pub(crate) fn gbps(cell: &str) -> Option<f64> {
    let v: f64 = cell.trim().parse().ok()?;
    (v.is_finite() && v > 0.0 && v <= 100_000.0).then_some(v)
}
