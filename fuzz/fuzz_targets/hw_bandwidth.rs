//! Bandwidth report parsers (`bandwidthTest`, `p2pBandwidthLatencyTest`,
//! nccl-tests) and their judgement: never panic; a parsed P2P report is
//! square; judging any parsed report against an empty machine never panics.
//! Body: `vramfit_fuzz::hw_bandwidth` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::hw_bandwidth(data));
