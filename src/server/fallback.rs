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
    };
    state.passthrough.forward(req, origin).await
}
