//! `check-config` refuses each bad value of the TLS, CORS, RPC path, log and tracing keys, naming its key path: the real
//! binary over files, certificates made in the test (`support::pki`).

use crate::check_config;
use crate::support::pki::Pki;

/// Runs `check-config` on `file` and asserts it fails naming `key` (as `key: `) and `why`.
fn refused(file: &str, key: &str, why: &str) {
    let (ok, out, err) = check_config(Some(file), &[]);
    assert!(!ok, "accepted:\n{file}\n{out}");
    let line = err
        .lines()
        .find(|l| l.contains(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("{key} not named in:\n{err}\nfor:\n{file}"));
    assert!(line.contains(why), "{line:?} does not say {why:?}");
}

fn toml_str(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

#[test]
fn bad_cors_origins_are_refused_by_index() {
    for (origins, key, why) in [
        (
            r#"["https://ok.example", "not an origin"]"#,
            "server.cors.allow_origins[1]",
            "is not an origin",
        ),
        (
            r#"["https://app.example/path"]"#,
            "server.cors.allow_origins[0]",
            "is not an origin",
        ),
        (
            r#"["https://app.example/"]"#,
            "server.cors.allow_origins[0]",
            "is not an origin",
        ),
        (
            r#"["*", "https://app.example"]"#,
            "server.cors.allow_origins",
            "\"*\" stands alone",
        ),
    ] {
        refused(
            &format!("[server.cors]\nallow_origins = {origins}\n"),
            key,
            why,
        );
    }
}

#[test]
fn bad_listener_tls_files_are_refused_by_key() {
    let pki = Pki::new("check-config");
    let (cert, key) = pki.issue("server", &["localhost"]).paths();
    let (_, other_key) = pki.issue("other", &["localhost"]).paths();
    let dir = tempfile::tempdir().unwrap();
    let (garbage, missing) = bad_files(&dir);
    let tls = |cert: &str, key: &str, client_ca: &str| {
        format!(
            "[server.tls]\ncert = {}\nkey = {}\nclient_ca = {}\n",
            toml_str(cert),
            toml_str(key),
            toml_str(client_ca)
        )
    };
    // The good ones pass, so each refusal below is the one value's doing.
    let (ok, _, err) = check_config(Some(&tls(&cert, &key, &pki.ca_file())), &[]);
    assert!(ok, "{err}");

    refused(&tls(&cert, &missing, ""), "server.tls.key", &missing);
    // A certificate where the key should be, a file that is no PEM, a key of another certificate.
    refused(&tls(&cert, &cert, ""), "server.tls.key", &cert);
    refused(&tls(&cert, &garbage, ""), "server.tls.key", &garbage);
    refused(
        &tls(&cert, &other_key, ""),
        "server.tls.key",
        "does not fit the certificate",
    );
    refused(&tls(&missing, &key, ""), "server.tls.cert", &missing);
    refused(&tls(&cert, "", ""), "server.tls", "set together");

    refused(
        &tls(&cert, &key, &garbage),
        "server.tls.client_ca",
        &garbage,
    );
    refused(
        &tls(&cert, &key, &missing),
        "server.tls.client_ca",
        &missing,
    );
    refused(
        &tls("", "", &pki.ca_file()),
        "server.tls.client_ca",
        "needs server.tls.cert and server.tls.key",
    );
}

#[test]
fn bad_upstream_tls_files_are_refused_by_index_and_key() {
    let pki = Pki::new("check-config");
    let (cert, key) = pki.issue("gw", &["gw"]).paths();
    let dir = tempfile::tempdir().unwrap();
    let (garbage, missing) = bad_files(&dir);
    // A good upstream first, so the bad one is `upstreams[1]`.
    let with = |settings: &str| {
        format!(
            "[[upstreams]]\nname = \"ok\"\nurl = \"https://ok.internal/rpc\"\ndialect = \"jsonrpc\"\n\
             ca_file = {}\nclient_cert = {}\nclient_key = {}\n\n\
             [[upstreams]]\nname = \"bad\"\nurl = \"https://bad.internal/rpc\"\ndialect = \"jsonrpc\"\n\
             {settings}\n",
            toml_str(&pki.ca_file()),
            toml_str(&cert),
            toml_str(&key),
        )
    };
    let (ok, _, err) = check_config(Some(&with("")), &[]);
    assert!(ok, "{err}");

    refused(
        &with(&format!("ca_file = {}", toml_str(&garbage))),
        "upstreams[1].ca_file",
        &garbage,
    );
    refused(
        &with(&format!("ca_file = {}", toml_str(&missing))),
        "upstreams[1].ca_file",
        &missing,
    );
    refused(
        &with(&format!("client_key = {}", toml_str(&key))),
        "upstreams[1].client_key",
        "set together",
    );
    refused(
        &with(&format!(
            "client_cert = {}\nclient_key = {}",
            toml_str(&cert),
            toml_str(&garbage)
        )),
        "upstreams[1].client_key",
        &garbage,
    );
    refused(
        &with(&format!(
            "client_cert = {}\nclient_key = {}",
            toml_str(&cert),
            toml_str(&cert)
        )),
        "upstreams[1].client_key",
        &cert,
    );
}

#[test]
fn an_unknown_log_format_and_bad_rpc_paths_are_refused_by_key() {
    refused("[log]\nformat = \"xml\"\n", "log.format", "xml");
    refused(
        "[server]\nrpc_paths = [\"/a2a\", \"rpc\", \"/healthz\"]\n",
        "server.rpc_paths[1]",
        "must be an absolute path",
    );
    refused(
        "[server]\nrpc_paths = [\"/a2a\", \"rpc\", \"/healthz\"]\n",
        "server.rpc_paths[2]",
        "is a route of the gateway's own",
    );
}

/// Two file paths in `dir` no PEM loader takes: a file that is not PEM, and one that is not
/// there.
fn bad_files(dir: &tempfile::TempDir) -> (String, String) {
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "this is not PEM\n").unwrap();
    let missing = dir.path().join("missing.pem");
    (
        garbage.to_string_lossy().into_owned(),
        missing.to_string_lossy().into_owned(),
    )
}

#[test]
fn bad_tracing_keys_are_refused_by_key_and_export_headers_never_printed() {
    refused(
        "[tracing]\notlp_endpoint = \"udp://collector:4317\"\n",
        "tracing.otlp_endpoint",
        "grpc://host:port",
    );
    refused(
        "[tracing]\nsample_ratio = 2.0\n",
        "tracing.sample_ratio",
        "between 0 and 1",
    );
    refused(
        "[tracing]\nqueue_max = 0\n",
        "tracing.queue_max",
        "1 to 1048576",
    );
    refused(
        "[tracing]\nexport_interval_ms = 1\n",
        "tracing.export_interval_ms",
        "10 to 60000",
    );
    let good = "[tracing]\notlp_endpoint = \"http://u:pw@127.0.0.1:4318\"\n\
                headers = { authorization = \"Bearer collector-secret\" }\n";
    let (ok, out, err) = check_config(Some(good), &[]);
    assert!(ok, "{err}");
    assert!(
        out.contains("[tracing.headers]") && out.contains("authorization = \"***\""),
        "{out}"
    );
    assert!(
        !out.contains("collector-secret") && !out.contains(":pw@"),
        "{out}"
    );
}
