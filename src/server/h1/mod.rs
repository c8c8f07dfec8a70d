//! HTTP/1 `POST`s to the RPC paths and to the pass-through, served on a connection loop of our
//! own instead of hyper's.
//!
//! Nearly every request a gateway sees is one of these, and hyper's HTTP/1 server spends about as
//! much on one as the gateway's own work does: its dispatcher, a request with a streaming body
//! and the channel behind it, a timer set per request, the answer encoded through its own buffers
//! (docs/performance.md). This loop reads the head with httparse (as the upstream side,
//! [`crate::outbound::h1`], reads answers), the body with it, and answers a call from the
//! gateway's [`Reply`](crate::http::reply::Reply) through the RPC lane's one writer
//! ([`answer::write_reply`]: its head and a known-length body in one write, the CORS headers in
//! that head, the access line after), under one timer per connection. A pass-through request
//! whose head cannot be relayed as bytes is answered through [`ConnService::respond`], as hyper's
//! connections answer it.
//!
//! It serves only what it fully understands: an HTTP/1.1 `POST` to a path of the RPC or the
//! pass-through lane, framed by a `Content-Length` (or without a body), without `Expect`,
//! `Upgrade`, `Transfer-Encoding` or a `Connection` other than keep-alive (a body over
//! `server.max_body_bytes` answered 413 unread; for the pass-through, one that has already
//! arrived whole). Anything
//! else, from the first request on or after some, is handed to hyper with every byte read so far
//! (the head included), and hyper serves the connection from there on: HTTP/1.0, chunked bodies,
//! `100-continue`, upgrades, other methods and routes, malformed heads and their `400`s, the
//! pass-through under CORS.

use std::pin::Pin;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, Uri, Version};
use axum::response::IntoResponse;
use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::sync::watch;
use tokio::time::Instant;

mod answer;

use self::answer::{bodiless, end_head, write, write_body, write_reply};
use super::conn_service::RpcCall;
use super::{ConnService, Lane};
use crate::http::headers::RawHead;
use crate::http::request_head::{parse, Head, Parsed};
use crate::model::error::GatewayError;
use crate::util::timer::{arm, fired};

/// The longest body hyper frames by its `Content-Length` (`u64::MAX - 2`: it keeps the two
/// values above for its own marks).
const MAX_FRAMED: usize = usize::MAX - 2;

/// Bytes a client may send ahead (pipelined requests) while its call runs; beyond that the
/// socket is not read until the answer is written.
const MAX_AHEAD: usize = 64 * 1024;

/// How [`serve`] left the connection.
pub(super) enum Served {
    /// Closed, or to be: the client left, broke its framing, timed out, or the gateway stops.
    Closed,
    /// For hyper: a request this loop does not serve is next, its bytes put back on the
    /// connection.
    HandOver,
}

/// Whether a connection's first bytes may start a `POST` (the one method served here).
pub(super) fn may_be_post(first: &[u8]) -> bool {
    b"POST /".starts_with(&first[..first.len().min(6)])
}

/// One wait for more of the client's bytes: read into `$buf`, or the timer of `$w` fires (then
/// `$on_timeout`), or the gateway stops (noted in `$w.stopping`, the wait goes on); the client
/// gone, `$on_gone` (one `$on_end` for both). A macro rather than an async fn: one async fn for the head's and the body's
/// waits (`read_more`) measured dearer per proxied call (its future and result enum), with
/// `benches/callgrind.sh proxy` (docs/performance.md).
macro_rules! read_more {
    ($io:expr, $buf:expr, $w:ident, $on_timeout:expr, $on_gone:expr) => {
        tokio::select! {
            biased;
            n = $io.read_buf($buf) => match n {
                Ok(n) if n > 0 => {}
                _ => $on_gone,
            },
            _ = &mut $w.deadline => if fired($w.deadline.as_mut(), $w.due) {
                $on_timeout
            },
            _ = &mut $w.stop, if !$w.stopping => $w.stopping = true,
        }
    };
    ($io:expr, $buf:expr, $w:ident, $on_end:expr) => {
        read_more!($io, $buf, $w, $on_end, $on_end)
    };
}

/// A connection's waits on its client. One timer for the connection's life: each wait sets
/// `due`; the timer is moved only when it must fire sooner than it is set to (a wait shorter
/// than the one before), and when it fires early (it was set for an earlier wait) it is moved
/// on to `due`: most requests then leave the timer wheel alone. The stop (`stop`) is awaited
/// only while the loop waits for a request; while a call runs it is read from `flag` once the
/// call is done (polling the wait beside every call measured dearer per proxied
/// call, its waiter list locked each time: docs/performance.md). `stopping`: the stop was seen.
struct Waits<'a, F> {
    deadline: Pin<&'a mut tokio::time::Sleep>,
    due: Instant,
    stop: Pin<&'a mut F>,
    stopping: bool,
    flag: watch::Receiver<bool>,
}

impl<F> Waits<'_, F> {
    /// The next wait ends `after` from now.
    fn until(&mut self, after: Duration) {
        self.due = Instant::now() + after;
        arm(self.deadline.as_mut(), self.due);
    }
}

/// Serves the HTTP/1 requests of `io` this loop takes, from the bytes in `prefix` on, until the
/// connection ends or a request for hyper comes; then `prefix` holds every byte not yet served.
/// `timeout` bounds the wait for each head (idle time between requests included), as hyper's
/// header read timeout does; the body's wait is `server.body_read_timeout_ms`. Once `stopped`,
/// the call in flight is answered (with `connection: close`) and the connection closed.
pub(super) async fn serve<S>(
    io: &mut S,
    prefix: &mut Bytes,
    front: &ConnService,
    timeout: Duration,
    stopped: &mut watch::Receiver<bool>,
) -> Served
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut buf = BytesMut::with_capacity(4096);
    buf.extend_from_slice(prefix);
    let mut out = Vec::with_capacity(1024);
    let flag = stopped.clone();
    let mut w = Waits {
        deadline: std::pin::pin!(tokio::time::sleep(timeout)),
        due: Instant::now(),
        stop: std::pin::pin!(stopped.wait_for(|s| *s)),
        stopping: false,
        flag,
    };
    loop {
        w.until(timeout);
        let head = loop {
            match next_head(&mut buf, prefix, w.stopping) {
                Next::Head(h) => break h,
                Next::End(served) => return served,
                Next::More => read_more!(io, &mut buf, w, return Served::Closed),
            }
        };
        let live = front.live.load_full();
        let Some(lane) = lane_served(&live, &buf, &head) else {
            if head.body > MAX_FRAMED {
                // hyper frames no body this long (it would answer 431, as if the head were
                // too large): refused here, the connection closed, its body never read.
                let resp = StatusCode::PAYLOAD_TOO_LARGE.into_response();
                let _ = write(io, &mut out, &mut buf, resp, true).await;
                return Served::Closed;
            }
            *prefix = buf.freeze();
            return Served::HandOver;
        };
        // Behind a closed gate, hyper's path: it reads the caller's headers by name. With
        // tracing on too: its spans are the response path's.
        if lane == Lane::Passthrough
            && !live.access
            && !live.state.gateway.is_gated()
            && !live.state.gateway.tracer().is_on()
            && crate::passthrough::raw::plain_target(&buf[head.path.clone()])
        {
            let served = pass_through(io, &mut out, &mut buf, head, front, &live, &mut w);
            if !served.await || w.stopping {
                return Served::Closed;
            }
            continue;
        }
        let bytes = buf.split_to(head.len).freeze();
        let rpc = lane == Lane::Rpc;
        let (uri, raw, map) = match split_head(bytes, head.path.clone(), head.headers, rpc) {
            Ok(parts) => parts,
            Err(bytes) => {
                *prefix = rejoin(&bytes, &buf);
                return Served::HandOver;
            }
        };
        // The body: the RPC lane's is read here, the pass-through's has arrived.
        let read = match lane {
            // Over the bound: answered 413 unread, and the connection closed after.
            Lane::Rpc if head.body > live.state.max_body => {
                Some(Err(GatewayError::PayloadTooLarge {
                    limit: live.state.max_body,
                }))
            }
            Lane::Rpc if buf.len() >= head.body => Some(Ok(buf.split_to(head.body).freeze())),
            Lane::Rpc => {
                match read_body(io, &mut buf, head.body, live.state.body_timeout, &mut w).await {
                    Some(read) => Some(read),
                    None => return Served::Closed,
                }
            }
            _ => None,
        };
        let wait = Watch {
            flag: &w.flag,
            stopping: &mut w.stopping,
            complete: !matches!(read, Some(Err(_))),
        };
        let written = match read {
            // A call to an RPC path: answered from its reply, its head written here.
            Some(read) => {
                let call = front.rpc_reply(live, raw, read, head.path);
                answer_reply(io, &mut out, &mut buf, wait, call).await
            }
            // The pass-through's body, `head.body` bytes, through a response, as hyper's
            // connections answer. The URI was parsed: only the RPC lane leaves it out.
            None => {
                let body = Body::from(buf.split_to(head.body).freeze());
                let req = post_request(body, uri.unwrap_or_default(), map.unwrap_or_default());
                let call = front.respond(live, req, lane);
                answer_response(io, &mut out, &mut buf, wait, call).await
            }
        };
        match written {
            Some((Ok(()), false)) => {}
            _ => return Served::Closed,
        }
    }
}

/// What [`next_head`] makes of the bytes so far.
enum Next {
    Head(Head),
    /// The connection is served no further here (`HandOver`: its bytes are in `prefix`).
    End(Served),
    /// More bytes are needed (room for them is reserved).
    More,
}

/// The next request's head in `buf`, if it is whole; one hyper serves hands the connection
/// over, with `buf` moved to `prefix`; the gateway stopping between requests ends it.
#[inline(always)]
fn next_head(buf: &mut BytesMut, prefix: &mut Bytes, stopping: bool) -> Next {
    if !buf.is_empty() {
        match parse(buf) {
            Parsed::Head(h) => return Next::Head(h),
            Parsed::Other => {
                *prefix = std::mem::take(buf).freeze();
                return Next::End(Served::HandOver);
            }
            Parsed::Partial => {}
        }
    }
    if stopping && buf.is_empty() {
        return Next::End(Served::Closed);
    }
    buf.reserve(4096);
    Next::More
}

/// The body of `len` bytes, read within `timeout`: the body's wait of [`serve`], apart because
/// most bodies arrive with their head and never wait. `None`: the client left.
async fn read_body<S, F>(
    io: &mut S,
    buf: &mut BytesMut,
    len: usize,
    timeout: Duration,
    w: &mut Waits<'_, F>,
) -> Option<Result<Bytes, GatewayError>>
where
    S: AsyncRead + Unpin,
    F: std::future::Future,
{
    w.until(timeout);
    let timed_out = Err(GatewayError::BodyTimeout {
        timeout_ms: timeout.as_millis() as u64,
    });
    buf.reserve(len - buf.len());
    while buf.len() < len {
        read_more!(io, &mut *buf, w, return Some(timed_out), return None);
    }
    Some(Ok(buf.split_to(len).freeze()))
}

/// Answers a call from its reply, its head written here, while the client is watched; its
/// access line written after, when the log is on. The connection is to close after it (the
/// `bool`) when the gateway stops or the body was not whole. `None`: the client left.
async fn answer_reply<S>(
    io: &mut S,
    out: &mut Vec<u8>,
    buf: &mut BytesMut,
    wait: Watch<'_>,
    call: RpcCall,
) -> Option<(Result<(), answer::Broken>, bool)>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let RpcCall {
        trace,
        state,
        span,
        extras,
        call,
    } = call;
    let noting = extras.as_ref().is_some_and(|e| e.access.is_some());
    let call = std::pin::pin!(crate::http::scope::run(trace, state, noting, span, call));
    let ((reply, request_id), note, span) =
        watch_client(call, io, buf, wait.flag, wait.stopping, wait.complete).await?;
    let status = reply.status;
    // The span ends once the answer is written (a stream's, when the stream ends).
    let _span = span.map(|s| s.answered(status.as_u16()));
    let close = *wait.stopping || !wait.complete;
    let (access, cors) = match extras {
        Some(extras) => (extras.access, extras.cors),
        None => (None, None),
    };
    let (written, sent) = write_reply(io, out, buf, reply, &request_id, cors.as_ref(), close).await;
    if let Some(arrival) = access {
        arrival.answered(status, &trace, note).emit(sent);
    }
    Some((written, close))
}

/// Answers a pass-through request through its response, as hyper's connections answer; as
/// [`answer_reply`] otherwise.
async fn answer_response<S>(
    io: &mut S,
    out: &mut Vec<u8>,
    buf: &mut BytesMut,
    wait: Watch<'_>,
    call: super::ConnServiceFuture,
) -> Option<(Result<(), answer::Broken>, bool)>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let resp = watch_client(call, io, buf, wait.flag, wait.stopping, wait.complete).await?;
    let resp = match resp {
        Ok(r) => r,
        Err(never) => match never {},
    };
    let close = *wait.stopping || !wait.complete;
    Some((write(io, out, buf, resp, close).await, close))
}

/// What an answer's wait on the client reads and sets: the gateway's stop flag, whether the
/// stop was seen, whether the call's body arrived whole.
struct Watch<'a> {
    flag: &'a watch::Receiver<bool>,
    stopping: &'a mut bool,
    complete: bool,
}

/// The lane of a parsed head when this loop serves it, `None` when hyper does: the RPC lane
/// (a body over `server.max_body_bytes` is answered 413 unread), or the pass-through with its
/// body already whole (hyper's body streams one still arriving).
#[inline]
fn lane_served(live: &super::Live, buf: &[u8], head: &Head) -> Option<Lane> {
    let target = std::str::from_utf8(&buf[head.path.clone()]).ok()?;
    let lane = live.lane(&Method::POST, uri_path(target));
    let ours = match lane {
        Lane::Rpc => true,
        // `head.body` is the client's number, up to `usize::MAX`: compared with what is left
        // after the head (never less than nothing), it cannot wrap.
        Lane::Passthrough => buf.len() - head.len >= head.body,
        Lane::Router => false,
    };
    ours.then_some(lane)
}

/// A head's bytes as what the call reads: its target as a `Uri` (left out for the RPC lane's
/// plain target, which the URI parser takes: a call answered from its reply builds no request
/// object), its headers where they arrived (read by name where the call needs them), and a
/// header map only for the pass-through, answered through a response. `Err` gives the bytes
/// back when the target or a header is one hyper must refuse.
#[allow(clippy::type_complexity)]
// Always inlined: its parts are large, and returned from a call they are copied out again
// (`benches/callgrind.sh proxy`).
#[inline(always)]
fn split_head(
    bytes: Bytes,
    path: std::ops::Range<usize>,
    headers: Vec<(axum::http::HeaderName, std::ops::Range<usize>)>,
    rpc: bool,
) -> Result<(Option<Uri>, RawHead, Option<axum::http::HeaderMap>), Bytes> {
    let uri = if rpc && crate::passthrough::raw::plain_target(&bytes[path.clone()]) {
        None
    } else {
        match Uri::from_maybe_shared(bytes.slice(path)) {
            Ok(uri) => Some(uri),
            Err(_) => return Err(bytes),
        }
    };
    let raw = RawHead::new(bytes, headers);
    let map = match rpc {
        true => None,
        false => match raw.to_map() {
            Ok(map) => Some(map),
            Err(_) => return Err(raw.into_bytes()),
        },
    };
    Ok((uri, raw, map))
}

/// The request hyper would have made of a pass-through `POST` this loop took.
fn post_request(body: Body, uri: Uri, headers: axum::http::HeaderMap) -> Request<Body> {
    let mut req = Request::new(body);
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri;
    *req.version_mut() = Version::HTTP_11;
    *req.headers_mut() = headers;
    req
}

/// Awaits `call` while the client is watched: its leaving cancels the call (as hyper does;
/// `None`), what it sends meanwhile is kept in `buf` for the next request (unless the body is
/// not `complete`), and the gateway's stop (`stopped`, read when the call is done) is noted in
/// `stopping`.
async fn watch_client<S, F>(
    call: F,
    io: &mut S,
    buf: &mut BytesMut,
    stopped: &watch::Receiver<bool>,
    stopping: &mut bool,
    complete: bool,
) -> Option<F::Output>
where
    S: AsyncRead + Unpin,
    F: std::future::Future + Unpin,
{
    let mut call = call;
    loop {
        if buf.len() < MAX_AHEAD {
            buf.reserve(1024);
        }
        tokio::select! {
            biased;
            r = &mut call => {
                *stopping = *stopping || *stopped.borrow();
                return Some(r);
            }
            n = io.read_buf(buf), if complete && buf.len() < MAX_AHEAD => match n {
                Ok(n) if n > 0 => {}
                _ => return None,
            },
        }
    }
}

/// A head already split off, put back before the bytes that followed it: all of it for hyper.
fn rejoin(head: &Bytes, rest: &BytesMut) -> Bytes {
    let mut back = BytesMut::with_capacity(head.len() + rest.len());
    back.extend_from_slice(head);
    back.extend_from_slice(rest);
    back.freeze()
}

/// A pass-through `POST` whose head and body have arrived (the head at the start of `buf`,
/// parsed as `head`), relayed with both heads kept as bytes: no header maps, no request or
/// response objects, no router (see [`crate::passthrough::raw`]). The client is watched while
/// the upstream answers, as in [`serve`]. `false` when the connection is done.
#[allow(clippy::too_many_arguments)]
async fn pass_through<S, F>(
    io: &mut S,
    out: &mut Vec<u8>,
    buf: &mut BytesMut,
    head: Head,
    front: &ConnService,
    live: &super::Live,
    w: &mut Waits<'_, F>,
) -> bool
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let origin = crate::passthrough::Origin {
        peer: front.peer.map(|p| p.0),
        tls: front.tls,
        edits: None,
    };
    let ready = {
        let bytes = &buf[..head.len];
        let req = crate::passthrough::raw::Request {
            bytes,
            target: head.path.clone(),
            headers: &head.headers,
        };
        let path = std::str::from_utf8(&bytes[head.path.clone()]).unwrap_or("/");
        let body = &buf[head.len..head.len + head.body];
        live.state
            .passthrough
            .ready(uri_path(path), &req, body, origin)
    };
    buf.advance(head.len + head.body);
    out.clear();
    let answer = match ready {
        Some(ready) => {
            let call = std::pin::pin!(ready.relay(out));
            match watch_client(call, io, buf, &w.flag, &mut w.stopping, true).await {
                Some(r) => r,
                None => return false,
            }
        }
        None => Err(StatusCode::NOT_FOUND.into_response()),
    };
    let close = w.stopping;
    let relayed = match answer {
        Ok(r) => r,
        Err(resp) => return write(io, out, buf, resp, close).await.is_ok(),
    };
    let status = relayed.status;
    let bodiless = bodiless(status);
    use crate::passthrough::exchange::RelayedBody;
    let (body, length) = match relayed.body {
        RelayedBody::Whole(b) => {
            let n = b.len() as u64;
            (Body::from(b), Some(n))
        }
        RelayedBody::Stream(b, n) => (b, n),
    };
    end_head(out, (!bodiless).then_some(length), relayed.dated, close);
    let body = if bodiless { Body::empty() } else { body };
    let chunked = !bodiless && length.is_none();
    write_body(io, out, buf, body, chunked, &mut 0)
        .await
        .is_ok()
}

/// The path of a request target (before its query).
fn uri_path(target: &str) -> &str {
    target.split_once('?').map_or(target, |(p, _)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_bytes_tell_a_post_cheaply() {
        assert!(may_be_post(b"PO"));
        assert!(may_be_post(b"POST /rpc"));
        assert!(!may_be_post(b"GET /"));
    }
}
