//! The legacy server's domain events and their mapping to task updates.
//!
//! A domain event is `{event_id, event_type, plan_id, data, timestamp}`. Its type is accepted
//! both as the value (`plan.created`) and as the enum name (`PLAN_CREATED`); `plan_id` becomes
//! `taskId`. Which types become status and which artifact updates is configuration.

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ReplayLog;
use crate::config::{Unmapped, DEFAULT_ARTIFACT, DEFAULT_STATUS};
use crate::model::event::{A2aEvent, EventKind};

/// One record of the legacy event feed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DomainEvent {
    /// The feed's id for the record, when it has one (string or number).
    #[serde(default)]
    pub event_id: Option<Value>,
    /// `plan.created` or `PLAN_CREATED`.
    pub event_type: String,
    /// The plan (task) the event concerns.
    #[serde(default)]
    pub plan_id: Option<String>,
    /// Event fields.
    #[serde(default)]
    pub data: Map<String, Value>,
    /// When the server emitted it.
    #[serde(default)]
    pub timestamp: Option<String>,
}

impl DomainEvent {
    /// The event id as text, when present.
    pub fn id_text(&self) -> Option<String> {
        match &self.event_id {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        }
    }
}

/// Event type → update kind.
#[derive(Clone, Debug)]
pub struct EventMap {
    status: HashSet<String>,
    artifact: HashSet<String>,
    unmapped: Unmapped,
}

impl Default for EventMap {
    fn default() -> Self {
        Self::new(&DEFAULT_STATUS, &DEFAULT_ARTIFACT, Unmapped::Drop)
    }
}

impl EventMap {
    /// A map from explicit lists (in either spelling).
    pub fn new<S: AsRef<str>>(status: &[S], artifact: &[S], unmapped: Unmapped) -> Self {
        let norm = |v: &[S]| v.iter().map(|s| normalise(s.as_ref())).collect();
        EventMap {
            status: norm(status),
            artifact: norm(artifact),
            unmapped,
        }
    }

    /// The update kind for an event type, `None` to drop it.
    pub fn kind_of(&self, event_type: &str) -> Option<EventKind> {
        let t = normalise(event_type);
        if self.status.contains(&t) {
            Some(EventKind::Status)
        } else if self.artifact.contains(&t) {
            Some(EventKind::Artifact)
        } else {
            match self.unmapped {
                Unmapped::Drop => None,
                Unmapped::Status => Some(EventKind::Status),
            }
        }
    }

    /// The task update for a domain event, `None` when the map drops it.
    pub fn translate(&self, ev: &DomainEvent) -> Option<A2aEvent> {
        let kind = self.kind_of(&ev.event_type)?;
        let mut out = A2aEvent::new(kind, ev.plan_id.clone(), ev.data.clone());
        out.event_id = ev.id_text().unwrap_or_default();
        if let Some(ts) = &ev.timestamp {
            out.timestamp = ts.clone().into();
        }
        Some(out)
    }
}

/// `PLAN_PHASE_CHANGED` → `plan.phase_changed`; values pass through lower-cased.
pub fn normalise(event_type: &str) -> String {
    if event_type.contains('.') {
        return event_type.to_ascii_lowercase();
    }
    let lower = event_type.to_ascii_lowercase();
    match lower.split_once('_') {
        Some((domain, rest)) => format!("{domain}.{rest}"),
        None => lower,
    }
}

/// What became of one domain event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Queued as a task update.
    Queued,
    /// The map drops this type.
    Unmapped,
    /// The queue is closed; the event is dropped quietly.
    QueueClosed,
}

/// Feeds translated domain events into a queue; never fails into its caller.
#[derive(Debug, Clone)]
pub struct Bridge {
    map: Arc<EventMap>,
    queue: Arc<ReplayLog>,
}

impl Bridge {
    /// A bridge from `map` into `queue`.
    pub fn new(map: EventMap, queue: Arc<ReplayLog>) -> Self {
        Bridge {
            map: Arc::new(map),
            queue,
        }
    }

    /// Translates and queues one event.
    pub fn handle(&self, ev: &DomainEvent) -> Delivery {
        match self.map.translate(ev) {
            None => Delivery::Unmapped,
            Some(a2a) => match self.queue.push(a2a) {
                Ok(_) => Delivery::Queued,
                Err(_) => Delivery::QueueClosed,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_match() {
        let m = EventMap::default();
        for t in DEFAULT_STATUS {
            assert_eq!(m.kind_of(t), Some(EventKind::Status));
            assert_eq!(
                m.kind_of(&t.replace('.', "_").to_uppercase()),
                Some(EventKind::Status)
            );
        }
        for t in DEFAULT_ARTIFACT {
            assert_eq!(m.kind_of(t), Some(EventKind::Artifact));
            assert_eq!(
                m.kind_of(&t.replace('.', "_").to_uppercase()),
                Some(EventKind::Artifact)
            );
        }
        assert_eq!(m.kind_of("user.login"), None);
        let pass = EventMap::new(&DEFAULT_STATUS, &DEFAULT_ARTIFACT, Unmapped::Status);
        assert_eq!(pass.kind_of("user.login"), Some(EventKind::Status));
    }
}
