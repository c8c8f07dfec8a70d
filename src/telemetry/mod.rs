//! Metrics (Prometheus text via the `metrics` crate) and their names.
//!
//! The recorder is process-global; it is installed once, whatever number of gateways a process
//! (a test binary, say) starts.

pub(crate) mod activity;
pub(crate) mod auth;
pub mod fleet;
pub mod logging;
pub mod spans;
pub(crate) mod stats;

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::{LazyLock, Mutex, OnceLock};
use std::time::Duration;

use metrics::{Counter, Histogram};

use crate::config::Dialect;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Calls served, by client dialect × upstream × method × outcome.
pub const REQUESTS: &str = "wiregate_requests_total";
/// Call latency in seconds, by client dialect × upstream.
pub const LATENCY: &str = "wiregate_request_duration_seconds";
/// Upstream failures, by upstream × kind.
pub const UPSTREAM_ERRORS: &str = "wiregate_upstream_errors_total";
/// Calls per side of a route (a split's sides, or a plain route's one upstream).
pub const SPLIT_CALLS: &str = "wiregate_split_calls_total";
/// Shadow comparisons by route × method × outcome (`match`, `diff`, `noise`, `shadow_error`,
/// `dropped`).
pub const SHADOW: &str = "wiregate_shadow_total";
/// Automatic rollbacks of a split side, by route.
pub const ROLLBACKS: &str = "wiregate_rollbacks_total";

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// How often pending histogram samples are folded into their buckets.
const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

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
            // Histogram samples wait in the recorder until a render or an upkeep folds them into
            // their buckets; a gateway nobody scrapes would grow by ~20 bytes a call for ever
            // (found by benches/soak.sh). `build_recorder` starts no upkeep of its own.
            let upkeep = handle.clone();
            let _ = std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || loop {
                    std::thread::sleep(UPKEEP_EVERY);
                    upkeep.run_upkeep();
                });
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

/// Distinct `method` label values kept. A method first seen after this many is counted as
/// `other`, so callers inventing method names cannot grow the registry (and `/metrics`) without
/// bound.
pub const MAX_METHODS: usize = 1024;

/// The label value for methods past [`MAX_METHODS`].
pub const OTHER_METHOD: &str = "other";

/// The metric handles of one label set, registered once and then only incremented.
struct CallMetrics {
    requests: Counter,
    latency: Histogram,
}

/// The caches' hasher: foldhash, seeded per process (the keys hold client-sent method names,
/// and the maps are bounded by [`MAX_METHODS`]); SipHash cost more than the lookup around it.
type Fast = foldhash::fast::RandomState;

/// Handles by label set (joined with `\u{1f}`), and the method names given labels of their own.
#[derive(Default)]
struct Cache {
    calls: HashMap<Box<str>, CallMetrics, Fast>,
    /// Counters labelled by a method ([`count_by_method`]): `wiregate_shadow_total` by route,
    /// method label and outcome; `wiregate_auth_total` by method label and outcome.
    counters: HashMap<Box<str>, Counter, Fast>,
    methods: HashSet<Box<str>, Fast>,
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Mutex::default);

thread_local! {
    /// The lookup key, built in place so a hit allocates nothing.
    static KEY: RefCell<String> = const { RefCell::new(String::new()) };
    /// The label set this thread counted last, and its handles: a run of calls with the same
    /// labels (nearly every call of a busy route) is counted without building the key, hashing
    /// it or taking the cache's lock. The handles are the cache's own (clones of one counter and
    /// one histogram), so every thread still counts into the same series.
    static LAST: RefCell<Option<Last>> = const { RefCell::new(None) };
}

/// [`LAST`]'s entry: a labelled set the cache holds. Its labels are kept in buffers written
/// over in place, so calls that alternate label sets (two methods interleaved) allocate
/// nothing when the entry changes.
struct Last {
    client_dialect: &'static str,
    upstream: String,
    method: String,
    outcome: String,
    requests: Counter,
    latency: Histogram,
}

impl Last {
    fn is(&self, l: &CallLabels<'_>, method: &str) -> bool {
        self.client_dialect == l.client_dialect
            && self.method == method
            && self.upstream == l.upstream
            && self.outcome == l.outcome
    }

    /// Makes `slot` the entry of these labels and handles, reusing its buffers.
    fn keep(
        slot: &mut Option<Last>,
        l: &CallLabels<'_>,
        method: &str,
        (requests, latency): (Counter, Histogram),
    ) {
        let Some(last) = slot else {
            *slot = Some(Last {
                client_dialect: l.client_dialect,
                upstream: l.upstream.to_owned(),
                method: method.to_owned(),
                outcome: l.outcome.to_owned(),
                requests,
                latency,
            });
            return;
        };
        last.client_dialect = l.client_dialect;
        for (kept, part) in [
            (&mut last.upstream, l.upstream),
            (&mut last.method, method),
            (&mut last.outcome, l.outcome),
        ] {
            kept.clear();
            kept.push_str(part);
        }
        last.requests = requests;
        last.latency = latency;
    }
}

/// Records one served call. The handles of a label set are looked up in a cache rather than
/// registered anew on every call (the registry hashes and compares every label each time).
pub fn record_call(l: CallLabels<'_>, elapsed: Duration) {
    record_routed_call(l, None, elapsed);
}

/// [`record_call`] for a call routed to an upstream, whose dialect the console's legacy share
/// counts (`served`; `None` when no upstream served it).
pub fn record_routed_call(l: CallLabels<'_>, served: Option<Dialect>, elapsed: Duration) {
    crate::http::scope::note_call(l.client_dialect, l.upstream);
    // The console's per-second ring (its charts), beside the Prometheus totals.
    crate::telemetry::stats::record(l.client_dialect, l.outcome, served, elapsed);
    let method = &l.method[..l
        .method
        .char_indices()
        .nth(64)
        .map_or(l.method.len(), |(i, _)| i)];
    let seconds = elapsed.as_secs_f64();
    let counted = LAST.with_borrow(|last| match last {
        Some(m) if m.is(&l, method) => {
            m.requests.increment(1);
            m.latency.record(seconds);
            true
        }
        _ => false,
    });
    if counted {
        return;
    }
    let cached = KEY.with_borrow_mut(|key| {
        key.clear();
        for part in [l.client_dialect, l.upstream, method, l.outcome] {
            key.push_str(part);
            key.push('\u{1f}');
        }
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = cache.calls.get(key.as_str()) {
            m.requests.increment(1);
            m.latency.record(seconds);
            return Some((m.requests.clone(), m.latency.clone()));
        }
        let labelled = cache.methods.contains(method) || cache.methods.len() < MAX_METHODS;
        let method_label = if labelled {
            cache.methods.insert(method.into());
            method.to_owned()
        } else {
            OTHER_METHOD.to_owned()
        };
        let m = CallMetrics {
            requests: metrics::counter!(REQUESTS,
                "client_dialect" => l.client_dialect,
                "upstream" => l.upstream.to_owned(),
                "method" => method_label,
                "outcome" => l.outcome.to_owned()),
            latency: metrics::histogram!(LATENCY,
                "client_dialect" => l.client_dialect,
                "upstream" => l.upstream.to_owned()),
        };
        m.requests.increment(1);
        m.latency.record(seconds);
        // Label sets of methods counted as `other` are not cached, so the cache stays bounded.
        if !labelled {
            return None;
        }
        let handles = (m.requests.clone(), m.latency.clone());
        cache.calls.insert(key.as_str().into(), m);
        Some(handles)
    });
    if let Some(handles) = cached {
        LAST.with_borrow_mut(|slot| Last::keep(slot, &l, method, handles));
    }
}

/// The counter of calls to one side of a route, registered once when the route is built (the
/// recorder is installed first, so the handle is a live one).
pub fn split_counter(route: &str, upstream: &str) -> Counter {
    install();
    metrics::counter!(SPLIT_CALLS, "route" => route.to_owned(), "upstream" => upstream.to_owned())
}

/// The counter of one route's rollbacks.
pub fn rollback_counter(route: &str) -> Counter {
    install();
    metrics::counter!(ROLLBACKS, "route" => route.to_owned())
}

/// Records one shadow outcome. The method label is bounded as `wiregate_requests_total`'s is,
/// and the counter's handle is cached as [`record_call`]'s are (the registry's lookup, labels
/// allocated and hashed, was a tenth of a shadow's cost).
pub fn record_shadow(route: &str, method: &str, outcome: &'static str) {
    let _counted = count_by_method(
        ("shadow", route),
        method,
        outcome,
        |m| metrics::counter!(SHADOW, "route" => route.to_owned(), "method" => m.to_owned(), "outcome" => outcome),
    );
}

/// Counts one event of a counter labelled by a `method` (bounded by [`MAX_METHODS`], as
/// `wiregate_requests_total`'s), with its handle cached by (`scope`: the counter and what else
/// tells its series apart, method label, `outcome`): `make` registers the handle for a method
/// label the first time. Returns the handle, for a caller that keeps it for the calls after.
pub(crate) fn count_by_method(
    scope: (&str, &str),
    method: &str,
    outcome: &str,
    make: impl FnOnce(&str) -> Counter,
) -> Counter {
    let key_of = |key: &mut String, method: &str| {
        key.clear();
        for part in [scope.0, scope.1, method, outcome] {
            key.push_str(part);
            key.push('\u{1f}');
        }
    };
    KEY.with_borrow_mut(|key| {
        key_of(key, method);
        let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = cache.counters.get(key.as_str()) {
            c.increment(1);
            return c.clone();
        }
        let labelled = cache.methods.contains(method) || cache.methods.len() < MAX_METHODS;
        let method_label = if labelled {
            cache.methods.insert(method.into());
            method
        } else {
            OTHER_METHOD
        };
        // Keyed by the label, so methods past the bound share one entry.
        key_of(key, method_label);
        if let Some(c) = cache.counters.get(key.as_str()) {
            c.increment(1);
            return c.clone();
        }
        let c = make(method_label);
        c.increment(1);
        cache.counters.insert(key.as_str().into(), c.clone());
        c
    })
}

/// Records one upstream failure.
pub fn record_upstream_error(upstream: &str, kind: &'static str) {
    metrics::counter!(UPSTREAM_ERRORS, "upstream" => upstream.to_owned(), "kind" => kind)
        .increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(text: &str, needle: &str) -> Option<u64> {
        text.lines()
            .find(|l| l.starts_with(REQUESTS) && l.contains(needle))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    }

    /// The tests that fill the process-wide method bound run one at a time, each from an empty
    /// set of labelled methods (run side by side, one's names used up the other's bound).
    fn fresh_method_bound() -> std::sync::MutexGuard<'static, ()> {
        static ALONE: Mutex<()> = Mutex::new(());
        let guard = ALONE.lock().unwrap_or_else(|e| e.into_inner());
        CACHE.lock().unwrap().methods.clear();
        guard
    }

    #[test]
    fn method_labels_are_bounded_and_cached_handles_count() {
        let _alone = fresh_method_bound();
        let handle = install();
        fn labels(method: &str) -> CallLabels<'_> {
            CallLabels {
                client_dialect: "jsonrpc",
                upstream: "bounded-test",
                method,
                outcome: "ok",
            }
        }
        for i in 0..MAX_METHODS + 100 {
            record_call(labels(&format!("m-{i}")), Duration::from_millis(1));
        }
        record_call(labels("m-0"), Duration::from_millis(1));
        let text = handle.render();
        assert_eq!(
            counter(&text, "method=\"m-0\""),
            Some(2),
            "a cached handle counts on"
        );
        assert_eq!(
            counter(&text, &format!("method=\"m-{}\"", MAX_METHODS + 99)),
            None
        );
        let other = counter(&text, "method=\"other\"").expect("an `other` series");
        assert!(
            other >= 100,
            "methods past the bound are counted as other: {other}"
        );
    }

    #[test]
    fn label_sets_that_alternate_each_count_every_call() {
        let _alone = fresh_method_bound();
        let handle = install();
        let labels = |method| CallLabels {
            client_dialect: "jsonrpc",
            upstream: "alternate-test",
            method,
            outcome: "ok",
        };
        for method in [
            "alt-a", "alt-a", "alt-b", "alt-a", "alt-b", "alt-b", "alt-b",
        ] {
            record_call(labels(method), Duration::from_millis(1));
        }
        let text = handle.render();
        assert_eq!(counter(&text, "method=\"alt-a\""), Some(3));
        assert_eq!(counter(&text, "method=\"alt-b\""), Some(4));
    }

    #[test]
    fn shadow_handles_are_cached_and_bounded_by_the_method_label() {
        let _alone = fresh_method_bound();
        let handle = install();
        for i in 0..MAX_METHODS + 100 {
            record_shadow("shadow-bound-test", &format!("s-{i}"), "match");
        }
        record_shadow("shadow-bound-test", "s-0", "match");
        let cached = CACHE
            .lock()
            .unwrap()
            .counters
            .keys()
            .filter(|k| k.starts_with("shadow\u{1f}shadow-bound-test\u{1f}"))
            .count();
        assert!(
            cached <= MAX_METHODS + 1,
            "one handle per method label at most: {cached}"
        );
        let text = handle.render();
        let line = |m: &str| {
            text.lines()
                .find(|l| {
                    l.starts_with(SHADOW)
                        && l.contains("route=\"shadow-bound-test\"")
                        && l.contains(&format!("method=\"{m}\""))
                })
                .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        };
        assert_eq!(line("s-0"), Some(2), "a cached handle counts on");
        assert!(line("other").is_some_and(|n| n >= 100));
    }
}
