//! Upstream clients: one keep-alive connection pool per upstream, timeouts and size limits.
//!
//! This module owns the sockets to upstreams and nothing else; what goes into a request body and
//! what comes out of an answer is decided in `wire::translate`.
//!
//! An exchange runs in the calling task on a connection taken from the pool ([`h1`] speaks the
//! HTTP/1.1 of it), so a proxied call wakes no other task and crosses no channel (measured: see
//! README, Performance). Idle connections sit in a LIFO stack; one that the upstream closed
//! meanwhile is found when it is checked out, and a request that could not be written is sent
//! once more on a fresh connection.

/// The HTTP/1.1 exchange; public for the fuzz targets (`fuzz/`).
pub(crate) mod call;
pub mod h1;
mod pipeline;
pub(crate) mod router;
pub(crate) mod stream;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, StatusCode, Uri};
use bytes::Bytes;
use tokio::net::TcpStream;

use crate::config::{Dialect, Upstream};
use crate::model::error::GatewayError;

/// Idle connections kept per upstream.
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
    timer: Option<Timer>,
}

/// A call's timer, reused by the calls of one pooled connection: a `tokio::time::timeout` per
/// call registered, polled and dropped a timer entry each time (README, Performance).
pub(crate) type Timer = std::pin::Pin<Box<tokio::time::Sleep>>;

/// Waits until `due` on `timer`, which may be set earlier (for a call before) and is then
/// moved on; it is moved only when it must fire sooner, so most calls leave the timer wheel
/// alone.
pub(crate) async fn until(timer: &mut Timer, due: tokio::time::Instant) {
    if timer.deadline() > due {
        timer.as_mut().reset(due);
    }
    loop {
        timer.as_mut().await;
        if tokio::time::Instant::now() >= due {
            return;
        }
        timer.as_mut().reset(due);
    }
}

impl Pooled {
    /// Still usable at `now`: not idle for too long, and not closed by the upstream meanwhile.
    fn is_reusable(&self, now: Instant) -> bool {
        now < self.idle_until && self.conn.is_open()
    }
}

/// A pooled HTTP/1.1 client for one upstream.
#[derive(Clone)]
pub struct UpstreamClient {
    /// The upstream's configuration.
    pub config: Upstream,
    /// `host:port` to connect to.
    addr: String,
    /// The `Host` header.
    host: String,
    /// The request target (origin form).
    path: String,
    idle: Arc<Mutex<Vec<Pooled>>>,
    max_body: usize,
    /// The pipelined connections, when the upstream allows pipelining (`pipeline > 0`).
    pipe: Option<Arc<pipeline::Pipeline>>,
    /// For an `https://` upstream: its TLS client and the name its certificate must show.
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
}

impl std::fmt::Debug for UpstreamClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamClient")
            .field("name", &self.config.name)
            .field("addr", &self.addr)
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

impl UpstreamClient {
    /// A client for a validated upstream.
    pub fn new(config: Upstream, max_body: usize) -> Self {
        let uri: Uri = config
            .url
            .parse()
            .expect("upstream URLs are validated at start");
        let authority = uri.authority().expect("upstream URLs have a host").clone();
        let https = uri.scheme_str() == Some("https");
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let host = authority.host().trim_matches(['[', ']']);
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let tls = crate::config::tls::client_config(&config)
            .expect("upstream TLS settings are validated at start")
            .map(|cfg| {
                let name = rustls::pki_types::ServerName::try_from(host.to_owned())
                    .expect("a URI host is a server name");
                (tokio_rustls::TlsConnector::from(cfg), name)
            });
        let addr = format!("{host}:{port}");
        let pipe = (config.pipeline > 0 && tls.is_none()).then(|| {
            Arc::new(pipeline::Pipeline::new(
                addr.clone(),
                config.pipeline,
                max_body,
            ))
        });
        UpstreamClient {
            tls,
            pipe,
            addr,
            host: authority.as_str().to_owned(),
            path,
            idle: Arc::new(Mutex::new(Vec::new())),
            config,
            max_body,
        }
    }

    /// The upstream's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The upstream's dialect.
    pub fn dialect(&self) -> Dialect {
        self.config.dialect
    }

    /// POSTs a JSON body, within the upstream's timeout, and reads the whole answer. An
    /// `authorization` that is not a valid header value is not sent. The body is copied into
    /// the request's buffer, so it is borrowed (a `Bytes` of a fresh `Vec` cost an allocation
    /// of its own).
    pub async fn post(
        &self,
        body: &[u8],
        authorization: Option<&str>,
    ) -> Result<Answer, GatewayError> {
        let (traceparent, tracestate) = match crate::http::scope::upstream_trace() {
            Some((t, state)) => (Some(t.traceparent_bytes()), state),
            None => (None, None),
        };
        let head = h1::Head {
            path: &self.path,
            host: &self.host,
            authorization: authorization.filter(|a| h1::is_header_value(a)),
            traceparent: traceparent.as_ref(),
            tracestate: tracestate.as_ref().map(HeaderValue::as_bytes),
        };
        let now = tokio::time::Instant::now();
        let due = now + self.config.timeout();
        let timed_out = || GatewayError::UpstreamTimeout {
            upstream: self.config.name.clone(),
            timeout_ms: self.config.timeout_ms,
        };
        if let Some(pipe) = &self.pipe {
            let mut request = Vec::new();
            h1::lay_out(&mut request, &head, body);
            if let Some(reply) = pipe.submit(request, due) {
                return match tokio::time::timeout_at(due, reply).await {
                    Ok(Ok(outcome)) => self.answered(outcome),
                    Ok(Err(_)) => Err(self.unreachable("the pipelined connection's task ended")),
                    Err(_) => Err(timed_out()),
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
                () = until(&mut t, due) => return Err(timed_out()),
            };
            timer = Some(t);
            match done {
                (Err(h1::Error::NotSent(_)), _) => {}
                (answer, conn) => {
                    if let Some(conn) = conn {
                        self.checkin_timed(conn, timer, now);
                    }
                    return self.answered(answer);
                }
            }
        }
        // Boxed: the connect (a TLS handshake for `https://`) is the rare step, and held inline
        // it would make every exchange's future, and every one around it, larger.
        let fresh = async {
            let fresh = Box::pin(self.connect()).await?;
            Ok(self.attempt(fresh, &head, body).await)
        };
        let (answer, conn) = match tokio::time::timeout_at(due, fresh).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => (Err(e), None),
            Err(_) => return Err(timed_out()),
        };
        if let Some(conn) = conn {
            self.checkin_timed(conn, timer, now);
        }
        self.answered(answer)
    }

    /// An exchange's outcome as the caller's.
    fn answered(&self, answer: Result<h1::Answer, h1::Error>) -> Result<Answer, GatewayError> {
        let answer = answer.map_err(|e| match e {
            h1::Error::TooLarge { status, limit } => {
                self.bad_envelope(status, format!("answer exceeds {limit} bytes"))
            }
            e => self.unreachable(e),
        })?;
        Ok(Answer {
            status: answer.status,
            body: answer.body,
        })
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

    /// An idle connection still usable, the most recently used first.
    pub(crate) fn checkout(&self) -> Option<h1::Conn> {
        self.checkout_timed(Instant::now()).map(|(conn, _)| conn)
    }

    /// [`checkout`](Self::checkout) at `now` (the call's own reading of the clock), with the
    /// connection's timer.
    pub(crate) fn checkout_timed(&self, now: Instant) -> Option<(h1::Conn, Option<Timer>)> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
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
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
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
        let tcp = TcpStream::connect(&self.addr)
            .await
            .map_err(connect_error)?;
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

    /// Whether a TCP connection to the upstream can be opened now.
    pub async fn reachable(&self) -> bool {
        matches!(
            tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(&self.addr)).await,
            Ok(Ok(_))
        )
    }

    fn unreachable(&self, e: impl std::fmt::Display) -> GatewayError {
        let detail = e.to_string();
        GatewayError::UpstreamUnreachable {
            upstream: self.config.name.clone(),
            detail: detail.chars().take(300).collect(),
        }
    }

    /// The error for an answer that is not a valid envelope of this upstream's dialect.
    pub fn bad_envelope(&self, status: StatusCode, detail: impl Into<String>) -> GatewayError {
        GatewayError::UpstreamBadEnvelope {
            upstream: self.config.name.clone(),
            dialect: self.config.dialect.as_str(),
            status: status.as_u16(),
            detail: detail.into(),
        }
    }
}
