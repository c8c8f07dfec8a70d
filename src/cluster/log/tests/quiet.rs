//! A quiet log costs Redis nothing: with a context's owner exporting with pacing on and a
//! subscriber of another replica's copy attached, once the updates written are read, an idle
//! window sees no command but the links' own health checks (`PING`). Real `redis-server`, real
//! exporter and mirror, each replica on a link of its own; Redis's own count of calls.

use std::time::Duration;

use crate::cluster::log::Mirrors;
use crate::events::Read;

use super::mirror_burst::{link, owner, update, REPLAY};
use super::redis_server::RedisServer;
use super::{calls, made, WAIT};

/// How long the log stays quiet while Redis's calls are counted.
const IDLE: Duration = Duration::from_secs(3);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_context_with_a_subscriber_on_another_replica_sends_redis_nothing() {
    let redis = RedisServer::start().await;
    let a = link(&redis, "a").await;
    let owner = owner(&a, "ctx-quiet", Duration::from_secs(2)).await;
    let mirrors = Mirrors::new(link(&redis, "b").await, REPLAY, 16, Duration::from_secs(2));
    let mirror = mirrors.open("ctx-quiet").await.unwrap();
    let mut cursor = mirror.subscribe(Some("1")).unwrap().cursor;

    // A few updates, read on the other replica: the copy's reader is past them.
    for _ in 0..10 {
        owner.push(update()).unwrap();
    }
    let mut got = Vec::new();
    let mut out = Vec::new();
    while got.last() != Some(&11) {
        out.clear();
        match cursor.read(&mut out, usize::MAX) {
            Read::Events(_) => got.extend(out.iter().map(|s| s.seq)),
            Read::Empty => tokio::time::timeout(WAIT, cursor.changed())
                .await
                .expect("the updates reach the other replica"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(got, (2..=11).collect::<Vec<_>>());
    // The writes that follow a run (its snapshots) and the next read's start.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let before = calls(&redis).await;
    tokio::time::sleep(IDLE).await;
    let mut during = made(&before, &calls(&redis).await);
    during.remove("info");
    let pings = during.remove("ping").unwrap_or(0);
    assert_eq!(
        during,
        Default::default(),
        "commands while the log is quiet"
    );
    // Two links, each checking Redis every 500 ms: about four a second.
    assert!(pings <= 16, "{pings} pings in {IDLE:?}");

    // And the copy still reads what comes next.
    owner.push(update()).unwrap();
    out.clear();
    loop {
        match cursor.read(&mut out, usize::MAX) {
            Read::Events(_) => break,
            Read::Empty => tokio::time::timeout(WAIT, cursor.changed())
                .await
                .expect("the next update reaches the other replica"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(out[0].seq, 12);
}
