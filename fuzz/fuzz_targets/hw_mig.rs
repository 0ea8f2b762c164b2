//! `nvidia-smi mig -lgi`/`-lgip`/`-lgipp` parsers and the profile overlay: never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let _ = vramfit_hw::mig::parse_lgi(s, "fuzz");
    let pp = vramfit_hw::mig::parse_lgipp(s, "fuzz").ok();
    if let Ok(rows) = vramfit_hw::mig::parse_lgip(s, "fuzz") {
        if let Ok(tables) = vramfit_catalog::mig::builtin_mig_tables() {
            if let Some(t) = tables.first() {
                let _ =
                    vramfit_hw::mig::apply_profiles(&t.gpu, &rows, "fuzz", pp.as_ref().map(|p| (p.as_slice(), "fuzz")));
            }
        }
    }
});
