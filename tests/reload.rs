//! Reloading the running binary's configuration: SIGHUP and `wiregate reload` swap a route
//! while an SSE subscriber stays connected and its sid context keeps working; a broken file is
//! refused with its key paths and the running configuration kept. The log is JSON, with one
//! access line per request and no credential in it. A call in flight during a reload is answered
//! on the configuration it started with; CORS and a pass-through added by a reload serve the next
//! request; what only a restart applies is logged as such while the old listener serves on.
//! `tls_listener`: `wiregate reload` to a listener that requires client certificates. `live`:
//! the running server's gateway is the reloaded one.
#![forbid(unsafe_code)]

#[path = "reload/live.rs"]
mod live;
mod support;
#[path = "reload/tls_listener.rs"]
mod tls_listener;

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{json, Value};

use support::{until_true, GatewayProcess, BIN};

/// How long any one condition may take to come true.
const WAIT: Duration = Duration::from_secs(15);

/// [`plain`] with the access log on and the demo sid bridged (its contexts must outlive a
/// reload).
fn config(route_to: &str, a: &str, b: &str) -> String {
    let rest = format!(
        "access = true\n\n[sid]\nenabled = true\ncommand = [\"{BIN}\", \"demo-sid\", \"--raw\"]\n"
    );
    plain(route_to, a, b, "", &rest)
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

/// The binary serving `--config path` on an ephemeral port, its JSON log gathered line by line.
struct Running {
    process: GatewayProcess,
    /// The address it listens on.
    addr: String,
    url: String,
}

impl Running {
    async fn start(path: &std::path::Path) -> Running {
        let mut running = Running {
            process: GatewayProcess::spawn(|c| c.arg("--config").arg(path)),
            addr: String::new(),
            url: String::new(),
        };
        until_true("the listening line", WAIT, async || {
            running.log_has("wiregate listening")
        })
        .await;
        let listening = running.lines_with("wiregate listening").remove(0);
        running.addr = listening["addr"].as_str().unwrap().to_owned();
        running.url = format!("http://{}", running.addr);
        running
    }

    fn log_has(&self, needle: &str) -> bool {
        self.process
            .log
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(needle))
    }

    /// The JSON log lines whose message is `message`.
    fn lines_with(&self, message: &str) -> Vec<Value> {
        self.process
            .log
            .lock()
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).expect("JSON log lines"))
            .filter(|v| v["message"] == message)
            .collect()
    }

    /// `wiregate reload --url` against it: what the gateway answered, and whether it exited 0.
    async fn reload(&self) -> (bool, Value) {
        let out = tokio::process::Command::new(BIN)
            .args(["reload", "--url", &self.url])
            .output()
            .await
            .unwrap();
        let said = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        (out.status.success(), said)
    }
}

fn hangup(process: &GatewayProcess) {
    let ok = Command::new("kill")
        .args(["-HUP", &process.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

#[tokio::test]
async fn a_reload_swaps_routes_keeps_subscribers_and_refuses_a_broken_file() {
    let (a, b) = (
        support::named("A").run().await,
        support::named("B").run().await,
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, config("a", &a.url(), &b.url())).unwrap();
    let running = Running::start(&path).await;
    let (process, url) = (&running.process, running.url.clone());
    let log_has = |needle: &str| running.log_has(needle);
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
    hangup(process);
    until_true("calls routed to B", WAIT, async || {
        via(&http, &url).await == "B"
    })
    .await;
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
    hangup(process);
    until_true("the refusal in the log", WAIT, async || {
        log_has("reload refused")
    })
    .await;
    until_true("each key path", WAIT, async || {
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
        .header("x-forwarded-for", "203.0.113.5")
        .body(json!({"jsonrpc": "2.0", "id": 3, "method": "m"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(traced.status(), StatusCode::OK);

    // The access lines: JSON, one per request, the fields named, no credential. (A stream's
    // line is written when it ends.)
    drop(events);
    until_true("the stream's access line", WAIT, async || {
        log_has(&format!("/contexts/{ctx}/events"))
    })
    .await;
    let lines = running.process.log.lock().unwrap().clone();
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
    assert_eq!(rpc["client"], "127.0.0.1");
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
    assert_eq!(
        traced["client"], "127.0.0.1",
        "an untrusted peer's X-Forwarded-For is not believed"
    );
    assert!(access
        .iter()
        .any(|v| v["path"] == format!("/contexts/{ctx}/events")));
}

/// Upstreams `a` and `b` (JSON-RPC), every method routed to `route_to`, a JSON log; `server`
/// adds to `[server]`, `rest` adds sections.
fn plain(route_to: &str, a: &str, b: &str, server: &str, rest: &str) -> String {
    let text = format!(
        r#"
[server]
listen = "127.0.0.1:0"
{server}

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

[log]
format = "json"
{rest}
"#
    );
    support::schema::check_toml(&text);
    text
}

/// A JSON-RPC upstream answering `{"via": "A"}` only once `gate` opens; `arrived` is told of each
/// call as it comes in.
async fn gated(
    gate: Arc<tokio::sync::Semaphore>,
    arrived: tokio::sync::mpsc::UnboundedSender<()>,
) -> String {
    let app = axum::Router::new().route(
        "/rpc",
        axum::routing::post(move |body: axum::body::Bytes| {
            let (gate, arrived) = (gate.clone(), arrived.clone());
            async move {
                let req: Value = serde_json::from_slice(&body).unwrap();
                let _ = arrived.send(());
                let _permit = gate.acquire().await.unwrap();
                let answer = json!({"jsonrpc": "2.0", "id": req["id"], "result": {"via": "A"}});
                ([("content-type", "application/json")], answer.to_string())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/rpc")
}

#[tokio::test]
async fn a_call_in_flight_finishes_on_the_configuration_it_started_with() {
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let (arrived_tx, mut arrived) = tokio::sync::mpsc::unbounded_channel();
    let a = gated(gate.clone(), arrived_tx).await;
    let b = support::named("B").run().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, plain("a", &a, &b.url(), "", "")).unwrap();
    let running = Running::start(&path).await;
    let http = reqwest::Client::new();

    // A call routed to A, held there until the gate opens.
    let first = tokio::spawn({
        let (http, url) = (http.clone(), running.url.clone());
        async move { via(&http, &url).await }
    });
    tokio::time::timeout(Duration::from_secs(10), arrived.recv())
        .await
        .expect("the first call reaches A");

    // The reload routes every method to B; the next call goes there at once.
    std::fs::write(&path, plain("b", &a, &b.url(), "", "")).unwrap();
    let (ok, said) = running.reload().await;
    assert!(ok, "{said}");
    assert_eq!(said["reloaded"], true);
    assert_eq!(via(&http, &running.url).await, "B");
    assert!(!first.is_finished(), "the first call is still waiting on A");

    // The call in flight is answered by A, the upstream of the configuration it started with.
    gate.add_permits(1);
    let answered = tokio::time::timeout(Duration::from_secs(10), first)
        .await
        .expect("the held call is answered once A answers")
        .unwrap();
    assert_eq!(answered, "A");
    assert_eq!(
        b.seen().len(),
        1,
        "B saw only the call made after the reload"
    );
    assert!(arrived.try_recv().is_err(), "A saw only the first call");
}

#[tokio::test]
async fn settings_only_a_restart_applies_are_logged_as_such_and_the_old_listener_serves() {
    let (a, b) = (
        support::named("A").run().await,
        support::named("B").run().await,
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, plain("a", &a.url(), &b.url(), "", "")).unwrap();
    let running = Running::start(&path).await;
    let http = reqwest::Client::new();
    assert_eq!(via(&http, &running.url).await, "A");

    // A new listen address (nothing will listen there), another shutdown grace, a cluster; and
    // the route moved to B, which a reload does apply.
    // (An ephemeral port, free again once this listener is dropped.)
    let moved = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let server = "shutdown_grace_ms = 1234";
    // The cluster is never dialled: a reload does not start one.
    let rest = "[cluster]\nredis = \"redis://127.0.0.1:9/0\"\n";
    let text = plain("b", &a.url(), &b.url(), server, rest).replace("127.0.0.1:0", &moved);
    std::fs::write(&path, text).unwrap();
    let (ok, said) = running.reload().await;
    assert!(ok, "{said}");
    assert_eq!(
        said,
        json!({"reloaded": true, "errors": [],
            "restart_needed": ["server.listen", "server.shutdown_grace_ms", "cluster"]})
    );
    const RESTART: &str = "changed in the configuration; takes effect after a restart";
    until_true("the warnings", WAIT, async || {
        running.lines_with(RESTART).len() == 3
    })
    .await;
    let warned: Vec<Value> = running
        .lines_with(RESTART)
        .into_iter()
        .map(|l| l["key"].clone())
        .collect();
    assert_eq!(
        warned,
        [
            json!("server.listen"),
            json!("server.shutdown_grace_ms"),
            json!("cluster")
        ]
    );

    // Still served on the address it started on, with the new route; nothing at the new one.
    assert_eq!(via(&http, &running.url).await, "B");
    assert!(tokio::net::TcpStream::connect(&moved).await.is_err());

    // A second reload of the same file says it again: the running listener is still the old one.
    let (ok, said) = running.reload().await;
    assert!(ok, "{said}");
    assert_eq!(said["restart_needed"][0], "server.listen");
    until_true("the warnings logged again", WAIT, async || {
        running.lines_with(RESTART).len() == 6
    })
    .await;
}

/// A server answering every path with `passed <path>` (a legacy server's own pages).
async fn pages() -> String {
    let app = axum::Router::new()
        .fallback(|uri: axum::http::Uri| async move { format!("passed {}", uri.path()) });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}/")
}

#[tokio::test]
async fn a_reload_that_adds_cors_and_a_passthrough_serves_them_to_the_next_request() {
    let (a, b) = (
        support::named("A").run().await,
        support::named("B").run().await,
    );
    let legacy = pages().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, plain("a", &a.url(), &b.url(), "", "")).unwrap();
    let running = Running::start(&path).await;
    let http = reqwest::Client::new();
    const APP: &str = "https://app.example";
    let preflight = || {
        http.request(reqwest::Method::OPTIONS, format!("{}/rpc", running.url))
            .header("origin", APP)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let page = || {
        http.get(format!("{}/files/report.txt", running.url))
            .header("origin", APP)
            .send()
    };
    let allowed = |r: &reqwest::Response| {
        r.headers()
            .get("access-control-allow-origin")
            .map(|v| v.to_str().unwrap().to_owned())
    };

    // Before: no CORS, no pass-through.
    assert_eq!(allowed(&preflight().await.unwrap()), None);
    assert_eq!(page().await.unwrap().status(), StatusCode::NOT_FOUND);

    let rest = format!(
        "[server.cors]\nallow_origins = [\"{APP}\"]\n\n[[upstreams]]\nname = \"legacy\"\n\
         url = \"{legacy}\"\ndialect = \"legacy\"\n\n[[passthrough]]\nprefix = \"/files\"\n\
         upstream = \"legacy\"\n"
    );
    std::fs::write(&path, plain("a", &a.url(), &b.url(), "", &rest)).unwrap();
    let (ok, said) = running.reload().await;
    assert!(ok, "{said}");
    assert_eq!(said["restart_needed"], json!([]));

    // After: the preflight is granted, and the page is passed through with CORS headers.
    let granted = preflight().await.unwrap();
    assert!(granted.status().is_success(), "{}", granted.status());
    assert_eq!(allowed(&granted).as_deref(), Some(APP));
    let got = page().await.unwrap();
    assert_eq!(got.status(), StatusCode::OK);
    assert_eq!(allowed(&got).as_deref(), Some(APP));
    assert_eq!(got.text().await.unwrap(), "passed /files/report.txt");
    // Another origin is still refused.
    let other = http
        .get(format!("{}/files/x", running.url))
        .header("origin", "https://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(allowed(&other), None);
}
