//! The outbound client over real sockets: a destination that does not answer, one that
//! answers too slowly, one whose answer is too large; each bound of [`Options`] holds for the
//! `POST` of JSON and for [`Pool::fetch`] alike, and TLS verifies the URL's name.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// A listener on 127.0.0.1 that reads each request's head and then does what `answer` says
/// with the connection.
async fn listener<F, Fut>(answer: F) -> SocketAddr
where
    F: Fn(tokio::net::TcpStream) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                answer(s).await;
            });
        }
    });
    addr
}

fn pool(addr: SocketAddr, opts: &Options) -> Pool {
    Pool::new(&format!("http://{addr}/x"), opts, 0).unwrap()
}

/// Quick bounds, each distinct: a test's wait shows which one fired.
fn quick() -> Options {
    Options {
        connect: Duration::from_millis(300),
        read: Duration::from_millis(300),
        total: Duration::from_secs(5),
        max_answer: 1024,
        tls: None,
    }
}

#[tokio::test]
async fn a_destination_that_never_answers_is_given_up_within_the_timeouts() {
    // Reads the request, then holds the connection open without a byte.
    let addr = listener(|s| async move {
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(s);
    })
    .await;
    let started = Instant::now();
    let fetched = pool(addr, &quick()).fetch(&Request::get(&[])).await;
    assert!(
        matches!(fetched, Err(Error::TimedOut { sent: true })),
        "{fetched:?}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "{waited:?}"
    );

    // A POST is bounded by its total.
    let opts = Options::within(Duration::from_millis(400), 1024);
    let started = Instant::now();
    let posted = pool(addr, &opts).post_json(b"{}", None).await;
    assert!(
        matches!(posted, Err(Error::TimedOut { sent: true })),
        "{posted:?}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
}

#[tokio::test]
async fn an_answer_that_trickles_is_cut_off_by_the_total() {
    // Sends a head promising 100 bytes, then a byte every 100 ms: each read comes in time,
    // the whole never does.
    let addr = listener(|mut s| async move {
        let _ = s
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n")
            .await;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if s.write_all(b"x").await.is_err() {
                return;
            }
        }
    })
    .await;
    let opts = Options {
        read: Duration::from_secs(5),
        total: Duration::from_millis(700),
        ..quick()
    };
    let started = Instant::now();
    let fetched = pool(addr, &opts).fetch(&Request::get(&[])).await;
    assert!(
        matches!(fetched, Err(Error::TimedOut { .. })),
        "{fetched:?}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(700) && waited < Duration::from_secs(4),
        "{waited:?}"
    );
}

#[tokio::test]
async fn a_connection_that_cannot_be_opened_is_given_up_within_the_connect_timeout() {
    // Takes the TCP connection and never answers the TLS handshake: connecting never ends.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    let opts = Options {
        connect: Duration::from_millis(300),
        read: Duration::from_secs(5),
        ..quick()
    };
    let pool = Pool::new(&format!("https://localhost:{}/x", addr.port()), &opts, 0).unwrap();
    let started = Instant::now();
    let fetched = pool.fetch(&Request::get(&[])).await;
    assert!(
        matches!(fetched, Err(Error::TimedOut { sent: false })),
        "{fetched:?}"
    );
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(300) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
}

#[tokio::test]
async fn an_answer_larger_than_the_cap_is_refused_however_it_is_framed() {
    let body = vec![b'x'; 4096];
    let framings: [(&str, Vec<u8>); 3] = [
        (
            "length",
            [
                format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len()).as_bytes(),
                &body,
            ]
            .concat(),
        ),
        (
            "chunked",
            [
                &b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1000\r\n"[..],
                &body,
                b"\r\n0\r\n\r\n",
            ]
            .concat(),
        ),
        (
            "close",
            [&b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n"[..], &body].concat(),
        ),
    ];
    for (framing, answer) in framings {
        let answer = Arc::new(answer);
        let addr = listener(move |mut s| {
            let answer = answer.clone();
            async move {
                let _ = s.write_all(&answer).await;
                let _ = s.shutdown().await;
            }
        })
        .await;
        let fetched = pool(addr, &quick()).fetch(&Request::get(&[])).await;
        assert!(
            matches!(
                fetched,
                Err(Error::Exchange(h1::Error::TooLarge { limit: 1024, .. }))
            ),
            "{framing}: {fetched:?}"
        );
        let posted = pool(addr, &quick()).post_json(b"{}", None).await;
        assert!(
            matches!(
                posted,
                Err(Error::Exchange(h1::Error::TooLarge { limit: 1024, .. }))
            ),
            "{framing}: {posted:?}"
        );
    }
}

#[tokio::test]
async fn an_answer_within_the_cap_is_read_whole() {
    let addr = listener(|mut s| async move {
        let _ = s
            .write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
            )
            .await;
    })
    .await;
    let fetched = pool(addr, &quick())
        .fetch(&Request::get(&[("accept", "application/json")]))
        .await
        .unwrap();
    assert_eq!(fetched.status, StatusCode::OK);
    assert_eq!(&fetched.body[..], b"{}");
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

/// A pool pinned to an address connects to it, never resolving the URL's host (a name no
/// resolver knows here), and TLS sends and verifies that host name, not the address.
#[tokio::test]
async fn a_pinned_pool_dials_its_address_and_verifies_the_urls_name() {
    let pinned = |addr: SocketAddr, ca_file: &str| {
        let url = format!("https://hook.invalid:{}/hook", addr.port());
        let tls = crate::config::tls::client_config_for(&url, ca_file, "", "").unwrap();
        let opts = Options::within(Duration::from_secs(5), 1024).with_tls(tls);
        Pool::new(&url, &opts, 0)
            .unwrap()
            .pinned_to(vec![addr].into())
    };
    let dir = tempfile::tempdir().unwrap();
    let (addr, ca_file, mut sni) = tls_server(&["hook.invalid"], &dir).await;
    let answer = pinned(addr, &ca_file).post_json(b"{}", None).await.unwrap();
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(sni.recv().await.unwrap().as_deref(), Some("hook.invalid"));

    // A certificate for another name is refused, though the address is the one pinned.
    let other = tempfile::tempdir().unwrap();
    let (addr, ca_file, _sni) = tls_server(&["other.invalid"], &other).await;
    let refused = pinned(addr, &ca_file).post_json(b"{}", None).await;
    assert!(
        matches!(refused, Err(Error::Exchange(h1::Error::Connect { .. }))),
        "{refused:?}"
    );
}
