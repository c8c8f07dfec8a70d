//! The sid bridge over real child processes (the fake sid) and real SSE parsing.

use crate::support;

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
    let mut sse = gw.stream_message(text_message("think hard")).await;
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

#[tokio::test]
async fn resume_after_a_dropped_connection_loses_and_repeats_nothing() {
    let gw = sid_gateway("resume").await;
    let r = gw
        .call("message/send", text_message("please use a tool"))
        .await;
    let task_id = r["result"]["id"].as_str().unwrap().to_owned();
    gw.call("message/send", answer(&task_id, "yes")).await;
    let path = format!("/tasks/{task_id}/events");
    let whole = gw.sse_get(&path, None).await.collect(T).await;
    assert!(whole.len() > 8);
    // Read a few, drop the connection, resume after the last one seen.
    let mut first = gw.sse_get(&path, None).await;
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(first.next(T).await.unwrap());
    }
    drop(first);
    let rest = gw.sse_get(&path, Some(&seen[4].id)).await.collect(T).await;
    seen.extend(rest);
    assert_eq!(ids(&seen), ids(&whole));
    // tasks/resubscribe with Last-Event-ID does the same over POST.
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/resubscribe", "params": {"id": task_id}});
    let again = gw
        .sse_post(&body, Some(&whole[2].id))
        .await
        .collect(T)
        .await;
    assert_eq!(ids(&again), ids(&whole)[3..]);
}

#[tokio::test]
async fn an_id_older_than_the_replay_buffer_gets_a_gap_frame() {
    let gw = gateway()
        .sid("gap")
        .with(|c| c.sid.replay_events = 4)
        .start()
        .await;
    let r = gw.call("message/send", text_message("hello")).await;
    let ctx = r["result"]["contextId"].as_str().unwrap();
    let mut sse = gw
        .sse_get(&format!("/contexts/{ctx}/events"), Some("1"))
        .await;
    let gap = sse.next(T).await.unwrap();
    assert_eq!(gap.event, "gap");
    let rest = sse.until_final(T).await;
    assert_eq!(rest.len(), 4, "the four retained events follow");
}

#[tokio::test]
async fn a_child_killed_mid_task_fails_the_task_with_a_final_event() {
    let gw = sid_gateway("crash").await;
    let r = gw.call("message/send", text_message("crash now")).await;
    let task = &r["result"];
    assert_eq!(task["status"]["state"], "failed", "{r}");
    assert!(task["metadata"]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("mid-task"));
    let task_id = task["id"].as_str().unwrap();
    let events = gw
        .sse_get(&format!("/tasks/{task_id}/events"), None)
        .await
        .collect(T)
        .await;
    let last = events.last().unwrap();
    assert_eq!(last.data["params"]["state"], "failed");
    assert_eq!(last.data["params"]["final"], true);
    // The context comes back on the next call (sid resumed), with ids still increasing.
    let ctx = task["contextId"].as_str().unwrap();
    let next = gw
        .call(
            "message/send",
            json!({"message": {"parts": [{"text": "hello again"}]}, "contextId": ctx}),
        )
        .await;
    assert_eq!(next["result"]["status"]["state"], "completed", "{next}");
    let all = gw.sse_get(&format!("/contexts/{ctx}/events"), None).await;
    let mut all = all;
    let mut got = all.until_final(T).await;
    got.extend(all.until_final(T).await);
    let ids = ids(&got);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
}

#[tokio::test]
async fn error_mappings_keep_sids_message() {
    let gw = sid_gateway("errors").await;
    let r = gw.call("message/send", text_message("hello")).await;
    let ctx = r["result"]["contextId"].as_str().unwrap().to_owned();

    let stats = gw.call("_sid/stats", json!({"contextId": ctx})).await;
    assert_eq!(stats["result"]["message_count"], 2, "{stats}");

    let off = gw.call("_sid/shutdown", json!({"contextId": ctx})).await;
    assert_eq!(off["error"]["code"], -32601);
    assert!(off["error"]["message"]
        .as_str()
        .unwrap()
        .contains("sid.allow_ops"));

    let codeless = gw
        .call(
            "_sid/switch_agent",
            json!({"contextId": ctx, "agent": "nope"}),
        )
        .await;
    assert_eq!(codeless["error"]["code"], -32062);
    assert!(codeless["error"]["data"]["sidMessage"]
        .as_str()
        .unwrap()
        .contains("unknown_agent"));
    assert_eq!(codeless["error"]["data"]["sidCode"], Value::Null);

    let bad = gw
        .call("_sid/switch_agent", json!({"contextId": ctx}))
        .await;
    assert_eq!(bad["error"]["code"], -32602);

    let unknown = gw.call("tasks/get", json!({"id": "no-such-task"})).await;
    assert_eq!(unknown["error"]["code"], -32001);

    let done = r["result"]["id"].as_str().unwrap();
    let cancel = gw.call("tasks/cancel", json!({"id": done})).await;
    assert_eq!(cancel["error"]["code"], -32002);

    // While a prompt is open sid answers everything else with busy.
    let (task_id, _) = start_tool_task_in(&gw, &ctx).await;
    let busy = gw.call("_sid/stats", json!({"contextId": ctx})).await;
    assert_eq!(busy["error"]["code"], -32060);
    assert!(busy["error"]["message"]
        .as_str()
        .unwrap()
        .contains("waiting for prompt_response"));
    let cancel = gw.call("tasks/cancel", json!({"id": task_id})).await;
    assert_eq!(
        cancel["error"]["code"], -32060,
        "interrupt during a prompt is busy: {cancel}"
    );
    let turn = gw
        .call(
            "message/send",
            json!({"message": {"parts": [{"text": "another"}]}, "contextId": ctx}),
        )
        .await;
    assert_eq!(turn["error"]["code"], -32060);
}

async fn start_tool_task_in(gw: &TestGateway, ctx: &str) -> (String, Value) {
    let r = gw
        .call(
            "message/send",
            json!({"message": {"parts": [{"text": "use a tool"}], "contextId": ctx}}),
        )
        .await;
    assert_eq!(r["result"]["status"]["state"], "input-required", "{r}");
    (
        r["result"]["id"].as_str().unwrap().to_owned(),
        r["result"].clone(),
    )
}

#[tokio::test]
async fn cancel_over_stdio_says_honestly_when_sid_will_stop() {
    let gw = sid_gateway("cancel-stdio").await;
    let mut sse = gw.stream_message(text_message("slow one")).await;
    let first = sse.next(T).await.unwrap();
    let task_id = first.data["params"]["taskId"].as_str().unwrap().to_owned();
    let c = gw.call("tasks/cancel", json!({"id": task_id})).await;
    assert_eq!(c["result"]["metadata"]["cancelRequested"], true, "{c}");
    assert!(c["result"]["metadata"]["cancelNote"]
        .as_str()
        .unwrap()
        .contains("stdio"));
    let rest = sse.collect(T).await;
    assert_eq!(states(&rest).last().map(String::as_str), Some("completed"));
}

#[tokio::test]
async fn the_context_limit_is_enforced() {
    let gw = gateway()
        .sid("limit")
        .with(|c| c.sid.max_contexts = 1)
        .start()
        .await;
    let (task_id, _) = start_tool_task(&gw, "use a tool").await;
    let second = gw.rpc(&json!({"jsonrpc": "2.0", "id": 9, "method": "message/send", "params": text_message("hi")})).await;
    assert_eq!(second.status, 503);
    assert_eq!(second.json()["error"]["code"], -32063);
    gw.call("message/send", answer(&task_id, "yes")).await;
}

#[tokio::test]
async fn an_idle_child_is_stopped_and_resumed_on_use_with_ids_still_increasing() {
    let tag = format!("idle-{}", uuid::Uuid::new_v4());
    let gw = gateway()
        .sid(&tag)
        .with(|c| c.sid.idle_timeout_ms = 200)
        .start()
        .await;
    let r = gw.call("message/send", text_message("hello")).await;
    let ctx = r["result"]["contextId"].as_str().unwrap().to_owned();
    let session = r["result"]["metadata"]["result"]["session_id"].clone();
    assert!(session.as_str().is_some_and(|s| !s.is_empty()), "{r}");
    assert_eq!(support::processes_tagged(&tag).len(), 1);
    let mut waited = 0;
    while !support::processes_tagged(&tag).is_empty() {
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += 50;
        assert!(waited < 5000, "the idle child was not stopped");
    }
    let again = gw
        .call(
            "message/send",
            json!({"message": {"parts": [{"text": "hello"}]}, "contextId": ctx}),
        )
        .await;
    assert_eq!(again["result"]["status"]["state"], "completed", "{again}");
    // The same sid session, so the child was started with `--resume SESSION`, not afresh.
    assert_eq!(
        again["result"]["metadata"]["result"]["session_id"], session,
        "{again}"
    );
    let mut all = gw.sse_get(&format!("/contexts/{ctx}/events"), None).await;
    let mut got = all.until_final(T).await;
    got.extend(all.until_final(T).await);
    let ids = ids(&got);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(
        got.last().unwrap().data["params"]["taskId"],
        again["result"]["id"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_is_cut_off_while_a_fast_one_keeps_every_event() {
    let gw = gateway()
        .sid("slow-sub")
        .with(|c| {
            // A log of 2 048 events: the slow one is cut off once the events it still needs
            // have left it; the fast one keeps up.
            c.sid.replay_events = 2048;
        })
        .start()
        .await;
    let r = gw.call("message/send", text_message("hello")).await;
    let ctx = r["result"]["contextId"].as_str().unwrap().to_owned();
    let warm = gw
        .sse_get(&format!("/contexts/{ctx}/events"), None)
        .await
        .until_final(T)
        .await;
    let after = warm.last().unwrap().id.clone();
    let mut fast = gw
        .sse_get(&format!("/contexts/{ctx}/events"), Some(&after))
        .await;
    // The slow subscriber: a raw socket with a tiny receive window that it never reads.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut slow = socket.connect(gw.addr).await.unwrap();
    let request =
        format!("GET /contexts/{ctx}/events HTTP/1.1\r\nhost: x\r\nlast-event-id: {after}\r\n\r\n");
    tokio::io::AsyncWriteExt::write_all(&mut slow, request.as_bytes())
        .await
        .unwrap();
    // Deltas of 4 KiB, so the kernel's socket buffers (up to 4 MiB here) hold only a part.
    let n = 5_000;
    let flood = gw.send_turn(&ctx, &format!("flood {n} 4000 4096"));
    let fast_events = fast.until_final(Duration::from_secs(60)).await;
    let deltas = fast_events
        .iter()
        .filter(|e| e.data["params"]["artifact"] == "response")
        .count();
    assert_eq!(deltas, n, "the fast subscriber keeps every event");
    let done = flood.await.unwrap();
    assert_eq!(
        done["result"]["status"]["state"], "completed",
        "the session was not slowed"
    );
    // Now drain the slow socket: the gateway ended its stream early (the chunked body's last
    // chunk; the connection itself stays open for keep-alive).
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while !received.ends_with(b"0\r\n\r\n") {
        let n = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::io::AsyncReadExt::read(&mut slow, &mut buf),
        )
        .await
        .expect("the cut-off stream ends")
        .unwrap();
        assert!(n > 0, "connection closed before the stream's last chunk");
        received.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&received);
    let frames = text.matches("\nid: ").count();
    assert!(
        frames < fast_events.len(),
        "cut off after {frames} of {} events",
        fast_events.len()
    );
    let metrics = gw.get("/metrics").await.text;
    assert!(
        metrics.contains("wiregate_sse_subscribers_cut_total"),
        "{metrics}"
    );
}

#[tokio::test]
async fn bearer_tokens_guard_sid_methods_and_streams() {
    let gw = gateway()
        .sid("tokens")
        .with(|c| c.sid.bearer_tokens = vec!["s3cret-token".into()])
        .start()
        .await;
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": text_message("hi")});
    let denied = gw.rpc(&body).await;
    assert_eq!(denied.status, 401);
    assert_eq!(denied.json()["error"]["code"], -32065);
    let wrong = gw
        .rpc_with(&body, &[("authorization", "Bearer nope")])
        .await;
    assert_eq!(wrong.status, 401);
    let ok = gw
        .rpc_with(&body, &[("authorization", "Bearer s3cret-token")])
        .await;
    assert_eq!(
        ok.json()["result"]["status"]["state"],
        "completed",
        "{}",
        ok.text
    );
    let task_id = ok.json()["result"]["id"].as_str().unwrap().to_owned();
    let anon = gw.get(&format!("/tasks/{task_id}/events")).await;
    assert_eq!(anon.status, 401);
    // The scheme in any case (RFC 9110 §11.1), on the streams as on the calls.
    let authed = gw
        .http
        .get(format!("{}/tasks/{task_id}/events", gw.base()))
        .header("authorization", "bearer s3cret-token")
        .send()
        .await
        .unwrap();
    assert_eq!(authed.status(), 200);
    let lower = gw
        .rpc_with(&body, &[("authorization", "BEARER s3cret-token")])
        .await;
    assert_eq!(lower.status, 200, "{}", lower.text);
    // The proxy's own methods need no sid token.
    let health = gw
        .rpc(&json!({"jsonrpc": "2.0", "id": 2, "method": "_cleveragents/health/check"}))
        .await;
    assert_eq!(health.status, 200);
}

#[test]
fn off_loopback_the_bridge_requires_bearer_tokens() {
    let mut c = wiregate::config::Config::default();
    c.sid.enabled = true;
    c.server.listen = "0.0.0.0:8080".parse().unwrap();
    let err = c.validate().unwrap_err();
    assert!(err.0.iter().any(|i| i.key == "sid.bearer_tokens"), "{err}");
    c.sid.bearer_tokens = vec!["t".into()];
    c.validate().unwrap();
    c.sid.allow_ops.push("user_turn".into());
    let err = c.validate().unwrap_err();
    assert!(
        err.0.iter().any(|i| i.key.starts_with("sid.allow_ops")),
        "{err}"
    );
}

#[tokio::test]
async fn contexts_stopped_for_long_are_forgotten() {
    let tag = format!("forget-{}", uuid::Uuid::new_v4());
    let gw = gateway()
        .sid(&tag)
        .with(|c| c.sid.idle_timeout_ms = 50)
        .start()
        .await;
    let r = gw.call("message/send", text_message("hello")).await;
    let task_id = r["result"]["id"].as_str().unwrap().to_owned();
    let ctx = r["result"]["contextId"].as_str().unwrap().to_owned();
    // Stopped after 50 ms idle, forgotten after 16 × 50 ms.
    let mut waited = 0;
    loop {
        let got = gw.call("tasks/get", json!({"id": task_id})).await;
        if got["error"]["code"] == -32001 {
            break;
        }
        assert_eq!(got["result"]["status"]["state"], "completed");
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += 100;
        assert!(waited < 10_000, "the context was never forgotten");
    }
    assert!(
        waited >= 700,
        "not forgotten before its retention ({waited} ms)"
    );
    // The child was stopped long before; its exit is reaped asynchronously.
    let mut left = support::processes_tagged(&tag);
    for _ in 0..40 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = support::processes_tagged(&tag);
    }
    assert!(left.is_empty(), "still running: {left:?}");
    let again = gw
        .call(
            "message/send",
            json!({"message": {"parts": [{"text": "hi"}]}, "contextId": ctx}),
        )
        .await;
    assert_eq!(again["error"]["code"], -32001, "{again}");
}

#[tokio::test]
async fn subscribers_per_context_are_bounded() {
    let gw = gateway()
        .sid("max-subs")
        .with(|c| c.sid.max_subscribers = 1)
        .start()
        .await;
    let r = gw.call("message/send", text_message("hello")).await;
    let ctx = r["result"]["contextId"].as_str().unwrap().to_owned();
    let first = gw.sse_get(&format!("/contexts/{ctx}/events"), None).await;
    let second = gw.get(&format!("/contexts/{ctx}/events")).await;
    assert_eq!(second.status, 503);
    assert_eq!(second.json()["error"]["code"], -32063);
    drop(first);
    // The slot frees once the first subscriber is gone.
    let mut freed = false;
    for _ in 0..50 {
        if gw
            .get(&format!(
                "/tasks/{}/events",
                r["result"]["id"].as_str().unwrap()
            ))
            .await
            .status
            == 200
        {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(freed);
}

#[tokio::test]
async fn sid_lines_that_are_not_utf8_or_not_protocol_5_are_counted_and_skipped() {
    let gw = gateway().sid("garble").start().await;
    let before = gw.counter("wiregate_sid_bad_lines_total").await;
    // The fake prints a line that is not UTF-8 and a protocol 4 delta, then a plain answer.
    let r = gw.call("message/send", text_message("garble")).await;
    assert_eq!(r["result"]["status"]["state"], "completed", "{r}");
    assert_eq!(
        r["result"]["artifacts"],
        json!([{"name": "response", "parts": [{"kind": "text", "text": "Hello from the mock model."}]}]),
        "the protocol 4 delta is not part of the answer"
    );
    let after = gw.counter("wiregate_sid_bad_lines_total").await;
    assert_eq!(after - before, 2, "both lines counted");
    // The context goes on.
    let ctx = r["result"]["contextId"].clone();
    let again = gw
        .call(
            "message/send",
            json!({"message": {"parts": [{"text": "hello"}]}, "contextId": ctx}),
        )
        .await;
    assert_eq!(again["result"]["status"]["state"], "completed", "{again}");
}

#[tokio::test]
async fn a_busy_context_bounds_its_queue_and_forgets_callers_who_left() {
    let gw = gateway()
        .sid("hard-busy")
        .with(|c| c.sid.max_queued_requests = 2)
        .start()
        .await;
    let mut turn = gw.stream_message(text_message("hang")).await;
    let first = turn.next(T).await.expect("the turn starts");
    let context = first.data["params"]["contextId"]
        .as_str()
        .unwrap_or_else(|| panic!("{first:?}"))
        .to_owned();
    let stats = json!({"jsonrpc": "2.0", "id": 1, "method": "_sid/stats", "params": {"contextId": context}});
    let url = format!("{}/rpc", gw.base());
    // Two callers give up while sid is busy: their places must free up.
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    for _ in 0..2 {
        let r = impatient
            .post(&url)
            .header("content-type", "application/json")
            .body(stats.to_string())
            .send()
            .await;
        assert!(r.is_err(), "sid answers nothing during a turn");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Two more wait (they are not refused: the first two were forgotten)...
    let http = reqwest::Client::new();
    let waiting: Vec<_> = (0..2)
        .map(|_| support::spawn_post(&http, url.clone(), stats.clone()))
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for w in &waiting {
        assert!(!w.is_finished(), "a queued call waits for sid");
    }
    // ...and the next is refused at once, by name.
    let refused = tokio::time::timeout(Duration::from_secs(2), gw.rpc(&stats))
        .await
        .expect("refused at once")
        .json();
    assert_eq!(refused["error"]["code"], -32060, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sid.max_queued_requests"),
        "{refused}"
    );
    for w in waiting {
        w.abort();
    }
}
