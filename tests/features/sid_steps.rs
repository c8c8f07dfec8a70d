//! Steps for `features/sid_bridge.feature`: the fake sid as a real child, SSE read by a parser.

use std::time::Duration;

use cucumber::{given, then, when};
use serde_json::json;

use crate::support::{gateway, text_message, SseEvent};
use crate::World;

const T: Duration = Duration::from_secs(10);

#[given("a gateway bridging a sid agent")]
async fn bridging(w: &mut World) {
    w.gateway = Some(gateway().sid("feature").start().await);
}

#[when(expr = "the page starts a turn saying {string} with message\\/stream")]
async fn stream_turn(w: &mut World, text: String) {
    let body = json!({"jsonrpc": "2.0", "id": "page-1", "method": "message/stream", "params": text_message(&text)});
    let mut sse = w.gateway.as_ref().unwrap().sse_post(&body, None).await;
    w.sse_events = sse.collect(T).await;
}

#[then(expr = "the first update says the task is {string}")]
fn first_update(w: &mut World, state: String) {
    let first = &w.sse_events[0];
    assert_eq!(first.event, "TaskStatusUpdateEvent");
    assert_eq!(first.data["params"]["state"], state.as_str());
}

#[then(expr = "the answer text streams in as {string}")]
fn answer_text(w: &mut World, text: String) {
    let chunks: Vec<&SseEvent> = w
        .sse_events
        .iter()
        .filter(|e| {
            e.event == "TaskArtifactUpdateEvent" && e.data["params"]["artifact"] == "response"
        })
        .collect();
    assert!(chunks.len() > 1, "streamed in several chunks");
    let joined: String = chunks
        .iter()
        .map(|e| e.data["params"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(joined, text);
}

#[then(expr = "the last update says the task is {string} and is final")]
fn last_update(w: &mut World, state: String) {
    let last = w.sse_events.last().unwrap();
    assert_eq!(last.data["params"]["state"], state.as_str());
    assert_eq!(last.data["params"]["final"], true);
}

#[then("the stream closes after the final update")]
fn closes(w: &mut World) {
    let finals = w
        .sse_events
        .iter()
        .filter(|e| e.data["params"]["final"] == true)
        .count();
    assert_eq!(
        finals, 1,
        "exactly one final update, and it was the last one read before the end"
    );
}

#[when(expr = "the page sends {string} with message\\/send")]
async fn send(w: &mut World, text: String) {
    let r = w
        .gateway
        .as_ref()
        .unwrap()
        .call("message/send", text_message(&text))
        .await;
    w.task = Some(r["result"].clone());
}

#[then(expr = "the task waits for input with the question's choices {string} and {string}")]
fn waits(w: &mut World, a: String, b: String) {
    let task = w.task.as_ref().unwrap();
    assert_eq!(task["status"]["state"], "input-required", "{task}");
    assert_eq!(task["metadata"]["prompt"]["choices"], json!([a, b]));
}

#[when(expr = "the page answers {string} to that task")]
async fn answers(w: &mut World, answer: String) {
    let id = w.task.as_ref().unwrap()["id"].clone();
    let params = json!({"message": {"role": "user", "parts": [{"kind": "text", "text": answer}], "taskId": id}});
    let r = w
        .gateway
        .as_ref()
        .unwrap()
        .call("message/send", params)
        .await;
    w.task = Some(r["result"].clone());
}

#[then(expr = "the task is {string}")]
fn task_is(w: &mut World, state: String) {
    assert_eq!(w.task.as_ref().unwrap()["status"]["state"], state.as_str());
}

#[then(expr = "the task's stream shows the tool's output {string}")]
async fn tool_output(w: &mut World, text: String) {
    let id = w.task.as_ref().unwrap()["id"].as_str().unwrap().to_owned();
    let gw = w.gateway.as_ref().unwrap();
    let events = gw
        .sse_get(&format!("/tasks/{id}/events"), None)
        .await
        .collect(T)
        .await;
    assert!(events
        .iter()
        .any(|e| e.data["params"]["artifact"] == "tool:bash"
            && e.data["params"]["text"] == text.as_str()));
}

#[given(expr = "the page watched a finished turn and saw its {int}th update")]
async fn watched(w: &mut World, n: usize) {
    let gw = w.gateway.as_ref().unwrap();
    let r = gw.call("message/send", text_message("hello")).await;
    let id = r["result"]["id"].as_str().unwrap().to_owned();
    let all = gw
        .sse_get(&format!("/tasks/{id}/events"), None)
        .await
        .collect(T)
        .await;
    w.task = Some(r["result"].clone());
    w.resume_from = Some(all[n - 1].id.clone());
    w.sse_events = all;
    w.seen_count = n;
}

#[when("the page reconnects with that update's id as Last-Event-ID")]
async fn reconnects(w: &mut World) {
    let id = w.task.as_ref().unwrap()["id"].as_str().unwrap().to_owned();
    let gw = w.gateway.as_ref().unwrap();
    let rest = gw
        .sse_get(&format!("/tasks/{id}/events"), w.resume_from.as_deref())
        .await
        .collect(T)
        .await;
    w.resumed = rest;
}

#[then("it receives every later update exactly once and nothing earlier")]
fn every_later(w: &mut World) {
    let expected: Vec<&str> = w.sse_events[w.seen_count..]
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    let got: Vec<&str> = w.resumed.iter().map(|e| e.id.as_str()).collect();
    assert!(!got.is_empty());
    assert_eq!(got, expected);
}
