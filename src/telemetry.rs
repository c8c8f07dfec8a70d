//! Metrics (Prometheus text via the `metrics` crate) and their names.
//!
//! The recorder is process-global; it is installed once, whatever number of gateways a process
//! (a test binary, say) starts.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Calls served, by client dialect × upstream × method × outcome.
pub const REQUESTS: &str = "wiregate_requests_total";
/// Call latency in seconds, by client dialect × upstream.
pub const LATENCY: &str = "wiregate_request_duration_seconds";
/// Upstream failures, by upstream × kind.
pub const UPSTREAM_ERRORS: &str = "wiregate_upstream_errors_total";

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the recorder (first call) and returns the handle that renders it.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Suffix("_seconds".into()),
                    &[
                        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                        5.0, 10.0,
                    ],
                )
                .expect("bucket list is non-empty")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be global (an embedding program's); ours still renders.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Labels of one served call.
#[derive(Debug, Clone, Copy)]
pub struct CallLabels<'a> {
    /// `legacy` or `jsonrpc`.
    pub client_dialect: &'static str,
    /// Upstream name, `builtin`, or `none`.
    pub upstream: &'a str,
    /// The method (operation).
    pub method: &'a str,
    /// `ok`, `error` (an error answer from the upstream), or a gateway error kind.
    pub outcome: &'a str,
}

/// Records one served call.
pub fn record_call(l: CallLabels<'_>, elapsed: Duration) {
    let method: String = l.method.chars().take(64).collect();
    metrics::counter!(REQUESTS,
        "client_dialect" => l.client_dialect,
        "upstream" => l.upstream.to_owned(),
        "method" => method,
        "outcome" => l.outcome.to_owned())
    .increment(1);
    metrics::histogram!(LATENCY,
        "client_dialect" => l.client_dialect,
        "upstream" => l.upstream.to_owned())
    .record(elapsed.as_secs_f64());
}

/// Records one upstream failure.
pub fn record_upstream_error(upstream: &str, kind: &'static str) {
    metrics::counter!(UPSTREAM_ERRORS, "upstream" => upstream.to_owned(), "kind" => kind)
        .increment(1);
}
