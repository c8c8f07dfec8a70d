//! Timers kept across waits (a client connection's, a pooled upstream connection's): each wait
//! has its own deadline, but the timer is moved only when it must fire sooner, so most waits
//! leave the runtime's timer wheel alone. A timer that fires for an earlier deadline is moved on
//! to the wait's own and waited on again.

use std::pin::Pin;

use tokio::time::{Instant, Sleep};

/// Makes `timer` fire no later than `due`: moved only when it is set for later.
#[inline]
pub(crate) fn arm(timer: Pin<&mut Sleep>, due: Instant) {
    if timer.deadline() > due {
        timer.reset(due);
    }
}

/// Whether `timer`, having fired, marks the end of the wait for `due`; if it fired early (set
/// for an earlier wait), it is moved on to `due` and the wait goes on.
pub(crate) fn fired(timer: Pin<&mut Sleep>, due: Instant) -> bool {
    if Instant::now() >= due {
        return true;
    }
    timer.reset(due);
    false
}

/// Waits until `due` on `timer`, which may be set for an earlier wait.
pub(crate) async fn until(mut timer: Pin<&mut Sleep>, due: Instant) {
    arm(timer.as_mut(), due);
    loop {
        timer.as_mut().await;
        if fired(timer.as_mut(), due) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn a_timer_set_later_is_moved_sooner_and_one_set_sooner_is_waited_past() {
        let start = Instant::now();
        let mut timer = Box::pin(tokio::time::sleep(Duration::from_secs(60)));
        until(timer.as_mut(), start + Duration::from_secs(1)).await;
        assert_eq!(Instant::now(), start + Duration::from_secs(1));
        // Set for 1 s: a wait until 3 s does not end when it fires.
        let mut early = Box::pin(tokio::time::sleep(Duration::from_secs(1)));
        until(early.as_mut(), start + Duration::from_secs(3)).await;
        assert_eq!(Instant::now(), start + Duration::from_secs(3));
        assert_eq!(early.deadline(), start + Duration::from_secs(3));
    }
}
