//! TLS, both ways: the listener's server configuration (certificate, key, optional client CA
//! for mTLS) and each `https://` upstream's client configuration (platform roots or the
//! upstream's `ca_file`, an optional client certificate). rustls with the `ring` provider.
//!
//! Configurations are built from files at start and on every reload (so a renewed certificate
//! is picked up by new connections while open ones go on). There is no way to turn
//! verification off.

use std::sync::{Arc, LazyLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::config::{ServerTls, Upstream};

/// What is wrong with a TLS setting: the key (relative to its section) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsProblem {
    /// The offending key, e.g. `cert` or `ca_file`.
    pub key: &'static str,
    /// What is wrong.
    pub message: String,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    static PROVIDER: LazyLock<Arc<rustls::crypto::CryptoProvider>> =
        LazyLock::new(|| Arc::new(rustls::crypto::ring::default_provider()));
    PROVIDER.clone()
}

fn problem(key: &'static str, message: impl Into<String>) -> TlsProblem {
    TlsProblem {
        key,
        message: message.into(),
    }
}

/// Every certificate in a PEM file (at least one).
fn certs(key: &'static str, path: &str) -> Result<Vec<CertificateDer<'static>>, TlsProblem> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| problem(key, format!("{path}: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| problem(key, format!("{path}: {e}")))?;
    if certs.is_empty() {
        return Err(problem(key, format!("{path}: no PEM certificate in it")));
    }
    Ok(certs)
}

fn private_key(key: &'static str, path: &str) -> Result<PrivateKeyDer<'static>, TlsProblem> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| problem(key, format!("{path}: {e}")))
}

fn roots(key: &'static str, path: &str) -> Result<RootCertStore, TlsProblem> {
    let mut store = RootCertStore::empty();
    for c in certs(key, path)? {
        store
            .add(c)
            .map_err(|e| problem(key, format!("{path}: {e}")))?;
    }
    Ok(store)
}

/// The platform's trusted roots, read once.
fn platform_roots() -> Arc<RootCertStore> {
    static ROOTS: LazyLock<Arc<RootCertStore>> = LazyLock::new(|| {
        let found = rustls_native_certs::load_native_certs();
        for e in &found.errors {
            tracing::warn!(error = %e, "reading the platform's trusted certificates");
        }
        let mut store = RootCertStore::empty();
        let (added, ignored) = store.add_parsable_certificates(found.certs);
        tracing::debug!(added, ignored, "platform roots loaded");
        Arc::new(store)
    });
    ROOTS.clone()
}

/// The listener's TLS configuration: TLS 1.2 and 1.3, ALPN `h2` then `http/1.1`, client
/// certificates required when `client_ca` is set.
pub fn server_config(tls: &ServerTls) -> Result<Arc<ServerConfig>, TlsProblem> {
    let chain = certs("cert", &tls.cert)?;
    let key = private_key("key", &tls.key)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| problem("cert", e.to_string()))?;
    let builder = if tls.client_ca.is_empty() {
        builder.with_no_client_auth()
    } else {
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots("client_ca", &tls.client_ca)?),
            provider(),
        )
        .build()
        .map_err(|e| problem("client_ca", e.to_string()))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .map_err(|e| problem("key", format!("does not fit the certificate: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The client configuration for an `https://` upstream (`None` for `http://`): its `ca_file`
/// or the platform's roots, its client certificate when one is set, ALPN `http/1.1`.
pub fn client_config(u: &Upstream) -> Result<Option<Arc<ClientConfig>>, TlsProblem> {
    if !u.https() {
        for (key, v) in [
            ("ca_file", &u.ca_file),
            ("client_cert", &u.client_cert),
            ("client_key", &u.client_key),
        ] {
            if !v.is_empty() {
                return Err(problem(key, "applies to https:// upstreams only"));
            }
        }
        return Ok(None);
    }
    let roots = match u.ca_file.as_str() {
        "" => platform_roots(),
        path => Arc::new(roots("ca_file", path)?),
    };
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| problem("url", e.to_string()))?
        .with_root_certificates(roots);
    let mut config = match (u.client_cert.as_str(), u.client_key.as_str()) {
        ("", "") => builder.with_no_client_auth(),
        // The key path names the one that is set, so the message points at the line to fix.
        ("", _) | (_, "") => {
            return Err(problem(
                if u.client_cert.is_empty() {
                    "client_key"
                } else {
                    "client_cert"
                },
                "client_cert and client_key are set together",
            ))
        }
        (cert, key) => builder
            .with_client_auth_cert(certs("client_cert", cert)?, private_key("client_key", key)?)
            .map_err(|e| problem("client_key", format!("does not fit client_cert: {e}")))?,
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(Arc::new(config)))
}

/// A client configuration verified against the platform's roots, with no ALPN (each outbound
/// connector sets its own: [`outbound::tls`](crate::outbound::tls)).
pub fn unused_client_config() -> ClientConfig {
    ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default versions")
        .with_root_certificates(platform_roots())
        .with_no_client_auth()
}

/// The client configuration the admin subcommands (`wiregate reload`, `wiregate migration`)
/// dial a gateway's TLS listener with: the CAs of `ca_file` (empty: the platform's roots), and
/// the certificate `client_cert` with its key `client_key` (both empty: none) for a listener
/// that requires one (`server.tls.client_ca`). Problems are keyed as an upstream's would be.
pub fn admin_client_config(
    ca_file: &str,
    client_cert: &str,
    client_key: &str,
) -> Result<Arc<ClientConfig>, TlsProblem> {
    client_config_for("https://gateway", ca_file, client_cert, client_key)?
        .ok_or_else(|| problem("url", "an https:// URL has a TLS configuration"))
}

/// The client configuration for a URL that is not an `[[upstreams]]` entry (the event feed),
/// from the same three settings an upstream has and checked the same way: `ca_file` when set,
/// else the platform's roots; `client_cert` and `client_key` together or not at all.
pub fn client_config_for(
    url: &str,
    ca_file: &str,
    client_cert: &str,
    client_key: &str,
) -> Result<Option<Arc<ClientConfig>>, TlsProblem> {
    let mut u = Upstream::new("", url, crate::config::Dialect::Legacy, 1);
    u.ca_file = ca_file.to_owned();
    u.client_cert = client_cert.to_owned();
    u.client_key = client_key.to_owned();
    client_config(&u)
}
