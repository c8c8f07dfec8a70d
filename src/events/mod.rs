//! Task updates as the A2A side sees them, and the queue that fans them out.
//!
//! Both producers — the sid bridge and the legacy server's domain-event feed — turn what they
//! read into [`A2aEvent`]s and push them into an [`EventQueue`]; one SSE writer serves both.

pub mod domain;
pub mod queue;

pub use queue::{Closed, Cursor, EventQueue, Read, Stored, Subscription, TooManySubscribers};

use bytes::Bytes;
use serde_json::{Map, Value};

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
    pub data: Map<String, Value>,
    /// RFC 3339 time the gateway saw the event.
    pub timestamp: String,
}

impl A2aEvent {
    /// An update stamped with the current time and no id yet.
    pub fn new(kind: EventKind, plan_id: Option<String>, data: Map<String, Value>) -> Self {
        A2aEvent {
            event_id: String::new(),
            event_type: kind,
            plan_id,
            data,
            timestamp: rfc3339_millis(std::time::SystemTime::now()),
        }
    }

    /// Whether this update ends its task's stream (`final: true`).
    pub fn is_final(&self) -> bool {
        self.data.get("final").and_then(Value::as_bool) == Some(true)
    }

    /// The JSON-RPC notification carried in `data:`: `params` holds `taskId` (only when the event
    /// has a plan id) and the event's own fields, none of the reserved ones.
    pub fn notification(&self) -> Value {
        serde_json::to_value(self.notification_ref()).unwrap_or(Value::Null)
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

    /// The whole SSE frame.
    pub fn to_sse(&self) -> Bytes {
        let id = (!self.event_id.is_empty()).then_some(self.event_id.as_str());
        sse::json_frame(Some(self.event_type.name()), id, &self.notification_ref())
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
        for (k, v) in &ev.data {
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
