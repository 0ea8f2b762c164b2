//! Bandwidth report parsers (`bandwidthTest`, `p2pBandwidthLatencyTest`,
//! nccl-tests) and their judgement: never panic; a parsed P2P report is
//! square; judging any parsed report against an empty machine never panics.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vramfit_hw::bandwidth::judge::{judge, Measurements};
use vramfit_hw::{Expectation, Machine};

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let mut m = Measurements::default();
    if let Ok(b) = vramfit_hw::bandwidth::bandwidth_test::parse_bandwidth_test(s, "f") {
        assert!(b.transfers.iter().all(|t| t.gbs.is_finite()));
        m.bandwidth_test = Some(("f".into(), b));
    }
    if let Ok(p) = vramfit_hw::bandwidth::p2p::parse_p2p(s, "f") {
        let n = p.size();
        assert!(p.matrices.iter().all(|x| x.values.len() == n && x.values.iter().all(|r| r.len() == n)));
        m.p2p = Some(("f".into(), p));
    }
    if let Ok(n) = vramfit_hw::bandwidth::nccl::parse_nccl(s, "f") {
        m.nccl = Some(("f".into(), n));
    }
    let e = Expectation { nvlink: true, ..Expectation::default() };
    let _ = judge(&m, &Machine::default(), &e, &[]);
});
