//! The sid bridge: JSON-RPC calls in, task updates out.
//!
//! The bridge owns the contexts (one sid child each, or the one attached `--listen` socket) and
//! the index from task ids to contexts. The task model lives in each context's
//! [`mapping::Tracker`], so a task started in one dialect can be read in another.

mod carry;
pub(crate) mod context;
mod lines;
pub(crate) mod listing;
mod shared;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::config::Sid as SidConfig;
use crate::events::frames::{Filter, Timing};
use crate::events::{EventQueue, Subscription};
use crate::model::error::GatewayError;
use crate::model::task::{Task, TaskState};
use crate::wire::raw::{Op, ResultLine, ServerError};
use context::{Context, SendError, Transport};

/// `message/send`.
pub(crate) const SEND: &str = "message/send";
/// `message/stream`.
pub(crate) const STREAM: &str = "message/stream";
/// `tasks/get`.
pub(crate) const GET: &str = "tasks/get";
/// `tasks/cancel`.
pub(crate) const CANCEL: &str = "tasks/cancel";
/// `tasks/resubscribe`.
pub(crate) const RESUBSCRIBE: &str = "tasks/resubscribe";
/// Prefix of raw ops.
pub(crate) const RAW_PREFIX: &str = "_sid/";

/// How long a stopping sid gets between EOF on stdin and a kill.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// A context stopped for this many idle timeouts is forgotten.
const CONTEXT_RETENTION_FACTOR: u32 = 16;
/// How long `tasks/cancel` waits for sid to answer its interrupt.
const CANCEL_WAIT: Duration = Duration::from_secs(1);

/// What [`Bridge::on_lost_tasks`] calls, with the ids of the tasks failed.
pub(crate) type LostHook = Box<dyn Fn(Vec<String>) + Send + Sync>;

/// A [`LostHook`], kept.
struct Hook(LostHook);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LostHook")
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct Bridge {
    cfg: SidConfig,
    contexts: Mutex<HashMap<String, Arc<Context>>>,
    tasks: Mutex<HashMap<String, String>>,
    attached: Option<Arc<Context>>,
    /// With `[cluster]`: Redis, and the local copies of other replicas' context logs.
    cluster: Option<shared::Shared>,
    /// Told the tasks this replica fails taking over a lost replica's context (see
    /// [`on_lost_tasks`](Self::on_lost_tasks)).
    lost_hook: std::sync::OnceLock<Hook>,
}

/// A stream a call opened: the subscription and what to keep of it.
#[derive(Debug)]
pub struct Opened {
    /// Events to send.
    pub subscription: Subscription,
    /// Which, and until when.
    pub filter: Filter,
    /// The context the events come from.
    pub context_id: String,
}

impl Opened {
    /// One task's events in its context's `queue` after `last_event_id` (all retained ones
    /// when `None`); with `live_if_running`, a task still `running` without a resume point
    /// streams from now on. The same for a local context and a replica's mirror of one.
    fn task(
        queue: &Arc<EventQueue>,
        task_id: &str,
        context_id: String,
        running: bool,
        last_event_id: Option<&str>,
        live_if_running: bool,
    ) -> Result<Opened, GatewayError> {
        let subscription = if last_event_id.is_none() && live_if_running && running {
            queue.subscribe_live()?
        } else {
            queue.subscribe(last_event_id)?
        };
        Ok(Opened {
            subscription,
            filter: Filter {
                task: Some(task_id.to_owned()),
                until_final: true,
                ..Filter::default()
            },
            context_id,
        })
    }
}

#[derive(Deserialize)]
struct SendParams {
    message: MessageIn,
    #[serde(default, rename = "contextId")]
    context_id: Option<String>,
    #[serde(default, rename = "taskId")]
    task_id: Option<String>,
}

#[derive(Deserialize)]
struct MessageIn {
    #[serde(default)]
    parts: Vec<PartIn>,
    #[serde(default, rename = "contextId")]
    context_id: Option<String>,
    #[serde(default, rename = "taskId")]
    task_id: Option<String>,
    #[serde(default, rename = "messageId")]
    message_id: Option<String>,
}

#[derive(Deserialize)]
struct PartIn {
    #[serde(default)]
    text: Option<String>,
}

impl SendParams {
    /// The seed dialect's message as a turn: text parts joined, ids from the message first.
    fn into_turn(self) -> Result<Turn, GatewayError> {
        let text: Vec<String> = self
            .message
            .parts
            .into_iter()
            .filter_map(|p| p.text)
            .collect();
        if text.is_empty() {
            return Err(GatewayError::InvalidParams(
                "message has no text part".into(),
            ));
        }
        Ok(Turn {
            text: text.join("\n"),
            context_id: self.message.context_id.or(self.context_id),
            task_id: self.message.task_id.or(self.task_id),
            message_id: self.message.message_id,
            queue: false,
        })
    }
}

/// One message for sid, whatever dialect it came in: a new turn, or the answer to a prompt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    /// What the user says.
    pub text: String,
    /// Continue this context (a new child otherwise, or the attached socket).
    pub context_id: Option<String>,
    /// Answer this task's open prompt instead of starting a turn.
    pub task_id: Option<String>,
    /// The client's `messageId`, kept in the task's history.
    pub message_id: Option<String>,
    /// A new turn for a context that is running another: queue it as a submitted task that
    /// starts when the turns before it end (A2A, where a context holds several tasks), rather
    /// than refuse it -32060 busy (the seed dialect's contract).
    pub queue: bool,
}

/// What `tasks/cancel` did.
#[derive(Debug)]
pub struct Canceled {
    /// The task after the interrupt.
    pub task: Task,
    /// Its context.
    pub context_id: String,
    /// Why the task may still finish its turn, when it may.
    pub note: Option<&'static str>,
}

/// `{id}`: the params of every method that names one task.
#[derive(Deserialize)]
pub(crate) struct IdParams {
    pub(crate) id: String,
}

/// A method's params as `T`; absent params read as `{}`.
pub(crate) fn params<T: for<'de> Deserialize<'de>>(
    p: Option<&RawValue>,
) -> Result<T, GatewayError> {
    serde_json::from_str(p.map_or("{}", RawValue::get))
        .map_err(|e| GatewayError::InvalidParams(e.to_string()))
}

/// sid's error answer as the gateway's error.
pub(crate) fn sid_error(e: Option<&ServerError>) -> GatewayError {
    let message = e.map_or_else(
        || "sid reported a failure".to_owned(),
        |e| e.message.clone(),
    );
    match e.and_then(|e| e.code.as_deref()) {
        Some("busy") => GatewayError::SidBusy(message),
        Some("stale_prompt") => GatewayError::SidStalePrompt(message),
        Some("invalid_request" | "invalid_request_json" | "unsupported_protocol_version") => {
            GatewayError::SidRejected(message)
        }
        code => GatewayError::SidFailed {
            code: code.map(str::to_owned),
            message,
        },
    }
}

fn gone(e: SendError) -> GatewayError {
    match e {
        SendError::Gone(reason) => GatewayError::SidUnavailable(reason),
        SendError::Busy(reason) => GatewayError::SidBusy(reason),
    }
}

impl Bridge {
    /// Starts the bridge (attaching to `sid.connect` when set) and its idle reaper; with a
    /// cluster link, contexts' events and tasks are shared with the other replicas.
    pub fn start(cfg: SidConfig, link: Option<Arc<crate::cluster::Link>>) -> Arc<Self> {
        let cluster = link.map(|l| shared::Shared::new(l, &cfg));
        let attached = (!cfg.connect.is_empty()).then(|| {
            let ctx = Context::new(
                uuid::Uuid::new_v4().to_string(),
                Transport::Socket(cfg.connect.clone()),
                cfg.replay_events,
                cfg.max_subscribers,
                cfg.max_queued_requests,
                Duration::from_millis(cfg.lag_grace_ms),
            );
            ctx.spawn_socket(
                cfg.connect.clone(),
                Duration::from_millis(cfg.reconnect_grace_ms),
            );
            ctx
        });
        let bridge = Arc::new(Bridge {
            contexts: Mutex::new(attached.iter().map(|c| (c.id.clone(), c.clone())).collect()),
            tasks: Mutex::new(HashMap::new()),
            attached,
            cluster,
            lost_hook: std::sync::OnceLock::new(),
            cfg,
        });
        if let Some(a) = &bridge.attached {
            if let Err(e) = bridge.export(a) {
                tracing::error!(error = %e, "cannot share the attached context's events");
            }
        }
        if let Some(sh) = &bridge.cluster {
            let (weak, every) = (Arc::downgrade(&bridge), shared::sweep_every(&sh.link));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(b) = weak.upgrade() else { return };
                    if let Err(e) = b.sweep().await {
                        tracing::debug!(error = %e, "the sweep for lost replicas' contexts failed");
                    }
                }
            });
        }
        let weak = Arc::downgrade(&bridge);
        let period = Duration::from_millis((bridge.cfg.idle_timeout_ms / 4).clamp(50, 5_000));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let Some(b) = weak.upgrade() else { return };
                b.reap_idle().await;
            }
        });
        bridge
    }

    /// Has `hook` called with the ids of the tasks this replica fails when it takes over a
    /// context whose replica was lost, once their `failed` update is published: the layer
    /// above keeps what the bridge does not (the tasks' push webhooks). The first hook stays.
    pub fn on_lost_tasks(&self, hook: LostHook) {
        let _ = self.lost_hook.set(Hook(hook));
    }

    /// The cluster link, with `[cluster]`.
    pub fn cluster_link(&self) -> Option<&Arc<crate::cluster::Link>> {
        self.cluster.as_ref().map(|sh| &sh.link)
    }

    fn contexts(&self) -> MutexGuard<'_, HashMap<String, Arc<Context>>> {
        self.contexts.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn task_index(&self) -> MutexGuard<'_, HashMap<String, String>> {
        self.tasks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// SSE timing for this bridge's streams.
    pub fn timing(&self) -> Timing {
        Timing {
            keepalive: Duration::from_millis(self.cfg.keepalive_ms),
            retry_ms: 2000,
        }
    }

    /// Whether `method` is one of the bridge's.
    pub fn handles(&self, method: &str) -> bool {
        matches!(method, SEND | STREAM | GET | CANCEL | RESUBSCRIBE)
            || method.starts_with(RAW_PREFIX)
    }

    /// Whether `method` answers a stream.
    pub fn is_streaming(&self, method: &str) -> bool {
        matches!(method, STREAM | RESUBSCRIBE)
    }

    /// Checks `Authorization: Bearer` against `sid.bearer_tokens` (when any are configured).
    pub fn authorize(&self, authorization: Option<&str>) -> Result<(), GatewayError> {
        if self.cfg.bearer_tokens.is_empty() {
            return Ok(());
        }
        let given = authorization
            .and_then(|a| a.strip_prefix("Bearer "))
            .unwrap_or("");
        let ok = self
            .cfg
            .bearer_tokens
            .iter()
            .any(|t| crate::auth::admin::constant_time_eq(t.as_bytes(), given.as_bytes()));
        ok.then_some(()).ok_or(GatewayError::Unauthorized)
    }

    /// Answers a non-streaming call.
    pub async fn call(&self, method: &str, p: Option<&RawValue>) -> Result<Value, GatewayError> {
        match method {
            SEND => {
                let turn = params::<SendParams>(p)?.into_turn()?;
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
                let (task, ctx) = self.find_task(&id).await?;
                Ok(task.snapshot(&ctx))
            }
            CANCEL => {
                let IdParams { id } = params(p)?;
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
                let place = self.place(ctx.as_deref(), None).await?;
                if let shared::Place::There { .. } = place {
                    return self.forward(place, method, p).await;
                }
                self.raw_op(&raw[RAW_PREFIX.len()..], p).await
            }
            other => Err(GatewayError::MethodNotFound(other.to_owned())),
        }
    }

    /// Opens the stream a streaming call answers with.
    pub async fn open(
        &self,
        method: &str,
        p: Option<&RawValue>,
        last_event_id: Option<&str>,
    ) -> Result<Opened, GatewayError> {
        match method {
            STREAM => {
                let turn = params::<SendParams>(p)?.into_turn()?;
                self.stream_turn(&turn).await.map(|(opened, _)| opened)
            }
            RESUBSCRIBE => {
                let IdParams { id } = params(p)?;
                self.open_task_stream(&id, last_event_id, true).await
            }
            other => Err(GatewayError::MethodNotFound(other.to_owned())),
        }
    }

    /// Sends a turn (or a prompt answer) and, with `wait`, waits until its task settles
    /// (terminal or input-required). Returns the task and its context.
    pub async fn send_turn(&self, turn: &Turn, wait: bool) -> Result<(Task, String), GatewayError> {
        self.here_or_refuse(turn).await?;
        let (ctx, task) = self.begin_send(turn).await?;
        if wait {
            ctx.settled(&task).await;
            Self::flushed(&ctx).await;
        }
        let model = ctx.task(&task).ok_or(GatewayError::TaskNotFound(task))?;
        Ok((model, ctx.id.clone()))
    }

    /// Sends a turn and opens the stream of its task's updates, subscribed before the turn
    /// starts so not one event is missed. Returns the stream and the task.
    pub async fn stream_turn(&self, turn: &Turn) -> Result<(Opened, Task), GatewayError> {
        self.here_or_refuse(turn).await?;
        let ctx = self.context_for(turn)?;
        let subscription = ctx.queue.subscribe_live()?;
        let (ctx, task) = self.begin_send_on(ctx, turn).await?;
        let model = ctx
            .task(&task)
            .ok_or(GatewayError::TaskNotFound(task.clone()))?;
        Ok((
            Opened {
                subscription,
                filter: Filter {
                    task: Some(task),
                    until_final: true,
                    until_input_required: false,
                    stored: ctx.flushed.get().cloned(),
                },
                context_id: ctx.id.clone(),
            },
            model,
        ))
    }

    /// Waits until a task settles (terminal or input-required); its model and context then.
    pub async fn settled_task(&self, task_id: &str) -> Result<(Task, String), GatewayError> {
        let ctx = self.context_of(task_id)?;
        ctx.settled(task_id).await;
        self.task(task_id)
    }

    /// A task's model and its context.
    pub fn task(&self, task_id: &str) -> Result<(Task, String), GatewayError> {
        let ctx = self.context_of(task_id)?;
        let model = ctx
            .task(task_id)
            .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned()))?;
        Ok((model, ctx.id.clone()))
    }

    /// One task's events after `last_event_id` (all retained ones when `None`); with
    /// `live_if_running`, a running task without a resume point streams from now on.
    pub fn task_stream(
        &self,
        task_id: &str,
        last_event_id: Option<&str>,
        live_if_running: bool,
    ) -> Result<Opened, GatewayError> {
        let ctx = self.context_of(task_id)?;
        let state = ctx
            .task_state(task_id)
            .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned()))?;
        let mut opened = Opened::task(
            &ctx.queue,
            task_id,
            ctx.id.clone(),
            !state.is_terminal(),
            last_event_id,
            live_if_running,
        )?;
        opened.filter.stored = ctx.flushed.get().cloned();
        Ok(opened)
    }

    /// Every event of one context after `last_event_id`.
    pub fn context_stream(
        &self,
        context_id: &str,
        last_event_id: Option<&str>,
    ) -> Result<Opened, GatewayError> {
        let ctx = self
            .contexts()
            .get(context_id)
            .cloned()
            .ok_or_else(|| GatewayError::ContextNotFound(context_id.to_owned()))?;
        Ok(Opened {
            subscription: ctx.queue.subscribe(last_event_id)?,
            filter: Filter::default(),
            context_id: ctx.id.clone(),
        })
    }

    fn context_of(&self, task_id: &str) -> Result<Arc<Context>, GatewayError> {
        let ctx_id = self
            .task_index()
            .get(task_id)
            .cloned()
            .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned()))?;
        self.contexts()
            .get(&ctx_id)
            .cloned()
            .ok_or_else(|| GatewayError::TaskNotFound(task_id.to_owned()))
    }

    /// The context a `message/send` addresses: the task's, the named one (restarted when its
    /// child was stopped), the attached socket, or a new child.
    fn context_for(&self, turn: &Turn) -> Result<Arc<Context>, GatewayError> {
        self.cluster_ready()?;
        if let Some(task) = &turn.task_id {
            return self.context_of(task);
        }
        if let Some(ctx_id) = &turn.context_id {
            let ctx = self
                .contexts()
                .get(ctx_id)
                .cloned()
                .ok_or_else(|| GatewayError::ContextNotFound(ctx_id.clone()))?;
            self.ensure_running(&ctx)?;
            return Ok(ctx);
        }
        if let Some(a) = &self.attached {
            self.ensure_running(a)?;
            return Ok(a.clone());
        }
        self.new_context()
    }

    fn running_children(contexts: &HashMap<String, Arc<Context>>) -> usize {
        contexts
            .values()
            .filter(|c| matches!(c.transport, Transport::Stdio(_)) && c.is_running())
            .count()
    }

    fn new_context(&self) -> Result<Arc<Context>, GatewayError> {
        self.new_context_with(uuid::Uuid::new_v4().to_string())
    }

    /// Every task the contexts keep, with its context (ListTasks reads and pages these).
    pub fn all_tasks(&self) -> Vec<(Task, String)> {
        let contexts: Vec<Arc<Context>> = self.contexts().values().cloned().collect();
        contexts
            .iter()
            .flat_map(|c| c.tasks().into_iter().map(|t| (t, c.id.clone())))
            .collect()
    }

    /// Whether a context has this id.
    pub fn has_context(&self, id: &str) -> bool {
        self.contexts().contains_key(id)
    }

    /// Starts a context under a client-chosen id (A2A lets a client name the context of its
    /// first message). Refused when the gateway attaches to one `sid --listen` socket (its one
    /// context has an id of its own), when the id is not a plain token, or at capacity.
    pub fn adopt_context(&self, id: &str) -> Result<(), GatewayError> {
        if self.has_context(id) {
            return Ok(());
        }
        if self.attached.is_some() {
            return Err(GatewayError::InvalidParams(format!(
                "contextId {id:?} is not this gateway's sid session; omit it to use the attached one"
            )));
        }
        let plain = |b: u8| b.is_ascii_alphanumeric() || b"-_.:".contains(&b);
        if id.is_empty() || id.len() > 128 || !id.bytes().all(plain) {
            return Err(GatewayError::InvalidParams(
                "contextId: a new context's id must be 1 to 128 letters, digits or - _ . :".into(),
            ));
        }
        self.new_context_with(id.to_owned()).map(|_| ())
    }

    fn new_context_with(&self, id: String) -> Result<Arc<Context>, GatewayError> {
        let mut contexts = self.contexts();
        if let Some(c) = contexts.get(&id) {
            return Ok(c.clone());
        }
        if Self::running_children(&contexts) >= self.cfg.max_contexts {
            return Err(GatewayError::TooManyContexts(self.cfg.max_contexts));
        }
        let ctx = Context::new(
            id,
            Transport::Stdio(self.cfg.command.clone()),
            self.cfg.replay_events,
            self.cfg.max_subscribers,
            self.cfg.max_queued_requests,
            Duration::from_millis(self.cfg.lag_grace_ms),
        );
        self.export(&ctx)?;
        ctx.spawn_child(&self.cfg.command, None).map_err(|e| {
            GatewayError::SidUnavailable(format!("cannot start {:?}: {e}", self.cfg.command))
        })?;
        contexts.insert(ctx.id.clone(), ctx.clone());
        metrics::gauge!("wiregate_sid_contexts").set(contexts.len() as f64);
        Ok(ctx)
    }

    fn ensure_running(&self, ctx: &Arc<Context>) -> Result<(), GatewayError> {
        if ctx.is_running() {
            return Ok(());
        }
        let Transport::Stdio(command) = &ctx.transport else {
            return Err(GatewayError::SidUnavailable(
                ctx.exit_reason()
                    .unwrap_or_else(|| "the sid socket is reconnecting".into()),
            ));
        };
        let contexts = self.contexts();
        if Self::running_children(&contexts) >= self.cfg.max_contexts {
            return Err(GatewayError::TooManyContexts(self.cfg.max_contexts));
        }
        // The child was stopped (idle, or it exited): resume the same sid session.
        ctx.spawn_child(command, ctx.session_id())
            .map_err(|e| GatewayError::SidUnavailable(format!("cannot restart sid: {e}")))
    }

    async fn begin_send(&self, turn: &Turn) -> Result<(Arc<Context>, String), GatewayError> {
        let ctx = self.context_for(turn)?;
        self.begin_send_on(ctx, turn).await
    }

    /// Starts a turn, or answers the open prompt of `taskId`; returns the task.
    async fn begin_send_on(
        &self,
        ctx: Arc<Context>,
        turn: &Turn,
    ) -> Result<(Arc<Context>, String), GatewayError> {
        let text = turn.text.clone();
        if let Some(task) = turn.task_id.clone() {
            self.answer_prompt(&ctx, &task, text, turn.message_id.as_deref())
                .await?;
            return Ok((ctx, task));
        }
        if let Some(busy) = ctx.active_turn().filter(|_| !turn.queue) {
            return Err(GatewayError::SidBusy(format!(
                "context {} is running task {busy}; wait for it, or answer its prompt with taskId",
                ctx.id
            )));
        }
        let task = uuid::Uuid::new_v4().to_string();
        self.task_index().insert(task.clone(), ctx.id.clone());
        let message_id = turn.message_id.as_deref();
        let started = match turn.queue {
            true => ctx.start_or_queue_turn(&task, text, message_id),
            false => ctx.start_turn(&task, text, message_id),
        };
        if let Err(e) = started {
            self.task_index().remove(&task);
            return Err(gone(e));
        }
        Ok((ctx, task))
    }

    async fn answer_prompt(
        &self,
        ctx: &Arc<Context>,
        task: &str,
        text: String,
        message_id: Option<&str>,
    ) -> Result<(), GatewayError> {
        let Some(prompt_id) = ctx.open_prompt(task) else {
            let state = ctx.task_state(task).map_or("unknown", TaskState::as_str);
            return Err(GatewayError::InvalidParams(format!(
                "task {task} is not waiting for input (it is {state}); send without taskId to start a new task"
            )));
        };
        // Noted before sid hears it, so the history keeps the order of the exchange.
        ctx.note_answer(task, &text, message_id);
        let (_, answered) = ctx
            .request(Op::PromptResponse {
                prompt_id: prompt_id.clone(),
                response: text,
            })
            .map_err(gone)?;
        // sid acknowledges an accepted answer with prompt_ack (no result); a refusal is a result.
        let moved_on =
            ctx.wait_until(|c| c.open_prompt(task).as_deref() != Some(prompt_id.as_str()));
        tokio::select! {
            r = answered => match r {
                Ok(ResultLine { ok: false, error, .. }) => Err(sid_error(error.as_ref())),
                _ => Ok(()),
            },
            _ = moved_on => Ok(()),
        }
    }

    /// Interrupts a task's turn; a finished task cannot be canceled.
    pub async fn cancel(&self, id: &str) -> Result<Canceled, GatewayError> {
        let ctx = self.context_of(id)?;
        let state = ctx
            .task_state(id)
            .ok_or_else(|| GatewayError::TaskNotFound(id.to_owned()))?;
        if state.is_terminal() {
            return Err(GatewayError::TaskNotCancelable {
                id: id.to_owned(),
                state: state.as_str(),
            });
        }
        // A turn still queued never reached sid: it ends here, the running turn untouched.
        if ctx.cancel_queued(id) {
            let task = ctx
                .task(id)
                .ok_or_else(|| GatewayError::TaskNotFound(id.to_owned()))?;
            return Ok(Canceled {
                task,
                context_id: ctx.id.clone(),
                note: None,
            });
        }
        let (_, answer) = ctx.request(Op::Interrupt).map_err(gone)?;
        let note = match tokio::time::timeout(CANCEL_WAIT, answer).await {
            Ok(Ok(ResultLine {
                ok: false, error, ..
            })) => return Err(sid_error(error.as_ref())),
            Ok(Ok(_)) => {
                // sid took the interrupt (over --listen, or at a prompt): wait briefly for the
                // turn to end, so the answer shows the task canceled.
                let ended = ctx.wait_until(|c| c.task_state(id).is_none_or(TaskState::is_terminal));
                let _ = tokio::time::timeout(CANCEL_WAIT, ended).await;
                None
            }
            Ok(Err(_)) => return Err(GatewayError::SidUnavailable("sid stopped".into())),
            Err(_) => Some(
                "sid over stdio reads the interrupt only when the current turn ends; the task \
                 finishes its turn first",
            ),
        };
        let task = ctx
            .task(id)
            .ok_or_else(|| GatewayError::TaskNotFound(id.to_owned()))?;
        Ok(Canceled {
            task,
            context_id: ctx.id.clone(),
            note,
        })
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

    /// Stops idle children; forgets contexts stopped for long (with their replay buffers) and
    /// index entries of tasks their context no longer keeps, so the registry stays bounded.
    async fn reap_idle(&self) {
        let idle = Duration::from_millis(self.cfg.idle_timeout_ms);
        let retention = idle * CONTEXT_RETENTION_FACTOR;
        let (stale, forgotten): (Vec<Arc<Context>>, Vec<Arc<Context>>) = {
            let contexts = self.contexts();
            let child = |c: &Arc<Context>| matches!(c.transport, Transport::Stdio(_));
            let quiet = |c: &Arc<Context>| c.active_turn().is_none();
            (
                contexts
                    .values()
                    .filter(|c| child(c) && c.is_running() && quiet(c) && c.idle_for() >= idle)
                    .cloned()
                    .collect(),
                contexts
                    .values()
                    .filter(|c| {
                        child(c) && !c.is_running() && quiet(c) && c.idle_for() >= retention
                    })
                    .cloned()
                    .collect(),
            )
        };
        for c in stale {
            tracing::info!(context = %c.id, "stopping an idle sid");
            c.stop(STOP_GRACE).await;
        }
        if !forgotten.is_empty() {
            let mut contexts = self.contexts();
            for c in &forgotten {
                tracing::info!(context = %c.id, "forgetting a long-stopped context");
                c.close();
                contexts.remove(&c.id);
            }
            metrics::gauge!("wiregate_sid_contexts").set(contexts.len() as f64);
        }
        let contexts = self.contexts().clone();
        self.task_index().retain(|task, ctx| {
            contexts
                .get(ctx)
                .is_some_and(|c| c.task_state(task).is_some())
        });
    }

    /// Stops every sid and closes every stream, giving each sid at most `grace` (and never more
    /// than its usual stop grace) to exit before it is killed.
    pub async fn shutdown(&self, grace: Duration) {
        let grace = STOP_GRACE.min(grace);
        let all: Vec<Arc<Context>> = self.contexts().values().cloned().collect();
        futures_util::future::join_all(all.iter().map(|c| async move {
            c.close();
            c.stop(grace).await;
        }))
        .await;
    }

    /// Whether every context is healthy (running, or stopped on purpose).
    pub fn healthy(&self) -> bool {
        self.attached.as_ref().is_none_or(|a| a.is_running())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sid_error_codes_map_to_distinct_jsonrpc_errors() {
        let code = |c: Option<&str>| {
            sid_error(Some(&ServerError {
                code: c.map(str::to_owned),
                message: "m".into(),
            }))
            .to_jsonrpc()
            .code
        };
        let codes = [
            code(Some("busy")),
            code(Some("stale_prompt")),
            code(Some("invalid_request")),
            code(None),
        ];
        assert_eq!(codes, [-32060, -32061, -32602, -32062]);
    }
}
