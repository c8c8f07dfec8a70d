//! Calls in the legacy envelope: each answered in it, with `Deprecation` and `Sunset` when set.

use axum::http::{HeaderName, HeaderValue, StatusCode};

use crate::auth::gate::Identity;
use crate::http::reply::{json_reply, Reply};
use crate::upstream::call::Call;
use crate::wire::jsonrpc::{Id, Response};
use crate::wire::legacy::{LegacyRequest, LegacyResponse};
use crate::wire::translate;

use super::{Gateway, Meta};

impl Gateway {
    pub(super) async fn handle_legacy(&self, req: LegacyRequest, meta: &Meta<'_>) -> Reply {
        let request_id = req.request_id.clone();
        crate::http::scope::annotate(|s| s.set("rpc.jsonrpc.request_id", &request_id));
        // A legacy client carries its credential in the envelope: the gate reads it there when
        // the headers carried none.
        let from_envelope = match (meta.identity, &req.auth) {
            (Some(Identity::Anonymous), Some(auth)) => match auth.to_header() {
                Some(value) => Some(self.gate.identify_credential(value.as_bytes()).await),
                None => None,
            },
            _ => None,
        };
        let meta = &Meta {
            identity: from_envelope.as_ref().or(meta.identity),
            ..*meta
        };
        let call = Call {
            method: req.operation,
            params: Some(req.params),
            upstream_id: req.request_id,
            notification: false,
            // A credential the gate verified and strips goes no further, wherever it came.
            auth: match self.strips(meta) {
                true => None,
                false => req.auth,
            },
            spec: None,
        };
        match self.dispatch(call, "legacy", meta).await {
            Ok(done) => {
                let resp = Response {
                    id: Id::Null,
                    outcome: done.outcome,
                };
                let mut legacy = translate::response_to_legacy(resp, request_id, &self.table);
                legacy.timing_ms = done.timing_ms;
                self.legacy_reply(StatusCode::OK, &legacy, done.timing_ms)
            }
            Err(e) => self.legacy_reply(
                e.status(),
                &LegacyResponse::error(request_id, e.to_legacy()),
                None,
            ),
        }
    }

    pub(super) fn legacy_reply(
        &self,
        status: StatusCode,
        resp: &LegacyResponse,
        timing: Option<f64>,
    ) -> Reply {
        let mut reply = json_reply(status, resp);
        reply.timing_ms = timing;
        if self.deprecation {
            reply.headers.get_or_insert_default().insert(
                HeaderName::from_static("deprecation"),
                HeaderValue::from_static("true"),
            );
        }
        if let Some(s) = &self.sunset {
            reply
                .headers
                .get_or_insert_default()
                .insert(HeaderName::from_static("sunset"), s.clone());
        }
        reply
    }
}
