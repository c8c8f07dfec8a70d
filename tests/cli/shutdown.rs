//! Shutdown, in one place: SIGTERM lets in-flight calls finish and the process exit 0; a hung
//! sid turn and a slow call cannot keep it past `server.shutdown_grace_ms` (the real binary);
//! and every sid child is stopped, no orphans and no zombies, the streams ended.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{self, gateway, legacy_echo, text_message};
use crate::{legacy_upstream_config, serve};

const T: Duration = Duration::from_secs(10);

#[tokio::test]
async fn sigterm_finishes_in_flight_calls_then_exits_cleanly() {
    let slow = support::legacy_echo()
        .delay(Duration::from_millis(800))
        .run()
        .await;
    let (mut guard, url, log) = serve(&legacy_upstream_config(&slow.url(), ""));
    let call = support::spawn_post(
        &reqwest::Client::new(),
        format!("{url}/rpc"),
        json!({"jsonrpc":"2.0","id":"slow","method":"slow"}),
    );
    // Wait until the upstream holds the call, then ask the gateway to stop.
    let mut waited = 0;
    while slow.seen().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += 10;
        assert!(waited < 10_000, "the call never reached the upstream");
    }
    let pid = guard.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let answer = call.await.unwrap();
    assert_eq!(
        answer,
        json!({"jsonrpc": "2.0", "id": "slow",
               "result": {"op": "slow", "params": {}, "via": "legacy"}}),
        "the in-flight call finished"
    );
    let status = guard.0.wait().unwrap();
    assert!(
        status.success(),
        "exits 0 after a graceful shutdown: {status}\n{}",
        log.lock().unwrap()
    );
    assert!(
        log.lock().unwrap().contains("finishing in-flight calls"),
        "the signal was what stopped it"
    );
}

/// A free port on loopback (bound, read and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn sigterm_exits_within_the_grace_with_a_hung_turn_and_a_slow_call() {
    let slow = legacy_echo().delay(Duration::from_secs(60)).run().await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"
[server]
listen = "127.0.0.1:{port}"
shutdown_grace_ms = 2000

[[upstreams]]
name = "slow"
url = "{}"
dialect = "legacy"
timeout_ms = 60000

[[routes]]
methods = ["*"]
upstream = "slow"

[sid]
enabled = true
command = [{:?}, "--raw", "--tag", "hard-term"]
"#,
        slow.url(),
        support::fake_sid()
    );
    let path = dir.path().join("gateway.toml");
    support::schema::check_toml(&config);
    std::fs::write(&path, config).unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_wiregate"))
        .arg("--config")
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    let up = Instant::now();
    while http.get(format!("{base}/healthz")).send().await.is_err() {
        assert!(up.elapsed() < T, "the gateway did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A turn that never ends...
    let stream = http
        .post(format!("{base}/rpc"))
        .header("content-type", "application/json")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": text_message("hang")}).to_string())
        .send()
        .await
        .unwrap();
    let mut stream = support::SseReader::new(stream);
    assert!(stream.next(T).await.is_some(), "the turn started");
    // ...and a call the upstream holds.
    let call = support::spawn_post(
        &http,
        format!("{base}/rpc"),
        json!({"jsonrpc": "2.0", "id": 2, "method": "echo"}),
    );
    while slow.seen().is_empty() {
        assert!(up.elapsed() < T, "the call did not reach the upstream");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let term = Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(term.elapsed() < T, "still running after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let took = term.elapsed();
    // The grace (2 s), and a margin to kill and reap sid and end the runtime; the calls' grace
    // and sid's stop run side by side, so not the sum of both.
    assert!(
        took >= Duration::from_millis(1900),
        "the grace is kept: {took:?}"
    );
    assert!(took < Duration::from_millis(3500), "took {took:?}");
    assert!(status.success(), "{status}");
    call.abort();
}

#[tokio::test]
async fn shutdown_stops_every_child_even_a_hung_one_and_ends_the_streams() {
    let tag = format!("shutdown-{}", uuid::Uuid::new_v4());
    let mut gw = gateway().sid(&tag).start().await;
    let idle = gw.call("message/send", text_message("hello")).await;
    let waiting = gw.call("message/send", text_message("use a tool")).await;
    assert_eq!(waiting["result"]["status"]["state"], "input-required");
    let mut hung = gw.stream_message(text_message("hang")).await;
    hung.next(T).await.expect("the hung turn started");
    assert_eq!(
        support::processes_tagged(&tag).len(),
        3,
        "three contexts, three children"
    );
    let ctx = idle["result"]["contextId"].as_str().unwrap().to_owned();
    let mut events = gw.sse_get(&format!("/contexts/{ctx}/events"), None).await;
    events.until_final(T).await;

    gw.stop(Duration::from_secs(5)).await;
    assert!(events.next(T).await.is_none(), "the context stream ended");
    // The hung turn's stream ends too (collect panics if it does not within T).
    hung.collect(T).await;
    let mut left = support::processes_tagged(&tag);
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = support::processes_tagged(&tag);
    }
    assert!(
        left.is_empty(),
        "children left behind (pid, state): {left:?}"
    );
}
