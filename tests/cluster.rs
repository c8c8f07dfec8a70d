//! Replicas sharing the sid bridge through a real `redis-server` (`[cluster]`): three gateways
//! on ephemeral ports, each its own sid children, one Redis each test starts for itself, and a
//! real SSE client.

mod support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::redis_server::RedisServer;
use support::{gateway, text_message, SseEvent, TestGateway};

const WAIT: Duration = Duration::from_secs(10);

/// Three replicas of one cluster, named a, b and c.
async fn replicas(redis: &RedisServer, tag: &str) -> [TestGateway; 3] {
    let start = |node: &'static str| {
        gateway()
            .sid(&format!("{tag}-{node}"))
            .cluster(&redis.url(), node)
            .start()
    };
    let (a, b, c) = tokio::join!(start("a"), start("b"), start("c"));
    for g in [&a, &b, &c] {
        wait_until("the replica sees Redis", || async {
            g.get("/readyz").await.status == 200
        })
        .await;
    }
    [a, b, c]
}

async fn wait_until<F: std::future::Future<Output = bool>>(what: &str, f: impl Fn() -> F) {
    let deadline = Instant::now() + WAIT;
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

fn with_context(text: &str, ctx: &str) -> Value {
    let mut m = text_message(text);
    m["message"]["contextId"] = json!(ctx);
    m
}

fn ids(events: &[SseEvent]) -> Vec<u64> {
    events.iter().map(|e| e.id.parse().unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_turn_run_on_a_streams_live_on_b_and_resumes_exactly_on_c() {
    let redis = RedisServer::start().await;
    let [a, b, c] = replicas(&redis, "cluster-live").await;

    // A context on A (its first turn done).
    let first = a.call("message/send", text_message("hello")).await;
    let ctx = first["result"]["contextId"].as_str().unwrap().to_owned();
    let before = a
        .sse_get(&format!("/contexts/{ctx}/events"), None)
        .await
        .until_final(WAIT)
        .await;
    let resume_from = before.last().unwrap().id.clone();

    // B subscribes to the context, then a slow turn runs on A: B sees it as it happens.
    let mut on_b = b
        .sse_get(&format!("/contexts/{ctx}/events"), Some(&resume_from))
        .await;
    let mut on_a = a.stream_message(with_context("slow please", &ctx)).await;
    let mut from_b = on_b.take(3, WAIT).await;
    let task = from_b[0].data["params"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let meanwhile = a.call("tasks/get", json!({"id": task})).await;
    assert_eq!(
        meanwhile["result"]["status"]["state"], "working",
        "B saw the turn's first events while it was running on A"
    );
    let from_a = on_a.until_final(WAIT).await;
    assert!(from_a.len() > 5, "a slow turn streams several deltas");
    while from_b.len() < from_a.len() {
        from_b.push(on_b.next(WAIT).await.expect("B's stream stays open"));
    }
    // The same events, the same ids, in the same order.
    assert_eq!(ids(&from_b), ids(&from_a));
    let data = |v: &[SseEvent]| v.iter().map(|e| e.data.clone()).collect::<Vec<_>>();
    assert_eq!(data(&from_b), data(&from_a));
    let first_id: u64 = resume_from.parse().unwrap();
    assert_eq!(
        ids(&from_b)[0],
        first_id + 1,
        "ids go on from the first turn's"
    );

    // B drops after three events of the turn; C resumes after the third, with the next.
    drop(on_b);
    let third = &from_b[2];
    let mut on_c = c
        .sse_get(&format!("/contexts/{ctx}/events"), Some(&third.id))
        .await;
    let rest = on_c.take(from_a.len() - 3, WAIT).await;
    assert_eq!(ids(&rest), ids(&from_a[3..]));
    assert_eq!(data(&rest), data(&from_a[3..]));

    // tasks/get on C answers what A answers, and so does the task's own stream.
    let on_a_get = a.call("tasks/get", json!({"id": task})).await;
    let on_c_get = c.call("tasks/get", json!({"id": task})).await;
    assert_eq!(on_c_get["result"], on_a_get["result"]);
    assert_eq!(on_c_get["result"]["status"]["state"], "completed");
    let task_events = c
        .sse_get(&format!("/tasks/{task}/events"), None)
        .await
        .collect(WAIT)
        .await;
    assert_eq!(ids(&task_events), ids(&from_a));

    // A task no replica knows is still not found, on every replica.
    let missing = b.call("tasks/get", json!({"id": "no-such-task"})).await;
    assert_eq!(missing["error"]["code"], -32001);
    assert_eq!(b.get("/contexts/no-such-context/events").await.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resubscribe_and_a2a_reads_on_another_replica() {
    let redis = RedisServer::start().await;
    let [a, b, _c] = replicas(&redis, "cluster-a2a").await;
    let done = a.call("message/send", text_message("hello")).await;
    let task = done["result"]["id"].as_str().unwrap().to_owned();

    // tasks/resubscribe on B with Last-Event-ID 1: the rest of the task, ids as on A.
    let all_a = a
        .sse_get(&format!("/tasks/{task}/events"), None)
        .await
        .collect(WAIT)
        .await;
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/resubscribe", "params": {"id": task}});
    let rest = b
        .sse_post(&body, Some(&all_a[0].id))
        .await
        .collect(WAIT)
        .await;
    assert_eq!(ids(&rest), ids(&all_a[1..]));

    // GetTask and ListTasks (A2A 1.0) on B know A's task.
    let (status, got) = b
        .a2a_call("GetTask", json!({"id": task}), Some("1.0"))
        .await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["result"]["id"], task);
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
    let (_, listed) = b.a2a_call("ListTasks", json!({}), Some("1.0")).await;
    let listed: Vec<&str> = listed["result"]["tasks"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"))
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&task.as_str()), "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_redis_the_proxy_serves_readyz_says_so_sid_calls_fail_clearly_and_all_resumes() {
    let mut redis = RedisServer::start().await;
    let up = support::legacy_echo().run().await;
    let a = support::routing_all_to(&up.url(), wiregate::config::Dialect::Legacy)
        .sid("cluster-down")
        .cluster(&redis.url(), "a")
        .start()
        .await;
    wait_until("Redis is seen", || async {
        a.get("/readyz").await.status == 200
    })
    .await;
    let ready = a.get("/readyz").await.json();
    assert_eq!(ready["cluster"], json!({"redis": "reachable", "node": "a"}));

    redis.kill();
    wait_until("Redis is missed", || async {
        a.get("/readyz").await.status == 503
    })
    .await;
    let ready = a.get("/readyz").await.json();
    assert_eq!(ready["ready"], false);
    assert_eq!(ready["cluster"]["redis"], "unreachable");

    // The proxy path does not need Redis.
    let proxied = a.call("plan.get", json!({"id": 1})).await;
    assert!(proxied.get("result").is_some(), "{proxied}");

    // A sid call is refused with the cluster error, and an HTTP status that says so.
    let refused = a
        .rpc(&json!({"jsonrpc": "2.0", "id": 7, "method": "message/send", "params": text_message("hello")}))
        .await;
    assert_eq!(refused.status, 503);
    let err = refused.json()["error"].clone();
    assert_eq!(err["code"], -32066);
    assert_eq!(err["data"]["kind"], "cluster_unavailable");
    assert!(err["message"].as_str().unwrap().contains("Redis"), "{err}");

    // Redis returns: the replica finds it by itself and sid calls work again.
    redis.restart().await;
    wait_until("Redis is back", || async {
        a.get("/readyz").await.status == 200
    })
    .await;
    let ok = a.call("message/send", text_message("hello")).await;
    assert_eq!(ok["result"]["status"]["state"], "completed", "{ok}");
}
