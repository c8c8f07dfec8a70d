//! Criterion benches of the pure paths, each against a baseline measured in the same run: the
//! naive way (parse into a `serde_json::Value` tree and serialise it again) of the same payload.
//! After the run, prints `ratio = path / baseline` for each pair (below 1 is faster).
//!
//! ```sh
//! cargo bench --bench translate
//! ```
#![forbid(unsafe_code)]

use std::hint::black_box;

use criterion::{Criterion, Throughput};
use serde_json::{json, Value};
use wiregate::events::domain::{DomainEvent, EventMap};
use wiregate::model::event::A2aEvent;
use wiregate::model::task::Tracker;
use wiregate::wire::dialect::{self, Inbound, Message};
use wiregate::wire::jsonrpc::Id;
use wiregate::wire::legacy::LegacyResponse;
use wiregate::wire::raw::ServerLine;
use wiregate::wire::translate::{self, ErrorTable};

fn payload(bytes: usize) -> Value {
    let items: Vec<Value> = (0..bytes / 60)
        .map(|i| json!({"id": i, "name": format!("item-{i}"), "ok": true, "score": 0.5}))
        .collect();
    json!({"plan_id": "P1", "items": items})
}

fn naive(body: &[u8]) -> Vec<u8> {
    let v: Value = serde_json::from_slice(body).unwrap();
    serde_json::to_vec(&v).unwrap()
}

fn jsonrpc_to_legacy(body: &[u8]) -> Vec<u8> {
    let Ok(Inbound::JsonRpc(Message::Single(Ok(req)))) = dialect::parse(body) else {
        panic!()
    };
    let legacy = translate::request_to_legacy(req, "r-1".into(), None).unwrap();
    legacy.to_vec()
}

fn legacy_to_jsonrpc(body: &[u8], table: &ErrorTable) -> Vec<u8> {
    let resp: LegacyResponse = wiregate::wire::from_json(body).unwrap();
    let rpc = translate::response_to_jsonrpc(resp, Id::from(1), table);
    rpc.to_vec()
}

/// Deltas a turn gets before the bench starts a new one: a turn's tracker keeps the response
/// text so far, and one turn of millions of deltas would measure a string growing without end.
const TURN_LINES: u32 = 1000;

fn raw_to_frame(turn: &mut (Tracker, u32), line: &str) -> bytes::Bytes {
    let (tracker, lines) = turn;
    if *lines == TURN_LINES {
        *tracker = Tracker::default();
        tracker.begin("t1");
        *lines = 0;
    }
    *lines += 1;
    let ServerLine::Delta(d) = ServerLine::parse(line).unwrap() else {
        panic!("a delta line")
    };
    let u = tracker.observe_delta(&d, std::time::UNIX_EPOCH).unwrap();
    let mut ev = A2aEvent::new(u.kind, Some(u.task_id), u.data);
    ev.event_id = "42".into();
    ev.to_sse()
}

fn domain_to_frame(map: &EventMap, line: &str) -> bytes::Bytes {
    let ev: DomainEvent = serde_json::from_str(line).unwrap();
    map.translate(&ev).unwrap().to_sse()
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let table = ErrorTable::default();
    let mut pairs: Vec<(String, String)> = Vec::new();
    for (label, size) in [("300B", 300), ("30KB", 30_000)] {
        let req = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "plan.get", "params": payload(size)}),
        )
        .unwrap();
        let resp = serde_json::to_vec(
            &json!({"a2a_version": "1.0", "request_id": "r-1", "status": "success",
            "data": payload(size), "timing_ms": 3}),
        )
        .unwrap();
        let mut g = c.benchmark_group(format!("request_{label}"));
        g.throughput(Throughput::Elements(1));
        g.bench_function("jsonrpc_to_legacy", |b| {
            b.iter(|| jsonrpc_to_legacy(black_box(&req)))
        });
        g.bench_function("baseline_value_roundtrip", |b| {
            b.iter(|| naive(black_box(&req)))
        });
        g.finish();
        pairs.push((
            format!("request_{label}/jsonrpc_to_legacy"),
            format!("request_{label}/baseline_value_roundtrip"),
        ));
        let mut g = c.benchmark_group(format!("response_{label}"));
        g.throughput(Throughput::Elements(1));
        g.bench_function("legacy_to_jsonrpc", |b| {
            b.iter(|| legacy_to_jsonrpc(black_box(&resp), &table))
        });
        g.bench_function("baseline_value_roundtrip", |b| {
            b.iter(|| naive(black_box(&resp)))
        });
        g.finish();
        pairs.push((
            format!("response_{label}/legacy_to_jsonrpc"),
            format!("response_{label}/baseline_value_roundtrip"),
        ));
    }
    let line = r#"{"type":"event","protocol_version":5,"sequence":4,"request_id":"t1","event":"assistant_text_delta","label":"build","depth":0,"text":"Hello"}"#;
    let mut turn = (Tracker::default(), TURN_LINES);
    let mut g = c.benchmark_group("raw_line_to_sse");
    g.throughput(Throughput::Elements(1));
    g.bench_function("raw_to_frame", |b| {
        b.iter(|| raw_to_frame(&mut turn, black_box(line)))
    });
    g.bench_function("baseline_value_roundtrip", |b| {
        b.iter(|| naive(black_box(line.as_bytes())))
    });
    g.finish();
    pairs.push((
        "raw_line_to_sse/raw_to_frame".into(),
        "raw_line_to_sse/baseline_value_roundtrip".into(),
    ));
    let domain = r#"{"event_id":7,"event_type":"PLAN_STATE_CHANGED","plan_id":"plan-1","data":{"state":"working","phase":"apply"},"timestamp":"2026-11-29T20:00:00Z"}"#;
    let map = EventMap::default();
    let mut g = c.benchmark_group("domain_event_to_sse");
    g.throughput(Throughput::Elements(1));
    g.bench_function("domain_to_frame", |b| {
        b.iter(|| domain_to_frame(&map, black_box(domain)))
    });
    g.bench_function("baseline_value_roundtrip", |b| {
        b.iter(|| naive(black_box(domain.as_bytes())))
    });
    g.finish();
    pairs.push((
        "domain_event_to_sse/domain_to_frame".into(),
        "domain_event_to_sse/baseline_value_roundtrip".into(),
    ));
    c.final_summary();
    println!(
        "\n{:<44} {:>12} {:>12} {:>8} {:>14}",
        "path", "median", "baseline", "ratio", "per core/s"
    );
    for (path, base) in pairs {
        let (Some(p), Some(b)) = (median_ns(&path), median_ns(&base)) else {
            continue;
        };
        println!(
            "{path:<44} {:>9.0} ns {:>9.0} ns {:>8.2} {:>14.0}",
            p,
            b,
            p / b,
            1e9 / p
        );
    }
}

/// The median point estimate criterion wrote for `id`, in nanoseconds.
fn median_ns(id: &str) -> Option<f64> {
    let dir = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into());
    let text = std::fs::read_to_string(format!("{dir}/criterion/{id}/new/estimates.json")).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}
