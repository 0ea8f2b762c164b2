//! The Hub client against hostile or slow endpoints (issue 25 items 5–7),
//! in process, never the network:
//! - one deadline for a whole fetch (`VRAMFIT_HUB_FETCH_TIMEOUT`), and what
//!   the fetch has done reported once it takes more than a second;
//! - the token's value never in anything printed, whatever the endpoint
//!   echoes (error messages, redirect targets, names in the files);
//! - a `Location` with another scheme than http(s) refused at once; an
//!   answer that is not HTTP reported as such, not as a network failure.
#![cfg(feature = "hub")]

#[path = "support/fake_hub.rs"]
mod fake_hub;

use fake_hub::*;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use vramfit_ingest::hub::{HubClient, HubError, HubSettings, REDACTED};
use vramfit_ingest::resolve::{resolve_with, ResolveOptions, ResolvedModel};
use vramfit_ingest::IngestError;

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vramfit-hubhard-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn env_of(pairs: Vec<(&'static str, String)>) -> impl Fn(&str) -> Option<String> {
    move |k| pairs.iter().find(|(a, _)| *a == k).map(|(_, v)| v.clone())
}

/// Resolve `q` against `endpoint`; (result, progress lines).
fn resolve(
    q: &str,
    endpoint: &str,
    extra: &[(&'static str, &str)],
) -> (Result<ResolvedModel, IngestError>, Vec<String>) {
    let home = tmp(&q.replace('/', "-"));
    let mut pairs = vec![
        ("HF_ENDPOINT", endpoint.to_string()),
        ("HF_HOME", home.display().to_string()),
        ("HF_HUB_DOWNLOAD_TIMEOUT", "5".to_string()),
    ];
    for (k, v) in extra {
        pairs.retain(|(a, _)| a != k);
        pairs.push((k, v.to_string()));
    }
    let env = env_of(pairs);
    let lines = Mutex::new(Vec::new());
    let progress = |m: &str| lines.lock().unwrap().push(m.to_string());
    let r = resolve_with(q, &ResolveOptions { progress: &progress, ..ResolveOptions::new(&env) });
    (r, lines.into_inner().unwrap())
}

/// A server that answers every request with `answer(request head)`; counts
/// the requests it got.
fn scripted(answer: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static) -> (String, Arc<AtomicUsize>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let count = Arc::new(AtomicUsize::new(0));
    let (answer, n) = (Arc::new(answer), count.clone());
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            n.fetch_add(1, Ordering::SeqCst);
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = String::new();
            let mut r = BufReader::new(s.try_clone().unwrap());
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                head.push_str(&line);
            }
            let _ = s.write_all(&answer(&head));
        }
    });
    (url, count)
}

fn client(endpoint: &str, token: Option<&str>) -> HubClient {
    let mut pairs = vec![("HF_ENDPOINT", endpoint.to_string()), ("HF_HUB_DOWNLOAD_TIMEOUT", "5".to_string())];
    if let Some(t) = token {
        pairs.push(("HF_TOKEN", t.to_string()));
    }
    HubClient::new(HubSettings::from_env(&env_of(pairs), false).unwrap()).unwrap()
}

/// The Authorization header of a request head.
fn authorization(head: &str) -> String {
    head.lines()
        .find_map(|l| l.strip_prefix("authorization: ").or_else(|| l.strip_prefix("Authorization: ")))
        .unwrap_or("")
        .to_string()
}

#[test]
fn a_fetch_stops_at_its_deadline_and_says_how_far_it_got() {
    // 20 shards; every Hub answer takes 0.6 s: config, index, then 8 shard headers at a
    // time (about 1.2, 1.8, 2.4, 3.0 s); the fetch's deadline is 2.1 s
    let hub = FakeHub::start();
    let tensors: Vec<Vec<Tensor>> = (0..20).map(|i| tiny_tensors(i..i + 1, i == 0, i == 19)).collect();
    let names: Vec<String> = (1..=20).map(|i| format!("model-{i:05}-of-00020.safetensors")).collect();
    let mut repo = Repo::new(&commit("deadline")).file("config.json", TINY_CONFIG.into()).file(
        "model.safetensors.index.json",
        index_json(&names.iter().zip(&tensors).map(|(n, t)| (n.as_str(), t.as_slice())).collect::<Vec<_>>()),
    );
    for (n, t) in names.iter().zip(&tensors) {
        repo = repo.file(n, st_file(t, 0));
    }
    repo.delay = Duration::from_millis(600);
    repo.slow_requests = usize::MAX;
    hub.add("acme/many", repo);
    let t0 = Instant::now();
    let (r, progress) = resolve("acme/many", &hub.url, &[("VRAMFIT_HUB_FETCH_TIMEOUT", "2.1")]);
    let took = t0.elapsed();
    let e = r.unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, IngestError::Hub(HubError::Deadline { .. })), "{text}");
    assert!(text.contains("within 2.1 s") && text.contains("VRAMFIT_HUB_FETCH_TIMEOUT"), "{text}");
    assert!(text.contains("of 20 files read"), "says how far it got: {text}");
    assert!(took >= Duration::from_millis(2100) && took < Duration::from_secs(5), "stopped after {took:?}");
    // the fetch ran past a second: a progress line said what it was doing
    let status: Vec<&String> = progress.iter().filter(|l| l.contains("files read")).collect();
    assert!(!status.is_empty(), "no progress line: {progress:?}");
    assert!(status[0].contains("fetching acme/many") && status[0].contains("VRAMFIT_HUB_FETCH_TIMEOUT"), "{status:?}");
    // nothing was cached: the next run fetches again
    assert!(hub.log().iter().all(|l| l.server != "cdn" || l.range.is_some()));
}

#[test]
fn a_quick_fetch_prints_no_progress_and_the_deadline_is_a_setting() {
    let hub = FakeHub::start();
    let all = tiny_tensors(0..2, true, true);
    hub.add(
        "acme/quick",
        Repo::new(&commit("quick")).file("config.json", TINY_CONFIG.into()).file("model.safetensors", st_file(&all, 0)),
    );
    let (r, progress) = resolve("acme/quick", &hub.url, &[]);
    r.unwrap();
    assert!(progress.iter().all(|l| !l.contains("files read")), "{progress:?}");
    let s = HubSettings::from_env(&env_of(vec![]), false).unwrap();
    assert_eq!(s.fetch_timeout, vramfit_ingest::hub::DEFAULT_FETCH_TIMEOUT);
    for bad in ["0", "-3", "abc", "1e9"] {
        let e = HubSettings::from_env(&env_of(vec![("VRAMFIT_HUB_FETCH_TIMEOUT", bad.into())]), false).unwrap_err();
        assert!(e.to_string().contains("VRAMFIT_HUB_FETCH_TIMEOUT"), "{e}");
    }
}

#[test]
fn the_token_is_never_printed_whatever_the_endpoint_echoes() {
    // the fake Hub quotes the Authorization header in its error message and body
    let hub = FakeHub::start();
    let mut repo = Repo::new(&commit("echo")).file("config.json", TINY_CONFIG.into());
    repo.echo_authorization = true;
    hub.add("acme/echo", repo);
    let (r, _) = resolve("acme/echo", &hub.url, &[("HF_TOKEN", GOOD_TOKEN)]);
    let text = r.unwrap_err().to_string();
    assert!(!text.contains(GOOD_TOKEN) && !text.contains("hf_goodtok"), "{text}");
    assert!(text.contains(&format!("Bearer {REDACTED}")), "{text}");

    // a name in the files that quotes it
    let hub = FakeHub::start();
    let config = TINY_CONFIG.replace("{", &format!("{{\"_name_or_path\":\"owned by {GOOD_TOKEN}\","));
    hub.add("acme/named", Repo::new(&commit("named")).file("config.json", config.into_bytes()));
    let (r, _) = resolve("acme/named", &hub.url, &[("HF_TOKEN", GOOD_TOKEN)]);
    let m = r.unwrap();
    assert!(!m.spec.name.contains(GOOD_TOKEN), "{}", m.spec.name);

    // an endpoint that answers with the token in a long message (cut at 200 characters) or a redirect target
    for answer in [
        |head: &str| {
            format!(
                "HTTP/1.1 400 Bad Request\r\nX-Error-Message: {}{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                "x".repeat(185),
                authorization(head)
            )
        },
        |head: &str| {
            format!(
                "HTTP/1.1 302 Found\r\nLocation: file:///{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                authorization(head).replace(' ', "")
            )
        },
    ] {
        let (url, _) = scripted(move |head| answer(head).into_bytes());
        let e = client(&url, Some(GOOD_TOKEN)).get_file("acme/x", "main", "config.json", 1 << 20).unwrap_err();
        let text = e.to_string();
        assert!(!text.contains("hf_goodtok"), "not even a prefix of the token: {text}");
        // the marker in its place (cut with the message at 200 characters in the first case)
        assert!(text.contains("[token"), "{text}");
    }
}

#[test]
fn a_redirect_to_another_scheme_is_refused_at_once() {
    for location in ["file:///etc/passwd", "ftp://mirror.example/model.safetensors", "FILE:///x"] {
        let loc = location.to_string();
        let (url, asked) = scripted(move |_| {
            format!("HTTP/1.1 302 Found\r\nLocation: {loc}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .into_bytes()
        });
        let e = client(&url, None).get_file("acme/x", "main", "config.json", 1 << 20).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, HubError::Protocol { .. }), "{text}");
        assert!(text.contains(location) && text.contains("only http(s) redirects are followed"), "{text}");
        assert_eq!(asked.load(Ordering::SeqCst), 1, "refused at the first answer, never followed");
    }
}

#[test]
fn an_answer_that_is_not_http_says_what_was_wrong() {
    for answer in [
        &b"HTTP/1.1 200 OK\r\nthis line is not a header\r\nContent-Length: 2\r\n\r\n{}"[..],
        b"HTTP/1.1 two hundred OK\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Bad: \x01\x02\r\n\r\n{}",
        b"SSH-2.0-OpenSSH_9.6\r\n",
    ] {
        let (url, _) = scripted(move |_| answer.to_vec());
        let e = client(&url, None).get_file("acme/x", "main", "config.json", 1 << 20).unwrap_err();
        let text = e.to_string();
        assert!(!text.contains("cannot connect") && !text.contains("check the network"), "{text}");
        assert!(text.contains("not valid HTTP"), "{text}");
    }
}
