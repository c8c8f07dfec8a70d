//! Every place a credential travels in: the `Authorization` header (its scheme in any case),
//! the API-key header, and a legacy envelope's `auth`, as legacy clients send it. Each is read
//! by the gate, and with `strip_credentials` none reaches an upstream, whatever the dialects
//! on either side, in a batch member or on the pass-through.

use serde_json::{json, Value};
use wiregate::config::{AuthMode, Dialect};

use crate::call;
use crate::support::{self, jsonrpc_echo, legacy_echo, Listening, TestGateway};

const KEY: &str = "s3cret-carried-key";

/// A gateway requiring an API key from the file it writes, stripping credentials, every
/// method routed to `up` (which speaks `dialect`) and `/api/` passed through to it.
async fn gate_in_front(up: &Listening, dialect: Dialect) -> (TestGateway, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    support::keys::write_api_keys(&file, &[("ci-bot", KEY)], &["plans:read"]);
    let path = file.to_string_lossy().into_owned();
    let gw = support::routing_all_to(&up.url(), dialect)
        .passthrough(&[("/files", "up")])
        .with(|c| {
            c.auth.mode = AuthMode::Required;
            c.auth.api_keys.file = path;
            c.auth.strip_credentials = true;
        })
        .start()
        .await;
    (gw, dir)
}

/// A legacy envelope for `operation`, with `auth` as sent.
fn envelope(operation: &str, auth: Value) -> Value {
    json!({"a2a_version": "1.0", "request_id": "r-1", "operation": operation,
           "params": {"x": 1}, "auth": auth})
}

/// Whether anything the upstream was sent carries the key.
fn key_reached(up: &Listening) -> bool {
    up.seen().iter().any(|s| {
        s.body.to_string().contains(KEY)
            || s.headers
                .values()
                .any(|v| v.as_bytes().windows(KEY.len()).any(|w| w == KEY.as_bytes()))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_client_is_identified_by_its_envelopes_auth_and_stripped() {
    for dialect in [Dialect::Legacy, Dialect::Jsonrpc] {
        let up = match dialect {
            Dialect::Legacy => legacy_echo().run().await,
            _ => jsonrpc_echo().run().await,
        };
        let (gw, _dir) = gate_in_front(&up, dialect).await;

        // The token only in the envelope, as the legacy protocol carries it; the scheme in
        // any case.
        for scheme in ["apikey", "ApiKey", "APIKEY"] {
            let auth = json!({"scheme": scheme, "token": KEY});
            let a = gw.rpc(&envelope("plans.get", auth)).await;
            assert_eq!(a.status, 200, "{dialect:?} {scheme}: {}", a.text);
            assert_eq!(a.json()["status"], "success", "{}", a.text);
        }
        let last = up.seen().last().unwrap().body.clone();
        if dialect == Dialect::Legacy {
            assert_eq!(last["auth"], Value::Null, "auth: null upstream: {last}");
        }
        assert!(
            !key_reached(&up),
            "{dialect:?}: the key stayed at the gateway"
        );

        // A wrong one in the envelope is refused as a wrong header is.
        let wrong = gw
            .rpc(&envelope(
                "plans.get",
                json!({"scheme": "apikey", "token": "nope"}),
            ))
            .await;
        assert_eq!(wrong.status, 401, "{}", wrong.text);
        assert_eq!(wrong.json()["error"]["code"], "AUTH_ERROR");
        // None anywhere: refused.
        let none = gw.rpc(&envelope("plans.get", Value::Null)).await;
        assert_eq!(none.status, 401, "{}", none.text);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_carrier_lets_a_stripped_credential_through() {
    let up = legacy_echo().run().await;
    let (gw, _dir) = gate_in_front(&up, Dialect::Legacy).await;
    let by_header = [("x-api-key", KEY)];
    let apikey = format!("apikey {KEY}");
    let by_scheme = [("authorization", apikey.as_str())];

    // A JSON-RPC call, a batch's members, a legacy client with the key in a header and its
    // envelope's `auth` too.
    for headers in [&by_header[..], &by_scheme[..]] {
        let a = gw.rpc_with(&call(json!(1), "m"), headers).await;
        assert_eq!(a.status, 200, "{}", a.text);
        let batch = json!([call(json!(2), "m"), call(json!(3), "n")]);
        let a = gw.rpc_with(&batch, headers).await;
        assert_eq!(a.status, 200, "{}", a.text);
        let both = envelope("m", json!({"scheme": "bearer", "token": KEY}));
        let a = gw.rpc_with(&both, headers).await;
        assert_eq!(a.status, 200, "{}", a.text);
        assert_eq!(up.seen().last().unwrap().body["auth"], Value::Null);
    }
    assert!(up.seen().len() >= 8, "every call reached the upstream");
    assert!(!key_reached(&up), "no call carried the key upstream");

    // The pass-through, by either header.
    let before = up.seen().len();
    for headers in [&by_header[..], &by_scheme[..]] {
        let a = gw
            .post_to_with("/files/x", &envelope("m", Value::Null), headers)
            .await;
        assert_eq!(a.status, 200, "{}", a.text);
    }
    assert_eq!(up.seen().len(), before + 2);
    assert!(
        !key_reached(&up),
        "the pass-through carried the key upstream"
    );
}
