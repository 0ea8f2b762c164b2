//! Typed quantities (sizes and counts): any text gives a value or an error
//! naming the flag, never a panic; every accepted value reads back the same
//! when written as plain bytes or a plain count.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vramfit_core::quantity::{parse_count, parse_size};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match parse_size("--fuzz", text, 0..=u64::MAX) {
        Ok(v) if v >= 1024 => assert_eq!(parse_size("--fuzz", &format!("{v}B"), 0..=u64::MAX), Ok(v)),
        Ok(_) => {}
        Err(e) => assert!(e.to_string().starts_with("--fuzz: ")),
    }
    match parse_count("--fuzz", text, 0..=u64::MAX) {
        Ok(v) => assert_eq!(parse_count("--fuzz", &v.to_string(), 0..=u64::MAX), Ok(v)),
        Err(e) => assert!(e.to_string().starts_with("--fuzz: ")),
    }
});
