//! `[[auth.jwt]]` with `mode = "required"`: a token verified against the key set a test
//! server serves over https passes, with the caller's id sent upstream and the token not;
//! no token, an expired one or one signed by a key the set does not hold is refused 401 with
//! RFC 6750's challenge, in each dialect; a new key in the set is picked up at its first use.

use serde_json::json;
use wiregate::config::{AuthMode, Dialect};

use crate::support::{self, jsonrpc_echo, legacy_echo};
use crate::{call, Jwks, SigningKey};

async fn gateway(jwks: &Jwks, up: &support::Listening, dialect: Dialect) -> support::TestGateway {
    let jwt = jwks.config();
    support::routing_all_to(&up.url(), dialect)
        .with(|c| {
            c.auth.mode = AuthMode::Required;
            c.auth.jwt = vec![jwt];
            c.auth.strip_credentials = true;
            c.auth.identity_header = "x-caller-id".into();
        })
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_token_passes_and_the_upstream_learns_the_caller_not_the_token() {
    let key = SigningKey::new("k1");
    let jwks = Jwks::serve(vec![key.jwk.clone()]).await;
    let up = jsonrpc_echo().run().await;
    let gw = gateway(&jwks, &up, Dialect::Jsonrpc).await;
    let token = key.token(json!({"sub": "alice"}));
    let bearer = format!("Bearer {token}");
    let answer = gw
        .rpc_with(
            &call(json!(1), "plan.get"),
            &[("authorization", &bearer), ("x-caller-id", "mallory")],
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.json()["result"]["method"], "plan.get");
    let seen = up.seen();
    let headers = &seen.last().unwrap().headers;
    assert_eq!(
        headers["x-caller-id"], "alice",
        "the verified subject, not the client's claim"
    );
    assert!(
        headers.get("authorization").is_none(),
        "strip_credentials: the token stays at the gateway"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_or_a_bad_one_is_refused_401_in_each_dialect() {
    let key = SigningKey::new("k1");
    let stranger = SigningKey::new("k1");
    let jwks = Jwks::serve(vec![key.jwk.clone()]).await;
    let up = jsonrpc_echo().run().await;
    let gw = gateway(&jwks, &up, Dialect::Jsonrpc).await;

    let none = gw.rpc(&call(json!(7), "plan.get")).await;
    assert_eq!(none.status, 401, "{}", none.text);
    assert_eq!(
        none.header("www-authenticate").as_deref(),
        Some(r#"Bearer realm="wiregate""#)
    );
    let v = none.json();
    assert_eq!(v["id"], 7);
    assert_eq!(v["error"]["code"], -32070, "{v}");

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let bad = [
        ("expired", key.token(json!({"exp": now - 120}))),
        ("not yet valid", key.token(json!({"nbf": now + 600}))),
        (
            "wrong issuer",
            key.token(json!({"iss": "https://other.test/"})),
        ),
        ("wrong audience", key.token(json!({"aud": "someone-else"}))),
        ("another key", stranger.token(json!({}))),
    ];
    for (what, token) in bad {
        let bearer = format!("Bearer {token}");
        let a = gw
            .rpc_with(&call(json!(8), "plan.get"), &[("authorization", &bearer)])
            .await;
        assert_eq!(a.status, 401, "{what}: {}", a.text);
        assert_eq!(
            a.header("www-authenticate").as_deref(),
            Some(r#"Bearer realm="wiregate", error="invalid_token""#),
            "{what}"
        );
        assert_eq!(a.json()["error"]["code"], -32070, "{what}");
        assert!(
            !a.text.contains(&token),
            "{what}: the token is never echoed"
        );
    }
    assert!(up.seen().is_empty(), "no refused call reached the upstream");

    // A legacy client is refused in its own terms.
    let legacy = json!({"a2a_version": "1.0", "request_id": "r1", "operation": "plan.get",
                        "params": {}});
    let a = gw.rpc(&legacy).await;
    assert_eq!(a.status, 401);
    let v = a.json();
    assert_eq!(v["request_id"], "r1");
    assert_eq!(v["error"]["code"], "AUTH_ERROR", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_token_refuses_a_whole_batch_and_a_legacy_upstream_gets_the_caller() {
    let key = SigningKey::new("k1");
    let jwks = Jwks::serve(vec![key.jwk.clone()]).await;
    let up = legacy_echo().run().await;
    let gw = gateway(&jwks, &up, Dialect::Legacy).await;
    let batch = json!([call(json!(1), "a"), call(json!(2), "b")]);
    let a = gw
        .rpc_with(&batch, &[("authorization", "Bearer not-a-jwt")])
        .await;
    assert_eq!(a.status, 401, "{}", a.text);
    let v = a.json();
    assert!(v.is_object(), "one error for the whole request: {v}");
    assert_eq!(v["error"]["code"], -32070);

    let bearer = format!("Bearer {}", key.token(json!({"sub": "bob"})));
    let a = gw.rpc_with(&batch, &[("authorization", &bearer)]).await;
    assert_eq!(a.status, 200, "{}", a.text);
    assert_eq!(a.json().as_array().unwrap().len(), 2);
    for seen in up.seen() {
        assert_eq!(seen.headers["x-caller-id"], "bob");
        assert_eq!(
            seen.body["auth"],
            json!(null),
            "no credential in the envelope"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_added_to_the_set_is_fetched_at_its_first_token() {
    let old = SigningKey::new("old");
    let jwks = Jwks::serve(vec![old.jwk.clone()]).await;
    let up = jsonrpc_echo().run().await;
    let gw = gateway(&jwks, &up, Dialect::Jsonrpc).await;
    let ok = |t: String| {
        let gw = &gw;
        async move {
            let bearer = format!("Bearer {t}");
            gw.rpc_with(&call(json!(1), "m"), &[("authorization", &bearer)])
                .await
                .status
        }
    };
    assert_eq!(ok(old.token(json!({}))).await, 200);
    // The provider rotates: the new key joins the set, the old one leaves.
    let new = SigningKey::new("new");
    *jwks.keys.lock().unwrap() = vec![new.jwk.clone()];
    assert_eq!(
        ok(new.token(json!({}))).await,
        200,
        "the unknown kid refetched the set"
    );
    assert_eq!(
        ok(old.token(json!({"jti": "another"}))).await,
        401,
        "the old key is gone from the set"
    );
}
