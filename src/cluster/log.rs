//! A context's event log in Redis: written by the replica that runs the context, read back by
//! every other replica that serves one of its streams.
//!
//! Writing: an [`Exporter`] is one more cursor on the context's local
//! [`EventQueue`]; it appends whatever the log holds past it (up to [`WRITE_MAX`] updates) in
//! one round trip, as entries of up to [`BATCH`] updates (`XADD … {first seq}-0`, the last
//! with `MINID ~ …`, see [`keys`]), pipelined with the snapshots of the tasks those events
//! changed (during a run of text deltas, with the batch that ends the run, a
//! status change, or every [`SNAPSHOT_EVERY`]: a snapshot holds all the task's text so far).
//! The producer (sid's stdout) never waits on Redis: it waits for the exporter only as it waits
//! for any reader that lags, for at most `sid.lag_grace_ms`.
//!
//! Reading: a [`Mirrors`] entry is a local queue fed by one `XREAD BLOCK` loop on a connection of
//! its own (see [`read_on`]), under the ids the stream carries; any number of SSE subscribers on this replica read
//! it through cursors, exactly as they read a local context's queue.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::streams::{StreamId, StreamRangeReply, StreamReadOptions, StreamReadReply};
use redis::AsyncCommands;
use tokio::sync::watch;

use super::keys::{self, StoredTask};
use super::Link;
use crate::events::{EventQueue, Read, Stored};
use crate::model::error::GatewayError;
use crate::model::event::A2aEvent;
use crate::model::payload::Payload;
use crate::model::task::Task;

/// Most updates one stream entry holds.
const BATCH: usize = 256;
/// Most entries one blocking read returns (each holds at most [`BATCH`] updates).
const READ_ENTRIES: usize = 16;
/// Most updates one write carries (as entries of up to [`BATCH`], in one round trip): what a
/// copy reads at once.
const WRITE_MAX: usize = READ_ENTRIES * BATCH;
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
/// How long a context's log stays quiet before the snapshots a run of text deltas left are
/// written: a run has ended, not merely paused between two reads of sid's output.
const RUN_QUIET: Duration = Duration::from_millis(10);
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
    /// model; `context_id` names the context the tasks belong to. With `lag_grace`, a write
    /// waits (at most half of it at a time) while its first entry would put the log more than
    /// [`AHEAD_LOGS`] logs (of `replay` updates) past what another replica's copy has read
    /// ([`keys::pace_mark`]), and carries no more than keeps within that: the owner's
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
        let window = AHEAD_LOGS * replay;
        tokio::spawn(async move {
            // Read from the log, not yet written (at most WRITE_MAX).
            let mut batch: Vec<Arc<Stored>> = Vec::with_capacity(BATCH);
            let mut closed = false;
            // The lowest live mark of the other replicas' copies, as last read (with each
            // write, so a new copy is seen within a batch of opening).
            let mut lowest: Option<u64> = None;
            // Tasks changed since their snapshots were last written, and when that was.
            let mut dirty: Vec<String> = Vec::new();
            let mut snapped = tokio::time::Instant::now();
            loop {
                // Whatever the log holds past the cursor goes in the next write, so a writer
                // that fell behind catches up a round trip at a time, not an entry at a time.
                let room = WRITE_MAX - batch.len();
                if !closed && room > 0 {
                    match cursor.read(&mut batch, room) {
                        Read::Events(_) => {}
                        Read::Empty if batch.is_empty() => {
                            // Quiet: the snapshots a run of text deltas left (see below) go
                            // once it stays quiet for RUN_QUIET.
                            if dirty.is_empty() {
                                cursor.changed().await;
                            } else if tokio::time::timeout(RUN_QUIET, cursor.changed())
                                .await
                                .is_err()
                            {
                                let marks = lag_grace.is_some().then_some((paces.as_str(), lowest));
                                let ctx = (context_id.as_str(), &dirty[..], &task_of);
                                lowest = write(&link, &key, ctx, &[], replay, marks).await;
                                dirty.clear();
                                snapped = tokio::time::Instant::now();
                            }
                            continue;
                        }
                        Read::Empty => {}
                        Read::Lagged(n) => {
                            tracing::error!(context = %context_id, missed = n,
                                "Redis fell behind this context's events; other replicas miss them");
                            metrics::counter!("wiregate_cluster_events_lost_total").increment(n);
                            // On from the oldest event left (else every read finds this lag).
                            cursor.skip(n);
                            if batch.is_empty() {
                                continue;
                            }
                        }
                        Read::Closed => closed = true,
                    }
                }
                if batch.is_empty() {
                    return;
                }
                // The first entry waits for the other replicas' copies (see `hold_back`); as
                // much of the rest goes with it as keeps within `window` of their marks.
                let mut n = batch.len();
                if let Some(grace) = lag_grace {
                    let first = batch[batch.len().min(BATCH) - 1].seq;
                    lowest = hold_back(&link, &paces, lowest, first, window, grace / 2).await;
                    if let Some(at) = lowest {
                        let fits = batch.partition_point(|s| s.seq <= at + window as u64);
                        n = fits.max(batch.len().min(BATCH));
                    }
                }
                let part = &batch[..n];
                for t in part.iter().filter_map(|s| s.event.plan_id.as_deref()) {
                    if !dirty.iter().any(|d| d == t) {
                        dirty.push(t.to_owned());
                    }
                }
                // A task's snapshot holds all its text so far: written with every write of a
                // long burst, it would cost the owner that text again per write. So a run of
                // text deltas leaves it to a status change, SNAPSHOT_EVERY, or the log staying
                // quiet for RUN_QUIET (above). Not merely to a write that took all the log
                // held: a writer that keeps up takes all of it nearly every time.
                let snapshot = part
                    .iter()
                    .any(|s| !matches!(s.event.data, Payload::Delta(_)))
                    || snapped.elapsed() >= SNAPSHOT_EVERY;
                let tasks: &[String] = if snapshot { &dirty } else { &[] };
                let marks = lag_grace.is_some().then_some((paces.as_str(), lowest));
                let ctx = (context_id.as_str(), tasks, &task_of);
                lowest = write(&link, &key, ctx, part, replay, marks).await;
                if snapshot {
                    dirty.clear();
                    snapped = tokio::time::Instant::now();
                }
                if let Some(last) = part.last() {
                    tx.send_replace(last.seq);
                }
                batch.drain(..n);
            }
        });
        Ok(rx)
    }
}

/// How far past the lowest live mark of the other replicas' copies the owner's writer may put
/// the log, in logs (`sid.replay_events` each): two, so it writes the next log's worth while a
/// copy reads and pushes the last one, rather than the two taking turns, each waiting for the
/// other's round trip. Trimming never passes a live mark whatever this is (see `write`): it
/// bounds how far a burst runs ahead of the slowest copy, and so what the shared log keeps.
const AHEAD_LOGS: usize = 2;

/// How often a writer held back by another replica looks again, and how often at most a copy
/// writes its mark while it holds updates and reads nothing (a read carries its own).
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

/// Waits, for at most `budget`, while writing `up_to` would put the log more than `window`
/// updates past the lowest live mark (`lowest`, as last read; read again every
/// [`HOLD_POLL`] while it waits). Returns the lowest mark it last saw.
async fn hold_back(
    link: &Link,
    paces: &str,
    mut lowest: Option<u64>,
    up_to: u64,
    window: usize,
    budget: Duration,
) -> Option<u64> {
    let started = tokio::time::Instant::now();
    let mut conn = None;
    loop {
        match lowest {
            Some(at) if up_to.saturating_sub(at) > window as u64 => {}
            _ => return lowest,
        }
        if started.elapsed() >= budget {
            return lowest;
        }
        tokio::time::sleep(HOLD_POLL).await;
        let conn = conn.get_or_insert_with(|| link.conn_anyway());
        match marks_cmd(paces).query_async(conn).await {
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
        if rest.is_empty() && tasks.is_empty() {
            return marks.and_then(|(_, lowest)| lowest);
        }
        // Entries older than the one that can hold the `replay`th last update go (`~`: whole
        // nodes of the stream, so somewhat more stays), so the log keeps at least `replay`
        // updates however many each entry holds; and none a live copy has not read yet (the
        // next entry it reads starts just after its mark). Trimmed once, by the last entry.
        if let Some(last) = rest.last() {
            let mut min_seq = (last.seq + 1).saturating_sub((replay + BATCH) as u64);
            if let Some((_, Some(lowest))) = marks {
                min_seq = min_seq.min(lowest + 1);
            }
            let entries = rest.chunks(BATCH);
            let count = entries.len();
            for (i, entry) in entries.enumerate() {
                let cmd = pipe.cmd("XADD").arg(key);
                if i + 1 == count {
                    cmd.arg("MINID").arg("~").arg(keys::entry_id(min_seq));
                }
                cmd.arg(keys::entry_id(entry[0].seq))
                    .arg(keys::FIELD)
                    .arg(keys::encode_batch(entry.iter().map(|s| (s.seq, &s.event))))
                    .ignore();
            }
        }
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

/// The sequence of the last update an entry holds.
pub(super) fn last_seq_in(entry: &StreamId) -> Option<u64> {
    let first = keys::seq_of(&entry.id)?;
    match entry.map.get(keys::FIELD) {
        Some(redis::Value::BulkString(b)) => Some(keys::last_in_batch(first, b)),
        _ => Some(first),
    }
}

/// `queue` made the local log of a context this replica takes over: it holds what the shared
/// log retains, under the same ids (so a client resuming here with `Last-Event-ID` finds its
/// place), and numbers on after the last of them. Returns it with that last id (0, and the
/// queue as it was, when the shared log holds nothing).
pub async fn continued(
    link: &Link,
    context_id: &str,
    queue: EventQueue,
    replay: usize,
) -> Result<(EventQueue, u64), GatewayError> {
    let mut conn = link.conn()?;
    let entries = retained(&mut conn, &keys::context_log(context_id), replay)
        .await
        .map_err(|e| link.failed(&e))?;
    let Some(first) = entries.first().and_then(|e| keys::seq_of(&e.id)) else {
        return Ok((queue, 0));
    };
    let queue = queue.starting_after(first - 1);
    feed(&queue, entries, context_id);
    let last = queue.last_seq();
    Ok((queue, last))
}

/// The entries of the stream `key` holding its last `replay` updates (and a few more), oldest
/// first.
pub(super) async fn retained(
    conn: &mut impl redis::aio::ConnectionLike,
    key: &str,
    replay: usize,
) -> redis::RedisResult<Vec<StreamId>> {
    let last: StreamRangeReply = redis::Cmd::xrevrange_count(key, "+", "-", 1)
        .query_async(conn)
        .await?;
    let Some(end) = last.ids.first().and_then(last_seq_in) else {
        return Ok(Vec::new());
    };
    // The entry holding update `end + 1 - replay` starts at most a batch before it.
    let from = (end + 1).saturating_sub((replay + BATCH) as u64);
    let r: StreamRangeReply = redis::Cmd::xrange(key, keys::entry_id(from), "+")
        .query_async(conn)
        .await?;
    Ok(r.ids)
}

/// Appends the updates one stream entry holds, with their sequences, to `out`.
fn entry_updates(entry: &StreamId, context_id: &str, out: &mut impl Extend<(u64, A2aEvent)>) {
    let Some(first) = keys::seq_of(&entry.id) else {
        return;
    };
    let Some(redis::Value::BulkString(value)) = entry.map.get(keys::FIELD) else {
        tracing::warn!(context = %context_id, id = %entry.id, "an unreadable entry in a context's log");
        return;
    };
    out.extend(
        keys::decode_batch(first, value).filter_map(|(seq, event)| match event {
            Some(ev) => Some((seq, ev)),
            None => {
                tracing::warn!(context = %context_id, id = %entry.id, seq, "an unreadable update in a context's log");
                None
            }
        }),
    );
}

/// Pushes the updates of stream entries into a mirror queue; returns the last entry id seen.
pub(super) fn feed(queue: &EventQueue, entries: Vec<StreamId>, context_id: &str) -> Option<String> {
    let mut updates = Vec::new();
    let mut last = None;
    for entry in entries {
        updates.clear();
        entry_updates(&entry, context_id, &mut updates);
        for (seq, ev) in updates.drain(..) {
            let _ = queue.push_at(seq, ev);
        }
        last = Some(entry.id);
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
    let mut pipe = redis::pipe();
    add_mark(&mut pipe, key, node, at);
    let mut conn = link.conn_anyway();
    let _: redis::RedisResult<()> = pipe.query_async(&mut conn).await;
}

/// Adds [`mark`]'s commands to `pipe`, their replies ignored.
fn add_mark(pipe: &mut redis::Pipeline, key: &str, node: &str, at: u64) {
    let member = keys::pace_member(key, node);
    let paces = keys::paces(key);
    pipe.pset_ex(keys::pace_mark(&member), at, PACE_TTL_MS)
        .ignore()
        .sadd(&paces, &member)
        .ignore()
        .pexpire(&paces, PACE_TTL_MS as i64)
        .ignore();
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
pub(super) async fn read_on(
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
    // Entries read from Redis not yet decoded, the updates of the one being pushed, and since
    // when nothing could be pushed (waiting for the slowest subscriber).
    let mut held: std::collections::VecDeque<StreamId> = Default::default();
    let mut decoded: std::collections::VecDeque<(u64, A2aEvent)> = Default::default();
    let mut held_since: Option<tokio::time::Instant> = None;
    // How far it read from Redis, and the mark last written (what, when).
    let mut read_to = queue.upgrade().map_or(0, |q| q.last_seq());
    let mut marked: Option<(u64, tokio::time::Instant)> = None;
    loop {
        let Some(q) = queue.upgrade().filter(|q| !q.is_closed()) else {
            return;
        };
        let mut pushed = false;
        loop {
            if decoded.is_empty() {
                let Some(entry) = held.pop_front() else { break };
                entry_updates(&entry, &context_id, &mut decoded);
                continue;
            }
            if pace.is_some() && !q.has_room() {
                break;
            }
            if let Some((seq, ev)) = decoded.pop_front() {
                let _ = q.push_at(seq, ev);
                pushed = true;
            }
        }
        let waiting = !held.is_empty() || !decoded.is_empty();
        if pushed || !waiting {
            held_since = None;
        }
        let due = |marked: Option<(u64, tokio::time::Instant)>| match marked {
            None => true,
            Some((at, when)) => {
                (at != read_to && when.elapsed() >= HOLD_POLL) || when.elapsed() >= PACE_REFRESH
            }
        };
        // Only while its reader has a connection: a copy that cannot read lets its mark lapse
        // rather than hold the owner back. A read carries its own mark (below).
        if pace.is_some() && conn.is_some() && reading.is_none() && waiting && due(marked) {
            mark(&link, &key, &link.node_id, read_to).await;
            marked = Some((read_to, tokio::time::Instant::now()));
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
        // The next read, unless one is under way or a read's worth waits already.
        if reading.is_none() && held.len() < READ_ENTRIES {
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
            // The mark goes in the read's round trip, written before the read blocks: the
            // owner sees how far this copy got as soon as it asks for more.
            let mut pipe = redis::pipe();
            if pace.is_some() && due(marked) {
                add_mark(&mut pipe, &key, &link.node_id, read_to);
                marked = Some((read_to, tokio::time::Instant::now()));
            }
            let opts = StreamReadOptions::default()
                .count(READ_ENTRIES)
                .block(BLOCK_MS);
            pipe.xread_options(&[&key], &[&last_id], &opts);
            reading = Some(Box::pin(async move {
                let mut c = c;
                pipe.query_async::<(Option<StreamReadReply>,)>(&mut c)
                    .await
                    .map(|(r,)| r)
            }));
        }
        let read = match (pace, waiting) {
            (Some(grace), true) => {
                let since = *held_since.get_or_insert_with(tokio::time::Instant::now);
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
                for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
                    if let Some(last) = last_seq_in(&entry) {
                        read_to = read_to.max(last);
                    }
                    last_id.clone_from(&entry.id);
                    held.push_back(entry);
                }
            }
            Err(e) => {
                tracing::debug!(context = %context_id, error = %e, "a context log read failed; reconnecting");
                conn = None;
                marked = None;
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(1));
            }
        }
    }
}
