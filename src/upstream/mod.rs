//! Upstream clients: an upstream is a set of endpoints ([`endpoint`]: one keep-alive pool each),
//! over which calls are balanced ([`balance`]), kept healthy by active checks and passive
//! ejection ([`health`]), tried again when that is safe ([`retry`]) and bounded in number.
//!
//! This module owns the sockets to upstreams and nothing else; what goes into a request body and
//! what comes out of an answer is decided in `wire::translate`. A call to an upstream of one
//! endpoint with no limit set pays for the fleet only one atomic count for the retry budget and
//! one for the endpoint's calls in flight.

pub(crate) mod affinity;
mod balance;
pub(crate) mod call;
mod checks;
mod endpoint;
mod health;
mod retry;
pub(crate) mod router;
#[cfg(test)]
mod tests;

pub use endpoint::Answer;
pub(crate) use endpoint::{Endpoint, Outcome};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::http::StatusCode;

use crate::config::{Balance, Dialect, Sticky, Upstream};
use crate::http::span::{Kind, SpanRecord};
use crate::model::error::GatewayError;
use crate::telemetry::fleet;
use affinity::Who;
use health::Condition;

/// An upstream: its endpoints and how calls are spread over them. Cheap to clone (shared).
#[derive(Clone)]
pub struct UpstreamClient {
    fleet: Arc<Fleet>,
}

struct Fleet {
    config: Upstream,
    /// Its position in `[[upstreams]]`, for the key paths of its errors.
    index: usize,
    endpoints: Vec<Arc<Endpoint>>,
    /// Each endpoint's salt for rendezvous hashing (its URL's hash).
    salts: Vec<u64>,
    /// With `balance = "hash"`: the caller's key.
    hash_rule: Option<Sticky>,
    /// The next turn of `round_robin`.
    turn: AtomicUsize,
    /// Calls in flight over all endpoints (counted when `max_concurrent` is set).
    in_flight: AtomicUsize,
    budget: retry::Budget,
    metrics: fleet::FleetMetrics,
    /// Taken to eject an endpoint, so failures that land together (on one endpoint or on
    /// several) never eject beyond `outlier.max_ejected_percent`, nor one endpoint twice.
    ejecting: std::sync::Mutex<()>,
    /// The TLS client of its `https://` endpoints.
    tls: Option<Arc<rustls::ClientConfig>>,
    max_body: usize,
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient")
            .field("name", &self.fleet.config.name)
            .field("endpoints", &self.fleet.endpoints)
            .finish_non_exhaustive()
    }
}

/// What a call tells the balancer and the retries about itself.
#[derive(Clone, Copy, Default)]
pub(crate) struct Hint<'a> {
    /// The JSON-RPC method (retried after sending only when it matches `retry.methods`).
    pub(crate) method: &'a str,
    /// Who calls, for `balance = "hash"`.
    pub(crate) who: Option<&'a Who<'a>>,
    /// `auth.identity_header` and the verified caller's id, sent upstream.
    pub(crate) identity: Option<(&'a str, &'a str)>,
}

/// An endpoint chosen for one try.
pub(crate) struct Picked<'a> {
    pub(crate) endpoint: &'a Arc<Endpoint>,
    /// Its index among the upstream's endpoints.
    index: usize,
    /// Every endpoint was out: this one is the least recently failed (panic mode).
    pub(crate) panic: bool,
}

/// One endpoint as `/readyz` and the console show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EndpointReport {
    /// Its `host:port`.
    pub endpoint: String,
    /// `healthy`, `unhealthy` (failed active checks), `ejected` (failed calls) or
    /// `unreachable` (no active checks, and no TCP connection could be opened just now).
    pub state: &'static str,
    /// Calls in flight on it.
    pub in_flight: usize,
    /// Failed tries, ever.
    pub errors: u64,
}

impl UpstreamClient {
    /// A client for a validated upstream outside `[[upstreams]]` (tests): no metrics of its
    /// own, since its name is no configured upstream's.
    #[cfg(test)]
    pub(crate) fn new(config: Upstream, max_body: usize) -> Self {
        Self::make(config, 0, max_body, None, false)
    }

    /// The client of `[[upstreams]]`'s entry `index`; with `previous` (the same upstream before
    /// a reload), the endpoints it keeps keep their pools, health and ejections. Starts the
    /// active checks when `health.path` is set and a runtime runs.
    pub fn build(
        config: Upstream,
        index: usize,
        max_body: usize,
        previous: Option<&UpstreamClient>,
    ) -> Self {
        Self::make(config, index, max_body, previous, true)
    }

    fn make(
        config: Upstream,
        index: usize,
        max_body: usize,
        previous: Option<&UpstreamClient>,
        measured: bool,
    ) -> Self {
        let tls = crate::config::tls::client_config(&config)
            .expect("upstream TLS settings are validated at start");
        let endpoints: Vec<Arc<Endpoint>> = config
            .endpoint_urls()
            .map(|url| {
                let old = previous.and_then(|p| p.fleet.endpoints.iter().find(|e| e.url == url));
                let state = match old {
                    Some(e) if e.fits(&config, max_body) => return e.clone(),
                    Some(e) => e.state.clone(),
                    None => Arc::new(health::State::new(match measured {
                        true => fleet::endpoint(&config.name, crate::outbound::authority_of(url)),
                        false => fleet::EndpointMetrics::none(),
                    })),
                };
                Arc::new(Endpoint::new(&config, url, max_body, state, tls.as_ref()))
            })
            .collect();
        if config.health.enabled() {
            checks::spawn_checks(&config.name, &endpoints, &config.health);
        } else {
            endpoints.iter().for_each(|e| e.state.unchecked());
        }
        let metrics = match measured {
            true => fleet::FleetMetrics::of(&config.name),
            false => fleet::FleetMetrics::none(),
        };
        Self::of(config, index, max_body, endpoints, metrics, tls)
    }

    fn of(
        config: Upstream,
        index: usize,
        max_body: usize,
        endpoints: Vec<Arc<Endpoint>>,
        metrics: fleet::FleetMetrics,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Self {
        let salts = endpoints
            .iter()
            .map(|e| affinity::hash(e.url.as_bytes()))
            .collect();
        let hash_rule = (config.balance == Balance::Hash)
            .then(|| Sticky::parse(&config.hash_key).unwrap_or(Sticky::Auth));
        UpstreamClient {
            fleet: Arc::new(Fleet {
                budget: retry::Budget::new(config.retry.budget_percent),
                metrics,
                ejecting: std::sync::Mutex::new(()),
                tls,
                config,
                index,
                endpoints,
                salts,
                hash_rule,
                turn: AtomicUsize::new(0),
                in_flight: AtomicUsize::new(0),
                max_body,
            }),
        }
    }

    /// The same upstream with pools of its own (the shadow's thread: a connection registered
    /// with one runtime's reactor is never used on another's); health and ejections shared.
    pub(crate) fn with_own_pools(&self) -> Self {
        let f = &self.fleet;
        let endpoints = f
            .endpoints
            .iter()
            .map(|e| {
                let state = e.state.clone();
                Arc::new(Endpoint::new(
                    &f.config,
                    &e.url,
                    f.max_body,
                    state,
                    f.tls.as_ref(),
                ))
            })
            .collect();
        let (config, metrics) = (f.config.clone(), f.metrics.clone());
        Self::of(
            config,
            f.index,
            f.max_body,
            endpoints,
            metrics,
            f.tls.clone(),
        )
    }

    /// The upstream's configuration.
    pub fn config(&self) -> &Upstream {
        &self.fleet.config
    }

    /// The upstream's name.
    pub fn name(&self) -> &str {
        &self.fleet.config.name
    }

    /// The upstream's dialect.
    pub fn dialect(&self) -> Dialect {
        self.fleet.config.dialect
    }

    /// POSTs a JSON body to one of the upstream's endpoints and reads the whole answer; a try
    /// that failed is tried again on another endpoint when [`retry`] says it is safe, within
    /// `retry.attempts` and the budget. The answer never names an endpoint.
    pub(crate) async fn post(
        &self,
        body: &[u8],
        authorization: Option<&str>,
        hint: Hint<'_>,
    ) -> Result<Answer, GatewayError> {
        let f = &*self.fleet;
        let _slot = self.admit()?;
        f.budget.call();
        let key = self.key(hint.who);
        let mut tried = 0u64;
        let mut attempt: u32 = 1;
        // Each try is a CLIENT span of the call's, when the call records spans.
        let parent = crate::http::scope::parent();
        loop {
            let picked = self.pick_excluding(key, tried);
            let e = picked.endpoint;
            let mut span = parent.as_ref().map(|p| p.child(Kind::Client, "POST"));
            let result = {
                let _in_flight = e.in_flight();
                let id = span.as_ref().map(|s| s.span_id);
                e.post(&f.config, body, authorization, hint.identity, id)
                    .await
            };
            let outcome = match &result {
                Ok(a) => Outcome::of_status(a.status),
                Err(failure) => failure.outcome,
            };
            self.record(e, outcome);
            crate::http::scope::note_try(e.label());
            if let (Some(p), Some(mut s)) = (&parent, span.take()) {
                self.try_span(&mut s, e, attempt, &result);
                p.submit(s);
            }
            let idempotent = || self.idempotent(hint.method);
            let again = match &result {
                Ok(a) => retry::status_reason(a.status.as_u16(), idempotent()),
                Err(failure) => retry::reason(failure, failure.sent && idempotent()),
            };
            // What was not sent goes to another endpoint; with one, there is none (a pooled
            // connection found closed was already replaced by a fresh one on this endpoint).
            let elsewhere = f.endpoints.len() > 1 || again != Some(retry::Reason::NotSent);
            let more = attempt < f.config.retry.attempts
                && again.is_some()
                && elsewhere
                && f.budget.take(crate::util::clock::now_ms());
            match (result, again) {
                (_, Some(reason)) if more => {
                    f.metrics.retries[reason as usize].increment(1);
                    tracing::debug!(upstream = %f.config.name, endpoint = e.label(), attempt, reason = ?reason, "trying the call again");
                    tried |= 1 << picked.index;
                    attempt += 1;
                }
                (Ok(answer), _) => return Ok(answer),
                (Err(failure), _) => {
                    tracing::debug!(upstream = %f.config.name, endpoint = e.label(), error = %failure.error, "upstream try failed");
                    return Err(self.panicked(failure.error, picked.panic));
                }
            }
        }
    }

    /// A try's CLIENT span: the HTTP client conventions' attributes, which endpoint and which
    /// try it was, and how it ended.
    fn try_span(
        &self,
        s: &mut SpanRecord,
        e: &endpoint::Endpoint,
        attempt: u32,
        result: &Result<Answer, endpoint::Failure>,
    ) {
        s.set("http.request.method", "POST");
        s.set_server(e.peer(), e.label());
        // The path alone: a query may carry a token (a webhook's often does).
        s.set("url.path", e.path().split(['?', '#']).next().unwrap_or("/"));
        s.set("wiregate.upstream", self.name());
        s.set("wiregate.upstream_dialect", self.dialect().as_str());
        s.set("wiregate.retry", i64::from(attempt) - 1);
        match result {
            Ok(a) => s.set_status(a.status.as_u16()),
            Err(failure) => s.fail(failure.error.kind()),
        }
    }

    /// A failure in panic mode says so.
    fn panicked(&self, e: GatewayError, panic: bool) -> GatewayError {
        match (e, panic) {
            (GatewayError::UpstreamUnreachable { upstream, detail }, true) => {
                GatewayError::UpstreamUnreachable {
                    upstream,
                    detail: format!(
                        "every endpoint is out (unhealthy or ejected); tried the least recently \
                         failed: {detail}"
                    ),
                }
            }
            (e, _) => e,
        }
    }

    /// A slot of `max_concurrent`, held while the call runs; the error when none is free.
    pub(crate) fn admit(&self) -> Result<Option<Slot<'_>>, GatewayError> {
        let f = &*self.fleet;
        let limit = f.config.max_concurrent;
        if limit == 0 {
            return Ok(None);
        }
        if f.in_flight.fetch_add(1, Ordering::Relaxed) >= limit {
            f.in_flight.fetch_sub(1, Ordering::Relaxed);
            f.metrics.overflow.increment(1);
            return Err(GatewayError::UpstreamOverloaded {
                upstream: f.config.name.clone(),
                limit,
                key: format!("upstreams[{}].max_concurrent", f.index),
            });
        }
        Ok(Some(Slot(&f.in_flight)))
    }

    fn idempotent(&self, method: &str) -> bool {
        self.fleet
            .config
            .retry
            .methods
            .iter()
            .any(|g| router::glob_match(g, method))
    }

    /// The caller's key when the upstream balances by hash.
    fn key(&self, who: Option<&Who<'_>>) -> Option<u64> {
        let rule = self.fleet.hash_rule.as_ref()?;
        affinity::key_hash(rule, who?)
    }

    /// The endpoint for a request passed through as it came, whose headers `get` reads (see
    /// [`affinity::request_key`]).
    pub(crate) fn pick_request<'h>(
        &self,
        get: impl Fn(&str) -> Option<&'h [u8]>,
        ip: Option<std::net::IpAddr>,
    ) -> Picked<'_> {
        let key = match &self.fleet.hash_rule {
            Some(rule) => affinity::request_key(rule, get, ip),
            None => None,
        };
        self.pick_excluding(key, 0)
    }

    /// The endpoint for a try: among the healthy ones not yet `tried` (a set of indices), by
    /// `balance`; the healthy ones again when every healthy one was tried; and, when none is
    /// healthy, the least recently failed (panic mode).
    fn pick_excluding(&self, key: Option<u64>, tried: u64) -> Picked<'_> {
        let f = &*self.fleet;
        let n = f.endpoints.len();
        if n == 1 {
            let e = &f.endpoints[0];
            return Picked {
                endpoint: e,
                index: 0,
                panic: e.state.condition_now() != Condition::Healthy,
            };
        }
        let mut healthy = 0u64;
        for (i, e) in f.endpoints.iter().enumerate() {
            if e.state.condition_now() == Condition::Healthy {
                healthy |= 1 << i;
            }
        }
        let set = match healthy & !tried {
            0 => healthy,
            untried => untried,
        };
        if set == 0 {
            // Panic mode: the least recently failed endpoint not yet tried, else any.
            let all = u64::MAX >> (64 - n);
            let pool = match !tried & all {
                0 => all,
                p => p,
            };
            let i = (0..n)
                .filter(|i| pool & (1 << i) != 0)
                .min_by_key(|i| f.endpoints[*i].state.last_failure())
                .unwrap_or(0);
            return Picked {
                endpoint: &f.endpoints[i],
                index: i,
                panic: true,
            };
        }
        let i = match (f.config.balance, key) {
            (Balance::Hash, Some(key)) => balance::rendezvous(set, &f.salts, key),
            (Balance::RoundRobin, _) => {
                balance::round_robin(set, f.turn.fetch_add(1, Ordering::Relaxed))
            }
            _ => balance::least_request(
                set,
                |i| f.endpoints[i].state.in_flight.load(Ordering::Relaxed),
                fastrand::u64(..),
                fastrand::u64(..),
            ),
        };
        Picked {
            endpoint: &f.endpoints[i],
            index: i,
            panic: false,
        }
    }

    /// Counts one try's outcome on `e`: its metrics, and its ejection when it keeps failing
    /// (never more than `outlier.max_ejected_percent` of the endpoints at once).
    pub(crate) fn record(&self, e: &Endpoint, outcome: Outcome) {
        let f = &*self.fleet;
        let eject = || {
            let _one = f.ejecting.lock().unwrap_or_else(|p| p.into_inner());
            let now = crate::util::clock::now_ms();
            let out = f
                .endpoints
                .iter()
                .filter(|x| x.state.is_ejected(now))
                .count();
            let limit = f.endpoints.len() * f.config.outlier.max_ejected_percent as usize;
            (out + 1) * 100 <= limit && e.state.eject(now, &f.config.outlier)
        };
        if e.state.record(outcome, &f.config.outlier, eject) {
            tracing::warn!(upstream = %f.config.name, endpoint = e.label(), "endpoint ejected after failed calls");
        }
    }

    /// Brings each endpoint's `wiregate_upstream_endpoint_up` up to date, before the metrics
    /// are rendered (the one place it is set: an ejection that has ended is noticed here too).
    pub fn refresh(&self) {
        let now = crate::util::clock::now_ms();
        for e in &self.fleet.endpoints {
            let up = e.state.condition(now) == Condition::Healthy;
            e.state.metrics.up.set(if up { 1.0 } else { 0.0 });
        }
    }

    /// Each endpoint's state. Without active checks, an endpoint that is not ejected is probed
    /// with a TCP connect (within 1 s) to tell `healthy` from `unreachable`.
    pub async fn report(&self) -> Vec<EndpointReport> {
        let f = &*self.fleet;
        let probes = f.endpoints.iter().map(|e| async move {
            let condition = e.state.condition(crate::util::clock::now_ms());
            let state = match condition {
                Condition::Healthy if !f.config.health.enabled() && !e.reachable().await => {
                    "unreachable"
                }
                c => c.as_str(),
            };
            EndpointReport {
                endpoint: e.label().to_owned(),
                state,
                in_flight: e.state.in_flight.load(Ordering::Relaxed),
                errors: e.state.errors.load(Ordering::Relaxed),
            }
        });
        futures_util::future::join_all(probes).await
    }

    /// The error for an answer that is not a valid envelope of this upstream's dialect.
    pub fn bad_envelope(&self, status: StatusCode, detail: impl Into<String>) -> GatewayError {
        endpoint::bad_envelope(&self.fleet.config, status, detail)
    }
}

/// A slot of `max_concurrent`, given back when the call ends.
pub(crate) struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
