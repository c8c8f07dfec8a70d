//! Whether a failed try of a call may be tried again: what the failure was, whether the method
//! is safe to send twice, and the upstream's retry budget.
//!
//! The budget counts the upstream's calls in one atomic per call; the window of the last 10 s
//! is worked out only when a retry asks for it (rare), under a lock.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::endpoint::{Failure, Outcome};

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
        (true, true) if failure.outcome != Outcome::Ok => Some(Reason::Failed),
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
#[derive(Default)]
struct Window {
    /// The calls count when the window's first second began, or before (a mark that left the
    /// window): the calls since are counted as the window's, so a quiet spell before it errs
    /// toward allowing.
    base: u64,
    /// For each second with a retry: the second, the calls count at its first retry, and its
    /// retries.
    marks: VecDeque<(u64, u64, u64)>,
}

impl Budget {
    pub(crate) fn new(percent: u32) -> Self {
        Budget {
            percent: u64::from(percent),
            calls: AtomicU64::new(0),
            window: Mutex::new(Window::default()),
        }
    }

    /// Counts one call.
    #[inline]
    pub(crate) fn call(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes one retry from the budget at `now` (ms), or says there is none left.
    pub(crate) fn take(&self, now: u64) -> bool {
        let calls = self.calls.load(Ordering::Relaxed);
        let second = now / 1000;
        let seconds = WINDOW_MS / 1000;
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(&(s, c, _)) = w.marks.front() {
            if s + seconds > second {
                break;
            }
            w.base = c;
            w.marks.pop_front();
        }
        let retries: u64 = w.marks.iter().map(|m| m.2).sum();
        let allowed = ((calls - w.base) * self.percent / 100).max(FLOOR);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_a_share_of_the_calls_with_a_floor() {
        let b = Budget::new(20);
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
