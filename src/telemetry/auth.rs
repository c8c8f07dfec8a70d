//! The metrics of the gate (`[auth]`, `[[rate_limits]]`): every call it looked at, by method
//! and outcome, and the calls each rate limit refused.

use crate::model::error::GatewayError;

/// Calls the gate looked at, by `method` (bounded as `wiregate_requests_total`'s) and
/// `outcome`: `ok`, `unauthenticated`, `forbidden`, `rate_limited`.
pub(crate) const AUTH: &str = "wiregate_auth_total";
/// Calls a rate limit refused, by `limit` (its name) and `route` (the method, bounded, or the
/// pass-through's `path`).
pub(crate) const RATE_LIMITED: &str = "wiregate_rate_limited_total";

/// Counts one call the gate admitted or refused.
pub(crate) fn record(method: &str, admitted: &Result<(), GatewayError>) {
    super::install();
    let outcome = match admitted {
        Ok(()) => "ok",
        Err(e) => e.kind(),
    };
    super::count_by_method(
        ("auth", ""),
        method,
        outcome,
        |m| metrics::counter!(AUTH, "method" => m.to_owned(), "outcome" => outcome),
    );
    if let Err(GatewayError::RateLimited { limit, .. }) = admitted {
        super::count_by_method(
            ("limit", limit),
            method,
            "",
            |m| metrics::counter!(RATE_LIMITED, "limit" => limit.clone(), "route" => m.to_owned()),
        );
    }
}
