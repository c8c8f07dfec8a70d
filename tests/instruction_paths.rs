//! The pure paths `benches/callgrind.sh pure` measures, each run `WIREGATE_PATH_ITERS` times
//! (3 by default) on the payloads `benches/translate.rs` uses, with its output checked.
//! `benches/callgrind.sh` runs each test under callgrind at two iteration counts and divides the
//! difference of the totals by the difference of the counts: instructions per call, start-up
//! and the test harness subtracted.
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::UNIX_EPOCH;

use serde_json::{json, Value};
use wiregate::model::event::A2aEvent;
use wiregate::model::task::Tracker;
use wiregate::wire::dialect::{self, Inbound, Message};
use wiregate::wire::jsonrpc::Id;
use wiregate::wire::legacy::LegacyResponse;
use wiregate::wire::raw::ServerLine;
use wiregate::wire::translate::{self, ErrorTable};

fn iters() -> u64 {
    std::env::var("WIREGATE_PATH_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
}

/// `benches/translate.rs`'s payload: about `bytes` of items (315 B and 25.4 KB bodies).
fn payload(bytes: usize) -> Value {
    let items: Vec<Value> = (0..bytes / 60)
        .map(|i| json!({"id": i, "name": format!("item-{i}"), "ok": true, "score": 0.5}))
        .collect();
    json!({"plan_id": "P1", "items": items})
}

fn request_to_legacy(size: usize) {
    let body = serde_json::to_vec(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "plan.get", "params": payload(size)}),
    )
    .unwrap();
    let mut out = Vec::new();
    for _ in 0..iters() {
        let Ok(Inbound::JsonRpc(Message::Single(Ok(req)))) = dialect::parse(black_box(&body))
        else {
            panic!("a JSON-RPC request")
        };
        out = translate::request_to_legacy(req, "r-1".into(), None)
            .unwrap()
            .to_vec();
        black_box(&out);
    }
    let legacy: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        legacy,
        json!({"a2a_version": "1.0", "request_id": "r-1", "operation": "plan.get",
               "params": payload(size), "auth": null}),
        "{size}"
    );
}

fn response_to_jsonrpc(size: usize) {
    let body = serde_json::to_vec(&json!({"a2a_version": "1.0", "request_id": "r-1",
        "status": "success", "data": payload(size), "timing_ms": 3}))
    .unwrap();
    let table = ErrorTable::default();
    let mut out = Vec::new();
    for _ in 0..iters() {
        let resp: LegacyResponse = wiregate::wire::from_json(black_box(&body)).unwrap();
        out = translate::response_to_jsonrpc(resp, Id::from(1), &table).to_vec();
        black_box(&out);
    }
    let rpc: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        rpc,
        json!({"jsonrpc": "2.0", "id": 1, "result": payload(size)})
    );
}

#[test]
fn request_300b() {
    request_to_legacy(300);
}

#[test]
fn request_25kb() {
    request_to_legacy(30_000);
}

#[test]
fn response_300b() {
    response_to_jsonrpc(300);
}

#[test]
fn response_25kb() {
    response_to_jsonrpc(30_000);
}

/// One raw sid delta → its SSE frame, as the bridge does it; a new turn every 1 000 lines, as
/// in `benches/translate.rs`.
#[test]
fn raw_line_to_frame() {
    let line = r#"{"type":"event","protocol_version":5,"sequence":4,"request_id":"t1","event":"assistant_text_delta","label":"build","depth":0,"text":"Hello"}"#;
    let mut tracker = Tracker::default();
    tracker.begin("t1");
    let mut frame = bytes::Bytes::new();
    for i in 0..iters() {
        if i % 1000 == 999 {
            tracker = Tracker::default();
            tracker.begin("t1");
        }
        let ServerLine::Delta(d) = ServerLine::parse(black_box(line)).unwrap() else {
            panic!("a delta line")
        };
        let u = tracker.observe_delta(&d, UNIX_EPOCH).unwrap();
        let mut ev = A2aEvent::new(u.kind, Some(u.task_id), u.data);
        ev.event_id = "42".into();
        frame = ev.to_sse();
        black_box(&frame);
    }
    let text = std::str::from_utf8(&frame).unwrap();
    assert!(
        text.starts_with("event: TaskArtifactUpdateEvent\nid: 42\ndata: "),
        "{text}"
    );
    let data: Value =
        serde_json::from_str(text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap()).unwrap();
    assert_eq!(data["method"], "task/artifactUpdate");
    assert_eq!(data["params"]["taskId"], "t1");
    assert_eq!(data["params"]["text"], "Hello");
}
