//! `/api/fleet`: `check --fleet` on a folder the page uploads gives the
//! CLI's JSON and exit code; bad fields are a 400 naming the field.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use tower::ServiceExt;
use vramfit_cli::serve::api::Settings;
use vramfit_cli::serve::{router, Config};

const ADDR: &str = "127.0.0.1:8080";

fn post(body: String) -> (StatusCode, Option<String>, String) {
    let app = router(Config { settings: Settings::default(), addr: ADDR.parse::<SocketAddr>().unwrap() });
    let req = Request::post("/api/fleet")
        .header("host", ADDR)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
        let r = app.oneshot(req).await.unwrap();
        let exit = r.headers().get("x-vramfit-exit").map(|v| v.to_str().unwrap().to_string());
        let status = r.status();
        let body = r.into_body().collect().await.unwrap().to_bytes();
        (status, exit, String::from_utf8_lossy(&body).into_owned())
    })
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../hw/tests/fixtures/fleet")
}

/// The folder as the browser sends it: `<chosen folder>/<node>/<file>` paths.
fn upload(name: &str) -> Vec<Value> {
    let root = fixtures().join(name);
    let mut files = Vec::new();
    let mut nodes: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    nodes.sort();
    for n in nodes {
        if n.is_dir() {
            for f in std::fs::read_dir(&n).unwrap() {
                let f = f.unwrap().path();
                let rel = format!(
                    "{name}/{}/{}",
                    n.file_name().unwrap().to_str().unwrap(),
                    f.file_name().unwrap().to_str().unwrap()
                );
                files.push(json!({ "path": rel, "text": std::fs::read_to_string(&f).unwrap() }));
            }
        } else {
            let rel = format!("{name}/{}", n.file_name().unwrap().to_str().unwrap());
            files.push(json!({ "path": rel, "text": std::fs::read_to_string(&n).unwrap() }));
        }
    }
    files
}

#[test]
fn the_upload_is_the_clis_fleet_json() {
    let (status, exit, body) = post(json!({ "files": upload("autodl-4") }).to_string());
    assert_eq!((status, exit.as_deref()), (StatusCode::OK, Some("1")));
    let web: Value = serde_json::from_str(&body).unwrap();
    let out = assert_cmd::Command::cargo_bin("vramfit")
        .unwrap()
        .args(["check", "--fleet", fixtures().join("autodl-4").to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let cli: Value = serde_json::from_slice(&out.stdout).unwrap();
    // the same findings, grid and nodes; only the source differs (a folder path, the folder's name)
    assert_eq!(web["findings"], cli["findings"]);
    assert_eq!(web["grid"], cli["grid"]);
    assert_eq!(web["nodes"], cli["nodes"]);
    assert_eq!(web["source"], "autodl-4");
    // multi-node run at the top level, with the fleet expectation
    let body = json!({ "files": upload("a3mega-2"), "expect": "2x8xH100-80GB", "expect_nvlink": true }).to_string();
    let (status, exit, body) = post(body);
    assert_eq!((status, exit.as_deref()), (StatusCode::OK, Some("0")), "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["runs"][0]["ranks"], 16);
}

#[test]
fn bad_fields_are_a_400_naming_them() {
    let files = upload("autodl-4-ok");
    for (body, field, says) in [
        (json!({ "files": files, "expect": "4xx8xH100" }), "expect", "COUNTxMODEL"),
        (json!({ "files": files, "expect_fabric": "ethernet400" }), "expect_fabric", "ib400"),
        (json!({ "files": files, "expect_nvlink": "yes" }), "expect_nvlink", "true or false"),
        (json!({ "files": files, "xml": "/etc/passwd" }), "xml", "not a field"),
        (json!({ "files": [{ "path": "only-a-file.txt", "text": "x" }] }), "files", "no node folder"),
        (json!({ "expect": "H100" }), "files", "choose the fleet folder"),
    ] {
        let (status, _, body) = post(body.to_string());
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let e: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(e["field"], field, "{body}");
        assert!(e["error"].as_str().unwrap().contains(says), "{body}");
    }
    let (status, _, _) = post("not json".into());
    assert_eq!(status, StatusCode::BAD_REQUEST);
}
