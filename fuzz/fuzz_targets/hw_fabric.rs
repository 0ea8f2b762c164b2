//! `ibstat`, `ibv_devinfo`, perftest and `--expect-fabric` parsers: never panic; rates finite.
//! Body: `vramfit_fuzz::hw_fabric` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::hw_fabric(data));
