//! `nvidia-smi topo -m` parser: never panics; a parsed matrix is square.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(t) = vramfit_hw::topo::parse_topo(s, "fuzz.txt") {
            assert!(t.links.iter().all(|r| r.len() == t.gpus.len()));
            let _ = t.pairs();
        }
    }
});
