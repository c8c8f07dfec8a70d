//! A client that saw its task end on the replica running it reads the task ended on every
//! other replica at once: the owner writes a stream's last update only once Redis has it.

use serde_json::json;

use crate::replicas::{context_on, replicas_leasing, with_context, WAIT};
use crate::support::redis_server::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_task_seen_ending_on_its_owner_reads_ended_on_another_replica() {
    let redis = RedisServer::start().await;
    // Leases of 5 s: Redis held back for 1.5 s below must not read as A lost.
    let [a, b, _c] = replicas_leasing(&redis, "cluster-read-after-end", 5_000).await;
    let (ctx, _) = context_on(&a).await;
    let mut on_a = a.stream_message(with_context("flood 20 20", &ctx)).await;
    let first = on_a.take(2, WAIT).await;
    let task = first[0].data["params"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    // Redis holds every write for 1.5 s from here: the turn (1 s) ends before its last update
    // can be written.
    redis.pause_writes(1_500).await;
    let rest = on_a.until_final(WAIT).await;
    assert_eq!(rest.last().unwrap().data["params"]["state"], "completed");
    let on_b = b.call("tasks/get", json!({"id": task})).await;
    assert_eq!(
        on_b["result"]["status"]["state"], "completed",
        "B, right after A's client saw the task end: {on_b}"
    );
}
