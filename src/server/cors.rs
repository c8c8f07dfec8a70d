//! `[server.cors]`: tower-http's CORS layer, built from the allowed origins, around every
//! route (the SSE streams that [`sse_conn`](crate::sse_conn) serves get the same headers; see
//! [`stream_headers`]).

use axum::http::{header, HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::config::Cors;

/// The layer for `cors`, or `None` when no origin is allowed (no CORS headers at all).
pub(super) fn layer(cors: &Cors) -> Option<CorsLayer> {
    if cors.allow_origins.is_empty() {
        return None;
    }
    let origins = if cors.allow_origins.iter().any(|o| o == "*") {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(
            cors.allow_origins
                .iter()
                .filter_map(|o| HeaderValue::from_str(o).ok()),
        )
    };
    Some(
        CorsLayer::new()
            .allow_origin(origins)
            .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
            .allow_headers([
                header::CONTENT_TYPE,
                header::AUTHORIZATION,
                HeaderName::from_static("last-event-id"),
                HeaderName::from_static(crate::a2a::VERSION_HEADER),
                HeaderName::from_static("x-request-id"),
                crate::trace::TRACEPARENT,
                crate::trace::TRACESTATE,
            ])
            .expose_headers([
                HeaderName::from_static("x-request-id"),
                HeaderName::from_static("server-timing"),
                header::HeaderName::from_static("deprecation"),
                header::HeaderName::from_static("sunset"),
            ])
            .max_age(std::time::Duration::from_secs(600)),
    )
}

/// Runs `resp` through `layer` as the answer to a GET with `headers`, so a stream served off
/// hyper carries exactly the CORS headers the router would have added.
pub(super) async fn stream_headers(
    layer: &CorsLayer,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
    resp: axum::response::Response,
) -> axum::response::Response {
    use tower::{Layer, ServiceExt};
    let mut req = axum::http::Request::new(axum::body::Body::empty());
    *req.uri_mut() = uri.clone();
    *req.headers_mut() = headers.clone();
    let mut resp = Some(resp);
    let svc = tower::service_fn(move |_req| {
        let r = resp.take().expect("called once");
        async move { Ok::<_, std::convert::Infallible>(r) }
    });
    match layer.layer(svc).oneshot(req).await {
        Ok(r) => r,
        Err(never) => match never {},
    }
}
