//! The fake sid behaves as the recordings of sid 0.6.0 show: the same lines, in the same order,
//! for the same requests (session ids, paths and usage text aside).

mod support;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

fn data(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/data/sid-raw-v5/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// The parts of a line that are sid's behaviour rather than its environment.
fn shape(v: &Value) -> Value {
    let mut keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    keys.sort();
    serde_json::json!({
        "keys": keys,
        "type": v["type"], "event": v["event"], "sequence": v["sequence"], "request_id": v["request_id"],
        "ok": v["ok"], "error": v["error"], "op": v["op"], "text": v["text"], "prompt_id": v["prompt_id"],
        "choices": v["choices"], "response": v["response"], "tool_use_id": v["tool_use_id"],
        "is_error": v["is_error"], "name": v["name"], "partial_json": v["partial_json"], "stop_reason": v["stop_reason"],
        "label": v["label"], "depth": v["depth"],
    })
}

fn run_fake(requests: &str) -> Vec<Value> {
    let mut child = Command::new(support::fake_sid())
        .arg("--raw")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(requests.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit 0 on EOF (or shutdown)");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_recorded_exchange_is_reproduced() {
    for name in ["basic", "turn", "tool", "err"] {
        let recorded: Vec<Value> = data(&format!("out_{name}.jsonl"))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let fake = run_fake(&data(&format!("req_{name}.jsonl")));
        assert_eq!(fake.len(), recorded.len(), "{name}: line count");
        for (i, (f, r)) in fake.iter().zip(&recorded).enumerate() {
            assert_eq!(shape(f), shape(r), "{name} line {}", i + 1);
        }
    }
}
