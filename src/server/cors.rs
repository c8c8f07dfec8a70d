//! `[server.cors]`: tower-http's CORS layer, built from the allowed origins, around every
//! route (the RPC lane's answers and the SSE streams that [`sse_conn`](crate::http::sse_conn)
//! serves, written off the router, get the same headers; see [`answer_headers`]).
//!
//! The pass-through is one of those routes, so the rule is a reverse proxy's: every method a
//! proxy carries, and whatever request headers the page asks for. With CORS configured the
//! gateway owns the policy: an upstream's own `Access-Control-*` headers are dropped from its
//! answers (see [`around`]).
//!
//! tower-http answers every `OPTIONS` as a preflight. Only one carrying `Origin` and
//! `Access-Control-Request-Method` is one (Fetch standard, "CORS-preflight request"); any other
//! `OPTIONS` (a WebDAV client, a capability probe, an API documenting its `Allow`) goes where it
//! would without CORS, the pass-through included (see [`around`]).

use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderName, HeaderValue, Method};
use axum::response::Response;
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};

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
            .allow_methods([
                Method::GET,
                Method::HEAD,
                Method::POST,
                Method::PUT,
                Method::PATCH,
                Method::DELETE,
                Method::OPTIONS,
            ])
            // Mirrored rather than `*`: the wildcard does not cover `Authorization` (Fetch
            // standard), and a pass-through's upstream may take any header; the origin check
            // is what guards the route, not the header list.
            .allow_headers(AllowHeaders::mirror_request())
            .expose_headers([
                crate::http::headers::X_REQUEST_ID,
                HeaderName::from_static("server-timing"),
                HeaderName::from_static("deprecation"),
                HeaderName::from_static("sunset"),
            ])
            .max_age(std::time::Duration::from_secs(600)),
    )
}

/// `router` with `layer` around it, an upstream's own `Access-Control-*` headers dropped from
/// each answer before `layer` adds the gateway's. tower-http overwrites the names it sets but
/// adds nothing for a refused origin and never sets some names (`Allow-Credentials` here), so
/// without this a pass-through answer could grant what the gateway's rule refuses.
///
/// An `OPTIONS` that is no preflight crosses `layer` disguised as a `GET` and has its method
/// back inside it: `layer` then treats it as the actual request it is (the allowed origin and
/// exposed headers on the router's answer) instead of answering it as a preflight.
pub(super) fn around(router: axum::Router, layer: &CorsLayer) -> axum::Router {
    router
        .layer(axum::middleware::map_response(drop_upstream_cors))
        .layer(axum::middleware::map_request(unmask_plain_options))
        .layer(layer.clone())
        .layer(axum::middleware::map_request(mask_plain_options))
}

/// Whether `req` is a CORS preflight (Fetch standard): an `OPTIONS` with `Origin` and
/// `Access-Control-Request-Method`.
fn is_preflight<B>(req: &Request<B>) -> bool {
    req.method() == Method::OPTIONS
        && req.headers().contains_key(header::ORIGIN)
        && req
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// Marks an `OPTIONS` that went through [`mask_plain_options`] as a `GET`.
#[derive(Clone, Copy, Debug)]
struct PlainOptions;

async fn mask_plain_options(mut req: Request) -> Request {
    if req.method() == Method::OPTIONS && !is_preflight(&req) {
        *req.method_mut() = Method::GET;
        req.extensions_mut().insert(PlainOptions);
    }
    req
}

async fn unmask_plain_options(mut req: Request) -> Request {
    if req.extensions_mut().remove::<PlainOptions>().is_some() {
        *req.method_mut() = Method::OPTIONS;
    }
    req
}

async fn drop_upstream_cors(mut resp: Response) -> Response {
    let headers = resp.headers_mut();
    let theirs: Vec<HeaderName> = headers
        .keys()
        .filter(|n| n.as_str().starts_with("access-control-"))
        .cloned()
        .collect();
    for name in theirs {
        headers.remove(name);
    }
    resp
}

/// The headers `layer` puts on the answer to a request from `origin` that is no preflight, for
/// the answers written off the router (the RPC lane's, and the event streams that
/// [`sse_conn`](crate::http::sse_conn) serves): the layer is run over an empty answer, so what
/// that answer then holds is the layer's alone, and every route's CORS headers come from its one
/// rule. Put on an answer with [`add`], or written after its own headers (it has no `Vary` or
/// `Access-Control-*` of its own).
pub(super) fn answer_headers(layer: &CorsLayer, origin: Option<&[u8]>) -> HeaderMap {
    use futures_util::FutureExt;
    use tower::{Layer, ServiceExt};
    let mut req = axum::http::Request::new(());
    if let Some(origin) = origin.and_then(|o| HeaderValue::from_bytes(o).ok()) {
        req.headers_mut().insert(header::ORIGIN, origin);
    }
    let empty = tower::service_fn(|_| {
        std::future::ready(Ok::<_, std::convert::Infallible>(
            axum::http::Response::new(()),
        ))
    });
    // Ready at once: the origins are a list or `*`, no predicate to await.
    match layer.layer(empty).oneshot(req).now_or_never() {
        Some(Ok(resp)) => resp.into_parts().0.headers,
        _ => HeaderMap::new(),
    }
}

/// Puts `cors` ([`answer_headers`]) on an answer's `headers` as the layer does: `Vary` added to
/// the answer's own, the other names replacing theirs.
pub(super) fn add(headers: &mut HeaderMap, mut cors: HeaderMap) {
    if let Some(vary) = cors.remove(header::VARY) {
        headers.append(header::VARY, vary);
    }
    headers.extend(cors);
}
