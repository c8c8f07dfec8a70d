//! The pass-through's raw relay (`passthrough::upstream_request`, over `passthrough::raw`'s
//! `request_head`): a client's request head in, the upstream's request out, as the HTTP/1 loop
//! relays a `POST` it read whole.
//!
//! Input: byte 0 picks the mode and the hop: bit 0, the head as the loop passes it (read by its
//! own parser, `server::h1_head::parse`, served there, a plain target, the body arrived whole:
//! the only heads that reach the relay) or any head httparse reads (whatever its method, target
//! and headers, so the relay's rules are exercised past the loop's filter); bits 1-2, the client's
//! address (none, IPv4, IPv6, IPv4-mapped IPv6); bit 3, TLS; bit 4, a trusted proxy. The rest is
//! what the client sent: head, then body.
//!
//! Asserts, besides "no panic":
//! - the output is the head then the body unchanged, and the head is well-formed: httparse reads
//!   all of it, every line ends in CR LF, `POST`, the client's target, HTTP/1.1, exactly one
//!   `host`, the upstream's authority;
//! - no hop-by-hop header crosses: none of `Connection`, `Keep-Alive`, `Proxy-Connection`, `TE`,
//!   `Trailer`, `Transfer-Encoding`, `Upgrade`, `Proxy-Authenticate`, `Proxy-Authorization`, and
//!   no client header named in the client's `Connection` (the lines this hop writes itself:
//!   `host`, `content-length`, `traceparent`, `via`, `forwarded`, `x-forwarded-*`, are this
//!   hop's, not the client's);
//! - `Content-Length` and `Transfer-Encoding` are never both there; at most one
//!   `Content-Length`, equal to the body's length, present when the client sent one or a body;
//! - every other client header crosses, in order, with its value as sent (`tracestate` and the
//!   forwarding headers excepted: they depend on the trace and on trust).
#![no_main]
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::ops::Range;

use http::HeaderName;
use libfuzzer_sys::fuzz_target;
use wiregate::passthrough::raw::{plain_target, Request};
use wiregate::passthrough::{upstream_request, Origin};
use wiregate::http::request_head::{parse, Parsed};

const AUTHORITY: &str = "up.example:8443";

const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authenticate",
    "proxy-authorization",
];

/// Lines this hop writes itself.
const OWN: [&str; 8] = [
    "host",
    "content-length",
    "traceparent",
    "via",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-host",
];

/// A client's head: its target and headers (name, value range) within `wire`, and its length.
struct Head {
    len: usize,
    target: Range<usize>,
    headers: Vec<(HeaderName, Range<usize>)>,
    body: Range<usize>,
}

/// As the HTTP/1 loop hands a head to the relay, or `None` when it does not.
fn from_loop(wire: &[u8]) -> Option<Head> {
    let Parsed::Head(h) = parse(wire) else {
        return None;
    };
    if !plain_target(&wire[h.path.clone()]) || wire.len() < h.len + h.body {
        return None;
    }
    Some(Head {
        len: h.len,
        target: h.path,
        headers: h.headers,
        body: h.len..h.len + h.body,
    })
}

/// Any head httparse reads whole, its names valid header names; the body is what follows (up to
/// a `Content-Length` when one is there and fits).
fn from_httparse(wire: &[u8]) -> Option<Head> {
    let mut slots = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut slots);
    let httparse::Status::Complete(len) = req.parse(wire).ok()? else {
        return None;
    };
    let at = |s: &[u8]| {
        let start = s.as_ptr() as usize - wire.as_ptr() as usize;
        start..start + s.len()
    };
    let mut headers = Vec::new();
    let mut end = wire.len();
    for h in req.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes()).ok()?;
        if name == http::header::CONTENT_LENGTH {
            if let Some(n) = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.parse::<usize>().ok())
            {
                end = end.min(len.saturating_add(n));
            }
        }
        headers.push((name, at(h.value)));
    }
    Some(Head {
        len,
        target: at(req.path?.as_bytes()),
        headers,
        body: len..end,
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, wire)) = data.split_first() else {
        return;
    };
    let head = if flags & 1 == 0 {
        from_loop(wire)
    } else {
        from_httparse(wire)
    };
    let Some(head) = head else {
        return;
    };
    let peer: Option<SocketAddr> = match (flags >> 1) & 3 {
        0 => None,
        1 => Some("192.0.2.7:5000".parse().unwrap()),
        2 => Some("[2001:db8::7]:5000".parse().unwrap()),
        _ => Some("[::ffff:192.0.2.8]:5000".parse().unwrap()),
    };
    let origin = Origin {
        peer,
        tls: flags & 8 != 0,
        edits: None,
    };
    let trusted = flags & 16 != 0;
    let req = Request {
        bytes: &wire[..head.len],
        target: head.target.clone(),
        headers: &head.headers,
    };
    let body = &wire[head.body.clone()];
    let mut out = Vec::new();
    upstream_request(&mut out, &req, body, AUTHORITY, origin, trusted);

    // The head, then the body as it came.
    assert!(out.ends_with(body), "the body is passed on unchanged");
    let up = &out[..out.len() - body.len()];
    for (i, &b) in up.iter().enumerate() {
        match b {
            b'\n' => assert!(
                i > 0 && up[i - 1] == b'\r',
                "a bare LF in the upstream head"
            ),
            b'\r' => assert!(
                up.get(i + 1) == Some(&b'\n'),
                "a bare CR in the upstream head"
            ),
            _ => {}
        }
    }
    let mut slots = [httparse::EMPTY_HEADER; 128];
    let mut parsed = httparse::Request::new(&mut slots);
    let status = parsed.parse(up);
    assert!(
        matches!(status, Ok(httparse::Status::Complete(n)) if n == up.len()),
        "httparse reads the upstream head whole: {status:?}\n{}",
        String::from_utf8_lossy(up)
    );
    assert_eq!(parsed.method, Some("POST"));
    assert_eq!(parsed.version, Some(1));
    assert_eq!(
        parsed.path.map(str::as_bytes),
        Some(&wire[head.target.clone()])
    );

    // Names in the client's `Connection`.
    let named: Vec<String> = head
        .headers
        .iter()
        .filter(|(n, _)| n == http::header::CONNECTION)
        .flat_map(|(_, v)| wire[v.clone()].split(|b| *b == b','))
        .map(|t| String::from_utf8_lossy(t.trim_ascii()).to_ascii_lowercase())
        .collect();

    let out_headers: Vec<(String, &[u8])> = parsed
        .headers
        .iter()
        .map(|h| (h.name.to_ascii_lowercase(), h.value))
        .collect();
    let count = |name: &str| out_headers.iter().filter(|(n, _)| n == name).count();
    assert_eq!(count("host"), 1, "one host");
    assert!(out_headers.contains(&("host".to_owned(), AUTHORITY.as_bytes())));
    for (n, _) in &out_headers {
        assert!(
            !HOP_BY_HOP.contains(&n.as_str()),
            "hop-by-hop {n} crossed:\n{}",
            String::from_utf8_lossy(up)
        );
        assert!(
            OWN.contains(&n.as_str()) || !named.contains(n),
            "{n}, named in Connection, crossed:\n{}",
            String::from_utf8_lossy(up)
        );
    }
    assert!(
        count("content-length") == 0 || count("transfer-encoding") == 0,
        "Content-Length and Transfer-Encoding both"
    );
    assert!(count("content-length") <= 1, "one Content-Length at most");
    let client_cl = head
        .headers
        .iter()
        .any(|(n, _)| n == http::header::CONTENT_LENGTH);
    match out_headers.iter().find(|(n, _)| n == "content-length") {
        Some((_, v)) => assert_eq!(*v, body.len().to_string().as_bytes()),
        None => assert!(body.is_empty() && !client_cl, "a body without a length"),
    }

    // The client's end-to-end headers, in order, as sent.
    let kept = |n: &str| {
        !HOP_BY_HOP.contains(&n)
            && !OWN.contains(&n)
            && n != "tracestate"
            && !named.iter().any(|c| c == n)
    };
    let mut rest = out_headers.iter();
    for (n, v) in &head.headers {
        if !kept(n.as_str()) {
            continue;
        }
        let v = &wire[v.clone()];
        assert!(
            rest.any(|(on, ov)| on == n.as_str() && *ov == v),
            "{n} did not cross as sent:\n{}",
            String::from_utf8_lossy(up)
        );
    }
});
