//! What each of sid's server lines makes of its task: the update it gives and the change to the
//! task model ([`Tracker::observe`], and [`Tracker::observe_delta`] for a text delta's line).
//!
//! A child of [`crate::model::task`], which holds the model and the tracker's bookkeeping: the
//! attribution rules are in its documentation.

use std::collections::HashMap;
use std::time::SystemTime;

use serde_json::{json, Value};

use super::{obj, OpenPrompt, Role, Task, TaskState, Tracker, Update};
use crate::model::event::EventKind;
use crate::model::payload::{Payload, TextDelta};
use crate::wire::raw::DeltaArtifact;
use crate::wire::raw::{DeltaLine, Event, Prompt, ResultLine, ServerMessage};

impl Tracker {
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
        if self.is_for_finished_task(msg) {
            return None;
        }
        match msg {
            ServerMessage::Hello(_) | ServerMessage::ReplayComplete(_) => None,
            ServerMessage::Request(r) => {
                self.tasks.get(&r.request_id)?;
                self.status(&r.request_id, Some(TaskState::Submitted), json!({}))
            }
            ServerMessage::Prompt(p) => self.observe_prompt(p),
            ServerMessage::PromptAck(a) => {
                let task = self.tasks.get_mut(&a.request_id)?;
                task.prompt = None;
                self.status(
                    &a.request_id,
                    Some(TaskState::Working),
                    json!({"promptId": a.prompt_id, "response": a.response}),
                )
            }
            ServerMessage::Result(r) => self.observe_result(r),
            ServerMessage::Event(e) => self.observe_event(&e.request_id, &e.event),
        }
    }

    /// Whether the message belongs to a task that has had its final update (a `tool_output`
    /// belongs to the task of its `tool_use_id`).
    #[inline]
    fn is_for_finished_task(&self, msg: &ServerMessage) -> bool {
        let owner = match msg {
            ServerMessage::Event(e) => match &e.event {
                Event::ToolOutput { tool_use_id, .. } => {
                    self.tools.get(tool_use_id).map(|(t, _)| t.as_str())
                }
                _ => Some(e.request_id.as_str()),
            },
            other => other.request_id(),
        };
        owner
            .and_then(|t| self.tasks.get(t))
            .is_some_and(|t| t.finished)
    }

    /// A prompt's update: the task waits for input, the question said in its history.
    #[inline]
    fn observe_prompt(&mut self, p: &Prompt) -> Option<Update> {
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

    /// A result's update, the task's final one: failed when sid says so, else canceled after an
    /// interrupt, failed after an `error` event, and completed otherwise.
    #[inline]
    fn observe_result(&mut self, r: &ResultLine) -> Option<Update> {
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

    fn observe_event(&mut self, request_id: &str, event: &Event) -> Option<Update> {
        if let Event::ToolOutput {
            tool_name,
            tool_use_id,
            stream,
            text,
            data_b64,
        } = event
        {
            return self.tool_output(tool_name, tool_use_id, stream, text, data_b64);
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
                let extra =
                    Self::tool_use_start(task, &mut self.tools, request_id, name, tool_use_id);
                self.status(request_id, Some(TaskState::Working), extra)
            }
            Event::ToolInputDelta { partial_json, .. } => {
                let extra = Self::tool_input(task, partial_json);
                self.status(request_id, None, extra)
            }
            Event::ToolUseEnd { .. } => {
                let extra = Self::tool_use_end(task);
                self.status(request_id, None, extra)
            }
            Event::ToolResultStart {
                label,
                tool_use_id,
                is_error,
                ..
            } => Self::tool_result_start(
                task,
                &self.tools,
                request_id,
                label,
                tool_use_id,
                *is_error,
            ),
            Event::ToolResultTextDelta { text, label, .. } => {
                Self::tool_result_text(task, request_id, label, text)
            }
            Event::ToolResultEnd { .. } => Self::tool_result_end(task, request_id),
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

    /// A `tool_output` line's update, for the task of its `tool_use_id`.
    #[inline]
    fn tool_output(
        &self,
        tool_name: &str,
        tool_use_id: &str,
        stream: &str,
        text: &Option<String>,
        data_b64: &Option<String>,
    ) -> Option<Update> {
        // Routed by tool_use_id: request_id is sid's own tool request here.
        let (task_id, _) = self.tools.get(tool_use_id)?.clone();
        let mut data = json!({"artifact": format!("tool:{tool_name}"), "toolUseId": tool_use_id,
                              "stream": stream, "append": true});
        match (text, data_b64) {
            (Some(t), _) => data["text"] = Value::from(t.clone()),
            (None, Some(b)) => data["dataB64"] = Value::from(b.clone()),
            (None, None) => {}
        }
        Self::artifact(&task_id, data)
    }

    /// A tool call starts: its id and name kept as the task's current tool and in `tools` (to
    /// route its output); the fields of its status update.
    #[inline]
    fn tool_use_start(
        task: &mut Task,
        tools: &mut HashMap<String, (String, String)>,
        request_id: &str,
        name: &str,
        tool_use_id: &str,
    ) -> Value {
        task.current_tool = Some((tool_use_id.to_owned(), name.to_owned()));
        tools.insert(
            tool_use_id.to_owned(),
            (request_id.to_owned(), name.to_owned()),
        );
        json!({"tool": {"name": name, "toolUseId": tool_use_id, "phase": "start"}})
    }

    /// A chunk of the current tool call's input JSON: the fields of its status update.
    #[inline]
    fn tool_input(task: &Task, partial_json: &str) -> Value {
        let (id, name) = task.current_tool.clone().unwrap_or_default();
        json!({"tool": {"name": name, "toolUseId": id, "phase": "input", "partialJson": partial_json}})
    }

    /// The current tool call's input is whole, and the call is the task's current tool no
    /// more: the fields of its status update.
    #[inline]
    fn tool_use_end(task: &mut Task) -> Value {
        let (id, name) = task.current_tool.take().unwrap_or_default();
        json!({"tool": {"name": name, "toolUseId": id, "phase": "end"}})
    }

    /// A tool result starts: named by its tool call (else by its label), kept as the task's
    /// current result; its artifact opens empty.
    #[inline]
    fn tool_result_start(
        task: &mut Task,
        tools: &HashMap<String, (String, String)>,
        request_id: &str,
        label: &Option<String>,
        tool_use_id: &str,
        is_error: bool,
    ) -> Option<Update> {
        let name = tools
            .get(tool_use_id)
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| {
                label
                    .as_deref()
                    .and_then(|l| l.strip_prefix("tool:"))
                    .unwrap_or("")
                    .to_owned()
            });
        task.current_result = Some((tool_use_id.to_owned(), name.clone()));
        Self::artifact(
            request_id,
            json!({"artifact": format!("tool:{name}"), "toolUseId": tool_use_id,
                   "isError": is_error, "text": "", "append": false}),
        )
    }

    /// A chunk of a tool result's text, appended to the artifact of the task's current result
    /// (else of its label's tool).
    #[inline]
    fn tool_result_text(
        task: &Task,
        request_id: &str,
        label: &Option<String>,
        text: &str,
    ) -> Option<Update> {
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

    /// The task's current tool result ends: its artifact's last chunk, empty.
    #[inline]
    fn tool_result_end(task: &mut Task, request_id: &str) -> Option<Update> {
        let (id, name) = task.current_result.take().unwrap_or_default();
        Self::artifact(
            request_id,
            json!({"artifact": format!("tool:{name}"), "toolUseId": id, "text": "",
                   "append": true, "lastChunk": true}),
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Map;

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
