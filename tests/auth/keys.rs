//! `[auth.api_keys]`: keys from a file of their SHA-256 digests, in the header or as
//! `Authorization: ApiKey`, an unknown key refused 401, and the file read again on reload.

use serde_json::json;
use wiregate::config::{AuthMode, Dialect};

use crate::call;
use crate::support::{self, jsonrpc_echo};

fn write_keys(path: &std::path::Path, keys: &[(&str, &str)]) {
    support::keys::write_api_keys(path, keys, &["plans:read"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_pass_by_header_or_scheme_and_reload_with_their_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys.toml");
    write_keys(&file, &[("ci-bot", "s3cret-one")]);
    let up = jsonrpc_echo().run().await;
    let path = file.to_string_lossy().into_owned();
    let builder = support::routing_all_to(&up.url(), Dialect::Jsonrpc).with(|c| {
        c.auth.mode = AuthMode::Required;
        c.auth.api_keys.file = path;
        c.auth.identity_header = "x-caller-id".into();
    });
    let config = builder.into_config();
    let gw = support::gateway()
        .with(|c| *c = config.clone())
        .start()
        .await;

    let by_header = gw
        .rpc_with(&call(json!(1), "m"), &[("x-api-key", "s3cret-one")])
        .await;
    assert_eq!(by_header.status, 200, "{}", by_header.text);
    assert_eq!(up.seen().last().unwrap().headers["x-caller-id"], "ci-bot");
    let by_scheme = gw
        .rpc_with(
            &call(json!(2), "m"),
            &[("authorization", "ApiKey s3cret-one")],
        )
        .await;
    assert_eq!(by_scheme.status, 200, "{}", by_scheme.text);

    let wrong = gw
        .rpc_with(&call(json!(3), "m"), &[("x-api-key", "s3cret-onf")])
        .await;
    assert_eq!(wrong.status, 401);
    assert_eq!(wrong.json()["error"]["code"], -32070);
    assert!(!wrong.text.contains("s3cret"), "the key is never echoed");

    // The file changes: a reload reads it again.
    write_keys(&file, &[("deploy-bot", "s3cret-two")]);
    let applied = gw.running.as_ref().unwrap().reload(&config);
    assert!(applied.reloaded, "{:?}", applied.errors);
    let new = gw
        .rpc_with(&call(json!(4), "m"), &[("x-api-key", "s3cret-two")])
        .await;
    assert_eq!(new.status, 200, "{}", new.text);
    let old = gw
        .rpc_with(&call(json!(5), "m"), &[("x-api-key", "s3cret-one")])
        .await;
    assert_eq!(old.status, 401, "a key gone from the file is refused");
}
