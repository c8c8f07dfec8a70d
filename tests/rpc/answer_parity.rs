//! One answer, however it is written: `POST /rpc` is answered by the HTTP/1 loop's own writer
//! (with the access log, CORS, both or neither), and through the one conversion of the same
//! reply for hyper when the loop hands the request over (HTTP/1.0, a chunked body,
//! `Connection: close`) or the connection is HTTP/2; behind TLS, by the same over a TLS stream.
//! The same calls through each way must come back alike: the same status, every header but
//! `Date` and the connection's own `Connection` / `Keep-Alive`, and the same body, byte for
//! byte. With CORS, the answer is the plain one with the CORS headers added, and those are the
//! ones the router's CORS layer gives its own routes for the same origin.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use wiregate::config::{Dialect, Legacy};

use support::pki::{self, Pki};
use support::raw_h1::read_answer;
use support::{legacy_echo, routing_all_to, TestGateway};

const T: Duration = Duration::from_secs(10);

/// The origin `[server.cors]` allows.
const APP: &str = "https://app.example";

/// Every way a request is sent: the loop's (`Http11`), the loop's hand-overs to hyper, HTTP/2.
const FRAMINGS: [Framing; 5] = [
    Framing::Http11,
    Framing::Http11Close,
    Framing::Http10,
    Framing::Chunked,
    Framing::Http2,
];

/// The calls compared: translated answers, an upstream's error, a notification, a batch, a
/// body that does not parse, and a legacy client's envelope.
const CALLS: &[(&str, &str)] = &[
    (
        "translated",
        r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":[1,2]}}"#,
    ),
    (
        "upstream error",
        r#"{"jsonrpc":"2.0","id":"x","method":"missing","params":{}}"#,
    ),
    (
        "notification",
        r#"{"jsonrpc":"2.0","method":"echo","params":{}}"#,
    ),
    (
        "batch",
        r#"[{"jsonrpc":"2.0","id":1,"method":"echo","params":{}},{"jsonrpc":"2.0","id":2,"method":"missing","params":{}}]"#,
    ),
    ("parse error", r#"{"jsonrpc":"#),
    (
        "legacy client",
        r#"{"a2a_version":"1.0","request_id":"r-1","operation":"echo","params":{"b":true}}"#,
    ),
];

/// How the request is sent.
#[derive(Clone, Copy, Debug)]
enum Framing {
    Http11,
    Http11Close,
    Http10,
    Chunked,
    Http2,
}

/// What is compared of an answer.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

/// Drops what may differ by design: the date and the connection's own headers.
fn seen(status: u16, headers: impl IntoIterator<Item = (String, String)>, body: Vec<u8>) -> Seen {
    let headers = headers
        .into_iter()
        .filter(|(k, _)| !matches!(k.as_str(), "date" | "connection" | "keep-alive"))
        .collect();
    Seen {
        status,
        headers,
        body,
    }
}

/// Whether a header is one CORS adds.
fn is_cors(name: &str) -> bool {
    name == "vary" || name.starts_with("access-control-")
}

/// `seen` split into what CORS adds and the rest.
fn split_cors(seen: &Seen) -> (BTreeMap<String, String>, Seen) {
    let (cors, rest) = seen
        .headers
        .clone()
        .into_iter()
        .partition(|(k, _)| is_cors(k));
    let rest = Seen {
        status: seen.status,
        headers: rest,
        body: seen.body.clone(),
    };
    (cors, rest)
}

/// The CORS headers the router's layer puts on its own route (`/healthz`) for `origin`.
async fn router_cors(gw: &TestGateway, origin: Option<&str>) -> BTreeMap<String, String> {
    let mut req = gw.http.get(format!("{}/healthz", gw.base()));
    if let Some(origin) = origin {
        req = req.header("origin", origin);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.headers()
        .iter()
        .filter(|(k, _)| is_cors(k.as_str()))
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect()
}

/// The answer to `body` POSTed to `url` by `client` (from `origin`, when given), over the HTTP
/// version it negotiates.
async fn via_client(
    client: &reqwest::Client,
    url: &str,
    body: &str,
    origin: Option<&str>,
) -> (reqwest::Version, Seen) {
    let mut req = client
        .post(url)
        .header("content-type", "application/json")
        .header("x-request-id", "parity-1");
    if let Some(origin) = origin {
        req = req.header("origin", origin);
    }
    let resp = req.body(body.to_owned()).send().await.unwrap();
    let version = resp.version();
    let status = resp.status().as_u16();
    let headers: Vec<(String, String)> = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap().to_owned()))
        .collect();
    let body = resp.bytes().await.unwrap().to_vec();
    (version, seen(status, headers, body))
}

async fn send(gw: &TestGateway, framing: Framing, body: &str, origin: Option<&str>) -> Seen {
    if let Framing::Http2 = framing {
        let client = reqwest::Client::builder()
            .http2_prior_knowledge()
            .build()
            .unwrap();
        let url = format!("{}/rpc", gw.base());
        let (version, seen) = via_client(&client, &url, body, origin).await;
        assert_eq!(version, reqwest::Version::HTTP_2);
        return seen;
    }
    let origin = origin.map_or(String::new(), |o| format!("origin: {o}\r\n"));
    let head = |version: &str, framing: &str| {
        format!(
            "POST /rpc {version}\r\nhost: x\r\ncontent-type: application/json\r\n\
             x-request-id: parity-1\r\n{origin}{framing}\r\n"
        )
    };
    let length = format!("content-length: {}\r\n", body.len());
    let request = match framing {
        Framing::Http11 => head("HTTP/1.1", &length) + body,
        Framing::Http11Close => head("HTTP/1.1", &format!("{length}connection: close\r\n")) + body,
        Framing::Http10 => head("HTTP/1.0", &length) + body,
        Framing::Chunked => {
            let (a, b) = body.split_at(body.len() / 2);
            head("HTTP/1.1", "transfer-encoding: chunked\r\n")
                + &format!("{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n", a.len(), b.len())
        }
        Framing::Http2 => unreachable!(),
    };
    let mut s = TcpStream::connect(gw.addr).await.unwrap();
    s.write_all(request.as_bytes()).await.unwrap();
    let mut r = BufReader::new(s);
    let a = read_answer(&mut r, T).await;
    let status = a
        .status
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {}", a.status));
    seen(status, a.headers, a.body)
}

#[tokio::test]
async fn every_writer_gives_the_same_answer_to_the_same_call() {
    let up = legacy_echo().run().await;
    let legacy = Legacy {
        deprecation: true,
        sunset: "2027-06-01T00:00:00Z".into(),
        ..Legacy::default()
    };
    let start = |tweak: fn(&mut wiregate::config::Config)| {
        routing_all_to(&up.url(), Dialect::Legacy)
            .legacy(legacy.clone())
            .with(tweak)
            .start()
    };
    let plain = start(|_| {}).await;
    let logged = start(|c| c.log.access = true).await;
    let cors = start(|c| c.server.cors.allow_origins = vec![APP.into()]).await;
    let logged_cors = start(|c| {
        c.log.access = true;
        c.server.cors.allow_origins = vec![APP.into()];
    })
    .await;
    // Behind TLS: HTTP/2 by ALPN, and HTTP/1.1 from a client that offers only that.
    let ca = Pki::new("parity CA");
    let (cert, key) = ca.issue("gateway", &["localhost"]).paths();
    let tls = routing_all_to(&up.url(), Dialect::Legacy)
        .legacy(legacy.clone())
        .with(move |c| {
            c.server.tls.cert = cert;
            c.server.tls.key = key;
        })
        .start()
        .await;
    let tls_url = format!("https://localhost:{}/rpc", tls.addr.port());
    let tls_h2 = pki::client(&ca, None);
    let tls_h1 = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.ca_pem().as_bytes()).unwrap())
        .http1_only()
        .build()
        .unwrap();

    for (what, body) in CALLS {
        let reference = send(&plain, Framing::Http11, body, None).await;
        if *what == "legacy client" {
            // What the mutant of a writer would drop is in the answer compared.
            assert!(
                reference.headers.contains_key("deprecation")
                    && reference.headers.contains_key("sunset"),
                "{what}: {reference:?}"
            );
        }
        assert!(
            !reference.headers.keys().any(|k| is_cors(k)),
            "{what}: {reference:?}"
        );
        for (mode, gw) in [("plain", &plain), ("access log", &logged)] {
            for framing in FRAMINGS {
                let got = send(gw, framing, body, None).await;
                assert_eq!(
                    got,
                    reference,
                    "{what}, {mode}, {framing:?}: {}",
                    String::from_utf8_lossy(&got.body)
                );
            }
        }
        // With CORS: the plain answer and the router's CORS headers, for an allowed origin, a
        // refused one and none; alike on every way and with the access log too.
        for origin in [Some(APP), Some("https://evil.example"), None] {
            let with_cors = send(&cors, Framing::Http11, body, origin).await;
            let (added, rest) = split_cors(&with_cors);
            assert_eq!(rest, reference, "{what}, cors from {origin:?}");
            assert_eq!(
                added,
                router_cors(&cors, origin).await,
                "{what}, cors from {origin:?}"
            );
            assert_eq!(
                added.contains_key("access-control-allow-origin"),
                origin == Some(APP),
                "{what}, cors from {origin:?}: {added:?}"
            );
            for (mode, gw) in [("cors", &cors), ("access log and cors", &logged_cors)] {
                for framing in FRAMINGS {
                    let got = send(gw, framing, body, origin).await;
                    assert_eq!(
                        got,
                        with_cors,
                        "{what}, {mode} from {origin:?}, {framing:?}: {}",
                        String::from_utf8_lossy(&got.body)
                    );
                }
            }
        }
        for (client, expected) in [
            (&tls_h2, reqwest::Version::HTTP_2),
            (&tls_h1, reqwest::Version::HTTP_11),
        ] {
            let (version, got) = via_client(client, &tls_url, body, None).await;
            assert_eq!(version, expected, "{what}: TLS");
            assert_eq!(got, reference, "{what}, TLS, {version:?}");
        }
    }
}
