//! SSE subscribers of the domain feed (`GET /events`) and of the sid contexts
//! (`GET /contexts/{id}/events`), each with a home replica, dropping their connection at random
//! and resuming with `Last-Event-ID` (on another replica while home is down). Every id must be
//! the one after the last across resumes, or come after a `gap` frame; every subscriber of a
//! stream must see the same data under the same id.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::faults::{Excused, Kind, Problems};
use crate::load::CALL_LIMIT;
use crate::sse::{Body, End, Frame, Order, Step};
use crate::Run;

/// Silence longer than this is a stall: every stream's keepalive is 5 s.
const STALL: Duration = Duration::from_secs(20);

#[derive(Default)]
pub struct SubStats {
    pub events: AtomicU64,
    pub connects: AtomicU64,
    pub resumes: AtomicU64,
    pub dropped: AtomicU64,
    pub gaps: AtomicU64,
    /// For each (stream path, id), the hash of the data first seen under it.
    seen: Mutex<HashMap<(String, u64), u64>>,
    pub excused: Excused,
    pub problems: Problems,
}

fn hash(data: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    data.hash(&mut h);
    h.finish()
}

struct Sub<'a> {
    run: &'a Run,
    stats: &'a SubStats,
    path: String,
    home: usize,
    order: Order,
}

impl Sub<'_> {
    /// A failure the faults may explain: `any` faults of the kinds `explains` accepts.
    fn excuse(&self, what: &str, from: f64, explains: impl Fn(Kind) -> bool) {
        let to = self.run.timeline.now();
        match self.run.timeline.explaining(from, to, explains) {
            Some(k) => self.stats.excused.note(format!("subscriber: {what}"), k),
            None => self.stats.problems.add(format!(
                "t={from:.1}s {} (home r{}): {what}",
                self.path,
                self.home + 1
            )),
        }
    }

    fn frame(&mut self, f: &Frame, on: usize, since: f64) {
        match self.order.step(f) {
            Step::Next(id) => {
                self.stats.events.fetch_add(1, Ordering::Relaxed);
                let h = hash(&f.data);
                let mut seen = self.stats.seen.lock().unwrap();
                let first = *seen.entry((self.path.clone(), id)).or_insert(h);
                drop(seen);
                if first != h {
                    self.stats.problems.add(format!(
                        "{} id {id} on r{}: other data than another subscriber saw",
                        self.path,
                        on + 1
                    ));
                }
            }
            Step::Gap => {
                self.stats.gaps.fetch_add(1, Ordering::Relaxed);
                self.excuse("a gap frame", since, |k| {
                    matches!(k, Kind::ReplicaKilled(_) | Kind::RedisRestarted)
                });
            }
            s => self.stats.problems.add(format!(
                "{} on r{} after {:?}: {s:?}",
                self.path,
                on + 1,
                self.order.last
            )),
        }
    }
}

/// One subscriber until the run stops.
pub async fn subscriber(idx: usize, path: String, run: Arc<Run>, stats: Arc<SubStats>) {
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(3))
        .build()
        .unwrap();
    let home = idx % run.urls.len();
    let mut sub = Sub {
        run: &run,
        stats: &stats,
        path,
        home,
        order: Order::default(),
    };
    let mut on = home;
    while !run.subs_stopped() {
        let since = run.timeline.now();
        let mut req = client
            .get(format!("{}{}", run.urls[on], sub.path))
            .header("accept", "text/event-stream");
        if let Some(l) = sub.order.last {
            req = req.header("last-event-id", l.to_string());
            stats.resumes.fetch_add(1, Ordering::Relaxed);
        }
        let resp = match tokio::time::timeout(CALL_LIMIT, req.send()).await {
            Err(_) => {
                sub.excuse("subscribing hung", since, |_| false);
                continue;
            }
            Ok(Err(_)) => {
                sub.excuse("cannot connect", since, |k| k == Kind::ReplicaKilled(on));
                on = (on + 1) % run.urls.len();
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Ok(Ok(r)) if !r.status().is_success() => {
                let what = format!("subscribe answered HTTP {}", r.status().as_u16());
                sub.excuse(&what, since, |k| {
                    matches!(k, Kind::RedisRestarted | Kind::ReplicaKilled(_))
                });
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            Ok(Ok(r)) => r,
        };
        stats.connects.fetch_add(1, Ordering::Relaxed);
        let mut body = Body::new(resp, STALL);
        // Exponential hold, mean 20 s, 1..120 s.
        let hold = (-20.0 * (1.0 - fastrand::f64()).ln()).clamp(1.0, 120.0);
        let drop_at = tokio::time::Instant::now() + Duration::from_secs_f64(hold);
        let ended = loop {
            tokio::select! {
                f = body.next() => match f {
                    Ok(f) => sub.frame(&f, on, since),
                    Err(e) => break Some(e),
                },
                _ = tokio::time::sleep_until(drop_at) => break None,
                _ = run.subs_stop.notified() => break None,
            }
        };
        drop(body);
        match ended {
            None => {
                stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Some(End::Silent(d)) => sub.excuse(&format!("silent for {d:?}"), since, |_| false),
            Some(e) => {
                let what = match e {
                    End::Closed => "the replica ended the stream",
                    _ => "the stream broke",
                };
                sub.excuse(what, since, |k| {
                    k == Kind::ReplicaKilled(on) || k == Kind::RedisRestarted
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(fastrand::u64(..800))).await;
        // Home again when it answers; elsewhere while it does not.
        on = home;
    }
}
