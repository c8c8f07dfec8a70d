//! A throwaway certificate authority made in the test (rcgen), its certificates written to a
//! temporary directory as PEM files, and a TLS server for test upstreams.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

/// A CA and the files of the certificates it signed.
pub struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

/// A certificate's files.
#[derive(Clone, Debug)]
pub struct Issued {
    /// PEM chain (the leaf).
    pub cert: PathBuf,
    /// PEM private key.
    pub key: PathBuf,
}

impl Issued {
    /// Both as strings, for configuration fields.
    pub fn paths(&self) -> (String, String) {
        (
            self.cert.to_string_lossy().into_owned(),
            self.key.to_string_lossy().into_owned(),
        )
    }
}

impl Pki {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Self {
        let ca_key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let ca = params.self_signed(&ca_key).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        Pki { dir, ca, ca_key }
    }

    /// The CA certificate's PEM file.
    pub fn ca_file(&self) -> String {
        self.dir
            .path()
            .join("ca.pem")
            .to_string_lossy()
            .into_owned()
    }

    /// The CA certificate as PEM text.
    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// A certificate for `names` (DNS names or IP addresses), good for server and client
    /// authentication, signed by this CA, written as `file`.pem / `file`.key.
    pub fn issue(&self, file: &str, names: &[&str]) -> Issued {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names.clone()).unwrap();
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().cloned().unwrap_or_default(),
        );
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        let issued = Issued {
            cert: self.dir.path().join(format!("{file}.pem")),
            key: self.dir.path().join(format!("{file}.key")),
        };
        std::fs::write(&issued.cert, cert.pem()).unwrap();
        std::fs::write(&issued.key, key.serialize_pem()).unwrap();
        issued
    }
}

/// A rustls server configuration from `issued`, requiring client certificates signed by
/// `client_ca` (a PEM file) when given; ALPN http/1.1.
pub fn server_config(issued: &Issued, client_ca: Option<&str>) -> Arc<rustls::ServerConfig> {
    let tls = wiregate::config::ServerTls {
        cert: issued.cert.to_string_lossy().into_owned(),
        key: issued.key.to_string_lossy().into_owned(),
        client_ca: client_ca.unwrap_or_default().to_owned(),
    };
    let mut cfg = (*wiregate::config::tls::server_config(&tls).unwrap()).clone();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// A TLS test server's address and what it saw of its clients' handshakes.
#[derive(Clone, Debug)]
pub struct TlsServing {
    /// Bound address.
    pub addr: SocketAddr,
    /// Connections accepted.
    pub accepted: Arc<AtomicUsize>,
    /// The SNI name of each finished handshake, in order (`None`: the client sent none).
    pub sni: Sni,
}

/// The SNI name of each finished handshake.
pub type Sni = Arc<Mutex<Vec<Option<String>>>>;

/// Serves `app` over TLS with `config` on 127.0.0.1:0 (HTTP/1.1).
pub async fn serve_tls(app: axum::Router, config: Arc<rustls::ServerConfig>) -> TlsServing {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let accepted = Arc::new(AtomicUsize::new(0));
    let sni = Sni::default();
    let (counter, names) = (accepted.clone(), sni.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            let (acceptor, app, names) = (acceptor.clone(), app.clone(), names.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let name = tls.get_ref().1.server_name().map(str::to_owned);
                names.lock().unwrap().push(name);
                let svc = hyper_util::service::TowerToHyperService::new(app);
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection_with_upgrades(hyper_util::rt::TokioIo::new(tls), svc)
                .await;
            });
        }
    });
    TlsServing {
        addr,
        accepted,
        sni,
    }
}

/// An HTTPS client trusting `pki`'s CA only, presenting `identity` when given.
pub fn client(pki: &Pki, identity: Option<&Issued>) -> reqwest::Client {
    client_builder(pki, identity).build().unwrap()
}

/// [`client`]'s builder, for a test that sets more.
pub fn client_builder(pki: &Pki, identity: Option<&Issued>) -> reqwest::ClientBuilder {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(pki.ca_pem().as_bytes()).unwrap());
    if let Some(id) = identity {
        let mut pem = std::fs::read(&id.cert).unwrap();
        pem.extend(std::fs::read(&id.key).unwrap());
        b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    b
}
