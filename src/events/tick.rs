//! How an event log wakes the cursors waiting on it: at most once a tick.
//!
//! A log's producer may push an event every millisecond to a thousand waiting subscribers. Woken
//! for each, every subscriber would make a thousand wake-ups and writes a second, which two cores
//! cannot serve within the latency a live stream needs. So the log wakes its waiters at most once
//! a *tick*: the first push after a quiet spell wakes them at once (a lone event is not delayed),
//! later pushes within the tick are gathered and a timer the producer arms wakes the waiters at
//! its end, so each subscriber reads them in one go and writes them in one chunk. The tick grows
//! with the number of subscribers ([`tick_for`]): one keeps a short one, a thousand share each
//! wake-up across more events. (The log's subscribers, not the cursors waiting at the moment of
//! a push: right after a wake-up few are back waiting yet, and a tick sized by those would be
//! short exactly when the many are about to wait again.)
//!
//! A cursor that is busy writing when events arrive is not held back: it reads whatever the log
//! holds when it comes back, and waits only once it has caught up.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::futures::Notified;
use tokio::sync::Notify;
use tokio::time::Instant;

/// The shortest tick, for up to [`FULL`]` / 4` subscribers: at 1,000 events/s two events share
/// a wake-up and a write, as they would if each subscriber lingered this long after waking.
pub(crate) const MIN_TICK: Duration = Duration::from_millis(2);

/// The longest tick, reached at [`FULL`] subscribers.
pub(crate) const MAX_TICK: Duration = Duration::from_millis(8);

/// Subscribers at which the tick reaches [`MAX_TICK`].
pub(crate) const FULL: usize = 1000;

/// The tick for a log with `subscribers`: [`MIN_TICK`], growing in proportion to them from
/// [`FULL`]` / 4` on to [`MAX_TICK`] at [`FULL`]. In proportion, so from there on a trickle
/// costs about as many wake-ups (and writes) a second however many subscribers wait: one each a
/// tick, 125 000 a second.
pub(crate) fn tick_for(subscribers: usize) -> Duration {
    let grown = MAX_TICK.mul_f64(subscribers.min(FULL) as f64 / FULL as f64);
    grown.max(MIN_TICK)
}

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Wake {
    shared: Arc<Shared>,
}

#[derive(Debug, Default)]
struct Shared {
    notify: Notify,
    /// Cursors between [`Wake::enter`] and [`Wake::leave`]: a push into a log nobody waits on
    /// costs an atomic, not a notification.
    waiting: AtomicUsize,
    /// A timer will wake the waiters at the end of the current tick. The one record of it:
    /// written only under `tick`'s lock, so a read under the lock is exact (a push that finds it
    /// clear there arms the timer, no other can at the same time), and read without the lock
    /// first, so a flood's pushes within an armed tick cost two atomics and no lock.
    armed: AtomicBool,
    tick: Mutex<Tick>,
}

#[derive(Debug, Default)]
struct Tick {
    /// When the waiters were last woken.
    last: Option<Instant>,
}

impl Wake {
    /// The future a cursor about to wait awaits; `enable` it before [`enter`](Self::enter).
    pub(crate) fn notified(&self) -> Notified<'_> {
        self.shared.notify.notified()
    }

    /// Counts a cursor waiting. It must look for new events after this (`SeqCst`): a push that
    /// stored its sequence before this call is seen by that look, one after it by
    /// [`pushed`](Self::pushed) reading this count.
    pub(crate) fn enter(&self) {
        self.shared.waiting.fetch_add(1, Ordering::SeqCst);
    }

    /// Uncounts a cursor that stopped waiting.
    pub(crate) fn leave(&self) {
        self.shared.waiting.fetch_sub(1, Ordering::SeqCst);
    }

    /// After a push published its sequence (`SeqCst`) to a log with `subscribers`: wakes the
    /// waiters now, or at the end of the tick (see the module docs).
    pub(crate) fn pushed(&self, subscribers: usize) {
        let waiting = self.shared.waiting.load(Ordering::SeqCst);
        // Armed: the timer has yet to clear this, then wake the waiters, so it wakes them after
        // this push.
        if waiting == 0 || self.shared.armed.load(Ordering::SeqCst) {
            return;
        }
        let tick = tick_for(subscribers);
        let now = Instant::now();
        let at = {
            let mut t = self.shared.tick();
            // Armed by another push since the look above.
            if self.shared.armed.load(Ordering::SeqCst) {
                return;
            }
            match t.last.map(|last| last + tick).filter(|end| *end > now) {
                Some(end) => {
                    self.shared.armed.store(true, Ordering::SeqCst);
                    end
                }
                None => {
                    t.last = Some(now);
                    drop(t);
                    self.shared.notify.notify_waiters();
                    return;
                }
            }
        };
        // Outside a runtime (a log read by plain threads) there is no timer to arm.
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            self.shared.disarm();
            self.now();
            return;
        };
        let shared = self.shared.clone();
        rt.spawn(async move {
            tokio::time::sleep_until(at).await;
            shared.disarm();
            shared.notify.notify_waiters();
        });
    }

    /// Wakes every waiter at once (the log closed).
    pub(crate) fn now(&self) {
        self.shared.tick().last = Some(Instant::now());
        self.shared.notify.notify_waiters();
    }
}

impl Shared {
    /// Ends an armed tick, as its waiters are about to be woken.
    fn disarm(&self) {
        let mut t = self.tick();
        t.last = Some(Instant::now());
        self.armed.store(false, Ordering::SeqCst);
    }

    // Plain data; a panic while holding the lock cannot leave it half-written.
    fn tick(&self) -> std::sync::MutexGuard<'_, Tick> {
        self.tick.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts `n` waiters (as `Cursor::changed` waits); each returns how long after `t0` it woke.
    async fn waiters(
        wake: &Arc<Wake>,
        n: usize,
        t0: Instant,
    ) -> Vec<tokio::task::JoinHandle<Duration>> {
        let mut all = Vec::with_capacity(n);
        for _ in 0..n {
            let wake = wake.clone();
            let (tx, rx) = tokio::sync::oneshot::channel();
            all.push(tokio::spawn(async move {
                let woken = wake.notified();
                let mut woken = std::pin::pin!(woken);
                woken.as_mut().enable();
                wake.enter();
                let _ = tx.send(());
                woken.await;
                wake.leave();
                t0.elapsed()
            }));
            rx.await.unwrap();
        }
        all
    }

    async fn woken_after(all: Vec<tokio::task::JoinHandle<Duration>>) -> Vec<Duration> {
        let mut out = Vec::with_capacity(all.len());
        for w in all {
            out.push(w.await.unwrap());
        }
        out
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_push_wakes_at_once_and_later_ones_at_the_end_of_the_tick() {
        let wake = Arc::new(Wake::default());
        let t0 = Instant::now();
        let first = waiters(&wake, 1, t0).await;
        wake.pushed(1);
        assert_eq!(woken_after(first).await, [Duration::ZERO], "not delayed");
        // Two more pushes within the tick: one wake-up, at its end.
        tokio::time::sleep(Duration::from_micros(500)).await;
        let second = waiters(&wake, 1, t0).await;
        wake.pushed(1);
        tokio::time::sleep(Duration::from_micros(500)).await;
        wake.pushed(1);
        let at = woken_after(second).await[0];
        assert!(
            at >= MIN_TICK && at <= MIN_TICK + Duration::from_millis(1),
            "{at:?}"
        );
        // Quiet for longer than a tick: the next push wakes at once again.
        tokio::time::sleep(MIN_TICK * 2).await;
        let t1 = Instant::now();
        let third = waiters(&wake, 1, t1).await;
        wake.pushed(1);
        assert_eq!(woken_after(third).await, [Duration::ZERO]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_thousand_subscribers_are_woken_once_a_long_tick() {
        let wake = Arc::new(Wake::default());
        let t0 = Instant::now();
        let first = waiters(&wake, FULL, t0).await;
        wake.pushed(FULL);
        assert!(woken_after(first).await.iter().all(|d| d.is_zero()));
        let second = waiters(&wake, FULL, t0).await;
        // An event every millisecond: gathered for the whole (longer) tick.
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(1)).await;
            wake.pushed(FULL);
        }
        let woken = woken_after(second).await;
        let at = woken[0];
        assert!(woken.iter().all(|d| *d == at), "all at once");
        assert!(
            at >= MAX_TICK && at <= MAX_TICK + Duration::from_millis(1),
            "{at:?}"
        );
    }

    #[test]
    fn without_a_runtime_a_push_wakes_at_once() {
        use std::future::Future;
        let wake = Wake::default();
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        for push in ["the first", "one within the tick"] {
            let woken = wake.notified();
            let mut woken = std::pin::pin!(woken);
            woken.as_mut().enable();
            wake.enter();
            wake.pushed(1);
            assert!(woken.as_mut().poll(&mut cx).is_ready(), "{push}");
            wake.leave();
        }
    }

    #[test]
    fn the_tick_grows_with_the_waiters_between_its_bounds() {
        assert_eq!(tick_for(1), MIN_TICK);
        assert_eq!(tick_for(FULL / 4), MIN_TICK);
        assert_eq!(tick_for(FULL / 2), MAX_TICK / 2);
        assert_eq!(tick_for(FULL), MAX_TICK);
        assert_eq!(tick_for(10 * FULL), MAX_TICK);
    }
}
