//! A bounded, closable event queue with a replay buffer and fan-out to any number of subscribers.
//!
//! Pushing never waits for a subscriber: each subscriber reads from a broadcast ring of
//! `subscriber_buffer` slots and is cut off (it learns it lagged) when it falls that far behind,
//! so one slow reader never slows the producer or the others. The last `replay` events are kept
//! for resumption by `Last-Event-ID`. Each frame is encoded once and shared.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use tokio::sync::broadcast;

use super::A2aEvent;

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

/// What a new subscriber gets: the events it missed, then a live receiver.
#[derive(Debug)]
pub struct Subscription {
    /// `Last-Event-ID` named an event no longer (or never) retained: events may be missing.
    pub gap: bool,
    /// Retained events after the resume point, oldest first.
    pub backlog: Vec<Arc<Stored>>,
    /// Live events after the backlog, with no overlap and no hole.
    pub live: broadcast::Receiver<Arc<Stored>>,
}

#[derive(Debug)]
struct Inner {
    next_seq: u64,
    ring: VecDeque<Arc<Stored>>,
    tx: Option<broadcast::Sender<Arc<Stored>>>,
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
            Some(first) => first.seq == n + 1 && first.event.event_id == first.seq.to_string(),
            None => self.next_seq == n + 1,
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct EventQueue {
    inner: Mutex<Inner>,
    replay: usize,
    max_subscribers: usize,
}

impl EventQueue {
    /// A queue keeping `replay` events, with `subscriber_buffer` slots per subscriber.
    pub fn new(replay: usize, subscriber_buffer: usize) -> Self {
        let (tx, _) = broadcast::channel(subscriber_buffer.max(1));
        EventQueue {
            inner: Mutex::new(Inner {
                next_seq: 1,
                ring: VecDeque::with_capacity(replay.min(4096)),
                tx: Some(tx),
            }),
            replay: replay.max(1),
            max_subscribers: usize::MAX,
        }
    }

    /// Limits live subscribers; more are refused with [`TooManySubscribers`].
    pub fn with_max_subscribers(mut self, max: usize) -> Self {
        self.max_subscribers = max.max(1);
        self
    }

    fn receiver(
        &self,
        inner: &Inner,
    ) -> Result<broadcast::Receiver<Arc<Stored>>, TooManySubscribers> {
        match &inner.tx {
            Some(tx) if tx.receiver_count() >= self.max_subscribers => {
                Err(TooManySubscribers(self.max_subscribers))
            }
            Some(tx) => Ok(tx.subscribe()),
            None => Ok(broadcast::channel(1).1),
        }
    }

    /// Appends an event; an empty `event_id` is stamped with the queue's sequence number.
    pub fn push(&self, mut event: A2aEvent) -> Result<Arc<Stored>, Closed> {
        let mut inner = self.lock();
        let Some(tx) = inner.tx.clone() else {
            return Err(Closed);
        };
        let seq = inner.next_seq;
        inner.next_seq += 1;
        if event.event_id.is_empty() {
            event.event_id = seq.to_string();
        }
        let stored = Arc::new(Stored {
            seq,
            event,
            frame: OnceLock::new(),
        });
        if inner.ring.len() == self.replay {
            inner.ring.pop_front();
        }
        inner.ring.push_back(stored.clone());
        // No receiver is fine: the event stays in the replay buffer.
        let _ = tx.send(stored.clone());
        Ok(stored)
    }

    /// Subscribes after `last_event_id` (or from the start of the buffer when `None`).
    pub fn subscribe(
        &self,
        last_event_id: Option<&str>,
    ) -> Result<Subscription, TooManySubscribers> {
        let inner = self.lock();
        let (gap, start) = match last_event_id {
            None => (false, 0),
            Some(id) => match inner.ring.iter().rposition(|s| s.event.event_id == id) {
                Some(i) => (false, i + 1),
                None => (!inner.just_before_oldest(id), 0),
            },
        };
        let live = self.receiver(&inner)?;
        let backlog = inner.ring.iter().skip(start).cloned().collect();
        Ok(Subscription { gap, backlog, live })
    }

    /// Subscribes to live events only, skipping the replay buffer.
    pub fn subscribe_live(&self) -> Result<broadcast::Receiver<Arc<Stored>>, TooManySubscribers> {
        self.receiver(&self.lock())
    }

    /// Every retained event, oldest first.
    pub fn snapshot(&self) -> Vec<Arc<Stored>> {
        self.lock().ring.iter().cloned().collect()
    }

    /// Closes the queue: later pushes fail with [`Closed`], subscribers end after the backlog.
    pub fn close(&self) {
        self.lock().tx = None;
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.lock().tx.is_none()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The lock guards plain data; a panic while holding it cannot leave it half-written.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::EventKind;
    use serde_json::Map;

    fn ev() -> A2aEvent {
        A2aEvent::new(EventKind::Status, Some("t".into()), Map::new())
    }

    #[test]
    fn ids_increase_and_replay_is_bounded() {
        let q = EventQueue::new(2, 8);
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
        let q = EventQueue::new(10, 8);
        for _ in 0..3 {
            q.push(ev()).unwrap();
        }
        let s = q.subscribe(Some("2")).unwrap();
        assert!(!s.gap);
        assert_eq!(s.backlog.len(), 1);
        let s = q.subscribe(Some("999")).unwrap();
        assert!(s.gap);
        assert_eq!(s.backlog.len(), 3);
    }

    #[test]
    fn resuming_before_the_first_event_is_no_gap() {
        let q = EventQueue::new(10, 8);
        assert!(!q.subscribe(Some("0")).unwrap().gap, "nothing pushed yet");
        for _ in 0..3 {
            q.push(ev()).unwrap();
        }
        let s = q.subscribe(Some("0")).unwrap();
        assert!(!s.gap);
        assert_eq!(s.backlog.len(), 3);
        let q = EventQueue::new(2, 8);
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
    fn push_after_close_is_an_error_not_a_panic() {
        let q = EventQueue::new(4, 4);
        q.close();
        assert_eq!(q.push(ev()).unwrap_err(), Closed);
    }

    #[test]
    fn subscribers_are_bounded() {
        let q = EventQueue::new(4, 4).with_max_subscribers(2);
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
    async fn live_events_follow_the_backlog() {
        let q = EventQueue::new(4, 4);
        q.push(ev()).unwrap();
        let mut s = q.subscribe(None).unwrap();
        q.push(ev()).unwrap();
        assert_eq!(s.backlog[0].seq, 1);
        assert_eq!(s.live.recv().await.unwrap().seq, 2);
    }
}
