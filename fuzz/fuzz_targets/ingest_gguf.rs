//! GGUF headers: any bytes (whole or as a prefix of a longer file) give a
//! header, a "need more bytes" answer or an error naming the field; a
//! header that makes a model gives a llama.cpp plan or a typed error,
//! never a panic or an overflow.
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
            let opts = vramfit_core::llamacpp::LlamaCppOptions {
                ctx_size: 256,
                ubatch: 64,
                gpus: vec![vramfit_core::llamacpp::GpuSlot { name: "fuzz".into(), memory_bytes: 1 << 34 }],
                n_gpu_layers: Some(m.n_layer as u64 / 2),
                ..Default::default()
            };
            let _ = vramfit_core::llamacpp::plan(&m, &opts);
        }
    }
});
