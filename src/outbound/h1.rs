//! One HTTP/1.1 exchange on one outbound connection: the request written in one buffer, the
//! answer's head parsed by `httparse`, its body framed by RFC 9112 §6.3.
//!
//! The request the gateway sends most (a `POST` of a JSON body, answered with a body read
//! whole) is laid out here in one buffer, and every answer is read here, so the gateway speaks
//! HTTP/1.1 itself instead of going through a general client: no request and response objects,
//! no channel between the caller and a connection task, no header map (but for the requests
//! that ask for the answer's headers, [`super::Request`]'s). What a general client would do with an answer's framing is done here in
//! full: `Content-Length`, `chunked` (extensions and trailers skipped), close-delimited bodies,
//! interim `1xx` answers skipped, `Connection: close` and HTTP/1.0 honoured.

use std::io;

use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::wire::head_writer::content_length;

/// Largest answer head (status line and headers) read.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// Most headers an answer may carry.
const MAX_HEADERS: usize = 64;
/// Largest chunk-size line or trailer section of a chunked body.
const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Read buffer reserved before each read.
const READ_CHUNK: usize = 8 * 1024;
/// Buffers larger than this are not kept with an idle connection.
const KEEP_BUFFER: usize = 64 * 1024;

/// The request line's and headers' parts that vary by upstream and call.
#[derive(Debug)]
pub struct Head<'a> {
    /// The request target (origin form).
    pub path: &'a str,
    /// The `Host` header.
    pub host: &'a str,
    /// An `Authorization` header, already checked to be a valid header value.
    pub authorization: Option<&'a str>,
    /// A `traceparent` header value.
    pub traceparent: Option<&'a [u8; 55]>,
    /// The client's `tracestate`, passed on as it came (a valid header value).
    pub tracestate: Option<&'a [u8]>,
    /// `auth.identity_header` and the verified caller's id (a valid header value).
    pub identity: Option<(&'a str, &'a str)>,
}

/// An upstream's complete answer.
#[derive(Debug)]
pub struct Answer {
    /// Its status code.
    pub status: StatusCode,
    /// Its body, de-chunked.
    pub body: Bytes,
    /// Whether the connection may carry another request.
    pub reusable: bool,
}

/// How an exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No connection could be opened.
    #[error("connect to {addr}: {source}")]
    Connect {
        /// `host:port`.
        addr: String,
        /// Why.
        source: io::Error,
    },
    /// The request could not be written whole, so the upstream cannot have acted on it.
    #[error("the request could not be sent: {0}")]
    NotSent(io::Error),
    /// Reading the answer failed.
    #[error("reading the answer: {0}")]
    Read(io::Error),
    /// The upstream closed the connection before its answer was complete.
    #[error("connection closed before the answer was complete")]
    Closed,
    /// The answer is not valid HTTP/1.1.
    #[error("invalid HTTP answer: {0}")]
    Malformed(&'static str),
    /// The body is larger than allowed; the status is the answer's own.
    #[error("answer exceeds {limit} bytes")]
    TooLarge {
        /// The answer's status code.
        status: StatusCode,
        /// The limit.
        limit: usize,
    },
}

/// How an answer's body is delimited. Public for the fuzz targets (`fuzz/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (204, 304).
    Empty,
    /// `Content-Length`.
    Length(usize),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Read until the upstream closes.
    Close,
}

/// A parsed answer head. Public for the fuzz targets (`fuzz/`).
#[derive(Debug, PartialEq, Eq)]
pub struct Parsed {
    /// The status code.
    pub status: StatusCode,
    /// Bytes of the head, blank line included.
    pub len: usize,
    /// How the body is delimited.
    pub framing: Framing,
    /// Whether the connection may carry another request after this answer.
    pub keep_alive: bool,
    /// Whether the answer said the connection ends (`Connection: close`, or HTTP/1.0 without
    /// keep-alive): a pipelined connection then stops sending the requests behind it.
    pub ends: bool,
}

/// Parses an answer head from the front of `buf`; `None` when it is not complete yet. Public for
/// the fuzz targets (`fuzz/`).
pub fn parse_head(buf: &[u8]) -> Result<Option<Parsed>, Error> {
    parse_head_with(buf, |_, _| {})
}

/// [`parse_head`], handing each header of a complete head to `on_header` (name, value).
pub fn parse_head_with(
    buf: &[u8],
    mut on_header: impl FnMut(&[u8], &[u8]),
) -> Result<Option<Parsed>, Error> {
    // Header slots left uninitialised: httparse fills what it uses (64 zeroed slots cost more
    // than parsing a short head).
    let mut headers =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut headers,
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(Error::Malformed("too many headers")),
        Err(_) => return Err(Error::Malformed("unparsable status line or header")),
    };
    let status = resp
        .code
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or(Error::Malformed("no valid status code"))?;
    let mut keep_alive = resp.version == Some(1);
    let mut length: Option<usize> = None;
    let mut chunked = false;
    let mut encoded = false;
    let mut connection = crate::http::headers::ConnectionOptions::default();
    for h in resp.headers.iter() {
        on_header(h.name.as_bytes(), h.value);
        if h.name.eq_ignore_ascii_case("content-length") {
            // Plain digits (nearly every answer) as they are; else trimmed of what httparse
            // leaves (Unicode white space around the digits), as this reader always allowed.
            let n = content_length(h.value)
                .or_else(|| content_length(std::str::from_utf8(h.value).ok()?.trim().as_bytes()))
                .ok_or(Error::Malformed("invalid Content-Length"))?;
            if length.is_some_and(|m| m != n) {
                return Err(Error::Malformed("conflicting Content-Length values"));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            encoded = true;
            // Only the last coding decides whether the body is chunked.
            chunked = last_token(h.value).eq_ignore_ascii_case(b"chunked");
        } else if h.name.eq_ignore_ascii_case("connection") {
            connection.read(h.value);
        }
    }
    // `close` ends the connection whatever else is said; HTTP/1.0 keeps it only when asked.
    if connection.close {
        keep_alive = false;
    } else if connection.keep_alive && resp.version == Some(0) {
        keep_alive = true;
    }
    let framing = match status.as_u16() {
        100..=199 | 204 | 304 => Framing::Empty,
        _ if encoded && chunked => Framing::Chunked,
        _ if encoded => Framing::Close,
        _ => length.map_or(Framing::Close, Framing::Length),
    };
    // A body framed both ways, or by the close, leaves the connection unusable.
    if (encoded && length.is_some()) || framing == Framing::Close {
        keep_alive = false;
    }
    Ok(Some(Parsed {
        status,
        len,
        framing,
        keep_alive,
        ends: !keep_alive && (connection.close || resp.version == Some(0)),
    }))
}

/// The last non-empty comma-separated token of a header value, trimmed (empty when none).
fn last_token(value: &[u8]) -> &[u8] {
    value
        .split(|b| *b == b',')
        .map(<[u8]>::trim_ascii)
        .rfind(|t| !t.is_empty())
        .unwrap_or_default()
}

/// Where a chunked body's decoding stands. Public for the fuzz targets (`fuzz/`).
#[derive(Debug, Default)]
pub struct Chunked {
    /// Bytes of the buffer consumed so far.
    pub pos: usize,
    phase: Phase,
    /// The body decoded so far.
    pub body: Vec<u8>,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Expecting a chunk-size line.
    #[default]
    Size,
    /// Inside a chunk, this many bytes to go.
    Data(usize),
    /// Expecting the CRLF after a chunk's data.
    DataEnd,
    /// After the last chunk: trailer lines until a blank one; bytes of trailers seen.
    Trailers(usize),
}

impl Chunked {
    /// Decodes as much of `buf` as is there. `Ok(true)` once the body is complete (then `pos` is
    /// where it ended), `Ok(false)` when more bytes are needed.
    pub fn advance(&mut self, buf: &[u8], limit: usize, status: StatusCode) -> Result<bool, Error> {
        loop {
            let rest = &buf[self.pos..];
            match self.phase {
                Phase::Size => {
                    let Some(eol) = memchr::memmem::find(rest, b"\r\n") else {
                        return too_long(partial_line_len(rest)).map(|()| false);
                    };
                    // Bounded whether the line arrived whole or in pieces.
                    too_long(eol)?;
                    let size = chunk_size(&rest[..eol])?;
                    self.pos += eol + 2;
                    if size == 0 {
                        self.phase = Phase::Trailers(0);
                    } else if self.body.len().saturating_add(size) > limit {
                        return Err(Error::TooLarge { status, limit });
                    } else {
                        self.body.reserve(size);
                        self.phase = Phase::Data(size);
                    }
                }
                Phase::Data(left) => {
                    let n = left.min(rest.len());
                    self.body.extend_from_slice(&rest[..n]);
                    self.pos += n;
                    if n < left {
                        self.phase = Phase::Data(left - n);
                        return Ok(false);
                    }
                    self.phase = Phase::DataEnd;
                }
                Phase::DataEnd => {
                    if rest.len() < 2 {
                        return Ok(false);
                    }
                    if &rest[..2] != b"\r\n" {
                        return Err(Error::Malformed("chunk data not followed by CRLF"));
                    }
                    self.pos += 2;
                    self.phase = Phase::Size;
                }
                Phase::Trailers(seen) => {
                    let Some(eol) = memchr::memmem::find(rest, b"\r\n") else {
                        return too_long(seen + partial_line_len(rest)).map(|()| false);
                    };
                    self.pos += eol + 2;
                    if eol == 0 {
                        return Ok(true);
                    }
                    too_long(seen + eol)?;
                    self.phase = Phase::Trailers(seen + eol + 2);
                }
            }
        }
    }
}

/// The least length the line at the front of `rest` will have, its CRLF not arrived yet: a
/// trailing CR may be the first half of it.
fn partial_line_len(rest: &[u8]) -> usize {
    rest.len() - usize::from(rest.last() == Some(&b'\r'))
}

fn too_long(n: usize) -> Result<(), Error> {
    match n > MAX_CHUNK_LINE {
        true => Err(Error::Malformed("chunk-size line or trailers too long")),
        false => Ok(()),
    }
}

/// The size in a chunk-size line (`HEX [; ext]`).
fn chunk_size(line: &[u8]) -> Result<usize, Error> {
    let hex = line
        .split(|b| *b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    if hex.is_empty() || hex.len() > 15 || !hex.iter().all(u8::is_ascii_hexdigit) {
        return Err(Error::Malformed("invalid chunk size"));
    }
    let hex = std::str::from_utf8(hex).map_err(|_| Error::Malformed("invalid chunk size"))?;
    usize::from_str_radix(hex, 16).map_err(|_| Error::Malformed("invalid chunk size"))
}

/// An open connection to an upstream and its buffers, kept between exchanges.
#[derive(Debug)]
pub struct Conn {
    stream: super::stream::Stream,
    /// Bytes read and not consumed yet.
    read: BytesMut,
    /// The request being written.
    write: Vec<u8>,
}

impl Conn {
    /// Wraps a connected stream (Nagle off: a request is written whole, in one call).
    pub fn new(stream: TcpStream) -> Self {
        let _ = stream.set_nodelay(true);
        Self::over(super::stream::Stream::Plain(stream))
    }

    /// Wraps a connection already set up (TLS over TCP, say).
    pub fn over(stream: super::stream::Stream) -> Self {
        Conn {
            stream,
            read: BytesMut::new(),
            write: Vec::new(),
        }
    }

    /// Whether an idle connection is still open: nothing pending on it, not even an EOF. Reads
    /// only when the reactor has seen it readable, so a quiet connection costs no system call.
    pub fn is_open(&self) -> bool {
        self.stream.is_open()
    }

    /// POSTs `body` and reads the whole answer, its body bounded by `limit` bytes. The
    /// request is laid out here and the returned future is [`Conn::round_trip`]'s own, so the
    /// hot path's exchange is one future, not one awaiting another.
    pub fn exchange<'a>(
        &'a mut self,
        head: &Head<'_>,
        body: &[u8],
        limit: usize,
    ) -> impl std::future::Future<Output = Result<Answer, Error>> + Send + 'a {
        self.write_request(head, body);
        self.round_trip(true, limit, None)
    }

    /// Reads the whole answer to a request written: its head (its headers added to `headers`
    /// when given), then its body bounded by `limit` bytes.
    pub fn read_answer<'a>(
        &'a mut self,
        limit: usize,
        headers: Option<&'a mut HeaderMap>,
    ) -> impl std::future::Future<Output = Result<Answer, Error>> + Send + 'a {
        self.round_trip(false, limit, headers)
    }

    /// Sends what `write` holds when `send`, then reads the whole answer: its head (its headers
    /// added to `headers` when given), then its body bounded by `limit` bytes.
    async fn round_trip(
        &mut self,
        send: bool,
        limit: usize,
        headers: Option<&mut HeaderMap>,
    ) -> Result<Answer, Error> {
        if send {
            self.stream
                .write_all(&self.write)
                .await
                .map_err(Error::NotSent)?;
        }
        let parsed = self.read_head(false, headers).await?;
        let status = parsed.status;
        let (body, complete) = match parsed.framing {
            Framing::Empty => (Bytes::new(), true),
            Framing::Length(n) if n > limit => return Err(Error::TooLarge { status, limit }),
            Framing::Length(n) => {
                // Room for the whole body at once, rather than growing a read at a time.
                self.read.reserve(n.saturating_sub(self.read.len()));
                while self.read.len() < n {
                    self.fill().await?;
                }
                (self.read.split_to(n).freeze(), true)
            }
            Framing::Chunked => {
                let mut c = Chunked::default();
                while !c.advance(&self.read, limit, status)? {
                    self.fill().await?;
                }
                self.read.advance(c.pos);
                (Bytes::from(c.body), true)
            }
            Framing::Close => {
                loop {
                    if self.read.len() > limit {
                        return Err(Error::TooLarge { status, limit });
                    }
                    self.read.reserve(READ_CHUNK);
                    let n = self
                        .stream
                        .read_buf(&mut self.read)
                        .await
                        .map_err(Error::Read)?;
                    if n == 0 {
                        break;
                    }
                }
                (self.read.split().freeze(), false)
            }
        };
        self.trim();
        Ok(Answer {
            status,
            body,
            // Bytes the upstream sent beyond its answer mean the connection's state is unknown.
            reusable: complete && parsed.keep_alive && self.read.is_empty(),
        })
    }

    /// Reads an answer's head and consumes it, skipping interim answers (`100 Continue`, `103
    /// Early Hints`); a `101 Switching Protocols` is the answer when `upgrade`, an error
    /// otherwise. The answer's headers are added to `headers` when given (a valid name and
    /// value each; others are left out).
    pub async fn read_head(
        &mut self,
        upgrade: bool,
        mut headers: Option<&mut HeaderMap>,
    ) -> Result<Parsed, Error> {
        let parsed = loop {
            if self.read.is_empty() {
                self.fill().await?;
                continue;
            }
            let seen = parse_head_with(&self.read, |name, value| {
                if let Some(map) = headers.as_deref_mut() {
                    if let (Ok(n), Ok(v)) =
                        (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
                    {
                        map.append(n, v);
                    }
                }
            })?;
            match seen {
                Some(p) if p.status == StatusCode::SWITCHING_PROTOCOLS => match upgrade {
                    true => break p,
                    false => return Err(Error::Malformed("101 Switching Protocols")),
                },
                Some(p) if p.status.is_informational() => {
                    self.read.advance(p.len);
                    if let Some(map) = headers.as_deref_mut() {
                        map.clear();
                    }
                }
                Some(p) => break p,
                None if self.read.len() > MAX_HEAD => {
                    return Err(Error::Malformed("answer head too large"))
                }
                None => self.fill().await?,
            }
        };
        self.read.advance(parsed.len);
        Ok(parsed)
    }

    /// Writes `bytes` whole; a failure means the upstream may not have all of them.
    pub async fn send(&mut self, bytes: &[u8]) -> Result<(), Error> {
        self.stream.write_all(bytes).await.map_err(Error::NotSent)
    }

    /// The bytes read and not consumed yet.
    pub fn received(&mut self) -> &mut BytesMut {
        &mut self.read
    }

    /// Reads more; `Ok(0)` when the upstream closed.
    pub async fn read_more(&mut self) -> Result<usize, Error> {
        self.read.reserve(READ_CHUNK);
        self.stream
            .read_buf(&mut self.read)
            .await
            .map_err(Error::Read)
    }

    /// The connection and the bytes read from it and not consumed (for a tunnel).
    pub fn into_parts(self) -> (super::stream::Stream, BytesMut) {
        (self.stream, self.read)
    }

    /// Lets go of buffers a large exchange grew, so an idle pooled connection holds little.
    pub fn trim(&mut self) {
        if self.write.capacity() > KEEP_BUFFER {
            self.write = Vec::new();
        }
        if self.read.is_empty() && self.read.capacity() > KEEP_BUFFER {
            self.read = BytesMut::new();
        }
    }

    /// Lays the request out in the write buffer: request line, headers, body.
    fn write_request(&mut self, head: &Head<'_>, body: &[u8]) {
        self.write.clear();
        lay_out(&mut self.write, head, body);
    }

    /// Reads more of the answer; the upstream closing now cuts the answer short.
    pub async fn fill(&mut self) -> Result<(), Error> {
        self.read.reserve(READ_CHUNK);
        match self.stream.read_buf(&mut self.read).await {
            Ok(0) => Err(Error::Closed),
            Ok(_) => Ok(()),
            Err(e) => Err(Error::Read(e)),
        }
    }
}

/// Appends a request to `w`: request line, headers, body (one layout for the pooled exchange
/// and the pipelined connection, `super::pipeline`). Reserves the whole request first: the
/// pipelined path lays each call out in a fresh `Vec`, which an estimate short by the
/// `traceparent` line would make grow once more per call (a `realloc`: docs/performance.md).
#[inline]
pub(crate) fn lay_out(w: &mut Vec<u8>, head: &Head<'_>, body: &[u8]) {
    const FIXED: usize = "POST  HTTP/1.1\r\nhost: \r\ncontent-type: application/json\r\naccept: application/json\r\ncontent-length: \r\n\r\n".len()
        + 20;
    let authorization = head
        .authorization
        .map_or(0, |a| "authorization: \r\n".len() + a.len());
    let traceparent = head
        .traceparent
        .map_or(0, |t| "traceparent: \r\n".len() + t.len());
    let tracestate = head
        .tracestate
        .map_or(0, |t| "tracestate: \r\n".len() + t.len());
    let identity = head.identity.map_or(0, |(n, v)| n.len() + v.len() + 4);
    w.reserve(
        FIXED
            + head.path.len()
            + head.host.len()
            + authorization
            + traceparent
            + tracestate
            + identity
            + body.len(),
    );
    w.extend_from_slice(b"POST ");
    w.extend_from_slice(head.path.as_bytes());
    w.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    w.extend_from_slice(head.host.as_bytes());
    w.extend_from_slice(b"\r\ncontent-type: application/json\r\naccept: application/json\r\n");
    if let Some(a) = head.authorization {
        w.extend_from_slice(b"authorization: ");
        w.extend_from_slice(a.as_bytes());
        w.extend_from_slice(b"\r\n");
    }
    if let Some(t) = head.traceparent {
        w.extend_from_slice(b"traceparent: ");
        w.extend_from_slice(&t[..]);
        w.extend_from_slice(b"\r\n");
    }
    if let Some(t) = head.tracestate {
        w.extend_from_slice(b"tracestate: ");
        w.extend_from_slice(t);
        w.extend_from_slice(b"\r\n");
    }
    if let Some((name, value)) = head.identity {
        w.extend_from_slice(name.as_bytes());
        w.extend_from_slice(b": ");
        w.extend_from_slice(value.as_bytes());
        w.extend_from_slice(b"\r\n");
    }
    w.extend_from_slice(b"content-length: ");
    w.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
    w.extend_from_slice(b"\r\n\r\n");
    w.extend_from_slice(body);
}

/// Whether `v` may be sent as a header value (the rule of `http::HeaderValue`): no control
/// characters but tab, so no line break can start a header of the caller's choosing.
pub fn is_header_value(v: &str) -> bool {
    v.bytes().all(|b| b == b'\t' || (b >= b' ' && b != 0x7f))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Parsed {
        parse_head(text.as_bytes())
            .unwrap()
            .expect("a complete head")
    }

    #[test]
    fn a_request_is_laid_out_in_the_room_reserved_for_it() {
        // A fresh `Vec` (the pipelined path's) gets its room once: a short estimate would
        // make it grow, doubling its capacity.
        let traceparent = [b'0'; 55];
        let body = vec![b'x'; 12_345];
        let full = Head {
            path: "/a2a/some/longer/path",
            host: "upstream.example:8080",
            authorization: Some("Bearer abcdefghijklmnopqrstuvwxyz0123456789"),
            traceparent: Some(&traceparent),
            tracestate: Some(b"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"),
            identity: Some(("x-caller-id", "ci-bot")),
        };
        let bare = Head {
            authorization: None,
            traceparent: None,
            tracestate: None,
            identity: None,
            ..full
        };
        for head in [full, bare] {
            let mut w = Vec::new();
            lay_out(&mut w, &head, &body);
            let text = String::from_utf8_lossy(&w);
            assert!(
                text.starts_with("POST /a2a/some/longer/path HTTP/1.1\r\n"),
                "{text}"
            );
            assert!(
                text.contains("\r\ncontent-length: 12345\r\n\r\nxxx"),
                "{text}"
            );
            assert_eq!(
                text.contains("\r\ntracestate: congo=t61rcWkgMzE,rojo=00f067aa0ba902b7\r\n"),
                head.tracestate.is_some(),
                "{text}"
            );
            assert_eq!(
                text.contains("\r\nx-caller-id: ci-bot\r\ncontent-length"),
                head.identity.is_some(),
                "{text}"
            );
            // Only the content length's unused digits are left over.
            assert!(
                w.capacity() - w.len() <= 20,
                "{} for {}",
                w.capacity(),
                w.len()
            );
        }
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Length(12), true));
        let h = head("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, Chunked\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Chunked, true));
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Close, false));
        let h = head("HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Chunked, false));
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Close, false));
        let h = head("HTTP/1.1 204 No Content\r\ncontent-length: 9\r\n\r\n");
        assert_eq!(h.framing, Framing::Empty);
        let h =
            head("HTTP/1.1 200 OK\r\nconnection: Keep-Alive, Close\r\ncontent-length: 0\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n");
        assert!(h.keep_alive);
        assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\ncontent-le").unwrap(), None);
        for bad in [
            "HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 1 2\r\n\r\n",
            "SMTP ready\r\n\r\n",
        ] {
            assert!(parse_head(bad.as_bytes()).is_err(), "{bad}");
        }
        let same = head("HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\n");
        assert_eq!(same.framing, Framing::Length(2));
    }

    #[test]
    fn chunked_bodies_decode_whole_or_in_pieces() {
        let wire = b"4;ext=1\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nx-trailer: 1\r\n\r\nNEXT";
        let mut c = Chunked::default();
        assert!(c.advance(wire, 1 << 20, StatusCode::OK).unwrap());
        assert_eq!(c.body, b"Wikipedia in\r\n\r\nchunks.");
        assert_eq!(&wire[c.pos..], b"NEXT");
        // Fed one byte at a time, the same body comes out.
        let mut c = Chunked::default();
        let mut done = false;
        for end in 1..=wire.len() - 4 {
            done = c.advance(&wire[..end], 1 << 20, StatusCode::OK).unwrap();
        }
        assert!(done);
        assert_eq!(c.body, b"Wikipedia in\r\n\r\nchunks.");
        // Bounded, and strict about its framing.
        let mut c = Chunked::default();
        assert!(matches!(
            c.advance(b"10\r\n", 8, StatusCode::OK),
            Err(Error::TooLarge {
                status: StatusCode::OK,
                limit: 8
            })
        ));
        for bad in [
            &b"zz\r\n"[..],
            b"\r\n",
            b"3\r\nabcX\r\n",
            b"fffffffffffffffff\r\n",
        ] {
            assert!(
                matches!(
                    Chunked::default().advance(bad, 1 << 20, StatusCode::OK),
                    Err(Error::Malformed(_))
                ),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn header_values_cannot_carry_line_breaks() {
        assert!(is_header_value("Bearer abc.def"));
        assert!(!is_header_value("Bearer x\r\nx-admin: 1"));
        assert!(!is_header_value("a\u{7f}"));
        assert!(is_header_value("caf\u{e9}"));
    }
}
