//! The fleet's bookkeeping across endpoints: ejections under concurrent failures, names,
//! what a reload keeps.

use std::sync::Arc;

use super::*;
use crate::config::{Outlier, Upstream};

fn upstream(urls: &[&str]) -> Upstream {
    let mut u = Upstream::new("u", "", Dialect::Jsonrpc, 1000);
    u.endpoints = urls.iter().map(|s| s.to_string()).collect();
    u
}

#[test]
fn failures_that_land_together_eject_within_the_cap_and_once_each() {
    let mut u = upstream(&["http://127.0.0.1:1/", "http://127.0.0.1:2/"]);
    u.outlier = Outlier {
        consecutive_failures: 1,
        base_ejection_ms: 60_000,
        max_ejected_percent: 50,
    };
    let client = UpstreamClient::new(u, 1024);
    let barrier = Arc::new(std::sync::Barrier::new(16));
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let (client, barrier) = (client.clone(), barrier.clone());
            std::thread::spawn(move || {
                let e = client.fleet.endpoints[i % 2].clone();
                barrier.wait();
                for _ in 0..100 {
                    client.record(&e, Outcome::Refused);
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    let now = crate::util::clock::now_ms();
    let ejected: Vec<u32> = client
        .fleet
        .endpoints
        .iter()
        .filter(|e| e.state.is_ejected(now))
        .map(|e| e.state.ejections())
        .collect();
    assert_eq!(
        ejected,
        [1],
        "one of two endpoints out (50 %), ejected once"
    );
}

#[test]
fn an_endpoint_is_named_by_its_host_and_port_without_credentials() {
    let client = UpstreamClient::new(upstream(&["http://user:secret@127.0.0.1:9/rpc"]), 1024);
    assert_eq!(client.fleet.endpoints[0].label(), "127.0.0.1:9");
}

#[test]
fn a_reload_keeps_a_plain_endpoints_pool_and_rebuilds_a_tls_ones_keeping_its_health() {
    let before = UpstreamClient::new(
        upstream(&["http://127.0.0.1:1/", "https://localhost:2/"]),
        1024,
    );
    let after = UpstreamClient::build(
        upstream(&["http://127.0.0.1:1/", "https://localhost:2/"]),
        0,
        1024,
        Some(&before),
    );
    let (b, a) = (&before.fleet.endpoints, &after.fleet.endpoints);
    assert!(
        Arc::ptr_eq(&b[0], &a[0]),
        "the plain endpoint is kept whole"
    );
    assert!(
        !Arc::ptr_eq(&b[1], &a[1]),
        "the TLS endpoint gets a client read from its files again"
    );
    assert!(Arc::ptr_eq(&b[1].state, &a[1].state), "its health is kept");
}

/// An https server on 127.0.0.1 with a certificate for `names`, issued by a CA made here
/// (written to `ca_file`): it answers each request `200` and reports the SNI it was sent.
async fn tls_server(
    names: &[&str],
    dir: &tempfile::TempDir,
) -> (
    std::net::SocketAddr,
    String,
    tokio::sync::mpsc::UnboundedReceiver<Option<String>>,
) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let leaf = rcgen::CertificateParams::new(names)
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let file = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let tls = crate::config::ServerTls {
        cert: file("server.pem", leaf.pem()),
        key: file("server.key", key.serialize_pem()),
        client_ca: String::new(),
    };
    let acceptor =
        tokio_rustls::TlsAcceptor::from(crate::config::tls::server_config(&tls).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let Ok(mut s) = acceptor.accept(tcp).await else {
                    let _ = tx.send(None);
                    return;
                };
                let _ = tx.send(s.get_ref().1.server_name().map(str::to_owned));
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}";
                let _ = s.write_all(ok).await;
                let _ = s.shutdown().await;
            });
        }
    });
    (addr, file("ca.pem", ca.pem()), rx)
}

/// A pinned client connects to the address it was given, never resolving the URL's host (a
/// name no resolver knows here), and TLS sends and verifies that host name, not the address.
#[tokio::test]
async fn a_pinned_client_dials_its_address_and_verifies_the_urls_name() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, ca_file, mut sni) = tls_server(&["hook.invalid"], &dir).await;
    let mut u = Upstream::new(
        "webhook",
        &format!("https://hook.invalid:{}/hook", addr.port()),
        Dialect::Jsonrpc,
        5000,
    );
    u.ca_file = ca_file.clone();
    let client = UpstreamClient::pinned(u, 1024, vec![addr]);
    let answer = client.post(b"{}", None, Hint::default()).await.unwrap();
    assert_eq!(answer.status, axum::http::StatusCode::OK);
    assert_eq!(sni.recv().await.unwrap().as_deref(), Some("hook.invalid"));

    // A certificate for another name is refused, though the address is the one pinned.
    let other = tempfile::tempdir().unwrap();
    let (addr, ca_file, _sni) = tls_server(&["other.invalid"], &other).await;
    let mut u = Upstream::new(
        "webhook",
        &format!("https://hook.invalid:{}/hook", addr.port()),
        Dialect::Jsonrpc,
        5000,
    );
    u.ca_file = ca_file;
    let client = UpstreamClient::pinned(u, 1024, vec![addr]);
    let refused = client.post(b"{}", None, Hint::default()).await;
    assert!(
        matches!(refused, Err(GatewayError::UpstreamUnreachable { .. })),
        "{refused:?}"
    );
}
