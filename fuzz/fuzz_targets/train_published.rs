//! Published-measurement reader; a case that parses can be estimated without a panic.
//! Body: `vramfit_fuzz::train_published` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::train_published(data));
