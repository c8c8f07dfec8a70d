//! Event-stream GETs on HTTP/1 served straight on the socket, without a hyper connection.
//!
//! A gateway's long-lived connections are its SSE subscribers, and most of them sit idle between
//! events. hyper keeps about 24 KB of buffers per HTTP/1 connection for its whole life (a read
//! buffer it grows to 16 KB while watching for the client's close, an 8 KB head buffer), most
//! of an idle subscriber's memory (docs/performance.md). A stream needs none of it once its
//! head is read: this module reads the head into a buffer it frees, and writes the stream's
//! chunks as they come.
//!
//! It takes only what it fully understands: a `GET` with no body, no `Upgrade` or `Expect`, HTTP
//! 1.0 or 1.1, whose target the caller's router recognises as a stream. Anything else is handed
//! back, bytes and all, to hyper. The connection closes when the stream ends (`Connection:
//! close`), so no second request shares it.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Uri};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::request_head::{parse_as, Parsed, Serves, MAX_HEAD};

/// A request this module may serve: a body-less `GET`.
#[derive(Debug)]
pub(crate) struct Get {
    /// The request target.
    pub uri: Uri,
    /// Its headers.
    pub headers: HeaderMap,
    /// HTTP/1.0 (no chunked encoding: the stream is delimited by the close).
    pub http10: bool,
}

/// Whether a connection's first bytes may start a `GET` (cheap: the `POST /rpc` path is one
/// byte compare away from unaffected).
pub(crate) fn may_be_get(first: &[u8]) -> bool {
    b"GET /".starts_with(&first[..first.len().min(5)])
}

/// What [`read_get`] found.
#[derive(Debug)]
pub(crate) enum Head {
    /// A request this module may serve, and everything read.
    Get(Get, Bytes),
    /// Something else, for hyper: everything read.
    Other(Bytes),
    /// The peer closed, or did not finish its head within the deadline: close the connection.
    Gone,
}

/// Reads a request head after `prefix` within `deadline` (the header read timeout, as hyper
/// would apply it).
pub(crate) async fn read_get(io: &mut TcpStream, prefix: Bytes, deadline: Duration) -> Head {
    let mut buf = BytesMut::from(&prefix[..]);
    let read = async {
        loop {
            if let Some(end) = memchr::memmem::find(&buf, b"\r\n\r\n") {
                return Some(Some(end + 4));
            }
            if buf.len() >= MAX_HEAD {
                return Some(None);
            }
            buf.reserve(1024);
            match io.read_buf(&mut buf).await {
                Ok(n) if n > 0 => {}
                _ => return None,
            }
        }
    };
    let end = match tokio::time::timeout(deadline, read).await {
        Ok(Some(Some(end))) => end,
        // Too large for here: hyper reads on and answers it.
        Ok(Some(None)) => return Head::Other(buf.freeze()),
        Ok(None) | Err(_) => return Head::Gone,
    };
    // Pipelined bytes after a stream's head have no meaning: hyper serves those connections.
    match (end == buf.len()).then(|| parse(&buf[..end])).flatten() {
        Some(get) => Head::Get(get, buf.freeze()),
        None => Head::Other(buf.freeze()),
    }
}

/// The head as a body-less GET, or `None` for anything hyper should handle: read by the
/// gateway's one head parser ([`super::request_head`]), its headers then put in a map for the router.
fn parse(head: &[u8]) -> Option<Get> {
    let Parsed::Head(h) = parse_as(head, Serves::Gets) else {
        return None;
    };
    let uri = Uri::from_maybe_shared(Bytes::copy_from_slice(&head[h.path.clone()])).ok()?;
    uri.path().starts_with('/').then_some(())?;
    let mut headers = HeaderMap::with_capacity(h.headers.len());
    for (name, value) in h.headers {
        headers.append(name, HeaderValue::from_bytes(&head[value]).ok()?);
    }
    Some(Get {
        uri,
        headers,
        http10: h.http10,
    })
}

/// Writes `resp` and its body on `io` (to an HTTP/1.0 client when `http10`), then closes;
/// returns the body bytes written. A stream ends when its body does, or when the client closes
/// its side (watched meanwhile, so a subscriber that left frees its place). Nothing but the
/// body and the socket is held while it streams (an idle subscriber's memory).
pub(crate) async fn write(mut io: TcpStream, http10: bool, resp: Response) -> u64 {
    let (parts, body) = resp.into_parts();
    let known = body_len(&body);
    let chunked = known.is_none() && !http10;
    let mut head = Vec::with_capacity(256);
    let version: &[u8] = if http10 { b"HTTP/1.0" } else { b"HTTP/1.1" };
    crate::wire::head_writer::status_line(&mut head, version, parts.status);
    crate::wire::head_writer::answer_headers(&mut head, &parts.headers, &[]);
    head.extend_from_slice(b"date: ");
    super::date::write_date(&mut head);
    head.extend_from_slice(b"\r\nconnection: close\r\n");
    match known {
        Some(n) => head.extend_from_slice(format!("content-length: {n}\r\n").as_bytes()),
        None if chunked => head.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        None => {}
    }
    head.extend_from_slice(b"\r\n");
    drop(parts);
    if io.write_all(&head).await.is_err() {
        return 0;
    }
    let mut sent = 0u64;
    drop(head);
    let (mut rd, mut wr) = io.into_split();
    let mut body = std::pin::pin!(body);
    let mut sink = [0u8; 64];
    // An event-stream client has nothing more to say; one that keeps talking is cut off.
    let mut said = 0usize;
    loop {
        let frame = tokio::select! {
            f = body.frame() => f,
            // The client's side: its close ends the stream.
            n = rd.read(&mut sink) => match n {
                Ok(n) if n > 0 && said + n <= MAX_HEAD => {
                    said += n;
                    continue;
                }
                _ => return sent,
            },
        };
        let Some(Ok(frame)) = frame else {
            break;
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if data.is_empty() {
            continue;
        }
        let written = if chunked {
            let size = crate::wire::head_writer::ChunkSize::new(data.len());
            write_all3(&mut wr, size.as_bytes(), &data, b"\r\n").await
        } else {
            wr.write_all(&data).await
        };
        if written.is_err() {
            return sent;
        }
        sent += data.len() as u64;
    }
    if chunked {
        let _ = wr.write_all(crate::wire::head_writer::LAST_CHUNK).await;
    }
    let _ = wr.shutdown().await;
    sent
}

/// The body's length when it is all known up front (a JSON answer, not a stream).
fn body_len(body: &Body) -> Option<u64> {
    use hyper::body::Body as _;
    body.size_hint().exact()
}

/// Writes three slices with as few syscalls as the socket allows.
async fn write_all3(
    w: &mut tokio::net::tcp::OwnedWriteHalf,
    a: &[u8],
    b: &[u8],
    c: &[u8],
) -> std::io::Result<()> {
    let mut parts = [a, b, c];
    let mut i = 0;
    while i < parts.len() {
        let slices = [
            std::io::IoSlice::new(parts[i]),
            std::io::IoSlice::new(parts.get(i + 1).copied().unwrap_or(&[])),
            std::io::IoSlice::new(parts.get(i + 2).copied().unwrap_or(&[])),
        ];
        let mut n = w.write_vectored(&slices).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while i < parts.len() && n >= parts[i].len() {
            n -= parts[i].len();
            i += 1;
        }
        if i < parts.len() {
            parts[i] = &parts[i][n..];
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_gets_are_taken() {
        let ok =
            parse(b"GET /events?taskId=a HTTP/1.1\r\nhost: x\r\nlast-event-id: 3\r\n\r\n").unwrap();
        assert_eq!(ok.uri.path(), "/events");
        assert_eq!(ok.headers["last-event-id"], "3");
        assert!(!ok.http10);
        assert!(parse(b"GET /events HTTP/1.0\r\n\r\n").unwrap().http10);
        // The absolute form, which a server must accept (RFC 9112 §3.2.2).
        let abs = parse(b"GET http://x/events HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(abs.uri.path(), "/events");
        for refused in [
            &b"POST /events HTTP/1.1\r\n\r\n"[..],
            b"GET /events HTTP/1.1\r\ncontent-length: 0\r\n\r\n",
            b"GET /events HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n",
            b"GET /events HTTP/1.1\r\nupgrade: websocket\r\n\r\n",
            b"GET /events HTTP/1.1\r\nexpect: 100-continue\r\n\r\n",
            b"GET * HTTP/1.1\r\n\r\n",
            b"GET /events HTTP/1.1\r\nbad header\r\n\r\n",
        ] {
            assert!(
                parse(refused).is_none(),
                "{}",
                String::from_utf8_lossy(refused)
            );
        }
    }

    #[test]
    fn the_first_bytes_tell_a_get_cheaply() {
        assert!(may_be_get(b"GET /x"));
        assert!(may_be_get(b"GE"));
        assert!(!may_be_get(b"POST /rpc"));
        assert!(!may_be_get(b"GET  /"));
    }
}
