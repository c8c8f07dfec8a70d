//! `wiregate check-config` (the real binary over a file) refuses each bad key of an upstream's
//! endpoints, balancing, health, outlier and retry tables, naming its key path; the same file
//! with good values passes, so each refusal is that one value's doing.

/// The fleet upstream is the second entry, so each key path names index 1.
fn file(fleet_keys: &str, tables: &str) -> String {
    format!(
        r#"
[[upstreams]]
name = "plain"
url = "http://127.0.0.1:9000/a2a"
dialect = "legacy"

[[upstreams]]
name = "fleet"
dialect = "jsonrpc"
{fleet_keys}
{tables}

[[routes]]
methods = ["*"]
upstream = "fleet"
"#
    )
}

const ENDPOINTS: &str = r#"endpoints = ["http://127.0.0.1:9001/rpc", "http://127.0.0.1:9002/rpc"]"#;

fn check_config(text: &str) -> (bool, String) {
    crate::support::check_config_in(text, &[])
}

/// Runs `check-config` on `text` and asserts it fails naming `key` (as `key: `).
fn refused(text: &str, key: &str) {
    let (ok, err) = check_config(text);
    assert!(!ok, "accepted:\n{text}");
    assert!(
        err.lines().any(|l| l.contains(&format!("{key}: "))),
        "{key} not named in:\n{err}\nfor:\n{text}"
    );
}

#[test]
fn good_fleet_keys_pass_check_config() {
    let good = file(
        &format!(
            "{ENDPOINTS}\nbalance = \"hash\"\nhash_key = \"header:x-tenant\"\nmax_concurrent = 8"
        ),
        "[upstreams.health]\npath = \"/health\"\ninterval_ms = 50\n\
         [upstreams.outlier]\nconsecutive_failures = 3\nmax_ejected_percent = 100\n\
         [upstreams.retry]\nattempts = 3\nmethods = [\"get*\"]\n",
    );
    let (ok, err) = check_config(&good);
    assert!(ok, "{err}\n{good}");
    // And a fleet of one `url`.
    let (ok, err) = check_config(&file("url = \"http://127.0.0.1:9001/rpc\"", ""));
    assert!(ok, "{err}");
}

#[test]
fn bad_fleet_keys_are_refused_with_their_key_paths() {
    let both = format!("{ENDPOINTS}\nurl = \"http://127.0.0.1:9003/rpc\"");
    refused(&file(&both, ""), "upstreams[1].endpoints");
    refused(
        &file(
            r#"endpoints = ["http://127.0.0.1:9001/rpc", "ftp://127.0.0.1:9002/rpc"]"#,
            "",
        ),
        "upstreams[1].endpoints[1]",
    );
    refused(
        &file(ENDPOINTS, "[upstreams.retry]\nattempts = 0\n"),
        "upstreams[1].retry.attempts",
    );
    refused(
        &file(
            ENDPOINTS,
            "[upstreams.outlier]\nmax_ejected_percent = 101\n",
        ),
        "upstreams[1].outlier.max_ejected_percent",
    );
    refused(
        &file(ENDPOINTS, "[upstreams.health]\npath = \"health\"\n"),
        "upstreams[1].health.path",
    );
    refused(
        &file(&format!("{ENDPOINTS}\nhash_key = \"cookie\""), ""),
        "upstreams[1].hash_key",
    );
    refused(&file("", ""), "upstreams[1].url");
}

/// A value of the wrong kind (a `balance` that is no variant) is caught when the file is read,
/// before validation; its key path is written as every other refusal writes it.
#[test]
fn an_unknown_balance_is_refused_with_its_key_path() {
    let text = file(&format!("{ENDPOINTS}\nbalance = \"random\""), "");
    let (ok, err) = check_config(&text);
    assert!(!ok, "accepted:\n{text}");
    assert!(err.contains("random"), "{err}");
    refused(&text, "upstreams[1].balance");
}
