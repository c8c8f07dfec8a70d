//! The agent card's routes: the A2A 1.0 card, with 0.3's fields for the clients that ask.

use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{header_str, not_configured, AppState, A2A_VERSION};

/// The A2A agent card: the 1.0 card, with the 0.3 card's fields for `A2A-Version: 0.3`.
pub(super) async fn agent_card(state: State<AppState>, headers: HeaderMap) -> Response {
    let old = header_str(&headers, &A2A_VERSION)
        .and_then(crate::model::a2a::Version::parse)
        .is_some_and(|v| v == crate::model::a2a::Version::V0_3);
    card_response(state, headers, old)
}

/// The card at the older well-known path, read by 0.3-only clients.
pub(super) async fn agent_card_0_3(state: State<AppState>, headers: HeaderMap) -> Response {
    card_response(state, headers, true)
}

fn card_response(State(state): State<AppState>, headers: HeaderMap, with_0_3: bool) -> Response {
    let Some(a2a) = state.gateway.a2a() else {
        return not_configured("no agent card: A2A needs sid.enabled and a2a.enabled");
    };
    match a2a.card(header_str(&headers, &header::HOST), with_0_3) {
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
            h.insert(header::VARY, HeaderValue::from_static("host, a2a-version"));
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
