//! The fleet check on one input (recognition, every parser, comparison, report): never panics.
//! Body: `vramfit_fuzz::hw_fleet` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::hw_fleet(data));
