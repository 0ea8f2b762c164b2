//! `nvidia-smi mig -lgi`/`-lgip`/`-lgipp` parsers and the profile overlay: never panic.
//! Body: `vramfit_fuzz::hw_mig` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::hw_mig(data));
