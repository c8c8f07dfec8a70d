//! The mirrors: this replica's local copies of other replicas' context logs, and their readers.
//!
//! A child of [`crate::cluster::log`], whose documentation says how a copy is read.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::streams::{StreamId, StreamReadOptions, StreamReadReply};

use super::pace::{add_mark, mark, HOLD_POLL, PACE_REFRESH};
use super::{entry_updates, feed, last_seq_in, retained, READ_ENTRIES, RETRY_MIN};
use crate::cluster::{keys, Link};
use crate::events::EventQueue;
use crate::model::error::GatewayError;
use crate::model::event::A2aEvent;

/// How long one blocking read waits before the reader looks around (idle, dropped).
const BLOCK_MS: usize = 1_000;
/// A mirror nobody subscribed to for this long is closed; the next subscriber opens it again.
const MIRROR_IDLE: Duration = Duration::from_secs(60);

/// Local copies of other replicas' context logs. See the module docs.
pub(crate) struct Mirrors {
    link: Arc<Link>,
    replay: usize,
    max_subscribers: usize,
    /// `sid.lag_grace_ms`: how long a mirror's reader waits for its slowest subscriber.
    lag_grace: Duration,
    open: Mutex<HashMap<String, Arc<EventQueue>>>,
}

impl std::fmt::Debug for Mirrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirrors")
            .field("open", &self.lock().len())
            .finish()
    }
}

impl Mirrors {
    /// No mirror open yet.
    pub(crate) fn new(
        link: Arc<Link>,
        replay: usize,
        max_subscribers: usize,
        lag_grace: Duration,
    ) -> Arc<Self> {
        Arc::new(Mirrors {
            link,
            replay,
            max_subscribers,
            lag_grace,
            open: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<EventQueue>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The local copy of a context's log, filled with what the shared log retains before it
    /// is returned (so `Last-Event-ID` resumes exactly), then kept up to date by its reader.
    pub(crate) async fn open(
        self: &Arc<Self>,
        context_id: &str,
    ) -> Result<Arc<EventQueue>, GatewayError> {
        if let Some(q) = self.lock().get(context_id).filter(|q| !q.is_closed()) {
            return Ok(q.clone());
        }
        let key = keys::context_log(context_id);
        let mut conn = self.link.conn()?;
        let retained = retained(&mut conn, &key, self.replay)
            .await
            .map_err(|e| self.link.failed(&e))?;
        let Some(first) = retained.first().and_then(|e| keys::seq_of(&e.id)) else {
            return Err(GatewayError::ContextNotFound(context_id.to_owned()));
        };
        let queue = Arc::new(
            EventQueue::new(self.replay)
                .with_max_subscribers(self.max_subscribers)
                .starting_after(first - 1),
        );
        let last_id = feed(&queue, retained, context_id).unwrap_or_else(|| "0-0".into());
        // Marked before it serves anyone, so the owner trims nothing this copy has yet to read.
        mark(&self.link, &key, &self.link.node_id, queue.last_seq()).await;
        let queue = {
            let mut open = self.lock();
            match open.get(context_id).filter(|q| !q.is_closed()) {
                Some(raced) => return Ok(raced.clone()),
                None => {
                    open.insert(context_id.to_owned(), queue.clone());
                    queue
                }
            }
        };
        tokio::spawn(read_on(
            Arc::downgrade(self),
            self.link.clone(),
            key,
            context_id.to_owned(),
            Arc::downgrade(&queue),
            last_id,
            Some(self.lag_grace),
        ));
        Ok(queue)
    }
}

/// A mirror's read under way: its mark (when due) and `XREAD`, in one round trip.
type Reading = std::pin::Pin<
    Box<dyn std::future::Future<Output = redis::RedisResult<Option<StreamReadReply>>> + Send>,
>;

/// The reply of the read under way; never, when none is.
async fn next_read(reading: &mut Option<Reading>) -> redis::RedisResult<Option<StreamReadReply>> {
    match reading.as_mut() {
        Some(r) => r.await,
        None => std::future::pending().await,
    }
}

/// Keeps one mirror of the stream `key` up to date until it is closed, forgotten, or idle
/// (only a mirror `mirrors` holds idles out).
///
/// Entries are decoded one at a time as they are pushed, so a subscriber writes the first of a
/// read while the rest are decoded, and the next read is under way meanwhile. With `pace`
/// (`lag_grace`), the mirror's slowest subscriber paces it, as sid's output is paced in the
/// owner's log: what the reader read from Redis and that subscriber has no room for yet is
/// held, and the reader reads on only while it holds less than a read (so at most two reads'
/// worth is held; the shared log keeps the rest: the owner trims nothing past this copy's
/// mark). It waits for that subscriber up to `lag_grace` from its last progress, then overruns
/// it (a subscriber that stops reading is cut off, and holds the others up at most that long).
/// Its mark says how far it has read: written with each read, in its round trip (when it moved
/// or is due a refresh), and while it holds without reading, at most every [`HOLD_POLL`] and at
/// least every [`PACE_REFRESH`]. The owner's writer keeps within [`AHEAD_LOGS`] logs of it, so
/// a subscriber that keeps reading here holds the owner back instead of being cut off. The
/// domain feed's copies are not paced, as its source is not.
///
/// [`AHEAD_LOGS`]: super::pace::AHEAD_LOGS
pub(in crate::cluster) async fn read_on(
    mirrors: Weak<Mirrors>,
    link: Arc<Link>,
    key: String,
    context_id: String,
    queue: Weak<EventQueue>,
    mut last_id: String,
    pace: Option<Duration>,
) {
    let mut conn: Option<redis::aio::MultiplexedConnection> = None;
    let mut reading: Option<Reading> = None;
    let mut idle_since = tokio::time::Instant::now();
    let mut delay = RETRY_MIN;
    let mut held = Held::new(queue.upgrade().map_or(0, |q| q.last_seq()));
    loop {
        let Some(q) = queue.upgrade().filter(|q| !q.is_closed()) else {
            return;
        };
        let waiting = held.push(&q, &context_id, pace.is_some());
        // Only while its reader has a connection: a copy that cannot read lets its mark lapse
        // rather than hold the owner back. A read carries its own mark (`Held::start_read`).
        if pace.is_some() && conn.is_some() && reading.is_none() && waiting && held.due() {
            mark(&link, &key, &link.node_id, held.read_to).await;
            held.marked = Some((held.read_to, tokio::time::Instant::now()));
        }
        if idled_out(&mirrors, &q, &context_id, &mut idle_since) {
            return;
        }
        // The next read, unless one is under way or a read's worth waits already.
        if reading.is_none() && held.entries.len() < READ_ENTRIES {
            let c = match conn.as_ref() {
                Some(c) => c.clone(),
                None => match link.dedicated().await {
                    Ok(c) => conn.insert(c).clone(),
                    Err(_) => {
                        drop(q);
                        tokio::time::sleep(delay).await;
                        delay = (delay * 2).min(Duration::from_secs(1));
                        continue;
                    }
                },
            };
            reading = Some(held.start_read(c, &key, &last_id, &link.node_id, pace.is_some()));
        }
        let read = match (pace, waiting) {
            (Some(grace), true) => {
                let since = *held.since.get_or_insert_with(tokio::time::Instant::now);
                let left = grace.saturating_sub(since.elapsed());
                tokio::select! {
                    r = next_read(&mut reading) => Some(r),
                    // Room made, or the grace is over and the slow subscriber is overrun.
                    _ = q.room(left) => None,
                    // Time to refresh the mark.
                    _ = tokio::time::sleep(PACE_REFRESH) => None,
                }
            }
            _ => {
                drop(q);
                Some(next_read(&mut reading).await)
            }
        };
        let Some(read) = read else { continue };
        reading = None;
        match read {
            Ok(reply) => {
                delay = RETRY_MIN;
                held.took(reply, &mut last_id);
            }
            Err(e) => {
                tracing::debug!(context = %context_id, error = %e, "a context log read failed; reconnecting");
                conn = None;
                held.marked = None;
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
            }
        }
    }
}

/// What a mirror's reader holds between its reads, and how far its mark says it read.
struct Held {
    // Entries read from Redis not yet decoded, the updates of the one being pushed, and since
    // when nothing could be pushed (waiting for the slowest subscriber).
    entries: VecDeque<StreamId>,
    decoded: VecDeque<(u64, A2aEvent)>,
    since: Option<tokio::time::Instant>,
    // How far it read from Redis, and the mark last written (what, when).
    read_to: u64,
    marked: Option<(u64, tokio::time::Instant)>,
}

impl Held {
    /// Nothing held, read to `read_to`, no mark written yet.
    fn new(read_to: u64) -> Self {
        Held {
            entries: VecDeque::new(),
            decoded: VecDeque::new(),
            since: None,
            read_to,
            marked: None,
        }
    }

    /// Pushes into `q` what it holds, decoding an entry at a time, while `q` has room (or
    /// always, unless `paced`). Returns whether it still holds anything.
    fn push(&mut self, q: &EventQueue, context_id: &str, paced: bool) -> bool {
        let mut pushed = false;
        loop {
            if self.decoded.is_empty() {
                let Some(entry) = self.entries.pop_front() else {
                    break;
                };
                entry_updates(&entry, context_id, &mut self.decoded);
                continue;
            }
            if paced && !q.has_room() {
                break;
            }
            if let Some((seq, ev)) = self.decoded.pop_front() {
                let _ = q.push_at(seq, ev);
                pushed = true;
            }
        }
        let waiting = !self.entries.is_empty() || !self.decoded.is_empty();
        if pushed || !waiting {
            self.since = None;
        }
        waiting
    }

    /// Whether its mark is due: never written, moved (and [`HOLD_POLL`] old), or due a refresh.
    #[inline]
    fn due(&self) -> bool {
        match self.marked {
            None => true,
            Some((at, when)) => {
                (at != self.read_to && when.elapsed() >= HOLD_POLL)
                    || when.elapsed() >= PACE_REFRESH
            }
        }
    }

    /// The next read on `c` of the stream `key` past `last_id`, with its mark (of the replica
    /// `node`) when `paced` and due.
    fn start_read(
        &mut self,
        c: redis::aio::MultiplexedConnection,
        key: &str,
        last_id: &str,
        node: &str,
        paced: bool,
    ) -> Reading {
        // The mark goes in the read's round trip, written before the read blocks: the
        // owner sees how far this copy got as soon as it asks for more.
        let mut pipe = redis::pipe();
        if paced && self.due() {
            add_mark(&mut pipe, key, node, self.read_to);
            self.marked = Some((self.read_to, tokio::time::Instant::now()));
        }
        let opts = StreamReadOptions::default()
            .count(READ_ENTRIES)
            .block(BLOCK_MS);
        pipe.xread_options(&[key], &[last_id], &opts);
        Box::pin(async move {
            let mut c = c;
            pipe.query_async::<(Option<StreamReadReply>,)>(&mut c)
                .await
                .map(|(r,)| r)
        })
    }

    /// Holds the entries of a read's `reply`, and moves `last_id` and how far it read past them.
    fn took(&mut self, reply: Option<StreamReadReply>, last_id: &mut String) {
        for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
            if let Some(last) = last_seq_in(&entry) {
                self.read_to = self.read_to.max(last);
            }
            last_id.clone_from(&entry.id);
            self.entries.push_back(entry);
        }
    }
}

/// Whether the mirror `q` idled out: nobody subscribed for [`MIRROR_IDLE`] since `idle_since`
/// (set to now while someone is), so it is closed and `mirrors` holds it no more.
fn idled_out(
    mirrors: &Weak<Mirrors>,
    q: &Arc<EventQueue>,
    context_id: &str,
    idle_since: &mut tokio::time::Instant,
) -> bool {
    if q.subscriber_count() > 0 {
        *idle_since = tokio::time::Instant::now();
    } else if idle_since.elapsed() >= MIRROR_IDLE {
        if let Some(m) = mirrors.upgrade() {
            let mut open = m.lock();
            if q.subscriber_count() == 0 && open.get(context_id).is_some_and(|o| Arc::ptr_eq(o, q))
            {
                open.remove(context_id);
                q.close();
                return true;
            }
        }
    }
    false
}
