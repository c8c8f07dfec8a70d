//! Hostile and clumsy clients: connections that never finish, ids no float can hold, a busy sid
//! flooded with calls, malformed chunked bodies, streams that do not exist, resumption before
//! the first event, and shutdown with everything hung. Each over real sockets.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wiregate::config::Dialect;

use support::{fronting, gateway, jsonrpc_echo, legacy_echo, text_message};

const T: Duration = Duration::from_secs(10);
const HEALTH: &str = r#"{"jsonrpc":"2.0","id":1,"method":"_cleveragents/health/check"}"#;

/// Sends `bytes` on a new connection and reads until the gateway closes it (or `wait` passes).
async fn raw_exchange(addr: std::net::SocketAddr, bytes: &[u8], wait: Duration) -> String {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(wait, s.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

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
async fn silent_and_stalled_connections_are_closed_and_a_normal_call_still_answered() {
    const MAX: usize = 20;
    const TIMEOUT: Duration = Duration::from_millis(2000);
    const GOAWAY: u8 = 7;
    for hold in [Hold::Silent, Hold::H2Preface, Hold::StalledBody] {
        let gw = gateway()
            .with(|c| {
                c.server.max_connections = MAX;
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
        // which it does within the header read timeout (a second's margin for a busy machine).
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

/// Ids that no `f64` or `i64` can hold, sent as text and compared as text.
const IDS: [&str; 6] = [
    "123456789012345678901234567890",
    "18446744073709551616",
    "1e2",
    "1.50",
    "-0",
    "-1.0E+400",
];

#[tokio::test]
async fn ids_come_back_with_every_digit_through_both_dialects_and_batches() {
    for (up, dialect) in [
        (legacy_echo().run().await, Dialect::Legacy),
        (jsonrpc_echo().run().await, Dialect::Jsonrpc),
    ] {
        let gw = fronting(&up, dialect).await;
        for id in IDS {
            let single = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"echo","params":{{}}}}"#);
            let a = gw.post("application/json", single.into_bytes(), &[]).await;
            assert!(
                a.text.ends_with(&format!(r#""id":{id}}}"#)),
                "{dialect:?} {id}: {}",
                a.text
            );
            let batch = format!(
                r#"[{{"jsonrpc":"2.0","id":{id},"method":"echo"}},{{"jsonrpc":"2.0","id":{id},"method":"missing"}}]"#
            );
            let a = gw.post("application/json", batch.into_bytes(), &[]).await;
            assert_eq!(
                a.text.matches(&format!(r#""id":{id}}}"#)).count(),
                2,
                "{dialect:?} {id}: {}",
                a.text
            );
        }
    }
    // A call the gateway refuses answers under the same id text.
    let gw = gateway().start().await;
    let a = gw
        .post(
            "application/json",
            br#"{"jsonrpc":"2.0","id":1e2,"method":""}"#.to_vec(),
            &[],
        )
        .await;
    assert!(a.text.ends_with(r#""id":1e2}"#), "{}", a.text);
}

#[tokio::test]
async fn ids_keep_their_digits_on_a2a_streams() {
    let gw = gateway().sid("hard-ids").start().await;
    let id = "123456789012345678901234567890";
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"SendStreamingMessage","params":{{"message":{{"messageId":"m1","role":"ROLE_USER","parts":[{{"text":"hi"}}]}}}}}}"#
    );
    let resp = reqwest::Client::new()
        .post(format!("{}/rpc", gw.base()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = tokio::time::timeout(T, resp.text()).await.unwrap().unwrap();
    let data: Vec<&str> = text.lines().filter(|l| l.starts_with("data:")).collect();
    assert!(data.len() >= 2, "{text}");
    for d in data {
        assert!(d.contains(&format!(r#""id":{id}"#)), "{d}");
    }
}

#[tokio::test]
async fn a_busy_context_bounds_its_queue_and_forgets_callers_who_left() {
    let gw = gateway()
        .sid("hard-busy")
        .with(|c| c.sid.max_queued_requests = 2)
        .start()
        .await;
    let mut turn = gw.stream_message(text_message("hang")).await;
    let first = turn.next(T).await.expect("the turn starts");
    let context = first.data["params"]["contextId"]
        .as_str()
        .unwrap_or_else(|| panic!("{first:?}"))
        .to_owned();
    let stats = json!({"jsonrpc": "2.0", "id": 1, "method": "_sid/stats", "params": {"contextId": context}});
    let url = format!("{}/rpc", gw.base());
    // Two callers give up while sid is busy: their places must free up.
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    for _ in 0..2 {
        let r = impatient
            .post(&url)
            .header("content-type", "application/json")
            .body(stats.to_string())
            .send()
            .await;
        assert!(r.is_err(), "sid answers nothing during a turn");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Two more wait (they are not refused: the first two were forgotten)...
    let http = reqwest::Client::new();
    let waiting: Vec<_> = (0..2)
        .map(|_| support::spawn_post(&http, url.clone(), stats.clone()))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for w in &waiting {
        assert!(!w.is_finished(), "a queued call waits for sid");
    }
    // ...and the next is refused at once, by name.
    let refused = tokio::time::timeout(Duration::from_secs(2), gw.rpc(&stats))
        .await
        .expect("refused at once")
        .json();
    assert_eq!(refused["error"]["code"], -32060, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sid.max_queued_requests"),
        "{refused}"
    );
    for w in waiting {
        w.abort();
    }
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
        let answer = raw_exchange(gw.addr, format!("{head}{chunks}").as_bytes(), T).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{name}: {answer:.200}");
        let body = body_of(&answer);
        assert_eq!(body["error"]["code"], -32700, "{name}: {body}");
        assert_eq!(body["error"]["data"]["kind"], "malformed_body", "{name}");
    }
    // Well-formed and over the limit: 413.
    let big = "a".repeat((1 << 20) + 10);
    let chunks = format!("{:x}\r\n{big}\r\n0\r\n\r\n", big.len());
    let answer = raw_exchange(gw.addr, format!("{head}{chunks}").as_bytes(), T).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer:.200}");
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
async fn a_batch_over_the_limit_is_refused_before_its_members_are_answered() {
    let gw = gateway()
        .with(|c| c.server.max_batch_len = 10)
        .start()
        .await;
    // Members that are each invalid: answered one by one they would make 11 errors.
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

/// A free port on loopback (bound, read and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn sigterm_exits_within_the_grace_with_a_hung_turn_and_a_slow_call() {
    let slow = legacy_echo().delay(Duration::from_secs(60)).run().await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"
[server]
listen = "127.0.0.1:{port}"
shutdown_grace_ms = 2000

[[upstreams]]
name = "slow"
url = "{}"
dialect = "legacy"
timeout_ms = 60000

[[routes]]
methods = ["*"]
upstream = "slow"

[sid]
enabled = true
command = [{:?}, "--raw", "--tag", "hard-term"]
"#,
        slow.url(),
        support::fake_sid()
    );
    let path = dir.path().join("gateway.toml");
    support::schema::check_toml(&config);
    std::fs::write(&path, config).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wiregate"))
        .arg("--config")
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let up = Instant::now();
    while http.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(up.elapsed() < T, "the gateway did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A turn that never ends...
    let stream = http
        .post(format!("{base}/rpc"))
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": text_message("hang")}).to_string())
        .send()
        .await
        .unwrap();
    let mut stream = support::SseReader::new(stream);
    assert!(stream.next(T).await.is_some(), "the turn started");
    // ...and a call the upstream holds.
    let call = support::spawn_post(
        &http,
        format!("{base}/rpc"),
        json!({"jsonrpc": "2.0", "id": 2, "method": "echo"}),
    );
    while slow.seen().is_empty() {
        assert!(up.elapsed() < T, "the call did not reach the upstream");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let term = Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(term.elapsed() < T, "still running after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let took = term.elapsed();
    // The grace (2 s), and a margin to kill and reap sid and end the runtime; the calls' grace
    // and sid's stop run side by side, so not the sum of both.
    assert!(
        took >= Duration::from_millis(1900),
        "the grace is kept: {took:?}"
    );
    assert!(took < Duration::from_millis(3500), "took {took:?}");
    assert!(status.success(), "{status}");
    call.abort();
}

#[tokio::test]
async fn streams_on_http_1_0_are_close_delimited_and_end_after_the_final_event() {
    let gw = gateway().sid("hard-h10").start().await;
    let task = gw.call("message/send", text_message("hi")).await;
    let task = task["result"]["id"].as_str().unwrap().to_owned();
    let req = format!("GET /tasks/{task}/events HTTP/1.0\r\n\r\n");
    let answer = raw_exchange(gw.addr, req.as_bytes(), T).await;
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.0 200 OK"), "{head}");
    assert!(head.contains("content-type: text/event-stream"), "{head}");
    assert!(!head.contains("transfer-encoding"), "{head}");
    assert!(body.starts_with("retry:"), "{body}");
    let last = body.trim_end().rsplit("\n\n").next().unwrap();
    assert!(last.contains(r#""final":true"#), "{last}");
    // The same stream over HTTP/1.1 is chunked and ends with the last chunk.
    let req = format!("GET /tasks/{task}/events HTTP/1.1\r\nhost: x\r\n\r\n");
    let answer = raw_exchange(gw.addr, req.as_bytes(), T).await;
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
    let refused = raw_exchange(gw.addr, req.as_bytes(), T).await;
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
