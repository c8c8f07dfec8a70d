//! A bounded, closable event log that any number of subscribers read through cursors.
//!
//! The queue keeps the last `replay` events; a subscriber is a position in that log, not a
//! private queue, so its memory does not grow with its lag. It falls behind only when events it
//! still needs have left the log (it learns it lagged and resumes with `Last-Event-ID`, getting
//! a `gap`).
//!
//! Pushing never waits. A producer that can be paced (sid's stdout, which sid writes as fast as
//! the gateway reads it) first asks for [`room`](ReplayLog::room): with the log full and a live
//! reader still needing its oldest events, it waits until that reader moves on, or for at most
//! `lag_grace`, after which the reader is overrun and cut off. So a reader that keeps
//! reading receives every event even when the producer is momentarily faster, and one that
//! stops reading holds the others back at most once, for `lag_grace`. Each frame is encoded once
//! and shared.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;

use super::tick::Wake;
use crate::model::event::A2aEvent;

/// One queued event and its SSE frame.
#[derive(Debug)]
pub struct Stored {
    /// The queue's own sequence: strictly increasing, starting at 1.
    pub seq: u64,
    /// The event, with its id stamped.
    pub event: A2aEvent,
    /// `event.to_sse()`, encoded once by the first subscriber that writes it, then shared. Not
    /// encoded by the producer: the reader of sid's stdout is the one serial step of a stream,
    /// and a subscriber's task may run on another core.
    frame: OnceLock<Bytes>,
}

impl Stored {
    /// The event's SSE frame.
    pub fn frame(&self) -> &Bytes {
        self.frame.get_or_init(|| self.event.to_sse())
    }

    /// The frame's size when it is encoded already, else a typical event's: for sizing buffers
    /// without encoding a frame that may not be wanted (spec streams encode their own).
    pub fn frame_len_hint(&self) -> usize {
        self.frame.get().map_or(256, Bytes::len)
    }
}

/// Subscribing beyond the queue's subscriber limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the event queue already has its {0} subscribers")]
pub struct TooManySubscribers(pub usize);

/// Pushing into a closed queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the event queue is closed")]
pub struct Closed;

/// What a new subscriber gets: whether events before its start are missing, and its cursor.
#[derive(Debug)]
pub struct Subscription {
    /// `Last-Event-ID` named an event no longer (or never) retained: events may be missing.
    pub gap: bool,
    /// The subscriber's position in the log.
    pub cursor: Cursor,
}

/// What [`Cursor::read`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// This many events were appended, oldest first.
    Events(usize),
    /// Nothing new yet; [`Cursor::changed`] resolves when there is.
    Empty,
    /// Events the cursor still needed left the log: this many were missed.
    Lagged(u64),
    /// Nothing new, and nothing will come: the queue is closed.
    Closed,
}

/// A subscriber's position in a queue: the sequence of the next event it reads.
#[derive(Debug)]
pub struct Cursor {
    queue: Arc<ReplayLog>,
    next: u64,
    /// `next`, where a producer waiting for room can see it.
    shared: Arc<AtomicU64>,
}

impl Cursor {
    /// Appends up to `max` events from the cursor on to `out` and moves past them.
    ///
    /// Events a previous read returned count as still needed until this call: the caller has
    /// dropped them by now, so a producer waiting for room frees them itself, on its own thread,
    /// rather than leaving the reader to free what another thread allocated.
    pub fn read(&mut self, out: &mut Vec<Arc<Stored>>, max: usize) -> Read {
        self.release();
        let inner = self.queue.read();
        let Some(first) = inner.ring.front().map(|s| s.seq) else {
            return if inner.closed {
                Read::Closed
            } else {
                Read::Empty
            };
        };
        if self.next < first {
            return Read::Lagged(first - self.next);
        }
        let start = (self.next - first) as usize;
        if start >= inner.ring.len() {
            return if inner.closed {
                Read::Closed
            } else {
                Read::Empty
            };
        }
        let n = (inner.ring.len() - start).min(max);
        out.extend(inner.ring.range(start..start + n).cloned());
        drop(inner);
        self.next += n as u64;
        Read::Events(n)
    }

    /// After [`Read::Lagged`]`(missed)`: moves the cursor on past the `missed` events, to the
    /// oldest the log still holds, for a reader that goes on with a gap rather than stopping
    /// (the cluster's exporter; an SSE subscriber is cut off instead). Without it, every read
    /// would find the same lag again.
    pub fn skip(&mut self, missed: u64) {
        self.next += missed;
    }

    /// Says that every event before the cursor is done with.
    fn release(&self) {
        if self.shared.swap(self.next, Ordering::AcqRel) != self.next
            && self.queue.producer_waits.load(Ordering::Acquire)
        {
            self.queue.advanced.notify_one();
        }
    }

    /// Resolves once the log holds an event past the cursor, or the queue is closed: at once
    /// for the first event after a quiet spell, else at the end of the log's tick, so a trickle
    /// is read (and written) a few events at a time (see [`Wake`]).
    pub async fn changed(&mut self) {
        self.release();
        let q = &self.queue;
        let woken = q.wake.notified();
        let mut woken = std::pin::pin!(woken);
        // Registered before looking: a push after the look wakes it, at the latest at the end
        // of the log's tick (see `ReplayLog::announce`).
        woken.as_mut().enable();
        q.wake.enter();
        let ready = q.last_seq.load(Ordering::SeqCst) >= self.next || q.read().closed;
        if !ready {
            woken.await;
        }
        q.wake.leave();
    }

    /// How many events are in the log past the cursor.
    pub fn behind(&self) -> u64 {
        (self.queue.last_seq.load(Ordering::Acquire) + 1).saturating_sub(self.next)
    }
}

impl Drop for Cursor {
    fn drop(&mut self) {
        self.queue.subscribers.fetch_sub(1, Ordering::AcqRel);
        // A reader leaving may be the one a producer waits for.
        if self.queue.producer_waits.load(Ordering::Acquire) {
            self.queue.advanced.notify_one();
        }
    }
}

#[derive(Debug)]
struct Inner {
    next_seq: u64,
    ring: VecDeque<Arc<Stored>>,
    closed: bool,
}

impl Inner {
    /// Whether `id` names the event just before the oldest retained one (or, with nothing
    /// retained, the last one pushed), so resuming after it misses nothing: `Last-Event-ID: 0`
    /// before any event was dropped. Only sequence-stamped ids can say so.
    fn just_before_oldest(&self, id: &str) -> bool {
        let Ok(n) = id.parse::<u64>() else {
            return false;
        };
        match self.ring.front() {
            Some(first) => {
                n.checked_add(1) == Some(first.seq) && first.event.event_id == first.seq.to_string()
            }
            None => n.checked_add(1) == Some(self.next_seq),
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct ReplayLog {
    inner: RwLock<Inner>,
    /// The last pushed sequence, read by cursors about to wait without taking the lock.
    last_seq: AtomicU64,
    /// What wakes the cursors waiting in [`Cursor::changed`]: at most once a tick.
    wake: Wake,
    replay: usize,
    /// Put before the sequence number an id-less event is stamped with.
    id_prefix: &'static str,
    max_subscribers: usize,
    subscribers: AtomicUsize,
    /// Every cursor's position (dropped cursors leave dead entries, swept on the next scan).
    positions: Mutex<Vec<Weak<AtomicU64>>>,
    /// A lower bound of every live cursor's position: events before it are needed by nobody,
    /// so most pushes into a full log need no scan of the cursors.
    needed_from: AtomicU64,
    /// Readers before this position were waited for once already and are being overrun: not
    /// waited for again while the events they need leave one by one.
    given_up_below: AtomicU64,
    /// Set while a producer waits in [`room`](Self::room); cursors then wake it as they read.
    producer_waits: AtomicBool,
    advanced: Notify,
}

impl ReplayLog {
    /// A queue keeping the last `replay` events.
    pub fn new(replay: usize) -> Self {
        ReplayLog {
            inner: RwLock::new(Inner {
                next_seq: 1,
                ring: VecDeque::with_capacity(replay.min(4096)),
                closed: false,
            }),
            last_seq: AtomicU64::new(0),
            wake: Wake::default(),
            replay: replay.max(1),
            id_prefix: "",
            max_subscribers: usize::MAX,
            subscribers: AtomicUsize::new(0),
            positions: Mutex::new(Vec::new()),
            needed_from: AtomicU64::new(0),
            given_up_below: AtomicU64::new(0),
            producer_waits: AtomicBool::new(false),
            advanced: Notify::new(),
        }
    }

    /// Most events one pushed line may bring: room is made for this many at once.
    const HEADROOM: u64 = 8;

    /// Whether the next few pushes overrun no live reader: what [`room`](Self::room) waits for,
    /// for a producer that has something else to do meanwhile (a replica's copy of a log).
    pub fn has_room(&self) -> bool {
        self.fits()
    }

    /// Waits until the next few pushes overrun no live reader, or for at most `lag_grace`:
    /// see the module docs. Returns at once while the log has room or nobody lags.
    pub async fn room(&self, lag_grace: Duration) {
        if self.fits() {
            return;
        }
        let deadline = tokio::time::Instant::now() + lag_grace;
        loop {
            let woken = self.advanced.notified();
            let mut woken = std::pin::pin!(woken);
            woken.as_mut().enable();
            self.producer_waits.store(true, Ordering::Release);
            if self.fits() {
                break;
            }
            if tokio::time::timeout_at(deadline, woken).await.is_err() {
                tracing::debug!("a subscriber stopped reading; overrunning it");
                let (oldest, _) = self.retained();
                self.given_up_below
                    .fetch_max(oldest + Self::HEADROOM, Ordering::AcqRel);
                break;
            }
        }
        self.producer_waits.store(false, Ordering::Release);
    }

    /// The oldest retained sequence and how many are retained, without the lock: the log holds
    /// the last `replay` of the events pushed so far, and `last_seq` is the newest. (Called by
    /// the producer, once per line of sid's output, so it sees its own pushes.)
    fn retained(&self) -> (u64, u64) {
        let last = self.last_seq.load(Ordering::Acquire);
        let retained = last.min(self.replay as u64);
        (last + 1 - retained, retained)
    }

    /// Whether `HEADROOM` more pushes evict only events no live reader needs.
    fn fits(&self) -> bool {
        let (oldest, retained) = self.retained();
        let has_room = (self.replay as u64 - retained) >= Self::HEADROOM;
        // Evicted next: `oldest .. oldest + HEADROOM`, minus the free slots.
        if has_room || self.needed_from.load(Ordering::Acquire) >= oldest + Self::HEADROOM {
            return true;
        }
        // Readers already overrun (behind `oldest`), or being overrun, are cut off when they
        // read: not waited for.
        let floor = oldest.max(self.given_up_below.load(Ordering::Acquire));
        let slowest = {
            let mut positions = self.positions.lock().unwrap_or_else(|e| e.into_inner());
            let mut slowest = u64::MAX;
            positions.retain(|p| match p.upgrade() {
                Some(p) => {
                    let at = p.load(Ordering::Acquire);
                    if at >= floor {
                        slowest = slowest.min(at);
                    }
                    true
                }
                None => false,
            });
            slowest
        };
        self.needed_from.store(slowest, Ordering::Release);
        slowest >= oldest + Self::HEADROOM
    }

    /// Stamps id-less events `{prefix}{seq}` instead of `{seq}`: for a queue whose other events
    /// carry ids of their own (the domain feed's), so a stamped id never equals one of those.
    pub fn with_id_prefix(mut self, prefix: &'static str) -> Self {
        self.id_prefix = prefix;
        self
    }

    /// Limits live subscribers; more are refused with [`TooManySubscribers`].
    pub fn with_max_subscribers(mut self, max: usize) -> Self {
        self.max_subscribers = max.max(1);
        self
    }

    /// A cursor at `next`, if a subscriber slot is free.
    fn cursor(self: &Arc<Self>, next: u64) -> Result<Cursor, TooManySubscribers> {
        let taken = self.subscribers.fetch_add(1, Ordering::AcqRel);
        if taken >= self.max_subscribers {
            self.subscribers.fetch_sub(1, Ordering::AcqRel);
            return Err(TooManySubscribers(self.max_subscribers));
        }
        let shared = Arc::new(AtomicU64::new(next));
        let mut positions = self.positions.lock().unwrap_or_else(|e| e.into_inner());
        // Subscribers come and go: sweep the dead entries before they outnumber the living.
        if positions.len() > 2 * taken + 16 {
            positions.retain(|p| p.strong_count() > 0);
        }
        positions.push(Arc::downgrade(&shared));
        drop(positions);
        self.needed_from.fetch_min(next, Ordering::AcqRel);
        Ok(Cursor {
            queue: self.clone(),
            next,
            shared,
        })
    }

    /// Appends an event; an empty `event_id` is stamped with the queue's sequence number.
    pub fn push(&self, mut event: A2aEvent) -> Result<Arc<Stored>, Closed> {
        let stored = {
            let mut inner = self.write();
            if inner.closed {
                return Err(Closed);
            }
            let seq = inner.next_seq;
            inner.next_seq += 1;
            if event.event_id.is_empty() {
                let mut digits = itoa::Buffer::new();
                let digits = digits.format(seq);
                let mut id = String::with_capacity(self.id_prefix.len() + digits.len());
                id.push_str(self.id_prefix);
                id.push_str(digits);
                event.event_id = id;
            }
            let stored = Arc::new(Stored {
                seq,
                event,
                frame: OnceLock::new(),
            });
            self.keep(&mut inner, stored.clone());
            stored
        };
        self.announce(stored.seq);
        Ok(stored)
    }

    /// Puts `stored` at the log's end, the oldest event leaving a full log.
    fn keep(&self, inner: &mut Inner, stored: Arc<Stored>) {
        if inner.ring.len() == self.replay {
            inner.ring.pop_front();
        }
        inner.ring.push_back(stored);
    }

    /// Publishes `seq` as the last event and wakes the cursors waiting for it, now or at the
    /// end of the log's tick (see [`Wake`]).
    fn announce(&self, seq: u64) {
        // Dekker with `Cursor::changed`: it counts itself waiting, then reads `last_seq`; this
        // stores `last_seq`, then reads the count. One of the two sees the other.
        self.last_seq.store(seq, Ordering::SeqCst);
        self.wake.pushed(self.subscribers.load(Ordering::Acquire));
    }

    /// A queue whose first event gets sequence `last + 1`: a context's log continued where
    /// its shared copy ends (`[cluster]`), so its ids go on increasing across replicas.
    pub fn starting_after(self, last: u64) -> Self {
        {
            let mut inner = self.write();
            inner.next_seq = last + 1;
        }
        self.last_seq.store(last, Ordering::SeqCst);
        self
    }

    /// Appends an event read from another replica's log under its own sequence `seq` (its
    /// `event_id` is already `seq`). A `seq` at or before the last one is a repeat and ignored;
    /// one past a hole (the shared log was trimmed past this reader) empties the log first, so
    /// cursors still needing the missed events learn they lagged.
    pub fn push_at(&self, seq: u64, event: A2aEvent) -> Result<(), Closed> {
        {
            let mut inner = self.write();
            if inner.closed {
                return Err(Closed);
            }
            if seq < inner.next_seq {
                return Ok(());
            }
            if seq > inner.next_seq {
                inner.ring.clear();
            }
            inner.next_seq = seq + 1;
            let stored = Arc::new(Stored {
                seq,
                event,
                frame: OnceLock::new(),
            });
            self.keep(&mut inner, stored);
        }
        self.announce(seq);
        Ok(())
    }

    /// How many cursors are open.
    pub fn subscriber_count(&self) -> usize {
        self.subscribers.load(Ordering::Acquire)
    }

    /// The sequence of the last event pushed (0 before any).
    pub fn last_seq(&self) -> u64 {
        self.last_seq.load(Ordering::Acquire)
    }

    /// Subscribes after `last_event_id` (or from the start of the log when `None`).
    pub fn subscribe(
        self: &Arc<Self>,
        last_event_id: Option<&str>,
    ) -> Result<Subscription, TooManySubscribers> {
        let (gap, next) = {
            let inner = self.read();
            let oldest = inner.ring.front().map_or(inner.next_seq, |s| s.seq);
            match last_event_id {
                None => (false, oldest),
                Some(id) => match inner.ring.iter().rev().find(|s| s.event.event_id == id) {
                    Some(s) => (false, s.seq + 1),
                    None => (!inner.just_before_oldest(id), oldest),
                },
            }
        };
        Ok(Subscription {
            gap,
            cursor: self.cursor(next)?,
        })
    }

    /// Subscribes to events pushed from now on, skipping the log.
    pub fn subscribe_live(self: &Arc<Self>) -> Result<Subscription, TooManySubscribers> {
        let next = self.read().next_seq;
        Ok(Subscription {
            gap: false,
            cursor: self.cursor(next)?,
        })
    }

    /// Every retained event, oldest first.
    pub fn snapshot(&self) -> Vec<Arc<Stored>> {
        self.read().ring.iter().cloned().collect()
    }

    /// Closes the queue: later pushes fail with [`Closed`], subscribers end after what is
    /// retained.
    pub fn close(&self) {
        self.write().closed = true;
        self.wake.now();
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.read().closed
    }

    // The lock guards plain data; a panic while holding it cannot leave it half-written.
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Inner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Inner> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// A full stream refuses the call that asked for it the way every capacity limit does.
impl From<TooManySubscribers> for crate::model::error::GatewayError {
    fn from(e: TooManySubscribers) -> Self {
        crate::model::error::GatewayError::TooManySubscribers(e.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::event::EventKind;
    use serde_json::Map;

    fn ev() -> A2aEvent {
        A2aEvent::new(EventKind::Status, Some("t".into()), Map::new())
    }

    fn all(c: &mut Cursor) -> (Vec<u64>, Read) {
        let mut out = Vec::new();
        let r = c.read(&mut out, usize::MAX);
        (out.iter().map(|s| s.seq).collect(), r)
    }

    #[test]
    fn ids_increase_and_replay_is_bounded() {
        let q = ReplayLog::new(2);
        for _ in 0..3 {
            q.push(ev()).unwrap();
        }
        let ids: Vec<_> = q
            .snapshot()
            .iter()
            .map(|s| s.event.event_id.clone())
            .collect();
        assert_eq!(ids, ["2", "3"]);
    }

    #[test]
    fn resume_after_id_and_gap_for_unknown() {
        let q = Arc::new(ReplayLog::new(10));
        for _ in 0..3 {
            q.push(ev()).unwrap();
        }
        let mut s = q.subscribe(Some("2")).unwrap();
        assert!(!s.gap);
        assert_eq!(all(&mut s.cursor).0, [3]);
        let mut s = q.subscribe(Some("999")).unwrap();
        assert!(s.gap);
        assert_eq!(all(&mut s.cursor).0, [1, 2, 3]);
    }

    #[test]
    fn resuming_before_the_first_event_is_no_gap() {
        let q = Arc::new(ReplayLog::new(10));
        assert!(!q.subscribe(Some("0")).unwrap().gap, "nothing pushed yet");
        for _ in 0..3 {
            q.push(ev()).unwrap();
        }
        let mut s = q.subscribe(Some("0")).unwrap();
        assert!(!s.gap);
        assert_eq!(all(&mut s.cursor).0, [1, 2, 3]);
        let q = Arc::new(ReplayLog::new(2));
        for _ in 0..3 {
            q.push(ev()).unwrap();
        }
        assert!(
            !q.subscribe(Some("1")).unwrap().gap,
            "event 1 left, 2 is the oldest"
        );
        assert!(q.subscribe(Some("0")).unwrap().gap, "event 1 was dropped");
    }

    #[test]
    fn a_cursor_reads_in_order_and_lags_only_when_its_events_left_the_log() {
        let q = Arc::new(ReplayLog::new(4));
        let mut fast = q.subscribe_live().unwrap().cursor;
        let mut slow = q.subscribe_live().unwrap().cursor;
        for _ in 0..3 {
            q.push(ev()).unwrap();
        }
        let mut out = Vec::new();
        assert_eq!(fast.read(&mut out, 2), Read::Events(2));
        assert_eq!(all(&mut fast), (vec![3], Read::Events(1)));
        assert_eq!(all(&mut fast).1, Read::Empty);
        for _ in 0..3 {
            q.push(ev()).unwrap();
        }
        assert_eq!(all(&mut fast), (vec![4, 5, 6], Read::Events(3)));
        assert_eq!(all(&mut slow).1, Read::Lagged(2), "1 and 2 left a log of 4");
        assert_eq!(
            all(&mut slow).1,
            Read::Lagged(2),
            "a lag stays until skipped"
        );
        slow.skip(2);
        assert_eq!(all(&mut slow), (vec![3, 4, 5, 6], Read::Events(4)));
        q.close();
        assert_eq!(all(&mut fast).1, Read::Closed);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_log_waits_for_a_reader_that_reads_and_overruns_one_that_does_not() {
        let grace = std::time::Duration::from_secs(1);
        let q = Arc::new(ReplayLog::new(16));
        let mut reader = q.subscribe_live().unwrap().cursor;
        for _ in 0..16 {
            q.push(ev()).unwrap();
        }
        // Full, and the reader needs every event: the producer waits until it reads.
        let started = tokio::time::Instant::now();
        let producer = {
            let q = q.clone();
            tokio::spawn(async move {
                q.room(grace).await;
                q.push(ev()).unwrap();
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!producer.is_finished(), "waits while the reader lags");
        assert_eq!(all(&mut reader).1, Read::Events(16));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!producer.is_finished(), "read, but not yet let go of");
        // The next read says the reader is done with the first 16.
        assert_eq!(all(&mut reader).1, Read::Empty);
        producer.await.unwrap();
        assert!(
            started.elapsed() < grace,
            "released by the read, not the grace"
        );
        assert_eq!(all(&mut reader), (vec![17], Read::Events(1)));
        // A reader that stops reading holds the producer back once, for the grace.
        let _stalled = q.subscribe_live().unwrap().cursor;
        for _ in 0..16 {
            q.push(ev()).unwrap();
        }
        let started = tokio::time::Instant::now();
        q.room(grace).await;
        assert!(started.elapsed() >= grace);
        // Overrun one event at a time: the stalled reader is not waited for again.
        for _ in 0..16 {
            q.push(ev()).unwrap();
            let started = tokio::time::Instant::now();
            q.room(grace).await;
            assert!(
                started.elapsed() < grace,
                "an overrun reader is waited for once"
            );
        }
    }

    #[test]
    fn a_mirrored_log_keeps_the_ids_it_is_given_and_reports_holes() {
        let q = Arc::new(ReplayLog::new(8).starting_after(40));
        let at = |seq: u64| {
            let mut e = ev();
            e.event_id = seq.to_string();
            e
        };
        let mut early = q.subscribe(Some("40")).unwrap();
        assert!(!early.gap, "nothing is missing before 41");
        q.push_at(41, at(41)).unwrap();
        q.push_at(41, at(41)).unwrap();
        q.push_at(42, at(42)).unwrap();
        assert_eq!(all(&mut early.cursor), (vec![41, 42], Read::Events(2)));
        let mut resumed = q.subscribe(Some("41")).unwrap();
        assert!(!resumed.gap);
        assert_eq!(all(&mut resumed.cursor).0, [42]);
        // The shared log was trimmed past this reader: 43..=49 never arrive.
        let mut slow = q.subscribe(Some("41")).unwrap().cursor;
        q.push_at(50, at(50)).unwrap();
        assert_eq!(all(&mut slow).1, Read::Lagged(8));
        assert!(q.subscribe(Some("42")).unwrap().gap);
        assert_eq!(q.last_seq(), 50);
        // A producer continuing the log stamps the next sequence.
        let q = ReplayLog::new(8).starting_after(50);
        assert_eq!(q.push(ev()).unwrap().event.event_id, "51");
    }

    #[test]
    fn push_after_close_is_an_error_not_a_panic() {
        let q = ReplayLog::new(4);
        q.close();
        assert_eq!(q.push(ev()).unwrap_err(), Closed);
    }

    #[test]
    fn subscribers_are_bounded() {
        let q = Arc::new(ReplayLog::new(4).with_max_subscribers(2));
        let a = q.subscribe(None).unwrap();
        let _b = q.subscribe_live().unwrap();
        assert_eq!(q.subscribe(None).unwrap_err(), TooManySubscribers(2));
        drop(a);
        assert!(
            q.subscribe(None).is_ok(),
            "a slot frees when a subscriber leaves"
        );
    }

    #[tokio::test]
    async fn a_waiting_cursor_wakes_for_a_push_and_for_close() {
        let q = Arc::new(ReplayLog::new(4));
        let mut c = q.subscribe(None).unwrap().cursor;
        assert_eq!(all(&mut c).1, Read::Empty);
        let q2 = q.clone();
        tokio::spawn(async move { q2.push(ev()).unwrap() });
        tokio::time::timeout(std::time::Duration::from_secs(5), c.changed())
            .await
            .unwrap();
        assert_eq!(all(&mut c), (vec![1], Read::Events(1)));
        q.close();
        tokio::time::timeout(std::time::Duration::from_secs(5), c.changed())
            .await
            .unwrap();
        assert_eq!(all(&mut c).1, Read::Closed);
    }
}
