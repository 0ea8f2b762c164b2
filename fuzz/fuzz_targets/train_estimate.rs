//! Training estimate over arbitrary sizes and layouts: a ledger or an error, never a panic
//! or a wrapped number (categories always sum to the total).
//! Body: `vramfit_fuzz::train_estimate` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::train_estimate(data));
