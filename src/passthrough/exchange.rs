//! One passed-through exchange on a pooled upstream connection, run in the calling task: the
//! request head written together with as much of the body as has already arrived, the rest
//! streamed as it comes; the answer's head parsed with its headers, its body passed on by its own
//! framing (read whole when it is short and has a length, streamed otherwise); a `101` hands the
//! upstream connection over for a tunnel.
//!
//! The connections, their framing rules and the pool are the outbound client's
//! ([`crate::outbound`]), the RPC path's own: like its exchange, this one wakes no other task
//! and crosses no channel. hyper's pooled client spends far more user CPU than nginx on a
//! passed-through call: a connection task, the channels to it, and its request and response
//! objects (docs/performance.md).

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use bytes::{Buf, Bytes, BytesMut};
use futures_util::FutureExt;
use http_body_util::BodyExt;
use hyper::body::{Body as _, Frame};

use std::sync::Arc;

use crate::outbound::h1::{self, Conn, Framing};
use crate::outbound::stream::Stream;
use crate::outbound::{done, read_whole, reusable, send_on, stream_answer, Pool};
use crate::util::timer::until;

/// Answers with a length up to this are read whole before they are passed on (one frame, and
/// the connection back in the pool at once); longer ones, chunked and close-delimited ones
/// stream.
const WHOLE: usize = 64 * 1024;

/// How the request's body goes upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sending {
    /// No body.
    Nothing,
    /// As it came, under the `Content-Length` the head carries.
    Length,
    /// Chunked (its length is not known in advance, e.g. an HTTP/2 client's or a chunked one's).
    Chunked,
}

/// What the upstream answered.
pub(crate) struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its headers, hop-by-hop ones included (the caller strips them).
    pub headers: HeaderMap,
    /// Its body, or for a `101` the upstream's side of the tunnel.
    pub body: Delivered,
}

/// An answer's body.
pub(crate) enum Delivered {
    /// To be passed on.
    Body(Body),
    /// The connection, switched to another protocol, with the bytes already read from it.
    Upgraded(Stream, BytesMut),
}

/// How an exchange failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failed {
    /// The upstream could not be reached, or broke the exchange.
    #[error(transparent)]
    Upstream(#[from] h1::Error),
    /// The client's body failed (the client went away mid-upload, or sent a malformed body).
    #[error("the client's request body: {0}")]
    ClientBody(axum::Error),
    /// The upstream was not reached, took no write, or did not answer, within its timeout.
    #[error("the upstream timed out")]
    TimedOut,
    /// The client did not send its whole body within `server.body_read_timeout_ms`.
    #[error("the client's request body was not in within its timeout")]
    ClientBodyTimedOut,
}

impl Failed {
    /// A span's `error.type`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Failed::Upstream(_) => "upstream_unreachable",
            Failed::ClientBody(_) => "client_body",
            Failed::TimedOut => "upstream_timeout",
            Failed::ClientBodyTimedOut => "client_body_timeout",
        }
    }
}

/// What an exchange's waits are bounded by.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timeouts {
    /// The upstream's `timeout_ms`: connecting and writing the head, each write of the body
    /// after it, and the answer's head (with a short body read whole) once the request is sent.
    /// Never the client's pace of sending: an upload may take longer than this.
    pub upstream: Duration,
    /// `server.body_read_timeout_ms`: the client's whole body, from the exchange's start, so a
    /// client that stalls mid-upload cannot hold the upstream's connection.
    pub client_body: Duration,
}

/// `f`, an upstream step, within `limit`.
async fn within<T>(
    limit: Duration,
    f: impl std::future::Future<Output = Result<T, impl Into<Failed>>>,
) -> Result<T, Failed> {
    match tokio::time::timeout(limit, f).await {
        Ok(done) => done.map_err(Into::into),
        Err(_) => Err(Failed::TimedOut),
    }
}

/// Sends `head` (request line and headers through the blank line; its framing header says
/// `sending`) and `body` to the upstream, and reads the answer's head. `no_body` marks an answer
/// that has none whatever its headers say (the answer to `HEAD`); `upgrade` lets a `101`
/// through. Each step is timed by `timeouts`.
pub(crate) async fn exchange(
    client: &Arc<Pool>,
    mut head: Vec<u8>,
    mut body: Body,
    sending: Sending,
    no_body: bool,
    upgrade: bool,
    timeouts: Timeouts,
) -> Result<Answer, Failed> {
    let body_due = tokio::time::Instant::now() + timeouts.client_body;
    // What has already arrived goes out with the head, in one write: for a small request, the
    // whole of it. The rest is streamed, so an upload the upstream must see piece by piece is
    // never held back.
    let mut ended = sending == Sending::Nothing || body.is_end_stream();
    if !ended {
        while let Some(frame) = body.frame().now_or_never() {
            match frame {
                None => {
                    ended = true;
                    break;
                }
                Some(f) => put_data(&mut head, f.map_err(Failed::ClientBody)?, sending),
            }
            if body.is_end_stream() {
                ended = true;
                break;
            }
        }
    }
    if ended && sending == Sending::Chunked {
        head.extend_from_slice(crate::wire::head_writer::LAST_CHUNK);
    }
    let mut conn = within(timeouts.upstream, send(client, &head)).await?;
    if !ended {
        stream_body(&mut conn, &mut body, sending, &mut head, timeouts, body_due).await?;
    }
    within(timeouts.upstream, answer(client, conn, no_body, upgrade)).await
}

/// The answer to a request sent whole on `conn`: its head, and its body (read whole when short,
/// else to be streamed).
async fn answer(
    client: &Arc<Pool>,
    mut conn: Conn,
    no_body: bool,
    upgrade: bool,
) -> Result<Answer, h1::Error> {
    let mut headers = HeaderMap::new();
    let parsed = conn.read_head(upgrade, Some(&mut headers)).await?;
    let status = parsed.status;
    if status == StatusCode::SWITCHING_PROTOCOLS {
        let (stream, rest) = conn.into_parts();
        return Ok(Answer {
            status,
            headers,
            body: Delivered::Upgraded(stream, rest),
        });
    }
    let framing = if no_body {
        Framing::Empty
    } else {
        parsed.framing
    };
    let body = match framing {
        Framing::Empty => {
            done(client, conn, parsed.keep_alive);
            Body::empty()
        }
        Framing::Length(n) if n <= WHOLE => {
            let bytes = whole(client, conn, n, parsed.keep_alive).await?;
            Body::from(bytes)
        }
        framing => Body::from_stream(stream_answer(
            client.clone(),
            conn,
            framing,
            parsed.keep_alive,
        )),
    };
    Ok(Answer {
        status,
        headers,
        body: Delivered::Body(body),
    })
}

/// The upstream's answer to a request sent whole ([`relay`]), its head already written for
/// the client.
pub(crate) struct Relayed {
    /// Its status.
    pub status: StatusCode,
    /// Whether the upstream sent a `Date`.
    pub dated: bool,
    /// Its body.
    pub body: RelayedBody,
}

/// A relayed answer's body.
pub(crate) enum RelayedBody {
    /// Read whole (up to [`WHOLE`] bytes with a length; empty for an answer without a body).
    Whole(Bytes),
    /// Passed on as it arrives, with its length when the upstream said it.
    Stream(Body, Option<u64>),
}

/// How a relayed exchange ended without an answer.
#[derive(Debug)]
pub(crate) enum Unanswered {
    /// The upstream could not be reached, or answered what is not HTTP/1.1.
    Failed(h1::Error),
    /// No whole answer within the upstream's timeout.
    TimedOut,
}

/// Sends `request` (head and body, whole) upstream, and writes the answer's head as the client
/// gets it in `out` (see [`raw::answer_head`](super::raw::answer_head)): the head's headers are
/// relayed from the upstream's bytes, never put in a header map. Interim answers are skipped;
/// a `101` is refused (the request asked for no upgrade). The body is read whole when it is
/// short and has a length, streamed otherwise, as [`exchange`]'s.
///
/// Timed by the pooled connection's own timer, as the RPC path's calls are
/// (`outbound::Pool::post`): a `tokio::time::timeout` per call registered and dropped a timer
/// entry each time, and woke the runtime's driver through its eventfd about once per poll of
/// the event loop (as `strace` shows).
pub(crate) async fn relay(
    client: &Arc<Pool>,
    request: &[u8],
    out: &mut Vec<u8>,
    timeout: std::time::Duration,
) -> Result<Relayed, Unanswered> {
    let now = tokio::time::Instant::now();
    let due = now + timeout;
    let now = now.into_std();
    let (pooled, kept) = client
        .checkout_timed(now)
        .map_or((None, None), |(c, t)| (Some(c), t));
    let mut timer = kept.unwrap_or_else(|| Box::pin(tokio::time::sleep_until(due)));
    let answered = tokio::select! {
        biased;
        answered = relay_on(client, pooled, request, out) => answered,
        () = until(timer.as_mut(), due) => return Err(Unanswered::TimedOut),
    };
    let (relayed, idle) = answered.map_err(Unanswered::Failed)?;
    if let Some(conn) = idle {
        client.checkin_timed(conn, Some(timer), now);
    }
    Ok(relayed)
}

/// [`relay`]'s exchange, on `pooled` when there is one; with the connection when it may carry
/// another request.
async fn relay_on(
    client: &Arc<Pool>,
    pooled: Option<Conn>,
    request: &[u8],
    out: &mut Vec<u8>,
) -> Result<(Relayed, Option<Conn>), h1::Error> {
    let mut conn = send_on(client, pooled, request).await?;
    let mut lines = Vec::with_capacity(16);
    let parsed = loop {
        if conn.received().is_empty() {
            conn.fill().await?;
            continue;
        }
        lines.clear();
        let buf: &[u8] = conn.received();
        let base = buf.as_ptr() as usize;
        let at = |s: &[u8]| {
            let start = s.as_ptr() as usize - base;
            start..start + s.len()
        };
        let seen = h1::parse_head_with(buf, |name, value| lines.push((at(name), at(value))))?;
        match seen {
            Some(p) if p.status == StatusCode::SWITCHING_PROTOCOLS => {
                return Err(h1::Error::Malformed("101 Switching Protocols"))
            }
            Some(p) if p.status.is_informational() => conn.received().advance(p.len),
            Some(p) => break p,
            None if buf.len() > h1::MAX_HEAD => {
                return Err(h1::Error::Malformed("answer head too large"))
            }
            None => conn.fill().await?,
        }
    };
    let dated = super::raw::answer_head(out, parsed.status, &conn.received()[..parsed.len], &lines);
    conn.received().advance(parsed.len);
    let (body, idle) = match parsed.framing {
        Framing::Empty => (
            RelayedBody::Whole(Bytes::new()),
            reusable(conn, parsed.keep_alive),
        ),
        Framing::Length(n) if n <= WHOLE => {
            let bytes = read_whole(&mut conn, n).await?;
            (RelayedBody::Whole(bytes), reusable(conn, parsed.keep_alive))
        }
        framing => {
            let length = match framing {
                Framing::Length(n) => Some(n as u64),
                _ => None,
            };
            let stream = stream_answer(client.clone(), conn, framing, parsed.keep_alive);
            (RelayedBody::Stream(Body::from_stream(stream), length), None)
        }
    };
    let relayed = Relayed {
        status: parsed.status,
        dated,
        body,
    };
    Ok((relayed, idle))
}

/// Writes `bytes` on a pooled connection, or on a fresh one when the pooled one turns out dead
/// (nothing of the request can have reached the upstream then).
async fn send(client: &Pool, bytes: &[u8]) -> Result<Conn, h1::Error> {
    send_on(client, client.checkout(), bytes).await
}

/// Appends a body frame's data to `out`, chunk-framed when the body is sent chunked.
fn put_data(out: &mut Vec<u8>, frame: Frame<Bytes>, sending: Sending) {
    let Ok(data) = frame.into_data() else {
        return; // Trailers: not forwarded.
    };
    if data.is_empty() {
        return;
    }
    if sending == Sending::Chunked {
        out.extend_from_slice(crate::wire::head_writer::ChunkSize::new(data.len()).as_bytes());
        out.extend_from_slice(&data);
        out.extend_from_slice(b"\r\n");
    } else {
        out.extend_from_slice(&data);
    }
}

/// The rest of the request's body, frame by frame as the client sends it: each frame awaited
/// until `body_due` (one timer for the whole body, not one per frame), each write given the
/// upstream's timeout.
async fn stream_body(
    conn: &mut Conn,
    body: &mut Body,
    sending: Sending,
    buf: &mut Vec<u8>,
    timeouts: Timeouts,
    body_due: tokio::time::Instant,
) -> Result<(), Failed> {
    let mut due = std::pin::pin!(tokio::time::sleep_until(body_due));
    loop {
        buf.clear();
        let frame = tokio::select! {
            biased;
            frame = body.frame() => frame,
            () = &mut due => return Err(Failed::ClientBodyTimedOut),
        };
        match frame {
            None => {
                if sending == Sending::Chunked {
                    within(
                        timeouts.upstream,
                        conn.send(crate::wire::head_writer::LAST_CHUNK),
                    )
                    .await?;
                }
                return Ok(());
            }
            Some(f) => put_data(buf, f.map_err(Failed::ClientBody)?, sending),
        }
        if !buf.is_empty() {
            within(timeouts.upstream, conn.send(buf)).await?;
        }
    }
}

/// A body of `n` bytes (at most [`WHOLE`]) read whole, the connection then put back in the pool
/// when it can carry another request.
async fn whole(
    client: &Pool,
    mut conn: Conn,
    n: usize,
    keep_alive: bool,
) -> Result<Bytes, h1::Error> {
    let bytes = read_whole(&mut conn, n).await?;
    done(client, conn, keep_alive);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_are_written_in_hex() {
        let mut out = Vec::new();
        put_data(
            &mut out,
            Frame::data(Bytes::from(vec![b'x'; 300])),
            Sending::Chunked,
        );
        assert!(out.starts_with(b"12c\r\nxxx"));
        assert!(out.ends_with(b"x\r\n"));
        let mut plain = Vec::new();
        put_data(
            &mut plain,
            Frame::data(Bytes::from_static(b"ab")),
            Sending::Length,
        );
        assert_eq!(plain, b"ab");
    }
}
