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
    /// The upstream did not answer within its `timeout_ms`.
    #[error("upstream {upstream} did not answer within {timeout_ms} ms")]
    UpstreamTimeout {
        /// Upstream name.
        upstream: String,
        /// The configured timeout.
        timeout_ms: u64,
    },
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
            GatewayError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            GatewayError::MethodNotFound(_) | GatewayError::InvalidParams(_) => StatusCode::OK,
            GatewayError::UpstreamUnreachable { .. } | GatewayError::UpstreamBadEnvelope { .. } => {
                StatusCode::BAD_GATEWAY
            }
            GatewayError::UpstreamTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    /// The JSON-RPC error code.
    pub fn jsonrpc_code(&self) -> i64 {
        match self {
            GatewayError::PayloadTooLarge { .. } | GatewayError::UnsupportedMediaType(_) => {
                code::INVALID_REQUEST
            }
            GatewayError::MethodNotFound(_) => code::METHOD_NOT_FOUND,
            GatewayError::InvalidParams(_) => code::INVALID_PARAMS,
            GatewayError::UpstreamUnreachable { .. } => code::UPSTREAM_UNREACHABLE,
            GatewayError::UpstreamTimeout { .. } => code::UPSTREAM_TIMEOUT,
            GatewayError::UpstreamBadEnvelope { .. } => code::UPSTREAM_BAD_ENVELOPE,
        }
    }

    fn legacy_code(&self) -> &'static str {
        match self {
            GatewayError::PayloadTooLarge { .. }
            | GatewayError::UnsupportedMediaType(_)
            | GatewayError::InvalidParams(_) => lc::VALIDATION_ERROR,
            GatewayError::MethodNotFound(_) => lc::OPERATION_NOT_FOUND,
            GatewayError::UpstreamUnreachable { .. } => lc::UPSTREAM_UNAVAILABLE,
            GatewayError::UpstreamTimeout { .. } => lc::UPSTREAM_TIMEOUT,
            GatewayError::UpstreamBadEnvelope { .. } => lc::UPSTREAM_BAD_RESPONSE,
        }
    }

    /// A short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            GatewayError::PayloadTooLarge { .. } => "payload_too_large",
            GatewayError::UnsupportedMediaType(_) => "unsupported_media_type",
            GatewayError::MethodNotFound(_) => "method_not_found",
            GatewayError::InvalidParams(_) => "invalid_params",
            GatewayError::UpstreamUnreachable { .. } => "upstream_unreachable",
            GatewayError::UpstreamTimeout { .. } => "upstream_timeout",
            GatewayError::UpstreamBadEnvelope { .. } => "upstream_bad_envelope",
        }
    }

    fn upstream(&self) -> Option<&str> {
        match self {
            GatewayError::UpstreamUnreachable { upstream, .. }
            | GatewayError::UpstreamTimeout { upstream, .. }
            | GatewayError::UpstreamBadEnvelope { upstream, .. } => Some(upstream),
            _ => None,
        }
    }

    /// The JSON-RPC error object.
    pub fn to_jsonrpc(&self) -> ErrorObject {
        let e = ErrorObject::new(self.jsonrpc_code(), self.to_string());
        match self.upstream() {
            Some(u) => e.with_data(json!({"upstream": u, "kind": self.kind()})),
            None => e,
        }
    }

    /// The legacy error.
    pub fn to_legacy(&self) -> LegacyError {
        let mut e = LegacyError::new(self.legacy_code(), self.to_string());
        if let Some(u) = self.upstream() {
            e.details = Some(json!({"upstream": u, "kind": self.kind()}));
        }
        e
    }
}
