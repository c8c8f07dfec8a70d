//! TLS both ways, with certificates made in the test: the listener (HTTP/2 and HTTP/1.1 by
//! ALPN, client certificates when `client_ca` is set, a renewed certificate picked up on
//! reload) and `https://` upstreams (verified against `ca_file` or the platform's roots, SNI the
//! URL's host, client certificates, pooled connections): the RPC path here, the pass-through
//! and the event feed in their modules; the agent card naming `https` to a TLS client.
#![forbid(unsafe_code)]

#[path = "tls/feed.rs"]
mod feed;
#[path = "tls/passthrough.rs"]
mod passthrough;
mod support;

use std::sync::atomic::Ordering;

use rustls::pki_types::pem::PemObject;

use serde_json::{json, Value};
use wiregate::config::{Config, Dialect, ServerTls, Upstream};

use support::pki::{self, Pki};
use support::{gateway, legacy_echo, Listening, TestGateway};

fn call() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "plan.get", "params": {"plan_id": "P1"}})
}

async fn post(client: &reqwest::Client, url: &str) -> Result<reqwest::Response, reqwest::Error> {
    client
        .post(url)
        .header("content-type", "application/json")
        .body(call().to_string())
        .send()
        .await
}

fn listener_tls(issued: &pki::Issued, client_ca: &str) -> ServerTls {
    let (cert, key) = issued.paths();
    ServerTls {
        cert,
        key,
        client_ca: client_ca.into(),
    }
}

#[tokio::test]
async fn the_listener_speaks_tls_with_alpn_and_requires_client_certificates_when_told() {
    let pki = Pki::new("wiregate test CA");
    let server = pki.issue("gateway", &["localhost", "127.0.0.1"]);
    let client_id = pki.issue("client", &["client.test"]);
    let other = Pki::new("someone else's CA");
    let stranger = other.issue("stranger", &["client.test"]);
    let up = legacy_echo().run().await;
    let tls = listener_tls(&server, &pki.ca_file());
    let gw = gateway()
        .upstream("legacy", &up.url(), Dialect::Legacy, 2000)
        .route(&["*"], "legacy")
        .with(move |c| c.server.tls = tls)
        .start()
        .await;
    let url = format!("https://localhost:{}/rpc", gw.addr.port());

    // A client with a certificate from the CA: HTTP/2 by ALPN, and HTTP/1.1 when that is all
    // it offers.
    let h2 = post(&pki::client(&pki, Some(&client_id)), &url)
        .await
        .unwrap();
    assert_eq!(h2.version(), reqwest::Version::HTTP_2);
    let body: Value = h2.json().await.unwrap();
    assert_eq!(body["result"]["via"], "legacy", "{body}");
    let h1_client = pki::client_builder(&pki, Some(&client_id))
        .http1_only()
        .build()
        .unwrap();
    let h1 = post(&h1_client, &url).await.unwrap();
    assert_eq!(h1.version(), reqwest::Version::HTTP_11);
    assert_eq!(h1.status(), 200);

    // No certificate, or one from another CA: refused in the handshake.
    assert!(post(&pki::client(&pki, None), &url).await.is_err());
    assert!(post(&pki::client(&pki, Some(&stranger)), &url)
        .await
        .is_err());
    // A client that does not trust the gateway's certificate refuses it.
    assert!(post(&pki::client(&other, Some(&stranger)), &url)
        .await
        .is_err());
    // Plain HTTP on the TLS port gets nothing.
    assert!(reqwest::Client::new()
        .post(format!("http://127.0.0.1:{}/rpc", gw.addr.port()))
        .header("content-type", "application/json")
        .body(call().to_string())
        .send()
        .await
        .is_err());
    // ...and the gateway still serves the good client.
    let again = post(&pki::client(&pki, Some(&client_id)), &url)
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
}

#[tokio::test]
async fn a_client_that_speaks_only_tls_1_2_is_served() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (pki, _up, gw) = tls_front(10_000).await;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from_pem_file(pki.ca_file()).unwrap())
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS12])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    assert_eq!(
        tls.get_ref().1.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    tls.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    // The gateway may end a TLS 1.2 connection without close_notify once it has answered.
    let _ = tls.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_certificate_renewed_on_disk_is_served_after_a_reload_without_dropping_connections() {
    let old_ca = Pki::new("old CA");
    let new_ca = Pki::new("new CA");
    let old = old_ca.issue("gateway", &["localhost"]);
    let renewed = new_ca.issue("gateway", &["localhost"]);
    let up = legacy_echo().run().await;
    let tls = listener_tls(&old, "");
    let gw = gateway()
        .upstream("legacy", &up.url(), Dialect::Legacy, 2000)
        .route(&["*"], "legacy")
        .with(move |c| c.server.tls = tls)
        .start()
        .await;
    let url = format!("https://localhost:{}/rpc", gw.addr.port());
    let trusts_old = pki::client(&old_ca, None);
    let trusts_new = pki::client(&new_ca, None);
    assert_eq!(post(&trusts_old, &url).await.unwrap().status(), 200);
    assert!(post(&trusts_new, &url).await.is_err());

    // The certificate files are replaced and the configuration reloaded.
    std::fs::copy(&renewed.cert, &old.cert).unwrap();
    std::fs::copy(&renewed.key, &old.key).unwrap();
    let mut config: Config = Config::default();
    config.server.listen = gw.addr;
    config.server.tls = listener_tls(&old, "");
    config.upstreams = vec![Upstream::new("legacy", &up.url(), Dialect::Legacy, 2000)];
    config.routes = vec![wiregate::config::Route::to(&["*"], "legacy")];
    config.validate().unwrap();
    let applied = gw.running.as_ref().unwrap().reload(&config);
    assert!(applied.reloaded, "{applied:?}");

    // New connections see the renewed certificate...
    assert_eq!(post(&trusts_new, &url).await.unwrap().status(), 200);
    // ...while the connection opened before the reload goes on (HTTP/2, kept alive).
    assert_eq!(post(&trusts_old, &url).await.unwrap().status(), 200);
    // A new client that trusts only the old CA cannot connect any more.
    assert!(post(&pki::client(&old_ca, None), &url).await.is_err());
}

/// A gateway whose one upstream is `up` with the TLS settings `f` makes.
async fn via_tls_upstream(
    up: &support::Listening,
    f: impl FnOnce(&mut Upstream),
) -> support::TestGateway {
    let mut u = Upstream::new("secure", &up.url(), Dialect::Legacy, 2000);
    f(&mut u);
    gateway()
        .with(move |c| c.upstreams.push(u))
        .route(&["*"], "secure")
        .start()
        .await
}

#[tokio::test]
async fn https_upstreams_are_verified_and_get_client_certificates() {
    let pki = Pki::new("upstream CA");
    let up_cert = pki.issue("upstream", &["localhost"]);
    let gw_client = pki.issue("gateway-client", &["gateway.test"]);
    // The upstream asks for a client certificate signed by the same CA.
    let up = legacy_echo()
        .run_tls(pki::server_config(&up_cert, Some(&pki.ca_file())))
        .await;
    assert!(up.url().starts_with("https://localhost:"));

    let (cert, key) = gw_client.paths();
    let gw = via_tls_upstream(&up, |u| {
        u.ca_file = pki.ca_file();
        u.client_cert = cert;
        u.client_key = key;
    })
    .await;
    for _ in 0..5 {
        let a = gw.rpc(&call()).await;
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(a.json()["result"]["via"], "legacy");
    }
    // Five calls, one kept-alive TLS connection, its SNI the URL's host.
    assert_eq!(up.connections.load(Ordering::SeqCst), 1);
    assert_eq!(*up.sni.lock().unwrap(), [Some("localhost".to_owned())]);

    // Without the client certificate the upstream refuses the gateway.
    let no_cert = via_tls_upstream(&up, |u| u.ca_file = pki.ca_file()).await;
    let a = no_cert.rpc(&call()).await;
    assert_eq!(a.status, 502, "{}", a.text);
    assert_eq!(a.json()["error"]["data"]["kind"], "upstream_unreachable");
}

#[tokio::test]
async fn an_upstream_named_by_ip_address_gets_no_sni_and_is_verified_by_its_address() {
    // SNI carries host names only (RFC 6066): for an address the gateway sends none, and the
    // certificate must name the address.
    let pki = Pki::new("upstream CA");
    let up_cert = pki.issue("upstream", &["127.0.0.1"]);
    let up = legacy_echo()
        .run_tls(pki::server_config(&up_cert, None))
        .await;
    let mut u = Upstream::new(
        "secure",
        &format!("https://127.0.0.1:{}/rpc", up.addr.port()),
        Dialect::Legacy,
        2000,
    );
    u.ca_file = pki.ca_file();
    let gw = gateway()
        .with(move |c| c.upstreams.push(u))
        .route(&["*"], "secure")
        .start()
        .await;
    let a = gw.rpc(&call()).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(*up.sni.lock().unwrap(), [None]);
}

#[tokio::test]
async fn an_upstream_certificate_that_does_not_verify_is_refused() {
    let pki = Pki::new("upstream CA");
    let up_cert = pki.issue("upstream", &["localhost"]);
    let up = legacy_echo()
        .run_tls(pki::server_config(&up_cert, None))
        .await;
    // Trusted CA: served.
    let ok = via_tls_upstream(&up, |u| u.ca_file = pki.ca_file()).await;
    assert_eq!(ok.rpc(&call()).await.status, 200);
    // The platform's roots do not know the test CA.
    let platform = via_tls_upstream(&up, |_| {}).await;
    let a = platform.rpc(&call()).await;
    assert_eq!(a.status, 502, "{}", a.text);
    assert!(a.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("certificate"));
    // Another CA's file: refused as well.
    let other = Pki::new("other CA");
    let wrong_ca = via_tls_upstream(&up, |u| u.ca_file = other.ca_file()).await;
    assert_eq!(wrong_ca.rpc(&call()).await.status, 502);
    // A certificate for another name (the URL's host is what must match).
    let misnamed = pki.issue("misnamed", &["elsewhere.test"]);
    let up2 = legacy_echo()
        .run_tls(pki::server_config(&misnamed, None))
        .await;
    let a = via_tls_upstream(&up2, |u| u.ca_file = pki.ca_file())
        .await
        .rpc(&call())
        .await;
    assert_eq!(a.status, 502, "{}", a.text);
}

#[test]
fn tls_settings_are_checked_with_their_key_paths() {
    let mut c = Config::default();
    c.server.tls.cert = "/nonexistent/cert.pem".into();
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("server.tls: cert and key are set together"),
        "{e}"
    );
    c.server.tls.key = "/nonexistent/key.pem".into();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("server.tls.cert: /nonexistent/cert.pem"), "{e}");
    let mut c = Config::default();
    let mut u = Upstream::new("u", "http://127.0.0.1:1/rpc", Dialect::Legacy, 1000);
    u.ca_file = "/tmp/x.pem".into();
    c.upstreams.push(u);
    let mut u = Upstream::new("v", "https://127.0.0.1:1/rpc", Dialect::Legacy, 1000);
    u.client_cert = "/nonexistent/c.pem".into();
    c.upstreams.push(u);
    let e = c.validate().unwrap_err().to_string();
    assert!(
        e.contains("upstreams[0].ca_file: applies to https:// upstreams only"),
        "{e}"
    );
    assert!(
        e.contains("upstreams[1].client_cert: client_cert and client_key are set together"),
        "{e}"
    );
}

/// A ClientHello sent on a new connection to `port`, and nothing after it: the client then waits
/// for the server's flight and never finishes the handshake.
async fn stalled_hello(port: u16) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let config = std::sync::Arc::new(wiregate::config::tls::unused_client_config());
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut tls = rustls::ClientConnection::new(config, name).unwrap();
    let mut hello = Vec::new();
    tls.write_tls(&mut hello).unwrap();
    let mut tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    tcp.write_all(&hello).await.unwrap();
    tcp
}

/// Whether the gateway closed `tcp`: what it sent is read off, then a read would wait (open)
/// or tells the end (closed).
async fn closed_by_gateway(tcp: &mut tokio::net::TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match tcp.try_read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // Nothing more for now: give a close in flight the time to arrive, once.
                tokio::task::yield_now().await;
                return matches!(tcp.try_read(&mut buf), Ok(0));
            }
            Err(_) => return true,
        }
    }
}

/// A TLS gateway (a certificate of a new CA for `localhost`) in front of a legacy echo, with a
/// handshake deadline of `header_read_timeout_ms`; the CA, the upstream (kept running) and the
/// gateway.
async fn tls_front(header_read_timeout_ms: u64) -> (Pki, Listening, TestGateway) {
    let pki = Pki::new("wiregate test CA");
    let server = pki.issue("gateway", &["localhost", "127.0.0.1"]);
    let up = legacy_echo().run().await;
    let tls = listener_tls(&server, "");
    let gw = gateway()
        .upstream("legacy", &up.url(), Dialect::Legacy, 2000)
        .route(&["*"], "legacy")
        .with(move |c| {
            c.server.tls = tls;
            c.server.header_read_timeout_ms = header_read_timeout_ms;
        })
        .start()
        .await;
    (pki, up, gw)
}

#[tokio::test]
async fn clients_stalled_in_their_handshake_do_not_hold_back_another_clients_handshake() {
    // The CPU step of a handshake is taken in turns (one per worker, `listener::Handshakes`); a
    // turn must never be held across a wait on a client, or a few stalled clients would hold
    // every new TLS connection until their deadline (30 s here).
    let (pki, _up, gw) = tls_front(30_000).await;
    let port = gw.addr.port();
    let mut stalled = Vec::new();
    for _ in 0..4 {
        stalled.push(stalled_hello(port).await);
    }
    // And one that connects and says nothing at all.
    stalled.push(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap(),
    );

    let url = format!("https://localhost:{port}/rpc");
    let answer = post(&pki::client(&pki, None), &url).await.unwrap();
    assert_eq!(answer.status(), 200);
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["result"]["via"], "legacy", "{body}");
    // Served while every stalled client is still waiting on its open connection (had it waited
    // for their turns, it would have come only after their deadline closed them).
    for tcp in &mut stalled {
        assert!(!closed_by_gateway(tcp).await);
    }
}

#[tokio::test]
async fn a_handshake_left_unfinished_is_closed_at_its_deadline() {
    // `server.header_read_timeout_ms` bounds a TLS handshake as it bounds a plain connection's
    // first bytes: a client that sends its ClientHello and nothing after is closed then.
    let (_pki, _up, gw) = tls_front(300).await;
    let mut tcp = stalled_hello(gw.addr.port()).await;
    let t0 = std::time::Instant::now();
    let closed = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 4096];
        // The server's flight, then the end (or a reset).
        while let Ok(n) = tcp.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "still open after 20 s");
    assert!(
        t0.elapsed() >= std::time::Duration::from_millis(100),
        "closed before the deadline: {:?}",
        t0.elapsed()
    );
}

#[tokio::test]
async fn the_agent_card_says_https_to_a_client_that_came_over_tls() {
    let pki = Pki::new("wiregate test CA");
    let server = pki.issue("gateway", &["localhost"]);
    let tls = listener_tls(&server, "");
    let gw = gateway()
        .sid("tls-card")
        .with(move |c| c.server.tls = tls)
        .start()
        .await;
    let base = format!("https://localhost:{}", gw.addr.port());
    let h1 = pki::client_builder(&pki, None)
        .http1_only()
        .build()
        .unwrap();
    // HTTP/2 names the host in `:authority`, HTTP/1.1 in `Host`: the card is the same.
    for (client, version) in [
        (pki::client(&pki, None), reqwest::Version::HTTP_2),
        (h1, reqwest::Version::HTTP_11),
    ] {
        let r = client
            .get(format!("{base}/.well-known/agent-card.json"))
            .send()
            .await
            .unwrap();
        assert_eq!((r.status().as_u16(), r.version()), (200, version));
        let card: Value = r.json().await.unwrap();
        let root = format!("{base}/");
        assert_eq!(
            card["supportedInterfaces"][0]["url"],
            root.as_str(),
            "{card}"
        );
        assert_eq!(card["provider"]["url"], base.as_str(), "{card}");
        let old: Value = client
            .get(format!("{base}/.well-known/agent.json"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(old["url"], root.as_str(), "{old}");
    }
}
