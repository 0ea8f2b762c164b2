//! Calibration case reader; a case that parses can be estimated without a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(cases) = vramfit_ingest::calibration::parse_cases(text, "fuzz") {
            for c in cases {
                if let Some(w) = &c.workload {
                    let _ = vramfit_core::estimate(&c.spec, w);
                }
            }
        }
    }
});
