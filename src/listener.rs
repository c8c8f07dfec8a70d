//! The listening socket, bounded: at most `server.max_connections` connections are open at once.
//!
//! At the limit the gateway stops accepting; further clients wait in the kernel's backlog (and
//! time out there) instead of costing the gateway memory, and everyone already connected keeps
//! being served. A connection's permit goes back when its socket is dropped.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A TCP listener that holds a permit per open connection.
#[derive(Debug)]
pub struct Bounded {
    inner: TcpListener,
    permits: Arc<Semaphore>,
}

impl Bounded {
    /// Bounds `inner` to `max` open connections.
    pub fn new(inner: TcpListener, max: usize) -> Self {
        Bounded {
            inner,
            permits: Arc::new(Semaphore::new(max)),
        }
    }
}

/// An accepted socket and its permit.
#[derive(Debug)]
pub struct Conn {
    io: TcpStream,
    _permit: OwnedSemaphorePermit,
}

impl Bounded {
    /// The next connection, once a permit is free. Accept errors (out of file descriptors, a
    /// connection reset before it was taken) are logged and waited out, as `axum::serve` does.
    pub async fn accept(&mut self) -> Conn {
        let permit = self
            .permits
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        loop {
            match self.inner.accept().await {
                Ok((io, _)) => {
                    // Small frames (SSE events, short JSON answers) must not wait for Nagle.
                    let _ = io.set_nodelay(true);
                    return Conn {
                        io,
                        _permit: permit,
                    };
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        }
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
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
