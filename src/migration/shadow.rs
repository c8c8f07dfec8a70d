//! Shadow traffic: copies of calls sent to a route's `shadow` upstream (and `shadow_noise`) after
//! the caller has its answer, compared with what the caller got.
//!
//! The caller's task only puts a job on a bounded queue (`migration.shadow_queue`), never
//! waiting: when it is full the shadow is dropped and counted. The queue is drained on a thread
//! of its own (`wiregate-shadow`, one per migration state with a shadowed route, started with
//! it) running a current-thread runtime, with at most `migration.shadow_concurrency` exchanges
//! in flight. So everything a shadow costs (its upstream socket's readiness, its timers, its
//! task's polls) is that thread's: the primary's scheduler never runs any of it, a shadow never
//! delays a caller there, and the primary path pays only the hand-off (a bounded queue push,
//! and a wake-up only when the drain is waiting for work). The shadow's upstream clients are its
//! own (`Target::shadow`, `Target::noise`: pools of their own), so no connection registered with
//! this thread's reactor is ever used from the primary's, or outlives the thread.
//!
//! Jobs carry everything they need (clients, figures), so a reload that replaces the migration
//! state lets the old thread finish its queue and end: it stops once every sender is dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::StreamExt;
use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::http::span::Kind;
use crate::telemetry;
use crate::upstream::call::{forward, Call};
use crate::upstream::UpstreamClient;
use crate::wire::jsonrpc::Outcome;
use crate::wire::translate::ErrorTable;

use super::compare::{self, PointerDiff, Verdict};

/// The name of the thread that sends the shadows (`benches/callgrind.sh shadow` reads its
/// instructions apart by the function it runs, [`drain`]).
pub(crate) const THREAD: &str = "wiregate-shadow";

/// Differences kept per route for `/migration`.
pub(crate) const LAST_DIFFS: usize = 50;

/// One reported difference.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct DiffRecord {
    /// The method called.
    pub method: String,
    /// The call's `X-Request-Id` (or its JSON-RPC / legacy id when it had none).
    pub request_id: String,
    /// When it was compared (RFC 3339).
    pub at: String,
    /// What differs.
    pub pointers: Vec<PointerDiff>,
}

/// A route's shadow figures; kept across reloads for a route that keeps its name.
#[derive(Debug, Default)]
pub(crate) struct ShadowStats {
    /// Equal answers.
    pub matched: AtomicU64,
    /// Different answers.
    pub diff: AtomicU64,
    /// Answers differing only where the two primaries differ.
    pub noise: AtomicU64,
    /// The shadow failed (unreachable, timed out, not a valid envelope).
    pub shadow_error: AtomicU64,
    /// Shadows not sent: the queue was full.
    pub dropped: AtomicU64,
    /// The last [`LAST_DIFFS`] differences, newest last.
    pub last_diffs: Mutex<VecDeque<DiffRecord>>,
}

impl ShadowStats {
    fn record(&self, route: &str, method: &str, request_id: &str, verdict: Verdict) {
        telemetry::record_shadow(route, method, verdict.label());
        match verdict {
            Verdict::Match => self.matched.fetch_add(1, Ordering::Relaxed),
            Verdict::Noise => self.noise.fetch_add(1, Ordering::Relaxed),
            Verdict::Diff(pointers) => {
                let mut last = self.last_diffs.lock().unwrap_or_else(|e| e.into_inner());
                if last.len() == LAST_DIFFS {
                    last.pop_front();
                }
                last.push_back(DiffRecord {
                    method: method.to_owned(),
                    request_id: compare::cut(request_id, 128),
                    at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
                    pointers,
                });
                self.diff.fetch_add(1, Ordering::Relaxed)
            }
        };
    }
}

/// Where a route's shadows go and how they are judged.
#[derive(Debug)]
pub(crate) struct Target {
    /// The route's name.
    pub route: String,
    /// The shadow upstream.
    pub shadow: UpstreamClient,
    /// The primary's second instance, for noise.
    pub noise: Option<UpstreamClient>,
    /// Pointers left out of the comparison.
    pub ignore: Vec<String>,
    /// The fraction of calls shadowed.
    pub sample: f64,
    /// Legacy error codes, to bring a legacy shadow's errors to JSON-RPC terms.
    pub table: ErrorTable,
    /// The figures.
    pub stats: Arc<ShadowStats>,
}

/// One shadow to send.
#[derive(Debug)]
pub(crate) struct Job {
    /// Where.
    pub(crate) target: Arc<Target>,
    /// The call as the primary got it.
    pub(crate) call: Call,
    /// What the caller got, in JSON-RPC terms.
    pub(crate) primary: Outcome,
    /// The call's `X-Request-Id`, when it had one (else its upstream id names it).
    pub(crate) request_id: Option<String>,
    /// The call's span, when its request records spans: the exchange is a span under it.
    pub(crate) trace: Option<crate::http::span::Parent>,
}

/// The sending end of the queue.
#[derive(Clone, Debug)]
pub(crate) struct Queue(mpsc::Sender<Job>);

impl Queue {
    /// A queue of `capacity` jobs drained with `concurrency` exchanges at once on a thread of
    /// its own, which ends when the queue's last sender is dropped and its jobs are done.
    /// `None` (logged) when the thread or its runtime cannot be started: shadows are then not
    /// sent, and the callers are served as ever.
    pub(crate) fn start(capacity: usize, concurrency: usize) -> Option<Queue> {
        let (tx, rx) = mpsc::channel(capacity);
        let started = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|runtime| {
                std::thread::Builder::new()
                    .name(THREAD.into())
                    .spawn(move || serve(&runtime, rx, concurrency))
            });
        match started {
            Ok(_) => Some(Queue(tx)),
            Err(e) => {
                tracing::error!(error = %e, "the shadow thread could not start: no shadows are sent");
                None
            }
        }
    }

    /// Queues a job, or drops and counts it when the queue is full. Never waits.
    pub(crate) fn offer(&self, job: Job) {
        if let Err(e) = self.0.try_send(job) {
            let job = match e {
                mpsc::error::TrySendError::Full(j) | mpsc::error::TrySendError::Closed(j) => j,
            };
            job.target.stats.dropped.fetch_add(1, Ordering::Relaxed);
            let method = compare::cut(&job.call.method, 64);
            telemetry::record_shadow(&job.target.route, &method, "dropped");
        }
    }
}

/// The shadow thread: drains the queue until its senders are gone. Never inlined: the bench
/// finds this thread's instructions by this name.
#[inline(never)]
fn serve(runtime: &tokio::runtime::Runtime, rx: mpsc::Receiver<Job>, concurrency: usize) {
    runtime.block_on(drain(rx, concurrency));
}

async fn drain(rx: mpsc::Receiver<Job>, concurrency: usize) {
    futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|j| (j, rx)) })
        .for_each_concurrent(concurrency, run)
        .await;
}

/// The JSON-RPC document an outcome is compared as.
fn document(outcome: &Outcome) -> Value {
    match outcome {
        Outcome::Result(raw) => {
            json!({"result": serde_json::from_str::<Value>(raw.get()).unwrap_or(Value::Null)})
        }
        Outcome::Error(e) => json!({"error": e}),
    }
}

async fn run(mut job: Job) {
    match job.trace.take() {
        Some(parent) => {
            let name = format!("shadow {}", job.target.route);
            crate::http::scope::run_as(parent, Kind::Internal, &name, exchange(job)).await;
        }
        None => exchange(job).await,
    }
}

/// The shadow's exchange (and the noise instance's), compared with what the caller got.
async fn exchange(job: Job) {
    let t = &job.target;
    let method = compare::cut(&job.call.method, 64);
    let request_id = job
        .request_id
        .unwrap_or_else(|| job.call.upstream_id.clone());
    // Both exchanges borrow the call (no copy for the noise instance).
    let (shadow, noise) = match &t.noise {
        None => (
            forward(&t.shadow, &t.table, &job.call, None, None).await,
            None,
        ),
        Some(n) => {
            let (shadow, noise) = tokio::join!(
                forward(&t.shadow, &t.table, &job.call, None, None),
                forward(n, &t.table, &job.call, None, None)
            );
            (shadow, noise.ok().map(|d| document(&d.outcome)))
        }
    };
    match shadow {
        Err(e) => {
            tracing::debug!(route = %t.route, method = %method, error = %e, "shadow call failed");
            t.stats.shadow_error.fetch_add(1, Ordering::Relaxed);
            telemetry::record_shadow(&t.route, &method, "shadow_error");
            crate::http::scope::annotate(|s| {
                s.set("wiregate.route", &*t.route);
                s.set("wiregate.upstream", t.shadow.name());
                s.set("rpc.method", &*method.to_string());
                s.fail(e.kind());
            });
        }
        Ok(done) => {
            let verdict = match (&job.primary, &done.outcome) {
                // Byte-equal results are equal JSON: nothing to parse or walk.
                (Outcome::Result(a), Outcome::Result(b)) if a.get() == b.get() => Verdict::Match,
                _ => compare::compare(
                    &document(&job.primary),
                    &document(&done.outcome),
                    noise.as_ref(),
                    &t.ignore,
                ),
            };
            crate::http::scope::annotate(|s| {
                s.set("wiregate.route", &*t.route);
                s.set("wiregate.upstream", t.shadow.name());
                s.set("rpc.method", &*method.to_string());
                s.set("wiregate.shadow.verdict", verdict.label());
            });
            t.stats.record(&t.route, &method, &request_id, verdict);
        }
    }
}
