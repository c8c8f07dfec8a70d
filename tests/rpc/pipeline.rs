//! HTTP/1.1 pipelining to upstreams (`upstreams[].pipeline`), over real sockets: answers go to
//! the calls they answer, a connection that fails mid-pipeline fails only the calls written on
//! it (and re-sends none of those), an answer that ends the connection gets the calls behind it
//! re-sent, a timed-out call's answer is never read as the next call's, and a full pipeline
//! overflows to the pooled path. The misbehaving upstreams are raw `TcpListener` servers so
//! what arrived in one read, and what was answered on which connection, is visible.

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::join_all;
use serde_json::{json, Value};
use support::{gateway, legacy_echo, TestGateway};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use wiregate::config::Dialect;

/// A gateway routing every method to the legacy upstream at `url`, pipelined `depth` deep, on
/// one worker (so one lane: what arrives on which connection is what these tests read).
async fn pipelined(url: &str, depth: usize, timeout_ms: u64) -> TestGateway {
    gateway()
        .upstream("up", url, Dialect::Legacy, timeout_ms)
        .route(&["*"], "up")
        .with(|c| {
            c.upstreams[0].pipeline = depth;
            c.server.worker_threads = 1;
        })
        .start()
        .await
}

/// A JSON-RPC call carrying `n`, which the upstreams here echo back.
fn call(n: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": n, "method": "echo", "params": {"n": n}})
}

/// What a raw upstream saw.
#[derive(Default)]
struct Seen {
    /// Connections accepted.
    connections: AtomicUsize,
    /// Every request's `params.n`, in arrival order.
    requests: Mutex<Vec<u64>>,
}

/// One accepted connection of a raw upstream, reading requests framed by `content-length`.
struct RawConn {
    tcp: TcpStream,
    buf: Vec<u8>,
    seen: Arc<Seen>,
}

impl RawConn {
    /// Reads until `n` whole requests are buffered, and returns their bodies (consumed); fewer
    /// when the gateway closes the connection first.
    async fn requests(&mut self, n: usize) -> Vec<Value> {
        let mut out = Vec::new();
        loop {
            while out.len() < n {
                let Some(body) = self.take_one() else { break };
                out.push(body);
            }
            if out.len() == n {
                return out;
            }
            let mut chunk = [0u8; 16 * 1024];
            let got = self.tcp.read(&mut chunk).await.unwrap_or(0);
            if got == 0 {
                return out;
            }
            self.buf.extend_from_slice(&chunk[..got]);
        }
    }

    /// The next request, `None` once the gateway closed the connection.
    async fn one(&mut self) -> Option<Value> {
        self.requests(1).await.pop()
    }

    /// One whole request from the buffer, if there is one.
    fn take_one(&mut self) -> Option<Value> {
        let end = self.buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let head = String::from_utf8_lossy(&self.buf[..end]).to_ascii_lowercase();
        assert!(head.starts_with("post "), "{head}");
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .expect("a content-length")
            .trim()
            .parse()
            .unwrap();
        if self.buf.len() < end + len {
            return None;
        }
        let body: Value = serde_json::from_slice(&self.buf[end..end + len]).unwrap();
        self.buf.drain(..end + len);
        let n = body["params"]["n"].as_u64().unwrap();
        self.seen.requests.lock().unwrap().push(n);
        Some(body)
    }

    /// Answers `req` with the legacy success envelope echoing its params; `close` adds
    /// `Connection: close`.
    async fn answer(&mut self, req: &Value, close: bool) -> std::io::Result<()> {
        let body = json!({"a2a_version": "1.0", "request_id": req["request_id"],
                          "status": "success", "data": req["params"]})
        .to_string();
        let extra = if close { "connection: close\r\n" } else { "" };
        let text = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\n\r\n{body}",
            body.len()
        );
        self.tcp.write_all(text.as_bytes()).await
    }
}

/// A raw upstream running `script` on each connection (the connection's index, from 0).
async fn raw_upstream<F, Fut>(script: F) -> (String, Arc<Seen>)
where
    F: Fn(usize, RawConn) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let i = s.connections.fetch_add(1, Ordering::SeqCst);
            let conn = RawConn {
                tcp,
                buf: Vec::new(),
                seen: s.clone(),
            };
            tokio::spawn(script(i, conn));
        }
    });
    (format!("http://{addr}/a2a"), seen)
}

/// The calls `ns`, all at once; their answers in the same order.
async fn all_at_once(gw: &TestGateway, ns: &[u64]) -> Vec<support::Answer> {
    let calls: Vec<Value> = ns.iter().map(|n| call(*n)).collect();
    join_all(calls.iter().map(|c| gw.rpc(c))).await
}

#[tokio::test]
async fn pipelined_calls_share_a_connection_and_each_gets_its_own_answer() {
    // The upstream reads only once 5 requests are queued on its one connection (so they were
    // all in flight together), then answers them in order, each echoing its own `n`.
    let (url, seen) = raw_upstream(|_, mut c| async move {
        loop {
            let reqs = c.requests(5).await;
            if reqs.is_empty() {
                return;
            }
            for req in reqs {
                c.answer(&req, false).await.unwrap();
            }
        }
    })
    .await;
    let gw = pipelined(&url, 8, 5000).await;
    for round in 0..3u64 {
        let ns: Vec<u64> = (0..5).map(|i| round * 10 + i).collect();
        for (n, a) in ns.iter().zip(all_at_once(&gw, &ns).await) {
            assert_eq!(a.status, 200, "{}", a.text);
            assert_eq!(a.json()["id"], *n);
            assert_eq!(
                a.json()["result"],
                json!({"n": n}),
                "call {n} got another's answer"
            );
        }
    }
    assert_eq!(seen.connections.load(Ordering::SeqCst), 1, "one connection");
    assert_eq!(
        seen.requests.lock().unwrap().len(),
        15,
        "nothing sent twice"
    );
}

#[tokio::test]
async fn pipelining_to_a_hyper_upstream_answers_every_call_with_its_own_result() {
    let up = legacy_echo().run().await;
    let gw = pipelined(&up.url(), 4, 5000).await;
    let ns: Vec<u64> = (0..64).collect();
    for (n, a) in ns.iter().zip(all_at_once(&gw, &ns).await) {
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(a.json()["result"]["params"], json!({"n": n}));
    }
    assert_eq!(up.seen().len(), 64);
}

/// An upstream whose first connection takes three requests, answers the first (with
/// `Connection: close` when `close`) and closes; later connections answer everything.
async fn first_answered_then_gone(close: bool) -> (String, Arc<Seen>) {
    raw_upstream(move |i, mut c| async move {
        if i == 0 {
            let reqs = c.requests(3).await;
            c.answer(&reqs[0], close).await.unwrap();
            return;
        }
        while let Some(req) = c.one().await {
            let _ = c.answer(&req, false).await;
        }
    })
    .await
}

#[tokio::test]
async fn an_upstream_closing_mid_pipeline_fails_the_written_calls_like_the_pooled_path() {
    // Three requests in flight on the first connection; the upstream answers the first and
    // closes. Later connections answer everything.
    let (url, seen) = first_answered_then_gone(false).await;
    let gw = pipelined(&url, 8, 5000).await;
    let answers = all_at_once(&gw, &[1, 2, 3]).await;
    let first = seen.requests.lock().unwrap()[0];
    for (n, a) in [1u64, 2, 3].iter().zip(&answers) {
        if *n == first {
            assert_eq!(a.status, 200, "{}", a.text);
            assert_eq!(a.json()["result"], json!({"n": n}));
        } else {
            // The pooled path's answer for a connection that closed mid-answer.
            assert_eq!(a.status, 502, "{}", a.text);
            assert_eq!(a.json()["error"]["code"], -32050);
            assert_eq!(a.json()["error"]["data"]["upstream"], "up");
        }
    }
    // The written POSTs were not sent again.
    assert_eq!(seen.requests.lock().unwrap().len(), 3);
    // The next call goes on a new connection.
    let a = gw.rpc(&call(9)).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json()["result"], json!({"n": 9}));
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn an_answer_with_connection_close_gets_the_calls_behind_it_sent_again() {
    // The first connection: three requests in flight, the first answered with
    // `Connection: close`; later connections answer everything.
    let (url, seen) = first_answered_then_gone(true).await;
    let gw = pipelined(&url, 8, 5000).await;
    let answers = all_at_once(&gw, &[1, 2, 3]).await;
    for (n, a) in [1u64, 2, 3].iter().zip(&answers) {
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(a.json()["result"], json!({"n": n}));
    }
    let requests = seen.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 5, "two calls sent again: {requests:?}");
    let mut again = requests[3..].to_vec();
    again.sort_unstable();
    let mut behind = requests[1..3].to_vec();
    behind.sort_unstable();
    assert_eq!(
        again, behind,
        "the two behind the close are the ones sent again"
    );
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_timed_out_call_never_hands_its_answer_to_the_next() {
    // Answers in order, the call with n = 1 after 800 ms (its timeout is 300 ms).
    let (url, seen) = raw_upstream(|_, mut c| async move {
        while let Some(req) = c.one().await {
            if req["params"]["n"] == 1 {
                tokio::time::sleep(Duration::from_millis(800)).await;
            }
            let _ = c.answer(&req, false).await;
        }
    })
    .await;
    let gw = pipelined(&url, 8, 300).await;
    let first = call(1);
    let slow = gw.rpc(&first);
    let behind = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        gw.rpc(&call(2)).await
    };
    let (slow, behind) = tokio::join!(slow, behind);
    assert_eq!(slow.status, 504, "{}", slow.text);
    assert_eq!(slow.json()["error"]["code"], -32051);
    // Written behind the slow call: failed when the connection was dropped, not answered with
    // the slow call's answer, and not sent again.
    assert_eq!(behind.status, 502, "{}", behind.text);
    assert_eq!(behind.json()["error"]["code"], -32050);
    assert!(
        behind.text.contains("timed out"),
        "says why: {}",
        behind.text
    );
    // Later calls get their own answers, on a new connection, even once the slow answer
    // has been written to the old one.
    tokio::time::sleep(Duration::from_millis(700)).await;
    for n in [3u64, 4] {
        let a = gw.rpc(&call(n)).await;
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(a.json()["result"], json!({"n": n}));
    }
    assert_eq!(seen.requests.lock().unwrap().clone(), vec![1, 2, 3, 4]);
    assert_eq!(seen.connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_full_pipeline_overflows_to_the_pooled_path() {
    // One call in flight and one queued per lane; the others take pooled connections, so the
    // upstream sees several at once and every call is answered.
    let up = legacy_echo().delay(Duration::from_millis(200)).run().await;
    let gw = pipelined(&up.url(), 1, 5000).await;
    let ns: Vec<u64> = (0..6).collect();
    for (n, a) in ns.iter().zip(all_at_once(&gw, &ns).await) {
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(a.json()["result"]["params"], json!({"n": n}));
    }
    assert!(
        up.max_in_flight() >= 4,
        "overflowed: {}",
        up.max_in_flight()
    );
}

#[tokio::test]
async fn a_dead_upstream_fails_pipelined_calls_with_502() {
    let dead = support::dead_url().await;
    let gw = pipelined(&dead, 8, 2000).await;
    for a in all_at_once(&gw, &[1, 2, 3]).await {
        assert_eq!(a.status, 502, "{}", a.text);
        assert_eq!(a.json()["error"]["code"], -32050);
    }
}

#[test]
fn pipeline_is_validated_with_its_key_path() {
    let mut config = wiregate::config::Config::default();
    config.upstreams = vec![
        wiregate::config::Upstream::new("a", "https://example.com/", Dialect::Legacy, 100),
        wiregate::config::Upstream::new("b", "http://example.com/", Dialect::Legacy, 100),
        wiregate::config::Upstream::new("c", "http://example.com/", Dialect::Legacy, 100),
    ];
    config.upstreams[0].pipeline = 4;
    config.upstreams[1].pipeline = 5000;
    config.upstreams[2].pipeline = 1024;
    let err = config.validate().unwrap_err().to_string();
    assert!(err.contains("upstreams[0].pipeline"), "{err}");
    assert!(err.contains("http://"), "{err}");
    assert!(err.contains("upstreams[1].pipeline"), "{err}");
    assert!(err.contains("at most 1024"), "{err}");
    assert!(!err.contains("upstreams[2]"), "{err}");
}
