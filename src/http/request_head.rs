//! One HTTP/1 request head parser for the gateway's own HTTP/1 paths: the loop that serves
//! `POST`s to the RPC paths and the pass-through (`server::h1`) and the SSE socket writer's
//! `GET`s ([`super::sse_conn`]). httparse reads the head; the rules of what each path serves
//! itself (method, version, framing) are here, and anything else is handed to hyper, which
//! answers what it refuses. Reached by the fuzz target `h1_request` and its regression tests.

use std::ops::Range;

use axum::http::{header, HeaderName};

use super::headers::{X_API_KEY, X_REQUEST_ID};
use super::trace::{TRACEPARENT, TRACESTATE};
use crate::wire::head_writer::content_length;

/// Largest request head read by the gateway's own paths; a larger one goes to hyper (which
/// reads on, and answers it).
pub const MAX_HEAD: usize = 16 * 1024;
/// Most header lines read by them; more go to hyper.
const MAX_HEADERS: usize = 48;

/// A request head one of the gateway's own paths serves, parsed: where its parts lie in the
/// head's bytes.
#[derive(Debug)]
pub struct Head {
    /// The head's length, through its blank line.
    pub len: usize,
    /// The request target.
    pub path: Range<usize>,
    /// Each header's name and value.
    pub headers: Vec<(HeaderName, Range<usize>)>,
    /// The body's length (`Content-Length`, 0 without one).
    pub body: usize,
    /// HTTP/1.0 (only a `GET` may be: [`Serves::Gets`]).
    pub http10: bool,
}

/// What the bytes read so far hold.
#[derive(Debug)]
pub enum Parsed {
    /// Not a whole head yet.
    Partial,
    /// A head the caller serves.
    Head(Head),
    /// Something for hyper.
    Other,
}

/// Which requests a caller serves itself; everything else is [`Parsed::Other`], for hyper.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Serves {
    /// HTTP/1.1 `POST`s in origin form, framed by at most one `Content-Length`, kept alive:
    /// the HTTP/1 loop (`server::h1`).
    Posts,
    /// Body-less `GET`s over HTTP/1.0 or 1.1, in origin or absolute form: the SSE socket
    /// writer ([`super::sse_conn`]).
    Gets,
}

/// Parses the head of a `POST` at the start of `buf`, when it is whole ([`Serves::Posts`]).
#[inline]
pub fn parse(buf: &[u8]) -> Parsed {
    parse_as(buf, Serves::Posts)
}

/// Parses the head at the start of `buf`, when it is whole, for a caller that `serves` those
/// requests. Both of the gateway's own HTTP/1 paths read heads here, by the same rules but for
/// what each serves: no `Transfer-Encoding`, `Expect` or `Upgrade`, at most `MAX_HEADERS`
/// lines within `MAX_HEAD` bytes.
#[inline(always)]
pub fn parse_as(buf: &[u8], serves: Serves) -> Parsed {
    // Header slots left uninitialised: httparse fills what it uses (48 zeroed slots cost more
    // than parsing a short head), as `outbound::h1` reads answers.
    let mut slots =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    // A head is served within `MAX_HEAD` however it arrives: a longer one is handed over when a
    // read ends past the bound, so it is when it arrives whole too.
    let len = match req.parse_with_uninit_headers(buf, &mut slots) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD => n,
        Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => return Parsed::Partial,
        _ => return Parsed::Other,
    };
    let (Some(method), Some(version), Some(path)) = (req.method, req.version, req.path) else {
        return Parsed::Other;
    };
    let ours = match serves {
        Serves::Posts => method == "POST" && version == 1 && path.starts_with('/'),
        Serves::Gets => method == "GET",
    };
    if !ours {
        return Parsed::Other;
    }
    let at = |s: &[u8]| {
        let start = s.as_ptr() as usize - buf.as_ptr() as usize;
        start..start + s.len()
    };
    let mut body = None;
    let mut headers = Vec::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        let Some(name) = header_name(h.name.as_bytes()) else {
            return Parsed::Other;
        };
        if name == header::CONTENT_LENGTH {
            if serves == Serves::Gets {
                // A GET with a body: hyper's to read.
                return Parsed::Other;
            }
            match (content_length(h.value), body) {
                (Some(n), None) => body = Some(n),
                // Malformed, or said twice: hyper's to answer.
                _ => return Parsed::Other,
            }
        } else if name == header::TRANSFER_ENCODING
            || name == header::EXPECT
            || name == header::UPGRADE
            || (name == header::CONNECTION
                && serves == Serves::Posts
                && !h.value.eq_ignore_ascii_case(b"keep-alive"))
        {
            return Parsed::Other;
        }
        headers.push((name, at(h.value)));
    }
    Parsed::Head(Head {
        len,
        path: at(path.as_bytes()),
        headers,
        body: body.unwrap_or(0),
        http10: version == 0,
    })
}

/// A header's name: the few nearly every request carries, in the spellings clients send,
/// told by their length and then one comparison each (`HeaderName::from_bytes` maps the name
/// through its table first, measured dearer: docs/performance.md); any other
/// name by it. `None` when it is no header name.
#[inline]
fn header_name(raw: &[u8]) -> Option<HeaderName> {
    // Names of no standard header are copied into an allocation by `from_bytes`; those the
    // gateway reads (API keys, trace context, request ids) are constants made when compiled
    // (`from_static` checks every byte when it runs).
    let known = match raw.len() {
        4 => matches!(raw, b"Host" | b"host").then_some(header::HOST),
        6 => matches!(raw, b"Accept" | b"accept").then_some(header::ACCEPT),
        9 => matches!(raw, b"x-api-key" | b"X-Api-Key" | b"X-API-Key").then_some(X_API_KEY),
        10 => match raw {
            b"User-Agent" | b"user-agent" => Some(header::USER_AGENT),
            b"tracestate" | b"Tracestate" => Some(TRACESTATE),
            _ => None,
        },
        11 => matches!(raw, b"traceparent" | b"Traceparent").then_some(TRACEPARENT),
        12 => match raw {
            b"Content-Type" | b"content-type" => Some(header::CONTENT_TYPE),
            b"x-request-id" | b"X-Request-Id" | b"X-Request-ID" => Some(X_REQUEST_ID),
            _ => None,
        },
        13 => matches!(raw, b"Authorization" | b"authorization").then_some(header::AUTHORIZATION),
        14 => {
            matches!(raw, b"Content-Length" | b"content-length").then_some(header::CONTENT_LENGTH)
        }
        _ => None,
    };
    match known {
        Some(name) => Some(name),
        None => HeaderName::from_bytes(raw).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Option<Head> {
        match parse(text.as_bytes()) {
            Parsed::Head(h) => Some(h),
            _ => None,
        }
    }

    #[test]
    fn names_read_without_a_copy_are_the_names_from_bytes_gives() {
        for raw in [
            "x-api-key",
            "X-Api-Key",
            "X-API-Key",
            "traceparent",
            "Traceparent",
            "tracestate",
            "Tracestate",
            "x-request-id",
            "X-Request-Id",
            "X-Request-ID",
            "Host",
            "host",
            "authorization",
            "Authorization",
            "Content-Type",
            "content-type",
            "Content-Length",
            "content-length",
            "User-Agent",
            "user-agent",
            "Accept",
            "accept",
            "HOST",
            "CONTENT-TYPE",
            "x-other",
            "Content-Lengths",
        ] {
            assert_eq!(
                header_name(raw.as_bytes()),
                HeaderName::from_bytes(raw.as_bytes()).ok(),
                "{raw}"
            );
        }
        assert_eq!(header_name(b"bad name"), None);
    }

    #[test]
    fn takes_a_keep_alive_post_with_a_length() {
        let text = "POST /rpc?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\nConnection: keep-alive\r\n\r\n{\"a\":1}";
        let h = head(text).expect("served here");
        assert_eq!(&text[h.path.clone()], "/rpc?x=1");
        assert_eq!(h.body, 12);
        assert_eq!(h.len, text.find("\r\n\r\n").unwrap() + 4);
        assert_eq!(h.headers.len(), 3);
        assert_eq!(h.headers[0].0, "host");
        assert_eq!(&text[h.headers[1].1.clone()], "12");
    }

    #[test]
    fn leaves_what_it_does_not_serve_to_hyper() {
        for text in [
            "GET /rpc HTTP/1.1\r\n\r\n",
            "POST /rpc HTTP/1.0\r\nContent-Length: 2\r\n\r\n",
            "POST /rpc HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            "POST /rpc HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
            "POST /rpc HTTP/1.1\r\nConnection: close\r\nContent-Length: 2\r\n\r\n",
            "POST /rpc HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n",
            "POST /rpc HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n",
            "POST /rpc HTTP/1.1\r\nContent-Length: +2\r\n\r\n",
            "POST http://a/rpc HTTP/1.1\r\n\r\n",
            "POST /rpc HTTP/1.1\r\nbad header\r\n\r\n",
        ] {
            assert!(matches!(parse(text.as_bytes()), Parsed::Other), "{text}");
        }
    }

    #[test]
    fn waits_for_a_whole_head_but_not_beyond_the_limit() {
        assert!(matches!(
            parse(b"POST /rpc HTTP/1.1\r\nHost: a\r\n"),
            Parsed::Partial
        ));
        let long = format!("POST /rpc HTTP/1.1\r\nx: {}", "a".repeat(MAX_HEAD));
        assert!(matches!(parse(long.as_bytes()), Parsed::Other));
        // Whole, a head past the bound goes to hyper too; one of exactly the bound is served.
        let long = format!("POST /rpc HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        assert!(matches!(parse(long.as_bytes()), Parsed::Other));
        let pad = MAX_HEAD - "POST /rpc HTTP/1.1\r\nx: \r\n\r\n".len();
        let exact = format!("POST /rpc HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(pad));
        assert!(matches!(parse(exact.as_bytes()), Parsed::Head(h) if h.len == MAX_HEAD));
    }

    #[test]
    fn gets_over_http_1_0_or_1_1_without_a_body_are_the_sse_writers() {
        let text = "GET /events?taskId=a HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
        let Parsed::Head(h) = parse_as(text.as_bytes(), Serves::Gets) else {
            panic!("a plain GET is served");
        };
        assert_eq!(&text[h.path.clone()], "/events?taskId=a");
        assert!(!h.http10);
        let Parsed::Head(h) = parse_as(b"GET http://x/events HTTP/1.0\r\n\r\n", Serves::Gets)
        else {
            panic!("the absolute form, over HTTP/1.0");
        };
        assert!(h.http10);
        // What the SSE writer refuses is checked where it reads heads (`sse_conn`).
        assert!(matches!(parse(b"GET /rpc HTTP/1.1\r\n\r\n"), Parsed::Other));
    }
}
