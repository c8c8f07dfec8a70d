//! Pace marks: how far each replica's copy of a context's log has read, for the owner to wait on.
//!
//! A copy pushes its mark to the owner: it `PUBLISH`es it on the log's channel
//! ([`keys::pace_channel`]) in the round trip of a read, when it moved far enough to matter
//! ([`publish_step`]), and while it holds updates its subscribers have no room for, every
//! [`PACE_REFRESH`]. The owner's writer listens on that channel for as long as it lives
//! ([`Paces`]) and waits on what it hears, not on a poll. So nothing is sent while nothing is
//! written or read: a copy that caught up and an owner with nothing to write say nothing.
//!
//! The mark is also kept in a key ([`keys::pace_mark`], named in [`keys::paces`]), written with
//! each publish: an owner that starts (a takeover) or resubscribes reads them once, so it knows
//! the copies that opened before it listened.
//!
//! A mark that stops coming lapses: when it has held the owner back for [`PACE_TTL`] with no
//! word from its copy, the owner forgets it (and removes its key), so a replica that died holds
//! the owner back at most that long. A copy that closes says so at once.
//!
//! A child of [`crate::cluster::log`]: its documentation, and [`Exporter::spawn`]'s and
//! [`read_on`]'s, say who waits for whom.
//!
//! [`Exporter::spawn`]: super::Exporter::spawn
//! [`read_on`]: super::read_on

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio::time::Instant;

use super::RETRY_MIN;
use crate::cluster::{keys, Link};

/// How far past the lowest live mark of the other replicas' copies the owner's writer may put
/// the log, in logs (`sid.replay_events` each): two, so it writes the next log's worth while a
/// copy reads and pushes the last one, rather than the two taking turns, each waiting for the
/// other's round trip. Trimming never passes a live mark whatever this is (see `write`): it
/// bounds how far a burst runs ahead of the slowest copy, and so what the shared log keeps.
pub(super) const AHEAD_LOGS: usize = 2;

/// How long a mark may hold the owner back with no word from its copy before it lapses: a
/// replica that dies stops holding the owner back after this. Three refreshes.
pub(super) const PACE_TTL: Duration = Duration::from_millis(1_500);
/// How often a copy that holds updates without reading says its mark again (it may be what
/// holds the owner back, which forgets a mark it does not hear from).
pub(super) const PACE_REFRESH: Duration = Duration::from_millis(500);
/// How long a mark's key is kept after its last write: only for an owner that starts later
/// (a copy that caught up writes nothing, however long it stays open).
const MARK_KEEP_SECS: u64 = 24 * 3600;

/// How far a copy's mark moves before a read carries it: a quarter of a log. The owner then
/// sees a mark up to that far behind, which only makes it keep (and hold back) that much more;
/// a copy that holds updates without reading says every move at once.
pub(super) fn publish_step(replay: usize) -> u64 {
    (replay as u64 / 4).max(1)
}

/// The payload of a copy's mark on the channel: `{at} {node}`, or `- {node}` when it closed.
fn payload(at: Option<u64>, node: &str) -> String {
    match at {
        Some(at) => format!("{at} {node}"),
        None => format!("- {node}"),
    }
}

/// Adds to `pipe` a copy's mark (replica `node`'s copy of the log `key` has read to `at`): its
/// key, its name in the log's set of marks, and the message telling the owner; replies ignored.
pub(super) fn add_mark(pipe: &mut redis::Pipeline, key: &str, node: &str, at: u64) {
    let member = keys::pace_member(key, node);
    let paces = keys::paces(key);
    pipe.set_ex(keys::pace_mark(&member), at, MARK_KEEP_SECS)
        .ignore()
        .sadd(&paces, &member)
        .ignore()
        .expire(&paces, MARK_KEEP_SECS as i64)
        .ignore()
        .publish(keys::pace_channel(key), payload(Some(at), node))
        .ignore();
}

/// Writes [`add_mark`]'s commands in a round trip of their own.
pub(super) async fn mark(link: &Link, key: &str, node: &str, at: u64) {
    let mut pipe = redis::pipe();
    add_mark(&mut pipe, key, node, at);
    let mut conn = link.conn_anyway();
    let _: redis::RedisResult<()> = pipe.query_async(&mut conn).await;
}

/// Says that replica `node`'s copy of the log `key` closed: the owner stops waiting for it.
pub(super) async fn unmark(link: &Link, key: &str, node: &str) {
    let member = keys::pace_member(key, node);
    let mut pipe = redis::pipe();
    pipe.srem(keys::paces(key), &member)
        .ignore()
        .del(keys::pace_mark(&member))
        .ignore()
        .publish(keys::pace_channel(key), payload(None, node))
        .ignore();
    let mut conn = link.conn_anyway();
    let _: redis::RedisResult<()> = pipe.query_async(&mut conn).await;
}

/// One copy's mark as the owner knows it.
#[derive(Debug, Clone, Copy)]
struct Mark {
    at: u64,
    /// When the copy last said it.
    heard: Instant,
    /// Since when it holds the owner back (it lapses [`PACE_TTL`] after the later of the two).
    holding: Option<Instant>,
}

type Marks = HashMap<String, Mark>;

/// The owner's view of the other replicas' marks of one log, kept by a listener on the log's
/// channel that lives as long as this.
pub(super) struct Paces {
    link: Arc<Link>,
    key: String,
    tx: Arc<watch::Sender<Marks>>,
    rx: watch::Receiver<Marks>,
    listener: tokio::task::JoinHandle<()>,
}

impl Drop for Paces {
    fn drop(&mut self) {
        // Its connection goes with it: the channel is listened to no more.
        self.listener.abort();
    }
}

impl Paces {
    /// Starts listening for the marks of the log `key`'s copies.
    pub(super) fn listen(link: Arc<Link>, key: &str) -> Paces {
        let (tx, rx) = watch::channel(Marks::new());
        let tx = Arc::new(tx);
        let listener =
            crate::util::background::spawn(listen(link.clone(), key.to_owned(), tx.clone()));
        Paces {
            link,
            key: key.to_owned(),
            tx,
            rx,
            listener,
        }
    }

    /// The lowest mark known.
    pub(super) fn lowest(&self) -> Option<u64> {
        self.rx.borrow().values().map(|m| m.at).min()
    }

    /// Waits, for at most `budget`, while writing `up_to` would put the log more than `window`
    /// updates past the lowest mark, woken by each mark the copies push. A mark within `step`
    /// ([`publish_step`]) of `written` (the last update written) holds nothing back: its copy
    /// may have read all there is without having moved far enough to say so. A mark that holds
    /// it back lapses after [`PACE_TTL`] without word from its copy. Returns the lowest mark.
    pub(super) async fn hold_back(
        &mut self,
        (up_to, written): (u64, u64),
        window: usize,
        step: u64,
        budget: Duration,
    ) -> Option<u64> {
        let started = Instant::now();
        loop {
            self.rx.borrow_and_update();
            let now = Instant::now();
            let mut lapsed = Vec::new();
            let mut next_lapse: Option<Duration> = None;
            // Only this writer reads the marks: marking and forgetting them wakes nobody.
            self.tx.send_if_modified(|marks| {
                marks.retain(|node, m| {
                    if up_to.saturating_sub(m.at) <= window as u64
                        || written.saturating_sub(m.at) < step
                    {
                        m.holding = None;
                        return true;
                    }
                    let since = (*m.holding.get_or_insert(now)).max(m.heard);
                    let left = PACE_TTL.saturating_sub(now - since);
                    if left.is_zero() {
                        lapsed.push(node.clone());
                        return false;
                    }
                    next_lapse = Some(next_lapse.map_or(left, |n| n.min(left)));
                    true
                });
                false
            });
            if !lapsed.is_empty() {
                tracing::debug!(log = %self.key, nodes = ?lapsed, "pace marks lapsed");
                crate::util::background::spawn(forget(self.link.clone(), self.key.clone(), lapsed));
            }
            let Some(lapse) = next_lapse else {
                return self.lowest();
            };
            let left = budget.saturating_sub(started.elapsed());
            if left.is_zero() {
                return self.lowest();
            }
            let _ = tokio::time::timeout(left.min(lapse), self.rx.changed()).await;
        }
    }
}

/// Removes the keys of the lapsed marks of `nodes`' copies of the log `key`, so an owner that
/// starts later does not wait for them.
async fn forget(link: Arc<Link>, key: String, nodes: Vec<String>) {
    let paces = keys::paces(&key);
    let mut pipe = redis::pipe();
    for node in &nodes {
        let member = keys::pace_member(&key, node);
        pipe.srem(&paces, &member)
            .ignore()
            .del(keys::pace_mark(&member))
            .ignore();
    }
    let mut conn = link.conn_anyway();
    let _: redis::RedisResult<()> = pipe.query_async(&mut conn).await;
}

/// Applies one message of the channel to `marks`.
fn heard(marks: &mut Marks, payload: &str) {
    let Some((at, node)) = payload.split_once(' ') else {
        return;
    };
    match at.parse::<u64>() {
        Ok(at) => {
            let m = marks.entry(node.to_owned()).or_insert(Mark {
                at,
                heard: Instant::now(),
                holding: None,
            });
            m.at = at;
            m.heard = Instant::now();
        }
        Err(_) => {
            marks.remove(node);
        }
    }
}

/// The listener: subscribes to the log `key`'s channel, then reads the marks' keys once (the
/// copies that opened before), and applies every message to `tx`; subscribes again after a
/// lost connection.
async fn listen(link: Arc<Link>, key: String, tx: Arc<watch::Sender<Marks>>) {
    let channel = keys::pace_channel(&key);
    let mut delay = RETRY_MIN;
    loop {
        if let Ok(pubsub) = link.pubsub().await {
            let (mut sink, mut stream) = pubsub.split();
            if sink.subscribe(&channel).await.is_ok() {
                delay = RETRY_MIN;
                if let Ok(stored) = stored_marks(&link, &key).await {
                    tx.send_modify(|marks| {
                        for (node, at) in stored {
                            marks.entry(node).or_insert(Mark {
                                at,
                                heard: Instant::now(),
                                holding: None,
                            });
                        }
                    });
                }
                while let Some(msg) = stream.next().await {
                    if let Ok(p) = msg.get_payload::<String>() {
                        tx.send_modify(|marks| heard(marks, &p));
                    }
                }
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(1));
    }
}

/// The marks' keys of the log `key`: `SORT {paces} BY nosort GET # GET {mark}`, each copy's
/// node and mark.
async fn stored_marks(link: &Link, key: &str) -> redis::RedisResult<Vec<(String, u64)>> {
    let mut conn = link.conn_anyway();
    let flat: Vec<Option<String>> = redis::cmd("SORT")
        .arg(keys::paces(key))
        .arg("BY")
        .arg("nosort")
        .arg("GET")
        .arg("#")
        .arg("GET")
        .arg(keys::PACE_MARKS)
        .query_async(&mut conn)
        .await?;
    let prefix = keys::pace_member(key, "");
    Ok(flat
        .chunks(2)
        .filter_map(|pair| match pair {
            [Some(member), Some(at)] => {
                Some((member.strip_prefix(&prefix)?.to_owned(), at.parse().ok()?))
            }
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mark_message_moves_a_mark_and_a_closing_one_removes_it() {
        let mut marks = Marks::new();
        heard(&mut marks, &payload(Some(7), "node b"));
        assert_eq!(marks["node b"].at, 7);
        heard(&mut marks, &payload(Some(9), "node b"));
        assert_eq!(marks["node b"].at, 9);
        heard(&mut marks, &payload(None, "node b"));
        assert!(marks.is_empty());
        heard(&mut marks, "garbage");
        assert!(marks.is_empty());
    }
}
