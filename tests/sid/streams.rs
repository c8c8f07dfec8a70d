//! The sid bridge's SSE streams over real sockets: `retry:` and `: keepalive` frames, the tick
//! that gathers a trickle into few writes and a thousand subscribers' deltas into shared ones,
//! resumption before the first event, HTTP/1.0 streams, a subscriber that hangs up, and streams
//! that do not exist.

use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::raw_h1::exchange;
use crate::support::{gateway, text_message, TestGateway};

const T: Duration = Duration::from_secs(10);

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

#[tokio::test]
async fn streams_that_do_not_exist_are_404_not_an_empty_200() {
    let gw = gateway().sid("hard-404").start().await;
    for path in ["/tasks/nope/events", "/contexts/nope/events"] {
        let a = gw.get(path).await;
        assert_eq!(a.status, 404, "{path}: {}", a.text);
        assert_eq!(
            a.header("content-type").as_deref(),
            Some("application/json")
        );
        assert_eq!(a.json()["error"]["code"], -32001, "{path}");
    }
    // Without the bridge, too.
    let gw = gateway().start().await;
    assert_eq!(gw.get("/tasks/nope/events").await.status, 404);
}

#[tokio::test]
async fn last_event_id_zero_before_anything_was_dropped_is_no_gap() {
    let gw = gateway().sid("hard-lei").start().await;
    let events = gw
        .stream_message(text_message("hi"))
        .await
        .until_final(T)
        .await;
    let task = events[0].data["params"]["taskId"]
        .as_str()
        .or_else(|| events[0].data["params"]["id"].as_str())
        .unwrap_or_else(|| panic!("{:?}", events[0]))
        .to_owned();
    let again = gw
        .sse_get(&format!("/tasks/{task}/events"), Some("0"))
        .await
        .until_final(T)
        .await;
    assert!(
        again.iter().all(|e| e.event != "gap"),
        "nothing was dropped: {again:?}"
    );
    assert_eq!(again.len(), events.len(), "every event replayed once");
    assert_eq!(again[0].id, "1");
}

#[tokio::test]
async fn streams_on_http_1_0_are_close_delimited_and_end_after_the_final_event() {
    let gw = gateway().sid("hard-h10").start().await;
    let task = gw.call("message/send", text_message("hi")).await;
    let task = task["result"]["id"].as_str().unwrap().to_owned();
    let req = format!("GET /tasks/{task}/events HTTP/1.0\r\n\r\n");
    let answer = exchange(gw.addr, req.as_bytes(), T).await;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.0 200 OK"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    assert!(!head.contains("transfer-encoding"), "{head}");
    assert!(body.starts_with("retry:"), "{body}");
    let last = body.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.contains(r#""final":true"#), "{last}");
    // The same stream over HTTP/1.1 is chunked and ends with the last chunk.
    let req = format!("GET /tasks/{task}/events HTTP/1.1\r\nhost: x\r\n\r\n");
    let answer = exchange(gw.addr, req.as_bytes(), T).await;
    assert!(answer.contains("transfer-encoding: chunked"), "{answer}");
    assert!(answer.ends_with("0\r\n\r\n"), "{answer}");
}

#[tokio::test]
async fn a_subscriber_that_hangs_up_frees_its_place() {
    let gw = gateway()
        .sid("hard-leave")
        .with(|c| c.sid.max_subscribers = 1)
        .start()
        .await;
    let r = gw.call("message/send", text_message("hi")).await;
    let ctx = r["result"]["contextId"].as_str().unwrap().to_owned();
    let req = format!("GET /contexts/{ctx}/events HTTP/1.1\r\nhost: x\r\n\r\n");
    let mut first = TcpStream::connect(gw.addr).await.unwrap();
    first.write_all(req.as_bytes()).await.unwrap();
    let mut head = [0u8; 12];
    first.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    let refused = exchange(gw.addr, req.as_bytes(), T).await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    drop(first);
    let started = Instant::now();
    loop {
        let mut again = TcpStream::connect(gw.addr).await.unwrap();
        again.write_all(req.as_bytes()).await.unwrap();
        again.read_exact(&mut head).await.unwrap();
        if &head == b"HTTP/1.1 200" {
            break;
        }
        assert!(started.elapsed() < T, "the place was never freed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A target the stream writer does not take (a percent-encoded id) is still routed.
    let a = gw.get("/tasks/%6E%6F/events").await;
    assert_eq!(a.status, 404, "{}", a.text);
}
