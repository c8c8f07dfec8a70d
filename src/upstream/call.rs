//! One call to one upstream: the pivot form every call is brought to ([`Call`]), and the
//! exchange in the upstream's dialect ([`forward`]) with its answer in JSON-RPC terms ([`Done`]).
//! The primary's exchange and a shadow's are the same.

use serde_json::value::RawValue;

use super::affinity::Who;
use super::{Hint, UpstreamClient};
use crate::config::Dialect;
use crate::model::a2a::SpecCall;
use crate::model::error::GatewayError;
use crate::wire::jsonrpc::{null_raw, Outcome, Response};
use crate::wire::legacy::{Auth, LegacyBody, LegacyResponse};
use crate::wire::translate::{self, ErrorTable};

/// The pivot form of one call, whatever dialect it arrived in.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub(crate) method: String,
    pub(crate) params: Option<Box<RawValue>>,
    /// The id sent upstream (legacy `request_id`, or the JSON-RPC id); never used for the answer.
    pub(crate) upstream_id: String,
    pub(crate) notification: bool,
    pub(crate) auth: Option<Auth>,
    /// The A2A version and operation, when the call speaks a published A2A version.
    pub(crate) spec: Option<SpecCall>,
}

/// A call's outcome in JSON-RPC terms, with what the upstream reported of its own time.
#[derive(Debug)]
pub(crate) struct Done {
    pub(crate) outcome: Outcome,
    pub(crate) timing_ms: Option<f64>,
}

/// One call to one upstream in that upstream's dialect, its answer brought to JSON-RPC terms:
/// the primary's exchange and a shadow's are the same.
/// `who` is the caller, for an upstream that balances by hash; `identity` the header naming the
/// verified caller (`auth.identity_header`).
pub(crate) async fn forward(
    up: &UpstreamClient,
    table: &ErrorTable,
    call: &Call,
    who: Option<&Who<'_>>,
    identity: Option<(&str, &str)>,
) -> Result<Done, GatewayError> {
    let hint = Hint {
        method: &call.method,
        who,
        identity,
    };
    match up.dialect() {
        Dialect::Legacy => to_legacy_upstream(up, table, call, hint).await,
        Dialect::Jsonrpc => to_jsonrpc_upstream(up, call, hint).await,
    }
}

async fn to_legacy_upstream(
    up: &UpstreamClient,
    table: &ErrorTable,
    call: &Call,
    hint: Hint<'_>,
) -> Result<Done, GatewayError> {
    // The envelope `translate::request_to_legacy` makes, written from the borrowed call.
    let empty;
    let params = match call.params.as_deref() {
        Some(p) => {
            translate::named_params(p).map_err(|e| GatewayError::InvalidParams(e.message))?;
            p
        }
        None => {
            empty = crate::wire::dialect::empty_object();
            &empty
        }
    };
    let body = crate::wire::legacy::request_bytes(
        crate::wire::legacy::VERSION,
        &call.upstream_id,
        &call.method,
        params,
        call.auth.as_ref(),
    );
    let answer = up.post(&body, None, hint).await?;
    let resp = LegacyResponse::from_json(&answer.body)
        .map_err(|e| up.bad_envelope(answer.status, e.to_string()))?;
    let timing_ms = resp.timing_ms;
    let outcome = match resp.body {
        LegacyBody::Success(data) => Outcome::Result(data.unwrap_or_else(null_raw)),
        LegacyBody::Error(e) => Outcome::Error(translate::error_to_jsonrpc(&e, table)),
    };
    Ok(Done { outcome, timing_ms })
}

async fn to_jsonrpc_upstream(
    up: &UpstreamClient,
    call: &Call,
    hint: Hint<'_>,
) -> Result<Done, GatewayError> {
    let body = crate::wire::jsonrpc::request_bytes(
        &call.method,
        call.params.as_deref(),
        (!call.notification).then_some(call.upstream_id.as_str()),
    );
    let authorization = call.auth.as_ref().and_then(Auth::to_header);
    let answer = up.post(&body, authorization.as_deref(), hint).await?;
    if call.notification {
        // Nothing is answered to a notification; the upstream's body, if any, is dropped.
        return Ok(Done {
            outcome: Outcome::Result(null_raw()),
            timing_ms: None,
        });
    }
    let resp = Response::from_json(&answer.body)
        .map_err(|e| up.bad_envelope(answer.status, e.to_string()))?;
    Ok(Done {
        outcome: resp.outcome,
        timing_ms: None,
    })
}
