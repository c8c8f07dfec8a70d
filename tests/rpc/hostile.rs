//! A hostile client's numbers: lengths, chunk sizes, ids and counts at and past what their types
//! hold, sent by hand to the gateway binary (built with overflow checks, as tests are). Each gets
//! an answer with a documented status, or its connection closed cleanly; the gateway serves the
//! next client; and its log holds no panic.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::raw_h1::read_answer;
use crate::support::{domain_record, feed_server, legacy_echo, FeedMode, GatewayProcess};

/// What one raw exchange ended with: the answer's status, or `None` for a connection closed
/// with no answer.
async fn exchange(addr: &str, request: &[u8]) -> Option<u16> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    // Nothing more comes from this client: whatever the gateway waits for, it sees the end.
    s.shutdown().await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut answer));
    read.await
        .expect("the gateway answers or closes within 10 s")
        .ok()?;
    let text = String::from_utf8_lossy(&answer);
    let status = text.strip_prefix("HTTP/1.1 ")?.get(..3)?;
    Some(status.parse().unwrap())
}

/// The status line of a stream's answer, read without waiting for the stream's end.
async fn stream_status(addr: &str, request: &[u8]) -> u16 {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut head = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut head))
        .await
        .expect("a stream's head within 10 s")
        .unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

fn post(path: &str, headers: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: g\r\ncontent-type: application/json\r\n{headers}\r\n{body}"
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_clients_numbers_never_panic_the_gateway() {
    let up = legacy_echo().run().await;
    let records = vec![domain_record(
        1,
        "plan.created",
        "p1",
        json!({"title": "t"}),
    )];
    let feed = feed_server(records, FeedMode::Ndjson, None, true).await;
    let toml = format!(
        r#"
[server]
max_body_bytes = 4096
max_batch_len = 4

[[upstreams]]
name = "up"
url = "{up}"
dialect = "legacy"
timeout_ms = 2000

[[routes]]
methods = ["*"]
upstream = "up"

[[passthrough]]
prefix = "/api/"
upstream = "up"

[events]
source = "{feed}"

[log]
format = "json"
"#,
        up = up.url(),
        feed = feed.url(),
    );
    let (gw, addr, _dir) = GatewayProcess::with_config(&toml).await;
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{}}"#;

    // Lengths at and past what `usize` and `u64` hold, on the pass-through and the RPC lane:
    // 400 for one that cannot be read, 413 for one over `max_body_bytes`, or the connection
    // closed once the client has nothing more to send.
    let lengths = [
        "18446744073709551615",
        "18446744073709551614",
        "18446744073709551613",
        "18446744073709551616",
        "99999999999999999999999999",
        "4097",
        "-1",
        "+5",
        "5, 6",
    ];
    for path in ["/api/x", "/rpc"] {
        for n in lengths {
            let req = post(path, &format!("content-length: {n}\r\n"), call);
            let got = exchange(&addr, &req).await;
            let ok = match path {
                "/rpc" => matches!(got, Some(400 | 413)),
                _ => matches!(got, None | Some(400 | 413)),
            };
            assert!(ok, "{path} with content-length {n}: {got:?}");
        }
    }
    // Chunk sizes past what a length holds.
    for size in [
        "ffffffffffffffff",
        "10000000000000000",
        "fffffffffffffffffffffff",
    ] {
        for path in ["/api/x", "/rpc"] {
            let req = post(
                path,
                "transfer-encoding: chunked\r\n",
                &format!("{size}\r\n{call}\r\n0\r\n\r\n"),
            );
            let got = exchange(&addr, &req).await;
            assert!(
                matches!(got, None | Some(400 | 413)),
                "{path} with chunk size {size}: {got:?}"
            );
        }
    }
    // A batch longer than `max_batch_len`: one -32600 for the whole, 400.
    let batch = format!("[{}]", [call; 5].join(","));
    let req = post(
        "/rpc",
        &format!("content-length: {}\r\n", batch.len()),
        &batch,
    );
    assert_eq!(exchange(&addr, &req).await, Some(400));
    // Resume points at and past `u64`'s end, and one that is no number.
    for id in [
        "18446744073709551615",
        "18446744073709551616",
        "-1",
        "9999999999999999999999",
    ] {
        let req = format!("GET /events HTTP/1.1\r\nhost: g\r\nlast-event-id: {id}\r\n\r\n");
        assert_eq!(stream_status(&addr, req.as_bytes()).await, 200, "{id}");
    }

    // Everyone else is still served (on a connection kept open: a client that half-closes
    // has left, and its call is dropped).
    let req = post("/rpc", &format!("content-length: {}\r\n", call.len()), call);
    let mut s = TcpStream::connect(&addr).await.unwrap();
    s.write_all(&req).await.unwrap();
    let mut r = tokio::io::BufReader::new(s);
    let answer = read_answer(&mut r, Duration::from_secs(10)).await;
    assert_eq!(answer.status.trim_end(), "HTTP/1.1 200 OK");
    assert_eq!(answer.json()["result"]["op"], "m", "{}", answer.json());
    let log = gw.log.lock().unwrap().join("\n");
    assert!(!log.contains("panicked"), "the gateway panicked:\n{log}");
}
