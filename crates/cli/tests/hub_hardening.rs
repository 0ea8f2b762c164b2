//! The Hub client's bounds through the real binary (issue 25 items 5 and 6),
//! against the in-process fake Hub (never the network): a slow fetch says
//! what it is doing on stderr and stops at `VRAMFIT_HUB_FETCH_TIMEOUT`; an
//! endpoint that echoes the token never gets it printed. The client's own
//! rules are tested in `crates/ingest/tests/hub_hardening.rs`.
#![cfg(feature = "hub")]

mod common;
#[path = "../../ingest/tests/support/fake_hub.rs"]
mod fake_hub;

use common::vramfit;
use fake_hub::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn temp_home(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vramfit-cli-hubhard-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Run `vramfit estimate <id>` against the fake Hub; (exit code, stdout, stderr).
fn estimate(hub: &FakeHub, id: &str, env: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = vramfit();
    c.env("HF_ENDPOINT", &hub.url)
        .env("HF_HOME", temp_home(&id.replace('/', "-")))
        .env("HF_HUB_DOWNLOAD_TIMEOUT", "5")
        .env_remove("HF_HUB_OFFLINE");
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"] {
        c.env_remove(k);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.args(["estimate", id, "--gpu", "a100-80gb"]).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    )
}

fn tiny_repo(tag: &str) -> Repo {
    Repo::new(&commit(tag))
        .file("config.json", TINY_CONFIG.into())
        .file("model.safetensors", st_file(&tiny_tensors(0..2, true, true), 0))
}

#[test]
fn a_slow_fetch_reports_progress_and_stops_at_its_deadline() {
    let hub = FakeHub::start();
    // every Hub answer takes 0.7 s: config, then the shard's header (about 1.4 s in all)
    let mut slow = tiny_repo("slowcli");
    slow.delay = Duration::from_millis(700);
    slow.slow_requests = usize::MAX;
    hub.add("acme/slow", slow.clone());
    let (code, _, err) = estimate(&hub, "acme/slow", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("vramfit: fetching acme/slow: ") && err.contains("files read"), "progress on stderr: {err}");

    hub.add("acme/slower", slow);
    let t0 = Instant::now();
    let (code, _, err) = estimate(&hub, "acme/slower", &[("VRAMFIT_HUB_FETCH_TIMEOUT", "1")]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did not finish within 1 s") && err.contains("VRAMFIT_HUB_FETCH_TIMEOUT"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(10), "bounded: {:?}", t0.elapsed());
}

#[test]
fn the_token_never_reaches_stderr_or_stdout() {
    let hub = FakeHub::start();
    let mut echo = tiny_repo("echocli");
    echo.echo_authorization = true;
    hub.add("acme/echo", echo);
    let (code, out, err) = estimate(&hub, "acme/echo", &[("HF_TOKEN", GOOD_TOKEN)]);
    assert_eq!(code, 2, "{err}");
    assert!(!err.contains(GOOD_TOKEN) && !out.contains(GOOD_TOKEN), "{err}");
    assert!(err.contains("Bearer [token redacted]"), "{err}");
    // a model whose config quotes it: the report names the model without it
    let config = TINY_CONFIG.replace("{", &format!("{{\"_name_or_path\":\"{GOOD_TOKEN}\","));
    hub.add(
        "acme/named",
        Repo::new(&commit("namedcli"))
            .file("config.json", config.into_bytes())
            .file("model.safetensors", st_file(&tiny_tensors(0..2, true, true), 0)),
    );
    let (code, out, err) = estimate(&hub, "acme/named", &[("HF_TOKEN", GOOD_TOKEN)]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains(GOOD_TOKEN) && !out.contains(GOOD_TOKEN), "{out}\n{err}");
}
