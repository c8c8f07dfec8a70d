//! One destination's connections: a keep-alive pool, a pipelining lane where enabled, the TLS
//! client of an `https://` URL, and the `POST` of one JSON body on them.
//!
//! An exchange runs in the calling task on a connection taken from the pool ([`h1`] speaks the
//! HTTP/1.1 of it), so a proxied call wakes no other task and crosses no channel (measured: see
//! docs/performance.md). Idle connections sit in a LIFO stack; one that the destination closed
//! meanwhile is found when it is checked out, and a request that could not be written is sent
//! once more on a fresh connection. The pool is kept per worker thread
//! ([`crate::util::worker`]): a connection is reused on the thread whose runtime opened it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::Uri;
use tokio::net::TcpStream;

use super::{h1, pipeline, stream, Error, Options};
use crate::util::timer::until;

/// Idle connections kept per destination and worker.
const MAX_IDLE: usize = 256;
/// An idle connection older than this is closed rather than reused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// One idle connection.
struct Pooled {
    conn: h1::Conn,
    /// When it is too old to reuse ([`IDLE_TIMEOUT`] after the call that used it last began:
    /// that call's clock reading serves, so a call reads the clock once for its timer and
    /// not again for the pool).
    idle_until: Instant,
    /// The timer of the calls made on it (see [`Pool::post`]), kept with it.
    timer: Option<Timer>,
}

/// A call's timer, reused by the calls of one pooled connection: a `tokio::time::timeout` per
/// call registers, polls and drops a timer entry each time (docs/performance.md).
pub(crate) type Timer = std::pin::Pin<Box<tokio::time::Sleep>>;

impl Pooled {
    /// Still usable at `now`: not idle for too long, and not closed by the destination
    /// meanwhile.
    fn is_reusable(&self, now: Instant) -> bool {
        now < self.idle_until && self.conn.is_open()
    }
}

/// One destination's connections.
pub(crate) struct Pool {
    /// `host:port` to connect to.
    addr: String,
    /// The addresses to connect to instead of resolving `addr`: for a destination a caller
    /// chose, the addresses its [`Policy`](super::Policy) checked ([`Pool::pinned_to`]).
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
    /// The largest answer body read whole.
    pub(super) max_body: usize,
    /// Opening a connection outside a `POST` (whose due bounds it).
    connect_timeout: Duration,
    /// Each wait for an answer's bytes of [`fetch`](Self::fetch) and [`open`](Self::open).
    pub(super) read_timeout: Duration,
    /// The whole of a [`fetch`](Self::fetch).
    pub(super) total: Duration,
    /// `pipeline` of its upstream.
    pipeline: usize,
    /// The pipelined connections, when the upstream allows pipelining (`pipeline > 0`).
    pipe: Option<Arc<pipeline::Pipeline>>,
    /// For an `https://` URL: its TLS client and the name its certificate must show.
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl Pool {
    /// The connections to `url` (validated: `http://` or `https://` with a host), bounded by
    /// `opts`, with up to `pipeline` calls waiting on each pipelined connection (0: none).
    pub(crate) fn new(url: &str, opts: &Options, pipeline: usize) -> Result<Self, Error> {
        let bad = |why: &str| Error::Url(format!("{}: {why}", crate::util::redact::url(url)));
        let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(bad("not an http:// or https:// URL")),
        };
        let authority = uri.authority().ok_or_else(|| bad("no host"))?.clone();
        let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
        let host = authority.host().trim_matches(['[', ']']);
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let tls = match https {
            false => None,
            true => {
                let name = rustls::pki_types::ServerName::try_from(host.to_owned())
                    .map_err(|_| bad("the host is no server name"))?;
                let config = opts.tls.clone().unwrap_or_else(super::tls::platform);
                Some((tokio_rustls::TlsConnector::from(config), name))
            }
        };
        let addr = format!("{host}:{port}");
        let pipe = (pipeline > 0 && tls.is_none()).then(|| {
            Arc::new(pipeline::Pipeline::new(
                addr.clone(),
                pipeline,
                opts.max_answer,
            ))
        });
        Ok(Pool {
            tls,
            pipe,
            addr,
            pinned: None,
            host: authority_of(url).to_owned(),
            peer: (host.to_owned(), port),
            path,
            idle: (0..crate::util::worker::slots())
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            pipeline,
            max_body: opts.max_answer,
            connect_timeout: opts.connect,
            read_timeout: opts.read,
            total: opts.total,
        })
    }

    /// The pool connecting to `addrs` (tried in order) and never resolving its host: what was
    /// checked is what is dialled. TLS still sends and verifies the URL's host name. No
    /// pipelining lane: its connections would dial the host by name.
    pub(crate) fn pinned_to(mut self, addrs: Arc<[SocketAddr]>) -> Self {
        self.pinned = Some(addrs);
        self.pipe = None;
        self
    }

    /// POSTs a JSON body within `timeout` (connecting included) and reads the whole answer.
    /// The body is copied into the request's buffer, so it is borrowed (a `Bytes` of a fresh
    /// `Vec` cost an allocation of its own). A failure says whether the request may have
    /// reached the destination.
    #[inline]
    pub(crate) async fn post(
        &self,
        head: &h1::Head<'_>,
        body: &[u8],
        timeout: Duration,
    ) -> Result<h1::Answer, Error> {
        let now = tokio::time::Instant::now();
        let due = now + timeout;
        if let Some(pipe) = &self.pipe {
            let mut request = Vec::new();
            h1::lay_out(&mut request, head, body);
            if let Some(reply) = pipe.submit(request, due) {
                return match tokio::time::timeout_at(due, reply).await {
                    Ok(Ok(outcome)) => outcome.map_err(Error::Exchange),
                    Ok(Err(_)) => Err(Error::LaneGone),
                    Err(_) => Err(Error::TimedOut { sent: true }),
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
                done = self.attempt(conn, head, body) => done,
                () = until(t.as_mut(), due) => return Err(Error::TimedOut { sent: true }),
            };
            timer = Some(t);
            match done {
                (Err(h1::Error::NotSent(_)), _) => {}
                (answer, conn) => {
                    if let Some(conn) = conn {
                        self.checkin_timed(conn, timer, now);
                    }
                    return answer.map_err(Error::Exchange);
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
            Ok(self.attempt(fresh, head, body).await)
        };
        let (answer, conn) = match tokio::time::timeout_at(due, fresh).await {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => (Err(e), None),
            Err(_) => {
                return Err(Error::TimedOut {
                    sent: connected.into_inner(),
                })
            }
        };
        if let Some(conn) = conn {
            self.checkin_timed(conn, timer, now);
        }
        answer.map_err(Error::Exchange)
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

    /// A new connection: TCP, then the TLS handshake for an `https://` URL (SNI and the
    /// verified name are the URL's host). Unbounded: the caller's due bounds it.
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

    /// [`connect`](Self::connect) within the connect timeout of its [`Options`].
    pub(crate) async fn connect_timed(&self) -> Result<h1::Conn, Error> {
        match tokio::time::timeout(self.connect_timeout, self.connect()).await {
            Ok(conn) => Ok(conn?),
            Err(_) => Err(Error::TimedOut { sent: false }),
        }
    }

    /// A TCP connection to the pinned addresses, or to the host as resolved now.
    async fn dial(&self) -> std::io::Result<TcpStream> {
        match &self.pinned {
            Some(addrs) => TcpStream::connect(&addrs[..]).await,
            None => TcpStream::connect(&self.addr).await,
        }
    }

    /// Whether a TCP connection to the destination can be opened now (within 1 s).
    pub(crate) async fn reachable(&self) -> bool {
        matches!(
            tokio::time::timeout(Duration::from_secs(1), self.dial()).await,
            Ok(Ok(_))
        )
    }

    /// The path its `POST`s go to.
    pub(crate) fn path(&self) -> &str {
        &self.path
    }

    /// The host and port connected to.
    pub(crate) fn peer(&self) -> (&str, u16) {
        (&self.peer.0, self.peer.1)
    }

    /// Its `host:port` as the URL gives it (the `Host` it gets): how logs, metrics and
    /// `/readyz` name it.
    pub(crate) fn label(&self) -> &str {
        &self.host
    }

    /// Whether it serves a destination configured with `pipeline` and `max_body` as it was:
    /// the settings a connection is made with are the same. An `https://` or pinned one never
    /// does: a reload reads the TLS files again (a rotated certificate applies).
    pub(crate) fn fits(&self, pipeline: usize, max_body: usize) -> bool {
        self.tls.is_none()
            && self.pinned.is_none()
            && self.pipeline == pipeline
            && self.max_body == max_body
    }
}

/// The authority (`host:port`, as the URL gives it, without credentials) of a validated URL:
/// its `Host` header and its name in logs, metrics and `/readyz`.
pub(crate) fn authority_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    authority.rsplit_once('@').map_or(authority, |(_, a)| a)
}
