//! The domain-event feed read once for all replicas (`[cluster]` with `[events] source`).
//!
//! The replica holding the feed lease runs the usual [`Reader`](crate::events::feed::Reader) into a
//! queue of its own, exported to the shared stream `wiregate:feed` (entries keep the feed's
//! event ids); it resumes the source with `?after=` the last id that stream holds, so a replica
//! taking over from a dead reader continues where it stopped. Every replica, the reader's too,
//! serves `GET /events` from its copy of that stream, so `Last-Event-ID` resumes anywhere.

use std::sync::{Arc, Weak};
use std::time::Duration;

use redis::streams::StreamRangeReply;
use redis::AsyncCommands;
use tokio::sync::watch;

use super::keys::{self, FEED_LEASE, FEED_LOG};
use super::log::{self, Exporter};
use super::{lease, Link};
use crate::config::Events as EventsConfig;
use crate::events::feed::Feed;
use crate::events::ReplayLog;

/// Retry delay while Redis does not answer.
const RETRY: Duration = Duration::from_millis(200);

/// Starts the feed of a replica: the replica holding the feed lease reads `cfg.source` into
/// the shared stream, and every replica serves its copy of that stream.
pub(crate) fn start(cfg: EventsConfig, link: Arc<Link>) -> Arc<Feed> {
    let queue =
        Arc::new(ReplayLog::new(cfg.replay_events).with_max_subscribers(cfg.max_subscribers));
    let feed = Feed::fed(queue.clone());
    spawn(link, cfg, Arc::downgrade(&feed), queue);
    feed
}

/// Follows the shared stream into `served`, and reads the source while holding the lease.
fn spawn(link: Arc<Link>, cfg: EventsConfig, feed: Weak<Feed>, served: Arc<ReplayLog>) {
    let replay = cfg.replay_events;
    let follower = {
        let link = link.clone();
        let served = Arc::downgrade(&served);
        async move {
            let last = loop {
                let Some(q) = served.upgrade() else { return };
                match backfill(&link, &q, replay).await {
                    Ok(last) => break last,
                    Err(_) => tokio::time::sleep(RETRY).await,
                }
            };
            log::read_on(
                Weak::new(),
                link,
                FEED_LOG.to_owned(),
                "(domain feed)".to_owned(),
                served,
                last,
                None,
            )
            .await;
        }
    };
    crate::util::background::spawn(follower);
    crate::util::background::spawn(lead(link, cfg, feed));
}

/// What the shared stream retains, into `q`; the last entry id.
async fn backfill(link: &Link, q: &ReplayLog, replay: usize) -> redis::RedisResult<String> {
    let mut conn = link.conn_anyway();
    let entries = log::retained(&mut conn, FEED_LOG, replay).await?;
    Ok(log::feed(q, entries, "(domain feed)").unwrap_or_else(|| "0-0".into()))
}

/// Where the shared stream ends: its last sequence and the last feed id it holds.
async fn end_of_log(link: &Link) -> redis::RedisResult<(u64, Option<String>)> {
    let mut conn = link.conn_anyway();
    let r: StreamRangeReply = conn.xrevrange_count(FEED_LOG, "+", "-", 1).await?;
    let Some(entry) = r.ids.into_iter().next() else {
        return Ok((0, None));
    };
    let Some(first) = keys::seq_of(&entry.id) else {
        return Ok((0, None));
    };
    let (seq, event) = match entry.map.get(keys::FIELD) {
        Some(redis::Value::BulkString(b)) => {
            keys::decode_batch(first, b).last().unwrap_or((first, None))
        }
        _ => (first, None),
    };
    Ok((seq, event.map(|e| e.event_id)))
}

/// Holds (or waits for) the feed lease; reads the source into the shared stream while held.
async fn lead(link: Arc<Link>, cfg: EventsConfig, feed: Weak<Feed>) {
    let every = link.lease / 3;
    let mut reading: Option<(watch::Sender<bool>, Arc<ReplayLog>)> = None;
    loop {
        let Some(f) = feed.upgrade() else { break };
        if f.queue().is_closed() {
            break;
        }
        // While Redis does not answer, a reader keeps reading (its exporter writes what it
        // read once Redis returns) and a follower keeps waiting: nobody else can take over.
        let Ok(held) = lease::hold(&link, FEED_LEASE).await else {
            drop(f);
            tokio::time::sleep(RETRY).await;
            continue;
        };
        match (held, &reading) {
            (true, None) => match end_of_log(&link).await {
                Ok((last_seq, last_id)) => {
                    tracing::info!(node = %link.node_id, after = ?last_id, "reading the event feed for every replica");
                    reading = start_reader(&link, &cfg, &f, last_seq, last_id);
                }
                Err(e) => {
                    link.failed(&e);
                }
            },
            (false, Some(_)) => {
                tracing::warn!(node = %link.node_id, "lost the event feed lease; another replica reads it");
                if let Some((stop, staging)) = reading.take() {
                    stop.send_replace(true);
                    staging.close();
                }
            }
            _ => {}
        }
        drop(f);
        tokio::time::sleep(every).await;
    }
    if let Some((stop, staging)) = reading.take() {
        stop.send_replace(true);
        staging.close();
    }
}

/// Starts the source reader into a queue exported to the shared stream.
fn start_reader(
    link: &Arc<Link>,
    cfg: &EventsConfig,
    feed: &Arc<Feed>,
    last_seq: u64,
    last_id: Option<String>,
) -> Option<(watch::Sender<bool>, Arc<ReplayLog>)> {
    let staging = Arc::new(
        ReplayLog::new(cfg.replay_events)
            .with_id_prefix(crate::events::feed::ID_LESS_PREFIX)
            .starting_after(last_seq),
    );
    let exported = Exporter::spawn(
        link.clone(),
        FEED_LOG.to_owned(),
        "(domain feed)".to_owned(),
        &staging,
        cfg.replay_events,
        None,
        |_| None,
    );
    if let Err(e) = exported {
        tracing::error!(error = %e, "cannot export the event feed");
        return None;
    }
    let (stop, mut stopped) = watch::channel(false);
    let reader = crate::events::feed::Reader::into(cfg, staging.clone(), last_id);
    let (cfg, feed) = (cfg.clone(), feed.clone());
    crate::util::background::spawn(async move {
        tokio::select! {
            _ = stopped.wait_for(|s| *s) => {}
            _ = reader.run(cfg, feed) => {}
        }
    });
    Some((stop, staging))
}
