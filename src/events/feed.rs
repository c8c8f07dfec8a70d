//! The legacy server's domain-event feed: one long GET, NDJSON or SSE by its content type,
//! reconnected with backoff, resumed from the last event id seen.
//!
//! Records go through the [`domain`](crate::events::domain) map into one [`ReplayLog`], which
//! `GET /events` serves with the same SSE writer as the sid bridge. A malformed record is logged
//! and counted, never fatal; an id seen before (a source that ignores the resume point) is
//! dropped, so nothing reaches subscribers twice.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::http::header;
use bytes::Bytes;
use eventsource_stream::Eventsource;
use futures_util::{Stream, StreamExt};
use tokio::sync::watch;

use crate::config::Events as EventsConfig;
use crate::events::domain::{Bridge, Delivery, DomainEvent, EventMap};
use crate::events::records::{Framing, Piece, Records};
use crate::events::ReplayLog;

/// Longest backoff between reconnects.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long connecting to the source may take, and its answer's head once asked: the body is
/// a stream that may stay quiet for as long as nothing happens, so it has no time limit (and
/// no size limit but its records', `events.max_line_bytes`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The running feed.
#[derive(Debug)]
pub struct Feed {
    queue: Arc<ReplayLog>,
    connected: AtomicBool,
    /// Set once by [`Feed::close`]; the reader stops wherever it is.
    closing: watch::Sender<bool>,
}

impl Feed {
    /// Starts reading `cfg.source`.
    pub fn start(cfg: EventsConfig) -> Arc<Self> {
        let queue = Arc::new(
            ReplayLog::new(cfg.replay_events)
                // The feed's records carry their own ids; one without gets `wg-N`, never
                // equal to a record's numeric id.
                .with_id_prefix(ID_LESS_PREFIX)
                .with_max_subscribers(cfg.max_subscribers),
        );
        let feed = Arc::new(Feed {
            queue: queue.clone(),
            connected: AtomicBool::new(false),
            closing: watch::channel(false).0,
        });
        let map = EventMap::new(&cfg.map.status, &cfg.map.artifact, cfg.unmapped);
        let reader = Reader {
            bridge: Bridge::new(map, queue),
            last_id: None,
            seen: RecentIds::new(cfg.replay_events),
            max_line_bytes: cfg.max_line_bytes,
        };
        let mut closing = feed.closing.subscribe();
        let running = feed.clone();
        crate::util::background::spawn(async move {
            tokio::select! {
                _ = closing.wait_for(|c| *c) => {}
                _ = reader.run(cfg, running) => {}
            }
        });
        feed
    }

    /// A feed whose events something else pushes into `queue` (the replicas' shared stream,
    /// [`cluster::feed::start`](crate::cluster::feed::start)).
    pub(crate) fn fed(queue: Arc<ReplayLog>) -> Arc<Self> {
        Arc::new(Feed {
            queue,
            connected: AtomicBool::new(false),
            closing: watch::channel(false).0,
        })
    }

    /// The translated events.
    pub fn queue(&self) -> &Arc<ReplayLog> {
        &self.queue
    }

    /// Whether the source is connected now.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    /// Stops reading and ends every subscriber's stream.
    pub fn close(&self) {
        self.closing.send_replace(true);
        self.queue.close();
    }
}

/// The ids of the last `cap` records, for dropping repeats. Public for the fuzz targets (`fuzz/`).
#[derive(Debug)]
pub struct RecentIds {
    set: HashSet<String>,
    order: VecDeque<String>,
    cap: usize,
}

impl RecentIds {
    /// Remembers the last `cap` ids (at least one).
    pub fn new(cap: usize) -> Self {
        RecentIds {
            set: HashSet::new(),
            order: VecDeque::new(),
            cap: cap.max(1),
        }
    }

    /// `false` when `id` was seen already.
    fn insert(&mut self, id: &str) -> bool {
        if self.set.contains(id) {
            return false;
        }
        if self.order.len() == self.cap {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
        self.set.insert(id.to_owned());
        self.order.push_back(id.to_owned());
        true
    }
}

/// What the gateway's ids for records that came without an `event_id` start with.
pub const ID_LESS_PREFIX: &str = "wg-";

/// Reads the feed's records into the bridge. Public for the fuzz targets (`fuzz/`).
pub struct Reader {
    /// Where the records go.
    pub bridge: Bridge,
    /// The last event id seen, the resume point.
    pub last_id: Option<String>,
    /// Recent ids, for dropping repeats.
    pub seen: RecentIds,
    /// `events.max_line_bytes`: the longest record read (an NDJSON line, an SSE event); longer
    /// ones are skipped ([`records`](crate::events::records)).
    pub max_line_bytes: usize,
}

impl Reader {
    /// A reader of `cfg.source` into `queue`, resuming after `last_id`.
    pub(crate) fn into(cfg: &EventsConfig, queue: Arc<ReplayLog>, last_id: Option<String>) -> Self {
        let map = EventMap::new(&cfg.map.status, &cfg.map.artifact, cfg.unmapped);
        Reader {
            bridge: Bridge::new(map, queue),
            last_id,
            seen: RecentIds::new(cfg.replay_events),
            max_line_bytes: cfg.max_line_bytes,
        }
    }

    /// Reads, reconnecting for ever; [`Feed::close`] drops this future wherever it waits.
    pub(crate) async fn run(mut self, cfg: EventsConfig, feed: Arc<Feed>) {
        let tls = cfg
            .tls()
            .expect("events.source's TLS settings are validated at start");
        let opts = crate::outbound::Options::within(CONNECT_TIMEOUT, 0).with_tls(tls);
        let source = crate::util::redact::without_userinfo(&cfg.source);
        let pool = crate::outbound::Pool::new(&source, &opts, 0)
            .expect("the source URL is validated at start");
        let pool = Arc::new(pool);
        let first = Duration::from_millis(cfg.reconnect_ms);
        let mut backoff = first;
        let shown = crate::util::redact::url(&cfg.source);
        loop {
            let target = resume_target(pool.path(), self.last_id.as_deref());
            let mut headers = vec![("accept", "application/x-ndjson, text/event-stream;q=0.9")];
            // An id that is no header value (a control character) still resumes by `?after=`.
            if let Some(id) = self.last_id.as_deref() {
                headers.push(("last-event-id", id));
            }
            let req = crate::outbound::Request {
                target: Some(&target),
                ..crate::outbound::Request::get(&headers)
            };
            match pool.open(&req).await {
                Ok(resp) if resp.status.is_success() => {
                    feed.connected.store(true, Ordering::Relaxed);
                    backoff = first;
                    let sse = resp
                        .headers
                        .get(header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok())
                        .is_some_and(|ct| ct.starts_with("text/event-stream"));
                    self.consume(resp.body, sse).await;
                    feed.connected.store(false, Ordering::Relaxed);
                    tracing::warn!(source = %shown, "the event feed ended; reconnecting");
                }
                Ok(resp) => {
                    tracing::warn!(source = %shown, status = %resp.status, "the event feed refused")
                }
                Err(e) => {
                    tracing::warn!(source = %shown, error = %e, "cannot reach the event feed")
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Reads one connection's body, SSE or NDJSON, until it ends or fails. The body is cut into
    /// records of at most `max_line_bytes` first ([`Records`]), so neither the SSE parser nor
    /// the NDJSON reader ever holds more; a longer record is skipped, counted and logged.
    pub async fn consume<S, E>(&mut self, body: S, sse: bool)
    where
        S: Stream<Item = Result<Bytes, E>> + Unpin,
        E: std::fmt::Display,
    {
        let framing = if sse { Framing::Sse } else { Framing::Ndjson };
        let records = Box::pin(bounded(without_bom(body), framing, self.max_line_bytes));
        if sse {
            let mut events = records.eventsource();
            while let Some(Ok(ev)) = events.next().await {
                if !ev.data.trim().is_empty() {
                    self.record(&ev.data, Some(ev.id.as_str()).filter(|s| !s.is_empty()));
                }
            }
        } else {
            let mut lines = records;
            while let Some(Ok(line)) = lines.next().await {
                let text = String::from_utf8_lossy(&line);
                if !text.trim().is_empty() {
                    self.record(text.trim(), None);
                }
            }
        }
    }

    fn record(&mut self, text: &str, sse_id: Option<&str>) {
        let mut ev: DomainEvent = match serde_json::from_str(text) {
            Ok(ev) => ev,
            Err(e) => {
                metrics::counter!("wiregate_events_malformed_total").increment(1);
                tracing::warn!(error = %e, "a malformed record on the event feed; skipped");
                return;
            }
        };
        if ev.event_id.is_none() {
            ev.event_id = sse_id.map(serde_json::Value::from);
        }
        if let Some(id) = ev.id_text() {
            if !self.seen.insert(&id) {
                metrics::counter!("wiregate_events_repeated_total").increment(1);
                return;
            }
            self.last_id = Some(id);
        }
        let outcome = match self.bridge.handle(&ev) {
            Delivery::Queued => "queued",
            Delivery::Unmapped => "unmapped",
            Delivery::QueueClosed => "closed",
        };
        metrics::counter!("wiregate_events_total", "outcome" => outcome).increment(1);
    }
}

/// The body's records ([`Records`]): each whole one as one item, each too long one counted
/// (`wiregate_events_feed_lines_skipped_total`) and logged without its bytes.
fn bounded<S, E>(body: S, framing: Framing, max: usize) -> impl Stream<Item = Result<Bytes, E>>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    async_stream::stream! {
        let mut body = std::pin::pin!(body);
        let mut records = Records::new(framing, max);
        let mut pieces = Vec::new();
        while let Some(item) = body.next().await {
            match item {
                Ok(chunk) => {
                    records.push(chunk, &mut |p| pieces.push(p));
                    for p in pieces.drain(..) {
                        match p {
                            Piece::Record(r) => yield Ok(r),
                            Piece::TooLong { bytes } => skipped(bytes, max),
                        }
                    }
                }
                Err(e) => {
                    yield Err(e);
                    return;
                }
            }
        }
        records.finish(&mut |p| {
            if let Piece::TooLong { bytes } = p {
                skipped(bytes, max);
            }
        });
    }
}

/// A record of the feed longer than `events.max_line_bytes` was dropped.
fn skipped(bytes: u64, max: usize) {
    metrics::counter!("wiregate_events_feed_lines_skipped_total").increment(1);
    tracing::warn!(
        bytes,
        max_line_bytes = max,
        "a record of the event feed longer than events.max_line_bytes; skipped"
    );
}

/// The body without a leading UTF-8 byte-order mark, even one split across chunks: SSE allows one
/// (and NDJSON writers add one), and eventsource-stream 0.2 panics on it
/// (jpopesculian/eventsource-stream#10), which would end the feed reader for good.
fn without_bom<S, E>(mut body: S) -> impl Stream<Item = Result<Bytes, E>>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
{
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    async_stream::stream! {
        let mut head = bytes::BytesMut::new();
        let mut checking = true;
        while let Some(item) = body.next().await {
            match item {
                Ok(chunk) if checking => {
                    head.extend_from_slice(&chunk);
                    if head.len() < BOM.len() && BOM.starts_with(&head) {
                        continue;
                    }
                    checking = false;
                    let mut rest = std::mem::take(&mut head).freeze();
                    if rest.starts_with(BOM) {
                        rest = rest.slice(BOM.len()..);
                    }
                    if !rest.is_empty() {
                        yield Ok(rest);
                    }
                }
                other => yield other,
            }
        }
    }
}

/// The source's request target with `after=<id>` added, when there is a resume point.
fn resume_target(path: &str, last_id: Option<&str>) -> String {
    let Some(id) = last_id else {
        return path.to_owned();
    };
    let sep = if path.contains('?') { '&' } else { '?' };
    let id: String = id
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    format!("{path}{sep}after={id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resume_point_is_a_query_parameter() {
        assert_eq!(resume_target("/e", None), "/e");
        assert_eq!(resume_target("/e", Some("7")), "/e?after=7");
        assert_eq!(resume_target("/e?x=1", Some("a b")), "/e?x=1&after=a%20b");
    }

    #[test]
    fn repeats_are_recognised_within_the_window() {
        let mut r = RecentIds::new(2);
        assert!(r.insert("1"));
        assert!(!r.insert("1"));
        assert!(r.insert("2"));
        assert!(r.insert("3"));
        assert!(r.insert("1"), "forgotten beyond the window");
    }
}
