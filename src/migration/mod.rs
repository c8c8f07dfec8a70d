//! Migrating a method safely: weighted splits with sticky callers, shadow traffic with answer
//! comparison, automatic rollback of a misbehaving side, and the report of who still speaks
//! legacy, all served at `GET /migration`.
//!
//! The pure parts live apart: [`split`] (which side a caller gets), [`compare`] (the JSON
//! pointers where two answers differ), [`window`] (the rollback window), [`callers`] (the
//! bounded caller table). This module holds the state built from a [`Config`] and the calls
//! `rpc.rs` makes on a routed call: [`Migration::pick`] before the exchange,
//! [`Migration::shadow_copy`] and [`Migration::finished`] around it. [`shadow`] sends the
//! shadows off the caller's path.
//!
//! The state is rebuilt whole from a new configuration ([`Migration::new`] with the previous
//! state): a route that keeps its name keeps its figures, and a side that keeps its upstream
//! keeps its calls and its rollback — unless the reload changed that route's `split` or
//! `rollback`, which is how a rolled-back side is brought back.

pub(crate) mod callers;
pub(crate) mod compare;
pub mod report;
pub(crate) mod shadow;
pub(crate) mod split;
pub(crate) mod window;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use metrics::Counter;
use serde_json::{json, Value};

use crate::config::{Config, Rollback, Route, SplitSide, Sticky};
use crate::model::error::GatewayError;
use crate::upstream::call::{Call, Done};
use crate::upstream::UpstreamClient;
use crate::wire::jsonrpc::{code, Outcome};
use crate::wire::translate::ErrorTable;

use crate::upstream::affinity::Who;
use callers::Callers;
use shadow::{Job, Queue, ShadowStats, Target};
use window::{Trip, Window};

/// Which side of its route serves a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pick {
    /// Index into the gateway's upstreams.
    pub upstream: usize,
    /// The side's position in the route (0: the primary).
    pub side: usize,
}

/// A rollback that happened.
#[derive(Clone, Debug, serde::Serialize)]
struct RolledBack {
    at: String,
    #[serde(flatten)]
    trip: Trip,
}

/// The figures of one side, kept across reloads while the route and the upstream keep their
/// names.
#[derive(Debug)]
struct SideStats {
    calls: AtomicU64,
    counter: Counter,
    rolled_back: AtomicBool,
    window: Mutex<Window>,
    why: Mutex<Option<RolledBack>>,
}

impl SideStats {
    fn new(route: &str, upstream: &str, window_ms: u64) -> Self {
        SideStats {
            calls: AtomicU64::new(0),
            counter: crate::telemetry::split_counter(route, upstream),
            rolled_back: AtomicBool::new(false),
            window: Mutex::new(Window::new(window_ms)),
            why: Mutex::new(None),
        }
    }

    /// Brings a rolled-back side back with an empty window (a reload changed its route).
    fn rearm(&self, window_ms: u64) {
        self.rolled_back.store(false, Ordering::Release);
        *lock(&self.window) = Window::new(window_ms);
        *lock(&self.why) = None;
    }
}

#[derive(Debug)]
struct Side {
    upstream: usize,
    name: String,
    weight: u32,
    stats: Arc<SideStats>,
}

#[derive(Debug)]
struct RouteState {
    name: String,
    methods: Vec<String>,
    /// The split as configured (empty for a plain route), to tell whether a reload changed it.
    split: Vec<SplitSide>,
    sticky: Sticky,
    salt: u64,
    sides: Vec<Side>,
    rollback: Option<Rollback>,
    rollbacks: Counter,
    shadow: Option<Arc<Target>>,
    /// Shadow figures, present when the route has (or had) a shadow.
    shadow_stats: Option<Arc<ShadowStats>>,
}

/// The migration state of one configuration.
#[derive(Debug)]
pub struct Migration {
    routes: Vec<RouteState>,
    caller_rule: Sticky,
    caller_rule_text: String,
    callers: Arc<Mutex<Callers>>,
    queue: Option<Queue>,
    /// Start of the clock the rollback windows read (kept across reloads).
    epoch: Instant,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Whether a side's outcome counts against it for rollback: the exchange failed (unreachable,
/// timed out, not a valid envelope), or the upstream answered an internal error or did not know
/// the method. Other error answers (not found, invalid params, ...) are the callers' business.
fn is_failure(result: &Result<Done, GatewayError>) -> bool {
    match result {
        Err(_) => true,
        Ok(Done {
            outcome: Outcome::Error(e),
            ..
        }) => e.code == code::INTERNAL_ERROR || e.code == code::METHOD_NOT_FOUND,
        Ok(_) => false,
    }
}

impl Migration {
    /// Builds the state of `config` (validated), whose upstream clients are `upstreams`.
    /// With `previous` (a reload), routes that keep their name keep their figures.
    pub fn new(
        config: &Config,
        upstreams: &[UpstreamClient],
        table: &ErrorTable,
        previous: Option<&Migration>,
    ) -> Self {
        let index = |name: &str| upstreams.iter().position(|u| u.name() == name);
        // The shadow thread's clients: pools of their own, so that a connection registered
        // with that thread's reactor is never used on the primary's (see `shadow`).
        let shadow_client = |i: usize| upstreams[i].with_own_pools();
        let caller_rule = Sticky::parse(&config.migration.caller).unwrap_or(Sticky::Auth);
        let callers = match previous {
            Some(p) if p.caller_rule == caller_rule => {
                lock(&p.callers).set_max(config.migration.max_callers);
                p.callers.clone()
            }
            _ => Arc::new(Mutex::new(Callers::new(config.migration.max_callers))),
        };
        let mut routes = Vec::with_capacity(config.routes.len());
        for (i, r) in config.routes.iter().enumerate() {
            let name = r.display_name(i);
            let old = previous.and_then(|p| p.routes.iter().find(|o| o.name == name));
            routes.push(Self::route(r, name, old, &index, &shadow_client, table));
        }
        let queue = routes
            .iter()
            .any(|r| r.shadow.is_some())
            .then(|| {
                Queue::start(
                    config.migration.shadow_queue,
                    config.migration.shadow_concurrency,
                )
            })
            .flatten();
        Migration {
            routes,
            caller_rule,
            caller_rule_text: config.migration.caller.clone(),
            callers,
            queue,
            epoch: previous.map_or_else(Instant::now, |p| p.epoch),
        }
    }

    fn route(
        r: &Route,
        name: String,
        old: Option<&RouteState>,
        index: &dyn Fn(&str) -> Option<usize>,
        shadow_client: &dyn Fn(usize) -> UpstreamClient,
        table: &ErrorTable,
    ) -> RouteState {
        let configured: Vec<(String, u32)> = match r.split.is_empty() {
            true => vec![(r.upstream.clone(), 1)],
            false => r
                .split
                .iter()
                .map(|s| (s.upstream.clone(), s.weight))
                .collect(),
        };
        let window_ms = r.rollback.as_ref().map_or(60_000, |rb| rb.window_ms);
        let changed = old.is_none_or(|o| o.split != r.split || o.rollback != r.rollback);
        let sides = configured
            .into_iter()
            .filter_map(|(up, weight)| {
                let upstream = index(&up)?;
                let kept = old.and_then(|o| o.sides.iter().find(|s| s.name == up));
                let stats = match kept {
                    Some(s) => {
                        if changed {
                            s.stats.rearm(window_ms);
                        }
                        s.stats.clone()
                    }
                    None => Arc::new(SideStats::new(&name, &up, window_ms)),
                };
                Some(Side {
                    upstream,
                    name: up,
                    weight,
                    stats,
                })
            })
            .collect();
        let shadow_stats = (!r.shadow.is_empty())
            .then(|| old.and_then(|o| o.shadow_stats.clone()).unwrap_or_default());
        let shadow = index(&r.shadow).map(|s| {
            Arc::new(Target {
                route: name.clone(),
                shadow: shadow_client(s),
                noise: index(&r.shadow_noise).map(shadow_client),
                ignore: r.shadow_ignore.clone(),
                sample: r.shadow_sample,
                table: table.clone(),
                stats: shadow_stats.clone().unwrap_or_default(),
            })
        });
        RouteState {
            rollbacks: crate::telemetry::rollback_counter(&name),
            salt: crate::upstream::affinity::hash(name.as_bytes()),
            name,
            methods: r.methods.clone(),
            split: r.split.clone(),
            sticky: Sticky::parse(&r.sticky).unwrap_or(Sticky::Auth),
            sides,
            rollback: r.rollback.clone(),
            shadow,
            shadow_stats,
        }
    }

    /// Records a call in the caller report.
    pub fn saw(&self, who: &Who<'_>, dialect: &'static str, method: &str) {
        thread_local! {
            /// The caller's id, written in place (no allocation a call).
            static ID: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        ID.with_borrow_mut(|id| {
            id.clear();
            callers::write_caller_id(&self.caller_rule, who, id);
            lock(&self.callers).saw(id, dialect, method, unix_ms());
        });
    }

    /// The side of route `route` serving this caller, counted; `None` for a route without an
    /// upstream (only an unvalidated configuration has one).
    pub fn pick(&self, route: usize, who: &Who<'_>) -> Option<Pick> {
        let r = self.routes.get(route)?;
        let side = match r.sides.len() {
            0 => return None,
            1 => 0,
            _ => {
                let weights: Vec<u32> = r
                    .sides
                    .iter()
                    .map(|s| match s.stats.rolled_back.load(Ordering::Acquire) {
                        true => 0,
                        false => s.weight,
                    })
                    .collect();
                // A caller without the sticky key cannot be kept on one side: each of its
                // calls is drawn by weight.
                let point = crate::upstream::affinity::key_hash(&r.sticky, who)
                    .map_or_else(crate::util::ids::random_u64, |h| split::point(r.salt, h));
                split::choose(&weights, point).unwrap_or(0)
            }
        };
        let s = &r.sides[side];
        s.stats.calls.fetch_add(1, Ordering::Relaxed);
        s.stats.counter.increment(1);
        Some(Pick {
            upstream: s.upstream,
            side,
        })
    }

    /// Route `route`'s name and, for a split, which side `pick` is: `primary`, or the
    /// canary's upstream name (what a span's `wiregate.route` and `wiregate.split_side` say).
    pub(crate) fn describe(&self, route: usize, pick: Pick) -> (&str, Option<&str>) {
        let Some(r) = self.routes.get(route) else {
            return ("", None);
        };
        let side = match (r.sides.len(), pick.side) {
            (0 | 1, _) => None,
            (_, 0) => Some("primary"),
            (_, i) => r.sides.get(i).map(|s| s.name.as_str()),
        };
        (&r.name, side)
    }

    /// A copy of the call for the route's shadow, when this call is to be shadowed: the route
    /// has a shadow, the call is not a notification, it is sampled, and the shadow is not the
    /// upstream that served it. Never inlined: `benches/callgrind.sh shadow` reads the
    /// caller's share of a shadow by this name and [`hand_off`]'s.
    #[inline(never)]
    pub(crate) fn shadow_copy(&self, route: usize, pick: Pick, call: &Call) -> Option<Call> {
        let t = self.routes[route].shadow.as_ref()?;
        if call.notification
            || self.queue.is_none()
            || t.shadow.name() == self.routes[route].sides[pick.side].name
        {
            return None;
        }
        if t.sample < 1.0 && (crate::util::ids::random_u64() as f64 / u64::MAX as f64) >= t.sample {
            return None;
        }
        Some(call.clone())
    }

    /// After the exchange: the side's rollback window, and the shadow queued.
    pub(crate) fn finished(
        &self,
        route: usize,
        pick: Pick,
        result: &Result<Done, GatewayError>,
        elapsed: Duration,
        shadow: Option<Call>,
        request_id: Option<&[u8]>,
    ) {
        let r = &self.routes[route];
        if let (Some(rule), true) = (&r.rollback, pick.side > 0) {
            self.judge(r, &r.sides[pick.side], rule, is_failure(result), elapsed);
        }
        if let (Some(call), Some(target), Some(queue)) = (shadow, &r.shadow, &self.queue) {
            hand_off(queue, target, call, result, request_id);
        }
    }

    fn judge(&self, r: &RouteState, side: &Side, rule: &Rollback, failed: bool, elapsed: Duration) {
        let now = self.epoch.elapsed().as_millis() as u64;
        let trip = {
            let mut w = lock(&side.stats.window);
            w.record(now, failed, elapsed.as_secs_f64() * 1000.0);
            w.check(now, rule)
        };
        let Some(trip) = trip else { return };
        // Only the first call to see the trip rolls the side back.
        if side.stats.rolled_back.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::warn!(
            route = %r.name,
            upstream = %side.name,
            calls = trip.calls,
            errors = trip.errors,
            error_rate = trip.error_rate,
            p99_ms = trip.p99_ms,
            "rolled back: {}; its weight is 0 until a reload changes the route",
            trip.reason
        );
        r.rollbacks.increment(1);
        *lock(&side.stats.why) = Some(RolledBack {
            at: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            trip,
        });
    }

    /// Everything `/migration` shows: per route its sides, rollback and shadow; per caller its
    /// dialects and methods.
    pub fn report(&self) -> Value {
        let now = self.epoch.elapsed().as_millis() as u64;
        let routes: Vec<Value> = self
            .routes
            .iter()
            .map(|r| {
                let sides: Vec<Value> = r
                    .sides
                    .iter()
                    .enumerate()
                    .map(|(i, s)| {
                        let rolled = s.stats.rolled_back.load(Ordering::Acquire);
                        let mut v = json!({
                            "upstream": s.name,
                            "primary": i == 0,
                            "weight": s.weight,
                            "effective_weight": if rolled { 0 } else { s.weight },
                            "calls": s.stats.calls.load(Ordering::Relaxed),
                            "rolled_back": rolled,
                        });
                        if r.rollback.is_some() && i > 0 {
                            v["window"] = json!(lock(&s.stats.window).figures(now));
                            v["rollback"] = json!(*lock(&s.stats.why));
                        }
                        v
                    })
                    .collect();
                let rolled: Vec<&Side> = r
                    .sides
                    .iter()
                    .filter(|s| s.stats.rolled_back.load(Ordering::Acquire))
                    .collect();
                let rollback = match &r.rollback {
                    None => json!({"state": "off"}),
                    Some(rule) => json!({
                        "state": if rolled.is_empty() { "armed" } else { "rolled_back" },
                        "rule": rule,
                        "reason": rolled.iter().filter_map(|s| lock(&s.stats.why).as_ref()
                            .map(|w| format!("{}: {}", s.name, w.trip.reason))).collect::<Vec<_>>().join("; "),
                    }),
                };
                let shadow = match (&r.shadow, &r.shadow_stats) {
                    (Some(t), Some(st)) => json!({
                        "upstream": t.shadow.name(),
                        "noise_upstream": t.noise.as_ref().map(|n| n.name()),
                        "sample": t.sample,
                        "ignore": t.ignore,
                        "match": st.matched.load(Ordering::Relaxed),
                        "diff": st.diff.load(Ordering::Relaxed),
                        "noise": st.noise.load(Ordering::Relaxed),
                        "shadow_error": st.shadow_error.load(Ordering::Relaxed),
                        "dropped": st.dropped.load(Ordering::Relaxed),
                        "last_diffs": *lock(&st.last_diffs),
                    }),
                    _ => Value::Null,
                };
                json!({
                    "name": r.name,
                    "methods": r.methods,
                    "split": !r.split.is_empty(),
                    "sticky": sticky_text(&r.sticky),
                    "sides": sides,
                    "rollback": rollback,
                    "shadow": shadow,
                })
            })
            .collect();
        let callers = lock(&self.callers).report();
        json!({
            "routes": routes,
            "callers": {
                "rule": self.caller_rule_text,
                "tracked": callers.tracked,
                "others": callers.others,
            },
        })
    }
}

/// What the caller's path pays for a shadow once the primary has answered: the answer's copy and
/// a bounded queue push (see `shadow`). Never inlined, so that `benches/callgrind.sh shadow`
/// reads its cost by name.
#[inline(never)]
fn hand_off(
    queue: &Queue,
    target: &Arc<Target>,
    call: Call,
    result: &Result<Done, GatewayError>,
    request_id: Option<&[u8]>,
) {
    let primary = match result {
        Ok(d) => d.outcome.clone(),
        Err(e) => Outcome::Error(e.to_jsonrpc()),
    };
    queue.offer(Job {
        target: target.clone(),
        call,
        primary,
        // Without an `X-Request-Id`, the shadow thread names the call by its upstream id.
        request_id: request_id
            .and_then(|id| std::str::from_utf8(id).ok())
            .filter(|id| !id.is_empty())
            .map(str::to_owned),
        trace: crate::http::scope::parent(),
    });
}

fn sticky_text(s: &Sticky) -> String {
    match s {
        Sticky::Auth => "auth".into(),
        Sticky::Ip => "ip".into(),
        Sticky::Header(h) => format!("header:{h}"),
    }
}

#[cfg(test)]
mod tests;
