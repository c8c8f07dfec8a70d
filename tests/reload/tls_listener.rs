//! `wiregate reload` against a TLS listener that requires client certificates: https:// by
//! default, `--cacert`, `--cert`, `--key`, and the configuration's admin token.

use serde_json::{json, Value};

use crate::support::named;
use crate::{plain, support, until_true, Running, BIN, WAIT};

/// `wiregate` run with `args`: whether it exited 0, its stdout as JSON (null when it printed
/// none), its stderr.
async fn wiregate(args: &[&str]) -> (bool, Value, String) {
    let out = tokio::process::Command::new(BIN)
        .args(args)
        .output()
        .await
        .unwrap();
    let said = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), said, stderr)
}

#[tokio::test]
async fn wiregate_reload_reaches_a_tls_listener_that_requires_client_certificates() {
    let (a, b) = (named("A").run().await, named("B").run().await);
    let pki = support::pki::Pki::new("reload");
    let (cert, key) = pki.issue("gateway", &["127.0.0.1", "localhost"]).paths();
    let (client_cert, client_key) = pki.issue("operator", &["operator"]).paths();
    let other = support::pki::Pki::new("someone else");
    let ca = pki.ca_file();
    let server = format!("[server.tls]\ncert = {cert:?}\nkey = {key:?}\nclient_ca = {ca:?}\n");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    let path_str = path.to_str().unwrap().to_owned();
    // Admin tokens set: loopback needs one too.
    const TOKEN: &str = "reload-token-0123456789";
    let tokens = format!("admin_tokens = [\"{TOKEN}\"]");
    std::fs::write(&path, plain("a", &a.url(), &b.url(), &tokens, &server)).unwrap();
    let running = Running::start(&path).await;
    let https = format!("https://{}", running.addr);
    let flags = [
        "--cacert",
        ca.as_str(),
        "--cert",
        client_cert.as_str(),
        "--key",
        client_key.as_str(),
    ];

    // The URL by default: https:// (the configuration has [server.tls]) to server.listen, here
    // given as --listen since the file's port is 0; the token by default: the configuration's.
    let mut args = vec!["--config", &path_str, "--listen", &running.addr, "reload"];
    args.extend(flags);
    let (ok, said, err) = wiregate(&args).await;
    assert!(ok, "{err}");
    assert_eq!(said["reloaded"], true, "{said}");

    // The route moved to B, and applied over an explicit --url with an explicit --token (with no
    // --config this run reads ./gateway.toml, which sets no token); without the token, refused.
    std::fs::write(&path, plain("b", &a.url(), &b.url(), &tokens, &server)).unwrap();
    let mut args = vec!["reload", "--url", &https];
    args.extend(flags);
    let (ok, _, err) = wiregate(&args).await;
    assert!(!ok);
    assert!(err.contains("401"), "{err}");
    args.extend(["--token", TOKEN]);
    let (ok, said, err) = wiregate(&args).await;
    assert!(ok, "{err}");
    assert_eq!(
        said,
        json!({"reloaded": true, "errors": [], "restart_needed": []})
    );
    until_true("the two reloads logged", WAIT, async || {
        running.lines_with("configuration reloaded").len() == 2
    })
    .await;

    // Refused: without a client certificate; with a certificate of another CA; against another
    // CA's roots; and over http://.
    let foreign = other.issue("stranger", &["stranger"]).paths();
    let other_ca = other.ca_file();
    for (args, why) in [
        (vec!["--cacert", ca.as_str()], "no client certificate"),
        (
            vec![
                "--cacert",
                ca.as_str(),
                "--cert",
                foreign.0.as_str(),
                "--key",
                foreign.1.as_str(),
            ],
            "a client certificate of another CA",
        ),
        (
            vec![
                "--cacert",
                other_ca.as_str(),
                "--cert",
                client_cert.as_str(),
                "--key",
                client_key.as_str(),
            ],
            "the gateway verified against another CA",
        ),
    ] {
        let mut all = vec!["reload", "--url", &https];
        all.extend(args);
        let (ok, said, err) = wiregate(&all).await;
        assert!(!ok, "{why}: accepted: {said}");
        assert!(err.contains(&https), "{why}: {err}");
    }
    let plain_http = format!("http://{}", running.addr);
    let (ok, _, _) = wiregate(&["reload", "--url", &plain_http]).await;
    assert!(!ok, "plain HTTP to a TLS listener");
    assert_eq!(running.lines_with("configuration reloaded").len(), 2);

    // A bad file is named by its flag; --cert needs --key.
    let (ok, _, err) = wiregate(&[
        "reload",
        "--url",
        &https,
        "--cacert",
        &cert,
        "--cert",
        &client_cert,
        "--key",
        &ca,
    ])
    .await;
    assert!(!ok);
    assert!(err.contains("--key: "), "{err}");
    let (ok, _, err) = wiregate(&["reload", "--url", &https, "--cert", &client_cert]).await;
    assert!(!ok);
    assert!(err.contains("--key"), "{err}");
}
