//! `vramfit serve`: start-up of the real binary until it answers the page,
//! and `/api/estimate` answered in process (docs/web.md quotes the figures;
//! issue 13's targets: start-up < 100 ms, an estimate < 5 ms).

use axum::body::Body;
use axum::http::Request;
use criterion::{criterion_group, criterion_main, Criterion};
use http_body_util::BodyExt;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tower::ServiceExt;
use vramfit_cli::serve::api::Settings;
use vramfit_cli::serve::{router, Config};

/// Spawn `vramfit serve --port 0`, read the address it prints, fetch `/`.
fn start_and_fetch_page() -> Duration {
    let t0 = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vramfit"))
        .args(["serve", "--port", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vramfit serve starts");
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line.split("http://").nth(1).and_then(|s| s.split('/').next()).expect("the address").to_string();
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(s, "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut page = Vec::new();
    s.read_to_end(&mut page).unwrap();
    let took = t0.elapsed();
    assert!(page.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&page[..64.min(page.len())]));
    child.kill().unwrap();
    child.wait().unwrap();
    took
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("serve");
    g.sample_size(20).measurement_time(Duration::from_secs(8));
    g.bench_function("startup_to_first_page", |b| b.iter_custom(|n| (0..n).map(|_| start_and_fetch_page()).sum()));

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let app = router(Config { settings: Settings::default(), addr: "127.0.0.1:8080".parse().unwrap() });
    let call = |body: &'static str| {
        let app = app.clone();
        rt.block_on(async move {
            let req = Request::post("/api/estimate").header("host", "127.0.0.1:8080").body(Body::from(body)).unwrap();
            let r = app.oneshot(req).await.unwrap();
            assert_eq!(r.status(), 200);
            r.into_body().collect().await.unwrap().to_bytes().len()
        })
    };
    g.bench_function("api_estimate", |b| b.iter(|| call(r#"{"model":"llama-2-7b","gpu":"rtx-4090"}"#)));
    g.bench_function("api_estimate_train_lora", |b| {
        b.iter(|| call(r#"{"model":"llama-2-13b","task":"lora","checkpointing":"full","gpu":"a100-80gb"}"#))
    });
    g.bench_function("api_estimate_with_sweep", |b| {
        b.iter(|| call(r#"{"model":"llama-2-7b","gpu":"rtx-4090","sweep":true}"#))
    });
    g.bench_function("api_estimate_chart", |b| {
        b.iter(|| call(r#"{"model":"llama-2-7b","gpu":"rtx-4090","svg":true}"#))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
