//! Writing the HTTP/1 loop's answers: a call's [`Reply`] with its head laid out by hand (the
//! RPC lane's one writer), the pass-through's response objects, chunk framing, the `Date`
//! header, and the client watched while a body is awaited. Apart from the loop ([`super`]) so
//! that the one place every answer's head is framed (`status_line`, `end_head`) is read on its
//! own.

use std::pin::Pin;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use bytes::{Bytes, BytesMut};
use futures_util::FutureExt;
use http_body_util::BodyExt;
use hyper::body::Body as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::MAX_AHEAD;
use crate::http::reply::{Reply, ReplyBody};
use crate::wire::head_writer;

/// Answers up to this size are written with their head in one write.
const GATHER: usize = 64 * 1024;

/// Writes a call's `reply` on `io`: the one writer of the RPC lane's answers on HTTP/1, its
/// head laid out here as [`into_response`](super::super::calls::into_response) makes it for
/// hyper (`content-type`, or an event stream's headers, `server-timing`, the reply's headers,
/// `x-request-id`, the CORS headers `cors` when given, the framing, `date`), a JSON body
/// gathered with it when small, a stream's events chunked as they come (the client watched
/// meanwhile, its bytes kept in `ahead`). Also the body's bytes sent, for the access line.
pub(super) async fn write_reply<S>(
    io: &mut S,
    out: &mut Vec<u8>,
    ahead: &mut BytesMut,
    reply: Reply,
    request_id: &super::super::calls::RequestId,
    cors: Option<&HeaderMap>,
    close: bool,
) -> (Result<(), Broken>, u64)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let status = reply.status;
    let bodiless = bodiless(status);
    status_line(out, status);
    let (body, stream) = match reply.body {
        ReplyBody::Json(b) => {
            out.extend_from_slice(b"content-type: application/json\r\n");
            (Some(b), None)
        }
        ReplyBody::Empty => (None, None),
        ReplyBody::Stream(s) => {
            for (name, value) in &crate::events::frames::STREAM_HEADERS {
                head_writer::header_line(out, name.as_str().as_bytes(), value.as_bytes());
            }
            (None, Some(s))
        }
    };
    let at = out.len();
    out.extend_from_slice(b"server-timing: ");
    match crate::http::reply::write_server_timing(out, reply.timing_ms) {
        true => out.extend_from_slice(b"\r\n"),
        false => out.truncate(at),
    }
    if let Some(extra) = &reply.headers {
        head_writer::answer_headers(out, extra, &["content-type", "x-request-id"]);
    }
    head_writer::header_line(out, b"x-request-id", request_id.as_bytes());
    if let Some(cors) = cors {
        head_writer::answer_headers(out, cors, &[]);
    }
    let dated = reply
        .headers
        .as_ref()
        .is_some_and(|h| h.contains_key(axum::http::header::DATE));
    if let Some(stream) = stream {
        end_head(out, Some(None), dated, close);
        let mut sent = 0;
        let written = write_body(io, out, ahead, Body::from_stream(stream), true, &mut sent).await;
        return (written, sent);
    }
    let body = body.filter(|_| !bodiless);
    let length = body.as_ref().map_or(0, Bytes::len) as u64;
    end_head(out, (!bodiless).then_some(Some(length)), dated, close);
    let written = match body {
        Some(b) if out.len() + b.len() > GATHER => match io.write_all(out).await {
            Ok(()) => io.write_all(&b).await,
            failed => failed,
        },
        Some(b) => {
            out.extend_from_slice(&b);
            io.write_all(out).await
        }
        None => io.write_all(out).await,
    };
    let written = match written {
        Ok(()) => io.flush().await,
        failed => failed,
    };
    out.clear();
    (written.map_err(|_| Broken), length)
}

/// Whether an answer of `status` carries no body (RFC 9112 §6.3: 1xx, 204, 304).
pub(super) fn bodiless(status: StatusCode) -> bool {
    status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
}

/// Starts an answer's head in `out` (cleared): its status line.
pub(super) fn status_line(out: &mut Vec<u8>, status: StatusCode) {
    out.clear();
    head_writer::status_line(out, b"HTTP/1.1", status);
}

/// Ends an answer's head: its framing (`None` for a bodiless answer, `Some(None)` for a chunked
/// body, `Some(Some(n))` for `n` bytes), `date` unless the answer has one, `connection: close`
/// when the connection ends with it, and the blank line. One place, so every answer this loop
/// writes is framed alike.
pub(super) fn end_head(
    out: &mut Vec<u8>,
    framing: Option<Option<u64>>,
    has_date: bool,
    close: bool,
) {
    match framing {
        Some(Some(n)) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Some(None) => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        None => {}
    }
    if !has_date {
        out.extend_from_slice(b"date: ");
        crate::http::date::write_date(out);
        out.extend_from_slice(b"\r\n");
    }
    if close {
        out.extend_from_slice(b"connection: close\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Why an answer could not be written whole.
pub(super) struct Broken;

/// Writes `resp` on `io` (its head and a known-length body gathered in `out`), watching the
/// client meanwhile when the body has to be waited for (its leaving ends the answer); bytes it
/// sends are kept in `ahead`. `close` says `connection: close`.
pub(super) async fn write<S>(
    io: &mut S,
    out: &mut Vec<u8>,
    ahead: &mut BytesMut,
    resp: axum::response::Response,
    close: bool,
) -> Result<(), Broken>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (parts, mut body) = resp.into_parts();
    let status = parts.status;
    let bodiless = bodiless(status);
    let declared = parts
        .headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let length = body.size_hint().exact().or(declared);
    let chunked = !bodiless && length.is_none();
    status_line(out, status);
    head_writer::answer_headers(out, &parts.headers, &[]);
    end_head(
        out,
        (!bodiless).then_some(length),
        parts.headers.contains_key(axum::http::header::DATE),
        close,
    );
    if bodiless {
        body = Body::empty();
    }
    write_body(io, out, ahead, body, chunked, &mut 0).await
}

/// Writes what `out` holds (an answer's head), then `body` (chunk-framed when `chunked`),
/// gathered in `out` up to [`GATHER`] bytes, and watching the client meanwhile when the body
/// has to be waited for (see [`write()`]); the body's bytes taken to be written are counted in
/// `sent`.
pub(super) async fn write_body<S>(
    io: &mut S,
    out: &mut Vec<u8>,
    ahead: &mut BytesMut,
    mut body: Body,
    chunked: bool,
    sent: &mut u64,
) -> Result<(), Broken>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    {
        let mut body = Pin::new(&mut body);
        loop {
            let frame = match body.frame().now_or_never() {
                Some(f) => f,
                None => {
                    // The body must be waited for: what is gathered goes out first, and the
                    // client is watched meanwhile.
                    if !out.is_empty() {
                        io.write_all(out).await.map_err(|_| Broken)?;
                        io.flush().await.map_err(|_| Broken)?;
                        out.clear();
                    }
                    tokio::select! {
                        biased;
                        f = body.frame() => f,
                        r = read_ahead(io, ahead) => {
                            r?;
                            continue;
                        }
                    }
                }
            };
            let data = match frame {
                None => break,
                Some(Err(_)) => return Err(Broken),
                Some(Ok(f)) => match f.into_data() {
                    Ok(d) => d,
                    // Trailers: not sent.
                    Err(_) => continue,
                },
            };
            if data.is_empty() {
                continue;
            }
            *sent += data.len() as u64;
            if chunked {
                out.extend_from_slice(head_writer::ChunkSize::new(data.len()).as_bytes());
            }
            if out.len() + data.len() <= GATHER {
                out.extend_from_slice(&data);
            } else {
                io.write_all(out).await.map_err(|_| Broken)?;
                out.clear();
                io.write_all(&data).await.map_err(|_| Broken)?;
            }
            if chunked {
                out.extend_from_slice(b"\r\n");
            }
        }
        if chunked {
            out.extend_from_slice(head_writer::LAST_CHUNK);
        }
    }
    io.write_all(out).await.map_err(|_| Broken)?;
    io.flush().await.map_err(|_| Broken)?;
    out.clear();
    Ok(())
}

/// While an answer's body is awaited: reads what the client sends (kept in `ahead`, up to
/// [`MAX_AHEAD`], then no more is read); `Err` when it leaves. Cancel-safe.
pub(super) async fn read_ahead<S>(io: &mut S, ahead: &mut BytesMut) -> Result<(), Broken>
where
    S: AsyncRead + Unpin,
{
    if ahead.len() >= MAX_AHEAD {
        return std::future::pending().await;
    }
    ahead.reserve(1024);
    match io.read_buf(ahead).await {
        Ok(n) if n > 0 => Ok(()),
        _ => Err(Broken),
    }
}
