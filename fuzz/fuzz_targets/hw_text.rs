//! `nvidia-smi -q` and `nvidia-smi -L` text parsers: never panic.
//! Body: `vramfit_fuzz::hw_text` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::hw_text(data));
