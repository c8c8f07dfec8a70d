//! A body through `[auth]` and `[[rate_limits]]`: who sent it (once), a bad credential
//! refusing the whole request, each call admitted or refused on its own in
//! [`Gateway::dispatch`](super::Gateway), and the refusal's HTTP headers (RFC 6750's
//! `WWW-Authenticate`, `Retry-After` and the RateLimit headers) on a single call's answer.
//!
//! Only reached when the gate is not open ([`Gate::is_open`]): with auth off and no limits, a
//! body goes straight to [`Gateway::handle`](super::Gateway::handle).
//!
//! [`Gate::is_open`]: crate::auth::gate::Gate::is_open

use std::sync::OnceLock;

use axum::http::{header, HeaderValue};

use super::{Gateway, Meta};
use crate::auth::gate::Identity;
use crate::auth::refusal::refusal_headers;
use crate::http::headers::Headers;
use crate::http::reply::{json_reply, Reply};
use crate::model::error::GatewayError;
use crate::wire::dialect::{self, Inbound, Message};
use crate::wire::jsonrpc::{Id, Response};
use crate::wire::legacy::LegacyResponse;

/// What a refused call leaves for its answer's headers: the first refusal of the request.
#[derive(Debug, Default)]
pub(crate) struct Refusals(OnceLock<GatewayError>);

impl Refusals {
    /// Keeps `e` when it is a refusal of the gate's and none was kept before.
    pub(super) fn note(&self, e: &GatewayError) {
        if matches!(
            e,
            GatewayError::Unauthenticated { .. } | GatewayError::RateLimited { .. }
        ) {
            let _ = self.0.set(e.clone());
        }
    }

    /// Puts the refusal kept, if any, on `reply` as its headers (when `reply` is that refusal's
    /// answer: a batch's is 200 and carries none).
    pub(crate) fn onto(&self, reply: &mut Reply) {
        if let Some(e) = self.0.get() {
            add_refusal_headers(reply, e);
        }
    }
}

impl Gateway {
    /// Who sent a body, when the gate is not open ([`Gateway::is_gated`]): from its headers
    /// and `cert` (the verified client certificate), as [`Gate::identify`] reads them.
    ///
    /// [`Gate::identify`]: crate::auth::gate::Gate::identify
    pub(crate) async fn identify(&self, headers: Headers<'_>, cert: Option<&[u8]>) -> Identity {
        self.gate.identify(headers, cert).await
    }

    /// The address of the client of a request from `peer`, as a trusted proxy may say it
    /// ([`Gate::client_ip`](crate::auth::gate::Gate::client_ip)).
    #[inline]
    pub(crate) fn client_ip(
        &self,
        peer: std::net::IpAddr,
        headers: Headers<'_>,
    ) -> std::net::IpAddr {
        self.gate.client_ip(peer, headers)
    }

    /// The answer to a body refused as a whole: a bad credential ([`Identity::Refused`]) where
    /// any of its calls is under a rule that looks at credentials. `None`: its calls are
    /// admitted or refused each on its own, in [`Gateway::handle`].
    pub(crate) fn refused(&self, body: &[u8], meta: &Meta<'_>) -> Option<Reply> {
        match meta.identity? {
            Identity::Refused(reason) => self.refuse_whole(body, meta, reason),
            _ => None,
        }
    }

    /// The answer to a body sent with a bad credential, when any of its calls is under a rule
    /// that looks at credentials: one error for the whole request, in its dialect (a batch gets
    /// one error object, as for a request that is not valid). `None`: credentials do not
    /// matter to any of its calls.
    fn refuse_whole(&self, body: &[u8], meta: &Meta<'_>, reason: &str) -> Option<Reply> {
        let e = GatewayError::Unauthenticated {
            sent: true,
            reason: reason.to_owned(),
        };
        let checked = |method: &str| {
            self.gate
                .checks_route(self.router.route(method).map(|r| r.0))
        };
        let mut reply = match dialect::parse_bounded(body, self.batch_len).ok()? {
            Inbound::Legacy(Ok(req)) => {
                if !checked(&req.operation) {
                    return None;
                }
                self.legacy_reply(
                    e.status(),
                    &LegacyResponse::error(req.request_id, e.to_legacy()),
                    None,
                )
            }
            Inbound::JsonRpc(Message::Single(Ok(req))) => {
                if !checked(&req.method) {
                    return None;
                }
                let id = req.id.unwrap_or(Id::Null);
                let spec = self.classify(&req.method, meta).ok().flatten();
                let err = crate::a2a::wire_error(&e, spec.map(|s| s.version));
                json_reply(e.status(), &Response::error(id, err))
            }
            Inbound::JsonRpc(Message::Batch(entries)) => {
                let any = entries
                    .iter()
                    .any(|r| r.as_ref().is_ok_and(|r| checked(&r.method)));
                if !any {
                    return None;
                }
                json_reply(e.status(), &Response::error(Id::Null, e.to_jsonrpc()))
            }
            _ => return None,
        };
        add_refusal_headers(&mut reply, &e);
        Some(reply)
    }
}

/// The headers of a refused single call's answer, when its status is the refusal's (a batch
/// answer is 200 and carries none).
fn add_refusal_headers(reply: &mut Reply, e: &GatewayError) {
    if reply.status != e.status() {
        return;
    }
    let headers = reply.headers.get_or_insert_default();
    refusal_headers(headers, e);
}

impl Gateway {
    /// The gate of a pass-through request to `path` under prefix `prefix` (its
    /// `[[passthrough]]` position): how its headers change on the way upstream, or the short
    /// answer refusing it (401, 403, 429 with their headers). `Ok(None)`: the gate is open.
    pub(crate) async fn pass(
        &self,
        prefix: usize,
        path: &str,
        headers: crate::http::headers::Headers<'_>,
        peer: Option<std::net::IpAddr>,
        cert: Option<&[u8]>,
    ) -> Result<Option<std::sync::Arc<crate::passthrough::Edits>>, axum::response::Response> {
        if self.gate.is_open() {
            return Ok(None);
        }
        let identity = self.gate.identify(headers, cert).await;
        let subject = crate::auth::limits::Subject {
            caller: identity.caller(),
            ip: peer.map(|p| self.gate.client_ip(p, headers)),
            headers: Some(headers),
        };
        let admitted = self.gate.admit_path(prefix, path, &identity, &subject);
        crate::telemetry::auth::record("passthrough", &admitted);
        if let Err(e) = admitted {
            let mut resp =
                axum::response::Response::new(axum::body::Body::from(format!("wiregate: {e}\n")));
            *resp.status_mut() = e.status();
            resp.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            refusal_headers(resp.headers_mut(), &e);
            return Err(resp);
        }
        let mut edits = crate::passthrough::Edits::default();
        if self.gate.strip_credentials && identity.caller().is_some() {
            edits.drop.push(header::AUTHORIZATION);
            edits.drop.push(self.gate.key_header().clone());
        }
        if let Some(name) = &self.gate.identity_header {
            // A client's own header of that name never passes: only the gate names callers.
            edits.drop.push(name.clone());
            let value = identity
                .caller()
                .and_then(|c| HeaderValue::from_str(&c.id).ok());
            edits.identity = value.map(|v| (name.clone(), v));
        }
        Ok(Some(std::sync::Arc::new(edits)))
    }
}
