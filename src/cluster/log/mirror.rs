//! The mirrors: this replica's local copies of other replicas' context logs, and their readers.
//!
//! A child of [`crate::cluster::log`], whose documentation says how a copy is read.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::streams::{StreamId, StreamReadOptions, StreamReadReply};

use super::pace::{add_mark, mark, publish_step, unmark, PACE_REFRESH};
use super::{entry_updates, feed, last_seq_in, retained, READ_ENTRIES, RETRY_MIN};
use crate::cluster::{keys, Link};
use crate::events::ReplayLog;
use crate::model::error::GatewayError;
use crate::model::event::A2aEvent;

/// How often a reader whose read blocks looks around (idle, closed, Redis lost): locally, the
/// read stays under way (`XREAD BLOCK 0`: no command while nothing is written).
const LOOK_AROUND: Duration = Duration::from_secs(1);
/// A mirror nobody subscribed to for this long is closed; the next subscriber opens it again.
const MIRROR_IDLE: Duration = Duration::from_secs(60);

/// Local copies of other replicas' context logs. See the module docs.
pub(crate) struct Mirrors {
    link: Arc<Link>,
    replay: usize,
    max_subscribers: usize,
    /// `sid.lag_grace_ms`: how long a mirror's reader waits for its slowest subscriber.
    lag_grace: Duration,
    open: Mutex<HashMap<String, Arc<ReplayLog>>>,
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

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<ReplayLog>>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The local copy of a context's log, filled with what the shared log retains before it
    /// is returned (so `Last-Event-ID` resumes exactly), then kept up to date by its reader.
    pub(crate) async fn open(
        self: &Arc<Self>,
        context_id: &str,
    ) -> Result<Arc<ReplayLog>, GatewayError> {
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
            ReplayLog::new(self.replay)
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
        crate::util::background::spawn(read_on(
            Arc::downgrade(self),
            self.link.clone(),
            key,
            context_id.to_owned(),
            Arc::downgrade(&queue),
            last_id,
            Some((self.lag_grace, publish_step(self.replay))),
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
/// Its mark says how far it has read, pushed to the owner (see [`super::pace`]): in the round
/// trip of a read once it moved `step` since it was last said, and while it holds without
/// reading, each move at once and every [`PACE_REFRESH`]. The owner's writer keeps within
/// [`AHEAD_LOGS`] logs of it, so a subscriber that keeps reading here holds the owner back
/// instead of being cut off. A read blocks until there is something to read (`BLOCK 0`, on a
/// connection of its own, dropped to stop it), so a copy of a quiet log sends nothing. The
/// domain feed's copies are not paced, as its source is not. A paced copy's mark is said by
/// its opener ([`Mirrors::open`]) before the reader starts, at the id it starts from.
///
/// [`AHEAD_LOGS`]: super::pace::AHEAD_LOGS
pub(in crate::cluster) async fn read_on(
    mirrors: Weak<Mirrors>,
    link: Arc<Link>,
    key: String,
    context_id: String,
    queue: Weak<ReplayLog>,
    last_id: String,
    pace: Option<(Duration, u64)>,
) {
    let paced = pace.is_some();
    let reader = Reader {
        mirrors,
        link: link.clone(),
        key,
        context_id,
        queue,
    };
    reader.run(last_id, pace).await;
    if paced {
        // Closed: the owner waits for this copy no more.
        unmark(&link, &reader.key, &link.node_id).await;
    }
}

/// What one mirror's reader keeps up to date (see [`read_on`]).
struct Reader {
    mirrors: Weak<Mirrors>,
    link: Arc<Link>,
    key: String,
    context_id: String,
    queue: Weak<ReplayLog>,
}

impl Reader {
    /// [`read_on`]'s loop.
    async fn run(&self, mut last_id: String, pace: Option<(Duration, u64)>) {
        let Reader {
            mirrors,
            link,
            key,
            context_id,
            queue,
        } = self;
        let key = key.as_str();
        let context_id = context_id.as_str();
        let mut conn: Option<redis::aio::MultiplexedConnection> = None;
        let mut reading: Option<Reading> = None;
        let mut idle_since = tokio::time::Instant::now();
        let mut delay = RETRY_MIN;
        let step = pace.map_or(u64::MAX, |(_, step)| step);
        let mut held = Held::new(queue.upgrade().map_or(0, |q| q.last_seq()), step);
        if pace.is_some() {
            // Said already, by `Mirrors::open` before it served anyone.
            held.marked = Some((held.read_to, tokio::time::Instant::now()));
        }
        loop {
            let Some(q) = queue.upgrade().filter(|q| !q.is_closed()) else {
                return;
            };
            let waiting = held.push(&q, context_id, pace.is_some());
            // Only while its reader has a connection: a copy that cannot read lets its mark lapse
            // rather than hold the owner back. A read carries its own mark (`Held::start_read`).
            if pace.is_some() && conn.is_some() && reading.is_none() && waiting && held.due(true) {
                mark(link, key, &link.node_id, held.read_to).await;
                held.marked = Some((held.read_to, tokio::time::Instant::now()));
            }
            if idled_out(mirrors, &q, context_id, &mut idle_since) {
                return;
            }
            // Redis lost (the link's own check says so): a blocked read on a connection that
            // died without a word would wait for ever; the next read goes on a new connection.
            if reading.is_some() && !link.is_up() {
                reading = None;
                conn = None;
                held.marked = None;
            }
            // The next read, unless one is under way or a read's worth waits already.
            if reading.is_none() && held.entries.len() < READ_ENTRIES {
                let c = match conn.as_ref() {
                    Some(c) => c.clone(),
                    // Not while the link says Redis is lost (it looks again every 500 ms):
                    // a read dropped for that would otherwise be taken up again at once.
                    None => match link.is_up().then(|| link.dedicated()) {
                        Some(connecting) => match connecting.await {
                            Ok(c) => conn.insert(c).clone(),
                            Err(_) => {
                                drop(q);
                                tokio::time::sleep(delay).await;
                                delay = (delay * 2).min(Duration::from_secs(1));
                                continue;
                            }
                        },
                        None => {
                            drop(q);
                            tokio::time::sleep(RETRY_MIN).await;
                            continue;
                        }
                    },
                };
                let paced = pace.is_some();
                reading = Some(held.start_read(c, key, &last_id, &link.node_id, (paced, waiting)));
            }
            let read = match (pace, waiting) {
                (Some((grace, _)), true) => {
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
                    tokio::select! {
                        r = next_read(&mut reading) => Some(r),
                        // Look around; the read stays under way.
                        _ = tokio::time::sleep(LOOK_AROUND) => None,
                    }
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
}

/// What a mirror's reader holds between its reads, and how far its mark says it read.
struct Held {
    // Entries read from Redis not yet decoded, the updates of the one being pushed, and since
    // when nothing could be pushed (waiting for the slowest subscriber).
    entries: VecDeque<StreamId>,
    decoded: VecDeque<(u64, A2aEvent)>,
    since: Option<tokio::time::Instant>,
    // How far it read from Redis, and the mark last said (what, when).
    read_to: u64,
    marked: Option<(u64, tokio::time::Instant)>,
    // How far the mark moves before a read carries it.
    step: u64,
}

impl Held {
    /// Nothing held, read to `read_to`, no mark said yet; a read carries the mark once it moved
    /// `step`.
    fn new(read_to: u64, step: u64) -> Self {
        Held {
            entries: VecDeque::new(),
            decoded: VecDeque::new(),
            since: None,
            read_to,
            marked: None,
            step,
        }
    }

    /// Pushes into `q` what it holds, decoding an entry at a time, while `q` has room (or
    /// always, unless `paced`). Returns whether it still holds anything.
    fn push(&mut self, q: &ReplayLog, context_id: &str, paced: bool) -> bool {
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

    /// Whether its mark is due: never said, or moved `step`; while it holds updates without
    /// reading (`waiting`: it may be what holds the owner back), moved at all or due a refresh.
    /// Never merely because time passed while nothing is held: a copy that caught up is silent.
    #[inline]
    fn due(&self, waiting: bool) -> bool {
        match self.marked {
            None => true,
            Some((at, when)) => {
                self.read_to >= at.saturating_add(self.step)
                    || (waiting && (at != self.read_to || when.elapsed() >= PACE_REFRESH))
            }
        }
    }

    /// The next read on `c` of the stream `key` past `last_id`, with its mark (of the replica
    /// `node`) when `paced` and due (`waiting`: see [`Held::due`]).
    fn start_read(
        &mut self,
        c: redis::aio::MultiplexedConnection,
        key: &str,
        last_id: &str,
        node: &str,
        (paced, waiting): (bool, bool),
    ) -> Reading {
        // The mark goes in the read's round trip, written before the read blocks: the
        // owner sees how far this copy got as soon as it asks for more.
        let mut pipe = redis::pipe();
        if paced && self.due(waiting) {
            add_mark(&mut pipe, key, node, self.read_to);
            self.marked = Some((self.read_to, tokio::time::Instant::now()));
        }
        let opts = StreamReadOptions::default().count(READ_ENTRIES).block(0);
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
    q: &Arc<ReplayLog>,
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
