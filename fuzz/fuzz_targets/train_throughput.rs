//! Published-throughput reader; a set that parses is compared with the time model without a panic.
//! Body: `vramfit_fuzz::train_throughput` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::train_throughput(data));
