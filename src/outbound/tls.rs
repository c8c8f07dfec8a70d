//! TLS for every outbound connection, from one rule set: the client configurations
//! [`config::tls`](crate::config::tls) builds from the files a destination names (its CA, its
//! client certificate), or the platform's roots when it names none; verification is never off.
//! HTTP/1.1 connections ([`Pool`](super::Pool)) offer ALPN `http/1.1`; gRPC's offer `h2` alone.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use hyper_util::client::legacy::connect::HttpConnector;
use rustls::ClientConfig;

/// The platform's roots, no client certificate, ALPN `http/1.1`: for an `https://` destination
/// that names no CA of its own.
pub(crate) fn platform() -> Arc<ClientConfig> {
    static PLATFORM: LazyLock<Arc<ClientConfig>> = LazyLock::new(|| {
        let mut config = crate::config::tls::unused_client_config();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    });
    PLATFORM.clone()
}

/// hyper's HTTP/2-only connector, for gRPC: `http://` as cleartext HTTP/2 (prior knowledge),
/// `https://` with `tls` (or, when `None`, the platform's roots) and ALPN `h2` alone, which
/// gRPC over TLS requires; TCP without Nagle, opened within `connect`.
pub(crate) fn h2_connector(
    tls: Option<Arc<ClientConfig>>,
    connect: Duration,
) -> hyper_rustls::HttpsConnector<HttpConnector> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect));
    let mut config = match tls {
        Some(c) => (*c).clone(),
        None => crate::config::tls::unused_client_config(),
    };
    // The builder sets the protocols it enables, and refuses a configuration that names any.
    config.alpn_protocols.clear();
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http2()
        .wrap_connector(http)
}
