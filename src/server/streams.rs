//! The event-stream routes: a sid task's or context's updates, and the domain-event feed, as
//! SSE; the same answers whether hyper or [`sse_conn`](crate::http::sse_conn) serves the connection.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, Extensions, HeaderMap};
use axum::response::Response;

use super::{header_str, not_configured, AppState, LAST_EVENT_ID};
use crate::events::frames as sse_stream;
use crate::model::error::GatewayError;
use crate::sid::{Bridge, Opened};

/// The sid bridge's stream routes answer only when the bridge is on, and only to a valid token.
fn sse_error(err: GatewayError) -> Response {
    err.route_response()
}

/// The sid bridge's task or context a stream is of.
enum Of<'a> {
    Task(&'a str),
    Context(&'a str),
}

/// Whether the caller may read the stream of `of`: the gate as for the call that streams it
/// (`tasks/resubscribe`, `contexts/events`), then tenancy (another caller's task or context is
/// not found). The refusal's answer when not.
async fn may_read(
    state: &AppState,
    of: Of<'_>,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Result<(), Response> {
    let method = match of {
        Of::Task(_) => "tasks/resubscribe",
        Of::Context(_) => "contexts/events",
    };
    let tenant = admitted(state, method, headers, extensions).await?;
    let Some(b) = state.gateway.bridge() else {
        return Ok(());
    };
    let tenant = tenant.as_deref();
    match of {
        Of::Task(id) => b.check_task(id, tenant).await,
        Of::Context(id) => b.check_context(id, tenant).await,
    }
    .map_err(sse_error)
}

/// Who may read a stream: `[auth]` and `[[rate_limits]]` as for a call of `method`; the
/// caller's tenant key (tenancy) when they let it in, the refusal otherwise.
async fn admitted(
    state: &AppState,
    method: &str,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Result<Option<Arc<str>>, Response> {
    match state
        .gateway
        .gate()
        .admit_request(method, headers, extensions)
        .await
    {
        Ok(identity) => Ok(identity.caller().map(|c| c.tenant.clone())),
        Err(e) => Err(crate::auth::refusal::refusal_response(&e)),
    }
}

pub(super) async fn task_events(
    State(state): State<AppState>,
    Path(task_id): Path<String>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Response {
    if let Err(refused) = may_read(&state, Of::Task(&task_id), &headers, &extensions).await {
        return refused;
    }
    let not_found = GatewayError::TaskNotFound(task_id.clone());
    if let Some(local) = bridge_stream(&state, &headers, not_found, |b, last| {
        b.task_stream(&task_id, last, false)
    }) {
        return local;
    }
    // A task another replica runs (`[cluster]`).
    let Some(bridge) = state.gateway.bridge() else {
        return sse_error(GatewayError::TaskNotFound(task_id));
    };
    let opened = bridge
        .open_task_stream(&task_id, header_str(&headers, &LAST_EVENT_ID), false)
        .await;
    answer(bridge, opened)
}

pub(super) async fn context_events(
    State(state): State<AppState>,
    Path(context_id): Path<String>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Response {
    if let Err(refused) = may_read(&state, Of::Context(&context_id), &headers, &extensions).await {
        return refused;
    }
    let not_found = GatewayError::ContextNotFound(context_id.clone());
    if let Some(local) = bridge_stream(&state, &headers, not_found, |b, last| {
        b.context_stream(&context_id, last)
    }) {
        return local;
    }
    let Some(bridge) = state.gateway.bridge() else {
        return sse_error(GatewayError::ContextNotFound(context_id));
    };
    let opened = bridge
        .open_context_stream(&context_id, header_str(&headers, &LAST_EVENT_ID))
        .await;
    answer(bridge, opened)
}

/// Authorises, opens a bridge stream, and answers it as SSE (or the error as JSON); `None` when
/// the stream is not this replica's and another replica's may be read from Redis, which only
/// the async route can do.
fn bridge_stream(
    state: &AppState,
    headers: &HeaderMap,
    without_bridge: GatewayError,
    open: impl FnOnce(&Bridge, Option<&str>) -> Result<Opened, GatewayError>,
) -> Option<Response> {
    let Some(bridge) = state.gateway.bridge() else {
        return Some(sse_error(without_bridge));
    };
    let opened = bridge
        .authorize(header_str(headers, &header::AUTHORIZATION))
        .and_then(|()| open(bridge, header_str(headers, &LAST_EVENT_ID)));
    let elsewhere = matches!(
        opened,
        Err(GatewayError::TaskNotFound(_) | GatewayError::ContextNotFound(_))
    ) && bridge.is_clustered();
    (!elsewhere).then(|| answer(bridge, opened))
}

/// An opened bridge stream as SSE, or the error as JSON.
fn answer(bridge: &Bridge, opened: Result<Opened, GatewayError>) -> Response {
    match opened {
        Ok(o) => sse_stream::response(sse_stream::frames(
            o.subscription,
            o.filter,
            bridge.timing(),
            None,
            sse_stream::Shared,
        )),
        Err(e) => sse_error(e),
    }
}

/// `GET /events?taskId=`.
#[derive(Debug, serde::Deserialize)]
pub(super) struct EventsQuery {
    #[serde(rename = "taskId")]
    task_id: Option<String>,
}

pub(super) async fn domain_events(
    State(state): State<AppState>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Response {
    if let Err(refused) = admitted(&state, "events", &headers, &extensions).await {
        return refused;
    }
    domain_stream(&state, q.task_id, &headers)
}

/// `GET /events`: the domain-event feed as SSE, filtered to one task when asked.
fn domain_stream(state: &AppState, task: Option<String>, headers: &HeaderMap) -> Response {
    let Some(feed) = state.gateway.feed() else {
        return not_configured("no event feed is configured (events.source)");
    };
    let sub = feed.queue().subscribe(header_str(headers, &LAST_EVENT_ID));
    let filter = sse_stream::Filter {
        task,
        ..Default::default()
    };
    match sub {
        Ok(sub) => sse_stream::response(sse_stream::frames(
            sub,
            filter,
            state.events_timing,
            None,
            sse_stream::Shared,
        )),
        Err(e) => sse_error(e.into()),
    }
}

/// The answer of an event-stream route (`/events`, `/tasks/{id}/events`,
/// `/contexts/{id}/events`) to a `GET` of `uri`, for [`sse_conn`]; `None` for any other target,
/// or one the router would read differently (a percent-encoded id, a query it would refuse).
/// Behind a gate that is not open, every stream is the router's: who asks is decided there.
///
/// [`sse_conn`]: crate::http::sse_conn
pub(super) fn stream_route(
    state: &AppState,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
) -> Option<Response> {
    if state.gateway.is_gated() {
        return None;
    }
    let path = uri.path();
    if path == "/events" {
        let Query(q) = Query::<EventsQuery>::try_from_uri(uri).ok()?;
        return Some(domain_stream(state, q.task_id, headers));
    }
    let plain = |id: &str| !id.is_empty() && !id.contains(['/', '%']);
    if let Some(id) = path
        .strip_prefix("/tasks/")
        .and_then(|r| r.strip_suffix("/events"))
        .filter(|id| plain(id))
    {
        return bridge_stream(
            state,
            headers,
            GatewayError::TaskNotFound(id.to_owned()),
            |b, last| b.task_stream(id, last, false),
        );
    }
    let id = path
        .strip_prefix("/contexts/")
        .and_then(|r| r.strip_suffix("/events"))
        .filter(|id| plain(id))?;
    bridge_stream(
        state,
        headers,
        GatewayError::ContextNotFound(id.to_owned()),
        |b, last| b.context_stream(id, last),
    )
}
