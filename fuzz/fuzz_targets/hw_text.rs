//! `nvidia-smi -q` and `nvidia-smi -L` text parsers: never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = vramfit_hw::text::parse_text(s, "fuzz.txt");
        let _ = vramfit_hw::list::parse_list(s, "fuzz.txt");
    }
});
