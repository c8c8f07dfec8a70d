//! The listening socket, bounded: at most `server.max_connections` connections are open at once.
//!
//! At the limit each listening socket holds the one client it accepted last until a
//! connection closes; further clients wait in the kernel's backlog (and time out there) instead
//! of costing the gateway memory, and everyone already connected keeps being served. A
//! connection's permit goes back when its socket is dropped.
//!
//! A new connection must show its first bytes within a deadline ([`Conn::sniff`]): telling
//! HTTP/1 from HTTP/2 reads them, and nothing else times that read.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A TCP listener that holds a permit per open connection.
#[derive(Debug)]
pub(crate) struct Bounded {
    inner: TcpListener,
    permits: Arc<Semaphore>,
    max: u32,
}

impl Bounded {
    /// Bounds `inner` to `max` open connections.
    pub(crate) fn new(inner: TcpListener, max: usize) -> Self {
        Self::sharing(inner, Arc::new(Semaphore::new(max)), max)
    }

    /// Bounds `inner` by `permits` (`max` of them), which other listeners may share: the
    /// per-core workers' sockets count their connections together.
    pub(crate) fn sharing(inner: TcpListener, permits: Arc<Semaphore>, max: usize) -> Self {
        // A u32 because that is what waiting for every permit takes; no machine holds more.
        let max = u32::try_from(max).unwrap_or(u32::MAX);
        Bounded {
            inner,
            permits,
            max,
        }
    }
}

/// An accepted socket (or the TLS session on it) and its permit.
#[derive(Debug)]
pub(crate) struct Conn<S = TcpStream> {
    io: S,
    /// Bytes [`sniff`](Conn::sniff) read, served again before the socket's.
    prefix: Bytes,
    _permit: OwnedSemaphorePermit,
}

/// Turns for the CPU-bound step of TLS handshakes: one per runtime worker, each taken after a
/// yield to the scheduler.
///
/// Answering a ClientHello costs about a millisecond of CPU (a key exchange and an RSA or ECDSA
/// signature). Without turns, a burst of new TLS connections (a load balancer's pool opening,
/// a benchmark's 256 connections at once) puts hundreds of such steps in the worker's run queue
/// back to back, and every call on an already open connection waits behind all of them: under
/// `wrk -c256` the first calls waited 0.3–2 s. With a turn
/// per worker and a yield before each, the I/O driver is polled between two handshakes, so the
/// calls that became ready meanwhile run first. A turn is held only while rustls computes, never
/// across a wait on a client, so a slow or silent client cannot hold one.
#[derive(Debug)]
pub(crate) struct Handshakes {
    turns: Semaphore,
}

impl Handshakes {
    /// `workers` turns (at least one).
    pub(crate) fn new(workers: usize) -> Self {
        Handshakes {
            turns: Semaphore::new(workers.max(1)),
        }
    }

    /// Runs `step` in a turn, after letting what is ready on this worker run first.
    pub(crate) async fn take<T>(&self, step: impl FnOnce() -> T) -> T {
        let _turn = self
            .turns
            .acquire()
            .await
            .expect("the semaphore is never closed");
        tokio::task::yield_now().await;
        step()
    }
}

/// The HTTP version a connection opened with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// HTTP/1.x.
    Http1,
    /// HTTP/2 with prior knowledge (the connection preface).
    Http2,
}

/// The HTTP/2 connection preface (RFC 9113 §3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl Conn {
    /// The client's address (`None` if the socket already failed).
    pub(crate) fn peer(&self) -> Option<std::net::SocketAddr> {
        self.io.peer_addr().ok()
    }

    /// The TLS handshake, within `deadline` (the handshake is the first thing a TLS client
    /// sends, so the same rule as a plain connection's first bytes); `None` when it fails or
    /// takes longer.
    ///
    /// The ClientHello is awaited freely; answering it (key exchange and the certificate's
    /// signature, about a millisecond of CPU each, done by rustls in `into_stream`) waits for
    /// a turn of `turns` (see [`Handshakes`]), so a burst of new connections does not hold
    /// back the calls of the connections already open.
    pub(crate) async fn tls_accept(
        self,
        config: std::sync::Arc<rustls::ServerConfig>,
        deadline: std::time::Duration,
        turns: &Handshakes,
    ) -> Option<Conn<tokio_rustls::server::TlsStream<TcpStream>>> {
        let io = self.io;
        let handshake = async {
            let hello =
                tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), io)
                    .await?;
            let accept = turns.take(|| hello.into_stream(config)).await;
            accept.await
        };
        match tokio::time::timeout(deadline, handshake).await {
            Ok(Ok(io)) => Some(Conn {
                io,
                prefix: Bytes::new(),
                _permit: self._permit,
            }),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "TLS handshake failed");
                None
            }
            Err(_) => None,
        }
    }

    /// The socket, once nothing was read ahead or what was is no longer needed; the permit goes
    /// with it, held until the returned guard is dropped.
    pub(crate) fn into_stream(self) -> (TcpStream, OwnedSemaphorePermit) {
        (self.io, self._permit)
    }
}

impl Conn<tokio_rustls::server::TlsStream<TcpStream>> {
    /// The client's certificate (DER, the end entity), when it showed one: the handshake
    /// verified it against `server.tls.client_ca`.
    pub(crate) fn peer_cert(&self) -> Option<std::sync::Arc<[u8]>> {
        let certs = self.io.get_ref().1.peer_certificates()?;
        certs.first().map(|c| std::sync::Arc::from(c.as_ref()))
    }
}

impl<S> Conn<S> {
    /// The bytes read ahead and the socket (or TLS session), for a caller that reads on before
    /// hyper does; what it leaves in the bytes is read again first.
    pub(crate) fn parts_mut(&mut self) -> (&mut Bytes, &mut S) {
        (&mut self.prefix, &mut self.io)
    }
}

impl<S: AsyncRead + Unpin> Conn<S> {
    /// Reads until the first bytes tell HTTP/2's preface from anything else, within `deadline`;
    /// `None` when the peer stays silent that long or closes first. The bytes are kept and read
    /// again by whoever serves the connection.
    pub(crate) async fn sniff(mut self, deadline: std::time::Duration) -> Option<(Self, Protocol)> {
        let mut buf = Vec::with_capacity(H2_PREFACE.len());
        let read = async {
            loop {
                let mut chunk = [0u8; H2_PREFACE.len()];
                let want = H2_PREFACE.len() - buf.len();
                let n = self.io.read(&mut chunk[..want]).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
                if !H2_PREFACE.starts_with(&buf) {
                    return Some(Protocol::Http1);
                }
                if buf.len() == H2_PREFACE.len() {
                    return Some(Protocol::Http2);
                }
            }
        };
        let proto = tokio::time::timeout(deadline, read).await.ok()??;
        self.prefix = Bytes::from(buf);
        Some((self, proto))
    }
}

impl Bounded {
    /// Stops listening (new clients are refused), then waits until every accepted connection
    /// has been dropped (of every listener sharing its permits: each takes them all in turn
    /// and gives them back).
    pub(crate) async fn close(self) {
        let Bounded {
            inner,
            permits,
            max,
        } = self;
        drop(inner);
        let _ = permits.acquire_many(max).await;
    }

    /// The next connection, once a permit is free. The connection is accepted first and then
    /// waits for its permit: with per-core workers every socket shares the permits, and a
    /// permit taken by a socket with nobody waiting would leave a client queued at another
    /// socket unserved. So at the limit each socket holds one accepted client until a
    /// connection closes, and the others wait in the kernel's backlog. Accept errors (out of
    /// file descriptors, a connection reset before it was taken) are logged and waited out, as
    /// `axum::serve` does.
    pub(crate) async fn accept(&mut self) -> Conn {
        let io = loop {
            match self.inner.accept().await {
                Ok((io, _)) => break io,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        };
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        // Small frames (SSE events, short JSON answers) must not wait for Nagle.
        let _ = io.set_nodelay(true);
        Conn {
            io,
            prefix: Bytes::new(),
            _permit: permit,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Conn<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if !self.prefix.is_empty() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Conn<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
