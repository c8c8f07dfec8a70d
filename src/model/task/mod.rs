//! sid raw messages → A2A task updates, and the task model they build. Pure: no I/O, no clock
//! (the caller passes the time a task changed, see [`Tracker::touch`]).
//!
//! One [`Tracker`] per context attributes every server line to a task (a `user_turn`'s
//! `request_id`). `tool_output` carries sid's internal tool request id, so it is routed by
//! `tool_use_id`, learned from the preceding `tool_use_start`. A turn that carried an `error`
//! event ends `failed`, whatever its `result` says.

use std::collections::{HashMap, VecDeque};
use std::time::SystemTime;

use serde_json::{json, Map, Value};

use crate::model::event::EventKind;
use crate::model::payload::Payload;

// A child of this module, so that it reads the tracker's and the tasks' private fields.
mod observe;

/// A task's state, spelled as A2A spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    /// The turn was accepted.
    Submitted,
    /// The agent is working.
    Working,
    /// The agent waits for a prompt answer.
    InputRequired,
    /// The turn ended well.
    Completed,
    /// The turn ended badly.
    Failed,
    /// The turn was interrupted.
    Canceled,
}

impl TaskState {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Submitted => "submitted",
            TaskState::Working => "working",
            TaskState::InputRequired => "input-required",
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Canceled => "canceled",
        }
    }

    /// Reads the wire spelling back.
    pub fn parse(s: &str) -> Option<Self> {
        [
            TaskState::Submitted,
            TaskState::Working,
            TaskState::InputRequired,
            TaskState::Completed,
            TaskState::Failed,
            TaskState::Canceled,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }

    /// No further update will follow.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled
        )
    }

    /// `message/send` returns once a task is here.
    pub fn is_settled(self) -> bool {
        self.is_terminal() || self == TaskState::InputRequired
    }
}

/// An open prompt.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OpenPrompt {
    /// Id the answer must name.
    pub prompt_id: String,
    /// `confirmation`, …
    pub kind: String,
    /// The question.
    pub message: String,
    /// Allowed answers.
    pub choices: Vec<String>,
}

impl OpenPrompt {
    fn to_json(&self) -> Value {
        json!({"promptId": self.prompt_id, "kind": self.kind, "message": self.message,
               "choices": self.choices})
    }
}

/// Who said a message of a task's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The client: the turn's text, a prompt's answer.
    User,
    /// sid: a prompt's question, the turn's answer.
    Agent,
}

/// One message of a task's history.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HistoryMessage {
    /// Who said it.
    pub role: Role,
    /// What was said.
    pub text: String,
    /// The client's `messageId` for a user message; `{task}-{n}` for the rest.
    pub message_id: String,
}

/// Messages kept per task; the oldest go first (a long prompt exchange stays bounded).
pub const MAX_HISTORY: usize = 64;

/// What the bridge knows of one task. Serialisable whole, so replicas sharing state through
/// Redis (`[cluster]`) read the same model the replica running the task keeps.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Task {
    /// Task id (the `user_turn` request id).
    pub id: String,
    /// Current state.
    pub state: TaskState,
    /// Assistant text so far.
    pub response: String,
    /// The open prompt, while input is required.
    pub prompt: Option<OpenPrompt>,
    /// The first `error` event's message, or the failure's.
    pub error: Option<Value>,
    /// sid's `result.data`.
    pub result: Option<Value>,
    /// The conversation of the task, oldest first (at most [`MAX_HISTORY`]).
    pub history: VecDeque<HistoryMessage>,
    /// When the task last changed (its status timestamp).
    pub updated: SystemTime,
    /// The caller it belongs to (`kind:id`, with `[auth]`): only that caller sees it. `None`:
    /// a task any caller may read (one an anonymous caller started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Messages ever added to the history (numbers the generated ids).
    said: usize,
    /// An interrupt was seen.
    interrupted: bool,
    /// The final update was made; nothing more is attributed to the task.
    finished: bool,
    /// The tool call whose input is streaming, and the one whose result is.
    current_tool: Option<(String, String)>,
    current_result: Option<(String, String)>,
}

impl Task {
    fn new(id: &str) -> Self {
        Task {
            id: id.to_owned(),
            state: TaskState::Submitted,
            response: String::new(),
            prompt: None,
            error: None,
            result: None,
            history: VecDeque::new(),
            updated: SystemTime::UNIX_EPOCH,
            owner: None,
            said: 0,
            interrupted: false,
            finished: false,
            current_tool: None,
            current_result: None,
        }
    }

    /// Adds a message to the history, dropping the oldest beyond [`MAX_HISTORY`].
    fn say(&mut self, role: Role, text: &str, message_id: Option<&str>) {
        self.said += 1;
        let message_id = message_id
            .map(str::to_owned)
            .unwrap_or_else(|| format!("{}-{}", self.id, self.said));
        if self.history.len() >= MAX_HISTORY {
            self.history.pop_front();
        }
        self.history.push_back(HistoryMessage {
            role,
            text: text.to_owned(),
            message_id,
        });
    }

    /// The task as `tasks/get` and `message/send` return it.
    pub fn snapshot(&self, context_id: &str) -> Value {
        let mut status = Map::new();
        status.insert("state".into(), Value::from(self.state.as_str()));
        let message = match (&self.prompt, &self.error) {
            (Some(p), _) if self.state == TaskState::InputRequired => Some(p.message.clone()),
            (_, Some(e)) if self.state == TaskState::Failed => {
                e.get("message").and_then(Value::as_str).map(str::to_owned)
            }
            _ => None,
        };
        if let Some(m) = message {
            status.insert(
                "message".into(),
                json!({"role": "agent", "parts": [{"kind": "text", "text": m}]}),
            );
        }
        let mut metadata = Map::new();
        if let (Some(p), TaskState::InputRequired) = (&self.prompt, self.state) {
            metadata.insert("prompt".into(), p.to_json());
        }
        if let Some(e) = &self.error {
            metadata.insert("error".into(), e.clone());
        }
        if let Some(r) = &self.result {
            metadata.insert("result".into(), r.clone());
        }
        json!({
            "id": self.id,
            "contextId": context_id,
            "status": status,
            "artifacts": [{"name": "response", "parts": [{"kind": "text", "text": self.response}]}],
            "metadata": metadata,
        })
    }
}

/// One task update, before the session stamps ids and the context.
#[derive(Clone, Debug, PartialEq)]
pub struct Update {
    /// The task it belongs to.
    pub task_id: String,
    /// Status or artifact.
    pub kind: EventKind,
    /// The update's fields (`taskId` and `contextId` are added by the session).
    pub data: Payload,
}

impl Update {
    /// Whether this update ends its task.
    pub fn is_final(&self) -> bool {
        self.data.is_final()
    }
}

/// Tasks retained per context for `tasks/get` once they are done.
const RETAINED_TASKS: usize = 1024;

/// Attributes raw messages to tasks and keeps their model. See the module docs.
#[derive(Debug, Default)]
pub struct Tracker {
    /// By task id, hashed with foldhash rather than SipHash: every delta of a stream looks its
    /// task up here on the reader of sid's stdout (the ids are the gateway's own, the lines
    /// sid's; the seed is still random per map).
    tasks: HashMap<String, Task, foldhash::fast::RandomState>,
    order: VecDeque<String>,
    /// tool_use_id → (task id, tool name).
    tools: HashMap<String, (String, String)>,
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

impl Tracker {
    /// Registers a task the bridge is about to send as a `user_turn`.
    pub fn begin(&mut self, task_id: &str) {
        self.begin_turn(task_id, None, SystemTime::UNIX_EPOCH);
    }

    /// Registers a task with the user's message (its text and `messageId`) as its first
    /// history entry, at `now`.
    pub fn begin_turn(
        &mut self,
        task_id: &str,
        user: Option<(&str, Option<&str>)>,
        now: SystemTime,
    ) {
        if self.order.len() >= RETAINED_TASKS {
            if let Some(pos) = self
                .order
                .iter()
                .position(|id| self.tasks.get(id).is_none_or(|t| t.finished))
            {
                if let Some(old) = self.order.remove(pos) {
                    self.tasks.remove(&old);
                    self.tools.retain(|_, (t, _)| *t != old);
                }
            }
        }
        let mut task = Task::new(task_id);
        task.updated = now;
        if let Some((text, message_id)) = user {
            task.say(Role::User, text, message_id);
        }
        self.tasks.insert(task_id.to_owned(), task);
        self.order.push_back(task_id.to_owned());
    }

    /// Gives a task its owner (see [`Task::owner`]).
    pub fn own(&mut self, task_id: &str, owner: &str) {
        if let Some(t) = self.tasks.get_mut(task_id) {
            t.owner = Some(owner.to_owned());
        }
    }

    /// Marks a task changed at `now` (its status timestamp).
    pub fn touch(&mut self, task_id: &str, now: SystemTime) {
        if let Some(t) = self.tasks.get_mut(task_id) {
            t.updated = now;
        }
    }

    /// Every task kept, in no particular order.
    pub fn tasks(&self) -> impl Iterator<Item = &Task> {
        self.tasks.values()
    }

    /// Records the `messageId` the client gave a prompt answer (the ack carries no id of it).
    pub fn note_answer(&mut self, task_id: &str, text: &str, message_id: Option<&str>) {
        if let Some(t) = self.tasks.get_mut(task_id) {
            t.say(Role::User, text, message_id);
        }
    }

    /// A task, when known.
    pub fn task(&self, task_id: &str) -> Option<&Task> {
        self.tasks.get(task_id)
    }

    /// Tasks without their final update yet.
    pub fn open_tasks(&self) -> impl Iterator<Item = &Task> {
        self.tasks.values().filter(|t| !t.finished)
    }

    fn status(&mut self, task_id: &str, state: Option<TaskState>, extra: Value) -> Option<Update> {
        let task = self.tasks.get_mut(task_id)?;
        if let Some(s) = state {
            task.state = s;
        }
        let mut data = obj(extra);
        data.insert("state".into(), Value::from(task.state.as_str()));
        Some(Update {
            task_id: task_id.to_owned(),
            kind: EventKind::Status,
            data: data.into(),
        })
    }

    /// Cancels a task sid never heard of (queued behind another turn of its context).
    pub fn cancel_unsent(&mut self, task_id: &str) -> Option<Update> {
        let t = self.tasks.get_mut(task_id).filter(|t| !t.finished)?;
        t.finished = true;
        self.status(task_id, Some(TaskState::Canceled), json!({"final": true}))
    }

    /// Keeps a task another replica ran and fails it: that replica was lost mid-turn.
    pub fn fail_lost(&mut self, mut task: Task, reason: &str) -> Option<Update> {
        let id = task.id.clone();
        let error = json!({"code": "replica_lost", "message": reason});
        task.error = Some(error.clone());
        task.prompt = None;
        task.finished = true;
        task.current_tool = None;
        task.current_result = None;
        self.order.retain(|t| *t != id);
        self.order.push_back(id.clone());
        self.tasks.insert(id.clone(), task);
        self.status(
            &id,
            Some(TaskState::Failed),
            json!({"final": true, "error": error}),
        )
    }

    /// Fails every open task (sid exited or the socket is gone for good).
    pub fn fail_open(&mut self, reason: &str) -> Vec<Update> {
        let open: Vec<String> = self.open_tasks().map(|t| t.id.clone()).collect();
        open.into_iter()
            .filter_map(|id| {
                let error = json!({"code": "sid_gone", "message": reason});
                if let Some(t) = self.tasks.get_mut(&id) {
                    t.error = Some(error.clone());
                    t.prompt = None;
                    t.finished = true;
                }
                self.status(
                    &id,
                    Some(TaskState::Failed),
                    json!({"final": true, "error": error}),
                )
            })
            .collect()
    }
}
