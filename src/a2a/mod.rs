//! The published A2A protocol, versions 1.0 and 0.3, over the sid bridge.
//!
//! The seed dialect and the two spec versions share one task model (the bridge's); they differ
//! in method names, shapes ([`shapes`]) and streaming: a spec stream answers every event as a
//! JSON-RPC *response* to the streaming request, first the task, and ends when the task
//! finishes or waits for input. Which dialect a call speaks is decided per call by
//! [`classify`] from its method name and the `A2A-Version` header.

pub(crate) mod card;
mod delta;
pub(crate) mod errors;
pub(crate) mod list;
pub(crate) mod push;
pub(crate) mod rest;
pub(crate) mod shapes;

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::config::A2a as A2aConfig;
use crate::events::frames::{Cut, Encode, Filter};
use crate::events::Stored;
use crate::model::error::GatewayError;
use crate::model::event::{A2aEvent, EventKind};
use crate::model::payload::Payload;
use crate::model::task::TaskState;
use crate::sid::{Bridge, IdParams, Turn};
use crate::wire::jsonrpc::{Id, Response};
use crate::wire::sse;
use shapes::{SendRequest, UpdateWriter, View};

pub(crate) use errors::wire_error;

/// `GetTask` / `tasks/get` params.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct GetParams {
    id: String,
    #[serde(default)]
    history_length: Option<i64>,
}

use crate::model::a2a::{Method, PushOp, SpecCall, Version, VERSION_HEADER};

/// Decides a call's dialect. `Ok(None)`: not a spec call (the seed dialect, a routed method).
///
/// PascalCase names are 1.0, with or without the header. Slash names are 0.3 only with
/// `A2A-Version: 0.3`; without it (or with 1.0, which has no slash names) they keep the seed
/// dialect, so existing clients are unchanged. A version the gateway does not speak is refused
/// (-32009) on any A2A method.
pub(crate) fn classify(
    method: &str,
    header: Option<&str>,
) -> Result<Option<SpecCall>, GatewayError> {
    let header = header.map(str::trim).filter(|h| !h.is_empty());
    let asked = header.map(|h| Version::parse(h).ok_or_else(|| unsupported(h)));
    if let Some(m) = Method::v1_0(method) {
        return match asked.transpose()? {
            None | Some(Version::V1_0) => Ok(Some(SpecCall {
                version: Version::V1_0,
                method: m,
            })),
            Some(Version::V0_3) => Err(GatewayError::MethodNotFound(format!(
                "{method} (an A2A 1.0 method; the request says A2A-Version 0.3)"
            ))),
        };
    }
    if let Some(m) = Method::v0_3(method) {
        return match asked.transpose()? {
            Some(Version::V0_3) => Ok(Some(SpecCall {
                version: Version::V0_3,
                method: m,
            })),
            None | Some(Version::V1_0) => Ok(None),
        };
    }
    Ok(None)
}

/// Decides a call's version on A2A's own JSON-RPC binding, where only A2A methods are served:
/// PascalCase names are 1.0 and slash names 0.3, with the header or without it (0.3 clients
/// predate it), and a header naming the other version, or one the gateway does not speak, is
/// refused as on `POST /rpc`. Any other method is -32601.
pub(crate) fn classify_binding(
    method: &str,
    header: Option<&str>,
) -> Result<SpecCall, GatewayError> {
    if Method::v0_3(method).is_some() && header.is_none_or(|h| h.trim().is_empty()) {
        return classify(method, Some(Version::V0_3.as_str()))?
            .ok_or_else(|| GatewayError::MethodNotFound(method.to_owned()));
    }
    match classify(method, header)? {
        Some(c) => Ok(c),
        None if Method::v0_3(method).is_some() => Err(GatewayError::MethodNotFound(format!(
            "{method} (an A2A 0.3 method; the request says A2A-Version 1.0)"
        ))),
        None => Err(GatewayError::MethodNotFound(method.to_owned())),
    }
}

/// The context and task a spec call must run beside (where their sid runs, with `[cluster]`):
/// a message's, or a cancel's task. `None` for the calls any replica answers, and for params
/// that do not parse (the call then fails here, with its own error).
pub(crate) fn runs_beside(
    c: SpecCall,
    p: Option<&RawValue>,
) -> Option<(Option<String>, Option<String>)> {
    let p = spec_params(p).ok()?;
    match c.method {
        Method::Send | Method::Stream => {
            let turn = params::<SendRequest>(&p)
                .ok()?
                .into_send(c.version)
                .ok()?
                .turn;
            Some((turn.context_id, turn.task_id))
        }
        Method::Cancel => Some((None, Some(params::<IdParams>(&p).ok()?.id))),
        _ => None,
    }
}

/// A spec call's params as JSON, with ProtoJSON's original field names (`task_id`) read as
/// their JSON names (`taskId`), as protobuf JSON parsers accept both. `metadata` and `data`
/// hold the client's own keys and are left as they are. Absent params read as `{}`.
fn spec_params(p: Option<&RawValue>) -> Result<Value, GatewayError> {
    let v: Value = serde_json::from_str(p.map_or("{}", RawValue::get))
        .map_err(|e| GatewayError::InvalidParams(e.to_string()))?;
    Ok(shapes::proto_names(v))
}

/// A method's params as `T`.
fn params<T: serde::de::DeserializeOwned>(p: &Value) -> Result<T, GatewayError> {
    T::deserialize(p).map_err(|e| GatewayError::InvalidParams(e.to_string()))
}

fn unsupported(h: &str) -> GatewayError {
    GatewayError::VersionNotSupported(h.chars().take(32).collect())
}

/// A2A has no "context not found": a `contextId` the gateway does not know is a bad parameter,
/// not an unknown task (-32001 means that to an A2A client).
fn unknown_context(e: GatewayError) -> GatewayError {
    match e {
        GatewayError::ContextNotFound(id) => GatewayError::InvalidParams(format!(
            "contextId {id:?} is not a sid session of this gateway; omit it to start one"
        )),
        other => other,
    }
}

/// A spec stream, ready to be written.
pub struct SpecStream {
    /// Events and where they end.
    pub opened: crate::sid::Opened,
    /// The first frame: the task as the stream starts.
    pub prelude: Bytes,
    /// Writes the rest.
    pub encoder: SpecEncoder,
}

/// Who asks an A2A call, as its answer depends on it: the verified caller's `kind:id` (what
/// another caller owns is not found, [`Bridge::check_task`]), and the request's `Host` (the
/// extended card's URLs).
#[derive(Clone, Copy, Debug, Default)]
pub struct Asker<'a> {
    /// The caller's tenant key, with `[auth]`; `None`: anonymous.
    pub tenant: Option<&'a str>,
    /// The request's `Host`.
    pub host: Option<&'a str>,
    /// Whether the request came over TLS (to the gateway, or to a trusted proxy that says so).
    pub https: bool,
}

/// Serves spec calls from the bridge.
#[derive(Debug)]
pub struct A2a {
    bridge: Arc<Bridge>,
    push: Arc<push::Push>,
    cfg: A2aConfig,
    /// The JSON-RPC path the card names: `a2a.jsonrpc_path`, else the first of `server.rpc_paths`.
    rpc_path: String,
    /// How the card says callers prove who they are.
    security: card::Security,
}

impl A2a {
    /// The service over `bridge`.
    pub(crate) fn new(
        bridge: Arc<Bridge>,
        cfg: A2aConfig,
        rpc_path: String,
        security: card::Security,
    ) -> Self {
        A2a {
            push: push::Push::new(cfg.push_allow_private, &bridge),
            bridge,
            cfg,
            rpc_path,
            security,
        }
    }

    /// The card for a request that arrived for `host`, over TLS when `https`: the 1.0 card, or
    /// with `with_0_3` the same card carrying the 0.3 card's own fields too (what a 0.3-only
    /// client reads).
    pub fn card(&self, https: bool, host: Option<&str>, with_0_3: bool) -> Option<Value> {
        card::base_url(&self.cfg, https, host).map(|base| {
            let mut c = card::card(&self.cfg, &base, &self.rpc_path, &self.security);
            if with_0_3 {
                card::add_0_3_fields(&mut c, &base, &self.rpc_path);
            }
            c
        })
    }

    /// A2A's multi-turn rules, checked before a message reaches sid: a `taskId` must name a
    /// task (-32001) of the caller's that is not finished (-32004) and, with a `contextId`,
    /// belong to it (-32602); a `contextId` alone names a context of the caller's, started
    /// under that id (as the caller's) when new.
    async fn check_turn(&self, turn: &Turn) -> Result<(), GatewayError> {
        self.bridge.check_turn(turn).await?;
        if let Some(task_id) = &turn.task_id {
            let (task, ctx) = self.bridge.task(task_id)?;
            if let Some(c) = turn.context_id.as_ref().filter(|c| **c != ctx) {
                return Err(GatewayError::InvalidParams(format!(
                    "contextId {c:?} does not match task {task_id}'s context {ctx:?}"
                )));
            }
            if task.state.is_terminal() {
                return Err(GatewayError::UnsupportedOperation(format!(
                    "task {task_id} is {}; a finished task takes no more messages, send without \
                     taskId to start a new task",
                    task.state.as_str()
                )));
            }
        } else if let Some(c) = &turn.context_id {
            self.bridge.adopt_context(c, turn.tenant.as_deref())?;
        }
        Ok(())
    }

    /// A message of `tenant`'s (`SendMessage`, `SendStreamingMessage`), checked before its turn
    /// starts: its params, where its context runs (one another replica runs is not started here
    /// too, `[cluster]`), A2A's multi-turn rules ([`Self::check_turn`]) and its webhook's URL
    /// (registered once the task exists).
    async fn admit_send(
        &self,
        v: Version,
        p: &Value,
        tenant: Option<&str>,
    ) -> Result<shapes::Send, GatewayError> {
        let mut send = params::<SendRequest>(p)?.into_send(v)?;
        send.turn.tenant = tenant.map(Into::into);
        self.bridge.here_or_refuse(&send.turn).await?;
        self.check_turn(&send.turn).await?;
        if let Some(cfg) = &send.push {
            let url = cfg.get("url").and_then(Value::as_str).unwrap_or("");
            self.push.admit(url).await?;
        }
        Ok(send)
    }

    /// Answers a non-streaming spec call with its `result`.
    pub async fn call(
        &self,
        c: SpecCall,
        p: Option<&RawValue>,
        asker: Asker<'_>,
    ) -> Result<Value, GatewayError> {
        self.call_value(c, spec_params(p)?, asker).await
    }

    /// Answers a non-streaming spec call whose params are already JSON (the REST binding's).
    pub async fn call_value(
        &self,
        c: SpecCall,
        p: Value,
        asker: Asker<'_>,
    ) -> Result<Value, GatewayError> {
        let v = c.version;
        let tenant = asker.tenant;
        match c.method {
            Method::Send => {
                let send = self.admit_send(v, &p, tenant).await?;
                let (mut task, mut ctx) = self
                    .bridge
                    .send_turn(&send.turn, send.wait && send.push.is_none())
                    .await
                    .map_err(unknown_context)?;
                if let Some(cfg) = send.push {
                    self.push
                        .create(&self.bridge, v, cfg, Some(&task.id), tenant)
                        .await?;
                    if send.wait {
                        (task, ctx) = self.bridge.settled_task(&task.id).await?;
                    }
                }
                let view = View {
                    history_length: send.history_length,
                    artifacts: true,
                };
                let t = shapes::task_view(v, &task, &ctx, view);
                Ok(match v {
                    Version::V1_0 => serde_json::json!({ "task": t }),
                    Version::V0_3 => t,
                })
            }
            Method::Get => {
                let GetParams { id, history_length } = params(&p)?;
                let view = View {
                    history_length: shapes::history_length(history_length)?,
                    artifacts: true,
                };
                let (task, ctx) = self.bridge.find_task_as(&id, tenant).await?;
                Ok(shapes::task_view(v, &task, &ctx, view))
            }
            Method::Cancel => {
                let IdParams { id } = params(&p)?;
                self.bridge.check_task(&id, tenant).await?;
                let c = self.bridge.cancel(&id).await?;
                let mut t = shapes::task(v, &c.task, &c.context_id);
                t["metadata"]["cancelRequested"] = Value::Bool(true);
                if let Some(n) = c.note {
                    t["metadata"]["cancelNote"] = Value::from(n);
                }
                Ok(t)
            }
            Method::Stream | Method::Subscribe => {
                Err(GatewayError::StreamingCall("this A2A method".into()))
            }
            Method::ListTasks => {
                let q = params::<list::ListRequest>(&p)?.into_query()?;
                let mut all = self.bridge.all_tasks_everywhere().await?;
                all.retain(|(t, _)| self.bridge.shows(t, tenant));
                Ok(list::page(v, &q, all))
            }
            Method::Push(op) => {
                let params = p;
                match op {
                    PushOp::Create => {
                        self.push
                            .create(&self.bridge, v, params, None, tenant)
                            .await
                    }
                    PushOp::Get => self.push.get(&self.bridge, v, params, tenant),
                    PushOp::List => self.push.list(&self.bridge, v, params, tenant),
                    PushOp::Delete => self.push.delete(&self.bridge, v, params, tenant),
                }
            }
            Method::ExtendedCard => self.extended_card(v, asker),
        }
    }

    /// `GetExtendedAgentCard`: the card, for a caller the gateway identified (a JWT, an API key
    /// or a certificate named it); with none of those configured there is no extended card.
    fn extended_card(&self, v: Version, asker: Asker<'_>) -> Result<Value, GatewayError> {
        if !self.security.identifies() {
            return Err(GatewayError::ExtendedCardNotConfigured);
        }
        if asker.tenant.is_none() {
            return Err(GatewayError::Unauthenticated {
                sent: false,
                reason: String::new(),
            });
        }
        self.card(asker.https, asker.host, v == Version::V0_3)
            .ok_or_else(|| GatewayError::InvalidParams("the request names no Host".into()))
    }

    /// Opens a streaming spec call answered under `id`. A `SubscribeToTask` with
    /// `Last-Event-ID` (each spec stream event carries its id) resumes after that event: the
    /// task as it is now, then every update after the one named, none lost or repeated while
    /// the replay log holds them (`sid.replay_events`), even when the task has ended since.
    pub async fn open(
        &self,
        c: SpecCall,
        id: &Id,
        p: Option<&RawValue>,
        last_event_id: Option<&str>,
        asker: Asker<'_>,
    ) -> Result<SpecStream, GatewayError> {
        self.open_value(c, Some(id), spec_params(p)?, last_event_id, asker)
            .await
    }

    /// Opens a streaming spec call whose params are already JSON; each event is a JSON-RPC
    /// response to `envelope`, or (the REST binding, `None`) the bare `StreamResponse`.
    pub async fn open_value(
        &self,
        c: SpecCall,
        envelope: Option<&Id>,
        p: Value,
        last_event_id: Option<&str>,
        asker: Asker<'_>,
    ) -> Result<SpecStream, GatewayError> {
        let v = c.version;
        let tenant = asker.tenant;
        let (mut opened, task) = match c.method {
            Method::Stream => {
                let send = self.admit_send(v, &p, tenant).await?;
                let (opened, mut task) = self
                    .bridge
                    .stream_turn(&send.turn)
                    .await
                    .map_err(unknown_context)?;
                if let Some(cfg) = send.push {
                    self.push
                        .create(&self.bridge, v, cfg, Some(&task.id), tenant)
                        .await?;
                }
                // The stream starts where the turn does; what sid has said since arrives next.
                task.state = if send.turn.task_id.is_some() {
                    TaskState::Working
                } else {
                    TaskState::Submitted
                };
                (opened, task)
            }
            Method::Subscribe => {
                let IdParams { id } = params(&p)?;
                let (task, _) = self.bridge.find_task_as(&id, tenant).await?;
                if task.state.is_terminal() && last_event_id.is_none() {
                    return Err(GatewayError::UnsupportedOperation(format!(
                        "task {id} is {}; a finished task has no updates to subscribe to",
                        task.state.as_str()
                    )));
                }
                let opened = self
                    .bridge
                    .open_task_stream(&id, last_event_id, true)
                    .await?;
                (opened, task)
            }
            _ => {
                return Err(GatewayError::MethodNotFound(
                    "not a streaming method".into(),
                ))
            }
        };
        opened.filter = Filter {
            until_input_required: true,
            ..opened.filter
        };
        let encoder = SpecEncoder {
            id: envelope.cloned(),
            version: v,
            writer: UpdateWriter::new(v, &task),
            scratch: Vec::new(),
        };
        let prelude = encoder.frame(None, &shapes::stream_start(v, &task, &opened.context_id));
        Ok(SpecStream {
            opened,
            prelude,
            encoder,
        })
    }
}

/// A success response borrowing its parts, written straight into a frame.
#[derive(serde::Serialize)]
struct SpecResponse<'a> {
    jsonrpc: &'static str,
    id: &'a Id,
    result: &'a Value,
}

/// Writes a spec stream: each event as `{"jsonrpc":"2.0","id":…,"result":…}` under the
/// request's id, errors as `event: error` frames carrying a JSON-RPC error response.
#[derive(Debug)]
pub struct SpecEncoder {
    /// The request's id (JSON-RPC); `None` for the REST binding's bare events.
    id: Option<Id>,
    version: Version,
    writer: UpdateWriter,
    /// A text delta's data line, written here and copied into the frame; kept between events
    /// so writing one allocates nothing.
    scratch: Vec<u8>,
}

impl SpecEncoder {
    fn frame(&self, event_id: Option<&str>, result: &Value) -> Bytes {
        let mut out = BytesMut::new();
        self.write(&mut out, event_id, result);
        out.freeze()
    }

    fn write(&self, out: &mut BytesMut, event_id: Option<&str>, result: &Value) {
        sse::write_json(out, None, event_id, |out| {
            // Serialising a value that serde_json can represent cannot fail.
            let _ = match &self.id {
                Some(id) => {
                    let resp = SpecResponse {
                        jsonrpc: "2.0",
                        id,
                        result,
                    };
                    serde_json::to_writer(out.writer(), &resp)
                }
                None => serde_json::to_writer(out.writer(), result),
            };
        });
    }

    /// One event's frame. A text delta, most events of a stream, is written without the tree
    /// [`UpdateWriter::result`] builds (the same bytes: see [`delta`]).
    fn encode(&mut self, ev: &A2aEvent, out: &mut BytesMut) {
        let (EventKind::Artifact, Payload::Delta(d)) = (ev.event_type, &ev.data) else {
            let result = self.writer.result(ev);
            return self.write(out, Some(&ev.event_id), &result);
        };
        let mut json = std::mem::take(&mut self.scratch);
        json.clear();
        // As `SpecResponse` serialises.
        if let Some(id) = &self.id {
            json.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            id.write_json(&mut json);
            json.extend_from_slice(b",\"result\":");
        }
        self.writer.write_delta(ev, d, &mut json);
        if self.id.is_some() {
            json.push(b'}');
        }
        sse::write_json(out, None, Some(&ev.event_id), |out| out.put_slice(&json));
        self.scratch = json;
    }

    /// An error inside the stream: a JSON-RPC error response, or the REST binding's error.
    pub fn error(&self, e: &GatewayError) -> Bytes {
        let mut out = BytesMut::with_capacity(256);
        sse::write_json(&mut out, Some("error"), None, |out| {
            let _ = match &self.id {
                Some(id) => {
                    let resp = Response::error(id.clone(), wire_error(e, Some(self.version)));
                    serde_json::to_writer(out.writer(), &resp)
                }
                None => serde_json::to_writer(out.writer(), &rest::error_body(e)),
            };
        });
        out.freeze()
    }
}

impl Encode for SpecEncoder {
    fn gap(&mut self) -> Option<Bytes> {
        None
    }

    fn event(&mut self, s: &Stored, out: &mut BytesMut) {
        self.encode(&s.event, out);
    }

    fn cut(&mut self, why: Cut) -> Option<Bytes> {
        let e = match why {
            Cut::Lagged => GatewayError::StreamCut(
                "the client fell behind the task's updates; SubscribeToTask to continue".into(),
            ),
            Cut::Closed => {
                GatewayError::SidUnavailable("the sid context closed before the task ended".into())
            }
        };
        Some(self.error(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(version: Version, method: Method) -> Option<SpecCall> {
        Some(SpecCall { version, method })
    }

    #[test]
    fn each_call_is_classified_by_name_and_header() {
        assert_eq!(
            classify("SendMessage", None).unwrap(),
            spec(Version::V1_0, Method::Send)
        );
        assert_eq!(
            classify("SubscribeToTask", Some("1.0.3")).unwrap(),
            spec(Version::V1_0, Method::Subscribe)
        );
        assert_eq!(
            classify("message/stream", Some("0.3")).unwrap(),
            spec(Version::V0_3, Method::Stream)
        );
        assert_eq!(
            classify("tasks/pushNotificationConfig/set", Some("0.3.0")).unwrap(),
            spec(Version::V0_3, Method::Push(PushOp::Create))
        );
        assert_eq!(classify("message/send", None).unwrap(), None, "seed");
        assert_eq!(classify("message/send", Some("1.0")).unwrap(), None, "seed");
        assert_eq!(
            classify("plan.create", Some("9.9")).unwrap(),
            None,
            "routed"
        );
        assert!(matches!(
            classify("GetTask", Some("2.0")),
            Err(GatewayError::VersionNotSupported(v)) if v == "2.0"
        ));
        assert!(matches!(
            classify("tasks/get", Some("0.2")),
            Err(GatewayError::VersionNotSupported(_))
        ));
        assert!(matches!(
            classify("GetTask", Some("0.3")),
            Err(GatewayError::MethodNotFound(_))
        ));
    }

    #[test]
    fn a2a_s_own_binding_serves_only_a2a_methods() {
        let c = |m, h| classify_binding(m, h);
        assert_eq!(
            c("SendMessage", None).ok(),
            spec(Version::V1_0, Method::Send)
        );
        assert_eq!(
            c("message/send", None).ok(),
            spec(Version::V0_3, Method::Send),
            "no seed dialect here: a slash name is 0.3 without the header"
        );
        assert_eq!(
            c("tasks/get", Some("0.3")).ok(),
            spec(Version::V0_3, Method::Get)
        );
        assert!(matches!(
            c("tasks/get", Some("1.0")),
            Err(GatewayError::MethodNotFound(m)) if m.contains("0.3 method")
        ));
        assert!(matches!(
            c("GetTask", Some("0.3")),
            Err(GatewayError::MethodNotFound(_))
        ));
        assert!(matches!(
            c("SendMessageXXX", None),
            Err(GatewayError::MethodNotFound(m)) if m == "SendMessageXXX"
        ));
        assert!(matches!(
            c("plan.create", None),
            Err(GatewayError::MethodNotFound(_))
        ));
        assert!(matches!(
            c("GetTask", Some("2.0")),
            Err(GatewayError::VersionNotSupported(_))
        ));
    }

    #[test]
    fn versions_compare_by_major_and_minor() {
        assert_eq!(Version::parse("1.0"), Some(Version::V1_0));
        assert_eq!(Version::parse("1"), Some(Version::V1_0));
        assert_eq!(Version::parse(" 0.3.1 "), Some(Version::V0_3));
        assert_eq!(Version::parse("1.1"), None);
        assert_eq!(Version::parse("1.0.x"), None);
        assert_eq!(Version::parse("latest"), None);
    }
}
