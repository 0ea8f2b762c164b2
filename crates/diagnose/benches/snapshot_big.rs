//! MB/s and peak RSS of `diagnose` on a generated 1 GiB snapshot:
//!
//!     cargo bench -p vramfit-diagnose --bench snapshot_big            # 1024 MiB
//!     VRAMFIT_SNAPSHOT_MIB=256 cargo bench -p vramfit-diagnose --bench snapshot_big
//!
//! Builds the snapshot once with python3 (benches/make_big_snapshot.py,
//! stdlib pickle) into target/bench-data/, then runs the measurement in a
//! fresh child process (so its peak RSS, `VmHWM`, is the decoder's alone):
//! open through vramfit-input, stream-decode, analyse, draw the SVG. The
//! targets (issue 14): ≥ 200 MB/s and peak RSS ≤ file size + 100 MB.

mod common;

use std::time::Instant;
use vramfit_diagnose::snapshot;

const MB: f64 = 1e6;

fn vm_hwm_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn measure(path: &str) {
    let t0 = Instant::now();
    let (f, len) = vramfit_input::open_regular(std::path::Path::new(path)).expect("open");
    let snap = snapshot::load_reader(f, len).expect("decodes");
    let decoded = t0.elapsed().as_secs_f64();
    let entries: usize = snap.traces.iter().map(|t| t.len()).sum();
    let (frames, stacks) = (snap.frames.len(), snap.stacks.len());
    let rss_decode = vm_hwm_bytes().unwrap_or(0);
    let t1 = Instant::now();
    let report = snap.analyze();
    let analyzed = t1.elapsed().as_secs_f64();
    let svg = vramfit_diagnose::svg::timeline(&report, "bench");
    let total = t0.elapsed().as_secs_f64();
    let rss = vm_hwm_bytes().unwrap_or(0);
    println!(
        "{{\"bytes\":{len},\"entries\":{entries},\"frames\":{frames},\"stacks\":{stacks},\"decode_s\":{decoded:.3},\"analyze_s\":{analyzed:.3},\"total_s\":{total:.3},\"peak_rss_after_decode\":{rss_decode},\"peak_rss\":{rss},\"svg_bytes\":{}}}",
        svg.len()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--measure") {
        measure(&args[i + 1]);
        return;
    }
    // `cargo bench` passes `--bench`; a filter argument is ignored
    let mib: u64 = std::env::var("VRAMFIT_SNAPSHOT_MIB").ok().and_then(|s| s.parse().ok()).unwrap_or(1024);
    let protocol: u8 = std::env::var("VRAMFIT_SNAPSHOT_PROTOCOL").ok().and_then(|s| s.parse().ok()).unwrap_or(4);
    let path = match common::snapshot(mib, protocol) {
        Ok(p) => p,
        Err(why) => {
            eprintln!("snapshot_big skipped: {why}");
            return;
        }
    };
    let exe = std::env::current_exe().expect("own path");
    let out = std::process::Command::new(exe).arg("--measure").arg(&path).output().expect("run the measurement");
    let line = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        eprintln!("measurement failed: {}", String::from_utf8_lossy(&out.stderr));
        std::process::exit(1);
    }
    let v: serde_json::Value = serde_json::from_str(line.trim()).expect("measurement line");
    let bytes = v["bytes"].as_f64().unwrap_or(0.0);
    let total = v["total_s"].as_f64().unwrap_or(f64::NAN);
    let decode = v["decode_s"].as_f64().unwrap_or(f64::NAN);
    let rss = v["peak_rss"].as_f64().unwrap_or(0.0);
    println!("snapshot_big: {} ({:.0} MB, protocol {protocol})", path.display(), bytes / MB);
    println!("  {} trace entries, {} unique frames, {} unique tracebacks", v["entries"], v["frames"], v["stacks"]);
    println!(
        "  decode {decode:.2} s = {:.0} MB/s; decode + analyse + SVG {total:.2} s = {:.0} MB/s",
        bytes / MB / decode,
        bytes / MB / total
    );
    println!(
        "  peak RSS {:.0} MB = {:.2} × the file (after decoding: {:.0} MB)",
        rss / MB,
        rss / bytes,
        v["peak_rss_after_decode"].as_f64().unwrap_or(0.0) / MB
    );
    let ok_speed = bytes / MB / total >= 200.0;
    let ok_rss = rss <= bytes + 100.0 * MB;
    println!(
        "  target ≥ 200 MB/s: {}; target peak RSS ≤ file + 100 MB: {}",
        if ok_speed { "met" } else { "MISSED" },
        if ok_rss { "met" } else { "MISSED" }
    );
}
