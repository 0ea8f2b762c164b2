//! `vramfit serve`: a local web page for every command (docs/web.md).
//!
//! One page and its assets are compiled into the binary; nothing is
//! fetched from anywhere else. The page calls a JSON API that runs the
//! CLI's own functions ([`api`]), so its answers and its error messages are
//! the CLI's `--json` output and stderr. Bound to 127.0.0.1 unless `--host`
//! says otherwise; requests whose `Host` or `Origin` is not this server are
//! refused (a web page elsewhere cannot use it through DNS rebinding); no
//! path a request names is ever opened; every body has a limit.
//!
//! The server holds under many clients ([`Limits`]): at most
//! [`MAX_CONNECTIONS`] connections, the one idle the longest closed for a
//! new one; a request's headers must arrive within [`HEADER_TIMEOUT`] (also
//! how long a kept-alive connection may sit idle), its body within
//! [`BODY_TIMEOUT`]; a body's size is reserved from [`BODY_BUDGET`] before
//! a byte of it is read, so the uploads in memory never add up past it.

pub mod api;
pub mod catalog;
pub mod lookup;
pub mod request;

use api::{Answer, Settings};
use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use request::{ApiError, Endpoint};
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore, SemaphorePermit};

#[derive(clap::Args, Debug, Clone)]
pub struct ServeArgs {
    /// Port to listen on (0: any free port)
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Address to listen on [default: 127.0.0.1]; anything else exposes the page to the network (a warning says so)
    #[arg(long, value_name = "ADDR")]
    pub host: Option<IpAddr>,
    /// Open the page in the default browser
    #[arg(long)]
    pub open: bool,
    /// Let the page fetch config.json and safetensors headers of unknown hub ids from the Hugging Face Hub
    /// (off: presets, the local Hugging Face cache and pasted configs only)
    #[arg(long)]
    pub allow_hub: bool,
}

/// The Content-Security-Policy of every response: the page's own script and
/// style only, requests to this server only, no frames, no forms.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; \
                       connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/// Requests that run a command at once (each may hold an upload and its parse).
pub const CONCURRENT_RUNS: usize = 4;
/// Connections held open at once. A new connection past it closes the one
/// idle the longest (no request in progress); when every one is busy the
/// newcomer gets a 503. Well under the 256 file descriptors some systems
/// give a process, so idle sockets cannot starve `accept`.
pub const MAX_CONNECTIONS: usize = 128;
/// How long a client may take to send a request's line and headers, from
/// the connection's start or the end of its previous request: the idle
/// timeout of a kept-alive connection and the slowloris bound.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request body may take to arrive once the server reads it
/// (408 past it): a 64 MiB upload needs 1.1 MB/s.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of request bodies (and their decoded copies) in memory at once,
/// all requests together. A body's declared length (the endpoint's limit
/// when it declares none) is reserved before a byte of it is read; a
/// request waits for its share. Twice the largest body limit: two
/// 64 MiB uploads at once.
pub const BODY_BUDGET: usize = 128 << 20;
/// How long a request waits for its share of the body budget or for a
/// command slot (503 past it, with `Retry-After`).
pub const QUEUE_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of one request's line and headers (hyper's read buffer; 431 past
/// it). The longest legitimate head is a diagnose query string of 16 KiB.
pub const MAX_HEAD_BYTES: usize = 64 << 10;
/// How long stopping waits for requests in progress before it returns.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// File descriptors kept for everything but client connections (the
/// listener, the runtime, the files and Hub connections of running
/// commands) when the process may open few files: the connection cap is
/// then the soft `RLIMIT_NOFILE` minus this, so `accept` never runs out.
const FD_RESERVE: u64 = 48;
/// The connection cap never goes below this.
const MIN_CONNECTIONS: usize = 8;

/// The soft limit of open files of this process (Linux: /proc/self/limits);
/// `None` where it cannot be read or is unlimited.
fn open_files_limit() -> Option<u64> {
    let text =
        vramfit_input::read_text(std::path::Path::new("/proc/self/limits"), "the process limits", 64 << 10).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("Max open files"))?;
    line.split_whitespace().next()?.parse().ok()
}

/// The connection cap: `max`, lowered to what the file-descriptor limit leaves.
fn connection_cap(max: usize, open_files: Option<u64>) -> usize {
    match open_files {
        Some(n) => max.min(usize::try_from(n.saturating_sub(FD_RESERVE)).unwrap_or(usize::MAX).max(MIN_CONNECTIONS)),
        None => max,
    }
    .max(1)
}

/// The server's bounds under many clients; [`Limits::default`] is the
/// constants above (tests shorten the timeouts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub queue_timeout: Duration,
    pub body_budget: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: MAX_CONNECTIONS,
            header_timeout: HEADER_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
            queue_timeout: QUEUE_TIMEOUT,
            body_budget: BODY_BUDGET,
        }
    }
}

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub settings: Settings,
    /// the address the server listens on: loopback enforces `Host`/`Origin`
    pub addr: SocketAddr,
}

struct AppState {
    config: Config,
    limits: Limits,
    runs: Semaphore,
    /// bytes of request bodies in memory ([`BODY_BUDGET`])
    budget: Semaphore,
    catalog: OnceLock<Result<String, String>>,
}

type Shared = Arc<AppState>;

/// The page's files, compiled in.
pub mod assets {
    pub const INDEX_HTML: &str = include_str!("assets/index.html");
    pub const APP_JS: &str = include_str!("assets/app.js");
    pub const APP_CSS: &str = include_str!("assets/app.css");
    pub const FAVICON_SVG: &str = include_str!("assets/favicon.svg");

    /// HTML + JS + CSS, bytes (the budget: under 200 KB).
    pub fn page_bytes() -> usize {
        INDEX_HTML.len() + APP_JS.len() + APP_CSS.len()
    }
}

/// The whole application: page, assets and API.
pub fn router(config: Config) -> Router {
    router_with(config, Limits::default())
}

/// The application with these limits.
pub fn router_with(config: Config, limits: Limits) -> Router {
    let state = Arc::new(AppState {
        config,
        runs: Semaphore::new(CONCURRENT_RUNS),
        budget: Semaphore::new(limits.body_budget),
        limits,
        catalog: OnceLock::new(),
    });
    Router::new()
        .route("/", get(|| async { asset("text/html; charset=utf-8", assets::INDEX_HTML) }))
        .route("/app.js", get(|| async { asset("text/javascript; charset=utf-8", assets::APP_JS) }))
        .route("/app.css", get(|| async { asset("text/css; charset=utf-8", assets::APP_CSS) }))
        .route("/favicon.svg", get(|| async { asset("image/svg+xml", assets::FAVICON_SVG) }))
        .route("/api/catalog", get(catalog_handler))
        .route("/api/estimate", post(|s, h, b| json_endpoint(Endpoint::Estimate, s, h, b)))
        .route("/api/plan", post(|s, h, b| json_endpoint(Endpoint::Plan, s, h, b)))
        .route("/api/mig", post(|s, h, b| json_endpoint(Endpoint::Mig, s, h, b)))
        .route("/api/check", post(|s, h, b| json_endpoint(Endpoint::Check, s, h, b)))
        .route("/api/diagnose", post(diagnose_handler))
        .route("/api/fleet", post(fleet_handler))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

fn secure(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert("cross-origin-opener-policy", HeaderValue::from_static("same-origin"));
    h.insert("cross-origin-resource-policy", HeaderValue::from_static("same-origin"));
    r
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// An error as JSON: `{"error": message, "field": name|null, "status": code}`.
pub fn error_response(e: &ApiError) -> Response {
    let body = serde_json::json!({ "error": e.message, "field": e.field, "status": e.status });
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    r
}

fn answer_response(a: Answer) -> Response {
    let mut r = (StatusCode::OK, a.body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(a.content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert("x-vramfit-exit", HeaderValue::from(u16::from(a.exit)));
    r
}

async fn not_found() -> Response {
    error_response(&ApiError { status: 404, message: "not found".into(), field: None })
}

/// Refuse requests that did not come from this page: a `Host` other than
/// the loopback address the server listens on (DNS rebinding), an `Origin`
/// other than the server itself, methods other than GET and POST. Every
/// response gets the security headers.
async fn guard(State(s): State<Shared>, req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    if let Err(e) = check_request(&s.config, req.method(), req.headers()) {
        return secure(error_response(&e));
    }
    secure(next.run(req).await)
}

fn check_request(config: &Config, method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
    if method != Method::GET && method != Method::POST && method != Method::HEAD {
        return Err(ApiError { status: 405, message: format!("method {method} is not allowed"), field: None });
    }
    let forbidden = |m: String| ApiError { status: 403, message: m, field: None };
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok()).unwrap_or("");
    if config.addr.ip().is_loopback() {
        let port = config.addr.port();
        let ok: Vec<String> = ["127.0.0.1", "localhost", "[::1]"].iter().map(|h| format!("{h}:{port}")).collect();
        if !ok.iter().any(|o| o.eq_ignore_ascii_case(host)) {
            return Err(forbidden(format!(
                "Host '{}' is not this server: open http://127.0.0.1:{port}/",
                host.chars().take(80).collect::<String>()
            )));
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let o = origin.to_str().unwrap_or("");
        if !o.eq_ignore_ascii_case(&format!("http://{host}")) {
            return Err(forbidden("requests from another site are refused".into()));
        }
    }
    if headers.get("sec-fetch-site").and_then(|v| v.to_str().ok()) == Some("cross-site") {
        return Err(forbidden("requests from another site are refused".into()));
    }
    Ok(())
}

fn busy(message: String) -> ApiError {
    ApiError { status: 503, message, field: None }
}

fn shutting_down() -> ApiError {
    busy("the server is shutting down".into())
}

/// Read a body of at most `limit` bytes (413 beyond; a declared length over
/// it is refused before anything is read). First `copies` times its size
/// (the declared length, else `limit`) is reserved from the body budget,
/// waiting while other requests hold it; the reservation is held until the
/// request is answered. The body must arrive within the body timeout (408).
async fn read_body<'s>(
    s: &'s AppState,
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    copies: usize,
    what: &str,
) -> Result<(Vec<u8>, SemaphorePermit<'s>), ApiError> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::too_large(what, limit));
    }
    let size = declared.map_or(limit, |n| n as usize);
    // a request larger than the whole budget takes all of it: it then runs alone
    let reserve = size.saturating_mul(copies).min(s.limits.body_budget);
    let reserve = u32::try_from(reserve).unwrap_or(u32::MAX);
    let permit = match tokio::time::timeout(s.limits.queue_timeout, s.budget.acquire_many(reserve)).await {
        Ok(Ok(p)) => p,
        Ok(Err(_)) => return Err(shutting_down()),
        Err(_) => {
            return Err(busy(format!(
            "the server is busy with other uploads ({} MiB of request bodies at once): {what} waited {} s; try again",
            s.limits.body_budget >> 20,
            s.limits.queue_timeout.as_secs()
        )))
        }
    };
    let read = async {
        use axum::body::HttpBody;
        let mut buf: Vec<u8> = Vec::with_capacity(declared.map_or(0, |n| n as usize));
        let mut body = std::pin::pin!(body);
        while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            let frame = frame.map_err(|e| ApiError {
                status: 400,
                message: format!("{what} could not be read: {e}"),
                field: None,
            })?;
            let Ok(data) = frame.into_data() else { continue };
            let len = buf.len() + data.len();
            if len > limit {
                return Err(ApiError::too_large(what, limit));
            }
            if len > buf.capacity() {
                // grow by doubling, never past the limit: what is held stays within the reservation
                buf.reserve_exact(len.max(buf.capacity().saturating_mul(2)).min(limit) - buf.len());
            }
            buf.extend_from_slice(&data);
        }
        Ok(buf)
    };
    match tokio::time::timeout(s.limits.body_timeout, read).await {
        Ok(Ok(buf)) => Ok((buf, permit)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ApiError {
            status: 408,
            message: format!("{what} did not arrive within {} s", s.limits.body_timeout.as_secs()),
            field: None,
        }),
    }
}

/// One of the [`CONCURRENT_RUNS`] command slots, waited for at most the
/// queue timeout (then 503).
async fn run_slot(s: &AppState) -> Result<SemaphorePermit<'_>, ApiError> {
    match tokio::time::timeout(s.limits.queue_timeout, s.runs.acquire()).await {
        Ok(Ok(p)) => Ok(p),
        Ok(Err(_)) => Err(shutting_down()),
        Err(_) => Err(busy(format!(
            "the server is busy: {CONCURRENT_RUNS} commands are running and this one waited {} s; try again",
            s.limits.queue_timeout.as_secs()
        ))),
    }
}

/// Run the command on a blocking thread once a command slot is free; a
/// panic becomes a 500 without its message or backtrace.
async fn run_command(
    s: &Shared,
    ep: Endpoint,
    decoded: request::Decoded,
    upload: Option<Vec<u8>>,
) -> Result<Answer, ApiError> {
    let _permit = run_slot(s).await?;
    let settings = s.config.settings.clone();
    match tokio::task::spawn_blocking(move || api::run(&settings, ep, decoded, upload)).await {
        Ok(r) => r,
        Err(_) => Err(ApiError {
            status: 500,
            message: "internal error: vramfit failed on this request (a bug: please report the request)".into(),
            field: None,
        }),
    }
}

async fn json_endpoint(ep: Endpoint, State(s): State<Shared>, headers: HeaderMap, body: Body) -> Response {
    let r = async {
        let what = format!("the /api/{} request body", ep.name());
        // the body and the request decoded from it are both in memory for a moment
        let (bytes, _reserved) = read_body(&s, &headers, body, ep.body_limit(), 2, &what).await?;
        let decoded = request::decode_json(ep, &bytes)?;
        drop(bytes);
        run_command(&s, ep, decoded, None).await
    }
    .await;
    match r {
        Ok(a) => answer_response(a),
        Err(e) => error_response(&e),
    }
}

async fn diagnose_handler(State(s): State<Shared>, RawQuery(q): RawQuery, headers: HeaderMap, body: Body) -> Response {
    let ep = Endpoint::Diagnose;
    let r = async {
        let decoded = request::decode_query(ep, q.as_deref().unwrap_or(""))?;
        // the upload moves into the command without a copy
        let (bytes, _reserved) = read_body(&s, &headers, body, ep.body_limit(), 1, "the uploaded file").await?;
        run_command(&s, ep, decoded, Some(bytes)).await
    }
    .await;
    match r {
        Ok(a) => answer_response(a),
        Err(e) => error_response(&e),
    }
}

/// `/api/fleet`: `check --fleet` on an uploaded folder (api::fleet).
async fn fleet_handler(State(s): State<Shared>, headers: HeaderMap, body: Body) -> Response {
    let r = async {
        // the body, the JSON value parsed from it and the node files built from
        // that value are in memory together for a moment
        let (bytes, _reserved) =
            read_body(&s, &headers, body, api::FLEET_BODY_LIMIT, 3, "the /api/fleet request body").await?;
        let _permit = run_slot(&s).await?;
        match tokio::task::spawn_blocking(move || api::fleet(&bytes)).await {
            Ok(r) => r,
            Err(_) => Err(ApiError {
                status: 500,
                message: "internal error: vramfit failed on this request (a bug: please report the request)".into(),
                field: None,
            }),
        }
    }
    .await;
    match r {
        Ok(a) => answer_response(a),
        Err(e) => error_response(&e),
    }
}

async fn catalog_handler(State(s): State<Shared>) -> Response {
    let allow_hub = s.config.settings.allow_hub;
    let state = s.clone();
    let doc = tokio::task::spawn_blocking(move || {
        state
            .catalog
            .get_or_init(|| {
                catalog::catalog(allow_hub)
                    .map_err(|e| crate::error_text(&e))
                    .and_then(|c| serde_json::to_string(&c).map_err(|e| e.to_string()))
            })
            .clone()
    })
    .await;
    match doc {
        Ok(Ok(body)) => answer_response(Answer { content_type: "application/json", body, exit: 0 }),
        Ok(Err(m)) => error_response(&ApiError { status: 500, message: m, field: None }),
        Err(_) => error_response(&ApiError { status: 500, message: "internal error".into(), field: None }),
    }
}

/// Bind the listening socket (a clear error for a port in use).
pub fn bind(host: IpAddr, port: u16) -> anyhow::Result<std::net::TcpListener> {
    let addr = SocketAddr::new(host, port);
    let l = std::net::TcpListener::bind(addr).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            anyhow::anyhow!("--port {port}: already in use on {host}; pick another (--port 0: any free port)")
        }
        std::io::ErrorKind::AddrNotAvailable => anyhow::anyhow!("--host {host}: not an address of this machine"),
        _ => anyhow::anyhow!("cannot listen on {addr}: {e}"),
    })?;
    l.set_nonblocking(true)?;
    Ok(l)
}

/// Serve on a bound listener until the future `stop` completes.
pub async fn serve_until(
    listener: std::net::TcpListener,
    settings: Settings,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_with(listener, settings, Limits::default(), stop).await
}

/// One open connection.
struct Connection {
    /// requests in progress on it
    busy: usize,
    /// when it last became idle (or was accepted)
    idle_since: Instant,
    /// closes it (the connection task drops it)
    close: Arc<Notify>,
}

/// The open connections, for the cap and for closing the idlest.
#[derive(Default)]
struct Connections {
    table: Mutex<HashMap<u64, Connection>>,
    next: AtomicU64,
}

impl Connections {
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Connection>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register a new connection: its id and close signal, after closing
    /// the idlest connection when `max` are open; `None` when all are busy.
    fn admit(&self, max: usize) -> Option<(u64, Arc<Notify>)> {
        let mut t = self.table();
        if t.len() >= max && !Self::close_idlest_in(&mut t) {
            return None;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let close = Arc::new(Notify::new());
        t.insert(id, Connection { busy: 0, idle_since: Instant::now(), close: close.clone() });
        Some((id, close))
    }

    /// Close the connection idle the longest; false when none is idle.
    fn close_idlest(&self) -> bool {
        Self::close_idlest_in(&mut self.table())
    }

    fn close_idlest_in(t: &mut HashMap<u64, Connection>) -> bool {
        let idlest = t.iter().filter(|(_, c)| c.busy == 0).min_by_key(|(_, c)| c.idle_since).map(|(&id, _)| id);
        match idlest.and_then(|id| t.remove(&id)) {
            Some(c) => {
                // a stored permit: the task sees it even if it is not waiting yet
                c.close.notify_one();
                true
            }
            None => false,
        }
    }

    fn begin(&self, id: u64) {
        if let Some(c) = self.table().get_mut(&id) {
            c.busy += 1;
        }
    }

    fn end(&self, id: u64) {
        if let Some(c) = self.table().get_mut(&id) {
            c.busy = c.busy.saturating_sub(1);
            if c.busy == 0 {
                c.idle_since = Instant::now();
            }
        }
    }

    fn remove(&self, id: u64) {
        self.table().remove(&id);
    }
}

/// The application as a hyper service that marks its connection busy
/// while a request is in progress (a busy connection is never closed for
/// a newer one).
#[derive(Clone)]
struct Tracked {
    app: hyper_util::service::TowerToHyperService<Router>,
    conns: Arc<Connections>,
    id: u64,
}

/// Marks a connection busy while alive.
struct Busy {
    conns: Arc<Connections>,
    id: u64,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.conns.end(self.id);
    }
}

type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl hyper::service::Service<axum::http::Request<hyper::body::Incoming>> for Tracked {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Result<Response, Self::Error>>;

    fn call(&self, req: axum::http::Request<hyper::body::Incoming>) -> Self::Future {
        self.conns.begin(self.id);
        let busy = Busy { conns: self.conns.clone(), id: self.id };
        let answer = self.app.call(req);
        Box::pin(async move {
            let r = answer.await;
            drop(busy);
            r
        })
    }
}

/// The answer to a connection past the cap when every open one is busy.
fn refuse_connection(sock: tokio::net::TcpStream, max: usize) {
    let body = serde_json::json!({
        "error": format!("the server has {max} connections busy with requests; try again shortly"),
        "field": null,
        "status": 503,
    })
    .to_string();
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nx-content-type-options: nosniff\r\nconnection: close\r\n\r\n",
        body.len()
    );
    // a few hundred bytes fit the socket's send buffer: never wait for this client
    let _ = sock.try_write(format!("{head}{body}").as_bytes());
}

/// Serve one connection until it ends, is closed for a newer one, or the
/// server stops (then the request in progress is finished first).
async fn serve_connection(
    sock: tokio::net::TcpStream,
    svc: Tracked,
    close: Arc<Notify>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
    header_timeout: Duration,
) {
    let (conns, id) = (svc.conns.clone(), svc.id);
    let _ = sock.set_nodelay(true);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(header_timeout)
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(MAX_HEAD_BYTES)
        .keep_alive(true);
    let conn = http.serve_connection(hyper_util::rt::TokioIo::new(sock), svc);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        // dropping the connection closes its socket
        () = close.notified() => {}
        () = async { let _ = stopping.wait_for(|s| *s).await; } => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.as_mut().await;
        }
    }
    conns.remove(id);
}

/// Serve on a bound listener with these limits until `stop` completes; then
/// stop accepting, close idle connections and give requests in progress up
/// to a few seconds to finish.
pub async fn serve_with(
    listener: std::net::TcpListener,
    settings: Settings,
    limits: Limits,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let addr = listener.local_addr()?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let (max, header_timeout) = (connection_cap(limits.max_connections, open_files_limit()), limits.header_timeout);
    let app = router_with(Config { settings, addr }, limits);
    let conns = Arc::new(Connections::default());
    let (stopping_tx, stopping) = tokio::sync::watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    let mut stop = std::pin::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((sock, _)) => match conns.admit(max) {
                    Some((id, close)) => {
                        let svc = Tracked {
                            app: hyper_util::service::TowerToHyperService::new(app.clone()),
                            conns: conns.clone(),
                            id,
                        };
                        tasks.spawn(serve_connection(sock, svc, close, stopping.clone(), header_timeout));
                    }
                    None => refuse_connection(sock, max),
                },
                Err(e) => {
                    // out of file descriptors (EMFILE 24, ENFILE 23 on Linux and macOS): free one
                    // by closing the idlest connection; anything else (a connection gone before it
                    // was accepted): let the backlog wait a moment
                    if matches!(e.raw_os_error(), Some(23) | Some(24)) {
                        conns.close_idlest();
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
    drop(listener);
    let _ = stopping_tx.send(true);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, async { while tasks.join_next().await.is_some() {} }).await;
    Ok(())
}

/// `vramfit serve`: listen, say where, serve until Ctrl-C.
pub fn run(a: ServeArgs) -> anyhow::Result<()> {
    let host = a.host.unwrap_or(IpAddr::from([127, 0, 0, 1]));
    let listener = bind(host, a.port)?;
    let addr = listener.local_addr()?;
    let shown = if host.is_unspecified() { SocketAddr::new(IpAddr::from([127, 0, 0, 1]), addr.port()) } else { addr };
    let url = format!("http://{shown}/");
    if !host.is_loopback() {
        eprintln!(
            "vramfit: warning: listening on {addr}: other machines on the network can use this page (and, with --allow-hub, make this machine fetch from the Hub); the Host check that guards 127.0.0.1 is off"
        );
    }
    eprintln!(
        "vramfit: serving {url} (Ctrl-C stops){}",
        if a.allow_hub { "; the Hub may be asked for unknown hub ids" } else { "" }
    );
    if a.open {
        open_browser(&url);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(serve_until(listener, Settings { allow_hub: a.allow_hub }, async {
        let _ = tokio::signal::ctrl_c().await;
    }))
}

/// Ask the desktop to open `url`; a failure is a note, not an error. The
/// opener is waited for on its own thread: `xdg-open` on a machine with no
/// browser starts fine and then exits non-zero, which must still be said.
fn open_browser(url: &str) {
    let cmd: &[&str] = if cfg!(target_os = "macos") {
        &["open"]
    } else if cfg!(windows) {
        &["cmd", "/c", "start", ""]
    } else {
        &["xdg-open"]
    };
    let r = std::process::Command::new(cmd[0])
        .args(&cmd[1..])
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    let (name, url) = (cmd[0].to_string(), url.to_string());
    match r {
        Err(e) => eprintln!("{}", no_browser_note(&name, &e.to_string(), &url)),
        Ok(mut child) => {
            std::thread::spawn(move || match child.wait() {
                Ok(status) if !status.success() => {
                    eprintln!("{}", no_browser_note(&name, &format!("it exited with {status}"), &url))
                }
                Err(e) => eprintln!("{}", no_browser_note(&name, &e.to_string(), &url)),
                Ok(_) => {}
            });
        }
    }
}

fn no_browser_note(opener: &str, why: &str, url: &str) -> String {
    format!("vramfit: note: --open could not open a browser ({opener}: {why}); open {url} in a browser yourself")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_leaves_file_descriptors_for_the_rest() {
        assert_eq!(connection_cap(MAX_CONNECTIONS, Some(1024)), 128);
        assert_eq!(connection_cap(MAX_CONNECTIONS, Some(256)), 128);
        assert_eq!(connection_cap(MAX_CONNECTIONS, Some(96)), 48);
        assert_eq!(connection_cap(MAX_CONNECTIONS, Some(20)), MIN_CONNECTIONS);
        assert_eq!(connection_cap(MAX_CONNECTIONS, None), 128);
        assert_eq!(connection_cap(0, None), 1);
        #[cfg(target_os = "linux")]
        assert!(open_files_limit().is_some_and(|n| n > 0));
    }
}
