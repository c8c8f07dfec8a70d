//! README claims that had no test of their own, each checked over real sockets and real child
//! processes: the batch concurrency cap, sid lines that are not UTF-8 or not protocol 5, the
//! `retry:` / `: keepalive` frames and the tick that gathers a live stream's trickle into few
//! writes, and the A2A `event: error` frame a client that falls behind gets.

mod support;

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};
use support::{gateway, legacy_echo, text_message, TestGateway};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wiregate::config::Dialect;

const T: Duration = Duration::from_secs(10);

/// A counter's value on `/metrics` (0 while it was never incremented).
async fn counter(gw: &TestGateway, name: &str) -> u64 {
    let text = gw.get("/metrics").await.text;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
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
async fn sid_lines_that_are_not_utf8_or_not_protocol_5_are_counted_and_skipped() {
    let gw = gateway().sid("garble").start().await;
    let before = counter(&gw, "wiregate_sid_bad_lines_total").await;
    // The fake prints a line that is not UTF-8 and a protocol 4 delta, then a plain answer.
    let r = gw.call("message/send", text_message("garble")).await;
    assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
    assert_eq!(
        r["result"]["artifacts"],
        json!([{"name": "response", "parts": [{"kind": "text", "text": "Hello from the mock model."}]}]),
        "the protocol 4 delta is not part of the answer"
    );
    let after = counter(&gw, "wiregate_sid_bad_lines_total").await;
    assert_eq!(after - before, 2, "both lines counted");
    // The context goes on.
    let ctx = r["result"]["contextId"].clone();
    let again = gw
        .call(
            "message/send",
            json!({"message": {"parts": [{"text": "hello"}]}, "contextId": ctx}),
        )
        .await;
    assert_eq!(again["result"]["status"]["state"], "completed", "{again}");
}

/// A context of its own that has finished one turn; its id and its last event id.
async fn context_after_a_turn(gw: &TestGateway) -> (String, String) {
    let r = gw.call("message/send", text_message("hello")).await;
    let ctx = r["result"]["contextId"].as_str().unwrap().to_owned();
    let events = gw
        .sse_get(&format!("/contexts/{ctx}/events"), None)
        .await
        .until_final(T)
        .await;
    (ctx, events.last().unwrap().id.clone())
}

#[tokio::test]
async fn a_live_stream_starts_with_retry_and_sends_keepalives_while_idle() {
    let gw = gateway()
        .sid("keepalive")
        .with(|c| c.sid.keepalive_ms = 150)
        .start()
        .await;
    let (ctx, last) = context_after_a_turn(&gw).await;
    // Resumed after the last event: nothing to replay, so the stream is live and idle.
    let resp = gw
        .http
        .get(format!("{}/contexts/{ctx}/events", gw.base()))
        .header("last-event-id", &last)
        .send()
        .await
        .unwrap();
    let mut body = resp.bytes_stream();
    let mut text = String::new();
    let started = Instant::now();
    while text.matches(": keepalive").count() < 2 {
        let chunk = tokio::time::timeout(T, body.next())
            .await
            .expect("bytes within 10 s")
            .expect("the stream stays open")
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    let took = started.elapsed();
    assert!(text.starts_with("retry: "), "{text:?}");
    let retry: u64 = text["retry: ".len()..text.find('\n').unwrap()]
        .parse()
        .expect("retry: carries milliseconds");
    assert!(retry > 0);
    assert!(!text.contains("\nid: "), "no event was due: {text:?}");
    assert!(
        text.lines()
            .all(|l| l.is_empty() || l.starts_with("retry: ") || l == ": keepalive"),
        "only the retry advice and comments: {text:?}"
    );
    // Two intervals of 150 ms, not sooner.
    assert!(took >= Duration::from_millis(250), "{took:?}");
}

#[tokio::test]
async fn a_caught_up_subscriber_lets_a_trickle_share_one_write() {
    let gw = gateway().sid("linger").start().await;
    let (ctx, last) = context_after_a_turn(&gw).await;
    let resp = gw
        .http
        .get(format!("{}/contexts/{ctx}/events", gw.base()))
        .header("last-event-id", &last)
        .send()
        .await
        .unwrap();
    // Each chunk of the response body is one write of the gateway's (hyper sends each body
    // frame as a chunk; the client never merges two).
    let mut body = resp.bytes_stream();
    // 300 deltas, one every millisecond: without the log's tick each would be written alone.
    let n = 300;
    let flood = gw.send_turn(&ctx, &format!("flood {n} 1000"));
    let mut writes = Vec::new();
    let mut text = String::new();
    while !text.contains("\"final\":true") {
        let chunk = tokio::time::timeout(T, body.next())
            .await
            .expect("bytes within 10 s")
            .expect("the stream stays open")
            .unwrap();
        let s = std::str::from_utf8(&chunk).unwrap();
        writes.push(s.matches("event: TaskArtifactUpdateEvent").count());
        text.push_str(s);
    }
    assert_eq!(
        flood.await.unwrap()["result"]["status"]["state"],
        "completed"
    );
    let deltas: usize = writes.iter().sum();
    assert_eq!(deltas, n, "every delta arrived");
    let carrying: Vec<usize> = writes.into_iter().filter(|d| *d > 0).collect();
    let mean = deltas as f64 / carrying.len() as f64;
    // With a 2 ms tick two or three deltas share each write; one per write would be 1.0.
    assert!(
        mean >= 1.6,
        "{deltas} deltas in {} writes ({mean:.2} a write)",
        carrying.len()
    );
}

/// Reads a raw event stream's chunked body until the task's final event; returns how many
/// deltas came and in how many chunks that carried any (each chunk is one write of the gateway's).
async fn deltas_and_writes(mut s: tokio::net::TcpStream) -> (usize, usize) {
    let mut buf = Vec::new();
    let mut at = 0;
    let (mut deltas, mut writes) = (0, 0);
    loop {
        // One whole chunk: its size line, its data, its CRLF.
        let chunk = loop {
            if let Some(eol) = buf[at..].windows(2).position(|w| w == b"\r\n") {
                let size = std::str::from_utf8(&buf[at..at + eol]).unwrap();
                let size = usize::from_str_radix(size, 16).unwrap();
                let start = at + eol + 2;
                if buf.len() >= start + size + 2 {
                    at = start + size + 2;
                    break String::from_utf8(buf[start..start + size].to_vec()).unwrap();
                }
            }
            let mut more = [0u8; 64 * 1024];
            let n = tokio::time::timeout(T, s.read(&mut more))
                .await
                .expect("bytes within 10 s")
                .unwrap();
            assert!(n > 0, "the stream ended after {deltas} deltas");
            buf.extend_from_slice(&more[..n]);
        };
        let d = chunk.matches("event: TaskArtifactUpdateEvent").count();
        deltas += d;
        writes += usize::from(d > 0);
        if chunk.contains("\"final\":true") {
            return (deltas, writes);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiting_subscribers_each_get_every_delta_in_shared_writes() {
    let gw = gateway().sid("tick").start().await;
    let (ctx, last) = context_after_a_turn(&gw).await;
    let subscribers = 1000;
    let mut streams = Vec::with_capacity(subscribers);
    for _ in 0..subscribers {
        let mut s = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        let req = format!(
            "GET /contexts/{ctx}/events HTTP/1.1\r\nhost: x\r\nlast-event-id: {last}\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.unwrap();
        // The head, byte by byte, so the body's first chunk stays in the socket.
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            s.read_exact(&mut b).await.unwrap();
            head.push(b[0]);
        }
        assert!(head.starts_with(b"HTTP/1.1 200"));
        streams.push(tokio::spawn(deltas_and_writes(s)));
    }
    // 200 deltas, one every millisecond, to a thousand waiting subscribers.
    let n = 200;
    let flood = gw.send_turn(&ctx, &format!("flood {n} 1000"));
    let (mut deltas, mut writes) = (0, 0);
    for s in streams {
        let (d, w) = s.await.unwrap();
        assert_eq!(d, n, "every subscriber gets every delta");
        deltas += d;
        writes += w;
    }
    assert_eq!(
        flood.await.unwrap()["result"]["status"]["state"],
        "completed"
    );
    // The log wakes them at most once a tick (8 ms at a thousand; its timing is pinned by
    // `events::tick`'s tests on a paused clock): several deltas share each write, and no
    // subscriber is left waiting for a wake-up that never comes. A write each would be 1.0.
    let mean = deltas as f64 / writes as f64;
    assert!(
        mean >= 2.0,
        "{deltas} deltas in {writes} writes ({mean:.2} a write)"
    );
}

/// The body of one HTTP/1.1 request written by hand.
fn post_request(body: &Value) -> String {
    let body = body.to_string();
    format!(
        "POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_client_that_falls_behind_the_replay_log_gets_an_error_frame() {
    // A log of 256 events: a client that reads nothing while more pass loses its place.
    let gw = gateway()
        .sid("a2a-behind")
        .with(|c| c.sid.replay_events = 256)
        .start()
        .await;
    let first = gw.call("message/send", text_message("hello")).await;
    let ctx = first["result"]["contextId"].clone();
    // A spec stream on a raw socket with a tiny receive window, never read while sid floods:
    // 4 000 deltas of 4 KiB, far more than the kernel's socket buffers and the log hold.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut slow = socket.connect(gw.addr).await.unwrap();
    let id = json!("behind-1");
    let request = json!({"jsonrpc": "2.0", "id": id, "method": "SendStreamingMessage",
        "params": {"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                               "contextId": ctx, "parts": [{"text": "flood 4000 2000 4096"}]}}});
    slow.write_all(post_request(&request).as_bytes())
        .await
        .unwrap();
    // Read only the head and the first event (the task), so the flood has begun: a turn asked
    // for before that would run first.
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while !String::from_utf8_lossy(&received).contains("\ndata: ") {
        let n = tokio::time::timeout(T, slow.read(&mut buf))
            .await
            .expect("the stream's first event")
            .unwrap();
        assert!(n > 0, "connection closed before the first event");
        received.extend_from_slice(&buf[..n]);
    }
    // The flood is over when the context takes the next turn.
    let started = Instant::now();
    loop {
        let next = gw
            .call(
                "message/send",
                json!({"message": {"parts": [{"text": "hello"}]}, "contextId": ctx}),
            )
            .await;
        if next["result"]["status"]["state"] == "completed" {
            break;
        }
        assert_eq!(next["error"]["code"], -32060, "busy while flooding: {next}");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the flood ended"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Now read what the slow client was sent: the stream ends with the error frame.
    while !received.ends_with(b"0\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(30), slow.read(&mut buf))
            .await
            .expect("the cut stream ends")
            .unwrap();
        assert!(n > 0, "connection closed before the stream's last chunk");
        received.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"), "{}", &text[..200]);
    let delivered = text.matches("\"artifactUpdate\"").count();
    assert!(delivered < 4000, "cut off, after {delivered} deltas");
    let at = text.rfind("event: error\n").expect("an event: error frame");
    let frame = &text[at..];
    let data = frame
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .expect("a data: line");
    let err: Value = serde_json::from_str(data).unwrap();
    assert_eq!(err["jsonrpc"], "2.0");
    assert_eq!(err["id"], id, "a response to the stream's request");
    assert_eq!(err["error"]["code"], -32603, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("fell behind")),
        "{err}"
    );
    // Nothing after it but the end of the body.
    let rest = &frame[frame.find("\n\n").unwrap() + 2..];
    assert_eq!(rest.trim(), "0", "{rest:?}");
}
