//! Failures on the request path, and the one place they become wire errors.
//!
//! Every failure the contract names is one variant. [`GatewayError::to_jsonrpc`],
//! [`GatewayError::to_legacy`] and [`GatewayError::status`] are the only code that turns a
//! failure into an error body and an HTTP status, for either dialect.

use axum::http::StatusCode;
use serde_json::json;

use crate::wire::jsonrpc::{code, ErrorObject};
use crate::wire::legacy::{code as lc, LegacyError};

/// A failure while serving one call.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GatewayError {
    /// The body is larger than `server.max_body_bytes`.
    #[error("request body exceeds {limit} bytes")]
    PayloadTooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The body could not be read as HTTP framed it (a malformed chunk size, an oversized chunk
    /// extension or trailer): the client's fault, unlike a body that is merely too large.
    #[error("the request body is malformed: {0}")]
    MalformedBody(String),
    /// The body did not arrive in time (`server.body_read_timeout_ms`).
    #[error("the request body did not arrive within {timeout_ms} ms")]
    BodyTimeout {
        /// The configured timeout.
        timeout_ms: u64,
    },
    /// The request's content type is not JSON.
    #[error("content type {0:?} is not supported; send application/json")]
    UnsupportedMediaType(String),
    /// No built-in method or route serves this method.
    #[error("Method not found: {0}")]
    MethodNotFound(String),
    /// The params cannot be expressed in the upstream's dialect.
    #[error("Invalid params: {0}")]
    InvalidParams(String),
    /// The upstream refused or reset the connection.
    #[error("upstream {upstream} is unreachable: {detail}")]
    UpstreamUnreachable {
        /// Upstream name.
        upstream: String,
        /// What the transport said.
        detail: String,
    },
    /// `max_concurrent` calls to the upstream are in flight: refused at once, those in flight
    /// unaffected.
    #[error("upstream {upstream} has its {limit} calls in flight ({key}); try again later")]
    UpstreamOverloaded {
        /// Upstream name.
        upstream: String,
        /// The configured limit.
        limit: usize,
        /// The key that sets it, `upstreams[N].max_concurrent`.
        key: String,
    },
    /// The upstream did not answer within its `timeout_ms`.
    #[error("upstream {upstream} did not answer within {timeout_ms} ms")]
    UpstreamTimeout {
        /// Upstream name.
        upstream: String,
        /// The configured timeout.
        timeout_ms: u64,
    },
    /// No task has this id (A2A TaskNotFound).
    #[error("task {0} not found")]
    TaskNotFound(String),
    /// No context has this id.
    #[error("context {0} not found")]
    ContextNotFound(String),
    /// The task is already finished (A2A TaskNotCancelable).
    #[error("task {id} cannot be canceled: it is {state}")]
    TaskNotCancelable {
        /// Task id.
        id: String,
        /// Its state.
        state: &'static str,
    },
    /// A raw op not on `sid.allow_ops`.
    #[error("Method not found: sid op {0:?} is not enabled; add it to sid.allow_ops to allow it")]
    SidOpNotAllowed(String),
    /// sid answered `busy`.
    #[error("sid is busy: {0}")]
    SidBusy(String),
    /// sid answered `stale_prompt`.
    #[error("sid refused a stale prompt answer: {0}")]
    SidStalePrompt(String),
    /// sid answered `invalid_request` (or another request-shape code).
    #[error("sid rejected the request: {0}")]
    SidRejected(String),
    /// sid failed without a code, or with one the gateway does not know.
    #[error("sid failed: {message}")]
    SidFailed {
        /// sid's code, when it gave one.
        code: Option<String>,
        /// sid's message (an s-expression for code-less failures).
        message: String,
    },
    /// `sid.max_contexts` contexts are running.
    #[error("all {0} sid contexts are in use; try again later")]
    TooManyContexts(usize),
    /// The caller already has `sid.max_contexts_per_caller` contexts.
    #[error("this caller already has its {0} sid contexts (sid.max_contexts_per_caller); continue one of them")]
    CallerContexts(usize),
    /// A stream already has its configured number of subscribers.
    #[error("this stream already has its {0} subscribers; try again later")]
    TooManySubscribers(usize),
    /// sid is not running or not reachable.
    #[error("sid is unavailable: {0}")]
    SidUnavailable(String),
    /// `cluster.redis` is set and Redis does not answer: the sid bridge's shared log and task
    /// state cannot be written or read, so sid calls and streams are refused rather than served
    /// with events other replicas would never see.
    #[error("the replicas' shared store is unavailable: {0}; retry when Redis is back")]
    ClusterUnavailable(String),
    /// The replica running a context (`[cluster]`) answered a call carried to it with this
    /// error: passed on unchanged.
    #[error("{message}")]
    Replica {
        /// Its JSON-RPC code.
        code: i64,
        /// Its message.
        message: String,
        /// Its `data`.
        data: Option<serde_json::Value>,
        /// The HTTP status it answered with.
        status: u16,
    },
    /// A bearer token is required and was not given, or is wrong.
    #[error("a valid bearer token is required")]
    Unauthorized,
    /// `[auth]`: no credential where one is required (`sent` false), or one that is not valid
    /// (`reason` says why, without the credential).
    #[error("{}", match sent { true => format!("the credential is not valid: {reason}"), false => "a credential is required (a bearer JWT, an API key or a client certificate)".to_owned() })]
    Unauthenticated {
        /// Whether a credential was sent.
        sent: bool,
        /// Why it was refused.
        reason: String,
    },
    /// `[auth]`: the caller is known and no `allow` entry of the route lets it call this.
    #[error("the caller may not call {0}")]
    Forbidden(String),
    /// A rate limit (`[[rate_limits]]`) is spent for this caller.
    #[error("rate limited by {limit:?}: try again in {retry_after_ms} ms")]
    RateLimited {
        /// The limit's name.
        limit: String,
        /// When a call would pass.
        retry_after_ms: u64,
        /// Its `RateLimit-Policy` header value.
        policy: String,
    },
    /// A streaming method inside a batch, or from a legacy client.
    #[error("Invalid Request: {0} answers a stream; send it alone, as a single JSON-RPC request")]
    StreamingCall(String),
    /// An admin route was asked for from off loopback while `server.admin_tokens` is empty.
    #[error("admin routes answer loopback clients only; set server.admin_tokens to allow others")]
    AdminForbidden,
    /// A2A: the gateway sends no push notifications.
    #[error("push notifications are not supported; stream the task (SendStreamingMessage) or poll it (GetTask)")]
    PushNotificationNotSupported,
    /// A2A: an operation the gateway does not offer over sid.
    #[error("unsupported operation: {0}")]
    UnsupportedOperation(String),
    /// A2A: a part or output mode sid cannot read or write.
    #[error("content type not supported: {0}")]
    ContentTypeNotSupported(String),
    /// A2A: there is no extended agent card.
    #[error("no extended agent card is configured; the public card is all there is")]
    ExtendedCardNotConfigured,
    /// A2A: the `A2A-Version` header names a version the gateway does not speak.
    #[error("A2A version {0:?} is not supported; send A2A-Version 1.0 or 0.3")]
    VersionNotSupported(String),
    /// A stream was cut before its task ended.
    #[error("the stream was cut: {0}")]
    StreamCut(String),
    /// The upstream answered something that is not a valid envelope of its dialect.
    #[error("upstream {upstream} sent an invalid {dialect} envelope (HTTP {status}): {detail}")]
    UpstreamBadEnvelope {
        /// Upstream name.
        upstream: String,
        /// The upstream's dialect.
        dialect: &'static str,
        /// The upstream's HTTP status.
        status: u16,
        /// What was wrong.
        detail: String,
    },
}

impl GatewayError {
    /// The HTTP status a single call failing this way is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            GatewayError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            GatewayError::MalformedBody(_) => StatusCode::BAD_REQUEST,
            GatewayError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            GatewayError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            GatewayError::MethodNotFound(_) | GatewayError::InvalidParams(_) => StatusCode::OK,
            GatewayError::UpstreamUnreachable { .. } | GatewayError::UpstreamBadEnvelope { .. } => {
                StatusCode::BAD_GATEWAY
            }
            GatewayError::UpstreamTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            GatewayError::UpstreamOverloaded { .. } => StatusCode::SERVICE_UNAVAILABLE,
            GatewayError::TaskNotFound(_)
            | GatewayError::ContextNotFound(_)
            | GatewayError::TaskNotCancelable { .. }
            | GatewayError::SidOpNotAllowed(_)
            | GatewayError::SidBusy(_)
            | GatewayError::SidStalePrompt(_)
            | GatewayError::SidRejected(_)
            | GatewayError::SidFailed { .. } => StatusCode::OK,
            GatewayError::StreamingCall(_) => StatusCode::BAD_REQUEST,
            GatewayError::TooManyContexts(_) | GatewayError::TooManySubscribers(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            GatewayError::CallerContexts(_) => StatusCode::TOO_MANY_REQUESTS,
            GatewayError::SidUnavailable(_) => StatusCode::BAD_GATEWAY,
            GatewayError::ClusterUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            GatewayError::Replica { status, .. } => {
                StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_GATEWAY)
            }
            GatewayError::Unauthorized | GatewayError::Unauthenticated { .. } => {
                StatusCode::UNAUTHORIZED
            }
            GatewayError::AdminForbidden | GatewayError::Forbidden(_) => StatusCode::FORBIDDEN,
            GatewayError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            GatewayError::PushNotificationNotSupported
            | GatewayError::UnsupportedOperation(_)
            | GatewayError::ContentTypeNotSupported(_)
            | GatewayError::ExtendedCardNotConfigured
            | GatewayError::VersionNotSupported(_)
            | GatewayError::StreamCut(_) => StatusCode::OK,
        }
    }

    /// The status when the failure answers a plain HTTP route (an SSE stream) rather than a
    /// JSON-RPC call: there a 200 would read as a stream, so what is not found is a 404.
    pub fn route_status(&self) -> StatusCode {
        match self {
            GatewayError::TaskNotFound(_) | GatewayError::ContextNotFound(_) => {
                StatusCode::NOT_FOUND
            }
            _ => self.status(),
        }
    }

    /// The JSON-RPC error code.
    pub fn jsonrpc_code(&self) -> i64 {
        match self {
            GatewayError::PayloadTooLarge { .. }
            | GatewayError::UnsupportedMediaType(_)
            | GatewayError::BodyTimeout { .. } => code::INVALID_REQUEST,
            GatewayError::MalformedBody(_) => code::PARSE_ERROR,
            GatewayError::MethodNotFound(_) => code::METHOD_NOT_FOUND,
            GatewayError::InvalidParams(_) => code::INVALID_PARAMS,
            GatewayError::UpstreamUnreachable { .. } | GatewayError::UpstreamOverloaded { .. } => {
                code::UPSTREAM_UNREACHABLE
            }
            GatewayError::UpstreamTimeout { .. } => code::UPSTREAM_TIMEOUT,
            GatewayError::UpstreamBadEnvelope { .. } => code::UPSTREAM_BAD_ENVELOPE,
            GatewayError::TaskNotFound(_) | GatewayError::ContextNotFound(_) => {
                code::TASK_NOT_FOUND
            }
            GatewayError::TaskNotCancelable { .. } => code::TASK_NOT_CANCELABLE,
            GatewayError::SidOpNotAllowed(_) => code::METHOD_NOT_FOUND,
            GatewayError::SidBusy(_) => code::SID_BUSY,
            GatewayError::SidStalePrompt(_) => code::SID_STALE_PROMPT,
            GatewayError::SidRejected(_) => code::INVALID_PARAMS,
            GatewayError::SidFailed { .. } => code::SID_FAILED,
            GatewayError::TooManyContexts(_)
            | GatewayError::TooManySubscribers(_)
            | GatewayError::CallerContexts(_) => code::SID_CAPACITY,
            GatewayError::SidUnavailable(_) => code::SID_UNAVAILABLE,
            GatewayError::ClusterUnavailable(_) => code::CLUSTER_UNAVAILABLE,
            GatewayError::Replica { code, .. } => *code,
            GatewayError::Unauthorized | GatewayError::AdminForbidden => code::UNAUTHORIZED,
            GatewayError::Unauthenticated { .. } => code::UNAUTHENTICATED,
            GatewayError::Forbidden(_) => code::FORBIDDEN,
            GatewayError::RateLimited { .. } => code::RATE_LIMITED,
            GatewayError::StreamingCall(_) => code::INVALID_REQUEST,
            GatewayError::PushNotificationNotSupported => code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            GatewayError::UnsupportedOperation(_) => code::UNSUPPORTED_OPERATION,
            GatewayError::ContentTypeNotSupported(_) => code::CONTENT_TYPE_NOT_SUPPORTED,
            GatewayError::ExtendedCardNotConfigured => code::EXTENDED_CARD_NOT_CONFIGURED,
            GatewayError::VersionNotSupported(_) => code::VERSION_NOT_SUPPORTED,
            GatewayError::StreamCut(_) => code::INTERNAL_ERROR,
        }
    }

    fn legacy_code(&self) -> &'static str {
        match self {
            GatewayError::PayloadTooLarge { .. }
            | GatewayError::MalformedBody(_)
            | GatewayError::BodyTimeout { .. }
            | GatewayError::UnsupportedMediaType(_)
            | GatewayError::InvalidParams(_) => lc::VALIDATION_ERROR,
            GatewayError::MethodNotFound(_) => lc::OPERATION_NOT_FOUND,
            GatewayError::UpstreamUnreachable { .. } | GatewayError::UpstreamOverloaded { .. } => {
                lc::UPSTREAM_UNAVAILABLE
            }
            GatewayError::UpstreamTimeout { .. } => lc::UPSTREAM_TIMEOUT,
            GatewayError::UpstreamBadEnvelope { .. } => lc::UPSTREAM_BAD_RESPONSE,
            GatewayError::TaskNotFound(_) | GatewayError::ContextNotFound(_) => lc::NOT_FOUND,
            GatewayError::TaskNotCancelable { .. }
            | GatewayError::SidBusy(_)
            | GatewayError::SidStalePrompt(_) => lc::INVALID_STATE,
            GatewayError::SidOpNotAllowed(_) => lc::OPERATION_NOT_FOUND,
            GatewayError::SidRejected(_) | GatewayError::StreamingCall(_) => lc::VALIDATION_ERROR,
            GatewayError::SidFailed { .. } => lc::INTERNAL_ERROR,
            GatewayError::TooManyContexts(_)
            | GatewayError::TooManySubscribers(_)
            | GatewayError::SidUnavailable(_)
            | GatewayError::ClusterUnavailable(_) => lc::UPSTREAM_UNAVAILABLE,
            GatewayError::Unauthorized
            | GatewayError::AdminForbidden
            | GatewayError::Unauthenticated { .. } => lc::AUTH_ERROR,
            GatewayError::Forbidden(_) => lc::FORBIDDEN,
            GatewayError::RateLimited { .. } | GatewayError::CallerContexts(_) => lc::RATE_LIMITED,
            GatewayError::PushNotificationNotSupported
            | GatewayError::UnsupportedOperation(_)
            | GatewayError::ExtendedCardNotConfigured => lc::OPERATION_NOT_FOUND,
            GatewayError::ContentTypeNotSupported(_) | GatewayError::VersionNotSupported(_) => {
                lc::VALIDATION_ERROR
            }
            GatewayError::StreamCut(_) | GatewayError::Replica { .. } => lc::INTERNAL_ERROR,
        }
    }

    /// A short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            GatewayError::PayloadTooLarge { .. } => "payload_too_large",
            GatewayError::MalformedBody(_) => "malformed_body",
            GatewayError::BodyTimeout { .. } => "body_timeout",
            GatewayError::UnsupportedMediaType(_) => "unsupported_media_type",
            GatewayError::MethodNotFound(_) => "method_not_found",
            GatewayError::InvalidParams(_) => "invalid_params",
            GatewayError::UpstreamUnreachable { .. } => "upstream_unreachable",
            GatewayError::UpstreamOverloaded { .. } => "upstream_overloaded",
            GatewayError::UpstreamTimeout { .. } => "upstream_timeout",
            GatewayError::UpstreamBadEnvelope { .. } => "upstream_bad_envelope",
            GatewayError::TaskNotFound(_) => "task_not_found",
            GatewayError::ContextNotFound(_) => "context_not_found",
            GatewayError::TaskNotCancelable { .. } => "task_not_cancelable",
            GatewayError::SidOpNotAllowed(_) => "sid_op_not_allowed",
            GatewayError::SidBusy(_) => "sid_busy",
            GatewayError::SidStalePrompt(_) => "sid_stale_prompt",
            GatewayError::SidRejected(_) => "sid_rejected",
            GatewayError::SidFailed { .. } => "sid_failed",
            GatewayError::TooManyContexts(_) => "sid_capacity",
            GatewayError::CallerContexts(_) => "caller_contexts",
            GatewayError::TooManySubscribers(_) => "too_many_subscribers",
            GatewayError::SidUnavailable(_) => "sid_unavailable",
            GatewayError::ClusterUnavailable(_) => "cluster_unavailable",
            GatewayError::Replica { .. } => "replica",
            GatewayError::Unauthorized => "unauthorized",
            GatewayError::AdminForbidden => "admin_forbidden",
            GatewayError::Unauthenticated { .. } => "unauthenticated",
            GatewayError::Forbidden(_) => "forbidden",
            GatewayError::RateLimited { .. } => "rate_limited",
            GatewayError::StreamingCall(_) => "streaming_call",
            GatewayError::PushNotificationNotSupported => "push_notification_not_supported",
            GatewayError::UnsupportedOperation(_) => "unsupported_operation",
            GatewayError::ContentTypeNotSupported(_) => "content_type_not_supported",
            GatewayError::ExtendedCardNotConfigured => "extended_card_not_configured",
            GatewayError::VersionNotSupported(_) => "version_not_supported",
            GatewayError::StreamCut(_) => "stream_cut",
        }
    }

    fn upstream(&self) -> Option<&str> {
        match self {
            GatewayError::UpstreamUnreachable { upstream, .. }
            | GatewayError::UpstreamOverloaded { upstream, .. }
            | GatewayError::UpstreamTimeout { upstream, .. }
            | GatewayError::UpstreamBadEnvelope { upstream, .. } => Some(upstream),
            _ => None,
        }
    }

    /// The JSON-RPC error object.
    pub fn to_jsonrpc(&self) -> ErrorObject {
        let e = ErrorObject::new(self.jsonrpc_code(), self.to_string());
        match (self.upstream(), self) {
            (Some(u), _) => e.with_data(json!({"upstream": u, "kind": self.kind()})),
            (None, GatewayError::SidFailed { code, message }) => {
                e.with_data(json!({"kind": self.kind(), "sidCode": code, "sidMessage": message}))
            }
            (None, GatewayError::Replica { data: Some(d), .. }) => e.with_data(d.clone()),
            (
                None,
                GatewayError::RateLimited {
                    limit,
                    retry_after_ms,
                    ..
                },
            ) => e.with_data(
                json!({"kind": self.kind(), "limit": limit, "retryAfterMs": retry_after_ms}),
            ),
            (None, _) => e.with_data(json!({"kind": self.kind()})),
        }
    }

    /// The answer of a plain HTTP route (an event stream, an admin page) refused this way: the
    /// route's status and a JSON-RPC error body with a null id.
    pub fn route_response(&self) -> axum::response::Response {
        use axum::response::IntoResponse;
        let body = crate::wire::jsonrpc::Response::error(
            crate::wire::jsonrpc::Id::Null,
            self.to_jsonrpc(),
        );
        (self.route_status(), axum::Json(body)).into_response()
    }

    /// The legacy error.
    pub fn to_legacy(&self) -> LegacyError {
        let mut e = LegacyError::new(self.legacy_code(), self.to_string());
        if let Some(u) = self.upstream() {
            e.details = Some(json!({"upstream": u, "kind": self.kind()}));
        }
        if let GatewayError::RateLimited {
            limit,
            retry_after_ms,
            ..
        } = self
        {
            e.details = Some(json!({"limit": limit, "retry_after_ms": retry_after_ms}));
        }
        e
    }
}
