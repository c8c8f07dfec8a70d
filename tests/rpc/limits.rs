//! Every bound on what a client may send or hold, over real sockets: the body size, chunked
//! framing, the batch length (one -32600 before any member is answered) and the batch's
//! concurrency, the connection count, and the head, body and idle timeouts that free the slots
//! of slow or silent clients while everyone else is served.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wiregate::config::Dialect;

use crate::support::raw_h1::exchange;
use crate::support::{gateway, legacy_echo};

const T: Duration = Duration::from_secs(10);

const HEALTH: &str = r#"{"jsonrpc":"2.0","id":1,"method":"_cleveragents/health/check"}"#;

fn body_of(answer: &str) -> Value {
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {answer}"))
}

#[derive(Clone, Copy, Debug)]
enum Hold {
    /// Connects and sends nothing.
    Silent,
    /// The HTTP/2 preface and an empty SETTINGS frame, then nothing (PINGs go unanswered).
    H2Preface,
    /// A head declaring 1 000 bytes of body, 10 of them, then nothing.
    StalledBody,
}

/// The HTTP/2 frame types in `bytes`, read frame by frame from the start.
fn h2_frame_types(bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    let mut at = 0;
    while at + 9 <= bytes.len() {
        let len = u32::from_be_bytes([0, bytes[at], bytes[at + 1], bytes[at + 2]]) as usize;
        types.push(bytes[at + 3]);
        at += 9 + len;
    }
    types
}

#[tokio::test]
async fn oversized_body_is_413() {
    let gw = gateway()
        .with(|c| c.server.max_body_bytes = 1024)
        .start()
        .await;
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "m", "params": {"x": "y".repeat(4096)}});
    let a = gw.rpc(&big).await;
    assert_eq!(a.status, 413);
    assert_eq!(a.json()["error"]["code"], -32600);
    assert!(a.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("1024"));
    // Chunked, with no Content-Length to refuse early, is cut off the same way.
    let stream = futures::stream::iter((0..8).map(|_| Ok::<_, std::io::Error>(vec![b' '; 512])));
    let resp = gw
        .http
        .post(format!("{}/rpc", gw.base()))
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    // The gateway keeps serving.
    let ok = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "_cleveragents/health/check"}))
        .await;
    assert_eq!(ok.status, 200);
}

#[tokio::test]
async fn malformed_chunked_bodies_are_400_and_only_large_ones_413() {
    let gw = gateway().start().await;
    let head = "POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
                transfer-encoding: chunked\r\n\r\n";
    let ext = format!("5;{}=1\r\nhello\r\n0\r\n\r\n", "e".repeat(100_000));
    let trailer = format!("5\r\nhello\r\n0\r\nx-big: {}\r\n\r\n", "t".repeat(100_000));
    for (name, chunks) in [
        ("bad size", "zz\r\nhello\r\n0\r\n\r\n".to_owned()),
        (
            "18-digit size",
            "FFFFFFFFFFFFFFFFFF\r\nhello\r\n0\r\n\r\n".to_owned(),
        ),
        ("100 KB extension", ext),
        ("100 KB trailer", trailer),
    ] {
        let answer = exchange(gw.addr, format!("{head}{chunks}").as_bytes(), T).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{name}: {answer:.200}");
        let body = body_of(&answer);
        assert_eq!(body["error"]["code"], -32700, "{name}: {body}");
        assert_eq!(body["error"]["data"]["kind"], "malformed_body", "{name}");
    }
    // Well-formed and over the limit: 413.
    let big = "a".repeat((1 << 20) + 10);
    let chunks = format!("{:x}\r\n{big}\r\n0\r\n\r\n", big.len());
    let answer = exchange(gw.addr, format!("{head}{chunks}").as_bytes(), T).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer:.200}");
}

#[tokio::test]
async fn a_batch_over_max_batch_len_is_one_invalid_request_before_any_member_is_answered() {
    let up = legacy_echo().run().await;
    let gw = gateway()
        .upstream("up", &up.url(), Dialect::Legacy, 2000)
        .route(&["*"], "up")
        .with(|c| c.server.max_batch_len = 3)
        .start()
        .await;
    let call = |i: u64| json!({"jsonrpc": "2.0", "id": i, "method": "m"});
    let a = gw.rpc(&json!([call(1), call(2), call(3), call(4)])).await;
    assert_eq!(a.status, 400);
    assert_eq!(a.json()["error"]["code"], -32600);
    assert!(up.seen().is_empty(), "nothing of it was forwarded");
    let ok = gw.rpc(&json!([call(1), call(2), call(3)])).await;
    assert_eq!(ok.json().as_array().unwrap().len(), 3);

    // Members that are each invalid: answered one by one they would make 11 errors.
    let gw = gateway()
        .with(|c| c.server.max_batch_len = 10)
        .start()
        .await;
    let body = format!("[{}]", ["{}"; 11].join(","));
    let a = gw.post("application/json", body.into_bytes(), &[]).await;
    assert_eq!(a.status, 400);
    let v = a.json();
    assert!(v.is_object(), "one error, not a batch of answers: {v}");
    assert_eq!(v["error"]["code"], -32600);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("server.max_batch_len"),
        "{v}"
    );
    // Malformed JSON after the limit is still a parse error, not a long batch.
    let body = format!("[{},", ["{}"; 11].join(","));
    let a = gw.post("application/json", body.into_bytes(), &[]).await;
    assert_eq!(a.json()["error"]["code"], -32700);
}

#[tokio::test]
async fn a_batch_runs_at_most_max_batch_concurrency_calls_at_once() {
    let up = legacy_echo().delay(Duration::from_millis(150)).run().await;
    let gw = gateway()
        .upstream("up", &up.url(), Dialect::Legacy, 5000)
        .route(&["*"], "up")
        .with(|c| c.server.max_batch_concurrency = 2)
        .start()
        .await;
    let batch: Vec<Value> = (0..6)
        .map(|i| json!({"jsonrpc": "2.0", "id": i, "method": "m"}))
        .collect();
    let started = Instant::now();
    let a = gw.rpc(&Value::from(batch)).await;
    let took = started.elapsed();
    let ids: Vec<Value> = a
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].clone())
        .collect();
    assert_eq!(ids, (0..6).map(Value::from).collect::<Vec<_>>());
    assert_eq!(up.seen().len(), 6);
    assert_eq!(up.max_in_flight(), 2, "two at once, never more");
    // Three rounds of two 150 ms calls.
    assert!(took >= Duration::from_millis(450), "{took:?}");
}

#[tokio::test]
async fn open_connections_are_bounded_and_a_waiting_client_is_served_when_one_closes() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gw = gateway()
        .with(|c| c.server.max_connections = 2)
        .start()
        .await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"_cleveragents/health/check"}"#;
    let request = format!(
        "POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    // Reads one answer's head and says whether it is a 200.
    async fn answered(s: &mut tokio::net::TcpStream) -> bool {
        let mut buf = [0u8; 1024];
        let n = s.read(&mut buf).await.unwrap_or(0);
        buf[..n].starts_with(b"HTTP/1.1 200")
    }
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        assert!(answered(&mut s).await, "within the limit");
        held.push(s); // kept open (keep-alive)
    }
    let mut third = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    third.write_all(request.as_bytes()).await.unwrap();
    let early = tokio::time::timeout(Duration::from_millis(300), answered(&mut third)).await;
    assert!(
        early.is_err(),
        "a third connection waits while two are open"
    );
    drop(held.pop());
    let late = tokio::time::timeout(Duration::from_secs(5), answered(&mut third)).await;
    assert_eq!(late, Ok(true), "served once a connection closed");
    // The one still held keeps being served.
    let mut kept = held.pop().unwrap();
    kept.write_all(request.as_bytes()).await.unwrap();
    assert!(answered(&mut kept).await);
}

#[tokio::test]
async fn clients_too_slow_to_send_a_head_or_idle_are_disconnected_and_others_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let gw = gateway()
        .with(|c| c.server.header_read_timeout_ms = 300)
        .start()
        .await;
    let mut slow = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    slow.write_all(b"POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    // Served meanwhile.
    let ok = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 1, "method": "_cleveragents/health/check"}))
        .await;
    assert_eq!(ok.status, 200);
    // The slow one is cut off once its time is up: an answer or not, then the end of the stream.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the gateway closes the connection");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(150),
        "not before its time: {waited:?}"
    );
    // A kept-alive connection that stays silent after its answer is closed the same way.
    let mut idle = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"_cleveragents/health/check"}"#;
    let head = format!(
        "POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    idle.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), idle.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the idle connection is closed");
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"),
        "after its answer"
    );
}

#[tokio::test]
async fn silent_and_stalled_connections_are_closed_and_a_normal_call_still_answered() {
    const MAX: usize = 20;
    const TIMEOUT: Duration = Duration::from_millis(2000);
    const GOAWAY: u8 = 7;
    for hold in [Hold::Silent, Hold::H2Preface, Hold::StalledBody] {
        let gw = gateway()
            .with(|c| {
                c.server.max_connections = MAX;
                // One socket: the held connections are accepted before the call below, in the
                // order they came (with a socket per worker, a call may reach a worker whose
                // queue is empty while another still has held ones to accept).
                c.server.worker_threads = 1;
                c.server.header_read_timeout_ms = TIMEOUT.as_millis() as u64;
                c.server.body_read_timeout_ms = TIMEOUT.as_millis() as u64;
            })
            .start()
            .await;
        let opened = Instant::now();
        let mut held = Vec::new();
        for _ in 0..MAX {
            let mut s = TcpStream::connect(gw.addr).await.unwrap();
            match hold {
                Hold::Silent => {}
                Hold::H2Preface => {
                    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
                        .await
                        .unwrap();
                }
                Hold::StalledBody => {
                    s.write_all(
                        b"POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
                          content-length: 1000\r\n\r\n{\"jsonrpc\"",
                    )
                    .await
                    .unwrap();
                }
            }
            held.push(s);
        }
        // Every slot is held: the call below waits in the backlog until the gateway lets go,
        // which it does within the header read timeout (a second's margin for scheduling).
        let answered = tokio::time::timeout(
            TIMEOUT + Duration::from_secs(1),
            gw.post("application/json", HEALTH.into(), &[]),
        )
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{hold:?}: {MAX} held connections keep a call waiting past {:?}",
                TIMEOUT + Duration::from_secs(1)
            )
        });
        assert_eq!(answered.status, 200, "{hold:?}");
        for mut s in held {
            let mut rest = Vec::new();
            tokio::time::timeout(Duration::from_secs(1), s.read_to_end(&mut rest))
                .await
                .unwrap_or_else(|_| panic!("{hold:?}: the connection is closed"))
                .ok();
            match hold {
                Hold::StalledBody => {
                    let text = String::from_utf8_lossy(&rest);
                    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
                    assert_eq!(body_of(&text)["error"]["code"], -32600, "{text}");
                }
                // A GOAWAY said why before the close.
                Hold::H2Preface => {
                    let types = h2_frame_types(&rest);
                    assert!(types.contains(&GOAWAY), "{types:?}");
                }
                Hold::Silent => {}
            }
        }
        let took = opened.elapsed();
        assert!(
            took < TIMEOUT + Duration::from_secs(1),
            "{hold:?}: {took:?}"
        );
    }
}
