//! The bridge's JSON-RPC methods by name: which ones it answers, each call's answer
//! (`message/send`, `tasks/get`, `tasks/cancel`, the raw `_sid/` ops) and the stream each
//! streaming call opens (`message/stream`, `tasks/resubscribe`).

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::errors::{gone, sid_error};
use super::rpc_params::{params, IdParams, SendParams};
use super::{shared, Bridge, Opened, CANCEL, GET, RAW_PREFIX, RESUBSCRIBE, SEND, STREAM};
use crate::model::error::GatewayError;
use crate::wire::raw::{Op, ResultLine};

impl Bridge {
    /// Whether `method` is one of the bridge's.
    pub fn handles(&self, method: &str) -> bool {
        matches!(method, SEND | STREAM | GET | CANCEL | RESUBSCRIBE)
            || method.starts_with(RAW_PREFIX)
    }

    /// Whether `method` answers a stream.
    pub fn is_streaming(&self, method: &str) -> bool {
        matches!(method, STREAM | RESUBSCRIBE)
    }

    /// Answers a non-streaming call of `tenant` (the verified caller's `kind:id`, with
    /// `[auth]`): what another caller owns is not found ([`tenancy`](super::tenancy)).
    pub async fn call(
        &self,
        method: &str,
        p: Option<&RawValue>,
        tenant: Option<&str>,
    ) -> Result<Value, GatewayError> {
        match method {
            SEND => {
                let mut turn = params::<SendParams>(p)?.into_turn()?;
                turn.tenant = tenant.map(Into::into);
                self.check_turn(&turn).await?;
                let place = self
                    .place(turn.context_id.as_deref(), turn.task_id.as_deref())
                    .await?;
                if let shared::Place::There { .. } = place {
                    return self.forward(place, method, p).await;
                }
                let (ctx, task) = self.begin_send(&turn).await?;
                ctx.settled(&task).await;
                Self::flushed(&ctx).await;
                ctx.snapshot(&task).ok_or(GatewayError::TaskNotFound(task))
            }
            GET => {
                let IdParams { id } = params(p)?;
                let (task, ctx) = self.find_task_as(&id, tenant).await?;
                Ok(task.snapshot(&ctx))
            }
            CANCEL => {
                let IdParams { id } = params(p)?;
                self.check_task(&id, tenant).await?;
                let place = self.place(None, Some(&id)).await?;
                if let shared::Place::There { .. } = place {
                    return self.forward(place, method, p).await;
                }
                let c = self.cancel(&id).await?;
                let mut snap = c.task.snapshot(&c.context_id);
                snap["metadata"]["cancelRequested"] = json!(true);
                if let Some(n) = c.note {
                    snap["metadata"]["cancelNote"] = json!(n);
                }
                Ok(snap)
            }
            raw if raw.starts_with(RAW_PREFIX) => {
                let ctx = params::<Map<String, Value>>(p)?
                    .get("contextId")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                if let Some(c) = &ctx {
                    self.check_context(c, tenant).await?;
                }
                let place = self.place(ctx.as_deref(), None).await?;
                if let shared::Place::There { .. } = place {
                    return self.forward(place, method, p).await;
                }
                self.raw_op(&raw[RAW_PREFIX.len()..], p).await
            }
            other => Err(GatewayError::MethodNotFound(other.to_owned())),
        }
    }

    /// Opens the stream a streaming call of `tenant` answers with.
    pub async fn open(
        &self,
        method: &str,
        p: Option<&RawValue>,
        last_event_id: Option<&str>,
        tenant: Option<&str>,
    ) -> Result<Opened, GatewayError> {
        match method {
            STREAM => {
                let mut turn = params::<SendParams>(p)?.into_turn()?;
                turn.tenant = tenant.map(Into::into);
                self.check_turn(&turn).await?;
                self.stream_turn(&turn).await.map(|(opened, _)| opened)
            }
            RESUBSCRIBE => {
                let IdParams { id } = params(p)?;
                self.check_task(&id, tenant).await?;
                self.open_task_stream(&id, last_event_id, true).await
            }
            other => Err(GatewayError::MethodNotFound(other.to_owned())),
        }
    }

    async fn raw_op(&self, op: &str, p: Option<&RawValue>) -> Result<Value, GatewayError> {
        if !self.cfg.allow_ops.iter().any(|a| a == op) {
            return Err(GatewayError::SidOpNotAllowed(op.to_owned()));
        }
        self.cluster_ready()?;
        let mut fields: Map<String, Value> = params(p)?;
        let ctx = match fields.remove("contextId") {
            Some(Value::String(id)) => {
                let ctx = self
                    .contexts()
                    .get(&id)
                    .cloned()
                    .ok_or(GatewayError::ContextNotFound(id))?;
                self.ensure_running(&ctx)?;
                ctx
            }
            _ => match &self.attached {
                Some(a) => a.clone(),
                None => {
                    return Err(GatewayError::InvalidParams(
                        "params.contextId is required".into(),
                    ))
                }
            },
        };
        fields.insert("op".into(), Value::from(op));
        let op: Op = serde_json::from_value(Value::Object(fields))
            .map_err(|e| GatewayError::InvalidParams(e.to_string()))?;
        let (_, answer) = ctx.request(op).map_err(gone)?;
        match answer.await {
            Ok(ResultLine { ok: true, data, .. }) => Ok(data.unwrap_or(Value::Null)),
            Ok(ResultLine { error, .. }) => Err(sid_error(error.as_ref())),
            Err(_) => Err(GatewayError::SidUnavailable(
                ctx.exit_reason().unwrap_or_else(|| "sid stopped".into()),
            )),
        }
    }
}
