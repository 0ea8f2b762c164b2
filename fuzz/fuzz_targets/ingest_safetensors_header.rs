//! safetensors header JSON: any bytes give a summary or an error.
//! Body: `vramfit_fuzz::ingest_safetensors_header` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::ingest_safetensors_header(data));
