//! GGUF headers: any bytes (whole or as a prefix of a longer file) give a
//! header, a "need more bytes" answer or an error naming the field; a
//! header that makes a model gives a llama.cpp plan or a typed error,
//! never a panic or an overflow.
//! Body: `vramfit_fuzz::ingest_gguf` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::ingest_gguf(data));
