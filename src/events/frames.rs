//! The one SSE writer: a queue subscription → `text/event-stream` bytes.
//!
//! It serves the sid bridge and the domain-event feed alike: a `retry:` line first, an
//! `event: gap` frame when the resume point is no longer retained, then every event from its
//! cursor on, with `: keepalive` comments while there is none. A subscriber is cut off (it
//! resumes with `Last-Event-ID`) only when events it still needs have left the replay log, so it
//! never slows the producer or other subscribers, and one that keeps up receives every event.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use bytes::BytesMut;
use futures_util::Stream;

/// Most bytes coalesced into one chunk of the response body.
const BATCH_BYTES: usize = 64 * 1024;

use crate::events::{Read, Stored, Subscription};
use crate::model::task::TaskState;
use crate::wire::sse;

/// Which events a stream carries, and when it ends.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only this task's events (`plan_id`).
    pub task: Option<String>,
    /// End after the matching task's final event.
    pub until_final: bool,
    /// End also when the task stops to wait for input (A2A's interrupted state).
    pub until_input_required: bool,
    /// With `[cluster]`, the owner's mark of what the shared store holds (the last sequence
    /// written to Redis): the event that ends the stream is written only once the store has
    /// it, so a client that saw its task end reads it ended on every replica. Waits at most
    /// [`STORED_WAIT`]; `None` for a stream read from the store (a mirror) or without one.
    pub stored: Option<tokio::sync::watch::Receiver<u64>>,
}

/// Longest the event ending a stream waits for the shared store (Redis down: written anyway).
pub(crate) const STORED_WAIT: Duration = Duration::from_secs(2);

impl Filter {
    fn admits(&self, s: &Stored) -> bool {
        match &self.task {
            Some(t) => s.event.plan_id.as_deref() == Some(t.as_str()),
            None => true,
        }
    }

    fn ends_with(&self, s: &Stored) -> bool {
        (self.until_final && s.event.is_final())
            || (self.until_input_required
                && s.event.data.state() == Some(TaskState::InputRequired.as_str()))
    }
}

/// Why a stream ended before its filter's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cut {
    /// Events the subscriber still needed left the replay log.
    Lagged,
    /// The queue closed (the context or the gateway is shutting down).
    Closed,
}

/// How a stream writes its events: the queue's shared frames, or a per-request encoding.
pub(crate) trait Encode: Send + 'static {
    /// The frame telling the client that events before the backlog were lost, if it has one.
    fn gap(&mut self) -> Option<Bytes>;
    /// Appends one admitted event's frame.
    fn event(&mut self, s: &Stored, out: &mut BytesMut);
    /// The frame telling the client why the stream ends early, if it has one.
    fn cut(&mut self, why: Cut) -> Option<Bytes>;
}

/// The seed dialect's encoding: each event's frame as the queue encoded it once, shared by
/// every subscriber.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Shared;

impl Encode for Shared {
    fn gap(&mut self) -> Option<Bytes> {
        Some(sse::frame(
            Some("gap"),
            None,
            r#"{"reason":"the requested event is no longer retained; replaying what is"}"#,
        ))
    }

    fn event(&mut self, s: &Stored, out: &mut BytesMut) {
        out.extend_from_slice(s.frame());
    }

    fn cut(&mut self, _: Cut) -> Option<Bytes> {
        None
    }
}

/// Stream timing.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Interval of `: keepalive` comments.
    pub keepalive: Duration,
    /// The `retry:` advice in milliseconds.
    pub retry_ms: u64,
}

/// Most events taken from the log at once (under its read lock), so a burst is written in
/// large chunks while the lock is held only briefly.
const READ_EVENTS: usize = 512;

/// Encodes a subscription as SSE bytes: `prelude` first (when given), then each admitted
/// event as `enc` writes it.
pub(crate) fn frames<E: Encode>(
    sub: Subscription,
    mut filter: Filter,
    timing: Timing,
    prelude: Option<Bytes>,
    mut enc: E,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    async_stream::stream! {
        let Subscription { gap, mut cursor } = sub;
        yield Ok(sse::retry(timing.retry_ms));
        if let Some(p) = prelude {
            yield Ok(p);
        }
        if gap {
            if let Some(g) = enc.gap() {
                yield Ok(g);
            }
        }
        // Frames are coalesced into one chunk (up to BATCH_BYTES) whenever several are ready,
        // so a burst costs one write, not one per event.
        let mut out = BytesMut::new();
        let mut batch: Vec<Arc<Stored>> = Vec::new();
        let mut tick = keepalive_ticks(timing.keepalive);
        loop {
            batch.clear();
            let read = cursor.read(&mut batch, READ_EVENTS);
            if matches!(read, Read::Empty) {
                // Written what there was; wait for more, or say we are alive. The log wakes its
                // waiters at most once a tick, so a trickle arrives here a few events at a time
                // and shares one write (`events::tick`).
                if !out.is_empty() {
                    yield Ok(std::mem::take(&mut out).freeze());
                }
                tokio::select! {
                    _ = cursor.changed() => {}
                    _ = tick.tick() => {
                        yield Ok(sse::keepalive());
                        continue;
                    }
                }
                shrink(&mut batch);
                continue;
            }
            if let Some(why) = cut_by(read) {
                if !out.is_empty() {
                    yield Ok(std::mem::take(&mut out).freeze());
                }
                if let Some(frame) = enc.cut(why) {
                    yield Ok(frame);
                }
                return;
            }
            let hint = batch.first().map_or(0, |s| s.frame_len_hint());
            out.reserve(room(hint, batch.len()));
            let mut end = false;
            let mut end_seq = 0;
            for (i, s) in batch.iter().enumerate() {
                if !filter.admits(s) {
                    continue;
                }
                enc.event(s, &mut out);
                end = filter.ends_with(s);
                if end {
                    end_seq = s.seq;
                    break;
                }
                if out.len() >= BATCH_BYTES {
                    yield Ok(std::mem::take(&mut out).freeze());
                    reserve_rest(&mut out, hint, batch.len() - i - 1);
                }
            }
            if end {
                if let Some(rx) = filter.stored.as_mut() {
                    let _ = tokio::time::timeout(STORED_WAIT, rx.wait_for(|s| *s >= end_seq)).await;
                }
                yield Ok(std::mem::take(&mut out).freeze());
                return;
            }
        }
    }
}

/// The ticks of `: keepalive` comments, the first `period` from now; a late tick delays the
/// ones after it rather than bringing a burst of those missed.
#[inline]
fn keepalive_ticks(period: Duration) -> tokio::time::Interval {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

/// Why a read of the log ends the stream, if it does (`None` when it has events to write).
#[inline]
fn cut_by(read: Read) -> Option<Cut> {
    match read {
        Read::Events(_) | Read::Empty => None,
        Read::Lagged(missed) => {
            tracing::warn!(
                missed,
                "SSE subscriber fell behind the replay log; cutting it off"
            );
            metrics::counter!("wiregate_sse_subscribers_cut_total").increment(1);
            Some(Cut::Lagged)
        }
        Read::Closed => Some(Cut::Closed),
    }
}

/// Frees what a burst grew, once idle: 10 000 idle subscribers add up.
#[inline]
fn shrink(batch: &mut Vec<Arc<Stored>>) {
    if batch.capacity() > 64 {
        *batch = Vec::new();
    }
}

/// Room for a batch of `left` events up front (one frame's size, `hint`, an event, and one
/// frame more: a chunk ends at the first frame that reaches [`BATCH_BYTES`]), so a burst is
/// gathered without growing (and copying) the buffer frame by frame; again for what is left
/// after a chunk goes ([`reserve_rest`]).
#[inline(always)]
fn room(hint: usize, left: usize) -> usize {
    (left * hint).min(BATCH_BYTES) + 2 * hint
}

/// Room for the `left` events of the batch still to write once a chunk went ([`room`]).
#[inline(always)]
fn reserve_rest(out: &mut BytesMut, hint: usize, left: usize) {
    if left > 0 {
        out.reserve(room(hint, left));
    }
}

/// The headers of every SSE stream's answer: its content type, and no cache or proxy buffer
/// holding its events back. One list for a response object ([`response`]) and the HTTP/1
/// loop's head written by hand alike.
pub(crate) const STREAM_HEADERS: [(HeaderName, HeaderValue); 3] = [
    (
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    ),
    (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    (
        HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    ),
];

/// An HTTP response carrying an SSE stream, with the headers proxies need to pass it through.
pub(crate) fn response(
    body: impl Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
) -> Response {
    let mut resp = (StatusCode::OK, Body::from_stream(body)).into_response();
    let h = resp.headers_mut();
    for (name, value) in STREAM_HEADERS {
        h.insert(name, value);
    }
    resp
}
