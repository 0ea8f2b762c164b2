//! The local web page in a real browser: headless Chromium driven through
//! WebDriver (Debian's `chromium` and `chromium-driver`; `.ci/run` installs
//! them), against a server each test starts on a free loopback port. A
//! person's steps: fill the estimate form, read the bar, the verdict and
//! the table; switch to Chinese; paste an OOM message; upload a snapshot;
//! plan, lay out MIG slices, check a machine. After each, the page must have
//! made no request outside the server and logged no console error.
//!
//! Screenshots of every view at 1280×800 go to `target/web-screenshots/`
//! (docs/img/ holds a reviewed copy). Without Chromium and ChromeDriver
//! these tests skip, saying so on the terminal (not in captured output) and
//! what to install; with `VRAMFIT_REQUIRE_BROWSER=1` (set by `.ci/run`, which
//! installs both) a missing browser fails them, so CI can never skip them.

use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use vramfit_cli::serve::api::Settings;

/// Set (to anything but `0`) where the browser tests must run: `.ci/run`.
const REQUIRE_BROWSER: &str = "VRAMFIT_REQUIRE_BROWSER";

/// Writes straight to the process's stderr, past libtest's capture of
/// `eprintln!`, so a skipped browser test is seen in a plain `cargo test`.
fn skip_loudly(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED browser test {test}: {why}. Set {REQUIRE_BROWSER}=1 to make this a failure. ***"
    );
}

/// One browser at a time: the machine has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const WAIT: Duration = Duration::from_secs(30);

fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path).chain([PathBuf::from("/usr/bin"), PathBuf::from("/usr/lib/chromium")]) {
        for n in names {
            let p = dir.join(n);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    None
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel).canonicalize().unwrap()
}

fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let d = target.join("web-screenshots");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// chromedriver's logs (`browser`: the console; `performance`: DevTools events).
#[derive(Debug)]
struct GetLog(&'static str);

impl WebDriverCompatibleCommand for GetLog {
    fn endpoint(&self, base: &url::Url, session: Option<&str>) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }
    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(json!({ "type": self.0 }).to_string()))
    }
}

/// A server, a chromedriver and a browser session, torn down on drop.
struct Page {
    base: String,
    client: Option<Client>,
    driver: Child,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<std::thread::JoinHandle<()>>,
    rt: tokio::runtime::Runtime,
    downloads: PathBuf,
    _guard: std::sync::MutexGuard<'static, ()>,
}

impl Page {
    /// The page in a browser, or `None` (after saying so on the terminal)
    /// when Chromium or ChromeDriver is missing and the browser is not
    /// required (`VRAMFIT_REQUIRE_BROWSER` unset).
    fn start(test: &str) -> Option<Page> {
        let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let driver_bin = find_program(&["chromedriver"]);
        let chromium = find_program(&["chromium", "chromium-browser"]);
        let (Some(driver_bin), Some(chromium)) = (driver_bin, chromium) else {
            let missing = match (find_program(&["chromedriver"]), find_program(&["chromium", "chromium-browser"])) {
                (None, None) => "Chromium and ChromeDriver",
                (None, Some(_)) => "ChromeDriver",
                _ => "Chromium",
            };
            let why = format!(
                "{missing} not found: install Debian's chromium and chromium-driver \
                 (`apt-get install -y chromium chromium-driver`; .ci/run does it)"
            );
            if std::env::var_os(REQUIRE_BROWSER).is_some_and(|v| !v.is_empty() && v != "0") {
                panic!("{REQUIRE_BROWSER} is set and the browser tests cannot run: {why}");
            }
            skip_loudly(test, &why);
            return None;
        };

        // the server, on a free loopback port, in its own thread
        let listener = vramfit_cli::serve::bind(IpAddr::from([127, 0, 0, 1]), 0).unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
            rt.block_on(vramfit_cli::serve::serve_until(listener, Settings::default(), async {
                let _ = stopped.await;
            }))
            .unwrap();
        });

        let port = free_port();
        let driver = Command::new(&driver_bin)
            .args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", driver_bin.display()));
        let t0 = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(t0.elapsed() < Duration::from_secs(20), "chromedriver did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }

        let profile = std::env::temp_dir().join(format!("vramfit-chromium-{}-{port}", std::process::id()));
        let downloads = profile.join("downloads");
        std::fs::create_dir_all(&downloads).unwrap();
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                // --no-sandbox: CI runs as root, where Chromium refuses its sandbox; the
                // background-networking switches keep Chromium itself from calling out
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                    "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--disable-extensions", "--disable-default-apps",
                    "--window-size=1280,800", "--force-device-scale-factor=1", "--hide-scrollbars", "--lang=en-US",
                    format!("--user-data-dir={}", profile.display()),
                ],
                "prefs": {
                    "download.default_directory": downloads,
                    "download.prompt_for_download": false,
                    "intl.accept_languages": "en-US",
                },
            },
            "goog:loggingPrefs": { "browser": "ALL", "performance": "ALL" },
        });
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let client = rt
            .block_on(async {
                let mut b = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
                b.capabilities(caps.as_object().unwrap().clone());
                b.connect(&format!("http://127.0.0.1:{port}")).await
            })
            .unwrap_or_else(|e| panic!("cannot start headless Chromium through chromedriver: {e}"));
        Some(Page {
            base: format!("http://{addr}"),
            client: Some(client),
            driver,
            stop: Some(stop),
            server: Some(server),
            rt,
            downloads,
            _guard: guard,
        })
    }

    fn c(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    fn go(&self, hash: &str) {
        let url = format!("{}/{hash}", self.base);
        self.rt.block_on(self.c().goto(&url)).unwrap();
        self.viewport(1280, 800);
        self.wait("body[data-ready]");
    }

    /// Size the window so the page itself (the viewport) is `w` × `h`.
    fn viewport(&self, w: u32, h: u32) {
        self.rt.block_on(self.c().set_window_size(w, h)).unwrap();
        let inner = self.js("return [window.innerWidth, window.innerHeight]");
        let (iw, ih) = (inner[0].as_u64().unwrap() as u32, inner[1].as_u64().unwrap() as u32);
        if (iw, ih) != (w, h) {
            self.rt.block_on(self.c().set_window_size(w + (w - iw.min(w)), h + (h - ih.min(h)))).unwrap();
        }
    }

    fn js(&self, script: &str) -> Value {
        self.rt.block_on(self.c().execute(script, vec![])).unwrap_or_else(|e| panic!("{script}: {e}"))
    }

    /// Wait until the CSS selector matches and return its text.
    fn wait(&self, css: &str) -> String {
        let t0 = Instant::now();
        loop {
            let v = self.js(&format!(
                "const e = document.querySelector({}); return e && !document.querySelector('.results.busy') ? e.textContent : null;",
                json!(css)
            ));
            if let Value::String(s) = v {
                return s;
            }
            if t0.elapsed() > WAIT {
                let out = self.js("return document.querySelector('main').innerText");
                panic!("timed out waiting for {css}; the page shows:\n{out}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn count(&self, css: &str) -> u64 {
        self.js(&format!("return document.querySelectorAll({}).length", json!(css))).as_u64().unwrap()
    }

    fn text(&self, css: &str) -> String {
        self.js(&format!("const e = document.querySelector({}); return e ? e.textContent : ''", json!(css)))
            .as_str()
            .unwrap()
            .to_string()
    }

    fn click(&self, css: &str) {
        let e = self.rt.block_on(self.c().find(Locator::Css(css))).unwrap_or_else(|e| panic!("{css}: {e}"));
        self.rt.block_on(e.click()).unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    /// Type into a field as a person would (the field cleared first).
    fn typ(&self, css: &str, text: &str) {
        let e = self.rt.block_on(self.c().find(Locator::Css(css))).unwrap_or_else(|e| panic!("{css}: {e}"));
        self.rt.block_on(e.clear()).unwrap();
        self.rt.block_on(e.send_keys(text)).unwrap();
    }

    /// Choose an option of a `<select>` by its value, with the mouse.
    fn choose(&self, select: &str, value: &str) {
        self.click(select);
        self.click(&format!("{select} option[value=\"{value}\"]"));
    }

    fn upload(&self, css: &str, file: &Path) {
        let e = self.rt.block_on(self.c().find(Locator::Css(css))).unwrap();
        self.rt.block_on(e.send_keys(file.to_str().unwrap())).unwrap();
    }

    fn screenshot(&self, name: &str) {
        // let transitions end before the picture
        std::thread::sleep(Duration::from_millis(300));
        let png = self.rt.block_on(self.c().screenshot()).unwrap();
        std::fs::write(screenshot_dir().join(name), png).unwrap();
    }

    fn log(&self, kind: &'static str) -> Vec<Value> {
        match self.rt.block_on(self.c().issue_cmd(GetLog(kind))).unwrap() {
            Value::Array(a) => a,
            other => panic!("chromedriver log {kind}: {other}"),
        }
    }

    /// Console errors since the last call, except `allowed` substrings.
    fn console_errors(&self, allowed: &[&str]) -> Vec<String> {
        self.log("browser")
            .into_iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .filter(|m| !allowed.iter().any(|a| m.contains(a)))
            .collect()
    }

    /// Every request since the last call, as (URL, the document that made
    /// it), from DevTools network events, and every resource the page
    /// itself timed.
    fn requests(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .log("performance")
            .into_iter()
            .filter_map(|e| serde_json::from_str::<Value>(e["message"].as_str()?).ok())
            .filter(|m| m["message"]["method"] == "Network.requestWillBeSent")
            .filter_map(|m| {
                let p = &m["message"]["params"];
                Some((p["request"]["url"].as_str()?.to_string(), p["documentURL"].as_str().unwrap_or("").to_string()))
            })
            .collect();
        if let Value::Array(a) = self.js("return performance.getEntriesByType('resource').map(e => e.name)") {
            out.extend(a.into_iter().filter_map(|v| v.as_str().map(|u| (u.to_string(), self.base.clone()))));
        }
        out
    }

    /// Nothing left the server, and the console stayed clean: no request of
    /// the page went anywhere but the server (or its own data:/blob: URLs),
    /// and no request of any kind (the browser's own included) went to the
    /// network. Chromium's built-in pages (chrome://) never touch it.
    fn assert_clean(&self, step: &str, allowed_console: &[&str]) {
        let ours = |u: &str| u.starts_with(&self.base) || u.starts_with("data:") || u.starts_with("blob:");
        let network = |u: &str| ["http:", "https:", "ws:", "wss:", "ftp:"].iter().any(|s| u.starts_with(s));
        let outside: Vec<String> = self
            .requests()
            .into_iter()
            .filter(|(u, doc)| (doc.starts_with(&self.base) && !ours(u)) || (network(u) && !ours(u)))
            .map(|(u, _)| u)
            .collect();
        assert!(outside.is_empty(), "{step}: requests outside the server: {outside:?}");
        let errors = self.console_errors(allowed_console);
        assert!(errors.is_empty(), "{step}: console errors: {errors:?}");
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = self.rt.block_on(c.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(h) = self.server.take() {
            let _ = h.join();
        }
    }
}

#[test]
fn estimate_form_bar_verdict_table_and_language() {
    let Some(p) = Page::start("estimate_form_bar_verdict_table_and_language") else { return };
    p.go("#/estimate");
    p.wait("#view-estimate .empty");
    assert_eq!(p.text("#tabs a.on"), "Estimate");
    // fill the form as a person would
    p.typ("#form-estimate input[name=model]", "llama-2-7b");
    p.choose("#form-estimate select[name=gpu]", "rtx-4090");
    p.click("#form-estimate button[type=submit]");
    p.wait("#estimate-result");
    // the verdict band, with the CLI's figures
    assert_eq!(p.js("return document.querySelector('.band').dataset.verdict"), "fits");
    let band = p.text(".band");
    assert!(band.contains("Fits on RTX 4090"), "{band}");
    assert!(band.contains("15.46 GiB of 23.55 GiB usable") && band.contains("8.09 GiB headroom"), "{band}");
    // the bar: one segment per category, drawn by the CLI's renderer
    assert!(p.count("#memory-bar svg rect[fill='#3d6fd1']") >= 1, "weights segment");
    assert!(p.text("#memory-bar svg").contains("weights 12.55 GiB"));
    assert!(p.text("#memory-bar svg").contains("headroom 8.09 GiB"));
    // the table, and a formula on demand
    assert_eq!(p.count("#category-table tr.cat"), 6);
    let first = p.text("#category-table tr.cat");
    assert!(first.contains("weights") && first.contains("12.55 GiB") && first.contains("81.2%"), "{first}");
    assert!(p.text("#category-table tr.total").contains("15.46 GiB"));
    assert_eq!(p.count("#category-table tr.detail:not([hidden])"), 0);
    p.screenshot("estimate.png");
    p.click("#category-table tr.cat[data-category=kv_cache] button");
    assert_eq!(p.count("#category-table tr.detail:not([hidden])"), 1);
    let formula = p.text("#category-table tr.detail:not([hidden])");
    assert!(formula.contains("Formula") && formula.contains("2.00 GiB"), "{formula}");
    p.js("document.querySelector('#category-table tr.cat[data-category=kv_cache]').scrollIntoView()");
    p.screenshot("estimate_formula.png");
    // the sweep: largest context/concurrency, every format, the cards that hold it
    assert_eq!(p.text("[data-knob=concurrency] .value"), "5");
    assert!(p.text("#variants tr[data-value=int4]").contains("6.53 GiB"));
    assert!(p.text("#cards-hold").contains("RTX 4090"));
    // the state is in the URL: a reload shows the same answer
    let url = p.rt.block_on(p.c().current_url()).unwrap().to_string();
    assert!(url.contains("model=llama-2-7b") && url.contains("gpu=rtx-4090"), "{url}");
    p.js("document.querySelector('.sweep').scrollIntoView()");
    p.screenshot("estimate_sweep.png");
    p.assert_clean("estimate", &[]);
    p.rt.block_on(p.c().refresh()).unwrap();
    p.wait("#estimate-result");
    assert!(p.text(".band").contains("Fits on RTX 4090"));

    // switch the language: labels, verdict and chart in Chinese, numbers the same
    p.click(".lang button[data-lang=zh]");
    p.wait("#estimate-result");
    let t0 = Instant::now();
    while !p.text(".band").contains("放得下") {
        assert!(t0.elapsed() < WAIT, "the band did not switch: {}", p.text(".band"));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(p.js("return document.documentElement.lang"), "zh-CN");
    assert_eq!(p.text("#tabs a.on"), "显存估算");
    assert!(p.text(".band").contains("15.46 GiB"));
    assert!(p.text("#memory-bar svg").contains("权重 12.55 GiB"), "{}", p.text("#memory-bar svg"));
    assert!(p.text("#category-table").contains("每卡合计"));
    let url = p.rt.block_on(p.c().current_url()).unwrap().to_string();
    assert!(url.contains("lang=zh"), "{url}");
    p.screenshot("estimate_zh.png");
    p.assert_clean("language switch", &[]);
}

#[test]
fn bad_input_shows_the_clis_message_at_the_field() {
    let Some(p) = Page::start("bad_input_shows_the_clis_message_at_the_field") else { return };
    p.go("#/estimate?model=llama-2-7b");
    p.wait("#estimate-result");
    p.choose("#form-estimate select[name=gpu]", "__custom");
    p.typ("#form-estimate input[name=gpu_mem]", "24");
    p.click("#form-estimate button[type=submit]");
    p.wait("#out-estimate .error");
    let msg = p.text("#out-estimate .error");
    assert!(msg.contains("Input problem") && msg.contains("--gpu-mem"), "{msg}");
    assert!(p.text("#form-estimate .invalid .field-error").contains("--gpu-mem"));
    // the one console message is the browser's note of the 400 itself
    p.assert_clean("bad input", &["status of 400"]);
}

/// `context=128k` in a shared URL is the 131,072-token answer (it used to
/// be dropped by a number field, showing the 4,096-token one), and a value
/// no field reads is sent and refused at its field, never emptied.
#[test]
fn a_url_context_of_128k_is_kept() {
    let Some(p) = Page::start("a_url_context_of_128k_is_kept") else { return };
    p.go("#/estimate?model=llama-3.1-8b&context=128k");
    p.wait("#estimate-result");
    assert_eq!(p.js("return document.querySelector('#form-estimate input[name=context]').value"), "128k");
    let line = p.text("#estimate-result .model-line");
    assert!(line.contains("seq 131072"), "{line}");
    // a number field given text it cannot hold keeps it; the answer names the field
    p.go("#/estimate?model=llama-3.1-8b&batch=4x");
    // a new hash alone is not a new page: load it
    p.rt.block_on(p.c().refresh()).unwrap();
    p.wait("#out-estimate .error");
    assert_eq!(p.js("return document.querySelector('#form-estimate input[name=batch]').value"), "4x");
    assert!(p.text("#form-estimate .invalid .field-error").contains("--batch"), "{}", p.text("#out-estimate"));
    p.assert_clean("context 128k", &["status of 400"]);
}

#[test]
fn diagnose_a_pasted_oom_and_an_uploaded_snapshot() {
    let Some(p) = Page::start("diagnose_a_pasted_oom_and_an_uploaded_snapshot") else { return };
    p.go("#/diagnose");
    p.wait("#view-diagnose .empty");
    let oom = std::fs::read_to_string(fixture("diagnose/tests/fixtures/oom/pt22_cads4_shortage.txt")).unwrap();
    p.typ("#form-diagnose textarea[name=text]", &oom);
    p.click("#form-diagnose button[type=submit]");
    p.wait("#diagnose-result .oom");
    // the class the CLI gives this message
    let want = vramfit_cli::serve::api::run(
        &Settings::default(),
        vramfit_cli::serve::request::Endpoint::Diagnose,
        vramfit_cli::serve::request::decode_query(vramfit_cli::serve::request::Endpoint::Diagnose, "").unwrap(),
        Some(oom.into_bytes()),
    )
    .unwrap();
    let want: Value = serde_json::from_str(&want.body).unwrap();
    let class = want["diagnosis"]["ooms"][0]["verdict"]["class"].as_str().unwrap().to_string();
    assert_eq!(p.js("return document.querySelector('#diagnose-result .oom').dataset.class"), class.as_str());
    let headline = want["diagnosis"]["ooms"][0]["verdict"]["headline"].as_str().unwrap();
    assert!(p.text("#diagnose-result .band").contains(headline));
    assert!(p.count("#diagnose-result ol.fixes li") >= 1);
    p.screenshot("diagnose.png");
    p.assert_clean("paste an OOM", &[]);

    // upload a snapshot: parsed by the server's safe unpickler, charts from the CLI's renderer
    p.typ("#form-diagnose textarea[name=text]", "");
    p.upload("#form-diagnose input[name=upload]", &fixture("diagnose/tests/fixtures/snapshot/snapshot_shared.pickle"));
    p.wait("#snapshot-chart svg polyline");
    let chart = p.text("#snapshot-chart");
    assert!(chart.contains("peak allocated 18.0 MiB"), "{chart}");
    assert!(chart.contains("forward of train"), "top sites: {chart}");
    assert!(p.text("#diagnose-result").contains("snapshot_shared.pickle"));
    p.screenshot("diagnose_snapshot.png");
    p.assert_clean("upload a snapshot", &[]);
}

#[test]
fn plan_with_the_ladder_and_a_download() {
    let Some(p) = Page::start("plan_with_the_ladder_and_a_download") else { return };
    p.go("#/plan?model=llama-2-7b&task=train&precision=mixed-bf16&have=rtx-3090&allow=lora&tokens=1B");
    p.wait("#plan-result");
    assert!(p.text("#plan-recommended").starts_with("Recommended:"), "{}", p.text("#plan-recommended"));
    assert!(p.count("#ladder-chart svg rect") > 3);
    assert!(p.text("#ladder-chart svg").contains("RTX 3090 23.56 GiB"), "{}", p.text("#ladder-chart svg"));
    assert!(p.count("#ranked-table tbody tr") >= 1);
    p.screenshot("plan.png");
    // the DeepSpeed config downloads as the CLI writes it
    p.click("button[data-emit=deepspeed]");
    let file = p.downloads.join("ds_config.json");
    let t0 = Instant::now();
    while !file.is_file() {
        assert!(t0.elapsed() < WAIT, "no download in {}", p.downloads.display());
        std::thread::sleep(Duration::from_millis(100));
    }
    let want = vramfit_cli::run(
        <vramfit_cli::Cli as clap::Parser>::try_parse_from([
            "vramfit",
            "plan",
            "llama-2-7b",
            "--task",
            "train",
            "--precision",
            "mixed-bf16",
            "--have",
            "rtx-3090",
            "--allow",
            "lora",
            "--tokens",
            "1B",
            "--emit",
            "deepspeed",
        ])
        .unwrap()
        .command,
    )
    .unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), want.stdout);
    p.assert_clean("plan", &[]);
}

#[test]
fn mig_layout_and_machine_check() {
    let Some(p) = Page::start("mig_layout_and_machine_check") else { return };
    p.go("#/mig?gpu=a100-80gb&service=chat%3Dllama-2-7b%3Actx%3D8192&service=code%3D20GiB&service=embed%3D6GiB&service=rerank%3D4GiB");
    p.wait("#mig-result");
    assert!(p.text("#mig-result .band").contains("Fits on 1 × A100 80GB"), "{}", p.text("#mig-result .band"));
    assert!(p.text("#mig-chart svg").contains("3g.40gb"));
    p.screenshot("mig.png");
    p.assert_clean("mig", &[]);

    p.go("#/check");
    p.wait("#view-check .empty");
    p.upload("#form-check input[name=text]", &fixture("hw/tests/fixtures/captures/h100-hbm3-590.q.txt"));
    p.typ("#form-check input[name=expect]", "1xH100-80GB");
    p.click("#form-check button[type=submit]");
    p.wait("#check-result");
    let band = p.text("#check-result .band");
    assert!(band.contains("Matches what was rented"), "{band}");
    assert!(p.text("#check-result ul.findings").contains("H100"));
    p.screenshot("check.png");
    p.assert_clean("check", &[]);
    // eight cards over NVLink in the topology, but no GPU list: the model is not verified
    p.upload("#form-check input[name=topo]", &fixture("hw/tests/fixtures/derived/12-ansi-crlf.topo.txt"));
    p.js("const i = document.querySelector('#form-check input[name=text]'); i.value = ''; i.dispatchEvent(new Event('change', { bubbles: true }));");
    p.typ("#form-check input[name=expect]", "8xH100-80GB");
    p.click("#form-check button[type=submit]");
    p.wait("#check-result .chip");
    assert!(p.text("#check-result .band").contains("Does not match"));
    assert_eq!(p.count("#check-result .chip.ok"), 28, "28 NVLink pairs");
    p.assert_clean("check topology", &[]);
}

#[test]
fn fleet_grid_colours_the_odd_nodes_and_opens_their_evidence() {
    let Some(p) = Page::start("fleet_grid_colours_the_odd_nodes_and_opens_their_evidence") else { return };
    p.go("#/fleet");
    p.wait("#view-fleet .empty");
    // the four-node fleet: node-b's all-reduce 20 % slow, node-c on another driver (fixtures/fleet/SOURCES.md)
    p.upload("#form-fleet input[name=fleet]", &fixture("hw/tests/fixtures/fleet/autodl-4"));
    p.click("#form-fleet button[type=submit]");
    p.wait("#fleet-result");
    let band = p.text("#fleet-result .band");
    assert!(band.contains("2 failed check(s)") && band.contains("4 node(s)"), "{band}");
    assert_eq!(p.count("#fleet-grid tbody tr"), 4, "one row per node");
    // exactly two red cells: node-b's all-reduce, node-c's driver
    assert_eq!(p.count("#fleet-grid td.s-fail"), 2);
    assert_eq!(p.count("#fleet-grid tr[data-node=node-b] td.s-fail[data-column=nccl]"), 1);
    assert_eq!(p.count("#fleet-grid tr[data-node=node-c] td.s-fail[data-column=driver]"), 1);
    // a red cell opens its finding and the file it rests on
    p.click("#fleet-grid tr[data-node=node-b] td[data-column=nccl]");
    p.wait("#fleet-evidence pre");
    let ev = p.text("#fleet-evidence");
    assert!(ev.contains("80% of the fleet median 4.00 GB/s"), "{ev}");
    assert!(ev.contains("node-b/all_reduce.txt") && ev.contains("# Avg bus bandwidth    : 1.64619"), "{ev}");
    p.screenshot("fleet.png");
    p.assert_clean("fleet", &[]);
}

/// Nothing on the shown view is wider than the window: the page never
/// scrolls sideways, no card or band overflows (wide tables and charts
/// scroll inside their own container), the tabs stay on screen whole, and
/// a chart is never drawn below 3/4 of its size (readable text: its
/// smallest 10.5-unit labels stay about 8 px).
fn assert_fits_the_window(p: &Page, step: &str) {
    let v = p.js(
        "const d = document.documentElement;
         const view = document.querySelector('.view:not([hidden])');
         const over = [...view.querySelectorAll('.card, .band, .panel, .error, .empty')]
           .filter((c) => c.scrollWidth > c.clientWidth + 1)
           .map((c) => (c.id || c.className) + ' ' + c.scrollWidth + '>' + c.clientWidth);
         const tabs = [...document.querySelectorAll('#tabs a')]
           .filter((a) => { const r = a.getBoundingClientRect(); return r.right > window.innerWidth + 0.5 || r.left < 0 || r.height > 40; })
           .map((a) => a.textContent);
         const charts = [...view.querySelectorAll('.chart svg')]
           .map((s) => s.getBoundingClientRect().width / s.viewBox.baseVal.width)
           .filter((k) => k < 0.74);
         const wide = [...document.body.querySelectorAll('*')]
           .filter((e) => e.getBoundingClientRect().right > d.clientWidth + 0.5 && !e.closest('.scroll, .chart'))
           .filter((e) => ![...e.children].some((k) => k.getBoundingClientRect().right > d.clientWidth + 0.5))
           .slice(0, 8).map((e) => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().width) + ': ' + e.textContent.slice(0, 40));
         return { scroll: d.scrollWidth, client: d.clientWidth, over, tabs, charts, wide };",
    );
    let (scroll, client) = (v["scroll"].as_u64().unwrap(), v["client"].as_u64().unwrap());
    assert!(scroll <= client, "{step}: the page is {scroll} px wide in a {client} px window: {}", v["wide"]);
    assert_eq!(v["over"], json!([]), "{step}: overflowing boxes");
    assert_eq!(v["tabs"], json!([]), "{step}: tabs off screen or wrapped");
    assert_eq!(v["charts"], json!([]), "{step}: charts drawn too small");
}

/// Issue 24 item 7: at a phone's 390 × 844, every view with a result shown,
/// in both languages, fits the width: no sideways scroll. The diagnosis
/// shown is one whose fix is the unbreakable
/// `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`; it is checked at the
/// desktop width too.
#[test]
fn every_view_fits_a_phone_in_both_languages() {
    let Some(p) = Page::start("every_view_fits_a_phone_in_both_languages") else { return };
    let oom =
        std::fs::read_to_string(fixture("diagnose/tests/fixtures/oom/ds_easycontext11_cache_flushes.txt")).unwrap();
    for lang in ["en", "zh"] {
        let at = |hash: &str, result: &str| {
            p.go(&format!("{hash}{}lang={lang}", if hash.contains('?') { '&' } else { '?' }));
            // a fresh page for each view: the form as the URL gives it
            p.rt.block_on(p.c().refresh()).unwrap();
            p.viewport(390, 844);
            p.wait(result);
        };
        // the reviewed set in docs/img: each view at phone and desktop width, in both languages
        // (a phone shows the answer below the form: scrolled to it)
        let shots = |view: &str| {
            p.js(&format!("document.querySelector('#out-{view}')?.scrollIntoView(); return 0"));
            p.screenshot(&format!("phone_{view}_{lang}.png"));
            p.viewport(1280, 800);
            p.js("window.scrollTo(0, 0); return 0");
            p.screenshot(&format!("desktop_{view}_{lang}.png"));
            p.viewport(390, 844);
        };
        at("#/estimate?model=llama-2-7b&gpu=rtx-4090", "#estimate-result");
        assert_fits_the_window(&p, &format!("estimate {lang}"));
        shots("estimate");
        // and the widths between a phone and a desktop, where the tabs used to run off the header
        for w in [600, 760, 900, 1000] {
            p.viewport(w, 844);
            assert_fits_the_window(&p, &format!("estimate {lang} at {w} px"));
        }
        at("#/plan?model=llama-2-7b&task=train&have=rtx-3090&allow=lora&allow=qlora", "#plan-result");
        assert_fits_the_window(&p, &format!("plan {lang}"));
        shots("plan");
        // the bill each plan is ranked by shows without scrolling the table
        let right =
            p.js("return document.querySelector('#ranked-table tbody td.price-cell').getBoundingClientRect().right");
        assert!(right.as_f64().unwrap() <= 390.0, "plan {lang}: the price column ends at {right} px");
        at("#/plan?model=llama-2-70b&task=qlora", "#plan-result");
        assert_fits_the_window(&p, &format!("plan 70B {lang}"));
        at("#/diagnose", "#view-diagnose .empty");
        assert_fits_the_window(&p, &format!("diagnose form {lang}"));
        p.typ("#form-diagnose textarea[name=text]", &oom);
        p.click("#form-diagnose button[type=submit]");
        p.wait("#diagnose-result .oom");
        assert!(p.text("#diagnose-result").contains("expandable_segments:True"));
        assert_fits_the_window(&p, &format!("diagnose {lang}"));
        shots("diagnose");
        p.viewport(1280, 800);
        assert_fits_the_window(&p, &format!("diagnose desktop {lang}"));
        at(
            "#/mig?gpu=a100-80gb&service=chat%3Dllama-2-7b%3Actx%3D8192&service=code%3D20GiB&service=embed%3D6GiB",
            "#mig-result",
        );
        assert_fits_the_window(&p, &format!("mig {lang}"));
        shots("mig");
        at("#/check", "#view-check .empty");
        p.upload("#form-check input[name=text]", &fixture("hw/tests/fixtures/captures/h100-hbm3-590.q.txt"));
        p.typ("#form-check input[name=expect]", "1xH100-80GB");
        p.click("#form-check button[type=submit]");
        p.wait("#check-result");
        assert_fits_the_window(&p, &format!("check {lang}"));
        shots("check");
        at("#/fleet", "#view-fleet .empty");
        p.upload("#form-fleet input[name=fleet]", &fixture("hw/tests/fixtures/fleet/autodl-4"));
        p.click("#form-fleet button[type=submit]");
        p.wait("#fleet-result");
        assert_fits_the_window(&p, &format!("fleet {lang}"));
        shots("fleet");
    }
    p.assert_clean("phone width", &[]);
}

/// Issue 24 item 6: one price per plan, the one it is ranked by (`billed`:
/// what the rental bills for the job), in the headline and in every row,
/// the rate and the prorated cost beside it; your own card says so.
#[test]
fn plan_prices_are_the_bills_they_are_ranked_by() {
    let Some(p) = Page::start("plan_prices_are_the_bills_they_are_ranked_by") else { return };
    p.go("#/plan?model=llama-2-7b&task=train&have=rtx-3090&allow=lora&allow=qlora");
    p.wait("#plan-result");
    let head = p.text("#plan-recommended .big");
    assert_eq!(head, "Recommended: 1 × RTX 3090 — your card");
    let best = p.text("#plan-best-rental");
    assert!(best.contains("1 × RTX 3090 — ¥1,750 (1 month)") && best.contains("prorated ¥908"), "{best}");
    // the ranked rows: the bill first, in the order of the ranking (a range by its middle)
    let prices = p.js(
        "return [...document.querySelectorAll('#ranked-table tbody td.price-cell > div:first-child')].map((d) => d.textContent)",
    );
    let prices: Vec<String> = serde_json::from_value(prices).unwrap();
    assert!(prices.len() >= 5, "{prices:?}");
    assert_eq!(prices[0], "¥1,750 (1 month)");
    let middle = |s: &str| {
        let figs: Vec<f64> = s
            .split('(')
            .next()
            .unwrap()
            .split('–')
            .map(|x| x.trim().trim_start_matches('¥').replace(',', "").parse::<f64>().unwrap())
            .collect();
        figs.iter().sum::<f64>() / figs.len() as f64
    };
    let mids: Vec<f64> = prices.iter().map(|s| middle(s)).collect();
    assert!(mids.windows(2).all(|w| w[0] <= w[1] + 1.0), "not in the ranking's order: {prices:?}");
    let first = p.text("#ranked-table tbody tr .price-cell");
    assert!(first.contains("¥1,750/mo") && first.contains("prorated ¥908"), "{first}");
    p.assert_clean("plan own card", &[]);

    // a 70B QLoRA: the headline is the bill the reason names, the prorated figure second
    p.go("#/plan?model=llama-2-70b&task=qlora");
    p.rt.block_on(p.c().refresh()).unwrap();
    p.wait("#plan-result");
    let head = p.text("#plan-recommended .big");
    assert!(head.ends_with("— ¥5,000 (1 month)"), "{head}");
    let sub = p.text("#plan-recommended .sub");
    assert!(sub.contains("prorated ¥2,947") && sub.contains("CNY 5,000"), "{sub}");

    // in Chinese
    p.click(".lang button[data-lang=zh]");
    let t0 = Instant::now();
    while !p.text("#plan-recommended .big").contains("1 个月") {
        assert!(t0.elapsed() < WAIT, "{}", p.text("#plan-recommended"));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(p.text("#plan-recommended .sub").contains("按时折算 ¥2,947"));
    assert!(p.text("#ranked-table thead").contains("任务账单"));
    p.assert_clean("plan 70B", &[]);
}

/// Issue 24 item 10: the URL edited in the same tab is followed (form,
/// view and answer), and so are Back and Forward; a tab's bare link keeps
/// the form.
#[test]
fn an_edited_url_updates_the_answer() {
    let Some(p) = Page::start("an_edited_url_updates_the_answer") else { return };
    p.go("#/estimate?model=llama-2-7b&gpu=rtx-4090");
    p.wait("#estimate-result");
    assert!(p.text(".band").contains("Fits on RTX 4090"));
    let until = |css: &str, what: &str| {
        let t0 = Instant::now();
        while !p.text(css).contains(what) || p.count(".results.busy") > 0 {
            assert!(t0.elapsed() < WAIT, "{css} never showed {what:?}: {}", p.text(css));
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    // as a person edits the address bar: a new fragment, the same document
    p.js("location.hash = '#/estimate?model=llama-2-13b&gpu=rtx-3090'");
    until("#view-estimate .band", "RTX 3090");
    assert_eq!(p.js("return document.querySelector('#form-estimate select[name=gpu]').value"), "rtx-3090");
    assert_eq!(p.js("return document.querySelector('#form-estimate input[name=model]').value"), "llama-2-13b");
    let line = p.text("#estimate-result .model-line").to_lowercase();
    assert!(line.contains("13b"), "{line}");
    // another view and the language, from the URL alone
    p.js("location.hash = '#/plan?model=llama-2-7b&task=train&have=rtx-3090&allow=lora&lang=zh'");
    until("#view-plan", "推荐");
    assert_eq!(p.text("#tabs a.on"), "方案");
    assert!(p.text("#plan-recommended").contains("RTX 3090"));
    // a tab's own link switches the view and keeps its form
    p.click("#tabs a[data-view=estimate]");
    until("#tabs a.on", "显存估算");
    assert_eq!(p.js("return document.querySelector('#form-estimate select[name=gpu]').value"), "rtx-3090");
    // Back: the plan again; Back again: the edited estimate
    p.rt.block_on(p.c().back()).unwrap();
    until("#tabs a.on", "方案");
    p.rt.block_on(p.c().back()).unwrap();
    until("#tabs a.on", "显存估算");
    until("#view-estimate .band", "RTX 3090");
    p.assert_clean("edited URL", &[]);
}

/// Issue 24 item 10: Diagnose and Check pressed with nothing entered say
/// what they need at the input, in both languages.
#[test]
fn an_empty_diagnose_or_check_says_what_it_needs() {
    let Some(p) = Page::start("an_empty_diagnose_or_check_says_what_it_needs") else { return };
    p.go("#/diagnose");
    p.wait("#view-diagnose .empty");
    assert_eq!(p.count("#form-diagnose .field-error"), 0);
    p.click("#form-diagnose button[type=submit]");
    p.wait("#form-diagnose .invalid .field-error");
    assert!(p.text("#form-diagnose .invalid").contains("Paste an error"), "{}", p.text("#form-diagnose .invalid"));
    assert_eq!(p.js("return document.activeElement.name"), "text");
    // entering something clears it
    let oom = std::fs::read_to_string(fixture("diagnose/tests/fixtures/oom/pt22_cads4_shortage.txt")).unwrap();
    p.typ("#form-diagnose textarea[name=text]", &oom);
    p.click("#form-diagnose button[type=submit]");
    p.wait("#diagnose-result .oom");
    assert_eq!(p.count("#form-diagnose .field-error"), 0);

    p.go("#/check?lang=zh");
    p.rt.block_on(p.c().refresh()).unwrap();
    p.wait("#view-check .empty");
    p.click("#form-check button[type=submit]");
    p.wait("#form-check .invalid .field-error");
    assert!(p.text("#form-check .invalid").contains("请先选择文件或粘贴"), "{}", p.text("#form-check .invalid"));
    p.assert_clean("empty forms", &[]);
}

/// Issue 24 item 10: `nvidia-smi -q` or `-q -x` output pasted (not only
/// uploaded) is checked: XML by its leading `<?xml`, else text.
#[test]
fn check_takes_pasted_nvidia_smi_output() {
    let Some(p) = Page::start("check_takes_pasted_nvidia_smi_output") else { return };
    p.go("#/check");
    p.wait("#view-check .empty");
    let paste = |file: &str| {
        let text = std::fs::read_to_string(fixture(file)).unwrap();
        p.rt.block_on(p.c().execute(
            "const t = document.querySelector('#form-check textarea[name=paste]'); t.value = arguments[0]; t.dispatchEvent(new Event('input', { bubbles: true }));",
            vec![json!(text)],
        ))
        .unwrap();
    };
    paste("hw/tests/fixtures/captures/h100-hbm3-590.q.txt");
    p.typ("#form-check input[name=expect]", "1xH100-80GB");
    p.click("#form-check button[type=submit]");
    p.wait("#check-result");
    assert!(p.text("#check-result .band").contains("Matches what was rented"), "{}", p.text("#check-result .band"));
    // the pasted text stays out of the URL
    let url = p.rt.block_on(p.c().current_url()).unwrap().to_string();
    assert!(!url.contains("paste") && !url.contains("NVSMI"), "{url}");
    paste("hw/tests/fixtures/nvidia_smi/02.xml");
    p.typ("#form-check input[name=expect]", "1xA100-80GB");
    p.click("#form-check button[type=submit]");
    let t0 = Instant::now();
    while !p.text("#check-result .band").contains("A100-SXM4-80GB") {
        assert!(t0.elapsed() < WAIT, "{}", p.text("#out-check"));
        std::thread::sleep(Duration::from_millis(100));
    }
    // read as XML: the card's full name and its MIG state, which `-q -x` carries
    assert!(p.text("#check-result").contains("MIG is enabled"), "{}", p.text("#check-result"));
    p.assert_clean("pasted nvidia-smi", &[]);
}

/// Issue 24 item 8: on the Chinese page the sentences from the JSON (plan
/// reason and offer names, diagnose verdict and reasoning, check findings)
/// are Chinese, from the CLI's catalogue; the language switch reads "中文"
/// with a CJK font and "ZH" without one (no empty boxes).
#[test]
fn the_chinese_page_shows_chinese_sentences() {
    let Some(p) = Page::start("the_chinese_page_shows_chinese_sentences") else { return };
    p.go("#/plan?model=llama-2-13b&task=train&have=rtx-3090&lang=zh");
    p.wait("#plan-recommended");
    let rec = p.text("#plan-recommended");
    assert!(rec.contains("此任务账单最低"), "{rec}");
    assert!(rec.contains("整卡（AI 云）"), "{rec}");
    assert!(!rec.contains("cheapest bill"), "{rec}");

    p.go("#/diagnose?lang=zh");
    p.wait("#view-diagnose .empty");
    let oom = std::fs::read_to_string(fixture("diagnose/tests/fixtures/oom/composed_multi_rank_log.txt")).unwrap();
    p.typ("#form-diagnose textarea[name=text]", &oom);
    p.click("#form-diagnose button[type=submit]");
    p.wait("#diagnose-result .oom");
    let d = p.text("#diagnose-result");
    assert!(d.contains("已缓存，但无法满足一次 3.00 GiB 的申请"), "{d}");
    assert!(d.contains("主因："), "{d}");
    assert!(d.contains("保持张量形状稳定"), "{d}");
    assert!(!d.contains("cached but unusable"), "{d}");
    p.screenshot("diagnose_zh.png");

    p.go("#/check?lang=zh");
    p.wait("#view-check .empty");
    p.upload("#form-check input[name=xml]", &fixture("hw/tests/fixtures/nvidia_smi/01.xml"));
    p.typ("#form-check input[name=expect]", "1xA100-40GB");
    p.click("#form-check button[type=submit]");
    p.wait("#check-result ul.findings");
    let f = p.text("#check-result ul.findings");
    assert!(f.contains("已启用 MIG"), "{f}");
    assert!(!f.contains("MIG is enabled"), "{f}");
    p.assert_clean("chinese sentences", &[]);

    // the switch: this machine has a CJK font (CI installs fonts-noto-cjk) and shows 中文;
    // without one (the class app.js sets then) it reads ZH
    assert_eq!(p.js("return document.documentElement.classList.contains('no-cjk')"), false);
    let shown = "return document.querySelector('.lang button[data-lang=zh]').innerText";
    assert_eq!(p.js(shown), "中文");
    p.js("document.documentElement.classList.add('no-cjk')");
    assert_eq!(p.js(shown), "ZH");
    assert_eq!(
        p.js("return document.querySelector('.lang button[data-lang=zh]').getAttribute('aria-label')"),
        "中文 (Simplified Chinese)"
    );
}
