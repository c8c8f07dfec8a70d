//! Who may use the admin routes (`/migration`, `/console` and their data): loopback clients,
//! unless `server.admin_tokens` is set; then anyone with a bearer token from it, and nobody
//! without one (loopback included, since a local proxy makes every caller look local).

use std::net::SocketAddr;

use axum::http::{header, HeaderMap};

use crate::model::error::GatewayError;

/// The client's address, put on every request by the connection that carried it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer(pub SocketAddr);

/// Whether a caller at `peer` showing `headers` may use an admin route.
///
/// `Err(AdminForbidden)` (403) off loopback with no tokens configured; `Err(Unauthorized)`
/// (401) when tokens are configured and `Authorization: Bearer` holds none of them.
pub fn authorize(
    peer: Option<Peer>,
    headers: &HeaderMap,
    tokens: &[String],
) -> Result<(), GatewayError> {
    if tokens.is_empty() {
        return match peer {
            Some(Peer(addr)) if is_loopback(addr) => Ok(()),
            _ => Err(GatewayError::AdminForbidden),
        };
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| crate::wire::authorization::token_of(v.as_bytes(), "bearer"))
        .unwrap_or_default();
    tokens
        .iter()
        .any(|t| crate::util::secret::same(t.as_bytes(), given))
        .then_some(())
        .ok_or(GatewayError::Unauthorized)
}

/// What the command line's admin subcommands (`wiregate reload`, …) send to a running gateway:
/// `method` on `url` with an optional bearer token; the answer's status and body. An `https://`
/// URL is dialled with `tls` ([`admin_client_config`](crate::config::tls::admin_client_config)), or
/// verified against the platform's roots when `None`. Connected within 10 s, answered within
/// 30 s, the answer at most [`MAX_ADMIN_ANSWER`] bytes.
pub async fn request(
    method: axum::http::Method,
    url: &str,
    token: Option<&str>,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
) -> Result<(axum::http::StatusCode, bytes::Bytes), String> {
    use std::time::Duration;
    let total = Duration::from_secs(30);
    let opts = crate::outbound::Options::within(total, MAX_ADMIN_ANSWER)
        .connect_within(Duration::from_secs(10))
        .with_tls(tls);
    let pool = crate::outbound::Pool::new(url, &opts, 0).map_err(|e| e.to_string())?;
    let bearer = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer
        .iter()
        .map(|b| ("authorization", b.as_str()))
        .collect();
    let req = crate::outbound::Request {
        method: method.as_str(),
        target: None,
        headers: &headers,
        body: &[],
    };
    match pool.fetch(&req).await {
        Ok(answer) => Ok((answer.status, answer.body)),
        Err(crate::outbound::Error::TimedOut { .. }) => {
            Err(format!("{url}: no answer within 30 s"))
        }
        Err(e) => Err(format!("{url}: {e}")),
    }
}

/// The largest answer an admin subcommand reads (the migration report of many callers).
const MAX_ADMIN_ANSWER: usize = 64 << 20;

/// Loopback, including an IPv4 loopback address mapped into IPv6.
fn is_loopback(addr: SocketAddr) -> bool {
    match addr {
        SocketAddr::V4(a) => a.ip().is_loopback(),
        SocketAddr::V6(a) => {
            a.ip().is_loopback() || a.ip().to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(s: &str) -> Option<Peer> {
        Some(Peer(s.parse().unwrap()))
    }

    fn bearer(t: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::AUTHORIZATION,
            format!("Bearer {t}").parse().unwrap(),
        );
        h
    }

    #[test]
    fn loopback_only_without_tokens() {
        let none = HeaderMap::new();
        assert!(authorize(peer("127.0.0.1:5"), &none, &[]).is_ok());
        assert!(authorize(peer("[::1]:5"), &none, &[]).is_ok());
        assert!(authorize(peer("[::ffff:127.0.0.2]:5"), &none, &[]).is_ok());
        assert!(matches!(
            authorize(peer("10.1.2.3:5"), &none, &[]),
            Err(GatewayError::AdminForbidden)
        ));
        assert!(matches!(
            authorize(None, &none, &[]),
            Err(GatewayError::AdminForbidden)
        ));
    }

    #[test]
    fn tokens_required_from_everyone_once_set() {
        let tokens = vec!["s3cret".to_owned()];
        assert!(authorize(peer("10.1.2.3:5"), &bearer("s3cret"), &tokens).is_ok());
        for (p, h) in [
            (peer("127.0.0.1:5"), HeaderMap::new()),
            (peer("127.0.0.1:5"), bearer("s3cre")),
            (peer("10.1.2.3:5"), bearer("wrong!")),
        ] {
            assert!(matches!(
                authorize(p, &h, &tokens),
                Err(GatewayError::Unauthorized)
            ));
        }
    }

    #[test]
    fn the_scheme_is_read_in_any_case() {
        let tokens = vec!["s3cret".to_owned()];
        for scheme in ["Bearer", "bearer", "BEARER"] {
            let mut h = HeaderMap::new();
            let value = format!("{scheme} s3cret");
            h.insert(header::AUTHORIZATION, value.parse().unwrap());
            assert!(
                authorize(peer("10.1.2.3:5"), &h, &tokens).is_ok(),
                "{scheme}"
            );
        }
    }
}
