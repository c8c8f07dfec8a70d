//! The console's own counters: calls per second by client dialect and outcome, routed calls per
//! second by the dialect of the upstream that served them, and a latency histogram per second,
//! for the last 15 minutes.
//!
//! The Prometheus recorder keeps totals; a chart needs rates over time, and scraping `/metrics`
//! text from a page would mean parsing it there. So [`record`] (called where
//! [`telemetry::record_call`](crate::telemetry::record_call) counts a call) keeps one small slot
//! per second that saw calls, in a ring bounded to [`WINDOW_SECS`] slots, with at most
//! [`MAX_SERIES`] dialect × outcome series (later ones fold into `other`). The ring's 900 slots of
//! 208 bytes (187 KB) are taken at the first call, whatever the load; nothing before it.
//!
//! The Migration view's legacy share over time is read from the same samples: the share of calls
//! made in the legacy dialect (callers still on legacy), and the share of routed calls a legacy
//! upstream served ([`SERVED`]; what a split moves and a rollback moves back).

use std::collections::VecDeque;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use serde::Serialize;

use crate::config::Dialect;

/// Seconds of history kept (15 minutes).
pub(crate) const WINDOW_SECS: u64 = 15 * 60;
/// Distinct dialect × outcome series kept; the last one is `other`.
pub(crate) const MAX_SERIES: usize = 16;
/// Latency buckets: bucket `i` holds latencies up to [`BOUNDS_NS`]`[i]`, 100 µs × 1.6^i (the
/// last also everything beyond).
const BUCKETS: usize = 32;
const BOUNDS_NS: [u64; BUCKETS] = {
    let mut b = [100_000u64; BUCKETS];
    let mut i = 1;
    while i < BUCKETS {
        b[i] = b[i - 1] * 8 / 5;
        i += 1;
    }
    b
};

/// The upstream dialects routed calls are counted by, in the order of [`Sample::served`].
pub(crate) const SERVED: [&str; 2] = ["legacy", "jsonrpc"];

fn served_index(d: Dialect) -> usize {
    match d {
        Dialect::Legacy => 0,
        Dialect::Jsonrpc => 1,
    }
}

/// One second that saw calls.
#[derive(Clone, Debug)]
struct Slot {
    second: u64,
    counts: [u32; MAX_SERIES],
    latency: [u32; BUCKETS],
    served: [u32; SERVED.len()],
}

/// The ring and the series' names. Pure: time is passed in, so tests need no clock.
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    slots: VecDeque<Slot>,
    series: Vec<(&'static str, Box<str>)>,
}

/// The bucket of a latency: a binary search of the bounds, on every call's path, so no
/// floating point.
fn bucket_of(elapsed: Duration) -> usize {
    let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
    BOUNDS_NS.partition_point(|&b| b < ns).min(BUCKETS - 1)
}

fn bound_ms(i: usize) -> f64 {
    BOUNDS_NS[i] as f64 / 1e6
}

/// The `q` quantile of a histogram as its bucket's upper bound, in milliseconds; `None` when
/// empty.
fn quantile_ms(latency: &[u32; BUCKETS], q: f64) -> Option<f64> {
    let total: u64 = latency.iter().map(|&n| u64::from(n)).sum();
    if total == 0 {
        return None;
    }
    let rank = ((total as f64) * q).ceil().max(1.0) as u64;
    let mut seen = 0u64;
    for (i, &n) in latency.iter().enumerate() {
        seen += u64::from(n);
        if seen >= rank {
            return Some(bound_ms(i));
        }
    }
    Some(bound_ms(BUCKETS - 1))
}

/// The name of a series the sampler no longer gives a slot of its own.
pub(crate) const OTHER: &str = "other";

impl Sampler {
    /// Counts one call at `second` (Unix time); `served` is the dialect of the upstream that
    /// served it, for a routed call.
    pub(crate) fn record(
        &mut self,
        second: u64,
        dialect: &'static str,
        outcome: &str,
        served: Option<Dialect>,
        elapsed: Duration,
    ) {
        let series = self.series_index(dialect, outcome);
        if self.slots.back().is_none_or(|s| s.second < second) {
            self.expire(second);
            // The whole window at the first call: a ring that grew a slot a second would keep
            // the process growing for its first 15 minutes (and double its buffer on the way),
            // which a soak cannot tell from a leak.
            if self.slots.capacity() < WINDOW_SECS as usize {
                self.slots
                    .reserve_exact(WINDOW_SECS as usize - self.slots.len());
            }
            self.slots.push_back(Slot {
                second,
                counts: [0; MAX_SERIES],
                latency: [0; BUCKETS],
                served: [0; SERVED.len()],
            });
        }
        // A call stamped in an earlier second than the newest slot (threads race at a second's
        // turn) is counted in the slot of its own second when there is one, else the newest.
        let slot = match self.slots.iter_mut().rev().find(|s| s.second <= second) {
            Some(s) => s,
            None => self.slots.back_mut().expect("a slot was just pushed"),
        };
        slot.counts[series] = slot.counts[series].saturating_add(1);
        let b = bucket_of(elapsed);
        slot.latency[b] = slot.latency[b].saturating_add(1);
        if let Some(d) = served {
            let i = served_index(d);
            slot.served[i] = slot.served[i].saturating_add(1);
        }
    }

    fn series_index(&mut self, dialect: &'static str, outcome: &str) -> usize {
        if let Some(i) = self
            .series
            .iter()
            .position(|(d, o)| *d == dialect && **o == *outcome)
        {
            return i;
        }
        if self.series.len() < MAX_SERIES - 1 {
            self.series.push((dialect, outcome.into()));
            return self.series.len() - 1;
        }
        if self.series.len() == MAX_SERIES - 1 {
            self.series.push((OTHER, OTHER.into()));
        }
        MAX_SERIES - 1
    }

    /// Drops slots older than the window ending at `now`.
    fn expire(&mut self, now: u64) {
        let oldest = now.saturating_sub(WINDOW_SECS - 1);
        while self.slots.front().is_some_and(|s| s.second < oldest) {
            self.slots.pop_front();
        }
    }

    /// The window ending at `now`, as the console's endpoint answers it.
    pub(crate) fn snapshot(&self, now: u64) -> Snapshot {
        let oldest = now.saturating_sub(WINDOW_SECS - 1);
        let mut all = [0u32; BUCKETS];
        let mut totals = vec![0u64; self.series.len()];
        let mut served = [0u64; SERVED.len()];
        let samples = self
            .slots
            .iter()
            .filter(|s| s.second >= oldest && s.second <= now)
            .map(|s| {
                for (a, n) in all.iter_mut().zip(&s.latency) {
                    *a = a.saturating_add(*n);
                }
                for (t, n) in totals.iter_mut().zip(&s.counts) {
                    *t += u64::from(*n);
                }
                for (t, n) in served.iter_mut().zip(&s.served) {
                    *t += u64::from(*n);
                }
                Sample {
                    t: s.second,
                    counts: s.counts[..self.series.len()].to_vec(),
                    served: s.served,
                    p50_ms: quantile_ms(&s.latency, 0.50),
                    p99_ms: quantile_ms(&s.latency, 0.99),
                }
            })
            .collect();
        Snapshot {
            now,
            window_secs: WINDOW_SECS,
            series: self
                .series
                .iter()
                .zip(totals)
                .map(|((d, o), total)| Series {
                    dialect: d,
                    outcome: o.to_string(),
                    total,
                })
                .collect(),
            samples,
            served: SERVED
                .iter()
                .zip(served)
                .map(|(&dialect, total)| Served { dialect, total })
                .collect(),
            p50_ms: quantile_ms(&all, 0.50),
            p99_ms: quantile_ms(&all, 0.99),
        }
    }
}

/// One series: calls of one client dialect with one outcome.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Series {
    /// `legacy`, `jsonrpc`, `a2a-1.0`, `a2a-0.3` (or `other`).
    pub dialect: &'static str,
    /// `ok`, `error`, or a gateway error kind (or `other`).
    pub outcome: String,
    /// Calls in the window.
    pub total: u64,
}

/// Routed calls served by upstreams of one dialect.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Served {
    /// An upstream dialect (see [`SERVED`]).
    pub dialect: &'static str,
    /// Routed calls in the window.
    pub total: u64,
}

/// One second that saw calls.
#[derive(Debug, Serialize, PartialEq)]
pub(crate) struct Sample {
    /// Unix time, seconds.
    pub t: u64,
    /// Calls per series, in the order of [`Snapshot::series`].
    pub counts: Vec<u32>,
    /// Routed calls by the dialect of the upstream that served them, in the order of
    /// [`SERVED`] (calls answered by the gateway itself or by sid are not routed).
    pub served: [u32; SERVED.len()],
    /// Median latency of the second, ms (a bucket's upper bound: within 60 %).
    pub p50_ms: Option<f64>,
    /// 99th percentile of the second, ms.
    pub p99_ms: Option<f64>,
}

/// The last [`WINDOW_SECS`] seconds.
#[derive(Debug, Serialize)]
pub(crate) struct Snapshot {
    /// The window's last second (Unix time).
    pub now: u64,
    /// Its length.
    pub window_secs: u64,
    /// The series, with their totals over the window.
    pub series: Vec<Series>,
    /// Seconds that saw calls, oldest first; seconds without calls are absent.
    pub samples: Vec<Sample>,
    /// Routed calls in the window by upstream dialect, in the order of [`SERVED`].
    pub served: Vec<Served>,
    /// Median over the window, ms.
    pub p50_ms: Option<f64>,
    /// 99th percentile over the window, ms.
    pub p99_ms: Option<f64>,
}

static SAMPLER: LazyLock<Mutex<Sampler>> = LazyLock::new(Mutex::default);

/// Counts one served call in the process's sampler (process-global, as the metrics recorder);
/// `served`, for a routed call, is the dialect of the upstream that served it.
pub(crate) fn record(
    dialect: &'static str,
    outcome: &str,
    served: Option<Dialect>,
    elapsed: Duration,
) {
    let now = crate::util::clock::unix_second();
    SAMPLER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .record(now, dialect, outcome, served, elapsed);
}

/// The process's last 15 minutes.
pub(crate) fn snapshot() -> Snapshot {
    let now = crate::util::clock::unix_second();
    SAMPLER
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .snapshot(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn buckets_grow_by_sixty_percent_from_100_us() {
        assert_eq!(BOUNDS_NS[0], 100_000);
        assert_eq!(BOUNDS_NS[1], 160_000);
        assert_eq!(bucket_of(Duration::from_micros(100)), 0);
        assert_eq!(bucket_of(Duration::from_nanos(100_001)), 1);
        assert_eq!(bucket_of(Duration::from_micros(160)), 1);
        assert_eq!(bucket_of(Duration::ZERO), 0);
        assert_eq!(bucket_of(Duration::from_secs(3600)), BUCKETS - 1);
        // The last bound is past a minute, so only the pathological share the last bucket.
        assert!(BOUNDS_NS[BUCKETS - 2] > 60_000_000_000);
    }

    #[test]
    fn a_second_costs_208_bytes() {
        // What the module's memory bound says: 900 of these at most.
        assert_eq!(std::mem::size_of::<Slot>(), 208);
    }

    #[test]
    fn counts_per_second_and_series() {
        let mut s = Sampler::default();
        s.record(100, "jsonrpc", "ok", None, MS);
        s.record(100, "jsonrpc", "ok", None, MS);
        s.record(100, "legacy", "error", None, MS);
        s.record(102, "jsonrpc", "ok", None, MS);
        let snap = s.snapshot(102);
        assert_eq!(
            snap.series,
            vec![
                Series {
                    dialect: "jsonrpc",
                    outcome: "ok".into(),
                    total: 3
                },
                Series {
                    dialect: "legacy",
                    outcome: "error".into(),
                    total: 1
                }
            ]
        );
        let seconds: Vec<(u64, Vec<u32>)> = snap
            .samples
            .iter()
            .map(|x| (x.t, x.counts.clone()))
            .collect();
        assert_eq!(seconds, vec![(100, vec![2, 1]), (102, vec![1, 0])]);
    }

    #[test]
    fn the_window_is_fifteen_minutes_and_the_ring_bounded() {
        let mut s = Sampler::default();
        s.record(0, "jsonrpc", "ok", None, MS);
        let first = s.slots.capacity();
        assert!(first >= WINDOW_SECS as usize, "the window is taken at once");
        for t in 1..3 * WINDOW_SECS {
            s.record(t, "jsonrpc", "ok", None, MS);
        }
        assert_eq!(s.slots.capacity(), first, "and never grown");
        assert_eq!(
            s.slots.len() as u64,
            WINDOW_SECS,
            "older seconds are dropped"
        );
        let now = 3 * WINDOW_SECS - 1;
        let snap = s.snapshot(now);
        assert_eq!(snap.samples.len() as u64, WINDOW_SECS);
        assert_eq!(snap.samples[0].t, now - WINDOW_SECS + 1);
        assert_eq!(snap.series[0].total, WINDOW_SECS);
        // Read later, seconds that left the window are not shown even before a new call.
        assert_eq!(s.snapshot(now + 10).samples.len() as u64, WINDOW_SECS - 10);
    }

    #[test]
    fn series_are_bounded_with_an_other() {
        let mut s = Sampler::default();
        let outcomes: Vec<String> = (0..40).map(|i| format!("kind-{i}")).collect();
        for o in &outcomes {
            s.record(5, "jsonrpc", o, None, MS);
        }
        let snap = s.snapshot(5);
        assert_eq!(snap.series.len(), MAX_SERIES);
        let other = snap.series.last().unwrap();
        assert_eq!((other.dialect, other.outcome.as_str()), (OTHER, OTHER));
        assert_eq!(other.total, 40 - (MAX_SERIES as u64 - 1));
        assert_eq!(snap.samples[0].counts.iter().sum::<u32>(), 40);
    }

    #[test]
    fn quantiles_come_from_the_histogram() {
        let mut s = Sampler::default();
        for _ in 0..98 {
            s.record(7, "legacy", "ok", None, Duration::from_micros(900));
        }
        for _ in 0..2 {
            s.record(7, "legacy", "ok", None, Duration::from_millis(200));
        }
        let snap = s.snapshot(7);
        let p50 = snap.p50_ms.unwrap();
        let p99 = snap.p99_ms.unwrap();
        assert!((0.9..0.9 * 1.6).contains(&p50), "p50 {p50}");
        assert!((200.0..200.0 * 1.6).contains(&p99), "p99 {p99}");
        assert_eq!(snap.samples[0].p50_ms, snap.p50_ms);
        assert_eq!(Sampler::default().snapshot(7).p50_ms, None);
    }

    #[test]
    fn routed_calls_are_counted_by_the_serving_upstreams_dialect() {
        let mut s = Sampler::default();
        s.record(20, "legacy", "ok", Some(Dialect::Legacy), MS);
        s.record(20, "legacy", "ok", Some(Dialect::Jsonrpc), MS);
        s.record(20, "jsonrpc", "ok", Some(Dialect::Jsonrpc), MS);
        s.record(20, "jsonrpc", "ok", None, MS);
        s.record(21, "jsonrpc", "ok", Some(Dialect::Legacy), MS);
        let snap = s.snapshot(21);
        let served: Vec<[u32; 2]> = snap.samples.iter().map(|x| x.served).collect();
        assert_eq!(served, vec![[1, 2], [1, 0]]);
        assert_eq!(
            snap.served,
            vec![
                Served {
                    dialect: "legacy",
                    total: 2
                },
                Served {
                    dialect: "jsonrpc",
                    total: 2
                }
            ]
        );
        // A call not routed (sid, built-ins) counts only by its client dialect: 5 calls, 4
        // routed.
        let calls: u64 = snap.series.iter().map(|x| x.total).sum();
        assert_eq!(calls, 5);
    }

    #[test]
    fn a_late_stamp_counts_in_its_own_second() {
        let mut s = Sampler::default();
        s.record(10, "jsonrpc", "ok", None, MS);
        s.record(11, "jsonrpc", "ok", None, MS);
        s.record(10, "jsonrpc", "ok", None, MS);
        let counts: Vec<u32> = s.snapshot(11).samples.iter().map(|x| x.counts[0]).collect();
        assert_eq!(counts, vec![2, 1]);
    }
}
