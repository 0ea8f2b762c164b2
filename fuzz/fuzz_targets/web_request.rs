//! The web page's request decoders: any body or query string gives a
//! request or an error for the client (400/413, naming the field), never a
//! panic; a decoded request becomes a command line that carries only the
//! endpoint's own flags and that clap parses or refuses without panicking.
//! Body: `vramfit_fuzz::web_request` (src/lib.rs), shared with the stable driver.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vramfit_fuzz::web_request(data));
