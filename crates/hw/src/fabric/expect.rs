//! What fabric was rented: `--expect-fabric ib400`, `8xib400`, `roce200`.

use serde::Serialize;

use super::LinkLayer;

/// The fabric a node should have: per-port rate and link layer, and how
/// many such ports when the rental says.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct FabricExpectation {
    /// ports per node at that rate
    pub ports: Option<u32>,
    pub link_layer: LinkLayer,
    /// Gb/s per port
    pub rate_gbps: f64,
}

impl FabricExpectation {
    /// `8 × InfiniBand 400 Gb/s`
    pub fn describe(&self) -> String {
        let kind = match self.link_layer {
            LinkLayer::InfiniBand => "InfiniBand",
            _ => "RoCE (Ethernet)",
        };
        match self.ports {
            Some(n) => format!("{n} × {kind} {} Gb/s per node", self.rate_gbps),
            None => format!("{kind} {} Gb/s ports", self.rate_gbps),
        }
    }
}

/// `[COUNTx](ib|roce)RATE`: `ib400` (InfiniBand NDR, 400 Gb/s per port),
/// `8xib400` (eight such ports per node), `roce200` (RDMA over 200 Gb/s
/// Ethernet). The rate is the port's data rate in Gb/s as `ibstat` prints it.
pub fn parse_expect_fabric(s: &str) -> Result<FabricExpectation, String> {
    const FORMAT: &str = "expected [PORTSx](ib|roce)RATE with the rate in Gb/s per port, e.g. ib400, 8xib400, roce200";
    let t = s.trim().to_ascii_lowercase();
    let (ports, rest) = match t.split_once(['x', '×']) {
        Some((n, rest)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
            let n: u32 = n.parse().map_err(|_| format!("--expect-fabric {s}: port count too large; {FORMAT}"))?;
            if n == 0 || n > 64 {
                return Err(format!("--expect-fabric {s}: {n} ports per node; a node has 1 to 64; {FORMAT}"));
            }
            (Some(n), rest)
        }
        _ => (None, t.as_str()),
    };
    let (layer, rate) = if let Some(r) = rest.strip_prefix("roce") {
        (LinkLayer::Ethernet, r)
    } else if let Some(r) = rest.strip_prefix("ib") {
        (LinkLayer::InfiniBand, r)
    } else {
        return Err(format!("--expect-fabric {s}: {FORMAT}"));
    };
    let rate: f64 = rate.parse().map_err(|_| format!("--expect-fabric {s}: {FORMAT}"))?;
    if !(rate.is_finite() && (1.0..=3200.0).contains(&rate)) {
        return Err(format!("--expect-fabric {s}: {rate} Gb/s per port is not a port rate (1 to 3200); {FORMAT}"));
    }
    Ok(FabricExpectation { ports, link_layer: layer, rate_gbps: rate })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        let e = parse_expect_fabric("8xib400").unwrap();
        assert_eq!((e.ports, e.link_layer, e.rate_gbps), (Some(8), LinkLayer::InfiniBand, 400.0));
        let e = parse_expect_fabric("roce200").unwrap();
        assert_eq!((e.ports, e.link_layer, e.rate_gbps), (None, LinkLayer::Ethernet, 200.0));
        for bad in ["", "ib", "400", "ethernet400", "0xib400", "8xib", "ib-1", "ibNaN", "ib1e9", "xib400"] {
            assert!(parse_expect_fabric(bad).is_err(), "{bad}");
        }
    }
}
