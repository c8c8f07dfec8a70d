//! One endpoint of an upstream: a keep-alive pool, a pipelining lane where enabled, the TLS
//! client of an `https://` endpoint, and the exchange of one try on them.
//!
//! An exchange runs in the calling task on a connection taken from the pool ([`h1`] speaks the
//! HTTP/1.1 of it), so a proxied call wakes no other task and crosses no channel (measured: see
//! docs/performance.md). Idle connections sit in a LIFO stack; one that the endpoint closed
//! meanwhile is found when it is checked out, and a request that could not be written is sent
//! once more on a fresh connection. The pool is kept per worker thread
//! ([`crate::util::worker`]): a connection is reused on the thread whose runtime opened it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, StatusCode, Uri};
use bytes::Bytes;
use tokio::net::TcpStream;

pub(crate) use super::health::Outcome;
use super::{h1, health, pipeline, stream};
use crate::config::Upstream;
use crate::model::error::GatewayError;
use crate::util::timer::until;

/// Idle connections kept per endpoint and worker.
const MAX_IDLE: usize = 256;
/// An idle connection older than this is closed rather than reused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// One idle upstream connection.
struct Pooled {
    conn: h1::Conn,
    /// When it is too old to reuse ([`IDLE_TIMEOUT`] after the call that used it last began:
    /// that call's clock reading serves, so a call reads the clock once for its timer and
    /// not again for the pool).
    idle_until: Instant,
    /// The timer of the calls made on it (see [`UpstreamClient::post`]), kept with it.
    ///
    /// [`UpstreamClient::post`]: super::UpstreamClient::post
    timer: Option<Timer>,
}

/// A call's timer, reused by the calls of one pooled connection: a `tokio::time::timeout` per
/// call registers, polls and drops a timer entry each time (docs/performance.md).
pub(crate) type Timer = std::pin::Pin<Box<tokio::time::Sleep>>;

impl Pooled {
    /// Still usable at `now`: not idle for too long, and not closed by the upstream meanwhile.
    fn is_reusable(&self, now: Instant) -> bool {
        now < self.idle_until && self.conn.is_open()
    }
}

/// One endpoint of an upstream: its keep-alive pool, its pipelining lane and its TLS client.
pub(crate) struct Endpoint {
    /// The endpoint's URL as configured.
    pub(crate) url: String,
    /// Its health, kept across reloads and shared with the shadow's copy of the upstream.
    pub(crate) state: Arc<health::State>,
    /// `host:port` to connect to.
    addr: String,
    /// The addresses to connect to instead of resolving `addr`: for a destination a caller
    /// chose, the addresses its destination policy checked ([`Endpoint::pinned_to`]).
    pinned: Option<Arc<[SocketAddr]>>,
    /// The `Host` header.
    host: String,
    /// The host (an IPv6 address without its brackets) and port connected to, as a span's
    /// `server.address` and `server.port` name them.
    peer: (String, u16),
    /// The request target (origin form).
    path: String,
    /// Idle connections, one stack per worker slot ([`crate::util::worker::slot`]).
    idle: Arc<[Mutex<Vec<Pooled>>]>,
    max_body: usize,
    /// `pipeline` of its upstream.
    pipeline: usize,
    /// The pipelined connections, when the upstream allows pipelining (`pipeline > 0`).
    pipe: Option<Arc<pipeline::Pipeline>>,
    /// For an `https://` upstream: its TLS client and the name its certificate must show.
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// What an upstream answered.
#[derive(Debug)]
pub struct Answer {
    /// Its HTTP status.
    pub status: StatusCode,
    /// Its body, read whole (bounded).
    pub body: Bytes,
}

/// How one try of a call failed.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The error the caller gets when the call is not tried again.
    pub(crate) error: GatewayError,
    /// Whether any byte of the request may have reached the endpoint (so whether the upstream
    /// may have acted on it).
    pub(crate) sent: bool,
    /// How the metrics and the outlier detection count it.
    pub(crate) outcome: Outcome,
}

impl Endpoint {
    /// The endpoint at `url` (validated) of `config`, with the upstream's TLS client (one for
    /// all its `https://` endpoints, read from its files once).
    pub(crate) fn new(
        config: &Upstream,
        url: &str,
        max_body: usize,
        state: Arc<health::State>,
        tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> Self {
        let uri: Uri = url.parse().expect("upstream URLs are validated at start");
        let authority = uri.authority().expect("upstream URLs have a host").clone();
        let https = uri.scheme_str() == Some("https");
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let host = authority.host().trim_matches(['[', ']']);
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let tls = tls.filter(|_| https).map(|cfg| {
            let name = rustls::pki_types::ServerName::try_from(host.to_owned())
                .expect("a URI host is a server name");
            (tokio_rustls::TlsConnector::from(cfg.clone()), name)
        });
        let addr = format!("{host}:{port}");
        let pipe = (config.pipeline > 0 && tls.is_none()).then(|| {
            Arc::new(pipeline::Pipeline::new(
                addr.clone(),
                config.pipeline,
                max_body,
            ))
        });
        Endpoint {
            url: url.to_owned(),
            state,
            tls,
            pipe,
            addr,
            pinned: None,
            host: self::authority(url).to_owned(),
            peer: (host.to_owned(), port),
            path,
            idle: (0..crate::util::worker::slots())
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            pipeline: config.pipeline,
            max_body,
        }
    }

    /// The endpoint connecting to `addrs` (tried in order) and never resolving its host: what
    /// was checked is what is dialled. TLS still sends and verifies the URL's host name. No
    /// pipelining lane: its connections would dial the host by name.
    pub(crate) fn pinned_to(mut self, addrs: Arc<[SocketAddr]>) -> Self {
        self.pinned = Some(addrs);
        self.pipe = None;
        self
    }

    /// POSTs a JSON body, within the upstream's timeout, and reads the whole answer. An
    /// `authorization` that is not a valid header value is not sent. The body is copied into
    /// the request's buffer, so it is borrowed (a `Bytes` of a fresh `Vec` cost an allocation
    /// of its own). A failure says whether the request may have reached the endpoint.
    /// `identity` is the caller's header (`auth.identity_header`), sent when a valid value.
    /// `span` is the try's CLIENT span, when it records one: its id goes in the `traceparent`.
    pub(crate) async fn post(
        &self,
        config: &Upstream,
        body: &[u8],
        authorization: Option<&str>,
        identity: Option<(&str, &str)>,
        span: Option<[u8; 8]>,
    ) -> Result<Answer, Failure> {
        let (traceparent, tracestate) = match crate::http::scope::upstream_trace() {
            Some((t, state)) => {
                let t = span.map_or(t, |id| t.with_span(id));
                (Some(t.traceparent_bytes()), state)
            }
            None => (None, None),
        };
        let head = h1::Head {
            path: &self.path,
            host: &self.host,
            authorization: authorization.filter(|a| h1::is_header_value(a)),
            traceparent: traceparent.as_ref(),
            tracestate: tracestate.as_ref().map(HeaderValue::as_bytes),
            identity: identity.filter(|(_, v)| h1::is_header_value(v)),
        };
        let now = tokio::time::Instant::now();
        let due = now + config.timeout();
        if let Some(pipe) = &self.pipe {
            let mut request = Vec::new();
            h1::lay_out(&mut request, &head, body);
            if let Some(reply) = pipe.submit(request, due) {
                return match tokio::time::timeout_at(due, reply).await {
                    Ok(Ok(outcome)) => self.answered(config, outcome),
                    Ok(Err(_)) => Err(self.failed(
                        config,
                        "the pipelined connection's task ended",
                        true,
                        Outcome::Failed,
                    )),
                    Err(_) => Err(self.timed_out(config, true)),
                };
            }
            // Every lane full: the pooled path, below.
        }
        // A pooled connection may turn out dead only when used; the request then could not be
        // written, and goes once more on a fresh connection. The call is timed by the pooled
        // connection's timer when there is one.
        let mut timer = None;
        let now = now.into_std();
        if let Some((conn, kept)) = self.checkout_timed(now) {
            let mut t = kept.unwrap_or_else(|| Box::pin(tokio::time::sleep_until(due)));
            let done = tokio::select! {
                biased;
                done = self.attempt(conn, &head, body) => done,
                () = until(t.as_mut(), due) => return Err(self.timed_out(config, true)),
            };
            timer = Some(t);
            match done {
                (Err(h1::Error::NotSent(_)), _) => {}
                (answer, conn) => {
                    if let Some(conn) = conn {
                        self.checkin_timed(conn, timer, now);
                    }
                    return self.answered(config, answer);
                }
            }
        }
        // Boxed: the connect (a TLS handshake for `https://`) is the rare step, and held inline
        // it would make every exchange's future, and every one around it, larger. `connected`
        // tells a timeout while connecting (nothing sent) from one while waiting for the answer.
        let connected = std::sync::atomic::AtomicBool::new(false);
        let fresh = async {
            let fresh = Box::pin(self.connect()).await?;
            connected.store(true, std::sync::atomic::Ordering::Relaxed);
            Ok(self.attempt(fresh, &head, body).await)
        };
        let (answer, conn) = match tokio::time::timeout_at(due, fresh).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => (Err(e), None),
            Err(_) => return Err(self.timed_out(config, connected.into_inner())),
        };
        if let Some(conn) = conn {
            self.checkin_timed(conn, timer, now);
        }
        self.answered(config, answer)
    }

    /// An exchange's outcome as the caller's.
    fn answered(
        &self,
        config: &Upstream,
        answer: Result<h1::Answer, h1::Error>,
    ) -> Result<Answer, Failure> {
        match answer {
            Ok(answer) => Ok(Answer {
                status: answer.status,
                body: answer.body,
            }),
            Err(h1::Error::TooLarge { status, limit }) => Err(Failure {
                error: bad_envelope(config, status, format!("answer exceeds {limit} bytes")),
                sent: true,
                outcome: Outcome::Failed,
            }),
            // The address stays in the log (`Failure::log`); the caller is told what happened.
            Err(h1::Error::Connect { source, .. }) => Err(self.failed(
                config,
                format!("connection failed: {source}"),
                false,
                Outcome::Refused,
            )),
            Err(e @ h1::Error::NotSent(_)) => Err(self.failed(config, e, false, Outcome::Refused)),
            Err(e) => Err(self.failed(config, e, true, Outcome::Failed)),
        }
    }

    fn timed_out(&self, config: &Upstream, sent: bool) -> Failure {
        Failure {
            error: GatewayError::UpstreamTimeout {
                upstream: config.name.clone(),
                timeout_ms: config.timeout_ms,
            },
            sent,
            outcome: Outcome::TimedOut,
        }
    }

    fn failed(
        &self,
        config: &Upstream,
        e: impl std::fmt::Display,
        sent: bool,
        outcome: Outcome,
    ) -> Failure {
        let detail = e.to_string();
        Failure {
            error: GatewayError::UpstreamUnreachable {
                upstream: config.name.clone(),
                detail: detail.chars().take(300).collect(),
            },
            sent,
            outcome,
        }
    }

    /// One exchange on one connection, and the connection when it may go back to the pool.
    async fn attempt(
        &self,
        mut conn: h1::Conn,
        head: &h1::Head<'_>,
        body: &[u8],
    ) -> (Result<h1::Answer, h1::Error>, Option<h1::Conn>) {
        match conn.exchange(head, body, self.max_body).await {
            Ok(answer) if answer.reusable => (Ok(answer), Some(conn)),
            other => (other, None),
        }
    }

    /// The calling worker's stack of idle connections.
    #[inline]
    fn idle_here(&self) -> std::sync::MutexGuard<'_, Vec<Pooled>> {
        self.idle[crate::util::worker::slot()]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// An idle connection still usable, the most recently used first.
    pub(crate) fn checkout(&self) -> Option<h1::Conn> {
        self.checkout_timed(Instant::now()).map(|(conn, _)| conn)
    }

    /// [`checkout`](Self::checkout) at `now` (the call's own reading of the clock), with the
    /// connection's timer.
    pub(crate) fn checkout_timed(&self, now: Instant) -> Option<(h1::Conn, Option<Timer>)> {
        let mut idle = self.idle_here();
        while let Some(p) = idle.pop() {
            if p.is_reusable(now) {
                return Some((p.conn, p.timer));
            }
        }
        None
    }

    /// Keeps a connection whose last answer is complete for the next call.
    pub(crate) fn checkin(&self, conn: h1::Conn) {
        self.checkin_timed(conn, None, Instant::now());
    }

    /// [`checkin`](Self::checkin), with the timer of the calls made on it; `began` is when
    /// the call that used it began (the clock read for its timer), from which its idle time
    /// is counted.
    pub(crate) fn checkin_timed(&self, conn: h1::Conn, timer: Option<Timer>, began: Instant) {
        let mut idle = self.idle_here();
        if idle.len() < MAX_IDLE {
            idle.push(Pooled {
                conn,
                idle_until: began + IDLE_TIMEOUT,
                timer,
            });
        }
    }

    /// A new connection: TCP, then the TLS handshake for an `https://` upstream (SNI and the
    /// verified name are the URL's host).
    pub(crate) async fn connect(&self) -> Result<h1::Conn, h1::Error> {
        let connect_error = |source| h1::Error::Connect {
            addr: self.addr.clone(),
            source,
        };
        let tcp = self.dial().await.map_err(connect_error)?;
        let Some((connector, name)) = &self.tls else {
            return Ok(h1::Conn::new(tcp));
        };
        let _ = tcp.set_nodelay(true);
        let tls = connector
            .connect(name.clone(), tcp)
            .await
            .map_err(connect_error)?;
        Ok(h1::Conn::over(stream::Stream::Tls(Box::new(tls))))
    }

    /// A TCP connection to the pinned addresses, or to the host as resolved now.
    async fn dial(&self) -> std::io::Result<TcpStream> {
        match &self.pinned {
            Some(addrs) => TcpStream::connect(&addrs[..]).await,
            None => TcpStream::connect(&self.addr).await,
        }
    }

    /// Whether a TCP connection to the upstream can be opened now.
    pub(crate) async fn reachable(&self) -> bool {
        matches!(
            tokio::time::timeout(Duration::from_secs(1), self.dial()).await,
            Ok(Ok(_))
        )
    }

    /// Counts a call in flight on it while the guard lives.
    #[inline]
    pub(crate) fn in_flight(&self) -> health::InFlight<'_> {
        health::InFlight::begin(&self.state)
    }

    /// The path its calls are POSTed to.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// The host and port connected to.
    pub(crate) fn peer(&self) -> (&str, u16) {
        (&self.peer.0, self.peer.1)
    }

    /// Its `host:port` (the `Host` it gets): how logs, metrics and `/readyz` name it.
    pub(crate) fn label(&self) -> &str {
        &self.host
    }

    /// Whether its pool can serve `config` (an upstream reloaded): the settings a connection
    /// is made with are the same. An `https://` endpoint never does: a reload reads the TLS
    /// files again (a rotated certificate applies).
    pub(crate) fn fits(&self, config: &Upstream, max_body: usize) -> bool {
        self.tls.is_none()
            && self.pinned.is_none()
            && self.pipeline == config.pipeline
            && self.max_body == max_body
    }
}

/// The authority (`host:port`, as the URL gives it, without credentials) of a validated
/// endpoint URL: its `Host` header and its name in logs, metrics and `/readyz`.
pub(crate) fn authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    authority.rsplit_once('@').map_or(authority, |(_, a)| a)
}

/// The error for an answer that is not a valid envelope of the upstream's dialect.
pub(crate) fn bad_envelope(
    config: &Upstream,
    status: StatusCode,
    detail: impl Into<String>,
) -> GatewayError {
    GatewayError::UpstreamBadEnvelope {
        upstream: config.name.clone(),
        dialect: config.dialect.as_str(),
        status: status.as_u16(),
        detail: detail.into(),
    }
}
