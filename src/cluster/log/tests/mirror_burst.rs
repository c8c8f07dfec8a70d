//! A burst of many logs' worth, produced as fast as the owner can, read on two other replicas
//! by subscribers that keep reading but slower than the owner writes: each gets every update
//! once, in order, never cut off (the owner's writer is held back by the replicas' marks, not
//! the subscribers overrun). And a subscriber there that stops reading is cut off after
//! `lag_grace`, without cutting off the one beside it. Real `redis-server`, real exporter and
//! mirrors on links of their own (one per replica); the subscribers are cursors, since a
//! socket's buffers would absorb the burst and hide the lag.

use std::sync::Arc;
use std::time::Duration;

use crate::cluster::log::{Exporter, Mirrors};
use crate::cluster::{keys, Link};
use crate::config::Cluster;
use crate::events::{Cursor, Read, ReplayLog};
use crate::model::event::{A2aEvent, EventKind};
use serde_json::Map;

use super::redis_server::RedisServer;
use super::WAIT;

pub(super) const REPLAY: usize = 64;
/// Forty logs' worth.
pub(super) const BURST: u64 = 40 * REPLAY as u64;

pub(super) async fn link(redis: &RedisServer, node: &str) -> Arc<Link> {
    let link = Link::start(&Cluster {
        redis: redis.url(),
        node_id: node.into(),
        ..Cluster::default()
    })
    .unwrap();
    super::wait::until_true("Redis answers", WAIT, || async { link.is_up() }).await;
    link
}

/// The owner's log of `ctx`, exported with pacing on, its first update written.
pub(super) async fn owner(link: &Arc<Link>, ctx: &str, grace: Duration) -> Arc<ReplayLog> {
    let owner = Arc::new(ReplayLog::new(REPLAY));
    let mut flushed = Exporter::spawn(
        link.clone(),
        keys::context_log(ctx),
        ctx.into(),
        &owner,
        REPLAY,
        Some(grace),
        |_| None,
    )
    .unwrap();
    owner.push(update()).unwrap();
    tokio::time::timeout(WAIT, flushed.wait_for(|s| *s >= 1))
        .await
        .unwrap()
        .unwrap();
    owner
}

pub(super) fn update() -> A2aEvent {
    A2aEvent::new(EventKind::Artifact, Some("t1".into()), Map::new())
}

/// sid's output: as fast as the owner's own readers (its exporter) let it.
pub(super) async fn burst(owner: &ReplayLog, grace: Duration) {
    for _ in 0..BURST {
        owner.room(grace).await;
        owner.push(update()).unwrap();
    }
}

/// Reads the burst as a steady subscriber does: a few updates, then a millisecond's pause
/// (far less than any grace), so it keeps reading but slower than the owner writes.
pub(super) async fn read_steadily(mut cursor: Cursor) -> Result<Vec<u64>, String> {
    let mut got = Vec::new();
    let mut out = Vec::new();
    while got.len() < BURST as usize {
        out.clear();
        match cursor.read(&mut out, 16) {
            Read::Events(_) => got.extend(out.iter().map(|s| s.seq)),
            Read::Empty => {
                if tokio::time::timeout(WAIT, cursor.changed()).await.is_err() {
                    return Err(format!("stalled after {} of {BURST}", got.len()));
                }
                continue;
            }
            other => return Err(format!("after {} of {BURST}: {other:?}", got.len())),
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn steady_subscribers_on_two_other_replicas_get_a_burst_of_forty_logs_whole() {
    let redis = RedisServer::start().await;
    let grace = Duration::from_secs(2);
    let a = link(&redis, "a").await;
    let owner = owner(&a, "ctx-burst", grace).await;
    let mut readers = Vec::new();
    for node in ["b", "c"] {
        let mirrors = Mirrors::new(link(&redis, node).await, REPLAY, 16, grace);
        let mirror = mirrors.open("ctx-burst").await.unwrap();
        let sub = mirror.subscribe(Some("1")).unwrap();
        assert!(!sub.gap);
        readers.push((mirrors, tokio::spawn(read_steadily(sub.cursor))));
    }
    burst(&owner, grace).await;
    for (node, (_mirrors, reader)) in ["b", "c"].into_iter().zip(readers) {
        let got = reader
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("on {node}: {e}"));
        assert_eq!(got, (2..=BURST + 1).collect::<Vec<_>>(), "on {node}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscriber_of_a_mirror_that_stops_reading_is_cut_off_and_its_neighbour_is_not() {
    let redis = RedisServer::start().await;
    let grace = Duration::from_millis(500);
    let a = link(&redis, "a").await;
    let owner = owner(&a, "ctx-stopped", grace).await;
    let mirrors = Mirrors::new(link(&redis, "b").await, REPLAY, 16, grace);
    let mirror = mirrors.open("ctx-stopped").await.unwrap();
    let mut stopped = mirror.subscribe(Some("1")).unwrap().cursor;
    let steady = tokio::spawn(read_steadily(mirror.subscribe(Some("1")).unwrap().cursor));

    burst(&owner, grace).await;
    let got = steady.await.unwrap().unwrap();
    assert_eq!(got, (2..=BURST + 1).collect::<Vec<_>>());
    let mut out = Vec::new();
    assert!(
        matches!(stopped.read(&mut out, usize::MAX), Read::Lagged(_)),
        "the subscriber that read nothing was cut off"
    );
}
