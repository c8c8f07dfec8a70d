//! The agent card's routes: the A2A 1.0 card, with 0.3's fields for the clients that ask.

use axum::extract::State;
use axum::http::request::Parts;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{header_str, not_configured, AppState, OverTls, A2A_VERSION};
use crate::auth::admin::Peer;

/// The A2A agent card: the 1.0 card, with the 0.3 card's fields for `A2A-Version: 0.3`.
pub(super) async fn agent_card(state: State<AppState>, parts: Parts) -> Response {
    let old = header_str(&parts.headers, &A2A_VERSION)
        .and_then(crate::model::a2a::Version::parse)
        .is_some_and(|v| v == crate::model::a2a::Version::V0_3);
    card_response(state, parts, old)
}

/// The card at the older well-known path, read by 0.3-only clients.
pub(super) async fn agent_card_0_3(state: State<AppState>, parts: Parts) -> Response {
    card_response(state, parts, true)
}

/// Where the client asked for the card, as its URLs must name it: over TLS or not, and which
/// host (`Host`, or HTTP/2's `:authority`). A peer of `server.trusted_proxies` speaks for its
/// client: its `X-Forwarded-Proto: https` (or `Forwarded: proto=https`, as
/// `server.forwarded_header` says it writes) makes the URLs
/// `https`, so callers send their credentials over TLS as the proxy's clients do; its
/// forwarded host names the host. Anyone else's claims are ignored.
fn origin(state: &AppState, parts: &Parts) -> (bool, Option<String>) {
    let tls = parts.extensions.get::<OverTls>().is_some();
    let host = header_str(&parts.headers, &header::HOST)
        .or_else(|| parts.uri.authority().map(|a| a.as_str()));
    let peer = parts.extensions.get::<Peer>().map(|p| p.0.ip());
    let claims = state.proxies.claimed(peer, &parts.headers);
    let https = claims
        .proto
        .map_or(tls, |p| p.eq_ignore_ascii_case("https"));
    (https, claims.host.or_else(|| host.map(str::to_owned)))
}

fn card_response(State(state): State<AppState>, parts: Parts, with_0_3: bool) -> Response {
    let Some(a2a) = state.gateway.a2a() else {
        return not_configured("no agent card: A2A needs sid.enabled and a2a.enabled");
    };
    let (https, host) = origin(&state, &parts);
    match a2a.card(https, host.as_deref(), with_0_3) {
        Some(card) => {
            let bytes = serde_json::to_vec(&card).expect("a card always serialises");
            let etag = crate::a2a::card::etag(&bytes);
            let mut resp = (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                bytes,
            )
                .into_response();
            let h = resp.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&etag) {
                h.insert(header::ETAG, v);
            }
            h.insert(header::LAST_MODIFIED, state.started.clone());
            h.insert(
                header::CACHE_CONTROL,
                HeaderValue::from_static("public, max-age=300"),
            );
            h.insert(
                header::VARY,
                HeaderValue::from_static(
                    "host, a2a-version, x-forwarded-proto, x-forwarded-host, forwarded",
                ),
            );
            resp
        }
        None => (
            StatusCode::BAD_REQUEST,
            axum::Json(
                json!({"error": "the Host header is not a valid authority; set a2a.public_url"}),
            ),
        )
            .into_response(),
    }
}
