//! Steps for `features/sse_streaming.feature` (seed 001).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cucumber::{given, then, when};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use wiregate::events::domain::{Bridge, EventMap};
use wiregate::events::feed::{Reader, RecentIds};
use wiregate::events::ReplayLog;
use wiregate::model::event::{A2aEvent, EventKind, TASK_ARTIFACT_UPDATE, TASK_STATUS_UPDATE};
use wiregate::wire::sse;

use crate::World;

fn event(w: &mut World, kind: &str, plan: Option<String>, data: Map<String, Value>) {
    let kind = EventKind::from_name(kind).expect("a known A2A event type");
    // No id of the step's own: the queue the gateway streams from stamps it (see below).
    w.event = Some(A2aEvent::new(kind, plan, data));
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

/// Formats the event as the gateway's SSE writer gets it: queued (which stamps its `id:`), then the
/// stored frame.
#[when("I format the event as SSE")]
fn format_sse(w: &mut World) {
    let queue = ReplayLog::new(8);
    let stored = queue.push(w.event.clone().unwrap()).expect("an open queue");
    w.sse = Some(String::from_utf8(stored.frame().to_vec()).unwrap());
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
    w.queue = Some(Arc::new(ReplayLog::new(64)));
}

/// The legacy server's event bus as the gateway sees it: NDJSON records arriving on a byte stream.
/// The stream counts how many records its reader has finished with (it asks for the next one
/// only after handling the last), so a step can wait for the bridge without sleeping.
#[derive(Debug)]
pub struct Bus {
    publish: mpsc::UnboundedSender<Bytes>,
    published: usize,
    handled: watch::Receiver<usize>,
    reader: Option<JoinHandle<()>>,
    stream: Option<(mpsc::UnboundedReceiver<Bytes>, watch::Sender<usize>)>,
}

#[given("a mock EventBus")]
fn bus(w: &mut World) {
    let (publish, rx) = mpsc::unbounded_channel();
    let (handled_tx, handled) = watch::channel(0);
    w.bus = Some(Bus {
        publish,
        published: 0,
        handled,
        reader: None,
        stream: Some((rx, handled_tx)),
    });
}

/// The gateway's own feed reader (what `[events] source` runs) reads the bus into the bridge.
#[given("an EventBusBridge connecting bus to queue")]
fn bridge(w: &mut World) {
    let queue = w.queue.clone().expect("a queue");
    let bus = w.bus.as_mut().expect("the bus exists first");
    let (rx, handled) = bus.stream.take().expect("one bridge per bus");
    let records =
        futures::stream::unfold((rx, handled, 0usize), |(mut rx, handled, n)| async move {
            // Asked for record n + 1: the first n are handled.
            handled.send_replace(n);
            let chunk = rx.recv().await?;
            Some((
                Ok::<_, std::convert::Infallible>(chunk),
                (rx, handled, n + 1),
            ))
        });
    let mut reader = Reader {
        bridge: Bridge::new(EventMap::default(), queue),
        last_id: None,
        seen: RecentIds::new(64),
        max_line_bytes: wiregate::config::Events::default().max_line_bytes,
    };
    bus.reader = Some(tokio::spawn(async move {
        reader.consume(Box::pin(records), false).await;
    }));
}

#[when(regex = r"^the bridge receives a ([A-Z_]+) domain event$")]
async fn bridge_receives(w: &mut World, event_type: String) {
    let bus = w.bus.as_mut().expect("a bus");
    bus.published += 1;
    let record = serde_json::json!({
        "event_id": format!("evt-{}", bus.published), "event_type": event_type, "plan_id": "plan-9",
        "data": {"state": "created"}, "timestamp": "2026-11-29T00:00:00Z"
    });
    bus.publish
        .send(Bytes::from(format!("{record}\n")))
        .expect("the bridge reads the bus");
    let published = bus.published;
    tokio::time::timeout(
        Duration::from_secs(5),
        bus.handled.wait_for(|n| *n >= published),
    )
    .await
    .expect("the bridge handled the record within 5 s")
    .expect("the bridge is still reading");
}

#[when("the queue is closed")]
fn close_queue(w: &mut World) {
    w.queue.as_ref().unwrap().close();
}

#[then(expr = "the queue should contain a {word}")]
fn queue_contains(w: &mut World, kind: String) {
    let kind = EventKind::from_name(&kind).expect("a known A2A event type");
    let events = w.queue.as_ref().unwrap().snapshot();
    assert_eq!(events.len(), 1, "the one published record: {events:?}");
    let ev = &events[0].event;
    assert_eq!(ev.event_type, kind, "{ev:?}");
    assert_eq!(ev.plan_id.as_deref(), Some("plan-9"));
    assert_eq!(ev.event_id, "evt-1", "the bus record's own id");
}

#[then("no error should be raised from the bridge")]
fn no_error(w: &mut World) {
    // The record was handled (the step waited for that) and the reader goes on reading.
    let bus = w.bus.as_ref().unwrap();
    assert!(
        !bus.reader.as_ref().unwrap().is_finished(),
        "the bridge stopped"
    );
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
