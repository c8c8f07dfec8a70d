//! One sid session (a *context*): the child process or attached socket, the task model, the
//! event queue. The I/O tasks here only move lines; what a line means is decided in
//! [`mapping`](super::mapping).

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch, Notify};

use super::lines::Lines;
use crate::events::EventQueue;
use crate::model::event::{A2aEvent, EventKind};
use crate::model::task::{Task, TaskState, Tracker, Update};
use crate::wire::raw::{ClientLine, DeltaLine, Hello, Op, ResultLine, ServerLine, ServerMessage};

/// How the context reaches sid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    /// A child process on stdin/stdout; sid reads nothing during a turn.
    Stdio(Vec<String>),
    /// An attached `sid --listen` socket (`unix:///path` or `tcp://host:port`).
    Socket(String),
}

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
struct Inner {
    tracker: Tracker,
    pending: HashMap<String, oneshot::Sender<ResultLine>>,
    active_turn: Option<String>,
    /// Turns accepted while another ran (task id, text), started in order as each turn ends:
    /// sid runs one turn of a session at a time.
    queued: VecDeque<(String, String)>,
    hello: Option<Hello>,
    to_sid: Option<mpsc::Sender<String>>,
    kill: Option<Arc<Notify>>,
    running: bool,
    /// Highest `sequence` seen from the current sid process (socket de-duplication).
    last_seq: u64,
    last_activity: Instant,
    next_request: u64,
    exit_reason: Option<String>,
}

impl Inner {
    /// Counts a line sid printed as activity and tells whether it is news: sid numbers its
    /// lines from 1 per process (0 is a line outside the numbering), and a replay after a
    /// reconnect repeats lines already seen, which are dropped. The one check of a line's
    /// sequence, for messages ([`Context::observe`]) and text deltas ([`Context::on_delta`]).
    fn take_line(&mut self, seq: u64) -> bool {
        self.last_activity = Instant::now();
        if seq != 0 {
            if seq <= self.last_seq {
                return false;
            }
            self.last_seq = seq;
        }
        true
    }
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
    pub queue: Arc<EventQueue>,
    inner: Mutex<Inner>,
    /// Bumped whenever a task changes, so waiters re-check.
    changed: watch::Sender<u64>,
    /// `true` while sid is running (child) or connected (socket).
    up: watch::Sender<bool>,
    /// `sid.max_queued_requests`: lines queued for sid, and requests awaiting a result.
    max_queued: usize,
    /// `sid.lag_grace_ms`: how long sid's output waits for a subscriber that lags.
    lag_grace: Duration,
    /// With `[cluster]`: how far this context's events are written to Redis.
    pub(super) flushed: std::sync::OnceLock<crate::cluster::log::Flushed>,
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
    ) -> Arc<Self> {
        let queue = EventQueue::new(replay).with_max_subscribers(max_subscribers);
        Self::with_queue(id, transport, queue, max_queued, lag_grace)
    }

    /// A context not yet started whose events go into `queue` (one continuing the numbering
    /// of a context another replica ran, `[cluster]`).
    pub(crate) fn with_queue(
        id: String,
        transport: Transport,
        queue: EventQueue,
        max_queued: usize,
        lag_grace: Duration,
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
            flushed: std::sync::OnceLock::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
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

    /// Starts a user turn as task `task_id`; `message_id` is the client's id of the message.
    pub(crate) fn start_turn(
        &self,
        task_id: &str,
        text: String,
        message_id: Option<&str>,
    ) -> Result<(), SendError> {
        let mut inner = self.lock();
        self.start_locked(&mut inner, task_id, text, message_id)
    }

    fn start_locked(
        &self,
        inner: &mut Inner,
        task_id: &str,
        text: String,
        message_id: Option<&str>,
    ) -> Result<(), SendError> {
        inner
            .tracker
            .begin_turn(task_id, Some((&text, message_id)), SystemTime::now());
        inner.active_turn = Some(task_id.to_owned());
        let line = ClientLine::new(task_id, Op::UserTurn { text });
        self.write(inner, &line).inspect_err(|_| {
            inner.active_turn = None;
        })
    }

    /// Starts a user turn as task `task_id`, or, while another turn of this context runs (or
    /// waits for input), queues it as a submitted task that starts when the turns before it
    /// have ended; at most `sid.max_queued_requests` wait.
    pub(crate) fn start_or_queue_turn(
        &self,
        task_id: &str,
        text: String,
        message_id: Option<&str>,
    ) -> Result<(), SendError> {
        let mut inner = self.lock();
        if inner.active_turn.is_none() && inner.queued.is_empty() {
            return self.start_locked(&mut inner, task_id, text, message_id);
        }
        if inner.queued.len() >= self.max_queued {
            return Err(SendError::Busy(format!(
                "sid context {} already has {} turns queued (sid.max_queued_requests)",
                self.id, self.max_queued
            )));
        }
        if !inner.running {
            return Err(SendError::Gone(
                inner
                    .exit_reason
                    .clone()
                    .unwrap_or_else(|| "sid is not connected".into()),
            ));
        }
        let now = SystemTime::now();
        inner
            .tracker
            .begin_turn(task_id, Some((&text, message_id)), now);
        inner.queued.push_back((task_id.to_owned(), text));
        Ok(())
    }

    /// Cancels a queued task (sid never hears of it); `false` when it is not queued.
    pub(crate) fn cancel_queued(&self, task_id: &str) -> bool {
        let mut inner = self.lock();
        let Some(pos) = inner.queued.iter().position(|(t, _)| t == task_id) else {
            return false;
        };
        inner.queued.remove(pos);
        let update = inner.tracker.cancel_unsent(task_id);
        if update.is_some() {
            inner.tracker.touch(task_id, SystemTime::now());
        }
        drop(inner);
        self.publish(update);
        true
    }

    /// The turn ended: sends the next queued one, if any.
    fn start_next(&self, inner: &mut Inner) {
        let Some((task_id, text)) = inner.queued.pop_front() else {
            return;
        };
        inner.active_turn = Some(task_id.clone());
        let line = ClientLine::new(&task_id, Op::UserTurn { text });
        if let Err(e) = self.write(inner, &line) {
            // sid is going away: the task fails with the others when it is gone.
            tracing::warn!(context = %self.id, task = %task_id, error = ?e, "a queued turn could not be sent");
        }
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

    fn write(&self, inner: &mut Inner, line: &ClientLine) -> Result<(), SendError> {
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

    fn publish(&self, updates: impl IntoIterator<Item = Update>) {
        self.publish_at(updates, SystemTime::now());
    }

    /// [`publish`](Self::publish), the events stamped with `now`.
    fn publish_at(&self, updates: impl IntoIterator<Item = Update>, now: SystemTime) {
        // Waiters watch task states and prompts, which only status updates change; a text
        // delta wakes nobody.
        let mut status = false;
        for u in updates {
            status |= u.kind == EventKind::Status;
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

    /// Handles one raw line (with its line break); a line that is not UTF-8 is counted and
    /// skipped like any other line that is not protocol 5.
    pub(crate) fn on_bytes(&self, raw: &[u8]) -> bool {
        match std::str::from_utf8(raw) {
            Ok(line) => self.on_line(line.trim_end_matches(['\n', '\r'])),
            Err(e) => {
                metrics::counter!("wiregate_sid_bad_lines_total").increment(1);
                tracing::warn!(context = %self.id, error = %e, "sid printed a line that is not UTF-8");
                false
            }
        }
    }

    /// Handles one line sid printed; `true` when it was the `replay_complete` marker.
    fn on_line(&self, line: &str) -> bool {
        if line.trim().is_empty() {
            return false;
        }
        let msg = match ServerLine::parse(line) {
            Ok(ServerLine::Delta(d)) => {
                self.on_delta(&d);
                return false;
            }
            Ok(ServerLine::Message(m)) => m,
            Err(e) => {
                metrics::counter!("wiregate_sid_bad_lines_total").increment(1);
                tracing::warn!(context = %self.id, error = %e, "sid printed a line that is not protocol 5");
                return false;
            }
        };
        let updates = self.observe(&msg);
        // Published outside the lock, in the order they were made.
        self.publish(updates);
        matches!(msg, ServerMessage::ReplayComplete(_))
    }

    /// A text delta, most lines of a stream: [`observe`](Self::observe) and
    /// [`publish`](Self::publish) of its message, sharing their check of the line
    /// ([`Inner::take_line`]) and leaving out what a delta never is (a `hello` or a `result`), so
    /// without building the message, a list of updates or a map. One clock read stamps both the
    /// task's change and the event, where a message's two steps read one each (a few lines a
    /// turn, against every line of a flood here).
    fn on_delta(&self, line: &DeltaLine<'_>) {
        let now = SystemTime::now();
        let made = {
            let mut inner = self.lock();
            if !inner.take_line(line.sequence) {
                return;
            }
            inner.tracker.observe_delta(line, now)
        };
        self.publish_at(made, now);
    }

    /// Updates the task model with one message; returns the task updates it makes.
    fn observe(&self, msg: &ServerMessage) -> Vec<Update> {
        let mut updates = Vec::new();
        let mut inner = self.lock();
        if let ServerMessage::Hello(h) = msg {
            // A replay repeats the very same hello; any other hello is a new sid process, whose
            // sequence starts again at 1.
            if inner.hello.as_ref() != Some(h) {
                inner.last_seq = 0;
                if inner.hello.is_some() && self.is_socket() {
                    inner.active_turn = None;
                    inner.queued.clear();
                    updates.extend(inner.tracker.fail_open("sid restarted behind the socket"));
                }
            }
            inner.hello = Some(h.clone());
        }
        if !inner.take_line(msg.sequence()) {
            return updates;
        }
        if let ServerMessage::Result(r) = msg {
            if let Some(tx) = inner.pending.remove(&r.request_id) {
                let _ = tx.send(r.clone());
            }
            if inner.active_turn.as_deref() == Some(r.request_id.as_str()) {
                inner.active_turn = None;
                self.start_next(&mut inner);
            }
        }
        let made = inner.tracker.observe(msg);
        if let Some(u) = &made {
            inner.tracker.touch(&u.task_id, SystemTime::now());
        }
        updates.extend(made);
        updates
    }

    fn is_socket(&self) -> bool {
        matches!(self.transport, Transport::Socket(_))
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

    fn on_up(&self, to_sid: mpsc::Sender<String>, kill: Option<Arc<Notify>>) {
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

    /// Runs sid as a child (with `--resume SESSION` when given) until it exits.
    pub(crate) fn spawn_child(
        self: &Arc<Self>,
        command: &[String],
        resume: Option<String>,
    ) -> std::io::Result<()> {
        let mut cmd = tokio::process::Command::new(&command[0]);
        cmd.args(&command[1..]);
        if let Some(s) = &resume {
            cmd.args(["--resume", s]);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = mpsc::channel(self.max_queued);
        let kill = Arc::new(Notify::new());
        self.on_up(tx, Some(kill.clone()));
        tokio::spawn(write_lines(stdin, rx));
        let id = self.id.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                tracing::info!(context = %id, "sid stderr: {l}");
            }
        });
        let ctx = self.clone();
        tokio::spawn(async move {
            let mut stdout = Lines::new(stdout, 64 * 1024);
            // One waiter for the kill signal, registered once rather than per line; polled
            // first, so a child that floods stdout can still be killed.
            let mut killed = std::pin::pin!(kill.notified());
            loop {
                tokio::select! {
                    biased;
                    _ = &mut killed => {
                        let _ = child.start_kill();
                        killed.set(kill.notified());
                    }
                    // sid waits (its pipe fills) while a subscriber catches up; see `room`.
                    more = async {
                        ctx.queue.room(ctx.lag_grace).await;
                        match stdout.next().await {
                            Ok(Some(line)) => {
                                ctx.on_bytes(line);
                                true
                            }
                            _ => false,
                        }
                    } => if !more {
                        break;
                    },
                }
            }
            let status = child.wait().await;
            let was_busy = ctx.active_turn().is_some();
            let reason = match status {
                Ok(s) if s.success() && !was_busy => format!("sid exited ({s})"),
                Ok(s) => format!("sid exited mid-task ({s})"),
                Err(e) => format!("sid could not be waited for: {e}"),
            };
            tracing::info!(context = %ctx.id, %reason, "sid stopped");
            ctx.on_down(reason, true);
        });
        Ok(())
    }

    /// Attaches to `sid --listen` and stays attached, reconnecting with backoff, until
    /// [`close`](Self::close). Open tasks fail when the socket stays down for `grace`.
    pub(crate) fn spawn_socket(self: &Arc<Self>, spec: String, grace: Duration) {
        let ctx = self.clone();
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(50);
            let mut down_since: Option<Instant> = None;
            while !ctx.queue.is_closed() {
                match connect(&spec).await {
                    Ok((read, write)) => {
                        backoff = Duration::from_millis(50);
                        down_since = None;
                        let (tx, rx) = mpsc::channel(ctx.max_queued);
                        tokio::spawn(write_lines(write, rx));
                        let mut tx = Some(tx);
                        let mut read = Lines::new(read, 64 * 1024);
                        loop {
                            ctx.queue.room(ctx.lag_grace).await;
                            let Ok(Some(line)) = read.next().await else {
                                break;
                            };
                            // sid replays its history first; requests go out only once it is live.
                            let marker = ctx.on_bytes(line);
                            if marker {
                                if let Some(tx) = tx.take() {
                                    ctx.on_up(tx, None);
                                }
                            }
                        }
                        tracing::warn!(context = %ctx.id, "the sid socket dropped; reconnecting");
                        ctx.on_down("the sid socket dropped".into(), false);
                    }
                    Err(e) => {
                        tracing::debug!(context = %ctx.id, error = %e, "cannot reach the sid socket")
                    }
                }
                let since = *down_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= grace && ctx.active_turn().is_some() {
                    ctx.fail_open("the sid socket dropped and did not come back in time");
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        });
    }
}

async fn write_lines(mut w: impl AsyncWrite + Unpin, mut rx: mpsc::Receiver<String>) {
    while let Some(mut line) = rx.recv().await {
        line.push('\n');
        if w.write_all(line.as_bytes()).await.is_err() || w.flush().await.is_err() {
            break;
        }
    }
    let _ = w.shutdown().await;
}

type Halves = (
    Box<dyn AsyncRead + Send + Unpin>,
    Box<dyn AsyncWrite + Send + Unpin>,
);

async fn connect(spec: &str) -> std::io::Result<Halves> {
    if let Some(path) = spec.strip_prefix("unix://") {
        let s = tokio::net::UnixStream::connect(path).await?;
        let (r, w) = s.into_split();
        Ok((Box::new(r), Box::new(w)))
    } else if let Some(addr) = spec.strip_prefix("tcp://") {
        let s = tokio::net::TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let (r, w) = s.into_split();
        Ok((Box::new(r), Box::new(w)))
    } else {
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{spec}: want unix:///path or tcp://host:port"),
        ))
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
        ctx.start_turn("t1", "x".into(), None).unwrap();
        ctx.start_turn("t2", "y".into(), None).unwrap();
        assert!(matches!(
            ctx.start_turn("t3", "z".into(), None),
            Err(SendError::Busy(_))
        ));
    }
}
