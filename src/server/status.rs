//! The routes that report on the gateway: `/healthz`, `/readyz`, `/metrics` and `/migration`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::AppState;

/// Whether shutdown has begun: from then on `/readyz` answers 503 while the listener serves on
/// for `server.drain_ms`, so whoever balances over the replicas stops sending clients before
/// the listener closes. One flag for the process, shared by every reloaded state.
#[derive(Clone, Debug, Default)]
pub(crate) struct Draining(Arc<AtomicBool>);

impl Draining {
    /// Turns readiness off for good.
    pub(crate) fn start(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn started(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

pub(super) async fn healthz() -> Response {
    axum::Json(json!({"status": "ok"})).into_response()
}

/// `GET /readyz`: 200 while every upstream has an endpoint that takes calls (and sid and the
/// cluster link are up), else 503; each upstream's endpoints listed with their state. 503 at
/// once, with nothing checked, once shutdown has begun ([`Draining`]).
pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    if state.draining.started() {
        let body = json!({"ready": false, "draining": true});
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    }
    let ups = state.gateway.upstreams();
    let reports = futures_util::future::join_all(ups.iter().map(|u| u.report())).await;
    let mut upstreams = serde_json::Map::new();
    let mut endpoints = serde_json::Map::new();
    let mut all_up = true;
    for (u, report) in ups.iter().zip(reports) {
        let up = report.iter().any(|e| e.state == "healthy");
        all_up &= up;
        upstreams.insert(
            u.name().to_owned(),
            json!(if up { "reachable" } else { "unreachable" }),
        );
        endpoints.insert(u.name().to_owned(), json!(report));
    }
    let sid_ok = state.gateway.bridge().is_none_or(|b| b.healthy());
    let cluster = state.gateway.cluster();
    let ready = all_up && sid_ok && cluster.is_none_or(|c| c.is_up());
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut body = json!({"ready": ready, "upstreams": upstreams, "endpoints": endpoints});
    if let Some(c) = cluster {
        body["cluster"] = c.readiness();
    }
    (status, axum::Json(body)).into_response()
}

/// `GET /migration`: splits, shadows, rollbacks and callers (admin callers only).
pub(super) async fn migration(
    State(state): State<AppState>,
    req: axum::extract::Request,
) -> Response {
    let peer = req.extensions().get::<crate::auth::admin::Peer>().copied();
    if let Err(e) = crate::auth::admin::authorize(peer, req.headers(), &state.admin_tokens) {
        return e.route_response();
    }
    axum::Json(state.gateway.migration().report()).into_response()
}

pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    for u in state.gateway.upstreams() {
        u.refresh();
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}
