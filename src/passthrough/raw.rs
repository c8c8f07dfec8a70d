//! The pass-through's heads kept as the bytes they came in, for the requests the HTTP/1 loop
//! reads whole ([`crate::server`]'s `h1`): the upstream's request head written from the
//! client's head, and the client's answer head from the upstream's, neither through a header
//! map. The rules are [`forwarded`]'s, the same as for a request hyper read: hop-by-hop headers
//! (RFC 9110 §7.6.1, those named in `Connection` too) left out both ways, `Via`, `Forwarded`
//! and `X-Forwarded-*` told (a client's own claims kept only from a trusted proxy), the trace
//! passed on with a span of this hop.
//!
//! Pure byte work; the exchange is [`exchange::relay`](super::exchange::relay)'s.

use std::ops::Range;

use axum::http::{header, HeaderName, StatusCode};

use crate::http::forwarded::{self, Hop, Values};
use crate::http::trace::{self, TraceContext};
use crate::wire::head::{header_line, status_line};

/// A request head the HTTP/1 loop read: its bytes, and each header's name and where its value
/// lies in them.
pub struct Request<'a> {
    /// The head's bytes.
    pub bytes: &'a [u8],
    /// Where the request target lies.
    pub target: Range<usize>,
    /// Its headers, in order.
    pub headers: &'a [(HeaderName, Range<usize>)],
}

impl Values for Request<'_> {
    fn each(&self, name: &HeaderName, f: &mut dyn FnMut(&[u8])) {
        for (n, v) in self.headers {
            if n == name {
                f(&self.bytes[v.clone()]);
            }
        }
    }
}

impl Request<'_> {
    /// The first value of `name`.
    pub fn get(&self, name: &HeaderName) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| &self.bytes[v.clone()])
    }
}

/// Whether a request target is one the loop passes on as it came: origin form, visible ASCII
/// without the characters a URI never carries unescaped. (Anything else takes the general
/// path, whose URI parser decides.)
pub fn plain_target(target: &[u8]) -> bool {
    /// The bytes a plain target may hold, looked up rather than tested one by one.
    const PLAIN: [bool; 256] = {
        let mut t = [false; 256];
        let mut b = 0;
        while b < 256 {
            let c = b as u8;
            t[b] = c.is_ascii_graphic()
                && !matches!(
                    c,
                    b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}'
                );
            b += 1;
        }
        t
    };
    target.first() == Some(&b'/') && target.iter().all(|&b| PLAIN[usize::from(b)])
}

/// Writes the upstream's head for `req`, a `POST` with a body of `length` bytes (`None`: the
/// client sent no `Content-Length` and no body): the request line, the upstream's `authority`
/// as `Host`, the client's end-to-end headers, this hop's forwarding lines (when `told`: the
/// client's address is known), the `traceparent` of a new span (of the client's trace, or of a
/// new one), the length; through the blank line.
pub(crate) fn request_head(
    out: &mut Vec<u8>,
    req: &Request<'_>,
    authority: &str,
    hop: &Hop<'_>,
    told: bool,
    length: Option<usize>,
    edits: &Option<std::sync::Arc<super::Edits>>,
) {
    let (ctx, client_traced) = TraceContext::for_parent(req.get(&trace::TRACEPARENT));
    out.extend_from_slice(b"POST ");
    out.extend_from_slice(&req.bytes[req.target.clone()]);
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    let named = if req.has(&header::CONNECTION) {
        forwarded::connection_named(req)
    } else {
        Vec::new()
    };
    for (name, value) in req.headers {
        if forwarded::copied(name, &named, hop)
            && trace::copied(name, client_traced)
            && super::Edits::keeps(edits, name)
        {
            header_line(out, name.as_str().as_bytes(), &req.bytes[value.clone()]);
        }
    }
    if told {
        forwarded::write_request_hop(out, req, hop);
    }
    super::Edits::write_identity(edits, out);
    out.extend_from_slice(b"traceparent: ");
    out.extend_from_slice(&ctx.traceparent_bytes());
    out.extend_from_slice(b"\r\n");
    if let Some(n) = length {
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// Writes the client's answer head from the upstream's (`head`, whose headers lie at
/// `headers`: name, value): the status line, the end-to-end headers as the upstream wrote
/// them, and `Via` with this hop added; not the framing, `Date` or the connection's lines,
/// which are the client connection's writer's (the body's framing is left out here). Returns
/// whether the upstream sent a `Date`.
pub(crate) fn answer_head(
    out: &mut Vec<u8>,
    status: StatusCode,
    head: &[u8],
    headers: &[(Range<usize>, Range<usize>)],
) -> bool {
    status_line(out, b"HTTP/1.1", status);
    let is = |r: &Range<usize>, name: &HeaderName| {
        head[r.clone()].eq_ignore_ascii_case(name.as_str().as_bytes())
    };
    let connection: Vec<&[u8]> = headers
        .iter()
        .filter(|(n, _)| is(n, &header::CONNECTION))
        .map(|(_, v)| &head[v.clone()])
        .collect();
    let named = |name: &[u8]| {
        connection.iter().any(|v| {
            v.split(|b| *b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(name))
        })
    };
    let mut dated = false;
    let mut via: Vec<&[u8]> = Vec::new();
    for (n, v) in headers {
        let name = &head[n.clone()];
        if forwarded::is_hop_by_hop_name(name)
            || is(n, &header::CONTENT_LENGTH)
            || (!connection.is_empty() && named(name))
        {
            continue;
        }
        if is(n, &header::VIA) {
            via.push(&head[v.clone()]);
            continue;
        }
        dated |= is(n, &header::DATE);
        header_line(out, name, &head[v.clone()]);
    }
    out.extend_from_slice(b"via: ");
    for v in via {
        out.extend_from_slice(v);
        out.extend_from_slice(b", ");
    }
    out.extend_from_slice(b"1.1 wiregate\r\n");
    dated
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where each header of a head lies (name, value), as the HTTP/1 loop and the exchange
    /// record them.
    fn lines(head: &str) -> Vec<(Range<usize>, Range<usize>)> {
        let mut out = Vec::new();
        let mut at = head.find("\r\n").unwrap() + 2;
        for line in head[at..].split("\r\n").take_while(|l| !l.is_empty()) {
            let colon = line.find(':').unwrap();
            let start = colon + 1 + (line.len() - colon - 1 - line[colon + 1..].trim_start().len());
            out.push((at..at + colon, at + start..at + line.len()));
            at += line.len() + 2;
        }
        out
    }

    #[test]
    fn the_answer_keeps_its_end_to_end_headers_and_adds_the_hop() {
        let head = "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nContent-Length: 3\r\nVia: 1.0 edge\r\nX-End: kept\r\nDate: Mon, 30 Nov 2026 00:00:00 GMT\r\n\r\n";
        let mut out = Vec::new();
        let dated = answer_head(&mut out, StatusCode::CREATED, head.as_bytes(), &lines(head));
        assert!(dated);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nX-End: kept\r\nDate: Mon, 30 Nov 2026 00:00:00 GMT\r\nvia: 1.0 edge, 1.1 wiregate\r\n"
        );
    }

    #[test]
    fn the_request_goes_with_the_hop_told_and_its_hop_headers_left_out() {
        let head = "POST /a2a?x=1 HTTP/1.1\r\nhost: gw:8080\r\nconnection: keep-alive\r\ncontent-length: 2\r\nx-forwarded-for: 6.6.6.6\r\ntraceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\ntracestate: a=1\r\nx-end: kept\r\n\r\n";
        let headers: Vec<(HeaderName, Range<usize>)> = lines(head)
            .into_iter()
            .map(|(n, v)| (HeaderName::from_bytes(&head.as_bytes()[n]).unwrap(), v))
            .collect();
        let req = Request {
            bytes: head.as_bytes(),
            target: 5..13,
            headers: &headers,
        };
        let hop = Hop {
            peer: "192.0.2.7:5000".parse().unwrap(),
            proto: "http",
            version: "1.1",
            trusted: false,
            host: Some("gw:8080"),
        };
        let mut out = Vec::new();
        request_head(&mut out, &req, "up:9", &hop, true, Some(2), &None);
        let text = String::from_utf8(out).unwrap();
        let (before, after) = text.split_once("traceparent: ").unwrap();
        assert_eq!(
            before,
            "POST /a2a?x=1 HTTP/1.1\r\nhost: up:9\r\ntracestate: a=1\r\nx-end: kept\r\n\
             x-forwarded-for: 192.0.2.7\r\nforwarded: for=192.0.2.7;proto=http;host=\"gw:8080\"\r\n\
             x-forwarded-proto: http\r\nx-forwarded-host: gw:8080\r\nvia: 1.1 wiregate\r\n"
        );
        // The client's trace, a new span of this hop, its flags.
        assert!(after.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"));
        assert!(!after.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"));
        assert!(after.ends_with("-01\r\ncontent-length: 2\r\n\r\n"));
        // Without a valid parent, a new trace and no `tracestate`.
        let head2 = head.replace("00-4bf92f3577", "00-4bf92fzz77");
        let req = Request {
            bytes: head2.as_bytes(),
            target: 5..9,
            headers: &headers,
        };
        let mut out = Vec::new();
        request_head(&mut out, &req, "up:9", &hop, true, None, &None);
        let text = String::from_utf8(out).unwrap();
        assert!(
            !text.contains("tracestate") && !text.contains("4bf92f"),
            "{text}"
        );
        assert!(text.starts_with("POST /a2a HTTP/1.1\r\n"));
        assert!(!text.contains("content-length"));
        // A client whose address is unknown: its claims are not passed on, none are made.
        let mut out = Vec::new();
        request_head(&mut out, &req, "up:9", &hop, false, None, &None);
        let text = String::from_utf8(out).unwrap();
        assert!(!text.contains("forward") && !text.contains("via"), "{text}");
    }

    #[test]
    fn only_plain_origin_form_targets_go_as_they_came() {
        for b in 0..=255u8 {
            let by_rule = b.is_ascii_graphic() && !b"\"<>\\^`{|}".contains(&b);
            assert_eq!(plain_target(&[b'/', b]), by_rule, "{b}");
        }
        assert!(plain_target(b"/a2a?x=%20y&z=1"));
        assert!(!plain_target(b"*"));
        assert!(!plain_target(b"http://a/b"));
        assert!(!plain_target(b"/a{b}"));
        assert!(!plain_target("/é".as_bytes()));
    }
}
