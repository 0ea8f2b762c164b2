//! CUDA samples `p2pBandwidthLatencyTest` output.
//!
//! Layout (cuda-samples `Samples/5_Domain_Specific/p2pBandwidthLatencyTest`;
//! fixtures in tests/fixtures/bandwidth): `Device: 0, <name>, pciBusID: …`
//! lines, `Device=0 CAN Access Peer Device=1` (or `CANNOT`) lines, a `P2P
//! Connectivity Matrix` of 0/1, then bandwidth matrices, each a title
//! (`Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)`), a
//! header `D\D  0  1 …` and one row per device; latency matrices (`(us)`)
//! follow and are skipped. Any subset may be pasted; each matrix present
//! must be complete and square.

use serde::Serialize;

use super::rate;
use crate::clean::{escape_controls, normalize_newlines};
use crate::error::HwError;
use crate::machine::MAX_GPUS;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatrixKind {
    /// copies staged through the host (no peer access)
    UnidirectionalDisabled,
    /// peer writes (`P2P=Enabled Bandwidth (P2P Writes)`; older releases: no suffix)
    UnidirectionalWrites,
    /// peer reads (`--p2p_read`)
    UnidirectionalReads,
    BidirectionalDisabled,
    /// both directions at once: the sum of the two
    BidirectionalEnabled,
}

impl MatrixKind {
    fn from_title(t: &str) -> Option<MatrixKind> {
        if !t.contains("Bandwidth") || !t.contains("Matrix") {
            return None;
        }
        let enabled = t.contains("P2P=Enabled");
        Some(match (t.starts_with("Bidirectional"), enabled) {
            (false, false) if t.starts_with("Unidirectional") => MatrixKind::UnidirectionalDisabled,
            (false, true) if t.contains("P2P Reads") => MatrixKind::UnidirectionalReads,
            (false, true) => MatrixKind::UnidirectionalWrites,
            (true, false) => MatrixKind::BidirectionalDisabled,
            (true, true) => MatrixKind::BidirectionalEnabled,
            _ => return None,
        })
    }

    pub fn label(self) -> &'static str {
        match self {
            MatrixKind::UnidirectionalDisabled => "unidirectional, P2P disabled",
            MatrixKind::UnidirectionalWrites => "unidirectional, P2P writes",
            MatrixKind::UnidirectionalReads => "unidirectional, P2P reads",
            MatrixKind::BidirectionalDisabled => "bidirectional, P2P disabled",
            MatrixKind::BidirectionalEnabled => "bidirectional, P2P enabled",
        }
    }
}

/// One bandwidth matrix, GB/s; `values[i][j]` from device i to device j.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Matrix {
    pub kind: MatrixKind,
    pub values: Vec<Vec<f64>>,
}

/// A parsed `p2pBandwidthLatencyTest` report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct P2pTest {
    /// `Device: N, <name>` lines, names escaped
    pub devices: Vec<String>,
    /// peer access i→j from the `CAN`/`CANNOT` lines or the connectivity matrix
    pub access: Vec<Vec<Option<bool>>>,
    pub matrices: Vec<Matrix>,
}

impl P2pTest {
    /// Devices the report covers.
    pub fn size(&self) -> usize {
        self.matrices.first().map(|m| m.values.len()).unwrap_or(self.devices.len())
    }

    pub fn matrix(&self, k: MatrixKind) -> Option<&Matrix> {
        self.matrices.iter().find(|m| m.kind == k)
    }

    /// The peer-to-peer rate of pair (a, b), one direction, GB/s: the slower
    /// direction of the unidirectional P2P matrix (writes, else reads), else
    /// half the bidirectional P2P figure; with the matrix it came from.
    pub fn pair_gbs(&self, a: usize, b: usize) -> Option<(f64, MatrixKind)> {
        for k in [MatrixKind::UnidirectionalWrites, MatrixKind::UnidirectionalReads] {
            if let Some(m) = self.matrix(k) {
                return Some((m.values[a][b].min(m.values[b][a]), k));
            }
        }
        let m = self.matrix(MatrixKind::BidirectionalEnabled)?;
        Some((m.values[a][b].min(m.values[b][a]) / 2.0, MatrixKind::BidirectionalEnabled))
    }
}

enum State {
    Free,
    Connectivity { header: bool, rows: usize, n: usize },
    Bandwidth { kind: MatrixKind, header: bool, values: Vec<Vec<f64>>, n: usize },
    Latency,
}

/// `D\D 0 1 … n-1` → n.
fn header_size(toks: &[&str], file: &str, ln: usize, raw: &str) -> Result<usize, HwError> {
    if toks.first() != Some(&"D\\D") {
        return Err(HwError::syntax(file, ln, "a `D\\D 0 1 …` header", raw));
    }
    let n = toks.len() - 1;
    if n == 0 || n > MAX_GPUS || toks[1..].iter().enumerate().any(|(k, t)| t.parse::<usize>() != Ok(k)) {
        return Err(HwError::syntax(file, ln, format!("column labels 0 1 … (at most {MAX_GPUS})"), raw));
    }
    Ok(n)
}

/// Parse `p2pBandwidthLatencyTest` output.
pub fn parse_p2p(text: &str, file: &str) -> Result<P2pTest, HwError> {
    let text = normalize_newlines(text);
    let mut devices: Vec<String> = Vec::new();
    let mut can: Vec<(usize, usize, bool)> = Vec::new();
    let mut conn: Vec<Vec<u8>> = Vec::new();
    let mut matrices: Vec<Matrix> = Vec::new();
    let mut state = State::Free;
    let lines: Vec<&str> = text.lines().collect();
    for (i, raw) in lines.iter().chain(std::iter::once(&"")).enumerate() {
        let ln = i + 1;
        let t = raw.trim();
        let toks: Vec<&str> = t.split_whitespace().collect();
        // A matrix ends at its last row; close it before reading a new title.
        if let State::Bandwidth { kind, header: true, values, n } = &mut state {
            if values.len() == *n {
                matrices.push(Matrix { kind: *kind, values: std::mem::take(values) });
                state = State::Free;
            } else if !t.is_empty() && toks.first().and_then(|f| f.parse::<usize>().ok()) != Some(values.len()) {
                return Err(HwError::syntax(file, ln, format!("row {} of a {n}×{n} matrix", values.len()), raw));
            }
        }
        if let State::Connectivity { header: true, rows, n } = state {
            if rows == n {
                state = State::Free;
            }
        }
        if t.is_empty() {
            continue;
        }
        if let Some(kind) = MatrixKind::from_title(t) {
            if matches!(state, State::Bandwidth { .. }) {
                return Err(HwError::syntax(file, ln, "the rows of the previous matrix", raw));
            }
            if matrices.iter().any(|m| m.kind == kind) {
                return Err(HwError::syntax(file, ln, format!("one {} matrix", kind.label()), raw));
            }
            state = State::Bandwidth { kind, header: false, values: Vec::new(), n: 0 };
            continue;
        }
        if t.contains("Latency") && t.contains("Matrix") {
            if matches!(state, State::Bandwidth { .. }) {
                return Err(HwError::syntax(file, ln, "the rows of the previous matrix", raw));
            }
            state = State::Latency;
            continue;
        }
        if t == "P2P Connectivity Matrix" {
            state = State::Connectivity { header: false, rows: 0, n: 0 };
            continue;
        }
        match &mut state {
            State::Bandwidth { header, n, values, .. } => {
                if !*header {
                    *n = header_size(&toks, file, ln, raw)?;
                    *header = true;
                    continue;
                }
                if toks.len() != *n + 1 {
                    return Err(HwError::syntax(file, ln, format!("a row label and {n} values"), raw));
                }
                let row = toks[1..].iter().map(|c| rate(c, 1.0, file, ln, raw)).collect::<Result<Vec<f64>, _>>()?;
                values.push(row);
                continue;
            }
            State::Connectivity { header, rows, n } => {
                if !*header {
                    *n = header_size(&toks, file, ln, raw)?;
                    *header = true;
                    conn = Vec::with_capacity(*n);
                    continue;
                }
                let ok = toks.len() == *n + 1
                    && toks[0].parse::<usize>() == Ok(*rows)
                    && toks[1..].iter().all(|c| *c == "0" || *c == "1");
                if !ok {
                    return Err(HwError::syntax(
                        file,
                        ln,
                        format!("row {rows} of the connectivity matrix: {n} cells of 0 or 1"),
                        raw,
                    ));
                }
                conn.push(toks[1..].iter().map(|c| u8::from(*c == "1")).collect());
                *rows += 1;
                continue;
            }
            State::Latency => {
                // GPU/CPU sub-matrices: numbers and labels until the next title
                if toks.first().is_some_and(|f| matches!(*f, "GPU" | "CPU" | "D\\D") || f.parse::<usize>().is_ok()) {
                    continue;
                }
                state = State::Free;
            }
            State::Free => {}
        }
        if let Some(rest) = t.strip_prefix("Device:") {
            devices.push(device_line(rest, devices.len(), file, ln, raw)?);
            continue;
        }
        if let Some(rest) = t.strip_prefix("Device=") {
            can.push(peer_access_line(rest, file, ln, raw)?);
        }
    }
    if let State::Bandwidth { kind, values, n, .. } = state {
        if values.len() != n || n == 0 {
            return Err(HwError::invalid(
                file,
                format!("the {} matrix is cut: {} of {n} rows", kind.label(), values.len()),
            ));
        }
    }
    let n = matrix_size(&matrices, devices.len(), &text, file)?;
    let access = access_matrix(n, &conn, &can);
    Ok(P2pTest { devices, access, matrices })
}

/// `Device: 0, NVIDIA A100-SXM-80GB, pciBusID: e, …`: the name of device
/// `next` (devices are listed in order).
fn device_line(rest: &str, next: usize, file: &str, ln: usize, raw: &str) -> Result<String, HwError> {
    let mut parts = rest.splitn(3, ',');
    let idx = parts.next().and_then(|n| n.trim().parse::<usize>().ok());
    let name = parts.next().map(str::trim).filter(|n| !n.is_empty());
    match (idx, name) {
        (Some(k), Some(name)) if k == next && k < MAX_GPUS => Ok(escape_controls(name)),
        _ => Err(HwError::syntax(file, ln, format!("`Device: {next}, <name>, pciBusID: …`"), raw)),
    }
}

/// `Device=0 CAN Access Peer Device=1`: (a, b, whether a can access b).
fn peer_access_line(rest: &str, file: &str, ln: usize, raw: &str) -> Result<(usize, usize, bool), HwError> {
    let w: Vec<&str> = rest.split_whitespace().collect();
    let parsed = match w.as_slice() {
        [a, verb, "Access", "Peer", b] => {
            let b = b.strip_prefix("Device=").and_then(|x| x.parse::<usize>().ok());
            match (a.parse::<usize>().ok(), b, *verb) {
                (Some(a), Some(b), "CAN") => Some((a, b, true)),
                (Some(a), Some(b), "CANNOT") => Some((a, b, false)),
                _ => None,
            }
        }
        _ => None,
    };
    match parsed {
        Some((a, b, ok)) if a < MAX_GPUS && b < MAX_GPUS => Ok((a, b, ok)),
        _ => Err(HwError::syntax(file, ln, "`Device=<a> CAN|CANNOT Access Peer Device=<b>`", raw)),
    }
}

/// The devices every matrix covers: at least one matrix, all of one size,
/// and as many as the `Device:` lines (when there are any).
fn matrix_size(matrices: &[Matrix], devices: usize, text: &str, file: &str) -> Result<usize, HwError> {
    if matrices.is_empty() {
        if let Some(e) = crate::foreign::refuse(text, file, "--p2p") {
            return Err(e);
        }
        return Err(HwError::invalid(
            file,
            "no bandwidth matrix (`Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)`); \
             is this CUDA samples `p2pBandwidthLatencyTest` output?",
        ));
    }
    let n = matrices[0].values.len();
    if let Some(m) = matrices.iter().find(|m| m.values.len() != n) {
        return Err(HwError::invalid(
            file,
            format!(
                "matrices of different sizes: {n} devices, but the {} matrix has {}",
                m.kind.label(),
                m.values.len()
            ),
        ));
    }
    if devices != 0 && devices != n {
        return Err(HwError::invalid(file, format!("{devices} `Device:` lines but {n}×{n} matrices")));
    }
    Ok(n)
}

/// Who can access whom: the connectivity matrix (when complete), then the
/// `CAN`/`CANNOT Access Peer` lines over it.
fn access_matrix(n: usize, conn: &[Vec<u8>], can: &[(usize, usize, bool)]) -> Vec<Vec<Option<bool>>> {
    let mut access = vec![vec![None; n]; n];
    if conn.len() == n {
        for (a, row) in conn.iter().enumerate() {
            for (b, v) in row.iter().enumerate().take(n) {
                access[a][b] = Some(*v == 1);
            }
        }
    }
    for &(a, b, ok) in can {
        if a < n && b < n {
            access[a][b] = Some(ok);
        }
    }
    access
}
