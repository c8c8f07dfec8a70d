//! Requests no route of the gateway's own takes: the pass-through answers them, else 404 or 405.

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{AppState, OverTls};

/// A method other than `POST` on an RPC path: the pass-through's when one takes the path,
/// else 405.
pub(super) async fn not_rpc_method(
    State(state): State<AppState>,
    req: axum::extract::Request,
) -> Response {
    match forward(&state, req).await {
        Ok(resp) => resp,
        Err(_) => (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, HeaderValue::from_static("POST"))],
        )
            .into_response(),
    }
}

/// What no route takes: the pass-through's when a prefix takes the path, else 404.
pub(super) async fn pass_through(
    State(state): State<AppState>,
    req: axum::extract::Request,
) -> Response {
    match forward(&state, req).await {
        Ok(resp) => resp,
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn forward(
    state: &AppState,
    req: axum::extract::Request,
) -> Result<Response, axum::extract::Request> {
    let origin = crate::passthrough::Origin {
        peer: req
            .extensions()
            .get::<crate::auth::admin::Peer>()
            .map(|p| p.0),
        tls: req.extensions().get::<OverTls>().is_some(),
        edits: None,
    };
    let cert = req
        .extensions()
        .get::<crate::auth::refusal::ClientCert>()
        .cloned();
    let gate = gated(
        &state.gateway,
        &state.passthrough,
        req.uri(),
        req.headers(),
        cert,
        origin,
    );
    let origin = match gate.await {
        Ok(origin) => origin,
        Err(refused) => return Ok(refused),
    };
    state.passthrough.forward(req, origin).await
}

/// A pass-through request through the gate: its `origin` with the header edits the gate asks
/// for, or the gate's refusal. Open gate, or no prefix taking the path: `origin` as it is.
pub(super) async fn gated(
    gateway: &crate::gateway::Gateway,
    passthrough: &crate::passthrough::Passthrough,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
    cert: Option<crate::auth::refusal::ClientCert>,
    mut origin: crate::passthrough::Origin,
) -> Result<crate::passthrough::Origin, Response> {
    if !gateway.is_gated() {
        return Ok(origin);
    }
    let path = uri.path();
    let Some(prefix) = passthrough.prefix_of(path) else {
        return Ok(origin);
    };
    let headers = crate::http::headers::Headers::Map(headers);
    let peer = origin.peer.map(|p| p.ip());
    let pass = gateway.pass(prefix, path, headers, peer, cert.as_ref().map(|c| &*c.0));
    origin.edits = Box::pin(pass).await?;
    Ok(origin)
}
