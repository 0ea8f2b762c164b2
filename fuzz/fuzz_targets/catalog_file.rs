//! A user catalogue file (`--catalog FILE`): GPUs, offers, discounts,
//! upgrades layered on the embedded ones. Must never panic: any input is a
//! catalogue or a `CatalogError` naming file, line and field.
//! Body: `vramfit_fuzz::catalog_file` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::catalog_file(data));
