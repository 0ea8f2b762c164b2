//! `nvidia-smi topo -m` parser: never panics; a parsed matrix is square.
//! Body: `vramfit_fuzz::hw_topo` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::hw_topo(data));
