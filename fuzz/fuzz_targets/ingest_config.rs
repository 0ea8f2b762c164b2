//! config.json parser: any bytes give a ModelSpec or an error, and a
//! ModelSpec that parses always has a finite parameter count or an error.
//! Body: `vramfit_fuzz::ingest_config` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::ingest_config(data));
