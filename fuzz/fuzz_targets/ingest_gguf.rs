//! GGUF headers: any bytes (whole or as a prefix of a longer file) give a
//! header, a "need more bytes" answer or an error naming the field.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vramfit_ingest::gguf::{model_from_header, parse, Parsed};

fuzz_target!(|data: &[u8]| {
    let claimed = data.len() as u64 + (data.first().copied().unwrap_or(0) as u64) * 1024;
    if let Ok(Parsed::NeedMore { bytes }) = parse(data, claimed) {
        assert!(bytes > data.len() as u64);
    }
    if let Ok(Parsed::Complete(h)) = parse(data, data.len() as u64) {
        if let Ok(m) = model_from_header(&h, "fuzz") {
            let _ = vramfit_core::llamacpp::kv::context_size(&m, 4096, 1, false, 512, false);
        }
    }
});
