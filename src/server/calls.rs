//! The RPC lane's handlers: a `POST` to an RPC path or A2A's JSON-RPC binding read, checked
//! (content type, size, JSON) and answered from the gateway's [`Reply`], by hyper's connections
//! and the HTTP/1 loop alike; the request id and the JSON content type read from the head.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::events::frames as sse_stream;
use crate::gateway::{Binding, Meta, Refusals};
use crate::http::headers::Headers;
use crate::http::reply::{Reply, ReplyBody};
use crate::model::error::GatewayError;
use crate::wire::dialect::{self, Inbound};
use crate::wire::jsonrpc::{Id, Response as RpcResponse};
use crate::wire::legacy::LegacyResponse;

use super::{AppState, A2A_VERSION, LAST_EVENT_ID, X_REQUEST_ID};
use crate::auth::refusal::ClientCert;

/// `application/json` or any `application/*+json`, parameters ignored.
pub(super) fn is_json(headers: Headers<'_>) -> bool {
    // Read as bytes (the value must be visible ASCII, as text), without `str` searchers; the
    // plain `application/json` nearly every client sends is one comparison.
    let Some(ct) = headers.get(&header::CONTENT_TYPE) else {
        return false;
    };
    if ct.eq_ignore_ascii_case(b"application/json") {
        return true;
    }
    let Some(ct) = crate::http::headers::visible(ct) else {
        return false;
    };
    let ct = ct.as_bytes();
    let essence = ct[..ct.iter().position(|&b| b == b';').unwrap_or(ct.len())].trim_ascii();
    let Some(slash) = essence.iter().position(|&b| b == b'/') else {
        return false;
    };
    let (kind, sub) = (&essence[..slash], &essence[slash + 1..]);
    kind.eq_ignore_ascii_case(b"application")
        && (sub.eq_ignore_ascii_case(b"json")
            || (sub.len() > 5 && sub[sub.len() - 5..].eq_ignore_ascii_case(b"+json")))
}

/// A call's request id: the caller's `X-Request-Id`, or one made here.
///
/// A made id stays the bytes it was written as: most calls carry none, and a header value of
/// it (copied into shared bytes, its characters checked, then checked again as text for the
/// call) cost more than making it. Only an answer written through a response object makes one
/// a header value.
#[derive(Clone, Debug)]
pub(super) enum RequestId {
    /// The caller's, checked to be 1–128 visible characters.
    Sent(HeaderValue),
    /// A random UUID, hyphenated (36 ASCII characters).
    Made([u8; 36]),
}

impl RequestId {
    /// The id as text.
    pub(super) fn as_str(&self) -> &str {
        match self {
            // Checked to be visible ASCII when it was taken.
            RequestId::Sent(v) => v.to_str().unwrap_or_default(),
            RequestId::Made(b) => std::str::from_utf8(b).expect("a uuid is ASCII"),
        }
    }

    /// The id as a header value's bytes.
    pub(super) fn as_bytes(&self) -> &[u8] {
        match self {
            RequestId::Sent(v) => v.as_bytes(),
            RequestId::Made(b) => b,
        }
    }

    /// The id as a header value.
    pub(super) fn into_value(self) -> HeaderValue {
        match self {
            RequestId::Sent(v) => v,
            RequestId::Made(b) => HeaderValue::from_bytes(&b).expect("a uuid is a header value"),
        }
    }
}

/// The caller's `X-Request-Id` when it is usable (1–128 visible characters), else a fresh one
/// (a random UUID, see [`crate::util::ids`]).
pub(super) fn request_id(headers: Headers<'_>) -> RequestId {
    match headers
        .value(&X_REQUEST_ID)
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.to_str().is_ok())
    {
        Some(v) => RequestId::Sent(v),
        None => RequestId::Made(crate::util::ids::uuid_v4_text()),
    }
}

pub(super) async fn rpc(State(state): State<AppState>, req: axum::extract::Request) -> Response {
    let client = client_of(&req);
    rpc_call(state, req, client, Binding::Gateway, None).await
}

/// The connection's client and certificate, as the router's requests carry them.
fn client_of(req: &axum::extract::Request) -> Client {
    let peer = req.extensions().get::<crate::auth::admin::Peer>().copied();
    let cert = req.extensions().get::<ClientCert>().map(|c| c.0.clone());
    let tls = req.extensions().get::<super::OverTls>().is_some();
    (peer, cert, tls)
}

/// A request's client: its address, the certificate its TLS handshake verified, and whether
/// its connection is TLS.
pub(super) type Client = (Option<crate::auth::admin::Peer>, Option<Arc<[u8]>>, bool);

/// A call on A2A's JSON-RPC binding (`a2a.jsonrpc_path`).
pub(super) async fn a2a_rpc(
    State(state): State<AppState>,
    req: axum::extract::Request,
) -> Response {
    let client = client_of(&req);
    rpc_call(state, req, client, Binding::A2a, None).await
}

/// A call on an RPC path served by hyper; `peer` is the client (handed over directly on the
/// fast path, which builds no extensions map), for splits sticky by `ip` and the caller report.
/// `cors`: the CORS headers its answer carries ([`super::cors::answer_headers`]), when it is
/// answered off the router.
pub(super) async fn rpc_call(
    state: AppState,
    req: axum::extract::Request,
    (peer, cert, tls): Client,
    binding: Binding,
    cors: Option<HeaderMap>,
) -> Response {
    let (parts, body) = req.into_parts();
    let headers = &parts.headers;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let read = if declared.is_some_and(|n| n > state.max_body) {
        Err(GatewayError::PayloadTooLarge {
            limit: state.max_body,
        })
    } else {
        read_body(body, state.max_body, state.body_timeout).await
    };
    let client = (peer, cert.as_deref(), tls);
    let (reply, request_id) = rpc_reply(&state, Headers::Map(headers), read, client, binding).await;
    into_response(reply, request_id.into_value(), cors)
}

/// The reply to a call on an RPC path whose body has been read (or failed to be), and the
/// request id it is answered with: what [`rpc_call`] makes a response of ([`into_response`]),
/// and what the HTTP/1 loop writes itself (`h1`, without a response object or a header map for
/// the answer).
pub(super) async fn rpc_reply(
    state: &AppState,
    headers: Headers<'_>,
    read: Result<bytes::Bytes, GatewayError>,
    (peer, cert, tls): (Option<crate::auth::admin::Peer>, Option<&[u8]>, bool),
    binding: Binding,
) -> (Reply, RequestId) {
    // Only the debug line reads the clock here (the call's latency is measured where it is
    // recorded).
    let started = tracing::enabled!(tracing::Level::DEBUG).then(Instant::now);
    let request_id = request_id(headers);
    let reply = match read {
        Err(e) => reject(None, e),
        Ok(bytes) if !is_json(headers) => {
            let ct = headers
                .str(&header::CONTENT_TYPE)
                .unwrap_or("(none)")
                .to_owned();
            reject(Some(&bytes), GatewayError::UnsupportedMediaType(ct))
        }
        Ok(bytes) => {
            // Behind the gate: who sent it, once; its calls admitted each in `handle` (the one
            // await both paths share, so the gate adds no future of its own to a call's).
            let identity = match state.gateway.is_gated() {
                true => Some(state.gateway.identify(headers, cert).await),
                false => None,
            };
            let refusals = Refusals::default();
            let meta = Meta {
                last_event_id: headers.str(&LAST_EVENT_ID),
                a2a_version: headers.str(&A2A_VERSION),
                headers: Some(headers),
                peer: peer.map(|p| state.gateway.client_ip(p.0.ip(), headers)),
                tls,
                proxy: peer.map(|p| p.0.ip()),
                request_id: Some(request_id.as_bytes()),
                binding,
                identity: identity.as_ref(),
                refusals: identity.is_some().then_some(&refusals),
            };
            match state.gateway.refused(&bytes, &meta) {
                Some(reply) => reply,
                None => {
                    let mut reply = state.gateway.handle(&bytes, &meta).await;
                    refusals.onto(&mut reply);
                    reply
                }
            }
        }
    };
    if let Some(started) = started {
        tracing::debug!(
            request_id = request_id.as_str(),
            status = reply.status.as_u16(),
            latency_us = started.elapsed().as_micros() as u64,
            "rpc"
        );
    }
    (reply, request_id)
}

/// The whole request body, within `limit` bytes and `timeout`. Only a body over the limit is
/// 413; one that HTTP could not frame (a bad chunk size, a huge chunk extension or trailer) is
/// the client's malformed request, 400; one that stalls is 408.
pub(super) async fn read_body(
    body: Body,
    limit: usize,
    timeout: Duration,
) -> Result<bytes::Bytes, GatewayError> {
    use futures_util::FutureExt;
    use http_body_util::BodyExt;
    let limited = http_body_util::Limited::new(body, limit);
    let mut collect = std::pin::pin!(limited.collect());
    // A body that came with its head is read without a timer set and cancelled.
    let collected = match collect.as_mut().now_or_never() {
        Some(c) => Ok(c),
        None => tokio::time::timeout(timeout, collect).await,
    };
    match collected {
        Err(_) => Err(GatewayError::BodyTimeout {
            timeout_ms: timeout.as_millis() as u64,
        }),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => {
            Err(GatewayError::PayloadTooLarge { limit })
        }
        Ok(Err(e)) => Err(GatewayError::MalformedBody(e.to_string())),
    }
}

/// A failure found before the body was parsed, in the caller's dialect when it can be told.
pub(super) fn reject(body: Option<&[u8]>, err: GatewayError) -> Reply {
    let status = err.status();
    let bytes = match body.map(dialect::parse) {
        Some(Ok(Inbound::Legacy(parsed))) => {
            let request_id = match parsed {
                Ok(r) => r.request_id,
                Err(f) => f.request_id,
            };
            serde_json::to_vec(&LegacyResponse::error(request_id, err.to_legacy()))
        }
        _ => serde_json::to_vec(&RpcResponse::error(Id::Null, err.to_jsonrpc())),
    }
    .expect("wire types always serialise");
    Reply {
        status,
        headers: None,
        timing_ms: None,
        body: ReplyBody::Json(bytes.into()),
    }
}

/// The one conversion of a call's [`Reply`] into a response object, for hyper's connections
/// (HTTP/2, and the HTTP/1 requests the loop hands over): the same head the loop's writer lays
/// out (`h1::answer::write_reply`), its CORS headers (`cors`) included.
pub(super) fn into_response(
    reply: Reply,
    request_id: HeaderValue,
    cors: Option<HeaderMap>,
) -> Response {
    let mut resp = match reply.body {
        ReplyBody::Json(body) => {
            let mut r = (reply.status, body).into_response();
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
        ReplyBody::Empty => reply.status.into_response(),
        ReplyBody::Stream(s) => sse_stream::response(s),
    };
    let h = resp.headers_mut();
    crate::http::reply::add_server_timing(h, reply.timing_ms);
    if let Some(extra) = reply.headers {
        h.extend(*extra);
    }
    h.insert(X_REQUEST_ID, request_id);
    if let Some(cors) = cors {
        super::cors::add(h, cors);
    }
    resp
}

/// 404 for a route whose feature is not configured, saying which setting turns it on.
pub(super) fn not_configured(message: &'static str) -> Response {
    let err = RpcResponse::error(
        Id::Null,
        crate::wire::jsonrpc::ErrorObject::new(
            crate::wire::jsonrpc::code::METHOD_NOT_FOUND,
            message,
        ),
    );
    (StatusCode::NOT_FOUND, axum::Json(err)).into_response()
}
