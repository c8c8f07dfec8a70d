//! An answer's body read off its connection, after its head: whole when it is short (or must
//! be bounded), or passed on as it arrives by its framing; and the connection back in its pool
//! when the answer ended cleanly on one that can carry another request.

use std::io;
use std::sync::Arc;

use axum::http::StatusCode;
use bytes::{Buf, Bytes};

use super::h1::{self, Chunked, Conn, Framing};
use super::Pool;

/// Writes `bytes` on `pooled` when there is one, or on a fresh connection when there is none
/// or the pooled one turns out dead (nothing of the request can have reached the destination
/// then).
pub(crate) async fn send_on(
    pool: &Pool,
    pooled: Option<Conn>,
    bytes: &[u8],
) -> Result<Conn, h1::Error> {
    if let Some(mut conn) = pooled {
        match conn.send(bytes).await {
            Ok(()) => return Ok(conn),
            Err(h1::Error::NotSent(_)) => {}
            Err(e) => return Err(e),
        }
    }
    let mut conn = pool.connect().await?;
    conn.send(bytes).await?;
    Ok(conn)
}

/// The next `n` bytes of `conn`'s answer.
pub(crate) async fn read_whole(conn: &mut Conn, n: usize) -> Result<Bytes, h1::Error> {
    let buf = conn.received();
    buf.reserve(n.saturating_sub(buf.len()));
    while conn.received().len() < n {
        conn.fill().await?;
    }
    Ok(conn.received().split_to(n).freeze())
}

/// Puts a connection whose answer is complete back in the pool when it can carry another.
pub(crate) fn done(pool: &Pool, conn: Conn, keep_alive: bool) {
    if let Some(conn) = reusable(conn, keep_alive) {
        pool.checkin(conn);
    }
}

/// A connection whose answer is complete, ready for another request when it can carry one.
pub(crate) fn reusable(mut conn: Conn, keep_alive: bool) -> Option<Conn> {
    (keep_alive && conn.received().is_empty()).then(|| {
        conn.trim();
        conn
    })
}

/// An answer's body passed on as it arrives, by its framing; the connection goes back to the
/// pool when the body ended cleanly, and is closed when the reader stops first.
pub(crate) fn stream_answer(
    pool: Arc<Pool>,
    mut conn: Conn,
    framing: Framing,
    keep_alive: bool,
) -> impl futures_util::Stream<Item = io::Result<Bytes>> + Send {
    async_stream::try_stream! {
        match framing {
            Framing::Empty => {}
            Framing::Length(mut left) => {
                while left > 0 {
                    if conn.received().is_empty() {
                        conn.fill().await.map_err(io::Error::other)?;
                    }
                    let n = left.min(conn.received().len());
                    left -= n;
                    yield conn.received().split_to(n).freeze();
                }
            }
            Framing::Chunked => {
                let mut chunked = Chunked::default();
                loop {
                    let complete = chunked
                        .advance(conn.received(), usize::MAX, StatusCode::OK)
                        .map_err(io::Error::other)?;
                    conn.received().advance(chunked.pos);
                    chunked.pos = 0;
                    if !chunked.body.is_empty() {
                        yield Bytes::from(std::mem::take(&mut chunked.body));
                    }
                    if complete {
                        break;
                    }
                    conn.fill().await.map_err(io::Error::other)?;
                }
            }
            Framing::Close => loop {
                if !conn.received().is_empty() {
                    yield conn.received().split().freeze();
                }
                if conn.read_more().await.map_err(io::Error::other)? == 0 {
                    break;
                }
            },
        }
        done(&pool, conn, keep_alive && framing != Framing::Close);
    }
}
