//! Snapshot pickles: any bytes give a snapshot or an error, never a panic
//! or a hang; a snapshot that loads can always be analysed and drawn.
//! Body: `vramfit_fuzz::diagnose_pickle` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::diagnose_pickle(data));
