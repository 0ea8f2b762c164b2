//! Snapshot pickles: any bytes give a snapshot or an error, never a panic
//! or a hang; a snapshot that loads can always be analysed and drawn.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(snap) = vramfit_diagnose::snapshot::load(data) {
        let report = snap.analyze();
        let _ = vramfit_diagnose::svg::timeline(&report, "fuzz");
    }
});
