//! Waiting for a condition to come true: it is polled, with a deadline.

use std::time::{Duration, Instant};

/// Polls `f` every 20 ms until it gives `Some`, or panics naming `what` after `within`.
pub async fn until<T>(what: &str, within: Duration, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// [`until`] `f` gives `true`.
pub async fn until_true(what: &str, within: Duration, mut f: impl AsyncFnMut() -> bool) {
    until(what, within, async || f().await.then_some(())).await
}
