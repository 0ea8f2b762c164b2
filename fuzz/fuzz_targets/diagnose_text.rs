//! OOM text and memory_summary: any text is scanned, parsed and classified
//! without a panic; detection on raw bytes never panics either.
//! Body: `vramfit_fuzz::diagnose_text` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::diagnose_text(data));
