//! Generated snapshots for the benches: built by `make_big_snapshot.py`
//! (stdlib pickle, structure of torch.cuda.memory._dump_snapshot()) into
//! `target/bench-data/` once and reused; never committed.

use std::path::PathBuf;
use std::process::Command;

/// The generated snapshot of about `mb` MiB (pickle `protocol`), or why
/// there is none (no python3).
pub fn snapshot(mb: u64, protocol: u8) -> Result<PathBuf, String> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| manifest.join("../../target"));
    let dir = target.join("bench-data");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let script = manifest.join("benches/make_big_snapshot.py");
    // the file name carries the generator's hash: a changed generator builds anew
    let src = std::fs::read(&script).map_err(|e| format!("{}: {e}", script.display()))?;
    let hash = src.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    let path = dir.join(format!("snapshot-{mb}MiB-p{protocol}-{:08x}.pickle", hash as u32));
    if path.is_file() {
        return Ok(path);
    }
    eprintln!(
        "generating {} with python3 (a 1 GiB one takes several minutes and ~7 GB of Python memory)…",
        path.display()
    );
    let status = Command::new("python3")
        .arg(&script)
        .arg(&path)
        .arg(mb.to_string())
        .arg(protocol.to_string())
        .status()
        .map_err(|e| format!("python3 not available ({e}): the bench needs it to build the snapshot"))?;
    if !status.success() || !path.is_file() {
        return Err(format!("{} failed ({status})", script.display()));
    }
    Ok(path)
}
