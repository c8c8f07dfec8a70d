//! Pace marks: how far each replica's copy of a context's log has read, for the owner to wait on.
//!
//! Written by the copy and read by the owner's writer, which keeps within reach of the lowest.
//!
//! A child of [`crate::cluster::log`]: its documentation, and [`Exporter::spawn`]'s and
//! [`read_on`]'s, say who waits for whom.
//!
//! [`Exporter::spawn`]: super::Exporter::spawn
//! [`read_on`]: super::read_on

use std::time::Duration;

use crate::cluster::{keys, Link};

/// How far past the lowest live mark of the other replicas' copies the owner's writer may put
/// the log, in logs (`sid.replay_events` each): two, so it writes the next log's worth while a
/// copy reads and pushes the last one, rather than the two taking turns, each waiting for the
/// other's round trip. Trimming never passes a live mark whatever this is (see `write`): it
/// bounds how far a burst runs ahead of the slowest copy, and so what the shared log keeps.
pub(super) const AHEAD_LOGS: usize = 2;

/// How often a writer held back by another replica looks again, and how often at most a copy
/// writes its mark while it holds updates and reads nothing (a read carries its own).
pub(super) const HOLD_POLL: Duration = Duration::from_millis(1);
/// How long a replica's pace mark outlives its last refresh: a replica that dies stops holding
/// the owner back after this. Longer than a blocking read, as a copy refreshes between reads.
const PACE_TTL_MS: u64 = 1_500;
/// How often a copy refreshes its mark when nothing moved.
pub(super) const PACE_REFRESH: Duration = Duration::from_millis(PACE_TTL_MS / 3);

/// `SORT {paces} BY nosort GET {mark}`: every mark of a log, lapsed ones as nil.
pub(super) fn marks_cmd(paces: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("SORT");
    cmd.arg(paces)
        .arg("BY")
        .arg("nosort")
        .arg("GET")
        .arg(keys::PACE_MARKS);
    cmd
}

/// The lowest of the live marks a `SORT` of [`marks_cmd`] returned.
pub(super) fn lowest_of(marks: Vec<Option<u64>>) -> Option<u64> {
    marks.into_iter().flatten().min()
}

/// Waits, for at most `budget`, while writing `up_to` would put the log more than `window`
/// updates past the lowest live mark (`lowest`, as last read; read again every
/// [`HOLD_POLL`] while it waits). Returns the lowest mark it last saw.
pub(super) async fn hold_back(
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

/// Says how far a replica's copy of the log `key` has read (`at`, an SSE id): its mark, and
/// the mark's name in the log's set of marks, both lapsing unless refreshed.
pub(super) async fn mark(link: &Link, key: &str, node: &str, at: u64) {
    let mut pipe = redis::pipe();
    add_mark(&mut pipe, key, node, at);
    let mut conn = link.conn_anyway();
    let _: redis::RedisResult<()> = pipe.query_async(&mut conn).await;
}

/// Adds [`mark`]'s commands to `pipe`, their replies ignored.
pub(super) fn add_mark(pipe: &mut redis::Pipeline, key: &str, node: &str, at: u64) {
    let member = keys::pace_member(key, node);
    let paces = keys::paces(key);
    pipe.pset_ex(keys::pace_mark(&member), at, PACE_TTL_MS)
        .ignore()
        .sadd(&paces, &member)
        .ignore()
        .pexpire(&paces, PACE_TTL_MS as i64)
        .ignore();
}
