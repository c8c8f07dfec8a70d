//! A2A's own JSON-RPC binding (`a2a.jsonrpc_path`, `/` by default) beside the gateway's
//! `POST /rpc`: every JSON-RPC answer is HTTP 200 there (the A2A TCK's envelope cases), only A2A
//! methods are served, and `/rpc` keeps its contract (400 for a malformed request). The card
//! names where the binding is served, `https` when a trusted proxy says the client used it.

use crate::support;

use serde_json::{json, Value};
use support::{gateway, TestGateway};

async fn raw_post(
    gw: &TestGateway,
    path: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut req = gw
        .http
        .post(format!("{}{path}", gw.base()))
        .header("content-type", "application/json")
        .body(body.to_owned());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("the gateway answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"));
    (status, v)
}

/// The A2A TCK's `test_rejects_invalid_json_rpc_requests` cases (branch `main`), and its
/// `test_invalid_jsonrpc_version` / `test_missing_method_field`.
fn envelope_cases() -> Vec<(Value, i64)> {
    vec![
        (
            json!({"jsonrpc": "aaa", "method": "SendMessage", "params": {}}),
            -32600,
        ),
        (json!({"jsonrpc": "2.0", "params": {}}), -32600),
        (
            json!({"jsonrpc": "2.0", "method": "SendMessageXXX", "id": "3", "params": {}}),
            -32601,
        ),
        (
            json!({"jsonrpc": "2.0", "method": "SendMessage", "params": {}, "id": {"bad": "type"}}),
            -32600,
        ),
        (
            json!({"jsonrpc": "2.0", "method": "SendMessage", "id": "4", "params": {"": "not_a_dict"}}),
            -32602,
        ),
        (
            json!({"jsonrpc": "1.0", "method": "GetTask", "id": "5", "params": {"id": "x"}}),
            -32600,
        ),
        (json!({"jsonrpc": "2.0", "id": "6", "params": {}}), -32600),
    ]
}

#[tokio::test]
async fn a2a_s_binding_answers_every_json_rpc_error_with_200_and_rpc_keeps_400() {
    let gw = gateway().sid("binding-envelope").start().await;
    for (body, code) in envelope_cases() {
        let (status, r) = raw_post(&gw, "/", &body.to_string(), &[]).await;
        assert_eq!(
            (status, &r["error"]["code"]),
            (200, &json!(code)),
            "{body} on /: {r}"
        );
        assert_eq!(r["jsonrpc"], "2.0");
        // The gateway's own path: the same code, and its HTTP status rule for the envelope.
        let (status, r) = raw_post(&gw, "/rpc", &body.to_string(), &[]).await;
        assert_eq!(r["error"]["code"], json!(code), "{body} on /rpc: {r}");
        let want = if code == -32600 { 400 } else { 200 };
        assert_eq!(status, want, "{body} on /rpc");
    }
    let unparsable = r#"{"jsonrpc": "2.0", "method": "SendMessage", "params": {"foo": "bar"}"#;
    let (status, r) = raw_post(&gw, "/", unparsable, &[]).await;
    assert_eq!(
        (status, &r["error"]["code"], &r["id"]),
        (200, &json!(-32700), &Value::Null)
    );
    let (status, _) = raw_post(&gw, "/rpc", unparsable, &[]).await;
    assert_eq!(status, 400);
    let (status, r) = raw_post(&gw, "/", "[]", &[]).await;
    assert_eq!((status, &r["error"]["code"]), (200, &json!(-32600)));
}

#[tokio::test]
async fn a2a_s_binding_serves_a2a_methods_only() {
    let gw = gateway().sid("binding-methods").start().await;
    // 1.0: a send and a get, as on /rpc.
    let send = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
    let (status, r) = raw_post(&gw, "/", &send.to_string(), &[]).await;
    assert_eq!(status, 200);
    let task = &r["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{r}");
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task["id"]}});
    let (_, g) = raw_post(&gw, "/", &get.to_string(), &[("a2a-version", "1.0")]).await;
    assert_eq!(g["result"]["id"], task["id"]);

    // A slash name is A2A 0.3 here even without A2A-Version: `kind` discriminators...
    let get_0_3 =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/get", "params": {"id": task["id"]}});
    let (status, g) = raw_post(&gw, "/", &get_0_3.to_string(), &[]).await;
    assert_eq!((status, &g["result"]["kind"]), (200, &json!("task")), "{g}");
    assert_eq!(g["result"]["status"]["state"], "completed");
    // ...where /rpc without the header keeps the seed dialect (no `kind`).
    let (_, seed) = raw_post(&gw, "/rpc", &get_0_3.to_string(), &[]).await;
    assert!(seed["result"].get("kind").is_none(), "{seed}");
    assert_eq!(seed["result"]["status"]["state"], "completed");

    // A slash name with A2A-Version 1.0, a raw sid op, a legacy envelope: not A2A, refused.
    let (status, r) = raw_post(&gw, "/", &get_0_3.to_string(), &[("a2a-version", "1.0")]).await;
    assert_eq!((status, &r["error"]["code"]), (200, &json!(-32601)), "{r}");
    let raw = json!({"jsonrpc": "2.0", "id": 4, "method": "_sid/stats", "params": {}});
    let (status, r) = raw_post(&gw, "/", &raw.to_string(), &[]).await;
    assert_eq!((status, &r["error"]["code"]), (200, &json!(-32601)), "{r}");
    let legacy = json!({"a2a_version": "1.0", "request_id": "r-1", "operation": "tasks/get",
                        "params": {"id": "x"}});
    let (status, r) = raw_post(&gw, "/", &legacy.to_string(), &[]).await;
    assert_eq!((status, &r["error"]["code"]), (200, &json!(-32600)), "{r}");
    // A2A's errors keep their codes and ErrorInfo.
    let missing = json!({"jsonrpc": "2.0", "id": 5, "method": "GetTask", "params": {"id": "nope"}});
    let (status, r) = raw_post(&gw, "/", &missing.to_string(), &[]).await;
    assert_eq!((status, &r["error"]["code"]), (200, &json!(-32001)));
    assert_eq!(r["error"]["data"][0]["reason"], "TASK_NOT_FOUND");
    let (status, r) = raw_post(&gw, "/", &missing.to_string(), &[("a2a-version", "9.9")]).await;
    assert_eq!((status, &r["error"]["code"]), (200, &json!(-32009)));

    // A stream on the binding.
    let stream = json!({"jsonrpc": "2.0", "id": "s", "method": "SendStreamingMessage",
        "params": {"message": {"messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}});
    let resp = gw
        .http
        .post(format!("{}/", gw.base()))
        .header("content-type", "application/json")
        .body(stream.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = support::SseReader::new(resp)
        .collect(std::time::Duration::from_secs(10))
        .await;
    assert!(events.len() >= 3, "{events:?}");
    assert!(events
        .iter()
        .all(|e| e.data["id"] == "s" && e.data.get("result").is_some()));
    let last = &events.last().unwrap().data["result"]["statusUpdate"]["status"]["state"];
    assert_eq!(last, "TASK_STATE_COMPLETED");

    // Only POST: another method on the binding's path is 405.
    assert_eq!(gw.get("/").await.status, 405);
}

#[tokio::test]
async fn the_card_names_a2a_s_binding_wherever_it_is_served() {
    let gw = gateway().sid("binding-card").start().await;
    let card = gw.get("/.well-known/agent-card.json").await.json();
    let root = format!("{}/", gw.base());
    assert_eq!(card["supportedInterfaces"][0]["url"], root.as_str());
    assert_eq!(card["supportedInterfaces"][1]["url"], root.as_str());
    let old = gw.get("/.well-known/agent.json").await.json();
    assert_eq!(old["url"], root.as_str());

    // Moved: served at the new path (with or without a trailing slash), not at `/`.
    let moved = gateway()
        .sid("binding-moved")
        .with(|c| c.a2a.jsonrpc_path = "/agents/sid/".into())
        .start()
        .await;
    let card = moved.get("/.well-known/agent-card.json").await.json();
    let url = format!("{}/agents/sid", moved.base());
    assert_eq!(card["supportedInterfaces"][0]["url"], url.as_str());
    let bad = json!({"jsonrpc": "2.0", "params": {}}).to_string();
    for path in ["/agents/sid", "/agents/sid/"] {
        let (status, r) = raw_post(&moved, path, &bad, &[]).await;
        assert_eq!(
            (status, &r["error"]["code"]),
            (200, &json!(-32600)),
            "{path}"
        );
    }
    assert_eq!(moved.post_to("/", &json!({})).await.status, 404);

    // Off: the card names /rpc, whose rules are the gateway's.
    let off = gateway()
        .sid("binding-off")
        .with(|c| c.a2a.jsonrpc_path = String::new())
        .start()
        .await;
    let card = off.get("/.well-known/agent-card.json").await.json();
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        format!("{}/rpc", off.base()).as_str()
    );
    assert_eq!(off.post_to("/", &json!({})).await.status, 404);
}

#[test]
fn the_binding_s_path_is_validated_with_its_key() {
    for (path, ok) in [
        ("/", true),
        ("", true),
        ("/a2a/jsonrpc", true),
        ("/rpc", false),
        ("/rpc/", false),
        ("/a2a/rest", false),
        ("/.well-known/x", false),
        ("/healthz", false),
        ("/events", false),
        ("rpc", false),
        ("/a b", false),
    ] {
        let mut c = wiregate::config::Config::default();
        c.a2a.jsonrpc_path = path.into();
        let r = c.validate();
        assert_eq!(r.is_ok(), ok, "{path:?}: {r:?}");
        if let Err(e) = r {
            assert!(e.to_string().contains("a2a.jsonrpc_path"), "{e}");
        }
    }
}

#[tokio::test]
async fn the_card_says_https_when_a_trusted_proxy_says_the_client_came_over_tls() {
    let card_url = |gw: &TestGateway, headers: &[(&str, &str)]| {
        let mut req = gw
            .http
            .get(format!("{}/.well-known/agent-card.json", gw.base()));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        async move {
            let card: Value = req.send().await.unwrap().json().await.unwrap();
            // A card refused (400) names nothing.
            card["supportedInterfaces"][0]["url"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
    };
    let behind = gateway()
        .sid("card-trusted")
        .with(|c| c.server.trusted_proxies = vec!["127.0.0.1".into()])
        .start()
        .await;
    let plain = format!("http://{}/", behind.addr);
    assert_eq!(card_url(&behind, &[]).await, plain);
    assert_eq!(
        card_url(&behind, &[("x-forwarded-proto", "https")]).await,
        format!("https://{}/", behind.addr)
    );
    assert_eq!(
        card_url(
            &behind,
            &[
                ("x-forwarded-proto", "https"),
                ("x-forwarded-host", "agents.example")
            ]
        )
        .await,
        "https://agents.example/"
    );
    // Proxies that write X-Forwarded-* pass a client's own `Forwarded` on: not believed.
    let claim = [(
        "forwarded",
        "proto=http;host=evil.example, proto=https;host=\"gw.example:8443\"",
    )];
    assert_eq!(card_url(&behind, &claim).await, plain);
    // Proxies that write `Forwarded`: the last element is the trusted peer's own; an earlier
    // one is anyone's claim.
    let behind_rfc7239 = gateway()
        .sid("card-forwarded")
        .with(|c| {
            c.server.trusted_proxies = vec!["127.0.0.1".into()];
            c.server.forwarded_header = wiregate::config::ForwardedHeader::Forwarded;
        })
        .start()
        .await;
    assert_eq!(
        card_url(&behind_rfc7239, &[("x-forwarded-proto", "https")]).await,
        format!("http://{}/", behind_rfc7239.addr)
    );
    assert_eq!(
        card_url(
            &behind_rfc7239,
            &[(
                "forwarded",
                "proto=http;host=evil.example, proto=https;host=\"gw.example:8443\""
            )]
        )
        .await,
        "https://gw.example:8443/"
    );
    assert_eq!(
        card_url(&behind, &[("x-forwarded-host", "user@evil.example")])
            .await
            .as_str(),
        "",
        "a forged host is refused"
    );

    // A peer that is not trusted claims nothing.
    let open = gateway()
        .sid("card-untrusted")
        .with(|c| c.server.trusted_proxies = vec!["10.0.0.0/8".into()])
        .start()
        .await;
    assert_eq!(
        card_url(
            &open,
            &[
                ("x-forwarded-proto", "https"),
                ("forwarded", "proto=https;host=evil.example")
            ]
        )
        .await,
        format!("http://{}/", open.addr)
    );
}
