//! The A2A HTTP+JSON (REST) binding over real sockets: the calls, a stream of bare
//! `StreamResponse` events, and every error with its spec HTTP status and AIP-193 body.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::gateway;

struct Rest {
    base: String,
    http: reqwest::Client,
}

impl Rest {
    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_with(method, path, body, &[]).await
    }

    async fn call_with(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self
            .http
            .request(m, format!("{}/a2a/rest{path}", self.base));
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_string());
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

fn msg(text: &str) -> Value {
    json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(), "role": "ROLE_USER",
                       "parts": [{"text": text}]}})
}

/// An AIP-193 error body with its ErrorInfo.
fn assert_error(status: u16, body: &Value, want: u16, reason: &str) {
    assert_eq!(status, want, "{body}");
    assert_eq!(body["error"]["code"], want, "{body}");
    assert!(body["error"]["status"].is_string());
    assert!(body["error"]["message"].is_string());
    let info = &body["error"]["details"][0];
    assert_eq!(info["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
    assert_eq!(info["reason"], reason, "{body}");
}

#[tokio::test]
async fn the_rest_binding_serves_the_task_model() {
    let gw = gateway().sid("a2a-rest").start().await;
    let rest = Rest {
        base: gw.base(),
        http: reqwest::Client::new(),
    };
    let (s, sent) = rest.call("POST", "/message:send", Some(msg("hi"))).await;
    assert_eq!(s, 200, "{sent}");
    let task = &sent["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    let id = task["id"].as_str().unwrap();
    let (s, got) = rest
        .call("GET", &format!("/tasks/{id}?historyLength=1"), None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(got["history"].as_array().unwrap().len(), 1);
    assert_eq!(got["artifacts"], task["artifacts"]);
    let (s, list) = rest
        .call("GET", "/tasks?pageSize=1&status=completed", None)
        .await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["pageSize"], 1);
    assert_eq!(list["tasks"][0]["id"], id);

    // A held task: canceled over REST; its stream is bare StreamResponse objects.
    let (_, held) = rest
        .call("POST", "/message:send", Some(msg("hold it")))
        .await;
    let held_id = held["task"]["id"].as_str().unwrap().to_owned();
    let (s, c) = rest
        .call("POST", &format!("/tasks/{held_id}:cancel"), None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(c["status"]["state"], "TASK_STATE_CANCELED");
    let (s, again) = rest
        .call("POST", &format!("/tasks/{held_id}:cancel"), None)
        .await;
    assert_error(s, &again, 409, "TASK_NOT_CANCELABLE");

    let resp = rest
        .http
        .post(format!("{}/a2a/rest/message:stream", gw.base()))
        .header("content-type", "application/json")
        .body(msg("stream it").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = support::SseReader::new(resp)
        .collect(Duration::from_secs(10))
        .await;
    assert!(events[0].data["task"].is_object(), "{:?}", events[0]);
    assert!(events.iter().all(|e| e.data.get("jsonrpc").is_none()));
    let last = &events.last().unwrap().data;
    assert_eq!(
        last["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    // Push configurations.
    let path = format!("/tasks/{id}/pushNotificationConfigs");
    let (s, made) = rest
        .call(
            "POST",
            &path,
            Some(json!({"id": "r1", "url": "http://93.184.216.34/h"})),
        )
        .await;
    assert_eq!(s, 200, "{made}");
    assert_eq!(made["taskId"], id);
    let (_, listed) = rest.call("GET", &path, None).await;
    assert_eq!(listed["configs"][0]["id"], "r1");
    let (s, one) = rest.call("GET", &format!("{path}/r1"), None).await;
    assert_eq!((s, &one), (200, &made));
    let (s, _) = rest.call("DELETE", &format!("{path}/r1"), None).await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn rest_errors_have_the_spec_statuses() {
    let gw = gateway()
        .sid("a2a-rest-errors")
        .with(|c| c.sid.bearer_tokens = vec!["t0k".into()])
        .start()
        .await;
    let rest = Rest {
        base: gw.base(),
        http: reqwest::Client::new(),
    };
    let auth = [("authorization", "Bearer t0k")];
    let (s, b) = rest.call("GET", "/tasks/nope", None).await;
    assert_error(s, &b, 401, "UNAUTHORIZED");
    let (s, b) = rest.call_with("GET", "/tasks/nope", None, &auth).await;
    assert_error(s, &b, 404, "TASK_NOT_FOUND");
    let file = json!({"message": {"role": "ROLE_USER", "parts": [{"url": "http://x/f.png"}]}});
    let (s, b) = rest
        .call_with("POST", "/message:send", Some(file), &auth)
        .await;
    assert_error(s, &b, 415, "CONTENT_TYPE_NOT_SUPPORTED");
    let (s, b) = rest
        .call_with("GET", "/tasks?pageSize=0", None, &auth)
        .await;
    assert_error(s, &b, 400, "INVALID_PARAMS");
    let (s, b) = rest
        .call_with("GET", "/tasks?pageSize=lots", None, &auth)
        .await;
    assert_error(s, &b, 400, "INVALID_PARAMS");
    let (s, b) = rest
        .call_with(
            "GET",
            "/tasks",
            None,
            &[("authorization", "Bearer t0k"), ("a2a-version", "0.3")],
        )
        .await;
    assert_error(s, &b, 400, "VERSION_NOT_SUPPORTED");
    let (s, b) = rest
        .call_with("GET", "/extendedAgentCard", None, &auth)
        .await;
    assert_error(s, &b, 400, "EXTENDED_AGENT_CARD_NOT_CONFIGURED");
    let (s, b) = rest
        .call_with("POST", "/tasks/nope:pause", None, &auth)
        .await;
    assert_error(s, &b, 404, "METHOD_NOT_FOUND");
    let (s, b) = rest
        .call_with("POST", "/message:send", Some(json!([1])), &auth)
        .await;
    assert_error(s, &b, 400, "INVALID_PARAMS");
    // A finished task takes no message, and has nothing to subscribe to.
    let (_, sent) = rest
        .call_with("POST", "/message:send", Some(msg("hi")), &auth)
        .await;
    let id = sent["task"]["id"].as_str().unwrap();
    let mut more = msg("more");
    more["message"]["taskId"] = json!(id);
    let (s, b) = rest
        .call_with("POST", "/message:send", Some(more), &auth)
        .await;
    assert_error(s, &b, 400, "UNSUPPORTED_OPERATION");
    let (s, b) = rest
        .call_with("POST", &format!("/tasks/{id}:subscribe"), None, &auth)
        .await;
    assert_error(s, &b, 400, "UNSUPPORTED_OPERATION");
}
