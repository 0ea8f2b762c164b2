//! safetensors header JSON: any bytes give a summary or an error.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = vramfit_ingest::safetensors::parse_header(data, "fuzz");
});
