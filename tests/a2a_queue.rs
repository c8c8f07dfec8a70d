//! Several A2A tasks in one context: sid runs one turn of a session at a time, so a new message
//! to a context whose turn is running (or waiting for input) becomes a submitted task, queued
//! and started when the turns before it end, in order, bounded by `sid.max_queued_requests`;
//! canceling a queued task leaves the running turn alone. The seed dialect keeps -32060.

mod support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{gateway, TestGateway};

fn msg(text: &str, context: Option<&str>, task: Option<&str>, now: bool) -> Value {
    let mut m = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
                                   "role": "ROLE_USER", "parts": [{"text": text}]}});
    if let Some(c) = context {
        m["message"]["contextId"] = json!(c);
    }
    if let Some(t) = task {
        m["message"]["taskId"] = json!(t);
    }
    if now {
        m["configuration"] = json!({"returnImmediately": true});
    }
    m
}

async fn ok(gw: &TestGateway, method: &str, params: Value) -> Value {
    let (status, r) = gw.a2a_call(method, params, None).await;
    assert_eq!(status, 200, "{method}: {r}");
    assert!(r.get("error").is_none(), "{method}: {r}");
    r["result"].clone()
}

async fn state(gw: &TestGateway, task: &Value) -> String {
    let t = ok(gw, "GetTask", json!({"id": task})).await;
    t["status"]["state"].as_str().unwrap().to_owned()
}

/// Polls until `task` is in `want` (a queued task starts when the turn before it ends).
async fn until_state(gw: &TestGateway, task: &Value, want: &str) -> Value {
    for _ in 0..200 {
        let t = ok(gw, "GetTask", json!({"id": task})).await;
        if t["status"]["state"] == want {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task} never reached {want}");
}

#[tokio::test]
async fn a_message_to_a_busy_context_is_queued_and_runs_when_the_turn_ends() {
    let gw = gateway().sid("a2a-queue").start().await;
    let ctx = "queue-ctx-1";
    // The first turn holds at an input prompt: the context is busy until it is answered.
    let held = ok(&gw, "SendMessage", msg("hold", Some(ctx), None, false)).await;
    let held_id = held["task"]["id"].clone();
    assert_eq!(held["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");

    // Two more messages to the same context: accepted as submitted tasks, not refused busy.
    let second = ok(&gw, "SendMessage", msg("second", Some(ctx), None, true)).await;
    let third = ok(&gw, "SendMessage", msg("third", Some(ctx), None, true)).await;
    let (second_id, third_id) = (second["task"]["id"].clone(), third["task"]["id"].clone());
    for t in [&second, &third] {
        assert_eq!(t["task"]["contextId"], ctx);
        assert_eq!(t["task"]["status"]["state"], "TASK_STATE_SUBMITTED", "{t}");
    }
    assert_eq!(state(&gw, &second_id).await, "TASK_STATE_SUBMITTED");
    let listed = ok(&gw, "ListTasks", json!({"contextId": ctx})).await;
    assert_eq!(listed["totalSize"], 3, "{listed}");

    // A queued task is canceled without touching the running turn.
    let canceled = ok(&gw, "CancelTask", json!({"id": third_id})).await;
    assert_eq!(
        canceled["status"]["state"], "TASK_STATE_CANCELED",
        "{canceled}"
    );
    assert_eq!(state(&gw, &held_id).await, "TASK_STATE_INPUT_REQUIRED");

    // A blocking send waits through the queue: answered when its own turn has run.
    let gw_url = gw.base();
    let blocking = tokio::spawn(async move {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "SendMessage",
                          "params": msg("fourth", Some(ctx), None, false)});
        let r: Value = reqwest::Client::new()
            .post(format!("{gw_url}/rpc"))
            .json(&body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        r
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !blocking.is_finished(),
        "the fourth waits behind the held turn"
    );

    // The held turn ends; the queued ones run in order, each with its own history.
    let done = ok(
        &gw,
        "SendMessage",
        msg("done", None, held_id.as_str(), false),
    )
    .await;
    assert_eq!(done["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let second = until_state(&gw, &second_id, "TASK_STATE_COMPLETED").await;
    let history = second["history"].as_array().unwrap();
    assert_eq!(history[0]["parts"][0]["text"], "second", "{second}");
    assert_eq!(history.last().unwrap()["role"], "ROLE_AGENT");
    let fourth = tokio::time::timeout(Duration::from_secs(20), blocking)
        .await
        .expect("the blocking send is answered")
        .unwrap();
    assert_eq!(
        fourth["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{fourth}"
    );
    assert_eq!(state(&gw, &third_id).await, "TASK_STATE_CANCELED");
    let updated = |t: &Value| t["status"]["timestamp"].as_str().unwrap().to_owned();
    let fourth_task = ok(
        &gw,
        "GetTask",
        json!({"id": fourth["result"]["task"]["id"]}),
    )
    .await;
    // Status timestamps have millisecond resolution, and the fake sid can end two turns within
    // the same millisecond: "not earlier" is what they can show.
    assert!(
        updated(&fourth_task) >= updated(&second),
        "run in the order sent"
    );
}

#[tokio::test]
async fn the_queue_is_bounded_and_the_seed_dialect_still_answers_busy() {
    let gw = gateway()
        .sid("a2a-queue-bound")
        .with(|c| c.sid.max_queued_requests = 2)
        .start()
        .await;
    let ctx = "queue-ctx-2";
    let held = ok(&gw, "SendMessage", msg("hold", Some(ctx), None, false)).await;
    for text in ["one", "two"] {
        let t = ok(&gw, "SendMessage", msg(text, Some(ctx), None, true)).await;
        assert_eq!(t["task"]["status"]["state"], "TASK_STATE_SUBMITTED");
    }
    let (status, full) = gw
        .a2a_call("SendMessage", msg("three", Some(ctx), None, true), None)
        .await;
    assert_eq!(
        (status, &full["error"]["code"]),
        (200, &json!(-32060)),
        "{full}"
    );
    assert!(
        full["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sid.max_queued_requests"),
        "{full}"
    );
    // The seed dialect's contract: a second turn while one runs is refused.
    let seed = gw
        .call(
            "message/send",
            json!({"message": {"parts": [{"text": "hi"}]}, "contextId": ctx}),
        )
        .await;
    assert_eq!(seed["error"]["code"], -32060, "{seed}");
    // The held task is still the one running.
    assert_eq!(
        state(&gw, &held["task"]["id"]).await,
        "TASK_STATE_INPUT_REQUIRED"
    );
}
