//! The exporter: the owner's writer of a context's log, and of the snapshots of its tasks.
//!
//! A child of [`crate::cluster::log`], whose documentation says what one write holds.

use std::sync::Arc;
use std::time::Duration;

use redis::streams::StreamRangeReply;
use redis::AsyncCommands;
use tokio::sync::watch;

use super::pace::{publish_step, Paces, AHEAD_LOGS};
use super::{last_seq_in, BATCH, RETRY_MIN, WRITE_MAX};
use crate::cluster::keys::{self, StoredTask};
use crate::cluster::Link;
use crate::events::{Cursor, Read, ReplayLog, Stored};
use crate::model::error::GatewayError;
use crate::model::payload::Payload;
use crate::model::task::Task;

/// How long a task's shared snapshot outlives its last change.
pub(crate) const TASK_TTL_SECS: u64 = 24 * 3600;
/// Tasks kept in the shared index (ListTasks); the oldest leave first.
pub(crate) const TASK_INDEX_MAX: isize = 10_000;
/// How long a task's shared snapshot may trail a run of text deltas (see [`Exporter`]).
pub(super) const SNAPSHOT_EVERY: Duration = Duration::from_millis(100);
/// How long a context's log stays quiet before the snapshots a run of text deltas left are
/// written: a run has ended, not merely paused between two reads of sid's output.
const RUN_QUIET: Duration = Duration::from_millis(10);

/// The last sequence of a context written to Redis, for callers that must not answer before
/// other replicas can read what they answer about.
pub(crate) type Flushed = watch::Receiver<u64>;

/// See the module docs.
pub(crate) struct Exporter;

impl Exporter {
    /// Starts exporting every event pushed into `queue` from now on to the stream `key`
    /// (subscribe before the context produces anything). `task_of` reads a task's current
    /// model; `context_id` names the context the tasks belong to. With `lag_grace`, a write
    /// waits (at most half of it at a time) while its first entry would put the log more than
    /// [`AHEAD_LOGS`] logs (of `replay` updates) past what another replica's copy has read
    /// (the marks the copies push, see [`Paces`]), and carries no more than keeps within that:
    /// the owner's
    /// producer then waits for this writer as for any lagging reader, so a burst is paced by
    /// the slowest subscriber of every replica, not only of this one. Whatever it waits for, it
    /// never trims the shared log past a live copy's mark, so that copy finds no hole.
    pub(crate) fn spawn(
        link: Arc<Link>,
        key: String,
        context_id: String,
        queue: &Arc<ReplayLog>,
        replay: usize,
        lag_grace: Option<Duration>,
        task_of: impl Fn(&str) -> Option<Task> + Send + Sync + 'static,
    ) -> Result<Flushed, GatewayError> {
        let cursor = queue.subscribe_live()?.cursor;
        let (tx, rx) = watch::channel(queue.last_seq());
        let window = AHEAD_LOGS * replay;
        let to = Target {
            link,
            key,
            context_id,
            replay,
            window,
            lag_grace,
            task_of,
        };
        crate::util::background::spawn(to.run(cursor, tx));
        Ok(rx)
    }
}

/// Where one exporter writes, and how (see [`Exporter::spawn`]).
struct Target<F> {
    link: Arc<Link>,
    key: String,
    context_id: String,
    replay: usize,
    /// How far past the lowest mark the log may run: [`AHEAD_LOGS`] logs.
    window: usize,
    lag_grace: Option<Duration>,
    task_of: F,
}

/// What a read of the exporter's cursor leaves it to do.
enum Took {
    /// Write what it holds.
    Write,
    /// Nothing held and nothing new: wait for the log.
    Quiet,
    /// Nothing held after a lag: read again.
    Again,
}

impl<F: Fn(&str) -> Option<Task> + Send + Sync + 'static> Target<F> {
    /// The exporter's loop: reads the log past `cursor`, writes it, and says in `tx` how far
    /// it wrote, until the queue is closed and all it held is written.
    async fn run(self, mut cursor: Cursor, tx: watch::Sender<u64>) {
        let Target {
            link,
            key,
            context_id,
            replay,
            window,
            lag_grace,
            task_of,
        } = self;
        // Read from the log, not yet written (at most WRITE_MAX).
        let mut batch: Vec<Arc<Stored>> = Vec::with_capacity(BATCH);
        let mut closed = false;
        // The other replicas' marks, pushed by their copies for as long as this writer lives.
        let mut paces = lag_grace.map(|_| Paces::listen(link.clone(), &key));
        let step = publish_step(replay);
        // The last update written.
        let mut written = *tx.borrow();
        // Tasks changed since their snapshots were last written, and when that was.
        let mut dirty: Vec<String> = Vec::new();
        let mut snapped = tokio::time::Instant::now();
        loop {
            match take(&mut cursor, &mut batch, &mut closed, &context_id) {
                Took::Write => {}
                Took::Quiet => {
                    // Quiet: the snapshots a run of text deltas left (see below) go
                    // once it stays quiet for RUN_QUIET.
                    if dirty.is_empty() {
                        cursor.changed().await;
                    } else if tokio::time::timeout(RUN_QUIET, cursor.changed())
                        .await
                        .is_err()
                    {
                        let ctx = (context_id.as_str(), &dirty[..], &task_of);
                        write(&link, &key, ctx, &[], replay, None).await;
                        dirty.clear();
                        snapped = tokio::time::Instant::now();
                    }
                    continue;
                }
                Took::Again => continue,
            }
            if batch.is_empty() {
                return;
            }
            // The first entry waits for the other replicas' copies (see `hold_back`); as
            // much of the rest goes with it as keeps within `window` of their marks.
            let mut n = batch.len();
            if let (Some(grace), Some(p)) = (lag_grace, paces.as_mut()) {
                let first = batch[batch.len().min(BATCH) - 1].seq;
                let lowest = p.hold_back((first, written), window, step, grace / 2).await;
                n = within(&batch, lowest, window);
            }
            let part = &batch[..n];
            note_tasks(&mut dirty, part);
            // A task's snapshot holds all its text so far: written with every write of a
            // long burst, it would cost the owner that text again per write. So a run of
            // text deltas leaves it to a status change, SNAPSHOT_EVERY, or the log staying
            // quiet for RUN_QUIET (above). Not merely to a write that took all the log
            // held: a writer that keeps up takes all of it nearly every time.
            let snapshot = snapshot_due(part, snapped);
            let tasks: &[String] = if snapshot { &dirty } else { &[] };
            let lowest = paces.as_ref().and_then(Paces::lowest);
            let ctx = (context_id.as_str(), tasks, &task_of);
            write(&link, &key, ctx, part, replay, lowest).await;
            if snapshot {
                dirty.clear();
                snapped = tokio::time::Instant::now();
            }
            if let Some(last) = part.last() {
                written = last.seq;
                tx.send_replace(last.seq);
            }
            batch.drain(..n);
        }
    }
}

/// Reads into `batch` what the log holds past `cursor` (while the queue is open and the batch
/// has room), and says what is left to do.
fn take(
    cursor: &mut Cursor,
    batch: &mut Vec<Arc<Stored>>,
    closed: &mut bool,
    context_id: &str,
) -> Took {
    // Whatever the log holds past the cursor goes in the next write, so a writer
    // that fell behind catches up a round trip at a time, not an entry at a time.
    let room = WRITE_MAX - batch.len();
    if !*closed && room > 0 {
        match cursor.read(batch, room) {
            Read::Events(_) => {}
            Read::Empty if batch.is_empty() => return Took::Quiet,
            Read::Empty => {}
            Read::Lagged(n) => {
                tracing::error!(context = %context_id, missed = n,
                    "Redis fell behind this context's events; other replicas miss them");
                metrics::counter!("wiregate_cluster_events_lost_total").increment(n);
                // On from the oldest event left (else every read finds this lag).
                cursor.skip(n);
                if batch.is_empty() {
                    return Took::Again;
                }
            }
            Read::Closed => *closed = true,
        }
    }
    Took::Write
}

/// How many of `batch` one write carries with the lowest mark at `lowest`: its first entry,
/// and as much of the rest as keeps within `window` of the mark.
#[inline]
fn within(batch: &[Arc<Stored>], lowest: Option<u64>, window: usize) -> usize {
    let mut n = batch.len();
    if let Some(at) = lowest {
        let fits = batch.partition_point(|s| s.seq <= at + window as u64);
        n = fits.max(batch.len().min(BATCH));
    }
    n
}

/// Adds to `dirty` the tasks the updates of `part` changed that it does not hold yet.
#[inline]
fn note_tasks(dirty: &mut Vec<String>, part: &[Arc<Stored>]) {
    for t in part.iter().filter_map(|s| s.event.plan_id.as_deref()) {
        if !dirty.iter().any(|d| d == t) {
            dirty.push(t.to_owned());
        }
    }
}

/// Whether the write of `part` carries the snapshots of the tasks changed since `snapped`: with
/// an update other than a text delta, or once [`SNAPSHOT_EVERY`] has passed.
#[inline]
fn snapshot_due(part: &[Arc<Stored>], snapped: tokio::time::Instant) -> bool {
    part.iter()
        .any(|s| !matches!(s.event.data, Payload::Delta(_)))
        || snapped.elapsed() >= SNAPSHOT_EVERY
}

/// Writes one batch, retrying until Redis takes it; a retry skips what an earlier attempt
/// already wrote (the stream's last id says how far it got). With `lowest` (the lowest mark of
/// the other replicas' copies), the trim keeps what that copy has not read. With it go the
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
    lowest: Option<u64>,
) {
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
            return;
        }
        add_entries(&mut pipe, key, rest, replay, lowest);
        add_snapshots(&mut pipe, context_id, tasks, task_of);
        match pipe.query_async::<()>(&mut conn).await {
            Ok(()) => return,
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

/// Adds to `pipe` the `XADD`s of `rest`'s entries to the stream `key`, the last one trimming
/// the stream (with `lowest`, as [`write()`] says).
fn add_entries(
    pipe: &mut redis::Pipeline,
    key: &str,
    rest: &[Arc<Stored>],
    replay: usize,
    lowest: Option<u64>,
) {
    // Entries older than the one that can hold the `replay`th last update go (`~`: whole
    // nodes of the stream, so somewhat more stays), so the log keeps at least `replay`
    // updates however many each entry holds; and none a live copy has not read yet (the
    // next entry it reads starts just after its mark). Trimmed once, by the last entry.
    if let Some(last) = rest.last() {
        let mut min_seq = (last.seq + 1).saturating_sub((replay + BATCH) as u64);
        if let Some(lowest) = lowest {
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
}

/// Adds to `pipe` the snapshots of `tasks` (of the context `context_id`, read with `task_of`)
/// and their places in the task index, which keeps its newest [`TASK_INDEX_MAX`].
fn add_snapshots(
    pipe: &mut redis::Pipeline,
    context_id: &str,
    tasks: &[String],
    task_of: &impl Fn(&str) -> Option<Task>,
) {
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
}
