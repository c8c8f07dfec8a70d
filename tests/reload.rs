//! Reloading the running binary's configuration: SIGHUP and `wiregate reload` swap a route
//! while an SSE subscriber stays connected and its sid context keeps working; a broken file is
//! refused with its key paths and the running configuration kept. The log is JSON, with one
//! access line per request and no credential in it.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_wiregate");

struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A JSON-RPC upstream that answers `{"via": name}`.
async fn named(name: &'static str) -> support::Listening {
    support::upstream(move |req| {
        let body = json!({"jsonrpc": "2.0", "id": req["id"], "result": {"via": name}});
        (axum::http::StatusCode::OK, body.to_string())
    })
    .run()
    .await
}

fn config(route_to: &str, a: &str, b: &str) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:0"

[[upstreams]]
name = "a"
url = "{a}"
dialect = "jsonrpc"

[[upstreams]]
name = "b"
url = "{b}"
dialect = "jsonrpc"

[[routes]]
methods = ["*"]
upstream = "{route_to}"

[sid]
enabled = true
command = ["{BIN}", "demo-sid", "--raw"]

[log]
format = "json"
access = true
"#
    )
}

/// A client's W3C `traceparent` (its trace id is digits 3..35).
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

async fn via(http: &reqwest::Client, url: &str) -> String {
    let r = http
        .post(format!("{url}/rpc"))
        .header("content-type", "application/json")
        .header("authorization", "Bearer SECRET-RELOAD-TOKEN")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "m"}).to_string())
        .send()
        .await
        .unwrap();
    let v: Value = r.json().await.unwrap();
    v["result"]["via"].as_str().unwrap_or("?").to_owned()
}

async fn until(what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn hangup(child: &Child) {
    let ok = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

#[tokio::test]
async fn a_reload_swaps_routes_keeps_subscribers_and_refuses_a_broken_file() {
    let (a, b) = (named("A").await, named("B").await);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, config("a", &a.url(), &b.url())).unwrap();
    let mut child = Command::new(BIN)
        .arg("--config")
        .arg(&path)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let guard = Guard(child);
    let log = Arc::new(Mutex::new(Vec::<String>::new()));
    let lines = log.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            lines.lock().unwrap().push(line);
        }
    });
    let log_has = |needle: &str| log.lock().unwrap().iter().any(|l| l.contains(needle));
    until("the listening line", async || log_has("wiregate listening")).await;
    let listening: Value = log
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.contains("wiregate listening"))
        .map(|l| serde_json::from_str(l).expect("JSON log lines"))
        .unwrap();
    let url = format!("http://{}", listening["addr"].as_str().unwrap());
    let http = reqwest::Client::new();
    assert_eq!(via(&http, &url).await, "A");

    // A sid context, and a subscriber to its stream that stays connected throughout.
    let send = |ctx: Option<String>| {
        let mut params =
            json!({"message": {"role": "user", "parts": [{"kind": "text", "text": "hello"}]}});
        if let Some(c) = ctx {
            params["contextId"] = json!(c);
        }
        http.post(format!("{url}/rpc"))
            .header("content-type", "application/json")
            .body(
                json!({"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": params})
                    .to_string(),
            )
            .send()
    };
    let task: Value = send(None).await.unwrap().json().await.unwrap();
    let ctx = task["result"]["contextId"].as_str().unwrap().to_owned();
    let resp = http
        .get(format!("{url}/contexts/{ctx}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut events = eventsource_stream::EventStream::new(resp.bytes_stream());
    let first = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let first_id: u64 = first.id.parse().unwrap();

    // SIGHUP with the route moved to b.
    std::fs::write(&path, config("b", &a.url(), &b.url())).unwrap();
    hangup(&guard.0);
    until("calls routed to B", async || via(&http, &url).await == "B").await;
    assert!(log_has("configuration reloaded"));

    // The subscriber is still there: a second turn in the same context reaches it.
    let again: Value = send(Some(ctx.clone())).await.unwrap().json().await.unwrap();
    assert_eq!(again["result"]["contextId"], ctx.as_str());
    let later = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let e = events.next().await.unwrap().unwrap();
            let id: u64 = e.id.parse().unwrap();
            if id > first_id && e.data.contains(again["result"]["id"].as_str().unwrap()) {
                return id;
            }
        }
    })
    .await
    .expect("the subscriber connected before the reload sees the new turn");
    assert!(later > first_id);

    // A broken file: refused, every error logged with its key path, the running one kept.
    std::fs::write(&path, config("nope", &a.url(), "ftp://b")).unwrap();
    hangup(&guard.0);
    until("the refusal in the log", async || log_has("reload refused")).await;
    until("each key path", async || {
        log_has("routes[0].upstream") && log_has("upstreams[1].url")
    })
    .await;
    assert_eq!(via(&http, &url).await, "B");

    // `wiregate reload` says the same, and exits non-zero.
    let out = Command::new(BIN)
        .args(["reload", "--url", &url])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["reloaded"], false);
    assert!(!said["errors"].as_array().unwrap().is_empty(), "{said}");
    // Fixed (route back to a): `wiregate reload` applies it.
    std::fs::write(&path, config("a", &a.url(), &b.url())).unwrap();
    let out = Command::new(BIN)
        .args(["reload", "--url", &url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["reloaded"], true);
    assert_eq!(via(&http, &url).await, "A");
    // A call in a client's trace: its access line names that trace.
    let traced = http
        .post(format!("{url}/rpc"))
        .header("content-type", "application/json")
        .header("traceparent", TRACEPARENT)
        .body(json!({"jsonrpc": "2.0", "id": 3, "method": "m"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(traced.status(), StatusCode::OK);

    // The access lines: JSON, one per request, the fields named, no credential. (A stream's
    // line is written when it ends.)
    drop(events);
    until("the stream's access line", async || {
        log_has(&format!("/contexts/{ctx}/events"))
    })
    .await;
    let lines = log.lock().unwrap().clone();
    for l in &lines {
        serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{e}: {l}"));
        assert!(!l.contains("SECRET-RELOAD-TOKEN"), "{l}");
    }
    let access: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["message"] == "access")
        .collect();
    let rpc = access
        .iter()
        .find(|v| v["path"] == "/rpc" && v["upstream"] == "b")
        .expect("an access line of a call routed to b");
    assert_eq!(rpc["method"], "POST");
    assert_eq!(rpc["status"], 200);
    assert_eq!(rpc["dialect"], "jsonrpc");
    assert!(rpc["bytes"].as_u64().unwrap() > 0);
    // A call that came without a trace starts one here.
    let started = rpc["trace_id"].as_str().unwrap();
    assert!(
        started.len() == 32 && started.bytes().all(|b| b.is_ascii_hexdigit()),
        "{started}"
    );
    assert_ne!(started, &TRACEPARENT[3..35]);
    let traced = access
        .iter()
        .find(|v| {
            v["path"] == "/rpc" && v["upstream"] == "a" && v["trace_id"] == TRACEPARENT[3..35]
        })
        .unwrap_or_else(|| panic!("an access line with the client's trace id: {access:?}"));
    assert_eq!(traced["status"], 200);
    assert!(access
        .iter()
        .any(|v| v["path"] == format!("/contexts/{ctx}/events")));
}
