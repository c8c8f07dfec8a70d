//! What the gateway knows of one endpoint's health: its calls in flight, the outcome of its
//! active checks (`[upstreams.health]`) and its ejection by the outlier detection
//! (`[upstreams.outlier]`), kept in atomics so a call reads and updates it without a lock.
//!
//! The state outlives the endpoint's pool: a reload that keeps an endpoint keeps its state, and
//! the shadow's copy of an upstream (its own pools, on its own thread) shares it.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use axum::http::StatusCode;

use crate::config::{Health, Outlier};
use crate::outbound::h1;
use crate::telemetry::fleet::EndpointMetrics;
use crate::util::clock::now_ms;

/// One endpoint's health.
pub(crate) struct State {
    /// Calls in flight on it.
    pub(crate) in_flight: AtomicUsize,
    /// False once `unhealthy_after` active checks in a row failed, until `healthy_after` pass.
    checked_up: AtomicBool,
    /// Active checks passed / failed in a row.
    checks_good: AtomicU32,
    checks_bad: AtomicU32,
    /// Failed calls in a row.
    failures: AtomicU32,
    /// When its ejection ends ([`now_ms`]), 0 when it is not ejected.
    ejected_until: AtomicU64,
    /// How many times it has been ejected (the n-th ejection lasts n × base).
    ejections: AtomicU32,
    /// When a call to it last failed ([`now_ms`]), 0 never.
    last_failure: AtomicU64,
    /// Failed tries, ever.
    pub(crate) errors: AtomicU64,
    /// Which checker runs its active checks; an older one stops when it sees a newer number.
    pub(super) checker: AtomicU64,
    pub(crate) metrics: EndpointMetrics,
}

/// What an endpoint is, as `/readyz` and the console say it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Condition {
    /// Takes calls.
    Healthy,
    /// Out after failed active checks.
    Unhealthy,
    /// Out after failed calls, until its ejection ends.
    Ejected,
}

impl Condition {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Condition::Healthy => "healthy",
            Condition::Unhealthy => "unhealthy",
            Condition::Ejected => "ejected",
        }
    }
}

impl State {
    pub(crate) fn new(metrics: EndpointMetrics) -> Self {
        State {
            in_flight: AtomicUsize::new(0),
            checked_up: AtomicBool::new(true),
            checks_good: AtomicU32::new(0),
            checks_bad: AtomicU32::new(0),
            failures: AtomicU32::new(0),
            ejected_until: AtomicU64::new(0),
            ejections: AtomicU32::new(0),
            last_failure: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            checker: AtomicU64::new(0),
            metrics,
        }
    }

    /// Its condition at `now` ([`now_ms`]). An ejection that has ended is cleared here, so the
    /// endpoint comes back at the first call that looks at it.
    pub(crate) fn condition(&self, now: u64) -> Condition {
        let until = self.ejected_until.load(Ordering::Relaxed);
        if until != 0 {
            if now < until {
                return Condition::Ejected;
            }
            // Cleared once, by whichever look comes first.
            let _ =
                self.ejected_until
                    .compare_exchange(until, 0, Ordering::Relaxed, Ordering::Relaxed);
        }
        match self.checked_up.load(Ordering::Relaxed) {
            true => Condition::Healthy,
            false => Condition::Unhealthy,
        }
    }

    /// Its condition now; the clock is read only when it has been ejected.
    #[inline]
    pub(crate) fn condition_now(&self) -> Condition {
        if self.ejected_until.load(Ordering::Relaxed) != 0 {
            return self.condition(now_ms());
        }
        match self.checked_up.load(Ordering::Relaxed) {
            true => Condition::Healthy,
            false => Condition::Unhealthy,
        }
    }

    /// Whether it is ejected now, without clearing an ejection that has ended.
    pub(crate) fn is_ejected(&self, now: u64) -> bool {
        now < self.ejected_until.load(Ordering::Relaxed)
    }

    /// How many times it has been ejected.
    #[cfg(test)]
    pub(crate) fn ejections(&self) -> u32 {
        self.ejections.load(Ordering::Relaxed)
    }

    /// When a call to it last failed (0: never): panic mode sends to the least recent.
    pub(crate) fn last_failure(&self) -> u64 {
        self.last_failure.load(Ordering::Relaxed)
    }

    /// Counts one try's outcome; at a failure that makes `outlier.consecutive_failures` in a
    /// row, while it is not ejected, `eject` decides (and ejects, with [`State::eject`]). True
    /// when it did.
    pub(crate) fn record(
        &self,
        outcome: Outcome,
        outlier: &Outlier,
        eject: impl FnOnce() -> bool,
    ) -> bool {
        self.metrics.tries[outcome as usize].increment(1);
        if !outcome.is_failure() {
            // Read first: a healthy endpoint's calls leave the shared line alone.
            if self.failures.load(Ordering::Relaxed) != 0 {
                self.failures.store(0, Ordering::Relaxed);
            }
            return false;
        }
        let now = now_ms();
        self.errors.fetch_add(1, Ordering::Relaxed);
        self.last_failure.store(now, Ordering::Relaxed);
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if outlier.consecutive_failures == 0
            || n < outlier.consecutive_failures
            || self.is_ejected(now)
        {
            return false;
        }
        eject()
    }

    /// Ejects it from `now` for n × `outlier.base_ejection_ms` (its n-th ejection), unless it
    /// is ejected already. Called under its upstream's ejection lock, so failures that land
    /// together eject it once.
    pub(crate) fn eject(&self, now: u64, outlier: &Outlier) -> bool {
        if self.is_ejected(now) {
            return false;
        }
        let k = self.ejections.fetch_add(1, Ordering::Relaxed) + 1;
        let until = now + u64::from(k) * outlier.base_ejection_ms;
        self.ejected_until.store(until, Ordering::Relaxed);
        self.failures.store(0, Ordering::Relaxed);
        self.metrics.ejections.increment(1);
        true
    }

    /// Counts one active check; true when it changed the endpoint's checked state.
    pub(super) fn checked(&self, good: bool, health: &Health) -> bool {
        let up = self.checked_up.load(Ordering::Relaxed);
        if good {
            self.checks_bad.store(0, Ordering::Relaxed);
            let n = self.checks_good.fetch_add(1, Ordering::Relaxed) + 1;
            if !up && n >= health.healthy_after {
                self.checked_up.store(true, Ordering::Relaxed);
                return true;
            }
        } else {
            self.checks_good.store(0, Ordering::Relaxed);
            let n = self.checks_bad.fetch_add(1, Ordering::Relaxed) + 1;
            if up && n >= health.unhealthy_after {
                self.checked_up.store(false, Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    /// Without active checks (after a reload turned them off), nothing keeps it out, and the
    /// checker that ran them stops at its next tick.
    pub(crate) fn unchecked(&self) {
        self.checker.store(next_generation(), Ordering::Relaxed);
        self.checks_good.store(0, Ordering::Relaxed);
        self.checks_bad.store(0, Ordering::Relaxed);
        self.checked_up.store(true, Ordering::Relaxed);
    }
}

/// A call in flight on an endpoint, counted while it lives.
pub(crate) struct InFlight<'a>(&'a State);

impl<'a> InFlight<'a> {
    #[inline]
    pub(crate) fn begin(state: &'a State) -> Self {
        state.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(state)
    }
}

impl Drop for InFlight<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A fresh checker generation: a reload's checks take the endpoints over from older ones.
pub(crate) fn next_generation() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// How one try ended, as `wiregate_upstream_endpoint_requests_total` labels it (in the order
/// of `telemetry::fleet::OUTCOMES`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// An answer below 500.
    Ok,
    /// An HTTP 5xx answer.
    Status5xx,
    /// Refused, or the request could not be written (nothing reached the endpoint).
    Refused,
    /// Reset, closed or malformed once sent.
    Failed,
    /// No answer within `timeout_ms`.
    TimedOut,
}

impl Outcome {
    /// An answer's.
    pub(crate) fn of_status(status: StatusCode) -> Self {
        match status.is_server_error() {
            true => Outcome::Status5xx,
            false => Outcome::Ok,
        }
    }

    /// An exchange's that failed: refused when nothing reached the endpoint.
    pub(crate) fn of_error(e: &h1::Error) -> Self {
        match e {
            h1::Error::Connect { .. } | h1::Error::NotSent(_) => Outcome::Refused,
            _ => Outcome::Failed,
        }
    }

    /// Whether the outlier detection counts it as a failure.
    pub(crate) fn is_failure(self) -> bool {
        self != Outcome::Ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        State::new(crate::telemetry::fleet::endpoint("t", "127.0.0.1:1"))
    }

    #[test]
    fn consecutive_failures_eject_and_the_ejection_ends() {
        let s = state();
        let outlier = Outlier {
            consecutive_failures: 3,
            base_ejection_ms: 50,
            max_ejected_percent: 100,
        };
        assert!(!s.record(Outcome::Refused, &outlier, || s.eject(now_ms(), &outlier)));
        assert!(
            !s.record(Outcome::Ok, &outlier, || s.eject(now_ms(), &outlier)),
            "a success resets the run"
        );
        assert!(!s.record(Outcome::Failed, &outlier, || s.eject(now_ms(), &outlier)));
        assert!(!s.record(Outcome::TimedOut, &outlier, || s.eject(now_ms(), &outlier)));
        assert!(s.record(Outcome::Status5xx, &outlier, || s.eject(now_ms(), &outlier)));
        let now = now_ms();
        assert_eq!(s.condition(now), Condition::Ejected);
        assert_eq!(s.condition(now + 51), Condition::Healthy);
        // The second ejection lasts twice the base.
        for _ in 0..3 {
            s.record(Outcome::Refused, &outlier, || s.eject(now_ms(), &outlier));
        }
        let now = now_ms();
        assert_eq!(s.condition(now + 60), Condition::Ejected);
        assert_eq!(s.condition(now + 101), Condition::Healthy);
    }

    #[test]
    fn an_ejection_the_upstream_cannot_spare_is_not_made() {
        let s = state();
        let outlier = Outlier {
            consecutive_failures: 1,
            ..Outlier::default()
        };
        assert!(!s.record(Outcome::Refused, &outlier, || false));
        assert_eq!(s.condition(now_ms()), Condition::Healthy);
    }

    #[test]
    fn checks_take_out_and_bring_back_after_their_counts() {
        let s = state();
        let health = Health {
            unhealthy_after: 2,
            healthy_after: 3,
            ..Health::default()
        };
        assert!(!s.checked(false, &health));
        assert!(s.checked(false, &health));
        assert_eq!(s.condition(now_ms()), Condition::Unhealthy);
        assert!(!s.checked(true, &health));
        assert!(!s.checked(true, &health));
        assert!(s.checked(true, &health));
        assert_eq!(s.condition(now_ms()), Condition::Healthy);
    }
}
