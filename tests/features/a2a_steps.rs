//! Steps for `features/a2a_clients.feature`: spec calls and streams over real HTTP to the
//! fake sid.

use std::time::Duration;

use cucumber::{then, when};
use serde_json::{json, Value};

use crate::support::text_message;
use crate::World;

const T: Duration = Duration::from_secs(10);

fn message(version: &str, text: &str) -> Value {
    match version {
        "0.3" => json!({"message": {"kind": "message", "messageId": "m", "role": "user",
                                    "parts": [{"kind": "text", "text": text}]}}),
        _ => json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]}}),
    }
}

/// The state a spec result reports, whichever version and kind it is.
fn state_of(result: &Value) -> &Value {
    for key in ["task", "statusUpdate"] {
        if let Some(inner) = result.get(key) {
            return &inner["status"]["state"];
        }
    }
    &result["status"]["state"]
}

fn result(w: &World) -> &Value {
    &w.task.as_ref().expect("a call was made")["result"]
}

#[when("a client fetches the agent card")]
async fn fetch_card(w: &mut World) {
    let gw = w.gateway.as_ref().unwrap();
    let a = gw.get("/.well-known/agent-card.json").await;
    assert_eq!(a.status, 200);
    w.dict = Some(a.json());
}

#[then(
    expr = "the card lists a JSON-RPC interface for protocol {string} and one for protocol {string}"
)]
fn card_interfaces(w: &mut World, first: String, second: String) {
    let card = w.dict.as_ref().unwrap();
    // A2A's JSON-RPC binding, at the agent's base URL (`a2a.jsonrpc_path`).
    let url = format!("{}/", w.gateway.as_ref().unwrap().base());
    let versions: Vec<&str> = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        // The card names the HTTP+JSON binding too; this step is about the JSON-RPC ones.
        .filter(|i| i["protocolBinding"] == "JSONRPC")
        .inspect(|i| assert_eq!(i["url"], url.as_str()))
        .map(|i| i["protocolVersion"].as_str().unwrap())
        .collect();
    assert_eq!(versions, [first.as_str(), second.as_str()]);
}

#[then(expr = "the card says the agent streams and reads and writes {string}")]
fn card_modes(w: &mut World, mode: String) {
    let card = w.dict.as_ref().unwrap();
    assert_eq!(card["capabilities"]["streaming"], true);
    // It reads data parts too (as JSON text); the mode named is the first it reads.
    assert_eq!(card["defaultInputModes"][0], json!(mode));
    assert_eq!(card["defaultOutputModes"], json!([mode]));
}

#[when(expr = "an A2A {string} client streams {string} with {word}")]
async fn spec_stream(w: &mut World, version: String, text: String, method: String) {
    let body = json!({"jsonrpc": "2.0", "id": "feature-1", "method": method,
                      "params": message(&version, &text)});
    let gw = w.gateway.as_ref().unwrap();
    let mut sse = gw.a2a_stream(&body, Some(&version)).await;
    w.sse_events = sse.collect(T).await;
}

#[then("every event is a JSON-RPC response to the request's id")]
fn responses(w: &mut World) {
    assert!(!w.sse_events.is_empty());
    for e in &w.sse_events {
        assert_eq!(e.data["jsonrpc"], "2.0");
        assert_eq!(e.data["id"], "feature-1", "{e:?}");
        assert!(e.data["result"].is_object(), "{e:?}");
    }
}

#[then(expr = "the first event is the task in state {string}")]
fn first_is_task(w: &mut World, state: String) {
    let first = &w.sse_events[0].data["result"];
    assert!(
        first.get("task").is_some() || first["kind"] == "task",
        "{first}"
    );
    assert_eq!(state_of(first), state.as_str());
}

#[then(expr = "the last event puts the task in state {string}")]
fn last_state(w: &mut World, state: String) {
    let last = &w.sse_events.last().unwrap().data["result"];
    assert_eq!(state_of(last), state.as_str(), "{last}");
}

#[then(expr = "the streamed chunks add up to {string}")]
fn chunks(w: &mut World, text: String) {
    let got: String = w
        .sse_events
        .iter()
        .map(|e| &e.data["result"])
        .filter_map(|r| {
            r.get("artifactUpdate")
                .or((r["kind"] == "artifact-update").then_some(r))
        })
        .filter_map(|u| u["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(got, text);
}

#[when(expr = "an A2A {string} client sends {string} with {word}")]
async fn spec_send(w: &mut World, version: String, text: String, method: String) {
    let gw = w.gateway.as_ref().unwrap();
    let (_, r) = gw
        .a2a_call(&method, message(&version, &text), Some(&version))
        .await;
    w.task = Some(r);
}

#[then(expr = "the task is in state {string} with the agent's question")]
fn waiting(w: &mut World, state: String) {
    let r = result(w);
    assert_eq!(state_of(r), state.as_str(), "{r}");
    let question = r["task"]["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(question.contains("Allow this call?"), "{question}");
}

#[when(expr = "the client answers {string} with SendMessage naming that task")]
async fn answer(w: &mut World, text: String) {
    let task_id = result(w)["task"]["id"].clone();
    let mut params = message("1.0", &text);
    params["message"]["taskId"] = task_id;
    let gw = w.gateway.as_ref().unwrap();
    let (_, r) = gw.a2a_call("SendMessage", params, Some("1.0")).await;
    w.task = Some(r);
}

#[then(expr = "the task is in state {string} with the agent's question answered")]
fn answered(w: &mut World, state: String) {
    let r = result(w);
    assert_eq!(state_of(r), state.as_str(), "{r}");
    assert!(r["task"]["status"].get("message").is_none(), "{r}");
}

#[when(expr = "a client without A2A-Version sends {string} with message\\/send")]
async fn seed_send(w: &mut World, text: String) {
    let gw = w.gateway.as_ref().unwrap();
    w.task = Some(gw.call("message/send", text_message(&text)).await);
}

#[then(expr = "the task comes back in the seed shape in state {string}")]
fn seed_shape(w: &mut World, state: String) {
    let r = result(w);
    assert_eq!(r["status"]["state"], state.as_str(), "{r}");
    assert!(r.get("kind").is_none());
    assert_eq!(r["artifacts"][0]["parts"][0]["kind"], "text");
    assert!(r["artifacts"][0].get("artifactId").is_none());
}

#[when(regex = r"^an A2A (\S+) client calls (\S+) with (\{.*\})$")]
async fn spec_call(w: &mut World, version: String, method: String, params: String) {
    let version = version.trim_matches('"').to_owned();
    let params: Value = serde_json::from_str(&params).expect("JSON params in the feature");
    let gw = w.gateway.as_ref().unwrap();
    let (status, r) = gw.a2a_call(&method, params, Some(&version)).await;
    w.seen_count = status.into();
    w.task = Some(r);
}

#[then(expr = "the answer is HTTP {int} with error code {int}")]
fn error_code(w: &mut World, status: usize, code: i64) {
    assert_eq!(w.seen_count, status);
    let r = w.task.as_ref().unwrap();
    assert_eq!(r["error"]["code"], code, "{r}");
}
