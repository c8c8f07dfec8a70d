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
use crate::model::payload::{Payload, TextDelta};
use crate::wire::raw::DeltaArtifact;
use crate::wire::raw::{DeltaLine, Event, ServerMessage};

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

    /// A text delta's update, `{"artifact", "text", "append": true}`, without a map (most
    /// lines of a stream are deltas); `raw` is the text as sid's line wrote it, when known.
    fn delta(task_id: &str, artifact: DeltaArtifact, text: &str, raw: Option<&str>) -> Update {
        Update {
            task_id: task_id.to_owned(),
            kind: EventKind::Artifact,
            data: Payload::Delta(TextDelta::new(artifact, text, raw)),
        }
    }

    fn artifact(task_id: &str, data: Value) -> Option<Update> {
        Some(Update {
            task_id: task_id.to_owned(),
            kind: EventKind::Artifact,
            data: obj(data).into(),
        })
    }

    /// The update a text delta line makes, as [`observe`](Self::observe) makes it of the same
    /// line, with the task marked changed at `now` ([`touch`](Self::touch)): one lookup of the
    /// task, no message built, the text kept as the line escaped it.
    pub fn observe_delta(&mut self, line: &DeltaLine<'_>, now: SystemTime) -> Option<Update> {
        let task = self
            .tasks
            .get_mut(line.request_id.as_ref())
            .filter(|t| !t.finished)?;
        if line.artifact == DeltaArtifact::Response {
            task.response.push_str(&line.text);
        }
        task.updated = now;
        Some(Self::delta(
            &line.request_id,
            line.artifact,
            &line.text,
            line.raw_text,
        ))
    }

    /// The update one server message makes, if any; updates the task model. A finished task
    /// takes no more updates (a replay after a reconnect may repeat its lines).
    pub fn observe(&mut self, msg: &ServerMessage) -> Option<Update> {
        let owner = match msg {
            ServerMessage::Event(e) => match &e.event {
                Event::ToolOutput { tool_use_id, .. } => {
                    self.tools.get(tool_use_id).map(|(t, _)| t.as_str())
                }
                _ => Some(e.request_id.as_str()),
            },
            other => other.request_id(),
        };
        if owner
            .and_then(|t| self.tasks.get(t))
            .is_some_and(|t| t.finished)
        {
            return None;
        }
        match msg {
            ServerMessage::Hello(_) | ServerMessage::ReplayComplete(_) => None,
            ServerMessage::Request(r) => {
                self.tasks.get(&r.request_id)?;
                self.status(&r.request_id, Some(TaskState::Submitted), json!({}))
            }
            ServerMessage::Prompt(p) => {
                let prompt = OpenPrompt {
                    prompt_id: p.prompt_id.clone(),
                    kind: p.kind.clone(),
                    message: p.message.clone(),
                    choices: p.choices.clone(),
                };
                let task = self.tasks.get_mut(&p.request_id)?;
                let view = prompt.to_json();
                task.say(Role::Agent, &prompt.message, None);
                task.prompt = Some(prompt);
                self.status(
                    &p.request_id,
                    Some(TaskState::InputRequired),
                    json!({"prompt": view}),
                )
            }
            ServerMessage::PromptAck(a) => {
                let task = self.tasks.get_mut(&a.request_id)?;
                task.prompt = None;
                self.status(
                    &a.request_id,
                    Some(TaskState::Working),
                    json!({"promptId": a.prompt_id, "response": a.response}),
                )
            }
            ServerMessage::Result(r) => {
                let task = self.tasks.get_mut(&r.request_id)?;
                task.prompt = None;
                task.finished = true;
                if !task.response.is_empty() {
                    let answer = task.response.clone();
                    task.say(Role::Agent, &answer, None);
                }
                let (state, extra) = if !r.ok {
                    let error = json!({"code": r.error.as_ref().and_then(|e| e.code.clone()),
                                       "message": r.error.as_ref().map(|e| e.message.clone())});
                    task.error = Some(error.clone());
                    (TaskState::Failed, json!({"final": true, "error": error}))
                } else {
                    task.result = r.data.clone();
                    let result = r.data.clone().unwrap_or(Value::Null);
                    match (&task.error, task.interrupted) {
                        (_, true) => (
                            TaskState::Canceled,
                            json!({"final": true, "result": result}),
                        ),
                        (Some(e), false) => (
                            TaskState::Failed,
                            json!({"final": true, "result": result, "error": e}),
                        ),
                        (None, false) => (
                            TaskState::Completed,
                            json!({"final": true, "result": result}),
                        ),
                    }
                };
                self.status(&r.request_id, Some(state), extra)
            }
            ServerMessage::Event(e) => self.observe_event(&e.request_id, &e.event),
        }
    }

    fn observe_event(&mut self, request_id: &str, event: &Event) -> Option<Update> {
        if let Event::ToolOutput {
            tool_name,
            tool_use_id,
            stream,
            text,
            data_b64,
        } = event
        {
            // Routed by tool_use_id: request_id is sid's own tool request here.
            let (task_id, _) = self.tools.get(tool_use_id)?.clone();
            let mut data = json!({"artifact": format!("tool:{tool_name}"), "toolUseId": tool_use_id,
                                  "stream": stream, "append": true});
            match (text, data_b64) {
                (Some(t), _) => data["text"] = Value::from(t.clone()),
                (None, Some(b)) => data["dataB64"] = Value::from(b.clone()),
                (None, None) => {}
            }
            return Self::artifact(&task_id, data);
        }
        let task = self.tasks.get_mut(request_id)?;
        match event {
            Event::AgentStart { .. } => {
                self.status(request_id, Some(TaskState::Working), json!({}))
            }
            Event::AssistantTextDelta { text, .. } => {
                task.response.push_str(text);
                Some(Self::delta(request_id, DeltaArtifact::Response, text, None))
            }
            Event::ThinkingDelta { text, .. } => {
                Some(Self::delta(request_id, DeltaArtifact::Thinking, text, None))
            }
            Event::ToolUseStart {
                name, tool_use_id, ..
            } => {
                task.current_tool = Some((tool_use_id.clone(), name.clone()));
                self.tools
                    .insert(tool_use_id.clone(), (request_id.to_owned(), name.clone()));
                self.status(
                    request_id,
                    Some(TaskState::Working),
                    json!({"tool": {"name": name, "toolUseId": tool_use_id, "phase": "start"}}),
                )
            }
            Event::ToolInputDelta { partial_json, .. } => {
                let (id, name) = task.current_tool.clone().unwrap_or_default();
                self.status(
                    request_id,
                    None,
                    json!({"tool": {"name": name, "toolUseId": id, "phase": "input", "partialJson": partial_json}}),
                )
            }
            Event::ToolUseEnd { .. } => {
                let (id, name) = task.current_tool.take().unwrap_or_default();
                self.status(
                    request_id,
                    None,
                    json!({"tool": {"name": name, "toolUseId": id, "phase": "end"}}),
                )
            }
            Event::ToolResultStart {
                label,
                tool_use_id,
                is_error,
                ..
            } => {
                let name = self
                    .tools
                    .get(tool_use_id)
                    .map(|(_, n)| n.clone())
                    .unwrap_or_else(|| {
                        label
                            .as_deref()
                            .and_then(|l| l.strip_prefix("tool:"))
                            .unwrap_or("")
                            .to_owned()
                    });
                task.current_result = Some((tool_use_id.clone(), name.clone()));
                Self::artifact(
                    request_id,
                    json!({"artifact": format!("tool:{name}"), "toolUseId": tool_use_id,
                           "isError": is_error, "text": "", "append": false}),
                )
            }
            Event::ToolResultTextDelta { text, label, .. } => {
                let (id, name) = task.current_result.clone().unwrap_or_else(|| {
                    (
                        String::new(),
                        label
                            .as_deref()
                            .and_then(|l| l.strip_prefix("tool:"))
                            .unwrap_or("")
                            .to_owned(),
                    )
                });
                Self::artifact(
                    request_id,
                    json!({"artifact": format!("tool:{name}"), "toolUseId": id, "text": text, "append": true}),
                )
            }
            Event::ToolResultEnd { .. } => {
                let (id, name) = task.current_result.take().unwrap_or_default();
                Self::artifact(
                    request_id,
                    json!({"artifact": format!("tool:{name}"), "toolUseId": id, "text": "",
                           "append": true, "lastChunk": true}),
                )
            }
            Event::Info { message, .. } => self.status(
                request_id,
                None,
                json!({"message": message, "level": "info"}),
            ),
            Event::Error { message, .. } => {
                if task.error.is_none() {
                    task.error = Some(json!({"code": null, "message": message}));
                }
                self.status(
                    request_id,
                    None,
                    json!({"message": message, "level": "error"}),
                )
            }
            Event::Interrupted { .. } => {
                task.interrupted = true;
                self.status(request_id, Some(TaskState::Canceled), json!({}))
            }
            Event::ResponseFinish { .. } | Event::AgentFinish { .. } => None,
            Event::ToolOutput { .. } => None,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::raw::ServerLine;

    /// An update with its fields as a map, for reading them in assertions.
    struct Seen {
        task_id: String,
        kind: EventKind,
        data: Map<String, Value>,
    }

    impl Seen {
        fn is_final(&self) -> bool {
            self.data.get("final").and_then(Value::as_bool) == Some(true)
        }
    }

    fn seen(u: Update) -> Seen {
        Seen {
            task_id: u.task_id,
            kind: u.kind,
            data: u.data.into_fields(),
        }
    }

    fn recording(file: &str) -> String {
        let path = format!(
            "{}/tests/data/sid-raw-v5/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(path).unwrap()
    }

    fn replay(file: &str, task: &str) -> (Tracker, Vec<Seen>) {
        let text = recording(file);
        let mut t = Tracker::default();
        t.begin(task);
        let updates = text
            .lines()
            .filter_map(|l| t.observe(&serde_json::from_str(l).unwrap()))
            .map(seen)
            .collect();
        (t, updates)
    }

    /// A delta line read as a [`DeltaLine`] makes the very update (and task) its message makes.
    #[test]
    fn observe_delta_is_observe() {
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(7);
        let mut deltas = 0;
        for file in [
            "out_turn.jsonl",
            "out_tool.jsonl",
            "out_basic.jsonl",
            "out_err.jsonl",
        ] {
            let (mut fast, mut slow) = (Tracker::default(), Tracker::default());
            fast.begin("t1");
            slow.begin("t1");
            for line in recording(file).lines() {
                match ServerLine::parse(line).unwrap() {
                    ServerLine::Delta(d) => {
                        deltas += 1;
                        let made = slow.observe(&d.clone().into_message());
                        if let Some(u) = &made {
                            slow.touch(&u.task_id, now);
                        }
                        assert_eq!(fast.observe_delta(&d, now), made, "{line}");
                    }
                    ServerLine::Message(m) => assert_eq!(fast.observe(&m), slow.observe(&m)),
                }
            }
            let (a, b) = (fast.task("t1").unwrap(), slow.task("t1").unwrap());
            assert_eq!((&a.response, a.updated), (&b.response, b.updated), "{file}");
        }
        assert!(deltas >= 3, "{deltas}");
        // A finished task takes no more deltas.
        let mut t = Tracker::default();
        t.begin("t1");
        t.cancel_unsent("t1");
        let line = r#"{"type":"event","protocol_version":5,"sequence":4,"request_id":"t1","event":"assistant_text_delta","label":null,"depth":0,"text":"x"}"#;
        let ServerLine::Delta(d) = ServerLine::parse(line).unwrap() else {
            panic!("a delta")
        };
        assert_eq!(t.observe_delta(&d, now), None);
        assert_eq!(t.task("t1").unwrap().response, "");
    }

    #[test]
    fn a_plain_turn() {
        let (t, updates) = replay("out_turn.jsonl", "t1");
        let states: Vec<_> = updates
            .iter()
            .filter_map(|u| u.data.get("state").and_then(Value::as_str))
            .collect();
        assert_eq!(states.first(), Some(&"submitted"));
        assert_eq!(states.last(), Some(&"completed"));
        assert!(updates.last().unwrap().is_final());
        assert_eq!(t.task("t1").unwrap().response, "Hello from the mock model.");
        let texts: Vec<_> = updates
            .iter()
            .filter(|u| u.kind == EventKind::Artifact)
            .map(|u| u.data["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["Hello", " from the", " mock model."]);
    }

    #[test]
    fn a_tool_turn_with_a_prompt() {
        let (t, updates) = replay("out_tool.jsonl", "t1");
        let prompt = updates
            .iter()
            .find(|u| u.data.get("state").and_then(Value::as_str) == Some("input-required"))
            .unwrap();
        assert_eq!(prompt.data["prompt"]["promptId"], "prompt-1");
        let tool: Vec<_> = updates
            .iter()
            .filter(|u| u.data.get("artifact").and_then(Value::as_str) == Some("tool:bash"))
            .collect();
        assert_eq!(tool.len(), 3);
        assert_eq!(tool[1].data["text"], "hi");
        assert_eq!(tool[1].data["toolUseId"], "toolu_mock_bash_1");
        assert_eq!(t.task("t1").unwrap().state, TaskState::Completed);
    }

    #[test]
    fn tool_output_is_routed_by_tool_use_id_and_errors_fail_the_turn() {
        let mut t = Tracker::default();
        t.begin("task-a");
        let lines = [
            r#"{"type":"event","protocol_version":5,"sequence":2,"request_id":"task-a","event":"tool_use_start","label":"b","depth":0,"name":"bash","tool_use_id":"tu-1"}"#,
            r#"{"type":"event","protocol_version":5,"sequence":3,"request_id":"sid-internal-7","event":"tool_output","tool_name":"bash","tool_use_id":"tu-1","stream":"stdout","data_b64":"/w=="}"#,
            r#"{"type":"event","protocol_version":5,"sequence":4,"request_id":"task-a","event":"error","label":null,"depth":0,"message":"API error (conversation preserved): boom"}"#,
            r#"{"type":"result","protocol_version":5,"sequence":5,"request_id":"task-a","ok":true,"data":{}}"#,
        ];
        let updates: Vec<_> = lines
            .iter()
            .filter_map(|l| t.observe(&serde_json::from_str(l).unwrap()))
            .map(seen)
            .collect();
        assert_eq!(updates[1].task_id, "task-a");
        assert_eq!(updates[1].data["dataB64"], "/w==");
        assert_eq!(updates[2].data["level"], "error");
        assert_eq!(updates[3].data["state"], "failed");
        assert!(updates[3].is_final());
    }
}
