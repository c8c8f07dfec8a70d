//! A context's event log in Redis: written by the replica that runs the context, read back by
//! every other replica that serves one of its streams.
//!
//! Writing: an [`Exporter`] is one more cursor on the context's local
//! [`EventQueue`]; it appends what it reads to the context's stream, one entry per batch read
//! (`XADD … MINID ~ … {first seq}-0`, see [`keys`]), pipelined with the snapshots of the tasks
//! those events changed (during a run of text deltas, with the batch that ends the run, a
//! status change, or every [`SNAPSHOT_EVERY`]: a snapshot holds all the task's text so far).
//! The producer (sid's stdout) never waits on Redis: it waits for the exporter only as it waits
//! for any reader that lags, for at most `sid.lag_grace_ms`.
//!
//! Reading: a [`Mirrors`] entry is a local queue fed by one `XREAD BLOCK` loop on a connection of
//! its own, under the ids the stream carries; any number of SSE subscribers on this replica read
//! it through cursors, exactly as they read a local context's queue.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::streams::{StreamId, StreamRangeReply, StreamReadOptions, StreamReadReply};
use redis::AsyncCommands;
use tokio::sync::watch;

use super::keys::{self, StoredTask};
use super::Link;
use crate::bridge::mapping::Task;
use crate::error::GatewayError;
use crate::events::{A2aEvent, EventQueue, Payload, Read, Stored};

/// Most events written in one pipeline.
const BATCH: usize = 256;
/// Most entries one blocking read returns (each holds at most [`BATCH`] updates).
const READ_ENTRIES: usize = 16;
/// How long one blocking read waits before the reader looks around (idle, dropped).
const BLOCK_MS: usize = 1_000;
/// A mirror nobody subscribed to for this long is closed; the next subscriber opens it again.
const MIRROR_IDLE: Duration = Duration::from_secs(60);
/// How long a task's shared snapshot outlives its last change.
pub const TASK_TTL_SECS: u64 = 24 * 3600;
/// Tasks kept in the shared index (ListTasks); the oldest leave first.
pub const TASK_INDEX_MAX: isize = 10_000;
/// How long a task's shared snapshot may trail a run of text deltas (see [`Exporter`]).
const SNAPSHOT_EVERY: Duration = Duration::from_millis(100);
/// First retry delay after a failed write; doubles up to a second.
const RETRY_MIN: Duration = Duration::from_millis(50);

/// The last sequence of a context written to Redis, for callers that must not answer before
/// other replicas can read what they answer about.
pub type Flushed = watch::Receiver<u64>;

/// See the module docs.
pub struct Exporter;

impl Exporter {
    /// Starts exporting every event pushed into `queue` from now on to the stream `key`
    /// (subscribe before the context produces anything). `task_of` reads a task's current
    /// model; `context_id` names the context the tasks belong to. With `lag_grace`, a batch
    /// waits (at most half of it at a time) while it would put the log more than `replay`
    /// updates past what another replica's copy has read ([`keys::pace_mark`]): the owner's
    /// producer then waits for this writer as for any lagging reader, so a burst is paced by
    /// the slowest subscriber of every replica, not only of this one. Whatever it waits for, it
    /// never trims the shared log past a live copy's mark, so that copy finds no hole.
    pub fn spawn(
        link: Arc<Link>,
        key: String,
        context_id: String,
        queue: &Arc<EventQueue>,
        replay: usize,
        lag_grace: Option<Duration>,
        task_of: impl Fn(&str) -> Option<Task> + Send + Sync + 'static,
    ) -> Result<Flushed, GatewayError> {
        let mut cursor = queue.subscribe_live()?.cursor;
        let (tx, rx) = watch::channel(queue.last_seq());
        let paces = keys::paces(&key);
        tokio::spawn(async move {
            let mut batch: Vec<Arc<Stored>> = Vec::with_capacity(BATCH);
            // The lowest live mark of the other replicas' copies, as last read (with each
            // write, so a new copy is seen within a batch of opening).
            let mut lowest: Option<u64> = None;
            // Tasks changed since their snapshots were last written, and when that was.
            let mut dirty: Vec<String> = Vec::new();
            let mut snapped = tokio::time::Instant::now();
            loop {
                batch.clear();
                match cursor.read(&mut batch, BATCH) {
                    Read::Events(_) => {}
                    Read::Empty => {
                        cursor.changed().await;
                        continue;
                    }
                    Read::Lagged(n) => {
                        tracing::error!(context = %context_id, missed = n,
                            "Redis fell behind this context's events; other replicas miss them");
                        metrics::counter!("wiregate_cluster_events_lost_total").increment(n);
                        continue;
                    }
                    Read::Closed => return,
                }
                if let (Some(grace), Some(last)) = (lag_grace, batch.last()) {
                    lowest = hold_back(&link, &paces, lowest, last.seq, replay, grace / 2).await;
                }
                for t in batch.iter().filter_map(|s| s.event.plan_id.as_deref()) {
                    if !dirty.iter().any(|d| d == t) {
                        dirty.push(t.to_owned());
                    }
                }
                // A task's snapshot holds all its text so far: written with every batch of a
                // long burst, it would cost the owner that text again per batch. So a run of
                // text deltas leaves it to the batch that ends the run (the log has no more
                // for now), a status change, or SNAPSHOT_EVERY.
                let snapshot = batch
                    .iter()
                    .any(|s| !matches!(s.event.data, Payload::Delta(_)))
                    || cursor.behind() == 0
                    || snapped.elapsed() >= SNAPSHOT_EVERY;
                let tasks: &[String] = if snapshot { &dirty } else { &[] };
                let marks = lag_grace.is_some().then_some((paces.as_str(), lowest));
                let ctx = (context_id.as_str(), tasks, &task_of);
                lowest = write(&link, &key, ctx, &batch, replay, marks).await;
                if snapshot {
                    dirty.clear();
                    snapped = tokio::time::Instant::now();
                }
                if let Some(last) = batch.last() {
                    tx.send_replace(last.seq);
                }
            }
        });
        Ok(rx)
    }
}

/// How often a writer held back by another replica looks again, and how often at most a copy
/// refreshes its mark while it reads on.
const HOLD_POLL: Duration = Duration::from_millis(1);
/// How long a replica's pace mark outlives its last refresh: a replica that dies stops holding
/// the owner back after this. Longer than a blocking read, as a copy refreshes between reads.
const PACE_TTL_MS: u64 = 1_500;
/// How often a copy refreshes its mark when nothing moved.
const PACE_REFRESH: Duration = Duration::from_millis(PACE_TTL_MS / 3);

/// `SORT {paces} BY nosort GET {mark}`: every mark of a log, lapsed ones as nil.
fn marks_cmd(paces: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("SORT");
    cmd.arg(paces)
        .arg("BY")
        .arg("nosort")
        .arg("GET")
        .arg(keys::PACE_MARKS);
    cmd
}

/// The lowest of the live marks a `SORT` of [`marks_cmd`] returned.
fn lowest_of(marks: Vec<Option<u64>>) -> Option<u64> {
    marks.into_iter().flatten().min()
}

/// Waits, for at most `budget`, while writing `up_to` would put the log more than `replay`
/// updates past the lowest live mark (`lowest`, as last read; read again every
/// [`HOLD_POLL`] while it waits). Returns the lowest mark it last saw.
async fn hold_back(
    link: &Link,
    paces: &str,
    mut lowest: Option<u64>,
    up_to: u64,
    replay: usize,
    budget: Duration,
) -> Option<u64> {
    let started = tokio::time::Instant::now();
    loop {
        match lowest {
            Some(at) if up_to.saturating_sub(at) > replay as u64 => {}
            _ => return lowest,
        }
        if started.elapsed() >= budget {
            return lowest;
        }
        tokio::time::sleep(HOLD_POLL).await;
        let mut conn = link.conn_anyway();
        match marks_cmd(paces).query_async(&mut conn).await {
            Ok(marks) => lowest = lowest_of(marks),
            Err(_) => return lowest,
        }
    }
}

/// Writes one batch, retrying until Redis takes it; a retry skips what an earlier attempt
/// already wrote (the stream's last id says how far it got). With `marks` (the log's
/// [`keys::paces`] and the lowest mark last read), the trim keeps what that copy has not read,
/// and the marks are read again in the same round trip: returns the lowest. With it go the
/// snapshots of `tasks` (of the context `context_id`, read with `task_of`).
async fn write(
    link: &Link,
    key: &str,
    (context_id, tasks, task_of): (
        &str,
        &[String],
        &(impl Fn(&str) -> Option<Task> + Send + Sync),
    ),
    batch: &[Arc<Stored>],
    replay: usize,
    marks: Option<(&str, Option<u64>)>,
) -> Option<u64> {
    let mut delay = RETRY_MIN;
    let mut written_up_to = 0u64;
    loop {
        let mut conn = link.conn_anyway();
        let mut pipe = redis::pipe();
        let rest = batch
            .iter()
            .position(|s| s.seq > written_up_to)
            .map_or(&[][..], |i| &batch[i..]);
        let (Some(first), Some(last)) = (rest.first(), rest.last()) else {
            return marks.and_then(|(_, lowest)| lowest);
        };
        // Entries older than the one that can hold the `replay`th last update go (`~`: whole
        // nodes of the stream, so somewhat more stays), so the log keeps at least `replay`
        // updates however many each entry holds; and none a live copy has not read yet (the
        // next entry it reads starts just after its mark).
        let mut min_seq = (last.seq + 1).saturating_sub((replay + BATCH) as u64);
        if let Some((_, Some(lowest))) = marks {
            min_seq = min_seq.min(lowest + 1);
        }
        pipe.cmd("XADD")
            .arg(key)
            .arg("MINID")
            .arg("~")
            .arg(keys::entry_id(min_seq))
            .arg(keys::entry_id(first.seq))
            .arg(keys::FIELD)
            .arg(keys::encode_batch(rest.iter().map(|s| (s.seq, &s.event))))
            .ignore();
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        for t in tasks {
            let Some(task) = task_of(t) else { continue };
            let stored = StoredTask {
                context: context_id.to_owned(),
                task,
            };
            let Ok(json) = serde_json::to_string(&stored) else {
                continue;
            };
            pipe.cmd("SET")
                .arg(keys::task(t))
                .arg(json)
                .arg("EX")
                .arg(TASK_TTL_SECS)
                .ignore();
            pipe.cmd("ZADD")
                .arg(keys::TASK_INDEX)
                .arg(now_ms)
                .arg(t)
                .ignore();
        }
        if !tasks.is_empty() {
            pipe.cmd("ZREMRANGEBYRANK")
                .arg(keys::TASK_INDEX)
                .arg(0)
                .arg(-(TASK_INDEX_MAX + 1))
                .ignore();
        }
        if let Some((paces, _)) = marks {
            pipe.add_command(marks_cmd(paces));
        }
        let done = match marks {
            Some(_) => pipe
                .query_async::<(Vec<Option<u64>>,)>(&mut conn)
                .await
                .map(|(m,)| lowest_of(m)),
            None => pipe.query_async::<()>(&mut conn).await.map(|()| None),
        };
        match done {
            Ok(lowest) => return lowest,
            Err(e) => {
                link.failed(&e);
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
                // How far the failed attempt got, so the retry appends only the rest.
                let last: redis::RedisResult<StreamRangeReply> =
                    conn.xrevrange_count(key, "+", "-", 1).await;
                if let Ok(r) = last {
                    written_up_to = r.ids.first().and_then(last_seq_in).unwrap_or(0);
                }
            }
        }
    }
}

/// The last SSE id in a context's shared log (0 when it has none): where a replica taking the
/// context over continues numbering.
pub async fn last_seq(link: &Link, context_id: &str) -> Result<u64, GatewayError> {
    let mut conn = link.conn()?;
    let r: StreamRangeReply = conn
        .xrevrange_count(keys::context_log(context_id), "+", "-", 1)
        .await
        .map_err(|e| link.failed(&e))?;
    Ok(r.ids.first().and_then(last_seq_in).unwrap_or(0))
}

/// The sequence of the last update an entry holds.
pub(super) fn last_seq_in(entry: &StreamId) -> Option<u64> {
    let first = keys::seq_of(&entry.id)?;
    match entry.map.get(keys::FIELD) {
        Some(redis::Value::BulkString(b)) => Some(keys::last_in_batch(first, b)),
        _ => Some(first),
    }
}

/// The entries of the stream `key` holding its last `replay` updates (and a few more), oldest
/// first.
pub(super) async fn retained(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
    replay: usize,
) -> redis::RedisResult<Vec<StreamId>> {
    let last: StreamRangeReply = redis::cmd("XREVRANGE")
        .arg(key)
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(conn)
        .await?;
    let Some(end) = last.ids.first().and_then(last_seq_in) else {
        return Ok(Vec::new());
    };
    // The entry holding update `end + 1 - replay` starts at most a batch before it.
    let from = (end + 1).saturating_sub((replay + BATCH) as u64);
    let r: StreamRangeReply = redis::cmd("XRANGE")
        .arg(key)
        .arg(keys::entry_id(from))
        .arg("+")
        .query_async(conn)
        .await?;
    Ok(r.ids)
}

/// The updates stream entries hold, with their sequences, and the last entry id seen.
fn updates(entries: Vec<StreamId>, context_id: &str) -> (Vec<(u64, A2aEvent)>, Option<String>) {
    let mut out = Vec::with_capacity(entries.len());
    let mut last = None;
    for entry in entries {
        let Some(first) = keys::seq_of(&entry.id) else {
            continue;
        };
        let Some(redis::Value::BulkString(value)) = entry.map.get(keys::FIELD) else {
            tracing::warn!(context = %context_id, id = %entry.id, "an unreadable entry in a context's log");
            continue;
        };
        for (seq, event) in keys::decode_batch(first, value) {
            match event {
                Some(ev) => out.push((seq, ev)),
                None => {
                    tracing::warn!(context = %context_id, id = %entry.id, seq, "an unreadable update in a context's log")
                }
            }
        }
        last = Some(entry.id);
    }
    (out, last)
}

/// Pushes the updates of stream entries into a mirror queue; returns the last entry id seen.
pub(super) fn feed(queue: &EventQueue, entries: Vec<StreamId>, context_id: &str) -> Option<String> {
    let (updates, last) = updates(entries, context_id);
    for (seq, ev) in updates {
        let _ = queue.push_at(seq, ev);
    }
    last
}

/// Local copies of other replicas' context logs. See the module docs.
pub struct Mirrors {
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
    pub fn new(
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

    /// Closes the mirror of a context this replica now runs itself.
    pub fn forget(&self, context_id: &str) {
        if let Some(q) = self.lock().remove(context_id) {
            q.close();
        }
    }

    /// The local copy of a context's log, filled with what the shared log retains before it
    /// is returned (so `Last-Event-ID` resumes exactly), then kept up to date by its reader.
    pub async fn open(self: &Arc<Self>, context_id: &str) -> Result<Arc<EventQueue>, GatewayError> {
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

/// Says how far a replica's copy of the log `key` has read (`at`, an SSE id): its mark, and
/// the mark's name in the log's set of marks, both lapsing unless refreshed.
async fn mark(link: &Link, key: &str, node: &str, at: u64) {
    let member = keys::pace_member(key, node);
    let paces = keys::paces(key);
    let mut conn = link.conn_anyway();
    let _: redis::RedisResult<()> = redis::pipe()
        .cmd("SET")
        .arg(keys::pace_mark(&member))
        .arg(at)
        .arg("PX")
        .arg(PACE_TTL_MS)
        .ignore()
        .cmd("SADD")
        .arg(&paces)
        .arg(&member)
        .ignore()
        .cmd("PEXPIRE")
        .arg(&paces)
        .arg(PACE_TTL_MS)
        .ignore()
        .query_async(&mut conn)
        .await;
}

/// Keeps one mirror of the stream `key` up to date until it is closed, forgotten, or idle
/// (only a mirror `mirrors` holds idles out).
///
/// With `pace` (`lag_grace`), the mirror's slowest subscriber paces it, as sid's output is
/// paced in the owner's log: what the reader read from Redis and that subscriber has no room
/// for yet is held, and the reader reads nothing more from Redis until it has pushed it (the
/// shared log keeps the rest: the owner trims nothing past this copy's mark). It waits for that
/// subscriber up to `lag_grace` from its last progress, then overruns it (a subscriber that
/// stops reading is cut off, and holds the others up at most that long). Its mark says how far
/// it has read, refreshed at most every [`HOLD_POLL`] while it moves, and before a long
/// blocking read: the owner's writer keeps within `replay` updates of it, so a subscriber that
/// keeps reading here holds the owner back instead of being cut off. The domain feed's copies
/// are not paced, as its source is not.
pub(super) async fn read_on(
    mirrors: Weak<Mirrors>,
    link: Arc<Link>,
    key: String,
    context_id: String,
    queue: Weak<EventQueue>,
    mut last_id: String,
    pace: Option<Duration>,
) {
    let mut conn = None;
    let mut idle_since = tokio::time::Instant::now();
    let mut delay = RETRY_MIN;
    // Read from Redis, not yet pushed (waiting for the slowest subscriber), and since when
    // nothing of it could be pushed.
    let mut held: std::collections::VecDeque<(u64, A2aEvent)> = Default::default();
    let mut held_since: Option<tokio::time::Instant> = None;
    // How far it read from Redis, and the mark last written (what, when).
    let mut read_to = queue.upgrade().map_or(0, |q| q.last_seq());
    let mut marked: Option<(u64, tokio::time::Instant)> = None;
    loop {
        let Some(q) = queue.upgrade().filter(|q| !q.is_closed()) else {
            return;
        };
        let mut pushed = false;
        while let Some((seq, ev)) = held.pop_front() {
            if pace.is_some() && !q.has_room() {
                held.push_front((seq, ev));
                break;
            }
            let _ = q.push_at(seq, ev);
            pushed = true;
        }
        if pushed || held.is_empty() {
            held_since = None;
        }
        // Only while its reader has a connection: a copy that cannot read lets its mark lapse
        // rather than hold the owner back.
        if pace.is_some() && conn.is_some() {
            let due = match marked {
                None => true,
                Some((at, when)) => {
                    (at != read_to && when.elapsed() >= HOLD_POLL) || when.elapsed() >= PACE_REFRESH
                }
            };
            if due {
                mark(&link, &key, &link.node_id, read_to).await;
                marked = Some((read_to, tokio::time::Instant::now()));
            }
        }
        if q.subscriber_count() > 0 {
            idle_since = tokio::time::Instant::now();
        } else if idle_since.elapsed() >= MIRROR_IDLE {
            if let Some(m) = mirrors.upgrade() {
                let mut open = m.lock();
                if q.subscriber_count() == 0
                    && open.get(&context_id).is_some_and(|o| Arc::ptr_eq(o, &q))
                {
                    open.remove(&context_id);
                    q.close();
                    return;
                }
            }
        }
        if let (Some(grace), false) = (pace, held.is_empty()) {
            let since = *held_since.get_or_insert_with(tokio::time::Instant::now);
            let left = grace.saturating_sub(since.elapsed());
            tokio::select! {
                // Room made, or the grace is over and the slow subscriber is overrun.
                _ = q.room(left) => {}
                // Time to refresh the mark.
                _ = tokio::time::sleep(PACE_REFRESH) => {}
            }
            continue;
        }
        drop(q);
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match link.dedicated().await {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                    continue;
                }
            },
        };
        // A mark not yet written waits at most a short read: the owner may be waiting for it.
        let stale = pace.is_some() && marked.is_some_and(|(at, _)| at != read_to);
        let opts = StreamReadOptions::default()
            .count(READ_ENTRIES)
            .block(if stale { 1 } else { BLOCK_MS });
        let (streams, ids) = ([&key], [&last_id]);
        match c
            .xread_options::<_, _, Option<StreamReadReply>>(&streams, &ids, &opts)
            .await
        {
            Ok(reply) => {
                delay = RETRY_MIN;
                for k in reply.into_iter().flat_map(|r| r.keys) {
                    let (updates, last) = updates(k.ids, &context_id);
                    if let Some((seq, _)) = updates.last() {
                        read_to = read_to.max(*seq);
                    }
                    held.extend(updates);
                    if let Some(id) = last {
                        last_id = id;
                    }
                }
            }
            Err(e) => {
                tracing::debug!(context = %context_id, error = %e, "a context log read failed; reconnecting");
                conn = None;
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
            }
        }
    }
}
