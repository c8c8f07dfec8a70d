//! A replica SIGKILLed mid-turn: once its lease lapses, another replica's sweep takes the
//! context over and fails the interrupted task, so every subscriber on every replica, and a
//! client of the dead replica resuming elsewhere, gets the updates it missed, the final
//! `failed` once, then the end of its stream; `tasks/get` says `failed` everywhere in time; the
//! push webhook configured on the dead replica is told the task failed.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::replicas::{advertised_from, ids, with_context, ProcessReplica, WAIT};
use crate::support::redis_server::RedisServer;
use crate::support::{self, SseEvent, SseReader, TestGateway};

/// `cluster.lease_ms` of every replica here (see `replicas`).
const LEASE: Duration = Duration::from_millis(1_000);

/// The updates after `before`, up to the stream's end, which must come after one final update.
async fn to_the_end(what: &str, stream: &mut SseReader) -> Vec<SseEvent> {
    let got = stream.until_final(WAIT).await;
    let last = got.last().unwrap_or_else(|| panic!("{what}: no update"));
    assert_eq!(last.data["params"]["final"], true, "{what}: {last:?}");
    assert!(
        stream.next(WAIT).await.is_none(),
        "{what}: the stream ends after the final update"
    );
    got
}

/// Asserts `got` continues `from` (the last id a client had) one by one, with the task's
/// `failed` update last and only there.
fn continues_then_fails(what: &str, from: u64, got: &[SseEvent], task: &str) {
    let ids = ids(got);
    let expected: Vec<u64> = (from + 1..from + 1 + ids.len() as u64).collect();
    assert_eq!(ids, expected, "{what}: no repeat, no gap");
    let failed: Vec<&SseEvent> = got
        .iter()
        .filter(|e| e.data["params"]["state"] == "failed")
        .collect();
    assert_eq!(failed.len(), 1, "{what}: one failed update");
    let last = got.last().unwrap();
    assert_eq!(last.data["params"]["taskId"], task, "{what}");
    assert_eq!(last.data["params"]["state"], "failed", "{what}: {last:?}");
    assert_eq!(
        last.data["params"]["error"]["code"], "replica_lost",
        "{what}"
    );
}

/// A webhook receiver on a free loopback port: its URL and the bodies it is sent.
async fn webhook() -> (String, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |body: axum::body::Bytes| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(serde_json::from_slice(&body).unwrap_or(Value::Null));
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/hook"), rx)
}

async fn state_on(g: &TestGateway, task: &str) -> Value {
    g.call("tasks/get", json!({"id": task})).await["result"]["status"]["state"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replica_killed_mid_turn_leaves_its_task_failed_on_every_replica() {
    let redis = RedisServer::start().await;
    let sid = format!(
        "[sid]\nenabled = true\ncommand = [{:?}, \"--raw\", \"--tag\", \"failover-sweep-a\"]\n\
         [a2a]\npush_allow_private = true\n",
        support::fake_sid()
    );
    let mut a = ProcessReplica::with(&redis, "a", &sid);
    let pushing = || support::gateway().with(|c| c.a2a.push_allow_private = true);
    let b = advertised_from(pushing(), &redis, "failover-sweep-b", "b").await;
    let c = advertised_from(pushing(), &redis, "failover-sweep-c", "c").await;
    let deadline = Instant::now() + WAIT;
    while !matches!(a.http.get(format!("{}/readyz", a.base)).send().await,
                    Ok(r) if r.status() == 200)
    {
        assert!(Instant::now() < deadline, "replica a did not come up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first = a.call("message/send", support::text_message("hello")).await;
    let ctx = first["result"]["contextId"].as_str().unwrap().to_owned();

    // A client of A streams a turn of 1 000 deltas, 20 a second.
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "message/stream",
                      "params": with_context("flood 1000 20", &ctx)});
    let resp = a
        .http
        .post(format!("{}/rpc", a.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut on_a = SseReader::new(resp);
    let opening = on_a.take(3, WAIT).await;
    let task = opening[0].data["params"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();

    // A webhook of the task, configured on A.
    let (hook_url, mut hooked) = webhook().await;
    let made = a
        .call(
            "CreateTaskPushNotificationConfig",
            json!({"taskId": task, "id": "hook-1", "url": hook_url, "token": "tok-1"}),
        )
        .await;
    assert!(made.get("error").is_none(), "{made}");

    // Subscribers of the task on B and C, from its start.
    let path = format!("/tasks/{task}/events");
    let mut on_b = b.sse_get(&path, None).await;
    let mut on_c = c.sse_get(&path, None).await;
    let seen_c = on_c.take(10, WAIT).await;
    let mut had_a = opening;
    had_a.extend(on_a.take(17, WAIT).await);
    let last_a: u64 = had_a.last().unwrap().id.parse().unwrap();
    // A dies once what its client saw is in Redis (B's subscriber has it): what A streamed
    // and never wrote is not for any other replica to serve.
    let mut seen_b = Vec::new();
    while seen_b
        .last()
        .is_none_or(|e: &SseEvent| e.id.parse::<u64>().unwrap() < last_a)
    {
        seen_b.push(on_b.next(WAIT).await.expect("B's subscriber reads on"));
    }

    // A dies mid-turn; its sid child, orphaned, is the test's to end.
    a.kill();
    let killed = Instant::now();
    for (pid, _) in support::processes_tagged("failover-sweep-a") {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    }

    // Within lease_ms + 2 s, both replicas left say the task failed, without any call for
    // its context.
    let limit = LEASE + Duration::from_secs(2);
    loop {
        let (sb, sc) = (state_on(&b, &task).await, state_on(&c, &task).await);
        if sb == "failed" && sc == "failed" {
            break;
        }
        assert!(
            killed.elapsed() < limit,
            "still {sb} on B and {sc} on C {:?} after the kill",
            killed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Each subscriber gets the rest of what reached Redis, the failed update once, the end.
    let rest_b = to_the_end("B's subscriber", &mut on_b).await;
    let rest_c = to_the_end("C's subscriber", &mut on_c).await;
    let last_of = |s: &[SseEvent]| s.last().unwrap().id.parse::<u64>().unwrap();
    continues_then_fails("B's subscriber", last_of(&seen_b), &rest_b, &task);
    continues_then_fails("C's subscriber", last_of(&seen_c), &rest_c, &task);
    assert_eq!(
        rest_b.last().unwrap().id,
        rest_c.last().unwrap().id,
        "one final update, under one id"
    );

    // A's client resumes on either replica left and gets the same, from where it was.
    for (name, g) in [("B", &b), ("C", &c)] {
        let mut resumed = g.sse_get(&path, Some(&last_a.to_string())).await;
        let got = to_the_end(name, &mut resumed).await;
        continues_then_fails(&format!("A's client on {name}"), last_a, &got, &task);
    }

    // The webhook A was told of hears how the task ended, from the replica that took over.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let hit = tokio::time::timeout_at(deadline, hooked.recv())
            .await
            .expect("the webhook is told the task failed")
            .unwrap();
        let state = hit["statusUpdate"]["status"]["state"]
            .as_str()
            .or(hit["task"]["status"]["state"].as_str())
            .unwrap_or("")
            .to_owned();
        if state == "TASK_STATE_FAILED" {
            break;
        }
    }

    // The context lives on where it was taken over: a new turn in it completes.
    let next = b
        .call("message/send", with_context("hello again", &ctx))
        .await;
    assert_eq!(next["result"]["status"]["state"], "completed", "{next}");
}
