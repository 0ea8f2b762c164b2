//! The web page's request decoders: any body or query string gives a
//! request or an error for the client (400/413, naming the field), never a
//! panic; a decoded request becomes a command line that carries only the
//! endpoint's own flags and that clap parses or refuses without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vramfit_cli::serve::request::{argv, decode_json, decode_query, Endpoint};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let ep = Endpoint::ALL[pick as usize % Endpoint::ALL.len()];
    let decoded = if pick & 0x80 == 0 {
        decode_json(ep, rest)
    } else {
        decode_query(ep, &String::from_utf8_lossy(rest))
    };
    match decoded {
        Ok(d) => {
            let args = argv(ep, &d);
            assert_eq!(args[0], "vramfit");
            let fields = ep.fields();
            let mut after_dashes = false;
            for a in &args[1 + ep.command().len()..] {
                if a == "--" {
                    after_dashes = true;
                    continue;
                }
                if after_dashes {
                    continue;
                }
                let name = a.trim_start_matches("--").split('=').next().unwrap().replace('-', "_");
                assert!(
                    name == "json" || name == "model" || fields.contains(&name.as_str()),
                    "{a} is not a field of /api/{}",
                    ep.name()
                );
            }
            let _ = <vramfit_cli::Cli as clap::Parser>::try_parse_from(&args);
        }
        Err(e) => assert!(e.status == 400 || e.status == 413, "{}: {}", e.status, e.message),
    }
});
