//! The A2A task model over the fake sid, through real HTTP: ListTasks (filters, cursor pages,
//! page sizes, totals), task history and `historyLength`, client-named contexts, the multi-turn
//! rules, a held task continued and canceled, camelCase metadata, and the `event: error` frame
//! a streaming client that falls behind the replay log gets.

use crate::support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::{gateway, text_message, TestGateway};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const T: Duration = Duration::from_secs(10);

fn msg(text: &str, context: Option<&str>, task: Option<&str>) -> Value {
    let mut m = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
                                   "role": "ROLE_USER", "parts": [{"text": text}]}});
    if let Some(c) = context {
        m["message"]["contextId"] = json!(c);
    }
    if let Some(t) = task {
        m["message"]["taskId"] = json!(t);
    }
    m
}

async fn ok(gw: &TestGateway, method: &str, params: Value) -> Value {
    let (status, r) = gw.a2a_call(method, params, None).await;
    assert_eq!(status, 200, "{method}: {r}");
    assert!(r.get("error").is_none(), "{method}: {r}");
    r["result"].clone()
}

fn ids(page: &Value) -> Vec<String> {
    page["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn list_tasks_pages_a_client_named_context_newest_first() {
    let gw = gateway().sid("a2a-list").start().await;
    let ctx = "list-ctx-1";
    let mut made = Vec::new();
    for i in 0..5 {
        let r = ok(
            &gw,
            "SendMessage",
            msg(&format!("task {i}"), Some(ctx), None),
        )
        .await;
        assert_eq!(
            r["task"]["contextId"], ctx,
            "the client's contextId is kept"
        );
        made.push(r["task"]["id"].as_str().unwrap().to_owned());
    }
    // Another context's task, which the context filter leaves out.
    ok(&gw, "SendMessage", msg("elsewhere", None, None)).await;

    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        let mut params = json!({"contextId": ctx, "pageSize": 2});
        if !token.is_empty() {
            params["pageToken"] = json!(token);
        }
        let page = ok(&gw, "ListTasks", params).await;
        pages += 1;
        assert_eq!(page["totalSize"], 5);
        assert_eq!(page["pageSize"], page["tasks"].as_array().unwrap().len());
        for t in page["tasks"].as_array().unwrap() {
            assert_eq!(t["contextId"], ctx);
            assert!(t.get("artifacts").is_none(), "left out unless asked");
        }
        seen.extend(ids(&page));
        token = page["nextPageToken"].as_str().unwrap().to_owned();
        if token.is_empty() {
            break;
        }
    }
    assert_eq!(pages, 3);
    made.reverse();
    assert_eq!(seen, made, "every task once, most recently updated first");

    let all = ok(&gw, "ListTasks", json!({})).await;
    assert_eq!(all["totalSize"], 6);
    assert!(all["tasks"].as_array().unwrap().len() <= 50);
    let stamps: Vec<&str> = all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"]["timestamp"].as_str().unwrap())
        .collect();
    let mut sorted = stamps.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(stamps, sorted, "status timestamps descending");

    let done = ok(
        &gw,
        "ListTasks",
        json!({"status": "TASK_STATE_COMPLETED", "includeArtifacts": true, "historyLength": 1}),
    )
    .await;
    assert_eq!(done["totalSize"], 6);
    let first = &done["tasks"][0];
    assert_eq!(
        first["artifacts"][0]["parts"][0]["text"],
        "Hello from the mock model."
    );
    assert_eq!(first["history"].as_array().unwrap().len(), 1);
    let none = ok(&gw, "ListTasks", json!({"status": "TASK_STATE_WORKING"})).await;
    assert_eq!(none["totalSize"], 0);
    assert_eq!(none["tasks"], json!([]));
    assert_eq!(none["nextPageToken"], "");
    let later = ok(
        &gw,
        "ListTasks",
        json!({"statusTimestampAfter": "2999-01-01T00:00:00Z"}),
    )
    .await;
    assert_eq!(later["totalSize"], 0);
    let since = ok(
        &gw,
        "ListTasks",
        json!({"statusTimestampAfter": "2020-01-01T00:00:00+02:00"}),
    )
    .await;
    assert_eq!(since["totalSize"], 6);
}

#[tokio::test]
async fn history_holds_the_conversation_and_history_length_trims_it() {
    let gw = gateway().sid("a2a-history").start().await;
    // A held turn (the fake sid's `hold` script) takes any number of messages.
    let first = msg("hold this task", None, None);
    let first_id = first["message"]["messageId"].as_str().unwrap().to_owned();
    let r = ok(&gw, "SendMessage", first).await;
    let task = r["task"]["id"].as_str().unwrap().to_owned();
    let ctx = r["task"]["contextId"].as_str().unwrap().to_owned();
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    for i in 0..2 {
        // Without a contextId the task's own is inferred; with its own it is accepted.
        let context = (i == 1).then_some(ctx.as_str());
        let r = ok(
            &gw,
            "SendMessage",
            msg(&format!("more {i}"), context, Some(&task)),
        )
        .await;
        assert_eq!(r["task"]["id"], task.as_str());
        assert_eq!(r["task"]["contextId"], ctx.as_str());
    }
    let got = ok(&gw, "GetTask", json!({"id": task})).await;
    let history = got["history"].as_array().unwrap();
    let roles: Vec<&str> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "ROLE_USER",
            "ROLE_AGENT",
            "ROLE_USER",
            "ROLE_AGENT",
            "ROLE_USER",
            "ROLE_AGENT"
        ]
    );
    assert_eq!(
        history[0]["messageId"],
        first_id.as_str(),
        "the client's id is kept"
    );
    assert_eq!(history[0]["parts"][0]["text"], "hold this task");
    assert_eq!(history[4]["parts"][0]["text"], "more 1");
    let unique: HashSet<&str> = history
        .iter()
        .map(|m| m["messageId"].as_str().unwrap())
        .collect();
    assert_eq!(unique.len(), history.len());
    for m in history {
        assert_eq!(m["taskId"], task.as_str());
        assert_eq!(m["contextId"], ctx.as_str());
    }

    let two = ok(&gw, "GetTask", json!({"id": task, "historyLength": 2})).await;
    assert_eq!(two["history"].as_array().unwrap()[..], history[4..]);
    let zero = ok(&gw, "GetTask", json!({"id": task, "historyLength": 0})).await;
    assert_eq!(zero["history"], json!([]));
    let more = ok(&gw, "GetTask", json!({"id": task, "historyLength": 99})).await;
    assert_eq!(more["history"].as_array().unwrap().len(), 6);
    let mut sent = msg("done", None, Some(&task));
    sent["configuration"] = json!({"historyLength": 1});
    let fin = ok(&gw, "SendMessage", sent).await;
    assert_eq!(fin["task"]["status"]["state"], "TASK_STATE_COMPLETED");
    let last = &fin["task"]["history"];
    assert_eq!(last.as_array().unwrap().len(), 1);
    assert_eq!(last[0]["role"], "ROLE_AGENT", "the agent's answer ends it");

    // 0.3 spells the same history its own way.
    let (_, old) = gw
        .a2a_call("tasks/get", json!({"id": task}), Some("0.3"))
        .await;
    assert_eq!(old["result"]["history"][0]["role"], "user");
    assert_eq!(old["result"]["history"][0]["kind"], "message");
}

#[tokio::test]
async fn a_held_task_is_canceled_and_then_takes_no_more_messages() {
    let gw = gateway().sid("a2a-hold-cancel").start().await;
    let r = ok(&gw, "SendMessage", msg("Task for cancel test", None, None)).await;
    let task = r["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(r["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let c = ok(&gw, "CancelTask", json!({"id": task})).await;
    assert_eq!(c["id"], task.as_str());
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED", "{c}");
    let (_, again) = gw.a2a_call("CancelTask", json!({"id": task}), None).await;
    assert_eq!(again["error"]["code"], -32002);
    let (_, more) = gw
        .a2a_call("SendMessage", msg("more", None, Some(&task)), None)
        .await;
    assert_eq!(more["error"]["code"], -32004, "a finished task: {more}");
    assert_eq!(more["error"]["data"][0]["reason"], "UNSUPPORTED_OPERATION");
}

#[tokio::test]
async fn metadata_keys_are_camel_case() {
    let gw = gateway().sid("a2a-camel").start().await;
    let r = ok(&gw, "SendMessage", msg("hi", None, None)).await;
    fn keys(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    out.push(k.clone());
                    keys(v, out);
                }
            }
            Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    keys(&r, &mut all);
    assert!(all.iter().all(|k| !k.contains('_')), "{all:?}");
    assert!(
        r["task"]["metadata"]["result"]["sessionId"].is_string(),
        "{r}"
    );
}

/// The text a spec stream's artifact updates carry, in order.
fn chunks(events: &[support::SseEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| {
            e.data["result"]["artifactUpdate"]["artifact"]["parts"][0]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

#[tokio::test]
async fn a_dropped_spec_stream_resumes_after_its_last_event_without_loss_or_repeat() {
    let gw = gateway().sid("a2a-resume").start().await;
    let t = std::time::Duration::from_secs(10);
    let body = json!({"jsonrpc": "2.0", "id": "s1", "method": "SendStreamingMessage",
                      "params": msg("slow please", None, None)});
    let mut first = gw.a2a_stream(&body, None).await;
    let start = first.next(t).await.unwrap();
    let task = start.data["result"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut before = Vec::new();
    while chunks(&before).len() < 3 {
        before.push(first.next(t).await.unwrap());
    }
    let last_id = before.last().unwrap().id.clone();
    assert!(!last_id.is_empty(), "spec stream events carry ids");
    drop(first);

    let resume = json!({"jsonrpc": "2.0", "id": "s2", "method": "SubscribeToTask",
                        "params": {"id": task}});
    let resp = reqwest::Client::new()
        .post(format!("{}/rpc", gw.base()))
        .header("content-type", "application/json")
        .header("last-event-id", last_id.as_str())
        .body(resume.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut rest = support::SseReader::new(resp);
    let snapshot = rest.next(t).await.unwrap();
    assert_eq!(snapshot.data["result"]["task"]["id"], task.as_str());
    let after = rest.collect(t).await;
    let states: Vec<&str> = after
        .iter()
        .filter_map(|e| e.data["result"]["statusUpdate"]["status"]["state"].as_str())
        .collect();
    assert_eq!(states.last(), Some(&"TASK_STATE_COMPLETED"));
    let mut all = chunks(&before);
    all.extend(chunks(&after));
    let expected: Vec<String> = (0..40).map(|i| format!("chunk {i} ")).collect();
    assert_eq!(all, expected, "every chunk once, in order");

    // Once the task has ended, a resume still gets what followed the named event.
    let resp = reqwest::Client::new()
        .post(format!("{}/rpc", gw.base()))
        .header("content-type", "application/json")
        .header("last-event-id", last_id.as_str())
        .body(resume.to_string())
        .send()
        .await
        .unwrap();
    let mut again = support::SseReader::new(resp);
    let replayed = again.collect(t).await;
    assert_eq!(chunks(&replayed), expected[3..].to_vec());
}

/// The body of one HTTP/1.1 request written by hand.
fn post_request(body: &Value) -> String {
    let body = body.to_string();
    format!(
        "POST /rpc HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_a2a_client_that_falls_behind_the_replay_log_gets_an_error_frame() {
    // A log of 256 events: a client that reads nothing while more pass loses its place.
    let gw = gateway()
        .sid("a2a-behind")
        .with(|c| c.sid.replay_events = 256)
        .start()
        .await;
    let first = gw.call("message/send", text_message("hello")).await;
    let ctx = first["result"]["contextId"].clone();
    // A spec stream on a raw socket with a tiny receive window, never read while sid floods:
    // 4 000 deltas of 4 KiB, far more than the kernel's socket buffers and the log hold.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut slow = socket.connect(gw.addr).await.unwrap();
    let id = json!("behind-1");
    let request = json!({"jsonrpc": "2.0", "id": id, "method": "SendStreamingMessage",
        "params": {"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                               "contextId": ctx, "parts": [{"text": "flood 4000 2000 4096"}]}}});
    slow.write_all(post_request(&request).as_bytes())
        .await
        .unwrap();
    // Read only the head and the first event (the task), so the flood has begun: a turn asked
    // for before that would run first.
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    while !String::from_utf8_lossy(&received).contains("\ndata: ") {
        let n = tokio::time::timeout(T, slow.read(&mut buf))
            .await
            .expect("the stream's first event")
            .unwrap();
        assert!(n > 0, "connection closed before the first event");
        received.extend_from_slice(&buf[..n]);
    }
    // The flood is over when the context takes the next turn.
    let started = Instant::now();
    loop {
        let next = gw
            .call(
                "message/send",
                json!({"message": {"parts": [{"text": "hello"}]}, "contextId": ctx}),
            )
            .await;
        if next["result"]["status"]["state"] == "completed" {
            break;
        }
        assert_eq!(next["error"]["code"], -32060, "busy while flooding: {next}");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the flood ended"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Now read what the slow client was sent: the stream ends with the error frame.
    while !received.ends_with(b"0\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(30), slow.read(&mut buf))
            .await
            .expect("the cut stream ends")
            .unwrap();
        assert!(n > 0, "connection closed before the stream's last chunk");
        received.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"), "{}", &text[..200]);
    let delivered = text.matches("\"artifactUpdate\"").count();
    assert!(delivered < 4000, "cut off, after {delivered} deltas");
    let at = text.rfind("event: error\n").expect("an event: error frame");
    let frame = &text[at..];
    let data = frame
        .lines()
        .find_map(|l| l.strip_prefix("data: "))
        .expect("a data: line");
    let err: Value = serde_json::from_str(data).unwrap();
    assert_eq!(err["jsonrpc"], "2.0");
    assert_eq!(err["id"], id, "a response to the stream's request");
    assert_eq!(err["error"]["code"], -32603, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("fell behind")),
        "{err}"
    );
    // Nothing after it but the end of the body.
    let rest = &frame[frame.find("\n\n").unwrap() + 2..];
    assert_eq!(rest.trim(), "0", "{rest:?}");
}
