//! The upstream's request head, written by one function for both relay paths: the HTTP/1
//! loop's `POST`s kept as bytes ([`raw`](super::raw)) and the requests read into a header map.
//! The rules a request-smuggling probe tries live here once: hop-by-hop headers (RFC 9110
//! §7.6.1, those named in `Connection` too) left out, `Host` the upstream's, the body's
//! framing this hop's own, and the hop told ([`forwarded`]'s `Forwarded`, `X-Forwarded-*` and
//! `Via`, a client's own claims kept only from a trusted proxy).
//!
//! Pure byte work; the exchange is [`exchange`](super::exchange)'s.

use std::net::SocketAddr;

use axum::http::{header, HeaderMap, HeaderName};

use super::{Edits, Origin};
use crate::http::forwarded::{self, Hop, Values};
use crate::http::trace::{self, TraceContext};
use crate::wire::head_writer::header_line;

/// A request's headers, each line in turn, as the head is written from them: a header map, or
/// the HTTP/1 loop's head kept as the client's bytes.
pub(crate) trait Lines: Values {
    /// Calls `f` with every header line, name and value; lines of one name in their order.
    fn lines(&self, f: impl FnMut(&HeaderName, &[u8]));

    /// The first value of `name`.
    fn first(&self, name: &HeaderName) -> Option<&[u8]>;
}

impl Lines for HeaderMap {
    #[inline]
    fn lines(&self, mut f: impl FnMut(&HeaderName, &[u8])) {
        for (name, value) in self {
            f(name, value.as_bytes());
        }
    }

    #[inline]
    fn first(&self, name: &HeaderName) -> Option<&[u8]> {
        self.get(name).map(|v| v.as_bytes())
    }
}

/// How the request's body is framed upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No framing line: no body, and the client sent no `Content-Length`.
    None,
    /// `Content-Length: n`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// What the upstream's head says that is not one of the client's header lines: the request
/// line, where it goes, the protocol switch asked for and the body's framing.
pub(crate) struct Outline<'a> {
    /// The request's method.
    pub method: &'a str,
    /// Its target (origin form), as it goes upstream.
    pub target: &'a [u8],
    /// The upstream's authority, its `Host`.
    pub authority: &'a str,
    /// The HTTP version the client spoke, as `Via` writes it (`"1.1"`, `"2"`).
    pub version: &'static str,
    /// The authority the client asked for when its headers carry no `Host` (HTTP/2's
    /// `:authority`).
    pub uri_host: Option<&'a str>,
    /// `Some` for an upgrade being tunnelled, with the client's `Upgrade` value.
    pub upgrade: Option<Option<&'a [u8]>>,
    /// The body's framing.
    pub framing: Framing,
}

/// The hop a request from `origin` adds (`trusted`: its peer is a trusted proxy): who
/// connected, over what, asking for which host (the client's `Host`, when it is visible
/// ASCII, else `uri_host`).
pub(crate) fn hop<'a>(
    headers: &'a impl Lines,
    origin: &Origin,
    trusted: bool,
    version: &'static str,
    uri_host: Option<&'a str>,
) -> Hop<'a> {
    let host = headers
        .first(&header::HOST)
        .and_then(crate::http::headers::visible)
        .or(uri_host);
    Hop {
        peer: origin.peer.unwrap_or(SocketAddr::from(([0, 0, 0, 0], 0))),
        proto: if origin.tls { "https" } else { "http" },
        version,
        trusted: origin.peer.is_some() && trusted,
        host,
    }
}

/// Writes the upstream's request head for a client's request with `headers`, from `origin`
/// (`trusted`: a trusted proxy), carrying `trace` (`client_traced`: the client sent a valid
/// `traceparent`, whose `tracestate` then goes on): the request line; the upstream's authority
/// as `Host`; the client's end-to-end headers (not hop-by-hop, not those `Connection` names,
/// not the framing, not what the gate drops, not the forwarding headers this hop rewrites);
/// this hop's forwarding lines when the client's address is known; the gate's identity line;
/// the `traceparent`; the upgrade asked for; the framing; through the blank line.
pub(crate) fn request_head(
    out: &mut Vec<u8>,
    outline: &Outline<'_>,
    headers: &impl Lines,
    origin: &Origin,
    trusted: bool,
    (trace, client_traced): (&TraceContext, bool),
) {
    let hop = hop(headers, origin, trusted, outline.version, outline.uri_host);
    out.extend_from_slice(outline.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(outline.target);
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(outline.authority.as_bytes());
    out.extend_from_slice(b"\r\n");
    let named = if headers.has(&header::CONNECTION) {
        forwarded::connection_named(headers)
    } else {
        Vec::new()
    };
    headers.lines(|name, value| {
        if forwarded::copied(name, &named, &hop)
            && trace::copied(name, client_traced)
            && Edits::keeps(&origin.edits, name)
        {
            header_line(out, name.as_str().as_bytes(), value);
        }
    });
    if origin.peer.is_some() {
        forwarded::write_request_hop(out, headers, &hop);
    }
    Edits::write_identity(&origin.edits, out);
    out.extend_from_slice(b"traceparent: ");
    out.extend_from_slice(&trace.traceparent_bytes());
    out.extend_from_slice(b"\r\n");
    if let Some(proto) = outline.upgrade {
        out.extend_from_slice(b"connection: upgrade\r\n");
        if let Some(p) = proto {
            out.extend_from_slice(b"upgrade: ");
            out.extend_from_slice(p);
            out.extend_from_slice(b"\r\n");
        }
    }
    match outline.framing {
        Framing::None => {}
        Framing::Length(n) => {
            out.extend_from_slice(b"content-length: ");
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        Framing::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::ops::Range;

    use proptest::prelude::*;

    use super::*;
    use crate::passthrough::raw::Request;

    /// A head's lines and where each header lies in its text (name, value range).
    fn laid_out(lines: &[(&str, String)]) -> (String, Vec<(HeaderName, Range<usize>)>) {
        let mut text = String::from("POST /a2a?x=1 HTTP/1.1\r\n");
        let mut at = Vec::new();
        for (name, value) in lines {
            text.push_str(name);
            text.push_str(": ");
            let start = text.len();
            text.push_str(value);
            at.push((
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                start..text.len(),
            ));
            text.push_str("\r\n");
        }
        text.push_str("\r\n");
        (text, at)
    }

    fn map_of(lines: &[(&str, String)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in lines {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    fn origin(peer: Option<&str>, tls: bool) -> Origin {
        Origin {
            peer: peer.map(|p| p.parse().unwrap()),
            tls,
            edits: None,
        }
    }

    fn outline(length: Option<u64>) -> Outline<'static> {
        Outline {
            method: "POST",
            target: b"/a2a?x=1",
            authority: "up:9",
            version: "1.1",
            uri_host: None,
            upgrade: None,
            framing: length.map_or(Framing::None, Framing::Length),
        }
    }

    /// The head written from the client's bytes, as the HTTP/1 loop's relay writes it.
    fn from_bytes(
        lines: &[(&str, String)],
        origin: &Origin,
        trusted: bool,
        trace: (&TraceContext, bool),
    ) -> String {
        let (text, headers) = laid_out(lines);
        let req = Request {
            bytes: text.as_bytes(),
            target: 5..13,
            headers: &headers,
        };
        let mut out = Vec::new();
        request_head(&mut out, &outline(Some(2)), &req, origin, trusted, trace);
        String::from_utf8(out).unwrap()
    }

    /// The same from a header map, as the general path writes it.
    fn from_map(
        lines: &[(&str, String)],
        origin: &Origin,
        trusted: bool,
        trace: (&TraceContext, bool),
    ) -> String {
        let mut out = Vec::new();
        let map = map_of(lines);
        request_head(&mut out, &outline(Some(2)), &map, origin, trusted, trace);
        String::from_utf8(out).unwrap()
    }

    /// A head's request line, and its header lines by name (lines of one name in their order:
    /// a header map keeps no order between names).
    fn by_name(head: &str) -> (String, BTreeMap<String, Vec<String>>) {
        let mut lines = head.split("\r\n");
        let first = lines.next().unwrap().to_owned();
        let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for line in lines.take_while(|l| !l.is_empty()) {
            let (k, v) = line.split_once(": ").unwrap();
            names.entry(k.to_owned()).or_default().push(v.to_owned());
        }
        (first, names)
    }

    #[test]
    fn the_request_goes_with_the_hop_told_and_its_hop_headers_left_out() {
        let lines: Vec<(&str, String)> = [
            ("host", "gw:8080"),
            ("connection", "keep-alive"),
            ("content-length", "2"),
            ("x-forwarded-for", "6.6.6.6"),
            (
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            ),
            ("tracestate", "a=1"),
            ("x-end", "kept"),
        ]
        .map(|(k, v)| (k, v.to_owned()))
        .into();
        let (text, headers) = laid_out(&lines);
        let req = Request {
            bytes: text.as_bytes(),
            target: 5..13,
            headers: &headers,
        };
        let from = origin(Some("192.0.2.7:5000"), false);
        let trace = TraceContext::for_parent(req.get(&trace::TRACEPARENT));
        let mut out = Vec::new();
        request_head(
            &mut out,
            &outline(Some(2)),
            &req,
            &from,
            false,
            (&trace.0, trace.1),
        );
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
        let fresh = TraceContext::for_parent(Some(b"00-4bf92fzz77"));
        assert!(!fresh.1);
        let text = from_bytes(&lines, &from, false, (&fresh.0, fresh.1));
        assert!(
            !text.contains("tracestate") && !text.contains("4bf92f"),
            "{text}"
        );
        // A client whose address is unknown: its claims are not passed on, none are made.
        let text = from_bytes(&lines, &origin(None, false), true, (&fresh.0, fresh.1));
        assert!(!text.contains("forward") && !text.contains("via"), "{text}");
    }

    #[test]
    fn an_upgrade_and_a_chunked_body_are_this_hops_lines() {
        let map = map_of(&[
            ("upgrade", "h2c".into()),
            ("transfer-encoding", "chunked".into()),
        ]);
        let ctx = TraceContext::for_parent(None).0;
        let mut out = Vec::new();
        let outline = Outline {
            upgrade: Some(Some(b"websocket")),
            framing: Framing::Chunked,
            method: "GET",
            ..outline(None)
        };
        request_head(
            &mut out,
            &outline,
            &map,
            &origin(None, true),
            false,
            (&ctx, false),
        );
        let text = String::from_utf8(out).unwrap();
        let (_, after) = text.split_once("traceparent: ").unwrap();
        assert!(text.starts_with("GET /a2a?x=1 HTTP/1.1\r\nhost: up:9\r\ntraceparent: "));
        assert!(after.ends_with(
            "\r\nconnection: upgrade\r\nupgrade: websocket\r\ntransfer-encoding: chunked\r\n\r\n"
        ));
    }

    /// Header names a request-smuggling probe or a forwarding chain plays with.
    const NAMES: [&str; 18] = [
        "host",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "content-length",
        "forwarded",
        "x-forwarded-for",
        "x-forwarded-proto",
        "x-forwarded-host",
        "via",
        "tracestate",
        "x-a",
        "x-b",
        "x-secret-hop",
    ];

    fn line() -> impl Strategy<Value = (&'static str, String)> {
        let value = prop_oneof![
            Just("1".to_owned()),
            Just("for=203.0.113.1".to_owned()),
            Just("gw.example:8443".to_owned()),
            Just("198.51.100.2, 203.0.113.9".to_owned()),
            Just(" x-a , x-secret-hop,close ".to_owned()),
            Just("keep-alive, X-B".to_owned()),
            Just("ünï".to_owned()),
        ];
        (prop::sample::select(&NAMES[..]), value)
    }

    proptest! {
        /// Whether read from the client's bytes or from a header map, the same request gets the
        /// same upstream head: the same lines of each name, in the same order.
        #[test]
        fn both_relay_paths_write_the_same_head(
            lines in prop::collection::vec(line(), 0..12),
            peer in prop::option::of(prop_oneof![
                Just("192.0.2.7:5000"),
                Just("[2001:db8::1]:443"),
                Just("[::ffff:10.0.0.5]:80"),
            ]),
            tls in any::<bool>(),
            trusted in any::<bool>(),
        ) {
            let from = origin(peer, tls);
            let (ctx, traced) = TraceContext::for_parent(None);
            let raw = from_bytes(&lines, &from, trusted, (&ctx, traced));
            let map = from_map(&lines, &from, trusted, (&ctx, traced));
            prop_assert_eq!(by_name(&raw), by_name(&map));
            // Nothing hop-by-hop, nothing `Connection` names, one `Host`: the upstream's.
            let (_, names) = by_name(&raw);
            prop_assert_eq!(&names["host"], &vec!["up:9".to_owned()]);
            for (name, _) in &lines {
                let named = lines.iter().any(|(n, v)| {
                    *n == "connection"
                        && v.split(',').any(|t| t.trim().eq_ignore_ascii_case(name))
                });
                if forwarded::is_hop_by_hop_name(name.as_bytes()) || named {
                    prop_assert!(!names.contains_key(*name), "{} in {}", name, raw);
                }
            }
        }
    }
}
