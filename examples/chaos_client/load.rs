//! Translated calls (JSON-RPC, batches, legacy envelopes) spread over the replicas, every
//! answer checked, every failure matched to the fault that explains it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::faults::{Excused, Kind, Problems};
use crate::mixed_calls::{call_body, check_call, Answer};
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

/// A call's answer as the fault check reads it: an error by its code.
fn check(kind: u64, n: u64, sent: &Value, got: &Value) -> Outcome {
    match check_call(kind, n, sent, got) {
        Answer::Ok => Outcome::Ok,
        Answer::Wrong(w) => Outcome::Wrong(w),
        Answer::RpcError(e) => {
            Outcome::Error(serde_json::from_str::<Value>(&e).map_or(e, |v| v["code"].to_string()))
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
        let sent = call_body(kind, w, n);
        let from = run.timeline.now();
        stats.sent.fetch_add(1, Ordering::Relaxed);
        let outcome = match post(&client, &run.urls[r], &sent).await {
            Ok(got) => check(kind, n, &sent, &got),
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
