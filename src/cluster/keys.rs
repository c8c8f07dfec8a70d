//! What the replicas keep in Redis: key names, and how a stream entry holds a task update.
//! Pure: no I/O.
//!
//! A context's log is the stream `wiregate:ctx:{id}`; each entry's id is `{seq}-0`, where `seq`
//! is the SSE `id:` of the update, so every replica serves the same ids and a client resumes
//! anywhere with `Last-Event-ID`. The entry has one field, `e`: the update as JSON.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::events::{A2aEvent, EventKind};

/// Every key starts with this, so a shared Redis can tell the gateway's keys apart.
pub const PREFIX: &str = "wiregate:";

/// The stream of one context's task updates.
pub fn context_log(context_id: &str) -> String {
    format!("{PREFIX}ctx:{context_id}")
}

/// One task's snapshot and context (a JSON [`StoredTask`]).
pub fn task(task_id: &str) -> String {
    format!("{PREFIX}task:{task_id}")
}

/// The lease naming the replica that runs a context's sid: `{node_id} {advertise}`.
pub fn owner(context_id: &str) -> String {
    format!("{PREFIX}owner:{context_id}")
}

/// The sid session id of a context, for a replica taking it over (`--resume`).
pub fn session(context_id: &str) -> String {
    format!("{PREFIX}session:{context_id}")
}

/// The task index: task ids scored by their last change (ms), for ListTasks.
pub const TASK_INDEX: &str = "wiregate:tasks";

/// The shared stream of translated domain events (`[events]`), written by the one replica
/// holding [`FEED_LEASE`].
pub const FEED_LOG: &str = "wiregate:feed";

/// The lease of the replica reading the legacy server's event feed.
pub const FEED_LEASE: &str = "wiregate:feed:reader";

/// The stream entry field holding the update.
pub const FIELD: &str = "e";

/// A task update as a stream entry holds it (the id is the entry's).
#[derive(Debug, Serialize, Deserialize)]
struct Entry<'a> {
    /// `s`tatus or `a`rtifact.
    k: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    p: Option<String>,
    /// The SSE id, when it is not the entry's sequence (a domain event's own id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    i: Option<String>,
    d: Map<String, Value>,
    t: String,
}

/// The entry field's value for `event`, stored under sequence `seq`.
pub fn encode_event(seq: u64, event: &A2aEvent) -> String {
    let own_id = event.event_id != seq.to_string() && !event.event_id.is_empty();
    let entry = Entry {
        i: own_id.then(|| event.event_id.clone()),
        k: match event.event_type {
            EventKind::Status => "s",
            EventKind::Artifact => "a",
        },
        p: event.plan_id.clone(),
        d: event.data.fields().into_owned(),
        t: event.timestamp.clone(),
    };
    serde_json::to_string(&entry).unwrap_or_default()
}

/// The update an entry holds, with its SSE id (`seq`); `None` for an entry that is not one.
pub fn decode_event(seq: u64, value: &[u8]) -> Option<A2aEvent> {
    let entry: Entry<'_> = serde_json::from_slice(value).ok()?;
    Some(A2aEvent {
        event_id: entry.i.unwrap_or_else(|| seq.to_string()),
        event_type: match entry.k {
            "s" => EventKind::Status,
            "a" => EventKind::Artifact,
            _ => return None,
        },
        plan_id: entry.p,
        data: entry.d.into(),
        timestamp: entry.t,
    })
}

/// The stream entry id of the update with SSE id `seq`.
pub fn entry_id(seq: u64) -> String {
    format!("{seq}-0")
}

/// The SSE id an entry id carries (`"42-0"` → 42).
pub fn seq_of(entry_id: &str) -> Option<u64> {
    entry_id
        .split_once('-')
        .map_or(entry_id, |(ms, _)| ms)
        .parse()
        .ok()
}

/// A task as the replicas share it.
#[derive(Debug, Serialize, Deserialize)]
pub struct StoredTask {
    /// The context the task belongs to.
    pub context: String,
    /// The task model.
    pub task: crate::bridge::mapping::Task,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_update_round_trips_through_an_entry_with_its_id() {
        let mut data = Map::new();
        data.insert("state".into(), json!("working"));
        data.insert("contextId".into(), json!("c1"));
        let mut ev = A2aEvent::new(EventKind::Status, Some("t1".into()), data);
        ev.event_id = "42".into();
        let text = encode_event(42, &ev);
        assert!(!text.contains("\"i\""), "{text}");
        assert_eq!(decode_event(42, text.as_bytes()), Some(ev.clone()));
        let mut art = ev.clone();
        art.event_type = EventKind::Artifact;
        art.plan_id = None;
        assert_eq!(
            decode_event(42, encode_event(42, &art).as_bytes()),
            Some(art)
        );
        // A domain event keeps the feed's own id.
        let mut domain = ev.clone();
        domain.event_id = "evt-9".into();
        assert_eq!(
            decode_event(7, encode_event(7, &domain).as_bytes()),
            Some(domain)
        );
        assert_eq!(decode_event(1, b"{\"k\":\"x\",\"d\":{},\"t\":\"\"}"), None);
        assert_eq!(decode_event(1, b"not json"), None);
    }

    #[test]
    fn entry_ids_carry_the_sse_id() {
        assert_eq!(entry_id(7), "7-0");
        assert_eq!(seq_of("7-0"), Some(7));
        assert_eq!(seq_of("7"), Some(7));
        assert_eq!(seq_of("x-0"), None);
    }
}
