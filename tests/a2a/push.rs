//! A2A push notifications over real sockets: a webhook receiver started here, configurations
//! made, read, listed and deleted in 1.0 and 0.3, task updates POSTed with the configured
//! authentication and retried, and the server-side request forgery guard.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use serde_json::{json, Value};
use support::{gateway, TestGateway};
use tokio::sync::{mpsc, Mutex};

/// One POST the receiver got.
#[derive(Debug)]
struct Hit {
    authorization: Option<String>,
    body: Value,
}

#[derive(Clone)]
struct Receiver {
    tx: mpsc::UnboundedSender<Hit>,
    /// Answer 500 to this many requests first (to see the gateway retry).
    fail_first: Arc<Mutex<u32>>,
}

async fn hook(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let hit = Hit {
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let _ = r.tx.send(hit);
    let mut fail = r.fail_first.lock().await;
    if *fail > 0 {
        *fail -= 1;
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    StatusCode::OK
}

/// A webhook receiver on a free loopback port: its URL and what it receives.
async fn receiver(fail_first: u32) -> (String, mpsc::UnboundedReceiver<Hit>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let state = Receiver {
        tx,
        fail_first: Arc::new(Mutex::new(fail_first)),
    };
    let app = axum::Router::new()
        .route("/hook", post(hook))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), rx)
}

async fn push_gateway(tag: &str) -> TestGateway {
    gateway()
        .sid(tag)
        .with(|c| c.a2a.push_allow_private = true)
        .start()
        .await
}

fn msg(text: &str, task: Option<&str>) -> Value {
    let mut m = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
                                   "role": "ROLE_USER", "parts": [{"text": text}]}});
    if let Some(t) = task {
        m["message"]["taskId"] = json!(t);
    }
    m
}

async fn ok(gw: &TestGateway, method: &str, params: Value, version: Option<&str>) -> Value {
    let (status, r) = gw.a2a_call(method, params, version).await;
    assert_eq!(status, 200, "{method}: {r}");
    assert!(r.get("error").is_none(), "{method}: {r}");
    r["result"].clone()
}

/// Hits until one carries a final state (COMPLETED/CANCELED), within 10 s.
async fn until_final(rx: &mut mpsc::UnboundedReceiver<Hit>) -> Vec<Hit> {
    let mut hits = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let hit = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .expect("the final update arrives")
            .unwrap();
        let state = hit.body["statusUpdate"]["status"]["state"]
            .as_str()
            .or(hit.body["task"]["status"]["state"].as_str())
            .unwrap_or("")
            .to_owned();
        hits.push(hit);
        if state == "TASK_STATE_COMPLETED" || state == "TASK_STATE_CANCELED" {
            return hits;
        }
    }
}

#[tokio::test]
async fn a_tasks_updates_reach_its_webhook_with_the_configured_authentication() {
    let gw = push_gateway("a2a-push-1").await;
    let (url, mut rx) = receiver(0).await;
    let r = ok(&gw, "SendMessage", msg("hold this", None), None).await;
    let task = r["task"]["id"].as_str().unwrap().to_owned();

    let made = ok(
        &gw,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": task, "id": "hook-1", "url": url, "token": "tok-1",
               "authentication": {"scheme": "Bearer", "credentials": "s3cret"}}),
        None,
    )
    .await;
    assert_eq!(made["id"], "hook-1");
    assert_eq!(made["taskId"], task.as_str());
    assert_eq!(made["url"], url.as_str());
    assert_eq!(made["authentication"], json!({"scheme": "Bearer"}));
    assert!(
        !made.to_string().contains("s3cret"),
        "credentials are not echoed"
    );
    let got = ok(
        &gw,
        "GetTaskPushNotificationConfig",
        json!({"taskId": task, "id": "hook-1"}),
        None,
    )
    .await;
    assert_eq!(got, made);
    // ProtoJSON's field names are read too (the conformance suite sends them).
    let listed = ok(
        &gw,
        "ListTaskPushNotificationConfigs",
        json!({"task_id": task}),
        None,
    )
    .await;
    assert_eq!(listed["configs"], json!([made]));
    assert_eq!(listed["nextPageToken"], "");

    // Continue the held task to its end: its updates go to the webhook.
    ok(&gw, "SendMessage", msg("done", Some(&task)), None).await;
    let hits = until_final(&mut rx).await;
    for h in &hits {
        assert_eq!(h.authorization.as_deref(), Some("Bearer s3cret"));
        let one_of = ["task", "statusUpdate", "artifactUpdate", "message"];
        let keys: Vec<&String> = h.body.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 1, "a StreamResponse: {:?}", h.body);
        assert!(one_of.contains(&keys[0].as_str()), "{:?}", h.body);
    }
    let last = &hits.last().unwrap().body["statusUpdate"];
    assert_eq!(last["taskId"], task.as_str());
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED");
    assert!(
        hits.iter()
            .any(|h| h.body["artifactUpdate"]["artifact"]["parts"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("Continued: done"))),
        "the answer's chunks too"
    );

    // Deleting is idempotent, and the configuration is gone.
    for _ in 0..2 {
        let d = ok(
            &gw,
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": task, "id": "hook-1"}),
            None,
        )
        .await;
        assert_eq!(d, json!({}));
    }
    let listed = ok(
        &gw,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task}),
        None,
    )
    .await;
    assert_eq!(listed["configs"], json!([]));
    let (_, r) = gw
        .a2a_call(
            "GetTaskPushNotificationConfig",
            json!({"taskId": task, "id": "hook-1"}),
            None,
        )
        .await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
}

#[tokio::test]
async fn a_send_carries_its_own_webhook_and_a_failing_webhook_is_retried() {
    let gw = push_gateway("a2a-push-2").await;
    // The receiver fails its first two requests: the gateway tries each notification 3 times.
    let (url, mut rx) = receiver(2).await;
    let mut send = msg("hold on", None);
    send["configuration"] = json!({"taskPushNotificationConfig": {"url": url}});
    let r = ok(&gw, "SendMessage", send, None).await;
    let task = r["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let c = ok(&gw, "CancelTask", json!({"id": task}), None).await;
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED");
    let hits = until_final(&mut rx).await;
    assert!(hits.iter().all(|h| h.authorization.is_none()));
    assert_eq!(
        hits[0].body, hits[1].body,
        "a refused notification is sent again"
    );
    assert_eq!(hits[1].body, hits[2].body);
    assert_eq!(
        hits.last().unwrap().body["statusUpdate"]["status"]["state"],
        "TASK_STATE_CANCELED"
    );
}

#[tokio::test]
async fn configurations_in_0_3_shapes() {
    let gw = push_gateway("a2a-push-0-3").await;
    let (url, _rx) = receiver(0).await;
    let (_, r) = gw
        .a2a_call(
            "message/send",
            json!({"message": {"kind": "message", "messageId": "m1", "role": "user",
                               "parts": [{"kind": "text", "text": "hi"}]}}),
            Some("0.3"),
        )
        .await;
    let task = r["result"]["id"].as_str().unwrap().to_owned();
    let set = ok(
        &gw,
        "tasks/pushNotificationConfig/set",
        json!({"taskId": task, "pushNotificationConfig": {"id": "p1", "url": url,
               "authentication": {"schemes": ["Basic"], "credentials": "dTpw"}}}),
        Some("0.3"),
    )
    .await;
    assert_eq!(set["taskId"], task.as_str());
    assert_eq!(set["pushNotificationConfig"]["id"], "p1");
    assert_eq!(
        set["pushNotificationConfig"]["authentication"]["schemes"],
        json!(["Basic"])
    );
    let got = ok(
        &gw,
        "tasks/pushNotificationConfig/get",
        json!({"id": task, "pushNotificationConfigId": "p1"}),
        Some("0.3"),
    )
    .await;
    assert_eq!(got, set);
    let listed = ok(
        &gw,
        "tasks/pushNotificationConfig/list",
        json!({"id": task}),
        Some("0.3"),
    )
    .await;
    assert_eq!(listed, json!([set]));
    let (_, d) = gw
        .a2a_call(
            "tasks/pushNotificationConfig/delete",
            json!({"id": task, "pushNotificationConfigId": "p1"}),
            Some("0.3"),
        )
        .await;
    assert_eq!(d["result"], Value::Null, "{d}");
}

#[tokio::test]
async fn webhooks_to_private_addresses_are_refused_by_default() {
    let gw = gateway().sid("a2a-push-ssrf").start().await;
    let r = ok(&gw, "SendMessage", msg("hi", None), None).await;
    let task = r["task"]["id"].as_str().unwrap().to_owned();
    for url in [
        "http://127.0.0.1:9/hook",
        "http://localhost:8080/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.1/hook",
        "http://[::1]/hook",
        "ftp://example.com/hook",
        // NAT64 of a private address, local-use NAT64, 6to4, benchmarking, reserved.
        "http://[64:ff9b::a00:1]/hook",
        "http://[64:ff9b::127.0.0.1]:8080/hook",
        "http://[64:ff9b:1::808:808]/hook",
        "http://[2002:808:808::1]/hook",
        "http://198.18.0.1/hook",
        "http://198.19.255.254/hook",
        "http://240.0.0.1/hook",
        "http://[::ffff:198.18.0.1]/hook",
    ] {
        let (_, r) = gw
            .a2a_call(
                "CreateTaskPushNotificationConfig",
                json!({"taskId": task, "url": url}),
                None,
            )
            .await;
        assert_eq!(r["error"]["code"], -32602, "{url}: {r}");
    }
    let mut send = msg("hi", None);
    send["configuration"] =
        json!({"taskPushNotificationConfig": {"url": "http://192.168.1.1/hook"}});
    let (_, r) = gw.a2a_call("SendMessage", send, None).await;
    assert_eq!(
        r["error"]["code"], -32602,
        "refused before the turn starts: {r}"
    );
    let (_, r) = gw
        .a2a_call(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": "nope", "url": "http://93.184.216.34/hook"}),
            None,
        )
        .await;
    assert_eq!(r["error"]["code"], -32001, "an unknown task: {r}");
    let card = gw.get("/.well-known/agent-card.json").await.json();
    assert_eq!(card["capabilities"]["pushNotifications"], true);
    for (method, params) in [
        (
            "GetTaskPushNotificationConfig",
            json!({"taskId": "nope", "id": "x"}),
        ),
        ("ListTaskPushNotificationConfigs", json!({"taskId": "nope"})),
        (
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": "nope", "id": "x"}),
        ),
    ] {
        let (_, r) = gw.a2a_call(method, params, None).await;
        assert_eq!(r["error"]["code"], -32001, "{method}: {r}");
    }
}

#[tokio::test]
async fn a_streaming_send_carries_its_own_webhook_too() {
    let gw = push_gateway("a2a-push-stream").await;
    let (url, mut rx) = receiver(0).await;
    let mut send = msg("hello", None);
    send["configuration"] = json!({"taskPushNotificationConfig": {"id": "s1", "url": url}});
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": send});
    let events = gw
        .a2a_stream(&body, None)
        .await
        .collect(Duration::from_secs(10))
        .await;
    let task = events[0].data["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let listed = ok(
        &gw,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": task}),
        None,
    )
    .await;
    assert_eq!(listed["configs"][0]["id"], "s1");
    let hits = until_final(&mut rx).await;
    // The turn may end before the webhook's watcher starts: then the task as it ended.
    let last = &hits.last().unwrap().body;
    let id = last["statusUpdate"]["taskId"]
        .as_str()
        .or(last["task"]["id"].as_str());
    assert_eq!(id, Some(task.as_str()), "{last}");
}
