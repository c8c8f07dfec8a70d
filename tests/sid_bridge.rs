//! The sid bridge over real child processes (the fake sid) and real SSE parsing.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{gateway, text_message, SseEvent, TestGateway};

const T: Duration = Duration::from_secs(10);

async fn sid_gateway(tag: &str) -> TestGateway {
    gateway().sid(tag).start().await
}

fn states(events: &[SseEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.event == "TaskStatusUpdateEvent")
        .filter_map(|e| e.data["params"]["state"].as_str().map(str::to_owned))
        .collect()
}

fn ids(events: &[SseEvent]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e.id.parse().expect("decimal event ids"))
        .collect()
}

#[tokio::test]
async fn a_full_turn_with_message_send_and_the_task_stream() {
    let gw = sid_gateway("full-turn").await;
    let r = gw.call("message/send", text_message("hi there")).await;
    let task = &r["result"];
    assert_eq!(task["status"]["state"], "completed", "{r}");
    assert_eq!(
        task["artifacts"],
        json!([{"name": "response", "parts": [{"kind": "text", "text": "Hello from the mock model."}]}])
    );
    let task_id = task["id"].as_str().unwrap();
    let ctx = task["contextId"].as_str().unwrap();
    assert_eq!(task["metadata"]["result"]["current_agent"], "build");

    let got = gw.call("tasks/get", json!({"id": task_id})).await;
    assert_eq!(got["result"], *task);

    // Opened after the task finished: replays what is retained, then closes.
    let mut sse = gw.sse_get(&format!("/tasks/{task_id}/events"), None).await;
    assert_eq!(sse.headers["cache-control"], "no-cache");
    assert_eq!(sse.headers["x-accel-buffering"], "no");
    let events = sse.collect(T).await;
    let s = states(&events);
    assert_eq!(s.first().map(String::as_str), Some("submitted"));
    assert_eq!(s.last().map(String::as_str), Some("completed"));
    let ids = ids(&events);
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "increasing ids {ids:?}"
    );
    for e in &events {
        assert_eq!(e.data["jsonrpc"], "2.0");
        assert_eq!(e.data["params"]["taskId"], task_id);
        assert_eq!(e.data["params"]["contextId"], ctx);
        assert!(e.data["params"].get("event_id").is_none());
    }
    let text: String = events
        .iter()
        .filter(|e| e.data["params"]["artifact"] == "response")
        .map(|e| e.data["params"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Hello from the mock model.");
    let last = events.last().unwrap();
    assert_eq!(last.data["method"], "task/statusUpdate");
    assert_eq!(last.data["params"]["final"], true);
}

#[tokio::test]
async fn message_stream_answers_sse_of_the_task() {
    let gw = sid_gateway("stream").await;
    let mut sse = gw
        .sse_post(&json!({"jsonrpc": "2.0", "id": 5, "method": "message/stream", "params": text_message("think hard")}), None)
        .await;
    let events = sse.collect(T).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.data["params"]["artifact"].as_str().unwrap_or(""))
        .collect();
    assert!(kinds.contains(&"thinking"), "{kinds:?}");
    assert_eq!(
        states(&events).last().map(String::as_str),
        Some("completed")
    );
    assert!(events
        .iter()
        .all(|e| e.event == "TaskStatusUpdateEvent" || e.event == "TaskArtifactUpdateEvent"));
}

async fn start_tool_task(gw: &TestGateway, text: &str) -> (String, Value) {
    let r = gw.call("message/send", text_message(text)).await;
    let task = r["result"].clone();
    assert_eq!(task["status"]["state"], "input-required", "{r}");
    (task["id"].as_str().unwrap().to_owned(), task)
}

fn answer(task_id: &str, text: &str) -> Value {
    json!({"message": {"role": "user", "parts": [{"kind": "text", "text": text}], "taskId": task_id}})
}

#[tokio::test]
async fn a_prompt_answered_yes() {
    let gw = sid_gateway("prompt-yes").await;
    let (task_id, task) = start_tool_task(&gw, "please use a tool").await;
    let prompt = &task["metadata"]["prompt"];
    assert_eq!(prompt["promptId"], "prompt-1");
    assert_eq!(prompt["kind"], "confirmation");
    assert_eq!(prompt["choices"], json!(["yes", "no"]));
    assert!(task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("MANUAL"));

    let r = gw.call("message/send", answer(&task_id, "yes")).await;
    assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
    assert_eq!(r["result"]["id"], task_id.as_str());
    let events = gw
        .sse_get(&format!("/tasks/{task_id}/events"), None)
        .await
        .collect(T)
        .await;
    let s = states(&events);
    let ir = s.iter().position(|x| x == "input-required").unwrap();
    assert_eq!(
        s[ir + 1],
        "working",
        "prompt_ack puts it back to working: {s:?}"
    );
    let tool: Vec<&SseEvent> = events
        .iter()
        .filter(|e| e.data["params"]["artifact"] == "tool:bash")
        .collect();
    assert_eq!(tool[0].data["params"]["isError"], false);
    assert_eq!(tool[1].data["params"]["text"], "hi");
    let tool_status: Vec<&str> = events
        .iter()
        .filter_map(|e| e.data["params"]["tool"]["phase"].as_str())
        .collect();
    assert_eq!(tool_status, ["start", "input", "input", "end"]);
}

#[tokio::test]
async fn a_prompt_answered_no_and_one_answered_neither() {
    let gw = sid_gateway("prompt-no").await;
    let (task_id, _) = start_tool_task(&gw, "please use a tool").await;
    let r = gw.call("message/send", answer(&task_id, "maybe")).await;
    assert_eq!(r["result"]["status"]["state"], "input-required");
    assert_eq!(r["result"]["metadata"]["prompt"]["promptId"], "prompt-2");
    let r = gw.call("message/send", answer(&task_id, "no")).await;
    assert_eq!(r["result"]["status"]["state"], "completed");
    let events = gw
        .sse_get(&format!("/tasks/{task_id}/events"), None)
        .await
        .collect(T)
        .await;
    let start = events
        .iter()
        .find(|e| e.data["params"]["artifact"] == "tool:bash")
        .unwrap();
    assert_eq!(start.data["params"]["isError"], true);
    // Answering a task that no longer waits is refused.
    let again = gw.call("message/send", answer(&task_id, "yes")).await;
    assert_eq!(again["error"]["code"], -32602);
}

#[tokio::test]
async fn tool_output_under_a_foreign_request_id_reaches_its_task() {
    let gw = sid_gateway("tool-output").await;
    let (task_id, _) = start_tool_task(&gw, "external tool please").await;
    gw.call("message/send", answer(&task_id, "yes")).await;
    let events = gw
        .sse_get(&format!("/tasks/{task_id}/events"), None)
        .await
        .collect(T)
        .await;
    let out: Vec<&SseEvent> = events
        .iter()
        .filter(|e| e.data["params"]["stream"].is_string())
        .collect();
    assert_eq!(out.len(), 2, "{events:?}");
    assert_eq!(out[0].data["params"]["text"], "hi\n");
    assert_eq!(out[0].data["params"]["stream"], "stdout");
    assert_eq!(out[1].data["params"]["dataB64"], "/w==");
    assert_eq!(
        out[1].data["params"]["toolUseId"],
        out[0].data["params"]["toolUseId"]
    );
}

#[tokio::test]
async fn a_provider_error_fails_the_task_though_sid_says_ok() {
    let gw = sid_gateway("provider-error").await;
    let r = gw.call("message/send", text_message("fail please")).await;
    assert_eq!(r["result"]["status"]["state"], "failed", "{r}");
    assert!(r["result"]["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("API error"));
}

#[tokio::test]
async fn two_subscribers_see_the_same_events() {
    let gw = sid_gateway("two-subs").await;
    let first = gw.call("message/send", text_message("hello")).await;
    let ctx = first["result"]["contextId"].as_str().unwrap().to_owned();
    // The context stream stays open: read the retained events up to the first turn's final.
    let retained = gw
        .sse_get(&format!("/contexts/{ctx}/events"), None)
        .await
        .until_final(T)
        .await;
    let last_id = retained.last().unwrap().id.clone();
    let mut a = gw
        .sse_get(&format!("/contexts/{ctx}/events"), Some(&last_id))
        .await;
    let mut b = gw
        .sse_get(&format!("/contexts/{ctx}/events"), Some(&last_id))
        .await;
    let second = gw
        .call(
            "message/send",
            json!({"message": {"parts": [{"text": "again"}], "contextId": ctx}}),
        )
        .await;
    assert_eq!(second["result"]["status"]["state"], "completed");
    let (ea, eb) = (a.until_final(T).await, b.until_final(T).await);
    assert!(ea.len() > 3);
    assert_eq!(ids(&ea), ids(&eb));
    assert!(ids(&ea)[0] > last_id.parse::<u64>().unwrap());
    assert!(ea
        .iter()
        .all(|e| e.data["params"]["taskId"] == second["result"]["id"]));
}
