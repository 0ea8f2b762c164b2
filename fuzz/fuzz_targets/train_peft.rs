//! PEFT adapter_config.json reader: any bytes give a config or a typed error.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = vramfit_ingest::peft::parse_adapter_config(data, "fuzz");
});
