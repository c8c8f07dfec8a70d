//! Calls sid serves: a unary call, a stream opened as SSE, a call carried to its context's replica.
//!
//! Each is boxed where it is awaited ([`Gateway::handle`], `Gateway::dispatch`): the rare
//! branches, kept out of the size of every other call's future.

use std::convert::Infallible;
use std::pin::Pin;
use std::time::Instant;

use axum::http::StatusCode;
use bytes::Bytes;
use futures_util::Stream;

use crate::a2a;
use crate::events::frames::{self as sse_stream, Shared};
use crate::http::reply::{error_status, json_reply, Reply, ReplyBody};
use crate::model::a2a::SpecCall;
use crate::model::error::GatewayError;
use crate::sid::Bridge;
use crate::telemetry::{self, CallLabels};
use crate::upstream::call::{Call, Done};
use crate::wire::jsonrpc::{to_raw, Id, Outcome, Request, Response};
use crate::wire::legacy::Auth;

use super::{Binding, Gateway, Meta};

impl Gateway {
    /// With `[cluster]` (`bridge`, which the caller found clustered): a call that must run
    /// where its context's sid runs, carried whole to that replica when it is another
    /// (`sid::carry`); `None` to answer it here.
    pub(super) async fn carried(
        &self,
        bridge: &Bridge,
        req: &Request,
        spec: &Result<Option<SpecCall>, GatewayError>,
        body: &[u8],
        meta: &Meta<'_>,
    ) -> Option<Reply> {
        let spec = *spec.as_ref().ok()?;
        let params = req.params.as_deref();
        let (ctx, task) = match spec {
            Some(c) => a2a::runs_beside(c, params)?,
            None => bridge.runs_beside(&req.method, params)?,
        };
        let path = match meta.binding {
            Binding::Gateway => self.carry_paths.0.as_str(),
            Binding::A2a => self.carry_paths.1.as_deref()?,
        };
        let carried = async {
            bridge.authorize(meta.authorization())?;
            bridge
                .carry_if_elsewhere(ctx.as_deref(), task.as_deref(), path, body, meta.headers)
                .await
        };
        match carried.await {
            Ok(reply) => reply,
            Err(e) => Some(json_reply(
                error_status(&e, spec.is_some()),
                &Response::error(
                    req.id.clone().unwrap_or(Id::Null),
                    a2a::wire_error(&e, spec.map(|c| c.version)),
                ),
            )),
        }
    }

    /// A streaming call, in the seed dialect or (with `spec`) a published A2A version: the
    /// task's updates as SSE, or a JSON-RPC error if it cannot start.
    pub(super) async fn open_stream(
        &self,
        req: Request,
        spec: Option<SpecCall>,
        meta: &Meta<'_>,
    ) -> Reply {
        let bridge = self.bridge.as_ref().expect("checked by the caller");
        let id = req.id.clone().unwrap_or(Id::Null);
        let started = Instant::now();
        let opened = async {
            bridge.authorize(meta.authorization())?;
            let params = req.params.as_deref();
            let timing = bridge.timing();
            let asker = self.asker(meta);
            let body: Pin<Box<dyn Stream<Item = Result<Bytes, Infallible>> + Send>> =
                match (spec, &self.a2a) {
                    (Some(c), Some(a2a)) => {
                        let s = a2a.open(c, &id, params, meta.last_event_id, asker).await?;
                        let o = s.opened;
                        let frames = sse_stream::frames(
                            o.subscription,
                            o.filter,
                            timing,
                            Some(s.prelude),
                            s.encoder,
                        );
                        Box::pin(frames)
                    }
                    _ => {
                        let o = bridge
                            .open(&req.method, params, meta.last_event_id, asker.tenant)
                            .await?;
                        let frames =
                            sse_stream::frames(o.subscription, o.filter, timing, None, Shared);
                        Box::pin(frames)
                    }
                };
            Ok::<_, GatewayError>(body)
        }
        .await;
        telemetry::record_call(
            CallLabels {
                client_dialect: spec.map_or("jsonrpc", |c| c.version.label()),
                upstream: "sid",
                method: &req.method,
                outcome: opened.as_ref().map_or_else(|e| e.kind(), |_| "ok"),
            },
            started.elapsed(),
        );
        match opened {
            Ok(body) => Reply {
                status: StatusCode::OK,
                headers: None,
                timing_ms: None,
                body: ReplyBody::Stream(body),
            },
            Err(e) => json_reply(
                error_status(&e, spec.is_some()),
                &Response::error(id, a2a::wire_error(&e, spec.map(|c| c.version))),
            ),
        }
    }

    /// A call the sid bridge answers, in the seed dialect or a published A2A version, for
    /// `asker` (tenancy).
    pub(super) async fn to_sid(
        &self,
        bridge: &Bridge,
        call: &Call,
        asker: a2a::Asker<'_>,
    ) -> Result<Done, GatewayError> {
        if call.spec.is_none() && bridge.is_streaming(&call.method) {
            return Err(GatewayError::StreamingCall(call.method.clone()));
        }
        let authorization = call.auth.as_ref().and_then(Auth::to_header);
        bridge.authorize(authorization.as_deref())?;
        let params = call.params.as_deref();
        let value = match (call.spec, &self.a2a) {
            (Some(spec), Some(a2a)) => a2a.call(spec, params, asker).await?,
            _ => bridge.call(&call.method, params, asker.tenant).await?,
        };
        Ok(Done {
            outcome: Outcome::Result(to_raw(&value)),
            timing_ms: None,
        })
    }
}
