//! The bridge's task model and updates in the shapes of A2A 1.0 (protobuf JSON) and 0.3
//! (`kind` discriminators), and their messages back into a [`Turn`]. Pure: no I/O.
//!
//! Both versions carry the same facts; they differ in spelling: 1.0 writes
//! `TASK_STATE_WORKING`, `ROLE_AGENT` and parts as `{"text": …}`, and wraps stream events as
//! `{"statusUpdate": …}`; 0.3 writes `working`, `agent`, `{"kind": "text", "text": …}` and tags
//! every object with `kind`.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::Version;
use crate::model::error::GatewayError;
use crate::model::event::{A2aEvent, EventKind};
use crate::model::payload::TextDelta;
use crate::model::task::{HistoryMessage, Role, Task, TaskState};
use crate::sid::Turn;

/// A state as `version` spells it.
pub(crate) fn state(version: Version, s: TaskState) -> &'static str {
    match version {
        Version::V0_3 => s.as_str(),
        Version::V1_0 => match s {
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
        },
    }
}

fn text_part(version: Version, text: &str) -> Value {
    match version {
        Version::V1_0 => json!({"text": text}),
        Version::V0_3 => json!({"kind": "text", "text": text}),
    }
}

fn bytes_part(version: Version, b64: &str) -> Value {
    match version {
        Version::V1_0 => json!({"raw": b64, "mediaType": "application/octet-stream"}),
        Version::V0_3 => {
            json!({"kind": "file", "file": {"bytes": b64, "mimeType": "application/octet-stream"}})
        }
    }
}

/// An agent message carrying `text`.
fn agent_message(version: Version, text: &str, task_id: &str, context_id: &str) -> Value {
    let mut m = json!({
        "messageId": uuid::Uuid::new_v4().to_string(),
        "contextId": context_id,
        "taskId": task_id,
        "parts": [text_part(version, text)],
    });
    match version {
        Version::V1_0 => m["role"] = json!("ROLE_AGENT"),
        Version::V0_3 => {
            m["role"] = json!("agent");
            m["kind"] = json!("message");
        }
    }
    m
}

/// `snake_case` keys (sid's own, inside `result` and `error`) as the spec's `camelCase`, at
/// every depth: A2A's JSON is camelCase throughout, metadata included.
pub(crate) fn camel_keys(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (camel(&k), camel_keys(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(camel_keys).collect()),
        other => other,
    }
}

/// Params keys as their JSON names at every depth, but for `metadata` and `data` (the client's
/// own keys). See [`camel_keys`].
pub(crate) fn proto_names(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let own = k == "metadata" || k == "data";
                    (camel(&k), if own { v } else { proto_names(v) })
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(proto_names).collect()),
        other => other,
    }
}

fn camel(k: &str) -> String {
    if !k.contains('_') {
        return k.to_owned();
    }
    let mut out = String::with_capacity(k.len());
    let mut upper = false;
    for c in k.chars() {
        match c {
            '_' if !out.is_empty() => upper = true,
            c if upper => {
                out.extend(c.to_uppercase());
                upper = false;
            }
            c => out.push(c),
        }
    }
    out
}

/// One history message in `version`'s shape.
fn history_message(version: Version, m: &HistoryMessage, task_id: &str, context_id: &str) -> Value {
    let mut out = json!({
        "messageId": m.message_id,
        "contextId": context_id,
        "taskId": task_id,
        "parts": [text_part(version, &m.text)],
    });
    out["role"] = json!(match (version, m.role) {
        (Version::V1_0, Role::User) => "ROLE_USER",
        (Version::V1_0, Role::Agent) => "ROLE_AGENT",
        (Version::V0_3, Role::User) => "user",
        (Version::V0_3, Role::Agent) => "agent",
    });
    if version == Version::V0_3 {
        out["kind"] = json!("message");
    }
    out
}

/// How much of a task a call asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct View {
    /// The newest this many history messages; `None`: all of them.
    pub history_length: Option<usize>,
    /// Whether `artifacts` is written (ListTasks leaves it out unless asked).
    pub artifacts: bool,
}

impl Default for View {
    fn default() -> Self {
        View {
            history_length: None,
            artifacts: true,
        }
    }
}

fn status(
    version: Version,
    s: TaskState,
    text: Option<&str>,
    ids: (&str, &str),
    timestamp: Option<&str>,
) -> Value {
    let mut st = json!({"state": state(version, s)});
    if let Some(t) = text {
        st["message"] = agent_message(version, t, ids.0, ids.1);
    }
    if let Some(ts) = timestamp {
        st["timestamp"] = json!(ts);
    }
    st
}

/// A task as `GetTask`/`tasks/get` (and a blocking send) return it.
pub(crate) fn task(version: Version, t: &Task, context_id: &str) -> Value {
    task_view(version, t, context_id, View::default())
}

/// A task with as much history and as many artifacts as `view` asks for.
pub(crate) fn task_view(version: Version, t: &Task, context_id: &str, view: View) -> Value {
    let text = match (t.state, &t.prompt, &t.error) {
        (TaskState::InputRequired, Some(p), _) => Some(p.message.as_str()),
        (TaskState::Failed, _, Some(e)) => e.get("message").and_then(Value::as_str),
        _ => None,
    };
    let mut metadata = Map::new();
    if let (TaskState::InputRequired, Some(p)) = (t.state, &t.prompt) {
        metadata.insert(
            "prompt".into(),
            json!({"promptId": p.prompt_id, "kind": p.kind, "message": p.message,
                   "choices": p.choices}),
        );
    }
    if let Some(e) = &t.error {
        metadata.insert("error".into(), e.clone());
    }
    if let Some(r) = &t.result {
        metadata.insert("result".into(), r.clone());
    }
    let stamp = humantime::format_rfc3339_millis(t.updated).to_string();
    let keep = view
        .history_length
        .map_or(t.history.len(), |n| n.min(t.history.len()));
    let history: Vec<Value> = t
        .history
        .iter()
        .skip(t.history.len() - keep)
        .map(|m| history_message(version, m, &t.id, context_id))
        .collect();
    let mut out = json!({
        "id": t.id,
        "contextId": context_id,
        "status": status(version, t.state, text, (&t.id, context_id), Some(&stamp)),
        "history": history,
        "metadata": camel_keys(Value::Object(metadata)),
    });
    if view.artifacts {
        out["artifacts"] = json!([]);
        if !t.response.is_empty() {
            out["artifacts"] = json!([{
                "artifactId": "response",
                "name": "response",
                "parts": [text_part(version, &t.response)],
            }]);
        }
    }
    if version == Version::V0_3 {
        out["kind"] = json!("task");
    }
    out
}

/// The `result` of a stream's first response: the task as it starts.
pub(crate) fn stream_start(version: Version, t: &Task, context_id: &str) -> Value {
    let t = task(version, t, context_id);
    match version {
        Version::V1_0 => json!({"task": t}),
        Version::V0_3 => t,
    }
}

/// The artifact id of an update: tool outputs get one per tool call.
fn artifact_id(data: &Map<String, Value>) -> String {
    let name = data.get("artifact").and_then(Value::as_str).unwrap_or("");
    match data.get("toolUseId").and_then(Value::as_str) {
        Some(tu) if !tu.is_empty() => format!("{name}:{tu}"),
        _ => name.to_owned(),
    }
}

/// Members of an update that become the spec object's own fields, not its metadata.
const OWN: [&str; 9] = [
    "state",
    "final",
    "taskId",
    "contextId",
    "artifact",
    "text",
    "dataB64",
    "append",
    "lastChunk",
];

fn metadata(data: &Map<String, Value>) -> Value {
    camel_keys(Value::Object(
        data.iter()
            .filter(|(k, _)| !OWN.contains(&k.as_str()) && k.as_str() != "message")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    ))
}

/// Writes one queued update as a stream response's `result`, for one subscriber.
#[derive(Debug)]
pub(crate) struct UpdateWriter {
    version: Version,
    /// Artifacts this subscriber has seen: a later chunk appends, a first one creates.
    seen: HashSet<String>,
}

impl UpdateWriter {
    /// A writer whose subscriber already holds `t`'s artifacts.
    pub(crate) fn new(version: Version, t: &Task) -> Self {
        let mut seen = HashSet::new();
        if !t.response.is_empty() {
            seen.insert("response".to_owned());
        }
        UpdateWriter { version, seen }
    }

    /// [`result`](Self::result) of a text delta `d` (`ev`'s data), appended to `out` as the
    /// compact JSON `result` serialises to, without building it ([`super::delta`]).
    pub(crate) fn write_delta(&mut self, ev: &A2aEvent, d: &TextDelta, out: &mut Vec<u8>) {
        let name = d.artifact().name();
        // As `result` decides: a later chunk of an artifact this subscriber has seen appends.
        let fresh = !self.seen.contains(name) && self.seen.insert(name.to_owned());
        let task_id = ev.plan_id.as_deref().unwrap_or("");
        super::delta::write_result(self.version, d, task_id, !fresh, out);
    }

    /// The `result` for one update.
    pub(crate) fn result(&mut self, ev: &A2aEvent) -> Value {
        let data = ev.data.fields();
        let data = &*data;
        let task_id = ev.plan_id.as_deref().unwrap_or("");
        let context_id = data.get("contextId").and_then(Value::as_str).unwrap_or("");
        let v = self.version;
        match ev.event_type {
            EventKind::Status => {
                let s = data
                    .get("state")
                    .and_then(Value::as_str)
                    .and_then(TaskState::parse)
                    .unwrap_or(TaskState::Working);
                let text = data
                    .get("prompt")
                    .and_then(|p| p.get("message"))
                    .or_else(|| data.get("message"))
                    .or_else(|| data.get("error").and_then(|e| e.get("message")))
                    .and_then(Value::as_str);
                let update = json!({
                    "taskId": task_id,
                    "contextId": context_id,
                    "status": status(v, s, text, (task_id, context_id), Some(ev.timestamp.as_str())),
                    "metadata": metadata(data),
                });
                match v {
                    Version::V1_0 => json!({"statusUpdate": update}),
                    Version::V0_3 => {
                        let mut u = update;
                        u["kind"] = json!("status-update");
                        u["final"] = json!(ev.is_final() || s == TaskState::InputRequired);
                        u
                    }
                }
            }
            EventKind::Artifact => {
                let id = artifact_id(data);
                let fresh = self.seen.insert(id.clone());
                let wants_append = data.get("append").and_then(Value::as_bool) == Some(true);
                let part = match (data.get("text"), data.get("dataB64")) {
                    (_, Some(Value::String(b))) => bytes_part(v, b),
                    (Some(Value::String(t)), _) => text_part(v, t),
                    _ => text_part(v, ""),
                };
                let update = json!({
                    "taskId": task_id,
                    "contextId": context_id,
                    "artifact": {
                        "artifactId": id,
                        "name": data.get("artifact").cloned().unwrap_or(Value::Null),
                        "parts": [part],
                    },
                    "append": wants_append && !fresh,
                    "lastChunk": data.get("lastChunk").and_then(Value::as_bool) == Some(true),
                    "metadata": metadata(data),
                });
                match v {
                    Version::V1_0 => json!({"artifactUpdate": update}),
                    Version::V0_3 => {
                        let mut u = update;
                        u["kind"] = json!("artifact-update");
                        u
                    }
                }
            }
        }
    }
}

/// `SendMessage` / `message/send` params, either version.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SendRequest {
    message: MessageIn,
    #[serde(default)]
    configuration: Option<SendConfiguration>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageIn {
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    parts: Vec<Map<String, Value>>,
    #[serde(default)]
    context_id: Option<String>,
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    message_id: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendConfiguration {
    #[serde(default)]
    accepted_output_modes: Vec<String>,
    /// 1.0.
    #[serde(default)]
    return_immediately: Option<bool>,
    /// 0.3 (`false` is 1.0's `returnImmediately: true`).
    #[serde(default)]
    blocking: Option<bool>,
    /// 1.0.
    #[serde(default)]
    task_push_notification_config: Option<Value>,
    /// 0.3.
    #[serde(default)]
    push_notification_config: Option<Value>,
    #[serde(default)]
    history_length: Option<i64>,
}

/// A `historyLength` as a count: absent is "all", a negative one is refused.
pub(crate) fn history_length(n: Option<i64>) -> Result<Option<usize>, GatewayError> {
    match n {
        Some(n) if n < 0 => Err(GatewayError::InvalidParams(format!(
            "historyLength {n} is negative; send 0 or more, or leave it out for the whole history"
        ))),
        n => Ok(n.map(|n| n as usize)),
    }
}

/// What a send asks for, checked against what sid can do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Send {
    /// The turn for the bridge.
    pub turn: Turn,
    /// Wait until the task settles before answering (a blocking send).
    pub wait: bool,
    /// How much history the answer carries.
    pub history_length: Option<usize>,
    /// A webhook for the task's updates (the version's configuration shape).
    pub push: Option<Value>,
}

/// Output modes sid's text answers satisfy.
fn accepts_text(mode: &str) -> bool {
    let essence = mode.split(';').next().unwrap_or("").trim();
    ["text/plain", "text/*", "*/*", "text"]
        .iter()
        .any(|m| essence.eq_ignore_ascii_case(m))
}

impl SendRequest {
    /// Checks the request and turns it into a [`Send`]. sid reads text only: any other part is
    /// refused rather than dropped, as is a client that accepts no text answer.
    pub(crate) fn into_send(self, version: Version) -> Result<Send, GatewayError> {
        let cfg = self.configuration.unwrap_or_default();
        let push = match version {
            Version::V1_0 => cfg.task_push_notification_config,
            Version::V0_3 => cfg
                .push_notification_config
                .map(|p| json!({"pushNotificationConfig": p})),
        };
        if !cfg.accepted_output_modes.is_empty()
            && !cfg.accepted_output_modes.iter().any(|m| accepts_text(m))
        {
            return Err(GatewayError::ContentTypeNotSupported(format!(
                "sid answers text/plain; acceptedOutputModes {:?} exclude it",
                cfg.accepted_output_modes
            )));
        }
        let user = match version {
            Version::V1_0 => ["ROLE_USER", "ROLE_UNSPECIFIED"],
            Version::V0_3 => ["user", "user"],
        };
        if let Some(role) = self.message.role.as_deref().filter(|r| !user.contains(r)) {
            return Err(GatewayError::InvalidParams(format!(
                "message.role {role:?}: only the user sends messages to the agent"
            )));
        }
        let mut text: Vec<std::borrow::Cow<'_, str>> = Vec::with_capacity(self.message.parts.len());
        for (i, part) in self.message.parts.iter().enumerate() {
            let kind = part.get("kind").and_then(Value::as_str);
            match (part.get("text"), part.get("data"), kind) {
                (Some(Value::String(t)), _, None | Some("text")) => text.push(t.as_str().into()),
                // Structured data reaches sid as its JSON text, which a model reads as well.
                (None, Some(d), None | Some("data")) => text.push(d.to_string().into()),
                _ => {
                    let what = kind.map(str::to_owned).unwrap_or_else(|| {
                        part.keys()
                            .find(|k| !matches!(k.as_str(), "metadata" | "mediaType" | "filename"))
                            .cloned()
                            .unwrap_or_else(|| "empty".into())
                    });
                    return Err(GatewayError::ContentTypeNotSupported(format!(
                        "message.parts[{i}] is a {what} part; sid reads text and data (as JSON \
                         text) parts only"
                    )));
                }
            }
        }
        if text.is_empty() {
            return Err(GatewayError::InvalidParams(
                "message has no text part".into(),
            ));
        }
        let history_length = history_length(cfg.history_length)?;
        let wait = match version {
            Version::V1_0 => !cfg.return_immediately.unwrap_or(false),
            Version::V0_3 => cfg.blocking.unwrap_or(true),
        };
        Ok(Send {
            turn: Turn {
                text: text.join("\n"),
                context_id: self.message.context_id,
                task_id: self.message.task_id,
                message_id: self.message.message_id,
                queue: true,
                tenant: None,
            },
            wait,
            history_length,
            push,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(version: Version, v: Value) -> Result<Send, GatewayError> {
        serde_json::from_value::<SendRequest>(v)
            .unwrap()
            .into_send(version)
    }

    #[test]
    fn both_versions_read_text_parts_and_ids() {
        let one = send(
            Version::V1_0,
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "taskId": "t",
                   "contextId": "c", "parts": [{"text": "a"}, {"text": "b"}]},
                   "configuration": {"returnImmediately": true}}),
        )
        .unwrap();
        assert_eq!(
            one,
            Send {
                turn: Turn {
                    text: "a\nb".into(),
                    context_id: Some("c".into()),
                    task_id: Some("t".into()),
                    message_id: Some("m".into()),
                    queue: true,
                    tenant: None,
                },
                wait: false,
                history_length: None,
                push: None,
            }
        );
        let old = send(
            Version::V0_3,
            json!({"message": {"kind": "message", "messageId": "m", "role": "user",
                   "parts": [{"kind": "text", "text": "hi"}]}}),
        )
        .unwrap();
        assert_eq!(old.turn.text, "hi");
        assert!(old.wait);
    }

    #[test]
    fn data_parts_reach_sid_as_json_text_in_both_versions() {
        let one = send(
            Version::V1_0,
            json!({"message": {"parts": [{"text": "see"}, {"data": {"a": [1, "b"]}}]}}),
        )
        .unwrap();
        assert_eq!(one.turn.text, "see\n{\"a\":[1,\"b\"]}");
        let old = send(
            Version::V0_3,
            json!({"message": {"role": "user", "parts": [{"kind": "data", "data": {"k": true}}]}}),
        )
        .unwrap();
        assert_eq!(old.turn.text, "{\"k\":true}");
    }

    #[test]
    fn non_text_parts_and_output_modes_are_refused_with_their_codes() {
        let file = send(
            Version::V0_3,
            json!({"message": {"role": "user", "parts": [{"kind": "text", "text": "x"},
                   {"kind": "file", "file": {"uri": "http://x"}}]}}),
        );
        assert!(
            matches!(file, Err(GatewayError::ContentTypeNotSupported(ref m)) if m.contains("parts[1] is a file part")),
            "{file:?}"
        );
        let raw = send(
            Version::V1_0,
            json!({"message": {"parts": [{"text": "x"},
                   {"raw": "AAE=", "mediaType": "application/octet-stream"}]}}),
        );
        assert!(
            matches!(raw, Err(GatewayError::ContentTypeNotSupported(ref m)) if m.contains("parts[1] is a raw part")),
            "{raw:?}"
        );
        let push = send(
            Version::V1_0,
            json!({"message": {"parts": [{"text": "x"}]},
                   "configuration": {"taskPushNotificationConfig": {"url": "http://x"}}}),
        )
        .unwrap();
        assert_eq!(push.push, Some(json!({"url": "http://x"})));
        let modes = send(
            Version::V0_3,
            json!({"message": {"parts": [{"kind": "text", "text": "x"}]},
                   "configuration": {"acceptedOutputModes": ["image/png"]}}),
        );
        assert!(matches!(
            modes,
            Err(GatewayError::ContentTypeNotSupported(_))
        ));
        let agent = send(
            Version::V1_0,
            json!({"message": {"role": "ROLE_AGENT", "parts": [{"text": "x"}]}}),
        );
        assert!(matches!(agent, Err(GatewayError::InvalidParams(_))));
    }

    fn model(state: TaskState, response: &str) -> Task {
        let mut t = crate::model::task::Tracker::default();
        t.begin("t1");
        let mut task = t.task("t1").unwrap().clone();
        task.state = state;
        task.response = response.into();
        task
    }

    #[test]
    fn a_task_in_each_version() {
        let t = model(TaskState::Completed, "Hello");
        let one = task(Version::V1_0, &t, "c1");
        assert_eq!(one["status"]["state"], "TASK_STATE_COMPLETED");
        assert_eq!(one["artifacts"][0]["parts"][0], json!({"text": "Hello"}));
        assert!(one.get("kind").is_none());
        let old = task(Version::V0_3, &t, "c1");
        assert_eq!(old["kind"], "task");
        assert_eq!(old["status"]["state"], "completed");
        assert_eq!(
            old["artifacts"][0]["parts"][0],
            json!({"kind": "text", "text": "Hello"})
        );
        assert_eq!(stream_start(Version::V1_0, &t, "c1")["task"]["id"], "t1");
        assert_eq!(stream_start(Version::V0_3, &t, "c1")["id"], "t1");
    }

    fn event(kind: EventKind, data: Value) -> A2aEvent {
        let Value::Object(map) = data else {
            unreachable!()
        };
        A2aEvent::new(kind, Some("t1".into()), map)
    }

    #[test]
    fn updates_in_each_version() {
        let t = model(TaskState::Submitted, "");
        let prompt = event(
            EventKind::Status,
            json!({"state": "input-required", "contextId": "c1",
                   "prompt": {"promptId": "p1", "message": "Allow?"}}),
        );
        let mut one = UpdateWriter::new(Version::V1_0, &t);
        let s = one.result(&prompt);
        assert_eq!(
            s["statusUpdate"]["status"]["state"],
            "TASK_STATE_INPUT_REQUIRED"
        );
        assert_eq!(
            s["statusUpdate"]["status"]["message"]["parts"][0]["text"],
            "Allow?"
        );
        assert_eq!(s["statusUpdate"]["metadata"]["prompt"]["promptId"], "p1");
        let mut old = UpdateWriter::new(Version::V0_3, &t);
        let s = old.result(&prompt);
        assert_eq!(s["kind"], "status-update");
        assert_eq!(s["final"], true, "0.3 ends a stream at input-required");
        assert_eq!(s["status"]["message"]["role"], "agent");

        let delta = |text: &str| {
            event(
                EventKind::Artifact,
                json!({"artifact": "response", "text": text, "append": true, "contextId": "c1"}),
            )
        };
        let first = one.result(&delta("Hel"));
        assert_eq!(first["artifactUpdate"]["append"], false);
        assert_eq!(
            first["artifactUpdate"]["artifact"]["artifactId"],
            "response"
        );
        let second = one.result(&delta("lo"));
        assert_eq!(second["artifactUpdate"]["append"], true);
        assert_eq!(
            second["artifactUpdate"]["artifact"]["parts"][0],
            json!({"text": "lo"})
        );
        let old_delta = old.result(&delta("Hel"));
        assert_eq!(old_delta["kind"], "artifact-update");
        assert_eq!(
            old_delta["artifact"]["parts"][0],
            json!({"kind": "text", "text": "Hel"})
        );

        let bytes = event(
            EventKind::Artifact,
            json!({"artifact": "tool:bash", "toolUseId": "tu1", "dataB64": "/w==", "append": true}),
        );
        let b = one.result(&bytes);
        assert_eq!(
            b["artifactUpdate"]["artifact"]["artifactId"],
            "tool:bash:tu1"
        );
        assert_eq!(b["artifactUpdate"]["artifact"]["parts"][0]["raw"], "/w==");
        assert_eq!(b["artifactUpdate"]["metadata"]["toolUseId"], "tu1");
    }
}
