//! Several A2A tasks in one context: sid runs one turn of a session at a time, so a new message
//! to a context whose turn is running (or waiting for input) becomes a submitted task, queued
//! and started when the turns before it end, in order, bounded by `sid.max_queued_requests`;
//! canceling a queued task leaves the running turn alone. The seed dialect keeps -32060.

use crate::support;

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
    // The context's log orders its updates (SSE ids increase within a context): the second
    // task's turn ended before the fourth's began.
    let fourth_id = fourth["result"]["task"]["id"].as_str().unwrap().to_owned();
    let mut log = gw.sse_get(&format!("/contexts/{ctx}/events"), None).await;
    let mut order = Vec::new();
    while let Some(e) = log.next(Duration::from_secs(10)).await {
        let p = &e.data["params"];
        let (task, state) = (p["taskId"].as_str().unwrap_or_default(), p["state"].clone());
        order.push((e.id.parse::<u64>().unwrap(), task.to_owned(), state));
        if task == fourth_id && p["final"] == true {
            break;
        }
    }
    assert!(order.windows(2).all(|w| w[0].0 < w[1].0), "{order:?}");
    let at = |task: &Value, state: &str| {
        order
            .iter()
            .position(|(_, t, s)| t == task.as_str().unwrap() && s == state)
            .unwrap_or_else(|| panic!("{task} never {state}: {order:?}"))
    };
    assert!(
        at(&second_id, "completed") < at(&json!(fourth_id), "working"),
        "run in the order sent: {order:?}"
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
