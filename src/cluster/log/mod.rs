//! A context's event log in Redis: written by the replica that runs the context, read back by
//! every other replica that serves one of its streams.
//!
//! Writing: an [`Exporter`] is one more cursor on the context's local
//! [`ReplayLog`]; it appends whatever the log holds past it (up to [`WRITE_MAX`] updates) in
//! one round trip, as entries of up to [`BATCH`] updates (`XADD … {first seq}-0`, the last
//! with `MINID ~ …`, see [`keys`]), pipelined with the snapshots of the tasks those events
//! changed (during a run of text deltas, with the batch that ends the run, a status change, or
//! every [`SNAPSHOT_EVERY`](export::SNAPSHOT_EVERY): a snapshot holds all the task's text so
//! far).
//! The producer (sid's stdout) never waits on Redis: it waits for the exporter only as it waits
//! for any reader that lags, for at most `sid.lag_grace_ms`.
//!
//! Reading: a [`Mirrors`] entry is a local queue fed by one `XREAD BLOCK` loop on a connection of
//! its own (see [`read_on`]), under the ids the stream carries; any number of SSE subscribers on this replica read
//! it through cursors, exactly as they read a local context's queue.

use std::time::Duration;

use redis::streams::{StreamId, StreamRangeReply};

use super::keys;
use super::Link;
use crate::events::ReplayLog;
use crate::model::error::GatewayError;
use crate::model::event::A2aEvent;

// The writer, the readers and the marks between them are children of this module, so that they
// share its entry layout and helpers.
mod export;
mod mirror;
mod pace;

pub(crate) use export::{Exporter, Flushed, TASK_TTL_SECS};
pub(super) use mirror::read_on;
pub(crate) use mirror::Mirrors;

/// Most updates one stream entry holds.
const BATCH: usize = 256;
/// Most entries one blocking read returns (each holds at most [`BATCH`] updates).
const READ_ENTRIES: usize = 16;
/// Most updates one write carries (as entries of up to [`BATCH`], in one round trip): what a
/// copy reads at once.
const WRITE_MAX: usize = READ_ENTRIES * BATCH;
/// First retry delay after a failed write; doubles up to a second.
const RETRY_MIN: Duration = Duration::from_millis(50);

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
pub(crate) async fn continued(
    link: &Link,
    context_id: &str,
    queue: ReplayLog,
    replay: usize,
) -> Result<(ReplayLog, u64), GatewayError> {
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
pub(super) fn feed(queue: &ReplayLog, entries: Vec<StreamId>, context_id: &str) -> Option<String> {
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

#[cfg(test)]
mod tests;
