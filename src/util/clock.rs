//! The process's monotonic clock, counted from its first reading ([`now_ns`], [`now_ms`]), and
//! the wall clock's current second, read on the call path through the monotonic clock.
//!
//! Rate buckets, cached tokens and endpoint ejections stamp their times on the one monotonic
//! clock, so a state kept over a reload stays comparable with every new reading.
//!
//! A proxied call's answer carries a `Date`, and the console counts the call in its second:
//! reading the wall clock and converting it to Unix time for each (`SystemTime::now` and
//! `duration_since`) measured dearer (docs/performance.md). Within a second, the monotonic clock
//! tells whether the second has turned (one reading and a comparison); the wall clock is read again
//! only when it has, so a wall clock that is stepped shows within a second.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Time since the first reading in this process.
fn elapsed() -> Duration {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed()
}

/// Nanoseconds since the first reading in this process.
pub(crate) fn now_ns() -> u64 {
    elapsed().as_nanos() as u64
}

/// Milliseconds since the first reading in this process, from 1 (0 stands for "never").
pub(crate) fn now_ms() -> u64 {
    elapsed().as_millis() as u64 + 1
}

thread_local! {
    /// The second this thread last read, and the monotonic instant it ends by.
    static SECOND: Cell<Option<(Instant, u64)>> = const { Cell::new(None) };
}

/// The current Unix time, in whole seconds.
pub(crate) fn unix_second() -> u64 {
    let at = Instant::now();
    SECOND.with(|kept| match kept.get() {
        Some((until, second)) if at < until => second,
        _ => {
            let wall = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            // Counted from `at`, read before the wall clock: the second is re-read a little
            // early rather than late.
            let left = Duration::from_nanos(u64::from(1_000_000_000 - wall.subsec_nanos()));
            kept.set(Some((at + left, wall.as_secs())));
            wall.as_secs()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_monotonic_clock_counts_from_one_epoch() {
        let (ms, ns) = (now_ms(), now_ns());
        assert!(ms >= 1, "0 is never a reading");
        std::thread::sleep(Duration::from_millis(5));
        assert!(now_ns() >= ns + 5_000_000);
        assert!(now_ms() >= ms + 5);
        // Both units read the same epoch: a later reading in nanoseconds is never behind.
        let ms = now_ms();
        assert!(now_ns() / 1_000_000 + 1 >= ms);
    }

    #[test]
    fn the_second_is_the_wall_clocks() {
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let read = unix_second();
        let again = unix_second();
        let after = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(before <= read && read <= again && again <= after);
        std::thread::sleep(Duration::from_millis(1100));
        assert!(unix_second() > read, "the second turns");
    }
}
