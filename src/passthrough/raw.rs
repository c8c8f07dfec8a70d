//! The pass-through's heads kept as the bytes they came in, for the requests the HTTP/1 loop
//! reads whole ([`crate::server`]'s `h1`): the client's head read where it lies (its upstream
//! head is [`head`](super::head)'s, the same function as for a request read into a header
//! map), and the client's answer head written from the upstream's, neither through a header
//! map: hop-by-hop headers (RFC 9110 §7.6.1, those named in `Connection` too) left out, `Via`
//! extended.
//!
//! Pure byte work; the exchange is [`exchange::relay`](super::exchange::relay)'s.

use std::ops::Range;

use axum::http::{header, HeaderName, StatusCode};

use super::head::Lines;
use crate::http::forwarded::{self, Values};
use crate::wire::head_writer::{header_line, status_line};

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

impl Lines for Request<'_> {
    #[inline]
    fn lines(&self, mut f: impl FnMut(&HeaderName, &[u8])) {
        for (name, value) in self.headers {
            f(name, &self.bytes[value.clone()]);
        }
    }

    fn first(&self, name: &HeaderName) -> Option<&[u8]> {
        self.get(name)
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
