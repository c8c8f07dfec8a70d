//! The pass-through and TLS: to an `https://` upstream (verified against its `ca_file`, the
//! gateway's client certificate presented, a streamed answer passed on as it comes), and behind
//! the TLS listener (the upstream told `https`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::HeaderMap;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::Notify;
use wiregate::config::{Dialect, Upstream};

use crate::support::pki::{self, Pki};
use crate::support::{gateway, TestGateway};

const T: Duration = Duration::from_secs(10);

/// `GET /site/report`: the request's headers, as the site received them.
async fn report(headers: HeaderMap) -> axum::Json<Value> {
    let h: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap())))
        .collect();
    axum::Json(json!({"headers": h}))
}

/// A legacy site over TLS that requires client certificates from `pki`: `GET /site/report`,
/// and `GET /site/stream` a first line, then a second once `release` is told.
async fn tls_site(pki: &Pki, release: Arc<Notify>) -> (String, pki::TlsServing) {
    let cert = pki.issue("site", &["localhost"]);
    let app = axum::Router::new()
        .route("/site/report", axum::routing::get(report))
        .route(
            "/site/stream",
            axum::routing::get(move || {
                let release = release.clone();
                async move {
                    let lines = async_stream::stream! {
                        yield Ok::<_, std::convert::Infallible>("first\n");
                        release.notified().await;
                        yield Ok("second\n");
                    };
                    Body::from_stream(lines)
                }
            }),
        );
    let served = pki::serve_tls(app, pki::server_config(&cert, Some(&pki.ca_file()))).await;
    (format!("https://localhost:{}/", served.addr.port()), served)
}

/// A gateway passing `/site` to `url` with the TLS settings `f` makes (one prefix: one pool
/// of connections).
async fn passing_to(url: &str, f: impl FnOnce(&mut Upstream)) -> TestGateway {
    let mut site = Upstream::new("site", url, Dialect::Legacy, 5000);
    f(&mut site);
    gateway()
        .with(move |c| c.upstreams.push(site))
        .passthrough(&[("/site", "site")])
        .start()
        .await
}

#[tokio::test]
async fn the_passthrough_dials_an_https_upstream_with_its_ca_and_a_client_certificate() {
    let pki = Pki::new("site CA");
    let release = Arc::new(Notify::new());
    let (url, site) = tls_site(&pki, release.clone()).await;
    let (cert, key) = pki.issue("gateway-client", &["gateway.test"]).paths();
    let ca = pki.ca_file();
    let gw = passing_to(&url, |u| {
        u.ca_file = ca;
        u.client_cert = cert;
        u.client_key = key;
    })
    .await;

    let r = gw.get("/site/report").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["headers"]["x-forwarded-proto"], "http");

    // The streamed answer: its first line arrives while the site still holds the second.
    let resp = gw
        .http
        .get(format!("{}/site/stream", gw.base()))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let first = tokio::time::timeout(T, body.next()).await.unwrap();
    assert_eq!(&first.unwrap().unwrap()[..], b"first\n");
    release.notify_one();
    let mut rest = Vec::new();
    while let Some(chunk) = tokio::time::timeout(T, body.next()).await.unwrap() {
        rest.extend_from_slice(&chunk.unwrap());
    }
    assert_eq!(rest, b"second\n");
    // Both calls on one kept-alive connection, SNI the URL's host.
    assert_eq!(site.accepted.load(Ordering::SeqCst), 1);
    assert_eq!(*site.sni.lock().unwrap(), [Some("localhost".to_owned())]);

    // Without the client certificate the site refuses the handshake: a 502, not a plain dial.
    let ca = pki.ca_file();
    let no_cert = passing_to(&url, |u| u.ca_file = ca).await;
    assert_eq!(no_cert.get("/site/report").await.status, 502);
    // Against the platform's roots the site's certificate does not verify.
    let (cert, key) = pki.issue("gateway-client-2", &["gateway.test"]).paths();
    let platform = passing_to(&url, |u| {
        u.client_cert = cert;
        u.client_key = key;
    })
    .await;
    assert_eq!(platform.get("/site/report").await.status, 502);
}

#[tokio::test]
async fn behind_the_tls_listener_the_passthrough_tells_the_upstream_https() {
    let pki = Pki::new("gateway CA");
    let (cert, key) = pki.issue("gateway", &["localhost"]).paths();
    let app = axum::Router::new().route("/site/report", axum::routing::get(report));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let site = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let gw = gateway()
        .upstream("site", &format!("http://{site}/"), Dialect::Legacy, 5000)
        .passthrough(&[("/site", "site")])
        .with(move |c| {
            c.server.tls = wiregate::config::ServerTls {
                cert,
                key,
                client_ca: String::new(),
            }
        })
        .start()
        .await;
    let port = gw.addr.port();
    let r = pki::client(&pki, None)
        .get(format!("https://localhost:{port}/site/report"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let seen: Value = r.json().await.unwrap();
    let h = &seen["headers"];
    assert_eq!(h["x-forwarded-proto"], "https", "{h}");
    assert_eq!(
        h["forwarded"],
        format!("for=127.0.0.1;proto=https;host=\"localhost:{port}\""),
        "{h}"
    );
}
