//! A refusal of the gate's on the wire, for what the router serves whole (the A2A REST binding,
//! the event-stream routes) as for the calls of `POST /rpc`: its HTTP headers, and the gate of a
//! request whose headers and connection are all it has to say who sent it.

use std::sync::Arc;

use axum::http::{header, Extensions, HeaderMap, HeaderName, HeaderValue};

use super::admin::Peer;
use super::gate::{Gate, Identity};
use super::limits::Subject;
use crate::http::headers::Headers;
use crate::model::error::GatewayError;

/// The client certificate of a request's connection (DER, verified by the TLS handshake), put
/// on every request the router serves.
#[derive(Clone, Debug)]
pub(crate) struct ClientCert(pub(crate) Arc<[u8]>);

/// `WWW-Authenticate` for a 401 (RFC 6750 §3: `error="invalid_token"` when a credential was
/// sent); `Retry-After` (whole seconds, rounded up) and the RateLimit headers for a 429.
pub(crate) fn refusal_headers(headers: &mut HeaderMap, e: &GatewayError) {
    match e {
        GatewayError::Unauthenticated { sent, .. } => {
            let value = match sent {
                true => r#"Bearer realm="wiregate", error="invalid_token""#,
                false => r#"Bearer realm="wiregate""#,
            };
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(value));
        }
        GatewayError::RateLimited {
            limit,
            retry_after_ms,
            policy,
        } => {
            let seconds = retry_after_ms.div_ceil(1000).max(1);
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            if let Ok(v) = HeaderValue::from_str(policy) {
                headers.insert(HeaderName::from_static("ratelimit-policy"), v);
            }
            if let Ok(v) = HeaderValue::from_str(&format!("\"{limit}\";r=0;t={seconds}")) {
                headers.insert(HeaderName::from_static("ratelimit"), v);
            }
        }
        _ => {}
    }
}

impl Gate {
    /// Who sent a request the router serves, from its headers and its connection's
    /// (`extensions`: the client's address and certificate), and whether `auth.mode` and the
    /// rate limits let it call `method`: its identity when they do. A `header:NAME` rate limit
    /// reads no header here (such a request shares that limit's keyless bucket).
    pub(crate) async fn admit_request(
        &self,
        method: &str,
        headers: &HeaderMap,
        extensions: &Extensions,
    ) -> Result<Identity, GatewayError> {
        if self.is_open() {
            return Ok(Identity::Anonymous);
        }
        let cert = extensions.get::<ClientCert>().map(|c| &*c.0);
        let identity = self.identify(Headers::Map(headers), cert).await;
        let subject = Subject {
            caller: identity.caller(),
            ip: extensions
                .get::<Peer>()
                .map(|p| self.client_ip(p.0.ip(), Headers::Map(headers))),
            headers: None,
        };
        let admitted = self.admit_call(None, method, &identity, &subject);
        crate::telemetry::auth::record(method, &admitted);
        admitted.map(|()| identity)
    }
}

/// A refusal as the router's routes answer it: the error's JSON-RPC body and status, with its
/// [`refusal_headers`].
pub(crate) fn refusal_response(e: &GatewayError) -> axum::response::Response {
    let mut resp = e.route_response();
    refusal_headers(resp.headers_mut(), e);
    resp
}
