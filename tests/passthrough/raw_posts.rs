//! Pass-through `POST`s served by the HTTP/1 loop (`src/server/h1/`), whose heads are relayed
//! as bytes (`src/passthrough/raw.rs`) rather than through header maps, over raw sockets so the
//! request's head and body arrive together as the loop takes them: the hop told upstream, the
//! hop-by-hop headers left out both ways, the trace continued, answers with a length, long or
//! chunked relayed with their framing, several calls on one kept-alive connection, and a dead or
//! silent upstream answered with a 502 or 504.

use crate::support;

use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use wiregate::config::Dialect;

use support::raw_h1::{read_answer, Answer};
use support::{black_hole, dead_url, gateway, TestGateway};

const T: Duration = Duration::from_secs(10);
/// Longer than what the pass-through reads whole before passing it on.
const BLOB_LEN: usize = 200_000;
const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// The legacy server: `/echo` answers what it got (with hop-by-hop headers of its own and a
/// `Via`), `/wait?ms=N` after N ms, `/blob` a long body with a length, `/chunks` a chunked one.
async fn site() -> String {
    let app = axum::Router::new()
        .route(
            "/echo",
            post(|req: Request| async move {
                let query = req.uri().query().map(str::to_owned);
                let mut headers = serde_json::Map::new();
                for (k, v) in req.headers() {
                    let v = v.to_str().unwrap_or("").to_owned();
                    headers
                        .entry(k.as_str())
                        .and_modify(|p| {
                            *p = Value::String(format!("{} | {v}", p.as_str().unwrap()))
                        })
                        .or_insert(Value::String(v));
                }
                let body = axum::body::to_bytes(req.into_body(), usize::MAX)
                    .await
                    .unwrap();
                (
                    StatusCode::CREATED,
                    [
                        ("connection", "x-site-hop"),
                        ("x-site-hop", "1"),
                        ("keep-alive", "timeout=5"),
                        ("via", "1.0 site"),
                        ("x-upstream", "site"),
                    ],
                    axum::Json(json!({
                        "query": query,
                        "headers": headers,
                        "body": String::from_utf8_lossy(&body),
                    })),
                )
            }),
        )
        .route(
            "/wait",
            post(|req: Request| async move {
                let ms = req
                    .uri()
                    .query()
                    .and_then(|q| q.strip_prefix("ms="))
                    .and_then(|ms| ms.parse().ok())
                    .unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                "waited"
            }),
        )
        .route(
            "/blob",
            post(|| async { (0..BLOB_LEN).map(|i| (i % 251) as u8).collect::<Vec<u8>>() }),
        )
        .route(
            "/chunks",
            post(|| async {
                let parts = futures::stream::iter(["first;", "second;", "third"])
                    .map(|s| Ok::<_, std::convert::Infallible>(s.to_owned()));
                Body::from_stream(parts).into_response()
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/")
}

/// A gateway passing everything through to the site, named `name` in its configuration: the
/// metrics are the process's, so a test that counts a label's calls names its upstream apart.
async fn front(name: &str, trusted: &[&str]) -> TestGateway {
    let (site, hole, dead) = (site().await, black_hole().await, dead_url().await);
    let trusted: Vec<String> = trusted.iter().map(|s| s.to_string()).collect();
    gateway()
        .upstream(name, &site, Dialect::Legacy, 2000)
        .upstream("hole", &hole, Dialect::Legacy, 300)
        .upstream("dead", &dead, Dialect::Legacy, 2000)
        .route(&["*"], name)
        .passthrough(&[("/", name), ("/slow", "hole"), ("/dead", "dead")])
        .with(move |c| c.server.trusted_proxies = trusted)
        .start()
        .await
}

/// A `POST` of `body` to `target` with `headers`, head and body in one piece.
fn request(target: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut r = format!(
        "POST {target} HTTP/1.1\r\nhost: gw.example\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r
}

/// Reads one answer within `T`.
async fn answer(r: &mut BufReader<TcpStream>) -> Answer {
    read_answer(r, T).await
}

async fn connect(gw: &TestGateway) -> BufReader<TcpStream> {
    BufReader::new(TcpStream::connect(gw.addr).await.unwrap())
}

#[tokio::test]
async fn a_post_reaches_the_legacy_server_with_the_hop_told_and_its_answer_relayed() {
    let gw = front("site-counted", &[]).await;
    let mut c = connect(&gw).await;
    let body = r#"{"operation":"echo","n":1}"#;
    let req = request(
        "/echo?deep=1&x=%20y",
        &[
            ("connection", "keep-alive"),
            ("keep-alive", "timeout=9"),
            ("x-forwarded-for", "6.6.6.6"),
            ("forwarded", "for=6.6.6.6"),
            ("x-forwarded-proto", "gopher"),
            ("traceparent", TRACE),
            ("tracestate", "vendor=1"),
            ("X-End-To-End", "kept"),
        ],
        body,
    );
    c.get_mut().write_all(req.as_bytes()).await.unwrap();
    let a = answer(&mut c).await;
    assert_eq!(a.status, "HTTP/1.1 201 Created");
    // The answer: hop-by-hop headers (and those its `Connection` names) gone, the hop added to
    // the upstream's `Via`, the rest as the upstream sent it.
    assert_eq!(a.headers["via"], "1.0 site, 1.1 wiregate");
    assert_eq!(a.headers["x-upstream"], "site");
    assert_eq!(a.headers["content-type"], "application/json");
    assert!(a.headers.contains_key("date"));
    for gone in [
        "x-site-hop",
        "keep-alive",
        "connection",
        "transfer-encoding",
    ] {
        assert!(!a.headers.contains_key(gone), "{gone} in {:?}", a.headers);
    }
    let seen: Value = serde_json::from_slice(&a.body).unwrap();
    assert_eq!(seen["query"], "deep=1&x=%20y");
    assert_eq!(seen["body"], body);
    let h = &seen["headers"];
    assert_eq!(h["x-end-to-end"], "kept");
    assert_eq!(h["content-length"], body.len().to_string());
    assert!(h.get("keep-alive").is_none(), "{h}");
    assert!(h.get("connection").is_none(), "{h}");
    // An untrusted client's forwarding claims are replaced.
    assert_ne!(h["host"], "gw.example", "the upstream's own authority");
    assert_eq!(h["x-forwarded-for"], "127.0.0.1");
    assert_eq!(h["forwarded"], "for=127.0.0.1;proto=http;host=gw.example");
    assert_eq!(h["x-forwarded-proto"], "http");
    assert_eq!(h["x-forwarded-host"], "gw.example");
    assert_eq!(h["via"], "1.1 wiregate");
    // The client's trace, a span of this hop.
    let tp = h["traceparent"].as_str().unwrap();
    assert!(
        tp.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
        "{tp}"
    );
    assert!(!tp.contains("00f067aa0ba902b7"), "{tp}");
    assert_eq!(h["tracestate"], "vendor=1");

    // On the same connection: a long answer with its length, byte for byte; a chunked one
    // chunked; and a body-less POST. Pipelined, answered in order.
    let mut calls = request("/blob", &[], "");
    calls.push_str(&request("/chunks", &[], "x"));
    calls.push_str("POST /echo HTTP/1.1\r\nhost: gw.example\r\n\r\n");
    c.get_mut().write_all(calls.as_bytes()).await.unwrap();
    let blob = answer(&mut c).await;
    assert_eq!(blob.status, "HTTP/1.1 200 OK");
    assert_eq!(blob.headers["content-length"], BLOB_LEN.to_string());
    assert!(blob
        .body
        .iter()
        .enumerate()
        .all(|(i, b)| *b == (i % 251) as u8));
    let chunks = answer(&mut c).await;
    assert_eq!(chunks.headers["transfer-encoding"], "chunked");
    assert_eq!(chunks.body, b"first;second;third");
    assert!(chunks.chunks >= 1);
    let empty = answer(&mut c).await;
    assert_eq!(empty.status, "HTTP/1.1 201 Created");
    let seen: Value = serde_json::from_slice(&empty.body).unwrap();
    assert_eq!(seen["body"], "");
    assert!(seen["headers"].get("content-length").is_none(), "{seen}");
    assert_eq!(seen["headers"]["x-forwarded-host"], "gw.example");

    // Pass-through traffic is labelled apart in the metrics.
    let metrics = gw.get("/metrics").await.text;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("wiregate_passthrough_requests_total")
                && l.contains("upstream=\"site-counted\"")
                && l.contains("status=\"2xx\"")
                && l.ends_with(" 4")),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_trusted_proxy_has_its_forwarding_claims_extended() {
    let gw = front("site", &["127.0.0.0/8"]).await;
    let mut c = connect(&gw).await;
    let req = request(
        "/echo",
        &[
            ("x-forwarded-for", "203.0.113.9"),
            ("X-Forwarded-For", "198.51.100.2"),
            ("forwarded", "for=203.0.113.9;proto=https"),
            ("x-forwarded-proto", "https"),
            ("via", "1.1 edge"),
        ],
        "{}",
    );
    c.get_mut().write_all(req.as_bytes()).await.unwrap();
    let a = answer(&mut c).await;
    let seen: Value = serde_json::from_slice(&a.body).unwrap();
    let h = &seen["headers"];
    assert_eq!(h["x-forwarded-for"], "203.0.113.9, 198.51.100.2, 127.0.0.1");
    assert!(h["forwarded"]
        .as_str()
        .unwrap()
        .starts_with("for=203.0.113.9;proto=https, for=127.0.0.1;proto=http"));
    assert_eq!(h["x-forwarded-proto"], "https");
    assert_eq!(h["x-forwarded-host"], "gw.example");
    assert_eq!(h["via"], "1.1 edge, 1.1 wiregate");
}

#[tokio::test]
async fn a_dead_or_silent_upstream_is_a_502_or_504_and_the_connection_carries_on() {
    let gw = front("site", &[]).await;
    let mut c = connect(&gw).await;
    c.get_mut()
        .write_all(request("/dead/x", &[], "{}").as_bytes())
        .await
        .unwrap();
    let dead = answer(&mut c).await;
    assert_eq!(dead.status, "HTTP/1.1 502 Bad Gateway");
    assert!(String::from_utf8_lossy(&dead.body).contains("\"dead\" unreachable"));
    let started = std::time::Instant::now();
    c.get_mut()
        .write_all(request("/slow/x", &[], "{}").as_bytes())
        .await
        .unwrap();
    let slow = answer(&mut c).await;
    assert_eq!(slow.status, "HTTP/1.1 504 Gateway Timeout");
    assert!(String::from_utf8_lossy(&slow.body).contains("\"hole\" timed out"));
    assert!(started.elapsed() < Duration::from_secs(3));
    c.get_mut()
        .write_all(request("/echo", &[], "{}").as_bytes())
        .await
        .unwrap();
    assert_eq!(answer(&mut c).await.status, "HTTP/1.1 201 Created");
}

/// A pooled upstream connection keeps one timer for the passed-through calls made on it, as
/// the RPC path's does (`tests/rpc/errors.rs`), moved on when it fires for an earlier call: each
/// call still has the whole timeout, however long the connection has served, and a call that
/// overruns it is still cut off.
#[tokio::test]
async fn each_call_on_a_reused_upstream_connection_has_the_whole_timeout() {
    let site = site().await;
    let gw = gateway()
        .upstream("site", &site, Dialect::Legacy, 300)
        .route(&["*"], "site")
        .passthrough(&[("/", "site")])
        .start()
        .await;
    let mut c = connect(&gw).await;
    // Six calls of 150 ms one after another, on one pooled upstream connection: 900 ms of its
    // life, three timeouts' worth, each call within one.
    for i in 0..6 {
        c.get_mut()
            .write_all(request("/wait?ms=150", &[], "{}").as_bytes())
            .await
            .unwrap();
        let a = answer(&mut c).await;
        assert_eq!(a.status, "HTTP/1.1 200 OK", "call {i}");
        assert_eq!(a.body, b"waited", "call {i}");
    }
    let started = std::time::Instant::now();
    c.get_mut()
        .write_all(request("/wait?ms=1500", &[], "{}").as_bytes())
        .await
        .unwrap();
    let slow = answer(&mut c).await;
    let waited = started.elapsed();
    assert_eq!(slow.status, "HTTP/1.1 504 Gateway Timeout");
    assert!(String::from_utf8_lossy(&slow.body).contains("\"site\" timed out"));
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_millis(1400),
        "cut off after {waited:?}"
    );
}
