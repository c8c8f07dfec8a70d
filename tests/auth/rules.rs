//! `allow` on routes: in one batch, each call is let through or refused 403 (-32071) on its
//! own, by the caller's scopes, subject or key id; a route without `allow` takes any caller
//! `auth` lets in, and one with `auth = "off"` takes anyone.

use serde_json::json;
use wiregate::config::{AuthMode, Dialect, Route};

use crate::support::{self, jsonrpc_echo};
use crate::{call, Jwks, SigningKey};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_of_a_batch_is_allowed_or_forbidden_by_its_route() {
    let key = SigningKey::new("k1");
    let jwks = Jwks::serve(vec![key.jwk.clone()]).await;
    let up = jsonrpc_echo().run().await;
    let jwt = jwks.config();
    let url = up.url();
    let gw = support::gateway()
        .upstream("up", &url, Dialect::Jsonrpc, 2000)
        .with(|c| {
            c.auth.mode = AuthMode::Required;
            c.auth.jwt = vec![jwt];
            c.routes = vec![
                Route {
                    allow: vec!["scope:plans:read".into()],
                    ..Route::to(&["plans.*"], "up")
                },
                Route {
                    allow: vec!["sub:root".into()],
                    ..Route::to(&["admin.*"], "up")
                },
                Route {
                    auth: Some(AuthMode::Off),
                    ..Route::to(&["public.*"], "up")
                },
                Route::to(&["*"], "up"),
            ];
        })
        .start()
        .await;
    let reader = format!(
        "Bearer {}",
        key.token(json!({"sub": "alice", "scope": "plans:read profile"}))
    );
    let batch = json!([
        call(json!(1), "plans.get"),
        call(json!(2), "admin.wipe"),
        call(json!(3), "public.status"),
        call(json!(4), "other.thing"),
    ]);
    let a = gw.rpc_with(&batch, &[("authorization", &reader)]).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let answers = a.json();
    let by_id = |id: i64| {
        answers
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .cloned()
            .unwrap()
    };
    assert_eq!(by_id(1)["result"]["method"], "plans.get");
    assert_eq!(by_id(2)["error"]["code"], -32071, "{answers}");
    assert_eq!(by_id(2)["error"]["data"]["kind"], "forbidden");
    assert_eq!(by_id(3)["result"]["method"], "public.status");
    assert_eq!(by_id(4)["result"]["method"], "other.thing");

    // Alone, a forbidden call is HTTP's 403; a legacy client gets FORBIDDEN.
    let a = gw
        .rpc_with(&call(json!(5), "admin.wipe"), &[("authorization", &reader)])
        .await;
    assert_eq!(a.status, 403);
    let legacy = json!({"a2a_version": "1.0", "request_id": "r", "operation": "admin.wipe",
                        "params": {}});
    let a = gw.rpc_with(&legacy, &[("authorization", &reader)]).await;
    assert_eq!(a.status, 403);
    assert_eq!(a.json()["error"]["code"], "FORBIDDEN");

    // Without a token, the open route still answers and the others want one.
    let a = gw.rpc(&call(json!(6), "public.status")).await;
    assert_eq!(a.status, 200, "{}", a.text);
    let a = gw.rpc(&call(json!(7), "plans.get")).await;
    assert_eq!(a.status, 401);

    let metrics = gw.get("/metrics").await.text;
    let count = |method: &str, outcome: &str| {
        metrics
            .lines()
            .find(|l| {
                l.starts_with("wiregate_auth_total{")
                    && l.contains(&format!(r#"method="{method}""#))
                    && l.contains(&format!(r#"outcome="{outcome}""#))
            })
            .unwrap_or_else(|| panic!("no {outcome} count for {method}:\n{metrics}"))
            .rsplit(' ')
            .next()
            .unwrap()
            .to_owned()
    };
    // The recorder is the test process's, shared with the other tests of this binary: the
    // methods counted here are called by this test alone.
    assert_eq!(count("admin.wipe", "forbidden"), "3");
    // Admitted calls of one method, alone and between others, each counted once.
    assert_eq!(count("public.status", "ok"), "2");
    assert_eq!(count("other.thing", "ok"), "1");
}
