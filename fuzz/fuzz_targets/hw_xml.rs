//! `nvidia-smi -q -x` parser: never panics, whatever the bytes.
//! Body: `vramfit_fuzz::hw_xml` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::hw_xml(data));
