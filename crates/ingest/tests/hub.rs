//! The Hub client and fetch against an in-process fake Hub (never the
//! network): range boundaries, redirects to a CDN without the token,
//! timeouts with one retry, errors, and the cache written for offline runs.
#![cfg(feature = "hub")]

#[path = "support/fake_hub.rs"]
mod fake_hub;

use fake_hub::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use vramfit_ingest::hub::{HubClient, HubSettings, FIRST_READ_BYTES};
use vramfit_ingest::resolve::{resolve_with, ResolveOptions, ResolvedModel, Source};
use vramfit_ingest::IngestError;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vramfit-hubtest-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Env(Vec<(String, String)>);

impl Env {
    fn new(hub: &FakeHub, home: &std::path::Path) -> Env {
        Env(vec![
            ("HF_ENDPOINT".into(), hub.url.clone()),
            ("HF_HOME".into(), home.display().to_string()),
            ("HF_HUB_DOWNLOAD_TIMEOUT".into(), "2".into()),
        ])
    }
    fn set(mut self, k: &str, v: &str) -> Env {
        self.0.retain(|(a, _)| a != k);
        self.0.push((k.into(), v.into()));
        self
    }
    fn get(&self, k: &str) -> Option<String> {
        self.0.iter().find(|(a, _)| a == k).map(|(_, v)| v.clone())
    }
}

fn resolve(q: &str, env: &Env, revision: Option<&str>) -> Result<ResolvedModel, IngestError> {
    let f = |k: &str| env.get(k);
    resolve_with(q, &ResolveOptions { revision, ..ResolveOptions::new(&f) })
}

fn tiny_repo(tag: &str) -> Repo {
    let all = tiny_tensors(0..2, true, true);
    Repo::new(&commit(tag)).file("config.json", TINY_CONFIG.into()).file("model.safetensors", st_file(&all, 0))
}

#[test]
fn single_file_model_fetched_counted_exactly_and_cached_for_offline() {
    let hub = FakeHub::start();
    hub.add("acme/tiny", tiny_repo("tiny"));
    let home = tmp("single");
    let env = Env::new(&hub, &home);
    let r = resolve("acme/tiny", &env, None).unwrap();
    let c = r.checkpoint.as_ref().expect("headers read");
    assert_eq!(c.summary.params, TINY_PARAMS);
    assert_eq!(c.config_params, TINY_PARAMS, "hand count of the tiny config");
    assert_eq!(c.difference, 0, "{}", c.verdict);
    assert_eq!(c.summary.params_by_dtype["BF16"], TINY_PARAMS);
    match &r.source {
        Source::Hub { repo_id, revision, commit: c, .. } => {
            assert_eq!(
                (repo_id.as_str(), revision.as_str(), c.as_str()),
                ("acme/tiny", "main", commit("tiny").as_str())
            )
        }
        s => panic!("{s:?}"),
    }
    assert!(r.source_text().contains("acme/tiny (main, commit "), "{}", r.source_text());
    // never the weights: every range ends inside the first read
    for l in hub.log() {
        if let Some((_, b)) = l.range {
            assert!(b < FIRST_READ_BYTES, "{l:?}");
        }
    }
    // the standard layout + sidecar
    let repo = home.join("hub/models--acme--tiny");
    assert_eq!(std::fs::read_to_string(repo.join("refs/main")).unwrap(), commit("tiny"));
    let snap = repo.join("snapshots").join(commit("tiny"));
    assert_eq!(std::fs::read_to_string(snap.join("config.json")).unwrap(), TINY_CONFIG);
    assert!(!snap.join("model.safetensors").exists(), "a header is never cached as the file");
    assert!(repo.join(".no_exist").join(commit("tiny")).join("model.safetensors.index.json").exists());
    assert!(repo.join("vramfit/safetensors-headers").join(commit("tiny")).join("model.safetensors.json").exists());

    // second run: offline, from the cache, same answer, no connection
    let before = hub.connections();
    let r2 = resolve("acme/tiny", &env.set("HF_HUB_OFFLINE", "1"), None).unwrap();
    assert_eq!(hub.connections(), before);
    let s2 = r2.checkpoint.unwrap().summary;
    assert_eq!(
        (s2.params, s2.data_bytes, s2.tensors, &s2.params_by_dtype),
        (c.summary.params, c.summary.data_bytes, c.summary.tensors, &c.summary.params_by_dtype)
    );
    assert!(s2.files[0].contains("header cached in"), "{:?}", s2.files);
    assert!(matches!(r2.source, Source::HfCache { .. }), "{:?}", r2.source);
}

#[test]
fn header_length_around_the_first_read_boundary() {
    // 8 + n = 99,999, 100,000 (exactly the first read) and 100,001 (one
    // byte more: a second request for exactly that byte). huggingface_hub
    // truncated headers of 99,994..100,000 bytes (its issue #4602).
    let hub = FakeHub::start();
    let t = tiny_tensors(0..2, true, true);
    let mut repo = Repo::new(&commit("bound")).file("config.json", TINY_CONFIG.into());
    let sizes = [99_991usize, 99_992, 99_993];
    let shards: Vec<(String, Vec<Tensor>)> = vec![
        ("m-1.safetensors".into(), t[..10].to_vec()),
        ("m-2.safetensors".into(), t[10..19].to_vec()),
        ("m-3.safetensors".into(), t[19..].to_vec()),
    ];
    for ((name, tensors), n) in shards.iter().zip(sizes) {
        let f = st_file(tensors, n);
        assert_eq!(u64::from_le_bytes(f[..8].try_into().unwrap()), n as u64);
        repo = repo.file(name, f);
    }
    let idx: Vec<(&str, &[Tensor])> = shards.iter().map(|(n, t)| (n.as_str(), t.as_slice())).collect();
    repo = repo.file("model.safetensors.index.json", index_json(&idx));
    hub.add("acme/bound", repo);
    let home = tmp("bound");
    let r = resolve("acme/bound", &Env::new(&hub, &home), None).unwrap();
    assert_eq!(r.checkpoint.unwrap().summary.params, TINY_PARAMS);
    let ranges = |f: &str| -> Vec<(u64, u64)> {
        hub.log().iter().filter(|l| l.server == "cdn" && l.path.contains(f)).filter_map(|l| l.range).collect()
    };
    assert_eq!(ranges("m-1.safetensors"), [(0, 99_999)]);
    assert_eq!(ranges("m-2.safetensors"), [(0, 99_999)]);
    assert_eq!(ranges("m-3.safetensors"), [(0, 99_999), (100_000, 100_000)]);
}

#[test]
fn gated_model_token_goes_to_the_hub_never_to_the_cdn() {
    let hub = FakeHub::start();
    let mut repo = tiny_repo("gated");
    repo.gated = true;
    hub.add("meta/gated", repo);
    let home = tmp("gated");
    let env = Env::new(&hub, &home);
    let e = resolve("meta/gated", &env, None).unwrap_err().to_string();
    assert!(e.contains("gated") && e.contains(&format!("{}/meta/gated", hub.url)) && e.contains("HF_TOKEN"), "{e}");
    let e = resolve("meta/gated", &Env::new(&hub, &home).set("HF_TOKEN", "hf_wrong"), None).unwrap_err().to_string();
    assert!(e.contains("has no access") && e.contains("$HF_TOKEN"), "{e}");
    assert!(!e.contains("hf_wrong"), "the token is never printed: {e}");
    hub.clear_log();
    let r = resolve("meta/gated", &env.set("HF_TOKEN", GOOD_TOKEN), None).unwrap();
    assert_eq!(r.checkpoint.unwrap().difference, 0);
    let log = hub.log();
    assert!(log
        .iter()
        .filter(|l| l.server == "hub")
        .all(|l| l.authorization.as_deref() == Some(&*format!("Bearer {GOOD_TOKEN}"))));
    let cdn: Vec<_> = log.iter().filter(|l| l.server == "cdn").collect();
    assert!(!cdn.is_empty() && cdn.iter().all(|l| l.authorization.is_none()), "{cdn:?}");
}

#[test]
fn not_found_revision_no_config_and_not_a_hub() {
    let hub = FakeHub::start();
    hub.add("acme/tiny", tiny_repo("t"));
    hub.add("acme/gguf-only", Repo::new(&commit("g")).file("model.gguf", vec![0; 16]));
    let mut odd = tiny_repo("odd");
    odd.no_commit_header = true;
    hub.add("acme/odd", odd);
    let home = tmp("errors");
    let env = Env::new(&hub, &home);
    let e = resolve("acme/missing", &env, None).unwrap_err().to_string();
    assert!(e.contains("acme/missing: no such model") && e.contains("private model needs HF_TOKEN"), "{e}");
    let e = resolve("acme/tiny", &env, Some("v9")).unwrap_err().to_string();
    assert!(e.contains("revision 'v9' not found"), "{e}");
    let e = resolve("acme/gguf-only", &env, None).unwrap_err().to_string();
    assert!(e.contains("no config.json") && e.contains("pass a config.json path"), "{e}");
    assert!(e.contains(":FILE.gguf"), "a GGUF repo: name the file: {e}");
    let e = resolve("acme/odd", &env, None).unwrap_err().to_string();
    assert!(e.contains("X-Repo-Commit"), "{e}");
    // a web server that is not a Hub answers a bare 404: not "no config.json"
    let not_hub = Env::new(&hub, &home).set("HF_ENDPOINT", &format!("{}/not/a/hub", hub.url));
    let e = resolve("acme/tiny", &not_hub, None).unwrap_err().to_string();
    assert!(e.contains("HTTP 404") && e.contains("is HF_ENDPOINT a Hugging Face Hub"), "{e}");
}

/// A mirror that answers a missing file with a bare 404 (no X-Error-Code):
/// once config.json came with its commit, the optional index is absent and
/// the single-file layout is read (issue 24 item 10).
#[test]
fn a_mirror_without_error_codes_still_reads_a_single_file_model() {
    let hub = FakeHub::start();
    let mut repo = tiny_repo("mirror");
    repo.bare_404 = true;
    hub.add("acme/tiny", repo);
    let home = tmp("bare404");
    let env = Env::new(&hub, &home);
    let r = resolve("acme/tiny", &env, None).unwrap();
    let c = r.checkpoint.as_ref().expect("the single file's header read");
    assert_eq!(c.difference, 0);
    // a model with neither file on such a mirror: config.json alone, with the note
    let mut bare = Repo::new(&commit("bare")).file("config.json", TINY_CONFIG.into());
    bare.bare_404 = true;
    hub.add("acme/bare", bare);
    let r = resolve("acme/bare", &env, None).unwrap();
    assert!(r.checkpoint.is_none());
    assert!(r.spec.notes.iter().any(|n| n.contains("no safetensors files")), "{:?}", r.spec.notes);
}

#[test]
fn revision_by_tag_is_cached_under_its_ref() {
    let hub = FakeHub::start();
    let mut repo = tiny_repo("main");
    let v1 = r#"{"model_type":"llama","hidden_size":64,"num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":128,"vocab_size":1000,"tie_word_embeddings":false}"#;
    repo.revisions.insert("v1".into(), (commit("v1"), [("config.json".to_string(), v1.as_bytes().to_vec())].into()));
    hub.add("acme/tiny", repo);
    let home = tmp("rev");
    let env = Env::new(&hub, &home);
    let r = resolve("acme/tiny", &env, Some("v1")).unwrap();
    assert_eq!(r.spec.num_layers, 1);
    assert!(r.checkpoint.is_none(), "v1 has no safetensors");
    assert!(r.spec.notes.iter().any(|n| n.contains("no safetensors files")), "{:?}", r.spec.notes);
    let refs = home.join("hub/models--acme--tiny/refs/v1");
    assert_eq!(std::fs::read_to_string(refs).unwrap(), commit("v1"));
    // offline, the tag resolves from the cache; main was never fetched
    let off = env.set("HF_HUB_OFFLINE", "1");
    assert_eq!(resolve("acme/tiny", &off, Some("v1")).unwrap().spec.num_layers, 1);
    let e = resolve("acme/tiny", &off, None).unwrap_err().to_string();
    assert!(e.contains("HF_HUB_OFFLINE=1 forbids the network"), "{e}");
}

#[test]
fn slow_hub_times_out_after_one_retry_and_a_slow_first_answer_is_retried() {
    let hub = FakeHub::start();
    let mut slow = tiny_repo("slow");
    slow.delay = Duration::from_secs(3);
    slow.slow_requests = usize::MAX;
    hub.add("acme/slow", slow);
    let mut flaky = tiny_repo("flaky");
    flaky.delay = Duration::from_secs(3);
    flaky.slow_requests = 1;
    hub.add("acme/flaky", flaky);
    let home = tmp("slow");
    let env = Env::new(&hub, &home).set("HF_HUB_DOWNLOAD_TIMEOUT", "0.3");
    let t = Instant::now();
    let e = resolve("acme/slow", &env, None).unwrap_err().to_string();
    let took = t.elapsed();
    assert!(e.contains("no answer within 0.3 s (tried 2 times)") && e.contains("HF_HUB_DOWNLOAD_TIMEOUT"), "{e}");
    assert!(took < Duration::from_secs(2), "bounded: {took:?}");
    assert_eq!(resolve("acme/flaky", &env, None).unwrap().checkpoint.unwrap().difference, 0);
}

#[test]
fn cdn_that_ignores_range_is_cut_off_after_the_header() {
    let hub = FakeHub::start();
    let mut repo = tiny_repo("ign");
    repo.cdn_ignores_range = true;
    hub.add("acme/ign", repo);
    let r = resolve("acme/ign", &Env::new(&hub, &tmp("ign")), None).unwrap();
    assert_eq!(r.checkpoint.unwrap().summary.params, TINY_PARAMS);
}

#[test]
fn bad_shards_are_named() {
    let hub = FakeHub::start();
    let home = tmp("bad");
    // an HTML error page where a shard should be
    hub.add(
        "acme/html",
        Repo::new(&commit("h"))
            .file("config.json", TINY_CONFIG.into())
            .file("model.safetensors", b"<!DOCTYPE html><html>rate limited</html>".to_vec()),
    );
    let e = resolve("acme/html", &Env::new(&hub, &home), None).unwrap_err().to_string();
    assert!(e.contains("not a safetensors file") && !e.contains("DOCTYPE"), "{e}");
    // a length claiming 200 MiB of header
    let mut big = (200u64 << 20).to_le_bytes().to_vec();
    big.extend_from_slice(b"{\"a\":");
    big.resize(4096, b' ');
    hub.add("acme/big", Repo::new(&commit("b")).file("config.json", TINY_CONFIG.into()).file("model.safetensors", big));
    let e = resolve("acme/big", &Env::new(&hub, &home), None).unwrap_err().to_string();
    assert!(e.contains("refusing anything over 104857600"), "{e}");
    // an empty file: the CDN answers 416
    hub.add(
        "acme/empty",
        Repo::new(&commit("e")).file("config.json", TINY_CONFIG.into()).file("model.safetensors", vec![]),
    );
    let e = resolve("acme/empty", &Env::new(&hub, &home), None).unwrap_err().to_string();
    assert!(e.contains("not a safetensors file: 0 bytes"), "{e}");
    // a truncated shard: data promised past the end
    let mut cut = st_file(&tiny_tensors(0..2, true, true), 0);
    cut.truncate(cut.len() - 10);
    hub.add("acme/cut", Repo::new(&commit("c")).file("config.json", TINY_CONFIG.into()).file("model.safetensors", cut));
    let e = resolve("acme/cut", &Env::new(&hub, &home), None).unwrap_err().to_string();
    assert!(e.contains("past the end of the file"), "{e}");
    // an index naming a shard the repo lacks
    let t = tiny_tensors(0..2, true, true);
    hub.add(
        "acme/lost",
        Repo::new(&commit("l"))
            .file("config.json", TINY_CONFIG.into())
            .file("model.safetensors.index.json", index_json(&[("gone.safetensors", &t)])),
    );
    let e = resolve("acme/lost", &Env::new(&hub, &home), None).unwrap_err().to_string();
    assert!(e.contains("lists shard 'gone.safetensors', which the Hub does not have"), "{e}");
}

#[test]
fn generic_range_read_for_other_formats() {
    // the entry point a GGUF reader uses: any byte range of any Hub file
    let hub = FakeHub::start();
    let bytes: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    hub.add("acme/gguf", Repo::new(&commit("gguf")).file("m.Q4_K_M.gguf", bytes.clone()));
    let env = |k: &str| match k {
        "HF_ENDPOINT" => Some(hub.url.clone()),
        _ => None,
    };
    let client = HubClient::new(HubSettings::from_env(&env, false).unwrap()).unwrap();
    let r = client.read_range("acme/gguf", "main", "m.Q4_K_M.gguf", 4000, 2000).unwrap().unwrap();
    assert_eq!(r.bytes, bytes[4000..]);
    assert_eq!(r.file_size, Some(5000));
    assert_eq!(r.commit.as_deref(), Some(commit("gguf").as_str()));
    let r = client.read_range("acme/gguf", "main", "m.Q4_K_M.gguf", 6000, 10).unwrap().unwrap();
    assert!(r.bytes.is_empty());
    assert_eq!(r.file_size, Some(5000));
    assert!(client.read_range("acme/gguf", "main", "nope.gguf", 0, 10).unwrap().is_none());

    // a growing prefix: the "parser" needs 4,500 bytes, then is satisfied
    let big: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    hub.add("acme/big", Repo::new(&commit("big")).file("m.gguf", big.clone()));
    hub.clear_log();
    let mut asks = Vec::new();
    let r = client
        .read_prefix("acme/big", "main", "m.gguf", 1 << 20, &mut |p, size| {
            asks.push((p.len(), size));
            (p.len() < 250_000).then_some(250_000)
        })
        .unwrap()
        .unwrap();
    assert_eq!(r.bytes, big[..250_000]);
    assert_eq!(asks, [(100_000, Some(300_000)), (250_000, Some(300_000))]);
    // .gguf files are LFS: the Hub redirects, the CDN serves the range
    let ranges: Vec<_> = hub.log().iter().filter(|l| l.server == "cdn").filter_map(|l| l.range).collect();
    assert_eq!(ranges, [(0, 99_999), (100_000, 249_999)], "exactly the missing bytes");
    // over the cap: refused before reading
    let e = client.read_prefix("acme/big", "main", "m.gguf", 200_000, &mut |_, _| Some(250_000)).unwrap_err();
    assert!(e.to_string().contains("larger than 200000 bytes"), "{e}");
}

#[test]
fn unwritable_cache_still_answers_and_says_so() {
    let hub = FakeHub::start();
    hub.add("acme/tiny", tiny_repo("ro"));
    let home = tmp("ro");
    std::fs::write(home.join("hub"), b"a file where the cache folder should be").unwrap();
    let r = resolve("acme/tiny", &Env::new(&hub, &home), None).unwrap();
    assert_eq!(r.checkpoint.unwrap().difference, 0);
    assert!(r.spec.notes.iter().any(|n| n.contains("could not write the Hugging Face cache")), "{:?}", r.spec.notes);
}
