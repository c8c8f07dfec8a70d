//! `wiregate check-config` (the real binary over a file) refuses each bad key of `[auth]`,
//! the `allow` of routes and prefixes and `[[rate_limits]]`, naming its key path; the same
//! file with good values passes, so each refusal is that one value's doing.

const BASE: &str = r#"
[[upstreams]]
name = "up"
url = "http://127.0.0.1:9000/rpc"
dialect = "jsonrpc"
"#;

fn check_config(text: &str, files: &[(&str, &str)]) -> (bool, String) {
    crate::support::check_config_in(text, files)
}

fn refused(extra: &str, key: &str) {
    let text = format!("{BASE}\n{extra}");
    let (ok, err) = check_config(
        &text,
        &[("keys.toml", "[[keys]]\nid = \"x\"\nsha256 = \"zz\"\n")],
    );
    assert!(!ok, "accepted:\n{text}");
    assert!(
        err.lines().any(|l| l.contains(&format!("{key}: "))),
        "{key} not named in:\n{err}\nfor:\n{text}"
    );
}

const GOOD: &str = r#"
[auth]
mode = "required"
identity_header = "x-caller-id"
[[auth.jwt]]
issuer = "https://idp.example.com/"
audiences = ["wiregate"]
jwks_file = "jwks.json"
[auth.api_keys]
file = "good-keys.toml"

[[routes]]
methods = ["plans.*"]
upstream = "up"
auth = "optional"
allow = ["scope:plans:read", "sub:ci-bot", "key:ci-bot"]

[[rate_limits]]
name = "per-caller"
match = ["*", "path:/files/*"]
key = "caller"
rate_per_s = 100
burst = 200
"#;

#[test]
fn good_auth_keys_pass_check_config() {
    let keys = format!(
        "[[keys]]\nid = \"ci-bot\"\nsha256 = \"{}\"\nscopes = [\"plans:read\"]\n",
        "ab".repeat(32)
    );
    let (ok, err) = check_config(
        &format!("{BASE}\n{GOOD}"),
        &[("jwks.json", r#"{"keys": []}"#), ("good-keys.toml", &keys)],
    );
    assert!(ok, "{err}");
}

#[test]
fn bad_auth_keys_are_refused_with_their_key_paths() {
    let jwt = |k: &str| {
        format!(
            "[[auth.jwt]]\nissuer = \"https://idp/\"\naudiences = [\"w\"]\njwks_url = \"https://idp/jwks\"\n{k}"
        )
    };
    refused(
        "[[auth.jwt]]\nissuer = \"https://idp/\"\naudiences = [\"w\"]\njwks_url = \"http://idp/jwks\"",
        "auth.jwt[0].jwks_url",
    );
    refused(&jwt("algorithms = [\"HS256\"]"), "auth.jwt[0].algorithms");
    refused(&jwt("algorithms = [\"none\"]"), "auth.jwt[0].algorithms");
    refused(
        "[[auth.jwt]]\nissuer = \"https://idp/\"\naudiences = [\"w\"]",
        "auth.jwt[0].jwks_url",
    );
    refused(
        "[[auth.jwt]]\nissuer = \"https://idp/\"\naudiences = [\"w\"]\njwks_file = \"missing.json\"",
        "auth.jwt[0].jwks_file",
    );
    refused("[auth]\nmode = \"required\"", "auth.mode");
    refused(
        "[auth.api_keys]\nfile = \"keys.toml\"",
        "auth.api_keys.file",
    );
    refused(
        "[auth]\nidentity_header = \"bad header\"",
        "auth.identity_header",
    );
    refused("[auth.mtls]\nidentity = \"san_uri\"", "auth.mtls.identity");
    refused(
        "[[routes]]\nmethods = [\"*\"]\nupstream = \"up\"\nallow = [\"\"]",
        "routes[0].allow[0]",
    );
    refused(
        "[[routes]]\nmethods = [\"*\"]\nupstream = \"up\"\nallow = [\"scope:\"]",
        "routes[0].allow[0]",
    );
    refused(
        "[[passthrough]]\nprefix = \"/files\"\nupstream = \"up\"\nallow = [\"team:x\"]",
        "passthrough[0].allow[0]",
    );
    let limit = |k: &str| format!("[[rate_limits]]\nname = \"l\"\n{k}");
    refused(&limit("shared = true"), "rate_limits[0].shared");
    refused(&limit("key = \"tenant\""), "rate_limits[0].key");
    refused(&limit("rate_per_s = 0"), "rate_limits[0].rate_per_s");
    refused(&limit("burst = 0"), "rate_limits[0].burst");
    refused("[[rate_limits]]\nrate_per_s = 5", "rate_limits[0].name");
}
