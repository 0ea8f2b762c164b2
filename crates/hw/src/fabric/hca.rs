//! The HCAs of a node: `ibstat` (infiniband-diags) and `ibv_devinfo`
//! (libibverbs), both → [`Hca`].
//!
//! `ibstat` prints per adapter `CA 'mlx5_0'`, then `\tCA type: MT4129`,
//! `\tFirmware version: …`, and per port `\tPort 1:` with `State: Active`,
//! `Physical state: LinkUp`, `Rate: 400` (Gb/s, the data rate: width ×
//! lane speed) and `Link layer: InfiniBand` (fixtures: leptonai/gpud
//! testdata, tests/fixtures/fabric/SOURCES.md). Indentation is tabs or
//! spaces as pasted.
//!
//! `ibv_devinfo` prints `hca_id:\tmlx5_0`, `fw_ver`, and per port
//! `port:\t1` with `state: PORT_ACTIVE (4)` and `link_layer`; with `-v`
//! also `active_width: 4X (2)` and `active_speed: 100.0 Gbps (128)`, the
//! rate being width × speed, and capability flags on continuation lines
//! (skipped).

use serde::Serialize;

use super::{gbps, LinkLayer};
use crate::clean::{escape_controls, normalize_newlines};
use crate::error::HwError;

/// Adapters accepted in one file (a node has 1–20).
pub const MAX_HCAS: usize = 256;
/// Ports accepted per adapter (real ones have 1 or 2).
pub const MAX_PORTS: usize = 16;

/// A port's logical state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PortState {
    Active,
    Down,
    /// `Initializing` / `PORT_INIT`: up, no subnet manager has configured it
    Init,
    Armed,
    Unknown,
}

impl PortState {
    fn parse(s: &str) -> PortState {
        let word = s.split_whitespace().next().unwrap_or("");
        match word {
            "Active" | "PORT_ACTIVE" => PortState::Active,
            "Down" | "PORT_DOWN" => PortState::Down,
            "Initializing" | "Init" | "PORT_INIT" => PortState::Init,
            "Armed" | "PORT_ARMED" => PortState::Armed,
            _ => PortState::Unknown,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            PortState::Active => "Active",
            PortState::Down => "Down",
            PortState::Init => "Initializing (no subnet manager has configured it)",
            PortState::Armed => "Armed",
            PortState::Unknown => "unknown state",
        }
    }
}

/// One port of an adapter.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HcaPort {
    pub port: u32,
    pub state: PortState,
    /// `LinkUp`, `Disabled`, `Polling` (`ibstat`), `LINK_UP` (`ibv_devinfo -v`)
    pub physical_state: Option<String>,
    /// data rate, Gb/s (`ibstat` `Rate`, or width × lane speed)
    pub rate_gbps: Option<f64>,
    /// lanes (`4X` → 4), when the source says
    pub width: Option<u32>,
    /// per-lane speed, Gb/s, when the source says
    pub lane_gbps: Option<f64>,
    pub link_layer: LinkLayer,
}

/// One adapter (`mlx5_0`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hca {
    pub name: String,
    /// `MT4129` (ConnectX-7), from `ibstat`
    pub ca_type: Option<String>,
    pub firmware: Option<String>,
    pub ports: Vec<HcaPort>,
}

impl HcaPort {
    fn new(port: u32) -> HcaPort {
        HcaPort {
            port,
            state: PortState::Unknown,
            physical_state: None,
            rate_gbps: None,
            width: None,
            lane_gbps: None,
            link_layer: LinkLayer::Unknown,
        }
    }
}

fn text_value(v: &str) -> String {
    escape_controls(&v.trim().chars().take(80).collect::<String>())
}

/// Lines tools and shells add around the output: an `ibwarn:`/`ibpanic:`
/// from infiniband-diags, a shell prompt before the command.
fn is_noise(t: &str) -> bool {
    t.starts_with("ibwarn:") || t.starts_with("ibpanic:") || t.starts_with("ibstat:") || t.starts_with('$')
}

/// Parse `ibstat` output.
pub fn parse_ibstat(text: &str, file: &str) -> Result<Vec<Hca>, HwError> {
    let text = normalize_newlines(text);
    let mut hcas: Vec<Hca> = Vec::new();
    let mut in_port = false;
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let t = raw.trim();
        if t.is_empty() || is_noise(t) {
            continue;
        }
        if let Some(rest) = t.strip_prefix("CA '") {
            let name = rest.strip_suffix('\'').filter(|n| !n.is_empty() && n.len() <= 64);
            let Some(name) = name else {
                return Err(HwError::syntax(file, ln, "`CA '<adapter name>'`", raw));
            };
            if hcas.len() == MAX_HCAS {
                return Err(HwError::invalid(file, format!("more than {MAX_HCAS} adapters")));
            }
            hcas.push(Hca { name: text_value(name), ca_type: None, firmware: None, ports: Vec::new() });
            in_port = false;
            continue;
        }
        let Some(hca) = hcas.last_mut() else {
            // before the first adapter: a command line or a banner
            continue;
        };
        if let Some(n) = t.strip_prefix("Port ").and_then(|r| r.strip_suffix(':')) {
            let port: u32 = n.trim().parse().map_err(|_| HwError::syntax(file, ln, "`Port <number>:`", raw))?;
            if hca.ports.len() == MAX_PORTS {
                return Err(HwError::invalid(file, format!("{}: more than {MAX_PORTS} ports", hca.name)));
            }
            hca.ports.push(HcaPort::new(port));
            in_port = true;
            continue;
        }
        let Some((key, value)) = t.split_once(':') else {
            return Err(HwError::syntax(file, ln, "`Label: value`, `Port <n>:` or `CA '<name>'`", raw));
        };
        let value = value.trim();
        match (in_port, key.trim()) {
            (false, "CA type") => hca.ca_type = Some(text_value(value)).filter(|v| !v.is_empty()),
            (false, "Firmware version") => hca.firmware = Some(text_value(value)).filter(|v| !v.is_empty()),
            (true, k) => {
                let Some(p) = hca.ports.last_mut() else { continue };
                match k {
                    "State" => p.state = PortState::parse(value),
                    "Physical state" => p.physical_state = Some(text_value(value)),
                    "Rate" => {
                        p.rate_gbps = Some(gbps(value).ok_or_else(|| HwError::syntax(file, ln, "`Rate: <Gb/s>`", raw))?)
                    }
                    "Link layer" => p.link_layer = LinkLayer::parse(value),
                    _ => {}
                }
            }
            _ => {}
        }
    }
    if hcas.is_empty() {
        if let Some(e) = crate::foreign::refuse(&text, file, "ibstat") {
            return Err(e);
        }
        return Err(HwError::invalid(file, "no `CA '<name>'` adapter; is this `ibstat` output?"));
    }
    Ok(hcas)
}

/// `4X (2)` → 4.
fn width(v: &str) -> Option<u32> {
    let w: u32 = v.split_whitespace().next()?.strip_suffix('X')?.parse().ok()?;
    (1..=32).contains(&w).then_some(w)
}

/// `100.0 Gbps (128)` → 100.0.
fn lane_speed(v: &str) -> Option<f64> {
    let mut it = v.split_whitespace();
    let n = it.next()?;
    (it.next() == Some("Gbps")).then_some(())?;
    gbps(n)
}

/// Parse `ibv_devinfo` (or `ibv_devinfo -v`) output.
pub fn parse_ibv_devinfo(text: &str, file: &str) -> Result<Vec<Hca>, HwError> {
    let text = normalize_newlines(text);
    let mut hcas: Vec<Hca> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let t = raw.trim();
        // capability flags on continuation lines, GID tables: no `key:\tvalue` of ours
        let Some((key, value)) = t.split_once(':') else { continue };
        let (key, value) = (key.trim(), value.trim());
        if key == "hca_id" {
            if value.is_empty() || value.len() > 64 {
                return Err(HwError::syntax(file, ln, "`hca_id:\t<adapter name>`", raw));
            }
            if hcas.len() == MAX_HCAS {
                return Err(HwError::invalid(file, format!("more than {MAX_HCAS} adapters")));
            }
            hcas.push(Hca { name: text_value(value), ca_type: None, firmware: None, ports: Vec::new() });
            continue;
        }
        let Some(hca) = hcas.last_mut() else { continue };
        match key {
            "fw_ver" => hca.firmware = Some(text_value(value)).filter(|v| !v.is_empty()),
            "port" => {
                let port: u32 = value.parse().map_err(|_| HwError::syntax(file, ln, "`port:\t<number>`", raw))?;
                if hca.ports.len() == MAX_PORTS {
                    return Err(HwError::invalid(file, format!("{}: more than {MAX_PORTS} ports", hca.name)));
                }
                hca.ports.push(HcaPort::new(port));
            }
            _ => {
                let Some(p) = hca.ports.last_mut() else { continue };
                match key {
                    "state" => p.state = PortState::parse(value),
                    "phys_state" => p.physical_state = value.split_whitespace().next().map(text_value),
                    "link_layer" => p.link_layer = LinkLayer::parse(value),
                    "active_width" => {
                        p.width = Some(
                            width(value)
                                .ok_or_else(|| HwError::syntax(file, ln, "`active_width: <lanes>X (<code>)`", raw))?,
                        )
                    }
                    "active_speed" => {
                        p.lane_gbps =
                            Some(lane_speed(value).ok_or_else(|| {
                                HwError::syntax(file, ln, "`active_speed: <Gb/s> Gbps (<code>)`", raw)
                            })?)
                    }
                    _ => {}
                }
                if let (Some(w), Some(s)) = (p.width, p.lane_gbps) {
                    p.rate_gbps = Some(w as f64 * s);
                }
            }
        }
    }
    if hcas.is_empty() {
        if let Some(e) = crate::foreign::refuse(&text, file, "ibv_devinfo") {
            return Err(e);
        }
        return Err(HwError::invalid(file, "no `hca_id:` adapter; is this `ibv_devinfo` output?"));
    }
    Ok(hcas)
}

/// Merge two readings of a node's adapters (`ibstat` and `ibv_devinfo`):
/// adapters and ports matched by name and number, fields this one lacks
/// filled from `other`.
pub fn merge(into: &mut Vec<Hca>, other: Vec<Hca>) {
    for h in other {
        match into.iter_mut().find(|x| x.name == h.name) {
            None => into.push(h),
            Some(x) => {
                x.ca_type = x.ca_type.take().or(h.ca_type);
                x.firmware = x.firmware.take().or(h.firmware);
                for p in h.ports {
                    match x.ports.iter_mut().find(|q| q.port == p.port) {
                        None => x.ports.push(p),
                        Some(q) => {
                            if q.state == PortState::Unknown {
                                q.state = p.state;
                            }
                            q.physical_state = q.physical_state.take().or(p.physical_state);
                            q.rate_gbps = q.rate_gbps.or(p.rate_gbps);
                            q.width = q.width.or(p.width);
                            q.lane_gbps = q.lane_gbps.or(p.lane_gbps);
                            if q.link_layer == LinkLayer::Unknown {
                                q.link_layer = p.link_layer;
                            }
                        }
                    }
                }
            }
        }
    }
}
