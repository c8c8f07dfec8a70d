//! The same request through both relay paths, over real sockets: the HTTP/1 loop's relay of a
//! `POST` kept as bytes, and the path that reads it into a header map (taken here because the
//! access log is on). The upstream records each head as it arrived; for each case of the table
//! (hop-by-hop headers, those named in `Connection`, several `Connection` lines, a `Forwarded`
//! chain, `X-Forwarded-For` extended, the client's `Host`), from an untrusted client and from a
//! trusted proxy, both paths must send it the same header lines of each name, in the same
//! order, and hand the client the same answer headers.
//!
//! A `Connection` naming anything but `keep-alive` is never relayed as bytes: the loop hands
//! such a connection (on its own socket here) to hyper, whose request is a header map on both gateways. Which path a
//! call took shows upstream: every request carries `x-a`, `x-b`, `x-a`, which the bytes' relay
//! sends in that order and a header map sends grouped by name.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use wiregate::config::Dialect;

use crate::support::raw_h1::read_answer;
use crate::support::{gateway, TestGateway};

const T: Duration = Duration::from_secs(10);

/// An upstream that sends every request head it reads down `heads` and answers with
/// hop-by-hop headers of its own (one named in its `Connection`) and a `Via`.
async fn recording_upstream() -> (String, mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let (conn, _) = listener.accept().await.unwrap();
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut conn = BufReader::new(conn);
                loop {
                    let mut head = String::new();
                    loop {
                        let mut line = String::new();
                        if conn.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        head.push_str(&line);
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let length = head
                        .lines()
                        .filter_map(|l| l.split_once(':'))
                        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                        .map_or(0, |(_, v)| v.trim().parse().unwrap());
                    let mut body = vec![0; length];
                    conn.read_exact(&mut body).await.unwrap();
                    tx.send(head).unwrap();
                    let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\
                                  connection: keep-alive, x-site-hop\r\nx-site-hop: 1\r\n\
                                  keep-alive: timeout=5\r\nvia: 1.0 site\r\nx-upstream: site\r\n\r\nok";
                    conn.get_mut().write_all(answer.as_bytes()).await.unwrap();
                }
            });
        }
    });
    (url, rx)
}

/// A gateway passing everything through to `upstream`; with the access log on (`map`), its
/// `POST`s are read into a header map; `trusting` its clients' forwarding headers or not.
async fn front(upstream: &str, map: bool, trusting: bool) -> TestGateway {
    gateway()
        .upstream("site", upstream, Dialect::Legacy, 2000)
        .route(&["*"], "site")
        .passthrough(&[("/", "site")])
        .with(move |c| {
            c.log.access = map;
            if trusting {
                c.server.trusted_proxies = vec!["127.0.0.0/8".into()];
            }
        })
        .start()
        .await
}

/// A head's request line and its header lines by name, each name's values in order; without
/// `traceparent`, whose span is new on every call.
fn by_name(head: &str) -> (String, BTreeMap<String, Vec<String>>) {
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap().to_owned();
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in lines.take_while(|l| !l.is_empty()) {
        let (k, v) = line.split_once(':').unwrap();
        if k != "traceparent" {
            names
                .entry(k.to_owned())
                .or_default()
                .push(v.trim().to_owned());
        }
    }
    (first, names)
}

/// The `x-a` and `x-b` lines of a head, in the order they came.
fn ends(head: &str) -> Vec<&str> {
    head.split("\r\n")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once(':').map(|(k, _)| k))
        .filter(|k| *k == "x-a" || *k == "x-b")
        .collect()
}

/// One case: what it is, whether the HTTP/1 loop relays it as bytes (when the access log is
/// off), the client's header lines (after `host` and `content-length`), and a check of what
/// the upstream got, given whether the client was trusted.
type Case = (
    &'static str,
    bool,
    &'static [(&'static str, &'static str)],
    fn(&BTreeMap<String, Vec<String>>, bool),
);

fn one(names: &BTreeMap<String, Vec<String>>, name: &str) -> String {
    match names.get(name).map(Vec::as_slice) {
        Some([v]) => v.clone(),
        other => panic!("{name}: {other:?} in {names:?}"),
    }
}

const CASES: &[Case] = &[
    (
        "the standard hop-by-hop headers",
        true,
        &[
            ("connection", "keep-alive"),
            ("keep-alive", "timeout=9"),
            ("te", "trailers"),
            ("proxy-connection", "keep-alive"),
            ("proxy-authorization", "Basic Zm9v"),
            ("trailer", "x-end"),
            ("x-end", "kept"),
        ],
        |h, _| {
            for gone in [
                "connection",
                "keep-alive",
                "te",
                "proxy-connection",
                "proxy-authorization",
                "trailer",
            ] {
                assert!(!h.contains_key(gone), "{gone} in {h:?}");
            }
            assert_eq!(one(h, "x-end"), "kept");
        },
    ),
    (
        "hop-by-hop headers named in Connection",
        false,
        &[
            ("connection", "keep-alive, x-secret-hop, X-Other-Hop"),
            ("x-secret-hop", "1"),
            ("x-other-hop", "2"),
            ("keep-alive", "timeout=9"),
            ("te", "trailers"),
            ("proxy-authorization", "Basic Zm9v"),
            ("x-end", "kept"),
        ],
        |h, _| {
            for gone in [
                "connection",
                "x-secret-hop",
                "x-other-hop",
                "keep-alive",
                "te",
                "proxy-authorization",
            ] {
                assert!(!h.contains_key(gone), "{gone} in {h:?}");
            }
            assert_eq!(one(h, "x-end"), "kept");
        },
    ),
    (
        "several Connection lines",
        false,
        &[
            ("connection", "keep-alive"),
            ("x-first-hop", "1"),
            ("Connection", "x-first-hop"),
            ("CONNECTION", "X-Second-Hop ,keep-alive"),
            ("x-second-hop", "2"),
            ("x-end", "kept"),
        ],
        |h, _| {
            for gone in ["connection", "x-first-hop", "x-second-hop"] {
                assert!(!h.contains_key(gone), "{gone} in {h:?}");
            }
            assert_eq!(one(h, "x-end"), "kept");
        },
    ),
    (
        "several Connection lines, each keep-alive",
        true,
        &[("connection", "keep-alive"), ("Connection", "keep-alive")],
        |h, _| assert!(!h.contains_key("connection"), "{h:?}"),
    ),
    (
        "a Forwarded chain and X-Forwarded-For",
        true,
        &[
            ("forwarded", "for=203.0.113.9;proto=https"),
            ("x-forwarded-for", "203.0.113.9"),
            ("Forwarded", "for=198.51.100.2"),
            ("X-Forwarded-For", "198.51.100.2"),
            ("x-forwarded-proto", "https"),
            ("x-forwarded-host", "edge.example"),
            ("via", "1.1 edge"),
        ],
        |h, trusted| {
            if trusted {
                assert_eq!(
                    one(h, "x-forwarded-for"),
                    "203.0.113.9, 198.51.100.2, 127.0.0.1"
                );
                assert_eq!(
                    one(h, "forwarded"),
                    "for=203.0.113.9;proto=https, for=198.51.100.2, \
                     for=127.0.0.1;proto=http;host=gw.example"
                );
                assert_eq!(one(h, "x-forwarded-proto"), "https");
                assert_eq!(one(h, "x-forwarded-host"), "edge.example");
            } else {
                assert_eq!(one(h, "x-forwarded-for"), "127.0.0.1");
                assert_eq!(
                    one(h, "forwarded"),
                    "for=127.0.0.1;proto=http;host=gw.example"
                );
                assert_eq!(one(h, "x-forwarded-proto"), "http");
                assert_eq!(one(h, "x-forwarded-host"), "gw.example");
            }
            assert_eq!(one(h, "via"), "1.1 edge, 1.1 wiregate");
        },
    ),
    (
        "the client's Host",
        true,
        &[("x-forwarded-host", "evil.example")],
        |h, trusted| {
            // `Host` is the upstream's; the client's is told in the forwarding headers.
            assert!(one(h, "host").starts_with("127.0.0.1:"), "{h:?}");
            let told = if trusted {
                "evil.example"
            } else {
                "gw.example"
            };
            assert_eq!(one(h, "x-forwarded-host"), told);
            assert!(one(h, "forwarded").ends_with(";host=gw.example"));
        },
    ),
];

/// Sends `case`'s `POST` on `conn` and returns the head the upstream got and the answer's
/// headers the client got.
async fn exchange(
    conn: &mut BufReader<TcpStream>,
    heads: &mut mpsc::UnboundedReceiver<String>,
    lines: &[(&str, &str)],
) -> (String, std::collections::HashMap<String, String>) {
    let body = r#"{"operation":"echo"}"#;
    let mut req = format!(
        "POST /a2a?x=1 HTTP/1.1\r\nhost: gw.example\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (k, v) in lines
        .iter()
        .chain(&[("x-a", "1"), ("x-b", "2"), ("x-a", "3")])
    {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    conn.get_mut().write_all(req.as_bytes()).await.unwrap();
    let answer = read_answer(conn, T).await;
    assert_eq!(answer.status, "HTTP/1.1 200 OK");
    assert_eq!(answer.body, b"ok");
    let head = tokio::time::timeout(T, heads.recv())
        .await
        .unwrap()
        .unwrap();
    let mut headers = answer.headers;
    headers.remove("date");
    (head, headers)
}

#[tokio::test]
async fn both_relay_paths_send_the_same_headers_upstream_and_back() {
    for trusting in [false, true] {
        let (url, mut heads) = recording_upstream().await;
        let raw = front(&url, false, trusting).await;
        let map = front(&url, true, trusting).await;
        for (what, as_bytes, lines, check) in CASES {
            // A connection each: one the loop hands to hyper stays hyper's.
            let mut to_raw = BufReader::new(TcpStream::connect(raw.addr).await.unwrap());
            let mut to_map = BufReader::new(TcpStream::connect(map.addr).await.unwrap());
            let (raw_head, raw_answer) = exchange(&mut to_raw, &mut heads, lines).await;
            let (map_head, map_answer) = exchange(&mut to_map, &mut heads, lines).await;
            let (raw_line, raw_names) = by_name(&raw_head);
            let (map_line, map_names) = by_name(&map_head);
            assert_eq!(raw_line, "POST /a2a?x=1 HTTP/1.1", "{what}");
            assert_eq!(map_line, raw_line, "{what}");
            assert_eq!(map_names, raw_names, "{what}, trusted: {trusting}");
            check(&raw_names, trusting);
            assert_eq!(raw_names["x-a"], ["1", "3"], "{what}");
            assert_eq!(map_answer, raw_answer, "{what}");
            for gone in ["connection", "keep-alive", "x-site-hop"] {
                assert!(!raw_answer.contains_key(gone), "{what}: {raw_answer:?}");
            }
            assert_eq!(raw_answer["via"], "1.0 site, 1.1 wiregate");
            assert_eq!(raw_answer["x-upstream"], "site");
            // Each path is the one meant.
            let (wire, grouped) = (["x-a", "x-b", "x-a"], ["x-a", "x-a", "x-b"]);
            let raw_order = if *as_bytes { wire } else { grouped };
            assert_eq!(ends(&raw_head), raw_order, "{what}");
            assert_eq!(ends(&map_head), grouped, "{what}");
        }
    }
}
