//! Translated calls (JSON-RPC, batches, legacy envelopes) spread over the replicas, every
//! answer checked, every failure matched to the fault that explains it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::faults::{Excused, Kind, Problems};
use crate::Run;

/// A call that takes longer than this hangs: the upstream's `timeout_ms` is 5 s.
pub const CALL_LIMIT: Duration = Duration::from_secs(15);

#[derive(Default)]
pub struct LoadStats {
    pub sent: AtomicU64,
    pub ok: AtomicU64,
    pub excused: Excused,
    pub problems: Problems,
}

/// What came back for one call.
#[derive(Debug)]
pub enum Outcome {
    Ok,
    /// No HTTP answer: refused, reset.
    #[allow(dead_code, reason = "read through Debug, in the problem reports")]
    Transport(String),
    /// No answer within [`CALL_LIMIT`].
    Hang,
    /// A JSON-RPC error code or a legacy error code.
    Error(String),
    /// An answer that is not the one this call must get.
    #[allow(dead_code, reason = "read through Debug, in the problem reports")]
    Wrong(String),
}

fn body(kind: u64, w: usize, n: u64) -> Value {
    match kind {
        0 => json!({"jsonrpc": "2.0", "id": format!("w{w}-{n}"), "method": "echo",
                    "params": {"n": n, "text": "chaos ü € \u{1F600}", "list": [1, 2.5, null]}}),
        1 => json!({"jsonrpc": "2.0", "id": n, "method": "_cleveragents/plan/status",
                    "params": {"plan_id": "P1"}}),
        2 => json!([
            {"jsonrpc": "2.0", "id": format!("b{w}-{n}"), "method": "echo", "params": {"n": n}},
            {"jsonrpc": "2.0", "id": n, "method": "session.create"},
            {"jsonrpc": "2.0", "method": "echo", "params": {"note": "a notification"}}
        ]),
        _ => json!({"a2a_version": "1.0", "request_id": format!("r{w}-{n}"), "operation": "echo",
                    "params": {"n": n, "legacy": true}, "auth": null}),
    }
}

fn rpc_error(v: &Value) -> Option<Outcome> {
    v.get("error")
        .map(|e| Outcome::Error(e["code"].to_string()))
}

fn check(kind: u64, sent: &Value, got: &Value) -> Outcome {
    match kind {
        0 => rpc_error(got).unwrap_or(
            if got["id"] == sent["id"] && got["result"] == sent["params"] {
                Outcome::Ok
            } else {
                Outcome::Wrong(format!("echo answered {got}"))
            },
        ),
        1 => rpc_error(got).unwrap_or(
            if got["id"] == sent["id"] && got["result"]["plan_id"] == "P1" {
                Outcome::Ok
            } else {
                Outcome::Wrong(format!("plan/status answered {got}"))
            },
        ),
        2 => {
            let Some(items) = got.as_array() else {
                return rpc_error(got)
                    .unwrap_or_else(|| Outcome::Wrong(format!("batch answered {got}")));
            };
            if items.len() != 2 {
                return Outcome::Wrong(format!("two calls and a notification answered {got}"));
            }
            if let Some(e) = items.iter().find_map(rpc_error) {
                return e;
            }
            if items[0]["id"] == sent[0]["id"]
                && items[0]["result"] == sent[0]["params"]
                && items[1]["id"] == sent[1]["id"]
                && items[1]["result"]["session_id"].is_string()
            {
                Outcome::Ok
            } else {
                Outcome::Wrong(format!("batch answered {got}"))
            }
        }
        _ => {
            if got["status"] == "error" {
                return Outcome::Error(got["error"]["code"].to_string());
            }
            if got["status"] == "success"
                && got["request_id"] == sent["request_id"]
                && got["data"] == sent["params"]
            {
                Outcome::Ok
            } else {
                Outcome::Wrong(format!("legacy envelope answered {got}"))
            }
        }
    }
}

/// POSTs `body` to `url/rpc` and reads the JSON answer, whatever its HTTP status.
pub async fn post(client: &reqwest::Client, url: &str, body: &Value) -> Result<Value, Outcome> {
    let sent = client
        .post(format!("{url}/rpc"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send();
    let resp = match tokio::time::timeout(CALL_LIMIT, sent).await {
        Err(_) => return Err(Outcome::Hang),
        Ok(Err(e)) => return Err(Outcome::Transport(e.to_string())),
        Ok(Ok(r)) => r,
    };
    let status = resp.status();
    let text = match tokio::time::timeout(CALL_LIMIT, resp.text()).await {
        Err(_) => return Err(Outcome::Hang),
        Ok(Err(e)) => return Err(Outcome::Transport(e.to_string())),
        Ok(Ok(t)) => t,
    };
    serde_json::from_str(&text)
        .map_err(|_| Outcome::Wrong(format!("HTTP {status}, not JSON: {text:.200}")))
}

/// Which fault may explain a translated call to replica `r` failing this way.
fn explains(outcome: &Outcome, r: usize) -> impl Fn(Kind) -> bool + '_ {
    move |k| match outcome {
        Outcome::Transport(_) => k == Kind::ReplicaKilled(r),
        Outcome::Error(code) => {
            k == Kind::UpstreamRefusing && (code == "-32050" || code == "\"UPSTREAM_UNAVAILABLE\"")
        }
        _ => false,
    }
}

/// One worker: `per_second` calls a second, round robin over the replicas.
pub async fn worker(w: usize, per_second: f64, run: Arc<Run>, stats: Arc<LoadStats>) {
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(2)
        .build()
        .unwrap();
    let pace = Duration::from_secs_f64(1.0 / per_second);
    let mut tick = tokio::time::interval(pace);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n = 0u64;
    while !run.load_stopped() {
        tick.tick().await;
        n += 1;
        let kind = n % 4;
        let r = (n as usize + w) % run.urls.len();
        let sent = body(kind, w, n);
        let from = run.timeline.now();
        stats.sent.fetch_add(1, Ordering::Relaxed);
        let outcome = match post(&client, &run.urls[r], &sent).await {
            Ok(got) => check(kind, &sent, &got),
            Err(o) => o,
        };
        if let Outcome::Ok = outcome {
            stats.ok.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let to = run.timeline.now();
        let what = match &outcome {
            Outcome::Transport(_) => "no HTTP answer".to_owned(),
            Outcome::Error(c) => format!("error {c}"),
            o => format!("{o:?}"),
        };
        match run.timeline.explaining(from, to, explains(&outcome, r)) {
            Some(k) => stats.excused.note(format!("translated call: {what}"), k),
            None => stats.problems.add(format!(
                "t={from:.1}s call {n} (kind {kind}) to r{}: {outcome:?}",
                r + 1
            )),
        }
    }
}
