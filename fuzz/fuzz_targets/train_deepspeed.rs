//! DeepSpeed config reader: any bytes give a config or a typed error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = vramfit_ingest::deepspeed::parse_deepspeed(data, "fuzz");
});
