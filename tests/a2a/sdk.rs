//! The official A2A Python SDK (a2a-sdk 1.3.0) drives sid through the gateway with its own
//! client: once through the 1.0 card, once as a 0.3 client. `tests/a2a_client/drive.py` does
//! the client side; the SDK lives in a virtualenv under `target/` (`.ci/run` makes it; this test
//! makes it itself when it is missing, so `cargo test` alone works on a fresh machine).

use crate::support;

use std::path::PathBuf;
use std::sync::Mutex;

use serde_json::Value;
use support::gateway;

const SDK: &str = "a2a-sdk[http-server]==1.3.0";

/// The virtualenv's python, made once per test run when missing.
fn python() -> PathBuf {
    static MAKING: Mutex<()> = Mutex::new(());
    if let Ok(p) = std::env::var("WIREGATE_A2A_PYTHON") {
        return p.into();
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/a2a-venv");
    let py = venv.join("bin/python");
    let _guard = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let ready = |py: &PathBuf| {
        std::process::Command::new(py)
            .args(["-c", "import a2a.client, a2a.compat.v0_3.jsonrpc_transport"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ready(&py) {
        let ok = std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .is_ok_and(|s| s.success())
            && std::process::Command::new(venv.join("bin/pip"))
                .args(["install", "--quiet", SDK])
                .status()
                .is_ok_and(|s| s.success());
        assert!(ok, "could not install {SDK} into {}", venv.display());
    }
    assert!(ready(&py), "{SDK} is not importable from {}", py.display());
    py
}

async fn drive(version: &str) -> (Value, String) {
    let gw = gateway()
        .sid(&format!("a2a-sdk-{version}"))
        // The test's webhook receiver listens on loopback.
        .with(|c| c.a2a.push_allow_private = true)
        .start()
        .await;
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/a2a_client/drive.py");
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::process::Command::new(python())
            .arg(script)
            .arg(gw.base())
            .arg(version)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the SDK client finishes")
    .expect("python runs");
    assert!(
        out.status.success(),
        "the SDK client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).expect("one JSON line");
    let metrics = gw.get("/metrics").await.text;
    (seen, metrics)
}

fn assert_round_trip(seen: &Value) {
    let answer = "Hello from the mock model.";
    assert_eq!(seen["card"]["name"], "sid via wiregate");
    assert_eq!(seen["card"]["streaming"], true);
    assert_eq!(seen["send"]["state"], "TASK_STATE_COMPLETED", "{seen}");
    assert_eq!(seen["send"]["text"], answer);
    let kinds = seen["stream"]["kinds"].as_array().unwrap();
    assert_eq!(kinds[0], "task", "the stream starts with the task");
    assert!(kinds.iter().any(|k| k == "artifact_update"), "{seen}");
    assert_eq!(seen["stream"]["states"][0], "TASK_STATE_SUBMITTED");
    let states = seen["stream"]["states"].as_array().unwrap();
    assert_eq!(states.last().unwrap(), "TASK_STATE_COMPLETED");
    assert_eq!(seen["stream"]["text"], answer, "the chunks add up");
    assert_eq!(seen["get"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(seen["get"]["text"], answer);
    assert_eq!(
        seen["not_found"], "TaskNotFoundError",
        "-32001 read as the SDK's own error"
    );
    assert_eq!(
        seen["history"]["roles"],
        serde_json::json!(["ROLE_USER", "ROLE_AGENT"]),
        "{seen}"
    );
    assert_eq!(seen["history"]["first"], "stream please");
    assert_eq!(
        seen["history"]["trimmed"],
        serde_json::json!(["ROLE_AGENT"])
    );
    assert_eq!(seen["cancel"]["before"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(seen["cancel"]["after"], "TASK_STATE_CANCELED", "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_client_speaks_1_0_through_the_card() {
    let (seen, metrics) = drive("1.0").await;
    assert_round_trip(&seen);
    assert_eq!(seen["transport"], "JsonRpcTransport");
    let ifaces = seen["card"]["interfaces"].as_array().unwrap();
    assert_eq!(ifaces.len(), 3);
    assert_eq!(ifaces[0][1], "1.0");
    let url = ifaces[0][2].as_str().unwrap();
    assert!(
        url.ends_with('/') && url.matches('/').count() == 3,
        "the client was sent to A2A's binding at the base URL: {url}"
    );
    assert_1_0_extras(&seen);
    // (The metrics recorder is process-wide: the other test's calls may show too.)
    assert!(metrics.contains(r#"client_dialect="a2a-1.0""#), "{metrics}");
}

/// What only 1.0 has: ListTasks, and push configurations the SDK makes itself.
fn assert_1_0_extras(seen: &Value) {
    assert_eq!(seen["list"]["pages"], serde_json::json!([2, 1]), "{seen}");
    assert_eq!(seen["list"]["totals"], serde_json::json!([3, 3]));
    assert_eq!(seen["list"]["newest_first"], true);
    assert_eq!(seen["push"]["created"], "sdk-hook");
    assert_eq!(seen["push"]["listed"], serde_json::json!(["sdk-hook"]));
    assert_eq!(
        seen["push"]["auth"],
        serde_json::json!(["Bearer sdk-secret"]),
        "every notification authenticated: {seen}"
    );
    assert_eq!(seen["push"]["last_state"], "TASK_STATE_COMPLETED");
    assert_eq!(seen["push"]["after_delete"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_client_speaks_the_rest_binding() {
    let (seen, metrics) = drive("rest").await;
    assert_round_trip(&seen);
    assert_eq!(seen["transport"], "RestTransport");
    assert_1_0_extras(&seen);
    assert!(
        metrics.contains(r#"client_dialect="a2a-1.0-rest""#),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_client_speaks_0_3_as_an_older_client() {
    let (seen, metrics) = drive("0.3").await;
    assert_round_trip(&seen);
    assert_eq!(seen["transport"], "CompatJsonRpcTransport");
    assert_eq!(seen["card"]["interfaces"][0][1], "0.3");
    assert!(metrics.contains(r#"client_dialect="a2a-0.3""#), "{metrics}");
}
