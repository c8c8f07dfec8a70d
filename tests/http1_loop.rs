//! The HTTP/1 connection loop that serves `POST`s to the RPC paths and the pass-through
//! (`src/server/h1/`), over raw sockets: kept-alive and pipelined calls answered in order, a
//! body that arrives after its head, requests it leaves to hyper on the same connection (the
//! bytes already read handed over), and a call in flight at shutdown answered with
//! `connection: close`.
#![forbid(unsafe_code)]

mod support;

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use wiregate::config::Dialect;

use support::raw_h1::{read_answer, Answer};
use support::{fronting, legacy_echo, TestGateway};

const T: Duration = Duration::from_secs(10);

fn call(id: u32) -> String {
    let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"echo","params":{{"n":{id}}}}}"#);
    format!(
        "POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Reads one answer within `T`.
async fn answer(r: &mut BufReader<TcpStream>) -> Answer {
    read_answer(r, T).await
}

fn assert_result(a: &Answer, id: u32) {
    assert_eq!(a.status, "HTTP/1.1 200 OK");
    let json = a.json();
    assert_eq!(json["id"], id, "{json}");
    assert_eq!(json["result"]["params"]["n"], id, "{json}");
    assert_eq!(json["result"]["via"], "legacy", "{json}");
    for h in ["content-type", "x-request-id", "date"] {
        assert!(a.headers.contains_key(h), "{h} missing: {:?}", a.headers);
    }
}

#[tokio::test]
async fn kept_alive_pipelined_and_late_bodied_calls_are_answered_in_order() {
    let up = legacy_echo().run().await;
    let gw = fronting(&up, Dialect::Legacy).await;
    let s = TcpStream::connect(gw.addr).await.unwrap();
    let mut r = BufReader::new(s);
    // One call, then another on the same connection.
    r.get_mut().write_all(call(1).as_bytes()).await.unwrap();
    assert_result(&answer(&mut r).await, 1);
    // Three in one write: three answers, in order.
    let three = format!("{}{}{}", call(2), call(3), call(4));
    r.get_mut().write_all(three.as_bytes()).await.unwrap();
    for id in 2..=4 {
        assert_result(&answer(&mut r).await, id);
    }
    // A head, then its body a moment later, split inside the body.
    let five = call(5);
    let (a, b) = five.split_at(five.len() - 10);
    r.get_mut().write_all(a.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    r.get_mut().write_all(b.as_bytes()).await.unwrap();
    assert_result(&answer(&mut r).await, 5);
    assert_eq!(up.seen().len(), 5);
}

/// The loop's one timer is moved only when a wait must end sooner; firing early (set for an
/// earlier wait) it is moved on. So each wait for a head is the whole timeout from the last
/// answer, however long the connection has lived, and a silent one is still closed.
#[tokio::test]
async fn the_head_timeout_counts_from_each_answer_not_from_the_connection_s_start() {
    let up = legacy_echo().run().await;
    let gw = support::routing_all_to(&up.url(), Dialect::Legacy)
        .with(|c| c.server.header_read_timeout_ms = 300)
        .start()
        .await;
    let mut r = BufReader::new(TcpStream::connect(gw.addr).await.unwrap());
    // Calls 200 ms apart for 1.2 s: four timeouts' worth of the connection's life, each gap
    // within one.
    for id in 1..=6 {
        r.get_mut().write_all(call(id).as_bytes()).await.unwrap();
        assert_result(&answer(&mut r).await, id);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A head that starts, then a body that comes 200 ms after it (the body's own wait).
    let last = call(7);
    let (a, b) = last.split_at(last.len() - 5);
    r.get_mut().write_all(a.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    r.get_mut().write_all(b.as_bytes()).await.unwrap();
    assert_result(&answer(&mut r).await, 7);
    // Then silence: closed, not before the timeout.
    let quiet = std::time::Instant::now();
    let mut rest = Vec::new();
    tokio::time::timeout(T, r.read_to_end(&mut rest))
        .await
        .expect("the silent connection is closed")
        .unwrap();
    assert!(rest.is_empty());
    let waited = quiet.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "closed {waited:?} after the last answer"
    );
    assert_eq!(up.seen().len(), 7);
}

#[tokio::test]
async fn requests_it_does_not_serve_go_to_hyper_with_the_bytes_already_read() {
    let up = legacy_echo().run().await;
    let gw = fronting(&up, Dialect::Legacy).await;
    let s = TcpStream::connect(gw.addr).await.unwrap();
    let mut r = BufReader::new(s);
    r.get_mut().write_all(call(1).as_bytes()).await.unwrap();
    assert_result(&answer(&mut r).await, 1);
    // A GET, a chunked call and a served-here call pipelined in one write: the loop answers
    // none of them, hyper answers all three from the bytes it was handed.
    let body = r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":{"n":2}}"#;
    let chunked = format!(
        "POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         transfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    let three = format!(
        "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n{chunked}{}",
        call(3)
    );
    r.get_mut().write_all(three.as_bytes()).await.unwrap();
    let health = answer(&mut r).await;
    assert_eq!(health.status, "HTTP/1.1 200 OK");
    assert_eq!(health.json()["status"], "ok");
    assert_result(&answer(&mut r).await, 2);
    assert_result(&answer(&mut r).await, 3);
    // `Expect: 100-continue` after that: hyper's interim answer, then the call's.
    let body = r#"{"jsonrpc":"2.0","id":4,"method":"echo","params":{"n":4}}"#;
    let head = format!(
        "POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         expect: 100-continue\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    r.get_mut().write_all(head.as_bytes()).await.unwrap();
    let mut cont = String::new();
    r.read_line(&mut cont).await.unwrap();
    assert_eq!(cont.trim_end(), "HTTP/1.1 100 Continue");
    r.read_line(&mut cont).await.unwrap();
    r.get_mut().write_all(body.as_bytes()).await.unwrap();
    assert_result(&answer(&mut r).await, 4);
}

/// Sends `req` on a new connection and reads until the gateway closes it.
async fn answered_then_closed(gw: &TestGateway, req: &str) -> String {
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(T, s.read_to_end(&mut all))
        .await
        .expect("closed after the answer")
        .unwrap();
    String::from_utf8_lossy(&all).into_owned()
}

#[tokio::test]
async fn http_1_0_and_connection_close_calls_are_answered_then_closed() {
    let up = legacy_echo().run().await;
    let gw = fronting(&up, Dialect::Legacy).await;
    // HTTP/1.0 with no keep-alive: answered, then closed.
    let body = r#"{"jsonrpc":"2.0","id":7,"method":"echo","params":{"n":7}}"#;
    let req = format!(
        "POST /rpc HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let text = answered_then_closed(&gw, &req).await;
    assert!(text.starts_with("HTTP/1.0 200"), "{text}");
    assert!(text.contains(r#""id":7"#), "{text}");
    // `Connection: close` on HTTP/1.1: answered, then closed.
    let req = call(8).replace("host: x\r\n", "host: x\r\nconnection: close\r\n");
    let text = answered_then_closed(&gw, &req).await;
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains(r#""id":8"#), "{text}");
}

#[tokio::test]
async fn a_call_in_flight_at_shutdown_is_answered_and_the_connection_closed() {
    let up = legacy_echo().delay(Duration::from_millis(400)).run().await;
    let mut gw = fronting(&up, Dialect::Legacy).await;
    let s = TcpStream::connect(gw.addr).await.unwrap();
    let mut r = BufReader::new(s);
    r.get_mut().write_all(call(1).as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let running = gw.running.take().unwrap();
    let stopping = tokio::spawn(running.shutdown(Duration::from_secs(5)));
    let a = answer(&mut r).await;
    assert_result(&a, 1);
    assert_eq!(
        a.headers.get("connection").map(String::as_str),
        Some("close")
    );
    let mut rest = Vec::new();
    tokio::time::timeout(T, r.read_to_end(&mut rest))
        .await
        .expect("closed after the answer")
        .unwrap();
    assert!(rest.is_empty());
    stopping.await.unwrap();
}
