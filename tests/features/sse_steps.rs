//! Steps for `features/sse_streaming.feature` (seed 001).

use std::sync::Arc;

use cucumber::{given, then, when};
use serde_json::{Map, Value};
use wiregate::events::domain::{Bridge, Delivery, DomainEvent, EventMap};
use wiregate::events::{A2aEvent, EventKind, EventQueue, TASK_ARTIFACT_UPDATE, TASK_STATUS_UPDATE};
use wiregate::wire::sse;

use crate::World;

fn event(w: &mut World, kind: &str, plan: Option<String>, data: Map<String, Value>) {
    let kind = EventKind::from_name(kind).expect("a known A2A event type");
    let mut ev = A2aEvent::new(kind, plan, data);
    // The event model carries its own id, as the domain events it mirrors do.
    ev.event_id = uuid::Uuid::new_v4().to_string();
    w.event = Some(ev);
}

#[given(regex = r#"^an A2aEvent with type "([^"]*)" and plan_id "([^"]*)"$"#)]
fn event_with_plan(w: &mut World, kind: String, plan: String) {
    event(w, &kind, Some(plan), Map::new());
}

#[given(regex = r#"^an A2aEvent with type "([^"]*)" and plan_id "([^"]*)" and data (.+)$"#)]
fn event_with_data(w: &mut World, kind: String, plan: String, data: String) {
    let data: Map<String, Value> = serde_json::from_str(&data).expect("data is a JSON object");
    event(w, &kind, Some(plan), data);
}

#[given(regex = r#"^an A2aEvent with type "([^"]*)" and no plan_id$"#)]
fn event_without_plan(w: &mut World, kind: String) {
    event(w, &kind, None, Map::new());
}

#[when("I format the event as SSE")]
fn format_sse(w: &mut World) {
    let frame = w.event.as_ref().unwrap().to_sse();
    w.sse = Some(String::from_utf8(frame.to_vec()).unwrap());
}

#[then(expr = "the SSE output should contain {string}")]
fn sse_contains(w: &mut World, needle: String) {
    let out = w.sse.as_ref().unwrap();
    assert!(out.contains(&needle), "{needle:?} not in {out:?}");
}

#[then("the SSE output should end with two newlines")]
fn sse_ends(w: &mut World) {
    assert!(w.sse.as_ref().unwrap().ends_with("\n\n"));
}

#[when("I format a keepalive SSE message")]
fn format_keepalive(w: &mut World) {
    w.keepalive = Some(String::from_utf8(sse::keepalive().to_vec()).unwrap());
}

#[then(expr = "the keepalive should start with {string}")]
fn keepalive_starts(w: &mut World, prefix: String) {
    assert!(w.keepalive.as_ref().unwrap().starts_with(&prefix));
}

#[given("an A2aEventQueue for SSE testing")]
fn queue(w: &mut World) {
    w.queue = Some(Arc::new(EventQueue::new(64, 64)));
}

#[given("a mock EventBus")]
fn bus(w: &mut World) {
    // The bus is the record of domain events published; the bridge is handed each one.
    w.bus = Some(Vec::new());
}

#[given("an EventBusBridge connecting bus to queue")]
fn bridge(w: &mut World) {
    assert!(w.bus.is_some(), "the bus exists first");
    let queue = w.queue.clone().expect("a queue");
    w.bridge = Some(Bridge::new(EventMap::default(), queue));
}

#[when(regex = r"^the bridge receives a ([A-Z_]+) domain event$")]
fn bridge_receives(w: &mut World, event_type: String) {
    let ev: DomainEvent = serde_json::from_value(serde_json::json!({
        "event_id": "evt-1", "event_type": event_type, "plan_id": "plan-9",
        "data": {"state": "created"}, "timestamp": "2026-11-29T00:00:00Z"
    }))
    .unwrap();
    w.bus.as_mut().unwrap().push(ev.clone());
    w.delivery = Some(w.bridge.as_ref().unwrap().handle(&ev));
}

#[when("the queue is closed")]
fn close_queue(w: &mut World) {
    w.queue.as_ref().unwrap().close();
}

#[then(expr = "the queue should contain a {word}")]
fn queue_contains(w: &mut World, kind: String) {
    let kind = EventKind::from_name(&kind).expect("a known A2A event type");
    let events = w.queue.as_ref().unwrap().snapshot();
    assert_eq!(w.delivery, Some(Delivery::Queued));
    assert!(
        events
            .iter()
            .any(|s| s.event.event_type == kind && s.event.plan_id.as_deref() == Some("plan-9")),
        "no {kind:?} in {events:?}"
    );
}

#[then("no error should be raised from the bridge")]
fn no_error(w: &mut World) {
    // Reaching this step means `handle` returned instead of panicking; it reports the drop.
    assert_eq!(w.delivery, Some(Delivery::QueueClosed));
    assert!(w.queue.as_ref().unwrap().snapshot().is_empty());
}

#[then(
    regex = r#"^the (TASK_STATUS_UPDATE|TASK_ARTIFACT_UPDATE) constant should equal "([^"]*)"$"#
)]
fn constant(_w: &mut World, name: String, value: String) {
    let actual = match name.as_str() {
        "TASK_STATUS_UPDATE" => TASK_STATUS_UPDATE,
        _ => TASK_ARTIFACT_UPDATE,
    };
    assert_eq!(actual, value);
}

#[then("the SSE data line should contain valid JSON")]
fn data_json(w: &mut World) {
    let out = w.sse.as_ref().unwrap();
    let data: String = out
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect::<Vec<_>>()
        .join("\n");
    w.data_json = Some(serde_json::from_str(&data).expect("data: holds JSON"));
}

#[then(regex = r#"^the JSON should have key "([^"]*)" with value "([^"]*)"$"#)]
fn json_key_value(w: &mut World, key: String, value: String) {
    assert_eq!(w.data_json.as_ref().unwrap()[&key], Value::from(value));
}

#[then(regex = r#"^the JSON should have a "([^"]*)" object$"#)]
fn json_object(w: &mut World, key: String) {
    assert!(w.data_json.as_ref().unwrap()[&key].is_object());
}

#[then(regex = r#"^the JSON should not have key "([^"]*)"$"#)]
fn json_lacks(w: &mut World, key: String) {
    let json = w.data_json.as_ref().unwrap();
    assert!(json.get(&key).is_none(), "{key} in {json}");
    assert!(
        json["params"].get(&key).is_none(),
        "{key} in params of {json}"
    );
}

#[then(regex = r#"^the JSON params should have key "([^"]*)" with value "([^"]*)"$"#)]
fn params_key_value(w: &mut World, key: String, value: String) {
    assert_eq!(
        w.data_json.as_ref().unwrap()["params"][&key],
        Value::from(value)
    );
}

#[then(regex = r#"^the JSON params should have key "([^"]*)" with numeric value ([0-9.eE+-]+)$"#)]
fn params_key_number(w: &mut World, key: String, value: f64) {
    assert_eq!(
        w.data_json.as_ref().unwrap()["params"][&key].as_f64(),
        Some(value)
    );
}

#[then(regex = r#"^the JSON params should not have key "([^"]*)"$"#)]
fn params_lack(w: &mut World, key: String) {
    assert!(w.data_json.as_ref().unwrap()["params"].get(&key).is_none());
}
