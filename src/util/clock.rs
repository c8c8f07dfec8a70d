//! The wall clock's current second, read on the call path through the monotonic clock.
//!
//! A proxied call's answer carries a `Date`, and the console counts the call in its second:
//! reading the wall clock and converting it to Unix time for each (`SystemTime::now` and
//! `duration_since`) measured dearer (docs/performance.md). Within a second, the monotonic clock
//! tells whether the second has turned (one reading and a comparison); the wall clock is read again
//! only when it has, so a wall clock that is stepped shows within a second.

use std::cell::Cell;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
