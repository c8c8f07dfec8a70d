//! The pass-through behind the gate: a prefix with `auth = "required"` answers a request
//! without a key 401 with a short body and the challenge; with one, the request passes with
//! the caller named in the identity header (a client's own header of that name dropped) and
//! its key stripped.

use serde_json::json;
use wiregate::config::{AuthMode, Dialect, Passthrough};

use crate::support::{self, jsonrpc_echo};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_prefix_refuses_without_a_key_and_names_the_caller_with_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    let path = support::keys::write_api_keys(&file, &[("uploader", "k-123")], &[]);
    let up = jsonrpc_echo().run().await;
    let gw = support::routing_all_to(&up.url(), Dialect::Jsonrpc)
        .with(|c| {
            c.passthrough = vec![Passthrough {
                prefix: "/files".into(),
                upstream: c.upstreams[0].name.clone(),
                auth: Some(AuthMode::Required),
                allow: Vec::new(),
            }];
            c.auth.api_keys.file = path;
            c.auth.strip_credentials = true;
            c.auth.identity_header = "x-caller-id".into();
        })
        .start()
        .await;
    let url = format!("{}/files/report", gw.base());
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "m"}).to_string();

    let refused = gw
        .http
        .post(&url)
        .header("x-caller-id", "admin")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    assert_eq!(
        refused.headers()["www-authenticate"],
        r#"Bearer realm="wiregate""#
    );
    let text = refused.text().await.unwrap();
    assert!(text.starts_with("wiregate: "), "a short body: {text}");
    assert!(up.seen().is_empty(), "nothing reached the upstream");

    let passed = gw
        .http
        .post(&url)
        .header("x-api-key", "k-123")
        .header("x-caller-id", "admin")
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert!(passed.status().is_success(), "{}", passed.status());
    let seen = up.seen();
    let headers = &seen.last().unwrap().headers;
    let ids: Vec<_> = headers.get_all("x-caller-id").iter().collect();
    assert_eq!(ids, ["uploader"], "only the gate's name for the caller");
    assert!(headers.get("x-api-key").is_none(), "the key is stripped");
}
