//! Replicas sharing the sid bridge through a real `redis-server` (`[cluster]`): three gateways
//! on ephemeral ports, each its own sid children, one Redis each test starts for itself, and a
//! real SSE client.
//!
//! `replicas` starts them (in-process, or the binary as a process of its own to SIGKILL);
//! `live_feed` is an event feed the test writes to as it goes; `failover`, a replica killed
//! mid-turn.
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
mod support;

mod failover;
mod live_feed;
mod read_after_end;
mod replicas;
mod traced_carry;

use std::time::{Duration, Instant};

use serde_json::json;
use support::redis_server::RedisServer;
use support::{gateway, text_message, until_true, SseEvent};

use live_feed::LiveFeed;
use replicas::{
    advertised, advertised_from, context_on, ids, replicas, spec_message, with_context,
    ProcessReplica, WAIT,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_turn_run_on_a_streams_live_on_b_and_resumes_exactly_on_c() {
    let redis = RedisServer::start().await;
    let [a, b, c] = replicas(&redis, "cluster-live").await;

    // A context on A (its first turn done).
    let (ctx, before) = context_on(&a).await;
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
    until_true("Redis is seen", WAIT, || async {
        a.get("/readyz").await.status == 200
    })
    .await;
    let ready = a.get("/readyz").await.json();
    assert_eq!(ready["cluster"], json!({"redis": "reachable", "node": "a"}));

    redis.kill();
    until_true("Redis is missed", WAIT, || async {
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
    until_true("Redis is back", WAIT, || async {
        a.get("/readyz").await.status == 200
    })
    .await;
    let ok = a.call("message/send", text_message("hello")).await;
    assert_eq!(ok["result"]["status"]["state"], "completed", "{ok}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_go_to_the_owner_and_a_lost_owner_s_context_resumes_where_the_next_call_lands() {
    let redis = RedisServer::start().await;
    let mut a = ProcessReplica::start(&redis, "cluster-failover-a", "a");
    let b = advertised(&redis, "cluster-failover-b", "b").await;
    let c = advertised(&redis, "cluster-failover-c", "c").await;
    let deadline = Instant::now() + WAIT;
    let first = loop {
        match a.http.get(format!("{}/readyz", a.base)).send().await {
            Ok(r) if r.status() == 200 => {
                break a.call("message/send", text_message("hello")).await
            }
            _ => {
                assert!(Instant::now() < deadline, "replica a did not come up");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    let ctx = first["result"]["contextId"].as_str().unwrap().to_owned();

    // A call for A's context on C is carried to A and answered unchanged.
    let via_c = c
        .call("message/send", with_context("hello again", &ctx))
        .await;
    assert_eq!(via_c["result"]["contextId"], ctx.as_str(), "{via_c}");
    assert_eq!(via_c["result"]["status"]["state"], "completed");
    let forwarded_task = via_c["result"]["id"].as_str().unwrap().to_owned();
    let on_a = a.call("tasks/get", json!({"id": forwarded_task})).await;
    assert_eq!(on_a["result"], via_c["result"], "the turn ran on A");

    // B follows the context; a turn that never ends starts on A.
    let mut history = b.sse_get(&format!("/contexts/{ctx}/events"), None).await;
    let mut seen = history.until_final(WAIT).await;
    seen.extend(history.until_final(WAIT).await);
    drop(history);
    let mut on_b = b
        .sse_get(
            &format!("/contexts/{ctx}/events"),
            Some(&seen.last().unwrap().id),
        )
        .await;
    let hanging = {
        let http = a.http.clone();
        let url = format!("{}/rpc", a.base);
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "message/send",
                          "params": with_context("hang", &ctx)});
        tokio::spawn(async move { http.post(url).json(&body).send().await.map(|_| ()) })
    };
    let working = on_b.take(2, WAIT).await;
    assert_eq!(working[1].data["params"]["state"], "working");
    let hung = working[0].data["params"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();

    // A dies mid-turn. Once its lease lapses, the next call for the context, on B, resumes it.
    a.kill();
    // Its sid child, orphaned mid-turn, is the test's to end.
    for (pid, _) in support::processes_tagged("cluster-failover-a") {
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
    }
    let _ = hanging.await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let resumed = b
        .call("message/send", with_context("hello once more", &ctx))
        .await;
    assert_eq!(
        resumed["result"]["status"]["state"], "completed",
        "{resumed}"
    );
    assert_eq!(resumed["result"]["contextId"], ctx.as_str());

    // B's subscriber saw the lost task fail, then the new turn; no id twice, none going back.
    let mut after = Vec::new();
    loop {
        let e = on_b.next(WAIT).await.expect("B's stream stays open");
        let done = e.data["params"]["taskId"] == resumed["result"]["id"]
            && e.data["params"]["final"] == true;
        after.push(e);
        if done {
            break;
        }
    }
    let failed = &after[0];
    assert_eq!(failed.data["params"]["taskId"], hung.as_str());
    assert_eq!(failed.data["params"]["state"], "failed");
    assert_eq!(failed.data["params"]["final"], true);
    assert_eq!(failed.data["params"]["error"]["code"], "replica_lost");
    let all_ids: Vec<u64> = ids(&seen)
        .into_iter()
        .chain(ids(&working))
        .chain(ids(&after))
        .collect();
    assert!(
        all_ids.windows(2).all(|w| w[1] > w[0]),
        "ids strictly increase: {all_ids:?}"
    );

    // Every replica left knows the lost task failed.
    let got = c.call("tasks/get", json!({"id": hung})).await;
    assert_eq!(got["result"]["status"]["state"], "failed", "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn domain_events_are_read_once_and_served_with_resume_by_every_replica() {
    let redis = RedisServer::start().await;
    let records: Vec<String> = (1..=5)
        .map(|i| support::domain_record(i, "plan.created", &format!("plan-{i}"), json!({"n": i})))
        .collect();
    let source = support::feed_server(records, support::FeedMode::Ndjson, None, true).await;
    let start = |node: &'static str| {
        let url = source.url();
        gateway()
            .cluster(&redis.url(), node)
            .with(move |c| c.events.source = url)
            .start()
    };
    let (a, b, c) = tokio::join!(start("a"), start("b"), start("c"));
    for g in [&a, &b, &c] {
        let mut events = g.sse_get("/events", None).await;
        let got = events.take(5, WAIT).await;
        assert_eq!(
            got.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
            ["1", "2", "3", "4", "5"]
        );
        assert_eq!(got[0].data["params"]["taskId"], "plan-1");
    }
    // One replica reads the source for all three.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(source.requests.lock().unwrap().len(), 1);
    // Resumed on another replica after the id a client last saw there.
    let rest = c.sse_get("/events", Some("3")).await.take(2, WAIT).await;
    assert_eq!(
        rest.iter().map(|e| e.id.as_str()).collect::<Vec<_>>(),
        ["4", "5"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn streaming_calls_for_another_replica_s_context_are_carried_to_it_and_streamed_back() {
    let redis = RedisServer::start().await;
    let tag = "cluster-carry";
    let tags = ["a", "b", "c"].map(|n| format!("{tag}-{n}"));
    let (a, b, c) = tokio::join!(
        advertised(&redis, &tags[0], "a"),
        advertised(&redis, &tags[1], "b"),
        advertised(&redis, &tags[2], "c"),
    );
    for g in [&a, &b, &c] {
        until_true("the replica sees Redis", WAIT, || async {
            g.get("/readyz").await.status == 200
        })
        .await;
    }
    let (ctx, history) = context_on(&a).await;

    // B follows the context as it runs on A.
    let mut on_b = b
        .sse_get(
            &format!("/contexts/{ctx}/events"),
            Some(&history.last().unwrap().id),
        )
        .await;

    // message/stream on C for A's context: the turn runs on A, its stream comes back via C.
    let via_c = c
        .stream_message(with_context("slow please", &ctx))
        .await
        .until_final(WAIT)
        .await;
    assert!(via_c.len() > 5, "a slow turn streams several deltas");
    let task = via_c[0].data["params"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(via_c[0].data["params"]["contextId"], ctx.as_str());
    assert_eq!(via_c.last().unwrap().data["params"]["state"], "completed");
    let from_b = on_b.take(via_c.len(), WAIT).await;
    assert_eq!(ids(&from_b), ids(&via_c), "the owner's ids, unchanged");
    let data = |v: &[SseEvent]| v.iter().map(|e| e.data.clone()).collect::<Vec<_>>();
    assert_eq!(data(&from_b), data(&via_c));
    let first_id: u64 = history.last().unwrap().id.parse().unwrap();
    assert_eq!(ids(&via_c)[0], first_id + 1, "ids go on from the context's");
    let on_a = a.call("tasks/get", json!({"id": task})).await;
    assert_eq!(on_a["result"]["status"]["state"], "completed", "{on_a}");

    // A2A SendStreamingMessage on B for A's context: carried too, answered in A2A's shapes.
    let id = json!("carried-1");
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "SendStreamingMessage",
                      "params": spec_message("slow", &ctx)});
    let spec = b.a2a_stream(&body, Some("1.0")).await.collect(WAIT).await;
    assert!(spec.len() > 2, "{spec:?}");
    assert!(spec.iter().all(|e| e.data["id"] == id), "{spec:?}");
    let opened = &spec[0].data["result"]["task"];
    assert_eq!(opened["contextId"], ctx.as_str(), "{opened}");
    assert_eq!(
        spec.last().unwrap().data["result"]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    let spec_task = opened["id"].as_str().unwrap().to_owned();

    // A2A SendMessage on C: carried, the owner's answer unchanged.
    let (status, sent) = c
        .a2a_call("SendMessage", spec_message("hello", &ctx), Some("1.0"))
        .await;
    assert_eq!(status, 200, "{sent}");
    assert_eq!(sent["result"]["task"]["contextId"], ctx.as_str(), "{sent}");
    assert_eq!(
        sent["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );

    // In a batch nothing is carried: B refuses, naming the owner, and starts no sid of its own.
    let batch = json!([{"jsonrpc": "2.0", "id": 9, "method": "SendMessage",
                        "params": spec_message("hello", &ctx)}]);
    let refused = b.rpc_with(&batch, &[("a2a-version", "1.0")]).await.json();
    assert_eq!(refused[0]["error"]["code"], -32064, "{refused}");
    assert!(
        refused[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("runs on replica a"),
        "{refused}"
    );

    // Every turn ran on A: only A started sid, and A knows each task as its own.
    assert!(!support::processes_tagged(&format!("{tag}-a")).is_empty());
    assert!(support::processes_tagged(&format!("{tag}-b")).is_empty());
    assert!(support::processes_tagged(&format!("{tag}-c")).is_empty());
    let (_, got) = a
        .a2a_call("GetTask", json!({"id": spec_task}), Some("1.0"))
        .await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_restarted_mid_stream_the_replicas_resume_by_themselves_and_no_id_repeats() {
    let mut redis = RedisServer::start().await;
    let up = support::legacy_echo().run().await;
    let start = |node: &'static str| {
        let builder = support::routing_all_to(&up.url(), wiregate::config::Dialect::Legacy);
        let tag = format!("cluster-restart-{node}");
        let redis = &redis;
        async move { advertised_from(builder, redis, &tag, node).await }
    };
    let (a, b) = tokio::join!(start("a"), start("b"));
    for g in [&a, &b] {
        until_true("the replica sees Redis", WAIT, || async {
            g.get("/readyz").await.status == 200
        })
        .await;
    }
    let (ctx, history) = context_on(&a).await;
    let mut last_seen = history.last().unwrap().id.clone();
    let path = format!("/contexts/{ctx}/events");
    let mut on_b = b.sse_get(&path, Some(&last_seen)).await;

    // A turn of 200 deltas over four seconds runs on A; B follows it through Redis.
    let mut on_a = a.stream_message(with_context("flood 200 50", &ctx)).await;
    let mut from_b = on_b.take(3, WAIT).await;
    last_seen = from_b.last().unwrap().id.clone();
    let task = from_b[0].data["params"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();

    // Redis goes away mid-turn.
    redis.kill();
    for g in [&a, &b] {
        until_true("Redis is missed", WAIT, || async {
            g.get("/readyz").await.status == 503
        })
        .await;
        assert_eq!(
            g.get("/readyz").await.json()["cluster"]["redis"],
            "unreachable"
        );
    }
    // The proxy path serves; sid calls get the cluster error; the turn goes on on A.
    let proxied = b.call("plan.get", json!({"id": 1})).await;
    assert!(proxied.get("result").is_some(), "{proxied}");
    let refused = b
        .rpc(&json!({"jsonrpc": "2.0", "id": 7, "method": "message/send",
                     "params": with_context("hello", &ctx)}))
        .await;
    assert_eq!(refused.status, 503);
    assert_eq!(refused.json()["error"]["code"], -32066);
    assert_eq!(
        refused.json()["error"]["data"]["kind"],
        "cluster_unavailable"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    // Redis returns (empty): every replica finds it by itself.
    redis.restart().await;
    for g in [&a, &b] {
        until_true("Redis is back", WAIT, || async {
            g.get("/readyz").await.status == 200
        })
        .await;
    }
    let from_a = on_a.until_final(Duration::from_secs(20)).await;
    assert_eq!(from_a.last().unwrap().data["params"]["state"], "completed");

    // B's subscriber: every event of the turn, or (when Redis lost some) the gap frame on
    // resuming; never an id twice or going back.
    let mut gaps = 0;
    loop {
        match on_b.next(Duration::from_secs(20)).await {
            Some(e) if e.event == "gap" => gaps += 1,
            Some(e) => {
                let done = e.data["params"]["taskId"] == task.as_str()
                    && e.data["params"]["final"] == true;
                last_seen = e.id.clone();
                from_b.push(e);
                if done {
                    break;
                }
            }
            // Cut off (it lagged behind a hole): it resumes as a browser does.
            None => on_b = b.sse_get(&path, Some(&last_seen)).await,
        }
    }
    let got = ids(&from_b);
    assert!(got.windows(2).all(|w| w[1] > w[0]), "no id twice: {got:?}");
    if gaps == 0 {
        assert_eq!(got, ids(&from_a), "without a gap frame, every event");
    }

    // The next turn, run on A, reaches B's subscriber through the new Redis.
    let next = a.call("message/send", with_context("hello", &ctx)).await;
    assert_eq!(next["result"]["status"]["state"], "completed", "{next}");
    let next_task = next["result"]["id"].as_str().unwrap();
    loop {
        let e = on_b.next(WAIT).await.expect("B's stream stays open");
        assert!(e.id.parse::<u64>().unwrap() > got[got.len() - 1]);
        if e.data["params"]["taskId"] == next_task && e.data["params"]["final"] == true {
            break;
        }
    }
    // And B serves sid calls again (this one carried to A, which runs the context).
    let again = b.call("message/send", with_context("hello", &ctx)).await;
    assert_eq!(again["result"]["status"]["state"], "completed", "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn when_the_feed_reader_dies_another_replica_resumes_the_feed_after_its_last_event() {
    let redis = RedisServer::start().await;
    let feed = LiveFeed::start().await;
    feed.add_up_to(3);

    // A (a process of its own) starts first and takes the feed lease.
    let a = ProcessReplica::with(
        &redis,
        "a",
        &format!("[events]\nsource = {:?}\n", feed.url()),
    );
    until_true("A reads the feed", WAIT, || async {
        feed.requests().len() == 1
    })
    .await;
    let start = |node: &'static str| {
        let url = feed.url();
        gateway()
            .cluster(&redis.url(), node)
            .with(move |c| c.events.source = url)
            .start()
    };
    let (b, c) = tokio::join!(start("b"), start("c"));
    let mut on_b = b.sse_get("/events", None).await;
    let mut on_c = c.sse_get("/events", None).await;
    let event_ids = |v: &[SseEvent]| v.iter().map(|e| e.id.clone()).collect::<Vec<_>>();
    let mut seen_b = on_b.take(3, WAIT).await;
    let mut seen_c = on_c.take(3, WAIT).await;
    feed.add_up_to(5);
    seen_b.extend(on_b.take(2, WAIT).await);
    seen_c.extend(on_c.take(2, WAIT).await);
    assert_eq!(event_ids(&seen_b), ["1", "2", "3", "4", "5"]);
    assert_eq!(feed.requests().len(), 1, "one reader for all three");

    // A dies (SIGKILL); the source goes on meanwhile.
    let mut a = a;
    a.kill();
    feed.add_up_to(7);

    // Once A's lease lapses, B or C reads the feed again, after the last event A wrote.
    until_true("another replica reads the feed", WAIT, || async {
        feed.requests().len() == 2
    })
    .await;
    assert_eq!(feed.requests()[1], "after=5");
    seen_b.extend(on_b.take(2, WAIT).await);
    seen_c.extend(on_c.take(2, WAIT).await);
    feed.add_up_to(8);
    seen_b.extend(on_b.take(1, WAIT).await);
    seen_c.extend(on_c.take(1, WAIT).await);
    let all: Vec<String> = (1..=8).map(|i| i.to_string()).collect();
    assert_eq!(event_ids(&seen_b), all, "none lost, none twice on B");
    assert_eq!(event_ids(&seen_c), all, "none lost, none twice on C");
    assert_eq!(seen_c[5].data["params"]["taskId"], "plan-6");
    // Nothing more arrives on either (no event written twice).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(feed.requests().len(), 2);
    let late = tokio::time::timeout(Duration::from_millis(300), on_b.next(WAIT)).await;
    assert!(late.is_err(), "nothing after 8: {late:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_callers_task_on_one_replica_is_not_found_by_another_caller_on_the_next() {
    use support::keys::{alice_and_bob, ALICE, BOB};
    let redis = RedisServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let a = advertised_from(
        gateway().with(alice_and_bob(dir.path())),
        &redis,
        "tenants-a",
        "a",
    )
    .await;
    let b = advertised_from(
        gateway().with(alice_and_bob(dir.path())),
        &redis,
        "tenants-b",
        "b",
    )
    .await;
    let sent = a
        .rpc_with(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "message/send",
                    "params": text_message("hello")}),
            &[ALICE],
        )
        .await
        .json();
    let task = sent["result"]["id"].as_str().expect("a task").to_owned();
    let ctx = sent["result"]["contextId"].as_str().unwrap().to_owned();
    let get = json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task}});

    // B reads the task from Redis: its owner is named there, and so is the context's.
    let theirs = b.rpc_with(&get, &[BOB]).await.json();
    assert_eq!(theirs["error"]["code"], -32001, "{theirs}");
    let mine = b.rpc_with(&get, &[ALICE]).await.json();
    assert_eq!(mine["result"]["id"], task.as_str(), "{mine}");
    let stream = |who: (&'static str, &'static str)| {
        b.http
            .get(format!("{}/contexts/{ctx}/events", b.base()))
            .header(who.0, who.1)
            .send()
    };
    assert_eq!(stream(BOB).await.unwrap().status(), 404);
    assert_eq!(stream(ALICE).await.unwrap().status(), 200);
}
