//! The fuzz targets' bodies, one function per target, shared by the
//! libFuzzer binaries (`fuzz_targets/*.rs`, nightly `cargo fuzz run`) and
//! the stable driver (`examples/fuzz_stable.rs`, run by `.ci/run`), so both
//! exercise exactly the same checks. Each function must never panic on any
//! input: a panic is a bug in the parser (or in the property it asserts).

use vramfit_core::train::{Checkpointing, Optimizer, Precision, TrainKind};
use vramfit_core::{estimate, ModelSpec, Parallelism, Sharding, Task, TrainSetup, Workload};

/// Every target: its name (the file `fuzz_targets/NAME.rs`) and its body.
pub const TARGETS: &[(&str, fn(&[u8]))] = &[
    ("catalog_file", catalog_file),
    ("core_quantity", core_quantity),
    ("diagnose_pickle", diagnose_pickle),
    ("diagnose_script", diagnose_script),
    ("diagnose_text", diagnose_text),
    ("hw_bandwidth", hw_bandwidth),
    ("hw_fabric", hw_fabric),
    ("hw_fleet", hw_fleet),
    ("hw_mig", hw_mig),
    ("hw_text", hw_text),
    ("hw_topo", hw_topo),
    ("hw_xml", hw_xml),
    ("ingest_config", ingest_config),
    ("ingest_gguf", ingest_gguf),
    ("ingest_safetensors_header", ingest_safetensors_header),
    ("ingest_safetensors_prefix", ingest_safetensors_prefix),
    ("train_calibration", train_calibration),
    ("train_published", train_published),
    ("train_throughput", train_throughput),
    ("web_request", web_request),
    ("train_deepspeed", train_deepspeed),
    ("train_estimate", train_estimate),
    ("train_peft", train_peft),
];

/// The body of the target `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// A user catalogue file (`--catalog FILE`): GPUs, offers, discounts,
/// upgrades layered on the embedded ones. Any input is a catalogue or a
/// `CatalogError` naming file, line and field; every offer of a catalogue
/// that loads names a GPU that exists. The user layer of
/// `offers::load`, with the embedded catalogue parsed once (parsing it for
/// every input made this target 100× slower than the rest).
pub fn catalog_file(data: &[u8]) {
    use vramfit_catalog::gpus::{builtin_gpus, merge_gpus, parse_gpus};
    use vramfit_catalog::offers::parse_offers;
    static BUILTIN: std::sync::OnceLock<Vec<vramfit_core::GpuSpec>> = std::sync::OnceLock::new();
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(user_gpus) = parse_gpus(text, "fuzz.toml") else { return };
    let base = BUILTIN.get_or_init(|| builtin_gpus().unwrap_or_default()).clone();
    let gpus = merge_gpus(base, user_gpus, false);
    if let Ok(contents) = parse_offers(text, "fuzz.toml", &gpus) {
        for o in &contents.book.offers {
            assert!(gpus.iter().any(|g| g.id == o.gpu), "offer {} names no known GPU", o.id);
        }
    }
}

/// Typed quantities (sizes and counts): any text gives a value or an error
/// naming the flag; every accepted value reads back the same when written
/// as plain bytes or a plain count.
pub fn core_quantity(data: &[u8]) {
    use vramfit_core::quantity::{parse_count, parse_size, parse_tokens};
    let Ok(text) = std::str::from_utf8(data) else { return };
    match parse_size("--fuzz", text, 0..=u64::MAX) {
        Ok(v) if v >= 1024 => assert_eq!(parse_size("--fuzz", &format!("{v}B"), 0..=u64::MAX), Ok(v)),
        Ok(_) => {}
        Err(e) => assert!(e.to_string().starts_with("--fuzz: ")),
    }
    match parse_count("--fuzz", text, 0..=u64::MAX) {
        Ok(v) => assert_eq!(parse_count("--fuzz", &v.to_string(), 0..=u64::MAX), Ok(v)),
        Err(e) => assert!(e.to_string().starts_with("--fuzz: ")),
    }
    match parse_tokens("--fuzz", text, 0..=u64::MAX) {
        Ok(v) => assert_eq!(parse_tokens("--fuzz", &v.to_string(), 0..=u64::MAX), Ok(v)),
        Err(e) => assert!(e.to_string().starts_with("--fuzz: ")),
    }
}

/// Snapshot pickles: any bytes give a snapshot or an error; a snapshot that
/// loads can always be analysed and drawn.
pub fn diagnose_pickle(data: &[u8]) {
    if let Ok(snap) = vramfit_diagnose::snapshot::load(data) {
        let report = snap.analyze();
        let _ = vramfit_diagnose::svg::timeline(&report, "fuzz");
    }
}

/// Training-script lint: any text lints (tree-sitter is error tolerant).
pub fn diagnose_script(data: &[u8]) {
    if let Ok(src) = std::str::from_utf8(data) {
        let _ = vramfit_diagnose::lint::lint(src);
    }
}

/// OOM text and memory_summary: any text is scanned, parsed and
/// classified; detection on raw bytes never panics either.
pub fn diagnose_text(data: &[u8]) {
    let input = vramfit_diagnose::Input::from_bytes("fuzz", data.to_vec());
    let _ = vramfit_diagnose::diagnose(&input, None);
    let text = String::from_utf8_lossy(data);
    for e in vramfit_diagnose::oom::scan(&text) {
        let v = vramfit_diagnose::classify(&e);
        // the deciding figures are figures of the verdict; the runner-up is another cause
        assert!(v.decided_by.iter().all(|n| v.figures.iter().any(|f| &f.name == n)), "{v:?}");
        assert!(v.runner_up.as_ref().is_none_or(|r| r.class != v.class), "{v:?}");
    }
    if let Some(s) = vramfit_diagnose::summary::parse(&text) {
        let _ = s.verdict();
    }
}

/// Bandwidth report parsers (`bandwidthTest`, `p2pBandwidthLatencyTest`,
/// nccl-tests) and their judgement: a parsed P2P report is square; judging
/// any parsed report against an empty machine never panics.
pub fn hw_bandwidth(data: &[u8]) {
    use vramfit_hw::bandwidth::judge::{judge, Measurements};
    use vramfit_hw::{Expectation, Machine};
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
}

/// `nvidia-smi mig -lgi`/`-lgip`/`-lgipp` parsers and the profile overlay.
pub fn hw_mig(data: &[u8]) {
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
}

/// The fabric parsers (`ibstat`, `ibv_devinfo`, perftest) and the
/// `--expect-fabric` parser: ports and rows within their caps, every rate
/// finite and positive, every bound of a parsed expectation finite.
pub fn hw_fabric(data: &[u8]) {
    use vramfit_hw::fabric::hca::{parse_ibstat, parse_ibv_devinfo, MAX_HCAS, MAX_PORTS};
    let Ok(s) = std::str::from_utf8(data) else { return };
    for parsed in [parse_ibstat(s, "fuzz"), parse_ibv_devinfo(s, "fuzz")] {
        if let Ok(h) = parsed {
            assert!(!h.is_empty() && h.len() <= MAX_HCAS);
            for a in &h {
                assert!(a.ports.len() <= MAX_PORTS);
                assert!(a.ports.iter().all(|p| p.rate_gbps.is_none_or(|r| r.is_finite() && r > 0.0)));
            }
            let _ = vramfit_hw::fleet::fabric::summary(&h, None);
        }
    }
    if let Ok(p) = vramfit_hw::fabric::perftest::parse_perftest(s, "fuzz") {
        assert!(!(p.bandwidth.is_empty() && p.latency.is_empty()));
        assert!(p.bandwidth.iter().all(|r| r.average_gbps.is_finite() && r.peak_gbps.is_finite()));
        let _ = (p.best_average_gbps(), p.smallest_typical_us());
    }
    if let Ok(e) = vramfit_hw::fabric::expect::parse_expect_fabric(s) {
        let b = e.ports.unwrap_or(8) as f64 * e.rate_gbps / 8.0;
        for c in [vramfit_hw::bandwidth::nccl::Collective::AllReduce, vramfit_hw::bandwidth::nccl::Collective::AllToAll]
        {
            assert!(vramfit_hw::fabric::bounds::bounds(c, 2, 16, b).iter().all(|x| x.gbs.is_finite()));
        }
    }
}

/// The whole fleet check on one input: a fleet of two nodes holding the
/// input and a top level holding it too, so the content recognition,
/// every parser it dispatches to, the comparison of the nodes, the
/// multi-node judgement and the JSON report all see it. Never a panic,
/// always a report (a bad file is a finding, not an error).
pub fn hw_fleet(data: &[u8]) {
    use vramfit_hw::fleet::{FleetInput, NodeInput};
    use vramfit_hw::NamedText;
    let Ok(s) = std::str::from_utf8(data) else { return };
    let file = |n: &str| NamedText { name: n.into(), text: s.to_string() };
    let input = FleetInput {
        source: "fuzz".into(),
        nodes: vec![
            NodeInput { name: "a".into(), files: vec![file("a/x")] },
            NodeInput { name: "b".into(), files: vec![file("b/x"), file("b/y")] },
        ],
        top: vec![file("run")],
        unreadable: Vec::new(),
    };
    let _ = vramfit_hw::fleet::recognise::recognise(s);
    let _ = vramfit_hw::fleet::manifest::parse_manifest(s, "m");
    let _ = vramfit_hw::fleet::version::parse_smi_version(s, "v");
    let _ = vramfit_hw::fleet::version::parse_table_header(s, "t");
    let o = vramfit_cli::cmd::check::FleetOptions { json: true, ..Default::default() };
    let out = vramfit_cli::cmd::check::run_fleet(&o, &input).expect("a fleet always gives a report");
    assert!(out.code <= 1);
}

/// `nvidia-smi -q` and `nvidia-smi -L` text parsers.
pub fn hw_text(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = vramfit_hw::text::parse_text(s, "fuzz.txt");
        let _ = vramfit_hw::list::parse_list(s, "fuzz.txt");
    }
}

/// `nvidia-smi topo -m` parser: a parsed matrix is square.
pub fn hw_topo(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(t) = vramfit_hw::topo::parse_topo(s, "fuzz.txt") {
            assert!(t.links.iter().all(|r| r.len() == t.gpus.len()));
            assert!(t.nic_links.is_empty() || t.nic_links.iter().all(|r| r.len() == t.nics.len()));
            assert!(t.nic_names.is_empty() || t.nic_names.len() == t.nics.len());
            let _ = vramfit_hw::fleet::fabric::nic_affinity(&t, &[], None);
            let _ = t.pairs();
        }
    }
}

/// `nvidia-smi -q -x` parser.
pub fn hw_xml(data: &[u8]) {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = vramfit_hw::xml::parse_xml(s, "fuzz.xml");
    }
}

/// config.json parser: any bytes give a ModelSpec or an error, and a
/// ModelSpec that parses has a finite parameter count or an error.
pub fn ingest_config(data: &[u8]) {
    if let Ok(spec) = vramfit_ingest::config::parse_config(data, "fuzz") {
        let _ = vramfit_core::ParamLayout::of(&spec).and_then(|l| l.total());
        let _ = vramfit_core::estimate(&spec, &vramfit_core::Workload::default());
    }
}

/// GGUF headers: any bytes (whole or as a prefix of a longer file) give a
/// header, a "need more bytes" answer or an error naming the field; a
/// header that makes a model gives a llama.cpp plan or a typed error,
/// never a panic or an overflow.
pub fn ingest_gguf(data: &[u8]) {
    use vramfit_ingest::gguf::{model_from_header, parse, Parsed};
    let claimed = data.len() as u64 + (data.first().copied().unwrap_or(0) as u64) * 1024;
    if let Ok(Parsed::NeedMore { bytes }) = parse(data, claimed) {
        assert!(bytes > data.len() as u64);
    }
    if let Ok(Parsed::Complete(h)) = parse(data, data.len() as u64) {
        if let Ok(m) = model_from_header(&h, "fuzz") {
            let opts = vramfit_llamacpp::LlamaCppOptions {
                ctx_size: 256,
                ubatch: 64,
                gpus: vec![vramfit_llamacpp::GpuSlot { name: "fuzz".into(), memory_bytes: Some(1 << 34) }],
                n_gpu_layers: Some(m.n_layer as u64 / 2),
                ..Default::default()
            };
            let _ = vramfit_llamacpp::plan(&m, &opts);
        }
    }
}

/// safetensors header JSON: any bytes give a summary or an error.
pub fn ingest_safetensors_header(data: &[u8]) {
    let _ = vramfit_ingest::safetensors::parse_header(data, "fuzz");
}

/// safetensors file prefixes (length + header, with a claimed file size)
/// and index files: a summary or an error, never an overflowed size.
pub fn ingest_safetensors_prefix(data: &[u8]) {
    // the first 8 bytes pick the file size the prefix claims to come from
    let size = data.get(..8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))).unwrap_or(0);
    let rest = data.get(8..).unwrap_or(&[]);
    let _ = vramfit_ingest::safetensors::header_end(rest, Some(size), "fuzz");
    let _ = vramfit_ingest::safetensors::summary_from_prefix(rest, size, "fuzz");
    let _ = vramfit_ingest::safetensors::index_shards(rest, "fuzz");
}

/// Calibration case reader; a case that parses can be estimated.
pub fn train_calibration(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(cases) = vramfit_ingest::calibration::parse_cases(text, "fuzz") {
            for c in cases {
                if let Some(w) = &c.workload {
                    let _ = vramfit_core::estimate(&c.spec, w);
                }
            }
        }
    }
}

/// Published-measurement reader (calibration/data/published): a case that
/// parses can be estimated without a panic.
pub fn train_published(data: &[u8]) {
    use vramfit_core::accuracy::{estimate_quantity, CaseInput};
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
}

/// Published-throughput reader (calibration/data/published/throughput.jsonl)
/// against the embedded GPU catalogue: a case set or a typed error; the
/// cases that parse are compared with the time model without a panic.
pub fn train_throughput(data: &[u8]) {
    static GPUS: std::sync::OnceLock<Vec<vramfit_core::GpuSpec>> = std::sync::OnceLock::new();
    let gpus = GPUS.get_or_init(|| vramfit_catalog::gpus::builtin_gpus().unwrap_or_default());
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(cases) = vramfit_ingest::calibration::throughput::parse_throughput_cases(text, "fuzz", gpus) {
            let _ = vramfit_plan::calibrate::compare_throughput(&cases, &vramfit_plan::TimeModel::default());
        }
    }
}

/// DeepSpeed config reader: a config or a typed error.
pub fn train_deepspeed(data: &[u8]) {
    let _ = vramfit_ingest::deepspeed::parse_deepspeed(data, "fuzz");
}

/// Training estimate over arbitrary sizes and layouts: a ledger or an
/// error, never a wrapped number (categories always sum to the total).
/// The input is 8 little-endian u64 (missing bytes read as 0).
pub fn train_estimate(data: &[u8]) {
    let mut d = [0u64; 8];
    for (i, chunk) in data.chunks(8).take(8).enumerate() {
        let mut b = [0u8; 8];
        b[..chunk.len()].copy_from_slice(chunk);
        d[i] = u64::from_le_bytes(b);
    }
    let spec =
        ModelSpec::llama_like("fuzz", 1 + d[0] % 65536, 1 + d[1] % 256, 32, 8, 1 + d[2] % 100_000, 1 + d[3] % 300_000);
    let setup = TrainSetup {
        kind: [TrainKind::Full, TrainKind::Lora, TrainKind::Qlora][(d[4] % 3) as usize],
        precision: Precision::ALL[(d[4] / 3 % 6) as usize],
        optimizer: Optimizer::ALL[(d[4] / 18 % 7) as usize],
        checkpointing: [Checkpointing::None, Checkpointing::Full, Checkpointing::Selective][(d[4] / 126 % 3) as usize],
        batch: d[5],
        seq: d[6],
        grad_accum: 1 + d[7] % 64,
        ..TrainSetup::default()
    };
    let par = Parallelism {
        gpus: 1 + d[7] % 4096,
        tp: 1 << (d[7] / 4096 % 4),
        pp: 1 + d[7] / 65536 % 8,
        sharding: Sharding::from_stage((d[7] / 1_000_000 % 4) as u8).unwrap_or_default(),
        ..Parallelism::default()
    };
    let w = Workload { task: Task::Train(setup), parallelism: par, ..Workload::default() };
    if let Ok(l) = estimate(&spec, &w) {
        let sum: u64 = l.categories().iter().map(|(_, b)| *b).sum();
        assert_eq!(sum, l.total_bytes());
    }
}

/// PEFT adapter_config.json reader: a config or a typed error.
pub fn train_peft(data: &[u8]) {
    let _ = vramfit_ingest::peft::parse_adapter_config(data, "fuzz");
}

/// The web page's request decoders: any body or query string gives a
/// request or an error for the client (400/413), never a panic; a decoded
/// request becomes a command line that carries only the endpoint's own
/// flags and that clap parses or refuses without panicking. The first byte
/// picks the endpoint (low bits) and JSON body or query string (high bit).
pub fn web_request(data: &[u8]) {
    use vramfit_cli::serve::request::{argv, decode_json, decode_query, Endpoint};

    let Some((&pick, rest)) = data.split_first() else { return };
    let ep = Endpoint::ALL[pick as usize % Endpoint::ALL.len()];
    let decoded =
        if pick & 0x80 == 0 { decode_json(ep, rest) } else { decode_query(ep, &String::from_utf8_lossy(rest)) };
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
}
