//! The RPC paths (`server.rpc_paths`): a legacy server's own URL takes both dialects, with or
//! without a trailing slash, and paths that cannot work are refused by name.

use serde_json::json;
use wiregate::config::{Config, Dialect};

use crate::support::{gateway, legacy_echo};

#[tokio::test]
async fn every_rpc_path_takes_both_dialects_with_or_without_a_trailing_slash() {
    let up = legacy_echo().run().await;
    let gw = gateway()
        .upstream("legacy", &up.url(), Dialect::Legacy, 1000)
        .route(&["*"], "legacy")
        .with(|c| {
            c.server.rpc_paths = vec!["/a2a".into(), "/rpc/".into()];
            // Not served apart: the card names the first RPC path.
            c.a2a.jsonrpc_path = String::new();
        })
        .sid("front-paths")
        .start()
        .await;
    let call =
        json!({"jsonrpc": "2.0", "id": 7, "method": "plan.get", "params": {"plan_id": "P1"}});
    let legacy =
        json!({"a2a_version": "1.0", "request_id": "r1", "operation": "plan.get", "params": {}});
    for path in ["/a2a", "/a2a/", "/rpc", "/rpc/"] {
        let a = gw.post_to(path, &call).await;
        assert_eq!(a.status, 200, "{path}: {}", a.text);
        assert_eq!(a.json()["result"]["via"], "legacy", "{path}");
        assert_eq!(a.json()["id"], 7);
        let a = gw.post_to(path, &legacy).await;
        assert_eq!(a.json()["status"], "success", "{path}: {}", a.text);
        assert_eq!(a.json()["request_id"], "r1");
    }
    // Other methods on an RPC path are 405; a path not listed is not an RPC path.
    assert_eq!(gw.get("/a2a").await.status, 405);
    assert_eq!(gw.get("/a2a/").await.status, 405);
    assert_eq!(gw.post_to("/a2a/x", &call).await.status, 404);
    assert_eq!(gw.post_to("/a2", &call).await.status, 404);
    // The card names the first (A2A's own binding is off here).
    let card = gw.get("/.well-known/agent-card.json").await.json();
    let url = card["supportedInterfaces"][0]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(url.ends_with("/a2a"), "{url}");
    // A 0.3-only client's card (its own `url`) is at the older path.
    let old = gw.get("/.well-known/agent.json").await.json();
    assert_eq!(old["url"], url);
}

#[test]
fn rpc_paths_that_cannot_work_are_refused_by_name() {
    for bad in [
        vec![],
        vec!["rpc".to_owned()],
        vec!["/".to_owned()],
        vec!["/healthz".to_owned()],
        vec!["/tasks/x".to_owned()],
        // Every route of the gateway's own, not only the first ones it had.
        vec!["/console".to_owned()],
        vec!["/admin/reload".to_owned()],
        vec!["/migration/".to_owned()],
        vec!["/a2a/rest".to_owned()],
        vec!["/a b".to_owned()],
        vec!["/a?b".to_owned()],
        vec!["//x".to_owned()],
    ] {
        let mut c = Config::default();
        c.server.rpc_paths = bad.clone();
        let err = c.validate().expect_err(&format!("{bad:?}")).to_string();
        assert!(err.contains("server.rpc_paths"), "{bad:?}: {err}");
    }
    let mut c = Config::default();
    c.server.rpc_paths = vec!["/a2a".into(), "/v1/agent-rpc/".into()];
    c.validate().unwrap();
}
