//! PEFT adapter_config.json reader: any bytes give a config or a typed error.
//! Body: `vramfit_fuzz::train_peft` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::train_peft(data));
