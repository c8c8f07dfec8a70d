//! The published A2A dialect (1.0 and 0.3) over the fake sid: the card, every shape and every
//! A2A error code, over real HTTP and real SSE parsing.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::{gateway, SseEvent, TestGateway};

const T: Duration = Duration::from_secs(10);

async fn a2a_gateway(tag: &str) -> TestGateway {
    gateway().sid(tag).start().await
}

fn msg_1_0(text: &str) -> Value {
    json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                       "parts": [{"text": text}]}})
}

fn msg_0_3(text: &str) -> Value {
    json!({"message": {"kind": "message", "messageId": uuid::Uuid::new_v4().to_string(),
                       "role": "user", "parts": [{"kind": "text", "text": text}]}})
}

/// A 1.0 message to a task (optionally naming a context).
fn to_task(task: impl std::fmt::Display, context: Option<&str>) -> Value {
    let mut m = msg_1_0("more");
    m["message"]["taskId"] = json!(task.to_string().trim_matches('"'));
    if let Some(c) = context {
        m["message"]["contextId"] = json!(c);
    }
    m
}

fn rpc(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Every `data:` of a spec stream is a JSON-RPC success response to `id`; their results.
fn responses(events: &[SseEvent], id: &Value) -> Vec<Value> {
    events
        .iter()
        .map(|e| {
            assert_eq!(e.event, "message", "{e:?}");
            assert_eq!(e.data["jsonrpc"], "2.0");
            assert_eq!(&e.data["id"], id, "{e:?}");
            assert!(e.data.get("error").is_none(), "{e:?}");
            e.data["result"].clone()
        })
        .collect()
}

#[tokio::test]
async fn the_card_is_served_at_both_paths_with_both_interfaces() {
    let gw = a2a_gateway("a2a-card").await;
    let rpc_url = format!("{}/", gw.base());
    for path in ["/.well-known/agent-card.json", "/.well-known/agent.json"] {
        let a = gw.get(path).await;
        assert_eq!(a.status, 200, "{path}");
        assert_eq!(
            a.header("content-type").as_deref(),
            Some("application/json")
        );
        let etag = a.header("etag").expect("an ETag");
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");
        assert!(a.header("last-modified").is_some());
        let card = a.json();
        assert_eq!(card["name"], "sid via wiregate");
        assert_eq!(card["capabilities"]["streaming"], true);
        assert_eq!(
            card["defaultInputModes"],
            json!(["text/plain", "application/json"]),
            "a data part reaches sid as JSON text"
        );
        assert_eq!(card["defaultOutputModes"], json!(["text/plain"]));
        assert_eq!(card["skills"][0]["id"], "sid-coding-agent");
        assert_eq!(
            card["supportedInterfaces"],
            json!([
                {"url": rpc_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
                {"url": rpc_url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
                {"url": format!("{}/a2a/rest", gw.base()), "protocolBinding": "HTTP+JSON",
                 "protocolVersion": "1.0"},
            ])
        );
        // The 1.0 card is a pure 1.0 card; the older path is what a 0.3-only client reads.
        if path.ends_with("agent.json") {
            assert_eq!(card["url"], rpc_url.as_str());
            assert_eq!(card["protocolVersion"], "0.3");
            assert_eq!(card["preferredTransport"], "JSONRPC");
        } else {
            for old in ["url", "protocolVersion", "preferredTransport"] {
                assert!(card.get(old).is_none(), "{old} in the 1.0 card: {card}");
            }
        }
    }
    let asked_0_3: Value = reqwest::Client::new()
        .get(format!("{}/.well-known/agent-card.json", gw.base()))
        .header("a2a-version", "0.3")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        asked_0_3["url"],
        rpc_url.as_str(),
        "A2A-Version 0.3 asks for the 0.3 fields"
    );

    let public = gateway()
        .sid("a2a-card-public")
        .with(|c| {
            c.a2a.public_url = "https://agents.example/sid".into();
            c.a2a.name = "Team sid".into();
            c.sid.bearer_tokens = vec!["s3cret".into()];
        })
        .start()
        .await;
    let card = public.get("/.well-known/agent-card.json").await.json();
    assert_eq!(card["name"], "Team sid");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        "https://agents.example/sid/"
    );
    assert!(card["securitySchemes"]["bearer"].is_object());
    assert!(!card.to_string().contains("s3cret"), "no token in the card");

    let off = gateway()
        .sid("a2a-card-off")
        .with(|c| c.a2a.enabled = false)
        .start()
        .await;
    assert_eq!(off.get("/.well-known/agent-card.json").await.status, 404);
    let (_, r) = off.a2a_call("GetTask", json!({"id": "x"}), None).await;
    assert_eq!(
        r["error"]["code"], -32601,
        "no spec dialect when a2a is off"
    );
}

#[tokio::test]
async fn a_data_part_reaches_sid_as_json_text() {
    let gw = a2a_gateway("a2a-data-part").await;
    let mut m = msg_1_0("look at this");
    let parts = m["message"]["parts"].as_array_mut().unwrap();
    parts.push(json!({"data": {"test": "data", "version": [0, 3]}}));
    let (status, r) = gw.a2a_call("SendMessage", m, None).await;
    assert_eq!(status, 200);
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(
        task["history"][0]["parts"][0]["text"],
        "look at this\n{\"test\":\"data\",\"version\":[0,3]}",
        "what sid was told: {r}"
    );
    // A binary part is still refused: sid cannot read it, and it is not dropped silently.
    let mut m = msg_1_0("and this");
    let parts = m["message"]["parts"].as_array_mut().unwrap();
    parts.push(json!({"raw": "AAE=", "mediaType": "application/octet-stream"}));
    let (status, r) = gw.a2a_call("SendMessage", m, None).await;
    assert_eq!((status, &r["error"]["code"]), (200, &json!(-32005)), "{r}");
}

#[tokio::test]
async fn send_and_get_in_1_0_shapes() {
    let gw = a2a_gateway("a2a-send-1").await;
    let (status, r) = gw.a2a_call("SendMessage", msg_1_0("hi there"), None).await;
    assert_eq!(status, 200);
    assert_eq!(r["id"], "a-1");
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    assert_eq!(
        task["artifacts"],
        json!([{"artifactId": "response", "name": "response",
                "parts": [{"text": "Hello from the mock model."}]}])
    );
    assert!(task.get("kind").is_none(), "1.0 has no kind discriminators");
    let id = task["id"].as_str().unwrap();

    let (_, got) = gw.a2a_call("GetTask", json!({"id": id}), Some("1.0")).await;
    assert_eq!(got["result"], *task);

    // The same task read in the seed dialect and in 0.3: one model, three spellings.
    let seed = gw.call("tasks/get", json!({"id": id})).await;
    assert_eq!(seed["result"]["status"]["state"], "completed");
    let (_, old) = gw
        .a2a_call("tasks/get", json!({"id": id}), Some("0.3"))
        .await;
    assert_eq!(old["result"]["kind"], "task");
    assert_eq!(old["result"]["status"]["state"], "completed");
}

#[tokio::test]
async fn send_and_get_in_0_3_shapes_and_the_seed_dialect_is_unchanged() {
    let gw = a2a_gateway("a2a-send-03").await;
    let (status, r) = gw
        .a2a_call("message/send", msg_0_3("hi"), Some("0.3"))
        .await;
    assert_eq!(status, 200);
    let task = &r["result"];
    assert_eq!(task["kind"], "task", "{r}");
    assert_eq!(task["status"]["state"], "completed");
    assert_eq!(
        task["artifacts"][0]["parts"][0],
        json!({"kind": "text", "text": "Hello from the mock model."})
    );
    assert_eq!(task["artifacts"][0]["artifactId"], "response");

    // Without the header the same method keeps the seed dialect's shape.
    let seed = gw.call("message/send", msg_0_3("hi")).await;
    assert!(seed["result"].get("kind").is_none(), "{seed}");
    assert_eq!(
        seed["result"]["artifacts"],
        json!([{"name": "response", "parts": [{"kind": "text", "text": "Hello from the mock model."}]}])
    );
}

#[tokio::test]
async fn a_1_0_stream_answers_every_event_as_a_response_to_the_request() {
    let gw = a2a_gateway("a2a-stream-1").await;
    let id = json!("stream-1");
    let mut sse = gw
        .a2a_stream(
            &rpc(id.clone(), "SendStreamingMessage", msg_1_0("slow")),
            Some("1.0"),
        )
        .await;
    let events = sse.collect(T).await;
    let results = responses(&events, &id);
    let first = &results[0]["task"];
    assert_eq!(first["status"]["state"], "TASK_STATE_SUBMITTED");
    let task_id = first["id"].as_str().unwrap();
    let last = &results.last().unwrap()["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(last["taskId"], task_id);
    assert!(last.get("final").is_none(), "1.0 has no final flag");

    let chunks: Vec<&Value> = results
        .iter()
        .filter_map(|r| r.get("artifactUpdate"))
        .collect();
    assert!(chunks.len() >= 2, "{results:?}");
    assert_eq!(chunks[0]["append"], false, "the first chunk creates it");
    assert!(chunks[1..].iter().all(|c| c["append"] == true));
    let text: String = chunks
        .iter()
        .map(|c| c["artifact"]["parts"][0]["text"].as_str().unwrap())
        .collect();
    let (_, got) = gw.a2a_call("GetTask", json!({"id": task_id}), None).await;
    assert_eq!(
        got["result"]["artifacts"][0]["parts"][0]["text"],
        text.as_str()
    );
    for r in &results[1..] {
        let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
        assert!(
            keys == ["statusUpdate"] || keys == ["artifactUpdate"],
            "{r}"
        );
    }
}

#[tokio::test]
async fn a_0_3_stream_has_kinds_and_a_final_flag() {
    let gw = a2a_gateway("a2a-stream-03").await;
    let id = json!(7);
    let mut sse = gw
        .a2a_stream(
            &rpc(id.clone(), "message/stream", msg_0_3("hello")),
            Some("0.3"),
        )
        .await;
    let results = responses(&sse.collect(T).await, &id);
    assert_eq!(results[0]["kind"], "task");
    let kinds: Vec<&str> = results[1..]
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert!(kinds
        .iter()
        .all(|k| *k == "status-update" || *k == "artifact-update"));
    assert!(kinds.contains(&"artifact-update"));
    let last = results.last().unwrap();
    assert_eq!(last["status"]["state"], "completed");
    assert_eq!(last["final"], true);
    assert!(results[1..results.len() - 1]
        .iter()
        .filter(|r| r["kind"] == "status-update")
        .all(|r| r["final"] == false));
}

#[tokio::test]
async fn input_required_answers_a_prompt_in_both_versions() {
    let gw = a2a_gateway("a2a-prompt").await;
    // 1.0 streaming: the stream ends when the task waits for input...
    let id = json!("p");
    let mut sse = gw
        .a2a_stream(
            &rpc(id.clone(), "SendStreamingMessage", msg_1_0("use a tool")),
            None,
        )
        .await;
    let results = responses(&sse.collect(T).await, &id);
    let last = &results.last().unwrap()["statusUpdate"];
    assert_eq!(last["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    assert!(last["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap()
        .contains("Allow this call?"));
    assert_eq!(last["status"]["message"]["role"], "ROLE_AGENT");
    let task_id = last["taskId"].as_str().unwrap().to_owned();
    let ctx = last["contextId"].as_str().unwrap().to_owned();

    // ...and the answer, with taskId in the message, continues it to the end.
    let mut answer = msg_1_0("yes");
    answer["message"]["taskId"] = json!(task_id);
    answer["message"]["contextId"] = json!(ctx);
    let mut sse = gw
        .a2a_stream(&rpc(id.clone(), "SendStreamingMessage", answer), None)
        .await;
    let results = responses(&sse.collect(T).await, &id);
    assert_eq!(results[0]["task"]["id"], task_id.as_str());
    assert_eq!(
        results.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert!(results
        .iter()
        .any(|r| r["artifactUpdate"]["artifact"]["name"] == "tool:bash"));

    // 0.3 blocking: the send returns at input-required; the answer finishes the task.
    let (_, r) = gw
        .a2a_call("message/send", msg_0_3("use a tool"), Some("0.3"))
        .await;
    assert_eq!(r["result"]["status"]["state"], "input-required", "{r}");
    assert_eq!(r["result"]["status"]["message"]["kind"], "message");
    let mut answer = msg_0_3("yes");
    answer["message"]["taskId"] = r["result"]["id"].clone();
    let (_, done) = gw.a2a_call("message/send", answer, Some("0.3")).await;
    assert_eq!(done["result"]["status"]["state"], "completed", "{done}");
    assert_eq!(done["result"]["id"], r["result"]["id"]);
}

#[tokio::test]
async fn subscribe_follows_a_waiting_task_and_refuses_a_finished_one() {
    let gw = a2a_gateway("a2a-subscribe").await;
    let (_, r) = gw
        .a2a_call("SendMessage", msg_1_0("use a tool"), None)
        .await;
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let task_id = task["id"].as_str().unwrap().to_owned();

    let id = json!(99);
    let mut sub = gw
        .a2a_stream(
            &rpc(id.clone(), "SubscribeToTask", json!({"id": task_id})),
            None,
        )
        .await;
    let first = sub.next(T).await.unwrap();
    assert_eq!(first.data["id"], 99);
    assert_eq!(
        first.data["result"]["task"]["status"]["state"],
        "TASK_STATE_INPUT_REQUIRED"
    );
    // Answered without waiting (returnImmediately), the subscriber sees the rest.
    let mut answer = msg_1_0("yes");
    answer["message"]["taskId"] = json!(task_id);
    answer["configuration"] = json!({"returnImmediately": true});
    let (_, a) = gw.a2a_call("SendMessage", answer, None).await;
    assert!(a["result"]["task"].is_object(), "{a}");
    let rest = responses(&sub.collect(T).await, &id);
    assert_eq!(
        rest.last().unwrap()["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    let (status, r) = gw
        .a2a_call("SubscribeToTask", json!({"id": task_id}), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(r["error"]["code"], -32004, "{r}");
    let (_, r) = gw
        .a2a_call("tasks/resubscribe", json!({"id": "nope"}), Some("0.3"))
        .await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
}

#[tokio::test]
async fn every_a2a_error_has_its_code_and_http_200() {
    let gw = a2a_gateway("a2a-errors").await;
    let (_, done) = gw.a2a_call("SendMessage", msg_1_0("hi"), None).await;
    let finished = done["result"]["task"]["id"].clone();
    let file_1_0 = json!({"message": {"role": "ROLE_USER", "parts": [{"url": "http://x/f.png"}]}});
    let file_0_3 = json!({"message": {"role": "user", "parts": [{"kind": "file", "file": {"uri": "http://x"}}]}});
    let cases: Vec<(&str, Value, Option<&str>, i64)> = vec![
        ("GetTask", json!({"id": "nope"}), None, -32001),
        ("tasks/get", json!({"id": "nope"}), Some("0.3"), -32001),
        ("CancelTask", json!({"id": finished}), None, -32002),
        ("tasks/cancel", json!({"id": finished}), Some("0.3"), -32002),
        (
            "CreateTaskPushNotificationConfig",
            json!({"taskId": finished}),
            None,
            -32602,
        ),
        (
            "tasks/pushNotificationConfig/set",
            json!({"taskId": finished, "pushNotificationConfig": {"url": "http://10.0.0.1/"}}),
            Some("0.3"),
            -32602,
        ),
        ("SendMessage", to_task(&finished, None), None, -32004),
        ("ListTasks", json!({"pageSize": 0}), None, -32602),
        ("ListTasks", json!({"pageSize": 101}), None, -32602),
        (
            "ListTasks",
            json!({"pageToken": "not-a-token"}),
            None,
            -32602,
        ),
        (
            "ListTasks",
            json!({"status": "TASK_STATE_BORED"}),
            None,
            -32602,
        ),
        ("ListTasks", json!({"historyLength": -1}), None, -32602),
        (
            "ListTasks",
            json!({"statusTimestampAfter": "yesterday"}),
            None,
            -32602,
        ),
        (
            "GetTask",
            json!({"id": finished, "historyLength": -2}),
            None,
            -32602,
        ),
        (
            "SendMessage",
            to_task(&finished, Some("another-context")),
            None,
            -32602,
        ),
        ("SendMessage", to_task("nope", None), None, -32001),
        ("SendMessage", file_1_0, None, -32005),
        ("message/send", file_0_3, Some("0.3"), -32005),
        ("GetExtendedAgentCard", json!({}), None, -32007),
        ("GetTask", json!({"id": "nope"}), Some("2.0"), -32009),
        ("message/send", msg_0_3("hi"), Some("0.2"), -32009),
        ("GetTask", json!({"id": 5}), None, -32602),
        (
            "SendMessage",
            json!({"message": {"contextId": "not a token!", "parts": [{"text": "hi"}]}}),
            None,
            -32602,
        ),
        ("GetTask", json!({"id": "nope"}), Some("0.3"), -32601),
    ];
    for (method, params, version, code) in cases {
        let (status, r) = gw.a2a_call(method, params, version).await;
        assert_eq!(status, 200, "{method} {version:?}: {r}");
        assert_eq!(r["error"]["code"], code, "{method} {version:?}: {r}");
        assert_eq!(r["id"], "a-1");
        assert!(r["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
        // A2A 1.0: `data` is an array holding a google.rpc.ErrorInfo; 0.3 keeps its object.
        let data = &r["error"]["data"];
        if version == Some("0.3") && code != -32601 {
            assert!(data["kind"].is_string(), "{method}: {r}");
        } else {
            let info = &data[0];
            assert_eq!(
                info["@type"], "type.googleapis.com/google.rpc.ErrorInfo",
                "{method} {version:?}: {r}"
            );
            let domain = if code == -32602 || code == -32601 {
                "wiregate"
            } else {
                "a2a-protocol.org"
            };
            assert_eq!(info["domain"], domain, "{method} {version:?}: {r}");
            assert!(info["reason"]
                .as_str()
                .is_some_and(|r| r.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')));
            assert!(info["metadata"]
                .as_object()
                .unwrap()
                .values()
                .all(Value::is_string));
        }
    }
    // The reasons A2A names.
    let (_, r) = gw.a2a_call("GetTask", json!({"id": "nope"}), None).await;
    assert_eq!(r["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
    assert_eq!(r["error"]["data"][0]["metadata"]["taskId"], "nope");
    let (_, r) = gw
        .a2a_call("GetTask", json!({"id": "nope"}), Some("9.1"))
        .await;
    assert_eq!(r["error"]["data"][0]["reason"], "VERSION_NOT_SUPPORTED");
    // The seed dialect's errors are unchanged.
    let (_, r) = gw.a2a_call("tasks/get", json!({"id": "nope"}), None).await;
    assert_eq!(r["error"]["data"], json!({"kind": "task_not_found"}));
    // A stream that cannot start is one JSON-RPC error, not an event stream.
    let a = gw
        .rpc(&rpc(
            json!(3),
            "SendStreamingMessage",
            json!({"message": {"parts": []}}),
        ))
        .await;
    assert_eq!(
        a.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(a.json()["error"]["code"], -32602);
}

#[tokio::test]
async fn a_stream_cut_short_ends_with_an_error_response() {
    let mut gw = a2a_gateway("a2a-cut").await;
    let id = json!("h");
    let mut sse = gw
        .a2a_stream(
            &rpc(id.clone(), "SendStreamingMessage", msg_1_0("hang")),
            None,
        )
        .await;
    assert!(sse.next(T).await.unwrap().data["result"]["task"].is_object());
    let running = gw.running.take().unwrap();
    let stop = tokio::spawn(running.shutdown(Duration::from_secs(5)));
    let rest = sse.collect(T).await;
    let last = rest.last().expect("an error event before the end");
    assert_eq!(last.event, "error");
    assert_eq!(last.data["id"], "h");
    assert_eq!(last.data["error"]["code"], -32064, "{:?}", last.data);
    stop.await.unwrap();
}

#[tokio::test]
async fn spec_calls_need_the_bearer_token_too() {
    let gw = gateway()
        .sid("a2a-auth")
        .with(|c| c.sid.bearer_tokens = vec!["t0k".into()])
        .start()
        .await;
    let (status, r) = gw.a2a_call("GetTask", json!({"id": "x"}), None).await;
    assert_eq!(status, 401);
    assert_eq!(r["error"]["code"], -32065);
    let body = rpc(json!(1), "GetTask", json!({"id": "x"}));
    let a = gw.rpc_with(&body, &[("authorization", "Bearer t0k")]).await;
    assert_eq!(
        a.json()["error"]["code"],
        -32001,
        "authorized, then not found"
    );
}

#[tokio::test]
async fn ids_keep_their_digits_on_a2a_streams() {
    let gw = gateway().sid("hard-ids").start().await;
    let id = "123456789012345678901234567890";
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"SendStreamingMessage","params":{{"message":{{"messageId":"m1","role":"ROLE_USER","parts":[{{"text":"hi"}}]}}}}}}"#
    );
    let resp = reqwest::Client::new()
        .post(format!("{}/rpc", gw.base()))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = tokio::time::timeout(T, resp.text()).await.unwrap().unwrap();
    let data: Vec<&str> = text.lines().filter(|l| l.starts_with("data:")).collect();
    assert!(data.len() >= 2, "{text}");
    for d in data {
        assert!(d.contains(&format!(r#""id":{id}"#)), "{d}");
    }
}
