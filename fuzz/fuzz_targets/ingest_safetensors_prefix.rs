//! safetensors file prefixes (length + header, with a claimed file size)
//! and index files: any bytes give a summary or an error, never a panic
//! or an overflowed size.
//! Body: `vramfit_fuzz::ingest_safetensors_prefix` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::ingest_safetensors_prefix(data));
