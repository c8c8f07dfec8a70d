//! The pass-through reverse proxy over real sockets: what the gateway does not answer goes to
//! the legacy server unchanged (any method, streamed bodies both ways, an upstream SSE stream
//! event by event, a WebSocket tunnelled), with the hop told in `Via` / `Forwarded` /
//! `X-Forwarded-*`, and a clear 502 / 504 when the upstream fails.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Request};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{any, get, put};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{oneshot, Notify};
use wiregate::config::{Dialect, Passthrough};

use support::raw_h1::read_answer;
use support::{black_hole, dead_url, gateway, legacy_echo, TestGateway};

/// Length of `/blob`, a download longer than what the pass-through reads whole.
const BLOB_LEN: usize = 200_000;

/// The legacy server's other paths: a health check, file uploads, an SSE feed.
struct Site {
    url: String,
    /// Released by the test: the feed's second event.
    release: Arc<Notify>,
    /// Told when the first chunk of an upload arrived.
    first_chunk: Arc<Mutex<Option<oneshot::Sender<()>>>>,
}

fn headers_json(h: &HeaderMap) -> Value {
    let mut m = serde_json::Map::new();
    for (k, v) in h {
        let v = v.to_str().unwrap_or("").to_owned();
        match m.get_mut(k.as_str()) {
            Some(Value::String(prev)) => *prev = format!("{prev} | {v}"),
            _ => {
                m.insert(k.as_str().to_owned(), Value::String(v));
            }
        }
    }
    Value::Object(m)
}

async fn site() -> Site {
    let release = Arc::new(Notify::new());
    let first_chunk: Arc<Mutex<Option<oneshot::Sender<()>>>> = Arc::default();
    let rel = release.clone();
    let fc = first_chunk.clone();
    let app = axum::Router::new()
        .route(
            "/health",
            get(|req: Request| async move {
                axum::Json(json!({
                    "query": req.uri().query(),
                    "headers": headers_json(req.headers()),
                }))
            }),
        )
        .route(
            "/files/{name}",
            put(move |Path(name): Path<String>, req: Request| {
                let fc = fc.clone();
                async move {
                    let headers = headers_json(req.headers());
                    let mut body = req.into_body().into_data_stream();
                    let (mut len, mut chunks) = (0usize, 0usize);
                    while let Some(c) = body.next().await {
                        let c = c.unwrap();
                        if c.is_empty() {
                            continue;
                        }
                        len += c.len();
                        chunks += 1;
                        if let Some(tx) = fc.lock().unwrap().take() {
                            let _ = tx.send(());
                        }
                    }
                    (
                        StatusCode::CREATED,
                        [("x-upstream", "site")],
                        axum::Json(json!({"name": name, "len": len, "chunks": chunks, "headers": headers})),
                    )
                }
            }),
        )
        .route(
            "/a2a",
            any(|req: Request| async move {
                axum::Json(json!({"method": req.method().as_str(), "query": req.uri().query()}))
            }),
        )
        .route(
            "/blob",
            get(|| async { (0..BLOB_LEN).map(|i| (i % 251) as u8).collect::<Vec<u8>>() }),
        )
        .route(
            "/feed",
            get(move || {
                let rel = rel.clone();
                async move {
                    let events = async_stream::stream! {
                        yield Ok::<_, std::convert::Infallible>("id: 1\ndata: first\n\n".to_owned());
                        rel.notified().await;
                        yield Ok("id: 2\ndata: second\n\n".to_owned());
                    };
                    (
                        [("content-type", "text/event-stream"), ("connection", "close, x-site-hop"), ("x-site-hop", "1")],
                        Body::from_stream(events),
                    )
                        .into_response()
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Site {
        url: format!("http://{addr}/"),
        release,
        first_chunk,
    }
}

/// A WebSocket echo server (tungstenite does the upgrade handshake itself).
async fn ws_echo() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                    return;
                };
                while let Some(Ok(m)) = ws.next().await {
                    if m.is_text() || m.is_binary() {
                        let _ = ws.send(m).await;
                    }
                }
            });
        }
    });
    format!("http://{addr}/")
}

async fn front(site: &Site, trusted: &[&str]) -> (TestGateway, support::Listening) {
    let rpc_up = legacy_echo().run().await;
    let (ws, hole, dead) = (ws_echo().await, black_hole().await, dead_url().await);
    let trusted: Vec<String> = trusted.iter().map(|s| s.to_string()).collect();
    let pass = [
        ("/", "site"),
        ("/ws", "ws"),
        ("/slow", "hole"),
        ("/dead", "dead"),
    ];
    let gw = gateway()
        .upstream("legacy", &rpc_up.url(), Dialect::Legacy, 2000)
        .upstream("site", &site.url, Dialect::Legacy, 2000)
        .upstream("ws", &ws, Dialect::Legacy, 2000)
        .upstream("hole", &hole, Dialect::Legacy, 300)
        .upstream("dead", &dead, Dialect::Legacy, 2000)
        .route(&["*"], "legacy")
        .passthrough(&pass)
        .with(move |c| c.server.trusted_proxies = trusted)
        .start()
        .await;
    (gw, rpc_up)
}

#[tokio::test]
async fn what_the_gateway_does_not_answer_reaches_the_legacy_server_unchanged() {
    let site = site().await;
    let (gw, _rpc) = front(&site, &[]).await;
    let port = gw.addr.port();

    // GET with its query; hop-by-hop headers dropped, the hop told.
    let r = gw
        .http
        .get(format!("{}/health?deep=1&x=%20y", gw.base()))
        .header("connection", "x-drop-me")
        .header("x-drop-me", "secret hop")
        .header("x-forwarded-for", "6.6.6.6")
        .header("forwarded", "for=6.6.6.6")
        .header("x-end-to-end", "kept")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["via"], "1.1 wiregate");
    let seen: Value = r.json().await.unwrap();
    let h = &seen["headers"];
    assert_eq!(seen["query"], "deep=1&x=%20y");
    assert_eq!(h["x-end-to-end"], "kept");
    assert!(h.get("x-drop-me").is_none(), "{h}");
    // An untrusted client's own claims are replaced.
    assert_eq!(h["x-forwarded-for"], "127.0.0.1");
    assert_eq!(
        h["forwarded"],
        format!("for=127.0.0.1;proto=http;host=\"127.0.0.1:{port}\"")
    );
    assert_eq!(h["x-forwarded-proto"], "http");
    assert_eq!(h["x-forwarded-host"], format!("127.0.0.1:{port}"));
    assert_eq!(h["via"], "1.1 wiregate");
    assert!(h["traceparent"].as_str().unwrap().starts_with("00-"));
    assert_ne!(
        h["host"],
        format!("127.0.0.1:{port}"),
        "the upstream's own authority"
    );

    // The gateway's own routes still answer; other methods on an RPC path pass through.
    assert_eq!(gw.get("/healthz").await.json()["status"], "ok");
    let a = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "plan.get"}))
        .await;
    assert_eq!(a.json()["result"]["via"], "legacy");

    // Pass-through traffic is labelled apart in the metrics.
    let metrics = gw.get("/metrics").await.text;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("wiregate_passthrough_requests_total")
                && l.contains("upstream=\"site\"")
                && l.contains("status=\"2xx\"")),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_trusted_proxy_has_its_forwarding_headers_extended() {
    let site = site().await;
    let (gw, _rpc) = front(&site, &["127.0.0.0/8"]).await;
    let r = gw
        .http
        .get(format!("{}/health", gw.base()))
        .header("x-forwarded-for", "203.0.113.9")
        .header("forwarded", "for=203.0.113.9;proto=https")
        .header("x-forwarded-proto", "https")
        .send()
        .await
        .unwrap();
    let seen: Value = r.json().await.unwrap();
    let h = &seen["headers"];
    assert_eq!(h["x-forwarded-for"], "203.0.113.9, 127.0.0.1");
    assert!(h["forwarded"]
        .as_str()
        .unwrap()
        .starts_with("for=203.0.113.9;proto=https, for=127.0.0.1;proto=http"));
    assert_eq!(h["x-forwarded-proto"], "https");
}

#[tokio::test]
async fn request_and_answer_bodies_stream_without_buffering() {
    let site = site().await;
    let (gw, _rpc) = front(&site, &[]).await;

    // An upload whose second chunk is sent only once the upstream has the first: a proxy that
    // buffered the body would never deliver it.
    let (tx, rx) = oneshot::channel();
    *site.first_chunk.lock().unwrap() = Some(tx);
    let chunks = async_stream::stream! {
        yield Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"first chunk;"));
        rx.await.unwrap();
        yield Ok(bytes::Bytes::from_static(b"second chunk"));
    };
    let upload = gw
        .http
        .put(format!("{}/files/report.txt", gw.base()))
        .body(reqwest::Body::wrap_stream(chunks))
        .send();
    let r = tokio::time::timeout(Duration::from_secs(10), upload)
        .await
        .expect("the upstream got the first chunk before the last was sent")
        .unwrap();
    assert_eq!(r.status(), 201);
    assert_eq!(r.headers()["x-upstream"], "site");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["name"], "report.txt");
    assert_eq!(body["len"], 24);
    assert_eq!(body["headers"]["transfer-encoding"], "chunked");

    // An upstream SSE stream: its first event arrives while the upstream is still open.
    let resp = gw
        .http
        .get(format!("{}/feed", gw.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    assert!(resp.headers().get("x-site-hop").is_none());
    let mut events = eventsource_stream::EventStream::new(resp.bytes_stream());
    let first = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("the first event before the upstream finished")
        .unwrap()
        .unwrap();
    assert_eq!((first.id.as_str(), first.data.as_str()), ("1", "first"));
    site.release.notify_one();
    let second = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!((second.id.as_str(), second.data.as_str()), ("2", "second"));
    assert!(tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn answers_keep_their_framing_and_connections_stay_usable() {
    let site = site().await;
    let (gw, _rpc) = front(&site, &[]).await;
    for _ in 0..3 {
        // A HEAD's answer says the length of a body it does not carry: reading one would hang
        // this call, or corrupt the next on the same upstream connection.
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            gw.http.head(format!("{}/blob", gw.base())).send(),
        )
        .await
        .expect("a HEAD answered without waiting for a body")
        .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-length"], BLOB_LEN.to_string());
        // A long body with a length streams whole, byte for byte.
        let r = gw
            .http
            .get(format!("{}/blob", gw.base()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.headers()["content-length"], BLOB_LEN.to_string());
        let body = r.bytes().await.unwrap();
        assert_eq!(body.len(), BLOB_LEN);
        assert!(body.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8));
        // And the connections they came on carry the next call.
        let r = gw
            .http
            .get(format!("{}/health?n=1", gw.base()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.json::<Value>().await.unwrap()["query"], "n=1");
    }
}

#[tokio::test]
async fn a_websocket_is_tunnelled() {
    let site = site().await;
    let (gw, _rpc) = front(&site, &[]).await;
    let url = format!("ws://{}/ws/echo", gw.addr);
    let (mut ws, resp) = tokio_tungstenite::connect_async(&url).await.unwrap();
    assert_eq!(resp.status(), 101);
    for text in ["hello", "through", "the gateway"] {
        ws.send(tokio_tungstenite::tungstenite::Message::text(text))
            .await
            .unwrap();
        let back = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(back.into_text().unwrap().as_str(), text);
    }
    ws.close(None).await.unwrap();
}

#[tokio::test]
async fn a_dead_or_silent_upstream_is_a_502_or_504_with_a_short_body() {
    let site = site().await;
    let (gw, _rpc) = front(&site, &[]).await;
    let dead = gw.get("/dead/anything").await;
    assert_eq!(dead.status, 502);
    assert!(dead.text.contains("\"dead\" unreachable"), "{}", dead.text);
    let started = std::time::Instant::now();
    let slow = gw.get("/slow/x").await;
    assert_eq!(slow.status, 504);
    assert!(slow.text.contains("\"hole\" timed out"), "{}", slow.text);
    assert!(started.elapsed() < Duration::from_secs(3));
    // Everyone else is still served.
    assert_eq!(gw.get("/health").await.status, 200);
}

/// The upstream's `timeout_ms` bounds the upstream, not the client: an upload streamed over
/// longer than it reaches the upstream whole, and its answer comes back.
#[tokio::test]
async fn an_upload_slower_than_the_upstream_timeout_still_goes_through() {
    const PIECES: usize = 8;
    const PIECE: usize = 10_000;
    let site = site().await;
    let gw = gateway()
        .upstream("site", &site.url, Dialect::Legacy, 300)
        .route(&["*"], "site")
        .passthrough(&[("/", "site")])
        .start()
        .await;
    // The client's own pace: a piece every 100 ms, 800 ms in all.
    let pieces = async_stream::stream! {
        for i in 0..PIECES {
            if i > 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            yield Ok::<_, std::io::Error>(bytes::Bytes::from(vec![b'a' + i as u8; PIECE]));
        }
    };
    let started = std::time::Instant::now();
    let r = gw
        .http
        .put(format!("{}/files/slow.bin", gw.base()))
        .body(reqwest::Body::wrap_stream(pieces))
        .send()
        .await
        .unwrap();
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert_eq!(r.status(), 201);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["name"], "slow.bin");
    assert_eq!(body["len"], PIECES * PIECE);
}

/// A client that stalls mid-upload is cut off by `server.body_read_timeout_ms` (408): it cannot
/// hold the upstream's connection, and the upstream's shorter `timeout_ms` is not what ends it.
#[tokio::test]
async fn an_upload_that_stalls_is_a_408() {
    let site = site().await;
    let gw = gateway()
        .upstream("site", &site.url, Dialect::Legacy, 300)
        .route(&["*"], "site")
        .passthrough(&[("/", "site")])
        .with(|c| c.server.body_read_timeout_ms = 600)
        .start()
        .await;
    let (r, mut w) = tokio::net::TcpStream::connect(gw.addr)
        .await
        .unwrap()
        .into_split();
    w.write_all(
        b"PUT /files/stalled.bin HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n0123456789",
    )
    .await
    .unwrap();
    let answer = read_answer(&mut BufReader::new(r), Duration::from_secs(10)).await;
    assert!(answer.status.contains(" 408 "), "{}", answer.status);
    let body = String::from_utf8_lossy(&answer.body);
    assert!(body.contains("body_read_timeout_ms"), "{body}");
    drop(w);
}

/// An RPC path takes `POST`s; its other methods are the pass-through's (405 only without one).
#[tokio::test]
async fn other_methods_on_an_rpc_path_go_to_the_pass_through() {
    let site = site().await;
    let rpc_up = legacy_echo().run().await;
    let gw = gateway()
        .upstream("legacy", &rpc_up.url(), Dialect::Legacy, 2000)
        .upstream("site", &site.url, Dialect::Legacy, 2000)
        .route(&["*"], "legacy")
        .passthrough(&[("/", "site")])
        .with(|c| {
            c.server.rpc_paths = vec!["/a2a".into()];
            c.a2a.jsonrpc_path = String::new();
        })
        .start()
        .await;
    let got = gw.get("/a2a?card=1").await;
    assert_eq!(got.status, 200, "{}", got.text);
    assert_eq!(got.json(), json!({"method": "GET", "query": "card=1"}));
    let gone = gw
        .http
        .delete(format!("{}/a2a", gw.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 200);
    let gone: Value = gone.json().await.unwrap();
    assert_eq!(gone, json!({"method": "DELETE", "query": null}));
    // A POST there is still a call the gateway answers.
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "plan.get", "params": {}});
    let answered = gw.post_to("/a2a", &call).await;
    assert_eq!(
        answered.json()["result"]["via"],
        "legacy",
        "{}",
        answered.text
    );
    assert_eq!(rpc_up.seen().len(), 1);
}

#[tokio::test]
async fn without_pass_through_unknown_paths_stay_404() {
    let up = legacy_echo().run().await;
    let gw = support::fronting(&up, Dialect::Legacy).await;
    assert_eq!(gw.get("/health").await.status, 404);
    assert_eq!(gw.get("/rpc").await.status, 405);
}

#[test]
fn pass_through_settings_are_checked_with_their_key_paths() {
    let mut c = wiregate::config::Config {
        passthrough: vec![
            Passthrough {
                prefix: "files".into(),
                upstream: "nope".into(),
                auth: None,
                allow: Vec::new(),
            },
            Passthrough {
                prefix: "/a/../b".into(),
                upstream: "nope".into(),
                auth: None,
                allow: Vec::new(),
            },
        ],
        ..Default::default()
    };
    c.server.trusted_proxies = vec!["10.0.0.0/33".into()];
    let e = c.validate().unwrap_err().to_string();
    for needle in [
        "passthrough[0].prefix",
        "passthrough[0].upstream: no upstream is named \"nope\"",
        "passthrough[1].prefix",
        "server.trusted_proxies[0]",
    ] {
        assert!(e.contains(needle), "{needle} in {e}");
    }
}
