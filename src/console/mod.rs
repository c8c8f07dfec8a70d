//! The web console: `GET /console` and its assets, embedded in the binary at build time, and the
//! admin-only data routes under `/console/api/` the page reads.
//!
//! The page itself loads for anyone (it holds nothing but code); every data call goes through
//! [`admin_only`], the admin routes' rule of [`crate::auth::admin::authorize`] (loopback only, or a
//! bearer token from `server.admin_tokens`). The page reads only the gateway's own origin, so no
//! CORS is involved. Besides the routes here, the server mounts under `/console/api/` the same
//! `POST /rpc` and event-stream handlers it serves publicly, so the Agents and Events views are
//! behind the same rule as the rest (with `sid.bearer_tokens` set, the bridge still checks its
//! own token too).

use std::sync::Arc;

use axum::extract::{FromRef, Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::json;

use crate::gateway::Gateway;

/// `server.admin_tokens`, as the routes' state hands them to [`admin_only`].
#[derive(Clone, Debug, Default)]
pub(crate) struct AdminTokens(pub Arc<[String]>);

const PAGE: &str = include_str!("assets/index.html");

/// The embedded assets by file name: content type and bytes.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/api.js"),
    ),
    (
        "chart.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/chart.js"),
    ),
    (
        "overview.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/overview.js"),
    ),
    (
        "agents.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/agents.js"),
    ),
    (
        "events.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/events.js"),
    ),
    (
        "migration.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/migration.js"),
    ),
];

/// The page may run only its own scripts and styles and talk only to its own origin.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn with_headers(mut resp: Response, content_type: &'static str) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The assets change with the binary; a revalidation is cheap on loopback.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    resp
}

/// `GET /console`.
pub(crate) async fn page() -> Response {
    with_headers(PAGE.into_response(), "text/html; charset=utf-8")
}

/// `GET /console/assets/{file}`.
pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => with_headers(body.into_response(), content_type),
        None => (StatusCode::NOT_FOUND, "no such console asset").into_response(),
    }
}

/// Refuses a data call the admin rule refuses, with the rule's own error (401 or 403, JSON).
///
/// Two more refusals (403) guard a browser's requests, which are this route's callers: one a
/// browser marks as coming from another site (`Sec-Fetch-Site`), and, when the rule trusts
/// loopback addresses (no `server.admin_tokens`), one whose `Host` is not a loopback name: a
/// page of another site whose name is made to resolve to 127.0.0.1 (DNS rebinding) would
/// otherwise be the console's own origin, from a loopback address.
pub(crate) async fn admin_only(
    State(tokens): State<AdminTokens>,
    req: Request,
    next: Next,
) -> Response {
    let peer = req.extensions().get::<crate::auth::admin::Peer>().copied();
    let headers = req.headers();
    let verdict = crate::auth::admin::authorize(peer, headers, &tokens.0).and_then(|()| {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| req.uri().authority().map(|a| a.as_str()));
        let foreign_host = tokens.0.is_empty() && host.is_some_and(|h| !is_loopback_host(h));
        if foreign_host || is_cross_site(headers) {
            Err(crate::model::error::GatewayError::AdminForbidden)
        } else {
            Ok(())
        }
    });
    match verdict {
        Ok(()) => next.run(req).await,
        Err(e) => e.route_response(),
    }
}

/// A browser's `Sec-Fetch-Site` saying the request was made by another origin's page.
fn is_cross_site(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v != "same-origin" && v != "none")
}

/// `localhost` (or a name under it), or a loopback address, with or without a port.
fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        },
    };
    if name.eq_ignore_ascii_case("localhost")
        || name.len() > 10 && name[name.len() - 10..].eq_ignore_ascii_case(".localhost")
    {
        return true;
    }
    match name.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => a.is_loopback(),
        Ok(std::net::IpAddr::V6(a)) => {
            a.is_loopback() || a.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

/// The console's own data routes (mounted under `/console/api/`, behind [`admin_only`]).
pub(crate) fn api<S>() -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Gateway>: FromRef<S>,
{
    axum::Router::new()
        .route("/stats", get(stats_route))
        .route("/overview", get(overview))
        .route("/agents", get(agents))
        .route("/migration", get(migration))
}

/// Calls per second by dialect and outcome, and latency, over the last 15 minutes.
async fn stats_route() -> Response {
    no_store(axum::Json(crate::telemetry::stats::snapshot()).into_response())
}

/// Upstreams with their readiness, and the sid bridge's and the feed's state.
async fn overview(State(gateway): State<Arc<Gateway>>) -> Response {
    let ups = gateway.upstreams();
    let reports = futures_util::future::join_all(ups.iter().map(|u| u.report())).await;
    // Names, dialects and endpoints as `host:port`: an upstream's URL may carry credentials.
    let upstreams: Vec<_> = ups
        .iter()
        .zip(reports)
        .map(|(u, endpoints)| {
            let ok = endpoints.iter().any(|e| e.state == "healthy");
            json!({"name": u.name(), "dialect": u.dialect(), "reachable": ok, "endpoints": endpoints})
        })
        .collect();
    let sid = gateway.bridge().map(|b| {
        let contexts = b.list_contexts();
        json!({
            "healthy": b.healthy(),
            "contexts": contexts.len(),
            "running": contexts.iter().filter(|c| c.running).count(),
        })
    });
    let feed = gateway.feed().map(|f| json!({"connected": f.connected()}));
    no_store(
        axum::Json(json!({
            "version": env!("CARGO_PKG_VERSION"),
            "upstreams": upstreams,
            "sid": sid,
            "events": feed,
        }))
        .into_response(),
    )
}

/// The report `GET /migration` serves (splits, shadows, rollbacks, callers), behind this rule.
async fn migration(State(gateway): State<Arc<Gateway>>) -> Response {
    no_store(axum::Json(gateway.migration().report()).into_response())
}

/// The sid contexts and their tasks with their states.
async fn agents(State(gateway): State<Arc<Gateway>>) -> Response {
    let body = match gateway.bridge() {
        Some(b) => json!({"enabled": true, "contexts": b.list_contexts()}),
        None => json!({"enabled": false, "contexts": []}),
    };
    no_store(axum::Json(body).into_response())
}

fn no_store(mut resp: Response) -> Response {
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts() {
        for h in [
            "127.0.0.1:8080",
            "127.0.0.1",
            "127.1.2.3:1",
            "localhost:8080",
            "LOCALHOST",
            "app.localhost:80",
            "[::1]:8080",
            "[::1]",
            "[::ffff:127.0.0.1]:9",
        ] {
            assert!(is_loopback_host(h), "{h}");
        }
        for h in [
            "evil.example:8080",
            "evil.example",
            "10.0.0.1:8080",
            "[2001:db8::1]:80",
            "localhost.evil.example",
            "notlocalhost",
            "",
        ] {
            assert!(!is_loopback_host(h), "{h}");
        }
    }

    #[test]
    fn every_script_the_page_imports_is_embedded() {
        let sources = std::iter::once(PAGE).chain(ASSETS.iter().map(|(_, _, body)| *body));
        for src in sources {
            for (i, _) in src.match_indices("./") {
                let rest = &src[i + 2..];
                let Some(end) = rest.find(['"', '\'']) else {
                    continue;
                };
                let name = &rest[..end];
                if name.ends_with(".js") {
                    assert!(
                        ASSETS.iter().any(|(n, _, _)| *n == name),
                        "{name} is imported but not embedded"
                    );
                }
            }
        }
        assert!(PAGE.contains("/console/assets/app.js"));
        assert!(PAGE.contains("/console/assets/console.css"));
    }
}
