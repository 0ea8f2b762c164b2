//! Training-script lint: any text lints (tree-sitter is error tolerant)
//! without a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(src) = std::str::from_utf8(data) {
        let _ = vramfit_diagnose::lint::lint(src);
    }
});
