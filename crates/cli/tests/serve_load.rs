//! `vramfit serve` under many clients (issue 25 items 1 and 2), against the
//! real binary on a loopback port, with the file-descriptor limit of the
//! issue's report (256):
//!
//! 1. 300 idle connections are opened and held (half of them slowloris:
//!    a request line and one header, then nothing); a normal `GET /` on a
//!    new connection is still answered, in under a second;
//! 2. 16 clients upload 50 MB each to `/api/diagnose` at once; every upload
//!    is read and answered by the command, and the server's peak resident
//!    memory (`VmHWM` of its /proc status) stays under 300 MiB.
//!
//! Every socket has a read and write timeout and the server is killed when
//! the test ends, so the test stops by itself whatever the server does.
#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The tests of this file measure time and memory: run one at a time, so
/// the 16 uploads of one do not starve another's timers on a 2-core CI.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

const IDLE_CONNECTIONS: usize = 300;
const UPLOADS: usize = 16;
const UPLOAD_BYTES: usize = 50_000_000;
const RSS_CEILING_KIB: u64 = 300 << 10;
const LATENCY_CEILING: Duration = Duration::from_secs(1);
/// Longest any single socket operation of the test may block.
const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// The server process; killed when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `vramfit serve --port 0` under `ulimit -n FILES`; waits for the line
    /// that says where it listens.
    fn start(open_files: u32) -> Server {
        let bin = env!("CARGO_BIN_EXE_vramfit");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {open_files} && exec \"$0\" serve --port 0"))
            .arg(bin)
            .env("HF_HUB_OFFLINE", "1")
            .env("HF_HOME", "/nonexistent-vramfit-test")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts vramfit serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        lines.read_line(&mut line).expect("reads the server's first line");
        let url = line.split("http://").nth(1).and_then(|r| r.split('/').next()).unwrap_or_else(|| {
            let _ = child.kill();
            panic!("no address in the server's first line: {line:?}")
        });
        let addr: SocketAddr = url.parse().expect("an address");
        // keep draining stderr so the server never blocks on a full pipe
        std::thread::spawn(move || {
            let mut sink = String::new();
            while lines.read_line(&mut sink).map(|n| n > 0).unwrap_or(false) {
                sink.clear();
            }
        });
        Server { child, addr }
    }

    /// (current, peak) resident set of the server, KiB.
    fn rss_kib(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("proc status");
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in /proc status"))
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect_timeout(&self.addr, IO_TIMEOUT).expect("connects");
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        s
    }
}

/// Status code and body of the whole response read from `s` (the request
/// asked for `Connection: close`).
fn response(mut s: TcpStream) -> (u16, String) {
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf).to_string();
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

fn get_page(server: &Server) -> (u16, Duration) {
    let t0 = Instant::now();
    let mut s = server.connect();
    let req = format!("GET / HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", server.addr);
    s.write_all(req.as_bytes()).expect("sends the request");
    let (status, _) = response(s);
    (status, t0.elapsed())
}

/// Hold `IDLE_CONNECTIONS` idle connections (half of them slowloris) and
/// time a normal `GET /` on a new one.
fn idle_connections_and_a_normal_request(server: &Server, open_files: u32) {
    let (status, first) = get_page(server);
    assert_eq!(status, 200, "GET / on an idle server");
    let mut held = Vec::with_capacity(IDLE_CONNECTIONS);
    for i in 0..IDLE_CONNECTIONS {
        let Ok(mut s) = TcpStream::connect_timeout(&server.addr, Duration::from_secs(5)) else { continue };
        if i % 2 == 0 {
            let _ = s.write_all(format!("GET / HTTP/1.1\r\nHost: {}\r\nX-Slow: ", server.addr).as_bytes());
        }
        held.push(s);
    }
    let opened = held.len();
    let (status, latency) = get_page(server);
    eprintln!(
        "serve_load: ulimit -n {open_files}: {opened} idle connections held; GET / answered {status} in {:.1} ms (on an idle server {:.1} ms)",
        latency.as_secs_f64() * 1e3,
        first.as_secs_f64() * 1e3
    );
    assert_eq!(status, 200, "GET / with {opened} idle connections held");
    assert!(opened >= IDLE_CONNECTIONS * 9 / 10, "only {opened} of {IDLE_CONNECTIONS} connections opened");
    assert!(latency < LATENCY_CEILING, "GET / took {latency:?} with {opened} idle connections held");
}

#[test]
fn many_clients_bounded_memory_and_a_normal_request_answered() {
    let _serial = one_at_a_time();
    let server = Server::start(256);
    let (rss_idle, _) = server.rss_kib();

    // 1. idle and slowloris connections, held while a normal request is made
    idle_connections_and_a_normal_request(&server, 256);

    // 2. concurrent uploads; the body starts as a pickle (protocol 2) so the
    // diagnose command refuses it quickly once the whole body is read
    let mut body = vec![0u8; UPLOAD_BYTES];
    body[0] = 0x80;
    body[1] = 0x02;
    let body = Arc::new(body);
    let t0 = Instant::now();
    let uploads: Vec<_> = (0..UPLOADS)
        .map(|i| {
            let body = body.clone();
            let mut s = server.connect();
            let addr = server.addr;
            std::thread::spawn(move || {
                let head = format!(
                    "POST /api/diagnose?name=upload-{i}.pickle HTTP/1.1\r\nHost: {addr}\r\n\
                     Content-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                // a write error (the server answered early and closed) still leaves the answer to read
                let _ = s.write_all(head.as_bytes()).and_then(|_| s.write_all(&body));
                response(s)
            })
        })
        .collect();
    let answers: Vec<(u16, String)> = uploads.into_iter().map(|t| t.join().expect("upload thread")).collect();
    let took = t0.elapsed();
    let (rss_after, peak) = server.rss_kib();
    eprintln!(
        "serve_load: {UPLOADS} × {UPLOAD_BYTES} B uploads answered in {:.1} s; server RSS idle {} MiB, after {} MiB, peak {} MiB",
        took.as_secs_f64(),
        rss_idle >> 10,
        rss_after >> 10,
        peak >> 10
    );
    for (i, (status, body)) in answers.iter().enumerate() {
        assert!(
            *status == 400 && body.contains("pickle"),
            "upload {i}: expected the diagnose command's answer (400, the pickle refused), got {status}: {body}"
        );
    }
    assert!(peak < RSS_CEILING_KIB, "peak RSS {} MiB ≥ {} MiB", peak >> 10, RSS_CEILING_KIB >> 10);
    drop(server);

    // 3. a process allowed only 96 files: the cap drops to what that leaves (48), and
    // the idle connections still cannot starve a normal request
    let server = Server::start(96);
    idle_connections_and_a_normal_request(&server, 96);
}

// --- the same bounds in process, with short limits (each check takes well under a second)

use vramfit_cli::serve::api::Settings;
use vramfit_cli::serve::{bind, serve_with, Limits};

/// A server in its own thread with these limits; stopped when dropped.
struct InProcess {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for InProcess {
    fn drop(&mut self) {
        let _ = self.stop.take().map(|s| s.send(()));
        let _ = self.thread.take().map(|t| t.join());
    }
}

fn in_process(limits: Limits) -> InProcess {
    let listener = bind(std::net::IpAddr::from([127, 0, 0, 1]), 0).unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(serve_with(listener, Settings::default(), limits, async {
            let _ = stopped.await;
        }))
        .unwrap();
    });
    InProcess { addr, stop: Some(stop), thread: Some(thread) }
}

impl InProcess {
    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect_timeout(&self.addr, IO_TIMEOUT).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }
    fn host(&self) -> String {
        format!("Host: {}\r\n", self.addr)
    }
}

/// Whether the server closed `s` (end of file or reset) within `wait`.
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // a response (an error page) before the close
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

fn short(limits: impl FnOnce(&mut Limits)) -> Limits {
    let mut l = Limits::default();
    limits(&mut l);
    l
}

#[test]
fn idle_and_slowloris_connections_are_closed_after_the_header_timeout() {
    let _serial = one_at_a_time();
    let timeout = Duration::from_millis(300);
    let server = in_process(short(|l| l.header_timeout = timeout));
    let t0 = Instant::now();
    let mut silent = server.connect();
    let mut slow = server.connect();
    slow.write_all(format!("GET / HTTP/1.1\r\n{}X-Slow: ", server.host()).as_bytes()).unwrap();
    // a kept-alive connection after one answered request
    let mut kept = server.connect();
    kept.write_all(format!("GET /favicon.svg HTTP/1.1\r\n{}\r\n", server.host()).as_bytes()).unwrap();
    let mut first = [0u8; 12];
    kept.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    for (what, s) in [("silent", &mut silent), ("slowloris", &mut slow), ("kept-alive", &mut kept)] {
        assert!(closed_within(s, Duration::from_secs(10)), "{what} connection still open after 10 s");
    }
    let took = t0.elapsed();
    assert!(took >= timeout, "closed after {took:?}, before the {timeout:?} timeout");
}

#[test]
fn a_full_server_closes_its_idlest_connection_and_refuses_when_all_are_busy() {
    let _serial = one_at_a_time();
    let server = in_process(short(|l| l.max_connections = 4));
    let mut idle: Vec<TcpStream> = Vec::new();
    for _ in 0..6 {
        idle.push(server.connect());
        // accepted in this order
        std::thread::sleep(Duration::from_millis(30));
    }
    let mut s = server.connect();
    s.write_all(format!("GET /app.css HTTP/1.1\r\n{}Connection: close\r\n\r\n", server.host()).as_bytes()).unwrap();
    let (status, _) = response(s);
    assert_eq!(status, 200, "a request on a full server");
    let closed: Vec<bool> = idle.iter_mut().map(|s| closed_within(s, Duration::from_millis(300))).collect();
    // 7 connections for 4 places: the 3 oldest were closed, the newest stay
    assert!(closed[..3].iter().all(|&c| c), "the oldest idle connections are closed first: {closed:?}");
    assert!(closed[4..].iter().all(|&c| !c), "the newest idle connections stay open: {closed:?}");
    drop(idle);

    // four requests in progress (bodies that never finish): a fifth connection gets a 503
    let mut busy = Vec::new();
    for _ in 0..4 {
        let mut s = server.connect();
        s.write_all(
            format!("POST /api/diagnose HTTP/1.1\r\n{}Content-Length: 1000\r\n\r\npartial", server.host()).as_bytes(),
        )
        .unwrap();
        busy.push(s);
    }
    // the server must have read each request's head (a connection whose head
    // it has not read yet is idle, and would be closed for the fifth)
    std::thread::sleep(Duration::from_millis(1000));
    let (status, body) = response(server.connect());
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("4 connections busy"), "{body}");
}

#[test]
fn a_body_that_stalls_gets_408_and_a_request_over_the_budget_waits_then_503() {
    let _serial = one_at_a_time();
    // a stalled body: 408 once the body timeout passes
    let server = in_process(short(|l| l.body_timeout = Duration::from_millis(300)));
    let mut s = server.connect();
    s.write_all(format!("POST /api/diagnose HTTP/1.1\r\n{}Content-Length: 600\r\n\r\nabc", server.host()).as_bytes())
        .unwrap();
    let (status, body) = response(s);
    assert_eq!(status, 408, "{body}");
    assert!(body.contains("did not arrive within"), "{body}");

    // one body holds the whole budget while it is read: a second waits for its share, then 503
    let server = in_process(short(|l| {
        l.queue_timeout = Duration::from_millis(300);
        l.body_budget = 1000;
    }));
    let mut holder = server.connect();
    holder
        .write_all(
            format!("POST /api/diagnose HTTP/1.1\r\n{}Content-Length: 1000\r\n\r\nabc", server.host()).as_bytes(),
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let mut s = server.connect();
    s.write_all(
        format!(
            "POST /api/diagnose HTTP/1.1\r\n{}Content-Length: 10\r\nConnection: close\r\n\r\n0123456789",
            server.host()
        )
        .as_bytes(),
    )
    .unwrap();
    let (status, body) = response(s);
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("busy with other uploads"), "{body}");
    drop(holder);
}

#[test]
fn request_heads_are_capped() {
    let _serial = one_at_a_time();
    let server = in_process(Limits::default());
    let mut s = server.connect();
    let long = "a".repeat(vramfit_cli::serve::MAX_HEAD_BYTES + 1024);
    let _ = s.write_all(format!("GET / HTTP/1.1\r\n{}X-Long: {long}\r\n\r\n", server.host()).as_bytes());
    let (status, _) = response(s);
    assert_eq!(status, 431);
}
