//! The metrics of the gate (`[auth]`, `[[rate_limits]]`): every call it looked at, by method
//! and outcome, and the calls each rate limit refused.

use std::cell::RefCell;

use metrics::Counter;

use crate::model::error::GatewayError;

/// Calls the gate looked at, by `method` (bounded as `wiregate_requests_total`'s) and
/// `outcome`: `ok`, `unauthenticated`, `forbidden`, `rate_limited`.
pub(crate) const AUTH: &str = "wiregate_auth_total";
/// Calls a rate limit refused, by `limit` (its name) and `route` (the method, bounded, or the
/// pass-through's `path`).
pub(crate) const RATE_LIMITED: &str = "wiregate_rate_limited_total";

thread_local! {
    /// The method whose admitted calls this thread counted last, and their counter: a run of
    /// admitted calls of one method (nearly every call) is counted with one comparison.
    static LAST_OK: RefCell<Option<(String, Counter)>> = const { RefCell::new(None) };
}

/// Counts one call the gate admitted or refused.
pub(crate) fn record(method: &str, admitted: &Result<(), GatewayError>) {
    if admitted.is_ok() {
        let counted = LAST_OK.with_borrow(|last| match last {
            Some((m, counter)) if m == method => {
                counter.increment(1);
                true
            }
            _ => false,
        });
        if counted {
            return;
        }
    }
    super::install();
    let outcome = match admitted {
        Ok(()) => "ok",
        Err(e) => e.kind(),
    };
    let counter = super::count_by_method(
        ("auth", ""),
        method,
        outcome,
        |m| metrics::counter!(AUTH, "method" => m.to_owned(), "outcome" => outcome),
    );
    if admitted.is_ok() {
        LAST_OK.with_borrow_mut(|last| match last {
            Some((m, c)) => {
                m.clear();
                m.push_str(method);
                *c = counter;
            }
            None => *last = Some((method.to_owned(), counter)),
        });
    }
    if let Err(GatewayError::RateLimited { limit, .. }) = admitted {
        let _counted = super::count_by_method(
            ("limit", limit),
            method,
            "",
            |m| metrics::counter!(RATE_LIMITED, "limit" => limit.clone(), "route" => m.to_owned()),
        );
    }
}
