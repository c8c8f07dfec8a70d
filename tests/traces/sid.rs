//! The spans of an A2A streamed turn through sid: the stream's SERVER span ends with the
//! stream, and the turn is a span of its own, from its request to sid to its final update,
//! with its task and context ids; each webhook notification is a span of the trace that made
//! the webhook.

use std::time::Duration;

use serde_json::json;

use crate::support::otlp::{Collector, Mode};
use crate::support::{gateway, jsonrpc_echo, SseReader};
use crate::{one, traced, CLIENT, INTERNAL, SERVER};

#[tokio::test]
async fn a_streamed_turn_is_a_span_from_its_request_to_its_final_update() {
    let collector = Collector::start(Mode::Accept).await;
    let gw = traced(gateway().sid("traces-turn"), &collector)
        .start()
        .await;
    let parent = "00-7bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let body = json!({"jsonrpc": "2.0", "id": "s-1", "method": "SendStreamingMessage",
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
    let resp = gw
        .http
        .post(format!("{}/rpc", gw.base()))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .header("traceparent", parent)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = SseReader::new(resp).collect(Duration::from_secs(10)).await;
    let last = &events.last().expect("events").data["result"]["statusUpdate"];
    assert_eq!(
        last["status"]["state"], "TASK_STATE_COMPLETED",
        "{events:?}"
    );
    let (task, context) = (
        last["taskId"].as_str().unwrap().to_owned(),
        last["contextId"].as_str().unwrap().to_owned(),
    );
    let spans = collector.trace("7bf92f3577b34da6a3ce929d0e0e4736", 2).await;
    let server = one(&spans, SERVER, "POST /rpc");
    assert_eq!(server.parent(), "00f067aa0ba902b7");
    assert_eq!(
        server.attr("rpc.method").as_deref(),
        Some("SendStreamingMessage")
    );
    assert_eq!(
        server.attr("wiregate.client_dialect").as_deref(),
        Some("a2a-1.0")
    );
    assert_eq!(
        server.attr("rpc.jsonrpc.request_id").as_deref(),
        Some("s-1")
    );
    let turn = one(&spans, INTERNAL, "sid turn");
    assert_eq!(turn.parent(), server.id());
    assert_eq!(turn.attr("wiregate.task_id"), Some(task));
    assert_eq!(turn.attr("wiregate.context_id"), Some(context));
    assert_eq!(
        turn.attr("wiregate.task_state").as_deref(),
        Some("completed")
    );
    assert!(!turn.failed());
    // The stream's span lasts until the stream ended: past the turn's final update.
    assert!(server.span.end_time_unix_nano >= turn.span.end_time_unix_nano);
    assert!(turn.span.start_time_unix_nano >= server.span.start_time_unix_nano);
}

#[tokio::test]
async fn each_webhook_notification_is_a_span_of_the_trace_that_made_the_webhook() {
    let collector = Collector::start(Mode::Accept).await;
    let hook = jsonrpc_echo().run().await;
    let gw = traced(gateway().sid("traces-push"), &collector)
        .with(|c| c.a2a.push_allow_private = true)
        .start()
        .await;
    let parent = "00-8bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "hold on"}]},
        "configuration": {"taskPushNotificationConfig": {"url": hook.url()}}}});
    let a = gw.rpc_with(&send, &[("traceparent", parent)]).await;
    let task = a.json()["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let cancel = json!({"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task}});
    assert_eq!(gw.rpc(&cancel).await.status, 200);
    let spans = collector
        .until("a delivered notification", |s| {
            s.iter()
                .filter(|e| e.span.name == "push notification")
                .any(|e| e.attr("wiregate.push.outcome").as_deref() == Some("delivered"))
        })
        .await;
    let server = spans
        .iter()
        .find(|s| s.kind() == SERVER && s.trace() == "8bf92f3577b34da6a3ce929d0e0e4736")
        .expect("the send's span");
    let pushes: Vec<_> = spans
        .iter()
        .filter(|s| s.span.name == "push notification")
        .collect();
    assert!(pushes
        .iter()
        .all(|p| p.parent() == server.id() && p.kind() == INTERNAL));
    assert_eq!(pushes[0].attr("wiregate.task_id"), Some(task));
    let post = spans
        .iter()
        .find(|s| s.kind() == CLIENT && s.parent() == pushes[0].id())
        .expect("the webhook POST's span");
    let status: u16 = post
        .attr("http.response.status_code")
        .unwrap()
        .parse()
        .unwrap();
    assert!((200..300).contains(&status), "{status}");
    let seen = hook.seen();
    let sent: Vec<&str> = seen
        .iter()
        .map(|s| s.headers["traceparent"].to_str().unwrap())
        .collect();
    assert!(
        sent.iter().any(|t| t.contains(&post.id())),
        "the webhook saw the POST's span: {sent:?}"
    );
}

#[tokio::test]
async fn a_task_event_stream_is_a_server_span_named_by_its_route() {
    let collector = Collector::start(Mode::Accept).await;
    let gw = traced(gateway().sid("traces-stream-get"), &collector)
        .start()
        .await;
    let sent = gw
        .call("message/send", crate::support::text_message("hello"))
        .await;
    let task = sent["result"]["id"].as_str().unwrap().to_owned();
    let parent = "00-abf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let resp = gw
        .http
        .get(format!("{}/tasks/{task}/events", gw.base()))
        .header("traceparent", parent)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    SseReader::new(resp)
        .until_final(Duration::from_secs(10))
        .await;
    let spans = collector.trace("abf92f3577b34da6a3ce929d0e0e4736", 1).await;
    let server = one(&spans, SERVER, "GET /tasks/{taskId}/events");
    assert_eq!(server.parent(), "00f067aa0ba902b7");
    assert_eq!(
        server.attr("http.route").as_deref(),
        Some("/tasks/{taskId}/events")
    );
    assert_eq!(
        server.attr("url.path"),
        Some(format!("/tasks/{task}/events"))
    );
    assert_eq!(
        server.attr("http.response.status_code").as_deref(),
        Some("200")
    );
}
