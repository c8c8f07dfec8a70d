//! One sid session (a *context*): the child process or attached socket, the task model, the
//! event queue. The I/O tasks ([`transport`](super::transport)) only move lines; what a line
//! means is decided in [`observe`](super::observe) and the task model's [`Tracker`], and the
//! order turns reach sid in [`turn_queue`](super::turn_queue).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch, Notify};

use super::reach::Transport;
use crate::events::ReplayLog;
use crate::model::event::{A2aEvent, EventKind};
use crate::model::task::{Task, TaskState, Tracker, Update};
use crate::wire::raw::{ClientLine, Hello, Op, ResultLine};

/// Why a request to sid could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SendError {
    /// sid is not running or the socket is down.
    Gone(String),
    /// `sid.max_queued_requests` requests are already waiting on this context.
    Busy(String),
}

/// sid's answer to one request. Dropping it (its caller went away) forgets the request, so a
/// busy context does not keep an entry per abandoned caller.
#[derive(Debug)]
pub(crate) struct Answer {
    rx: oneshot::Receiver<ResultLine>,
    ctx: std::sync::Weak<Context>,
    request_id: String,
}

impl std::future::Future for Answer {
    type Output = Result<ResultLine, oneshot::error::RecvError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.rx).poll(cx)
    }
}

impl Drop for Answer {
    fn drop(&mut self) {
        if let Some(ctx) = self.ctx.upgrade() {
            ctx.lock().pending.remove(&self.request_id);
        }
    }
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) tracker: Tracker,
    pub(super) pending: HashMap<String, oneshot::Sender<ResultLine>>,
    pub(super) active_turn: Option<String>,
    /// Turns accepted while another ran (task id, text), started in order as each turn ends:
    /// sid runs one turn of a session at a time.
    pub(super) queued: VecDeque<(String, String)>,
    pub(super) hello: Option<Hello>,
    to_sid: Option<mpsc::Sender<String>>,
    kill: Option<Arc<Notify>>,
    pub(super) running: bool,
    /// Highest `sequence` seen from the current sid process (socket de-duplication).
    pub(super) last_seq: u64,
    pub(super) last_activity: Instant,
    next_request: u64,
    pub(super) exit_reason: Option<String>,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Context {
    /// Context id.
    pub id: String,
    /// The id again, shared by every text delta's `contextId` instead of copied into each.
    shared_id: Arc<str>,
    /// The transport.
    pub transport: Transport,
    /// Task updates of every task of this context.
    pub queue: Arc<ReplayLog>,
    inner: Mutex<Inner>,
    /// Bumped whenever a task changes, so waiters re-check.
    changed: watch::Sender<u64>,
    /// `true` while sid is running (child) or connected (socket).
    up: watch::Sender<bool>,
    /// `sid.max_queued_requests`: lines queued for sid, and requests awaiting a result.
    pub(super) max_queued: usize,
    /// `sid.lag_grace_ms`: how long sid's output waits for a subscriber that lags.
    pub(super) lag_grace: Duration,
    /// `sid.max_line_bytes`: the longest line of sid's output read; longer ones are skipped.
    pub(super) max_line: usize,
    /// With `[cluster]`: how far this context's events are written to Redis.
    pub(super) flushed: std::sync::OnceLock<crate::cluster::log::Flushed>,
    /// The caller that started it (`kind:id`, with `[auth]`); unset: any caller's.
    pub(super) owner: std::sync::OnceLock<Arc<str>>,
    /// The spans of its turns that requests recording spans started.
    pub(super) turn_spans: super::turn_spans::TurnSpans,
}

impl Context {
    /// A context not yet started.
    pub(crate) fn new(
        id: String,
        transport: Transport,
        replay: usize,
        max_subscribers: usize,
        max_queued: usize,
        lag_grace: Duration,
        max_line: usize,
    ) -> Arc<Self> {
        let queue = ReplayLog::new(replay).with_max_subscribers(max_subscribers);
        Self::with_queue(id, transport, queue, max_queued, lag_grace, max_line)
    }

    /// A context not yet started whose events go into `queue` (one continuing the numbering
    /// of a context another replica ran, `[cluster]`).
    pub(crate) fn with_queue(
        id: String,
        transport: Transport,
        queue: ReplayLog,
        max_queued: usize,
        lag_grace: Duration,
        max_line: usize,
    ) -> Arc<Self> {
        Arc::new(Context {
            shared_id: id.as_str().into(),
            id,
            transport,
            queue: Arc::new(queue),
            inner: Mutex::new(Inner {
                tracker: Tracker::default(),
                pending: HashMap::new(),
                active_turn: None,
                queued: VecDeque::new(),
                hello: None,
                to_sid: None,
                kill: None,
                running: false,
                last_seq: 0,
                last_activity: Instant::now(),
                next_request: 0,
                exit_reason: None,
            }),
            changed: watch::channel(0).0,
            up: watch::channel(false).0,
            max_queued: max_queued.max(1),
            lag_grace,
            max_line,
            flushed: std::sync::OnceLock::new(),
            owner: std::sync::OnceLock::new(),
            turn_spans: Default::default(),
        })
    }

    #[inline]
    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether sid is running (or the socket connected).
    pub(crate) fn is_running(&self) -> bool {
        self.lock().running
    }

    /// sid's session id, once `hello` was seen.
    pub(crate) fn session_id(&self) -> Option<String> {
        self.lock().hello.as_ref().map(|h| h.session_id.clone())
    }

    /// The task running now, if any.
    pub(crate) fn active_turn(&self) -> Option<String> {
        self.lock().active_turn.clone()
    }

    /// Time since the last request or line.
    pub(crate) fn idle_for(&self) -> Duration {
        self.lock().last_activity.elapsed()
    }

    /// Why sid last stopped, if it did.
    pub(crate) fn exit_reason(&self) -> Option<String> {
        self.lock().exit_reason.clone()
    }

    /// A task's state.
    pub(crate) fn task_state(&self, task_id: &str) -> Option<TaskState> {
        self.lock().tracker.task(task_id).map(|t| t.state)
    }

    /// A copy of a task's model.
    pub(crate) fn task(&self, task_id: &str) -> Option<Task> {
        self.lock().tracker.task(task_id).cloned()
    }

    /// The caller a task belongs to (tenancy).
    pub(crate) fn task_owner(&self, task_id: &str) -> Option<String> {
        self.lock()
            .tracker
            .task(task_id)
            .and_then(|t| t.owner.clone())
    }

    /// Copies of every task this context keeps.
    pub(crate) fn tasks(&self) -> Vec<Task> {
        self.lock().tracker.tasks().cloned().collect()
    }

    /// Takes over tasks another replica ran, which were still open when it was lost: each is
    /// kept here, marked failed with `reason`, and the update goes to its subscribers.
    pub(crate) fn adopt_lost(&self, tasks: Vec<Task>, reason: &str) {
        let updates: Vec<Update> = {
            let mut inner = self.lock();
            let now = SystemTime::now();
            tasks
                .into_iter()
                .filter_map(|t| {
                    let id = t.id.clone();
                    let u = inner.tracker.fail_lost(t, reason);
                    inner.tracker.touch(&id, now);
                    u
                })
                .collect()
        };
        self.publish(updates);
    }

    /// Records a prompt answer in the task's history.
    pub(crate) fn note_answer(&self, task_id: &str, text: &str, message_id: Option<&str>) {
        self.lock().tracker.note_answer(task_id, text, message_id);
    }

    /// A task's snapshot.
    pub(crate) fn snapshot(&self, task_id: &str) -> Option<Value> {
        self.lock()
            .tracker
            .task(task_id)
            .map(|t| t.snapshot(&self.id))
    }

    /// The open prompt's id, while the task waits for input.
    pub(crate) fn open_prompt(&self, task_id: &str) -> Option<String> {
        let inner = self.lock();
        let t = inner.tracker.task(task_id)?;
        (t.state == TaskState::InputRequired)
            .then(|| t.prompt.as_ref().map(|p| p.prompt_id.clone()))
            .flatten()
    }

    /// Waits until `task_id` settles (terminal or input-required), or sid goes away.
    pub(crate) async fn settled(&self, task_id: &str) -> Option<TaskState> {
        self.wait_until(|c| c.task_state(task_id).is_none_or(TaskState::is_settled))
            .await;
        self.task_state(task_id)
    }

    /// Waits until `done` holds, re-checking whenever a task changes.
    pub(crate) async fn wait_until(&self, mut done: impl FnMut(&Self) -> bool) {
        let mut rx = self.changed.subscribe();
        while !done(self) {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// A fresh request id for a gateway-initiated request.
    pub(crate) fn next_request_id(&self) -> String {
        let mut inner = self.lock();
        inner.next_request += 1;
        format!(
            "wg-{}-{}",
            &self.id[..8.min(self.id.len())],
            inner.next_request
        )
    }

    /// Sends a request whose `result` is awaited on the returned [`Answer`].
    pub(crate) fn request(self: &Arc<Self>, op: Op) -> Result<(String, Answer), SendError> {
        let request_id = self.next_request_id();
        let (tx, rx) = oneshot::channel();
        let mut inner = self.lock();
        if inner.pending.len() >= self.max_queued {
            return Err(self.busy());
        }
        let line = ClientLine::new(request_id.clone(), op);
        self.write(&mut inner, &line)?;
        inner.pending.insert(request_id.clone(), tx);
        let answer = Answer {
            rx,
            ctx: Arc::downgrade(self),
            request_id: request_id.clone(),
        };
        Ok((request_id, answer))
    }

    fn busy(&self) -> SendError {
        SendError::Busy(format!(
            "sid context {} already has {} requests waiting (sid.max_queued_requests); \
             try again when its turn ends",
            self.id, self.max_queued
        ))
    }

    pub(super) fn write(&self, inner: &mut Inner, line: &ClientLine) -> Result<(), SendError> {
        inner.last_activity = Instant::now();
        let text = serde_json::to_string(line).expect("a client line always serialises");
        match inner.to_sid.as_ref().map(|tx| tx.try_send(text)) {
            Some(Ok(())) => Ok(()),
            Some(Err(mpsc::error::TrySendError::Full(_))) => Err(self.busy()),
            _ => Err(SendError::Gone(
                inner
                    .exit_reason
                    .clone()
                    .unwrap_or_else(|| "sid is not connected".into()),
            )),
        }
    }

    pub(super) fn publish(&self, updates: impl IntoIterator<Item = Update>) {
        self.publish_at(updates, SystemTime::now());
    }

    /// [`publish`](Self::publish), the events stamped with `now`.
    pub(super) fn publish_at(&self, updates: impl IntoIterator<Item = Update>, now: SystemTime) {
        // Waiters watch task states and prompts, which only status updates change; a text
        // delta wakes nobody.
        let mut status = false;
        for u in updates {
            status |= u.kind == EventKind::Status;
            if u.kind == EventKind::Status && u.is_final() {
                let state = u.data.state();
                let failed = matches!(state, Some("failed" | "TASK_STATE_FAILED"));
                self.turn_spans.end(&u.task_id, state, failed);
            }
            let mut data = u.data;
            data.set_context(&self.shared_id);
            // A closed queue (context shut down) drops the update quietly.
            let _ = self
                .queue
                .push(A2aEvent::at(u.kind, Some(u.task_id), data, now));
        }
        if status {
            self.changed.send_modify(|n| *n += 1);
        }
    }

    /// sid went away: fail what was open, refuse what was pending.
    pub(crate) fn on_down(&self, reason: String, fail_tasks: bool) {
        let mut inner = self.lock();
        inner.running = false;
        inner.to_sid = None;
        inner.kill = None;
        inner.exit_reason = Some(reason.clone());
        inner.pending.clear();
        let failed = if fail_tasks {
            inner.active_turn = None;
            inner.queued.clear();
            inner.tracker.fail_open(&reason)
        } else {
            Vec::new()
        };
        drop(inner);
        self.up.send_replace(false);
        self.publish(failed);
    }

    /// Fails open tasks (the socket stayed down too long).
    pub(crate) fn fail_open(&self, reason: &str) {
        let mut inner = self.lock();
        inner.active_turn = None;
        inner.queued.clear();
        let failed = inner.tracker.fail_open(reason);
        drop(inner);
        self.publish(failed);
    }

    pub(super) fn on_up(&self, to_sid: mpsc::Sender<String>, kill: Option<Arc<Notify>>) {
        let mut inner = self.lock();
        if kill.is_some() {
            // A new child process counts its sequence from 1 again.
            inner.last_seq = 0;
        }
        inner.to_sid = Some(to_sid);
        inner.kill = kill;
        inner.running = true;
        inner.exit_reason = None;
        inner.last_activity = Instant::now();
        drop(inner);
        self.up.send_replace(true);
    }

    /// Asks sid to stop: closes its stdin (sid exits on EOF), kills it after `grace`.
    pub(crate) async fn stop(&self, grace: Duration) {
        let kill = {
            let mut inner = self.lock();
            inner.to_sid = None;
            inner.kill.clone()
        };
        if !self.is_running() {
            return;
        }
        let mut up = self.up.subscribe();
        if tokio::time::timeout(grace, up.wait_for(|u| !*u))
            .await
            .is_err()
        {
            if let Some(k) = kill {
                k.notify_one();
            }
            let _ = tokio::time::timeout(Duration::from_secs(5), up.wait_for(|u| !*u)).await;
        }
    }

    /// Closes the event queue: subscribers end after what they have.
    pub(crate) fn close(&self) {
        self.queue.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(max_queued: usize) -> (Arc<Context>, mpsc::Receiver<String>) {
        let ctx = Context::new(
            "c".into(),
            Transport::Socket(String::new()),
            8,
            8,
            max_queued,
            Duration::from_millis(100),
            1 << 20,
        );
        let (tx, rx) = mpsc::channel(max_queued);
        ctx.on_up(tx, None);
        (ctx, rx)
    }

    #[test]
    fn a_caller_that_leaves_forgets_its_request() {
        let (ctx, _rx) = up(4);
        let (_, a) = ctx.request(Op::Interrupt).unwrap();
        let (_, b) = ctx.request(Op::Interrupt).unwrap();
        assert_eq!(ctx.lock().pending.len(), 2);
        drop(a);
        assert_eq!(ctx.lock().pending.len(), 1);
        drop(b);
        assert!(ctx.lock().pending.is_empty());
    }

    #[test]
    fn requests_beyond_the_bound_are_busy() {
        // Waiting for answers: the lines went out, the answers did not come.
        let (ctx, mut rx) = up(2);
        let _a = ctx.request(Op::Interrupt).unwrap();
        let _b = ctx.request(Op::Interrupt).unwrap();
        while rx.try_recv().is_ok() {}
        assert!(matches!(
            ctx.request(Op::Interrupt),
            Err(SendError::Busy(_))
        ));
        // Lines sid has not read: the writer's queue is full.
        let (ctx, _rx) = up(2);
        ctx.start_turn("t1", "x".into(), None, None).unwrap();
        ctx.start_turn("t2", "y".into(), None, None).unwrap();
        assert!(matches!(
            ctx.start_turn("t3", "z".into(), None, None),
            Err(SendError::Busy(_))
        ));
    }
}
