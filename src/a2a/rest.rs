//! The HTTP+JSON (REST) binding of A2A 1.0 (spec §11), at [`A2A_REST`](crate::http::routes::A2A_REST), over the same task model
//! and the same calls as JSON-RPC: only the framing differs. Requests are the protobuf JSON
//! objects as bodies (POST) or camelCase query parameters (GET, DELETE); answers are the bare
//! result objects; streams are SSE whose `data:` is a bare `StreamResponse`; errors are HTTP
//! statuses per spec §5.4 with an AIP-193 body carrying a `google.rpc.ErrorInfo` in `details`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, Method as HttpMethod, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Map, Value};

use super::{errors, shapes, Method, PushOp, SpecCall, Version, VERSION_HEADER};
use crate::auth::gate::Gate;
use crate::auth::refusal::refusal_headers;
use crate::model::error::GatewayError;
use crate::sid::Bridge;
use crate::telemetry::{self, CallLabels};

/// The HTTP status of a failure answered over REST (spec §5.4 for A2A's own errors).
pub(crate) fn status(e: &GatewayError) -> StatusCode {
    match e {
        GatewayError::TaskNotFound(_) | GatewayError::ContextNotFound(_) => StatusCode::NOT_FOUND,
        GatewayError::MethodNotFound(_) | GatewayError::SidOpNotAllowed(_) => StatusCode::NOT_FOUND,
        GatewayError::TaskNotCancelable { .. }
        | GatewayError::SidBusy(_)
        | GatewayError::SidStalePrompt(_) => StatusCode::CONFLICT,
        GatewayError::ContentTypeNotSupported(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        GatewayError::InvalidParams(_)
        | GatewayError::SidRejected(_)
        | GatewayError::PushNotificationNotSupported
        | GatewayError::UnsupportedOperation(_)
        | GatewayError::ExtendedCardNotConfigured
        | GatewayError::VersionNotSupported(_)
        | GatewayError::StreamingCall(_) => StatusCode::BAD_REQUEST,
        GatewayError::SidFailed { .. } => StatusCode::BAD_GATEWAY,
        GatewayError::StreamCut(_) => StatusCode::INTERNAL_SERVER_ERROR,
        other => other.status(),
    }
}

/// google.rpc.Code's name for a status (AIP-193's `error.status`).
fn canonical(e: &GatewayError, s: StatusCode) -> &'static str {
    match (e, s.as_u16()) {
        (
            GatewayError::UnsupportedOperation(_)
            | GatewayError::PushNotificationNotSupported
            | GatewayError::VersionNotSupported(_),
            _,
        ) => "UNIMPLEMENTED",
        (GatewayError::ExtendedCardNotConfigured, _) => "FAILED_PRECONDITION",
        (_, 400 | 413 | 415) => "INVALID_ARGUMENT",
        (_, 401) => "UNAUTHENTICATED",
        (_, 403) => "PERMISSION_DENIED",
        (_, 404) => "NOT_FOUND",
        (_, 408 | 504) => "DEADLINE_EXCEEDED",
        (_, 409) => "FAILED_PRECONDITION",
        (_, 502 | 503) => "UNAVAILABLE",
        _ => "INTERNAL",
    }
}

/// The AIP-193 error body.
pub(crate) fn error_body(e: &GatewayError) -> Value {
    let s = status(e);
    json!({"error": {
        "code": s.as_u16(),
        "status": canonical(e, s),
        "message": e.to_string(),
        "details": [errors::error_info(e)],
    }})
}

fn error_response(e: &GatewayError) -> Response {
    let mut resp = (status(e), axum::Json(error_body(e))).into_response();
    refusal_headers(resp.headers_mut(), e);
    resp
}

/// The router served under [`A2A_REST`](crate::http::routes::A2A_REST).
/// It serves with the A2A service and the sid bridge; without either (`a2a.enabled` or
/// `sid.enabled` off) it refuses every request.
/// Its calls pass `gate` (`[auth]`, `[[rate_limits]]`) as the JSON-RPC binding's do.
pub(crate) fn router(
    a2a: Option<Arc<super::A2a>>,
    bridge: Option<Arc<Bridge>>,
    gate: Arc<Gate>,
) -> axum::Router {
    axum::Router::new()
        .fallback(handle)
        .with_state(Served { a2a, bridge, gate })
}

/// What [`router`] serves with.
#[derive(Clone)]
struct Served {
    a2a: Option<Arc<super::A2a>>,
    bridge: Option<Arc<Bridge>>,
    gate: Arc<Gate>,
}

/// What a request asks, once its path is read.
enum Call {
    Unary(Method, Value),
    Stream(Method, Value),
}

fn bad(m: impl Into<String>) -> GatewayError {
    GatewayError::InvalidParams(m.into())
}

fn body_json(body: &Bytes) -> Result<Value, GatewayError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v @ Value::Object(_)) => Ok(shapes::proto_names(v)),
        Ok(_) => Err(bad("the body must be a JSON object")),
        Err(e) => Err(bad(format!("the body is not JSON: {e}"))),
    }
}

/// Query parameters as params: numbers and booleans where the field is one.
fn query_params(uri: &Uri) -> Result<Map<String, Value>, GatewayError> {
    let Query(q): Query<HashMap<String, String>> =
        Query::try_from_uri(uri).map_err(|e| bad(format!("bad query: {e}")))?;
    let mut out = Map::new();
    for (k, v) in q {
        let key = match shapes::proto_names(json!({ k: 0 })) {
            Value::Object(m) => m.keys().next().cloned().unwrap_or_default(),
            _ => continue,
        };
        let value = match key.as_str() {
            "pageSize" | "historyLength" => match v.parse::<i64>() {
                Ok(n) => json!(n),
                Err(_) => return Err(bad(format!("{key} must be a number, not {v:?}"))),
            },
            "includeArtifacts" => match v.as_str() {
                "true" => json!(true),
                "false" => json!(false),
                _ => return Err(bad(format!("{key} must be true or false"))),
            },
            _ => json!(v),
        };
        out.insert(key, value);
    }
    Ok(out)
}

/// Reads a request's path and method into a call.
fn route(m: &HttpMethod, uri: &Uri, body: &Bytes) -> Result<Call, GatewayError> {
    let path = uri.path().trim_end_matches('/');
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let not_found =
        || GatewayError::MethodNotFound(format!("{m} {}{path}", crate::http::routes::A2A_REST));
    let with = |mut p: Map<String, Value>, k: &str, v: &str| {
        p.insert(k.into(), json!(v));
        Value::Object(p)
    };
    Ok(match (m, segs.as_slice()) {
        (&HttpMethod::POST, ["message:send"]) => Call::Unary(Method::Send, body_json(body)?),
        (&HttpMethod::POST, ["message:stream"]) => Call::Stream(Method::Stream, body_json(body)?),
        (&HttpMethod::GET, ["tasks"]) => {
            Call::Unary(Method::ListTasks, Value::Object(query_params(uri)?))
        }
        (_, ["tasks", one]) => match (m, one.split_once(':')) {
            (&HttpMethod::GET, None) => {
                Call::Unary(Method::Get, with(query_params(uri)?, "id", one))
            }
            (&HttpMethod::POST, Some((id, "cancel"))) => {
                Call::Unary(Method::Cancel, with(Map::new(), "id", id))
            }
            (&HttpMethod::POST | &HttpMethod::GET, Some((id, "subscribe"))) => {
                Call::Stream(Method::Subscribe, with(Map::new(), "id", id))
            }
            _ => return Err(not_found()),
        },
        (&HttpMethod::POST, ["tasks", id, "pushNotificationConfigs"]) => {
            let Value::Object(b) = body_json(body)? else {
                unreachable!("body_json answers objects")
            };
            Call::Unary(Method::Push(PushOp::Create), with(b, "taskId", id))
        }
        (&HttpMethod::GET, ["tasks", id, "pushNotificationConfigs"]) => Call::Unary(
            Method::Push(PushOp::List),
            with(query_params(uri)?, "taskId", id),
        ),
        (&HttpMethod::GET, ["tasks", id, "pushNotificationConfigs", cfg]) => {
            Call::Unary(Method::Push(PushOp::Get), with(with_map(id), "id", cfg))
        }
        (&HttpMethod::DELETE, ["tasks", id, "pushNotificationConfigs", cfg]) => {
            Call::Unary(Method::Push(PushOp::Delete), with(with_map(id), "id", cfg))
        }
        (&HttpMethod::GET, ["extendedAgentCard"]) => Call::Unary(Method::ExtendedCard, json!({})),
        _ => return Err(not_found()),
    })
}

fn with_map(task: &str) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("taskId".into(), json!(task));
    m
}

async fn handle(
    State(served): State<Served>,
    method: HttpMethod,
    uri: Uri,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
    body: Bytes,
) -> Response {
    let started = Instant::now();
    let (Some(a2a), Some(bridge)) = (served.a2a.as_deref(), served.bridge.as_ref()) else {
        return error_response(&GatewayError::MethodNotFound(
            "the A2A REST binding needs sid.enabled and a2a.enabled".into(),
        ));
    };
    let header = |h: &str| headers.get(h).and_then(|v| v.to_str().ok());
    let label = format!("REST {method} {}", uri.path());
    let answer = async {
        bridge.authorize(header(header::AUTHORIZATION.as_str()))?;
        if let Some(v) = header(VERSION_HEADER)
            .map(str::trim)
            .filter(|v| !v.is_empty())
        {
            if Version::parse(v) != Some(Version::V1_0) {
                return Err(GatewayError::VersionNotSupported(
                    v.chars().take(32).collect(),
                ));
            }
        }
        let version = Version::V1_0;
        let call = route(&method, &uri, &body)?;
        let m = match &call {
            Call::Unary(m, _) | Call::Stream(m, _) => *m,
        };
        let identity = served
            .gate
            .admit_request(m.v1_0_name(), &headers, &extensions)
            .await?;
        let asker = super::Asker {
            tenant: identity.caller().map(|c| &*c.tenant),
            host: header(header::HOST.as_str()),
            https: served.gate.over_tls(
                extensions
                    .get::<crate::http::client_ip::OverTls>()
                    .is_some(),
                extensions
                    .get::<crate::auth::admin::Peer>()
                    .map(|p| p.0.ip()),
                &crate::http::headers::Headers::Map(&headers),
            ),
        };
        match call {
            Call::Unary(m, p) => {
                let r = a2a
                    .call_value(SpecCall { version, method: m }, p, asker)
                    .await?;
                Ok((StatusCode::OK, axum::Json(r)).into_response())
            }
            Call::Stream(m, p) => {
                let last = header("last-event-id");
                let s = a2a
                    .open_value(SpecCall { version, method: m }, None, p, last, asker)
                    .await?;
                let o = s.opened;
                let frames = crate::events::frames::frames(
                    o.subscription,
                    o.filter,
                    bridge.timing(),
                    Some(s.prelude),
                    s.encoder,
                );
                Ok(crate::events::frames::response(frames))
            }
        }
    }
    .await;
    telemetry::record_call(
        CallLabels {
            client_dialect: "a2a-1.0-rest",
            upstream: "sid",
            method: if answer.is_ok() { "rest" } else { &label },
            outcome: answer.as_ref().map_or_else(|e| e.kind(), |_| "ok"),
        },
        started.elapsed(),
    );
    answer.unwrap_or_else(|e| error_response(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(m: HttpMethod, uri: &str, body: &str) -> Result<(bool, Method, Value), GatewayError> {
        let uri: Uri = uri.parse().unwrap();
        route(&m, &uri, &Bytes::from(body.to_owned())).map(|c| match c {
            Call::Unary(m, p) => (false, m, p),
            Call::Stream(m, p) => (true, m, p),
        })
    }

    #[test]
    fn paths_map_to_the_calls_of_the_json_rpc_binding() {
        let (s, m, p) = call(HttpMethod::POST, "/message:send", r#"{"message":{}}"#).unwrap();
        assert!(!s && m == Method::Send && p == json!({"message": {}}));
        assert!(call(HttpMethod::POST, "/message:stream", "").unwrap().0);
        let (_, m, p) = call(HttpMethod::GET, "/tasks/t1?historyLength=2", "").unwrap();
        assert_eq!(
            (m, p),
            (Method::Get, json!({"id": "t1", "historyLength": 2}))
        );
        let (_, m, p) = call(
            HttpMethod::GET,
            "/tasks?contextId=c&pageSize=5&includeArtifacts=true&status=working",
            "",
        )
        .unwrap();
        assert_eq!(m, Method::ListTasks);
        assert_eq!(
            p,
            json!({"contextId": "c", "pageSize": 5, "includeArtifacts": true, "status": "working"})
        );
        let (_, m, p) = call(HttpMethod::POST, "/tasks/t1:cancel", "").unwrap();
        assert_eq!((m, p), (Method::Cancel, json!({"id": "t1"})));
        let (s, m, _) = call(HttpMethod::POST, "/tasks/t1:subscribe", "").unwrap();
        assert!(s && m == Method::Subscribe);
        let (_, m, p) = call(
            HttpMethod::POST,
            "/tasks/t1/pushNotificationConfigs",
            r#"{"url":"http://x"}"#,
        )
        .unwrap();
        assert_eq!(m, Method::Push(PushOp::Create));
        assert_eq!(p, json!({"url": "http://x", "taskId": "t1"}));
        let (_, m, p) = call(
            HttpMethod::DELETE,
            "/tasks/t1/pushNotificationConfigs/c1",
            "",
        )
        .unwrap();
        assert_eq!(m, Method::Push(PushOp::Delete));
        assert_eq!(p, json!({"taskId": "t1", "id": "c1"}));
        for (m, u, b) in [
            (HttpMethod::GET, "/message:send", ""),
            (HttpMethod::POST, "/tasks/t1:pause", ""),
            (HttpMethod::PUT, "/tasks/t1", ""),
        ] {
            assert!(
                matches!(call(m, u, b), Err(GatewayError::MethodNotFound(_))),
                "{u}"
            );
        }
        assert!(matches!(
            call(HttpMethod::GET, "/tasks?pageSize=many", ""),
            Err(GatewayError::InvalidParams(_))
        ));
        assert!(matches!(
            call(HttpMethod::POST, "/message:send", "[1]"),
            Err(GatewayError::InvalidParams(_))
        ));
    }

    #[test]
    fn errors_carry_the_spec_status_and_an_error_info() {
        let e = GatewayError::TaskNotFound("t9".into());
        assert_eq!(status(&e), StatusCode::NOT_FOUND);
        let b = error_body(&e);
        assert_eq!(b["error"]["code"], 404);
        assert_eq!(b["error"]["status"], "NOT_FOUND");
        assert_eq!(b["error"]["details"][0]["reason"], "TASK_NOT_FOUND");
        let c = GatewayError::TaskNotCancelable {
            id: "t".into(),
            state: "completed",
        };
        assert_eq!(status(&c), StatusCode::CONFLICT);
        assert_eq!(
            status(&GatewayError::ContentTypeNotSupported("x".into())),
            StatusCode::UNSUPPORTED_MEDIA_TYPE
        );
        assert_eq!(
            error_body(&GatewayError::UnsupportedOperation("x".into()))["error"]["status"],
            "UNIMPLEMENTED"
        );
    }
}
