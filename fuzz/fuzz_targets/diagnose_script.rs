//! Training-script lint: any text lints (tree-sitter is error tolerant)
//! without a panic.
//! Body: `vramfit_fuzz::diagnose_script` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::diagnose_script(data));
