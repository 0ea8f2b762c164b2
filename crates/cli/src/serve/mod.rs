//! `vramfit serve`: a local web page for every command (docs/web.md).
//!
//! One page and its assets are compiled into the binary; nothing is
//! fetched from anywhere else. The page calls a JSON API that runs the
//! CLI's own functions ([`api`]), so its answers and its error messages are
//! the CLI's `--json` output and stderr. Bound to 127.0.0.1 unless `--host`
//! says otherwise; requests whose `Host` or `Origin` is not this server are
//! refused (a web page elsewhere cannot use it through DNS rebinding); no
//! path a request names is ever opened; every body has a limit.

pub mod api;
pub mod catalog;
pub mod lookup;
pub mod request;

use api::{Answer, Settings};
use axum::body::{to_bytes, Body};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use request::{ApiError, Endpoint};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use tokio::sync::Semaphore;

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
const CONCURRENT_RUNS: usize = 4;

/// Server settings.
#[derive(Debug, Clone)]
pub struct Config {
    pub settings: Settings,
    /// the address the server listens on: loopback enforces `Host`/`Origin`
    pub addr: SocketAddr,
}

struct AppState {
    config: Config,
    runs: Semaphore,
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
    let state = Arc::new(AppState { config, runs: Semaphore::new(CONCURRENT_RUNS), catalog: OnceLock::new() });
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

/// Read a body up to `limit` bytes (413 beyond; the declared length is
/// checked first so an oversized upload is refused before it is read).
async fn read_body(headers: &HeaderMap, body: Body, limit: usize, what: &str) -> Result<Vec<u8>, ApiError> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::too_large(what, limit));
    }
    to_bytes(body, limit).await.map(|b| b.to_vec()).map_err(|_| ApiError::too_large(what, limit))
}

/// Run the command on a blocking thread; a panic becomes a 500 without its
/// message or backtrace.
async fn run_command(
    s: &Shared,
    ep: Endpoint,
    decoded: request::Decoded,
    upload: Option<Vec<u8>>,
) -> Result<Answer, ApiError> {
    let _permit =
        s.runs.acquire().await.map_err(|_| ApiError { status: 503, message: "shutting down".into(), field: None })?;
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
        let bytes = read_body(&headers, body, ep.body_limit(), &format!("the /api/{} request body", ep.name())).await?;
        let decoded = request::decode_json(ep, &bytes)?;
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
        let bytes = read_body(&headers, body, ep.body_limit(), "the uploaded file").await?;
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
        let bytes = read_body(&headers, body, api::FLEET_BODY_LIMIT, "the /api/fleet request body").await?;
        let _permit = s.runs.acquire().await.map_err(|_| ApiError {
            status: 503,
            message: "shutting down".into(),
            field: None,
        })?;
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
    let addr = listener.local_addr()?;
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let app = router(Config { settings, addr });
    axum::serve(listener, app).with_graceful_shutdown(stop).await?;
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

/// Ask the desktop to open `url`; a failure is a note, not an error.
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
    if let Err(e) = r {
        eprintln!("vramfit: note: could not open a browser ({}: {e}); open {url} yourself", cmd[0]);
    }
}
