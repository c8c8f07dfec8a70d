//! Upstreams of several endpoints, over real sockets: how calls are spread (`balance`), an
//! endpoint killed under load (`failover`, real child processes), one that refuses connections
//! (`refused`), active health checks (`health`) and the panic mode when every endpoint is out
//! (`panic`), ejection by failed calls (`outlier`), `max_concurrent` (`overload`), reloads that
//! add, keep or remove endpoints (`reload`), when a failed try is sent again (`retries`) and the
//! id a retried call keeps (`retry_ids`), what `/readyz`, the console and the access log say of
//! each endpoint (`observe`), the pass-through over a fleet (`passthrough`), and the bad keys
//! `check-config` refuses (`check_config`).
//!
//! The metrics recorder is the process's: each test names its upstream uniquely and reads the
//! counters with that name. Every wait polls a condition with a deadline.
#![forbid(unsafe_code)]

#[path = "../support/mod.rs"]
mod support;

mod balance;
mod check_config;
mod failover;
mod health;
mod observe;
mod outlier;
mod overload;
mod panic;
mod passthrough;
mod refused;
mod reload;
mod retries;
mod retry_ids;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use wiregate::config::{Dialect, Upstream};

pub use support::until;
use support::{GatewayBuilder, TestGateway};

/// How long any one condition may take to come true.
pub const WAIT: Duration = Duration::from_secs(8);

/// A gateway routing every method to upstream `name`, whose endpoints are `urls` (2 s timeout);
/// `edit` sets the upstream's other keys.
pub fn fleet(
    name: &str,
    urls: &[String],
    dialect: Dialect,
    edit: impl FnOnce(&mut Upstream),
) -> GatewayBuilder {
    support::gateway()
        .with(|c| c.upstreams.push(fleet_upstream(name, urls, dialect, edit)))
        .route(&["*"], name)
}

/// Upstream `name` with `endpoints = urls` (and no `url`).
pub fn fleet_upstream(
    name: &str,
    urls: &[String],
    dialect: Dialect,
    edit: impl FnOnce(&mut Upstream),
) -> Upstream {
    let mut u = Upstream::new(name, "", dialect, 2000);
    u.url = String::new();
    u.endpoints = urls.to_vec();
    edit(&mut u);
    u
}

/// `host:port` of a URL, as metrics, `/readyz` and the access log name an endpoint.
pub fn authority(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split('/').next().unwrap().to_owned()
}

/// Runs `workers` concurrent clients, each POSTing calls to `url` back to back: worker `w`
/// sends `next(w, i)` for i = 0, 1, .. until that gives `None`, and hands each answer, with the
/// instant its call was sent, to `answered`.
pub fn workers<A>(
    http: &reqwest::Client,
    url: &str,
    workers: usize,
    next: impl Fn(usize, usize) -> Option<Value> + Send + Sync + 'static,
    answered: impl Fn(Instant, reqwest::Response) -> A + Send + Sync + 'static,
) -> Vec<tokio::task::JoinHandle<()>>
where
    A: Future<Output = ()> + Send,
{
    let (next, answered) = (Arc::new(next), Arc::new(answered));
    (0..workers)
        .map(|w| {
            let (http, url) = (http.clone(), url.to_owned());
            let (next, answered) = (next.clone(), answered.clone());
            tokio::spawn(async move {
                let mut i = 0;
                while let Some(body) = next(w, i) {
                    i += 1;
                    let started = Instant::now();
                    let r = http
                        .post(&url)
                        .header("content-type", "application/json")
                        .body(body.to_string())
                        .send()
                        .await
                        .expect("the gateway answers");
                    answered(started, r).await;
                }
            })
        })
        .collect()
}

/// The sum of the samples of metric `name` whose labels include all of `labels` (0 when none).
pub fn metric_in(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut sum = 0.0;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        let (set, value) = match rest.strip_prefix('{') {
            Some(r) => match r.split_once("} ") {
                Some((set, value)) => (set, value),
                None => continue,
            },
            None => match rest.strip_prefix(' ') {
                Some(value) => ("", value),
                None => continue,
            },
        };
        let has = |k: &str, v: &str| {
            set.split(',')
                .any(|kv| kv.split_once('=') == Some((k, &format!("\"{v}\""))))
        };
        if labels.iter().all(|(k, v)| has(k, v)) {
            sum += value.trim().parse::<f64>().unwrap_or(0.0);
        }
    }
    sum
}

impl TestGatewayExt for TestGateway {
    async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric_in(&self.get("/metrics").await.text, name, labels)
    }

    async fn readyz(&self) -> (u16, Value) {
        let a = self.get("/readyz").await;
        (a.status, a.json())
    }

    async fn endpoint(&self, upstream: &str, endpoint: &str) -> Value {
        let (_, body) = self.readyz().await;
        body["endpoints"][upstream]
            .as_array()
            .unwrap_or_else(|| panic!("no endpoints of {upstream} in {body}"))
            .iter()
            .find(|e| e["endpoint"] == endpoint)
            .unwrap_or_else(|| panic!("{endpoint} not listed in {body}"))
            .clone()
    }

    async fn state(&self, upstream: &str, endpoint: &str) -> String {
        self.endpoint(upstream, endpoint).await["state"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// What the fleet tests ask a running gateway.
#[allow(async_fn_in_trait)]
pub trait TestGatewayExt {
    /// [`metric_in`] on its `/metrics`.
    async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64;
    /// `/readyz`: its status and body.
    async fn readyz(&self) -> (u16, Value);
    /// The `/readyz` object of one endpoint (`host:port`) of `upstream`.
    async fn endpoint(&self, upstream: &str, endpoint: &str) -> Value;
    /// That endpoint's `state`.
    async fn state(&self, upstream: &str, endpoint: &str) -> String;
}

/// A JSON-RPC call with `id`.
pub fn call(id: Value, method: &str, params: Value) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Panics when `text` names the address of any of `urls`.
pub fn names_no_endpoint(text: &str, urls: &[String]) {
    for u in urls {
        let a = authority(u);
        assert!(!text.contains(&a), "{a} is named in {text}");
    }
}
