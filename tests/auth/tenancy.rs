//! Tenancy on the sid bridge: with callers identified, a context and its tasks are the caller's
//! own. Another caller finds no such task (-32001) in every way it could look: a call in either
//! dialect, ListTasks, a cancel, a push configuration, the REST binding and the event streams;
//! `sid.max_contexts_per_caller` bounds each caller's contexts; the extended card answers an
//! identified caller. Two API keys from a file name the callers; sid is the fake on stdio.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::keys::{alice_and_bob, ALICE, BOB};
use crate::support::{self, SseReader, TestGateway};

async fn two_callers(dir: &std::path::Path) -> TestGateway {
    support::gateway()
        .sid("tenancy")
        .with(alice_and_bob(dir))
        .with(|c| c.sid.max_contexts_per_caller = 1)
        .start()
        .await
}

/// An A2A 1.0 call by `who`: its HTTP status and answer.
async fn a2a(gw: &TestGateway, who: (&str, &str), method: &str, params: Value) -> (u16, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let a = gw.rpc_with(&body, &[who, ("a2a-version", "1.0")]).await;
    (a.status, a.json())
}

fn message(text: &str, context: Option<&str>) -> Value {
    let mut m = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
                                   "role": "ROLE_USER", "parts": [{"text": text}]}});
    if let Some(c) = context {
        m["message"]["contextId"] = json!(c);
    }
    m
}

fn not_found(answer: &Value, what: &str) {
    assert_eq!(answer["error"]["code"], -32001, "{what}: {answer}");
}

async fn get_with(gw: &TestGateway, path: &str, who: Option<(&str, &str)>) -> reqwest::Response {
    let mut req = gw.http.get(format!("{}{path}", gw.base()));
    if let Some((k, v)) = who {
        req = req.header(k, v);
    }
    req.send().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_cannot_see_another_callers_task_stream_or_list_entry() {
    let dir = tempfile::tempdir().unwrap();
    let gw = two_callers(dir.path()).await;

    let (status, sent) = a2a(&gw, ALICE, "SendMessage", message("hello", None)).await;
    assert_eq!(status, 200, "{sent}");
    let task = sent["result"]["task"]["id"].as_str().unwrap().to_owned();
    let ctx = sent["result"]["task"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();

    // The owner reads it; the other caller is told it does not exist, in each way it asks.
    let (_, mine) = a2a(&gw, ALICE, "GetTask", json!({"id": task})).await;
    assert_eq!(mine["result"]["id"], task.as_str(), "{mine}");
    let (_, theirs) = a2a(&gw, BOB, "GetTask", json!({"id": task})).await;
    not_found(&theirs, "GetTask");
    let (_, cancel) = a2a(&gw, BOB, "CancelTask", json!({"id": task})).await;
    not_found(&cancel, "CancelTask");
    let (_, configs) = a2a(
        &gw,
        BOB,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task}),
    )
    .await;
    not_found(&configs, "ListTaskPushNotificationConfigs");
    let (_, follow) = a2a(&gw, BOB, "SendMessage", {
        let mut m = message("more", Some(&ctx));
        m["message"]["taskId"] = json!(task);
        m
    })
    .await;
    not_found(&follow, "a message to the task");
    let (_, into_context) = a2a(&gw, BOB, "SendMessage", message("hi", Some(&ctx))).await;
    not_found(&into_context, "a message to the context");
    let seed = gw
        .rpc_with(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": task}}),
            &[BOB],
        )
        .await;
    not_found(&seed.json(), "tasks/get");

    // ListTasks shows each caller its own.
    let (_, bobs_list) = a2a(&gw, BOB, "ListTasks", json!({})).await;
    let ids = |v: &Value| -> Vec<String> {
        v["result"]["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(!ids(&bobs_list).contains(&task), "{bobs_list}");
    let (_, alices_list) = a2a(&gw, ALICE, "ListTasks", json!({})).await;
    assert!(ids(&alices_list).contains(&task), "{alices_list}");

    // The REST binding and the event streams: the same credentials, the same answers.
    let rest = format!("/a2a/rest/tasks/{task}");
    assert_eq!(get_with(&gw, &rest, Some(BOB)).await.status(), 404);
    assert_eq!(get_with(&gw, &rest, Some(ALICE)).await.status(), 200);
    let task_events = format!("/tasks/{task}/events");
    let context_events = format!("/contexts/{ctx}/events");
    assert_eq!(get_with(&gw, &task_events, Some(BOB)).await.status(), 404);
    assert_eq!(
        get_with(&gw, &context_events, Some(BOB)).await.status(),
        404
    );
    let anonymous = get_with(&gw, &task_events, None).await;
    assert_eq!(anonymous.status(), 401);
    assert_eq!(
        anonymous.headers()["www-authenticate"],
        r#"Bearer realm="wiregate""#
    );
    let resp = get_with(&gw, &task_events, Some(ALICE)).await;
    assert_eq!(resp.status(), 200);
    let events = SseReader::new(resp)
        .until_final(Duration::from_secs(10))
        .await;
    assert!(
        events.iter().any(|e| e.data["params"]["final"] == true),
        "the owner replays the task's updates: {events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_caller_holds_at_most_its_contexts_and_the_extended_card_names_who_may_ask() {
    let dir = tempfile::tempdir().unwrap();
    let gw = two_callers(dir.path()).await;

    let (status, first) = a2a(&gw, ALICE, "SendMessage", message("one", None)).await;
    assert_eq!(status, 200, "{first}");
    let (_, second) = a2a(&gw, ALICE, "SendMessage", message("two", None)).await;
    assert_eq!(second["error"]["code"], -32063, "{second}");
    assert!(
        second["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sid.max_contexts_per_caller"),
        "{second}"
    );
    // The seed dialect answers it with its HTTP status too (A2A's binding answers errors 200).
    let seed = gw
        .rpc_with(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "message/send",
                    "params": {"message": {"parts": [{"kind": "text", "text": "two"}]}}}),
            &[ALICE],
        )
        .await;
    assert_eq!(seed.status, 429, "{}", seed.text);
    assert_eq!(seed.json()["error"]["code"], -32063);
    // Her own context still takes turns, and the bound is hers alone.
    let ctx = first["result"]["task"]["contextId"].as_str().unwrap();
    let (status, again) = a2a(&gw, ALICE, "SendMessage", message("three", Some(ctx))).await;
    assert_eq!(status, 200, "{again}");
    let (status, bobs) = a2a(&gw, BOB, "SendMessage", message("mine", None)).await;
    assert_eq!(status, 200, "{bobs}");

    let card = gw.get("/.well-known/agent-card.json").await.json();
    assert_eq!(card["capabilities"]["extendedAgentCard"], true, "{card}");
    assert_eq!(
        card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"]["name"],
        "x-api-key"
    );
    let (status, extended) = a2a(&gw, BOB, "GetExtendedAgentCard", json!({})).await;
    assert_eq!(status, 200, "{extended}");
    assert_eq!(extended["result"]["name"], card["name"], "{extended}");
    let anonymous = gw
        .rpc_with(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {}}),
            &[("a2a-version", "1.0")],
        )
        .await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.text);
}
