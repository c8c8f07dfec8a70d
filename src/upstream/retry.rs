//! Whether a failed try of a call may be tried again: what the failure was, whether the method
//! is safe to send twice, and the upstream's retry budget.
//!
//! The budget counts the upstream's calls in one atomic per call; the window of the last 10 s
//! is worked out only when a retry asks for it (rare), under a lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::endpoint::Failure;

/// The window the budget is counted over.
const WINDOW_MS: u64 = 10_000;
/// Retries allowed in a window whatever the share, so a quiet upstream can still retry.
const FLOOR: u64 = 10;

/// Why a call is tried again (the `reason` label of `wiregate_upstream_retries_total`, in the
/// order of `telemetry::fleet::RETRY_REASONS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Nothing of it reached the endpoint.
    NotSent = 0,
    /// Sent, then reset, closed or timed out; its method is safe to send twice.
    Failed = 1,
    /// The endpoint answered 502, 503 or 504; its method is safe to send twice.
    Status = 2,
}

/// Why a failed try may be tried again, or `None`.
pub(crate) fn reason(failure: &Failure, idempotent: bool) -> Option<Reason> {
    match (failure.sent, idempotent) {
        (false, _) => Some(Reason::NotSent),
        (true, true) => Some(Reason::Failed),
        _ => None,
    }
}

/// Whether an answer with `status` may be tried again.
pub(crate) fn status_reason(status: u16, idempotent: bool) -> Option<Reason> {
    (idempotent && matches!(status, 502..=504)).then_some(Reason::Status)
}

/// Retries at most `percent` % of the calls of the last 10 s (at least [`FLOOR`]).
pub(crate) struct Budget {
    percent: u64,
    /// Calls ever made.
    calls: AtomicU64,
    window: Mutex<Window>,
}

/// The retries of the last seconds, counted when a retry asks.
struct Window {
    /// A known point of the calls count: when (ms) and how many. The budget's start, or the
    /// first retry of a second that has since left the window.
    base: (u64, u64),
    /// For each second with a retry: the second, the calls count at its first retry, and its
    /// retries.
    marks: VecDeque<(u64, u64, u64)>,
}

impl Budget {
    pub(crate) fn new(percent: u32) -> Self {
        Self::starting(percent, crate::util::clock::now_ms())
    }

    fn starting(percent: u32, now: u64) -> Self {
        Budget {
            percent: u64::from(percent),
            calls: AtomicU64::new(0),
            window: Mutex::new(Window {
                base: (now, 0),
                marks: VecDeque::new(),
            }),
        }
    }

    /// Counts one call.
    #[inline]
    pub(crate) fn call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes one retry from the budget at `now` (ms), or says there is none left.
    pub(crate) fn take(&self, now: u64) -> bool {
        let second = now / 1000;
        let seconds = WINDOW_MS / 1000;
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        // Read under the lock, so no mark holds a later count than this one.
        let calls = self.calls.load(Ordering::Relaxed);
        while let Some(&(s, c, _)) = w.marks.front() {
            if s + seconds > second {
                break;
            }
            w.base = (s * 1000, c);
            w.marks.pop_front();
        }
        let retries: u64 = w.marks.iter().map(|m| m.2).sum();
        let allowed = (calls_within(w.base, calls, now) * self.percent / 100).max(FLOOR);
        if retries >= allowed {
            return false;
        }
        match w.marks.back_mut() {
            Some(m) if m.0 == second => m.2 += 1,
            _ => w.marks.push_back((second, calls, 1)),
        }
        true
    }
}

/// The calls of the window ending at `now`, from a known count `base` and the count now: those
/// since `base` when it is within the window; when it is older (a spell without retries), its
/// share of them at the average rate since, so calls made long ago never count.
fn calls_within(base: (u64, u64), calls: u64, now: u64) -> u64 {
    let (at, count) = base;
    let since = calls.saturating_sub(count);
    let elapsed = now.saturating_sub(at);
    if elapsed <= WINDOW_MS {
        return since;
    }
    (u128::from(since) * u128::from(WINDOW_MS) / u128::from(elapsed)) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::endpoint::Outcome;

    #[test]
    fn the_budget_is_a_share_of_the_calls_with_a_floor() {
        let b = Budget::starting(20, 1);
        // Quiet: the floor.
        for _ in 0..FLOOR {
            assert!(b.take(1));
        }
        assert!(!b.take(1), "the floor is spent");
        // A window later, 1000 calls allow 200 retries.
        for _ in 0..1000 {
            b.call();
        }
        let later = 1 + WINDOW_MS;
        let granted = (0..400).filter(|_| b.take(later)).count();
        assert!((190..=200).contains(&granted), "{granted} retries granted");
    }

    #[test]
    fn calls_long_before_the_window_do_not_widen_it() {
        // A million calls spread over 1000 s, none retried; then a storm: 20 % of the last
        // 10 s's share (10 000 calls), not of every call ever made.
        let b = Budget::starting(20, 1);
        for _ in 0..1_000_000 {
            b.call();
        }
        let granted = (0..10_000).filter(|_| b.take(1_000_001)).count();
        assert!(
            (1_990..=2_000).contains(&granted),
            "{granted} retries granted"
        );
    }

    #[test]
    fn only_a_sent_failure_of_an_idempotent_method_is_retried_after_sending() {
        let f = |sent, outcome| Failure {
            error: crate::model::error::GatewayError::MethodNotFound(String::new()),
            sent,
            outcome,
        };
        assert_eq!(
            reason(&f(false, Outcome::Refused), false),
            Some(Reason::NotSent)
        );
        assert_eq!(reason(&f(true, Outcome::Failed), false), None);
        assert_eq!(
            reason(&f(true, Outcome::TimedOut), true),
            Some(Reason::Failed)
        );
        assert_eq!(status_reason(503, true), Some(Reason::Status));
        assert_eq!(status_reason(503, false), None);
        assert_eq!(status_reason(500, true), None);
    }
}
