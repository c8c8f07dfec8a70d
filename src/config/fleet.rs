//! An upstream's endpoints and how calls are spread over them: `endpoints`, `balance`,
//! `hash_key`, `max_concurrent`, and the `[upstreams.health]`, `[upstreams.outlier]` and
//! `[upstreams.retry]` tables.

use serde::{Deserialize, Serialize};

use super::migration::Sticky;
use super::Issues;

/// The most endpoints one upstream may list (the balancer keeps its choices in a 64-bit set).
pub const MAX_ENDPOINTS: usize = 64;
/// The most tries of one call (`retry.attempts`).
const MAX_ATTEMPTS: u32 = 10;

/// `upstreams[].balance`: how a call's endpoint is chosen.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    /// The less loaded (fewer calls in flight) of two healthy endpoints drawn at random
    /// (power of two choices).
    #[default]
    LeastRequest,
    /// Each healthy endpoint in turn.
    RoundRobin,
    /// The same caller (`hash_key`) on the same endpoint while it is healthy; removing an
    /// endpoint moves only its callers (rendezvous hashing).
    Hash,
}

impl Balance {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Balance::LeastRequest => "least_request",
            Balance::RoundRobin => "round_robin",
            Balance::Hash => "hash",
        }
    }
}

/// `[upstreams.health]`: active checks, off unless `path` is set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Health {
    /// The path GET on each endpoint's scheme and authority, e.g. `/health`; empty: no checks.
    pub path: String,
    /// Time between two checks of one endpoint.
    pub interval_ms: u64,
    /// A check without a whole answer head by then has failed.
    pub timeout_ms: u64,
    /// Consecutive failed checks (not 2xx, refused, timed out) that take an endpoint out.
    pub unhealthy_after: u32,
    /// Consecutive good checks that bring it back.
    pub healthy_after: u32,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            path: String::new(),
            interval_ms: 5000,
            timeout_ms: 1000,
            unhealthy_after: 3,
            healthy_after: 2,
        }
    }
}

impl Health {
    /// Whether active checks run.
    pub fn enabled(&self) -> bool {
        !self.path.is_empty()
    }
}

/// `[upstreams.outlier]`: ejection from real calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Outlier {
    /// Consecutive failed calls (refused, reset, timed out, or an HTTP 5xx answer) that eject
    /// an endpoint; 0: never ejected.
    pub consecutive_failures: u32,
    /// The n-th ejection of an endpoint lasts n × this.
    pub base_ejection_ms: u64,
    /// Never more than this share of the endpoints ejected at once.
    pub max_ejected_percent: u32,
}

impl Default for Outlier {
    fn default() -> Self {
        Outlier {
            consecutive_failures: 5,
            base_ejection_ms: 30_000,
            max_ejected_percent: 50,
        }
    }
}

/// `[upstreams.retry]`: tries of one call. A call that failed before any byte of it reached an
/// endpoint is retried on another; one that was sent only when its method is in `methods`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Retry {
    /// Tries of one call, the first included; 1: no retry.
    pub attempts: u32,
    /// Method globs safe to send twice (idempotent): retried after a failure once sent (reset,
    /// timed out, or 502/503/504 from the endpoint).
    pub methods: Vec<String>,
    /// Retries are at most this share of the upstream's calls over the last 10 s (with a floor
    /// of 10 retries in that window, so a quiet upstream can still retry).
    pub budget_percent: u32,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            attempts: 2,
            methods: Vec::new(),
            budget_percent: 20,
        }
    }
}

pub(super) fn default_hash_key() -> String {
    "auth".into()
}

/// Checks an upstream's balancing, health, outlier and retry keys (`at` names a key of it).
pub(super) fn validate(
    at: &dyn Fn(&str) -> String,
    hash_key: &str,
    (health, outlier, retry): (&Health, &Outlier, &Retry),
    issues: &mut Issues,
) {
    if let Err(e) = Sticky::parse(hash_key) {
        issues.add(at("hash_key"), e);
    }
    validate_health(health, at, issues);
    validate_outlier(outlier, at, issues);
    validate_retry(retry, at, issues);
}

fn validate_health(h: &Health, at: &dyn Fn(&str) -> String, issues: &mut Issues) {
    if h.enabled() && (!h.path.starts_with('/') || h.path.contains(['#', ' '])) {
        issues.add(
            at("health.path"),
            "must be an absolute path such as \"/health\"".into(),
        );
    }
    for (key, v) in [
        ("health.interval_ms", h.interval_ms),
        ("health.timeout_ms", h.timeout_ms),
        ("health.unhealthy_after", u64::from(h.unhealthy_after)),
        ("health.healthy_after", u64::from(h.healthy_after)),
    ] {
        if v == 0 {
            issues.add(at(key), "must be positive".into());
        }
    }
}

fn validate_outlier(o: &Outlier, at: &dyn Fn(&str) -> String, issues: &mut Issues) {
    if o.consecutive_failures > 0 && o.base_ejection_ms == 0 {
        issues.add(at("outlier.base_ejection_ms"), "must be positive".into());
    }
    if o.max_ejected_percent > 100 {
        issues.add(
            at("outlier.max_ejected_percent"),
            "must be at most 100".into(),
        );
    }
}

fn validate_retry(r: &Retry, at: &dyn Fn(&str) -> String, issues: &mut Issues) {
    if !(1..=MAX_ATTEMPTS).contains(&r.attempts) {
        issues.add(
            at("retry.attempts"),
            format!("must be 1 to {MAX_ATTEMPTS} (1: no retry)"),
        );
    }
    if r.budget_percent > 100 {
        issues.add(at("retry.budget_percent"), "must be at most 100".into());
    }
    for (j, m) in r.methods.iter().enumerate() {
        if m.is_empty() {
            issues.add(
                at(&format!("retry.methods[{j}]")),
                "must not be empty".into(),
            );
        }
    }
}
