//! The span exporter: what a request records goes into one bounded queue per gateway, and a
//! task of its own sends the queue in batches to the OTLP collector of `[tracing]`. The call
//! path only decides (one load while tracing is off) and pushes; a collector that is down, slow
//! or refusing is the exporter's problem alone: spans beyond `queue_max` are dropped and
//! counted, export errors logged at most once a minute.

mod export;
pub(crate) mod otlp;

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::config::Tracing;
use crate::http::scope::Recording;
use crate::http::span::{Kind, SpanRecord, SpanSink};
use crate::http::trace::TraceContext;

/// Spans dropped because the queue was full.
pub const SPANS_DROPPED: &str = "wiregate_trace_spans_dropped_total";
/// Spans the collector accepted.
pub const SPANS_EXPORTED: &str = "wiregate_trace_spans_exported_total";
/// Export requests that failed (the collector down, slow or refusing).
pub const EXPORT_FAILURES: &str = "wiregate_trace_export_failures_total";

/// Spans sent in one export request; the exporter wakes early when this many are waiting.
const BATCH: usize = 512;

/// Spans waiting for export, already encoded ([`otlp::put_span`]), in batches of [`BATCH`]:
/// submitting a span is writing it once, exporting a batch one copy into its request.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// The batches, the last one filling.
    pub batches: Vec<Batch>,
    /// Spans in all of them.
    pub spans: usize,
}

/// Spans for one export request.
#[derive(Debug)]
pub(super) struct Batch {
    /// [`otlp::HEAD_ROOM`] bytes for the request's envelope, then `ScopeSpans.spans` fields,
    /// one after the other.
    pub bytes: Vec<u8>,
    /// How many.
    pub spans: usize,
}

/// Room a batch starts with: a call's SERVER or CLIENT span is about 450 bytes encoded.
const BATCH_BYTES: usize = BATCH * 512;

/// One gateway's tracer: its settings (reloadable), its queue, its exporter task.
#[derive(Debug)]
pub struct Tracer {
    on: AtomicBool,
    /// Traces the gateway starts are sampled when their id's low 64 bits are below this.
    threshold: AtomicU64,
    queue_max: AtomicUsize,
    queue: Mutex<Pending>,
    settings: ArcSwap<Tracing>,
    instance: String,
    wake: Arc<tokio::sync::Notify>,
    /// Export rounds done, for [`Tracer::flush`] to wait on.
    rounds: tokio::sync::watch::Sender<u64>,
    dropped: metrics::Counter,
}

impl Tracer {
    /// A tracer for `config`, its spans' resource named `instance`
    /// (`service.instance.id`). The exporter task starts with it when a runtime is running,
    /// and ends with the tracer.
    pub fn new(config: &Tracing, instance: String) -> Arc<Self> {
        // The recorder first, so the counters' handles are live ones.
        crate::telemetry::install();
        let tracer = Arc::new(Tracer {
            on: AtomicBool::new(false),
            threshold: AtomicU64::new(0),
            queue_max: AtomicUsize::new(config.queue_max),
            queue: Mutex::new(Pending::default()),
            settings: ArcSwap::from_pointee(config.clone()),
            instance,
            wake: Arc::new(tokio::sync::Notify::new()),
            rounds: tokio::sync::watch::channel(0).0,
            dropped: metrics::counter!(SPANS_DROPPED),
        });
        tracer.reconfigure(config);
        if tokio::runtime::Handle::try_current().is_ok() {
            crate::util::background::spawn(export::run(
                Arc::downgrade(&tracer),
                tracer.wake.clone(),
            ));
        }
        tracer
    }

    /// Takes a reloaded `[tracing]`: endpoint, headers, ratio, queue bound, interval. Spans
    /// waiting go to the new endpoint.
    pub fn reconfigure(&self, config: &Tracing) {
        let ratio = config.sample_ratio.clamp(0.0, 1.0);
        let threshold = if ratio >= 1.0 {
            u64::MAX
        } else {
            (ratio * u64::MAX as f64) as u64
        };
        self.threshold.store(threshold, Ordering::Relaxed);
        self.queue_max
            .store(config.queue_max.max(1), Ordering::Relaxed);
        self.settings.store(Arc::new(config.clone()));
        self.on.store(config.enabled(), Ordering::Release);
        self.wake.notify_one();
    }

    /// Sends the spans waiting now, within `within`: what a stopping gateway does last, so the
    /// spans of its last calls are not lost with the process.
    pub async fn flush(&self, within: std::time::Duration) {
        if !self.is_on() || self.queue.lock().unwrap_or_else(|e| e.into_inner()).spans == 0 {
            return;
        }
        let mut rounds = self.rounds.subscribe();
        let at = *rounds.borrow_and_update();
        self.wake.notify_one();
        // The round under way may have taken its spans before these arrived: the one after.
        let _ = tokio::time::timeout(within, rounds.wait_for(|r| *r >= at + 2)).await;
    }

    /// Whether spans are recorded.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    /// The sampling decision for a request's trace: a trace the gateway starts (`trace` has no
    /// parent) is sampled by `sample_ratio`, its flag set accordingly and propagated; a
    /// client's flag is followed. With tracing off nothing changes (every trace started here
    /// is marked sampled, as a gateway without a tracer has always sent).
    #[inline]
    pub(crate) fn sample(&self, trace: &mut TraceContext) -> bool {
        if !self.is_on() {
            return false;
        }
        if trace.parent_id == [0; 8] {
            let low = u64::from_be_bytes(trace.trace_id[8..].try_into().expect("eight bytes"));
            let threshold = self.threshold.load(Ordering::Relaxed);
            let sampled = threshold == u64::MAX || low < threshold;
            trace.flags = (trace.flags & !1) | u8::from(sampled);
        }
        trace.sampled()
    }

    /// The SERVER span of a request whose trace is `trace` (its sampling decided here, see
    /// [`Tracer::sample`]), named by the concatenation of `name`, when it is to be recorded.
    pub(crate) fn server(
        self: &Arc<Self>,
        trace: &mut TraceContext,
        name: &[&str],
    ) -> Option<Box<Recording>> {
        if !self.sample(trace) {
            return None;
        }
        let span = SpanRecord::start(trace, trace.parent_id, Kind::Server, name);
        Some(Box::new(Recording {
            sink: self.clone(),
            span: RefCell::new(span),
        }))
    }

    /// How many spans wait for export.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).spans
    }

    /// The spans waiting, taken for export.
    fn take(&self) -> Pending {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl SpanSink for Tracer {
    fn submit(&self, span: SpanRecord) {
        let full = {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            if q.spans >= self.queue_max.load(Ordering::Relaxed) {
                drop(q);
                self.dropped.increment(1);
                return;
            }
            q.spans += 1;
            let batch = match q.batches.last_mut() {
                Some(b) if b.spans < BATCH => b,
                _ => {
                    let room = BATCH_BYTES.min(self.queue_max.load(Ordering::Relaxed) * 512);
                    let mut bytes = Vec::with_capacity(otlp::HEAD_ROOM + room);
                    bytes.resize(otlp::HEAD_ROOM, 0);
                    q.batches.push(Batch { bytes, spans: 0 });
                    q.batches.last_mut().expect("just pushed")
                }
            };
            otlp::put_span(&mut batch.bytes, &span);
            batch.spans += 1;
            batch.spans == BATCH
        };
        span.recycle();
        if full {
            self.wake.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracing(ratio: f64) -> Tracing {
        Tracing {
            otlp_endpoint: "http://127.0.0.1:9".into(),
            sample_ratio: ratio,
            queue_max: 3,
            ..Tracing::default()
        }
    }

    #[test]
    fn off_decides_nothing_and_keeps_the_flag() {
        let t = Tracer::new(&Tracing::default(), "i".into());
        let mut trace = TraceContext::for_parent(None).0;
        assert!(!t.sample(&mut trace));
        assert!(
            trace.sampled(),
            "a trace started here is marked sampled as before"
        );
    }

    #[test]
    fn the_ratio_samples_started_traces_and_a_client_flag_is_followed() {
        let none = Tracer::new(&tracing(0.0), "i".into());
        let all = Tracer::new(&tracing(1.0), "i".into());
        let half = Tracer::new(&tracing(0.5), "i".into());
        let mut kept = 0;
        for _ in 0..2000 {
            let mut t = TraceContext::for_parent(None).0;
            assert!(!none.sample(&mut t));
            assert!(!t.sampled(), "propagated as not sampled");
            let mut t = TraceContext::for_parent(None).0;
            assert!(all.sample(&mut t));
            let mut t = TraceContext::for_parent(None).0;
            kept += usize::from(half.sample(&mut t));
        }
        assert!((800..1200).contains(&kept), "{kept}");
        let (mut sampled, _) = TraceContext::for_parent(Some(
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ));
        assert!(none.sample(&mut sampled), "the client's sampled flag wins");
        let (mut unsampled, _) = TraceContext::for_parent(Some(
            b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
        ));
        assert!(!all.sample(&mut unsampled));
    }

    #[test]
    fn a_full_queue_drops_and_reload_changes_the_ratio() {
        let t = Tracer::new(&tracing(1.0), "i".into());
        let ctx = TraceContext::for_parent(None).0;
        for _ in 0..5 {
            t.submit(SpanRecord::start(&ctx, [0; 8], Kind::Server, &["x"]));
        }
        assert_eq!(t.waiting(), 3);
        t.reconfigure(&tracing(0.0));
        let mut fresh = TraceContext::for_parent(None).0;
        assert!(!t.sample(&mut fresh));
        t.reconfigure(&Tracing::default());
        assert!(!t.is_on());
    }
}
