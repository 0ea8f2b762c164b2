//! OOM text and memory_summary: any text is scanned, parsed and classified
//! without a panic; detection on raw bytes never panics either.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let input = vramfit_diagnose::Input::from_bytes("fuzz", data.to_vec());
    let _ = vramfit_diagnose::diagnose(&input, None);
    let text = String::from_utf8_lossy(data);
    for e in vramfit_diagnose::oom::scan(&text) {
        let _ = vramfit_diagnose::classify(&e);
    }
    if let Some(s) = vramfit_diagnose::summary::parse(&text) {
        let _ = s.verdict();
    }
});
