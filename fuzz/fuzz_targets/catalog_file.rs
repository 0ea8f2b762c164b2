//! A user catalogue file (`--catalog FILE`): GPUs, offers, discounts,
//! upgrades layered on the embedded ones. Must never panic: any input is a
//! catalogue or a `CatalogError` naming file, line and field.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(cat) = vramfit_catalog::offers::load(Some((text, "fuzz.toml"))) {
            // every offer names a GPU that exists
            for o in &cat.book.offers {
                assert!(cat.gpus.iter().any(|g| g.id == o.gpu));
            }
        }
        let _ = vramfit_catalog::gpus::parse_gpus(text, "fuzz.toml");
    }
});
