//! A GGUF on the Hugging Face Hub, `vramfit estimate org/name:file.gguf`,
//! through the real binary against the in-process fake Hub (never the
//! network): the header is read by range requests grown as the parser
//! asks, never the weights; the figures are those of the same file read
//! locally; split models are read shard by shard at the resolved commit;
//! the headers are cached, so the next run (also offline) reads no network;
//! a missing file, offline mode without a cache and a hostile header are
//! errors that say so.
#![cfg(feature = "hub")]

mod common;
#[path = "../../ingest/tests/support/fake_hub.rs"]
mod fake_hub;

use common::vramfit;
use fake_hub::*;
use std::path::{Path, PathBuf};
use vramfit_ingest::gguf::writer::fixtures::{writer, Shape};
use vramfit_ingest::gguf::writer::{GgufWriter, WValue};
use vramfit_ingest::gguf::{parse, Parsed};
use vramfit_llamacpp::GgmlType;

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vramfit-cli-hub-gguf-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn online(hub: &FakeHub, home: &Path) -> assert_cmd::Command {
    let mut c = vramfit();
    c.env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", home)
        .env("HF_HUB_DOWNLOAD_TIMEOUT", "5")
        .env_remove("HF_HUB_OFFLINE");
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        c.env_remove(k);
    }
    c
}

fn out(c: &mut assert_cmd::Command, args: &[&str], code: i32) -> (String, String) {
    let o = c.args(args).output().unwrap();
    let (so, se) = (String::from_utf8_lossy(&o.stdout).to_string(), String::from_utf8_lossy(&o.stderr).to_string());
    assert_eq!(o.status.code(), Some(code), "{args:?}\nstdout:\n{so}\nstderr:\n{se}");
    (so, se)
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}):\n{s}"))
}

/// A Llama-shaped Q4_K model with a 30,000-token vocabulary: a header of
/// ~400 kB (more than the first 100 kB read) in front of ~9 MB of weights.
fn shape() -> Shape {
    let mut s = Shape::llama(4, 256, 8, 2, 512, 30_000);
    s.matrix = GgmlType::Q4K;
    s
}

/// Where the tensor data starts (the end of the header, padded).
fn data_offset(bytes: &[u8]) -> u64 {
    match parse(bytes, bytes.len() as u64).unwrap() {
        Parsed::Complete(h) => h.data_offset,
        Parsed::NeedMore { .. } => panic!("whole file"),
    }
}

/// The figures two reports must share (everything but where the file is).
fn figures(v: &serde_json::Value) -> serde_json::Value {
    serde_json::json!([
        v["model"]["params"],
        v["model"]["tensor_bytes"],
        v["model"]["file_bytes"],
        v["model"]["tensors"],
        v["devices"],
        v["host"],
        v["kv"],
        v["fit"]["max_gpu_layers"],
        v["fit"]["max_context"]
    ])
}

#[test]
fn a_hub_gguf_is_read_by_range_requests_and_sized_as_the_same_file_on_disk() {
    let bytes = writer(&shape()).to_bytes();
    let header_end = data_offset(&bytes);
    assert!(header_end > 100_000 && (bytes.len() as u64) > 8 * header_end, "{header_end} of {}", bytes.len());
    let hub = FakeHub::start();
    hub.add("acme/tiny-GGUF", Repo::new(&commit("gguf")).file("sub/tiny-Q4_K.gguf", bytes.clone()));
    let home = temp("single");
    let (so, se) =
        out(&mut online(&hub, &home), &["estimate", "acme/tiny-GGUF:sub/tiny-Q4_K.gguf", "--gpu", "t4", "--json"], 0);
    assert!(se.contains("reading the header of acme/tiny-GGUF/sub/tiny-Q4_K.gguf (revision main)"), "{se}");
    let v = json(&so);
    assert_eq!(
        v["model"]["file"],
        "acme/tiny-GGUF@67677566000/sub/tiny-Q4_K.gguf".replace("67677566000", &commit("gguf")[..12])
    );
    assert_eq!(
        v["command_line"].as_str().unwrap(),
        "llama-server --hf-repo acme/tiny-GGUF --hf-file sub/tiny-Q4_K.gguf -c 4096 -ngl 5 -fa off -np 1"
    );
    // the same figures as the file read from disk
    let local = temp("single-local").join("tiny-Q4_K.gguf");
    std::fs::write(&local, &bytes).unwrap();
    let (lo, _) = out(&mut vramfit(), &["estimate", local.to_str().unwrap(), "--gpu", "t4", "--json"], 0);
    assert_eq!(figures(&v), figures(&json(&lo)));
    // never the weights: every request is a range, the first 100 kB then
    // growing (at least doubling), none reaching far into the tensor data
    let log: Vec<_> = hub.log().into_iter().filter(|l| l.server == "cdn").collect();
    assert!(log.iter().all(|l| l.range.is_some()), "{log:?}");
    let ends: Vec<u64> = log.iter().map(|l| l.range.unwrap().1 + 1).collect();
    assert_eq!(log[0].range, Some((0, 99_999)));
    assert!(log.len() >= 2 && log.len() <= 4, "{} requests: {ends:?}", log.len());
    assert!(*ends.iter().max().unwrap() <= 2 * header_end, "read up to {ends:?}, header ends at {header_end}");
    let read: u64 = log.iter().map(|l| l.sent).sum();
    assert!(read < 2 * header_end && read >= header_end, "{read} bytes for a {header_end}-byte header");
    let notes = v["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap()
            .contains(&format!("the header by {} range requests ({read} bytes), never the weights", log.len()))),
        "{notes:?}"
    );
    // the header was cached: the next runs, offline or not, make no connection
    let before = hub.connections();
    for offline in [true, false] {
        let mut c = online(&hub, &home);
        if offline {
            c.env("HF_HUB_OFFLINE", "1");
        }
        let (so, se) = out(&mut c, &["estimate", "acme/tiny-GGUF:sub/tiny-Q4_K.gguf", "--gpu", "t4", "--json"], 0);
        assert!(!se.contains("reading the header"), "{se}");
        let w = json(&so);
        assert_eq!(figures(&w), figures(&v));
        assert_eq!(w["model"]["file"], v["model"]["file"]);
        assert!(w["notes"].to_string().contains("from the local Hugging Face cache"), "{}", w["notes"]);
    }
    assert_eq!(hub.connections(), before, "cached runs made no connection");
    let cached = home
        .join("hub/models--acme--tiny-GGUF/vramfit/gguf-headers")
        .join(commit("gguf"))
        .join("sub/tiny-Q4_K.gguf.header");
    let len = std::fs::metadata(&cached).unwrap().len();
    assert!(len < header_end + 64, "the cache holds the header only: {len} bytes");
}

/// `count` shards the way `llama-gguf-split` writes them: metadata in the
/// first, `split.*` in each, tensors spread over them.
fn split(s: &Shape, prefix: &str, count: u16) -> Vec<(String, Vec<u8>)> {
    let whole = writer(s).to_bytes();
    let Parsed::Complete(h) = parse(&whole, whole.len() as u64).unwrap() else { panic!() };
    let n = h.tensors.len();
    let per = n.div_ceil(count as usize);
    (0..count)
        .map(|no| {
            let mut w = GgufWriter::new()
                .kv("split.no", WValue::U16(no))
                .kv("split.count", WValue::U16(count))
                .kv("split.tensors.count", WValue::I32(n as i32));
            if no == 0 {
                let a = s.arch;
                w = w
                    .kv("general.architecture", WValue::Str(a.into()))
                    .kv(&format!("{a}.block_count"), WValue::U32(s.n_layer as u32))
                    .kv(&format!("{a}.context_length"), WValue::U32(s.ctx as u32))
                    .kv(&format!("{a}.embedding_length"), WValue::U32(s.n_embd as u32))
                    .kv(&format!("{a}.feed_forward_length"), WValue::U32(s.n_ff as u32))
                    .kv(&format!("{a}.attention.head_count"), WValue::U32(s.n_head as u32))
                    .kv(&format!("{a}.attention.head_count_kv"), WValue::U32(s.n_head_kv as u32));
            }
            for t in h.tensors.iter().skip(no as usize * per).take(per) {
                w = w.tensor(&t.name, t.ty, &t.ne);
            }
            (format!("{prefix}-{:05}-of-{count:05}.gguf", no + 1), w.to_bytes())
        })
        .collect()
}

#[test]
fn a_split_hub_gguf_is_read_shard_by_shard_at_the_resolved_commit() {
    let s = Shape::llama(4, 256, 8, 2, 512, 64);
    let shards = split(&s, "big", 3);
    let hub = FakeHub::start();
    let mut repo = Repo::new(&commit("split"));
    for (name, b) in &shards {
        repo = repo.file(&format!("q4/{name}"), b.clone());
    }
    hub.add("acme/split-GGUF", repo);
    let home = temp("split");
    let (so, _) = out(
        &mut online(&hub, &home),
        &["estimate", "acme/split-GGUF:q4/big-00001-of-00003.gguf", "--gpu-mem", "24GiB", "--json"],
        0,
    );
    let v = json(&so);
    // the same as the three shards on disk
    let dir = temp("split-local");
    for (name, b) in &shards {
        std::fs::write(dir.join(name), b).unwrap();
    }
    let first = dir.join("big-00001-of-00003.gguf");
    let (lo, _) = out(&mut vramfit(), &["estimate", first.to_str().unwrap(), "--gpu-mem", "24GiB", "--json"], 0);
    assert_eq!(figures(&v), figures(&json(&lo)));
    assert_eq!(v["model"]["file_bytes"], shards.iter().map(|(_, b)| b.len() as u64).sum::<u64>());
    assert!(v["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("the header of all 3 shards")));
    // offline from the cache: every shard's header was cached
    let (so, _) = out(
        online(&hub, &home).env("HF_HUB_OFFLINE", "1"),
        &["estimate", "acme/split-GGUF:q4/big-00001-of-00003.gguf", "--gpu-mem", "24GiB", "--json"],
        0,
    );
    assert_eq!(figures(&json(&so)), figures(&v));
    // shards 2 and 3 were asked for at the commit the first read resolved
    let log = hub.log();
    let c = commit("split");
    for no in 2..=3 {
        let name = format!("big-0000{no}-of-00003.gguf");
        assert!(
            log.iter().any(|l| l.server == "hub" && l.path.contains(&format!("/resolve/{c}/q4/{name}"))),
            "{name} at {c}: {log:?}"
        );
    }
    // a missing shard is named
    let hub = FakeHub::start();
    let mut repo = Repo::new(&commit("split2"));
    for (name, b) in shards.iter().take(2) {
        repo = repo.file(name, b.clone());
    }
    hub.add("acme/broken", repo);
    let (_, se) = out(&mut online(&hub, &home), &["estimate", "acme/broken:big-00001-of-00003.gguf"], 2);
    assert!(se.contains("big-00003-of-00003.gguf") && se.contains("no such file"), "{se}");
}

#[test]
fn missing_files_offline_and_hostile_headers_are_errors_that_say_so() {
    let hub = FakeHub::start();
    let mut hostile = writer(&Shape::llama(2, 256, 8, 2, 512, 64)).to_bytes();
    hostile[8..16].copy_from_slice(&(u64::MAX).to_le_bytes()); // tensor count
    hub.add("acme/odd", Repo::new(&commit("odd")).file("bad.gguf", hostile).file("config.json", TINY_CONFIG.into()));
    let home = temp("errors");
    let (_, se) = out(&mut online(&hub, &home), &["estimate", "acme/odd:nope.gguf"], 2);
    assert!(se.contains("acme/odd/nope.gguf") && se.contains("no such file at revision 'main'"), "{se}");
    let (_, se) = out(&mut online(&hub, &home), &["estimate", "acme/odd:bad.gguf"], 2);
    assert!(se.contains("acme/odd/bad.gguf: GGUF header") && se.contains("tensor_count"), "{se}");
    let (_, se) = out(&mut online(&hub, &home), &["estimate", "acme/nobody:x.gguf"], 2);
    assert!(se.contains("acme/nobody") && se.contains("no such model"), "{se}");
    // offline: said, and no connection made
    let before = hub.connections();
    let (_, se) = out(online(&hub, &home).env("HF_HUB_OFFLINE", "1"), &["estimate", "acme/odd:bad.gguf"], 2);
    assert!(se.contains("not in the local Hugging Face cache, and HF_HUB_OFFLINE=1 forbids the network"), "{se}");
    let (_, se) = out(&mut online(&hub, &home), &["estimate", "acme/odd:bad.gguf", "--offline"], 2);
    assert!(se.contains("--offline forbids the network"), "{se}");
    assert_eq!(hub.connections(), before);
    // llama.cpp's quant-tag form: refused, saying to name the file, without a request
    let before = hub.connections();
    let (_, se) = out(&mut online(&hub, &home), &["estimate", "acme/odd:Q4_K_M"], 2);
    assert!(se.contains("a quant tag") && se.contains("acme/odd:<name>-Q4_K_M.gguf"), "{se}");
    assert_eq!(hub.connections(), before);
    // a revision that does not exist
    let (_, se) = out(&mut online(&hub, &home), &["estimate", "acme/odd:bad.gguf", "--revision", "v9"], 2);
    assert!(se.contains("revision 'v9' not found"), "{se}");
}
