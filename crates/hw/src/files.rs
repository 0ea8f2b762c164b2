//! Reading the files a user names, through the one bounded reader
//! (`vramfit-input`): regular files only (a FIFO or `/dev/zero` is refused
//! before it is opened), at most a byte cap read, UTF-8 BOM and UTF-16
//! (PowerShell's `nvidia-smi -q > f.txt` writes UTF-16LE) decoded.

use std::path::Path;

use crate::error::HwError;

/// Cap for nvidia-smi outputs: 16 MiB (a 16-GPU `-q -x` is ~1.5 MB).
pub const MAX_INPUT_BYTES: u64 = 16 << 20;
/// Cap for a bandwidth tool's output (`bandwidthTest`, `p2pBandwidthLatencyTest`,
/// `all_reduce_perf`): a few kB each; a range-mode bandwidthTest ~20 kB.
pub const MAX_BANDWIDTH_BYTES: u64 = 4 << 20;

/// Read a text file of at most `limit` bytes; `what` names the input kind
/// in errors ("`nvidia-smi -q -x` output").
pub fn read_kind(path: &Path, what: &str, limit: u64) -> Result<String, HwError> {
    Ok(vramfit_input::read_text(path, what, limit)?)
}

/// Read an nvidia-smi output file of at most `limit` bytes.
pub fn read_text(path: &Path, limit: u64) -> Result<String, HwError> {
    read_kind(path, "nvidia-smi output", limit)
}

/// Read a fleet folder for `check --fleet`: each sub-folder is a node
/// (named as the node), each regular file in it one output; files at the
/// top level are multi-node runs. Names starting with `.` are skipped.
/// Paths are reported relative to the folder (`node-a/all_reduce.txt`).
/// A file that cannot be read (too large, not text, not a regular file)
/// is listed with why, not an error: the rest of the fleet is checked.
pub fn read_fleet_dir(dir: &Path) -> Result<crate::fleet::FleetInput, HwError> {
    use crate::fleet::{FleetInput, NodeInput, Unreadable, MAX_FILES_PER_NODE, MAX_NODES};
    use crate::named::NamedText;
    let shown = dir.display().to_string();
    let bad = |what: String| HwError::Invalid { file: shown.clone(), what };
    if !dir.is_dir() {
        return Err(bad("not a folder: --fleet takes a folder with one sub-folder per node".into()));
    }
    let list = |d: &Path| -> Result<Vec<(String, std::path::PathBuf)>, HwError> {
        let rd = std::fs::read_dir(d)
            .map_err(|e| HwError::Invalid { file: d.display().to_string(), what: e.to_string() })?;
        let mut v: Vec<(String, std::path::PathBuf)> = rd
            .filter_map(|e| e.ok())
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .filter(|(n, _)| !n.starts_with('.'))
            .collect();
        v.sort();
        Ok(v)
    };
    let mut input = FleetInput { source: shown.clone(), ..FleetInput::default() };
    let read = |rel: String, p: &Path, input: &mut FleetInput| -> Option<NamedText> {
        match read_kind(p, "a node's tool output", MAX_INPUT_BYTES) {
            Ok(text) => Some(NamedText { name: rel, text }),
            Err(e) => {
                input.unreadable.push(Unreadable { path: rel, reason: crate::clean::escape_controls(&e.to_string()) });
                None
            }
        }
    };
    for (name, path) in list(dir)? {
        let rel_name = crate::clean::escape_controls(&name);
        if path.is_dir() {
            if input.nodes.len() == MAX_NODES {
                return Err(bad(format!("more than {MAX_NODES} node folders")));
            }
            let mut node = NodeInput { name: rel_name.clone(), files: Vec::new() };
            for (fname, fpath) in list(&path)? {
                let rel = format!("{rel_name}/{}", crate::clean::escape_controls(&fname));
                if fpath.is_dir() {
                    input
                        .unreadable
                        .push(Unreadable { path: rel, reason: "a folder inside a node folder is not read".into() });
                } else if node.files.len() == MAX_FILES_PER_NODE {
                    input.unreadable.push(Unreadable {
                        path: rel,
                        reason: format!("more than {MAX_FILES_PER_NODE} files in the node folder"),
                    });
                } else if let Some(t) = read(rel, &fpath, &mut input) {
                    node.files.push(t);
                }
            }
            input.nodes.push(node);
        } else if let Some(t) = read(rel_name, &path, &mut input) {
            input.top.push(t);
        }
    }
    if input.nodes.is_empty() {
        return Err(bad("no node folder: --fleet takes a folder with one sub-folder per node (the collection script writes one named after the host)".into()));
    }
    Ok(input)
}
