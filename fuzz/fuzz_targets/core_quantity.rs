//! Typed quantities (sizes and counts): any text gives a value or an error
//! naming the flag, never a panic; every accepted value reads back the same
//! when written as plain bytes or a plain count.
//! Body: `vramfit_fuzz::core_quantity` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::core_quantity(data));
