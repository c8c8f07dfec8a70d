//! What systemd hears from the real binary (`Type=notify`), on a `NOTIFY_SOCKET` the test binds
//! as systemd does: `READY=1` once the listener answers, `RELOADING=1` then `READY=1` around a
//! SIGHUP reload, `STOPPING=1` on SIGTERM. Then the drain: `/readyz` answers 503 at once while
//! the listener goes on serving for `server.drain_ms`, and only then does it close.

use std::process::Command;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::net::UnixDatagram;

use crate::support::GatewayProcess;

/// The longest wait for one notification.
const WAIT: Duration = Duration::from_secs(15);

/// The next datagram on `socket`, as text.
async fn next(socket: &UnixDatagram, waiting_for: &str) -> String {
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(WAIT, socket.recv(&mut buf))
        .await
        .unwrap_or_else(|_| panic!("no {waiting_for} from the gateway within {WAIT:?}"))
        .unwrap();
    String::from_utf8_lossy(&buf[..n]).trim_end().to_owned()
}

fn signal(process: &GatewayProcess, name: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{name}"), &process.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill -{name}");
}

#[tokio::test]
async fn systemd_hears_ready_reloading_and_stopping_and_the_drain_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let socket_path = dir.path().join("notify");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    let config = dir.path().join("gateway.toml");
    let drain = Duration::from_millis(2000);
    std::fs::write(
        &config,
        format!(
            "[server]\nlisten = \"127.0.0.1:0\"\ndrain_ms = {}\nshutdown_grace_ms = 1000\n\n\
             [log]\nformat = \"json\"\n",
            drain.as_millis()
        ),
    )
    .unwrap();
    let process = GatewayProcess::spawn(|c| {
        c.env("NOTIFY_SOCKET", &socket_path)
            .arg("--config")
            .arg(&config)
    });

    // Ready: the listener answers by then.
    assert_eq!(next(&socket, "READY=1").await, "READY=1");
    let addr = process.listening_addr().await;
    let url = format!("http://{addr}");
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(format!("{url}{path}")).send();
    assert_eq!(get("/readyz").await.unwrap().status(), StatusCode::OK);

    // A reload: RELOADING=1 (with the monotonic time systemd 253 matches it by), then READY=1.
    signal(&process, "HUP");
    let reloading = next(&socket, "RELOADING=1").await;
    let lines: Vec<&str> = reloading.lines().collect();
    assert_eq!(lines[0], "RELOADING=1", "{reloading}");
    assert!(
        lines.iter().any(|l| l.starts_with("MONOTONIC_USEC=")),
        "{reloading}"
    );
    assert_eq!(next(&socket, "READY=1 after the reload").await, "READY=1");

    // SIGTERM: STOPPING=1, readiness off at once, everything else served through the drain.
    signal(&process, "TERM");
    let stopped_at = Instant::now();
    assert_eq!(next(&socket, "STOPPING=1").await, "STOPPING=1");
    let ready = get("/readyz").await.unwrap();
    assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        ready.json::<Value>().await.unwrap(),
        json!({"ready": false, "draining": true})
    );
    // New connections are still accepted and served, halfway through the drain.
    tokio::time::sleep(drain / 2).await;
    let fresh = reqwest::Client::new();
    let health = fresh.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
    assert!(
        stopped_at.elapsed() < drain,
        "the check ran within the drain"
    );
    // After it the listener closes.
    crate::support::until_true("the listener to close", WAIT, async || {
        reqwest::Client::new()
            .get(format!("{url}/healthz"))
            .send()
            .await
            .is_err()
    })
    .await;
    assert!(
        stopped_at.elapsed() >= drain,
        "closed after {:?}, before the drain of {drain:?} ended",
        stopped_at.elapsed()
    );
}
