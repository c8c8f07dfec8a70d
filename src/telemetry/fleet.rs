//! The metrics of upstream fleets: each endpoint's state and calls, retries, ejections and
//! calls refused at `max_concurrent`. Handles are registered once, when an upstream's endpoints
//! are built, so a call pays an atomic add and no registry lookup.

use metrics::{Counter, Gauge};

/// 1 while an endpoint takes calls (healthy and not ejected), else 0.
pub const ENDPOINT_UP: &str = "wiregate_upstream_endpoint_up";
/// Tries sent to one endpoint, by how they ended.
pub const ENDPOINT_REQUESTS: &str = "wiregate_upstream_endpoint_requests_total";
/// Calls tried again, by why.
pub const RETRIES: &str = "wiregate_upstream_retries_total";
/// Times an endpoint was ejected by the outlier detection.
pub const EJECTIONS: &str = "wiregate_upstream_ejections_total";
/// Calls refused at once because `max_concurrent` calls were in flight.
pub const OVERFLOW: &str = "wiregate_upstream_overflow_total";

/// The `outcome` labels of [`ENDPOINT_REQUESTS`], in the order of [`EndpointMetrics::tries`].
pub const OUTCOMES: [&str; 5] = ["ok", "5xx", "refused", "failed", "timeout"];
/// The `reason` labels of [`RETRIES`], in the order of [`retries`]'s counters.
///
/// [`retries`]: FleetMetrics::retries
pub const RETRY_REASONS: [&str; 3] = ["not_sent", "failed", "status"];

/// One endpoint's handles.
#[derive(Clone)]
pub struct EndpointMetrics {
    /// [`ENDPOINT_UP`].
    pub up: Gauge,
    /// [`ENDPOINT_REQUESTS`], one per [`OUTCOMES`] label.
    pub tries: [Counter; 5],
    /// [`EJECTIONS`].
    pub ejections: Counter,
}

/// The handles of `endpoint` (its `host:port`) of `upstream`.
pub fn endpoint(upstream: &str, endpoint: &str) -> EndpointMetrics {
    super::install();
    let labels = || {
        [
            ("upstream", upstream.to_owned()),
            ("endpoint", endpoint.to_owned()),
        ]
    };
    let tries = OUTCOMES.map(|o| {
        let mut l = labels().to_vec();
        l.push(("outcome", o.to_owned()));
        metrics::counter!(ENDPOINT_REQUESTS, &l)
    });
    EndpointMetrics {
        up: metrics::gauge!(ENDPOINT_UP, &labels()),
        tries,
        ejections: metrics::counter!(EJECTIONS, &labels()),
    }
}

impl EndpointMetrics {
    /// Handles that record nothing: for a client that is no configured upstream (a push
    /// webhook, a replica), whose names would grow the label sets without bound.
    pub fn none() -> Self {
        EndpointMetrics {
            up: Gauge::noop(),
            tries: std::array::from_fn(|_| Counter::noop()),
            ejections: Counter::noop(),
        }
    }
}

/// One upstream's handles.
#[derive(Clone)]
pub struct FleetMetrics {
    /// [`RETRIES`], one per [`RETRY_REASONS`] label.
    pub retries: [Counter; 3],
    /// [`OVERFLOW`].
    pub overflow: Counter,
}

impl FleetMetrics {
    /// The handles of `upstream`.
    pub fn of(upstream: &str) -> Self {
        super::install();
        FleetMetrics {
            retries: RETRY_REASONS.map(
                |r| metrics::counter!(RETRIES, "upstream" => upstream.to_owned(), "reason" => r),
            ),
            overflow: metrics::counter!(OVERFLOW, "upstream" => upstream.to_owned()),
        }
    }

    /// Handles that record nothing (see [`EndpointMetrics::none`]).
    pub fn none() -> Self {
        FleetMetrics {
            retries: std::array::from_fn(|_| Counter::noop()),
            overflow: Counter::noop(),
        }
    }
}
