//! `nvidia-smi -q -x` parser: never panics, whatever the bytes.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = vramfit_hw::xml::parse_xml(s, "fuzz.xml");
    }
});
