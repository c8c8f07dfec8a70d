//! The rollback window of one split side: calls, errors and a latency histogram over the last
//! `window_ms`, in fixed memory. Pure: the caller passes the time (milliseconds on any clock).
//!
//! The window is a ring of [`BUCKETS`] time buckets whose running sum is kept, so recording is
//! O(1) and judging reads the sum. Latencies go into geometric bins 6 % wide, so the p99 it
//! reports is the upper edge of the bin holding it: at most 6 % above the true value.

use crate::config::Rollback;

/// Time buckets per window.
pub(crate) const BUCKETS: usize = 20;
/// Latency bins; bin `i` holds latencies up to `GROWTH^i` ms (the last one, everything above).
const BINS: usize = 200;
const GROWTH: f64 = 1.06;

#[derive(Clone, Debug)]
struct Bucket {
    calls: u64,
    errors: u64,
    latency: Vec<u32>,
}

impl Bucket {
    fn new() -> Self {
        Bucket {
            calls: 0,
            errors: 0,
            latency: vec![0; BINS],
        }
    }
}

/// Why a side was rolled back: the figures that tripped it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Trip {
    /// What was exceeded: `max_error_rate` or `max_p99_ms`.
    pub limit: &'static str,
    /// Calls in the window.
    pub calls: u64,
    /// Errors in the window.
    pub errors: u64,
    /// errors / calls.
    pub error_rate: f64,
    /// The window's p99 latency (upper edge of its bin), ms.
    pub p99_ms: u64,
    /// A sentence with the figures and the limit.
    pub reason: String,
}

/// Calls, errors and latencies of the last `window_ms`.
#[derive(Clone, Debug)]
pub(crate) struct Window {
    width_ms: u64,
    ring: Vec<Bucket>,
    /// Absolute number (time / width) of the newest bucket.
    head: u64,
    total: Bucket,
}

/// Figures of the window, as `/migration` shows them.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Figures {
    /// Calls in the window.
    pub calls: u64,
    /// Errors in the window.
    pub errors: u64,
    /// The p99 latency, ms (0 without calls).
    pub p99_ms: u64,
}

impl Window {
    /// An empty window `window_ms` long.
    pub(crate) fn new(window_ms: u64) -> Self {
        Window {
            width_ms: (window_ms / BUCKETS as u64).max(1),
            ring: vec![Bucket::new(); BUCKETS],
            head: 0,
            total: Bucket::new(),
        }
    }

    /// Moves the window's end to `now_ms`, forgetting buckets that fell out of it.
    fn advance(&mut self, now_ms: u64) {
        let at = now_ms / self.width_ms;
        if at <= self.head {
            return;
        }
        let steps = (at - self.head).min(BUCKETS as u64);
        for b in (at - steps + 1)..=at {
            let slot = &mut self.ring[(b % BUCKETS as u64) as usize];
            self.total.calls -= slot.calls;
            self.total.errors -= slot.errors;
            for (t, s) in self.total.latency.iter_mut().zip(&mut slot.latency) {
                *t -= *s;
                *s = 0;
            }
            slot.calls = 0;
            slot.errors = 0;
        }
        self.head = at;
    }

    /// Records one call that ended at `now_ms`.
    pub(crate) fn record(&mut self, now_ms: u64, error: bool, latency_ms: f64) {
        self.advance(now_ms);
        let bin = bin_of(latency_ms);
        let slot = &mut self.ring[(self.head % BUCKETS as u64) as usize];
        for b in [slot, &mut self.total] {
            b.calls += 1;
            b.errors += u64::from(error);
            b.latency[bin] += 1;
        }
    }

    /// The window's figures at `now_ms`.
    pub(crate) fn figures(&mut self, now_ms: u64) -> Figures {
        self.advance(now_ms);
        Figures {
            calls: self.total.calls,
            errors: self.total.errors,
            p99_ms: self.p99(),
        }
    }

    fn p99(&self) -> u64 {
        let calls = self.total.calls;
        if calls == 0 {
            return 0;
        }
        // The smallest bin at or below which 99 % of the calls lie.
        let need = calls - calls / 100;
        let mut seen = 0;
        for (i, n) in self.total.latency.iter().enumerate() {
            seen += u64::from(*n);
            if seen >= need {
                return upper_edge(i);
            }
        }
        upper_edge(BINS - 1)
    }

    /// Whether the side must be rolled back at `now_ms` under `rule`.
    pub(crate) fn check(&mut self, now_ms: u64, rule: &Rollback) -> Option<Trip> {
        let f = self.figures(now_ms);
        if f.calls < rule.min_calls {
            return None;
        }
        let rate = f.errors as f64 / f.calls as f64;
        let (limit, reason) = if rate > rule.max_error_rate {
            (
                "max_error_rate",
                format!(
                    "error rate {rate:.3} ({} of {} calls in {} ms) exceeds max_error_rate {}",
                    f.errors, f.calls, rule.window_ms, rule.max_error_rate
                ),
            )
        } else if let Some(max) = rule.max_p99_ms.filter(|m| f.p99_ms > *m) {
            (
                "max_p99_ms",
                format!(
                    "p99 latency {} ms (over {} calls in {} ms) exceeds max_p99_ms {max}",
                    f.p99_ms, f.calls, rule.window_ms
                ),
            )
        } else {
            return None;
        };
        Some(Trip {
            limit,
            calls: f.calls,
            errors: f.errors,
            error_rate: rate,
            p99_ms: f.p99_ms,
            reason,
        })
    }
}

fn bin_of(latency_ms: f64) -> usize {
    if latency_ms.is_nan() || latency_ms <= 1.0 {
        return 0;
    }
    ((latency_ms.ln() / GROWTH.ln()).ceil() as usize).min(BINS - 1)
}

fn upper_edge(bin: usize) -> u64 {
    GROWTH.powi(bin as i32).ceil() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(rate: f64, min: u64, p99: Option<u64>) -> Rollback {
        Rollback {
            max_error_rate: rate,
            min_calls: min,
            window_ms: 10_000,
            max_p99_ms: p99,
        }
    }

    #[test]
    fn trips_on_error_rate_only_after_min_calls() {
        let mut w = Window::new(10_000);
        let r = rule(0.05, 50, None);
        for i in 0..49 {
            w.record(i, true, 1.0);
        }
        assert_eq!(w.check(49, &r), None, "49 calls are not judged");
        w.record(49, true, 1.0);
        let t = w.check(50, &r).expect("50 errors of 50 trip");
        assert_eq!((t.limit, t.calls, t.errors), ("max_error_rate", 50, 50));
        assert!(t.reason.contains("50 of 50"), "{}", t.reason);
    }

    #[test]
    fn a_healthy_side_stays_and_old_errors_leave_the_window() {
        let mut w = Window::new(10_000);
        let r = rule(0.05, 10, None);
        for i in 0..100 {
            w.record(i, i % 50 == 0, 3.0); // 2 % errors
        }
        assert_eq!(w.check(100, &r), None);
        let mut w = Window::new(10_000);
        for i in 0..20 {
            w.record(i, true, 1.0);
        }
        assert!(w.check(100, &r).is_some());
        // Eleven seconds later those errors are out of the window.
        assert_eq!(w.figures(11_000).calls, 0);
        assert_eq!(w.check(11_000, &r), None);
        // A partial expiry: calls from the first half leave, the second half stays.
        let mut w = Window::new(10_000);
        w.record(0, false, 1.0);
        w.record(6_000, false, 1.0);
        assert_eq!(w.figures(12_000).calls, 1);
    }

    #[test]
    fn trips_on_p99() {
        let mut w = Window::new(10_000);
        let r = rule(1.0, 100, Some(100));
        for i in 0..100 {
            w.record(i, false, if i < 98 { 10.0 } else { 500.0 });
        }
        // 2 % of the calls are slow: the p99 is slow.
        let t = w.check(100, &r).expect("p99 over 100 ms");
        assert_eq!(t.limit, "max_p99_ms");
        assert!(t.p99_ms >= 500 && t.p99_ms <= 530, "{}", t.p99_ms);
        let mut w = Window::new(10_000);
        for i in 0..100 {
            w.record(i, false, if i < 99 { 10.0 } else { 500.0 });
        }
        let f = w.figures(100);
        assert!(f.p99_ms >= 10 && f.p99_ms <= 11, "{f:?}");
        assert_eq!(w.check(100, &r), None);
    }
}
