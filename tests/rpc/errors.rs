//! Every failure gets its own code and status, in the caller's dialect, and the gateway keeps
//! serving everyone else.

use crate::support;

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;
use support::{gateway, legacy_echo, routing_all_to, upstream};
use wiregate::config::Dialect;

#[tokio::test]
async fn dead_upstream_is_32050_with_502() {
    let dead = support::dead_url().await;
    let gw = gateway()
        .upstream("gone", &dead, Dialect::Legacy, 2000)
        .route(&["*"], "gone")
        .start()
        .await;
    let a = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "m"}))
        .await;
    assert_eq!(a.status, 502);
    assert_eq!(a.json()["id"], 1);
    assert_eq!(a.json()["error"]["code"], -32050);
    assert_eq!(a.json()["error"]["data"]["upstream"], "gone");
    let l = gw
        .rpc(&json!({"a2a_version": "1.0", "request_id": "r", "operation": "m"}))
        .await;
    assert_eq!(l.status, 502);
    assert_eq!(l.json()["status"], "error");
    assert_eq!(l.json()["request_id"], "r");
    assert_eq!(l.json()["error"]["code"], "UPSTREAM_UNAVAILABLE");
}

#[tokio::test]
async fn slow_upstream_is_32051_with_504_and_others_keep_being_served() {
    let slow = legacy_echo().delay(Duration::from_secs(3)).run().await;
    let fast = legacy_echo().run().await;
    let gw = gateway()
        .upstream("slow", &slow.url(), Dialect::Legacy, 200)
        .upstream("fast", &fast.url(), Dialect::Legacy, 2000)
        .route(&["slow.*"], "slow")
        .route(&["*"], "fast")
        .start()
        .await;
    let (slow_call, fast_call) = (
        json!({"jsonrpc": "2.0", "id": "s", "method": "slow.op"}),
        json!({"jsonrpc": "2.0", "id": "f", "method": "fast.op"}),
    );
    let (a, b) = tokio::join!(gw.rpc(&slow_call), gw.rpc(&fast_call));
    assert_eq!(a.status, 504);
    assert_eq!(a.json()["error"]["code"], -32051);
    assert_eq!(a.json()["id"], "s");
    assert_eq!(b.status, 200);
    assert_eq!(b.json()["result"]["op"], "fast.op");
    let l = gw
        .rpc(&json!({"a2a_version": "1.0", "request_id": "r", "operation": "slow.op"}))
        .await;
    assert_eq!(l.status, 504);
    assert_eq!(l.json()["error"]["code"], "UPSTREAM_TIMEOUT");
}

/// A pooled connection keeps one timer for the calls made on it, moved on when it fires for
/// an earlier call: each call still has the whole timeout, however long the connection has
/// served, and a call that overruns it is still cut off.
#[tokio::test]
async fn each_call_on_a_reused_connection_has_the_whole_upstream_timeout() {
    let up = legacy_echo().run().await;
    let gw = gateway()
        .upstream("up", &up.url(), Dialect::Legacy, 300)
        .route(&["*"], "up")
        .start()
        .await;
    let call = |id: u32, delay_ms: u64| json!({"jsonrpc": "2.0", "id": id, "method": "op", "params": {"delay_ms": delay_ms}});
    // Six calls of 150 ms one after another on the pooled connection: 900 ms of its life, three
    // timeouts' worth, each call within one.
    for id in 0..6 {
        let a = gw.rpc(&call(id, 150)).await;
        assert_eq!(a.status, 200, "call {id}: {}", a.text);
    }
    let started = std::time::Instant::now();
    let a = gw.rpc(&call(6, 1500)).await;
    let waited = started.elapsed();
    assert_eq!(a.status, 504);
    assert_eq!(a.json()["error"]["code"], -32051);
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_millis(1400),
        "cut off after {waited:?}"
    );
}

#[tokio::test]
async fn invalid_upstream_envelopes_are_32052_with_502() {
    for (dialect, body, status) in [
        (Dialect::Legacy, "this is not json", StatusCode::OK),
        (Dialect::Legacy, r#"{"status":"maybe"}"#, StatusCode::OK),
        (Dialect::Legacy, r#"{"status":"error"}"#, StatusCode::OK),
        (
            Dialect::Legacy,
            "<html>oops</html>",
            StatusCode::INTERNAL_SERVER_ERROR,
        ),
        (
            Dialect::Jsonrpc,
            r#"{"jsonrpc":"2.0","id":1}"#,
            StatusCode::OK,
        ),
        (
            Dialect::Jsonrpc,
            r#"{"jsonrpc":"1.0","id":1,"result":1}"#,
            StatusCode::OK,
        ),
        (
            Dialect::Jsonrpc,
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}"#,
            StatusCode::OK,
        ),
        (Dialect::Jsonrpc, "", StatusCode::BAD_GATEWAY),
    ] {
        let up = upstream(move |_| (status, body.to_owned())).run().await;
        let gw = support::fronting(&up, dialect).await;
        let a = gw
            .rpc(&json!({"jsonrpc": "2.0", "id": 3, "method": "m"}))
            .await;
        assert_eq!(a.status, 502, "{body}");
        assert_eq!(a.json()["error"]["code"], -32052, "{body}");
        assert_eq!(a.json()["id"], 3);
        let l = gw
            .rpc(&json!({"a2a_version": "1.0", "request_id": "r", "operation": "m"}))
            .await;
        assert_eq!(l.status, 502);
        assert_eq!(l.json()["error"]["code"], "UPSTREAM_BAD_RESPONSE", "{body}");
    }
}

#[tokio::test]
async fn non_json_content_type_is_415_in_the_callers_dialect() {
    let gw = gateway().start().await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "m"})
        .to_string()
        .into_bytes();
    let a = gw.post("text/plain", body, &[]).await;
    assert_eq!(a.status, 415);
    assert_eq!(a.json()["error"]["code"], -32600);
    let legacy = json!({"a2a_version": "1.0", "request_id": "r", "operation": "m"})
        .to_string()
        .into_bytes();
    let l = gw
        .post("application/x-www-form-urlencoded", legacy, &[])
        .await;
    assert_eq!(l.status, 415);
    assert_eq!(l.json()["error"]["code"], "VALIDATION_ERROR");
    assert_eq!(l.json()["request_id"], "r");
    let charset = gw
        .post(
            "application/json; charset=utf-8",
            br#"{"jsonrpc":"2.0","id":1,"method":"_cleveragents/health/check"}"#.to_vec(),
            &[],
        )
        .await;
    assert_eq!(charset.status, 200);
    // Any case, `+json` suffixes; not a longer subtype.
    let health = br#"{"jsonrpc":"2.0","id":1,"method":"_cleveragents/health/check"}"#;
    for (ct, status) in [
        ("Application/JSON", 200),
        ("application/vnd.api+json ; v=1", 200),
        ("application/jsonx", 415),
        ("application/", 415),
    ] {
        let a = gw.post(ct, health.to_vec(), &[]).await;
        assert_eq!(a.status, status, "{ct}");
    }
}

#[tokio::test]
async fn bad_json_is_32700_with_400() {
    let gw = gateway().start().await;
    let a = gw
        .post(
            "application/json",
            b"{\"jsonrpc\": \"2.0\", \"method\"".to_vec(),
            &[],
        )
        .await;
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["error"]["code"], -32700);
    assert_eq!(a.json()["id"], serde_json::Value::Null);
}

#[tokio::test]
async fn positional_params_cannot_go_to_a_legacy_upstream() {
    let up = legacy_echo().run().await;
    let gw = support::fronting(&up, Dialect::Legacy).await;
    let a = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "m", "params": [1]}))
        .await;
    assert_eq!(a.json()["error"]["code"], -32602);
    assert!(up.seen().is_empty());
}

/// What a raw upstream does with a connection after answering.
#[derive(Clone, Copy)]
enum After {
    /// Waits this long, then closes without saying so.
    CloseAfter(Duration),
    /// Keeps it open for the next request.
    KeepOpen,
}

/// An upstream written on raw TCP: it reads each request (head, then as many body bytes as
/// Content-Length says) and writes `answer` verbatim. Counts the connections it accepts.
async fn raw_upstream(
    answer: String,
    after: After,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let answer = std::sync::Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let (mut s, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    // One request: the head, then its Content-Length body.
                    let request = loop {
                        let text = String::from_utf8_lossy(&buf).into_owned();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let len: usize = text[..end]
                                .lines()
                                .find_map(|l| {
                                    l.to_ascii_lowercase()
                                        .strip_prefix("content-length:")
                                        .map(|v| v.trim().parse().unwrap())
                                })
                                .unwrap_or(0);
                            if buf.len() >= end + 4 + len {
                                break end + 4 + len;
                            }
                        }
                        let n = s.read(&mut chunk).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                    };
                    buf.drain(..request);
                    let _ = s.write_all(answer.as_bytes()).await;
                    match after {
                        After::CloseAfter(linger) => {
                            tokio::time::sleep(linger).await;
                            return;
                        }
                        After::KeepOpen => {}
                    }
                }
            });
        }
    });
    (format!("http://{addr}/a2a"), accepted)
}

const ENVELOPE: &str =
    r#"{"a2a_version":"1.0","request_id":"x","status":"success","data":{"ok":true}}"#;

/// An answer with `ENVELOPE` as its body, framed by Content-Length.
fn sized(extra_headers: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{extra_headers}content-length: {}\r\n\r\n{ENVELOPE}",
        ENVELOPE.len()
    )
}

#[tokio::test]
async fn connections_the_upstream_closes_are_not_reused() {
    // Closed right after the answer (the answer still arrives whole), and closed while idle in
    // the pool (found dead at checkout, replaced by a fresh connection).
    for (linger, pause) in [
        (Duration::ZERO, Duration::ZERO),
        (Duration::from_millis(5), Duration::from_millis(40)),
    ] {
        let (url, accepted) = raw_upstream(sized(""), After::CloseAfter(linger)).await;
        let gw = routing_all_to(&url, Dialect::Legacy).start().await;
        for i in 0..5 {
            let r = gw.call("plan.get", json!({"n": i})).await;
            assert_eq!(
                r["result"],
                json!({"ok": true}),
                "{linger:?}, call {i}: {r}"
            );
            tokio::time::sleep(pause).await;
        }
        assert_eq!(
            accepted.load(std::sync::atomic::Ordering::SeqCst),
            5,
            "one connection per call"
        );
    }
}

#[tokio::test]
async fn every_framing_of_an_upstream_answer_is_read_and_reuse_follows_it() {
    let (head, tail) = ENVELOPE.split_at(20);
    let chunked = format!(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x};ext=1\r\n{head}\r\n{:x}\r\n{tail}\r\n0\r\nx-trailer: t\r\n\r\n",
        head.len(),
        tail.len()
    );
    let cases = [
        // (answer, what the upstream does after it, connections for 3 calls)
        (sized(""), After::KeepOpen, 1),
        (chunked, After::KeepOpen, 1),
        (
            format!("HTTP/1.1 100 Continue\r\n\r\n{}", sized("")),
            After::KeepOpen,
            1,
        ),
        (sized("connection: close\r\n"), After::KeepOpen, 3),
        (
            format!(
                "HTTP/1.0 200 OK\r\ncontent-length: {}\r\n\r\n{ENVELOPE}",
                ENVELOPE.len()
            ),
            After::KeepOpen,
            3,
        ),
        // Close-delimited: no length at all, the end of the body is the end of the connection.
        (
            format!("HTTP/1.1 200 OK\r\n\r\n{ENVELOPE}"),
            After::CloseAfter(Duration::ZERO),
            3,
        ),
    ];
    for (answer, after, connections) in cases {
        let (url, accepted) = raw_upstream(answer.clone(), after).await;
        let gw = routing_all_to(&url, Dialect::Legacy).start().await;
        for i in 0..3 {
            let r = gw.call("plan.get", json!({"n": i})).await;
            assert_eq!(
                r["result"],
                json!({"ok": true}),
                "{answer:?}, call {i}: {r}"
            );
        }
        assert_eq!(
            accepted.load(std::sync::atomic::Ordering::SeqCst),
            connections,
            "{answer:?}"
        );
    }
}

#[tokio::test]
async fn malformed_or_oversized_upstream_answers_are_errors_and_the_gateway_goes_on() {
    let oversized = format!(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n",
        4096,
        "x".repeat(4096)
    );
    for (answer, code) in [
        (
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello".to_owned(),
            -32050,
        ),
        (
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n".to_owned(),
            -32050,
        ),
        ("NOT HTTP AT ALL\r\n\r\n".to_owned(), -32050),
        (oversized, -32052),
    ] {
        let (url, _) = raw_upstream(answer.clone(), After::KeepOpen).await;
        let gw = routing_all_to(&url, Dialect::Legacy)
            .with(|c| c.server.max_upstream_body_bytes = 1024)
            .start()
            .await;
        let a = gw
            .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "plan.get"}))
            .await;
        assert_eq!(a.json()["error"]["code"], code, "{answer:?}: {}", a.json());
        let ok = gw
            .rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "_cleveragents/health/check"}))
            .await;
        assert_eq!(ok.status, 200);
    }
}

#[tokio::test]
async fn large_answers_pass_whole_and_their_connection_is_reused() {
    let blob = "x".repeat(200_000);
    let envelope = format!(
        r#"{{"a2a_version":"1.0","request_id":"x","status":"success","data":{{"blob":"{blob}"}}}}"#
    );
    let (a, rest) = envelope.split_at(70_000);
    let (b, c) = rest.split_at(70_000);
    let chunked = format!(
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n{:x}\r\n{c}\r\n0\r\n\r\n",
        a.len(),
        b.len(),
        c.len()
    );
    let (url, accepted) = raw_upstream(chunked, After::KeepOpen).await;
    let gw = routing_all_to(&url, Dialect::Legacy).start().await;
    for i in 0..3 {
        let r = gw.call("plan.get", json!({"n": i})).await;
        assert_eq!(
            r["result"]["blob"].as_str().map(str::len),
            Some(200_000),
            "call {i}"
        );
    }
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
}
