//! `vramfit mcp` over real stdio: the binary is started, JSON-RPC lines go
//! to its stdin, and every line it writes to stdout must be one reply.

mod common;

use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// Send `messages` (one per line), close stdin, and return the replies by id.
fn session(messages: &[Value]) -> Vec<Value> {
    let bin = assert_cmd::cargo::cargo_bin("vramfit");
    let mut child = Command::new(bin)
        .arg("mcp")
        .env("HF_HOME", "/nonexistent-vramfit-test")
        .env("HF_HUB_OFFLINE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vramfit mcp starts");
    {
        let mut stdin = child.stdin.take().unwrap();
        for m in messages {
            writeln!(stdin, "{}", serde_json::to_string(m).unwrap()).unwrap();
        }
    }
    let out = BufReader::new(child.stdout.take().unwrap());
    let replies: Vec<Value> = out
        .lines()
        .map(|l| {
            let l = l.unwrap();
            serde_json::from_str(&l).unwrap_or_else(|e| panic!("stdout line is not JSON-RPC ({e}): {l}"))
        })
        .collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "vramfit mcp exits 0 when stdin closes: {status:?}");
    replies
}

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

fn by_id(replies: &[Value], id: u64) -> &Value {
    replies.iter().find(|r| r["id"] == json!(id)).unwrap_or_else(|| panic!("no reply to {id}: {replies:?}"))
}

fn structured(replies: &[Value], id: u64) -> &Value {
    let r = &by_id(replies, id)["result"];
    assert_eq!(r["isError"], false, "{r}");
    // the text block carries the same document (spec: structured content SHOULD be mirrored as text)
    let text: Value = serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, r["structuredContent"]);
    &r["structuredContent"]
}

#[test]
fn initialize_list_and_call_every_tool_over_stdio() {
    let replies = session(&[
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        call(3, "estimate", json!({"model": "llama-3.1-8b", "gpu": "rtx-4090"})),
        call(
            4,
            "plan",
            json!({"model": "llama-2-7b", "task": "train", "have": "rtx-3090", "allow": ["lora", "qlora"]}),
        ),
        call(5, "diagnose", json!({"file": "../diagnose/tests/fixtures/snapshot/snapshot_shared.pickle"})),
        call(6, "mig_plan", json!({"gpu": "a100-80gb", "service": ["chat=llama-3.1-8b", "embed=8GiB"]})),
        call(7, "check", json!({"xml": "../hw/tests/fixtures/nvidia_smi/07.xml", "expect": "8xA100-80GB"})),
        call(8, "estimate", json!({"model": "llama-2-7b", "batch": "many"})),
        call(9, "no_such_tool", json!({})),
        json!({"jsonrpc": "2.0", "id": 10, "method": "resources/list"}),
        json!({"jsonrpc": "2.0", "id": 11, "method": "ping"}),
    ]);
    // one reply per request, none to the notification
    assert_eq!(replies.len(), 11, "{replies:?}");

    let init = &by_id(&replies, 1)["result"];
    assert_eq!(init["protocolVersion"], "2025-11-25");
    assert_eq!(init["serverInfo"]["name"], "vramfit");
    assert!(init["capabilities"]["tools"].is_object());

    let tools = by_id(&replies, 2)["result"]["tools"].as_array().unwrap().clone();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["estimate", "plan", "diagnose", "mig_plan", "check"]);
    for t in &tools {
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert!(t["description"].as_str().unwrap().len() > 20);
    }
    assert_eq!(tools[0]["inputSchema"]["properties"]["batch"]["type"], "integer");

    let est = structured(&replies, 3);
    assert_eq!(est["command"], "estimate");
    assert_eq!(est["fit"]["fits"], true);
    assert_eq!(est["exit_code"], 0);

    let plan = structured(&replies, 4);
    assert_eq!(plan["command"], "plan");
    assert!(plan["recommended"].is_object() || plan["recommended"].is_null());

    let diag = structured(&replies, 5);
    assert_eq!(diag["kind"], "snapshot");
    assert_eq!(diag["diagnosis"]["kind"], "snapshot");

    let mig = structured(&replies, 6);
    assert_eq!(mig["command"], "mig plan");
    assert_eq!(mig["services"].as_array().unwrap().len(), 2);

    let check = structured(&replies, 7);
    assert_eq!(check["command"], "check");
    assert_eq!(check["ok"], json!(check["exit_code"] == 0));

    // a tool error the caller can fix: a result with isError, naming the argument
    let bad = &by_id(&replies, 8)["result"];
    assert_eq!(bad["isError"], true);
    assert_eq!(bad["_meta"]["field"], "batch");
    assert_eq!(bad["_meta"]["exit_code"], 2);
    assert!(bad["content"][0]["text"].as_str().unwrap().contains("many"));

    assert_eq!(by_id(&replies, 9)["error"]["code"], -32602);
    assert_eq!(by_id(&replies, 10)["error"]["code"], -32601);
    assert_eq!(by_id(&replies, 11)["result"], json!({}));
}

#[test]
fn older_protocol_revisions_are_echoed_and_unknown_ones_answered_with_ours() {
    let replies = session(&[
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": "1999-01-01"}}),
    ]);
    assert_eq!(by_id(&replies, 1)["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(by_id(&replies, 2)["result"]["protocolVersion"], "2025-11-25");
}

#[test]
fn garbage_gets_json_rpc_errors_not_a_crash() {
    let replies = session(&[
        json!("not an object"),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "estimate", "arguments": 5}}),
        json!({"jsonrpc": "1.0", "id": 2, "method": "ping"}),
    ]);
    assert_eq!(replies[0]["error"]["code"], -32600);
    assert_eq!(by_id(&replies, 1)["error"]["code"], -32602);
    assert_eq!(by_id(&replies, 2)["error"]["code"], -32600);
    // a line that is not JSON at all
    let out = common::vramfit().arg("mcp").write_stdin("{nope\n").output().unwrap();
    assert!(out.status.success());
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["error"]["code"], -32700);
}
