//! A mirror's reader paced by its slowest subscriber: a burst larger than the replay log,
//! written by an owner nobody holds back, reaches a subscriber of another replica that reads
//! only after it, whole, with no `gap` (the reader waits for it, the shared log holding the
//! rest meanwhile). Real `redis-server`, real exporter and mirror; the subscriber is a cursor,
//! since a socket's buffers would absorb the burst and hide the lag.

use std::sync::Arc;
use std::time::Duration;

use crate::cluster::log::{Exporter, Mirrors};
use crate::cluster::{keys, Link};
use crate::config::Cluster;
use crate::events::{Read, ReplayLog};
use crate::model::event::{A2aEvent, EventKind};
use serde_json::Map;

use super::redis_server::RedisServer;
use super::WAIT;

const REPLAY: usize = 64;
/// Larger than a replay log, smaller than the owner's log and the shared one together.
const BURST: u64 = 3 * REPLAY as u64 / 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscriber_of_a_mirror_reading_after_a_burst_larger_than_the_log_gets_all_of_it() {
    let redis = RedisServer::start().await;
    let link = Link::start(&Cluster {
        redis: redis.url(),
        node_id: "pacing".into(),
        ..Cluster::default()
    })
    .unwrap();
    super::wait::until_true("Redis answers", WAIT, || async { link.is_up() }).await;

    // The owner's log, exported to Redis; no subscriber of the owner lags.
    let owner = Arc::new(ReplayLog::new(REPLAY));
    let mut flushed = Exporter::spawn(
        link.clone(),
        keys::context_log("ctx-paced"),
        "ctx-paced".into(),
        &owner,
        REPLAY,
        None,
        |_| None,
    )
    .unwrap();
    let update = || A2aEvent::new(EventKind::Artifact, Some("t1".into()), Map::new());
    owner.push(update()).unwrap();
    tokio::time::timeout(WAIT, flushed.wait_for(|s| *s >= 1))
        .await
        .unwrap()
        .unwrap();

    // Another replica's mirror of it (a long grace: the subscriber is waited for), and a
    // subscriber there that reads nothing during the burst.
    let mirrors = Mirrors::new(link.clone(), REPLAY, 16, Duration::from_secs(30));
    let mirror = mirrors.open("ctx-paced").await.unwrap();
    let mut sub = mirror.subscribe(Some("1")).unwrap();
    assert!(!sub.gap);

    // The burst, paced only by the owner's own readers (the exporter), as sid's output is.
    for _ in 0..BURST {
        owner.room(Duration::from_secs(30)).await;
        owner.push(update()).unwrap();
    }
    tokio::time::timeout(WAIT, flushed.wait_for(|s| *s > BURST))
        .await
        .unwrap()
        .unwrap();
    // Time for an unpaced reader to have overrun the subscriber.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut got = Vec::new();
    let mut out = Vec::new();
    while got.len() < BURST as usize {
        out.clear();
        match sub.cursor.read(&mut out, usize::MAX) {
            Read::Events(_) => got.extend(out.iter().map(|s| s.seq)),
            Read::Empty => tokio::time::timeout(WAIT, sub.cursor.changed())
                .await
                .expect("the mirror goes on"),
            other => panic!("after {} of {BURST} events: {other:?}", got.len()),
        }
    }
    assert_eq!(got, (2..=BURST + 1).collect::<Vec<_>>());
}
