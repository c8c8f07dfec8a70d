//! The `wiregate` binary as a real child process: configuration precedence, `check-config`,
//! `--demo`, and logs that never carry credentials; `refusals` checks each bad value of the TLS
//! and event-feed keys is refused with its key path; `config_schema` the generated reference and
//! schema; `docs` that README's and the guides' configurations load and their commands run;
//! `shutdown` how the process stops.
#![forbid(unsafe_code)]

#[path = "cli/config_schema.rs"]
mod config_schema;
#[path = "cli/docs.rs"]
mod docs;
#[path = "cli/refusals.rs"]
mod refusals;
#[path = "cli/shutdown.rs"]
mod shutdown;
mod support;

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_wiregate");

/// A file of the repository, by its path from the top.
fn read(rel: &str) -> String {
    let path = format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Kills the child when the test ends, however it ends.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn check_config(file: Option<&str>, env: &[(&str, &str)]) -> (bool, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir.path()).arg("check-config").env_clear();
    if let Some(text) = file {
        let path = dir.path().join("custom.toml");
        std::fs::write(&path, text).unwrap();
        cmd.arg("--config").arg(&path);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn effective(stdout: &str) -> toml::Value {
    toml::from_str(stdout).unwrap_or_else(|e| panic!("check-config prints TOML ({e}):\n{stdout}"))
}

#[test]
fn defaults_then_file_then_environment() {
    let (ok, out, _) = check_config(None, &[]);
    assert!(ok);
    assert_eq!(
        effective(&out)["server"]["listen"].as_str(),
        Some("127.0.0.1:8080")
    );

    let file = "[server]\nlisten = \"127.0.0.1:9001\"\nmax_body_bytes = 2048\n";
    let (ok, out, _) = check_config(Some(file), &[]);
    assert!(ok);
    let c = effective(&out);
    assert_eq!(c["server"]["listen"].as_str(), Some("127.0.0.1:9001"));
    assert_eq!(c["server"]["max_body_bytes"].as_integer(), Some(2048));

    let (ok, out, _) = check_config(Some(file), &[("WIREGATE_SERVER__LISTEN", "127.0.0.1:9002")]);
    assert!(ok);
    let c = effective(&out);
    assert_eq!(
        c["server"]["listen"].as_str(),
        Some("127.0.0.1:9002"),
        "env beats the file"
    );
    assert_eq!(
        c["server"]["max_body_bytes"].as_integer(),
        Some(2048),
        "the file beats defaults"
    );
}

#[test]
fn every_error_is_reported_with_its_key_path() {
    let file = r#"
[[upstreams]]
name = "a"
url = "ftp://nowhere"
dialect = "legacy"
timeout_ms = 0

[[routes]]
methods = ["*"]
upstream = "b"

[legacy]
sunset = "someday"
"#;
    let (ok, _, err) = check_config(Some(file), &[]);
    assert!(!ok);
    for key in [
        "upstreams[0].url",
        "upstreams[0].timeout_ms",
        "routes[0].upstream",
        "legacy.sunset",
    ] {
        assert!(err.contains(key), "{key} not named in:\n{err}");
    }
    let (ok, _, err) = check_config(
        Some("[server]\nmax_connections = 0\nheader_read_timeout_ms = 0\n"),
        &[],
    );
    assert!(!ok);
    for key in ["server.max_connections", "server.header_read_timeout_ms"] {
        assert!(err.contains(key), "{key} not named in:\n{err}");
    }
    let (ok, _, err) = check_config(Some("[server]\nlisten = 5\n"), &[]);
    assert!(!ok);
    assert!(err.contains("server.listen"), "{err}");
    let (ok, _, err) = check_config(Some("[server]\nlisten = \"127.0.0.1:1\"\nlisen = 1\n"), &[]);
    assert!(!ok, "unknown keys are errors, not silently ignored");
    assert!(err.contains("lisen"), "{err}");
}

#[test]
fn check_config_masks_credentials() {
    let file = r#"
[[upstreams]]
name = "a"
url = "http://svc:hunter2@127.0.0.1:9000/a2a"
dialect = "legacy"
"#;
    let (ok, out, _) = check_config(Some(file), &[]);
    assert!(ok);
    assert!(!out.contains("hunter2"), "{out}");
    assert!(out.contains("http://svc:***@127.0.0.1:9000/a2a"), "{out}");
}

#[test]
fn the_shipped_gateway_toml_is_valid() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/gateway.toml")).unwrap();
    let (ok, out, err) = check_config(Some(&text), &[]);
    assert!(ok, "{err}");
    assert_eq!(
        effective(&out)["upstreams"][0]["url"].as_str(),
        Some("http://127.0.0.1:9000/a2a")
    );
}

/// Starts `wiregate --demo` on an ephemeral port; returns it, its address, the context id its
/// sid lines name, and its stderr.
fn start_demo(extra_env: &[(&str, &str)]) -> (Guard, String, String, std::process::ChildStderr) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir.path())
        .args(["--demo", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut out = BufReader::new(stdout);
    let mut printed = String::new();
    while !printed.contains("# metrics") {
        assert!(
            out.read_line(&mut printed).unwrap() > 0,
            "demo output ended early:\n{printed}"
        );
    }
    let url = printed
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {printed:?}"))
        .to_owned();
    let context = printed
        .split("/contexts/")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no sid context in {printed:?}"))
        .to_owned();
    (Guard(child), url, context, stderr)
}

#[tokio::test]
async fn demo_serves_and_its_curl_lines_answer() {
    let (_guard, url, context, _stderr) = start_demo(&[]);
    let http = reqwest::Client::new();
    let post = |body: serde_json::Value| {
        http.post(format!("{url}/rpc"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let a: serde_json::Value = post(json!({"jsonrpc":"2.0","id":1,"method":"_cleveragents/plan/status","params":{"plan_id":"P1"}}))
        .await.unwrap().json().await.unwrap();
    assert_eq!(a["result"]["state"], "running");
    let b: serde_json::Value = post(json!({"jsonrpc":"2.0","id":"q","method":"_cleveragents/plan/status","params":{"plan_id":"nope"}}))
        .await.unwrap().json().await.unwrap();
    assert_eq!(b["error"]["code"], -32001);
    let c: serde_json::Value = post(json!([{"jsonrpc":"2.0","id":1,"method":"echo","params":{"hi":1}},{"jsonrpc":"2.0","method":"echo"},{"jsonrpc":"2.0","id":2,"method":"session.create"}]))
        .await.unwrap().json().await.unwrap();
    assert_eq!(c.as_array().unwrap().len(), 2);
    assert_eq!(c[0]["result"], json!({"hi": 1}));
    // The sid line: a streamed turn in the context the demo started.
    let stream = post(json!({"jsonrpc":"2.0","id":1,"method":"message/stream","params":{"message":{"role":"user","parts":[{"kind":"text","text":"hi there"}]},"contextId":context}}))
        .await.unwrap();
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let text = stream.text().await.unwrap();
    assert!(text.contains("event: TaskArtifactUpdateEvent"), "{text}");
    assert!(text.contains(r#""state":"completed""#), "{text}");
}

#[tokio::test]
async fn demo_a2a_lines_serve_the_card_and_a_spec_stream() {
    let (_guard, url, _context, _stderr) = start_demo(&[]);
    let card: serde_json::Value = reqwest::get(format!("{url}/.well-known/agent-card.json"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(card["supportedInterfaces"][0]["url"], format!("{url}/"));
    let resp = reqwest::Client::new()
        .post(format!("{url}/rpc"))
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(json!({"jsonrpc":"2.0","id":"a1","method":"SendStreamingMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi there"}]}}}).to_string())
        .send()
        .await
        .unwrap();
    let mut sse = support::SseReader::new(resp);
    let mut last = None;
    while let Some(e) = sse.next(Duration::from_secs(10)).await {
        assert_eq!(e.data["id"], "a1");
        last = Some(e.data);
    }
    let last = last.expect("events");
    assert_eq!(
        last["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[tokio::test]
async fn credentials_never_reach_the_log() {
    let (guard, url, _context, mut stderr) =
        start_demo(&[("RUST_LOG", "trace"), ("WIREGATE_LOG__ACCESS", "true")]);
    let http = reqwest::Client::new();
    http.post(format!("{url}/rpc"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer SECRET-HEADER-TOKEN")
        .body(json!({"jsonrpc":"2.0","id":1,"method":"echo"}).to_string())
        .send()
        .await
        .unwrap();
    http.post(format!("{url}/rpc"))
        .header("content-type", "application/json")
        .body(
            json!({"a2a_version":"1.0","request_id":"r","operation":"nope",
                     "auth":{"scheme":"bearer","token":"SECRET-BODY-TOKEN"}})
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(guard);
    let mut log = String::new();
    stderr.read_to_string(&mut log).unwrap();
    assert!(
        log.lines()
            .any(|l| l.contains("access") && l.contains("path=/rpc") && l.contains("status=")),
        "the access line is logged:\n{log}"
    );
    assert!(!log.contains("SECRET-HEADER-TOKEN"), "{log}");
    assert!(!log.contains("SECRET-BODY-TOKEN"), "{log}");
}

/// Runs the binary with `config` (a gateway.toml's text) on an ephemeral port; returns it and
/// its base URL once it logs that it listens. Its log keeps being read (into the returned text).
fn serve(config: &str) -> (Guard, String, std::sync::Arc<std::sync::Mutex<String>>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    support::schema::check_toml(config);
    std::fs::write(&path, config).unwrap();
    let mut child = Command::new(BIN)
        .current_dir(dir.path())
        .arg("--config")
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .env_clear()
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let kept = log.clone();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if line.contains("wiregate listening") {
                let _ = tx.send(line.clone());
            }
            kept.lock().unwrap().push_str(&format!("{line}\n"));
        }
    });
    let guard = Guard(child);
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("no 'wiregate listening' line in:\n{}", log.lock().unwrap()));
    let addr = line
        .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == ':'))
        .find(|w| w.starts_with("127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    drop(dir);
    (guard, format!("http://{addr}"), log)
}

fn legacy_upstream_config(url: &str, extra: &str) -> String {
    format!(
        "[[upstreams]]\nname = \"up\"\nurl = \"{url}\"\ndialect = \"legacy\"\ntimeout_ms = 5000\n\n\
         [[routes]]\nmethods = [\"*\"]\nupstream = \"up\"\n\n{extra}"
    )
}

#[tokio::test]
async fn legacy_error_codes_are_read_from_the_configuration_file() {
    let up = support::upstream(|req| {
        let body = json!({"a2a_version": "1.0", "request_id": req["request_id"], "status": "error",
            "error": {"code": req["params"]["code"], "message": "m"}});
        (axum::http::StatusCode::OK, body.to_string())
    })
    .run()
    .await;
    // A new code, and a documented one moved.
    let extra = "[legacy.error_codes]\nQUOTA_EXCEEDED = -32010\nNOT_FOUND = -32044\n";
    let (_guard, url, _log) = serve(&legacy_upstream_config(&up.url(), extra));
    let http = reqwest::Client::new();
    let call = |body: serde_json::Value| {
        let http = http.clone();
        let url = url.clone();
        async move {
            let r = http
                .post(format!("{url}/rpc"))
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            r.json::<serde_json::Value>().await.unwrap()
        }
    };
    for (legacy, code) in [
        ("QUOTA_EXCEEDED", -32010),
        ("NOT_FOUND", -32044),
        ("AUTH_ERROR", -32002),
    ] {
        let a =
            call(json!({"jsonrpc": "2.0", "id": 1, "method": "fail", "params": {"code": legacy}}))
                .await;
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "m",
                   "data": {"legacyCode": legacy}}}),
            "{legacy}"
        );
    }
}

#[tokio::test]
async fn demo_events_line_shows_a_plans_life_cycle() {
    let (_guard, url, _context, _stderr) = start_demo(&[]);
    let resp = reqwest::get(format!("{url}/events?taskId=plan-1"))
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut sse = support::SseReader::new(resp);
    // The demo feed publishes one record every 700 ms: the whole life takes about 4 s.
    let got = sse.take(6, Duration::from_secs(15)).await;
    let seen: Vec<(&str, serde_json::Value)> = got
        .iter()
        .map(|e| (e.event.as_str(), e.data["params"].clone()))
        .collect();
    let status = "TaskStatusUpdateEvent";
    let artifact = "TaskArtifactUpdateEvent";
    assert_eq!(
        seen,
        vec![
            (status, json!({"taskId": "plan-1", "state": "submitted"})),
            (
                status,
                json!({"taskId": "plan-1", "state": "working", "phase": "planning"})
            ),
            (
                status,
                json!({"taskId": "plan-1", "state": "working", "phase": "applying"})
            ),
            (
                artifact,
                json!({"taskId": "plan-1", "checkpoint": "cp-1", "files": 3})
            ),
            (
                artifact,
                json!({"taskId": "plan-1", "resource": "src/main.rs"})
            ),
            (
                status,
                json!({"taskId": "plan-1", "state": "completed", "final": true})
            ),
        ]
    );
    let ids: Vec<u64> = got.iter().map(|e| e.id.parse().unwrap()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
}

#[test]
fn version_names_the_release_and_the_commit() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let expected_commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_owned())
        .unwrap_or_else(|| "unknown".into());
    assert_eq!(
        text.trim(),
        format!("wiregate {} ({expected_commit})", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn completions_cover_every_subcommand_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        for word in [
            "check-config",
            "migration",
            "reload",
            "completions",
            "config",
            "demo",
        ] {
            assert!(script.contains(word), "{shell} completion lacks {word}");
        }
    }
    let bad = Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2), "an unknown shell is refused");
}

#[tokio::test]
async fn the_demo_takes_sighup_without_ending_since_it_reloads_nothing() {
    let (guard, url, _context, _stderr) = start_demo(&[]);
    let pid = guard.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let health = reqwest::get(format!("{url}/healthz")).await.unwrap();
    assert_eq!(health.status(), 200, "still serving after SIGHUP");
}
