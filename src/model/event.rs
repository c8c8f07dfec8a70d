//! A task update as the A2A side sees it: what the sid bridge and the domain-event feed both
//! produce, and what one SSE writer serves.

use std::sync::OnceLock;
use std::time::SystemTime;

use bytes::Bytes;

use super::payload::DeltaParams;
use super::payload::Payload;
use crate::wire::sse;

/// SSE event name of a status update.
pub const TASK_STATUS_UPDATE: &str = "TaskStatusUpdateEvent";
/// SSE event name of an artifact update.
pub const TASK_ARTIFACT_UPDATE: &str = "TaskArtifactUpdateEvent";

/// Members that are the frame's `id:`/`event:` lines or internal bookkeeping, never `params`.
const RESERVED: [&str; 4] = ["event_id", "event_type", "timestamp", "plan_id"];

/// Which of the two A2A update kinds an event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// `TaskStatusUpdateEvent` / `task/statusUpdate`.
    Status,
    /// `TaskArtifactUpdateEvent` / `task/artifactUpdate`.
    Artifact,
}

impl EventKind {
    /// The SSE `event:` name.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Status => TASK_STATUS_UPDATE,
            EventKind::Artifact => TASK_ARTIFACT_UPDATE,
        }
    }

    /// The JSON-RPC notification method.
    pub fn method(self) -> &'static str {
        match self {
            EventKind::Status => "task/statusUpdate",
            EventKind::Artifact => "task/artifactUpdate",
        }
    }

    /// Parses an SSE event name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            TASK_STATUS_UPDATE => Some(EventKind::Status),
            TASK_ARTIFACT_UPDATE => Some(EventKind::Artifact),
            _ => None,
        }
    }
}

/// One task update.
#[derive(Clone, Debug, PartialEq)]
pub struct A2aEvent {
    /// The SSE id; empty until a queue stamps its own.
    pub event_id: String,
    /// Status or artifact update.
    pub event_type: EventKind,
    /// The task (plan) the update belongs to.
    pub plan_id: Option<String>,
    /// The update's fields, copied into `params`.
    pub data: Payload,
    /// RFC 3339 time the gateway saw the event.
    pub timestamp: Stamp,
}

/// When the gateway saw an event, as RFC 3339 text with milliseconds (`2026-11-30T01:28:21.675Z`):
/// kept as the clock's reading and formatted the first time a reader asks (the A2A shapes, the
/// cluster's encoding), since an SSE frame does not carry it and a flood stamps every delta on
/// the reader of sid's stdout, the stream's one serial step. It reads as a `str`.
#[derive(Clone)]
pub struct Stamp {
    at: SystemTime,
    text: OnceLock<String>,
}

impl Stamp {
    /// The time `at`, formatted when first read.
    pub fn at(at: SystemTime) -> Self {
        Stamp {
            at,
            text: OnceLock::new(),
        }
    }

    /// The RFC 3339 text.
    pub fn as_str(&self) -> &str {
        self.text.get_or_init(|| rfc3339_millis(self.at))
    }
}

/// A stamp read from its text (a domain event's, a cluster entry's), kept as it was written.
impl From<String> for Stamp {
    fn from(text: String) -> Self {
        Stamp {
            at: SystemTime::UNIX_EPOCH,
            text: OnceLock::from(text),
        }
    }
}

impl std::ops::Deref for Stamp {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

/// Two stamps are equal when their texts are.
impl PartialEq for Stamp {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl std::fmt::Debug for Stamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl A2aEvent {
    /// An update stamped with the current time and no id yet.
    pub fn new(kind: EventKind, plan_id: Option<String>, data: impl Into<Payload>) -> Self {
        Self::at(kind, plan_id, data, SystemTime::now())
    }

    /// An update stamped with `now` (a clock the caller read already) and no id yet.
    pub fn at(
        kind: EventKind,
        plan_id: Option<String>,
        data: impl Into<Payload>,
        now: SystemTime,
    ) -> Self {
        A2aEvent {
            event_id: String::new(),
            event_type: kind,
            plan_id,
            data: data.into(),
            timestamp: Stamp::at(now),
        }
    }

    /// Whether this update ends its task's stream (`final: true`).
    pub fn is_final(&self) -> bool {
        self.data.is_final()
    }

    /// The JSON-RPC notification carried in `data:`: `params` holds `taskId` (only when the event
    /// has a plan id) and the event's own fields, none of the reserved ones.
    pub fn notification(&self) -> serde_json::Value {
        serde_json::to_value(self.notification_ref()).unwrap_or(serde_json::Value::Null)
    }

    /// The notification as a borrowing view, serialised straight to text without copying the
    /// event's fields into a new tree.
    fn notification_ref(&self) -> Notification<'_> {
        Notification {
            jsonrpc: "2.0",
            method: self.event_type.method(),
            params: Params(self),
        }
    }

    /// The whole SSE frame: the same bytes as serialising [`notification`](Self::notification),
    /// written by hand (member names and strings copied, only what needs escaping escaped), since
    /// every event of a stream is encoded once on its hot path.
    pub fn to_sse(&self) -> Bytes {
        let id = (!self.event_id.is_empty()).then_some(self.event_id.as_str());
        let name = Some(self.event_type.name());
        match &self.data {
            Payload::Fields(data) => {
                let mut out = Vec::with_capacity(data.len() * 24 + 160);
                sse::write_json(&mut out, name, id, |out| self.write_notification(data, out));
                Bytes::from(out)
            }
            Payload::Delta(d) => {
                // Sized exactly, so the frame's buffer becomes its `Bytes` without another
                // allocation; each id is scanned for escapes once, for its length and its bytes.
                let params = d.params();
                let task = self.plan_id.as_deref().map(crate::wire::json_str_contents);
                let task_len = task.as_ref().map_or(0, |t| 12 + t.len()); // ,"taskId":"…"
                let len = 39 + self.event_type.method().len() + params.len() + task_len + 2;
                let size = sse::json_len(name, id, len);
                let mut out = Vec::with_capacity(size);
                sse::write_json(&mut out, name, id, |out| {
                    self.write_delta(&params, task.as_deref(), out)
                });
                debug_assert_eq!(out.len(), size, "{:?}", String::from_utf8_lossy(&out));
                Bytes::from(out)
            }
        }
    }

    /// The beginning of the notification, up to `params`' opening brace.
    fn write_head(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"method\":\"");
        out.extend_from_slice(self.event_type.method().as_bytes());
        out.extend_from_slice(b"\",\"params\":{");
    }

    /// A delta's notification, as `Notification`'s `Serialize` writes the map it stands for;
    /// `task` is the plan id's contents as [`crate::wire::write_json_str`] writes them.
    fn write_delta(&self, params: &DeltaParams<'_>, task: Option<&str>, out: &mut Vec<u8>) {
        self.write_head(out);
        params.write(out);
        if let Some(task) = task {
            out.extend_from_slice(b",\"taskId\":\"");
            out.extend_from_slice(task.as_bytes());
            out.push(b'"');
        }
        out.extend_from_slice(b"}}");
    }

    /// The notification as compact JSON, as `Notification`'s `Serialize` writes it.
    fn write_notification(
        &self,
        data: &serde_json::Map<String, serde_json::Value>,
        out: &mut Vec<u8>,
    ) {
        use crate::wire::write_json_str;
        use serde_json::Value;
        self.write_head(out);
        let mut first = true;
        let mut entry = |out: &mut Vec<u8>, k: &str| {
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            write_json_str(out, k);
            out.push(b':');
        };
        for (k, v) in data {
            let shadowed = self.plan_id.is_some() && k == "taskId";
            if RESERVED.contains(&k.as_str()) || shadowed {
                continue;
            }
            entry(out, k);
            match v {
                Value::String(s) => write_json_str(out, s),
                Value::Bool(true) => out.extend_from_slice(b"true"),
                Value::Bool(false) => out.extend_from_slice(b"false"),
                Value::Null => out.extend_from_slice(b"null"),
                other => {
                    serde_json::to_writer(&mut *out, other).expect("a value always serialises")
                }
            }
        }
        if let Some(plan) = &self.plan_id {
            entry(out, "taskId");
            write_json_str(out, plan);
        }
        out.extend_from_slice(b"}}");
    }
}

#[derive(serde::Serialize)]
struct Notification<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: Params<'a>,
}

/// `params`: the event's fields minus the reserved ones, then `taskId` (which wins).
struct Params<'a>(&'a A2aEvent);

impl serde::Serialize for Params<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let ev = self.0;
        let mut map = s.serialize_map(None)?;
        for (k, v) in ev.data.fields().iter() {
            let shadowed = ev.plan_id.is_some() && k == "taskId";
            if !RESERVED.contains(&k.as_str()) && !shadowed {
                map.serialize_entry(k, v)?;
            }
        }
        if let Some(plan) = &ev.plan_id {
            map.serialize_entry("taskId", plan)?;
        }
        map.end()
    }
}

/// `t` as RFC 3339 with milliseconds (`2026-11-30T01:28:21.675Z`), as humantime writes it. Every
/// event is stamped, so the date and time of day are formatted once a second (per thread) and
/// only the milliseconds each time.
fn rfc3339_millis(t: std::time::SystemTime) -> String {
    use std::cell::RefCell;
    use std::time::{Duration, UNIX_EPOCH};
    thread_local! {
        /// The last second formatted, and its text up to the seconds.
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let Ok(since) = t.duration_since(UNIX_EPOCH) else {
        return humantime::format_rfc3339_millis(t).to_string();
    };
    SECOND.with_borrow_mut(|(secs, prefix)| {
        if *secs != since.as_secs() {
            *secs = since.as_secs();
            let whole = UNIX_EPOCH + Duration::from_secs(since.as_secs());
            *prefix = humantime::format_rfc3339_seconds(whole).to_string();
            prefix.pop(); // the `Z`
        }
        let ms = since.subsec_millis();
        let mut out = String::with_capacity(prefix.len() + 5);
        out.push_str(prefix);
        out.push('.');
        out.push(char::from(b'0' + (ms / 100) as u8));
        out.push(char::from(b'0' + (ms / 10 % 10) as u8));
        out.push(char::from(b'0' + (ms % 10) as u8));
        out.push('Z');
        out
    })
}

#[cfg(test)]
mod stamp_tests {
    use super::rfc3339_millis;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn timestamps_match_humantime_within_and_across_seconds() {
        for ms in [
            0u64,
            7,
            99,
            999,
            1_000,
            1_001,
            59_999,
            1_764_466_101_675,
            1_764_466_101_676,
            4_102_444_799_999,
        ] {
            let t = UNIX_EPOCH + Duration::from_millis(ms) + Duration::from_nanos(123_456);
            assert_eq!(
                rfc3339_millis(t),
                humantime::format_rfc3339_millis(t).to_string(),
                "{ms}"
            );
        }
    }
}

#[cfg(test)]
mod frame_tests {
    use super::*;
    use crate::model::payload::TextDelta;
    use crate::wire::raw::DeltaArtifact;
    use proptest::prelude::*;
    use serde_json::Value;

    /// The frame of `value` serialised by serde, as the hand-written frames must be.
    fn by_serde(event: Option<&str>, id: Option<&str>, value: &impl serde::Serialize) -> Bytes {
        let mut out = Vec::new();
        sse::write_json(&mut out, event, id, |o| {
            serde_json::to_writer(o, value).unwrap()
        });
        Bytes::from(out)
    }

    fn any_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            "\\PC{0,6}|[\"\\\\\u{0}-\u{1f}\u{7f}é]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                prop::collection::btree_map("[a-z]{1,3}", inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The hand-written frame is byte for byte the serialised notification's.
        #[test]
        fn to_sse_is_the_serialised_notification(
            data in prop::collection::btree_map(
                prop_oneof![Just("taskId".to_owned()), Just("timestamp".to_owned()),
                            Just("plan_id".to_owned()), "[a-zA-Z\"\\\\]{1,8}"],
                any_value(),
                0..6,
            ),
            plan in prop::option::of("\\PC{0,8}|[\"\\\\\u{1}]{1,3}"),
            artifact in any::<bool>(),
            id in "[0-9]{0,3}",
        ) {
            let kind = if artifact { EventKind::Artifact } else { EventKind::Status };
            let mut ev = A2aEvent::new(kind, plan, data.into_iter().collect::<serde_json::Map<_, _>>());
            ev.event_id = id;
            let id = (!ev.event_id.is_empty()).then_some(ev.event_id.as_str());
            let by_serde = by_serde(Some(kind.name()), id, &ev.notification_ref());
            prop_assert_eq!(ev.to_sse(), by_serde);
        }

        /// A text delta's frame, written from its escaped text, is byte for byte the frame of
        /// the map it stands for, whichever way sid's line escaped the text.
        #[test]
        fn a_delta_frame_is_its_maps_frame(
            text in "\\PC{0,12}|[\"\\\\/\u{0}-\u{1f}\u{7f}é]{0,6}",
            slash in any::<bool>(),
            context in prop::option::of("\\PC{0,8}|[\"\\\\\u{1}]{1,3}"),
            plan in prop::option::of("\\PC{0,8}|[\"\\\\\u{1}]{1,3}"),
            thinking in any::<bool>(),
            id in "[0-9]{0,3}",
        ) {
            // The line's text as the scanner hands it over: written as serde_json writes it,
            // or with `/` escaped too; none when it holds a `\u` escape (the scanner leaves
            // those to serde_json).
            let mut quoted = serde_json::to_string(&text).unwrap();
            if slash {
                quoted = quoted.replace('/', "\\/");
            }
            let raw = (!quoted.contains("\\u")).then(|| &quoted[1..quoted.len() - 1]);
            let artifact = if thinking { DeltaArtifact::Thinking } else { DeltaArtifact::Response };
            let delta = TextDelta::new(artifact, &text, raw);
            prop_assert_eq!(delta.text(), text.as_str());
            let mut data = Payload::Delta(delta);
            if let Some(c) = &context {
                data.set_context(&std::sync::Arc::from(c.as_str()));
            }
            let mut ev = A2aEvent::new(EventKind::Artifact, plan.clone(), data);
            ev.event_id = id;
            let mut by_map = ev.clone();
            by_map.data = Payload::Fields(ev.data.fields().into_owned());
            prop_assert_eq!(ev.to_sse(), by_map.to_sse());
            let id = (!ev.event_id.is_empty()).then_some(ev.event_id.as_str());
            let by_serde = by_serde(Some(EventKind::Artifact.name()), id, &ev.notification_ref());
            prop_assert_eq!(ev.to_sse(), by_serde);
            prop_assert_eq!(&ev, &by_map);
            prop_assert!(!ev.is_final() && ev.data.state().is_none());
        }
    }
}
