//! config.json parser: any bytes give a ModelSpec or an error, and a
//! ModelSpec that parses always has a finite parameter count or an error.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(spec) = vramfit_ingest::config::parse_config(data, "fuzz") {
        let _ = vramfit_core::ParamLayout::of(&spec).and_then(|l| l.total());
        let _ = vramfit_core::estimate(&spec, &vramfit_core::Workload::default());
    }
});
