//! safetensors file prefixes (length + header, with a claimed file size)
//! and index files: any bytes give a summary or an error, never a panic
//! or an overflowed size.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // the first 8 bytes pick the file size the prefix claims to come from
    let size = data.get(..8).map(|b| u64::from_le_bytes(b.try_into().unwrap())).unwrap_or(0);
    let rest = data.get(8..).unwrap_or(&[]);
    let _ = vramfit_ingest::safetensors::header_end(rest, Some(size), "fuzz");
    let _ = vramfit_ingest::safetensors::summary_from_prefix(rest, size, "fuzz");
    let _ = vramfit_ingest::safetensors::index_shards(rest, "fuzz");
});
