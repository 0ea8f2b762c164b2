//! Published-measurement reader; a case that parses can be estimated without a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vramfit_core::accuracy::{estimate_quantity, CaseInput};

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(cases) = vramfit_ingest::calibration::published::parse_published_cases(text, "fuzz") {
            for c in cases {
                for cmp in &c.comparisons {
                    if let Ok(q) = &cmp.quantity {
                        let input = CaseInput { spec: c.spec.as_ref(), workload: c.workload.as_ref(), serving: None };
                        let _ = estimate_quantity(q, input);
                    }
                }
            }
        }
    }
});
